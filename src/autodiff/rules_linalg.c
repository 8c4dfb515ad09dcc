/* Backward rules for the linalg family: matmul in all its forms (dot, matvec, outer and batched
 * products with broadcast batch dims). Temporaries belong to the rule's scope. */
#include "autodiff_impl.h"

/* matmul: with A = a as [.., M, K] (a 1-D a as [1, K]), B = b as [.., K, N] (a 1-D b as
 * [K, 1]) and G = g with the removed dims put back ([.., M, N]):
 *   dA = G @ B^T summed over the batch dims A was broadcast along, dB = A^T @ G likewise. */
static em_status matmul_backward(ad_ctx *c)
{
    const em_op *op = c->op;
    bool a1 = op->i[0] != 0, b1 = op->i[1] != 0;
    em_tensor *g = ad_gout(c, 0);
    em_tensor *a = op->in[0], *b = op->in[1];
    em_tensor *A = a1 ? em_unsqueeze(a, 0) : a;  /* [.., M, K] */
    em_tensor *B = b1 ? em_unsqueeze(b, -1) : b; /* [.., K, N] */
    em_tensor *G = g;                            /* [.., M, N] */
    if (a1 && b1)
        G = em_reshape(g, EM_SHAPE(1, 1));
    else if (a1)
        G = em_unsqueeze(g, -2);
    else if (b1)
        G = em_unsqueeze(g, -1);
    if (c->needs[0]) {
        em_tensor *ga = em_matmul(G, em_transpose(B, -1, -2)); /* [batch.., M, K] */
        em_shape as = ad_in_shape(c, 0);
        c->gin[0] = a1 ? em_reshape(ad_sum_to(ga, EM_SHAPE(1, as.dims[0])), as) : ad_sum_to(ga, as);
    }
    if (c->needs[1] && !b1 && A->rank == 2 && b->rank == 2 && b->strides[0] == 1 &&
        b->strides[1] != 1) {
        /* b is a transposed view (x @ W^T in a linear layer): compute the gradient in W's own
         * layout, G^T @ A [N, K], and hand back its transpose, so the view's rule gives W a
         * contiguous gradient (the optimizer then needs no copy) */
        c->gin[1] = em_transpose(em_matmul(em_transpose(G, -1, -2), A), 0, 1);
    } else if (c->needs[1]) {
        em_tensor *gb = em_matmul(em_transpose(A, -1, -2), G); /* [batch.., K, N] */
        em_shape bs = ad_in_shape(c, 1);
        c->gin[1] = b1 ? em_reshape(ad_sum_to(gb, EM_SHAPE(bs.dims[0], 1)), bs) : ad_sum_to(gb, bs);
    }
    return em_failed() ? em_last_status() : EM_OK;
}

em_status ad_rule_linalg(ad_ctx *c)
{
    switch (c->op->kind) {
    case EM_OP_MATMUL: return matmul_backward(c);
    default: return ad_no_rule(c);
    }
}
