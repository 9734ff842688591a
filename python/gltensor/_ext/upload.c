/* gltensor.Upload: a GL texture registered once, written from tensors (the reverse of Capture). */
#include "read_args.h"

#include <string.h>

typedef glt_py_object UploadObject; /* handle: the glt_upload */

static void upload_destroy(void *handle) { glt_upload_destroy(handle); }
static void upload_info(void *handle, void *out) { glt_upload_get_info(handle, out); }
GLT_PY_INFO_FITS(glt_upload_info);
static const glt_py_kind upload_kind = {
    .closed_message = "the upload into %s %u was closed; create a new gltensor.Upload to write it again",
    .destroy = upload_destroy,
    .info = upload_info,
};
static glt_upload *upload_of(UploadObject *self) { return self->handle; }

/* The first argument is `name`, as for every object made from one GL object; `texture=` was its keyword up to 0.2. */
GLT_PY_SIG(glt_sig_upload_new, "Upload.__new__", {"name", GLT_PY_POSITIONAL, NULL, "texture"},
           {"target", GLT_PY_POSITIONAL, "...", NULL}, {"backend", GLT_PY_KEYWORD, "'auto'", NULL},
           {"cuda_device", GLT_PY_KEYWORD, "None", NULL});

static PyObject *upload_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *v[4];
    unsigned long name = 0;
    if (glt_py_parse_tuple(&glt_sig_upload_new, args, kwargs, v) < 0) return NULL;
    glt_upload_desc desc;
    glt_upload_desc_init(&desc);
    if (glt_py_as_gl_uint(v[0], "name", &name) < 0 || glt_py_as_gl_target(v[1], &desc.gl_target) < 0 ||
        glt_py_parse_backend(v[2], &desc.backend) < 0 ||
        glt_py_as_cuda_device(v[3] ? v[3] : Py_None, "cuda_device", &desc.cuda_device) < 0)
        return NULL;
    desc.gl_name = (unsigned)name;
    gltensor_state *st = glt_py_state_of_type(type);
    if (!st) return NULL;
    UploadObject *self = glt_py_object_new(type, &upload_kind, 0);
    if (!self) return NULL;
    self->name = desc.gl_name;
    self->target = desc.gl_target;
    glt_upload *up = NULL;
    glt_status s = glt_upload_create(&desc, &up);
    self->handle = up;
    if (s != GLT_OK) {
        Py_DECREF(self);
        return glt_py_raise(st, s);
    }
    return (PyObject *)self;
}

/* channels='bgr' names what each source channel is; a tuple gives texture channel indices. */
static int parse_channels(PyObject *obj, glt_write_options *o) {
    return glt_py_parse_channels(obj, o->channels, &o->n_channels,
                                 "channels must name each source channel's texture channel: 1 to 4 of 'r', 'g', 'b', "
                                 "'a' (e.g. 'bgr' for a BGR tensor) or 1 to 4 texture channel indices");
}

/* The interop layer names the tensor "out="; here it is the source. */
static void rename_source_error(void) {
    if (!PyErr_Occurred()) return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *msg = value ? PyObject_Str(value) : NULL;
    PyObject *fixed = NULL;
    if (msg) {
        PyObject *a = PyUnicode_FromString("out= "), *b = PyUnicode_FromString("the source ");
        PyObject *c = PyUnicode_FromString("out="), *d = PyUnicode_FromString("the source");
        PyObject *t = (a && b) ? PyUnicode_Replace(msg, a, b, -1) : NULL;
        fixed = (t && c && d) ? PyUnicode_Replace(t, c, d, -1) : NULL;
        Py_XDECREF(a), Py_XDECREF(b), Py_XDECREF(c), Py_XDECREF(d), Py_XDECREF(t), Py_XDECREF(msg);
    }
    if (fixed) {
        PyErr_SetObject(type, fixed);
        Py_DECREF(fixed);
        Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb);
    } else {
        PyErr_Clear();
        PyErr_Restore(type, value, tb);
    }
}

/* write(x, flip=True, stream=None, *, channels=None, layout='hwc', region=None); None means the default for
 * every option (flip=None is True: rows top first, as reads give them). */
/* The tensor describer (shared with reads' out=) refuses element types no capture produces and lists the
 * read-side types; for a write what counts is what this texture takes, which the core says. */
static void accepted_types_hint(UploadObject *self) {
    if (!PyErr_Occurred() || !self->handle) return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *msg = value ? PyObject_Str(value) : NULL;
    const char *s = msg ? PyUnicode_AsUTF8AndSize(msg, NULL) : NULL;
    const char *cut = s ? strstr(s, ", which no capturable format produces") : NULL;
    if (cut) {
        PyObject *head = PyUnicode_FromStringAndSize(s, (Py_ssize_t)(cut - s));
        PyObject *fixed = head ? PyUnicode_FromFormat("%U, which gltensor cannot write into texture %u: %s", head,
                                                      self->name, glt_upload_accepted_dtypes(upload_of(self)))
                               : NULL;
        Py_XDECREF(head);
        if (fixed) {
            Py_XDECREF(value);
            value = fixed;
        }
    }
    Py_XDECREF(msg);
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
}

/* write(x, flip=True, *, stream=None, channels=None, layout='hwc', region=None): stream= was positional up to 0.2. */
GLT_PY_SIG(glt_sig_upload_write, "Upload.write", {"x", GLT_PY_POSITIONAL, NULL, NULL},
           {"flip", GLT_PY_POSITIONAL, "True", NULL}, {"stream", GLT_PY_KEYWORD_WAS_POSITIONAL, "None", NULL},
           {"channels", GLT_PY_KEYWORD, "None", NULL}, {"layout", GLT_PY_KEYWORD, "'hwc'", NULL},
           {"region", GLT_PY_KEYWORD, "None", NULL});

static PyObject *upload_write(UploadObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *v[6];
    if (glt_py_parse(&glt_sig_upload_write, args, nargs, kwnames, v) < 0) return NULL;
    for (int i = 1; i < 6; ++i)
        if (!v[i]) v[i] = Py_None;
    PyObject *x = v[0], *flip_obj = v[1], *stream_obj = v[2], *channels = v[3], *layout_obj = v[4], *region = v[5];
    gltensor_state *st = self->st;
    if (!self->handle) return glt_py_closed(self);
    glt_write_options opts;
    glt_write_options_init(&opts);
    if (glt_py_as_flag(flip_obj, 1, &opts.flip) < 0) return NULL;
    if (layout_obj != Py_None && glt_py_parse_layout(layout_obj, &opts.layout) < 0) return NULL;
    if (channels != Py_None && parse_channels(channels, &opts) < 0) return NULL;
    if (glt_py_parse_region(region, "region", &opts.region) < 0) return NULL;
    /* The conversions above ran the caller's code, which may have closed this upload. */
    if (!self->handle) return glt_py_closed(self);
    glt_upload_info info;
    glt_upload_get_info(upload_of(self), &info);
    int want_cuda = info.backend == GLT_BACKEND_CUDA;
    glt_py_read_args r;
    memset(&r, 0, sizeof r);
    r.out = x;
    r.stream_given = stream_obj != Py_None;
    if (r.stream_given && glt_py_parse_stream(st, stream_obj, &r.opts.cuda_stream) < 0) return NULL;
    glt_buffer_view view;
    PyObject *keep = NULL;
    if (glt_py_out_view(st, &r, want_cuda, &view, &keep) < 0) {
        rename_source_error();
        accepted_types_hint(self);
        return NULL;
    }
    if (!self->handle) { /* describing x ran its __dlpack__ / interface code */
        Py_XDECREF(keep);
        return glt_py_closed(self);
    }
    /* Only CUDA uses a stream; the CPU backend refuses one the caller gave, not the defaults. */
    opts.cuda_stream = want_cuda || r.stream_given ? r.opts.cuda_stream : NULL;
    glt_status s = glt_upload_write(upload_of(self), &opts, &view);
    Py_XDECREF(keep);
    if (s != GLT_OK) return glt_py_raise(st, s);
    Py_RETURN_NONE;
}

static PyObject *get_name(UploadObject *self, void *c) {
    (void)c;
    return PyLong_FromUnsignedLong(self->name);
}

static PyObject *upload_repr(UploadObject *self) {
    if (!self->handle) return PyUnicode_FromFormat("<gltensor.Upload texture %u closed>", self->name);
    glt_upload_info i;
    glt_upload_get_info(upload_of(self), &i);
    return PyUnicode_FromFormat("<gltensor.Upload texture %u %s %dx%d backend=%s>", self->name, i.format_name, i.width,
                                i.height, glt_backend_name(i.backend));
}

static PyMethodDef upload_methods[] = {
    {"write", (PyCFunction)(void (*)(void))upload_write, METH_FASTCALL | METH_KEYWORDS,
     "write(x, flip=True, *, stream=None, channels=None, layout='hwc', region=None)\n\nWrites tensor x into the "
     "texture in one pass. x: (H, W, C) (or (C, H, W) with layout='chw') uint8, uint16, float16 or float32 "
     "(integer textures: unsigned integers), a CUDA tensor on the CUDA backend and a host array on the CPU "
     "backend. flip=True: row 0 of x is the top of the displayed image. channels: what each source channel is "
     "('bgr', 'rgb', ...); texture channels not given are filled (alpha with 1, others with 0). Float sources "
     "become unorm as round(clamp(x, 0, 1) * 255); uint8 sources become floats as x / 255. region=(x, y, w, h): "
     "a rectangle with its lower-left corner at (x, y) in GL's convention (default: the whole texture). stream: "
     "CUDA stream to write on (default: the tensor's own stream (CAI v3), else the legacy default stream). GL work "
     "issued after write() returns sees the new content."},
    GLT_PY_LIFETIME_METHODS("Release the CUDA registration (idempotent)."),
    {NULL, NULL, 0, NULL},
};

#define I(pyname, doc, as, member) GLT_PY_INFO(pyname, doc, as, glt_upload_info, member)
#define AT(member) offsetof(glt_upload_info, member)
static PyGetSetDef upload_getset[] = {
    {"name", (getter)get_name, NULL, "GL name of the texture", NULL},
    I("format", "GL internal format, e.g. 'GL_RGBA8'", GLT_PY_STR, format_name),
    I("width", NULL, GLT_PY_INT, width),
    I("height", NULL, GLT_PY_INT, height),
    I("channels", "channels the texture stores", GLT_PY_INT, channels),
    GLT_PY_INFO_INTS("shape", "(height, width, channels) of the whole texture", AT(height), AT(width), AT(channels)),
    I("dtype", "stored element type", GLT_PY_DTYPE, dtype),
    I("backend", "'cuda' or 'cpu'", GLT_PY_BACKEND, backend),
    I("backend_reason", "why this backend runs", GLT_PY_STR, backend_reason),
    I("cuda_device", "CUDA ordinal, or None on the CPU backend", GLT_PY_DEVICE, cuda_device),
    GLT_PY_CLOSED_GETTER,
    {NULL, NULL, NULL, NULL, NULL},
};
#undef I
#undef AT

static PyType_Slot upload_slots[] = {
    {Py_tp_new, upload_new},
    {Py_tp_dealloc, glt_py_dealloc},
    {Py_tp_methods, upload_methods},
    {Py_tp_getset, upload_getset},
    {Py_tp_repr, upload_repr},
    {Py_tp_doc, "Upload(name, target=GL_TEXTURE_2D, *, backend='auto', cuda_device=None)\n\nA GL texture of the "
                "context current in this thread, registered once for writing and written from tensors with "
                "write(x). The CUDA backend writes CUDA tensors with one kernel on the GPU; the CPU backend writes "
                "host arrays with glTexSubImage2D."},
    {0, NULL},
};

PyType_Spec glt_upload_spec = {
    .name = "gltensor.Upload",
    .basicsize = sizeof(UploadObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = upload_slots,
};
