/* Helpers shared by the loss files (loss.c, loss_ctc.c). */
#ifndef EMBER_LOSS_IMPL_H
#define EMBER_LOSS_IMPL_H

#include "nn_impl.h"

/* An option value: v, or def when v is +0 (EM_ZERO, -0.0, asks for a real zero). */
double nn_loss_opt(double v, double def);
/* Argument checks that record an error naming fn. */
bool nn_loss_check_float(const char *fn, const em_tensor *t, const char *what);
bool nn_loss_check_int(const char *fn, const em_tensor *t, const char *what);
bool nn_loss_check_reduction(const char *fn, em_reduction r, bool batchmean_ok);
/* True when every element of mask is true (reads the value back to the host). */
bool nn_loss_all(const em_tensor *mask);
/* Applies the reduction to per-element losses (a new reference). */
em_tensor *nn_loss_reduce(em_tensor *loss, em_reduction r);
/* Ends the scope a loss opened with em_scope_begin, keeping r (NULL when an op failed in it). */
em_tensor *nn_loss_finish(em_tensor *r);

#endif
