"""Frames as exported buffers: DLPack capsules (legacy and versioned), the array interface,
shared memory, ownership and refcounts. CPU frames here; CUDA frames in test_gpu.py."""

import ctypes
import gc
import sys
import weakref

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from formats import BY_KEY, random_data
from glhelpers import to_numpy

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.usefixtures("gl")

# ---------------------------------------------------------------- DLPack ABI, written from the spec

kDLCPU, kDLCUDA = 1, 2
kDLUInt, kDLFloat = 1, 2
FLAG_READ_ONLY, FLAG_IS_COPIED = 1 << 0, 1 << 1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


_GetName = ctypes.pythonapi.PyCapsule_GetName
_GetName.restype, _GetName.argtypes = ctypes.c_char_p, [ctypes.py_object]
_GetPointer = ctypes.pythonapi.PyCapsule_GetPointer
_GetPointer.restype, _GetPointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
_IsValid = ctypes.pythonapi.PyCapsule_IsValid
_IsValid.restype, _IsValid.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]


def capsule_name(capsule):
    assert type(capsule).__name__ == "PyCapsule"
    return _GetName(capsule).decode()


def capsule_struct(capsule):
    name = capsule_name(capsule)
    ptr = _GetPointer(capsule, name.encode())
    assert ptr
    cls = DLManagedTensorVersioned if name == "dltensor_versioned" else DLManagedTensor
    return cls.from_address(ptr)


def check_dltensor(t, frame, device_type=kDLCPU, device_id=0):
    assert t.data + t.byte_offset == frame.data_ptr
    assert (t.device.device_type, t.device.device_id) == (device_type, device_id)
    assert t.ndim == 3
    assert tuple(t.shape[i] for i in range(3)) == frame.shape
    dt = np.dtype(frame.dtype)
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (kDLFloat if dt.kind == "f" else kDLUInt, dt.itemsize * 8, 1)
    h, w, c = frame.shape
    if t.strides:  # NULL means compact row-major, which frames are
        assert tuple(t.strides[i] for i in range(3)) == (w * c, c, 1)


def settle():
    for _ in range(3):
        gc.collect()


# ---------------------------------------------------------------- fixtures


@pytest.fixture
def rgba(make_texture, capture):
    img = make_texture("RGBA8", 6, 4, seed=7)
    cap = capture(img, backend="cpu")
    return img, cap


# ---------------------------------------------------------------- capsules


def test_dlpack_device(rgba):
    _, cap = rgba
    assert cap.read().__dlpack_device__() == (kDLCPU, 0)


def test_legacy_capsule(rgba):
    img, cap = rgba
    frame = cap.read(flip=False)
    capsule = frame.__dlpack__()
    assert capsule_name(capsule) == "dltensor"
    assert _IsValid(capsule, b"dltensor")
    check_dltensor(capsule_struct(capsule).dl_tensor, frame)
    capsule_unused = frame.__dlpack__(max_version=None)
    assert capsule_name(capsule_unused) == "dltensor"


@pytest.mark.parametrize("max_version", [(1, 0), (1, 1), (1, 3)])
def test_versioned_capsule(rgba, max_version):
    img, cap = rgba
    frame = cap.read(flip=False)
    capsule = frame.__dlpack__(max_version=max_version)
    assert capsule_name(capsule) == "dltensor_versioned"
    m = capsule_struct(capsule)
    assert m.version.major == 1
    assert not (m.flags & FLAG_IS_COPIED), "a zero-copy export must not claim IS_COPIED"
    check_dltensor(m.dl_tensor, frame)


def test_old_max_version_gives_legacy(rgba):
    _, cap = rgba
    capsule = cap.read().__dlpack__(max_version=(0, 8))
    assert capsule_name(capsule) == "dltensor"


def test_copy_true_sets_is_copied_and_new_memory(rgba):
    img, cap = rgba
    frame = cap.read(flip=False)
    capsule = frame.__dlpack__(max_version=(1, 0), copy=True)
    m = capsule_struct(capsule)
    assert m.flags & FLAG_IS_COPIED
    assert m.dl_tensor.data + m.dl_tensor.byte_offset != frame.data_ptr
    del m, capsule
    gc.collect()


def test_copy_true_independent_memory(rgba):
    img, cap = rgba
    frame = cap.read(flip=False)
    ref = img.reference()
    copied = np.from_dlpack(frame, copy=True)
    shared = np.from_dlpack(frame)
    assert copied.ctypes.data != frame.data_ptr
    assert_array_equal(copied, ref)
    copied[...] = 0
    assert_array_equal(shared, ref, err_msg="writing the copy changed the frame")
    t = torch.from_dlpack(frame.__dlpack__(copy=True))
    assert t.data_ptr() != frame.data_ptr
    assert_array_equal(t.numpy(), ref)


def test_copy_false_shares(rgba):
    _, cap = rgba
    frame = cap.read()
    a = np.from_dlpack(frame, copy=False)
    assert a.ctypes.data == frame.data_ptr


@pytest.mark.parametrize("dl_device", [(kDLCUDA, 0), (kDLCPU, 1), (3, 0)])
def test_dl_device_mismatch_raises_buffer_error(rgba, dl_device):
    _, cap = rgba
    frame = cap.read()
    with pytest.raises(BufferError):
        frame.__dlpack__(dl_device=dl_device)
    with pytest.raises(BufferError):
        frame.__dlpack__(max_version=(1, 0), dl_device=dl_device, copy=False)


def test_dl_device_match_ok(rgba):
    _, cap = rgba
    frame = cap.read()
    assert capsule_name(frame.__dlpack__(dl_device=(kDLCPU, 0))) == "dltensor"
    assert capsule_name(frame.__dlpack__(max_version=(1, 0), dl_device=(kDLCPU, 0))) == "dltensor_versioned"


# -1 ("do not synchronise") is not listed: it is trivially honoured on the CPU, and torch accepts it too.
@pytest.mark.parametrize("stream", [1, 2, 12345])
def test_stream_on_cpu_raises_buffer_error(rgba, stream):
    _, cap = rgba
    frame = cap.read()
    with pytest.raises(BufferError):
        frame.__dlpack__(stream=stream)


# ---------------------------------------------------------------- consumers share the frame's memory


def test_numpy_from_dlpack_shares_memory(rgba):
    img, cap = rgba
    frame = cap.read(flip=False)
    a = np.from_dlpack(frame)
    assert a.ctypes.data == frame.data_ptr
    assert a.shape == frame.shape and a.dtype == np.uint8
    assert_array_equal(a, img.reference())


def test_torch_from_dlpack_shares_memory(rgba):
    img, cap = rgba
    frame = cap.read(flip=False)
    t = torch.from_dlpack(frame)
    assert t.data_ptr() == frame.data_ptr
    assert t.device.type == "cpu"
    assert tuple(t.shape) == frame.shape and t.dtype == torch.uint8
    assert t.is_contiguous()
    assert_array_equal(t.numpy(), img.reference())
    # both consumers see one buffer
    a = np.from_dlpack(frame)
    t[0, 0, 0] = 255 - int(t[0, 0, 0])
    assert a[0, 0, 0] == int(t[0, 0, 0])


def test_array_interface(rgba):
    img, cap = rgba
    frame = cap.read(flip=False)
    ai = frame.__array_interface__
    assert ai["version"] == 3
    assert tuple(ai["shape"]) == frame.shape
    assert np.dtype(ai["typestr"]) == np.uint8
    assert ai["data"][0] == frame.data_ptr
    assert ai.get("strides") in (None, frame.strides)
    a = np.asarray(frame)
    assert a.ctypes.data == frame.data_ptr
    assert_array_equal(a, img.reference())


@pytest.mark.parametrize("key", ["R16", "RGBA16F", "RG32F", "R32UI"])
def test_array_interface_typestr(key, make_texture, capture):
    fmt = BY_KEY[key]
    img = make_texture(fmt, 5, 3, seed=1)
    frame = capture(img, backend="cpu").read(flip=False)
    assert np.dtype(frame.__array_interface__["typestr"]) == fmt.np_dtype
    assert_array_equal(np.asarray(frame), img.reference())
    assert_array_equal(to_numpy(frame), img.reference())


def test_no_cuda_array_interface_on_cpu(rgba):
    _, cap = rgba
    frame = cap.read()
    with pytest.raises(AttributeError):
        frame.__cuda_array_interface__
    assert not hasattr(frame, "__cuda_array_interface__")


# ---------------------------------------------------------------- ownership and refcounts


@pytest.mark.parametrize("consumer", ["numpy", "torch", "array_interface"])
def test_refcount_up_while_consumer_lives(rgba, consumer):
    _, cap = rgba
    frame = cap.read()
    settle()
    base = sys.getrefcount(frame)
    if consumer == "numpy":
        tensor = np.from_dlpack(frame)
    elif consumer == "torch":
        tensor = torch.from_dlpack(frame)
    else:
        tensor = np.asarray(frame)
    assert sys.getrefcount(frame) > base, "the exported buffer must keep its frame alive"
    del tensor
    settle()
    assert sys.getrefcount(frame) == base, "the frame is still referenced after the consumer died"


def test_unconsumed_capsule_releases_frame(rgba):
    _, cap = rgba
    frame = cap.read()
    settle()
    base = sys.getrefcount(frame)
    caps = [frame.__dlpack__(), frame.__dlpack__(max_version=(1, 0))]
    assert sys.getrefcount(frame) > base
    del caps
    settle()
    assert sys.getrefcount(frame) == base, "an unconsumed capsule kept its frame alive"


def test_weakref_dies_after_last_tensor(rgba):
    img, cap = rgba
    ref = img.reference()[::-1]
    frame = cap.read()
    wr = weakref.ref(frame)
    a = np.from_dlpack(frame)
    t = torch.from_dlpack(frame)
    b = np.asarray(frame)
    del frame
    gc.collect()
    assert wr() is not None, "the frame died while tensors still use it"
    del a
    gc.collect()
    assert wr() is not None
    assert_array_equal(t.numpy(), ref)
    del t
    gc.collect()
    assert wr() is not None
    assert_array_equal(b, ref)
    del b
    gc.collect()
    assert wr() is None, "the frame outlived every consumer"


def test_weakref_dies_without_consumers(rgba):
    _, cap = rgba
    wr = weakref.ref(cap.read())
    gc.collect()
    assert wr() is None


def test_close_capture_keeps_tensor_data(rgba):
    img, cap = rgba
    ref = img.reference()
    a = np.from_dlpack(cap.read(flip=False))
    t = torch.from_dlpack(cap.read(flip=False))
    frame = cap.read(flip=False)
    cap.close()
    img.delete()  # the GL side is gone too
    gc.collect()
    assert_array_equal(a, ref)
    assert_array_equal(t.numpy(), ref)
    assert_array_equal(np.from_dlpack(frame), ref)  # a frame can still be exported after close
    assert_array_equal(np.asarray(frame), ref)


def test_capsule_consumed_only_once(rgba):
    img, cap = rgba
    frame = cap.read(flip=False)
    capsule = frame.__dlpack__()
    t = torch.from_dlpack(capsule)
    assert capsule_name(capsule) == "used_dltensor"
    with pytest.raises(Exception):
        torch.from_dlpack(capsule)
    assert_array_equal(t.numpy(), img.reference())


def test_versioned_capsule_consumed_only_once(rgba):
    img, cap = rgba
    frame = cap.read(flip=False)
    capsule = frame.__dlpack__(max_version=(1, 0))
    t = torch.from_dlpack(capsule)
    assert capsule_name(capsule) == "used_dltensor_versioned"
    with pytest.raises(Exception):
        torch.from_dlpack(capsule)
    assert_array_equal(t.numpy(), img.reference())


# ---------------------------------------------------------------- frames never alias


def test_held_frames_never_alias(make_texture, capture):
    fmt = BY_KEY["RGBA8"]
    img = make_texture(fmt, 64, 32, seed=1)
    cap = capture(img, backend="cpu")
    held = []
    for i in range(3):
        img.upload(random_data(fmt, 64, 32, seed=50 + i))
        held.append((cap.read(flip=False), img.reference()))
    ptrs = [f.data_ptr for f, _ in held]
    assert len(set(ptrs)) == 3, f"held frames share memory: {ptrs}"
    for f, ref in held:
        assert_array_equal(to_numpy(f), ref)
    assert not np.array_equal(held[0][1], held[1][1])  # the contents really changed


def test_exported_tensor_not_overwritten_after_frame_dropped(make_texture, capture):
    """The frame object is gone but its buffer is still exported: the pool must not reuse it."""
    fmt = BY_KEY["RGBA8"]
    img = make_texture(fmt, 64, 32, seed=1)
    cap = capture(img, backend="cpu")
    tensors = []
    for i in range(4):
        img.upload(random_data(fmt, 64, 32, seed=60 + i))
        ref = img.reference()
        tensors.append((np.from_dlpack(cap.read(flip=False)), ref))  # frame dropped at once
        gc.collect()
    for i, (a, ref) in enumerate(tensors):
        assert_array_equal(a, ref, err_msg=f"tensor {i} was overwritten by a later read")
    assert len({a.ctypes.data for a, _ in tensors}) == len(tensors)


def test_freed_frames_may_be_reused_and_stay_correct(make_texture, capture):
    fmt = BY_KEY["RGBA8"]
    img = make_texture(fmt, 64, 32, seed=1)
    cap = capture(img, backend="cpu")
    for i in range(10):
        img.upload(random_data(fmt, 64, 32, seed=70 + i))
        assert_array_equal(to_numpy(cap.read(flip=False)), img.reference())
        gc.collect()


def test_frame_is_writable_by_consumer_without_touching_gl(make_texture, capture):
    img = make_texture("RGBA8", 8, 8, seed=1)
    cap = capture(img, backend="cpu")
    ref = img.reference()
    a = np.from_dlpack(cap.read(flip=False))
    a[...] = 0
    assert_array_equal(img.reference(), ref)
    assert_array_equal(to_numpy(cap.read(flip=False)), ref)
