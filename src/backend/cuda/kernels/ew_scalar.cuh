// The scalar functions of the unary, binary and comparison ops, switched on the op's OP_* code
// (op_codes.cuh, from em_op_kind): f32 binary ops compute in f64 and round once, as the CPU
// backend does. Used by ew_scalar.cu and rows.cu.
#ifndef EMBER_CUDA_EW_SCALAR_CUH
#define EMBER_CUDA_EW_SCALAR_CUH
#include "op_codes.cuh"
#include "prelude.cuh"

#define UNARY_BODY(T, F, ABS, EXP, EXPM1, LOG1P, TANH, ERF, CLAMP, SIGM, SOFTP)                    \
    switch (op) {                                                                                  \
    case OP_NEG: return -v;                                                                        \
    case OP_ABS: return ABS(v);                                                                    \
    case OP_SIGN: return v > 0 ? (T)1 : (v < 0 ? (T)-1 : (v == v ? (T)0 : v));                     \
    case OP_EXP: return EXP(v);                                                                    \
    case OP_EXP2: return F(exp2)(v);                                                               \
    case OP_LOG: return F(log)(v);                                                                 \
    case OP_LOG2: return F(log2)(v);                                                               \
    case OP_LOG1P: return LOG1P(v);                                                                \
    case OP_EXPM1: return EXPM1(v);                                                                \
    case OP_SQRT: return F(sqrt)(v);                                                               \
    case OP_RSQRT: return (T)1 / F(sqrt)(v);                                                       \
    case OP_SQUARE: return v * v;                                                                  \
    case OP_RECIPROCAL: return (T)1 / v;                                                           \
    case OP_SIN: return F(sin)(v);                                                                 \
    case OP_COS: return F(cos)(v);                                                                 \
    case OP_TAN: return F(tan)(v);                                                                 \
    case OP_ASIN: return F(asin)(v);                                                               \
    case OP_ACOS: return F(acos)(v);                                                               \
    case OP_ATAN: return F(atan)(v);                                                               \
    case OP_SINH: return F(sinh)(v);                                                               \
    case OP_COSH: return F(cosh)(v);                                                               \
    case OP_TANH: return TANH(v);                                                                  \
    case OP_ASINH: return F(asinh)(v);                                                             \
    case OP_ACOSH: return F(acosh)(v);                                                             \
    case OP_ATANH: return F(atanh)(v);                                                             \
    case OP_ERF: return ERF(v);                                                                    \
    case OP_FLOOR: return F(floor)(v);                                                             \
    case OP_CEIL: return F(ceil)(v);                                                               \
    case OP_ROUND: return F(rint)(v);                                                              \
    case OP_TRUNC: return F(trunc)(v);                                                             \
    case OP_RELU: return v < 0 ? (T)0 : v;                                                         \
    case OP_RELU6: return CLAMP(v, (T)0, (T)6);                                                    \
    case OP_LEAKY_RELU: return v > 0 ? v : v * a;                                                  \
    case OP_ELU: return v > 0 ? v : a * EXPM1(v);                                                  \
    case OP_SELU: return v > 0 ? (T)SELU_SCALE * v : (T)SELU_SCALE * (T)SELU_ALPHA * EXPM1(v);     \
    case OP_CELU: return v > 0 ? v : a * EXPM1(v * b);                                             \
    case OP_GELU: return (T)0.5 * v * ((T)1 + ERF(v * (T)SQRT1_2));                                \
    case OP_GELU_TANH:                                                                             \
        return (T)0.5 * v * ((T)1 + TANH((T)SQRT_2_PI * (v + (T)0.044715 * v * v * v)));           \
    case OP_SILU: return v / ((T)1 + EXP(-v));                                                     \
    case OP_SIGMOID: return SIGM(v);                                                               \
    case OP_LOG_SIGMOID: return F(fmin)(v, (T)0) - LOG1P(EXP(-ABS(v)));                            \
    case OP_HARD_SIGMOID: return CLAMP(v + (T)3, (T)0, (T)6) / (T)6;                               \
    case OP_HARD_SWISH: return v * CLAMP(v + (T)3, (T)0, (T)6) / (T)6;                             \
    case OP_MISH: return v * TANH(SOFTP(v));                                                       \
    case OP_SOFTPLUS: return v * a > b ? v : SOFTP(v * a) / a;                                     \
    case OP_SOFTSIGN: return v / ((T)1 + ABS(v));                                                  \
    case OP_HARDTANH: return CLAMP(v, a, b);                                                       \
    default: return v;                                                                             \
    }
#define FNF(name) name##f
#define FND(name) name
__device__ float unary_f(int op, float v, float a, float b){
    UNARY_BODY(float, FNF, fabsf, expf, expm1f, log1pf, tanhf, erff, clampf_, sigmoidf_,
               softplusf_)} __device__ double unary_d(int op, double v, double a, double b){
    UNARY_BODY(double, FND, fabs, exp, expm1, log1p, tanh, erf, clampd_, sigmoidd_,
               softplusd_)} __device__ double floor_div_(double a, double b)
{
    if (b == 0) return a / b;
    double mod = fmod(a, b);
    double div = (a - mod) / b;
    if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
    if (div == 0) return copysign(0.0, a / b);
    double fl = floor(div);
    if (div - fl > 0.5) fl += 1;
    return fl;
}
__device__ double binary_d(int op, double a, double b)
{
    switch (op) {
    case OP_ADD: return a + b;
    case OP_SUB: return a - b;
    case OP_MUL: return a * b;
    case OP_DIV: return a / b;
    case OP_FLOOR_DIVIDE: return floor_div_(a, b);
    case OP_REMAINDER: {
        double m = fmod(a, b);
        if (m != 0 && (b < 0) != (m < 0)) m += b;
        return m;
    }
    case OP_FMOD: return fmod(a, b);
    case OP_POW: return pow(a, b);
    case OP_ATAN2: return atan2(a, b);
    case OP_HYPOT: return hypot(a, b);
    case OP_MINIMUM:
        return (a != a || b != b) ? __longlong_as_double(0x7ff8000000000000ll) : (b < a ? b : a);
    case OP_MAXIMUM:
        return (a != a || b != b) ? __longlong_as_double(0x7ff8000000000000ll) : (a < b ? b : a);
    default: return 0;
    }
}
__device__ unsigned char compare_(int op, double a, double b)
{
    switch (op) {
    case OP_EQ: return a == b;
    case OP_NE: return a != b;
    case OP_LT: return a < b;
    case OP_LE: return a <= b;
    case OP_GT: return a > b;
    case OP_GE: return a >= b;
    default: return 0;
    }
}
#endif
