/*
 * gltensor.Buffer: a GL buffer object registered once, mapped as a zero-copy tensor view or copied.
 * gltensor.BufferView: what a map or a read gives, exported through DLPack, __cuda_array_interface__
 * (CUDA) or __array_interface__ (CPU backend), with any dtype and shape that fit the mapped bytes.
 *
 * What is guarded after the mapping ends (Buffer.unmap(), or leaving gltensor.map_buffer's block): the
 * view itself refuses every export (__dlpack__ raises BufferError, the interfaces raise ClosedError).
 * What cannot be: a tensor a framework already made from the view (torch.from_dlpack(view),
 * torch.as_tensor(view), cupy.asarray(view)) points at the mapping with no way to revoke it, as any
 * DLPack consumer does; using such a tensor after the block is the caller's error (undefined results).
 * Copies (Buffer.read) are never revoked: they own their memory.
 */
#include "object.h"
#include "params.h"

#include <stdlib.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <structmember.h>

#include "dlpack_export.h"
#include "core/size_math.h"

/* ---- element types a view may have ---- */
typedef struct {
    const char *name, *typestr;
    uint8_t code, bits;
} view_dtype;

static const view_dtype dtypes[] = {
    {"uint8", "|u1", kDLUInt, 8},    {"int8", "|i1", kDLInt, 8},       {"uint16", "<u2", kDLUInt, 16},
    {"int16", "<i2", kDLInt, 16},    {"uint32", "<u4", kDLUInt, 32},   {"int32", "<i4", kDLInt, 32},
    {"uint64", "<u8", kDLUInt, 64},  {"int64", "<i8", kDLInt, 64},     {"float16", "<f2", kDLFloat, 16},
    {"float32", "<f4", kDLFloat, 32}, {"float64", "<f8", kDLFloat, 64},
};
#define N_DTYPES ((int)(sizeof dtypes / sizeof *dtypes))

/* 'float32', numpy.float32, numpy.dtype('float32'), torch.float32 -> index into dtypes. */
static int parse_view_dtype(PyObject *obj) {
    PyObject *keep = NULL;
    const char *s = glt_py_dtype_name(obj, &keep);
    if (!s) return -1;
    for (int i = 0; i < N_DTYPES; ++i)
        if (!strcmp(s, dtypes[i].name)) {
            Py_DECREF(keep);
            return i;
        }
    Py_DECREF(keep);
    PyErr_Format(PyExc_ValueError,
                 "dtype must be one of uint8, int8, uint16, int16, uint32, int32, uint64, int64, float16, float32, "
                 "float64 (a name, a NumPy or a torch dtype), not %R",
                 obj);
    return -1;
}

/* ---- BufferView ---- */
#define MAX_DIMS GLT_PY_DL_MAX_DIMS

typedef struct BufferObject BufferObject;

typedef struct {
    PyObject_HEAD
    gltensor_state *st;
    BufferObject *buffer; /* the mapped buffer (strong), or NULL for a copy */
    glt_frame *frame;     /* the copy's memory, or NULL for a mapping */
    int valid;            /* 0 once the mapping ended */
    int context_lost;     /* it ended because the buffer's GL context was destroyed */
    unsigned name;
    void *data;
    size_t nbytes;
    glt_memory memory;
    int cuda_device;
    void *stream;
    int read_only;
    int dtype;
    int ndim;
    int64_t shape[MAX_DIMS];
} ViewObject;

struct BufferObject {
    glt_py_object base; /* handle: the glt_buffer */
    ViewObject *view;   /* the live mapping's view (borrowed; it clears itself here when it goes) */
};
static glt_buffer *buf_of(BufferObject *self) { return self->base.handle; }

static PyObject *view_ended(ViewObject *self, PyObject *exc) {
    if (self->context_lost) {
        PyErr_Format(exc,
                     "this view of buffer %u is invalid: the buffer's OpenGL context was destroyed while it was mapped, "
                     "and the mapping (and what was written into it) went with it; leave map_buffer blocks before "
                     "closing the context",
                     self->name);
        return NULL;
    }
    PyErr_Format(exc,
                 "this view of buffer %u was unmapped (its map_buffer block ended, or Buffer.unmap() ran): GL owns "
                 "the memory again; map the buffer again (or use gltensor.read_buffer for a copy that stays valid)",
                 self->name);
    return NULL;
}

static int view_is_cuda(const ViewObject *v) { return v->memory == GLT_MEMORY_CUDA; }

/* Whether the view may still be exported: a copy always; a mapping while its buffer is mapped and the buffer's
 * GL context lives (a mapping goes with its context: the memory is the driver's to free). */
static int view_live(ViewObject *self) {
    if (!self->valid || self->frame) return self->valid;
    if (!self->buffer || !buf_of(self->buffer)) {
        self->valid = 0;
        return 0;
    }
    glt_status s = glt_buffer_check_mapping(buf_of(self->buffer));
    if (s == GLT_OK) return 1;
    self->valid = 0;
    self->context_lost = s == GLT_CLOSED;
    return 0;
}

/* A shape as given: None (all the bytes), an int, or a sequence with at most one -1 (inferred). Converted before
 * anything touches the buffer, because converting runs the caller's Python code (__index__, __iter__). */
typedef struct {
    int given; /* 0: None */
    int ndim, infer;
    int64_t dims[MAX_DIMS];
} shape_arg;

static int parse_shape(PyObject *shape, shape_arg *out) {
    out->given = shape != Py_None;
    out->ndim = 0;
    out->infer = -1;
    if (!out->given) return 0;
    PyObject *seq = PyLong_Check(shape) || PyIndex_Check(shape) ? PyTuple_Pack(1, shape) : PySequence_Tuple(shape);
    if (!seq) return -1;
    Py_ssize_t n = PyTuple_Size(seq);
    if (n < 1 || n > MAX_DIMS) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "shape must have 1 to %d dimensions", MAX_DIMS);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; ++i) {
        long long v = 0;
        if (glt_py_as_int64(PyTuple_GetItem(seq, i), "a shape entry", -1, INT64_MAX, &v) < 0) {
            Py_DECREF(seq);
            return -1;
        }
        if (v == -1 && out->infer >= 0) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_ValueError, "shape may have one -1 (inferred), not two");
            return -1;
        }
        if (v == -1) out->infer = (int)i;
        out->dims[i] = v;
    }
    Py_DECREF(seq);
    out->ndim = (int)n;
    return 0;
}

/* Fits the parsed shape to nbytes of dtype d: the view's shape and the bytes it covers, every product checked
 * (size_math.h). */
static int fit_shape(gltensor_state *st, const shape_arg *sh, size_t nbytes, int d, unsigned name, ViewObject *v,
                     size_t *used) {
    size_t item = dtypes[d].bits / 8;
    if (!sh->given) {
        if (nbytes % item) {
            PyErr_Format(st->errors[GLT_INVALID_ARGUMENT],
                         "buffer %u's %zu bytes are not a whole number of %s elements; pass shape= (or offset=)",
                         name, nbytes, dtypes[d].name);
            return -1;
        }
        v->ndim = 1;
        v->shape[0] = (int64_t)(nbytes / item);
        *used = nbytes;
        return 0;
    }
    v->ndim = sh->ndim;
    int64_t known[MAX_DIMS];
    for (int i = 0; i < sh->ndim; ++i) known[i] = i == sh->infer ? 1 : sh->dims[i];
    size_t per = 0;
    if (!glt_shape_bytes(known, sh->ndim, item, &per)) {
        PyErr_Format(st->errors[GLT_INVALID_ARGUMENT],
                     "a view of that shape and dtype %s would cover more than 2**63 bytes; buffer %u has %zu bytes "
                     "from the offset: ask for a shape that fits",
                     dtypes[d].name, name, nbytes);
        return -1;
    }
    for (int i = 0; i < sh->ndim; ++i) v->shape[i] = sh->dims[i];
    if (sh->infer >= 0) {
        if (per == 0 || nbytes % per) {
            PyErr_Format(st->errors[GLT_INVALID_ARGUMENT],
                         "buffer %u's %zu bytes cannot be split into whole rows of the shape given (%zu bytes each)",
                         name, nbytes, per);
            return -1;
        }
        v->shape[sh->infer] = (int64_t)(nbytes / per);
        per = nbytes;
    }
    *used = per;
    if (*used > nbytes) {
        PyErr_Format(st->errors[GLT_INVALID_ARGUMENT],
                     "shape and dtype %s need %zu bytes but buffer %u has %zu from the offset; ask for a smaller "
                     "shape, or allocate a larger buffer (glBufferData)",
                     dtypes[d].name, *used, name, nbytes);
        return -1;
    }
    if (*used == 0) {
        PyErr_SetString(PyExc_ValueError, "the view would be empty; give a shape with at least one element");
        return -1;
    }
    return 0;
}

static ViewObject *view_new(gltensor_state *st, unsigned name) {
    ViewObject *v = PyObject_New(ViewObject, st->buffer_view_type);
    if (!v) return NULL;
    v->st = st;
    v->buffer = NULL;
    v->frame = NULL;
    v->valid = 1;
    v->context_lost = 0;
    v->name = name;
    v->data = NULL;
    v->nbytes = 0;
    v->memory = GLT_MEMORY_HOST;
    v->cuda_device = -1;
    v->stream = NULL;
    v->read_only = 0;
    v->dtype = 0;
    v->ndim = 0;
    return v;
}

static void view_dealloc(ViewObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    if (self->buffer) {
        if (self->buffer->view == self) self->buffer->view = NULL;
        Py_DECREF(self->buffer);
    }
    glt_frame_destroy(self->frame);
    PyObject_Free(self);
    Py_DECREF(tp);
}

static PyObject *view_dlpack(ViewObject *self, PyObject *args, PyObject *kwargs) {
    char what[64];
    snprintf(what, sizeof what, "the view of buffer %u", self->name);
    glt_py_dlpack_request req;
    if (glt_py_dlpack_parse(args, kwargs, view_is_cuda(self) ? kDLCUDA : kDLCPU, view_is_cuda(self) ? self->cuda_device : 0,
                            what, "copy it in your framework", &req) < 0)
        return NULL;
    if (!view_live(self)) return view_ended(self, PyExc_BufferError);
    if (req.copy) {
        PyErr_SetString(PyExc_BufferError, "this view is the GL buffer's memory and gltensor does not copy it on "
                                           "export; use gltensor.read_buffer for a copy, or copy in your framework");
        return NULL;
    }
    if (!req.versioned && self->read_only) {
        /* A legacy capsule cannot say read-only: refuse rather than hand out writable memory GL reads back
         * as unchanged (mode='read' discards writes). */
        PyErr_Format(PyExc_BufferError,
                     "the view of buffer %u is read-only (mode='read'), which a pre-1.0 DLPack capsule cannot "
                     "express; use a consumer that speaks DLPack 1.0 (max_version), or map with mode='readwrite'",
                     self->name);
        return NULL;
    }
    if (req.sync) {
        glt_status s;
        if (self->frame) s = glt_frame_sync_stream(self->frame, req.consumer);
        /* the legacy default stream asked of a mapping made on it: nothing to order */
        else s = glt_buffer_sync_stream(buf_of(self->buffer),
                                        req.consumer == (void *)(uintptr_t)1 && !self->stream ? NULL : req.consumer);
        if (s != GLT_OK) return glt_py_raise(self->st, s);
    }
    glt_py_dl_tensor t;
    t.data = self->data;
    t.ndim = self->ndim;
    t.strided = 0;
    for (int i = 0; i < self->ndim; ++i) t.shape[i] = self->shape[i];
    t.dtype.code = dtypes[self->dtype].code;
    t.dtype.bits = dtypes[self->dtype].bits;
    t.dtype.lanes = 1;
    t.device_type = view_is_cuda(self) ? kDLCUDA : kDLCPU;
    t.device_id = view_is_cuda(self) ? self->cuda_device : 0;
    t.flags = (self->read_only ? DLPACK_FLAG_BITMASK_READ_ONLY : 0) | (self->frame ? DLPACK_FLAG_BITMASK_IS_COPIED : 0);
    return glt_py_dlpack_capsule((PyObject *)self, &t, req.versioned);
}

static PyObject *view_dlpack_device(ViewObject *self, PyObject *unused) {
    (void)unused;
    if (view_is_cuda(self)) return Py_BuildValue("(ii)", kDLCUDA, self->cuda_device);
    return Py_BuildValue("(ii)", kDLCPU, 0);
}

static PyObject *shape_tuple(const ViewObject *v) { return glt_py_dims_tuple(v->shape, v->ndim); }

static PyObject *interface_dict(ViewObject *self, int cuda) {
    if (!view_live(self)) return view_ended(self, self->st->errors[GLT_CLOSED]);
    if (cuda != view_is_cuda(self)) {
        PyErr_SetString(PyExc_AttributeError,
                        cuda ? "__cuda_array_interface__: this view is in host memory (CPU backend); use "
                               "__array_interface__ or DLPack"
                             : "__array_interface__: this view is in CUDA device memory; use DLPack or "
                               "__cuda_array_interface__");
        return NULL;
    }
    /* CAI v3: consumers order their work after this stream (the map's, or the copy's). */
    return glt_py_array_interface(self->shape, NULL, self->ndim, dtypes[self->dtype].typestr, self->data, self->read_only,
                                  cuda, self->stream);
}

static PyObject *get_cai(ViewObject *self, void *c) {
    (void)c;
    return interface_dict(self, 1);
}
static PyObject *get_array_interface(ViewObject *self, void *c) {
    (void)c;
    return interface_dict(self, 0);
}
static PyObject *view_get_shape(ViewObject *self, void *c) {
    (void)c;
    return shape_tuple(self);
}
static PyObject *view_get_dtype(ViewObject *self, void *c) {
    (void)c;
    return PyUnicode_FromString(dtypes[self->dtype].name);
}
static PyObject *view_get_device(ViewObject *self, void *c) {
    (void)c;
    if (view_is_cuda(self)) return PyUnicode_FromFormat("cuda:%d", self->cuda_device);
    return PyUnicode_FromString("cpu");
}
static PyObject *view_get_nbytes(ViewObject *self, void *c) {
    (void)c;
    return PyLong_FromSize_t(self->nbytes);
}
static PyObject *view_get_data_ptr(ViewObject *self, void *c) {
    (void)c;
    return PyLong_FromVoidPtr(self->data);
}
static PyObject *view_get_valid(ViewObject *self, void *c) {
    (void)c;
    return PyBool_FromLong(view_live(self));
}
static PyObject *view_get_read_only(ViewObject *self, void *c) {
    (void)c;
    return PyBool_FromLong(self->read_only);
}
static PyObject *view_get_is_copy(ViewObject *self, void *c) {
    (void)c;
    return PyBool_FromLong(self->frame != NULL);
}
static PyObject *view_get_stream(ViewObject *self, void *c) {
    (void)c;
    if (!view_is_cuda(self)) Py_RETURN_NONE;
    return PyLong_FromVoidPtr(self->stream);
}

static PyObject *view_repr(ViewObject *self) {
    PyObject *shape = shape_tuple(self);
    if (!shape) return NULL;
    PyObject *r = PyUnicode_FromFormat("<gltensor.BufferView of buffer %u shape=%R dtype=%s device=%s%s%s>",
                                       self->name, shape, dtypes[self->dtype].name,
                                       view_is_cuda(self) ? "cuda" : "cpu", self->frame ? " copy" : "",
                                       view_live(self) ? "" : " unmapped");
    Py_DECREF(shape);
    return r;
}

static PyMethodDef view_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))view_dlpack, METH_VARARGS | METH_KEYWORDS,
     "DLPack export (zero copy). Refused with BufferError once the mapping ended."},
    {"__dlpack_device__", (PyCFunction)view_dlpack_device, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef view_getset[] = {
    {"__cuda_array_interface__", (getter)get_cai, NULL, "CUDA array interface v3 (CUDA backend)", NULL},
    {"__array_interface__", (getter)get_array_interface, NULL, "NumPy array interface (CPU backend)", NULL},
    {"shape", (getter)view_get_shape, NULL, NULL, NULL},
    {"dtype", (getter)view_get_dtype, NULL, "element type name", NULL},
    {"device", (getter)view_get_device, NULL, "'cuda:N' or 'cpu'", NULL},
    {"nbytes", (getter)view_get_nbytes, NULL, NULL, NULL},
    {"data_ptr", (getter)view_get_data_ptr, NULL, "address of the first element", NULL},
    {"valid", (getter)view_get_valid, NULL, "False once the mapping ended (copies stay valid)", NULL},
    {"read_only", (getter)view_get_read_only, NULL, "True for mode='read'", NULL},
    {"is_copy", (getter)view_get_is_copy, NULL, "True for read_buffer's copies", NULL},
    {"stream", (getter)view_get_stream, NULL, "CUDA stream of the map or copy (None on the CPU backend)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot view_slots[] = {
    {Py_tp_dealloc, view_dealloc},
    {Py_tp_methods, view_methods},
    {Py_tp_getset, view_getset},
    {Py_tp_repr, view_repr},
    {Py_tp_doc, "A GL buffer's memory as a tensor: a zero-copy mapping (valid until it is unmapped) or a copy "
                "(Buffer.read). Consume it with torch.from_dlpack, torch.as_tensor, cupy.asarray, jax.dlpack, "
                "numba.cuda.as_cuda_array or numpy.asarray (CPU backend)."},
    {0, NULL},
};

PyType_Spec glt_buffer_view_spec = {
    .name = "gltensor.BufferView",
    .basicsize = sizeof(ViewObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = view_slots,
};

/* ---- Buffer ---- */

/* A mapping ends with its buffer: the view refuses every export from then on. */
static void buffer_on_close(glt_py_object *obj) {
    BufferObject *self = (BufferObject *)obj;
    if (self->view) {
        self->view->valid = 0;
        self->view = NULL;
    }
}
static void buffer_destroy(void *handle) { glt_buffer_destroy(handle); }
static void buffer_info(void *handle, void *out) { glt_buffer_get_info(handle, out); }
GLT_PY_INFO_FITS(glt_buffer_info);
static const glt_py_kind buffer_kind = {
    .closed_message = "gltensor.Buffer of GL %s %u was closed; create a new one",
    .noun = "buffer",
    .destroy = buffer_destroy,
    .info = buffer_info,
    .on_close = buffer_on_close,
};

GLT_PY_SIG(glt_sig_buffer_new, "Buffer.__new__", {"name", GLT_PY_POSITIONAL, NULL, NULL},
           {"backend", GLT_PY_KEYWORD, "'auto'", NULL}, {"cuda_device", GLT_PY_KEYWORD, "None", NULL});

static PyObject *buffer_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *v[3];
    if (glt_py_parse_tuple(&glt_sig_buffer_new, args, kwargs, v) < 0) return NULL;
    unsigned long name = 0;
    PyObject *name_obj = v[0], *backend_obj = v[1], *device_obj = v[2] ? v[2] : Py_None;
    if (glt_py_as_gl_uint(name_obj, "name", &name) < 0) return NULL;
    gltensor_state *st = glt_py_state_of_type(type);
    if (!st) return NULL;
    glt_buffer_desc desc;
    glt_buffer_desc_init(&desc);
    desc.gl_name = (unsigned)name;
    if (backend_obj && glt_py_parse_backend(backend_obj, &desc.backend) < 0) return NULL;
    if (glt_py_as_cuda_device(device_obj, "cuda_device", &desc.cuda_device) < 0) return NULL;
    BufferObject *self = (BufferObject *)glt_py_object_new(type, &buffer_kind, 0);
    if (!self) return NULL;
    self->base.name = desc.gl_name;
    self->view = NULL;
    glt_buffer *buf = NULL;
    glt_status s = glt_buffer_create(&desc, &buf);
    self->base.handle = buf;
    if (s != GLT_OK) {
        Py_DECREF(self);
        return glt_py_raise(st, s);
    }
    return (PyObject *)self;
}

static int parse_offset(PyObject *obj, size_t *offset) {
    long long v = 0;
    if (obj != Py_None && glt_py_as_int64(obj, "offset", 0, INT64_MAX, &v) < 0) return -1;
    *offset = (size_t)v;
    return 0;
}

static const char *const map_modes[] = {"read", "write", "readwrite"};
static const glt_map_mode map_mode_values[] = {GLT_MAP_READ, GLT_MAP_WRITE, GLT_MAP_READ_WRITE};

/* The arguments of map() and read(), converted before the buffer is touched: converting runs the caller's Python
 * code (a dtype's .name, __index__, __iter__, a stream's attributes), which may close the buffer. */
typedef struct {
    int dtype;
    shape_arg shape;
    size_t offset;
    void *stream;
} view_args;

static int parse_view_args(gltensor_state *st, PyObject *dtype_obj, PyObject *shape, PyObject *offset_obj,
                           PyObject *stream_obj, view_args *a) {
    a->dtype = dtype_obj && dtype_obj != Py_None ? parse_view_dtype(dtype_obj) : 0;
    if (a->dtype < 0) return -1;
    if (parse_shape(shape, &a->shape) < 0 || parse_offset(offset_obj, &a->offset) < 0) return -1;
    a->stream = NULL;
    return glt_py_parse_stream(st, stream_obj, &a->stream);
}

/* Bytes from offset to the end of the buffer, as GL says now (refreshing the size). */
static int available(BufferObject *self, size_t offset, size_t *bytes) {
    size_t size = 0;
    glt_status s = glt_buffer_query_size(buf_of(self), &size);
    if (s != GLT_OK) {
        glt_py_raise(self->base.st, s);
        return -1;
    }
    if (offset > size) {
        PyErr_Format(self->base.st->errors[GLT_INVALID_ARGUMENT], "offset %zu is past the end of buffer %u (%zu bytes)",
                     offset, self->base.name, size);
        return -1;
    }
    *bytes = size - offset;
    return 0;
}

/* map(dtype='uint8', shape=None, *, mode='readwrite', stream=None, offset=0) -> BufferView */
GLT_PY_SIG(glt_sig_buffer_map, "Buffer.map", {"dtype", GLT_PY_POSITIONAL, "'uint8'", NULL},
           {"shape", GLT_PY_POSITIONAL, "None", NULL}, {"mode", GLT_PY_KEYWORD, "'readwrite'", NULL},
           {"stream", GLT_PY_KEYWORD, "None", NULL}, {"offset", GLT_PY_KEYWORD, "0", NULL});

static PyObject *buffer_map(BufferObject *self, PyObject *args, PyObject *kwargs) {
    PyObject *arg[5];
    if (glt_py_parse_tuple(&glt_sig_buffer_map, args, kwargs, arg) < 0) return NULL;
    for (int i = 1; i < 5; ++i)
        if (!arg[i]) arg[i] = Py_None;
    PyObject *dtype_obj = arg[0], *shape = arg[1], *mode_obj = arg[2], *stream_obj = arg[3], *offset_obj = arg[4];
    gltensor_state *st = self->base.st;
    int mode_index = 0;
    view_args a;
    if (glt_py_as_choice(mode_obj, "mode", map_modes, 3, 2, &mode_index) < 0 ||
        parse_view_args(st, dtype_obj, shape, offset_obj, stream_obj, &a) < 0)
        return NULL;
    if (!self->base.handle) return glt_py_closed(&self->base);
    glt_buffer_info info;
    if (glt_buffer_get_info(buf_of(self), &info) != GLT_OK) return glt_py_raise(st, GLT_INVALID_ARGUMENT);
    if (info.mapped) {
        PyErr_Format(st->errors[GLT_INVALID_ARGUMENT],
                     "buffer %u is mapped already; leave the first map_buffer block (or call unmap()) before mapping "
                     "it again",
                     self->base.name);
        return NULL;
    }
    if (self->view) { /* a mapping that ended without unmap() (its context was destroyed) */
        self->view->valid = 0;
        self->view = NULL;
    }
    size_t avail = 0, used = 0;
    ViewObject *v = view_new(st, self->base.name);
    if (!v) return NULL;
    if (available(self, a.offset, &avail) < 0 || fit_shape(st, &a.shape, avail, a.dtype, self->base.name, v, &used) < 0) {
        Py_DECREF(v);
        return NULL;
    }
    glt_buffer_mapping m;
    glt_status s = glt_buffer_map(buf_of(self), map_mode_values[mode_index], a.offset, used, a.stream, &m);
    if (s != GLT_OK) {
        Py_DECREF(v);
        return glt_py_raise(st, s);
    }
    v->buffer = (BufferObject *)Py_NewRef(self);
    v->data = m.data;
    v->nbytes = used;
    v->memory = m.memory;
    v->cuda_device = m.cuda_device;
    v->stream = m.stream;
    v->read_only = m.read_only;
    v->dtype = a.dtype;
    self->view = v;
    return (PyObject *)v;
}

/* Ends the mapping. The view is invalidated only once the mapping is gone: an unmap refused (another context
 * current, or none) leaves the buffer mapped and the view valid, to be unmapped again where it can be. */
static PyObject *buffer_unmap(BufferObject *self, PyObject *unused) {
    (void)unused;
    if (!self->base.handle) return glt_py_closed(&self->base);
    glt_status s = glt_buffer_check_mapping(buf_of(self));
    if (s == GLT_OK) s = glt_buffer_unmap(buf_of(self));
    else if (s == GLT_INVALID_ARGUMENT) s = GLT_OK; /* not mapped: nothing to do */
    glt_buffer_info info;
    if (glt_buffer_get_info(buf_of(self), &info) == GLT_OK && !info.mapped && self->view) {
        self->view->valid = 0;
        self->view = NULL;
    }
    if (s != GLT_OK) return glt_py_raise(self->base.st, s);
    Py_RETURN_NONE;
}

/* read(dtype='uint8', shape=None, *, offset=0, stream=None) -> BufferView (a copy) */
GLT_PY_SIG(glt_sig_buffer_read, "Buffer.read", {"dtype", GLT_PY_POSITIONAL, "'uint8'", NULL},
           {"shape", GLT_PY_POSITIONAL, "None", NULL}, {"offset", GLT_PY_KEYWORD, "0", NULL},
           {"stream", GLT_PY_KEYWORD, "None", NULL});

static PyObject *buffer_read(BufferObject *self, PyObject *args, PyObject *kwargs) {
    PyObject *arg[4];
    if (glt_py_parse_tuple(&glt_sig_buffer_read, args, kwargs, arg) < 0) return NULL;
    for (int i = 1; i < 4; ++i)
        if (!arg[i]) arg[i] = Py_None;
    PyObject *dtype_obj = arg[0], *shape = arg[1], *offset_obj = arg[2], *stream_obj = arg[3];
    gltensor_state *st = self->base.st;
    view_args a;
    if (parse_view_args(st, dtype_obj, shape, offset_obj, stream_obj, &a) < 0) return NULL;
    if (!self->base.handle) return glt_py_closed(&self->base);
    int d = a.dtype;
    size_t avail = 0, used = 0;
    ViewObject *v = view_new(st, self->base.name);
    if (!v) return NULL;
    if (available(self, a.offset, &avail) < 0 || fit_shape(st, &a.shape, avail, d, self->base.name, v, &used) < 0) {
        Py_DECREF(v);
        return NULL;
    }
    glt_frame *f = NULL;
    glt_status s = glt_buffer_read(buf_of(self), a.offset, used, a.stream, &f);
    if (s != GLT_OK) {
        Py_DECREF(v);
        return glt_py_raise(st, s);
    }
    glt_frame_info fi;
    glt_frame_get_info(f, &fi);
    v->frame = f;
    v->data = fi.data;
    v->nbytes = used;
    v->memory = fi.memory;
    v->cuda_device = fi.memory == GLT_MEMORY_CUDA ? fi.cuda_device : -1;
    v->stream = fi.stream;
    v->dtype = d;
    return (PyObject *)v;
}

static PyObject *buf_get_name(BufferObject *self, void *c) {
    (void)c;
    return PyLong_FromUnsignedLong(self->base.name);
}

static PyObject *buffer_repr(BufferObject *self) {
    if (!buf_of(self)) return PyUnicode_FromFormat("<gltensor.Buffer %u closed>", self->base.name);
    glt_buffer_info i;
    glt_buffer_get_info(buf_of(self), &i);
    return PyUnicode_FromFormat("<gltensor.Buffer %u %zu bytes backend=%s%s>", self->base.name, i.bytes,
                                glt_backend_name(i.backend), i.mapped ? " mapped" : "");
}

static PyMethodDef buffer_methods[] = {
    {"map", (PyCFunction)(void (*)(void))buffer_map, METH_VARARGS | METH_KEYWORDS,
     "map(dtype='uint8', shape=None, *, mode='readwrite', stream=None, offset=0) -> BufferView\n\nMaps the buffer "
     "and returns a zero-copy view of shape (default: all of it from offset) and dtype. mode='read': read only; "
     "'write': the mapped range's old contents are discarded (write all you need); 'readwrite': modify in place. "
     "GL must not use the buffer until unmap(). gltensor.map_buffer() wraps this in a with block."},
    {"unmap", (PyCFunction)buffer_unmap, METH_NOARGS,
     "Hands the buffer back to GL (GL work issued afterwards sees the writes) and invalidates the view."},
    {"read", (PyCFunction)(void (*)(void))buffer_read, METH_VARARGS | METH_KEYWORDS,
     "read(dtype='uint8', shape=None, *, offset=0, stream=None) -> BufferView\n\nA copy of the buffer's bytes "
     "(device memory on the CUDA backend), which stays valid."},
    GLT_PY_LIFETIME_METHODS("Unmap if mapped and release the registration (idempotent)."),
    {NULL, NULL, 0, NULL},
};

#define I(pyname, doc, as, member) GLT_PY_INFO(pyname, doc, as, glt_buffer_info, member)
static PyGetSetDef buffer_getset[] = {
    {"name", (getter)buf_get_name, NULL, "GL name of the buffer", NULL},
    I("size", "bytes, as of creation or the last map/read", GLT_PY_SIZE, bytes),
    I("backend", "'cuda' or 'cpu'", GLT_PY_BACKEND, backend),
    I("backend_reason", "why this backend runs", GLT_PY_STR, backend_reason),
    I("cuda_device", "CUDA ordinal, or None on the CPU backend", GLT_PY_DEVICE, cuda_device),
    I("mapped", "True between map() and unmap()", GLT_PY_BOOL, mapped),
    GLT_PY_CLOSED_GETTER,
    {NULL, NULL, NULL, NULL, NULL},
};
#undef I

static PyType_Slot buffer_slots[] = {
    {Py_tp_new, buffer_new},
    {Py_tp_dealloc, glt_py_dealloc},
    {Py_tp_methods, buffer_methods},
    {Py_tp_getset, buffer_getset},
    {Py_tp_repr, buffer_repr},
    {Py_tp_doc, "Buffer(name, *, backend='auto', cuda_device=None)\n\nA GL buffer object (vertex, index, shader "
                "storage, pixel buffer) of the context current in this thread, registered once; map() gives a "
                "zero-copy tensor view until unmap(), read() a copy."},
    {0, NULL},
};

PyType_Spec glt_buffer_spec = {
    .name = "gltensor.Buffer",
    .basicsize = sizeof(BufferObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = buffer_slots,
};
