"""CUDA backend: consumers (torch, CuPy, JAX, Numba), out= on the GPU, streams, and steady-state memory.

The pixel-exact format matrix already runs on CUDA through the `backend` parametrisation; this file
adds what only a GPU has. Every test is skipped when gltensor.cuda_available() is False.
"""

import gc

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from OpenGL import GL

import gltensor
from formats import BY_KEY, random_data
from glhelpers import check_gl, rss_bytes, torch_to_numpy

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("gl")]

MiB = 1 << 20


@pytest.fixture(autouse=True)
def _gl_on_cuda(ctx):
    if ctx.cuda_device is None:
        pytest.skip(f"the session GL context ({ctx.renderer}) runs on no CUDA device")


@pytest.fixture
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    return torch


@pytest.fixture
def cuda_rgba(ctx, make_texture, capture):
    img = make_texture("RGBA8", 37, 21, seed=11)
    cap = capture(img, backend="cuda")
    return img, cap


def test_cuda_properties(ctx, cuda_rgba):
    img, cap = cuda_rgba
    assert cap.backend == "cuda"
    assert cap.cuda_device == (ctx.cuda_device if ctx.cuda_device is not None else 0)
    frame = cap.read()
    assert frame.device == f"cuda:{cap.cuda_device}"
    assert frame.__dlpack_device__() == (2, cap.cuda_device)
    # The one truth the README, docs/python-api.md and gltensor.h state: without stream= the copy is issued on
    # CUDA's legacy default stream (handle 1), the stream torch and CuPy use unless told otherwise.
    assert frame.stream == 1
    assert cap.read(stream=0).stream == 1  # 0, torch's name for the default stream, means the same
    assert not hasattr(frame, "__array_interface__")
    frame.synchronize()


def test_cuda_array_interface(cuda_rgba):
    img, cap = cuda_rgba
    frame = cap.read(flip=False)
    cai = frame.__cuda_array_interface__
    assert cai["version"] == 3
    assert "stream" in cai
    assert tuple(cai["shape"]) == (21, 37, 4)
    assert np.dtype(cai["typestr"]) == np.uint8
    ptr, readonly = cai["data"]
    assert ptr == frame.data_ptr
    assert readonly is False
    assert cai.get("strides") in (None, (37 * 4, 4, 1))


def test_torch_consumer(torch, ctx, cuda_rgba):
    img, cap = cuda_rgba
    frame = cap.read(flip=False)
    t = torch.from_dlpack(frame)
    assert t.is_cuda and t.device.index == cap.cuda_device
    assert t.data_ptr() == frame.data_ptr
    assert tuple(t.shape) == (21, 37, 4) and t.dtype == torch.uint8
    assert_array_equal(t.cpu().numpy(), img.reference())


def test_torch_consumer_versioned_and_legacy(torch, cuda_rgba):
    img, cap = cuda_rgba
    frame = cap.read(flip=False)
    ref = img.reference()
    for capsule in (frame.__dlpack__(stream=-1), frame.__dlpack__(stream=-1, max_version=(1, 0))):
        torch.cuda.synchronize()
        assert_array_equal(torch.from_dlpack(capsule).cpu().numpy(), ref)


def test_dlpack_wrong_device_refused(cuda_rgba):
    _, cap = cuda_rgba
    frame = cap.read()
    with pytest.raises(BufferError):
        frame.__dlpack__(dl_device=(1, 0))
    with pytest.raises(BufferError):
        frame.__dlpack__(dl_device=(2, cap.cuda_device + 1))


def test_cupy_consumer(cuda_rgba):
    cp = pytest.importorskip("cupy")
    img, cap = cuda_rgba
    ref = img.reference()
    frame = cap.read(flip=False)
    a = cp.from_dlpack(frame)
    assert a.data.ptr == frame.data_ptr
    assert_array_equal(cp.asnumpy(a), ref)
    b = cp.asarray(frame)  # through __cuda_array_interface__
    assert b.data.ptr == frame.data_ptr
    assert_array_equal(cp.asnumpy(b), ref)


def test_jax_consumer(cuda_rgba):
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    try:
        jax.devices("gpu")
    except RuntimeError:
        pytest.skip("jax has no GPU backend here")
    img, cap = cuda_rgba
    ref = img.reference()
    frame = cap.read(flip=False)
    frame.synchronize()
    assert_array_equal(np.asarray(jnp.from_dlpack(frame)), ref)
    from jax import dlpack as jdl

    frame2 = cap.read(flip=False)
    frame2.synchronize()
    assert_array_equal(np.asarray(jdl.from_dlpack(frame2)), ref)


def test_numba_consumer(cuda_rgba):
    numba_cuda = pytest.importorskip("numba.cuda")
    if not numba_cuda.is_available():
        pytest.skip("numba.cuda cannot use the GPU here")
    img, cap = cuda_rgba
    frame = cap.read(flip=False)
    frame.synchronize()
    d = numba_cuda.as_cuda_array(frame)
    assert d.shape == (21, 37, 4)
    assert d.__cuda_array_interface__["data"][0] == frame.data_ptr
    assert_array_equal(d.copy_to_host(), img.reference())


# ---------------------------------------------------------------- out=


@pytest.mark.parametrize("key", ["RGBA8", "R32F", "RGBA16F", "RG8UI"])
def test_out_torch_cuda(torch, key, make_texture, capture):
    fmt = BY_KEY[key]
    img = make_texture(fmt, 19, 11, seed=12)
    cap = capture(img, backend="cuda")
    ref = img.reference()
    tdt = {"uint8": torch.uint8, "float32": torch.float32, "float16": torch.float16}[fmt.dtype]
    out = torch.zeros((11, 19, fmt.channels), dtype=tdt, device=f"cuda:{cap.cuda_device}")
    s = torch.cuda.current_stream()
    assert cap.read(flip=False, out=out, stream=s) is out
    assert_array_equal(torch_to_numpy(out), ref)
    # default stream argument: the data must still be correct once the device is synchronised
    out.zero_()
    torch.cuda.synchronize()
    assert cap.read(flip=True, out=out) is out
    torch.cuda.synchronize()
    assert_array_equal(torch_to_numpy(out), ref[::-1])


def test_out_torch_cuda_padded_rows(torch, make_texture, capture):
    img = make_texture("RGBA8", 30, 12, seed=13)
    cap = capture(img, backend="cuda")
    big = torch.full((12, 41, 4), 9, dtype=torch.uint8, device=f"cuda:{cap.cuda_device}")
    view = big[:, 5:35]
    assert not view.is_contiguous()
    assert cap.read(flip=False, out=view, stream=torch.cuda.current_stream()) is view
    torch.cuda.synchronize()
    assert_array_equal(view.cpu().numpy(), img.reference())
    assert (big[:, :5] == 9).all() and (big[:, 35:] == 9).all()


def test_out_cpu_tensor_on_cuda_capture(torch, cuda_rgba):
    img, cap = cuda_rgba
    with pytest.raises(gltensor.InvalidArgumentError):
        cap.read(out=torch.zeros((21, 37, 4), dtype=torch.uint8))
    with pytest.raises(gltensor.InvalidArgumentError):
        cap.read(out=np.zeros((21, 37, 4), np.uint8))


def test_out_cuda_tensor_on_cpu_capture(torch, make_texture, capture):
    img = make_texture("RGBA8", 5, 5)
    cap = capture(img, backend="cpu")
    with pytest.raises(gltensor.InvalidArgumentError):
        cap.read(out=torch.zeros((5, 5, 4), dtype=torch.uint8, device="cuda"))


def test_out_cuda_wrong_shape_dtype(torch, cuda_rgba):
    img, cap = cuda_rgba
    with pytest.raises(gltensor.InvalidArgumentError):
        cap.read(out=torch.zeros((21, 37, 3), dtype=torch.uint8, device="cuda"))
    with pytest.raises(gltensor.InvalidArgumentError):
        cap.read(out=torch.zeros((21, 37, 4), dtype=torch.int16, device="cuda"))
    with pytest.raises(gltensor.InvalidArgumentError):
        cap.read(out=torch.zeros((37, 21, 4), dtype=torch.uint8, device="cuda").transpose(0, 1))


def test_wrong_cuda_device(torch, ctx, make_texture):
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA devices")
    img = make_texture("RGBA8", 4, 4)
    mine = ctx.cuda_device or 0
    with pytest.raises(gltensor.WrongDeviceError):
        gltensor.Capture(img.name, GL.GL_TEXTURE_2D, backend="cuda", cuda_device=(mine + 1) % torch.cuda.device_count())


# ---------------------------------------------------------------- streams


@pytest.mark.parametrize("stream_kind", ["torch", "int"])
def test_read_on_stream(torch, stream_kind, cuda_rgba):
    img, cap = cuda_rgba
    s = torch.cuda.Stream()
    frame = cap.read(flip=False, stream=s if stream_kind == "torch" else s.cuda_stream)
    assert frame.stream == s.cuda_stream
    assert frame.__cuda_array_interface__["stream"] == s.cuda_stream  # CAI v3: consumers wait on it
    s.synchronize()
    assert_array_equal(torch.from_dlpack(frame).cpu().numpy(), img.reference())


def test_cross_stream_consumer_no_race(torch, make_texture, capture):
    """Copy on one stream, consume on another: the consumer must wait for the copy (50 rounds)."""
    fmt = BY_KEY["RGBA8"]
    w, h = 512, 256
    img = make_texture(fmt, w, h, seed=0)
    cap = capture(img, backend="cuda")
    copy_stream, consumer_stream = torch.cuda.Stream(), torch.cuda.Stream()
    results = []
    for i in range(50):
        img.upload(random_data(fmt, w, h, seed=1000 + i))
        ref = img.reference()
        with torch.cuda.stream(copy_stream):
            torch.cuda._sleep(2_000_000)  # keep the copy stream busy so that a missing wait shows
        frame = cap.read(flip=True, stream=copy_stream)
        with torch.cuda.stream(consumer_stream):
            t = torch.from_dlpack(frame)
            consumed = t.to(torch.int32) * 3  # a kernel on the consumer stream
        del frame, t
        results.append((consumed, ref))
    torch.cuda.synchronize()
    for i, (consumed, ref) in enumerate(results):
        expected = ref[::-1].astype(np.int32) * 3
        assert_array_equal(consumed.cpu().numpy(), expected, err_msg=f"round {i}")


def test_cross_stream_cai_consumer(torch, make_texture, capture):
    cp = pytest.importorskip("cupy")
    fmt = BY_KEY["RGBA8"]
    img = make_texture(fmt, 256, 128, seed=0)
    cap = capture(img, backend="cuda")
    copy_stream = torch.cuda.Stream()
    for i in range(10):
        img.upload(random_data(fmt, 256, 128, seed=2000 + i))
        ref = img.reference()
        with torch.cuda.stream(copy_stream):
            torch.cuda._sleep(2_000_000)
        frame = cap.read(flip=False, stream=copy_stream)
        with cp.cuda.Stream(non_blocking=True):
            got = cp.asnumpy(cp.asarray(frame) + 0)  # CuPy honours CAI "stream" by waiting on it
        assert_array_equal(got, ref, err_msg=f"round {i}")


# ---------------------------------------------------------------- steady state and big frames


@pytest.mark.alone
@pytest.mark.sanitizer_distorts("RSS and device-memory bounds: compute-sanitizer keeps host bookkeeping per allocation and launch")
def test_10000_reads_memory_flat(torch, make_texture, capture):
    img = make_texture("RGBA8", 256, 256, seed=3)
    cap = capture(img, backend="cuda")
    dev = cap.cuda_device

    def run(n):
        acc = 0.0
        for _ in range(n):
            f = cap.read()
            acc = torch.from_dlpack(f).float().mean()
            del f
        torch.cuda.synchronize()
        return acc

    run(300)
    gc.collect()
    free_before = torch.cuda.mem_get_info(dev)[0]
    rss_before = rss_bytes()
    mean = run(10_000)
    gc.collect()
    torch.cuda.synchronize()
    free_after = torch.cuda.mem_get_info(dev)[0]
    rss_after = rss_bytes()
    assert free_before - free_after < 8 * MiB, f"GPU memory dropped by {(free_before - free_after) / MiB:.1f} MiB"
    assert rss_after - rss_before < 8 * MiB, f"RSS grew by {(rss_after - rss_before) / MiB:.1f} MiB"
    assert float(mean) == pytest.approx(float(img.reference().astype(np.float64).mean()), rel=1e-4)
    check_gl()


def test_4096_square_rgba8(torch, make_texture, capture):
    img = make_texture("RGBA8", 4096, 4096, seed=4)
    cap = capture(img, backend="cuda")
    ref = img.reference()
    frame = cap.read(flip=False)
    assert frame.shape == (4096, 4096, 4)
    assert_array_equal(torch.from_dlpack(frame).cpu().numpy(), ref)
    assert_array_equal(torch.from_dlpack(cap.read(flip=True)).cpu().numpy(), ref[::-1])


def test_cpu_backend_on_gpu_context(ctx, make_texture, capture):
    img = make_texture("RGBA8", 64, 48, seed=5)
    cap = capture(img, backend="cpu")
    assert cap.backend == "cpu"
    frame = cap.read(flip=False)
    assert frame.device == "cpu"
    assert_array_equal(np.from_dlpack(frame), img.reference())
