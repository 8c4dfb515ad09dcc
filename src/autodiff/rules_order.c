/* Backward rules for the ordering family (sort, topk, median): the gradient of the values goes
 * back to the positions the indices output names, scatter-added into zeros along dim. */
#include "autodiff_impl.h"

em_status ad_rule_order(ad_ctx *c)
{
    const em_op *op = c->op;
    if (op->kind != EM_OP_SORT && op->kind != EM_OP_TOPK && op->kind != EM_OP_MEDIAN)
        return ad_no_rule(c);
    if (!c->needs[0]) return EM_OK;
    em_tensor *g = ad_gout(c, 0);
    if (!g) return em_last_status();
    em_shape in = ad_in_shape(c, 0);
    int dim = op->p.order.dim;
    if (in.rank == 0) { /* one element: it is its own sort, top-1 and median */
        if (op->kind != EM_OP_TOPK || op->p.order.k > 0) c->gin[0] = g;
        return EM_OK;
    }
    em_tensor *idx = c->out[1];
    if (op->kind == EM_OP_MEDIAN && !op->p.order.keepdim) { /* bring back the reduced dim */
        g = em_unsqueeze(g, dim);
        idx = em_unsqueeze(idx, dim);
    }
    em_tensor *z = ad_zero_base(in, g);
    if (g && idx && z) c->gin[0] = tn_scatter_inrange(z, dim, idx, g, EM_SCATTER_ADD);
    return ad_status(c);
}
