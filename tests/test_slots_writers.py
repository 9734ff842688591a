"""One writer per slot, and each handle writes its own slot only.

The slots' seqlock assumes one writer per record: two processes writing one slot tore frames that the trainer
returned as fresh (34 and 36 in two runs of a review), and a paused second writer wrote into a set handed out as a
zero-copy view. So a writer takes its slot at attach (an owner word in the slot's record, compare-exchanged): a
second process is refused with SlotsBusyError naming the holder until the holder closes its writer or exits; a
forked child that inherited the writer is refused while its parent holds the slot, and once it holds it, it is
named as itself. A pickled SlotHandle carries its own slot's memory only: no path a worker's objects offer writes
another slot. tests/test_slots_two_writers.py races two processes holding one slot's handle."""
import multiprocessing as mp
import os
import pickle
import signal

import numpy as np
import pytest

import gltensor
from gltensor import _gltensor
import slot_attack_workers
from frames import to_host  # noqa: E402

W, H = 37, 23
SPAWN = mp.get_context("spawn")


def image(value):
    return np.full((H, W, 4), value, np.uint8)


class Holder:
    """A spawned process holding `handle`: writes `value` at once, then on request (slot_attack_workers.hold_and_write)."""

    def __init__(self, handle, value):
        self.conn, child = SPAWN.Pipe()
        self.proc = SPAWN.Process(target=slot_attack_workers.hold_and_write, args=(handle, value, child), daemon=True)
        self.proc.start()
        child.close()
        self.first = self.answer()

    def answer(self, timeout=120):
        assert self.conn.poll(timeout), "the worker did not answer"
        return self.conn.recv()

    def write(self, value):
        self.conn.send(("write", value))
        return self.answer()

    def release(self):
        self.conn.send(("release",))
        return self.answer()

    def close(self):
        try:
            self.conn.send(None)
        except OSError:
            pass
        self.proc.join(30)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(10)


@pytest.fixture
def holders():
    made = []

    def start(handle, value):
        h = Holder(handle, value)
        made.append(h)
        return h

    yield start
    for h in made:
        h.close()


def test_a_second_process_is_refused_until_the_first_lets_go(backend, gl, holders):
    slots = gltensor.SharedSlots(2, (W, H), backend=backend)
    try:
        a = holders(slots.handle(0), 0x11)
        assert a.first == ("ok", a.proc.pid)
        b = holders(slots.handle(0), 0xEE)  # the same slot's handle, in another process
        kind, name, msg = b.first
        assert (kind, name) == ("error", "SlotsBusyError"), b.first
        assert f"shared slot 0 already has a writer: pid {a.proc.pid}, which still runs" in msg, msg
        slots.write_host(1, image(3))
        np.testing.assert_array_equal(to_host(slots.read()), np.stack([image(0x11), image(3)]))
        assert a.release() == ("ok", None)  # the first closes its writer (its handle stays)
        assert b.write(0xEE) == ("ok", b.proc.pid)
        slots.write_host(1, image(4))
        np.testing.assert_array_equal(to_host(slots.read()), np.stack([image(0xEE), image(4)]))
        kind, name, msg = a.write(0x22)  # now the first one is the second writer
        assert (kind, name) == ("error", "SlotsBusyError") and f"pid {b.proc.pid}" in msg, msg
    finally:
        slots.close()


def test_a_writer_that_died_is_taken_over(backend, gl, holders):
    # A restarted worker gets its slot back: the dead writer's hold ends with its process (SIGKILL included).
    slots = gltensor.SharedSlots(1, (W, H), backend=backend)
    try:
        a = holders(slots.handle(0), 0x11)
        assert a.first[0] == "ok"
        os.kill(a.proc.pid, signal.SIGKILL)
        a.proc.join(30)
        b = holders(slots.handle(0), 0x22)
        assert b.first == ("ok", b.proc.pid)
        np.testing.assert_array_equal(to_host(slots.read()), np.stack([image(0x22)]))
        assert slots.state(0) == ("stale", b.proc.pid)
    finally:
        slots.close()


def test_a_second_writer_in_one_process_is_refused(backend, gl):
    slots = gltensor.SharedSlots(2, (W, H), backend=backend)
    ctx = None
    try:
        if backend == "cuda":
            ctx = slots._client.headless_context()
        slots.write_host(0, image(1))  # the trainer's own writer of slot 0
        mem, ctl, geo = slots._core._export()
        own = slots._core._export_slot(0)
        try:
            with pytest.raises(gltensor.SlotsBusyError, match="slot 0 already has a writer in this process"):
                _gltensor._SlotWriter(mem, ctl, geo, own, 0)
            slots._client.writer(0).close()
            w = _gltensor._SlotWriter(mem, ctl, geo, own, 0)  # free now
            w.write_host(image(2))
            w.close()
        finally:
            for fd in (mem, ctl, geo, own):
                if fd >= 0:
                    os.close(fd)
    finally:
        slots.close()
        if ctx is not None:
            ctx.close()


def test_a_forked_child_is_refused_then_named_as_itself(gl):
    # CPU backend (a child forked from a process that renders must not use GL; host writes need none here).
    from conftest import fork_or_skip

    fork_or_skip("fork")
    slots = gltensor.SharedSlots(1, (W, H), backend="cpu")
    try:
        parent, child = SPAWN.Pipe()
        p = SPAWN.Process(target=slot_attack_workers.fork_and_write, args=(slots.handle(0), child), daemon=True)
        p.start()
        child.close()
        assert parent.poll(120)
        kind, (worker, forked, first, second, code) = parent.recv()
        p.join(30)
        assert code == 0
        # While the worker's writer is attached, the child it forked is refused, naming its parent.
        assert first.startswith("SlotsBusyError") and f"pid {worker} (this process's parent)" in first, first
        assert "inherited that writer through fork" in first, first
        # Once the worker let go, the child writes, as itself: its pid, its start time (it is gone now: its own
        # exit, not its parent's, is what the trainer reports).
        assert second == "written", second
        np.testing.assert_array_equal(to_host(slots.read()), np.stack([image(0x33)]))
        assert slots.state(0) == ("writer_gone", forked)
        with pytest.raises(gltensor.StaleSlotError, match=rf"slot 0: its writer \(pid {forked}\) has exited"):
            slots.read()
    finally:
        slots.close()


def test_a_pickled_handle_writes_its_own_slot_only(backend, gl):
    slots = gltensor.SharedSlots(3, (W, H), backend=backend)
    ctx = None
    try:
        if backend == "cuda":
            ctx = slots._client.headless_context()
        for i in range(3):
            slots.write_host(i, image(i + 1))
        slots._client.writer(0).close()  # the worker's slot
        slots._client.writer(1).close()  # the trainer lets go of slot 1 too: only the handle's rights keep it out
        parent, child = SPAWN.Pipe()
        p = SPAWN.Process(target=slot_attack_workers.try_every_path_to_another_slot,
                          args=(slots.handle(0), 1, child), daemon=True)
        p.start()
        child.close()
        assert parent.poll(120)
        answer = parent.recv()
        p.join(30)
        assert answer[0] == "ok", answer
        results, memfds = answer[1]
        print(results)
        # It holds its own slot's memory and no other slot's. On the CUDA backend it also holds the one device
        # allocation of every slot's pixels (the driver's "cuda-memory" memfd, exported for GL to import): the
        # trust model in docs/shared-slots.md says what a worker can do with it.
        want = ["gltensor-slot-0", "gltensor-slots-control", "gltensor-slots-geometry"]
        assert memfds == (["cuda-memory"] if backend == "cuda" else []) + want, memfds
        for path, result in results.items():
            assert result != "written", f"{path} wrote slot 1"
            assert "InvalidArgumentError" in result and ("not this process's to write" in result
                                                         or "slot 0's memory, not slot 1's" in result), (path, result)
        # Slot 1 holds the trainer's image, written by the trainer; the worker's own slot its own image.
        assert slots.state(1) == ("fresh", os.getpid())
        np.testing.assert_array_equal(to_host(slots.read()), np.stack([image(0x11), image(2), image(3)]))
    finally:
        slots.close()
        if ctx is not None:
            ctx.close()


def test_a_handle_pickles_its_own_slots_descriptor_only(backend):
    slots = gltensor.SharedSlots(3, (W, H), backend=backend)
    try:
        back = pickle.loads(pickle.dumps(slots.handle(2)))
        assert list(back.client.slots) == [2]
        assert sorted(back.client._fds.slots) == [2]
        with pytest.raises(gltensor.InvalidArgumentError, match=r"slot 0 is not this process's to write.* slot\(s\) 2"):
            back.client.write_host(0, image(1))
        back.close()
        # Handles pickled together share one client, which holds their slots and no other.
        a, b = pickle.loads(pickle.dumps([slots.handle(0), slots.handle(2)]))
        assert a.client is b.client and list(a.client.slots) == [0, 2]
        a.close(), b.close()
        # The whole SharedSlots carries every slot (what Gymnasium hands each worker).
        whole = pickle.loads(pickle.dumps(slots))
        assert list(whole.slots) == [0, 1, 2]
        whole.close()
    finally:
        slots.close()
