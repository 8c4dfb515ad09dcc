/* CTC loss as a differentiable op graph: the forward (alpha) recursion in log space over the
 * extended label sequence [N, 2S+1], one logsumexp step per time step. */
#include <math.h>
#include <string.h>

#include "loss_impl.h"

/* Reads a 1-D (or 0-D when n == 1) integer tensor of n lengths into out. */
static bool read_lengths(const char *fn, const em_tensor *t, const char *what, int64_t n,
                         int64_t *out)
{
    if (!nn_loss_check_int(fn, t, what)) return false;
    if (!((t->rank == 1 && t->shape[0] == n) || (t->rank == 0 && n == 1))) {
        em_error(EM_ERR_SHAPE, "%s: `%s` %s must be [%lld] (one per batch element)", fn, what,
                 tn_dims_str(t->shape, t->rank), (long long)n);
        return false;
    }
    return em_to_data(t, out, EM_I64, n) == EM_OK;
}

typedef struct ctc_plan {
    int64_t T, N, C, S, L;
    int64_t *il, *tl;
    int64_t *ext;     /* [N, L] extended labels: blank, l1, blank, l2, ..., blank (padded) */
    bool *noskip;     /* [N, L] the s-2 -> s transition is not allowed */
    bool *noinit;     /* [N, L] not a start position (s >= 2, or past the sequence) */
    bool *idle;       /* [T, N] t >= input_length: alpha stays as it is */
    int64_t *fin;     /* [N, 2] the two end positions */
    bool *fin_absent; /* [N, 2] the second end position does not exist (empty target) */
} ctc_plan;

static void plan_free(ctc_plan *p)
{
    em_free(p->il);
    em_free(p->tl);
    em_free(p->ext);
    em_free(p->noskip);
    em_free(p->noinit);
    em_free(p->idle);
    em_free(p->fin);
    em_free(p->fin_absent);
}

/* Validates lengths and targets and builds the host-side index tables. `padded`: targets are
 * [N, S'] rows, else one concatenated 1-D list. */
static bool plan_build(const char *fn, ctc_plan *p, const em_tensor *targets, bool padded,
                       const em_tensor *input_lengths, const em_tensor *target_lengths,
                       int64_t blank)
{
    int64_t N = p->N, T = p->T, C = p->C;
    p->il = em_alloc((size_t)(N + 1) * sizeof(int64_t));
    p->tl = em_alloc((size_t)(N + 1) * sizeof(int64_t));
    if (!p->il || !p->tl) return false;
    if (!read_lengths(fn, input_lengths, "input_lengths", N, p->il) ||
        !read_lengths(fn, target_lengths, "target_lengths", N, p->tl))
        return false;
    int64_t total = 0, S = 0;
    for (int64_t n = 0; n < N; n++) {
        if (p->il[n] < 0 || p->il[n] > T) {
            em_error(EM_ERR_INVALID_ARG, "%s: input_lengths[%lld] = %lld must lie in [0, %lld]", fn,
                     (long long)n, (long long)p->il[n], (long long)T);
            return false;
        }
        if (p->tl[n] < 0 || (padded && p->tl[n] > targets->shape[targets->rank - 1])) {
            em_error(EM_ERR_INVALID_ARG,
                     "%s: target_lengths[%lld] = %lld must lie in [0, %lld] (the targets' length)",
                     fn, (long long)n, (long long)p->tl[n],
                     (long long)(padded ? targets->shape[targets->rank - 1] : INT64_MAX));
            return false;
        }
        total += p->tl[n];
        if (p->tl[n] > S) S = p->tl[n];
    }
    int64_t tn = tn_numel(targets);
    if (!padded && tn < total) {
        em_error(EM_ERR_SHAPE,
                 "%s: concatenated targets hold %lld labels but target_lengths sum "
                 "to %lld",
                 fn, (long long)tn, (long long)total);
        return false;
    }
    int64_t *tv = em_alloc((size_t)(tn + 1) * sizeof(int64_t));
    if (!tv || em_to_data(targets, tv, EM_I64, tn) != EM_OK) {
        em_free(tv);
        return false;
    }
    p->S = S;
    int64_t L = p->L = 2 * S + 1;
    p->ext = em_alloc((size_t)(N * L + 1) * sizeof(int64_t));
    p->noskip = em_alloc((size_t)(N * L + 1) * sizeof(bool));
    p->noinit = em_alloc((size_t)(N * L + 1) * sizeof(bool));
    p->idle = em_alloc((size_t)(T * N + 1) * sizeof(bool));
    p->fin = em_alloc((size_t)(N * 2 + 1) * sizeof(int64_t));
    p->fin_absent = em_alloc((size_t)(N * 2 + 1) * sizeof(bool));
    if (!p->ext || !p->noskip || !p->noinit || !p->idle || !p->fin || !p->fin_absent) {
        em_free(tv);
        return false;
    }
    int64_t off = 0;
    for (int64_t n = 0; n < N; n++) {
        const int64_t *lab = padded ? tv + n * (N > 0 ? tn / N : 0) : tv + off;
        off += p->tl[n];
        for (int64_t s = 0; s < L; s++) {
            int64_t k = s / 2, v = blank;
            if (s % 2 == 1 && k < p->tl[n]) {
                v = lab[k];
                if (v < 0 || v >= C || v == blank) {
                    em_error(EM_ERR_INDEX,
                             "%s: target label %lld (batch element %lld, position %lld) must lie "
                             "in [0, %lld) and differ from blank %lld",
                             fn, (long long)v, (long long)n, (long long)k, (long long)C,
                             (long long)blank);
                    em_free(tv);
                    return false;
                }
            }
            p->ext[n * L + s] = v;
            p->noskip[n * L + s] = !(s >= 2 && s % 2 == 1 && v != p->ext[n * L + s - 2]);
            p->noinit[n * L + s] = !(s == 0 || (s == 1 && p->tl[n] > 0));
        }
        int64_t last = 2 * p->tl[n];
        p->fin[2 * n] = last;
        p->fin[2 * n + 1] = last > 0 ? last - 1 : 0;
        p->fin_absent[2 * n] = false;
        p->fin_absent[2 * n + 1] = last == 0;
        for (int64_t t = 0; t < T; t++) p->idle[t * N + n] = t >= p->il[n];
    }
    em_free(tv);
    return true;
}

/* lp: [T, N, C] -> per-sample negative log-likelihoods [N] (inf when impossible, or 0 with
 * zero_infinity). */
static em_tensor *ctc_forward(const em_tensor *lp, const ctc_plan *p, bool zero_infinity)
{
    int64_t T = p->T, N = p->N, L = p->L;
    em_device dev = lp->storage->device;
    /* A finite stand-in for log 0 keeps every gradient finite (exp(NEG - lse) is exactly 0). */
    double neg = lp->dtype == EM_F64 ? -1e300 : -1e30;
    em_tensor *ext = em_to_device(em_from_i64(p->ext, EM_SHAPE(1, N, L)), dev);
    em_tensor *noskip =
        em_to_device(em_from_data(p->noskip, EM_BOOL, EM_SHAPE(N, L), EM_BOOL, EM_CPU), dev);
    em_tensor *noinit =
        em_to_device(em_from_data(p->noinit, EM_BOOL, EM_SHAPE(N, L), EM_BOOL, EM_CPU), dev);
    em_tensor *idle =
        em_to_device(em_from_data(p->idle, EM_BOOL, EM_SHAPE(T, N, 1), EM_BOOL, EM_CPU), dev);
    /* E[t, n, s] = lp[t, n, ext[n, s]] */
    em_tensor *idx = em_contiguous(em_expand(ext, EM_SHAPE(T, N, L)));
    em_tensor *E = em_maximum_scalar(em_gather(lp, 2, idx), neg);
    const int64_t pad1[2] = {1, 0}, pad2[2] = {2, 0};
    em_tensor *a =
        em_masked_fill(em_select(E, 0, 0), em_logical_or(noinit, em_select(idle, 0, 0)), neg);
    for (int64_t t = 1; t < T && a; t++) {
        em_tensor *s1 = em_narrow(em_pad(a, pad1, 1, EM_PAD_CONSTANT, neg), 1, 0, L);
        em_tensor *s2 = em_masked_fill(em_narrow(em_pad(a, pad2, 1, EM_PAD_CONSTANT, neg), 1, 0, L),
                                       noskip, neg);
        em_tensor *three[3] = {a, s1, s2};
        em_tensor *next =
            em_add(em_logsumexp(em_stack(three, 3, 0), EM_AXES(0), false), em_select(E, 0, t));
        a = em_where(em_select(idle, 0, t), a, next);
    }
    em_tensor *fin = em_to_device(em_from_i64(p->fin, EM_SHAPE(N, 2)), dev);
    em_tensor *absent =
        em_to_device(em_from_data(p->fin_absent, EM_BOOL, EM_SHAPE(N, 2), EM_BOOL, EM_CPU), dev);
    em_tensor *ends = em_masked_fill(em_gather(a, 1, fin), absent, neg);
    em_tensor *ll = em_logsumexp(ends, EM_AXES(1), false);
    em_tensor *impossible = em_lt_scalar(ll, neg / 2);
    return em_where(impossible, em_scalar(zero_infinity ? 0.0 : INFINITY, lp->dtype, dev),
                    em_neg(ll));
}

em_tensor *em_ctc_loss(const em_tensor *log_probs, const em_tensor *targets,
                       const em_tensor *input_lengths, const em_tensor *target_lengths,
                       em_ctc_cfg cfg)
{
    const char *fn = "em_ctc_loss";
    em_scope_begin();
    if (!nn_loss_check_float(fn, log_probs, "log_probs") ||
        !nn_loss_check_int(fn, targets, "targets") ||
        !tn_check_ptr(fn, input_lengths, "input_lengths") ||
        !tn_check_ptr(fn, target_lengths, "target_lengths") ||
        !nn_loss_check_reduction(fn, cfg.reduction, false))
        return nn_loss_finish(NULL);
    if (log_probs->dtype != EM_F64 && log_probs->dtype != EM_F32) {
        em_error(EM_ERR_DTYPE, "%s: log_probs must be f32 or f64, got %s", fn,
                 em_dtype_name(log_probs->dtype));
        return nn_loss_finish(NULL);
    }
    bool batched = log_probs->rank == 3;
    if (!batched && log_probs->rank != 2) {
        em_error(EM_ERR_SHAPE, "%s: log_probs %s must be [T, N, C] or [T, C]", fn,
                 tn_dims_str(log_probs->shape, log_probs->rank));
        return nn_loss_finish(NULL);
    }
    const em_tensor *lp = batched ? log_probs : em_unsqueeze(log_probs, 1);
    ctc_plan p = {.T = lp->shape[0], .N = lp->shape[1], .C = lp->shape[2]};
    bool padded = batched ? targets->rank == 2 : true;
    bool tshape_ok = batched
                         ? (targets->rank == 1 || (targets->rank == 2 && targets->shape[0] == p.N))
                         : targets->rank == 1;
    if (!tshape_ok) {
        em_error(EM_ERR_SHAPE,
                 "%s: targets %s must be [N, S] (padded) or 1-D (concatenated) "
                 "for log_probs %s",
                 fn, tn_dims_str(targets->shape, targets->rank),
                 tn_dims_str(log_probs->shape, log_probs->rank));
        return nn_loss_finish(NULL);
    }
    if (cfg.blank < 0 || cfg.blank >= p.C) {
        em_error(EM_ERR_INDEX, "%s: blank %lld must lie in [0, %lld)", fn, (long long)cfg.blank,
                 (long long)p.C);
        return nn_loss_finish(NULL);
    }
    em_tensor *out = NULL;
    if (plan_build(fn, &p, targets, padded, input_lengths, target_lengths, cfg.blank)) {
        em_tensor *nll = ctc_forward(lp, &p, cfg.zero_infinity);
        if (cfg.reduction == EM_REDUCTION_MEAN) {
            double *div = em_alloc((size_t)(p.N + 1) * sizeof(double));
            if (div) {
                for (int64_t n = 0; n < p.N; n++) div[n] = p.tl[n] > 0 ? (double)p.tl[n] : 1.0;
                em_tensor *d =
                    em_to_device(em_from_data(div, EM_F64, EM_SHAPE(p.N), lp->dtype, EM_CPU),
                                 lp->storage->device);
                out = em_mean(em_div(nll, d), EM_ALL, false);
            }
            em_free(div);
        } else if (cfg.reduction == EM_REDUCTION_SUM) {
            out = em_sum(nll, EM_ALL, false);
        } else {
            out = batched ? nll : em_reshape(nll, EM_SCALAR);
        }
    }
    plan_free(&p);
    return nn_loss_finish(out);
}
