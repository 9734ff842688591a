"""Several GPUs: every read is right on every CUDA device, whatever device the caller has current.

v0.1 worked on CUDA device 0 only: a capture on device 1 allocated its frames on the caller's current
device, and the copy kernel wrote into another GPU's memory (an illegal access at the first torch op).
Each test here runs a capture on device d while torch's current device is the *other* GPU, so any CUDA
call that runs on "whatever is current" lands on the wrong GPU and fails (run under compute-sanitizer
memcheck on the GPU machine to see wrong-device accesses that do not fault).

Marked `multigpu` (skipped with fewer than two CUDA devices) and `gpu`.
"""
import gc
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

import glhelpers
from formats import random_data

gltensor = pytest.importorskip("gltensor")
torch = pytest.importorskip("torch", reason="the multi-GPU tests consume frames with torch")
from OpenGL import GL  # noqa: E402

pytestmark = [pytest.mark.multigpu, pytest.mark.gpu]

ROOT = Path(__file__).resolve().parent.parent
DEVICES = [0, 1]


@pytest.fixture(scope="module")
def contexts():
    """One headless context per GPU for the module (each current only while a test uses it)."""
    made = {d: gltensor.Context.headless(cuda_device=d) for d in DEVICES}
    for d, c in made.items():
        assert c.cuda_device == d, f"Context.headless(cuda_device={d}) runs on CUDA device {c.cuda_device}"
    yield made
    gc.collect()
    for c in made.values():
        c.close()


class OnGpu:
    """A test's view of one GPU: its context made current, torch working on the other GPU."""

    def __init__(self, dev, ctx):
        self.dev, self.other, self.ctx = dev, 1 - dev, ctx
        self.torch_device = torch.device("cuda", dev)
        self._images, self._caps = [], []

    def image(self, key, w, h, seed=0, target=GL.GL_TEXTURE_2D):
        img = glhelpers.Image(key, w, h, target=target, seed=seed)
        self._images.append(img)
        return img

    def surface(self, internal, w, h, target=GL.GL_TEXTURE_2D, samples=0):
        s = glhelpers.Surface(internal, w, h, target, samples)
        self._images.append(s)
        return s

    def keep(self, obj):
        self._caps.append(obj)
        return obj

    def consume(self, frame, stream=None, caller_device=None):
        """The frame as torch sees it, after a torch op on it (where v0.1's corruption surfaced).

        caller_device: the device the caller has current here, the other GPU unless the caller made
        another current itself (inside `with torch.cuda.stream(s)` torch makes s's device current).
        The library must leave it as it is, through the read that made `frame` and the export."""
        expected = self.other if caller_device is None else caller_device
        assert torch.cuda.current_device() == expected, "the library changed the caller's current device (read)"
        t = torch.from_dlpack(frame) if stream is None else torch.from_dlpack(frame.__dlpack__(stream=stream))
        assert torch.cuda.current_device() == expected, "the library changed the caller's current device (export)"
        assert t.device == self.torch_device, f"frame of a device-{self.dev} capture is on {t.device}"
        checksum = t.double().sum()
        torch.cuda.synchronize(self.dev)
        arr = glhelpers.torch_to_numpy(t)
        assert np.isclose(float(checksum), arr.astype(np.float64).sum(), rtol=1e-6)
        return arr

    def close(self):
        self.ctx.make_current()
        gc.collect()
        for c in self._caps:
            c.close()
        for i in self._images:
            i.delete()


@pytest.fixture(params=DEVICES, ids=lambda d: f"gpu{d}")
def on_gpu(request, contexts):
    dev = request.param
    previous = torch.cuda.current_device()
    torch.cuda.set_device(1 - dev)  # the caller works on the other GPU (a neighbour rank's, torch's default...)
    contexts[dev].make_current()
    env = OnGpu(dev, contexts[dev])
    yield env
    env.close()
    torch.cuda.synchronize(dev)  # a wrong-device write would surface here as an illegal address
    torch.cuda.set_device(previous)


def upright(ref, flip=True):
    return ref[::-1] if flip else ref


# ---------------------------------------------------------------- the matrix, on each GPU


@pytest.mark.parametrize("flip", [True, False], ids=["flip", "noflip"])
@pytest.mark.parametrize("key", ["RGBA8", "RGB8", "R8", "RG8", "RGBA16F", "RGBA32F", "R32F", "RGBA16"])
def test_formats_and_flip(on_gpu, key, flip):
    img = on_gpu.image(key, 37, 21, seed=3)
    cap = on_gpu.keep(gltensor.Capture(img.name, GL.GL_TEXTURE_2D))
    assert cap.backend == "cuda" and cap.cuda_device == on_gpu.dev
    got = on_gpu.consume(cap.read(flip=flip))
    np.testing.assert_array_equal(got, upright(img.reference(), flip))


@pytest.mark.parametrize("target", [GL.GL_TEXTURE_2D, GL.GL_RENDERBUFFER], ids=["texture", "renderbuffer"])
def test_conversions_in_the_copy(on_gpu, target):
    img = on_gpu.image("RGBA8", 40, 24, seed=5, target=target)
    cap = on_gpu.keep(gltensor.Capture(img.name, target))
    got = on_gpu.consume(cap.read(channels="rgb", dtype="float32", layout="chw"))
    want = upright(img.reference())[..., :3].astype(np.float32) / 255.0
    np.testing.assert_allclose(got, want.transpose(2, 0, 1), rtol=0, atol=1e-6)
    bgr = on_gpu.consume(cap.read(channels="bgr"))
    np.testing.assert_array_equal(bgr, upright(img.reference())[..., [2, 1, 0]])


@pytest.mark.parametrize("key", ["DEPTH_COMPONENT32F", "DEPTH_COMPONENT24", "DEPTH24_STENCIL8"])
def test_depth(on_gpu, key):
    depth = on_gpu.surface(key, 64, 32)
    with glhelpers.Target(depth) as t:
        glhelpers.draw_planes(t, [0.5, 2.0, 7.0, 30.0], near=0.1, far=100.0)
    cap = on_gpu.keep(gltensor.Capture(depth.name, GL.GL_TEXTURE_2D))
    got = on_gpu.consume(cap.read())
    np.testing.assert_array_equal(got, upright(glhelpers.read_depth(depth)))
    linear = on_gpu.consume(cap.read(depth="linear", near=0.1, far=100.0))
    assert linear.shape == got.shape and np.all(np.isfinite(linear))


def test_msaa_resolve(on_gpu):
    ms = on_gpu.surface("RGBA8", 48, 40, target=glhelpers.GL_TEXTURE_2D_MULTISAMPLE, samples=4)
    with glhelpers.Target(ms) as t:
        glhelpers.draw_triangles(t, seed=2)
    cap = on_gpu.keep(gltensor.Capture(ms.name, glhelpers.GL_TEXTURE_2D_MULTISAMPLE))
    got = on_gpu.consume(cap.read())
    np.testing.assert_array_equal(got, upright(glhelpers.resolve(ms)))


def test_out_tensor_on_the_captures_device(on_gpu):
    img = on_gpu.image("RGBA8", 33, 17, seed=7)
    cap = on_gpu.keep(gltensor.Capture(img.name, GL.GL_TEXTURE_2D))
    out = torch.zeros((17, 33, 4), dtype=torch.uint8, device=on_gpu.torch_device)
    stream = torch.cuda.current_stream(on_gpu.dev)
    assert cap.read(out=out, stream=stream) is out
    torch.cuda.synchronize(on_gpu.dev)
    np.testing.assert_array_equal(out.cpu().numpy(), upright(img.reference()))
    wrong = torch.zeros((17, 33, 4), dtype=torch.uint8, device=torch.device("cuda", on_gpu.other))
    with pytest.raises(gltensor.InvalidArgumentError, match=f"cuda:{on_gpu.dev}"):
        cap.read(out=wrong)


def test_streams_of_the_captures_device(on_gpu):
    img = on_gpu.image("RGBA8", 64, 64, seed=9)
    cap = on_gpu.keep(gltensor.Capture(img.name, GL.GL_TEXTURE_2D))
    s = torch.cuda.Stream(device=on_gpu.dev)
    frame = cap.read(stream=s)
    with torch.cuda.stream(s):
        # torch, not the library, makes s's device current for the block
        got = on_gpu.consume(frame, stream=s.cuda_stream, caller_device=on_gpu.dev)
    assert torch.cuda.current_device() == on_gpu.other  # torch restored the caller's device at the block's end
    np.testing.assert_array_equal(got, upright(img.reference()))
    # A consumer stream other than the copy's, passed outside any `with torch.cuda.stream`: the frame's event
    # orders it (on the frame's device), and the caller's current device stays the other GPU throughout.
    consumer = torch.cuda.Stream(device=on_gpu.dev)
    np.testing.assert_array_equal(on_gpu.consume(cap.read(), stream=consumer.cuda_stream), upright(img.reference()))
    frame = cap.read(stream=consumer)
    assert torch.cuda.current_device() == on_gpu.other, "the library changed the caller's current device"
    np.testing.assert_array_equal(on_gpu.consume(frame, stream=consumer.cuda_stream), upright(img.reference()))
    foreign = torch.cuda.Stream(device=on_gpu.other)
    with pytest.raises(gltensor.InvalidArgumentError, match=f"device {on_gpu.other}"):
        cap.read(stream=foreign)
    assert torch.cuda.current_device() == on_gpu.other, "a refused read changed the caller's current device"


def test_batch(on_gpu):
    imgs = [on_gpu.image("RGBA8", 24, 16, seed=20 + k) for k in range(8)]
    batch = on_gpu.keep(gltensor.Batch([i.name for i in imgs], GL.GL_TEXTURE_2D))
    got = on_gpu.consume(batch.read())
    assert got.shape == (8, 16, 24, 4)
    for k, img in enumerate(imgs):
        np.testing.assert_array_equal(got[k], upright(img.reference()))
    conv = on_gpu.consume(batch.read(channels="rgb", dtype="float32", layout="chw"))
    np.testing.assert_allclose(conv[3], upright(imgs[3].reference())[..., :3].transpose(2, 0, 1) / 255.0, atol=1e-6)


def test_atlas(on_gpu):
    img = on_gpu.image("RGBA8", 6 * 20, 2 * 12, seed=31)
    atlas = on_gpu.keep(gltensor.Atlas(img.name, GL.GL_TEXTURE_2D, tiles=(2, 6)))
    got = on_gpu.consume(atlas.read())
    ref = img.reference()
    assert got.shape == (12, 12, 20, 4)
    for k in range(12):
        x, y, w, h = atlas.viewport(k)
        np.testing.assert_array_equal(got[k], ref[y:y + h, x:x + w][::-1])


# ---------------------------------------------------------------- shared slots on each GPU


@pytest.mark.parametrize("dev", DEVICES, ids=lambda d: f"gpu{d}")
def test_shared_slots_on_each_gpu(dev):
    """Slots on GPU `dev` while the trainer's torch works on the other GPU: the workers (spawned, GL only) find
    the slots' GPU by its UUID, every pixel of every slot is exact, and the frames live on `dev`."""
    from test_slots import H, W, Workers, expected

    previous = torch.cuda.current_device()
    torch.cuda.set_device(1 - dev)
    slots = gltensor.SharedSlots(3, (W, H), backend="cuda", cuda_device=dev)
    workers = Workers(slots)
    try:
        assert slots.cuda_device == dev
        for step in range(3):
            workers.all("step", step)
            t = torch.from_dlpack(slots.read())
            assert t.device == torch.device("cuda", dev)
            assert torch.cuda.current_device() == 1 - dev, "the library changed the caller's current device"
            np.testing.assert_array_equal(t.cpu().numpy(), expected(3, step), err_msg=f"step {step}")
    finally:
        workers.close()
        slots.close()
        torch.cuda.synchronize(dev)
        torch.cuda.set_device(previous)


@pytest.mark.parametrize("dev", DEVICES, ids=lambda d: f"gpu{d}")
def test_zero_copy_views_on_each_gpu(dev):
    """Zero-copy reads of slots on GPU `dev` while torch works on the other GPU: every pixel of every view exact,
    the view on `dev` (the slots themselves), the previous step's view intact while the loop keeps it, the
    caller's device left alone, and a view consumed on a side stream of `dev` holding its set from the writers."""
    from test_slots import H, W, Workers, expected

    previous = torch.cuda.current_device()
    torch.cuda.set_device(1 - dev)
    slots = gltensor.SharedSlots(3, (W, H), backend="cuda", cuda_device=dev)
    workers = Workers(slots)
    side = torch.cuda.Stream(device=dev)
    try:
        prev = None
        for step in range(4):
            workers.all("step", step)
            with torch.cuda.stream(side):  # handed to torch on a stream of `dev`
                t = torch.from_dlpack(slots.read(copy=False))
            assert t.device == torch.device("cuda", dev)
            assert t.stride() == (slots.slot_bytes, slots.row_pitch, 4, 1)
            assert torch.cuda.current_device() == 1 - dev, "the library changed the caller's current device"
            side.synchronize()
            np.testing.assert_array_equal(t.cpu().numpy(), expected(3, step), err_msg=f"step {step}")
            if prev is not None:
                np.testing.assert_array_equal(prev.cpu().numpy(), expected(3, step - 1), err_msg=f"step {step - 1}")
            prev = t
        del t, prev
    finally:
        workers.close()
        slots.close()
        torch.cuda.synchronize(dev)
        torch.cuda.set_device(previous)


@pytest.mark.parametrize("dev", DEVICES, ids=lambda d: f"gpu{d}")
def test_frame_memory_reused_on_another_stream_of_each_gpu(contexts, dev):
    """tests/test_slots.py's reuse test on GPU `dev`, torch working on the other GPU: a frame consumed on `dev`'s
    default stream, its memory reused by a read on a side stream of `dev`, which must wait for that consumer."""
    previous = torch.cuda.current_device()
    torch.cuda.set_device(1 - dev)
    contexts[dev].make_current()
    w, h, count = 256, 128, 2
    slots = gltensor.SharedSlots(count, (w, h), backend="cuda", cuda_device=dev)
    side = torch.cuda.Stream(device=dev)
    rng = np.random.default_rng(11 + dev)
    kept = []
    try:
        for step in range(10):
            first = rng.integers(0, 256, (count, h, w, 4), np.uint8)
            for i in range(count):
                slots.write_host(i, first[i])
            frame = slots.read()
            with torch.cuda.device(dev):
                t = torch.from_dlpack(frame)
                for i in range(count):
                    slots.write_host(i, rng.integers(0, 256, (h, w, 4), np.uint8))
                torch.cuda._sleep(10_000_000)
                consumed = t.to(torch.int32) + 1  # on dev's default stream, behind the sleep
            ptr = t.data_ptr()
            del frame, t
            nxt = slots.read(stream=side)
            assert torch.from_dlpack(nxt).data_ptr() == ptr
            kept.append((consumed, first, nxt))
        torch.cuda.synchronize(dev)
        for step, (consumed, first, _) in enumerate(kept):
            np.testing.assert_array_equal(consumed.cpu().numpy(), first.astype(np.int32) + 1, err_msg=f"step {step}")
    finally:
        del kept
        slots.close()
        torch.cuda.set_device(previous)


def test_frames_outlive_capture_and_context_released_elsewhere():
    """Frames of a device-1 capture freed after the capture and its context are gone, from another thread
    whose current device is 0: their memory goes back to device 1 (memcheck sees a wrong-device free)."""
    previous = torch.cuda.current_device()
    ctx = gltensor.Context.headless(cuda_device=1)
    try:
        img = glhelpers.Image("RGBA8", 32, 32, seed=41)
        want = img.reference()[::-1]
        cap = gltensor.Capture(img.name, GL.GL_TEXTURE_2D)
        frames = [cap.read() for _ in range(6)]
        tensors = [torch.from_dlpack(f) for f in frames[:2]]
        cap.close()
        img.delete()
    finally:
        ctx.close()
    torch.cuda.set_device(0)

    def release():
        torch.cuda.set_device(0)
        frames.clear()
        gc.collect()

    t = threading.Thread(target=release)
    t.start()
    t.join()
    for x in tensors:
        assert x.device == torch.device("cuda", 1)
        np.testing.assert_array_equal(x.cpu().numpy(), want)
    tensors.clear()
    gc.collect()
    torch.cuda.synchronize(1)
    torch.cuda.synchronize(0)
    assert torch.cuda.current_device() == 0
    torch.cuda.set_device(previous)


# ---------------------------------------------------------------- contexts on several GPUs at once


def test_two_contexts_alternating_reads(contexts):
    previous = torch.cuda.current_device()
    imgs, caps = {}, {}
    for d in DEVICES:
        contexts[d].make_current()
        imgs[d] = glhelpers.Image("RGBA8", 50, 30, seed=d)
        caps[d] = gltensor.Capture(imgs[d].name, GL.GL_TEXTURE_2D)
    try:
        for step in range(12):
            for d in DEVICES:
                torch.cuda.set_device(1 - d)
                contexts[d].make_current()
                data = random_data(imgs[d].fmt, 50, 30, seed=100 * step + d)
                imgs[d].upload(data)
                t = torch.from_dlpack(caps[d].read(flip=False))
                assert t.device == torch.device("cuda", d)
                np.testing.assert_array_equal(t.cpu().numpy(), data)
    finally:
        for d in DEVICES:
            contexts[d].make_current()
            caps[d].close()
            imgs[d].delete()
        torch.cuda.set_device(previous)


def test_one_thread_per_gpu_reading_concurrently():
    errors, counts = [], {}

    def worker(dev):
        try:
            torch.cuda.set_device(1 - dev)
            with gltensor.Context.headless(cuda_device=dev) as ctx:
                assert ctx.cuda_device == dev
                img = glhelpers.Image("RGBA8", 128, 96, seed=dev)
                batch_imgs = [glhelpers.Image("RGBA8", 32, 32, seed=10 * dev + k) for k in range(16)]
                cap = gltensor.Capture(img.name, GL.GL_TEXTURE_2D)
                batch = gltensor.Batch([i.name for i in batch_imgs], GL.GL_TEXTURE_2D)
                n = 0
                for step in range(150):
                    if step % 25 == 0:
                        data = random_data(img.fmt, 128, 96, seed=1000 * dev + step)
                        img.upload(data)
                    frame = torch.from_dlpack(cap.read(flip=False))
                    frames = torch.from_dlpack(batch.read())
                    assert frame.device.index == dev and frames.device.index == dev
                    if step % 25 == 0:
                        np.testing.assert_array_equal(frame.cpu().numpy(), data)
                        np.testing.assert_array_equal(frames[5].cpu().numpy(), batch_imgs[5].reference()[::-1])
                    n += 1
                torch.cuda.synchronize(dev)
                cap.close()
                batch.close()
                for i in [img, *batch_imgs]:
                    i.delete()
                counts[dev] = n
        except BaseException as exc:  # reported by the main thread
            errors.append((dev, repr(exc)))

    threads = [threading.Thread(target=worker, args=(d,)) for d in DEVICES]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    assert counts == {0: 150, 1: 150}


# ---------------------------------------------------------------- device selection, in fresh processes

_PROBE = textwrap.dedent("""
    import json, os, sys
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
    sys.path.insert(0, sys.argv[1])
    import numpy as np
    import gltensor, glhelpers
    from OpenGL import GL
    out = {"default": gltensor.default_cuda_device()}
    if os.environ.get("PROBE_TORCH_DEVICE"):
        import torch
        torch.cuda.set_device(int(os.environ["PROBE_TORCH_DEVICE"]))
        out["default_after_torch"] = gltensor.default_cuda_device()
    arg = os.environ.get("PROBE_CUDA_DEVICE")
    ctx = gltensor.Context.headless(cuda_device=None if arg is None else int(arg))
    out["context"] = ctx.cuda_device
    img = glhelpers.Image("RGBA8", 16, 8, seed=1)
    cap = gltensor.Capture(img.name, GL.GL_TEXTURE_2D)
    frame = cap.read()
    import torch
    t = torch.from_dlpack(frame)
    out["frame_device"] = t.device.index
    out["equal"] = bool(np.array_equal(t.cpu().numpy(), img.reference()[::-1]))
    out["egl_index"] = [gltensor.egl_device_index(d) for d in range(torch.cuda.device_count())]
    out["visible"] = torch.cuda.device_count()
    out["uuid"] = str(torch.cuda.get_device_properties(ctx.cuda_device).uuid)
    print("PROBE" + json.dumps(out))
""")


def _probe(**env):
    full = dict(os.environ)
    for k in ("CUDA_VISIBLE_DEVICES", "LOCAL_RANK", "PROBE_CUDA_DEVICE", "PROBE_TORCH_DEVICE"):
        full.pop(k, None)
    full.update({k: str(v) for k, v in env.items()})
    r = subprocess.run([sys.executable, "-c", _PROBE, str(ROOT / "tests")], env=full, capture_output=True, text=True,
                       timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    line = next(x for x in r.stdout.splitlines() if x.startswith("PROBE"))
    return json.loads(line[5:])


@pytest.fixture(scope="module")
def uuids():
    """Physical identity of each GPU as this process numbers them (no CUDA_VISIBLE_DEVICES here)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES"):
        pytest.skip("run without CUDA_VISIBLE_DEVICES: the probes renumber devices themselves")
    return [str(torch.cuda.get_device_properties(d).uuid) for d in DEVICES]


def test_default_device_is_0_without_launcher(uuids):
    p = _probe()
    assert p["default"] == 0 and p["context"] == 0 and p["frame_device"] == 0 and p["equal"]


def test_local_rank_picks_the_ranks_gpu(uuids):
    p = _probe(LOCAL_RANK=1)
    assert p["default"] == 1 and p["context"] == 1 and p["frame_device"] == 1 and p["equal"]
    assert p["uuid"] == uuids[1]


def test_torch_current_device_wins_once_torch_uses_cuda(uuids):
    p = _probe(LOCAL_RANK=0, PROBE_TORCH_DEVICE=1)
    assert p["default"] == 0 and p["default_after_torch"] == 1 and p["context"] == 1 and p["uuid"] == uuids[1]


@pytest.mark.parametrize("visible, named, physical", [
    ("1", None, 1),      # one GPU visible: it is device 0 for CUDA, torch and gltensor
    ("1,0", None, 1),    # reordered: device 0 is the second GPU
    ("1,0", 1, 0),       # ... and device 1 the first
    ("0,1", 1, 1),
])
def test_cuda_visible_devices_permutations(uuids, visible, named, physical):
    env = {"CUDA_VISIBLE_DEVICES": visible}
    if named is not None:
        env["PROBE_CUDA_DEVICE"] = named
    p = _probe(**env)
    want = 0 if named is None else named
    assert p["context"] == want and p["frame_device"] == want and p["equal"], p
    assert p["uuid"] == uuids[physical], f"CUDA_VISIBLE_DEVICES={visible}: context on the wrong physical GPU"
    assert len(set(p["egl_index"])) == p["visible"], p


def test_local_rank_with_one_visible_gpu_per_rank(uuids):
    p = _probe(CUDA_VISIBLE_DEVICES="1", LOCAL_RANK=1)
    assert p["default"] == 0 and p["context"] == 0 and p["uuid"] == uuids[1]


def test_local_rank_beyond_the_visible_gpus_is_refused():
    env = dict(os.environ, LOCAL_RANK="7")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    r = subprocess.run([sys.executable, "-c", "import gltensor; gltensor.Context.headless()"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "LOCAL_RANK=7" in r.stderr and "CUDA_VISIBLE_DEVICES" in r.stderr


def test_a_rank_on_gpu1_makes_no_cuda_context_on_gpu0():
    """Nothing the library does for a device-1 capture may initialise device 0 (each rank would otherwise
    hold memory on GPU 0, the classic multi-GPU leak). Checked with NVML from a fresh process."""
    pynvml = pytest.importorskip("pynvml")
    script = textwrap.dedent("""
        import os, sys, time
        os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
        sys.path.insert(0, sys.argv[1])
        import gltensor, glhelpers
        from OpenGL import GL
        ctx = gltensor.Context.headless(cuda_device=1)
        img = glhelpers.Image("RGBA8", 64, 64, seed=1)
        cap = gltensor.Capture(img.name, GL.GL_TEXTURE_2D)
        b = gltensor.Batch([img.name], GL.GL_TEXTURE_2D)
        frames = [cap.read(), b.read(), cap.read(channels="rgb", dtype="float32")]
        frames[0].synchronize()
        del frames
        print("READY", flush=True)
        sys.stdin.readline()
    """)
    p = subprocess.Popen([sys.executable, "-c", script, str(ROOT / "tests")], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("READY"), p.stderr.read()[-3000:]
        pynvml.nvmlInit()
        try:
            def pids(index):
                h = pynvml.nvmlDeviceGetHandleByIndex(index)
                procs = pynvml.nvmlDeviceGetComputeRunningProcesses(h) + pynvml.nvmlDeviceGetGraphicsRunningProcesses(h)
                return {x.pid for x in procs}
            on0, on1 = pids(0), pids(1)
        finally:
            pynvml.nvmlShutdown()
        if p.pid not in on1:
            pytest.skip(f"NVML does not list this machine's processes by their pid (GPU 1 lists {sorted(on1)})")
        assert p.pid not in on0, "the device-1 process holds a context on GPU 0"
    finally:
        p.communicate("\n", timeout=60)


# ---------------------------------------------------------------- engines on the rank's GPU


@pytest.mark.parametrize("dev", DEVICES)
def test_egl_device_index_drives_moderngl_to_the_gpu(dev):
    moderngl = pytest.importorskip("moderngl")
    idx = gltensor.egl_device_index(dev)
    mgl = moderngl.create_context(standalone=True, backend="egl", device_index=idx, require=330)
    try:
        tex = mgl.texture((16, 16), 4)
        tex.write(np.arange(16 * 16 * 4, dtype=np.uint8).tobytes())
        cap = gltensor.Capture(tex.glo, gltensor.GL_TEXTURE_2D)
        assert cap.cuda_device == dev, f"EGL device {idx} runs on CUDA device {cap.cuda_device}, not {dev}"
        t = torch.from_dlpack(cap.read(flip=False))
        np.testing.assert_array_equal(t.cpu().numpy().ravel(), np.arange(16 * 16 * 4, dtype=np.uint8))
        cap.close()
    finally:
        mgl.release()


@pytest.mark.parametrize("dev", DEVICES)
def test_egl_device_index_drives_mujoco_to_the_gpu(dev):
    pytest.importorskip("mujoco")
    script = textwrap.dedent("""
        import os, sys
        import gltensor
        os.environ["MUJOCO_GL"] = "egl"
        os.environ["MUJOCO_EGL_DEVICE_ID"] = str(gltensor.egl_device_index(int(sys.argv[1])))
        import mujoco, gltensor.mujoco
        model = mujoco.MjModel.from_xml_string("<mujoco><worldbody><light pos='0 0 3'/><geom type='box' size='.2 .2 .2'/></worldbody></mujoco>")
        data = mujoco.MjData(model)
        r = mujoco.Renderer(model, 48, 64)
        cap = gltensor.mujoco.RendererCapture(r)
        print("DEVICE", cap.capture.cuda_device)
    """)
    r = subprocess.run([sys.executable, "-c", script, str(dev)], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"DEVICE {dev}" in r.stdout, r.stdout
