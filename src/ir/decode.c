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

int64_t ir_pad_src(em_pad_mode mode, int64_t k, int64_t n)
{
    if (k >= 0 && k < n) return k;
    switch (mode) {
    case EM_PAD_REFLECT:
        if (k < 0) k = -k;
        if (k >= n) k = 2 * (n - 1) - k;
        return k;
    case EM_PAD_REPLICATE: return k < 0 ? 0 : n - 1;
    case EM_PAD_CIRCULAR: {
        int64_t m = k % n;
        return m < 0 ? m + n : m;
    }
    default: return -1;
    }
}
