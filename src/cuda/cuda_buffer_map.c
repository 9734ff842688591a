/*
 * Buffer objects mapped as linear device memory (buffer.c) on the CUDA backend: mapped on the caller's
 * stream, handed to consumers on other streams through events, and unmapped only after the work the
 * consumers queued until then.
 */
#include "cuda/cuda_api.h"

#ifdef GLT_WITH_CUDA

#include "cuda/cuda_resource.h"
#include <stdlib.h>

#define GLT_MAPBUF_CONSUMERS 4

struct glt_cuda_mapbuf {
    glt_cuda_resource res; /* kind: "buffer" */
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
    cudaError_t e = glt_cuda_resource_register(&b->res, cuda_device, name, 0, cudaGraphicsRegisterFlagsNone, "buffer");
    if (e != cudaSuccess) {
        free(b);
        return glt_cuda_fail(e, "cudaGraphicsGLRegisterBuffer",
                         "buffer %u could not be registered with CUDA device %d; check that its GL context is current "
                         "and runs on that GPU, and that the buffer has storage",
                         name, cuda_device);
    }
    e = cudaEventCreateWithFlags(&b->map_done, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        glt_cuda_resource_release(&b->res, 1);
        free(b);
        return glt_cuda_fail(e, "cudaEventCreateWithFlags", "an event to order buffer %u's map", name);
    }
    *out = b;
    return GLT_OK;
}

/* Maps on the current device (the caller entered it). */
static glt_status mapbuf_map(glt_cuda_mapbuf *b, int mode, cudaStream_t stream, void **data, size_t *size) {
    unsigned int flags = mode == GLT_MAP_READ    ? cudaGraphicsMapFlagsReadOnly
                         : mode == GLT_MAP_WRITE ? cudaGraphicsMapFlagsWriteDiscard
                                                 : cudaGraphicsMapFlagsNone;
    glt_status st = glt_cuda_resource_set_map_flags(&b->res, flags);
    if (st != GLT_OK) return st;
    st = glt_cuda_resource_map(&b->res, stream,
                               "buffer %u; make sure its GL context is current and the stream belongs to CUDA device %d",
                               b->res.name, b->res.device);
    if (st != GLT_OK) return st;
    st = glt_cuda_resource_pointer(&b->res, data, size);
    if (st != GLT_OK) {
        glt_cuda_resource_unmap(&b->res, stream, st, "buffer %u", b->res.name);
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
    return glt_cuda_resource_unmap(&b->res, b->stream, GLT_OK, "buffer %u", b->res.name);
}

glt_status glt_cuda_mapbuf_map(glt_cuda_mapbuf *b, int mode, void *stream, void **data, size_t *size) {
    ON_DEVICE(b->res.device);
    glt_status st = mapbuf_map(b, mode, (cudaStream_t)stream, data, size);
    if (st != GLT_OK) return st;
    cudaError_t e = cudaEventRecord(b->map_done, (cudaStream_t)stream);
    if (e != cudaSuccess) {
        st = glt_cuda_fail(e, "cudaEventRecord", "marking buffer %u's map", b->res.name);
        mapbuf_unmap(b);
    }
    return st;
}

glt_status glt_cuda_mapbuf_consumer(glt_cuda_mapbuf *b, void *consumer) {
    ON_DEVICE(b->res.device);
    cudaError_t e = cudaStreamWaitEvent((cudaStream_t)consumer, b->map_done, 0);
    if (e != cudaSuccess)
        return glt_cuda_fail(e, "cudaStreamWaitEvent",
                         "making stream %p wait for buffer %u's map; pass a live CUDA stream of device %d", consumer,
                         b->res.name, b->res.device);
    for (int i = 0; i < b->n_consumers; ++i)
        if (b->consumers[i] == consumer) return GLT_OK;
    if (b->n_consumers < GLT_MAPBUF_CONSUMERS) b->consumers[b->n_consumers++] = consumer;
    else b->overflow = 1;
    return GLT_OK;
}

glt_status glt_cuda_mapbuf_unmap(glt_cuda_mapbuf *b) {
    if (!b || !b->mapped) return GLT_OK;
    ON_DEVICE(b->res.device);
    return mapbuf_unmap(b);
}

glt_status glt_cuda_mapbuf_copy(glt_cuda_mapbuf *b, size_t offset, size_t bytes, void *dst, void *stream,
                                void *ready_event) {
    ON_DEVICE(b->res.device);
    void *base = NULL;
    size_t size = 0;
    glt_status st = mapbuf_map(b, GLT_MAP_READ, (cudaStream_t)stream, &base, &size);
    if (st != GLT_OK) return st;
    cudaError_t e = cudaSuccess;
    if (size < offset + bytes)
        st = glt_fail(GLT_CUDA_ERROR, "CUDA mapped %zu bytes of buffer %u, fewer than the %zu asked at offset %zu",
                      size, b->res.name, bytes, offset);
    else if ((e = cudaMemcpyAsync(dst, (char *)base + offset, bytes, cudaMemcpyDeviceToDevice,
                                  (cudaStream_t)stream)) != cudaSuccess)
        st = glt_cuda_fail(e, "cudaMemcpyAsync", "copying %zu bytes of buffer %u", bytes, b->res.name);
    else if (ready_event && (e = cudaEventRecord((cudaEvent_t)ready_event, (cudaStream_t)stream)) != cudaSuccess)
        st = glt_cuda_fail(e, "cudaEventRecord", "marking buffer %u's copy as done", b->res.name);
    glt_status u = mapbuf_unmap(b);
    return st != GLT_OK ? st : u;
}

static void mapbuf_release(void *owner, int unregister) {
    glt_cuda_mapbuf *b = owner;
    ON_DEVICE_OR(b->res.device, );
    if (b->mapped && unregister) mapbuf_unmap(b); /* unmapping, too, needs the GL context current */
    /* The last unmap must be done before the registration goes; the caller's stream may be gone by
     * now, so a stream other than CUDA's defaults is waited for through the device. */
    glt_cuda_settle(b->stream);
    for (int i = 0; i < GLT_MAPBUF_CONSUMERS; ++i)
        if (b->consumer_done[i]) cudaEventDestroy(b->consumer_done[i]);
    cudaEventDestroy(b->map_done);
    glt_cuda_resource_release(&b->res, unregister);
}

void glt_cuda_mapbuf_unregister(glt_cuda_mapbuf *b) { glt_cuda_resource_drop(b, 1, mapbuf_release); }
void glt_cuda_mapbuf_forget(glt_cuda_mapbuf *b) { glt_cuda_resource_drop(b, 0, mapbuf_release); }

#endif
