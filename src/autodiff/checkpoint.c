/* Gradient checkpointing: a segment runs without recording its inside; its node keeps only the
 * segment's inputs, and the backward pass runs the segment again (same generator state) to get
 * the activations it needs. */
#include <string.h>

#include "autodiff_impl.h"

em_status em_checkpoint(em_checkpoint_fn fn, void *ctx, em_tensor *const *inputs, int n_in,
                        em_tensor **outputs, int n_out)
{
    ad_init();
    const char *name = "em_checkpoint";
    if (!fn) return em_error(EM_ERR_INVALID_ARG, "%s: argument `fn` is NULL", name);
    if (!tn_check_ptr(name, outputs, "outputs")) return em_last_status();
    if (n_in < 0 || n_in > EM_OP_MAX_IN || n_out < 1 || n_out > EM_OP_MAX_OUT)
        return em_error(EM_ERR_INVALID_ARG,
                        "%s: %d inputs and %d outputs given; at most %d and %d are supported", name,
                        n_in, n_out, EM_OP_MAX_IN, EM_OP_MAX_OUT);
    for (int i = 0; i < n_in; i++)
        if (!tn_check_ptr(name, inputs[i], "inputs[i]")) return em_last_status();
    for (int k = 0; k < n_out; k++) outputs[k] = NULL;
    em_rng_state rng = em_rng_get_state();
    /* the segment's intermediates die with this scope; only its outputs leave it */
    em_scope_begin();
    em_no_grad_begin();
    em_status st = fn(ctx, inputs, n_in, outputs, n_out);
    em_no_grad_end();
    if (st == EM_OK && tn_scope_failed()) st = em_last_status();
    for (int k = 0; k < n_out && st == EM_OK; k++)
        if (!outputs[k]) st = em_error(EM_ERR_STATE, "%s: fn left output %d NULL", name, k);
    for (int k = 0; k < n_out && st == EM_OK; k++) em_keep(outputs[k]);
    em_scope_end();
    if (st != EM_OK) {
        for (int k = 0; k < n_out; k++) outputs[k] = NULL;
        return st;
    }
    bool any = false;
    for (int i = 0; i < n_in; i++) any |= inputs[i]->grad_info != NULL;
    if (!any || !em_grad_enabled()) return EM_OK;
    ad_node *n = em_alloc(sizeof *n);
    if (n) memset(n, 0, sizeof *n);
    /* the outputs' aliases first: without them the segment cannot be differentiated, and the
     * outputs are given up rather than returned without their graph */
    for (int k = 0; k < n_out && n; k++) {
        n->op.out[k] = tn_alias(outputs[k]);
        if (n->op.out[k]) continue;
        for (int j = 0; j < k; j++) tn_release_ref(n->op.out[j]);
        em_free(n);
        n = NULL;
    }
    if (!n) {
        for (int k = 0; k < n_out; k++) {
            em_release(outputs[k]);
            outputs[k] = NULL;
        }
        return em_last_status();
    }
    n->kind = AD_CHECKPOINT;
    n->ck_fn = fn;
    n->ck_ctx = ctx;
    n->ck_rng = rng;
    n->op.n_in = n_in;
    n->op.n_out = n_out;
    for (int i = 0; i < n_in; i++) {
        n->op.in[i] = em_retain(inputs[i]);
        n->in_shape[i] = tn_shape(inputs[i]);
        n->in_dtype[i] = inputs[i]->dtype;
        int slot = 0;
        ad_node *p = ad_node_of(inputs[i], &slot);
        if (p && em_dtype_is_float(inputs[i]->dtype)) {
            n->parent[i] = ad_node_retain(p);
            n->parent_slot[i] = slot;
            n->needs[i] = true;
        }
    }
    bool attached = false;
    for (int k = 0; k < n_out; k++) {
        if (!em_dtype_is_float(outputs[k]->dtype)) continue;
        if (outputs[k]->grad_info) ad_node_release(outputs[k]->grad_info);
        ad_attach(outputs[k], n, k);
        attached = true;
    }
    if (!attached) ad_node_release(ad_node_retain(n)); /* frees it */
    return EM_OK;
}

em_status ad_checkpoint_backward(ad_ctx *c, em_backward_opts o)
{
    const ad_node *n = c->node;
    if (o.create_graph)
        return em_error(EM_ERR_UNSUPPORTED,
                        "em_backward: create_graph through a checkpoint segment is not supported");
    em_tensor *in[EM_OP_MAX_IN] = {0}, *out[EM_OP_MAX_OUT] = {0};
    em_status st = EM_OK;
    uint64_t in_mark = core_error_mark();
    for (int i = 0; i < n->op.n_in && st == EM_OK; i++) {
        in[i] = em_detach(n->op.in[i]);
        if (in[i] && n->needs[i]) em_requires_grad(in[i], true);
        /* the segment never sees a missing input */
        if (core_failed_since(in_mark)) st = em_last_status();
    }
    if (st != EM_OK) return st;
    /* recompute with grad on and the generator as it was in the forward pass */
    em_rng_state saved = em_rng_get_state();
    em_rng_set_state(n->ck_rng);
    int depth = ad_set_no_grad_depth(0);
    uint64_t mark = core_error_mark();
    st = n->ck_fn(n->ck_ctx, in, n->op.n_in, out, n->op.n_out);
    if (st == EM_OK && core_failed_since(mark)) st = em_last_status();
    em_rng_set_state(saved);
    em_tensor *outs[EM_OP_MAX_OUT], *seeds[EM_OP_MAX_OUT];
    int m = 0;
    for (int k = 0; k < n->op.n_out && st == EM_OK; k++) {
        if (!out[k] || !out[k]->grad_info || !c->gout[k]) continue;
        outs[m] = out[k];
        seeds[m++] = c->gout[k];
    }
    em_grads *g = NULL;
    if (st == EM_OK && m > 0) {
        g = em_backward_with(outs, seeds, m, (em_backward_opts){0});
        if (!g) st = em_last_status();
    }
    ad_set_no_grad_depth(depth);
    for (int i = 0; i < n->op.n_in && st == EM_OK; i++)
        if (n->needs[i]) c->gin[i] = em_grad(g, in[i]);
    if (g) em_grads_free(g);
    return st; /* the recomputed tensors belong to the rule's scope */
}
