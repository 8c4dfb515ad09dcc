/* Internal interface of the train layer: the learner's state, shared by the loop (learner.c),
 * the checkpoints (checkpoint.c), the dashboard and plain progress lines (dashboard.c) and the
 * run-directory files (report.c). */
#ifndef EMBER_TRAIN_IMPL_H
#define EMBER_TRAIN_IMPL_H

#include <ember/ember.h>
#include <ember/store.h>
#include <ember/train.h>
#include <signal.h>

/* Columns of an epoch record, in epochs.jsonl order. */
typedef enum tr_col {
    TC_EPOCH,
    TC_LOSS,
    TC_ACC,
    TC_TOPK,
    TC_P_MICRO,
    TC_R_MICRO,
    TC_F1_MICRO,
    TC_P_MACRO,
    TC_R_MACRO,
    TC_F1_MACRO,
    TC_PPL,
    TC_VAL_LOSS,
    TC_VAL_ACC,
    TC_VAL_TOPK,
    TC_VAL_P_MICRO,
    TC_VAL_R_MICRO,
    TC_VAL_F1_MICRO,
    TC_VAL_P_MACRO,
    TC_VAL_R_MACRO,
    TC_VAL_F1_MACRO,
    TC_VAL_PPL,
    TC_LR,
    TC_IPS,
    TC_CPU,
    TC_RSS_MB,
    TC_TIME,
    TC_STEPS,
    TC_COUNT
} tr_col;

extern const char *const tr_col_names[TC_COUNT];
int tr_col_find(const char *name); /* -1 when unknown */

/* A growing series that halves itself (pairwise means) past a cap, for plots. */
typedef struct tr_series {
    double *v;
    int64_t n, cap;
    int64_t stride; /* raw points per stored point */
    double pend;    /* pending sum toward the next stored point */
    int64_t pend_n;
} tr_series;
void tr_series_push(tr_series *s, double x);
void tr_series_free(tr_series *s);

typedef struct tr_dash tr_dash;

struct em_learner {
    em_module *m;
    em_optim *o;
    em_sched *s;
    em_learner_cfg cfg;
    char *run_dir, *ckpt_dir;
    FILE *out;
    FILE *f_steps, *f_epochs;
    em_metrics *train_m, *val_m;
    /* position: the next batch to run */
    int64_t epoch, batch, steps;
    int64_t batches_seen; /* batches per epoch learned from the last finished epoch */
    int64_t val_seen;
    /* epoch history [n_hist][TC_COUNT] */
    double *hist;
    int64_t n_hist, cap_hist;
    /* metrics handed to em_sched_step, replayed on resume */
    double *sched_hist;
    int64_t n_sched, cap_sched;
    /* monitored metric */
    char monitor[64];
    int monitor_col;
    bool maximize;
    double best;
    int64_t best_epoch, bad_epochs;
    /* stopping */
    volatile sig_atomic_t stop_requested;
    em_stop_reason reason;
    /* time */
    double t0;           /* monotonic start of this fit */
    double elapsed_prev; /* seconds spent in earlier sessions (resume) */
    double t_epoch0, cpu_epoch0;
    int64_t epoch_items;
    double epoch_time_prev; /* seconds of this epoch spent before a resume */
    /* latest step, for the dashboard and plain lines */
    double last_loss, last_acc, last_lr, last_ips, last_cpu;
    int64_t last_rss;
    double ips_t, ips_cpu; /* time/CPU at the last rate sample */
    int64_t ips_items;
    tr_series s_loss, s_acc;
    tr_dash *dash;
    bool plain;
    int plot; /* dashboard plot page */
    char status[160];
};

double tr_now(void);
/* Seconds of training so far, across resumed sessions. */
double tr_elapsed(const em_learner *l);

/* checkpoint.c */
em_status tr_checkpoint_periodic(em_learner *l, bool best);
char *tr_latest_checkpoint(const em_learner *l); /* malloc'd path or NULL */
/* Deletes the oldest numbered checkpoints, keeping `keep` (0: deletes them all). */
void tr_checkpoint_prune(em_learner *l, int keep);

/* metrics.c: accumulator state for mid-epoch checkpoints */
int64_t tr_metrics_state_len(const em_metrics *m);
void tr_metrics_state_get(const em_metrics *m, double *out);
em_status tr_metrics_state_set(em_metrics *m, const double *in, int64_t n);
void tr_metrics_counts(const em_metrics *m, int64_t *counted, int64_t *correct);

/* dashboard.c */
tr_dash *tr_dash_open(em_learner *l); /* NULL: use plain lines */
void tr_dash_draw(em_learner *l, bool force);
/* Reads keys; true when the user asked to stop. */
bool tr_dash_poll(em_learner *l);
void tr_dash_close(em_learner *l);
bool tr_dashboard_wanted(const em_learner *l);
void tr_plain_step(em_learner *l, int64_t total_batches);
void tr_plain_epoch(em_learner *l, const double *rec);
void tr_plain_msg(em_learner *l, const char *msg);

/* report.c */
em_status tr_mkdirs(const char *path);
void tr_json_step(em_learner *l, double loss, double acc, double lr, double ips, double t);
void tr_json_epoch(em_learner *l, const double *rec);
em_status tr_write_summary(em_learner *l);
em_status tr_write_report(em_learner *l);
/* Prints a number for JSON/Markdown (null / "-" for NaN). */
void tr_fmt(char *buf, size_t cap, double v, bool json);

#endif
