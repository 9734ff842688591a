/* gltensor.Atlas: one texture holding a grid of camera tiles, read as (N, h, w, C) in one pass. */
#include "object.h"

#include <stdint.h>

typedef glt_py_object AtlasObject; /* handle: the glt_atlas */

/* What the info getters read: the atlas's capture and its grid. */
typedef struct {
    glt_capture_info cap;
    int rows, cols, tile_height, tile_width, count;
} atlas_info;

static void atlas_destroy(void *handle) { glt_atlas_destroy(handle); }
static void atlas_get_info(void *handle, void *out) {
    atlas_info *i = out;
    glt_capture_get_info(glt_atlas_capture(handle), &i->cap);
    glt_atlas_grid(handle, &i->rows, &i->cols, &i->tile_height, &i->tile_width, &i->count);
}
GLT_PY_INFO_FITS(atlas_info);
static const glt_py_kind atlas_kind = {
    .closed_message = "the atlas of %s %u was closed; create a new gltensor.Atlas",
    .destroy = atlas_destroy,
    .info = atlas_get_info,
};
static glt_atlas *atlas_of(AtlasObject *self) { return self->handle; }

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
    AtlasObject *self = glt_py_object_new(type, &atlas_kind, 1);
    if (!self) return NULL;
    self->name = (unsigned)name;
    self->target = (unsigned)target;
    glt_atlas *atlas = NULL;
    glt_status s = glt_atlas_create(&d, &atlas);
    self->handle = atlas;
    if (s != GLT_OK) {
        Py_DECREF(self);
        return glt_py_raise(st, s);
    }
    return (PyObject *)self;
}

static PyObject *atlas_read(AtlasObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    glt_py_read_args r;
    if (glt_py_parse_read_args(self->st, "read", args, nargs, kwnames, &r) < 0) return NULL;
    glt_buffer_view view;
    PyObject *keep = NULL;
    if (!self->handle) return glt_py_closed(self);
    /* out= is described before the lock is taken: its __dlpack__ is Python code, which may use this atlas. The
     * lock is not held while it runs (the lock is not reentrant). */
    if (r.out != Py_None) {
        atlas_info info; /* under the lock: a read in another thread may be re-reading the size */
        if (glt_py_info(self, &info) < 0) return NULL;
        if (glt_py_out_view(self->st, &r, info.cap.backend == GLT_BACKEND_CUDA, &view, &keep) < 0) return NULL;
    }
    glt_py_lock_take(self->lock);
    if (!self->handle) {
        glt_py_lock_give(self->lock);
        Py_XDECREF(keep);
        return glt_py_closed(self);
    }
    /* Map, copy and unmap (or the GL readback) run without the GIL, under the atlas's lock. */
    glt_frame *frame = NULL;
    glt_status s;
    Py_BEGIN_ALLOW_THREADS
    s = r.out == Py_None ? glt_atlas_read(atlas_of(self), &r.opts, &frame)
                         : glt_atlas_read_into(atlas_of(self), &r.opts, &view);
    Py_END_ALLOW_THREADS
    glt_py_lock_give(self->lock);
    Py_XDECREF(keep);
    if (s != GLT_OK) return glt_py_raise(self->st, s);
    return r.out == Py_None ? glt_py_frame_new(self->st, frame) : Py_NewRef(r.out);
}

static PyObject *atlas_viewport(AtlasObject *self, PyObject *arg) {
    if (!self->handle) return glt_py_closed(self);
    int k = 0;
    if (glt_py_as_int(arg, "the tile index", INT32_MIN, INT32_MAX, &k) < 0) return NULL;
    int vp[4];
    glt_status s = glt_atlas_viewport(atlas_of(self), k, vp);
    if (s != GLT_OK) return glt_py_raise(self->st, s);
    return Py_BuildValue("(iiii)", vp[0], vp[1], vp[2], vp[3]);
}

static PyObject *atlas_viewports(AtlasObject *self, PyObject *unused) {
    (void)unused;
    if (!self->handle) return glt_py_closed(self);
    int count;
    glt_atlas_grid(atlas_of(self), NULL, NULL, NULL, NULL, &count);
    PyObject *list = PyList_New(count);
    for (int k = 0; list && k < count; ++k) {
        int vp[4];
        glt_atlas_viewport(atlas_of(self), k, vp);
        PyObject *t = Py_BuildValue("(iiii)", vp[0], vp[1], vp[2], vp[3]);
        if (!t) Py_CLEAR(list);
        else PyList_SetItem(list, k, t);
    }
    return list;
}

static Py_ssize_t atlas_len(AtlasObject *self) {
    int count = 0;
    if (self->handle) glt_atlas_grid(atlas_of(self), NULL, NULL, NULL, NULL, &count);
    return count;
}

static PyMethodDef atlas_methods[] = {
    {"read", (PyCFunction)(void (*)(void))atlas_read, METH_FASTCALL | METH_KEYWORDS,
     "read(flip=True, stream=None, out=None) -> Frame | out\n\nAll tiles as one (N, h, w, C) frame: tile 0 is the "
     "top-left tile as seen on screen, then row by row. One map, one kernel launch."},
    {"viewport", (PyCFunction)atlas_viewport, METH_O,
     "viewport(k) -> (x, y, width, height): the glViewport that draws camera k into tile k."},
    {"viewports", (PyCFunction)atlas_viewports, METH_NOARGS, "viewport(k) for every tile"},
    GLT_PY_LIFETIME_METHODS("Release the atlas (idempotent)."),
    {NULL, NULL, 0, NULL},
};

#define I(pyname, doc, as, member) GLT_PY_INFO(pyname, doc, as, atlas_info, member)
#define AT(member) offsetof(atlas_info, member)
static PyGetSetDef atlas_getset[] = {
    GLT_PY_INFO_INTS("tiles", "(rows, cols) of the grid", AT(rows), AT(cols)),
    GLT_PY_INFO_INTS("tile_size", "(height, width) of a tile", AT(tile_height), AT(tile_width)),
    I("count", "tiles read", GLT_PY_INT, count),
    GLT_PY_INFO_INTS("shape", "(count, tile height, tile width, channels)", AT(count), AT(tile_height),
                     AT(tile_width), AT(cap.channels)),
    GLT_PY_INFO_INTS("size", "(width, height) of the whole texture", AT(cap.image_width), AT(cap.image_height)),
    GLT_PY_INFO_INTS("region", "(x, y, width, height) the grid lies in; the whole texture by default",
                     AT(cap.region.x), AT(cap.region.y), AT(cap.region.width), AT(cap.region.height)),
    I("dtype", NULL, GLT_PY_DTYPE, cap.dtype),
    I("format", NULL, GLT_PY_STR, cap.format_name),
    I("backend", NULL, GLT_PY_BACKEND, cap.backend),
    I("backend_reason", NULL, GLT_PY_STR, cap.backend_reason),
    GLT_PY_CLOSED_GETTER,
    {NULL, NULL, NULL, NULL, NULL},
};
#undef I
#undef AT

static PyType_Slot atlas_slots[] = {
    {Py_tp_new, atlas_new},
    {Py_tp_dealloc, glt_py_dealloc},
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
