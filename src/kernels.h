/* The interface between the C core and the CUDA kernel (cuda_kernels.cu), usable from C and CUDA C++. */
#ifndef GLT_KERNELS_H
#define GLT_KERNELS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One output image: a width x height region of a mapped array, read through a texture object. */
typedef struct glt_gather_item {
    unsigned long long texture; /* cudaTextureObject_t */
    int x0, y0;                 /* region origin in the array (GL convention: row 0 is the bottom row) */
    void *dst;                  /* first output row */
} glt_gather_item;

/* Copies count regions of equal size and layout, rows top-first when flip, keeping the first
 * out_channels of the array's channels. Returns 0 or a cudaError_t. */
int glt_launch_gather(const glt_gather_item *items, int count, int array_channels, int elem_bytes,
                      int array_is_float, int out_channels, int width, int height, size_t dst_pitch, int flip,
                      void *stream);

#ifdef __cplusplus
}
#endif
#endif
