/*
 * Converters for the arguments every entry point takes, so that each kind of argument is checked in one place:
 *   integers: PyNumber_Index (ints, NumPy integers, anything with __index__; floats and bools refused) into
 *     long long, then the range the C side can hold. A cast after PyLong_AsLong would wrap silently:
 *     channels=(2**32 + 1,) read channel 1, count=2**32 + 1 became 1;
 *   names: compared with their length, so "uint8\0float32" is no dtype rather than uint8;
 *   options: None means the option's default, for every option.
 */
#include "ext.h"

#include <string.h>

/* The qualified name of obj's type, for the TypeErrors below and every other file's messages. */
PyObject *glt_py_type_name(PyObject *obj) {
    PyObject *name = PyObject_GetAttrString((PyObject *)Py_TYPE(obj), "__qualname__");
    if (name && PyUnicode_Check(name)) return name;
    Py_XDECREF(name);
    PyErr_Clear();
    return PyUnicode_FromString("?");
}

int glt_py_as_int64(PyObject *obj, const char *what, long long min, long long max, long long *out) {
    PyObject *index = PyBool_Check(obj) ? NULL : PyNumber_Index(obj);
    if (!index) {
        PyErr_Clear();
        PyObject *type_name = glt_py_type_name(obj);
        if (type_name) PyErr_Format(PyExc_TypeError, "%s must be an int, not %.80U", what, type_name);
        Py_XDECREF(type_name);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(index, &overflow);
    Py_DECREF(index);
    if (v == -1 && !overflow && PyErr_Occurred()) return -1;
    if (overflow || v < min || v > max) {
        PyErr_Format(PyExc_ValueError, "%s must be an int from %lld to %lld, not %R", what, min, max, obj);
        return -1;
    }
    *out = v;
    return 0;
}

int glt_py_as_int(PyObject *obj, const char *what, int min, int max, int *out) {
    long long v = 0;
    if (glt_py_as_int64(obj, what, min, max, &v) < 0) return -1;
    *out = (int)v;
    return 0;
}

int glt_py_as_cuda_device(PyObject *obj, const char *what, int *out) {
    if (obj == Py_None) {
        *out = -1;
        return 0;
    }
    /* CUDA numbers devices with ints; 65535 is far above any machine and keeps messages readable. */
    return glt_py_as_int(obj, what, 0, 65535, out);
}

int glt_py_as_flag(PyObject *obj, int default_value, int *out) {
    if (!obj || obj == Py_None) {
        *out = default_value;
        return 0;
    }
    int v = PyObject_IsTrue(obj);
    if (v < 0) return -1;
    *out = v;
    return 0;
}

const char *glt_py_as_name(PyObject *obj, Py_ssize_t *len) {
    Py_ssize_t n = 0;
    const char *s = PyUnicode_AsUTF8AndSize(obj, &n);
    if (!s) return NULL;
    if ((size_t)n != strlen(s)) {
        PyErr_Format(PyExc_ValueError, "%R holds a NUL character, which no gltensor option name does", obj);
        return NULL;
    }
    if (len) *len = n;
    return s;
}

int glt_py_as_choice(PyObject *obj, const char *what, const char *const *choices, int n, int default_index,
                     int *out) {
    if (!obj || obj == Py_None) {
        *out = default_index;
        return 0;
    }
    if (PyUnicode_Check(obj)) {
        Py_ssize_t len = 0;
        const char *s = PyUnicode_AsUTF8AndSize(obj, &len);
        if (!s) return -1;
        for (int i = 0; i < n; ++i)
            if ((size_t)len == strlen(choices[i]) && !memcmp(s, choices[i], (size_t)len)) {
                *out = i;
                return 0;
            }
    }
    char list[256];
    size_t k = 0;
    list[0] = '\0';
    for (int i = 0; i < n && k < sizeof list; ++i)
        k += (size_t)PyOS_snprintf(list + k, sizeof list - k, "%s'%s'", i ? (i + 1 == n ? " or " : ", ") : "",
                                   choices[i]);
    PyErr_Format(PyUnicode_Check(obj) ? PyExc_ValueError : PyExc_TypeError, "%s must be %s (or None: '%s'), not %R",
                 what, list, choices[default_index], obj);
    return -1;
}

const char *glt_py_dtype_name(PyObject *obj, PyObject **keep) {
    PyObject *name = NULL;
    if (PyUnicode_Check(obj)) name = Py_NewRef(obj);
    else if (PyType_Check(obj)) name = PyObject_GetAttrString(obj, "__name__"); /* numpy.float32 */
    else if (PyObject_HasAttrString(obj, "name")) name = PyObject_GetAttrString(obj, "name"); /* numpy.dtype */
    if (!name || !PyUnicode_Check(name)) {
        Py_XDECREF(name);
        PyErr_Clear();
        name = PyObject_Str(obj); /* torch.float32 -> "torch.float32" */
        if (!name) return NULL;
    }
    const char *s = glt_py_as_name(name, NULL); /* "uint8\0float32" is no dtype, not uint8 */
    if (!s) {
        Py_DECREF(name);
        return NULL;
    }
    const char *dot = strrchr(s, '.');
    if (dot) s = dot + 1;
    /* "float" and "int" (names, Python's float and int, "torch.float") mean different sizes to NumPy (float64,
     * int64) and to torch (torch.float is float32, torch.int int32): refuse them rather than pick one silently.
     * NumPy and torch dtype objects never arrive here with those names (their names carry the size). */
    static const struct {
        const char *name, *numpy, *torch;
    } ambiguous[] = {{"float", "float64", "float32"}, {"int", "int64", "int32"}};
    for (size_t i = 0; i < sizeof ambiguous / sizeof *ambiguous; ++i)
        if (!strcmp(s, ambiguous[i].name)) {
            PyErr_Format(PyExc_ValueError,
                         "dtype %R is ambiguous: NumPy reads '%s' as %s, torch (torch.%s) as %s; name the size you "
                         "mean: '%s' or '%s'",
                         obj, ambiguous[i].name, ambiguous[i].numpy, ambiguous[i].name, ambiguous[i].torch,
                         ambiguous[i].torch, ambiguous[i].numpy);
            Py_DECREF(name);
            return NULL;
        }
    static const struct {
        const char *alias, *name;
    } aliases[] = {{"half", "float16"}, {"double", "float64"}, {"short", "int16"}, {"long", "int64"}};
    for (size_t i = 0; i < sizeof aliases / sizeof *aliases; ++i)
        if (!strcmp(s, aliases[i].alias)) s = aliases[i].name;
    *keep = name;
    return s;
}
