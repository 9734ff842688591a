"""Depth captures: float32 (H, W, 1) window depth equal to glReadPixels(GL_DEPTH_COMPONENT, GL_FLOAT), and
linear (eye-space) depth of a plane rendered at known distances within 1e-4 relative of the analytic value.

Ground truth is GL's own depth read-back (glhelpers.read_depth, through a framebuffer of the test's own),
never gltensor. Depth is produced by drawing, as a renderer would: per-pixel pseudo-random gl_FragDepth
(glhelpers.draw_depth_noise: many distinct values, exact 0 and 1 in columns 0 and 1) or planes facing the
camera through a perspective or orthographic projection (glhelpers.draw_planes).
"""

import ctypes

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from OpenGL import GL
from OpenGL.raw.GL.VERSION.GL_1_1 import glTexSubImage2D as raw_tex_sub_image_2d

import gltensor
from glhelpers import DEPTH, READ_STATE, Target, check_gl, draw_depth_noise, draw_planes, gl_state as read_gl_state, read_depth, to_numpy

pytestmark = pytest.mark.usefixtures("gl")

TARGETS = [GL.GL_TEXTURE_2D, GL.GL_TEXTURE_RECTANGLE, GL.GL_RENDERBUFFER]
TARGET_IDS = ["2d", "rect", "rbo"]
# The five depth formats of the issue, plus the two others the docs list.
KEYS = ["DEPTH_COMPONENT16", "DEPTH_COMPONENT24", "DEPTH_COMPONENT32F", "DEPTH24_STENCIL8", "DEPTH32F_STENCIL8"]
ALL_KEYS = KEYS + ["DEPTH_COMPONENT32", "DEPTH_COMPONENT"]


def noise(surface, seed=0):
    with Target(surface) as t:
        draw_depth_noise(t, seed)
    ref = read_depth(surface)
    # test self-check: the content has many values, both ends, and is not flip-symmetric
    assert ref.min() == 0.0 and ref.max() == 1.0, "test content: no exact 0 / 1 depth"
    if surface.height > 1:
        assert not np.array_equal(ref, ref[::-1]), "test content: flip-symmetric depth"
    return ref


def cap_of(capture, surface, backend):
    return capture(surface.name, surface.target, backend=backend)


def read_np(cap, **kwargs):
    return to_numpy(cap.read(**kwargs))


# ---------------------------------------------------------------- raw (window) depth is GL's own read-back, exactly


@pytest.mark.parametrize("size", [(1, 1), (37, 23), (640, 3)], ids=["1x1", "37x23", "640x3"])
@pytest.mark.parametrize("key", ALL_KEYS)
@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
def test_raw_equals_read_pixels(backend, target, key, size, make_surface, capture):
    w, h = size
    s = make_surface(key, w, h, target)
    with Target(s) as t:
        draw_depth_noise(t, seed=w + h)
    ref = read_depth(s)
    cap = cap_of(capture, s, backend)
    assert cap.dtype == "float32"
    assert cap.shape == (h, w, 1) and cap.channels == 1
    assert cap.format == ("GL_DEPTH_COMPONENT" if key == "DEPTH_COMPONENT" else "GL_" + key)

    bottom_up = cap.read(flip=False)
    check_gl("after a depth read")
    assert bottom_up.shape == (h, w, 1) and bottom_up.dtype == "float32"
    got = to_numpy(bottom_up)
    assert got.dtype == np.float32
    assert_array_equal(got, ref)
    assert_array_equal(read_np(cap, flip=True), ref[::-1])
    assert_array_equal(read_np(cap), ref[::-1], err_msg="read() must default to flip=True")
    assert_array_equal(read_np(cap, depth="window"), ref[::-1])
    assert_array_equal(read_np(cap, depth="raw", flip=False), ref)
    assert_array_equal(read_np(cap, dtype="float32", flip=False), ref)
    assert_array_equal(read_np(cap, dtype=np.float32, flip=False), ref)


# Every stored value of the fixed-point formats, uploaded directly (not drawn), so that a last-bit
# difference in any one conversion shows. On the CUDA backend 16/24-bit depth goes through the compute
# shader of src/read/gl_stage.c, whose arithmetic must reproduce the driver's glReadPixels for all of them.
FIXED_KEYS = ["DEPTH_COMPONENT16", "DEPTH_COMPONENT24", "DEPTH24_STENCIL8"]


def every_value(key):
    if key == "DEPTH_COMPONENT16":
        return 256, 256, GL.GL_DEPTH_COMPONENT, GL.GL_UNSIGNED_SHORT, np.arange(1 << 16, dtype=np.uint16)
    v = np.arange(1 << 24, dtype=np.uint32) << 8
    if key == "DEPTH24_STENCIL8":  # packed depth << 8 | stencil: stored exactly
        return 4096, 4096, GL.GL_DEPTH_STENCIL, GL.GL_UNSIGNED_INT_24_8, v | 0x5A
    return 4096, 4096, GL.GL_DEPTH_COMPONENT, GL.GL_UNSIGNED_INT, v | 0x80  # rounds to the 24-bit value


def every_value_surface(make_surface, key, target):
    w, h, fmt, typ, values = every_value(key)
    tex = make_surface(key, w, h, GL.GL_TEXTURE_2D)
    GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 1)
    GL.glBindTexture(GL.GL_TEXTURE_2D, tex.name)
    raw_tex_sub_image_2d(GL.GL_TEXTURE_2D, 0, 0, 0, w, h, fmt, typ, values.ctypes.data_as(ctypes.c_void_p))
    GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 4)
    s = tex
    if target == GL.GL_RENDERBUFFER:  # same-format depth blits copy the stored values exactly
        s = make_surface(key, w, h, target)
        with Target(tex, binding=GL.GL_READ_FRAMEBUFFER), Target(s, binding=GL.GL_DRAW_FRAMEBUFFER):
            GL.glBlitFramebuffer(0, 0, w, h, 0, 0, w, h, GL.GL_DEPTH_BUFFER_BIT, GL.GL_NEAREST)
    check_gl("uploading every depth value")
    ref = read_depth(s)
    assert np.unique(ref).size > 0.9 * values.size, "test content: the upload did not keep the values apart"
    return s, ref


def differing(got, ref):
    return np.flatnonzero(got.view(np.uint32) != ref.view(np.uint32))


def assert_bit_equal(got, ref):
    bad = differing(got, ref)
    assert bad.size == 0, "%d of %d values differ from glReadPixels, first at %d: %r != %r" % (
        bad.size, ref.size, bad[0], got.flat[bad[0]], ref.flat[bad[0]])


@pytest.mark.parametrize("target", [GL.GL_TEXTURE_2D, GL.GL_RENDERBUFFER], ids=["2d", "rbo"])
@pytest.mark.parametrize("key", FIXED_KEYS)
def test_every_fixed_point_value_equals_read_pixels(backend, key, target, make_surface, capture):
    s, ref = every_value_surface(make_surface, key, target)
    got = read_np(cap_of(capture, s, backend), flip=False)
    assert_bit_equal(got, ref)


def cleared_stripes_surface(make_surface, key, target, w=1024, h=16):
    """64 stripes cleared (scissored glClear) to depths between the format's steps; NVIDIA reads such
    regions back differently through glReadPixels than a shader samples them (src/read/depth_probe.c)."""
    s = make_surface(key, w, h, target)
    with Target(s, binding=GL.GL_DRAW_FRAMEBUFFER):
        GL.glEnable(GL.GL_SCISSOR_TEST)
        for i in range(64):
            GL.glScissor(i * (w // 64), 0, w // 64, h)
            GL.glClearDepth(i / 63.0 * 0.999 + 0.0005 * (i % 7))
            GL.glClear(GL.GL_DEPTH_BUFFER_BIT)
        GL.glDisable(GL.GL_SCISSOR_TEST)
        GL.glScissor(0, 0, w, h)
        GL.glClearDepth(1.0)
    check_gl("clearing depth stripes")
    ref = read_depth(s)
    assert np.unique(ref).size >= 60, "test content: the clears did not leave distinct values"
    return s, ref


@pytest.mark.parametrize("target", [GL.GL_TEXTURE_2D, GL.GL_RENDERBUFFER], ids=["2d", "rbo"])
@pytest.mark.parametrize("key", FIXED_KEYS + ["DEPTH_COMPONENT32F"])
def test_cleared_values_equal_read_pixels(backend, key, target, make_surface, capture):
    s, ref = cleared_stripes_surface(make_surface, key, target)
    got = read_np(cap_of(capture, s, backend), flip=False)
    assert_bit_equal(got, ref)


def test_compute_path_chosen_only_where_exact(make_surface, capture, monkeypatch):
    """The once-per-driver check of src/read/depth_probe.c (which makes the compute-shader path the CUDA backend's
    default) must say "exact" exactly when the forced compute path equals glReadPixels for every value."""
    exact = gltensor._gltensor._depth_compute_exact()
    monkeypatch.setenv("GLTENSOR_DEPTH_PATH", "compute")
    wrong = {}
    for key in FIXED_KEYS:
        s, ref = every_value_surface(make_surface, key, GL.GL_TEXTURE_2D)
        wrong[key] = differing(read_np(cap_of(capture, s, "cpu"), flip=False), ref).size
        s, ref = cleared_stripes_surface(make_surface, key, GL.GL_TEXTURE_2D)
        wrong[key + " cleared"] = differing(read_np(cap_of(capture, s, "cpu"), flip=False), ref).size
    assert exact == (not any(wrong.values())), "check says exact=%s; values differing per format: %s" % (exact, wrong)


@pytest.mark.parametrize("key", KEYS)
def test_raw_plane_equals_read_pixels(backend, key, make_surface, capture):
    """A rendered scene (planes through a projection), not only gl_FragDepth."""
    s = make_surface(key, 40, 6, GL.GL_TEXTURE_2D)
    with Target(s) as t:
        draw_planes(t, [0.2, 1.0, 5.0, 30.0, 99.0], near=0.1, far=100.0)
    ref = read_depth(s)
    assert len(np.unique(ref)) == 5, "test content: five planes, five depths"
    cap = cap_of(capture, s, backend)
    assert_array_equal(read_np(cap, flip=False), ref)
    assert_array_equal(read_np(cap), ref[::-1])


@pytest.mark.parametrize("key", ["DEPTH_COMPONENT24", "DEPTH32F_STENCIL8"])
def test_texture_and_renderbuffer_agree(backend, key, make_surface, capture):
    """The same draw into a depth texture and a depth renderbuffer captures identically."""
    tex = make_surface(key, 29, 11, GL.GL_TEXTURE_2D)
    rbo = make_surface(key, 29, 11, GL.GL_RENDERBUFFER)
    refs = [noise(s, seed=4) for s in (tex, rbo)]
    assert_array_equal(refs[0], refs[1], err_msg="test content: GL stored different depth in texture and renderbuffer")
    got = [read_np(cap_of(capture, s, backend)) for s in (tex, rbo)]
    assert_array_equal(got[0], got[1])
    assert_array_equal(got[0], refs[0][::-1])


def test_follows_new_draws(backend, make_surface, capture):
    s = make_surface("DEPTH_COMPONENT32F", 16, 9, GL.GL_RENDERBUFFER)
    cap = cap_of(capture, s, backend)
    previous = None
    for seed in range(4):
        ref = noise(s, seed=seed)
        got = read_np(cap, flip=False)
        if previous is not None:
            assert not np.array_equal(ref, previous)
        assert_array_equal(got, ref, err_msg=f"draw {seed}")
        previous = ref


# ---------------------------------------------------------------- linear depth: the documented formula, exactly


def linear_reference(d, near, far, projection):
    """docs: perspective f*n / (f - d*(f - n)), orthographic n + d*(f - n), in double, stored as float32."""
    d = d.astype(np.float64)
    n, f = float(near), float(far)
    if projection == "perspective":
        return (f * n / (f - d * (f - n))).astype(np.float32)
    return (n + d * (f - n)).astype(np.float32)


@pytest.mark.parametrize("projection", ["perspective", "orthographic"])
@pytest.mark.parametrize("key", KEYS)
def test_linear_is_documented_formula(backend, key, projection, make_surface, capture):
    """Over many window depths (0 and 1 included) linear depth is the documented formula of the raw value."""
    s = make_surface(key, 31, 17, GL.GL_TEXTURE_2D)
    ref = noise(s, seed=11)
    cap = cap_of(capture, s, backend)
    for near, far in [(0.01, 1000.0), (0.5, 20.0), (3.0, 7.0)]:
        for flip in (False, True):
            frame = cap.read(flip=flip, depth="linear", near=near, far=far, projection=projection)
            assert frame.shape == (17, 31, 1) and frame.dtype == "float32"
            want = linear_reference(ref, near, far, projection)
            assert_array_equal(to_numpy(frame), want[::-1] if flip else want,
                               err_msg=f"near={near} far={far} flip={flip}")
            # the planes themselves at the ends
            got = to_numpy(frame)
            col0 = got[:, 0, 0]  # depth 0 -> near plane
            col1 = got[:, 1, 0]  # depth 1 -> far plane
            assert_array_equal(col0, np.float32(near))
            assert_array_equal(col1, np.float32(far))


def test_linear_default_projection_is_perspective(backend, make_surface, capture):
    s = make_surface("DEPTH_COMPONENT32F", 8, 4, GL.GL_TEXTURE_2D)
    ref = noise(s, seed=2)
    cap = cap_of(capture, s, backend)
    got = read_np(cap, flip=False, depth="linear", near=0.1, far=50.0)
    assert_array_equal(got, linear_reference(ref, 0.1, 50.0, "perspective"))


# ---------------------------------------------------------------- linear depth of planes at known distances
#
# Error budget. The distance comes back through GL's pipeline and the depth buffer:
#   - GL computes window depth in float32 (clip z = proj * eye, divide by w, viewport transform). Measured on
#     llvmpipe against the exact value (double): |error| <= 1.7 * 2^-24 for every case below; we allow
#     PIPELINE = 4 * 2^-24 (GPUs do the same float32 arithmetic).
#   - the depth buffer stores d rounded to its format: half a step, 0.5 / (2^16 - 1) for 16-bit,
#     0.5 / (2^24 - 1) for 24-bit, nothing more for float formats (the float result is stored as is).
#   - gltensor's linearisation (double) and its float32 store: 2^-24 relative.
# A window-depth error dd moves the perspective distance z by dz = dd * z^2 (f - n) / (f n): relative error
# dd * z (f - n) / (f n), which grows with z / near. Near the far plane at f / n = 1e5, even one float32 ulp
# of d (6e-8) is 6e-8 * 1e5 = 6e-3 relative: 1e-4 there is impossible for any format (float depth does not
# help, since the pipeline itself computes d in float32; only reversed-Z would). Orthographic: dz = dd * (f - n),
# relative dd (f - n) / z, which is worst near the near plane.
# So each (format, near, far, projection) case keeps the candidate distances whose worst-case error, computed
# below by pushing the exact d by the whole budget through the exact inverse, is at most half the 1e-4
# tolerance; the test then asserts the real error is within 1e-4. The tolerance is never widened: the
# distances are chosen where the format's precision makes 1e-4 a meaningful requirement. Every case keeps at
# least three distances (asserted), so 16-bit formats are tested at distances near the near plane (perspective)
# or far from it (orthographic), and DEPTH32F covers the extreme 0.01..1000 range.

TOLERANCE = 1e-4
PIPELINE = 4 * 2.0**-24
PLANES = [(0.01, 1000.0), (0.01, 1.0), (0.1, 100.0), (1.0, 1000.0), (10.0, 1000.0), (0.5, 5.0)]


def window_depth(dist, near, far, projection):
    """Exact window depth (double) of a point at eye-space distance `dist`, glDepthRange(0, 1)."""
    n, f, z = float(near), float(far), float(dist)
    if projection == "perspective":
        ndc = ((f + n) * z - 2 * f * n) / ((f - n) * z)
    else:
        ndc = (2 * z - (f + n)) / (f - n)
    return 0.5 * ndc + 0.5


def inverse(d, near, far, projection):
    n, f = float(near), float(far)
    return f * n / (f - d * (f - n)) if projection == "perspective" else n + d * (f - n)


def budget(key, dist, near, far, projection):
    bits = DEPTH[key][3]
    quant = 0.5 / (2.0**bits - 1) if bits else 0.0
    d = window_depth(dist, near, far, projection)
    worst = 0.0
    for dd in (-(PIPELINE + quant), PIPELINE + quant):
        e = min(max(d + dd, 0.0), 1.0)
        worst = max(worst, abs(inverse(e, near, far, projection) - dist) / dist)
    return worst + 2.0**-24


def distances_for(key, near, far, projection):
    n, f = near, far
    candidates = set(np.geomspace(n * 1.05, f * 0.95, 10).tolist())
    candidates |= {n * k for k in (1.05, 1.5, 2, 3, 5)} | {f * k for k in (0.3, 0.5, 0.8, 0.95)}
    kept = sorted(z for z in candidates if n < z < f and budget(key, z, near, far, projection) <= TOLERANCE / 2)
    assert len(kept) >= 3, f"{key} {projection} near={near} far={far}: only {kept} fit the error budget"
    return kept


@pytest.mark.parametrize("projection", ["perspective", "orthographic"])
@pytest.mark.parametrize("near,far", PLANES, ids=[f"{n:g}-{f:g}" for n, f in PLANES])
@pytest.mark.parametrize("key", KEYS)
def test_linear_plane_distance(backend, key, near, far, projection, make_surface, capture):
    dists = distances_for(key, near, far, projection)
    strip = 3
    s = make_surface(key, strip * len(dists), 4, GL.GL_TEXTURE_2D)
    with Target(s) as t:
        draw_planes(t, dists, near, far, projection)
    raw = read_depth(s)
    cap = cap_of(capture, s, backend)
    assert_array_equal(read_np(cap, flip=False), raw)
    got = read_np(cap, flip=False, depth="linear", near=near, far=far, projection=projection)
    assert got.shape == raw.shape and got.dtype == np.float32
    # the formula, exactly, on GL's own window depth
    assert_array_equal(got, linear_reference(raw, near, far, projection))
    want = np.repeat(np.asarray(dists, np.float64), strip)[None, :, None]
    rel = np.abs(got.astype(np.float64) - want) / want
    worst = np.unravel_index(np.argmax(rel), rel.shape)
    z = want[0, worst[1], 0]
    assert rel.max() <= TOLERANCE, (
        f"linear depth {got[worst]} at x={worst[1]} is {rel.max():.3g} relative off the analytic distance {z} "
        f"(window depth {raw[worst]}, exact {window_depth(z, near, far, projection)})")


def test_budget_excludes_what_it_should():
    """Self-check of the budget: it rejects what precision cannot deliver and accepts what it can."""
    assert budget("DEPTH_COMPONENT16", 900.0, 0.01, 1000.0, "perspective") > 0.1
    assert budget("DEPTH_COMPONENT32F", 500.0, 0.01, 1000.0, "perspective") > TOLERANCE
    assert budget("DEPTH_COMPONENT32F", 0.02, 0.01, 1000.0, "perspective") < TOLERANCE / 10
    assert budget("DEPTH_COMPONENT16", 0.05, 0.01, 1000.0, "orthographic") > TOLERANCE
    assert budget("DEPTH_COMPONENT24", 900.0, 0.01, 1000.0, "orthographic") < TOLERANCE / 10


# ---------------------------------------------------------------- layouts, channels, out=


def test_chw_layout(backend, make_surface, capture):
    s = make_surface("DEPTH24_STENCIL8", 13, 7, GL.GL_TEXTURE_2D)
    ref = noise(s, seed=5)
    cap = cap_of(capture, s, backend)
    frame = cap.read(layout="chw")
    assert frame.shape == (1, 7, 13)
    assert_array_equal(to_numpy(frame), ref[::-1].transpose(2, 0, 1))
    lin = read_np(cap, layout="chw", flip=False, depth="linear", near=0.1, far=10.0)
    assert_array_equal(lin, linear_reference(ref, 0.1, 10.0, "perspective").transpose(2, 0, 1))


def test_channel_r_selects_depth(backend, make_surface, capture):
    s = make_surface("DEPTH_COMPONENT32F", 9, 5, GL.GL_RENDERBUFFER)
    ref = noise(s, seed=6)
    cap = cap_of(capture, s, backend)
    assert_array_equal(read_np(cap, channels="r", flip=False), ref)
    assert_array_equal(read_np(cap, channels=(0,), flip=False), ref)
    for bad in ("g", "rg", (1,)):
        with pytest.raises(gltensor.InvalidArgumentError):
            cap.read(channels=bad)


@pytest.mark.parametrize("channels", [(0, 0, 0), "rrr", (0, 0)], ids=["idx000", "rrr", "idx00"])
def test_repeated_depth_channel(backend, channels, make_surface, capture):
    """Asking for the depth channel several times either is refused or repeats it; never garbage."""
    s = make_surface("DEPTH_COMPONENT32F", 9, 5, GL.GL_TEXTURE_2D)
    ref = noise(s, seed=7)
    cap = cap_of(capture, s, backend)
    try:
        frame = cap.read(channels=channels, flip=False)
    except gltensor.InvalidArgumentError:
        return
    n = len(channels)
    assert frame.shape == (5, 9, n)
    assert_array_equal(to_numpy(frame), np.repeat(ref, n, axis=2),
                       err_msg=f"channels={channels!r} on a depth image gave a {frame.shape} frame that does not "
                               "repeat the depth")


def test_read_into_out(make_surface, capture):
    s = make_surface("DEPTH_COMPONENT24", 12, 5, GL.GL_TEXTURE_2D)
    ref = noise(s, seed=8)
    cap = cap_of(capture, s, "cpu")
    out = np.zeros((5, 12, 1), np.float32)
    assert cap.read(out=out, flip=False) is out
    assert_array_equal(out, ref)
    big = np.full((5, 20, 1), 7.0, np.float32)
    view = big[:, 4:16]  # padded rows
    assert cap.read(out=view, depth="linear", near=1.0, far=2.0) is view
    assert_array_equal(view, linear_reference(ref, 1.0, 2.0, "perspective")[::-1])
    assert (big[:, :4] == 7).all() and (big[:, 16:] == 7).all(), "read(out=) wrote outside the view"
    chw = np.zeros((1, 5, 12), np.float32)
    assert cap.read(out=chw, layout="chw", flip=False) is chw
    assert_array_equal(chw, ref.transpose(2, 0, 1))
    for bad in (np.zeros((5, 12, 1), np.float16), np.zeros((5, 12, 1), np.uint8), np.zeros((5, 12, 4), np.float32),
                np.zeros((1, 5, 12), np.float32)):
        with pytest.raises(gltensor.InvalidArgumentError):
            cap.read(out=bad)


def test_read_into_torch_out(backend, make_surface, capture):
    torch = pytest.importorskip("torch")
    if backend == "cuda" and not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    s = make_surface("DEPTH32F_STENCIL8", 10, 6, GL.GL_RENDERBUFFER)
    ref = noise(s, seed=9)
    cap = cap_of(capture, s, backend)
    out = torch.zeros((6, 10, 1), dtype=torch.float32, device=backend)
    assert cap.read(out=out, flip=False, depth="linear", near=0.2, far=80.0, projection="orthographic") is out
    if backend == "cuda":
        torch.cuda.synchronize()
    assert_array_equal(out.cpu().numpy(), linear_reference(ref, 0.2, 80.0, "orthographic"))


# ---------------------------------------------------------------- reallocation between reads


@pytest.mark.parametrize("resizable", [False, True], ids=["registered", "resizable"])
@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
def test_resize_between_reads(backend, target, resizable, make_surface, capture):
    s = make_surface("DEPTH_COMPONENT24", 11, 6, target)
    # depth images are never registered with CUDA themselves (GL copies them into a buffer that is), so
    # reallocating them under a default capture is fine too
    cap = capture(s.name, s.target, backend=backend, resizable=resizable)
    first = noise(s, seed=1)
    assert_array_equal(read_np(cap, flip=False), first)
    for key, w, h in [("DEPTH_COMPONENT24", 23, 9), ("DEPTH32F_STENCIL8", 5, 14), ("DEPTH_COMPONENT16", 64, 2)]:
        s.allocate(key, w, h)
        ref = noise(s, seed=w)
        frame = cap.read(flip=False)
        assert frame.shape == (h, w, 1), f"after reallocation to {key} {w}x{h}"
        assert cap.shape == (h, w, 1) and cap.format == "GL_" + key
        assert_array_equal(to_numpy(frame), ref)
        lin = read_np(cap, depth="linear", near=0.3, far=30.0)
        assert_array_equal(lin, linear_reference(ref, 0.3, 30.0, "perspective")[::-1])
    check_gl("after reads across reallocations")


@pytest.mark.parametrize("target", [GL.GL_TEXTURE_2D, GL.GL_RENDERBUFFER], ids=["2d", "rbo"])
def test_reallocated_colour_to_depth_and_back(backend, target, make_surface, capture):
    """Was UnsupportedFormatError before depth support: a colour image reallocated as depth is now read as depth."""
    s = make_surface("RGBA8", 8, 4, target)
    # resizable: NVIDIA's GL refuses to reallocate a texture that stays registered with CUDA (README)
    cap = capture(s.name, s.target, backend=backend, resizable=True)
    assert cap.read().shape == (4, 8, 4)
    s.allocate("DEPTH_COMPONENT24", 8, 4)
    ref = noise(s, seed=3)
    frame = cap.read(flip=False)
    assert frame.shape == (4, 8, 1) and frame.dtype == "float32"
    assert cap.format == "GL_DEPTH_COMPONENT24" and cap.dtype == "float32"
    assert_array_equal(to_numpy(frame), ref)
    s.allocate("RGBA8", 6, 3)
    with Target(s):
        # 0.6, not 0.5: 0.5 * 255 = 127.5 is a tie that drivers may round either way (NVIDIA gives 127)
        GL.glClearBufferfv(GL.GL_COLOR, 0, (GL.GLfloat * 4)(1.0, 0.0, 0.6, 1.0))
    frame = cap.read()
    assert frame.shape == (3, 6, 4) and frame.dtype == "uint8"
    assert_array_equal(to_numpy(frame)[0, 0], [255, 0, 153, 255])


# ---------------------------------------------------------------- GL state


# The read-path state of glhelpers.READ_STATE, plus what a depth read's GL stage also touches.
_STATE = READ_STATE + [
    (GL.GL_TEXTURE_BINDING_2D_MULTISAMPLE, "tex2dms"),
    (GL.GL_READ_BUFFER, "read_buffer"),
    (GL.GL_DRAW_BUFFER0, "draw_buffer0"),
]


def gl_state():
    state = read_gl_state(_STATE)
    state["scissor_test"] = bool(GL.glIsEnabled(GL.GL_SCISSOR_TEST))
    state["scissor_box"] = [int(v) for v in GL.glGetIntegerv(GL.GL_SCISSOR_BOX)]
    state["depth_test"] = bool(GL.glIsEnabled(GL.GL_DEPTH_TEST))
    state["depth_mask"] = bool(GL.glGetBooleanv(GL.GL_DEPTH_WRITEMASK))
    return state


class CallerState:
    """Unusual but legal state a renderer may leave behind: other objects bound everywhere, the depth image's
    own framebuffer still bound for drawing, scissor on, depth writes off. `pack` also sets pack parameters
    (row length, skips, alignment 8) that a read-back of its own must not inherit."""

    def __init__(self, surface, pack=False):
        self.surface, self.pack = surface, pack

    def __enter__(self):
        self.tex = int(GL.glGenTextures(1))
        self.rect = int(GL.glGenTextures(1))
        self.rbo = int(GL.glGenRenderbuffers(1))
        self.pbo, self.upbo = (int(x) for x in GL.glGenBuffers(2))
        self.read_fbo = int(GL.glGenFramebuffers(1))
        self.target = Target(self.surface, binding=GL.GL_DRAW_FRAMEBUFFER).__enter__()
        GL.glActiveTexture(GL.GL_TEXTURE5)
        GL.glBindTexture(GL.GL_TEXTURE_2D, self.tex)
        GL.glBindTexture(GL.GL_TEXTURE_RECTANGLE, self.rect)
        GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, self.rbo)
        GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, self.read_fbo)
        GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, self.pbo)
        GL.glBufferData(GL.GL_PIXEL_PACK_BUFFER, 64, None, GL.GL_STREAM_READ)
        GL.glBindBuffer(GL.GL_PIXEL_UNPACK_BUFFER, self.upbo)
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 8)
        if self.pack:
            GL.glPixelStorei(GL.GL_PACK_ROW_LENGTH, 3)
            GL.glPixelStorei(GL.GL_PACK_SKIP_ROWS, 2)
            GL.glPixelStorei(GL.GL_PACK_SKIP_PIXELS, 1)
        GL.glEnable(GL.GL_SCISSOR_TEST)
        GL.glScissor(1, 1, 2, 2)
        GL.glEnable(GL.GL_DEPTH_TEST)
        GL.glDepthMask(GL.GL_FALSE)
        return self

    def __exit__(self, *exc):
        GL.glDisable(GL.GL_SCISSOR_TEST)
        GL.glDisable(GL.GL_DEPTH_TEST)
        GL.glDepthMask(GL.GL_TRUE)
        GL.glActiveTexture(GL.GL_TEXTURE5)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        GL.glBindTexture(GL.GL_TEXTURE_RECTANGLE, 0)
        GL.glActiveTexture(GL.GL_TEXTURE0)
        GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, 0)
        GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, 0)
        GL.glBindBuffer(GL.GL_PIXEL_UNPACK_BUFFER, 0)
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 4)
        GL.glPixelStorei(GL.GL_PACK_ROW_LENGTH, 0)
        GL.glPixelStorei(GL.GL_PACK_SKIP_ROWS, 0)
        GL.glPixelStorei(GL.GL_PACK_SKIP_PIXELS, 0)
        self.target.__exit__()
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, 0)
        GL.glDeleteFramebuffers(1, [self.read_fbo])
        GL.glDeleteTextures(2, [self.tex, self.rect])
        GL.glDeleteRenderbuffers(1, [self.rbo])
        GL.glDeleteBuffers(2, [self.pbo, self.upbo])


@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
def test_read_preserves_gl_state(backend, target, make_surface, capture):
    s = make_surface("DEPTH24_STENCIL8", 11, 7, target)
    ref = noise(s, seed=12)
    cap = cap_of(capture, s, backend)
    with CallerState(s):
        before = gl_state()
        raw = read_np(cap, flip=False).copy()
        check_gl("after a depth read with unusual GL state")
        assert gl_state() == before, "a depth read changed GL state it does not own"
        lin = read_np(cap, flip=True, depth="linear", near=0.5, far=9.0).copy()
        assert gl_state() == before, "a linear depth read changed GL state it does not own"
    assert_array_equal(raw, ref, err_msg="scissor / caller bindings affected the depth read")
    assert_array_equal(lin, linear_reference(ref, 0.5, 9.0, "perspective")[::-1])


@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
def test_read_ignores_callers_pack_parameters(backend, target, make_surface, capture):
    """GL_PACK_ROW_LENGTH / SKIP_ROWS / SKIP_PIXELS left set by the caller must not shape gltensor's own
    depth read-back (colour reads reset them; see test_formats.test_read_preserves_gl_state)."""
    s = make_surface("DEPTH_COMPONENT32F", 11, 7, target)
    ref = noise(s, seed=13)
    cap = cap_of(capture, s, backend)
    with CallerState(s, pack=True):
        before = gl_state()
        try:
            raw = read_np(cap, flip=False).copy()
        finally:
            errors = []
            while (e := GL.glGetError()) != GL.GL_NO_ERROR:
                errors.append(hex(int(e)))
        assert not errors, f"GL errors after a depth read with caller pack parameters: {errors}"
        assert gl_state() == before
    assert_array_equal(raw, ref, err_msg="the depth read-back used the caller's GL_PACK_ROW_LENGTH/SKIP_* state")


def test_capture_creation_preserves_gl_state(backend, make_surface, capture):
    s = make_surface("DEPTH32F_STENCIL8", 6, 5, GL.GL_RENDERBUFFER)
    noise(s)
    with CallerState(s):
        before = gl_state()
        cap = cap_of(capture, s, backend)
        assert gl_state() == before, "Capture() of a depth image changed GL state it does not own"


# ---------------------------------------------------------------- batches (CPU; CUDA refuses depth: test_errors)


def test_depth_in_cpu_batch(make_surface, gl):
    surfaces = [make_surface(k, 12, 5, t) for k, t in [("DEPTH_COMPONENT24", GL.GL_TEXTURE_2D),
                                                        ("DEPTH_COMPONENT24", GL.GL_RENDERBUFFER),
                                                        ("DEPTH_COMPONENT24", GL.GL_TEXTURE_RECTANGLE)]]
    refs = [noise(s, seed=20 + i) for i, s in enumerate(surfaces)]
    caps = [gltensor.Capture(s.name, s.target, backend="cpu") for s in surfaces]
    batch = gltensor.Batch(caps, backend="cpu")
    try:
        assert batch.shape == (3, 5, 12, 1)
        stacked = to_numpy(batch.read(flip=False))
        assert stacked.shape == (3, 5, 12, 1) and stacked.dtype == np.float32
        for k, ref in enumerate(refs):
            assert_array_equal(stacked[k], ref, err_msg=f"camera {k}")
        lin = to_numpy(batch.read(depth="linear", near=0.1, far=100.0, layout="chw"))
        assert lin.shape == (3, 1, 5, 12)
        for k, ref in enumerate(refs):
            assert_array_equal(lin[k], linear_reference(ref, 0.1, 100.0, "perspective")[::-1].transpose(2, 0, 1))
        frames = batch.read_list(flip=False, depth="linear", near=1.0, far=3.0, projection="orthographic")
        for k, (f, ref) in enumerate(zip(frames, refs)):
            assert_array_equal(to_numpy(f), linear_reference(ref, 1.0, 3.0, "orthographic"), err_msg=f"camera {k}")
    finally:
        batch.close()
        for c in caps:
            c.close()


def test_mixed_depth_and_colour_read_list_cpu(make_surface, make_texture, gl):
    """read_list takes sources of different formats; depth= applies to depth sources and refuses colour ones."""
    d = make_surface("DEPTH_COMPONENT32F", 7, 3, GL.GL_TEXTURE_2D)
    ref = noise(d, seed=30)
    c = make_texture("RGBA8", 5, 4, seed=3)
    batch = gltensor.Batch([d.name, c.name], backend="cpu")
    try:
        fd, fc = batch.read_list(flip=False)
        assert_array_equal(to_numpy(fd), ref)
        assert_array_equal(to_numpy(fc), c.reference())
        with pytest.raises(gltensor.InvalidArgumentError):
            batch.read_list(depth="linear", near=1.0, far=2.0)
    finally:
        batch.close()
