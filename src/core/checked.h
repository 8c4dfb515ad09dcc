/* Overflow-checked integer arithmetic for shapes, strides, element offsets and byte sizes. Every
 * such computation on values a caller or a file can choose goes through these, so that a huge
 * size becomes an error naming it instead of a wrapped value. Each returns false when the exact
 * result does not fit (and then leaves *out unspecified). */
#ifndef EMBER_CHECKED_H
#define EMBER_CHECKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

static inline bool core_add_ok(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}

static inline bool core_sub_ok(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_sub_overflow(a, b, out);
}

static inline bool core_mul_ok(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

/* a * b + c. */
static inline bool core_muladd_ok(int64_t a, int64_t b, int64_t c, int64_t *out)
{
    int64_t p;
    return !__builtin_mul_overflow(a, b, &p) && !__builtin_add_overflow(p, c, out);
}

/* The product of a shape's dims with zeros counted as ones: its largest row-major stride times
 * the first dim, which must fit even when the shape has no elements. False for a negative dim
 * or a product past INT64_MAX. */
static inline bool core_span_ok(const int64_t *dims, int rank, int64_t *out)
{
    int64_t span = 1;
    for (int d = 0; d < rank; d++)
        if (dims[d] < 0 || (dims[d] > 0 && __builtin_mul_overflow(span, dims[d], &span)))
            return false;
    *out = span;
    return true;
}

/* The element count of a shape; false where core_span_ok is. */
static inline bool core_numel_ok(const int64_t *dims, int rank, int64_t *out)
{
    int64_t span;
    if (!core_span_ok(dims, rank, &span)) return false;
    *out = span;
    for (int d = 0; d < rank; d++)
        if (dims[d] == 0) *out = 0;
    return true;
}

/* Bytes of n >= 0 elements of `elem` bytes each; false past INT64_MAX (so the result also fits
 * a size_t and an int64_t). */
static inline bool core_nbytes_ok(int64_t n, size_t elem, size_t *out)
{
    int64_t b;
    if (n < 0 || __builtin_mul_overflow(n, (int64_t)elem, &b)) return false;
    *out = (size_t)b;
    return true;
}

/* ceil(n / d) for n >= 0 and d > 0, without forming n + d - 1. */
static inline int64_t core_ceil_div(int64_t n, int64_t d)
{
    return n / d + (n % d != 0);
}

#endif
