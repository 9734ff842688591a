"""Objects outliving their GL context (issue #22, class 1): drivers hand a destroyed context's pointer to the
next context (Mesa often, NVIDIA's EGL every time), so an object that knew its context by pointer alone acted on
the newer context's objects of the same GL names. Each object now keeps a context generation (src/gl/context_tag.c):
an object of a destroyed context raises ClosedError saying so, and never reads, writes or deletes anything in a
newer context, whether the contexts are gltensor's own (Context.headless) or made by the program (eglCreateContext).

Every test runs on the CPU backend here and on the CUDA backend on the GPU machine (marked gpu), where NVIDIA's
EGL reuses the pointer every time.
"""

import ctypes
import os

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from OpenGL import GL

import gltensor
from glhelpers import check_gl, drain_gl_errors

pytestmark = pytest.mark.usefixtures("gl")
hypothesis = pytest.importorskip("hypothesis", reason="the lifetime property needs hypothesis (the [test] extra)")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

EXAMPLES = int(os.environ.get("GLTENSOR_HYPOTHESIS_EXAMPLES", "60"))
ROUNDS = 24
BACKENDS = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]

# ---------------------------------------------------------------- contexts the program makes itself (EGL)

_egl = ctypes.CDLL("libEGL.so.1")
_egl.eglGetCurrentDisplay.restype = ctypes.c_void_p
_egl.eglGetCurrentContext.restype = ctypes.c_void_p
_egl.eglCreateContext.restype = ctypes.c_void_p
_egl.eglCreateContext.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32)]
_egl.eglMakeCurrent.argtypes = [ctypes.c_void_p] * 4
_egl.eglDestroyContext.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
_egl.eglBindAPI.argtypes = [ctypes.c_uint]


def current_pointer():
    return _egl.eglGetCurrentContext()


class ForeignContext:
    """An EGL context gltensor did not create, on the session context's display (NVIDIA's on the GPU machine)."""

    def __init__(self, display):
        attrs = (ctypes.c_int32 * 7)(0x3098, 3, 0x30FB, 3, 0x30FD, 1, 0x3038)  # GL 3.3 core
        _egl.eglBindAPI(0x30A2)
        self.display = display
        self.context = _egl.eglCreateContext(display, None, None, attrs)
        assert self.context, "eglCreateContext failed"
        self.make_current()

    def make_current(self):
        assert _egl.eglMakeCurrent(self.display, None, None, self.context)

    def close(self):
        if self.context:
            if current_pointer() == self.context:
                _egl.eglMakeCurrent(self.display, None, None, None)
            _egl.eglDestroyContext(self.display, self.context)
            self.context = None


class OwnContext:
    def __init__(self, display):
        self.ctx = gltensor.Context.headless()
        self.context = current_pointer()

    def make_current(self):
        self.ctx.make_current()

    def close(self):
        self.ctx.close()


KINDS = {"gltensor": OwnContext, "foreign": ForeignContext}


@pytest.fixture
def display(gl):
    gl.make_current()
    return _egl.eglGetCurrentDisplay()


def need_cuda_context(backend, ctx):
    if backend == "cuda" and ctx.cuda_device is None:
        pytest.skip("the session context runs on no CUDA device")


# ---------------------------------------------------------------- GL objects with known contents


def texture(fill, w=8, h=4):
    t = GL.glGenTextures(1)
    GL.glBindTexture(GL.GL_TEXTURE_2D, t)
    GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 1)
    GL.glTexImage2D(GL.GL_TEXTURE_2D, 0, GL.GL_RGBA8, w, h, 0, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE,
                    np.full((h, w, 4), fill, np.uint8))
    GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    return int(t)


def renderbuffer(fill, w=8, h=4):
    rb = GL.glGenRenderbuffers(1)
    GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, rb)
    GL.glRenderbufferStorage(GL.GL_RENDERBUFFER, GL.GL_RGBA8, w, h)
    fb = GL.glGenFramebuffers(1)
    GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, fb)
    GL.glFramebufferRenderbuffer(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0, GL.GL_RENDERBUFFER, rb)
    GL.glClearColor(fill / 255, fill / 255, fill / 255, fill / 255)
    GL.glClear(GL.GL_COLOR_BUFFER_BIT)
    GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, 0)
    GL.glDeleteFramebuffers(1, [fb])
    return int(rb)


def gl_buffer(fill, n=64):
    b = GL.glGenBuffers(1)
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, b)
    GL.glBufferData(GL.GL_ARRAY_BUFFER, n, np.full(n, fill, np.uint8), GL.GL_DYNAMIC_DRAW)
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)
    return int(b)


def user_framebuffer():
    fb = GL.glGenFramebuffers(1)
    GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, fb)  # a name exists once bound
    GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, 0)
    return int(fb)


def host(x):
    if hasattr(x, "__cuda_array_interface__") or getattr(x, "__dlpack_device__", lambda: (1, 0))()[0] == 2:
        torch = pytest.importorskip("torch")
        return torch.from_dlpack(x).cpu().numpy()
    return np.from_dlpack(x)


def source(backend, fill, w=8, h=4):
    x = np.full((h, w, 4), fill, np.uint8)
    if backend == "cuda":
        torch = pytest.importorskip("torch", reason="CUDA uploads take a CUDA tensor")
        return torch.from_numpy(x).cuda()
    return x


class Objects:
    """One of each object kind in the current context, every image and buffer filled with `fill`."""

    def __init__(self, backend, fill):
        self.fill = fill
        self.tex, self.rb, self.buf = texture(fill), renderbuffer(fill), gl_buffer(fill)
        self.cap = gltensor.Capture(self.tex, backend=backend)
        self.rb_cap = gltensor.Capture(self.rb, gltensor.GL_RENDERBUFFER, backend=backend)
        self.batch = gltensor.Batch([self.cap, self.rb_cap])
        self.atlas = gltensor.Atlas(self.tex, tiles=(2, 1), backend=backend)
        self.up = gltensor.Upload(self.tex, backend=backend)
        self.buffer = gltensor.Buffer(self.buf, backend=backend)
        self.backend = backend

    def uses(self):
        """Every entry that touches GL, as (label, callable)."""
        return [
            ("Capture.read", self.cap.read),
            ("renderbuffer Capture.read", self.rb_cap.read),
            ("Capture.refresh", self.cap.refresh),
            ("Batch.read", self.batch.read),
            ("Atlas.read", self.atlas.read),
            ("Upload.write", lambda: self.up.write(source(self.backend, 255))),
            ("Buffer.read", self.buffer.read),
            ("Buffer.map", self.buffer.map),
        ]

    def check_reads_own(self):
        assert (host(self.cap.read()) == self.fill).all()
        assert (host(self.rb_cap.read()) == self.fill).all()
        assert (host(self.buffer.read()) == self.fill).all()

    def close(self):
        for o in (self.batch, self.atlas, self.cap, self.rb_cap, self.up, self.buffer):
            o.close()


def assert_untouched(fill, tex, rb, buf, fb):
    """The newer context's objects of the same names still exist with their contents."""
    assert GL.glIsTexture(tex) and GL.glIsRenderbuffer(rb) and GL.glIsBuffer(buf) and GL.glIsFramebuffer(fb)
    out = np.empty((4, 8, 4), np.uint8)
    GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
    GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)
    GL.glGetTexImage(GL.GL_TEXTURE_2D, 0, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, out)
    GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    assert (out == fill).all(), "a stale object wrote into the newer context's texture"
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, buf)
    data = GL.glGetBufferSubData(GL.GL_ARRAY_BUFFER, 0, 64)
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)
    assert (np.frombuffer(bytes(data), np.uint8) == fill).all()


# ---------------------------------------------------------------- cases


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("backend", BACKENDS)
def test_stale_objects_refuse_in_every_newer_context(kind, backend, gl, display):
    """ROUNDS contexts made and destroyed in turn; every object of every earlier context, used in each newer one,
    raises ClosedError naming the destroyed context, and the newer context's objects of the same names stay as
    they were. The objects' own context reads its own contents."""
    need_cuda_context(backend, gl)
    stale, reused, seen = [], 0, set()
    try:
        for i in range(ROUNDS):
            c = KINDS[kind](display)
            reused += c.context in seen
            seen.add(c.context)
            objs = Objects(backend, fill=i + 1)
            fb = user_framebuffer()  # a stale renderbuffer capture must not delete it
            objs.check_reads_own()
            for old in stale:
                for label, use in old.uses():
                    with pytest.raises(gltensor.ClosedError, match="destroyed"):
                        use()
            assert_untouched(i + 1, objs.tex, objs.rb, objs.buf, fb)
            objs.check_reads_own()
            stale.append(objs)
            c.close()
        # Releasing the stale objects with a newer context current touches nothing of it.
        c = KINDS[kind](display)
        fresh = Objects(backend, fill=200)
        fb = user_framebuffer()
        for old in stale:
            old.close()
        assert_untouched(200, fresh.tex, fresh.rb, fresh.buf, fb)
        fresh.check_reads_own()
        fresh.close()
        c.close()
    finally:
        gl.make_current()
    print(f"{kind} contexts: {reused} of {ROUNDS} got an earlier context's pointer")


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("backend", BACKENDS)
def test_reused_pointer_is_another_context(kind, backend, gl, display):
    """Hunts for the case itself: contexts made and destroyed in turn, each leaving objects behind, until the
    driver hands a new context an earlier one's pointer (NVIDIA: every time; Mesa: now and then). With that
    pointer current, the earlier objects refuse and the new context's objects of the same names stay untouched,
    also when the earlier objects are closed there."""
    need_cuda_context(backend, gl)
    stale, hits, tries = {}, 0, 0
    try:
        while hits < 3 and tries < 150:
            tries += 1
            c = KINDS[kind](display)
            if c.context in stale:
                hits += 1
                old = stale.pop(c.context)
                tex, rb, buf, fb = texture(6), renderbuffer(6), gl_buffer(6), user_framebuffer()
                for label, use in old.uses():
                    with pytest.raises(gltensor.ClosedError, match="destroyed"):
                        use()
                old.close()
                assert_untouched(6, tex, rb, buf, fb)
            objs = Objects(backend, fill=5)
            objs.check_reads_own()
            stale[c.context] = objs
            c.close()
    finally:
        gl.make_current()
    print(f"{kind}: an earlier pointer came back {hits} times in {tries} contexts")
    if not hits:
        pytest.skip(f"this driver gave {kind} contexts a new pointer every time in {tries} tries")


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("backend", BACKENDS)
def test_use_after_own_context_destroyed_with_none_current(kind, backend, gl, display):
    """With no context current at all, an object of a destroyed context says it was destroyed, not 'make the
    context that owns it current' (there is none to make current)."""
    need_cuda_context(backend, gl)
    c = KINDS[kind](display)
    objs = Objects(backend, fill=7)
    c.close()
    _egl.eglMakeCurrent(display, None, None, None)
    try:
        for label, use in objs.uses():
            with pytest.raises(gltensor.ClosedError, match="destroyed") as e:
                use()
            assert "make the context that owns it current" not in str(e.value), label
        objs.close()  # from no context at all: nothing to enter, no crash
    finally:
        gl.make_current()


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("backend", BACKENDS)
def test_live_contexts_are_told_apart_not_closed(kind, backend, gl, display):
    """Two live contexts: an object used in the other one is WrongContextError, never ClosedError."""
    need_cuda_context(backend, gl)
    a = KINDS[kind](display)
    objs_a = Objects(backend, fill=3)
    b = KINDS[kind](display)
    try:
        for label, use in objs_a.uses():
            with pytest.raises(gltensor.WrongContextError):
                use()
        a.make_current()
        objs_a.check_reads_own()
        objs_a.close()
    finally:
        a.close()
        b.close()
        gl.make_current()


def test_marker_leaves_bindings_and_errors_alone(gl, display):
    """The marker buffer gltensor makes in a context it did not create changes no binding and leaves no GL error."""
    c = ForeignContext(display)
    try:
        mine = gl_buffer(1)
        GL.glBindBuffer(GL.GL_COPY_WRITE_BUFFER, mine)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, mine)
        tex = texture(9)
        cap = gltensor.Capture(tex, backend="cpu")
        assert GL.glGetIntegerv(GL.GL_COPY_WRITE_BUFFER_BINDING) == mine
        assert GL.glGetIntegerv(GL.GL_ARRAY_BUFFER_BINDING) == mine
        assert not drain_gl_errors()
        assert (host(cap.read()) == 9).all()
        cap.close()
    finally:
        c.close()
        gl.make_current()


@pytest.mark.parametrize("backend", BACKENDS)
def test_frames_and_views_read_before_the_close_stay_valid(backend, gl, display):
    """What was read (frames, Buffer.read copies) owns its memory: still exact after the context went."""
    need_cuda_context(backend, gl)
    c = OwnContext(display)
    objs = Objects(backend, fill=77)
    frame, copy = objs.cap.read(), objs.buffer.read()
    c.close()
    gl.make_current()
    assert (host(frame) == 77).all() and (host(copy) == 77).all()
    objs.close()


# ---------------------------------------------------------------- property: any interleaving of lifetimes

OPS = st.lists(st.tuples(st.sampled_from(["new", "close", "switch", "obj", "use", "drop"]), st.integers(0, 7)),
               min_size=1, max_size=25)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(ops=OPS, kind=st.sampled_from(sorted(KINDS)))
def test_any_interleaving_of_context_lifetimes(gl, display, ops, kind):
    """Random programs over contexts (made, destroyed, switched) and captures/uploads/buffers in them. Model:
    an object whose context is destroyed raises ClosedError; one whose context is alive but not current raises
    WrongContextError or NoContextError; one whose context is current reads exactly its own fill."""
    contexts, objs, current = [], [], None
    fill = 0
    try:
        for op, k in ops:
            if op == "new" and sum(c["alive"] for c in contexts) < 3:
                contexts.append({"c": KINDS[kind](display), "alive": True})
                current = contexts[-1]
            elif op == "close" and contexts:
                c = contexts[k % len(contexts)]
                if c["alive"]:
                    c["c"].close()
                    c["alive"] = False
                    if current is c:
                        current = None
                        if kind == "gltensor":
                            _egl.eglMakeCurrent(display, None, None, None)
            elif op == "switch" and contexts:
                c = contexts[k % len(contexts)]
                if c["alive"]:
                    c["c"].make_current()
                    current = c
            elif op == "obj" and current is not None:
                fill += 1
                tex, buf = texture(fill), gl_buffer(fill)
                objs.append({"ctx": current, "fill": fill, "cap": gltensor.Capture(tex, backend="cpu"),
                             "buf": gltensor.Buffer(buf, backend="cpu")})
            elif op == "use" and objs:
                o = objs[k % len(objs)]
                for use in (o["cap"].read, o["buf"].read):
                    if not o["ctx"]["alive"]:
                        with pytest.raises(gltensor.ClosedError):
                            use()
                    elif o["ctx"] is not current:
                        with pytest.raises((gltensor.WrongContextError, gltensor.NoContextError)):
                            use()
                    else:
                        assert (host(use()) == o["fill"]).all()
            elif op == "drop" and objs:
                o = objs.pop(k % len(objs))
                o["cap"].close()
                o["buf"].close()
                if current is not None:
                    current["c"].make_current()
    finally:
        for o in objs:
            o["cap"].close()
            o["buf"].close()
        for c in contexts:
            if c["alive"]:
                c["c"].close()
        gl.make_current()
        check_gl("after the lifetime program")
