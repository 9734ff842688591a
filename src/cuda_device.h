/* For the files that call CUDA (cuda_backend.c, cuda_vmm.c) and only them: entering an object's device,
 * and wording a failed CUDA call. Built only with GLT_WITH_CUDA. */
#ifndef GLT_CUDA_DEVICE_H
#define GLT_CUDA_DEVICE_H

#include "internal.h"

#include <cuda_runtime_api.h>

/* Makes `dev` current until the enclosing function returns (the cleanup attribute restores the caller's
 * device on every return path); returns `on_fail` when the device cannot be entered (message set). */
#define ON_DEVICE_OR(dev, on_fail)                                                                    \
    __attribute__((cleanup(glt_device_guard_exit))) glt_device_guard device_guard_ = {0, 0};          \
    if (glt_device_guard_enter(&device_guard_, (dev)) != GLT_OK) return on_fail
#define ON_DEVICE(dev) ON_DEVICE_OR(dev, GLT_CUDA_ERROR)

/* Records "CALL failed (cudaErrorX: text): WHAT" for glt_last_error() and returns GLT_CUDA_ERROR; clears
 * CUDA's last error so that later calls are not blamed. */
glt_status glt_cuda_fail(cudaError_t e, const char *call, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
