/* The optimizers' fused update as a record a backend runs in its own memory (em_backend.update,
 * reached through tn_update). */
#ifndef EMBER_IR_UPDATE_H
#define EMBER_IR_UPDATE_H

#include <ember/core.h>
#include <stdbool.h>
#include <stdint.h>

/* A fused optimizer update over n contiguous f32 or f64 elements of one device's memory, in
 * place. The kinds, the order of operations and the meaning of the coefficients are those of the
 * CPU kernels in src/optim/optim_kernels.c. */
typedef enum em_update_kind {
    EM_UPDATE_SGD,     /* p, g, s0 = momentum buffer (NULL without momentum) */
    EM_UPDATE_ADAM,    /* p, g, s0 = exp_avg, s1 = exp_avg_sq, s2 = max_exp_avg_sq or NULL */
    EM_UPDATE_RMSPROP, /* p, g, s0 = square_avg, s1 = grad_avg or NULL, s2 = momentum or NULL */
    EM_UPDATE_ADAGRAD, /* p, g, s0 = sum */
    EM_UPDATE_LION,    /* p, g, s0 = exp_avg */
    EM_UPDATE_MUON,    /* Muon's momentum: g, s0 = buffer, s1 = the update u (p unused) */
    EM_UPDATE_AXPBY,   /* p = p*a + b*g */
} em_update_kind;

typedef struct em_update_coef {
    double lr, wd, a, b, c, d, eps; /* meaning per kind, see optim_kernels.c */
    bool maximize, nesterov, first, flag;
} em_update_coef;

typedef struct em_update {
    em_update_kind kind;
    em_dtype dtype; /* EM_F32 or EM_F64 */
    int64_t n;
    void *p;
    const void *g;
    void *s[3];
    em_update_coef k;
    /* Device memory holding the coefficients that the kernel reads instead of k (a piece of a
     * graph's parameter block, refilled at every replay: em__graph_param), or NULL. */
    void *kp;
} em_update;

/* Writes a graph parameter's bytes for the next replay into dst (zeroed before); an error
 * (recorded) stops the replay before the graph runs. */
typedef em_status (*em_graph_fill)(void *ctx, void *dst);

#endif
