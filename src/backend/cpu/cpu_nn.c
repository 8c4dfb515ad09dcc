/* CPU dispatch for the nn op family: convolutions, pooling and resampling, normalisation and
 * attention live in their own files. */
#include "cpu.h"

em_status cpu_exec_nn(const ir_op *op)
{
    switch (op->kind) {
    case EM_OP_CONV:
    case EM_OP_CONV_TRANSPOSE:
    case EM_OP_IM2COL:
    case EM_OP_COL2IM: return cpu_exec_conv(op);
    case EM_OP_CONV_WEIGHT_GRAD: return cpu_exec_conv_wgrad(op);
    case EM_OP_MAX_POOL:
    case EM_OP_MAX_POOL_VALUES:
    case EM_OP_AVG_POOL:
    case EM_OP_ADAPTIVE_AVG_POOL:
    case EM_OP_ADAPTIVE_MAX_POOL:
    case EM_OP_INTERPOLATE:
    case EM_OP_PIXEL_SHUFFLE:
    case EM_OP_PIXEL_UNSHUFFLE: return cpu_exec_pool(op);
    case EM_OP_LAYER_NORM:
    case EM_OP_RMS_NORM:
    case EM_OP_GROUP_NORM:
    case EM_OP_BATCH_NORM:
    case EM_OP_SDPA:
    case EM_OP_SDPA_BACKWARD:
    case EM_OP_NORM_BACKWARD:
    case EM_OP_DROPOUT: return cpu_exec_norm(op);
    default: break;
    }
    return em_error(EM_ERR_UNSUPPORTED, "cpu: op %s is not an nn op", em_op_name(op->kind));
}
