/* Which GPU and which backend (device/README.md): the backend an object or shared slots use, and the fork check of
 * gltensor's own EGL contexts. glt_default_cuda_device and the glt_context_* calls are public (gltensor.h). */
#ifndef GLT_DEVICE_H
#define GLT_DEVICE_H

#include "core/core.h"

/* backend_choice.c: the backend an object of `what` uses: CUDA when the current GL context runs on a CUDA
 * device, unless 'cpu' was asked; 'cuda' fails when it cannot. frames: its reasons speak of frames (captures). */
glt_status glt_choose_backend(glt_backend requested, int requested_device, const char *what, int frames,
                              glt_backend *backend, int *cuda_device, char *reason, size_t reason_size);
/* The backend of shared slots (slots.c): CUDA on the requested device (GLT_CUDA_DEVICE_AUTO: the default one)
 * where CUDA runs, shared host memory otherwise, unless 'cuda' was asked; *cuda_device is set for CUDA only. */
glt_status glt_choose_slots_backend(glt_backend requested, int requested_device, glt_backend *backend,
                                    int *cuda_device, char *reason, size_t reason_size);

/* ---- egl_context.c ---- */
/* GLT_UNSUPPORTED (saying what to do) in the child of a process that made an NVIDIA EGL context through gltensor:
 * NVIDIA's EGL does not survive fork. */
glt_status glt_egl_fork_check(void);

#endif
