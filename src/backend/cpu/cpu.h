/* The CPU backend's private header: element access for every dtype, the strided N-d loop
 * that kernels share, and one exec entry point per op family. */
#ifndef EMBER_CPU_H
#define EMBER_CPU_H

#include <math.h>
#include <string.h>

#include "../backend.h"

/* ---- element access ---------------------------------------------------------------------- */

static inline double cpu_get_f64(const void *p, em_dtype dt)
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

static inline int64_t cpu_get_i64(const void *p, em_dtype dt)
{
    switch (dt) {
    case EM_I64: return *(const int64_t *)p;
    case EM_I32: return *(const int32_t *)p;
    case EM_I16: return *(const int16_t *)p;
    case EM_I8: return *(const int8_t *)p;
    case EM_U8: return *(const uint8_t *)p;
    case EM_BOOL: return *(const uint8_t *)p ? 1 : 0;
    default: {
        double v = cpu_get_f64(p, dt);
        /* float -> int truncates toward zero; NaN and out-of-range give INT64_MIN like x86 */
        if (!(v > -9.2233720368547758e18 && v < 9.2233720368547758e18)) return INT64_MIN;
        return (int64_t)v;
    }
    }
}

/* Float -> integer store: truncation toward zero, wrapping to the width like PyTorch on x86. */
static inline void cpu_set_i64(void *p, em_dtype dt, int64_t v)
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

static inline void cpu_set_f64(void *p, em_dtype dt, double v)
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
        cpu_set_i64(p, dt, i);
    }
    }
}

/* Address of the element at row-major linear index `lin` of t (any strides). */
static inline char *cpu_elem(const em_tensor *t, int64_t lin)
{
    int64_t off = t->offset;
    for (int d = t->rank - 1; d >= 0; d--) {
        int64_t n = t->shape[d];
        off += (lin % n) * t->strides[d];
        lin /= n;
    }
    return (char *)t->storage->data + off * (int64_t)em_dtype_size(t->dtype);
}

/* ---- the strided loop -------------------------------------------------------------------- */

#define CPU_MAX_OPS 6

/* One row of a loop: n elements; ptrs[k] points at operand k's first element, strides[k] is
 * its byte stride along the row. */
typedef void (*cpu_row_fn)(char **ptrs, const int64_t *strides, int64_t n, void *ctx);

/* Runs fn over every row of `shape` for nops operands with byte strides strides[k][d].
 * Dims are coalesced where the strides allow; with `parallel` the rows (or chunks of a
 * single long row) are spread over the thread pool when the work is large. */
void cpu_loop(int rank, const int64_t *shape, int nops, char *const *base,
              int64_t strides[][EM_MAX_RANK], cpu_row_fn fn, void *ctx, bool parallel);

/* Byte strides of t broadcast to `shape` (rank r). */
void cpu_bstrides(const em_tensor *t, const int64_t *shape, int r, int64_t *out);

/* Copies src (any layout) into dst (same shape, any layout), converting dtypes. */
void cpu_copy_convert(em_tensor *dst, const em_tensor *src);

/* Contiguous f64 copy of t's values (em_alloc'd; free with em_free), or NULL on OOM. */
double *cpu_load_f64(const em_tensor *t);
/* Writes contiguous doubles into `out` (any layout), converting to its dtype. */
void cpu_store_f64(em_tensor *out, const double *v);

/* Elements below this count run on one thread. */
#define CPU_PAR_MIN 32768

/* ---- family entry points (one file each) ------------------------------------------------- */

em_status cpu_exec_create(const em_op *op);
em_status cpu_exec_unary(const em_op *op);
em_status cpu_exec_binary(const em_op *op);
em_status cpu_exec_reduce(const em_op *op);
em_status cpu_exec_linalg(const em_op *op);
em_status cpu_exec_index(const em_op *op);
em_status cpu_exec_combine(const em_op *op);
em_status cpu_exec_order(const em_op *op);
em_status cpu_exec_nn(const em_op *op);
em_status cpu_exec_signal(const em_op *op);
em_status cpu_exec_view(const em_op *op);
/* nn sub-families (cpu_nn.c dispatches) */
em_status cpu_exec_conv(const em_op *op);       /* conv, conv_transpose, im2col, col2im */
em_status cpu_exec_conv_wgrad(const em_op *op); /* conv_weight_grad (cpu_conv_wgrad.c) */
em_status cpu_exec_pool(const em_op *op); /* pools, adaptive pools, interpolate, pixel shuffle */
em_status cpu_exec_norm(const em_op *op); /* norms, sdpa, dropout */

/* y = op(x) for n contiguous values with the unary kernels' own code (kind one of the
 * parameter-free activations: RELU, GELU, GELU_TANH, SILU ...), so a fused epilogue gives the
 * unary op's bits; x and y do not overlap. */
void cpu_act_f32(em_op_kind kind, const float *x, float *y, int64_t n);
void cpu_act_f64(em_op_kind kind, const double *x, double *y, int64_t n);

/* The accumulations of the reductions (cpu_reduce.c; the CUDA reductions use the same codes). */
typedef enum cpu_red {
    R_SUM,    /* s += x (ints: u += x) */
    R_PROD,   /* s *= x (ints: u *= x) */
    R_MAX,    /* NaN-propagating max (ints: v) */
    R_MIN,    /* NaN-propagating min (ints: v) */
    R_ARGMAX, /* max with its first position; the first NaN wins */
    R_ARGMIN,
    R_COUNT,  /* u += x != 0 */
    R_SQDEV,  /* s += (x - c)^2 */
    R_EXPSUM, /* s += exp(x - c) */
    R_ABS1,   /* s += |x| */
    R_SQ,     /* s += x^2 */
    R_ABSMAX, /* NaN-propagating max |x| */
    R_ABSMIN,
    R_ABSPOW, /* s += |x|^p */
} cpu_red;
/* The accumulation a reduction kind needs; *ints: integer inputs accumulate as integers. */
cpu_red cpu_red_of(const em_op *op, bool *ints);

/* REPEAT, ROLL, PAD (shared with the CUDA backend): *xv is x aligned with the output's rank, and
 * maps (when not NULL) receives, for each output dim d from maps + off[d], the input
 * coordinate each output coordinate reads (-1: PAD's fill value). Returns the number of map
 * entries (the sum of the output's dims). */
int64_t cpu_map_plan(const em_op *op, em_tensor *xv, int64_t *maps, int64_t *off);

#endif
