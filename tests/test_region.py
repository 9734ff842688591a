"""Capture(region=(x, y, w, h)): only that rectangle of the image is read, and it equals the same rectangle cut
out of a full read-back of the same image with NumPy.

The region is in GL window coordinates: (x, y) is its lower-left pixel, row 0 the image's bottom row, so the
NumPy crop of a bottom-up read-back is full[y:y + h, x:x + w], and flip=True gives that crop's rows reversed
(the region's top row first). Ground truth is GL's own read-back (glGetTexImage / glReadPixels through the
test's framebuffer, glhelpers), never gltensor, except where a conversion is compared with the same
conversion of a whole-image capture (linear depth, a driver-dependent depth path).
"""

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from OpenGL import GL

import gltensor
from formats import BY_KEY, random_data
from glhelpers import (GL_TEXTURE_2D_MULTISAMPLE, Target, as_numpy, check_gl, draw_depth_noise, draw_planes,
                       draw_triangles, out_tensor, read_depth, read_framebuffer, render_camera, resolve, tex_image_2d,
                       to_numpy)
from test_convert import convert, frame_values, mismatch

pytestmark = pytest.mark.usefixtures("gl")

TARGETS = [GL.GL_TEXTURE_2D, GL.GL_TEXTURE_RECTANGLE, GL.GL_RENDERBUFFER]
TARGET_IDS = ["2d", "rect", "rbo"]


def crop(full, region):
    """The region of a bottom-up (H, W, C) array."""
    x, y, w, h = region
    return full[y : y + h, x : x + w]


def expect(full, region, flip):
    c = crop(full, region)
    return c[::-1] if flip else c


def read_np(cap, **kw):
    return to_numpy(cap.read(**kw))


@pytest.fixture
def closing(gl):
    """closing(obj) -> obj, closed after the test (Batch, Atlas)."""
    made = []

    def keep(obj):
        made.append(obj)
        return obj

    yield keep
    gl.make_current()
    for obj in made:
        obj.close()


# ---------------------------------------------------------------- every format family, every target, flip on/off

FORMAT_KEYS = ["RGBA8", "RGB8", "R8", "RG8", "SRGB8_ALPHA8", "RGBA16", "R16", "RGBA16F", "R16F", "RGBA32F", "R32F",
               "RG32F", "RGBA8UI", "RGBA16UI", "R32UI", "unsized_RGBA", "unsized_RGB"]
W, H = 37, 23
REGION = (5, 3, 17, 11)  # odd sizes, away from every edge


@pytest.mark.parametrize("flip", [False, True], ids=["bottom_up", "flip"])
@pytest.mark.parametrize("key", FORMAT_KEYS)
@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
def test_format_region_equals_numpy_crop(backend, target, key, flip, make_image, capture):
    img = make_image(target, key, W, H, seed=3)
    full = img.reference()
    cap = capture(img, backend=backend, region=REGION)
    assert cap.region == REGION and cap.image_size == (W, H)
    assert (cap.width, cap.height) == (17, 11) and cap.shape == (11, 17, img.fmt.channels)
    got = read_np(cap, flip=flip)
    check_gl("after a region read")
    assert got.shape == (11, 17, img.fmt.channels) and got.dtype == img.fmt.np_dtype
    want = expect(full, REGION, flip)
    assert not np.array_equal(want, crop(full, (0, 0, 17, 11))), "test content: region looks like the corner"
    assert_array_equal(got, want)


@pytest.mark.parametrize("internal", [GL.GL_RGBA8, GL.GL_RGBA], ids=["RGBA8", "unsized_RGBA"])
def test_bgra_upload(backend, internal, capture):
    """A texture filled from BGRA client data (what engines upload) reads as GL stores it: RGBA order."""
    data = random_data(BY_KEY["RGBA8"], W, H, seed=9)
    tex = int(GL.glGenTextures(1))
    try:
        GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
        GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 1)
        tex_image_2d(GL.GL_TEXTURE_2D, 0, internal, W, H, GL.GL_BGRA, GL.GL_UNSIGNED_BYTE, data)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        cap = capture(tex, GL.GL_TEXTURE_2D, backend=backend, region=REGION)
        assert cap.format == "GL_RGBA8"
        full = data[..., [2, 1, 0, 3]]  # stored RGBA
        assert_array_equal(read_np(cap, flip=True), expect(full, REGION, True))
        assert_array_equal(read_np(cap, flip=False, channels="bgra"), crop(data, REGION))
        cap.close()
    finally:
        GL.glDeleteTextures(1, [tex])


@pytest.mark.parametrize("key", FORMAT_KEYS)
@pytest.mark.parametrize("target", [GL.GL_TEXTURE_2D, GL.GL_TEXTURE_RECTANGLE], ids=["2d", "rect"])
def test_cpu_texture_region_through_framebuffer(target, key, make_image, capture, monkeypatch):
    """Contexts older than GL 4.5 have no glGetTextureSubImage: the CPU backend then reads a texture's region
    with glReadPixels through its framebuffer (forced here), with the same result."""
    monkeypatch.setenv("GLTENSOR_TEXTURE_REGION_READ", "framebuffer")
    img = make_image(target, key, W, H, seed=8)
    cap = capture(img, backend="cpu", region=REGION)
    for flip in (False, True):
        assert_array_equal(read_np(cap, flip=flip), expect(img.reference(), REGION, flip))
    check_gl("after a framebuffer region read")


def test_region_reads_leave_gl_state(backend, make_image, make_surface, capture):
    """Region reads (colour of every target, depth, multisampled) restore every binding and pack parameter."""
    from glhelpers import READ_STATE, gl_state

    caps = [capture(make_image(t, "RGBA8", W, H), backend=backend, region=REGION) for t in TARGETS]
    d = make_surface("DEPTH_COMPONENT24", W, H, GL.GL_RENDERBUFFER)
    ms = make_surface("RGBA8", W, H, GL.GL_RENDERBUFFER, 4)
    caps += [capture(d.name, d.target, backend=backend, region=REGION),
             capture(ms.name, ms.target, backend=backend, region=REGION)]
    GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 8)
    GL.glPixelStorei(GL.GL_PACK_ROW_LENGTH, 3)
    try:
        before = gl_state(READ_STATE)
        for cap in caps:
            cap.read()
            assert gl_state(READ_STATE) == before
    finally:
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 4)
        GL.glPixelStorei(GL.GL_PACK_ROW_LENGTH, 0)


# ---------------------------------------------------------------- regions at every edge

EW, EH = 13, 9  # odd, not square
EDGE_REGIONS = {
    "1x1_bottom_left": (0, 0, 1, 1),
    "1x1_bottom_right": (EW - 1, 0, 1, 1),
    "1x1_top_left": (0, EH - 1, 1, 1),
    "1x1_top_right": (EW - 1, EH - 1, 1, 1),
    "bottom_row": (0, 0, EW, 1),
    "top_row": (0, EH - 1, EW, 1),
    "middle_row": (0, 4, EW, 1),
    "left_column": (0, 0, 1, EH),
    "right_column": (EW - 1, 0, 1, EH),
    "middle_column": (6, 0, 1, EH),
    "whole": (0, 0, EW, EH),
    "odd_inner": (3, 2, 7, 5),
    "wide": (1, 6, 12, 3),
    "tall": (10, 1, 3, 8),
    "top_right_block": (EW - 4, EH - 3, 4, 3),
}


@pytest.mark.parametrize("flip", [False, True], ids=["bottom_up", "flip"])
@pytest.mark.parametrize("region", list(EDGE_REGIONS.values()), ids=list(EDGE_REGIONS))
@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize("key", ["RGBA8", "RGB8"])
def test_edges(backend, key, target, region, flip, make_image, capture):
    img = make_image(target, key, EW, EH, seed=5)
    cap = capture(img, backend=backend, region=region)
    assert_array_equal(read_np(cap, flip=flip), expect(img.reference(), region, flip))
    # converted: the host conversion path (CPU) and the gather kernel (CUDA) take the region too
    got = frame_values(cap.read(flip=flip, dtype="float32", layout="chw", channels="bgr"))
    want, nan = convert(crop(img.reference(), region), img.fmt, "bgr", "float32", "chw", flip)
    assert mismatch(got, want, nan, "float32") is None


def test_whole_image_without_region(backend, make_texture, capture):
    img = make_texture("RGBA8", EW, EH, seed=1)
    cap = capture(img, backend=backend)
    assert cap.region == (0, 0, EW, EH) and cap.image_size == (EW, EH) and cap.shape == (EH, EW, 4)
    assert "region" not in repr(cap)
    assert_array_equal(read_np(cap, flip=False), img.reference())
    sub = capture(img, backend=backend, region=(1, 2, 3, 4))
    assert "region=(1, 2, 3, 4)" in repr(sub)


def test_region_accepts_lists_and_numpy_ints(backend, make_texture, capture):
    img = make_texture("RGBA8", EW, EH, seed=2)
    a = capture(img, backend=backend, region=[1, 2, 5, 3])
    b = capture(img, backend=backend, region=tuple(np.int64(v) for v in (1, 2, 5, 3)))
    assert a.region == b.region == (1, 2, 5, 3)
    assert_array_equal(read_np(a), read_np(b))


# ---------------------------------------------------------------- conversions

CONVERSIONS = [
    dict(channels="rgb"),
    dict(channels="bgr", dtype="float32"),
    dict(dtype="float32", layout="chw"),
    dict(channels="r", dtype="float16"),
    dict(layout="chw"),
    dict(channels=(3, 0), dtype="uint8"),
    dict(dtype="bfloat16", layout="chw"),
]


@pytest.mark.parametrize("flip", [False, True], ids=["bottom_up", "flip"])
@pytest.mark.parametrize("kwargs", CONVERSIONS, ids=lambda k: "-".join(f"{a}={b}" for a, b in k.items()))
@pytest.mark.parametrize("key", ["RGBA8", "RGBA16F", "RGBA32F", "RGBA16UI"])
def test_conversions(backend, key, kwargs, flip, make_texture, capture):
    img = make_texture(key, W, H, seed=4)
    cap = capture(img, backend=backend, region=REGION)
    got = frame_values(cap.read(flip=flip, **kwargs))
    want, nan = convert(crop(img.reference(), REGION), img.fmt, kwargs.get("channels"), kwargs.get("dtype"),
                        kwargs.get("layout", "hwc"), flip)
    dtype = kwargs.get("dtype") or img.fmt.dtype
    assert (msg := mismatch(got, want, nan, dtype)) is None, msg


# ---------------------------------------------------------------- out=

@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
def test_out_exact_and_view_into_larger(backend, kind, target, make_image, capture):
    img = make_image(target, "RGBA8", W, H, seed=6)
    cap = capture(img, backend=backend, region=REGION)
    want = expect(img.reference(), REGION, True)
    out = out_tensor(backend, kind, (11, 17, 4), "uint8", fill=7)
    assert cap.read(out=out) is out
    assert_array_equal(as_numpy(out), want)
    # a view into a larger tensor: rows further apart than the region's width, elsewhere untouched
    big = out_tensor(backend, kind, (20, 30, 4), "uint8", fill=7)
    view = big[4:15, 6:23]
    assert cap.read(out=view) is view
    host = as_numpy(big)
    assert_array_equal(host[4:15, 6:23], want)
    host[4:15, 6:23] = 7
    assert (host == 7).all(), "a region read wrote outside its out= view"
    # unflipped and unconverted: CUDA's plain 2D copy from the region's offset in the array, rows padded
    big = out_tensor(backend, kind, (20, 30, 4), "uint8", fill=7)
    cap.read(out=big[4:15, 6:23], flip=False)
    host = as_numpy(big)
    assert_array_equal(host[4:15, 6:23], crop(img.reference(), REGION))
    host[4:15, 6:23] = 7
    assert (host == 7).all(), "a region read wrote outside its out= view"
    # converted into out=
    conv = out_tensor(backend, kind, (3, 11, 17), "float32", fill=-1)
    cap.read(out=conv, dtype="float32", layout="chw", channels="rgb", flip=False)
    want_c, _ = convert(crop(img.reference(), REGION), img.fmt, "rgb", "float32", "chw", False)
    assert_array_equal(as_numpy(conv), want_c)


def test_out_must_have_the_region_shape(backend, make_texture, capture):
    img = make_texture("RGBA8", W, H)
    cap = capture(img, backend=backend, region=REGION)
    out = out_tensor(backend, "torch", (H, W, 4), "uint8")
    with pytest.raises(gltensor.InvalidArgumentError, match=r"out= has shape \(23, 37, 4\).*\(11, 17, 4\)"):
        cap.read(out=out)


# ---------------------------------------------------------------- depth: window and linear

DEPTH_KEYS = ["DEPTH_COMPONENT24", "DEPTH_COMPONENT32F", "DEPTH24_STENCIL8", "DEPTH_COMPONENT16"]


@pytest.mark.parametrize("flip", [False, True], ids=["bottom_up", "flip"])
@pytest.mark.parametrize("key", DEPTH_KEYS)
@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
def test_depth_window_region(backend, target, key, flip, make_surface, capture, monkeypatch):
    monkeypatch.setenv("GLTENSOR_DEPTH_PATH", "readpixels")  # the path equal to glReadPixels by construction
    s = make_surface(key, W, H, target)
    with Target(s) as t:
        draw_depth_noise(t, seed=11)
    full = read_depth(s)
    cap = capture(s.name, s.target, backend=backend, region=REGION)
    assert cap.shape == (11, 17, 1) and cap.dtype == "float32"
    got = read_np(cap, flip=flip)
    check_gl("after a depth region read")
    assert_array_equal(got, expect(full, REGION, flip))


@pytest.mark.parametrize("path", ["readpixels", "compute"])
@pytest.mark.parametrize("key", ["DEPTH_COMPONENT24", "DEPTH_COMPONENT16", "DEPTH24_STENCIL8"])
@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
def test_depth_paths_region_equals_whole_crop(backend, target, key, path, make_surface, capture, monkeypatch):
    """Either depth path (the compute shader reads from the region's origin) gives the crop of its own
    whole-image read."""
    monkeypatch.setenv("GLTENSOR_DEPTH_PATH", path)
    s = make_surface(key, W, H, target)
    with Target(s) as t:
        draw_depth_noise(t, seed=12)
    whole = capture(s.name, s.target, backend=backend)
    part = capture(s.name, s.target, backend=backend, region=REGION)
    for flip in (False, True):
        assert_array_equal(read_np(part, flip=flip), expect(read_np(whole, flip=False), REGION, flip))


@pytest.mark.parametrize("projection", ["perspective", "orthographic"])
@pytest.mark.parametrize("key", ["DEPTH_COMPONENT24", "DEPTH_COMPONENT32F"])
def test_depth_linear_region(backend, key, projection, make_surface, capture):
    s = make_surface(key, 40, 24, GL.GL_TEXTURE_2D)
    with Target(s) as t:
        draw_planes(t, [0.2, 1.0, 5.0, 30.0, 99.0], near=0.1, far=100.0, projection=projection)
    region = (3, 2, 31, 17)  # crosses every strip edge
    whole = capture(s.name, s.target, backend=backend)
    part = capture(s.name, s.target, backend=backend, region=region)
    kw = dict(depth="linear", near=0.1, far=100.0, projection=projection)
    want = expect(read_np(whole, flip=False, **kw), region, True)
    assert len(np.unique(want)) == 5, "test content: every plane shows in the region"
    assert_array_equal(read_np(part, **kw), want)
    assert_array_equal(read_np(part, flip=False), crop(read_depth(s), region))


# ---------------------------------------------------------------- multisampled images: the resolve covers the region

@pytest.mark.parametrize("target", [GL.GL_RENDERBUFFER, GL_TEXTURE_2D_MULTISAMPLE], ids=["rbo", "tex2dms"])
@pytest.mark.parametrize("key", ["RGBA8", "RGBA16F", "DEPTH24_STENCIL8", "DEPTH_COMPONENT32F"])
def test_msaa_region_equals_resolve_crop(backend, target, key, make_surface, capture):
    depth = key.startswith("DEPTH")
    colour = make_surface("RGBA8" if depth else key, W, H, target, 4)
    zbuf = make_surface(key if depth else "DEPTH24_STENCIL8", W, H, target, 4)
    with Target(colour, zbuf) as t:
        draw_triangles(t, seed=2)
    surface = zbuf if depth else colour
    full = resolve(surface)
    cap = capture(surface.name, surface.target, backend=backend, region=REGION)
    for flip in (False, True):
        assert_array_equal(read_np(cap, flip=flip), expect(full, REGION, flip))
    check_gl("after a multisampled region read")


# ---------------------------------------------------------------- Batch

def test_batch_mixed_regions_stacked_and_read_list(backend, make_image, closing):
    a = make_image(GL.GL_TEXTURE_2D, "RGBA8", 37, 23, seed=1)
    b = make_image(GL.GL_TEXTURE_2D, "RGBA8", 16, 12, seed=2)
    c = make_image(GL.GL_RENDERBUFFER, "RGBA8", 9, 30, seed=3)
    regions = [(20, 11, 7, 9), (0, 3, 7, 9), (2, 21, 7, 9)]  # one size, three places
    batch = closing(gltensor.Batch([a.name, b.name], backend=backend, regions=regions[:2]))
    assert batch.regions == tuple(regions[:2]) and batch.shape == (2, 9, 7, 4)
    got = to_numpy(batch.read())
    for k, img in enumerate([a, b]):
        assert_array_equal(got[k], expect(img.reference(), regions[k], True))
    # Capture sources keep their own regions; mixed with a texture given by name
    cc = closing(gltensor.Capture(c.name, GL.GL_RENDERBUFFER, backend=backend, region=regions[2]))
    mixed = closing(gltensor.Batch([a.name, cc], backend=backend, regions=[regions[0], None]))
    assert mixed.regions == (regions[0], regions[2])
    got = to_numpy(mixed.read(flip=False))
    assert_array_equal(got[0], crop(a.reference(), regions[0]))
    assert_array_equal(got[1], crop(c.reference(), regions[2]))
    # read_list: regions of different sizes
    sizes = [(0, 0, 37, 23), (3, 1, 5, 11), (8, 29, 1, 1)]
    c_whole = closing(gltensor.Capture(c.name, GL.GL_RENDERBUFFER, backend=backend))
    each = closing(gltensor.Batch([a.name, b.name, c_whole], backend=backend, regions=sizes[:2] + [None]))
    cc1 = closing(gltensor.Capture(c.name, GL.GL_RENDERBUFFER, backend=backend, region=sizes[2]))
    frames = each.read_list(flip=True)
    assert [f.shape for f in frames] == [(23, 37, 4), (11, 5, 4), (30, 9, 4)]
    for f, img, r in zip(frames, [a, b, c], [sizes[0], sizes[1], (0, 0, 9, 30)]):
        assert_array_equal(to_numpy(f), expect(img.reference(), r, True))
    one = to_numpy(closing(gltensor.Batch([cc1], backend=backend)).read_list()[0])
    assert_array_equal(one, expect(c.reference(), sizes[2], True))
    # a stacked read needs equal region sizes
    with pytest.raises(gltensor.InvalidArgumentError, match=r"batch source 1 .* reads 5x11 .* source 0 .* reads "
                                                            r"37x23.*size \(of each source's region\)"):
        each.read()


def test_batch_one_region_for_all(backend, make_texture, closing):
    texs = [make_texture("RGB8", 20 + k, 15, seed=k) for k in range(3)]
    region = (2, 4, 11, 7)
    batch = closing(gltensor.Batch([t.name for t in texs], backend=backend, region=region))
    assert batch.regions == (region,) * 3
    got = frame_values(batch.read(dtype="float32", layout="chw"))
    for k, t in enumerate(texs):
        want, nan = convert(crop(t.reference(), region), t.fmt, None, "float32", "chw", True)
        assert mismatch(got[k], want, nan, "float32") is None
    out = out_tensor(backend, "torch", (3, 7, 11, 3), "uint8", fill=1)
    batch.read(out=out, flip=False)
    for k, t in enumerate(texs):
        assert_array_equal(as_numpy(out)[k], crop(t.reference(), region))


def test_batch_region_arguments_are_checked(make_texture, closing):
    a, b = make_texture("RGBA8", 10, 10), make_texture("RGBA8", 10, 10, seed=1)
    cap = closing(gltensor.Capture(b.name, backend="cpu"))
    with pytest.raises(TypeError, match="region= .* or regions= .*not both"):
        gltensor.Batch([a.name], region=(0, 0, 1, 1), regions=[(0, 0, 1, 1)])
    with pytest.raises(ValueError, match="regions has 1 entries for 2 sources"):
        gltensor.Batch([a.name, cap], regions=[(0, 0, 1, 1)])
    with pytest.raises(TypeError, match="regions must be a list"):
        gltensor.Batch([a.name], regions=(0, 0, 1, 1).__iter__())
    with pytest.raises(ValueError, match=r"regions\[1\] is given, but batch source 1 is a gltensor.Capture"):
        gltensor.Batch([a.name, cap], regions=[None, (0, 0, 2, 2)])
    with pytest.raises(ValueError, match=r"regions\[0\] \(0, 0, 0, 4\): width and height must be > 0"):
        gltensor.Batch([a.name], regions=[(0, 0, 0, 4)])
    with pytest.raises(TypeError, match=r"region: width must be an int, not bool"):
        gltensor.Batch([a.name], region=(0, 0, True, 4))
    with pytest.raises(gltensor.InvalidArgumentError, match=r"does not fit texture \d+, which is 10x10"):
        gltensor.Batch([a.name], region=(5, 5, 6, 5), backend="cpu")


# ---------------------------------------------------------------- Atlas inside a region

@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
def test_atlas_in_region(backend, target, make_image, closing):
    img = make_image(target, "RGBA8", 41, 30, seed=0)
    region = (3, 5, 33, 14)  # a 2 x 3 grid of 11x7 tiles, hanging from the region's top-left corner
    atlas = closing(gltensor.Atlas(img.name, target, tiles=(2, 3), backend=backend, region=region))
    assert atlas.region == region and atlas.image_size == (41, 30) and atlas.tile_size == (7, 11)
    x0, y0, w, h = region
    want_vps = [(x0 + (k % 3) * 11, y0 + h - (k // 3 + 1) * 7, 11, 7) for k in range(6)]
    assert atlas.viewports() == want_vps
    img.fill((0.5, 0.25, 0.125, 0.75))
    for k in range(6):
        render_camera(img.name, img.target, img.fmt, atlas.viewport(k), k)
    full = read_framebuffer(img.name, img.target, img.fmt, img.width, img.height)
    for flip in (True, False):
        got = to_numpy(atlas.read(flip=flip))
        assert got.shape == (6, 7, 11, 4)
        for k, vp in enumerate(want_vps):
            assert_array_equal(got[k], expect(full, vp, flip), err_msg=f"tile {k} flip={flip}")
    got = frame_values(atlas.read(dtype="float32", channels="bgr", layout="chw"))
    for k, vp in enumerate(want_vps):
        want, nan = convert(crop(full, vp), img.fmt, "bgr", "float32", "chw", True)
        assert mismatch(got[k], want, nan, "float32") is None


def test_atlas_grid_must_fit_the_region(make_texture):
    img = make_texture("RGBA8", 40, 30)
    with pytest.raises(gltensor.InvalidArgumentError, match="needs 30x21 pixels, but the region is 20x20"):
        gltensor.Atlas(img.name, tile_size=(7, 10), tiles=(3, 3), region=(0, 0, 20, 20), backend="cpu")
    with pytest.raises(gltensor.InvalidArgumentError, match="a 20x21 region does not split into 2 rows x 3 cols"):
        gltensor.Atlas(img.name, tiles=(2, 3), region=(1, 2, 20, 21), backend="cpu")
    with pytest.raises(gltensor.InvalidArgumentError, match="does not fit texture"):
        gltensor.Atlas(img.name, tiles=(1, 1), region=(30, 0, 20, 20), backend="cpu")
    with pytest.raises(TypeError, match="region must be a tuple"):
        gltensor.Atlas(img.name, tiles=(1, 1), region="all")


# ---------------------------------------------------------------- resizable: the image shrinks under the region

@pytest.mark.parametrize("target", [GL.GL_TEXTURE_2D, GL.GL_RENDERBUFFER], ids=["2d", "rbo"])
def test_resize_under_region(backend, target, make_image, capture):
    img = make_image(target, "RGBA8", 16, 16, seed=1)
    region = (2, 3, 8, 9)
    cap = capture(img, backend=backend, resizable=True, region=region)
    assert_array_equal(read_np(cap), expect(img.reference(), region, True))
    img.reallocate("RGBA8", 6, 20, seed=2)
    kind = "renderbuffer" if target == GL.GL_RENDERBUFFER else "texture"
    msg = (rf"{kind} {img.name} is now 6x20, and the capture's region \(x=2, y=3, width=8, height=9\) no longer fits "
           r"in it \(x \+ width = 10 is more than the image width 6\); set a region inside the new size "
           r"\(cap.region = \(x, y, w, h\), glt_capture_set_region\), or capture without a region")
    with pytest.raises(gltensor.InvalidArgumentError, match=msg):
        cap.read()
    with pytest.raises(gltensor.InvalidArgumentError, match=msg):
        cap.read()  # still refused: nothing was attached for a size that cannot hold the region
    with pytest.raises(gltensor.InvalidArgumentError, match=msg):
        cap.refresh()
    check_gl("after the refused reads")
    img.reallocate("RGBA8", 11, 12, seed=3)  # large enough again
    assert_array_equal(read_np(cap, flip=False), crop(img.reference(), region))
    assert cap.region == region and cap.image_size == (11, 12)


def test_resize_without_region_follows_the_image(backend, make_image, capture):
    img = make_image(GL.GL_RENDERBUFFER, "RGBA8", 16, 16, seed=1)
    cap = capture(img, backend=backend, resizable=True)
    img.reallocate("RGBA8", 7, 5, seed=2)
    assert_array_equal(read_np(cap, flip=False), img.reference())
    assert cap.region == (0, 0, 7, 5) and cap.image_size == (7, 5)


# ---------------------------------------------------------------- invalid regions

BAD_TYPES = [
    ("abcd", TypeError, "region must be a tuple \\(x, y, width, height\\) of ints, or None for the whole image, "
                        "not str"),
    (5, TypeError, "region must be a tuple .* not int"),
    ({"x": 0}, TypeError, "region must be a tuple .* not dict"),
    ((0, 0, 2), ValueError, "region must have 4 items \\(x, y, width, height\\), got 3"),
    ((0, 0, 2, 2, 2), ValueError, "region must have 4 items .* got 5"),
    ((True, 0, 2, 2), TypeError, "region: x must be an int, not bool"),
    ((0, 0, 2, False), TypeError, "region: height must be an int, not bool"),
    ((0, 0.0, 2, 2), TypeError, "region: y must be an int, not float"),
    ((0, 0, "2", 2), TypeError, "region: width must be an int, not str"),
    ((0, 0, None, 2), TypeError, "region: width must be an int, not NoneType"),
    ((-1, 0, 2, 2), ValueError, "region \\(-1, 0, 2, 2\\): x and y must be >= 0"),
    ((0, -3, 2, 2), ValueError, "region \\(0, -3, 2, 2\\): x and y must be >= 0"),
    ((0, 0, 0, 2), ValueError, "region \\(0, 0, 0, 2\\): width and height must be > 0; pass region=None"),
    ((0, 0, 2, 0), ValueError, "width and height must be > 0"),
    ((0, 0, 0, 0), ValueError, "width and height must be > 0"),
    ((0, 0, -2, 2), ValueError, "width and height must be > 0"),
    ((0, 0, 2**40, 2), ValueError, "region: width must be an int from .* not 1099511627776"),
]


@pytest.mark.parametrize("region,exc,msg", BAD_TYPES, ids=[repr(b[0]) for b in BAD_TYPES])
def test_bad_region_values(region, exc, msg, make_texture):
    img = make_texture("RGBA8", 10, 8)
    with pytest.raises(exc, match=msg):
        gltensor.Capture(img.name, region=region, backend="cpu")
    with pytest.raises(exc, match=msg):
        gltensor.Atlas(img.name, tiles=(1, 1), region=region, backend="cpu")


OUT_OF_BOUNDS = {
    "past_right": ((5, 0, 6, 8), "x \\+ width = 11 is more than the image width 10"),
    "past_top": ((0, 2, 10, 7), "y \\+ height = 9 is more than the image height 8"),
    "x_at_width": ((10, 0, 1, 1), "x \\+ width = 11 is more than the image width 10"),
    "y_at_height": ((0, 8, 1, 1), "y \\+ height = 9 is more than the image height 8"),
    "larger_than_image": ((0, 0, 11, 9), "x \\+ width = 11 is more than the image width 10"),
    "huge_x": ((2**31 - 1, 0, 1, 1), "x \\+ width = 2147483648 is more than the image width 10"),
}


@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize("case", list(OUT_OF_BOUNDS), ids=list(OUT_OF_BOUNDS))
def test_region_out_of_bounds(backend, target, case, make_image):
    region, why = OUT_OF_BOUNDS[case]
    img = make_image(target, "RGBA8", 10, 8)
    kind = "renderbuffer" if target == GL.GL_RENDERBUFFER else "texture"
    x, y, w, h = region
    msg = (rf"region \(x={x}, y={y}, width={w}, height={h}\) does not fit {kind} {img.name}, which is 10x8: {why}; "
           r"pass a region inside the image \(GL window coordinates")
    with pytest.raises(gltensor.InvalidArgumentError, match=msg) as info:
        gltensor.Capture(img.name, target, region=region, backend=backend)
    assert isinstance(info.value, ValueError)  # InvalidArgumentError is also a ValueError
    check_gl("after a refused region")


# ---------------------------------------------------------------- property test (CPU backend)

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def image_and_region(draw):
    w, h = draw(st.integers(1, 48)), draw(st.integers(1, 40))
    x, y = draw(st.integers(0, w - 1)), draw(st.integers(0, h - 1))
    rw, rh = draw(st.integers(1, w - x)), draw(st.integers(1, h - y))
    return (w, h), (x, y, rw, rh)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=image_and_region(), flip=st.booleans(), target=st.sampled_from(TARGETS),
       key=st.sampled_from(["RGBA8", "RGB8", "R16F", "RGBA32UI"]), seed=st.integers(0, 2**16))
def test_property_region_equals_crop(gl, case, flip, target, key, seed):
    import glhelpers

    (w, h), region = case
    img = glhelpers.Image(key, w, h, target=target, seed=seed)
    try:
        with gltensor.Capture(img.name, target, backend="cpu", region=region) as cap:
            assert cap.shape == (region[3], region[2], img.fmt.channels)
            assert_array_equal(read_np(cap, flip=flip), expect(img.reference(), region, flip))
    finally:
        img.delete()
    check_gl("after a property example")


# ---------------------------------------------------------------- changing the region of a live capture

@pytest.mark.parametrize("kind", ["colour_2d", "colour_rbo", "depth", "msaa"])
def test_set_region(backend, kind, make_image, make_surface, capture):
    if kind.startswith("colour"):
        img = make_image(GL.GL_TEXTURE_2D if kind == "colour_2d" else GL.GL_RENDERBUFFER, "RGBA8", W, H, seed=2)
        name, target, truth = img.name, img.target, img.reference
    elif kind == "depth":
        s = make_surface("DEPTH_COMPONENT32F", W, H, GL.GL_TEXTURE_2D)
        with Target(s) as t:
            draw_depth_noise(t, seed=3)
        name, target, truth = s.name, s.target, lambda: read_depth(s)
    else:
        s = make_surface("RGBA8", W, H, GL.GL_RENDERBUFFER, 4)
        with Target(s) as t:
            draw_triangles(t, seed=4)
        name, target, truth = s.name, s.target, lambda: resolve(s)
    cap = capture(name, target, backend=backend, region=REGION)
    first = read_np(cap)  # a frame read before the change keeps its pixels
    assert_array_equal(first, expect(truth(), REGION, True))
    for region in [(0, 0, 1, 1), (W - 9, H - 4, 9, 4), (0, 0, W, H), (2, 1, 30, 20)]:
        cap.region = region
        assert cap.region == region and cap.shape[:2] == (region[3], region[2])
        assert_array_equal(read_np(cap), expect(truth(), region, True))
        # converted (the gather kernel on CUDA, the host conversion on CPU): unorm8 / 255; depth is float32 already
        want, nan = convert(crop(truth(), region), BY_KEY["RGBA8"], None, "float32", "hwc", False)
        assert mismatch(frame_values(cap.read(flip=False, dtype="float32")), want, nan, "float32") is None
    cap.region = None
    assert cap.region == (0, 0, W, H)
    assert_array_equal(read_np(cap, flip=False), truth())
    # a region that does not fit is refused and the capture keeps the one it had
    cap.region = REGION
    with pytest.raises(gltensor.InvalidArgumentError, match=r"region \(x=30, y=0, width=8, height=1\) does not fit"):
        cap.region = (30, 0, 8, 1)
    with pytest.raises(ValueError, match="width and height must be > 0"):
        cap.region = (1, 1, 0, 1)
    with pytest.raises(TypeError, match="region must be a tuple"):
        cap.region = "whole"
    with pytest.raises(AttributeError, match="cannot be deleted"):
        del cap.region
    assert cap.region == REGION
    assert_array_equal(read_np(cap), expect(truth(), REGION, True))
    check_gl("after changing regions")


def test_set_region_recovers_after_a_shrink(backend, make_image, capture):
    """The image shrank under the region (reads refused); a new region that fits makes reads work again."""
    img = make_image(GL.GL_RENDERBUFFER, "RGBA8", 16, 16, seed=1)
    cap = capture(img, backend=backend, resizable=True, region=(8, 8, 8, 8))
    img.reallocate("RGBA8", 10, 10, seed=2)
    with pytest.raises(gltensor.InvalidArgumentError, match="no longer fits"):
        cap.read()
    cap.region = (1, 2, 9, 8)
    assert cap.image_size == (10, 10)
    assert_array_equal(read_np(cap), expect(img.reference(), (1, 2, 9, 8), True))


def test_set_region_in_a_batch(backend, make_texture, closing):
    a, b = make_texture("RGBA8", 20, 12, seed=1), make_texture("RGBA8", 20, 12, seed=2)
    ca = closing(gltensor.Capture(a.name, backend=backend, region=(0, 0, 5, 5)))
    batch = closing(gltensor.Batch([ca, b.name], backend=backend, regions=[None, (3, 3, 5, 5)]))
    assert_array_equal(to_numpy(batch.read())[0], expect(a.reference(), (0, 0, 5, 5), True))
    ca.region = (10, 4, 5, 5)  # batches read each capture's current region
    assert batch.regions == ((10, 4, 5, 5), (3, 3, 5, 5))
    got = to_numpy(batch.read())
    assert_array_equal(got[0], expect(a.reference(), (10, 4, 5, 5), True))
    assert_array_equal(got[1], expect(b.reference(), (3, 3, 5, 5), True))
    ca.region = (0, 0, 6, 5)
    with pytest.raises(gltensor.InvalidArgumentError, match="reads 5x5 .* reads 6x5"):
        batch.read()
