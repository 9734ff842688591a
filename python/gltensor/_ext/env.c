/* _gltensor._environment_problems(): the core's reading of the environment (src/core/env.c), for the doctor. */
#include "ext.h"
#include "internal.h" /* glt_env_problems */

PyObject *glt_py_environment_problems(PyObject *module, PyObject *unused) {
    (void)module, (void)unused;
    char buf[4096];
    glt_env_problems(buf, sizeof buf);
    PyObject *text = PyUnicode_FromString(buf);
    if (!text) return NULL;
    PyObject *sep = PyUnicode_FromString("\n");
    PyObject *lines = sep ? PyUnicode_Split(text, sep, -1) : NULL;
    Py_XDECREF(sep);
    Py_DECREF(text);
    if (!lines || PyList_Size(lines) != 1 || buf[0]) return lines;
    Py_DECREF(lines); /* "" splits into [""]: no problem is no entry */
    return PyList_New(0);
}
