/* The tensor layer's side of the op IR (src/ir/ir.h): a front-end validates its inputs, infers
 * the output, fills an em_op record and hands it to tn_dispatch, which runs it on the inputs'
 * backend and offers it to the recorder hooks (autodiff, capture). */
#ifndef EMBER_OP_H
#define EMBER_OP_H

#include "../ir/ir.h"
#include "../ir/update.h"
#include "tensor_impl.h"

/* The largest padded length, pad, stride or dilated kernel span that the convolution, pooling
 * and fold front-ends accept along a spatial dim: kernels add two such values (a window's start
 * and a stride, say), which then still fit in int64_t. */
#define TN_GEOM_MAX (INT64_C(1) << 62)

/* The view of t that kernels see (src/ir/ir.h): its first element, dtype, geometry, device. */
void tn_view(const em_tensor *t, ir_tensor *v);

/* The optimizers' door to devices (they never reach the backends themselves):
 * tn_update_native: whether dev's backend runs em_update records in its own memory (the CPU's
 * updates run in src/optim); tn_update: runs u there. tn_persistent_enter / _leave,
 * tn_graph_param and tn_graph_refuse: em_backend_persistent_enter / _leave, em__graph_param and
 * em__graph_refuse (src/backend/backend.h) for the layers above. */
bool tn_update_native(em_device dev);
em_status tn_update(em_device dev, const em_update *u);
bool tn_persistent_enter(em_device dev);
void tn_persistent_leave(em_device dev);
em_status tn_graph_param(em_device dev, size_t bytes, em_graph_fill fill, void (*drop)(void *ctx),
                         void *ctx, void **dptr);
em_status tn_graph_refuse(em_device dev, em_status st);

/* Runs op on the backend of its first input (or of out[0] for creation ops), then offers the
 * record to the recorder. View kinds are not executed, only recorded. On failure the outputs
 * are released and set to NULL, and the error is recorded. */
em_status tn_dispatch(em_op *op);

/* A recorder sees every op after it ran (autodiff tape, graph capture). At most one. It returns
 * false, with the error recorded, when it could not record the op: the op then fails (its
 * outputs are released), so no result leaves without the graph it should carry. */
typedef bool (*em_op_recorder)(const em_op *op, void *user);
void tn_set_recorder(em_op_recorder fn, void *user);
/* Whether a record with these inputs would be recorded (autodiff installs the answer: grad
 * mode on and an input in a graph), so a front-end can write an output only a backward rule
 * reads; false while nothing is installed. */
typedef bool (*em_record_query)(em_tensor *const *in, int n_in);
void tn_set_record_query(em_record_query fn);
bool tn_would_record(em_tensor *const *in, int n_in);

/* How many times each kind has been dispatched in this process (conformance coverage). */
int64_t tn_op_count(em_op_kind kind);
/* Per-kind timing for profiling: while enabled, every executed op is followed by a sync of its
 * device and its wall time is added to its kind's total (slows every op: a diagnostic). */
void tn_profile_enable(bool on);
/* While profiling: also one stderr line per op (kind, dtype, output and input shapes, strides
 * when not contiguous, microseconds), to find the slow calls of a kind. */
void tn_profile_trace(bool on);
void tn_profile_get(em_op_kind kind, int64_t *count, double *seconds);
void tn_profile_reset(void);
/* How many of those ran on the CPU for a device backend that lacks them (config cpu_fallback). */
int64_t tn_fallback_count(em_op_kind kind);

/* Whether the backend of op's first input runs op itself (no lowering, no CPU fallback): for a
 * record with an optional output that only a kernel writes (em_sdpa's row statistics). */
bool tn_supported(const em_op *op);

/* ---- lowerings (lower.c) --------------------------------------------------------------------
 * A composite kind (its ops.def row has a lowering cell) has a lowering function: tn_dispatch
 * runs it where the record's backend does not claim the kind, on the record's device, from em_
 * ops whose records are not recorded (autodiff records the composite record and uses its rule).
 * tn_has_lowering: whether kind has one; tn_lower: runs op's lowering into its outputs;
 * tn_lowering: whether this thread is inside one; tn_lowered_count: how many records of kind
 * ran lowered in this process. */
bool tn_has_lowering(em_op_kind kind);
em_status tn_lower(em_op *op);
bool tn_lowering(void);
int64_t tn_lowered_count(em_op_kind kind);

/* The compositions of tn_softmax_backward, tn_log_softmax_gather and its backward, for inputs
 * that no record takes (dtypes or devices differ); their kinds' lowerings use them too. */
em_tensor *tn_softmax_backward_composed(const em_tensor *y, const em_tensor *g, int dim, bool log);
em_tensor *tn_log_softmax_gather_composed(const em_tensor *x, int dim, const em_tensor *t);
em_tensor *tn_log_softmax_gather_backward_composed(const em_tensor *x, int dim, const em_tensor *t,
                                                   const em_tensor *g);

/* The gradients of em_sdpa (an SDPA_BACKWARD record, see ops_norm.c): from q, k, v, the forward
 * output o, its gradient g, the optional mask (mask_kind 1 bool, 2 additive) and the optional
 * lse the forward wrote (tn_sdpa_lse), writes dq [B..., L, E], dk [B..., S, E], dv [B..., S, Ev]
 * over the output's batch dims B (not summed back over broadcast dims), in q's dtype. */
em_status tn_sdpa_backward(const em_tensor *q, const em_tensor *k, const em_tensor *v,
                           const em_tensor *o, const em_tensor *g, const em_tensor *mask,
                           const em_tensor *lse, int mask_kind, bool causal, double scale,
                           em_tensor **dq, em_tensor **dk, em_tensor **dv);

/* The gradients of em_layer_norm (rms false) and em_rms_norm (a NORM_BACKWARD record, see
 * ops_norm.c): from x, the optional weight w and g (the output's gradient), writes dx (x's shape)
 * and, where dw / db are not NULL, the weight's and the bias's gradients (the norm shape; db for
 * layer norm only), all in x's dtype. */
em_status tn_norm_backward(const em_tensor *x, const em_tensor *w, const em_tensor *g, int n_norm,
                           double eps, bool rms, em_tensor **dx, em_tensor **dw, em_tensor **db);

/* em_sdpa as the two-output record: *lse = the rows' base-2 log-sum-exp [B..., L] (f32), or
 * NULL where the backend does not claim that record (the output is computed either way). */
em_tensor *tn_sdpa_lse(const em_tensor *q, const em_tensor *k, const em_tensor *v,
                       const em_tensor *mask, em_sdpa_opts o, em_tensor **lse);

/* Config sdpa_fused_backward is not off: the sdpa rule may emit the SDPA_BACKWARD record. */
bool tn_sdpa_fused_backward_on(void);

/* The weight gradient of an ungrouped 2-D convolution (a CONV_WEIGHT_GRAD record, see
 * ops_conv.c): for x [N, C, H, W] and gy [N, Co, OH, OW] with OH = (H + pad_lo[0] + pad_hi[0] -
 * dil[0] (k[0] - 1) - 1) / stride[0] + 1 (OW likewise), gw [Co, C, k[0], k[1]] = sum over n and
 * the output positions of gy times the zero-padded x's window. stride, dil: NULL for 1. Where
 * the backend does not claim the record, its lowering (pad, im2col, matmul and sum). */
em_tensor *tn_conv2d_weight_grad(const em_tensor *x, const em_tensor *gy, const int64_t k[2],
                                 const int64_t stride[2], const int64_t dil[2],
                                 const int64_t pad_lo[2], const int64_t pad_hi[2]);

/* Runs a record whose kind, inputs (on one device) and parameters are set, with one output of
 * dtype dt and the given shape: the result, or NULL on an error. */
em_tensor *tn_run_record(em_op *op, em_dtype dt, const int64_t *shape, int rank);

/* A fused gradient record (op's kind and parameters set) of two inputs a, b of one float dtype,
 * shape and device, and one output like a: runs it (*out the result, NULL on an error) and
 * returns true; false where the inputs differ (the caller composes the value from ops). */
bool tn_run_fused2(em_op *op, const em_tensor *a, const em_tensor *b, em_tensor **out);

/* A unary or binary elementwise record of kind k: validates, picks the output dtype by the
 * kind's dtype rule (and broadcasts), and runs it; fn names the public function in messages.
 * The parameterless kinds' em_ functions call these (generated: build/gen/ops_gen.c). */
em_tensor *tn_unary(em_op_kind k, const char *fn, const em_tensor *x, const em_params *p);
em_tensor *tn_binary(const char *fn, em_op_kind k, const em_tensor *a, const em_tensor *b);

/* The derivative of the elementwise record fwd by its input arg (an EW_GRAD record from the
 * kind's derivative expression in the op table) at its inputs in[0..n_in) and output y, shaped
 * like y: the backward rule of a kind without one of its own multiplies it by the gradient. */
em_tensor *tn_ew_grad(const em_op *fwd, int arg, em_tensor *const *in, int n_in, em_tensor *y);

/* The gradient through relu (t = 0) or any threshold at t in one pass: g where y > t or y is
 * NaN, +0 where y <= t (a THRESHOLD_BACKWARD record, see ops_binary.c). Where the record does
 * not fit (shapes or dtypes differ), masked_fill(g, le(y, t), 0). */
em_tensor *tn_threshold_backward(const em_tensor *g, const em_tensor *y, double t);

/* em_gather, em_scatter and em_index_add for an index known to lie in range: one an op produced
 * (topk, max_dim, pooling), the caller checked, or the forward op whose gradient this is checked.
 * The record says so (GATHER i1, SCATTER i2, INDEX_ADD i1 = 1), and a device backend may skip
 * its range check, a read back and a wait for the device; its kernels still guard (a gathered
 * element out of range reads NaN or 0, a scattered one is dropped). The CPU checks either way. */
em_tensor *tn_gather_inrange(const em_tensor *x, int dim, const em_tensor *index);
em_tensor *tn_scatter_inrange(const em_tensor *x, int dim, const em_tensor *index,
                              const em_tensor *src, em_reduce_mode mode);
em_tensor *tn_index_add_inrange(const em_tensor *x, int dim, const em_tensor *index,
                                const em_tensor *src, double alpha);

/* The gradient through y = softmax(x, dim) (log = false: y (g - sum(g y))) or y =
 * log_softmax(x, dim) (log = true: g - exp(y) sum(g)), sums along dim, in one pass over the
 * rows (a SOFTMAX_BACKWARD record, see ops_reduce.c). Where the record does not fit (dtypes,
 * shapes or devices differ), the same formula composed of ops. */
em_tensor *tn_softmax_backward(const em_tensor *y, const em_tensor *g, int dim, bool log);

/* log_softmax(x, dim) gathered at t along dim, one value per line: t holds class indices (i64,
 * x's shape without dim) -> x[t] - logsumexp(x), shaped like t, in one read of x (a
 * LOG_SOFTMAX_GATHER record, see ops_reduce.c; cross entropy's forward). An index out of range
 * gives NaN (callers check it; in a graph capture this is the guard). Its gradient, for an
 * upstream g shaped like t, is tn_log_softmax_gather_backward: g (onehot(t) - softmax(x)) along
 * dim, shaped like x, in one more read of x and one write (LOG_SOFTMAX_GATHER_BACKWARD; zeros
 * on a line whose t is out of range, as gather's gradient drops it). */
em_tensor *tn_log_softmax_gather(const em_tensor *x, int dim, const em_tensor *t);
em_tensor *tn_log_softmax_gather_backward(const em_tensor *x, int dim, const em_tensor *t,
                                          const em_tensor *g);

/* Convenience for single-output front-ends: builds a record of kind with inputs in[0..n_in),
 * one output `out` (already allocated) and the parameters *p (NULL: none), dispatches it, and
 * returns out or NULL. */
em_tensor *tn_run(em_op_kind kind, em_tensor *out, em_tensor *const *in, int n_in,
                  const em_params *p);

#endif
