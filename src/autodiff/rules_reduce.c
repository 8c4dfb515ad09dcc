/* Backward rules for reductions, scans and softmax. */
#include "autodiff_impl.h"

/* g (the reduced shape) brought back to the input's shape: unsqueeze reduced dims when keepdim
 * was off, then expand. */
static em_tensor *unreduce(ad_ctx *c, const em_tensor *g, uint32_t mask, bool keepdim)
{
    em_shape in = ad_in_shape(c, 0);
    em_shape kept = in;
    for (int d = 0; d < in.rank; d++)
        if (mask & (1u << d)) kept.dims[d] = 1;
    em_tensor *k = keepdim ? tn_share((em_tensor *)g) : em_reshape(g, kept);
    em_tensor *r = em_expand(k, in);
    em_release(k);
    return r;
}

em_status ad_rule_reduce(ad_ctx *c)
{
    const em_op *op = c->op;
    if (!c->needs[0]) return EM_OK;
    em_tensor *g = ad_gout(c, 0);
    switch (op->kind) {
    case EM_OP_SUM: c->gin[0] = unreduce(c, g, (uint32_t)op->i[0], op->i[1] != 0); break;
    default: return ad_no_rule(c);
    }
    return em_failed() ? em_last_status() : EM_OK;
}
