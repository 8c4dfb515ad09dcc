/* Element access for every dtype: read any element as double or int64, write one with the
 * library's conversions (float -> integer truncates toward zero and wraps to the width, as
 * PyTorch on x86). For host memory: the CPU kernels and the tensor layer's data in and out. */
#ifndef EMBER_IR_ELEM_H
#define EMBER_IR_ELEM_H

#include <stdint.h>

#include "ir.h"

static inline double ir_get_f64(const void *p, em_dtype dt)
{
    switch (dt) {
    case EM_F64: return *(const double *)p;
    case EM_F32: return *(const float *)p;
    case EM_F16: return em_f16_to_f32(*(const uint16_t *)p);
    case EM_BF16: return em_bf16_to_f32(*(const uint16_t *)p);
    case EM_I64: return (double)*(const int64_t *)p;
    case EM_I32: return *(const int32_t *)p;
    case EM_I16: return *(const int16_t *)p;
    case EM_I8: return *(const int8_t *)p;
    case EM_U8: return *(const uint8_t *)p;
    case EM_BOOL: return *(const uint8_t *)p ? 1.0 : 0.0;
    default: return 0;
    }
}

static inline int64_t ir_get_i64(const void *p, em_dtype dt)
{
    switch (dt) {
    case EM_I64: return *(const int64_t *)p;
    case EM_I32: return *(const int32_t *)p;
    case EM_I16: return *(const int16_t *)p;
    case EM_I8: return *(const int8_t *)p;
    case EM_U8: return *(const uint8_t *)p;
    case EM_BOOL: return *(const uint8_t *)p ? 1 : 0;
    default: {
        double v = ir_get_f64(p, dt);
        /* float -> int truncates toward zero; NaN and out-of-range give INT64_MIN like x86 */
        if (!(v > -9.2233720368547758e18 && v < 9.2233720368547758e18)) return INT64_MIN;
        return (int64_t)v;
    }
    }
}

/* Float -> integer store: truncation toward zero, wrapping to the width like PyTorch on x86. */
static inline void ir_set_i64(void *p, em_dtype dt, int64_t v)
{
    switch (dt) {
    case EM_I64: *(int64_t *)p = v; break;
    case EM_I32: *(int32_t *)p = (int32_t)(uint32_t)(uint64_t)v; break;
    case EM_I16: *(int16_t *)p = (int16_t)(uint16_t)(uint64_t)v; break;
    case EM_I8: *(int8_t *)p = (int8_t)(uint8_t)(uint64_t)v; break;
    case EM_U8: *(uint8_t *)p = (uint8_t)(uint64_t)v; break;
    case EM_BOOL: *(uint8_t *)p = v != 0; break;
    case EM_F64: *(double *)p = (double)v; break;
    case EM_F32: *(float *)p = (float)v; break;
    case EM_F16: *(uint16_t *)p = em_f32_to_f16((float)v); break;
    case EM_BF16: *(uint16_t *)p = em_f32_to_bf16((float)v); break;
    default: break;
    }
}

static inline void ir_set_f64(void *p, em_dtype dt, double v)
{
    switch (dt) {
    case EM_F64: *(double *)p = v; break;
    case EM_F32: *(float *)p = (float)v; break;
    case EM_F16: *(uint16_t *)p = em_f32_to_f16((float)v); break;
    case EM_BF16: *(uint16_t *)p = em_f32_to_bf16((float)v); break;
    case EM_BOOL: *(uint8_t *)p = v != 0; break;
    default: {
        int64_t i;
        if (!(v > -9.2233720368547758e18 && v < 9.2233720368547758e18))
            i = INT64_MIN;
        else
            i = (int64_t)v;
        ir_set_i64(p, dt, i);
    }
    }
}

/* Address of the element at row-major linear index `lin` of t (any strides). */
static inline char *ir_elem(const ir_tensor *t, int64_t lin)
{
    int64_t off = 0;
    for (int d = t->rank - 1; d >= 0; d--) {
        int64_t n = t->shape[d];
        off += (lin % n) * t->strides[d];
        lin /= n;
    }
    return (char *)t->data + off * (int64_t)em_dtype_size(t->dtype);
}

#endif
