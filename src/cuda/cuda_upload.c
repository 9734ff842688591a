/*
 * Upload on the CUDA backend: a texture registered for writing, written through a surface object by one
 * kernel per write (or, for formats the driver will not bind to a surface, through staging memory and one 2D
 * copy), mapped and unmapped around each write on the caller's stream.
 */
#include "cuda/cuda_api.h"

#ifdef GLT_WITH_CUDA

#include "cuda/cuda_resource.h"
#include <stdlib.h>
#include <string.h>

struct glt_cuda_surface {
    glt_cuda_resource res; /* kind: "texture" */
    int width, height;
    const glt_format *fmt;
    cudaArray_t array;      /* the mapped array, learned at the first map and kept while it stays the same */
    cudaSurfaceObject_t surface;
    int array_channels, elem_bytes;
    void *last_stream; /* of the last write, synchronised before the registration goes */
    int wrote;
    /* Formats the driver will not bind to a surface are registered without surface load/store: the
     * kernel then writes the region's texels into `scratch` and one 2D copy puts them into the array. */
    int linear;
    void *scratch;
    size_t scratch_size;
    cudaEvent_t scratch_done; /* recorded after each 2D copy: a write on another stream waits for it */
};

glt_status glt_cuda_surface_register(GLuint name, GLenum target, int cuda_device, const glt_format *fmt, int width,
                                     int height, glt_cuda_surface **out) {
    ON_DEVICE(cuda_device);
    glt_cuda_surface *s = calloc(1, sizeof *s);
    if (!s) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    s->fmt = fmt;
    s->width = width;
    s->height = height;
    /* Surface load/store is what lets a kernel write the mapped array; whether the old contents may
     * be discarded is decided per write through the map flags (whole image or a region). */
    /* GLTENSOR_UPLOAD_PATH=copy forces the linear path below (tests run both paths on one driver). */
    cudaError_t e = glt_env_choice(GLT_ENV_UPLOAD_PATH) == 1 /* copy */
                        ? cudaErrorNotSupported
                        : glt_cuda_resource_register(&s->res, cuda_device, name, target,
                                                     cudaGraphicsRegisterFlagsSurfaceLoadStore, "texture");
    if (e != cudaSuccess) {
        cudaGetLastError();
        e = glt_cuda_resource_register(&s->res, cuda_device, name, target, cudaGraphicsRegisterFlagsNone, "texture");
        s->linear = e == cudaSuccess;
    }
    if (e != cudaSuccess) {
        free(s);
        return glt_cuda_fail(e, "cudaGraphicsGLRegisterImage",
                         "texture %u (%s, %dx%d, %s) could not be registered for writing with CUDA device %d; check "
                         "that its GL context is current and runs on that GPU",
                         name, fmt->name, width, height, glt_target_name(target), cuda_device);
    }
    *out = s;
    return GLT_OK;
}

static void surface_release(void *owner, int unregister) {
    glt_cuda_surface *s = owner;
    ON_DEVICE_OR(s->res.device, );
    /* A write still in flight goes through the registration: let it land first (the caller's stream
     * may be gone by now, so a stream other than CUDA's defaults is waited for through the device). */
    if (s->wrote) glt_cuda_settle((cudaStream_t)s->last_stream);
    if (s->surface) cudaDestroySurfaceObject(s->surface);
    cudaFree(s->scratch);
    if (s->scratch_done) cudaEventDestroy(s->scratch_done);
    glt_cuda_resource_release(&s->res, unregister); /* unregistering needs the texture's GL context current */
}

void glt_cuda_surface_unregister(glt_cuda_surface *s) { glt_cuda_resource_drop(s, 1, surface_release); }
void glt_cuda_surface_forget(glt_cuda_surface *s) { glt_cuda_resource_drop(s, 0, surface_release); }

/* Learns the mapped array's layout, checks it holds what the format promises, makes its surface. */
static glt_status learn_surface(glt_cuda_surface *s, cudaArray_t array) {
    glt_cuda_array_layout l;
    glt_status st = glt_cuda_check_array(array, s->fmt, s->width, s->height, 0, "texture", s->res.name, &l);
    if (st != GLT_OK) return st;
    if (s->surface) {
        cudaDestroySurfaceObject(s->surface);
        s->surface = 0;
    }
    s->array = array;
    s->array_channels = l.channels;
    s->elem_bytes = l.elem_bytes;
    if (s->linear) return GLT_OK; /* written through scratch and a 2D copy: no surface */
    struct cudaResourceDesc res;
    memset(&res, 0, sizeof res);
    res.resType = cudaResourceTypeArray;
    res.res.array.array = array;
    cudaError_t e = cudaCreateSurfaceObject(&s->surface, &res);
    if (e != cudaSuccess) {
        s->surface = 0;
        s->array = NULL;
        return glt_cuda_fail(e, "cudaCreateSurfaceObject", "writing texture %u (%s) through a surface", s->res.name,
                         s->fmt->name);
    }
    return GLT_OK;
}

/* The linear path: the kernel writes the region's texels into scratch, one 2D copy moves them. */
static glt_status write_linear(glt_cuda_surface *s, glt_scatter_spec *spec, cudaStream_t stream) {
    size_t texel = (size_t)s->array_channels * s->elem_bytes, pitch = texel * spec->width;
    size_t need = pitch * spec->height;
    cudaError_t e;
    if (!s->scratch_done && (e = cudaEventCreateWithFlags(&s->scratch_done, cudaEventDisableTiming)) != cudaSuccess)
        return glt_cuda_fail(e, "cudaEventCreateWithFlags", "ordering writes into texture %u", s->res.name);
    /* The previous write may have been issued on another stream and still read the scratch. */
    if ((e = cudaStreamWaitEvent(stream, s->scratch_done, 0)) != cudaSuccess)
        return glt_cuda_fail(e, "cudaStreamWaitEvent", "ordering writes into texture %u", s->res.name);
    if (s->scratch_size < need) {
        if (s->scratch) {
            cudaStreamSynchronize(stream); /* ordered after the last write above: it is done with the scratch */
            cudaFree(s->scratch);
        }
        s->scratch = NULL;
        s->scratch_size = 0;
        e = cudaMalloc(&s->scratch, need);
        if (e != cudaSuccess)
            return glt_cuda_fail(e, "cudaMalloc", "a %zu-byte staging buffer for writing texture %u", need, s->res.name);
        s->scratch_size = need;
    }
    spec->dst = s->scratch;
    spec->dst_pitch = (long long)pitch;
    int rc = glt_launch_scatter(0, spec, stream);
    if (rc != 0)
        return glt_cuda_fail((cudaError_t)rc, "write kernel launch", "texture %u (%s), %dx%d region", s->res.name,
                         s->fmt->name, spec->width, spec->height);
    e = cudaMemcpy2DToArrayAsync(s->array, (size_t)spec->x0 * texel, (size_t)spec->y0, s->scratch, pitch, pitch,
                                 (size_t)spec->height, cudaMemcpyDeviceToDevice, stream);
    if (e != cudaSuccess)
        return glt_cuda_fail(e, "cudaMemcpy2DToArrayAsync", "texture %u (%s), %dx%d region", s->res.name, s->fmt->name,
                         spec->width, spec->height);
    if ((e = cudaEventRecord(s->scratch_done, stream)) != cudaSuccess)
        return glt_cuda_fail(e, "cudaEventRecord", "ordering writes into texture %u", s->res.name);
    return GLT_OK;
}

glt_status glt_cuda_surface_write(glt_cuda_surface *s, glt_scatter_spec *spec, int whole, void *stream) {
    ON_DEVICE(s->res.device);
    cudaStream_t st = (cudaStream_t)stream;
    glt_status result =
        glt_cuda_resource_set_map_flags(&s->res, whole ? cudaGraphicsMapFlagsWriteDiscard : cudaGraphicsMapFlagsNone);
    if (result != GLT_OK) return result;
    result = glt_cuda_resource_map(&s->res, st,
                                   "texture %u for writing; make sure its GL context is current and the stream "
                                   "belongs to CUDA device %d",
                                   s->res.name, s->res.device);
    if (result != GLT_OK) return result;
    cudaArray_t array = NULL;
    result = glt_cuda_resource_array(&s->res, &array);
    if (result == GLT_OK && array != s->array) result = learn_surface(s, array);
    if (result == GLT_OK) {
        spec->array_channels = s->array_channels; /* RGB8 is stored as RGBX: the fourth gets spec's alpha fill */
        spec->elem_bytes = s->elem_bytes;
        if (s->linear) {
            result = write_linear(s, spec, st);
        } else {
            int rc = glt_launch_scatter((unsigned long long)s->surface, spec, stream);
            if (rc != 0)
                result = glt_cuda_fail((cudaError_t)rc, "write kernel launch", "texture %u (%s), %dx%d region", s->res.name,
                                   s->fmt->name, spec->width, spec->height);
        }
    }
    result = glt_cuda_resource_unmap(&s->res, st, result, "texture %u after writing", s->res.name);
    s->last_stream = stream;
    s->wrote = 1;
    return result;
}

#endif
