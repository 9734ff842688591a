"""Property tests (hypothesis): any size, format, flip, channel selection, dtype and layout, read into a new frame
or into out=, equals the NumPy reference of tests/test_convert.py applied to GL's own read-back; and fuzzing of
the parsers of user data (out= through DLPack / __array_interface__, atlas grids, read options): whatever the
input, a clear exception or a correct image, never a crash.

Bounded in time: GLTENSOR_HYPOTHESIS_EXAMPLES (default 60 per property; the CI run) scales every test.
"""

import os

import numpy as np
import pytest
from numpy.testing import assert_array_equal

hypothesis = pytest.importorskip("hypothesis", reason="property tests need hypothesis (in the [test] extra)")
from hypothesis import HealthCheck, assume, given, settings, strategies as st  # noqa: E402

import gltensor  # noqa: E402
from formats import BY_KEY  # noqa: E402
from glhelpers import Image, check_gl  # noqa: E402
from test_convert import conversion_data, convert, mismatch  # noqa: E402

pytestmark = pytest.mark.usefixtures("gl")

EXAMPLES = int(os.environ.get("GLTENSOR_HYPOTHESIS_EXAMPLES", "60"))
SETTINGS = dict(deadline=None, derandomize=False, print_blob=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

KEYS = ["RGBA8", "RGB8", "R8", "RG8", "SRGB8_ALPHA8", "RGBA16", "R16F", "RGBA16F", "R32F", "RGBA32F", "R32UI",
        "RGBA8UI"]


@st.composite
def read_case(draw):
    key = draw(st.sampled_from(KEYS))
    fmt = BY_KEY[key]
    w = draw(st.integers(1, 67))
    h = draw(st.integers(1, 41))
    nch = fmt.channels
    letters = "rgba"[:nch]
    channels = draw(st.one_of(
        st.none(),
        st.text(alphabet=letters, min_size=1, max_size=4),
        st.lists(st.integers(0, nch - 1), min_size=1, max_size=4).map(tuple)))
    dtype = draw(st.sampled_from([None, "uint8", "float16", "float32"]))
    layout = draw(st.sampled_from(["hwc", "chw"]))
    flip = draw(st.booleans())
    into = draw(st.booleans())
    seed = draw(st.integers(0, 2**16))
    return key, w, h, channels, dtype, layout, flip, into, seed


@settings(max_examples=EXAMPLES, **SETTINGS)
@given(case=read_case())
def test_read_matches_numpy_reference(gl, case):
    key, w, h, channels, dtype, layout, flip, into, seed = case
    fmt = BY_KEY[key]
    data = conversion_data(fmt, seed=seed, w=max(w, 1), h=max(h, 1)) if w * h >= 300 else None
    img = Image(fmt, w, h, data=data, seed=seed)
    try:
        ref = img.reference()
        want, nan = convert(ref, fmt, channels=channels, dtype=dtype, layout=layout, flip=flip)
        with gltensor.Capture(img.name, backend="cpu") as cap:
            kwargs = dict(flip=flip, channels=channels, dtype=dtype, layout=layout)
            kwargs = {k: v for k, v in kwargs.items() if v is not None}
            if into:
                out = np.full(want.shape, 0x5A, dtype=want.dtype)
                assert cap.read(out=out, **kwargs) is out
                got = out
            else:
                frame = cap.read(**kwargs)
                assert frame.layout == layout and frame.flipped == flip
                got = np.from_dlpack(frame)
        out_name = fmt.dtype if dtype is None else dtype
        problem = mismatch(got, want, nan, out_name)
        assert problem is None, f"{case}: {problem}"
    finally:
        img.delete()
    check_gl()


# ---------------------------------------------------------------- fuzzing the parsers of user data

# Destinations of any shape, dtype, strides, offset, writability, and the wrappers that carry them.
@st.composite
def destination(draw):
    # Half the time a shape some read of the 12x7 RGBA8 capture produces, so that accepted writes are checked too.
    shape = draw(st.one_of(st.sampled_from([(7, 12, 4), (4, 7, 12), (7, 12, 3), (3, 7, 12), (7, 12, 1), (7, 12, 2)]),
                           st.lists(st.integers(0, 40), min_size=0, max_size=5).map(tuple)))
    dtype = draw(st.sampled_from([np.uint8, np.uint8, np.float32, np.int8, np.uint16, np.float16, np.float32, np.float64, np.uint32,
                                  np.bool_, np.complex64]))
    n = int(np.prod(shape)) if shape else 1
    base = np.zeros(max(n, 1) * 3 + 8, dtype=dtype)
    offset = draw(st.integers(0, 7))
    step = draw(st.sampled_from([1, 1, 1, 2, -1]))
    if step == -1:
        flat = base[offset:offset + n][::-1]
    else:
        flat = base[offset:offset + n * step:step]
    arr = flat.reshape(shape) if shape else flat[:1].reshape(())
    if draw(st.booleans()) and arr.ndim >= 2:
        arr = arr.swapaxes(0, 1)
    if draw(st.integers(0, 4)) == 0:
        arr.setflags(write=False)
    return arr


class _ArrayInterface:
    """An object exposing only __array_interface__, with fields the fuzzer may break."""

    def __init__(self, arr, mutate):
        ai = dict(arr.__array_interface__)
        if mutate == "shape-str":
            ai["shape"] = "32x64"
        elif mutate == "typestr-bad":
            ai["typestr"] = "<q9"
        elif mutate == "data-null":
            ai["data"] = (0, False)
        elif mutate == "data-int":
            ai["data"] = 12345
        elif mutate == "strides-short":
            ai["strides"] = (1,)
        elif mutate == "version-9":
            ai["version"] = 9
        elif mutate == "missing-data":
            del ai["data"]
        self.__array_interface__ = ai
        self._keep = arr


@settings(max_examples=EXAMPLES * 3, **SETTINGS)
@given(data=st.data(), wrap=st.sampled_from(["numpy", "dlpack-only", "array-interface", "ai-mutated"]),
       mutate=st.sampled_from(["shape-str", "typestr-bad", "data-null", "data-int", "strides-short", "version-9",
                               "missing-data"]),
       opts=st.fixed_dictionaries({}, optional={"flip": st.booleans(), "dtype": st.sampled_from(["uint8", "float32"]),
                                                "layout": st.sampled_from(["hwc", "chw"]),
                                                "channels": st.sampled_from(["rgb", "a", "bgra", (3, 0)])}))
def test_fuzz_out_parsing(gl, fuzz_capture, data, wrap, mutate, opts):
    cap, ref = fuzz_capture
    want, nan = convert(ref, BY_KEY["RGBA8"], channels=opts.get("channels"), dtype=opts.get("dtype"),
                        layout=opts.get("layout", "hwc"), flip=opts.get("flip", True))
    if data.draw(st.booleans(), label="exact"):  # the right shape and dtype, maybe read-only or a strided view
        dest = np.zeros(want.shape, want.dtype)
        how = data.draw(st.sampled_from(["plain", "plain", "readonly", "sliced", "offset"]), label="how")
        if how == "readonly":
            dest.setflags(write=False)
        elif how == "sliced":
            dest = np.zeros((want.shape[0] * 2,) + want.shape[1:], want.dtype)[::2]
        elif how == "offset":
            dest = np.zeros(want.size + 1, want.dtype)[1:].reshape(want.shape)
    else:
        dest = data.draw(destination(), label="dest")
    if wrap == "numpy":
        target = dest
    elif wrap == "dlpack-only":
        class DL:  # noqa: E306
            def __dlpack__(self, *a, **k):
                return dest.__dlpack__(*a, **k)

            def __dlpack_device__(self):
                return dest.__dlpack_device__()
        try:
            dest.__dlpack__()
        except (BufferError, TypeError, ValueError):
            assume(False)  # numpy itself refuses to export it (read-only, bool, ...)
        target = DL()
    elif wrap == "array-interface":
        target = _ArrayInterface(dest, None)
    else:
        target = _ArrayInterface(dest, mutate)
    try:
        result = cap.read(out=target, **opts)
    except (gltensor.GLTensorError, TypeError, ValueError, BufferError, OverflowError, KeyError) as e:
        assert len(str(e)) >= 8
        return
    # Accepted: it must be exactly right, in the caller's memory.
    assert result is target
    ACCEPTED.append(wrap)
    assert dest.shape == want.shape and dest.dtype == want.dtype and dest.flags.writeable
    assert mismatch(np.asarray(dest), want, nan, str(want.dtype)) is None


ACCEPTED = []


def test_fuzz_out_accepted_some():
    """The fuzzer above reached the accepting branch (runs after it: pytest keeps file order)."""
    print(f"\nout= fuzz: {len(ACCEPTED)} accepted writes checked exactly")
    assert ACCEPTED or EXAMPLES < 20


@pytest.fixture
def fuzz_capture(gl):
    img = Image(BY_KEY["RGBA8"], 12, 7, seed=9)
    cap = gltensor.Capture(img.name, backend="cpu")
    yield cap, img.reference()
    cap.close()
    img.delete()


@settings(max_examples=EXAMPLES * 2, **SETTINGS)
@given(tiles=st.one_of(st.none(), st.tuples(st.integers(-2, 70), st.integers(-2, 70)), st.just((1 << 31, 1)),
                       st.text(max_size=3)),
       tile_size=st.one_of(st.none(), st.tuples(st.integers(-2, 70), st.integers(-2, 70)), st.just((1, 1 << 40))),
       count=st.one_of(st.none(), st.integers(-3, 5000)))
def test_fuzz_atlas_grid(gl, fuzz_capture, tiles, tile_size, count):
    """Any grid over a 12x7 texture: refused clearly, or every tile is the right crop of the image."""
    cap, ref = fuzz_capture
    kw = {k: v for k, v in dict(tiles=tiles, tile_size=tile_size, count=count).items() if v is not None}
    try:
        atlas = gltensor.Atlas(cap.name, backend="cpu", **kw)
    except (gltensor.GLTensorError, TypeError, ValueError, OverflowError) as e:
        assert len(str(e)) >= 8
        return
    with atlas:
        rows, cols = atlas.tiles
        th, tw = atlas.tile_size
        assert rows * th <= 7 and cols * tw <= 12 and 1 <= atlas.count <= rows * cols
        frames = np.from_dlpack(atlas.read(flip=False))
        assert frames.shape == (atlas.count, th, tw, 4)
        for k in range(atlas.count):
            x, y, w, h = atlas.viewport(k)
            assert (w, h) == (tw, th)
            assert_array_equal(frames[k], ref[y:y + h, x:x + w])


@settings(max_examples=EXAMPLES * 3, **SETTINGS)
@given(kwargs=st.dictionaries(
    st.sampled_from(["flip", "stream", "channels", "dtype", "layout", "depth", "projection", "near", "far", "out"]),
    st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True), st.text(max_size=6),
              st.tuples(st.integers(-5, 9)), st.lists(st.integers(-1, 5), max_size=5).map(tuple), st.binary(max_size=4)),
    max_size=5))
def test_fuzz_read_options(gl, fuzz_capture, kwargs):
    """Any read options: a clear exception, or a frame of the documented shape."""
    cap, _ = fuzz_capture
    try:
        frame = cap.read(**kwargs)
    except (gltensor.GLTensorError, TypeError, ValueError, OverflowError, BufferError) as e:
        assert len(str(e)) >= 8
        return
    arr = np.from_dlpack(frame)
    assert arr.ndim == 3 and 1 <= min(arr.shape[0], arr.shape[2]) and arr.size > 0
