/* The learners' test fixture: a tiny separable problem with in-memory batch callbacks, whole
 * training sessions (fresh model, Adam, StepLR, fit) and readers for the run directory's files.
 * Included by the train layer's test programs. */
#ifndef EMBER_TEST_LEARNER_FIXTURE_H
#define EMBER_TEST_LEARNER_FIXTURE_H

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"
#include "store/store_impl.h"

#define N     64
#define BATCH 8

static em_tensor *X, *Y;
static char root[64];

/* Two Gaussian-free blobs: class by the sign of x0 + x1, points on a deterministic spiral. */
static inline void make_data(void)
{
    float x[N * 2];
    int64_t y[N];
    for (int i = 0; i < N; i++) {
        double a = 0.37 * i, r = 0.3 + 0.02 * (i % 7);
        int c = i % 2;
        x[2 * i] = (float)((c ? 1.0 : -1.0) + r * cos(a));
        x[2 * i + 1] = (float)((c ? 1.0 : -1.0) + r * sin(a));
        y[i] = c;
    }
    X = em_from_f32(x, EM_SHAPE(N, 2));
    Y = em_from_i64(y, EM_SHAPE(N));
}

typedef struct run_opts {
    int64_t interrupt_epoch, interrupt_batch; /* raise SIGINT there (-1: never) */
    bool use_end;                             /* signal the end of an epoch instead of a count */
    bool fail;                                /* return an error at batch 2 */
    bool scalars; /* log "custom" (0.5 batch + epoch) per step and "val_custom" (2 + batch) from
                     the validation step */
} run_opts;

typedef struct user {
    em_module *m;
    run_opts o;
} user;

static inline em_status train_step(const em_step_ctx *ctx, em_step_out *out)
{
    user *u = ctx->user;
    if (u->o.use_end && ctx->batch * BATCH >= N) {
        out->end = true;
        return EM_OK;
    }
    if (u->o.fail && ctx->batch == 2) return em_error(EM_ERR_STATE, "test: failing step");
    if (ctx->epoch == u->o.interrupt_epoch && ctx->batch == u->o.interrupt_batch) raise(SIGINT);
    if (u->o.scalars &&
        em_learner_log_scalar(ctx->learner, "custom",
                              0.5 * (double)ctx->batch + (double)ctx->epoch) != EM_OK)
        return em_last_status();
    em_tensor *xb = em_narrow(X, 0, ctx->batch * BATCH, BATCH);
    out->targets = em_narrow(Y, 0, ctx->batch * BATCH, BATCH);
    out->outputs = em_forward(u->m, xb);
    out->loss = em_cross_entropy(out->outputs, out->targets, (em_ce_cfg){0});
    em_release(xb);
    return EM_OK;
}

/* Validation on every other point (the same set each epoch). */
static inline em_status val_step(const em_step_ctx *ctx, em_step_out *out)
{
    user *u = ctx->user;
    if (ctx->batch >= 2) {
        out->end = true;
        return EM_OK;
    }
    if (u->o.scalars &&
        em_learner_log_epoch_scalar(ctx->learner, "val_custom", 2.0 + (double)ctx->batch) != EM_OK)
        return em_last_status();
    em_tensor *xb = em_narrow(X, 0, ctx->batch * 32, 32);
    out->targets = em_narrow(Y, 0, ctx->batch * 32, 32);
    out->outputs = em_forward(u->m, xb);
    out->loss = em_cross_entropy(out->outputs, out->targets, (em_ce_cfg){0});
    em_release(xb);
    return EM_OK;
}

static inline em_module *make_model(void)
{
    em_seed(7);
    return em_sequential(EM_CPU, em_linear_new(2, 8, EM_CPU), em_relu_new(), em_dropout_new(0.2),
                         em_linear_new(8, 2, EM_CPU));
}

typedef struct params {
    float v[64];
    int n;
} params;

static inline void collect(void *ctx, const char *name, em_module_entry *e)
{
    (void)name;
    params *p = ctx;
    int64_t n = em_tensor_numel(e->tensor);
    em_to_data(e->tensor, p->v + p->n, EM_F32, n);
    p->n += (int)n;
}

/* A whole training session: fresh model/optimizer/scheduler, fit, parameters out. */
typedef struct session {
    em_learner_cfg cfg;
    run_opts o;
    params p;
    em_stop_reason reason;
    em_status st;
    int64_t epochs_done;
    double last_loss, last_val_acc, best;
    double custom[4], val_custom[4]; /* the custom scalars of epochs 1 to 4 */
} session;

static inline void run_session(session *s)
{
    user u = {make_model(), s->o};
    em_optim *o = em_adam_new(u.m, (em_adam_cfg){.lr = 0.05});
    em_sched *sc = em_sched_step_new(o, 2, 0.5);
    em_learner_cfg cfg = s->cfg;
    cfg.train_step = train_step;
    if (!cfg.val_step) cfg.val_step = val_step;
    cfg.user = &u;
    cfg.runs_dir = root;
    em_learner *l = em_learner_new(u.m, o, sc, cfg);
    CHECK(l != NULL, "learner: %s", em_last_error());
    if (s->o.scalars) em_learner_log_param(l, "data", "spiral blobs");
    s->st = em_learner_fit(l);
    s->reason = em_learner_stop_reason(l);
    s->epochs_done = em_learner_epochs_done(l);
    s->last_loss = em_learner_metric(l, -1, "loss");
    s->last_val_acc = em_learner_metric(l, -1, "val_accuracy");
    s->best = em_learner_best(l, NULL);
    for (int e = 0; e < 4; e++) {
        s->custom[e] = em_learner_metric(l, e, "custom");
        s->val_custom[e] = em_learner_metric(l, e, "val_custom");
    }
    s->p.n = 0;
    em_module_visit(u.m, collect, &s->p);
    em_learner_free(l);
    em_sched_free(sc);
    em_optim_free(o);
    em_module_free(u.m);
}

static inline char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = 0;
    fclose(f);
    if (len) *len = got;
    return buf;
}

/* Lines of a JSON-lines file that parse as objects; -1 when the file is missing. */
static inline int json_lines(const char *path)
{
    char *text = read_file(path, NULL);
    if (!text) return -1;
    int n = 0;
    for (char *line = text; *line;) {
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        js_doc *d = js_parse(line, len, "jsonl");
        CHECK(d != NULL, "line %d of %s parses: %.80s", n + 1, path, line);
        em_clear_error();
        js_free(d);
        n++;
        line = nl ? nl + 1 : line + len;
    }
    free(text);
    return n;
}

static inline bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

#endif
