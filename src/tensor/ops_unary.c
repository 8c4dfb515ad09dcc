/* Unary math and activations: one input, one output of the same shape (contiguous). The
 * parameterised activations (leaky_relu, elu, celu, softplus, hardtanh) carry an em_p_act; the
 * others none (SELU's alpha and scale and RELU6's bounds 0 and 6 are fixed by the kind). The
 * output dtype follows from the input dtype and the kind's dtype rule in the op table, so a
 * backward rule can recompute it from the record. */
#include <math.h>
#include <string.h>

#include "op.h"

/* Output dtype of kind k on input dtype dt; false + EM_ERR_DTYPE naming `fn` when refused. */
static bool out_dtype(const char *fn, em_op_kind k, em_dtype dt, em_dtype *out)
{
    bool is_float = em_dtype_is_float(dt), is_bool = dt == EM_BOOL;
    const char *why = NULL;
    *out = dt;
    switch (ir_info_of(k)->dtype) {
    case IR_DT_FLOAT_MATH:
        if (!is_float) *out = EM_F32;
        break;
    case IR_DT_KEEP_NUM:
        if (is_bool) why = "";
        break;
    case IR_DT_SQUARE:
        if (is_bool) *out = EM_I64;
        break;
    case IR_DT_BOOL: *out = EM_BOOL; break;
    case IR_DT_BITWISE:
        if (is_float) why = " (integers and bool only)";
        break;
    case IR_DT_FLOAT:
        if (!is_float) why = " (floating-point dtypes only)";
        break;
    default: break; /* KEEP_ALL */
    }
    if (why) {
        em_error(EM_ERR_DTYPE, "%s: dtype %s is not supported%s", fn, em_dtype_name(dt), why);
        return false;
    }
    return true;
}

/* Validates x, allocates the output and dispatches kind k with the parameters *p (or none). */
em_tensor *tn_unary(em_op_kind k, const char *fn, const em_tensor *x, const em_params *p)
{
    if (!tn_check_ptr(fn, x, "x")) return NULL;
    em_dtype dt;
    if (!out_dtype(fn, k, x->dtype, &dt)) return NULL;
    em_tensor *out = tn_new_for(fn, dt, x->shape, x->rank, x->storage->device);
    em_tensor *in = (em_tensor *)x;
    return tn_run(k, out, &in, 1, p);
}

/* The parameterless kinds' em_ functions are generated from the op table (build/gen/ops_gen.c). */

/* A parameter must be a number (finite unless `inf_ok`); false + EM_ERR_INVALID_ARG. */
static bool check_param(const char *fn, const char *what, double v, bool inf_ok)
{
    if (isnan(v) || (!inf_ok && isinf(v))) {
        em_error(EM_ERR_INVALID_ARG, "%s: %s must be a %snumber, got %g", fn, what,
                 inf_ok ? "" : "finite ", v);
        return false;
    }
    return true;
}

em_tensor *em_leaky_relu(const em_tensor *x, double negative_slope)
{
    if (!tn_check_ptr("em_leaky_relu", x, "x")) return NULL;
    if (!check_param("em_leaky_relu", "negative_slope", negative_slope, false)) return NULL;
    em_params p = {.act = {.negative_slope = negative_slope}};
    return tn_unary(EM_OP_LEAKY_RELU, "em_leaky_relu", x, &p);
}

em_tensor *em_elu(const em_tensor *x, double alpha)
{
    if (!tn_check_ptr("em_elu", x, "x")) return NULL;
    if (!check_param("em_elu", "alpha", alpha, false)) return NULL;
    em_params p = {.act = {.alpha = alpha}};
    return tn_unary(EM_OP_ELU, "em_elu", x, &p);
}

em_tensor *em_celu(const em_tensor *x, double alpha)
{
    if (!tn_check_ptr("em_celu", x, "x")) return NULL;
    if (!check_param("em_celu", "alpha", alpha, false)) return NULL;
    if (alpha == 0) {
        em_error(EM_ERR_INVALID_ARG, "em_celu: alpha must not be 0");
        return NULL;
    }
    em_params p = {.act = {.alpha = alpha}};
    return tn_unary(EM_OP_CELU, "em_celu", x, &p);
}

em_tensor *em_softplus(const em_tensor *x, double beta, double threshold)
{
    if (!tn_check_ptr("em_softplus", x, "x")) return NULL;
    if (!check_param("em_softplus", "beta", beta, false) ||
        !check_param("em_softplus", "threshold", threshold, true))
        return NULL;
    if (beta == 0) {
        em_error(EM_ERR_INVALID_ARG, "em_softplus: beta must not be 0");
        return NULL;
    }
    em_params p = {.act = {.beta = beta, .threshold = threshold}};
    return tn_unary(EM_OP_SOFTPLUS, "em_softplus", x, &p);
}

em_tensor *em_hardtanh(const em_tensor *x, double min_val, double max_val)
{
    if (!tn_check_ptr("em_hardtanh", x, "x")) return NULL;
    if (!check_param("em_hardtanh", "min_val", min_val, true) ||
        !check_param("em_hardtanh", "max_val", max_val, true))
        return NULL;
    if (min_val > max_val) {
        em_error(EM_ERR_INVALID_ARG, "em_hardtanh: min_val %g is greater than max_val %g", min_val,
                 max_val);
        return NULL;
    }
    em_params p = {.act = {.min_val = min_val, .max_val = max_val}};
    return tn_unary(EM_OP_HARDTANH, "em_hardtanh", x, &p);
}

/* EW_GRAD: the derivative of the forward record fwd by its input `arg`, from the kind's table
 * expression, at its inputs and output. */
em_tensor *tn_ew_grad(const em_op *fwd, int arg, em_tensor *const *in, int n_in, em_tensor *y)
{
    if (!y) return NULL;
    for (int i = 0; i < n_in; i++)
        if (!in[i]) return NULL;
    em_params p = {.ew_grad = {.kind = (int32_t)fwd->kind, .arg = arg}};
    if (strcmp(ir_info_of(fwd->kind)->params, "em_p_act") == 0) p.ew_grad.act = fwd->p.act;
    em_tensor *ops[3] = {in[0], n_in > 1 ? in[1] : y, y};
    em_tensor *out = tn_new_for("ew_grad", y->dtype, y->shape, y->rank, y->storage->device);
    return tn_run(EM_OP_EW_GRAD, out, ops, n_in + 1, &p);
}
