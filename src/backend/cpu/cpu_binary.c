/* CPU kernels for the binary family: elementwise arithmetic, comparisons, logical and bitwise
 * ops over broadcast operands, plus where, masked_fill, clamp and lerp. Rows of contiguous (or
 * scalar-broadcast) same-dtype f32/f64 take tight loops; everything else goes element by element
 * through double (floats) or int64 (integers and bool). The compute rules are documented in
 * src/tensor/ops_binary.c. */
#include <stdatomic.h>

#include "cpu.h"
#include "cpu_ew_gen.h"
#include "cpu_fast.h"

typedef struct bin_ctx {
    em_op_kind kind;
    em_dtype od;           /* output dtype */
    em_dtype id[3];        /* input dtypes */
    em_dtype cdt;          /* compute dtype */
    bool int_mode;         /* compute in int64 */
    bool int_div;          /* an integer divisor of 0 is an error (IR_INT_DIV) */
    bool round_in[3];      /* input needs rounding to cdt (a 16/32-bit float compute type) */
    int bits;              /* width of the output dtype (shifts) */
    int64_t flags;         /* clamp: bound flags */
    double f0, f1;         /* clamp bounds, masked_fill value */
    unsigned char fill[8]; /* masked_fill: the value in the output dtype */
    atomic_int div0;       /* an integer division by zero happened */
} bin_ctx;

static inline double round_to(double v, em_dtype dt)
{
    switch (dt) {
    case EM_F32: return (float)v;
    case EM_F16: return em_f16_to_f32(em_f32_to_f16((float)v));
    case EM_BF16: return em_bf16_to_f32(em_f32_to_bf16((float)v));
    default: return v;
    }
}

/* ---- fast rows: same-dtype f32/f64, unit stride or one broadcast scalar operand ---------- */

/* o[i] = EXPR(a, b) with a = x[i] or x[0], b = y[i] or y[0]. Blocks of 8 have a trip count the
 * compiler knows, so they vectorise even under -O2's very cheap cost model. */
#define FAST_LOOP(T, A, B, EXPR)                                                                   \
    do {                                                                                           \
        int64_t i = 0;                                                                             \
        for (; i + 8 <= n; i += 8)                                                                 \
            for (int j = 0; j < 8; j++) {                                                          \
                T a = A(i + j), b = B(i + j);                                                      \
                o[i + j] = (EXPR);                                                                 \
            }                                                                                      \
        for (; i < n; i++) {                                                                       \
            T a = A(i), b = B(i);                                                                  \
            o[i] = (EXPR);                                                                         \
        }                                                                                          \
    } while (0)

#define VEC_X(i) x[i]
#define VEC_Y(i) y[i]
#define SCA_X(i) x0
#define SCA_Y(i) y0

/* One fast row function per (op, dtype); mode 0: x and y vectors, 1: y a scalar, 2: x one. */
#define DEF_FAST(NAME, T, TO, EXPR)                                                                \
    static void NAME(TO *restrict o, const T *restrict x, const T *restrict y, int64_t n,          \
                     int mode)                                                                     \
    {                                                                                              \
        const T x0 = x[0], y0 = y[0];                                                              \
        if (mode == 0)                                                                             \
            FAST_LOOP(T, VEC_X, VEC_Y, EXPR);                                                      \
        else if (mode == 1)                                                                        \
            FAST_LOOP(T, VEC_X, SCA_Y, EXPR);                                                      \
        else                                                                                       \
            FAST_LOOP(T, SCA_X, VEC_Y, EXPR);                                                      \
    }

#define MIN_EXPR(NAN_V) ((a != a || b != b) ? NAN_V : (b < a ? b : a))
#define MAX_EXPR(NAN_V) ((a != a || b != b) ? NAN_V : (a < b ? b : a))

DEF_FAST(add_f32, float, float, a + b)
DEF_FAST(sub_f32, float, float, a - b)
DEF_FAST(mul_f32, float, float, a *b)
DEF_FAST(div_f32, float, float, a / b)
DEF_FAST(min_f32, float, float, MIN_EXPR(NAN))
DEF_FAST(max_f32, float, float, MAX_EXPR(NAN))
DEF_FAST(add_f64, double, double, a + b)
DEF_FAST(sub_f64, double, double, a - b)
DEF_FAST(mul_f64, double, double, a *b)
DEF_FAST(div_f64, double, double, a / b)
DEF_FAST(min_f64, double, double, MIN_EXPR((double)NAN))
DEF_FAST(max_f64, double, double, MAX_EXPR((double)NAN))
DEF_FAST(eq_f32, float, uint8_t, a == b)
DEF_FAST(ne_f32, float, uint8_t, a != b)
DEF_FAST(lt_f32, float, uint8_t, a < b)
DEF_FAST(le_f32, float, uint8_t, a <= b)
DEF_FAST(gt_f32, float, uint8_t, a > b)
DEF_FAST(ge_f32, float, uint8_t, a >= b)
DEF_FAST(eq_f64, double, uint8_t, a == b)
DEF_FAST(ne_f64, double, uint8_t, a != b)
DEF_FAST(lt_f64, double, uint8_t, a < b)
DEF_FAST(le_f64, double, uint8_t, a <= b)
DEF_FAST(gt_f64, double, uint8_t, a > b)
DEF_FAST(ge_f64, double, uint8_t, a >= b)

typedef void (*fast_f32_fn)(float *, const float *, const float *, int64_t, int);
typedef void (*fast_f64_fn)(double *, const double *, const double *, int64_t, int);
typedef void (*cmp_f32_fn)(uint8_t *, const float *, const float *, int64_t, int);
typedef void (*cmp_f64_fn)(uint8_t *, const double *, const double *, int64_t, int);

static bool fast_row(const bin_ctx *c, char **p, const int64_t *s, int64_t n)
{
    em_dtype dt = c->id[0];
    bool cmp = c->od == EM_BOOL;
    if ((dt != EM_F32 && dt != EM_F64) || c->id[1] != dt || (!cmp && c->od != dt)) return false;
    int64_t es = (int64_t)em_dtype_size(dt);
    if (s[0] != (cmp ? 1 : es) || (s[1] != es && s[1] != 0) || (s[2] != es && s[2] != 0) ||
        (s[1] == 0 && s[2] == 0))
        return false;
    int mode = s[1] && s[2] ? 0 : s[1] ? 1 : 2;
    fast_f32_fn f32 = NULL;
    fast_f64_fn f64 = NULL;
    cmp_f32_fn c32 = NULL;
    cmp_f64_fn c64 = NULL;
    switch (c->kind) {
    case EM_OP_ADD: f32 = add_f32, f64 = add_f64; break;
    case EM_OP_SUB: f32 = sub_f32, f64 = sub_f64; break;
    case EM_OP_MUL: f32 = mul_f32, f64 = mul_f64; break;
    case EM_OP_DIV: f32 = div_f32, f64 = div_f64; break;
    case EM_OP_MINIMUM: f32 = min_f32, f64 = min_f64; break;
    case EM_OP_MAXIMUM: f32 = max_f32, f64 = max_f64; break;
    case EM_OP_EQ: c32 = eq_f32, c64 = eq_f64; break;
    case EM_OP_NE: c32 = ne_f32, c64 = ne_f64; break;
    case EM_OP_LT: c32 = lt_f32, c64 = lt_f64; break;
    case EM_OP_LE: c32 = le_f32, c64 = le_f64; break;
    case EM_OP_GT: c32 = gt_f32, c64 = gt_f64; break;
    case EM_OP_GE: c32 = ge_f32, c64 = ge_f64; break;
    default: return false;
    }
    const void *x = p[1], *y = p[2];
    if (cmp != (c32 != NULL)) return false;
    if (cmp && dt == EM_F32)
        c32((uint8_t *)p[0], x, y, n, mode);
    else if (cmp)
        c64((uint8_t *)p[0], x, y, n, mode);
    else if (dt == EM_F32)
        f32((float *)p[0], x, y, n, mode);
    else
        f64((double *)p[0], x, y, n, mode);
    return true;
}

/* ---- generic rows ------------------------------------------------------------------------ */

/* Chunks of a row loaded into int64 or double buffers (the 16/32-bit float inputs of another
 * dtype rounded to the compute dtype first), computed by the kernel generated from the op table,
 * and stored. The loads and stores of a contiguous or broadcast operand of the common dtypes are
 * loops without a per-element dtype switch, so that they vectorise and the three passes over a
 * chunk cost about what one fused loop did. */
#define BCHUNK 256

static void load_i64(int64_t *restrict b, const char *x, int64_t s, em_dtype dt, int64_t m)
{
    if (s == 0) {
        int64_t v = ir_get_i64(x, dt);
        for (int64_t i = 0; i < m; i++) b[i] = v;
    } else if (dt == EM_I32 && s == 4) {
        const int32_t *v = (const int32_t *)x;
        for (int64_t i = 0; i < m; i++) b[i] = v[i];
    } else if (dt == EM_I64 && s == 8) {
        memcpy(b, x, (size_t)m * sizeof *b);
    } else {
        for (int64_t i = 0; i < m; i++) b[i] = ir_get_i64(x + i * s, dt);
    }
}

static void store_i64(char *o, int64_t s, em_dtype dt, const int64_t *restrict b, int64_t m)
{
    if (dt == EM_I32 && s == 4) {
        int32_t *v = (int32_t *)o;
        for (int64_t i = 0; i < m; i++) v[i] = (int32_t)(uint32_t)(uint64_t)b[i];
    } else if (dt == EM_I64 && s == 8) {
        memcpy(o, b, (size_t)m * sizeof *b);
    } else if (dt == EM_BOOL && s == 1) {
        for (int64_t i = 0; i < m; i++) o[i] = b[i] != 0;
    } else {
        for (int64_t i = 0; i < m; i++) ir_set_i64(o + i * s, dt, b[i]);
    }
}

static void load_f64(double *restrict b, const char *x, int64_t s, em_dtype dt, int64_t m)
{
    if (s == 0) {
        double v = ir_get_f64(x, dt);
        for (int64_t i = 0; i < m; i++) b[i] = v;
    } else if (dt == EM_F32 && s == 4) {
        const float *v = (const float *)x;
        for (int64_t i = 0; i < m; i++) b[i] = v[i];
    } else if (dt == EM_I32 && s == 4) {
        const int32_t *v = (const int32_t *)x;
        for (int64_t i = 0; i < m; i++) b[i] = v[i];
    } else if (dt == EM_F64 && s == 8) {
        memcpy(b, x, (size_t)m * sizeof *b);
    } else {
        for (int64_t i = 0; i < m; i++) b[i] = ir_get_f64(x + i * s, dt);
    }
}

static void store_f64(char *o, int64_t s, em_dtype dt, const double *restrict b, int64_t m)
{
    if (dt == EM_F32 && s == 4) {
        float *v = (float *)o;
        for (int64_t i = 0; i < m; i++) v[i] = (float)b[i];
    } else if (dt == EM_F64 && s == 8) {
        memcpy(o, b, (size_t)m * sizeof *b);
    } else if (dt == EM_BOOL && s == 1) {
        for (int64_t i = 0; i < m; i++) o[i] = b[i] != 0;
    } else {
        for (int64_t i = 0; i < m; i++) ir_set_f64(o + i * s, dt, b[i]);
    }
}

static void binary_row(char **p, const int64_t *s, int64_t n, void *vctx)
{
    bin_ctx *c = vctx;
    if (fast_row(c, p, s, n)) return;
    for (int64_t i0 = 0; i0 < n; i0 += BCHUNK) {
        int64_t m = n - i0 < BCHUNK ? n - i0 : BCHUNK;
        char *o = p[0] + i0 * s[0];
        const char *x = p[1] + i0 * s[1], *y = p[2] + i0 * s[2];
        if (c->int_mode) {
            int64_t ab[BCHUNK], bb[BCHUNK], ob[BCHUNK];
            load_i64(ab, x, s[1], c->id[0], m);
            load_i64(bb, y, s[2], c->id[1], m);
            if (c->int_div) {
                int zero = 0;
                for (int64_t i = 0; i < m; i++) zero |= bb[i] == 0;
                if (zero) atomic_store_explicit(&c->div0, 1, memory_order_relaxed);
            }
            cpu_gen_binary_i64(c->kind, ab, bb, ob, m, c->bits);
            store_i64(o, s[0], c->od, ob, m);
        } else {
            double ab[BCHUNK], bb[BCHUNK], ob[BCHUNK];
            load_f64(ab, x, s[1], c->id[0], m);
            load_f64(bb, y, s[2], c->id[1], m);
            for (int k = 0; k < 2; k++) {
                double *v = k ? bb : ab;
                if (!c->round_in[k]) continue;
                if (c->cdt == EM_F32)
                    for (int64_t i = 0; i < m; i++) v[i] = (float)v[i];
                else
                    for (int64_t i = 0; i < m; i++) v[i] = round_to(v[i], c->cdt);
            }
            cpu_gen_binary_f64(c->kind, ab, bb, ob, m);
            store_f64(o, s[0], c->od, ob, m);
        }
    }
}

/* Copies one element of dtype `from` into `to` (exact between integers). */
static inline void put_conv(char *o, em_dtype to, const char *x, em_dtype from)
{
    if (to == from)
        memcpy(o, x, em_dtype_size(to));
    else if (!em_dtype_is_float(to))
        ir_set_i64(o, to, ir_get_i64(x, from));
    else
        ir_set_f64(o, to, ir_get_f64(x, from));
}

/* out, cond, a, b */
static void where_row(char **p, const int64_t *s, int64_t n, void *vctx)
{
    const bin_ctx *c = vctx;
    char *o = p[0];
    const char *m = p[1], *x = p[2], *y = p[3];
    if (c->od == EM_F32 && c->id[1] == EM_F32 && c->id[2] == EM_F32 && s[0] == 4 && s[1] == 1 &&
        s[2] == 4 && s[3] == 4) {
        float *restrict of = (float *)o;
        const float *restrict xf = (const float *)x, *restrict yf = (const float *)y;
        const uint8_t *restrict mf = (const uint8_t *)m;
        for (int64_t i = 0; i < n; i++) of[i] = mf[i] ? xf[i] : yf[i];
        return;
    }
    for (int64_t i = 0; i < n; i++, o += s[0], m += s[1], x += s[2], y += s[3]) {
        if (*(const uint8_t *)m)
            put_conv(o, c->od, x, c->id[1]);
        else
            put_conv(o, c->od, y, c->id[2]);
    }
}

/* out, x, mask */
static void masked_fill_row(char **p, const int64_t *s, int64_t n, void *vctx)
{
    const bin_ctx *c = vctx;
    size_t es = em_dtype_size(c->od);
    char *o = p[0];
    const char *x = p[1], *m = p[2];
    /* by element width (the fill's bits), so the contiguous loops vectorise */
#define MFILL_ROW(U)                                                                               \
    do {                                                                                           \
        U f;                                                                                       \
        memcpy(&f, c->fill, sizeof f);                                                             \
        if (s[0] == sizeof(U) && s[1] == sizeof(U) && s[2] == 1) {                                 \
            U *restrict ou = (U *)o;                                                               \
            const U *restrict xu = (const U *)x;                                                   \
            const uint8_t *restrict mu = (const uint8_t *)m;                                       \
            for (int64_t i = 0; i < n; i++) { /* branch-free select: masks are random */           \
                U sel = (U)0 - (U)(mu[i] != 0);                                                    \
                ou[i] = (U)((f & sel) | (xu[i] & (U)~sel));                                        \
            }                                                                                      \
        } else                                                                                     \
            for (int64_t i = 0; i < n; i++, o += s[0], x += s[1], m += s[2])                       \
                memcpy(o, *(const uint8_t *)m ? (const void *)&f : x, sizeof(U));                  \
    } while (0)
    const cpu_fast_ops *fast = es == 4 && s[0] == 4 && s[1] == 4 && s[2] == 1 ? cpu_fast() : NULL;
    if (fast && fast->mask_fill32) {
        uint32_t f;
        memcpy(&f, c->fill, sizeof f);
        fast->mask_fill32((uint32_t *)o, (const uint32_t *)x, (const uint8_t *)m, f, n);
        return;
    }
    switch (es) {
    case 1: MFILL_ROW(uint8_t); return;
    case 2: MFILL_ROW(uint16_t); return;
    case 4: MFILL_ROW(uint32_t); return;
    case 8: MFILL_ROW(uint64_t); return;
    default: break;
    }
#undef MFILL_ROW
    for (int64_t i = 0; i < n; i++, o += s[0], x += s[1], m += s[2])
        memcpy(o, *(const uint8_t *)m ? (const char *)c->fill : x, es);
}

/* out, g, y: y <= t ? +0 : g, g's bits (one dtype). */
static void threshold_bwd_row(char **p, const int64_t *s, int64_t n, void *vctx)
{
    const bin_ctx *c = vctx;
    size_t es = em_dtype_size(c->od);
    char *o = p[0];
    const char *g = p[1], *y = p[2];
    if (c->od == EM_F32 && s[0] == 4 && s[1] == 4 && s[2] == 4) {
        const cpu_fast_ops *fast = cpu_fast();
        if (fast && fast->threshold_bwd32) {
            fast->threshold_bwd32((float *)o, (const float *)g, (const float *)y, (float)c->f0, n);
            return;
        }
        uint32_t *restrict ou = (uint32_t *)o;
        const uint32_t *restrict gu = (const uint32_t *)g;
        const float *restrict yf = (const float *)y;
        float t = (float)c->f0;
        for (int64_t i = 0; i < n; i++) ou[i] = yf[i] <= t ? 0u : gu[i];
        return;
    }
    for (int64_t i = 0; i < n; i++, o += s[0], g += s[1], y += s[2]) {
        if (ir_get_f64(y, c->od) <= c->f0)
            memset(o, 0, es);
        else
            memcpy(o, g, es);
    }
}

/* Integer bound from a double: none (NaN or beyond int64 on the unbounded side) or clamped. */
static inline int64_t ibound(double v)
{
    if (v >= 9.2233720368547758e18) return INT64_MAX;
    if (v <= -9.2233720368547758e18) return INT64_MIN;
    return (int64_t)v;
}

/* out, x (scalar bounds in f0/f1, NaN = none) */
static void clamp_row(char **p, const int64_t *s, int64_t n, void *vctx)
{
    const bin_ctx *c = vctx;
    char *o = p[0];
    const char *x = p[1];
    double lo = c->f0, hi = c->f1;
    if (c->int_mode) {
        int64_t l = isnan(lo) ? INT64_MIN : ibound(lo), h = isnan(hi) ? INT64_MAX : ibound(hi);
        for (int64_t i = 0; i < n; i++, o += s[0], x += s[1]) {
            int64_t v = ir_get_i64(x, c->id[0]);
            v = v < l ? l : v;
            ir_set_i64(o, c->od, v > h ? h : v);
        }
        return;
    }
    bool has_lo = !isnan(lo), has_hi = !isnan(hi);
    if (c->od == EM_F32 && c->id[0] == EM_F32 && s[0] == 4 && s[1] == 4) {
        float *restrict of = (float *)o;
        const float *restrict xf = (const float *)x;
        float l = has_lo ? (float)lo : -INFINITY, h = has_hi ? (float)hi : INFINITY;
        if ((double)l != lo && has_lo) goto generic; /* bound not exact in f32 */
        if ((double)h != hi && has_hi) goto generic;
        for (int64_t i = 0; i < n; i++) {
            float v = xf[i];
            v = v < l ? l : v;
            of[i] = v > h ? h : v;
        }
        return;
    }
generic:
    for (int64_t i = 0; i < n; i++, o += s[0], x += s[1]) {
        double v = ir_get_f64(x, c->id[0]);
        if (c->round_in[0]) v = round_to(v, c->cdt);
        if (has_lo && v < lo) v = lo;
        if (has_hi && v > hi) v = hi;
        ir_set_f64(o, c->od, v);
    }
}

/* out, x, [lo], [hi] tensors */
static void clamp_tensor_row(char **p, const int64_t *s, int64_t n, void *vctx)
{
    const bin_ctx *c = vctx;
    bool has_lo = c->flags & 1, has_hi = c->flags & 2;
    int ilo = 2, ihi = has_lo ? 3 : 2;
    for (int64_t i = 0; i < n; i++) {
        char *o = p[0] + i * s[0];
        const char *x = p[1] + i * s[1];
        if (c->int_mode) {
            int64_t v = ir_get_i64(x, c->id[0]);
            if (has_lo) {
                int64_t l = ir_get_i64(p[ilo] + i * s[ilo], c->id[ilo - 1]);
                v = v < l ? l : v;
            }
            if (has_hi) {
                int64_t h = ir_get_i64(p[ihi] + i * s[ihi], c->id[ihi - 1]);
                v = v > h ? h : v;
            }
            ir_set_i64(o, c->od, v);
            continue;
        }
        double v = round_to(ir_get_f64(x, c->id[0]), c->cdt);
        double l = has_lo ? round_to(ir_get_f64(p[ilo] + i * s[ilo], c->id[ilo - 1]), c->cdt) : 0;
        double h = has_hi ? round_to(ir_get_f64(p[ihi] + i * s[ihi], c->id[ihi - 1]), c->cdt) : 0;
        if ((has_lo && isnan(l)) || (has_hi && isnan(h)))
            v = NAN;
        else {
            if (has_lo && v < l) v = l;
            if (has_hi && v > h) v = h;
        }
        ir_set_f64(o, c->od, v);
    }
}

static inline double lerp1(double a, double b, double w)
{
    return fabs(w) < 0.5 ? a + w * (b - a) : b - (b - a) * (1 - w);
}

/* out, a, b, w */
static void lerp_row(char **p, const int64_t *s, int64_t n, void *vctx)
{
    const bin_ctx *c = vctx;
    if (c->od == EM_F32 && c->id[0] == EM_F32 && c->id[1] == EM_F32 && s[0] == 4 && s[1] == 4 &&
        s[2] == 4 && s[3] == 0) {
        float *restrict o = (float *)p[0];
        const float *restrict a = (const float *)p[1], *restrict b = (const float *)p[2];
        float w = (float)ir_get_f64(p[3], c->id[2]);
        if (fabsf(w) < 0.5f)
            for (int64_t i = 0; i < n; i++) o[i] = a[i] + w * (b[i] - a[i]);
        else
            for (int64_t i = 0; i < n; i++) o[i] = b[i] - (b[i] - a[i]) * (1 - w);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        double a = ir_get_f64(p[1] + i * s[1], c->id[0]);
        double b = ir_get_f64(p[2] + i * s[2], c->id[1]);
        double w = round_to(ir_get_f64(p[3] + i * s[3], c->id[2]), c->cdt);
        ir_set_f64(p[0] + i * s[0], c->od, lerp1(a, b, w));
    }
}

/* ---- dispatch ---------------------------------------------------------------------------- */

static bool is_cmp(em_op_kind k)
{
    return k == EM_OP_EQ || k == EM_OP_NE || k == EM_OP_LT || k == EM_OP_LE || k == EM_OP_GT ||
           k == EM_OP_GE;
}

static bool low_float(em_dtype dt)
{
    return dt == EM_F32 || dt == EM_F16 || dt == EM_BF16;
}

em_status cpu_exec_binary(const ir_op *op)
{
    const ir_tensor *out = op->out[0];
    bin_ctx c;
    memset(&c, 0, sizeof c);
    atomic_init(&c.div0, 0);
    c.kind = op->kind;
    c.od = out->dtype;
    c.bits = 8 * (int)em_dtype_size(out->dtype);
    for (int k = 0; k < op->n_in && k < 3; k++) c.id[k] = op->in[k]->dtype;

    cpu_row_fn fn = binary_row;
    switch (op->kind) {
    case EM_OP_WHERE: fn = where_row; break;
    case EM_OP_MASKED_FILL:
        fn = masked_fill_row;
        ir_set_f64(c.fill, c.od, op->p.fill.value);
        break;
    case EM_OP_CLAMP:
        c.flags = op->p.clamp.bounds;
        fn = c.flags ? clamp_tensor_row : clamp_row;
        c.f0 = op->p.clamp.lo;
        c.f1 = op->p.clamp.hi;
        break;
    case EM_OP_LERP: fn = lerp_row; break;
    case EM_OP_THRESHOLD_BACKWARD:
        fn = threshold_bwd_row;
        c.f0 = op->p.threshold.threshold;
        break;
    default: break;
    }

    /* compute dtype */
    if (is_cmp(op->kind))
        c.cdt = em_dtype_promote(c.id[0], c.id[1]);
    else if (op->kind == EM_OP_LOGICAL_AND || op->kind == EM_OP_LOGICAL_OR ||
             op->kind == EM_OP_LOGICAL_XOR)
        c.cdt = EM_F64;
    else
        c.cdt = c.od;
    c.int_mode = !em_dtype_is_float(c.cdt);
    c.int_div = c.int_mode && ir_has(op->kind, IR_INT_DIV);
    for (int k = 0; k < 3; k++) c.round_in[k] = low_float(c.cdt) && c.id[k] != c.cdt;

    int64_t st[CPU_MAX_OPS][EM_MAX_RANK];
    char *base[CPU_MAX_OPS];
    cpu_bstrides(out, out->shape, out->rank, st[0]);
    base[0] = ir_ptr(out);
    for (int k = 0; k < op->n_in; k++) {
        cpu_bstrides(op->in[k], out->shape, out->rank, st[k + 1]);
        base[k + 1] = ir_ptr(op->in[k]);
    }
    cpu_loop(out->rank, out->shape, op->n_in + 1, base, st, fn, &c, true);
    if (atomic_load(&c.div0))
        return em_error(EM_ERR_INVALID_ARG, "em_%s: integer division by zero",
                        em_op_name(op->kind));
    return EM_OK;
}
