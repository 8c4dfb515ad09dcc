/* Default lowerings: a composite kind (a row of ops.def whose lowering cell is not empty) runs as
 * the ops its cell writes where its backend does not claim it. tn_dispatch calls tn_lower for
 * such a record; the lowering builds the value from em_ ops on the record's own device (each
 * dispatched again, so a composite inside a lowering lowers in turn) and copies it into the
 * record's outputs. The nested records are not offered to the recorder: autodiff and capture
 * see the composite record alone, and its own backward rule gives its gradient.
 *
 * Each function below reads the record (inputs, typed parameters, the outputs' shapes) and
 * leaves its results in res[0 .. n_out) as tensors of the driver's scope. f16 and bf16 inputs
 * arrive widened to f32 (the kernels compute in f32 too) and the results are rounded once into
 * the outputs. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "op.h"

typedef em_status (*lower_fn)(const em_op *op, em_tensor **res);

static _Thread_local int lower_depth;

bool tn_lowering(void)
{
    return lower_depth > 0;
}

static em_status done(em_tensor *r, em_tensor **res)
{
    res[0] = r;
    return r ? EM_OK : em_last_status();
}

static em_device dev_of(const em_tensor *t)
{
    return t->storage->device;
}

/* The dims of a reduce mask over a rank-r input (EM_ALL for a rank-0 one). */
static em_axes mask_axes(uint32_t mask, int rank)
{
    em_axes a = {.n = 0};
    for (int d = 0; d < rank; d++)
        if (mask & (1u << d)) a.d[a.n++] = d;
    return a;
}

static int64_t mask_count(const em_tensor *x, uint32_t mask)
{
    int64_t n = 1;
    for (int d = 0; d < x->rank; d++)
        if (mask & (1u << d)) n *= x->shape[d];
    return n;
}

/* ---- elementwise ------------------------------------------------------------------------- */

static em_tensor *gelu_of(const em_tensor *x)
{
    return em_mul(em_mul_scalar(x, 0.5), em_add_scalar(em_erf(em_mul_scalar(x, M_SQRT1_2)), 1));
}

static em_tensor *gelu_tanh_of(const em_tensor *x)
{
    const double k = 0.79788456080286535588; /* sqrt(2 / pi) */
    em_tensor *inner = em_add(x, em_mul_scalar(em_mul(em_square(x), x), 0.044715));
    return em_mul(em_mul_scalar(x, 0.5), em_add_scalar(em_tanh(em_mul_scalar(inner, k)), 1));
}

static em_tensor *hard_sigmoid_of(const em_tensor *x)
{
    return em_div_scalar(em_relu6(em_add_scalar(x, 3)), 6);
}

static em_status lower_gelu(const em_op *op, em_tensor **res)
{
    return done(gelu_of(op->in[0]), res);
}

static em_status lower_gelu_tanh(const em_op *op, em_tensor **res)
{
    return done(gelu_tanh_of(op->in[0]), res);
}

static em_status lower_silu(const em_op *op, em_tensor **res)
{
    return done(em_mul(op->in[0], em_sigmoid(op->in[0])), res);
}

static em_status lower_log_sigmoid(const em_op *op, em_tensor **res)
{
    return done(em_neg(em_softplus(em_neg(op->in[0]), 1, INFINITY)), res);
}

static em_status lower_hard_sigmoid(const em_op *op, em_tensor **res)
{
    return done(hard_sigmoid_of(op->in[0]), res);
}

static em_status lower_hard_swish(const em_op *op, em_tensor **res)
{
    return done(em_mul(op->in[0], em_hard_sigmoid(op->in[0])), res);
}

static em_status lower_mish(const em_op *op, em_tensor **res)
{
    return done(em_mul(op->in[0], em_tanh(em_softplus(op->in[0], 1, INFINITY))), res);
}

static em_status lower_softsign(const em_op *op, em_tensor **res)
{
    return done(em_div(op->in[0], em_add_scalar(em_abs(op->in[0]), 1)), res);
}

static em_status lower_masked_fill(const em_op *op, em_tensor **res)
{
    const em_tensor *x = op->in[0];
    em_tensor *v = em_scalar(op->p.fill.value, x->dtype, dev_of(x));
    return done(em_where(op->in[1], v, x), res);
}

/* from the nearer end, as the kernels: a + w (b - a) for |w| < 1/2, else b - (b - a)(1 - w) */
static em_status lower_lerp(const em_op *op, em_tensor **res)
{
    const em_tensor *a = op->in[0], *b = op->in[1], *w = op->in[2];
    em_tensor *d = em_sub(b, a);
    em_tensor *lo = em_add(a, em_mul(w, d)), *hi = em_sub(b, em_mul(d, em_rsub_scalar(w, 1)));
    if (op->p.lerp.w_scalar) return done(fabs(op->p.lerp.w) < 0.5 ? lo : hi, res);
    return done(em_where(em_lt_scalar(em_abs(w), 0.5), lo, hi), res);
}

static em_status lower_threshold_backward(const em_op *op, em_tensor **res)
{
    return done(em_masked_fill(op->in[0], em_le_scalar(op->in[1], op->p.threshold.threshold), 0),
                res);
}

/* ---- reductions ---------------------------------------------------------------------------- */

static em_status lower_mean(const em_op *op, em_tensor **res)
{
    const em_tensor *x = op->in[0];
    const em_p_reduce *p = &op->p.reduce;
    em_tensor *s = em_sum(x, mask_axes(p->mask, x->rank), p->keepdim);
    return done(em_div_scalar(s, (double)mask_count(x, p->mask)), res);
}

/* the biased or corrected variance of x over p's dims */
static em_tensor *var_of(const em_tensor *x, const em_p_reduce *p)
{
    em_axes ax = mask_axes(p->mask, x->rank);
    double n = (double)mask_count(x, p->mask), div = n - (double)p->correction;
    em_tensor *xc = em_sub(x, em_div_scalar(em_sum(x, ax, true), n));
    return em_div_scalar(em_sum(em_square(xc), ax, p->keepdim), div > 0 ? div : 0);
}

static em_status lower_var(const em_op *op, em_tensor **res)
{
    return done(var_of(op->in[0], &op->p.reduce), res);
}

static em_status lower_std(const em_op *op, em_tensor **res)
{
    return done(em_sqrt(var_of(op->in[0], &op->p.reduce)), res);
}

static em_status lower_norm(const em_op *op, em_tensor **res)
{
    const em_tensor *x = op->in[0];
    const em_p_reduce *p = &op->p.reduce;
    em_axes ax = mask_axes(p->mask, x->rank);
    double q = p->p;
    em_tensor *a = em_abs(x), *r;
    if (isinf(q) && mask_count(x, p->mask) == 0) /* the kernels' start: 0 for max, inf for min */
        r = em_full(em_tensor_shape(op->out[0]), q > 0 ? 0 : INFINITY, x->dtype, dev_of(x));
    else if (q == INFINITY)
        r = em_max(a, ax, p->keepdim);
    else if (q == -INFINITY)
        r = em_min(a, ax, p->keepdim);
    else if (q == 0)
        r = em_cast(em_sum(em_ne_scalar(x, 0), ax, p->keepdim), x->dtype);
    else if (q == 1)
        r = em_sum(a, ax, p->keepdim);
    else if (q == 2)
        r = em_sqrt(em_sum(em_square(x), ax, p->keepdim));
    else
        r = em_pow_scalar(em_sum(em_pow_scalar(a, q), ax, p->keepdim), 1.0 / q);
    return done(r, res);
}

/* log(sum(exp(x))) over ax with its dims kept, centred on the max (0 where the max is infinite,
 * as the kernels do) */
static em_tensor *logsumexp_kept(const em_tensor *x, em_axes ax)
{
    em_tensor *m = em_max(x, ax, true);
    em_tensor *m0 = em_masked_fill(m, em_isinf(m), 0);
    return em_add(em_log(em_sum(em_exp(em_sub(x, m0)), ax, true)), m0);
}

static em_status lower_logsumexp(const em_op *op, em_tensor **res)
{
    const em_tensor *x = op->in[0];
    em_axes ax = mask_axes(op->p.reduce.mask, x->rank);
    if (mask_count(x, op->p.reduce.mask) == 0) /* log of an empty sum */
        return done(em_full(em_tensor_shape(op->out[0]), -INFINITY, x->dtype, dev_of(x)), res);
    em_tensor *r = logsumexp_kept(x, ax);
    if (!op->p.reduce.keepdim && x->rank > 0) r = em_squeeze(r, ax);
    return done(r, res);
}

static em_tensor *softmax_of(const em_tensor *x, int dim)
{
    em_tensor *e = em_exp(em_sub(x, em_max(x, EM_AXES(dim), true)));
    return em_div(e, em_sum(e, EM_AXES(dim), true));
}

static em_status lower_softmax(const em_op *op, em_tensor **res)
{
    return done(softmax_of(op->in[0], op->p.dim.dim), res);
}

static em_status lower_log_softmax(const em_op *op, em_tensor **res)
{
    const em_tensor *x = op->in[0];
    return done(em_sub(x, em_logsumexp(x, EM_AXES(op->p.dim.dim), true)), res);
}

/* softmax's (log false) or log_softmax's (log true) gradient from its output y and g */
static em_tensor *softmax_grad(const em_tensor *y, const em_tensor *g, int dim, bool log)
{
    em_axes ax = EM_AXES(dim);
    return log ? em_sub(g, em_mul(em_exp(y), em_sum(g, ax, true)))
               : em_mul(y, em_sub(g, em_sum(em_mul(g, y), ax, true)));
}

em_tensor *tn_softmax_backward_composed(const em_tensor *y, const em_tensor *g, int dim, bool log)
{
    em_scope_begin();
    em_dtype dt = em_dtype_promote(y->dtype, g->dtype);
    bool half = dt == EM_F16 || dt == EM_BF16;
    const em_tensor *yc = half ? em_cast(y, EM_F32) : y, *gc = half ? em_cast(g, EM_F32) : g;
    em_tensor *r = softmax_grad(yc, gc, dim, log);
    if (half) r = em_cast(r, dt);
    em_keep(r);
    em_scope_end();
    return r;
}

static em_status lower_softmax_backward(const em_op *op, em_tensor **res)
{
    return done(softmax_grad(op->in[0], op->in[1], op->p.dim.dim, op->p.dim.log), res);
}

static em_tensor *lsg_in_range(const em_tensor *t, int64_t len)
{
    return em_logical_and(em_ge_scalar(t, 0), em_lt_scalar(t, (double)len));
}

em_tensor *tn_log_softmax_gather_composed(const em_tensor *x, int dim, const em_tensor *t)
{
    int64_t len = x->shape[dim];
    /* no line of no classes has a class to pick: NaN, as for an index out of range */
    if (len == 0) return em_full(em_tensor_shape(t), NAN, x->dtype, dev_of(x));
    em_scope_begin();
    em_tensor *out = em_logical_not(lsg_in_range(t, len));
    em_tensor *tc = em_unsqueeze(em_clamp(t, 0, (double)(len - 1)), dim);
    em_tensor *r = em_masked_fill(
        em_squeeze(tn_gather_inrange(em_log_softmax(x, dim), dim, tc), EM_AXES(dim)), out, NAN);
    em_keep(r);
    em_scope_end();
    return r;
}

em_tensor *tn_log_softmax_gather_backward_composed(const em_tensor *x, int dim, const em_tensor *t,
                                                   const em_tensor *g)
{
    int64_t len = x->shape[dim];
    em_scope_begin();
    /* the log-softmax gradient of g scattered into zeros at t (a line of zeros where t is out
     * of range) */
    em_tensor *zero = em_expand(em_zeros(EM_SCALAR, x->dtype, dev_of(x)), em_tensor_shape(x));
    em_tensor *gz = em_masked_fill(g, em_logical_not(lsg_in_range(t, len)), 0);
    em_tensor *tc = em_clamp(t, 0, (double)(len > 0 ? len - 1 : 0));
    em_tensor *gs = len == 0 ? zero
                             : tn_scatter_inrange(zero, dim, em_unsqueeze(tc, dim),
                                                  em_unsqueeze(gz, dim), EM_SCATTER_ADD);
    em_tensor *r = em_keep(tn_softmax_backward(em_log_softmax(x, dim), gs, dim, true));
    em_scope_end();
    return r;
}

static em_status lower_lsg(const em_op *op, em_tensor **res)
{
    return done(tn_log_softmax_gather_composed(op->in[0], op->p.dim.dim, op->in[1]), res);
}

static em_status lower_lsg_backward(const em_op *op, em_tensor **res)
{
    return done(
        tn_log_softmax_gather_backward_composed(op->in[0], op->p.dim.dim, op->in[1], op->in[2]),
        res);
}

/* ---- linear algebra, indexing, layout ------------------------------------------------------ */

static em_status lower_matmul_bias_act(const em_op *op, em_tensor **res)
{
    em_tensor *z = em_matmul(op->in[0], op->in[1]);
    if (op->n_in > 2) z = em_add(z, op->in[2]);
    em_tensor *y = z;
    switch (op->p.matmul.act) {
    case EM_ACT_RELU: y = em_relu(z); break;
    case EM_ACT_GELU: y = em_gelu(z); break;
    case EM_ACT_GELU_TANH: y = em_gelu_tanh(z); break;
    case EM_ACT_SILU: y = em_silu(z); break;
    default: break;
    }
    res[0] = y;
    if (op->n_out > 1) res[1] = z;
    return y ? EM_OK : em_last_status();
}

static em_status lower_embedding(const em_op *op, em_tensor **res)
{
    const em_tensor *idx = op->in[1];
    em_tensor *flat = em_reshape(idx, EM_SHAPE(tn_numel(idx)));
    uint64_t mark = core_error_mark();
    em_tensor *rows = em_index_select(op->in[0], 0, flat);
    const char *from = "em_index_select";
    if (!rows && em_last_status() == EM_ERR_INDEX &&
        !strncmp(em_last_error(), from, strlen(from))) {
        char msg[256]; /* the message again, under the caller's name */
        snprintf(msg, sizeof msg, "%s", em_last_error() + strlen(from));
        core_error_forget(mark);
        return em_error(EM_ERR_INDEX, "em_embedding%s", msg);
    }
    return done(em_reshape(rows, em_tensor_shape(op->out[0])), res);
}

/* x [..., C*r*r, H, W] <-> [..., C, H*r, W*r] through [B, C, r, r, H, W] (shuffle) or
 * [B, C, H, r, W, r] (unshuffle) */
static em_status lower_shuffle(const em_op *op, em_tensor **res)
{
    const em_tensor *x = op->in[0], *o = op->out[0];
    bool up = op->kind == EM_OP_PIXEL_SHUFFLE;
    int64_t r = op->p.shuffle.r, B = 1;
    for (int d = 0; d < x->rank - 3; d++) B *= x->shape[d];
    const em_tensor *small = up ? x : o; /* the [.., C*r*r, H, W] side */
    int64_t H = small->shape[small->rank - 2], W = small->shape[small->rank - 1];
    int64_t C = (up ? o : x)->shape[x->rank - 3];
    em_tensor *v =
        up ? em_reshape(x, EM_SHAPE(B, C, r, r, H, W)) : em_reshape(x, EM_SHAPE(B, C, H, r, W, r));
    em_tensor *p =
        up ? em_permute(v, EM_AXES(0, 1, 4, 2, 5, 3)) : em_permute(v, EM_AXES(0, 1, 3, 5, 2, 4));
    return done(em_reshape(p, em_tensor_shape(o)), res);
}

static em_status lower_max_pool_values(const em_op *op, em_tensor **res)
{
    const em_tensor *o = op->out[0];
    em_op rec;
    memset(&rec, 0, sizeof rec);
    rec.kind = EM_OP_MAX_POOL;
    rec.n_in = 1;
    rec.in[0] = op->in[0];
    rec.p.pool = op->p.pool;
    rec.n_out = 2;
    rec.out[0] = tn_new(op->in[0]->dtype, o->shape, o->rank, dev_of(o));
    rec.out[1] = rec.out[0] ? tn_new(EM_I64, o->shape, o->rank, dev_of(o)) : NULL;
    if (tn_dispatch(&rec) != EM_OK) return em_last_status();
    em_release(rec.out[1]);
    return done(rec.out[0], res);
}

static em_tensor *weight_grad_composed(const em_tensor *x, const em_tensor *gy, const em_p_wgrad *w)
{
    int64_t N = x->shape[0], C = x->shape[1], Co = gy->shape[1];
    int64_t L = gy->shape[2] * gy->shape[3];
    int64_t pads[4] = {w->pad_lo[1], w->pad_hi[1], w->pad_lo[0], w->pad_hi[0]};
    int64_t zero[2] = {0, 0};
    em_scope_begin();
    em_tensor *xp = em_pad(x, pads, 2, EM_PAD_CONSTANT, 0.0);
    em_tensor *cols = em_im2col(xp, w->kernel, w->dilation, zero, w->stride); /* [N, C*k, L] */
    em_tensor *p = em_matmul(em_reshape(gy, EM_SHAPE(N, Co, L)), em_transpose(cols, 1, 2));
    em_tensor *s = em_sum(p, EM_AXES(0), false); /* [Co, C*kh*kw] */
    em_tensor *r = em_keep(em_reshape(s, EM_SHAPE(Co, C, w->kernel[0], w->kernel[1])));
    em_scope_end();
    return r;
}

static em_status lower_conv_weight_grad(const em_op *op, em_tensor **res)
{
    return done(weight_grad_composed(op->in[0], op->in[1], &op->p.wgrad), res);
}

/* ---- normalisation ------------------------------------------------------------------------- */

/* xhat = (x - mean) rstd over the trailing n dims (no centring for RMS), rstd kept */
static em_tensor *normalised(const em_tensor *x, int n, double eps, bool rms, em_tensor **rstd)
{
    em_axes ax = {.n = n};
    int64_t cnt = 1;
    for (int k = 0; k < n; k++) {
        ax.d[k] = x->rank - n + k;
        cnt *= x->shape[ax.d[k]];
    }
    double inv = 1.0 / (double)(cnt > 0 ? cnt : 1);
    em_tensor *xc = rms ? (em_tensor *)x : em_sub(x, em_mul_scalar(em_sum(x, ax, true), inv));
    em_tensor *var = em_mul_scalar(em_sum(em_square(xc), ax, true), inv);
    em_tensor *rs = em_rsqrt(em_add_scalar(var, eps));
    if (rstd) *rstd = rs;
    return em_mul(xc, rs);
}

static em_status lower_layer_rms(const em_op *op, em_tensor **res)
{
    const em_p_norm *p = &op->p.norm;
    bool rms = op->kind == EM_OP_RMS_NORM;
    em_tensor *y = normalised(op->in[0], p->n_norm, p->eps, rms, NULL);
    int i = 1;
    if (p->has_weight) y = em_mul(y, op->in[i++]);
    if (!rms && p->has_bias) y = em_add(y, op->in[i]);
    return done(y, res);
}

/* [C] as [C, 1, ..., 1] against x [N, C, *] */
static em_tensor *per_channel(const em_tensor *t, const em_tensor *x)
{
    em_shape s = {.rank = x->rank - 1};
    for (int d = 0; d < s.rank; d++) s.dims[d] = d == 0 ? x->shape[1] : 1;
    return em_reshape(t, s);
}

static em_status lower_group_norm(const em_op *op, em_tensor **res)
{
    const em_tensor *x = op->in[0];
    const em_p_norm *p = &op->p.norm;
    int64_t N = x->shape[0], G = p->groups, total = tn_numel(x);
    int64_t M = N * G > 0 ? total / (N * G) : 0;
    em_tensor *y = em_reshape(normalised(em_reshape(x, EM_SHAPE(N, G, M)), 1, p->eps, false, NULL),
                              em_tensor_shape(x));
    int i = 1;
    if (p->has_weight) y = em_mul(y, per_channel(op->in[i++], x));
    if (p->has_bias) y = em_add(y, per_channel(op->in[i], x));
    return done(y, res);
}

static em_status lower_batch_norm(const em_op *op, em_tensor **res)
{
    const em_tensor *x = op->in[0];
    const em_p_norm *p = &op->p.norm;
    em_tensor *rstd = em_rsqrt(em_add_scalar(op->in[2], p->eps));
    em_tensor *y = em_mul(em_sub(x, per_channel(op->in[1], x)), per_channel(rstd, x));
    int i = 3;
    if (p->has_weight) y = em_mul(y, per_channel(op->in[i++], x));
    if (p->has_bias) y = em_add(y, per_channel(op->in[i], x));
    return done(y, res);
}

/* dx (and dw, db where wanted) of layer / RMS norm: with gx = g w,
 * dx = rstd (gx - xhat mean(gx xhat) - mean(gx)) (no mean(gx) for RMS), dw = sum of g xhat and
 * db = sum of g over the leading dims */
static em_status lower_norm_backward(const em_op *op, em_tensor **res)
{
    const em_p_norm_bw *p = &op->p.norm_bw;
    const em_tensor *x = op->in[0], *w = p->has_weight ? op->in[1] : NULL;
    const em_tensor *g = op->in[p->has_weight ? 2 : 1];
    int n = p->n_norm, lead = x->rank - n;
    em_axes ax = {.n = n}, lax = {.n = lead};
    int64_t cnt = 1;
    for (int k = 0; k < n; k++) cnt *= x->shape[ax.d[k] = lead + k];
    for (int d = 0; d < lead; d++) lax.d[d] = d;
    double inv = 1.0 / (double)(cnt > 0 ? cnt : 1);
    em_tensor *rstd, *xhat = normalised(x, n, p->eps, p->rms, &rstd);
    em_tensor *gx = w ? em_mul(g, w) : (em_tensor *)g;
    em_tensor *t = em_sub(gx, em_mul(xhat, em_mul_scalar(em_sum(em_mul(gx, xhat), ax, true), inv)));
    if (!p->rms) t = em_sub(t, em_mul_scalar(em_sum(gx, ax, true), inv));
    int k = 0;
    res[k++] = em_mul(t, rstd);
    /* no leading dims: the sums are the products themselves */
    if (p->want_dw) res[k++] = lead ? em_sum(em_mul(g, xhat), lax, false) : em_mul(g, xhat);
    if (p->want_db) res[k++] = lead ? em_sum(g, lax, false) : em_mul_scalar(g, 1);
    for (int i = 0; i < k; i++)
        if (!res[i]) return em_last_status();
    return EM_OK;
}

/* ---- attention ----------------------------------------------------------------------------- */

/* P = softmax(q scale k^T + mask) with masked keys at -inf, over [B..., L, S]; the mask is
 * in[mi] where the record has one */
static em_tensor *sdpa_probs(const em_op *op, int mi, em_tensor **qs)
{
    const em_tensor *q = op->in[0], *k = op->in[1];
    const em_tensor *mask = op->n_in > mi && op->p.sdpa.mask_kind ? op->in[mi] : NULL;
    int mkind = op->p.sdpa.mask_kind;
    double scale = op->p.sdpa.scale;
    *qs = scale == 1 ? (em_tensor *)q : em_mul_scalar(q, scale);
    em_tensor *sc = em_matmul(*qs, em_transpose(k, -2, -1));
    if (mask && mkind == 2) sc = em_add(sc, mask);
    if (!sc) return NULL;
    int64_t L = sc->shape[sc->rank - 2], S = sc->shape[sc->rank - 1];
    em_tensor *drop = NULL; /* true where a key is masked out */
    if (op->p.sdpa.causal)
        drop = em_ne_scalar(em_triu(em_ones(EM_SHAPE(L, S), EM_F32, dev_of(q)), 1), 0);
    if (mask && mkind == 1) {
        em_tensor *nm = em_logical_not(mask);
        drop = drop ? em_logical_or(drop, nm) : nm;
    }
    if (drop) {
        em_shape s = em_tensor_shape(sc);
        em_shape ds = em_tensor_shape(drop);
        int r = s.rank > ds.rank ? s.rank : ds.rank;
        em_shape b = {.rank = r};
        for (int d = 0; d < r; d++) { /* the scores broadcast against the mask */
            int i = d - (r - s.rank), j = d - (r - ds.rank);
            int64_t u = i >= 0 ? s.dims[i] : 1, v = j >= 0 ? ds.dims[j] : 1;
            b.dims[d] = u == 1 ? v : u;
        }
        sc = em_masked_fill(em_expand(sc, b), drop, -INFINITY);
    }
    return em_softmax(sc, -1);
}

static em_status lower_sdpa(const em_op *op, em_tensor **res)
{
    if (op->n_out != 1)
        return em_error(EM_ERR_UNSUPPORTED, "em_sdpa: the row statistics output has no lowering");
    em_tensor *qs;
    return done(em_matmul(sdpa_probs(op, 3, &qs), op->in[2]), res);
}

/* dv = P^T g, dS = P (g v^T - sum(g v^T P)), dq = dS k scale, dk = dS^T q scale; a fully masked
 * row (P NaN) gives no gradient, as the kernels */
static em_status lower_sdpa_backward(const em_op *op, em_tensor **res)
{
    const em_tensor *k = op->in[1], *v = op->in[2], *g = op->in[4];
    em_tensor *qs, *p = sdpa_probs(op, 5, &qs);
    p = em_masked_fill(p, em_isnan(p), 0);
    em_tensor *ds = tn_softmax_backward(p, em_matmul(g, em_transpose(v, -2, -1)), -1, false);
    double scale = op->p.sdpa.scale;
    em_tensor *dq = em_matmul(ds, k);
    res[0] = scale == 1 ? dq : em_mul_scalar(dq, scale);
    res[1] = em_matmul(em_transpose(ds, -2, -1), qs);
    res[2] = em_matmul(em_transpose(p, -2, -1), g);
    return res[0] && res[1] && res[2] ? EM_OK : em_last_status();
}

/* ---- the table ----------------------------------------------------------------------------- */

static const lower_fn lowerings[EM_OP_COUNT] = {
    [EM_OP_GELU] = lower_gelu,
    [EM_OP_GELU_TANH] = lower_gelu_tanh,
    [EM_OP_SILU] = lower_silu,
    [EM_OP_LOG_SIGMOID] = lower_log_sigmoid,
    [EM_OP_HARD_SIGMOID] = lower_hard_sigmoid,
    [EM_OP_HARD_SWISH] = lower_hard_swish,
    [EM_OP_MISH] = lower_mish,
    [EM_OP_SOFTSIGN] = lower_softsign,
    [EM_OP_MASKED_FILL] = lower_masked_fill,
    [EM_OP_LERP] = lower_lerp,
    [EM_OP_MEAN] = lower_mean,
    [EM_OP_VAR] = lower_var,
    [EM_OP_STD] = lower_std,
    [EM_OP_NORM] = lower_norm,
    [EM_OP_LOGSUMEXP] = lower_logsumexp,
    [EM_OP_SOFTMAX] = lower_softmax,
    [EM_OP_LOG_SOFTMAX] = lower_log_softmax,
    [EM_OP_EMBEDDING] = lower_embedding,
    [EM_OP_PIXEL_SHUFFLE] = lower_shuffle,
    [EM_OP_PIXEL_UNSHUFFLE] = lower_shuffle,
    [EM_OP_LAYER_NORM] = lower_layer_rms,
    [EM_OP_RMS_NORM] = lower_layer_rms,
    [EM_OP_GROUP_NORM] = lower_group_norm,
    [EM_OP_BATCH_NORM] = lower_batch_norm,
    [EM_OP_SDPA] = lower_sdpa,
    [EM_OP_MAX_POOL_VALUES] = lower_max_pool_values,
    [EM_OP_SDPA_BACKWARD] = lower_sdpa_backward,
    [EM_OP_MATMUL_BIAS_ACT] = lower_matmul_bias_act,
    [EM_OP_CONV_WEIGHT_GRAD] = lower_conv_weight_grad,
    [EM_OP_THRESHOLD_BACKWARD] = lower_threshold_backward,
    [EM_OP_SOFTMAX_BACKWARD] = lower_softmax_backward,
    [EM_OP_LOG_SOFTMAX_GATHER] = lower_lsg,
    [EM_OP_LOG_SOFTMAX_GATHER_BACKWARD] = lower_lsg_backward,
    [EM_OP_NORM_BACKWARD] = lower_norm_backward,
};

bool tn_has_lowering(em_op_kind kind)
{
    return kind >= 0 && kind < EM_OP_COUNT && lowerings[kind] != NULL;
}

static _Atomic int64_t lowered_counts[EM_OP_COUNT];

int64_t tn_lowered_count(em_op_kind kind)
{
    return tn_has_lowering(kind) ? atomic_load(&lowered_counts[kind]) : 0;
}

static bool is_half(em_dtype dt)
{
    return dt == EM_F16 || dt == EM_BF16;
}

em_status tn_lower(em_op *op)
{
    if (!tn_has_lowering(op->kind))
        return em_error(EM_ERR_INTERNAL, "em_%s: the kind has no lowering", em_op_name(op->kind));
    bool empty = true; /* nothing to write */
    for (int i = 0; i < op->n_out; i++) empty = empty && tn_numel(op->out[i]) == 0;
    if (empty) return EM_OK;
    lower_depth++;
    em_scope_begin();
    uint64_t mark = core_error_mark();
    em_op w = *op; /* half inputs widened */
    for (int i = 0; i < w.n_in; i++)
        if (w.in[i] && is_half(w.in[i]->dtype)) w.in[i] = em_cast(w.in[i], EM_F32);
    em_tensor *res[EM_OP_MAX_OUT] = {NULL};
    em_status st = EM_OK;
    for (int i = 0; i < w.n_in && st == EM_OK; i++)
        if (op->in[i] && !w.in[i]) st = em_last_status();
    if (st == EM_OK) st = lowerings[op->kind](&w, res);
    for (int i = 0; i < op->n_out && st == EM_OK; i++)
        st = res[i]                      ? em_copy_into(op->out[i], res[i])
             : em_last_status() != EM_OK ? em_last_status()
                                         : em_error(EM_ERR_INTERNAL,
                                                    "em_%s: the lowering gave no "
                                                    "output %d",
                                                    em_op_name(op->kind), i);
    if (st == EM_OK && core_failed_since(mark)) st = em_last_status();
    em_scope_end();
    lower_depth--;
    if (st == EM_OK) atomic_fetch_add(&lowered_counts[op->kind], 1);
    return st;
}
