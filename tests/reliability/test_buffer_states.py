"""Buffer mappings against their context, their shapes and their unmaps (issue #22, classes 2, 3 and 4):

- class 2: a mapped view is invalidated with its GL context (it was valid after ctx.close(), and numpy wrote into
  freed driver memory: heap corruption);
- class 3: view shapes whose byte count overflows are refused (one checked computation, src/core/size_math.h);
- class 4: an unmap that cannot be done (another context current, none, a thread without it) leaves the buffer
  mapped and the view valid, to be unmapped where it can; closing the buffer while map() converts its arguments
  is a ClosedError.

CPU backend here; the same cases on the CUDA backend on the GPU machine (marked gpu).
"""

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from OpenGL import GL

import gltensor
from glhelpers import check_gl

pytestmark = pytest.mark.usefixtures("gl")
hypothesis = pytest.importorskip("hypothesis", reason="the shape properties need hypothesis (the [test] extra)")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from test_context_identity import BACKENDS, KINDS, _egl, need_cuda_context  # noqa: E402

EXAMPLES = int(os.environ.get("GLTENSOR_HYPOTHESIS_EXAMPLES", "60"))
GL_MAP_READ_BIT, GL_MAP_WRITE_BIT = 0x1, 0x2


def gl_buffer(n=64, fill=None, immutable_flags=None):
    data = np.arange(n, dtype=np.uint8) if fill is None else np.full(n, fill, np.uint8)
    b = GL.glGenBuffers(1)
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, b)
    if immutable_flags is None:
        GL.glBufferData(GL.GL_ARRAY_BUFFER, n, data, GL.GL_DYNAMIC_DRAW)
    else:
        GL.glBufferStorage(GL.GL_ARRAY_BUFFER, n, data, immutable_flags)
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)
    return int(b)


def gl_contents(name, n=64):
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, name)
    data = np.frombuffer(bytes(GL.glGetBufferSubData(GL.GL_ARRAY_BUFFER, 0, n)), np.uint8).copy()
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)
    return data


def gl_mapped(name):
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, name)
    v = GL.glGetBufferParameteriv(GL.GL_ARRAY_BUFFER, GL.GL_BUFFER_MAPPED)
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)
    return bool(v)


def as_array(view):
    if view.device == "cpu":
        return np.asarray(view)
    torch = pytest.importorskip("torch")
    return torch.from_dlpack(view)


def to_host(x):
    return x if isinstance(x, np.ndarray) else x.cpu().numpy()


STORAGE = {"mutable": None, "immutable": 0, "immutable-mappable": GL_MAP_READ_BIT | GL_MAP_WRITE_BIT | 0x40}


@pytest.fixture
def display(gl):
    gl.make_current()
    return _egl.eglGetCurrentDisplay()


# ---------------------------------------------------------------- class 2: views die with their context


@pytest.mark.parametrize("storage", sorted(STORAGE))
@pytest.mark.parametrize("mode", ["read", "write", "readwrite"])
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("backend", BACKENDS)
def test_view_invalid_once_its_context_is_destroyed(backend, kind, mode, storage, gl, display):
    need_cuda_context(backend, gl)
    c = KINDS[kind](display)
    buf = gltensor.Buffer(gl_buffer(immutable_flags=STORAGE[storage]), backend=backend)
    view = buf.map("uint8", mode=mode)
    assert view.valid
    c.close()
    gl.make_current()
    assert not view.valid
    assert "unmapped" in repr(view)
    assert not buf.mapped
    with pytest.raises(BufferError, match="destroyed"):
        view.__dlpack__()
    iface = "__array_interface__" if view.device == "cpu" else "__cuda_array_interface__"
    with pytest.raises(gltensor.ClosedError, match="destroyed"):
        getattr(view, iface)
    if backend == "cpu":
        with pytest.raises(gltensor.ClosedError):
            np.asarray(view)
    for use in (buf.map, buf.read):
        with pytest.raises(gltensor.ClosedError, match="destroyed"):
            use()
    buf.unmap()  # nothing left to unmap: no error, no crash
    buf.close()


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("backend", BACKENDS)
def test_unmap_after_context_destroyed_says_writes_lost(backend, kind, gl, display):
    """Asked first (before any view query), unmap() tells that the mapping went with the context."""
    need_cuda_context(backend, gl)
    c = KINDS[kind](display)
    buf = gltensor.Buffer(gl_buffer(), backend=backend)
    buf.map()
    c.close()
    gl.make_current()
    with pytest.raises(gltensor.ClosedError, match="lost"):
        buf.unmap()
    assert not buf.mapped
    buf.close()


def test_heap_reproducer_in_a_fresh_process():
    """The issue's reproducer, where writing through the stale view then making a context aborted with
    'malloc(): unsorted double linked list corrupted'."""
    code = textwrap.dedent("""
        import os; os.environ["PYOPENGL_PLATFORM"] = "egl"
        import numpy as np, gltensor
        from OpenGL import GL
        ctx = gltensor.Context.headless()
        b = GL.glGenBuffers(1); GL.glBindBuffer(GL.GL_ARRAY_BUFFER, b)
        GL.glBufferData(GL.GL_ARRAY_BUFFER, 1 << 16, None, GL.GL_DYNAMIC_DRAW)
        buf = gltensor.Buffer(b, backend="cpu")
        v = buf.map()
        ctx.close()
        assert not v.valid
        try:
            a = np.asarray(v)
        except gltensor.ClosedError:
            pass
        else:
            raise SystemExit("the view of a destroyed context was exported")
        for _ in range(20):
            gltensor.Context.headless().close()
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-2000:]


# ---------------------------------------------------------------- class 3: shape products


HUGE_SHAPES = [
    ("uint8", (3, 0x5555555555555556)),
    ("float64", (2**61 + 2,)),
    ("uint16", (2**62, 2)),
    ("uint8", (2**32, 2**32)),
    ("float32", (-1, 2**62)),
    ("uint8", (0, 2**63 - 1, 2**63 - 1)),
    ("uint64", (2**60, 0, 16)),
]


@pytest.mark.parametrize("dtype,shape", HUGE_SHAPES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_overflowing_shapes_are_refused(backend, dtype, shape, gl):
    need_cuda_context(backend, gl)
    with gltensor.Buffer(gl_buffer(16), backend=backend) as buf:
        for call in (buf.read, buf.map):
            with pytest.raises((gltensor.InvalidArgumentError, ValueError)):
                call(dtype, shape)
        assert not buf.mapped


DTYPES = ["uint8", "int16", "float32", "float64", "uint64"]
EXTENT = st.one_of(st.integers(-3, 70), st.sampled_from([2**31, 2**32 + 1, 2**62, 2**63 - 1, 2**63, 2**64 + 3,
                                                          0x5555555555555556, -(2**63)]))


@settings(max_examples=EXAMPLES * 3, deadline=None, suppress_health_check=list(HealthCheck))
@given(dtype=st.sampled_from(DTYPES), shape=st.lists(EXTENT, min_size=1, max_size=5),
       offset=st.integers(0, 80), mapping=st.booleans())
def test_any_shape_gives_a_view_inside_the_buffer_or_an_error(gl, dtype, shape, offset, mapping):
    """Whatever the shape and offset: an exact view that lies inside the buffer, or InvalidArgumentError /
    ValueError / TypeError; never a view whose bytes overrun it."""
    size = 64
    name = gl_buffer(size)
    item = np.dtype(dtype).itemsize
    with gltensor.Buffer(name, backend="cpu") as buf:
        try:
            view = buf.map(dtype, tuple(shape), offset=offset) if mapping else buf.read(dtype, tuple(shape),
                                                                                      offset=offset)
        except (gltensor.InvalidArgumentError, ValueError, TypeError):
            assert not buf.mapped
            return
        a = np.asarray(view)
        assert a.nbytes == view.nbytes <= size - offset
        assert a.nbytes == int(np.prod([int(x) for x in view.shape], dtype=object)) * item
        assert (a.view(np.uint8).ravel() == np.arange(offset, offset + a.nbytes, dtype=np.uint8)).all()
        if mapping:
            buf.unmap()
    GL.glDeleteBuffers(1, [name])
    check_gl("after the shape case")


# ---------------------------------------------------------------- class 4: unmaps that cannot be done


@pytest.mark.parametrize("storage", sorted(STORAGE))
@pytest.mark.parametrize("backend", BACKENDS)
def test_refused_unmap_keeps_the_mapping(backend, storage, gl, display):
    """Leaving map_buffer with another context current raises WrongContextError and forgets nothing: the buffer
    stays mapped (GL says so too), the view stays valid, and unmap() in the right context lands the writes."""
    need_cuda_context(backend, gl)
    other = gltensor.Context.headless()
    gl.make_current()
    name = gl_buffer(immutable_flags=STORAGE[storage])
    buf = gltensor.Buffer(name, backend=backend)
    try:
        with pytest.raises(gltensor.WrongContextError, match="still mapped"):
            with gltensor.map_buffer(buf, mode="readwrite") as v:
                as_array(v)[:] = 201
                other.make_current()
        assert buf.mapped and v.valid
        with pytest.raises(gltensor.WrongContextError):
            buf.unmap()  # again in the wrong context: still refused, still mapped
        assert buf.mapped and v.valid
        gl.make_current()
        if backend == "cpu" and storage != "immutable":
            assert gl_mapped(name), "GL no longer has the buffer mapped, but gltensor kept no record"
        with pytest.raises(gltensor.InvalidArgumentError, match="mapped already"):
            buf.map()
        buf.unmap()
        assert not buf.mapped and not v.valid
        assert not gl_mapped(name)
        assert (gl_contents(name) == 201).all(), "the writes made through the view were lost"
    finally:
        gl.make_current()
        buf.close()
        other.close()
        gl.make_current()


@pytest.mark.parametrize("backend", BACKENDS)
def test_refused_unmap_from_a_thread_without_the_context(backend, gl):
    need_cuda_context(backend, gl)
    name = gl_buffer()
    buf = gltensor.Buffer(name, backend=backend)
    v = buf.map()
    as_array(v)[:] = 9
    errors = []

    def worker():
        try:
            buf.unmap()
        except gltensor.GLTensorError as e:
            errors.append(e)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert len(errors) == 1 and isinstance(errors[0], gltensor.NoContextError), errors
    assert "still mapped" in str(errors[0])
    assert buf.mapped and v.valid
    buf.unmap()
    assert (gl_contents(name) == 9).all()
    buf.close()


class Closer:
    """An argument whose conversion closes the buffer being mapped (the caller's code runs during parsing)."""

    def __init__(self, buf, value):
        self.buf, self.value = buf, value

    @property
    def name(self):  # dtype
        self.buf.close()
        return self.value

    def __index__(self):  # offset / shape
        self.buf.close()
        return self.value


@pytest.mark.parametrize("where", ["dtype", "offset", "shape", "shape-iter"])
@pytest.mark.parametrize("call", ["map", "read"])
def test_buffer_closed_while_arguments_convert(gl, where, call):
    buf = gltensor.Buffer(gl_buffer(), backend="cpu")
    kwargs = {"dtype": "uint8"}
    if where == "dtype":
        kwargs["dtype"] = Closer(buf, "uint8")
    elif where == "offset":
        kwargs["offset"] = Closer(buf, 0)
    elif where == "shape":
        kwargs["shape"] = Closer(buf, 4)
    else:
        def shape():
            buf.close()
            yield 4
        kwargs["shape"] = shape()
    with pytest.raises(gltensor.ClosedError, match="was closed"):
        getattr(buf, call)(**kwargs)
    assert buf.closed


STEPS = st.lists(st.sampled_from(["map", "write", "unmap", "switch-other", "switch-own", "release", "read"]),
                 min_size=1, max_size=20)


@pytest.fixture(scope="module")
def other_context():
    """A second context for the model below, made once and closed with the module (a context kept until the
    interpreter exits is a leak to the sanitizer run)."""
    ctx = gltensor.Context.headless()
    yield ctx
    ctx.close()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(steps=STEPS)
def test_any_sequence_of_maps_and_unmaps(gl, other_context, steps):
    """Model of the mapping: map/unmap/read in the own context, another one, or none. Refused steps change
    nothing; an unmap that succeeds lands exactly the last value written; GL's own mapped flag agrees."""
    other = other_context
    gl.make_current()
    name = gl_buffer(fill=0)
    buf = gltensor.Buffer(name, backend="cpu")
    mapped, current, value, landed, view = False, "own", 0, 0, None
    try:
        for step in steps:
            if step == "map":
                if mapped:
                    with pytest.raises(gltensor.InvalidArgumentError):
                        buf.map()
                elif current == "own":
                    view = buf.map()
                    mapped = True
                else:
                    with pytest.raises((gltensor.WrongContextError, gltensor.NoContextError)):
                        buf.map()
            elif step == "write" and mapped:
                value += 1
                np.asarray(view)[:] = value
            elif step == "unmap":
                if mapped and current != "own":
                    with pytest.raises((gltensor.WrongContextError, gltensor.NoContextError)):
                        buf.unmap()
                else:
                    buf.unmap()
                    if mapped:
                        landed = value
                    mapped = False
            elif step == "read":
                if current != "own":
                    with pytest.raises((gltensor.WrongContextError, gltensor.NoContextError,
                                        gltensor.InvalidArgumentError)):
                        buf.read()
                elif mapped:
                    with pytest.raises(gltensor.InvalidArgumentError):
                        buf.read()
                else:
                    assert (np.asarray(buf.read()) == landed).all()
            elif step == "switch-other":
                other.make_current()
                current = "other"
            elif step == "switch-own":
                gl.make_current()
                current = "own"
            elif step == "release":
                _egl.eglMakeCurrent(_egl.eglGetCurrentDisplay(), None, None, None)
                current = None
            assert buf.mapped == mapped
            if view is not None:
                assert view.valid == mapped
    finally:
        gl.make_current()
        if mapped:
            buf.unmap()
            landed = value
        assert not gl_mapped(name)
        assert (gl_contents(name) == landed).all()
        buf.close()
        GL.glDeleteBuffers(1, [name])
