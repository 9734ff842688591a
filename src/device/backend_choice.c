/*
 * Which backend an object over a GL object uses (captures, uploads, buffer mappings; object_base.c asks on
 * their behalf): CUDA when the GL context current now runs on a CUDA device (and on the one asked for, if
 * any); the CPU backend otherwise, unless backend='cuda' was asked, which then fails with the reason.
 * `frames`: the object hands out frames (captures), and its reasons say so. Shared slots are made by a trainer
 * that may have no GL context: their rule (glt_choose_slots_backend) asks CUDA for the device instead.
 */
#include "device/device.h"
#include "cuda/cuda_api.h"

#include <stdio.h>

glt_status glt_choose_backend(glt_backend requested, int requested_device, const char *what, int frames,
                              glt_backend *backend, int *cuda_device, char *reason, size_t reason_size) {
    if (requested != GLT_BACKEND_AUTO && requested != GLT_BACKEND_CUDA && requested != GLT_BACKEND_CPU)
        return glt_fail(GLT_INVALID_ARGUMENT, "unknown backend %d for %s; use auto, cuda or cpu", (int)requested,
                        what);
    if (requested == GLT_BACKEND_CPU) {
        *backend = GLT_BACKEND_CPU;
        *cuda_device = -1;
        snprintf(reason, reason_size, "backend='cpu' was requested");
        return GLT_OK;
    }
    int dev = -1;
    glt_status st = glt_cuda_device_of_current_context(&dev);
    if (st == GLT_OK && requested_device >= 0 && requested_device != dev) {
        char headless[64] = "";
        if (frames)
            snprintf(headless, sizeof headless, " (gltensor.Context.headless(cuda_device=%d))", requested_device);
        return glt_fail(GLT_WRONG_DEVICE,
                        "%s lives in a GL context on CUDA device %d, but CUDA device %d was requested; CUDA interop "
                        "needs both on one GPU: create the GL context on device %d%s or pass cuda_device=%d",
                        what, dev, requested_device, requested_device, headless, dev);
    }
    if (st == GLT_OK) {
        *backend = GLT_BACKEND_CUDA;
        *cuda_device = dev;
        snprintf(reason, reason_size, "the GL context runs on CUDA device %d: %s on the GPU", dev,
                 frames ? "frames stay" : "data stays");
        return GLT_OK;
    }
    if (requested == GLT_BACKEND_CUDA) {
        /* Keep the specific reason but make it an error about the request. */
        char why[768];
        snprintf(why, sizeof why, "%s", glt_last_error());
        return glt_fail(st == GLT_WRONG_DEVICE ? GLT_WRONG_DEVICE : GLT_CUDA_UNAVAILABLE,
                        "backend='cuda' was requested for %s, but %s; pass backend='auto' or 'cpu' to run here on "
                        "the CPU backend (%s host memory)",
                        what, why, frames ? "frames in" : "data through");
    }
    *backend = GLT_BACKEND_CPU;
    *cuda_device = -1;
    snprintf(reason, reason_size, "CUDA cannot serve this context, so %s: %s",
             frames ? "frames are read back to host memory" : "data goes through host memory", glt_last_error());
    return GLT_OK;
}

glt_status glt_choose_slots_backend(glt_backend requested, int requested_device, glt_backend *backend,
                                    int *cuda_device, char *reason, size_t reason_size) {
    if (requested == GLT_BACKEND_CPU) {
        *backend = GLT_BACKEND_CPU;
        snprintf(reason, reason_size, "backend='cpu' was asked for: shared host memory");
        return GLT_OK;
    }
    int dev = requested_device;
    glt_status st = GLT_OK;
    if (!glt_cuda_compiled())
        st = glt_fail(GLT_CUDA_UNAVAILABLE, "this gltensor was built without CUDA");
    else if (dev == GLT_CUDA_DEVICE_AUTO)
        st = glt_default_cuda_device(&dev);
    if (st == GLT_OK && dev < 0) st = glt_fail(GLT_CUDA_UNAVAILABLE, "no CUDA device is usable in this process");
    if (st == GLT_OK) {
        int n = 0;
        st = glt_cuda_probe(&n);
        if (st == GLT_OK && dev >= n)
            st = glt_fail(GLT_INVALID_ARGUMENT, "CUDA device %d does not exist (%d visible)", dev, n);
    }
    if (st != GLT_OK) {
        if (requested == GLT_BACKEND_CUDA) {
            char why[768];
            snprintf(why, sizeof why, "%s", glt_last_error());
            return glt_fail(st, "backend='cuda' was requested for shared slots, but %s; pass backend='auto' or 'cpu' "
                                "for slots in shared host memory",
                            why);
        }
        *backend = GLT_BACKEND_CPU;
        snprintf(reason, reason_size, "CPU (shared host memory): %s", glt_last_error());
        glt_clear_error();
        return GLT_OK;
    }
    *backend = GLT_BACKEND_CUDA;
    *cuda_device = dev;
    snprintf(reason, reason_size,
             "CUDA device %d: exportable, compressible device memory that workers' GL writes into", dev);
    return GLT_OK;
}
