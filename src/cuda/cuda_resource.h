/* One GL object registered with CUDA (cudaGraphicsResource): what the capture's images and depth buffers,
 * the upload's textures and the mapped buffers each embed in their own struct. Registering, map flags,
 * mapping, reaching the mapped memory, unmapping and letting the registration go are written here once;
 * each owner adds what it keeps around a map (texture or surface objects, events, staging memory).
 *
 * Every function but glt_cuda_resource_drop runs on the device its caller entered (ON_DEVICE(r->device),
 * cuda_device.h). Failures are worded "CALL failed (cudaErrorX: text): <kind> <name>", or with the caller's
 * words where it passes them. */
#ifndef GLT_CUDA_RESOURCE_H
#define GLT_CUDA_RESOURCE_H

#include "cuda/cuda_device.h"

typedef struct glt_cuda_resource {
    cudaGraphicsResource_t handle;
    int device;
    GLuint name;
    const char *kind;       /* names the object in messages: "texture", "renderbuffer", "buffer", ... */
    unsigned int map_flags; /* as last set on the handle */
} glt_cuda_resource;

/* Registers GL image `name` of `target` (cudaGraphicsGLRegisterImage) or, when target is 0, the buffer object
 * `name` (cudaGraphicsGLRegisterBuffer), with `flags`. Returns CUDA's answer for the caller to word (its own
 * words name what the object is for), with CUDA's error left set; r->handle is usable only on cudaSuccess. */
cudaError_t glt_cuda_resource_register(glt_cuda_resource *r, int device, GLuint name, GLenum target,
                                       unsigned int flags, const char *kind);
/* Sets the map flags (cudaGraphicsMapFlags*) the next map uses, when they differ from the last ones set. */
glt_status glt_cuda_resource_set_map_flags(glt_cuda_resource *r, unsigned int flags);
/* Maps on stream; a failure is worded with fmt. */
glt_status glt_cuda_resource_map(glt_cuda_resource *r, cudaStream_t stream, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The mapped memory of a buffer / the mapped array of an image (level 0, layer 0). */
glt_status glt_cuda_resource_pointer(glt_cuda_resource *r, void **data, size_t *size);
glt_status glt_cuda_resource_array(glt_cuda_resource *r, cudaArray_t *array);
/* Unmaps on stream. Where the work between map and unmap already failed (so_far is not GLT_OK), that
 * failure stays the one reported and the unmap's is not worded; else a failure is worded with fmt. */
glt_status glt_cuda_resource_unmap(glt_cuda_resource *r, cudaStream_t stream, glt_status so_far, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Lets the registration go: unregistered when `unregister` (needs its GL context current, and the work that
 * used it done or on a stream synchronised first: glt_cuda_settle), else left to the driver, which drops it
 * with its GL context (forgetting an object whose context cannot be made current, where
 * cudaGraphicsUnregisterResource fails with cudaErrorInvalidGraphicsContext). Clears CUDA's error either way. */
void glt_cuda_resource_release(glt_cuda_resource *r, int unregister);
/* The end of every owner's life, unregistering or forgetting (unregister 0): the owner's `release` (which
 * enters its device, lets go of what it keeps around its maps and ends with glt_cuda_resource_release), then
 * free(owner), even where the device could not be entered. A NULL owner does nothing. */
void glt_cuda_resource_drop(void *owner, int unregister, void (*release)(void *owner, int unregister));

/* What CUDA made of a mapped GL image, checked against what its GL format promises (channels, bytes per
 * channel, float or integer where check_kind, size). `what` and `name` name the object in the message; a
 * mismatch is a driver surprise, reported as such. */
typedef struct glt_cuda_array_layout {
    int channels, elem_bytes, is_float;
} glt_cuda_array_layout;
glt_status glt_cuda_check_array(cudaArray_t array, const glt_format *fmt, int width, int height, int check_kind,
                                const char *what, unsigned name, glt_cuda_array_layout *out);

#endif
