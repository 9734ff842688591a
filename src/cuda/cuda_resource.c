/* The one CUDA-registered GL object type (cuda_resource.h). */
#include "cuda/cuda_api.h"

#ifdef GLT_WITH_CUDA

#include "cuda/cuda_resource.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cuda_gl_interop.h pulls in GL/gl.h, which the build machine may lack: declare the two calls we need. */
extern cudaError_t cudaGraphicsGLRegisterImage(struct cudaGraphicsResource **resource, unsigned int image,
                                               unsigned int target, unsigned int flags);
extern cudaError_t cudaGraphicsGLRegisterBuffer(struct cudaGraphicsResource **resource, unsigned int buffer,
                                                unsigned int flags);

cudaError_t glt_cuda_resource_register(glt_cuda_resource *r, int device, GLuint name, GLenum target,
                                       unsigned int flags, const char *kind) {
    r->device = device;
    r->name = name;
    r->kind = kind;
    r->map_flags = cudaGraphicsMapFlagsNone;
    return target ? cudaGraphicsGLRegisterImage(&r->handle, name, target, flags)
                  : cudaGraphicsGLRegisterBuffer(&r->handle, name, flags);
}

glt_status glt_cuda_resource_set_map_flags(glt_cuda_resource *r, unsigned int flags) {
    if (flags == r->map_flags) return GLT_OK;
    cudaError_t e = cudaGraphicsResourceSetMapFlags(r->handle, flags);
    if (e != cudaSuccess) return glt_cuda_fail(e, "cudaGraphicsResourceSetMapFlags", "%s %u", r->kind, r->name);
    r->map_flags = flags;
    return GLT_OK;
}

/* Words a failed call with the caller's format. */
static glt_status fail_with(cudaError_t e, const char *call, const char *fmt, va_list ap) {
    char what[512];
    vsnprintf(what, sizeof what, fmt, ap);
    return glt_cuda_fail(e, call, "%s", what);
}

glt_status glt_cuda_resource_map(glt_cuda_resource *r, cudaStream_t stream, const char *fmt, ...) {
    cudaError_t e = cudaGraphicsMapResources(1, &r->handle, stream);
    if (e == cudaSuccess) return GLT_OK;
    va_list ap;
    va_start(ap, fmt);
    glt_status st = fail_with(e, "cudaGraphicsMapResources", fmt, ap);
    va_end(ap);
    return st;
}

glt_status glt_cuda_resource_pointer(glt_cuda_resource *r, void **data, size_t *size) {
    cudaError_t e = cudaGraphicsResourceGetMappedPointer(data, size, r->handle);
    if (e != cudaSuccess) return glt_cuda_fail(e, "cudaGraphicsResourceGetMappedPointer", "%s %u", r->kind, r->name);
    return GLT_OK;
}

glt_status glt_cuda_resource_array(glt_cuda_resource *r, cudaArray_t *array) {
    cudaError_t e = cudaGraphicsSubResourceGetMappedArray(array, r->handle, 0, 0);
    if (e != cudaSuccess) return glt_cuda_fail(e, "cudaGraphicsSubResourceGetMappedArray", "%s %u", r->kind, r->name);
    return GLT_OK;
}

glt_status glt_cuda_resource_unmap(glt_cuda_resource *r, cudaStream_t stream, glt_status so_far, const char *fmt,
                                   ...) {
    cudaError_t e = cudaGraphicsUnmapResources(1, &r->handle, stream);
    if (e == cudaSuccess || so_far != GLT_OK) return so_far;
    va_list ap;
    va_start(ap, fmt);
    glt_status st = fail_with(e, "cudaGraphicsUnmapResources", fmt, ap);
    va_end(ap);
    return st;
}

void glt_cuda_resource_release(glt_cuda_resource *r, int unregister) {
    if (unregister) cudaGraphicsUnregisterResource(r->handle);
    cudaGetLastError();
}

void glt_cuda_resource_drop(void *owner, int unregister, void (*release)(void *owner, int unregister)) {
    if (!owner) return;
    release(owner, unregister);
    free(owner);
}

glt_status glt_cuda_check_array(cudaArray_t array, const glt_format *fmt, int width, int height, int check_kind,
                                const char *what, unsigned name, glt_cuda_array_layout *out) {
    struct cudaChannelFormatDesc d;
    struct cudaExtent ext;
    unsigned int flags;
    cudaError_t e = cudaArrayGetInfo(&d, &ext, &flags, array);
    if (e != cudaSuccess) return glt_cuda_fail(e, "cudaArrayGetInfo", "inspecting the mapped array of %s %u", what, name);
    int bits[4] = {d.x, d.y, d.z, d.w};
    int channels = 0;
    for (int i = 0; i < 4; ++i) channels += bits[i] > 0;
    int elem = d.x / 8;
    int is_float = d.f == cudaChannelFormatKindFloat;
    int want_float = fmt->dtype == GLT_DTYPE_FLOAT16 || fmt->dtype == GLT_DTYPE_FLOAT32;
    if ((size_t)elem != glt_dtype_size(fmt->dtype) || channels < fmt->channels || channels == 3 ||
        (check_kind && is_float != want_float) || (int)ext.width != width || (int)ext.height != height)
        return glt_fail(GLT_UNSUPPORTED_FORMAT,
                        "%s %u is %s %dx%d in GL, but CUDA mapped it as a %zux%zu array of %d channel(s) of %d "
                        "bits (%s); please report this with your GPU and driver, and use backend='cpu' meanwhile",
                        what, name, fmt->name, width, height, ext.width, ext.height, channels, d.x,
                        is_float ? "float" : "integer");
    out->channels = channels;
    out->elem_bytes = elem;
    out->is_float = is_float;
    return GLT_OK;
}

#endif
