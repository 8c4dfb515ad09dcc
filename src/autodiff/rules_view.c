/* Backward rules for views (reshape, permute, slice, expand, flip, unfold) and for the
 * creation-family ops that take float inputs (tril, triu, contiguous, cast). */
#include <string.h>

#include "autodiff_impl.h"

/* unfold: windows of `size` every `step` along dim became a new last dim; each window element
 * adds back at position w*step + j. */
static em_tensor *unfold_backward(ad_ctx *c, em_tensor *g)
{
    int dim = c->op->p.unfold.dim;
    int64_t size = c->op->p.unfold.size, step = c->op->p.unfold.step;
    em_shape in = ad_in_shape(c, 0);
    bool scalar = in.rank == 0;
    em_shape base = scalar ? EM_SHAPE(1) : in;
    em_tensor *acc = em_zeros(base, g->dtype, em_tensor_device(g));
    int64_t windows = g->shape[dim];
    for (int64_t j = 0; j < size && acc; j++) {
        em_tensor *part = em_select(g, -1, j); /* [..., windows at dim, ...] */
        em_tensor *idx = em_arange((double)j, (double)(j + windows * step), (double)step, EM_I64,
                                   em_tensor_device(g));
        em_tensor *next = tn_index_add_inrange(acc, dim, idx, part, 1.0);
        em_release(part);
        em_release(idx);
        em_release(acc);
        acc = next;
    }
    if (!scalar || !acc) return acc;
    em_tensor *r = em_reshape(acc, in);
    em_release(acc);
    return r;
}

em_tensor *ad_slice_pad(const em_tensor *g, int dim, int64_t start, em_shape full)
{
    /* one zero-padding pass over the input's shape (zeros, then a slice assign, took three);
       pads are (before, after) pairs from the last dim */
    int64_t pads[2 * EM_MAX_RANK] = {0};
    int at = 2 * (full.rank - 1 - dim);
    pads[at] = start;
    pads[at + 1] = full.dims[dim] - start - em_tensor_dim(g, dim);
    return em_pad(g, pads, full.rank - dim, EM_PAD_CONSTANT, 0.0);
}

em_status ad_rule_view(ad_ctx *c)
{
    if (!c->needs[0]) return EM_OK;
    em_tensor *g = ad_gout(c, 0);
    if (!g) return em_last_status();
    em_shape in = ad_in_shape(c, 0);
    switch (c->op->kind) {
    case EM_OP_RESHAPE: c->gin[0] = em_reshape(g, in); break;
    case EM_OP_PERMUTE: {
        em_axes inv = {.n = in.rank};
        for (int d = 0; d < in.rank; d++) inv.d[c->op->p.permute.perm[d]] = d;
        c->gin[0] = em_permute(g, inv);
        break;
    }
    case EM_OP_SLICE: {
        const em_p_slice *sl = &c->op->p.slice;
        int dim = sl->dim;
        int64_t starts[EM_MAX_RANK], ends[EM_MAX_RANK], steps[EM_MAX_RANK];
        for (int d = 0; d < in.rank; d++) {
            starts[d] = 0;
            ends[d] = in.dims[d];
            steps[d] = 1;
        }
        starts[dim] = sl->start;
        ends[dim] = sl->end;
        steps[dim] = sl->step;
        if (steps[dim] == 1) {
            c->gin[0] = ad_slice_pad(g, dim, starts[dim], in);
            break;
        }
        em_tensor *z = em_zeros(in, g->dtype, em_tensor_device(g));
        c->gin[0] = em_slice_assign(z, starts, ends, steps, g);
        break;
    }
    case EM_OP_EXPAND: c->gin[0] = ad_sum_to(g, in); break;
    case EM_OP_FLIP: {
        em_axes dims = {.n = 0};
        for (int d = 0; d < in.rank; d++)
            if (c->op->p.flip.mask & (1u << d)) dims.d[dims.n++] = d;
        c->gin[0] = dims.n ? em_flip(g, dims) : g;
        break;
    }
    case EM_OP_UNFOLD: c->gin[0] = unfold_backward(c, g); break;
    default: return ad_no_rule(c);
    }
    return c->gin[0] ? EM_OK : em_last_status();
}

em_status ad_rule_create(ad_ctx *c)
{
    switch (c->op->kind) {
    case EM_OP_TRIL:
    case EM_OP_TRIU:
        if (c->needs[0])
            c->gin[0] = c->op->kind == EM_OP_TRIL ? em_tril(ad_gout(c, 0), c->op->p.diag.k)
                                                  : em_triu(ad_gout(c, 0), c->op->p.diag.k);
        return EM_OK;
    case EM_OP_COPY:
    case EM_OP_CAST:
        if (c->needs[0]) c->gin[0] = ad_gout(c, 0); /* the engine casts to the input's dtype */
        return EM_OK;
    case EM_OP_BERNOULLI: return EM_OK; /* sampling: no gradient to the probabilities */
    default: break;
    }
    return ad_no_rule(c);
}
