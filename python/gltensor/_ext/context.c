/* gltensor.Context: a headless OpenGL context (EGL) on the CUDA device, or Mesa's software one. */
#include "object.h"
#include "params.h"

#include <string.h>

typedef glt_py_object ContextObject; /* handle: the glt_context */

static void context_destroy(void *handle) { glt_context_destroy(handle); }
static void context_info(void *handle, void *out) { glt_context_get_info(handle, out); }
static int context_enter(glt_py_object *self) {
    glt_status s = glt_context_make_current(self->handle);
    return s == GLT_OK ? 0 : (glt_py_raise(self->st, s), -1);
}
GLT_PY_INFO_FITS(glt_context_info);
static const glt_py_kind context_kind = {
    .closed_message = "the context was closed; create a new one with gltensor.Context.headless()",
    .destroy = context_destroy,
    .info = context_info,
    .enter = context_enter,
};

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

GLT_PY_SIG(glt_sig_context_headless, "Context.headless", {"cuda_device", GLT_PY_POSITIONAL, "None", NULL},
           {"software", GLT_PY_KEYWORD, "None", NULL}, {"device_uuid", GLT_PY_KEYWORD, "None", NULL});

static PyObject *context_headless(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *v[3];
    if (glt_py_parse_tuple(&glt_sig_context_headless, args, kwargs, v) < 0) return NULL;
    PyObject *device_arg = v[0] ? v[0] : Py_None, *software = v[1] ? v[1] : Py_None;
    PyObject *uuid_obj = v[2] ? v[2] : Py_None;
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
    ContextObject *self = glt_py_object_new(type, &context_kind, 0);
    if (!self) return NULL;
    glt_context *ctx = NULL;
    glt_status s;
    Py_BEGIN_ALLOW_THREADS
    s = glt_context_create_headless(&desc, &ctx);
    Py_END_ALLOW_THREADS
    self->handle = ctx;
    if (s != GLT_OK) {
        Py_DECREF(self);
        return glt_py_raise(st, s);
    }
    return (PyObject *)self;
}

static PyObject *context_make_current(ContextObject *self, PyObject *unused) {
    (void)unused;
    if (!self->handle) return glt_py_closed(self);
    glt_status s = glt_context_make_current(self->handle);
    if (s != GLT_OK) return glt_py_raise(self->st, s);
    Py_RETURN_NONE;
}

static PyObject *context_release(ContextObject *self, PyObject *unused) {
    (void)unused;
    if (!self->handle) return glt_py_closed(self);
    glt_status s = glt_context_release_current(self->handle);
    if (s != GLT_OK) return glt_py_raise(self->st, s);
    Py_RETURN_NONE;
}

static PyObject *context_repr(ContextObject *self) {
    if (!self->handle) return PyUnicode_FromString("<gltensor.Context closed>");
    glt_context_info i;
    glt_context_get_info(self->handle, &i);
    return PyUnicode_FromFormat("<gltensor.Context renderer='%s' cuda_device=%d>", i.renderer ? i.renderer : "",
                                i.cuda_device);
}

static PyMethodDef context_methods[] = {
    {"headless", (PyCFunction)(void (*)(void))context_headless, METH_CLASS | METH_VARARGS | METH_KEYWORDS,
     "headless(cuda_device=None, *, software=None, device_uuid=None) -> Context\n\nAn OpenGL 4.5 (else 3.3) core context without a "
     "window, current in the calling thread, on the EGL device that CUDA knows as cuda_device (honouring "
     "CUDA_VISIBLE_DEVICES). None: the device this process works on (gltensor.default_cuda_device(): torch's "
     "current device once torch has initialised CUDA, else LOCAL_RANK, else 0). software=None falls back to "
     "Mesa's software device when no device was named and there is no NVIDIA one; True forces it; False "
     "forbids it. A named cuda_device that cannot be honoured raises.\n\n"
     "    ctx = gltensor.Context.headless()      # ctx.cuda_device -> 0 (or None on Mesa)"},
    {"make_current", (PyCFunction)context_make_current, METH_NOARGS, "Make this context current in this thread."},
    {"release", (PyCFunction)context_release, METH_NOARGS, "Leave this thread with no current context."},
    GLT_PY_LIFETIME_METHODS("Destroy the context (idempotent)."),
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef context_getset[] = {
    GLT_PY_INFO("vendor", "GL_VENDOR", GLT_PY_STR, glt_context_info, vendor),
    GLT_PY_INFO("renderer", "GL_RENDERER", GLT_PY_STR, glt_context_info, renderer),
    GLT_PY_INFO("version", "GL_VERSION", GLT_PY_STR, glt_context_info, version),
    GLT_PY_INFO_INTS("gl_version", "(major, minor) requested and obtained", offsetof(glt_context_info, gl_major),
                     offsetof(glt_context_info, gl_minor)),
    GLT_PY_INFO("cuda_device", "CUDA ordinal the context runs on, or None", GLT_PY_DEVICE, glt_context_info,
                cuda_device),
    GLT_PY_INFO("is_software", "True for Mesa's software renderer", GLT_PY_BOOL, glt_context_info, is_software),
    GLT_PY_CLOSED_GETTER,
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot context_slots[] = {
    {Py_tp_dealloc, glt_py_dealloc},
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
