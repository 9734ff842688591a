/* The interface between the C core and the CUDA kernel (cuda_kernels.cu), usable from C and CUDA C++. */
#ifndef GLT_KERNELS_H
#define GLT_KERNELS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How source values are interpreted when converting. */
enum { GLT_KIND_UNORM = 0, GLT_KIND_UINT = 1, GLT_KIND_FLOAT = 2 };
/* Output element type: as stored, or converted. */
enum { GLT_OUT_SAME = 0, GLT_OUT_UINT8, GLT_OUT_FLOAT16, GLT_OUT_BFLOAT16, GLT_OUT_FLOAT32 };

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

/* ---- texture writes (upload.c): one source tensor into a region of a mapped array, through a surface ---- */
/* Source element types and stored element types of a write. */
enum { GLT_SRC_UINT8 = 0, GLT_SRC_UINT16, GLT_SRC_UINT32, GLT_SRC_FLOAT16, GLT_SRC_FLOAT32 };
enum { GLT_DST_UNORM8 = 0, GLT_DST_UNORM16, GLT_DST_FLOAT16, GLT_DST_FLOAT32, GLT_DST_UINT8, GLT_DST_UINT16,
       GLT_DST_UINT32 };
/* How a source element becomes a stored one: its bits as they are, through float, or as an integer. */
enum { GLT_WRITE_COPY = 0, GLT_WRITE_FLOAT, GLT_WRITE_INT };

typedef struct glt_scatter_spec {
    const void *src;                          /* element (row 0, column 0, channel 0) of the source */
    long long row_stride, px_stride, ch_stride; /* bytes */
    int src_type, dst_type, mode;
    int array_channels, elem_bytes;           /* the destination's stored layout (CUDA: the mapped array's) */
    int map[4];                               /* stored channel c <- source channel map[c]; -1: fill[c] */
    unsigned int fill[4];                     /* stored bits of the channels no source channel names */
    int x0, y0, width, height;                /* region of the array; y0 counts from GL's bottom row */
    int flip;                                 /* 1: source row 0 goes to the region's top row */
    void *dst;                                /* NULL: write the surface; else linear texels of the region */
    long long dst_pitch;                      /* bytes between rows of dst (region row 0 = its bottom row) */
} glt_scatter_spec;

/* surface: a cudaSurfaceObject_t of the mapped array (unused when spec->dst is set). Returns 0 or a
 * cudaError_t. */
int glt_launch_scatter(unsigned long long surface, const glt_scatter_spec *spec, void *stream);

#ifdef __cplusplus
}
#endif
#endif
