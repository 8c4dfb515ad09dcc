/* Backward rules for the binary family: arithmetic, minimum/maximum, where, masked_fill, clamp
 * and lerp, following PyTorch 1.13's derivative formulas (broadcasting: gradients are summed back
 * to each input's shape with ad_sum_to). Wrapped scalars never need gradients. */
#include <math.h>

#include "autodiff_impl.h"

/* g summed to input i's shape. Takes ownership of g. */
static em_tensor *to_input(ad_ctx *c, int i, em_tensor *g)
{
    if (!g) return NULL;
    em_tensor *r = ad_sum_to(g, ad_in_shape(c, i));
    em_release(g);
    return r;
}

/* A rank-0 zero of g's dtype and device, for em_where. */
static em_tensor *zero_of(const em_tensor *g)
{
    return g ? em_zeros(EM_SCALAR, em_tensor_dtype(g), em_tensor_device(g)) : NULL;
}

/* g where keep is true, zero elsewhere (keep broadcasts with g). */
static em_tensor *keep_where(const em_tensor *keep, const em_tensor *g)
{
    return em_where(keep, g, zero_of(g));
}

/* minimum/maximum (PyTorch 1.13): the selected input gets the gradient, ties split it in half.
 * For maximum input 0 loses where a < b and input 1 where a > b; minimum swaps them. */
static void min_max(ad_ctx *c, em_tensor *a, em_tensor *b, em_tensor *g, bool is_max)
{
    em_tensor *h = em_where(em_eq(a, b), em_mul_scalar(g, 0.5), g);
    if (c->needs[0])
        c->gin[0] = to_input(c, 0, em_masked_fill(h, is_max ? em_lt(a, b) : em_gt(a, b), 0));
    if (c->needs[1])
        c->gin[1] = to_input(c, 1, em_masked_fill(h, is_max ? em_gt(a, b) : em_lt(a, b), 0));
}

/* pow: d/da = b a^(b-1) (zero where b == 0), d/db = a^b log(a) (zero where a == 0 and b >= 0). */
static void pow_rule(ad_ctx *c, em_tensor *a, em_tensor *b, em_tensor *g)
{
    if (c->needs[0]) {
        em_tensor *d = em_mul(b, em_pow(a, em_sub_scalar(b, 1)));
        em_tensor *ga = em_mul(g, em_where(em_eq_scalar(b, 0), zero_of(d), d));
        c->gin[0] = to_input(c, 0, ga);
    }
    if (c->needs[1]) {
        em_tensor *d = em_mul(c->out[0], em_log(a));
        em_tensor *zero_at = em_logical_and(em_eq_scalar(a, 0), em_ge_scalar(b, 0));
        c->gin[1] = to_input(c, 1, em_mul(g, em_where(zero_at, zero_of(d), d)));
    }
}

/* clamp with tensor bounds (PyTorch's clamp_backward and clamp_backward_min_max): x gets the
 * gradient where lo <= x <= hi; lo where x < lo (and lo < hi when both); hi where x > hi (or
 * hi < lo when both, since hi wins then). */
static void clamp_tensor(ad_ctx *c, em_tensor *x, em_tensor *g)
{
    int flags = c->op->p.clamp.bounds;
    int k = 1, ilo = -1, ihi = -1;
    if (flags & 1) ilo = k++;
    if (flags & 2) ihi = k++;
    em_tensor *lo = ilo >= 0 ? c->op->in[ilo] : NULL, *hi = ihi >= 0 ? c->op->in[ihi] : NULL;
    if (c->needs[0]) {
        em_tensor *keep = lo && hi ? em_logical_and(em_ge(x, lo), em_le(x, hi))
                          : lo     ? em_ge(x, lo)
                                   : em_le(x, hi);
        c->gin[0] = to_input(c, 0, keep_where(keep, g));
    }
    if (lo && c->needs[ilo]) {
        em_tensor *keep = hi ? em_logical_and(em_lt(x, lo), em_lt(lo, hi)) : em_lt(x, lo);
        c->gin[ilo] = to_input(c, ilo, keep_where(keep, g));
    }
    if (hi && c->needs[ihi]) {
        em_tensor *keep = lo ? em_logical_or(em_gt(x, hi), em_lt(hi, lo)) : em_gt(x, hi);
        c->gin[ihi] = to_input(c, ihi, keep_where(keep, g));
    }
}

/* clamp with scalar bounds (NaN: no bound): the gradient passes where lo <= x <= hi. */
static void clamp_scalar(ad_ctx *c, em_tensor *x, em_tensor *g)
{
    if (!c->needs[0]) return;
    double lo = c->op->p.clamp.lo, hi = c->op->p.clamp.hi;
    em_tensor *keep = NULL;
    if (!isnan(lo)) keep = em_ge_scalar(x, lo);
    if (!isnan(hi)) {
        em_tensor *le = em_le_scalar(x, hi);
        keep = keep ? em_logical_and(keep, le) : le;
    }
    c->gin[0] = keep ? keep_where(keep, g) : tn_share(g);
}

em_status ad_rule_binary(ad_ctx *c)
{
    const em_op *op = c->op;
    em_tensor *a = op->in[0], *b = op->n_in > 1 ? op->in[1] : NULL;
    em_tensor *g = ad_gout(c, 0);
    if (!g) return em_last_status();
    switch (op->kind) {
    case EM_OP_ADD:
        if (c->needs[0]) c->gin[0] = to_input(c, 0, tn_share(g));
        if (c->needs[1]) c->gin[1] = to_input(c, 1, tn_share(g));
        break;
    case EM_OP_SUB:
        if (c->needs[0]) c->gin[0] = to_input(c, 0, tn_share(g));
        if (c->needs[1]) c->gin[1] = to_input(c, 1, em_neg(g));
        break;
    case EM_OP_MUL:
        if (c->needs[0]) c->gin[0] = to_input(c, 0, em_mul(g, b));
        if (c->needs[1]) c->gin[1] = to_input(c, 1, em_mul(g, a));
        break;
    case EM_OP_DIV:
        /* d/da = 1/b, d/db = -a/b^2 */
        if (c->needs[0]) c->gin[0] = to_input(c, 0, em_div(g, b));
        if (c->needs[1]) c->gin[1] = to_input(c, 1, em_neg(em_div(em_mul(g, a), em_mul(b, b))));
        break;
    case EM_OP_POW: pow_rule(c, a, b, g); break;
    case EM_OP_ATAN2: {
        /* d/da = b/(a^2+b^2), d/db = -a/(a^2+b^2) */
        em_tensor *gr = em_div(g, em_add(em_mul(a, a), em_mul(b, b)));
        if (c->needs[0]) c->gin[0] = to_input(c, 0, em_mul(gr, b));
        if (c->needs[1]) c->gin[1] = to_input(c, 1, em_neg(em_mul(gr, a)));
        break;
    }
    case EM_OP_HYPOT: {
        /* d/da = a/out, d/db = b/out */
        em_tensor *gr = em_div(g, c->out[0]);
        if (c->needs[0]) c->gin[0] = to_input(c, 0, em_mul(gr, a));
        if (c->needs[1]) c->gin[1] = to_input(c, 1, em_mul(gr, b));
        break;
    }
    case EM_OP_MINIMUM:
    case EM_OP_MAXIMUM: min_max(c, a, b, g, op->kind == EM_OP_MAXIMUM); break;
    case EM_OP_REMAINDER:
    case EM_OP_FMOD:
        /* out = a - q b with q = floor(a/b) (remainder) or trunc(a/b) (fmod), q piecewise
         * constant */
        if (c->needs[0]) c->gin[0] = to_input(c, 0, tn_share(g));
        if (c->needs[1]) {
            em_tensor *q =
                op->kind == EM_OP_REMAINDER ? em_floor_divide(a, b) : em_trunc(em_div(a, b));
            c->gin[1] = to_input(c, 1, em_neg(em_mul(g, q)));
        }
        break;
    case EM_OP_FLOOR_DIVIDE: /* piecewise constant: zero gradient, as PyTorch */
    case EM_OP_EQ:
    case EM_OP_NE:
    case EM_OP_LT:
    case EM_OP_LE:
    case EM_OP_GT:
    case EM_OP_GE:
    case EM_OP_LOGICAL_AND:
    case EM_OP_LOGICAL_OR:
    case EM_OP_LOGICAL_XOR:
    case EM_OP_BITWISE_AND:
    case EM_OP_BITWISE_OR:
    case EM_OP_BITWISE_XOR:
    case EM_OP_SHIFT_LEFT:
    case EM_OP_SHIFT_RIGHT: return EM_OK; /* bool/int outputs are never recorded */
    case EM_OP_WHERE: {
        /* in[0] = cond (bool, no gradient), in[1] = a, in[2] = b */
        em_tensor *cond = a, *zero = zero_of(g);
        if (c->needs[1]) c->gin[1] = to_input(c, 1, em_where(cond, g, zero));
        if (c->needs[2]) c->gin[2] = to_input(c, 2, em_where(cond, zero, g));
        break;
    }
    case EM_OP_MASKED_FILL:
        /* the mask broadcasts to x's shape, so g already has x's shape */
        if (c->needs[0]) c->gin[0] = em_masked_fill(g, b, 0);
        break;
    case EM_OP_THRESHOLD_BACKWARD:
        /* linear in its g; piecewise constant in y (no gradient) */
        if (c->needs[0]) c->gin[0] = tn_threshold_backward(g, b, op->p.threshold.threshold);
        break;
    case EM_OP_CLAMP:
        if (op->p.clamp.bounds == 0)
            clamp_scalar(c, a, g);
        else
            clamp_tensor(c, a, g);
        break;
    case EM_OP_LERP: {
        /* out = a + w (b - a): d/da = 1 - w, d/db = w, d/dw = b - a (w wrapped: no gradient) */
        em_tensor *w = op->in[2];
        if (c->needs[0]) c->gin[0] = to_input(c, 0, em_mul(g, em_rsub_scalar(w, 1)));
        if (c->needs[1]) c->gin[1] = to_input(c, 1, em_mul(g, w));
        if (c->needs[2] && !op->p.lerp.w_scalar)
            c->gin[2] = to_input(c, 2, em_mul(g, em_sub(b, a)));
        break;
    }
    default: /* a binary kind without a rule here: its derivative expressions d0, d1 in the op
                table (EW_GRAD records, first order only) */
        if (!ir_has(op->kind, IR_EW2) || !ir_info_of(op->kind)->d[0][0] ||
            !ir_info_of(op->kind)->d[1][0])
            return ad_no_rule(c);
        for (int i = 0; i < 2; i++)
            if (c->needs[i]) {
                em_tensor *ab[2] = {a, b};
                c->gin[i] = to_input(c, i, em_mul(g, tn_ew_grad(op, i, ab, 2, c->out[0])));
            }
        break;
    }
    return ad_status(c);
}
