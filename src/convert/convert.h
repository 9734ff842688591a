/* Conversions (convert/README.md): what one output image looks like after the read options' conversions, and the
 * CPU backend's arithmetic for them, which the CUDA kernels follow exactly. */
#ifndef GLT_CONVERT_H
#define GLT_CONVERT_H

#include "convert/pixel_codes.h"
#include "gl/gl.h"

/* ---- convert.c: what one output image looks like after the read options' conversions ---- */
typedef struct glt_out_spec {
    glt_dtype dtype;   /* output element type */
    int channels;      /* output channels */
    int map[4];        /* output channel i <- source channel map[i] */
    glt_layout order;   /* HWC or CHW */
    int raw;           /* 1: exactly as stored (first channels, same dtype, HWC): plain copies suffice */
    int out_type;      /* GLT_OUT_* for the kernel */
    int kind;          /* GLT_KIND_* of the source */
    int depth_mode;    /* glt_depth_mode, depth sources */
    double near_plane, far_plane;
} glt_out_spec;

/* Window depth d in [0, 1] as the requested mode gives it (computed in double: the perspective
 * formula cancels badly in float near the far plane). */
float glt_depth_value(float d, int mode, double near_plane, double far_plane);

/* Resolves opts' conversions against a source format; `what` names the source in errors. */
glt_status glt_out_spec_make(const glt_format *fmt, const glt_read_options *opts, const char *what,
                             glt_out_spec *out);
size_t glt_out_row_bytes(const glt_out_spec *s, int width);   /* one row (of one plane when CHW) */
size_t glt_out_image_bytes(const glt_out_spec *s, int width, int height);
/* CPU backend: converts height rows of width source pixels into dst. The first output row comes from
 * `src`, each next one from src_stride bytes further (negative to flip). */
void glt_convert_host(const glt_format *fmt, const glt_out_spec *s, const void *src, ptrdiff_t src_stride,
                      int width, int height, void *dst, size_t dst_pitch, size_t dst_plane);

/* GLT_KIND_UNORM, GLT_KIND_UINT or GLT_KIND_FLOAT (convert/pixel_codes.h): how conversions read its values. */
int glt_format_kind(const glt_format *fmt);

#endif
