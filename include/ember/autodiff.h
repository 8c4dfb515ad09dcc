/* Ember automatic differentiation: reverse mode over the op IR, gradients of gradients,
 * gradient checkpointing and anomaly detection. Gradients live in a container returned by the
 * backward pass, never on the tensors. */
#ifndef EMBER_AUTODIFF_H
#define EMBER_AUTODIFF_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct em_grads em_grads;

/* Marks t as a leaf whose gradient the backward pass collects (float dtypes only). Returns t.
 * With on = false the mark is removed (t must be a leaf). */
EM_API em_tensor *em_requires_grad(em_tensor *t, bool on);
/* True when t is a leaf marked by em_requires_grad or the result of a recorded op. */
EM_API bool em_tensor_requires_grad(const em_tensor *t);
/* True when t is the result of a recorded op (not a leaf). */
EM_API bool em_tensor_has_grad_fn(const em_tensor *t);
/* Name of the op that produced t ("matmul"), or NULL for leaves and constants. */
EM_API const char *em_tensor_grad_fn(const em_tensor *t);
/* The same values, cut from the graph (shares storage; a new reference). */
EM_API em_tensor *em_detach(const em_tensor *t);

/* Backward options; zero means default. */
typedef struct em_backward_opts {
    bool retain_graph; /* keep saved tensors so the graph can be differentiated again */
    bool create_graph; /* record the backward pass itself: gradients of gradients (implies
                        * retain_graph) */
} em_backward_opts;

/* Gradients of a one-element `loss` with respect to every leaf it depends on. The container
 * belongs to the current scope when one is open (released at em_scope_end), else to the caller
 * (em_grads_free). NULL with an error on failure. */
EM_API em_grads *em_backward(em_tensor *loss);
EM_API em_grads *em_backward_opt(em_tensor *loss, em_backward_opts o);
/* Vector-Jacobian product: outputs[i] seeded with seeds[i] (same shape; NULL means ones). */
EM_API em_grads *em_backward_with(em_tensor *const *outputs, em_tensor *const *seeds, int n,
                                  em_backward_opts o);
/* The gradient of leaf t (a new reference), or NULL when t received none (no error). */
EM_API em_tensor *em_grad(const em_grads *g, const em_tensor *t);
/* Number of leaves that received a gradient. */
EM_API int em_grads_count(const em_grads *g);
EM_API void em_grads_free(em_grads *g);

/* Grad mode: while disabled (em_no_grad_begin ... em_no_grad_end, nestable, per thread) no op
 * is recorded. */
EM_API void em_no_grad_begin(void);
EM_API void em_no_grad_end(void);
EM_API bool em_grad_enabled(void);

/* Anomaly mode (also EMBER_DETECT_ANOMALY=1): a NaN or Inf produced by a backward rule stops the
 * pass with an error naming the op whose rule produced it. */
EM_API void em_set_detect_anomaly(bool on);
EM_API bool em_detect_anomaly(void);

/* Gradient checkpointing: runs fn(ctx, inputs, n_in, outputs) in a scope of its own without
 * keeping its intermediate activations; the backward pass runs fn again to recompute them. fn
 * stores the ops' results in outputs[] as they are (no em_retain): they are kept out of that
 * scope for the caller. fn must be deterministic given its inputs (random ops see the same
 * generator state on recompute). Every tensor the segment should pass gradients to (weights
 * included) must be one of its inputs: at most 6 inputs and 2 outputs. */
typedef em_status (*em_checkpoint_fn)(void *ctx, em_tensor *const *inputs, int n_in,
                                      em_tensor **outputs, int n_out);
EM_API em_status em_checkpoint(em_checkpoint_fn fn, void *ctx, em_tensor *const *inputs, int n_in,
                               em_tensor **outputs, int n_out);

#ifdef __cplusplus
}
#endif
#endif
