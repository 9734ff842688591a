"""gltensor.Batch: N cameras read with one handoff, each slice pixel-exact against that camera's own GL read-back.

Every camera renders distinct content (glhelpers.render_camera: a seeded pattern, its index in the red
channel of a band along its on-screen top row, a marker square at a per-index place), so a slice that
comes from the wrong camera, or upside down, or from an earlier frame, cannot compare equal.
"""

import re

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from OpenGL import GL

import gltensor
from glhelpers import camera_colour, check_gl, render_camera, as_numpy, out_tensor, to_numpy, torch_to_numpy

pytestmark = pytest.mark.usefixtures("gl")

COUNTS = [1, 3, 64]
SIZES = [(7, 5), (33, 17)]  # (width, height): odd on purpose
SIZE_IDS = [f"{w}x{h}" for w, h in SIZES]
TARGETS = [GL.GL_TEXTURE_2D, GL.GL_TEXTURE_RECTANGLE, GL.GL_RENDERBUFFER]
TARGET_IDS = ["2d", "rect", "rbo"]


# ---------------------------------------------------------------- helpers


def render(img, index):
    """Camera `index` into the whole image."""
    render_camera(img.name, img.target, img.fmt, (0, 0, img.width, img.height), index)
    img.data = None
    return img


def make_cameras(make_image, n, w, h, fmt="RGBA8", target=GL.GL_TEXTURE_2D, first=0):
    return [render(make_image(target, fmt, w, h, seed=k), first + k) for k in range(n)]


def references(imgs, first=0):
    """Each camera's bottom-up GL read-back, checked to be distinct and flip-sensitive (test self-check)."""
    refs = [img.reference() for img in imgs]
    assert len({r.tobytes() for r in refs}) == len(refs), "test content: two cameras look the same"
    for k, (img, ref) in enumerate(zip(imgs, refs)):
        if img.height > 1:
            assert not np.array_equal(ref, ref[::-1]), f"test content: camera {k} is flip-symmetric"
        top_left = ref[-1, 0]  # on-screen top-left pixel = GL's last row
        want = np.array(camera_colour(img.fmt, first + k)[: img.fmt.channels])
        if img.fmt.dtype == "uint8" and not img.fmt.is_integer:
            want = np.round(want * 255)
        if img.fmt.dtype in ("uint8",) or img.fmt.is_integer:
            assert_array_equal(top_left, want.astype(ref.dtype), err_msg=f"test content: camera {k} band")
    return refs


def check_slices(got, refs, flip, what=""):
    assert len(got) == len(refs)
    for k, ref in enumerate(refs):
        assert_array_equal(got[k], ref[::-1] if flip else ref, err_msg=f"{what} camera {k} (flip={flip})")


def names(imgs):
    return [img.name for img in imgs]


@pytest.fixture
def batch_factory(gl):
    """batch_factory(sources, *args, **kwargs) -> gltensor.Batch, closed after the test."""
    made = []

    def make(*args, **kwargs):
        b = gltensor.Batch(*args, **kwargs)
        made.append(b)
        return b

    yield make
    gl.make_current()
    for b in made:
        b.close()
        for cap in b.captures or ():
            cap.close()


# ---------------------------------------------------------------- pixel-exact slices


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
@pytest.mark.parametrize("n", COUNTS)
def test_stacked_slices_equal_references(backend, n, size, make_image, batch_factory):
    w, h = size
    imgs = make_cameras(make_image, n, w, h)
    refs = references(imgs)
    batch = batch_factory(names(imgs), backend=backend)
    assert batch.backend == backend
    assert len(batch) == n
    assert batch.shape == (n, h, w, 4)

    for flip in (False, True):
        frame = batch.read(flip=flip)
        check_gl("after batch.read")
        assert frame.shape == (n, h, w, 4)
        assert frame.dtype == "uint8"
        assert frame.flipped is flip
        got = to_numpy(frame)
        assert got.shape == (n, h, w, 4)
        check_slices(got, refs, flip, "read()")
        if flip:
            # camera k's on-screen top-left pixel carries k in red: order is the order of the sources
            assert_array_equal(got[:, 0, 0, 0], np.arange(n, dtype=np.uint8))

    default = batch.read()
    assert default.flipped is True, "Batch.read() must default to flip=True"
    check_slices(to_numpy(default), refs, True, "read() default")

    for flip in (False, True):
        frames = batch.read_list(flip=flip)
        assert isinstance(frames, list) and len(frames) == n
        for k, f in enumerate(frames):
            assert f.shape == (h, w, 4)
            assert f.flipped is flip
        check_slices([to_numpy(f) for f in frames], refs, flip, "read_list()")


@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
def test_targets_by_name(backend, target, make_image, batch_factory):
    """Renderbuffers and rectangle textures given as names with target=."""
    imgs = make_cameras(make_image, 3, 11, 7, target=target)
    refs = references(imgs)
    batch = batch_factory(names(imgs), target, backend=backend)
    for cap, img in zip(batch.captures, imgs):
        assert cap.name == img.name and cap.target == img.target_name and cap.backend == backend
    for flip in (False, True):
        check_slices(to_numpy(batch.read(flip=flip)), refs, flip)
        check_slices([to_numpy(f) for f in batch.read_list(flip=flip)], refs, flip, "read_list()")


@pytest.mark.parametrize("kind", ["names", "captures", "mixed"])
def test_names_captures_and_mixed(backend, kind, make_image, capture, batch_factory):
    tex = [render(make_image(GL.GL_TEXTURE_2D, "RGBA8", 9, 5), k) for k in (0, 2)]
    rect = render(make_image(GL.GL_TEXTURE_RECTANGLE, "RGBA8", 9, 5), 1)
    rbo = render(make_image(GL.GL_RENDERBUFFER, "RGBA8", 9, 5), 3)
    imgs = [tex[0], rect, tex[1], rbo]
    if kind == "names":
        imgs = [tex[0], render(make_image(GL.GL_TEXTURE_2D, "RGBA8", 9, 5), 1), tex[1]]
    refs = references(imgs)
    if kind == "names":
        sources = names(imgs)
    elif kind == "captures":
        sources = [capture(img, backend=backend) for img in imgs]
    else:  # names for the 2D textures (made by the batch), captures for the others
        sources = [tex[0].name, capture(rect, backend=backend), tex[1].name, capture(rbo, backend=backend)]
    batch = batch_factory(sources, backend=backend)
    caps = batch.captures
    assert isinstance(caps, tuple) and len(caps) == len(imgs) == len(batch)
    for src, cap, img in zip(sources, caps, imgs):
        assert isinstance(cap, gltensor.Capture)
        if isinstance(src, gltensor.Capture):
            assert cap is src, "a Capture source must be used as is"
        assert (cap.name, cap.target, cap.backend) == (img.name, img.target_name, backend)
        assert cap.closed is False
    for flip in (True, False):
        check_slices(to_numpy(batch.read(flip=flip)), refs, flip)
        check_slices([to_numpy(f) for f in batch.read_list(flip=flip)], refs, flip, "read_list()")


MIXED = [  # (format, width, height, target)
    ("RGBA8", 7, 5, GL.GL_TEXTURE_2D),
    ("RGB8", 10, 3, GL.GL_TEXTURE_2D),
    ("R32F", 5, 9, GL.GL_RENDERBUFFER),
    ("RGBA16F", 13, 6, GL.GL_TEXTURE_RECTANGLE),
    ("RGBA8UI", 4, 4, GL.GL_TEXTURE_2D),
    ("R16", 1, 1, GL.GL_TEXTURE_2D),
    ("RG32F", 6, 11, GL.GL_TEXTURE_2D),
]


def test_read_list_mixed_sizes_and_formats(backend, make_image, capture, batch_factory):
    imgs = [render(make_image(t, f, w, h), k) for k, (f, w, h, t) in enumerate(MIXED)]
    refs = [img.reference() for img in imgs]
    batch = batch_factory([capture(img, backend=backend) for img in imgs])
    for flip in (False, True):
        frames = batch.read_list(flip=flip)
        check_gl("after read_list")
        assert len(frames) == len(imgs)
        for k, (f, img, ref) in enumerate(zip(frames, imgs, refs)):
            assert f.shape == img.shape, f"source {k}"
            assert f.dtype == img.fmt.dtype, f"source {k}"
            assert f.flipped is flip
            got = to_numpy(f)
            assert got.dtype == img.fmt.np_dtype
            assert_array_equal(got, ref[::-1] if flip else ref, err_msg=f"source {k} ({img})")
    # the stacked read refuses these sources; read_list keeps working afterwards
    with pytest.raises(gltensor.InvalidArgumentError):
        batch.read()
    assert len(batch.read_list()) == len(imgs)


def test_read_list_takes_no_out(make_image, batch_factory):
    imgs = make_cameras(make_image, 2, 4, 3)
    batch = batch_factory(names(imgs), backend="cpu")
    with pytest.raises(TypeError):
        batch.read_list(out=np.zeros((2, 3, 4, 4), np.uint8))


# ---------------------------------------------------------------- stacked reads need one size and format


def _names_the(exc_info, img):
    return re.search(rf"\b{img.name}\b", str(exc_info.value)) is not None


@pytest.mark.parametrize("odd", ["size", "width", "format", "channels"])
def test_stacked_read_refuses_mixed_sources(backend, odd, make_image, batch_factory):
    imgs = make_cameras(make_image, 4, 9, 7)
    new = {"size": ("RGBA8", 9, 8), "width": ("RGBA8", 8, 7), "format": ("RGBA16F", 9, 7), "channels": ("RGB8", 9, 7)}
    imgs[2].reallocate(new[odd][0], *new[odd][1:])
    render(imgs[2], 2)
    refs = [img.reference() for img in imgs]
    batch = batch_factory(names(imgs), backend=backend)
    with pytest.raises(gltensor.InvalidArgumentError) as exc:
        batch.read()
    assert _names_the(exc, imgs[2]), f"the error must name the odd source ({imgs[2].name}): {exc.value}"
    assert "2" in str(exc.value)
    with pytest.raises(gltensor.InvalidArgumentError):
        batch.read(out=out_tensor(backend, "torch", (4, 7, 9, 4), np.uint8))
    check_slices([to_numpy(f) for f in batch.read_list(flip=False)], refs, False, "read_list()")


@pytest.mark.parametrize("odd_key", ["RGBA8UI", "SRGB8_ALPHA8"])
def test_stacked_read_refuses_other_format_of_same_dtype(backend, odd_key, make_image, batch_factory):
    """The doc asks one size AND format for read(): RGBA8 next to RGBA8UI / SRGB8_ALPHA8 (also uint8 x 4) is mixed."""
    imgs = make_cameras(make_image, 3, 6, 5)
    imgs[1].reallocate(odd_key, 6, 5, seed=1)
    batch = batch_factory(names(imgs), backend=backend)
    with pytest.raises(gltensor.InvalidArgumentError) as exc:
        batch.read()
    assert _names_the(exc, imgs[1]), f"the error must name the odd source ({imgs[1].name}): {exc.value}"
    assert len(batch.read_list()) == 3


def test_stacked_read_accepts_unsized_rgba_next_to_rgba8(backend, make_image, batch_factory):
    """GL_RGBA (unsized) is reported as GL_RGBA8: the same format, so it stacks."""
    imgs = make_cameras(make_image, 2, 6, 5)
    imgs.append(render(make_image(GL.GL_TEXTURE_2D, "unsized_RGBA", 6, 5), 2))
    refs = references(imgs)
    batch = batch_factory(names(imgs), backend=backend)
    check_slices(to_numpy(batch.read()), refs, True)


# ---------------------------------------------------------------- out=


@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("n", [1, 3])
def test_read_into_out(backend, kind, n, make_image, batch_factory):
    w, h = 11, 5
    imgs = make_cameras(make_image, n, w, h)
    refs = references(imgs)
    batch = batch_factory(names(imgs), backend=backend)
    out = out_tensor(backend, kind, (n, h, w, 4), np.uint8)
    for flip in (False, True):
        assert batch.read(flip=flip, out=out) is out
        check_slices(as_numpy(out), refs, flip, "out=")
    assert batch.read(out=out) is out  # default flip=True
    check_slices(as_numpy(out), refs, True, "out= default")


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_read_into_slice_of_bigger_tensor(backend, kind, make_image, batch_factory):
    """out= a view with padded rows and padded images: only the view is written."""
    n, w, h = 3, 10, 6
    imgs = make_cameras(make_image, n, w, h)
    refs = references(imgs)
    batch = batch_factory(names(imgs), backend=backend)
    big = out_tensor(backend, kind, (n + 1, h + 2, w + 5, 4), np.uint8, fill=7)
    view = big[1:, 1 : 1 + h, 2 : 2 + w]
    assert tuple(view.shape) == (n, h, w, 4)
    for flip in (False, True):
        assert batch.read(flip=flip, out=view) is view
        check_slices(as_numpy(view), refs, flip, "padded out=")
    b = as_numpy(big)
    assert (b[0] == 7).all(), "read(out=) wrote into the image before the view"
    assert (b[:, 0] == 7).all() and (b[:, h + 1 :] == 7).all(), "read(out=) wrote outside the view's rows"
    assert (b[:, :, :2] == 7).all() and (b[:, :, 2 + w :] == 7).all(), "read(out=) wrote into row padding"


def test_read_into_float_out(backend, make_image, batch_factory):
    n, w, h = 3, 7, 5
    imgs = make_cameras(make_image, n, w, h, fmt="RGBA16F")
    refs = references(imgs)
    batch = batch_factory(names(imgs), backend=backend)
    out = out_tensor(backend, "torch", (n, h, w, 4), np.float16)
    assert batch.read(flip=False, out=out) is out
    check_slices(as_numpy(out), refs, False, "float16 out=")


@pytest.mark.parametrize(
    "shape,dtype",
    [((2, 5, 7, 4), np.uint8), ((4, 5, 7, 4), np.uint8), ((3, 5, 7, 3), np.uint8), ((3, 7, 5, 4), np.uint8),
     ((5, 7, 4), np.uint8), ((3, 5, 7, 4), np.float32), ((1, 3, 5, 7, 4), np.uint8)],
    ids=["N-1", "N+1", "C-1", "HxW swapped", "3-D", "dtype", "5-D"],
)
def test_wrong_out_raises(backend, shape, dtype, make_image, batch_factory):
    imgs = make_cameras(make_image, 3, 7, 5)
    batch = batch_factory(names(imgs), backend=backend)
    out = out_tensor(backend, "torch", shape, dtype, fill=9)
    with pytest.raises(gltensor.InvalidArgumentError):
        batch.read(out=out)
    assert (as_numpy(out) == 9).all(), "a refused out= must stay untouched"


def test_out_images_overlapping_raises(backend, make_image, batch_factory):
    imgs = make_cameras(make_image, 3, 7, 5)
    batch = batch_factory(names(imgs), backend=backend)
    base = out_tensor(backend, "torch", (5, 7, 4), np.uint8)
    with pytest.raises(gltensor.InvalidArgumentError):
        batch.read(out=base.unsqueeze(0).expand(3, 5, 7, 4))  # all three images on the same memory


# ---------------------------------------------------------------- errors


def test_empty_batch_raises(gl):
    with pytest.raises(gltensor.InvalidArgumentError):
        gltensor.Batch([])
    with pytest.raises(gltensor.InvalidArgumentError):
        gltensor.Batch((), backend="cpu")


def test_sources_not_a_sequence(gl):
    with pytest.raises(TypeError):
        gltensor.Batch(5)


def test_unknown_name_raises(backend, make_texture):
    img = make_texture("RGBA8", 3, 3)
    with pytest.raises(gltensor.InvalidObjectError):
        gltensor.Batch([img.name, 987654], backend=backend)


def test_backend_is_keyword_only(make_texture):
    img = make_texture("RGBA8", 3, 3)
    with pytest.raises(TypeError):
        gltensor.Batch([img.name], GL.GL_TEXTURE_2D, "cpu")


@pytest.mark.parametrize("how", ["names", "captures", "same capture", "name and capture"])
def test_same_image_twice_raises(backend, how, make_texture, capture):
    a, b = make_texture("RGBA8", 4, 3, seed=1), make_texture("RGBA8", 4, 3, seed=2)
    if how == "names":
        sources = [a.name, b.name, a.name]
    elif how == "captures":
        sources = [capture(a, backend=backend), capture(b, backend=backend), capture(a, backend=backend)]
    elif how == "same capture":
        c = capture(a, backend=backend)
        sources = [c, capture(b, backend=backend), c]
    else:
        sources = [a.name, b.name, capture(a, backend=backend)]
    with pytest.raises(gltensor.InvalidArgumentError):
        gltensor.Batch(sources, backend=backend)


@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
def test_deleted_source_raises_at_read(backend, target, make_image, batch_factory):
    imgs = make_cameras(make_image, 3, 6, 5, target=target)
    batch = batch_factory(names(imgs), target, backend=backend)
    references(imgs)
    batch.read()
    imgs[1].delete()
    with pytest.raises(gltensor.InvalidObjectError):
        batch.read()
    with pytest.raises(gltensor.InvalidObjectError):
        batch.read_list()
    with pytest.raises(gltensor.InvalidObjectError):
        batch.read(out=out_tensor(backend, "torch", (3, 5, 6, 4), np.uint8))
    check_gl("after reads of a deleted source")


def test_closed_source_capture(backend, make_image, capture, batch_factory):
    imgs = make_cameras(make_image, 3, 6, 5)
    caps = [capture(img, backend=backend) for img in imgs]
    batch = batch_factory(caps)
    batch.read()
    caps[1].close()
    assert batch.closed is False
    with pytest.raises(gltensor.ClosedError):
        batch.read()
    with pytest.raises(gltensor.ClosedError):
        batch.read_list()
    with pytest.raises(gltensor.ClosedError):
        batch.read(out=out_tensor(backend, "torch", (3, 5, 6, 4), np.uint8))


def test_closed_capture_made_by_the_batch(backend, make_image, batch_factory):
    imgs = make_cameras(make_image, 2, 6, 5)
    batch = batch_factory(names(imgs), backend=backend)
    batch.captures[0].close()
    with pytest.raises(gltensor.ClosedError):
        batch.read()
    with pytest.raises(gltensor.ClosedError):
        batch.read_list()


def test_closed_capture_as_source(backend, make_texture, capture):
    img = make_texture("RGBA8", 3, 3)
    c = capture(img, backend=backend)
    c.close()
    with pytest.raises(gltensor.ClosedError):
        gltensor.Batch([c])


def test_stream_on_cpu_backend_raises(make_image, batch_factory):
    imgs = make_cameras(make_image, 2, 6, 5)
    batch = batch_factory(names(imgs), backend="cpu")
    with pytest.raises(gltensor.InvalidArgumentError):
        batch.read(stream=1)
    with pytest.raises(gltensor.InvalidArgumentError):
        batch.read_list(stream=1)


# ---------------------------------------------------------------- lifetime


def test_close_is_idempotent_and_with(backend, make_image, capture):
    imgs = make_cameras(make_image, 2, 6, 5)
    refs = references(imgs)
    own = capture(imgs[1], backend=backend)
    with gltensor.Batch([imgs[0].name, own], backend=backend) as batch:
        assert batch.closed is False
        frame = batch.read()
    assert batch.closed is True
    batch.close()
    batch.close()
    assert batch.closed is True
    with pytest.raises(gltensor.ClosedError):
        batch.read()
    with pytest.raises(gltensor.ClosedError):
        batch.read_list()
    # frames already read stay valid; a capture passed in stays open and usable
    check_slices(to_numpy(frame), refs, True, "frame after close")
    assert own.closed is False
    assert_array_equal(to_numpy(own.read()), refs[1][::-1])
    for cap in batch.captures:
        cap.close()


def test_frames_do_not_alias_and_follow_new_content(backend, make_image, batch_factory):
    n, w, h = 3, 9, 7
    imgs = make_cameras(make_image, n, w, h)
    batch = batch_factory(names(imgs), backend=backend)
    history = []  # (frame, list_frames, refs) of each step, kept alive
    for step in range(3):
        for k, img in enumerate(imgs):
            render(img, 10 * step + k)
        refs = references(imgs, first=10 * step)
        frame = batch.read()
        listed = batch.read_list()
        check_slices(to_numpy(frame), refs, True, f"step {step}")
        history.append((frame, listed, refs))
    ptrs = [f.data_ptr for f, _, _ in history] + [g.data_ptr for _, fs, _ in history for g in fs]
    assert len(set(ptrs)) == len(ptrs), "live frames share memory"
    for step, (frame, listed, refs) in enumerate(history):  # earlier frames were not overwritten
        check_slices(to_numpy(frame), refs, True, f"frame of step {step} read later")
        check_slices([to_numpy(f) for f in listed], refs, True, f"read_list of step {step} read later")
    assert not np.array_equal(history[0][2][0], history[-1][2][0]), "test content did not change"


def test_out_follows_new_content(backend, make_image, batch_factory):
    n, w, h = 3, 9, 7
    imgs = make_cameras(make_image, n, w, h)
    batch = batch_factory(names(imgs), backend=backend)
    out = out_tensor(backend, "torch", (n, h, w, 4), np.uint8)
    for step in range(3):
        for k, img in enumerate(imgs):
            render(img, 20 * step + k)
        refs = references(imgs, first=20 * step)
        batch.read(flip=False, out=out)
        check_slices(as_numpy(out), refs, False, f"step {step}")


def test_frame_is_4d(backend, make_image, batch_factory):
    n, w, h = 3, 7, 5
    imgs = make_cameras(make_image, n, w, h)
    refs = references(imgs)
    batch = batch_factory(names(imgs), backend=backend)
    frame = batch.read(flip=False)
    assert frame.shape == (n, h, w, 4)
    assert frame.strides == (h * w * 4, w * 4, 4, 1)
    assert frame.nbytes == n * h * w * 4
    if backend == "cpu":
        assert frame.device == "cpu"
        assert tuple(frame.__array_interface__["shape"]) == (n, h, w, 4)
        arr = np.asarray(frame)
        assert arr.shape == (n, h, w, 4)
        check_slices(arr, refs, False, "numpy.asarray")
        assert np.from_dlpack(frame).shape == (n, h, w, 4)
    else:
        assert tuple(frame.__cuda_array_interface__["shape"]) == (n, h, w, 4)
    torch = pytest.importorskip("torch")
    if backend == "cuda" and not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    t = torch.from_dlpack(frame)
    assert tuple(t.shape) == (n, h, w, 4)
    assert t.dim() == 4
    assert t.data_ptr() == frame.data_ptr
    check_slices(torch_to_numpy(t), refs, False, "torch.from_dlpack")


def test_single_source_frame_is_4d(backend, make_texture, batch_factory):
    img = render(make_texture("RGBA8", 5, 3), 0)
    batch = batch_factory([img.name], backend=backend)
    frame = batch.read()
    assert frame.shape == (1, 3, 5, 4)
    assert to_numpy(frame).shape == (1, 3, 5, 4)
    assert [f.shape for f in batch.read_list()] == [(3, 5, 4)]


# ---------------------------------------------------------------- sources resized between reads


def test_one_source_resized(backend, make_image, batch_factory):
    n, w, h = 3, 9, 7
    imgs = make_cameras(make_image, n, w, h)
    # resizable: NVIDIA's GL refuses to reallocate a texture that stays registered with CUDA
    batch = batch_factory(names(imgs), backend=backend, resizable=True)
    check_slices(to_numpy(batch.read()), references(imgs), True)
    imgs[1].reallocate("RGBA8", 12, 4)
    render(imgs[1], 1)
    refs = references(imgs)
    with pytest.raises(gltensor.InvalidArgumentError) as exc:
        batch.read()
    assert _names_the(exc, imgs[1]), f"the error must name the resized source ({imgs[1].name}): {exc.value}"
    frames = batch.read_list()
    assert [f.shape for f in frames] == [(7, 9, 4), (4, 12, 4), (7, 9, 4)]
    check_slices([to_numpy(f) for f in frames], refs, True, "read_list after resize")


@pytest.mark.parametrize("new", [("RGBA8", 12, 4), ("RGBA16F", 5, 8)], ids=["size", "size+format"])
def test_all_sources_resized_alike(backend, new, make_image, batch_factory):
    n, w, h = 3, 9, 7
    imgs = make_cameras(make_image, n, w, h)
    batch = batch_factory(names(imgs), backend=backend, resizable=True)
    old = batch.read()
    old_refs = references(imgs)
    fmt, w2, h2 = new
    for k, img in enumerate(imgs):
        img.reallocate(fmt, w2, h2)
        render(img, 30 + k)
    refs = references(imgs, first=30)
    for flip in (False, True):
        frame = batch.read(flip=flip)
        assert frame.shape == (n, h2, w2, 4)
        assert frame.dtype == imgs[0].fmt.dtype
        check_slices(to_numpy(frame), refs, flip, "after resize")
    assert batch.shape == (n, h2, w2, 4)
    check_slices(to_numpy(old), old_refs, True, "frame from before the resize")


# ---------------------------------------------------------------- CUDA only


@pytest.mark.gpu
def test_mixed_backends_raise(ctx, make_texture, capture):
    if ctx.cuda_device is None:
        pytest.skip(f"the session GL context ({ctx.renderer}) runs on no CUDA device")
    a, b = make_texture("RGBA8", 4, 3, seed=1), make_texture("RGBA8", 4, 3, seed=2)
    with pytest.raises(gltensor.InvalidArgumentError):
        gltensor.Batch([capture(a, backend="cuda"), capture(b, backend="cpu")])


@pytest.mark.gpu
def test_cuda_stream_and_out(ctx, make_image, batch_factory):
    if ctx.cuda_device is None:
        pytest.skip(f"the session GL context ({ctx.renderer}) runs on no CUDA device")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    n, w, h = 64, 9, 7
    imgs = make_cameras(make_image, n, w, h)
    refs = references(imgs)
    batch = batch_factory(names(imgs), backend="cuda")
    s = torch.cuda.Stream()
    frame = batch.read(flip=False, stream=s)
    assert frame.stream == s.cuda_stream
    frame.synchronize()
    check_slices(to_numpy(frame), refs, False, "stream=")
    out = torch.zeros((n, h, w, 4), dtype=torch.uint8, device=f"cuda:{batch.captures[0].cuda_device}")
    torch.cuda.synchronize()  # the zero fill ran on torch's stream, the read goes on s
    assert batch.read(out=out, stream=s) is out
    s.synchronize()
    check_slices(torch_to_numpy(out), refs, True, "stream= out=")
    frames = batch.read_list(stream=s)
    for f in frames:
        f.synchronize()
    check_slices([to_numpy(f) for f in frames], refs, True, "read_list stream=")
