"""The two-writer race: two spawned processes hold one 512² slot's handle and write it as fast as they can, A all
0x11 / 0x22 and B all 0xEE / 0xDD alternately, each letting go of the slot after a random 1-20 writes so that the two
take turns all through the run (the other is refused with SlotsBusyError meanwhile). The trainer writes its own slot
before each read and reads in a loop, by copy and by zero-copy view; a view is kept across the next read. Every
frame returned must hold each slot whole from one write (one value in every pixel), the trainer's slot exactly as
written, and a view must not change while it lives. Before one writer per slot was enforced, two such writers tore
34 and 36 frames returned as fresh in two runs (one held 102,400 bytes of one writer and 946,176 of the other).

GLTENSOR_RACE_SECONDS (default 5) sets the race's length (300 for the 5-minute target)."""
import multiprocessing as mp
import os
import re
import time

import numpy as np
import pytest

import gltensor
import slot_attack_workers
from frames import to_host  # noqa: E402

SIDE = 512
SECONDS = float(os.environ.get("GLTENSOR_RACE_SECONDS", "5"))
VALUES = {"A": (0x11, 0x22), "B": (0xEE, 0xDD)}
# Beside other tests' GPU work most reads would land in a write: the race runs alone (as tests/test_slots_race.py).
pytestmark = pytest.mark.alone


def whole(image):
    """The one value every pixel of `image` has, or None when it holds parts of two writes."""
    first = int(image.flat[0])
    return first if np.all(image == first) else None


def test_two_processes_holding_one_slot_never_tear_a_frame(backend, gl):
    slots = gltensor.SharedSlots(2, (SIDE, SIDE), backend=backend)
    ctx = mp.get_context("spawn")
    stop, report = ctx.Event(), ctx.Queue()
    procs = []
    try:
        for name in ("A", "B"):
            ready = ctx.Event()
            p = ctx.Process(target=slot_attack_workers.race_writer,
                            args=(slots.handle(0), VALUES[name], 0.0005, stop, ready, report), daemon=True)
            p.start()
            procs.append(p)
            assert ready.wait(120), "a writer did not start in 120 s"
        own = [np.zeros((SIDE, SIDE, 4), np.uint8), np.full((SIDE, SIDE, 4), 255, np.uint8)]
        seen = {v: 0 for pair in VALUES.values() for v in pair}
        clean = torn = refused = views = overwritten = 0
        previous = None  # (a view kept across the next read, the value it showed)
        step = 0
        end = time.monotonic() + SECONDS
        while time.monotonic() < end:
            step += 1
            slots.write_host(1, own[step & 1])
            view = step % 2 == 0
            try:
                frame = slots.read(copy=not view)
            except gltensor.StaleSlotError as e:
                # A refusal names the slot being written (0), never the trainer's, and takes no record for corrupt.
                msg = str(e)
                assert re.search(r"slot 0", msg) and "slot 1" not in msg and "corrupt" not in msg, msg
                refused += 1
                continue
            got = to_host(frame)
            value = whole(got[0])
            np.testing.assert_array_equal(got[1], own[step & 1], err_msg="the trainer's own slot changed")
            if value is None or value not in seen:
                torn += 1
            else:
                clean += 1
                seen[value] += 1
            if previous is not None:
                pview, pvalue = previous
                if whole(to_host(pview)[0]) != pvalue:
                    overwritten += 1
                previous = None
                del pview
            if view:
                views += 1
                previous = (frame, value)
            del got, frame
        del previous
    finally:
        stop.set()
        counts = []
        for _ in procs:
            try:
                counts.append(report.get(timeout=60))
            except Exception:  # noqa: BLE001 - a writer that died says nothing
                pass
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
        slots.close()
    writes = {pid: (w, r) for pid, w, r in counts}
    print(f"two writers, {SECONDS:g} s on {backend}: {clean} clean frames ({views} views), {torn} torn, "
          f"{overwritten} views overwritten, {refused} reads refused; frames by value {seen}; "
          f"writes and refusals per writer {writes}")
    assert torn == 0 and overwritten == 0, (torn, overwritten)
    # Both writers delivered frames: they took turns all through the race, the refusals in between.
    assert sum(seen[v] for v in VALUES["A"]) > 0 and sum(seen[v] for v in VALUES["B"]) > 0, seen
    assert len(writes) == 2 and all(w > 0 and r > 0 for w, r in writes.values()), writes
