/*
 * Uploads: tensors written into a GL texture, the reverse of a capture. The texture is registered
 * once (CUDA: for surface writes); each write checks the texture's size and format in GL (a few
 * queries, so that a reallocated texture is re-registered rather than written as stale storage),
 * validates the source against the region, and writes it in one pass with every conversion
 * (flip, CHW, channels, dtype) done in that pass:
 *   CUDA backend: map (write-discard when the whole image is written), one kernel through a surface
 *                 object, unmap, all on the caller's stream; GL work issued later sees the new texels.
 *   CPU backend:  the same per-element arithmetic (write_convert.h) into a host staging buffer in the
 *                 stored layout, then glTexSubImage2D.
 */
#include "objects/objects.h"
#include "cuda/cuda_api.h"
#include "convert/write_convert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct glt_upload {
    glt_object_base base; /* first: context, name, target, backend, device, format and size */
    glt_cuda_surface *cuda;
    unsigned char *staging; /* CPU backend: the region in the stored layout */
    size_t staging_size;
};

void glt_upload_desc_init(glt_upload_desc *d) {
    memset(d, 0, sizeof *d);
    d->size = sizeof *d;
    d->gl_target = GLT_TEXTURE_2D;
    d->backend = GLT_BACKEND_AUTO;
    d->cuda_device = -1;
}

void glt_write_options_init(glt_write_options *o) {
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    o->flip = 1;
    o->layout = GLT_LAYOUT_HWC;
}

static void describe(const glt_upload *up, char *what, size_t n) {
    const glt_object_base *o = &up->base;
    snprintf(what, n, "texture %u (%s, %dx%d)", o->name, o->fmt ? o->fmt->name : "?", o->width, o->height);
}

static glt_status attach(glt_upload *up) {
    const glt_object_base *o = &up->base;
    if (o->backend != GLT_BACKEND_CUDA) return GLT_OK;
    return glt_cuda_surface_register(o->name, o->target, o->cuda_device, o->fmt, o->width, o->height, &up->cuda);
}

/* Brings size and format up to date from GL; re-registers a texture that was reallocated. */
static glt_status refresh(glt_upload *up) {
    glt_object_state now;
    glt_status st = glt_object_query(&up->base, &now);
    if (st != GLT_OK) return st;
    if (glt_object_same(&up->base, &now)) return GLT_OK;
    glt_cuda_surface_unregister(up->cuda);
    up->cuda = NULL;
    glt_object_adopt(&up->base, &now);
    return attach(up);
}

glt_status glt_upload_create(const glt_upload_desc *desc, glt_upload **out) {
    if (!desc || !out) return glt_fail(GLT_INVALID_ARGUMENT, "glt_upload_create: desc and out must not be NULL");
    *out = NULL;
    GLT_CHECK_STRUCT_SIZE(desc, glt_upload_desc);
    if (desc->gl_target != GL_TEXTURE_2D && desc->gl_target != GL_TEXTURE_RECTANGLE)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "target 0x%04X cannot be written; use GL_TEXTURE_2D (0x0DE1) or GL_TEXTURE_RECTANGLE "
                        "(0x84F5) (to fill a renderbuffer, write a texture and blit it)",
                        desc->gl_target);
    glt_upload *up = calloc(1, sizeof *up);
    if (!up) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    /* The texture must be writable before a backend is chosen: a bad name fails as such. */
    glt_object_state now;
    glt_status st = glt_object_open(&up->base, GLT_OBJECT_UPLOAD, desc->gl_name, desc->gl_target, &now);
    if (st == GLT_OK) st = glt_object_choose_backend(&up->base, desc->backend, desc->cuda_device);
    if (st == GLT_OK) st = attach(up);
    if (st != GLT_OK) {
        glt_upload_destroy(up);
        return st;
    }
    glt_clear_error();
    *out = up;
    return GLT_OK;
}

void glt_upload_destroy(glt_upload *up) {
    if (!up) return;
    if (up->cuda) {
        /* The registration goes in the texture's own context; where that cannot be entered it is left to
         * the driver (dropped with the context) instead of a call that fails. */
        glt_gl_context_saved saved;
        if (glt_gl_context_enter(up->base.gl_context, &saved)) glt_cuda_surface_unregister(up->cuda);
        else glt_cuda_surface_forget(up->cuda);
        glt_gl_context_leave(&saved);
    }
    free(up->staging);
    free(up);
}

glt_status glt_upload_get_info(const glt_upload *up, glt_upload_info *info) {
    if (!up || !info) return glt_fail(GLT_INVALID_ARGUMENT, "glt_upload_get_info: NULL argument");
    const glt_object_base *o = &up->base;
    info->size = sizeof *info;
    info->width = o->width;
    info->height = o->height;
    info->channels = o->fmt->channels;
    info->dtype = o->fmt->dtype;
    info->gl_internal_format = o->internal_format;
    info->format_name = o->fmt->name;
    info->backend = o->backend;
    info->backend_reason = o->backend_reason;
    info->cuda_device = o->cuda_device;
    return GLT_OK;
}

static int src_type_of(glt_dtype d) {
    switch (d) {
    case GLT_DTYPE_UINT8: return GLT_SRC_UINT8;
    case GLT_DTYPE_UINT16: return GLT_SRC_UINT16;
    case GLT_DTYPE_UINT32: return GLT_SRC_UINT32;
    case GLT_DTYPE_FLOAT16: return GLT_SRC_FLOAT16;
    case GLT_DTYPE_FLOAT32: return GLT_SRC_FLOAT32;
    default: return -1;
    }
}

/* Bits of "one" in a stored channel: the fill of a missing alpha. */
static unsigned int one_bits(int dst_type) {
    switch (dst_type) {
    case GLT_DST_UNORM8: return 255u;
    case GLT_DST_UNORM16: return 65535u;
    case GLT_DST_FLOAT16: return 0x3C00u;
    case GLT_DST_FLOAT32: return 0x3F800000u;
    default: return 1u; /* integer textures: GL's own default alpha */
    }
}

/* How source element type src meets the stored type dst: GLT_WRITE_*, or -1 when it cannot. */
static int write_mode(glt_dtype src, int dst) {
    int integer_dst = dst == GLT_DST_UINT8 || dst == GLT_DST_UINT16 || dst == GLT_DST_UINT32;
    int integer_src = src == GLT_DTYPE_UINT8 || src == GLT_DTYPE_UINT16 || src == GLT_DTYPE_UINT32;
    if ((src == GLT_DTYPE_UINT8 && (dst == GLT_DST_UNORM8 || dst == GLT_DST_UINT8)) ||
        (src == GLT_DTYPE_UINT16 && (dst == GLT_DST_UNORM16 || dst == GLT_DST_UINT16)) ||
        (src == GLT_DTYPE_UINT32 && dst == GLT_DST_UINT32) || (src == GLT_DTYPE_FLOAT16 && dst == GLT_DST_FLOAT16) ||
        (src == GLT_DTYPE_FLOAT32 && dst == GLT_DST_FLOAT32))
        return GLT_WRITE_COPY;
    if (integer_dst) return integer_src ? GLT_WRITE_INT : -1;
    if (src == GLT_DTYPE_UINT32) return -1; /* no unorm32 textures: 32-bit integers go into R32UI & co */
    return GLT_WRITE_FLOAT;
}

const char *glt_upload_accepted_dtypes(const glt_upload *up) {
    int dst = up && up->base.fmt ? glt_write_dst_type(up->base.fmt) : -1;
    if (dst == GLT_DST_UINT8 || dst == GLT_DST_UINT16 || dst == GLT_DST_UINT32)
        return "integer textures take unsigned integer tensors (uint8, uint16 or uint32)";
    return "colour textures take uint8, uint16 (16-bit unorm), float16 or float32 tensors";
}

/* Resolves opts and the source view against the texture into the write's spec (the array layout
 * fields are the stored layout; the CUDA backend replaces them with the mapped array's). */
static glt_status make_spec(const glt_upload *up, const glt_write_options *o, const glt_buffer_view *src,
                            glt_scatter_spec *s, int *whole) {
    static const char names[] = "RGBA";
    char what[96];
    describe(up, what, sizeof what);
    memset(s, 0, sizeof *s);
    int x = o->region.x, y = o->region.y, w = o->region.width, h = o->region.height;
    if (w == 0 && h == 0) {
        if (x != 0 || y != 0)
            return glt_fail(GLT_INVALID_ARGUMENT,
                            "a region origin (%d, %d) was given without its size; pass width and height too", x, y);
        w = up->base.width;
        h = up->base.height;
    }
    if (w <= 0 || h <= 0 || x < 0 || y < 0 || x > up->base.width - w || y > up->base.height - h)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "region (x=%d, y=%d, width=%d, height=%d) does not fit %s; the region must lie inside "
                        "(0, 0)-(%d, %d) with (x, y) its lower-left corner",
                        x, y, w, h, what, up->base.width, up->base.height);
    *whole = x == 0 && y == 0 && w == up->base.width && h == up->base.height;
    if (o->layout != GLT_LAYOUT_HWC && o->layout != GLT_LAYOUT_CHW)
        return glt_fail(GLT_INVALID_ARGUMENT, "unknown source axis order %d; use HWC or CHW", (int)o->layout);
    int chw = o->layout == GLT_LAYOUT_CHW;
    if (src->ndim != 3)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "the source has %d dimensions; it must be (height, width, channels)%s", src->ndim,
                        chw ? " or, with layout='chw', (channels, height, width)" : " (or CHW with layout='chw')");
    int64_t sh = src->shape[chw ? 1 : 0], sw = src->shape[chw ? 2 : 1], sc = src->shape[chw ? 0 : 2];
    if (sh != h || sw != w)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "the source is %lld x %lld (height x width) but the %s is %d x %d of %s; pass a tensor of the "
                        "region's size, or a region (x, y, width, height) of the tensor's size",
                        (long long)sh, (long long)sw, *whole ? "whole texture" : "region", h, w, what);
    if (sc < 1 || sc > 4)
        return glt_fail(GLT_INVALID_ARGUMENT, "the source has %lld channels; give 1 to 4 (%s axis %d)", (long long)sc,
                        chw ? "CHW" : "HWC", chw ? 0 : 2);
    int dst = glt_write_dst_type(up->base.fmt);
    int src_type = src_type_of(src->dtype);
    int mode = src_type < 0 ? -1 : write_mode(src->dtype, dst);
    if (mode < 0)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "a %s source cannot be written into %s: %s", glt_dtype_name(src->dtype), what,
                        glt_upload_accepted_dtypes(up));
    int stored = up->base.fmt->channels;
    for (int c = 0; c < 4; ++c) s->map[c] = -1;
    if (o->n_channels == 0) {
        if (sc > stored)
            return glt_fail(GLT_INVALID_ARGUMENT,
                            "the source has %lld channels but %s stores %d (%.*s); drop the extra channels (e.g. "
                            "x[..., :%d]) or name where each goes with channels=",
                            (long long)sc, what, stored, stored, names, stored);
        for (int c = 0; c < sc; ++c) s->map[c] = c;
    } else {
        if (o->n_channels != sc)
            return glt_fail(GLT_INVALID_ARGUMENT,
                            "channels= names %d channel(s) but the source has %lld; name one texture channel per "
                            "source channel (e.g. 'bgr' for a BGR tensor)",
                            o->n_channels, (long long)sc);
        for (int i = 0; i < o->n_channels; ++i) {
            int c = o->channels[i];
            if (c < 0 || c >= stored || s->map[c] >= 0)
                return glt_fail(GLT_INVALID_ARGUMENT,
                                "channels= sends source channel %d to texture channel %d, but %s stores %d channel(s) "
                                "(%.*s) and each may be named once",
                                i, c, what, stored, stored, names);
            s->map[c] = i;
        }
    }
    for (int c = 0; c < 4; ++c) s->fill[c] = c == 3 ? one_bits(dst) : 0u;
    size_t es = glt_dtype_size(src->dtype);
    for (int i = 0; i < 3; ++i)
        if (src->strides_bytes[i] % (int64_t)es != 0)
            return glt_fail(GLT_INVALID_ARGUMENT, "the source's strides are not whole elements; pass a contiguous "
                                                  "tensor (x.contiguous())");
    s->src = src->data;
    s->row_stride = src->strides_bytes[chw ? 1 : 0];
    s->px_stride = src->strides_bytes[chw ? 2 : 1];
    s->ch_stride = src->strides_bytes[chw ? 0 : 2];
    s->src_type = src_type;
    s->dst_type = dst;
    s->mode = mode;
    s->array_channels = stored;
    s->elem_bytes = (int)glt_dtype_size(up->base.fmt->dtype);
    s->x0 = x;
    s->y0 = y;
    s->width = w;
    s->height = h;
    s->flip = o->flip != 0;
    return GLT_OK;
}

/* CPU backend: the region in the stored layout, bottom row first, then glTexSubImage2D. */
static glt_status write_host(glt_upload *up, const glt_scatter_spec *s) {
    size_t es = (size_t)s->elem_bytes, px = es * (size_t)s->array_channels;
    size_t need = px * (size_t)s->width * (size_t)s->height;
    if (up->staging_size < need) {
        unsigned char *p = realloc(up->staging, need);
        if (!p) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory for a %zu-byte texture write", need);
        up->staging = p;
        up->staging_size = need;
    }
    /* Stored-type pixels laid out as stored (HWC, every channel, in order): rows are copied whole. */
    int rows_as_stored = s->mode == GLT_WRITE_COPY && s->px_stride == (long long)px && s->ch_stride == (long long)es;
    for (int c = 0; c < s->array_channels && rows_as_stored; ++c) rows_as_stored = s->map[c] == c;
    for (int row = 0; row < s->height; ++row) {
        int src_row = s->flip ? s->height - 1 - row : row;
        const unsigned char *in = (const unsigned char *)s->src + (long long)src_row * s->row_stride;
        unsigned char *out = up->staging + (size_t)row * s->width * px;
        if (rows_as_stored) {
            memcpy(out, in, (size_t)s->width * px);
            continue;
        }
        for (int x = 0; x < s->width; ++x, in += s->px_stride, out += px)
            for (int c = 0; c < s->array_channels; ++c) {
                unsigned int bits = glt_wc_element(s, in, c);
                if (es == 1) out[c] = (unsigned char)bits;
                else if (es == 2) ((uint16_t *)out)[c] = (uint16_t)bits;
                else ((uint32_t *)out)[c] = bits;
            }
    }
    const glt_gl *gl = glt_gl_load();
    if (!gl) return GLT_GL_ERROR;
    const glt_object_base *o = &up->base;
    return glt_gl_texture_write(gl, o->name, o->target, s->x0, s->y0, s->width, s->height, o->fmt->read_format,
                                o->fmt->read_type, up->staging);
}

glt_status glt_upload_write(glt_upload *up, const glt_write_options *opts_in, const glt_buffer_view *src) {
    if (!up) return glt_fail(GLT_CLOSED, "the upload was closed (NULL handle)");
    if (!src) return glt_fail(GLT_INVALID_ARGUMENT, "glt_upload_write: src is NULL; pass a glt_buffer_view of the source");
    if (!src->data)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "the source tensor's data pointer is NULL (an empty tensor, or an interface that gives no "
                        "memory); pass a tensor of the region's size (height x width x channels) with its memory");
    glt_write_options opts; GLT_OPTIONS_IN(write, opts_in, &opts, "glt_upload_write");
    glt_status st = refresh(up);
    if (st != GLT_OK) return st;
    char what[96];
    describe(up, what, sizeof what);
    glt_scatter_spec spec;
    int whole = 0;
    st = make_spec(up, &opts, src, &spec, &whole);
    if (st != GLT_OK) return st;
    if (up->base.backend == GLT_BACKEND_CPU) {
        if (src->memory != GLT_MEMORY_HOST)
            return glt_fail(GLT_WRONG_DEVICE,
                            "the source is in CUDA memory but %s is written on the CPU backend (%s); pass a host "
                            "tensor (x.cpu()), or run GL on the CUDA device",
                            what, up->base.backend_reason);
        if (opts.cuda_stream)
            return glt_fail(GLT_INVALID_ARGUMENT,
                            "a CUDA stream was given to an upload on the CPU backend (%s); drop stream=",
                            up->base.backend_reason);
        return write_host(up, &spec);
    }
    if (src->memory != GLT_MEMORY_CUDA)
        return glt_fail(GLT_WRONG_DEVICE,
                        "the source is in host memory but %s is written on CUDA device %d; pass a CUDA tensor "
                        "(x.cuda()) or create the upload with backend='cpu'",
                        what, up->base.cuda_device);
    if (src->cuda_device >= 0 && src->cuda_device != up->base.cuda_device)
        return glt_fail(GLT_WRONG_DEVICE,
                        "the source lives on CUDA device %d but %s belongs to a GL context on device %d; move the "
                        "tensor there (x.to('cuda:%d'))",
                        src->cuda_device, what, up->base.cuda_device, up->base.cuda_device);
    st = glt_cuda_check_source(src->data, up->base.cuda_device, what);
    if (st != GLT_OK) return st;
    if (opts.cuda_stream) {
        st = glt_cuda_check_stream(opts.cuda_stream, up->base.cuda_device);
        if (st != GLT_OK) return st;
    }
    return glt_cuda_surface_write(up->cuda, &spec, whole, opts.cuda_stream);
}
