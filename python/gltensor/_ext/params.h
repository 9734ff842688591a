/*
 * One table per method's parameters, from which its arguments are parsed and which _gltensor._signatures()
 * shows, so that tests/test_stubs.py checks _gltensor.pyi against what the C accepts (a keyword missing on
 * either side fails). A table row is a parameter: its keyword, how it may be passed, and its default as the
 * stub writes it (NULL: required). Converting the values stays with the method: each kind of value has its
 * one converter (args.c, interop.c, read_args.c).
 */
#ifndef GLT_EXT_PARAMS_H
#define GLT_EXT_PARAMS_H

#include "ext.h"

typedef enum {
    GLT_PY_POSITIONAL,   /* positional or keyword */
    GLT_PY_KEYWORD,      /* keyword only */
    GLT_PY_ONLY_BY_POSITION, /* positional only */
    /* Keyword only; a positional value is still taken, with a DeprecationWarning (it was positional up to 0.2). */
    GLT_PY_KEYWORD_WAS_POSITIONAL,
} glt_py_pass;

typedef struct glt_py_param {
    const char *name;
    glt_py_pass pass;
    const char *default_; /* as the stub writes it ("None", "True", "'auto'", "..."); NULL: required */
    const char *old_name; /* the keyword's old spelling, still taken with a DeprecationWarning; NULL: none */
} glt_py_param;

typedef struct glt_py_sig {
    const char *qualname; /* "Capture.read", "Capture.__new__", "Context.headless" */
    int n;
    const glt_py_param *params; /* positional ones first, in order */
} glt_py_sig;

/* Defines `const glt_py_sig var` from its rows. */
#define GLT_PY_SIG(var, qualname, ...)                       \
    static const glt_py_param var##_rows[] = {__VA_ARGS__}; \
    const glt_py_sig var = {qualname, (int)(sizeof var##_rows / sizeof *var##_rows), var##_rows}

#define GLT_PY_MAX_PARAMS 16
/* Parses a vectorcall's arguments by sig into out[] (borrowed; NULL where not given). -1 with TypeError (or the
 * DeprecationWarning raised as an error) otherwise. */
int glt_py_parse(const glt_py_sig *sig, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **out);
/* The same for a tuple and a dict (tp_new, METH_VARARGS | METH_KEYWORDS). */
int glt_py_parse_tuple(const glt_py_sig *sig, PyObject *args, PyObject *kwargs, PyObject **out);

/* Every table, for _gltensor._signatures() (signatures.c). */
extern const glt_py_sig glt_sig_context_headless, glt_sig_capture_new, glt_sig_capture_read, glt_sig_batch_new,
    glt_sig_batch_read, glt_sig_batch_read_list, glt_sig_atlas_new, glt_sig_atlas_read, glt_sig_upload_new,
    glt_sig_upload_write, glt_sig_buffer_new, glt_sig_buffer_map, glt_sig_buffer_read, glt_sig_slots_new,
    glt_sig_slots_read, glt_sig_slots_read_view, glt_sig_slot_writer_new, glt_sig_slot_writer_write, glt_sig_dlpack,
    glt_sig_mujoco_stepper_new;
/* _gltensor._signatures() -> {qualname: [(keyword, 'positional' | 'keyword' | 'positional_only', default)]} for
 * every function and method of the module (those without a table from their METH_ flags). */
PyObject *glt_py_signatures(PyObject *module, PyObject *unused);

#endif
