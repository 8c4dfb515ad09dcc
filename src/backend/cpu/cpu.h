/* The CPU backend's private header: element access for every dtype, the strided N-d loop
 * that kernels share, and one exec entry point per op family. */
#ifndef EMBER_CPU_H
#define EMBER_CPU_H

#include <math.h>
#include <string.h>

#include "../../ir/elem.h"
#include "../backend.h"

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
void cpu_bstrides(const ir_tensor *t, const int64_t *shape, int r, int64_t *out);

/* Copies src (any layout) into dst (same shape, any layout), converting dtypes. */
void cpu_copy_convert(ir_tensor *dst, const ir_tensor *src);

/* Contiguous f64 copy of t's values (em_alloc'd; free with em_free), or NULL on OOM. */
double *cpu_load_f64(const ir_tensor *t);
/* Writes contiguous doubles into `out` (any layout), converting to its dtype. */
void cpu_store_f64(ir_tensor *out, const double *v);

/* Elements below this count run on one thread. */
#define CPU_PAR_MIN 32768

/* ---- family entry points (one file each) ------------------------------------------------- */

em_status cpu_exec_create(const ir_op *op);
em_status cpu_exec_unary(const ir_op *op);
em_status cpu_exec_binary(const ir_op *op);
em_status cpu_exec_reduce(const ir_op *op);
em_status cpu_exec_linalg(const ir_op *op);
em_status cpu_exec_index(const ir_op *op);
em_status cpu_exec_combine(const ir_op *op);
em_status cpu_exec_order(const ir_op *op);
em_status cpu_exec_nn(const ir_op *op);
em_status cpu_exec_signal(const ir_op *op);
em_status cpu_exec_view(const ir_op *op);
/* nn sub-families (cpu_nn.c dispatches) */
em_status cpu_exec_conv(const ir_op *op);       /* conv, conv_transpose, im2col, col2im */
em_status cpu_exec_conv_wgrad(const ir_op *op); /* conv_weight_grad (cpu_conv_wgrad.c) */
em_status cpu_exec_pool(const ir_op *op); /* pools, adaptive pools, interpolate, pixel shuffle */
em_status cpu_exec_norm(const ir_op *op); /* norms, sdpa, dropout */

/* y = op(x) for n contiguous values with the unary kernels' own code (kind one of the
 * parameter-free activations: RELU, GELU, GELU_TANH, SILU ...), so a fused epilogue gives the
 * unary op's bits; x and y do not overlap. */
void cpu_act_f32(em_op_kind kind, const float *x, float *y, int64_t n);
void cpu_act_f64(em_op_kind kind, const double *x, double *y, int64_t n);

#endif
