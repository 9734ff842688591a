/* gltensor.Atlas: one texture holding a grid of camera tiles, read as (N, h, w, C) in one pass. */
#include "ext.h"

#include <stdint.h>

typedef struct {
    PyObject_HEAD
    gltensor_state *st;
    glt_atlas *atlas;
    unsigned name;
    PyThread_type_lock lock; /* held while a thread drives atlas: reads run without the GIL */
} AtlasObject;

static int parse_pair(PyObject *obj, const char *what, int *a, int *b) {
    if (obj == Py_None) return 0;
    PyObject *t = PyTuple_Check(obj) || PyList_Check(obj) ? PySequence_Tuple(obj) : NULL;
    if (!t || PyTuple_Size(t) != 2) {
        Py_XDECREF(t);
        PyErr_Format(PyExc_TypeError, "%s must be a pair of ints", what);
        return -1;
    }
    int r = glt_py_as_int(PyTuple_GetItem(t, 0), what, 1, 1 << 20, a) < 0 ||
                    glt_py_as_int(PyTuple_GetItem(t, 1), what, 1, 1 << 20, b) < 0
                ? -1
                : 0;
    Py_DECREF(t);
    return r;
}

static PyObject *atlas_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"name", "target", "tiles", "tile_size", "count", "backend", "cuda_device", "resizable",
                             "region", NULL};
    PyObject *name_obj, *target_obj = NULL, *tiles = Py_None, *tile_size = Py_None, *count = Py_None;
    PyObject *backend = NULL, *device = Py_None, *region = Py_None;
    int resizable = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O$OOOOOpO:Atlas", kwlist, &name_obj, &target_obj, &tiles,
                                     &tile_size, &count, &backend, &device, &resizable, &region))
        return NULL;
    gltensor_state *st = glt_py_state_of_type(type);
    if (!st) return NULL;
    glt_atlas_desc d;
    glt_atlas_desc_init(&d);
    unsigned long name = 0, target = GLT_TEXTURE_2D;
    if (glt_py_as_gl_uint(name_obj, "name", &name) < 0) return NULL;
    if (target_obj && glt_py_as_gl_uint(target_obj, "target", &target) < 0) return NULL;
    d.source.gl_name = (unsigned)name;
    d.source.gl_target = (unsigned)target;
    d.source.resizable = resizable;
    if (glt_py_parse_region(region, "region", &d.source.region) < 0) return NULL;
    if (backend && glt_py_parse_backend(backend, &d.source.backend) < 0) return NULL;
    if (glt_py_as_cuda_device(device, "cuda_device", &d.source.cuda_device) < 0) return NULL;
    if (parse_pair(tiles, "tiles (rows, cols)", &d.rows, &d.cols) < 0 ||
        parse_pair(tile_size, "tile_size (height, width)", &d.tile_height, &d.tile_width) < 0)
        return NULL;
    if (tiles == Py_None && tile_size == Py_None) {
        PyErr_SetString(PyExc_TypeError, "Atlas needs tiles=(rows, cols) or tile_size=(height, width)");
        return NULL;
    }
    /* At most the grid's tiles; the grid itself is at most 2**20 x 2**20, checked with the texture's size. */
    if (count != Py_None && glt_py_as_int(count, "count (tiles to read)", 1, INT32_MAX, &d.count) < 0) return NULL;
    AtlasObject *self = (AtlasObject *)glt_py_alloc(type);
    if (!self) return NULL;
    self->st = st;
    self->name = (unsigned)name;
    if (!(self->lock = glt_py_lock_new())) {
        Py_DECREF(self);
        return NULL;
    }
    glt_status s = glt_atlas_create(&d, &self->atlas);
    if (s != GLT_OK) {
        Py_DECREF(self);
        return glt_py_raise(st, s);
    }
    return (PyObject *)self;
}

static PyObject *closed_error(AtlasObject *self) {
    PyErr_Format(self->st->errors[GLT_CLOSED], "the atlas of texture %u was closed; create a new gltensor.Atlas",
                 self->name);
    return NULL;
}

static PyObject *atlas_read(AtlasObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    glt_py_read_args r;
    if (glt_py_parse_read_args(self->st, "read", args, nargs, kwnames, &r) < 0) return NULL;
    glt_buffer_view view;
    PyObject *keep = NULL;
    if (!self->atlas) return closed_error(self);
    /* out= is described before the lock is taken: its __dlpack__ is Python code, which may use this atlas. The
     * lock is not held while it runs (the lock is not reentrant). */
    if (r.out != Py_None) {
        glt_capture_info info;
        glt_py_lock_take(self->lock); /* a read in another thread may be re-reading the size */
        if (self->atlas) glt_capture_get_info(glt_atlas_capture(self->atlas), &info);
        int closed = !self->atlas;
        glt_py_lock_give(self->lock);
        if (closed) return closed_error(self);
        if (glt_py_out_view(self->st, &r, info.backend == GLT_BACKEND_CUDA, &view, &keep) < 0) return NULL;
    }
    glt_py_lock_take(self->lock);
    if (!self->atlas) {
        glt_py_lock_give(self->lock);
        Py_XDECREF(keep);
        return closed_error(self);
    }
    /* Map, copy and unmap (or the GL readback) run without the GIL, under the atlas's lock. */
    glt_frame *frame = NULL;
    glt_status s;
    Py_BEGIN_ALLOW_THREADS
    s = r.out == Py_None ? glt_atlas_read(self->atlas, &r.opts, &frame) : glt_atlas_read_into(self->atlas, &r.opts, &view);
    Py_END_ALLOW_THREADS
    glt_py_lock_give(self->lock);
    Py_XDECREF(keep);
    if (s != GLT_OK) return glt_py_raise(self->st, s);
    return r.out == Py_None ? glt_py_frame_new(self->st, frame) : Py_NewRef(r.out);
}

static PyObject *atlas_viewport(AtlasObject *self, PyObject *arg) {
    if (!self->atlas) return closed_error(self);
    int k = 0;
    if (glt_py_as_int(arg, "the tile index", INT32_MIN, INT32_MAX, &k) < 0) return NULL;
    int vp[4];
    glt_status s = glt_atlas_viewport(self->atlas, k, vp);
    if (s != GLT_OK) return glt_py_raise(self->st, s);
    return Py_BuildValue("(iiii)", vp[0], vp[1], vp[2], vp[3]);
}

static PyObject *atlas_viewports(AtlasObject *self, PyObject *unused) {
    (void)unused;
    if (!self->atlas) return closed_error(self);
    int count;
    glt_atlas_grid(self->atlas, NULL, NULL, NULL, NULL, &count);
    PyObject *list = PyList_New(count);
    for (int k = 0; list && k < count; ++k) {
        int vp[4];
        glt_atlas_viewport(self->atlas, k, vp);
        PyObject *t = Py_BuildValue("(iiii)", vp[0], vp[1], vp[2], vp[3]);
        if (!t) Py_CLEAR(list);
        else PyList_SetItem(list, k, t);
    }
    return list;
}

static PyObject *atlas_close(AtlasObject *self, PyObject *unused) {
    (void)unused;
    glt_py_lock_take(self->lock); /* waits for a read in flight in another thread */
    glt_atlas *atlas = self->atlas;
    self->atlas = NULL;
    glt_py_lock_give(self->lock);
    glt_atlas_destroy(atlas);
    Py_RETURN_NONE;
}

static PyObject *atlas_enter(AtlasObject *self, PyObject *unused) {
    (void)unused;
    if (!self->atlas) return closed_error(self);
    return Py_NewRef(self);
}

static PyObject *atlas_exit(AtlasObject *self, PyObject *args) {
    (void)args;
    return atlas_close(self, NULL);
}

static void atlas_dealloc(AtlasObject *self) {
    glt_atlas_destroy(self->atlas);
    if (self->lock) PyThread_free_lock(self->lock);
    glt_py_free_instance((PyObject *)self);
}

static int info_of(AtlasObject *self, glt_capture_info *i, int g[5]) {
    glt_py_lock_take(self->lock); /* a read in another thread may be re-reading the size */
    int closed = !self->atlas;
    if (!closed) {
        glt_capture_get_info(glt_atlas_capture(self->atlas), i);
        glt_atlas_grid(self->atlas, &g[0], &g[1], &g[2], &g[3], &g[4]);
    }
    glt_py_lock_give(self->lock);
    if (closed) {
        closed_error(self);
        return -1;
    }
    return 0;
}

#define ATLAS_GETTER(fn, expr)                        \
    static PyObject *fn(AtlasObject *self, void *c) { \
        (void)c;                                      \
        glt_capture_info i;                           \
        int g[5];                                     \
        if (info_of(self, &i, g) < 0) return NULL;    \
        return expr;                                  \
    }
ATLAS_GETTER(get_tiles, Py_BuildValue("(ii)", g[0], g[1]))
ATLAS_GETTER(get_tile_size, Py_BuildValue("(ii)", g[2], g[3]))
ATLAS_GETTER(get_count, PyLong_FromLong(g[4]))
ATLAS_GETTER(get_shape, Py_BuildValue("(iiii)", g[4], g[2], g[3], i.channels))
ATLAS_GETTER(get_size, Py_BuildValue("(ii)", i.image_width, i.image_height))
ATLAS_GETTER(get_region, Py_BuildValue("(iiii)", i.region.x, i.region.y, i.region.width, i.region.height))
ATLAS_GETTER(get_dtype, PyUnicode_FromString(glt_dtype_name(i.dtype)))
ATLAS_GETTER(get_format, PyUnicode_FromString(i.format_name))
ATLAS_GETTER(get_backend, PyUnicode_FromString(glt_backend_name(i.backend)))
ATLAS_GETTER(get_backend_reason, PyUnicode_FromString(i.backend_reason))
#undef ATLAS_GETTER

static PyObject *get_closed(AtlasObject *self, void *c) {
    (void)c;
    return PyBool_FromLong(self->atlas == NULL);
}
static Py_ssize_t atlas_len(AtlasObject *self) {
    int count = 0;
    if (self->atlas) glt_atlas_grid(self->atlas, NULL, NULL, NULL, NULL, &count);
    return count;
}

static PyMethodDef atlas_methods[] = {
    {"read", (PyCFunction)(void (*)(void))atlas_read, METH_FASTCALL | METH_KEYWORDS,
     "read(flip=True, stream=None, out=None) -> Frame | out\n\nAll tiles as one (N, h, w, C) frame: tile 0 is the "
     "top-left tile as seen on screen, then row by row. One map, one kernel launch."},
    {"viewport", (PyCFunction)atlas_viewport, METH_O,
     "viewport(k) -> (x, y, width, height): the glViewport that draws camera k into tile k."},
    {"viewports", (PyCFunction)atlas_viewports, METH_NOARGS, "viewport(k) for every tile"},
    {"close", (PyCFunction)atlas_close, METH_NOARGS, "Release the atlas (idempotent)."},
    {"__enter__", (PyCFunction)atlas_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)atlas_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef atlas_getset[] = {
    {"tiles", (getter)get_tiles, NULL, "(rows, cols) of the grid", NULL},
    {"tile_size", (getter)get_tile_size, NULL, "(height, width) of a tile", NULL},
    {"count", (getter)get_count, NULL, "tiles read", NULL},
    {"shape", (getter)get_shape, NULL, "(count, tile height, tile width, channels)", NULL},
    {"size", (getter)get_size, NULL, "(width, height) of the whole texture", NULL},
    {"region", (getter)get_region, NULL, "(x, y, width, height) the grid lies in; the whole texture by default", NULL},
    {"dtype", (getter)get_dtype, NULL, NULL, NULL},
    {"format", (getter)get_format, NULL, NULL, NULL},
    {"backend", (getter)get_backend, NULL, NULL, NULL},
    {"backend_reason", (getter)get_backend_reason, NULL, NULL, NULL},
    {"closed", (getter)get_closed, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot atlas_slots[] = {
    {Py_tp_new, atlas_new},
    {Py_tp_dealloc, atlas_dealloc},
    {Py_tp_methods, atlas_methods},
    {Py_tp_getset, atlas_getset},
    {Py_sq_length, atlas_len},
    {Py_tp_doc, "Atlas(name, target=GL_TEXTURE_2D, *, tiles=None, tile_size=None, count=None, backend='auto', "
                "cuda_device=None, resizable=False, region=None)\n\nOne texture holding a grid of equal tiles, one "
                "camera each. Draw camera k with glViewport(*atlas.viewport(k)); read() gives (count, tile_h, tile_w, "
                "C). region=(x, y, w, h): the grid is laid inside that rectangle (viewports stay in whole-texture "
                "coordinates)."},
    {0, NULL},
};

PyType_Spec glt_atlas_spec = {
    .name = "gltensor.Atlas",
    .basicsize = sizeof(AtlasObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = atlas_slots,
};
