// Elementwise kernels for every dtype: unary math and activations, binary arithmetic,
// comparisons, logical, bitwise and shift ops, where, clamp, lerp, the derivatives of the op
// table (EW_GRAD), casts and the creation ops
// that write one value per element. Dtypes are run-time codes (em_dtype) and every load and
// store goes through ew_getf / ew_geti / ew_setf / ew_seti, which copy the CPU backend's
// conversions bit for bit (src/backend/cpu/cpu.h, src/core/dtype.c). Operands are strided
// views described by struct ew_idx (rank-collapsed by the host, element strides, out last).
#include "ew_scalar.cuh"
#include "prelude.cuh"

#define EW_F64  0
#define EW_F32  1
#define EW_F16  2
#define EW_BF16 3
#define EW_I64  4
#define EW_I32  5
#define EW_I16  6
#define EW_I8   7
#define EW_U8   8
#define EW_BOOL 9

// up to 4 operands over the output's (collapsed) shape; operand 3 is the output
struct ew_idx {
    i64 shape[8];
    i64 st[4][8];
    int rank;
};

__device__ __forceinline__ void ew_offs(const ew_idx &s, i64 i, i64 *o)
{
    o[0] = o[1] = o[2] = o[3] = 0;
    for (int d = s.rank - 1; d > 0; d--) {
        i64 q = i / s.shape[d], c = i - q * s.shape[d];
        o[0] += c * s.st[0][d];
        o[1] += c * s.st[1][d];
        o[2] += c * s.st[2][d];
        o[3] += c * s.st[3][d];
        i = q;
    }
    if (s.rank > 0) {
        o[0] += i * s.st[0][0];
        o[1] += i * s.st[1][0];
        o[2] += i * s.st[2][0];
        o[3] += i * s.st[3][0];
    }
}

#define EW_LOOP(n)                                                                                 \
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                              \
         i += (i64)blockDim.x * gridDim.x) {                                                       \
        i64 f[4];                                                                                  \
        ew_offs(s, i, f);
#define EW_END }

// ---- f16 / bf16 bit conversions (src/core/dtype.c) ----------------------------------------

// ---- element access (ir_get_f64, ir_get_i64, ir_set_i64, ir_set_f64) ------------------

__device__ __forceinline__ double ew_getf(const void *p, int dt, i64 i)
{
    switch (dt) {
    case EW_F64: return ((const double *)p)[i];
    case EW_F32: return ((const float *)p)[i];
    case EW_F16: return em_h2f(((const unsigned short *)p)[i]);
    case EW_BF16: return em_b2f(((const unsigned short *)p)[i]);
    case EW_I64: return (double)((const long long *)p)[i];
    case EW_I32: return ((const int *)p)[i];
    case EW_I16: return ((const short *)p)[i];
    case EW_I8: return ((const signed char *)p)[i];
    case EW_U8: return ((const unsigned char *)p)[i];
    case EW_BOOL: return ((const unsigned char *)p)[i] ? 1.0 : 0.0;
    default: return 0;
    }
}

// float -> int truncates toward zero; NaN and out-of-range give INT64_MIN (as x86)
__device__ __forceinline__ i64 ew_f2i(double v)
{
    return (v > -9.2233720368547758e18 && v < 9.2233720368547758e18) ? (i64)v
                                                                     : (i64)0x8000000000000000ull;
}

__device__ __forceinline__ i64 ew_geti(const void *p, int dt, i64 i)
{
    switch (dt) {
    case EW_I64: return ((const long long *)p)[i];
    case EW_I32: return ((const int *)p)[i];
    case EW_I16: return ((const short *)p)[i];
    case EW_I8: return ((const signed char *)p)[i];
    case EW_U8: return ((const unsigned char *)p)[i];
    case EW_BOOL: return ((const unsigned char *)p)[i] ? 1 : 0;
    default: return ew_f2i(ew_getf(p, dt, i));
    }
}

__device__ __forceinline__ void ew_seti(void *p, int dt, i64 i, i64 v)
{
    switch (dt) {
    case EW_I64: ((long long *)p)[i] = v; break;
    case EW_I32: ((int *)p)[i] = (int)(unsigned)(u64)v; break;
    case EW_I16: ((short *)p)[i] = (short)(unsigned short)(u64)v; break;
    case EW_I8: ((signed char *)p)[i] = (signed char)(unsigned char)(u64)v; break;
    case EW_U8: ((unsigned char *)p)[i] = (unsigned char)(u64)v; break;
    case EW_BOOL: ((unsigned char *)p)[i] = v != 0; break;
    case EW_F64: ((double *)p)[i] = (double)v; break;
    case EW_F32: ((float *)p)[i] = (float)v; break;
    case EW_F16: ((unsigned short *)p)[i] = em_f2h((float)v); break;
    case EW_BF16: ((unsigned short *)p)[i] = em_f2b((float)v); break;
    default: break;
    }
}

__device__ __forceinline__ void ew_setf(void *p, int dt, i64 i, double v)
{
    switch (dt) {
    case EW_F64: ((double *)p)[i] = v; break;
    case EW_F32: ((float *)p)[i] = (float)v; break;
    case EW_F16: ((unsigned short *)p)[i] = em_f2h((float)v); break;
    case EW_BF16: ((unsigned short *)p)[i] = em_f2b((float)v); break;
    case EW_BOOL: ((unsigned char *)p)[i] = v != 0; break;
    default: ew_seti(p, dt, i, ew_f2i(v)); break;
    }
}

__device__ __forceinline__ bool ew_isfloat(int dt)
{
    return dt <= EW_BF16;
}

__device__ __forceinline__ int ew_size(int dt)
{
    return dt == EW_F64 || dt == EW_I64   ? 8
           : dt == EW_F32 || dt == EW_I32 ? 4
           : dt <= EW_I16                 ? 2
                                          : 1;
}

// element i of (p, pd) into element j of (o, od): raw copy for one dtype, exact between
// integers, through double otherwise (put_conv in cpu_binary.c)
__device__ __forceinline__ void ew_conv(void *o, int od, i64 j, const void *p, int pd, i64 i)
{
    if (od == pd) {
        switch (ew_size(od)) {
        case 8: ((u64 *)o)[j] = ((const u64 *)p)[i]; break;
        case 4: ((unsigned *)o)[j] = ((const unsigned *)p)[i]; break;
        case 2: ((unsigned short *)o)[j] = ((const unsigned short *)p)[i]; break;
        default: ((unsigned char *)o)[j] = ((const unsigned char *)p)[i]; break;
        }
    } else if (!ew_isfloat(od))
        ew_seti(o, od, j, ew_geti(p, pd, i));
    else
        ew_setf(o, od, j, ew_getf(p, pd, i));
}

__device__ __forceinline__ void ew_zero(void *o, int od, i64 j)
{
    switch (ew_size(od)) {
    case 8: ((u64 *)o)[j] = 0; break;
    case 4: ((unsigned *)o)[j] = 0; break;
    case 2: ((unsigned short *)o)[j] = 0; break;
    default: ((unsigned char *)o)[j] = 0; break;
    }
}

// v rounded to a 16/32-bit float compute dtype (round_to in cpu_binary.c)
__device__ __forceinline__ double ew_round(double v, int cdt)
{
    switch (cdt) {
    case EW_F32: return (float)v;
    case EW_F16: return em_h2f(em_f2h((float)v));
    case EW_BF16: return em_b2f(em_f2b((float)v));
    default: return v;
    }
}

// v saturated to int64's range (ir_clamp_i)
__device__ __forceinline__ i64 ew_bound(double v)
{
    if (v <= -9.2233720368547758e18) return (i64)0x8000000000000000ull;
    if (v >= 9.2233720368547758e18) return 0x7fffffffffffffffll;
    return (i64)v;
}

// ---- unary: dom 0 f32 compute (f32/f16/bf16 out), 1 f64, 2 int64, 3 predicate (-> bool) ----

extern "C" __global__ void ew_unary(int op, int dom, const void *x, int dti, void *y, int dto,
                                    i64 n, double a, double b, ew_idx s)
{
    float af = (float)a, bf = (float)b;
    EW_LOOP(n)
    if (dom == 0) {
        float v =
            dti == EW_I64 ? (float)((const long long *)x)[f[0]] : (float)ew_getf(x, dti, f[0]);
        float r = unary_f(op, v, af, bf);
        if (dto == EW_F32)
            ((float *)y)[f[3]] = r;
        else if (dto == EW_F16)
            ((unsigned short *)y)[f[3]] = em_f2h(r);
        else
            ((unsigned short *)y)[f[3]] = em_f2b(r);
    } else if (dom == 1) {
        ((double *)y)[f[3]] = unary_d(op, ((const double *)x)[f[0]], a, b);
    } else if (dom == 2) {
        int bits = dti == EW_BOOL ? 1 : 8 * ew_size(dti);
        ew_seti(y, dto, f[3], unary_i(op, ew_geti(x, dti, f[0]), a, b, bits));
    } else {
        ((unsigned char *)y)[f[3]] = unary_pred(op, ew_getf(x, dti, f[0]));
    }
    EW_END
}

// ---- binary (cpu_binary.c) -----------------------------------------------------------------

// o = x (op) y computed in cdt: int64 when imode (*div0 is set on an integer division by zero,
// which the host turns into the CPU's error), else double with 16/32-bit float inputs of another
// dtype rounded to cdt first
extern "C" __global__ void ew_binary(int op, const void *x, int dx, const void *y, int dy, void *o,
                                     int dout, int cdt, int imode, int bits, i64 n, ew_idx s,
                                     int *div0)
{
    bool rx = cdt >= EW_F32 && cdt <= EW_BF16 && dx != cdt;
    bool ry = cdt >= EW_F32 && cdt <= EW_BF16 && dy != cdt;
    EW_LOOP(n)
    if (imode) {
        i64 b = ew_geti(y, dy, f[1]);
        if (b == 0 && binary_int_div(op)) *div0 = 1;
        ew_seti(o, dout, f[3], binary_i(op, ew_geti(x, dx, f[0]), b, bits));
    } else {
        double a = ew_getf(x, dx, f[0]), b = ew_getf(y, dy, f[1]);
        if (rx) a = ew_round(a, cdt);
        if (ry) b = ew_round(b, cdt);
        ew_setf(o, dout, f[3], binary_d(op, a, b));
    }
    EW_END
}

// f32 (op) f32 -> f32 (or bool for comparisons) over strided / broadcast operands
extern "C" __global__ void ew_binary_ff(int op, const float *x, const float *y, void *o, int cmp,
                                        i64 n, ew_idx s)
{
    EW_LOOP(n)
    double r = binary_d(op, (double)x[f[0]], (double)y[f[1]]);
    if (cmp)
        ((unsigned char *)o)[f[3]] = r != 0;
    else
        ((float *)o)[f[3]] = (float)r;
    EW_END
}

// contiguous f32 x (op) a wrapped f64 scalar *sp (which = 2; which = 1: *sp (op) x), the scalar
// rounded to f32 first as the CPU does; float4 loads when x and o are 16-byte aligned (aligned)
extern "C" __global__ void ew_binary_fs(int op, const float *x, const double *sp, int which,
                                        float *o, i64 n, int aligned)
{
    double sv = (double)(float)*sp;
    i64 t0 = (i64)blockIdx.x * blockDim.x + threadIdx.x, step = (i64)blockDim.x * gridDim.x;
    i64 done = 0;
    if (aligned) {
        i64 n4 = n >> 2;
        const float4 *x4 = (const float4 *)x;
        float4 *o4 = (float4 *)o;
        for (i64 i = t0; i < n4; i += step) {
            float4 v = x4[i], r;
            r.x = (float)(which == 2 ? binary_d(op, v.x, sv) : binary_d(op, sv, v.x));
            r.y = (float)(which == 2 ? binary_d(op, v.y, sv) : binary_d(op, sv, v.y));
            r.z = (float)(which == 2 ? binary_d(op, v.z, sv) : binary_d(op, sv, v.z));
            r.w = (float)(which == 2 ? binary_d(op, v.w, sv) : binary_d(op, sv, v.w));
            o4[i] = r;
        }
        done = n4 * 4;
    }
    for (i64 i = done + t0; i < n; i += step)
        o[i] = (float)(which == 2 ? binary_d(op, x[i], sv) : binary_d(op, sv, x[i]));
}

// where: o = c ? a : b (c bool), a and b converted to the output dtype
extern "C" __global__ void ew_where(const unsigned char *c, const void *a, int da, const void *b,
                                    int db, void *o, int dout, i64 n, ew_idx s)
{
    EW_LOOP(n)
    if (c[f[0]])
        ew_conv(o, dout, f[3], a, da, f[1]);
    else
        ew_conv(o, dout, f[3], b, db, f[2]);
    EW_END
}

// relu's backward (THRESHOLD_BACKWARD): y <= t ? +0 : g, g's bits (g, y and o one float dtype;
// a NaN y keeps g), operands 0 and 1 g and y
extern "C" __global__ void ew_threshold_bwd(const void *g, const void *y, void *o, int dt, double t,
                                            i64 n, ew_idx s)
{
    EW_LOOP(n)
    if (ew_getf(y, dt, f[1]) <= t)
        ew_zero(o, dt, f[3]);
    else
        ew_conv(o, dt, f[3], g, dt, f[0]);
    EW_END
}

// EW_GRAD (exec_grad in cpu_unary.c): the derivative of kind op by input arg at operand 0 (x or
// a), operand 1 (b, read when binary) and operand 2 (y), each read as double whatever its dtype,
// computed in double and rounded once to the output's dtype
extern "C" __global__ void ew_grad(int op, int arg, int binary, const void *a, int da,
                                   const void *b, int db, const void *y, int dy, void *o, int dout,
                                   double pa, double pb, i64 n, ew_idx s)
{
    EW_LOOP(n)
    double av = ew_getf(a, da, f[0]), bv = binary ? ew_getf(b, db, f[1]) : 0;
    ew_setf(o, dout, f[3], grad_d(op, arg, av, bv, ew_getf(y, dy, f[2]), pa, pb));
    EW_END
}

// clamp with scalar bounds (NaN: no bound)
extern "C" __global__ void ew_clamp(const void *x, int dx, void *o, int dout, int cdt, int imode,
                                    double lo, double hi, i64 n, ew_idx s)
{
    bool rx = cdt >= EW_F32 && cdt <= EW_BF16 && dx != cdt;
    i64 l = lo != lo ? (i64)0x8000000000000000ull : ew_bound(lo);
    i64 h = hi != hi ? 0x7fffffffffffffffll : ew_bound(hi);
    EW_LOOP(n)
    if (imode) {
        i64 v = ew_geti(x, dx, f[0]);
        v = v < l ? l : v;
        ew_seti(o, dout, f[3], v > h ? h : v);
    } else {
        double v = ew_getf(x, dx, f[0]);
        if (rx) v = ew_round(v, cdt);
        if (lo == lo && v < lo) v = lo;
        if (hi == hi && v > hi) v = hi;
        ew_setf(o, dout, f[3], v);
    }
    EW_END
}

// clamp with tensor bounds: operand 1 the lower bound (flags & 1), operand 2 the upper one
// (flags & 2); a NaN bound gives NaN
extern "C" __global__ void ew_clamp_t(const void *x, int dx, const void *lp, int dl, const void *hp,
                                      int dh, void *o, int dout, int cdt, int imode, int flags,
                                      i64 n, ew_idx s)
{
    bool has_lo = flags & 1, has_hi = flags & 2;
    EW_LOOP(n)
    if (imode) {
        i64 v = ew_geti(x, dx, f[0]);
        if (has_lo) {
            i64 l = ew_geti(lp, dl, f[1]);
            v = v < l ? l : v;
        }
        if (has_hi) {
            i64 h = ew_geti(hp, dh, f[2]);
            v = v > h ? h : v;
        }
        ew_seti(o, dout, f[3], v);
    } else {
        double v = ew_round(ew_getf(x, dx, f[0]), cdt);
        double l = has_lo ? ew_round(ew_getf(lp, dl, f[1]), cdt) : 0;
        double h = has_hi ? ew_round(ew_getf(hp, dh, f[2]), cdt) : 0;
        if ((has_lo && l != l) || (has_hi && h != h))
            v = __longlong_as_double(0x7ff8000000000000ll);
        else {
            if (has_lo && v < l) v = l;
            if (has_hi && v > h) v = h;
        }
        ew_setf(o, dout, f[3], v);
    }
    EW_END
}

// lerp: a + w (b - a) for |w| < 0.5, else b - (b - a)(1 - w); f32mode: all f32 with one w,
// computed in float as the CPU's f32 row does
extern "C" __global__ void ew_lerp(const void *a, int da, const void *b, int db, const void *w,
                                   int dw, void *o, int dout, int cdt, int f32mode, i64 n, ew_idx s)
{
    EW_LOOP(n)
    if (f32mode) {
        float av = ((const float *)a)[f[0]], bv = ((const float *)b)[f[1]];
        float wv = (float)ew_getf(w, dw, f[2]);
        float d = bv - av;
        ((float *)o)[f[3]] = fabsf(wv) < 0.5f ? __fadd_rn(av, __fmul_rn(wv, d))
                                              : __fsub_rn(bv, __fmul_rn(d, 1 - wv));
    } else {
        double av = ew_getf(a, da, f[0]), bv = ew_getf(b, db, f[1]);
        double wv = ew_round(ew_getf(w, dw, f[2]), cdt);
        double d = bv - av;
        ew_setf(o, dout, f[3],
                fabs(wv) < 0.5 ? __dadd_rn(av, __dmul_rn(wv, d))
                               : __dsub_rn(bv, __dmul_rn(d, 1 - wv)));
    }
    EW_END
}

// cast / copy of a strided input into a contiguous output (copy_row in cpu_backend.c)
extern "C" __global__ void ew_cast(const void *x, int dx, void *o, int dout, i64 n, ew_idx s)
{
    bool exact_int = !ew_isfloat(dx) && !ew_isfloat(dout);
    EW_LOOP(n)
    if (dx == dout)
        ew_conv(o, dout, f[3], x, dx, f[0]);
    else if (exact_int)
        ew_seti(o, dout, f[3], ew_geti(x, dx, f[0]));
    else if (dout == EW_BOOL)
        ((unsigned char *)o)[f[3]] = ew_getf(x, dx, f[0]) != 0;
    else
        ew_setf(o, dout, f[3], ew_getf(x, dx, f[0]));
    EW_END
}

// ---- creation (the _rn intrinsics keep products and sums rounded apart, as on the CPU) ------

// kind 0 arange (a start, b step), 1 linspace (a start, b end), 2 eye (cols columns); contiguous
extern "C" __global__ void ew_range(int kind, void *o, int dout, i64 n, double a, double b,
                                    i64 cols)
{
    double step = n > 1 ? (b - a) / (double)(n - 1) : 0;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (i64)blockDim.x * gridDim.x) {
        double v;
        if (kind == 0)
            v = __dadd_rn(a, __dmul_rn((double)i, b));
        else if (kind == 1)
            v = n == 1      ? a
                : i < n / 2 ? __dadd_rn(a, __dmul_rn(step, (double)i))
                            : __dsub_rn(b, __dmul_rn(step, (double)(n - 1 - i)));
        else
            v = (i / cols) == (i % cols) ? 1.0 : 0.0;
        ew_setf(o, dout, i, v);
    }
}

// one_hot: o [m, classes] i64 contiguous; operand 0 walks the (collapsed) index tensor
extern "C" __global__ void ew_one_hot(const void *idx, int di, long long *o, i64 n, i64 classes,
                                      ew_idx s)
{
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (i64)blockDim.x * gridDim.x) {
        i64 k = i / classes, c = i - k * classes, f[4];
        ew_offs(s, k, f);
        o[i] = ew_geti(idx, di, f[0]) == c;
    }
}

// tril (upper 0) / triu (upper 1) of the last two dims [r, c]: x strided, o contiguous, same dtype
extern "C" __global__ void ew_tri(const void *x, void *o, int dt, i64 n, i64 r, i64 c, i64 k,
                                  int upper, ew_idx s)
{
    EW_LOOP(n)
    i64 j = i % c, row = (i / c) % r;
    bool keep = upper ? j - row >= k : j - row <= k;
    if (keep)
        ew_conv(o, dt, f[3], x, dt, f[0]);
    else
        ew_zero(o, dt, f[3]);
    EW_END
}
