/* Validation of destinations the caller owns (out=), shared by captures, batches and atlases. */
#include "internal.h"

#include <stdio.h>

static void device_name(char *buf, size_t n, glt_memory memory, int device) {
    if (memory == GLT_MEMORY_CUDA)
        snprintf(buf, n, "cuda:%d", device);
    else
        snprintf(buf, n, "cpu");
}

glt_status glt_view_check(const glt_buffer_view *v, const glt_layout *want, const char *what, size_t *row_pitch,
                          size_t *image_stride) {
    if (!v || !v->data) return glt_fail(GLT_INVALID_ARGUMENT, "out= has no data pointer");
    if (v->read_only) return glt_fail(GLT_INVALID_ARGUMENT, "out= is read-only; pass a writable tensor or array");
    int device = v->cuda_device;
    if (want->memory == GLT_MEMORY_CUDA && v->memory == GLT_MEMORY_CUDA && device < 0) {
        glt_status st = glt_cuda_pointer_device(v->data, &device);
        if (st != GLT_OK) return st;
    }
    if (v->memory != want->memory || (want->memory == GLT_MEMORY_CUDA && device != want->cuda_device)) {
        char have[32], need[32];
        device_name(have, sizeof have, v->memory, device);
        device_name(need, sizeof need, want->memory, want->cuda_device);
        return glt_fail(GLT_INVALID_ARGUMENT, "out= is on device %s, but %s is captured to %s; allocate out on %s",
                        have, what, need, need);
    }
    if (v->dtype != want->dtype)
        return glt_fail(GLT_INVALID_ARGUMENT, "out= has dtype %s, but %s gives %s; allocate out as %s",
                        glt_dtype_name(v->dtype), what, glt_dtype_name(want->dtype), glt_dtype_name(want->dtype));
    int want_ndim = want->count > 0 ? 4 : 3;
    int64_t shape[4] = {want->count, want->height, want->width, want->channels};
    const int64_t *ws = want->count > 0 ? shape : shape + 1;
    int shape_ok = v->ndim == want_ndim;
    for (int i = 0; shape_ok && i < want_ndim; ++i) shape_ok = v->shape[i] == ws[i];
    if (!shape_ok) {
        char have[96] = "", need[96] = "";
        for (int i = 0, n = 0; i < v->ndim && i < 4; ++i)
            n += snprintf(have + n, sizeof have - (size_t)n, "%s%lld", i ? ", " : "", (long long)v->shape[i]);
        for (int i = 0, n = 0; i < want_ndim; ++i)
            n += snprintf(need + n, sizeof need - (size_t)n, "%s%lld", i ? ", " : "", (long long)ws[i]);
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "out= has shape (%s), but %s is (%s) as (%sheight, width, channels); allocate out with that "
                        "shape",
                        have, what, need, want->count > 0 ? "count, " : "");
    }
    /* Strides of the trailing (row, pixel, channel) axes. */
    const int64_t *st = v->strides_bytes + (want_ndim - 3);
    int64_t es = (int64_t)glt_dtype_size(want->dtype);
    int64_t row = (int64_t)want->width * want->channels * es;
    int contiguous_pixels = (st[2] == es || want->channels == 1) && (st[1] == want->channels * es || want->width == 1);
    int rows_ok = st[0] >= row || want->height == 1;
    int64_t image_bytes = (int64_t)(want->height - 1) * (st[0] > row ? st[0] : row) + row;
    int images_ok = want->count <= 1 || v->strides_bytes[0] >= image_bytes;
    if (!contiguous_pixels || !rows_ok || !images_ok) {
        char have[128] = "";
        for (int i = 0, n = 0; i < v->ndim && i < 4; ++i)
            n += snprintf(have + n, sizeof have - (size_t)n, "%s%lld", i ? ", " : "", (long long)v->strides_bytes[i]);
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "out= has byte strides (%s); gltensor writes whole rows, so it needs pixel and channel "
                        "strides (%lld, %lld), rows of at least %lld bytes%s (padding allowed); pass a contiguous "
                        "tensor or a slice of one",
                        have, (long long)(want->channels * es), (long long)es, (long long)row,
                        want->count > 1 ? " and images that do not overlap" : "");
    }
    *row_pitch = want->height > 1 ? (size_t)st[0] : (size_t)row;
    *image_stride = want->count > 0 ? (size_t)v->strides_bytes[0] : 0;
    return GLT_OK;
}
