"""Closing, context managers, frames outliving their capture, and memory that stays bounded."""

import gc
import weakref

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from OpenGL import GL

import gltensor
from formats import BY_KEY, random_data
from glhelpers import check_gl, rss_bytes, to_numpy

pytestmark = pytest.mark.usefixtures("gl")

MiB = 1 << 20


def test_close_idempotent(backend, make_texture, capture):
    img = make_texture("RGBA8", 4, 4)
    cap = capture(img, backend=backend)
    assert cap.closed is False
    cap.close()
    assert cap.closed is True
    cap.close()
    cap.close()
    assert cap.closed is True
    check_gl()


def test_context_manager(backend, make_texture):
    img = make_texture("RGBA8", 5, 3, seed=1)
    with gltensor.Capture(img.name, GL.GL_TEXTURE_2D, backend=backend) as cap:
        assert cap.closed is False
        frame = cap.read(flip=False)
    assert cap.closed is True
    assert_array_equal(to_numpy(frame), img.reference())
    with pytest.raises(gltensor.ClosedError):
        cap.read()


def test_context_manager_closes_on_exception(backend, make_texture):
    img = make_texture("RGBA8", 5, 3)
    with pytest.raises(ZeroDivisionError):
        with gltensor.Capture(img.name, GL.GL_TEXTURE_2D, backend=backend) as cap:
            1 / 0
    assert cap.closed is True


def test_frames_alive_after_close(backend, make_texture, capture):
    fmt = BY_KEY["RGBA32F"]
    img = make_texture(fmt, 33, 17, seed=1)
    cap = capture(img, backend=backend)
    ref = img.reference()
    frames = [cap.read(flip=False) for _ in range(3)]
    cap.close()
    img.delete()
    gc.collect()
    for f in frames:
        assert f.shape == (17, 33, 4)
        assert_array_equal(to_numpy(f), ref)
    del frames
    gc.collect()


def test_frame_outlives_dropped_capture(backend, make_texture):
    img = make_texture("RGBA8", 8, 8, seed=3)
    cap = gltensor.Capture(img.name, GL.GL_TEXTURE_2D, backend=backend)
    frame = cap.read(flip=False)
    wr = weakref.ref(cap)
    del cap  # never closed explicitly
    gc.collect()
    assert wr() is None, "a capture must be collectable while its frames live"
    check_gl("after a capture was collected")
    assert_array_equal(to_numpy(frame), img.reference())


def test_capture_without_close_is_collected(backend, make_texture):
    img = make_texture("RGBA8", 8, 8)
    cap = gltensor.Capture(img.name, GL.GL_TEXTURE_2D, backend=backend)
    cap.read()
    wr = weakref.ref(cap)
    del cap
    gc.collect()
    assert wr() is None
    check_gl()


def test_close_with_no_context_current_does_not_crash(ctx, make_texture):
    img = make_texture("RGBA8", 8, 8)
    cap = gltensor.Capture(img.name, GL.GL_TEXTURE_2D, backend="cpu")
    frame = cap.read(flip=False)
    ref = img.reference()
    ctx.release()
    try:
        try:
            cap.close()
        except gltensor.GLTensorError:
            pass  # refusing is acceptable; crashing or leaving it half-closed is not
    finally:
        ctx.make_current()
    cap.close()
    assert cap.closed is True
    assert_array_equal(np.from_dlpack(frame), ref)


def test_many_captures_of_one_texture(backend, make_texture, capture):
    img = make_texture("RGBA8", 16, 16, seed=4)
    caps = [capture(img, backend=backend) for _ in range(8)]
    ref = img.reference()
    for c in caps:
        assert_array_equal(to_numpy(c.read(flip=False)), ref)
    for c in caps[::2]:
        c.close()
    for c in caps[1::2]:
        assert_array_equal(to_numpy(c.read(flip=False)), ref)


@pytest.mark.sanitizer_distorts("an RSS bound: ASan's quarantine and shadow memory grow RSS on their own")
def test_mass_create_destroy_bounded_memory(make_texture):
    fmt = BY_KEY["RGBA8"]
    img = make_texture(fmt, 64, 64, seed=5)
    ref = img.reference()

    def cycle(n):
        for _ in range(n):
            cap = gltensor.Capture(img.name, GL.GL_TEXTURE_2D, backend="cpu")
            frame = cap.read(flip=False)
            cap.close()
            del cap, frame

    cycle(50)  # warm-up: allocator pools, driver caches
    gc.collect()
    before = rss_bytes()
    cycle(500)
    gc.collect()
    growth = rss_bytes() - before
    assert growth < 16 * MiB, f"RSS grew by {growth / MiB:.1f} MiB over 500 create/read/close cycles"
    check_gl("after 500 captures")
    with gltensor.Capture(img.name, GL.GL_TEXTURE_2D, backend="cpu") as cap:
        assert_array_equal(to_numpy(cap.read(flip=False)), ref)


@pytest.mark.sanitizer_distorts("an RSS bound: ASan's quarantine and shadow memory grow RSS on their own")
def test_mass_create_destroy_without_close(make_texture):
    img = make_texture("RGBA8", 32, 32)
    for _ in range(30):
        gltensor.Capture(img.name, GL.GL_TEXTURE_2D, backend="cpu").read()
    gc.collect()
    before = rss_bytes()
    for _ in range(300):
        gltensor.Capture(img.name, GL.GL_TEXTURE_2D, backend="cpu").read()
    gc.collect()
    growth = rss_bytes() - before
    assert growth < 16 * MiB, f"RSS grew by {growth / MiB:.1f} MiB over 300 unclosed captures"
    check_gl()


@pytest.mark.sanitizer_distorts("an RSS bound: ASan's quarantine and shadow memory grow RSS on their own")
def test_many_reads_rss_flat(make_texture, capture):
    fmt = BY_KEY["RGBA8"]
    w, h = 256, 256  # 256 KiB a frame: a leaked frame per read would be 500 MiB over the loop
    img = make_texture(fmt, w, h, seed=6)
    cap = capture(img, backend="cpu")
    for _ in range(100):
        to_numpy(cap.read()).sum()
    gc.collect()
    before = rss_bytes()
    for i in range(2000):
        a = np.from_dlpack(cap.read())
        assert a.shape == (h, w, 4)
        del a
    gc.collect()
    growth = rss_bytes() - before
    assert growth < 8 * MiB, f"RSS grew by {growth / MiB:.1f} MiB over 2000 reads"
    img.upload(random_data(fmt, w, h, seed=7))
    assert_array_equal(to_numpy(cap.read(flip=False)), img.reference())


def test_many_reads_into_out_rss_flat(make_texture, capture):
    img = make_texture("RGBA8", 128, 128, seed=8)
    cap = capture(img, backend="cpu")
    out = np.empty((128, 128, 4), np.uint8)
    for _ in range(50):
        assert cap.read(out=out) is out
    gc.collect()
    before = rss_bytes()
    for _ in range(1000):
        cap.read(out=out)
    gc.collect()
    growth = rss_bytes() - before
    assert growth < 4 * MiB, f"RSS grew by {growth / MiB:.1f} MiB over 1000 reads into out="
    assert_array_equal(out, img.reference()[::-1])


def test_many_contexts_bounded_memory(ctx):
    def cycle(n):
        for _ in range(n):
            c = gltensor.Context.headless()
            c.close()
        ctx.make_current()

    try:
        cycle(5)
        gc.collect()
        before = rss_bytes()
        cycle(30)
        gc.collect()
        growth = rss_bytes() - before
        assert growth < 64 * MiB, f"RSS grew by {growth / MiB:.1f} MiB over 30 contexts"
    finally:
        ctx.make_current()


def test_repr_before_and_after_close(backend, make_texture, capture):
    img = make_texture("RGBA8", 4, 4)
    cap = capture(img, backend=backend)
    frame = cap.read()
    assert isinstance(repr(cap), str) and isinstance(repr(frame), str)
    cap.close()
    assert isinstance(repr(cap), str)
    assert isinstance(repr(frame), str)
    img.delete()
    assert isinstance(repr(cap), str)
