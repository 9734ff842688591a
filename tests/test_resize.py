"""Storage replaced under a live Capture: the next read follows GL, never a stale size, format or frame.

NVIDIA's GL refuses to reallocate a texture while it is registered with CUDA (glTexImage2D raises
GL_INVALID_OPERATION), so captures here are made with resizable=True, which holds the registration only
during each read (a no-op on the CPU backend). Renderbuffers can be re-stored while registered."""

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from OpenGL import GL

from formats import BY_KEY, random_data
from glhelpers import check_gl, to_numpy

pytestmark = pytest.mark.usefixtures("gl")

TARGETS = [GL.GL_TEXTURE_2D, GL.GL_TEXTURE_RECTANGLE, GL.GL_RENDERBUFFER]
TARGET_IDS = ["2d", "rect", "rbo"]


def _assert_capture_matches(cap, img):
    ref = img.reference()
    frame = cap.read(flip=False)
    check_gl("after read")
    assert frame.shape == img.shape
    assert frame.dtype == img.fmt.dtype
    assert_array_equal(to_numpy(frame), ref)
    assert cap.shape == img.shape, "Capture.shape must describe the last read"
    assert (cap.width, cap.height, cap.channels) == (img.width, img.height, img.fmt.channels)
    assert cap.dtype == img.fmt.dtype
    assert cap.format == img.fmt.reported
    return frame, ref


@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize("new_size", [(7, 3), (2, 9), (640, 480), (1, 1)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_new_size(backend, target, new_size, make_image, capture):
    img = make_image(target, "RGBA8", 16, 8, seed=1)
    cap = capture(img, backend=backend, resizable=True)
    _assert_capture_matches(cap, img)

    img.reallocate("RGBA8", *new_size, seed=2)
    _assert_capture_matches(cap, img)


@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize(
    "old_key,new_key",
    [("RGBA8", "R32F"), ("R32F", "RGBA16F"), ("RGBA16F", "RGB8"), ("RGB8", "RGBA32UI"), ("R8", "RGBA16")],
)
def test_new_format(backend, target, old_key, new_key, make_image, capture):
    img = make_image(target, old_key, 10, 6, seed=3)
    cap = capture(img, backend=backend, resizable=True)
    _assert_capture_matches(cap, img)

    img.reallocate(new_key, 10, 6, seed=4)
    _assert_capture_matches(cap, img)


@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
def test_new_size_and_format_repeatedly(backend, target, make_image, capture):
    img = make_image(target, "RGBA8", 5, 5, seed=0)
    cap = capture(img, backend=backend, resizable=True)
    steps = [("R8", 33, 2), ("RGBA32F", 3, 17), ("RGBA8", 5, 5), ("RG16", 64, 1), ("RGBA8", 128, 96)]
    for i, (key, w, h) in enumerate(steps):
        img.reallocate(key, w, h, seed=10 + i)
        _assert_capture_matches(cap, img)


@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
def test_earlier_frames_keep_old_contents(backend, target, make_image, capture):
    img = make_image(target, "RGBA8", 12, 4, seed=1)
    cap = capture(img, backend=backend, resizable=True)
    old_frame, old_ref = _assert_capture_matches(cap, img)

    img.reallocate("R32F", 5, 9, seed=2)
    _assert_capture_matches(cap, img)
    # the frame read before the reallocation is untouched: same shape, same pixels
    assert old_frame.shape == (4, 12, 4)
    assert old_frame.dtype == "uint8"
    assert_array_equal(to_numpy(old_frame), old_ref)


@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
def test_same_size_new_contents(backend, target, make_image, capture):
    """New contents without reallocation: each read sees the contents of its moment."""
    fmt = BY_KEY["RGBA8"]
    img = make_image(target, fmt, 9, 7, seed=1)
    cap = capture(img, backend=backend, resizable=True)
    frames = []
    for seed in range(4):
        img.upload(random_data(fmt, 9, 7, seed=100 + seed))
        frames.append((cap.read(flip=False), img.reference()))
    for frame, ref in frames:
        assert_array_equal(to_numpy(frame), ref)


def test_shrink_then_grow_same_name(backend, make_texture, capture):
    img = make_texture("RGBA16F", 300, 200, seed=1)
    cap = capture(img, backend=backend, resizable=True)
    _assert_capture_matches(cap, img)
    img.reallocate("RGBA16F", 3, 2, seed=2)
    _assert_capture_matches(cap, img)
    img.reallocate("RGBA16F", 301, 203, seed=3)
    _assert_capture_matches(cap, img)


def test_renderbuffer_restorage_by_clear(backend, make_renderbuffer, capture):
    img = make_renderbuffer("RGBA8", 20, 10, seed=1)
    cap = capture(img, backend=backend)
    _assert_capture_matches(cap, img)
    GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, img.name)
    GL.glRenderbufferStorage(GL.GL_RENDERBUFFER, GL.GL_RGBA8, 6, 30)
    GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, 0)
    img.width, img.height = 6, 30
    img.fill((0.0, 1.0, 0.0, 1.0))
    frame, ref = _assert_capture_matches(cap, img)
    assert_array_equal(to_numpy(frame), np.broadcast_to(np.array([0, 255, 0, 255], np.uint8), (30, 6, 4)))


def _refresh(cap):
    if not hasattr(cap, "refresh"):
        pytest.skip("Capture.refresh() is not part of this build")
    return cap.refresh()


@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
def test_refresh_sees_reallocation_without_read(backend, target, make_image, capture):
    img = make_image(target, "RGBA8", 16, 8, seed=1)
    cap = capture(img, backend=backend, resizable=True)
    assert not _refresh(cap), "refresh() reported a change that did not happen"
    img.reallocate("R32F", 5, 7, seed=2)
    assert _refresh(cap) is True
    assert cap.shape == (7, 5, 1)
    assert cap.format == "GL_R32F" and cap.dtype == "float32"
    assert not _refresh(cap)
    _assert_capture_matches(cap, img)
