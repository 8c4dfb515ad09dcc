/* Gradient checks for reductions, scans and softmax: every differentiable kind over dims,
 * keepdim, EM_ALL, negative dims, corrections and norm orders, in four layouts, first and second
 * order; exact zeros for prod/cumprod; tie conventions (even split, first index, latest index)
 * and f32 gradients checked directly; the internal softmax_backward and log_softmax_gather
 * records on their own. */
#include "grad.h"
#include "tensor/op.h"

typedef enum rop {
    R_SUM,
    R_MEAN,
    R_PROD,
    R_MAX,
    R_MIN,
    R_VAR,
    R_STD,
    R_NORM,
    R_LSE,
    R_MAX_DIM,
    R_MIN_DIM,
    R_CUMSUM,
    R_CUMPROD,
    R_CUMMAX,
    R_CUMMIN,
    R_SOFTMAX,
    R_LOG_SOFTMAX,
} rop;

typedef enum rinput {
    IN_ANY = 0,   /* uniform in [-2, 2) */
    IN_AWAY = 1,  /* magnitudes in [0.3, 2), random signs (norms: away from the kink at 0) */
    IN_ZEROS = 2, /* uniform in [-1.5, 1.5) with exact zeros at 4, 6, 14, 22 */
    IN_ZERO1 = 3, /* uniform in [-1.5, 1.5) with one exact zero at 5 */
} rinput;

typedef struct rcase {
    const char *name;
    rop op;
    em_axes dims; /* mask reductions */
    bool keepdim; /* mask reductions, max_dim, min_dim */
    int dim;      /* one-dim ops */
    int64_t corr; /* var, std */
    double p;     /* norm */
    rinput input; /* how the input is drawn */
    bool scalar;  /* rank-0 input instead of [2, 3, 4] */
    bool gg;      /* second-order check too */
} rcase;

/* r(r + 1) of the op's result r: second derivatives of linear ops are not trivially 0, and the
 * output gradient is not 0 where r is (prod and cumprod through zeros). */
static em_tensor *f_reduce(em_tensor *const *in, int n, void *ctx)
{
    (void)n;
    const rcase *c = ctx;
    const em_tensor *x = in[0];
    em_tensor *r = NULL;
    switch (c->op) {
    case R_SUM: r = em_sum(x, c->dims, c->keepdim); break;
    case R_MEAN: r = em_mean(x, c->dims, c->keepdim); break;
    case R_PROD: r = em_prod(x, c->dims, c->keepdim); break;
    case R_MAX: r = em_max(x, c->dims, c->keepdim); break;
    case R_MIN: r = em_min(x, c->dims, c->keepdim); break;
    case R_VAR: r = em_var(x, c->dims, c->corr, c->keepdim); break;
    case R_STD: r = em_std(x, c->dims, c->corr, c->keepdim); break;
    case R_NORM: r = em_norm(x, c->p, c->dims, c->keepdim); break;
    case R_LSE: r = em_logsumexp(x, c->dims, c->keepdim); break;
    case R_MAX_DIM: em_max_dim(x, c->dim, c->keepdim, &r, NULL); break;
    case R_MIN_DIM: em_min_dim(x, c->dim, c->keepdim, &r, NULL); break;
    case R_CUMSUM: r = em_cumsum(x, c->dim); break;
    case R_CUMPROD: r = em_cumprod(x, c->dim); break;
    case R_CUMMAX: em_cummax(x, c->dim, &r, NULL); break;
    case R_CUMMIN: em_cummin(x, c->dim, &r, NULL); break;
    case R_SOFTMAX: r = em_softmax(x, c->dim); break;
    case R_LOG_SOFTMAX: r = em_log_softmax(x, c->dim); break;
    }
    return r ? em_mul(r, em_add_scalar(r, 1)) : NULL;
}

static em_tensor *make_input(const rcase *c, h_layout l)
{
    em_shape s = c->scalar ? EM_SCALAR : EM_SHAPE(2, 3, 4);
    int64_t m = c->scalar ? 1 : 24;
    double v[24];
    for (int64_t j = 0; j < m; j++) {
        double u = h_uniform();
        switch (c->input) {
        case IN_ANY: v[j] = 4 * u - 2; break;
        case IN_AWAY: v[j] = (0.3 + 1.7 * u) * (h_uniform() < 0.5 ? -1 : 1); break;
        case IN_ZEROS:
        case IN_ZERO1: v[j] = 3 * u - 1.5; break;
        }
    }
    if (c->input == IN_ZEROS && m == 24) v[4] = v[6] = v[14] = v[22] = 0;
    if (c->input == IN_ZERO1 && m == 24) v[5] = 0;
    return h_from_values(v, s, EM_F64, l);
}

#define A EM_AXES
static const rcase cases[] = {
    {.name = "sum dim 1", .op = R_SUM, .dims = A(1), .gg = true},
    {.name = "sum dims 0,2 keepdim", .op = R_SUM, .dims = A(0, 2), .keepdim = true},
    {.name = "sum all", .op = R_SUM, .dims = EM_ALL, .gg = true},
    {.name = "sum rank 0", .op = R_SUM, .dims = EM_ALL, .scalar = true, .gg = true},
    {.name = "mean dim -1", .op = R_MEAN, .dims = A(-1), .gg = true},
    {.name = "mean dims -1,0 keepdim", .op = R_MEAN, .dims = A(-1, 0), .keepdim = true},
    {.name = "mean all keepdim", .op = R_MEAN, .dims = EM_ALL, .keepdim = true, .gg = true},
    {.name = "prod dim 1", .op = R_PROD, .dims = A(1), .gg = true},
    {.name = "prod dims 2,0 keepdim", .op = R_PROD, .dims = A(2, 0), .keepdim = true},
    {.name = "prod all", .op = R_PROD, .dims = EM_ALL, .gg = true},
    {.name = "prod rank 0", .op = R_PROD, .dims = EM_ALL, .scalar = true},
    {.name = "prod dim 1 zeros", .op = R_PROD, .dims = A(1), .input = IN_ZEROS, .gg = true},
    {.name = "prod dims 1,2 zeros keepdim",
     .op = R_PROD,
     .dims = A(1, 2),
     .keepdim = true,
     .input = IN_ZEROS},
    {.name = "prod all one zero", .op = R_PROD, .dims = EM_ALL, .input = IN_ZERO1, .gg = true},
    {.name = "prod all zeros", .op = R_PROD, .dims = EM_ALL, .input = IN_ZEROS},
    {.name = "max dim 1", .op = R_MAX, .dims = A(1), .gg = true},
    {.name = "max dims -1,0 keepdim", .op = R_MAX, .dims = A(-1, 0), .keepdim = true},
    {.name = "max all", .op = R_MAX, .dims = EM_ALL, .gg = true},
    {.name = "max rank 0", .op = R_MAX, .dims = A(0), .scalar = true},
    {.name = "min dim 2 keepdim", .op = R_MIN, .dims = A(2), .keepdim = true, .gg = true},
    {.name = "min all", .op = R_MIN, .dims = EM_ALL},
    {.name = "var dim 1", .op = R_VAR, .dims = A(1), .corr = 1, .gg = true},
    {.name = "var dims 0,2 keepdim corr 0", .op = R_VAR, .dims = A(0, 2), .keepdim = true},
    {.name = "var all corr 2", .op = R_VAR, .dims = EM_ALL, .corr = 2, .gg = true},
    {.name = "std dim -1 corr 1", .op = R_STD, .dims = A(-1), .corr = 1, .gg = true},
    {.name = "std dims 0,1 keepdim corr 0",
     .op = R_STD,
     .dims = A(0, 1),
     .keepdim = true,
     .gg = true},
    {.name = "std all corr 3", .op = R_STD, .dims = EM_ALL, .corr = 3},
    {.name = "norm p 2 dim 1", .op = R_NORM, .p = 2, .dims = A(1), .input = IN_AWAY, .gg = true},
    {.name = "norm p 2 all", .op = R_NORM, .p = 2, .dims = EM_ALL, .input = IN_AWAY},
    {.name = "norm p 1 dims 0,2 keepdim",
     .op = R_NORM,
     .p = 1,
     .dims = A(0, 2),
     .keepdim = true,
     .input = IN_AWAY,
     .gg = true},
    {.name = "norm p inf dim -1",
     .op = R_NORM,
     .p = INFINITY,
     .dims = A(-1),
     .input = IN_AWAY,
     .gg = true},
    {.name = "norm p -inf all", .op = R_NORM, .p = -INFINITY, .dims = EM_ALL, .input = IN_AWAY},
    {.name = "norm p 3 dim 0", .op = R_NORM, .p = 3, .dims = A(0), .input = IN_AWAY, .gg = true},
    {.name = "norm p 1.5 dims 1,2 keepdim",
     .op = R_NORM,
     .p = 1.5,
     .dims = A(1, 2),
     .keepdim = true,
     .input = IN_AWAY,
     .gg = true},
    {.name = "norm p 0.5 dim 2",
     .op = R_NORM,
     .p = 0.5,
     .dims = A(2),
     .input = IN_AWAY,
     .gg = true},
    {.name = "norm p 0 dim 1", .op = R_NORM, .p = 0, .dims = A(1), .input = IN_AWAY},
    {.name = "logsumexp dim 1", .op = R_LSE, .dims = A(1), .gg = true},
    {.name = "logsumexp dims 0,-1 keepdim", .op = R_LSE, .dims = A(0, -1), .keepdim = true},
    {.name = "logsumexp all", .op = R_LSE, .dims = EM_ALL, .gg = true},
    {.name = "mean rank 0", .op = R_MEAN, .dims = A(-1), .scalar = true},
    {.name = "var rank 0", .op = R_VAR, .dims = EM_ALL, .scalar = true},
    {.name = "norm p 2 rank 0",
     .op = R_NORM,
     .p = 2,
     .dims = EM_ALL,
     .input = IN_AWAY,
     .scalar = true},
    {.name = "norm p 3 rank 0",
     .op = R_NORM,
     .p = 3,
     .dims = EM_ALL,
     .input = IN_AWAY,
     .scalar = true},
    {.name = "logsumexp rank 0", .op = R_LSE, .dims = A(0), .scalar = true, .gg = true},
    {.name = "min dims 0,-1", .op = R_MIN, .dims = A(0, -1), .gg = true},
    {.name = "min_dim rank 0", .op = R_MIN_DIM, .dim = -1, .scalar = true},
    {.name = "cummax rank 0", .op = R_CUMMAX, .dim = 0, .scalar = true},
    {.name = "max_dim 1", .op = R_MAX_DIM, .dim = 1, .gg = true},
    {.name = "max_dim -1 keepdim", .op = R_MAX_DIM, .dim = -1, .keepdim = true},
    {.name = "max_dim rank 0", .op = R_MAX_DIM, .dim = 0, .scalar = true},
    {.name = "min_dim 0 keepdim", .op = R_MIN_DIM, .dim = 0, .keepdim = true, .gg = true},
    {.name = "min_dim -2", .op = R_MIN_DIM, .dim = -2},
    {.name = "cumsum dim 1", .op = R_CUMSUM, .dim = 1, .gg = true},
    {.name = "cumsum dim -1", .op = R_CUMSUM, .dim = -1},
    {.name = "cumsum rank 0", .op = R_CUMSUM, .dim = 0, .scalar = true},
    {.name = "cumprod dim -1", .op = R_CUMPROD, .dim = -1, .gg = true},
    {.name = "cumprod dim 0", .op = R_CUMPROD, .dim = 0},
    {.name = "cumprod dim -1 zeros", .op = R_CUMPROD, .dim = -1, .input = IN_ZEROS, .gg = true},
    {.name = "cumprod dim 1 zeros", .op = R_CUMPROD, .dim = 1, .input = IN_ZEROS, .gg = true},
    {.name = "cumprod dim 0 zeros", .op = R_CUMPROD, .dim = 0, .input = IN_ZEROS},
    {.name = "cumprod rank 0", .op = R_CUMPROD, .dim = -1, .scalar = true},
    {.name = "cummax dim 2", .op = R_CUMMAX, .dim = 2, .gg = true},
    {.name = "cummax dim 0", .op = R_CUMMAX, .dim = 0},
    {.name = "cummin dim -2", .op = R_CUMMIN, .dim = -2, .gg = true},
    {.name = "cummin rank 0", .op = R_CUMMIN, .dim = 0, .scalar = true},
    {.name = "softmax dim -1", .op = R_SOFTMAX, .dim = -1, .gg = true},
    {.name = "softmax dim 0", .op = R_SOFTMAX, .dim = 0, .gg = true},
    {.name = "softmax dim 1", .op = R_SOFTMAX, .dim = 1},
    {.name = "softmax rank 0", .op = R_SOFTMAX, .dim = 0, .scalar = true},
    {.name = "log_softmax dim 1", .op = R_LOG_SOFTMAX, .dim = 1, .gg = true},
    {.name = "log_softmax dim -1", .op = R_LOG_SOFTMAX, .dim = -1, .gg = true},
    {.name = "log_softmax dim 0", .op = R_LOG_SOFTMAX, .dim = 0},
};
#undef A

/* Gradient of sum(f(x) * seed) (seed NULL: ones) for x given as values, checked against
 * expect. */
typedef em_tensor *(*unary_fn)(const em_tensor *x);

static void check_grad(const char *what, unary_fn f, const double *x, em_shape s,
                       const double *expect)
{
    em_scope_begin();
    em_tensor *leaf = em_requires_grad(h_from_values(x, s, EM_F64, H_CONTIG), true);
    em_tensor *y = f(leaf);
    em_grads *g = y ? em_backward_with(&y, NULL, 1, (em_backward_opts){0}) : NULL;
    em_tensor *gx = g ? em_grad(g, leaf) : NULL;
    CHECK(gx != NULL, "%s: no gradient (%s)", what, em_last_error());
    if (gx) h_check_tensor(what, gx, expect, s, 1e-12, 1e-12);
    em_release(gx);
    em_clear_error();
    em_scope_end();
}

static em_tensor *tie_max(const em_tensor *x)
{
    return em_max(x, EM_AXES(1), false);
}
static em_tensor *tie_min_all(const em_tensor *x)
{
    return em_min(x, EM_ALL, true);
}
static em_tensor *tie_max_dim(const em_tensor *x)
{
    em_tensor *v = NULL;
    em_max_dim(x, 1, false, &v, NULL);
    return v;
}
static em_tensor *tie_cummax(const em_tensor *x)
{
    em_tensor *v = NULL;
    em_cummax(x, 1, &v, NULL);
    return v;
}
static em_tensor *tie_norm_inf(const em_tensor *x)
{
    return em_norm(x, INFINITY, EM_AXES(1), false);
}
static em_tensor *nan_max(const em_tensor *x)
{
    return em_max(x, EM_ALL, false);
}
static em_tensor *zero_norm2(const em_tensor *x)
{
    return em_norm(x, 2, EM_AXES(1), false);
}

/* Conventions at non-differentiable points, checked against PyTorch's values. */
static void grad_reduce_conventions(void)
{
    const double tie[6] = {1, 3, 3, 2, 2, 0};
    em_shape s = EM_SHAPE(2, 3);
    check_grad("max ties split evenly", tie_max, tie, s, (double[]){0, .5, .5, .5, .5, 0});
    check_grad("min all ties split evenly", tie_min_all, (double[]){1, 0, 4, 0, 2, 0}, s,
               (double[]){0, 1. / 3, 0, 1. / 3, 0, 1. / 3});
    check_grad("max_dim ties route to the first index", tie_max_dim, tie, s,
               (double[]){0, 1, 0, 1, 0, 0});
    /* cummax of [1 3 3] has indices [0 1 2], of [2 2 0] has [0 1 1] (ties move to the latest) */
    check_grad("cummax ties route to the latest index", tie_cummax, tie, s,
               (double[]){1, 1, 1, 1, 2, 0});
    check_grad("norm inf ties split evenly", tie_norm_inf, (double[]){-3, 3, 1, 0, 2, -2}, s,
               (double[]){-.5, .5, 0, 0, .5, -.5});
    check_grad("max NaN takes the gradient", nan_max, (double[]){1, NAN, 2, 0, 1, 1}, s,
               (double[]){0, 1, 0, 0, 0, 0});
    check_grad("norm 2 of zeros has zero gradient", zero_norm2, (double[]){0, 0, 0, 3, 0, 4}, s,
               (double[]){0, 0, 0, .6, 0, .8});
}

/* f32 inputs give f32 gradients of the input's shape. */
static void grad_reduce_f32(void)
{
    em_scope_begin();
    em_tensor *x =
        em_requires_grad(h_rand(EM_SHAPE(3, 4), EM_F32, H_TRANSPOSED, 0.5, 2, NULL), true);
    em_tensor *a = em_log_softmax(x, 1);
    em_tensor *b = em_prod(x, EM_AXES(0), true);
    em_tensor *v = em_std(x, EM_AXES(-1), 1, false);
    em_tensor *loss = em_add(em_add(em_sum(a, EM_ALL, false), em_sum(b, EM_ALL, false)),
                             em_sum(v, EM_ALL, false));
    em_grads *g = loss ? em_backward(loss) : NULL;
    em_tensor *gx = g ? em_grad(g, x) : NULL;
    CHECK(gx != NULL, "f32 backward: %s", em_last_error());
    if (gx) {
        CHECK(em_tensor_dtype(gx) == EM_F32, "f32 reductions: gradient dtype %s",
              em_dtype_name(em_tensor_dtype(gx)));
        CHECK(em_shape_equal(em_tensor_shape(gx), EM_SHAPE(3, 4)), "f32 reductions: shape");
    }
    em_release(gx);
    em_clear_error();
    em_scope_end();
}

/* softmax_backward(y, g, dim, log) times a fixed weight, through the record's rule for both
 * inputs; on the CPU even when the suite runs on another device (a backend without the record
 * composes the formula from ops, whose rules gradient checks already cover). */
typedef struct sbw_case {
    int dim;
    bool log;
} sbw_case;

static em_tensor *f_softmax_bw(em_tensor *const *in, int n, void *ctx)
{
    (void)n;
    const sbw_case *c = ctx;
    return em_mul(tn_softmax_backward(in[0], in[1], c->dim, c->log), in[2]);
}

static void softmax_backward_cases(void)
{
    em_device dev = h_dev;
    h_dev = EM_CPU; /* the harness makes inputs and weights on h_dev */
    const sbw_case cs[] = {{-1, false}, {0, false}, {1, true}, {0, true}};
    for (int k = 0; k < 4; k++)
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            em_scope_begin();
            em_tensor *in[3] = {
                g_in(EM_SHAPE(3, 5), (h_layout)l, cs[k].log ? -3 : 0, cs[k].log ? 0 : 1),
                g_in(EM_SHAPE(3, 5), (h_layout)((l + 1) % H_LAYOUT_COUNT), -1, 1),
                g_in(EM_SHAPE(3, 5), H_CONTIG, -1, 1)};
            char what[80];
            snprintf(what, sizeof what, "softmax_backward dim %d%s layout %d", cs[k].dim,
                     cs[k].log ? " (log)" : "", l);
            h_gradcheck(what, f_softmax_bw, (void *)&cs[k], in, 3, NULL, 0, 0);
            if (l == 0) h_gradgradcheck(what, f_softmax_bw, (void *)&cs[k], in, 3, NULL, 0, 0);
            em_scope_end();
        }
    h_dev = dev;
}

/* log_softmax_gather(x, dim, t) and its backward record (g (onehot(t) - softmax(x))) times a
 * fixed weight, through their rules, first and second order, on the suite's device (a backend
 * without the records composes them of ops) and on the CPU. t is fixed per case: every index in
 * range. */
typedef struct lsg_case {
    int dim;
    em_tensor *t;
} lsg_case;

static em_tensor *f_lsg(em_tensor *const *in, int n, void *ctx)
{
    (void)n;
    const lsg_case *c = ctx;
    return em_mul(tn_log_softmax_gather(in[0], c->dim, c->t), in[1]);
}

static em_tensor *f_lsg_bw(em_tensor *const *in, int n, void *ctx)
{
    (void)n;
    const lsg_case *c = ctx;
    return em_mul(tn_log_softmax_gather_backward(in[0], c->dim, c->t, in[1]), in[2]);
}

static void log_softmax_gather_cases(void)
{
    const int64_t t1[] = {2, 0, 4}, t0[] = {1, 0, 2, 2, 1}, t3[] = {0, 3, 1, 2, 2, 0};
    struct {
        em_shape x, t;
        int dim;
        const int64_t *tv;
    } cs[] = {{EM_SHAPE(3, 5), EM_SHAPE(3), 1, t1},
              {EM_SHAPE(3, 5), EM_SHAPE(5), 0, t0},
              {EM_SHAPE(2, 4, 3), EM_SHAPE(2, 3), -2, t3}};
    em_device dev = h_dev;
    for (int k = 0; k < 6; k++)
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            h_dev = k < 3 ? dev : EM_CPU; /* the harness makes inputs and weights on h_dev */
            if (k >= 3 && dev.backend == 0) break;
            em_scope_begin();
            lsg_case c = {cs[k % 3].dim, h_from_i64(cs[k % 3].tv, cs[k % 3].t)};
            em_tensor *fw[2] = {g_in(cs[k % 3].x, (h_layout)l, -2, 2),
                                g_in(cs[k % 3].t, H_CONTIG, -1, 1)};
            em_tensor *bw[3] = {fw[0],
                                g_in(cs[k % 3].t, (h_layout)((l + 1) % H_LAYOUT_COUNT), -1, 1),
                                g_in(cs[k % 3].x, H_CONTIG, -1, 1)};
            char what[80];
            snprintf(what, sizeof what, "log_softmax_gather case %d layout %d%s", k % 3, l,
                     k < 3 ? "" : " (cpu)");
            h_gradcheck(what, f_lsg, &c, fw, 2, NULL, 0, 0);
            if (l == 0) h_gradgradcheck(what, f_lsg, &c, fw, 2, NULL, 0, 0);
            strncat(what, " backward", sizeof what - strlen(what) - 1);
            h_gradcheck(what, f_lsg_bw, &c, bw, 3, NULL, 0, 0);
            if (l == 0) h_gradgradcheck(what, f_lsg_bw, &c, bw, 3, NULL, 0, 0);
            em_scope_end();
        }
    h_dev = dev;
}

void grad_reduce(void)
{
    const int n = (int)(sizeof cases / sizeof cases[0]);
    for (int k = 0; k < n; k++)
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            const rcase *c = &cases[k];
            if (c->scalar && l > 0) continue;
            em_scope_begin();
            em_tensor *x = make_input(c, (h_layout)l);
            char what[96];
            snprintf(what, sizeof what, "%s layout %d", c->name, l);
            h_gradcheck(what, f_reduce, (void *)c, &x, 1, NULL, 0, 0);
            if (c->gg && l == 0) h_gradgradcheck(what, f_reduce, (void *)c, &x, 1, NULL, 0, 0);
            em_scope_end();
        }
    softmax_backward_cases();
    log_softmax_gather_cases();
    grad_reduce_conventions();
    grad_reduce_f32();
}
