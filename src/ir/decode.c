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

void ir_conv_windows(em_op_kind kind, const em_p_conv *p, const int64_t *xs, int xr,
                     const int64_t *ws, const int64_t *ys, int yr, ir_win3 *g)
{
    bool tr = kind == EM_OP_CONV_TRANSPOSE;
    int nd = p->nd;
    for (int i = 0; i < 3; i++) {
        int j = i - (3 - nd); /* the record's spatial dims, right-aligned */
        int64_t xl = j >= 0 ? xs[xr - nd + j] : 1, yl = j >= 0 ? ys[yr - nd + j] : 1;
        g->in[i] = tr ? yl : xl;
        g->out[i] = tr ? xl : yl;
        g->k[i] = j >= 0 ? ws[2 + j] : 1;
        g->s[i] = j >= 0 ? p->stride[j] : 1;
        g->p[i] = j >= 0 ? p->pad_lo[j] : 0;
        g->d[i] = j >= 0 ? p->dilation[j] : 1;
    }
}

void ir_fold_windows(const em_p_fold *p, ir_win3 *g)
{
    g->in[0] = g->out[0] = g->k[0] = g->s[0] = g->d[0] = 1;
    g->p[0] = 0;
    for (int j = 0; j < 2; j++) {
        g->k[1 + j] = p->kernel[j], g->d[1 + j] = p->dilation[j], g->p[1 + j] = p->pad[j];
        g->s[1 + j] = p->stride[j], g->in[1 + j] = p->image[j];
        int64_t span = p->dilation[j] * (p->kernel[j] - 1) + 1;
        g->out[1 + j] = (p->image[j] + 2 * p->pad[j] - span) / p->stride[j] + 1;
    }
}

int ir_pool_windows(em_op_kind kind, const em_params *p, const int64_t *xs, int xr,
                    const int64_t *ys, int yr, ir_win3 *g)
{
    bool window = kind == EM_OP_MAX_POOL || kind == EM_OP_MAX_POOL_VALUES || kind == EM_OP_AVG_POOL;
    int nd = ir_spatial_dims(kind, p);
    for (int i = 0; i < 3; i++) {
        int j = i - (3 - nd); /* the record's spatial dims, right-aligned */
        g->in[i] = j >= 0 ? xs[xr - nd + j] : 1;
        g->out[i] = j >= 0 ? ys[yr - nd + j] : 1;
        g->k[i] = window && j >= 0 ? p->pool.kernel[j] : 1;
        g->s[i] = window && j >= 0 ? p->pool.stride[j] : 1;
        g->p[i] = window && j >= 0 ? p->pool.pad[j] : 0;
        g->d[i] = window && j >= 0 ? p->pool.dilation[j] : 1;
    }
    return nd;
}
