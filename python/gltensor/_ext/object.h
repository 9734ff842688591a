/*
 * The one base of every closable gltensor type (Context, Capture, Batch, Atlas, Upload, Buffer, _Slots,
 * _SlotWriter): the C handle it drives, the lock a thread holds while it drives it, the closed check,
 * close / __enter__ / __exit__ / dealloc, and the info getters, which a table describes (which field of the
 * type's info struct, as what Python value) instead of one function each.
 *
 * A type describes itself once in a glt_py_kind; its object starts with glt_py_object.
 */
#ifndef GLT_EXT_OBJECT_H
#define GLT_EXT_OBJECT_H

#include "ext.h"

#include <stddef.h>

typedef struct glt_py_object glt_py_object;

typedef struct glt_py_kind {
    /* ClosedError's message. It may use %s then %u: the GL object's kind (`noun`; NULL: "texture", or
     * "renderbuffer" for GL_RENDERBUFFER targets) and its name. */
    const char *closed_message;
    const char *noun;
    void (*destroy)(void *handle);
    int destroy_without_gil; /* destroying may wait for the GPU (shared slots) */
    /* Fills the type's info struct (at most GLT_PY_INFO_MAX bytes) from a live handle; NULL: no info. */
    void (*info)(void *handle, void *out);
    /* Run by close() before destroy (the handle is already detached); may be NULL. */
    void (*on_close)(glt_py_object *self);
    /* Run by dealloc after destroy: drops what the type's object holds besides the handle; may be NULL. */
    void (*clear)(glt_py_object *self);
    int (*enter)(glt_py_object *self); /* what __enter__ does besides the closed check (Context: make current) */
} glt_py_kind;

struct glt_py_object {
    PyObject_HEAD
    gltensor_state *st;
    const glt_py_kind *kind;
    void *handle;            /* the C object; NULL once closed */
    PyThread_type_lock lock; /* held while a thread drives handle (reads run without the GIL); NULL for types
                                whose calls keep the GIL throughout */
    unsigned name, target;   /* the GL object, for messages */
    PyObject *weakreflist;
};

/* A new instance of type with its kind, its state, and a lock when with_lock; NULL with an exception set. */
glt_py_object *glt_py_object_new(PyTypeObject *type, const glt_py_kind *kind, int with_lock);
/* The ClosedError for self; returns NULL. */
PyObject *glt_py_closed(glt_py_object *self);
/* Copies the info of a live handle into out, under the lock; -1 with ClosedError when closed. */
int glt_py_info(glt_py_object *self, void *out);

/* The lifetime methods and the getter every kind shares. */
PyObject *glt_py_close(PyObject *self, PyObject *unused);
PyObject *glt_py_enter(PyObject *self, PyObject *unused);
PyObject *glt_py_exit(PyObject *self, PyObject *args);
void glt_py_dealloc(PyObject *self);
PyObject *glt_py_get_closed(PyObject *self, void *closure);
#define GLT_PY_LIFETIME_METHODS(close_doc)                                            \
    {"close", (PyCFunction)glt_py_close, METH_NOARGS, close_doc},                     \
        {"__enter__", (PyCFunction)glt_py_enter, METH_NOARGS, NULL},                 \
        {"__exit__", (PyCFunction)glt_py_exit, METH_VARARGS, NULL}
#define GLT_PY_CLOSED_GETTER {"closed", (getter)glt_py_get_closed, NULL, "True after close()", NULL}

/* ---- info getters: one table row per attribute ---- */
#define GLT_PY_INFO_MAX 512
#define GLT_PY_INFO_FITS(S) _Static_assert(sizeof(S) <= GLT_PY_INFO_MAX, #S " must fit GLT_PY_INFO_MAX")
typedef enum {
    GLT_PY_INT,     /* int */
    GLT_PY_UINT,    /* unsigned */
    GLT_PY_U64,     /* uint64_t */
    GLT_PY_SIZE,    /* size_t */
    GLT_PY_DOUBLE,  /* double */
    GLT_PY_BOOL,    /* int, as True / False */
    GLT_PY_STR,     /* const char *, NULL as "" */
    GLT_PY_DTYPE,   /* glt_dtype, as its name */
    GLT_PY_BACKEND, /* glt_backend, as its name */
    GLT_PY_DEVICE,  /* int CUDA ordinal, -1 as None */
    GLT_PY_UUID,    /* unsigned char[16], as bytes */
    GLT_PY_INTS,    /* 2 to 4 ints, as a tuple */
} glt_py_value;
typedef struct glt_py_field {
    glt_py_value as;
    int n;           /* fields in at[] */
    size_t at[4];    /* offsets into the kind's info struct */
} glt_py_field;
PyObject *glt_py_info_get(PyObject *self, void *field);
/* A getset row: attribute pyname, the value of member (of info struct S) as `as`. */
#define GLT_PY_INFO(pyname, doc, as, S, member) \
    {pyname, glt_py_info_get, NULL, doc, (void *)&(const glt_py_field){as, 1, {offsetof(S, member)}}}
/* A getset row: a tuple of the int members' values, in order. */
#define GLT_PY_INFO_INTS(pyname, doc, ...)                                                             \
    {pyname, glt_py_info_get, NULL, doc,                                                               \
     (void *)&(const glt_py_field){GLT_PY_INTS, (int)(sizeof((size_t[]){__VA_ARGS__}) / sizeof(size_t)), \
                                   {__VA_ARGS__}}}

/* gltensor.Capture's object, the base alone (handle: the glt_capture); Batch reads its sources' handles. */
typedef glt_py_object CaptureObject;

#endif
