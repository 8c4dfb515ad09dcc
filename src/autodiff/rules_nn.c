/* Backward rules for the nn family: dispatch to the sub-family files. */
#include "autodiff_impl.h"

em_status ad_rule_nn(ad_ctx *c)
{
    switch (c->op->kind) {
    case EM_OP_CONV:
    case EM_OP_CONV_TRANSPOSE:
    case EM_OP_IM2COL:
    case EM_OP_COL2IM:
    case EM_OP_CONV_WEIGHT_GRAD: return ad_rule_conv(c);
    case EM_OP_MAX_POOL:
    case EM_OP_MAX_POOL_VALUES:
    case EM_OP_AVG_POOL:
    case EM_OP_ADAPTIVE_AVG_POOL:
    case EM_OP_ADAPTIVE_MAX_POOL:
    case EM_OP_INTERPOLATE:
    case EM_OP_PIXEL_SHUFFLE:
    case EM_OP_PIXEL_UNSHUFFLE: return ad_rule_pool(c);
    default: return ad_rule_norm(c);
    }
}
