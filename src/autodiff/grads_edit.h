/* Editing gradient containers from outside the backward pass: what clipping, accumulation and
 * scaling (src/optim) need. Entries are (leaf node, gradient) pairs in insertion order. */
#ifndef EMBER_GRADS_EDIT_H
#define EMBER_GRADS_EDIT_H

#include "autodiff_impl.h"

/* A new empty container owned by the caller (em_grads_free). NULL and EM_ERR_OOM on failure. */
em_grads *ad_grads_new(void);
/* Gradient of entry i (borrowed), 0 <= i < em_grads_count(g). */
em_tensor *ad_grads_tensor(const em_grads *g, int i);
/* Leaf node of entry i (borrowed): identifies the leaf across containers. */
ad_node *ad_grads_leaf(const em_grads *g, int i);
/* Index of the entry for `leaf`, or -1. */
int ad_grads_find(const em_grads *g, const ad_node *leaf);
/* Replaces the gradient of entry i with t (the container takes the reference t carries, scope
 * ownership included) and releases the old one. */
void ad_grads_replace(em_grads *g, int i, em_tensor *t);
/* Appends an entry for `leaf` (retained) holding t (taken as in ad_grads_replace). */
em_status ad_grads_append(em_grads *g, ad_node *leaf, em_tensor *t);

#endif
