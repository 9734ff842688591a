"""Zero-copy reads of shared slots (``SharedSlots.read(copy=False)``): the set the workers just wrote, handed out
as it is stored. Every pixel is compared; the lifetime rules (a viewed set is never written while the view or a
tensor made from it lives, nor while work its consumers queued may still read it) are checked on both backends.

Most tests write the slots from this process (``write_host``: a memcpy on the CPU backend, GL buffer writes into
the imported memory on the CUDA backend); one runs real GL worker processes."""
import gc
import re

import numpy as np
import pytest

import gltensor
from slot_workers import pattern
from test_slots import W, H, expected, to_host


def images(count, step, w=W, h=H):
    return np.stack([pattern(i, step, w, h) for i in range(count)])


def write_all(slots, imgs):
    for i, img in enumerate(imgs):
        slots.write_host(i, img)


def test_a_view_is_the_slots_as_stored(make_slots):
    slots = make_slots(3)
    write_all(slots, images(3, 0))
    view = slots.read(copy=False)
    assert view.shape == (3, H, W, 4) and view.dtype == "uint8" and view.flipped
    # Rows keep the slots' padding (97 * 4 bytes padded to 512), images the slots' page-rounded size.
    pitch = slots.row_pitch
    assert pitch == 512
    assert view.strides == (slots.slot_bytes, pitch, 4, 1)
    np.testing.assert_array_equal(to_host(view), images(3, 0))
    # The slots themselves: each read hands out the next set, and after `buffers` reads the first one again.
    ptrs = [view.data_ptr]
    del view
    for step in range(1, 4):
        write_all(slots, images(3, step))
        v = slots.read(copy=False)
        np.testing.assert_array_equal(to_host(v), images(3, step), err_msg=f"step {step}")
        ptrs.append(v.data_ptr)
        del v
    set_bytes = 3 * slots.slot_bytes
    assert [p - ptrs[0] for p in ptrs] == [0, set_bytes, 2 * set_bytes, 0]


def test_views_of_compact_slots_are_contiguous(make_slots):
    """256 x 64 RGBA8: rows of 1,024 bytes and slots of 64 KiB, so the view has C-contiguous strides."""
    torch = pytest.importorskip("torch")
    slots = make_slots(2, (256, 64))
    write_all(slots, images(2, 0, 256, 64))
    t = torch.from_dlpack(slots.read(copy=False))
    assert t.is_contiguous()
    np.testing.assert_array_equal(t.cpu().numpy(), images(2, 0, 256, 64))


def test_a_view_is_never_overwritten_while_the_loop_keeps_it(make_slots):
    """The usual loop: the previous step's observation is still bound while the next one is read (three sets)."""
    slots = make_slots(2)
    obs = None
    for step in range(8):
        write_all(slots, images(2, step))
        prev, obs = obs, slots.read(copy=False)
        np.testing.assert_array_equal(to_host(obs), images(2, step), err_msg=f"step {step}")
        if prev is not None:  # written by the workers' step after it? It must still hold its own step's pixels.
            np.testing.assert_array_equal(to_host(prev), images(2, step - 1), err_msg=f"step {step - 1} kept")
        del prev
    assert slots.reads == 8


@pytest.mark.parametrize("buffers", [2, 3])
def test_a_view_kept_too_long_makes_the_read_fail_and_change_nothing(make_slots, buffers):
    torch = pytest.importorskip("torch")
    slots = make_slots(2, buffers=buffers)
    kept = []
    for step in range(buffers - 1):
        write_all(slots, images(2, step))
        kept.append(torch.from_dlpack(slots.read(copy=False)))  # the tensor alone keeps the view alive
    write_all(slots, images(2, buffers - 1))
    with pytest.raises(gltensor.SlotsBusyError, match=r"zero-copy view.*still holds.*at most %d views" % (buffers - 1)):
        slots.read(copy=False)
    with pytest.raises(gltensor.SlotsBusyError):
        slots.read()  # a copy would let the workers into the viewed set just the same
    # Nothing changed: the slots are still fresh, the kept views still hold their steps.
    assert slots.reads == buffers - 1 and set(slots.states()) == {"fresh"}
    for step, t in enumerate(kept):
        np.testing.assert_array_equal(t.cpu().numpy(), images(2, step))
    del kept[0], t
    np.testing.assert_array_equal(to_host(slots.read(copy=False)), images(2, buffers - 1))


def test_conversions_and_out_are_refused(make_slots):
    slots = make_slots(2)
    write_all(slots, images(2, 0))
    for opts, what in [(dict(channels="rgb"), "other channels"), (dict(channels="bgra"), "other channels"),
                       (dict(dtype="float32"), "another dtype"), (dict(layout="chw"), "layout='chw'"),
                       (dict(flip=False), "flip=False (GL's bottom-up rows)")]:
        with pytest.raises(ValueError, match=re.escape(f"cannot convert: {what} asks for a copy")):
            slots.read(copy=False, **opts)
    with pytest.raises(ValueError, match="out= asks for a copy"):
        slots.read(copy=False, out=np.zeros((2, H, W, 4), np.uint8))
    assert slots.reads == 0 and set(slots.states()) == {"fresh"}
    # Asking for what is stored is no conversion.
    v = slots.read(copy=False, channels="rgba", dtype="uint8", layout="hwc", flip=True)
    np.testing.assert_array_equal(to_host(v), images(2, 0))


def test_one_set_refuses_views(make_slots):
    slots = make_slots(2, buffers=1)
    write_all(slots, images(2, 0))
    with pytest.raises(ValueError, match="buffers=2 or 3"):
        slots.read(copy=False)
    np.testing.assert_array_equal(to_host(slots.read()), images(2, 0))


def test_float_slots_view(make_slots):
    slots = make_slots(2, format="rgba32f")
    imgs = np.stack([pattern(i, 0, W, H, 4, np.float32) for i in range(2)])
    write_all(slots, imgs)
    v = slots.read(copy=False)
    assert v.dtype == "float32" and v.strides == (slots.slot_bytes, slots.row_pitch, 16, 4)
    np.testing.assert_array_equal(to_host(v), imgs)


def test_a_view_outlives_closed_slots(make_slots):
    torch = pytest.importorskip("torch")
    slots = make_slots(2)
    write_all(slots, images(2, 0))
    t = torch.from_dlpack(slots.read(copy=False))
    closed_alive = gltensor._gltensor._closed_slots_alive_for_testing
    base = closed_alive()
    slots.close()
    with pytest.raises(gltensor.ClosedError):
        slots.read(copy=False)
    gc.collect()
    np.testing.assert_array_equal(t.cpu().numpy(), images(2, 0))  # the memory lives until the view is gone
    assert closed_alive() == base + 1, "closed slots with a live view must stay allocated"
    del t
    gc.collect()
    assert closed_alive() == base, "the last view died: the closed slots must be freed"


def test_copies_and_views_mix(make_slots):
    """Copies and views read the sets in one rotation: kept copies keep their steps, views their own."""
    slots = make_slots(2)
    got = []
    for step in range(7):
        write_all(slots, images(2, step))
        f = slots.read(copy=step % 2 == 0)
        got.append(f if step % 2 == 0 else np.array(to_host(f)))  # a view copied out here, then dropped
        del f
    for step, f in enumerate(got):
        np.testing.assert_array_equal(to_host(f), images(2, step), err_msg=f"step {step}")


def test_views_from_worker_processes_every_pixel(backend):
    """GL workers (spawn) draw and write; every pixel of every view equals what they drew, steps kept apart."""
    from test_slots import Workers

    slots = gltensor.SharedSlots(3, (W, H), backend=backend)
    w = None
    try:
        w = Workers(slots, method="spawn")
        prev = None
        for step in range(4):
            w.all("step", step)
            view = slots.read(copy=False)
            np.testing.assert_array_equal(to_host(view), expected(3, step), err_msg=f"step {step}")
            if prev is not None:
                np.testing.assert_array_equal(to_host(prev), expected(3, step - 1))
            prev = view
        del view, prev
    finally:
        if w is not None:
            w.close()
        slots.close()


@pytest.mark.gpu
def test_a_dead_views_set_waits_for_the_work_its_consumers_queued(gl):
    """A view consumed on a side stream behind a long sleep dies at once; the read that gives its set back to the
    writers must wait for that work (read_waits counts it), else the next write lands while it still reads. The
    writes of the steps between go first (a GL write waits for the GPU, which would wait out the sleep itself),
    and the consumer's kernels run once before the sleep (a kernel's first launch loads its module, which waits
    for the device)."""
    torch = pytest.importorskip("torch")
    slots = gltensor.SharedSlots(2, (W, H), backend="cuda")
    try:
        write_all(slots, images(2, 0))
        view = slots.read(copy=False)  # set 0
        write_all(slots, images(2, 1))
        np.testing.assert_array_equal(to_host(slots.read()), images(2, 1))  # set 1; set 2 is free
        write_all(slots, images(2, 2))  # set 2
        side = torch.cuda.Stream()
        consumed = torch.empty((2, H, W, 4), dtype=torch.int32, device=f"cuda:{slots.cuda_device}")
        slept = torch.cuda.Event()
        with torch.cuda.stream(side):
            t = torch.from_dlpack(view)  # handed to torch on the side stream
            consumed.copy_(t).add_(1)  # loads the kernels
            torch.cuda._sleep(1000)
            side.synchronize()
            torch.cuda._sleep(2_000_000_000)  # ~1 s of GPU time on that stream
            slept.record()
            consumed.copy_(t).add_(1)  # reads the view after the sleep
        del t, view  # the view dies now: events are recorded on the streams it was used on
        assert not slept.query(), "the sleep ended before the read: the test cannot tell a missing wait"
        waits = slots.read_waits
        got = slots.read()  # copies set 2 and gives set 0 back to the writers: waits for the side stream
        assert slots.read_waits == waits + 1
        assert slept.query()
        write_all(slots, images(2, 3))  # into set 0, which the consumer has finished with
        torch.cuda.synchronize()
        np.testing.assert_array_equal(to_host(got), images(2, 2))
        np.testing.assert_array_equal(consumed.cpu().numpy(), images(2, 0).astype(np.int32) + 1)
        del got
    finally:
        slots.close()
