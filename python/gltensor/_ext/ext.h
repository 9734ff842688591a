/* Shared declarations of the _gltensor extension: a thin CPython layer over gltensor.h. */
#ifndef GLT_EXT_H
#define GLT_EXT_H

/* The stable ABI of CPython 3.10 and later: one abi3 wheel serves every Python from 3.10 on. Code that
 * needs an API outside it does not compile, which keeps the wheel honest (abi3audit checks the binary). */
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030A0000
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "gltensor.h"

/* Per-module state: heap types and exceptions (multi-phase init, no static objects). */
typedef struct gltensor_state {
    PyTypeObject *context_type;
    PyTypeObject *capture_type;
    PyTypeObject *frame_type;
    PyTypeObject *batch_type;
    PyTypeObject *atlas_type;
    PyObject *error;         /* GLTensorError(RuntimeError) */
    PyObject *errors[GLT_STATUS_COUNT_]; /* subclass per status */
    PyObject *str_flip, *str_stream, *str_out;                 /* interned keyword names */
    PyObject *str_cuda_stream, *str_ptr, *str_handle, *str_value; /* stream attributes */
    /* upload.c, buffer.c */
    PyTypeObject *upload_type;
    PyTypeObject *buffer_type;
    PyTypeObject *buffer_view_type;
    /* slots.c */
    PyTypeObject *slots_type;
    PyTypeObject *slot_writer_type;
    /* mjstep.c */
    PyTypeObject *mujoco_stepper_type;
} gltensor_state;

extern PyModuleDef gltensor_module_def;

/* Raises the exception for status with glt_last_error()'s message; returns NULL. The one place
 * where C statuses become Python exceptions. */
PyObject *glt_py_raise(gltensor_state *st, glt_status status);
gltensor_state *glt_py_state_of_type(PyTypeObject *type);
/* exceptions.c: GLTensorError and one subclass per status, added to the module and kept in its state. */
int glt_py_add_exceptions(PyObject *m, gltensor_state *st);

/* Type specs, created in module exec. */
extern PyType_Spec glt_context_spec;
extern PyType_Spec glt_capture_spec;
extern PyType_Spec glt_frame_spec;
extern PyType_Spec glt_batch_spec;
extern PyType_Spec glt_atlas_spec;
extern PyType_Spec glt_upload_spec;      /* upload.c */
extern PyType_Spec glt_buffer_spec;      /* buffer.c */
extern PyType_Spec glt_buffer_view_spec; /* buffer.c */
extern PyType_Spec glt_slots_spec;       /* slots.c */
extern PyType_Spec glt_slot_writer_spec; /* slots.c */
extern PyType_Spec glt_mujoco_stepper_spec; /* mjstep.c */

/* capture.c: parses backend="auto"|"cuda"|"cpu". */
int glt_py_parse_backend(PyObject *obj, glt_backend *out);
/* capture.c: a capture's description from the values of Capture's rows (name, target, backend, cuda_device,
 * resizable, region; NULL where not given). */
int glt_py_capture_desc(PyObject *const *v, glt_capture_desc *desc);
/* capture.c: parses region= (None, or a tuple/list (x, y, width, height) of non-negative ints with a positive
 * size) into out (all zeros for None); TypeError / ValueError naming `what` otherwise. */
int glt_py_parse_region(PyObject *obj, const char *what, glt_rect *out);
/* capture.c: parses an integer-like GL name or enum (numpy.uint32 from PyOpenGL, int from engines). */
int glt_py_as_gl_uint(PyObject *obj, const char *what, unsigned long *out);
/* capture.c: target= as the GL enum (int-like) or its name, as the objects' .target reads it ('GL_TEXTURE_2D');
 * NULL or None: GL_TEXTURE_2D. */
int glt_py_as_gl_target(PyObject *obj, unsigned *out);

/* frame.c: wraps a glt_frame (taking ownership) in a Frame object. */
PyObject *glt_py_frame_new(gltensor_state *st, glt_frame *frame);

/* interop.c */
/* None -> NULL, int handle, or an object with .cuda_stream / .ptr / .handle; -1 on error (exception set). */
int glt_py_parse_stream(gltensor_state *st, PyObject *obj, void **stream);
/* Describes a caller-owned tensor (CAI, DLPack or __array_interface__) as a glt_buffer_view. `keep` receives
 * an object that must stay alive while the view is used (a DLPack capsule, or NULL). `stream_hint` receives
 * the stream the producer asked writers to use (CAI v3), or is left unchanged. */
int glt_py_buffer_view(gltensor_state *st, PyObject *obj, int want_cuda, void *write_stream, glt_buffer_view *view,
                       PyObject **keep, void **stream_hint);
const char *glt_py_typestr(glt_dtype dtype);
/* channels= as letters of the stored channels ('bgr') or channel indices ((2, 1, 0)): 1 to 4 entries into
 * channels[]; ValueError(bad_message) otherwise. Reads and uploads share it. */
int glt_py_parse_channels(PyObject *obj, int channels[4], int *n_channels, const char *bad_message);

/* args.c: the one converter per kind of argument (integers with their range, names compared with their length,
 * None as the default of every option). Each sets TypeError / ValueError naming `what` and returns -1. */
int glt_py_as_int64(PyObject *obj, const char *what, long long min, long long max, long long *out);
int glt_py_as_int(PyObject *obj, const char *what, int min, int max, int *out);
int glt_py_as_cuda_device(PyObject *obj, const char *what, int *out); /* None -> -1, else 0..65535 */
int glt_py_as_flag(PyObject *obj, int default_value, int *out);       /* NULL or None -> default_value */
/* str whose UTF-8 has no NUL inside (NULL with ValueError otherwise); *len its length. */
const char *glt_py_as_name(PyObject *obj, Py_ssize_t *len);
/* A dtype's bare name: of a str, a NumPy dtype or scalar type, or a torch dtype ('torch.float32' -> 'float32'), with
 * the C names of framework aliases ('half' -> 'float16', 'float' -> 'float32', 'double' -> 'float64', 'int' ->
 * 'int32', ...). *keep owns the text; NULL with an exception set. Reads and buffer views match it to their types. */
const char *glt_py_dtype_name(PyObject *obj, PyObject **keep);
/* obj (None or absent: default_index) as the index of one of n names, matched exactly. */
int glt_py_as_choice(PyObject *obj, const char *what, const char *const *choices, int n, int default_index, int *out);
/* args.c: the qualified name of obj's type for messages (tp_name is outside the limited API); a new reference,
 * NULL only when memory ran out. Use with %U. */
PyObject *glt_py_type_name(PyObject *obj);

/* env.c: _gltensor._environment_problems() -> list of str (bad GLTENSOR_* values, EGL/Mesa variables that break
 * context creation), for the doctor. */
PyObject *glt_py_environment_problems(PyObject *module, PyObject *unused);

/* PyTypeObject is opaque in the limited API: allocation and freeing go through the type's slots. */
static inline PyObject *glt_py_alloc(PyTypeObject *type) {
    allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
    return alloc(type, 0);
}
/* The tail of every tp_dealloc: free the instance, then drop its reference to the heap type. */
static inline void glt_py_free_instance(PyObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    free_fn(self);
    Py_DECREF(tp);
}
/* PySequence_Fast without its macros: a tuple of obj's items, or TypeError(message) when obj is not iterable. */
static inline PyObject *glt_py_as_tuple(PyObject *obj, const char *message) {
    PyObject *t = PySequence_Tuple(obj);
    if (!t && PyErr_ExceptionMatches(PyExc_TypeError)) PyErr_SetString(PyExc_TypeError, message);
    return t;
}
/* ---- per-object locks (reads run without the GIL) ----
 * A read drops the GIL around map, copy and unmap, so each object has a lock that one thread holds while it
 * drives the object (read, refresh, close, info). The rule that keeps this free of deadlocks: nobody waits
 * for an object lock while holding the GIL. glt_py_lock_take tries the lock first and, when another thread
 * holds it, waits with the GIL released; it returns holding both. Holding an object lock while waiting for
 * the GIL is then safe: whoever holds the GIL gives it up before it waits for the lock. Locks of several
 * objects (a batch and its captures) are taken in one order: the batch, then captures by address. */
static inline void glt_py_lock_take(PyThread_type_lock lock) {
    if (PyThread_acquire_lock(lock, NOWAIT_LOCK)) return;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(lock, WAIT_LOCK);
    Py_END_ALLOW_THREADS
}
static inline void glt_py_lock_give(PyThread_type_lock lock) { PyThread_release_lock(lock); }
/* A new lock, or NULL with MemoryError set. */
static inline PyThread_type_lock glt_py_lock_new(void) {
    PyThread_type_lock lock = PyThread_allocate_lock();
    if (!lock) PyErr_SetString(PyExc_MemoryError, "cannot allocate a lock for a gltensor object");
    return lock;
}

#endif
