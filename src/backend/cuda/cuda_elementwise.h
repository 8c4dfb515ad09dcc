/* The CUDA backend's elementwise family: unary and binary ops of every dtype (strided and
 * broadcast operands), where, clamp, lerp, casts, ranges, eye, one_hot, tril/triu and the
 * random creation ops and dropout. Kernels in kernels/ew.cu and kernels/ew_random.cu. */
#ifndef EMBER_CUDA_ELEMENTWISE_H
#define EMBER_CUDA_ELEMENTWISE_H

#include <stdbool.h>

#include "../backend.h"

/* Whether the kind belongs to this family (then cuda_ew_supports answers for it). */
bool cuda_ew_claims(em_op_kind kind);
/* Whether cuda_ew_exec runs this record natively. */
bool cuda_ew_supports(const ir_op *op);
/* Runs a record cuda_ew_supports accepted on device dev (its context current). */
em_status cuda_ew_exec(const ir_op *op, int dev, const char *what);

#endif
