/* The CUDA backend's index, combine and resampling ops (cuda_index.c, cuda_resample.c). */
#ifndef EMBER_CUDA_INDEX_H
#define EMBER_CUDA_INDEX_H

#include "../backend.h"

/* True for the kinds cuda_index.c owns: the index and combine families, pixel (un)shuffle,
 * average and adaptive pooling, interpolation. */
bool cuda_index_claims(em_op_kind kind);
/* Whether cuda_index_exec runs op (decides alone for the kinds it claims). */
bool cuda_index_supports(const ir_op *op);
/* Runs a supported op on device dev (its context current); `what` names it in errors. */
em_status cuda_index_exec(const ir_op *op, int dev, const char *what);

/* dst (device memory for x's numel elements of dt, contiguous) = x converted to dt as the CPU
 * converts (a plain copy when the dtypes match). */
em_status cuda_index_to_contiguous(int dev, const ir_tensor *x, em_dtype dt, void *dst,
                                   const char *what);
/* AVG_POOL, ADAPTIVE_AVG_POOL, ADAPTIVE_MAX_POOL, INTERPOLATE (cuda_resample.c). */
bool cuda_resample_supports(const ir_op *op);
em_status cuda_resample_exec(const ir_op *op, int dev, const char *what);

#endif
