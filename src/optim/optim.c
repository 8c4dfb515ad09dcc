/* Optimizers: construction and validation (PyTorch 1.13's defaults and checks), parameter
 * groups, the step driver (fused in-place kernels for CPU f32/f64 contiguous parameters, a
 * converted work copy otherwise) and state save/restore. */
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim_impl.h"

/* zero means the default; EM_ZERO (-0.0) an exact zero */
static double dflt(double v, double d)
{
    if (v == 0) return signbit(v) ? 0.0 : d;
    return v;
}

/* a reference owned by the optimizer, never by a scope */
static em_tensor *plain_ref(em_tensor *t)
{
    if (!t) return NULL;
    em_tensor *own = em_retain(t);
    em_release(t);
    return own;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = em_alloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* ---- construction -------------------------------------------------------------------------- */

typedef struct collect_ctx {
    em_optim *o;
    bool failed;
} collect_ctx;

static void collect_fn(void *vctx, const char *name, em_module_entry *e)
{
    collect_ctx *c = vctx;
    if (c->failed || e->is_buffer || e->frozen || !e->tensor) return;
    if (!em_dtype_is_float(em_tensor_dtype(e->tensor))) return;
    em_optim *o = c->o;
    opt_param *grown = em_alloc((size_t)(o->n + 1) * sizeof *grown);
    char *nm = dup_str(name);
    if (!grown || !nm) {
        em_free(grown);
        em_free(nm);
        c->failed = true;
        return;
    }
    if (o->n) memcpy(grown, o->p, (size_t)o->n * sizeof *grown);
    em_free(o->p);
    o->p = grown;
    opt_param *p = &o->p[o->n++];
    memset(p, 0, sizeof *p);
    p->e = e;
    p->name = nm;
}

static em_optim *optim_new(const char *fn, opt_kind kind, em_module *m, double lr)
{
    if (!m) {
        em_error(EM_ERR_INVALID_ARG, "%s: module is NULL", fn);
        return NULL;
    }
    em_optim *o = em_alloc(sizeof *o);
    if (!o) return NULL;
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->fn = fn;
    o->module = m;
    o->lr = o->lr0 = lr;
    o->initial_lr = NAN;
    collect_ctx c = {o, false};
    em_module_visit(m, collect_fn, &c);
    if (c.failed) {
        em_optim_free(o);
        em_error(EM_ERR_OOM, "%s: out of memory", fn);
        return NULL;
    }
    return o;
}

static bool check_range(const char *fn, const char *what, double v, double lo, double hi,
                        bool hi_open)
{
    bool ok = v >= lo && (hi_open ? v < hi : v <= hi);
    if (!ok) {
        if (isinf(hi))
            em_error(EM_ERR_INVALID_ARG, "%s: invalid %s %g (must be >= %g)", fn, what, v, lo);
        else
            em_error(EM_ERR_INVALID_ARG, "%s: invalid %s %g (must be in [%g, %g%s)", fn, what, v,
                     lo, hi, hi_open ? "" : "]");
    }
    return ok;
}

static bool adam_cfg_fix(const char *fn, em_adam_cfg *c, double wd_default)
{
    c->lr = dflt(c->lr, 1e-3);
    c->beta1 = dflt(c->beta1, 0.9);
    c->beta2 = dflt(c->beta2, 0.999);
    c->eps = dflt(c->eps, 1e-8);
    c->weight_decay = dflt(c->weight_decay, wd_default);
    return check_range(fn, "lr", c->lr, 0, INFINITY, false) &&
           check_range(fn, "beta1", c->beta1, 0, 1, true) &&
           check_range(fn, "beta2", c->beta2, 0, 1, true) &&
           check_range(fn, "eps", c->eps, 0, INFINITY, false) &&
           check_range(fn, "weight_decay", c->weight_decay, 0, INFINITY, false);
}

static void set_param_defaults(em_optim *o, double lr, double wd)
{
    for (int i = 0; i < o->n; i++) {
        o->p[i].lr = lr;
        o->p[i].wd = wd;
    }
}

em_optim *em_sgd_new(em_module *m, em_sgd_cfg cfg)
{
    const char *fn = "em_sgd_new";
    cfg.lr = dflt(cfg.lr, 1e-3);
    if (!check_range(fn, "lr", cfg.lr, 0, INFINITY, false) ||
        !check_range(fn, "momentum", cfg.momentum, 0, INFINITY, false) ||
        !check_range(fn, "weight_decay", cfg.weight_decay, 0, INFINITY, false))
        return NULL;
    if (cfg.nesterov && (cfg.momentum <= 0 || cfg.dampening != 0)) {
        em_error(EM_ERR_INVALID_ARG,
                 "%s: nesterov momentum requires a momentum > 0 and zero dampening (momentum %g, "
                 "dampening %g)",
                 fn, cfg.momentum, cfg.dampening);
        return NULL;
    }
    cfg.momentum = fabs(cfg.momentum);
    cfg.dampening = dflt(cfg.dampening, 0);
    em_optim *o = optim_new(fn, OPT_SGD, m, cfg.lr);
    if (!o) return NULL;
    o->sgd = cfg;
    set_param_defaults(o, cfg.lr, cfg.weight_decay);
    return o;
}

static em_optim *adam_common(const char *fn, opt_kind kind, em_module *m, em_adam_cfg cfg)
{
    if (!m) {
        em_error(EM_ERR_INVALID_ARG, "%s: module is NULL", fn);
        return NULL;
    }
    if (!adam_cfg_fix(fn, &cfg, kind == OPT_ADAMW ? 1e-2 : 0)) return NULL;
    em_optim *o = optim_new(fn, kind, m, cfg.lr);
    if (!o) return NULL;
    o->adam = cfg;
    set_param_defaults(o, cfg.lr, cfg.weight_decay);
    return o;
}

em_optim *em_adam_new(em_module *m, em_adam_cfg cfg)
{
    return adam_common("em_adam_new", OPT_ADAM, m, cfg);
}

em_optim *em_adamw_new(em_module *m, em_adam_cfg cfg)
{
    return adam_common("em_adamw_new", OPT_ADAMW, m, cfg);
}

em_optim *em_rmsprop_new(em_module *m, em_rmsprop_cfg cfg)
{
    const char *fn = "em_rmsprop_new";
    cfg.lr = dflt(cfg.lr, 1e-2);
    cfg.alpha = dflt(cfg.alpha, 0.99);
    cfg.eps = dflt(cfg.eps, 1e-8);
    cfg.weight_decay = dflt(cfg.weight_decay, 0);
    cfg.momentum = dflt(cfg.momentum, 0);
    if (!check_range(fn, "lr", cfg.lr, 0, INFINITY, false) ||
        !check_range(fn, "alpha", cfg.alpha, 0, INFINITY, false) ||
        !check_range(fn, "eps", cfg.eps, 0, INFINITY, false) ||
        !check_range(fn, "momentum", cfg.momentum, 0, INFINITY, false) ||
        !check_range(fn, "weight_decay", cfg.weight_decay, 0, INFINITY, false))
        return NULL;
    em_optim *o = optim_new(fn, OPT_RMSPROP, m, cfg.lr);
    if (!o) return NULL;
    o->rms = cfg;
    set_param_defaults(o, cfg.lr, cfg.weight_decay);
    return o;
}

em_optim *em_adagrad_new(em_module *m, em_adagrad_cfg cfg)
{
    const char *fn = "em_adagrad_new";
    cfg.lr = dflt(cfg.lr, 1e-2);
    cfg.eps = dflt(cfg.eps, 1e-10);
    cfg.lr_decay = dflt(cfg.lr_decay, 0);
    cfg.weight_decay = dflt(cfg.weight_decay, 0);
    cfg.initial_accumulator_value = dflt(cfg.initial_accumulator_value, 0);
    if (!check_range(fn, "lr", cfg.lr, 0, INFINITY, false) ||
        !check_range(fn, "lr_decay", cfg.lr_decay, 0, INFINITY, false) ||
        !check_range(fn, "weight_decay", cfg.weight_decay, 0, INFINITY, false) ||
        !check_range(fn, "initial_accumulator_value", cfg.initial_accumulator_value, 0, INFINITY,
                     false) ||
        !check_range(fn, "eps", cfg.eps, 0, INFINITY, false))
        return NULL;
    em_optim *o = optim_new(fn, OPT_ADAGRAD, m, cfg.lr);
    if (!o) return NULL;
    o->ada = cfg;
    set_param_defaults(o, cfg.lr, cfg.weight_decay);
    return o;
}

em_optim *em_lion_new(em_module *m, em_lion_cfg cfg)
{
    const char *fn = "em_lion_new";
    cfg.lr = dflt(cfg.lr, 1e-4);
    cfg.beta1 = dflt(cfg.beta1, 0.9);
    cfg.beta2 = dflt(cfg.beta2, 0.99);
    cfg.weight_decay = dflt(cfg.weight_decay, 0);
    if (!check_range(fn, "lr", cfg.lr, 0, INFINITY, false) ||
        !check_range(fn, "beta1", cfg.beta1, 0, 1, false) ||
        !check_range(fn, "beta2", cfg.beta2, 0, 1, false) ||
        !check_range(fn, "weight_decay", cfg.weight_decay, 0, INFINITY, false))
        return NULL;
    em_optim *o = optim_new(fn, OPT_LION, m, cfg.lr);
    if (!o) return NULL;
    o->lion = cfg;
    set_param_defaults(o, cfg.lr, cfg.weight_decay);
    return o;
}

em_optim *em_muon_new(em_module *m, em_muon_cfg cfg)
{
    const char *fn = "em_muon_new";
    cfg.lr = dflt(cfg.lr, 2e-2);
    cfg.momentum = dflt(cfg.momentum, 0.95);
    cfg.weight_decay = dflt(cfg.weight_decay, 0);
    if (cfg.ns_steps == 0) cfg.ns_steps = 5;
    if (!check_range(fn, "lr", cfg.lr, 0, INFINITY, false) ||
        !check_range(fn, "momentum", cfg.momentum, 0, 1, true) ||
        !check_range(fn, "weight_decay", cfg.weight_decay, 0, INFINITY, false))
        return NULL;
    if (cfg.ns_steps < 0 || cfg.ns_steps > 100) {
        em_error(EM_ERR_INVALID_ARG, "%s: invalid ns_steps %d (1 to 100)", fn, cfg.ns_steps);
        return NULL;
    }
    if (!m) {
        em_error(EM_ERR_INVALID_ARG, "%s: module is NULL", fn);
        return NULL;
    }
    if (!adam_cfg_fix(fn, &cfg.fallback, 1e-2)) return NULL;
    em_optim *o = optim_new(fn, OPT_MUON, m, cfg.lr);
    if (!o) return NULL;
    o->muon = cfg;
    o->adam = cfg.fallback;
    for (int i = 0; i < o->n; i++) {
        opt_param *p = &o->p[i];
        p->fallback = em_tensor_rank(p->e->tensor) != 2;
        p->lr = p->fallback ? cfg.fallback.lr : cfg.lr;
        p->wd = p->fallback ? cfg.fallback.weight_decay : cfg.weight_decay;
    }
    return o;
}

void em_optim_free(em_optim *o)
{
    if (!o) return;
    if (o->anchor) { /* graphs that captured a step keep the anchor, without the optimizer */
        o->anchor->o = NULL;
        if (o->anchor->refs == 0) free(o->anchor);
    }
    for (int i = 0; i < o->n; i++) {
        for (int s = 0; s < OPT_MAX_STATE; s++)
            if (o->p[i].state[s]) tn_release_ref(o->p[i].state[s]);
        em_free(o->p[i].name);
    }
    for (int i = 0; i < o->n_groups; i++) em_free(o->groups[i].pattern);
    em_free(o->groups);
    em_free(o->p);
    em_free(o);
}

em_status em_optim_add_group(em_optim *o, const char *pattern, double lr, double weight_decay)
{
    const char *fn = "em_optim_add_group";
    if (!tn_check_ptr(fn, o, "o") || !tn_check_ptr(fn, pattern, "pattern")) return em_last_status();
    if (o->steps > 0)
        return em_error(EM_ERR_STATE, "%s: groups must be added before the first step", fn);
    if ((!isnan(lr) && !(lr >= 0)) || (!isnan(weight_decay) && !(weight_decay >= 0)))
        return em_error(EM_ERR_INVALID_ARG, "%s: invalid lr %g or weight_decay %g for \"%s\"", fn,
                        lr, weight_decay, pattern);
    opt_group *g = em_alloc((size_t)(o->n_groups + 1) * sizeof *g);
    char *pat = dup_str(pattern);
    if (!g || !pat) {
        em_free(g);
        em_free(pat);
        return em_error(EM_ERR_OOM, "%s: out of memory", fn);
    }
    if (o->n_groups) memcpy(g, o->groups, (size_t)o->n_groups * sizeof *g);
    em_free(o->groups);
    o->groups = g;
    o->groups[o->n_groups++] = (opt_group){pat, lr, weight_decay};
    for (int i = 0; i < o->n; i++) {
        if (fnmatch(pattern, o->p[i].name, 0) != 0) continue;
        if (!isnan(lr)) o->p[i].lr = lr;
        if (!isnan(weight_decay)) o->p[i].wd = weight_decay;
    }
    return EM_OK;
}

double em_optim_lr(const em_optim *o)
{
    return o ? o->lr : NAN;
}

void em_optim_set_lr(em_optim *o, double lr)
{
    if (o) o->lr = lr;
}

int64_t em_optim_steps(const em_optim *o)
{
    return o ? o->steps : 0;
}

/* ---- state names ------------------------------------------------------------------------- */

static const char *adam_state_name(const em_optim *o, int slot)
{
    if (slot == 0) return "exp_avg";
    if (slot == 1) return "exp_avg_sq";
    return slot == 2 && o->adam.amsgrad ? "max_exp_avg_sq" : NULL;
}

const char *opt_state_name(const em_optim *o, const opt_param *p, int slot)
{
    switch (o->kind) {
    case OPT_SGD: return slot == 0 && o->sgd.momentum != 0 ? "momentum_buffer" : NULL;
    case OPT_MUON:
        if (!p->fallback) return slot == 0 ? "momentum_buffer" : NULL;
        return adam_state_name(o, slot); /* the AdamW fallback */
    case OPT_ADAM:
    case OPT_ADAMW: return adam_state_name(o, slot);
    case OPT_RMSPROP:
        if (slot == 0) return "square_avg";
        if (slot == 1) return o->rms.momentum > 0 ? "momentum_buffer" : NULL;
        return slot == 2 && o->rms.centered ? "grad_avg" : NULL;
    case OPT_ADAGRAD: return slot == 0 ? "sum" : NULL;
    case OPT_LION: return slot == 0 ? "exp_avg" : NULL;
    }
    return NULL;
}

/* ---- the step ------------------------------------------------------------------------------ */

static em_dtype work_dtype(em_dtype dt)
{
    return dt == EM_F64 ? EM_F64 : EM_F32;
}

/* The device whose memory the update of t runs in place: its own when t is a contiguous f32/f64
 * tensor on the CPU or on a backend with a fused update; else none (backend -1), and the step
 * updates a converted host copy. */
static em_device update_device(const em_tensor *t)
{
    em_device d = em_tensor_device(t), none = {.backend = -1};
    em_dtype dt = em_tensor_dtype(t);
    if ((dt != EM_F32 && dt != EM_F64) || !em_tensor_is_contiguous(t)) return none;
    return d.backend == 0 || tn_update_native(d) ? d : none;
}

/* A contiguous copy of t in dtype dt on device dev (a share of t when it already is one). */
static em_tensor *work_copy(const em_tensor *t, em_dtype dt, em_device dev)
{
    em_tensor *c = em_to_device((em_tensor *)t, dev);
    if (c && em_tensor_dtype(c) != dt) c = em_cast(c, dt);
    return em_contiguous(c);
}

/* State slot s on the device of w, created on first use (zeros, or `fill`), moved there when it
 * lives elsewhere (restored state, or a module moved between steps); NULL on failure. */
static em_tensor *state_get(opt_param *p, int s, const em_tensor *w, double fill)
{
    em_device dev = em_tensor_device(w);
    em_dtype dt = em_tensor_dtype(w);
    em_tensor *t = p->state[s];
    bool fits = t && em_device_equal(em_tensor_device(t), dev) && em_tensor_dtype(t) == dt &&
                em_tensor_is_contiguous(t);
    if (!fits && em_graph_capturing(dev)) {
        char d[32];
        tn_graph_refuse(dev, em_error(EM_ERR_INVALID_ARG,
                                      "em_optim_step: the state of %s would be made or moved "
                                      "inside the graph capture on %s (every replay would "
                                      "reset it); take one step before capturing",
                                      p->name, em_device_str(dev, d, sizeof d)));
        return NULL;
    }
    bool scoped = tn_persistent_enter(dev); /* the state lives as long as the parameter */
    if (t && !fits) {
        em_tensor *moved = plain_ref(work_copy(t, dt, dev));
        if (moved) {
            tn_release_ref(t);
            p->state[s] = moved;
        }
        t = moved; /* NULL: the state stays where it was */
    } else if (!t) {
        p->state[s] = t = plain_ref(em_full(em_tensor_shape(w), fill, dt, dev));
    }
    if (scoped) tn_persistent_leave(dev);
    return t;
}

static void *data_of(em_tensor *t)
{
    return t ? tn_ptr(t) : NULL;
}

/* The coefficients of a parameter's update, from the optimizer's settings, its current learning
 * rate and the parameter's step: computed when the update runs, and again at every replay of a
 * graph that captured it (so learning-rate schedules and the step-dependent corrections go on). */
typedef enum coef_kind {
    C_SGD,
    C_ADAM,
    C_ADAMW,
    C_RMSPROP,
    C_ADAGRAD,
    C_LION,
    C_MUON,      /* Muon's momentum update */
    C_MUON_STEP, /* Muon's step along the orthogonalised momentum */
} coef_kind;

static opt_coef coef_of(const em_optim *o, const opt_param *p, coef_kind which)
{
    double lr = o->lr0 != 0 ? p->lr * (o->lr / o->lr0) : o->lr;
    double t = (double)p->step;
    switch (which) {
    case C_SGD:
        return (opt_coef){.lr = lr,
                          .wd = p->wd,
                          .a = o->sgd.momentum,
                          .b = o->sgd.dampening,
                          .maximize = o->sgd.maximize,
                          .nesterov = o->sgd.nesterov};
    case C_ADAM:
    case C_ADAMW: {
        const em_adam_cfg *c = &o->adam;
        return (opt_coef){.lr = lr,
                          .wd = p->wd,
                          .a = c->beta1,
                          .b = c->beta2,
                          .c = lr / (1 - pow(c->beta1, t)),
                          .d = sqrt(1 - pow(c->beta2, t)),
                          .eps = c->eps,
                          .maximize = c->maximize,
                          .flag = which == C_ADAMW};
    }
    case C_RMSPROP: {
        const em_rmsprop_cfg *c = &o->rms;
        return (opt_coef){.lr = lr,
                          .wd = p->wd,
                          .a = c->alpha,
                          .b = c->momentum,
                          .eps = c->eps,
                          .maximize = c->maximize,
                          .flag = c->centered};
    }
    case C_ADAGRAD: {
        const em_adagrad_cfg *c = &o->ada;
        return (opt_coef){.lr = lr / (1 + (t - 1) * c->lr_decay),
                          .wd = p->wd,
                          .eps = c->eps,
                          .maximize = c->maximize};
    }
    case C_LION: return (opt_coef){.lr = lr, .wd = p->wd, .a = o->lion.beta1, .b = o->lion.beta2};
    case C_MUON: return (opt_coef){.a = o->muon.momentum, .nesterov = !o->muon.no_nesterov};
    case C_MUON_STEP: {
        const em_tensor *w = p->e->tensor;
        double rows = (double)em_tensor_dim(w, 0), cols = (double)em_tensor_dim(w, 1);
        return (opt_coef){.a = 1 - lr * p->wd, .b = -lr * sqrt(fmax(1.0, rows / cols))};
    }
    }
    return (opt_coef){0};
}

/* An update captured in a graph: what its coefficients are recomputed from at each replay. */
typedef struct graph_coef {
    struct opt_anchor *anchor;
    int param;
    coef_kind which;
    bool bump;       /* the parameter's first update of the step: its step count goes up first */
    bool bump_steps; /* the step's last piece: the optimizer's step count goes up */
} graph_coef;

static em_status graph_coef_fill(void *ctx, void *dst)
{
    graph_coef *c = ctx;
    em_optim *o = c->anchor->o;
    if (!o)
        return em_error(EM_ERR_INVALID_ARG,
                        "em_graph_replay: the optimizer whose step the graph captured was freed "
                        "(free the graph first); the graph did not run");
    if (c->param >= 0) {
        opt_param *p = &o->p[c->param];
        if (c->bump) p->step++;
        opt_coef k = coef_of(o, p, c->which);
        memcpy(dst, &k, sizeof k);
    }
    if (c->bump_steps) o->steps++;
    return EM_OK;
}

static void graph_coef_drop(void *ctx)
{
    graph_coef *c = ctx;
    if (--c->anchor->refs == 0 && !c->anchor->o) free(c->anchor);
    free(c);
}

/* While the calling thread captures a graph on dev: a piece of the graph's parameter block that
 * every replay fills with coefficient `which` of parameter `param` (-1: none, 8 bytes unused)
 * after the step counts move on as `bump` and `bump_steps` say; *kp its device address. Not
 * capturing: *kp = NULL. */
static em_status graph_coef_piece(em_optim *o, int param, coef_kind which, bool bump,
                                  bool bump_steps, em_device dev, void **kp)
{
    *kp = NULL;
    if (!em_graph_capturing(dev)) return EM_OK;
    if (!o->anchor && !(o->anchor = calloc(1, sizeof *o->anchor)))
        return em_error(EM_ERR_OOM, "em_optim_step: out of memory");
    o->anchor->o = o;
    graph_coef *c = malloc(sizeof *c);
    if (!c) return em_error(EM_ERR_OOM, "em_optim_step: out of memory");
    *c = (graph_coef){o->anchor, param, which, bump, bump_steps};
    o->anchor->refs++;
    size_t bytes = param >= 0 ? sizeof(opt_coef) : 8;
    return tn_graph_param(dev, bytes, graph_coef_fill, graph_coef_drop, c, kp);
}

/* Runs u where w lives: the CPU kernels, or the device backend's fused update. In a graph capture
 * the device kernel reads u's coefficients from a piece of the graph's parameter block, which
 * every replay refills through coef_of(o, p, which) (bump: p's first update of the step). */
static em_status run_update(em_optim *o, opt_param *p, coef_kind which, bool bump,
                            const em_tensor *w, em_update *u)
{
    em_device d = em_tensor_device(w);
    if (d.backend != 0) {
        em_status st = graph_coef_piece(o, (int)(p - o->p), which, bump, false, d, &u->kp);
        return st != EM_OK ? st : tn_update(d, u);
    }
    em_dtype dt = u->dtype;
    switch (u->kind) {
    case EM_UPDATE_SGD: opt_kernel_sgd(dt, u->p, u->g, u->s[0], u->n, u->k); break;
    case EM_UPDATE_ADAM:
        opt_kernel_adam(dt, u->p, u->g, u->s[0], u->s[1], u->s[2], u->n, u->k);
        break;
    case EM_UPDATE_RMSPROP:
        opt_kernel_rmsprop(dt, u->p, u->g, u->s[0], u->s[1], u->s[2], u->n, u->k);
        break;
    case EM_UPDATE_ADAGRAD: opt_kernel_adagrad(dt, u->p, u->g, u->s[0], u->n, u->k); break;
    case EM_UPDATE_LION: opt_kernel_lion(dt, u->p, u->g, u->s[0], u->n, u->k); break;
    case EM_UPDATE_MUON: opt_kernel_muon_momentum(dt, u->g, u->s[0], u->s[1], u->n, u->k); break;
    case EM_UPDATE_AXPBY: opt_kernel_axpby(dt, u->p, u->g, u->n, u->k.a, u->k.b); break;
    }
    return EM_OK;
}

static em_update make_update(em_update_kind kind, em_tensor *w, const em_tensor *g, opt_coef k)
{
    return (em_update){.kind = kind,
                       .dtype = em_tensor_dtype(w),
                       .n = em_tensor_numel(w),
                       .p = tn_ptr(w),
                       .g = g ? tn_ptr(g) : NULL,
                       .k = k};
}

static em_status muon_update(em_optim *o, opt_param *p, em_tensor *w, const em_tensor *g)
{
    em_tensor *buf = state_get(p, 0, w, 0);
    em_tensor *u = em_empty(em_tensor_shape(w), em_tensor_dtype(w), em_tensor_device(w));
    if (!buf || !u) return em_last_status();
    em_update up = make_update(EM_UPDATE_MUON, w, g, coef_of(o, p, C_MUON));
    up.s[0] = tn_ptr(buf);
    up.s[1] = tn_ptr(u);
    em_status st = run_update(o, p, C_MUON, true, w, &up);
    if (st != EM_OK) return st;
    em_tensor *x = em_contiguous(opt_newton_schulz(u, o->muon.ns_steps));
    if (!x) return em_last_status();
    up = make_update(EM_UPDATE_AXPBY, w, x, coef_of(o, p, C_MUON_STEP));
    return run_update(o, p, C_MUON_STEP, false, w, &up);
}

static em_status adam_update(em_optim *o, opt_param *p, em_tensor *w, const em_tensor *g,
                             coef_kind which)
{
    const em_adam_cfg *c = &o->adam;
    em_tensor *m = state_get(p, 0, w, 0), *v = state_get(p, 1, w, 0);
    em_tensor *vmax = c->amsgrad ? state_get(p, 2, w, 0) : NULL;
    if (!m || !v || (c->amsgrad && !vmax)) return em_last_status();
    em_update u = make_update(EM_UPDATE_ADAM, w, g, coef_of(o, p, which));
    u.s[0] = data_of(m), u.s[1] = data_of(v), u.s[2] = data_of(vmax);
    return run_update(o, p, which, true, w, &u);
}

/* One parameter's update on w (contiguous f32/f64 on the CPU or a device with a fused update)
 * with gradient g (the same device, dtype and layout). */
static em_status update(em_optim *o, opt_param *p, em_tensor *w, const em_tensor *g)
{
    switch (o->kind) {
    case OPT_SGD: {
        em_update u = make_update(EM_UPDATE_SGD, w, g, coef_of(o, p, C_SGD));
        if (u.k.a != 0) {
            u.k.first = p->state[0] == NULL;
            em_tensor *buf = state_get(p, 0, w, 0);
            if (!buf) return em_last_status();
            u.s[0] = tn_ptr(buf);
        }
        return run_update(o, p, C_SGD, true, w, &u);
    }
    case OPT_MUON:
        if (!p->fallback) return muon_update(o, p, w, g);
        return adam_update(o, p, w, g, C_ADAMW); /* AdamW for parameters that are not 2-D */
    case OPT_ADAM: return adam_update(o, p, w, g, C_ADAM);
    case OPT_ADAMW: return adam_update(o, p, w, g, C_ADAMW);
    case OPT_RMSPROP: {
        const em_rmsprop_cfg *c = &o->rms;
        em_tensor *sq = state_get(p, 0, w, 0);
        em_tensor *buf = c->momentum > 0 ? state_get(p, 1, w, 0) : NULL;
        em_tensor *ga = c->centered ? state_get(p, 2, w, 0) : NULL;
        if (!sq || (c->momentum > 0 && !buf) || (c->centered && !ga)) return em_last_status();
        em_update u = make_update(EM_UPDATE_RMSPROP, w, g, coef_of(o, p, C_RMSPROP));
        u.s[0] = data_of(sq), u.s[1] = data_of(ga), u.s[2] = data_of(buf);
        return run_update(o, p, C_RMSPROP, true, w, &u);
    }
    case OPT_ADAGRAD: {
        em_tensor *sum = state_get(p, 0, w, o->ada.initial_accumulator_value);
        if (!sum) return em_last_status();
        em_update u = make_update(EM_UPDATE_ADAGRAD, w, g, coef_of(o, p, C_ADAGRAD));
        u.s[0] = data_of(sum);
        return run_update(o, p, C_ADAGRAD, true, w, &u);
    }
    case OPT_LION: {
        em_tensor *m = state_get(p, 0, w, 0);
        if (!m) return em_last_status();
        em_update u = make_update(EM_UPDATE_LION, w, g, coef_of(o, p, C_LION));
        u.s[0] = data_of(m);
        return run_update(o, p, C_LION, true, w, &u);
    }
    }
    return em_error(EM_ERR_INTERNAL, "em_optim_step: unknown optimizer kind %d", (int)o->kind);
}

static em_status step_param(em_optim *o, opt_param *p, const em_grads *g)
{
    em_tensor *param = p->e->tensor;
    uint64_t mark = core_error_mark();
    em_tensor *grad = em_grad(g, param);
    if (!grad) return core_failed_since(mark) ? em_last_status() : EM_OK; /* NULL: no gradient */
    if (!em_shape_equal(em_tensor_shape(grad), em_tensor_shape(param)))
        return em_error(EM_ERR_SHAPE, "em_optim_step: gradient of %s has shape %s, parameter %s",
                        p->name, tn_dims_str(grad->shape, grad->rank),
                        tn_dims_str(param->shape, param->rank));
    em_dtype pdt = em_tensor_dtype(param), wdt = work_dtype(pdt);
    em_device dev = update_device(param);
    bool in_place = dev.backend >= 0;
    if (!in_place) dev = EM_CPU;
    em_tensor *gw = work_copy(grad, wdt, dev);
    if (!gw) return em_last_status();
    p->step++;
    if (in_place && em_graph_capturing(dev)) {
        /* recorded, not run: each replay counts the step (graph_coef_fill) */
        em_status st = update(o, p, param, gw);
        p->step--;
        return st;
    }
    if (in_place) return update(o, p, param, gw);
    /* other dtypes or layouts, or a device without a fused update: update a converted host
     * copy, then swap it in */
    em_tensor *w = em_clone(work_copy(param, wdt, EM_CPU));
    if (!w) return em_last_status();
    em_status st = update(o, p, w, gw);
    if (st != EM_OK) return st;
    em_tensor *back = em_to_device(em_cast(w, pdt), em_tensor_device(param));
    if (!back) return em_last_status();
    back = plain_ref(back);
    if (!back) return em_last_status();
    em_requires_grad(back, true);
    /* the module's plain reference (em_release would give back a scope's first) */
    tn_release_ref(p->e->tensor);
    p->e->tensor = back;
    return EM_OK;
}

em_status em_optim_step(em_optim *o, const em_grads *g)
{
    const char *fn = "em_optim_step";
    if (!tn_check_ptr(fn, o, "o") || !tn_check_ptr(fn, g, "g")) return em_last_status();
    em_status st = EM_OK;
    em_scope_begin();
    em_no_grad_begin();
    for (int i = 0; i < o->n && st == EM_OK; i++) st = step_param(o, &o->p[i], g);
    em_no_grad_end();
    em_scope_end();
    if (st != EM_OK) return st;
    /* captured in a graph: the step is counted by each replay (the last piece of its block) */
    for (int i = 0; i < o->n; i++) {
        em_device d = em_tensor_device(o->p[i].e->tensor);
        void *kp;
        if (em_graph_capturing(d)) return graph_coef_piece(o, -1, C_SGD, false, true, d, &kp);
    }
    o->steps++;
    return EM_OK;
}

/* ---- state save / restore ---------------------------------------------------------------- */

em_status em_optim_state_visit(em_optim *o, em_state_fn fn, void *ctx)
{
    const char *f = "em_optim_state_visit";
    if (!tn_check_ptr(f, o, "o") || !tn_check_ptr(f, fn, "fn")) return em_last_status();
    char name[600];
    for (int i = 0; i < o->n; i++) {
        opt_param *p = &o->p[i];
        for (int s = 0; s < OPT_MAX_STATE; s++) {
            const char *sn = opt_state_name(o, p, s);
            if (!sn || !p->state[s]) continue;
            snprintf(name, sizeof name, "%s.%s", p->name, sn);
            em_tensor *c = em_clone(p->state[s]);
            if (!c) return em_last_status();
            fn(ctx, name, c);
        }
        if (p->step > 0) {
            snprintf(name, sizeof name, "%s.step", p->name);
            em_tensor *c = em_scalar((double)p->step, EM_I64, EM_CPU);
            if (!c) return em_last_status();
            fn(ctx, name, c);
        }
    }
    em_tensor *c = em_scalar((double)o->steps, EM_I64, EM_CPU);
    if (!c) return em_last_status();
    fn(ctx, "step", c);
    return EM_OK;
}

em_status em_optim_state_set(em_optim *o, const char *name, const em_tensor *t)
{
    const char *f = "em_optim_state_set";
    if (!tn_check_ptr(f, o, "o") || !tn_check_ptr(f, name, "name") || !tn_check_ptr(f, t, "t"))
        return em_last_status();
    if (strcmp(name, "step") == 0) {
        if (em_tensor_numel(t) != 1)
            return em_error(EM_ERR_SHAPE, "%s: \"step\" must have one element", f);
        o->steps = (int64_t)em_item_f64(t);
        return EM_OK;
    }
    for (int i = 0; i < o->n; i++) {
        opt_param *p = &o->p[i];
        size_t ln = strlen(p->name);
        if (strncmp(name, p->name, ln) != 0 || name[ln] != '.') continue;
        const char *key = name + ln + 1;
        if (strcmp(key, "step") == 0) {
            if (em_tensor_numel(t) != 1)
                return em_error(EM_ERR_SHAPE, "%s: \"%s\" must have one element", f, name);
            p->step = (int64_t)em_item_f64(t);
            return EM_OK;
        }
        for (int s = 0; s < OPT_MAX_STATE; s++) {
            const char *sn = opt_state_name(o, p, s);
            if (!sn || strcmp(sn, key) != 0) continue;
            if (!em_shape_equal(em_tensor_shape(t), em_tensor_shape(p->e->tensor)))
                return em_error(EM_ERR_SHAPE, "%s: \"%s\" has shape %s, the parameter %s", f, name,
                                tn_dims_str(t->shape, t->rank),
                                tn_dims_str(p->e->tensor->shape, p->e->tensor->rank));
            em_scope_begin();
            em_tensor *c =
                em_clone(work_copy(t, work_dtype(em_tensor_dtype(p->e->tensor)), EM_CPU));
            em_tensor *own = c ? em_retain(c) : NULL;
            em_scope_end();
            if (!own) return em_last_status();
            if (p->state[s]) tn_release_ref(p->state[s]);
            p->state[s] = own;
            return EM_OK;
        }
    }
    return em_error(EM_ERR_INVALID_ARG, "%s: no state \"%s\" in this optimizer", f, name);
}
