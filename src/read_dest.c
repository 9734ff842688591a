/*
 * Where one read writes: a new frame from the pool (read) or the caller's buffer, validated
 * (read_into). Capture, Batch and Atlas reads open and close their destination here, so that the
 * output layout, the frame's strides and the failure clean-up are decided in one place.
 */
#include "internal.h"

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
