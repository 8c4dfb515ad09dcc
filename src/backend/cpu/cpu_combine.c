/* CPU kernels for the combine op family (placeholder until the family lands). */
#include "cpu.h"

em_status cpu_exec_combine(const em_op *op)
{
    return em_error(EM_ERR_UNSUPPORTED, "cpu: op %s is not implemented yet", em_op_name(op->kind));
}
