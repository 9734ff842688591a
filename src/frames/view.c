/* Validation of destinations the caller owns (out=), shared by captures, batches and atlases. */
#include "frames/frames.h"
#include "cuda/cuda_api.h"
#include "core/size_math.h"

#include <stdio.h>

static void device_name(char *buf, size_t n, glt_memory memory, int device) {
    if (memory == GLT_MEMORY_CUDA)
        snprintf(buf, n, "cuda:%d", device);
    else
        snprintf(buf, n, "cpu");
}

static void format_dims(char *buf, size_t n, const int64_t *v, int nd) {
    buf[0] = '\0';
    for (int i = 0, k = 0; i < nd && i < 4 && (size_t)k < n; ++i)
        k += snprintf(buf + k, n - (size_t)k, "%s%lld", i ? ", " : "", (long long)v[i]);
}

glt_status glt_view_check(const glt_buffer_view *v, const glt_dest_shape *want, const char *what,
                          glt_dest_strides *out) {
    const glt_out_spec *spec = want->spec;
    if (!v || !v->data) return glt_fail(GLT_INVALID_ARGUMENT, "out= has no data pointer");
    if (v->read_only) return glt_fail(GLT_INVALID_ARGUMENT, "out= is read-only; pass a writable tensor or array");
    int device = v->cuda_device;
    if (want->memory == GLT_MEMORY_CUDA && v->memory == GLT_MEMORY_CUDA && device < 0) {
        glt_status st = glt_cuda_pointer_device(v->data, want->cuda_device, &device);
        if (st != GLT_OK) return st;
    }
    if (v->memory != want->memory || (want->memory == GLT_MEMORY_CUDA && device != want->cuda_device)) {
        char have[32], need[32];
        device_name(have, sizeof have, v->memory, device);
        device_name(need, sizeof need, want->memory, want->cuda_device);
        return glt_fail(GLT_INVALID_ARGUMENT, "out= is on device %s, but %s is captured to %s; allocate out on %s",
                        have, what, need, need);
    }
    if (v->dtype != spec->dtype)
        return glt_fail(GLT_INVALID_ARGUMENT, "out= has dtype %s, but reading %s gives %s; allocate out as %s",
                        glt_dtype_name(v->dtype), what, glt_dtype_name(spec->dtype), glt_dtype_name(spec->dtype));
    int chw = spec->order == GLT_LAYOUT_CHW;
    int nd = want->count > 0 ? 4 : 3;
    int64_t dims[4] = {want->count, chw ? spec->channels : want->height, chw ? want->height : want->width,
                       chw ? want->width : spec->channels};
    const int64_t *ws = want->count > 0 ? dims : dims + 1;
    int shape_ok = v->ndim == nd;
    for (int i = 0; shape_ok && i < nd; ++i) shape_ok = v->shape[i] == ws[i];
    if (!shape_ok) {
        char have[96], need[96];
        format_dims(have, sizeof have, v->shape, v->ndim);
        format_dims(need, sizeof need, ws, nd);
        return glt_fail(GLT_INVALID_ARGUMENT, "out= has shape (%s), but reading %s gives (%s) as (%s); allocate out "
                                              "with that shape",
                        have, what, need,
                        want->count > 0 ? (chw ? "count, channels, height, width" : "count, height, width, channels")
                                        : (chw ? "channels, height, width" : "height, width, channels"));
    }
    /* The trailing three axes: (row, pixel, channel) for HWC, (plane, row, element) for CHW. */
    const int64_t *st = v->strides_bytes + (nd - 3);
    int64_t es = (int64_t)glt_dtype_size(spec->dtype);
    int64_t w = want->width, h = want->height, c = spec->channels;
    int64_t row_min = chw ? w * es : w * c * es, pitch, plane = 0, plane_min, image_min = 0;
    int ok;
    /* Spans are computed with overflow checks: strides come from the caller (a crafted __array_interface__,
     * a C program), and a product that wraps would pass the checks and send rows anywhere. */
    if (chw) {
        pitch = st[1];
        plane = st[0];
        ok = (st[2] == es || w == 1) && (pitch >= row_min || h == 1);
        if (h == 1) pitch = row_min;
        ok = ok && glt_span_bytes(h, pitch, row_min, &plane_min) && (plane >= plane_min || c == 1);
        if (ok && c == 1) ok = glt_span_bytes(h + 1, pitch, 0, &plane); /* h x pitch, checked */
        ok = ok && glt_span_bytes(c, plane, plane_min, &image_min);
    } else {
        pitch = st[0];
        ok = (st[2] == es || c == 1) && (st[1] == c * es || w == 1) && (pitch >= row_min || h == 1);
        if (h == 1) pitch = row_min;
        ok = ok && glt_span_bytes(h, pitch, row_min, &image_min);
    }
    int64_t total;
    ok = ok && (want->count <= 1 ||
                (v->strides_bytes[0] >= image_min && glt_span_bytes(want->count, v->strides_bytes[0], image_min, &total)));
    if (!ok) {
        char have[128];
        format_dims(have, sizeof have, v->strides_bytes, v->ndim);
        return glt_fail(GLT_INVALID_ARGUMENT,
                        "out= has byte strides (%s); gltensor writes whole rows, so elements within a row must be "
                        "contiguous (%s), rows at least %lld bytes apart%s, padding allowed; pass a contiguous "
                        "tensor or a slice of one",
                        have, chw ? "element stride = itemsize" : "pixel stride = channels x itemsize, channel "
                                                                  "stride = itemsize",
                        (long long)row_min,
                        chw ? ", planes and images not overlapping" : (want->count > 1 ? ", images not overlapping" : ""));
    }
    out->pitch = (size_t)pitch;
    out->plane = (size_t)plane;
    out->image = want->count > 0 ? (size_t)v->strides_bytes[0] : 0;
    return GLT_OK;
}
