/* The interface between the C core and the CUDA kernels (cuda_kernels.cu), usable from C and CUDA C++: the gather
 * of mapped images into frames, the depth conversion, and texture writes (their codes: convert/pixel_codes.h). */
#ifndef GLT_KERNELS_H
#define GLT_KERNELS_H

#include "convert/pixel_codes.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One output image: a width x height region of a mapped array, read through a texture object. */
typedef struct glt_gather_item {
    unsigned long long texture; /* cudaTextureObject_t */
    int x0, y0;                 /* region origin in the array (GL convention: row 0 is the bottom row) */
    void *dst;                  /* first output row (first plane when chw) */
} glt_gather_item;

/* What every item of one launch shares. */
typedef struct glt_gather_spec {
    int array_channels, elem_bytes, array_is_float; /* the arrays' layout */
    int kind;                                       /* GLT_KIND_* of the source format */
    int out_type;                                   /* GLT_OUT_* */
    int out_channels, map[4];                       /* output channel c <- source channel map[c] */
    int chw;                                        /* planar output */
    int width, height, flip;
    size_t pitch; /* bytes between output rows */
    size_t plane; /* bytes between channel planes when chw */
} glt_gather_spec;

/* Float window depth (bottom-up rows, tightly packed) to float32 output rows, flipped and
 * linearised per mode (glt_depth_mode). Returns 0 or a cudaError_t. */
int glt_launch_depth(const float *src, int width, int height, int flip, int mode, double near_plane, double far_plane,
                     void *dst, size_t pitch, void *stream);

/* Returns 0 or a cudaError_t. */
int glt_launch_gather(const glt_gather_item *items, int count, const glt_gather_spec *spec, void *stream);

/* surface: a cudaSurfaceObject_t of the mapped array (unused when spec->dst is set). Returns 0 or a
 * cudaError_t. */
int glt_launch_scatter(unsigned long long surface, const glt_scatter_spec *spec, void *stream);

#ifdef __cplusplus
}
#endif
#endif
