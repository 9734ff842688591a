/* glcontext.c: the calling thread's GL context recorded and restored, and the EGL device list, for the adapters
 * (gltensor.panda3d) and the doctor, so that no Python module loads libEGL / libGL a second way through ctypes. */
#ifndef GLT_PY_GLCONTEXT_H
#define GLT_PY_GLCONTEXT_H

#include "ext.h"

PyObject *glt_py_save_gl_context(PyObject *module, PyObject *unused);
PyObject *glt_py_restore_gl_context(PyObject *module, PyObject *saved);
PyObject *glt_py_gl_context_is_current(PyObject *module, PyObject *saved);
PyObject *glt_py_restore_or_release_gl_context(PyObject *module, PyObject *saved);
PyObject *glt_py_egl_devices(PyObject *module, PyObject *unused);
PyObject *glt_py_egl_client_extensions(PyObject *module, PyObject *unused);

/* The module's method-table entries, in one line of module.c. */
#define GLT_PY_GLCONTEXT_METHODS                                                                                    \
    {"_save_gl_context", glt_py_save_gl_context, METH_NOARGS,                                                       \
     "Private, for the adapters: the GL context current in this thread, as a tuple for _restore_gl_context."},     \
    {"_restore_gl_context", glt_py_restore_gl_context, METH_O,                                                      \
     "Private, for the adapters: makes a context recorded by _save_gl_context current again."},                    \
    {"_restore_or_release_gl_context", glt_py_restore_or_release_gl_context, METH_O,                                \
     "Private, for gltensor.mujoco: as _restore_gl_context, but releases the current EGL context where none was "  \
     "current when the record was made."},                                                                          \
    {"_gl_context_is_current", glt_py_gl_context_is_current, METH_O,                                                \
     "Private, for the adapters: whether a context recorded by _save_gl_context is current in this thread."},     \
    {"_egl_devices", glt_py_egl_devices, METH_NOARGS,                                                               \
     "Private, for the doctor: the EGL devices in eglQueryDevicesEXT's order, one dict each."},                    \
    {"_egl_client_extensions", glt_py_egl_client_extensions, METH_NOARGS,                                           \
     "Private, for the doctor: EGL's client extensions (list of str)."},

#endif
