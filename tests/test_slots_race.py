"""The torn-frame race (issue 34): spawned workers rewrite their 512² slots as fast as they can, alternately all 0
and all 255, while the trainer reads in a loop. Every read must either return each slot whole from one write (every
pixel of a slot 0, or every pixel 255) or refuse with StaleSlotError naming the slot; a zero-copy view must stay
whole after read() returned, for as long as it lives. Before the seqlock/claim protocol of slots_shared.h a 5 s run
returned 114 torn frames out of 663 and overwrote 2 of 338 views.

GLTENSOR_RACE_SECONDS (default 5) lengthens each run (300 for the issue's 5-minute target on the GPU machine)."""
import collections
import gc
import multiprocessing as mp
import os
import re
import sys
import time
import weakref

import numpy as np
import pytest

import gltensor
from frames import to_host  # noqa: E402

SIDE = 512
# Races against a writer that pauses only briefly: beside other tests' GPU work (the GPU machine runs the suite 8
# wide) most reads land in a write and are refused, so they run alone there.
pytestmark = pytest.mark.alone

SECONDS = float(os.environ.get("GLTENSOR_RACE_SECONDS", "5"))


def rewrite(handle, backend, side, pause, stop, ready):
    """Worker: rewrites its slot all 0 / all 255, alternately, until `stop` is set."""
    ctx = handle.headless_context() if backend == "cuda" else None
    images = [np.zeros((side, side, 4), np.uint8), np.full((side, side, 4), 255, np.uint8)]
    handle.write_host(images[0])
    ready.set()
    k = 0
    try:
        while not stop.is_set():
            k ^= 1
            handle.write_host(images[k])
            if pause:
                time.sleep(pause * (k + 1))  # gaps of two lengths: reads land at every phase of the writes
    except gltensor.ClosedError:
        pass
    finally:
        handle.close()
        if ctx is not None:
            ctx.close()


def whole(image):
    """The one value every pixel of `image` has (0 or 255), or None when the slot holds parts of two writes."""
    first = int(image.flat[0])
    if first not in (0, 255) or not np.all(image == first):
        return None
    return first


class Race:
    """Slot 0 is rewritten by a spawned worker without pause; slot 1 by the trainer itself before each read, so
    that a read that returns must show slot 1 exactly as written then (the other slots' images stay exact)."""

    def __init__(self, backend, count=2, side=SIDE, own=True, pause=0.0):
        self.slots = gltensor.SharedSlots(count, (side, side), backend=backend)
        self.own = [np.zeros((side, side, 4), np.uint8), np.full((side, side, 4), 255, np.uint8)] if own else None
        self.step = 0
        ctx = mp.get_context("spawn")
        self.stop = ctx.Event()
        self.procs = []
        readies = []
        for i in range(count - 1 if own else count):
            ready = ctx.Event()
            p = ctx.Process(target=rewrite, args=(self.slots.handle(i), backend, side, pause, self.stop, ready), daemon=True)
            p.start()
            self.procs.append(p)
            readies.append(ready)
        for r in readies:
            assert r.wait(120), "a worker did not start in 120 s"
        self.clean = self.torn = self.stale = 0

    def write_own(self):
        """The trainer's write of the last slot; returns the value all its pixels must have in the next read."""
        if self.own is None:
            return None
        self.step += 1
        self.slots.write_host(len(self.slots) - 1, self.own[self.step & 1])
        return 255 * (self.step & 1)

    def refused(self, err):
        # The refusal names the slot (or slots) it refuses, and an honest worker's record is never taken for corrupt.
        assert re.search(r"slot \d", str(err)) and "corrupt" not in str(err), str(err)
        self.stale += 1

    def close(self):
        self.stop.set()
        for p in self.procs:
            p.join(30)
            if p.is_alive():
                p.kill()
        self.slots.close()


@pytest.fixture
def race(backend):
    made = []

    def start(**kwargs):
        r = Race(backend, **kwargs)
        made.append(r)
        return r

    yield start
    for r in made:
        r.close()


def test_copies_are_never_torn(race):
    # The worker rewrites with gaps of 0.5 and 1 ms between writes (a real env writes once per step): reads land in
    # writes (refused: the seqlock at work) and in the gaps (clean). Without gaps a CUDA writer beside the suite's
    # other GPU work left no clean read in 5 s on an H200 (0 torn, 8,273 refused): a seqlock starves its reader
    # under a writer that never pauses, which no env does.
    r = race(pause=0.0005)
    end = time.monotonic() + SECONDS
    while time.monotonic() < end:
        own = r.write_own()
        try:
            frame = to_host(r.slots.read())
        except gltensor.StaleSlotError as e:
            r.refused(e)
            continue
        values = [whole(frame[i]) for i in range(frame.shape[0])]
        assert values[-1] in (own, None), "the trainer's own slot shows an older write"
        if None in values:
            r.torn += 1
        else:
            r.clean += 1
    print(f"copies: {r.clean} clean, {r.torn} torn, {r.stale} refused in {SECONDS:g} s")
    assert r.torn == 0, f"{r.torn} torn frames ({r.clean} clean, {r.stale} refused)"
    assert r.clean > 0, f"no clean read in {SECONDS:g} s ({r.stale} refused)"


def test_views_stay_whole_while_they_live(race):
    r = race(count=1, side=2048, own=False, pause=0.0005)
    end = time.monotonic() + SECONDS
    previous = None  # (view, its array, the values it showed when read returned)
    overwritten = views = 0
    recent = collections.deque(maxlen=4)  # weak references to the last views: each must die once dropped
    view = array = None
    while time.monotonic() < end:
        try:
            view = r.slots.read(copy=False)
        except gltensor.StaleSlotError as e:
            r.refused(e)
            continue
        views += 1
        recent.append(weakref.ref(view))
        array = to_host(view)
        values = [whole(array[i]) for i in range(array.shape[0])]
        if None in values:
            r.torn += 1
        else:
            r.clean += 1
        if previous is not None:
            # The earlier view lived across this read (and the workers' writes since): it must be unchanged.
            pview, parray, pvalues = previous
            now = to_host(pview)
            if [whole(now[i]) for i in range(now.shape[0])] != pvalues:
                overwritten += 1
            del pview, parray, now  # the view before the previous one must die before the next read
        previous = (view, array, values)  # the one before is dropped here: at most two views alive
    del previous, view, array
    gc.collect()
    alive = [w() for w in recent if w() is not None]
    # A view still alive here would keep the slots allocated after close (memcheck: a leak at exit).
    assert not alive, [(sys.getrefcount(v) - 2, [type(x).__name__ for x in gc.get_referrers(v)]) for v in alive]
    print(f"views: {r.clean} clean, {r.torn} torn, {r.stale} refused, {overwritten} of {views} overwritten later")
    assert r.torn == 0 and overwritten == 0, (r.torn, overwritten, views)
    assert r.clean > 0
