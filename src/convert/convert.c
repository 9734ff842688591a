/*
 * Conversions requested in read options (channels, dtype, CHW order): how they
 * resolve against a source format, and the CPU backend's implementation, which
 * follows the CUDA kernel's arithmetic exactly (IEEE float division for
 * normalisation, round-half-to-even to uint8, round-to-nearest-even to float16
 * and bfloat16) so both backends give identical results.
 */
#include "convert/convert.h"

#include <math.h>
#include <string.h>

int glt_format_kind(const glt_format *fmt) {
    if (fmt->dtype == GLT_DTYPE_FLOAT16 || fmt->dtype == GLT_DTYPE_FLOAT32) return GLT_KIND_FLOAT;
    if (fmt->read_format == GL_RED_INTEGER || fmt->read_format == GL_RG_INTEGER ||
        fmt->read_format == GL_RGB_INTEGER || fmt->read_format == GL_RGBA_INTEGER)
        return GLT_KIND_UINT;
    return GLT_KIND_UNORM;
}

static int out_type_of(glt_dtype d) {
    switch (d) {
    case GLT_DTYPE_UINT8: return GLT_OUT_UINT8;
    case GLT_DTYPE_FLOAT16: return GLT_OUT_FLOAT16;
    case GLT_DTYPE_BFLOAT16: return GLT_OUT_BFLOAT16;
    case GLT_DTYPE_FLOAT32: return GLT_OUT_FLOAT32;
    default: return -1;
    }
}

glt_status glt_out_spec_make(const glt_format *fmt, const glt_read_options *o, const char *what, glt_out_spec *s) {
    static const char names[] = "RGBA";
    memset(s, 0, sizeof *s);
    s->kind = glt_format_kind(fmt);
    if (o->n_channels < 0 || o->n_channels > 4)
        return glt_fail(GLT_INVALID_ARGUMENT, "%d output channels asked for %s; ask for 1 to 4", o->n_channels, what);
    s->channels = o->n_channels ? o->n_channels : fmt->channels;
    int identity = 1;
    for (int i = 0; i < s->channels; ++i) {
        s->map[i] = o->n_channels ? o->channels[i] : i;
        if (s->map[i] < 0 || s->map[i] >= fmt->channels)
            return glt_fail(GLT_INVALID_ARGUMENT,
                            "output channel %d asks for source channel %d (%c), but %s has %d channel(s) (%.*s); pick "
                            "channels among those",
                            i, s->map[i], (s->map[i] >= 0 && s->map[i] < 4) ? names[s->map[i]] : '?', what,
                            fmt->channels, fmt->channels, names);
        identity &= s->map[i] == i;
    }
    s->dtype = fmt->dtype;
    s->out_type = GLT_OUT_SAME;
    if (o->convert_dtype) {
        int t = out_type_of(o->dtype);
        if (t < 0)
            return glt_fail(GLT_INVALID_ARGUMENT,
                            "dtype %s is not a conversion target; convert to uint8, float16, bfloat16 or float32, or "
                            "leave dtype unset for the stored %s",
                            glt_dtype_name(o->dtype), glt_dtype_name(fmt->dtype));
        if (o->dtype != fmt->dtype) {
            s->dtype = o->dtype;
            s->out_type = t;
        }
    }
    if (fmt->depth) {
        if (s->channels != 1)
            return glt_fail(GLT_INVALID_ARGUMENT, "%s is depth, one channel; drop channels= (or pass 'r' / (0,))", what);
        if (s->out_type != GLT_OUT_SAME)
            return glt_fail(GLT_INVALID_ARGUMENT, "%s is depth, read as float32; drop dtype= (or pass float32)", what);
        if (o->depth != GLT_DEPTH_WINDOW && (!(o->near_plane < o->far_plane) ||
                                             (o->depth == GLT_DEPTH_LINEAR_PERSPECTIVE && !(o->near_plane > 0))))
            return glt_fail(GLT_INVALID_ARGUMENT,
                            "linear depth of %s needs near < far%s (got near=%g, far=%g); pass the planes of the "
                            "projection it was rendered with",
                            what, o->depth == GLT_DEPTH_LINEAR_PERSPECTIVE ? " and near > 0" : "", o->near_plane,
                            o->far_plane);
    } else if (o->depth != GLT_DEPTH_WINDOW) {
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "depth= applies to depth images, and %s is a colour image; drop depth= (and near/far), or "
                        "capture the depth attachment instead",
                        what);
    }
    s->depth_mode = o->depth;
    s->near_plane = o->near_plane;
    s->far_plane = o->far_plane;
    if (o->layout != GLT_LAYOUT_HWC && o->layout != GLT_LAYOUT_CHW)
        return glt_fail(GLT_INVALID_ARGUMENT, "unknown axis order %d; use HWC or CHW", (int)o->layout);
    s->order = o->layout;
    s->raw = identity && s->channels == fmt->channels && s->out_type == GLT_OUT_SAME && s->order == GLT_LAYOUT_HWC;
    return GLT_OK;
}

size_t glt_out_row_bytes(const glt_out_spec *s, int width) {
    size_t es = glt_dtype_size(s->dtype);
    return s->order == GLT_LAYOUT_CHW ? (size_t)width * es : (size_t)width * s->channels * es;
}

size_t glt_out_image_bytes(const glt_out_spec *s, int width, int height) {
    return (size_t)width * height * s->channels * glt_dtype_size(s->dtype);
}

/* ---- host arithmetic, mirroring the kernel ---- */

static float source_value(const glt_format *fmt, int kind, const unsigned char *px, int c) {
    float f;
    switch (fmt->dtype) {
    case GLT_DTYPE_UINT8: f = (float)px[c]; break;
    case GLT_DTYPE_UINT16: f = (float)((const uint16_t *)px)[c]; break;
    case GLT_DTYPE_UINT32: f = (float)((const uint32_t *)px)[c]; break;
    case GLT_DTYPE_FLOAT32: f = ((const float *)px)[c]; break;
    case GLT_DTYPE_FLOAT16: {
        uint16_t h = ((const uint16_t *)px)[c];
        /* half -> float, exact */
        uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, man = h & 0x3FF, bits;
        if (exp == 0) {
            if (man == 0) {
                bits = sign;
            } else { /* subnormal: normalise */
                exp = 127 - 15 + 1;
                while (!(man & 0x400)) {
                    man <<= 1;
                    exp--;
                }
                bits = sign | (exp << 23) | ((man & 0x3FF) << 13);
            }
        } else if (exp == 31) {
            bits = sign | 0x7F800000u | (man << 13);
        } else {
            bits = sign | ((exp - 15 + 127) << 23) | (man << 13);
        }
        memcpy(&f, &bits, 4);
        break;
    }
    default: f = 0; break;
    }
    if (kind == GLT_KIND_UNORM)
        f = f / (fmt->dtype == GLT_DTYPE_UINT8 ? 255.0f : fmt->dtype == GLT_DTYPE_UINT16 ? 65535.0f : 4294967295.0f);
    return f;
}

static uint16_t float_to_half(float f) {
    /* round to nearest even, as __float2half_rn */
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, exp = (x >> 23) & 0xFF, man = x & 0x7FFFFF;
    if (exp == 0xFF) return (uint16_t)(sign | 0x7C00 | (man ? 0x200 : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7C00);
    if (e <= 0) {
        if (e < -10) return (uint16_t)sign;
        man |= 0x800000;
        int shift = 14 - e;
        uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1FFF;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++;
    return (uint16_t)(sign | half);
}

static uint16_t float_to_bfloat16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7F800000u) == 0x7F800000u && (x & 0x7FFFFF)) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7FFF + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

static void store(const glt_format *fmt, const glt_out_spec *s, int kind, const unsigned char *px, int c,
                  unsigned char *out) {
    if (s->out_type == GLT_OUT_SAME) { /* no dtype change: move the stored bytes */
        size_t es = glt_dtype_size(fmt->dtype);
        memcpy(out, px + (size_t)c * es, es);
        return;
    }
    float f = source_value(fmt, kind, px, c);
    switch (s->dtype) {
    case GLT_DTYPE_FLOAT32: memcpy(out, &f, 4); break;
    case GLT_DTYPE_FLOAT16: {
        uint16_t h = float_to_half(f);
        memcpy(out, &h, 2);
        break;
    }
    case GLT_DTYPE_BFLOAT16: {
        uint16_t h = float_to_bfloat16(f);
        memcpy(out, &h, 2);
        break;
    }
    case GLT_DTYPE_UINT8:
        if (kind == GLT_KIND_UINT) {
            *out = f > 255.0f ? 255 : (unsigned char)f; /* integer sources are exact in float up to 2^24 */
            if (fmt->dtype == GLT_DTYPE_UINT32) {
                uint32_t v = ((const uint32_t *)px)[c];
                *out = v > 255 ? 255 : (unsigned char)v;
            }
        } else if (fmt->dtype == GLT_DTYPE_UINT8) {
            *out = px[c];
        } else {
            float t = f < 0.0f ? 0.0f : f > 1.0f ? 1.0f : f; /* NaN -> 0 as __saturatef */
            if (f != f) t = 0.0f;
            *out = (unsigned char)nearbyintf(t * 255.0f); /* default rounding: to nearest even */
        }
        break;
    default: break;
    }
}

/* Channel selection without a dtype change (the common reads: RGBA8 slots read as RGB, CHW for a CNN): the
 * stored elements move as they are, so one loop per element size does what store() does per element. ES is a
 * constant in each expansion, so every memcpy is one load and one store, and no pointer is assumed aligned
 * (a caller's out= array may start anywhere). */
#define MOVE_CHANNELS(ES)                                                                                        \
    do {                                                                                                         \
        const unsigned char *in = row;                                                                           \
        const size_t px = n * (ES);                                                                              \
        if (s->order == GLT_LAYOUT_CHW) {                                                                        \
            for (int c = 0; c < s->channels; ++c) {                                                              \
                unsigned char *o = out_row + (size_t)c * dst_plane;                                              \
                const unsigned char *p = in + (size_t)s->map[c] * (ES);                                          \
                for (int x = 0; x < width; ++x, o += (ES), p += px) memcpy(o, p, (ES));                          \
            }                                                                                                    \
        } else if (s->channels == 3) { /* e.g. RGBA stored, RGB asked: the usual observation */                \
            unsigned char *o = out_row;                                                                          \
            const size_t m0 = (size_t)s->map[0] * (ES), m1 = (size_t)s->map[1] * (ES), m2 = (size_t)s->map[2] * (ES); \
            for (int x = 0; x < width; ++x, o += 3 * (ES), in += px) {                                           \
                memcpy(o, in + m0, (ES));                                                                        \
                memcpy(o + (ES), in + m1, (ES));                                                                 \
                memcpy(o + 2 * (ES), in + m2, (ES));                                                             \
            }                                                                                                    \
        } else {                                                                                                 \
            unsigned char *o = out_row;                                                                          \
            const int k = s->channels;                                                                           \
            for (int x = 0; x < width; ++x, in += px)                                                            \
                for (int c = 0; c < k; ++c, o += (ES)) memcpy(o, in + (size_t)s->map[c] * (ES), (ES));           \
        }                                                                                                        \
    } while (0)

static int move_rows(const glt_format *fmt, const glt_out_spec *s, const void *src, ptrdiff_t src_stride, int width,
                     int height, void *dst, size_t dst_pitch, size_t dst_plane) {
    if (s->out_type != GLT_OUT_SAME) return 0;
    size_t es = glt_dtype_size(fmt->dtype), n = (size_t)fmt->channels;
    if (es != 1 && es != 2 && es != 4) return 0;
    for (int y = 0; y < height; ++y) {
        const unsigned char *row = (const unsigned char *)src + (ptrdiff_t)y * src_stride;
        unsigned char *out_row = (unsigned char *)dst + (size_t)y * dst_pitch;
        if (s->raw) {
            memcpy(out_row, row, (size_t)width * n * es);
        } else if (es == 1) {
            MOVE_CHANNELS(1);
        } else if (es == 2) {
            MOVE_CHANNELS(2);
        } else {
            MOVE_CHANNELS(4);
        }
    }
    return 1;
}
#undef MOVE_CHANNELS

void glt_convert_host(const glt_format *fmt, const glt_out_spec *s, const void *src, ptrdiff_t src_stride,
                      int width, int height, void *dst, size_t dst_pitch, size_t dst_plane) {
    if (move_rows(fmt, s, src, src_stride, width, height, dst, dst_pitch, dst_plane)) return;
    size_t src_px = (size_t)fmt->channels * glt_dtype_size(fmt->dtype);
    size_t es = glt_dtype_size(s->dtype);
    int kind = s->kind;
    for (int y = 0; y < height; ++y) {
        const unsigned char *row = (const unsigned char *)src + (ptrdiff_t)y * src_stride;
        unsigned char *out_row = (unsigned char *)dst + (size_t)y * dst_pitch;
        for (int x = 0; x < width; ++x) {
            const unsigned char *px = row + (size_t)x * src_px;
            for (int c = 0; c < s->channels; ++c) {
                unsigned char *o = s->order == GLT_LAYOUT_CHW ? out_row + (size_t)c * dst_plane + (size_t)x * es
                                                             : out_row + ((size_t)x * s->channels + c) * es;
                store(fmt, s, kind, px, s->map[c], o);
            }
        }
    }
}

float glt_depth_value(float d, int mode, double n, double f) {
    /* Same formulas, in double, as the CUDA kernel: perspective f*n / (f - d*(f - n)), orthographic
     * n + d*(f - n). */
    if (mode == GLT_DEPTH_LINEAR_PERSPECTIVE) return (float)(f * n / (f - (double)d * (f - n)));
    if (mode == GLT_DEPTH_LINEAR_ORTHOGRAPHIC) return (float)(n + (double)d * (f - n));
    return d;
}

/* ---- float16 for texture writes (write_convert.h): the same conversions as reads use ---- */
uint16_t glt_half_from_float(float f) { return float_to_half(f); }

float glt_float_from_half(uint16_t h) {
    return source_value(glt_format_find(0x822D /* GL_R16F */), GLT_KIND_FLOAT, (const unsigned char *)&h, 0);
}
