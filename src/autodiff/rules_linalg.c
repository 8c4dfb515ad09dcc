/* Backward rules for the linalg family: matmul in all its forms (dot, matvec, outer and batched
 * products with broadcast batch dims). Temporaries belong to the rule's scope. */
#include "autodiff_impl.h"

/* matmul: with A = a as [.., M, K] (a 1-D a as [1, K]), B = b as [.., K, N] (a 1-D b as
 * [K, 1]) and G = g with the removed dims put back ([.., M, N]):
 *   dA = G @ B^T summed over the batch dims A was broadcast along, dB = A^T @ G likewise. */
static em_status matmul_backward(ad_ctx *c, em_tensor *g)
{
    const em_op *op = c->op;
    bool a1 = op->p.matmul.a_vec, b1 = op->p.matmul.b_vec;
    em_tensor *a = op->in[0], *b = op->in[1];
    em_tensor *A = a1 ? em_unsqueeze(a, 0) : a;  /* [.., M, K] */
    em_tensor *B = b1 ? em_unsqueeze(b, -1) : b; /* [.., K, N] */
    em_tensor *G = g;                            /* [.., M, N] */
    if (!g) return em_last_status();
    if (a1 && b1)
        G = em_reshape(g, EM_SHAPE(1, 1));
    else if (a1)
        G = em_unsqueeze(g, -2);
    else if (b1)
        G = em_unsqueeze(g, -1);
    if (!A || !B || !G) return em_last_status();
    /* a 2-D b under a batched a (a linear layer on [.., M, K]): the batch dims fold into M, so
     * each gradient is one product over all rows (dB = A^T @ G as [K, rows] @ [rows, N]) instead
     * of one product per batch entry summed afterwards */
    bool fold = !b1 && b->rank == 2 && A->rank > 2;
    if (fold) {
        int64_t K = A->shape[A->rank - 1], N = b->shape[1], rows = em_tensor_numel(A) / (K ? K : 1);
        A = em_reshape(A, EM_SHAPE(rows, K));
        G = em_reshape(G, EM_SHAPE(rows, N));
        if (!A || !G) return em_last_status();
    }
    if (c->needs[0]) {
        em_tensor *ga = em_matmul(G, em_transpose(B, -1, -2)); /* [batch.., M, K] */
        em_shape as = ad_in_shape(c, 0);
        c->gin[0] = fold ? em_reshape(ga, as)
                    : a1 ? em_reshape(ad_sum_to(ga, EM_SHAPE(1, as.dims[0])), as)
                         : ad_sum_to(ga, as);
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
    return ad_status(c);
}

/* matmul_bias_act: y = act(z), z = a @ b + bias. gz = g * act'(z) (+ the gradient of the saved
 * z, out[1], which a second-order pass can reach), then a and b as for matmul with gz, and
 * dbias = gz summed down to [N]. relu's derivative comes from y (y <= 0: 0, as the relu rule);
 * gelu, gelu_tanh and silu need z: the forward saved it as out[1] when it was recorded (a store of
 * the output's size instead of a second product here); a record without it, or one whose saved
 * outputs were freed, recomputes z with ops. */
static em_status matmul_bias_act_backward(ad_ctx *c)
{
    const em_op *op = c->op;
    em_tensor *g = ad_gout(c, 0), *y = c->out[0];
    if (!g) return em_last_status();
    em_tensor *gz = g;
    em_act act = op->p.matmul.act;
    switch (act) {
    case EM_ACT_RELU: gz = ad_act_backward(EM_OP_RELU, NULL, y, g); break;
    case EM_ACT_GELU:
    case EM_ACT_GELU_TANH:
    case EM_ACT_SILU: {
        em_op_kind k = act == EM_ACT_GELU        ? EM_OP_GELU
                       : act == EM_ACT_GELU_TANH ? EM_OP_GELU_TANH
                                                 : EM_OP_SILU;
        em_tensor *z = op->n_out > 1 ? c->out[1] : NULL;
        if (!z) {
            z = em_matmul(op->in[0], op->in[1]);
            if (op->n_in > 2) z = em_add(z, op->in[2]);
        }
        gz = ad_act_backward(k, z, y, g);
        break;
    }
    default: break;
    }
    if (op->n_out > 1 && c->gout[1]) gz = em_add(gz, c->gout[1]);
    if (!gz) return ad_status(c);
    if (op->n_in > 2 && c->needs[2]) {
        bool b1 = op->p.matmul.b_vec;
        em_tensor *gb = b1 ? em_sum(gz, EM_ALL, false) : ad_sum_to(gz, ad_in_shape(c, 2));
        c->gin[2] = b1 ? em_reshape(gb, ad_in_shape(c, 2)) : gb;
    }
    return matmul_backward(c, gz);
}

em_status ad_rule_linalg(ad_ctx *c)
{
    switch (c->op->kind) {
    case EM_OP_MATMUL: return matmul_backward(c, ad_gout(c, 0));
    case EM_OP_MATMUL_BIAS_ACT: return matmul_bias_act_backward(c);
    default: return ad_no_rule(c);
    }
}
