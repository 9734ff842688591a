"""Shared fixtures: one headless GL context for the session, a GL-error guard around each test,
factories for images with known contents, and the backend parametrisation.

PyOpenGL must talk EGL to the context that gltensor makes, so the platform is chosen before
OpenGL is imported anywhere.
"""

import os

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
# MuJoCo fixes its GL backend when it is first imported (GLFW where MUJOCO_GL is unset, which needs a display):
# whichever test module imports it first at collection, it must be EGL for the whole session.
os.environ.setdefault("MUJOCO_GL", "egl")

import ctypes  # noqa: E402
import gc  # noqa: E402

import pytest  # noqa: E402
from OpenGL import GL  # noqa: E402

import glhelpers  # noqa: E402

try:
    import gltensor
except ImportError as exc:  # the header test still runs without the extension
    gltensor = None
    _IMPORT_ERROR = exc
else:
    _IMPORT_ERROR = None

def pytest_report_header(config):
    if gltensor is None:
        return f"gltensor: cannot be imported ({_IMPORT_ERROR})"
    return f"gltensor {gltensor.__version__} from {os.path.dirname(gltensor.__file__)}, CUDA compiled: {gltensor.cuda_compiled()}"


if gltensor is not None and os.environ.get("GLTENSOR_TEST_INSTALLED") == "1":
    # The wheel check (tools/ci_wheel.sh): the suite must test the installed package, not the source tree.
    _tree = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python")
    if os.path.abspath(gltensor.__file__).startswith(_tree + os.sep):
        raise RuntimeError(f"GLTENSOR_TEST_INSTALLED=1 but gltensor was imported from the source tree ({gltensor.__file__})")


def require_gltensor():
    if gltensor is None:
        raise ImportError(f"gltensor cannot be imported: {_IMPORT_ERROR}")
    return gltensor


def cuda_available():
    return gltensor is not None and bool(gltensor.cuda_available())


# ---------------------------------------------------------------- markers and skips


def pytest_configure(config):
    if os.environ.get("GLTENSOR_UNDER_SANITIZER") == "1" and "ASAN_OPTIONS" in os.environ:
        # This process read its ASan options at start (leak detection on). The programs tests start (compilers,
        # git, torchrun, benchmark runs with torch and matplotlib) inherit the preload; their leaks at exit are
        # theirs, not gltensor's, so they run with leak detection off (memory errors are still reported).
        os.environ["ASAN_OPTIONS"] += ":detect_leaks=0"
    config.addinivalue_line("markers", "gpu: needs a usable CUDA device (skipped when gltensor.cuda_available() is False)")
    config.addinivalue_line("markers", "multigpu: needs two or more CUDA devices (skipped with fewer)")
    config.addinivalue_line("markers", "slow: runs for tens of seconds (soak); CI runs it, -m 'not slow' leaves it out")
    config.addinivalue_line("markers", "alone: bounds a device-wide figure (free device memory), which tests in "
                                       "other processes move; run it with no test beside it (tools/gpu_verify.sh)")
    config.addinivalue_line("markers", "sanitizer_distorts(why): a memory or timing bound that a sanitizer's own "
                            "bookkeeping distorts; skipped when GLTENSOR_UNDER_SANITIZER=1")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("GLTENSOR_UNDER_SANITIZER") == "1":
        for item in items:
            mark = item.get_closest_marker("sanitizer_distorts")
            if mark:
                why = mark.args[0] if mark.args else "its bound measures the sanitizer, not gltensor"
                item.add_marker(pytest.mark.skip(reason=f"under a sanitizer (GLTENSOR_UNDER_SANITIZER=1): {why}"))
    devices = gltensor.cuda_device_count() if gltensor is not None else 0
    if devices < 2:
        skip = pytest.mark.skip(reason=f"multigpu test: {devices} CUDA device(s) visible here, two are needed")
        for item in items:
            if "multigpu" in item.keywords:
                item.add_marker(skip)
    if cuda_available():
        return
    if gltensor is None:
        reason = f"gpu test: gltensor cannot be imported ({_IMPORT_ERROR})"
    elif not gltensor.cuda_compiled():
        reason = "gpu test: gltensor was built without CUDA (gltensor.cuda_compiled() is False)"
    else:
        reason = "gpu test: no usable CUDA driver/GPU here (gltensor.cuda_available() is False)"
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def fork_or_skip(method):
    """`method`, except that "fork" is skipped in a process that made an NVIDIA EGL context: NVIDIA's EGL does not
    survive fork (gltensor refuses it in the child, saying so). tests/test_slots.py's
    test_fork_from_a_trainer_without_gl covers fork there, from a trainer process that never made a GL context."""
    if method == "fork" and gltensor is not None and not gltensor.fork_is_safe():
        pytest.skip("this test process made an NVIDIA EGL context, and NVIDIA's EGL does not survive fork; fork is "
                    "tested from a trainer without GL (test_fork_from_a_trainer_without_gl)")
    return method


def fork_if_safe():
    """"fork" where a forked child can make GL contexts, else "forkserver": for tests about something else."""
    return "fork" if gltensor is None or gltensor.fork_is_safe() else "forkserver"


# The same tests run on every backend that can run here: CPU always, CUDA when available.
BACKENDS = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.fixture(params=BACKENDS)
def backend(request):
    if request.param == "cuda":
        ctx = request.getfixturevalue("ctx")
        if ctx.cuda_device is None:
            pytest.skip(f"the session GL context ({ctx.renderer}) runs on no CUDA device")
    return request.param


# ---------------------------------------------------------------- GL context and error guard


def _pin_gl_drivers():
    """Under a sanitizer: keep the GL driver (Mesa's DRI/gallium library) loaded until exit. Mesa unloads it when
    its last display goes, before LeakSanitizer runs; the driver's own leaks then show as "<unknown module>",
    which no suppression can name (tools/sanitizers/lsan.supp names swrast_dri/libgallium)."""
    import ctypes

    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "/dri/" in line or "libgallium" in line}
    for path in paths:
        try:
            ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_NOW | 0x1000)  # RTLD_NODELETE (glibc)
        except OSError:
            pass


@pytest.fixture(scope="session")
def ctx():
    gt = require_gltensor()
    context = gt.Context.headless()
    if os.environ.get("GLTENSOR_UNDER_SANITIZER") == "1":
        _pin_gl_drivers()
    yield context
    gc.collect()  # captures/frames left in cycles go before the context
    context.close()


@pytest.fixture(autouse=True)
def _mujoco_garbage_freed_in_no_context(request):
    """After each MuJoCo test: an MjrContext frees its GL names in whatever context is current when it dies, and
    Gymnasium's viewers leave theirs to the garbage collector. Collected later, during another test, they deleted
    names in the session context (GL_INVALID_OPERATION pending after an unrelated test). Collect them here, with
    no context current, where those GL calls do nothing."""
    yield
    if "mujoco" not in request.node.module.__name__:
        return
    try:
        from OpenGL import EGL
    except Exception:  # pragma: no cover - PyOpenGL without EGL
        return
    display = EGL.eglGetCurrentDisplay()
    if ctypes.cast(EGL.eglGetCurrentContext(), ctypes.c_void_p).value:
        EGL.eglMakeCurrent(display, EGL.EGL_NO_SURFACE, EGL.EGL_NO_SURFACE, EGL.EGL_NO_CONTEXT)
    gc.collect()


@pytest.fixture(autouse=True)
def _no_closed_shared_slots_outlive_their_test():
    """Shared slots a test closed are freed by its end, once its zero-copy views are dropped: the core's count of
    closed slots not yet freed returns to where it was. Slots that stay allocated hold their whole memory (GPU memory
    on the CUDA backend) until exit; memcheck reported such a case as a leak (issue 34). (Slots a test leaves open
    are still referenced by its fixtures at this point, so only closed ones can be checked here.)"""
    live = getattr(getattr(gltensor, "_gltensor", None), "_closed_slots_alive_for_testing", None)
    if live is None:
        yield
        return
    before = live()
    yield
    if live() != before:
        gc.collect()  # views the test dropped in a reference cycle
    assert live() == before, (
        f"{live() - before} shared slots object(s) this test closed are still allocated after it: a zero-copy view "
        "(or a tensor made from one) outlived the test; drop the test's views before it returns")


@pytest.fixture
def gl(ctx):
    """Make the session context current and require no pending GL error before and after."""
    ctx.make_current()
    errors = glhelpers.drain_gl_errors()
    assert not errors, f"GL error(s) pending before the test: {errors}"
    yield ctx
    ctx.make_current()  # a test may have switched or released contexts
    errors = glhelpers.drain_gl_errors()
    assert not errors, f"GL error(s) pending after the test: {errors}"


# ---------------------------------------------------------------- factories (clean up after themselves)


@pytest.fixture
def make_texture(gl):
    """make_texture(fmt, w, h, data=None, target=GL_TEXTURE_2D, seed=0) -> glhelpers.Image.

    fmt: a formats.Fmt, a key ("RGBA8") or an internal format number. data=None uploads
    formats.random_data(fmt, w, h, seed).
    """
    made = []

    def make(fmt, w, h, data=None, target=GL.GL_TEXTURE_2D, seed=0):
        img = glhelpers.Image(fmt, w, h, target=target, data=data, seed=seed)
        made.append(img)
        return img

    yield make
    gl.make_current()
    for img in made:
        img.delete()


@pytest.fixture
def make_renderbuffer(gl):
    """make_renderbuffer(fmt, w, h, data=None, seed=0, samples=0) -> glhelpers.Image.

    Storage by glRenderbufferStorage, contents blitted from a texture holding `data`
    (random_data when None; nothing for multisampled ones).
    """
    made = []

    def make(fmt, w, h, data=None, seed=0, samples=0):
        img = glhelpers.Image(fmt, w, h, target=GL.GL_RENDERBUFFER, data=data, seed=seed, samples=samples)
        made.append(img)
        return img

    yield make
    gl.make_current()
    for img in made:
        img.delete()


@pytest.fixture
def make_image(make_texture, make_renderbuffer):
    """make_image(target, fmt, w, h, data=None, seed=0) for any of the three targets."""

    def make(target, fmt, w, h, data=None, seed=0):
        if target == GL.GL_RENDERBUFFER:
            return make_renderbuffer(fmt, w, h, data=data, seed=seed)
        return make_texture(fmt, w, h, data=data, target=target, seed=seed)

    return make


@pytest.fixture
def reference(gl):
    """reference(name, target, fmt, w, h) -> bottom-up (H, W, C) numpy array read back by GL."""
    return glhelpers.reference


@pytest.fixture
def capture(gl, make_texture, make_renderbuffer):
    """capture(image_or_name, target=None, **kwargs) -> gltensor.Capture, closed after the test."""
    made = []

    def make(image, target=None, **kwargs):
        if isinstance(image, glhelpers.Image):
            name, target = image.name, image.target if target is None else target
        else:
            name = image
        if target is None:
            target = GL.GL_TEXTURE_2D
        cap = gltensor.Capture(name, target, **kwargs)
        made.append(cap)
        return cap

    yield make
    gl.make_current()
    for cap in made:
        cap.close()


@pytest.fixture
def make_surface(gl):
    """make_surface(internal, w, h, target=GL_TEXTURE_2D, samples=0) -> glhelpers.Surface (colour or depth,
    single- or multisampled, no contents), deleted after the test. internal: a GL enum, a key of
    glhelpers.DEPTH or of the format table, or "DEPTH_COMPONENT" (unsized)."""
    made = []

    def make(internal, w, h, target=GL.GL_TEXTURE_2D, samples=0):
        if internal == "DEPTH_COMPONENT":
            internal = GL.GL_DEPTH_COMPONENT
        s = glhelpers.Surface(internal, w, h, target, samples)
        made.append(s)
        return s

    yield make
    gl.make_current()
    for s in made:
        s.delete()


# Under tools/ci_sanitize.sh: Gymnasium's MuJoCo envs and dm_control leave allocations LeakSanitizer reports at exit
# (some from unloaded modules no suppression can name). These tests run in make test and on the GPU instead.
if os.environ.get("GLTENSOR_UNDER_SANITIZER"):
    collect_ignore = ["test_mujoco_batch.py", "test_mujoco_vector.py", "test_bench_mujoco.py"]


@pytest.fixture
def make_slots(backend, gl, request):
    """make_slots(count=2, size=(W, H) of the test's module, **kwargs) -> gltensor.SharedSlots on the test's backend,
    closed after the test (after a collection, so that views the test dropped are gone first)."""
    import gltensor

    made = []

    def make(count=2, size=None, **kwargs):
        size = size or (request.module.W, request.module.H)
        s = gltensor.SharedSlots(count, size, backend=backend, **kwargs)
        made.append(s)
        return s

    yield make
    gc.collect()
    for s in made:
        s.close()


def pytest_sessionfinish(session, exitstatus):
    """Give the array libraries' cached GPU memory back before exit: compute-sanitizer's leak check (memcheck
    --leak-check full, tools/gpu_verify.sh) counts a caching allocator's blocks still held at exit as leaks, and
    those would hide a real one of ours."""
    import sys

    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        try:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        except Exception:  # pragma: no cover - a device a test left broken: the failed test says why
            pass
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        try:
            cupy.get_default_memory_pool().free_all_blocks()
            cupy.get_default_pinned_memory_pool().free_all_blocks()
        except Exception:  # pragma: no cover - CuPy without a usable device
            pass


@pytest.fixture(autouse=True, scope="session")
def _sb3_logs_in_pytests_temp(tmp_path_factory):
    """Stable-Baselines3 makes a log folder (SB3-<date and time>) in the system's temporary folder for every model
    it trains unless SB3_LOGDIR names one: the suite's go to pytest's own temporary folder instead, which pytest
    prunes, and so do those of the examples and doc blocks the suite runs in subprocesses (they inherit it)."""
    if "SB3_LOGDIR" not in os.environ:
        os.environ["SB3_LOGDIR"] = str(tmp_path_factory.mktemp("sb3-logs"))


def dm_control_suite_or_skip(domain="cartpole", task="swingup"):
    """dm_control's suite, or a skip: under the sanitizers (dm_control's imports -- lxml, libxml2, its renderer --
    leave allocations LeakSanitizer reports at exit, some from unloaded modules no suppression can name; the
    sanitizer run checks gltensor's code elsewhere), without dm_control, or where it cannot load a task (dm_control
    1.0.x indexes MjModel fields that MuJoCo 4 renamed)."""
    if os.environ.get("GLTENSOR_UNDER_SANITIZER"):
        pytest.skip("dm_control under the sanitizers: third-party leaks at exit")
    suite = pytest.importorskip("dm_control.suite")
    try:
        suite.load(domain, task)
    except AttributeError as exc:
        import mujoco
        pytest.skip(f"dm_control cannot load a task with MuJoCo {mujoco.__version__}: {exc}")
    return suite


@pytest.fixture
def lag(monkeypatch):
    """For tests of physics="auto"'s measured choice (gltensor.mujoco._path_trial): a function that, called inside
    a step, makes PathTrial time that step one second longer, whatever the machine's load. (A 20 ms sleep did not
    hold: on a loaded 2-core CI machine the steps took 145-170 ms and the trial's medians moved by more.) Only
    _path_trial's clock runs ahead; it stays monotonic."""
    import time
    import types

    path_trial = pytest.importorskip("gltensor.mujoco._path_trial")
    real = time.perf_counter
    ahead = [0.0]
    monkeypatch.setattr(path_trial, "time", types.SimpleNamespace(perf_counter=lambda: real() + ahead[0]))
    return lambda: ahead.__setitem__(0, ahead[0] + 1.0)
