/*
 * One element of a texture write: how a source value becomes the bits a texture stores. Shared by the
 * CUDA kernel (cuda_kernels.cu) and the CPU backend (upload.c), so that both backends store the same
 * bits for the same tensor. The arithmetic mirrors capture's conversions (convert.c), so that writing a
 * tensor and capturing it back with the inverse conversion gives the tensor again:
 *   unsigned sources scale to [0, 1] floats as v / max (IEEE division), as capture's unorm reads do;
 *   floats become unorm as round(clamp(x, 0, 1) * max), half to even, NaN as 0 (__saturatef);
 *   floats become float16 rounded to nearest even (__float2half_rn).
 */
#ifndef GLT_WRITE_CONVERT_H
#define GLT_WRITE_CONVERT_H

#include "convert/pixel_codes.h"

#ifdef __CUDACC__
#include <cuda_fp16.h>
#define GLT_WC static __device__ __forceinline__
#else
#include <math.h>
#include <stdint.h>
#include <string.h>
#define GLT_WC static inline
/* convert.c: the host's float16 conversions, bit-equal to CUDA's intrinsics. */
uint16_t glt_half_from_float(float f);
float glt_float_from_half(uint16_t h);
#endif

GLT_WC unsigned int glt_wc_load(const unsigned char *p, int src_type) {
    switch (src_type) {
    case GLT_SRC_UINT8: return p[0];
    case GLT_SRC_UINT16:
    case GLT_SRC_FLOAT16: return *(const unsigned short *)p;
    default: return *(const unsigned int *)p;
    }
}

GLT_WC float glt_wc_to_float(unsigned int bits, int src_type) {
    switch (src_type) {
    case GLT_SRC_UINT8: return (float)bits / 255.0f;
    case GLT_SRC_UINT16: return (float)bits / 65535.0f;
#ifdef __CUDACC__
    case GLT_SRC_FLOAT16: return __half2float(__ushort_as_half((unsigned short)bits));
    case GLT_SRC_FLOAT32: return __uint_as_float(bits);
#else
    case GLT_SRC_FLOAT16: return glt_float_from_half((uint16_t)bits);
    case GLT_SRC_FLOAT32: {
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
#endif
    default: return (float)bits / 4294967295.0f;
    }
}

/* round(clamp(v, 0, 1) * max), half to even; NaN gives 0. */
GLT_WC unsigned int glt_wc_unorm(float v, float max) {
#ifdef __CUDACC__
    return __float2uint_rn(__saturatef(v) * max);
#else
    float t = v != v ? 0.0f : v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
    return (unsigned int)nearbyintf(t * max); /* default rounding mode: to nearest even */
#endif
}

GLT_WC unsigned int glt_wc_from_float(float v, int dst_type) {
    switch (dst_type) {
    case GLT_DST_UNORM8: return glt_wc_unorm(v, 255.0f);
    case GLT_DST_UNORM16: return glt_wc_unorm(v, 65535.0f);
#ifdef __CUDACC__
    case GLT_DST_FLOAT16: return __half_as_ushort(__float2half_rn(v));
    default: return __float_as_uint(v);
#else
    case GLT_DST_FLOAT16: return glt_half_from_float(v);
    default: {
        unsigned int bits;
        memcpy(&bits, &v, 4);
        return bits;
    }
#endif
    }
}

/* The stored bits of channel c of the pixel whose source channel 0 is at px. */
GLT_WC unsigned int glt_wc_element(const glt_scatter_spec *s, const unsigned char *px, int c) {
    int m = s->map[c];
    if (m < 0) return s->fill[c];
    unsigned int bits = glt_wc_load(px + (long long)m * s->ch_stride, s->src_type);
    if (s->mode == GLT_WRITE_COPY) return bits;
    if (s->mode == GLT_WRITE_INT) {
        unsigned int max = s->dst_type == GLT_DST_UINT8 ? 255u : s->dst_type == GLT_DST_UINT16 ? 65535u : 0xFFFFFFFFu;
        return bits > max ? max : bits;
    }
    return glt_wc_from_float(glt_wc_to_float(bits, s->src_type), s->dst_type);
}

#undef GLT_WC
#endif
