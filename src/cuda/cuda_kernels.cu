// The one copy kernel: reads regions of mapped CUDA arrays through texture
// objects and writes linear output, with every conversion the caller asked for
// done in the same pass: rows top-first (flip), channel selection and order,
// element type (unsigned-normalised to [0, 1] floats, floats to uint8, ...),
// and HWC or CHW axis order. One launch serves a whole batch of cameras or
// atlas tiles. Without conversions, values are moved exactly as stored.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stddef.h>

#include "cuda/kernels.h"

namespace {

// Component i of a texel, whatever its vector width.
template <typename T> __device__ __forceinline__ T comp(T v, int) { return v; }
#define GLT_VEC2_COMP(V, S) \
    __device__ __forceinline__ S comp(V v, int i) { return i == 0 ? v.x : v.y; }
#define GLT_VEC4_COMP(V, S) \
    __device__ __forceinline__ S comp(V v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }
GLT_VEC2_COMP(uchar2, unsigned char)
GLT_VEC2_COMP(ushort2, unsigned short)
GLT_VEC2_COMP(uint2, unsigned int)
GLT_VEC2_COMP(float2, float)
GLT_VEC4_COMP(uchar4, unsigned char)
GLT_VEC4_COMP(ushort4, unsigned short)
GLT_VEC4_COMP(uint4, unsigned int)
GLT_VEC4_COMP(float4, float)

template <typename S> struct unorm_max;
template <> struct unorm_max<unsigned char> { static constexpr float value = 255.0f; };
template <> struct unorm_max<unsigned short> { static constexpr float value = 65535.0f; };
template <> struct unorm_max<unsigned int> { static constexpr float value = 4294967295.0f; };
template <> struct unorm_max<float> { static constexpr float value = 1.0f; };

// A source value as a float, per the source kind (unsigned-normalised scale to [0, 1]).
template <typename S> __device__ __forceinline__ float as_float(S s, int kind) {
    float f = (float)s;
    return kind == GLT_KIND_UNORM ? f / unorm_max<S>::value : f; // IEEE division, as NumPy does
}

template <typename O, typename S> struct convert_to {
    __device__ static O run(S s, int) { return (O)s; } // same type: exact
};
template <typename S> struct convert_to<float, S> {
    __device__ static float run(S s, int kind) { return as_float(s, kind); }
};
template <typename S> struct convert_to<__half, S> {
    __device__ static __half run(S s, int kind) { return __float2half_rn(as_float(s, kind)); }
};
template <typename S> struct convert_to<__nv_bfloat16, S> {
    __device__ static __nv_bfloat16 run(S s, int kind) { return __float2bfloat16_rn(as_float(s, kind)); }
};
template <typename S> struct convert_to<unsigned char, S> {
    __device__ static unsigned char run(S s, int kind) {
        if (kind == GLT_KIND_UINT) return (unsigned char)(s > (S)255 ? 255 : s); // saturate integers
        // Normalised or float: round(clamp(x, 0, 1) * 255), ties to even.
        return (unsigned char)__float2uint_rn(__saturatef(as_float(s, kind)) * 255.0f);
    }
};
template <> struct convert_to<unsigned char, unsigned char> {
    __device__ static unsigned char run(unsigned char s, int) { return s; }
};

// Up to GLT_GATHER_MAX images per launch travel in the kernel's parameters (under the 4 KB every
// architecture accepts), so a whole batch or atlas is one launch, or a few.
#define GLT_GATHER_MAX 80
struct gather_params {
    unsigned long long tex[GLT_GATHER_MAX];
    int x0[GLT_GATHER_MAX], y0[GLT_GATHER_MAX]; // region origin in the array, GL's bottom-left convention
    char *dst[GLT_GATHER_MAX];
    int map[4];   // output channel c <- source channel map[c]
    int n_out;    // output channels
    int kind;     // GLT_KIND_*
    int chw;      // planar output
    size_t plane; // bytes between channel planes (chw)
};

// blockIdx.z picks the image; each thread writes one pixel of it.
template <typename V, typename S, typename O>
__global__ void gather(const gather_params p, int width, int height, size_t pitch, int flip) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int i = blockIdx.z;
    if (x >= width || y >= height) return;
    int src_y = p.y0[i] + (flip ? height - 1 - y : y);
    V v = tex2D<V>((cudaTextureObject_t)p.tex[i], p.x0[i] + x + 0.5f, src_y + 0.5f);
    char *row = p.dst[i] + (size_t)y * pitch;
    if (p.chw) {
        for (int c = 0; c < p.n_out; ++c)
            reinterpret_cast<O *>(row + c * p.plane)[x] = convert_to<O, S>::run((S)comp(v, p.map[c]), p.kind);
    } else {
        O *out = reinterpret_cast<O *>(row) + (size_t)x * p.n_out;
        for (int c = 0; c < p.n_out; ++c) out[c] = convert_to<O, S>::run((S)comp(v, p.map[c]), p.kind);
    }
}

template <typename V, typename S, typename O>
int launch(const glt_gather_item *items, int count, const glt_gather_spec *spec, cudaStream_t s) {
    dim3 block(32, 8);
    gather_params p;
    for (int c = 0; c < 4; ++c) p.map[c] = spec->map[c];
    p.n_out = spec->out_channels;
    p.kind = spec->kind;
    p.chw = spec->chw;
    p.plane = spec->plane;
    for (int first = 0; first < count; first += GLT_GATHER_MAX) {
        int n = count - first < GLT_GATHER_MAX ? count - first : GLT_GATHER_MAX;
        for (int i = 0; i < n; ++i) {
            p.tex[i] = items[first + i].texture;
            p.x0[i] = items[first + i].x0;
            p.y0[i] = items[first + i].y0;
            p.dst[i] = (char *)items[first + i].dst;
        }
        dim3 grid((spec->width + block.x - 1) / block.x, (spec->height + block.y - 1) / block.y, n);
        gather<V, S, O><<<grid, block, 0, s>>>(p, spec->width, spec->height, spec->pitch, spec->flip);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return (int)e;
    }
    return 0;
}

// Texel vector by the array's channel count, for one source scalar S (the fetched type).
template <typename S, typename V2, typename V4, typename O>
int by_width(const glt_gather_item *it, int n, const glt_gather_spec *sp, cudaStream_t s) {
    switch (sp->array_channels) {
    case 1: return launch<S, S, O>(it, n, sp, s);
    case 2: return launch<V2, S, O>(it, n, sp, s);
    case 4: return launch<V4, S, O>(it, n, sp, s);
    }
    return (int)cudaErrorInvalidValue;
}

// Output type for one fetched scalar S; `same` is the output type of an unconverted read.
template <typename S, typename V2, typename V4, typename Same>
int by_output(const glt_gather_item *it, int n, const glt_gather_spec *sp, cudaStream_t s) {
    switch (sp->out_type) {
    case GLT_OUT_SAME: return by_width<S, V2, V4, Same>(it, n, sp, s);
    case GLT_OUT_UINT8: return by_width<S, V2, V4, unsigned char>(it, n, sp, s);
    case GLT_OUT_FLOAT16: return by_width<S, V2, V4, __half>(it, n, sp, s);
    case GLT_OUT_BFLOAT16: return by_width<S, V2, V4, __nv_bfloat16>(it, n, sp, s);
    case GLT_OUT_FLOAT32: return by_width<S, V2, V4, float>(it, n, sp, s);
    }
    return (int)cudaErrorInvalidValue;
}

// Eye-space distance from window depth d (glDepthRange(0, 1)); double precision because the
// perspective denominator cancels near the far plane.
__global__ void depth_kernel(const float *src, int width, int height, int flip, int mode, double n, double f,
                             char *dst, size_t pitch) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    float d = src[(size_t)(flip ? height - 1 - y : y) * width + x];
    float out = d;
    if (mode == 1) out = (float)(f * n / (f - (double)d * (f - n)));
    else if (mode == 2) out = (float)(n + (double)d * (f - n));
    reinterpret_cast<float *>(dst + (size_t)y * pitch)[x] = out;
}

} // namespace

extern "C" int glt_launch_depth(const float *src, int width, int height, int flip, int mode, double near_plane,
                                double far_plane, void *dst, size_t pitch, void *stream) {
    dim3 block(32, 8);
    dim3 grid((width + block.x - 1) / block.x, (height + block.y - 1) / block.y);
    depth_kernel<<<grid, block, 0, (cudaStream_t)stream>>>(src, width, height, flip, mode, near_plane, far_plane,
                                                           (char *)dst, pitch);
    return (int)cudaGetLastError();
}

extern "C" int glt_launch_gather(const glt_gather_item *items, int count, const glt_gather_spec *sp, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    int eb = sp->elem_bytes;
    if (sp->array_is_float) {
        // Half arrays are fetched promoted to float; converting back to half is exact.
        if (eb == 2) return by_output<float, float2, float4, __half>(items, count, sp, s);
        if (eb == 4) return by_output<float, float2, float4, float>(items, count, sp, s);
    } else {
        if (eb == 1) return by_output<unsigned char, uchar2, uchar4, unsigned char>(items, count, sp, s);
        if (eb == 2) return by_output<unsigned short, ushort2, ushort4, unsigned short>(items, count, sp, s);
        if (eb == 4) return by_output<unsigned int, uint2, uint4, unsigned int>(items, count, sp, s);
    }
    return (int)cudaErrorInvalidValue;
}

// ---- texture writes (upload.c): the mirror of the gather kernel ----
// One thread per pixel of the region reads its source channels (any strides, HWC or CHW), converts each
// stored channel per write_convert.h, and stores the pixel with one surface write. Surface stores move
// bytes, so the vector type only has to match the texel's size (a float16 texel is written as ushort).
#include "convert/write_convert.h"

namespace {

template <typename E, int N> struct texel;
template <typename E> struct texel<E, 1> {
    static __device__ __forceinline__ E make(const unsigned int *v) { return (E)v[0]; }
};
#define GLT_TEXEL(E, V)                                                                             \
    template <> struct texel<E, 2> {                                                                \
        static __device__ __forceinline__ V##2 make(const unsigned int *v) {                        \
            return make_##V##2((E)v[0], (E)v[1]);                                                   \
        }                                                                                           \
    };                                                                                              \
    template <> struct texel<E, 4> {                                                                \
        static __device__ __forceinline__ V##4 make(const unsigned int *v) {                        \
            return make_##V##4((E)v[0], (E)v[1], (E)v[2], (E)v[3]);                                 \
        }                                                                                           \
    };
GLT_TEXEL(unsigned char, uchar)
GLT_TEXEL(unsigned short, ushort)
GLT_TEXEL(unsigned int, uint)
#undef GLT_TEXEL

template <typename E, int N>
__global__ void scatter_kernel(cudaSurfaceObject_t surface, glt_scatter_spec s) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y; // GL row within the region, 0 = bottom
    if (x >= s.width || row >= s.height) return;
    int src_row = s.flip ? s.height - 1 - row : row;
    const unsigned char *px =
        (const unsigned char *)s.src + (long long)src_row * s.row_stride + (long long)x * s.px_stride;
    unsigned int v[4];
#pragma unroll
    for (int c = 0; c < N; ++c) v[c] = glt_wc_element(&s, px, c);
    auto t = texel<E, N>::make(v);
    if (s.dst)
        reinterpret_cast<decltype(t) *>((char *)s.dst + (long long)row * s.dst_pitch)[x] = t;
    else
        surf2Dwrite(t, surface, (s.x0 + x) * (int)sizeof(t), s.y0 + row);
}

template <typename E, int N> int launch_scatter(cudaSurfaceObject_t surface, const glt_scatter_spec *s, cudaStream_t st) {
    dim3 block(32, 8);
    dim3 grid((s->width + block.x - 1) / block.x, (s->height + block.y - 1) / block.y);
    scatter_kernel<E, N><<<grid, block, 0, st>>>(surface, *s);
    return (int)cudaGetLastError();
}

} // namespace

extern "C" int glt_launch_scatter(unsigned long long surface, const glt_scatter_spec *s, void *stream) {
    cudaSurfaceObject_t sf = (cudaSurfaceObject_t)surface;
    cudaStream_t st = (cudaStream_t)stream;
    switch (s->elem_bytes * 10 + s->array_channels) {
    case 11: return launch_scatter<unsigned char, 1>(sf, s, st);
    case 12: return launch_scatter<unsigned char, 2>(sf, s, st);
    case 14: return launch_scatter<unsigned char, 4>(sf, s, st);
    case 21: return launch_scatter<unsigned short, 1>(sf, s, st);
    case 22: return launch_scatter<unsigned short, 2>(sf, s, st);
    case 24: return launch_scatter<unsigned short, 4>(sf, s, st);
    case 41: return launch_scatter<unsigned int, 1>(sf, s, st);
    case 42: return launch_scatter<unsigned int, 2>(sf, s, st);
    case 44: return launch_scatter<unsigned int, 4>(sf, s, st);
    default: return (int)cudaErrorInvalidValue;
    }
}
