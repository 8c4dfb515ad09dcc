/* Gradient checks per op family: every differentiable op against central differences in f64
 * (first order), second order for the families the autodiff issue names, over broadcasting and
 * non-contiguous layouts. gradmain.c runs them all and checks that every op docs/ops.md marks
 * differentiable had its rule exercised. */
#ifndef EMBER_GRAD_H
#define EMBER_GRAD_H

#include "harness.h"

void grad_view(void);
void grad_unary(void);
void grad_binary(void);
void grad_reduce(void);
void grad_linalg(void);
void grad_index(void);
void grad_combine(void);
void grad_order(void);
void grad_conv(void);
void grad_pool(void);
void grad_norm(void);
void grad_signal(void);

/* Random f64 input in a layout (values in [lo, hi)). */
static inline em_tensor *g_in(em_shape s, h_layout l, double lo, double hi)
{
    return h_rand(s, EM_F64, l, lo, hi, NULL);
}

#endif
