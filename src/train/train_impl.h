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

/* A growing series of (x, y) points that halves itself (pairwise means) past a cap, for the
 * dashboard's plots. */
typedef struct tr_series {
    double *x, *v;
    int64_t n, cap;
    int64_t stride;      /* raw points per stored point */
    double pend_x, pend; /* pending sums toward the next stored point */
    int64_t pend_n;
} tr_series;
void tr_series_push(tr_series *s, double x, double y);
void tr_series_free(tr_series *s);

/* Custom scalars (em_learner_log_scalar / em_learner_log_epoch_scalar). */
#define TR_MAX_SCALARS 32
typedef struct tr_scalar {
    char name[64];
    double step_sum, epoch_sum; /* values of the running step and epoch */
    int64_t step_n, epoch_n;
    double last; /* the latest step value, for the dashboard */
    tr_series series;
} tr_scalar;

/* A hyperparameter recorded with em_learner_log_param. */
typedef struct tr_param {
    char *name, *value;
} tr_param;

/* A JSON-lines file of the run read back: named columns of numbers (NaN where a row has no
 * value). A row that does not come after the one before it (by the `order` columns) replaces
 * the rows from its position on, as a session resumed from an earlier checkpoint rewrites them. */
typedef struct tr_table {
    char **names;
    double **cols;
    int n_cols;
    int64_t n_rows, cap_rows;
} tr_table;
/* Reads path (missing: an empty table); order: up to two column names. */
em_status tr_table_read(tr_table *t, const char *path, const char *order1, const char *order2);
int tr_table_col(const tr_table *t, const char *name); /* -1 when absent */
void tr_table_free(tr_table *t);

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
    /* epoch history [n_hist][TC_COUNT], custom scalars' [n_hist][TR_MAX_SCALARS] */
    double *hist, *xhist;
    int64_t n_hist, cap_hist;
    int64_t session_hist; /* epochs finished before this fit began */
    tr_scalar scalars[TR_MAX_SCALARS];
    int n_scalars;
    bool in_train_step, in_fit;
    tr_param *params;
    int n_params;
    /* one line per session: "<date>\t<step>\t<command line>" */
    char *sessions;
    em_rng_state run_rng; /* the generator when the run began */
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
    tr_series s_loss, s_acc, s_lr;
    tr_dash *dash;
    bool plain;
    int plot; /* dashboard plot page */
    char status[160];
};

double tr_now(void);
/* Seconds of training so far, across resumed sessions. */
double tr_elapsed(const em_learner *l);
/* "1 epoch", "2 epochs": n and the word, plural unless n is 1. */
const char *tr_plural(int64_t n, const char *word, char *buf, size_t cap);
/* Room for n epoch records in hist and xhist (new custom values NaN). */
em_status tr_hist_reserve(em_learner *l, int64_t n);
/* Index of a custom scalar, -1 when absent. */
int tr_scalar_find(const em_learner *l, const char *name);

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
/* The result line of epoch record e. */
void tr_plain_epoch(em_learner *l, int64_t e);
void tr_plain_msg(em_learner *l, const char *msg);

/* records.c: the JSON-lines files, their CSV copies, the run's description */
em_status tr_mkdirs(const char *path);
/* One training batch: `step` is the optimizer step its gradients go into (from 1). */
void tr_json_step(em_learner *l, int64_t step, double loss, double acc, double lr, double ips,
                  double t);
void tr_json_epoch(em_learner *l, const double *rec, const double *custom);
/* metrics.csv and epochs.csv from the JSON-lines files (all sessions). */
em_status tr_write_csv(em_learner *l);
/* Fills the dashboard's step series from metrics.jsonl (a resumed run's earlier sessions). */
void tr_load_series(em_learner *l);
/* The command line of this process (from /proc/self/cmdline), shell-quoted; malloc'd. */
char *tr_command_line(void);
/* "name: value" facts of the run (version, commit, host, device, seed ...), hyperparameters
 * (the learner's options, the optimizer, em_learner_log_param's) and the model summary. */
typedef struct tr_kv {
    char key[48];
    char value[512];
} tr_kv;
int tr_run_facts(em_learner *l, tr_kv *out, int cap);
int tr_hparams(em_learner *l, tr_kv *out, int cap);
/* The sessions of the run (the first and the latest when more than cap). */
typedef struct tr_session {
    char when[64];
    long long step;
    char command[1024];
} tr_session;
int tr_sessions(const em_learner *l, tr_session *out, int cap);
em_status tr_write_summary(em_learner *l);
/* Prints a number for JSON/Markdown (null / "-" for NaN). */
void tr_fmt(char *buf, size_t cap, double v, bool json);
/* Summary and report helpers shared by records.c and report.c */
const char *tr_reason_text(em_stop_reason r);
extern const int tr_table_cols[];
extern const int tr_n_table_cols;
bool tr_col_used(const em_learner *l, int c);
bool tr_xcol_used(const em_learner *l, int k);

/* report.c */
em_status tr_write_report(em_learner *l);
/* Axis ticks for charts: a round spacing (1, 2 or 5 times a power of ten) giving about `target`
 * ticks over `range`, and tick value v printed with the decimals that spacing needs. */
double tr_nice_step(double range, int target);
void tr_tick_label(char *buf, size_t cap, double v, double step);

#endif
