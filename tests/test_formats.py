"""Pixel-exact captures of every documented format, size and target, on every backend here.

The ground truth is GL's own read-back (glGetTexImage / glReadPixels), which is also checked
against the uploaded data so that a broken helper cannot make a broken capture look right.
"""

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from OpenGL import GL

import gltensor
from formats import BY_KEY, FORMATS, random_data
from glhelpers import READ_STATE, check_gl, gl_state, have, tex_image_2d, to_numpy, to_numpy_torch

pytestmark = pytest.mark.usefixtures("gl")

SIZES = [(1, 1), (3, 5), (800, 600), (4097, 3)]  # (width, height)
SIZE_IDS = [f"{w}x{h}" for w, h in SIZES]
FMT_IDS = [f.key for f in FORMATS]
TARGETS = [GL.GL_TEXTURE_2D, GL.GL_TEXTURE_RECTANGLE, GL.GL_RENDERBUFFER]
TARGET_IDS = ["2d", "rect", "rbo"]


def _check_exact(cap, img, backend):
    ref = img.reference()
    assert_array_equal(ref, img.data, err_msg="test helper: GL did not store the uploaded data exactly")

    bottom_up = cap.read(flip=False)
    check_gl("after read(flip=False)")
    assert bottom_up.shape == img.shape
    assert bottom_up.dtype == img.fmt.dtype
    assert bottom_up.flipped is False
    got = to_numpy(bottom_up)
    assert got.dtype == img.fmt.np_dtype
    assert got.shape == img.shape
    assert_array_equal(got, ref)

    top_down = cap.read(flip=True)
    check_gl("after read(flip=True)")
    assert top_down.flipped is True
    assert_array_equal(to_numpy(top_down), ref[::-1])

    default = cap.read()
    assert default.flipped is True, "read() must default to flip=True"
    assert_array_equal(to_numpy(default), ref[::-1])

    if backend == "cpu" and have("torch"):  # a second consumer of the same frame sees the same pixels
        assert_array_equal(to_numpy_torch(top_down), ref[::-1])
    return ref


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
@pytest.mark.parametrize("fmt", FORMATS, ids=FMT_IDS)
@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
def test_pixel_exact(backend, target, fmt, size, make_image, capture):
    w, h = size
    img = make_image(target, fmt, w, h, seed=1)
    cap = capture(img, backend=backend)
    _check_exact(cap, img, backend)


@pytest.mark.parametrize("fmt", FORMATS, ids=FMT_IDS)
@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
def test_properties(backend, target, fmt, make_image, capture):
    img = make_image(target, fmt, 7, 3)
    cap = capture(img, backend=backend)
    assert cap.name == img.name
    assert cap.target == img.target_name
    assert cap.format == fmt.reported
    assert (cap.width, cap.height, cap.channels) == (7, 3, fmt.channels)
    assert cap.shape == (3, 7, fmt.channels)
    assert isinstance(cap.shape, tuple)
    assert cap.dtype == fmt.dtype
    assert cap.backend == backend
    assert isinstance(cap.backend_reason, str) and cap.backend_reason.strip(), "backend_reason must say why"
    assert cap.closed is False
    if backend == "cpu":
        assert cap.cuda_device is None
    else:
        assert isinstance(cap.cuda_device, int) and cap.cuda_device >= 0

    frame = cap.read()
    assert frame.shape == (3, 7, fmt.channels)
    assert frame.dtype == fmt.dtype
    itemsize = fmt.np_dtype.itemsize
    assert frame.nbytes == 3 * 7 * fmt.channels * itemsize
    assert frame.strides == (7 * fmt.channels * itemsize, fmt.channels * itemsize, itemsize)
    assert isinstance(frame.data_ptr, int) and frame.data_ptr != 0
    if backend == "cpu":
        assert frame.device == "cpu"
        assert frame.stream is None
        assert frame.__dlpack_device__() == (1, 0)
    else:
        assert frame.device == f"cuda:{cap.cuda_device}"
        assert frame.__dlpack_device__() == (2, cap.cuda_device)
        assert isinstance(frame.stream, int)
    frame.synchronize()


def test_one_channel_shape_is_3d(backend, make_texture, capture):
    img = make_texture("R8", 4, 2)
    cap = capture(img, backend=backend)
    assert cap.shape == (2, 4, 1)
    got = to_numpy(cap.read(flip=False))
    assert got.shape == (2, 4, 1)
    assert_array_equal(got, img.data)


def test_auto_backend(ctx, make_texture, capture):
    img = make_texture("RGBA8", 5, 4)
    cap = capture(img)  # backend="auto"
    expected = "cuda" if (ctx.cuda_device is not None and gltensor.cuda_available()) else "cpu"
    assert cap.backend == expected
    assert cap.backend_reason.strip()
    assert_array_equal(to_numpy(cap.read(flip=False)), img.reference())


def test_backend_is_keyword_only(make_texture):
    img = make_texture("RGBA8", 2, 2)
    with pytest.raises(TypeError):
        gltensor.Capture(img.name, GL.GL_TEXTURE_2D, "cpu")


@pytest.mark.parametrize("key", ["unsized_RGBA", "unsized_RGB"])
def test_unsized_reported_as_sized(backend, key, make_texture, capture):
    fmt = BY_KEY[key]
    img = make_texture(fmt, 9, 4)
    cap = capture(img, backend=backend)
    assert cap.format == {"unsized_RGBA": "GL_RGBA8", "unsized_RGB": "GL_RGB8"}[key]
    assert cap.dtype == "uint8"
    assert cap.channels == fmt.channels
    assert_array_equal(to_numpy(cap.read(flip=False)), img.reference())


def test_srgb_returns_raw_encoded_bytes(backend, make_texture, capture):
    # 128 encoded is ~55 linear: a decoding path would not give 128 back
    data = np.full((2, 3, 4), 128, np.uint8)
    img = make_texture("SRGB8_ALPHA8", 3, 2, data=data)
    cap = capture(img, backend=backend)
    assert cap.format == "GL_SRGB8_ALPHA8"
    assert_array_equal(to_numpy(cap.read(flip=False)), data)


@pytest.mark.parametrize("key", ["RGBA8", "R32F", "RGBA16F", "RGBA32UI"])
def test_immutable_storage(backend, key, make_texture, capture):
    """glTexStorage2D textures (immutable, possibly with mip levels) capture level 0."""
    fmt = BY_KEY[key]
    w, h = 13, 6
    img = make_texture(fmt, 1, 1)  # name only; storage replaced below
    GL.glDeleteTextures(1, [img.name])
    img.name = int(GL.glGenTextures(1))
    GL.glBindTexture(GL.GL_TEXTURE_2D, img.name)
    GL.glTexStorage2D(GL.GL_TEXTURE_2D, 3, fmt.internal, w, h)
    GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    img.width, img.height = w, h
    img.upload(random_data(fmt, w, h, seed=5))
    cap = capture(img, backend=backend)
    assert cap.shape == (h, w, fmt.channels)
    assert_array_equal(to_numpy(cap.read(flip=False)), img.reference())


def test_level_zero_of_mipmapped_texture(backend, make_texture, capture):
    fmt = BY_KEY["RGBA8"]
    img = make_texture(fmt, 8, 4, seed=2)
    level1 = np.full((2, 4, 4), 77, np.uint8)
    GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 1)
    GL.glBindTexture(GL.GL_TEXTURE_2D, img.name)
    tex_image_2d(GL.GL_TEXTURE_2D, 1, GL.GL_RGBA8, 4, 2, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, level1)
    GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    cap = capture(img, backend=backend)
    assert cap.shape == (4, 8, 4)
    assert_array_equal(to_numpy(cap.read(flip=False)), img.data)


def test_rendered_content(backend, make_texture, capture):
    """Contents produced on the GPU side (glClearBuffer through an FBO), not by an upload."""
    img = make_texture("RGBA8", 31, 17)
    # 0.6 rather than 0.5: 0.5 * 255 = 127.5 is a tie, and GL lets the implementation return either
    # neighbour (NVIDIA gives 127, llvmpipe 128); 0.6 * 255 = 153.00001 has one nearest value.
    img.fill((1.0, 0.0, 0.6, 1.0))
    cap = capture(img, backend=backend)
    ref = img.reference()
    assert_array_equal(ref[0, 0], [255, 0, 153, 255])
    assert_array_equal(to_numpy(cap.read()), ref[::-1])


@pytest.mark.parametrize("key", ["RGBA8", "RGB8", "R8", "RGBA16", "RGBA16F", "RG32F"])
@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
def test_shader_rendered_content(backend, target, key, make_image, capture):
    """Draw calls just issued (no glFinish) are complete in the frame: the capture orders itself after them."""
    fmt = BY_KEY[key]
    img = make_image(target, fmt, 97, 61)
    cap = capture(img, backend=backend)
    previous = None
    for i in range(8):
        img.draw(seed=0.37 * i + 0.01)
        frame = cap.read(flip=False)
        ref = img.reference()
        if previous is not None:
            assert not np.array_equal(ref, previous), "test pattern did not change"
        assert_array_equal(to_numpy(frame), ref, err_msg=f"draw {i}")
        previous = ref
    check_gl("after draws and reads")


# GL state a read must leave as it found it: a capture runs inside someone else's renderer.
@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
def test_read_preserves_gl_state(backend, target, make_image, capture):
    img = make_image(target, "RGB8", 11, 7, seed=3)  # 33-byte rows: sensitive to PACK_ALIGNMENT
    ref = img.reference()
    cap = capture(img, backend=backend)

    other_tex = int(GL.glGenTextures(1))
    other_rect = int(GL.glGenTextures(1))
    other_rbo = int(GL.glGenRenderbuffers(1))
    fbo_r, fbo_d = (int(x) for x in GL.glGenFramebuffers(2))
    pbo, upbo = (int(x) for x in GL.glGenBuffers(2))
    try:
        GL.glActiveTexture(GL.GL_TEXTURE3)
        GL.glBindTexture(GL.GL_TEXTURE_2D, other_tex)
        GL.glBindTexture(GL.GL_TEXTURE_RECTANGLE, other_rect)
        GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, other_rbo)
        GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, fbo_r)
        GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, fbo_d)
        GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, pbo)
        GL.glBufferData(GL.GL_PIXEL_PACK_BUFFER, 64, None, GL.GL_STREAM_READ)
        GL.glBindBuffer(GL.GL_PIXEL_UNPACK_BUFFER, upbo)
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 8)
        GL.glPixelStorei(GL.GL_PACK_ROW_LENGTH, 3)
        GL.glPixelStorei(GL.GL_PACK_SKIP_ROWS, 2)
        GL.glPixelStorei(GL.GL_PACK_SKIP_PIXELS, 1)
        before = gl_state(READ_STATE)

        got = to_numpy(cap.read(flip=False))
        check_gl("after read with unusual GL state")
        assert gl_state(READ_STATE) == before, "Capture.read() changed GL state it does not own"
        assert_array_equal(got, ref)
    finally:
        GL.glActiveTexture(GL.GL_TEXTURE0)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        GL.glBindTexture(GL.GL_TEXTURE_RECTANGLE, 0)
        GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, 0)
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, 0)
        GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, 0)
        GL.glBindBuffer(GL.GL_PIXEL_UNPACK_BUFFER, 0)
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 4)
        GL.glPixelStorei(GL.GL_PACK_ROW_LENGTH, 0)
        GL.glPixelStorei(GL.GL_PACK_SKIP_ROWS, 0)
        GL.glPixelStorei(GL.GL_PACK_SKIP_PIXELS, 0)
        GL.glDeleteTextures(2, [other_tex, other_rect])
        GL.glDeleteRenderbuffers(1, [other_rbo])
        GL.glDeleteFramebuffers(2, [fbo_r, fbo_d])
        GL.glDeleteBuffers(2, [pbo, upbo])


def test_capture_creation_preserves_gl_state(backend, make_renderbuffer, capture):
    img = make_renderbuffer("RGBA8", 4, 4)
    other_tex = int(GL.glGenTextures(1))
    try:
        GL.glBindTexture(GL.GL_TEXTURE_2D, other_tex)
        before = gl_state(READ_STATE)
        cap = capture(img, backend=backend)
        assert gl_state(READ_STATE) == before, "Capture() changed GL state it does not own"
        cap.read()
        assert gl_state(READ_STATE) == before
    finally:
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        GL.glDeleteTextures(1, [other_tex])


# ---------------------------------------------------------------- read(out=...)


@pytest.mark.parametrize("key", ["RGBA8", "RGB8", "R16", "RGBA16F", "RG32F", "RGBA32UI"])
@pytest.mark.parametrize("flip", [False, True])
def test_read_into_numpy_out(key, flip, make_texture, capture):
    fmt = BY_KEY[key]
    img = make_texture(fmt, 13, 7, seed=4)
    cap = capture(img, backend="cpu")
    out = np.zeros((7, 13, fmt.channels), fmt.np_dtype)
    assert cap.read(flip=flip, out=out) is out
    ref = img.reference()
    assert_array_equal(out, ref[::-1] if flip else ref)


def test_read_into_padded_rows(make_texture, capture):
    """out= may have a row stride larger than its width: padding stays untouched."""
    fmt = BY_KEY["RGB8"]
    img = make_texture(fmt, 10, 6, seed=5)
    cap = capture(img, backend="cpu")
    big = np.full((6, 17, 3), 7, np.uint8)
    out = big[:, 3:13]  # (6, 10, 3), row stride 51 bytes, pixels contiguous
    assert cap.read(flip=False, out=out) is out
    assert_array_equal(out, img.reference())
    assert (big[:, :3] == 7).all() and (big[:, 13:] == 7).all(), "read(out=) wrote outside the view"


def test_read_into_torch_cpu_out(make_texture, capture):
    torch = pytest.importorskip("torch")
    fmt = BY_KEY["RGBA16F"]
    img = make_texture(fmt, 9, 5, seed=6)
    cap = capture(img, backend="cpu")
    out = torch.zeros((5, 9, 4), dtype=torch.float16)
    assert cap.read(out=out) is out
    assert_array_equal(out.numpy(), img.reference()[::-1])
    big = torch.zeros((5, 12, 4), dtype=torch.float16)
    view = big[:, 1:10]
    assert cap.read(flip=False, out=view) is view
    assert_array_equal(view.numpy(), img.reference())
    assert not big[:, 0].any() and not big[:, 10:].any()


def test_read_into_out_follows_new_content(make_texture, capture):
    fmt = BY_KEY["RGBA8"]
    img = make_texture(fmt, 8, 8, seed=1)
    cap = capture(img, backend="cpu")
    out = np.zeros((8, 8, 4), np.uint8)
    for seed in range(3):
        img.upload(random_data(fmt, 8, 8, seed=20 + seed))
        cap.read(flip=False, out=out)
        assert_array_equal(out, img.reference())
