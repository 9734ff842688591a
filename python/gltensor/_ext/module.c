/*
 * The _gltensor module: its state, its functions, and its exec slot, which makes the exception classes
 * (exceptions.c) and every type (capture.c, batch.c, ...). The top of the extension: it calls the type files, and
 * nothing in them calls back into it (tools/check_layers.py).
 */
#include "ext.h"
#include "glcontext.h"
#include "gltiles.h"
#include "internal.h" /* glt_depth_compute_exact, for the tests */
#include "params.h"   /* glt_py_signatures */

static gltensor_state *get_state(PyObject *module) { return (gltensor_state *)PyModule_GetState(module); }

static PyObject *py_fork_is_safe(PyObject *m, PyObject *unused) {
    (void)m, (void)unused;
    return PyBool_FromLong(glt_fork_safe());
}

static PyObject *py_cuda_compiled(PyObject *m, PyObject *unused) {
    (void)m, (void)unused;
    return PyBool_FromLong(glt_cuda_compiled());
}

static PyObject *py_cuda_available(PyObject *m, PyObject *unused) {
    (void)m, (void)unused;
    int n = 0;
    return PyBool_FromLong(glt_cuda_probe(&n) == GLT_OK && n > 0);
}

static PyObject *py_cuda_device_count(PyObject *m, PyObject *unused) {
    (void)m, (void)unused;
    int n = 0;
    return PyLong_FromLong(glt_cuda_probe(&n) == GLT_OK ? n : 0);
}

static PyObject *py_cuda_unavailable_reason(PyObject *m, PyObject *unused) {
    (void)m, (void)unused;
    int n = 0;
    if (glt_cuda_probe(&n) == GLT_OK) Py_RETURN_NONE;
    return PyUnicode_FromString(glt_last_error());
}

/* Private, for the tests: does the compute-shader depth path equal glReadPixels on the driver of the
 * current GL context (the check gl_stage.c runs before making it the CUDA backend's default)? */
static PyObject *py_depth_compute_exact(PyObject *m, PyObject *unused) {
    (void)m, (void)unused;
    const glt_gl *gl = glt_gl_load();
    if (!gl) {
        PyErr_SetString(PyExc_RuntimeError, glt_last_error());
        return NULL;
    }
    if (!glt_current_gl_context().context) {
        PyErr_SetString(PyExc_RuntimeError, "no GL context is current in this thread; make one current first");
        return NULL;
    }
    return PyBool_FromLong(glt_depth_compute_exact(gl));
}

static PyObject *py_core_default_cuda_device(PyObject *m, PyObject *unused) {
    (void)unused;
    int device = -1;
    glt_status s = glt_default_cuda_device(&device);
    if (s != GLT_OK) return glt_py_raise(get_state(m), s);
    if (device < 0) Py_RETURN_NONE;
    return PyLong_FromLong(device);
}

static PyObject *py_egl_device_index(PyObject *m, PyObject *arg) {
    int cuda_device = -1;
    if (glt_py_as_cuda_device(arg, "cuda_device", &cuda_device) < 0) return NULL;
    int index = -1;
    glt_status s;
    Py_BEGIN_ALLOW_THREADS s = glt_egl_device_index(cuda_device, &index);
    Py_END_ALLOW_THREADS if (s != GLT_OK) return glt_py_raise(get_state(m), s);
    return PyLong_FromLong(index);
}

#ifndef GLT_CUDA_CODE
#define GLT_CUDA_CODE ""
#endif

/* Private, for the doctor: what this build contains (the CUDA runtime it links, its kernel code). */
static PyObject *py_build_info(PyObject *m, PyObject *unused) {
    (void)m, (void)unused;
    return Py_BuildValue("{s:O,s:s,s:i,s:s}", "cuda_compiled", glt_cuda_compiled() ? Py_True : Py_False,
                         "cuda_code", GLT_CUDA_CODE, "cudart_version", glt_cuda_build_runtime_version(),
                         "version", glt_version_string());
}

static PyObject *py_cuda_driver_version(PyObject *m, PyObject *unused) {
    (void)m, (void)unused;
    return PyLong_FromLong(glt_cuda_driver_version());
}

static PyObject *py_cuda_device_info(PyObject *m, PyObject *arg) {
    int device = -1;
    if (glt_py_as_cuda_device(arg, "cuda_device", &device) < 0) return NULL;
    char name[256] = "", pci[32] = "";
    int major = 0, minor = 0;
    glt_status s = glt_cuda_describe_device(device, name, sizeof name, pci, sizeof pci, &major, &minor);
    if (s != GLT_OK) return glt_py_raise(get_state(m), s);
    return Py_BuildValue("{s:s,s:s,s:(ii)}", "name", name, "pci_bus_id", pci, "compute_capability", major, minor);
}

/* None where shared slots can use CUDA here, else the reason (for the doctor). */
static PyObject *status_reason(glt_status s) {
    if (s == GLT_OK) Py_RETURN_NONE;
    return PyUnicode_FromFormat("%s: %s", glt_status_name(s), glt_last_error());
}

static PyObject *py_slots_cuda_support(PyObject *m, PyObject *arg) {
    int device = -1;
    if (glt_py_as_cuda_device(arg, "cuda_device", &device) < 0) return NULL;
    glt_status s;
    Py_BEGIN_ALLOW_THREADS
    s = glt_cuda_vmm_supported(device);
    Py_END_ALLOW_THREADS
    return status_reason(s);
}

static PyObject *py_slots_gl_support(PyObject *m, PyObject *unused) { return status_reason(glt_slot_writer_gl_supported()); }

/* For tests only: the failed-write path of shared slots, which no GL driver here reaches on demand. */
static PyObject *py_slots_fail_next_write(PyObject *m, PyObject *unused) {
    glt_slot_writer_fail_next_write_for_testing();
    Py_RETURN_NONE;
}

/* For tests only: slots objects closed but not yet freed in this process (a zero-copy view holds them). */
static PyObject *py_closed_slots_alive(PyObject *m, PyObject *unused) {
    return PyLong_FromLong(glt_slots_closed_alive_for_testing());
}

/* For tests only: slots made while on leave their control page writable to other processes, as on Linux < 5.1. */
static PyObject *py_slots_weak_control(PyObject *m, PyObject *on) {
    int v = PyObject_IsTrue(on);
    if (v < 0) return NULL;
    glt_slots_weak_control_for_testing(v);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    GLT_PY_GLCONTEXT_METHODS
    GLT_PY_GLTILES_METHODS
    {"_slots_cuda_support", py_slots_cuda_support, METH_O,
     "Private, for the doctor: None where CUDA device N can hold shared slots, else why not."},
    {"_slots_fail_next_write_for_testing", py_slots_fail_next_write, METH_NOARGS,
     "Private, for tests only: the next GL write into a shared slot in this process fails as a GL error in its copy "
     "would (after the slot was marked being written, before anything reached it)."},
    {"_slots_weak_control_for_testing", py_slots_weak_control, METH_O,
     "Private, for tests only: slots made while this is on leave their control page without F_SEAL_FUTURE_WRITE, as "
     "on a kernel before Linux 5.1, so that the trainer's recovery from a changed control page can be tested."},
    {"_closed_slots_alive_for_testing", py_closed_slots_alive, METH_NOARGS,
     "Private, for tests only: how many shared slots objects this process closed and has not freed yet (a zero-copy "
     "view of them still lives)."},
    {"_slots_gl_support", py_slots_gl_support, METH_NOARGS,
     "Private, for the doctor: None where the current GL context can write CUDA shared slots, else why not."},
    {"_environment_problems", glt_py_environment_problems, METH_NOARGS,
     "Private, for the doctor: what in the environment breaks gltensor (one line each)."},
    {"_build_info", py_build_info, METH_NOARGS, "Private, for the doctor: CUDA compiled in, kernel code, runtime version."},
    {"_cuda_driver_version", py_cuda_driver_version, METH_NOARGS,
     "Private, for the doctor: the driver's CUDA version (e.g. 13000), 0 when no driver is loaded."},
    {"_cuda_device_info", py_cuda_device_info, METH_O,
     "Private, for the doctor: name, PCI bus id and compute capability of a visible CUDA device."},
    {"_core_default_cuda_device", py_core_default_cuda_device, METH_NOARGS,
     "Private: the core's rule for the process's CUDA device (LOCAL_RANK, else 0; None without CUDA). "
     "gltensor.default_cuda_device() puts torch's current device first."},
    {"_egl_device_index", py_egl_device_index, METH_O,
     "Private: the EGL device index of a CUDA device; see gltensor.egl_device_index()."},
    {"_signatures", glt_py_signatures, METH_NOARGS,
     "Private, for tests/test_stubs.py: {qualname: [(keyword, 'positional' | 'keyword' | 'positional_only', "
     "default)]} of every function and method, from the tables the argument parser runs on."},
    {"_depth_compute_exact", py_depth_compute_exact, METH_NOARGS,
     "Private: whether the compute-shader depth path is bit-equal to glReadPixels on the current context's driver."},
    {"cuda_compiled", py_cuda_compiled, METH_NOARGS, "True when this build contains the CUDA backend."},
    {"cuda_available", py_cuda_available, METH_NOARGS,
     "True when the CUDA backend is compiled in and a driver and GPU are usable now."},
    {"fork_is_safe", py_fork_is_safe, METH_NOARGS,
     "fork_is_safe() -> bool: False when this process made an NVIDIA EGL context (NVIDIA's EGL does not survive "
     "fork): start worker processes with 'spawn' or 'forkserver' then."},
    {"cuda_device_count", py_cuda_device_count, METH_NOARGS,
     "Number of CUDA devices this process sees (after CUDA_VISIBLE_DEVICES); 0 without CUDA."},
    {"cuda_unavailable_reason", py_cuda_unavailable_reason, METH_NOARGS,
     "Why CUDA cannot be used (str), or None when it can."},
    {NULL, NULL, 0, NULL},
};

static PyObject *intern(const char *s) { return PyUnicode_InternFromString(s); }

static int module_exec(PyObject *m) {
    gltensor_state *st = get_state(m);
    if (glt_py_add_exceptions(m, st) < 0) return -1;
    st->context_type = (PyTypeObject *)PyType_FromModuleAndSpec(m, &glt_context_spec, NULL);
    st->capture_type = (PyTypeObject *)PyType_FromModuleAndSpec(m, &glt_capture_spec, NULL);
    st->frame_type = (PyTypeObject *)PyType_FromModuleAndSpec(m, &glt_frame_spec, NULL);
    st->batch_type = (PyTypeObject *)PyType_FromModuleAndSpec(m, &glt_batch_spec, NULL);
    st->atlas_type = (PyTypeObject *)PyType_FromModuleAndSpec(m, &glt_atlas_spec, NULL);
    if (!st->context_type || !st->capture_type || !st->frame_type || !st->batch_type || !st->atlas_type) return -1;
    if (PyModule_AddType(m, st->context_type) < 0 || PyModule_AddType(m, st->capture_type) < 0 ||
        PyModule_AddType(m, st->frame_type) < 0 || PyModule_AddType(m, st->batch_type) < 0 ||
        PyModule_AddType(m, st->atlas_type) < 0)
        return -1;
    /* Tensor -> GL: uploads into textures, buffer objects as tensors. */
    st->upload_type = (PyTypeObject *)PyType_FromModuleAndSpec(m, &glt_upload_spec, NULL);
    st->buffer_type = (PyTypeObject *)PyType_FromModuleAndSpec(m, &glt_buffer_spec, NULL);
    st->buffer_view_type = (PyTypeObject *)PyType_FromModuleAndSpec(m, &glt_buffer_view_spec, NULL);
    if (!st->upload_type || !st->buffer_type || !st->buffer_view_type || PyModule_AddType(m, st->upload_type) < 0 ||
        PyModule_AddType(m, st->buffer_type) < 0 || PyModule_AddType(m, st->buffer_view_type) < 0)
        return -1;
    /* Shared slots: worker processes write into the trainer's memory. */
    st->slots_type = (PyTypeObject *)PyType_FromModuleAndSpec(m, &glt_slots_spec, NULL);
    st->slot_writer_type = (PyTypeObject *)PyType_FromModuleAndSpec(m, &glt_slot_writer_spec, NULL);
    if (!st->slots_type || !st->slot_writer_type || PyModule_AddType(m, st->slots_type) < 0 ||
        PyModule_AddType(m, st->slot_writer_type) < 0)
        return -1;
    /* The batched MuJoCo physics (mjstep.c): C threads stepping envs without the GIL. */
    st->mujoco_stepper_type = (PyTypeObject *)PyType_FromModuleAndSpec(m, &glt_mujoco_stepper_spec, NULL);
    if (!st->mujoco_stepper_type || PyModule_AddType(m, st->mujoco_stepper_type) < 0) return -1;
    if (!(st->str_flip = intern("flip")) || !(st->str_stream = intern("stream")) || !(st->str_out = intern("out")) ||
        !(st->str_cuda_stream = intern("cuda_stream")) || !(st->str_ptr = intern("ptr")) ||
        !(st->str_handle = intern("handle")) || !(st->str_value = intern("value")))
        return -1;
    if (PyModule_AddIntConstant(m, "GL_TEXTURE_2D", GLT_TEXTURE_2D) < 0 ||
        PyModule_AddIntConstant(m, "GL_TEXTURE_RECTANGLE", GLT_TEXTURE_RECTANGLE) < 0 ||
        PyModule_AddIntConstant(m, "GL_RENDERBUFFER", GLT_RENDERBUFFER) < 0 ||
        PyModule_AddIntConstant(m, "GL_TEXTURE_2D_MULTISAMPLE", GLT_TEXTURE_2D_MULTISAMPLE) < 0 ||
        PyModule_AddStringConstant(m, "__version__", glt_version_string()) < 0 ||
        PyModule_AddIntConstant(m, "VERSION_NUMBER", (long)glt_version_number()) < 0)
        return -1;
    return 0;
}

static int module_traverse(PyObject *m, visitproc visit, void *arg) {
    gltensor_state *st = get_state(m);
    Py_VISIT(st->context_type);
    Py_VISIT(st->capture_type);
    Py_VISIT(st->frame_type);
    Py_VISIT(st->batch_type);
    Py_VISIT(st->atlas_type);
    Py_VISIT(st->error);
    Py_VISIT(st->upload_type);
    Py_VISIT(st->buffer_type);
    Py_VISIT(st->buffer_view_type);
    Py_VISIT(st->slots_type);
    Py_VISIT(st->mujoco_stepper_type);
    Py_VISIT(st->slot_writer_type);
    for (int i = 0; i < GLT_STATUS_COUNT_; ++i) Py_VISIT(st->errors[i]);
    return 0;
}

static int module_clear(PyObject *m) {
    gltensor_state *st = get_state(m);
    Py_CLEAR(st->context_type);
    Py_CLEAR(st->capture_type);
    Py_CLEAR(st->frame_type);
    Py_CLEAR(st->batch_type);
    Py_CLEAR(st->atlas_type);
    Py_CLEAR(st->error);
    Py_CLEAR(st->upload_type);
    Py_CLEAR(st->buffer_type);
    Py_CLEAR(st->buffer_view_type);
    Py_CLEAR(st->slots_type);
    Py_CLEAR(st->slot_writer_type);
    Py_CLEAR(st->mujoco_stepper_type);
    for (int i = 0; i < GLT_STATUS_COUNT_; ++i) Py_CLEAR(st->errors[i]);
    Py_CLEAR(st->str_flip);
    Py_CLEAR(st->str_stream);
    Py_CLEAR(st->str_out);
    Py_CLEAR(st->str_cuda_stream);
    Py_CLEAR(st->str_ptr);
    Py_CLEAR(st->str_handle);
    Py_CLEAR(st->str_value);
    return 0;
}

static void module_free(void *m) { module_clear((PyObject *)m); }

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
    {0, NULL},
};

PyModuleDef gltensor_module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "gltensor._gltensor",
    .m_doc = "C extension of gltensor: OpenGL images to DLPack / CUDA array interface tensors.",
    .m_size = sizeof(gltensor_state),
    .m_methods = module_methods,
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC PyInit__gltensor(void) { return PyModuleDef_Init(&gltensor_module_def); }
