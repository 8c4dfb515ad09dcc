/* Recording the graph: grad mode, leaves, the op recorder that turns records into nodes, node
 * lifetime, detach. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff_impl.h"

static EM_THREAD_LOCAL int no_grad_depth;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

void em_no_grad_begin(void)
{
    no_grad_depth++;
}

void em_no_grad_end(void)
{
    if (no_grad_depth > 0) no_grad_depth--;
}

bool em_grad_enabled(void)
{
    return no_grad_depth == 0;
}

int ad_set_no_grad_depth(int depth)
{
    int old = no_grad_depth;
    no_grad_depth = depth;
    return old;
}

const char *ad_node_name(const ad_node *n)
{
    if (n->kind == AD_CHECKPOINT) return "checkpoint";
    if (n->kind == AD_LEAF) return "leaf";
    return em_op_name(n->op.kind);
}

ad_node *ad_node_retain(ad_node *n)
{
    if (n) tn_ref_inc(&n->refcount);
    return n;
}

ad_node *ad_node_of(const em_tensor *t, int *slot)
{
    if (!t || !t->grad_info) return NULL;
    if (slot) *slot = t->grad_slot;
    return (ad_node *)t->grad_info;
}

void ad_attach(em_tensor *t, ad_node *n, int slot)
{
    t->grad_info = ad_node_retain(n);
    t->grad_slot = slot;
    t->requires_grad = true;
}

void ad_node_release_saved(ad_node *n)
{
    for (int i = 0; i < n->op.n_in; i++) {
        if (n->op.in[i]) tn_release_ref(n->op.in[i]);
        n->op.in[i] = NULL;
    }
    for (int k = 0; k < n->op.n_out; k++) {
        if (n->op.out[k]) tn_release_ref(n->op.out[k]);
        n->op.out[k] = NULL;
    }
}

/* Releases are iterative: a long chain of nodes must not recurse once per node. */
void ad_node_release(ad_node *n)
{
    ad_node *stack[64];
    int top = 0;
    ad_node **heap = NULL;
    int64_t heap_n = 0, heap_cap = 0;
    while (n) {
        if (tn_ref_dec(&n->refcount)) {
            ad_node_release_saved(n);
            for (int i = 0; i < EM_OP_MAX_IN; i++) {
                ad_node *p = n->parent[i];
                if (!p) continue;
                if (top < 64)
                    stack[top++] = p;
                else {
                    if (heap_n == heap_cap) {
                        heap_cap = heap_cap ? heap_cap * 2 : 64;
                        ad_node **g = realloc(heap, (size_t)heap_cap * sizeof *g);
                        if (!g) {
                            ad_node_release(p); /* rare: fall back to recursion */
                            continue;
                        }
                        heap = g;
                    }
                    heap[heap_n++] = p;
                }
            }
            em_free(n);
        }
        n = top > 0 ? stack[--top] : (heap_n > 0 ? heap[--heap_n] : NULL);
    }
    free(heap);
}

static void release_hook(void *grad_info)
{
    ad_node_release((ad_node *)grad_info);
}

/* Turns an op record into a node when grad mode is on and an input requires grad. False (the
 * error recorded, nothing attached) when memory runs out: the op then fails. */
static bool record(const em_op *op, void *user)
{
    if (no_grad_depth > 0) return true;
    bool any = false;
    for (int i = 0; i < op->n_in; i++)
        if (op->in[i] && op->in[i]->grad_info) any = true;
    if (!any) return true;
    bool float_out = false;
    for (int k = 0; k < op->n_out; k++)
        if (op->out[k] && em_dtype_is_float(op->out[k]->dtype)) float_out = true;
    if (!float_out) return true; /* integer and bool results never carry gradients */
    ad_node *n = em_alloc(sizeof *n);
    if (!n) return false;
    memset(n, 0, sizeof *n);
    atomic_init(&n->refcount, 0);
    n->kind = AD_OP;
    n->op = *op;
    /* the outputs' aliases first: a node whose saved outputs are missing is never attached */
    for (int k = 0; k < op->n_out; k++) {
        n->op.out[k] = op->out[k] ? tn_alias(op->out[k]) : NULL;
        if (op->out[k] && !n->op.out[k]) {
            for (int j = 0; j < k; j++)
                if (n->op.out[j]) tn_release_ref(n->op.out[j]);
            em_free(n);
            return false;
        }
    }
    for (int i = 0; i < op->n_in; i++) {
        em_tensor *in = op->in[i];
        n->op.in[i] = in ? em_retain(in) : NULL;
        if (!in) continue;
        n->in_shape[i] = tn_shape(in);
        n->in_dtype[i] = in->dtype;
        int slot = 0;
        ad_node *p = ad_node_of(in, &slot);
        if (p && em_dtype_is_float(in->dtype)) {
            n->parent[i] = ad_node_retain(p);
            n->parent_slot[i] = slot;
            n->needs[i] = true;
        }
    }
    for (int k = 0; k < op->n_out; k++)
        if (op->out[k] && em_dtype_is_float(op->out[k]->dtype)) ad_attach(op->out[k], n, k);
    return true;
}

/* The recorder's own test, for front-ends that write an output only a rule needs. */
static bool would_record(em_tensor *const *in, int n_in)
{
    if (no_grad_depth > 0) return false;
    for (int i = 0; i < n_in; i++)
        if (in[i] && in[i]->grad_info && em_dtype_is_float(in[i]->dtype)) return true;
    return false;
}

static void init_once_fn(void)
{
    tn_set_recorder(record, NULL);
    tn_set_grad_release_hook(release_hook);
    tn_set_record_query(would_record);
    if (core_cfg_bool(CFG_DETECT_ANOMALY)) em_set_detect_anomaly(true);
}

void ad_init(void)
{
    pthread_once(&init_once, init_once_fn);
}

em_tensor *em_requires_grad(em_tensor *t, bool on)
{
    ad_init();
    if (!tn_check_ptr("em_requires_grad", t, "t")) return NULL;
    ad_node *n = ad_node_of(t, NULL);
    if (on) {
        if (!em_dtype_is_float(t->dtype)) {
            em_error(EM_ERR_DTYPE, "em_requires_grad: only float tensors can require grad, got %s",
                     em_dtype_name(t->dtype));
            return NULL;
        }
        if (n) return t; /* already a leaf or the result of a recorded op */
        n = em_alloc(sizeof *n);
        if (!n) return NULL;
        memset(n, 0, sizeof *n);
        atomic_init(&n->refcount, 0);
        n->kind = AD_LEAF;
        n->op.n_out = 1;
        ad_attach(t, n, 0);
        return t;
    }
    if (!n) return t;
    if (n->kind != AD_LEAF) {
        em_error(EM_ERR_STATE,
                 "em_requires_grad: the tensor is the result of %s, not a leaf; use em_detach",
                 em_op_name(n->op.kind));
        return NULL;
    }
    t->grad_info = NULL;
    t->requires_grad = false;
    ad_node_release(n);
    return t;
}

bool em_tensor_requires_grad(const em_tensor *t)
{
    return t && t->grad_info != NULL;
}

bool em_tensor_has_grad_fn(const em_tensor *t)
{
    ad_node *n = ad_node_of(t, NULL);
    return n && n->kind != AD_LEAF;
}

const char *em_tensor_grad_fn(const em_tensor *t)
{
    ad_node *n = ad_node_of(t, NULL);
    if (!n || n->kind == AD_LEAF) return NULL;
    return ad_node_name(n);
}

em_tensor *em_detach(const em_tensor *t)
{
    if (!tn_check_ptr("em_detach", t, "t")) return NULL;
    return tn_view_of(t, t->shape, t->strides, t->rank, t->offset);
}
