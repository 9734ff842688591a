/* gltensor.Capture: one GL texture or renderbuffer, read into frames or into out=. */
#include "read_args.h"

#include <structmember.h>

/* None is the default, 'auto', as for every option. */
int glt_py_parse_backend(PyObject *obj, glt_backend *out) {
    static const char *const names[] = {"auto", "cuda", "cpu"};
    static const glt_backend values[] = {GLT_BACKEND_AUTO, GLT_BACKEND_CUDA, GLT_BACKEND_CPU};
    int k = 0;
    if (glt_py_as_choice(obj, "backend", names, 3, 0, &k) < 0) return -1;
    *out = values[k];
    return 0;
}

int glt_py_as_gl_uint(PyObject *obj, const char *what, unsigned long *out) {
    PyObject *i = PyNumber_Index(obj);
    if (!i) {
        PyObject *type_name = glt_py_type_name(obj);
        if (type_name) PyErr_Format(PyExc_TypeError, "%s must be an integer GL name/enum, not %.80U", what, type_name);
        Py_XDECREF(type_name);
        return -1;
    }
    Py_DECREF(i);
    long long v = 0;
    if (glt_py_as_int64(obj, what, 0, 0xFFFFFFFFll, &v) < 0) return -1; /* a GLuint */
    *out = (unsigned long)v;
    return 0;
}

int glt_py_as_gl_target(PyObject *obj, unsigned *out) {
    static const char *const names[] = {"GL_TEXTURE_2D", "GL_TEXTURE_RECTANGLE", "GL_RENDERBUFFER",
                                        "GL_TEXTURE_2D_MULTISAMPLE"};
    static const unsigned values[] = {GLT_TEXTURE_2D, GLT_TEXTURE_RECTANGLE, GLT_RENDERBUFFER,
                                      GLT_TEXTURE_2D_MULTISAMPLE};
    if (!obj || obj == Py_None) {
        *out = GLT_TEXTURE_2D;
        return 0;
    }
    if (PyUnicode_Check(obj)) {
        int k = 0;
        if (glt_py_as_choice(obj, "target", names, 4, 0, &k) < 0) return -1;
        *out = values[k];
        return 0;
    }
    unsigned long v = 0;
    if (glt_py_as_gl_uint(obj, "target", &v) < 0) return -1;
    *out = (unsigned)v;
    return 0;
}

int glt_py_parse_region(PyObject *obj, const char *what, glt_rect *out) {
    static const char *const item_names[4] = {"x", "y", "width", "height"};
    out->x = out->y = out->width = out->height = 0;
    if (obj == Py_None) return 0;
    if (!PyTuple_Check(obj) && !PyList_Check(obj)) {
        PyObject *type_name = glt_py_type_name(obj);
        if (type_name)
            PyErr_Format(PyExc_TypeError,
                         "%s must be a tuple (x, y, width, height) of ints, or None for the whole image, not %.80U",
                         what, type_name);
        Py_XDECREF(type_name);
        return -1;
    }
    Py_ssize_t n = PySequence_Size(obj);
    if (n != 4) {
        PyErr_Format(PyExc_ValueError, "%s must have 4 items (x, y, width, height), got %zd", what, n);
        return -1;
    }
    int v[4];
    for (int i = 0; i < 4; ++i) {
        PyObject *item = PySequence_GetItem(obj, i); /* a new reference: the limited API has no borrowing macro */
        if (!item) return -1;
        /* bool is an int to Python, but True as a width is a mistake, not a size (the converter refuses it). */
        char label[96];
        PyOS_snprintf(label, sizeof label, "%s: %s", what, item_names[i]);
        int r = glt_py_as_int(item, label, -0x7FFFFFFF, 0x7FFFFFFF, &v[i]);
        Py_DECREF(item);
        if (r < 0) return -1;
    }
    if (v[0] < 0 || v[1] < 0) {
        PyErr_Format(PyExc_ValueError,
                     "%s (%d, %d, %d, %d): x and y must be >= 0 (GL window coordinates of the region's lower-left "
                     "pixel, row 0 at the bottom of the image)",
                     what, v[0], v[1], v[2], v[3]);
        return -1;
    }
    if (v[2] <= 0 || v[3] <= 0) {
        PyErr_Format(PyExc_ValueError,
                     "%s (%d, %d, %d, %d): width and height must be > 0; pass region=None for the whole image", what,
                     v[0], v[1], v[2], v[3]);
        return -1;
    }
    out->x = v[0];
    out->y = v[1];
    out->width = v[2];
    out->height = v[3];
    return 0;
}

static void capture_destroy(void *handle) { glt_capture_destroy(handle); }
static void capture_info(void *handle, void *out) { glt_capture_get_info(handle, out); }
GLT_PY_INFO_FITS(glt_capture_info);
static const glt_py_kind capture_kind = {
    .closed_message = "the capture of %s %u was closed; create a new gltensor.Capture to read it again",
    .destroy = capture_destroy,
    .info = capture_info,
};
static glt_capture *cap_of(CaptureObject *self) { return self->handle; }

/* The rows every object made from a GL image starts with (Capture, Atlas, Batch of names, Upload). */
#define IMAGE_ROWS {"name", GLT_PY_POSITIONAL, NULL, NULL}, {"target", GLT_PY_POSITIONAL, "...", NULL}
GLT_PY_SIG(glt_sig_capture_new, "Capture.__new__", IMAGE_ROWS, {"backend", GLT_PY_KEYWORD, "'auto'", NULL},
           {"cuda_device", GLT_PY_KEYWORD, "None", NULL}, {"resizable", GLT_PY_KEYWORD, "False", NULL},
           {"region", GLT_PY_KEYWORD, "None", NULL});

int glt_py_capture_desc(PyObject *const *v, glt_capture_desc *desc) {
    unsigned long name = 0;
    glt_capture_desc_init(desc);
    /* Any integer-like name: PyOpenGL gives numpy.uint32, Panda3D and moderngl give int. */
    if (glt_py_as_gl_uint(v[0], "name", &name) < 0 || glt_py_as_gl_target(v[1], &desc->gl_target) < 0 ||
        glt_py_parse_backend(v[2], &desc->backend) < 0 ||
        glt_py_as_cuda_device(v[3] ? v[3] : Py_None, "cuda_device", &desc->cuda_device) < 0 ||
        glt_py_as_flag(v[4], 0, &desc->resizable) < 0 || glt_py_parse_region(v[5] ? v[5] : Py_None, "region", &desc->region) < 0)
        return -1;
    desc->gl_name = (unsigned)name;
    return 0;
}

static PyObject *capture_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *v[6];
    glt_capture_desc desc;
    if (glt_py_parse_tuple(&glt_sig_capture_new, args, kwargs, v) < 0 || glt_py_capture_desc(v, &desc) < 0)
        return NULL;
    CaptureObject *self = glt_py_object_new(type, &capture_kind, 1);
    if (!self) return NULL;
    self->name = desc.gl_name;
    self->target = desc.gl_target;
    glt_capture *cap = NULL;
    glt_status s = glt_capture_create(&desc, &cap);
    self->handle = cap;
    if (s != GLT_OK) {
        Py_DECREF(self);
        return glt_py_raise(glt_py_state_of_type(type), s);
    }
    return (PyObject *)self;
}

static glt_status capture_read_frame(void *cap, const glt_read_options *o, glt_frame **out) {
    return glt_capture_read(cap, o, out);
}
static glt_status capture_read_into(void *cap, const glt_read_options *o, const glt_buffer_view *dst) {
    return glt_capture_read_into(cap, o, dst);
}
static const glt_py_reader capture_reader = {&glt_sig_capture_read, offsetof(glt_capture_info, backend),
                                             capture_read_frame, capture_read_into};

/* read(flip=True, *, stream=None, out=None, ...): the per-step call. */
static PyObject *capture_read(CaptureObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    return glt_py_read(self, &capture_reader, args, nargs, kwnames);
}

static PyObject *capture_refresh(CaptureObject *self, PyObject *unused) {
    (void)unused;
    if (!self->handle) return glt_py_closed(self);
    int changed = 0;
    glt_py_lock_take(self->lock);
    glt_status s = self->handle ? glt_capture_refresh(cap_of(self), &changed) : GLT_OK;
    int closed = !self->handle;
    glt_py_lock_give(self->lock);
    if (closed) return glt_py_closed(self);
    if (s != GLT_OK) return glt_py_raise(self->st, s);
    return PyBool_FromLong(changed);
}

static int set_region(CaptureObject *self, PyObject *value, void *c) {
    (void)c;
    if (!value) {
        PyErr_SetString(PyExc_AttributeError, "region cannot be deleted; set it to None for the whole image");
        return -1;
    }
    if (!self->handle) {
        glt_py_closed(self);
        return -1;
    }
    glt_rect r;
    if (glt_py_parse_region(value, "region", &r) < 0) return -1;
    glt_status s = glt_capture_set_region(cap_of(self), &r);
    if (s != GLT_OK) {
        glt_py_raise(self->st, s);
        return -1;
    }
    return 0;
}

static PyObject *get_name(CaptureObject *self, void *c) {
    (void)c;
    return PyLong_FromUnsignedLong(self->name);
}
static PyObject *get_gl_target(CaptureObject *self, void *c) {
    (void)c;
    return PyLong_FromUnsignedLong(self->target);
}

static PyObject *capture_repr(CaptureObject *self) {
    const char *kind = self->target == GLT_RENDERBUFFER ? "renderbuffer" : "texture";
    glt_capture_info i;
    if (glt_py_info(self, &i) < 0) {
        PyErr_Clear();
        return PyUnicode_FromFormat("<gltensor.Capture %s %u closed>", kind, self->name);
    }
    if (i.width != i.image_width || i.height != i.image_height)
        return PyUnicode_FromFormat("<gltensor.Capture %s %u %s %dx%d region=(%d, %d, %d, %d) backend=%s>", kind,
                                    self->name, i.format_name, i.image_width, i.image_height, i.region.x, i.region.y,
                                    i.region.width, i.region.height, glt_backend_name(i.backend));
    return PyUnicode_FromFormat("<gltensor.Capture %s %u %s %dx%d backend=%s>", kind, self->name, i.format_name,
                                i.width, i.height, glt_backend_name(i.backend));
}

static PyMethodDef capture_methods[] = {
    {"read", (PyCFunction)(void (*)(void))capture_read, METH_FASTCALL | METH_KEYWORDS,
     "read(flip=True, *, stream=None, out=None, channels=None, dtype=None, layout=None, depth=None, near=None, "
     "far=None, projection=None) -> Frame | out\n\nCopies the image as it is now. flip=True gives the "
     "top row first (as on screen). stream: CUDA stream (int handle, torch or cupy stream) to issue the copy on. "
     "out: a tensor of shape (H, W, C) and the capture's dtype on its device to write into; it is returned."},
    {"refresh", (PyCFunction)capture_refresh, METH_NOARGS,
     "Re-read size and format from GL now; True when the image was reallocated. read() does this itself."},
    GLT_PY_LIFETIME_METHODS("Release the CUDA registration (idempotent). Frames already read stay valid."),
    {NULL, NULL, 0, NULL},
};

#define I(pyname, doc, as, member) GLT_PY_INFO(pyname, doc, as, glt_capture_info, member)
#define AT(member) offsetof(glt_capture_info, member)
static PyGetSetDef capture_getset[] = {
    {"name", (getter)get_name, NULL, "GL name of the texture or renderbuffer", NULL},
    I("target", "GL target's name, e.g. 'GL_TEXTURE_2D' (target= takes it, or the enum)", GLT_PY_STR, target_name),
    {"gl_target", (getter)get_gl_target, NULL, "GL target enum, e.g. gltensor.GL_TEXTURE_2D", NULL},
    I("format", "GL internal format, e.g. 'GL_RGBA8'", GLT_PY_STR, format_name),
    I("gl_format", "GL internal format enum as GL reports it", GLT_PY_UINT, gl_internal_format),
    I("width", "width of each frame: the region's", GLT_PY_INT, width),
    I("height", "height of each frame: the region's", GLT_PY_INT, height),
    I("channels", NULL, GLT_PY_INT, channels),
    GLT_PY_INFO_INTS("shape", "(height, width, channels) of each frame", AT(height), AT(width), AT(channels)),
    {"region", glt_py_info_get, (setter)set_region,
     "(x, y, width, height) read, lower-left origin; (0, 0, W, H) of the whole image without region=. "
     "Assignable (None: the whole image), with the capture's GL context current, e.g. after a resize changed "
     "an engine's padding.",
     (void *)&(const glt_py_field){GLT_PY_INTS, 4, {AT(region.x), AT(region.y), AT(region.width), AT(region.height)}}},
    GLT_PY_INFO_INTS("image_size", "(width, height) of the whole GL image", AT(image_width), AT(image_height)),
    I("dtype", "'uint8', 'uint16', 'uint32', 'float16' or 'float32'", GLT_PY_DTYPE, dtype),
    I("backend", "'cuda' or 'cpu'", GLT_PY_BACKEND, backend),
    I("backend_reason", "why this backend runs", GLT_PY_STR, backend_reason),
    I("cuda_device", "CUDA ordinal, or None on the CPU backend", GLT_PY_DEVICE, cuda_device),
    GLT_PY_CLOSED_GETTER,
    {NULL, NULL, NULL, NULL, NULL},
};
#undef I
#undef AT

static PyMemberDef capture_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(glt_py_object, weakreflist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot capture_slots[] = {
    {Py_tp_new, capture_new},
    {Py_tp_dealloc, glt_py_dealloc},
    {Py_tp_methods, capture_methods},
    {Py_tp_getset, capture_getset},
    {Py_tp_members, capture_members},
    {Py_tp_repr, capture_repr},
    {Py_tp_doc, "Capture(name, target=GL_TEXTURE_2D (or 'GL_TEXTURE_2D'), *, backend='auto', cuda_device=None, resizable=False, "
                "region=None)\n\nA GL texture or renderbuffer of the GL context current in this thread, registered "
                "once and read per step. NVIDIA's GL refuses to reallocate a texture registered with CUDA; "
                "resizable=True registers it only during each read so that the program may reallocate it between "
                "reads (slower reads). region=(x, y, width, height), in pixels with the lower-left origin of GL "
                "window coordinates, reads only that rectangle (e.g. the image inside Panda3D's power-of-two "
                "padding); frames then have the region's shape."},
    {0, NULL},
};

PyType_Spec glt_capture_spec = {
    .name = "gltensor.Capture",
    .basicsize = sizeof(CaptureObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = capture_slots,
};
