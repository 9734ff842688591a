// The one copy kernel: reads regions of mapped CUDA arrays through texture
// objects and writes linear rows, top row first when flipping, keeping the
// first out_channels channels (RGB8 is stored by the driver as four 8-bit
// channels). One launch serves a whole batch of cameras or atlas tiles.
// Values are moved as they are stored: no normalisation, no rounding.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stddef.h>

#include "kernels.h"

namespace {

// Component i of a texel, whatever its vector width.
template <typename T> __device__ __forceinline__ T comp(T v, int) { return v; }
#define GLT_VEC_COMP(V, S)                                                                  \
    __device__ __forceinline__ S comp(V v, int i) { return i == 0 ? v.x : v.y; }
#define GLT_VEC4_COMP(V, S)                                                                 \
    __device__ __forceinline__ S comp(V v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }
GLT_VEC_COMP(uchar2, unsigned char)
GLT_VEC_COMP(ushort2, unsigned short)
GLT_VEC_COMP(uint2, unsigned int)
GLT_VEC_COMP(float2, float)
GLT_VEC4_COMP(uchar4, unsigned char)
GLT_VEC4_COMP(ushort4, unsigned short)
GLT_VEC4_COMP(uint4, unsigned int)
GLT_VEC4_COMP(float4, float)

template <typename O, typename S> __device__ __forceinline__ O convert(S s) { return (O)s; }
// Half arrays are always fetched promoted to float; converting back is exact.
template <> __device__ __forceinline__ __half convert<__half, float>(float s) { return __float2half_rn(s); }

// Up to GLT_GATHER_MAX images per launch travel in the kernel's parameters (about 2.3 KB, under the
// 4 KB every architecture accepts), so a whole batch or atlas is one launch, or a few.
#define GLT_GATHER_MAX 96
struct gather_params {
    unsigned long long tex[GLT_GATHER_MAX];
    int x0[GLT_GATHER_MAX], y0[GLT_GATHER_MAX]; // region origin in the array, GL's bottom-left convention
    char *dst[GLT_GATHER_MAX];
};

// blockIdx.z picks the image; each thread writes one pixel of it.
template <typename V, typename O, int OC>
__global__ void gather(gather_params p, int width, int height, size_t pitch, int flip) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int i = blockIdx.z;
    if (x >= width || y >= height) return;
    int src_y = p.y0[i] + (flip ? height - 1 - y : y);
    V v = tex2D<V>((cudaTextureObject_t)p.tex[i], p.x0[i] + x + 0.5f, src_y + 0.5f);
    O *out = reinterpret_cast<O *>(p.dst[i] + (size_t)y * pitch) + (size_t)x * OC;
#pragma unroll
    for (int c = 0; c < OC; ++c) out[c] = convert<O>(comp(v, c));
}

template <typename V, typename O, int OC>
int launch(const glt_gather_item *items, int count, int w, int h, size_t pitch, int flip, cudaStream_t s) {
    dim3 block(32, 8);
    for (int first = 0; first < count; first += GLT_GATHER_MAX) {
        int n = count - first < GLT_GATHER_MAX ? count - first : GLT_GATHER_MAX;
        gather_params p;
        for (int i = 0; i < n; ++i) {
            p.tex[i] = items[first + i].texture;
            p.x0[i] = items[first + i].x0;
            p.y0[i] = items[first + i].y0;
            p.dst[i] = (char *)items[first + i].dst;
        }
        dim3 grid((w + block.x - 1) / block.x, (h + block.y - 1) / block.y, n);
        gather<V, O, OC><<<grid, block, 0, s>>>(p, w, h, pitch, flip);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return (int)e;
    }
    return 0;
}

// One array element type (scalar S, vectors V2, V4) and output scalar O: pick by channel counts.
template <typename S, typename V2, typename V4, typename O>
int dispatch(int ac, int oc, const glt_gather_item *it, int n, int w, int h, size_t p, int f, cudaStream_t s) {
    if (ac == 1 && oc == 1) return launch<S, O, 1>(it, n, w, h, p, f, s);
    if (ac == 2 && oc == 1) return launch<V2, O, 1>(it, n, w, h, p, f, s);
    if (ac == 2 && oc == 2) return launch<V2, O, 2>(it, n, w, h, p, f, s);
    if (ac == 4 && oc == 1) return launch<V4, O, 1>(it, n, w, h, p, f, s);
    if (ac == 4 && oc == 2) return launch<V4, O, 2>(it, n, w, h, p, f, s);
    if (ac == 4 && oc == 3) return launch<V4, O, 3>(it, n, w, h, p, f, s);
    if (ac == 4 && oc == 4) return launch<V4, O, 4>(it, n, w, h, p, f, s);
    return (int)cudaErrorInvalidValue;
}

} // namespace

extern "C" int glt_launch_gather(const glt_gather_item *items, int count, int array_channels, int elem_bytes,
                                 int array_is_float, int out_channels, int width, int height, size_t dst_pitch,
                                 int flip, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    int ac = array_channels, oc = out_channels;
    const glt_gather_item *it = items;
    if (elem_bytes == 1 && !array_is_float)
        return dispatch<unsigned char, uchar2, uchar4, unsigned char>(ac, oc, it, count, width, height, dst_pitch, flip, s);
    if (elem_bytes == 2 && !array_is_float)
        return dispatch<unsigned short, ushort2, ushort4, unsigned short>(ac, oc, it, count, width, height, dst_pitch, flip, s);
    if (elem_bytes == 2 && array_is_float)
        return dispatch<float, float2, float4, __half>(ac, oc, it, count, width, height, dst_pitch, flip, s);
    if (elem_bytes == 4 && !array_is_float)
        return dispatch<unsigned int, uint2, uint4, unsigned int>(ac, oc, it, count, width, height, dst_pitch, flip, s);
    if (elem_bytes == 4 && array_is_float)
        return dispatch<float, float2, float4, float>(ac, oc, it, count, width, height, dst_pitch, flip, s);
    return (int)cudaErrorInvalidValue;
}
