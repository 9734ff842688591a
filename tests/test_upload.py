"""Tensor -> texture: gltensor.Upload / gltensor.upload on every backend here.

Ground truth is GL's own read-back (glGetTexImage) and a gltensor capture of the same texture: a
tensor written and captured back with the inverse conversion must come back exactly, for every
writable format, orientation and conversion. On the CPU backend the sources are NumPy arrays (and
torch CPU tensors); on the CUDA backend torch CUDA tensors written by the surface kernel.
"""

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from OpenGL import GL

import gltensor
from formats import BY_KEY, FORMATS, random_data
from glhelpers import check_gl, gl_state, tex_image_2d, to_numpy

pytestmark = pytest.mark.usefixtures("gl")

FMT_IDS = [f.key for f in FORMATS]
SIZES = [(1, 1), (3, 5), (257, 130)]  # (width, height): odd widths test row packing of RGB8/R8
UNPACK_STATE = [
    (GL.GL_UNPACK_ALIGNMENT, "alignment"),
    (GL.GL_UNPACK_ROW_LENGTH, "row_length"),
    (GL.GL_UNPACK_SKIP_ROWS, "skip_rows"),
    (GL.GL_UNPACK_SKIP_PIXELS, "skip_pixels"),
    (GL.GL_PIXEL_UNPACK_BUFFER_BINDING, "unpack_buffer"),
    (GL.GL_TEXTURE_BINDING_2D, "tex2d"),
]


def source(backend, arr):
    """arr as the backend's kind of tensor: the NumPy array itself on the CPU, a torch CUDA tensor on CUDA."""
    if backend == "cpu":
        return arr
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    if arr.dtype == np.uint16 or arr.dtype == np.uint32:
        signed = np.int16 if arr.dtype == np.uint16 else np.int32
        t = torch.from_numpy(np.ascontiguousarray(arr).view(signed)).cuda()
        return t.view(torch.uint16 if arr.dtype == np.uint16 else torch.uint32)
    return torch.from_numpy(np.ascontiguousarray(arr)).cuda()


def empty_like_fmt(make_texture, fmt, w, h, target=GL.GL_TEXTURE_2D):
    return make_texture(fmt, w, h, data=np.zeros((h, w, fmt.channels), fmt.np_dtype), target=target)


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@pytest.mark.parametrize("fmt", FORMATS, ids=FMT_IDS)
def test_round_trip_exact(backend, fmt, size, make_texture, capture):
    """Stored-type tensors are written bit for bit: GL reads back the tensor, capture gives it back."""
    w, h = size
    img = empty_like_fmt(make_texture, fmt, w, h)
    top_down = random_data(fmt, w, h, seed=3)
    with gltensor.Upload(img.name, backend=backend) as up:
        assert up.backend == backend
        assert (up.width, up.height, up.channels, up.dtype) == (w, h, fmt.channels, fmt.dtype)
        up.write(source(backend, top_down))
    check_gl("after write")
    assert_array_equal(img.reference(), top_down[::-1], err_msg="GL must hold row 0 of the tensor at the top")
    assert_array_equal(to_numpy(capture(img, backend=backend).read()), top_down)


@pytest.mark.parametrize("fmt", [BY_KEY[k] for k in ("RGBA8", "R32F", "RGBA16F")], ids=lambda f: f.key)
def test_flip_false_writes_gl_rows(backend, fmt, make_texture):
    w, h = 7, 4
    img = empty_like_fmt(make_texture, fmt, w, h)
    bottom_up = random_data(fmt, w, h, seed=5)
    gltensor.upload(gltensor.Upload(img.name, backend=backend), source(backend, bottom_up), flip=False)
    assert_array_equal(img.reference(), bottom_up)


def float_cases():
    """float32 values around every rounding edge of unorm8: exact halves, clamps, NaN, infinities."""
    k = np.arange(256, dtype=np.float32)
    vals = np.concatenate([k / 255, (k + 0.5) / 255, (k - 0.5) / 255, (k + 0.4999) / 255,
                           np.array([-1, -0.0, 1.5, 2, np.nan, np.inf, -np.inf, 1e-30], np.float32)])
    vals = np.resize(vals.astype(np.float32), 32 * 28 * 4)
    return vals.reshape(28, 32, 4)


def expected_unorm8(x):
    t = np.where(np.isnan(x), 0, np.clip(x, 0, 1)).astype(np.float32)
    return np.rint(t * np.float32(255)).astype(np.uint8)  # rint: half to even, as __float2uint_rn


@pytest.mark.parametrize("src_dtype", ["float32", "float16"])
def test_float_into_unorm8_rounds_like_capture_inverse(backend, src_dtype, make_texture, capture):
    x = float_cases().astype(src_dtype)
    img = empty_like_fmt(make_texture, BY_KEY["RGBA8"], 32, 28)
    gltensor.upload(gltensor.Upload(img.name, backend=backend), source(backend, x))
    want = expected_unorm8(x.astype(np.float32))
    assert_array_equal(to_numpy(capture(img, backend=backend).read()), want)


def test_unorm8_round_trip_through_float(backend, make_texture, capture):
    """uint8 -> float tensor (capture's v / 255) -> RGBA8 -> uint8 is the identity for every byte."""
    levels = np.arange(256, dtype=np.uint8).reshape(16, 16, 1).repeat(4, axis=2)
    as_float = levels.astype(np.float32) / np.float32(255)
    img = empty_like_fmt(make_texture, BY_KEY["RGBA8"], 16, 16)
    gltensor.upload(gltensor.Upload(img.name, backend=backend), source(backend, as_float))
    cap = capture(img, backend=backend)
    assert_array_equal(to_numpy(cap.read()), levels)
    assert_array_equal(to_numpy(cap.read(dtype="float32")), as_float)


@pytest.mark.parametrize("key", ["RGBA32F", "RGBA16F", "RGBA16"])
def test_uint8_into_wider_formats(backend, key, make_texture, capture):
    """uint8 sources are unorm bytes: v / 255 into float textures, v * 257 into 16-bit unorm; capture's
    dtype='uint8' gives the bytes back."""
    fmt = BY_KEY[key]
    levels = np.arange(256, dtype=np.uint8).reshape(8, 32, 1).repeat(4, axis=2)
    img = empty_like_fmt(make_texture, fmt, 32, 8)
    gltensor.upload(gltensor.Upload(img.name, backend=backend), source(backend, levels))
    stored = img.reference()[::-1]
    if key == "RGBA16":
        assert_array_equal(stored, levels.astype(np.uint16) * 257)
    else:
        assert_array_equal(stored, (levels.astype(np.float32) / np.float32(255)).astype(fmt.np_dtype))
    assert_array_equal(to_numpy(capture(img, backend=backend).read(dtype="uint8")), levels)


def test_float32_into_float16_rounds_to_nearest_even(backend, make_texture):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((9, 11, 4)) * 100).astype(np.float32)
    img = empty_like_fmt(make_texture, BY_KEY["RGBA16F"], 11, 9)
    gltensor.upload(gltensor.Upload(img.name, backend=backend), source(backend, x))
    assert_array_equal(img.reference()[::-1], x.astype(np.float16))  # NumPy's cast rounds to nearest even


@pytest.mark.parametrize("key,one", [("RGBA8", 255), ("RGBA32F", 1.0), ("RGBA16F", 1.0), ("RGBA8UI", 1)])
def test_missing_alpha_is_filled(backend, key, one, make_texture):
    fmt = BY_KEY[key]
    rgb = random_data(BY_KEY["RGB8"], 6, 5, seed=2) if fmt.np_dtype == np.uint8 else (
        random_data(BY_KEY["RGB8"], 6, 5, seed=2).astype(np.float32) / np.float32(255))
    img = make_texture(fmt, 6, 5, data=np.zeros((5, 6, 4), fmt.np_dtype))
    gltensor.upload(gltensor.Upload(img.name, backend=backend), source(backend, rgb))
    got = img.reference()[::-1]
    assert_array_equal(got[..., 3], np.full((5, 6), one, fmt.np_dtype))
    if fmt.np_dtype == np.uint8:
        assert_array_equal(got[..., :3], rgb)


def test_single_channel_fills_rgba(backend, make_texture):
    gray = random_data(BY_KEY["R8"], 4, 3, seed=1)
    img = empty_like_fmt(make_texture, BY_KEY["RGBA8"], 4, 3)
    gltensor.upload(gltensor.Upload(img.name, backend=backend), source(backend, gray[..., 0]))  # 2-D: (H, W)
    got = img.reference()[::-1]
    assert_array_equal(got[..., 0], gray[..., 0])
    assert_array_equal(got[..., 1:3], 0)
    assert_array_equal(got[..., 3], 255)


def test_channels_name_each_source_channel(backend, make_texture, capture):
    rgba = random_data(BY_KEY["RGBA8"], 5, 4, seed=9)
    bgr = np.ascontiguousarray(rgba[..., [2, 1, 0]])
    img = empty_like_fmt(make_texture, BY_KEY["RGBA8"], 5, 4)
    up = gltensor.Upload(img.name, backend=backend)
    up.write(source(backend, bgr), channels="bgr")
    got = to_numpy(capture(img, backend=backend).read())
    assert_array_equal(got[..., :3], rgba[..., :3])
    assert_array_equal(got[..., 3], 255)
    up.write(source(backend, np.ascontiguousarray(rgba[..., 3:])), channels="a")  # the others are filled
    got = img.reference()[::-1]
    assert_array_equal(got[..., 3], rgba[..., 3])
    assert_array_equal(got[..., :3], 0)
    up.write(source(backend, bgr), channels=(2, 1, 0))
    assert_array_equal(img.reference()[::-1][..., :3], rgba[..., :3])


def test_rgb8_texture(backend, make_texture, capture):
    fmt = BY_KEY["RGB8"]
    x = random_data(fmt, 9, 7, seed=4)
    img = empty_like_fmt(make_texture, fmt, 9, 7)
    gltensor.upload(gltensor.Upload(img.name, backend=backend), source(backend, x))
    assert_array_equal(to_numpy(capture(img, backend=backend).read()), x)


def test_chw_and_strided_sources(backend, make_texture, capture):
    fmt = BY_KEY["RGBA32F"]
    x = random_data(fmt, 10, 6, seed=8)
    img = empty_like_fmt(make_texture, fmt, 10, 6)
    up = gltensor.Upload(img.name, backend=backend)
    up.write(source(backend, np.ascontiguousarray(x.transpose(2, 0, 1))), layout="chw")
    assert_array_equal(to_numpy(capture(img, backend=backend).read()), x)
    # a non-contiguous view: every other column of a wider tensor
    wide = np.zeros((6, 20, 4), np.float32)
    wide[:, ::2] = x[::-1]
    strided = source(backend, wide)[:, ::2]
    up.write(strided, flip=False)
    assert_array_equal(img.reference(), x[::-1])


def test_region_in_gl_coordinates(backend, make_texture):
    fmt = BY_KEY["RGBA8"]
    base = random_data(fmt, 16, 12, seed=1)  # bottom-up, as GL stores it
    img = make_texture(fmt, 16, 12, data=base)
    patch = random_data(fmt, 5, 3, seed=2)  # top-down
    up = gltensor.Upload(img.name, backend=backend)
    up.write(source(backend, patch), region=(4, 2, 5, 3))  # lower-left corner (4, 2)
    want = base.copy()
    want[2:5, 4:9] = patch[::-1]
    assert_array_equal(img.reference(), want)
    up.write(source(backend, patch), region=(11, 9, 5, 3), flip=False)  # the top-right corner
    want[9:12, 11:16] = patch
    assert_array_equal(img.reference(), want)


def test_texture_rectangle(backend, make_texture, capture):
    fmt = BY_KEY["RGBA8"]
    x = random_data(fmt, 6, 3, seed=6)
    img = make_texture(fmt, 6, 3, data=np.zeros((3, 6, 4), np.uint8), target=GL.GL_TEXTURE_RECTANGLE)
    with gltensor.Upload(img.name, GL.GL_TEXTURE_RECTANGLE, backend=backend) as up:
        up.write(source(backend, x))
    assert_array_equal(img.reference(), x[::-1])


def test_leaves_unpack_state_and_bindings(backend, make_texture):
    img = empty_like_fmt(make_texture, BY_KEY["RGB8"], 5, 3)
    other = empty_like_fmt(make_texture, BY_KEY["RGBA8"], 2, 2)
    pbo = GL.glGenBuffers(1)
    GL.glBindBuffer(GL.GL_PIXEL_UNPACK_BUFFER, pbo)
    GL.glBufferData(GL.GL_PIXEL_UNPACK_BUFFER, 64, None, GL.GL_STREAM_DRAW)
    GL.glBindTexture(GL.GL_TEXTURE_2D, other.name)
    GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 8)
    GL.glPixelStorei(GL.GL_UNPACK_ROW_LENGTH, 3)
    GL.glPixelStorei(GL.GL_UNPACK_SKIP_ROWS, 1)
    GL.glPixelStorei(GL.GL_UNPACK_SKIP_PIXELS, 1)
    try:
        before = gl_state(UNPACK_STATE)
        x = random_data(BY_KEY["RGB8"], 5, 3, seed=1)
        gltensor.upload(gltensor.Upload(img.name, backend=backend), source(backend, x))
        assert gl_state(UNPACK_STATE) == before
    finally:
        for p, v in ((GL.GL_UNPACK_ALIGNMENT, 4), (GL.GL_UNPACK_ROW_LENGTH, 0), (GL.GL_UNPACK_SKIP_ROWS, 0),
                     (GL.GL_UNPACK_SKIP_PIXELS, 0)):
            GL.glPixelStorei(p, v)
        GL.glBindBuffer(GL.GL_PIXEL_UNPACK_BUFFER, 0)
        GL.glDeleteBuffers(1, [pbo])
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    assert_array_equal(img.reference(), x[::-1])


SAMPLE_VS = """#version 330 core
out vec2 uv;
void main() {
    vec2 p = vec2(gl_VertexID & 1, gl_VertexID >> 1);
    uv = p;
    gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0);
}"""
SAMPLE_FS = """#version 330 core
in vec2 uv;
uniform sampler2D tex;
out vec4 color;
void main() { color = texture(tex, uv); }"""


def test_next_draw_sees_the_write(backend, make_texture, capture):
    """A draw that samples the texture right after write() shows the new texels (the unmap orders it)."""
    from glhelpers import Framebuffer, program

    fmt = BY_KEY["RGBA8"]
    w, h = 8, 6
    tex = empty_like_fmt(make_texture, fmt, w, h)
    GL.glBindTexture(GL.GL_TEXTURE_2D, tex.name)
    for p in (GL.GL_TEXTURE_MIN_FILTER, GL.GL_TEXTURE_MAG_FILTER):
        GL.glTexParameteri(GL.GL_TEXTURE_2D, p, GL.GL_NEAREST)
    GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    target = empty_like_fmt(make_texture, fmt, w, h)
    prog, vao = program("upload_sample", SAMPLE_VS, SAMPLE_FS)
    up = gltensor.Upload(tex.name, backend=backend)
    for seed in (1, 2):
        x = random_data(fmt, w, h, seed=seed)
        up.write(source(backend, x))
        with Framebuffer(target.name, GL.GL_TEXTURE_2D, GL.GL_DRAW_FRAMEBUFFER):
            viewport = GL.glGetIntegerv(GL.GL_VIEWPORT)
            GL.glViewport(0, 0, w, h)
            active = GL.glGetIntegerv(GL.GL_ACTIVE_TEXTURE)
            GL.glActiveTexture(GL.GL_TEXTURE0)  # the sampler reads unit 0, with the texture's own parameters
            sampler = GL.glGetIntegerv(GL.GL_SAMPLER_BINDING)
            GL.glBindSampler(0, 0)
            GL.glUseProgram(prog)
            GL.glUniform1i(GL.glGetUniformLocation(prog, "tex"), 0)
            GL.glBindVertexArray(vao)
            GL.glBindTexture(GL.GL_TEXTURE_2D, tex.name)
            GL.glDrawArrays(GL.GL_TRIANGLE_STRIP, 0, 4)
            GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
            GL.glBindVertexArray(0)
            GL.glUseProgram(0)
            GL.glBindSampler(0, int(sampler))
            GL.glActiveTexture(int(active))
            GL.glViewport(*viewport)
        assert_array_equal(to_numpy(capture(target, backend=backend).read()), x)


def test_one_off_upload_by_name(backend, make_texture):
    img = empty_like_fmt(make_texture, BY_KEY["RGBA8"], 3, 2)
    x = random_data(BY_KEY["RGBA8"], 3, 2, seed=1)
    gltensor.upload(img.name, source(backend, x), backend=backend)
    assert_array_equal(img.reference(), x[::-1])


def test_torch_cpu_tensor_on_cpu_backend(make_texture):
    torch = pytest.importorskip("torch")
    img = empty_like_fmt(make_texture, BY_KEY["RGBA32F"], 4, 4)
    x = torch.rand(4, 4, 4)
    gltensor.upload(gltensor.Upload(img.name, backend="cpu"), x)
    assert_array_equal(img.reference()[::-1], x.numpy())


# ---------------------------------------------------------------- errors


def test_size_mismatch(backend, make_texture):
    img = empty_like_fmt(make_texture, BY_KEY["RGBA8"], 8, 4)
    up = gltensor.Upload(img.name, backend=backend)
    with pytest.raises(gltensor.InvalidArgumentError, match=r"4 x 9 .*whole texture is 4 x 8"):
        up.write(source(backend, np.zeros((4, 9, 4), np.uint8)))
    with pytest.raises(gltensor.InvalidArgumentError, match="does not fit"):
        up.write(source(backend, np.zeros((3, 3, 4), np.uint8)), region=(6, 0, 3, 3))


def test_reallocated_texture_of_another_size(backend, make_texture):
    fmt = BY_KEY["RGBA8"]
    img = empty_like_fmt(make_texture, fmt, 8, 4)
    up = gltensor.Upload(img.name, backend=backend)
    up.write(source(backend, np.zeros((4, 8, 4), np.uint8)))
    if backend == "cuda":
        up.close()  # NVIDIA refuses to reallocate a registered texture
    img.reallocate(fmt, 5, 5, data=np.zeros((5, 5, 4), np.uint8))
    if backend == "cuda":
        up = gltensor.Upload(img.name, backend=backend)
    with pytest.raises(gltensor.InvalidArgumentError, match="4 x 8 .* is 5 x 5"):
        up.write(source(backend, np.zeros((4, 8, 4), np.uint8)))


def test_float_into_integer_texture_refused(backend, make_texture):
    img = empty_like_fmt(make_texture, BY_KEY["R8UI"], 8, 4)
    up = gltensor.Upload(img.name, backend=backend)
    with pytest.raises(gltensor.InvalidArgumentError, match="integer textures take unsigned integer"):
        up.write(source(backend, np.zeros((4, 8, 1), np.float32)))
    with pytest.raises(gltensor.InvalidArgumentError, match="uint32 source cannot"):
        gltensor.upload(gltensor.Upload(empty_like_fmt(make_texture, BY_KEY["R8"], 8, 4).name, backend=backend),
                        source(backend, np.zeros((4, 8, 1), np.uint32)))


def test_too_many_channels_and_bad_channels(backend, make_texture):
    img = empty_like_fmt(make_texture, BY_KEY["RGB8"], 4, 4)
    up = gltensor.Upload(img.name, backend=backend)
    with pytest.raises(gltensor.InvalidArgumentError, match=r"4 channels but .* stores 3"):
        up.write(source(backend, np.zeros((4, 4, 4), np.uint8)))
    with pytest.raises(gltensor.InvalidArgumentError, match="names 2 channel"):
        up.write(source(backend, np.zeros((4, 4, 3), np.uint8)), channels="rg")
    with pytest.raises(gltensor.InvalidArgumentError, match="each may be named once"):
        up.write(source(backend, np.zeros((4, 4, 2), np.uint8)), channels="rr")
    with pytest.raises(ValueError, match="channels must"):
        up.write(source(backend, np.zeros((4, 4, 3), np.uint8)), channels="xyz")


@pytest.mark.parametrize("dtype", ["int64", "float64", "int8"])
def test_unsupported_source_dtype(backend, dtype, make_texture):
    img = empty_like_fmt(make_texture, BY_KEY["RGBA8"], 2, 2)
    up = gltensor.Upload(img.name, backend=backend)
    with pytest.raises(gltensor.InvalidArgumentError, match="the source has"):
        up.write(source(backend, np.zeros((2, 2, 4), dtype)))


def test_wrong_memory_for_the_backend(backend, make_texture):
    img = empty_like_fmt(make_texture, BY_KEY["RGBA8"], 2, 2)
    up = gltensor.Upload(img.name, backend=backend)
    if backend == "cpu":
        torch = pytest.importorskip("torch")
        if not torch.cuda.is_available():
            pytest.skip("needs a CUDA tensor to hand to the CPU backend")
        x = torch.zeros(2, 2, 4, dtype=torch.uint8, device="cuda")
        with pytest.raises(gltensor.WrongDeviceError, match="CUDA memory .* CPU backend"):
            up.write(x)
    else:
        with pytest.raises(gltensor.WrongDeviceError, match="host memory"):
            up.write(np.zeros((2, 2, 4), np.uint8))


def test_unwritable_textures(gl, make_texture, make_surface):
    depth = make_surface("DEPTH_COMPONENT24", 4, 4)
    with pytest.raises(gltensor.UnsupportedFormatError, match="GL_DEPTH_COMPONENT24.*cannot write"):
        gltensor.Upload(depth.name)
    tex = GL.glGenTextures(1)
    GL.glBindTexture(GL.GL_TEXTURE_2D, tex)  # the name becomes a texture, still without storage
    GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    try:
        with pytest.raises(gltensor.InvalidObjectError, match="no storage"):
            gltensor.Upload(tex)
    finally:
        GL.glDeleteTextures(1, [tex])
    with pytest.raises(gltensor.InvalidObjectError, match="does not exist"):
        gltensor.Upload(987654)
    with pytest.raises(gltensor.InvalidArgumentError, match="GL_TEXTURE_2D"):
        gltensor.Upload(1, gltensor.GL_RENDERBUFFER)


def test_deleted_texture_and_closed_upload(backend, make_texture):
    img = empty_like_fmt(make_texture, BY_KEY["RGBA8"], 2, 2)
    up = gltensor.Upload(img.name, backend=backend)
    up.close()
    up.close()
    with pytest.raises(gltensor.ClosedError):
        up.write(source(backend, np.zeros((2, 2, 4), np.uint8)))
    up = gltensor.Upload(img.name, backend="cpu")
    img.delete()
    with pytest.raises(gltensor.InvalidObjectError, match="does not exist"):
        up.write(np.zeros((2, 2, 4), np.uint8))


def test_stream_on_cpu_backend_refused(make_texture):
    img = empty_like_fmt(make_texture, BY_KEY["RGBA8"], 2, 2)
    up = gltensor.Upload(img.name, backend="cpu")
    with pytest.raises(gltensor.InvalidArgumentError, match="CUDA stream"):
        up.write(np.zeros((2, 2, 4), np.uint8), stream=5)


def test_other_context_refused(backend, make_texture):
    img = empty_like_fmt(make_texture, BY_KEY["RGBA8"], 2, 2)
    up = gltensor.Upload(img.name, backend=backend)
    other = gltensor.Context.headless()
    try:
        with pytest.raises(gltensor.WrongContextError):
            up.write(source(backend, np.zeros((2, 2, 4), np.uint8)))
    finally:
        other.close()


@pytest.mark.gpu
def test_cuda_stream_and_tensor_from_other_producers(backend, make_texture, capture):
    """The write runs on the stream given (torch's or an int handle); CuPy sources work through CAI."""
    if backend != "cuda":
        pytest.skip("CUDA streams apply to the CUDA backend")
    torch = pytest.importorskip("torch")
    fmt = BY_KEY["RGBA8"]
    x = random_data(fmt, 64, 32, seed=4)
    img = empty_like_fmt(make_texture, fmt, 64, 32)
    up = gltensor.Upload(img.name, backend="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        t = torch.from_numpy(x).cuda()
        up.write(t, stream=s)
        up.write(t, stream=s.cuda_stream)
    s.synchronize()
    assert_array_equal(to_numpy(capture(img, backend="cuda").read()), x)
    cupy = pytest.importorskip("cupy")
    up.write(cupy.asarray(x[::-1].copy()), flip=False)
    assert_array_equal(img.reference(), x[::-1])


def test_read_only_sources_are_accepted(backend, make_texture):
    """A source is only read: read-only arrays and a buffer mapped mode='read' (a GL buffer -> texture) work."""
    fmt = BY_KEY["RGBA8"]
    x = random_data(fmt, 8, 4, seed=12)
    img = empty_like_fmt(make_texture, fmt, 8, 4)
    up = gltensor.Upload(img.name, backend=backend)
    if backend == "cpu":
        ro = x.copy()
        ro.flags.writeable = False
        up.write(ro)
        assert_array_equal(img.reference(), x[::-1])
    name = GL.glGenBuffers(1)
    try:
        GL.glBindBuffer(GL.GL_COPY_READ_BUFFER, name)
        GL.glBufferData(GL.GL_COPY_READ_BUFFER, x.nbytes, x[::-1].copy(), GL.GL_STATIC_DRAW)
        GL.glBindBuffer(GL.GL_COPY_READ_BUFFER, 0)
        with gltensor.map_buffer(name, "uint8", (4, 8, 4), mode="read", backend=backend) as v:
            assert v.read_only
            up.write(v, flip=False)  # the buffer's bytes, as GL rows, straight into the texture
        assert_array_equal(img.reference(), x[::-1])
    finally:
        GL.glDeleteBuffers(1, [name])


# ---------------------------------------------------------------- property: any region, orientation, layout, dtype

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def model_stored(fmt, x):
    """What the texture stores for source x (H, W, C_src) per docs/python-api.md, C_src <= fmt.channels."""
    h, w, c = x.shape
    if fmt.np_dtype == np.uint8:
        vals = x if x.dtype == np.uint8 else expected_unorm8(x.astype(np.float32))
        one = 255
    elif x.dtype == np.uint8:  # unorm bytes into a float texture
        vals = (x.astype(np.float32) / np.float32(255)).astype(fmt.np_dtype)
        one = 1.0
    else:
        vals = x.astype(np.float32).astype(fmt.np_dtype)
        one = 1.0
    out = np.zeros((h, w, fmt.channels), fmt.np_dtype)
    out[..., :c] = vals
    if fmt.channels == 4 and c < 4:
        out[..., 3] = one
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_region_orientation_layout_and_dtype(backend, make_texture, data):
    fmt = BY_KEY[data.draw(st.sampled_from(["RGBA8", "R8", "RGBA32F", "RG16F", "RGB8"]), label="format")]
    tw, th = data.draw(st.integers(1, 24), label="tex_w"), data.draw(st.integers(1, 24), label="tex_h")
    w, h = data.draw(st.integers(1, tw), label="w"), data.draw(st.integers(1, th), label="h")
    x0, y0 = data.draw(st.integers(0, tw - w), label="x"), data.draw(st.integers(0, th - h), label="y")
    c = data.draw(st.integers(1, fmt.channels), label="channels")
    src_dtype = data.draw(st.sampled_from(["uint8", "float32", "float16"]), label="dtype")
    flip = data.draw(st.booleans(), label="flip")
    chw = data.draw(st.booleans(), label="chw")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    if src_dtype == "uint8":
        x = rng.integers(0, 256, (h, w, c), dtype=np.uint8)
    else:
        x = (rng.integers(-64, 320, (h, w, c)) / 256.0).astype(src_dtype)  # past both ends of [0, 1]
    base = random_data(fmt, tw, th, seed=1)
    img = make_texture(fmt, tw, th, data=base)
    src = np.ascontiguousarray(x.transpose(2, 0, 1)) if chw else x
    with gltensor.Upload(img.name, backend=backend) as up:
        up.write(source(backend, src), flip=flip, layout="chw" if chw else "hwc", region=(x0, y0, w, h))
    want = base.copy()
    stored = model_stored(fmt, x)
    want[y0:y0 + h, x0:x0 + w] = stored[::-1] if flip else stored
    assert_array_equal(img.reference(), want)
    img.delete()


@pytest.mark.parametrize("current", ["none", "other"])
def test_released_without_its_context_current(backend, current, ctx, make_texture):
    """An Upload dropped while no context (or another one) is current is released in its own context, and
    the caller's current context is left as it was. On NVIDIA a texture still registered with CUDA cannot be
    reallocated (GL_INVALID_OPERATION): reallocating it afterwards proves the registration went."""
    import ctypes
    import gc

    from OpenGL import EGL

    fmt = BY_KEY["RGBA8"]
    img = empty_like_fmt(make_texture, fmt, 4, 4)
    up = gltensor.Upload(img.name, backend=backend)
    up.write(source(backend, random_data(fmt, 4, 4, seed=1)))
    other = gltensor.Context.headless() if current == "other" else None
    try:
        if other is None:
            ctx.release()
        before = ctypes.cast(EGL.eglGetCurrentContext(), ctypes.c_void_p).value
        del up
        gc.collect()
        assert ctypes.cast(EGL.eglGetCurrentContext(), ctypes.c_void_p).value == before, "the caller's current context must be put back"
    finally:
        if other is not None:
            other.close()
        ctx.make_current()
    img.reallocate(fmt, 8, 8, data=np.zeros((8, 8, 4), np.uint8))
    check_gl("reallocating the texture after its Upload was released")
    x = random_data(fmt, 8, 8, seed=2)
    gltensor.upload(img.name, source(backend, x), backend=backend)
    assert_array_equal(img.reference(), x[::-1])
