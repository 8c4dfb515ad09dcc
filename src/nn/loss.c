/* Loss functions (PyTorch's formulas and reductions) written with differentiable Ember ops, so
 * em_backward reaches the inputs and, where the formula allows, the targets. CTC lives in
 * loss_ctc.c. */
#include <math.h>
#include <stdio.h>

#include "../tensor/op.h"
#include "loss_impl.h"

/* ---- shared helpers ---------------------------------------------------------------------- */

double nn_loss_opt(double v, double def)
{
    if (v != 0) return v;
    return signbit(v) ? 0.0 : def;
}

bool nn_loss_check_float(const char *fn, const em_tensor *t, const char *what)
{
    if (!tn_check_ptr(fn, t, what)) return false;
    if (!em_dtype_is_float(t->dtype)) {
        em_error(EM_ERR_DTYPE, "%s: `%s` must be a float tensor, got %s", fn, what,
                 em_dtype_name(t->dtype));
        return false;
    }
    return true;
}

bool nn_loss_check_int(const char *fn, const em_tensor *t, const char *what)
{
    if (!tn_check_ptr(fn, t, what)) return false;
    if (!em_dtype_is_int(t->dtype)) {
        em_error(EM_ERR_DTYPE, "%s: `%s` must be an integer tensor, got %s", fn, what,
                 em_dtype_name(t->dtype));
        return false;
    }
    return true;
}

bool nn_loss_check_reduction(const char *fn, em_reduction r, bool batchmean_ok)
{
    if ((int)r < 0 || r > EM_REDUCTION_BATCHMEAN ||
        (r == EM_REDUCTION_BATCHMEAN && !batchmean_ok)) {
        em_error(EM_ERR_INVALID_ARG, "%s: reduction %d is not valid here (mean, sum or none%s)", fn,
                 (int)r, batchmean_ok ? " or batchmean" : "");
        return false;
    }
    return true;
}

static bool check_same_shape(const char *fn, const em_tensor *a, const char *an, const em_tensor *b,
                             const char *bn)
{
    if (a->rank == b->rank) {
        bool same = true;
        for (int d = 0; d < a->rank; d++) same = same && a->shape[d] == b->shape[d];
        if (same) return true;
    }
    em_error(EM_ERR_SHAPE, "%s: `%s` %s and `%s` %s must have the same shape", fn, an,
             tn_dims_str(a->shape, a->rank), bn, tn_dims_str(b->shape, b->rank));
    return false;
}

static bool check_broadcast(const char *fn, const em_tensor *a, const char *an, const em_tensor *b,
                            const char *bn)
{
    int ra = a->rank, rb = b->rank, r = ra > rb ? ra : rb;
    for (int i = 1; i <= r; i++) {
        int64_t da = i <= ra ? a->shape[ra - i] : 1, db = i <= rb ? b->shape[rb - i] : 1;
        if (da != db && da != 1 && db != 1) {
            em_error(EM_ERR_SHAPE, "%s: `%s` %s and `%s` %s do not broadcast together", fn, an,
                     tn_dims_str(a->shape, a->rank), bn, tn_dims_str(b->shape, b->rank));
            return false;
        }
    }
    return true;
}

bool nn_loss_all(const em_tensor *mask)
{
    em_tensor *a = em_all(mask, EM_ALL, false);
    bool ok = a && em_item_f64(a) != 0;
    em_release(a);
    return ok;
}

em_tensor *nn_loss_reduce(em_tensor *loss, em_reduction r)
{
    switch (r) {
    case EM_REDUCTION_MEAN: return em_mean(loss, EM_ALL, false);
    case EM_REDUCTION_SUM: return em_sum(loss, EM_ALL, false);
    case EM_REDUCTION_BATCHMEAN:
        if (loss && loss->rank > 0)
            return em_div_scalar(em_sum(loss, EM_ALL, false), (double)loss->shape[0]);
        return em_sum(loss, EM_ALL, false);
    default: return loss ? tn_share(loss) : NULL;
    }
}

em_tensor *nn_loss_finish(em_tensor *r)
{
    if (r && tn_scope_failed()) r = NULL;
    if (r) em_keep(r);
    em_scope_end();
    return r;
}

/* A 0-D constant of t's dtype and device. */
static em_tensor *konst(const em_tensor *t, double v)
{
    return em_scalar(v, t->dtype, t->storage->device);
}

/* ---- class-index losses: cross-entropy and NLL -------------------------------------------- */

static int64_t ignore_of(em_ce_cfg cfg)
{
    return (cfg.ignore_index != 0 || cfg.ignore_zero) ? cfg.ignore_index : -100;
}

/* Cross-entropy against class probabilities: target shaped like the logits. */
static em_tensor *ce_prob(const char *fn, const em_tensor *logits, const em_tensor *target,
                          const em_tensor *wv, em_ce_cfg cfg, int cdim, int64_t C)
{
    if (!check_same_shape(fn, logits, "logits", target, "target")) return NULL;
    em_tensor *lp = em_log_softmax(logits, cdim);
    em_tensor *t = (em_tensor *)target;
    double ls = cfg.label_smoothing;
    if (ls > 0) t = em_add_scalar(em_mul_scalar(t, 1 - ls), ls / (double)C);
    em_tensor *prod = em_mul(lp, t);
    if (wv) prod = em_mul(prod, wv);
    switch (cfg.reduction) {
    case EM_REDUCTION_NONE: return em_neg(em_sum(prod, EM_AXES(cdim), false));
    case EM_REDUCTION_SUM: return em_neg(em_sum(prod, EM_ALL, false));
    default: {
        int64_t n = tn_numel(logits) / (C > 0 ? C : 1);
        em_tensor *s = em_neg(em_sum(prod, EM_ALL, false));
        return n == 0 ? em_mul_scalar(s, NAN) : em_div_scalar(s, (double)n);
    }
    }
}

/* The eager check of class-index targets, in one read back: the min and max of t64, and of
 * tsafe (t64 with ignored targets set to 0). Fails with an EM_ERR_INDEX naming the first target
 * that is neither in [0, C) nor ignore_index. *plain: every target lies in [0, C) and none is
 * ignored (then the loss needs neither the masks nor the per-sample weights). */
static bool check_targets(const char *fn, const em_tensor *t64, const em_tensor *tsafe, int64_t C,
                          int64_t ignore, bool *plain)
{
    *plain = false;
    if (tn_numel(t64) == 0) return true;
    em_tensor *mm[4] = {em_min(t64, EM_ALL, false), em_max(t64, EM_ALL, false),
                        em_min(tsafe, EM_ALL, false), em_max(tsafe, EM_ALL, false)};
    em_tensor *all = em_stack(mm, 4, 0);
    int64_t v[4];
    if (!all || em_to_data(all, v, EM_I64, 4) != EM_OK) return false;
    if (v[2] < 0 || v[3] >= C) { /* the first target out of range that is not ignored */
        em_tensor *bad = em_masked_select(
            tsafe, em_logical_or(em_lt_scalar(tsafe, 0), em_ge_scalar(tsafe, (double)C)));
        /* read as i64: a double would not hold every target exactly (nor convert back) */
        em_tensor *first = bad && tn_numel(bad) > 0 ? em_narrow(bad, 0, 0, 1) : NULL;
        int64_t b = first ? em_item_i64(first) : 0;
        em_release(first);
        em_error(EM_ERR_INDEX,
                 "%s: target %lld is out of range for %lld classes (ignore_index %lld)", fn,
                 (long long)b, (long long)C, (long long)ignore);
        return false;
    }
    *plain = v[0] >= 0 && v[1] < C && (ignore < v[0] || ignore > v[1]);
    return true;
}

static em_tensor *class_loss(const char *fn, const em_tensor *input, const em_tensor *target,
                             em_ce_cfg cfg, bool from_logits)
{
    if (!nn_loss_check_float(fn, input, from_logits ? "logits" : "log_probs") ||
        !tn_check_ptr(fn, target, "target") || !nn_loss_check_reduction(fn, cfg.reduction, false))
        return NULL;
    if (input->rank < 1) {
        em_error(EM_ERR_SHAPE, "%s: input must be [C], [N, C] or [N, C, d1...], got []", fn);
        return NULL;
    }
    double ls = cfg.label_smoothing;
    if (!(ls >= 0 && ls <= 1) || (!from_logits && ls != 0)) {
        em_error(EM_ERR_INVALID_ARG, "%s: label_smoothing %g must lie in [0, 1]%s", fn, ls,
                 from_logits ? "" : " (and only cross-entropy takes it)");
        return NULL;
    }
    int cdim = input->rank == 1 ? 0 : 1;
    int64_t C = input->shape[cdim];
    em_dtype dt = input->dtype;
    const em_tensor *weight = cfg.weight;
    if (weight) {
        if (!nn_loss_check_float(fn, weight, "weight")) return NULL;
        if (weight->rank != 1 || weight->shape[0] != C) {
            em_error(EM_ERR_SHAPE, "%s: weight %s must be [%lld] (one per class)", fn,
                     tn_dims_str(weight->shape, weight->rank), (long long)C);
            return NULL;
        }
        if (weight->dtype != dt) weight = em_cast(weight, dt);
    }
    /* weight viewed along the class dim: [1, C, 1, ...] */
    em_tensor *wv = NULL;
    if (weight) {
        em_shape ws = {.rank = input->rank};
        for (int d = 0; d < input->rank; d++) ws.dims[d] = d == cdim ? C : 1;
        wv = em_reshape(weight, ws);
    }
    if (em_dtype_is_float(target->dtype)) {
        if (!from_logits) {
            em_error(EM_ERR_DTYPE, "%s: target must hold class indices (an integer dtype), got %s",
                     fn, em_dtype_name(target->dtype));
            return NULL;
        }
        return ce_prob(fn, input, target, wv, cfg, cdim, C);
    }
    if (!em_dtype_is_int(target->dtype)) {
        em_error(EM_ERR_DTYPE,
                 "%s: target must be class indices of an integer dtype or float probabilities, "
                 "got %s",
                 fn, em_dtype_name(target->dtype));
        return NULL;
    }
    /* Class indices: target is input's shape without the class dim. */
    bool shape_ok = target->rank == input->rank - 1;
    for (int d = 0, e = 0; shape_ok && d < input->rank; d++) {
        if (d == cdim) continue;
        shape_ok = target->shape[e++] == input->shape[d];
    }
    if (!shape_ok) {
        em_error(EM_ERR_SHAPE,
                 "%s: target %s does not fit input %s (expected the input's shape "
                 "without the class dim %d)",
                 fn, tn_dims_str(target->shape, target->rank),
                 tn_dims_str(input->shape, input->rank), cdim);
        return NULL;
    }
    bool unbatched = input->rank == 1;
    const em_tensor *x = unbatched ? em_unsqueeze(input, 0) : input;
    em_tensor *t64 = em_cast(target, EM_I64);
    if (unbatched) t64 = em_reshape(t64, EM_SHAPE(1));
    int64_t ignore = ignore_of(cfg);
    em_device dev = input->storage->device;
    em_tensor *ign = em_eq_scalar(t64, (double)ignore);
    em_tensor *tsafe = em_masked_fill(t64, ign, 0);
    if (!tsafe) return NULL;
    /* In a graph capture the targets cannot be checked (a read back): there a target out of
     * range gathers NaN (the index kernels' guard in captures), so its sample's loss is NaN
     * rather than an error. */
    bool plain = false;
    if (!em_graph_capturing(dev) && !check_targets(fn, t64, tsafe, C, ignore, &plain)) return NULL;
    /* Without weights and label smoothing, where every target is a class and none is ignored:
     * -mean (or -sum) of the picked log-probabilities, two ops on top of the pick where the
     * general form below takes a dozen on [N] vectors, each a launch on a GPU. */
    bool pick = from_logits && ls == 0;
    if (plain && !weight && ls == 0) {
        em_tensor *picked =
            pick ? tn_log_softmax_gather(x, 1, t64)
                 : em_squeeze(tn_gather_inrange((em_tensor *)x, 1, em_unsqueeze(t64, 1)),
                              EM_AXES(1));
        if (cfg.reduction == EM_REDUCTION_NONE) {
            em_tensor *out = em_neg(picked);
            return unbatched ? em_reshape(out, EM_SCALAR) : out;
        }
        return em_neg(cfg.reduction == EM_REDUCTION_SUM ? em_sum(picked, EM_ALL, false)
                                                        : em_mean(picked, EM_ALL, false));
    }
    /* Without label smoothing, cross entropy needs log_softmax only at the targets (`pick`): one
     * record reads the logits once, and its gradient is one more read and one write. */
    em_tensor *lp = pick ? NULL : from_logits ? em_log_softmax(x, 1) : (em_tensor *)x;
    /* in range: checked above (eagerly), or the kernels' guard (in a capture) */
    em_tensor *picked =
        pick ? tn_log_softmax_gather(x, 1, tsafe)
             : em_squeeze(tn_gather_inrange(lp, 1, em_unsqueeze(tsafe, 1)), EM_AXES(1));
    /* w_t: the weight of each sample's class, 0 where ignored */
    em_tensor *wt = weight ? em_reshape(em_index_select(weight, 0, em_flatten(tsafe, 0, -1)),
                                        em_tensor_shape(t64))
                           : em_ones(em_tensor_shape(t64), dt, dev);
    wt = em_masked_fill(wt, ign, 0);
    em_tensor *nll = em_masked_fill(em_neg(em_mul(picked, wt)), ign, 0);
    em_tensor *smooth = NULL;
    if (ls > 0) {
        em_tensor *s = wv ? em_mul(lp, wv) : lp;
        smooth = em_masked_fill(em_neg(em_sum(s, EM_AXES(1), false)), ign, 0);
    }
    em_tensor *out;
    if (cfg.reduction == EM_REDUCTION_NONE) {
        out = nll;
        if (smooth) out = em_add(em_mul_scalar(nll, 1 - ls), em_mul_scalar(smooth, ls / (double)C));
        if (unbatched) out = em_reshape(out, EM_SCALAR);
        return out;
    }
    out = em_sum(nll, EM_ALL, false);
    em_tensor *den = cfg.reduction == EM_REDUCTION_MEAN ? em_sum(wt, EM_ALL, false) : NULL;
    if (den) out = em_div(out, den);
    if (smooth) {
        em_tensor *sm = em_sum(smooth, EM_ALL, false);
        if (den) sm = em_div(sm, den);
        out = em_add(em_mul_scalar(out, 1 - ls), em_mul_scalar(sm, ls / (double)C));
    }
    return out;
}

em_tensor *em_cross_entropy(const em_tensor *logits, const em_tensor *target, em_ce_cfg cfg)
{
    em_scope_begin();
    return nn_loss_finish(class_loss("em_cross_entropy", logits, target, cfg, true));
}

em_tensor *em_nll_loss(const em_tensor *log_probs, const em_tensor *target, em_ce_cfg cfg)
{
    em_scope_begin();
    return nn_loss_finish(class_loss("em_nll_loss", log_probs, target, cfg, false));
}

/* ---- element-wise regression losses ------------------------------------------------------ */

static bool check_pair(const char *fn, const em_tensor *input, const em_tensor *target,
                       em_reduction r)
{
    return nn_loss_check_float(fn, input, "input") && nn_loss_check_float(fn, target, "target") &&
           nn_loss_check_reduction(fn, r, false) &&
           check_broadcast(fn, input, "input", target, "target");
}

em_tensor *em_mse_loss(const em_tensor *input, const em_tensor *target, em_reduction r)
{
    const char *fn = "em_mse_loss";
    em_scope_begin();
    if (!check_pair(fn, input, target, r)) return nn_loss_finish(NULL);
    return nn_loss_finish(nn_loss_reduce(em_square(em_sub(input, target)), r));
}

em_tensor *em_l1_loss(const em_tensor *input, const em_tensor *target, em_reduction r)
{
    const char *fn = "em_l1_loss";
    em_scope_begin();
    if (!check_pair(fn, input, target, r)) return nn_loss_finish(NULL);
    return nn_loss_finish(nn_loss_reduce(em_abs(em_sub(input, target)), r));
}

/* Quadratic inside |d| < k, linear outside: scale * 0.5 d^2 / k vs scale * (|d| - 0.5 k). */
static em_tensor *quad_lin(const em_tensor *input, const em_tensor *target, double k, double qdiv,
                           double lin_scale)
{
    em_tensor *d = em_sub(input, target);
    em_tensor *z = em_abs(d);
    em_tensor *quad = em_mul_scalar(em_square(d), 0.5 / qdiv);
    em_tensor *lin = em_mul_scalar(em_sub_scalar(z, 0.5 * k), lin_scale);
    return em_where(em_lt_scalar(z, k), quad, lin);
}

em_tensor *em_smooth_l1_loss(const em_tensor *input, const em_tensor *target, em_reduction r,
                             double beta)
{
    const char *fn = "em_smooth_l1_loss";
    em_scope_begin();
    if (!check_pair(fn, input, target, r)) return nn_loss_finish(NULL);
    beta = nn_loss_opt(beta, 1.0);
    if (!(beta >= 0)) {
        em_error(EM_ERR_INVALID_ARG, "%s: beta %g must be non-negative", fn, beta);
        return nn_loss_finish(NULL);
    }
    em_tensor *l =
        beta == 0 ? em_abs(em_sub(input, target)) : quad_lin(input, target, beta, beta, 1);
    return nn_loss_finish(nn_loss_reduce(l, r));
}

em_tensor *em_huber_loss(const em_tensor *input, const em_tensor *target, em_reduction r,
                         double delta)
{
    const char *fn = "em_huber_loss";
    em_scope_begin();
    if (!check_pair(fn, input, target, r)) return nn_loss_finish(NULL);
    delta = nn_loss_opt(delta, 1.0);
    if (!(delta > 0)) {
        em_error(EM_ERR_INVALID_ARG, "%s: delta %g must be positive", fn, delta);
        return nn_loss_finish(NULL);
    }
    return nn_loss_finish(nn_loss_reduce(quad_lin(input, target, delta, 1, delta), r));
}

/* ---- binary cross-entropy ---------------------------------------------------------------- */

static bool check_bce(const char *fn, const em_tensor *input, const em_tensor *target,
                      em_bce_cfg cfg, bool logits)
{
    if (!nn_loss_check_float(fn, input, logits ? "logits" : "input") ||
        !nn_loss_check_float(fn, target, "target") ||
        !nn_loss_check_reduction(fn, cfg.reduction, false) ||
        !check_same_shape(fn, input, logits ? "logits" : "input", target, "target"))
        return false;
    if (cfg.weight && (!nn_loss_check_float(fn, cfg.weight, "weight") ||
                       !check_broadcast(fn, input, "input", cfg.weight, "weight")))
        return false;
    if (cfg.pos_weight) {
        if (!logits) {
            em_error(EM_ERR_INVALID_ARG, "%s: pos_weight is only for em_bce_with_logits", fn);
            return false;
        }
        if (!nn_loss_check_float(fn, cfg.pos_weight, "pos_weight") ||
            !check_broadcast(fn, target, "target", cfg.pos_weight, "pos_weight"))
            return false;
    }
    return true;
}

em_tensor *em_bce_loss(const em_tensor *input, const em_tensor *target, em_bce_cfg cfg)
{
    const char *fn = "em_bce_loss";
    em_scope_begin();
    if (!check_bce(fn, input, target, cfg, false)) return nn_loss_finish(NULL);
    if (!nn_loss_all(em_logical_and(em_ge_scalar(input, 0), em_le_scalar(input, 1)))) {
        if (!em_failed())
            em_error(EM_ERR_INVALID_ARG, "%s: every input must lie in [0, 1] (probabilities)", fn);
        return nn_loss_finish(NULL);
    }
    /* (t - 1) * max(log(1 - x), -100) - t * max(log x, -100) */
    em_tensor *log_x = em_clamp(em_log(input), -100, NAN);
    em_tensor *log_1mx = em_clamp(em_log1p(em_neg(input)), -100, NAN);
    em_tensor *l = em_sub(em_mul(em_sub_scalar(target, 1), log_1mx), em_mul(target, log_x));
    if (cfg.weight) l = em_mul(l, cfg.weight);
    return nn_loss_finish(nn_loss_reduce(l, cfg.reduction));
}

em_tensor *em_bce_with_logits(const em_tensor *logits, const em_tensor *target, em_bce_cfg cfg)
{
    const char *fn = "em_bce_with_logits";
    em_scope_begin();
    if (!check_bce(fn, logits, target, cfg, true)) return nn_loss_finish(NULL);
    /* (1 - t) x + lw * log(1 + exp(-x)), lw = 1 + (pos_weight - 1) t; log(1 + exp(-x)) is
     * -log_sigmoid(x), stable for any x. */
    em_tensor *sp = em_neg(em_log_sigmoid(logits));
    if (cfg.pos_weight)
        sp = em_mul(em_add_scalar(em_mul(em_sub_scalar(cfg.pos_weight, 1), target), 1), sp);
    em_tensor *l = em_add(em_mul(em_rsub_scalar(target, 1), logits), sp);
    if (cfg.weight) l = em_mul(l, cfg.weight);
    return nn_loss_finish(nn_loss_reduce(l, cfg.reduction));
}

/* ---- KL divergence ----------------------------------------------------------------------- */

em_tensor *em_kl_div(const em_tensor *input, const em_tensor *target, em_reduction r,
                     bool log_target)
{
    const char *fn = "em_kl_div";
    em_scope_begin();
    if (!nn_loss_check_float(fn, input, "input") || !nn_loss_check_float(fn, target, "target") ||
        !nn_loss_check_reduction(fn, r, true) ||
        !check_broadcast(fn, input, "input", target, "target"))
        return nn_loss_finish(NULL);
    em_tensor *l;
    if (log_target) {
        l = em_mul(em_exp(target), em_sub(target, input));
    } else {
        /* xlogy(t, t) - t * x, with 0 log 0 = 0 (log of 1 there keeps gradients finite) */
        em_tensor *safe = em_masked_fill(target, em_eq_scalar(target, 0), 1);
        l = em_sub(em_mul(target, em_log(safe)), em_mul(target, input));
    }
    return nn_loss_finish(nn_loss_reduce(l, r));
}

/* ---- pairwise and triplet losses --------------------------------------------------------- */

em_tensor *em_cosine_embedding_loss(const em_tensor *x1, const em_tensor *x2, const em_tensor *y,
                                    em_reduction r, double margin)
{
    const char *fn = "em_cosine_embedding_loss";
    em_scope_begin();
    if (!nn_loss_check_float(fn, x1, "x1") || !nn_loss_check_float(fn, x2, "x2") ||
        !tn_check_ptr(fn, y, "y") || !nn_loss_check_reduction(fn, r, false) ||
        !check_same_shape(fn, x1, "x1", x2, "x2"))
        return nn_loss_finish(NULL);
    if (x1->rank < 1 || x1->rank > 2 || y->rank != x1->rank - 1 ||
        (y->rank == 1 && y->shape[0] != x1->shape[0])) {
        em_error(EM_ERR_SHAPE,
                 "%s: expected x1, x2 [N, D] with y [N] (or [D] with []), got %s "
                 "and y %s",
                 fn, tn_dims_str(x1->shape, x1->rank), tn_dims_str(y->shape, y->rank));
        return nn_loss_finish(NULL);
    }
    int d = x1->rank - 1;
    const double eps = 1e-12; /* PyTorch's EPSILON */
    em_tensor *prod = em_sum(em_mul(x1, x2), EM_AXES(d), false);
    em_tensor *m1 = em_add_scalar(em_sum(em_mul(x1, x1), EM_AXES(d), false), eps);
    em_tensor *m2 = em_add_scalar(em_sum(em_mul(x2, x2), EM_AXES(d), false), eps);
    em_tensor *cosv = em_div(prod, em_sqrt(em_mul(m1, m2)));
    em_tensor *zero = konst(x1, 0);
    em_tensor *pos = em_where(em_eq_scalar(y, 1), em_rsub_scalar(cosv, 1), zero);
    em_tensor *neg =
        em_where(em_eq_scalar(y, -1), em_clamp(em_sub_scalar(cosv, margin), 0, NAN), zero);
    return nn_loss_finish(nn_loss_reduce(em_add(pos, neg), r));
}

em_tensor *em_margin_ranking_loss(const em_tensor *x1, const em_tensor *x2, const em_tensor *y,
                                  em_reduction r, double margin)
{
    const char *fn = "em_margin_ranking_loss";
    em_scope_begin();
    if (!nn_loss_check_float(fn, x1, "x1") || !nn_loss_check_float(fn, x2, "x2") ||
        !tn_check_ptr(fn, y, "y") || !nn_loss_check_reduction(fn, r, false) ||
        !check_broadcast(fn, x1, "x1", x2, "x2") || !check_broadcast(fn, x1, "x1", y, "y") ||
        !check_broadcast(fn, x2, "x2", y, "y"))
        return nn_loss_finish(NULL);
    if (x1->rank != x2->rank || x1->rank != y->rank) {
        em_error(EM_ERR_SHAPE, "%s: x1 %s, x2 %s and y %s must have the same rank", fn,
                 tn_dims_str(x1->shape, x1->rank), tn_dims_str(x2->shape, x2->rank),
                 tn_dims_str(y->shape, y->rank));
        return nn_loss_finish(NULL);
    }
    em_tensor *yf = em_dtype_is_float(y->dtype) ? (em_tensor *)y : em_cast(y, x1->dtype);
    em_tensor *l = em_add_scalar(em_neg(em_mul(yf, em_sub(x1, x2))), margin);
    return nn_loss_finish(nn_loss_reduce(em_clamp(l, 0, NAN), r));
}

/* ||a - b + eps||_p over the last dim (torch.pairwise_distance). */
static em_tensor *pdist(const em_tensor *a, const em_tensor *b, double p, double eps)
{
    return em_norm(em_add_scalar(em_sub(a, b), eps), p, EM_AXES(-1), false);
}

em_tensor *em_triplet_margin_loss(const em_tensor *anchor, const em_tensor *positive,
                                  const em_tensor *negative, em_triplet_cfg cfg)
{
    const char *fn = "em_triplet_margin_loss";
    em_scope_begin();
    if (!nn_loss_check_float(fn, anchor, "anchor") ||
        !nn_loss_check_float(fn, positive, "positive") ||
        !nn_loss_check_float(fn, negative, "negative") ||
        !nn_loss_check_reduction(fn, cfg.reduction, false))
        return nn_loss_finish(NULL);
    if (anchor->rank < 1 || anchor->rank > 2 || positive->rank != anchor->rank ||
        negative->rank != anchor->rank ||
        !check_broadcast(fn, anchor, "anchor", positive, "positive") ||
        !check_broadcast(fn, anchor, "anchor", negative, "negative")) {
        if (!em_failed())
            em_error(EM_ERR_SHAPE,
                     "%s: anchor %s, positive %s and negative %s must all be [N, D] "
                     "or [D]",
                     fn, tn_dims_str(anchor->shape, anchor->rank),
                     tn_dims_str(positive->shape, positive->rank),
                     tn_dims_str(negative->shape, negative->rank));
        return nn_loss_finish(NULL);
    }
    double margin = nn_loss_opt(cfg.margin, 1.0), p = nn_loss_opt(cfg.p, 2.0),
           eps = nn_loss_opt(cfg.eps, 1e-6);
    if (!(margin >= 0) || !(p > 0)) {
        em_error(EM_ERR_INVALID_ARG, "%s: margin %g must be >= 0 and p %g > 0", fn, margin, p);
        return nn_loss_finish(NULL);
    }
    em_tensor *dp = pdist(anchor, positive, p, eps);
    em_tensor *dn = pdist(anchor, negative, p, eps);
    if (cfg.swap) dn = em_minimum(dn, pdist(positive, negative, p, eps));
    em_tensor *l = em_clamp(em_add_scalar(em_sub(dp, dn), margin), 0, NAN);
    return nn_loss_finish(nn_loss_reduce(l, cfg.reduction));
}

/* ---- likelihood losses ------------------------------------------------------------------- */

em_tensor *em_poisson_nll_loss(const em_tensor *input, const em_tensor *target, em_poisson_cfg cfg)
{
    const char *fn = "em_poisson_nll_loss";
    em_scope_begin();
    if (!check_pair(fn, input, target, cfg.reduction)) return nn_loss_finish(NULL);
    double eps = nn_loss_opt(cfg.eps, 1e-8);
    em_tensor *l;
    if (!cfg.no_log_input)
        l = em_sub(em_exp(input), em_mul(target, input));
    else
        l = em_sub(input, em_mul(target, em_log(em_add_scalar(input, eps))));
    if (cfg.full) {
        /* t log t - t + 0.5 log(2 pi t) for t > 1; the masked log sees 2 there */
        em_tensor *small = em_le_scalar(target, 1);
        em_tensor *ts = em_masked_fill(target, small, 2);
        em_tensor *st = em_add(em_sub(em_mul(ts, em_log(ts)), ts),
                               em_mul_scalar(em_log(em_mul_scalar(ts, 2 * M_PI)), 0.5));
        l = em_add(l, em_masked_fill(st, small, 0));
    }
    return nn_loss_finish(nn_loss_reduce(l, cfg.reduction));
}

em_tensor *em_gaussian_nll_loss(const em_tensor *input, const em_tensor *target,
                                const em_tensor *var, em_gaussian_cfg cfg)
{
    const char *fn = "em_gaussian_nll_loss";
    em_scope_begin();
    if (!check_pair(fn, input, target, cfg.reduction) || !nn_loss_check_float(fn, var, "var"))
        return nn_loss_finish(NULL);
    const em_tensor *v = var;
    bool same = var->rank == input->rank;
    for (int d = 0; same && d < input->rank; d++) same = var->shape[d] == input->shape[d];
    if (!same) {
        bool short_by_one = input->rank >= 1 && var->rank == input->rank - 1;
        for (int d = 0; short_by_one && d < var->rank; d++)
            short_by_one = var->shape[d] == input->shape[d];
        bool last_one =
            input->rank >= 1 && var->rank == input->rank && var->shape[var->rank - 1] == 1;
        for (int d = 0; last_one && d < var->rank - 1; d++)
            last_one = var->shape[d] == input->shape[d];
        if (short_by_one) {
            v = em_unsqueeze(var, -1);
        } else if (!last_one) {
            em_error(EM_ERR_SHAPE,
                     "%s: var %s does not fit input %s (same shape, the shape "
                     "without the last dim, or a last dim of 1)",
                     fn, tn_dims_str(var->shape, var->rank),
                     tn_dims_str(input->shape, input->rank));
            return nn_loss_finish(NULL);
        }
    }
    if (!nn_loss_all(em_ge_scalar(var, 0))) {
        if (!em_failed()) em_error(EM_ERR_INVALID_ARG, "%s: var has negative entries", fn);
        return nn_loss_finish(NULL);
    }
    double eps = nn_loss_opt(cfg.eps, 1e-6);
    /* PyTorch clamps a clone under no_grad: clamped values, identity gradient. */
    em_no_grad_begin();
    em_tensor *lift = em_sub(em_clamp(v, eps, NAN), v);
    em_no_grad_end();
    em_tensor *vc = em_add(v, lift);
    em_tensor *l =
        em_mul_scalar(em_add(em_log(vc), em_div(em_square(em_sub(input, target)), vc)), 0.5);
    if (cfg.full) l = em_add_scalar(l, 0.5 * log(2 * M_PI));
    return nn_loss_finish(nn_loss_reduce(l, cfg.reduction));
}
