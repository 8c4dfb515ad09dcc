/* Shared decoders of typed parameters (decode.h). */
#include "decode.h"

#include <math.h>

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

/* The accumulation a reduction kind needs; *ints: integer inputs accumulate as integers. */
ir_red ir_red_of(const ir_op *op, bool *ints)
{
    bool int_in = !em_dtype_is_float(op->in[0]->dtype);
    *ints = false;
    switch (op->kind) {
    case EM_OP_SUM: *ints = int_in; return IR_RED_SUM;
    case EM_OP_MEAN: return IR_RED_SUM;
    case EM_OP_PROD: *ints = int_in; return IR_RED_PROD;
    case EM_OP_MAX: *ints = int_in; return IR_RED_MAX;
    case EM_OP_MIN: *ints = int_in; return IR_RED_MIN;
    case EM_OP_ARGMAX:
    case EM_OP_MAX_DIM: *ints = int_in; return IR_RED_ARGMAX;
    case EM_OP_ARGMIN:
    case EM_OP_MIN_DIM: *ints = int_in; return IR_RED_ARGMIN;
    case EM_OP_ANY:
    case EM_OP_ALL:
    case EM_OP_COUNT_NONZERO: *ints = int_in; return IR_RED_COUNT;
    case EM_OP_VAR:
    case EM_OP_STD: return IR_RED_SQDEV;
    case EM_OP_LOGSUMEXP: return IR_RED_EXPSUM;
    case EM_OP_NORM: {
        double q = op->p.reduce.p;
        if (q == INFINITY) return IR_RED_ABSMAX;
        if (q == -INFINITY) return IR_RED_ABSMIN;
        if (q == 0) return IR_RED_COUNT;
        if (q == 1) return IR_RED_ABS1;
        if (q == 2) return IR_RED_SQ;
        return IR_RED_ABSPOW;
    }
    default: return IR_RED_SUM;
    }
}

static int64_t pos_mod(int64_t a, int64_t n)
{
    int64_t m = a % n;
    return m < 0 ? m + n : m;
}

int64_t ir_map_plan(const ir_op *op, ir_tensor *xv, int64_t *maps, int64_t *off)
{
    const ir_tensor *y = op->out[0];
    int r = y->rank;
    *xv = *op->in[0];
    if (op->kind == EM_OP_REPEAT && xv->rank < r) { /* align x with the trailing dims */
        int lead = r - xv->rank;
        for (int d = r - 1; d >= 0; d--) {
            xv->shape[d] = d >= lead ? xv->shape[d - lead] : 1;
            xv->strides[d] = d >= lead ? xv->strides[d - lead] : 0;
        }
        xv->rank = r;
    }
    int64_t total = 0;
    for (int d = 0; d < r; d++) {
        if (off) off[d] = total;
        total += y->shape[d];
    }
    if (!maps) return total;
    int64_t shift[EM_MAX_RANK] = {0}, lo[EM_MAX_RANK] = {0};
    em_pad_mode mode = EM_PAD_CONSTANT;
    if (op->kind == EM_OP_ROLL) {
        for (int k = 0; k < op->p.roll.n; k++) shift[op->p.roll.dims[k]] += op->p.roll.shifts[k];
    } else if (op->kind == EM_OP_PAD) {
        mode = op->p.pad.mode;
        for (int k = 0; k < op->p.pad.n_pairs; k++) lo[r - 1 - k] = op->p.pad.pads[2 * k];
    }
    int64_t *p = maps;
    for (int d = 0; d < r; d++) {
        int64_t n = xv->shape[d];
        for (int64_t j = 0; j < y->shape[d]; j++) {
            switch (op->kind) {
            case EM_OP_REPEAT: p[j] = j % n; break;
            case EM_OP_ROLL: p[j] = pos_mod(j - pos_mod(shift[d], n), n); break;
            default: p[j] = ir_pad_src(mode, j - lo[d], n); break;
            }
        }
        p += y->shape[d];
    }
    return total;
}

void ir_reduce_plan(const ir_op *op, uint32_t mask, bool keepdim, ir_rplan *p)
{
    const ir_tensor *x = op->in[0];
    int nout = op->n_out < 2 ? op->n_out : 2;
    p->nk = p->nr = 0;
    p->M = p->N = 1;
    int od = 0;
    for (int d = 0; d < x->rank; d++) {
        if ((mask >> d) & 1u) {
            p->N *= x->shape[d];
            if (x->shape[d] != 1) {
                int n = p->nr;
                if (n > 0 && p->rx[n - 1] == x->strides[d] * x->shape[d]) {
                    p->rshape[n - 1] *= x->shape[d];
                    p->rx[n - 1] = x->strides[d];
                } else {
                    p->rshape[n] = x->shape[d];
                    p->rx[n] = x->strides[d];
                    p->nr++;
                }
            }
            if (keepdim) od++;
            continue;
        }
        p->M *= x->shape[d];
        int64_t n = x->shape[d], kx = x->strides[d], ko[2] = {0, 0};
        for (int k = 0; k < nout; k++) ko[k] = op->out[k]->strides[od];
        od++;
        if (n == 1) continue;
        int m = p->nk;
        bool merge = m > 0 && p->kx[m - 1] == kx * n;
        for (int k = 0; k < 2; k++) merge = merge && p->ko[k][m - 1] == ko[k] * n;
        if (merge)
            m--;
        else
            p->kshape[m] = 1;
        p->kshape[m] *= n;
        p->kx[m] = kx;
        for (int k = 0; k < 2; k++) p->ko[k][m] = ko[k];
        p->nk = m + 1;
    }
    if (p->nr == 0) {
        p->rshape[0] = 1;
        p->rx[0] = 0;
        p->nr = 1;
    }
}
