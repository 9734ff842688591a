"""Faults across processes (issue 34, item 3), with real spawned processes: a worker SIGKILLed mid-write, a
worker SIGSTOPped, the trainer SIGKILLed, thousands of create/close cycles with a worker attaching each time,
a handle passed on to a grandchild. Each fault ends in a clear error within a bounded time or a documented wait
(the vector env's own), never a hang; descriptors and mappings of the slots' memory are counted in every
process and stay flat. docs/reliability.md's fault table names these tests.

GLTENSOR_CYCLES sets the number of create/close cycles (1000 by default, about 1 s on the CPU backend; the GPU
run uses 10000)."""

import functools
import multiprocessing as mp
import os
import signal
import time

import numpy as np
import pytest

import gltensor
import slot_fault_workers
from slot_fault_workers import memfd_counts, pattern
from frames import to_host  # noqa: E402

W, H = 97, 61
CYCLES = int(os.environ.get("GLTENSOR_CYCLES", "1000"))
SPAWN = mp.get_context("spawn")


class Line:
    """The test's line to one worker: ask() sends a command and waits a bounded time for the answer."""

    def __init__(self, conn, proc=None):
        self.conn, self.proc, self.pid = conn, proc, None

    def answer(self, timeout=120):
        if not self.conn.poll(timeout):
            raise TimeoutError(f"worker {self.pid} did not answer in {timeout} s")
        return self.conn.recv()

    def ask(self, *cmd, timeout=120):
        self.conn.send(cmd)
        return self.answer(timeout)


@pytest.fixture
def procs():
    """Processes (or pids) the test started; every one still alive is killed at the end."""
    started = []
    yield started
    for p in started:
        pid = p if isinstance(p, int) else p.pid
        try:
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, TypeError):
            pass
        if not isinstance(p, int):
            p.join(10)


def start_worker(slots, k, procs, daemon=True):
    parent, child = SPAWN.Pipe()
    p = SPAWN.Process(target=slot_fault_workers.serve, args=(slots.handle(k), child), daemon=daemon)
    p.start()
    child.close()
    procs.append(p)
    line = Line(parent, p)
    ok = line.answer()
    assert ok[0] == "ok", ok
    line.pid = ok[1]
    return line


def expected(count, step, width=W, height=H):
    return np.stack([pattern(k, step, width, height) for k in range(count)])


def catch_mid_write(slots, k, pid, limit=30.0):
    """SIGSTOPs worker `pid` while its write into slot k is under way (its `writing` flag set); True once caught."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if slots.state(k)[0] == "writing":
            os.kill(pid, signal.SIGSTOP)
            time.sleep(0.05)  # the stop is delivered
            if slots.state(k)[0] == "writing":
                return True
            os.kill(pid, signal.SIGCONT)
    return False


# ------------------------------------------------------------------ a worker SIGKILLed mid-write


@pytest.mark.parametrize("reaped", [True, False], ids=["reaped", "zombie"])
def test_worker_killed_mid_write_is_named_and_nothing_waits(backend, procs, reaped):
    # A large slot: a write is long, so the worker spends most of its time inside one (writing flag set).
    size = (2048, 1024)
    slots = gltensor.SharedSlots(2, size, backend=backend)
    lines = [start_worker(slots, k, procs) for k in range(2)]
    for line in lines:
        assert line.ask("write", 0) == ("ok", None)
    np.testing.assert_array_equal(to_host(slots.read()), expected(2, 0, *size))
    assert lines[1].ask("write", 1) == ("ok", None)
    assert lines[0].ask("write_loop") == ("ok", "looping")
    assert catch_mid_write(slots, 0, lines[0].pid), "never saw worker 0 inside a write in 30 s"
    os.kill(lines[0].pid, signal.SIGKILL)
    if reaped:
        lines[0].proc.join(10)
    else:  # not reaped yet by its parent (this process): a zombie
        while _state(lines[0].pid) != "Z":
            time.sleep(0.01)
    start = time.monotonic()
    # Whatever the core makes of it, the read refuses at once, naming the slot (never waits, never a torn image).
    with pytest.raises(gltensor.StaleSlotError, match=rf"slot 0: .*pid {lines[0].pid}") as refused:
        slots.read()
    assert time.monotonic() - start < 2.0
    assert slots.state(1)[0] == "fresh"
    lines[0].proc.join(10)
    # The killed writer is named as such (a zombie too: its write will never end).
    assert f"slot 0: its writer (pid {lines[0].pid}) has exited" in str(refused.value)
    assert slots.state(0) == ("writer_gone", lines[0].pid)
    assert slots.state(1)[0] == "fresh"  # the other slot is untouched by the failed read
    # A new worker takes the slot over; every pixel of both slots is exact again.
    lines[0] = start_worker(slots, 0, procs)
    for line in lines:
        assert line.ask("write", 2) == ("ok", None)
    np.testing.assert_array_equal(to_host(slots.read()), expected(2, 2, *size))
    slots.close()


# ------------------------------------------------------------------ a worker SIGSTOPped


def test_stopped_worker_never_blocks_the_read(backend, procs):
    size = (2048, 1024)
    slots = gltensor.SharedSlots(2, size, backend=backend)
    lines = [start_worker(slots, k, procs) for k in range(2)]
    for line in lines:
        assert line.ask("write", 0) == ("ok", None)
    slots.read()
    # Stopped between writes: the read names the slot at once.
    os.kill(lines[0].pid, signal.SIGSTOP)
    assert lines[1].ask("write", 1) == ("ok", None)
    start = time.monotonic()
    with pytest.raises(gltensor.StaleSlotError,
                       match=rf"1 of 2 .*slot 0: its writer \(pid {lines[0].pid}\) has not written since the last"):
        slots.read()
    assert time.monotonic() - start < 2.0
    os.kill(lines[0].pid, signal.SIGCONT)
    assert lines[0].ask("write", 1) == ("ok", None)
    np.testing.assert_array_equal(to_host(slots.read()), expected(2, 1, *size))
    # Stopped inside a write (its writing flag set): the read says the write is under way, and does not wait.
    assert lines[1].ask("write", 2) == ("ok", None)
    assert lines[0].ask("write_loop") == ("ok", "looping")
    assert catch_mid_write(slots, 0, lines[0].pid), "never saw worker 0 inside a write in 30 s"
    start = time.monotonic()
    with pytest.raises(gltensor.StaleSlotError, match=rf"slot 0: a write by pid {lines[0].pid} is under way"):
        slots.read()
    assert time.monotonic() - start < 2.0
    assert slots.state(0) == ("writing", lines[0].pid) and slots.state(1)[0] == "fresh"
    slots.close()


def pattern_async_vector_env(backend):
    """Gymnasium's AsyncVectorEnv of two spawned slot_envs.PatternEnv workers writing shared slots."""
    gymnasium = pytest.importorskip("gymnasium")
    from slot_envs import PatternEnv

    fns = [functools.partial(PatternEnv, backend=backend, read_as="numpy") for _ in range(2)]
    return gymnasium.vector.AsyncVectorEnv(fns, shared_memory=True, context="spawn")


def test_stopped_worker_in_async_vector_env_times_out_in_its_own_wait(backend, procs):
    """AsyncVectorEnv waits for every worker's reply (its own wait, not the slots'): step_wait(timeout=...)
    raises multiprocessing.TimeoutError; without a timeout it waits as long as the worker is stopped."""
    envs = pattern_async_vector_env(backend)
    try:
        envs.reset(seed=0)
        stopped = envs.processes[1].pid
        procs.append(stopped)
        os.kill(stopped, signal.SIGSTOP)
        envs.step_async(np.zeros(2, dtype=np.int64))
        start = time.monotonic()
        with pytest.raises(mp.TimeoutError):
            envs.step_wait(timeout=3)
        assert time.monotonic() - start < 10
        # The slots themselves never wait: slot 1 is named, slot 0 was written.
        with pytest.raises(gltensor.StaleSlotError, match=rf"slot 1: its writer \(pid {stopped}\) has not written"):
            envs.observations.read()
    finally:
        os.kill(envs.processes[1].pid, signal.SIGCONT)
        envs.close(terminate=True)


def test_killed_worker_in_async_vector_env(backend, procs):
    """Gymnasium's step sends to the dead worker's pipe and fails at once (BrokenPipeError, the vector env's
    own); the slots name the dead worker; close(terminate=True) ends the rest. Gymnasium leaves the slots to
    the SlotBatch (envs.observations): closed by its close() or when it is collected."""
    envs = pattern_async_vector_env(backend)
    try:
        envs.reset(seed=0)
        dead = envs.processes[1].pid
        os.kill(dead, signal.SIGKILL)
        envs.processes[1].join(10)
        start = time.monotonic()
        with pytest.raises((BrokenPipeError, EOFError, ConnectionResetError)):
            envs.step(np.zeros(2, dtype=np.int64))
        assert time.monotonic() - start < 10
        with pytest.raises(gltensor.StaleSlotError, match=rf"slot 1: its writer \(pid {dead}\) has exited"):
            envs.observations.read()
    finally:
        envs.close(terminate=True)
    envs.observations.close()
    assert envs.observations.slots._core.closed


# ------------------------------------------------------------------ the trainer SIGKILLed


def start_trainer(backend, procs, count=2, size=(W, H)):
    """A trainer in a process of its own, with `count` workers of its own (grandchildren of this test)."""
    lines, ends = [], []
    for _ in range(count):
        parent, child = SPAWN.Pipe()
        lines.append(Line(parent))
        ends.append(child)
    report, report_end = SPAWN.Pipe()
    trainer = SPAWN.Process(target=slot_fault_workers.trainer, args=(count, size, backend, ends, report_end))
    trainer.start()
    procs.append(trainer)
    for end in ends:
        end.close()
    assert report.poll(120), "the trainer did not start"
    trainer_pid, worker_pids = report.recv()
    procs.extend(worker_pids)
    for line, pid in zip(lines, worker_pids):
        ok = line.answer()
        assert ok == ("ok", pid), ok
        line.pid = pid
    return trainer, lines, report


def test_trainer_killed_leaves_no_memory_behind(backend, procs):
    """The trainer dies with SIGKILL: once the workers close their handles, no process holds a descriptor or a
    mapping of the slots' memory (a memfd is freed with its last holder: nothing named outlives them)."""
    trainer, lines, report = start_trainer(backend, procs)  # report: kept open (the trainer waits on it)
    for line in lines:
        assert line.ask("write", 0) == ("ok", None)
        fds, maps, _ = line.ask("counts")[1]
        assert fds >= 1 and maps >= 1  # what the worker holds while attached
    os.kill(trainer.pid, signal.SIGKILL)
    trainer.join(10)
    assert trainer.exitcode == -signal.SIGKILL
    for line in lines:
        answer = line.ask("close", timeout=30)
        assert answer[0] == "ok", answer
        fds, maps, _ = answer[1]
        assert (fds, maps) == (0, 0), f"worker {line.pid} still holds {fds} descriptors, {maps} mappings"
    for line in lines:
        line.conn.send(None)
    for pid in (line.pid for line in lines):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}") and _state(pid) != "Z":
            time.sleep(0.05)
        assert not os.path.exists(f"/proc/{pid}") or _state(pid) == "Z", f"worker {pid} did not exit"


def _state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


@pytest.mark.parametrize("reaped", [True, False], ids=["reaped", "zombie"])
def test_trainer_killed_fails_every_workers_next_write(backend, procs, reaped):
    """The trainer dies with SIGKILL: each worker's next write raises ClosedError naming the trainer, at once.
    "zombie": the trainer's parent (this test) has not reaped it yet, as a supervisor that is busy would."""
    trainer, lines, report = start_trainer(backend, procs)  # report: kept open (the trainer waits on it)
    for line in lines:
        assert line.ask("write", 0) == ("ok", None)
    os.kill(trainer.pid, signal.SIGKILL)
    if reaped:
        trainer.join(10)
    else:
        while _state(trainer.pid) != "Z":
            time.sleep(0.01)
    try:
        for line in lines:
            start = time.monotonic()
            answer = line.ask("write", 1, timeout=30)
            assert time.monotonic() - start < 10
            assert answer[0] == "error" and answer[1] == "ClosedError", answer
            assert f"the trainer process (pid {trainer.pid}) has exited" in answer[2], answer
    finally:
        trainer.join(10)


@pytest.mark.gpu
@pytest.mark.alone
def test_trainer_killed_frees_the_device_memory(procs):
    """CUDA slots of 2 x 3 sets x 4096² RGBA8 (384 MiB): once the trainer is SIGKILLed and its workers have
    closed their handles and exited, the device's free memory is back where it was (within 32 MiB). Reads the
    whole device's free memory: run it with nothing else on the GPU."""
    torch = pytest.importorskip("torch")
    if not gltensor.cuda_available():
        pytest.skip("no usable CUDA device")
    mib = 1 << 20
    torch.cuda.init()
    free_before = torch.cuda.mem_get_info()[0]
    trainer, lines, report = start_trainer("cuda", procs, size=(4096, 4096))
    for line in lines:
        assert line.ask("write", 0) == ("ok", None)
    held = free_before - torch.cuda.mem_get_info()[0]
    assert held >= 384 * mib, f"only {held / mib:.0f} MiB in use with the slots alive"
    os.kill(trainer.pid, signal.SIGKILL)
    trainer.join(10)
    for line in lines:
        assert line.ask("close", timeout=60)[0] == "ok"
        line.conn.send(None)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        left = free_before - torch.cuda.mem_get_info()[0]
        if left < 32 * mib and not any(os.path.exists(f"/proc/{line.pid}") and _state(line.pid) != "Z"
                                       for line in lines):
            break
        time.sleep(0.2)
    print(f"device memory in use: {held / mib:.0f} MiB with the slots, {left / mib:.1f} MiB after every process "
          "exited")
    assert left < 32 * mib, f"{left / mib:.0f} MiB still in use after the trainer and its workers exited"


# ------------------------------------------------------------------ create/close cycles, counted in both processes


def _counts_here():
    import gc

    gc.collect()
    return memfd_counts()


def test_create_close_cycles_with_a_worker_attaching_stay_flat(backend, procs):
    parent, child = SPAWN.Pipe()
    p = SPAWN.Process(target=slot_fault_workers.cycler, args=(child,), daemon=True)
    p.start()
    procs.append(p)
    child.close()
    line = Line(parent, p)

    def cycle(i):
        slots = gltensor.SharedSlots(1, (W, H), backend=backend)
        parent.send(slots.handle(0))
        answer = line.answer()
        assert answer[0] == "ok", answer
        if i % 50 == 0 or i == CYCLES - 1:  # every pixel, now and then (a read costs more than a cycle here)
            np.testing.assert_array_equal(to_host(slots.read()), pattern(0, i, W, H)[None])
        slots.close()
        return answer[1]

    warm = 5
    for i in range(warm):  # what the first uses load stays loaded
        attached, worker_first = cycle(i)
    assert attached[0] >= 1 and attached[1] >= 1, attached  # the count sees the slots' memory while attached
    trainer_first = _counts_here()
    start = time.monotonic()
    for i in range(warm, CYCLES):
        attached_last, worker_last = cycle(i)
    elapsed = time.monotonic() - start
    trainer_last = _counts_here()
    parent.send(None)
    p.join(30)
    assert attached_last == attached, (attached, attached_last)
    assert worker_first[:2] == (0, 0) and worker_last == worker_first, (worker_first, worker_last)
    assert trainer_last == trainer_first, (trainer_first, trainer_last)
    print(f"{CYCLES - warm} cycles in {elapsed:.1f} s ({elapsed / (CYCLES - warm) * 1e3:.2f} ms each); trainer "
          f"(memfd fds, memfd maps, fds) {trainer_first} -> {trainer_last}, worker {worker_first} -> {worker_last}")


# ------------------------------------------------------------------ a handle passed on to a grandchild


def test_handle_passed_on_to_a_grandchild_writes(backend, procs):
    slots = gltensor.SharedSlots(2, (W, H), backend=backend)
    lines = [start_worker(slots, k, procs, daemon=False) for k in range(2)]  # a daemon may not have children
    assert lines[0].ask("write", 3) == ("ok", None)
    answer = lines[1].ask("spawn_child", 3, timeout=240)  # worker 1 hands its handle to a process of its own
    assert answer[0] == "ok", answer
    grandchild = answer[1]
    assert grandchild not in (os.getpid(), lines[1].pid)
    assert slots.state(1) == ("fresh", grandchild)
    np.testing.assert_array_equal(to_host(slots.read()), expected(2, 3))
    assert lines[1].ask("write", 4) == ("ok", None)  # the worker's own handle still writes
    assert lines[0].ask("write", 4) == ("ok", None)
    np.testing.assert_array_equal(to_host(slots.read()), expected(2, 4))
    slots.close()


# ------------------------------------------------------------------ SB3: a worker SIGKILLed between steps


def test_slot_vec_env_worker_killed_between_steps(backend):
    """SB3's step waits for every worker's reply: a killed worker's pipe ends (EOFError, SB3's own wait),
    and close() still frees the slots."""
    pytest.importorskip("stable_baselines3")
    from slot_envs import PatternEnv

    from gltensor.sb3 import SlotVecEnv

    venv = SlotVecEnv([functools.partial(PatternEnv, box=True, backend=backend) for _ in range(2)],
                      start_method="spawn", backend=backend)
    try:
        venv.reset()
        os.kill(venv.processes[0].pid, signal.SIGKILL)
        venv.processes[0].join(10)
        start = time.monotonic()
        with pytest.raises((EOFError, ConnectionResetError, BrokenPipeError)):
            venv.step(np.zeros(2, dtype=np.int64))
        assert time.monotonic() - start < 10
        with pytest.raises(gltensor.StaleSlotError, match=r"slot 0: its writer \(pid \d+\) has exited"):
            venv.read()
    finally:
        venv.close()
    assert venv.slots._core.closed
