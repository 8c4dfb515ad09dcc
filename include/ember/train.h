/* Ember training: classification/language-model metrics, and the learner that runs epochs of
 * user step callbacks with gradient accumulation, schedulers, checkpoints, early stopping,
 * resume, a live terminal dashboard and a run directory with logs and reports.
 * Guide: docs/training.md. */
#ifndef EMBER_TRAIN_H
#define EMBER_TRAIN_H

#include <stdio.h>

#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- metrics ------------------------------------------------------------------------------- */

/* An accumulator of loss and classification counts over many batches (one epoch, say). */
typedef struct em_metrics em_metrics;

/* Values computed from an accumulator; NaN where nothing was counted. Precision, recall and F1
 * follow scikit-learn: micro from the summed counts, macro as the unweighted mean over the
 * classes present in the targets or the predictions, 0 where a ratio is 0/0. */
typedef struct em_metric_values {
    double loss;          /* mean loss per item */
    double perplexity;    /* exp(token-weighted mean loss) */
    double accuracy;      /* top-1 */
    double topk_accuracy; /* target among the k largest scores */
    double precision_micro, recall_micro, f1_micro;
    double precision_macro, recall_macro, f1_macro;
    int64_t items;   /* items with a loss */
    int64_t counted; /* items with predictions */
    int classes;     /* size of the confusion matrix */
} em_metric_values;

/* topk: the k of top-k accuracy (0: 5). */
EM_API em_metrics *em_metrics_new(int topk);
EM_API void em_metrics_free(em_metrics *m);
EM_API void em_metrics_reset(em_metrics *m);
/* Adds a batch's mean loss over `items` items; `tokens` (0: items) weights perplexity. */
EM_API void em_metrics_add_loss(em_metrics *m, double mean_loss, int64_t items, int64_t tokens);
/* Adds predictions. outputs: scores [N, C] (or [..., C], flattened to rows), a float [N] or
 * [N, 1] binary logit (class 1 when > 0), or integer [N] predicted classes. targets: integer
 * class ids with N elements (float targets are rounded). Classes grow as they are seen. */
EM_API em_status em_metrics_update(em_metrics *m, const em_tensor *outputs,
                                   const em_tensor *targets);
/* The same from arrays of predicted and true classes. */
EM_API em_status em_metrics_update_ids(em_metrics *m, const int64_t *pred, const int64_t *target,
                                       int64_t n);
EM_API em_metric_values em_metrics_compute(const em_metrics *m);
/* Confusion count: items of true class t predicted as p (0 when out of range). */
EM_API int64_t em_metrics_confusion(const em_metrics *m, int t, int p);

/* Process statistics: resident memory in bytes (/proc/self/statm) and CPU seconds (user +
 * system, getrusage). */
EM_API int64_t em_process_rss(void);
EM_API double em_process_cpu_seconds(void);

/* ---- the learner --------------------------------------------------------------------------- */

typedef struct em_learner em_learner;

/* What one step hands back. All tensors are new references the learner releases. */
typedef struct em_step_out {
    em_tensor *loss;    /* one-element mean loss; required for training steps */
    em_tensor *outputs; /* optional scores/logits for classification metrics (see update) */
    em_tensor *targets; /* optional class ids */
    int64_t items;      /* items in the batch (0: outputs' dim 0, else 1) */
    int64_t tokens;     /* tokens the loss averages over, for perplexity (0: items) */
    bool end;           /* no batch: the epoch is over (leave the tensors NULL) */
} em_step_out;

/* Where a step stands. Steps must depend only on (epoch, batch) and the global generator so
 * that a resumed run sees the same batches (a loader: em_loader_reset(l, epoch) at batch 0 and
 * skip to `batch` when resuming mid-epoch). */
typedef struct em_step_ctx {
    em_learner *learner;
    void *user;
    int64_t epoch; /* from 0 */
    int64_t batch; /* batch index in the epoch, from 0 */
    int64_t step;  /* optimizer steps taken so far */
    bool training;
} em_step_ctx;

/* Runs the model on batch ctx->batch and fills out (the learner runs backward and the
 * optimizer for training steps; validation steps run under no-grad in eval mode). Return an
 * error status to abort the fit. */
typedef em_status (*em_step_fn)(const em_step_ctx *ctx, em_step_out *out);

typedef enum em_metric_mode {
    EM_MODE_AUTO = 0, /* max for accuracy/precision/recall/f1 names, min otherwise */
    EM_MODE_MIN = 1,
    EM_MODE_MAX = 2,
} em_metric_mode;

typedef enum em_dashboard_mode {
    EM_DASHBOARD_AUTO = 0, /* ncurses when `out` is a terminal and TERM is set */
    EM_DASHBOARD_ON = 1,
    EM_DASHBOARD_OFF = 2, /* plain progress lines */
} em_dashboard_mode;

typedef enum em_stop_reason {
    EM_STOP_NONE = 0,      /* not run yet */
    EM_STOP_DONE = 1,      /* all epochs ran */
    EM_STOP_EARLY = 2,     /* early stopping */
    EM_STOP_INTERRUPT = 3, /* SIGINT, 'q' or em_learner_request_stop */
    EM_STOP_ERROR = 4,
} em_stop_reason;

/* Zero means default everywhere. */
typedef struct em_learner_cfg {
    int64_t epochs;        /* 0: 1 */
    int64_t train_batches; /* batches per epoch (0: until a step sets `end`) */
    int64_t val_batches;   /* the same for validation */
    em_step_fn train_step; /* required */
    em_step_fn val_step;   /* optional, run after every epoch */
    void *user;
    int grad_accum;      /* micro-batches per optimizer step (0: 1); gradients are averaged */
    bool accum_sum;      /* sum accumulated gradients instead of averaging them */
    double clip_norm;    /* clip the global 2-norm of the gradients (0: off) */
    bool sched_per_iter; /* step the scheduler after every optimizer step (default: per epoch,
                           with the monitored metric for reduce-on-plateau) */
    int topk;            /* k of top-k accuracy (0: 5) */
    /* run directory runs_dir/name (defaults "runs" and "run") */
    const char *runs_dir;
    const char *name;
    bool no_run_dir; /* write nothing (no logs, reports or checkpoints) */
    /* checkpoints in <run>/checkpoints */
    int64_t ckpt_every;  /* epochs between checkpoints (0: 1; negative: never) */
    int keep_last;       /* numbered checkpoints kept (0: all) */
    bool keep_best;      /* also keep best.safetensors by `monitor` */
    const char *monitor; /* metric for best/early stopping/plateau (0: "val_loss" with a
                            validation step, else "loss") */
    em_metric_mode monitor_mode;
    /* early stopping on `monitor` (patience 0: off) */
    int64_t patience;
    double min_delta;
    bool resume;   /* continue from <run>/checkpoints/latest when it exists */
    uint64_t seed; /* em_seed(seed) before the first epoch of a fresh run (0: leave the
                      generator alone) */
    /* output */
    FILE *out;                   /* progress and dashboard (0: stdout) */
    em_dashboard_mode dashboard; /* EMBER_DASHBOARD=0/1 overrides */
    int64_t log_every;           /* plain mode: a line every N steps (0: 50) */
    bool quiet;                  /* no progress output at all */
} em_learner_cfg;

/* A learner over a module and its optimizer (scheduler optional). It borrows all three: they
 * must outlive it. */
EM_API em_learner *em_learner_new(em_module *m, em_optim *o, em_sched *s, em_learner_cfg cfg);
EM_API void em_learner_free(em_learner *l);
/* Runs the epochs. Returns EM_OK when training ended normally, early or on request (see
 * em_learner_stop_reason), else the step's or the learner's error. Writes the run directory. */
EM_API em_status em_learner_fit(em_learner *l);
/* Asks to stop after the current optimizer step (callable from a step or a signal handler). */
EM_API void em_learner_request_stop(em_learner *l);
EM_API em_stop_reason em_learner_stop_reason(const em_learner *l);
/* Epochs finished so far and optimizer steps taken. */
EM_API int64_t em_learner_epochs_done(const em_learner *l);
EM_API int64_t em_learner_steps(const em_learner *l);
/* Value of an epoch metric ("loss", "val_accuracy", "lr" ..., or a custom scalar) of epoch
 * `epoch` (negative: from the end, -1 the last), NaN when absent. */
EM_API double em_learner_metric(const em_learner *l, int64_t epoch, const char *name);
/* Best value of the monitored metric and its epoch (-1 when none). */
EM_API double em_learner_best(const em_learner *l, int64_t *epoch);
/* The run directory ("runs/<name>"), or NULL with no_run_dir. */
EM_API const char *em_learner_run_dir(const em_learner *l);
/* Custom scalars, shown beside the built-in metrics in the run directory's files, summary.md,
 * report.html and the dashboard. Names: letters, digits and "_.-/" (at most 63 characters, at
 * most 32 names), not a built-in metric name.
 * em_learner_log_scalar, from a training step: a value of this step (metrics.jsonl,
 * metrics.csv); its mean over the epoch joins the epoch record. EM_ERR_STATE elsewhere.
 * em_learner_log_epoch_scalar, from any step while fit runs: a value of the running epoch
 * (epochs.jsonl, epochs.csv); several calls in one epoch record their mean. */
EM_API em_status em_learner_log_scalar(em_learner *l, const char *name, double value);
EM_API em_status em_learner_log_epoch_scalar(em_learner *l, const char *name, double value);
/* Records a hyperparameter of the run ("batch_size", "128") in summary.md and report.html; the
 * learner records its own options, the optimizer's learning rate and the seed by itself. A
 * second call with the same name replaces the value. */
EM_API em_status em_learner_log_param(em_learner *l, const char *name, const char *value);
/* Writes / reads a full checkpoint (model, optimizer, scheduler replay, generator, position,
 * history) as safetensors. */
EM_API em_status em_learner_save(em_learner *l, const char *path);
EM_API em_status em_learner_load(em_learner *l, const char *path);

#ifdef __cplusplus
}
#endif
#endif
