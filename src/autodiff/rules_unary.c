/* Backward rules for unary math and activations: gin = gout * f'(x), with f'(x) built from public
 * ops (from the output where that is cheaper) so that gradients of gradients come for free.
 * Piecewise derivatives follow PyTorch at the break points. */
#include <math.h>

#include "autodiff_impl.h"

#define SELU_ALPHA       1.6732632423543772848170429916717
#define SELU_SCALE       1.0507009873554804934193349852946
#define LN2              0.69314718055994530941723212145818
#define TWO_OVER_SQRT_PI 1.1283791670955125738961589031215 /* erf'(0) */
#define SQRT_2_OVER_PI   0.79788456080286535587989211986876
#define INV_SQRT_2       0.70710678118654752440084436210485
#define INV_SQRT_2PI     0.39894228040143267793994605993438

/* g where `zero` is false, else 0 (PyTorch's where-style backward: no NaN from 0 * inf). */
static em_tensor *zero_where(const em_tensor *g, const em_tensor *zero)
{
    return zero ? em_masked_fill(g, zero, 0.0) : NULL;
}

/* x <= lo or x >= hi: where hardtanh_backward gives 0 (NaN inside, as PyTorch). */
static em_tensor *outside(const em_tensor *x, double lo, double hi)
{
    return em_logical_or(em_le_scalar(x, lo), em_ge_scalar(x, hi));
}

/* 1 - t*t */
static em_tensor *one_minus_sq(const em_tensor *t)
{
    return em_rsub_scalar(em_square(t), 1.0);
}

/* exp(min(x, 0)): the negative branch of elu/selu/celu, finite everywhere so that neither the
 * where nor its own gradient meets an inf in the branch not taken. */
static em_tensor *exp_neg_part(const em_tensor *x)
{
    return em_exp(em_minimum_scalar(x, 0.0));
}

/* The gradient of kind k's input: g = dL/dy, x the input, y the output. NULL with no error: zero
 * gradient. */
static em_tensor *backward(const em_op *op, em_tensor *x, em_tensor *y, em_tensor *g)
{
    switch (op->kind) {
    case EM_OP_NEG: return em_neg(g);
    case EM_OP_ABS: return em_mul(g, em_sign(x)); /* abs'(0) = 0 */
    case EM_OP_EXP: return em_mul(g, y);
    case EM_OP_EXP2: return em_mul(g, em_mul_scalar(y, LN2));
    case EM_OP_LOG: return em_div(g, x);
    case EM_OP_LOG2: return em_div(g, em_mul_scalar(x, LN2));
    case EM_OP_LOG1P: return em_div(g, em_add_scalar(x, 1.0));
    case EM_OP_EXPM1: return em_mul(g, em_add_scalar(y, 1.0));
    case EM_OP_SQRT: return em_div(g, em_mul_scalar(y, 2.0));
    case EM_OP_RSQRT: return em_mul(g, em_mul_scalar(em_mul(em_square(y), y), -0.5));
    case EM_OP_SQUARE: return em_mul(g, em_mul_scalar(x, 2.0));
    case EM_OP_RECIPROCAL: return em_mul(g, em_neg(em_square(y)));
    case EM_OP_SIN: return em_mul(g, em_cos(x));
    case EM_OP_COS: return em_mul(g, em_neg(em_sin(x)));
    case EM_OP_TAN: return em_mul(g, em_add_scalar(em_square(y), 1.0));
    case EM_OP_ASIN: return em_mul(g, em_rsqrt(one_minus_sq(x)));
    case EM_OP_ACOS: return em_mul(g, em_neg(em_rsqrt(one_minus_sq(x))));
    case EM_OP_ATAN: return em_div(g, em_add_scalar(em_square(x), 1.0));
    case EM_OP_SINH: return em_mul(g, em_cosh(x));
    case EM_OP_COSH: return em_mul(g, em_sinh(x));
    case EM_OP_TANH: return em_mul(g, one_minus_sq(y));
    case EM_OP_ASINH: return em_mul(g, em_rsqrt(em_add_scalar(em_square(x), 1.0)));
    case EM_OP_ACOSH: return em_mul(g, em_rsqrt(em_sub_scalar(em_square(x), 1.0)));
    case EM_OP_ATANH: return em_div(g, one_minus_sq(x));
    case EM_OP_ERF: return em_mul(g, em_mul_scalar(em_exp(em_neg(em_square(x))), TWO_OVER_SQRT_PI));
    case EM_OP_SIGN:
    case EM_OP_FLOOR:
    case EM_OP_CEIL:
    case EM_OP_ROUND:
    case EM_OP_TRUNC:
        return NULL; /* zero gradient, as PyTorch */

    /* activations */
    case EM_OP_RELU: return tn_threshold_backward(g, y, 0.0); /* relu'(0) = 0 */
    case EM_OP_RELU6: return zero_where(g, outside(x, 0.0, 6.0));
    case EM_OP_HARDTANH: return zero_where(g, outside(x, op->p.act.min_val, op->p.act.max_val));
    case EM_OP_HARD_SIGMOID: /* 1/6 strictly inside (-3, 3), else 0 */
        return zero_where(
            em_mul_scalar(g, 1.0 / 6.0),
            em_logical_not(em_logical_and(em_gt_scalar(x, -3.0), em_lt_scalar(x, 3.0))));
    case EM_OP_HARD_SWISH: { /* 0 below -3, x/3 + 1/2 on [-3, 3], 1 above 3 */
        em_tensor *mid = em_mul(g, em_add_scalar(em_mul_scalar(x, 1.0 / 3.0), 0.5));
        em_tensor *upper = em_where(em_gt_scalar(x, 3.0), g, mid);
        return zero_where(upper, em_lt_scalar(x, -3.0));
    }
    case EM_OP_LEAKY_RELU: /* x > 0 ? g : slope*g; slope at 0 */
        return em_where(em_gt_scalar(x, 0.0), g, em_mul_scalar(g, op->p.act.negative_slope));
    case EM_OP_ELU: /* alpha*exp(x) for x <= 0 */
        return em_where(em_gt_scalar(x, 0.0), g,
                        em_mul(g, em_mul_scalar(exp_neg_part(x), op->p.act.alpha)));
    case EM_OP_SELU:
        return em_where(em_gt_scalar(x, 0.0), em_mul_scalar(g, SELU_SCALE),
                        em_mul(g, em_mul_scalar(exp_neg_part(x), SELU_SCALE * SELU_ALPHA)));
    case EM_OP_CELU: /* exp(x/alpha) for x <= 0 */
        return em_where(em_gt_scalar(x, 0.0), g,
                        em_mul(g, exp_neg_part(em_mul_scalar(x, 1.0 / op->p.act.alpha))));
    case EM_OP_GELU: { /* Phi(x) + x*phi(x) */
        em_tensor *cdf =
            em_mul_scalar(em_add_scalar(em_erf(em_mul_scalar(x, INV_SQRT_2)), 1.0), 0.5);
        em_tensor *pdf = em_mul_scalar(em_exp(em_mul_scalar(em_square(x), -0.5)), INV_SQRT_2PI);
        return em_mul(g, em_add(cdf, em_mul(x, pdf)));
    }
    case EM_OP_GELU_TANH: {
        /* 0.5(1 + t) + 0.5x(1 - t^2) k(1 + 3c x^2), t = tanh(k(x + c x^3)) */
        const double k = SQRT_2_OVER_PI, cc = 0.044715;
        em_tensor *x2 = em_square(x);
        em_tensor *t = em_tanh(em_mul_scalar(em_add(x, em_mul_scalar(em_mul(x2, x), cc)), k));
        em_tensor *left = em_mul_scalar(em_add_scalar(t, 1.0), 0.5);
        em_tensor *inner = em_add_scalar(em_mul_scalar(x2, 3.0 * cc * k), k);
        em_tensor *right = em_mul(em_mul(em_mul_scalar(x, 0.5), one_minus_sq(t)), inner);
        return em_mul(g, em_add(left, right));
    }
    case EM_OP_SILU: { /* s(1 + x(1 - s)) */
        em_tensor *s = em_sigmoid(x);
        return em_mul(g, em_mul(s, em_add_scalar(em_mul(x, em_rsub_scalar(s, 1.0)), 1.0)));
    }
    case EM_OP_SIGMOID: return em_mul(g, em_mul(y, em_rsub_scalar(y, 1.0)));
    case EM_OP_LOG_SIGMOID: return em_mul(g, em_sigmoid(em_neg(x)));
    case EM_OP_MISH: { /* tanh(sp) + x*sigmoid(x)*(1 - tanh(sp)^2) */
        em_tensor *ts = em_tanh(em_softplus(x, 1.0, INFINITY));
        return em_mul(g, em_add(ts, em_mul(em_mul(x, em_sigmoid(x)), one_minus_sq(ts))));
    }
    case EM_OP_SOFTPLUS: { /* g where beta x > threshold, else g*sigmoid(beta x) */
        em_tensor *bx = em_mul_scalar(x, op->p.act.beta);
        return em_where(em_gt_scalar(bx, op->p.act.threshold), g, em_mul(g, em_sigmoid(bx)));
    }
    case EM_OP_SOFTSIGN: /* 1/(1 + |x|)^2 */
        return em_div(g, em_square(em_add_scalar(em_abs(x), 1.0)));
    default: /* a kind without a rule here: its derivative expression in the op table (an
                EW_GRAD record, first order only) */
        if (!ir_info_of(op->kind)->d[0][0]) return NULL;
        return em_mul(g, tn_ew_grad(op, 0, &x, 1, y));
    }
}

em_tensor *ad_act_backward(em_op_kind kind, em_tensor *x, em_tensor *y, em_tensor *g)
{
    em_op op = {.kind = kind};
    return backward(&op, x, y, g);
}

em_status ad_rule_unary(ad_ctx *c)
{
    const em_op *op = c->op;
    /* bool or integer outputs (isnan, bitwise_not ...) are never recorded */
    if (!ir_has(op->kind, IR_DIFF | IR_ZERO_GRAD)) return ad_no_rule(c);
    if (!c->needs[0]) return EM_OK;
    em_tensor *g = ad_gout(c, 0);
    if (!g) return ad_status(c);
    c->gin[0] = backward(op, op->in[0], c->out[0], g);
    return ad_status(c);
}
