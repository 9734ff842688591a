"""gltensor.Context: the headless EGL context, its GL strings, current-ness and closing."""

import ctypes
import os
import re
import threading

import pytest
from OpenGL import EGL, GL

import gltensor
from glhelpers import check_gl

ON_NVIDIA_MACHINE = os.path.exists("/dev/nvidiactl")


def current_egl_context():
    """Address of the EGL context current in this thread (0 when none)."""
    return ctypes.cast(EGL.eglGetCurrentContext(), ctypes.c_void_p).value or 0


def _gl_str(name):
    value = GL.glGetString(name)
    return value.decode() if isinstance(value, bytes) else str(value)


def _new_context():
    """A second context on the same kind of device as the session's (current afterwards)."""
    return gltensor.Context.headless()


def test_module_surface():
    assert gltensor.__version__ == "0.2.0"
    assert isinstance(gltensor.cuda_compiled(), bool)
    assert isinstance(gltensor.cuda_available(), bool)
    if gltensor.cuda_available():
        assert gltensor.cuda_compiled()
    assert gltensor.GL_TEXTURE_2D == 0x0DE1
    assert gltensor.GL_TEXTURE_RECTANGLE == 0x84F5
    assert gltensor.GL_RENDERBUFFER == 0x8D41


def test_exception_hierarchy():
    root = gltensor.GLTensorError
    assert issubclass(root, RuntimeError)
    for name in ["NoContextError", "WrongContextError", "WrongDeviceError", "CudaUnavailableError",
                 "CudaError", "GLError", "EGLError"]:
        assert issubclass(getattr(gltensor, name), root), name
    for name in ["InvalidObjectError", "UnsupportedFormatError", "ClosedError", "InvalidArgumentError"]:
        cls = getattr(gltensor, name)
        assert issubclass(cls, root) and issubclass(cls, ValueError), name


def test_session_context_is_current_and_core(gl, ctx):
    assert isinstance(ctx, gltensor.Context)
    assert current_egl_context() != 0
    profile = int(GL.glGetIntegerv(GL.GL_CONTEXT_PROFILE_MASK))
    assert profile & GL.GL_CONTEXT_CORE_PROFILE_BIT, "Context.headless() must give a core profile context"
    major, minor = int(GL.glGetIntegerv(GL.GL_MAJOR_VERSION)), int(GL.glGetIntegerv(GL.GL_MINOR_VERSION))
    assert (major, minor) >= (3, 3)


def test_gl_strings(gl, ctx):
    for attr in ("vendor", "renderer", "version"):
        value = getattr(ctx, attr)
        assert isinstance(value, str) and value.strip(), attr
    assert ctx.vendor == _gl_str(GL.GL_VENDOR)
    assert ctx.renderer == _gl_str(GL.GL_RENDERER)
    assert ctx.version == _gl_str(GL.GL_VERSION)
    assert re.match(r"[34]\.\d", ctx.version)


def test_is_software_matches_renderer(gl, ctx):
    renderer = ctx.renderer.lower()
    assert ctx.is_software == ("llvmpipe" in renderer or "softpipe" in renderer)
    if ctx.is_software:
        assert ctx.cuda_device is None
    else:
        assert isinstance(ctx.cuda_device, int) and ctx.cuda_device >= 0


@pytest.mark.skipif(ON_NVIDIA_MACHINE, reason="this machine has an NVIDIA driver")
def test_software_on_machine_without_gpu(gl, ctx):
    assert ctx.is_software is True
    assert ctx.cuda_device is None
    assert "llvmpipe" in ctx.renderer.lower() or "softpipe" in ctx.renderer.lower()


@pytest.mark.skipif(ON_NVIDIA_MACHINE, reason="this machine has an NVIDIA driver")
def test_software_false_without_gpu_raises(gl, ctx):
    try:
        with pytest.raises(gltensor.GLTensorError):
            c = gltensor.Context.headless(software=False)
            c.close()
    finally:
        ctx.make_current()


def test_software_true(gl, ctx):
    try:
        try:
            c = gltensor.Context.headless(software=True)
        except gltensor.GLTensorError as exc:
            if ON_NVIDIA_MACHINE:
                pytest.skip(f"no Mesa software EGL device on this GPU machine: {exc}")
            raise
        with c:
            assert c.is_software is True
            assert c.cuda_device is None
            assert "llvmpipe" in c.renderer.lower() or "softpipe" in c.renderer.lower()
    finally:
        ctx.make_current()


def test_make_current_and_release(gl, ctx):
    mine = current_egl_context()
    assert mine != 0
    try:
        ctx.release()
        assert current_egl_context() == 0, "release() must leave no context current"
        ctx.release()  # releasing again is harmless
        assert current_egl_context() == 0
        ctx.make_current()
        assert current_egl_context() == mine
        ctx.make_current()  # idempotent
        assert current_egl_context() == mine
    finally:
        ctx.make_current()


def test_new_context_is_current_and_separate(gl, ctx):
    mine = current_egl_context()
    other = _new_context()
    try:
        theirs = current_egl_context()
        assert theirs not in (0, mine), "Context.headless() must make the new context current"
        # separate object namespaces: a texture made in `other` is unknown to `ctx`
        tex = int(GL.glGenTextures(1))
        GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        assert GL.glIsTexture(tex)
        check_gl("in the second context")
        ctx.make_current()
        assert current_egl_context() == mine
        other.make_current()
        assert current_egl_context() == theirs
        assert GL.glIsTexture(tex)
        GL.glDeleteTextures(1, [tex])
        # release() of a context that is not current leaves the current one alone
        ctx.release()
        assert current_egl_context() == theirs
    finally:
        other.close()
        ctx.make_current()


def test_close_idempotent(gl, ctx):
    c = _new_context()
    try:
        assert not c.closed
        assert c.close() is None
        assert c.closed
        assert c.close() is None  # a second close neither raises nor destroys anything twice
        assert c.closed
        assert "closed" in repr(c)
        with pytest.raises(gltensor.ClosedError):
            c.make_current()
        with c.__class__.headless() as d:  # the next context still comes up, current, and works
            assert not d.closed and d.renderer
    finally:
        ctx.make_current()
    # the session context is untouched by the closed one
    tex = GL.glGenTextures(1)
    try:
        GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
        GL.glTexStorage2D(GL.GL_TEXTURE_2D, 1, GL.GL_RGBA8, 4, 4)
        with gltensor.Capture(int(tex)) as cap:
            assert cap.read().shape == (4, 4, 4)
    finally:
        GL.glDeleteTextures([tex])


def test_close_current_context_then_use_raises_closed(gl, ctx):
    c = _new_context()
    try:
        c.close()
        with pytest.raises(gltensor.ClosedError):
            c.make_current()
    finally:
        ctx.make_current()
    assert current_egl_context() != 0


def test_closing_another_context_keeps_mine_current(gl, ctx):
    c = _new_context()
    ctx.make_current()
    mine = current_egl_context()
    c.close()
    assert current_egl_context() == mine
    GL.glGetIntegerv(GL.GL_VIEWPORT)  # still usable
    check_gl()


def test_with_statement_closes(gl, ctx):
    try:
        with _new_context() as c:
            assert isinstance(c, gltensor.Context)
            assert c.version
        with pytest.raises(gltensor.ClosedError):
            c.make_current()
    finally:
        ctx.make_current()


def test_with_statement_closes_on_exception(gl, ctx):
    try:
        with pytest.raises(KeyError):
            with _new_context() as c:
                raise KeyError("boom")
        with pytest.raises(gltensor.ClosedError):
            c.make_current()
    finally:
        ctx.make_current()


def test_context_in_another_thread_leaves_this_thread_alone(gl, ctx):
    mine = current_egl_context()
    result = {}

    def worker():
        try:
            with gltensor.Context.headless() as c:
                result["current"] = current_egl_context()
                result["version"] = c.version
        except BaseException as exc:  # reported below
            result["error"] = exc

    t = threading.Thread(target=worker)
    t.start()
    t.join(60)
    assert not t.is_alive()
    assert "error" not in result, result.get("error")
    assert result["current"] not in (0, mine)
    assert current_egl_context() == mine


@pytest.mark.parametrize("request_kwargs", [dict(cuda_device=99), dict(software=True)],
                         ids=["device-99", "software"])
def test_a_failed_create_leaves_the_callers_context_current(gl, ctx, make_texture, request_kwargs):
    """Creating a context searches devices and makes each candidate current; when the request fails in the
    end, the caller's context must be current again (NVIDIA: cuda_device=99 opens a context on every GPU
    first; a GPU machine has no Mesa device for software=True)."""
    ctx.make_current()
    tex = make_texture("RGBA8", 8, 4)
    try:
        made = gltensor.Context.headless(**request_kwargs)
    except gltensor.GLTensorError:
        made = None
    if made is not None:  # the request could be served here (software=True on Mesa): nothing to check
        made.close()
        ctx.make_current()
        pytest.skip(f"{request_kwargs} succeeded on this machine")
    # No make_current() here: the failed call itself must have left ctx current.
    with gltensor.Capture(tex.name, backend="cpu") as cap:
        assert cap.read().shape == (4, 8, 4)


# ---- the core's record / restore of the caller's GL context, and the EGL device list (glt_context_save_current,
# glt_context_restore, glt_egl_device_get_info), as gltensor.panda3d and gltensor.doctor use them ----


def test_saved_gl_context_restores_the_recorded_one(gl, ctx):
    from gltensor import _gltensor as core

    ctx.make_current()
    saved = core._save_gl_context()
    assert saved[0] == 1 and saved[4] == current_egl_context()  # EGL, this context
    assert core._gl_context_is_current(saved)
    other = gltensor.Context.headless()
    try:
        assert not core._gl_context_is_current(saved)
        core._restore_gl_context(saved)
        assert core._gl_context_is_current(saved) and current_egl_context() == saved[4]
        core._restore_gl_context(saved)  # already current: nothing to do
    finally:
        other.close()
        ctx.make_current()


def test_saved_gl_context_none_and_destroyed(gl, ctx):
    from gltensor import _gltensor as core

    ctx.release()
    try:
        none = core._save_gl_context()
        assert none[0] == 0 and not core._gl_context_is_current(none)
        core._restore_gl_context(none)  # nothing was current: nothing to restore
        assert current_egl_context() == 0
        gone = gltensor.Context.headless()
        saved = core._save_gl_context()
        gone.close()
        with pytest.raises(gltensor.GLTensorError, match="could not make the recorded EGL context"):
            core._restore_gl_context(saved)
        with pytest.raises(TypeError):
            core._restore_gl_context((1, 2))
    finally:
        ctx.make_current()


def test_egl_device_list(gl, ctx):
    from gltensor import _gltensor as core

    devices = core._egl_devices()
    assert devices, "the headless context was made on an EGL device, so there is at least one"
    for i, d in enumerate(devices):
        assert d["index"] == i
        assert set(d) == {"index", "extensions", "drm_node", "render_node", "cuda_device", "renderer", "vendor"}
        assert isinstance(d["extensions"], list)
        assert d["cuda_device"] is None or d["cuda_device"] >= 0
    if ctx.is_software:
        assert any("EGL_MESA_device_software" in d["extensions"] for d in devices)
    assert "EGL_EXT_device_enumeration" in core._egl_client_extensions() or \
        "EGL_EXT_device_base" in core._egl_client_extensions()


_FORKED_AFTER_CUDA = r"""
import os, sys
os.environ["PYOPENGL_PLATFORM"] = "egl"
import numpy as np
import gltensor
assert gltensor.cuda_available()  # the parent initialises CUDA (no GL context: fork after EGL is refused)
pid = os.fork()
if pid == 0:
    code = 1
    try:
        assert not gltensor.cuda_available(), "CUDA cannot run in a child forked after its parent used it"
        from OpenGL import GL
        ctx = gltensor.Context.headless()  # no CUDA needed to pick the GPU
        tex = int(GL.glGenTextures(1))
        GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
        GL.glTexStorage2D(GL.GL_TEXTURE_2D, 1, GL.GL_RGBA8, 33, 17)
        img = np.random.default_rng(3).integers(0, 256, (17, 33, 4), dtype=np.uint8)
        GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 1)
        GL.glTexSubImage2D(GL.GL_TEXTURE_2D, 0, 0, 0, 33, 17, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, img)
        cap = gltensor.Capture(tex)
        assert cap.backend == "cpu", cap.backend_reason
        assert np.array_equal(np.asarray(cap.read(flip=False)), img)
        code = 0
    except BaseException as e:
        print(f"child: {type(e).__name__}: {e}", file=sys.stderr)
    os._exit(code)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.gpu
def test_a_child_forked_after_its_parent_used_cuda_renders_without_it():
    """A worker forked from a trainer that already used CUDA (SubprocVecEnv's default start method) cannot use CUDA:
    gltensor says CUDA is unavailable there instead of failing in a device query, its headless context comes up,
    and its captures read through the CPU backend, exactly."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", _FORKED_AFTER_CUDA], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
