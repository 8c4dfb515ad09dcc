/* CPU kernels for the nn conv sub-family (placeholder until it lands). */
#include "cpu.h"

em_status cpu_exec_conv(const em_op *op)
{
    return em_error(EM_ERR_UNSUPPORTED, "cpu: op %s is not implemented yet", em_op_name(op->kind));
}
