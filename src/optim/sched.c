/* Learning-rate schedulers with PyTorch 1.13's formulas (torch/optim/lr_scheduler.py), in
 * closed form of the step count except where PyTorch keeps state (warm restarts, plateau). A
 * scheduler sets the optimizer's base learning rate on creation (PyTorch's initial step) and
 * on every em_sched_step. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optim_impl.h"

typedef enum sched_kind {
    S_CONSTANT,
    S_STEP,
    S_MULTISTEP,
    S_EXPONENTIAL,
    S_LINEAR,
    S_COSINE,
    S_RESTARTS,
    S_WARMUP,
    S_NOAM,
    S_ONECYCLE,
    S_PLATEAU,
} sched_kind;

struct em_sched {
    sched_kind kind;
    em_optim *o;
    double base; /* PyTorch's initial_lr */
    int64_t t;   /* last_epoch */
    double lr;
    double a, b, c; /* factors per kind */
    int64_t n1, n2; /* sizes per kind */
    double p1_end;  /* one-cycle: last step of the warm-up phase */
    int64_t *milestones;
    int n_milestones;
    em_sched *after;
    /* warm restarts */
    int64_t t_cur, t_i;
    /* plateau */
    bool maximize;
    double best;
    int64_t bad, cooldown_left;
};

static double dflt(double v, double d)
{
    if (v == 0) return signbit(v) ? 0.0 : d;
    return v;
}

static em_sched *sched_new(const char *fn, sched_kind kind, em_optim *o)
{
    if (!o) {
        em_error(EM_ERR_INVALID_ARG, "%s: optimizer is NULL", fn);
        return NULL;
    }
    em_sched *s = em_alloc(sizeof *s);
    if (!s) return NULL;
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->o = o;
    if (isnan(o->initial_lr)) o->initial_lr = o->lr;
    s->base = o->initial_lr;
    return s;
}

static void *bad(const char *fn, const char *what, double v)
{
    em_error(EM_ERR_INVALID_ARG, "%s: invalid %s %g", fn, what, v);
    return NULL;
}

/* Learning rate at step t for the closed-form kinds. */
static double closed_form(const em_sched *s, int64_t t)
{
    double base = s->base, td = (double)t;
    switch (s->kind) {
    case S_CONSTANT: return base * (t < s->n1 ? s->a : 1.0);
    case S_STEP: return base * pow(s->a, (double)(t / s->n1));
    case S_MULTISTEP: {
        int k = 0;
        while (k < s->n_milestones && s->milestones[k] <= t) k++;
        return base * pow(s->a, k);
    }
    case S_EXPONENTIAL: return base * pow(s->a, td);
    case S_LINEAR:
        return base * (s->a + (s->b - s->a) * (double)(t < s->n1 ? t : s->n1) / (double)s->n1);
    case S_COSINE: return s->a + (base - s->a) * (1 + cos(M_PI * td / (double)s->n1)) / 2;
    case S_NOAM: {
        double st = td + 1;
        return base * pow((double)s->n1, -0.5) * fmin(pow(st, -0.5), st * pow((double)s->n2, -1.5));
    }
    case S_ONECYCLE: {
        /* phases: initial -> max until pct*total - 1, then max -> min until total - 1 */
        double max_lr = s->a, initial = max_lr / s->b, min_lr = initial / s->c;
        double p1_end = s->p1_end;
        double start, end, pct;
        if (td <= p1_end) {
            start = initial;
            end = max_lr;
            pct = td / p1_end;
        } else {
            start = max_lr;
            end = min_lr;
            pct = (td - p1_end) / ((double)s->n1 - 1 - p1_end);
        }
        return end + (start - end) / 2.0 * (cos(M_PI * pct) + 1);
    }
    default: return s->lr;
    }
}

/* Restores step 0 (PyTorch's step(0) in SequentialLR) and returns the learning rate there. */
static double reset(em_sched *s)
{
    s->t = 0;
    switch (s->kind) {
    case S_RESTARTS:
        s->t_cur = 0;
        s->t_i = s->n1;
        return s->a + (s->base - s->a) * (1 + cos(M_PI * 0)) / 2;
    case S_WARMUP: return s->base * s->a;
    case S_PLATEAU:
        s->best = s->maximize ? -INFINITY : INFINITY;
        s->bad = s->cooldown_left = 0;
        return s->lr;
    default: return closed_form(s, 0);
    }
}

static double advance(em_sched *s, double metric)
{
    s->t++;
    switch (s->kind) {
    case S_RESTARTS:
        s->t_cur++;
        if (s->t_cur >= s->t_i) {
            s->t_cur -= s->t_i;
            /* the period grows t_mult times, saturating (t_mult is held as a double) */
            int64_t mult = s->b >= 0x1p62 ? INT64_MAX : s->b > 0 ? (int64_t)s->b : 1;
            s->t_i = s->t_i > INT64_MAX / mult ? INT64_MAX : s->t_i * mult;
        }
        return s->a + (s->base - s->a) * (1 + cos(M_PI * (double)s->t_cur / (double)s->t_i)) / 2;
    case S_WARMUP:
        if (s->t < s->n1) return s->base * (s->a + (1 - s->a) * (double)s->t / (double)s->n1);
        if (!s->after) return s->base;
        if (s->t == s->n1) return s->after->lr = reset(s->after);
        return s->after->lr = advance(s->after, metric);
    case S_PLATEAU: {
        bool better = s->maximize ? metric > s->best * (s->c + 1) : metric < s->best * (1 - s->c);
        if (better) {
            s->best = metric;
            s->bad = 0;
        } else {
            s->bad++;
        }
        if (s->cooldown_left > 0) {
            s->cooldown_left--;
            s->bad = 0;
        }
        if (s->bad > s->n1) {
            double nl = fmax(s->lr * s->a, s->b);
            if (s->lr - nl > 1e-8) s->lr = nl;
            s->cooldown_left = s->n2;
            s->bad = 0;
        }
        return s->lr;
    }
    default: return closed_form(s, s->t);
    }
}

static em_sched *start(em_sched *s)
{
    s->lr = reset(s);
    em_optim_set_lr(s->o, s->lr);
    return s;
}

double em_sched_step(em_sched *s, double metric)
{
    if (!s) {
        em_error(EM_ERR_INVALID_ARG, "em_sched_step: scheduler is NULL");
        return NAN;
    }
    if (s->kind == S_ONECYCLE && s->t + 1 > s->n1) {
        em_error(EM_ERR_STATE, "em_sched_step: one-cycle stepped %lld times, total_steps is %lld",
                 (long long)(s->t + 1), (long long)s->n1);
        return NAN;
    }
    s->lr = advance(s, metric);
    em_optim_set_lr(s->o, s->lr);
    return s->lr;
}

double em_sched_lr(const em_sched *s)
{
    return s ? s->lr : NAN;
}

void em_sched_free(em_sched *s)
{
    if (!s) return;
    em_sched_free(s->after);
    free(s->milestones);
    em_free(s);
}

/* ---- constructors ------------------------------------------------------------------------ */

em_sched *em_sched_constant_new(em_optim *o, double factor, int64_t total_iters)
{
    const char *fn = "em_sched_constant_new";
    factor = dflt(factor, 1.0 / 3);
    if (total_iters == 0) total_iters = 5;
    if (!(factor >= 0 && factor <= 1)) return bad(fn, "factor", factor);
    if (total_iters < 0) return bad(fn, "total_iters", (double)total_iters);
    em_sched *s = sched_new(fn, S_CONSTANT, o);
    if (!s) return NULL;
    s->a = factor;
    s->n1 = total_iters;
    return start(s);
}

em_sched *em_sched_step_new(em_optim *o, int64_t step_size, double gamma)
{
    const char *fn = "em_sched_step_new";
    gamma = dflt(gamma, 0.1);
    if (step_size <= 0) return bad(fn, "step_size", (double)step_size);
    if (!(gamma >= 0)) return bad(fn, "gamma", gamma);
    em_sched *s = sched_new(fn, S_STEP, o);
    if (!s) return NULL;
    s->a = gamma;
    s->n1 = step_size;
    return start(s);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

em_sched *em_sched_multistep_new(em_optim *o, const int64_t *milestones, int n, double gamma)
{
    const char *fn = "em_sched_multistep_new";
    gamma = dflt(gamma, 0.1);
    if (n < 0 || (n > 0 && !milestones)) return bad(fn, "milestone count", n);
    if (!(gamma >= 0)) return bad(fn, "gamma", gamma);
    em_sched *s = sched_new(fn, S_MULTISTEP, o);
    if (!s) return NULL;
    s->a = gamma;
    s->milestones = malloc((size_t)(n ? n : 1) * sizeof *s->milestones);
    if (!s->milestones) {
        em_sched_free(s);
        em_error(EM_ERR_OOM, "%s: out of memory", fn);
        return NULL;
    }
    if (n) memcpy(s->milestones, milestones, (size_t)n * sizeof *milestones);
    qsort(s->milestones, (size_t)n, sizeof *s->milestones, cmp_i64);
    s->n_milestones = n;
    return start(s);
}

em_sched *em_sched_exponential_new(em_optim *o, double gamma)
{
    const char *fn = "em_sched_exponential_new";
    if (gamma == 0 && !signbit(gamma)) return bad(fn, "gamma (required)", gamma);
    if (!(gamma >= 0)) return bad(fn, "gamma", gamma);
    em_sched *s = sched_new(fn, S_EXPONENTIAL, o);
    if (!s) return NULL;
    s->a = fabs(gamma);
    return start(s);
}

em_sched *em_sched_linear_new(em_optim *o, double start_factor, double end_factor,
                              int64_t total_iters)
{
    const char *fn = "em_sched_linear_new";
    start_factor = dflt(start_factor, 1.0 / 3);
    end_factor = dflt(end_factor, 1.0);
    if (total_iters == 0) total_iters = 5;
    if (!(start_factor > 0 && start_factor <= 1)) return bad(fn, "start_factor", start_factor);
    if (!(end_factor >= 0 && end_factor <= 1)) return bad(fn, "end_factor", end_factor);
    if (total_iters < 0) return bad(fn, "total_iters", (double)total_iters);
    em_sched *s = sched_new(fn, S_LINEAR, o);
    if (!s) return NULL;
    s->a = start_factor;
    s->b = end_factor;
    s->n1 = total_iters;
    return start(s);
}

em_sched *em_sched_cosine_new(em_optim *o, int64_t t_max, double eta_min)
{
    const char *fn = "em_sched_cosine_new";
    if (t_max <= 0) return bad(fn, "t_max", (double)t_max);
    if (!(eta_min >= 0)) return bad(fn, "eta_min", eta_min);
    em_sched *s = sched_new(fn, S_COSINE, o);
    if (!s) return NULL;
    s->a = fabs(eta_min);
    s->n1 = t_max;
    return start(s);
}

em_sched *em_sched_cosine_restarts_new(em_optim *o, int64_t t0, int64_t t_mult, double eta_min)
{
    const char *fn = "em_sched_cosine_restarts_new";
    if (t_mult == 0) t_mult = 1;
    if (t0 <= 0) return bad(fn, "t0", (double)t0);
    if (t_mult < 1) return bad(fn, "t_mult", (double)t_mult);
    if (!(eta_min >= 0)) return bad(fn, "eta_min", eta_min);
    em_sched *s = sched_new(fn, S_RESTARTS, o);
    if (!s) return NULL;
    s->a = fabs(eta_min);
    s->b = (double)t_mult;
    s->n1 = t0;
    return start(s);
}

em_sched *em_sched_warmup_new(em_optim *o, int64_t warmup, double start_factor, em_sched *after)
{
    const char *fn = "em_sched_warmup_new";
    start_factor = dflt(start_factor, 1.0 / 3);
    const char *err = NULL;
    double v = 0;
    if (warmup <= 0)
        err = "warmup", v = (double)warmup;
    else if (!(start_factor > 0 && start_factor <= 1))
        err = "start_factor", v = start_factor;
    else if (after && after->o != o)
        err = "after (scheduler of another optimizer)", v = 0;
    if (err) {
        em_sched_free(after);
        return bad(fn, err, v);
    }
    em_sched *s = sched_new(fn, S_WARMUP, o);
    if (!s) {
        em_sched_free(after);
        return NULL;
    }
    s->a = start_factor;
    s->n1 = warmup;
    s->after = after;
    return start(s);
}

em_sched *em_sched_noam_new(em_optim *o, int64_t d_model, int64_t warmup)
{
    const char *fn = "em_sched_noam_new";
    if (d_model <= 0) return bad(fn, "d_model", (double)d_model);
    if (warmup <= 0) return bad(fn, "warmup", (double)warmup);
    em_sched *s = sched_new(fn, S_NOAM, o);
    if (!s) return NULL;
    s->n1 = d_model;
    s->n2 = warmup;
    return start(s);
}

em_sched *em_sched_onecycle_new(em_optim *o, double max_lr, int64_t total_steps, double pct_start,
                                double div_factor, double final_div_factor)
{
    const char *fn = "em_sched_onecycle_new";
    pct_start = dflt(pct_start, 0.3);
    div_factor = dflt(div_factor, 25);
    final_div_factor = dflt(final_div_factor, 1e4);
    if (!(max_lr > 0)) return bad(fn, "max_lr", max_lr);
    if (total_steps <= 0) return bad(fn, "total_steps", (double)total_steps);
    if (!(pct_start > 0 && pct_start < 1)) return bad(fn, "pct_start", pct_start);
    if (!(div_factor > 0)) return bad(fn, "div_factor", div_factor);
    if (!(final_div_factor > 0)) return bad(fn, "final_div_factor", final_div_factor);
    double p1_end = pct_start * (double)total_steps - 1;
    if (!(p1_end > 0) || !((double)total_steps - 1 - p1_end > 0))
        return bad(fn, "pct_start for this total_steps", pct_start);
    em_sched *s = sched_new(fn, S_ONECYCLE, o);
    if (!s) return NULL;
    s->a = max_lr;
    s->b = div_factor;
    s->c = final_div_factor;
    s->n1 = total_steps;
    s->p1_end = p1_end;
    return start(s);
}

em_sched *em_sched_plateau_new(em_optim *o, bool maximize, double factor, int64_t patience,
                               double threshold, int64_t cooldown, double min_lr)
{
    const char *fn = "em_sched_plateau_new";
    factor = dflt(factor, 0.1);
    threshold = dflt(threshold, 1e-4);
    if (!(factor >= 0 && factor < 1)) return bad(fn, "factor", factor);
    if (patience < 0) return bad(fn, "patience", (double)patience);
    if (!(threshold >= 0)) return bad(fn, "threshold", threshold);
    if (cooldown < 0) return bad(fn, "cooldown", (double)cooldown);
    if (!(min_lr >= 0)) return bad(fn, "min_lr", min_lr);
    if (!o) {
        em_error(EM_ERR_INVALID_ARG, "%s: optimizer is NULL", fn);
        return NULL;
    }
    em_sched *s = sched_new(fn, S_PLATEAU, o);
    if (!s) return NULL;
    s->maximize = maximize;
    s->a = factor;
    s->b = fabs(min_lr);
    s->c = threshold;
    s->n1 = patience;
    s->n2 = cooldown;
    s->lr = o->lr;
    s->base = o->lr;
    return start(s);
}
