/*
 * The CUDA backend: register a GL image with CUDA once, and per read map it, copy
 * the CUDA array into linear device memory on one stream, and unmap.
 *
 * The copy is cudaMemcpy2DFromArrayAsync when the array's rows can be copied as
 * they are; otherwise (rows flipped to top-first, or an array with more channels
 * than the format, as RGB8 stored as RGBX) one kernel reads the array through a
 * texture object and writes the final layout, so no second pass is ever needed.
 *
 * This file and cuda_vmm.c (exportable memory for shared slots) are the only ones that call CUDA. Every
 * entry point that does so on an object's behalf starts with ON_DEVICE(the object's device, cuda_device.h): that device is current for the rest of the function and
 * the caller's is restored on every return. Allocations, events, streams, kernel launches and
 * map/unmap therefore always run on the object's GPU, whatever device the calling thread (torch, a
 * frame released on another thread) had current. tests/test_device_guard.py checks the rule.
 */
#include "internal.h"

#ifdef GLT_WITH_CUDA

#include "cuda_device.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* cuda_gl_interop.h pulls in GL/gl.h, which the build machine may lack: declare the two calls we need. */
enum glt_cudaGLDeviceList { glt_cudaGLDeviceListAll = 1 };
extern cudaError_t cudaGLGetDevices(unsigned int *pCudaDeviceCount, int *pCudaDevices, unsigned int cudaDeviceCount,
                                    enum glt_cudaGLDeviceList deviceList);
extern cudaError_t cudaGraphicsGLRegisterImage(struct cudaGraphicsResource **resource, unsigned int image,
                                               unsigned int target, unsigned int flags);
extern cudaError_t cudaGraphicsGLRegisterBuffer(struct cudaGraphicsResource **resource, unsigned int buffer,
                                                unsigned int flags);

struct glt_cuda_image {
    cudaGraphicsResource_t resource;
    int device;
    GLuint name;
    GLenum target;
    int width, height;
    const glt_format *fmt;
    /* What the mapped array holds, learned at the first map and kept while the array stays the same. */
    cudaArray_t array;
    cudaTextureObject_t texture;
    int array_channels, elem_bytes, array_is_float;
};

glt_status glt_device_guard_enter(glt_device_guard *g, int device) {
    g->changed = 0;
    g->previous = device;
    if (cudaGetDevice(&g->previous) != cudaSuccess) g->previous = device;
    if (g->previous != device) {
        cudaError_t e = cudaSetDevice(device);
        if (e != cudaSuccess) {
            cudaGetLastError();
            return glt_fail(GLT_CUDA_ERROR, "cudaSetDevice(%d) failed (%s: %s)", device, cudaGetErrorName(e),
                            cudaGetErrorString(e));
        }
        g->changed = 1;
    }
    return GLT_OK;
}

/* The driver's primary-context query, reached through the runtime (linking libcuda would make the
 * library unloadable without a driver). */
typedef int (*cu_device_get_fn)(int *device, int ordinal);
typedef int (*cu_primary_ctx_state_fn)(int device, unsigned int *flags, int *active);
static pthread_once_t driver_entries_once = PTHREAD_ONCE_INIT;
static cu_device_get_fn cu_device_get;
static cu_primary_ctx_state_fn cu_primary_ctx_state;

static void load_driver_entries(void) {
    enum cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuDeviceGet", (void **)&cu_device_get, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
        cu_device_get = NULL;
    if (cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", (void **)&cu_primary_ctx_state, 12000,
                                         cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
        cu_primary_ctx_state = NULL;
    cudaGetLastError();
}

/* 1 when making `device` current creates no CUDA context (its primary context is active already), or
 * when that cannot be told. */
static int primary_context_active(int device) {
    pthread_once(&driver_entries_once, load_driver_entries);
    int dev = 0, active = 0;
    unsigned int flags = 0;
    if (!cu_device_get || !cu_primary_ctx_state || cu_device_get(&dev, device) != 0 ||
        cu_primary_ctx_state(dev, &flags, &active) != 0)
        return 1;
    return active;
}

void glt_device_guard_exit(glt_device_guard *g) {
    /* The caller gets its device back unless no CUDA context exists there yet: since CUDA 12,
     * cudaSetDevice creates the device's context, so restoring a device the thread never used (0, by
     * default) would make every process that captures on GPU k also hold a context on GPU 0. The thread
     * then stays on the capture's device, as torch's own device guard leaves it. */
    if (g->changed && primary_context_active(g->previous)) cudaSetDevice(g->previous);
    g->changed = 0;
}


glt_status glt_cuda_fail(cudaError_t e, const char *call, const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    cudaGetLastError(); /* clear the sticky-free error so later calls are not blamed */
    return glt_fail(GLT_CUDA_ERROR, "%s failed (%s: %s): %s", call, cudaGetErrorName(e), cudaGetErrorString(e), what);
}

/* Device-agnostic queries (no object, no device yet): cudaGetDeviceCount and cudaGLGetDevices create no
 * CUDA context, so they run on whatever device is current without touching it. */
glt_status glt_cuda_probe(int *device_count) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (device_count) *device_count = (e == cudaSuccess) ? n : 0;
    if (e != cudaSuccess) {
        cudaGetLastError();
        return glt_fail(GLT_CUDA_UNAVAILABLE,
                        "CUDA is unavailable: cudaGetDeviceCount failed (%s: %s); install the NVIDIA driver or "
                        "use the CPU backend",
                        cudaGetErrorName(e), cudaGetErrorString(e));
    }
    if (n == 0)
        return glt_fail(GLT_CUDA_UNAVAILABLE, "CUDA is unavailable: no CUDA device is visible (check "
                                              "CUDA_VISIBLE_DEVICES); use the CPU backend");
    return GLT_OK;
}

glt_status glt_cuda_device_of_current_context(int *cuda_device) {
    glt_status st = glt_cuda_probe(NULL);
    if (st != GLT_OK) return st;
    unsigned int count = 0;
    int devices[16];
    cudaError_t e = cudaGLGetDevices(&count, devices, 16, glt_cudaGLDeviceListAll);
    if (e != cudaSuccess || count == 0) {
        cudaGetLastError();
        const glt_gl *gl = glt_gl_load();
        const GLubyte *r = gl ? gl->GetString(GL_RENDERER) : NULL;
        return glt_fail(GLT_WRONG_DEVICE,
                        "the current OpenGL context (renderer \"%s\") does not run on a CUDA device "
                        "(cudaGLGetDevices: %s); create the context on the NVIDIA GPU (gltensor.Context.headless, "
                        "or EGL device with EGL_CUDA_DEVICE_NV) or use the CPU backend",
                        r ? (const char *)r : "unknown", e == cudaSuccess ? "no device" : cudaGetErrorName(e));
    }
    *cuda_device = devices[0];
    return GLT_OK;
}

glt_status glt_cuda_image_register(GLuint name, GLenum target, int cuda_device, const glt_format *fmt, int width,
                                   int height, glt_cuda_image **out) {
    ON_DEVICE(cuda_device);
    glt_cuda_image *img = calloc(1, sizeof *img);
    if (!img) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    img->device = cuda_device;
    img->name = name;
    img->target = target;
    img->fmt = fmt;
    img->width = width;
    img->height = height;
    const char *kind = target == GL_RENDERBUFFER ? "renderbuffer" : "texture";
    cudaError_t e = cudaGraphicsGLRegisterImage(&img->resource, name, target, cudaGraphicsRegisterFlagsReadOnly);
    if (e != cudaSuccess) {
        free(img);
        return glt_cuda_fail(e, "cudaGraphicsGLRegisterImage",
                         "%s %u (%s, %dx%d, %s) could not be registered with CUDA device %d; check that the GL "
                         "context is current and runs on that GPU, and that the image has storage",
                         kind, name, fmt->name, width, height, glt_target_name(target), cuda_device);
    }
    *out = img;
    return GLT_OK;
}

/* unregister = 0: the image's GL context cannot be made current (destroyed, GLX, another thread's), where
 * cudaGraphicsUnregisterResource fails (cudaErrorInvalidGraphicsContext); the driver drops the
 * registration with the context. */
static void image_release(glt_cuda_image *img, int unregister) {
    ON_DEVICE_OR(img->device, );
    if (img->texture) cudaDestroyTextureObject(img->texture);
    if (unregister) cudaGraphicsUnregisterResource(img->resource);
    cudaGetLastError();
}

void glt_cuda_image_unregister(glt_cuda_image *img) {
    if (!img) return;
    image_release(img, 1);
    free(img);
}

void glt_cuda_image_forget(glt_cuda_image *img) {
    if (!img) return;
    image_release(img, 0);
    free(img);
}

/* What CUDA made of a mapped GL image: checked against what its GL format promises (channels, bytes per
 * channel, float or integer where check_kind, size). `what` and `name` name the object in the message; a
 * mismatch is a driver surprise, reported as such. */
typedef struct {
    int channels, elem_bytes, is_float;
} array_layout;

static glt_status check_array(cudaArray_t array, const glt_format *fmt, int width, int height, int check_kind,
                              const char *what, unsigned name, array_layout *out) {
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

/* Learns the mapped array's layout and checks it can hold what the GL format promises. */
static glt_status learn_array(glt_cuda_image *img, cudaArray_t array) {
    array_layout l;
    glt_status st = check_array(array, img->fmt, img->width, img->height, 1, "image", img->name, &l);
    if (st != GLT_OK) return st;
    if (img->texture) {
        cudaDestroyTextureObject(img->texture);
        img->texture = 0;
    }
    img->array = array;
    img->array_channels = l.channels;
    img->elem_bytes = l.elem_bytes;
    img->array_is_float = l.is_float;
    return GLT_OK;
}

static glt_status ensure_texture(glt_cuda_image *img) {
    if (img->texture) return GLT_OK;
    struct cudaResourceDesc res;
    memset(&res, 0, sizeof res);
    res.resType = cudaResourceTypeArray;
    res.res.array.array = img->array;
    struct cudaTextureDesc tex;
    memset(&tex, 0, sizeof tex);
    tex.addressMode[0] = tex.addressMode[1] = cudaAddressModeClamp;
    tex.filterMode = cudaFilterModePoint;
    tex.readMode = cudaReadModeElementType; /* raw values: no normalisation of 8/16-bit channels */
    tex.normalizedCoords = 0;
    cudaError_t e = cudaCreateTextureObject(&img->texture, &res, &tex, NULL);
    if (e != cudaSuccess) {
        img->texture = 0;
        return glt_cuda_fail(e, "cudaCreateTextureObject", "reading image %u (%s) through a texture", img->name,
                         img->fmt->name);
    }
    return GLT_OK;
}

static const char *kind_of(const glt_cuda_image *img) {
    return img->target == GL_RENDERBUFFER ? "renderbuffer" : "texture";
}

/* Two regions can share a launch when the kernel sees the same shapes, types and conversions. */
static int same_launch(const glt_cuda_region *a, const glt_cuda_region *b) {
    return a->spec == b->spec && a->width == b->width && a->height == b->height && a->pitch == b->pitch &&
           a->plane == b->plane && a->img->array_channels == b->img->array_channels &&
           a->img->elem_bytes == b->img->elem_bytes && a->img->array_is_float == b->img->array_is_float &&
           a->img->fmt == b->img->fmt;
}

/* A plain 2D copy suffices: one region, unflipped, no conversion, and the array holds what the format says. */
static int plain_copy(const glt_cuda_region *r, int n, int flip) {
    return n == 1 && !flip && r->spec->raw && r->img->array_channels == r->img->fmt->channels;
}

/* Copies the regions of already-mapped images: a 2D copy when plain_copy(), else the gather kernel,
 * one launch per run of alike regions. */
static glt_status copy_mapped(const glt_cuda_region *regions, int n, int flip, cudaStream_t stream) {
    const glt_cuda_region *r0 = &regions[0];
    if (plain_copy(r0, n, flip)) {
        size_t bpp = (size_t)r0->img->fmt->channels * r0->img->elem_bytes;
        cudaError_t e = cudaMemcpy2DFromArrayAsync(r0->dst, r0->pitch, r0->img->array, (size_t)r0->x0 * bpp,
                                                   (size_t)r0->y0, (size_t)r0->width * bpp, (size_t)r0->height,
                                                   cudaMemcpyDeviceToDevice, stream);
        if (e != cudaSuccess)
            return glt_cuda_fail(e, "cudaMemcpy2DFromArrayAsync", "copying %s %u (%dx%d %s)", kind_of(r0->img),
                             r0->img->name, r0->width, r0->height, r0->img->fmt->name);
        return GLT_OK;
    }
    glt_gather_item items[64];
    for (int first = 0; first < n;) {
        int end = first;
        while (end < n && end - first < 64 && same_launch(&regions[first], &regions[end])) {
            const glt_cuda_region *r = &regions[end];
            glt_gather_item *it = &items[end - first];
            it->texture = r->img->texture;
            it->x0 = r->x0;
            it->y0 = r->y0;
            it->dst = r->dst;
            ++end;
        }
        const glt_cuda_region *r = &regions[first];
        const glt_cuda_image *img = r->img;
        glt_gather_spec sp;
        sp.array_channels = img->array_channels;
        sp.elem_bytes = img->elem_bytes;
        sp.array_is_float = img->array_is_float;
        sp.kind = r->spec->kind;
        sp.out_type = r->spec->out_type;
        sp.out_channels = r->spec->channels;
        for (int c = 0; c < 4; ++c) sp.map[c] = r->spec->map[c];
        sp.chw = r->spec->order == GLT_ORDER_CHW;
        sp.width = r->width;
        sp.height = r->height;
        sp.flip = flip;
        sp.pitch = r->pitch;
        sp.plane = r->plane;
        int rc = glt_launch_gather(items, end - first, &sp, stream);
        if (rc != 0)
            return glt_cuda_fail((cudaError_t)rc, "copy kernel launch", "%s %u (%s), %d region(s)", kind_of(img),
                             img->name, img->fmt->name, end - first);
        first = end;
    }
    return GLT_OK;
}

glt_status glt_cuda_copy_regions(glt_cuda_image *const *images, int n_images, const glt_cuda_region *regions,
                                 int n_regions, int flip, void *stream_arg, void *const *ready_events, int n_ready) {
    if (n_images <= 0 || n_regions <= 0) return GLT_OK;
    cudaStream_t stream = (cudaStream_t)stream_arg;
    int device = images[0]->device;
    ON_DEVICE(device);
    glt_status st = GLT_OK;
    for (int i = 1; i < n_images; ++i)
        if (images[i]->device != device)
            return glt_fail(GLT_WRONG_DEVICE, "%s %u is registered with CUDA device %d, %s %u with device %d; one "
                                              "read maps images of one device only",
                            kind_of(images[0]), images[0]->name, device, kind_of(images[i]), images[i]->name,
                            images[i]->device);
    cudaGraphicsResource_t local[32];
    cudaGraphicsResource_t *res = n_images <= 32 ? local : malloc(sizeof *res * (size_t)n_images);
    if (!res) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    for (int i = 0; i < n_images; ++i) res[i] = images[i]->resource;
    /* The one handoff: every image in a single map call, whatever their number. */
    cudaError_t e = cudaGraphicsMapResources(n_images, res, stream);
    if (e != cudaSuccess) {
        st = glt_cuda_fail(e, "cudaGraphicsMapResources",
                       "%d image(s) starting with %s %u; make sure their GL context is current, the stream belongs "
                       "to CUDA device %d, and no image is mapped elsewhere",
                       n_images, kind_of(images[0]), images[0]->name, device);
        goto out;
    }
    for (int i = 0; i < n_images && st == GLT_OK; ++i) {
        cudaArray_t array = NULL;
        e = cudaGraphicsSubResourceGetMappedArray(&array, images[i]->resource, 0, 0);
        if (e != cudaSuccess)
            st = glt_cuda_fail(e, "cudaGraphicsSubResourceGetMappedArray", "%s %u", kind_of(images[i]), images[i]->name);
        else if (array != images[i]->array)
            st = learn_array(images[i], array);
        if (st == GLT_OK && !plain_copy(regions, n_regions, flip)) st = ensure_texture(images[i]);
    }
    if (st == GLT_OK) st = copy_mapped(regions, n_regions, flip, stream);
    for (int i = 0; i < n_ready && st == GLT_OK; ++i) {
        e = ready_events[i] ? cudaEventRecord((cudaEvent_t)ready_events[i], stream) : cudaSuccess;
        if (e != cudaSuccess) st = glt_cuda_fail(e, "cudaEventRecord", "marking a frame's copy as done");
    }
    e = cudaGraphicsUnmapResources(n_images, res, stream);
    if (e != cudaSuccess && st == GLT_OK)
        st = glt_cuda_fail(e, "cudaGraphicsUnmapResources", "%d image(s) starting with %s %u", n_images,
                       kind_of(images[0]), images[0]->name);
out:
    if (res != local) free(res);
    return st;
}

glt_status glt_cuda_wait_event(void *consumer, void *event, int cuda_device) {
    return glt_cuda_wait_events(consumer, &event, 1, cuda_device);
}

glt_status glt_cuda_wait_events(void *consumer, void *const *events, int n, int cuda_device) {
    ON_DEVICE(cuda_device);
    for (int i = 0; i < n; ++i) {
        if (!events[i]) continue;
        cudaError_t e = cudaStreamWaitEvent((cudaStream_t)consumer, (cudaEvent_t)events[i], 0);
        if (e != cudaSuccess)
            return glt_cuda_fail(e, "cudaStreamWaitEvent",
                             "making stream %p wait for a frame's copy; pass a live CUDA stream of device %d",
                             consumer, cuda_device);
    }
    return GLT_OK;
}

glt_status glt_cuda_record_event(void *event, void *stream, int cuda_device) {
    ON_DEVICE(cuda_device);
    cudaError_t e = cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream);
    if (e != cudaSuccess) return glt_cuda_fail(e, "cudaEventRecord", "marking a frame's copy as done");
    return GLT_OK;
}

glt_status glt_cuda_stream_sync(void *stream, int cuda_device) {
    ON_DEVICE(cuda_device);
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)stream);
    if (e != cudaSuccess) return glt_cuda_fail(e, "cudaStreamSynchronize", "waiting for a frame's copy");
    return GLT_OK;
}

glt_status glt_cuda_device_sync(int cuda_device) {
    ON_DEVICE(cuda_device);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) return glt_cuda_fail(e, "cudaDeviceSynchronize", "waiting for reads in flight");
    return GLT_OK;
}

glt_status glt_cuda_copy_linear(void *dst, const void *src, size_t bytes, void *stream, int cuda_device) {
    ON_DEVICE(cuda_device);
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)stream);
    if (e != cudaSuccess) return glt_cuda_fail(e, "cudaMemcpyAsync", "copying a %zu-byte frame", bytes);
    return GLT_OK;
}

/* ---- device memory and events of the frame pool ---- */

glt_status glt_cuda_alloc(int cuda_device, size_t bytes, void **out) {
    ON_DEVICE(cuda_device);
    cudaError_t e = cudaMalloc(out, bytes);
    if (e != cudaSuccess) {
        *out = NULL;
        cudaGetLastError();
        return glt_fail(GLT_OUT_OF_MEMORY,
                        "cudaMalloc of a %zu-byte frame failed (%s) on CUDA device %d; free frames you no longer "
                        "need (each live frame holds its own buffer)",
                        bytes, cudaGetErrorName(e), cuda_device);
    }
    return GLT_OK;
}

void glt_cuda_block_free(int cuda_device, void *data, void *const *events, int n_events, int n_pending, void *ready) {
    ON_DEVICE_OR(cuda_device, );
    for (int i = 0; i < n_pending; ++i)
        if (events[i]) cudaEventSynchronize((cudaEvent_t)events[i]);
    for (int i = 0; i < n_events; ++i)
        if (events[i]) cudaEventDestroy((cudaEvent_t)events[i]);
    if (ready) cudaEventDestroy((cudaEvent_t)ready);
    cudaFree(data);
    cudaGetLastError();
}

glt_status glt_cuda_event_create(int cuda_device, void **event) {
    ON_DEVICE(cuda_device);
    cudaError_t e = cudaEventCreateWithFlags((cudaEvent_t *)event, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        *event = NULL;
        return glt_cuda_fail(e, "cudaEventCreateWithFlags", "an event to order a frame's reuse on CUDA device %d",
                         cuda_device);
    }
    return GLT_OK;
}

int glt_cuda_event_done(int cuda_device, void *event) {
    ON_DEVICE_OR(cuda_device, 1);
    cudaError_t e = cudaEventQuery((cudaEvent_t)event);
    if (e == cudaErrorNotReady) return 0;
    if (e != cudaSuccess) cudaGetLastError(); /* a failed event orders nothing: treat as done */
    return 1;
}

int glt_cuda_mark_stream_uses(int cuda_device, int sync_device, void *const *streams, int n_streams, void **events) {
    ON_DEVICE_OR(cuda_device, 0);
    if (sync_device) cudaDeviceSynchronize(); /* more users than event slots: wait for all of them here */
    int recorded = 0;
    for (int i = 0; i < n_streams; ++i) {
        if (!events[recorded] &&
            cudaEventCreateWithFlags((cudaEvent_t *)&events[recorded], cudaEventDisableTiming) != cudaSuccess) {
            /* No event to order the reuse by: wait here instead. */
            events[recorded] = NULL;
            cudaStreamSynchronize((cudaStream_t)streams[i]);
            continue;
        }
        cudaEventRecord((cudaEvent_t)events[recorded], (cudaStream_t)streams[i]);
        recorded++;
    }
    cudaGetLastError(); /* a consumer stream destroyed meanwhile must not poison later calls */
    return recorded;
}

struct glt_cuda_buffer {
    cudaGraphicsResource_t resource;
    int device;
    GLuint name;
};

glt_status glt_cuda_buffer_register(GLuint buffer, int cuda_device, glt_cuda_buffer **out) {
    ON_DEVICE(cuda_device);
    glt_cuda_buffer *b = calloc(1, sizeof *b);
    if (!b) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    b->device = cuda_device;
    b->name = buffer;
    cudaError_t e = cudaGraphicsGLRegisterBuffer(&b->resource, buffer, cudaGraphicsRegisterFlagsReadOnly);
    if (e != cudaSuccess) {
        free(b);
        return glt_cuda_fail(e, "cudaGraphicsGLRegisterBuffer", "the depth readback buffer %u on CUDA device %d", buffer,
                         cuda_device);
    }
    *out = b;
    return GLT_OK;
}

static void buffer_release(glt_cuda_buffer *b, int unregister) { /* unregister: as image_release */
    ON_DEVICE_OR(b->device, );
    if (unregister) cudaGraphicsUnregisterResource(b->resource);
    cudaGetLastError();
}

void glt_cuda_buffer_unregister(glt_cuda_buffer *b) {
    if (!b) return;
    buffer_release(b, 1);
    free(b);
}

void glt_cuda_buffer_forget(glt_cuda_buffer *b) {
    if (!b) return;
    buffer_release(b, 0);
    free(b);
}

glt_status glt_cuda_depth_copy(glt_cuda_buffer *b, int width, int height, const glt_out_spec *spec, int flip,
                               void *dst, size_t pitch, void *stream, void *ready_event) {
    ON_DEVICE(b->device);
    glt_status st = GLT_OK;
    cudaError_t e = cudaGraphicsMapResources(1, &b->resource, (cudaStream_t)stream);
    if (e != cudaSuccess)
        return glt_cuda_fail(e, "cudaGraphicsMapResources", "the depth readback buffer %u; make sure its GL context is "
                                                        "current",
                         b->name);
    void *src = NULL;
    size_t size = 0;
    e = cudaGraphicsResourceGetMappedPointer(&src, &size, b->resource);
    if (e != cudaSuccess)
        st = glt_cuda_fail(e, "cudaGraphicsResourceGetMappedPointer", "the depth readback buffer %u", b->name);
    else if (size < (size_t)width * height * sizeof(float))
        st = glt_fail(GLT_CUDA_ERROR, "the depth readback buffer %u holds %zu bytes, fewer than %dx%d floats", b->name,
                      size, width, height);
    else {
        int rc = glt_launch_depth(src, width, height, flip, spec->depth_mode, spec->near_plane, spec->far_plane, dst,
                                  pitch, stream);
        if (rc != 0) st = glt_cuda_fail((cudaError_t)rc, "depth kernel launch", "%dx%d depth", width, height);
        else if (ready_event && (e = cudaEventRecord((cudaEvent_t)ready_event, (cudaStream_t)stream)) != cudaSuccess)
            st = glt_cuda_fail(e, "cudaEventRecord", "marking a depth frame's copy as done");
    }
    e = cudaGraphicsUnmapResources(1, &b->resource, (cudaStream_t)stream);
    if (e != cudaSuccess && st == GLT_OK) st = glt_cuda_fail(e, "cudaGraphicsUnmapResources", "depth buffer %u", b->name);
    return st;
}

/* 1 when the bytes a stream handle points at are mapped in this process. cudaStream_t is a pointer that
 * CUDA dereferences without checking, so a number that is no stream (a typo, a freed handle's neighbour,
 * a device pointer) would crash inside CUDA; msync on an unmapped page fails with ENOMEM instead of
 * faulting. A mapped pointer that is no stream still cannot be told apart: that stays the caller's to avoid. */
static int handle_memory_mapped(const void *handle) {
    static long page;
    if (!page) page = sysconf(_SC_PAGESIZE) > 0 ? sysconf(_SC_PAGESIZE) : 4096;
    uintptr_t first = (uintptr_t)handle & ~(uintptr_t)(page - 1);
    uintptr_t last = ((uintptr_t)handle + 63) & ~(uintptr_t)(page - 1);
    for (uintptr_t p = first; p <= last; p += (uintptr_t)page)
        if (msync((void *)p, (size_t)page, MS_ASYNC) != 0) return 0;
    return 1;
}

glt_status glt_cuda_check_stream(void *stream, int cuda_device) {
    if ((uintptr_t)stream <= 2) return GLT_OK; /* default, legacy default and per-thread default streams */
    if ((uintptr_t)stream < 4096 || !handle_memory_mapped(stream))
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "stream 0x%llx is not a CUDA stream (no stream object lives at that address); pass a "
                        "stream object (torch.cuda.Stream, cupy.cuda.Stream), its handle (.cuda_stream, .ptr), or "
                        "0/1/2 for CUDA's default streams",
                        (unsigned long long)(uintptr_t)stream);
    ON_DEVICE(cuda_device);
    int dev = -1;
    cudaError_t e = cudaStreamGetDevice((cudaStream_t)stream, &dev);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "stream 0x%llx is not a live CUDA stream (cudaStreamGetDevice: %s); pass a stream object "
                        "(torch.cuda.Stream, cupy.cuda.Stream) or its handle, and keep it alive while reading",
                        (unsigned long long)(uintptr_t)stream, cudaGetErrorName(e));
    }
    if (dev != cuda_device)
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "stream 0x%llx belongs to CUDA device %d, but the capture reads on device %d; pass a stream "
                        "of device %d",
                        (unsigned long long)(uintptr_t)stream, dev, cuda_device, cuda_device);
    return GLT_OK;
}

glt_status glt_cuda_pointer_device(const void *ptr, int query_device, int *cuda_device) {
    ON_DEVICE(query_device); /* any device answers; this one keeps the query from initialising device 0 */
    struct cudaPointerAttributes a;
    cudaError_t e = cudaPointerGetAttributes(&a, ptr);
    if (e != cudaSuccess || (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)) {
        cudaGetLastError();
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "out= points at %p, which is not CUDA device memory; allocate out on the capture's CUDA "
                        "device",
                        ptr);
    }
    *cuda_device = a.device;
    return GLT_OK;
}

int glt_cuda_build_runtime_version(void) { return CUDART_VERSION; }

int glt_cuda_driver_version(void) {
    int v = 0;
    if (cudaDriverGetVersion(&v) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return v;
}

/* Attribute queries and cudaDeviceGetPCIBusId create no context, so no device guard is needed. */
glt_status glt_cuda_describe_device(int cuda_device, char *name, size_t name_size, char *pci_bus_id,
                                    size_t pci_size, int *cc_major, int *cc_minor) {
    struct cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, cuda_device);
    if (e != cudaSuccess) return glt_cuda_fail(e, "cudaGetDeviceProperties", "CUDA device %d", cuda_device);
    snprintf(name, name_size, "%s", prop.name);
    *cc_major = prop.major;
    *cc_minor = prop.minor;
    e = cudaDeviceGetPCIBusId(pci_bus_id, (int)pci_size, cuda_device);
    if (e != cudaSuccess) return glt_cuda_fail(e, "cudaDeviceGetPCIBusId", "CUDA device %d", cuda_device);
    return GLT_OK;
}

/* ---- upload.c: textures registered for writing, written through a surface object ---- */

struct glt_cuda_surface {
    cudaGraphicsResource_t resource;
    int device;
    GLuint name;
    GLenum target;
    int width, height;
    const glt_format *fmt;
    unsigned int map_flags; /* as last set on the resource */
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
    s->device = cuda_device;
    s->name = name;
    s->target = target;
    s->fmt = fmt;
    s->width = width;
    s->height = height;
    s->map_flags = cudaGraphicsMapFlagsNone;
    /* Surface load/store is what lets a kernel write the mapped array; whether the old contents may
     * be discarded is decided per write through the map flags (whole image or a region). */
    /* GLTENSOR_UPLOAD_PATH=copy forces the linear path below (tests run both paths on one driver). */
    cudaError_t e = glt_env_choice(GLT_ENV_UPLOAD_PATH) == 1 /* copy */
                        ? cudaErrorNotSupported
                        : cudaGraphicsGLRegisterImage(&s->resource, name, target,
                                                      cudaGraphicsRegisterFlagsSurfaceLoadStore);
    if (e != cudaSuccess) {
        cudaGetLastError();
        e = cudaGraphicsGLRegisterImage(&s->resource, name, target, cudaGraphicsRegisterFlagsNone);
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

static void surface_release(glt_cuda_surface *s, int unregister) {
    ON_DEVICE_OR(s->device, );
    /* A write still in flight goes through the registration: let it land first (the caller's stream
     * may be gone by now, so a stream other than CUDA's defaults is waited for through the device). */
    if (s->wrote) {
        if ((uintptr_t)s->last_stream <= 2) cudaStreamSynchronize((cudaStream_t)s->last_stream);
        else cudaDeviceSynchronize();
    }
    if (s->surface) cudaDestroySurfaceObject(s->surface);
    cudaFree(s->scratch);
    if (s->scratch_done) cudaEventDestroy(s->scratch_done);
    if (unregister) cudaGraphicsUnregisterResource(s->resource); /* needs the texture's GL context current */
    cudaGetLastError();
}

void glt_cuda_surface_unregister(glt_cuda_surface *s) {
    if (!s) return;
    surface_release(s, 1);
    free(s);
}

void glt_cuda_surface_forget(glt_cuda_surface *s) {
    if (!s) return;
    surface_release(s, 0);
    free(s);
}

/* Learns the mapped array's layout, checks it holds what the format promises, makes its surface. */
static glt_status learn_surface(glt_cuda_surface *s, cudaArray_t array) {
    array_layout l;
    glt_status st = check_array(array, s->fmt, s->width, s->height, 0, "texture", s->name, &l);
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
        return glt_cuda_fail(e, "cudaCreateSurfaceObject", "writing texture %u (%s) through a surface", s->name,
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
        return glt_cuda_fail(e, "cudaEventCreateWithFlags", "ordering writes into texture %u", s->name);
    /* The previous write may have been issued on another stream and still read the scratch. */
    if ((e = cudaStreamWaitEvent(stream, s->scratch_done, 0)) != cudaSuccess)
        return glt_cuda_fail(e, "cudaStreamWaitEvent", "ordering writes into texture %u", s->name);
    if (s->scratch_size < need) {
        if (s->scratch) {
            cudaStreamSynchronize(stream); /* ordered after the last write above: it is done with the scratch */
            cudaFree(s->scratch);
        }
        s->scratch = NULL;
        s->scratch_size = 0;
        e = cudaMalloc(&s->scratch, need);
        if (e != cudaSuccess)
            return glt_cuda_fail(e, "cudaMalloc", "a %zu-byte staging buffer for writing texture %u", need, s->name);
        s->scratch_size = need;
    }
    spec->dst = s->scratch;
    spec->dst_pitch = (long long)pitch;
    int rc = glt_launch_scatter(0, spec, stream);
    if (rc != 0)
        return glt_cuda_fail((cudaError_t)rc, "write kernel launch", "texture %u (%s), %dx%d region", s->name,
                         s->fmt->name, spec->width, spec->height);
    e = cudaMemcpy2DToArrayAsync(s->array, (size_t)spec->x0 * texel, (size_t)spec->y0, s->scratch, pitch, pitch,
                                 (size_t)spec->height, cudaMemcpyDeviceToDevice, stream);
    if (e != cudaSuccess)
        return glt_cuda_fail(e, "cudaMemcpy2DToArrayAsync", "texture %u (%s), %dx%d region", s->name, s->fmt->name,
                         spec->width, spec->height);
    if ((e = cudaEventRecord(s->scratch_done, stream)) != cudaSuccess)
        return glt_cuda_fail(e, "cudaEventRecord", "ordering writes into texture %u", s->name);
    return GLT_OK;
}

glt_status glt_cuda_surface_write(glt_cuda_surface *s, glt_scatter_spec *spec, int whole, void *stream) {
    ON_DEVICE(s->device);
    cudaStream_t st = (cudaStream_t)stream;
    unsigned int flags = whole ? cudaGraphicsMapFlagsWriteDiscard : cudaGraphicsMapFlagsNone;
    cudaError_t e;
    if (flags != s->map_flags) {
        e = cudaGraphicsResourceSetMapFlags(s->resource, flags);
        if (e != cudaSuccess) return glt_cuda_fail(e, "cudaGraphicsResourceSetMapFlags", "texture %u", s->name);
        s->map_flags = flags;
    }
    e = cudaGraphicsMapResources(1, &s->resource, st);
    if (e != cudaSuccess)
        return glt_cuda_fail(e, "cudaGraphicsMapResources",
                         "texture %u for writing; make sure its GL context is current and the stream belongs to CUDA "
                         "device %d",
                         s->name, s->device);
    glt_status result = GLT_OK;
    cudaArray_t array = NULL;
    e = cudaGraphicsSubResourceGetMappedArray(&array, s->resource, 0, 0);
    if (e != cudaSuccess) result = glt_cuda_fail(e, "cudaGraphicsSubResourceGetMappedArray", "texture %u", s->name);
    else if (array != s->array) result = learn_surface(s, array);
    if (result == GLT_OK) {
        spec->array_channels = s->array_channels; /* RGB8 is stored as RGBX: the fourth gets spec's alpha fill */
        spec->elem_bytes = s->elem_bytes;
        if (s->linear) {
            result = write_linear(s, spec, st);
        } else {
            int rc = glt_launch_scatter((unsigned long long)s->surface, spec, stream);
            if (rc != 0)
                result = glt_cuda_fail((cudaError_t)rc, "write kernel launch", "texture %u (%s), %dx%d region", s->name,
                                   s->fmt->name, spec->width, spec->height);
        }
    }
    e = cudaGraphicsUnmapResources(1, &s->resource, st);
    if (e != cudaSuccess && result == GLT_OK)
        result = glt_cuda_fail(e, "cudaGraphicsUnmapResources", "texture %u after writing", s->name);
    s->last_stream = stream;
    s->wrote = 1;
    return result;
}

glt_status glt_cuda_check_source(const void *ptr, int cuda_device, const char *what) {
    ON_DEVICE(cuda_device);
    struct cudaPointerAttributes a;
    cudaError_t e = cudaPointerGetAttributes(&a, ptr);
    if (e != cudaSuccess || (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)) {
        cudaGetLastError();
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "the source for %s points at %p, which is not CUDA device memory; pass a CUDA tensor of "
                        "device %d",
                        what, ptr, cuda_device);
    }
    if (a.type == cudaMemoryTypeDevice && a.device != cuda_device)
        return glt_fail(GLT_WRONG_DEVICE,
                        "the source for %s lives on CUDA device %d, but the texture's GL context runs on device %d; "
                        "move the tensor there first",
                        what, a.device, cuda_device);
    return GLT_OK;
}

/* ---- buffer.c: buffer objects mapped as linear device memory ---- */

#define GLT_MAPBUF_CONSUMERS 4

struct glt_cuda_mapbuf {
    cudaGraphicsResource_t resource;
    int device;
    GLuint name;
    unsigned int map_flags;
    int mapped;
    cudaStream_t stream;     /* of the current map */
    cudaEvent_t map_done;    /* recorded right after the map, for consumers on other streams */
    void *consumers[GLT_MAPBUF_CONSUMERS];
    cudaEvent_t consumer_done[GLT_MAPBUF_CONSUMERS];
    int n_consumers, overflow; /* overflow: more consumer streams than slots; the unmap waits for the device */
};

glt_status glt_cuda_mapbuf_register(GLuint name, int cuda_device, glt_cuda_mapbuf **out) {
    ON_DEVICE(cuda_device);
    glt_cuda_mapbuf *b = calloc(1, sizeof *b);
    if (!b) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    b->device = cuda_device;
    b->name = name;
    b->map_flags = cudaGraphicsMapFlagsNone;
    cudaError_t e = cudaGraphicsGLRegisterBuffer(&b->resource, name, cudaGraphicsRegisterFlagsNone);
    if (e != cudaSuccess) {
        free(b);
        return glt_cuda_fail(e, "cudaGraphicsGLRegisterBuffer",
                         "buffer %u could not be registered with CUDA device %d; check that its GL context is current "
                         "and runs on that GPU, and that the buffer has storage",
                         name, cuda_device);
    }
    e = cudaEventCreateWithFlags(&b->map_done, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        cudaGraphicsUnregisterResource(b->resource);
        free(b);
        return glt_cuda_fail(e, "cudaEventCreateWithFlags", "an event to order buffer %u's map", name);
    }
    *out = b;
    return GLT_OK;
}

static glt_status mapbuf_set_flags(glt_cuda_mapbuf *b, int mode) {
    unsigned int flags = mode == GLT_MAP_READ    ? cudaGraphicsMapFlagsReadOnly
                         : mode == GLT_MAP_WRITE ? cudaGraphicsMapFlagsWriteDiscard
                                                 : cudaGraphicsMapFlagsNone;
    if (flags == b->map_flags) return GLT_OK;
    cudaError_t e = cudaGraphicsResourceSetMapFlags(b->resource, flags);
    if (e != cudaSuccess) return glt_cuda_fail(e, "cudaGraphicsResourceSetMapFlags", "buffer %u", b->name);
    b->map_flags = flags;
    return GLT_OK;
}

/* Maps on the current device (the caller entered it). */
static glt_status mapbuf_map(glt_cuda_mapbuf *b, int mode, cudaStream_t stream, void **data, size_t *size) {
    glt_status st = mapbuf_set_flags(b, mode);
    if (st != GLT_OK) return st;
    cudaError_t e = cudaGraphicsMapResources(1, &b->resource, stream);
    if (e != cudaSuccess)
        return glt_cuda_fail(e, "cudaGraphicsMapResources",
                         "buffer %u; make sure its GL context is current and the stream belongs to CUDA device %d",
                         b->name, b->device);
    e = cudaGraphicsResourceGetMappedPointer(data, size, b->resource);
    if (e != cudaSuccess) {
        st = glt_cuda_fail(e, "cudaGraphicsResourceGetMappedPointer", "buffer %u", b->name);
        cudaGraphicsUnmapResources(1, &b->resource, stream);
        cudaGetLastError();
        return st;
    }
    b->mapped = 1;
    b->stream = stream;
    b->n_consumers = 0;
    b->overflow = 0;
    return GLT_OK;
}

static glt_status mapbuf_unmap(glt_cuda_mapbuf *b) {
    /* Work the consumers queued on their streams until now must be done before GL gets the memory back. */
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < b->n_consumers && e == cudaSuccess; ++i) {
        if (!b->consumer_done[i]) e = cudaEventCreateWithFlags(&b->consumer_done[i], cudaEventDisableTiming);
        if (e == cudaSuccess) e = cudaEventRecord(b->consumer_done[i], (cudaStream_t)b->consumers[i]);
        if (e == cudaSuccess) e = cudaStreamWaitEvent(b->stream, b->consumer_done[i], 0);
    }
    if (e != cudaSuccess || b->overflow) {
        cudaGetLastError(); /* a consumer stream destroyed meanwhile: wait for everything instead */
        cudaDeviceSynchronize();
    }
    b->mapped = 0;
    b->n_consumers = 0;
    e = cudaGraphicsUnmapResources(1, &b->resource, b->stream);
    if (e != cudaSuccess) return glt_cuda_fail(e, "cudaGraphicsUnmapResources", "buffer %u", b->name);
    return GLT_OK;
}

glt_status glt_cuda_mapbuf_map(glt_cuda_mapbuf *b, int mode, void *stream, void **data, size_t *size) {
    ON_DEVICE(b->device);
    glt_status st = mapbuf_map(b, mode, (cudaStream_t)stream, data, size);
    if (st != GLT_OK) return st;
    cudaError_t e = cudaEventRecord(b->map_done, (cudaStream_t)stream);
    if (e != cudaSuccess) {
        st = glt_cuda_fail(e, "cudaEventRecord", "marking buffer %u's map", b->name);
        mapbuf_unmap(b);
    }
    return st;
}

glt_status glt_cuda_mapbuf_consumer(glt_cuda_mapbuf *b, void *consumer) {
    ON_DEVICE(b->device);
    cudaError_t e = cudaStreamWaitEvent((cudaStream_t)consumer, b->map_done, 0);
    if (e != cudaSuccess)
        return glt_cuda_fail(e, "cudaStreamWaitEvent",
                         "making stream %p wait for buffer %u's map; pass a live CUDA stream of device %d", consumer,
                         b->name, b->device);
    for (int i = 0; i < b->n_consumers; ++i)
        if (b->consumers[i] == consumer) return GLT_OK;
    if (b->n_consumers < GLT_MAPBUF_CONSUMERS) b->consumers[b->n_consumers++] = consumer;
    else b->overflow = 1;
    return GLT_OK;
}

glt_status glt_cuda_mapbuf_unmap(glt_cuda_mapbuf *b) {
    if (!b || !b->mapped) return GLT_OK;
    ON_DEVICE(b->device);
    return mapbuf_unmap(b);
}

glt_status glt_cuda_mapbuf_copy(glt_cuda_mapbuf *b, size_t offset, size_t bytes, void *dst, void *stream,
                                void *ready_event) {
    ON_DEVICE(b->device);
    void *base = NULL;
    size_t size = 0;
    glt_status st = mapbuf_map(b, GLT_MAP_READ, (cudaStream_t)stream, &base, &size);
    if (st != GLT_OK) return st;
    cudaError_t e = cudaSuccess;
    if (size < offset + bytes)
        st = glt_fail(GLT_CUDA_ERROR, "CUDA mapped %zu bytes of buffer %u, fewer than the %zu asked at offset %zu",
                      size, b->name, bytes, offset);
    else if ((e = cudaMemcpyAsync(dst, (char *)base + offset, bytes, cudaMemcpyDeviceToDevice,
                                  (cudaStream_t)stream)) != cudaSuccess)
        st = glt_cuda_fail(e, "cudaMemcpyAsync", "copying %zu bytes of buffer %u", bytes, b->name);
    else if (ready_event && (e = cudaEventRecord((cudaEvent_t)ready_event, (cudaStream_t)stream)) != cudaSuccess)
        st = glt_cuda_fail(e, "cudaEventRecord", "marking buffer %u's copy as done", b->name);
    glt_status u = mapbuf_unmap(b);
    return st != GLT_OK ? st : u;
}

static void mapbuf_release(glt_cuda_mapbuf *b, int unregister) {
    ON_DEVICE_OR(b->device, );
    if (b->mapped && unregister) mapbuf_unmap(b); /* unmapping, too, needs the GL context current */
    /* The last unmap must be done before the registration goes; the caller's stream may be gone by
     * now, so a stream other than CUDA's defaults is waited for through the device. */
    if ((uintptr_t)b->stream <= 2) cudaStreamSynchronize(b->stream);
    else cudaDeviceSynchronize();
    for (int i = 0; i < GLT_MAPBUF_CONSUMERS; ++i)
        if (b->consumer_done[i]) cudaEventDestroy(b->consumer_done[i]);
    cudaEventDestroy(b->map_done);
    if (unregister) cudaGraphicsUnregisterResource(b->resource);
    cudaGetLastError();
}

void glt_cuda_mapbuf_unregister(glt_cuda_mapbuf *b) {
    if (!b) return;
    mapbuf_release(b, 1);
    free(b);
}

void glt_cuda_mapbuf_forget(glt_cuda_mapbuf *b) {
    if (!b) return;
    mapbuf_release(b, 0);
    free(b);
}

#else /* no CUDA toolkit at build time: every entry says so, and captures use the CPU backend */

static glt_status no_cuda(void) {
    return glt_fail(GLT_CUDA_UNAVAILABLE, "this gltensor was built without CUDA (no CUDA toolkit found at build "
                                          "time); reinstall with nvcc on PATH or CUDA_HOME set, or use backend='cpu'");
}

int glt_cuda_build_runtime_version(void) { return 0; }
int glt_cuda_driver_version(void) { return 0; }
glt_status glt_cuda_describe_device(int cuda_device, char *name, size_t name_size, char *pci_bus_id,
                                    size_t pci_size, int *cc_major, int *cc_minor) {
    (void)cuda_device, (void)name, (void)name_size, (void)pci_bus_id, (void)pci_size, (void)cc_major, (void)cc_minor;
    return no_cuda();
}
glt_status glt_cuda_probe(int *device_count) {
    if (device_count) *device_count = 0;
    return no_cuda();
}
glt_status glt_cuda_device_of_current_context(int *cuda_device) {
    (void)cuda_device;
    return no_cuda();
}
glt_status glt_cuda_image_register(GLuint name, GLenum target, int cuda_device, const glt_format *fmt, int width,
                                   int height, glt_cuda_image **out) {
    (void)name, (void)target, (void)cuda_device, (void)fmt, (void)width, (void)height, (void)out;
    return no_cuda();
}
void glt_cuda_image_unregister(glt_cuda_image *img) { (void)img; }
void glt_cuda_image_forget(glt_cuda_image *img) { (void)img; }
glt_status glt_cuda_copy_regions(glt_cuda_image *const *images, int n_images, const glt_cuda_region *regions,
                                 int n_regions, int flip, void *stream, void *const *ready_events, int n_ready) {
    (void)images, (void)n_images, (void)regions, (void)n_regions, (void)flip, (void)stream, (void)ready_events,
        (void)n_ready;
    return no_cuda();
}
glt_status glt_cuda_wait_event(void *consumer, void *event, int cuda_device) {
    (void)consumer, (void)event, (void)cuda_device;
    return no_cuda();
}
glt_status glt_cuda_wait_events(void *consumer, void *const *events, int n, int cuda_device) {
    (void)consumer, (void)events, (void)n, (void)cuda_device;
    return no_cuda();
}
glt_status glt_cuda_alloc(int cuda_device, size_t bytes, void **out) {
    (void)cuda_device, (void)bytes;
    *out = NULL;
    return no_cuda();
}
void glt_cuda_block_free(int cuda_device, void *data, void *const *events, int n_events, int n_pending, void *ready) {
    (void)cuda_device, (void)data, (void)events, (void)n_events, (void)n_pending, (void)ready;
}
glt_status glt_cuda_event_create(int cuda_device, void **event) {
    (void)cuda_device;
    *event = NULL;
    return no_cuda();
}
int glt_cuda_event_done(int cuda_device, void *event) {
    (void)cuda_device, (void)event;
    return 1;
}
int glt_cuda_mark_stream_uses(int cuda_device, int sync_device, void *const *streams, int n_streams, void **events) {
    (void)cuda_device, (void)sync_device, (void)streams, (void)n_streams, (void)events;
    return 0;
}
glt_status glt_cuda_record_event(void *event, void *stream, int cuda_device) {
    (void)event, (void)stream, (void)cuda_device;
    return no_cuda();
}
glt_status glt_cuda_stream_sync(void *stream, int cuda_device) {
    (void)stream, (void)cuda_device;
    return no_cuda();
}
glt_status glt_cuda_device_sync(int cuda_device) {
    (void)cuda_device;
    return no_cuda();
}
glt_status glt_cuda_copy_linear(void *dst, const void *src, size_t bytes, void *stream, int cuda_device) {
    (void)dst, (void)src, (void)bytes, (void)stream, (void)cuda_device;
    return no_cuda();
}
glt_status glt_cuda_check_stream(void *stream, int cuda_device) {
    (void)stream, (void)cuda_device;
    return no_cuda();
}
glt_status glt_cuda_buffer_register(GLuint buffer, int cuda_device, glt_cuda_buffer **out) {
    (void)buffer, (void)cuda_device, (void)out;
    return no_cuda();
}
void glt_cuda_buffer_unregister(glt_cuda_buffer *b) { (void)b; }
void glt_cuda_buffer_forget(glt_cuda_buffer *b) { (void)b; }
glt_status glt_cuda_depth_copy(glt_cuda_buffer *b, int width, int height, const glt_out_spec *spec, int flip,
                               void *dst, size_t pitch, void *stream, void *ready_event) {
    (void)b, (void)width, (void)height, (void)spec, (void)flip, (void)dst, (void)pitch, (void)stream;
    return no_cuda();
}
glt_status glt_cuda_pointer_device(const void *ptr, int query_device, int *cuda_device) {
    (void)ptr, (void)query_device, (void)cuda_device;
    return no_cuda();
}
glt_status glt_device_guard_enter(glt_device_guard *g, int device) {
    g->previous = device;
    g->changed = 0;
    return no_cuda();
}
void glt_device_guard_exit(glt_device_guard *g) { (void)g; }

/* upload.c and buffer.c */
glt_status glt_cuda_surface_register(GLuint name, GLenum target, int cuda_device, const glt_format *fmt, int width,
                                     int height, glt_cuda_surface **out) {
    (void)name, (void)target, (void)cuda_device, (void)fmt, (void)width, (void)height, (void)out;
    return no_cuda();
}
void glt_cuda_surface_unregister(glt_cuda_surface *s) { (void)s; }
void glt_cuda_surface_forget(glt_cuda_surface *s) { (void)s; }
glt_status glt_cuda_surface_write(glt_cuda_surface *s, glt_scatter_spec *spec, int whole, void *stream) {
    (void)s, (void)spec, (void)whole, (void)stream;
    return no_cuda();
}
glt_status glt_cuda_check_source(const void *ptr, int cuda_device, const char *what) {
    (void)ptr, (void)cuda_device, (void)what;
    return no_cuda();
}
glt_status glt_cuda_mapbuf_register(GLuint name, int cuda_device, glt_cuda_mapbuf **out) {
    (void)name, (void)cuda_device, (void)out;
    return no_cuda();
}
void glt_cuda_mapbuf_unregister(glt_cuda_mapbuf *b) { (void)b; }
void glt_cuda_mapbuf_forget(glt_cuda_mapbuf *b) { (void)b; }
glt_status glt_cuda_mapbuf_map(glt_cuda_mapbuf *b, int mode, void *stream, void **data, size_t *size) {
    (void)b, (void)mode, (void)stream, (void)data, (void)size;
    return no_cuda();
}
glt_status glt_cuda_mapbuf_consumer(glt_cuda_mapbuf *b, void *consumer) {
    (void)b, (void)consumer;
    return no_cuda();
}
glt_status glt_cuda_mapbuf_unmap(glt_cuda_mapbuf *b) {
    (void)b;
    return GLT_OK;
}
glt_status glt_cuda_mapbuf_copy(glt_cuda_mapbuf *b, size_t offset, size_t bytes, void *dst, void *stream,
                                void *ready_event) {
    (void)b, (void)offset, (void)bytes, (void)dst, (void)stream, (void)ready_event;
    return no_cuda();
}

#endif
