/* The CUDA backend's reductions, scans, softmax and ordering ops (cuda_reduce.c, kernels in
 * kernels/reduce.cu, reduce_lsg.cu and reduce_sort.cu). */
#ifndef EMBER_CUDA_REDUCE_H
#define EMBER_CUDA_REDUCE_H

#include "cuda.h"

/* Whether kind is one of the kinds cuda_reduce.c answers for. */
bool cuda_reduce_claims(em_op_kind kind);
/* Whether cuda_reduce_exec runs op (called for claimed kinds only). */
bool cuda_reduce_supports(const ir_op *op);
/* Runs a claimed op that cuda_reduce_supports accepted, on device dev. */
em_status cuda_reduce_exec(const ir_op *op, int dev, const char *what);

#endif
