/* Editing gradient containers (clipping, accumulation, scaling in src/optim). */
#include <stdlib.h>
#include <string.h>

#include "grads_edit.h"

/* the container's references are plain (never scope-owned), as engine.c releases them */
static em_tensor *plain_ref(em_tensor *t)
{
    em_tensor *own = em_retain(t);
    em_release(t);
    return own;
}

em_grads *ad_grads_new(void)
{
    em_grads *g = em_alloc(sizeof *g);
    if (!g) return NULL;
    memset(g, 0, sizeof *g);
    return g;
}

em_tensor *ad_grads_tensor(const em_grads *g, int i)
{
    return g->e[i].grad;
}

ad_node *ad_grads_leaf(const em_grads *g, int i)
{
    return g->e[i].leaf;
}

int ad_grads_find(const em_grads *g, const ad_node *leaf)
{
    const em_grads *m = g;
    for (int i = 0; i < m->n; i++)
        if (m->e[i].leaf == leaf) return i;
    return -1;
}

void ad_grads_replace(em_grads *g, int i, em_tensor *t)
{
    em_grads *m = g;
    em_tensor *own = plain_ref(t);
    tn_release_ref(m->e[i].grad);
    m->e[i].grad = own;
}

em_status ad_grads_append(em_grads *g, ad_node *leaf, em_tensor *t)
{
    em_grads *m = g;
    if (m->n == m->cap) {
        int cap = m->cap ? m->cap * 2 : 8;
        /* engine.c grows and frees the array with realloc/free */
        grad_entry *e = realloc(m->e, (size_t)cap * sizeof *e);
        if (!e) {
            em_release(t);
            return em_error(EM_ERR_OOM, "em_grads: out of memory");
        }
        m->e = e;
        m->cap = cap;
    }
    m->e[m->n].leaf = ad_node_retain(leaf);
    m->e[m->n].grad = plain_ref(t);
    m->n++;
    return EM_OK;
}
