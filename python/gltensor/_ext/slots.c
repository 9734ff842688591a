/* Shared slots (gltensor.slots builds the public classes on these): _Slots, the trainer's side, and
 * _SlotWriter, a worker's side. Thin: every rule lives in src/slots.c and src/slot_writer.c. */
#include "ext.h"

#include <string.h>

/* ---- _Slots ---- */
typedef struct {
    PyObject_HEAD
    gltensor_state *st;
    glt_slots *slots;
    PyThread_type_lock lock; /* held while a thread drives slots: reads run without the GIL */
} SlotsObject;

static PyObject *slots_closed_error(SlotsObject *self) {
    PyErr_SetString(self->st->errors[GLT_CLOSED], "the shared slots were closed; create new gltensor.SharedSlots");
    return NULL;
}

static PyObject *slots_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"count", "width", "height", "gl_internal_format", "backend", "cuda_device", "buffers",
                             NULL};
    int count, width, height, buffers = 2;
    unsigned int format = 0x8058;
    PyObject *backend = NULL, *device = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iii|I$OOi:_Slots", kwlist, &count, &width, &height, &format,
                                     &backend, &device, &buffers))
        return NULL;
    gltensor_state *st = glt_py_state_of_type(type);
    if (!st) return NULL;
    glt_slots_desc d;
    glt_slots_desc_init(&d);
    d.count = count;
    d.width = width;
    d.height = height;
    d.gl_internal_format = format;
    d.buffers = buffers;
    if (backend && glt_py_parse_backend(backend, &d.backend) < 0) return NULL;
    if (device != Py_None) {
        long v = PyLong_AsLong(device);
        if (v == -1 && PyErr_Occurred()) return NULL;
        if (v < 0 || v > 4096) {
            PyErr_Format(PyExc_ValueError, "cuda_device must be a CUDA ordinal >= 0 or None, got %ld", v);
            return NULL;
        }
        d.cuda_device = (int)v;
    }
    SlotsObject *self = (SlotsObject *)glt_py_alloc(type);
    if (!self) return NULL;
    self->st = st;
    if (!(self->lock = glt_py_lock_new())) {
        Py_DECREF(self);
        return NULL;
    }
    glt_status s;
    Py_BEGIN_ALLOW_THREADS
    s = glt_slots_create(&d, &self->slots);
    Py_END_ALLOW_THREADS
    if (s != GLT_OK) {
        Py_DECREF(self);
        return glt_py_raise(st, s);
    }
    return (PyObject *)self;
}

static PyObject *slots_read(SlotsObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    glt_py_read_args r;
    if (glt_py_parse_read_args(self->st, "read", args, nargs, kwnames, &r) < 0) return NULL;
    if (!self->slots) return slots_closed_error(self);
    glt_buffer_view view;
    PyObject *keep = NULL;
    if (r.out != Py_None) {
        glt_slots_info info;
        glt_slots_get_info(self->slots, &info);
        if (glt_py_out_view(self->st, &r, info.backend == GLT_BACKEND_CUDA, &view, &keep) < 0) return NULL;
    }
    glt_py_lock_take(self->lock);
    if (!self->slots) {
        glt_py_lock_give(self->lock);
        Py_XDECREF(keep);
        return slots_closed_error(self);
    }
    glt_frame *frame = NULL;
    glt_status s;
    Py_BEGIN_ALLOW_THREADS
    s = r.out == Py_None ? glt_slots_read(self->slots, &r.opts, &frame) : glt_slots_read_into(self->slots, &r.opts, &view);
    Py_END_ALLOW_THREADS
    glt_py_lock_give(self->lock);
    Py_XDECREF(keep);
    if (s != GLT_OK) return glt_py_raise(self->st, s);
    return r.out == Py_None ? glt_py_frame_new(self->st, frame) : Py_NewRef(r.out);
}

static PyObject *slots_export(SlotsObject *self, PyObject *unused) {
    (void)unused;
    if (!self->slots) return slots_closed_error(self);
    int mem = -1, ctl = -1;
    glt_status s = glt_slots_export(self->slots, &mem, &ctl);
    if (s != GLT_OK) return glt_py_raise(self->st, s);
    return Py_BuildValue("(ii)", mem, ctl);
}

static const char *state_name(glt_slot_state s) {
    switch (s) {
    case GLT_SLOT_FRESH: return "fresh";
    case GLT_SLOT_STALE: return "stale";
    case GLT_SLOT_WRITING: return "writing";
    default: return "writer_gone";
    }
}

static PyObject *slots_state(SlotsObject *self, PyObject *arg) {
    if (!self->slots) return slots_closed_error(self);
    long k = PyLong_AsLong(arg);
    if (k == -1 && PyErr_Occurred()) return NULL;
    if (k < -1 || k > 1 << 20) k = 1 << 20; /* out of range either way: the core words the refusal */
    glt_slot_state state;
    int pid = 0;
    glt_status s = glt_slots_state(self->slots, (int)k, &state, &pid);
    if (s != GLT_OK) return glt_py_raise(self->st, s);
    return Py_BuildValue("(si)", state_name(state), pid);
}

static PyObject *slots_close(SlotsObject *self, PyObject *unused) {
    (void)unused;
    glt_py_lock_take(self->lock);
    glt_slots *slots = self->slots;
    self->slots = NULL;
    glt_py_lock_give(self->lock);
    Py_BEGIN_ALLOW_THREADS
    glt_slots_destroy(slots);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static void slots_dealloc(SlotsObject *self) {
    glt_slots_destroy(self->slots);
    if (self->lock) PyThread_free_lock(self->lock);
    glt_py_free_instance((PyObject *)self);
}

static int slots_info(SlotsObject *self, glt_slots_info *i) {
    if (!self->slots) {
        slots_closed_error(self);
        return -1;
    }
    glt_slots_get_info(self->slots, i);
    return 0;
}

#define SLOTS_GETTER(fn, expr)                        \
    static PyObject *fn(SlotsObject *self, void *c) { \
        (void)c;                                      \
        glt_slots_info i;                             \
        if (slots_info(self, &i) < 0) return NULL;    \
        return expr;                                  \
    }
SLOTS_GETTER(slots_count, PyLong_FromLong(i.count))
SLOTS_GETTER(slots_size, Py_BuildValue("(ii)", i.width, i.height))
SLOTS_GETTER(slots_shape, Py_BuildValue("(iiii)", i.count, i.height, i.width, i.channels))
SLOTS_GETTER(slots_dtype, PyUnicode_FromString(glt_dtype_name(i.dtype)))
SLOTS_GETTER(slots_format, PyUnicode_FromString(i.format_name))
SLOTS_GETTER(slots_read_waits, PyLong_FromUnsignedLongLong(i.read_waits))
SLOTS_GETTER(slots_read_wait_us, PyFloat_FromDouble(i.read_wait_us))
SLOTS_GETTER(slots_backend, PyUnicode_FromString(glt_backend_name(i.backend)))
SLOTS_GETTER(slots_backend_reason, PyUnicode_FromString(i.backend_reason))
SLOTS_GETTER(slots_device, PyLong_FromLong(i.cuda_device))
SLOTS_GETTER(slots_buffers, PyLong_FromLong(i.buffers))
SLOTS_GETTER(slots_memory_bytes, PyLong_FromSize_t(i.memory_bytes))
SLOTS_GETTER(slots_reads, PyLong_FromUnsignedLongLong(i.reads))
SLOTS_GETTER(slots_uuid, PyBytes_FromStringAndSize((const char *)i.device_uuid, 16))
#undef SLOTS_GETTER

static PyObject *slots_is_closed(SlotsObject *self, void *c) {
    (void)c;
    return PyBool_FromLong(self->slots == NULL);
}

static PyMethodDef slots_methods[] = {
    {"read", (PyCFunction)(void (*)(void))slots_read, METH_FASTCALL | METH_KEYWORDS,
     "read(flip=True, stream=None, out=None, channels=None, dtype=None, layout='hwc') -> Frame | out\n\nEvery slot as "
     "one (N, H, W, C) frame, in one kernel (CUDA) with the conversions fused. Raises StaleSlotError when a slot was "
     "not written since the last read."},
    {"_export", (PyCFunction)slots_export, METH_NOARGS,
     "_export() -> (memory_fd, control_fd): new descriptors for a writer; the caller closes them."},
    {"state", (PyCFunction)slots_state, METH_O,
     "state(k) -> (state, pid): 'fresh', 'stale', 'writing' or 'writer_gone', and slot k's last writer's pid."},
    {"close", (PyCFunction)slots_close, METH_NOARGS, "Free the trainer's side (idempotent); writers' next write fails."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef slots_getset[] = {
    {"count", (getter)slots_count, NULL, "number of slots", NULL},
    {"size", (getter)slots_size, NULL, "(width, height) of every slot", NULL},
    {"shape", (getter)slots_shape, NULL, "(count, height, width, channels) of a plain read", NULL},
    {"dtype", (getter)slots_dtype, NULL, NULL, NULL},
    {"format", (getter)slots_format, NULL, "the GL format a slot stores, e.g. 'GL_RGBA8'", NULL},
    {"backend", (getter)slots_backend, NULL, "'cuda' (device memory) or 'cpu' (shared host memory)", NULL},
    {"backend_reason", (getter)slots_backend_reason, NULL, NULL, NULL},
    {"cuda_device", (getter)slots_device, NULL, "the trainer's CUDA ordinal, -1 on the CPU backend", NULL},
    {"buffers", (getter)slots_buffers, NULL,
     "2: double-buffered; 1: each read waits for its copy; 3: the copy may lag two reads behind", NULL},
    {"read_waits", (getter)slots_read_waits, NULL,
     "CUDA: reads that waited for the GPU (the copy that last read the set the workers write next was still queued)",
     NULL},
    {"read_wait_us", (getter)slots_read_wait_us, NULL, "CUDA: the time those reads waited, in all (µs)", NULL},
    {"memory_bytes", (getter)slots_memory_bytes, NULL, "bytes of the shared pixel memory", NULL},
    {"reads", (getter)slots_reads, NULL, "reads done so far", NULL},
    {"device_uuid", (getter)slots_uuid, NULL, "the GPU's 16-byte UUID (zeros on the CPU backend)", NULL},
    {"closed", (getter)slots_is_closed, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot slots_type_slots[] = {
    {Py_tp_new, slots_new},
    {Py_tp_dealloc, slots_dealloc},
    {Py_tp_methods, slots_methods},
    {Py_tp_getset, slots_getset},
    {Py_tp_doc, "_Slots(count, width, height, gl_internal_format=GL_RGBA8, *, backend='auto', cuda_device=None, "
                "buffers=2): the trainer's side of shared slots; use gltensor.SharedSlots."},
    {0, NULL},
};

PyType_Spec glt_slots_spec = {
    .name = "gltensor._Slots",
    .basicsize = sizeof(SlotsObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = slots_type_slots,
};

/* ---- _SlotWriter ---- */
typedef struct {
    PyObject_HEAD
    gltensor_state *st;
    glt_slot_writer *writer;
    PyThread_type_lock lock;
} WriterObject;

static PyObject *writer_closed_error(WriterObject *self) {
    PyErr_SetString(self->st->errors[GLT_CLOSED], "the slot writer was closed");
    return NULL;
}

static PyObject *writer_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"memory_fd", "control_fd", "slot", NULL};
    int mem, ctl, slot;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iii:_SlotWriter", kwlist, &mem, &ctl, &slot)) return NULL;
    gltensor_state *st = glt_py_state_of_type(type);
    if (!st) return NULL;
    WriterObject *self = (WriterObject *)glt_py_alloc(type);
    if (!self) return NULL;
    self->st = st;
    if (!(self->lock = glt_py_lock_new())) {
        Py_DECREF(self);
        return NULL;
    }
    glt_slot_writer_desc d = {sizeof d, mem, ctl, slot};
    glt_status s = glt_slot_writer_create(&d, &self->writer);
    if (s != GLT_OK) {
        Py_DECREF(self);
        return glt_py_raise(st, s);
    }
    return (PyObject *)self;
}

static PyObject *writer_write(WriterObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"name", "target", "region", NULL};
    PyObject *name_obj, *target_obj = NULL, *region_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O$O:write", kwlist, &name_obj, &target_obj, &region_obj))
        return NULL;
    unsigned long name = 0, target = GLT_TEXTURE_2D;
    if (glt_py_as_gl_uint(name_obj, "name", &name) < 0) return NULL;
    if (target_obj && target_obj != Py_None && glt_py_as_gl_uint(target_obj, "target", &target) < 0) return NULL;
    glt_rect region;
    if (glt_py_parse_region(region_obj, "region", &region) < 0) return NULL;
    glt_py_lock_take(self->lock);
    if (!self->writer) {
        glt_py_lock_give(self->lock);
        return writer_closed_error(self);
    }
    glt_status s;
    /* The GL context is current in this thread and stays so: the copy and its fence wait need no GIL. */
    Py_BEGIN_ALLOW_THREADS
    s = glt_slot_writer_write(self->writer, (unsigned)name, (unsigned)target, &region);
    Py_END_ALLOW_THREADS
    glt_py_lock_give(self->lock);
    if (s != GLT_OK) return glt_py_raise(self->st, s);
    Py_RETURN_NONE;
}

static PyObject *writer_write_host(WriterObject *self, PyObject *arg) {
    if (!self->writer) return writer_closed_error(self);
    glt_slot_writer_info info;
    glt_slot_writer_get_info(self->writer, &info);
    glt_buffer_view v;
    PyObject *keep = NULL;
    if (glt_py_buffer_view(self->st, arg, 0, NULL, &v, &keep, NULL) < 0) return NULL;
    int ok = v.memory == GLT_MEMORY_HOST && v.dtype == info.dtype &&
             ((v.ndim == 3 && v.shape[0] == info.height && v.shape[1] == info.width && v.shape[2] == info.channels) ||
              (v.ndim == 2 && info.channels == 1 && v.shape[0] == info.height && v.shape[1] == info.width));
    int64_t px = (int64_t)glt_dtype_size(info.dtype) * info.channels;
    int dense = v.ndim == 2 ? v.strides_bytes[1] == px : v.strides_bytes[1] == px && v.strides_bytes[2] == (int64_t)glt_dtype_size(info.dtype);
    if (!ok || !dense || v.strides_bytes[0] <= 0) {
        Py_XDECREF(keep);
        PyErr_Format(self->st->errors[GLT_INVALID_ARGUMENT],
                     "write_host needs a host array of shape (%d, %d, %d) and dtype %s with contiguous rows (top row "
                     "first), the slot's image",
                     info.height, info.width, info.channels, glt_dtype_name(info.dtype));
        return NULL;
    }
    glt_py_lock_take(self->lock);
    glt_status s = self->writer ? glt_slot_writer_write_host(self->writer, v.data, (size_t)v.strides_bytes[0]) : GLT_CLOSED;
    glt_py_lock_give(self->lock);
    Py_XDECREF(keep);
    if (s == GLT_CLOSED && !self->writer) return writer_closed_error(self);
    if (s != GLT_OK) return glt_py_raise(self->st, s);
    Py_RETURN_NONE;
}

static PyObject *writer_close(WriterObject *self, PyObject *unused) {
    (void)unused;
    glt_py_lock_take(self->lock);
    glt_slot_writer *w = self->writer;
    self->writer = NULL;
    glt_py_lock_give(self->lock);
    glt_slot_writer_destroy(w);
    Py_RETURN_NONE;
}

static void writer_dealloc(WriterObject *self) {
    glt_slot_writer_destroy(self->writer);
    if (self->lock) PyThread_free_lock(self->lock);
    glt_py_free_instance((PyObject *)self);
}

static int writer_info(WriterObject *self, glt_slot_writer_info *i) {
    if (!self->writer) {
        writer_closed_error(self);
        return -1;
    }
    glt_slot_writer_get_info(self->writer, i);
    return 0;
}

#define WRITER_GETTER(fn, expr)                        \
    static PyObject *fn(WriterObject *self, void *c) { \
        (void)c;                                       \
        glt_slot_writer_info i;                        \
        if (writer_info(self, &i) < 0) return NULL;    \
        return expr;                                   \
    }
WRITER_GETTER(writer_slot, PyLong_FromLong(i.slot))
WRITER_GETTER(writer_count, PyLong_FromLong(i.count))
WRITER_GETTER(writer_size, Py_BuildValue("(ii)", i.width, i.height))
WRITER_GETTER(writer_shape, Py_BuildValue("(iii)", i.height, i.width, i.channels))
WRITER_GETTER(writer_dtype, PyUnicode_FromString(glt_dtype_name(i.dtype)))
WRITER_GETTER(writer_format, PyUnicode_FromString(i.format_name))
WRITER_GETTER(writer_backend, PyUnicode_FromString(glt_backend_name(i.backend)))
WRITER_GETTER(writer_writes, PyLong_FromUnsignedLongLong(i.writes))
WRITER_GETTER(writer_write_path, PyUnicode_FromString(i.write_path))
#undef WRITER_GETTER

static PyObject *writer_is_closed(WriterObject *self, void *c) {
    (void)c;
    return PyBool_FromLong(self->writer == NULL);
}

static PyMethodDef writer_methods[] = {
    {"write", (PyCFunction)(void (*)(void))writer_write, METH_VARARGS | METH_KEYWORDS,
     "write(name, target=GL_TEXTURE_2D, *, region=None): copy the image (or region) into the slot on the GPU; "
     "returns when the copy is complete."},
    {"write_host", (PyCFunction)writer_write_host, METH_O,
     "write_host(array): write a host image (H, W, C), top row first, into the slot."},
    {"close", (PyCFunction)writer_close, METH_NOARGS, "Release the writer's GL objects (idempotent)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef writer_getset[] = {
    {"slot", (getter)writer_slot, NULL, "the slot this writer writes", NULL},
    {"count", (getter)writer_count, NULL, "slots the trainer made", NULL},
    {"size", (getter)writer_size, NULL, "(width, height)", NULL},
    {"shape", (getter)writer_shape, NULL, "(height, width, channels)", NULL},
    {"dtype", (getter)writer_dtype, NULL, NULL, NULL},
    {"format", (getter)writer_format, NULL, NULL, NULL},
    {"backend", (getter)writer_backend, NULL, NULL, NULL},
    {"writes", (getter)writer_writes, NULL, "writes done by this writer", NULL},
    {"write_path", (getter)writer_write_path, NULL,
     "how GL writes move the pixels: 'shader', 'copy' or 'readpixels' (GLTENSOR_SLOTS_WRITE chooses)", NULL},
    {"closed", (getter)writer_is_closed, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot writer_type_slots[] = {
    {Py_tp_new, writer_new},
    {Py_tp_dealloc, writer_dealloc},
    {Py_tp_methods, writer_methods},
    {Py_tp_getset, writer_getset},
    {Py_tp_doc, "_SlotWriter(memory_fd, control_fd, slot): a worker's side of shared slots, attached in the GL "
                "context current in this thread; use gltensor.SlotWriter."},
    {0, NULL},
};

PyType_Spec glt_slot_writer_spec = {
    .name = "gltensor._SlotWriter",
    .basicsize = sizeof(WriterObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = writer_type_slots,
};
