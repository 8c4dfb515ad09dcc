/* The backward pass: topological order over the nodes reachable from the outputs, one rule per
 * node in reverse order, gradient accumulation, early release of saved tensors, anomaly checks,
 * and the gradients container. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff_impl.h"

static _Atomic int64_t rule_counts[EM_OP_COUNT];

int64_t ad_rule_count(em_op_kind kind)
{
    return (kind >= 0 && kind < EM_OP_COUNT) ? atomic_load(&rule_counts[kind]) : 0;
}
static atomic_bool anomaly_on;

void em_set_detect_anomaly(bool on)
{
    atomic_store(&anomaly_on, on);
}

bool em_detect_anomaly(void)
{
    ad_init();
    return atomic_load(&anomaly_on);
}

/* ---- gradients container ----------------------------------------------------------------- */

static void grads_destroy(em_grads *g)
{
    for (int i = 0; i < g->n; i++) {
        ad_node_release(g->e[i].leaf);
        tn_release_ref(g->e[i].grad);
    }
    free(g->e);
    em_free(g);
}

static void grads_scope_free(void *p)
{
    grads_destroy(p);
}

void em_grads_free(em_grads *g)
{
    if (!g) return;
    if (g->scope_owned) tn_scope_untrack_obj(g);
    grads_destroy(g);
}

em_tensor *em_grad(const em_grads *g, const em_tensor *t)
{
    if (!tn_check_ptr("em_grad", g, "g") || !tn_check_ptr("em_grad", t, "t")) return NULL;
    ad_node *n = ad_node_of(t, NULL);
    if (!n) return NULL;
    for (int i = 0; i < g->n; i++)
        if (g->e[i].leaf == n) return tn_share(g->e[i].grad);
    return NULL;
}

int em_grads_count(const em_grads *g)
{
    return g ? g->n : 0;
}

/* ---- helpers for rules ------------------------------------------------------------------- */

em_tensor *ad_gout(ad_ctx *c, int k)
{
    if (c->gout[k]) return c->gout[k];
    const em_tensor *o = c->out[k];
    if (!o) {
        em_error(EM_ERR_INTERNAL, "em_backward: output %d of %s was not kept", k,
                 ad_node_name(c->node));
        return NULL;
    }
    c->gout[k] = em_zeros(tn_shape(o), o->dtype, o->storage->device); /* the rule scope owns it */
    return c->gout[k];
}

em_shape ad_in_shape(const ad_ctx *c, int i)
{
    return c->node->in_shape[i];
}

em_tensor *ad_zero_base(em_shape s, const em_tensor *like)
{
    return em_expand(em_zeros(EM_SCALAR, em_tensor_dtype(like), em_tensor_device(like)), s);
}

em_tensor *ad_sum_to(const em_tensor *g, em_shape shape)
{
    if (!g) return NULL;
    if (em_shape_equal(tn_shape(g), shape)) return tn_share((em_tensor *)g);
    em_axes axes = {.n = 0};
    int lead = g->rank - shape.rank;
    for (int d = 0; d < g->rank; d++) {
        bool reduce = d < lead || (shape.dims[d - lead] == 1 && g->shape[d] != 1);
        if (reduce) axes.d[axes.n++] = d;
    }
    if (axes.n == 0) return em_reshape(g, shape);
    em_tensor *s = em_sum(g, axes, true);
    em_tensor *r = em_reshape(s, shape);
    em_release(s);
    return r;
}

em_tensor *ad_match_dtype(ad_ctx *c, int i, em_tensor *g)
{
    if (!g || g->dtype == c->node->in_dtype[i]) return g;
    return em_cast(g, c->node->in_dtype[i]);
}

em_status ad_no_rule(const ad_ctx *c)
{
    return em_error(EM_ERR_UNSUPPORTED, "em_backward: op %s has no backward rule",
                    em_op_name(c->op->kind));
}

em_status ad_status(const ad_ctx *c)
{
    return core_failed_since(c->err_mark) ? em_last_status() : EM_OK;
}

/* ---- the pass ---------------------------------------------------------------------------- */

/* The gradient of a step-1 slice of an output, kept aside until every consumer of that output
 * has given its gradient (join_slices). */
typedef struct slice_part {
    em_tensor *g; /* plain reference */
    int dim;
    int64_t start;
    em_shape full; /* the sliced tensor's shape */
    struct slice_part *next;
} slice_part;

/* A pass's state lives here, never in the nodes: the leaves of a module's parameters are shared
 * by the graphs of threads that run backward passes at the same time. */
typedef struct seen_entry {
    ad_node *node;
    int64_t pos;
} seen_entry;

typedef struct pass {
    ad_node **order; /* parents before children */
    int64_t n, cap;
    /* the nodes seen, by open addressing: node -> position in order (-1 while on the stack) */
    seen_entry *seen;
    int64_t slots, used;
    em_tensor *(*g)[EM_OP_MAX_OUT];      /* accumulated output gradients, by order position */
    slice_part *(*parts)[EM_OP_MAX_OUT]; /* slices' gradients not yet added in, likewise */
} pass;

static int64_t seen_slot(const seen_entry *t, int64_t slots, const ad_node *n)
{
    uint64_t h = ((uint64_t)(uintptr_t)n >> 6) * UINT64_C(0x9E3779B97F4A7C15);
    int64_t i = (int64_t)(h >> 32) & (slots - 1);
    while (t[i].node && t[i].node != n) i = (i + 1) & (slots - 1);
    return i;
}

/* n's position, or NULL when the pass has not seen it. */
static int64_t *seen_find(const pass *p, const ad_node *n)
{
    if (!p->slots) return NULL;
    int64_t i = seen_slot(p->seen, p->slots, n);
    return p->seen[i].node ? &p->seen[i].pos : NULL;
}

/* Adds n (not seen yet) with position -1. Every node but a leaf is claimed for the pass: a
 * graph belongs to one thread, and a second pass through it at the same time would free saved
 * tensors the first still reads. Leaves (a module's parameters, which threads share) are not. */
static em_status seen_add(pass *p, ad_node *n)
{
    if (n->kind != AD_LEAF && atomic_exchange_explicit(&n->in_pass, true, memory_order_acquire))
        return em_error(EM_ERR_STATE,
                        "em_backward: another backward pass is running through %s of this graph "
                        "(a graph belongs to one thread)",
                        ad_node_name(n));
    if (2 * (p->used + 1) > p->slots) {
        int64_t slots = p->slots ? 2 * p->slots : 32;
        seen_entry *t = calloc((size_t)slots, sizeof *t);
        if (!t) {
            if (n->kind != AD_LEAF) atomic_store_explicit(&n->in_pass, false, memory_order_release);
            return em_error(EM_ERR_OOM, "em_backward: out of memory");
        }
        for (int64_t i = 0; i < p->slots; i++)
            if (p->seen[i].node) t[seen_slot(t, slots, p->seen[i].node)] = p->seen[i];
        free(p->seen);
        p->seen = t;
        p->slots = slots;
    }
    p->seen[seen_slot(p->seen, p->slots, n)] = (seen_entry){n, -1};
    p->used++;
    return EM_OK;
}

/* Gives back the nodes seen_add claimed. */
static void release_claims(pass *p)
{
    for (int64_t i = 0; i < p->slots; i++) {
        ad_node *n = p->seen[i].node;
        if (n && n->kind != AD_LEAF)
            atomic_store_explicit(&n->in_pass, false, memory_order_release);
    }
}

/* Appends n (post-order: its parents are in order already). */
static bool push_order(pass *p, ad_node *n)
{
    if (p->n == p->cap) {
        int64_t cap = p->cap ? p->cap * 2 : 32;
        ad_node **o = realloc(p->order, (size_t)cap * sizeof *o);
        if (!o) return false;
        p->order = o;
        p->cap = cap;
    }
    *seen_find(p, n) = p->n;
    p->order[p->n++] = n;
    return true;
}

/* Iterative depth-first post-order from one root. */
static em_status collect(pass *p, ad_node *root)
{
    if (seen_find(p, root)) return EM_OK;
    typedef struct frame {
        ad_node *n;
        int next;
    } frame;
    int64_t cap = 32, top = 0;
    frame *st = malloc((size_t)cap * sizeof *st);
    if (!st) return em_error(EM_ERR_OOM, "em_backward: out of memory");
    em_status status = seen_add(p, root);
    if (status != EM_OK) {
        free(st);
        return status;
    }
    st[top++] = (frame){root, 0};
    while (top > 0) {
        frame *f = &st[top - 1];
        if (f->n->released) {
            status = em_error(EM_ERR_STATE,
                              "em_backward: the graph through %s was freed by an earlier "
                              "backward pass; pass retain_graph to differentiate it again",
                              ad_node_name(f->n));
            break;
        }
        if (f->next < EM_OP_MAX_IN) {
            ad_node *parent = f->n->parent[f->next++];
            if (parent && !seen_find(p, parent)) {
                if ((status = seen_add(p, parent)) != EM_OK) break;
                if (top == cap) {
                    cap *= 2;
                    frame *g = realloc(st, (size_t)cap * sizeof *g);
                    if (!g) {
                        status = em_error(EM_ERR_OOM, "em_backward: out of memory");
                        break;
                    }
                    st = g;
                }
                st[top++] = (frame){parent, 0};
            }
            continue;
        }
        if (!push_order(p, f->n)) {
            status = em_error(EM_ERR_OOM, "em_backward: out of memory");
            break;
        }
        top--;
    }
    free(st);
    return status;
}

/* The engine owns its gradients as plain references, never through scopes, so they can be
 * freed the moment they are used. own() turns the scope reference of a result just created in
 * the current scope into such a reference. */
static em_tensor *own(em_tensor *t)
{
    if (t && atomic_load_explicit(&t->scope_refs, memory_order_relaxed) > 0) tn_scope_forget(t);
    return t;
}

/* *slot += g (takes ownership of g). */
static em_status accumulate(em_tensor **slot, em_tensor *g)
{
    if (!g) return EM_OK;
    if (!*slot) {
        *slot = g;
        return EM_OK;
    }
    em_tensor *sum = own(em_add(*slot, g));
    tn_release_ref(*slot);
    tn_release_ref(g);
    *slot = sum;
    return sum ? EM_OK : em_last_status();
}

static void free_parts(slice_part *s)
{
    while (s) {
        slice_part *next = s->next;
        tn_release_ref(s->g);
        free(s);
        s = next;
    }
}

static int part_cmp(const void *a, const void *b)
{
    int64_t x = (*(slice_part *const *)a)->start, y = (*(slice_part *const *)b)->start;
    return (x > y) - (x < y);
}

/* One tensor of shape `full` from the slices' gradients, or NULL (with no error) when they are
 * not disjoint slices along one dim: the gradients in start order, zeros in the gaps, concatenated
 * in one pass. That is the sum of the slices' zero-padded gradients, which the slice rule gives
 * one at a time: q, k and v cut from one projection cost three pads and two adds of the whole
 * projection's size that way, the gates of a recurrent cell four and three per step. */
static em_tensor *cat_slices(slice_part **v, int n)
{
    em_shape full = v[0]->full;
    qsort(v, (size_t)n, sizeof *v, part_cmp);
    int dim = v[0]->dim;
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (v[i]->dim != dim || v[i]->start < at) return NULL;
        at = v[i]->start + em_tensor_dim(v[i]->g, dim);
    }
    em_tensor **pieces = malloc((size_t)(2 * n + 1) * sizeof *pieces);
    if (!pieces) {
        em_error(EM_ERR_OOM, "em_backward: out of memory");
        return NULL;
    }
    em_scope_begin();
    int np = 0;
    at = 0;
    for (int i = 0; i <= n; i++) {
        int64_t end = i < n ? v[i]->start : full.dims[dim];
        if (end > at) { /* a gap: zeros (a broadcast 0-d zero) */
            em_shape gs = full;
            gs.dims[dim] = end - at;
            pieces[np++] = ad_zero_base(gs, v[0]->g);
        }
        if (i < n) {
            pieces[np++] = v[i]->g;
            at = end + em_tensor_dim(v[i]->g, dim);
        }
    }
    em_tensor *r = tn_scope_failed() ? NULL : em_cat(pieces, np, dim);
    free(pieces);
    if (r) em_retain(r);
    em_scope_end();
    return r;
}

/* Adds the slices' gradients waiting for one output (*parts, consumed) into its gradient *slot:
 * in one concatenation where they are disjoint slices along one dim (cat_slices),
 * else each zero-padded and added, as the slice rule does. */
static em_status join_slices(em_tensor **slot, slice_part **parts)
{
    uint64_t mark = core_error_mark();
    slice_part *list = *parts;
    *parts = NULL;
    int n = 0;
    for (slice_part *s = list; s; s = s->next) n++;
    em_tensor *joined = NULL;
    if (n > 1) {
        slice_part **v = malloc((size_t)n * sizeof *v);
        if (!v) {
            free_parts(list);
            return em_error(EM_ERR_OOM, "em_backward: out of memory");
        }
        int i = 0;
        for (slice_part *s = list; s; s = s->next) v[i++] = s;
        joined = cat_slices(v, n);
        free(v);
    }
    em_status st = core_failed_since(mark) ? em_last_status() : EM_OK;
    if (st == EM_OK && joined) {
        st = accumulate(slot, joined);
    } else if (st == EM_OK) {
        for (slice_part *s = list; s && st == EM_OK; s = s->next) {
            em_tensor *g = own(ad_slice_pad(s->g, s->dim, s->start, s->full));
            st = g ? accumulate(slot, g) : em_last_status();
        }
    } else if (joined) {
        tn_release_ref(joined);
    }
    free_parts(list);
    return st;
}

/* A step-1 slice's gradient under a plain backward pass goes aside for join_slices (false: the
 * slice rule runs). With create_graph the rule's pad is recorded instead; with anomaly detection
 * the rule's checks run. */
static bool defer_slice(const ad_node *node, em_backward_opts o)
{
    return node->kind == AD_OP && node->op.kind == EM_OP_SLICE && node->op.p.slice.step == 1 &&
           !o.create_graph && !atomic_load(&anomaly_on) && node->needs[0] && node->parent[0];
}

static bool has_nonfinite(const em_tensor *g)
{
    em_no_grad_begin();
    em_tensor *f = em_isfinite(g);
    em_tensor *a = f ? em_all(f, EM_ALL, false) : NULL;
    bool bad = a && em_item_f64(a) == 0;
    em_release(a);
    em_release(f);
    em_no_grad_end();
    return bad;
}

/* Runs the rule of node n (not a leaf) with its output gradients; gin receives the kept
 * input gradients. */
static em_status run_rule(ad_node *n, em_tensor *const *gout, em_tensor **gin, em_backward_opts o);

static em_status rule_dispatch(ad_ctx *c);

em_grads *em_backward_with(em_tensor *const *outputs, em_tensor *const *seeds, int n,
                           em_backward_opts o)
{
    ad_init();
    const char *fn = "em_backward";
    if (!tn_check_ptr(fn, outputs, "outputs")) return NULL;
    if (n < 1) {
        em_error(EM_ERR_INVALID_ARG, "%s: %d outputs given", fn, n);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (!tn_check_ptr(fn, outputs[i], "outputs[i]")) return NULL;
        if (!outputs[i]->grad_info) {
            em_error(EM_ERR_STATE,
                     "%s: output %d does not require grad (no input of it was marked with "
                     "em_requires_grad, or it was computed between em_no_grad_begin and "
                     "em_no_grad_end)",
                     fn, i);
            return NULL;
        }
        if (seeds && seeds[i] && !em_shape_equal(tn_shape(seeds[i]), tn_shape(outputs[i]))) {
            em_error(EM_ERR_SHAPE, "%s: seed %d has shape %s, output has %s", fn, i,
                     tn_dims_str(seeds[i]->shape, seeds[i]->rank),
                     tn_dims_str(outputs[i]->shape, outputs[i]->rank));
            return NULL;
        }
    }
    if (o.create_graph) o.retain_graph = true; /* the recorded backward refers to saved tensors */
    pass p = {0};
    em_status st = EM_OK;
    for (int i = 0; i < n && st == EM_OK; i++) st = collect(&p, ad_node_of(outputs[i], NULL));
    em_grads *result = NULL;
    if (st == EM_OK) {
        p.g = calloc((size_t)(p.n ? p.n : 1), sizeof *p.g);
        p.parts = calloc((size_t)(p.n ? p.n : 1), sizeof *p.parts);
        result = em_alloc(sizeof *result);
        if (!p.g || !p.parts || !result)
            st = result ? em_error(EM_ERR_OOM, "em_backward: out of memory") : em_last_status();
        else
            memset(result, 0, sizeof *result);
    }
    em_scope_begin();
    if (!o.create_graph) em_no_grad_begin();
    for (int i = 0; i < n && st == EM_OK; i++) {
        int slot;
        ad_node *node = ad_node_of(outputs[i], &slot);
        em_tensor *seed = own(seeds && seeds[i] ? tn_share(seeds[i]) : em_ones_like(outputs[i]));
        if (seed && seed->dtype != outputs[i]->dtype) {
            em_tensor *c = own(em_cast(seed, outputs[i]->dtype));
            tn_release_ref(seed);
            seed = c;
        }
        if (!seed)
            st = em_last_status();
        else
            st = accumulate(&p.g[*seen_find(&p, node)][slot], seed);
    }
    for (int64_t pos = p.n - 1; pos >= 0 && st == EM_OK; pos--) {
        ad_node *node = p.order[pos];
        em_tensor **gout = p.g[pos];
        for (int k = 0; k < EM_OP_MAX_OUT && st == EM_OK; k++)
            if (p.parts[pos][k]) st = join_slices(&gout[k], &p.parts[pos][k]);
        if (st != EM_OK) break;
        bool any = false;
        for (int k = 0; k < EM_OP_MAX_OUT; k++) any |= gout[k] != NULL;
        if (node->kind == AD_LEAF) {
            if (!any) continue;
            if (result->n == result->cap) {
                int cap = result->cap ? result->cap * 2 : 8;
                grad_entry *e = realloc(result->e, (size_t)cap * sizeof *e);
                if (!e) {
                    st = em_error(EM_ERR_OOM, "em_backward: out of memory");
                    break;
                }
                result->e = e;
                result->cap = cap;
            }
            grad_entry *e = &result->e[result->n++];
            e->leaf = ad_node_retain(node);
            e->grad = gout[0]; /* ownership moves to the container */
            gout[0] = NULL;
            continue;
        }
        em_tensor *gin[EM_OP_MAX_IN] = {0};
        int64_t ppos[EM_OP_MAX_IN]; /* where each parent is in the order, or -1 */
        for (int i = 0; i < EM_OP_MAX_IN; i++) {
            const int64_t *at = node->parent[i] ? seen_find(&p, node->parent[i]) : NULL;
            ppos[i] = at ? *at : -1;
        }
        if (any && gout[0] && defer_slice(node, o) && ppos[0] >= 0) {
            slice_part *sp = malloc(sizeof *sp);
            if (!sp) {
                st = em_error(EM_ERR_OOM, "em_backward: out of memory");
            } else {
                slice_part **head = &p.parts[ppos[0]][node->parent_slot[0]];
                *sp = (slice_part){gout[0], node->op.p.slice.dim, node->op.p.slice.start,
                                   node->in_shape[0], *head};
                *head = sp;
                gout[0] = NULL;
                atomic_fetch_add(&rule_counts[EM_OP_SLICE], 1);
            }
        } else if (any) {
            st = run_rule(node, gout, gin, o);
        }
        for (int k = 0; k < EM_OP_MAX_OUT; k++) {
            if (gout[k]) tn_release_ref(gout[k]);
            gout[k] = NULL;
        }
        for (int i = 0; i < EM_OP_MAX_IN; i++) {
            if (!gin[i]) continue;
            if (st == EM_OK && ppos[i] >= 0)
                st = accumulate(&p.g[ppos[i]][node->parent_slot[i]], gin[i]);
            else
                tn_release_ref(gin[i]);
        }
        if (!o.retain_graph && node->kind != AD_LEAF) {
            ad_node_release_saved(node);
            node->released = true;
        }
    }
    /* leftover accumulations (after an error) */
    for (int64_t pos = 0; p.g && pos < p.n; pos++)
        for (int k = 0; k < EM_OP_MAX_OUT; k++)
            if (p.g[pos][k]) tn_release_ref(p.g[pos][k]);
    for (int64_t pos = 0; p.parts && pos < p.n; pos++)
        for (int k = 0; k < EM_OP_MAX_OUT; k++) free_parts(p.parts[pos][k]);
    if (!o.create_graph) em_no_grad_end();
    em_scope_end();
    release_claims(&p);
    free(p.g);
    free(p.parts);
    free(p.order);
    free(p.seen);
    if (st != EM_OK) {
        if (result) grads_destroy(result);
        return NULL;
    }
    if (tn_scope_track_obj(result, grads_scope_free)) result->scope_owned = true;
    return result;
}

em_grads *em_backward_opt(em_tensor *loss, em_backward_opts o)
{
    if (!tn_check_ptr("em_backward", loss, "loss")) return NULL;
    if (tn_numel(loss) != 1) {
        em_error(EM_ERR_SHAPE,
                 "em_backward: loss of shape %s has %lld elements; use em_backward_with and a "
                 "seed for non-scalar outputs",
                 tn_dims_str(loss->shape, loss->rank), (long long)tn_numel(loss));
        return NULL;
    }
    return em_backward_with(&loss, NULL, 1, o);
}

em_grads *em_backward(em_tensor *loss)
{
    return em_backward_opt(loss, (em_backward_opts){0});
}

/* ---- running one node's rule ------------------------------------------------------------- */

static em_status run_rule(ad_node *n, em_tensor *const *gout, em_tensor **gin, em_backward_opts o)
{
    ad_ctx c;
    memset(&c, 0, sizeof c);
    c.node = n;
    c.op = &n->op;
    c.err_mark = core_error_mark();
    for (int i = 0; i < EM_OP_MAX_IN; i++) c.needs[i] = n->needs[i];
    em_scope_begin();
    /* outputs as the rule sees them: attached to this node when the backward pass is itself
     * recorded, so gradients of gradients flow through them */
    em_status st = EM_OK;
    for (int k = 0; k < n->op.n_out && st == EM_OK; k++) {
        c.gout[k] = gout[k];
        if (!n->op.out[k]) continue;
        c.out[k] = tn_view_of(n->op.out[k], n->op.out[k]->shape, n->op.out[k]->strides,
                              n->op.out[k]->rank, n->op.out[k]->offset);
        if (!c.out[k])
            st = em_last_status();
        else if (o.create_graph && em_dtype_is_float(c.out[k]->dtype))
            ad_attach(c.out[k], n, k);
    }
    if (st == EM_OK)
        st = n->kind == AD_CHECKPOINT ? ad_checkpoint_backward(&c, o) : rule_dispatch(&c);
    if (st == EM_OK) st = ad_status(&c);
    for (int i = 0; i < EM_OP_MAX_IN && st == EM_OK; i++) {
        if (!c.gin[i]) continue;
        if (!n->needs[i]) {
            c.gin[i] = NULL;
            continue;
        }
        if (!em_shape_equal(tn_shape(c.gin[i]), n->in_shape[i])) {
            st = em_error(EM_ERR_INTERNAL,
                          "em_backward: the rule of %s gave a gradient of shape %s for input %d "
                          "of shape %s",
                          ad_node_name(n), tn_dims_str(c.gin[i]->shape, c.gin[i]->rank), i,
                          tn_dims_str(n->in_shape[i].dims, n->in_shape[i].rank));
            break;
        }
        c.gin[i] = ad_match_dtype(&c, i, c.gin[i]);
        if (!c.gin[i]) {
            st = em_last_status();
            break;
        }
        if (atomic_load(&anomaly_on) && has_nonfinite(c.gin[i])) {
            st = em_error(EM_ERR_STATE,
                          "em_backward: anomaly: the backward rule of %s produced NaN or Inf in "
                          "the gradient of input %d",
                          ad_node_name(n), i);
            break;
        }
    }
    if (st == EM_OK) st = ad_status(&c); /* a check above ran out of memory */
    /* a plain reference for the engine: valid whether the rule made the tensor or passed one
     * through; the rule's scope then drops its own references */
    for (int i = 0; i < EM_OP_MAX_IN; i++)
        gin[i] = (st == EM_OK && c.gin[i]) ? em_retain(c.gin[i]) : NULL;
    em_scope_end();
    return st;
}

/* Rule table: one family entry per kind, from the op table. */
typedef em_status (*family_rule)(ad_ctx *c);
static const family_rule rule_table[] = {
#define X(name, str, fam, ...) ad_rule_##fam,
#include "../ir/ops.def"
#undef X
};

static em_status rule_dispatch(ad_ctx *c)
{
    atomic_fetch_add(&rule_counts[c->op->kind], 1);
    return rule_table[c->op->kind](c);
}
