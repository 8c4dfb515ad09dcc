/* The learner: epochs of user step callbacks with gradient accumulation, clipping, schedulers,
 * validation, per-step and per-epoch metrics, early stopping, checkpoints on schedule and on
 * interrupt (SIGINT, 'q'), and bit-exact resume. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "train_impl.h"

#define LOG(level, ...) em_log_msg("train", level, __VA_ARGS__)

const char *const tr_col_names[TC_COUNT] = {"epoch",
                                            "loss",
                                            "accuracy",
                                            "topk_accuracy",
                                            "precision_micro",
                                            "recall_micro",
                                            "f1_micro",
                                            "precision_macro",
                                            "recall_macro",
                                            "f1_macro",
                                            "perplexity",
                                            "val_loss",
                                            "val_accuracy",
                                            "val_topk_accuracy",
                                            "val_precision_micro",
                                            "val_recall_micro",
                                            "val_f1_micro",
                                            "val_precision_macro",
                                            "val_recall_macro",
                                            "val_f1_macro",
                                            "val_perplexity",
                                            "lr",
                                            "items_per_sec",
                                            "cpu_percent",
                                            "rss_mb",
                                            "time_s",
                                            "steps"};

int tr_col_find(const char *name)
{
    if (!name) return -1;
    for (int i = 0; i < TC_COUNT; i++)
        if (strcmp(name, tr_col_names[i]) == 0) return i;
    return -1;
}

double tr_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double tr_elapsed(const em_learner *l)
{
    return l->elapsed_prev + (l->t0 > 0 ? tr_now() - l->t0 : 0.0);
}

void tr_series_push(tr_series *s, double x, double y)
{
    if (s->stride == 0) s->stride = 1;
    s->pend_x += x;
    s->pend += y;
    if (++s->pend_n < s->stride) return;
    double mx = s->pend_x / (double)s->pend_n, my = s->pend / (double)s->pend_n;
    s->pend_x = s->pend = 0;
    s->pend_n = 0;
    if (s->n == s->cap) {
        if (s->cap >= 4096) { /* halve: pairwise means, twice the stride */
            for (int64_t i = 0; i < s->n / 2; i++) {
                s->x[i] = 0.5 * (s->x[2 * i] + s->x[2 * i + 1]);
                s->v[i] = 0.5 * (s->v[2 * i] + s->v[2 * i + 1]);
            }
            s->n /= 2;
            s->stride *= 2;
        } else {
            int64_t cap = s->cap ? s->cap * 2 : 256;
            double *gx = realloc(s->x, (size_t)cap * sizeof *gx);
            if (!gx) return;
            s->x = gx;
            double *gv = realloc(s->v, (size_t)cap * sizeof *gv);
            if (!gv) return;
            s->v = gv;
            s->cap = cap;
        }
    }
    s->x[s->n] = mx;
    s->v[s->n++] = my;
}

void tr_series_free(tr_series *s)
{
    free(s->x);
    free(s->v);
    memset(s, 0, sizeof *s);
}

const char *tr_plural(int64_t n, const char *word, char *buf, size_t cap)
{
    snprintf(buf, cap, "%lld %s%s", (long long)n, word, n == 1 ? "" : "s");
    return buf;
}

em_status tr_hist_reserve(em_learner *l, int64_t n)
{
    if (n <= l->cap_hist) return EM_OK;
    int64_t cap = l->cap_hist ? 2 * l->cap_hist : 16;
    if (cap < n) cap = n;
    double *h = realloc(l->hist, (size_t)cap * TC_COUNT * sizeof *h);
    if (h) l->hist = h;
    double *x = h ? realloc(l->xhist, (size_t)cap * TR_MAX_SCALARS * sizeof *x) : NULL;
    if (!x) return em_error(EM_ERR_OOM, "learner: out of memory");
    l->xhist = x;
    for (int64_t i = l->cap_hist * TR_MAX_SCALARS; i < cap * TR_MAX_SCALARS; i++) x[i] = NAN;
    l->cap_hist = cap;
    return EM_OK;
}

/* ---- signals ------------------------------------------------------------------------------- */

static volatile sig_atomic_t g_sigint;
static struct sigaction g_old_sigint;

static void on_sigint(int sig)
{
    (void)sig;
    if (g_sigint) { /* a second Ctrl-C: give up on the graceful stop */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        sigaction(SIGINT, &sa, NULL);
        raise(SIGINT);
        return;
    }
    g_sigint = 1;
}

static bool stop_wanted(em_learner *l)
{
    return g_sigint || l->stop_requested;
}

/* ---- construction -------------------------------------------------------------------------- */

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static char *join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", a, b);
    return p;
}

em_learner *em_learner_new(em_module *m, em_optim *o, em_sched *s, em_learner_cfg cfg)
{
    const char *fn = "em_learner_new";
    if (!m || !o || !cfg.train_step) {
        em_error(EM_ERR_INVALID_ARG, "%s: module, optimizer and train_step are required", fn);
        return NULL;
    }
    if (cfg.epochs < 0 || cfg.grad_accum < 0 || cfg.train_batches < 0 || cfg.val_batches < 0 ||
        cfg.keep_last < 0 || cfg.patience < 0 || cfg.log_every < 0 || !(cfg.min_delta >= 0)) {
        em_error(EM_ERR_INVALID_ARG,
                 "%s: negative option (epochs %lld, grad_accum %d, keep_last %d, patience %lld, "
                 "min_delta %g)",
                 fn, (long long)cfg.epochs, cfg.grad_accum, cfg.keep_last, (long long)cfg.patience,
                 cfg.min_delta);
        return NULL;
    }
    if (cfg.epochs == 0) cfg.epochs = 1;
    if (cfg.grad_accum == 0) cfg.grad_accum = 1;
    if (cfg.ckpt_every == 0) cfg.ckpt_every = 1;
    if (cfg.log_every == 0) cfg.log_every = 50;
    if (cfg.topk == 0) cfg.topk = 5;
    const char *monitor = cfg.monitor ? cfg.monitor : cfg.val_step ? "val_loss" : "loss";
    int col = tr_col_find(monitor);
    if (col < 0 || col == TC_EPOCH) {
        em_error(EM_ERR_INVALID_ARG, "%s: unknown metric \"%s\" to monitor", fn, monitor);
        return NULL;
    }
    em_learner *l = calloc(1, sizeof *l);
    if (!l) {
        em_error(EM_ERR_OOM, "%s: out of memory", fn);
        return NULL;
    }
    l->m = m;
    l->o = o;
    l->s = s;
    l->cfg = cfg;
    snprintf(l->monitor, sizeof l->monitor, "%s", monitor);
    l->monitor_col = col;
    if (cfg.monitor_mode == EM_MODE_AUTO)
        l->maximize = strstr(monitor, "acc") || strstr(monitor, "f1") ||
                      strstr(monitor, "precision") || strstr(monitor, "recall");
    else
        l->maximize = cfg.monitor_mode == EM_MODE_MAX;
    l->best = NAN;
    l->best_epoch = -1;
    l->last_loss = l->last_acc = l->last_lr = l->last_ips = l->last_cpu = NAN;
    l->train_m = em_metrics_new(cfg.topk);
    l->val_m = em_metrics_new(cfg.topk);
    if (!cfg.no_run_dir) {
        char *root = dup_str(cfg.runs_dir ? cfg.runs_dir : "runs");
        l->run_dir = root ? join(root, cfg.name ? cfg.name : "run") : NULL;
        free(root);
        l->ckpt_dir = l->run_dir ? join(l->run_dir, "checkpoints") : NULL;
        if (!l->ckpt_dir) em_error(EM_ERR_OOM, "%s: out of memory", fn);
    }
    if (!l->train_m || !l->val_m || (!cfg.no_run_dir && !l->ckpt_dir)) {
        em_learner_free(l);
        return NULL;
    }
    return l;
}

void em_learner_free(em_learner *l)
{
    if (!l) return;
    em_metrics_free(l->train_m);
    em_metrics_free(l->val_m);
    free(l->run_dir);
    free(l->ckpt_dir);
    free(l->hist);
    free(l->xhist);
    free(l->sched_hist);
    tr_series_free(&l->s_loss);
    tr_series_free(&l->s_acc);
    tr_series_free(&l->s_lr);
    for (int k = 0; k < l->n_scalars; k++) tr_series_free(&l->scalars[k].series);
    for (int i = 0; i < l->n_params; i++) {
        free(l->params[i].name);
        free(l->params[i].value);
    }
    free(l->params);
    free(l->sessions);
    free(l);
}

void em_learner_request_stop(em_learner *l)
{
    if (l) l->stop_requested = 1;
}

em_stop_reason em_learner_stop_reason(const em_learner *l)
{
    return l ? l->reason : EM_STOP_NONE;
}

int64_t em_learner_epochs_done(const em_learner *l)
{
    return l ? l->n_hist : 0;
}

int64_t em_learner_steps(const em_learner *l)
{
    return l ? l->steps : 0;
}

double em_learner_metric(const em_learner *l, int64_t epoch, const char *name)
{
    if (!l) return NAN;
    int c = tr_col_find(name), k = c < 0 ? tr_scalar_find(l, name) : -1;
    if (c < 0 && k < 0) return NAN;
    if (epoch < 0) epoch += l->n_hist;
    if (epoch < 0 || epoch >= l->n_hist) return NAN;
    return c >= 0 ? l->hist[epoch * TC_COUNT + c] : l->xhist[epoch * TR_MAX_SCALARS + k];
}

/* ---- custom scalars and hyperparameters ----------------------------------------------------- */

int tr_scalar_find(const em_learner *l, const char *name)
{
    for (int k = 0; name && k < l->n_scalars; k++)
        if (strcmp(l->scalars[k].name, name) == 0) return k;
    return -1;
}

static bool scalar_name_ok(const char *name, size_t cap)
{
    size_t n = strlen(name);
    if (n == 0 || n >= cap) return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-' || c == '/'))
            return false;
    }
    return true;
}

/* The scalar `name`, registered on first use; -1 with an error for a bad name. */
static int scalar_slot(em_learner *l, const char *name, const char *fn)
{
    if (!l || !name) {
        em_error(EM_ERR_INVALID_ARG, "%s: NULL argument", fn);
        return -1;
    }
    int k = tr_scalar_find(l, name);
    if (k >= 0) return k;
    if (!scalar_name_ok(name, sizeof l->scalars[0].name)) {
        em_error(EM_ERR_INVALID_ARG,
                 "%s: invalid name \"%.80s\" (1 to 63 letters, digits and \"_.-/\")", fn, name);
        return -1;
    }
    if (tr_col_find(name) >= 0 || strcmp(name, "batch") == 0 || strcmp(name, "step") == 0) {
        em_error(EM_ERR_INVALID_ARG, "%s: \"%s\" is a built-in metric", fn, name);
        return -1;
    }
    if (l->n_scalars == TR_MAX_SCALARS) {
        em_error(EM_ERR_INVALID_ARG, "%s: more than %d scalar names (\"%s\")", fn, TR_MAX_SCALARS,
                 name);
        return -1;
    }
    k = l->n_scalars++;
    memset(&l->scalars[k], 0, sizeof l->scalars[k]);
    snprintf(l->scalars[k].name, sizeof l->scalars[k].name, "%s", name);
    l->scalars[k].last = NAN;
    return k;
}

em_status em_learner_log_scalar(em_learner *l, const char *name, double value)
{
    const char *fn = "em_learner_log_scalar";
    if (l && !l->in_train_step)
        return em_error(EM_ERR_STATE,
                        "%s: \"%s\" logged outside a training step (em_learner_log_epoch_scalar "
                        "records a value of the epoch)",
                        fn, name ? name : "(null)");
    int k = scalar_slot(l, name, fn);
    if (k < 0) return em_last_status();
    tr_scalar *sc = &l->scalars[k];
    sc->step_sum += value;
    sc->step_n++;
    sc->epoch_sum += value;
    sc->epoch_n++;
    return EM_OK;
}

em_status em_learner_log_epoch_scalar(em_learner *l, const char *name, double value)
{
    const char *fn = "em_learner_log_epoch_scalar";
    if (l && !l->in_fit)
        return em_error(EM_ERR_STATE, "%s: \"%s\" logged while no fit runs", fn,
                        name ? name : "(null)");
    int k = scalar_slot(l, name, fn);
    if (k < 0) return em_last_status();
    l->scalars[k].epoch_sum += value;
    l->scalars[k].epoch_n++;
    return EM_OK;
}

em_status em_learner_log_param(em_learner *l, const char *name, const char *value)
{
    const char *fn = "em_learner_log_param";
    if (!l || !name || !value) return em_error(EM_ERR_INVALID_ARG, "%s: NULL argument", fn);
    if (!name[0]) return em_error(EM_ERR_INVALID_ARG, "%s: empty name", fn);
    char *v = dup_str(value);
    if (!v) return em_error(EM_ERR_OOM, "%s: out of memory", fn);
    for (int i = 0; i < l->n_params; i++)
        if (strcmp(l->params[i].name, name) == 0) {
            free(l->params[i].value);
            l->params[i].value = v;
            return EM_OK;
        }
    tr_param *g = realloc(l->params, (size_t)(l->n_params + 1) * sizeof *g);
    char *n = dup_str(name);
    if (g) l->params = g;
    if (!g || !n) {
        free(v);
        free(n);
        return em_error(EM_ERR_OOM, "%s: out of memory", fn);
    }
    l->params[l->n_params++] = (tr_param){n, v};
    return EM_OK;
}

double em_learner_best(const em_learner *l, int64_t *epoch)
{
    if (epoch) *epoch = l ? l->best_epoch : -1;
    return l ? l->best : NAN;
}

const char *em_learner_run_dir(const em_learner *l)
{
    return l ? l->run_dir : NULL;
}

/* ---- steps --------------------------------------------------------------------------------- */

static void release_out(em_step_out *out)
{
    em_release(out->loss);
    em_release(out->outputs);
    em_release(out->targets);
    out->loss = out->outputs = out->targets = NULL;
}

static int64_t out_items(const em_step_out *out)
{
    if (out->items > 0) return out->items;
    if (out->outputs && em_tensor_rank(out->outputs) >= 1) return em_tensor_dim(out->outputs, 0);
    return 1;
}

/* Calls a step; OK with *got false at the end of the epoch. */
static em_status call_step(em_learner *l, em_step_fn fn, bool training, em_step_out *out, bool *got)
{
    em_step_ctx ctx = {l, l->cfg.user, l->epoch, training ? l->batch : 0, l->steps, training};
    *got = false;
    memset(out, 0, sizeof *out);
    for (int k = 0; k < l->n_scalars; k++) {
        l->scalars[k].step_sum = 0;
        l->scalars[k].step_n = 0;
    }
    l->in_train_step = training;
    uint64_t mark = em_error_mark();
    em_status st = fn(&ctx, out);
    l->in_train_step = false;
    if (st == EM_OK && em_failed_since(mark)) st = em_last_status();
    if (st != EM_OK) {
        release_out(out);
        if (!em_failed())
            em_error(st, "learner: %s step returned %s", training ? "train" : "val",
                     em_status_name(st));
        return st;
    }
    if (out->end) {
        release_out(out);
        return EM_OK;
    }
    if (!out->loss && training) {
        release_out(out);
        return em_error(EM_ERR_INVALID_ARG,
                        "learner: train step for epoch %lld batch %lld returned no loss",
                        (long long)l->epoch, (long long)l->batch);
    }
    *got = true;
    return EM_OK;
}

/* One optimizer step from accumulated gradients over `micro` micro-batches. */
static em_status apply(em_learner *l, em_grads *g, int micro, double loss)
{
    em_status st = EM_OK;
    if (micro > 1 && !l->cfg.accum_sum) st = em_grads_scale(g, 1.0 / micro);
    if (st == EM_OK && l->cfg.clip_norm > 0 && isnan(em_clip_grad_norm(g, l->cfg.clip_norm, 2)))
        st = em_last_status();
    if (st == EM_OK) st = em_optim_step(l->o, g);
    if (st != EM_OK) return st;
    l->steps++;
    if (l->s && l->cfg.sched_per_iter) {
        if (l->n_sched == l->cap_sched) {
            int64_t cap = l->cap_sched ? 2 * l->cap_sched : 64;
            double *h = realloc(l->sched_hist, (size_t)cap * sizeof *h);
            if (!h) return em_error(EM_ERR_OOM, "learner: out of memory");
            l->sched_hist = h;
            l->cap_sched = cap;
        }
        l->sched_hist[l->n_sched++] = loss;
        uint64_t mark = em_error_mark();
        if (isnan(em_sched_step(l->s, loss)) && em_failed_since(mark)) return em_last_status();
    }
    return EM_OK;
}

static void sample_rates(em_learner *l, int64_t items)
{
    double t = tr_now();
    l->ips_items += items;
    if (l->ips_t == 0) {
        l->ips_t = t;
        l->ips_cpu = em_process_cpu_seconds();
        l->ips_items = 0;
        return;
    }
    double dt = t - l->ips_t;
    if (dt < 0.25) return; /* keep the rates smooth */
    double cpu = em_process_cpu_seconds();
    l->last_ips = (double)l->ips_items / dt;
    l->last_cpu = 100.0 * (cpu - l->ips_cpu) / dt;
    l->last_rss = em_process_rss();
    l->ips_t = t;
    l->ips_cpu = cpu;
    l->ips_items = 0;
}

/* Runs the rest of the current epoch's training batches; *stopped when a stop was asked. */
static em_status train_epoch(em_learner *l, bool *stopped)
{
    *stopped = false;
    int k = l->cfg.grad_accum;
    em_grads *acc = NULL;
    int micro = 0;
    double window_loss = 0;
    em_status st = EM_OK;
    em_module_train(l->m, true);
    int64_t total = l->cfg.train_batches ? l->cfg.train_batches : l->batches_seen;
    for (;;) {
        if (l->cfg.train_batches > 0 && l->batch >= l->cfg.train_batches) break;
        double t_step = tr_now();
        double lr = em_optim_lr(l->o);
        em_scope_begin();
        em_step_out out;
        bool got;
        st = call_step(l, l->cfg.train_step, true, &out, &got);
        if (st != EM_OK || !got) {
            em_scope_end();
            break;
        }
        double loss = em_item_f64(out.loss);
        int64_t items = out_items(&out);
        em_metrics_add_loss(l->train_m, loss, items, out.tokens);
        double bacc = NAN;
        if (out.outputs && out.targets) {
            int64_t c0, r0, c1, r1;
            tr_metrics_counts(l->train_m, &c0, &r0);
            st = em_metrics_update(l->train_m, out.outputs, out.targets);
            tr_metrics_counts(l->train_m, &c1, &r1);
            if (c1 > c0) bacc = (double)(r1 - r0) / (double)(c1 - c0);
        }
        em_grads *g = st == EM_OK ? em_backward(out.loss) : NULL;
        if (!g && st == EM_OK) st = em_last_status();
        release_out(&out);
        if (st == EM_OK && k == 1) {
            st = apply(l, g, 1, loss);
        } else if (st == EM_OK) {
            if (!acc) acc = em_grads_new();
            st = acc ? em_grads_accumulate(acc, g) : em_last_status();
            micro++;
            window_loss += loss;
            if (st == EM_OK && micro == k) {
                st = apply(l, acc, micro, window_loss / micro);
                em_grads_free(acc);
                acc = NULL;
                micro = 0;
                window_loss = 0;
            }
        }
        em_scope_end();
        if (st != EM_OK) break;
        l->batch++;
        l->epoch_items += items;
        l->last_loss = loss;
        l->last_acc = bacc;
        l->last_lr = lr;
        /* the optimizer step this batch's gradients went (or will go) into */
        int64_t step = l->steps + (micro > 0);
        tr_series_push(&l->s_loss, (double)step, loss);
        if (!isnan(bacc)) tr_series_push(&l->s_acc, (double)step, bacc);
        tr_series_push(&l->s_lr, (double)step, lr);
        for (int j = 0; j < l->n_scalars; j++) {
            tr_scalar *sc = &l->scalars[j];
            if (sc->step_n == 0) continue;
            sc->last = sc->step_sum / (double)sc->step_n;
            tr_series_push(&sc->series, (double)step, sc->last);
        }
        sample_rates(l, items);
        double dt = tr_now() - t_step;
        tr_json_step(l, step, loss, bacc, lr, dt > 0 ? (double)items / dt : NAN, tr_elapsed(l));
        if (l->dash) {
            if (tr_dash_poll(l)) l->stop_requested = 1;
            tr_dash_draw(l, false);
        } else {
            tr_plain_step(l, total);
        }
        if (micro == 0 && stop_wanted(l)) {
            *stopped = true;
            break;
        }
    }
    if (st == EM_OK && micro > 0) st = apply(l, acc, micro, window_loss / micro);
    em_grads_free(acc);
    if (st == EM_OK && !*stopped && l->batch == 0)
        st = em_error(EM_ERR_STATE, "learner: epoch %lld has no training batch",
                      (long long)l->epoch + 1);
    return st;
}

static void fill_values(double *rec, int base, const em_metric_values *v)
{
    double vals[10] = {v->loss,         v->accuracy,  v->topk_accuracy,   v->precision_micro,
                       v->recall_micro, v->f1_micro,  v->precision_macro, v->recall_macro,
                       v->f1_macro,     v->perplexity};
    for (int i = 0; i < 10; i++) rec[base + i] = vals[i];
}

static em_status validate(em_learner *l, double *rec)
{
    em_metrics_reset(l->val_m);
    em_module_train(l->m, false);
    em_no_grad_begin();
    em_status st = EM_OK;
    for (int64_t b = 0;; b++) {
        if (l->cfg.val_batches > 0 && b >= l->cfg.val_batches) break;
        em_scope_begin();
        em_step_out out;
        bool got;
        em_step_ctx ctx = {l, l->cfg.user, l->epoch, b, l->steps, false};
        memset(&out, 0, sizeof out);
        uint64_t mark = em_error_mark();
        st = l->cfg.val_step(&ctx, &out);
        if (st == EM_OK && em_failed_since(mark)) st = em_last_status();
        got = st == EM_OK && !out.end;
        if (got) {
            if (out.loss)
                em_metrics_add_loss(l->val_m, em_item_f64(out.loss), out_items(&out), out.tokens);
            if (out.outputs && out.targets)
                st = em_metrics_update(l->val_m, out.outputs, out.targets);
        }
        release_out(&out);
        em_scope_end();
        if (st != EM_OK || !got) break;
        l->val_seen = b + 1;
    }
    em_no_grad_end();
    em_module_train(l->m, true);
    em_metric_values v = em_metrics_compute(l->val_m);
    fill_values(rec, TC_VAL_LOSS, &v);
    return st;
}

static bool improved(const em_learner *l, double v)
{
    if (isnan(v)) return false;
    if (isnan(l->best)) return true;
    return l->maximize ? v > l->best + l->cfg.min_delta : v < l->best - l->cfg.min_delta;
}

/* Validation, the epoch record, scheduler, best metric; advances to the next epoch and saves
 * checkpoints. *early when early stopping triggers. */
static em_status finish_epoch(em_learner *l, bool *early)
{
    *early = false;
    double rec[TC_COUNT];
    for (int i = 0; i < TC_COUNT; i++) rec[i] = NAN;
    rec[TC_EPOCH] = (double)(l->epoch + 1);
    em_metric_values v = em_metrics_compute(l->train_m);
    fill_values(rec, TC_LOSS, &v);
    double wall = l->epoch_time_prev + (tr_now() - l->t_epoch0);
    double cpu = em_process_cpu_seconds() - l->cpu_epoch0;
    rec[TC_LR] = em_optim_lr(l->o);
    rec[TC_IPS] = wall > 0 ? (double)l->epoch_items / wall : NAN;
    rec[TC_CPU] = wall > 0 ? 100.0 * cpu / (tr_now() - l->t_epoch0) : NAN;
    rec[TC_RSS_MB] = (double)em_process_rss() / (1024.0 * 1024.0);
    rec[TC_STEPS] = (double)l->steps;
    l->batches_seen = l->batch;
    if (l->cfg.val_step) {
        em_status st = validate(l, rec);
        if (st != EM_OK) return st;
    }
    rec[TC_TIME] = tr_elapsed(l);
    double custom[TR_MAX_SCALARS];
    for (int k = 0; k < TR_MAX_SCALARS; k++) {
        const tr_scalar *sc = &l->scalars[k];
        custom[k] = k < l->n_scalars && sc->epoch_n > 0 ? sc->epoch_sum / (double)sc->epoch_n : NAN;
    }
    em_status gs = tr_hist_reserve(l, l->n_hist + 1);
    if (gs != EM_OK) return gs;
    memcpy(l->hist + l->n_hist * TC_COUNT, rec, sizeof rec);
    memcpy(l->xhist + l->n_hist * TR_MAX_SCALARS, custom, sizeof custom);
    l->n_hist++;
    double mv = rec[l->monitor_col];
    if (l->s && !l->cfg.sched_per_iter) {
        if (l->n_sched == l->cap_sched) {
            int64_t cap = l->cap_sched ? 2 * l->cap_sched : 64;
            double *h = realloc(l->sched_hist, (size_t)cap * sizeof *h);
            if (!h) return em_error(EM_ERR_OOM, "learner: out of memory");
            l->sched_hist = h;
            l->cap_sched = cap;
        }
        l->sched_hist[l->n_sched++] = mv;
        uint64_t mark = em_error_mark();
        if (isnan(em_sched_step(l->s, mv)) && em_failed_since(mark)) return em_last_status();
    }
    bool better = improved(l, mv);
    if (better) {
        l->best = mv;
        l->best_epoch = l->epoch;
        l->bad_epochs = 0;
    } else {
        l->bad_epochs++;
    }
    tr_json_epoch(l, rec, custom);
    if (l->dash)
        tr_dash_draw(l, true);
    else
        tr_plain_epoch(l, l->n_hist - 1);
    LOG(EM_LOG_INFO, "epoch %lld/%lld: loss %.6g %s %.6g%s", (long long)l->epoch + 1,
        (long long)l->cfg.epochs, rec[TC_LOSS], l->monitor, mv, better ? " (best)" : "");
    l->epoch++;
    l->batch = 0;
    l->epoch_items = 0;
    l->epoch_time_prev = 0;
    em_metrics_reset(l->train_m);
    for (int k = 0; k < l->n_scalars; k++) {
        l->scalars[k].epoch_sum = 0;
        l->scalars[k].epoch_n = 0;
    }
    bool last = l->epoch >= l->cfg.epochs;
    if (l->cfg.patience > 0 && l->bad_epochs >= l->cfg.patience) *early = true;
    if (l->ckpt_dir && l->cfg.ckpt_every > 0 &&
        (l->epoch % l->cfg.ckpt_every == 0 || last || *early)) {
        em_status st = tr_checkpoint_periodic(l, false);
        if (st != EM_OK) return st;
    }
    if (l->ckpt_dir && l->cfg.keep_best && better) {
        em_status st = tr_checkpoint_periodic(l, true);
        if (st != EM_OK) return st;
    }
    return EM_OK;
}

static em_status run_epochs(em_learner *l)
{
    while (l->epoch < l->cfg.epochs) {
        if (l->batch == 0) {
            em_metrics_reset(l->train_m);
            l->epoch_items = 0;
            l->epoch_time_prev = 0;
            for (int k = 0; k < l->n_scalars; k++) {
                l->scalars[k].epoch_sum = 0;
                l->scalars[k].epoch_n = 0;
            }
        }
        l->t_epoch0 = tr_now();
        l->cpu_epoch0 = em_process_cpu_seconds();
        bool stopped, early;
        em_status st = train_epoch(l, &stopped);
        if (st != EM_OK) return st;
        if (stopped) {
            l->epoch_time_prev += tr_now() - l->t_epoch0;
            l->reason = EM_STOP_INTERRUPT;
            LOG(EM_LOG_INFO, "stopped at epoch %lld batch %lld", (long long)l->epoch + 1,
                (long long)l->batch);
            return l->ckpt_dir && l->cfg.ckpt_every > 0 ? tr_checkpoint_periodic(l, false) : EM_OK;
        }
        st = finish_epoch(l, &early);
        if (st != EM_OK) return st;
        if (early) {
            char n[32];
            tr_plural(l->bad_epochs, "epoch", n, sizeof n);
            l->reason = EM_STOP_EARLY;
            LOG(EM_LOG_INFO, "early stopping: %s did not improve for %s", l->monitor, n);
            snprintf(l->status, sizeof l->status, "early stop: no %s improvement in %s", l->monitor,
                     n);
            return EM_OK;
        }
        if (stop_wanted(l) && l->epoch < l->cfg.epochs) {
            l->reason = EM_STOP_INTERRUPT;
            /* the periodic checkpoint may have skipped this epoch */
            bool saved = l->cfg.ckpt_every > 0 && l->epoch % l->cfg.ckpt_every == 0;
            return l->ckpt_dir && l->cfg.ckpt_every > 0 && !saved ? tr_checkpoint_periodic(l, false)
                                                                  : EM_OK;
        }
    }
    l->reason = EM_STOP_DONE;
    return EM_OK;
}

/* Ends a file's torn last line (a killed process's) so that appended records start a line. */
static void end_line(const char *path)
{
    FILE *f = path ? fopen(path, "r+") : NULL;
    if (!f) return;
    if (fseek(f, -1, SEEK_END) == 0 && fgetc(f) != '\n' && fseek(f, 0, SEEK_END) == 0)
        fputc('\n', f);
    fclose(f);
}

/* Appends this session's line (start time, optimizer step, command line) to l->sessions. */
static void add_session(em_learner *l)
{
    char when[64] = "?";
    time_t now = time(NULL);
    struct tm tm;
    if (localtime_r(&now, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %z", &tm);
    char *cmd = tr_command_line();
    size_t old = l->sessions ? strlen(l->sessions) : 0;
    size_t add = strlen(when) + (cmd ? strlen(cmd) : 1) + 48;
    char *g = realloc(l->sessions, old + add);
    if (g) {
        snprintf(g + old, add, "%s\t%lld\t%s\n", when, (long long)l->steps, cmd ? cmd : "?");
        l->sessions = g;
    }
    free(cmd);
}

/* Run directory: creates it, opens the JSON-lines files (truncated on a fresh run, appended on
 * resume) and removes a fresh run's old checkpoints. */
static em_status open_run(em_learner *l, bool resuming)
{
    em_status st = tr_mkdirs(l->ckpt_dir);
    if (st != EM_OK) return st;
    if (!resuming) {
        char *latest = join(l->ckpt_dir, "latest");
        char *best = join(l->ckpt_dir, "best.safetensors");
        if (latest) remove(latest);
        if (best) remove(best);
        free(latest);
        free(best);
        tr_checkpoint_prune(l, 0);
    }
    const char *mode = resuming ? "a" : "w";
    char *p1 = join(l->run_dir, "metrics.jsonl"), *p2 = join(l->run_dir, "epochs.jsonl");
    if (resuming) {
        end_line(p1);
        end_line(p2);
    }
    char *p3 = join(l->run_dir, "train.log");
    if (p1) l->f_steps = fopen(p1, mode);
    if (p2) l->f_epochs = fopen(p2, mode);
    if (!resuming && p3) remove(p3);
    if (!l->f_steps || !l->f_epochs)
        st = em_error(EM_ERR_IO, "learner: cannot open '%s' for writing: %s", p1 ? p1 : "?",
                      strerror(errno));
    if (st == EM_OK && p3) st = em_log_to_file(p3);
    free(p1);
    free(p2);
    free(p3);
    return st;
}

em_status em_learner_fit(em_learner *l)
{
    if (!l) return em_error(EM_ERR_INVALID_ARG, "em_learner_fit: learner is NULL");
    l->reason = EM_STOP_NONE;
    l->stop_requested = 0;
    l->status[0] = 0;
    g_sigint = 0;
    l->out = l->cfg.out ? l->cfg.out : stdout;
    /* the run's log gets the learner's messages unless the user chose a level (log.train) */
    em_log_level old_level = em_log_get_level("train");
    if (old_level > EM_LOG_INFO && !em_config_is_set("log.train") && !em_config_is_set("log"))
        em_log_set_level("train", EM_LOG_INFO);

    char *latest = NULL;
    if (l->cfg.resume && l->ckpt_dir) latest = tr_latest_checkpoint(l);
    /* a second fit of the same learner continues its files like a resume */
    em_status st = l->run_dir ? open_run(l, latest != NULL || l->steps > 0) : EM_OK;
    if (st == EM_OK && latest) {
        st = em_learner_load(l, latest);
        if (st == EM_OK) {
            LOG(EM_LOG_INFO, "resumed from %s at epoch %lld batch %lld (step %lld)", latest,
                (long long)l->epoch + 1, (long long)l->batch, (long long)l->steps);
            snprintf(l->status, sizeof l->status, "resumed at epoch %lld batch %lld",
                     (long long)l->epoch + 1, (long long)l->batch);
        }
    } else if (st == EM_OK) {
        if (l->cfg.resume) LOG(EM_LOG_INFO, "no checkpoint to resume from: starting afresh");
        if (l->cfg.seed) em_seed(l->cfg.seed);
        if (l->steps == 0) l->run_rng = em_rng_get_state();
    }
    bool resumed = latest != NULL;
    free(latest);
    if (st == EM_OK) add_session(l);
    /* the dashboard's curves start with the earlier sessions' steps */
    if (st == EM_OK && resumed && l->run_dir && l->s_loss.n == 0) tr_load_series(l);
    l->session_hist = l->n_hist;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &g_old_sigint);

    l->t0 = tr_now();
    l->ips_t = 0;
    if (st == EM_OK) {
        char n[32];
        LOG(EM_LOG_INFO, "training %s, %lld parameters, run directory %s",
            tr_plural(l->cfg.epochs, "epoch", n, sizeof n), (long long)em_module_count(l->m, true),
            l->run_dir ? l->run_dir : "(none)");
        l->dash = !l->cfg.quiet && tr_dashboard_wanted(l) ? tr_dash_open(l) : NULL;
        l->in_fit = true;
        st = run_epochs(l);
        l->in_fit = false;
        if (st != EM_OK) {
            l->reason = EM_STOP_ERROR;
            snprintf(l->status, sizeof l->status, "error: %s", em_last_error());
            LOG(EM_LOG_ERROR, "training failed: %s", em_last_error());
        }
        if (l->dash) {
            tr_dash_close(l);
            /* the screen is gone: the epochs' result lines stay in the terminal's scrollback */
            for (int64_t e = l->session_hist; e < l->n_hist; e++) tr_plain_epoch(l, e);
        }
    }
    l->elapsed_prev += tr_now() - l->t0;
    l->t0 = 0;
    sigaction(SIGINT, &g_old_sigint, NULL);
    if (l->reason == EM_STOP_INTERRUPT) tr_plain_msg(l, "stopped: checkpoint saved");
    if (l->reason == EM_STOP_EARLY) tr_plain_msg(l, l->status);

    if (l->run_dir) {
        /* the reports describe what happened even when training failed; training's error (the
         * first one) stays the pending one, and a pending error of the caller's is kept too */
        if (l->f_steps) fclose(l->f_steps);
        if (l->f_epochs) fclose(l->f_epochs);
        l->f_steps = l->f_epochs = NULL;
        em_status rs = tr_write_summary(l);
        if (rs == EM_OK) rs = tr_write_csv(l);
        if (rs == EM_OK) rs = tr_write_report(l);
        em_log_to_file(NULL);
        if (st == EM_OK) st = rs;
    }
    em_log_set_level("train", old_level);
    return st;
}
