/* Gradient checks for the binary family (arithmetic and its scalar forms, minimum/maximum,
 * remainder/fmod, where, masked_fill, clamp, lerp, the internal threshold_backward): first
 * order over broadcasting and non-contiguous layouts, second order for the arithmetic ops,
 * where, clamp, lerp and threshold_backward, plus the PyTorch conventions at non-differentiable
 * points (pow at 0, ties of minimum/maximum). */
#include <math.h>
#include <string.h>

#include "grad.h"
#include "tensor/op.h"

typedef enum bop {
    B_ADD,
    B_ADD_S,
    B_SUB,
    B_SUB_S,
    B_RSUB_S,
    B_MUL,
    B_MUL_S,
    B_DIV,
    B_DIV_S,
    B_RDIV_S,
    B_POW,
    B_POW_S,
    B_RPOW_S,
    B_ATAN2,
    B_HYPOT,
    B_MIN,
    B_MIN_S,
    B_MAX,
    B_MAX_S,
    B_REM,
    B_REM_S,
    B_FMOD,
    B_FMOD_S,
    B_WHERE,
    B_MASKED_FILL,
    B_CLAMP,
    B_CLAMP_LO,
    B_CLAMP_HI,
    B_CLAMP_T,
    B_CLAMP_T_LO,
    B_CLAMP_T_HI,
    B_LERP,
    B_LERP_T,
    B_TABLE, /* a kind by its name, from its row in tests/ew_samples.def */
} bop;

typedef struct bcase {
    const char *name;
    bop op;
    int n;         /* inputs */
    em_shape s[3]; /* their shapes */
    double lo[3], hi[3];
    double p, q;   /* scalar parameters */
    em_shape mask; /* where / masked_fill: shape of the bool input (rank 0: none) */
    bool gg;       /* second-order check too */
} bcase;

typedef struct bctx {
    const bcase *c;
    em_tensor *mask;
} bctx;

/* The kind named `name`. */
static em_op_kind kind_named(const char *name)
{
    for (int k = 0; k < EM_OP_COUNT; k++)
        if (strcmp(em_op_name((em_op_kind)k), name) == 0) return (em_op_kind)k;
    return EM_OP_COUNT;
}

static em_tensor *op_of(const bctx *x, em_tensor *const *in)
{
    const bcase *c = x->c;
    em_tensor *a = in[0], *b = c->n > 1 ? in[1] : NULL, *w = c->n > 2 ? in[2] : NULL;
    switch (c->op) {
    case B_ADD: return em_add(a, b);
    case B_ADD_S: return em_add_scalar(a, c->p);
    case B_SUB: return em_sub(a, b);
    case B_SUB_S: return em_sub_scalar(a, c->p);
    case B_RSUB_S: return em_rsub_scalar(a, c->p);
    case B_MUL: return em_mul(a, b);
    case B_MUL_S: return em_mul_scalar(a, c->p);
    case B_DIV: return em_div(a, b);
    case B_DIV_S: return em_div_scalar(a, c->p);
    case B_RDIV_S: return em_rdiv_scalar(a, c->p);
    case B_POW: return em_pow(a, b);
    case B_POW_S: return em_pow_scalar(a, c->p);
    case B_RPOW_S: return em_rpow_scalar(a, c->p);
    case B_ATAN2: return em_atan2(a, b);
    case B_HYPOT: return em_hypot(a, b);
    case B_MIN: return em_minimum(a, b);
    case B_MIN_S: return em_minimum_scalar(a, c->p);
    case B_MAX: return em_maximum(a, b);
    case B_MAX_S: return em_maximum_scalar(a, c->p);
    case B_REM: return em_remainder(a, b);
    case B_REM_S: return em_remainder_scalar(a, c->p);
    case B_FMOD: return em_fmod(a, b);
    case B_FMOD_S: return em_fmod_scalar(a, c->p);
    case B_WHERE: return em_where(x->mask, a, b);
    case B_MASKED_FILL: return em_masked_fill(a, x->mask, c->p);
    case B_CLAMP: return em_clamp(a, c->p, c->q);
    case B_CLAMP_LO: return em_clamp(a, c->p, NAN);
    case B_CLAMP_HI: return em_clamp(a, NAN, c->q);
    case B_CLAMP_T: return em_clamp_tensor(a, b, w);
    case B_CLAMP_T_LO: return em_clamp_tensor(a, b, NULL);
    case B_CLAMP_T_HI: return em_clamp_tensor(a, NULL, b);
    case B_LERP: return em_lerp(a, b, c->p);
    case B_LERP_T: return em_lerp_tensor(a, b, w);
    case B_TABLE: return tn_binary(c->name, kind_named(c->name), a, b);
    }
    return NULL;
}

/* The op's result times a fixed function of the inputs, so that second-order gradients of the
 * linear ops are not trivially zero: y * (1 + 0.1 y). */
static em_tensor *f_binary(em_tensor *const *in, int n, void *ctx)
{
    (void)n;
    em_tensor *y = op_of(ctx, in);
    if (!y) return NULL;
    return em_mul(y, em_add_scalar(em_mul_scalar(y, 0.1), 1));
}

static const bcase cases[] = {
    {"add", B_ADD, 2, {EM_SHAPE(3, 4), EM_SHAPE(4)}, {-2, -2}, {2, 2}, .gg = true},
    {"add bcast", B_ADD, 2, {EM_SHAPE(3, 1), EM_SHAPE(2, 1, 4)}, {-2, -2}, {2, 2}, .gg = false},
    {"add_scalar", B_ADD_S, 1, {EM_SHAPE(3, 4)}, {-2}, {2}, .p = 1.5, .gg = true},
    {"sub", B_SUB, 2, {EM_SHAPE(4), EM_SHAPE(3, 4)}, {-2, -2}, {2, 2}, .gg = true},
    {"sub_scalar", B_SUB_S, 1, {EM_SHAPE(3, 4)}, {-2}, {2}, .p = 0.5},
    {"rsub_scalar", B_RSUB_S, 1, {EM_SHAPE(3, 4)}, {-2}, {2}, .p = 0.5, .gg = true},
    {"mul", B_MUL, 2, {EM_SHAPE(3, 4), EM_SHAPE(3, 1)}, {-2, -2}, {2, 2}, .gg = true},
    {"mul_scalar", B_MUL_S, 1, {EM_SHAPE(3, 4)}, {-2}, {2}, .p = -1.5},
    {"div", B_DIV, 2, {EM_SHAPE(3, 4), EM_SHAPE(4)}, {-2, 0.5}, {2, 2}, .gg = true},
    {"div neg", B_DIV, 2, {EM_SHAPE(2, 1, 3), EM_SHAPE(4, 3)}, {-2, -2}, {2, -0.5}, .gg = true},
    {"div_scalar", B_DIV_S, 1, {EM_SHAPE(3, 4)}, {-2}, {2}, .p = 0.7},
    {"rdiv_scalar", B_RDIV_S, 1, {EM_SHAPE(3, 4)}, {0.5}, {2}, .p = -1.3, .gg = true},
    {"pow", B_POW, 2, {EM_SHAPE(3, 4), EM_SHAPE(4)}, {0.5, -1.5}, {2, 1.5}, .gg = true},
    {"pow bcast", B_POW, 2, {EM_SHAPE(3, 1), EM_SHAPE(2, 1, 4)}, {0.5, -2}, {1.5, 2}, .gg = true},
    {"pow_scalar", B_POW_S, 1, {EM_SHAPE(3, 4)}, {0.5}, {2}, .p = 2.5, .gg = true},
    {"pow_scalar int", B_POW_S, 1, {EM_SHAPE(3, 4)}, {-2}, {2}, .p = 3, .gg = true},
    {"rpow_scalar", B_RPOW_S, 1, {EM_SHAPE(3, 4)}, {-1.5}, {1.5}, .p = 1.7, .gg = true},
    {"atan2", B_ATAN2, 2, {EM_SHAPE(3, 4), EM_SHAPE(4)}, {0.3, -2}, {2, 2}, .gg = true},
    {"atan2 bcast", B_ATAN2, 2, {EM_SHAPE(3, 1), EM_SHAPE(3, 4)}, {-2, 0.3}, {2, 2}, .gg = true},
    {"hypot", B_HYPOT, 2, {EM_SHAPE(3, 4), EM_SHAPE(3, 1)}, {-2, 0.3}, {2, 2}, .gg = true},
    {"minimum", B_MIN, 2, {EM_SHAPE(3, 4), EM_SHAPE(4)}, {-2, -2}, {2, 2}, .gg = true},
    {"minimum_scalar", B_MIN_S, 1, {EM_SHAPE(3, 4)}, {-2}, {2}, .p = 0.25},
    {"maximum", B_MAX, 2, {EM_SHAPE(3, 1), EM_SHAPE(3, 4)}, {-2, -2}, {2, 2}, .gg = true},
    {"maximum_scalar", B_MAX_S, 1, {EM_SHAPE(3, 4)}, {-2}, {2}, .p = -0.25},
    {"remainder", B_REM, 2, {EM_SHAPE(3, 4), EM_SHAPE(4)}, {-3, 0.7}, {3, 1.3}, .gg = true},
    {"rem neg", B_REM, 2, {EM_SHAPE(3, 4), EM_SHAPE(3, 1)}, {-3, -1.3}, {3, -0.7}, .gg = false},
    {"remainder_scalar", B_REM_S, 1, {EM_SHAPE(3, 4)}, {-3}, {3}, .p = 1.1},
    {"fmod", B_FMOD, 2, {EM_SHAPE(3, 4), EM_SHAPE(4)}, {-3, 0.7}, {3, 1.3}, .gg = true},
    {"fmod neg", B_FMOD, 2, {EM_SHAPE(3, 4), EM_SHAPE(3, 1)}, {-3, -1.3}, {3, -0.7}, .gg = false},
    {"fmod_scalar", B_FMOD_S, 1, {EM_SHAPE(3, 4)}, {-3}, {3}, .p = -1.1},
    {"where",
     B_WHERE,
     2,
     {EM_SHAPE(3, 4), EM_SHAPE(4)},
     {-2, -2},
     {2, 2},
     .mask = EM_SHAPE(3, 1),
     .gg = true},
    {"where full",
     B_WHERE,
     2,
     {EM_SHAPE(3, 1), EM_SHAPE(1, 4)},
     {-2, -2},
     {2, 2},
     .mask = EM_SHAPE(2, 3, 4),
     .gg = true},
    {"masked_fill",
     B_MASKED_FILL,
     1,
     {EM_SHAPE(3, 4)},
     {-2},
     {2},
     .p = 7,
     .mask = EM_SHAPE(4),
     .gg = true},
    {"clamp", B_CLAMP, 1, {EM_SHAPE(3, 4)}, {-2}, {2}, .p = -1, .q = 1, .gg = true},
    {"clamp lo", B_CLAMP_LO, 1, {EM_SHAPE(3, 4)}, {-2}, {2}, .p = 0.5},
    {"clamp hi", B_CLAMP_HI, 1, {EM_SHAPE(3, 4)}, {-2}, {2}, .q = -0.5},
    {"clamp lo>hi", B_CLAMP, 1, {EM_SHAPE(3, 4)}, {-2}, {2}, .p = 1, .q = -1},
    {"clamp tensor",
     B_CLAMP_T,
     3,
     {EM_SHAPE(3, 4), EM_SHAPE(4), EM_SHAPE(3, 1)},
     {-2, -1, 0},
     {2, 0, 1},
     .gg = true},
    {"clamp tensor lo>hi",
     B_CLAMP_T,
     3,
     {EM_SHAPE(3, 4), EM_SHAPE(3, 4), EM_SHAPE(4)},
     {-2, -1, -1},
     {2, 1, 1},
     .gg = true},
    {"clamp tensor lo",
     B_CLAMP_T_LO,
     2,
     {EM_SHAPE(3, 4), EM_SHAPE(4)},
     {-2, -1},
     {2, 1},
     .gg = false},
    {"clamp tensor hi",
     B_CLAMP_T_HI,
     2,
     {EM_SHAPE(3, 1), EM_SHAPE(3, 4)},
     {-2, -1},
     {2, 1},
     .gg = false},
    {"lerp", B_LERP, 2, {EM_SHAPE(3, 4), EM_SHAPE(4)}, {-2, -2}, {2, 2}, .p = 0.3, .gg = true},
    {"lerp high w", B_LERP, 2, {EM_SHAPE(3, 1), EM_SHAPE(3, 4)}, {-2, -2}, {2, 2}, .p = 0.8},
    {"lerp tensor",
     B_LERP_T,
     3,
     {EM_SHAPE(3, 4), EM_SHAPE(4), EM_SHAPE(3, 1)},
     {-2, -2, -0.5},
     {2, 2, 1.5},
     .gg = true},
    {"lerp tensor bcast",
     B_LERP_T,
     3,
     {EM_SHAPE(3, 1), EM_SHAPE(1, 4), EM_SHAPE(2, 1, 1)},
     {-2, -2, 0},
     {2, 2, 1},
     .gg = false},
/* the binary kinds without a case above: their sample ranges in tests/ew_samples.def, their
 * gradient the table's d0 and d1 */
#define EW_SAMPLE(n, lo, hi)
#define EW_SAMPLE2(n, alo, ahi, blo, bhi)                                                          \
    {#n, B_TABLE, 2, {EM_SHAPE(3, 4), EM_SHAPE(4)}, {alo, blo}, {ahi, bhi}, .p = 0},
#include "../ew_samples.def"
#undef EW_SAMPLE2
#undef EW_SAMPLE
};

/* Values of a one-input-gradient backward: d sum(f(in)) / d in[k] as doubles. */
static double *grad_values(em_tensor *y, em_tensor *x)
{
    em_grads *g = em_backward(em_sum(y, EM_ALL, false));
    em_tensor *gx = g ? em_grad(g, x) : NULL;
    return gx ? h_values(gx) : NULL;
}

/* Values of the gradient of t in g, NULL when there is none. */
static double *grad_of(em_grads *g, const em_tensor *t)
{
    em_tensor *gt = g ? em_grad(g, t) : NULL;
    return gt ? h_values(gt) : NULL;
}

static void check_values(const char *what, const double *got, const double *want, int n)
{
    bool ok = got != NULL;
    for (int i = 0; ok && i < n; i++)
        ok = got[i] == want[i] || h_close(got[i], want[i], 1e-12, 1e-12);
    CHECK(ok, "%s: gradient differs (first: got %g want %g)", what, got ? got[0] : NAN, want[0]);
    CHECK_OK(what);
}

/* PyTorch's conventions where the derivative is undefined or infinite. */
static void conventions(void)
{
    em_scope_begin();
    /* pow: d/db a^b is 0 at a == 0 for b >= 0; d/da a^0 is 0 even at a == 0 */
    {
        double av[4] = {0, 0, 0, 2}, bv[4] = {2, 0.5, 0, 3};
        em_tensor *a = em_requires_grad(h_from_values(av, EM_SHAPE(4), EM_F64, H_CONTIG), true);
        em_tensor *b = em_requires_grad(h_from_values(bv, EM_SHAPE(4), EM_F64, H_CONTIG), true);
        em_grads *g = em_backward(em_sum(em_pow(a, b), EM_ALL, false));
        double *ga = grad_of(g, a), *gb = grad_of(g, b);
        double wa[4] = {0, INFINITY, 0, 12}, wb[4] = {0, 0, 0, 8 * log(2)};
        check_values("pow at base 0 (base)", ga, wa, 4);
        check_values("pow at base 0 (exponent)", gb, wb, 4);
        free(ga);
        free(gb);
        double *g0 = grad_values(em_pow_scalar(a, 0), a);
        double w0[4] = {0, 0, 0, 0};
        check_values("pow_scalar exponent 0 at base 0", g0, w0, 4);
        free(g0);
        double cv[3] = {0, 1, 2};
        em_tensor *e = em_requires_grad(h_from_values(cv, EM_SHAPE(3), EM_F64, H_CONTIG), true);
        double *g1 = grad_values(em_rpow_scalar(e, 0), e);
        double w1[3] = {0, 0, 0}; /* 0^b for b >= 0 */
        check_values("rpow_scalar base 0", g1, w1, 3);
        free(g1);
    }
    /* minimum/maximum: ties split the gradient in half (PyTorch 1.13) */
    {
        double av[3] = {1, 2, 3}, bv[3] = {1, 3, 2};
        for (int mx = 0; mx < 2; mx++) {
            em_tensor *a = em_requires_grad(h_from_values(av, EM_SHAPE(3), EM_F64, H_CONTIG), true);
            em_tensor *b = em_requires_grad(h_from_values(bv, EM_SHAPE(3), EM_F64, H_CONTIG), true);
            em_tensor *y = mx ? em_maximum(a, b) : em_minimum(a, b);
            em_grads *g = em_backward(em_sum(y, EM_ALL, false));
            double *ga = grad_of(g, a);
            double *gb = grad_of(g, b);
            double wa[3] = {0.5, mx ? 0 : 1, mx ? 1 : 0}, wb[3] = {0.5, mx ? 1 : 0, mx ? 0 : 1};
            check_values(mx ? "maximum ties (a)" : "minimum ties (a)", ga, wa, 3);
            check_values(mx ? "maximum ties (b)" : "minimum ties (b)", gb, wb, 3);
            free(ga);
            free(gb);
        }
        em_tensor *a = em_requires_grad(h_from_values(av, EM_SHAPE(3), EM_F64, H_CONTIG), true);
        double *gs = grad_values(em_maximum_scalar(a, 2), a);
        double ws[3] = {0, 0.5, 1};
        check_values("maximum_scalar tie", gs, ws, 3);
        free(gs);
    }
    /* clamp: inclusive bounds pass the gradient */
    {
        double xv[5] = {-2, -1, 0, 1, 2};
        em_tensor *x = em_requires_grad(h_from_values(xv, EM_SHAPE(5), EM_F64, H_CONTIG), true);
        double *g = grad_values(em_clamp(x, -1, 1), x);
        double w[5] = {0, 1, 1, 1, 0};
        check_values("clamp at the bounds", g, w, 5);
        free(g);
        double lv[5] = {-1, -1, -1, -1, -1}, hv[5] = {1, 1, 1, 1, 1};
        em_tensor *lo = em_requires_grad(h_from_values(lv, EM_SHAPE(5), EM_F64, H_CONTIG), true);
        em_tensor *hi = em_requires_grad(h_from_values(hv, EM_SHAPE(5), EM_F64, H_CONTIG), true);
        em_grads *gr = em_backward(em_sum(em_clamp_tensor(x, lo, hi), EM_ALL, false));
        double *gx = grad_of(gr, x);
        double *gl = grad_of(gr, lo);
        double *gh = grad_of(gr, hi);
        double wl[5] = {1, 0, 0, 0, 0}, wh[5] = {0, 0, 0, 0, 1};
        check_values("clamp tensor at the bounds (x)", gx, w, 5);
        check_values("clamp tensor at the bounds (lo)", gl, wl, 5);
        check_values("clamp tensor at the bounds (hi)", gh, wh, 5);
        free(gx);
        free(gl);
        free(gh);
    }
    /* floor_divide has zero gradient (no error) */
    {
        double xv[3] = {-2.5, 1.5, 3.5};
        em_tensor *x = em_requires_grad(h_from_values(xv, EM_SHAPE(3), EM_F64, H_CONTIG), true);
        em_tensor *y = em_add(x, em_floor_divide(x, em_full(EM_SHAPE(3), 2, EM_F64, h_dev)));
        double *g = grad_values(y, x);
        double w[3] = {1, 1, 1};
        check_values("floor_divide zero gradient", g, w, 3);
        free(g);
    }
    em_scope_end();
}

/* f32 inputs get f32 gradients of their own shape, also when mixed with f64 or scalars. */
static void dtypes(void)
{
    em_scope_begin();
    em_tensor *a = em_requires_grad(h_rand(EM_SHAPE(3, 4), EM_F32, H_CONTIG, 0.5, 2, NULL), true);
    em_tensor *b = em_requires_grad(h_rand(EM_SHAPE(4), EM_F32, H_CONTIG, 0.5, 2, NULL), true);
    em_tensor *c = em_requires_grad(h_rand(EM_SHAPE(3, 1), EM_F64, H_CONTIG, 0.5, 2, NULL), true);
    em_tensor *y = em_add(em_pow(em_div(a, b), c), em_mul_scalar(em_lerp(a, b, 0.3), 2));
    y = em_add(y, em_clamp_tensor(a, b, NULL));
    em_grads *g = em_backward(em_sum(y, EM_ALL, false));
    CHECK_OK("f32 backward");
    em_tensor *ga = g ? em_grad(g, a) : NULL, *gb = g ? em_grad(g, b) : NULL;
    em_tensor *gc = g ? em_grad(g, c) : NULL;
    CHECK(ga && em_tensor_dtype(ga) == EM_F32 &&
              em_shape_equal(em_tensor_shape(ga), EM_SHAPE(3, 4)),
          "f32 a: gradient of dtype f32 and shape [3, 4]");
    CHECK(gb && em_tensor_dtype(gb) == EM_F32 && em_shape_equal(em_tensor_shape(gb), EM_SHAPE(4)),
          "f32 b: gradient of dtype f32 and shape [4]");
    CHECK(gc && em_tensor_dtype(gc) == EM_F64 &&
              em_shape_equal(em_tensor_shape(gc), EM_SHAPE(3, 1)),
          "f64 c: gradient of dtype f64 and shape [3, 1]");
    /* integer partners (never differentiated): x^k and k / x with k an i64 tensor */
    double xv[3] = {0.5, 1.5, 2}, kv[3] = {2, 3, -1};
    em_tensor *x = em_requires_grad(h_from_values(xv, EM_SHAPE(3), EM_F64, H_CONTIG), true);
    em_tensor *k = h_from_values(kv, EM_SHAPE(3), EM_I64, H_CONTIG);
    em_grads *gi = em_backward(em_sum(em_add(em_pow(x, k), em_div(k, x)), EM_ALL, false));
    double *gx = grad_of(gi, x), want[3];
    for (int i = 0; i < 3; i++) want[i] = kv[i] * pow(xv[i], kv[i] - 1) - kv[i] / (xv[i] * xv[i]);
    check_values("pow and div with an i64 partner", gx, want, 3);
    free(gx);
    em_scope_end();
}

/* threshold_backward(g, y, t) * y: through the record's rule (g) and the product (y; the
 * record itself gives y nothing). On the CPU even when the suite runs on another device, where
 * the front-end composes masked_fill and le instead of recording it. y stays away from t, where
 * central differences would cross the step. */
static em_tensor *f_threshold(em_tensor *const *in, int n, void *ctx)
{
    (void)n, (void)ctx;
    return em_mul(tn_threshold_backward(in[0], in[1], 0.25), in[1]);
}

static void threshold_backward_cases(void)
{
    em_device dev = h_dev;
    h_dev = EM_CPU; /* the harness makes inputs and weights on h_dev */
    for (int l = 0; l < H_LAYOUT_COUNT; l++) {
        em_scope_begin();
        em_tensor *in[2] = {g_in(EM_SHAPE(3, 5), (h_layout)l, -1, 1), NULL};
        /* y in [-1, 1] without (0.2, 0.3) around t */
        em_tensor *u = g_in(EM_SHAPE(3, 5), (h_layout)((l + 1) % H_LAYOUT_COUNT), -1, 1);
        in[1] = em_where(em_gt_scalar(u, 0.0), em_add_scalar(u, 0.3), em_add_scalar(u, -0.2));
        char what[64];
        snprintf(what, sizeof what, "threshold_backward layout %d", l);
        h_gradcheck(what, f_threshold, NULL, in, 2, NULL, 0, 0);
        if (l == 0) h_gradgradcheck(what, f_threshold, NULL, in, 2, NULL, 0, 0);
        em_scope_end();
    }
    h_dev = dev;
}

/* Whether a case is named `kind` or `kind <variant>`. */
static bool names_kind(const char *name, em_op_kind k)
{
    size_t n = strlen(em_op_name(k));
    return strncmp(name, em_op_name(k), n) == 0 && (name[n] == '\0' || name[n] == ' ');
}

/* Every differentiable elementwise binary kind of the op table has a case above: a kind added
 * to the table without one fails here. */
static void check_table_cases(void)
{
    for (int k = 0; k < EM_OP_COUNT; k++) {
        if (!ir_has((em_op_kind)k, IR_EW2) || !ir_has((em_op_kind)k, IR_DIFF)) continue;
        bool found = false;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            found = found || names_kind(cases[i].name, (em_op_kind)k);
        CHECK(found, "differentiable binary kind %s of the op table has no gradient check",
              em_op_name((em_op_kind)k));
    }
}

void grad_binary(void)
{
    check_table_cases();
    const int ncases = (int)(sizeof cases / sizeof cases[0]);
    for (int k = 0; k < ncases; k++) {
        const bcase *c = &cases[k];
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            em_scope_begin();
            em_tensor *in[3];
            for (int i = 0; i < c->n; i++) in[i] = g_in(c->s[i], (h_layout)l, c->lo[i], c->hi[i]);
            bctx x = {c, NULL};
            if (c->mask.rank > 0) x.mask = em_gt_scalar(g_in(c->mask, (h_layout)l, -1, 1), 0);
            char what[96];
            snprintf(what, sizeof what, "%s layout %d", c->name, l);
            h_gradcheck(what, f_binary, &x, in, c->n, NULL, 0, 0);
            if (c->gg && (l == H_CONTIG || l == H_FLIPPED))
                h_gradgradcheck(what, f_binary, &x, in, c->n, NULL, 0, 0);
            em_scope_end();
        }
    }
    threshold_backward_cases();
    conventions();
    dtypes();
}
