/* Normalisation, attention and dropout front-ends.
 * Records (parameters in src/ir/ir.h):
 *   LAYER_NORM  in: x, [weight], [bias]; em_p_norm: n_norm (trailing dims normalised),
 *               has_weight, has_bias, eps
 *   RMS_NORM    in: x, [weight]; em_p_norm: n_norm, has_weight, eps
 *   GROUP_NORM  in: x [N, C, *], [weight C], [bias C]; em_p_norm: groups, has_weight, has_bias,
 *               eps
 *   BATCH_NORM  in: x [N, C, *], mean C, var C, [weight C], [bias C]; em_p_norm: has_weight,
 *               has_bias, eps
 *   SDPA        in: q [..., L, E], k [..., S, E], v [..., S, Ev], [mask]; em_p_sdpa: causal,
 *               mask_kind (0 none, 1 bool keep-mask, 2 additive float), scale;
 *               out: o [B..., L, Ev], optionally lse [B..., L] (f32, contiguous): the base-2
 *               log-sum-exp of each row's kept scores, log2 sum_j 2^(scale q k_j^T log2 e + ...),
 *               +inf for a row with every key masked. Only backends that claim the two-output
 *               record get it (the autodiff rule hands lse to SDPA_BACKWARD).
 *   SDPA_BACKWARD in: q, k, v, o (the SDPA output), g (its gradient, o's shape), [mask], [lse]
 *               (has_lse: the last input is the forward's lse, which a backend may use instead
 *               of recomputing the softmax statistics);
 *               out: dq [B..., L, E], dk [B..., S, E], dv [B..., S, Ev] over o's batch dims B
 *               (contiguous, q's dtype; not summed over broadcast dims); em_p_sdpa as SDPA.
 *               P = softmax(scale q k^T + mask) with a fully masked row all zero (the forward
 *               gives NaN there), D = rowsum(g * o), dS = P * (g v^T - D):
 *               dv = P^T g, dq = scale dS k, dk = scale dS^T q
 *   NORM_BACKWARD in: x, [weight], g (the output's gradient, x's shape and dtype); em_p_norm_bw:
 *               n_norm, has_weight, rms, want_dw, want_db (layer norm only), eps; out: dx (x's
 *               shape), [dweight], [dbias] (the norm shape), all contiguous in x's dtype. Per
 *               row of the n_norm trailing dims: xhat = (x - mean) rstd (rms: x rstd), rstd =
 *               1 / sqrt(var + eps), gx = g weight, dx = rstd (gx - mean(gx) - xhat mean(gx
 *               xhat)) (rms: without mean(gx)), dweight = sum over rows of g xhat, dbias = sum
 *               over rows of g
 *   DROPOUT     in: x; em_p_random: the Philox stream (element k is kept when uniform k of the
 *               stream is >= p) and p. */
#include <math.h>
#include <string.h>

#include "op.h"

static bool check_float(const char *fn, const em_tensor *t, const char *what)
{
    if (em_dtype_is_float(t->dtype)) return true;
    em_error(EM_ERR_DTYPE, "%s: %s must be a float tensor, got %s", fn, what,
             em_dtype_name(t->dtype));
    return false;
}

/* An optional parameter tensor: same dtype as x and exactly `shape`. */
static bool check_param(const char *fn, const em_tensor *x, const em_tensor *p, const char *what,
                        const int64_t *shape, int rank)
{
    if (!p) return true;
    if (p->dtype != x->dtype) {
        em_error(EM_ERR_DTYPE, "%s: %s has dtype %s, input has %s", fn, what,
                 em_dtype_name(p->dtype), em_dtype_name(x->dtype));
        return false;
    }
    if (!tn_check_same_device(fn, x, p)) return false;
    bool ok = p->rank == rank;
    for (int d = 0; ok && d < rank; d++) ok = p->shape[d] == shape[d];
    if (!ok) {
        em_error(EM_ERR_SHAPE, "%s: %s has shape %s, expected %s", fn, what,
                 tn_dims_str(p->shape, p->rank), tn_dims_str(shape, rank));
        return false;
    }
    return true;
}

/* x is a float tensor with at least n_norm dims and eps is not negative. */
static bool check_norm_args(const char *fn, const em_tensor *x, int n_norm, double eps)
{
    if (!tn_check_ptr(fn, x, "x") || !check_float(fn, x, "x")) return false;
    if (n_norm < 1 || n_norm > x->rank) {
        em_error(EM_ERR_INVALID_ARG, "%s: cannot normalise %d trailing dims of a rank-%d tensor",
                 fn, n_norm, x->rank);
        return false;
    }
    if (!(eps >= 0)) {
        em_error(EM_ERR_INVALID_ARG, "%s: eps %g is negative", fn, eps);
        return false;
    }
    return true;
}

static em_tensor *run_norm(em_op_kind kind, const em_tensor *x, em_tensor *const *params,
                           int n_params, em_params p)
{
    em_tensor *in[EM_OP_MAX_IN];
    int n = 0;
    in[n++] = (em_tensor *)x;
    for (int k = 0; k < n_params; k++)
        if (params[k]) in[n++] = params[k];
    em_tensor *out = tn_new(x->dtype, x->shape, x->rank, x->storage->device);
    return tn_run(kind, out, in, n, &p);
}

em_tensor *em_layer_norm(const em_tensor *x, int n_norm, const em_tensor *weight,
                         const em_tensor *bias, double eps)
{
    const char *fn = "em_layer_norm";
    if (!check_norm_args(fn, x, n_norm, eps)) return NULL;
    const int64_t *nshape = x->shape + (x->rank - n_norm);
    if (!check_param(fn, x, weight, "weight", nshape, n_norm) ||
        !check_param(fn, x, bias, "bias", nshape, n_norm))
        return NULL;
    em_tensor *params[2] = {(em_tensor *)weight, (em_tensor *)bias};
    em_params p = {
        .norm = {
            .n_norm = n_norm, .has_weight = weight != NULL, .has_bias = bias != NULL, .eps = eps}};
    return run_norm(EM_OP_LAYER_NORM, x, params, 2, p);
}

em_tensor *em_rms_norm(const em_tensor *x, int n_norm, const em_tensor *weight, double eps)
{
    const char *fn = "em_rms_norm";
    if (!check_norm_args(fn, x, n_norm, eps)) return NULL;
    const int64_t *nshape = x->shape + (x->rank - n_norm);
    if (!check_param(fn, x, weight, "weight", nshape, n_norm)) return NULL;
    em_tensor *params[1] = {(em_tensor *)weight};
    em_params p = {.norm = {.n_norm = n_norm, .has_weight = weight != NULL, .eps = eps}};
    return run_norm(EM_OP_RMS_NORM, x, params, 1, p);
}

static bool check_nc(const char *fn, const em_tensor *x)
{
    if (x->rank >= 2) return true;
    em_error(EM_ERR_SHAPE, "%s: input must be [N, C, ...], got shape %s", fn,
             tn_dims_str(x->shape, x->rank));
    return false;
}

em_tensor *em_group_norm(const em_tensor *x, int64_t groups, const em_tensor *weight,
                         const em_tensor *bias, double eps)
{
    const char *fn = "em_group_norm";
    if (!tn_check_ptr(fn, x, "x") || !check_float(fn, x, "x") || !check_nc(fn, x)) return NULL;
    int64_t c = x->shape[1];
    if (groups < 1 || c % groups != 0) {
        em_error(EM_ERR_INVALID_ARG, "%s: %lld groups do not divide %lld channels", fn,
                 (long long)groups, (long long)c);
        return NULL;
    }
    if (!check_param(fn, x, weight, "weight", &c, 1) || !check_param(fn, x, bias, "bias", &c, 1))
        return NULL;
    em_tensor *params[2] = {(em_tensor *)weight, (em_tensor *)bias};
    em_params p = {
        .norm = {
            .groups = groups, .has_weight = weight != NULL, .has_bias = bias != NULL, .eps = eps}};
    return run_norm(EM_OP_GROUP_NORM, x, params, 2, p);
}

em_tensor *em_batch_norm(const em_tensor *x, const em_tensor *mean, const em_tensor *var,
                         const em_tensor *weight, const em_tensor *bias, double eps)
{
    const char *fn = "em_batch_norm";
    if (!tn_check_ptr(fn, x, "x") || !tn_check_ptr(fn, mean, "mean") ||
        !tn_check_ptr(fn, var, "var") || !check_float(fn, x, "x") || !check_nc(fn, x))
        return NULL;
    int64_t c = x->shape[1];
    if (!check_param(fn, x, mean, "mean", &c, 1) || !check_param(fn, x, var, "var", &c, 1) ||
        !check_param(fn, x, weight, "weight", &c, 1) || !check_param(fn, x, bias, "bias", &c, 1))
        return NULL;
    em_tensor *params[4] = {(em_tensor *)mean, (em_tensor *)var, (em_tensor *)weight,
                            (em_tensor *)bias};
    em_params p = {.norm = {.has_weight = weight != NULL, .has_bias = bias != NULL, .eps = eps}};
    return run_norm(EM_OP_BATCH_NORM, x, params, 4, p);
}

/* NumPy broadcast of two dim lists without recording an error; false when they clash. */
static bool batch_broadcast(const int64_t *a, int ra, const int64_t *b, int rb, int64_t *out,
                            int *rout)
{
    int r = ra > rb ? ra : rb;
    for (int i = 0; i < r; i++) {
        int64_t da = i < r - ra ? 1 : a[i - (r - ra)];
        int64_t db = i < r - rb ? 1 : b[i - (r - rb)];
        if (da != db && da != 1 && db != 1) return false;
        out[i] = da == 1 ? db : da;
    }
    *rout = r;
    return true;
}

bool tn_sdpa_fused_backward_on(void)
{
    return core_cfg_bool(CFG_SDPA_FUSED_BACKWARD);
}

/* em_sdpa; with want_lse, the two-output record where the backend claims it (*lse set, else
 * NULL). */
static em_tensor *sdpa(const em_tensor *q, const em_tensor *k, const em_tensor *v,
                       const em_tensor *mask, em_sdpa_opts o, bool want_lse, em_tensor **lse)
{
    const char *fn = "em_sdpa";
    if (lse) *lse = NULL;
    if (!tn_check_ptr(fn, q, "q") || !tn_check_ptr(fn, k, "k") || !tn_check_ptr(fn, v, "v"))
        return NULL;
    if (!check_float(fn, q, "q")) return NULL;
    if (k->dtype != q->dtype || v->dtype != q->dtype) {
        em_error(EM_ERR_DTYPE, "%s: q, k, v dtypes differ (%s, %s, %s)", fn,
                 em_dtype_name(q->dtype), em_dtype_name(k->dtype), em_dtype_name(v->dtype));
        return NULL;
    }
    if (!tn_check_same_device(fn, q, k) || !tn_check_same_device(fn, q, v)) return NULL;
    if (q->rank < 2 || k->rank < 2 || v->rank < 2) {
        em_error(EM_ERR_SHAPE, "%s: q, k, v need at least 2 dims, got %s, %s, %s", fn,
                 tn_dims_str(q->shape, q->rank), tn_dims_str(k->shape, k->rank),
                 tn_dims_str(v->shape, v->rank));
        return NULL;
    }
    int64_t L = q->shape[q->rank - 2], E = q->shape[q->rank - 1];
    int64_t S = k->shape[k->rank - 2], Ev = v->shape[v->rank - 1];
    if (k->shape[k->rank - 1] != E || v->shape[v->rank - 2] != S) {
        em_error(EM_ERR_SHAPE,
                 "%s: shapes q %s, k %s, v %s do not fit ([..., L, E], "
                 "[..., S, E], [..., S, Ev])",
                 fn, tn_dims_str(q->shape, q->rank), tn_dims_str(k->shape, k->rank),
                 tn_dims_str(v->shape, v->rank));
        return NULL;
    }
    /* batch dims of q, k, v broadcast together */
    int64_t b1[EM_MAX_RANK], b2[EM_MAX_RANK];
    int r1, r2;
    if (!batch_broadcast(q->shape, q->rank - 2, k->shape, k->rank - 2, b1, &r1) ||
        !batch_broadcast(b1, r1, v->shape, v->rank - 2, b2, &r2)) {
        em_error(EM_ERR_SHAPE, "%s: batch dims of q %s, k %s, v %s cannot broadcast", fn,
                 tn_dims_str(q->shape, q->rank), tn_dims_str(k->shape, k->rank),
                 tn_dims_str(v->shape, v->rank));
        return NULL;
    }
    if (r2 + 2 > EM_MAX_RANK) {
        em_error(EM_ERR_SHAPE, "%s: batch rank %d is too large", fn, r2);
        return NULL;
    }
    int64_t oshape[EM_MAX_RANK];
    memcpy(oshape, b2, sizeof(int64_t) * (size_t)r2);
    oshape[r2] = L;
    oshape[r2 + 1] = Ev;
    int mask_kind = 0;
    if (mask) {
        if (!tn_check_same_device(fn, q, mask)) return NULL;
        if (mask->dtype == EM_BOOL)
            mask_kind = 1;
        else if (mask->dtype == q->dtype)
            mask_kind = 2;
        else {
            em_error(EM_ERR_DTYPE, "%s: mask must be bool or %s, got %s", fn,
                     em_dtype_name(q->dtype), em_dtype_name(mask->dtype));
            return NULL;
        }
        int64_t sshape[EM_MAX_RANK];
        memcpy(sshape, b2, sizeof(int64_t) * (size_t)r2);
        sshape[r2] = L;
        sshape[r2 + 1] = S;
        bool fits = mask->rank <= r2 + 2;
        for (int d = 0; fits && d < mask->rank; d++) {
            int64_t want = sshape[r2 + 2 - mask->rank + d];
            fits = mask->shape[d] == want || mask->shape[d] == 1;
        }
        if (!fits) {
            em_error(EM_ERR_SHAPE, "%s: mask of shape %s does not broadcast to the scores %s", fn,
                     tn_dims_str(mask->shape, mask->rank), tn_dims_str(sshape, r2 + 2));
            return NULL;
        }
    }
    double scale = o.scale > 0 ? o.scale : 1.0 / sqrt((double)(E > 0 ? E : 1));
    em_device dev = q->storage->device;
    em_op rec;
    memset(&rec, 0, sizeof rec);
    rec.kind = EM_OP_SDPA;
    rec.n_in = mask ? 4 : 3;
    rec.in[0] = (em_tensor *)q, rec.in[1] = (em_tensor *)k, rec.in[2] = (em_tensor *)v;
    rec.in[3] = (em_tensor *)mask;
    rec.p.sdpa = (em_p_sdpa){.causal = o.causal, .mask_kind = mask_kind, .scale = scale};
    rec.n_out = 1;
    if (want_lse) {
        /* supports() reads shapes and dtypes only: ask with descriptors, no memory */
        em_tensor desc[2];
        tn_describe(&desc[0], q->dtype, oshape, r2 + 2, q->storage);
        tn_describe(&desc[1], EM_F32, oshape, r2 + 1, q->storage);
        rec.out[0] = &desc[0], rec.out[1] = &desc[1];
        rec.n_out = 2;
        if (!tn_supported(&rec)) rec.n_out = 1;
        rec.out[0] = rec.out[1] = NULL;
    }
    rec.out[0] = tn_new(q->dtype, oshape, r2 + 2, dev);
    if (!rec.out[0]) return NULL;
    if (rec.n_out == 2) {
        rec.out[1] = tn_new(EM_F32, oshape, r2 + 1, dev);
        if (!rec.out[1]) {
            em_release(rec.out[0]);
            return NULL;
        }
    }
    if (tn_dispatch(&rec) != EM_OK) return NULL;
    if (lse)
        *lse = rec.out[1];
    else
        em_release(rec.out[1]); /* the graph keeps its alias when it took the record */
    return rec.out[0];
}

em_tensor *em_sdpa(const em_tensor *q, const em_tensor *k, const em_tensor *v,
                   const em_tensor *mask, em_sdpa_opts o)
{
    /* the forward's row statistics, for the fused backward, when a graph records the op */
    em_tensor *in[4] = {(em_tensor *)q, (em_tensor *)k, (em_tensor *)v, (em_tensor *)mask};
    bool want = q && k && v && tn_would_record(in, mask ? 4 : 3) && tn_sdpa_fused_backward_on();
    return sdpa(q, k, v, mask, o, want, NULL);
}

em_tensor *tn_sdpa_lse(const em_tensor *q, const em_tensor *k, const em_tensor *v,
                       const em_tensor *mask, em_sdpa_opts o, em_tensor **lse)
{
    *lse = NULL;
    return sdpa(q, k, v, mask, o, true, lse);
}

em_status tn_sdpa_backward(const em_tensor *q, const em_tensor *k, const em_tensor *v,
                           const em_tensor *o, const em_tensor *g, const em_tensor *mask,
                           const em_tensor *lse, int mask_kind, bool causal, double scale,
                           em_tensor **dq, em_tensor **dk, em_tensor **dv)
{
    *dq = *dk = *dv = NULL;
    int nb = o->rank - 2;
    int64_t L = o->shape[nb], E = q->shape[q->rank - 1], S = k->shape[k->rank - 2];
    int64_t Ev = v->shape[v->rank - 1];
    int64_t shp[3][EM_MAX_RANK];
    for (int t = 0; t < 3; t++) memcpy(shp[t], o->shape, sizeof(int64_t) * (size_t)nb);
    shp[0][nb] = L, shp[0][nb + 1] = E;
    shp[1][nb] = S, shp[1][nb + 1] = E;
    shp[2][nb] = S, shp[2][nb + 1] = Ev;
    em_op op;
    memset(&op, 0, sizeof op);
    op.kind = EM_OP_SDPA_BACKWARD;
    op.in[0] = (em_tensor *)q, op.in[1] = (em_tensor *)k, op.in[2] = (em_tensor *)v;
    op.in[3] = (em_tensor *)o, op.in[4] = (em_tensor *)g, op.in[5] = (em_tensor *)mask;
    op.n_in = mask ? 6 : 5;
    if (lse) op.in[op.n_in++] = (em_tensor *)lse;
    op.p.sdpa = (em_p_sdpa){.causal = causal,
                            .mask_kind = mask ? mask_kind : 0,
                            .has_lse = lse != NULL,
                            .scale = scale};
    em_device dev = q->storage->device;
    for (int t = 0; t < 3; t++) op.out[t] = tn_new(q->dtype, shp[t], nb + 2, dev);
    op.n_out = 3;
    em_status st = tn_dispatch(&op);
    if (st != EM_OK) return st;
    *dq = op.out[0], *dk = op.out[1], *dv = op.out[2];
    return EM_OK;
}

em_status tn_norm_backward(const em_tensor *x, const em_tensor *w, const em_tensor *g, int n_norm,
                           double eps, bool rms, em_tensor **dx, em_tensor **dw, em_tensor **db)
{
    const char *fn = "tn_norm_backward";
    em_tensor **outs[3] = {dx, dw, db};
    for (int t = 0; t < 3; t++)
        if (outs[t]) *outs[t] = NULL;
    if (!tn_check_ptr(fn, x, "x") || !tn_check_ptr(fn, g, "g") || !check_float(fn, x, "x"))
        return em_last_status();
    if (n_norm < 1 || n_norm > x->rank || (db && rms) || (dw && !w)) {
        return em_error(EM_ERR_INVALID_ARG,
                        "%s: n_norm %d of a rank-%d x, or a gradient asked for a parameter the "
                        "norm lacks",
                        fn, n_norm, x->rank);
    }
    const int64_t *nshape = x->shape + (x->rank - n_norm);
    if (!check_param(fn, x, g, "g", x->shape, x->rank) ||
        !check_param(fn, x, w, "weight", nshape, n_norm))
        return em_last_status();
    em_op op;
    memset(&op, 0, sizeof op);
    op.kind = EM_OP_NORM_BACKWARD;
    op.in[op.n_in++] = (em_tensor *)x;
    if (w) op.in[op.n_in++] = (em_tensor *)w;
    op.in[op.n_in++] = (em_tensor *)g;
    op.p.norm_bw = (em_p_norm_bw){.n_norm = n_norm,
                                  .has_weight = w != NULL,
                                  .rms = rms,
                                  .want_dw = dw != NULL,
                                  .want_db = db != NULL,
                                  .eps = eps};
    const int64_t *shp[3] = {x->shape, nshape, nshape};
    const int rk[3] = {x->rank, n_norm, n_norm};
    int which[3], n_out = 0;
    for (int t = 0; t < 3; t++)
        if (t == 0 || outs[t]) which[n_out++] = t;
    em_device dev = x->storage->device;
    for (int k = 0; k < n_out; k++)
        if (!(op.out[k] = tn_new(x->dtype, shp[which[k]], rk[which[k]], dev))) {
            for (int j = 0; j < k; j++) em_release(op.out[j]);
            return em_last_status();
        }
    op.n_out = n_out;
    em_status st = tn_dispatch(&op);
    if (st != EM_OK) return st;
    for (int k = 0; k < n_out; k++)
        if (outs[which[k]]) *outs[which[k]] = op.out[k];
    return EM_OK;
}

em_tensor *em_dropout(const em_tensor *x, double p, bool train)
{
    const char *fn = "em_dropout";
    if (!tn_check_ptr(fn, x, "x") || !check_float(fn, x, "x")) return NULL;
    if (!(p >= 0 && p <= 1)) {
        em_error(EM_ERR_INVALID_ARG, "%s: probability %g is outside [0, 1]", fn, p);
        return NULL;
    }
    if (!train || p == 0) return tn_share((em_tensor *)x);
    em_rng_state st = em_rng_get_state();
    em_tensor *out = tn_new(x->dtype, x->shape, x->rank, x->storage->device);
    if (!out) return NULL;
    uint64_t off = em_rng_reserve((uint64_t)tn_numel(out) * 2);
    em_params par = {.random = {.seed = st.seed, .offset = off, .p = p}};
    em_tensor *in = (em_tensor *)x;
    return tn_run(EM_OP_DROPOUT, out, &in, 1, &par);
}
