"""Integer and option arguments (issue #22, classes 5 and 6), all through the converters of
python/gltensor/_ext/args.c:

- class 5: every int the API takes is converted with its range checked; nothing is cast to a C int silently
  (channels=(2**32 + 1,) read channel g, count=2**32 + 1 became 1);
- class 6: None is the default of every option (read/write flip=None meant flip=False), and names are compared
  with their length ("uint8\\x00float32" was read as uint8).

CPU backend here, CUDA backend on the GPU machine (marked gpu).
"""

import os

import numpy as np
import pytest
from OpenGL import GL

import gltensor

pytestmark = pytest.mark.usefixtures("gl")
hypothesis = pytest.importorskip("hypothesis", reason="the argument properties need hypothesis (the [test] extra)")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from test_context_identity import host, source  # noqa: E402

EXAMPLES = int(os.environ.get("GLTENSOR_HYPOTHESIS_EXAMPLES", "60"))
RANGE_ERRORS = (ValueError, TypeError, gltensor.GLTensorError)
# Values a cast to a C int (or long) would wrap into something valid.
WRAPPING = [2**32, 2**32 + 1, 2**32 + 2, 2**31, 2**40, 2**63, 2**64 + 1, -(2**32) + 1, -(2**63) - 1]


def rgba_texture(make_texture, w=8, h=4):
    data = np.zeros((h, w, 4), np.uint8)
    data[..., 0], data[..., 1], data[..., 2], data[..., 3] = 10, 20, 30, 40
    return make_texture("RGBA8", w, h, data=data)


# ---------------------------------------------------------------- class 5: ints


@pytest.mark.parametrize("value", WRAPPING)
def test_read_channel_index_never_wraps(backend, capture, make_texture, value):
    cap = capture(rgba_texture(make_texture), backend=backend)
    with pytest.raises(RANGE_ERRORS):
        cap.read(channels=(value,))
    with pytest.raises(RANGE_ERRORS):
        cap.read(channels=(0, value))


@pytest.mark.parametrize("value", WRAPPING)
def test_upload_channel_index_never_wraps(backend, make_texture, gl, value):
    if backend == "cuda" and gl.cuda_device is None:
        pytest.skip("the session context runs on no CUDA device")
    img = rgba_texture(make_texture)
    before = img.reference()
    with gltensor.Upload(img.name, backend=backend) as up:
        with pytest.raises(RANGE_ERRORS):
            up.write(source(backend, 99)[..., :1], channels=(value,))
    assert (img.reference() == before).all(), "a refused write changed the texture"


INT_ARGS = {
    "atlas-count": lambda name, v: gltensor.Atlas(name, tiles=(2, 2), count=v, backend="cpu"),
    "atlas-tiles": lambda name, v: gltensor.Atlas(name, tiles=(v, 1), backend="cpu"),
    "atlas-tile-size": lambda name, v: gltensor.Atlas(name, tile_size=(1, v), backend="cpu"),
    "atlas-viewport": lambda name, v: gltensor.Atlas(name, tiles=(2, 2), backend="cpu").viewport(v),
    "capture-name": lambda name, v: gltensor.Capture(v, backend="cpu"),
    "capture-target": lambda name, v: gltensor.Capture(name, v, backend="cpu"),
    "capture-device": lambda name, v: gltensor.Capture(name, cuda_device=v),
    "capture-region": lambda name, v: gltensor.Capture(name, region=(0, 0, v, 1), backend="cpu"),
    "batch-device": lambda name, v: gltensor.Batch([name], cuda_device=v),
    "atlas-device": lambda name, v: gltensor.Atlas(name, tiles=(1, 1), cuda_device=v),
    "upload-device": lambda name, v: gltensor.Upload(name, cuda_device=v),
    "upload-name": lambda name, v: gltensor.Upload(v, backend="cpu"),
    "buffer-device": lambda name, v: gltensor.Buffer(name, cuda_device=v),
    "buffer-name": lambda name, v: gltensor.Buffer(v, backend="cpu"),
    "context-device": lambda name, v: gltensor.Context.headless(cuda_device=v),
    "egl-device-index": lambda name, v: gltensor.egl_device_index(v),
}


@pytest.mark.parametrize("value", WRAPPING)
@pytest.mark.parametrize("arg", sorted(INT_ARGS))
def test_every_int_argument_refuses_values_beyond_its_range(arg, value, make_texture, gl):
    """Each int the API takes, given a value a C cast would wrap: refused with the argument named (or, for
    names, as a name no GL object has), never taken as the wrapped value."""
    name = rgba_texture(make_texture).name
    with pytest.raises(RANGE_ERRORS) as e:
        obj = INT_ARGS[arg](name, value)
        if hasattr(obj, "close"):
            obj.close()
    gl.make_current()
    msg = str(e.value)
    assert str(value) in msg or f"{value:X}" in msg.upper() or "must be" in msg, msg


@pytest.mark.parametrize("arg", ["atlas-count", "atlas-tiles", "capture-device", "buffer-device", "context-device"])
@pytest.mark.parametrize("bad", [1.0, "1", True, None.__class__, b"1"])
def test_int_arguments_refuse_non_ints(arg, bad, make_texture, gl):
    name = rgba_texture(make_texture).name
    with pytest.raises(TypeError):
        INT_ARGS[arg](name, bad)
    gl.make_current()


def test_numpy_integers_are_ints(make_texture, capture):
    img = rgba_texture(make_texture)
    cap = capture(np.uint32(img.name), np.uint32(GL.GL_TEXTURE_2D), backend="cpu")
    assert host(cap.read(channels=(np.int64(2),)))[..., 0].max() == 30
    atlas = gltensor.Atlas(np.uint32(img.name), tiles=(np.int16(2), np.int8(2)), count=np.uint64(3), backend="cpu")
    assert atlas.count == 3 and atlas.viewport(np.int32(2)) == atlas.viewport(2)
    atlas.close()


@settings(max_examples=EXAMPLES * 2, deadline=None, suppress_health_check=list(HealthCheck))
@given(value=st.one_of(st.integers(-8, 8), st.integers(-(2**70), 2**70)), pos=st.integers(0, 2))
def test_channel_indices_are_exact_or_refused(make_texture, capture, value, pos):
    """Any int as a channel index: channel `value` when 0 <= value < 4, else an error; never another channel."""
    cap = getattr(test_channel_indices_are_exact_or_refused, "cap", None)
    if cap is None or cap.closed:
        cap = capture(rgba_texture(make_texture), backend="cpu")
        test_channel_indices_are_exact_or_refused.cap = cap
    chans = [0, 1, 2]
    chans[pos] = value
    if 0 <= value < 4:
        got = host(cap.read(channels=tuple(chans)))
        assert got[0, 0, pos] == (10, 20, 30, 40)[value]
    else:
        with pytest.raises(RANGE_ERRORS):
            cap.read(channels=tuple(chans))


@settings(max_examples=EXAMPLES * 2, deadline=None, suppress_health_check=list(HealthCheck))
@given(count=st.integers(-(2**65), 2**65))
def test_atlas_count_is_exact_or_refused(make_texture, count):
    name = getattr(test_atlas_count_is_exact_or_refused, "name", None)
    if name is None or not GL.glIsTexture(name):
        name = test_atlas_count_is_exact_or_refused.name = rgba_texture(make_texture).name
    if 1 <= count <= 4:
        with gltensor.Atlas(name, tiles=(2, 2), count=count, backend="cpu") as a:
            assert a.count == count
    else:
        with pytest.raises(RANGE_ERRORS):
            gltensor.Atlas(name, tiles=(2, 2), count=count, backend="cpu").close()


# ---------------------------------------------------------------- class 6: None is the default; exact names


def test_read_none_means_every_default(backend, capture, make_texture):
    img = rgba_texture(make_texture)
    img.upload(np.arange(4 * 8 * 4, dtype=np.uint8).reshape(4, 8, 4))
    cap = capture(img, backend=backend)
    want = host(cap.read())
    for kwargs in [{"flip": None}, {"channels": None}, {"dtype": None}, {"layout": None}, {"stream": None},
                   {"out": None}, {"depth": None}, {"flip": None, "channels": None, "dtype": None, "layout": None}]:
        assert (host(cap.read(**kwargs)) == want).all(), kwargs
    assert (host(cap.read(None)) == want).all()
    assert not (host(cap.read(flip=False)) == want).all()


def test_write_flip_none_is_upright(backend, make_texture, gl):
    """write(flip=None) means the default (flip=True), as it does for reads; it meant an upside-down upload."""
    if backend == "cuda" and gl.cuda_device is None:
        pytest.skip("the session context runs on no CUDA device")
    img = rgba_texture(make_texture)
    x = np.arange(4 * 8 * 4, dtype=np.uint8).reshape(4, 8, 4)
    src = source(backend, 0)
    src[...] = src.new_tensor(x) if hasattr(src, "new_tensor") else x
    with gltensor.Upload(img.name, backend=backend) as up, gltensor.Capture(img.name, backend=backend) as cap:
        up.write(src)
        default = host(cap.read())
        up.write(src, flip=None)
        assert (host(cap.read()) == default).all()
        up.write(src, None, stream=None, channels=None, layout=None, region=None)
        assert (host(cap.read()) == default).all()
        gltensor.upload(up, src, flip=None)
        assert (host(cap.read()) == default).all()
    assert (default == x).all()


def test_constructor_options_none_are_defaults(make_texture, gl):
    img = rgba_texture(make_texture)
    for make in (lambda: gltensor.Capture(img.name, backend=None, cuda_device=None, region=None),
                 lambda: gltensor.Upload(img.name, backend=None, cuda_device=None),
                 lambda: gltensor.Atlas(img.name, tiles=(1, 1), backend=None, count=None, region=None)):
        obj = make()
        assert obj.backend in ("cpu", "cuda")
        obj.close()


def test_buffer_options_none_are_defaults(gl):
    b = GL.glGenBuffers(1)
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, b)
    GL.glBufferData(GL.GL_ARRAY_BUFFER, 16, np.arange(16, dtype=np.uint8), GL.GL_DYNAMIC_DRAW)
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)
    with gltensor.Buffer(b, backend=None, cuda_device=None) as buf:
        v = buf.map(None, None, mode=None, stream=None, offset=None)
        assert v.dtype == "uint8" and v.shape == (16,) and not v.read_only  # mode default: readwrite
        buf.unmap()
        assert buf.read(None, None, offset=None, stream=None).shape == (16,)
    GL.glDeleteBuffers(1, [b])


NAMED = {
    "read-dtype": (lambda cap, buf, up, s: cap.read(dtype=s), ["uint8", "float32", "float16", "bfloat16"]),
    "read-layout": (lambda cap, buf, up, s: cap.read(layout=s), ["hwc", "chw"]),
    "read-depth": (lambda cap, buf, up, s: cap.read(depth=s), []),  # colour capture: every depth= is refused
    "capture-backend": (lambda cap, buf, up, s: gltensor.Capture(cap.name, backend=s).close(), ["cpu", "auto"]),
    "map-mode": (lambda cap, buf, up, s: (buf.map(mode=s), buf.unmap()), ["read", "write", "readwrite"]),
    "map-dtype": (lambda cap, buf, up, s: (buf.map(s), buf.unmap()), ["uint8", "float32", "int16"]),
    "read-buffer-dtype": (lambda cap, buf, up, s: buf.read(s), ["uint8", "float32"]),
    "write-layout": (lambda cap, buf, up, s: up.write(np.zeros((4, 8, 4), np.uint8), layout=s), ["hwc"]),
}


@pytest.fixture
def named_world(make_texture, gl):
    img = rgba_texture(make_texture)
    b = GL.glGenBuffers(1)
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, b)
    GL.glBufferData(GL.GL_ARRAY_BUFFER, 64, None, GL.GL_DYNAMIC_DRAW)
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)
    cap, buf, up = (gltensor.Capture(img.name, backend="cpu"), gltensor.Buffer(b, backend="cpu"),
                    gltensor.Upload(img.name, backend="cpu"))
    yield cap, buf, up
    for o in (cap, buf, up):
        o.close()
    GL.glDeleteBuffers(1, [b])


@pytest.mark.parametrize("option", sorted(NAMED))
def test_names_with_a_nul_inside_are_refused(option, named_world):
    call, names = NAMED[option]
    for good in names:
        call(*named_world, good)  # the plain name works
        for bad in (good + "\x00", good + "\x00float32", "\x00" + good, good[:-1] + "\x00" + good[-1]):
            with pytest.raises((ValueError, TypeError)):
                call(*named_world, bad)
    assert not named_world[1].mapped


@settings(max_examples=EXAMPLES * 2, deadline=None, suppress_health_check=list(HealthCheck))
@given(option=st.sampled_from(sorted(NAMED)), text=st.text(max_size=12))
def test_any_text_is_a_name_exactly_or_refused(named_world, option, text):
    """Any string: accepted only when it is exactly one of the option's names (an alias where documented)."""
    call, names = NAMED[option]
    aliases = {"read-layout": ["HWC", "CHW"], "read-dtype": ["half"],
               "map-dtype": ["half", "double", "short", "long"] + [
                   "int8", "uint16", "uint32", "int32", "uint64", "int64", "float16", "float64"],
               "read-buffer-dtype": ["half", "double", "short", "long"] + [
                   "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64", "float16", "float64"],
               "capture-backend": ["cuda"], "write-layout": ["chw", "HWC", "CHW"]}.get(option, [])
    ok = text in names + aliases or ("dtype" in option and "." in text and text.rsplit(".", 1)[1] in names + aliases)
    try:
        call(*named_world, text)
    except (ValueError, TypeError, gltensor.GLTensorError):
        assert not ok or "\x00" in text or option == "capture-backend", repr(text)
    else:
        assert ok, f"{text!r} was taken as a name of {option}"
    if named_world[1].mapped:
        named_world[1].unmap()
