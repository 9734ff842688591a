/*
 * Which backend an upload or a buffer mapping uses: the rule captures follow (capture.c), for the
 * objects of upload.c and buffer.c. CUDA when the GL context current now runs on a CUDA device (and
 * on the one asked for, if any); the CPU backend otherwise, unless backend='cuda' was asked, which
 * then fails with the reason.
 */
#include "internal.h"

#include <stdio.h>

glt_status glt_choose_backend(glt_backend requested, int requested_device, const char *what, glt_backend *backend,
                              int *cuda_device, char *reason, size_t reason_size) {
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
    if (st == GLT_OK && requested_device >= 0 && requested_device != dev)
        return glt_fail(GLT_WRONG_DEVICE,
                        "%s lives in a GL context on CUDA device %d, but CUDA device %d was requested; CUDA interop "
                        "needs both on one GPU: create the GL context on device %d or pass cuda_device=%d",
                        what, dev, requested_device, requested_device, dev);
    if (st == GLT_OK) {
        *backend = GLT_BACKEND_CUDA;
        *cuda_device = dev;
        snprintf(reason, reason_size, "the GL context runs on CUDA device %d: data stays on the GPU", dev);
        return GLT_OK;
    }
    if (requested == GLT_BACKEND_CUDA) {
        char why[768];
        snprintf(why, sizeof why, "%s", glt_last_error());
        return glt_fail(st == GLT_WRONG_DEVICE ? GLT_WRONG_DEVICE : GLT_CUDA_UNAVAILABLE,
                        "backend='cuda' was requested for %s, but %s", what, why);
    }
    *backend = GLT_BACKEND_CPU;
    *cuda_device = -1;
    snprintf(reason, reason_size, "CUDA cannot serve this context, so data goes through host memory: %s",
             glt_last_error());
    return GLT_OK;
}
