/* For the files that call CUDA (cuda/cuda_*.c but cuda_none.c) and only them: entering an object's device,
 * wording a failed CUDA call, and the few helpers they share. Built only with GLT_WITH_CUDA.
 *
 * The rule these files keep: every function that calls CUDA on an object's behalf starts with
 * ON_DEVICE(the object's device); that device is current for the rest of the function and the caller's is
 * restored on every return. Allocations, events, streams, kernel launches and map/unmap therefore always run
 * on the object's GPU, whatever device the calling thread (torch, a frame released on another thread) had
 * current. The helpers declared here (and in cuda_resource.h) run on the device their caller entered.
 * tests/test_device_guard.py checks the rule. */
#ifndef GLT_CUDA_DEVICE_H
#define GLT_CUDA_DEVICE_H

#include "cuda/cuda_api.h"

#include <cuda_runtime_api.h>

/* Makes `device` current, remembering the caller's; exit restores it. Only through ON_DEVICE. */
typedef struct glt_device_guard {
    int previous;
    int changed;
} glt_device_guard;
glt_status glt_device_guard_enter(glt_device_guard *g, int device);
void glt_device_guard_exit(glt_device_guard *g);

/* Makes `dev` current until the enclosing function returns (the cleanup attribute restores the caller's
 * device on every return path); returns `on_fail` when the device cannot be entered (message set). */
#define ON_DEVICE_OR(dev, on_fail)                                                                    \
    __attribute__((cleanup(glt_device_guard_exit))) glt_device_guard device_guard_ = {0, 0};          \
    if (glt_device_guard_enter(&device_guard_, (dev)) != GLT_OK) return on_fail
#define ON_DEVICE(dev) ON_DEVICE_OR(dev, GLT_CUDA_ERROR)

/* Records "CALL failed (cudaErrorX: text): WHAT" for glt_last_error() and returns GLT_CUDA_ERROR; clears
 * CUDA's last error so that later calls are not blamed. */
glt_status glt_cuda_fail(cudaError_t e, const char *call, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A driver API entry point (CUDA 12.0 ABI) reached through the runtime, or NULL when the driver lacks it:
 * linking libcuda would make the library unloadable without a driver, and the wheel must import anywhere. */
void *glt_cuda_driver_entry(const char *name);

/* Waits until the work queued on `stream` is done. The stream was the caller's and may be gone by now, so a
 * stream other than CUDA's defaults (0, 1, 2) is waited for through the whole device. */
void glt_cuda_settle(cudaStream_t stream);

/* A texture object reading `res` as stored: raw values (no normalisation of 8/16-bit channels), point
 * sampling, clamped, unnormalised coordinates. */
cudaError_t glt_cuda_raw_texture(const struct cudaResourceDesc *res, cudaTextureObject_t *out);

#endif
