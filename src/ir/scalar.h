/* The scalar helpers and constants that the op table's expressions (ops.def) call, in double
 * (integer kinds in int64_t). Plain C that a CUDA or other C-like kernel source can include too:
 * IR_SCALAR_FN may be defined first (as `__device__ inline`, say). Needs <math.h> and
 * <stdint.h>. */
#ifndef EMBER_IR_SCALAR_H
#define EMBER_IR_SCALAR_H

#ifndef IR_SCALAR_FN
#define IR_SCALAR_FN static inline
#endif

#define IR_LN2          0.69314718055994530941723212145818
#define IR_2_SQRTPI     1.1283791670955125738961589031215 /* erf'(0) = 2 / sqrt(pi) */
#define IR_SQRT1_2      0.70710678118654752440084436210485
#define IR_SQRT_2_PI    0.79788456080286535587989211986876 /* sqrt(2 / pi) */
#define IR_INV_SQRT_2PI 0.39894228040143267793994605993438 /* 1 / sqrt(2 pi) */
#define IR_SELU_ALPHA   1.6732632423543772848170429916717
#define IR_SELU_SCALE   1.0507009873554804934193349852946

/* 1, -1 or 0 by the sign of v; NaN stays NaN, -0 gives +0. */
IR_SCALAR_FN double ir_sign(double v)
{
    return v > 0 ? 1.0 : (v < 0 ? -1.0 : (v == v ? 0.0 : v));
}

/* v limited to [lo, hi]; NaN stays NaN. */
IR_SCALAR_FN double ir_clamp(double v, double lo, double hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

/* clamp's scalar form: a NaN bound is no bound. */
IR_SCALAR_FN double ir_clamp_nan(double v, double lo, double hi)
{
    if (lo == lo && v < lo) v = lo;
    if (hi == hi && v > hi) v = hi;
    return v;
}

/* 1 / (1 + exp(-v)) without overflow. */
IR_SCALAR_FN double ir_sigmoid(double v)
{
    double e = exp(-fabs(v)), r = 1.0 / (1.0 + e);
    return v >= 0 ? r : e * r;
}

/* log(1 + exp(v)) without overflow. */
IR_SCALAR_FN double ir_softplus(double v)
{
    return fmax(v, 0.0) + log1p(exp(-fabs(v)));
}

/* The derivative of gelu's tanh approximation: 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2),
 * t = tanh(k (x + c x^3)), k = sqrt(2 / pi), c = 0.044715. */
IR_SCALAR_FN double ir_gelu_tanh_d(double x)
{
    double t = tanh(IR_SQRT_2_PI * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) +
           0.5 * x * (1.0 - t * t) * IR_SQRT_2_PI * (1.0 + 3.0 * 0.044715 * x * x);
}

/* PyTorch's floor division: the exact floor of the quotient, IEEE's result for b == 0. */
IR_SCALAR_FN double ir_floor_div(double a, double b)
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

/* Python's modulo: the sign of the divisor. */
IR_SCALAR_FN double ir_remainder(double a, double b)
{
    double m = fmod(a, b);
    if (m != 0 && (b < 0) != (m < 0)) m += b;
    return m;
}

/* NaN-propagating minimum and maximum. */
IR_SCALAR_FN double ir_minimum(double a, double b)
{
    return (a != a || b != b) ? a + b : (b < a ? b : a);
}

IR_SCALAR_FN double ir_maximum(double a, double b)
{
    return (a != a || b != b) ? a + b : (a < b ? b : a);
}

/* a + w (b - a) for |w| < 0.5, else b - (b - a) (1 - w): exact at both ends. */
IR_SCALAR_FN double ir_lerp(double a, double b, double w)
{
    return fabs(w) < 0.5 ? a + w * (b - a) : b - (b - a) * (1.0 - w);
}

/* ---- the float forms (f32 kernels) and integer forms (int64_t kernels) that a generated kernel
 * calls for the helpers above and for libm functions without an integer meaning ---------------- */

IR_SCALAR_FN float ir_sign_f(float v)
{
    return v > 0 ? 1.0f : (v < 0 ? -1.0f : (v == v ? 0.0f : v));
}

IR_SCALAR_FN float ir_clamp_f(float v, float lo, float hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

IR_SCALAR_FN float ir_sigmoid_f(float v)
{
    float e = expf(-fabsf(v)), r = 1.0f / (1.0f + e);
    return v >= 0 ? r : e * r;
}

IR_SCALAR_FN float ir_softplus_f(float v)
{
    return fmaxf(v, 0.0f) + log1pf(expf(-fabsf(v)));
}

/* floor, ceil, trunc and nearbyint of an integer */
IR_SCALAR_FN int64_t ir_copy_i(int64_t v)
{
    return v;
}

IR_SCALAR_FN int64_t ir_abs_i(int64_t v)
{
    return v < 0 ? (int64_t)(0u - (uint64_t)v) : v;
}

IR_SCALAR_FN int64_t ir_sign_i(int64_t v)
{
    return (v > 0) - (v < 0);
}

/* v limited to bounds given as doubles (saturating to int64's range) */
IR_SCALAR_FN int64_t ir_clamp_i(int64_t v, double lo, double hi)
{
    if ((double)v < lo) return lo <= -9.2233720368547758e18 ? INT64_MIN : (int64_t)lo;
    if ((double)v > hi) return hi >= 9.2233720368547758e18 ? INT64_MAX : (int64_t)hi;
    return v;
}

IR_SCALAR_FN int64_t ir_minimum_i(int64_t a, int64_t b)
{
    return b < a ? b : a;
}

IR_SCALAR_FN int64_t ir_maximum_i(int64_t a, int64_t b)
{
    return a < b ? b : a;
}

/* a / b and a % b for b != 0, -1: in 32 bits where both operands fit, which many x86 cores
 * divide several times faster than 64-bit operands. */
IR_SCALAR_FN int64_t ir_div_i(int64_t a, int64_t b)
{
    return a == (int32_t)a && b == (int32_t)b ? (int32_t)a / (int32_t)b : a / b;
}

IR_SCALAR_FN int64_t ir_mod_i(int64_t a, int64_t b)
{
    return a == (int32_t)a && b == (int32_t)b ? (int32_t)a % (int32_t)b : a % b;
}

/* Integer floor division, remainder (sign of the divisor) and fmod (sign of the dividend), as
 * PyTorch; b == 0 gives 0 (the kernel reports the division by zero) and b == -1 never traps. */
IR_SCALAR_FN int64_t ir_floor_div_i(int64_t a, int64_t b)
{
    if (b == 0) return 0;
    if (b == -1) return (int64_t)(0u - (uint64_t)a);
    int64_t q = ir_div_i(a, b);
    if (q * b != a && ((a < 0) != (b < 0))) q--;
    return q;
}

IR_SCALAR_FN int64_t ir_remainder_i(int64_t a, int64_t b)
{
    if (b == 0 || b == -1) return 0;
    int64_t r = ir_mod_i(a, b);
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}

IR_SCALAR_FN int64_t ir_fmod_i(int64_t a, int64_t b)
{
    return b == 0 || b == -1 ? 0 : ir_mod_i(a, b);
}

/* Integer power as PyTorch: negative exponents give 1, +-1 or 0; overflow wraps. */
IR_SCALAR_FN int64_t ir_pow_i(int64_t a, int64_t b)
{
    if (b < 0) {
        if (a == 1) return 1;
        if (a == -1) return (b % 2 == 0) ? 1 : -1;
        return 0;
    }
    uint64_t r = 1, base = (uint64_t)a;
    while (b) {
        if (b & 1) r *= base;
        b >>= 1;
        base *= base;
    }
    return (int64_t)r;
}

/* Shifts of a `bits`-wide integer: 0 (or the sign) once the shift reaches the width. */
IR_SCALAR_FN int64_t ir_shift_left(int64_t a, int64_t b, int bits)
{
    if (b < 0 || b >= bits) return 0;
    return (int64_t)((uint64_t)a << b);
}

IR_SCALAR_FN int64_t ir_shift_right(int64_t a, int64_t b, int bits)
{
    if (b < 0 || b >= bits) return a < 0 ? -1 : 0;
    return a < 0 ? ~(~a >> b) : a >> b;
}

/* the shifts are integer helpers already */
#define ir_shift_left_i  ir_shift_left
#define ir_shift_right_i ir_shift_right

#endif
