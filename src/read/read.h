/* The read direction (read/README.md): what batches and atlases use of a capture, and the one read path that
 * captures, batches, atlases and shared slots share. */
#ifndef GLT_READ_H
#define GLT_READ_H

#include "cuda/cuda_api.h"
#include "frames/frames.h"
#include "objects/objects.h"

/* ---- capture.c: what batches and atlases use of a capture (struct glt_capture is private to capture.c) ---- */
const glt_object_base *glt_capture_base(const glt_capture *cap);
const glt_rect *glt_capture_region(const glt_capture *cap); /* the part read now */
glt_pool *glt_capture_pool(const glt_capture *cap);
/* CUDA backend: the registered image a copy maps (the resolve when multisampled); valid after a prepare. */
glt_cuda_image *glt_capture_cuda_image(const glt_capture *cap);
/* The stream a read was issued on, when a batch copies on its own: synchronised before re-registering. */
void glt_capture_use_stream(glt_capture *cap, void *stream);
/* CPU backend: the capture's region, as stored and bottom-up, in a scratch buffer the capture keeps (*rows). */
glt_status glt_capture_read_scratch(glt_capture *cap, const unsigned char **rows);
/* End of a read: a resizable capture drops its CUDA registration until the next one. */
void glt_capture_finish(glt_capture *cap);
/* Copies the capture's region into dst per spec (CPU or CUDA backend). */
glt_status glt_capture_copy(glt_capture *cap, const glt_out_spec *spec, int flip, void *dst, size_t pitch,
                            size_t plane, void *stream, void *ready_event);
/* Checks the context, brings size and format up to date, validates opts->cuda_stream and resolves
 * the stream to copy on (the pool's when none is given). */
glt_status glt_capture_prepare(glt_capture *cap, const glt_read_options *opts, void **stream);
size_t glt_capture_row_bytes(const glt_capture *cap); /* one row of the region, as stored */

/* ---- read_path.c: the one read path (captures, batches, atlases, shared slots) ---- */
typedef struct glt_read_dest {
    glt_out_spec spec;
    glt_frame *frame;         /* the new frame of a read, or NULL when writing into the caller's view */
    void *data, *ready_event; /* ready_event: the frame block's, recorded after the copy; NULL for a view */
    glt_dest_strides strides;
} glt_read_dest;

/* The output layout from opts, then a new frame of `shape` from `pool` (view NULL) or the caller's view,
 * checked against `shape` (its spec member is ignored: the layout from opts is used). */
glt_status glt_read_dest_open(const glt_format *fmt, const glt_read_options *opts, const char *what, glt_pool *pool,
                              void *stream, const glt_dest_shape *shape, const glt_buffer_view *view,
                              glt_read_dest *d);
/* Ends a read whose copy returned `copied`: hands the frame to *out (when out is given) on success,
 * destroys it on failure. Returns `copied`. */
glt_status glt_read_dest_close(glt_read_dest *d, glt_status copied, glt_frame **out);

/* One read: begun by an entry point (read: a new frame to *out; read_into: the caller's view), prepared by
 * the object (which fills the second half), finished by glt_read_finish with the object's copy. */
typedef struct glt_read_call {
    glt_read_options opts;       /* the caller's, or the defaults */
    const glt_buffer_view *view; /* read_into's destination; NULL for a new frame */
    glt_frame **out;             /* read's frame; NULL for read_into */
    /* set by the object's prepare step */
    const glt_format *fmt;       /* the source's format, for the output layout */
    glt_pool *pool;              /* where a new frame comes from */
    void *stream;                /* the stream the copy runs on (NULL: CPU backend) */
    glt_dest_shape shape;        /* what the destination must be (its spec member is ignored) */
    char what[96];               /* the source, in error messages */
    uint64_t note;               /* the object's own, from its prepare step to its copy */
} glt_read_call;
/* Copies the prepared source into d (d->spec: the conversions; c->opts.flip; c->stream). */
typedef glt_status (*glt_read_copy_fn)(void *obj, const glt_read_call *c, const glt_read_dest *d);
/* fn names the entry point in errors: "out is NULL" / "dst is NULL" refusals. */
glt_status glt_read_begin_frame(glt_read_call *c, const char *fn, const glt_read_options *opts, glt_frame **out);
glt_status glt_read_begin_into(glt_read_call *c, const char *fn, const glt_read_options *opts,
                               const glt_buffer_view *dst);
/* Returns `prepared` when the prepare step failed; else opens the destination, calls copy, closes it. */
glt_status glt_read_finish(glt_read_call *c, glt_status prepared, glt_read_copy_fn copy, void *obj);

#endif
