"""Bad input on every public Python entry, as one table: each case names the call, the exception it must
raise and words its message must hold (what failed and, for gltensor's own errors, what to do). None may crash,
hang or return an image. The CUDA half (streams, device pointers) runs on the GPU machine (marked gpu).

test_case_count prints how many cases ran; docs/reliability.md quotes it.
"""

import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field

import numpy as np
import pytest
from OpenGL import GL

import gltensor
from glhelpers import check_gl, gen_renderbuffer, gen_texture, renderbuffer_storage, tex_image_2d

pytestmark = pytest.mark.usefixtures("gl")

# A gltensor error says what to do (the wording is free; some advice must be there).
ADVICE = re.compile(r"\b(use|pass|call|make|create|bind|drop|give|read|request|release|must|only|instead|needs?|"
                    r"expected|fix|install|resize|re-?create|choose|allocate|copy|consume|set|lower|enlarge|raise)\b", re.I)


@dataclass
class World:
    """The objects the cases use: valid ones (to call bad methods on) and invalid ones."""
    ctx: object
    tex: int  # RGBA8 64x32
    rb: int  # RGBA8 renderbuffer 64x32
    depth_tex: int
    deleted: int  # a texture name that was deleted
    unsupported: int  # an RGB10_A2... texture gltensor cannot capture
    cap: object = None
    closed_cap: object = None
    batch: object = None
    atlas: object = None
    frame: object = None
    made: list = field(default_factory=list)


@pytest.fixture
def world(gl, make_texture):
    w = World(ctx=gl, tex=make_texture("RGBA8", 64, 32).name, rb=0, depth_tex=0, deleted=0, unsupported=0)
    w.rb = gen_renderbuffer()
    renderbuffer_storage(w.rb, GL.GL_RGBA8, 64, 32)
    w.depth_tex = gen_texture()
    GL.glBindTexture(GL.GL_TEXTURE_2D, w.depth_tex)
    tex_image_2d(GL.GL_TEXTURE_2D, 0, GL.GL_DEPTH_COMPONENT24, 8, 8, GL.GL_DEPTH_COMPONENT, GL.GL_UNSIGNED_INT)
    w.deleted = gen_texture()
    GL.glBindTexture(GL.GL_TEXTURE_2D, w.deleted)
    tex_image_2d(GL.GL_TEXTURE_2D, 0, GL.GL_RGBA8, 4, 4, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE)
    w.unsupported = gen_texture()
    GL.glBindTexture(GL.GL_TEXTURE_2D, w.unsupported)
    tex_image_2d(GL.GL_TEXTURE_2D, 0, GL.GL_RGB10_A2, 4, 4, GL.GL_RGBA, GL.GL_UNSIGNED_INT_2_10_10_10_REV)
    GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    w.cap = gltensor.Capture(w.tex, backend="cpu")
    w.closed_cap = gltensor.Capture(w.tex, backend="cpu")
    w.closed_cap.close()
    w.batch = gltensor.Batch([w.cap])
    w.atlas = gltensor.Atlas(w.tex, tiles=(2, 2), backend="cpu")
    w.frame = w.cap.read()
    # Deleted last: NVIDIA's GL hands a deleted name out again at the next glGenTextures, so a texture made
    # after the deletion would take it over.
    GL.glDeleteTextures([w.deleted])
    assert not GL.glIsTexture(w.deleted)
    yield w
    gl.make_current()
    for o in (w.batch, w.atlas, w.cap):
        o.close()
    GL.glDeleteTextures([w.depth_tex, w.unsupported])
    GL.glDeleteRenderbuffers(1, [w.rb])
    check_gl("after the bad-input case")


def out_of(shape, dtype=np.uint8, **kw):
    return np.zeros(shape, dtype=dtype, **kw)


class Interface:
    """Only an __array_interface__, over a real buffer, with the strides the case gives."""

    def __init__(self, shape, strides, typestr="|u1"):
        self._buf = np.zeros(64 * 32 * 4 * 2, np.uint8)
        self.__array_interface__ = {"shape": shape, "typestr": typestr, "data": (self._buf.ctypes.data, False),
                                    "strides": strides, "version": 3}


def readonly(shape):
    a = np.zeros(shape, np.uint8)
    a.setflags(write=False)
    return a


# (id, call(world), exception, words the message must hold (any case), advice expected)
GLT = gltensor.GLTensorError
CASES = [
    # ---- Capture(...)
    ("capture-name-str", lambda w: gltensor.Capture("7"), TypeError, ["name", "integer"], False),
    ("capture-name-float", lambda w: gltensor.Capture(7.5), TypeError, ["name"], False),
    ("capture-name-none", lambda w: gltensor.Capture(None), TypeError, ["name"], False),
    ("capture-name-negative", lambda w: gltensor.Capture(-1), (OverflowError, ValueError), [], False),
    ("capture-name-huge", lambda w: gltensor.Capture(1 << 40), (OverflowError, ValueError), [], False),
    ("capture-name-zero", lambda w: gltensor.Capture(0), gltensor.InvalidObjectError, ["0"], True),
    ("capture-name-unused", lambda w: gltensor.Capture(987654), gltensor.InvalidObjectError, ["987654"], True),
    ("capture-name-deleted", lambda w: gltensor.Capture(w.deleted), gltensor.InvalidObjectError, [], True),
    ("capture-renderbuffer-as-texture", lambda w: gltensor.Capture(w.rb if not GL.glIsTexture(w.rb) else 987655),
     gltensor.InvalidObjectError, ["texture"], True),
    ("capture-texture-as-renderbuffer",
     lambda w: gltensor.Capture(w.tex if not GL.glIsRenderbuffer(w.tex) else 987656, GL.GL_RENDERBUFFER),
     gltensor.InvalidObjectError, ["renderbuffer"], True),
    ("capture-target-cube", lambda w: gltensor.Capture(w.tex, GL.GL_TEXTURE_CUBE_MAP), gltensor.InvalidArgumentError,
     ["target", "GL_TEXTURE_2D"], True),
    ("capture-target-3d", lambda w: gltensor.Capture(w.tex, GL.GL_TEXTURE_3D), gltensor.InvalidArgumentError,
     ["target"], True),
    # target= takes the enum or its name, as Capture.target reads it back (0.3); an unknown name is refused
    ("capture-target-str", lambda w: gltensor.Capture(w.tex, "GL_TEXTURE_2D").close(), None, [], False),
    ("capture-target-unknown-str", lambda w: gltensor.Capture(w.tex, "GL_TEXTURE_3D"), ValueError, ["target"], False),
    ("capture-wrong-target-for-name", lambda w: gltensor.Capture(w.tex, GL.GL_TEXTURE_RECTANGLE), GLT, [], True),
    ("capture-unsupported-format", lambda w: gltensor.Capture(w.unsupported), gltensor.UnsupportedFormatError,
     ["RGB10_A2"], True),
    ("capture-backend-bad", lambda w: gltensor.Capture(w.tex, backend="vulkan"), ValueError, ["backend"], False),
    ("capture-backend-type", lambda w: gltensor.Capture(w.tex, backend=1), TypeError, ["backend"], False),
    ("capture-backend-cuda-here", lambda w: gltensor.Capture(w.tex, backend="cuda")
     if not gltensor.cuda_available() else pytest.skip("CUDA works here"), GLT, ["cuda"], True),
    ("capture-device-negative", lambda w: gltensor.Capture(w.tex, cuda_device=-3), ValueError, ["cuda_device"], False),
    ("capture-device-str", lambda w: gltensor.Capture(w.tex, cuda_device="0"), TypeError, [], False),
    ("capture-extra-positional", lambda w: gltensor.Capture(w.tex, GL.GL_TEXTURE_2D, "cpu"), TypeError, [], False),
    ("capture-unknown-kwarg", lambda w: gltensor.Capture(w.tex, colour=1), TypeError, ["colour"], False),
    # ---- Capture.read(...)
    ("read-unknown-kwarg", lambda w: w.cap.read(fip=True), TypeError, ["fip"], False),
    ("read-too-many-args", lambda w: w.cap.read(True, None, None, 1), TypeError, ["at most"], False),
    ("read-stream-on-cpu", lambda w: w.cap.read(stream=5), GLT, ["stream"], True),
    ("read-stream-str", lambda w: w.cap.read(stream="default"), (TypeError, ValueError), ["stream"], False),
    ("read-stream-object", lambda w: w.cap.read(stream=object()), (TypeError, ValueError), ["stream"], False),
    ("read-channels-0", lambda w: w.cap.read(channels=0), (TypeError, ValueError, GLT), ["channels"], False),
    ("read-channels-5", lambda w: w.cap.read(channels=5), (TypeError, ValueError, GLT), ["channels"], False),
    ("read-channels-bad-letters", lambda w: w.cap.read(channels="RGBX"), (ValueError, GLT), ["channels"], False),
    ("read-channels-tuple-5", lambda w: w.cap.read(channels=(0, 1, 2, 3, 0)), (ValueError, GLT), ["channels"], False),
    ("read-channels-index-9", lambda w: w.cap.read(channels=(0, 9)), (ValueError, GLT), [], False),
    ("read-channels-float", lambda w: w.cap.read(channels=2.5), (TypeError, ValueError), ["channels"], False),
    ("read-dtype-int64", lambda w: w.cap.read(dtype="int64"), (ValueError, GLT), ["dtype"], False),
    ("read-dtype-type", lambda w: w.cap.read(dtype=3), (TypeError, ValueError), ["dtype"], False),
    ("read-layout-bad", lambda w: w.cap.read(layout="nhwc"), (ValueError, GLT), ["layout"], False),
    ("read-depth-on-colour", lambda w: w.cap.read(depth="linear", near=0.1, far=10), (ValueError, GLT), ["depth"],
     False),
    ("read-depth-mode-bad", lambda w: w.cap.read(depth="log"), (ValueError, GLT), ["depth"], False),
    ("read-near-without-depth", lambda w: w.cap.read(near=1.0), (ValueError, TypeError, GLT), [], False),
    ("read-closed", lambda w: w.closed_cap.read(), gltensor.ClosedError, ["closed"], True),
    ("refresh-closed", lambda w: w.closed_cap.refresh(), gltensor.ClosedError, ["closed"], True),
    ("getter-closed", lambda w: w.closed_cap.shape, gltensor.ClosedError, ["closed"], True),
    ("enter-closed", lambda w: w.closed_cap.__enter__(), gltensor.ClosedError, ["closed"], True),
    # ---- read(out=...)
    ("out-wrong-shape", lambda w: w.cap.read(out=out_of((32, 64, 3))), GLT, ["shape"], True),
    ("out-transposed", lambda w: w.cap.read(out=out_of((64, 32, 4))), GLT, ["shape"], True),
    ("out-2d", lambda w: w.cap.read(out=out_of((32, 256))), GLT, [], True),
    ("out-4d", lambda w: w.cap.read(out=out_of((1, 32, 64, 4))), GLT, [], True),
    ("out-wrong-dtype", lambda w: w.cap.read(out=out_of((32, 64, 4), np.float32)), GLT, ["dtype", "uint8"], True),
    ("out-int8", lambda w: w.cap.read(out=out_of((32, 64, 4), np.int8)), GLT, [], True),
    ("out-strided", lambda w: w.cap.read(out=out_of((32, 128, 4))[:, ::2]), GLT, ["stride"], True),
    ("out-fortran", lambda w: w.cap.read(out=np.asfortranarray(out_of((32, 64, 4)))), GLT, ["stride"], True),
    ("out-readonly", lambda w: w.cap.read(out=readonly((32, 64, 4))), (GLT, BufferError, ValueError),
     [("read-only", "readonly", "writable", "writeable")], False),
    ("out-strides-overflow", lambda w: w.cap.read(out=Interface((32, 64, 4), (1 << 61, 4, 1))), GLT, ["stride"], True),
    ("out-strides-negative", lambda w: w.cap.read(out=Interface((32, 64, 4), (-256, 4, 1))), GLT, ["stride"], True),
    ("out-strides-overlap", lambda w: w.cap.read(out=Interface((32, 64, 4), (4, 4, 1))), GLT, ["stride"], True),
    ("out-interface-typestr", lambda w: w.cap.read(out=Interface((32, 64, 4), None, "<c8")), (GLT, TypeError,
                                                                                         ValueError), [], False),
    ("out-list", lambda w: w.cap.read(out=[[0] * 4] * 32), (TypeError, GLT), [], False),
    ("out-bytes", lambda w: w.cap.read(out=bytes(32 * 64 * 4)), (TypeError, GLT, BufferError), [], False),
    ("out-bytearray", lambda w: w.cap.read(out=bytearray(32 * 64 * 4)), (TypeError, GLT, BufferError), [], False),
    ("out-int", lambda w: w.cap.read(out=5), (TypeError, GLT), ["out="], False),
    ("out-chw-shape-for-hwc", lambda w: w.cap.read(out=out_of((4, 32, 64))), GLT, [], True),
    ("out-hwc-shape-for-chw", lambda w: w.cap.read(layout="chw", out=out_of((32, 64, 4))), GLT, [], True),
    ("out-to-closed", lambda w: w.closed_cap.read(out=out_of((32, 64, 4))), gltensor.ClosedError, [], True),
    ("out-frame-as-out", lambda w: w.cap.read(out=w.cap.read()), None, [], False),  # a frame is writable host memory
    # ---- Batch
    ("batch-not-sequence", lambda w: gltensor.Batch(5), TypeError, ["sequence"], False),
    ("batch-empty", lambda w: gltensor.Batch([]), (ValueError, GLT), [], False),
    ("batch-bad-item", lambda w: gltensor.Batch([w.cap, "x"]), TypeError, [], False),
    ("batch-closed-source", lambda w: gltensor.Batch([w.closed_cap]), gltensor.ClosedError, ["closed"], True),
    ("batch-deleted-name", lambda w: gltensor.Batch([w.deleted]), gltensor.InvalidObjectError, [], True),
    ("batch-mixed-sizes-read", lambda w: gltensor.Batch([w.cap, w.depth_tex], backend="cpu").read(), GLT, [], True),
    ("batch-out-wrong-n", lambda w: w.batch.read(out=out_of((2, 32, 64, 4))), GLT, [], True),
    ("batch-out-3d", lambda w: w.batch.read(out=out_of((32, 64, 4))), GLT, [], True),
    ("batch-read-list-out", lambda w: w.batch.read_list(out=out_of((1, 32, 64, 4))), TypeError, ["out"], False),
    ("batch-unknown-kwarg", lambda w: w.batch.read(frobnicate=1), TypeError, [], False),
    # ---- Atlas
    ("atlas-no-grid", lambda w: gltensor.Atlas(w.tex), TypeError, ["tiles"], False),
    ("atlas-tiles-zero", lambda w: gltensor.Atlas(w.tex, tiles=(0, 2)), ValueError, ["tiles"], False),
    ("atlas-tiles-negative", lambda w: gltensor.Atlas(w.tex, tiles=(-1, 2)), ValueError, [], False),
    ("atlas-tiles-type", lambda w: gltensor.Atlas(w.tex, tiles="2x2"), TypeError, [], False),
    ("atlas-tiles-too-many", lambda w: gltensor.Atlas(w.tex, tiles=(64, 64)), GLT, [], True),
    ("atlas-tile-size-too-big", lambda w: gltensor.Atlas(w.tex, tile_size=(33, 65)), GLT, [], True),
    ("atlas-tiles-not-dividing", lambda w: gltensor.Atlas(w.tex, tiles=(3, 5)), GLT, ["tile_size"], True),
    ("atlas-count-zero", lambda w: gltensor.Atlas(w.tex, tiles=(2, 2), count=0), ValueError, ["count"], False),
    ("atlas-count-too-many", lambda w: gltensor.Atlas(w.tex, tiles=(2, 2), count=5), GLT, [], True),
    ("atlas-viewport-out-of-range", lambda w: w.atlas.viewport(4), GLT, ["4"], True),
    ("atlas-viewport-negative", lambda w: w.atlas.viewport(-1), GLT, [], True),
    ("atlas-viewport-str", lambda w: w.atlas.viewport("0"), TypeError, [], False),
    ("atlas-out-wrong", lambda w: w.atlas.read(out=out_of((4, 16, 16, 4))), GLT, [], True),
    ("atlas-deleted", lambda w: gltensor.Atlas(w.deleted, tiles=(1, 1)), gltensor.InvalidObjectError, [], True),
    # ---- Context
    ("context-device-negative", lambda w: gltensor.Context.headless(cuda_device=-1), ValueError, ["cuda_device"],
     False),
    ("context-device-str", lambda w: gltensor.Context.headless(cuda_device="0"), TypeError, ["cuda_device"], False),
    ("context-device-bool", lambda w: gltensor.Context.headless(cuda_device=True), TypeError, [], False),
    ("context-device-99", lambda w: gltensor.Context.headless(cuda_device=99), GLT, ["99"], True),
    ("context-software-str", lambda w: gltensor.Context.headless(software="yes"), TypeError, ["software"], False),
    ("context-instantiate", lambda w: gltensor.Context(), TypeError, [], False),
    # ---- Frame / DLPack
    ("frame-instantiate", lambda w: gltensor.Frame(), TypeError, [], False),
    ("dlpack-cpu-stream", lambda w: w.frame.__dlpack__(stream=3), BufferError, ["stream"], False),
    ("dlpack-max-version-type", lambda w: w.frame.__dlpack__(max_version=1), TypeError, ["max_version"], False),
    ("dlpack-max-version-empty", lambda w: w.frame.__dlpack__(max_version=()), TypeError, ["max_version"], False),
    ("dlpack-other-device", lambda w: w.frame.__dlpack__(dl_device=(2, 0)), BufferError, ["device"], False),
    ("dlpack-dl-device-type", lambda w: w.frame.__dlpack__(dl_device="cpu"), TypeError, [], False),
    ("frame-cai-on-cpu", lambda w: w.frame.__cuda_array_interface__, AttributeError, ["host"], False),
    ("frame-attr-readonly", lambda w: setattr(w.frame, "shape", (1,)), AttributeError, [], False),
    # ---- module functions
    ("egl-device-index-negative", lambda w: gltensor.egl_device_index(-1), (ValueError, GLT), [], False),
]


def _ids():
    return [c[0] for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=_ids())
def test_bad_input(world, case):
    name, call, exc, words, advice = case
    if exc is None:  # accepted input: documented as fine; the result must still be sane
        call(world)
        return
    with pytest.raises(exc) as ei:
        result = call(world)
        pytest.fail(f"{name}: accepted, returned {result!r}")
    msg = str(ei.value)
    assert len(msg) >= 10, f"{name}: message too short to help: {msg!r}"
    for word in words:  # a tuple: any one of its words
        options = word if isinstance(word, tuple) else (word,)
        assert any(o.lower() in msg.lower() for o in options), f"{name}: message does not mention {word!r}: {msg!r}"
    if advice:
        assert ADVICE.search(msg), f"{name}: message does not say what to do: {msg!r}"
    # the capture used by most cases still reads after the refusal
    world.ctx.make_current()
    assert world.cap.read().shape == (32, 64, 4)


def test_case_count():
    print(f"\nbad-input cases (Python entries): {len(CASES)} on every backend + {len(CUDA_CASES) + 3} CUDA-only")
    assert len(CASES) >= 90


# ---------------------------------------------------------------- the CUDA half (GPU machine)

CUDA_CASES = [
    ("cuda-stream-negative", lambda c, f, t: c.read(stream=-5), (ValueError, GLT), ["stream"]),
    ("cuda-stream-object", lambda c, f, t: c.read(stream=object()), (TypeError, ValueError), ["stream"]),
    ("cuda-out-host-array", lambda c, f, t: c.read(out=np.zeros((32, 64, 4), np.uint8)), GLT, ["device"]),
    ("cuda-out-wrong-dtype", lambda c, f, t: c.read(out=t.zeros((32, 64, 4), dtype=t.float32, device="cuda")),
     GLT, ["dtype"]),
    ("cuda-out-wrong-shape", lambda c, f, t: c.read(out=t.zeros((32, 64, 3), dtype=t.uint8, device="cuda")), GLT,
     ["shape"]),
    ("cuda-out-strided", lambda c, f, t: c.read(out=t.zeros((32, 128, 4), dtype=t.uint8, device="cuda")[:, ::2]),
     GLT, ["stride"]),
    ("cuda-out-cpu-tensor", lambda c, f, t: c.read(out=t.zeros((32, 64, 4), dtype=t.uint8)), GLT, ["device"]),
    ("cuda-dlpack-stream-0", lambda c, f, t: f.__dlpack__(stream=0), ValueError, ["stream"]),
    ("cuda-dlpack-stream-negative", lambda c, f, t: f.__dlpack__(stream=-7), ValueError, ["stream"]),
    ("cuda-dlpack-stream-str", lambda c, f, t: f.__dlpack__(stream="1"), TypeError, ["stream"]),
    ("cuda-dlpack-cpu-device", lambda c, f, t: f.__dlpack__(dl_device=(1, 0)), BufferError, ["device"]),
    ("cuda-array-interface", lambda c, f, t: f.__array_interface__, AttributeError, ["device"]),
    ("cuda-capture-other-device", lambda c, f, t: gltensor.Capture(c.name, cuda_device=c.cuda_device + 1),
     gltensor.WrongDeviceError, ["device"]),
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", CUDA_CASES, ids=[c[0] for c in CUDA_CASES])
def test_bad_input_cuda(world, case):
    if world.ctx.cuda_device is None:
        pytest.skip("the session context runs on no CUDA device")
    torch = pytest.importorskip("torch", reason="CUDA destinations are torch tensors")
    name, call, exc, words = case
    cap = gltensor.Capture(world.tex)
    try:
        frame = cap.read()
        with pytest.raises(exc) as ei:
            result = call(cap, frame, torch)
            pytest.fail(f"{name}: accepted, returned {result!r}")
        msg = str(ei.value)
        for word in words:
            assert word.lower() in msg.lower(), f"{name}: message does not mention {word!r}: {msg!r}"
        assert cap.read().shape == (32, 64, 4)
    finally:
        cap.close()


@pytest.mark.gpu
@pytest.mark.parametrize("handle", [0xDEADBEEF, 0x7F0000001000, 3], ids=["unmapped", "high", "small"])
def test_bogus_stream_handle_cuda(ctx, handle):
    """A stream handle that is no stream: cudaStream_t is a pointer, so CUDA itself may fault on it. Run in a
    child so that a crash is reported as one, with the handle, instead of ending the whole run."""
    if ctx.cuda_device is None:
        pytest.skip("the session context runs on no CUDA device")
    script = textwrap.dedent(f"""
        import os
        os.environ["PYOPENGL_PLATFORM"] = "egl"
        import gltensor
        from OpenGL import GL
        ctx = gltensor.Context.headless()
        tex = GL.glGenTextures(1)
        GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
        GL.glTexImage2D(GL.GL_TEXTURE_2D, 0, GL.GL_RGBA8, 8, 8, 0, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, None)
        cap = gltensor.Capture(tex)
        assert cap.backend == "cuda", cap.backend_reason
        try:
            cap.read(stream={handle})
            print("ACCEPTED")
        except gltensor.InvalidArgumentError as e:
            print("REFUSED", e)
        print("after", cap.read().shape)
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"handle {handle:#x}: exit {r.returncode}\n{r.stdout}\n{r.stderr[-3000:]}"
    assert "REFUSED" in r.stdout and "stream" in r.stdout and "after (8, 8, 4)" in r.stdout, r.stdout
