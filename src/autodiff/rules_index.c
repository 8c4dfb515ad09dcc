/* Backward rules for the index family: gather, scatter (assign, add, mul, min, max),
 * index_select, index_add, masked_select, slice_assign and embedding. nonzero has an integer
 * output and is never recorded. Temporaries belong to the rule's scope. */
#include "autodiff_impl.h"

/* t narrowed to the leading `s` elements of every dim (src of scatter may be larger than index:
 * only that corner takes part). */
static em_tensor *corner(em_tensor *t, em_shape s)
{
    for (int d = 0; d < s.rank && t; d++)
        if (t->shape[d] != s.dims[d]) t = em_narrow(t, d, 0, s.dims[d]);
    return t;
}

/* g (index-shaped) as the gradient of scatter's src: summed for a rank-0 src, else placed in
 * the corner of zeros shaped like src. */
static em_tensor *to_src(ad_ctx *c, em_tensor *g)
{
    em_shape s = ad_in_shape(c, 2);
    if (!g) return NULL;
    if (s.rank == 0) return em_sum(g, EM_ALL, false);
    if (em_shape_equal(em_tensor_shape(g), s)) return g;
    int64_t ends[EM_MAX_RANK];
    for (int d = 0; d < s.rank; d++) ends[d] = g->shape[d];
    return em_slice_assign(ad_zero_base(s, g), NULL, ends, NULL, g);
}

/* 1 where x == v (bool), as x's dtype. */
static em_tensor *eq_as(const em_tensor *x, const em_tensor *v)
{
    return em_cast(em_eq(x, v), em_tensor_dtype(x));
}

/* scatter: out = x, then src at index (assign) or combined with it (add/mul/min/max with
 * include_self, as torch's scatter_reduce). */
static em_status scatter_backward(ad_ctx *c)
{
    const em_op *op = c->op;
    int dim = op->p.index.dim;
    em_reduce_mode mode = op->p.index.mode;
    em_tensor *x = op->in[0], *index = op->in[1], *src = op->in[2];
    em_tensor *out = c->out[0], *g = ad_gout(c, 0);
    if (!g) return em_last_status();
    em_shape is = em_tensor_shape(index);
    em_device dev = em_tensor_device(g);
    /* the src values that took part, index-shaped, in x's dtype */
    em_tensor *sv = src->rank == 0
                        ? em_expand(src->dtype == x->dtype ? src : em_cast(src, x->dtype), is)
                        : corner(src, is);
    em_tensor *gx = NULL, *gs = NULL;
    switch (mode) {
    case EM_SCATTER_ASSIGN: {
        if (c->needs[0]) gx = em_scatter(g, dim, index, em_zeros(EM_SCALAR, g->dtype, dev), mode);
        if (!c->needs[2]) break;
        /* with duplicate indices the last write in row-major order wins: only the winners get
         * a gradient (found by scattering each element's own position and reading it back) */
        int64_t n = em_shape_numel(is);
        em_tensor *ids = em_reshape(em_arange(0, (double)n, 1, EM_I64, dev), is);
        em_tensor *w = em_scatter(em_full(em_tensor_shape(x), -1, EM_I64, dev), dim, index, ids,
                                  EM_SCATTER_ASSIGN);
        em_tensor *won = em_eq(em_gather(w, dim, index), ids);
        gs = em_where(won, em_gather(g, dim, index), em_zeros(EM_SCALAR, g->dtype, dev));
        break;
    }
    case EM_SCATTER_ADD:
        if (c->needs[0]) gx = g;
        if (c->needs[2]) gs = em_gather(g, dim, index);
        break;
    case EM_SCATTER_MUL: {
        /* torch's scatter_reduce "prod" rule: exclusive products where x or src is 0 */
        if (c->needs[0]) {
            em_tensor *mx = em_masked_fill(x, em_eq_scalar(x, 0), 1);
            gx = em_div(em_mul(g, em_scatter(mx, dim, index, sv, mode)), mx);
        }
        if (!c->needs[2]) break;
        em_tensor *zero = em_eq_scalar(sv, 0);
        em_tensor *nzero = em_gather(em_scatter(em_zeros(em_tensor_shape(x), x->dtype, dev), dim,
                                                index, em_cast(zero, x->dtype), EM_SCATTER_ADD),
                                     dim, index);
        em_tensor *single = em_logical_and(zero, em_eq_scalar(nzero, 1));
        em_tensor *excl = em_scatter(x, dim, index, em_masked_fill(sv, single, 1), mode);
        gs = em_where(single, em_gather(em_mul(g, excl), dim, index),
                      em_div(em_gather(em_mul(g, out), dim, index), em_masked_fill(sv, zero, 1)));
        break;
    }
    case EM_SCATTER_MIN:
    case EM_SCATTER_MAX: {
        /* torch's amin/amax rule: the gradient splits evenly among the values equal to the
         * result (x's own value included) */
        em_tensor *self_is = eq_as(x, out);
        em_tensor *src_is = eq_as(sv, em_gather(out, dim, index));
        em_tensor *share =
            em_div(g, em_scatter(self_is, dim, index, src_is, EM_SCATTER_ADD)); /* x-shaped */
        if (c->needs[0]) gx = em_mul(self_is, share);
        if (c->needs[2]) gs = em_mul(src_is, em_gather(share, dim, index));
        break;
    }
    default: return ad_no_rule(c);
    }
    if (c->needs[0]) c->gin[0] = gx;
    if (c->needs[2]) c->gin[2] = to_src(c, gs);
    return ad_status(c);
}

/* masked_select: g goes back to the true positions of the broadcast mask (row-major), then is
 * summed over the dims x was broadcast along. */
static em_tensor *masked_select_backward(ad_ctx *c, em_tensor *g)
{
    em_shape bs = {.rank = c->op->p.shape.rank};
    for (int d = 0; d < bs.rank; d++) bs.dims[d] = c->op->p.shape.dims[d];
    int64_t nb = em_shape_numel(bs);
    em_tensor *mask = em_reshape(em_expand(c->op->in[1], bs), EM_SHAPE(nb));
    em_tensor *pos = em_reshape(em_nonzero(mask), EM_SHAPE(g->shape[0])); /* flat positions */
    em_tensor *flat = tn_index_add_inrange(ad_zero_base(EM_SHAPE(nb), g), 0, pos, g, 1.0);
    return ad_sum_to(em_reshape(flat, bs), ad_in_shape(c, 0));
}

static em_status slice_assign_backward(ad_ctx *c, em_tensor *g)
{
    const em_p_slice_assign *p = &c->op->p.slice_assign;
    const int64_t *starts = p->start, *ends = p->end, *steps = p->step;
    if (c->needs[0])
        c->gin[0] = em_slice_assign(g, starts, ends, steps,
                                    em_zeros(EM_SCALAR, g->dtype, em_tensor_device(g)));
    if (c->needs[1]) {
        em_tensor *r = g;
        for (int d = 0; d < g->rank && r; d++)
            if (starts[d] != 0 || ends[d] != g->shape[d] || steps[d] != 1)
                r = em_slice(r, d, starts[d], ends[d], steps[d]);
        c->gin[1] = ad_sum_to(r, ad_in_shape(c, 1));
    }
    return ad_status(c);
}

em_status ad_rule_index(ad_ctx *c)
{
    const em_op *op = c->op;
    em_tensor *g = ad_gout(c, 0);
    if (!g) return em_last_status();
    int dim = op->p.index.dim; /* (EMBEDDING has none) */
    switch (op->kind) {
    case EM_OP_GATHER:
        if (c->needs[0])
            c->gin[0] =
                tn_scatter_inrange(ad_zero_base(ad_in_shape(c, 0), g), dim, op->in[1], g,
                                   EM_SCATTER_ADD); /* the forward checked (or guarded) it */
        break;
    case EM_OP_SCATTER: return scatter_backward(c);
    case EM_OP_INDEX_SELECT:
        if (c->needs[0])
            c->gin[0] = tn_index_add_inrange(ad_zero_base(ad_in_shape(c, 0), g), dim, op->in[1], g,
                                             1.0); /* the forward checked (or guarded) it */
        break;
    case EM_OP_INDEX_ADD:
        if (c->needs[0]) c->gin[0] = g;
        if (c->needs[2]) {
            em_tensor *s = em_index_select(g, dim, op->in[1]);
            double alpha = op->p.index.alpha;
            c->gin[2] = alpha == 1.0 ? s : em_mul_scalar(s, alpha);
        }
        break;
    case EM_OP_MASKED_SELECT:
        if (c->needs[0]) c->gin[0] = masked_select_backward(c, g);
        break;
    case EM_OP_SLICE_ASSIGN: return slice_assign_backward(c, g);
    case EM_OP_EMBEDDING:
        if (c->needs[0]) {
            em_shape ws = ad_in_shape(c, 0);
            int64_t n = em_tensor_numel(op->in[1]);
            em_tensor *idx = em_reshape(op->in[1], EM_SHAPE(n));
            em_tensor *rows = em_reshape(g, EM_SHAPE(n, ws.dims[1]));
            c->gin[0] = tn_index_add_inrange(ad_zero_base(ws, g), 0, idx, rows, 1.0);
        }
        break;
    default: return ad_no_rule(c);
    }
    return ad_status(c);
}
