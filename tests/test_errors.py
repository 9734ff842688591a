"""Every documented error: the right exception class, and a message that names the object (GL name,
format, target) and says what to do."""

import re

import numpy as np
import pytest
from OpenGL import GL

import gltensor
from formats import UNSUPPORTED_COLOR
from glhelpers import check_gl, gen_renderbuffer, gen_texture, renderbuffer_storage, tex_image_2d, to_numpy

pytestmark = pytest.mark.usefixtures("gl")

# Words a message uses when it tells the reader what to do next. Loose on purpose: the test is that
# there is advice at all, not its wording.
_ADVICE = re.compile(
    r"\b(use|pass|call|make|create|bind|resolve|attach|choose|convert|check|render|blit|copy|allocate|"
    r"install|set|select|keep|give|request|open|re-?create|read|build|rebuild|specify|expected|must|"
    r"should|try|need|needs|instead|only)\b",
    re.IGNORECASE,
)


def assert_message(exc_info, *needles, advice=True):
    """The message is substantial, names every needle (int: as a whole number; tuple: any one of
    its strings, case-insensitive) and, with advice=True, says what to do."""
    msg = str(exc_info.value)
    assert len(msg) >= 15, f"message too short to help: {msg!r}"
    for needle in needles:
        if isinstance(needle, int):
            assert re.search(rf"(?<![0-9]){needle}(?![0-9])", msg), f"message does not name {needle}: {msg!r}"
        else:  # a string, or a tuple of strings of which one must appear
            options = needle if isinstance(needle, tuple) else (needle,)
            assert any(o.lower() in msg.lower() for o in options), f"message does not mention {needle!r}: {msg!r}"
    if advice:
        assert _ADVICE.search(msg), f"message does not say what to do: {msg!r}"


def _name_free_in(kind, candidates):
    """A name from `candidates` that is not a live object of the other kind (texture/renderbuffer)."""
    is_other = GL.glIsTexture if kind == "texture" else GL.glIsRenderbuffer
    for n in candidates:
        if not is_other(n):
            return n
    pytest.skip("could not find a name free in both namespaces")


# ---------------------------------------------------------------- context


def test_no_current_context(ctx, make_texture, capture):
    img = make_texture("RGBA8", 4, 4)
    cap = capture(img, backend="cpu")
    ctx.release()
    try:
        with pytest.raises(gltensor.NoContextError) as ei:
            gltensor.Capture(img.name, GL.GL_TEXTURE_2D, backend="cpu")
        assert_message(ei, "context")
        with pytest.raises(gltensor.NoContextError) as ei:
            cap.read()
        assert_message(ei, "context")
    finally:
        ctx.make_current()
    # and everything works again once the context is back
    assert to_numpy(cap.read()).shape == (4, 4, 4)
    cap2 = capture(img, backend="cpu")
    assert cap2.shape == (4, 4, 4)


def test_no_context_is_gltensor_error(ctx):
    ctx.release()
    try:
        with pytest.raises(gltensor.GLTensorError):
            gltensor.Capture(1, GL.GL_TEXTURE_2D)
    finally:
        ctx.make_current()


def test_wrong_context(backend, ctx, make_texture, capture):
    img = make_texture("RGBA8", 4, 4, seed=1)
    cap = capture(img, backend=backend)
    other = gltensor.Context.headless()  # current now
    try:
        with pytest.raises(gltensor.WrongContextError) as ei:
            cap.read()
        assert_message(ei, "context")
    finally:
        ctx.make_current()
        other.close()
        ctx.make_current()
    # the capture is unharmed and works again in its own context
    np.testing.assert_array_equal(to_numpy(cap.read(flip=False)), img.reference())


# ---------------------------------------------------------------- bad names


@pytest.mark.parametrize("target", [GL.GL_TEXTURE_2D, GL.GL_TEXTURE_RECTANGLE, GL.GL_RENDERBUFFER],
                         ids=["2d", "rect", "rbo"])
def test_name_zero(backend, target):
    with pytest.raises(gltensor.InvalidObjectError) as ei:
        gltensor.Capture(0, target, backend=backend)
    assert_message(ei, 0)
    assert isinstance(ei.value, ValueError)


@pytest.mark.parametrize("target", [GL.GL_TEXTURE_2D, GL.GL_RENDERBUFFER], ids=["2d", "rbo"])
def test_never_created_name(backend, target):
    name = 987654
    assert not GL.glIsTexture(name) and not GL.glIsRenderbuffer(name)
    with pytest.raises(gltensor.InvalidObjectError) as ei:
        gltensor.Capture(name, target, backend=backend)
    assert_message(ei, name)


def test_generated_but_never_bound_texture(backend):
    name = gen_texture()  # a name, but no texture object yet
    try:
        with pytest.raises(gltensor.InvalidObjectError) as ei:
            gltensor.Capture(name, GL.GL_TEXTURE_2D, backend=backend)
        assert_message(ei, name)
    finally:
        GL.glDeleteTextures(1, [name])


@pytest.mark.parametrize("target", [GL.GL_TEXTURE_2D, GL.GL_RENDERBUFFER], ids=["2d", "rbo"])
def test_deleted_before_capture(backend, target, make_image):
    img = make_image(target, "RGBA8", 4, 4)
    img.delete()
    with pytest.raises(gltensor.InvalidObjectError) as ei:
        gltensor.Capture(img.name, target, backend=backend)
    assert_message(ei, img.name)


@pytest.mark.parametrize("target", [GL.GL_TEXTURE_2D, GL.GL_TEXTURE_RECTANGLE, GL.GL_RENDERBUFFER],
                         ids=["2d", "rect", "rbo"])
def test_deleted_after_capture(backend, target, make_image, capture):
    img = make_image(target, "RGBA8", 4, 4)
    cap = capture(img, backend=backend)
    cap.read()
    img.delete()
    for _ in range(2):  # keeps refusing, never crashes
        with pytest.raises(gltensor.InvalidObjectError) as ei:
            cap.read()
        assert_message(ei, img.name)
    check_gl("after reads of a deleted object")
    cap.close()
    cap.close()


def test_wrong_target_texture_as_renderbuffer(backend, make_texture):
    img = make_texture("RGBA8", 4, 4)
    if GL.glIsRenderbuffer(img.name):
        pytest.skip("a renderbuffer happens to have the same number")
    with pytest.raises(gltensor.InvalidObjectError) as ei:
        gltensor.Capture(img.name, GL.GL_RENDERBUFFER, backend=backend)
    assert_message(ei, img.name, ("GL_RENDERBUFFER", "renderbuffer"))


def test_wrong_target_renderbuffer_as_texture(backend, make_renderbuffer):
    # renderbuffer numbers may coincide with live textures: take one that does not
    made = [make_renderbuffer("RGBA8", 2, 2) for _ in range(4)]
    name = _name_free_in("renderbuffer", [img.name for img in made])
    with pytest.raises(gltensor.InvalidObjectError) as ei:
        gltensor.Capture(name, GL.GL_TEXTURE_2D, backend=backend)
    assert_message(ei, name, ("GL_TEXTURE_2D", "2D texture", "texture"))


def test_wrong_target_2d_as_rectangle(backend, make_texture):
    img = make_texture("RGBA8", 4, 4)
    with pytest.raises(gltensor.InvalidObjectError) as ei:
        gltensor.Capture(img.name, GL.GL_TEXTURE_RECTANGLE, backend=backend)
    assert_message(ei, img.name, ("GL_TEXTURE_RECTANGLE", "rectangle"))


def test_wrong_target_rectangle_as_2d(backend, make_texture):
    img = make_texture("RGBA8", 4, 4, target=GL.GL_TEXTURE_RECTANGLE)
    with pytest.raises(gltensor.InvalidObjectError) as ei:
        gltensor.Capture(img.name, GL.GL_TEXTURE_2D, backend=backend)
    assert_message(ei, img.name, ("GL_TEXTURE_2D", "2D"))


@pytest.mark.parametrize("kind", ["2d_array", "3d", "cube"])
def test_other_texture_kinds_as_2d(backend, kind):
    name = gen_texture()
    try:
        if kind == "2d_array":
            GL.glBindTexture(GL.GL_TEXTURE_2D_ARRAY, name)
            GL.glTexImage3D(GL.GL_TEXTURE_2D_ARRAY, 0, GL.GL_RGBA8, 4, 4, 2, 0, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, None)
            GL.glBindTexture(GL.GL_TEXTURE_2D_ARRAY, 0)
        elif kind == "3d":
            GL.glBindTexture(GL.GL_TEXTURE_3D, name)
            GL.glTexImage3D(GL.GL_TEXTURE_3D, 0, GL.GL_RGBA8, 4, 4, 2, 0, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, None)
            GL.glBindTexture(GL.GL_TEXTURE_3D, 0)
        else:
            GL.glBindTexture(GL.GL_TEXTURE_CUBE_MAP, name)
            for face in range(6):
                tex_image_2d(GL.GL_TEXTURE_CUBE_MAP_POSITIVE_X + face, 0, GL.GL_RGBA8, 4, 4, GL.GL_RGBA,
                             GL.GL_UNSIGNED_BYTE)
            GL.glBindTexture(GL.GL_TEXTURE_CUBE_MAP, 0)
        with pytest.raises(gltensor.InvalidObjectError) as ei:
            gltensor.Capture(name, GL.GL_TEXTURE_2D, backend=backend)
        assert_message(ei, name)
    finally:
        GL.glDeleteTextures(1, [name])


@pytest.mark.parametrize("target", [GL.GL_TEXTURE_3D, GL.GL_TEXTURE_CUBE_MAP, 0x1234, 0, -1])
def test_bad_target_value(backend, make_texture, target):
    img = make_texture("RGBA8", 4, 4)
    with pytest.raises((gltensor.InvalidArgumentError, OverflowError, ValueError)) as ei:
        gltensor.Capture(img.name, target, backend=backend)
    if isinstance(ei.value, gltensor.InvalidArgumentError):
        assert_message(ei, "target", advice=False)


def test_negative_name(backend):
    with pytest.raises((gltensor.InvalidObjectError, gltensor.InvalidArgumentError, OverflowError, ValueError)):
        gltensor.Capture(-5, GL.GL_TEXTURE_2D, backend=backend)


def test_non_int_name(backend):
    with pytest.raises(TypeError):
        gltensor.Capture("7", GL.GL_TEXTURE_2D, backend=backend)


# ---------------------------------------------------------------- unsupported formats


# Depth images and multisampled images are captured now (float32 (H, W, 1) depth, resolved multisampled
# images): their positive checks live in test_depth.py and test_msaa.py. What remains refused is below.


def _stencil_texture(w=8, h=4):
    name = gen_texture()
    GL.glBindTexture(GL.GL_TEXTURE_2D, name)
    tex_image_2d(GL.GL_TEXTURE_2D, 0, GL.GL_STENCIL_INDEX8, w, h, GL.GL_STENCIL_INDEX, GL.GL_UNSIGNED_BYTE)
    GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MIN_FILTER, GL.GL_NEAREST)
    GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    return name


def _depth_texture(internal, fmt, typ, w=8, h=4):
    name = gen_texture()
    GL.glBindTexture(GL.GL_TEXTURE_2D, name)
    tex_image_2d(GL.GL_TEXTURE_2D, 0, internal, w, h, fmt, typ)
    GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MIN_FILTER, GL.GL_NEAREST)
    GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    return name


@pytest.fixture
def depth_texture(gl):
    """A GL_DEPTH_COMPONENT24 8x4 texture (no contents needed), deleted after the test."""
    name = _depth_texture(GL.GL_DEPTH_COMPONENT24, GL.GL_DEPTH_COMPONENT, GL.GL_UNSIGNED_INT)
    yield name
    gl.make_current()
    GL.glDeleteTextures(1, [name])


def test_stencil_renderbuffer(backend):
    name = gen_renderbuffer()
    try:
        renderbuffer_storage(name, GL.GL_STENCIL_INDEX8, 8, 4)
        with pytest.raises(gltensor.UnsupportedFormatError) as ei:
            gltensor.Capture(name, GL.GL_RENDERBUFFER, backend=backend)
        assert_message(ei, "GL_STENCIL_INDEX8", name)
        assert isinstance(ei.value, ValueError)
    finally:
        GL.glDeleteRenderbuffers(1, [name])


def test_multisampled_stencil_renderbuffer(backend):
    name = gen_renderbuffer()
    try:
        renderbuffer_storage(name, GL.GL_STENCIL_INDEX8, 8, 4, samples=4)
        with pytest.raises(gltensor.UnsupportedFormatError) as ei:
            gltensor.Capture(name, GL.GL_RENDERBUFFER, backend=backend)
        assert_message(ei, "GL_STENCIL_INDEX8", name)
    finally:
        GL.glDeleteRenderbuffers(1, [name])


def test_stencil_texture(backend):
    name = _stencil_texture()
    try:
        errors = [hex(int(e)) for e in iter(GL.glGetError, GL.GL_NO_ERROR)]
        if errors:
            pytest.skip(f"this GL cannot make GL_STENCIL_INDEX8 textures ({errors})")
        with pytest.raises(gltensor.UnsupportedFormatError) as ei:
            gltensor.Capture(name, GL.GL_TEXTURE_2D, backend=backend)
        assert_message(ei, "GL_STENCIL_INDEX8", name)
    finally:
        GL.glDeleteTextures(1, [name])


@pytest.mark.parametrize("target", [GL.GL_TEXTURE_2D, GL.GL_RENDERBUFFER], ids=["2d", "rbo"])
def test_reallocated_to_stencil_after_capture(backend, target, make_image, capture):
    img = make_image(target, "RGBA8", 8, 4)
    # resizable: NVIDIA's GL refuses to reallocate a texture that stays registered with CUDA (README)
    cap = capture(img, backend=backend, resizable=True)
    cap.read()
    if target == GL.GL_RENDERBUFFER:
        renderbuffer_storage(img.name, GL.GL_STENCIL_INDEX8, 8, 4)
    else:
        GL.glBindTexture(GL.GL_TEXTURE_2D, img.name)
        tex_image_2d(GL.GL_TEXTURE_2D, 0, GL.GL_STENCIL_INDEX8, 8, 4, GL.GL_STENCIL_INDEX, GL.GL_UNSIGNED_BYTE)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    with pytest.raises(gltensor.UnsupportedFormatError) as ei:
        cap.read()
    assert_message(ei, "GL_STENCIL_INDEX8", img.name)


def test_reallocated_to_unsupported_colour_after_capture(backend, make_texture, capture):
    img = make_texture("RGBA8", 8, 4)
    cap = capture(img, backend=backend, resizable=True)
    cap.read()
    GL.glBindTexture(GL.GL_TEXTURE_2D, img.name)
    tex_image_2d(GL.GL_TEXTURE_2D, 0, GL.GL_RGB10_A2, 8, 4, GL.GL_RGBA, GL.GL_UNSIGNED_INT_2_10_10_10_REV)
    GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    with pytest.raises(gltensor.UnsupportedFormatError) as ei:
        cap.read()
    assert_message(ei, "GL_RGB10_A2", img.name)


def test_multisampled_texture_as_2d(backend):
    name = gen_texture()
    try:
        GL.glBindTexture(GL.GL_TEXTURE_2D_MULTISAMPLE, name)
        GL.glTexImage2DMultisample(GL.GL_TEXTURE_2D_MULTISAMPLE, 4, GL.GL_RGBA8, 8, 4, GL.GL_TRUE)
        GL.glBindTexture(GL.GL_TEXTURE_2D_MULTISAMPLE, 0)
        with pytest.raises((gltensor.InvalidObjectError, gltensor.UnsupportedFormatError)) as ei:
            gltensor.Capture(name, GL.GL_TEXTURE_2D, backend=backend)
        assert_message(ei, name)
    finally:
        GL.glDeleteTextures(1, [name])


# ---------------------------------------------------------------- depth read options


@pytest.mark.parametrize("dtype", ["uint8", "float16", "bfloat16", np.uint8, np.float16])
def test_depth_with_other_dtype(backend, depth_texture, capture, dtype):
    cap = capture(depth_texture, backend=backend)
    with pytest.raises(gltensor.InvalidArgumentError) as ei:
        cap.read(dtype=dtype)
    assert_message(ei, ("depth", "float32"))
    assert cap.read(dtype="float32").shape == (4, 8, 1)  # float32 is the depth dtype: accepted


@pytest.mark.parametrize("kwargs", [dict(depth="linear", near=0.1, far=10.0),
                                    dict(depth="linear", near=0.1, far=10.0, projection="orthographic")],
                         ids=["linear", "linear-ortho"])
def test_depth_option_on_colour_image(backend, make_texture, capture, kwargs):
    img = make_texture("RGBA8", 4, 4)
    cap = capture(img, backend=backend)
    with pytest.raises(gltensor.InvalidArgumentError) as ei:
        cap.read(**kwargs)
    assert_message(ei, img.name, ("colour", "color", "depth"))


@pytest.mark.parametrize("kwargs", [dict(depth="linear"), dict(depth="linear", near=0.1),
                                    dict(depth="linear", far=10.0), dict(depth="linear", projection="orthographic")],
                         ids=["no-planes", "near-only", "far-only", "projection-only"])
def test_linear_depth_without_planes(backend, depth_texture, capture, kwargs):
    cap = capture(depth_texture, backend=backend)
    with pytest.raises(TypeError) as ei:
        cap.read(**kwargs)
    assert "near" in str(ei.value) and "far" in str(ei.value), str(ei.value)


@pytest.mark.parametrize("kwargs", [dict(near=1.0, far=1.0), dict(near=10.0, far=1.0), dict(near=0.0, far=10.0),
                                    dict(near=-1.0, far=10.0)], ids=["equal", "reversed", "near0", "near<0"])
def test_linear_depth_bad_planes(backend, depth_texture, capture, kwargs):
    """Planes no perspective projection can have are refused rather than giving inf/negative distances."""
    cap = capture(depth_texture, backend=backend)
    with pytest.raises(ValueError):  # InvalidArgumentError is a ValueError
        cap.read(depth="linear", **kwargs)


@pytest.mark.parametrize("kwargs", [dict(depth="lin"), dict(depth="Linear2"), dict(depth=1),
                                    dict(depth="linear", near=0.1, far=1.0, projection="fisheye")],
                         ids=["lin", "Linear2", "int", "fisheye"])
def test_bad_depth_option_values(backend, depth_texture, capture, kwargs):
    cap = capture(depth_texture, backend=backend)
    with pytest.raises((ValueError, TypeError)):
        cap.read(**kwargs)


@pytest.mark.gpu
def test_depth_in_cuda_batch(ctx, depth_texture, make_texture):
    if ctx.cuda_device is None:
        pytest.skip(f"the session GL context ({ctx.renderer}) runs on no CUDA device")
    colour = make_texture("RGBA8", 8, 4)
    for sources in ([depth_texture], [colour.name, depth_texture]):
        with pytest.raises(gltensor.UnsupportedFormatError) as ei:
            gltensor.Batch(sources, backend="cuda")
        assert_message(ei, depth_texture, "depth")
    check_gl("after refused depth batches")


def test_depth_atlas(backend, depth_texture):
    with pytest.raises(gltensor.UnsupportedFormatError) as ei:
        gltensor.Atlas(depth_texture, tiles=(2, 2), backend=backend)
    assert_message(ei, depth_texture, "depth")
    check_gl("after a refused depth atlas")


@pytest.mark.parametrize("internal,fmt,typ,label", UNSUPPORTED_COLOR, ids=[u[3] for u in UNSUPPORTED_COLOR])
def test_undocumented_color_format(backend, internal, fmt, typ, label):
    name = gen_texture()
    try:
        GL.glBindTexture(GL.GL_TEXTURE_2D, name)
        tex_image_2d(GL.GL_TEXTURE_2D, 0, internal, 8, 4, fmt, typ)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        with pytest.raises(gltensor.UnsupportedFormatError) as ei:
            gltensor.Capture(name, GL.GL_TEXTURE_2D, backend=backend)
        assert_message(ei, name, advice=False)
    finally:
        GL.glDeleteTextures(1, [name])


# ---------------------------------------------------------------- backend argument


@pytest.mark.skipif(gltensor.cuda_available(), reason="CUDA is available here")
@pytest.mark.parametrize("target", [GL.GL_TEXTURE_2D, GL.GL_RENDERBUFFER], ids=["2d", "rbo"])
def test_cuda_backend_unavailable(target, make_image):
    img = make_image(target, "RGBA8", 4, 4)
    with pytest.raises(gltensor.CudaUnavailableError) as ei:
        gltensor.Capture(img.name, target, backend="cuda")
    assert_message(ei, "CUDA")


@pytest.mark.parametrize("bad", ["gpu", "CUDA ", "", "opengl"])
def test_bad_backend_string(make_texture, bad):
    img = make_texture("RGBA8", 4, 4)
    with pytest.raises(ValueError) as ei:
        gltensor.Capture(img.name, GL.GL_TEXTURE_2D, backend=bad)
    if bad.strip():
        assert_message(ei, bad.strip(), advice=False)
    assert "auto" in str(ei.value) and "cpu" in str(ei.value), "the message should list the valid backends"


@pytest.mark.parametrize("bad", [1, b"cpu", "cpu\x00cuda"])  # None is the default ('auto'), #22
def test_bad_backend_type(make_texture, bad):
    img = make_texture("RGBA8", 4, 4)
    with pytest.raises((TypeError, ValueError)):
        gltensor.Capture(img.name, GL.GL_TEXTURE_2D, backend=bad)


# ---------------------------------------------------------------- use after close


def test_read_after_close(backend, make_texture, capture):
    img = make_texture("RGBA8", 4, 4)
    cap = capture(img, backend=backend)
    cap.close()
    assert cap.closed is True
    with pytest.raises(gltensor.ClosedError) as ei:
        cap.read()
    assert_message(ei, "closed", advice=False)
    with pytest.raises(gltensor.ClosedError):
        cap.read(flip=False)
    with pytest.raises(gltensor.ClosedError):
        cap.read(out=np.empty((4, 4, 4), np.uint8))


def test_properties_after_close(backend, make_texture, capture):
    """Properties either keep their last value or raise ClosedError; nothing else, no crash."""
    img = make_texture("RGBA8", 4, 4)
    cap = capture(img, backend=backend)
    cap.close()
    for attr in ["name", "target", "format", "width", "height", "channels", "shape", "dtype", "backend",
                 "backend_reason", "cuda_device"]:
        try:
            getattr(cap, attr)
        except gltensor.ClosedError:
            pass
    assert cap.closed is True


# ---------------------------------------------------------------- bad out=


@pytest.fixture
def cpu_cap(make_texture, capture):
    img = make_texture("RGBA8", 6, 4, seed=9)
    return img, capture(img, backend="cpu")


@pytest.mark.parametrize("shape", [(4, 6, 3), (6, 4, 4), (4, 6), (1, 4, 6, 4), (4, 7, 4), (24, 4)],
                         ids=lambda s: "x".join(map(str, s)))
def test_out_wrong_shape(cpu_cap, shape):
    img, cap = cpu_cap
    out = np.zeros(shape, np.uint8)
    with pytest.raises(gltensor.InvalidArgumentError) as ei:
        cap.read(out=out)
    assert_message(ei, ("shape", "dimension", "(height, width, channels)"), advice=False)
    assert not out.any(), "a refused out= must not be written"


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.float32, np.float16])
def test_out_wrong_dtype(cpu_cap, dtype):
    img, cap = cpu_cap
    with pytest.raises(gltensor.InvalidArgumentError) as ei:
        cap.read(out=np.zeros((4, 6, 4), dtype))
    assert_message(ei, "uint8", advice=False)


def test_out_transposed_view(cpu_cap):
    img, cap = cpu_cap
    base = np.zeros((6, 4, 4), np.uint8)
    out = base.transpose(1, 0, 2)  # shape (4, 6, 4), pixels not contiguous within a row
    assert out.shape == (4, 6, 4)
    with pytest.raises(gltensor.InvalidArgumentError) as ei:
        cap.read(out=out)
    msg = str(ei.value).lower()
    assert "stride" in msg or "contiguous" in msg, msg


@pytest.mark.parametrize("view", ["reversed_channels", "every_other_pixel", "channel_last_fortran"])
def test_out_non_contiguous_pixels(cpu_cap, view):
    img, cap = cpu_cap
    if view == "reversed_channels":
        out = np.zeros((4, 6, 4), np.uint8)[:, :, ::-1]
    elif view == "every_other_pixel":
        out = np.zeros((4, 12, 4), np.uint8)[:, ::2, :]
    else:
        out = np.asfortranarray(np.zeros((4, 6, 4), np.uint8))
    with pytest.raises(gltensor.InvalidArgumentError):
        cap.read(out=out)


def test_out_read_only_numpy(cpu_cap):
    img, cap = cpu_cap
    out = np.zeros((4, 6, 4), np.uint8)
    out.flags.writeable = False
    with pytest.raises(gltensor.InvalidArgumentError) as ei:
        cap.read(out=out)
    msg = str(ei.value).lower()
    assert "read-only" in msg or "readonly" in msg or "writ" in msg, msg
    assert not out.any()


def test_out_not_a_tensor(cpu_cap):
    img, cap = cpu_cap
    for bad in ([[0] * 4] * 6, "pixels", 42, object()):
        with pytest.raises((gltensor.InvalidArgumentError, TypeError)):
            cap.read(out=bad)


def test_out_torch_wrong_dtype(cpu_cap):
    torch = pytest.importorskip("torch")
    img, cap = cpu_cap
    with pytest.raises(gltensor.InvalidArgumentError):
        cap.read(out=torch.zeros((4, 6, 4), dtype=torch.int16))


def test_out_torch_wrong_shape(cpu_cap):
    torch = pytest.importorskip("torch")
    img, cap = cpu_cap
    with pytest.raises(gltensor.InvalidArgumentError):
        cap.read(out=torch.zeros((4, 6, 3), dtype=torch.uint8))


def test_out_after_refusal_capture_still_works(cpu_cap):
    img, cap = cpu_cap
    with pytest.raises(gltensor.InvalidArgumentError):
        cap.read(out=np.zeros((1, 1, 1), np.uint8))
    np.testing.assert_array_equal(to_numpy(cap.read(flip=False)), img.reference())


# ---------------------------------------------------------------- bad stream


@pytest.mark.parametrize("bad", ["stream", 1.5, object(), [1]], ids=["str", "float", "object", "list"])
def test_bad_stream_object(backend, make_texture, capture, bad):
    img = make_texture("RGBA8", 4, 4)
    cap = capture(img, backend=backend)
    with pytest.raises((gltensor.InvalidArgumentError, TypeError)):
        cap.read(stream=bad)


class _FakeTorchStream:
    cuda_stream = "not an int"


class _FakeCupyStream:
    ptr = None


@pytest.mark.parametrize("bad", [_FakeTorchStream(), _FakeCupyStream()], ids=["cuda_stream", "ptr"])
def test_bad_stream_attribute(backend, make_texture, capture, bad):
    img = make_texture("RGBA8", 4, 4)
    cap = capture(img, backend=backend)
    with pytest.raises((gltensor.InvalidArgumentError, TypeError)):
        cap.read(stream=bad)


def test_stream_on_cpu_backend(make_texture, capture):
    """A CUDA stream means nothing to the CPU backend: refused, not ignored."""
    img = make_texture("RGBA8", 4, 4)
    cap = capture(img, backend="cpu")
    with pytest.raises(gltensor.InvalidArgumentError):
        cap.read(stream=12345)


def test_errors_leave_no_gl_error(backend, make_texture, capture):
    img = make_texture("RGBA8", 4, 4)
    for call in (
        lambda: gltensor.Capture(0, GL.GL_TEXTURE_2D, backend=backend),
        lambda: gltensor.Capture(987654, GL.GL_TEXTURE_2D, backend=backend),
        lambda: gltensor.Capture(img.name, GL.GL_RENDERBUFFER, backend=backend),
    ):
        with pytest.raises(gltensor.GLTensorError):
            call()
        check_gl("after a refused Capture()")


def test_refresh_after_close(backend, make_texture, capture):
    img = make_texture("RGBA8", 4, 4)
    cap = capture(img, backend=backend)
    if not hasattr(cap, "refresh"):
        pytest.skip("Capture.refresh() is not part of this build")
    cap.close()
    with pytest.raises(gltensor.ClosedError):
        cap.refresh()


def test_refresh_of_deleted_object(backend, make_texture, capture):
    img = make_texture("RGBA8", 4, 4)
    cap = capture(img, backend=backend)
    if not hasattr(cap, "refresh"):
        pytest.skip("Capture.refresh() is not part of this build")
    img.delete()
    with pytest.raises(gltensor.InvalidObjectError) as ei:
        cap.refresh()
    assert_message(ei, img.name)


def _in_thread(fn):
    import threading

    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    t.join(60)
    assert not t.is_alive()
    return box


def test_read_from_thread_without_context(backend, make_texture, capture):
    img = make_texture("RGBA8", 4, 4)
    cap = capture(img, backend=backend)
    box = _in_thread(cap.read)
    assert isinstance(box.get("error"), gltensor.NoContextError), box


def test_read_from_thread_with_the_context_moved_there(backend, ctx, make_texture, capture):
    """The same context made current in another thread is the right context, not a wrong one."""
    img = make_texture("RGBA8", 6, 5, seed=3)
    cap = capture(img, backend=backend)
    ref = img.reference()

    def work():
        ctx.make_current()
        try:
            return to_numpy(cap.read(flip=False)).copy()
        finally:
            ctx.release()

    ctx.release()
    try:
        box = _in_thread(work)
    finally:
        ctx.make_current()
    assert "error" not in box, box.get("error")
    np.testing.assert_array_equal(box["value"], ref)
