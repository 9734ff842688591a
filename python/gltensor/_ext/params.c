/* The argument parser that runs from a method's table (params.h). */
#include "params.h"

#include <string.h>

/* The name for messages: "read" of "Capture.read", the class of "Capture.__new__". */
static const char *call_name(const glt_py_sig *sig, char *buf, size_t size) {
    const char *dot = strrchr(sig->qualname, '.');
    if (dot && !strcmp(dot, ".__new__")) {
        size_t n = (size_t)(dot - sig->qualname) < size - 1 ? (size_t)(dot - sig->qualname) : size - 1;
        memcpy(buf, sig->qualname, n);
        buf[n] = '\0';
        return buf;
    }
    return sig->qualname;
}

static int is_named(PyObject *key, const char *name) { return name && PyUnicode_CompareWithASCIIString(key, name) == 0; }

int glt_py_parse(const glt_py_sig *sig, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **out) {
    char buf[64];
    int n_positional = 0;
    for (int i = 0; i < sig->n; ++i) {
        out[i] = NULL;
        if (sig->params[i].pass != GLT_PY_KEYWORD) n_positional = i + 1;
    }
    if (nargs > n_positional) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %d positional arguments (%zd given)",
                     call_name(sig, buf, sizeof buf), n_positional, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; ++i) {
        const glt_py_param *p = &sig->params[i];
        if (p->pass == GLT_PY_KEYWORD_WAS_POSITIONAL &&
            PyErr_WarnFormat(PyExc_DeprecationWarning, 1,
                             "%s(): pass %s= as a keyword; giving it by position is deprecated and stops working "
                             "in the next release",
                             call_name(sig, buf, sizeof buf), p->name) < 0)
            return -1;
        out[i] = args[i];
    }
    Py_ssize_t nk = kwnames ? PyTuple_Size(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nk; ++k) {
        PyObject *key = PyTuple_GetItem(kwnames, k);
        int j = 0, old = 0;
        for (; j < sig->n; ++j) {
            const glt_py_param *p = &sig->params[j];
            if (p->pass == GLT_PY_ONLY_BY_POSITION) continue;
            if (is_named(key, p->name)) break;
            if (is_named(key, p->old_name)) {
                old = 1;
                break;
            }
        }
        if (j == sig->n) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", call_name(sig, buf, sizeof buf),
                         key);
            return -1;
        }
        if (old && PyErr_WarnFormat(PyExc_DeprecationWarning, 1,
                                    "%s(): the keyword %s= is deprecated (it stops working in the next release); "
                                    "use %s=",
                                    call_name(sig, buf, sizeof buf), sig->params[j].old_name, sig->params[j].name) < 0)
            return -1;
        if (out[j]) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", call_name(sig, buf, sizeof buf),
                         sig->params[j].name);
            return -1;
        }
        out[j] = args[nargs + k];
    }
    for (int i = 0; i < sig->n; ++i)
        if (!out[i] && !sig->params[i].default_) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", call_name(sig, buf, sizeof buf),
                         sig->params[i].name);
            return -1;
        }
    return 0;
}

int glt_py_parse_tuple(const glt_py_sig *sig, PyObject *args, PyObject *kwargs, PyObject **out) {
    /* The vectorcall layout: positional values, then the keywords' values, their names in a tuple. */
    PyObject *stack[2 * GLT_PY_MAX_PARAMS];
    Py_ssize_t nargs = args ? PyTuple_Size(args) : 0, nk = kwargs ? PyDict_Size(kwargs) : 0;
    if (nargs + nk > 2 * GLT_PY_MAX_PARAMS) {
        char buf[64];
        PyErr_Format(PyExc_TypeError, "%s() takes at most %d arguments", call_name(sig, buf, sizeof buf), sig->n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; ++i) stack[i] = PyTuple_GetItem(args, i);
    PyObject *kwnames = NULL;
    if (nk) {
        kwnames = PyTuple_New(nk);
        if (!kwnames) return -1;
        PyObject *key, *value;
        Py_ssize_t pos = 0, k = 0;
        while (PyDict_Next(kwargs, &pos, &key, &value)) {
            PyTuple_SetItem(kwnames, k, Py_NewRef(key));
            stack[nargs + k++] = value;
        }
    }
    int r = glt_py_parse(sig, stack, nargs, kwnames, out);
    Py_XDECREF(kwnames);
    return r;
}
