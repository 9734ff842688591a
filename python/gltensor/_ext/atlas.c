/* gltensor.Atlas: one texture holding a grid of camera tiles, read as (N, h, w, C) in one pass. */
#include "read_args.h"

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

GLT_PY_SIG(glt_sig_atlas_new, "Atlas.__new__", {"name", GLT_PY_POSITIONAL, NULL, NULL},
           {"target", GLT_PY_POSITIONAL, "...", NULL}, {"tiles", GLT_PY_KEYWORD, "None", NULL},
           {"tile_size", GLT_PY_KEYWORD, "None", NULL}, {"count", GLT_PY_KEYWORD, "None", NULL},
           {"backend", GLT_PY_KEYWORD, "'auto'", NULL}, {"cuda_device", GLT_PY_KEYWORD, "None", NULL},
           {"resizable", GLT_PY_KEYWORD, "False", NULL}, {"region", GLT_PY_KEYWORD, "None", NULL});

static PyObject *atlas_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *v[9];
    if (glt_py_parse_tuple(&glt_sig_atlas_new, args, kwargs, v) < 0) return NULL;
    PyObject *tiles = v[2] ? v[2] : Py_None, *tile_size = v[3] ? v[3] : Py_None, *count = v[4] ? v[4] : Py_None;
    PyObject *const source[6] = {v[0], v[1], v[5], v[6], v[7], v[8]}; /* Capture's rows */
    glt_atlas_desc d;
    glt_atlas_desc_init(&d);
    if (glt_py_capture_desc(source, &d.source) < 0) return NULL;
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
    self->name = d.source.gl_name;
    self->target = d.source.gl_target;
    glt_atlas *atlas = NULL;
    glt_status s = glt_atlas_create(&d, &atlas);
    self->handle = atlas;
    if (s != GLT_OK) {
        Py_DECREF(self);
        return glt_py_raise(glt_py_state_of_type(type), s);
    }
    return (PyObject *)self;
}

static glt_status atlas_read_frame(void *atlas, const glt_read_options *o, glt_frame **out) {
    return glt_atlas_read(atlas, o, out);
}
static glt_status atlas_read_into(void *atlas, const glt_read_options *o, const glt_buffer_view *dst) {
    return glt_atlas_read_into(atlas, o, dst);
}
static const glt_py_reader atlas_reader = {&glt_sig_atlas_read, offsetof(atlas_info, cap.backend), atlas_read_frame,
                                           atlas_read_into};

static PyObject *atlas_read(AtlasObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    return glt_py_read(self, &atlas_reader, args, nargs, kwnames);
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

/* The grid keeps its tiles: a new region may move it (same size), not resize it. */
static int set_region(AtlasObject *self, PyObject *value, void *c) {
    (void)c;
    if (!value) {
        PyErr_SetString(PyExc_AttributeError, "region cannot be deleted; set it to None for the whole texture");
        return -1;
    }
    atlas_info i;
    glt_rect r;
    if (glt_py_parse_region(value, "region", &r) < 0 || glt_py_info(self, &i) < 0) return -1;
    int w = value == Py_None ? i.cap.image_width : r.width, h = value == Py_None ? i.cap.image_height : r.height;
    if (w != i.cap.region.width || h != i.cap.region.height) {
        PyErr_Format(PyExc_ValueError,
                     "Atlas.region can move the grid, not resize it: its %dx%d tiles of %dx%d fill a %dx%d region, "
                     "not %dx%d; create a new gltensor.Atlas for a region of another size",
                     i.rows, i.cols, i.tile_height, i.tile_width, i.cap.region.width, i.cap.region.height, w, h);
        return -1;
    }
    glt_py_lock_take(self->lock); /* not while a read in another thread uses the region */
    glt_status s = self->handle ? glt_capture_set_region(glt_atlas_capture(atlas_of(self)), &r) : GLT_CLOSED;
    int closed = !self->handle;
    glt_py_lock_give(self->lock);
    if (closed) return glt_py_closed(self), -1;
    return s == GLT_OK ? 0 : (glt_py_raise(self->st, s), -1);
}

#define AT(member) offsetof(atlas_info, member)
static const glt_py_field image_size = {GLT_PY_INTS, 2, {AT(cap.image_width), AT(cap.image_height)}};
/* Deprecated in 0.3: Capture and Atlas name the whole image's size alike. */
static PyObject *get_size(PyObject *self, void *c) {
    (void)c;
    if (PyErr_WarnEx(PyExc_DeprecationWarning,
                     "Atlas.size is deprecated and goes in the next release; use Atlas.image_size (as on Capture)",
                     1) < 0)
        return NULL;
    return glt_py_info_get(self, (void *)&image_size);
}
#undef AT

static Py_ssize_t atlas_len(AtlasObject *self) {
    int count = 0;
    if (self->handle) glt_atlas_grid(atlas_of(self), NULL, NULL, NULL, NULL, &count);
    return count;
}

static PyMethodDef atlas_methods[] = {
    {"read", (PyCFunction)(void (*)(void))atlas_read, METH_FASTCALL | METH_KEYWORDS,
     "read(flip=True, *, stream=None, out=None, channels=None, dtype=None, layout=None, depth=None, near=None, "
     "far=None, projection=None) -> Frame | out\n\nAll tiles as one (N, h, w, C) frame: tile 0 is the "
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
    {"image_size", glt_py_info_get, NULL, "(width, height) of the whole texture", (void *)&image_size},
    {"size", get_size, NULL, "deprecated: image_size", NULL},
    {"region", glt_py_info_get, (setter)set_region,
     "(x, y, width, height) the grid lies in; the whole texture by default. Assignable with a region of the same "
     "size (the grid moves; viewports follow), with the atlas's GL context current.",
     (void *)&(const glt_py_field){GLT_PY_INTS, 4,
                                   {AT(cap.region.x), AT(cap.region.y), AT(cap.region.width), AT(cap.region.height)}}},
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
