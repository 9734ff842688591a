/* The calling thread's GL context recorded and restored, and the EGL device list: thin wrappers of the core's
 * glt_context_save_current / glt_context_restore and glt_egl_device_get_info (see glcontext.h). */
#include "glcontext.h"

#include <string.h>

#include "internal.h" /* glt_context_restore_or_release */

static gltensor_state *state_of(PyObject *module) { return (gltensor_state *)PyModule_GetState(module); }

/* (system, display, draw, read, context, egl_api): plain integers, so the record is a value Python can keep. */
PyObject *glt_py_save_gl_context(PyObject *module, PyObject *unused) {
    (void)unused;
    glt_saved_context s;
    glt_status st = glt_context_save_current(&s);
    if (st != GLT_OK) return glt_py_raise(state_of(module), st);
    return Py_BuildValue("(iKKKKI)", (int)s.system, (unsigned long long)(uintptr_t)s.display,
                         (unsigned long long)s.draw, (unsigned long long)s.read,
                         (unsigned long long)(uintptr_t)s.context, s.egl_api);
}

static int parse_saved(PyObject *obj, glt_saved_context *s) {
    int system = 0;
    unsigned long long display = 0, draw = 0, read = 0, context = 0;
    unsigned egl_api = 0;
    if (!PyTuple_Check(obj) || !PyArg_ParseTuple(obj, "iKKKKI", &system, &display, &draw, &read, &context, &egl_api)) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "expected a tuple from gltensor._gltensor._save_gl_context()");
        return -1;
    }
    memset(s, 0, sizeof *s);
    s->size = sizeof *s;
    s->system = (glt_window_system)system;
    s->display = (void *)(uintptr_t)display;
    s->draw = (uintptr_t)draw;
    s->read = (uintptr_t)read;
    s->context = (void *)(uintptr_t)context;
    s->egl_api = egl_api;
    return 0;
}

static PyObject *restore_with(PyObject *module, PyObject *saved, glt_status (*restore)(const glt_saved_context *)) {
    glt_saved_context s;
    if (parse_saved(saved, &s) < 0) return NULL;
    glt_status st = restore(&s);
    if (st != GLT_OK) return glt_py_raise(state_of(module), st);
    Py_RETURN_NONE;
}

PyObject *glt_py_restore_gl_context(PyObject *module, PyObject *saved) {
    return restore_with(module, saved, glt_context_restore);
}

PyObject *glt_py_restore_or_release_gl_context(PyObject *module, PyObject *saved) {
    return restore_with(module, saved, glt_context_restore_or_release);
}

PyObject *glt_py_gl_context_is_current(PyObject *module, PyObject *saved) {
    (void)module;
    glt_saved_context s;
    if (parse_saved(saved, &s) < 0) return NULL;
    return PyBool_FromLong(glt_saved_context_is_current(&s));
}

static PyObject *str_or_none(const char *s) {
    if (!s) Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
}

/* "a b c" -> ["a", "b", "c"] */
static PyObject *word_list(const char *s) {
    PyObject *text = str_or_none(s ? s : "");
    if (!text) return NULL;
    PyObject *words = PyObject_CallMethod(text, "split", NULL);
    Py_DECREF(text);
    return words;
}

static int set_item(PyObject *dict, const char *key, PyObject *value) {
    if (!value) return -1;
    int r = PyDict_SetItemString(dict, key, value);
    Py_DECREF(value);
    return r;
}

PyObject *glt_py_egl_devices(PyObject *module, PyObject *unused) {
    (void)unused;
    int count = 0;
    glt_status st = glt_egl_device_count(&count);
    if (st != GLT_OK) return glt_py_raise(state_of(module), st);
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < count; ++i) {
        glt_egl_device_info info = {0};
        st = glt_egl_device_get_info(i, &info);
        if (st != GLT_OK) {
            Py_DECREF(list);
            return glt_py_raise(state_of(module), st);
        }
        PyObject *d = PyDict_New();
        int bad = !d || set_item(d, "index", PyLong_FromLong(i)) < 0 ||
                  set_item(d, "extensions", word_list(info.extensions)) < 0 ||
                  set_item(d, "drm_node", str_or_none(info.drm_node)) < 0 ||
                  set_item(d, "render_node", str_or_none(info.render_node)) < 0 ||
                  set_item(d, "cuda_device", info.cuda_device >= 0 ? PyLong_FromLong(info.cuda_device)
                                                                    : Py_NewRef(Py_None)) < 0 ||
                  set_item(d, "renderer", str_or_none(info.renderer)) < 0 ||
                  set_item(d, "vendor", str_or_none(info.vendor)) < 0 || PyList_Append(list, d) < 0;
        Py_XDECREF(d);
        if (bad) Py_CLEAR(list);
    }
    return list;
}

PyObject *glt_py_egl_client_extensions(PyObject *module, PyObject *unused) {
    (void)unused;
    const char *s = glt_egl_client_extensions();
    if (!s) return glt_py_raise(state_of(module), GLT_EGL_ERROR);
    return word_list(s);
}
