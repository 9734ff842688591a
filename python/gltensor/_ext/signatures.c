/* _gltensor._signatures(): what every function and method of the module accepts, from the tables the parser
 * runs on (params.h) and, for methods without parameters or with one positional, from their METH_ flags. */
#include "params.h"

#include <string.h>

static const glt_py_sig *const tables[] = {
    &glt_sig_context_headless, &glt_sig_capture_new,   &glt_sig_capture_read,     &glt_sig_batch_new,
    &glt_sig_batch_read,       &glt_sig_batch_read_list, &glt_sig_atlas_new,      &glt_sig_atlas_read,
    &glt_sig_upload_new,       &glt_sig_upload_write,  &glt_sig_buffer_new,       &glt_sig_buffer_map,
    &glt_sig_buffer_read,      &glt_sig_slots_new,     &glt_sig_slots_read,       &glt_sig_slot_writer_new,
    &glt_sig_slot_writer_write, &glt_sig_slots_read_view, &glt_sig_mujoco_stepper_new,
};

static const glt_py_sig *table_of(const char *qualname) {
    const char *dot = strrchr(qualname, '.');
    if (dot && !strcmp(dot, ".__dlpack__")) return &glt_sig_dlpack; /* Frame and BufferView share it */
    for (size_t i = 0; i < sizeof tables / sizeof *tables; ++i)
        if (!strcmp(tables[i]->qualname, qualname)) return tables[i];
    return NULL;
}

static PyObject *rows_of(const glt_py_sig *sig) {
    static const char *const pass_names[] = {"positional", "keyword", "positional_only", "keyword"};
    PyObject *list = PyList_New(sig->n);
    for (int i = 0; list && i < sig->n; ++i) {
        const glt_py_param *p = &sig->params[i];
        PyObject *row = Py_BuildValue("(ssz)", p->name, pass_names[p->pass], p->default_);
        if (!row) Py_CLEAR(list);
        else PyList_SetItem(list, i, row);
    }
    return list;
}

/* qualname's entry: its table's rows, [] or one positional-only row from the flags, or None (no table: the
 * stub test fails on it). */
static int add(PyObject *out, const char *qualname, int flags) {
    PyObject *rows;
    if (flags & METH_NOARGS) rows = PyList_New(0);
    else if (flags & METH_O) rows = Py_BuildValue("[(ssz)]", "arg", "positional_only", NULL);
    else if (!(flags & METH_KEYWORDS)) rows = Py_BuildValue("[(ssz)]", "*args", "var_positional", NULL);
    else {
        const glt_py_sig *sig = table_of(qualname);
        rows = sig ? rows_of(sig) : Py_NewRef(Py_None);
    }
    if (!rows) return -1;
    int r = PyDict_SetItemString(out, qualname, rows);
    Py_DECREF(rows);
    return r;
}

static int add_methods(PyObject *out, const char *owner, const PyMethodDef *defs) {
    for (const PyMethodDef *d = defs; d && d->ml_name; ++d) {
        char qualname[128];
        PyOS_snprintf(qualname, sizeof qualname, "%s%s%s", owner, *owner ? "." : "", d->ml_name);
        if (add(out, qualname, d->ml_flags) < 0) return -1;
    }
    return 0;
}

PyObject *glt_py_signatures(PyObject *module, PyObject *unused) {
    (void)unused;
    PyObject *out = PyDict_New();
    PyModuleDef *def = PyModule_GetDef(module);
    if (!out || !def || add_methods(out, "", def->m_methods) < 0) goto fail;
    PyObject *dict = PyModule_GetDict(module); /* borrowed */
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        if (!PyType_Check(value)) continue;
        PyTypeObject *type = (PyTypeObject *)value;
        PyObject *owner_module = PyType_GetModule(type); /* only the types this module made have one */
        if (!owner_module) {
            PyErr_Clear();
            continue;
        }
        if (owner_module != module) continue;
        const char *name = PyUnicode_AsUTF8AndSize(key, NULL);
        if (!name) goto fail;
        if (add_methods(out, name, PyType_GetSlot(type, Py_tp_methods)) < 0) goto fail;
        if (PyType_GetSlot(type, Py_tp_new)) {
            char qualname[128];
            PyOS_snprintf(qualname, sizeof qualname, "%s.__new__", name);
            if (add(out, qualname, METH_VARARGS | METH_KEYWORDS) < 0) goto fail;
        }
    }
    return out;
fail:
    Py_XDECREF(out);
    return NULL;
}
