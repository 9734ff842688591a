/*
 * Batches: many captures read with one GL->CUDA handoff. Mapping each camera
 * on its own costs a GPU switch from GL to CUDA work per camera (~300 us on an
 * H200); one cudaGraphicsMapResources over all of them pays it once per step.
 */
#include "read/read.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct glt_batch {
    glt_capture **caps;
    int count;
    glt_pool *pool; /* stacked and per-capture frames, and the batch's default stream */
    glt_cuda_image **images;  /* scratch for one read */
    glt_cuda_region *regions; /* scratch for one read */
};

glt_status glt_batch_create(glt_capture *const *captures, int count, glt_batch **out) {
    if (!out) return glt_fail(GLT_INVALID_ARGUMENT, "glt_batch_create: out is NULL");
    *out = NULL;
    if (count <= 0 || !captures)
        return glt_fail(GLT_INVALID_ARGUMENT, "a batch needs at least one source; pass a non-empty list of texture "
                                              "or renderbuffer names (or captures)");
    for (int i = 0; i < count; ++i) {
        if (!captures[i]) return glt_fail(GLT_INVALID_ARGUMENT, "batch source %d is NULL (a closed capture?)", i);
        const glt_object_base *a = glt_capture_base(captures[0]), *b = glt_capture_base(captures[i]);
        if (!glt_same_gl_context(a->gl_context, b->gl_context))
            return glt_fail(GLT_WRONG_CONTEXT,
                            "batch source %d (%s %u) belongs to another GL context than source 0; one batch maps "
                            "images of one context, so make one batch per context",
                            i, glt_object_kind_name(b), b->name);
        if (a->backend != b->backend || a->cuda_device != b->cuda_device)
            return glt_fail(GLT_INVALID_ARGUMENT,
                            "batch source %d (%s %u) uses the %s backend on device %d, source 0 the %s backend on "
                            "device %d; create all captures with the same backend",
                            i, glt_object_kind_name(b), b->name, glt_backend_name(b->backend), b->cuda_device,
                            glt_backend_name(a->backend), a->cuda_device);
        if (b->fmt->depth && b->backend == GLT_BACKEND_CUDA)
            return glt_fail(GLT_UNSUPPORTED_FORMAT,
                            "batch source %d (%s %u) is depth (%s); batches map colour images, so read depth "
                            "cameras with their own Capture (or pack depth into a GL_R32F colour attachment)",
                            i, glt_object_kind_name(b), b->name, b->fmt->name);
        for (int j = 0; j < i; ++j)
            if (captures[j] == captures[i] ||
                (glt_capture_base(captures[j])->name == b->name && glt_capture_base(captures[j])->target == b->target))
                return glt_fail(GLT_INVALID_ARGUMENT,
                                "batch sources %d and %d are the same %s %u; CUDA cannot map one image twice in a "
                                "call, so list each image once",
                                j, i, glt_object_kind_name(b), b->name);
    }
    glt_batch *b = calloc(1, sizeof *b);
    if (!b) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    b->count = count;
    b->caps = malloc(sizeof *b->caps * (size_t)count);
    b->images = malloc(sizeof *b->images * (size_t)count);
    b->regions = malloc(sizeof *b->regions * (size_t)count);
    const glt_object_base *c0 = glt_capture_base(captures[0]);
    b->pool = glt_pool_create(c0->backend == GLT_BACKEND_CUDA ? GLT_MEMORY_CUDA : GLT_MEMORY_HOST, c0->cuda_device);
    if (!b->caps || !b->images || !b->regions || !b->pool) {
        glt_status st = b->pool ? glt_fail(GLT_OUT_OF_MEMORY, "out of host memory") : GLT_CUDA_ERROR;
        glt_batch_destroy(b);
        return st;
    }
    for (int i = 0; i < count; ++i) b->caps[i] = captures[i];
    *out = b;
    return GLT_OK;
}

void glt_batch_destroy(glt_batch *b) {
    if (!b) return;
    free(b->caps);
    free(b->images);
    free(b->regions);
    glt_pool_release(b->pool);
    free(b);
}

int glt_batch_count(const glt_batch *b) { return b ? b->count : 0; }

static const glt_object_base *source(const glt_batch *b, int i) { return glt_capture_base(b->caps[i]); }

static int is_cuda(const glt_batch *b) { return source(b, 0)->backend == GLT_BACKEND_CUDA; }

/* Brings every capture up to date and resolves the stream; checks uniformity when `stacked`. */
static glt_status prepare(glt_batch *b, const glt_read_options *opts, int stacked, void **stream) {
    void *ignored;
    for (int i = 0; i < b->count; ++i) {
        glt_status st = glt_capture_prepare(b->caps[i], opts, &ignored);
        if (st != GLT_OK) return st;
    }
    *stream = is_cuda(b) ? (opts->cuda_stream ? opts->cuda_stream : glt_pool_stream(b->pool)) : NULL;
    for (int i = 0; i < b->count; ++i) glt_capture_use_stream(b->caps[i], *stream);
    if (!stacked) return GLT_OK;
    const glt_object_base *a = source(b, 0);
    const glt_rect *ar = glt_capture_region(b->caps[0]);
    for (int i = 1; i < b->count; ++i) {
        const glt_object_base *c = source(b, i);
        const glt_rect *cr = glt_capture_region(b->caps[i]);
        if (cr->width != ar->width || cr->height != ar->height || strcmp(c->fmt->name, a->fmt->name) != 0)
            return glt_fail(GLT_INVALID_ARGUMENT,
                            "batch source %d (%s %u) reads %dx%d %s, source 0 (%s %u) reads %dx%d %s; a stacked (N, H, "
                            "W, C) read needs one size (of each source's region) and format: use read_list() (one "
                            "map for all, a frame per source) for mixed sources",
                            i, glt_object_kind_name(c), c->name, cr->width, cr->height, c->fmt->name,
                            glt_object_kind_name(a), a->name, ar->width, ar->height, a->fmt->name);
    }
    return GLT_OK;
}

/* Where source i goes and how: its conversions, first row, row pitch and plane stride. */
typedef struct dest {
    const glt_out_spec *spec;
    void *data;
    size_t pitch, plane;
} dest;

/* One handoff for all sources; the ready events (of the frames filled) are recorded after all copies. */
static glt_status copy_all(glt_batch *b, const dest *d, int flip, void *stream, void *const *ready, int n_ready) {
    if (!is_cuda(b)) {
        /* CPU backend: one readback per texture. */
        for (int i = 0; i < b->count; ++i) {
            glt_status st =
                glt_capture_copy(b->caps[i], d[i].spec, flip, d[i].data, d[i].pitch, d[i].plane, NULL, NULL);
            if (st != GLT_OK) return st;
        }
        return GLT_OK;
    }
    for (int i = 0; i < b->count; ++i) {
        b->images[i] = glt_capture_cuda_image(b->caps[i]);
        /* each source's own region, at its origin in the mapped array */
        const glt_rect *rg = glt_capture_region(b->caps[i]);
        glt_cuda_region r = {b->images[i], d[i].spec, rg->x, rg->y, rg->width, rg->height, d[i].data, d[i].pitch,
                             d[i].plane};
        b->regions[i] = r;
    }
    glt_status st = glt_cuda_copy_regions(b->images, b->count, b->regions, b->count, flip, stream, ready, n_ready);
    for (int i = 0; i < b->count; ++i) glt_capture_finish(b->caps[i]);
    return st;
}

/* A stacked read: image i at base + i * stride, all with one spec. */
static glt_status stacked_copy(glt_batch *b, const glt_out_spec *spec, char *base, size_t stride, size_t pitch,
                               size_t plane, int flip, void *stream, void *ready) {
    dest local[16] = {{0}};
    dest *d = b->count <= 16 ? local : malloc(sizeof *d * (size_t)b->count);
    if (!d) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    for (int i = 0; i < b->count; ++i) {
        d[i].spec = spec;
        d[i].data = base + (size_t)i * stride;
        d[i].pitch = pitch;
        d[i].plane = plane;
    }
    glt_status st = copy_all(b, d, flip, stream, &ready, ready ? 1 : 0);
    if (d != local) free(d);
    return st;
}

/* The read path's prepare step (read_path.c): every source up to date and alike, one (N, H, W, C) destination. */
static glt_status prepare_read(glt_batch *b, glt_read_call *c) {
    if (!b) return glt_fail(GLT_INVALID_ARGUMENT, "a batch read on a NULL batch (a closed one?)");
    glt_status st = prepare(b, &c->opts, 1, &c->stream);
    if (st != GLT_OK) return st;
    const glt_object_base *a = source(b, 0);
    const glt_rect *rg = glt_capture_region(b->caps[0]);
    snprintf(c->what, sizeof c->what, "a batch of %d %s images", b->count, a->fmt->name);
    c->fmt = a->fmt;
    c->pool = b->pool;
    glt_dest_shape shape = {is_cuda(b) ? GLT_MEMORY_CUDA : GLT_MEMORY_HOST, a->cuda_device, NULL, b->count,
                            rg->height, rg->width};
    c->shape = shape;
    return GLT_OK;
}

static glt_status copy_read(void *obj, const glt_read_call *c, const glt_read_dest *d) {
    return stacked_copy(obj, &d->spec, d->data, d->strides.image, d->strides.pitch, d->strides.plane, c->opts.flip,
                        c->stream, d->ready_event);
}

glt_status glt_batch_read(glt_batch *b, const glt_read_options *opts, glt_frame **out) {
    glt_read_call c;
    glt_status st = glt_read_begin_frame(&c, "glt_batch_read", opts, out);
    return glt_read_finish(&c, st == GLT_OK ? prepare_read(b, &c) : st, copy_read, b);
}

glt_status glt_batch_read_into(glt_batch *b, const glt_read_options *opts, const glt_buffer_view *dst) {
    glt_read_call c;
    glt_status st = glt_read_begin_into(&c, "glt_batch_read_into", opts, dst);
    return glt_read_finish(&c, st == GLT_OK ? prepare_read(b, &c) : st, copy_read, b);
}

glt_status glt_batch_read_each(glt_batch *b, const glt_read_options *opts_in, glt_frame **frames) {
    if (!b || !frames) return glt_fail(GLT_INVALID_ARGUMENT, "glt_batch_read_each: NULL argument");
    for (int i = 0; i < b->count; ++i) frames[i] = NULL;
    glt_read_options opts; GLT_OPTIONS_IN(read, opts_in, &opts, "glt_batch_read_each");
    void *stream = NULL;
    glt_status st = prepare(b, &opts, 0, &stream);
    if (st != GLT_OK) return st;
    dest *d = malloc(sizeof *d * (size_t)b->count);
    glt_out_spec *specs = malloc(sizeof *specs * (size_t)b->count);
    void **ready = malloc(sizeof *ready * (size_t)b->count);
    if (!d || !specs || !ready) st = glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    for (int i = 0; i < b->count && st == GLT_OK; ++i) {
        const glt_object_base *c = source(b, i);
        const glt_rect *rg = glt_capture_region(b->caps[i]);
        char what[96];
        snprintf(what, sizeof what, "batch source %d (%s %u, %s)", i, glt_object_kind_name(c), c->name, c->fmt->name);
        st = glt_out_spec_make(c->fmt, &opts, what, &specs[i]);
        /* From the batch's pool, so that each frame keeps the stream it names alive. */
        if (st == GLT_OK)
            st = glt_frame_create(b->pool, stream, is_cuda(b) ? GLT_MEMORY_CUDA : GLT_MEMORY_HOST, c->cuda_device,
                                  &specs[i], 0, rg->height, rg->width, opts.flip != 0, &frames[i]);
        if (st == GLT_OK) {
            d[i].spec = &specs[i];
            d[i].data = glt_frame_data(frames[i]);
            d[i].pitch = glt_out_row_bytes(&specs[i], rg->width);
            d[i].plane = d[i].pitch * (size_t)rg->height;
            ready[i] = glt_block_ready_event(frames[i]->block);
        }
    }
    if (st == GLT_OK) st = copy_all(b, d, opts.flip, stream, ready, b->count);
    free(d);
    free(specs);
    free(ready);
    if (st != GLT_OK)
        for (int i = 0; i < b->count; ++i) {
            glt_frame_destroy(frames[i]);
            frames[i] = NULL;
        }
    return st;
}
