/*
 * DLPack export, written once for every object gltensor hands out (frames, buffer views): the
 * __dlpack__ arguments as the DLPack Python specification defines them, and the capsule.
 */
#ifndef GLT_DLPACK_EXPORT_H
#define GLT_DLPACK_EXPORT_H

#include "ext.h"
#include "dlpack.h"

#define GLT_PY_DL_MAX_DIMS 8

/* What a consumer asked of __dlpack__(stream=, max_version=, dl_device=, copy=). */
typedef struct {
    int versioned;  /* max_version >= 1: a DLManagedTensorVersioned capsule */
    int copy;       /* copy=True (the exporter decides whether it can) */
    int sync;       /* make the data ready on the consumer's stream first (CUDA; not for stream=-1) */
    void *consumer; /* the consumer's stream when sync: a handle, or 1 / 2 for the legacy / per-thread default */
} glt_py_dlpack_request;

/* Parses the arguments for an object on DLPack device (device_type, device_id); `what` names it in the
 * errors ("frame", "the view of buffer 7") and `device_hint` says what to do about a device mismatch.
 * Returns -1 with an exception set: TypeError / ValueError for malformed arguments, BufferError for a
 * device the object is not on or a stream that does not apply to host memory. */
int glt_py_dlpack_parse(PyObject *args, PyObject *kwargs, int device_type, int device_id, const char *what,
                        const char *device_hint, glt_py_dlpack_request *req);

/* A tensor to export: C-contiguous, or with the given strides. */
typedef struct {
    void *data;
    int ndim;
    int64_t shape[GLT_PY_DL_MAX_DIMS];
    int strided;                         /* 0: C-contiguous; 1: strides (in elements) below */
    int64_t strides[GLT_PY_DL_MAX_DIMS];
    DLDataType dtype;
    int device_type, device_id;
    uint64_t flags; /* DLPACK_FLAG_BITMASK_*; a legacy capsule cannot carry them (the caller refuses READ_ONLY) */
} glt_py_dl_tensor;

/* A "dltensor_versioned" or "dltensor" capsule over t that holds a reference to owner until the consumer's
 * deleter runs (from any thread, with or without the GIL, even after interpreter shutdown). */
PyObject *glt_py_dlpack_capsule(PyObject *owner, const glt_py_dl_tensor *t, int versioned);

/* A tuple of n int64 values (a shape, strides). */
PyObject *glt_py_dims_tuple(const int64_t *v, int n);
/* The __array_interface__ / __cuda_array_interface__ (v3) dict of a tensor (strides_bytes NULL: dense, strides
 * None). With cuda, its
 * "stream": the stream consumers order their work after (the default stream, handle 0, written as 1: CAI v3
 * disallows 0). Frames and buffer views share it. */
PyObject *glt_py_array_interface(const int64_t *shape, const int64_t *strides_bytes, int ndim, const char *typestr,
                                 void *data, int read_only, int cuda, void *stream);

#endif
