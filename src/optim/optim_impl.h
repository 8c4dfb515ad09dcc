/* Internal structures of the optimizers: per-parameter records and state, the fused CPU
 * kernels, and the scheduler's view of the optimizer. */
#ifndef EMBER_OPTIM_IMPL_H
#define EMBER_OPTIM_IMPL_H

#include <ember/optim.h>

#include "../tensor/op.h"

typedef enum opt_kind {
    OPT_SGD,
    OPT_ADAM,
    OPT_ADAMW,
    OPT_RMSPROP,
    OPT_ADAGRAD,
    OPT_LION,
    OPT_MUON,
} opt_kind;

#define OPT_MAX_STATE 3

/* One trainable parameter. lr and wd are its own (group values applied); the learning rate used
 * in a step is lr * o->lr / o->lr0 so that em_optim_set_lr and schedulers scale every group. */
typedef struct opt_param {
    em_module_entry *e; /* borrowed from the module */
    char *name;         /* dotted name */
    double lr, wd;
    bool fallback; /* Muon: not 2-D, updated by the AdamW fallback */
    int64_t step;  /* updates this parameter received (PyTorch's per-parameter "step") */
    em_tensor *state[OPT_MAX_STATE];
} opt_param;

typedef struct opt_group {
    char *pattern;
    double lr, wd; /* NaN: keep the base value */
} opt_group;

/* What the graphs that captured a step of an optimizer refer to: it outlives the optimizer while
 * they do (o NULL once the optimizer is freed; refs: the graphs' pieces). */
struct opt_anchor {
    em_optim *o;
    int refs;
};

struct em_optim {
    opt_kind kind;
    const char *fn; /* constructor name for messages */
    em_module *module;
    opt_param *p;
    int n;
    opt_group *groups;
    int n_groups;
    double lr, lr0;    /* current and initial base learning rate */
    double initial_lr; /* PyTorch's group["initial_lr"]: set by the first scheduler (NaN before) */
    int64_t steps;
    em_sgd_cfg sgd;
    em_adam_cfg adam; /* Adam, AdamW, Muon's fallback */
    em_rmsprop_cfg rms;
    em_adagrad_cfg ada;
    em_lion_cfg lion;
    em_muon_cfg muon;
    struct opt_anchor *anchor; /* what graphs that captured a step refer to (NULL: none yet) */
};

/* Names of the state slots of a parameter (NULL: slot unused by this configuration). */
const char *opt_state_name(const em_optim *o, const opt_param *p, int slot);

/* ---- fused kernels over n contiguous elements (dt is EM_F32 or EM_F64) ------------------ */

typedef em_update_coef opt_coef; /* the coefficients, shared with the device kernels */

void opt_kernel_sgd(em_dtype dt, void *p, const void *g, void *buf, int64_t n, opt_coef k);
void opt_kernel_adam(em_dtype dt, void *p, const void *g, void *m, void *v, void *vmax, int64_t n,
                     opt_coef k);
/* The same loop built for AVX2 (optim_kernels_avx2.c); called by opt_kernel_adam. */
void opt_kernel_adam_avx2(em_dtype dt, void *p, const void *g, void *m, void *v, void *vmax,
                          int64_t n, opt_coef k);
void opt_kernel_rmsprop(em_dtype dt, void *p, const void *g, void *sq, void *gavg, void *buf,
                        int64_t n, opt_coef k);
void opt_kernel_adagrad(em_dtype dt, void *p, const void *g, void *sum, int64_t n, opt_coef k);
void opt_kernel_lion(em_dtype dt, void *p, const void *g, void *m, int64_t n, opt_coef k);
/* Muon's momentum: buf = momentum*buf + g; u = nesterov ? g + momentum*buf : buf. */
void opt_kernel_muon_momentum(em_dtype dt, const void *g, void *buf, void *u, int64_t n,
                              opt_coef k);
/* p = p*a + b*x */
void opt_kernel_axpby(em_dtype dt, void *p, const void *x, int64_t n, double a, double b);

/* Muon's orthogonalised update of a 2-D tensor (Newton-Schulz), a new tensor. */
em_tensor *opt_newton_schulz(const em_tensor *u, int steps);

#endif
