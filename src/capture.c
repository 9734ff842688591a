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
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct image_desc {
    GLint width, height, internal_format, samples;
} image_desc;

static const char *kind_of(GLenum target) { return target == GL_RENDERBUFFER ? "renderbuffer" : "texture"; }

const char *glt_capture_kind(const glt_capture *cap) { return kind_of(cap->target); }

/* Reads size, format and sample count of the image from GL, restoring the binding it touches. */
static glt_status query_image(const glt_gl *gl, GLuint name, GLenum target, image_desc *d) {
    memset(d, 0, sizeof *d);
    glt_gl_drain_errors(gl);
    if (target == GL_RENDERBUFFER) {
        if (name == 0 || !gl->IsRenderbuffer(name))
            return glt_fail(GLT_INVALID_OBJECT,
                            "renderbuffer %u does not exist in the current GL context (never created, deleted, or "
                            "created in a context that does not share objects with this one); pass a live "
                            "renderbuffer name, or the right target if it is a texture",
                            name);
        GLint prev = 0;
        gl->GetIntegerv(GL_RENDERBUFFER_BINDING, &prev);
        gl->BindRenderbuffer(GL_RENDERBUFFER, name);
        gl->GetRenderbufferParameteriv(GL_RENDERBUFFER, GL_RENDERBUFFER_WIDTH, &d->width);
        gl->GetRenderbufferParameteriv(GL_RENDERBUFFER, GL_RENDERBUFFER_HEIGHT, &d->height);
        gl->GetRenderbufferParameteriv(GL_RENDERBUFFER, GL_RENDERBUFFER_INTERNAL_FORMAT, &d->internal_format);
        gl->GetRenderbufferParameteriv(GL_RENDERBUFFER, GL_RENDERBUFFER_SAMPLES, &d->samples);
        gl->BindRenderbuffer(GL_RENDERBUFFER, (GLuint)prev);
    } else {
        if (name == 0 || !gl->IsTexture(name))
            return glt_fail(GLT_INVALID_OBJECT,
                            "texture %u does not exist in the current GL context (never created, deleted, or "
                            "created in a context that does not share objects with this one); pass a live texture "
                            "name (Panda3D: texture.getNativeId() after the texture was prepared and rendered)",
                            name);
        GLint prev = 0;
        gl->GetIntegerv(target == GL_TEXTURE_RECTANGLE           ? GL_TEXTURE_BINDING_RECTANGLE
                        : target == GL_TEXTURE_2D_MULTISAMPLE ? GL_TEXTURE_BINDING_2D_MULTISAMPLE
                                                              : GL_TEXTURE_BINDING_2D,
                        &prev);
        gl->BindTexture(target, name);
        GLenum err = gl->GetError();
        if (err != GL_NO_ERROR) {
            gl->BindTexture(target, (GLuint)prev);
            glt_gl_drain_errors(gl);
            return glt_fail(GLT_INVALID_OBJECT,
                            "texture %u cannot be bound as %s (%s): it was created with another target; pass the "
                            "target it was created with (GL_TEXTURE_2D or GL_TEXTURE_RECTANGLE; multisampled and "
                            "array textures are not capturable)",
                            name, glt_target_name(target), glt_gl_error_name(err));
        }
        gl->GetTexLevelParameteriv(target, 0, GL_TEXTURE_WIDTH, &d->width);
        gl->GetTexLevelParameteriv(target, 0, GL_TEXTURE_HEIGHT, &d->height);
        gl->GetTexLevelParameteriv(target, 0, GL_TEXTURE_INTERNAL_FORMAT, &d->internal_format);
        gl->GetTexLevelParameteriv(target, 0, GL_TEXTURE_SAMPLES, &d->samples);
        gl->BindTexture(target, (GLuint)prev);
    }
    GLenum err = gl->GetError();
    if (err != GL_NO_ERROR)
        return glt_fail(GLT_GL_ERROR,
                        "querying %s %u's size and format failed with %s; check that the name is a live %s of this "
                        "context and that its target is right",
                        kind_of(target), name, glt_gl_error_name(err), kind_of(target));
    if (d->width <= 0 || d->height <= 0)
        return glt_fail(GLT_INVALID_OBJECT,
                        "%s %u has no storage yet (%dx%d); allocate it (glTexImage2D, glTexStorage2D or "
                        "glRenderbufferStorage) and render into it before capturing",
                        kind_of(target), name, d->width, d->height);
    return GLT_OK;
}

/* The format to use for this image, or the refusal that says why not and what to do. */
static glt_status check_format(GLuint name, GLenum target, const image_desc *d, const glt_format **out) {
    const glt_format *f = glt_format_find((GLenum)d->internal_format);
    if (!f)
        return glt_fail(GLT_UNSUPPORTED_FORMAT, "%s %u is %s, which cannot be captured: %s", kind_of(target), name,
                        glt_format_name((GLenum)d->internal_format),
                        glt_format_refusal_hint((GLenum)d->internal_format));
    *out = f;
    return GLT_OK;
}

static int region_given(const glt_rect *r) { return r->width != 0 || r->height != 0; }

/* How `r` fails to lie inside a width x height image, or NULL when it fits. */
static const char *region_misfit(const glt_rect *r, int width, int height, char *why, size_t n) {
    if (r->x + (long long)r->width > width)
        snprintf(why, n, "x + width = %lld is more than the image width %d", r->x + (long long)r->width, width);
    else if (r->y + (long long)r->height > height)
        snprintf(why, n, "y + height = %lld is more than the image height %d", r->y + (long long)r->height, height);
    else
        return NULL;
    return why;
}

/* A requested region must be a non-empty rectangle inside the image; all zeros asks for the whole image. */
static glt_status check_requested_region(const glt_rect *r, GLenum target, GLuint name, int width, int height) {
    if (!region_given(r) && r->x == 0 && r->y == 0) return GLT_OK;
    if (r->x < 0 || r->y < 0 || r->width <= 0 || r->height <= 0)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "region (x=%d, y=%d, width=%d, height=%d) of %s %u is not a rectangle of the image: x and y "
                        "must be >= 0 and width and height > 0 (width = height = 0, with x = y = 0, reads the whole "
                        "image)",
                        r->x, r->y, r->width, r->height, kind_of(target), name);
    char why[128];
    if (region_misfit(r, width, height, why, sizeof why))
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "region (x=%d, y=%d, width=%d, height=%d) does not fit %s %u, which is %dx%d: %s; pass a "
                        "region inside the image (GL window coordinates: x, y of its lower-left pixel, row 0 at the "
                        "bottom)",
                        r->x, r->y, r->width, r->height, kind_of(target), name, width, height, why);
    return GLT_OK;
}

/* After a size change: the region read follows a whole-image capture, and must still fit otherwise. */
static void update_region(glt_capture *cap) {
    if (region_given(&cap->requested)) {
        cap->region = cap->requested;
        return;
    }
    cap->region.x = cap->region.y = 0;
    cap->region.width = cap->width;
    cap->region.height = cap->height;
}

/* GLT_OK while the region fits the image as last queried; the error for a resize that left it outside. */
static glt_status region_still_fits(const glt_capture *cap) {
    char why[128];
    const glt_rect *r = &cap->region;
    if (!region_misfit(r, cap->width, cap->height, why, sizeof why)) return GLT_OK;
    return glt_fail(GLT_INVALID_ARGUMENT,
                    "%s %u is now %dx%d, and the capture's region (x=%d, y=%d, width=%d, height=%d) no longer fits in "
                    "it (%s); set a region inside the new size (cap.region = (x, y, w, h), glt_capture_set_region), "
                    "or capture without a region to read the whole image whatever its size",
                    kind_of(cap->target), cap->name, cap->width, cap->height, r->x, r->y, r->width, r->height, why);
}

static glt_status choose_backend(glt_capture *cap, const glt_capture_desc *desc) {
    if (desc->backend == GLT_BACKEND_CPU) {
        cap->backend = GLT_BACKEND_CPU;
        cap->cuda_device = -1;
        snprintf(cap->backend_reason, sizeof cap->backend_reason, "backend='cpu' was requested");
        return GLT_OK;
    }
    int dev = -1;
    glt_status st = glt_cuda_device_of_current_context(&dev);
    if (st == GLT_OK && desc->cuda_device >= 0 && desc->cuda_device != dev)
        return glt_fail(GLT_WRONG_DEVICE,
                        "%s %u lives in a GL context on CUDA device %d, but CUDA device %d was requested; CUDA "
                        "interop needs both on one GPU: create the GL context on device %d "
                        "(gltensor.Context.headless(cuda_device=%d)) or pass cuda_device=%d",
                        kind_of(cap->target), cap->name, dev, desc->cuda_device, desc->cuda_device, desc->cuda_device,
                        dev);
    if (st == GLT_OK) {
        cap->backend = GLT_BACKEND_CUDA;
        cap->cuda_device = dev;
        snprintf(cap->backend_reason, sizeof cap->backend_reason,
                 "the GL context runs on CUDA device %d: frames stay on the GPU", dev);
        return GLT_OK;
    }
    if (desc->backend == GLT_BACKEND_CUDA) {
        /* Keep the specific reason but make it an error about the request. */
        char why[768];
        snprintf(why, sizeof why, "%s", glt_last_error());
        return glt_fail(st == GLT_WRONG_DEVICE ? GLT_WRONG_DEVICE : GLT_CUDA_UNAVAILABLE,
                        "backend='cuda' was requested for %s %u, but %s", kind_of(cap->target), cap->name, why);
    }
    cap->backend = GLT_BACKEND_CPU;
    cap->cuda_device = -1;
    snprintf(cap->backend_reason, sizeof cap->backend_reason, "CUDA cannot serve this context, so frames are read "
                                                              "back to host memory: %s",
             glt_last_error());
    return GLT_OK;
}

/* (Re)creates the backend's hold on the image for its current size and format. */
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
    GLuint name = cap->name;
    GLenum target = cap->target;
    if (glt_stage_needed(cap->fmt, cap->target, cap->samples)) {
        int use_compute = glt_depth_use_compute(cap->fmt, cap->backend == GLT_BACKEND_CUDA);
        glt_status st = glt_stage_create(cap->name, cap->target, cap->fmt, cap->width, cap->height, cap->samples,
                                         &cap->region, use_compute, &cap->stage);
        if (st != GLT_OK) return st;
        if (glt_stage_resolved(cap->stage)) {
            name = glt_stage_resolved(cap->stage);
            target = GL_RENDERBUFFER;
        }
    }
    if (cap->fmt->depth)
        return cap->backend == GLT_BACKEND_CUDA
                   ? glt_cuda_buffer_register(glt_stage_depth_buffer(cap->stage), cap->cuda_device, &cap->cuda_depth)
                   : GLT_OK;
    if (cap->backend == GLT_BACKEND_CUDA)
        return glt_cuda_image_register(name, target, cap->cuda_device, cap->fmt, cap->width, cap->height, &cap->cuda);
    return glt_cpu_reader_create(name, target, &cap->cpu);
}

glt_status glt_capture_create(const glt_capture_desc *desc, glt_capture **out) {
    if (!desc || !out) return glt_fail(GLT_INVALID_ARGUMENT, "glt_capture_create: desc and out must not be NULL");
    *out = NULL;
    if (desc->gl_target != GL_TEXTURE_2D && desc->gl_target != GL_TEXTURE_RECTANGLE &&
        desc->gl_target != GL_RENDERBUFFER && desc->gl_target != GL_TEXTURE_2D_MULTISAMPLE)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "target 0x%04X is not capturable; use GL_TEXTURE_2D (0x0DE1), GL_TEXTURE_RECTANGLE (0x84F5), "
                        "GL_TEXTURE_2D_MULTISAMPLE (0x9100) or GL_RENDERBUFFER (0x8D41)",
                        desc->gl_target);
    if (desc->backend != GLT_BACKEND_AUTO && desc->backend != GLT_BACKEND_CUDA && desc->backend != GLT_BACKEND_CPU)
        return glt_fail(GLT_INVALID_ARGUMENT, "unknown backend %d; use auto, cuda or cpu", (int)desc->backend);
    if (glt_env_check() != GLT_OK) return GLT_INVALID_ARGUMENT;
    char what[64];
    snprintf(what, sizeof what, "capture of %s %u", kind_of(desc->gl_target), desc->gl_name);
    glt_gl_context_id now = glt_current_gl_context();
    if (now.api == GLT_API_NONE)
        return glt_check_gl_context(now, what);
    const glt_gl *gl = glt_gl_load();
    if (!gl) return GLT_GL_ERROR;
    image_desc d;
    glt_status st = query_image(gl, desc->gl_name, desc->gl_target, &d);
    if (st != GLT_OK) return st;
    const glt_format *fmt = NULL;
    st = check_format(desc->gl_name, desc->gl_target, &d, &fmt);
    if (st != GLT_OK) return st;
    st = check_requested_region(&desc->region, desc->gl_target, desc->gl_name, d.width, d.height);
    if (st != GLT_OK) return st;

    glt_capture *cap = calloc(1, sizeof *cap);
    if (!cap) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    cap->gl_context = now;
    cap->name = desc->gl_name;
    cap->target = desc->gl_target;
    cap->internal_format = (GLenum)d.internal_format;
    cap->fmt = fmt;
    cap->width = d.width;
    cap->height = d.height;
    cap->samples = d.samples;
    cap->resizable = desc->resizable != 0;
    cap->requested = desc->region;
    update_region(cap);
    st = choose_backend(cap, desc);
    if (st == GLT_OK) {
        cap->pool = glt_pool_create(cap->backend == GLT_BACKEND_CUDA ? GLT_MEMORY_CUDA : GLT_MEMORY_HOST,
                                    cap->cuda_device);
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
    if (cap->backend != GLT_BACKEND_CUDA || (!cap->cuda && !cap->cuda_depth) || !cap->last_stream) return;
    if ((uintptr_t)cap->last_stream <= 2)
        glt_cuda_stream_sync(cap->last_stream, cap->cuda_device);
    else
        glt_cuda_device_sync(cap->cuda_device);
}

void glt_capture_destroy(glt_capture *cap) {
    if (!cap) return;
    if (cap->pool) drain_reads(cap);
    /* Python releases captures whenever their last reference goes, often with another context current or
     * none: enter the capture's own where that can be done (context_switch.c), else leave its GL objects and
     * registrations to the driver, which drops them with the context. */
    glt_gl_context_saved saved;
    detach_backend(cap, glt_gl_context_enter(cap->gl_context, &saved));
    glt_gl_context_leave(&saved);
    glt_pool_release(cap->pool); /* frames still alive keep the pool until they go */
    free(cap->scratch);
    free(cap);
}

glt_status glt_capture_get_info(const glt_capture *cap, glt_capture_info *info) {
    if (!cap || !info) return glt_fail(GLT_INVALID_ARGUMENT, "glt_capture_get_info: NULL argument");
    info->width = cap->region.width;
    info->height = cap->region.height;
    info->region = cap->region;
    info->image_width = cap->width;
    info->image_height = cap->height;
    info->channels = cap->fmt->channels;
    info->dtype = cap->fmt->dtype;
    info->gl_internal_format = cap->internal_format;
    info->format_name = cap->fmt->name;
    info->target_name = glt_target_name(cap->target);
    info->backend = cap->backend;
    info->backend_reason = cap->backend_reason;
    info->cuda_device = cap->cuda_device;
    return GLT_OK;
}

/* Rebuilds the backend's hold for the image as `d` describes it (fmt: its format) and the requested region.
 * A region the image cannot hold leaves the capture detached (no stage or readback made for it) until a
 * later size or region fits; every read until then fails with that message. */
static glt_status reattach(glt_capture *cap, const image_desc *d, const glt_format *fmt) {
    drain_reads(cap);
    detach_backend(cap, 1);
    cap->detached = 1;
    cap->fmt = fmt;
    cap->samples = d->samples;
    cap->internal_format = (GLenum)d->internal_format;
    cap->width = d->width;
    cap->height = d->height;
    update_region(cap);
    glt_pool_trim(cap->pool);
    glt_status st = region_still_fits(cap);
    if (st == GLT_OK) st = attach_backend(cap);
    if (st == GLT_OK) cap->detached = 0;
    return st;
}

/* Checks the context and reads the image's description and format from GL. */
static glt_status query_current(glt_capture *cap, image_desc *d, const glt_format **fmt) {
    char what[64];
    snprintf(what, sizeof what, "capture of %s %u", kind_of(cap->target), cap->name);
    glt_status st = glt_check_gl_context(cap->gl_context, what);
    if (st != GLT_OK) return st;
    const glt_gl *gl = glt_gl_load();
    if (!gl) return GLT_GL_ERROR;
    st = query_image(gl, cap->name, cap->target, d);
    if (st != GLT_OK) return st;
    *fmt = cap->fmt;
    if ((GLenum)d->internal_format == cap->internal_format) return GLT_OK;
    return check_format(cap->name, cap->target, d, fmt);
}

static int same_image(const glt_capture *cap, const image_desc *d) {
    return d->width == cap->width && d->height == cap->height && (GLenum)d->internal_format == cap->internal_format &&
           d->samples == cap->samples;
}

glt_status glt_capture_refresh(glt_capture *cap, int *changed) {
    if (changed) *changed = 0;
    if (!cap) return glt_fail(GLT_CLOSED, "the capture was closed (NULL handle)");
    image_desc d;
    const glt_format *fmt = NULL;
    glt_status st = query_current(cap, &d, &fmt);
    if (st != GLT_OK) return st;
    if (same_image(cap, &d)) {
        st = region_still_fits(cap); /* integer compares: fails only after a resize left the region outside */
        if (st == GLT_OK && cap->detached) st = reattach(cap, &d, fmt); /* an earlier attach failed */
        return st;
    }
    /* The image was reallocated: the old registration points at storage GL no longer uses. */
    if (changed) *changed = 1;
    return reattach(cap, &d, fmt);
}

glt_status glt_capture_set_region(glt_capture *cap, const glt_rect *region) {
    if (!cap) return glt_fail(GLT_CLOSED, "the capture was closed (NULL handle)");
    glt_rect want = {0, 0, 0, 0};
    if (region) want = *region;
    image_desc d;
    const glt_format *fmt = NULL;
    glt_status st = query_current(cap, &d, &fmt);
    if (st != GLT_OK) return st;
    st = check_requested_region(&want, cap->target, cap->name, d.width, d.height);
    if (st != GLT_OK) return st; /* the capture keeps its region */
    cap->requested = want;
    /* Colour images read straight from the registered image: only the copy's rectangle changes. A GL-side
     * stage (resolve, depth pack) is made for one region, and a new size needs a new hold anyway. */
    if (same_image(cap, &d) && !cap->stage && !cap->detached) {
        update_region(cap);
        return GLT_OK;
    }
    st = reattach(cap, &d, fmt);
    glt_capture_finish(cap); /* a resizable capture holds no registration between reads, as after creation */
    return st;
}

size_t glt_capture_row_bytes(const glt_capture *cap) {
    return (size_t)cap->region.width * cap->fmt->channels * glt_dtype_size(cap->fmt->dtype);
}

glt_status glt_capture_prepare(glt_capture *cap, const glt_read_options *opts, void **stream) {
    glt_status st = glt_capture_refresh(cap, NULL);
    if (st != GLT_OK) return st;
    void *s = opts ? opts->cuda_stream : NULL;
    if (s && cap->backend != GLT_BACKEND_CUDA)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "a CUDA stream was given to a capture on the CPU backend (%s); drop stream=, or use the CUDA "
                        "backend",
                        cap->backend_reason);
    if (s) {
        st = glt_cuda_check_stream(s, cap->cuda_device);
        if (st != GLT_OK) return st;
    }
    *stream = cap->backend == GLT_BACKEND_CUDA ? (s ? s : glt_pool_stream(cap->pool)) : NULL;
    cap->last_stream = *stream;
    if (cap->backend == GLT_BACKEND_CUDA && !cap->fmt->depth && !cap->cuda) {
        /* A resizable capture registers for the duration of this read only. */
        GLuint name = cap->stage && glt_stage_resolved(cap->stage) ? glt_stage_resolved(cap->stage) : cap->name;
        GLenum target = name == cap->name ? cap->target : GL_RENDERBUFFER;
        st = glt_cuda_image_register(name, target, cap->cuda_device, cap->fmt, cap->width, cap->height, &cap->cuda);
        if (st != GLT_OK) return st;
    }
    return cap->stage ? glt_stage_run(cap->stage) : GLT_OK;
}

void glt_capture_finish(glt_capture *cap) {
    if (!cap->resizable || cap->backend != GLT_BACKEND_CUDA || !cap->cuda) return;
    /* The copy reads the image through a texture object: let it finish before the registration goes. */
    if (cap->last_stream) glt_cuda_stream_sync(cap->last_stream, cap->cuda_device);
    glt_cuda_image_unregister(cap->cuda);
    cap->cuda = NULL;
}

glt_status glt_capture_read_scratch(glt_capture *cap) {
    size_t row = glt_capture_row_bytes(cap), need = row * (size_t)cap->region.height;
    if (cap->scratch_size < need) {
        unsigned char *p = realloc(cap->scratch, need);
        if (!p) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory for a %zu-byte readback", need);
        cap->scratch = p;
        cap->scratch_size = need;
    }
    return glt_cpu_reader_read(cap->cpu, cap->fmt, cap->width, cap->height, &cap->region, cap->scratch, row, 0);
}

glt_status glt_capture_copy(glt_capture *cap, const glt_out_spec *spec, int flip, void *dst, size_t pitch,
                            size_t plane, void *stream, void *ready_event) {
    const glt_rect *rg = &cap->region;
    if (cap->fmt->depth) /* one channel: HWC and CHW rows are the same; the stage packed the region alone */
        return cap->backend == GLT_BACKEND_CUDA
                   ? glt_cuda_depth_copy(cap->cuda_depth, rg->width, rg->height, spec, flip, dst, pitch, stream,
                                         ready_event)
                   : glt_stage_read_depth_host(cap->stage, flip, spec->depth_mode, spec->near_plane, spec->far_plane,
                                               dst, pitch);
    if (cap->backend == GLT_BACKEND_CUDA) {
        /* The copy starts at the region's origin in the mapped array: no pixel outside it is read. */
        glt_cuda_region r = {cap->cuda, spec, rg->x, rg->y, rg->width, rg->height, dst, pitch, plane};
        glt_status st = glt_cuda_copy_regions(&cap->cuda, 1, &r, 1, flip, stream, &ready_event, 1);
        glt_capture_finish(cap);
        return st;
    }
    if (spec->raw) return glt_cpu_reader_read(cap->cpu, cap->fmt, cap->width, cap->height, rg, dst, pitch, flip);
    glt_status st = glt_capture_read_scratch(cap);
    if (st != GLT_OK) return st;
    ptrdiff_t row = (ptrdiff_t)glt_capture_row_bytes(cap);
    const unsigned char *first = flip ? cap->scratch + (rg->height - 1) * row : cap->scratch;
    glt_convert_host(cap->fmt, spec, first, flip ? -row : row, rg->width, rg->height, dst, pitch, plane);
    return GLT_OK;
}

static void describe(const glt_capture *cap, char *what, size_t n) {
    snprintf(what, n, "%s %u (%s)", kind_of(cap->target), cap->name, cap->fmt->name);
}

/* A read into a new frame (view NULL, *out set) or into the caller's view. */
static glt_status read_to(glt_capture *cap, const glt_read_options *opts_in, const glt_buffer_view *view,
                          glt_frame **out) {
    glt_read_options opts = glt_read_options_or_default(opts_in);
    void *stream = NULL;
    glt_status st = glt_capture_prepare(cap, &opts, &stream);
    if (st != GLT_OK) return st;
    char what[96];
    describe(cap, what, sizeof what);
    glt_dest_shape shape = {cap->backend == GLT_BACKEND_CUDA ? GLT_MEMORY_CUDA : GLT_MEMORY_HOST, cap->cuda_device,
                            NULL, 0, cap->region.height, cap->region.width};
    glt_read_dest d;
    st = glt_read_dest_open(cap->fmt, &opts, what, cap->pool, stream, &shape, view, &d);
    if (st != GLT_OK) return st;
    st = glt_capture_copy(cap, &d.spec, opts.flip, d.data, d.strides.pitch, d.strides.plane, stream, d.ready_event);
    return glt_read_dest_close(&d, st, out);
}

glt_status glt_capture_read(glt_capture *cap, const glt_read_options *opts_in, glt_frame **out) {
    if (!out) return glt_fail(GLT_INVALID_ARGUMENT, "glt_capture_read: out is NULL");
    *out = NULL;
    return read_to(cap, opts_in, NULL, out);
}

glt_status glt_capture_read_into(glt_capture *cap, const glt_read_options *opts_in, const glt_buffer_view *dst) {
    /* dst NULL would mean "a new frame" to read_to, which nobody would receive: refuse it. */
    if (!dst) return glt_fail(GLT_INVALID_ARGUMENT, "glt_capture_read_into: dst is NULL; pass a glt_buffer_view, or "
                                                    "call glt_capture_read for a new frame");
    return read_to(cap, opts_in, dst, NULL);
}

/* For objects that read an image once per use without keeping a capture (slot_writer.c): its size, format
 * and sample count, refused as a capture would refuse it. */
glt_status glt_gl_image_query(const glt_gl *gl, GLuint name, GLenum target, int *width, int *height,
                              const glt_format **fmt, int *samples) {
    image_desc d;
    glt_status st = query_image(gl, name, target, &d);
    if (st == GLT_OK) st = check_format(name, target, &d, fmt);
    if (st != GLT_OK) return st;
    *width = d.width;
    *height = d.height;
    *samples = d.samples;
    return GLT_OK;
}

glt_status glt_gl_region_check(const glt_rect *r, GLenum target, GLuint name, int width, int height) {
    return check_requested_region(r, target, name, width, height);
}
