/*
 * gltensor.Frame: one read's buffer, exported without copies through DLPack
 * (versioned and legacy capsules), __cuda_array_interface__ v3 and, on the CPU
 * backend, __array_interface__. The buffer goes back to the capture's pool when
 * the frame and every tensor made from it are gone.
 *
 * The capsules and the __dlpack__ arguments are dlpack_export.c's, shared with
 * the buffer views.
 */
#include "ext.h"

#include <stdlib.h>
#include <structmember.h>

#include "dlpack_export.h"

typedef struct {
    PyObject_HEAD
    gltensor_state *st;
    glt_frame *frame;
    glt_frame_info info;
    size_t image_stride; /* bytes between a batch's images (glt_frame_image_stride) */
    PyObject *weakreflist;
} FrameObject;

PyObject *glt_py_frame_new(gltensor_state *st, glt_frame *frame) {
    FrameObject *self = PyObject_New(FrameObject, st->frame_type);
    if (!self) {
        glt_frame_destroy(frame);
        return NULL;
    }
    self->st = st;
    self->frame = frame;
    self->weakreflist = NULL;
    self->info.size = sizeof self->info;
    glt_frame_get_info(frame, &self->info);
    self->image_stride = glt_frame_image_stride(frame);
    return (PyObject *)self;
}

static void frame_dealloc(FrameObject *self) {
    if (self->weakreflist) PyObject_ClearWeakRefs((PyObject *)self);
    glt_frame_destroy(self->frame);
    glt_py_free_instance((PyObject *)self);
}

const char *glt_py_typestr(glt_dtype dtype) {
    switch (dtype) {
    case GLT_DTYPE_UINT8: return "|u1";
    case GLT_DTYPE_UINT16: return "<u2";
    case GLT_DTYPE_UINT32: return "<u4";
    case GLT_DTYPE_FLOAT16: return "<f2";
    case GLT_DTYPE_FLOAT32: return "<f4";
    case GLT_DTYPE_BFLOAT16: return "<V2"; /* no standard type string; interface_dict refuses it */
    }
    return "|V1";
}

static DLDataType dl_dtype(glt_dtype dtype) {
    DLDataType t;
    t.lanes = 1;
    t.bits = (uint8_t)(glt_dtype_size(dtype) * 8);
    t.code = dtype == GLT_DTYPE_BFLOAT16                                  ? kDLBfloat
             : (dtype == GLT_DTYPE_FLOAT16 || dtype == GLT_DTYPE_FLOAT32) ? kDLFloat
                                                                          : kDLUInt;
    return t;
}

static int is_cuda(const FrameObject *self) { return self->info.memory == GLT_MEMORY_CUDA; }

/* ---- DLPack (dlpack_export.c) ---- */

/* The frame's axes: [count,] then (H, W, C) or (C, H, W). Returns the number of dimensions. */
static int frame_dims(const glt_frame_info *info, int64_t *dims) {
    int nd = 0;
    if (info->count > 0) dims[nd++] = info->count;
    if (info->layout == GLT_LAYOUT_CHW) {
        dims[nd++] = info->channels;
        dims[nd++] = info->height;
        dims[nd++] = info->width;
    } else {
        dims[nd++] = info->height;
        dims[nd++] = info->width;
        dims[nd++] = info->channels;
    }
    return nd;
}

/* Byte strides of the frame's axes. Compact for every read but a zero-copy view of shared slots (HWC, whose rows
 * and images keep the slots' padding). Returns 1 when they differ from C-contiguous strides. */
static int frame_strides(const glt_frame_info *info, size_t image_stride, int64_t *strides) {
    int64_t dims[GLT_PY_DL_MAX_DIMS];
    int nd = frame_dims(info, dims);
    int64_t s = (int64_t)glt_dtype_size(info->dtype);
    for (int i = nd - 1; i >= 0; --i) {
        strides[i] = s;
        s *= dims[i];
    }
    if (info->layout != GLT_LAYOUT_HWC) return 0;
    int strided = 0, row_axis = nd - 3;
    if ((int64_t)info->row_pitch_bytes != strides[row_axis]) {
        strides[row_axis] = (int64_t)info->row_pitch_bytes;
        strided = 1;
    }
    if (info->count > 0 && (int64_t)image_stride != strides[0]) {
        strides[0] = (int64_t)image_stride;
        strided = 1;
    }
    return strided;
}

static void dl_tensor_of(const FrameObject *self, glt_py_dl_tensor *t) {
    const glt_frame_info *info = &self->info;
    t->data = info->data;
    t->ndim = frame_dims(info, t->shape);
    int64_t bytes[GLT_PY_DL_MAX_DIMS];
    t->strided = frame_strides(info, self->image_stride, bytes);
    for (int i = 0; i < t->ndim; ++i) t->strides[i] = bytes[i] / (int64_t)glt_dtype_size(info->dtype);
    t->dtype = dl_dtype(info->dtype);
    t->device_type = info->memory == GLT_MEMORY_CUDA ? kDLCUDA : kDLCPU;
    t->device_id = info->memory == GLT_MEMORY_CUDA ? info->cuda_device : 0;
    t->flags = 0; /* consumers may write: the frame is theirs */
}

static PyObject *frame_dlpack(FrameObject *self, PyObject *args, PyObject *kwargs) {
    glt_py_dlpack_request req;
    if (glt_py_dlpack_parse(args, kwargs, is_cuda(self) ? kDLCUDA : kDLCPU, is_cuda(self) ? self->info.cuda_device : 0,
                            "the frame", "read it with the backend of the device you want, or copy it in your framework",
                            &req) < 0)
        return NULL;
    PyObject *owner = (PyObject *)self;
    glt_frame *exported = self->frame;
    if (req.copy) {
        /* copy=True: an independent frame from the same pool, copied on the frame's stream. */
        glt_frame *clone = NULL;
        glt_status s;
        /* A host copy of a large frame takes milliseconds: let other threads run. The source frame is
         * never written after its read, and the pool is locked on its own. */
        Py_BEGIN_ALLOW_THREADS
        s = glt_frame_clone(self->frame, &clone);
        Py_END_ALLOW_THREADS
        if (s != GLT_OK) return glt_py_raise(self->st, s);
        owner = glt_py_frame_new(self->st, clone);
        if (!owner) return NULL;
        exported = clone;
    } else {
        Py_INCREF(owner);
    }
    if (req.sync) {
        glt_status s = glt_frame_sync_stream(exported, req.consumer);
        if (s != GLT_OK) {
            Py_DECREF(owner);
            return glt_py_raise(self->st, s);
        }
    }
    glt_py_dl_tensor t;
    dl_tensor_of((FrameObject *)owner, &t);
    if (req.copy) t.flags |= DLPACK_FLAG_BITMASK_IS_COPIED;
    PyObject *capsule = glt_py_dlpack_capsule(owner, &t, req.versioned);
    Py_DECREF(owner);
    return capsule;
}

static PyObject *frame_dlpack_device(FrameObject *self, PyObject *unused) {
    (void)unused;
    if (is_cuda(self)) return Py_BuildValue("(ii)", kDLCUDA, self->info.cuda_device);
    return Py_BuildValue("(ii)", kDLCPU, 0);
}

static PyObject *shape_tuple(const glt_frame_info *i) {
    int64_t dims[GLT_PY_DL_MAX_DIMS];
    return glt_py_dims_tuple(dims, frame_dims(i, dims));
}

static PyObject *interface_dict(FrameObject *self, int cuda) {
    const glt_frame_info *i = &self->info;
    if (i->dtype == GLT_DTYPE_BFLOAT16) {
        PyErr_SetString(PyExc_AttributeError, "bfloat16 has no array-interface type string; consume bfloat16 frames "
                                              "through DLPack (torch.from_dlpack)");
        return NULL;
    }
    int64_t dims[GLT_PY_DL_MAX_DIMS], strides[GLT_PY_DL_MAX_DIMS];
    int nd = frame_dims(i, dims);
    int strided = frame_strides(i, self->image_stride, strides);
    return glt_py_array_interface(dims, strided ? strides : NULL, nd, glt_py_typestr(i->dtype), i->data, 0, cuda,
                                  i->stream);
}

static PyObject *get_cai(FrameObject *self, void *c) {
    (void)c;
    if (!is_cuda(self)) {
        PyErr_SetString(PyExc_AttributeError, "__cuda_array_interface__: this frame is in host memory (CPU "
                                              "backend); use __array_interface__ or DLPack");
        return NULL;
    }
    return interface_dict(self, 1);
}

static PyObject *get_array_interface(FrameObject *self, void *c) {
    (void)c;
    if (is_cuda(self)) {
        PyErr_SetString(PyExc_AttributeError, "__array_interface__: this frame is in CUDA device memory; use DLPack "
                                              "or __cuda_array_interface__");
        return NULL;
    }
    return interface_dict(self, 0);
}

static PyObject *frame_synchronize(FrameObject *self, PyObject *unused) {
    (void)unused;
    glt_status s;
    Py_BEGIN_ALLOW_THREADS s = glt_frame_synchronize(self->frame);
    Py_END_ALLOW_THREADS if (s != GLT_OK) return glt_py_raise(self->st, s);
    Py_RETURN_NONE;
}

static PyObject *get_shape(FrameObject *self, void *c) {
    (void)c;
    return shape_tuple(&self->info);
}
static PyObject *get_strides(FrameObject *self, void *c) {
    (void)c;
    int64_t dims[GLT_PY_DL_MAX_DIMS], strides[GLT_PY_DL_MAX_DIMS];
    int nd = frame_dims(&self->info, dims);
    frame_strides(&self->info, self->image_stride, strides);
    return glt_py_dims_tuple(strides, nd);
}
static PyObject *get_layout(FrameObject *self, void *c) {
    (void)c;
    return PyUnicode_FromString(self->info.layout == GLT_LAYOUT_CHW ? "chw" : "hwc");
}
static PyObject *get_dtype(FrameObject *self, void *c) {
    (void)c;
    return PyUnicode_FromString(glt_dtype_name(self->info.dtype));
}
static PyObject *get_device(FrameObject *self, void *c) {
    (void)c;
    if (is_cuda(self)) return PyUnicode_FromFormat("cuda:%d", self->info.cuda_device);
    return PyUnicode_FromString("cpu");
}
static PyObject *get_data_ptr(FrameObject *self, void *c) {
    (void)c;
    return PyLong_FromVoidPtr(self->info.data);
}
static PyObject *get_nbytes(FrameObject *self, void *c) {
    (void)c;
    return PyLong_FromSize_t(self->info.nbytes);
}
static PyObject *get_flipped(FrameObject *self, void *c) {
    (void)c;
    return PyBool_FromLong(self->info.flipped);
}
static PyObject *get_stream(FrameObject *self, void *c) {
    (void)c;
    if (!is_cuda(self)) Py_RETURN_NONE;
    return PyLong_FromVoidPtr(self->info.stream);
}

static PyObject *frame_repr(FrameObject *self) {
    PyObject *shape = shape_tuple(&self->info);
    if (!shape) return NULL;
    PyObject *r = PyUnicode_FromFormat("<gltensor.Frame shape=%R dtype=%s device=%s%s>", shape,
                                       glt_dtype_name(self->info.dtype), is_cuda(self) ? "cuda" : "cpu",
                                       self->info.flipped ? "" : " bottom-up");
    Py_DECREF(shape);
    return r;
}

static PyMethodDef frame_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))frame_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(stream=None, *, max_version=None, dl_device=None, copy=None): a DLPack capsule (versioned when "
     "max_version >= (1, 0)) sharing the frame's memory; the data is made ready on `stream`."},
    {"__dlpack_device__", (PyCFunction)frame_dlpack_device, METH_NOARGS, "(device_type, device_id) for DLPack"},
    {"synchronize", (PyCFunction)frame_synchronize, METH_NOARGS, "Block until the frame's copy has completed."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef frame_getset[] = {
    {"__cuda_array_interface__", (getter)get_cai, NULL, "CUDA array interface v3 (CUDA frames)", NULL},
    {"__array_interface__", (getter)get_array_interface, NULL, "NumPy array interface (CPU frames)", NULL},
    {"shape", (getter)get_shape, NULL, "(height, width, channels)", NULL},
    {"strides", (getter)get_strides, NULL, "byte strides", NULL},
    {"dtype", (getter)get_dtype, NULL, NULL, NULL},
    {"device", (getter)get_device, NULL, "'cuda:N' or 'cpu'", NULL},
    {"data_ptr", (getter)get_data_ptr, NULL, NULL, NULL},
    {"nbytes", (getter)get_nbytes, NULL, NULL, NULL},
    {"flipped", (getter)get_flipped, NULL, "True when rows are top-first", NULL},
    {"layout", (getter)get_layout, NULL, "'hwc' or 'chw'", NULL},
    {"stream", (getter)get_stream, NULL, "handle of the stream the copy was issued on (None on CPU)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef frame_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(FrameObject, weakreflist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot frame_slots[] = {
    {Py_tp_dealloc, frame_dealloc},
    {Py_tp_methods, frame_methods},
    {Py_tp_getset, frame_getset},
    {Py_tp_members, frame_members},
    {Py_tp_repr, frame_repr},
    {Py_tp_doc, "One captured image; hand it to torch.from_dlpack, cupy.from_dlpack, jax.dlpack.from_dlpack, "
                "numba.cuda.as_cuda_array or numpy.from_dlpack."},
    {0, NULL},
};

PyType_Spec glt_frame_spec = {
    .name = "gltensor.Frame",
    .basicsize = sizeof(FrameObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = frame_slots,
};
