"""A worker resizes, punches or maps again the shared memory it holds: the trainer never dies.

Every memfd of the slots is sealed against shrinking and growing once sized (the control page also against every
other process's writes where the kernel offers F_SEAL_FUTURE_WRITE, Linux 5.1), so ftruncate() to any size fails
with EPERM and no mapping can run past a file's end: before, a worker that truncated the control memory to 0 or
4096 bytes killed the trainer with SIGBUS in 12 of 18 cases on the CPU backend and 9 of 18 on the CUDA backend.
fallocate(PUNCH_HOLE) is not stopped by those seals (only by a write seal, and the worker must write): a worker can
punch its own slot's memory, which then reads as zeros; the trainer names what happened. A changed control page
(possible on kernels without F_SEAL_FUTURE_WRITE, reproduced with _slots_weak_control_for_testing) is put back by
the trainer's next read, whose error names the change, not the honest workers.

Each case: a spawned worker holding slot 1's handle attacks every descriptor of the slots it holds, then the
trainer reads, writes, reads after a write, or closes. Handles sent to a worker that died unread leave no
descriptor in the trainer after close()."""
import gc
import multiprocessing as mp
import os
import pickle
import re

import numpy as np
import pytest

import gltensor
from gltensor import _gltensor
import slot_attack_workers
from slot_fault_workers import memfd_counts
from frames import to_host  # noqa: E402

W, H = 64, 48  # a 12 KiB slot: three pages per image, so that a page of it can be punched alone
SPAWN = mp.get_context("spawn")
RESIZES = ["truncate0", "truncate4096", "truncate8192", "grow"]
ACTIONS = ["read", "write", "read_after_write", "close"]


def image(value):
    return np.full((H, W, 4), value, np.uint8)


class Worker:
    """One spawned attack worker (slot_attack_workers.serve), reused for every case of a test: each case hands it
    the handle of new slots."""

    def __init__(self):
        self.conn, child = SPAWN.Pipe()
        self.proc = SPAWN.Process(target=slot_attack_workers.serve, args=(child,), daemon=True)
        self.proc.start()
        child.close()

    def ask(self, *cmd, timeout=120):
        self.conn.send(cmd)
        assert self.conn.poll(timeout), f"the worker did not answer {cmd[0]!r} in {timeout} s"
        answer = self.conn.recv()
        assert answer[0] == "ok", answer
        return answer[1]

    def close(self):
        try:
            self.conn.send(None)
        except OSError:
            pass
        self.proc.join(30)
        if self.proc.is_alive():
            self.proc.kill()


@pytest.fixture(scope="module")
def worker():
    w = Worker()
    yield w
    w.close()


def _case(backend, worker, attack):
    """New slots (slot 0 the trainer's, slot 1 the worker's), both written and read once, then the worker's attack.
    Returns (slots, what the attack did to each descriptor)."""
    slots = gltensor.SharedSlots(2, (W, H), backend=backend)
    worker.ask("handle", slots.handle(1))
    slots.write_host(0, image(1))
    worker.ask("write", 2)
    np.testing.assert_array_equal(to_host(slots.read()), np.stack([image(1), image(2)]))
    slots.write_host(0, image(3))
    worker.ask("write", 4)
    return slots, worker.ask("attack", attack)


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("attack", RESIZES)
def test_a_worker_cannot_resize_any_memory_of_the_slots(backend, gl, worker, attack, action):
    slots, results = _case(backend, worker, attack)
    try:
        print(attack, results)
        names = {k.split(" ")[0] for k in results}
        assert {"gltensor-slots-geometry", "gltensor-slots-control", "gltensor-slot-1"} <= names, results
        sizes = _sizes(slots)
        for what, result in results.items():
            if what.startswith("gltensor"):  # every memfd refuses (or is asked for the size it has), and keeps it
                assert result == f"EPERM ({sizes[what]} bytes)" or result == f"ok ({sizes[what]} bytes)" == \
                    f"ok ({attack.removeprefix('truncate')} bytes)", (what, result)
        expected = [image(3), image(4)]
        if action == "read":
            np.testing.assert_array_equal(to_host(slots.read()), np.stack(expected))
        elif action == "write":
            slots.write_host(0, image(5))
            worker.ask("write", 6)
        elif action == "read_after_write":
            np.testing.assert_array_equal(to_host(slots.read()), np.stack(expected))
            slots.write_host(0, image(5))
            worker.ask("write", 6)
            np.testing.assert_array_equal(to_host(slots.read()), np.stack([image(5), image(6)]))
    finally:
        slots.close()


@pytest.mark.parametrize("action", ACTIONS)
def test_a_punched_hole_reads_as_zeros_and_is_named(backend, gl, worker, action):
    # fallocate(PUNCH_HOLE) on every descriptor: the geometry and (Linux 5.1+) the control page refuse; the worker's
    # own slot's memory is punched: its record and (CPU backend) its images read as zeros.
    slots, results = _case(backend, worker, "punch")
    try:
        print(results)
        by_name = {k.split(" ")[0]: v for k, v in results.items()}
        assert by_name["gltensor-slots-geometry"].startswith("EPERM"), results
        if _control_sealed(slots):
            assert by_name["gltensor-slots-control"].startswith("EPERM"), results
        assert by_name["gltensor-slot-1"].startswith("ok"), results
        if action in ("read", "read_after_write"):
            with pytest.raises(gltensor.StaleSlotError) as e:
                slots.read()
            msg = str(e.value)
            assert re.search(r"slot 1: its record was cleared .*fallocate PUNCH_HOLE", msg), msg
            assert "slot 0" not in msg, msg  # the trainer's own slot is fresh, not blamed
        if action == "write":
            slots.write_host(0, image(5))
        if action == "read_after_write":
            # The worker writes again: its writer takes its punched record back, and the slot is fresh.
            worker.ask("write", 6)
            np.testing.assert_array_equal(to_host(slots.read()), np.stack([image(3), image(6)]))
            slots.write_host(0, image(7))
            worker.ask("write", 8)
            np.testing.assert_array_equal(to_host(slots.read()), np.stack([image(7), image(8)]))
    finally:
        slots.close()


def _sizes(slots):
    """The size of each memfd of the slots, by name, as the trainer made it."""
    mem, ctl, geo = slots._core._export()
    own = slots._core._export_slot(1)
    try:
        return {"gltensor-slots-control": os.fstat(ctl).st_size, "gltensor-slots-geometry": os.fstat(geo).st_size,
                "gltensor-slot-1": os.fstat(own).st_size}
    finally:
        for fd in (mem, ctl, geo, own):
            if fd >= 0:
                os.close(fd)


def _control_sealed(slots):
    mem, ctl, geo = slots._core._export()
    try:
        import fcntl

        return bool(fcntl.fcntl(ctl, fcntl.F_GET_SEALS) & 0x10)  # F_SEAL_FUTURE_WRITE
    finally:
        for fd in (mem, ctl, geo):
            if fd >= 0:
                os.close(fd)


def test_punched_pixels_read_as_zeros(gl, worker):
    # CPU backend: the worker punches its images (not its record) after a complete write: its slot is fresh, and the
    # trainer reads zeros there (as if it had written zeros, which it may do to its own slot); slot 0 is exact.
    slots, _ = _case("cpu", worker, "truncate0")
    try:
        results = worker.ask("attack", "punch_pixels")
        assert results.get("gltensor-slot-1", "").startswith("ok"), results
        assert slots.state(1)[0] == "fresh"
        np.testing.assert_array_equal(to_host(slots.read()), np.stack([image(3), image(0)]))
    finally:
        slots.close()


@pytest.mark.parametrize("action", ACTIONS)
def test_a_remap_changes_only_the_workers_own_slot(backend, gl, worker, action):
    slots, results = _case(backend, worker, "remap")
    try:
        print(results)
        by_name = {k.split(" ")[0]: v for k, v in results.items()}
        assert by_name["gltensor-slots-geometry"].startswith("EPERM"), results
        if _control_sealed(slots):
            assert by_name["gltensor-slots-control"].startswith("EPERM"), results
        if action == "close":
            return
        if action == "write":
            slots.write_host(0, image(5))
            return
        np.testing.assert_array_equal(to_host(slots.read()), np.stack([image(3), image(4)]))
        if action == "read_after_write":
            slots.write_host(0, image(5))
            worker.ask("write", 6)
            np.testing.assert_array_equal(to_host(slots.read()), np.stack([image(5), image(6)]))
    finally:
        slots.close()


def test_an_attacked_slots_memory_does_not_block_a_new_worker(backend, gl, worker):
    # After every attack, a worker that attaches now (a restarted one) gets its slot: nothing a process could do to
    # the memory blocks an honest attach.
    slots, _ = _case(backend, worker, "grow")
    try:
        for attack in ("truncate0", "punch", "remap", "punch_record"):
            worker.ask("attack", attack)
        worker.ask("handle", slots.handle(1))  # the old handle closed, its writer released: attach again
        worker.ask("write", 9)
        slots.write_host(0, image(10))
        np.testing.assert_array_equal(to_host(slots.read()), np.stack([image(10), image(9)]))
    finally:
        slots.close()


@pytest.mark.parametrize("attack,what", [("punch", "cleared (every byte read as zero: a hole punched in it"),
                                         ("zero_control", "overwritten"),
                                         ("poke_control", "overwritten")])
def test_a_changed_control_page_is_put_back(backend, gl, worker, attack, what):
    # Kernels before Linux 5.1 cannot seal the control page against other processes' writes: a worker that maps it
    # itself can change the read count the workers go by, or punch it out. Reproduced by leaving that seal off.
    _gltensor._slots_weak_control_for_testing(True)
    try:
        slots = gltensor.SharedSlots(2, (W, H), backend=backend)
    finally:
        _gltensor._slots_weak_control_for_testing(False)
    try:
        assert not _control_sealed(slots)
        worker.ask("handle", slots.handle(1))
        for step in range(2):
            slots.write_host(0, image(10 + step))
            worker.ask("write", 20 + step)
            np.testing.assert_array_equal(to_host(slots.read()), np.stack([image(10 + step), image(20 + step)]))
        results = worker.ask("attack", attack)
        assert {k.split(" ")[0]: v for k, v in results.items()}["gltensor-slots-control"].startswith("ok"), results
        # Both write by the changed read count: the read refuses, naming what was done to the control page and
        # restoring it; it does not blame the workers.
        slots.write_host(0, image(12))
        worker.ask("write", 22)
        with pytest.raises(gltensor.StaleSlotError) as e:
            slots.read()
        msg = str(e.value)
        assert f"the slots' control page was {what}" in msg and "by a process holding its descriptor" in msg, msg
        assert "has not written since the last read" not in msg, msg
        # Not stalled for good: the next writes are fresh again.
        for step in range(2):
            slots.write_host(0, image(13 + step))
            worker.ask("write", 23 + step)
            np.testing.assert_array_equal(to_host(slots.read()), np.stack([image(13 + step), image(23 + step)]))
    finally:
        slots.close()


def _read_nothing(conn):
    """A worker that dies before it receives anything."""
    conn.close()


def test_handles_never_received_leave_no_descriptor_after_close(backend):
    # A handle sent after the worker started travels through multiprocessing's resource sharer, which keeps a
    # duplicate of each descriptor until the receiver fetches it: a receiver that died never does. close() takes
    # those duplicates back. Before: after 5 cycles, 10 descriptors (about 63 MB of slots) held for good.
    gc.collect()
    before = memfd_counts()[0]
    p = SPAWN.Process(target=_read_nothing, args=(None,))
    p.start()
    p.join(60)
    for cycle in range(5):
        slots = gltensor.SharedSlots(2, (W, H), backend=backend)
        parent, child = SPAWN.Pipe()
        child.close()  # the receiving end is gone, as with a worker that died
        try:
            parent.send(slots.handle(cycle % 2))
        except OSError:
            pass  # a broken pipe after the pickling: the duplicates were registered all the same
        pickle.dumps(slots.handle(1 - cycle % 2))  # pickled, never sent at all
        assert memfd_counts()[0] > before
        slots.close()
        parent.close()
        gc.collect()
        assert memfd_counts()[0] == before, f"cycle {cycle}: the trainer holds descriptors of closed slots"


def test_a_handle_received_after_close_says_so(backend):
    slots = gltensor.SharedSlots(2, (W, H), backend=backend)
    data = pickle.dumps(slots.handle(0))
    slots.close()
    with pytest.raises(gltensor.ClosedError, match="arrived after the trainer closed its shared slots"):
        pickle.loads(data)
