"""Lifetimes: frames, capsules and tensors outliving their capture, batch, atlas and context (after gc.collect());
the GL texture deleted while registered; interpreter shutdown with live frames; 10,000 create/close cycles with
RSS flat; and the soak (reads with RSS flat, and device memory flat on the GPU machine).

Soak sizes: GLTENSOR_SOAK_READS (default 20,000, marked slow: CI runs it) reads; on the GPU machine
GLTENSOR_SOAK_READS=1000000 with the CUDA backend (tools/gpu_verify.sh soak).
"""

import gc
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from OpenGL import GL

import gltensor
from glhelpers import check_gl, rss_bytes

pytestmark = pytest.mark.usefixtures("gl")
MiB = 1 << 20


def test_frames_and_capsules_outlive_capture_batch_atlas(make_texture):
    img = make_texture("RGBA8", 64, 32, seed=40)
    other = make_texture("RGBA8", 64, 32, seed=39)
    ref = img.reference()[::-1]
    cap = gltensor.Capture(img.name, backend="cpu")
    batch = gltensor.Batch([img.name, other.name], backend="cpu")
    atlas = gltensor.Atlas(img.name, tiles=(2, 2), backend="cpu")
    frame = cap.read()
    bframe = batch.read()
    aframe = atlas.read()
    capsule = frame.__dlpack__(max_version=(1, 0))  # never consumed: its destructor frees the tensor
    legacy = bframe.__dlpack__()
    view = np.from_dlpack(aframe)
    arr = np.from_dlpack(frame)
    cap.close()
    batch.close()
    atlas.close()
    del cap, batch, atlas, frame, bframe, aframe
    gc.collect()
    assert_array_equal(arr, ref)
    assert view.shape == (4, 16, 32, 4)
    del capsule, legacy
    gc.collect()
    assert_array_equal(arr, ref)


@pytest.mark.parametrize("backend", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_frames_outlive_their_context(backend):
    """A context of its own, closed (and collected) under live frames and consumed arrays."""
    # The default device: Mesa here, the NVIDIA GPU on a GPU machine (which has no Mesa device).
    ctx = gltensor.Context.headless()
    if backend == "cuda":
        torch = pytest.importorskip("torch", reason="the CUDA frames are checked through torch")
        if ctx.cuda_device is None:
            ctx.close()
            pytest.skip("the default headless context runs on no CUDA device")

    def host(x):
        return np.from_dlpack(x) if backend == "cpu" else torch.from_dlpack(x).cpu().numpy()

    try:
        tex = GL.glGenTextures(1)
        GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
        data = np.arange(16 * 8 * 4, dtype=np.uint8).reshape(8, 16, 4)
        GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 1)
        GL.glTexImage2D(GL.GL_TEXTURE_2D, 0, GL.GL_RGBA8, 16, 8, 0, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, data)
        cap = gltensor.Capture(tex, backend=backend)
        frame = cap.read(flip=False)
        arr = np.from_dlpack(frame) if backend == "cpu" else torch.from_dlpack(frame)
        capsule = frame.__dlpack__()
    finally:
        ctx.close()
    del ctx
    gc.collect()
    assert_array_equal(host(frame), data)
    assert_array_equal(arr if backend == "cpu" else arr.cpu().numpy(), data)
    del capsule
    with pytest.raises(gltensor.GLTensorError):  # its context is gone: a clear error, never a crash
        cap.read()
    cap.close()


def test_interpreter_shutdown_with_live_frames(tmp_path):
    """Frames, capsules, arrays and captures still alive (some in reference cycles) when the interpreter exits:
    a clean exit, no crash in a destructor."""
    script = textwrap.dedent("""
        import os
        os.environ["PYOPENGL_PLATFORM"] = "egl"
        import numpy as np
        import gltensor
        from OpenGL import GL
        ctx = gltensor.Context.headless()
        tex = GL.glGenTextures(1)
        GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
        GL.glTexImage2D(GL.GL_TEXTURE_2D, 0, GL.GL_RGBA8, 64, 64, 0, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, None)
        cap = gltensor.Capture(tex)
        batch = gltensor.Batch([cap])
        frames = [cap.read() for _ in range(5)] + [batch.read()]
        capsules = [f.__dlpack__() for f in frames[:2]]
        if cap.backend == "cpu":
            arrays = [np.from_dlpack(f) for f in frames[2:4]]
        else:  # CUDA frames: consumed by torch where it is installed, else held through their capsules
            try:
                import torch
                arrays = [torch.from_dlpack(f) for f in frames[2:4]]
            except ImportError:
                arrays = [f.__dlpack__() for f in frames[2:4]]
        class Cycle: pass
        c = Cycle(); c.self = c; c.frame = frames[0]; c.cap = cap; c.ctx = ctx
        print("alive", len(frames), len(capsules), len(arrays), flush=True)
    """)
    # Under ASan, leak detection is off for this child: CPython does not free what is alive at exit, by design.
    asan = os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0"  # the last setting wins
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONFAULTHANDLER": "1", "ASAN_OPTIONS": asan})
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert "alive 6 2 2" in r.stdout
    assert "Fatal Python error" not in r.stderr and "Segmentation" not in r.stderr


@pytest.mark.sanitizer_distorts("an RSS bound: ASan's quarantine and shadow memory grow RSS on their own")
def test_10000_create_close_cycles_rss_flat(make_texture):
    """10,000 cycles each of a capture (read once), a batch and an atlas created and closed, and 200 contexts:
    RSS stays within 24 MiB (a leaked 32x32 frame per cycle alone would be 40 MiB)."""
    img = make_texture("RGBA8", 32, 32, seed=42)
    n = int(os.environ.get("GLTENSOR_CYCLES", "10000"))

    def cycles(k):
        for _ in range(k):
            cap = gltensor.Capture(img.name, backend="cpu")
            cap.read()
            cap.close()
            gltensor.Batch([img.name], backend="cpu").close()
            gltensor.Atlas(img.name, tiles=(2, 2), backend="cpu").close()

    cycles(300)
    gc.collect()
    before = rss_bytes()
    t0 = time.perf_counter()
    cycles(n)
    gc.collect()
    growth = rss_bytes() - before
    print(f"\n{n} capture+batch+atlas create/close cycles in {time.perf_counter() - t0:.1f} s: "
          f"RSS {growth / MiB:+.1f} MiB")
    assert growth < 24 * MiB, f"RSS grew by {growth / MiB:.1f} MiB over {n} cycles"
    check_gl()


@pytest.mark.sanitizer_distorts("an RSS bound: ASan's quarantine and shadow memory grow RSS on their own")
def test_200_context_cycles_rss_flat(gl):
    def cycles(k):
        for _ in range(k):
            gltensor.Context.headless().close()  # the default device: Mesa here, the NVIDIA GPU there
        gl.make_current()

    cycles(20)
    gc.collect()
    before = rss_bytes()
    cycles(200)
    gc.collect()
    growth = rss_bytes() - before
    print(f"\n200 context create/close cycles: RSS {growth / MiB:+.1f} MiB")
    assert growth < 32 * MiB, f"RSS grew by {growth / MiB:.1f} MiB over 200 contexts"


def _soak_reads():
    return int(os.environ.get("GLTENSOR_SOAK_READS", "20000"))


@pytest.mark.slow
@pytest.mark.sanitizer_distorts("an RSS bound: ASan's quarantine and shadow memory grow RSS on their own")
@pytest.mark.parametrize("backend", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_soak_reads_memory_flat(backend, ctx, make_texture, capture):
    """GLTENSOR_SOAK_READS reads (a mix: plain, converted, out=, batch, atlas, frames kept a few steps), with RSS
    (and device memory on CUDA) sampled through the run: the drift from the first tenth to the end stays within
    16 MiB on the host and 8 MiB on the device, and the last frame is still exact."""
    if backend == "cuda" and ctx.cuda_device is None:
        pytest.skip("the session context runs on no CUDA device")
    torch = None
    if backend == "cuda":
        torch = pytest.importorskip("torch", reason="device memory is measured with torch.cuda.mem_get_info")
    img = make_texture("RGBA8", 128, 96, seed=43)
    ref = img.reference()[::-1]
    cap = capture(img, backend=backend)
    batch = gltensor.Batch([cap, capture(make_texture("RGBA8", 128, 96, seed=44), backend=backend)])
    atlas = gltensor.Atlas(img.name, tiles=(2, 2), backend=backend)
    out = (np.zeros((96, 128, 4), np.uint8) if backend == "cpu"
           else torch.zeros((96, 128, 4), dtype=torch.uint8, device=f"cuda:{ctx.cuda_device}"))
    n = _soak_reads()
    kept = []

    def device_used():
        if torch is None:
            return 0
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info(ctx.cuda_device)
        return total - free

    def step(i):
        k = i % 8
        if k == 0:
            f = cap.read()
        elif k == 1:
            f = cap.read(dtype="float32", layout="chw")
        elif k == 2:
            cap.read(out=out)
            return
        elif k == 3:
            f = batch.read()
        elif k == 4:
            f = atlas.read()
        elif k == 5:
            f = cap.read(channels="bgr", flip=False)
        else:
            f = cap.read()
        kept.append(f)
        if len(kept) > 4:
            kept.pop(0)

    for i in range(max(n // 20, 200)):
        step(i)
    gc.collect()
    samples = []
    t0 = time.perf_counter()
    for i in range(n):
        step(i)
        if i % max(n // 10, 1) == 0:
            samples.append((rss_bytes(), device_used()))
    gc.collect()
    samples.append((rss_bytes(), device_used()))
    elapsed = time.perf_counter() - t0
    rss_drift = samples[-1][0] - samples[0][0]
    dev_drift = samples[-1][1] - samples[0][1]
    print(f"\nsoak {backend}: {n} reads in {elapsed:.1f} s ({n / elapsed:.0f}/s); RSS drift {rss_drift / MiB:+.2f} MiB "
          f"(max {max(s[0] for s in samples) / MiB:.1f} MiB)" + (f", device memory drift {dev_drift / MiB:+.2f} MiB"
                                                               if torch else ""))
    assert rss_drift < 16 * MiB, f"RSS grew by {rss_drift / MiB:.1f} MiB over {n} reads"
    assert dev_drift < 8 * MiB, f"device memory grew by {dev_drift / MiB:.1f} MiB over {n} reads"
    last = cap.read()
    if backend == "cpu":
        assert_array_equal(np.from_dlpack(last), ref)
        assert_array_equal(out, ref)
    else:
        assert_array_equal(torch.from_dlpack(last).cpu().numpy(), ref)
    batch.close()
    atlas.close()
    check_gl()


def test_capsule_consumed_twice_or_never(make_texture, capture):
    """A capsule is consumed once (a second consumer is refused by the consumer, the first tensor stays right);
    a capsule never consumed frees its hold on the frame (the frame dies with its last reference)."""
    import weakref

    img = make_texture("RGBA8", 16, 8, seed=45)
    ref = img.reference()[::-1]
    cap = capture(img, backend="cpu")
    frame = cap.read()
    base = sys.getrefcount(frame)
    for _ in range(100):  # never consumed
        frame.__dlpack__()
        frame.__dlpack__(max_version=(1, 0))
    gc.collect()
    assert sys.getrefcount(frame) == base
    alive = weakref.ref(frame)
    torch = pytest.importorskip("torch", reason="consuming a bare capsule takes torch.utils.dlpack")
    capsule = frame.__dlpack__()
    t = torch.utils.dlpack.from_dlpack(capsule)
    with pytest.raises(Exception):  # torch renames a consumed capsule and refuses it
        torch.utils.dlpack.from_dlpack(capsule)
    del frame, capsule
    gc.collect()
    assert alive() is not None, "the tensor must keep the frame alive"
    assert_array_equal(t.numpy(), ref)
    del t
    gc.collect()
    assert alive() is None, "the frame outlived its last consumer"


# The test forks on purpose (what it checks is what survives a fork); Python 3.12 warns about any fork of a process
# with threads (torch's, the driver's): not a warning of gltensor's.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded, use of fork:DeprecationWarning")
def test_cpu_frames_survive_fork(make_texture, capture):
    """A forked child inherits CPU frames as plain memory: it reads them (copy-on-write), and its exit frees
    nothing of the parent's. (Contexts and captures are not usable in a child: it makes its own.)"""
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    img = make_texture("RGBA8", 32, 16, seed=46)
    ref = img.reference()[::-1]
    cap = capture(img, backend="cpu")
    frame = cap.read()
    arr = np.from_dlpack(frame)
    want = int(ref.astype(np.int64).sum())
    pid = os.fork()
    if pid == 0:  # the child: no pytest machinery, leave with a status only
        code = 0 if int(np.from_dlpack(frame).astype(np.int64).sum()) == want else 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child status {status}"
    assert_array_equal(arr, ref)
    assert_array_equal(np.from_dlpack(cap.read()), ref)
