/* The run directory's records: metrics.jsonl (one line per training batch) and epochs.jsonl (one
 * per epoch) as training goes, read back at the end into metrics.csv and epochs.csv, and
 * summary.md; the description of the run (command line, version, host, device, seed,
 * hyperparameters) that summary.md and report.html share. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "../optim/optim_impl.h"
#include "ember_commit.h"
#include "train_impl.h"

em_status tr_mkdirs(const char *path)
{
    size_t n = strlen(path);
    char *p = malloc(n + 1);
    if (!p) return em_error(EM_ERR_OOM, "learner: out of memory");
    memcpy(p, path, n + 1);
    em_status st = EM_OK;
    for (size_t i = 1; i <= n && st == EM_OK; i++) {
        if (p[i] != '/' && p[i] != 0) continue;
        char c = p[i];
        p[i] = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            st = em_error(EM_ERR_IO, "learner: cannot create directory '%s': %s", p,
                          strerror(errno));
        p[i] = c;
    }
    free(p);
    return st;
}

void tr_fmt(char *buf, size_t cap, double v, bool json)
{
    if (isnan(v) || isinf(v))
        snprintf(buf, cap, "%s", json ? "null" : "-");
    else if (v == floor(v) && fabs(v) < 1e15)
        snprintf(buf, cap, "%.0f", v);
    else
        snprintf(buf, cap, json ? "%.9g" : "%.4g", v);
}

/* ---- JSON lines ----------------------------------------------------------------------------- */

void tr_json_step(em_learner *l, int64_t step, double loss, double acc, double lr, double ips,
                  double t)
{
    if (!l->f_steps) return;
    char a[40], b[40], c[40], d[40], e[40];
    tr_fmt(a, sizeof a, loss, true);
    tr_fmt(b, sizeof b, acc, true);
    tr_fmt(c, sizeof c, lr, true);
    tr_fmt(d, sizeof d, ips, true);
    tr_fmt(e, sizeof e, t, true);
    fprintf(l->f_steps,
            "{\"epoch\":%lld,\"batch\":%lld,\"step\":%lld,\"loss\":%s,\"accuracy\":%s,\"lr\":%s,"
            "\"items_per_sec\":%s,\"time_s\":%s",
            (long long)l->epoch + 1, (long long)l->batch - 1, (long long)step, a, b, c, d, e);
    for (int k = 0; k < l->n_scalars; k++) {
        const tr_scalar *sc = &l->scalars[k];
        if (sc->step_n == 0) continue;
        tr_fmt(a, sizeof a, sc->step_sum / (double)sc->step_n, true);
        fprintf(l->f_steps, ",\"%s\":%s", sc->name, a);
    }
    fputs("}\n", l->f_steps);
}

void tr_json_epoch(em_learner *l, const double *rec, const double *custom)
{
    if (!l->f_epochs) return;
    fputc('{', l->f_epochs);
    char v[40];
    for (int i = 0; i < TC_COUNT; i++) {
        tr_fmt(v, sizeof v, rec[i], true);
        fprintf(l->f_epochs, "%s\"%s\":%s", i ? "," : "", tr_col_names[i], v);
    }
    for (int k = 0; k < l->n_scalars; k++) {
        if (isnan(custom[k])) continue;
        tr_fmt(v, sizeof v, custom[k], true);
        fprintf(l->f_epochs, ",\"%s\":%s", l->scalars[k].name, v);
    }
    fputs("}\n", l->f_epochs);
    fflush(l->f_epochs);
    if (l->f_steps) fflush(l->f_steps);
}

/* ---- reading them back ---------------------------------------------------------------------- */

int tr_table_col(const tr_table *t, const char *name)
{
    for (int c = 0; c < t->n_cols; c++)
        if (strcmp(t->names[c], name) == 0) return c;
    return -1;
}

void tr_table_free(tr_table *t)
{
    for (int c = 0; c < t->n_cols; c++) {
        free(t->names[c]);
        free(t->cols[c]);
    }
    free(t->names);
    free(t->cols);
    memset(t, 0, sizeof *t);
}

static int add_col(tr_table *t, const char *name, size_t len)
{
    char **nn = realloc(t->names, (size_t)(t->n_cols + 1) * sizeof *nn);
    if (!nn) return -1;
    t->names = nn;
    double **nc = realloc(t->cols, (size_t)(t->n_cols + 1) * sizeof *nc);
    if (!nc) return -1;
    t->cols = nc;
    char *s = malloc(len + 1);
    double *v = malloc((size_t)(t->cap_rows > 0 ? t->cap_rows : 1) * sizeof *v);
    if (!s || !v) {
        free(s);
        free(v);
        return -1;
    }
    memcpy(s, name, len);
    s[len] = 0;
    for (int64_t r = 0; r < t->cap_rows; r++) v[r] = NAN;
    t->names[t->n_cols] = s;
    t->cols[t->n_cols] = v;
    return t->n_cols++;
}

static bool add_row(tr_table *t)
{
    if (t->n_rows == t->cap_rows) {
        int64_t cap = t->cap_rows ? 2 * t->cap_rows : 256;
        for (int c = 0; c < t->n_cols; c++) {
            double *g = realloc(t->cols[c], (size_t)cap * sizeof *g);
            if (!g) return false;
            for (int64_t r = t->cap_rows; r < cap; r++) g[r] = NAN;
            t->cols[c] = g;
        }
        t->cap_rows = cap;
    }
    for (int c = 0; c < t->n_cols; c++) t->cols[c][t->n_rows] = NAN;
    t->n_rows++;
    return true;
}

/* Parses one flat object of numbers and nulls ({"a":1,"b":null}) into the last row; false when
 * the line is not one (a torn last line of a killed run). */
static bool parse_line(tr_table *t, const char *p)
{
    while (*p == ' ') p++;
    if (*p++ != '{') return false;
    for (;;) {
        while (*p == ' ') p++;
        if (*p == '}') return true;
        if (*p++ != '"') return false;
        const char *key = p;
        while (*p && *p != '"') p++;
        if (*p != '"') return false;
        size_t klen = (size_t)(p - key);
        p++;
        while (*p == ' ') p++;
        if (*p++ != ':') return false;
        while (*p == ' ') p++;
        double v = NAN;
        if (strncmp(p, "null", 4) == 0) {
            p += 4;
        } else {
            char *end;
            v = strtod(p, &end);
            if (end == p) return false;
            p = end;
        }
        int c = -1;
        for (int i = 0; i < t->n_cols && c < 0; i++)
            if (strlen(t->names[i]) == klen && memcmp(t->names[i], key, klen) == 0) c = i;
        if (c < 0) c = add_col(t, key, klen);
        if (c < 0) return false;
        t->cols[c][t->n_rows - 1] = v;
        while (*p == ' ') p++;
        if (*p == ',') p++;
    }
}

/* Position of row r by the order columns (NaN columns count as 0). */
static int cmp_pos(const tr_table *t, const int *oc, int64_t r, int64_t s)
{
    for (int i = 0; i < 2; i++) {
        if (oc[i] < 0) continue;
        double a = t->cols[oc[i]][r], b = t->cols[oc[i]][s];
        a = isnan(a) ? 0 : a;
        b = isnan(b) ? 0 : b;
        if (a != b) return a < b ? -1 : 1;
    }
    return 0;
}

em_status tr_table_read(tr_table *t, const char *path, const char *order1, const char *order2)
{
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "r");
    if (!f) return EM_OK;
    size_t cap = 4096;
    char *line = malloc(cap);
    em_status st = line ? EM_OK : em_error(EM_ERR_OOM, "learner: out of memory");
    while (st == EM_OK) {
        size_t n = 0;
        int ch;
        while ((ch = fgetc(f)) != EOF && ch != '\n') {
            if (n + 1 == cap) {
                char *g = realloc(line, cap * 2);
                if (!g) break;
                line = g;
                cap *= 2;
            }
            line[n++] = (char)ch;
        }
        line[n] = 0;
        if (n == 0 && ch == EOF) break;
        if (!add_row(t)) {
            st = em_error(EM_ERR_OOM, "learner: out of memory reading '%s'", path);
            break;
        }
        if (!parse_line(t, line)) {
            t->n_rows--;
            continue;
        }
        int oc[2] = {order1 ? tr_table_col(t, order1) : -1, order2 ? tr_table_col(t, order2) : -1};
        int64_t r = t->n_rows - 1, keep = r;
        /* a resumed session starts again after its checkpoint: drop what it supersedes */
        while (keep > 0 && cmp_pos(t, oc, keep - 1, r) >= 0) keep--;
        if (keep < r) {
            for (int c = 0; c < t->n_cols; c++) t->cols[c][keep] = t->cols[c][r];
            t->n_rows = keep + 1;
        }
        if (ch == EOF) break;
    }
    free(line);
    fclose(f);
    if (st != EM_OK) tr_table_free(t);
    return st;
}

static char *run_path(const em_learner *l, const char *name)
{
    size_t n = strlen(l->run_dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", l->run_dir, name);
    return p;
}

/* Writes a table as CSV: a header row, then one row per record; empty fields where NaN. */
static em_status write_csv(const tr_table *t, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) return em_error(EM_ERR_IO, "learner: cannot write '%s': %s", path, strerror(errno));
    for (int c = 0; c < t->n_cols; c++) fprintf(f, "%s%s", c ? "," : "", t->names[c]);
    fputc('\n', f);
    char v[40];
    for (int64_t r = 0; r < t->n_rows; r++) {
        for (int c = 0; c < t->n_cols; c++) {
            double x = t->cols[c][r];
            if (isnan(x) || isinf(x))
                v[0] = 0;
            else
                tr_fmt(v, sizeof v, x, true);
            fprintf(f, "%s%s", c ? "," : "", v);
        }
        fputc('\n', f);
    }
    if (fclose(f) != 0) return em_error(EM_ERR_IO, "learner: cannot write '%s'", path);
    return EM_OK;
}

em_status tr_write_csv(em_learner *l)
{
    static const char *const files[2][4] = {{"metrics.jsonl", "metrics.csv", "epoch", "batch"},
                                            {"epochs.jsonl", "epochs.csv", "epoch", NULL}};
    em_status st = EM_OK;
    for (int i = 0; i < 2 && st == EM_OK; i++) {
        char *in = run_path(l, files[i][0]), *out = run_path(l, files[i][1]);
        tr_table t;
        st = in && out ? tr_table_read(&t, in, files[i][2], files[i][3])
                       : em_error(EM_ERR_OOM, "learner: out of memory");
        if (st == EM_OK) st = write_csv(&t, out);
        if (in && out) tr_table_free(&t);
        free(in);
        free(out);
    }
    return st;
}

void tr_load_series(em_learner *l)
{
    uint64_t mark = em_error_mark();
    char *path = run_path(l, "metrics.jsonl");
    tr_table t;
    if (!path || tr_table_read(&t, path, "epoch", "batch") != EM_OK) {
        free(path);
        em_error_forget(mark); /* no earlier curves to show */
        return;
    }
    free(path);
    int ce = tr_table_col(&t, "epoch"), cb = tr_table_col(&t, "batch"),
        cs = tr_table_col(&t, "step"), cl = tr_table_col(&t, "loss"),
        ca = tr_table_col(&t, "accuracy"), cr = tr_table_col(&t, "lr");
    int cx[TR_MAX_SCALARS];
    for (int k = 0; k < l->n_scalars; k++) cx[k] = tr_table_col(&t, l->scalars[k].name);
    for (int64_t r = 0; ce >= 0 && cb >= 0 && cs >= 0 && r < t.n_rows; r++) {
        /* only what ran before the checkpoint the run resumed from */
        if (isnan(t.cols[ce][r]) || isnan(t.cols[cb][r]) || isnan(t.cols[cs][r])) continue;
        int64_t e = (int64_t)t.cols[ce][r] - 1, b = (int64_t)t.cols[cb][r];
        if (e > l->epoch || (e == l->epoch && b >= l->batch)) break;
        double x = t.cols[cs][r];
        if (cl >= 0 && !isnan(t.cols[cl][r])) tr_series_push(&l->s_loss, x, t.cols[cl][r]);
        if (ca >= 0 && !isnan(t.cols[ca][r])) tr_series_push(&l->s_acc, x, t.cols[ca][r]);
        if (cr >= 0 && !isnan(t.cols[cr][r])) tr_series_push(&l->s_lr, x, t.cols[cr][r]);
        for (int k = 0; k < l->n_scalars; k++)
            if (cx[k] >= 0 && !isnan(t.cols[cx[k]][r])) {
                l->scalars[k].last = t.cols[cx[k]][r];
                tr_series_push(&l->scalars[k].series, x, l->scalars[k].last);
            }
    }
    tr_table_free(&t);
}

/* ---- the run's description ------------------------------------------------------------------ */

char *tr_command_line(void)
{
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (!f) return NULL;
    size_t cap = 1024, n = 0;
    char *raw = malloc(cap);
    int ch;
    while (raw && (ch = fgetc(f)) != EOF) {
        if (n + 1 == cap) {
            char *g = realloc(raw, cap * 2);
            if (!g) break;
            raw = g;
            cap *= 2;
        }
        raw[n++] = (char)ch;
    }
    fclose(f);
    if (!raw) return NULL;
    /* each argument shell-quoted where it needs it: at most 4 bytes out per byte in, plus 3 */
    char *out = malloc(4 * n + 3 * (n + 1) + 1);
    size_t o = 0;
    for (size_t i = 0; out && i < n;) {
        const char *arg = raw + i;
        size_t len = strnlen(arg, n - i);
        bool plain = len > 0;
        for (size_t j = 0; j < len && plain; j++)
            plain =
                strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%",
                       arg[j]) != NULL;
        if (o) out[o++] = ' ';
        if (plain) {
            memcpy(out + o, arg, len);
            o += len;
        } else {
            out[o++] = '\'';
            for (size_t j = 0; j < len; j++) {
                if (arg[j] == '\'') {
                    memcpy(out + o, "'\\''", 4);
                    o += 4;
                } else {
                    out[o++] = arg[j];
                }
            }
            out[o++] = '\'';
        }
        i += len + 1;
    }
    if (out) out[o] = 0;
    free(raw);
    return out;
}

static int kv(tr_kv *out, int n, int cap, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int kv(tr_kv *out, int n, int cap, const char *key, const char *fmt, ...)
{
    if (n >= cap) return n;
    snprintf(out[n].key, sizeof out[n].key, "%s", key);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out[n].value, sizeof out[n].value, fmt, ap);
    va_end(ap);
    return n + 1;
}

int tr_run_facts(em_learner *l, tr_kv *out, int cap)
{
    int n = 0;
    n = kv(out, n, cap, "Ember", "%s (commit %s)", em_version(), EMBER_COMMIT);
    char host[256] = "unknown";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = 0;
    struct utsname u;
    if (uname(&u) == 0)
        n = kv(out, n, cap, "Host", "%s (%s %s, %s)", host, u.sysname, u.release, u.machine);
    else
        n = kv(out, n, cap, "Host", "%s", host);
    uint64_t mark = em_error_mark();
    em_device_props cpu;
    if (em_device_get_props(EM_CPU, &cpu) == EM_OK)
        n = kv(out, n, cap, "CPU", "%s, %d hardware threads, %d used", cpu.name, cpu.processors,
               em_get_num_threads());
    char dev[32];
    em_device_str(l->m->device, dev, sizeof dev);
    em_device_props p;
    if (l->m->device.backend != 0 && em_device_get_props(l->m->device, &p) == EM_OK)
        n = kv(out, n, cap, "Device", "%s (%s)", dev, p.name);
    else
        n = kv(out, n, cap, "Device", "%s", dev);
    em_error_forget(mark); /* the records name what could be read */
    if (l->cfg.seed)
        n = kv(out, n, cap, "Seed", "%llu", (unsigned long long)l->cfg.seed);
    else
        n = kv(out, n, cap, "Seed", "%llu (generator offset %llu when training began)",
               (unsigned long long)l->run_rng.seed, (unsigned long long)l->run_rng.offset);
    char mon[96];
    snprintf(mon, sizeof mon, "%s (%s)", l->monitor, l->maximize ? "max" : "min");
    n = kv(out, n, cap, "Monitor", "%s", mon);
    n = kv(out, n, cap, "Parameters", "%lld trainable of %lld",
           (long long)em_module_count(l->m, true), (long long)em_module_count(l->m, false));
    return n;
}

static const char *optim_name(const em_optim *o)
{
    switch (o->kind) {
    case OPT_SGD: return "SGD";
    case OPT_ADAM: return "Adam";
    case OPT_ADAMW: return "AdamW";
    case OPT_RMSPROP: return "RMSprop";
    case OPT_ADAGRAD: return "Adagrad";
    case OPT_LION: return "Lion";
    case OPT_MUON: return "Muon";
    }
    return "?";
}

int tr_hparams(em_learner *l, tr_kv *out, int cap)
{
    const em_learner_cfg *c = &l->cfg;
    const em_optim *o = l->o;
    int n = 0;
    switch (o->kind) {
    case OPT_SGD:
        n = kv(out, n, cap, "optimizer", "SGD (momentum %g, dampening %g, weight decay %g%s)",
               o->sgd.momentum, o->sgd.dampening, o->sgd.weight_decay,
               o->sgd.nesterov ? ", Nesterov" : "");
        break;
    case OPT_ADAM:
    case OPT_ADAMW:
        n = kv(out, n, cap, "optimizer", "%s (betas %g, %g; eps %g; weight decay %g%s)",
               optim_name(o), o->adam.beta1, o->adam.beta2, o->adam.eps, o->adam.weight_decay,
               o->adam.amsgrad ? "; AMSGrad" : "");
        break;
    case OPT_RMSPROP:
        n = kv(out, n, cap, "optimizer", "RMSprop (alpha %g, eps %g, momentum %g, weight decay %g)",
               o->rms.alpha, o->rms.eps, o->rms.momentum, o->rms.weight_decay);
        break;
    case OPT_LION:
        n = kv(out, n, cap, "optimizer", "Lion (betas %g, %g; weight decay %g)", o->lion.beta1,
               o->lion.beta2, o->lion.weight_decay);
        break;
    default: n = kv(out, n, cap, "optimizer", "%s", optim_name(o)); break;
    }
    n = kv(out, n, cap, "learning rate", "%g (initial)", o->lr0);
    if (l->s)
        n = kv(out, n, cap, "scheduler", "stepped per %s",
               c->sched_per_iter ? "optimizer step (given its loss)"
                                 : "epoch (given the monitored metric)");
    n = kv(out, n, cap, "epochs", "%lld", (long long)c->epochs);
    if (c->train_batches)
        n = kv(out, n, cap, "train batches", "%lld per epoch", (long long)c->train_batches);
    if (c->val_batches)
        n = kv(out, n, cap, "validation batches", "%lld per epoch", (long long)c->val_batches);
    if (c->grad_accum > 1)
        n = kv(out, n, cap, "gradient accumulation", "%d micro-batches (%s)", c->grad_accum,
               c->accum_sum ? "summed" : "averaged");
    if (c->clip_norm > 0) n = kv(out, n, cap, "gradient clipping", "norm %g", c->clip_norm);
    if (c->patience > 0)
        n = kv(out, n, cap, "early stopping", "patience %lld, min delta %g", (long long)c->patience,
               c->min_delta);
    if (c->ckpt_every > 0 && c->keep_last > 0)
        n = kv(out, n, cap, "checkpoints", "every %lld epoch%s, the last %d kept%s",
               (long long)c->ckpt_every, c->ckpt_every == 1 ? "" : "s", c->keep_last,
               c->keep_best ? ", and the best" : "");
    else if (c->ckpt_every > 0)
        n = kv(out, n, cap, "checkpoints", "every %lld epoch%s, all kept%s",
               (long long)c->ckpt_every, c->ckpt_every == 1 ? "" : "s",
               c->keep_best ? ", and the best" : "");
    for (int i = 0; i < l->n_params; i++)
        n = kv(out, n, cap, l->params[i].name, "%s", l->params[i].value);
    return n;
}

int tr_sessions(const em_learner *l, tr_session *out, int cap)
{
    int n = 0, total = 0;
    for (const char *s = l->sessions; s && *s; s++) total += *s == '\n';
    int skip = total > cap ? total - cap + 1 : 0; /* the first session and the latest ones */
    int i = 0;
    for (const char *s = l->sessions; s && *s && n < cap; i++) {
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        const char *t1 = memchr(s, '\t', len);
        const char *t2 = t1 ? memchr(t1 + 1, '\t', len - (size_t)(t1 + 1 - s)) : NULL;
        if (t1 && t2 && (i == 0 || i >= skip)) {
            tr_session *o = &out[n++];
            snprintf(o->when, sizeof o->when, "%.*s", (int)(t1 - s), s);
            o->step = strtoll(t1 + 1, NULL, 10);
            snprintf(o->command, sizeof o->command, "%.*s", (int)(s + len - t2 - 1), t2 + 1);
        }
        s += len + (nl != NULL);
    }
    return n;
}

/* ---- summary.md ----------------------------------------------------------------------------- */

const char *tr_reason_text(em_stop_reason r)
{
    switch (r) {
    case EM_STOP_DONE: return "all epochs ran";
    case EM_STOP_EARLY: return "early stopping";
    case EM_STOP_INTERRUPT: return "interrupted (checkpoint saved)";
    case EM_STOP_ERROR: return "error";
    default: return "not run";
    }
}

/* Columns of the summary/report tables. */
const int tr_table_cols[] = {TC_EPOCH,   TC_LOSS,     TC_ACC,     TC_TOPK,     TC_F1_MACRO,
                             TC_PPL,     TC_VAL_LOSS, TC_VAL_ACC, TC_VAL_TOPK, TC_VAL_F1_MACRO,
                             TC_VAL_PPL, TC_LR,       TC_IPS,     TC_TIME,     TC_STEPS};
const int tr_n_table_cols = (int)(sizeof tr_table_cols / sizeof tr_table_cols[0]);

bool tr_col_used(const em_learner *l, int c)
{
    for (int64_t e = 0; e < l->n_hist; e++)
        if (!isnan(l->hist[e * TC_COUNT + c])) return true;
    return false;
}

bool tr_xcol_used(const em_learner *l, int k)
{
    for (int64_t e = 0; e < l->n_hist; e++)
        if (!isnan(l->xhist[e * TR_MAX_SCALARS + k])) return true;
    return false;
}

static bool col_maximize(int c)
{
    const char *n = tr_col_names[c];
    return strstr(n, "acc") || strstr(n, "f1") || strstr(n, "precision") || strstr(n, "recall");
}

/* Best value of column c and its epoch index. */
static double col_best(const em_learner *l, int c, int64_t *at)
{
    double best = NAN;
    *at = -1;
    bool mx = col_maximize(c);
    for (int64_t e = 0; e < l->n_hist; e++) {
        double v = l->hist[e * TC_COUNT + c];
        if (isnan(v)) continue;
        if (isnan(best) || (mx ? v > best : v < best)) {
            best = v;
            *at = e;
        }
    }
    return best;
}

static const int best_cols[] = {TC_LOSS,     TC_ACC,          TC_TOPK,         TC_F1_MICRO,
                                TC_F1_MACRO, TC_PPL,          TC_VAL_LOSS,     TC_VAL_ACC,
                                TC_VAL_TOPK, TC_VAL_F1_MICRO, TC_VAL_F1_MACRO, TC_VAL_PPL};
#define N_BEST ((int)(sizeof best_cols / sizeof best_cols[0]))

/* Markdown table cells must not hold a bare '|' or a line break. */
static void md_cell(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            fputs("\\|", f);
        else if (*s == '\n' || *s == '\r')
            fputc(' ', f);
        else
            fputc(*s, f);
    }
}

em_status tr_write_summary(em_learner *l)
{
    char path[1024], v[40];
    snprintf(path, sizeof path, "%s/summary.md", l->run_dir);
    FILE *f = fopen(path, "w");
    if (!f) return em_error(EM_ERR_IO, "learner: cannot write '%s': %s", path, strerror(errno));
    const char *name = strrchr(l->run_dir, '/');
    fprintf(f, "# Training run %s\n\n", name ? name + 1 : l->run_dir);
    fprintf(f, "- Ended: %s\n", tr_reason_text(l->reason));
    fprintf(f, "- Epochs: %lld of %lld; optimizer steps: %lld\n", (long long)l->n_hist,
            (long long)l->cfg.epochs, (long long)l->steps);
    fprintf(f, "- Time: %.1f s\n", l->elapsed_prev);
    tr_fmt(v, sizeof v, l->best, false);
    fprintf(f, "- Best %s: %s (epoch %lld)\n", l->monitor, v, (long long)l->best_epoch + 1);
    if (l->status[0]) fprintf(f, "- Note: %s\n", l->status);
    tr_kv kvs[48];
    int n = tr_run_facts(l, kvs, 48);
    fprintf(f, "\n## Run\n\n");
    for (int i = 0; i < n; i++) fprintf(f, "- %s: %s\n", kvs[i].key, kvs[i].value);
    fprintf(f, "- Run directory: %s\n", l->run_dir);
    tr_session ss[16];
    int ns = tr_sessions(l, ss, 16);
    fprintf(f, "\n## Sessions\n\n");
    if (ns > 1) fprintf(f, "The run was resumed: %d sessions.\n\n", ns);
    fprintf(f, "| started | from step | command |\n|---|---:|---|\n");
    for (int i = 0; i < ns; i++) {
        fprintf(f, "| %s | %lld | `", ss[i].when, ss[i].step);
        md_cell(f, ss[i].command);
        fprintf(f, "` |\n");
    }
    n = tr_hparams(l, kvs, 48);
    fprintf(f, "\n## Hyperparameters\n\n| name | value |\n|---|---|\n");
    for (int i = 0; i < n; i++) {
        fputs("| ", f);
        md_cell(f, kvs[i].key);
        fputs(" | ", f);
        md_cell(f, kvs[i].value);
        fputs(" |\n", f);
    }
    fprintf(f, "\n## Epochs\n\n|");
    for (int i = 0; i < tr_n_table_cols; i++)
        if (tr_col_used(l, tr_table_cols[i])) fprintf(f, " %s |", tr_col_names[tr_table_cols[i]]);
    for (int k = 0; k < l->n_scalars; k++)
        if (tr_xcol_used(l, k)) fprintf(f, " %s |", l->scalars[k].name);
    fprintf(f, "\n|");
    for (int i = 0; i < tr_n_table_cols; i++)
        if (tr_col_used(l, tr_table_cols[i])) fprintf(f, "---:|");
    for (int k = 0; k < l->n_scalars; k++)
        if (tr_xcol_used(l, k)) fprintf(f, "---:|");
    fputc('\n', f);
    for (int64_t e = 0; e < l->n_hist; e++) {
        fputc('|', f);
        for (int i = 0; i < tr_n_table_cols; i++) {
            if (!tr_col_used(l, tr_table_cols[i])) continue;
            tr_fmt(v, sizeof v, l->hist[e * TC_COUNT + tr_table_cols[i]], false);
            fprintf(f, " %s |", v);
        }
        for (int k = 0; k < l->n_scalars; k++) {
            if (!tr_xcol_used(l, k)) continue;
            tr_fmt(v, sizeof v, l->xhist[e * TR_MAX_SCALARS + k], false);
            fprintf(f, " %s |", v);
        }
        fputc('\n', f);
    }
    if (l->n_hist == 0) fprintf(f, "\nNo epoch finished.\n");
    fprintf(f, "\n## Best metrics\n\n| metric | best | epoch |\n|---|---:|---:|\n");
    for (int i = 0; i < N_BEST; i++) {
        int64_t at;
        double b = col_best(l, best_cols[i], &at);
        if (isnan(b)) continue;
        tr_fmt(v, sizeof v, b, false);
        fprintf(f, "| %s | %s | %lld |\n", tr_col_names[best_cols[i]], v, (long long)at + 1);
    }
    uint64_t mark = em_error_mark();
    char *model = em_module_summary(l->m);
    if (model) {
        fprintf(f, "\n## Model\n\n```\n%s%s```\n", model,
                model[0] && model[strlen(model) - 1] == '\n' ? "" : "\n");
        em_free(model);
    } else {
        em_error_forget(mark); /* a summary without the model's */
    }
    fprintf(f, "\n## Files\n\nmetrics.jsonl and metrics.csv (one row per training batch), "
               "epochs.jsonl and epochs.csv (one row per epoch), train.log, report.html, "
               "checkpoints/.\n");
    if (fclose(f) != 0) return em_error(EM_ERR_IO, "learner: cannot write '%s'", path);
    return EM_OK;
}
