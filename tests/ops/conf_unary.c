/* Conformance tests for the unary family (math and activations): every op against an f64
 * reference written here with libm, over float and integer dtypes, all layouts, size-0, size-1,
 * rank-0 and large shapes, NaN/Inf/-0 and domain edges, dtype rules and bad input. */
#include <stdint.h>
#include <string.h>

#include "conf.h"
#include "ir/ir.h"
#include "ir/scalar.h"
#include "tensor/op.h"

/* Dtype rule of an op (what it accepts and what it returns). */
typedef enum cls {
    C_MATH,    /* floats keep dtype, integers and bool -> f32 */
    C_KEEP,    /* neg, abs: numbers keep dtype; bool refused */
    C_SIGN,    /* every dtype kept */
    C_SQUARE,  /* dtype kept; bool -> i64 */
    C_ROUND,   /* floor, ceil, round, trunc: dtype kept (integers copied); bool refused */
    C_PRED,    /* -> bool */
    C_BITNOT,  /* integers and bool only */
    C_ACT,     /* floats only */
    C_ACT_NUM, /* relu, relu6, hardtanh: floats and integers kept; bool refused */
    C_TABLE,   /* a row T(): the class and reference from the kind's op table row */
} cls;

typedef double (*ref_fn)(double x, const double *p);

typedef struct ucase {
    const char *name; /* public name without em_ */
    em_tensor *(*f)(const em_tensor *);
    em_tensor *(*fp)(const em_tensor *, const double *); /* for parameterised ops */
    ref_fn ref;
    double lo, hi; /* random input range for float dtypes */
    cls c;
    double p[2];
} ucase;

/* ---- references (double, libm only) ------------------------------------------------------ */

#define REF(name, expr)                                                                            \
    static double r_##name(double x, const double *p)                                              \
    {                                                                                              \
        return (expr);                                                                             \
    }

static double clampd(double x, double lo, double hi)
{
    return x < lo ? lo : (x > hi ? hi : x);
}

REF(neg, -x)
REF(abs, fabs(x))
REF(sign, x > 0 ? 1.0 : (x < 0 ? -1.0 : x))
REF(exp, exp(x))
REF(exp2, pow(2.0, x))
REF(log, log(x))
REF(log2, log(x) / log(2.0))
REF(log1p, log1p(x))
REF(expm1, expm1(x))
REF(sqrt, sqrt(x))
REF(rsqrt, 1.0 / sqrt(x))
REF(square, pow(x, 2))
REF(reciprocal, 1.0 / x)
REF(sin, sin(x))
REF(cos, cos(x))
REF(tan, tan(x))
REF(asin, asin(x))
REF(acos, acos(x))
REF(atan, atan(x))
REF(sinh, sinh(x))
REF(cosh, cosh(x))
REF(tanh, tanh(x))
REF(asinh, asinh(x))
REF(acosh, acosh(x))
REF(atanh, atanh(x))
REF(erf, erf(x))
REF(floor, floor(x))
REF(ceil, ceil(x))
REF(trunc, trunc(x))
REF(isnan, isnan(x) ? 1.0 : 0.0)
REF(isinf, isinf(x) ? 1.0 : 0.0)
REF(isfinite, isfinite(x) ? 1.0 : 0.0)
REF(logical_not, x == 0 ? 1.0 : 0.0)
REF(bitwise_not, (double)~(int64_t)x) /* bool handled by the caller */
REF(relu, x > 0 ? x : 0.0)
REF(relu6, clampd(x, 0, 6))
REF(leaky_relu, x > 0 ? x : p[0] * x)
REF(elu, x > 0 ? x : p[0] * expm1(x))
REF(selu,
    1.0507009873554804934193349852946 * (x > 0 ? x : 1.6732632423543772848170429916717 * expm1(x)))
REF(celu, fmax(0.0, x) + fmin(0.0, p[0] * expm1(x / p[0])))
REF(gelu, 0.5 * x * (1.0 + erf(x / sqrt(2.0))))
REF(gelu_tanh, 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))))
REF(silu, x / (1.0 + exp(-x)))
REF(sigmoid, 1.0 / (1.0 + exp(-x)))
REF(log_sigmoid, x >= 0 ? -log1p(exp(-x)) : x - log1p(exp(x)))
REF(hard_sigmoid, clampd(x + 3, 0, 6) / 6)
REF(hard_swish, clampd(x + 3, 0, 6) * x / 6)
REF(mish, tanh(x > 30 ? x : log1p(exp(x))) * x)
REF(softplus, p[0] * x > p[1] ? x : log1p(exp(p[0] * x)) / p[0])
REF(softsign, x / (1.0 + fabs(x)))
REF(hardtanh, clampd(x, p[0], p[1]))

/* ---- the op table's expressions, in double: the reference of the rows T() ---------------- */

/* clang-format off */
#define IR_NOEXPR         (NAN)
#define TF_(e)            ((double)(e))
#define TF_NONE(e)        (NAN)
#define TF_EXPLICIT       TF_NONE
#define TF_SAME           TF_
#define TF_FLOAT_MATH     TF_
#define TF_KEEP_NUM       TF_
#define TF_KEEP_ALL       TF_
#define TF_SQUARE         TF_
#define TF_BOOL           TF_
#define TF_BITWISE        TF_NONE
#define TF_INT            TF_NONE
#define TF_FLOAT          TF_
#define TF_PROMOTE        TF_
#define TF_PROMOTE_NUM    TF_
#define TF_PROMOTE_FLOAT  TF_
#define TF_PROMOTE_TAIL   TF_
#define TF_PROMOTE_ALL    TF_
#define TF_COMPARE        TF_
#define TF_LOGICAL        TF_
#define TF_CLAMP          TF_
#define TF_SUM            TF_
#define TF_I64            TF_
/* clang-format on */

static double table_ref(em_op_kind k, double x)
{
    const em_params p = {0};
    double a = x, b = 0, c = 0;
    (void)p, (void)a, (void)b, (void)c;
    switch (k) {
#define X(kind, str, fam, fl, imin, imax, omin, omax, par, dt, doc, low, e, d0, d1, d2)            \
    case EM_OP_##kind:                                                                             \
        return TF_##dt(e);
#include "ir/ops.def"
#undef X
    default: return NAN;
    }
}

static em_op_kind kind_named(const char *name)
{
    for (int k = 0; k < EM_OP_COUNT; k++)
        if (strcmp(em_op_name((em_op_kind)k), name) == 0) return (em_op_kind)k;
    return EM_OP_COUNT;
}

/* Half to even, written out rather than taken from the library's choice of nearbyint. */
static double r_round(double x, const double *p)
{
    if (!isfinite(x)) return x;
    double f = floor(x), d = x - f;
    double r = d < 0.5 ? f : (d > 0.5 ? f + 1 : (fmod(f, 2.0) == 0 ? f : f + 1));
    return copysign(r, x); /* keeps -0.0 for -0.5 .. -0 */
}

/* ---- wrappers for parameterised ops ------------------------------------------------------ */

static em_tensor *w_leaky_relu(const em_tensor *x, const double *p)
{
    return em_leaky_relu(x, p[0]);
}
static em_tensor *w_elu(const em_tensor *x, const double *p)
{
    return em_elu(x, p[0]);
}
static em_tensor *w_celu(const em_tensor *x, const double *p)
{
    return em_celu(x, p[0]);
}
static em_tensor *w_softplus(const em_tensor *x, const double *p)
{
    return em_softplus(x, p[0], p[1]);
}
static em_tensor *w_hardtanh(const em_tensor *x, const double *p)
{
    return em_hardtanh(x, p[0], p[1]);
}

#define U(n, lo, hi, c)                                                                            \
    {                                                                                              \
#n, em_##n, NULL, r_##n, lo, hi, c,                                                        \
        {                                                                                          \
            0, 0                                                                                   \
        }                                                                                          \
    }
/* A kind checked against its op table expression: one row, its sample range. */
#define T(n, lo, hi)                                                                               \
    {                                                                                              \
#n, em_##n, NULL, NULL, lo, hi, C_TABLE,                                                   \
        {                                                                                          \
            0, 0                                                                                   \
        }                                                                                          \
    }
#define UP(n, lo, hi, p0, p1)                                                                      \
    {                                                                                              \
#n, NULL, w_##n, r_##n, lo, hi, C_ACT,                                                     \
        {                                                                                          \
            p0, p1                                                                                 \
        }                                                                                          \
    }

static const ucase cases[] = {
    U(neg, -5, 5, C_KEEP),
    U(abs, -5, 5, C_KEEP),
    U(sign, -2, 2, C_SIGN),
    U(exp, -10, 10, C_MATH),
    U(exp2, -10, 10, C_MATH),
    U(log, 0.01, 10, C_MATH),
    U(log2, 0.01, 10, C_MATH),
    U(log1p, -0.9, 5, C_MATH),
    U(expm1, -3, 3, C_MATH),
    U(sqrt, 0, 10, C_MATH),
    U(rsqrt, 0.01, 10, C_MATH),
    U(square, -5, 5, C_SQUARE),
    U(reciprocal, -5, 5, C_MATH),
    U(sin, -6, 6, C_MATH),
    U(cos, -6, 6, C_MATH),
    U(tan, -1.4, 1.4, C_MATH),
    U(asin, -1, 1, C_MATH),
    U(acos, -1, 1, C_MATH),
    U(atan, -5, 5, C_MATH),
    U(sinh, -5, 5, C_MATH),
    U(cosh, -5, 5, C_MATH),
    U(tanh, -5, 5, C_MATH),
    U(asinh, -5, 5, C_MATH),
    U(acosh, 1, 6, C_MATH),
    U(atanh, -0.95, 0.95, C_MATH),
    U(erf, -3, 3, C_MATH),
    U(floor, -5, 5, C_ROUND),
    U(ceil, -5, 5, C_ROUND),
    U(round, -5, 5, C_ROUND),
    U(trunc, -5, 5, C_ROUND),
    U(isnan, -5, 5, C_PRED),
    U(isinf, -5, 5, C_PRED),
    U(isfinite, -5, 5, C_PRED),
    U(logical_not, -1, 1, C_PRED),
    U(bitwise_not, 0, 0, C_BITNOT),
    U(relu, -5, 5, C_ACT_NUM),
    U(relu6, -3, 9, C_ACT_NUM),
    UP(leaky_relu, -5, 5, 0.01, 0),
    UP(leaky_relu, -5, 5, 0.2, 0),
    UP(elu, -5, 5, 1.0, 0),
    UP(elu, -5, 5, 0.5, 0),
    U(selu, -5, 5, C_ACT),
    UP(celu, -5, 5, 1.0, 0),
    UP(celu, -5, 5, 2.0, 0),
    U(gelu, -5, 5, C_ACT),
    U(gelu_tanh, -5, 5, C_ACT),
    U(silu, -8, 8, C_ACT),
    U(sigmoid, -20, 20, C_ACT),
    U(log_sigmoid, -20, 20, C_ACT),
    U(hard_sigmoid, -5, 5, C_ACT),
    U(hard_swish, -5, 5, C_ACT),
    U(mish, -8, 8, C_ACT),
    UP(softplus, -10, 25, 1.0, 20.0),
    UP(softplus, -5, 5, 2.0, 3.0),
    U(softsign, -5, 5, C_ACT),
    UP(hardtanh, -3, 3, -1.0, 1.0),
    UP(hardtanh, -3, 3, -0.5, 2.0),
#define EW_SAMPLE(n, lo, hi) T(n, lo, hi),
#define EW_SAMPLE2(n, alo, ahi, blo, bhi)
#include "../ew_samples.def"
#undef EW_SAMPLE2
#undef EW_SAMPLE
};

#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static cls case_cls(const ucase *c)
{
    if (c->c == C_TABLE) {
        switch (ir_info_of(kind_named(c->name))->dtype) {
        case IR_DT_FLOAT_MATH: return C_MATH;
        case IR_DT_KEEP_NUM: return C_ACT_NUM;
        case IR_DT_KEEP_ALL: return C_SIGN;
        case IR_DT_SQUARE: return C_SQUARE;
        case IR_DT_BOOL: return C_PRED;
        case IR_DT_BITWISE: return C_BITNOT;
        default: return C_ACT;
        }
    }
    return c->fp && strcmp(c->name, "hardtanh") == 0 ? C_ACT_NUM : c->c;
}

static double ref_of(const ucase *c, double x)
{
    return c->ref ? c->ref(x, c->p) : table_ref(kind_named(c->name), x);
}

static em_tensor *call(const ucase *c, const em_tensor *x)
{
    return c->f ? c->f(x) : c->fp(x, c->p);
}

/* Whether the op accepts dt, and the dtype it returns. */
static bool accepts(cls c, em_dtype dt, em_dtype *out)
{
    bool fl = em_dtype_is_float(dt), bo = dt == EM_BOOL;
    *out = dt;
    switch (c) {
    case C_MATH:
        if (!fl) *out = EM_F32;
        return true;
    case C_KEEP: return !bo;
    case C_SIGN: return true;
    case C_SQUARE:
        if (bo) *out = EM_I64;
        return true;
    case C_ROUND: return !bo;
    case C_PRED: *out = EM_BOOL; return true;
    case C_BITNOT: return !fl;
    case C_ACT: return fl;
    case C_ACT_NUM: return !bo;
    case C_TABLE: return false; /* case_cls resolves it */
    }
    return false;
}

/* What storing an exact integer result v in dt keeps (two's complement wrap). */
static double wrap_int(double v, em_dtype dt)
{
    int64_t i = (int64_t)v;
    switch (dt) {
    case EM_I32: return (int32_t)(uint32_t)(uint64_t)i;
    case EM_I16: return (int16_t)(uint16_t)(uint64_t)i;
    case EM_I8: return (int8_t)(uint8_t)(uint64_t)i;
    case EM_U8: return (uint8_t)(uint64_t)i;
    case EM_BOOL: return i != 0;
    default: return (double)i;
    }
}

/* Expected value of op c on input x (already a value of dt_in) as stored in dt_out. */
static double expect(const ucase *c, double x, em_dtype dt_in, em_dtype dt_out)
{
    cls k = case_cls(c);
    if (k == C_PRED) return ref_of(c, x);
    if (k == C_BITNOT && dt_in == EM_BOOL) return x == 0;
    if (em_dtype_is_float(dt_out)) {
        if (isnan(x)) return NAN; /* NaN propagates through every float op */
        return h_round_to(ref_of(c, x), dt_out);
    }
    return wrap_int(ref_of(c, x), dt_out);
}

/* Random input range for integer dtypes. */
static void int_range(const ucase *c, em_dtype dt, double *lo, double *hi)
{
    if (dt == EM_BOOL)
        *lo = 0, *hi = 2;
    else if (case_cls(c) == C_MATH)
        *lo = -5, *hi = 6;
    else if (dt == EM_I8)
        *lo = -128, *hi = 128;
    else if (dt == EM_U8)
        *lo = 0, *hi = 256;
    else
        *lo = -300, *hi = 300;
}

/* Runs case c on a tensor of dtype dt, layout lay, shape s: random values, or `given`
 * (rounded to dt) when not NULL. Checks dtype, shape, contiguity and values. */
static void run_case(const ucase *c, em_dtype dt, h_layout lay, em_shape s, const double *given)
{
    em_dtype odt;
    if (!accepts(case_cls(c), dt, &odt)) return;
    em_scope_begin();
    int64_t n = em_shape_numel(s);
    double *v;
    em_tensor *x;
    if (given) {
        v = malloc((size_t)(n ? n : 1) * sizeof *v);
        for (int64_t i = 0; i < n; i++) v[i] = h_round_to(given[i], dt);
        x = h_from_values(v, s, dt, lay);
    } else {
        double lo = c->lo, hi = c->hi;
        if (!em_dtype_is_float(dt)) int_range(c, dt, &lo, &hi);
        x = h_rand(s, dt, lay, lo, hi, &v);
    }
    em_tensor *y = call(c, x);
    char what[160], sb[64];
    snprintf(what, sizeof what, "em_%s(p=%g,%g) %s layout %d shape %s%s", c->name, c->p[0], c->p[1],
             em_dtype_name(dt), (int)lay, em_shape_str(s, sb, sizeof sb), given ? " special" : "");
    if (!y) {
        CHECK(false, "%s: returned NULL: %s", what, em_last_error());
        em_clear_error();
    } else {
        CHECK(em_tensor_dtype(y) == odt, "%s: dtype %s, expected %s", what,
              em_dtype_name(em_tensor_dtype(y)), em_dtype_name(odt));
        CHECK(em_tensor_is_contiguous(y), "%s: output is not contiguous", what);
        double *e = malloc((size_t)(n ? n : 1) * sizeof *e);
        for (int64_t i = 0; i < n; i++) e[i] = expect(c, v[i], dt, odt);
        h_check_tensor(what, y, e, s, h_atol(odt), h_rtol(odt));
        free(e);
    }
    free(v);
    em_scope_end();
}

static const em_dtype float_dts[] = {EM_F32, EM_F64, EM_F16, EM_BF16};
static const em_dtype int_dts[] = {EM_I64, EM_I32, EM_I16, EM_I8, EM_U8, EM_BOOL};

static void test_random(void)
{
    const em_shape shapes[] = {EM_SHAPE(0), EM_SHAPE(1),    EM_SHAPE(3, 1, 5),
                               EM_SCALAR,   EM_SHAPE(4, 6), EM_SHAPE(2, 0, 3)};
    for (int ci = 0; ci < NCASES; ci++) {
        const ucase *c = &cases[ci];
        for (int si = 0; si < (int)(sizeof shapes / sizeof shapes[0]); si++)
            for (int l = 0; l < H_LAYOUT_COUNT; l++) {
                for (int d = 0; d < 4; d++)
                    run_case(c, float_dts[d], (h_layout)l, shapes[si], NULL);
                for (int d = 0; d < 6; d++) run_case(c, int_dts[d], (h_layout)l, shapes[si], NULL);
            }
    }
}

/* > 40000 elements: the parallel path of the loop, contiguous (the fast f32 path) and not. */
static void test_large(void)
{
    em_shape big = EM_SHAPE(205, 201);
    for (int ci = 0; ci < NCASES; ci++) {
        const ucase *c = &cases[ci];
        run_case(c, EM_F32, H_CONTIG, big, NULL);
        run_case(c, EM_F32, H_TRANSPOSED, big, NULL);
        run_case(c, EM_F64, H_CONTIG, big, NULL);
        run_case(c, EM_BF16, H_STRIDED, big, NULL);
        run_case(c, EM_I32, H_CONTIG, big, NULL);
    }
}

/* NaN, infinities, signed zeros, domain edges (log(0), sqrt(-1), atanh(1), asin(2)), ties for
 * round, large magnitudes that overflow f32 and f16. */
static void test_special(void)
{
    static const double sp[] = {NAN,  INFINITY, -INFINITY, -0.0, 0.0,  1.0,  -1.0, 0.5,
                                -0.5, 1.5,      2.5,       -2.5, 2.0,  -3.0, 3.0,  7.0,
                                -7.0, 100.0,    -100.0,    1e-3, 30.0, -30.0};
    em_shape s = EM_SHAPE((int64_t)(sizeof sp / sizeof sp[0]));
    for (int ci = 0; ci < NCASES; ci++)
        for (int d = 0; d < 4; d++) {
            run_case(&cases[ci], float_dts[d], H_CONTIG, s, sp);
            run_case(&cases[ci], float_dts[d], H_FLIPPED, s, sp);
        }
}

static double scalar_of(em_tensor *t)
{
    double v = NAN;
    if (t) em_to_data(t, &v, EM_F64, 1);
    return v;
}

/* Spot values against constants written out (independent of the reference formulas). */
static void test_values(void)
{
    em_scope_begin();
    em_tensor *z = em_scalar(0.0, EM_F32, h_dev);
    em_tensor *mz = em_scalar(-0.0, EM_F32, h_dev);
    em_tensor *nan = em_scalar(NAN, EM_F32, h_dev);
    em_tensor *one = em_scalar(1.0, EM_F64, h_dev);
    double v = scalar_of(em_neg(z));
    CHECK(v == 0 && signbit(v), "em_neg(+0) is %g, expected -0", v);
    v = scalar_of(em_abs(mz));
    CHECK(v == 0 && !signbit(v), "em_abs(-0) is %g, expected +0", v);
    v = scalar_of(em_sign(mz));
    CHECK(v == 0 && !signbit(v), "em_sign(-0) is %g, expected +0 like torch", v);
    CHECK(isnan(scalar_of(em_relu(nan))), "em_relu(NaN) is not NaN");
    CHECK(isnan(scalar_of(em_sign(nan))), "em_sign(NaN) is not NaN");
    CHECK(isnan(scalar_of(em_hard_sigmoid(nan))), "em_hard_sigmoid(NaN) is not NaN");
    CHECK(isnan(scalar_of(em_hardtanh(nan, -1, 1))), "em_hardtanh(NaN) is not NaN");
    CHECK(scalar_of(em_log(z)) == -INFINITY, "em_log(0) is not -inf");
    CHECK(isnan(scalar_of(em_sqrt(em_neg(one)))), "em_sqrt(-1) is not NaN");
    CHECK(scalar_of(em_atanh(one)) == INFINITY, "em_atanh(1) is not inf");
    CHECK(scalar_of(em_rsqrt(mz)) == -INFINITY, "em_rsqrt(-0) is not -inf");
    CHECK(scalar_of(em_round(em_scalar(2.5, EM_F32, h_dev))) == 2.0, "em_round(2.5) != 2");
    CHECK(scalar_of(em_round(em_scalar(-3.5, EM_F16, h_dev))) == -4.0, "em_round(-3.5) != -4");
    CHECK(fabs(scalar_of(em_selu(em_scalar(-1.0, EM_F64, h_dev))) - -1.1113307378125628) < 1e-14,
          "em_selu(-1) differs from torch's -1.1113307378125628");
    CHECK(fabs(scalar_of(em_gelu(one)) - 0.8413447460685429) < 1e-14, "em_gelu(1) differs");
    CHECK(fabs(scalar_of(em_gelu_tanh(one)) - 0.8411919906082768) < 1e-14,
          "em_gelu_tanh(1) differs");
    CHECK(fabs(scalar_of(em_mish(one)) - 0.8650983882673103) < 1e-14, "em_mish(1) differs");
    /* stable for large |x| */
    CHECK(scalar_of(em_sigmoid(em_scalar(-1000.0, EM_F64, h_dev))) == 0.0, "sigmoid(-1000)");
    CHECK(scalar_of(em_sigmoid(em_scalar(1000.0, EM_F32, h_dev))) == 1.0, "sigmoid(1000)");
    CHECK(scalar_of(em_log_sigmoid(em_scalar(-1000.0, EM_F32, h_dev))) == -1000.0,
          "log_sigmoid(-1000)");
    CHECK(scalar_of(em_log_sigmoid(em_scalar(1000.0, EM_F64, h_dev))) == 0.0, "log_sigmoid(1000)");
    CHECK(scalar_of(em_softplus(em_scalar(1000.0, EM_F32, h_dev), 1, INFINITY)) == 1000.0,
          "softplus(1000) with no threshold overflows");
    /* integer semantics: wrapping, copies, bitwise on bool */
    CHECK(scalar_of(em_neg(em_scalar(-128, EM_I8, h_dev))) == -128, "neg(i8 -128) must wrap");
    CHECK(scalar_of(em_bitwise_not(em_scalar(5, EM_U8, h_dev))) == 250, "~u8 5 != 250");
    CHECK(scalar_of(em_bitwise_not(em_scalar(1, EM_BOOL, h_dev))) == 0, "~true != false");
    CHECK(scalar_of(em_bitwise_not(em_scalar(7, EM_I64, h_dev))) == -8, "~7 != -8");
    const int64_t b53 = 9007199254740993LL; /* 2^53 + 1: not a double */
    em_tensor *big = em_from_data(&b53, EM_I64, EM_SHAPE(1), EM_I64, h_dev);
    int64_t iv = 0;
    em_to_data(em_floor(big), &iv, EM_I64, 1);
    CHECK(iv == b53, "floor(i64 2^53+1) is %lld, expected an exact copy", (long long)iv);
    em_to_data(em_relu(big), &iv, EM_I64, 1);
    CHECK(iv == b53, "relu(i64 2^53+1) is %lld, expected an exact copy", (long long)iv);
    CHECK_OK("test_values");
    em_scope_end();
}

static void test_errors(void)
{
    em_scope_begin();
    for (int ci = 0; ci < NCASES; ci++) {
        char fn[48];
        snprintf(fn, sizeof fn, "em_%s", cases[ci].name);
        CHECK(call(&cases[ci], NULL) == NULL, "%s(NULL) is not NULL", fn);
        CHECK_ERR(EM_ERR_INVALID_ARG, fn);
        /* every refused dtype is EM_ERR_DTYPE naming the function and the dtype */
        for (int d = 0; d < EM_DTYPE_COUNT; d++) {
            em_dtype odt;
            if (accepts(case_cls(&cases[ci]), (em_dtype)d, &odt)) continue;
            em_tensor *x = em_zeros(EM_SHAPE(2), (em_dtype)d, h_dev);
            CHECK(call(&cases[ci], x) == NULL, "%s on %s did not fail", fn,
                  em_dtype_name((em_dtype)d));
            CHECK_ERR(EM_ERR_DTYPE, fn);
        }
    }
    em_tensor *f = em_zeros(EM_SHAPE(2), EM_F32, h_dev);
    em_tensor *i = em_zeros(EM_SHAPE(2), EM_I32, h_dev);
    em_tensor *b = em_zeros(EM_SHAPE(2), EM_BOOL, h_dev);
    CHECK(!em_bitwise_not(f), "bitwise_not(f32)");
    CHECK_ERR(EM_ERR_DTYPE, "em_bitwise_not: dtype f32");
    CHECK(!em_gelu(i), "gelu(i32)");
    CHECK_ERR(EM_ERR_DTYPE, "em_gelu: dtype i32");
    CHECK(!em_neg(b), "neg(bool)");
    CHECK_ERR(EM_ERR_DTYPE, "em_neg: dtype bool");
    CHECK(!em_relu(b), "relu(bool)");
    CHECK_ERR(EM_ERR_DTYPE, "em_relu");
    CHECK(!em_floor(b), "floor(bool)");
    CHECK_ERR(EM_ERR_DTYPE, "em_floor");
    /* parameters */
    CHECK(!em_hardtanh(f, 2, 1), "hardtanh min > max");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_hardtanh: min_val 2 is greater than max_val 1");
    CHECK(!em_celu(f, 0), "celu alpha 0");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_celu");
    CHECK(!em_softplus(f, 0, 20), "softplus beta 0");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_softplus");
    CHECK(!em_leaky_relu(f, NAN), "leaky_relu NaN slope");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_leaky_relu");
    CHECK(!em_elu(f, INFINITY), "elu inf alpha");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_elu");
    /* NULL propagation keeps the first error */
    CHECK(em_relu(em_exp(NULL)) == NULL, "em_relu(em_exp(NULL)) is not NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_exp");
    CHECK(em_softplus(em_gelu(i), 1, 20) == NULL, "chain after a dtype error");
    CHECK_ERR(EM_ERR_DTYPE, "em_gelu");
    CHECK(em_hardtanh(em_sigmoid(NULL), 2, 1) == NULL, "chain with bad later parameters");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_sigmoid");
    em_scope_end();
}

/* Every elementwise unary kind of the op table has a case above: a kind added to the table
 * without one fails here. */
static void check_table_cases(void)
{
    for (int k = 0; k < EM_OP_COUNT; k++) {
        if (!ir_has((em_op_kind)k, IR_EW1)) continue;
        bool found = false;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            found = found || strcmp(cases[i].name, em_op_name((em_op_kind)k)) == 0;
        CHECK(found, "unary kind %s of the op table has no conformance case",
              em_op_name((em_op_kind)k));
    }
}

/* EW_GRAD (the derivative a backward rule takes from the op table): tanh's 1 - y^2 and elu's
 * parameterised branch, in f64 and f32. */
static void test_ew_grad(void)
{
    static const double xs[] = {-2.0, -0.5, 0.0, 0.25, 1.5};
    em_shape s = EM_SHAPE(5);
    for (int d = 0; d < 2; d++) {
        em_scope_begin();
        em_dtype dt = d ? EM_F32 : EM_F64;
        em_tensor *x = h_from_values(xs, s, dt, H_CONTIG);
        em_op tanh_op = {.kind = EM_OP_TANH}, elu_op = {.kind = EM_OP_ELU};
        elu_op.p.act.alpha = 0.5;
        em_tensor *yt = em_tanh(x), *ye = em_elu(x, 0.5);
        double et[5], ee[5];
        for (int i = 0; i < 5; i++) {
            double t = tanh(xs[i]);
            et[i] = h_round_to(1.0 - h_round_to(t, dt) * h_round_to(t, dt), dt);
            ee[i] = h_round_to(xs[i] > 0 ? 1.0 : 0.5 * exp(xs[i]), dt);
        }
        h_check_tensor("ew_grad tanh", tn_ew_grad(&tanh_op, 0, &x, 1, yt), et, s, h_atol(dt),
                       h_rtol(dt));
        h_check_tensor("ew_grad elu", tn_ew_grad(&elu_op, 0, &x, 1, ye), ee, s, h_atol(dt),
                       h_rtol(dt));
        em_scope_end();
    }
}

void conf_unary(void)
{
    test_ew_grad();
    check_table_cases();
    test_random();
    test_large();
    test_special();
    test_values();
    test_errors();
}
