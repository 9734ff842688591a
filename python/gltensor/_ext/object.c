/* The base of every closable gltensor type (object.h): lifetime, closed check and table-driven info getters. */
#include "object.h"

#include <stdint.h>
#include <string.h>

glt_py_object *glt_py_object_new(PyTypeObject *type, const glt_py_kind *kind, int with_lock) {
    gltensor_state *st = glt_py_state_of_type(type);
    if (!st) return NULL;
    glt_py_object *self = (glt_py_object *)glt_py_alloc(type);
    if (!self) return NULL;
    self->st = st;
    self->kind = kind;
    if (with_lock && !(self->lock = glt_py_lock_new())) {
        Py_DECREF(self);
        return NULL;
    }
    return self;
}

PyObject *glt_py_closed(glt_py_object *self) {
    const char *noun = self->kind->noun ? self->kind->noun
                       : self->target == GLT_RENDERBUFFER ? "renderbuffer"
                                                          : "texture";
    PyErr_Format(self->st->errors[GLT_CLOSED], self->kind->closed_message, noun, self->name);
    return NULL;
}

static void lock_take(glt_py_object *self) {
    if (self->lock) glt_py_lock_take(self->lock);
}
static void lock_give(glt_py_object *self) {
    if (self->lock) glt_py_lock_give(self->lock);
}

int glt_py_info(glt_py_object *self, void *out) {
    /* Under the lock: a read in another thread may be re-reading the size after a reallocation. */
    lock_take(self);
    int closed = !self->handle;
    if (!closed) self->kind->info(self->handle, out);
    lock_give(self);
    if (closed) {
        glt_py_closed(self);
        return -1;
    }
    return 0;
}

static void destroy(glt_py_object *self, void *handle) {
    if (!self->kind->destroy_without_gil) {
        self->kind->destroy(handle);
        return;
    }
    Py_BEGIN_ALLOW_THREADS
    self->kind->destroy(handle);
    Py_END_ALLOW_THREADS
}

PyObject *glt_py_close(PyObject *obj, PyObject *unused) {
    (void)unused;
    glt_py_object *self = (glt_py_object *)obj;
    /* Waits for a read in flight in another thread; then no one else can reach the handle. */
    lock_take(self);
    void *handle = self->handle;
    self->handle = NULL;
    lock_give(self);
    if (self->kind->on_close) self->kind->on_close(self);
    destroy(self, handle); /* idempotent: destroying NULL does nothing */
    Py_RETURN_NONE;
}

PyObject *glt_py_enter(PyObject *obj, PyObject *unused) {
    (void)unused;
    glt_py_object *self = (glt_py_object *)obj;
    if (!self->handle) return glt_py_closed(self);
    if (self->kind->enter && self->kind->enter(self) < 0) return NULL;
    return Py_NewRef(obj);
}

PyObject *glt_py_exit(PyObject *self, PyObject *args) {
    (void)args;
    return glt_py_close(self, NULL);
}

void glt_py_dealloc(PyObject *obj) {
    glt_py_object *self = (glt_py_object *)obj;
    if (PyType_GetFlags(Py_TYPE(obj)) & Py_TPFLAGS_HAVE_GC) PyObject_GC_UnTrack(obj);
    if (self->weakreflist) PyObject_ClearWeakRefs(obj);
    /* No call can be in flight: each holds a reference. */
    if (self->kind) self->kind->destroy(self->handle);
    if (self->lock) PyThread_free_lock(self->lock);
    if (self->kind && self->kind->clear) self->kind->clear(self);
    glt_py_free_instance(obj);
}

PyObject *glt_py_get_closed(PyObject *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(((glt_py_object *)self)->handle == NULL);
}

static PyObject *ints_tuple(const char *info, const glt_py_field *f) {
    PyObject *t = PyTuple_New(f->n);
    for (int k = 0; t && k < f->n; ++k) {
        int v;
        memcpy(&v, info + f->at[k], sizeof v);
        PyObject *x = PyLong_FromLong(v);
        if (!x) Py_CLEAR(t);
        else PyTuple_SetItem(t, k, x);
    }
    return t;
}

PyObject *glt_py_info_get(PyObject *self, void *field) {
    const glt_py_field *f = field;
    _Alignas(max_align_t) char info[GLT_PY_INFO_MAX];
    if (glt_py_info((glt_py_object *)self, info) < 0) return NULL;
    const char *p = info + f->at[0];
    switch (f->as) {
    case GLT_PY_INT: return PyLong_FromLong(*(const int *)p);
    case GLT_PY_UINT: return PyLong_FromUnsignedLong(*(const unsigned *)p);
    case GLT_PY_U64: return PyLong_FromUnsignedLongLong(*(const uint64_t *)p);
    case GLT_PY_SIZE: return PyLong_FromSize_t(*(const size_t *)p);
    case GLT_PY_DOUBLE: return PyFloat_FromDouble(*(const double *)p);
    case GLT_PY_BOOL: return PyBool_FromLong(*(const int *)p);
    case GLT_PY_STR: {
        const char *s = *(const char *const *)p;
        return PyUnicode_FromString(s ? s : "");
    }
    case GLT_PY_DTYPE: return PyUnicode_FromString(glt_dtype_name(*(const glt_dtype *)p));
    case GLT_PY_BACKEND: return PyUnicode_FromString(glt_backend_name(*(const glt_backend *)p));
    case GLT_PY_DEVICE:
        if (*(const int *)p < 0) Py_RETURN_NONE;
        return PyLong_FromLong(*(const int *)p);
    case GLT_PY_UUID: return PyBytes_FromStringAndSize(p, 16);
    case GLT_PY_INTS: return ints_tuple(info, f);
    }
    PyErr_SetString(PyExc_SystemError, "gltensor: an info getter of unknown kind");
    return NULL;
}
