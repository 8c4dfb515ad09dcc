/* Allocation failures in automatic differentiation: for graphs that reach every backward rule
 * family, checkpoint segments and double backward, each allocation of the program is made to
 * fail in turn (em_mem_fail_at n = 1, 2, ... until a run completes). Every failing run must
 * return an error, leak nothing, and leave the graph usable: a second backward pass over it gives
 * the gradients of a run without failures. */
#include <math.h>
#include <string.h>

#include "autodiff/autodiff_impl.h"
#include "harness.h"

#define MAX_LEAVES 6
#define SEED       20240611u
#define WALK_LIMIT 20000

/* ---- graphs ------------------------------------------------------------------------------ */

/* The leaves of the graph being built (their gradients are compared). */
static em_tensor *leaves[MAX_LEAVES];
static int n_leaves;

static em_tensor *leaf_of(em_tensor *t)
{
    t = em_requires_grad(t, true);
    if (n_leaves < MAX_LEAVES) leaves[n_leaves++] = t;
    return t;
}

static em_tensor *leaf(em_shape s)
{
    return leaf_of(em_randn(s, EM_F32, EM_CPU));
}

/* sum(t * r) with r fixed random values: every element gets its own upstream gradient. */
static em_tensor *lossof(em_tensor *t)
{
    return em_sum(em_mul(t, em_rand_like(t)), EM_ALL, false);
}

static em_tensor *add3(em_tensor *a, em_tensor *b, em_tensor *c)
{
    return em_add(em_add(a, b), c);
}

static em_tensor *ids(const int64_t *v, em_shape s)
{
    return em_from_data(v, EM_I64, s, EM_I64, EM_CPU);
}

static em_tensor *g_create(void)
{
    em_tensor *x = leaf(EM_SHAPE(3, 3));
    em_tensor *t = em_add(em_tril(x, -1), em_triu(em_contiguous(em_transpose(x, 0, 1)), 0));
    return em_add(lossof(t), lossof(em_cast(x, EM_F64)));
}

static em_tensor *g_view(void)
{
    em_tensor *x = leaf(EM_SHAPE(2, 3, 4));
    em_tensor *a = em_reshape(em_permute(x, EM_AXES(2, 0, 1)), EM_SHAPE(4, 6));
    em_tensor *b = em_flip(em_slice(a, 1, 0, 6, 2), EM_AXES(0));
    em_tensor *c = em_expand(em_unsqueeze(b, 0), EM_SHAPE(2, 4, 3));
    return add3(lossof(c), lossof(em_unfold(x, 2, 2, 1)), lossof(em_slice(x, 2, 1, 3, 1)));
}

/* The engine joins gradients of slices of one tensor: disjoint ones concatenated, overlapping
 * ones padded and added. */
static em_tensor *g_slices(void)
{
    em_tensor *x = leaf(EM_SHAPE(4, 6));
    em_tensor *q = em_slice(x, 1, 0, 2, 1), *k = em_slice(x, 1, 2, 4, 1);
    em_tensor *v = em_slice(x, 1, 5, 6, 1);
    em_tensor *o = em_mul(em_slice(x, 0, 1, 3, 1), em_slice(x, 0, 0, 2, 1));
    return em_add(lossof(em_add(em_mul(q, k), v)), lossof(o));
}

typedef em_tensor *(*unary_fn)(const em_tensor *);

/* The sum of lossof(f(t)) over the functions. */
static em_tensor *sum_of(const unary_fn *f, size_t n, em_tensor *t, em_tensor *acc)
{
    for (size_t i = 0; i < n; i++) acc = em_add(acc, lossof(f[i](t)));
    return acc;
}

/* x in (-0.5, 0.5) for the functions of a bounded domain. */
static em_tensor *g_unary_math(void)
{
    em_tensor *x = leaf(EM_SHAPE(5));
    const unary_fn f[] = {em_neg, em_abs, em_sign, em_exp,  em_exp2, em_expm1, em_sin,
                          em_cos, em_tan, em_asin, em_acos, em_atan, em_erf};
    return sum_of(f, sizeof f / sizeof *f, em_mul_scalar(em_tanh(x), 0.5), lossof(x));
}

/* p > 1.5 for the functions of a positive domain. */
static em_tensor *g_unary_math2(void)
{
    em_tensor *x = leaf(EM_SHAPE(5));
    const unary_fn f[] = {em_sinh, em_cosh, em_asinh, em_floor, em_ceil,  em_round,      em_trunc,
                          em_log,  em_log2, em_log1p, em_sqrt,  em_rsqrt, em_reciprocal, em_acosh};
    em_tensor *acc = lossof(em_atanh(em_mul_scalar(em_tanh(x), 0.5)));
    return sum_of(f, sizeof f / sizeof *f, em_add_scalar(em_square(x), 1.5), acc);
}

/* The kinds of tests/ew_samples.def (rules from the op table), x mapped into their ranges. */
static em_tensor *g_unary_table(void)
{
    em_tensor *x = leaf(EM_SHAPE(5));
    em_tensor *u = em_sigmoid(x), *acc = lossof(u);
#define EW_SAMPLE(n, lo, hi)                                                                       \
    acc = em_add(acc, lossof(em_##n(em_add_scalar(em_mul_scalar(u, (hi) - (lo)), lo))));
#define EW_SAMPLE2(n, alo, ahi, blo, bhi)                                                          \
    acc = em_add(acc, lossof(em_##n(em_add_scalar(em_mul_scalar(u, (ahi) - (alo)), alo),           \
                                    em_add_scalar(em_mul_scalar(u, (blo) - (bhi)), bhi))));
#include "../ew_samples.def"
#undef EW_SAMPLE2
#undef EW_SAMPLE
    return acc;
}

static em_tensor *g_unary_act(void)
{
    em_tensor *x = leaf(EM_SHAPE(5));
    const unary_fn f[] = {em_relu,       em_relu6,   em_selu,        em_gelu,
                          em_silu,       em_sigmoid, em_log_sigmoid, em_hard_sigmoid,
                          em_hard_swish, em_mish,    em_softsign,    em_gelu_tanh};
    return sum_of(f, sizeof f / sizeof *f, em_mul_scalar(x, 4.0), lossof(x));
}

static em_tensor *g_unary_act2(void)
{
    em_tensor *x = leaf(EM_SHAPE(5));
    em_tensor *acc =
        add3(lossof(em_leaky_relu(x, 0.1)), lossof(em_elu(x, 1.0)), lossof(em_celu(x, 0.5)));
    return add3(acc, lossof(em_softplus(x, 1.0, 20.0)), lossof(em_hardtanh(x, -0.5, 0.5)));
}

static em_tensor *g_binary(void)
{
    em_tensor *a = leaf(EM_SHAPE(2, 3)), *b = leaf(EM_SHAPE(3));
    em_tensor *pa = em_add_scalar(em_square(a), 0.5), *pb = em_add_scalar(em_square(b), 0.5);
    em_tensor *acc = add3(lossof(em_add(a, b)), lossof(em_sub(a, b)), lossof(em_mul(a, b)));
    acc = add3(acc, lossof(em_div(a, pb)), lossof(em_pow(pa, b)));
    acc = add3(acc, lossof(em_atan2(a, pb)), lossof(em_hypot(a, b)));
    return add3(acc, lossof(em_minimum(a, b)), lossof(em_maximum(a, b)));
}

static em_tensor *g_binary2(void)
{
    em_tensor *a = leaf(EM_SHAPE(2, 3)), *b = leaf(EM_SHAPE(3)), *w = leaf(EM_SHAPE(2, 1));
    em_tensor *pb = em_add_scalar(em_square(b), 0.5);
    em_tensor *acc =
        add3(lossof(em_remainder(a, pb)), lossof(em_fmod(a, pb)), lossof(em_floor_divide(a, pb)));
    acc = add3(acc, lossof(em_where(em_gt_scalar(a, 0), a, b)),
               lossof(em_masked_fill(a, em_lt_scalar(b, 0), 2.0)));
    acc = add3(acc, lossof(em_clamp(a, -0.5, 0.5)), lossof(em_clamp_tensor(a, em_neg(pb), pb)));
    return add3(acc, lossof(em_lerp(a, b, 0.3)), lossof(em_lerp_tensor(a, b, w)));
}

static em_tensor *g_reduce(void)
{
    em_tensor *x = leaf(EM_SHAPE(3, 4));
    em_tensor *acc = add3(lossof(em_sum(x, EM_AXES(1), false)), lossof(em_mean(x, EM_ALL, true)),
                          lossof(em_prod(x, EM_AXES(0), false)));
    acc = add3(acc, lossof(em_max(x, EM_AXES(1), false)), lossof(em_min(x, EM_ALL, false)));
    return add3(acc, lossof(em_var(x, EM_AXES(1), 1, false)),
                lossof(em_std(x, EM_AXES(0), 1, true)));
}

static em_tensor *g_reduce_norm(void)
{
    em_tensor *x = leaf(EM_SHAPE(3, 4));
    em_tensor *acc =
        add3(lossof(em_norm(x, 2, EM_AXES(1), false)), lossof(em_norm(x, 1, EM_ALL, false)),
             lossof(em_norm(x, 3, EM_AXES(0), false)));
    acc = add3(acc, lossof(em_norm(x, INFINITY, EM_AXES(1), true)),
               lossof(em_norm(x, 0.5, EM_AXES(1), false)));
    return em_add(acc, lossof(em_logsumexp(x, EM_AXES(1), false)));
}

static em_tensor *g_scan(void)
{
    em_tensor *x = leaf(EM_SHAPE(3, 4));
    em_tensor *mv = NULL, *mi = NULL, *nv = NULL, *ni = NULL, *cv = NULL, *ci = NULL, *dv = NULL;
    em_max_dim(x, 1, false, &mv, &mi);
    em_min_dim(x, 0, true, &nv, &ni);
    em_cummax(x, 1, &cv, &ci);
    em_cummin(x, 0, &dv, NULL);
    em_tensor *acc = add3(lossof(mv), lossof(nv), lossof(cv));
    acc = add3(acc, lossof(dv), lossof(em_cumsum(x, 1)));
    acc = add3(acc, lossof(em_cumprod(x, 0)), lossof(em_softmax(x, 1)));
    return em_add(acc, lossof(em_log_softmax(x, 0)));
}

/* cumprod with a zero takes its own path; cross entropy's fused record. */
static em_tensor *g_reduce2(void)
{
    em_tensor *x = leaf(EM_SHAPE(3, 4));
    float zv[12] = {1, 0, 2, 1, 3, 1, 0, 2, 1, 1, 1, 0};
    em_tensor *z = em_mul(x, em_from_data(zv, EM_F32, EM_SHAPE(3, 4), EM_F32, EM_CPU));
    int64_t tv[3] = {0, 3, 1};
    em_tensor *ce = em_cross_entropy(x, ids(tv, EM_SHAPE(3)), (em_ce_cfg){0});
    return add3(lossof(em_cumprod(z, 1)), ce, lossof(em_prod(z, EM_AXES(1), false)));
}

static em_tensor *g_linalg(void)
{
    em_tensor *a = leaf(EM_SHAPE(2, 3, 4)), *w = leaf(EM_SHAPE(5, 4)), *v = leaf(EM_SHAPE(4));
    em_tensor *bias = leaf(EM_SHAPE(5));
    em_tensor *acc = add3(lossof(em_matmul(a, em_transpose(w, 0, 1))), lossof(em_matmul(a, v)),
                          lossof(em_matmul(v, em_transpose(a, 1, 2))));
    acc = add3(acc, lossof(em_matmul(v, v)), lossof(em_matmul(em_transpose(a, 1, 2), a)));
    em_tensor *m = em_reshape(a, EM_SHAPE(6, 4)), *wt = em_transpose(w, 0, 1);
    acc = add3(acc, lossof(em_matmul_bias_act(m, wt, bias, EM_ACT_RELU)),
               lossof(em_matmul_bias_act(m, wt, bias, EM_ACT_GELU)));
    return add3(acc, lossof(em_matmul_bias_act(m, wt, NULL, EM_ACT_SILU)),
                lossof(em_matmul_bias_act(m, wt, bias, EM_ACT_NONE)));
}

static em_tensor *g_index(void)
{
    em_tensor *x = leaf(EM_SHAPE(3, 4)), *src = leaf(EM_SHAPE(2, 4)), *emb = leaf(EM_SHAPE(5, 3));
    int64_t gv[8] = {0, 2, 1, 0, 2, 2, 0, 1}, sel[3] = {2, 0, 2}, tok[4] = {4, 0, 4, 1};
    em_tensor *gi = ids(gv, EM_SHAPE(2, 4)), *si = ids(sel, EM_SHAPE(3));
    em_tensor *acc = add3(lossof(em_gather(x, 0, gi)), lossof(em_index_select(x, 1, si)),
                          lossof(em_index_add(x, 0, ids(sel, EM_SHAPE(2)), src, 0.5)));
    for (int mode = EM_SCATTER_ASSIGN; mode <= EM_SCATTER_MAX; mode++)
        acc = em_add(acc, lossof(em_scatter(x, 0, gi, src, (em_reduce_mode)mode)));
    acc = add3(acc, lossof(em_masked_select(x, em_gt_scalar(x, 0))),
               lossof(em_embedding(emb, ids(tok, EM_SHAPE(2, 2)))));
    int64_t st[2] = {1, 0}, en[2] = {3, 4}, sp[2] = {1, 2};
    em_tensor *part = em_slice(src, 1, 0, 4, 2);
    return em_add(acc, lossof(em_slice_assign(x, st, en, sp, part)));
}

static em_tensor *g_combine(void)
{
    em_tensor *a = leaf(EM_SHAPE(2, 3)), *b = leaf(EM_SHAPE(1, 3));
    em_tensor *cat[3] = {a, b, a};
    int64_t shifts[2] = {1, -2};
    int dims[2] = {0, 1};
    int64_t pads[4] = {1, 2, 1, 0};
    em_tensor *acc = add3(lossof(em_cat(cat, 3, 0)), lossof(em_repeat(b, EM_SHAPE(2, 2, 1))),
                          lossof(em_roll(a, shifts, dims, 2)));
    acc = add3(acc, lossof(em_pad(a, pads, 2, EM_PAD_CONSTANT, 0.5)),
               lossof(em_pad(a, pads, 1, EM_PAD_REFLECT, 0)));
    return add3(acc, lossof(em_pad(a, pads, 2, EM_PAD_REPLICATE, 0)),
                lossof(em_pad(a, pads, 2, EM_PAD_CIRCULAR, 0)));
}

static em_tensor *g_order(void)
{
    em_tensor *x = leaf(EM_SHAPE(3, 5));
    em_tensor *sv = NULL, *tv = NULL, *mv = NULL, *fv = NULL;
    em_sort(x, 1, true, &sv, NULL);
    em_topk(x, 2, 0, true, &tv, NULL);
    em_median(x, 1, false, &mv, NULL);
    em_median(x, EM_FLAT, false, &fv, NULL);
    return em_add(add3(lossof(sv), lossof(tv), lossof(mv)), lossof(fv));
}

static em_tensor *g_signal(void)
{
    em_tensor *x = leaf(EM_SHAPE(2, 6)), *f = leaf(EM_SHAPE(2, 4, 2));
    return add3(lossof(em_rfft(x, 1, 0)), lossof(em_rfft(x, 1, 4)), lossof(em_irfft(f, 1, 6)));
}

static em_tensor *g_conv(void)
{
    em_tensor *x = leaf(EM_SHAPE(2, 2, 5, 5)), *w = leaf(EM_SHAPE(4, 2, 3, 3));
    em_tensor *b = leaf(EM_SHAPE(4));
    em_conv_opts same = {.pad_lo = {1, 1}, .pad_hi = {1, 1}};
    return em_add(lossof(em_conv2d(x, w, b, same)),
                  lossof(em_conv2d(x, w, NULL, (em_conv_opts){.stride = {2, 2}})));
}

static em_tensor *g_conv2(void)
{
    em_tensor *x = leaf(EM_SHAPE(2, 2, 5, 5)), *w = leaf(EM_SHAPE(2, 2, 3, 3));
    em_tensor *wg = leaf(EM_SHAPE(4, 1, 2, 2));
    em_tensor *x1 = leaf(EM_SHAPE(2, 2, 7)), *w1 = leaf(EM_SHAPE(3, 2, 3));
    em_tensor *acc =
        add3(lossof(em_conv2d(x, wg, NULL, (em_conv_opts){.groups = 2, .pad_lo = {1, 0}})),
             lossof(em_conv1d(x1, w1, NULL, (em_conv_opts){.dilation = {2}})),
             lossof(em_conv_transpose2d(x, w, NULL,
                                        (em_conv_opts){.stride = {2, 2}, .out_pad = {1, 0}})));
    int64_t k[2] = {2, 2}, one[2] = {1, 1}, zero[2] = {0, 0}, size[2] = {5, 5};
    em_tensor *cols = em_im2col(x, k, one, zero, one);
    return add3(acc, lossof(cols), lossof(em_col2im(cols, size, k, one, zero, one)));
}

static em_tensor *g_conv3d(void)
{
    em_tensor *x = leaf(EM_SHAPE(1, 2, 3, 4, 3)), *w = leaf(EM_SHAPE(2, 2, 2, 2, 2));
    return em_add(lossof(em_conv3d(x, w, NULL, (em_conv_opts){.pad_lo = {1, 0, 0}})),
                  lossof(em_conv_transpose3d(x, em_transpose(w, 0, 1), NULL, (em_conv_opts){0})));
}

static em_tensor *g_pool(void)
{
    em_tensor *x = leaf(EM_SHAPE(1, 2, 4, 4));
    em_tensor *idx = NULL;
    em_pool_opts k2 = {.kernel = {2, 2}};
    em_tensor *acc =
        add3(lossof(em_max_pool2d(x, k2, &idx)), lossof(em_max_pool2d(x, k2, NULL)),
             lossof(em_avg_pool2d(
                 x, (em_pool_opts){.kernel = {3, 3}, .stride = {1, 1}, .pad = {1, 1}})));
    acc = add3(acc, lossof(em_adaptive_avg_pool2d(x, 3, 2)),
               lossof(em_adaptive_max_pool2d(x, 2, 3, NULL)));
    acc = add3(acc, lossof(em_interpolate(x, EM_SHAPE(6, 5), EM_INTERP_NEAREST, false)),
               lossof(em_interpolate(x, EM_SHAPE(3, 6), EM_INTERP_BILINEAR, true)));
    acc = add3(acc, lossof(em_interpolate(x, EM_SHAPE(5, 5), EM_INTERP_BICUBIC, false)),
               lossof(em_pixel_unshuffle(x, 2)));
    return add3(acc, lossof(em_pixel_shuffle(em_pixel_unshuffle(x, 2), 2)),
                lossof(em_max_pool1d(em_reshape(x, EM_SHAPE(2, 4, 4)),
                                     (em_pool_opts){.kernel = {3}, .stride = {1}}, NULL)));
}

static em_tensor *g_norm(void)
{
    em_tensor *x = leaf(EM_SHAPE(2, 4, 3)), *w = leaf(EM_SHAPE(3)), *b = leaf(EM_SHAPE(3));
    return add3(lossof(em_layer_norm(x, 1, w, b, 1e-5)), lossof(em_rms_norm(x, 1, w, 1e-5)),
                lossof(em_layer_norm(x, 2, NULL, NULL, 1e-5)));
}

static em_tensor *g_norm2(void)
{
    em_tensor *x = leaf(EM_SHAPE(2, 4, 3)), *cw = leaf(EM_SHAPE(4)), *mean = leaf(EM_SHAPE(4));
    em_tensor *var = em_add_scalar(em_rand(EM_SHAPE(4), EM_F32, EM_CPU), 0.5);
    return add3(lossof(em_group_norm(x, 2, cw, cw, 1e-5)),
                lossof(em_batch_norm(x, mean, var, cw, cw, 1e-5)),
                lossof(em_dropout(x, 0.3, true)));
}

static em_tensor *g_attention(void)
{
    em_tensor *q = leaf(EM_SHAPE(1, 2, 3, 4)), *k = leaf(EM_SHAPE(1, 2, 5, 4));
    em_tensor *v = leaf(EM_SHAPE(1, 2, 5, 3)), *m = leaf(EM_SHAPE(3, 5));
    em_tensor *keep = em_gt_scalar(em_rand(EM_SHAPE(3, 5), EM_F32, EM_CPU), 0.2);
    return add3(lossof(em_sdpa(q, k, v, NULL, (em_sdpa_opts){.causal = true})),
                lossof(em_sdpa(q, k, v, m, (em_sdpa_opts){0})),
                lossof(em_sdpa(q, k, v, keep, (em_sdpa_opts){.scale = 0.5})));
}

/* em_checkpoint: the segment runs again inside the backward pass. */
static em_status segment(void *ctx, em_tensor *const *in, int n_in, em_tensor **out, int n_out)
{
    (void)ctx, (void)n_in, (void)n_out;
    em_tensor *h = em_tanh(em_matmul(in[0], in[1]));
    out[0] = em_dropout(em_mul(h, h), 0.25, true);
    out[1] = em_softmax(h, 1);
    return EM_OK;
}

static em_tensor *g_checkpoint(void)
{
    em_tensor *x = leaf(EM_SHAPE(3, 4)), *w = leaf(EM_SHAPE(4, 4));
    em_tensor *in[2] = {x, w}, *out[2] = {NULL, NULL};
    if (em_checkpoint(segment, NULL, in, 2, out, 2) != EM_OK) return NULL;
    return em_add(lossof(out[0]), lossof(em_mul(out[1], x)));
}

/* Double backward: the first pass is recorded (create_graph) and the loss is built from its
 * gradients, so the walked pass runs the rules of the recorded backward ops. */
static em_tensor *double_of(em_tensor *y)
{
    em_grads *g = y ? em_backward_opt(y, (em_backward_opts){.create_graph = true}) : NULL;
    if (!g) return NULL;
    em_tensor *acc = NULL;
    for (int i = 0; i < n_leaves; i++) {
        em_tensor *gi = em_grad(g, leaves[i]);
        em_tensor *li = gi ? lossof(em_mul(gi, gi)) : NULL;
        acc = acc ? em_add(acc, li) : li;
        if (!li) return NULL;
    }
    return acc;
}

static em_tensor *g_double(void)
{
    em_tensor *x = leaf(EM_SHAPE(2, 3)), *w = leaf(EM_SHAPE(3, 3));
    return double_of(add3(lossof(em_softmax(em_matmul(x, w), 1)), lossof(em_relu(em_mul(x, x))),
                          lossof(em_layer_norm(em_tanh(x), 1, NULL, NULL, 1e-5))));
}

static em_tensor *g_double2(void)
{
    em_tensor *x = leaf(EM_SHAPE(2, 3)), *t = leaf(EM_SHAPE(2, 3));
    em_tensor *c = leaf(EM_SHAPE(1, 1, 4, 4)), *k = leaf(EM_SHAPE(2, 1, 2, 2));
    em_conv_opts same = {.pad_lo = {1, 1}, .pad_hi = {1, 1}};
    em_tensor *ce = em_cross_entropy(em_mul(x, t), em_argmax(t, 1, false), (em_ce_cfg){0});
    return double_of(add3(lossof(em_conv2d(c, k, NULL, same)), lossof(em_cumprod(x, 1)), ce));
}

/* A graph of several families with a create_graph pass walked itself. */
static em_tensor *g_mixed(void)
{
    em_tensor *x = leaf(EM_SHAPE(2, 3, 4)), *w = leaf(EM_SHAPE(4, 4));
    em_tensor *h = em_gelu(em_matmul(x, w));
    em_tensor *a = em_softmax(em_matmul(h, em_transpose(h, 1, 2)), -1);
    return add3(lossof(em_layer_norm(em_matmul(a, h), 1, NULL, NULL, 1e-5)),
                lossof(em_max(h, EM_AXES(1), false)), lossof(em_slice(h, 2, 1, 3, 1)));
}

typedef struct graph {
    const char *family, *name;
    em_tensor *(*build)(void);
    bool create_graph; /* the walked backward pass records itself */
} graph;

static const graph graphs[] = {
    {"create", "tril, triu, copy, cast", g_create, false},
    {"view", "reshape, permute, slice, expand, flip, unfold", g_view, false},
    {"view", "slices joined by the engine", g_slices, false},
    {"unary", "math", g_unary_math, false},
    {"unary", "math on a positive domain", g_unary_math2, false},
    {"unary", "kinds with sample ranges (tests/ew_samples.def)", g_unary_table, false},
    {"unary", "activations", g_unary_act, false},
    {"unary", "activations with parameters", g_unary_act2, false},
    {"binary", "arithmetic, minimum, maximum", g_binary, false},
    {"binary", "remainder, where, clamp, lerp", g_binary2, false},
    {"reduce", "sum, mean, prod, max, min, var, std", g_reduce, false},
    {"reduce", "norms, logsumexp", g_reduce_norm, false},
    {"reduce", "max_dim, scans, softmax", g_scan, false},
    {"reduce", "cumprod with zeros, cross entropy", g_reduce2, false},
    {"linalg", "matmul forms, matmul_bias_act", g_linalg, false},
    {"index", "gather, scatter, index_add, masked_select, embedding", g_index, false},
    {"combine", "cat, repeat, roll, pad", g_combine, false},
    {"order", "sort, topk, median", g_order, false},
    {"signal", "rfft, irfft", g_signal, false},
    {"conv", "conv2d with bias, strided", g_conv, false},
    {"conv", "grouped, conv1d, transposed, im2col, col2im", g_conv2, false},
    {"conv", "conv3d, conv_transpose3d", g_conv3d, false},
    {"pool", "max, avg, adaptive, interpolate, pixel shuffle", g_pool, false},
    {"norm", "layer, rms norm", g_norm, false},
    {"norm", "group, batch norm, dropout", g_norm2, false},
    {"norm", "attention", g_attention, false},
    {"checkpoint", "a segment with two outputs", g_checkpoint, false},
    {"double backward", "softmax, relu, layer norm", g_double, false},
    {"double backward", "conv, cumprod, cross entropy", g_double2, false},
    {"create_graph", "matmul, gelu, softmax, layer norm", g_mixed, true},
    {"create_graph", "layer, rms norm", g_norm, true},
    {"create_graph", "group, batch norm, dropout", g_norm2, true},
    {"create_graph", "max_dim, scans, softmax", g_scan, true},
    {"create_graph", "attention", g_attention, true},
    {"create_graph", "conv2d", g_conv, true},
};

/* ---- gradients kept for comparison ------------------------------------------------------- */

typedef struct grad_ref {
    int n;
    int64_t numel[MAX_LEAVES]; /* -1: no gradient */
    double *v[MAX_LEAVES];
} grad_ref;

static void ref_free(grad_ref *r)
{
    for (int i = 0; i < r->n; i++) free(r->v[i]);
    memset(r, 0, sizeof *r);
}

/* The leaves' gradients from g as doubles. */
static bool ref_take(grad_ref *r, const em_grads *g)
{
    memset(r, 0, sizeof *r);
    r->n = n_leaves;
    for (int i = 0; i < n_leaves; i++) {
        em_tensor *gi = em_grad(g, leaves[i]);
        r->numel[i] = gi ? em_tensor_numel(gi) : -1;
        if (!gi) continue;
        r->v[i] = malloc((size_t)(r->numel[i] + 1) * sizeof(double));
        if (em_to_data(gi, r->v[i], EM_F64, r->numel[i]) != EM_OK) return false;
    }
    return true;
}

static bool ref_same(const grad_ref *want, const em_grads *g)
{
    grad_ref got;
    bool ok = ref_take(&got, g) && got.n == want->n;
    for (int i = 0; ok && i < want->n; i++) {
        ok = got.numel[i] == want->numel[i];
        for (int64_t j = 0; ok && j < want->numel[i]; j++)
            ok = h_close(got.v[i][j], want->v[i][j], 1e-6, 1e-5);
    }
    ref_free(&got);
    return ok;
}

/* ---- the walks --------------------------------------------------------------------------- */

static int64_t live0, bytes0;

static void baseline(void)
{
    live0 = em_live_tensors();
    bytes0 = em_mem_get_stats().current_bytes;
}

static bool no_leak(const char *what, int64_t n)
{
    int64_t live = em_live_tensors() - live0, bytes = em_mem_get_stats().current_bytes - bytes0;
    CHECK(live == 0 && bytes == 0, "%s, allocation %lld: %lld handles and %lld bytes leaked", what,
          (long long)n, (long long)live, (long long)bytes);
    return live == 0 && bytes == 0;
}

/* A failing run's error: out of memory, with a message. */
static void check_oom(const char *what, int64_t n)
{
    CHECK(em_last_status() == EM_ERR_OOM && em_last_error()[0],
          "%s, allocation %lld: error %s (%s) instead of out of memory", what, (long long)n,
          em_status_name(em_last_status()), em_last_error());
    em_clear_error();
}

static em_backward_opts opts_of(const graph *gr)
{
    return (em_backward_opts){.retain_graph = true, .create_graph = gr->create_graph};
}

/* Fails the n-th allocation of the backward pass only, over a graph built without failures;
 * after a failure the same graph must give the reference gradients. Returns the failing runs. */
static int walk_backward(const graph *gr, const grad_ref *want)
{
    int failures = 0;
    for (int64_t n = 1; n < WALK_LIMIT; n++) {
        em_scope_begin();
        em_seed(SEED);
        n_leaves = 0;
        em_tensor *loss = gr->build();
        if (!loss) {
            CHECK(false, "%s: the graph cannot be built: %s", gr->name, em_last_error());
            em_clear_error();
            em_scope_end();
            return failures;
        }
        em_mem_fail_at(n);
        em_grads *g = em_backward_opt(loss, opts_of(gr));
        em_mem_fail_at(0);
        bool done = g != NULL;
        if (g) {
            CHECK(!em_failed(), "%s, allocation %lld: gradients with an error pending: %s",
                  gr->name, (long long)n, em_last_error());
        } else {
            failures++;
            check_oom(gr->name, n);
            g = em_backward_opt(loss, opts_of(gr));
            CHECK(g != NULL, "%s, allocation %lld: a second pass over the graph fails: %s",
                  gr->name, (long long)n, em_last_error());
        }
        if (g)
            CHECK(ref_same(want, g), "%s, allocation %lld: gradients differ", gr->name,
                  (long long)n);
        em_scope_end();
        em_clear_error();
        if (!no_leak(gr->name, n) || done) break;
    }
    return failures;
}

/* Fails the n-th allocation of the whole program (leaves, forward, a backward pass that frees
 * the graph). A failure inside the backward pass leaves a graph that either gives the
 * reference gradients again or says it was freed. Returns the failing runs. */
static int walk_program(const graph *gr, const grad_ref *want)
{
    int failures = 0;
    em_backward_opts o = {.create_graph = gr->create_graph};
    for (int64_t n = 1; n < WALK_LIMIT; n++) {
        em_scope_begin();
        em_seed(SEED);
        n_leaves = 0;
        em_mem_fail_at(n);
        em_tensor *loss = gr->build();
        /* optional arguments (a mask) may come out NULL, and the loss with them */
        bool built = loss && !em_failed();
        em_grads *g = loss ? em_backward_opt(loss, o) : NULL;
        em_mem_fail_at(0);
        /* a failed optional argument (a mask, a bias) leaves a smaller graph that runs: the
         * pending error is what tells the program, so the run counts as a failure */
        bool done = g != NULL && built;
        if (done) {
            CHECK(!em_failed(), "%s, allocation %lld: gradients with an error pending: %s",
                  gr->name, (long long)n, em_last_error());
            CHECK(ref_same(want, g), "%s, allocation %lld: gradients differ", gr->name,
                  (long long)n);
        } else {
            failures++;
            check_oom(gr->name, n);
            if (built) {
                g = em_backward_opt(loss, o);
                if (g)
                    CHECK(ref_same(want, g),
                          "%s, allocation %lld: gradients differ after a failure", gr->name,
                          (long long)n);
                else
                    CHECK_ERR(EM_ERR_STATE, "retain_graph");
            }
        }
        em_scope_end();
        em_clear_error();
        if (!no_leak(gr->name, n) || done) break;
    }
    return failures;
}

static void test_graphs(void)
{
    for (size_t i = 0; i < sizeof graphs / sizeof *graphs; i++) {
        const graph *gr = &graphs[i];
        baseline();
        grad_ref want = {0};
        em_scope_begin();
        em_seed(SEED);
        n_leaves = 0;
        em_tensor *loss = gr->build();
        em_grads *g = loss ? em_backward_opt(loss, opts_of(gr)) : NULL;
        bool ok = g && ref_take(&want, g);
        em_scope_end();
        CHECK(ok && !em_failed(), "%s: runs without failures: %s", gr->name, em_last_error());
        em_clear_error();
        if (!ok) continue;
        int fb = walk_backward(gr, &want);
        int fp = walk_program(gr, &want);
        CHECK(fb > 0 && fp > fb, "%s: allocations walked", gr->name);
        printf("%-16s %-52s backward %4d, program %5d failing allocations\n", gr->family, gr->name,
               fb, fp);
        ref_free(&want);
        no_leak(gr->name, 0);
    }
}

/* The issue's own loop: em_backward(em_sum(em_mul(a, a))) with every allocation failing in
 * turn. */
static void test_mul_sum(void)
{
    baseline();
    int failures = 0;
    bool done = false;
    for (int64_t n = 1; n < 200 && !done; n++) {
        em_scope_begin();
        em_mem_fail_at(n);
        em_tensor *a = em_requires_grad(em_ones(EM_SHAPE(3), EM_F32, EM_CPU), true);
        em_grads *g = em_backward(em_sum(em_mul(a, a), EM_ALL, false));
        em_tensor *ga = em_grad(g, a);
        em_mem_fail_at(0);
        done = ga != NULL;
        if (done) {
            double want[3] = {2, 2, 2};
            h_check_tensor("d sum(a a) / da", ga, want, EM_SHAPE(3), 0, 0);
        } else {
            failures++;
            check_oom("sum(a * a)", n);
        }
        em_scope_end();
        em_clear_error();
        no_leak("sum(a * a)", n);
    }
    CHECK(done && failures >= 10, "sum(a * a): %d failing allocations, then success", failures);
}

/* Every op that docs/ops.md marks differentiable had its rule walked above. */
static void test_coverage(void)
{
    char *doc = h_read_file("docs/ops.md");
    CHECK(doc != NULL, "docs/ops.md cannot be read (run from the source root)");
    /* rows: | `name` | dtypes | grad | notes | */
    for (const char *p = doc; p && (p = strstr(p, "\n| `")) != NULL; p++) {
        const char *s = p + 4, *e = strchr(s, '`');
        const char *c1 = e ? strchr(e, '|') : NULL;
        const char *c2 = c1 ? strchr(c1 + 1, '|') : NULL;
        const char *c3 = c2 ? strchr(c2 + 1, '|') : NULL;
        if (!c3 || e - s > 60) continue;
        bool yes = false;
        for (const char *q = c2 + 1; q < c3; q++) yes |= strncmp(q, "yes", 3) == 0;
        for (int k = 0; yes && k < EM_OP_COUNT; k++) {
            const char *name = em_op_name((em_op_kind)k);
            if (strlen(name) == (size_t)(e - s) && strncmp(name, s, (size_t)(e - s)) == 0)
                CHECK(ad_rule_count((em_op_kind)k) > 0, "the rule of %s was not walked", name);
        }
    }
    free(doc);
}

int main(void)
{
    h_init();
    test_mul_sum();
    test_graphs();
    test_coverage();
    return h_finish();
}
