/* CPU kernels for the unary family (math and activations). Each row of the strided loop is
 * processed in chunks: loaded into a small typed buffer (or read in place when it is a
 * contiguous f32/f64 row), transformed by one tight loop per op, and stored. f16, bf16 and
 * integer inputs of float math compute in f32; f64 computes in double; integer-preserving ops
 * compute in int64 and wrap to the output width. The output never overlaps the input (the
 * inner loops take restrict pointers). */
#include "cpu.h"
#include "cpu_fast.h"

#define CHUNK 256

/* How a kernel computes, chosen once per op from the dtypes. */
typedef enum domain {
    D_F32,  /* float buffer; output f32, f16 or bf16 */
    D_F64,  /* double buffer; f64 -> f64 */
    D_INT,  /* int64 buffer; integer or bool -> integer or bool */
    D_PRED, /* any -> bool (isnan, isinf, isfinite, logical_not) */
} domain;

typedef struct uctx {
    em_op_kind kind;
    em_dtype dt_in, dt_out;
    domain dom;
    double p0, p1; /* op->p.act.v[0], v[1] */
    float p0f, p1f;
    const cpu_fast_ops *fast; /* vector kernels, or NULL */
    int hint;                 /* GELU's store hint (cpu_store_begin) */
} uctx;

static const double SELU_ALPHA = 1.6732632423543772848170429916717;
static const double SELU_SCALE = 1.0507009873554804934193349852946;
static const double SQRT1_2 = 0.70710678118654752440084436210485;
static const double SQRT_2_PI = 0.79788456080286535587989211986876; /* sqrt(2/pi) */

/* ---- f32 ---------------------------------------------------------------------------------- */

static inline float sigmoid_f(float v)
{
    float e = expf(-fabsf(v));
    float r = 1.0f / (1.0f + e);
    return v >= 0 ? r : e * r;
}

/* log(1 + exp(v)) without overflow; NaN stays NaN through the log1p term. */
static inline float softplus_f(float v)
{
    return fmaxf(v, 0.0f) + log1pf(expf(-fabsf(v)));
}

/* erf(v) in f32 without a libm call, so GELU's loop vectorises: a rational approximation on
 * [-4, 4] (beyond it erf is +-1 in f32), absolute error below 4e-7; NaN stays NaN. */
static inline float erf_fast(float v)
{
    float x = v > 4.0f ? 4.0f : (v < -4.0f ? -4.0f : v);
    float x2 = x * x;
    float p = x2 * -2.72614225801306e-10f + 2.77068142495902e-08f;
    p = x2 * p + -2.10102402082508e-06f;
    p = x2 * p + -5.69250639462346e-05f;
    p = x2 * p + -7.34990630326855e-04f;
    p = x2 * p + -2.95459980854025e-03f;
    p = x2 * p + -1.60960333262415e-02f;
    float q = x2 * -1.45660718464996e-05f + -2.13374055278905e-04f;
    q = x2 * q + -1.68282697438203e-03f;
    q = x2 * q + -7.37332916720468e-03f;
    q = x2 * q + -1.42647390514189e-02f;
    return x * p / q;
}

static inline float clampf_(float v, float lo, float hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

/* y[i] = expr(v = x[i]) for i < n. The blocks of 8 have a trip count the compiler knows, so
 * simple expressions vectorise even under -O2's cheap cost model. */
#define MAP(expr)                                                                                  \
    {                                                                                              \
        int64_t i = 0;                                                                             \
        for (; i + 8 <= n; i += 8)                                                                 \
            for (int j = 0; j < 8; j++) {                                                          \
                T v = x[i + j];                                                                    \
                y[i + j] = (expr);                                                                 \
            }                                                                                      \
        for (; i < n; i++) {                                                                       \
            T v = x[i];                                                                            \
            y[i] = (expr);                                                                         \
        }                                                                                          \
    }                                                                                              \
    break

/* y[i] = op(x[i]) for n floats (distinct buffers). */
static void run_f32(const uctx *c, const float *restrict x, float *restrict y, int64_t n)
{
    typedef float T;
    const float a = c->p0f, b = c->p1f;
    const float sa = (float)SELU_ALPHA, ss = (float)SELU_SCALE;
    const float r2 = (float)SQRT1_2, k = (float)SQRT_2_PI;
    switch (c->kind) {
    case EM_OP_NEG: MAP(-v);
    case EM_OP_ABS: MAP(fabsf(v));
    case EM_OP_SIGN: MAP(v > 0 ? 1.0f : (v < 0 ? -1.0f : (v == v ? 0.0f : v)));
    case EM_OP_EXP: MAP(expf(v));
    case EM_OP_EXP2: MAP(exp2f(v));
    case EM_OP_LOG: MAP(logf(v));
    case EM_OP_LOG2: MAP(log2f(v));
    case EM_OP_LOG1P: MAP(log1pf(v));
    case EM_OP_EXPM1: MAP(expm1f(v));
    case EM_OP_SQRT: MAP(sqrtf(v));
    case EM_OP_RSQRT: MAP(1.0f / sqrtf(v));
    case EM_OP_SQUARE: MAP(v * v);
    case EM_OP_RECIPROCAL: MAP(1.0f / v);
    case EM_OP_SIN: MAP(sinf(v));
    case EM_OP_COS: MAP(cosf(v));
    case EM_OP_TAN: MAP(tanf(v));
    case EM_OP_ASIN: MAP(asinf(v));
    case EM_OP_ACOS: MAP(acosf(v));
    case EM_OP_ATAN: MAP(atanf(v));
    case EM_OP_SINH: MAP(sinhf(v));
    case EM_OP_COSH: MAP(coshf(v));
    case EM_OP_TANH: MAP(tanhf(v));
    case EM_OP_ASINH: MAP(asinhf(v));
    case EM_OP_ACOSH: MAP(acoshf(v));
    case EM_OP_ATANH: MAP(atanhf(v));
    case EM_OP_ERF: MAP(erff(v));
    case EM_OP_FLOOR: MAP(floorf(v));
    case EM_OP_CEIL: MAP(ceilf(v));
    case EM_OP_ROUND: MAP(nearbyintf(v));
    case EM_OP_TRUNC: MAP(truncf(v));
    case EM_OP_RELU: MAP(v < 0 ? 0.0f : v);
    case EM_OP_RELU6: MAP(clampf_(v, 0.0f, 6.0f));
    case EM_OP_LEAKY_RELU: MAP(v > 0 ? v : v * a);
    case EM_OP_ELU: MAP(v > 0 ? v : a * expm1f(v));
    case EM_OP_SELU: MAP(v > 0 ? ss * v : ss * sa * expm1f(v));
    case EM_OP_CELU: MAP(v > 0 ? v : a * expm1f(v * b));
    case EM_OP_GELU:
        if (c->fast) {
            c->fast->gelu(x, y, n, c->hint);
            if (c->hint & CPU_FAST_STREAM) cpu_fast_stream_fence();
            break;
        }
        MAP(0.5f * v * (1.0f + erf_fast(v * r2)));
    case EM_OP_GELU_TANH: MAP(0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v))));
    case EM_OP_SILU: MAP(v / (1.0f + expf(-v)));
    case EM_OP_SIGMOID: MAP(sigmoid_f(v));
    case EM_OP_LOG_SIGMOID: MAP(fminf(v, 0.0f) - log1pf(expf(-fabsf(v))));
    case EM_OP_HARD_SIGMOID: MAP(clampf_(v + 3.0f, 0.0f, 6.0f) / 6.0f);
    case EM_OP_HARD_SWISH: MAP(v * clampf_(v + 3.0f, 0.0f, 6.0f) / 6.0f);
    case EM_OP_MISH: MAP(v * tanhf(softplus_f(v)));
    case EM_OP_SOFTPLUS: MAP(v * a > b ? v : softplus_f(v * a) / a);
    case EM_OP_SOFTSIGN: MAP(v / (1.0f + fabsf(v)));
    case EM_OP_HARDTANH: MAP(clampf_(v, a, b));
    default: break;
    }
}

/* ---- f64 ---------------------------------------------------------------------------------- */

static inline double sigmoid_d(double v)
{
    double e = exp(-fabs(v));
    double r = 1.0 / (1.0 + e);
    return v >= 0 ? r : e * r;
}

static inline double softplus_d(double v)
{
    return fmax(v, 0.0) + log1p(exp(-fabs(v)));
}

static inline double clampd_(double v, double lo, double hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

static void run_f64(const uctx *c, const double *restrict x, double *restrict y, int64_t n)
{
    typedef double T;
    const double a = c->p0, b = c->p1;
    const double sa = SELU_ALPHA, ss = SELU_SCALE, r2 = SQRT1_2, k = SQRT_2_PI;
    switch (c->kind) {
    case EM_OP_NEG: MAP(-v);
    case EM_OP_ABS: MAP(fabs(v));
    case EM_OP_SIGN: MAP(v > 0 ? 1.0 : (v < 0 ? -1.0 : (v == v ? 0.0 : v)));
    case EM_OP_EXP: MAP(exp(v));
    case EM_OP_EXP2: MAP(exp2(v));
    case EM_OP_LOG: MAP(log(v));
    case EM_OP_LOG2: MAP(log2(v));
    case EM_OP_LOG1P: MAP(log1p(v));
    case EM_OP_EXPM1: MAP(expm1(v));
    case EM_OP_SQRT: MAP(sqrt(v));
    case EM_OP_RSQRT: MAP(1.0 / sqrt(v));
    case EM_OP_SQUARE: MAP(v * v);
    case EM_OP_RECIPROCAL: MAP(1.0 / v);
    case EM_OP_SIN: MAP(sin(v));
    case EM_OP_COS: MAP(cos(v));
    case EM_OP_TAN: MAP(tan(v));
    case EM_OP_ASIN: MAP(asin(v));
    case EM_OP_ACOS: MAP(acos(v));
    case EM_OP_ATAN: MAP(atan(v));
    case EM_OP_SINH: MAP(sinh(v));
    case EM_OP_COSH: MAP(cosh(v));
    case EM_OP_TANH: MAP(tanh(v));
    case EM_OP_ASINH: MAP(asinh(v));
    case EM_OP_ACOSH: MAP(acosh(v));
    case EM_OP_ATANH: MAP(atanh(v));
    case EM_OP_ERF: MAP(erf(v));
    case EM_OP_FLOOR: MAP(floor(v));
    case EM_OP_CEIL: MAP(ceil(v));
    case EM_OP_ROUND: MAP(nearbyint(v));
    case EM_OP_TRUNC: MAP(trunc(v));
    case EM_OP_RELU: MAP(v < 0 ? 0.0 : v);
    case EM_OP_RELU6: MAP(clampd_(v, 0.0, 6.0));
    case EM_OP_LEAKY_RELU: MAP(v > 0 ? v : v * a);
    case EM_OP_ELU: MAP(v > 0 ? v : a * expm1(v));
    case EM_OP_SELU: MAP(v > 0 ? ss * v : ss * sa * expm1(v));
    case EM_OP_CELU: MAP(v > 0 ? v : a * expm1(v * b));
    case EM_OP_GELU: MAP(0.5 * v * (1.0 + erf(v * r2)));
    case EM_OP_GELU_TANH: MAP(0.5 * v * (1.0 + tanh(k * (v + 0.044715 * v * v * v))));
    case EM_OP_SILU: MAP(v / (1.0 + exp(-v)));
    case EM_OP_SIGMOID: MAP(sigmoid_d(v));
    case EM_OP_LOG_SIGMOID: MAP(fmin(v, 0.0) - log1p(exp(-fabs(v))));
    case EM_OP_HARD_SIGMOID: MAP(clampd_(v + 3.0, 0.0, 6.0) / 6.0);
    case EM_OP_HARD_SWISH: MAP(v * clampd_(v + 3.0, 0.0, 6.0) / 6.0);
    case EM_OP_MISH: MAP(v * tanh(softplus_d(v)));
    case EM_OP_SOFTPLUS: MAP(v * a > b ? v : softplus_d(v * a) / a);
    case EM_OP_SOFTSIGN: MAP(v / (1.0 + fabs(v)));
    case EM_OP_HARDTANH: MAP(clampd_(v, a, b));
    default: break;
    }
}

/* ---- integers ----------------------------------------------------------------------------- */

/* Saturating double -> int64 for clamp bounds given as doubles. */
static int64_t bound_i64(double v)
{
    if (v <= -9.2233720368547758e18) return INT64_MIN;
    if (v >= 9.2233720368547758e18) return INT64_MAX;
    return (int64_t)v;
}

/* Integer-preserving ops on int64 values (wrapping arithmetic, as two's complement). */
static void run_int(const uctx *c, const int64_t *restrict x, int64_t *restrict y, int64_t n)
{
    typedef int64_t T;
    const double lo = c->p0, hi = c->p1;
    const int64_t ilo = bound_i64(lo), ihi = bound_i64(hi);
    switch (c->kind) {
    case EM_OP_NEG: MAP((int64_t)(0u - (uint64_t)v));
    case EM_OP_ABS: MAP(v < 0 ? (int64_t)(0u - (uint64_t)v) : v);
    case EM_OP_SIGN: MAP((v > 0) - (v < 0));
    case EM_OP_SQUARE: MAP((int64_t)((uint64_t)v * (uint64_t)v));
    case EM_OP_BITWISE_NOT:
        if (c->dt_in == EM_BOOL) {
            MAP(v == 0);
        }
        MAP(~v);
    case EM_OP_RELU: MAP(v < 0 ? 0 : v);
    case EM_OP_RELU6: MAP(v < 0 ? 0 : (v > 6 ? 6 : v));
    case EM_OP_HARDTANH: MAP((double)v < lo ? ilo : ((double)v > hi ? ihi : v));
    default: MAP(v); /* floor, ceil, round, trunc of integers */
    }
}

#undef MAP

/* ---- loads and stores --------------------------------------------------------------------- */

static void load_f32(float *buf, const char *p, int64_t s, em_dtype dt, int64_t n)
{
    switch (dt) {
    case EM_F32:
        for (int64_t i = 0; i < n; i++) buf[i] = *(const float *)(p + i * s);
        break;
    case EM_F16:
        for (int64_t i = 0; i < n; i++) buf[i] = em_f16_to_f32(*(const uint16_t *)(p + i * s));
        break;
    case EM_BF16:
        for (int64_t i = 0; i < n; i++) buf[i] = em_bf16_to_f32(*(const uint16_t *)(p + i * s));
        break;
    case EM_I64: /* one rounding, int64 -> float */
        for (int64_t i = 0; i < n; i++) buf[i] = (float)*(const int64_t *)(p + i * s);
        break;
    default: /* narrower integers and bool are exact in double */
        for (int64_t i = 0; i < n; i++) buf[i] = (float)ir_get_f64(p + i * s, dt);
        break;
    }
}

static void store_f32(char *p, int64_t s, em_dtype dt, const float *buf, int64_t n)
{
    switch (dt) {
    case EM_F32:
        for (int64_t i = 0; i < n; i++) *(float *)(p + i * s) = buf[i];
        break;
    case EM_F16:
        for (int64_t i = 0; i < n; i++) *(uint16_t *)(p + i * s) = em_f32_to_f16(buf[i]);
        break;
    case EM_BF16:
        for (int64_t i = 0; i < n; i++) *(uint16_t *)(p + i * s) = em_f32_to_bf16(buf[i]);
        break;
    default: break;
    }
}

static inline int64_t imin(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* One row of the loop: p[0]/s[0] the output, p[1]/s[1] the input. */
static void row_f32(char **p, const int64_t *s, int64_t n, void *vctx)
{
    const uctx *c = vctx;
    float xb[CHUNK], yb[CHUNK];
    bool in_direct = c->dt_in == EM_F32 && s[1] == 4;
    bool out_direct = c->dt_out == EM_F32 && s[0] == 4;
    if (in_direct && out_direct) { /* whole row in one call: no buffer to bound */
        run_f32(c, (const float *)p[1], (float *)p[0], n);
        return;
    }
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        int64_t m = imin(CHUNK, n - i0);
        const char *in = p[1] + i0 * s[1];
        char *out = p[0] + i0 * s[0];
        const float *src = xb;
        if (in_direct)
            src = (const float *)in;
        else
            load_f32(xb, in, s[1], c->dt_in, m);
        float *dst = out_direct ? (float *)out : yb;
        run_f32(c, src, dst, m);
        if (!out_direct) store_f32(out, s[0], c->dt_out, yb, m);
    }
}

static void row_f64(char **p, const int64_t *s, int64_t n, void *vctx)
{
    const uctx *c = vctx;
    double xb[CHUNK], yb[CHUNK];
    bool in_direct = s[1] == 8, out_direct = s[0] == 8;
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        int64_t m = imin(CHUNK, n - i0);
        const char *in = p[1] + i0 * s[1];
        char *out = p[0] + i0 * s[0];
        const double *src = xb;
        if (in_direct)
            src = (const double *)in;
        else
            for (int64_t i = 0; i < m; i++) xb[i] = *(const double *)(in + i * s[1]);
        double *dst = out_direct ? (double *)out : yb;
        run_f64(c, src, dst, m);
        if (!out_direct)
            for (int64_t i = 0; i < m; i++) *(double *)(out + i * s[0]) = yb[i];
    }
}

static void row_int(char **p, const int64_t *s, int64_t n, void *vctx)
{
    const uctx *c = vctx;
    int64_t xb[CHUNK], yb[CHUNK];
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        int64_t m = imin(CHUNK, n - i0);
        const char *in = p[1] + i0 * s[1];
        char *out = p[0] + i0 * s[0];
        for (int64_t i = 0; i < m; i++) xb[i] = ir_get_i64(in + i * s[1], c->dt_in);
        run_int(c, xb, yb, m);
        for (int64_t i = 0; i < m; i++) ir_set_i64(out + i * s[0], c->dt_out, yb[i]);
    }
}

/* isnan, isinf, isfinite, logical_not -> bool, from any dtype. */
static void row_pred(char **p, const int64_t *s, int64_t n, void *vctx)
{
    const uctx *c = vctx;
    uint8_t *o = (uint8_t *)p[0];
    const char *in = p[1];
    if (!em_dtype_is_float(c->dt_in)) {
        for (int64_t i = 0; i < n; i++) {
            uint8_t r;
            switch (c->kind) {
            case EM_OP_ISFINITE: r = 1; break;
            case EM_OP_LOGICAL_NOT: r = ir_get_i64(in + i * s[1], c->dt_in) == 0; break;
            default: r = 0; break; /* integers are never NaN or infinite */
            }
            o[i * s[0]] = r;
        }
        return;
    }
    double buf[CHUNK];
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        int64_t m = imin(CHUNK, n - i0);
        const char *x = in + i0 * s[1];
        uint8_t *y = o + i0 * s[0];
        for (int64_t i = 0; i < m; i++) buf[i] = ir_get_f64(x + i * s[1], c->dt_in);
        switch (c->kind) {
        case EM_OP_ISNAN:
            for (int64_t i = 0; i < m; i++) y[i * s[0]] = (uint8_t)(isnan(buf[i]) != 0);
            break;
        case EM_OP_ISINF:
            for (int64_t i = 0; i < m; i++) y[i * s[0]] = (uint8_t)(isinf(buf[i]) != 0);
            break;
        case EM_OP_ISFINITE:
            for (int64_t i = 0; i < m; i++) y[i * s[0]] = (uint8_t)(isfinite(buf[i]) != 0);
            break;
        default: /* logical_not: NaN is nonzero, so true -> false */
            for (int64_t i = 0; i < m; i++) y[i * s[0]] = buf[i] == 0;
            break;
        }
    }
}

void cpu_act_f32(em_op_kind kind, const float *x, float *y, int64_t n)
{
    uctx c = {.kind = kind, .dt_in = EM_F32, .dt_out = EM_F32, .dom = D_F32, .fast = cpu_fast()};
    run_f32(&c, x, y, n);
}

void cpu_act_f64(em_op_kind kind, const double *x, double *y, int64_t n)
{
    uctx c = {.kind = kind, .dt_in = EM_F64, .dt_out = EM_F64, .dom = D_F64};
    run_f64(&c, x, y, n);
}

// x: any shape, any strides -> out: same shape, contiguous
em_status cpu_exec_unary(const ir_op *op)
{
    const ir_tensor *x = op->in[0];
    const ir_tensor *o = op->out[0];
    uctx c = {
        .kind = op->kind,
        .dt_in = x->dtype,
        .dt_out = o->dtype,
        .p0 = op->p.act.v[0],
        .p1 = op->p.act.v[1],
        .fast = cpu_fast(),
    };
    if (op->kind == EM_OP_CELU) c.p1 = 1.0 / op->p.act.alpha; /* input scale */
    /* f32 outputs are written in place (contiguous); others go through a buffer on the stack */
    bool fast_gelu = op->kind == EM_OP_GELU && c.fast && o->dtype == EM_F32;
    cpu_store_plan sp = cpu_store_begin(CPU_STORE_GELU, fast_gelu ? (int64_t)ir_numel(o) * 4 : 0);
    c.hint = sp.hint;
    c.p0f = (float)c.p0;
    c.p1f = (float)c.p1;
    if (ir_info_of(op->kind)->dtype == IR_DT_BOOL) /* isnan, isinf, isfinite, logical_not */
        c.dom = D_PRED;
    else if (x->dtype == EM_F64)
        c.dom = D_F64;
    else if (em_dtype_is_float(o->dtype))
        c.dom = D_F32;
    else
        c.dom = D_INT;
    cpu_row_fn fn = c.dom == D_F32   ? row_f32
                    : c.dom == D_F64 ? row_f64
                    : c.dom == D_INT ? row_int
                                     : row_pred;
    int64_t st[2][EM_MAX_RANK];
    cpu_bstrides(o, o->shape, o->rank, st[0]);
    cpu_bstrides(x, o->shape, o->rank, st[1]);
    char *base[2] = {ir_ptr(o), ir_ptr(x)};
    cpu_loop(o->rank, o->shape, 2, base, st, fn, &c, true);
    cpu_store_end(&sp);
    return EM_OK;
}
