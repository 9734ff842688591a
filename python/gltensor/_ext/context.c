/* gltensor.Context: a headless OpenGL context (EGL) on the CUDA device, or Mesa's software one. */
#include "ext.h"

#include <string.h>

typedef struct {
    PyObject_HEAD
    gltensor_state *st;
    glt_context *ctx;
} ContextObject;

static PyObject *closed_error(ContextObject *self) {
    PyErr_SetString(self->st->errors[GLT_CLOSED], "the context was closed; create a new one with "
                                                  "gltensor.Context.headless()");
    return NULL;
}

/* cuda_device=None: the device the process works on, as gltensor.devices.default_cuda_device() says
 * (torch's current device once torch has initialised CUDA, else the core's LOCAL_RANK / 0 rule). */
static int resolve_cuda_device(PyObject *arg, int *cuda_device) {
    PyObject *value = arg;
    if (arg == Py_None) {
        PyObject *devices = PyImport_ImportModule("gltensor.devices");
        if (!devices) return -1;
        value = PyObject_CallMethod(devices, "default_cuda_device", NULL);
        Py_DECREF(devices);
        if (!value) return -1;
        if (value == Py_None) {
            Py_DECREF(value);
            *cuda_device = GLT_CUDA_DEVICE_AUTO; /* no CUDA: the core falls back to software */
            return 0;
        }
    } else {
        Py_INCREF(value);
    }
    int r = glt_py_as_cuda_device(value, "cuda_device (None: the process's device)", cuda_device);
    Py_DECREF(value);
    return r;
}

static PyObject *context_headless(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"cuda_device", "software", "device_uuid", NULL};
    PyObject *device_arg = Py_None;
    PyObject *software = Py_None;
    PyObject *uuid_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O$OO:headless", kwlist, &device_arg, &software, &uuid_obj))
        return NULL;
    gltensor_state *st = glt_py_state_of_type(type);
    if (!st) return NULL;
    glt_context_desc desc;
    glt_context_desc_init(&desc);
    unsigned char uuid[16];
    if (uuid_obj != Py_None) {
        char *bytes = NULL;
        Py_ssize_t n = 0;
        if (!PyBytes_Check(uuid_obj) || PyBytes_AsStringAndSize(uuid_obj, &bytes, &n) < 0 || n != 16) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "device_uuid must be the GPU's 16-byte UUID as bytes "
                                              "(SharedSlots.device_uuid), or None");
            return NULL;
        }
        memcpy(uuid, bytes, 16);
        desc.device_uuid = uuid;
    }
    if (resolve_cuda_device(device_arg, &desc.cuda_device) < 0) return NULL;
    if (software == Py_True) {
        desc.force_software = 1;
    } else if (software == Py_False) {
        desc.allow_software = 0;
    } else if (software != Py_None) {
        PyErr_SetString(PyExc_TypeError, "software must be None (auto), True or False");
        return NULL;
    }
    ContextObject *self = (ContextObject *)glt_py_alloc(type);
    if (!self) return NULL;
    self->st = st;
    glt_status s;
    Py_BEGIN_ALLOW_THREADS s = glt_context_create_headless(&desc, &self->ctx);
    Py_END_ALLOW_THREADS if (s != GLT_OK) {
        Py_DECREF(self);
        return glt_py_raise(st, s);
    }
    return (PyObject *)self;
}

static PyObject *context_make_current(ContextObject *self, PyObject *unused) {
    (void)unused;
    if (!self->ctx) return closed_error(self);
    glt_status s = glt_context_make_current(self->ctx);
    if (s != GLT_OK) return glt_py_raise(self->st, s);
    Py_RETURN_NONE;
}

static PyObject *context_release(ContextObject *self, PyObject *unused) {
    (void)unused;
    if (!self->ctx) return closed_error(self);
    glt_status s = glt_context_release_current(self->ctx);
    if (s != GLT_OK) return glt_py_raise(self->st, s);
    Py_RETURN_NONE;
}

static PyObject *context_close(ContextObject *self, PyObject *unused) {
    (void)unused;
    glt_context_destroy(self->ctx);
    self->ctx = NULL;
    Py_RETURN_NONE;
}

static PyObject *context_enter(ContextObject *self, PyObject *unused) {
    (void)unused;
    if (!self->ctx) return closed_error(self);
    glt_status s = glt_context_make_current(self->ctx);
    if (s != GLT_OK) return glt_py_raise(self->st, s);
    return Py_NewRef(self);
}

static PyObject *context_exit(ContextObject *self, PyObject *args) {
    (void)args;
    return context_close(self, NULL);
}

static void context_dealloc(ContextObject *self) {
    glt_context_destroy(self->ctx);
    glt_py_free_instance((PyObject *)self);
}

static int info_of(ContextObject *self, glt_context_info *info) {
    if (!self->ctx) {
        closed_error(self);
        return -1;
    }
    glt_context_get_info(self->ctx, info);
    return 0;
}

static PyObject *get_vendor(ContextObject *self, void *c) {
    (void)c;
    glt_context_info i;
    return info_of(self, &i) < 0 ? NULL : PyUnicode_FromString(i.vendor ? i.vendor : "");
}
static PyObject *get_renderer(ContextObject *self, void *c) {
    (void)c;
    glt_context_info i;
    return info_of(self, &i) < 0 ? NULL : PyUnicode_FromString(i.renderer ? i.renderer : "");
}
static PyObject *get_version(ContextObject *self, void *c) {
    (void)c;
    glt_context_info i;
    return info_of(self, &i) < 0 ? NULL : PyUnicode_FromString(i.version ? i.version : "");
}
static PyObject *get_gl_version(ContextObject *self, void *c) {
    (void)c;
    glt_context_info i;
    return info_of(self, &i) < 0 ? NULL : Py_BuildValue("(ii)", i.gl_major, i.gl_minor);
}
static PyObject *get_cuda_device(ContextObject *self, void *c) {
    (void)c;
    glt_context_info i;
    if (info_of(self, &i) < 0) return NULL;
    if (i.cuda_device < 0) Py_RETURN_NONE;
    return PyLong_FromLong(i.cuda_device);
}
static PyObject *get_is_software(ContextObject *self, void *c) {
    (void)c;
    glt_context_info i;
    return info_of(self, &i) < 0 ? NULL : PyBool_FromLong(i.is_software);
}
static PyObject *get_closed(ContextObject *self, void *c) {
    (void)c;
    return PyBool_FromLong(self->ctx == NULL);
}

static PyObject *context_repr(ContextObject *self) {
    if (!self->ctx) return PyUnicode_FromString("<gltensor.Context closed>");
    glt_context_info i;
    glt_context_get_info(self->ctx, &i);
    return PyUnicode_FromFormat("<gltensor.Context renderer='%s' cuda_device=%d>", i.renderer ? i.renderer : "",
                                i.cuda_device);
}

static PyMethodDef context_methods[] = {
    {"headless", (PyCFunction)(void (*)(void))context_headless, METH_CLASS | METH_VARARGS | METH_KEYWORDS,
     "headless(cuda_device=None, *, software=None) -> Context\n\nAn OpenGL 4.5 (else 3.3) core context without a "
     "window, current in the calling thread, on the EGL device that CUDA knows as cuda_device (honouring "
     "CUDA_VISIBLE_DEVICES). None: the device this process works on (gltensor.default_cuda_device(): torch's "
     "current device once torch has initialised CUDA, else LOCAL_RANK, else 0). software=None falls back to "
     "Mesa's software device when no device was named and there is no NVIDIA one; True forces it; False "
     "forbids it. A named cuda_device that cannot be honoured raises.\n\n"
     "    ctx = gltensor.Context.headless()      # ctx.cuda_device -> 0 (or None on Mesa)"},
    {"make_current", (PyCFunction)context_make_current, METH_NOARGS, "Make this context current in this thread."},
    {"release", (PyCFunction)context_release, METH_NOARGS, "Leave this thread with no current context."},
    {"close", (PyCFunction)context_close, METH_NOARGS, "Destroy the context (idempotent)."},
    {"__enter__", (PyCFunction)context_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)context_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef context_getset[] = {
    {"vendor", (getter)get_vendor, NULL, "GL_VENDOR", NULL},
    {"renderer", (getter)get_renderer, NULL, "GL_RENDERER", NULL},
    {"version", (getter)get_version, NULL, "GL_VERSION", NULL},
    {"gl_version", (getter)get_gl_version, NULL, "(major, minor) requested and obtained", NULL},
    {"cuda_device", (getter)get_cuda_device, NULL, "CUDA ordinal the context runs on, or None", NULL},
    {"is_software", (getter)get_is_software, NULL, "True for Mesa's software renderer", NULL},
    {"closed", (getter)get_closed, NULL, "True after close()", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot context_slots[] = {
    {Py_tp_dealloc, context_dealloc},
    {Py_tp_methods, context_methods},
    {Py_tp_getset, context_getset},
    {Py_tp_repr, context_repr},
    {Py_tp_doc, "A headless OpenGL context. Create with Context.headless()."},
    {0, NULL},
};

PyType_Spec glt_context_spec = {
    .name = "gltensor.Context",
    .basicsize = sizeof(ContextObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = context_slots,
};
