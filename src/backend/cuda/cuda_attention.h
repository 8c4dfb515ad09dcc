/* Scaled dot-product attention (SDPA) on the CUDA backend: the general kernel and the flash
 * kernels of kernels/attention*.cu, chosen per record, and the flash backward (SDPA_BACKWARD). */
#ifndef EMBER_CUDA_ATTENTION_H
#define EMBER_CUDA_ATTENTION_H

#include <stdbool.h>

#include "../backend.h"

/* True for the op kinds this file answers for (SDPA, SDPA_BACKWARD). */
bool cuda_attn_claims(em_op_kind k);
/* Whether cuda_attn_exec runs the record (SDPA: every float dtype, mask and layout of em_sdpa;
 * SDPA_BACKWARD: the flash kernels' cases only). */
bool cuda_attn_supports(const ir_op *op);
/* Runs a record cuda_attn_supports accepted on device dev; `what` names the call in errors. */
em_status cuda_attn_exec(const ir_op *op, int dev, const char *what);

#endif
