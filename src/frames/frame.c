/*
 * Frames: a buffer from a pool plus what it holds. A frame is never written
 * after its read returns; its buffer goes back to the pool when it is destroyed,
 * to be reused once every stream that used it is done.
 */
#include "frames/frames.h"
#include "cuda/cuda_api.h"
#include "core/size_math.h"

#include <stdlib.h>
#include <string.h>

size_t glt_frame_image_bytes(const glt_frame *f) {
    return (size_t)f->height * f->width * f->channels * glt_dtype_size(f->dtype);
}

void *glt_frame_data(const glt_frame *f) { return glt_block_data(f->block); }

/* A frame's description, its block still to come (NULL on failure: out of host memory). */
static glt_frame *frame_new(void *stream, glt_memory memory, int cuda_device, glt_dtype dtype, int count, int height,
                            int width, int channels, glt_layout order, int flipped) {
    glt_frame *f = malloc(sizeof *f);
    if (!f) return NULL;
    f->block = NULL;
    f->memory = memory;
    f->cuda_device = cuda_device;
    f->dtype = dtype;
    f->count = count;
    f->height = height;
    f->width = width;
    f->channels = channels;
    f->order = order;
    f->flipped = flipped;
    f->stream = stream;
    f->row_pitch = f->image_stride = 0;
    return f;
}

glt_status glt_frame_create(glt_pool *pool, void *stream, glt_memory memory, int cuda_device, const glt_out_spec *spec,
                            int count, int height, int width, int flipped, glt_frame **out) {
    int64_t dims[4] = {count > 0 ? count : 1, height, width, spec->channels};
    size_t bytes = 0;
    if (!glt_shape_bytes(dims, 4, glt_dtype_size(spec->dtype), &bytes))
        return glt_fail(GLT_INVALID_ARGUMENT, "a frame of %d x %d x %d x %d %s elements is larger than memory can "
                                              "address; read fewer or smaller images",
                        count > 0 ? count : 1, height, width, spec->channels, glt_dtype_name(spec->dtype));
    glt_frame *f = frame_new(stream, memory, cuda_device, spec->dtype, count, height, width, spec->channels,
                             spec->order, flipped);
    if (!f) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    glt_status st = glt_pool_acquire(pool, bytes, stream, &f->block);
    if (st != GLT_OK) {
        free(f);
        return st;
    }
    glt_block_add_stream(f->block, stream);
    *out = f;
    return GLT_OK;
}

glt_status glt_frame_wrap(glt_block *block, void *stream, glt_memory memory, int cuda_device, const glt_format *fmt,
                          int count, int height, int width, size_t row_pitch, size_t image_stride, glt_frame **out) {
    glt_frame *f = frame_new(stream, memory, cuda_device, fmt->dtype, count, height, width, fmt->channels,
                             GLT_LAYOUT_HWC, 1);
    if (!f) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    f->block = block;
    f->row_pitch = row_pitch;
    f->image_stride = image_stride;
    /* Handed out on `stream` (the pool's): its consumers there are remembered like any other stream's. */
    glt_block_add_stream(block, stream);
    *out = f;
    return GLT_OK;
}

size_t glt_frame_image_stride(const glt_frame *f) {
    if (!f) return 0;
    if (f->image_stride) return f->image_stride;
    return glt_frame_image_bytes(f);
}

void glt_frame_get_info(const glt_frame *f, glt_frame_info *info) {
    info->size = sizeof *info;
    info->data = glt_block_data(f->block);
    info->memory = f->memory;
    info->cuda_device = f->cuda_device;
    info->dtype = f->dtype;
    info->count = f->count;
    info->height = f->height;
    info->width = f->width;
    info->channels = f->channels;
    info->layout = f->order;
    info->row_pitch_bytes = f->row_pitch ? f->row_pitch : (size_t)f->width * (f->order == GLT_LAYOUT_CHW ? 1 : f->channels) * glt_dtype_size(f->dtype);
    info->nbytes = glt_block_size(f->block);
    info->flipped = f->flipped;
    info->stream = f->stream;
}

glt_status glt_frame_sync_stream(glt_frame *f, void *consumer) {
    if (!f) return glt_fail(GLT_INVALID_ARGUMENT, "glt_frame_sync_stream: frame is NULL");
    if (f->memory != GLT_MEMORY_CUDA) return GLT_OK;
    /* A view of memory that was complete when it was handed out: nothing to wait for, but the consumer's stream
     * must finish its work before the memory is written again. */
    if (glt_block_wrapped(f->block)) return glt_block_add_stream(f->block, consumer);
    if (consumer == f->stream) return GLT_OK;
    void *ready = glt_block_ready_event(f->block);
    if (!ready)
        return glt_fail(GLT_CUDA_ERROR, "the frame has no copy-done event to wait for (cudaEventCreate failed, "
                                        "likely out of resources); synchronise with frame.synchronize() instead");
    glt_status st = glt_cuda_wait_event(consumer, ready, f->cuda_device);
    if (st == GLT_OK) glt_block_add_stream(f->block, consumer);
    return st;
}

glt_status glt_frame_clone(const glt_frame *f, glt_frame **out) {
    if (!f || !out) return glt_fail(GLT_INVALID_ARGUMENT, "glt_frame_clone: NULL argument");
    glt_frame *c = malloc(sizeof *c);
    if (!c) return glt_fail(GLT_OUT_OF_MEMORY, "out of host memory");
    *c = *f;
    glt_status st = glt_pool_acquire(glt_block_pool(f->block), glt_block_size(f->block), f->stream, &c->block);
    if (st != GLT_OK) {
        free(c);
        return st;
    }
    glt_block_add_stream(c->block, f->stream);
    size_t bytes = glt_block_size(f->block);
    if (f->memory == GLT_MEMORY_HOST) {
        memcpy(glt_frame_data(c), glt_frame_data(f), bytes);
    } else {
        st = glt_cuda_copy_linear(glt_frame_data(c), glt_frame_data(f), bytes, f->stream, f->cuda_device);
        void *ready = glt_block_ready_event(c->block);
        if (st == GLT_OK && ready) st = glt_cuda_record_event(ready, f->stream, f->cuda_device);
    }
    if (st != GLT_OK) {
        glt_frame_destroy(c);
        return st;
    }
    *out = c;
    return GLT_OK;
}

glt_status glt_frame_synchronize(glt_frame *f) {
    if (!f) return glt_fail(GLT_INVALID_ARGUMENT, "glt_frame_synchronize: frame is NULL");
    if (f->memory != GLT_MEMORY_CUDA) return GLT_OK;
    return glt_cuda_stream_sync(f->stream, f->cuda_device);
}

void glt_frame_destroy(glt_frame *f) {
    if (!f) return;
    glt_pool_give_back(f->block);
    free(f);
}
