/* Shared decoders of typed parameters (decode.h). */
#include "decode.h"

uint32_t ir_reduce_mask(em_op_kind k, const em_params *p, int rank, bool *keepdim)
{
    uint32_t all = rank ? (uint32_t)((1u << rank) - 1) : 0;
    switch (k) {
    case EM_OP_ARGMAX:
    case EM_OP_ARGMIN:
    case EM_OP_MAX_DIM:
    case EM_OP_MIN_DIM:
        *keepdim = p->dim.keepdim;
        return p->dim.dim < 0 ? all : (uint32_t)(1u << p->dim.dim) & all;
    default: *keepdim = p->reduce.keepdim; return p->reduce.mask & all;
    }
}
