/* Internal structures of automatic differentiation: graph nodes recorded from op records, the
 * context a backward rule receives, and the helpers rules share. */
#ifndef EMBER_AUTODIFF_IMPL_H
#define EMBER_AUTODIFF_IMPL_H

#include <ember/autodiff.h>

#include "../tensor/op.h"

typedef enum ad_node_kind {
    AD_LEAF = 0,       /* a tensor marked by em_requires_grad */
    AD_OP = 1,         /* an op record */
    AD_CHECKPOINT = 2, /* a segment run by em_checkpoint */
} ad_node_kind;

/* One node of the graph. Output tensors point at their node (tensor->grad_info) and hold a
 * reference to it; a node holds references to the nodes of its inputs, so the graph lives as
 * long as some tensor that depends on it. A parameter's leaf is shared by the graphs of every
 * thread that runs a forward through it: the count is atomic, and a backward pass writes
 * nothing of a leaf (it keeps its own per-pass state). */
typedef struct ad_node {
    _Atomic int64_t refcount;
    ad_node_kind kind;
    /* The op record as it ran. op.in[i] are references to the inputs (kept so rules can use
     * them; NULL once released); op.out[k] are detached aliases of the outputs (same storage,
     * no graph link, so no reference cycle), NULL once released. */
    em_op op;
    struct ad_node *parent[EM_OP_MAX_IN]; /* node producing input i, NULL for constants */
    int parent_slot[EM_OP_MAX_IN];        /* which output of the parent input i is */
    bool needs[EM_OP_MAX_IN];             /* input i leads to a leaf */
    em_shape in_shape[EM_OP_MAX_IN];      /* kept when the inputs are released */
    em_dtype in_dtype[EM_OP_MAX_IN];
    bool released;       /* saved tensors were freed by a backward pass without retain_graph */
    atomic_bool in_pass; /* a backward pass is running through it (never set on leaves) */
    /* checkpoint segments */
    em_checkpoint_fn ck_fn;
    void *ck_ctx;
    em_rng_state ck_rng;
} ad_node;

/* What a backward rule receives. Rules compute gin[i] for every input with needs[i], using
 * Ember ops only (so the same rule runs on every backend and, with create_graph, is itself
 * recorded). gout[k] is the gradient of output k; NULL when that output received none (treat as
 * zero). Inputs are op->in[i]; outputs are out[k] (attached to the graph when create_graph). Rules
 * may leave gin[i] NULL when the gradient is zero. Every tensor a rule creates is released by the
 * engine's scope except the gin[] it returns. */
typedef struct ad_ctx {
    const ad_node *node;
    uint64_t err_mark; /* core_error_mark() before the rule ran (ad_status) */
    const em_op *op;
    em_tensor *out[EM_OP_MAX_OUT];
    em_tensor *gout[EM_OP_MAX_OUT];
    em_tensor *gin[EM_OP_MAX_IN];
    bool needs[EM_OP_MAX_IN];
} ad_ctx;

typedef em_status (*ad_rule_fn)(ad_ctx *c);

/* The gradients container: one entry per leaf, holding a plain reference to the gradient. */
typedef struct grad_entry {
    ad_node *leaf;
    em_tensor *grad;
} grad_entry;

struct em_grads {
    int n, cap;
    grad_entry *e;
    bool scope_owned;
};

/* One rule entry point per op family (src/autodiff/rules_<family>.c). Each returns
 * EM_ERR_UNSUPPORTED naming the op when it has no rule for the kind. */
em_status ad_rule_create(ad_ctx *c);
em_status ad_rule_view(ad_ctx *c);
em_status ad_rule_unary(ad_ctx *c);
em_status ad_rule_binary(ad_ctx *c);
em_status ad_rule_reduce(ad_ctx *c);
em_status ad_rule_linalg(ad_ctx *c);
em_status ad_rule_index(ad_ctx *c);
em_status ad_rule_combine(ad_ctx *c);
em_status ad_rule_order(ad_ctx *c);
em_status ad_rule_nn(ad_ctx *c);
em_status ad_rule_signal(ad_ctx *c);
/* nn sub-families */
em_status ad_rule_conv(ad_ctx *c);
em_status ad_rule_pool(ad_ctx *c);
em_status ad_rule_norm(ad_ctx *c);

/* ---- helpers for rules ------------------------------------------------------------------- */

/* The gradient of output k, or zeros shaped like that output when it received none. A borrowed
 * reference: a rule may return it as a gin[] as it is. */
em_tensor *ad_gout(ad_ctx *c, int k);
/* Sums g over broadcast dims so it has `shape` (the inverse of broadcasting). */
em_tensor *ad_sum_to(const em_tensor *g, em_shape shape);
/* Zeros of shape s (like's dtype and device) as the base of an out-of-place scatter, index_add
 * or slice_assign: a 0-d zero broadcast to s, which the op's copy of its base turns into zeros
 * in the pass that writes its output (no pass of its own to materialise them). */
em_tensor *ad_zero_base(em_shape s, const em_tensor *like);
/* The gradient of a step-1 slice [start, start + len) along dim of a tensor of shape `full`:
 * g zero-padded to `full` (one pass). */
em_tensor *ad_slice_pad(const em_tensor *g, int dim, int64_t start, em_shape full);
/* Shape of input i as it was recorded. */
em_shape ad_in_shape(const ad_ctx *c, int i);
/* g cast to input i's dtype when it differs (gradients take their input's dtype); g itself is
 * left alone. */
em_tensor *ad_match_dtype(ad_ctx *c, int i, em_tensor *g);
/* The gradient through a parameter-free activation (kind RELU, GELU, GELU_TANH, SILU ...) with
 * the unary rules' formulas: g * f'(x), x the activation's input, y its output; NULL with no
 * error for a zero gradient. */
em_tensor *ad_act_backward(em_op_kind kind, em_tensor *x, em_tensor *y, em_tensor *g);
/* Records an error naming the op for a kind without a rule. */
em_status ad_no_rule(const ad_ctx *c);
/* What a rule returns at its end: the pending error's code when one of its ops failed, else
 * EM_OK (an error that was pending before the backward pass does not count). */
em_status ad_status(const ad_ctx *c);

/* ---- graph internals --------------------------------------------------------------------- */

void ad_node_release(ad_node *n);
ad_node *ad_node_retain(ad_node *n);
/* The node and output slot behind t, or NULL for constants. */
ad_node *ad_node_of(const em_tensor *t, int *slot);
/* Attaches t to node n's output `slot` (t takes a reference to n). */
void ad_attach(em_tensor *t, ad_node *n, int slot);
/* Frees a node's saved tensors (after a backward pass without retain_graph). */
void ad_node_release_saved(ad_node *n);
/* Installs the op recorder and the release hook once. */
void ad_init(void);
/* How many times the rule of each kind ran in this process (gradient-check coverage). */
int64_t ad_rule_count(em_op_kind kind);
/* Op name of a node for messages ("checkpoint" for segments). */
const char *ad_node_name(const ad_node *n);
/* Sets this thread's no-grad depth and returns the previous one (checkpoint recompute). */
int ad_set_no_grad_depth(int depth);
/* Backward of a checkpoint segment: recompute with grad on, then an inner backward pass. */
em_status ad_checkpoint_backward(ad_ctx *c, em_backward_opts o);

#endif
