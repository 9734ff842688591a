/* The read options of every read() (read_args.c) and the one read path of Capture, Atlas and _Slots. */
#ifndef GLT_EXT_READ_ARGS_H
#define GLT_EXT_READ_ARGS_H

#include "object.h"
#include "params.h"

/* The arguments of every read(flip=True, *, stream=None, out=None, channels=None, ...). */
typedef struct glt_py_read_args {
    glt_read_options opts;
    int stream_given;
    PyObject *out; /* borrowed; Py_None when absent */
} glt_py_read_args;
/* Parses by sig (one of the read tables: glt_sig_*_read, glt_sig_batch_read_list). */
int glt_py_parse_read_args(gltensor_state *st, const glt_py_sig *sig, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames, glt_py_read_args *r);
/* Describes r->out as a view and settles the stream to write on: stream= if given, else the stream the
 * tensor's owner named (CAI v3), else CUDA's legacy default stream. `keep` must be released after use. */
int glt_py_out_view(gltensor_state *st, glt_py_read_args *r, int want_cuda, glt_buffer_view *view, PyObject **keep);
/* layout= 'hwc' | 'chw', in either case (reads and writes). */
int glt_py_parse_layout(PyObject *obj, glt_layout *order);

/* What the one read path needs of a type: its table, where its info struct says the backend, its C reads. */
typedef struct glt_py_reader {
    const glt_py_sig *sig;
    size_t backend_at; /* offsetof the glt_backend in the kind's info struct */
    glt_status (*read)(void *handle, const glt_read_options *opts, glt_frame **out);
    glt_status (*read_into)(void *handle, const glt_read_options *opts, const glt_buffer_view *dst);
} glt_py_reader;
PyObject *glt_py_read(glt_py_object *self, const glt_py_reader *rd, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames);

#endif
