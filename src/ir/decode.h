/* Decoders of typed parameters that more than one layer needs (the CPU and CUDA kernels, the
 * backward rules): each lives here once. */
#ifndef EMBER_IR_DECODE_H
#define EMBER_IR_DECODE_H

#include "ir.h"

/* The dims a REDUCE kind reduces over an input of rank `rank` (bit d = dim d; the flattened
 * ARGMAX / ARGMIN reduce every dim) and, in *keepdim, whether its output keeps them. */
uint32_t ir_reduce_mask(em_op_kind k, const em_params *p, int rank, bool *keepdim);

/* The input coordinate that padded coordinate k (relative to the input's start, along a dim of
 * size n) reads under PAD's mode: k itself inside, the reflected, replicated or wrapped one
 * outside, -1 for the constant. */
int64_t ir_pad_src(em_pad_mode mode, int64_t k, int64_t n);

#endif
