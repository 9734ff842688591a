/*
 * Captures: one GL image (texture or renderbuffer) bound to the GL context that
 * was current when it was created, read on demand through the CUDA or CPU
 * backend into frames from a pool, or into a buffer the caller owns.
 *
 * Each read re-queries the image's size and format from GL (a few state
 * queries) so that an image reallocated since the last read is re-registered
 * instead of yielding a stale or garbage frame.
 *
 * A capture may read a region (a rectangle) of its image instead of all of it:
 * the backends then copy only those pixels (the CUDA copy offsets into the
 * mapped array, the CPU backend reads back the rectangle alone, a resolve or
 * depth pack covers just the region), and every size reported is the region's.
 */
#include "read/read.h"
#include "read/gl_stage.h"
#include "cpu/cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct glt_capture {
    glt_object_base base; /* first: context, name, target, backend, device, format, size and samples */
    glt_rect requested;   /* region asked for at creation; width 0: the whole image, whatever its size */
    glt_rect region;      /* the part read now: `requested`, or the whole image */
    int detached;         /* 1: no backend hold (the region did not fit, or attaching failed); reads re-attach */
    glt_cuda_image *cuda;
    glt_cpu_reader *cpu;
    glt_pool *pool;
    void *last_stream;      /* the last stream a read was issued on: synchronised before re-registering */
    unsigned char *scratch; /* CPU backend with conversions: the image as read back */
    size_t scratch_size;
    int resizable;               /* CUDA: registered only while a read runs */
    glt_gl_stage *stage;         /* MSAA resolve and/or depth readback, when the image needs one */
    glt_cuda_buffer *cuda_depth; /* depth on the CUDA backend */
};

const glt_object_base *glt_capture_base(const glt_capture *cap) { return &cap->base; }
const glt_rect *glt_capture_region(const glt_capture *cap) { return &cap->region; }
glt_pool *glt_capture_pool(const glt_capture *cap) { return cap->pool; }
glt_cuda_image *glt_capture_cuda_image(const glt_capture *cap) { return cap->cuda; }
void glt_capture_use_stream(glt_capture *cap, void *stream) { cap->last_stream = stream; }

static int region_given(const glt_rect *r) { return r->width != 0 || r->height != 0; }

/* After a size change: the region read follows a whole-image capture, and must still fit otherwise. */
static void update_region(glt_capture *cap) {
    if (region_given(&cap->requested)) {
        cap->region = cap->requested;
        return;
    }
    cap->region.x = cap->region.y = 0;
    cap->region.width = cap->base.width;
    cap->region.height = cap->base.height;
}

/* GLT_OK while the region fits the image as last queried; the error for a resize that left it outside. */
static glt_status region_still_fits(const glt_capture *cap) {
    char why[128];
    const glt_rect *r = &cap->region;
    const glt_object_base *o = &cap->base;
    if (!glt_region_misfit(r, o->width, o->height, why, sizeof why)) return GLT_OK;
    return glt_fail(GLT_INVALID_ARGUMENT,
                    "%s %u is now %dx%d, and the capture's region (x=%d, y=%d, width=%d, height=%d) no longer fits in "
                    "it (%s); set a region inside the new size (cap.region = (x, y, w, h), glt_capture_set_region), "
                    "or capture without a region to read the whole image whatever its size",
                    glt_object_kind_name(o), o->name, o->width, o->height, r->x, r->y, r->width, r->height, why);
}

/* Drops the backend's hold on the image (before a re-registration or at close). */
static void detach_backend(glt_capture *cap, int context_current) {
    /* CUDA registrations, like GL objects, can only be undone in the image's own context. */
    if (context_current) {
        glt_cuda_image_unregister(cap->cuda);
        glt_cuda_buffer_unregister(cap->cuda_depth);
    } else {
        glt_cuda_image_forget(cap->cuda);
        glt_cuda_buffer_forget(cap->cuda_depth);
    }
    cap->cuda = NULL;
    cap->cuda_depth = NULL;
    /* GL objects can only be deleted in their own context; elsewhere they are left to it. */
    if (context_current) {
        glt_cpu_reader_destroy(cap->cpu);
        glt_stage_destroy(cap->stage);
    } else {
        free(cap->cpu);
        free(cap->stage);
    }
    cap->cpu = NULL;
    cap->stage = NULL;
}

/* (Re)creates the backend's hold on the image for its current size and format: the GL-side stage
 * for multisampled and depth images, then what CUDA maps (the image, its single-sample resolve, or
 * the depth readback buffer) or what the CPU backend reads back. */
static glt_status attach_backend(glt_capture *cap) {
    const glt_object_base *o = &cap->base;
    GLuint name = o->name;
    GLenum target = o->target;
    if (glt_stage_needed(o->fmt, o->target, o->samples)) {
        int use_compute = glt_depth_use_compute(o->fmt, o->backend == GLT_BACKEND_CUDA);
        glt_status st = glt_stage_create(o->name, o->target, o->fmt, o->width, o->height, o->samples, &cap->region,
                                         use_compute, &cap->stage);
        if (st != GLT_OK) return st;
        if (glt_stage_resolved(cap->stage)) {
            name = glt_stage_resolved(cap->stage);
            target = GL_RENDERBUFFER;
        }
    }
    if (o->fmt->depth)
        return o->backend == GLT_BACKEND_CUDA
                   ? glt_cuda_buffer_register(glt_stage_depth_buffer(cap->stage), o->cuda_device, &cap->cuda_depth)
                   : GLT_OK;
    if (o->backend == GLT_BACKEND_CUDA)
        return glt_cuda_image_register(name, target, o->cuda_device, o->fmt, o->width, o->height, &cap->cuda);
    return glt_cpu_reader_create(name, target, &cap->cpu);
}

glt_status glt_capture_create(const glt_capture_desc *desc, glt_capture **out) {
    if (!desc || !out) return glt_fail(GLT_INVALID_ARGUMENT, "glt_capture_create: desc and out must not be NULL");
    *out = NULL;
    GLT_CHECK_STRUCT_SIZE(desc, glt_capture_desc);
    if (desc->gl_target != GL_TEXTURE_2D && desc->gl_target != GL_TEXTURE_RECTANGLE &&
        desc->gl_target != GL_RENDERBUFFER && desc->gl_target != GL_TEXTURE_2D_MULTISAMPLE)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "target 0x%04X is not capturable; use GL_TEXTURE_2D (0x0DE1), GL_TEXTURE_RECTANGLE (0x84F5), "
                        "GL_TEXTURE_2D_MULTISAMPLE (0x9100) or GL_RENDERBUFFER (0x8D41)",
                        desc->gl_target);
    if (desc->backend != GLT_BACKEND_AUTO && desc->backend != GLT_BACKEND_CUDA && desc->backend != GLT_BACKEND_CPU)
        return glt_fail(GLT_INVALID_ARGUMENT, "unknown backend %d; use auto, cuda or cpu", (int)desc->backend);
    glt_object_base base;
    glt_object_state now;
    glt_status st = glt_object_open(&base, GLT_OBJECT_CAPTURE, desc->gl_name, desc->gl_target, &now);
    if (st == GLT_OK) st = glt_gl_region_check(&desc->region, desc->gl_target, desc->gl_name, now.width, now.height);
    if (st != GLT_OK) return st;

    glt_capture *cap = calloc(1, sizeof *cap);
    if (!cap) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    cap->base = base;
    cap->resizable = desc->resizable != 0;
    cap->requested = desc->region;
    update_region(cap);
    st = glt_object_choose_backend(&cap->base, desc->backend, desc->cuda_device);
    if (st == GLT_OK) {
        cap->pool = glt_pool_create(cap->base.backend == GLT_BACKEND_CUDA ? GLT_MEMORY_CUDA : GLT_MEMORY_HOST,
                                    cap->base.cuda_device);
        if (!cap->pool) st = GLT_CUDA_ERROR;
    }
    if (st == GLT_OK) st = attach_backend(cap);
    if (st != GLT_OK) {
        glt_capture_destroy(cap);
        return st;
    }
    glt_capture_finish(cap);
    glt_clear_error();
    *out = cap;
    return GLT_OK;
}

/* Reads still in flight use the registration: let them land before it goes. The last read's stream
 * is synchronised when it is one of CUDA's default streams; a stream the caller passed may be gone
 * by now, so then the whole device is (this runs only at close and after a reallocation). */
static void drain_reads(glt_capture *cap) {
    if (cap->base.backend != GLT_BACKEND_CUDA || (!cap->cuda && !cap->cuda_depth) || !cap->last_stream) return;
    if ((uintptr_t)cap->last_stream <= 2)
        glt_cuda_stream_sync(cap->last_stream, cap->base.cuda_device);
    else
        glt_cuda_device_sync(cap->base.cuda_device);
}

void glt_capture_destroy(glt_capture *cap) {
    if (!cap) return;
    if (cap->pool) drain_reads(cap);
    /* Python releases captures whenever their last reference goes, often with another context current or
     * none: enter the capture's own where that can be done (context_switch.c), else leave its GL objects and
     * registrations to the driver, which drops them with the context. */
    glt_gl_context_saved saved;
    detach_backend(cap, glt_gl_context_enter(cap->base.gl_context, &saved));
    glt_gl_context_leave(&saved);
    glt_pool_release(cap->pool); /* frames still alive keep the pool until they go */
    free(cap->scratch);
    free(cap);
}

glt_status glt_capture_get_info(const glt_capture *cap, glt_capture_info *info) {
    if (!cap || !info) return glt_fail(GLT_INVALID_ARGUMENT, "glt_capture_get_info: NULL argument");
    const glt_object_base *o = &cap->base;
    info->size = sizeof *info;
    info->width = cap->region.width;
    info->height = cap->region.height;
    info->region = cap->region;
    info->image_width = o->width;
    info->image_height = o->height;
    info->channels = o->fmt->channels;
    info->dtype = o->fmt->dtype;
    info->gl_internal_format = o->internal_format;
    info->format_name = o->fmt->name;
    info->target_name = glt_target_name(o->target);
    info->backend = o->backend;
    info->backend_reason = o->backend_reason;
    info->cuda_device = o->cuda_device;
    return GLT_OK;
}

/* Rebuilds the backend's hold for the image as `now` describes it and the requested region. A region the
 * image cannot hold leaves the capture detached (no stage or readback made for it) until a later size or
 * region fits; every read until then fails with that message. */
static glt_status reattach(glt_capture *cap, const glt_object_state *now) {
    drain_reads(cap);
    detach_backend(cap, 1);
    cap->detached = 1;
    glt_object_adopt(&cap->base, now);
    update_region(cap);
    glt_pool_trim(cap->pool);
    glt_status st = region_still_fits(cap);
    if (st == GLT_OK) st = attach_backend(cap);
    if (st == GLT_OK) cap->detached = 0;
    return st;
}

glt_status glt_capture_refresh(glt_capture *cap, int *changed) {
    if (changed) *changed = 0;
    if (!cap) return glt_fail(GLT_CLOSED, "the capture was closed (NULL handle)");
    glt_object_state now;
    glt_status st = glt_object_query(&cap->base, &now);
    if (st != GLT_OK) return st;
    if (glt_object_same(&cap->base, &now)) {
        st = region_still_fits(cap); /* integer compares: fails only after a resize left the region outside */
        if (st == GLT_OK && cap->detached) st = reattach(cap, &now); /* an earlier attach failed */
        return st;
    }
    /* The image was reallocated: the old registration points at storage GL no longer uses. */
    if (changed) *changed = 1;
    return reattach(cap, &now);
}

glt_status glt_capture_set_region(glt_capture *cap, const glt_rect *region) {
    if (!cap) return glt_fail(GLT_CLOSED, "the capture was closed (NULL handle)");
    glt_rect want = {0, 0, 0, 0};
    if (region) want = *region;
    glt_object_state now;
    glt_status st = glt_object_query(&cap->base, &now);
    if (st != GLT_OK) return st;
    st = glt_gl_region_check(&want, cap->base.target, cap->base.name, now.width, now.height);
    if (st != GLT_OK) return st; /* the capture keeps its region */
    cap->requested = want;
    /* Colour images read straight from the registered image: only the copy's rectangle changes. A GL-side
     * stage (resolve, depth pack) is made for one region, and a new size needs a new hold anyway. */
    if (glt_object_same(&cap->base, &now) && !cap->stage && !cap->detached) {
        update_region(cap);
        return GLT_OK;
    }
    st = reattach(cap, &now);
    glt_capture_finish(cap); /* a resizable capture holds no registration between reads, as after creation */
    return st;
}

size_t glt_capture_row_bytes(const glt_capture *cap) {
    return (size_t)cap->region.width * cap->base.fmt->channels * glt_dtype_size(cap->base.fmt->dtype);
}

glt_status glt_capture_prepare(glt_capture *cap, const glt_read_options *opts, void **stream) {
    glt_status st = glt_capture_refresh(cap, NULL);
    if (st != GLT_OK) return st;
    const glt_object_base *o = &cap->base;
    void *s = opts ? opts->cuda_stream : NULL;
    if (s && o->backend != GLT_BACKEND_CUDA)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "a CUDA stream was given to a capture on the CPU backend (%s); drop stream=, or use the CUDA "
                        "backend",
                        o->backend_reason);
    if (s) {
        st = glt_cuda_check_stream(s, o->cuda_device);
        if (st != GLT_OK) return st;
    }
    *stream = o->backend == GLT_BACKEND_CUDA ? (s ? s : glt_pool_stream(cap->pool)) : NULL;
    cap->last_stream = *stream;
    if (o->backend == GLT_BACKEND_CUDA && !o->fmt->depth && !cap->cuda) {
        /* A resizable capture registers for the duration of this read only. */
        GLuint name = cap->stage && glt_stage_resolved(cap->stage) ? glt_stage_resolved(cap->stage) : o->name;
        GLenum target = name == o->name ? o->target : GL_RENDERBUFFER;
        st = glt_cuda_image_register(name, target, o->cuda_device, o->fmt, o->width, o->height, &cap->cuda);
        if (st != GLT_OK) return st;
    }
    return cap->stage ? glt_stage_run(cap->stage) : GLT_OK;
}

void glt_capture_finish(glt_capture *cap) {
    if (!cap->resizable || cap->base.backend != GLT_BACKEND_CUDA || !cap->cuda) return;
    /* The copy reads the image through a texture object: let it finish before the registration goes. */
    if (cap->last_stream) glt_cuda_stream_sync(cap->last_stream, cap->base.cuda_device);
    glt_cuda_image_unregister(cap->cuda);
    cap->cuda = NULL;
}

glt_status glt_capture_read_scratch(glt_capture *cap, const unsigned char **rows) {
    const glt_object_base *o = &cap->base;
    size_t row = glt_capture_row_bytes(cap), need = row * (size_t)cap->region.height;
    if (cap->scratch_size < need) {
        unsigned char *p = realloc(cap->scratch, need);
        if (!p) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory for a %zu-byte readback", need);
        cap->scratch = p;
        cap->scratch_size = need;
    }
    *rows = cap->scratch;
    return glt_cpu_reader_read(cap->cpu, o->fmt, o->width, o->height, &cap->region, cap->scratch, row, 0);
}

glt_status glt_capture_copy(glt_capture *cap, const glt_out_spec *spec, int flip, void *dst, size_t pitch,
                            size_t plane, void *stream, void *ready_event) {
    const glt_object_base *o = &cap->base;
    const glt_rect *rg = &cap->region;
    if (o->fmt->depth) /* one channel: HWC and CHW rows are the same; the stage packed the region alone */
        return o->backend == GLT_BACKEND_CUDA
                   ? glt_cuda_depth_copy(cap->cuda_depth, rg->width, rg->height, spec, flip, dst, pitch, stream,
                                         ready_event)
                   : glt_stage_read_depth_host(cap->stage, flip, spec->depth_mode, spec->near_plane, spec->far_plane,
                                               dst, pitch);
    if (o->backend == GLT_BACKEND_CUDA) {
        /* The copy starts at the region's origin in the mapped array: no pixel outside it is read. */
        glt_cuda_region r = {cap->cuda, spec, rg->x, rg->y, rg->width, rg->height, dst, pitch, plane};
        glt_status st = glt_cuda_copy_regions(&cap->cuda, 1, &r, 1, flip, stream, &ready_event, 1);
        glt_capture_finish(cap);
        return st;
    }
    if (spec->raw) return glt_cpu_reader_read(cap->cpu, o->fmt, o->width, o->height, rg, dst, pitch, flip);
    const unsigned char *rows = NULL;
    glt_status st = glt_capture_read_scratch(cap, &rows);
    if (st != GLT_OK) return st;
    ptrdiff_t row = (ptrdiff_t)glt_capture_row_bytes(cap);
    const unsigned char *first = flip ? rows + (rg->height - 1) * row : rows;
    glt_convert_host(o->fmt, spec, first, flip ? -row : row, rg->width, rg->height, dst, pitch, plane);
    return GLT_OK;
}

/* The read path's prepare step (read_path.c): the capture up to date, its stream, one image of its region. */
static glt_status prepare_read(glt_capture *cap, glt_read_call *c) {
    glt_status st = glt_capture_prepare(cap, &c->opts, &c->stream);
    if (st != GLT_OK) return st;
    const glt_object_base *o = &cap->base;
    snprintf(c->what, sizeof c->what, "%s %u (%s)", glt_object_kind_name(o), o->name, o->fmt->name);
    c->fmt = o->fmt;
    c->pool = cap->pool;
    glt_dest_shape shape = {o->backend == GLT_BACKEND_CUDA ? GLT_MEMORY_CUDA : GLT_MEMORY_HOST, o->cuda_device, NULL,
                            0, cap->region.height, cap->region.width};
    c->shape = shape;
    return GLT_OK;
}

static glt_status copy_read(void *obj, const glt_read_call *c, const glt_read_dest *d) {
    return glt_capture_copy(obj, &d->spec, c->opts.flip, d->data, d->strides.pitch, d->strides.plane, c->stream,
                            d->ready_event);
}

glt_status glt_capture_read(glt_capture *cap, const glt_read_options *opts, glt_frame **out) {
    glt_read_call c;
    glt_status st = glt_read_begin_frame(&c, "glt_capture_read", opts, out);
    return glt_read_finish(&c, st == GLT_OK ? prepare_read(cap, &c) : st, copy_read, cap);
}

glt_status glt_capture_read_into(glt_capture *cap, const glt_read_options *opts, const glt_buffer_view *dst) {
    glt_read_call c;
    glt_status st = glt_read_begin_into(&c, "glt_capture_read_into", opts, dst);
    return glt_read_finish(&c, st == GLT_OK ? prepare_read(cap, &c) : st, copy_read, cap);
}
