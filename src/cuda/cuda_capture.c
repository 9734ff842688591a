/*
 * Capture on the CUDA backend: register a GL image with CUDA once, and per read map it, copy
 * the CUDA array into linear device memory on one stream, and unmap.
 *
 * The copy is cudaMemcpy2DFromArrayAsync when the array's rows can be copied as
 * they are; otherwise (rows flipped to top-first, or an array with more channels
 * than the format, as RGB8 stored as RGBX) one kernel reads the array through a
 * texture object and writes the final layout, so no second pass is ever needed.
 *
 * Depth is packed by GL into a pixel-pack buffer (gl_stage.c), registered here and converted by one kernel.
 */
#include "cuda/cuda_api.h"

#ifdef GLT_WITH_CUDA

#include "cuda/cuda_resource.h"
#include <stdlib.h>
#include <string.h>

struct glt_cuda_image {
    glt_cuda_resource res; /* kind: "texture" or "renderbuffer" */
    int width, height;
    const glt_format *fmt;
    /* What the mapped array holds, learned at the first map and kept while the array stays the same. */
    cudaArray_t array;
    cudaTextureObject_t texture;
    int array_channels, elem_bytes, array_is_float;
};

glt_status glt_cuda_image_register(GLuint name, GLenum target, int cuda_device, const glt_format *fmt, int width,
                                   int height, glt_cuda_image **out) {
    ON_DEVICE(cuda_device);
    glt_cuda_image *img = calloc(1, sizeof *img);
    if (!img) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    img->fmt = fmt;
    img->width = width;
    img->height = height;
    const char *kind = target == GL_RENDERBUFFER ? "renderbuffer" : "texture";
    cudaError_t e =
        glt_cuda_resource_register(&img->res, cuda_device, name, target, cudaGraphicsRegisterFlagsReadOnly, kind);
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
static void image_release(void *owner, int unregister) {
    glt_cuda_image *img = owner;
    ON_DEVICE_OR(img->res.device, );
    if (img->texture) cudaDestroyTextureObject(img->texture);
    glt_cuda_resource_release(&img->res, unregister);
}

void glt_cuda_image_unregister(glt_cuda_image *img) { glt_cuda_resource_drop(img, 1, image_release); }
void glt_cuda_image_forget(glt_cuda_image *img) { glt_cuda_resource_drop(img, 0, image_release); }

/* Learns the mapped array's layout and checks it can hold what the GL format promises. */
static glt_status learn_array(glt_cuda_image *img, cudaArray_t array) {
    glt_cuda_array_layout l;
    glt_status st = glt_cuda_check_array(array, img->fmt, img->width, img->height, 1, "image", img->res.name, &l);
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
    cudaError_t e = glt_cuda_raw_texture(&res, &img->texture);
    if (e != cudaSuccess) {
        img->texture = 0;
        return glt_cuda_fail(e, "cudaCreateTextureObject", "reading image %u (%s) through a texture", img->res.name,
                         img->fmt->name);
    }
    return GLT_OK;
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
            return glt_cuda_fail(e, "cudaMemcpy2DFromArrayAsync", "copying %s %u (%dx%d %s)", r0->img->res.kind,
                             r0->img->res.name, r0->width, r0->height, r0->img->fmt->name);
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
        sp.chw = r->spec->order == GLT_LAYOUT_CHW;
        sp.width = r->width;
        sp.height = r->height;
        sp.flip = flip;
        sp.pitch = r->pitch;
        sp.plane = r->plane;
        int rc = glt_launch_gather(items, end - first, &sp, stream);
        if (rc != 0)
            return glt_cuda_fail((cudaError_t)rc, "copy kernel launch", "%s %u (%s), %d region(s)", img->res.kind,
                             img->res.name, img->fmt->name, end - first);
        first = end;
    }
    return GLT_OK;
}

glt_status glt_cuda_copy_regions(glt_cuda_image *const *images, int n_images, const glt_cuda_region *regions,
                                 int n_regions, int flip, void *stream_arg, void *const *ready_events, int n_ready) {
    if (n_images <= 0 || n_regions <= 0) return GLT_OK;
    cudaStream_t stream = (cudaStream_t)stream_arg;
    int device = images[0]->res.device;
    ON_DEVICE(device);
    glt_status st = GLT_OK;
    for (int i = 1; i < n_images; ++i)
        if (images[i]->res.device != device)
            return glt_fail(GLT_WRONG_DEVICE, "%s %u is registered with CUDA device %d, %s %u with device %d; one "
                                              "read maps images of one device only",
                            images[0]->res.kind, images[0]->res.name, device, images[i]->res.kind, images[i]->res.name,
                            images[i]->res.device);
    cudaGraphicsResource_t local[32];
    cudaGraphicsResource_t *res = n_images <= 32 ? local : malloc(sizeof *res * (size_t)n_images);
    if (!res) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    for (int i = 0; i < n_images; ++i) res[i] = images[i]->res.handle;
    /* The one handoff: every image in a single map call, whatever their number. */
    cudaError_t e = cudaGraphicsMapResources(n_images, res, stream);
    if (e != cudaSuccess) {
        st = glt_cuda_fail(e, "cudaGraphicsMapResources",
                       "%d image(s) starting with %s %u; make sure their GL context is current, the stream belongs "
                       "to CUDA device %d, and no image is mapped elsewhere",
                       n_images, images[0]->res.kind, images[0]->res.name, device);
        goto out;
    }
    for (int i = 0; i < n_images && st == GLT_OK; ++i) {
        cudaArray_t array = NULL;
        st = glt_cuda_resource_array(&images[i]->res, &array);
        if (st == GLT_OK && array != images[i]->array)
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
                       images[0]->res.kind, images[0]->res.name);
out:
    if (res != local) free(res);
    return st;
}

struct glt_cuda_buffer {
    glt_cuda_resource res; /* kind: "the depth readback buffer" */
};

glt_status glt_cuda_buffer_register(GLuint buffer, int cuda_device, glt_cuda_buffer **out) {
    ON_DEVICE(cuda_device);
    glt_cuda_buffer *b = calloc(1, sizeof *b);
    if (!b) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    cudaError_t e = glt_cuda_resource_register(&b->res, cuda_device, buffer, 0, cudaGraphicsRegisterFlagsReadOnly,
                                               "the depth readback buffer");
    if (e != cudaSuccess) {
        free(b);
        return glt_cuda_fail(e, "cudaGraphicsGLRegisterBuffer", "the depth readback buffer %u on CUDA device %d", buffer,
                         cuda_device);
    }
    *out = b;
    return GLT_OK;
}

static void buffer_release(void *owner, int unregister) { /* unregister: as image_release */
    glt_cuda_buffer *b = owner;
    ON_DEVICE_OR(b->res.device, );
    glt_cuda_resource_release(&b->res, unregister);
}

void glt_cuda_buffer_unregister(glt_cuda_buffer *b) { glt_cuda_resource_drop(b, 1, buffer_release); }
void glt_cuda_buffer_forget(glt_cuda_buffer *b) { glt_cuda_resource_drop(b, 0, buffer_release); }

glt_status glt_cuda_depth_copy(glt_cuda_buffer *b, int width, int height, const glt_out_spec *spec, int flip,
                               void *dst, size_t pitch, void *stream, void *ready_event) {
    ON_DEVICE(b->res.device);
    glt_status st = glt_cuda_resource_map(&b->res, (cudaStream_t)stream,
                                          "the depth readback buffer %u; make sure its GL context is current",
                                          b->res.name);
    if (st != GLT_OK) return st;
    void *src = NULL;
    size_t size = 0;
    st = glt_cuda_resource_pointer(&b->res, &src, &size);
    if (st == GLT_OK && size < (size_t)width * height * sizeof(float))
        st = glt_fail(GLT_CUDA_ERROR, "the depth readback buffer %u holds %zu bytes, fewer than %dx%d floats",
                      b->res.name, size, width, height);
    if (st == GLT_OK) {
        cudaError_t e;
        int rc = glt_launch_depth(src, width, height, flip, spec->depth_mode, spec->near_plane, spec->far_plane, dst,
                                  pitch, stream);
        if (rc != 0) st = glt_cuda_fail((cudaError_t)rc, "depth kernel launch", "%dx%d depth", width, height);
        else if (ready_event && (e = cudaEventRecord((cudaEvent_t)ready_event, (cudaStream_t)stream)) != cudaSuccess)
            st = glt_cuda_fail(e, "cudaEventRecord", "marking a depth frame's copy as done");
    }
    return glt_cuda_resource_unmap(&b->res, (cudaStream_t)stream, st, "depth buffer %u", b->res.name);
}

#endif
