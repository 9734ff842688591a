/*
 * The one place that turns a glt_status into a Python exception (glt_py_raise), the exception classes the module
 * adds (one per status, under gltensor.GLTensorError), and the module state a type finds through its class. Every
 * type file calls this one; it calls none of them and not module.c, so the extension's calls run one way:
 * module.c -> the types -> exceptions.c.
 */
#include "ext.h"

static gltensor_state *get_state(PyObject *module) { return (gltensor_state *)PyModule_GetState(module); }

/* The types are final (no Py_TPFLAGS_BASETYPE), so the module that defined `type` is the one holding the
 * state: PyType_GetModule is enough (PyType_GetModuleByDef, for subclasses, is not in the 3.10 limited API). */
gltensor_state *glt_py_state_of_type(PyTypeObject *type) {
    PyObject *m = PyType_GetModule(type);
    return m ? get_state(m) : NULL;
}

/* The plain cause and exact fix of an environmental failure, from the table of known failures the doctor
 * reports too (gltensor._hints.explain_error), so that exceptions and `python -m gltensor doctor` say the same
 * thing; NULL when none applies. gltensor._hints needs the standard library only: importing it on an error costs
 * little, where the whole doctor (argparse, its probes) did not. Never raises: a failure here must not replace
 * the error being reported. */
static PyObject *known_failure_hint(glt_status status, const char *msg) {
    if (status != GLT_CUDA_UNAVAILABLE && status != GLT_CUDA_ERROR && status != GLT_WRONG_DEVICE &&
        status != GLT_EGL_ERROR)
        return NULL;
    PyObject *hints = PyImport_ImportModule("gltensor._hints");
    PyObject *hint = hints ? PyObject_CallMethod(hints, "explain_error", "ss", msg, glt_status_name(status)) : NULL;
    Py_XDECREF(hints);
    if (!hint || !PyUnicode_Check(hint)) {
        Py_XDECREF(hint);
        PyErr_Clear();
        return NULL;
    }
    return hint;
}

PyObject *glt_py_raise(gltensor_state *st, glt_status status) {
    const char *msg = glt_last_error();
    if (!msg || !*msg) msg = glt_status_description(status);
    PyObject *exc = (status > GLT_OK && status < GLT_STATUS_COUNT_) ? st->errors[status] : st->error;
    if (!exc) exc = st->error;
    PyObject *hint = known_failure_hint(status, msg);
    if (hint) {
        PyErr_Format(exc, "%s\n%U", msg, hint);
        Py_DECREF(hint);
    } else {
        PyErr_SetString(exc, msg);
    }
    return NULL;
}

/* Exception classes by status: (name, whether it is also a ValueError / MemoryError, docstring). */
static const struct {
    glt_status status;
    const char *name;
    int also; /* 0 none, 1 ValueError, 2 MemoryError */
    const char *doc;
} error_classes[] = {
    {GLT_NO_CONTEXT, "NoContextError", 0, "No OpenGL context is current in the calling thread."},
    {GLT_WRONG_CONTEXT, "WrongContextError", 0, "The object belongs to another GL context than the current one."},
    {GLT_INVALID_OBJECT, "InvalidObjectError", 1, "The GL name is not a live texture/renderbuffer of that target."},
    {GLT_UNSUPPORTED_FORMAT, "UnsupportedFormatError", 1, "The image's format (depth, multisampled, ...) cannot be captured."},
    {GLT_WRONG_DEVICE, "WrongDeviceError", 0, "The GL context runs on another GPU than the CUDA device."},
    {GLT_CUDA_UNAVAILABLE, "CudaUnavailableError", 0, "CUDA is not compiled in, or no driver/GPU is usable."},
    {GLT_CLOSED, "ClosedError", 1, "The object was closed."},
    {GLT_INVALID_ARGUMENT, "InvalidArgumentError", 1, "An argument (out=, stream=, target, ...) is invalid."},
    {GLT_CUDA_ERROR, "CudaError", 0, "A CUDA call failed."},
    {GLT_GL_ERROR, "GLError", 0, "An OpenGL call failed."},
    {GLT_EGL_ERROR, "EGLError", 0, "An EGL call failed."},
    {GLT_OUT_OF_MEMORY, "OutOfMemoryError", 2, "Host or device memory ran out."},
    {GLT_UNSUPPORTED, "UnsupportedError", 0, "The driver or device lacks a feature the call needs."},
    {GLT_STALE_SLOT, "StaleSlotError", 0, "A shared slot was not written since the last read (a worker died or skipped its write)."},
    {GLT_SLOTS_BUSY, "SlotsBusyError", 0, "Shared slots are held elsewhere: a read would let the workers overwrite a set that a zero-copy view (read(copy=False)) still holds, or a slot already has a writer in a process that still runs (one writer per slot)."},
};

int glt_py_add_exceptions(PyObject *m, gltensor_state *st) {
    st->error = PyErr_NewExceptionWithDoc("gltensor.GLTensorError",
                                          "Root of every gltensor error (a RuntimeError).", PyExc_RuntimeError, NULL);
    if (!st->error || PyModule_AddObjectRef(m, "GLTensorError", st->error) < 0) return -1;
    for (size_t i = 0; i < sizeof error_classes / sizeof *error_classes; ++i) {
        char qualname[96];
        PyOS_snprintf(qualname, sizeof qualname, "gltensor.%s", error_classes[i].name);
        PyObject *bases = error_classes[i].also == 0   ? PyTuple_Pack(1, st->error)
                          : error_classes[i].also == 1 ? PyTuple_Pack(2, st->error, PyExc_ValueError)
                                                       : PyTuple_Pack(2, st->error, PyExc_MemoryError);
        if (!bases) return -1;
        PyObject *cls = PyErr_NewExceptionWithDoc(qualname, error_classes[i].doc, bases, NULL);
        Py_DECREF(bases);
        if (!cls) return -1;
        st->errors[error_classes[i].status] = cls;
        if (PyModule_AddObjectRef(m, error_classes[i].name, cls) < 0) return -1;
    }
    return 0;
}
