/* Unary math and activations: one input, one output of the same shape (contiguous).
 * IR parameters: LEAKY_RELU f0=negative_slope; ELU f0=alpha; CELU f0=alpha;
 * SOFTPLUS f0=beta f1=threshold; HARDTANH f0=min_val f1=max_val. Every other kind of the
 * family has no parameters (SELU's alpha and scale and RELU6's bounds 0 and 6 are fixed by the
 * kind). The output dtype follows from the input dtype and the kind (see out_dtype below), so
 * a backward rule can recompute it from the record. */
#include <math.h>

#include "op.h"

/* How a kind maps input dtypes to an output dtype. */
typedef enum rule {
    R_FLOAT_MATH, /* floats keep their dtype; integers and bool give f32 */
    R_KEEP_NUM,   /* any integer or float dtype kept; bool is an error (neg, abs) */
    R_KEEP_ALL,   /* every dtype kept (sign) */
    R_SQUARE,     /* dtype kept, bool gives i64 (as pow(x, 2) in torch) */
    R_ROUNDING,   /* dtype kept, integers are copied; bool is an error */
    R_PREDICATE,  /* any dtype -> bool */
    R_BITWISE,    /* integers and bool kept; floats are an error */
    R_ACT_FLOAT,  /* floats only */
    R_ACT_NUM,    /* floats and integers kept; bool is an error (relu, relu6, hardtanh) */
} rule;

static rule rule_of(em_op_kind k)
{
    switch (k) {
    case EM_OP_NEG:
    case EM_OP_ABS: return R_KEEP_NUM;
    case EM_OP_SIGN: return R_KEEP_ALL;
    case EM_OP_SQUARE: return R_SQUARE;
    case EM_OP_FLOOR:
    case EM_OP_CEIL:
    case EM_OP_ROUND:
    case EM_OP_TRUNC: return R_ROUNDING;
    case EM_OP_ISNAN:
    case EM_OP_ISINF:
    case EM_OP_ISFINITE:
    case EM_OP_LOGICAL_NOT: return R_PREDICATE;
    case EM_OP_BITWISE_NOT: return R_BITWISE;
    case EM_OP_RELU:
    case EM_OP_RELU6:
    case EM_OP_HARDTANH: return R_ACT_NUM;
    case EM_OP_LEAKY_RELU:
    case EM_OP_ELU:
    case EM_OP_SELU:
    case EM_OP_CELU:
    case EM_OP_GELU:
    case EM_OP_GELU_TANH:
    case EM_OP_SILU:
    case EM_OP_SIGMOID:
    case EM_OP_LOG_SIGMOID:
    case EM_OP_HARD_SIGMOID:
    case EM_OP_HARD_SWISH:
    case EM_OP_MISH:
    case EM_OP_SOFTPLUS:
    case EM_OP_SOFTSIGN: return R_ACT_FLOAT;
    default: return R_FLOAT_MATH;
    }
}

/* Output dtype of kind k on input dtype dt; false + EM_ERR_DTYPE naming `fn` when refused. */
static bool out_dtype(const char *fn, em_op_kind k, em_dtype dt, em_dtype *out)
{
    bool is_float = em_dtype_is_float(dt), is_bool = dt == EM_BOOL;
    const char *why = NULL;
    *out = dt;
    switch (rule_of(k)) {
    case R_FLOAT_MATH:
        if (!is_float) *out = EM_F32;
        break;
    case R_KEEP_NUM:
        if (is_bool) why = "";
        break;
    case R_KEEP_ALL: break;
    case R_SQUARE:
        if (is_bool) *out = EM_I64;
        break;
    case R_ROUNDING:
        if (is_bool) why = "";
        break;
    case R_PREDICATE: *out = EM_BOOL; break;
    case R_BITWISE:
        if (is_float) why = " (integers and bool only)";
        break;
    case R_ACT_FLOAT:
        if (!is_float) why = " (floating-point dtypes only)";
        break;
    case R_ACT_NUM:
        if (is_bool) why = "";
        break;
    }
    if (why) {
        em_error(EM_ERR_DTYPE, "%s: dtype %s is not supported%s", fn, em_dtype_name(dt), why);
        return false;
    }
    return true;
}

/* Validates x, allocates the output and dispatches kind k with parameters f[0..nf). */
static em_tensor *unary(em_op_kind k, const char *fn, const em_tensor *x, const double *f, int nf)
{
    if (!tn_check_ptr(fn, x, "x")) return NULL;
    em_dtype dt;
    if (!out_dtype(fn, k, x->dtype, &dt)) return NULL;
    em_tensor *out = tn_new_for(fn, dt, x->shape, x->rank, x->storage->device);
    em_tensor *in = (em_tensor *)x;
    return tn_run1(k, out, &in, 1, NULL, 0, f, nf);
}

#define UNARY_FN(name, KIND)                                                                       \
    em_tensor *em_##name(const em_tensor *x)                                                       \
    {                                                                                              \
        return unary(EM_OP_##KIND, "em_" #name, x, NULL, 0);                                       \
    }

UNARY_FN(neg, NEG)
UNARY_FN(abs, ABS)
UNARY_FN(sign, SIGN)
UNARY_FN(exp, EXP)
UNARY_FN(exp2, EXP2)
UNARY_FN(log, LOG)
UNARY_FN(log2, LOG2)
UNARY_FN(log1p, LOG1P)
UNARY_FN(expm1, EXPM1)
UNARY_FN(sqrt, SQRT)
UNARY_FN(rsqrt, RSQRT)
UNARY_FN(square, SQUARE)
UNARY_FN(reciprocal, RECIPROCAL)
UNARY_FN(sin, SIN)
UNARY_FN(cos, COS)
UNARY_FN(tan, TAN)
UNARY_FN(asin, ASIN)
UNARY_FN(acos, ACOS)
UNARY_FN(atan, ATAN)
UNARY_FN(sinh, SINH)
UNARY_FN(cosh, COSH)
UNARY_FN(tanh, TANH)
UNARY_FN(asinh, ASINH)
UNARY_FN(acosh, ACOSH)
UNARY_FN(atanh, ATANH)
UNARY_FN(erf, ERF)
UNARY_FN(floor, FLOOR)
UNARY_FN(ceil, CEIL)
UNARY_FN(round, ROUND)
UNARY_FN(trunc, TRUNC)
UNARY_FN(isnan, ISNAN)
UNARY_FN(isinf, ISINF)
UNARY_FN(isfinite, ISFINITE)
UNARY_FN(logical_not, LOGICAL_NOT)
UNARY_FN(bitwise_not, BITWISE_NOT)

UNARY_FN(relu, RELU)
UNARY_FN(relu6, RELU6)
UNARY_FN(selu, SELU)
UNARY_FN(gelu, GELU)
UNARY_FN(gelu_tanh, GELU_TANH)
UNARY_FN(silu, SILU)
UNARY_FN(sigmoid, SIGMOID)
UNARY_FN(log_sigmoid, LOG_SIGMOID)
UNARY_FN(hard_sigmoid, HARD_SIGMOID)
UNARY_FN(hard_swish, HARD_SWISH)
UNARY_FN(mish, MISH)
UNARY_FN(softsign, SOFTSIGN)

#undef UNARY_FN

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
    double f[1] = {negative_slope};
    return unary(EM_OP_LEAKY_RELU, "em_leaky_relu", x, f, 1);
}

em_tensor *em_elu(const em_tensor *x, double alpha)
{
    if (!tn_check_ptr("em_elu", x, "x")) return NULL;
    if (!check_param("em_elu", "alpha", alpha, false)) return NULL;
    double f[1] = {alpha};
    return unary(EM_OP_ELU, "em_elu", x, f, 1);
}

em_tensor *em_celu(const em_tensor *x, double alpha)
{
    if (!tn_check_ptr("em_celu", x, "x")) return NULL;
    if (!check_param("em_celu", "alpha", alpha, false)) return NULL;
    if (alpha == 0) {
        em_error(EM_ERR_INVALID_ARG, "em_celu: alpha must not be 0");
        return NULL;
    }
    double f[1] = {alpha};
    return unary(EM_OP_CELU, "em_celu", x, f, 1);
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
    double f[2] = {beta, threshold};
    return unary(EM_OP_SOFTPLUS, "em_softplus", x, f, 2);
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
    double f[2] = {min_val, max_val};
    return unary(EM_OP_HARDTANH, "em_hardtanh", x, f, 2);
}
