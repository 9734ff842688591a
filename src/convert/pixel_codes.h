/* The codes and specs of conversions, shared by the C core and the CUDA kernels (cuda/kernels.h) and usable from C
 * and CUDA C++: how source values are read (GLT_KIND_*), what a read makes of them (GLT_OUT_*), and how a texture
 * write turns a tensor's elements into stored texels (GLT_SRC_*, GLT_DST_*, GLT_WRITE_*, glt_scatter_spec), which the
 * CPU backend (upload.c, through write_convert.h) and the kernel both follow. */
#ifndef GLT_PIXEL_CODES_H
#define GLT_PIXEL_CODES_H

/* How source values are interpreted when converting. */
enum { GLT_KIND_UNORM = 0, GLT_KIND_UINT = 1, GLT_KIND_FLOAT = 2 };
/* Output element type: as stored, or converted. */
enum { GLT_OUT_SAME = 0, GLT_OUT_UINT8, GLT_OUT_FLOAT16, GLT_OUT_BFLOAT16, GLT_OUT_FLOAT32 };

/* ---- texture writes (upload.c): one source tensor into a region of a texture (CUDA: a mapped array) ---- */
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

#endif
