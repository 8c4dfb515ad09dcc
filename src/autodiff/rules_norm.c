/* Backward rules for normalisation (layer, RMS, group, batch), scaled dot-product attention and
 * dropout. Statistics, scores and masks are recomputed from the inputs with Ember ops, so the
 * rules run on every backend and, recorded under create_graph, give second derivatives. */
#include <math.h>
#include <string.h>

#include "autodiff_impl.h"

/* f16/bf16 tensors are widened to f32 for the recomputation (the forward kernels work in f32 or
 * f64); the engine casts each gradient back to its input's dtype. */
static em_tensor *wide(em_tensor *t)
{
    if (!t) return NULL;
    em_dtype dt = em_tensor_dtype(t);
    return (dt == EM_F16 || dt == EM_BF16) ? em_cast(t, EM_F32) : t;
}

/* Mean of t over ax (n elements each), keepdim. Built from sum and a scalar product so its own
 * derivatives are the simplest ones. */
static em_tensor *mean_over(const em_tensor *t, em_axes ax, int64_t n)
{
    return em_mul_scalar(em_sum(t, ax, true), 1.0 / (double)(n > 0 ? n : 1));
}

/* xhat = (x - mean) * rstd over ax, rstd = 1 / sqrt(var + eps) (biased var; no centring for
 * RMS), both kept with size-1 reduced dims. */
typedef struct norm_stats {
    em_tensor *xhat, *rstd;
} norm_stats;

static norm_stats stats_of(const em_tensor *x, em_axes ax, int64_t n, double eps, bool rms)
{
    em_tensor *xc = rms ? (em_tensor *)x : em_sub(x, mean_over(x, ax, n));
    em_tensor *var = mean_over(em_mul(xc, xc), ax, n);
    em_tensor *rstd = em_rsqrt(em_add_scalar(var, eps));
    return (norm_stats){em_mul(xc, rstd), rstd};
}

/* dL/dx from gx = dL/dxhat: rstd * (gx - mean(gx) - xhat * mean(gx * xhat)), without the
 * mean(gx) term for RMS. */
static em_tensor *stats_grad(const em_tensor *gx, norm_stats s, em_axes ax, int64_t n, bool rms)
{
    em_tensor *t = em_sub(gx, em_mul(s.xhat, mean_over(em_mul(gx, s.xhat), ax, n)));
    if (!rms) t = em_sub(t, mean_over(gx, ax, n));
    return em_mul(t, s.rstd);
}

/* x: [..., *norm] normalised over the last n_norm dims; weight, bias: [*norm]. */
static void layer_rms(ad_ctx *c, bool rms)
{
    const em_op *op = c->op;
    em_tensor *x = wide(op->in[0]), *g = wide(ad_gout(c, 0));
    if (!x || !g) return;
    bool has_w = op->p.norm.has_weight, has_b = !rms && op->p.norm.has_bias;
    int wi = 1, bi = has_w ? 2 : 1;
    em_shape xs = ad_in_shape(c, 0);
    int n_norm = op->p.norm.n_norm;
    em_axes ax = {.n = n_norm};
    int64_t n = 1;
    for (int k = 0; k < n_norm; k++) {
        ax.d[k] = xs.rank - n_norm + k;
        n *= xs.dims[ax.d[k]];
    }
    bool need_w = has_w && c->needs[wi], need_b = has_b && c->needs[bi];
    /* one NORM_BACKWARD record while grad mode is off (lowered where the backend lacks it); under
     * create_graph the composition below is recorded, which gives second derivatives */
    if (!em_grad_enabled() && (c->needs[0] || need_w)) {
        em_tensor *d[3] = {NULL, NULL, NULL};
        tn_norm_backward(x, has_w ? wide(op->in[wi]) : NULL, g, n_norm, op->p.norm.eps, rms, &d[0],
                         need_w ? &d[1] : NULL, need_b ? &d[2] : NULL);
        if (c->needs[0]) c->gin[0] = d[0];
        if (need_w) c->gin[wi] = d[1];
        if (need_b) c->gin[bi] = d[2];
        return;
    }
    if (need_b) c->gin[bi] = ad_sum_to(g, ad_in_shape(c, bi));
    if (!c->needs[0] && !need_w) return;
    norm_stats s = stats_of(x, ax, n, op->p.norm.eps, rms);
    if (c->needs[0]) c->gin[0] = stats_grad(has_w ? em_mul(g, wide(op->in[wi])) : g, s, ax, n, rms);
    if (need_w) c->gin[wi] = ad_sum_to(em_mul(g, s.xhat), ad_in_shape(c, wi));
}

/* Shape [C, 1, ..., 1] that broadcasts a per-channel [C] tensor against [N, C, *]. */
static em_shape channel_shape(em_shape xs)
{
    em_shape s = {.rank = xs.rank - 1};
    for (int d = 0; d < s.rank; d++) s.dims[d] = d == 0 ? xs.dims[1] : 1;
    return s;
}

/* t [N, C, *] summed to [C]. */
static em_tensor *channel_sum(const em_tensor *t, int rank)
{
    em_axes ax = {.n = 0};
    for (int d = 0; d < rank; d++)
        if (d != 1) ax.d[ax.n++] = d;
    return em_sum(t, ax, false);
}

static int64_t numel_of(em_shape s)
{
    int64_t n = 1;
    for (int d = 0; d < s.rank; d++) n *= s.dims[d];
    return n;
}

/* x [N, C, *] normalised per (sample, group of C/G channels); weight, bias [C]. */
static void group_norm(ad_ctx *c)
{
    const em_op *op = c->op;
    em_tensor *x = wide(op->in[0]), *g = wide(ad_gout(c, 0));
    if (!x || !g) return;
    bool has_w = op->p.norm.has_weight, has_b = op->p.norm.has_bias;
    int wi = 1, bi = has_w ? 2 : 1;
    em_shape xs = ad_in_shape(c, 0);
    int64_t N = xs.dims[0], G = op->p.norm.groups, total = numel_of(xs);
    bool need_w = has_w && c->needs[wi], need_b = has_b && c->needs[bi];
    if (need_b) c->gin[bi] = channel_sum(g, xs.rank);
    if (!c->needs[0] && !need_w) return;
    if (total == 0) { /* nothing normalised: every gradient is empty or zero */
        if (c->needs[0]) c->gin[0] = em_zeros_like(x);
        if (need_w) c->gin[wi] = em_zeros_like(op->in[wi]);
        return;
    }
    int64_t M = total / (N * G);
    em_shape gs = EM_SHAPE(N, G, M);
    em_axes ax = EM_AXES(2);
    norm_stats s = stats_of(em_reshape(x, gs), ax, M, op->p.norm.eps, false);
    if (c->needs[0]) {
        em_tensor *gx = has_w ? em_mul(g, em_reshape(wide(op->in[wi]), channel_shape(xs))) : g;
        c->gin[0] = em_reshape(stats_grad(em_reshape(gx, gs), s, ax, M, false), xs);
    }
    if (need_w) c->gin[wi] = channel_sum(em_mul(g, em_reshape(s.xhat, xs)), xs.rank);
}

/* y = (x - mean) * rsqrt(var + eps) * weight + bias per channel of x [N, C, *]; every input
 * gets its true derivative (the statistics are ordinary inputs here). */
static void batch_norm(ad_ctx *c)
{
    const em_op *op = c->op;
    em_tensor *x = wide(op->in[0]), *mean = wide(op->in[1]), *var = wide(op->in[2]);
    em_tensor *g = wide(ad_gout(c, 0));
    bool has_w = op->p.norm.has_weight, has_b = op->p.norm.has_bias;
    int wi = 3, bi = has_w ? 4 : 3;
    em_tensor *w = has_w ? wide(op->in[wi]) : NULL;
    em_shape xs = ad_in_shape(c, 0), cs = channel_shape(xs);
    em_tensor *s = em_rsqrt(em_add_scalar(var, op->p.norm.eps)); /* [C] */
    em_tensor *sw = w ? em_mul(s, w) : s;
    bool need_w = has_w && c->needs[wi], need_b = has_b && c->needs[bi];
    em_tensor *gsum = (c->needs[1] || need_b) ? channel_sum(g, xs.rank) : NULL;
    if (c->needs[0]) c->gin[0] = em_mul(g, em_reshape(sw, cs));
    if (c->needs[1]) c->gin[1] = em_neg(em_mul(gsum, sw));
    if (need_b) c->gin[bi] = gsum;
    if (c->needs[2] || need_w) {
        em_tensor *gxc = channel_sum(em_mul(g, em_sub(x, em_reshape(mean, cs))), xs.rank);
        /* d rsqrt(var + eps) / d var = -s^3 / 2 */
        if (c->needs[2]) c->gin[2] = em_mul_scalar(em_mul(em_mul(gxc, sw), em_mul(s, s)), -0.5);
        if (need_w) c->gin[wi] = em_mul(gxc, s);
    }
}

/* The fused form: one SDPA_BACKWARD record (lowered where the backend lacks it) while grad mode
 * is off (with create_graph the composed ops below are recorded, which gives second
 * derivatives), config sdpa_fused_backward is not off and no additive mask needs a gradient
 * (that gradient is dS itself). False: compose. A fully masked row gives no gradient there,
 * where the composed form spreads its NaN. */
static bool sdpa_fused(ad_ctx *c)
{
    const em_op *op = c->op;
    em_tensor *mask = op->n_in > 3 ? op->in[3] : NULL;
    int mkind = op->p.sdpa.mask_kind;
    if (em_grad_enabled() || (mask && mkind == 2 && c->needs[3]) || !c->out[0]) return false;
    if (!tn_sdpa_fused_backward_on()) return false;
    em_tensor *g = ad_gout(c, 0);
    if (g && g->dtype != op->in[0]->dtype) g = em_cast(g, op->in[0]->dtype);
    if (!g) return false;
    /* the forward's row statistics, where the backend wrote them (em_sdpa) */
    em_tensor *lse = op->n_out > 1 ? c->out[1] : NULL;
    em_tensor *d[3];
    em_status st = tn_sdpa_backward(op->in[0], op->in[1], op->in[2], c->out[0], g, mask, lse, mkind,
                                    op->p.sdpa.causal, op->p.sdpa.scale, &d[0], &d[1], &d[2]);
    for (int i = 0; i < 3 && st == EM_OK; i++)
        if (c->needs[i]) c->gin[i] = ad_sum_to(d[i], ad_in_shape(c, i));
    return true;
}

/* q [..., L, E], k [..., S, E], v [..., S, Ev], mask broadcast to [..., L, S]. Recomputes
 * P = softmax((q scale) k^T + mask) with masked positions at -inf, then
 *   dv = P^T g, dP = g v^T, dS = P * (dP - sum(dP * P, -1)) (the softmax_backward record),
 *   dq = dS k scale, dk = dS^T (q scale),
 * each summed back over the batch dims its input was broadcast along. */
static void sdpa(ad_ctx *c)
{
    if (sdpa_fused(c)) return;
    const em_op *op = c->op;
    em_tensor *q = wide(op->in[0]), *k = wide(op->in[1]), *v = wide(op->in[2]);
    em_tensor *mask = op->n_in > 3 ? op->in[3] : NULL;
    bool causal = op->p.sdpa.causal;
    int mkind = op->p.sdpa.mask_kind;
    double scale = op->p.sdpa.scale;
    em_tensor *g = wide(ad_gout(c, 0)); /* [B..., L, Ev] */
    if (!q || !k || !v || !g) return;
    em_shape ss = em_tensor_shape(g);
    int r = ss.rank;
    int64_t L = ss.dims[r - 2], S = ad_in_shape(c, 1).dims[ad_in_shape(c, 1).rank - 2];
    ss.dims[r - 1] = S; /* the full scores shape [B..., L, S] */
    em_tensor *qs = scale == 1 ? q : em_mul_scalar(q, scale); /* also dk's factor */
    em_tensor *sc = em_matmul(qs, em_transpose(k, -2, -1));
    if (mask && mkind == 2) sc = em_add(sc, wide(mask));
    if (sc && !em_shape_equal(em_tensor_shape(sc), ss)) sc = em_expand(sc, ss);
    em_tensor *drop = NULL; /* true where a key is masked out */
    if (causal) {
        em_tensor *ones = em_ones(EM_SHAPE(L, S), q->dtype, q->storage->device);
        drop = em_ne_scalar(em_triu(ones, 1), 0);
    }
    if (mask && mkind == 1) {
        em_tensor *nm = em_logical_not(mask);
        drop = drop ? em_logical_or(drop, nm) : nm;
    }
    if (drop) sc = em_masked_fill(sc, drop, -INFINITY);
    em_tensor *p = em_softmax(sc, -1);
    if (c->needs[2])
        c->gin[2] = ad_sum_to(em_matmul(em_transpose(p, -2, -1), g), ad_in_shape(c, 2));
    bool need_m = mask && mkind == 2 && c->needs[3];
    if (!c->needs[0] && !c->needs[1] && !need_m) return;
    em_tensor *dp = em_matmul(g, em_transpose(v, -2, -1));
    em_tensor *ds = tn_softmax_backward(p, dp, -1, false); /* NULL on an earlier error */
    if (need_m) c->gin[3] = ad_sum_to(ds, ad_in_shape(c, 3));
    if (c->needs[0]) {
        em_tensor *dq = em_matmul(ds, k);
        c->gin[0] = ad_sum_to(scale == 1 ? dq : em_mul_scalar(dq, scale), ad_in_shape(c, 0));
    }
    if (c->needs[1])
        c->gin[1] = ad_sum_to(em_matmul(em_transpose(ds, -2, -1), qs), ad_in_shape(c, 1));
}

/* Inverted dropout: dx = g * keep / (1 - p). The keep mask is drawn again from the record's
 * (seed, offset): the kernel keeps element k when uniform k >= p, and bernoulli(p) at the same
 * stream position is 1 exactly when uniform k < p, so keep = 1 - bernoulli(p). The global
 * generator is put back afterwards (another thread drawing at this moment could see the
 * temporary state). */
static void dropout(ad_ctx *c)
{
    const em_op *op = c->op;
    double p = op->p.random.p;
    if (!c->needs[0] || p >= 1) return; /* everything dropped: zero gradient */
    em_tensor *x = op->in[0];
    em_rng_state saved = em_rng_get_state();
    em_rng_set_state((em_rng_state){op->p.random.seed, op->p.random.offset});
    em_tensor *dropped = em_bernoulli_p(ad_in_shape(c, 0), p, x->dtype, x->storage->device);
    em_rng_set_state(saved);
    em_tensor *keep = em_mul_scalar(em_rsub_scalar(dropped, 1.0), 1.0 / (1.0 - p));
    c->gin[0] = em_mul(ad_gout(c, 0), keep);
}

em_status ad_rule_norm(ad_ctx *c)
{
    switch (c->op->kind) {
    case EM_OP_LAYER_NORM: layer_rms(c, false); break;
    case EM_OP_RMS_NORM: layer_rms(c, true); break;
    case EM_OP_GROUP_NORM: group_norm(c); break;
    case EM_OP_BATCH_NORM: batch_norm(c); break;
    case EM_OP_SDPA: sdpa(c); break;
    case EM_OP_DROPOUT: dropout(c); break;
    default: return ad_no_rule(c);
    }
    return ad_status(c);
}
