/*
 * What the extension accepts from other libraries: CUDA streams (raw handles,
 * torch / cupy / numba stream objects) and out= tensors (CUDA array interface,
 * DLPack, NumPy array interface), each turned into the plain C descriptions of
 * gltensor.h.
 */
#include "ext.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dlpack.h"

static int stream_from_int(gltensor_state *st, PyObject *v, void **stream) {
    long long h = PyLong_AsLongLong(v);
    if (h == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        unsigned long long u = PyLong_AsUnsignedLongLong(v);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) return -1;
        *stream = (void *)(uintptr_t)u;
        return 0;
    }
    if (h < 0) {
        PyErr_Format(st->errors[GLT_INVALID_ARGUMENT],
                     "stream=%lld is not a CUDA stream handle; pass a stream object (torch.cuda.Stream, "
                     "cupy.cuda.Stream), its handle, or None for CUDA's legacy default stream",
                     h);
        return -1;
    }
    /* Handle 0 is CUDA's default stream (torch's default stream reports 0); NULL means "the object's
     * own stream" in the C API, so name the legacy default stream explicitly. */
    *stream = (void *)(uintptr_t)(h == 0 ? 1 : h);
    return 0;
}

int glt_py_parse_stream(gltensor_state *st, PyObject *obj, void **stream) {
    *stream = NULL;
    if (obj == Py_None) return 0;
    if (PyLong_Check(obj)) return stream_from_int(st, obj, stream);
    /* torch.cuda.Stream.cuda_stream, cupy.cuda.Stream.ptr, numba's stream.handle (a ctypes c_void_p). */
    PyObject *attrs[2] = {st->str_cuda_stream, st->str_ptr};
    for (int i = 0; i < 2; ++i) {
        PyObject *v = PyObject_GetAttr(obj, attrs[i]);
        if (v) {
            int rc = PyLong_Check(v) ? stream_from_int(st, v, stream) : -2;
            Py_DECREF(v);
            if (rc != -2) return rc;
        } else {
            PyErr_Clear();
        }
    }
    PyObject *h = PyObject_GetAttr(obj, st->str_handle);
    if (h) {
        PyObject *v = PyLong_Check(h) ? Py_NewRef(h) : PyObject_GetAttr(h, st->str_value);
        Py_DECREF(h);
        if (v && (PyLong_Check(v) || v == Py_None)) {
            int rc = v == Py_None ? 0 : stream_from_int(st, v, stream);
            Py_DECREF(v);
            return rc;
        }
        Py_XDECREF(v);
    }
    PyErr_Clear();
    PyObject *type_name = glt_py_type_name(obj);
    if (type_name)
        PyErr_Format(st->errors[GLT_INVALID_ARGUMENT],
                     "stream must be None, an int CUDA stream handle, or a stream object with .cuda_stream (torch), "
                     ".ptr (cupy) or .handle (numba); got %.100U",
                     type_name);
    Py_XDECREF(type_name);
    return -1;
}

static int dtype_from_typestr(gltensor_state *st, const char *ts, glt_dtype *out) {
    /* '|u1', '<u2', '<u4', '<f2', '<f4' (little-endian hosts: '=' and '|' are accepted too) */
    if (!ts || strlen(ts) < 3 || ts[0] == '>') goto bad;
    int size = atoi(ts + 2);
    if (ts[1] == 'u' && size == 1) *out = GLT_DTYPE_UINT8;
    else if (ts[1] == 'u' && size == 2) *out = GLT_DTYPE_UINT16;
    else if (ts[1] == 'u' && size == 4) *out = GLT_DTYPE_UINT32;
    else if (ts[1] == 'f' && size == 2) *out = GLT_DTYPE_FLOAT16;
    else if (ts[1] == 'f' && size == 4) *out = GLT_DTYPE_FLOAT32;
    else goto bad;
    return 0;
bad:
    PyErr_Format(st->errors[GLT_INVALID_ARGUMENT],
                 "out= has element type '%s', which no capturable format produces; use uint8, uint16, uint32, "
                 "float16 or float32 to match the capture's dtype",
                 ts ? ts : "?");
    return -1;
}

static int dtype_from_dl(gltensor_state *st, DLDataType t, glt_dtype *out) {
    if (t.lanes == 1 && t.code == kDLBfloat && t.bits == 16) *out = GLT_DTYPE_BFLOAT16;
    else if (t.lanes == 1 && t.code == kDLUInt && t.bits == 8) *out = GLT_DTYPE_UINT8;
    else if (t.lanes == 1 && t.code == kDLUInt && t.bits == 16) *out = GLT_DTYPE_UINT16;
    else if (t.lanes == 1 && t.code == kDLUInt && t.bits == 32) *out = GLT_DTYPE_UINT32;
    else if (t.lanes == 1 && t.code == kDLFloat && t.bits == 16) *out = GLT_DTYPE_FLOAT16;
    else if (t.lanes == 1 && t.code == kDLFloat && t.bits == 32) *out = GLT_DTYPE_FLOAT32;
    else {
        PyErr_Format(st->errors[GLT_INVALID_ARGUMENT],
                     "out= has DLPack dtype (code %d, %d bits, %d lanes), which no capturable format produces; "
                     "use uint8, uint16, uint32, float16, bfloat16 or float32 to match what the read gives",
                     t.code, t.bits, t.lanes);
        return -1;
    }
    return 0;
}

static int shape_error(gltensor_state *st, Py_ssize_t ndim) {
    PyErr_Format(st->errors[GLT_INVALID_ARGUMENT],
                 "out= has %zd dimensions; it must be (height, width, channels), also for one-channel formats, or "
                 "(count, height, width, channels) for batches and atlases",
                 ndim);
    return -1;
}

/* Compact row-major byte strides for v->shape[0..ndim). */
static void compact_strides(glt_buffer_view *v) {
    int64_t s = (int64_t)glt_dtype_size(v->dtype);
    for (int i = v->ndim - 1; i >= 0; --i) {
        v->strides_bytes[i] = s;
        s *= v->shape[i];
    }
}

/* Fills shape and byte strides from an interface dict ('shape', 'strides', 'typestr', 'data'). */
static int view_from_interface(gltensor_state *st, PyObject *d, glt_buffer_view *v, void **stream_hint) {
    if (!PyDict_Check(d)) {
        PyErr_SetString(st->errors[GLT_INVALID_ARGUMENT], "out='s array interface is not a dict");
        return -1;
    }
    PyObject *shape = PyDict_GetItemString(d, "shape");
    PyObject *typestr = PyDict_GetItemString(d, "typestr");
    PyObject *data = PyDict_GetItemString(d, "data");
    PyObject *strides = PyDict_GetItemString(d, "strides");
    if (!shape || !typestr || !data || !PyTuple_Check(shape) || !PyTuple_Check(data) || PyTuple_Size(data) < 2) {
        PyErr_SetString(st->errors[GLT_INVALID_ARGUMENT], "out='s array interface lacks shape, typestr or data");
        return -1;
    }
    Py_ssize_t ndim = PyTuple_Size(shape);
    if (ndim != 3 && ndim != 4) return shape_error(st, ndim);
    v->ndim = (int)ndim;
    const char *ts = PyUnicode_AsUTF8AndSize(typestr, NULL);
    if (!ts || dtype_from_typestr(st, ts, &v->dtype) < 0) return -1;
    v->data = PyLong_AsVoidPtr(PyTuple_GetItem(data, 0));
    if (!v->data && PyErr_Occurred()) return -1;
    v->read_only = PyObject_IsTrue(PyTuple_GetItem(data, 1));
    for (int i = 0; i < v->ndim; ++i) {
        v->shape[i] = PyLong_AsLongLong(PyTuple_GetItem(shape, i));
        if (v->shape[i] == -1 && PyErr_Occurred()) return -1;
    }
    if (!strides || strides == Py_None) {
        compact_strides(v);
    } else {
        if (!PyTuple_Check(strides) || PyTuple_Size(strides) != v->ndim) return shape_error(st, -1);
        for (int i = 0; i < v->ndim; ++i) {
            v->strides_bytes[i] = PyLong_AsLongLong(PyTuple_GetItem(strides, i));
            if (v->strides_bytes[i] == -1 && PyErr_Occurred()) return -1;
        }
    }
    if (stream_hint) {
        PyObject *s = PyDict_GetItemString(d, "stream");
        if (s && PyLong_Check(s)) {
            long long h = PyLong_AsLongLong(s);
            if (h > 0) *stream_hint = (void *)(uintptr_t)h;
            else PyErr_Clear();
        }
    }
    return 0;
}

/* Reads a DLPack capsule (either kind) without consuming it: the capsule stays the owner. */
static int view_from_capsule(gltensor_state *st, PyObject *capsule, glt_buffer_view *v) {
    DLTensor *t;
    uint64_t flags = 0;
    if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
        DLManagedTensorVersioned *m = PyCapsule_GetPointer(capsule, "dltensor_versioned");
        t = &m->dl_tensor;
        flags = m->flags;
    } else if (PyCapsule_IsValid(capsule, "dltensor")) {
        t = &((DLManagedTensor *)PyCapsule_GetPointer(capsule, "dltensor"))->dl_tensor;
    } else {
        PyErr_SetString(st->errors[GLT_INVALID_ARGUMENT], "out.__dlpack__() did not return a DLPack capsule");
        return -1;
    }
    if (t->ndim != 3 && t->ndim != 4) return shape_error(st, t->ndim);
    v->ndim = t->ndim;
    if (dtype_from_dl(st, t->dtype, &v->dtype) < 0) return -1;
    v->data = (char *)t->data + t->byte_offset;
    v->read_only = (flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
    size_t es = glt_dtype_size(v->dtype);
    for (int i = 0; i < v->ndim; ++i) v->shape[i] = t->shape[i];
    if (t->strides) {
        for (int i = 0; i < v->ndim; ++i) v->strides_bytes[i] = t->strides[i] * (int64_t)es;
    } else {
        compact_strides(v);
    }
    switch (t->device.device_type) {
    case kDLCUDA:
    case kDLCUDAManaged:
        v->memory = GLT_MEMORY_CUDA;
        v->cuda_device = t->device.device_id;
        break;
    case kDLCPU:
    case kDLCUDAHost:
        v->memory = GLT_MEMORY_HOST;
        v->cuda_device = -1;
        break;
    default:
        PyErr_Format(st->errors[GLT_INVALID_ARGUMENT],
                     "out= lives on DLPack device type %d; gltensor writes to CUDA or CPU memory only",
                     (int)t->device.device_type);
        return -1;
    }
    return 0;
}

static PyObject *call_dlpack(PyObject *obj, void *write_stream, int want_cuda) {
    PyObject *meth = PyObject_GetAttrString(obj, "__dlpack__");
    if (!meth) return NULL;
    PyObject *kwargs = Py_BuildValue("{s:(ii)}", "max_version", 1, 0);
    /* Streams apply only to device memory: a CPU tensor's owner would refuse one. */
    PyObject *dev = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
    int on_device = 1;
    if (dev && PyTuple_Check(dev) && PyTuple_Size(dev) >= 1) {
        long t = PyLong_AsLong(PyTuple_GetItem(dev, 0));
        on_device = t == kDLCUDA || t == kDLCUDAManaged;
    }
    Py_XDECREF(dev);
    PyErr_Clear();
    if (kwargs && want_cuda && on_device) {
        /* Ask the owner to order its pending work before our write on write_stream. */
        PyObject *s = PyLong_FromVoidPtr(write_stream ? write_stream : (void *)(uintptr_t)1);
        if (!s || PyDict_SetItemString(kwargs, "stream", s) < 0) Py_CLEAR(kwargs);
        Py_XDECREF(s);
    }
    PyObject *empty = PyTuple_New(0);
    PyObject *capsule = (kwargs && empty) ? PyObject_Call(meth, empty, kwargs) : NULL;
    if (!capsule && PyErr_ExceptionMatches(PyExc_TypeError)) {
        /* A pre-1.0 producer that does not know max_version. */
        PyErr_Clear();
        PyObject_DelItemString(kwargs, "max_version");
        capsule = PyObject_Call(meth, empty, kwargs);
    }
    Py_XDECREF(empty);
    Py_XDECREF(kwargs);
    Py_DECREF(meth);
    return capsule;
}

int glt_py_buffer_view(gltensor_state *st, PyObject *obj, int want_cuda, void *write_stream, glt_buffer_view *v,
                       PyObject **keep, void **stream_hint) {
    memset(v, 0, sizeof *v);
    *keep = NULL;
    v->cuda_device = -1;
    if (want_cuda) {
        PyObject *cai = PyObject_GetAttrString(obj, "__cuda_array_interface__");
        if (cai && PyDict_Check(cai)) {
            /* Types without an array-interface string (torch's bfloat16 says '<V2') go through DLPack. */
            PyObject *ts = PyDict_GetItemString(cai, "typestr");
            const char *t = ts && PyUnicode_Check(ts) ? PyUnicode_AsUTF8AndSize(ts, NULL) : NULL;
            if (t && strlen(t) >= 2 && t[1] == 'V') Py_CLEAR(cai);
        }
        if (cai) {
            int rc = view_from_interface(st, cai, v, stream_hint);
            Py_DECREF(cai);
            v->memory = GLT_MEMORY_CUDA; /* the core checks the pointer's device */
            return rc;
        }
        PyErr_Clear();
    } else {
        PyObject *ai = PyObject_GetAttrString(obj, "__array_interface__");
        if (ai) {
            int rc = view_from_interface(st, ai, v, NULL);
            Py_DECREF(ai);
            v->memory = GLT_MEMORY_HOST;
            return rc;
        }
        PyErr_Clear();
    }
    if (PyObject_HasAttrString(obj, "__dlpack__")) {
        PyObject *capsule = call_dlpack(obj, write_stream, want_cuda);
        if (!capsule) {
            if (PyErr_ExceptionMatches(PyExc_BufferError)) {
                /* NumPy refuses legacy export of read-only arrays with BufferError. */
                PyObject *type, *value, *tb;
                PyErr_Fetch(&type, &value, &tb);
                PyErr_Format(st->errors[GLT_INVALID_ARGUMENT], "out= cannot be written through DLPack: %S",
                             value ? value : Py_None);
                Py_XDECREF(type);
                Py_XDECREF(value);
                Py_XDECREF(tb);
            }
            return -1;
        }
        if (view_from_capsule(st, capsule, v) < 0) {
            Py_DECREF(capsule);
            return -1;
        }
        *keep = capsule;
        return 0;
    }
    PyObject *type_name = glt_py_type_name(obj);
    if (type_name)
        PyErr_Format(st->errors[GLT_INVALID_ARGUMENT],
                     "out= must be a tensor exposing %s or __dlpack__ (torch, cupy, jax, numba, numpy); got %.100U",
                     want_cuda ? "__cuda_array_interface__" : "__array_interface__", type_name);
    Py_XDECREF(type_name);
    return -1;
}

int glt_py_parse_channels(PyObject *obj, int channels[4], int *n_channels, const char *bad_message) {
    if (PyUnicode_Check(obj)) {
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(obj, &n);
        if (!s) return -1;
        if (n < 1 || n > 4) goto bad;
        for (Py_ssize_t i = 0; i < n; ++i) {
            const char *p = s[i] ? strchr("rgba", s[i] | 0x20) : NULL;
            if (!p) goto bad;
            channels[i] = (int)(p - "rgba");
        }
        *n_channels = (int)n;
        return 0;
    }
    PyObject *seq = glt_py_as_tuple(obj, "channels must be a string like 'rgb' or 'bgr', or a tuple of indices");
    if (!seq) return -1;
    Py_ssize_t n = PyTuple_Size(seq);
    if (n < 1 || n > 4) {
        Py_DECREF(seq);
        goto bad;
    }
    for (Py_ssize_t i = 0; i < n; ++i) {
        /* Whether the index names a channel of the format is the core's check (its message names the format);
         * here only that it is an int as given: 2**32 + 1 is no channel, where a cast made it channel 1. */
        if (glt_py_as_int(PyTuple_GetItem(seq, i), "a channel index", INT32_MIN, INT32_MAX, &channels[i]) < 0) {
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    *n_channels = (int)n;
    return 0;
bad:
    PyErr_SetString(PyExc_ValueError, bad_message);
    return -1;
}

