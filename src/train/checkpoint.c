/* Learner checkpoints: one safetensors file holding the model ("model.<name>"), the optimizer
 * state ("optim.<name>"), the scheduler's metric history (replayed on load), the epoch history,
 * the running epoch's metric counts, and the position, generator state and best metric as
 * metadata. Numbered files step-<n>.safetensors, a "latest" pointer and best.safetensors. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_impl.h"

typedef struct save_ctx {
    em_tensor_dict *d;
    const char *prefix;
    em_status st;
} save_ctx;

static void add_named(save_ctx *c, const char *name, em_tensor *t)
{
    if (c->st != EM_OK) return;
    char key[640];
    snprintf(key, sizeof key, "%s%s", c->prefix, name);
    c->st = em_tensor_dict_add(c->d, key, t);
}

static void visit_param(void *ctx, const char *name, em_module_entry *e)
{
    add_named(ctx, name, e->tensor);
}

static void visit_state(void *ctx, const char *name, em_tensor *t)
{
    add_named(ctx, name, t);
    em_release(t);
}

static em_status add_f64(em_tensor_dict *d, const char *name, const double *v, em_shape s)
{
    if (em_shape_numel(s) == 0) return EM_OK;
    em_tensor *t = em_from_f64(v, s);
    if (!t) return em_last_status();
    em_status st = em_tensor_dict_add(d, name, t);
    em_release(t);
    return st;
}

static em_status meta_i(em_tensor_dict *d, const char *key, int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)v);
    return em_tensor_dict_set_meta(d, key, buf);
}

static em_status meta_u(em_tensor_dict *d, const char *key, uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    return em_tensor_dict_set_meta(d, key, buf);
}

/* Doubles as hexadecimal floats: exact round trips. */
static em_status meta_f(em_tensor_dict *d, const char *key, double v)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%a", v);
    return em_tensor_dict_set_meta(d, key, buf);
}

/* Custom scalars: names (comma-separated metadata), the epoch history [epochs, names] and the
 * running epoch's sums and counts [names, 2]. */
static em_status save_scalars(em_learner *l, em_tensor_dict *d)
{
    int n = l->n_scalars;
    if (n == 0) return EM_OK;
    char names[TR_MAX_SCALARS * 64 + 1] = "";
    size_t at = 0;
    for (int k = 0; k < n; k++)
        at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", k ? "," : "",
                               l->scalars[k].name);
    em_status st = em_tensor_dict_set_meta(d, "scalars", names);
    double *h = malloc((size_t)(l->n_hist > 2 ? l->n_hist : 2) * (size_t)n * sizeof *h);
    if (!h) return em_error(EM_ERR_OOM, "em_learner_save: out of memory");
    for (int64_t e = 0; e < l->n_hist; e++)
        for (int k = 0; k < n; k++) h[e * n + k] = l->xhist[e * TR_MAX_SCALARS + k];
    if (st == EM_OK && l->n_hist > 0)
        st = add_f64(d, "learner.scalar_history", h, EM_SHAPE(l->n_hist, n));
    for (int k = 0; k < n; k++) {
        h[2 * k] = l->scalars[k].epoch_sum;
        h[2 * k + 1] = (double)l->scalars[k].epoch_n;
    }
    if (st == EM_OK && l->batch > 0) st = add_f64(d, "learner.scalar_epoch", h, EM_SHAPE(n, 2));
    free(h);
    return st;
}

em_status em_learner_save(em_learner *l, const char *path)
{
    if (!l || !path) return em_error(EM_ERR_INVALID_ARG, "em_learner_save: NULL argument");
    em_tensor_dict *d = em_tensor_dict_new();
    if (!d) return em_last_status();
    save_ctx c = {d, "model.", EM_OK};
    em_module_visit(l->m, visit_param, &c);
    c.prefix = "optim.";
    if (c.st == EM_OK) {
        em_status st = em_optim_state_visit(l->o, visit_state, &c);
        if (c.st == EM_OK) c.st = st;
    }
    em_status st = c.st;
    if (st == EM_OK && l->n_sched > 0)
        st = add_f64(d, "learner.sched", l->sched_hist, EM_SHAPE(l->n_sched));
    if (st == EM_OK && l->n_hist > 0)
        st = add_f64(d, "learner.history", l->hist, EM_SHAPE(l->n_hist, TC_COUNT));
    if (st == EM_OK && l->batch > 0) {
        int64_t n = tr_metrics_state_len(l->train_m);
        double *v = malloc((size_t)n * sizeof *v);
        if (!v) st = em_error(EM_ERR_OOM, "em_learner_save: out of memory");
        if (v) {
            tr_metrics_state_get(l->train_m, v);
            st = add_f64(d, "learner.train_metrics", v, EM_SHAPE(n));
        }
        free(v);
    }
    if (st == EM_OK) st = save_scalars(l, d);
    em_rng_state rng = em_rng_get_state();
    if (st == EM_OK) st = em_tensor_dict_set_meta(d, "ember.learner", "1");
    if (st == EM_OK) st = meta_i(d, "epoch", l->epoch);
    if (st == EM_OK) st = meta_i(d, "batch", l->batch);
    if (st == EM_OK) st = meta_i(d, "steps", l->steps);
    if (st == EM_OK) st = meta_i(d, "batches_seen", l->batches_seen);
    if (st == EM_OK) st = meta_i(d, "epoch_items", l->epoch_items);
    if (st == EM_OK) st = meta_u(d, "rng_seed", rng.seed);
    if (st == EM_OK) st = meta_u(d, "rng_offset", rng.offset);
    if (st == EM_OK) st = meta_f(d, "lr", em_optim_lr(l->o));
    if (st == EM_OK) st = em_tensor_dict_set_meta(d, "monitor", l->monitor);
    if (st == EM_OK) st = meta_f(d, "best", l->best);
    if (st == EM_OK) st = meta_i(d, "best_epoch", l->best_epoch);
    if (st == EM_OK) st = meta_i(d, "bad_epochs", l->bad_epochs);
    if (st == EM_OK) st = meta_f(d, "elapsed", tr_elapsed(l));
    if (st == EM_OK) st = meta_f(d, "epoch_time", l->epoch_time_prev);
    if (st == EM_OK) st = meta_u(d, "run_rng_seed", l->run_rng.seed);
    if (st == EM_OK) st = meta_u(d, "run_rng_offset", l->run_rng.offset);
    if (st == EM_OK && l->sessions) st = em_tensor_dict_set_meta(d, "sessions", l->sessions);
    if (st == EM_OK) st = em_safetensors_save(path, d, NULL);
    em_tensor_dict_free(d);
    return st;
}

static bool meta_get(const em_tensor_dict *d, const char *key, double *out)
{
    const char *v = em_tensor_dict_get_meta(d, key);
    if (!v) return false;
    char *end;
    *out = strtod(v, &end);
    return end != v;
}

static em_status copy_into(em_tensor *dst, const em_tensor *src, const char *name)
{
    if (!em_shape_equal(em_tensor_shape(dst), em_tensor_shape(src)))
        return em_error(EM_ERR_SHAPE, "em_learner_load: \"%s\" has another shape in the checkpoint",
                        name);
    if (!em_tensor_is_contiguous(dst) || em_tensor_device(dst).backend != 0)
        return em_error(EM_ERR_UNSUPPORTED,
                        "em_learner_load: parameter \"%s\" is not a contiguous CPU tensor", name);
    return em_to_data(src, em_tensor_data(dst), em_tensor_dtype(dst), em_tensor_numel(dst));
}

typedef struct count_ctx {
    int64_t n;
} count_ctx;

static void count_param(void *ctx, const char *name, em_module_entry *e)
{
    (void)name;
    (void)e;
    ((count_ctx *)ctx)->n++;
}

/* The custom scalars of a checkpoint (after the epoch history is in place). */
static em_status load_scalars(em_learner *l, const em_tensor_dict *d)
{
    const char *fn = "em_learner_load";
    for (int k = 0; k < l->n_scalars; k++) tr_series_free(&l->scalars[k].series);
    l->n_scalars = 0;
    const char *names = em_tensor_dict_get_meta(d, "scalars");
    if (!names || !names[0]) return EM_OK;
    for (const char *p = names; *p;) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof l->scalars[0].name || l->n_scalars == TR_MAX_SCALARS)
            return em_error(EM_ERR_FORMAT, "%s: bad scalar names \"%.80s\"", fn, names);
        tr_scalar *sc = &l->scalars[l->n_scalars++];
        memset(sc, 0, sizeof *sc);
        memcpy(sc->name, p, len);
        sc->last = NAN;
        p += len + (p[len] == ',');
    }
    int n = l->n_scalars;
    em_status st = tr_hist_reserve(l, l->n_hist > 0 ? l->n_hist : 1);
    em_tensor *h = em_tensor_dict_get(d, "learner.scalar_history");
    em_tensor *a = em_tensor_dict_get(d, "learner.scalar_epoch");
    if (st == EM_OK && h &&
        (em_tensor_rank(h) != 2 || em_tensor_dim(h, 0) != l->n_hist || em_tensor_dim(h, 1) != n))
        st = em_error(EM_ERR_FORMAT, "%s: learner.scalar_history does not fit %lld epochs of %d",
                      fn, (long long)l->n_hist, n);
    if (st == EM_OK && a && em_tensor_numel(a) != 2 * n)
        st = em_error(EM_ERR_FORMAT, "%s: learner.scalar_epoch does not fit %d scalars", fn, n);
    int64_t len = (h ? l->n_hist * n : 0) + 2 * n;
    double *buf = st == EM_OK ? malloc((size_t)len * sizeof *buf) : NULL;
    if (st == EM_OK && !buf) st = em_error(EM_ERR_OOM, "%s: out of memory", fn);
    if (st == EM_OK && h) st = em_to_data(h, buf, EM_F64, l->n_hist * n);
    if (st == EM_OK && h)
        for (int64_t e = 0; e < l->n_hist; e++)
            for (int k = 0; k < n; k++) l->xhist[e * TR_MAX_SCALARS + k] = buf[e * n + k];
    if (st == EM_OK && a) {
        double *acc = buf + (h ? l->n_hist * n : 0);
        st = em_to_data(a, acc, EM_F64, 2 * n);
        for (int k = 0; st == EM_OK && k < n; k++) {
            l->scalars[k].epoch_sum = acc[2 * k];
            l->scalars[k].epoch_n = (int64_t)acc[2 * k + 1];
        }
    }
    free(buf);
    return st;
}

em_status em_learner_load(em_learner *l, const char *path)
{
    const char *fn = "em_learner_load";
    if (!l || !path) return em_error(EM_ERR_INVALID_ARG, "%s: NULL argument", fn);
    em_safetensors_opts opts = {.copy = true};
    em_tensor_dict *d = em_safetensors_load(path, &opts);
    if (!d) return em_last_status();
    em_status st = EM_OK;
    if (!em_tensor_dict_get_meta(d, "ember.learner"))
        st = em_error(EM_ERR_FORMAT, "%s: '%s' is not a learner checkpoint", fn, path);
    count_ctx cc = {0};
    em_module_visit(l->m, count_param, &cc);
    int64_t n_model = 0;
    for (int64_t i = 0; st == EM_OK && i < em_tensor_dict_count(d); i++) {
        const char *name = em_tensor_dict_name_at(d, i);
        em_tensor *t = em_tensor_dict_tensor_at(d, i);
        if (strncmp(name, "model.", 6) == 0) {
            em_tensor *p = em_module_get(l->m, name + 6);
            if (!p)
                st = em_error(EM_ERR_FORMAT, "%s: the model has no \"%s\"", fn, name + 6);
            else
                st = copy_into(p, t, name + 6);
            n_model++;
        } else if (strncmp(name, "optim.", 6) == 0) {
            st = em_optim_state_set(l->o, name + 6, t);
        }
    }
    if (st == EM_OK && n_model != cc.n)
        st = em_error(EM_ERR_FORMAT, "%s: checkpoint has %lld model tensors, the model %lld", fn,
                      (long long)n_model, (long long)cc.n);
    double v;
    if (st == EM_OK && meta_get(d, "lr", &v)) em_optim_set_lr(l->o, v);
    /* scheduler: replay its inputs on the fresh scheduler */
    em_tensor *sh = em_tensor_dict_get(d, "learner.sched");
    l->n_sched = 0;
    if (st == EM_OK && sh) {
        int64_t n = em_tensor_numel(sh);
        double *h = realloc(l->sched_hist, (size_t)(n > 0 ? n : 1) * sizeof *h);
        if (!h) st = em_error(EM_ERR_OOM, "%s: out of memory", fn);
        if (h) {
            l->sched_hist = h;
            l->cap_sched = n > 0 ? n : 1;
            st = em_to_data(sh, h, EM_F64, n);
            if (st == EM_OK) l->n_sched = n;
        }
        if (st == EM_OK && !l->s && n > 0)
            em_log_msg("train", EM_LOG_WARN,
                       "%s: the checkpoint has scheduler steps but the learner no scheduler", fn);
        uint64_t mark = em_error_mark();
        for (int64_t i = 0; st == EM_OK && l->s && i < n; i++)
            if (isnan(em_sched_step(l->s, l->sched_hist[i])) && em_failed_since(mark))
                st = em_last_status();
    }
    em_tensor *hist = em_tensor_dict_get(d, "learner.history");
    l->n_hist = 0;
    if (st == EM_OK && hist) {
        if (em_tensor_rank(hist) != 2 || em_tensor_dim(hist, 1) != TC_COUNT) {
            st = em_error(EM_ERR_FORMAT, "%s: learner.history has another column count", fn);
        } else {
            int64_t n = em_tensor_dim(hist, 0);
            st = tr_hist_reserve(l, n > 0 ? n : 1);
            if (st == EM_OK) st = em_to_data(hist, l->hist, EM_F64, n * TC_COUNT);
            if (st == EM_OK) l->n_hist = n;
            for (int64_t i = 0; st == EM_OK && i < n * TR_MAX_SCALARS; i++) l->xhist[i] = NAN;
        }
    }
    em_metrics_reset(l->train_m);
    em_tensor *tm = em_tensor_dict_get(d, "learner.train_metrics");
    if (st == EM_OK && tm) {
        int64_t n = em_tensor_numel(tm);
        double *buf = malloc((size_t)(n > 0 ? n : 1) * sizeof *buf);
        if (!buf) st = em_error(EM_ERR_OOM, "%s: out of memory", fn);
        if (buf) st = em_to_data(tm, buf, EM_F64, n);
        if (st == EM_OK) st = tr_metrics_state_set(l->train_m, buf, n);
        free(buf);
    }
    if (st == EM_OK) st = load_scalars(l, d);
    if (st == EM_OK) {
        const char *s1 = em_tensor_dict_get_meta(d, "rng_seed");
        const char *s2 = em_tensor_dict_get_meta(d, "rng_offset");
        if (s1 && s2) {
            em_rng_state r = {strtoull(s1, NULL, 10), strtoull(s2, NULL, 10)};
            em_rng_set_state(r);
        }
        if (meta_get(d, "epoch", &v)) l->epoch = (int64_t)v;
        if (meta_get(d, "batch", &v)) l->batch = (int64_t)v;
        if (meta_get(d, "steps", &v)) l->steps = (int64_t)v;
        if (meta_get(d, "batches_seen", &v)) l->batches_seen = (int64_t)v;
        if (meta_get(d, "epoch_items", &v)) l->epoch_items = (int64_t)v;
        if (meta_get(d, "best", &v)) l->best = v;
        if (meta_get(d, "best_epoch", &v)) l->best_epoch = (int64_t)v;
        if (meta_get(d, "bad_epochs", &v)) l->bad_epochs = (int64_t)v;
        if (meta_get(d, "elapsed", &v)) l->elapsed_prev = v;
        if (meta_get(d, "epoch_time", &v)) l->epoch_time_prev = v;
        const char *r1 = em_tensor_dict_get_meta(d, "run_rng_seed");
        const char *r2 = em_tensor_dict_get_meta(d, "run_rng_offset");
        if (r1 && r2) l->run_rng = (em_rng_state){strtoull(r1, NULL, 10), strtoull(r2, NULL, 10)};
        const char *ss = em_tensor_dict_get_meta(d, "sessions");
        free(l->sessions);
        l->sessions = NULL;
        if (ss) {
            size_t n = strlen(ss) + 1;
            l->sessions = malloc(n);
            if (l->sessions) memcpy(l->sessions, ss, n);
        }
    }
    em_tensor_dict_free(d);
    return st;
}

/* ---- numbered files ------------------------------------------------------------------------ */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void tr_checkpoint_prune(em_learner *l, int keep)
{
    if (!l->ckpt_dir) return;
    DIR *dir = opendir(l->ckpt_dir);
    if (!dir) return;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(dir))) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "step-", 5) != 0 || len < 17 ||
            strcmp(e->d_name + len - 12, ".safetensors") != 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **g = realloc(names, cap * sizeof *g);
            if (!g) break;
            names = g;
        }
        size_t sz = strlen(l->ckpt_dir) + len + 2;
        names[n] = malloc(sz);
        if (!names[n]) break;
        snprintf(names[n], sz, "%s/%s", l->ckpt_dir, e->d_name);
        n++;
    }
    closedir(dir);
    if (n > 1) qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        if (i + (size_t)keep < n) remove(names[i]);
        free(names[i]);
    }
    free(names);
}

char *tr_latest_checkpoint(const em_learner *l)
{
    size_t sz = strlen(l->ckpt_dir) + 16;
    char *p = malloc(sz);
    if (!p) return NULL;
    snprintf(p, sz, "%s/latest", l->ckpt_dir);
    FILE *f = fopen(p, "r");
    free(p);
    if (!f) return NULL;
    char name[256];
    bool ok = fgets(name, sizeof name, f) != NULL;
    fclose(f);
    if (!ok) return NULL;
    name[strcspn(name, "\r\n")] = 0;
    if (!name[0] || strchr(name, '/')) return NULL;
    sz = strlen(l->ckpt_dir) + strlen(name) + 2;
    p = malloc(sz);
    if (p) snprintf(p, sz, "%s/%s", l->ckpt_dir, name);
    FILE *check = p ? fopen(p, "rb") : NULL;
    if (!check) {
        free(p);
        return NULL;
    }
    fclose(check);
    return p;
}

/* Writes "latest" atomically (temporary file and rename). */
static em_status write_latest(const em_learner *l, const char *name)
{
    size_t sz = strlen(l->ckpt_dir) + 20;
    char *tmp = malloc(sz), *dst = malloc(sz);
    em_status st = EM_OK;
    if (!tmp || !dst) st = em_error(EM_ERR_OOM, "learner: out of memory");
    if (st == EM_OK) {
        snprintf(tmp, sz, "%s/latest.tmp", l->ckpt_dir);
        snprintf(dst, sz, "%s/latest", l->ckpt_dir);
        FILE *f = fopen(tmp, "w");
        if (!f || fprintf(f, "%s\n", name) < 0 || fclose(f) != 0 || rename(tmp, dst) != 0)
            st = em_error(EM_ERR_IO, "learner: cannot write '%s': %s", dst, strerror(errno));
    }
    free(tmp);
    free(dst);
    return st;
}

em_status tr_checkpoint_periodic(em_learner *l, bool best)
{
    char name[64];
    if (best)
        snprintf(name, sizeof name, "best.safetensors");
    else
        snprintf(name, sizeof name, "step-%09lld.safetensors", (long long)l->steps);
    size_t sz = strlen(l->ckpt_dir) + strlen(name) + 2;
    char *path = malloc(sz);
    if (!path) return em_error(EM_ERR_OOM, "learner: out of memory");
    snprintf(path, sz, "%s/%s", l->ckpt_dir, name);
    em_status st = em_learner_save(l, path);
    if (st == EM_OK) em_log_msg("train", EM_LOG_INFO, "checkpoint %s", path);
    free(path);
    if (st != EM_OK || best) return st;
    st = write_latest(l, name);
    if (st == EM_OK && l->cfg.keep_last > 0) tr_checkpoint_prune(l, l->cfg.keep_last);
    return st;
}
