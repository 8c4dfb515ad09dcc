/* Ember optimizers, gradient clipping and accumulation, and learning-rate schedulers.
 * Configuration structs follow the zero-means-default rule with PyTorch's defaults; where zero
 * is also a meaningful value (Adam's betas, RMSprop's alpha ...), write EM_ZERO (-0.0) to ask
 * for an exact zero. */
#ifndef EMBER_OPTIM_H
#define EMBER_OPTIM_H

#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

#define EM_ZERO (-0.0)

typedef struct em_optim em_optim;

typedef struct em_sgd_cfg {
    double lr; /* 1e-3 (PyTorch 1.13 has no default; later releases take 1e-3) */
    double momentum, dampening, weight_decay;
    bool nesterov, maximize;
} em_sgd_cfg;

typedef struct em_adam_cfg {
    double lr;           /* 1e-3 */
    double beta1, beta2; /* 0.9, 0.999 */
    double eps;          /* 1e-8 */
    double weight_decay; /* Adam: 0 (L2 added to the gradient); AdamW: 1e-2 (decoupled) */
    bool amsgrad, maximize;
} em_adam_cfg;

typedef struct em_rmsprop_cfg {
    double lr;    /* 1e-2 */
    double alpha; /* 0.99 */
    double eps;   /* 1e-8 */
    double weight_decay, momentum;
    bool centered, maximize;
} em_rmsprop_cfg;

typedef struct em_adagrad_cfg {
    double lr; /* 1e-2 */
    double lr_decay, weight_decay, initial_accumulator_value;
    double eps; /* 1e-10 */
    bool maximize;
} em_adagrad_cfg;

typedef struct em_lion_cfg {
    double lr;           /* 1e-4 */
    double beta1, beta2; /* 0.9, 0.99 */
    double weight_decay; /* 0 */
} em_lion_cfg;

typedef struct em_muon_cfg {
    double lr;            /* 2e-2 (2-D weights) */
    double momentum;      /* 0.95 */
    bool no_nesterov;     /* Nesterov by default */
    int ns_steps;         /* 5 Newton-Schulz iterations */
    double weight_decay;  /* 0 */
    em_adam_cfg fallback; /* AdamW for parameters that are not 2-D (defaults as AdamW) */
} em_muon_cfg;

/* Optimizers over the trainable parameters of a module (frozen ones are skipped). The module
 * must outlive the optimizer and keep its tree (no parameters registered after). CPU f32/f64
 * contiguous parameters are updated in place; others are replaced in the module by an updated
 * tensor (see docs/optim.md). */
EM_API em_optim *em_sgd_new(em_module *m, em_sgd_cfg cfg);
EM_API em_optim *em_adam_new(em_module *m, em_adam_cfg cfg);
EM_API em_optim *em_adamw_new(em_module *m, em_adam_cfg cfg);
EM_API em_optim *em_rmsprop_new(em_module *m, em_rmsprop_cfg cfg);
EM_API em_optim *em_adagrad_new(em_module *m, em_adagrad_cfg cfg);
EM_API em_optim *em_lion_new(em_module *m, em_lion_cfg cfg);
EM_API em_optim *em_muon_new(em_module *m, em_muon_cfg cfg);
EM_API void em_optim_free(em_optim *o);

/* Parameter groups: parameters whose dotted names match the glob get their own learning rate
 * and weight decay (NaN keeps the base value). Later groups win. Call before the first step. */
EM_API em_status em_optim_add_group(em_optim *o, const char *pattern, double lr,
                                    double weight_decay);

/* One update from the gradients in g (parameters without a gradient are left alone). */
EM_API em_status em_optim_step(em_optim *o, const em_grads *g);
/* Base learning rate (group learning rates scale with it) and step count. */
EM_API double em_optim_lr(const em_optim *o);
EM_API void em_optim_set_lr(em_optim *o, double lr);
EM_API int64_t em_optim_steps(const em_optim *o);

/* Optimizer state as named tensors ("<param name>.exp_avg", ... plus "step"), for checkpoints:
 * get returns new references in a caller-provided callback; set restores them. */
typedef void (*em_state_fn)(void *ctx, const char *name, em_tensor *t);
EM_API em_status em_optim_state_visit(em_optim *o, em_state_fn fn, void *ctx);
EM_API em_status em_optim_state_set(em_optim *o, const char *name, const em_tensor *t);

/* ---- gradients: clipping and accumulation ------------------------------------------------ */

/* Scales all gradients so their global p-norm is at most max_norm (torch's clip_grad_norm_);
 * returns the norm before clipping (NaN on error). */
EM_API double em_clip_grad_norm(em_grads *g, double max_norm, double norm_type);
/* Clamps every gradient element into [-v, v]. */
EM_API em_status em_clip_grad_value(em_grads *g, double v);
/* acc += g, leaf by leaf (gradient accumulation over micro-batches); acc may be empty. */
EM_API em_status em_grads_accumulate(em_grads *acc, const em_grads *g);
/* Multiplies every gradient by s (e.g. 1/steps after accumulation). */
EM_API em_status em_grads_scale(em_grads *g, double s);
/* A new, empty container to accumulate into (the caller frees it with em_grads_free). */
EM_API em_grads *em_grads_new(void);

/* ---- learning-rate schedulers ------------------------------------------------------------ */

typedef struct em_sched em_sched;

EM_API em_sched *em_sched_constant_new(em_optim *o, double factor, int64_t total_iters);
EM_API em_sched *em_sched_step_new(em_optim *o, int64_t step_size, double gamma);
EM_API em_sched *em_sched_multistep_new(em_optim *o, const int64_t *milestones, int n,
                                        double gamma);
EM_API em_sched *em_sched_exponential_new(em_optim *o, double gamma);
EM_API em_sched *em_sched_linear_new(em_optim *o, double start_factor, double end_factor,
                                     int64_t total_iters);
EM_API em_sched *em_sched_cosine_new(em_optim *o, int64_t t_max, double eta_min);
EM_API em_sched *em_sched_cosine_restarts_new(em_optim *o, int64_t t0, int64_t t_mult,
                                              double eta_min);
/* Linear warm-up over `warmup` steps from start_factor, then `after` (which may be NULL),
 * restarted at the milestone like PyTorch's SequentialLR. The warm-up owns `after`. */
EM_API em_sched *em_sched_warmup_new(em_optim *o, int64_t warmup, double start_factor,
                                     em_sched *after);
/* lr = base * d_model^-0.5 * min(t^-0.5, t * warmup^-1.5), t = steps + 1 (base 1: the paper). */
EM_API em_sched *em_sched_noam_new(em_optim *o, int64_t d_model, int64_t warmup);
EM_API em_sched *em_sched_onecycle_new(em_optim *o, double max_lr, int64_t total_steps,
                                       double pct_start, double div_factor,
                                       double final_div_factor);
EM_API em_sched *em_sched_plateau_new(em_optim *o, bool maximize, double factor, int64_t patience,
                                      double threshold, int64_t cooldown, double min_lr);
/* Advances one step (epoch or iteration, as the caller uses it); metric is read by
 * reduce-on-plateau only. Sets the optimizer's learning rate and returns it. */
EM_API double em_sched_step(em_sched *s, double metric);
EM_API double em_sched_lr(const em_sched *s);
EM_API void em_sched_free(em_sched *s);

#ifdef __cplusplus
}
#endif
#endif
