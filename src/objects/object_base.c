/*
 * The prelude every object over one GL object shares (captures, uploads, buffers; the shared-slot writer
 * uses its image query and region check per write): the context the object belongs to, what GL says of the
 * object (size, internal format, samples; a buffer's size), the format that object kind accepts (each kind
 * with its own refusal), and the one backend chooser (backend_choice.c). Objects embed glt_object_base as
 * their first member and keep their own state after it.
 */
#include "objects/objects.h"
#include "device/device.h"
#include "convert/convert.h"

#include <stdio.h>
#include <string.h>

static const char *kind_of(GLenum target) { return target == GL_RENDERBUFFER ? "renderbuffer" : "texture"; }

const char *glt_object_kind_name(const glt_object_base *o) {
    return o->kind == GLT_OBJECT_BUFFER ? "buffer" : kind_of(o->target);
}

/* The object as context errors name it. */
static void describe(const glt_object_base *o, char *what, size_t n) {
    if (o->kind == GLT_OBJECT_CAPTURE) snprintf(what, n, "capture of %s %u", kind_of(o->target), o->name);
    else if (o->kind == GLT_OBJECT_UPLOAD) snprintf(what, n, "upload into texture %u", o->name);
    else snprintf(what, n, "buffer %u", o->name);
}

/* Reads size, format and sample count of the image from GL, restoring the binding it touches. */
static glt_status query_image(const glt_gl *gl, GLuint name, GLenum target, glt_object_state *d) {
    GLint width = 0, height = 0, internal_format = 0, samples = 0;
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
        gl->GetRenderbufferParameteriv(GL_RENDERBUFFER, GL_RENDERBUFFER_WIDTH, &width);
        gl->GetRenderbufferParameteriv(GL_RENDERBUFFER, GL_RENDERBUFFER_HEIGHT, &height);
        gl->GetRenderbufferParameteriv(GL_RENDERBUFFER, GL_RENDERBUFFER_INTERNAL_FORMAT, &internal_format);
        gl->GetRenderbufferParameteriv(GL_RENDERBUFFER, GL_RENDERBUFFER_SAMPLES, &samples);
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
        gl->GetTexLevelParameteriv(target, 0, GL_TEXTURE_WIDTH, &width);
        gl->GetTexLevelParameteriv(target, 0, GL_TEXTURE_HEIGHT, &height);
        gl->GetTexLevelParameteriv(target, 0, GL_TEXTURE_INTERNAL_FORMAT, &internal_format);
        gl->GetTexLevelParameteriv(target, 0, GL_TEXTURE_SAMPLES, &samples);
        gl->BindTexture(target, (GLuint)prev);
    }
    GLenum err = gl->GetError();
    if (err != GL_NO_ERROR)
        return glt_fail(GLT_GL_ERROR,
                        "querying %s %u's size and format failed with %s; check that the name is a live %s of this "
                        "context and that its target is right",
                        kind_of(target), name, glt_gl_error_name(err), kind_of(target));
    if (width <= 0 || height <= 0)
        return glt_fail(GLT_INVALID_OBJECT,
                        "%s %u has no storage yet (%dx%d); allocate it (glTexImage2D, glTexStorage2D or "
                        "glRenderbufferStorage) and render into it before capturing",
                        kind_of(target), name, width, height);
    d->width = width;
    d->height = height;
    d->internal_format = (GLenum)internal_format;
    d->samples = samples;
    return GLT_OK;
}

int glt_write_dst_type(const glt_format *fmt) {
    if (fmt->depth) return -1;
    int kind = glt_format_kind(fmt);
    switch (fmt->dtype) {
    case GLT_DTYPE_UINT8: return kind == GLT_KIND_UINT ? GLT_DST_UINT8 : GLT_DST_UNORM8;
    case GLT_DTYPE_UINT16: return kind == GLT_KIND_UINT ? GLT_DST_UINT16 : GLT_DST_UNORM16;
    case GLT_DTYPE_UINT32: return kind == GLT_KIND_UINT ? GLT_DST_UINT32 : -1;
    case GLT_DTYPE_FLOAT16: return GLT_DST_FLOAT16;
    case GLT_DTYPE_FLOAT32: return GLT_DST_FLOAT32;
    default: return -1;
    }
}

/* The format the object's kind can use for internal_format, or the refusal that says why not and what to do. */
static glt_status check_format(glt_object_kind kind, GLuint name, GLenum target, GLenum internal_format,
                               const glt_format **out) {
    const glt_format *f = glt_format_find(internal_format);
    if (kind == GLT_OBJECT_CAPTURE && !f)
        return glt_fail(GLT_UNSUPPORTED_FORMAT, "%s %u is %s, which cannot be captured: %s", kind_of(target), name,
                        glt_format_name(internal_format), glt_format_refusal_hint(internal_format));
    if (kind == GLT_OBJECT_UPLOAD && (!f || glt_write_dst_type(f) < 0))
        return glt_fail(GLT_UNSUPPORTED_FORMAT,
                        "texture %u is %s, which gltensor cannot write; writable formats are the colour formats "
                        "capture reads (GL_RGBA8, GL_RGB8, GL_SRGB8_ALPHA8, GL_R8, GL_RG8, GL_R16, GL_RG16, "
                        "GL_RGBA16, GL_R16F, GL_RG16F, GL_RGBA16F, GL_R32F, GL_RG32F, GL_RGBA32F and R8UI..RGBA32UI); "
                        "depth textures cannot be written through CUDA: allocate the texture in one of those",
                        name, glt_format_name(internal_format));
    *out = f;
    return GLT_OK;
}

/* What GL says of the object now, its format looked up again only when the internal format changed. */
static glt_status query(const glt_object_base *o, const glt_gl *gl, glt_object_state *now) {
    memset(now, 0, sizeof *now);
    glt_status st;
    if (o->kind == GLT_OBJECT_BUFFER) return glt_gl_buffer_size(gl, o->name, &now->size, &now->gl_mapped);
    if (o->kind == GLT_OBJECT_CAPTURE) {
        st = query_image(gl, o->name, o->target, now);
    } else {
        int w = 0, h = 0;
        st = glt_gl_texture_query(gl, o->name, o->target, &w, &h, &now->internal_format);
        now->width = w;
        now->height = h;
    }
    if (st != GLT_OK) return st;
    if (o->fmt && now->internal_format == o->internal_format) {
        now->fmt = o->fmt;
        return GLT_OK;
    }
    return check_format(o->kind, o->name, o->target, now->internal_format, &now->fmt);
}

glt_status glt_object_open(glt_object_base *o, glt_object_kind kind, GLuint name, GLenum target,
                           glt_object_state *now) {
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->name = name;
    o->target = target;
    o->backend = GLT_BACKEND_CPU;
    o->cuda_device = -1;
    if (glt_env_check() != GLT_OK) return GLT_INVALID_ARGUMENT;
    o->gl_context = glt_current_gl_context();
    if (o->gl_context.api == GLT_API_NONE) {
        char what[64];
        describe(o, what, sizeof what);
        return glt_check_gl_context(o->gl_context, what);
    }
    const glt_gl *gl = glt_gl_load();
    if (!gl) return GLT_GL_ERROR;
    glt_status st = query(o, gl, now);
    if (st == GLT_OK) glt_object_adopt(o, now);
    return st;
}

glt_status glt_object_query(const glt_object_base *o, glt_object_state *now) {
    char what[64];
    describe(o, what, sizeof what);
    glt_status st = glt_check_gl_context(o->gl_context, what);
    if (st != GLT_OK) return st;
    const glt_gl *gl = glt_gl_load();
    if (!gl) return GLT_GL_ERROR;
    return query(o, gl, now);
}

void glt_object_adopt(glt_object_base *o, const glt_object_state *now) {
    o->width = now->width;
    o->height = now->height;
    o->samples = now->samples;
    o->internal_format = now->internal_format;
    o->fmt = now->fmt;
}

int glt_object_same(const glt_object_base *o, const glt_object_state *now) {
    return now->width == o->width && now->height == o->height && now->internal_format == o->internal_format &&
           now->samples == o->samples;
}

glt_status glt_object_choose_backend(glt_object_base *o, glt_backend requested, int requested_device) {
    char what[64];
    if (o->kind == GLT_OBJECT_CAPTURE) snprintf(what, sizeof what, "%s %u", kind_of(o->target), o->name);
    else describe(o, what, sizeof what);
    return glt_choose_backend(requested, requested_device, what, o->kind == GLT_OBJECT_CAPTURE, &o->backend,
                              &o->cuda_device, o->backend_reason, sizeof o->backend_reason);
}

/* For objects that read an image once per use without keeping a capture (slot_writer.c): its size, format
 * and sample count, refused as a capture would refuse it. */
glt_status glt_gl_image_query(const glt_gl *gl, GLuint name, GLenum target, int *width, int *height,
                              const glt_format **fmt, int *samples) {
    glt_object_state d;
    glt_status st = query_image(gl, name, target, &d);
    if (st == GLT_OK) st = check_format(GLT_OBJECT_CAPTURE, name, target, d.internal_format, fmt);
    if (st != GLT_OK) return st;
    *width = d.width;
    *height = d.height;
    *samples = d.samples;
    return GLT_OK;
}

static int region_given(const glt_rect *r) { return r->width != 0 || r->height != 0; }

const char *glt_region_misfit(const glt_rect *r, int width, int height, char *why, size_t n) {
    if (r->x + (long long)r->width > width)
        snprintf(why, n, "x + width = %lld is more than the image width %d", r->x + (long long)r->width, width);
    else if (r->y + (long long)r->height > height)
        snprintf(why, n, "y + height = %lld is more than the image height %d", r->y + (long long)r->height, height);
    else
        return NULL;
    return why;
}

/* A requested region must be a non-empty rectangle inside the image; all zeros asks for the whole image. */
glt_status glt_gl_region_check(const glt_rect *r, GLenum target, GLuint name, int width, int height) {
    if (!region_given(r) && r->x == 0 && r->y == 0) return GLT_OK;
    if (r->x < 0 || r->y < 0 || r->width <= 0 || r->height <= 0)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "region (x=%d, y=%d, width=%d, height=%d) of %s %u is not a rectangle of the image: x and y "
                        "must be >= 0 and width and height > 0 (width = height = 0, with x = y = 0, reads the whole "
                        "image)",
                        r->x, r->y, r->width, r->height, kind_of(target), name);
    char why[128];
    if (glt_region_misfit(r, width, height, why, sizeof why))
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "region (x=%d, y=%d, width=%d, height=%d) does not fit %s %u, which is %dx%d: %s; pass a "
                        "region inside the image (GL window coordinates: x, y of its lower-left pixel, row 0 at the "
                        "bottom)",
                        r->x, r->y, r->width, r->height, kind_of(target), name, width, height, why);
    return GLT_OK;
}
