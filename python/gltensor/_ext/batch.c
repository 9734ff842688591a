/* gltensor.Batch: many textures/renderbuffers (or captures) read with one GL->CUDA handoff. */
#include "read_args.h"

typedef struct {
    glt_py_object base;  /* handle: the glt_batch */
    PyObject *captures; /* tuple of Capture objects; the C batch borrows their handles */
} BatchObject;

static void batch_destroy(void *handle) { glt_batch_destroy(handle); }
static void batch_clear(glt_py_object *self) { Py_CLEAR(((BatchObject *)self)->captures); }
static const glt_py_kind batch_kind = {
    .closed_message = "the batch was closed; create a new gltensor.Batch",
    .destroy = batch_destroy,
    .clear = batch_clear,
};
static glt_batch *batch_of(BatchObject *self) { return self->base.handle; }

/* The region= for source i: regions[i] when regions= is given, else the one region= (NULL: none). A region
 * for a Capture source is refused: a capture keeps the region it was made with. */
static int region_for(PyObject *region, PyObject *regions, Py_ssize_t i, int is_capture, PyObject **out) {
    *out = NULL;
    if (regions) {
        PyObject *r = PyTuple_GetItem(regions, i); /* borrowed: regions is a tuple (batch_new) */
        if (!r) return -1;
        if (r == Py_None) return 0;
        if (is_capture) {
            PyErr_Format(PyExc_ValueError,
                         "regions[%zd] is given, but batch source %zd is a gltensor.Capture, which keeps its own "
                         "region; pass None there (and create the Capture with region=)",
                         i, i);
            return -1;
        }
        glt_rect ignored;
        char what[48];
        snprintf(what, sizeof what, "regions[%zd]", i);
        if (glt_py_parse_region(r, what, &ignored) < 0) return -1;
        *out = r;
        return 0;
    }
    if (region && region != Py_None && !is_capture) *out = region;
    return 0;
}

GLT_PY_SIG(glt_sig_batch_new, "Batch.__new__", {"sources", GLT_PY_POSITIONAL, NULL, NULL},
           {"target", GLT_PY_POSITIONAL, "...", NULL}, {"backend", GLT_PY_KEYWORD, "'auto'", NULL},
           {"cuda_device", GLT_PY_KEYWORD, "None", NULL}, {"resizable", GLT_PY_KEYWORD, "False", NULL},
           {"region", GLT_PY_KEYWORD, "None", NULL}, {"regions", GLT_PY_KEYWORD, "None", NULL});

static PyObject *batch_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *v[7];
    if (glt_py_parse_tuple(&glt_sig_batch_new, args, kwargs, v) < 0) return NULL;
    PyObject *sources = v[0], *target = v[1], *backend = v[2], *device = v[3], *resizable = v[4], *region = v[5];
    PyObject *regions_obj = v[6] ? v[6] : Py_None, *regions = NULL;
    gltensor_state *st = glt_py_state_of_type(type);
    if (!st) return NULL;
    if (region && region != Py_None) {
        glt_rect ignored; /* checked once here, so that an empty batch or Capture sources still validate it */
        if (glt_py_parse_region(region, "region", &ignored) < 0) return NULL;
    }
    PyObject *seq = glt_py_as_tuple(sources, "sources must be a sequence of GL names or gltensor.Capture objects");
    if (!seq) return NULL;
    Py_ssize_t n = PyTuple_Size(seq);
    if (regions_obj != Py_None) {
        if (region && region != Py_None) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_TypeError, "give region= (one region for every source) or regions= (one per "
                                             "source), not both");
            return NULL;
        }
        if (!PyList_Check(regions_obj) && !PyTuple_Check(regions_obj)) {
            Py_DECREF(seq);
            PyObject *type_name = glt_py_type_name(regions_obj);
            if (type_name)
                PyErr_Format(PyExc_TypeError,
                             "regions must be a list with one region (x, y, width, height) or None per source, not %.80U",
                             type_name);
            Py_XDECREF(type_name);
            return NULL;
        }
        regions = PySequence_Tuple(regions_obj); /* a tuple, so region_for can borrow its items */
        if (!regions) {
            Py_DECREF(seq);
            return NULL;
        }
        if (PyTuple_Size(regions) != n) {
            PyErr_Format(PyExc_ValueError, "regions has %zd entries for %zd sources; give one per source (None for "
                                           "the whole image)",
                         PyTuple_Size(regions), n);
            Py_DECREF(regions);
            Py_DECREF(seq);
            return NULL;
        }
    }
    BatchObject *self = (BatchObject *)glt_py_object_new(type, &batch_kind, 1);
    PyObject *caps = PyTuple_New(n);
    glt_capture **handles = PyMem_Malloc(sizeof *handles * (size_t)(n ? n : 1));
    if (!self || !caps || !handles) goto fail;
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject *src = PyTuple_GetItem(seq, i), *cap, *src_region;
        int is_capture = PyObject_TypeCheck(src, st->capture_type);
        if (region_for(region, regions, i, is_capture, &src_region) < 0) goto fail;
        if (is_capture) {
            cap = Py_NewRef(src);
        } else {
            /* A bare name: the batch makes (and owns) its capture, with the batch's options. */
            PyObject *kw = PyDict_New();
            if (!kw) goto fail;
            if ((backend && PyDict_SetItemString(kw, "backend", backend) < 0) ||
                (device && PyDict_SetItemString(kw, "cuda_device", device) < 0) ||
                (resizable && PyDict_SetItemString(kw, "resizable", resizable) < 0) ||
                (src_region && PyDict_SetItemString(kw, "region", src_region) < 0)) {
                Py_DECREF(kw);
                goto fail;
            }
            PyObject *a = target ? PyTuple_Pack(2, src, target) : PyTuple_Pack(1, src);
            cap = a ? PyObject_Call((PyObject *)st->capture_type, a, kw) : NULL;
            Py_XDECREF(a);
            Py_DECREF(kw);
            if (!cap) goto fail;
        }
        PyTuple_SetItem(caps, i, cap);
        handles[i] = ((CaptureObject *)cap)->handle;
        if (!handles[i]) {
            glt_py_closed((CaptureObject *)cap);
            goto fail;
        }
    }
    glt_batch *batch = NULL;
    glt_status s = glt_batch_create(handles, (int)n, &batch);
    self->base.handle = batch;
    if (s != GLT_OK) {
        glt_py_raise(st, s);
        goto fail;
    }
    self->captures = caps;
    PyMem_Free(handles);
    Py_XDECREF(regions);
    Py_DECREF(seq);
    return (PyObject *)self;
fail:
    PyMem_Free(handles);
    Py_XDECREF(caps);
    Py_XDECREF(self);
    Py_XDECREF(regions);
    Py_DECREF(seq);
    return NULL;
}

/* The C batch borrows the captures' handles: refuse to read once any of them was closed. */
static int sources_open(BatchObject *self) {
    if (!self->base.handle) {
        glt_py_closed(&self->base);
        return 0;
    }
    Py_ssize_t n = PyTuple_Size(self->captures);
    for (Py_ssize_t i = 0; i < n; ++i) {
        CaptureObject *c = (CaptureObject *)PyTuple_GetItem(self->captures, i);
        if (!c->handle) {
            PyErr_Format(self->base.st->errors[GLT_CLOSED],
                         "batch source %zd (%s %u) was closed; create a new Batch without it", i,
                         c->target == GLT_RENDERBUFFER ? "renderbuffer" : "texture", c->name);
            return 0;
        }
    }
    return 1;
}

/* A read drives the batch and every source capture: their locks are taken in one order (the batch, then
 * the captures by address, each once) so that two batches sharing captures cannot deadlock. */
static int cmp_locks(const void *a, const void *b) {
    uintptr_t x = (uintptr_t) * (PyThread_type_lock const *)a, y = (uintptr_t) * (PyThread_type_lock const *)b;
    return x < y ? -1 : x > y;
}

/* Returns the number of capture locks taken into locks[] (sorted, distinct), or -1 (MemoryError). */
static Py_ssize_t lock_all(BatchObject *self, PyThread_type_lock **locks_out) {
    Py_ssize_t n = self->captures ? PyTuple_Size(self->captures) : 0, k = 0;
    PyThread_type_lock *locks = PyMem_Malloc(sizeof *locks * (size_t)(n ? n : 1));
    if (!locks) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; ++i) locks[i] = ((CaptureObject *)PyTuple_GetItem(self->captures, i))->lock;
    qsort(locks, (size_t)n, sizeof *locks, cmp_locks);
    glt_py_lock_take(self->base.lock);
    for (Py_ssize_t i = 0; i < n; ++i)
        if (i == 0 || locks[i] != locks[k - 1]) {
            locks[k++] = locks[i];
            glt_py_lock_take(locks[k - 1]);
        }
    *locks_out = locks;
    return k;
}

static void unlock_all(BatchObject *self, PyThread_type_lock *locks, Py_ssize_t k) {
    for (Py_ssize_t i = k - 1; i >= 0; --i) glt_py_lock_give(locks[i]);
    glt_py_lock_give(self->base.lock);
    PyMem_Free(locks);
}

/* Never called with capture 0's lock held (the lock is not reentrant). */
static int is_cuda(BatchObject *self) {
    CaptureObject *c0 = (CaptureObject *)PyTuple_GetItem(self->captures, 0);
    glt_capture_info info;
    info.backend = GLT_BACKEND_CPU;
    glt_py_lock_take(c0->lock);
    if (c0->handle) glt_capture_get_info(c0->handle, &info);
    glt_py_lock_give(c0->lock);
    return info.backend == GLT_BACKEND_CUDA;
}

static PyObject *batch_read(BatchObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    glt_py_read_args r;
    if (glt_py_parse_read_args(self->base.st, &glt_sig_batch_read, args, nargs, kwnames, &r) < 0) return NULL;
    glt_buffer_view view;
    PyObject *keep = NULL;
    /* out= is described before the locks are taken: its __dlpack__ is Python code, which may use this batch. */
    if (!sources_open(self) || (r.out != Py_None && glt_py_out_view(self->base.st, &r, is_cuda(self), &view, &keep) < 0))
        return NULL;
    PyThread_type_lock *locks;
    Py_ssize_t k = lock_all(self, &locks);
    /* Under the locks (GIL held): no source can be closed between this check and the read. */
    if (k < 0 || !sources_open(self)) {
        if (k >= 0) unlock_all(self, locks, k);
        Py_XDECREF(keep);
        return NULL;
    }
    glt_frame *frame = NULL;
    glt_status s;
    Py_BEGIN_ALLOW_THREADS
    s = r.out == Py_None ? glt_batch_read(batch_of(self), &r.opts, &frame) : glt_batch_read_into(batch_of(self), &r.opts, &view);
    Py_END_ALLOW_THREADS
    unlock_all(self, locks, k);
    Py_XDECREF(keep);
    if (s != GLT_OK) return glt_py_raise(self->base.st, s);
    return r.out == Py_None ? glt_py_frame_new(self->base.st, frame) : Py_NewRef(r.out);
}

static PyObject *batch_read_list(BatchObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    glt_py_read_args r;
    if (glt_py_parse_read_args(self->base.st, &glt_sig_batch_read_list, args, nargs, kwnames, &r) < 0) return NULL;
    PyThread_type_lock *locks;
    Py_ssize_t k = lock_all(self, &locks);
    if (k < 0) return NULL;
    if (!sources_open(self)) {
        unlock_all(self, locks, k);
        return NULL;
    }
    int n = glt_batch_count(batch_of(self));
    glt_frame **frames = PyMem_Calloc((size_t)n, sizeof *frames);
    if (!frames) {
        unlock_all(self, locks, k);
        return PyErr_NoMemory();
    }
    glt_status s;
    Py_BEGIN_ALLOW_THREADS
    s = glt_batch_read_each(batch_of(self), &r.opts, frames);
    Py_END_ALLOW_THREADS
    unlock_all(self, locks, k);
    if (s != GLT_OK) {
        PyMem_Free(frames);
        return glt_py_raise(self->base.st, s);
    }
    PyObject *list = PyList_New(n);
    for (int i = 0; i < n; ++i) {
        PyObject *f = glt_py_frame_new(self->base.st, frames[i]); /* owns frames[i] from here, even on failure */
        if (!f || !list) {
            Py_XDECREF(f);
            Py_CLEAR(list);
            for (int j = i + 1; j < n; ++j) glt_frame_destroy(frames[j]);
            break;
        }
        PyList_SetItem(list, i, f);
    }
    PyMem_Free(frames);
    return list;
}

static int batch_traverse(BatchObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->captures);
    Py_VISIT(Py_TYPE(self));
    return 0;
}

static PyObject *get_captures(BatchObject *self, void *c) {
    (void)c;
    return Py_NewRef(self->captures ? self->captures : Py_None);
}
static Py_ssize_t batch_len(BatchObject *self) { return self->captures ? PyTuple_Size(self->captures) : 0; }

static PyObject *get_shape(BatchObject *self, void *c) {
    (void)c;
    if (!sources_open(self)) return NULL;
    CaptureObject *c0 = (CaptureObject *)PyTuple_GetItem(self->captures, 0);
    glt_capture_info i;
    if (glt_py_info(c0, &i) < 0) return NULL;
    return Py_BuildValue("(niii)", PyTuple_Size(self->captures), i.height, i.width, i.channels);
}

static PyObject *get_regions(BatchObject *self, void *c) {
    (void)c;
    if (!sources_open(self)) return NULL;
    Py_ssize_t n = PyTuple_Size(self->captures);
    PyObject *t = PyTuple_New(n);
    for (Py_ssize_t i = 0; t && i < n; ++i) {
        CaptureObject *ci = (CaptureObject *)PyTuple_GetItem(self->captures, i);
        glt_capture_info info;
        if (glt_py_info(ci, &info) < 0) {
            Py_DECREF(t);
            return NULL;
        }
        PyObject *r = Py_BuildValue("(iiii)", info.region.x, info.region.y, info.region.width, info.region.height);
        if (!r) Py_CLEAR(t);
        else PyTuple_SetItem(t, i, r);
    }
    return t;
}

static PyObject *get_backend(BatchObject *self, void *c) {
    (void)c;
    if (!sources_open(self)) return NULL;
    return PyUnicode_FromString(is_cuda(self) ? "cuda" : "cpu");
}

static PyMethodDef batch_methods[] = {
    {"read", (PyCFunction)(void (*)(void))batch_read, METH_FASTCALL | METH_KEYWORDS,
     "read(flip=True, *, stream=None, out=None, channels=None, dtype=None, layout=None, depth=None, near=None, "
     "far=None, projection=None) -> Frame | out\n\nAll sources as one (N, H, W, C) frame with a single "
     "map and unmap (and one kernel launch). Sources must share size and format; see read_list() otherwise."},
    {"read_list", (PyCFunction)(void (*)(void))batch_read_list, METH_FASTCALL | METH_KEYWORDS,
     "read_list(flip=True, *, stream=None, channels=None, dtype=None, layout=None, depth=None, near=None, "
     "far=None, projection=None) -> list[Frame]\n\nOne frame per source, sizes and formats may differ, "
     "still with a single map and unmap for all."},
    GLT_PY_LIFETIME_METHODS("Release the batch (idempotent); captures it made stay open until collected."),
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef batch_getset[] = {
    {"captures", (getter)get_captures, NULL, "the Capture of each source, in order", NULL},
    {"shape", (getter)get_shape, NULL, "(N, H, W, C) of read(), from the first source (its region's size)", NULL},
    {"regions", (getter)get_regions, NULL, "(x, y, width, height) each source reads, in order", NULL},
    {"backend", (getter)get_backend, NULL, "'cuda' or 'cpu'", NULL},
    GLT_PY_CLOSED_GETTER,
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot batch_slots[] = {
    {Py_tp_new, batch_new},
    {Py_tp_dealloc, glt_py_dealloc},
    {Py_tp_traverse, batch_traverse},
    {Py_tp_methods, batch_methods},
    {Py_tp_getset, batch_getset},
    {Py_sq_length, batch_len},
    {Py_tp_doc, "Batch(sources, target=GL_TEXTURE_2D, *, backend='auto', cuda_device=None, resizable=False, "
                "region=None, regions=None)\n\nMany cameras read with one GL->CUDA handoff per step. sources: GL "
                "names (of `target`) or gltensor.Capture objects. region=(x, y, w, h): the same region of every "
                "source given by name; regions=[...]: one region (or None) per source. Capture sources keep the "
                "region they were created with."},
    {0, NULL},
};

PyType_Spec glt_batch_spec = {
    .name = "gltensor.Batch",
    .basicsize = sizeof(BatchObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = batch_slots,
};
