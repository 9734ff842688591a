/*
 * The read options every read() takes (flip, stream, out, channels, dtype, layout, depth, near, far,
 * projection), parsed from one table, and the one read path of the objects read under their own lock
 * (Capture, Atlas, _Slots): describe out=, take the lock, map-copy-unmap without the GIL, hand back a Frame
 * or out. Batch locks its captures too and keeps its own read, with the same parse.
 */
#include "read_args.h"

#include <stdint.h>
#include <string.h>

/* The rows of every read(); read_list() has them without out=. stream= and out= were positional up to 0.2. */
#define READ_ROWS_HEAD {"flip", GLT_PY_POSITIONAL, "True", NULL}, {"stream", GLT_PY_KEYWORD_WAS_POSITIONAL, "None", NULL}
#define READ_ROW_OUT {"out", GLT_PY_KEYWORD_WAS_POSITIONAL, "None", NULL}
#define READ_ROWS_TAIL                                                                                             \
    {"channels", GLT_PY_KEYWORD, "None", NULL}, {"dtype", GLT_PY_KEYWORD, "None", NULL},                          \
        {"layout", GLT_PY_KEYWORD, "None", NULL}, {"depth", GLT_PY_KEYWORD, "None", NULL},                        \
        {"near", GLT_PY_KEYWORD, "None", NULL}, {"far", GLT_PY_KEYWORD, "None", NULL},                            \
        {"projection", GLT_PY_KEYWORD, "None", NULL}
GLT_PY_SIG(glt_sig_capture_read, "Capture.read", READ_ROWS_HEAD, READ_ROW_OUT, READ_ROWS_TAIL);
GLT_PY_SIG(glt_sig_batch_read, "Batch.read", READ_ROWS_HEAD, READ_ROW_OUT, READ_ROWS_TAIL);
GLT_PY_SIG(glt_sig_atlas_read, "Atlas.read", READ_ROWS_HEAD, READ_ROW_OUT, READ_ROWS_TAIL);
GLT_PY_SIG(glt_sig_slots_read, "_Slots.read", READ_ROWS_HEAD, READ_ROW_OUT, READ_ROWS_TAIL);
GLT_PY_SIG(glt_sig_batch_read_list, "Batch.read_list", READ_ROWS_HEAD, READ_ROWS_TAIL);
GLT_PY_SIG(glt_sig_slots_read_view, "_Slots.read_view", READ_ROWS_HEAD, READ_ROWS_TAIL);

static int parse_channels(PyObject *obj, glt_read_options *o) {
    return glt_py_parse_channels(obj, o->channels, &o->n_channels,
                                 "channels must be 1 to 4 of 'r', 'g', 'b', 'a' (e.g. 'rgb', 'bgr', 'bgra', 'r') or 1 "
                                 "to 4 source channel indices");
}

/* dtype= accepts names ('float32'), NumPy dtypes and scalar types, and torch dtypes. */
static int parse_dtype(PyObject *obj, glt_read_options *o) {
    static const struct {
        const char *name;
        glt_dtype dtype;
    } names[] = {{"uint8", GLT_DTYPE_UINT8},
                 {"float16", GLT_DTYPE_FLOAT16},
                 {"bfloat16", GLT_DTYPE_BFLOAT16},
                 {"float32", GLT_DTYPE_FLOAT32}};
    PyObject *keep = NULL;
    const char *s = glt_py_dtype_name(obj, &keep);
    if (!s) return -1;
    for (size_t i = 0; i < sizeof names / sizeof *names; ++i)
        if (!strcmp(s, names[i].name)) {
            o->convert_dtype = 1;
            o->dtype = names[i].dtype;
            Py_DECREF(keep);
            return 0;
        }
    Py_DECREF(keep);
    PyErr_Format(PyExc_ValueError, "dtype must be uint8, float16, bfloat16 or float32 (or None for the stored type), "
                                   "not %R", obj);
    return -1;
}

int glt_py_parse_layout(PyObject *obj, glt_layout *order) {
    /* Both cases, for reads and writes alike. */
    static const char *const layouts[] = {"hwc", "chw", "HWC", "CHW"};
    int k = 0;
    if (glt_py_as_choice(obj, "layout", layouts, 4, 0, &k) < 0) return -1;
    *order = k % 2 ? GLT_LAYOUT_CHW : GLT_LAYOUT_HWC;
    return 0;
}

/* depth="window" | "raw" | "linear", projection="perspective" | "orthographic", near=, far= (None: the defaults) */
static int parse_depth(PyObject *depth, PyObject *projection, PyObject *near_obj, PyObject *far_obj,
                       glt_read_options *o) {
    static const char *const depths[] = {"window", "raw", "linear"};
    static const char *const projections[] = {"perspective", "orthographic"};
    int d = 0, p = 0;
    if (glt_py_as_choice(depth, "depth", depths, 3, 0, &d) < 0 ||
        glt_py_as_choice(projection, "projection", projections, 2, 0, &p) < 0)
        return -1;
    if (d == 2) {
        if (near_obj == Py_None || far_obj == Py_None) {
            PyErr_SetString(PyExc_TypeError, "depth='linear' needs near= and far=, the planes of the projection the "
                                             "depth was rendered with");
            return -1;
        }
        o->near_plane = PyFloat_AsDouble(near_obj);
        if (o->near_plane == -1.0 && PyErr_Occurred()) return -1;
        o->far_plane = PyFloat_AsDouble(far_obj);
        if (o->far_plane == -1.0 && PyErr_Occurred()) return -1;
        o->depth = p == 0 ? GLT_DEPTH_LINEAR_PERSPECTIVE : GLT_DEPTH_LINEAR_ORTHOGRAPHIC;
    } else if (near_obj != Py_None || far_obj != Py_None || projection != Py_None) {
        PyErr_SetString(PyExc_TypeError, "near=, far= and projection= apply only with depth='linear'");
        return -1;
    }
    return 0;
}

int glt_py_parse_read_args(gltensor_state *st, const glt_py_sig *sig, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames, glt_py_read_args *r) {
    PyObject *v[GLT_PY_MAX_PARAMS];
    if (glt_py_parse(sig, args, nargs, kwnames, v) < 0) return -1;
    int has_out = sig->n == 10; /* read(); read_list() has no out= */
    for (int i = 0; i < sig->n; ++i)
        if (!v[i]) v[i] = Py_None; /* None is every option's default */
    PyObject *const *tail = v + 2 + has_out;
    PyObject *channels = tail[0], *dtype = tail[1], *layout = tail[2];
    PyObject *depth = tail[3], *near_obj = tail[4], *far_obj = tail[5], *projection = tail[6];
    r->out = has_out ? v[2] : Py_None;
    glt_read_options_init(&r->opts);
    if (glt_py_as_flag(v[0], r->opts.flip, &r->opts.flip) < 0) return -1; /* None: the default (True) */
    r->stream_given = v[1] != Py_None;
    if (r->stream_given && glt_py_parse_stream(st, v[1], &r->opts.cuda_stream) < 0) return -1;
    if (channels != Py_None && parse_channels(channels, &r->opts) < 0) return -1;
    if (dtype != Py_None && parse_dtype(dtype, &r->opts) < 0) return -1;
    if (layout != Py_None && glt_py_parse_layout(layout, &r->opts.layout) < 0) return -1;
    if ((depth != Py_None || projection != Py_None || near_obj != Py_None || far_obj != Py_None) &&
        parse_depth(depth, projection, near_obj, far_obj, &r->opts) < 0)
        return -1;
    return 0;
}

int glt_py_out_view(gltensor_state *st, glt_py_read_args *r, int want_cuda, glt_buffer_view *view, PyObject **keep) {
    /* Without stream=, write on the stream the tensor's owner named (CAI v3), else on CUDA's legacy
     * default stream, which orders with the default stream frameworks use unless told otherwise. */
    void *hint = (void *)(uintptr_t)(want_cuda ? 1 : 0);
    void *write_stream = r->stream_given ? r->opts.cuda_stream : hint;
    if (glt_py_buffer_view(st, r->out, want_cuda, write_stream, view, keep, r->stream_given ? NULL : &hint) < 0)
        return -1;
    if (!r->stream_given) r->opts.cuda_stream = hint;
    return 0;
}

PyObject *glt_py_read(glt_py_object *self, const glt_py_reader *rd, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames) {
    gltensor_state *st = self->st;
    glt_py_read_args r;
    if (glt_py_parse_read_args(st, rd->sig, args, nargs, kwnames, &r) < 0) return NULL;
    if (!self->handle) return glt_py_closed(self);
    glt_buffer_view view;
    PyObject *keep = NULL;
    /* out= is described before the lock is taken: its __dlpack__ is Python code, which may use this object. The
     * lock is not held while it runs (the lock is not reentrant). */
    if (r.out != Py_None) {
        _Alignas(max_align_t) char info[GLT_PY_INFO_MAX]; /* under the lock: a read may be re-reading the size */
        if (glt_py_info(self, info) < 0) return NULL;
        glt_backend backend;
        memcpy(&backend, info + rd->backend_at, sizeof backend);
        if (glt_py_out_view(st, &r, backend == GLT_BACKEND_CUDA, &view, &keep) < 0) return NULL;
    }
    /* Map, copy and unmap (or the GL readback) run without the GIL, under the object's lock. */
    glt_frame *frame = NULL;
    glt_status s = GLT_OK;
    int closed = 0;
    glt_py_lock_take(self->lock);
    Py_BEGIN_ALLOW_THREADS
    if (!self->handle) closed = 1; /* closed by another thread since the check above */
    else if (r.out == Py_None) s = rd->read(self->handle, &r.opts, &frame);
    else s = rd->read_into(self->handle, &r.opts, &view);
    Py_END_ALLOW_THREADS
    glt_py_lock_give(self->lock);
    Py_XDECREF(keep);
    if (closed) return glt_py_closed(self);
    if (s != GLT_OK) return glt_py_raise(st, s);
    return r.out == Py_None ? glt_py_frame_new(st, frame) : Py_NewRef(r.out);
}
