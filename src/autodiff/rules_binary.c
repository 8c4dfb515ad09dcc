/* Backward rules for the binary family (broadcasting: gradients are summed back to each input's
 * shape with ad_sum_to). */
#include "autodiff_impl.h"

/* g summed to input i's shape. Takes ownership of g. */
static em_tensor *to_input(ad_ctx *c, int i, em_tensor *g)
{
    if (!g) return NULL;
    em_tensor *r = ad_sum_to(g, ad_in_shape(c, i));
    em_release(g);
    return r;
}

em_status ad_rule_binary(ad_ctx *c)
{
    const em_op *op = c->op;
    em_tensor *a = op->in[0], *b = op->n_in > 1 ? op->in[1] : NULL;
    em_tensor *g = ad_gout(c, 0);
    switch (op->kind) {
    case EM_OP_ADD:
        if (c->needs[0]) c->gin[0] = to_input(c, 0, tn_share(g));
        if (c->needs[1]) c->gin[1] = to_input(c, 1, tn_share(g));
        break;
    case EM_OP_SUB:
        if (c->needs[0]) c->gin[0] = to_input(c, 0, tn_share(g));
        if (c->needs[1]) c->gin[1] = to_input(c, 1, em_neg(g));
        break;
    case EM_OP_MUL:
        if (c->needs[0]) c->gin[0] = to_input(c, 0, em_mul(g, b));
        if (c->needs[1]) c->gin[1] = to_input(c, 1, em_mul(g, a));
        break;
    default: return ad_no_rule(c);
    }
    return em_failed() ? em_last_status() : EM_OK;
}
