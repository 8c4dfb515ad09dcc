/* Decoders of typed parameters that more than one layer needs (the CPU and CUDA kernels, the
 * backward rules): each lives here once. */
#ifndef EMBER_IR_DECODE_H
#define EMBER_IR_DECODE_H

#include "ir.h"

/* The dims a REDUCE kind reduces over an input of rank `rank` (bit d = dim d; the flattened
 * ARGMAX / ARGMIN reduce every dim) and, in *keepdim, whether its output keeps them. */
uint32_t ir_reduce_mask(em_op_kind k, const em_params *p, int rank, bool *keepdim);

#endif
