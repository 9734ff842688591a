/*
 * Overflow-checked size arithmetic: every size gltensor derives from extents a caller gives (a view's shape,
 * out= strides, a frame's count x height x width x channels, offsets) is computed here. A product that wraps
 * passes every range check after it and sends copies outside the memory (a 16-byte buffer taken to hold
 * 3 x 0x5555555555555556 bytes, "2" after the wrap). Results are bounded by INT64_MAX, so a size that passes
 * also fits DLPack's int64 shapes and strides and ptrdiff_t. Header-only: the extension's argument parsing
 * (python/gltensor/_ext) uses the same functions.
 */
#ifndef GLT_SIZE_MATH_H
#define GLT_SIZE_MATH_H

#include <stddef.h>
#include <stdint.h>

#define GLT_SIZE_LIMIT ((uint64_t)INT64_MAX)

/* a * b into *out; 0 (and *out untouched) when it exceeds GLT_SIZE_LIMIT. */
static inline int glt_size_mul(size_t a, size_t b, size_t *out) {
    size_t r;
    if (__builtin_mul_overflow(a, b, &r) || (uint64_t)r > GLT_SIZE_LIMIT) return 0;
    *out = r;
    return 1;
}

static inline int glt_size_add(size_t a, size_t b, size_t *out) {
    size_t r;
    if (__builtin_add_overflow(a, b, &r) || (uint64_t)r > GLT_SIZE_LIMIT) return 0;
    *out = r;
    return 1;
}

/* The bytes of n extents of `item` bytes each; 0 when an extent is negative or the product is too large. */
static inline int glt_shape_bytes(const int64_t *shape, int n, size_t item, size_t *out) {
    size_t bytes = item;
    for (int i = 0; i < n; ++i)
        if (shape[i] < 0 || !glt_size_mul(bytes, (size_t)shape[i], &bytes)) return 0;
    *out = bytes;
    return 1;
}

/* (n - 1) * stride + last: the bytes from the first element of an axis to the end of its last (strides may be
 * negative); 0 on overflow of int64. */
static inline int glt_span_bytes(int64_t n, int64_t stride, int64_t last, int64_t *out) {
    int64_t t = 0;
    if (n > 1 && __builtin_mul_overflow(n - 1, stride, &t)) return 0;
    return !__builtin_add_overflow(t, last, out);
}

#endif
