"""Multisampled images (renderbuffers with samples, GL_TEXTURE_2D_MULTISAMPLE textures), colour and depth: a
capture equals GL's own resolve, i.e. the test's glBlitFramebuffer into a single-sample renderbuffer of the
same format read back with glReadPixels (glhelpers.resolve), exactly.

Content: two overlapping triangles with per-vertex colours and depths, drawn with 4 samples, so that pixels
along the edges hold samples that differ (checked: the multisampled resolve differs from a single-sample
drawing of the same scene, and has colours no single-sample drawing has).
"""

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from OpenGL import GL

import gltensor
from formats import BY_KEY
from glhelpers import (GL_TEXTURE_2D_MULTISAMPLE, Target, check_gl, draw_triangles, read_colour, read_depth,
                       read_texture, resolve, to_numpy)
from test_convert import convert, frame_values, mismatch

pytestmark = pytest.mark.usefixtures("gl")

SAMPLES = 4
MS_TARGETS = [GL.GL_RENDERBUFFER, GL_TEXTURE_2D_MULTISAMPLE]
MS_TARGET_IDS = ["rbo", "tex2dms"]
COLOUR_KEYS = ["RGBA8", "RGBA16F", "SRGB8_ALPHA8", "RGBA32F", "R8"]
DEPTH_KEYS = ["DEPTH_COMPONENT24", "DEPTH24_STENCIL8", "DEPTH_COMPONENT32F", "DEPTH32F_STENCIL8",
              "DEPTH_COMPONENT16"]


def scene(make_surface, colour_key, depth_key, w, h, target, seed=0, samples=SAMPLES):
    """A multisampled colour + depth pair (same target kind, same samples) with the triangles drawn in."""
    colour = make_surface(colour_key, w, h, target, samples) if colour_key else None
    depth = make_surface(depth_key, w, h, target, samples) if depth_key else None
    with Target(colour, depth) as t:
        draw_triangles(t, seed=seed)
    return colour, depth


def single_sample_drawing(make_surface, key, w, h, seed):
    """The same scene without multisampling, read back (for the self-check that samples differ)."""
    if key.startswith("DEPTH"):
        _, d = scene(make_surface, "RGBA8", key, w, h, GL.GL_RENDERBUFFER, seed=seed, samples=0)
        return read_depth(d)
    c, _ = scene(make_surface, key, "DEPTH24_STENCIL8", w, h, GL.GL_RENDERBUFFER, seed=seed, samples=0)
    return read_colour(c)


def check_samples_differ(make_surface, key, resolved, seed):
    """Test content: the scene has edges where a multisampled resolve differs from single sampling."""
    single = single_sample_drawing(make_surface, key, resolved.shape[1], resolved.shape[0], seed)
    differ = np.any(single != resolved, axis=-1)
    assert differ.sum() >= 10, "test content: the multisampled resolve looks like a single-sample drawing"
    if not key.startswith("DEPTH") and key not in ("R8",):
        singles = {tuple(p) for p in single.reshape(-1, single.shape[-1]).tolist()}
        mixed = [tuple(p) for p in resolved[differ].tolist() if tuple(p) not in singles]
        assert mixed, "test content: no edge pixel mixes samples of different colours"


def cap_of(capture, surface, backend):
    return capture(surface.name, surface.target, backend=backend)


# ---------------------------------------------------------------- colour


@pytest.mark.parametrize("key", COLOUR_KEYS)
@pytest.mark.parametrize("target", MS_TARGETS, ids=MS_TARGET_IDS)
def test_colour_equals_blit_resolve(backend, target, key, make_surface, capture):
    colour, _ = scene(make_surface, key, "DEPTH24_STENCIL8", 61, 37, target, seed=1)
    ref = resolve(colour)
    check_samples_differ(make_surface, key, ref, seed=1)
    cap = cap_of(capture, colour, backend)
    fmt = BY_KEY[key]
    assert cap.format == fmt.reported
    assert cap.shape == (37, 61, fmt.channels) and cap.dtype == fmt.dtype
    assert cap.target == ("GL_RENDERBUFFER" if target == GL.GL_RENDERBUFFER else "GL_TEXTURE_2D_MULTISAMPLE")
    frame = cap.read(flip=False)
    check_gl("after a multisampled read")
    assert frame.shape == ref.shape and frame.dtype == fmt.dtype
    assert_array_equal(to_numpy(frame), ref)
    assert_array_equal(to_numpy(cap.read()), ref[::-1])


@pytest.mark.parametrize("target", MS_TARGETS, ids=MS_TARGET_IDS)
def test_colour_follows_new_draws(backend, target, make_surface, capture):
    colour, depth = scene(make_surface, "RGBA8", "DEPTH24_STENCIL8", 40, 30, target, seed=0)
    cap = cap_of(capture, colour, backend)
    previous = None
    for seed in range(4):
        with Target(colour, depth) as t:
            draw_triangles(t, seed=seed, clear=(0.1 * seed, 0.2, 0.3, 1.0))
        ref = resolve(colour)
        if previous is not None:
            assert not np.array_equal(ref, previous), "test content did not change"
        assert_array_equal(to_numpy(cap.read(flip=False)), ref, err_msg=f"draw {seed}: a stale resolve?")
        previous = ref


@pytest.mark.parametrize("dtype,channels,layout", [("float32", "bgr", "chw"), ("uint8", None, "hwc"),
                                                   ("bfloat16", "a", "chw"), ("float16", (2, 1, 0), "hwc")])
def test_colour_conversions_of_the_resolve(backend, dtype, channels, layout, make_surface, capture):
    if dtype == "bfloat16":
        pytest.importorskip("torch")
    colour, _ = scene(make_surface, "RGBA16F", "DEPTH_COMPONENT24", 33, 21, GL.GL_RENDERBUFFER, seed=2)
    ref = resolve(colour)
    cap = cap_of(capture, colour, backend)
    fmt = BY_KEY["RGBA16F"]
    for flip in (False, True):
        want, nan = convert(ref, fmt, channels, dtype, layout, flip)
        frame = cap.read(flip=flip, dtype=dtype, channels=channels, layout=layout)
        err = mismatch(frame_values(frame), want, nan, dtype)
        assert err is None, f"flip={flip}: {err}"


# ---------------------------------------------------------------- depth


@pytest.mark.parametrize("key", DEPTH_KEYS)
@pytest.mark.parametrize("target", MS_TARGETS, ids=MS_TARGET_IDS)
def test_depth_equals_blit_resolve(backend, target, key, make_surface, capture):
    _, depth = scene(make_surface, "RGBA8", key, 53, 29, target, seed=3)
    ref = resolve(depth)
    assert ref.dtype == np.float32 and ref.shape == (29, 53, 1)
    check_samples_differ(make_surface, key, ref, seed=3)
    cap = cap_of(capture, depth, backend)
    assert cap.format == "GL_" + key and cap.dtype == "float32" and cap.shape == (29, 53, 1)
    assert_array_equal(to_numpy(cap.read(flip=False)), ref)
    assert_array_equal(to_numpy(cap.read()), ref[::-1])
    n, f = 0.25, 40.0
    lin = to_numpy(cap.read(flip=False, depth="linear", near=n, far=f))
    want = (f * n / (f - ref.astype(np.float64) * (f - n))).astype(np.float32)
    assert_array_equal(lin, want)


def test_depth_only_framebuffer(backend, make_surface, capture):
    """A multisampled depth image drawn without any colour attachment."""
    _, depth = scene(make_surface, None, "DEPTH_COMPONENT32F", 31, 19, GL.GL_RENDERBUFFER, seed=4)
    ref = resolve(depth)
    assert len(np.unique(ref)) > 50
    assert_array_equal(to_numpy(cap_of(capture, depth, backend).read(flip=False)), ref)


# ---------------------------------------------------------------- caller's state


def _state():
    return {
        "scissor_test": bool(GL.glIsEnabled(GL.GL_SCISSOR_TEST)),
        "scissor_box": [int(v) for v in GL.glGetIntegerv(GL.GL_SCISSOR_BOX)],
        "framebuffer_srgb": bool(GL.glIsEnabled(GL.GL_FRAMEBUFFER_SRGB)),
        "colour_mask": [bool(v) for v in GL.glGetBooleanv(GL.GL_COLOR_WRITEMASK)],
        "depth_mask": bool(GL.glGetBooleanv(GL.GL_DEPTH_WRITEMASK)),
        "read_fbo": int(GL.glGetIntegerv(GL.GL_READ_FRAMEBUFFER_BINDING)),
        "draw_fbo": int(GL.glGetIntegerv(GL.GL_DRAW_FRAMEBUFFER_BINDING)),
        "rbo": int(GL.glGetIntegerv(GL.GL_RENDERBUFFER_BINDING)),
        "tex2dms": int(GL.glGetIntegerv(GL.GL_TEXTURE_BINDING_2D_MULTISAMPLE)),
        "tex2d": int(GL.glGetIntegerv(GL.GL_TEXTURE_BINDING_2D)),
        "pbo": int(GL.glGetIntegerv(GL.GL_PIXEL_PACK_BUFFER_BINDING)),
        "pack_alignment": int(GL.glGetIntegerv(GL.GL_PACK_ALIGNMENT)),
        "viewport": [int(v) for v in GL.glGetIntegerv(GL.GL_VIEWPORT)],
    }


@pytest.mark.parametrize("key", ["RGBA8", "SRGB8_ALPHA8", "DEPTH24_STENCIL8"])
@pytest.mark.parametrize("target", MS_TARGETS, ids=MS_TARGET_IDS)
def test_scissor_and_caller_state(backend, target, key, make_surface, capture):
    """A scissor test (and sRGB writes, write masks) the caller left enabled affect neither the capture nor stay
    changed: the resolve covers the whole image and every enable is as the caller left it."""
    is_depth = key.startswith("DEPTH")
    colour, depth = scene(make_surface, None if is_depth else key, key if is_depth else "DEPTH24_STENCIL8", 45, 27,
                          target, seed=5)
    img = depth if is_depth else colour
    ref = resolve(img)
    cap = cap_of(capture, img, backend)
    tex = int(GL.glGenTextures(1))
    try:
        with Target(colour, depth, binding=GL.GL_DRAW_FRAMEBUFFER):  # the caller's own framebuffer stays bound
            GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
            GL.glEnable(GL.GL_SCISSOR_TEST)
            GL.glScissor(3, 4, 5, 6)
            GL.glEnable(GL.GL_FRAMEBUFFER_SRGB)
            GL.glColorMask(GL.GL_TRUE, GL.GL_FALSE, GL.GL_TRUE, GL.GL_FALSE)
            GL.glDepthMask(GL.GL_FALSE)
            GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 8)
            GL.glViewport(1, 2, 3, 4)
            before = _state()
            got = [to_numpy(cap.read(flip=False)).copy() for _ in range(2)]
            after = _state()
            check_gl("after a multisampled read with the caller's scissor on")
    finally:
        GL.glDisable(GL.GL_SCISSOR_TEST)
        GL.glDisable(GL.GL_FRAMEBUFFER_SRGB)
        GL.glColorMask(GL.GL_TRUE, GL.GL_TRUE, GL.GL_TRUE, GL.GL_TRUE)
        GL.glDepthMask(GL.GL_TRUE)
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 4)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        GL.glDeleteTextures(1, [tex])
    assert after == before, "a multisampled read changed GL state it does not own"
    assert after["scissor_test"] is True and after["scissor_box"] == [3, 4, 5, 6]
    for g in got:
        assert_array_equal(g, ref, err_msg="the caller's scissor / sRGB / mask state leaked into the resolve")


# ---------------------------------------------------------------- reallocation


def test_resize_and_sample_count_changes(backend, make_surface, capture):
    colour = make_surface("RGBA8", 20, 10, GL.GL_RENDERBUFFER, SAMPLES)
    cap = cap_of(capture, colour, backend)  # a renderbuffer: re-storable while registered, no resizable=True
    for w, h, samples in [(20, 10, SAMPLES), (33, 17, SAMPLES), (33, 17, 2), (12, 40, 0), (25, 9, SAMPLES)]:
        colour.allocate("RGBA8", w, h, samples)
        depth = make_surface("DEPTH24_STENCIL8", w, h, GL.GL_RENDERBUFFER, samples)
        with Target(colour, depth) as t:
            draw_triangles(t, seed=w)
        ref = resolve(colour) if samples else read_colour(colour)
        frame = cap.read(flip=False)
        assert frame.shape == (h, w, 4), f"after reallocation to {w}x{h}, {samples} samples"
        assert_array_equal(to_numpy(frame), ref, err_msg=f"{w}x{h}, {samples} samples")
    check_gl("after reads across reallocations")


def test_colour_to_depth_reallocation(backend, make_surface, capture):
    s = make_surface("RGBA16F", 16, 8, GL.GL_RENDERBUFFER, SAMPLES)
    cap = cap_of(capture, s, backend)
    assert cap.read().shape == (8, 16, 4)
    s.allocate("DEPTH_COMPONENT32F", 16, 8)
    with Target(s) as t:
        draw_triangles(t, seed=9)
    ref = resolve(s)
    frame = cap.read(flip=False)
    assert frame.shape == (8, 16, 1) and frame.dtype == "float32"
    assert_array_equal(to_numpy(frame), ref)


# ---------------------------------------------------------------- batches


@pytest.fixture
def closing(gl):
    made = []
    yield made.append
    gl.make_current()
    for obj in made:
        obj.close()


def test_msaa_in_batch(backend, make_surface, closing):
    """Multisampled renderbuffers and textures (and a single-sample texture) of one format in one batch."""
    w, h = 29, 13
    sources = []
    for k, (target, samples) in enumerate([(GL.GL_RENDERBUFFER, SAMPLES), (GL_TEXTURE_2D_MULTISAMPLE, SAMPLES),
                                          (GL.GL_RENDERBUFFER, 2), (GL.GL_TEXTURE_2D, 0)]):
        c = make_surface("RGBA8", w, h, target, samples)
        d = make_surface("DEPTH24_STENCIL8", w, h, GL.GL_RENDERBUFFER if target != GL_TEXTURE_2D_MULTISAMPLE
                         else target, samples)
        with Target(c, d) as t:
            draw_triangles(t, seed=10 + k, clear=(0.05 * k, 0.4, 0.6, 1.0))
        sources.append(c)
    refs = [resolve(s) if s.samples else read_texture(s.name, s.target, "RGBA8", w, h) for s in sources]
    assert len({r.tobytes() for r in refs}) == len(refs), "test content: two cameras look the same"
    caps = [gltensor.Capture(s.name, s.target, backend=backend) for s in sources]
    for c in caps:
        closing(c)
    batch = gltensor.Batch(caps, backend=backend)
    closing(batch)
    assert batch.shape == (4, h, w, 4)
    for flip in (False, True):
        got = to_numpy(batch.read(flip=flip))
        for k, ref in enumerate(refs):
            assert_array_equal(got[k], ref[::-1] if flip else ref, err_msg=f"camera {k} flip={flip}")
    frames = batch.read_list(flip=False, dtype="float32", channels="bgr", layout="chw")
    fmt = BY_KEY["RGBA8"]
    for k, (f, ref) in enumerate(zip(frames, refs)):
        want, nan = convert(ref, fmt, "bgr", "float32", "chw", False)
        assert mismatch(frame_values(f), want, nan, "float32") is None, f"read_list camera {k}"
    # new draws: no stale resolves in a batch either
    with Target(sources[0], make_surface("DEPTH24_STENCIL8", w, h, GL.GL_RENDERBUFFER, SAMPLES)) as t:
        draw_triangles(t, seed=99, clear=(1.0, 1.0, 0.0, 1.0))
    refs[0] = resolve(sources[0])
    got = to_numpy(batch.read(flip=False))
    assert_array_equal(got[0], refs[0], err_msg="camera 0 after a new draw")


def test_msaa_depth_in_cpu_batch(make_surface, closing):
    w, h = 23, 11
    depths = []
    for k in range(3):
        _, d = scene(make_surface, "RGBA8", "DEPTH_COMPONENT24", w, h, GL.GL_RENDERBUFFER, seed=20 + k)
        depths.append(d)
    refs = [resolve(d) for d in depths]
    batch = gltensor.Batch([d.name for d in depths], GL.GL_RENDERBUFFER, backend="cpu")
    closing(batch)
    for c in batch.captures:
        closing(c)
    got = to_numpy(batch.read(flip=False))
    assert got.shape == (3, h, w, 1)
    for k, ref in enumerate(refs):
        assert_array_equal(got[k], ref, err_msg=f"camera {k}")


# ---------------------------------------------------------------- refusals that remain


def test_multisampled_stencil_only(backend, make_surface):
    s = make_surface(GL.GL_STENCIL_INDEX8, 8, 4, GL.GL_RENDERBUFFER, SAMPLES)
    with pytest.raises(gltensor.UnsupportedFormatError) as ei:
        gltensor.Capture(s.name, GL.GL_RENDERBUFFER, backend=backend)
    assert "GL_STENCIL_INDEX8" in str(ei.value)


def test_2d_texture_as_multisample_target(backend, make_texture):
    img = make_texture("RGBA8", 4, 4)
    with pytest.raises(gltensor.InvalidObjectError):
        gltensor.Capture(img.name, gltensor.GL_TEXTURE_2D_MULTISAMPLE, backend=backend)


def test_multisample_target_constant():
    assert gltensor.GL_TEXTURE_2D_MULTISAMPLE == GL_TEXTURE_2D_MULTISAMPLE == 0x9100
