/* Gradient checks for unary math and activations: every differentiable kind (and every parameter
 * variant) against central differences on each layout, second order for the smooth ones, the
 * PyTorch conventions at break points, and f32 gradients keeping their dtype. */
#include <math.h>
#include <string.h>

#include "grad.h"
#include "ir/ir.h"

typedef em_tensor *(*unary_fn)(const em_tensor *x);

typedef struct ucase {
    const char *name;
    unary_fn fn;     /* plain unary op, or NULL for a parameterised one below */
    int param;       /* 0 none; else which parameterised op */
    double p0, p1;   /* its parameters */
    double lo, hi;   /* input range */
    double avoid[2]; /* points to keep away from (NAN: none) */
    int n_avoid;
    bool periodic; /* avoid every integer + avoid[0] (floor, round ...) */
    bool second;   /* run the second-order check */
} ucase;

enum { P_LEAKY = 1, P_ELU, P_CELU, P_SOFTPLUS, P_HARDTANH };

static em_tensor *apply(const ucase *c, const em_tensor *x)
{
    switch (c->param) {
    case P_LEAKY: return em_leaky_relu(x, c->p0);
    case P_ELU: return em_elu(x, c->p0);
    case P_CELU: return em_celu(x, c->p0);
    case P_SOFTPLUS: return em_softplus(x, c->p0, c->p1);
    case P_HARDTANH: return em_hardtanh(x, c->p0, c->p1);
    default: return c->fn(x);
    }
}

static em_tensor *f_unary(em_tensor *const *in, int n, void *ctx)
{
    (void)n;
    return apply(ctx, in[0]);
}

/* Smooth, first and second order. */
#define S(fn, lo, hi)                                                                              \
    {                                                                                              \
#fn, em_##fn, 0, 0, 0, lo, hi, {0, 0 }, 0, false, true                                     \
    }
/* Kinks at the avoided points: first order, second order where the second derivative exists. */
#define K1(fn, lo, hi, a, second)                                                                  \
    {                                                                                              \
#fn, em_##fn, 0, 0, 0, lo, hi, {a, 0 }, 1, false, second                                   \
    }
#define K2(fn, lo, hi, a, b, second)                                                               \
    {                                                                                              \
#fn, em_##fn, 0, 0, 0, lo, hi, {a, b }, 2, false, second                                   \
    }
/* Parameterised. */
#define P(name, p, p0, p1, lo, hi, a, b, na, second)                                               \
    {                                                                                              \
        name, NULL, p, p0, p1, lo, hi, {a, b}, na, false, second                                   \
    }
/* Smooth, first order only: a kind whose gradient comes from its op table derivative (an
 * EW_GRAD record, which has no gradient of its own). */
#define G(fn, lo, hi)                                                                              \
    {                                                                                              \
#fn, em_##fn, 0, 0, 0, lo, hi, {0, 0 }, 0, false, false                                    \
    }
/* Steps at every integer + a: zero gradient. */
#define Z(fn, a)                                                                                   \
    {                                                                                              \
#fn, em_##fn, 0, 0, 0, -3, 3, {a, 0 }, 1, true, false                                      \
    }

static const ucase cases[] = {
    K1(neg, -2, 2, 0, false),
    K1(abs, -2, 2, 0, false),
    Z(sign, 0),
    S(exp, -2, 2),
    S(exp2, -2, 2),
    S(log, 0.3, 3),
    S(log2, 0.3, 3),
    S(log1p, -0.6, 2),
    S(expm1, -2, 2),
    S(sqrt, 0.3, 3),
    S(rsqrt, 0.3, 3),
    S(square, -2, 2),
    K1(reciprocal, -2, 2, 0, true),
    S(sin, -3, 3),
    S(cos, -3, 3),
    S(tan, -1.2, 1.2),
    S(asin, -0.9, 0.9),
    S(acos, -0.9, 0.9),
    S(atan, -3, 3),
    S(sinh, -2, 2),
    S(cosh, -2, 2),
    S(tanh, -2, 2),
    S(asinh, -3, 3),
    S(acosh, 1.2, 3),
    S(atanh, -0.9, 0.9),
    S(erf, -2, 2),
    Z(floor, 0),
    Z(ceil, 0),
    Z(round, 0.5),
    Z(trunc, 0),
    /* activations */
    K1(relu, -2, 2, 0, false),
    K2(relu6, -2, 8, 0, 6, false),
    S(gelu, -3, 3),
    S(gelu_tanh, -3, 3),
    S(silu, -4, 4),
    S(sigmoid, -4, 4),
    S(log_sigmoid, -4, 4),
    S(mish, -3, 3),
    K2(hard_sigmoid, -5, 5, -3, 3, false),
    K2(hard_swish, -5, 5, -3, 3, true),
    K1(softsign, -3, 3, 0, true),
    K1(selu, -2, 2, 0, true),
    P("leaky_relu 0.1", P_LEAKY, 0.1, 0, -2, 2, 0, 0, 1, false),
    P("leaky_relu -0.3", P_LEAKY, -0.3, 0, -2, 2, 0, 0, 1, false),
    P("elu 1", P_ELU, 1.0, 0, -2, 2, 0, 0, 1, true),
    P("elu 0.4", P_ELU, 0.4, 0, -2, 2, 0, 0, 1, true),
    P("celu 1", P_CELU, 1.0, 0, -2, 2, 0, 0, 1, true),
    P("celu 2.5", P_CELU, 2.5, 0, -2, 2, 0, 0, 1, true),
    P("softplus 1 20", P_SOFTPLUS, 1.0, 20.0, -3, 3, 0, 0, 0, true),
    P("softplus 2 1", P_SOFTPLUS, 2.0, 1.0, -2, 2, 0.5, 0, 1, true),
    P("softplus 0.5 inf", P_SOFTPLUS, 0.5, INFINITY, -4, 4, 0, 0, 0, true),
    P("softplus -1 2", P_SOFTPLUS, -1.0, 2.0, -4, 4, -2, 0, 1, true),
    P("hardtanh -1 1", P_HARDTANH, -1.0, 1.0, -3, 3, -1, 1, 2, false),
    P("hardtanh -0.5 2", P_HARDTANH, -0.5, 2.0, -3, 3, -0.5, 2, 2, false),
    /* wide ranges: saturated tails, where branches not taken must stay finite (second order) */
    {"wide exp", em_exp, 0, 0, 0, -40, 5, {0, 0}, 0, false, true},
    {"wide tanh", em_tanh, 0, 0, 0, -30, 30, {0, 0}, 0, false, true},
    {"wide sigmoid", em_sigmoid, 0, 0, 0, -60, 60, {0, 0}, 0, false, true},
    {"wide log_sigmoid", em_log_sigmoid, 0, 0, 0, -60, 60, {0, 0}, 0, false, true},
    {"wide silu", em_silu, 0, 0, 0, -60, 60, {0, 0}, 0, false, true},
    {"wide gelu", em_gelu, 0, 0, 0, -60, 60, {0, 0}, 0, false, true},
    {"wide gelu_tanh", em_gelu_tanh, 0, 0, 0, -60, 60, {0, 0}, 0, false, true},
    {"wide mish", em_mish, 0, 0, 0, -60, 60, {0, 0}, 0, false, true},
    {"wide selu", em_selu, 0, 0, 0, -60, 800, {0, 0}, 1, false, true},
    P("wide elu 1", P_ELU, 1.0, 0, -60, 800, 0, 0, 1, true),
    P("wide celu 0.5", P_CELU, 0.5, 0, -60, 800, 0, 0, 1, true),
    P("wide softplus 1 20", P_SOFTPLUS, 1.0, 20.0, -60, 800, 20, 0, 1, true),
#define EW_SAMPLE(n, lo, hi) G(n, lo, hi),
#define EW_SAMPLE2(n, alo, ahi, blo, bhi)
#include "../ew_samples.def"
#undef EW_SAMPLE2
#undef EW_SAMPLE
};

/* Random values in [lo, hi) at least 0.1 from every avoided point. */
static em_tensor *input_for(const ucase *c, em_shape s, h_layout l)
{
    int64_t n = 1;
    for (int d = 0; d < s.rank; d++) n *= s.dims[d];
    double *v = malloc((size_t)n * sizeof *v);
    for (int64_t j = 0; j < n; j++) {
        bool ok;
        do {
            v[j] = c->lo + (c->hi - c->lo) * h_uniform();
            ok = true;
            for (int a = 0; a < c->n_avoid; a++) {
                double d = v[j] - c->avoid[a];
                if (c->periodic) d -= round(d);
                if (fabs(d) < 0.1) ok = false;
            }
        } while (!ok);
    }
    em_tensor *t = h_from_values(v, s, EM_F64, l);
    free(v);
    return t;
}

static void check_cases(void)
{
    const int n = (int)(sizeof cases / sizeof cases[0]);
    for (int k = 0; k < n; k++)
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            em_scope_begin();
            /* rank 0 once, to cover scalars */
            em_shape s = l == 0 && k % 7 == 0 ? (em_shape){.rank = 0} : EM_SHAPE(3, 4);
            em_tensor *x = input_for(&cases[k], s, (h_layout)l);
            char what[96];
            snprintf(what, sizeof what, "%s layout %d", cases[k].name, l);
            h_gradcheck(what, f_unary, (void *)&cases[k], &x, 1, NULL, 0, 0);
            if (cases[k].second && l <= 1)
                h_gradgradcheck(what, f_unary, (void *)&cases[k], &x, 1, NULL, 0, 0);
            em_scope_end();
        }
}

/* Gradient of sum(f(x)) at the given points, against PyTorch's values. */
static void check_points(const char *what, const ucase *c, const double *x, const double *expect,
                         int64_t n)
{
    em_scope_begin();
    em_tensor *t = em_requires_grad(h_from_f64(x, EM_SHAPE(n)), true);
    em_tensor *y = apply(c, t);
    em_grads *g = y ? em_backward(em_sum(y, EM_ALL, false)) : NULL;
    em_tensor *gx = g ? em_grad(g, t) : NULL;
    if (!gx) gx = em_zeros(EM_SHAPE(n), EM_F64, h_dev);
    h_check_tensor(what, gx, expect, EM_SHAPE(n), 1e-12, 1e-9);
    em_clear_error();
    em_scope_end();
}

static void check_conventions(void)
{
    ucase c = {0};
    const double x[] = {-3, 0, 3, 6};
    c.fn = em_relu;
    check_points("relu'(0) = 0", &c, x, (double[]){0, 0, 1, 1}, 4);
    c.fn = em_relu6;
    check_points("relu6' at 0 and 6 is 0", &c, x, (double[]){0, 0, 1, 0}, 4);
    c.fn = em_abs;
    check_points("abs'(0) = 0", &c, x, (double[]){-1, 0, 1, 1}, 4);
    c.fn = em_hard_sigmoid;
    check_points("hard_sigmoid' at +-3 is 0", &c, x, (double[]){0, 1.0 / 6, 0, 0}, 4);
    c.fn = em_hard_swish;
    check_points("hard_swish' at -3 and 3", &c, x, (double[]){-0.5, 0.5, 1.5, 1}, 4);
    c.fn = em_sign;
    check_points("sign' = 0", &c, x, (double[]){0, 0, 0, 0}, 4);
    c.fn = em_floor;
    check_points("floor' = 0", &c, x, (double[]){0, 0, 0, 0}, 4);
    c = (ucase){.param = P_LEAKY, .p0 = 0.2};
    check_points("leaky_relu'(0) = slope", &c, x, (double[]){0.2, 0.2, 1, 1}, 4);
    c = (ucase){.param = P_ELU, .p0 = 0.7};
    check_points("elu'(0) = alpha", &c, x, (double[]){0.7 * exp(-3), 0.7, 1, 1}, 4);
    c = (ucase){.param = P_HARDTANH, .p0 = -3, .p1 = 3};
    check_points("hardtanh' at the bounds is 0", &c, x, (double[]){0, 1, 0, 0}, 4);
    c = (ucase){.param = P_SOFTPLUS, .p0 = 1, .p1 = 3};
    check_points("softplus' past the threshold is 1", &c, x,
                 (double[]){1 / (1 + exp(3)), 0.5, 1 / (1 + exp(-3)), 1}, 4);
    /* large inputs: no overflow in the derivative */
    const double big[] = {-800, 800};
    c = (ucase){.fn = em_sigmoid};
    check_points("sigmoid' at +-800", &c, big, (double[]){0, 0}, 2);
    c = (ucase){.fn = em_silu};
    check_points("silu' at +-800", &c, big, (double[]){0, 1}, 2);
    c = (ucase){.fn = em_log_sigmoid};
    check_points("log_sigmoid' at +-800", &c, big, (double[]){1, 0}, 2);
    c = (ucase){.param = P_SOFTPLUS, .p0 = 1, .p1 = INFINITY};
    check_points("softplus' at +-800", &c, big, (double[]){0, 1}, 2);
}

/* f32 inputs get f32 gradients of their shape, close to the f64 ones. */
static void check_f32(void)
{
    unary_fn fns[] = {em_sigmoid, em_gelu, em_log};
    const char *names[] = {"sigmoid", "gelu", "log"};
    for (int k = 0; k < 3; k++) {
        em_scope_begin();
        double *v = NULL;
        em_tensor *x = h_rand(EM_SHAPE(2, 5), EM_F32, H_TRANSPOSED, 0.2, 2, &v);
        em_requires_grad(x, true);
        em_grads *g = em_backward(em_sum(fns[k](x), EM_ALL, false));
        em_tensor *gx = g ? em_grad(g, x) : NULL;
        CHECK(gx && em_tensor_dtype(gx) == EM_F32, "%s: f32 input gives an f32 gradient", names[k]);
        if (gx) {
            CHECK(em_shape_equal(em_tensor_shape(gx), EM_SHAPE(2, 5)), "%s: gradient shape",
                  names[k]);
            em_tensor *x64d = em_requires_grad(em_cast(em_detach(x), EM_F64), true);
            em_grads *g64 = em_backward(em_sum(fns[k](x64d), EM_ALL, false));
            double *ref = g64 ? h_values(em_grad(g64, x64d)) : NULL;
            if (ref) h_check_tensor(names[k], gx, ref, EM_SHAPE(2, 5), 1e-5, 1e-4);
            free(ref);
        }
        free(v);
        em_clear_error();
        em_scope_end();
    }
}

/* Half-precision inputs get gradients of their own dtype. */
static void check_half(void)
{
    em_dtype dts[] = {EM_F16, EM_BF16};
    for (int k = 0; k < 2; k++) {
        em_scope_begin();
        em_tensor *x =
            em_requires_grad(h_rand(EM_SHAPE(3, 2), dts[k], H_CONTIG, -2, 2, NULL), true);
        em_grads *g = em_backward(em_sum(em_cast(em_gelu_tanh(x), EM_F32), EM_ALL, false));
        em_tensor *gx = g ? em_grad(g, x) : NULL;
        CHECK(gx && em_tensor_dtype(gx) == dts[k], "gelu_tanh: %s input gives a %s gradient",
              em_dtype_name(dts[k]), em_dtype_name(dts[k]));
        em_clear_error();
        em_scope_end();
    }
}

/* Whether a case is named `kind` or `kind <variant>`. */
static bool names_kind(const char *name, em_op_kind k)
{
    size_t n = strlen(em_op_name(k));
    return strncmp(name, em_op_name(k), n) == 0 && (name[n] == '\0' || name[n] == ' ');
}

/* Every differentiable elementwise unary kind of the op table has a case above: a kind added
 * to the table without one fails here. */
static void check_table_cases(void)
{
    for (int k = 0; k < EM_OP_COUNT; k++) {
        if (!ir_has((em_op_kind)k, IR_EW1) || !ir_has((em_op_kind)k, IR_DIFF)) continue;
        bool found = false;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            found = found || names_kind(cases[i].name, (em_op_kind)k);
        CHECK(found, "differentiable unary kind %s of the op table has no gradient check",
              em_op_name((em_op_kind)k));
    }
}

void grad_unary(void)
{
    check_table_cases();
    check_cases();
    check_conventions();
    check_f32();
    check_half();
}
