/* Backward rules for reductions, scans and softmax. Every tensor made here belongs to the rule's
 * scope (the engine opens one per rule), so intermediates are not released one by one. */
#include <math.h>

#include "../ir/decode.h"
#include "autodiff_impl.h"

/* The dims of a reduction mask as an axes list (EM_ALL for a rank-0 input, whose mask is 0). */
static em_axes axes_of(uint32_t mask, int rank)
{
    em_axes a = {.n = 0};
    for (int d = 0; d < rank; d++)
        if (mask & (1u << d)) a.d[a.n++] = d;
    return a;
}

/* Number of input elements reduced into one output element. */
static int64_t reduced_count(em_shape in, uint32_t mask)
{
    int64_t n = 1;
    for (int d = 0; d < in.rank; d++)
        if (mask & (1u << d)) n *= in.dims[d];
    return n;
}

/* t (shaped like the reduction's output) with the reduced dims kept as size 1, so it
 * broadcasts against the input. */
static em_tensor *kept(ad_ctx *c, const em_tensor *t, uint32_t mask, bool keepdim)
{
    if (keepdim) return (em_tensor *)t;
    em_shape k = ad_in_shape(c, 0);
    for (int d = 0; d < k.rank; d++)
        if (mask & (1u << d)) k.dims[d] = 1;
    return em_reshape(t, k);
}

/* g (the reduced shape) brought back to the input's shape. */
static em_tensor *unreduce(ad_ctx *c, const em_tensor *g, uint32_t mask, bool keepdim)
{
    return em_expand(kept(c, g, mask, keepdim), ad_in_shape(c, 0));
}

static em_tensor *scalar_like(const em_tensor *t, double v)
{
    return em_scalar(v, em_tensor_dtype(t), em_tensor_device(t));
}

/* Exclusive products along the last dim: out[k] = prod_{j < k} x[j] (1 at k = 0). No division,
 * so zeros are exact. */
static em_tensor *exclusive_cumprod_last(const em_tensor *x)
{
    int64_t pads[2] = {1, -1};
    return em_pad(em_cumprod(x, -1), pads, 1, EM_PAD_CONSTANT, 1.0);
}

/* prod over the mask dims: gradient prod_{j != i} x_j from the products on both sides of i
 * (the reduced dims permuted last and flattened), exact when x has zeros. */
static em_tensor *prod_backward(ad_ctx *c, const em_tensor *x, const em_tensor *g, uint32_t mask)
{
    em_shape in = ad_in_shape(c, 0);
    if (mask == 0) return em_reshape(g, in); /* rank 0: the identity */
    if (em_tensor_numel(x) == 0) return em_zeros_like(x);
    em_axes perm = {.n = in.rank}, inv = {.n = in.rank};
    em_shape flat = {.rank = 0}, gshape = {.rank = 0}, permuted = {.rank = in.rank};
    int p = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int d = 0; d < in.rank; d++)
            if (((mask >> d) & 1u) == (unsigned)pass) perm.d[p++] = d;
    for (int k = 0; k < in.rank; k++) {
        inv.d[perm.d[k]] = k;
        permuted.dims[k] = in.dims[perm.d[k]];
    }
    for (int d = 0; d < in.rank; d++)
        if (!(mask & (1u << d))) flat.dims[flat.rank++] = in.dims[d];
    gshape = flat;
    flat.dims[flat.rank++] = reduced_count(in, mask);
    gshape.dims[gshape.rank++] = 1;
    em_tensor *xp = em_reshape(em_permute(x, perm), flat);
    em_tensor *left = exclusive_cumprod_last(xp);
    em_tensor *right = em_flip(exclusive_cumprod_last(em_flip(xp, EM_AXES(-1))), EM_AXES(-1));
    em_tensor *gp = em_mul(em_reshape(g, gshape), em_mul(left, right));
    return em_permute(em_reshape(gp, permuted), inv);
}

/* Even split of g among the elements equal to the reduced value (amax/amin and inf-norm
 * semantics); `sel` is the values compared (x, or abs(x) for norms). NaN results select the
 * NaN inputs. */
static em_tensor *even_split(ad_ctx *c, const em_tensor *sel, const em_tensor *out_k,
                             const em_tensor *g_k, uint32_t mask)
{
    em_tensor *hit =
        em_logical_or(em_eq(sel, out_k), em_logical_and(em_isnan(sel), em_isnan(out_k)));
    em_tensor *hitf = em_cast(hit, em_tensor_dtype(g_k));
    em_tensor *count = em_sum(hitf, axes_of(mask, ad_in_shape(c, 0).rank), true);
    return em_mul(hitf, em_div(g_k, count));
}

/* Gradient routed to the positions in idx along dim (max_dim, min_dim, cummax, cummin). g and
 * idx have the input's rank. */
static em_tensor *route(ad_ctx *c, const em_tensor *g, const em_tensor *idx, int dim)
{
    return tn_scatter_inrange(ad_zero_base(ad_in_shape(c, 0), g), dim, idx, g, EM_SCATTER_ADD);
}

/* g times the norm's derivative (PyTorch's norm_backward conventions: zero gradient where the
 * norm is 0 for p >= 1, and where x is 0 for p < 1). */
static em_tensor *norm_backward(ad_ctx *c, const em_tensor *x, const em_tensor *out_k,
                                const em_tensor *g_k, double p, uint32_t mask)
{
    if (p == 0) return NULL;
    if (p == 1) return em_mul(em_sign(x), g_k);
    if (isinf(p)) return em_mul(em_sign(x), even_split(c, em_abs(x), out_k, g_k, mask));
    em_tensor *zero = scalar_like(x, 0);
    if (p < 1) {
        em_tensor *s = em_mul(em_sign(x), em_pow_scalar(em_abs(x), p - 1));
        s = em_where(em_eq(x, zero), zero, s);
        return em_mul(s, em_mul(g_k, em_pow_scalar(out_k, 1 - p)));
    }
    em_tensor *s, *den;
    if (p == 2) {
        s = (em_tensor *)x;
        den = (em_tensor *)out_k;
    } else if (p < 2) {
        s = em_mul(em_sign(x), em_pow_scalar(em_abs(x), p - 1));
        den = em_pow_scalar(out_k, p - 1);
    } else {
        s = em_mul(x, em_pow_scalar(em_abs(x), p - 2));
        den = em_pow_scalar(out_k, p - 1);
    }
    em_tensor *is0 = em_eq(out_k, zero);
    em_tensor *safe = em_where(is0, scalar_like(x, 1), den);
    em_tensor *scale = em_where(is0, zero, em_div(g_k, safe));
    return em_mul(s, scale);
}

/* cumprod along dim when x has no zeros: sum_{j>=k} g_j out_j / x_k. */
static em_tensor *cumprod_nozero(const em_tensor *x, const em_tensor *out, const em_tensor *g,
                                 int dim)
{
    em_axes ax = EM_AXES(dim);
    return em_div(em_flip(em_cumsum(em_flip(em_mul(g, out), ax), dim), ax), x);
}

/* cumprod along dim, O(n) and exact with zeros but not twice differentiable at them: for each
 * slice with its first zero at z (z = size when none),
 *   k < z: sum_{j>=k} g_j out_j / x_k,
 *   k = z: sum_{j>=z} g_j cumprod(x with x_z := 1)_j,
 *   k > z: 0 (PyTorch's first-order cumprod_backward). */
static em_tensor *cumprod_masked(const em_tensor *x, const em_tensor *out, const em_tensor *g,
                                 int dim)
{
    em_axes ax = EM_AXES(dim);
    em_tensor *zero = scalar_like(x, 0), *one = scalar_like(x, 1);
    em_tensor *is0 = em_eq(x, zero);
    em_tensor *zeros_upto = em_cumsum(em_cast(is0, em_tensor_dtype(x)), dim);
    em_tensor *before = em_eq(zeros_upto, zero);
    em_tensor *first = em_logical_and(is0, em_eq(zeros_upto, one));
    em_tensor *head = cumprod_nozero(em_where(before, x, one), out, g, dim);
    em_tensor *x1 = em_where(first, one, x);
    em_tensor *at = em_flip(em_cumsum(em_flip(em_mul(g, em_cumprod(x1, dim)), ax), dim), ax);
    return em_where(before, head, em_where(first, at, zero));
}

/* cumprod along dim, O(n^2) and twice differentiable at zeros (used when the backward pass is
 * recorded): gin_k = sum_{j>=k} g_j P[k][j] with P[k] = cumprod(x with x_k := 1). */
static em_tensor *cumprod_quadratic(const em_tensor *x, const em_tensor *g, int dim)
{
    em_tensor *xt = em_transpose(x, dim, -1), *gt = em_transpose(g, dim, -1);
    if (!xt || !gt) return NULL;
    em_shape s = em_tensor_shape(xt);
    int64_t n = s.dims[s.rank - 1];
    em_shape sq = s;
    sq.dims[sq.rank++] = n; /* [..., k, j] */
    em_tensor *rows = em_expand(em_unsqueeze(xt, -2), sq);
    em_tensor *eye = em_eye(n, n, EM_BOOL, em_tensor_device(x));
    em_tensor *p = em_cumprod(em_where(eye, scalar_like(x, 1), rows), -1);
    em_tensor *terms = em_triu(em_mul(em_unsqueeze(gt, -2), p), 0);
    return em_transpose(em_sum(terms, EM_AXES(-1), false), dim, -1);
}

static em_tensor *cumprod_backward(const em_tensor *x, const em_tensor *out, const em_tensor *g,
                                   int dim)
{
    if (!em_grad_enabled()) return cumprod_masked(x, out, g, dim);
    em_tensor *any0 = em_any(em_eq(x, scalar_like(x, 0)), EM_ALL, false);
    if (!any0) return NULL;
    if (em_item_i64(any0) == 0) return cumprod_nozero(x, out, g, dim);
    return cumprod_quadratic(x, g, dim);
}

/* SOFTMAX_BACKWARD (in[0] y, in[1] g; out = y (g - s), s = sum(g y); log: out = g - exp(y) S,
 * S = sum(g); sums along dim) under an upstream h. Softmax: for g, the same record of h (its
 * Jacobian diag(y) - y y^T is symmetric); for y, h (g - s) - g sum(h y). Log-softmax: for g,
 * h - sum(h exp(y)); for y, -h exp(y) S. */
static em_status softmax_backward_rule(ad_ctx *c)
{
    const em_op *op = c->op;
    em_tensor *y = op->in[0], *g = op->in[1], *h = ad_gout(c, 0);
    if (!h) return em_last_status();
    int dim = op->p.dim.dim;
    em_axes ax = EM_AXES(dim);
    if (op->p.dim.log) {
        em_tensor *he = em_mul(h, em_exp(y));
        if (c->needs[1]) c->gin[1] = em_sub(h, em_sum(he, ax, true));
        if (c->needs[0]) c->gin[0] = em_neg(em_mul(he, em_sum(g, ax, true)));
    } else {
        if (c->needs[1]) c->gin[1] = tn_softmax_backward(y, h, dim, false);
        if (c->needs[0]) {
            em_tensor *s = em_sum(em_mul(g, y), ax, true);
            c->gin[0] = em_sub(em_mul(h, em_sub(g, s)), em_mul(g, em_sum(em_mul(h, y), ax, true)));
        }
    }
    return ad_status(c);
}

/* LOG_SOFTMAX_GATHER (in[0] x, in[1] t; out = log_softmax(x)[t]): for x, the backward record of
 * h, h (onehot(t) - softmax(x)). LOG_SOFTMAX_GATHER_BACKWARD (in[2] g; out = g (onehot(t) - s),
 * s = softmax(x)) under an upstream h: for g, h[t] - sum(h s); for x, -g s (h - sum(h s)), the
 * softmax backward of h scaled by -g. t is an index: no gradient. */
static em_status log_softmax_gather_rule(ad_ctx *c)
{
    const em_op *op = c->op;
    em_tensor *x = op->in[0], *t = op->in[1], *h = ad_gout(c, 0);
    if (!h) return em_last_status();
    int dim = op->p.dim.dim;
    if (op->kind == EM_OP_LOG_SOFTMAX_GATHER) {
        if (c->needs[0]) c->gin[0] = tn_log_softmax_gather_backward(x, dim, t, h);
        return ad_status(c);
    }
    em_tensor *s = em_softmax(x, dim);
    if (c->needs[2]) {
        /* t was the forward's: checked there, or guarded */
        em_tensor *ht = em_squeeze(tn_gather_inrange(h, dim, em_unsqueeze(t, dim)), EM_AXES(dim));
        c->gin[2] = em_sub(ht, em_sum(em_mul(h, s), EM_AXES(dim), false));
    }
    if (c->needs[0])
        c->gin[0] =
            em_neg(em_mul(em_unsqueeze(op->in[2], dim), tn_softmax_backward(s, h, dim, false)));
    return ad_status(c);
}

em_status ad_rule_reduce(ad_ctx *c)
{
    const em_op *op = c->op;
    if (op->kind == EM_OP_SOFTMAX_BACKWARD) return softmax_backward_rule(c);
    if (op->kind == EM_OP_LOG_SOFTMAX_GATHER || op->kind == EM_OP_LOG_SOFTMAX_GATHER_BACKWARD)
        return log_softmax_gather_rule(c);
    if (!c->needs[0]) return EM_OK;
    em_tensor *x = op->in[0];
    em_tensor *g = ad_gout(c, 0);
    if (!g) return em_last_status();
    em_tensor *y = c->out[0];
    em_shape in = ad_in_shape(c, 0);
    bool keepdim = false;
    uint32_t mask =
        ir_has(op->kind, IR_REDUCE) ? ir_reduce_mask(op->kind, &op->p, in.rank, &keepdim) : 0;
    int dim = op->p.dim.dim; /* the one-dim kinds' */
    em_tensor *r = NULL;
    switch (op->kind) {
    case EM_OP_SUM: r = unreduce(c, g, mask, keepdim); break;
    case EM_OP_MEAN: {
        int64_t n = reduced_count(in, mask);
        r = unreduce(c, n > 0 ? em_div_scalar(g, (double)n) : g, mask, keepdim);
        break;
    }
    case EM_OP_PROD: r = prod_backward(c, x, g, mask); break;
    case EM_OP_MAX:
    case EM_OP_MIN:
        r = even_split(c, x, kept(c, y, mask, keepdim), kept(c, g, mask, keepdim), mask);
        break;
    case EM_OP_VAR:
    case EM_OP_STD: {
        int64_t n = reduced_count(in, mask) - op->p.reduce.correction;
        double den = n > 0 ? (double)n : 0.0;
        em_tensor *diff = em_sub(x, em_mean(x, axes_of(mask, in.rank), true));
        em_tensor *gk = kept(c, g, mask, keepdim);
        if (op->kind == EM_OP_VAR)
            r = em_mul(diff, em_mul_scalar(gk, 2.0 / den));
        else
            r = em_mul(diff, em_div(gk, em_mul_scalar(kept(c, y, mask, keepdim), den)));
        break;
    }
    case EM_OP_NORM:
        r = norm_backward(c, x, kept(c, y, mask, keepdim), kept(c, g, mask, keepdim),
                          op->p.reduce.p, mask);
        break;
    case EM_OP_LOGSUMEXP:
        r = em_mul(kept(c, g, mask, keepdim), em_exp(em_sub(x, kept(c, y, mask, keepdim))));
        break;
    case EM_OP_MAX_DIM:
    case EM_OP_MIN_DIM:
        if (in.rank == 0) {
            r = g;
        } else {
            em_tensor *idx = c->out[1];
            if (!keepdim) {
                idx = em_unsqueeze(idx, dim);
                g = em_unsqueeze(g, dim);
            }
            r = route(c, g, idx, dim);
        }
        break;
    case EM_OP_CUMSUM:
        if (in.rank == 0)
            r = g;
        else
            r = em_flip(em_cumsum(em_flip(g, EM_AXES(dim)), dim), EM_AXES(dim));
        break;
    case EM_OP_CUMPROD: r = in.rank == 0 ? g : cumprod_backward(x, y, g, dim); break;
    case EM_OP_CUMMAX:
    case EM_OP_CUMMIN: r = in.rank == 0 ? g : route(c, g, c->out[1], dim); break;
    case EM_OP_SOFTMAX: r = tn_softmax_backward(y, g, dim, false); break;
    case EM_OP_LOG_SOFTMAX: r = tn_softmax_backward(y, g, dim, true); break;
    default: return ad_no_rule(c);
    }
    c->gin[0] = r;
    return ad_status(c);
}
