/* The op table as data: one ir_info per row of ops.def, and the names the rest of the library
 * prints. */
#include "ir.h"

/* An expression column as text: IR_NOEXPR expands to nothing before it is turned into "". */
#define IR_NOEXPR
#define IR_TEXT_(...) #__VA_ARGS__
#define IR_TEXT(e)    IR_TEXT_(e)

const ir_info ir_ops[EM_OP_COUNT] = {
#define X(kind, str, fam, fl, imin, imax, omin, omax, par, dt, doc, low, e, d0, d1, d2)            \
    [EM_OP_##kind] = {.name = str,                                                                 \
                      .family = #fam,                                                              \
                      .flags = (fl),                                                               \
                      .in_min = imin,                                                              \
                      .in_max = imax,                                                              \
                      .out_min = omin,                                                             \
                      .out_max = omax,                                                             \
                      .dtype = IR_DT_##dt,                                                         \
                      .param_size = (uint16_t)sizeof(em_p_##par),                                  \
                      .params = "em_p_" #par,                                                      \
                      .dtypes = doc,                                                               \
                      .lowering = low,                                                             \
                      .expr = IR_TEXT(e),                                                          \
                      .d = {IR_TEXT(d0), IR_TEXT(d1), IR_TEXT(d2)}},
#include "ops.def"
#undef X
};

const char *em_op_name(em_op_kind kind)
{
    return (kind >= 0 && kind < EM_OP_COUNT) ? ir_ops[kind].name : "?";
}

const char *em_op_family(em_op_kind kind)
{
    return (kind >= 0 && kind < EM_OP_COUNT) ? ir_ops[kind].family : "?";
}
