/*
 * Streams and events on an object's device: waiting, recording, synchronising, the frame pool's device
 * memory and its reuse events, and the checks of what callers hand in (a stream handle, a device pointer).
 */
#include "cuda/cuda_api.h"

#ifdef GLT_WITH_CUDA

#include "cuda/cuda_device.h"
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

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

void glt_cuda_event_destroy(int device, void *event) {
    if (!event) return;
    ON_DEVICE_OR(device, );
    cudaEventDestroy((cudaEvent_t)event);
}

glt_status glt_cuda_event_sync(int device, void *event) {
    ON_DEVICE(device);
    cudaError_t e = cudaEventSynchronize((cudaEvent_t)event);
    if (e != cudaSuccess) return glt_cuda_fail(e, "cudaEventSynchronize", "waiting for a read of the shared slots");
    return GLT_OK;
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

/* 1 when ptr is CUDA device (or managed) memory, its attributes in *a; 0 otherwise (CUDA's error cleared). */
static int device_memory(const void *ptr, struct cudaPointerAttributes *a) {
    cudaError_t e = cudaPointerGetAttributes(a, ptr);
    if (e == cudaSuccess && (a->type == cudaMemoryTypeDevice || a->type == cudaMemoryTypeManaged)) return 1;
    cudaGetLastError();
    return 0;
}

glt_status glt_cuda_pointer_device(const void *ptr, int query_device, int *cuda_device) {
    ON_DEVICE(query_device); /* any device answers; this one keeps the query from initialising device 0 */
    struct cudaPointerAttributes a;
    if (!device_memory(ptr, &a))
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "out= points at %p, which is not CUDA device memory; allocate out on the capture's CUDA "
                        "device",
                        ptr);
    *cuda_device = a.device;
    return GLT_OK;
}

glt_status glt_cuda_check_source(const void *ptr, int cuda_device, const char *what) {
    ON_DEVICE(cuda_device);
    struct cudaPointerAttributes a;
    if (!device_memory(ptr, &a))
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "the source for %s points at %p, which is not CUDA device memory; pass a CUDA tensor of "
                        "device %d",
                        what, ptr, cuda_device);
    if (a.type == cudaMemoryTypeDevice && a.device != cuda_device)
        return glt_fail(GLT_WRONG_DEVICE,
                        "the source for %s lives on CUDA device %d, but the texture's GL context runs on device %d; "
                        "move the tensor there first",
                        what, a.device, cuda_device);
    return GLT_OK;
}

#endif
