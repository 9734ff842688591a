"""GL buffer objects as tensors: gltensor.Buffer, map_buffer and read_buffer on every backend here.

Ground truth is GL: glGetBufferSubData after the mapping ends, a draw that reads the buffer as
vertices, and a compute shader that writes it as shader storage. On the CPU backend the views are
host memory (NumPy / torch CPU); on the CUDA backend torch CUDA tensors over the mapped pointer.
"""

import ctypes

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from OpenGL import GL

import gltensor
from formats import BY_KEY
from glhelpers import Framebuffer, check_gl, to_numpy

pytestmark = pytest.mark.usefixtures("gl")


@pytest.fixture
def make_buffer(gl):
    """make_buffer(data_or_nbytes, target=GL_ARRAY_BUFFER) -> GL buffer name with that content."""
    made = []

    def make(data, target=GL.GL_ARRAY_BUFFER):
        name = int(GL.glGenBuffers(1))
        GL.glBindBuffer(target, name)
        if isinstance(data, int):
            GL.glBufferData(target, data, None, GL.GL_DYNAMIC_DRAW)
        else:
            data = np.ascontiguousarray(data)
            GL.glBufferData(target, data.nbytes, data, GL.GL_DYNAMIC_DRAW)
        GL.glBindBuffer(target, 0)
        made.append(name)
        return name

    yield make
    gl.make_current()
    GL.glDeleteBuffers(len(made), made)  # deleting a deleted name is ignored by GL


def gl_contents(name, nbytes, dtype):
    """glGetBufferSubData of the first nbytes, as dtype."""
    out = np.zeros(nbytes, np.uint8)
    GL.glBindBuffer(GL.GL_COPY_READ_BUFFER, name)
    GL.glGetBufferSubData(GL.GL_COPY_READ_BUFFER, 0, nbytes, out.ctypes.data_as(ctypes.c_void_p))
    GL.glBindBuffer(GL.GL_COPY_READ_BUFFER, 0)
    return out.view(dtype)


def torch_or_skip(backend):
    torch = pytest.importorskip("torch")
    if backend == "cuda" and not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    return torch


def host(t):
    """A view's tensor (or a torch tensor) as a NumPy copy."""
    if isinstance(t, np.ndarray):
        return t.copy()
    return t.detach().cpu().numpy()


def test_write_mode_then_gl_sees_it(backend, make_buffer):
    torch = torch_or_skip(backend)
    name = make_buffer(1024 * 16)
    positions = torch.arange(1024 * 4, dtype=torch.float32).reshape(1024, 4) * 0.5
    buf = gltensor.Buffer(name, backend=backend)
    assert buf.backend == backend and buf.size == 1024 * 16
    with gltensor.map_buffer(buf, dtype="float32", shape=(1024, 4), mode="write") as v:
        assert v.shape == (1024, 4) and v.dtype == "float32" and v.valid and not v.read_only
        assert buf.mapped
        t = torch.from_dlpack(v)
        assert t.device.type == backend and t.data_ptr() == v.data_ptr  # zero copy
        t.copy_(positions.to(t.device))
    assert not buf.mapped and not v.valid
    check_gl("after unmap")
    assert_array_equal(gl_contents(name, 1024 * 16, np.float32).reshape(1024, 4), host(positions))


def test_read_mode_sees_gl_data_and_is_read_only(backend, make_buffer):
    data = np.arange(64, dtype=np.int32) * 3 - 7
    name = make_buffer(data)
    with gltensor.map_buffer(name, dtype=np.int32, mode="read", backend=backend) as v:
        assert v.read_only and v.shape == (64,)
        if backend == "cpu":
            a = np.asarray(v)
            assert not a.flags.writeable
            assert_array_equal(a, data)
        else:
            assert v.__cuda_array_interface__["data"][1] is True
            assert_array_equal(host(torch_or_skip(backend).from_dlpack(v)), data)


def test_readwrite_in_place(backend, make_buffer):
    torch = torch_or_skip(backend)
    data = np.linspace(0, 1, 256, dtype=np.float32)
    name = make_buffer(data)
    buf = gltensor.Buffer(name, backend=backend)
    for _ in range(3):  # the buffer maps again and again, registered once
        with gltensor.map_buffer(buf, "float32") as v:
            torch.from_dlpack(v).mul_(2).add_(1)
    assert_array_equal(gl_contents(name, data.nbytes, np.float32), ((data * 2 + 1) * 2 + 1) * 2 + 1)


def test_numpy_and_cai_consumers(backend, make_buffer):
    """The array interfaces (NumPy's on the CPU backend, CUDA's v3 on CUDA) give the same memory."""
    name = make_buffer(np.zeros(32, np.int16))
    want = np.arange(32, dtype=np.int16).reshape(4, 8)
    with gltensor.map_buffer(name, "int16", (4, 8), backend=backend) as v:
        if backend == "cpu":
            np.asarray(v)[:] = want
            assert_array_equal(np.from_dlpack(v), want)
        else:
            cai = v.__cuda_array_interface__
            assert cai["shape"] == (4, 8) and cai["typestr"] == "<i2" and cai["version"] == 3
            assert cai["data"] == (v.data_ptr, False) and cai["stream"] >= 1
            torch = torch_or_skip(backend)
            torch.as_tensor(v, device="cuda").copy_(torch.from_numpy(want).cuda())
    assert_array_equal(gl_contents(name, 64, np.int16), want.ravel())


def test_offset_shape_inference_and_dtypes(backend, make_buffer):
    data = np.arange(40, dtype=np.float32)
    name = make_buffer(data)
    buf = gltensor.Buffer(name, backend=backend)
    r = buf.read("float32", (-1, 4), offset=16)
    assert r.shape == (9, 4) and r.is_copy and r.valid
    assert_array_equal(to_numpy_view(r), data[4:].reshape(9, 4))
    with gltensor.map_buffer(buf, "uint8", offset=8) as v:
        assert v.shape == (152,)
    for dt in ("int8", "uint32", "int64", "float16", "float64", np.dtype("float32"), np.float32):
        assert gltensor.read_buffer(buf, dt).nbytes == 160
    torch = pytest.importorskip("torch")
    assert gltensor.read_buffer(buf, torch.float32).dtype == "float32"


def to_numpy_view(view):
    """A BufferView's elements on the host, through DLPack (torch for CUDA views)."""
    if view.device == "cpu":
        return np.from_dlpack(view).copy()
    import torch

    return torch.from_dlpack(view).cpu().numpy()


def test_read_buffer_is_a_copy_that_stays_valid(backend, make_buffer):
    data = np.arange(16, dtype=np.float32)
    name = make_buffer(data)
    buf = gltensor.Buffer(name, backend=backend)
    copy = gltensor.read_buffer(buf, "float32")
    with gltensor.map_buffer(buf, "float32", mode="write") as v:
        if backend == "cpu":
            np.asarray(v)[:] = -1
        else:
            torch_or_skip(backend).from_dlpack(v).fill_(-1)
    assert copy.valid
    assert_array_equal(to_numpy_view(copy), data)
    assert_array_equal(to_numpy_view(buf.read("float32")), np.full(16, -1, np.float32))


POINTS_VS = """#version 330 core
layout(location = 0) in vec4 position;
void main() { gl_Position = position; gl_PointSize = 1.0; }"""
POINTS_FS = """#version 330 core
out vec4 color;
void main() { color = vec4(1.0); }"""


def draw_points(vbo, count, target, w, h):
    from glhelpers import program

    prog, _ = program("buffer_points", POINTS_VS, POINTS_FS)
    vao = GL.glGenVertexArrays(1)
    GL.glBindVertexArray(vao)
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, vbo)
    GL.glEnableVertexAttribArray(0)
    GL.glVertexAttribPointer(0, 4, GL.GL_FLOAT, GL.GL_FALSE, 16, None)
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)
    with Framebuffer(target.name, GL.GL_TEXTURE_2D, GL.GL_DRAW_FRAMEBUFFER):
        viewport = GL.glGetIntegerv(GL.GL_VIEWPORT)
        GL.glViewport(0, 0, w, h)
        GL.glClearColor(0, 0, 0, 0)
        GL.glClear(GL.GL_COLOR_BUFFER_BIT)
        GL.glUseProgram(prog)
        GL.glDrawArrays(GL.GL_POINTS, 0, count)
        GL.glUseProgram(0)
        GL.glViewport(*viewport)
    GL.glBindVertexArray(0)
    GL.glDeleteVertexArrays(1, [vao])


def test_torch_vertices_drawn_by_gl(backend, make_buffer, make_texture, capture):
    """Points written by torch into the mapped vertex buffer appear where GL puts them."""
    torch = torch_or_skip(backend)
    w, h, n = 32, 24, 40
    rng = np.random.default_rng(3)
    pix = np.unique(np.stack([rng.integers(0, w, n), rng.integers(0, h, n)], 1), axis=0)  # distinct pixels
    target = make_texture(BY_KEY["RGBA8"], w, h, data=np.zeros((h, w, 4), np.uint8))
    vbo = make_buffer(len(pix) * 16)
    buf = gltensor.Buffer(vbo, backend=backend)
    device = "cuda" if backend == "cuda" else "cpu"
    with gltensor.map_buffer(buf, "float32", (len(pix), 4), mode="write") as v:
        xy = torch.as_tensor(pix, dtype=torch.float32, device=device)
        pos = torch.from_dlpack(v)
        pos[:, 0] = (xy[:, 0] + 0.5) / w * 2 - 1  # pixel centres in normalised device coordinates
        pos[:, 1] = (xy[:, 1] + 0.5) / h * 2 - 1
        pos[:, 2] = 0
        pos[:, 3] = 1
    draw_points(vbo, len(pix), target, w, h)
    img = to_numpy(capture(target, backend=backend).read(flip=False))  # GL rows: y up
    want = np.zeros((h, w), bool)
    want[pix[:, 1], pix[:, 0]] = True
    assert_array_equal(img[..., 0] == 255, want)


COMPUTE = """#version 430
layout(local_size_x = 64) in;
layout(std430, binding = 3) buffer Out { vec4 v[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    v[i] = vec4(float(i), float(i) * 0.5, -float(i), 1.0 / float(i + 1u));
}"""


def test_compute_shader_storage_equals_view(backend, make_buffer):
    torch = torch_or_skip(backend)
    n = 256
    ssbo = make_buffer(n * 16, GL.GL_SHADER_STORAGE_BUFFER)
    shader = GL.glCreateShader(GL.GL_COMPUTE_SHADER)
    GL.glShaderSource(shader, COMPUTE)
    GL.glCompileShader(shader)
    assert GL.glGetShaderiv(shader, GL.GL_COMPILE_STATUS), GL.glGetShaderInfoLog(shader)
    prog = GL.glCreateProgram()
    GL.glAttachShader(prog, shader)
    GL.glLinkProgram(prog)
    GL.glDeleteShader(shader)
    buf = gltensor.Buffer(ssbo, backend=backend)
    try:
        GL.glUseProgram(prog)
        GL.glBindBufferBase(GL.GL_SHADER_STORAGE_BUFFER, 3, ssbo)
        GL.glDispatchCompute(n // 64, 1, 1)
        GL.glMemoryBarrier(GL.GL_ALL_BARRIER_BITS)
        GL.glBindBufferBase(GL.GL_SHADER_STORAGE_BUFFER, 3, 0)
        GL.glUseProgram(0)
        i = np.arange(n, dtype=np.float32)
        want = np.stack([i, i * 0.5, -i, np.float32(1) / (i + 1)], 1)
        with gltensor.map_buffer(buf, "float32", (n, 4), mode="read") as v:
            got = host(torch.from_dlpack(v))
        np.testing.assert_allclose(got, want, rtol=1e-6)  # 1 / (i + 1): the shader's division may be inexact
        assert_array_equal(got[:, :3], want[:, :3])
        assert_array_equal(to_numpy_view(gltensor.read_buffer(buf, "float32", (n, 4))), got)
        assert_array_equal(gl_contents(ssbo, n * 16, np.float32).reshape(n, 4), got)
    finally:
        GL.glDeleteProgram(prog)


def test_bindings_left_alone(backend, make_buffer):
    a, b = make_buffer(64), make_buffer(64)
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, a)
    GL.glBindBuffer(GL.GL_COPY_WRITE_BUFFER, a)
    try:
        with gltensor.map_buffer(b, "float32", backend=backend, mode="write"):
            pass
        gltensor.read_buffer(b, backend=backend)
        assert GL.glGetIntegerv(GL.GL_ARRAY_BUFFER_BINDING) == a
        assert GL.glGetIntegerv(GL.GL_COPY_WRITE_BUFFER_BINDING) == a
    finally:
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)
        GL.glBindBuffer(GL.GL_COPY_WRITE_BUFFER, 0)


# ---------------------------------------------------------------- errors


def test_use_after_unmap_is_refused(backend, make_buffer):
    name = make_buffer(64)
    with gltensor.map_buffer(name, "float32", backend=backend) as v:
        pass
    assert not v.valid and "unmapped" in repr(v)
    with pytest.raises(BufferError, match="unmapped"):
        v.__dlpack__()
    iface = "__cuda_array_interface__" if backend == "cuda" else "__array_interface__"
    with pytest.raises(gltensor.ClosedError, match="unmapped"):
        getattr(v, iface)
    torch = pytest.importorskip("torch")
    with pytest.raises(BufferError, match="unmapped"):
        torch.from_dlpack(v)
    if backend == "cpu":
        with pytest.raises(gltensor.ClosedError):
            np.asarray(v)


def test_shape_larger_than_buffer(backend, make_buffer):
    buf = gltensor.Buffer(make_buffer(64), backend=backend)
    with pytest.raises(gltensor.InvalidArgumentError, match="need 68 bytes but buffer .* has 64"):
        buf.map("float32", (17,))
    with pytest.raises(gltensor.InvalidArgumentError, match="need 64 bytes but buffer .* has 56"):
        buf.map("float64", (8,), offset=8)
    with pytest.raises(gltensor.InvalidArgumentError, match="past the end"):
        buf.map("uint8", offset=65)
    with pytest.raises(gltensor.InvalidArgumentError, match="not a whole number"):
        buf.map("float32", offset=2)
    with pytest.raises(gltensor.InvalidArgumentError, match="need 72 bytes"):
        buf.read("float64", (9,))
    with pytest.raises(ValueError, match="dtype must be"):
        buf.map("complex64")
    with pytest.raises(ValueError, match="mode must be"):
        buf.map(mode="rw")
    assert not buf.mapped


def test_mapping_twice(backend, make_buffer):
    buf = gltensor.Buffer(make_buffer(64), backend=backend)
    with gltensor.map_buffer(buf):
        with pytest.raises(gltensor.InvalidArgumentError, match="mapped already"):
            buf.map()
        with pytest.raises(gltensor.InvalidArgumentError, match="mapped already"):
            with gltensor.map_buffer(buf):
                pass
        with pytest.raises(gltensor.InvalidArgumentError, match="is mapped"):
            buf.read()
    with gltensor.map_buffer(buf):  # fine again after the block
        pass


def test_deleting_the_buffer_while_mapped(backend, make_buffer):
    name = make_buffer(64)
    buf = gltensor.Buffer(name, backend=backend)
    with pytest.raises(gltensor.InvalidObjectError, match="deleted while it was mapped"):
        with gltensor.map_buffer(buf, "float32") as v:
            GL.glDeleteBuffers(1, [name])
    assert not v.valid and not buf.mapped
    with pytest.raises(gltensor.InvalidObjectError, match="does not exist"):
        buf.map()
    with pytest.raises(gltensor.InvalidObjectError, match="does not exist"):
        gltensor.Buffer(name, backend=backend)


def test_buffer_reallocated_between_maps(backend, make_buffer):
    name = make_buffer(64)
    buf = gltensor.Buffer(name, backend=backend)
    with gltensor.map_buffer(buf, "float32") as v:
        assert v.shape == (16,)
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, name)
    GL.glBufferData(GL.GL_ARRAY_BUFFER, 128, np.arange(32, dtype=np.float32), GL.GL_DYNAMIC_DRAW)
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)
    err = GL.glGetError()
    if err != GL.GL_NO_ERROR:
        # A driver may refuse to reallocate a buffer registered with CUDA, as NVIDIA does for textures.
        assert backend == "cuda", f"glBufferData failed with 0x{err:04x} on the CPU backend"
        pytest.skip(f"this driver refuses glBufferData on a buffer registered with CUDA (0x{err:04x}); "
                    "close the Buffer before reallocating")
    with gltensor.map_buffer(buf, "float32", mode="read") as v:
        assert v.shape == (32,)
    assert buf.size == 128
    assert_array_equal(to_numpy_view(buf.read("float32")), np.arange(32))


def test_close_while_mapped_and_closed_buffer(backend, make_buffer):
    name = make_buffer(np.arange(4, dtype=np.float32))
    buf = gltensor.Buffer(name, backend=backend)
    v = buf.map("float32", mode="write")
    buf.close()  # unmaps; the view goes invalid
    assert not v.valid
    buf.close()
    with pytest.raises(gltensor.ClosedError):
        buf.map()
    with pytest.raises(gltensor.ClosedError):
        buf.read()
    # GL may use the buffer again
    assert gl_contents(name, 16, np.float32).shape == (4,)


def test_bad_names_and_contexts(backend, make_buffer):
    with pytest.raises(gltensor.InvalidObjectError, match="buffer 987654 does not exist"):
        gltensor.Buffer(987654, backend=backend)
    buf = gltensor.Buffer(make_buffer(64), backend=backend)
    other = gltensor.Context.headless()
    try:
        with pytest.raises(gltensor.WrongContextError):
            buf.map()
    finally:
        other.close()


def test_streams_on_cpu_backend_refused(make_buffer):
    buf = gltensor.Buffer(make_buffer(64), backend="cpu")
    with pytest.raises(gltensor.InvalidArgumentError, match="CUDA stream"):
        buf.map(stream=7)
    with pytest.raises(gltensor.InvalidArgumentError, match="CUDA stream"):
        buf.read(stream=7)


def test_legacy_dlpack_of_read_only_view_refused(backend, make_buffer):
    with gltensor.map_buffer(make_buffer(64), "float32", mode="read", backend=backend) as v:
        with pytest.raises(BufferError, match="read-only"):
            v.__dlpack__()
        v.__dlpack__(max_version=(1, 0))


@pytest.mark.gpu
def test_cuda_consumer_stream_is_ordered(backend, make_buffer):
    """A consumer on another stream waits for the map, and the unmap waits for the consumer's work."""
    if backend != "cuda":
        pytest.skip("streams apply to the CUDA backend")
    torch = torch_or_skip(backend)
    n = 1 << 20
    name = make_buffer(n * 4)
    buf = gltensor.Buffer(name, backend="cuda")
    s = torch.cuda.Stream()
    for k in range(3):
        with torch.cuda.stream(s):
            with gltensor.map_buffer(buf, "float32", mode="write", stream=s) as v:
                t = torch.from_dlpack(v)
                t.copy_(torch.arange(n, dtype=torch.float32, device="cuda") + k)
        # no synchronisation here: the unmap was ordered after the copy on s
        got = gl_contents(name, n * 4, np.float32)
        assert_array_equal(got, np.arange(n, dtype=np.float32) + k)
    # the default stream as consumer, map on a side stream
    with gltensor.map_buffer(buf, "float32", mode="readwrite", stream=s) as v:
        torch.from_dlpack(v).add_(1)  # torch's current (default) stream: __dlpack__ made it wait for the map
    assert_array_equal(gl_contents(name, n * 4, np.float32), np.arange(n, dtype=np.float32) + 3)


@pytest.mark.gpu
@pytest.mark.parametrize("library", ["cupy", "numba", "jax"])
def test_other_frameworks_write_in_place(backend, library, make_buffer):
    """CuPy (CAI), Numba (CAI) and JAX (DLPack, read) see the mapped buffer's memory."""
    if backend != "cuda":
        pytest.skip("these consumers take CUDA memory")
    name = make_buffer(np.zeros(64, np.float32))
    want = np.arange(64, dtype=np.float32)
    if library == "jax":
        jax = pytest.importorskip("jax")
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, name)
        GL.glBufferSubData(GL.GL_ARRAY_BUFFER, 0, want.nbytes, want)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)
        with gltensor.map_buffer(name, "float32", mode="readwrite", backend="cuda") as v:
            got = np.asarray(jax.dlpack.from_dlpack(v))  # JAX arrays are immutable: read (and copy) only
        assert_array_equal(got, want)
        return
    with gltensor.map_buffer(name, "float32", (8, 8), backend="cuda") as v:
        if library == "cupy":
            cupy = pytest.importorskip("cupy")
            cupy.asarray(v)[:] = cupy.asarray(want.reshape(8, 8))
            cupy.cuda.Device().synchronize()
        else:
            numba_cuda = pytest.importorskip("numba.cuda")
            arr = numba_cuda.as_cuda_array(v)
            arr.copy_to_device(want.reshape(8, 8))
            numba_cuda.synchronize()
    assert_array_equal(gl_contents(name, 256, np.float32), want)


@pytest.mark.parametrize("current", ["none", "other"])
def test_released_without_its_context_current(backend, current, ctx, make_buffer):
    """A Buffer dropped mapped, with no context or another one current, is unmapped and released in its own
    context (GL may use the buffer again), and the caller's current context is left as it was."""
    import ctypes
    import gc

    from OpenGL import EGL

    name = make_buffer(np.zeros(16, np.float32))
    buf = gltensor.Buffer(name, backend=backend)
    v = buf.map("float32", mode="write")
    if backend == "cpu":
        np.asarray(v)[:] = 7
    else:
        torch_or_skip(backend).from_dlpack(v).fill_(7)
    del v
    other = gltensor.Context.headless() if current == "other" else None
    try:
        if other is None:
            ctx.release()
        before = ctypes.cast(EGL.eglGetCurrentContext(), ctypes.c_void_p).value
        del buf
        gc.collect()
        assert ctypes.cast(EGL.eglGetCurrentContext(), ctypes.c_void_p).value == before, "the caller's current context must be put back"
    finally:
        if other is not None:
            other.close()
        ctx.make_current()
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, name)
    assert not GL.glGetBufferParameteriv(GL.GL_ARRAY_BUFFER, GL.GL_BUFFER_MAPPED), "the buffer must be unmapped"
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)
    assert_array_equal(gl_contents(name, 64, np.float32), np.full(16, 7, np.float32))


STORAGE_FLAGS = {
    "none": 0,
    "dynamic": GL.GL_DYNAMIC_STORAGE_BIT,
    "map_read": GL.GL_MAP_READ_BIT,
    "map_write": GL.GL_MAP_WRITE_BIT,
    "map_both": GL.GL_MAP_READ_BIT | GL.GL_MAP_WRITE_BIT,
}


@pytest.fixture
def make_immutable(gl):
    """make_immutable(data, flags) -> a buffer with immutable storage (glBufferStorage) holding data."""
    made = []

    def make(data, flags):
        name = int(GL.glGenBuffers(1))
        data = np.ascontiguousarray(data)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, name)
        GL.glBufferStorage(GL.GL_ARRAY_BUFFER, data.nbytes, data, flags)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)
        made.append(name)
        return name

    yield make
    gl.make_current()
    GL.glDeleteBuffers(len(made), made)


@pytest.mark.parametrize("flags", sorted(STORAGE_FLAGS))
@pytest.mark.parametrize("mode", ["read", "write", "readwrite"])
def test_immutable_storage_any_flags(backend, flags, mode, make_immutable):
    """glBufferStorage buffers map in every mode whatever their flags (CUDA maps them itself; the CPU backend
    lends a host copy where GL's flags forbid glMapBufferRange): reads see GL's content, writes reach GL, the
    range outside the mapping is untouched, and the caller's copy bindings are left alone."""
    torch = torch_or_skip(backend)
    before = np.arange(256, dtype=np.float32)
    name = make_immutable(before, STORAGE_FLAGS[flags])
    buf = gltensor.Buffer(name, backend=backend)
    GL.glBindBuffer(GL.GL_COPY_READ_BUFFER, name)
    GL.glBindBuffer(GL.GL_COPY_WRITE_BUFFER, name)
    new = torch.full((64,), -3.5)
    with gltensor.map_buffer(buf, "float32", (64,), mode=mode, offset=64 * 4) as v:
        if mode != "write":
            seen = np.asarray(v) if backend == "cpu" else host(torch.from_dlpack(v))
            assert_array_equal(seen, before[64:128])
        if mode != "read":
            t = torch.from_dlpack(v)
            t.copy_(new.to(t.device))
    check_gl("after unmap")
    assert GL.glGetIntegerv(GL.GL_COPY_READ_BUFFER_BINDING) == name
    assert GL.glGetIntegerv(GL.GL_COPY_WRITE_BUFFER_BINDING) == name
    GL.glBindBuffer(GL.GL_COPY_READ_BUFFER, 0)
    GL.glBindBuffer(GL.GL_COPY_WRITE_BUFFER, 0)
    want = before.copy()
    if mode != "read":
        want[64:128] = -3.5
    assert_array_equal(gl_contents(name, 1024, np.float32), want)
    assert_array_equal(to_numpy(buf.read("float32", (256,))), want)
    buf.close()


def test_immutable_storage_write_mode_starts_from_zeros_on_cpu(make_immutable):
    """Write mode lends what it discards: on the CPU backend's host copy that is zeros, never old heap memory."""
    name = make_immutable(np.full(64, 7, np.uint8), 0)
    buf = gltensor.Buffer(name, backend="cpu")
    with gltensor.map_buffer(buf, "uint8", (64,), mode="write") as v:
        assert_array_equal(np.asarray(v), np.zeros(64, np.uint8))
        np.asarray(v)[:] = 9
    assert_array_equal(gl_contents(name, 64, np.uint8), np.full(64, 9, np.uint8))


def test_immutable_storage_deleted_while_mapped(backend, make_immutable):
    """Immutable storage deleted while mapped (on the CPU backend: while its host copy is lent): refused at unmap
    like any buffer, the copy freed (ASan's leak check runs this)."""
    name = make_immutable(np.zeros(64, np.uint8), 0)
    buf = gltensor.Buffer(name, backend=backend)
    with pytest.raises(gltensor.InvalidObjectError, match="deleted while it was mapped"):
        with gltensor.map_buffer(buf, "uint8", (64,), mode="readwrite") as v:
            GL.glDeleteBuffers(1, [name])
    assert not v.valid and not buf.mapped
    buf.close()


def test_dlpack_arguments_refused_clearly(backend, make_buffer):
    """A view's __dlpack__ refuses malformed arguments with the exception the DLPack spec names, never a
    SystemError (a non-tuple dl_device once reached PyArg_ParseTuple); the frame's checks are the same code."""
    buf = gltensor.Buffer(make_buffer(64), backend=backend)
    other = (1, 0) if backend == "cuda" else (2, 0)
    with gltensor.map_buffer(buf, "uint8") as v:
        cases = [({"dl_device": "cpu"}, TypeError, "dl_device"), ({"dl_device": other}, BufferError, "device"),
                 ({"max_version": 1}, TypeError, "max_version"), ({"copy": True}, BufferError, "read_buffer")]
        if backend == "cuda":
            cases += [({"stream": 0}, ValueError, "ambiguous"), ({"stream": -7}, ValueError, "stream"),
                      ({"stream": "1"}, TypeError, "stream")]
        else:
            cases += [({"stream": 3}, BufferError, "host memory"), ({"stream": "1"}, BufferError, "host memory")]
        for kwargs, exc, words in cases:
            with pytest.raises(exc, match=words):
                v.__dlpack__(**kwargs)
        assert v.__dlpack__(stream=-1, max_version=(1, 0)) is not None
    copy = buf.read()
    with pytest.raises(TypeError, match="dl_device"):
        copy.__dlpack__(dl_device="cpu")
    buf.close()
