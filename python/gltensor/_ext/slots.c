/* Shared slots (gltensor.slots builds the public classes on these): _Slots, the trainer's side, and
 * _SlotWriter, a worker's side. Thin: every rule lives in src/slots/slots.c and src/slots/slot_writer.c. */
#include "read_args.h"

#include <limits.h>

#include <string.h>
#include <unistd.h>

/* ---- _Slots ---- */
typedef glt_py_object SlotsObject; /* handle: the glt_slots */

static void slots_destroy(void *handle) { glt_slots_destroy(handle); }
static void slots_get_info(void *handle, void *out) { glt_slots_get_info(handle, out); }
GLT_PY_INFO_FITS(glt_slots_info);
static const glt_py_kind slots_kind = {
    .closed_message = "the shared slots were closed; create new gltensor.SharedSlots",
    .destroy = slots_destroy,
    .destroy_without_gil = 1, /* waits for the copies in flight */
    .info = slots_get_info,
};
static glt_slots *slots_of(SlotsObject *self) { return self->handle; }

GLT_PY_SIG(glt_sig_slots_new, "_Slots.__new__", {"count", GLT_PY_POSITIONAL, NULL, NULL},
           {"width", GLT_PY_POSITIONAL, NULL, NULL}, {"height", GLT_PY_POSITIONAL, NULL, NULL},
           {"gl_internal_format", GLT_PY_POSITIONAL, "...", NULL}, {"backend", GLT_PY_KEYWORD, "'auto'", NULL},
           {"cuda_device", GLT_PY_KEYWORD, "None", NULL}, {"buffers", GLT_PY_KEYWORD, "3", NULL});

static PyObject *slots_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *v[7];
    if (glt_py_parse_tuple(&glt_sig_slots_new, args, kwargs, v) < 0) return NULL;
    int count, width, height, buffers = 3;
    unsigned long format = 0x8058; /* GL_RGBA8 */
    PyObject *backend = v[4], *device = v[5] ? v[5] : Py_None;
    if (glt_py_as_int(v[0], "count", INT_MIN, INT_MAX, &count) < 0 ||
        glt_py_as_int(v[1], "width", INT_MIN, INT_MAX, &width) < 0 ||
        glt_py_as_int(v[2], "height", INT_MIN, INT_MAX, &height) < 0 ||
        (v[3] && glt_py_as_gl_uint(v[3], "gl_internal_format", &format) < 0) ||
        (v[6] && glt_py_as_int(v[6], "buffers", INT_MIN, INT_MAX, &buffers) < 0))
        return NULL;
    gltensor_state *st = glt_py_state_of_type(type);
    if (!st) return NULL;
    glt_slots_desc d;
    glt_slots_desc_init(&d);
    d.count = count;
    d.width = width;
    d.height = height;
    d.gl_internal_format = (unsigned)format;
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
    SlotsObject *self = glt_py_object_new(type, &slots_kind, 1);
    if (!self) return NULL;
    glt_slots *slots = NULL;
    glt_status s;
    Py_BEGIN_ALLOW_THREADS
    s = glt_slots_create(&d, &slots);
    Py_END_ALLOW_THREADS
    self->handle = slots;
    if (s != GLT_OK) {
        Py_DECREF(self);
        return glt_py_raise(st, s);
    }
    return (PyObject *)self;
}

static glt_status slots_read_frame(void *slots, const glt_read_options *o, glt_frame **out) {
    return glt_slots_read(slots, o, out);
}
static glt_status slots_read_into(void *slots, const glt_read_options *o, const glt_buffer_view *dst) {
    return glt_slots_read_into(slots, o, dst);
}
static const glt_py_reader slots_reader = {&glt_sig_slots_read, offsetof(glt_slots_info, backend), slots_read_frame,
                                           slots_read_into};

static PyObject *slots_read(SlotsObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    return glt_py_read(self, &slots_reader, args, nargs, kwnames);
}

static glt_status slots_read_view_frame(void *slots, const glt_read_options *o, glt_frame **out) {
    return glt_slots_read_view(slots, o, out);
}
/* Its table has no out=: a view is the slots themselves. */
static const glt_py_reader slots_view_reader = {&glt_sig_slots_read_view, offsetof(glt_slots_info, backend),
                                                slots_read_view_frame, NULL};

static PyObject *slots_read_view(SlotsObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    return glt_py_read(self, &slots_view_reader, args, nargs, kwnames);
}

static PyObject *slots_export(SlotsObject *self, PyObject *unused) {
    (void)unused;
    if (!self->handle) return glt_py_closed(self);
    int mem = -1, ctl = -1, geo = -1;
    glt_status s = glt_slots_export(slots_of(self), &mem, &ctl);
    if (s == GLT_OK) {
        s = glt_slots_export_geometry(slots_of(self), &geo);
        if (s != GLT_OK) {
            close(ctl);
            if (mem >= 0) close(mem);
        }
    }
    if (s != GLT_OK) return glt_py_raise(self->st, s);
    return Py_BuildValue("(iii)", mem, ctl, geo);
}

static PyObject *slots_export_slot(SlotsObject *self, PyObject *arg) {
    if (!self->handle) return glt_py_closed(self);
    long k = PyLong_AsLong(arg);
    if (k == -1 && PyErr_Occurred()) return NULL;
    if (k < -1 || k > 1 << 20) k = 1 << 20; /* out of range either way: the core words the refusal */
    int fd = -1;
    glt_status s = glt_slots_export_slot(slots_of(self), (int)k, &fd);
    if (s != GLT_OK) return glt_py_raise(self->st, s);
    return PyLong_FromLong(fd);
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
    if (!self->handle) return glt_py_closed(self);
    long k = PyLong_AsLong(arg);
    if (k == -1 && PyErr_Occurred()) return NULL;
    if (k < -1 || k > 1 << 20) k = 1 << 20; /* out of range either way: the core words the refusal */
    glt_slot_state state;
    int pid = 0;
    glt_status s = glt_slots_state(slots_of(self), (int)k, &state, &pid);
    if (s != GLT_OK) return glt_py_raise(self->st, s);
    return Py_BuildValue("(si)", state_name(state), pid);
}

static PyMethodDef slots_methods[] = {
    {"read", (PyCFunction)(void (*)(void))slots_read, METH_FASTCALL | METH_KEYWORDS,
     "read(flip=True, *, stream=None, out=None, channels=None, dtype=None, layout=None, depth=None, near=None, "
     "far=None, projection=None) -> Frame | out\n\nEvery slot as "
     "one (N, H, W, C) frame, in one kernel (CUDA) with the conversions fused. Raises StaleSlotError when a slot was "
     "not written since the last read."},
    {"read_view", (PyCFunction)(void (*)(void))slots_read_view, METH_FASTCALL | METH_KEYWORDS,
     "read_view(flip=True, *, stream=None, channels=None, dtype=None, layout=None, depth=None, near=None, far=None, "
     "projection=None) -> Frame\n\nZero-copy: the slots the workers just wrote, as stored (their format, HWC, top row "
     "first, rows and images padded as the slots are). Options that ask for a conversion are refused. The set is "
     "kept from the workers while the frame (or a tensor made from it) lives; a read that would let them into a set "
     "still held raises SlotsBusyError."},
    {"_export", (PyCFunction)slots_export, METH_NOARGS,
     "_export() -> (memory_fd, control_fd, geometry_fd): new descriptors for a writer (the geometry's sealed); the "
     "caller closes them."},
    {"_export_slot", (PyCFunction)slots_export_slot, METH_O,
     "_export_slot(k) -> slot_fd: a new descriptor of slot k's own memory (its record and, on the CPU backend, its "
     "images), for slot k's writer only; the caller closes it."},
    {"state", (PyCFunction)slots_state, METH_O,
     "state(k) -> (state, pid): 'fresh', 'stale', 'writing' or 'writer_gone', and slot k's last writer's pid."},
    {"close", (PyCFunction)glt_py_close, METH_NOARGS, "Free the trainer's side (idempotent); writers' next write fails."},
    {NULL, NULL, 0, NULL},
};

#define I(pyname, doc, as, member) GLT_PY_INFO(pyname, doc, as, glt_slots_info, member)
#define AT(member) offsetof(glt_slots_info, member)
static PyGetSetDef slots_getset[] = {
    I("count", "number of slots", GLT_PY_INT, count),
    GLT_PY_INFO_INTS("size", "(width, height) of every slot", AT(width), AT(height)),
    GLT_PY_INFO_INTS("shape", "(count, height, width, channels) of a plain read", AT(count), AT(height), AT(width),
                     AT(channels)),
    I("dtype", NULL, GLT_PY_DTYPE, dtype),
    I("format", "the GL format a slot stores, e.g. 'GL_RGBA8'", GLT_PY_STR, format_name),
    I("backend", "'cuda' (device memory) or 'cpu' (shared host memory)", GLT_PY_BACKEND, backend),
    I("backend_reason", NULL, GLT_PY_STR, backend_reason),
    I("cuda_device", "the trainer's CUDA ordinal, -1 on the CPU backend", GLT_PY_INT, cuda_device),
    I("buffers", "3 (default): workers write one set while the two read last may still be in use; 2: one of them; 1: "
      "each read waits for its copy",
      GLT_PY_INT, buffers),
    I("read_waits",
      "CUDA: reads that waited for the GPU (the copy that last read the set the workers write next, or work queued on "
      "a dead view of it, was still queued)",
      GLT_PY_U64, read_waits),
    I("read_wait_us", "CUDA: the time those reads waited, in all (µs)", GLT_PY_DOUBLE, read_wait_us),
    I("memory_bytes", "bytes of the shared pixel memory", GLT_PY_SIZE, memory_bytes),
    I("slot_bytes", "bytes from one slot to the next (a zero-copy view's image stride)", GLT_PY_SIZE, slot_bytes),
    I("row_pitch", "bytes between a slot's rows (a zero-copy view's row stride)", GLT_PY_SIZE, row_pitch),
    I("reads", "reads done so far", GLT_PY_U64, reads),
    I("device_uuid", "the GPU's 16-byte UUID (zeros on the CPU backend)", GLT_PY_UUID, device_uuid),
    GLT_PY_CLOSED_GETTER,
    {NULL, NULL, NULL, NULL, NULL},
};
#undef I
#undef AT

static PyType_Slot slots_type_slots[] = {
    {Py_tp_new, slots_new},
    {Py_tp_dealloc, glt_py_dealloc},
    {Py_tp_methods, slots_methods},
    {Py_tp_getset, slots_getset},
    {Py_tp_doc, "_Slots(count, width, height, gl_internal_format=GL_RGBA8, *, backend='auto', cuda_device=None, "
                "buffers=3): the trainer's side of shared slots; use gltensor.SharedSlots."},
    {0, NULL},
};

PyType_Spec glt_slots_spec = {
    .name = "gltensor._Slots",
    .basicsize = sizeof(SlotsObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = slots_type_slots,
};

/* ---- _SlotWriter ---- */
typedef glt_py_object WriterObject; /* handle: the glt_slot_writer */

static void writer_destroy(void *handle) { glt_slot_writer_destroy(handle); }
static void writer_get_info(void *handle, void *out) { glt_slot_writer_get_info(handle, out); }
GLT_PY_INFO_FITS(glt_slot_writer_info);
static const glt_py_kind writer_kind = {
    .closed_message = "the slot writer was closed",
    .destroy = writer_destroy,
    .info = writer_get_info,
};
static glt_slot_writer *writer_of(WriterObject *self) { return self->handle; }

GLT_PY_SIG(glt_sig_slot_writer_new, "_SlotWriter.__new__", {"memory_fd", GLT_PY_POSITIONAL, NULL, NULL},
           {"control_fd", GLT_PY_POSITIONAL, NULL, NULL}, {"geometry_fd", GLT_PY_POSITIONAL, NULL, NULL},
           {"slot_fd", GLT_PY_POSITIONAL, NULL, NULL}, {"slot", GLT_PY_POSITIONAL, NULL, NULL});

static PyObject *writer_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *v[5];
    int mem, ctl, geo, slot_fd, slot;
    if (glt_py_parse_tuple(&glt_sig_slot_writer_new, args, kwargs, v) < 0 ||
        glt_py_as_int(v[0], "memory_fd", INT_MIN, INT_MAX, &mem) < 0 ||
        glt_py_as_int(v[1], "control_fd", INT_MIN, INT_MAX, &ctl) < 0 ||
        glt_py_as_int(v[2], "geometry_fd", INT_MIN, INT_MAX, &geo) < 0 ||
        glt_py_as_int(v[3], "slot_fd", INT_MIN, INT_MAX, &slot_fd) < 0 ||
        glt_py_as_int(v[4], "slot", INT_MIN, INT_MAX, &slot) < 0)
        return NULL;
    gltensor_state *st = glt_py_state_of_type(type);
    if (!st) return NULL;
    WriterObject *self = glt_py_object_new(type, &writer_kind, 1);
    if (!self) return NULL;
    glt_slot_writer_desc d = {sizeof d, mem, ctl, slot, geo, slot_fd};
    glt_slot_writer *writer = NULL;
    glt_status s = glt_slot_writer_create(&d, &writer);
    self->handle = writer;
    if (s != GLT_OK) {
        Py_DECREF(self);
        return glt_py_raise(st, s);
    }
    return (PyObject *)self;
}

GLT_PY_SIG(glt_sig_slot_writer_write, "_SlotWriter.write", {"name", GLT_PY_POSITIONAL, NULL, NULL},
           {"target", GLT_PY_POSITIONAL, "...", NULL}, {"region", GLT_PY_KEYWORD, "None", NULL});

static PyObject *writer_write(WriterObject *self, PyObject *args, PyObject *kwargs) {
    PyObject *v[3];
    if (glt_py_parse_tuple(&glt_sig_slot_writer_write, args, kwargs, v) < 0) return NULL;
    PyObject *name_obj = v[0], *region_obj = v[2] ? v[2] : Py_None;
    unsigned long name = 0;
    unsigned target = GLT_TEXTURE_2D;
    if (glt_py_as_gl_uint(name_obj, "name", &name) < 0 || glt_py_as_gl_target(v[1], &target) < 0) return NULL;
    glt_rect region;
    if (glt_py_parse_region(region_obj, "region", &region) < 0) return NULL;
    glt_py_lock_take(self->lock);
    if (!self->handle) {
        glt_py_lock_give(self->lock);
        return glt_py_closed(self);
    }
    glt_status s;
    /* The GL context is current in this thread and stays so: the copy and its fence wait need no GIL. */
    Py_BEGIN_ALLOW_THREADS
    s = glt_slot_writer_write(writer_of(self), (unsigned)name, (unsigned)target, &region);
    Py_END_ALLOW_THREADS
    glt_py_lock_give(self->lock);
    if (s != GLT_OK) return glt_py_raise(self->st, s);
    Py_RETURN_NONE;
}

static PyObject *writer_write_host(WriterObject *self, PyObject *arg) {
    if (!self->handle) return glt_py_closed(self);
    glt_slot_writer_info info;
    glt_slot_writer_get_info(writer_of(self), &info);
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
    glt_status s =
        self->handle ? glt_slot_writer_write_host(writer_of(self), v.data, (size_t)v.strides_bytes[0]) : GLT_CLOSED;
    glt_py_lock_give(self->lock);
    Py_XDECREF(keep);
    if (s == GLT_CLOSED && !self->handle) return glt_py_closed(self);
    if (s != GLT_OK) return glt_py_raise(self->st, s);
    Py_RETURN_NONE;
}

static PyMethodDef writer_methods[] = {
    {"write", (PyCFunction)(void (*)(void))writer_write, METH_VARARGS | METH_KEYWORDS,
     "write(name, target=GL_TEXTURE_2D, *, region=None): copy the image (or region) into the slot on the GPU; "
     "returns when the copy is complete."},
    {"write_host", (PyCFunction)writer_write_host, METH_O,
     "write_host(array): write a host image (H, W, C), top row first, into the slot."},
    {"close", (PyCFunction)glt_py_close, METH_NOARGS, "Release the writer's GL objects (idempotent)."},
    {NULL, NULL, 0, NULL},
};

#define I(pyname, doc, as, member) GLT_PY_INFO(pyname, doc, as, glt_slot_writer_info, member)
#define AT(member) offsetof(glt_slot_writer_info, member)
static PyGetSetDef writer_getset[] = {
    I("slot", "the slot this writer writes", GLT_PY_INT, slot),
    I("count", "slots the trainer made", GLT_PY_INT, count),
    GLT_PY_INFO_INTS("size", "(width, height)", AT(width), AT(height)),
    GLT_PY_INFO_INTS("shape", "(height, width, channels)", AT(height), AT(width), AT(channels)),
    I("dtype", NULL, GLT_PY_DTYPE, dtype),
    I("format", NULL, GLT_PY_STR, format_name),
    I("backend", NULL, GLT_PY_BACKEND, backend),
    I("writes", "writes done by this writer", GLT_PY_U64, writes),
    I("direct_writes", "shader writes that read the caller's texture itself, without a blit", GLT_PY_U64,
      direct_writes),
    I("write_path", "how GL writes move the pixels: 'shader', 'copy' or 'readpixels' (GLTENSOR_SLOTS_WRITE chooses)",
      GLT_PY_STR, write_path),
    GLT_PY_CLOSED_GETTER,
    {NULL, NULL, NULL, NULL, NULL},
};
#undef I
#undef AT

static PyType_Slot writer_type_slots[] = {
    {Py_tp_new, writer_new},
    {Py_tp_dealloc, glt_py_dealloc},
    {Py_tp_methods, writer_methods},
    {Py_tp_getset, writer_getset},
    {Py_tp_doc, "_SlotWriter(memory_fd, control_fd, geometry_fd, slot_fd, slot): a worker's side of shared slot `slot` "
                "(slot_fd: that slot's own memory, from _Slots._export_slot), attached in the GL "
                "context current in this thread; use gltensor.SlotWriter."},
    {0, NULL},
};

PyType_Spec glt_slot_writer_spec = {
    .name = "gltensor._SlotWriter",
    .basicsize = sizeof(WriterObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = writer_type_slots,
};
