"""Shared slots: real worker processes (each with its own GL context) write into the trainer's slots, the
trainer reads every slot as one batch. Every pixel of every slot is compared with what the worker drew.

The `backend` fixture runs each test on the CPU backend (shared host memory: Mesa here, CI) and, where CUDA is
usable, on the CUDA backend (device memory that the workers' GL imports: the GPU machine)."""
import gc
import multiprocessing as mp
import os
import signal

import numpy as np
import pytest

import gltensor
import slot_workers
from conftest import fork_or_skip
from slot_workers import pattern
from frames import to_host

W, H = 97, 61  # odd on purpose: no row is a multiple of any alignment


class Workers:
    """N worker processes, one per slot, started with `method`; closed (and joined) by the test's end."""

    def __init__(self, slots, method="spawn", slots_to_start=None, **kwargs):
        self.ctx = mp.get_context(method)
        self.slots, self.kwargs = slots, kwargs
        self.conns, self.procs, self.pids = {}, {}, {}
        for i in slots_to_start if slots_to_start is not None else range(len(slots)):
            self.start(i)

    def start(self, i):
        parent, child = self.ctx.Pipe()
        # The write path travels explicitly: a forkserver started by an earlier test has that test's environment.
        kwargs = dict(self.kwargs, slots_write=os.environ.get("GLTENSOR_SLOTS_WRITE"))
        p = self.ctx.Process(target=slot_workers.run, args=(self.slots.handle(i), i, self.slots.size, child),
                             kwargs=kwargs, daemon=True)
        p.start()
        child.close()
        self.conns[i], self.procs[i] = parent, p
        self.pids[i] = self.answer(i)

    def answer(self, i):
        if not self.conns[i].poll(120):
            raise TimeoutError(f"worker {i} did not answer in 120 s")
        msg = self.conns[i].recv()
        if msg[0] == "error":
            raise RuntimeError(f"worker {i}: {msg[1]}: {msg[2]}")
        return msg[1]

    def ask(self, i, *cmd):
        """Sends a command to worker i and returns ('ok', value) or ('error', class name, message)."""
        self.conns[i].send(cmd)
        if not self.conns[i].poll(120):
            raise TimeoutError(f"worker {i} did not answer {cmd} in 120 s")
        return self.conns[i].recv()

    def all(self, *cmd):
        for i in self.conns:
            self.conns[i].send(cmd)
        out = {}
        for i in self.conns:
            msg = self.conns[i].recv()
            assert msg[0] == "ok", f"worker {i} failed {cmd}: {msg[1]}: {msg[2]}"
            out[i] = msg[1]
        return out

    def kill(self, i):
        os.kill(self.procs[i].pid, signal.SIGKILL)
        self.procs[i].join(10)
        del self.conns[i]

    def close(self):
        for i, c in list(self.conns.items()):
            try:
                c.send(None)
            except OSError:
                pass
        for p in self.procs.values():
            p.join(30)
            if p.is_alive():
                p.kill()


@pytest.fixture
def workers():
    made = []

    def start(slots, **kwargs):
        w = Workers(slots, **kwargs)
        made.append(w)
        return w

    yield start
    for w in made:
        w.close()


@pytest.fixture(params=["auto", "other"])
def write_path(request, backend, monkeypatch):
    """Runs a test once per way a worker can write on this backend: the default (auto: the compute shader on CUDA
    slots, glReadPixels into host memory on CPU slots) and the other one (CUDA: glReadPixels + buffer copy; CPU:
    the shader into a buffer of the worker's, read back). Returns the path the workers must report."""
    if request.param == "auto":
        monkeypatch.delenv("GLTENSOR_SLOTS_WRITE", raising=False)
        return "shader" if backend == "cuda" else "readpixels"
    monkeypatch.setenv("GLTENSOR_SLOTS_WRITE", "copy" if backend == "cuda" else "shader")
    return "copy" if backend == "cuda" else "shader"


def expected(count, step, channels=4, dtype=np.uint8, slots=None):
    return np.stack([pattern(i, step, W, H, channels, dtype) for i in (slots if slots is not None else range(count))])


@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
def test_every_pixel_of_every_slot(backend, write_path, workers, method):
    fork_or_skip(method)
    if method == "fork" and write_path == "shader" and backend == "cpu":
        # Mesa's llvmpipe runs compute shaders on a thread pool of its screen; a forked child inherits the screen
        # without the threads, and its first dispatch waits for them forever (seen in CI once the parent had run
        # a compute shader). The CPU backend's default write uses no shader; NVIDIA refuses fork after EGL.
        pytest.skip("compute shaders hang in a child forked from a process that used Mesa's llvmpipe")
    slots = gltensor.SharedSlots(3, (W, H), backend=backend)
    assert slots.backend == backend and slots.shape == (3, H, W, 4) and slots.dtype == "uint8"
    w = workers(slots, method=method)
    for step in range(3):
        w.all("step", step)
        np.testing.assert_array_equal(to_host(slots.read()), expected(3, step))
    assert set(w.all("write_path").values()) == {write_path}
    slots.close()


@pytest.mark.parametrize("kind,pad", [("texture", 0), ("renderbuffer", 0), ("texture", 6), ("msaa", 4)])
def test_sources_and_regions(backend, write_path, workers, kind, pad):
    """Textures, renderbuffers, a region inside a larger (padded) image, a multisampled renderbuffer (resolved)."""
    slots = gltensor.SharedSlots(2, (W, H), backend=backend)
    w = workers(slots, kind=kind, pad=pad)
    for step in range(2):
        w.all("step", step)
        np.testing.assert_array_equal(to_host(slots.read()), expected(2, step))
    assert set(w.all("write_path").values()) == {write_path}


def test_read_options_fused(backend, workers):
    slots = gltensor.SharedSlots(2, (W, H), backend=backend)
    w = workers(slots)
    ref = expected(2, 0)
    conversions = [
        (dict(flip=False), ref[:, ::-1]),
        (dict(channels="rgb"), ref[..., :3]),
        (dict(channels="bgr", layout="chw"), ref[..., [2, 1, 0]].transpose(0, 3, 1, 2)),
        (dict(dtype="float32"), ref.astype(np.float32) / 255),
        (dict(channels="rgb", dtype="float32", layout="chw", flip=False),
         (ref[:, ::-1, :, :3].astype(np.float32) / 255).transpose(0, 3, 1, 2)),
    ]
    for step, (opts, want) in enumerate(conversions):
        w.all("step", 0)
        got = to_host(slots.read(**opts))
        assert got.shape == want.shape, opts
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6, err_msg=str(opts))


def test_read_into_out(backend, workers):
    slots = gltensor.SharedSlots(2, (W, H), backend=backend)
    w = workers(slots)
    w.all("step", 0)
    if backend == "cpu":
        out = np.zeros((2, H, W, 4), np.uint8)
    else:
        torch = pytest.importorskip("torch")
        out = torch.zeros((2, H, W, 4), dtype=torch.uint8, device=f"cuda:{slots.cuda_device}")
    assert slots.read(out=out) is out
    np.testing.assert_array_equal(to_host(out), expected(2, 0))


@pytest.mark.parametrize("buffers", [1, 2, 3])
def test_frames_are_never_overwritten(backend, workers, buffers):
    """A frame read at step k keeps step k's pixels while the workers write steps k+1, k+2, ..."""
    slots = gltensor.SharedSlots(2, (W, H), backend=backend, buffers=buffers)
    w = workers(slots)
    frames = []
    for step in range(4):
        w.all("step", step)
        frames.append(slots.read())
    for step, f in enumerate(frames):
        np.testing.assert_array_equal(to_host(f), expected(2, step))
    del frames, f
    slots.close()


# Every slot format written from a source of the same format (bit-exact, floats included), sRGB (stored bytes,
# never decoded) and one conversion GL does in the write (unorm to float).
SAME_FORMATS = ["R8", "RG8", "RGBA8", "R16", "RG16", "RGBA16", "R16F", "RG16F", "RGBA16F", "R32F", "RG32F",
                "RGBA32F", "R8UI", "RG8UI", "RGBA8UI", "R16UI", "RGBA16UI", "R32UI", "RG32UI", "RGBA32UI"]
FORMAT_CASES = [(f, f.lower()) for f in SAME_FORMATS] + [("SRGB8_ALPHA8", 0x8C43), ("RGBA8", "rgba32f")]


@pytest.mark.parametrize("source_format,slot_format", FORMAT_CASES, ids=[f"{a}-{b}" for a, b in FORMAT_CASES])
def test_formats(backend, write_path, workers, source_format, slot_format):
    from OpenGL import GL

    _, _, _, src_dtype, channels = slot_workers.source_formats(GL)[source_format]
    slots = gltensor.SharedSlots(2, (W, H), format=slot_format, backend=backend)
    w = workers(slots, source_format=source_format)
    w.all("step", 1)
    want = np.stack([pattern(i, 1, W, H, channels, src_dtype) for i in range(2)])
    got = to_host(slots.read())
    if slot_format == "rgba32f" and src_dtype == np.uint8:  # GL's conversion: within rounding of k / 255
        want = want.astype(np.float32) / 255
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    else:  # the same format: every bit, floats included
        assert got.shape == want.shape and got.dtype == want.dtype
        if want.dtype.kind == "f":
            got, want = got.view(f"u{got.dtype.itemsize}"), want.view(f"u{want.dtype.itemsize}")
        np.testing.assert_array_equal(got, want)
    assert set(w.all("write_path").values()) == {write_path}
    slots.close()


def test_host_arrays_as_observations(backend, workers):
    slots = gltensor.SharedSlots(2, (W, H), backend=backend)
    w = workers(slots)
    w.all("write_host", 5)
    np.testing.assert_array_equal(to_host(slots.read()), expected(2, 5))


def test_a_killed_worker_is_named_and_the_others_are_intact(backend, workers):
    slots = gltensor.SharedSlots(3, (W, H), backend=backend)
    w = workers(slots)
    w.all("step", 0)
    slots.read()
    dead_pid = w.pids[1]
    w.kill(1)  # SIGKILL mid-step: it never writes step 1
    w.all("step", 1)
    with pytest.raises(gltensor.StaleSlotError, match=rf"slot 1: its writer \(pid {dead_pid}\) has exited"):
        slots.read()
    assert slots.state(0)[0] == "fresh" and slots.state(2)[0] == "fresh"
    assert slots.state(1) == ("writer_gone", dead_pid)
    w.start(1)  # a new worker takes the slot over
    assert w.ask(1, "step", 1)[0] == "ok"
    np.testing.assert_array_equal(to_host(slots.read()), expected(3, 1))


def test_a_skipped_write_is_refused(backend, workers):
    slots = gltensor.SharedSlots(2, (W, H), backend=backend)
    w = workers(slots)
    w.all("step", 0)
    slots.read()
    assert w.ask(0, "step", 1)[0] == "ok"
    with pytest.raises(gltensor.StaleSlotError, match=r"1 of 2 .*slot 1: its writer \(pid \d+\) has not written"):
        slots.read()
    assert slots.states() == ["fresh", "stale"]
    with pytest.raises(gltensor.StaleSlotError, match="slot 0: never written"):
        gltensor.SharedSlots(1, (W, H), backend=backend).read()


def test_wrong_size_and_format_are_refused(backend, workers):
    slots = gltensor.SharedSlots(1, (W, H), backend=backend)
    w = workers(slots)
    msg = w.ask(0, "write_size", W + 1, H)
    assert msg[0] == "error" and msg[1] == "InvalidArgumentError" and f"{W + 1}x{H}" in msg[2] and f"{W}x{H}" in msg[2]
    msg = w.ask(0, "write_int")
    assert msg[0] == "error" and msg[1] == "UnsupportedFormatError" and "GL_RGBA8UI" in msg[2]
    assert slots.state(0)[0] == "stale"  # a refused write leaves the slot as it was


def test_trainer_closing_first_fails_the_next_write(backend, workers):
    slots = gltensor.SharedSlots(1, (W, H), backend=backend)
    w = workers(slots)
    w.all("step", 0)
    slots.close()
    msg = w.ask(0, "step", 1)
    assert msg[0] == "error" and msg[1] == "ClosedError" and "closed the slots" in msg[2]
    slots.close()  # idempotent
    with pytest.raises(gltensor.ClosedError):
        slots.read()


def test_bad_arguments():
    with pytest.raises(ValueError, match="not a slot format"):
        gltensor.SharedSlots(1, (8, 8), format="rgb8", backend="cpu")
    with pytest.raises(gltensor.UnsupportedFormatError, match="GL_RGB8.*1, 2 or 4 channels"):
        gltensor.SharedSlots(1, (8, 8), format=0x8051, backend="cpu")
    with pytest.raises(gltensor.UnsupportedFormatError):
        gltensor.SharedSlots(1, (8, 8), format=0x81A6, backend="cpu")  # GL_DEPTH_COMPONENT24
    with pytest.raises(gltensor.InvalidArgumentError, match="count must be 1 to"):
        gltensor.SharedSlots(0, (8, 8), backend="cpu")
    with pytest.raises(gltensor.InvalidArgumentError, match="width and height"):
        gltensor.SharedSlots(1, (0, 8), backend="cpu")
    with pytest.raises(gltensor.InvalidArgumentError, match="buffers must be 1, 2 or 3"):
        gltensor.SharedSlots(1, (8, 8), backend="cpu", buffers=4)
    slots = gltensor.SharedSlots(2, (8, 8), backend="cpu")
    with pytest.raises(IndexError):
        slots.handle(2)
    with pytest.raises(gltensor.InvalidArgumentError, match="slot 5 does not exist"):
        slots.state(5)


def test_writer_refuses_a_slot_that_does_not_exist(gl):
    slots = gltensor.SharedSlots(2, (8, 8), backend="cpu")
    with pytest.raises(gltensor.InvalidArgumentError, match="slot 2 does not exist"):
        slots.write(2, 1)
    with pytest.raises(gltensor.InvalidArgumentError, match="geometry descriptor .* is not sealed"):
        r, wr = os.pipe()
        try:
            gltensor._gltensor._SlotWriter(-1, r, r, r, 0)
        finally:
            os.close(r), os.close(wr)


def test_no_descriptor_leaks_in_the_trainer(backend):
    def fds():
        return len(os.listdir("/proc/self/fd"))

    gltensor.SharedSlots(2, (W, H), backend=backend).close()  # first use loads what stays loaded
    gc.collect()  # earlier tests' objects close their descriptors now, not during the count
    before = fds()
    for _ in range(10_000):
        s = gltensor.SharedSlots(2, (W, H), backend=backend)
        s.handle(0)
        s.close()
    gc.collect()
    assert fds() == before


def test_no_descriptor_leaks_in_a_worker(backend, workers):
    slots = gltensor.SharedSlots(1, (W, H), backend=backend)
    w = workers(slots)
    w.all("step", 0)
    before = w.all("fds")[0]
    after = w.all("attach_cycles", 10_000)[0]
    assert after == before
    w.all("step", 1)
    np.testing.assert_array_equal(to_host(slots.read()), expected(1, 1))


# The test forks on purpose (what it checks is what survives a fork); Python 3.12 warns about any fork of a process
# with threads (torch's, the driver's): not a warning of gltensor's.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded, use of fork:DeprecationWarning")
def test_read_refused_in_a_forked_copy():
    slots = gltensor.SharedSlots(1, (8, 8), backend="cpu")
    ctx = mp.get_context("fork")
    q = ctx.Queue()

    def child():
        try:
            slots.read()
            q.put("read worked")
        except gltensor.InvalidArgumentError as e:
            q.put(str(e))
        finally:
            del_ok = True  # the copy's destruction must not close the trainer's slots
            q.put(del_ok)

    p = ctx.Process(target=child)
    p.start()
    assert "read by the process that created them" in q.get(timeout=30)
    q.get(timeout=30)
    p.join(30)
    assert slots.state(0)[0] == "stale" and not slots.closed  # still the trainer's, still open


@pytest.mark.gpu
def test_no_cuda_context_in_workers(workers):
    """Workers of CUDA slots use GL only: each holds the device memory of a GL context (a few MiB), not of a CUDA
    context (hundreds of MiB), and writing loads no CUDA library that its GL context had not loaded already
    (NVIDIA's EGL itself may load libcuda.so when it makes a context on a device; that makes no CUDA context).
    NVIDIA lists a GL process that runs compute shaders among the "compute apps" too, so that list alone says
    nothing."""
    import shutil
    import subprocess

    if not shutil.which("nvidia-smi"):
        pytest.skip("nvidia-smi is not on PATH")
    slots = gltensor.SharedSlots(4, (W, H), backend="cuda")
    w = workers(slots)
    loaded_by_context = w.all("libcuda")  # the workers made their GL contexts, and wrote nothing yet
    for step in range(3):
        w.all("step", step)
        np.testing.assert_array_equal(to_host(slots.read()), expected(4, step))
    assert w.all("libcuda") == loaded_by_context
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout
    used = {}
    for line in out.splitlines():
        pid, _, mib = line.partition(",")
        if mib.strip().replace(".", "", 1).isdigit():  # "[N/A]" where the driver does not say
            used[int(pid)] = float(mib)
    for i, pid in w.pids.items():
        assert used.get(pid, 0.0) < 64, f"worker {i} (pid {pid}) holds {used[pid]} MiB of device memory:\n{out}"
    assert not any(w.all("cuda_initialized").values())


@pytest.mark.gpu
@pytest.mark.parametrize("count", [16, 64])
def test_many_workers_exact(workers, count):
    slots = gltensor.SharedSlots(count, (W, H), backend="cuda")
    w = workers(slots)
    for step in range(2):
        w.all("step", step)
        np.testing.assert_array_equal(to_host(slots.read()), expected(count, step))


FORK_TRAINER = r"""
import multiprocessing as mp, sys
import numpy as np
import gltensor, slot_workers
backend = sys.argv[1]
slots = gltensor.SharedSlots(3, (97, 61), backend=backend)
assert gltensor.fork_is_safe()
ctx = mp.get_context("fork")
conns, procs = [], []
for i in range(3):
    a, b = ctx.Pipe()
    p = ctx.Process(target=slot_workers.run, args=(slots.handle(i), i, (97, 61), b), daemon=True)
    p.start()
    msg = a.recv()
    assert msg[0] == "ok", msg
    conns.append(a)
    procs.append(p)
for step in range(3):
    for a in conns:
        a.send(("step", step))
    for a in conns:
        msg = a.recv()
        assert msg[0] == "ok", msg
    frame = slots.read()
    got = np.from_dlpack(frame) if backend == "cpu" else __import__("torch").from_dlpack(frame).cpu().numpy()
    want = np.stack([slot_workers.pattern(i, step, 97, 61) for i in range(3)])
    assert np.array_equal(got, want), float(np.mean(got != want))
for a in conns:
    a.send(("cuda_initialized",))
    assert a.recv() == ("ok", False)
    a.send(None)
for p in procs:
    p.join(30)
print("fork trainer ok")
"""


def test_fork_from_a_trainer_without_gl(backend, tmp_path):
    """The usual RL layout: a trainer that makes no GL context (it trains) forks its workers (Gymnasium's and SB3's
    default start method on Linux before Python 3.14); each worker makes its context on the trainer's GPU without
    CUDA and writes its slot. Run in a fresh process: this test process has GL contexts of its own."""
    import subprocess
    import sys

    script = tmp_path / "fork_trainer.py"
    script.write_text(FORK_TRAINER)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(__file__)] + sys.path))
    proc = subprocess.run([sys.executable, str(script), backend], capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 0 and "fork trainer ok" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]


# The test forks on purpose (what it checks is what survives a fork); Python 3.12 warns about any fork of a process
# with threads (torch's, the driver's): not a warning of gltensor's.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded, use of fork:DeprecationWarning")
def test_fork_after_nvidia_egl_is_refused_clearly(ctx, workers):
    """A trainer that made an NVIDIA EGL context forks: the child's GL would crash inside the driver (seen: abort,
    segfault); gltensor refuses it with what to do instead."""
    if gltensor.fork_is_safe():
        pytest.skip(f"this process made no NVIDIA EGL context (GL: {ctx.renderer}): fork is safe here")
    slots = gltensor.SharedSlots(1, (W, H), backend="cpu")
    with pytest.raises(RuntimeError, match="UnsupportedError.*does not survive fork.*forkserver"):
        workers(slots, method="fork")


@pytest.mark.parametrize("path", ["shader", "copy"])
def test_a_write_leaves_the_callers_gl_state_as_it_was(backend, gl, monkeypatch, path):
    """Every binding and enable a write touches (framebuffers, pack state and buffer, the shader's program, texture
    unit, sampler and storage buffer) is the caller's again afterwards, and the image is exact."""
    from OpenGL import GL
    from OpenGL.GL import shaders

    monkeypatch.setenv("GLTENSOR_SLOTS_WRITE", path)
    slots = gltensor.SharedSlots(1, (W, H), backend=backend)
    img = pattern(0, 3, W, H)
    tex = int(GL.glGenTextures(1))
    GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
    GL.glTexStorage2D(GL.GL_TEXTURE_2D, 1, GL.GL_RGBA8, W, H)
    GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 1)
    GL.glTexSubImage2D(GL.GL_TEXTURE_2D, 0, 0, 0, W, H, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, np.ascontiguousarray(img[::-1]))
    # The caller's state: a program in use, another texture and a sampler on unit 0 while unit 3 is active,
    # storage buffers bound (generic and a range at binding 0), framebuffers, a pack buffer, scissor and sRGB on.
    program = shaders.compileProgram(shaders.compileShader(
        "#version 430\nlayout(local_size_x = 1) in;\nvoid main() {}\n", GL.GL_COMPUTE_SHADER))
    other_tex, sampler = int(GL.glGenTextures(1)), int(GL.glGenSamplers(1))
    ssbo, pbo = (int(b) for b in GL.glGenBuffers(2))
    GL.glBindBuffer(GL.GL_SHADER_STORAGE_BUFFER, ssbo)
    GL.glBufferData(GL.GL_SHADER_STORAGE_BUFFER, 4096, None, GL.GL_DYNAMIC_DRAW)
    GL.glBindBufferRange(GL.GL_SHADER_STORAGE_BUFFER, 0, ssbo, 256, 1024)
    GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, pbo)
    fbos = [int(f) for f in GL.glGenFramebuffers(2)]
    GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, fbos[0])
    GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, fbos[1])
    GL.glUseProgram(program)
    GL.glActiveTexture(GL.GL_TEXTURE0)
    GL.glBindTexture(GL.GL_TEXTURE_2D, other_tex)
    GL.glBindSampler(0, sampler)
    GL.glActiveTexture(GL.GL_TEXTURE3)
    GL.glEnable(GL.GL_SCISSOR_TEST)
    GL.glEnable(GL.GL_FRAMEBUFFER_SRGB)
    GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 8)

    def state():
        GL.glActiveTexture(GL.GL_TEXTURE0)
        unit0 = (int(GL.glGetIntegerv(GL.GL_TEXTURE_BINDING_2D)), int(GL.glGetIntegerv(GL.GL_SAMPLER_BINDING)))
        GL.glActiveTexture(GL.GL_TEXTURE3)
        return dict(
            program=int(GL.glGetIntegerv(GL.GL_CURRENT_PROGRAM)), unit0=unit0,
            active=int(GL.glGetIntegerv(GL.GL_ACTIVE_TEXTURE)),
            ssbo=int(GL.glGetIntegerv(GL.GL_SHADER_STORAGE_BUFFER_BINDING)),
            ssbo0=(int(np.ravel(GL.glGetIntegeri_v(GL.GL_SHADER_STORAGE_BUFFER_BINDING, 0))[0]),
                   int(np.ravel(GL.glGetInteger64i_v(GL.GL_SHADER_STORAGE_BUFFER_START, 0))[0]),
                   int(np.ravel(GL.glGetInteger64i_v(GL.GL_SHADER_STORAGE_BUFFER_SIZE, 0))[0])),
            pbo=int(GL.glGetIntegerv(GL.GL_PIXEL_PACK_BUFFER_BINDING)),
            read_fbo=int(GL.glGetIntegerv(GL.GL_READ_FRAMEBUFFER_BINDING)),
            draw_fbo=int(GL.glGetIntegerv(GL.GL_DRAW_FRAMEBUFFER_BINDING)),
            scissor=bool(GL.glIsEnabled(GL.GL_SCISSOR_TEST)), srgb=bool(GL.glIsEnabled(GL.GL_FRAMEBUFFER_SRGB)),
            pack_alignment=int(GL.glGetIntegerv(GL.GL_PACK_ALIGNMENT)))

    before = state()
    try:
        slots.write(0, tex)
        after = state()
        assert slots._client.writer(0).write_path == {
            "shader": "shader", "copy": "copy" if backend == "cuda" else "readpixels"}[path]
    finally:
        GL.glUseProgram(0)
        GL.glBindSampler(0, 0)
        GL.glActiveTexture(GL.GL_TEXTURE0)
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, 0)
        GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, 0)
        GL.glBindBuffer(GL.GL_SHADER_STORAGE_BUFFER, 0)
        GL.glBindBufferBase(GL.GL_SHADER_STORAGE_BUFFER, 0, 0)
        GL.glDisable(GL.GL_SCISSOR_TEST)
        GL.glDisable(GL.GL_FRAMEBUFFER_SRGB)
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 4)
        got = to_host(slots.read())
        slots.close()
        GL.glDeleteFramebuffers(2, fbos)
        GL.glDeleteBuffers(2, [ssbo, pbo])
        GL.glDeleteTextures([tex, other_tex])
        GL.glDeleteSamplers(1, [sampler])
        GL.glDeleteProgram(program)
    assert after == before
    np.testing.assert_array_equal(got, img[None])


@pytest.mark.gpu
@pytest.mark.parametrize("next_stream", ["default", "side"])
def test_frame_memory_reused_on_another_stream_waits_for_the_default_streams_consumers(gl, next_stream):
    """A frame read and consumed on the default stream records no event when it dies (the next read there follows
    it anyway); a next read on another stream that gets its memory must still wait for the consumer's work queued
    on the default stream. Slots, not a capture: a capture's map orders the streams by itself and would hide a
    missing wait. 20 rounds, the consumer held back by a sleep so that a missing wait shows."""
    torch = pytest.importorskip("torch")
    w, h, count = 256, 128, 2
    slots = gltensor.SharedSlots(count, (w, h), backend="cuda")
    side = torch.cuda.Stream()
    rng = np.random.default_rng(7)
    kept = []
    for step in range(20):
        first = rng.integers(0, 256, (count, h, w, 4), np.uint8)
        for i in range(count):
            slots.write_host(i, first[i])
        t = torch.from_dlpack(slots.read())  # copied on the default stream, the pool's own
        ptr = t.data_ptr()
        # The next step's images go into the other set now: a GL write waits for the GPU, which would wait out
        # the sleep below and hide a missing wait.
        for i in range(count):
            slots.write_host(i, rng.integers(0, 256, (h, w, 4), np.uint8))
        torch.cuda._sleep(10_000_000)
        consumed = t.to(torch.int32) + 1  # queued behind the sleep; reads the frame's memory
        del t  # the frame dies and its memory goes back to the pool while `consumed` is still queued
        nxt = slots.read(stream=side if next_stream == "side" else None)
        # The same memory again (the pool's only idle block: each `nxt` is kept until the end).
        assert torch.from_dlpack(nxt).data_ptr() == ptr
        kept.append((consumed, first, nxt))
    torch.cuda.synchronize()
    for step, (consumed, first, _) in enumerate(kept):
        np.testing.assert_array_equal(consumed.cpu().numpy(), first.astype(np.int32) + 1, err_msg=f"step {step}")
    del kept, nxt
    slots.close()


@pytest.mark.gpu
@pytest.mark.alone
@pytest.mark.parametrize("how", ["close", "collect"])
def test_closing_or_collecting_frees_the_device_memory(gl, how):
    """Slots and the frames read from them give their device memory back: closed, or only dropped (collected).
    The trainer writes host images into its own slots here (GL imports the memory in this process too)."""
    torch = pytest.importorskip("torch")
    size, count = (1024, 1024), 8

    def cycle(step):
        s = gltensor.SharedSlots(count, size, backend="cuda")
        for k in range(2):
            for i in range(count):
                s.write_host(i, np.full((size[1], size[0], 4), (step + k + i) % 256, np.uint8))
            frame = torch.from_dlpack(s.read())
            assert int(frame[count - 1, 0, 0, 0]) == (step + k + count - 1) % 256
            del frame
        if how == "close":
            s.close()
        del s
        gc.collect()

    cycle(0)
    torch.cuda.synchronize()
    free_before = torch.cuda.mem_get_info()[0]
    for step in range(1, 11):  # 96 MiB of slots and frames each: a leak shows as ~1 GiB
        cycle(step)
    torch.cuda.synchronize()
    lost = free_before - torch.cuda.mem_get_info()[0]
    assert lost < 64 * 2**20, f"{lost / 2**20:.0f} MiB of device memory not given back after 10 cycles"


@pytest.mark.parametrize("pack_input", ["auto", "blit"])
@pytest.mark.parametrize("case", ["plain", "region", "swizzled", "base_level_1", "rgba16f_source"])
def test_the_shader_write_reads_a_texture_itself_only_where_that_is_exact(backend, gl, monkeypatch, pack_input, case):
    """The shader write reads the caller's texture directly (no blit) when texelFetch gives what glReadPixels
    would: an RGBA8 texture of the slot's format, any region of it. A swizzle, a base level other than 0 or another
    format go through the blit. Every byte is compared with the image as stored, both ways."""
    from OpenGL import GL

    monkeypatch.setenv("GLTENSOR_SLOTS_WRITE", "shader")
    monkeypatch.setenv("GLTENSOR_SLOTS_PACK_INPUT", pack_input)
    pad = 5 if case == "region" else 0
    tw, th = W + 2 * pad, H + 2 * pad
    img = pattern(1, 7, tw, th)  # top row first
    tex = int(GL.glGenTextures(1))
    GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
    levels = 2 if case == "base_level_1" else 1
    GL.glTexStorage2D(GL.GL_TEXTURE_2D, levels, GL.GL_RGBA16F if case == "rgba16f_source" else GL.GL_RGBA8, tw, th)
    GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 1)
    GL.glTexSubImage2D(GL.GL_TEXTURE_2D, 0, 0, 0, tw, th, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE,
                       np.ascontiguousarray(img[::-1]))
    if case == "base_level_1":
        GL.glTexSubImage2D(GL.GL_TEXTURE_2D, 1, 0, 0, tw // 2, th // 2, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE,
                           np.zeros((th // 2, tw // 2, 4), np.uint8))
        GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_BASE_LEVEL, 1)
    if case == "swizzled":
        GL.glTexParameteriv(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_SWIZZLE_RGBA,
                            np.array([GL.GL_BLUE, GL.GL_GREEN, GL.GL_RED, GL.GL_ONE], np.int32))
    GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    # The reference is what glReadPixels gives of the texture's level 0 attached to a framebuffer (for a base level
    # other than 0 NVIDIA's driver 580 reads zeros there, and so must the slot).
    fbo = int(GL.glGenFramebuffers(1))
    GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, fbo)
    GL.glFramebufferTexture2D(GL.GL_READ_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0, GL.GL_TEXTURE_2D, tex, 0)
    GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)
    want = np.frombuffer(GL.glReadPixels(pad, pad, W, H, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE), np.uint8)
    want = want.reshape(H, W, 4)[::-1]  # top row first, as read() gives it
    GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, 0)
    GL.glDeleteFramebuffers(1, [fbo])
    if case != "base_level_1":
        np.testing.assert_array_equal(want, img[pad:pad + H, pad:pad + W])  # the texture holds the pattern
    slots = gltensor.SharedSlots(2, (W, H), backend=backend)
    try:
        for slot in range(2):
            slots.write(slot, tex, region=(pad, pad, W, H) if pad else None)
        got = to_host(slots.read())
        np.testing.assert_array_equal(got, np.stack([want, want]))
        writer = slots._client.writer(0)
        assert writer.write_path == "shader" and writer.writes == 1
        # Only a plain texture of the slot's format (any region of it) is read without the blit, and only by default.
        assert writer.direct_writes == (1 if pack_input == "auto" and case in ("plain", "region") else 0)
    finally:
        slots.close()
        GL.glDeleteTextures(1, [tex])
