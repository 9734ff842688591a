/*
 * The one read path of captures, batches, atlases and shared slots: the entry checks (a frame to hand out,
 * or the caller's view), the options or their defaults, the destination (a new frame from the pool, or the
 * caller's buffer, validated), the object's copy, and the clean-up of a frame a failed copy leaves. Each
 * object supplies two steps: its prepare (called directly by its entry points: bring the GL object up to
 * date, resolve the stream, say what the destination must look like) and its copy (the one function
 * pointer a read calls), so the output layout, the frame's strides and the failure clean-up are decided here
 * alone. Nothing here allocates beyond the frame itself.
 */
#include "read/read.h"


glt_status glt_read_dest_open(const glt_format *fmt, const glt_read_options *opts, const char *what, glt_pool *pool,
                              void *stream, const glt_dest_shape *shape, const glt_buffer_view *view,
                              glt_read_dest *d) {
    d->frame = NULL;
    d->data = d->ready_event = NULL;
    glt_status st = glt_out_spec_make(fmt, opts, what, &d->spec);
    if (st != GLT_OK) return st;
    glt_dest_shape want = *shape;
    want.spec = &d->spec;
    if (view) {
        st = glt_view_check(view, &want, what, &d->strides);
        if (st == GLT_OK) d->data = view->data;
        return st;
    }
    st = glt_frame_create(pool, stream, want.memory, want.cuda_device, &d->spec, want.count, want.height, want.width,
                          opts->flip != 0, &d->frame);
    if (st != GLT_OK) return st;
    d->data = glt_frame_data(d->frame);
    d->ready_event = glt_block_ready_event(d->frame->block);
    d->strides.pitch = glt_out_row_bytes(&d->spec, want.width);
    d->strides.plane = d->strides.pitch * (size_t)want.height;
    d->strides.image = glt_frame_image_bytes(d->frame);
    return GLT_OK;
}

glt_status glt_read_dest_close(glt_read_dest *d, glt_status copied, glt_frame **out) {
    if (copied != GLT_OK || !out) {
        glt_frame_destroy(d->frame); /* never handed out: nothing else holds it */
        d->frame = NULL;
    }
    if (out) *out = d->frame;
    return copied;
}

/* The options (their defaults when NULL; a wrong struct size refused, naming the call) and where the read goes. */
static glt_status begin(glt_read_call *c, const char *fn, const glt_read_options *opts, const glt_buffer_view *view,
                        glt_frame **out) {
    c->view = view;
    c->out = out;
    c->stream = NULL;
    c->note = 0;
    return glt_read_options_in(opts, &c->opts, fn);
}

glt_status glt_read_begin_frame(glt_read_call *c, const char *fn, const glt_read_options *opts, glt_frame **out) {
    if (!out) return glt_fail(GLT_INVALID_ARGUMENT, "%s: out is NULL", fn);
    *out = NULL;
    return begin(c, fn, opts, NULL, out);
}

glt_status glt_read_begin_into(glt_read_call *c, const char *fn, const glt_read_options *opts,
                               const glt_buffer_view *dst) {
    /* dst NULL would mean "a new frame", which nobody would receive: refuse it. */
    if (!dst)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "%s: dst is NULL; pass a glt_buffer_view, or call the read without _into for a new frame", fn);
    return begin(c, fn, opts, dst, NULL);
}

glt_status glt_read_finish(glt_read_call *c, glt_status prepared, glt_read_copy_fn copy, void *obj) {
    if (prepared != GLT_OK) return prepared;
    glt_read_dest d;
    glt_status st = glt_read_dest_open(c->fmt, &c->opts, c->what, c->pool, c->stream, &c->shape, c->view, &d);
    if (st != GLT_OK) return st;
    return glt_read_dest_close(&d, copy(obj, c, &d), c->out);
}
