"""gltensor.Atlas: one texture holding a grid of camera tiles, each tile pixel-exact against GL's read-back.

Camera k is drawn with glViewport(*atlas.viewport(k)) (glhelpers.render_camera: a seeded pattern, k in
the red channel of a band along the tile's on-screen top row, a marker square at a per-k place). The
ground truth is glReadPixels of the whole texture through a framebuffer, sliced at the tile's place
computed here independently of the library: tile k sits in grid row k // cols counted from the TOP of
the image as seen on screen (GL's last rows), column k % cols from the left.
"""

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from OpenGL import GL

import gltensor
from formats import BY_KEY
from glhelpers import camera_colour, check_gl, read_framebuffer, render_camera, as_numpy, out_tensor, to_numpy, torch_to_numpy

pytestmark = pytest.mark.usefixtures("gl")

TARGETS = [GL.GL_TEXTURE_2D, GL.GL_TEXTURE_RECTANGLE, GL.GL_RENDERBUFFER]
TARGET_IDS = ["2d", "rect", "rbo"]
BACKGROUND = (0.5, 0.25, 0.125, 0.75)  # outside every tile


# (texture width, texture height, Atlas kwargs, expected (rows, cols, tile h, tile w, count))
LAYOUTS = {
    "2x3_of_11x7_exact": (33, 14, dict(tiles=(2, 3)), (2, 3, 7, 11, 6)),
    "3x4_of_7x5_in_30x19": (30, 19, dict(tiles=(3, 4), tile_size=(5, 7)), (3, 4, 5, 7, 12)),
    "tile_size_only_7x5_in_30x19": (30, 19, dict(tile_size=(5, 7)), (3, 4, 5, 7, 12)),
    "8x8_of_9x7": (72, 56, dict(tiles=(8, 8)), (8, 8, 7, 9, 64)),
    "1x1": (13, 11, dict(tiles=(1, 1)), (1, 1, 11, 13, 1)),
    "1_tile_of_7x5_in_30x19": (30, 19, dict(tile_size=(5, 7), count=1), (3, 4, 5, 7, 1)),
    "5_of_2x3": (33, 14, dict(tiles=(2, 3), count=5), (2, 3, 7, 11, 5)),
    "3_of_3x4_in_30x19": (30, 19, dict(tiles=(3, 4), tile_size=(5, 7), count=3), (3, 4, 5, 7, 3)),
    "1_col_of_3": (5, 21, dict(tiles=(3, 1)), (3, 1, 7, 5, 3)),
    "1_row_of_3": (21, 5, dict(tiles=(1, 3)), (1, 3, 5, 7, 3)),
}


# ---------------------------------------------------------------- helpers


def expected_viewport(k, rows, cols, th, tw, tex_h):
    """(x, y, w, h) in GL coordinates of tile k: the grid hangs from the top-left corner as seen on screen."""
    assert 0 <= k < rows * cols
    return ((k % cols) * tw, tex_h - (k // cols + 1) * th, tw, th)


def tile_refs(img, viewports):
    """Bottom-up (h, w, C) region of each viewport, out of a glReadPixels of the whole image."""
    full = read_framebuffer(img.name, img.target, img.fmt, img.width, img.height)
    return [full[y : y + h, x : x + w] for x, y, w, h in viewports]


def render_tiles(img, atlas, first=0):
    img.fill(BACKGROUND if not img.fmt.is_integer else (1, 2, 3, 4))
    for k in range(atlas.count):
        render_camera(img.name, img.target, img.fmt, atlas.viewport(k), first + k)
    img.data = None


def check_tiles(got, refs, flip, what=""):
    assert len(got) == len(refs)
    for k, ref in enumerate(refs):
        assert_array_equal(got[k], ref[::-1] if flip else ref, err_msg=f"{what} tile {k} (flip={flip})")


def self_check(img, refs, first=0):
    """Test content: tiles differ, are not flip-symmetric, and tile k's on-screen top-left pixel encodes k."""
    assert len({r.tobytes() for r in refs}) == len(refs), "test content: two tiles look the same"
    for k, ref in enumerate(refs):
        if ref.shape[0] > 1:
            assert not np.array_equal(ref, ref[::-1]), f"test content: tile {k} is flip-symmetric"
        if img.fmt.dtype == "uint8":
            want = np.array(camera_colour(img.fmt, first + k)[: img.fmt.channels])
            if not img.fmt.is_integer:
                want = np.round(want * 255)
            assert_array_equal(ref[-1, 0], want.astype(np.uint8), err_msg=f"test content: tile {k}")


@pytest.fixture
def atlas_factory(gl):
    made = []

    def make(*args, **kwargs):
        a = gltensor.Atlas(*args, **kwargs)
        made.append(a)
        return a

    yield make
    gl.make_current()
    for a in made:
        a.close()


# ---------------------------------------------------------------- layouts, pixel-exact


@pytest.mark.parametrize("layout", list(LAYOUTS), ids=list(LAYOUTS))
def test_layout_pixel_exact(backend, layout, make_texture, atlas_factory):
    tex_w, tex_h, kwargs, (rows, cols, th, tw, count) = LAYOUTS[layout]
    img = make_texture("RGBA8", tex_w, tex_h)
    atlas = atlas_factory(img.name, backend=backend, **kwargs)

    assert atlas.tiles == (rows, cols)
    assert atlas.tile_size == (th, tw)
    assert atlas.count == count and len(atlas) == count
    assert atlas.shape == (count, th, tw, 4)
    assert atlas.image_size == (tex_w, tex_h)
    assert (atlas.dtype, atlas.format, atlas.backend) == ("uint8", "GL_RGBA8", backend)
    assert isinstance(atlas.backend_reason, str) and atlas.backend_reason.strip()
    assert atlas.closed is False
    vps = [expected_viewport(k, rows, cols, th, tw, tex_h) for k in range(count)]
    assert vps[0] == (0, tex_h - th, tw, th), "tile 0 must be the top-left tile as seen on screen"
    assert [atlas.viewport(k) for k in range(count)] == vps
    assert atlas.viewports() == vps

    render_tiles(img, atlas)
    refs = tile_refs(img, vps)
    self_check(img, refs)
    for flip in (False, True):
        frame = atlas.read(flip=flip)
        check_gl("after atlas.read")
        assert frame.shape == (count, th, tw, 4)
        assert frame.flipped is flip
        got = to_numpy(frame)
        assert got.shape == (count, th, tw, 4)
        check_tiles(got, refs, flip)
        if flip:  # tile k's on-screen top-left pixel carries k: tile order is row-major from the top-left
            assert_array_equal(got[:, 0, 0, 0], np.arange(count, dtype=np.uint8))
    default = atlas.read()
    assert default.flipped is True, "Atlas.read() must default to flip=True"
    check_tiles(to_numpy(default), refs, True, "default")


def test_grid_anchored_top_left_of_larger_texture(backend, make_texture, atlas_factory):
    """7x5 tiles, grid 3x4 (28x15) in a 30x19 texture: the spare rows are at the BOTTOM of GL's image."""
    img = make_texture("RGBA8", 30, 19)
    atlas = atlas_factory(img.name, tiles=(3, 4), tile_size=(5, 7), backend=backend)
    assert atlas.viewport(0) == (0, 19 - 5, 7, 5)
    assert atlas.viewport(3) == (21, 14, 7, 5)
    assert atlas.viewport(4) == (0, 9, 7, 5)
    assert atlas.viewport(11) == (21, 4, 7, 5)
    render_tiles(img, atlas)
    full = read_framebuffer(img.name, img.target, img.fmt, 30, 19)
    # rows 0..3 (GL) and columns 28..29 are outside the grid: still the background
    assert (full[:4] == full[0, 0]).all() and (full[:, 28:] == full[0, 0]).all()
    got = to_numpy(atlas.read(flip=True))
    # the whole grid, as seen on screen, is the top-left 28x15 of the flipped image
    screen = full[::-1]
    for k in range(12):
        r, c = divmod(k, 4)
        assert_array_equal(got[k], screen[r * 5 : r * 5 + 5, c * 7 : c * 7 + 7], err_msg=f"tile {k}")


@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
def test_targets(backend, target, make_image, atlas_factory):
    img = make_image(target, "RGBA8", 30, 19)
    atlas = atlas_factory(img.name, target, tiles=(3, 4), tile_size=(5, 7), backend=backend)
    render_tiles(img, atlas)
    refs = tile_refs(img, atlas.viewports())
    self_check(img, refs)
    for flip in (False, True):
        check_tiles(to_numpy(atlas.read(flip=flip)), refs, flip)


@pytest.mark.parametrize("key", ["RGB8", "R8", "RG16", "RGBA16F", "R32F", "RGBA32F", "RGBA8UI", "R16UI", "RG32UI"])
def test_formats(backend, key, make_texture, atlas_factory):
    fmt = BY_KEY[key]
    img = make_texture(fmt, 30, 19)
    atlas = atlas_factory(img.name, tiles=(3, 4), tile_size=(5, 7), backend=backend)
    assert atlas.shape == (12, 5, 7, fmt.channels)
    assert (atlas.dtype, atlas.format) == (fmt.dtype, fmt.reported)
    render_tiles(img, atlas)
    refs = tile_refs(img, atlas.viewports())
    self_check(img, refs)
    for flip in (False, True):
        frame = atlas.read(flip=flip)
        assert frame.shape == (12, 5, 7, fmt.channels) and frame.dtype == fmt.dtype
        got = to_numpy(frame)
        assert got.dtype == fmt.np_dtype
        check_tiles(got, refs, flip, key)


# ---------------------------------------------------------------- out=


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_read_into_out(backend, kind, make_texture, atlas_factory):
    img = make_texture("RGBA8", 30, 19)
    atlas = atlas_factory(img.name, tiles=(3, 4), tile_size=(5, 7), count=10, backend=backend)
    render_tiles(img, atlas)
    refs = tile_refs(img, atlas.viewports())
    out = out_tensor(backend, kind, (10, 5, 7, 4), np.uint8)
    for flip in (False, True):
        assert atlas.read(flip=flip, out=out) is out
        check_tiles(as_numpy(out), refs, flip, "out=")


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_read_into_slice_of_bigger_tensor(backend, kind, make_texture, atlas_factory):
    img = make_texture("RGB8", 30, 19)  # 21-byte tile rows
    atlas = atlas_factory(img.name, tile_size=(5, 7), backend=backend)
    render_tiles(img, atlas)
    refs = tile_refs(img, atlas.viewports())
    big = out_tensor(backend, kind, (13, 7, 10, 3), np.uint8, fill=7)
    view = big[1:, 1:6, 2:9]
    assert tuple(view.shape) == (12, 5, 7, 3)
    for flip in (False, True):
        assert atlas.read(flip=flip, out=view) is view
        check_tiles(as_numpy(view), refs, flip, "padded out=")
    b = as_numpy(big)
    assert (b[0] == 7).all() and (b[:, 0] == 7).all() and (b[:, 6:] == 7).all()
    assert (b[:, :, :2] == 7).all() and (b[:, :, 9:] == 7).all(), "read(out=) wrote outside the view"


@pytest.mark.parametrize(
    "shape,dtype",
    [((11, 5, 7, 4), np.uint8), ((13, 5, 7, 4), np.uint8), ((12, 7, 5, 4), np.uint8), ((12, 5, 7, 3), np.uint8),
     ((5, 7, 4), np.uint8), ((12, 5, 7, 4), np.float16), ((1, 19, 30, 4), np.uint8)],
    ids=["N-1", "N+1", "hxw swapped", "C-1", "3-D", "dtype", "whole texture"],
)
def test_wrong_out_raises(backend, shape, dtype, make_texture, atlas_factory):
    img = make_texture("RGBA8", 30, 19)
    atlas = atlas_factory(img.name, tile_size=(5, 7), backend=backend)
    out = out_tensor(backend, "torch", shape, dtype, fill=9)
    with pytest.raises(gltensor.InvalidArgumentError):
        atlas.read(out=out)
    assert (as_numpy(out) == 9).all(), "a refused out= must stay untouched"


# ---------------------------------------------------------------- frames, DLPack, new content


def test_frame_is_4d(backend, make_texture, atlas_factory):
    img = make_texture("RGBA8", 30, 19)
    atlas = atlas_factory(img.name, tile_size=(5, 7), backend=backend)
    render_tiles(img, atlas)
    refs = tile_refs(img, atlas.viewports())
    frame = atlas.read()
    assert frame.shape == (12, 5, 7, 4)
    assert frame.strides == (5 * 7 * 4, 7 * 4, 4, 1)
    assert frame.nbytes == 12 * 5 * 7 * 4
    if backend == "cpu":
        assert tuple(frame.__array_interface__["shape"]) == (12, 5, 7, 4)
        check_tiles(np.asarray(frame), refs, True, "numpy.asarray")
    else:
        assert tuple(frame.__cuda_array_interface__["shape"]) == (12, 5, 7, 4)
    torch = pytest.importorskip("torch")
    if backend == "cuda" and not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    t = torch.from_dlpack(frame)
    assert tuple(t.shape) == (12, 5, 7, 4) and t.dim() == 4
    assert t.data_ptr() == frame.data_ptr
    check_tiles(torch_to_numpy(t), refs, True, "torch.from_dlpack")


def test_frames_do_not_alias_and_follow_new_content(backend, make_texture, atlas_factory):
    img = make_texture("RGBA8", 30, 19)
    atlas = atlas_factory(img.name, tile_size=(5, 7), backend=backend)
    history = []
    for step in range(3):
        render_tiles(img, atlas, first=20 * step)
        refs = tile_refs(img, atlas.viewports())
        self_check(img, refs, first=20 * step)
        frame = atlas.read()
        check_tiles(to_numpy(frame), refs, True, f"step {step}")
        history.append((frame, refs))
    ptrs = [f.data_ptr for f, _ in history]
    assert len(set(ptrs)) == len(ptrs), "live frames share memory"
    for step, (frame, refs) in enumerate(history):
        check_tiles(to_numpy(frame), refs, True, f"frame of step {step} read later")
    out = out_tensor(backend, "torch", (12, 5, 7, 4), np.uint8)
    for step in range(2):
        render_tiles(img, atlas, first=7 + 20 * step)
        atlas.read(flip=False, out=out)
        check_tiles(as_numpy(out), tile_refs(img, atlas.viewports()), False, f"out= step {step}")


def test_texture_resized(backend, make_texture, atlas_factory):
    img = make_texture("RGBA8", 30, 19)
    # resizable: NVIDIA's GL refuses to reallocate a texture that stays registered with CUDA
    atlas = atlas_factory(img.name, tiles=(3, 4), tile_size=(5, 7), backend=backend, resizable=True)
    render_tiles(img, atlas)
    check_tiles(to_numpy(atlas.read()), tile_refs(img, atlas.viewports()), True)
    # larger: the grid still fits and still hangs from the top-left corner of the new image
    img.reallocate("RGBA8", 40, 23, seed=3)
    frame = atlas.read(flip=False)
    vps = [expected_viewport(k, 3, 4, 5, 7, 23) for k in range(12)]
    check_tiles(to_numpy(frame), tile_refs(img, vps), False, "after growing")
    assert atlas.image_size == (40, 23)
    assert atlas.viewports() == vps
    # smaller than the grid: refused
    img.reallocate("RGBA8", 27, 19, seed=4)
    with pytest.raises(gltensor.InvalidArgumentError):
        atlas.read()


# ---------------------------------------------------------------- errors and lifetime


@pytest.mark.parametrize(
    "size,kwargs",
    [
        ((27, 15), dict(tiles=(3, 4), tile_size=(5, 7))),  # needs 28 columns
        ((28, 14), dict(tiles=(3, 4), tile_size=(5, 7))),  # needs 15 rows
        ((30, 19), dict(tile_size=(20, 7))),  # not one row fits
        ((30, 19), dict(tile_size=(5, 31))),  # not one column fits
        ((30, 19), dict(tiles=(3, 4))),  # 19 rows do not split in 3, 30 columns not in 4
        ((28, 19), dict(tiles=(3, 4))),  # columns split, rows do not
        ((30, 15), dict(tiles=(3, 4))),  # rows split, columns do not
        ((28, 15), dict(tiles=(3, 4), count=13)),  # more tiles than the grid
        ((28, 15), dict(tile_size=(5, 7), count=13)),
    ],
    ids=["cols", "rows", "tile_h", "tile_w", "no_divide", "no_divide_rows", "no_divide_cols", "count", "count_ts"],
)
def test_grid_does_not_fit(backend, size, kwargs, make_texture):
    img = make_texture("RGBA8", *size)
    with pytest.raises(gltensor.InvalidArgumentError):
        gltensor.Atlas(img.name, backend=backend, **kwargs)


def test_neither_tiles_nor_tile_size(make_texture):
    img = make_texture("RGBA8", 28, 15)
    with pytest.raises(TypeError):
        gltensor.Atlas(img.name)
    with pytest.raises(TypeError):
        gltensor.Atlas(img.name, GL.GL_TEXTURE_2D, backend="cpu")
    with pytest.raises(TypeError):
        gltensor.Atlas(img.name, GL.GL_TEXTURE_2D, (3, 4))  # tiles is keyword-only


@pytest.mark.parametrize(
    "kwargs", [dict(tiles=(0, 4)), dict(tiles=(3, -1)), dict(tile_size=(0, 7)), dict(tiles=(3, 4), count=0)]
)
def test_non_positive_numbers(kwargs, make_texture):
    img = make_texture("RGBA8", 28, 15)
    with pytest.raises(ValueError):
        gltensor.Atlas(img.name, backend="cpu", **kwargs)


def test_viewport_out_of_range(backend, make_texture, atlas_factory):
    img = make_texture("RGBA8", 28, 15)
    atlas = atlas_factory(img.name, tiles=(3, 4), count=10, backend=backend)
    atlas.viewport(9)
    for k in (-1, 10, 11, 12, 1000):
        with pytest.raises(gltensor.InvalidArgumentError):
            atlas.viewport(k)
    assert len(atlas.viewports()) == 10


def test_unknown_or_deleted_texture(backend, make_texture, atlas_factory):
    with pytest.raises(gltensor.InvalidObjectError):
        gltensor.Atlas(987654, tiles=(1, 1), backend=backend)
    img = make_texture("RGBA8", 28, 15)
    atlas = atlas_factory(img.name, tiles=(3, 4), backend=backend)
    atlas.read()
    img.delete()
    with pytest.raises(gltensor.InvalidObjectError):
        atlas.read()
    check_gl("after reading a deleted atlas texture")


def test_close_is_idempotent_and_with(backend, make_texture):
    img = make_texture("RGBA8", 28, 15)
    with gltensor.Atlas(img.name, tiles=(3, 4), backend=backend) as atlas:
        render_tiles(img, atlas)
        refs = tile_refs(img, atlas.viewports())
        frame = atlas.read()
        assert atlas.closed is False
    assert atlas.closed is True
    atlas.close()
    atlas.close()
    assert atlas.closed is True
    with pytest.raises(gltensor.ClosedError):
        atlas.read()
    with pytest.raises(gltensor.ClosedError):
        atlas.read(out=np.zeros((12, 5, 7, 4), np.uint8))
    with pytest.raises(gltensor.ClosedError):
        atlas.viewport(0)
    with pytest.raises(gltensor.ClosedError):
        atlas.viewports()
    with pytest.raises(gltensor.ClosedError):
        atlas.tiles
    check_tiles(to_numpy(frame), refs, True, "frame read before close")


def test_stream_on_cpu_backend_raises(make_texture, atlas_factory):
    img = make_texture("RGBA8", 28, 15)
    atlas = atlas_factory(img.name, tiles=(3, 4), backend="cpu")
    with pytest.raises(gltensor.InvalidArgumentError):
        atlas.read(stream=1)


# ---------------------------------------------------------------- CUDA only


@pytest.mark.gpu
def test_cuda_stream_and_out(ctx, make_texture, atlas_factory):
    if ctx.cuda_device is None:
        pytest.skip(f"the session GL context ({ctx.renderer}) runs on no CUDA device")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    img = make_texture("RGBA8", 72, 56)
    atlas = atlas_factory(img.name, tiles=(8, 8), backend="cuda")
    render_tiles(img, atlas)
    refs = tile_refs(img, atlas.viewports())
    s = torch.cuda.Stream()
    frame = atlas.read(flip=False, stream=s)
    assert frame.stream == s.cuda_stream
    frame.synchronize()
    check_tiles(to_numpy(frame), refs, False, "stream=")
    out = torch.zeros((64, 7, 9, 4), dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()  # the zero fill ran on torch's stream, the read goes on s
    assert atlas.read(out=out, stream=s) is out
    s.synchronize()
    check_tiles(torch_to_numpy(out), refs, True, "stream= out=")
