/*
 * DLPack export for frames and buffer views. The capsule follows NumPy's pattern: one allocation holds
 * the managed tensor, shape and strides; the owner reference is taken only once the capsule exists; the
 * deleter may run without the GIL or after interpreter shutdown.
 */
#include "dlpack_export.h"
#include "params.h"

#include <stdlib.h>

static const char VERSIONED_NAME[] = "dltensor_versioned";
static const char LEGACY_NAME[] = "dltensor";

static int parse_max_version(PyObject *obj, int *major) {
    *major = 0;
    if (obj == Py_None) return 0;
    if (!PyTuple_Check(obj) || PyTuple_Size(obj) < 1) {
        PyErr_SetString(PyExc_TypeError, "max_version must be None or a (major, minor) tuple");
        return -1;
    }
    long long m = 0;
    if (glt_py_as_int64(PyTuple_GetItem(obj, 0), "max_version's major", 0, INT64_MAX, &m) < 0) return -1;
    *major = m > INT32_MAX ? INT32_MAX : (int)m; /* any newer major than ours asks for the newest we have */
    return 0;
}

static int check_device(PyObject *dl_device, int device_type, int device_id, const char *what, const char *hint) {
    if (dl_device == Py_None) return 0;
    if (!PyTuple_Check(dl_device)) { /* PyArg_ParseTuple would raise SystemError on a non-tuple */
        PyObject *type_name = glt_py_type_name(dl_device);
        if (type_name)
            PyErr_Format(PyExc_TypeError, "dl_device must be a (device_type, device_id) tuple, not %.80U", type_name);
        Py_XDECREF(type_name);
        return -1;
    }
    int t, id;
    if (!PyArg_ParseTuple(dl_device, "ii:dl_device", &t, &id)) return -1;
    if (t != device_type || id != device_id) {
        PyErr_Format(PyExc_BufferError, "%s lives on DLPack device (%d, %d) and gltensor does not copy across "
                                        "devices; %s",
                     what, device_type, device_id, hint);
        return -1;
    }
    return 0;
}

/* Streams, as the DLPack Python spec defines them for CUDA: None = legacy default stream, -1 = do not
 * synchronise, 1 = legacy default, 2 = per-thread default, else a handle; 0 is ambiguous. Host memory
 * takes None (or -1) only. */
static int parse_stream(PyObject *stream, int cuda, const char *what, glt_py_dlpack_request *req) {
    req->sync = cuda;
    req->consumer = cuda ? (void *)(uintptr_t)1 : NULL;
    if (stream == Py_None) return 0;
    if (!cuda) {
        int minus_one = PyLong_Check(stream) && PyLong_AsLong(stream) == -1 && !PyErr_Occurred();
        PyErr_Clear();
        if (minus_one) return 0;
        PyErr_Format(PyExc_BufferError, "stream must be None for %s in host memory (CPU backend; no stream applies)",
                     what);
        return -1;
    }
    if (!PyLong_Check(stream)) {
        PyErr_SetString(PyExc_TypeError, "stream must be None or an int CUDA stream handle");
        return -1;
    }
    long long v = PyLong_AsLongLong(stream);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v == 0) {
        PyErr_SetString(PyExc_ValueError, "stream=0 is ambiguous under the DLPack spec; pass 1 for the legacy "
                                          "default stream, 2 for the per-thread one, or a stream handle");
        return -1;
    }
    if (v < -1) {
        PyErr_Format(PyExc_ValueError, "stream=%lld is not a CUDA stream handle", v);
        return -1;
    }
    if (v == -1) req->sync = 0;
    else req->consumer = (void *)(uintptr_t)v;
    return 0;
}

/* The array API's __dlpack__(stream=None, *, max_version=None, dl_device=None, copy=None). */
GLT_PY_SIG(glt_sig_dlpack, "__dlpack__", {"stream", GLT_PY_POSITIONAL, "None", NULL},
           {"max_version", GLT_PY_KEYWORD, "None", NULL}, {"dl_device", GLT_PY_KEYWORD, "None", NULL},
           {"copy", GLT_PY_KEYWORD, "None", NULL});

int glt_py_dlpack_parse(PyObject *args, PyObject *kwargs, int device_type, int device_id, const char *what,
                        const char *device_hint, glt_py_dlpack_request *req) {
    PyObject *v[4];
    if (glt_py_parse_tuple(&glt_sig_dlpack, args, kwargs, v) < 0) return -1;
    for (int i = 0; i < 4; ++i)
        if (!v[i]) v[i] = Py_None;
    PyObject *stream = v[0], *max_version = v[1], *dl_device = v[2], *copy = v[3];
    int major;
    if (parse_max_version(max_version, &major) < 0) return -1;
    req->versioned = major >= 1;
    if (check_device(dl_device, device_type, device_id, what, device_hint) < 0) return -1;
    req->copy = 0;
    if (copy != Py_None && (req->copy = PyObject_IsTrue(copy)) < 0) return -1;
    return parse_stream(stream, device_type == kDLCUDA, what, req);
}

/* One allocation: the managed struct, then shape and strides. */
typedef struct {
    DLManagedTensorVersioned managed;
    int64_t shape[GLT_PY_DL_MAX_DIMS], strides[GLT_PY_DL_MAX_DIMS];
} versioned_block;
typedef struct {
    DLManagedTensor managed;
    int64_t shape[GLT_PY_DL_MAX_DIMS], strides[GLT_PY_DL_MAX_DIMS];
} legacy_block;

static void release_owner(void *owner) {
    /* Consumers may call the deleter from any thread, with or without the GIL, even at exit. */
    if (!Py_IsInitialized()) return;
    PyGILState_STATE g = PyGILState_Ensure();
    Py_XDECREF((PyObject *)owner);
    PyGILState_Release(g);
}

static void versioned_deleter(DLManagedTensorVersioned *m) {
    void *owner = m->manager_ctx;
    free(m);
    release_owner(owner);
}

static void legacy_deleter(DLManagedTensor *m) {
    void *owner = m->manager_ctx;
    free(m);
    release_owner(owner);
}

/* Capsule destructors: only an unconsumed capsule still owns its tensor. */
static void versioned_capsule_destructor(PyObject *capsule) {
    if (!PyCapsule_IsValid(capsule, VERSIONED_NAME)) return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    DLManagedTensorVersioned *m = PyCapsule_GetPointer(capsule, VERSIONED_NAME);
    if (m && m->deleter) m->deleter(m);
    PyErr_Restore(type, value, tb);
}

static void legacy_capsule_destructor(PyObject *capsule) {
    if (!PyCapsule_IsValid(capsule, LEGACY_NAME)) return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    DLManagedTensor *m = PyCapsule_GetPointer(capsule, LEGACY_NAME);
    if (m && m->deleter) m->deleter(m);
    PyErr_Restore(type, value, tb);
}

static void fill_tensor(DLTensor *dl, const glt_py_dl_tensor *t, int64_t *shape, int64_t *strides) {
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; --i) {
        shape[i] = t->shape[i];
        strides[i] = t->strided ? t->strides[i] : s;
        s *= t->shape[i];
    }
    dl->data = t->data;
    dl->device.device_type = (DLDeviceType)t->device_type;
    dl->device.device_id = t->device_id;
    dl->ndim = t->ndim;
    dl->dtype = t->dtype;
    dl->shape = shape;
    dl->strides = strides;
    dl->byte_offset = 0;
}

PyObject *glt_py_dlpack_capsule(PyObject *owner, const glt_py_dl_tensor *t, int versioned) {
    PyObject *capsule;
    if (t->ndim < 0 || t->ndim > GLT_PY_DL_MAX_DIMS) {
        PyErr_Format(PyExc_SystemError, "gltensor: a %d-dimensional tensor cannot be exported", t->ndim);
        return NULL;
    }
    if (versioned) {
        versioned_block *b = calloc(1, sizeof *b);
        if (!b) return PyErr_NoMemory();
        b->managed.version.major = DLPACK_MAJOR_VERSION;
        b->managed.version.minor = DLPACK_MINOR_VERSION;
        b->managed.flags = t->flags;
        b->managed.deleter = versioned_deleter;
        fill_tensor(&b->managed.dl_tensor, t, b->shape, b->strides);
        capsule = PyCapsule_New(&b->managed, VERSIONED_NAME, versioned_capsule_destructor);
        if (!capsule) {
            free(b);
            return NULL;
        }
        b->managed.manager_ctx = Py_NewRef(owner);
    } else {
        legacy_block *b = calloc(1, sizeof *b);
        if (!b) return PyErr_NoMemory();
        b->managed.deleter = legacy_deleter;
        fill_tensor(&b->managed.dl_tensor, t, b->shape, b->strides);
        capsule = PyCapsule_New(&b->managed, LEGACY_NAME, legacy_capsule_destructor);
        if (!capsule) {
            free(b);
            return NULL;
        }
        b->managed.manager_ctx = Py_NewRef(owner);
    }
    return capsule;
}

PyObject *glt_py_dims_tuple(const int64_t *v, int n) {
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; ++i) {
        PyObject *x = PyLong_FromLongLong(v[i]);
        if (!x) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SetItem(t, i, x);
    }
    return t;
}

PyObject *glt_py_array_interface(const int64_t *shape, const int64_t *strides_bytes, int ndim, const char *typestr,
                                 void *data, int read_only, int cuda, void *stream) {
    PyObject *strides = strides_bytes ? glt_py_dims_tuple(strides_bytes, ndim) : Py_NewRef(Py_None);
    if (!strides) return NULL;
    PyObject *d = Py_BuildValue("{s:N,s:s,s:(NO),s:i,s:N}", "shape", glt_py_dims_tuple(shape, ndim), "typestr", typestr,
                                "data", PyLong_FromVoidPtr(data), read_only ? Py_True : Py_False, "version", 3,
                                "strides", strides);
    if (!d || !cuda) return d;
    uintptr_t s = (uintptr_t)stream;
    PyObject *handle = PyLong_FromUnsignedLongLong(s ? s : 1);
    if (!handle || PyDict_SetItemString(d, "stream", handle) < 0) {
        Py_XDECREF(handle);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(handle);
    return d;
}
