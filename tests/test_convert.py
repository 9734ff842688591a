"""Conversions fused into the copy (channels, dtype, layout, flip) against a NumPy / torch reference built
from GL's own read-back (glGetTexImage), for every source format family on every backend here.

Reference arithmetic, as docs/python-api.md states it:
  - unsigned-normalised sources: x / np.float32(255 or 65535), in float32 (IEEE division);
  - float sources: the stored value as float32 (float16 widens exactly); integer sources: the value as float32;
  - float16: NumPy's float32 -> float16 cast, bfloat16: torch's float32 -> bfloat16 cast (both round to nearest
    even); float32: the float32 value;
  - uint8: np.rint(np.clip(x, 0, 1) * np.float32(255)) for normalised / float sources (ties to even),
    min(v, 255) for integer sources.
Comparisons are bit-exact (NaN only has to stay NaN, whatever its payload). The issue allows one ulp for float
outputs; the docs promise this exact arithmetic, and exactness is what catches a truncating (not rounding)
conversion, which is never more than one ulp off. uint8 outputs of NaN sources are not specified by the
docs and are not compared.

The data exercise rounding: every uint8 value in every channel, float32 values whose product with 255 is an
exact .5 tie (rint must round to even), float32 values halfway between two float16 / bfloat16 values, float16
overflow to inf, subnormals, values below 0 and above 1 (clipping), inf / -inf / NaN, -0.0, and large
R32UI values (saturation to 255, float16 overflow, float32 / bfloat16 rounding above 2^24).
"""

import sys

import numpy as np
import pytest
from numpy.testing import assert_array_equal
import gltensor
from formats import BY_KEY
from glhelpers import to_numpy

pytestmark = pytest.mark.usefixtures("gl")

FAMILIES = ["RGBA8", "RGB8", "R8", "RG8", "SRGB8_ALPHA8", "RGBA16", "R16F", "RGBA16F", "R32F", "RGBA32F",
            "R32UI", "RGBA8UI"]
DTYPES = [None, "uint8", "float16", "bfloat16", "float32"]
DTYPE_IDS = ["stored", "uint8", "float16", "bfloat16", "float32"]
W, H = 24, 17  # 408 pixels; odd height so that a missing flip shows


# ---------------------------------------------------------------- data


def _f32(*values):
    return np.array(values, dtype=np.float64).astype(np.float32)


def special_values(fmt):
    """Values of the format's dtype that every channel must contain (at most W * H of them)."""
    dt = fmt.np_dtype
    if dt == np.uint8:
        return np.arange(256, dtype=np.uint8)
    if dt == np.uint16:  # RGBA16 (unorm): ends, middle, and values next to uint8 rounding boundaries
        near_ties = [round((k + 0.5) * 257) + d for k in range(0, 255, 9) for d in (-1, 0, 1)]
        return np.array([0, 1, 2, 127, 128, 129, 256, 257, 32767, 32768, 65279, 65534, 65535] + near_ties, np.uint16)
    if dt == np.uint32:  # R32UI
        k = np.arange(127, 140, dtype=np.int64)
        bf16_edges = np.concatenate([k * 2**17 + 2**16 + d for d in (-1, 0, 1)])  # in [2^24, 2^25): ties of bfloat16
        small = [0, 1, 2, 127, 128, 254, 255, 256, 257, 1000, 2048, 2049, 65504, 65505, 65519, 65520, 65535, 65536]
        big = [2**24 - 1, 2**24, 2**24 + 1, 2**24 + 2, 2**24 + 3, 2**31 - 1, 2**31, 2**31 + 1, 2**32 - 2, 2**32 - 1]
        return np.concatenate([np.array(small + big, np.int64), bf16_edges]).astype(np.uint32)
    specials = [0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.0, -0.25, np.inf, -np.inf, np.nan, 1 / 255, 254.5 / 255]
    if dt == np.float16:
        h = [65504.0, -65504.0, 2.0**-24, 2.0**-14, 2.0**-14 - 2.0**-24, 0.99951171875, 1.0009765625, 0.00048828125]
        return np.array(specials + h, np.float64).astype(np.float16)
    # float32
    k = np.arange(255)
    ties = ((k + 0.5) / 255).astype(np.float32)
    assert (ties * np.float32(255) == (k + 0.5)).all(), "test data: not every uint8 tie is exact in float32"
    half_ties = [1 + 2.0**-11, 1 + 3 * 2.0**-11, 2.0**-25, 3 * 2.0**-25, 2.0**-24, 65519.0, 65520.0, 65504.0,
                 70000.0, -65520.0, 2.0**-14 - 2.0**-25, 0.5 + 2.0**-12]
    bf16_ties = [1 + 2.0**-8, 1 + 3 * 2.0**-8, -(1 + 2.0**-8), 3.3961e38, 3.4e38, 0.5 + 2.0**-9, 1 + 2.0**-8 + 2.0**-20]
    other = [1e30, -1e30, 1e-45, -1e-45, 1e-40, 0.999, 1.0000001, 0.99999994, 2.0**-126]
    return np.concatenate([_f32(*specials), ties, _f32(*half_ties), _f32(*bf16_ties), _f32(*other)])


def random_values(fmt, n, rng):
    dt = fmt.np_dtype
    if dt.kind == "u":
        if dt == np.uint32:  # half small (around the uint8 range), half anywhere
            return np.concatenate([rng.integers(0, 600, n // 2), rng.integers(0, 2**32, n - n // 2)]).astype(dt)
        return rng.integers(0, np.iinfo(dt).max, n, endpoint=True).astype(dt)
    if dt == np.float16:
        # everything half can hold in [-0.25, 1.25] plus a few large ones
        return np.concatenate([rng.uniform(-0.25, 1.25, n - n // 8), rng.uniform(-300, 300, n // 8)]).astype(dt)
    return np.concatenate([rng.uniform(-0.25, 1.25, n - n // 4),
                           rng.standard_normal(n // 4) * np.exp2(rng.integers(-30, 30, n // 4))]).astype(dt)


def conversion_data(fmt, seed=0, w=W, h=H):
    """(H, W, C) data: each channel holds every special value once (shuffled over the image) and random values."""
    rng = np.random.default_rng([seed, fmt.internal])
    specials = special_values(fmt)
    n = w * h
    assert len(specials) <= n
    out = np.empty((h, w, fmt.channels), fmt.np_dtype)
    for c in range(fmt.channels):
        vals = np.concatenate([specials, random_values(fmt, n - len(specials), rng)])
        out[..., c] = rng.permutation(vals).reshape(h, w)
    return out


# ---------------------------------------------------------------- reference


def channel_indices(channels, nch):
    if channels is None:
        return list(range(nch))
    if isinstance(channels, str):
        return ["rgba".index(c) for c in channels]
    return list(channels)


def convert(src, fmt, channels=None, dtype=None, layout="hwc", flip=False):
    """Reference conversion of a bottom-up (H, W, C) read-back. Returns (values, nan_mask): bfloat16 values are
    their uint16 bit patterns; nan_mask marks outputs that come from NaN inputs (None when there are none)."""
    x = src[..., channel_indices(channels, src.shape[-1])]
    nan = np.isnan(x) if x.dtype.kind == "f" else None
    dtype = None if dtype is None else np.dtype(dtype).name if dtype != "bfloat16" else "bfloat16"
    if dtype is None or dtype == x.dtype.name:
        out = x.copy()
    else:
        integer = fmt.is_integer
        if x.dtype.kind == "u" and not integer:
            f = x.astype(np.float32) / np.float32(np.iinfo(x.dtype).max)  # unsigned-normalised
        else:
            f = x.astype(np.float32)  # float widens exactly; integers keep their values (rounded above 2^24)
        if dtype == "float32":
            out = f
        elif dtype == "float16":
            with np.errstate(over="ignore"):
                out = f.astype(np.float16)
        elif dtype == "bfloat16":
            torch = pytest.importorskip("torch")
            out = torch.from_numpy(np.ascontiguousarray(f)).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
        else:  # uint8
            if integer:
                out = np.minimum(x, 255).astype(np.uint8)
            else:
                with np.errstate(invalid="ignore"):
                    out = np.rint(np.clip(f, 0, 1) * np.float32(255)).astype(np.uint8)
                    out = np.where(np.isnan(f), 0, out).astype(np.uint8)  # unspecified; masked in comparisons
    if flip:
        out, nan = out[::-1], None if nan is None else nan[::-1]
    if layout == "chw":
        out, nan = out.transpose(2, 0, 1), None if nan is None else nan.transpose(2, 0, 1)
    if nan is not None and not nan.any():
        nan = None
    return np.ascontiguousarray(out), nan


def out_dtype_name(fmt, dtype):
    return fmt.dtype if dtype is None else "bfloat16" if dtype == "bfloat16" else np.dtype(dtype).name


def frame_values(frame):
    """Frame pixels as numpy; bfloat16 frames as uint16 bit patterns (through torch's DLPack)."""
    if frame.dtype == "bfloat16":
        torch = pytest.importorskip("torch")
        return torch.from_dlpack(frame).view(torch.int16).cpu().numpy().view(np.uint16)
    return to_numpy(frame)


def _is_nan_bits(values, dtype):
    if dtype == "bfloat16":
        return (values & 0x7FFF) > 0x7F80
    return np.isnan(values)


def mismatch(got, want, nan, dtype):
    """None when `got` equals `want` exactly (bit for bit; NaN only as NaN), else a short description."""
    if got.shape != want.shape:
        return f"shape {got.shape} != {want.shape}"
    if dtype == "uint8" or dtype in ("uint16", "uint32"):
        bad = got != want
        if nan is not None:
            bad &= ~nan  # uint8 of NaN: not specified
    else:
        gnan, wnan = _is_nan_bits(got, dtype), _is_nan_bits(want, dtype)
        ubits = {2: np.uint16, 4: np.uint32}[got.dtype.itemsize]
        bad = (gnan != wnan) | (~wnan & (got.view(ubits) != want.view(ubits)))
    if not bad.any():
        return None
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    return f"{int(bad.sum())} of {bad.size} differ, first at {idx}: got {got[idx]!r}, want {want[idx]!r}"


def channel_options(fmt):
    """None, the letter sets the format has, and index tuples (repeats and reorders) valid for it."""
    n = fmt.channels
    opts = [None, "r"]
    if n >= 2:
        opts += [(1, 0)]
    if n >= 3:
        opts += ["rgb", "bgr"]
    if n == 4:
        opts += ["bgra", (3, 3, 0, 1)]
    if n == 1:
        opts += [(0, 0, 0)]
    return opts


def make_source(make_texture, key, seed=0, w=W, h=H):
    fmt = BY_KEY[key]
    img = make_texture(fmt, w, h, data=conversion_data(fmt, seed, w, h))
    ref = img.reference()
    assert_array_equal(ref.view(np.uint8), img.data.view(np.uint8),
                       err_msg="test helper: GL did not store the uploaded data bit-exactly")
    return fmt, img, ref


# ---------------------------------------------------------------- every combination


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("key", FAMILIES)
def test_capture_conversions(backend, key, dtype, make_texture, capture):
    """Every channels x layout x flip for this (format, dtype): exact against the reference."""
    fmt, img, ref = make_source(make_texture, key, seed=1)
    cap = capture(img, backend=backend)
    failures = []
    combos = 0
    for channels in channel_options(fmt):
        for layout in ("hwc", "chw"):
            for flip in (False, True):
                kwargs = dict(flip=flip, channels=channels, dtype=dtype, layout=layout)
                frame = cap.read(**kwargs)
                want, nan = convert(ref, fmt, channels, dtype, layout, flip)
                dname = out_dtype_name(fmt, dtype)
                combos += 1
                if frame.dtype != dname or tuple(frame.shape) != want.shape:
                    failures.append(f"{kwargs}: frame {frame.dtype} {frame.shape}, want {dname} {want.shape}")
                    continue
                if frame.flipped is not flip:
                    failures.append(f"{kwargs}: frame.flipped is {frame.flipped}")
                itemsize = 2 if dname == "bfloat16" else np.dtype(dname).itemsize
                if frame.nbytes != want.size * itemsize:
                    failures.append(f"{kwargs}: nbytes {frame.nbytes} != {want.size * itemsize}")
                err = mismatch(frame_values(frame), want, nan, dname)
                if err:
                    failures.append(f"{kwargs}: {err}")
    assert combos >= 12
    assert not failures, f"{len(failures)} of {combos} combinations wrong:\n" + "\n".join(failures)


@pytest.mark.parametrize("dtype", ["uint8", "float16", "bfloat16", "float32"])
@pytest.mark.parametrize("key,w,h", [("RGBA16", 128, 128), ("R16F", 256, 256), ("RG8", 16, 16)],
                         ids=["RGBA16-all-65536", "R16F-all-65536-bit-patterns", "RG8-all-256"])
def test_every_16bit_value(backend, key, w, h, dtype, make_texture, capture):
    """Every value a 16-bit (or 8-bit) source can hold, through every conversion: exact."""
    fmt = BY_KEY[key]
    rng = np.random.default_rng(7)
    if key == "R16F":
        data = rng.permutation(np.arange(65536, dtype=np.uint32).astype(np.uint16)).view(np.float16)
    elif key == "RG8":
        data = np.stack([rng.permutation(256), rng.permutation(256)], axis=-1).astype(np.uint8)
    else:
        data = rng.permutation(np.arange(65536, dtype=np.uint32).astype(np.uint16))
    data = data.reshape(h, w, fmt.channels)
    img = make_texture(fmt, w, h, data=data)
    ref = img.reference()
    if key == "R16F":  # GL may canonicalise NaN payloads; everything else is stored as is
        finite = ~np.isnan(ref)
        assert_array_equal(ref.view(np.uint16)[finite], data.view(np.uint16)[finite])
    else:
        assert_array_equal(ref, data)
    cap = capture(img, backend=backend)
    for flip in (False, True):
        frame = cap.read(flip=flip, dtype=dtype)
        want, nan = convert(ref, fmt, None, dtype, "hwc", flip)
        err = mismatch(frame_values(frame), want, nan, out_dtype_name(fmt, dtype))
        assert err is None, f"{key} -> {dtype} flip={flip}: {err}"


def test_dtype_spellings(backend, make_texture, capture):
    """dtype= takes names, NumPy dtypes and scalar types, and torch dtypes."""
    fmt, img, ref = make_source(make_texture, "RGBA16", seed=3)
    cap = capture(img, backend=backend)
    spellings = {"float32": ["float32", np.float32, np.dtype("float32")],
                 "float16": ["float16", np.float16, np.dtype("float16")],
                 "uint8": ["uint8", np.uint8, np.dtype("uint8")]}
    torch = None
    try:
        import torch
    except ImportError:
        pass
    if torch is not None:
        spellings["float32"].append(torch.float32)
        spellings["float16"].append(torch.float16)
        spellings["uint8"].append(torch.uint8)
        spellings["bfloat16"] = ["bfloat16", torch.bfloat16]
    for name, forms in spellings.items():
        want, nan = convert(ref, fmt, None, name, "hwc", True)
        for form in forms:
            frame = cap.read(dtype=form)
            assert frame.dtype == name, f"dtype={form!r} gave {frame.dtype}"
            assert mismatch(frame_values(frame), want, nan, name) is None, f"dtype={form!r}"


def test_layout_strides(backend, make_texture, capture):
    fmt, img, ref = make_source(make_texture, "RGBA32F", seed=4)
    cap = capture(img, backend=backend)
    frame = cap.read(layout="chw", channels="bgr")
    assert frame.shape == (3, H, W)
    assert frame.strides == (H * W * 4, W * 4, 4)
    frame = cap.read(layout="CHW", dtype="float16")
    assert frame.shape == (4, H, W) and frame.strides == (H * W * 2, W * 2, 2)
    frame = cap.read(layout="hwc", channels=(2,))
    assert frame.shape == (H, W, 1) and frame.strides == (W * 4, 4, 4)


def test_cpu_bfloat16_frame_interfaces(make_texture, capture):
    """bfloat16 frames have no array-interface type string: DLPack only (docs)."""
    fmt, img, ref = make_source(make_texture, "RGBA8", seed=5)
    cap = capture(img, backend="cpu")
    frame = cap.read(dtype="bfloat16")
    with pytest.raises(AttributeError):
        frame.__array_interface__
    want, _ = convert(ref, fmt, None, "bfloat16", "hwc", True)
    assert_array_equal(frame_values(frame), want)


# ---------------------------------------------------------------- out=


def _torch_dtype(torch, name):
    return {"uint8": torch.uint8, "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}[name]


@pytest.mark.parametrize("kwargs", [
    dict(channels="rgb", dtype="float32"),
    dict(channels="bgr", dtype="uint8", layout="chw"),
    dict(dtype="float16", layout="chw", flip=False),
    dict(channels=(2,), dtype="float32", layout="chw"),
    dict(channels="bgra", dtype="bfloat16"),
], ids=["rgb-f32", "bgr-u8-chw", "f16-chw", "b-f32-chw", "bgra-bf16"])
def test_read_into_out_converted(backend, kwargs, make_texture, capture):
    torch = pytest.importorskip("torch")
    if backend == "cuda" and not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    fmt, img, ref = make_source(make_texture, "RGBA16F", seed=6)
    cap = capture(img, backend=backend)
    want, nan = convert(ref, fmt, kwargs.get("channels"), kwargs.get("dtype"), kwargs.get("layout", "hwc"),
                        kwargs.get("flip", True))
    dname = out_dtype_name(fmt, kwargs.get("dtype"))
    out = torch.zeros(want.shape, dtype=_torch_dtype(torch, dname), device=backend)
    assert cap.read(out=out, **kwargs) is out
    if backend == "cuda":
        torch.cuda.synchronize()
    got = out.view(torch.int16).cpu().numpy().view(np.uint16) if dname == "bfloat16" else \
        (out.cpu().numpy())
    assert mismatch(got, want, nan, dname) is None
    if backend == "cpu" and dname != "bfloat16":  # numpy out= too
        arr = np.zeros(want.shape, dname)
        assert cap.read(out=arr, **kwargs) is arr
        assert mismatch(arr, want, nan, dname) is None


def test_read_into_padded_out_converted(make_texture, capture):
    fmt, img, ref = make_source(make_texture, "RGBA8", seed=7)
    cap = capture(img, backend="cpu")
    big = np.full((H, W + 5, 3), -1.0, np.float32)
    view = big[:, 2 : 2 + W]
    assert cap.read(out=view, channels="bgr", dtype="float32") is view
    want, _ = convert(ref, fmt, "bgr", "float32", "hwc", True)
    assert_array_equal(view, want)
    assert (big[:, :2] == -1).all() and (big[:, 2 + W :] == -1).all(), "read(out=) wrote outside the view"


@pytest.mark.parametrize("case", ["unconverted_shape", "hwc_for_chw", "chw_for_hwc", "stored_dtype", "wrong_dtype",
                                  "too_many_channels"])
def test_out_must_match_converted(case, make_texture, capture):
    fmt, img, ref = make_source(make_texture, "RGBA8", seed=8)
    cap = capture(img, backend="cpu")
    kwargs, out = {
        "unconverted_shape": (dict(channels="rgb"), np.zeros((H, W, 4), np.uint8)),
        "hwc_for_chw": (dict(layout="chw", channels="rgb"), np.zeros((H, W, 3), np.uint8)),
        "chw_for_hwc": (dict(channels="rgb"), np.zeros((3, H, W), np.uint8)),
        "stored_dtype": (dict(dtype="float32"), np.zeros((H, W, 4), np.uint8)),
        "wrong_dtype": (dict(dtype="float16"), np.zeros((H, W, 4), np.float32)),
        "too_many_channels": (dict(channels="r"), np.zeros((H, W, 4), np.uint8)),
    }[case]
    with pytest.raises(gltensor.InvalidArgumentError):
        cap.read(out=out, **kwargs)
    assert not out.any(), "a refused out= must not be written"


# ---------------------------------------------------------------- batches and atlases


@pytest.fixture
def closing(gl):
    made = []
    yield made.append
    gl.make_current()
    for obj in made:
        obj.close()


BATCH_CASES = [
    ("RGBA8", dict(channels="bgr", dtype="float32", layout="chw")),
    ("RGBA16F", dict(dtype="bfloat16", channels=(3, 0))),
    ("R32F", dict(dtype="uint8", layout="chw", flip=False)),
    ("RGBA16", dict(channels="rgb", dtype="float16")),
    ("R32UI", dict(dtype="uint8", channels=(0, 0))),
]


@pytest.mark.parametrize("key,kwargs", BATCH_CASES, ids=[k for k, _ in BATCH_CASES])
def test_batch_read_converted(backend, key, kwargs, make_texture, closing):
    srcs = [make_source(make_texture, key, seed=10 + k) for k in range(3)]
    batch = gltensor.Batch([img.name for _, img, _ in srcs], backend=backend)
    closing(batch)
    for c in batch.captures:
        closing(c)
    fmt = srcs[0][0]
    flip = kwargs.get("flip", True)
    frame = batch.read(**kwargs)
    wants = [convert(ref, fmt, kwargs.get("channels"), kwargs.get("dtype"), kwargs.get("layout", "hwc"), flip)
             for _, _, ref in srcs]
    assert tuple(frame.shape) == (3,) + wants[0][0].shape  # (N, C, H, W) for chw
    dname = out_dtype_name(fmt, kwargs.get("dtype"))
    assert frame.dtype == dname
    got = frame_values(frame)
    for k, (want, nan) in enumerate(wants):
        assert mismatch(got[k], want, nan, dname) is None, f"camera {k}: {mismatch(got[k], want, nan, dname)}"
    # read_list: the same conversions, frame by frame
    frames = batch.read_list(**kwargs)
    for k, (f, (want, nan)) in enumerate(zip(frames, wants)):
        assert tuple(f.shape) == want.shape
        assert mismatch(frame_values(f), want, nan, dname) is None, f"read_list camera {k}"


def test_batch_read_into_out_converted(backend, make_texture, closing):
    torch = pytest.importorskip("torch")
    if backend == "cuda" and not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    srcs = [make_source(make_texture, "RGBA8", seed=20 + k) for k in range(4)]
    batch = gltensor.Batch([img.name for _, img, _ in srcs], backend=backend)
    closing(batch)
    for c in batch.captures:
        closing(c)
    out = torch.zeros((4, 3, H, W), dtype=torch.float16, device=backend)
    assert batch.read(out=out, channels="rgb", dtype="float16", layout="chw") is out
    if backend == "cuda":
        torch.cuda.synchronize()
    got = out.cpu().numpy()
    for k, (fmt, _, ref) in enumerate(srcs):
        want, nan = convert(ref, fmt, "rgb", "float16", "chw", True)
        assert mismatch(got[k], want, nan, "float16") is None, f"camera {k}"
    with pytest.raises(gltensor.InvalidArgumentError):  # the unconverted shape
        batch.read(out=torch.zeros((4, H, W, 4), dtype=torch.float16, device=backend), channels="rgb",
                   dtype="float16", layout="chw")


def test_read_list_mixed_formats_converted(backend, make_texture, closing):
    """read_list converts each source by its own format; a channel one source lacks is refused."""
    srcs = [make_source(make_texture, key, seed=30 + k, w=w, h=h)
            for k, (key, w, h) in enumerate([("RGBA8", 16, 17), ("R32F", 24, 17), ("RGBA16", 11, 13), ("R8", 16, 16)])]
    batch = gltensor.Batch([img.name for _, img, _ in srcs], backend=backend)
    closing(batch)
    for c in batch.captures:
        closing(c)
    for kwargs in (dict(channels="r", dtype="float16"), dict(dtype="uint8", layout="chw", flip=False),
                   dict(dtype="bfloat16", channels=(0, 0, 0))):
        frames = batch.read_list(**kwargs)
        for k, (f, (fmt, _, ref)) in enumerate(zip(frames, srcs)):
            want, nan = convert(ref, fmt, kwargs.get("channels"), kwargs.get("dtype"), kwargs.get("layout", "hwc"),
                                kwargs.get("flip", True))
            err = mismatch(frame_values(f), want, nan, out_dtype_name(fmt, kwargs.get("dtype")))
            assert err is None, f"{kwargs} source {k} ({fmt.key}): {err}"
    with pytest.raises(gltensor.InvalidArgumentError):
        batch.read_list(channels="rgb")  # R32F and R8 have no g, b


ATLAS_CASES = [
    ("RGBA8", dict(channels="bgr", dtype="float32", layout="chw")),
    ("RGBA16F", dict(dtype="uint8", flip=False)),
    ("RGBA32F", dict(dtype="bfloat16", channels="a", layout="chw", flip=False)),
    ("R32UI", dict(dtype="float16")),
]


@pytest.mark.parametrize("key,kwargs", ATLAS_CASES, ids=[k for k, _ in ATLAS_CASES])
def test_atlas_read_converted(backend, key, kwargs, make_texture, closing):
    rows, cols, th, tw = 2, 3, 7, 8  # 24x17 texture: a 2x3 grid of 8x7 tiles, one row left over at the bottom
    fmt, img, ref = make_source(make_texture, key, seed=40)
    atlas = gltensor.Atlas(img.name, tiles=(rows, cols), tile_size=(th, tw), backend=backend)
    closing(atlas)
    flip = kwargs.get("flip", True)
    frame = atlas.read(**kwargs)
    dname = out_dtype_name(fmt, kwargs.get("dtype"))
    assert frame.dtype == dname
    got = frame_values(frame)
    assert got.shape[0] == rows * cols
    for k in range(rows * cols):
        x, y = (k % cols) * tw, H - (k // cols + 1) * th  # tile k hangs from the top-left as seen on screen
        want, nan = convert(ref[y : y + th, x : x + tw], fmt, kwargs.get("channels"), kwargs.get("dtype"),
                            kwargs.get("layout", "hwc"), flip)
        assert got[k].shape == want.shape, (got.shape, want.shape)
        err = mismatch(got[k], want, nan, dname)
        assert err is None, f"tile {k}: {err}"


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize("key,channels", [
    ("R8", "g"), ("R8", "rgb"), ("R8", (1,)), ("RG8", "b"), ("RG8", "rgba"), ("RGB8", "a"), ("RGB8", "bgra"),
    ("RGBA8", (4,)), ("RGBA8", (0, 5)), ("RGBA8", (-1,)), ("R32UI", "rg"), ("R16F", (0, 1)),
])
def test_channel_not_in_format(backend, key, channels, make_texture, capture):
    fmt, img, ref = make_source(make_texture, key, seed=50)
    cap = capture(img, backend=backend)
    with pytest.raises(gltensor.InvalidArgumentError) as ei:
        cap.read(channels=channels)
    assert fmt.reported in str(ei.value) or str(img.name) in str(ei.value), str(ei.value)
    # the capture keeps working
    assert mismatch(to_numpy(cap.read(flip=False)), ref, None, fmt.dtype) is None


@pytest.mark.parametrize("dtype", ["int8", "float64", "uint16", "uint32", "int32", "f4", "", "rgba", np.int16,
                                   np.float64, 3])
def test_bad_dtype(dtype, make_texture, capture):
    fmt, img, _ = make_source(make_texture, "RGBA8", seed=51)
    cap = capture(img, backend="cpu")
    with pytest.raises(ValueError):
        cap.read(dtype=dtype)


def test_bad_torch_dtype(make_texture, capture):
    torch = pytest.importorskip("torch")
    fmt, img, _ = make_source(make_texture, "RGBA8", seed=52)
    cap = capture(img, backend="cpu")
    for dt in (torch.int32, torch.float64, torch.int8):
        with pytest.raises(ValueError):
            cap.read(dtype=dt)


@pytest.mark.parametrize("layout", ["nchw", "hw", "", "whc", "chw ", "c"])
def test_bad_layout(layout, make_texture, capture):
    fmt, img, _ = make_source(make_texture, "RGBA8", seed=53)
    cap = capture(img, backend="cpu")
    with pytest.raises(ValueError):
        cap.read(layout=layout)


@pytest.mark.parametrize("channels", ["", "rgbar", "x", "rgbx", "r g", (0, 1, 2, 3, 0), ()])
def test_bad_channels_value(channels, make_texture, capture):
    fmt, img, _ = make_source(make_texture, "RGBA8", seed=54)
    cap = capture(img, backend="cpu")
    with pytest.raises(ValueError):  # InvalidArgumentError is a ValueError too
        cap.read(channels=channels)


def test_bad_options_in_batch_and_atlas(make_texture, closing):
    fmt, img, _ = make_source(make_texture, "R8", seed=55)
    batch = gltensor.Batch([img.name], backend="cpu")
    closing(batch)
    for c in batch.captures:
        closing(c)
    atlas = gltensor.Atlas(img.name, tiles=(1, 1), backend="cpu")
    closing(atlas)
    for reader in (batch.read, batch.read_list, atlas.read):
        with pytest.raises(gltensor.InvalidArgumentError):
            reader(channels="rgb")
        with pytest.raises(ValueError):
            reader(dtype="float64")
        with pytest.raises(ValueError):
            reader(layout="nchw")


@pytest.mark.parametrize("layout", ["hwc", "chw"])
def test_channel_pick_into_unaligned_out(layout, make_texture, capture):
    """The CPU backend moves stored 16-bit elements without assuming alignment: a caller's out= array may start
    at an odd address (numpy allows it), and the channel pick must still land every element exactly (UBSan's
    alignment check runs this in CI)."""
    fmt, img, ref = make_source(make_texture, "RGBA16", seed=11)
    cap = capture(img, backend="cpu")
    want, _ = convert(ref, fmt, "bgr", None, layout, True)
    raw = np.zeros(want.nbytes + 1, np.uint8)
    out = np.ndarray(want.shape, dtype=want.dtype, buffer=raw, offset=1)
    assert not out.flags.aligned
    assert cap.read(out=out, channels="bgr", layout=layout) is out
    assert_array_equal(out, want)


@pytest.mark.parametrize("dtype", ["float", float, "int", int, "torch.float", "numpy.int"])
def test_ambiguous_float_and_int_are_refused_everywhere(dtype, make_texture, capture):
    """'float'/float and 'int'/int mean float64/int64 to NumPy and float32/int32 to torch: every dtype= refuses
    them, naming both sizes, instead of silently picking torch's (reads, buffer mappings and copies alike)."""
    from OpenGL import GL

    sizes = ("float32", "float64") if "float" in str(dtype) else ("int32", "int64")
    fmt, img, _ = make_source(make_texture, "RGBA8", seed=53)
    cap = capture(img, backend="cpu")
    buf = int(GL.glGenBuffers(1))
    try:
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, buf)
        GL.glBufferData(GL.GL_ARRAY_BUFFER, 64, None, GL.GL_DYNAMIC_DRAW)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)
        calls = {"read": lambda: cap.read(dtype=dtype),
                 "read_buffer": lambda: gltensor.read_buffer(buf, dtype=dtype, backend="cpu"),
                 "map_buffer": lambda: gltensor.map_buffer(buf, dtype=dtype, mode="read", backend="cpu").__enter__()}
        for what, call in calls.items():
            with pytest.raises(ValueError, match="ambiguous") as e:
                call()
            assert all(s in str(e.value) for s in sizes), (what, str(e.value))
        # The sized spellings, and torch's own alias (torch.float is torch.float32), still work.
        forms = ["float32", np.float32, np.dtype("float32")]
        torch = sys.modules.get("torch")
        if torch is not None:
            forms.append(torch.float)
        assert [cap.read(dtype=d).dtype for d in forms] == ["float32"] * len(forms)
        assert gltensor.read_buffer(buf, dtype=np.dtype(np.float64), backend="cpu").shape == (8,)
    finally:
        GL.glDeleteBuffers(1, [buf])


def test_slot_space_refuses_ambiguous_float():
    pytest.importorskip("gymnasium")
    from gltensor.gymnasium import SlotSpace

    for d in ("float", float):
        with pytest.raises(ValueError, match="ambiguous"):
            SlotSpace(8, 8, 3, dtype=d)
    assert SlotSpace(8, 8, 3, dtype="float32").dtype == np.float32
