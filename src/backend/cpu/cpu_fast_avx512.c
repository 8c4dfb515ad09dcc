/* AVX-512 row kernels behind cpu_fast.h. Compiled with AVX-512 flags (CMake gives *_avx512.c
 * files their own); reached only through cpu_fast() on CPUs with AVX-512F+DQ. */
#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu_fast.h"

static inline __mmask16 tail_mask(int64_t left)
{
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

/* Where the full, unmasked vectors of an output y[0, n) begin: with *stream, at y's first
 * 64-byte boundary, so they can be stream-stored; else at 0. The elements before it go out as
 * one masked store. Clears *stream where y is not 4-byte aligned or nothing is left past the
 * boundary. */
static inline int64_t body_start(const float *y, int64_t n, bool *stream)
{
    if (!*stream || ((uintptr_t)y & 3) != 0) {
        *stream = false;
        return 0;
    }
    int64_t h = (int64_t)((64 - ((uintptr_t)y & 63)) & 63) / 4;
    if (h >= n) {
        *stream = false;
        return 0;
    }
    return h;
}

/* Prefetches p[i + 256] (1 KiB ahead) into L1; nothing when p is NULL. */
static inline void prefetch_ahead(const float *p, int64_t i)
{
    if (p) _mm_prefetch((const char *)(p + i + 256), _MM_HINT_T0);
}

/* y[0, n) = VEC, VEC an expression of the lane mask m and the element index i giving the 16
 * lanes at i (reading only m's lanes; the caller has no i of its own): with stream, one masked head
 * up to y's 64-byte boundary, then full vectors stored around the caches, with `ahead` (an input
 * read from memory, or NULL) prefetched 1 KiB ahead of them; one masked tail. */
#define ROW_STORE(y, n, stream, ahead, VEC)                                                        \
    do {                                                                                           \
        bool st_ = (stream);                                                                       \
        int64_t h_ = body_start((y), (n), &st_), i = 0;                                            \
        __mmask16 m = tail_mask(h_);                                                               \
        if (h_) _mm512_mask_storeu_ps((y), m, (VEC));                                              \
        m = (__mmask16)0xffff;                                                                     \
        if (st_)                                                                                   \
            for (i = h_; i + 16 <= (n); i += 16) {                                                 \
                prefetch_ahead((ahead), i);                                                        \
                _mm512_stream_ps((y) + i, (VEC));                                                  \
            }                                                                                      \
        else                                                                                       \
            for (i = h_; i + 16 <= (n); i += 16) _mm512_storeu_ps((y) + i, (VEC));                 \
        if (i < (n)) {                                                                             \
            m = tail_mask((n)-i);                                                                  \
            _mm512_mask_storeu_ps((y) + i, m, (VEC));                                              \
        }                                                                                          \
    } while (0) /* unfenced: the caller fences (cpu_fast_stream_fence) */

/* erf on [-4, 4] (clamped), the same rational approximation as cpu_unary.c's erf_fast. */
static inline __m512 erf512(__m512 v)
{
    __m512 x = _mm512_min_ps(_mm512_set1_ps(4.0f), _mm512_max_ps(_mm512_set1_ps(-4.0f), v));
    __m512 x2 = _mm512_mul_ps(x, x);
    __m512 p = _mm512_fmadd_ps(x2, _mm512_set1_ps(-2.72614225801306e-10f),
                               _mm512_set1_ps(2.77068142495902e-08f));
    p = _mm512_fmadd_ps(x2, p, _mm512_set1_ps(-2.10102402082508e-06f));
    p = _mm512_fmadd_ps(x2, p, _mm512_set1_ps(-5.69250639462346e-05f));
    p = _mm512_fmadd_ps(x2, p, _mm512_set1_ps(-7.34990630326855e-04f));
    p = _mm512_fmadd_ps(x2, p, _mm512_set1_ps(-2.95459980854025e-03f));
    p = _mm512_fmadd_ps(x2, p, _mm512_set1_ps(-1.60960333262415e-02f));
    __m512 q = _mm512_fmadd_ps(x2, _mm512_set1_ps(-1.45660718464996e-05f),
                               _mm512_set1_ps(-2.13374055278905e-04f));
    q = _mm512_fmadd_ps(x2, q, _mm512_set1_ps(-1.68282697438203e-03f));
    q = _mm512_fmadd_ps(x2, q, _mm512_set1_ps(-7.37332916720468e-03f));
    q = _mm512_fmadd_ps(x2, q, _mm512_set1_ps(-1.42647390514189e-02f));
    return _mm512_div_ps(_mm512_mul_ps(x, p), q);
}

static inline __m512 gelu512(__m512 v)
{
    __m512 e = erf512(_mm512_mul_ps(v, _mm512_set1_ps(0.70710678118654752f)));
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), v),
                         _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

static void cpu_gelu_f32_avx512(const float *x, float *y, int64_t n, int hint)
{
    ROW_STORE(y, n, hint & CPU_FAST_STREAM, x, gelu512(_mm512_maskz_loadu_ps(m, x + i)));
}

static inline void acc_pd(__m512d *lo, __m512d *hi, __m512 v)
{
    *lo = _mm512_add_pd(*lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    *hi = _mm512_add_pd(
        *hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}

#define SOFTMAX_BUF 4096 /* floats: rows up to this keep their exponentials on the stack */

/* exp(x) in f32 for softmax's arguments x <= 0 (or NaN), in few operations: the AVX2 kernel's
 * one-constant reduction and degree-4 polynomial (relative error 9.4e-8 at most on
 * [-10, 0], 3e-7 on [-86, 0]) and scalef for 2^n; arguments below -104 (and -inf) give 0, NaN
 * stays NaN. */
static inline __m512 exp512_nonpos(__m512 x)
{
    x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x); /* NaN in x survives (second operand) */
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693147180559945f), x);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(1.37704354710877e-3f), r,
                               _mm512_set1_ps(8.36892332881689e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.16691899299622e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.66665181517601e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.99999910593033e-1f));
    __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(y, n);
}

/* exp(x[i] - mb) for the lanes m of the 16 elements at i (0 elsewhere), stored to e + i with
 * store. */
static inline __m512 exp_at(const float *x, float *e, int64_t i, __mmask16 m, __m512 mb, bool store)
{
    __m512 v =
        _mm512_maskz_mov_ps(m, exp512_nonpos(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), mb)));
    if (store) _mm512_mask_storeu_ps(e + i, m, v);
    return v;
}

/* The f64 sum of exp(x[i] - mb) over the row, the exponentials stored to e with store (a
 * constant at each call, so each variant compiles without the test): four vectors at a time
 * added in f32 (exponentials <= 1: two roundings of 2^-24 relative per group), then to f64. */
static inline __attribute__((always_inline)) double exp_sum(const float *x, float *e, int64_t n,
                                                            __m512 mb, bool store, const float *nx)
{
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    const __mmask16 all = (__mmask16)0xffff;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        if (nx)
            for (int l = 0; l < 64; l += 16) _mm_prefetch((const char *)(nx + i + l), _MM_HINT_T0);
        __m512 v0 = exp_at(x, e, i, all, mb, store), v1 = exp_at(x, e, i + 16, all, mb, store);
        __m512 v2 = exp_at(x, e, i + 32, all, mb, store), v3 = exp_at(x, e, i + 48, all, mb, store);
        acc_pd(&s0, &s1, _mm512_add_ps(_mm512_add_ps(v0, v1), _mm512_add_ps(v2, v3)));
    }
    for (; i < n; i += 16) acc_pd(&s0, &s1, exp_at(x, e, i, tail_mask(n - i), mb, store));
    return _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
}

/* max, then exp and f64 sum (the exponentials go to y, or with stream to a buffer on the stack),
 * then one scaling pass; a row of a few KiB stays in L1 between the passes, and with stream y is
 * written once, around the caches. A NaN anywhere need not reach the max: its exponential makes
 * the sum NaN, and with it every output, as the portable kernel's NaN max does. */
static void cpu_softmax_row_f32_avx512(const float *x, float *y, int64_t n, bool lg, int hint)
{
    bool stream = hint & CPU_FAST_STREAM;
    float buf[SOFTMAX_BUF] __attribute__((aligned(64)));
    float *e = stream && n <= SOFTMAX_BUF ? buf : y;
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 m0 = ninf, m1 = ninf, m2 = ninf, m3 = ninf;
    int64_t k = 0;
    for (; k + 64 <= n; k += 64) {
        m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + k));
        m1 = _mm512_max_ps(m1, _mm512_loadu_ps(x + k + 16));
        m2 = _mm512_max_ps(m2, _mm512_loadu_ps(x + k + 32));
        m3 = _mm512_max_ps(m3, _mm512_loadu_ps(x + k + 48));
    }
    for (; k < n; k += 16)
        m0 = _mm512_max_ps(m0, _mm512_mask_loadu_ps(ninf, tail_mask(n - k), x + k));
    __m512 mb = _mm512_set1_ps(
        _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3))));
    const float *nx = cpu_fast_next_row(x, n, hint);
    double sum = lg ? exp_sum(x, e, n, mb, false, nx) : exp_sum(x, e, n, mb, true, nx);
    if (lg) {
        __m512 ls = _mm512_set1_ps((float)log(sum));
        ROW_STORE(y, n, stream, NULL,
                  _mm512_sub_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), mb), ls));
        return;
    }
    __m512 inv = _mm512_set1_ps((float)(1.0 / sum));
    ROW_STORE(y, n, stream, NULL, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, e + i), inv));
}

/* (x - mean) * rstd * w + b for the lanes m of the 16 elements at i (w, b may be NULL). */
static inline __m512 norm512(const float *x, const float *w, const float *b, __mmask16 m, int64_t i,
                             __m512 mf, __m512 rs)
{
    __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), mf), rs);
    if (w && b)
        return _mm512_fmadd_ps(v, _mm512_maskz_loadu_ps(m, w + i), _mm512_maskz_loadu_ps(m, b + i));
    if (w) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, w + i));
    if (b) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, b + i));
    return v;
}

/* The f32 sum of x[i, i + 1024) over four vectors, or of the squares of x - mf with sq; with
 * pf, pf[0, 1024) prefetched alongside (a line per 16 floats read). */
static inline __m512 block_sum(const float *x, int64_t i, __m512 mf, bool sq, const float *pf)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t k = i; k < i + 1024; k += 64) {
        if (pf)
            for (int l = 0; l < 64; l += 16)
                _mm_prefetch((const char *)(pf + k - i + l), _MM_HINT_T0);
        __m512 v0 = _mm512_loadu_ps(x + k), v1 = _mm512_loadu_ps(x + k + 16);
        __m512 v2 = _mm512_loadu_ps(x + k + 32), v3 = _mm512_loadu_ps(x + k + 48);
        if (sq) {
            v0 = _mm512_sub_ps(v0, mf), v1 = _mm512_sub_ps(v1, mf);
            v2 = _mm512_sub_ps(v2, mf), v3 = _mm512_sub_ps(v3, mf);
            a0 = _mm512_fmadd_ps(v0, v0, a0), a1 = _mm512_fmadd_ps(v1, v1, a1);
            a2 = _mm512_fmadd_ps(v2, v2, a2), a3 = _mm512_fmadd_ps(v3, v3, a3);
        } else {
            a0 = _mm512_add_ps(a0, v0), a1 = _mm512_add_ps(a1, v1);
            a2 = _mm512_add_ps(a2, v2), a3 = _mm512_add_ps(a3, v3);
        }
    }
    return _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
}

/* The sum of x[0, n), or of (x - mf)^2 with sq: blocks of 1024 floats in f32 (16 values per
 * lane and accumulator), each block's vector then added in f64, and the tail in f64, in a fixed
 * order. With pf (the next row, or NULL), the blocks prefetch pf[0, n) as they go. */
static double row_sum(const float *x, int64_t n, __m512 mf, bool sq, const float *pf)
{
    __m512d d0 = _mm512_setzero_pd(), d1 = d0;
    int64_t i = 0;
    for (; i + 1024 <= n; i += 1024) acc_pd(&d0, &d1, block_sum(x, i, mf, sq, pf ? pf + i : NULL));
    for (; i < n; i += 16) {
        if (pf) _mm_prefetch((const char *)(pf + i), _MM_HINT_T0);
        __mmask16 m = tail_mask(n - i);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        if (sq) {
            v = _mm512_maskz_sub_ps(m, v, mf);
            v = _mm512_mul_ps(v, v);
        }
        acc_pd(&d0, &d1, v);
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(d0, d1));
}

/* Two reads from L1 for the statistics (the mean, then the sum of squared deviations from the
 * mean rounded to f32; both summed in f32 blocks of 1024 floats, combined in f64 in a fixed
 * order), then one read and write. */
static void cpu_norm_row_f32_avx512(const float *x, float *y, const float *w, const float *b,
                                    int64_t n, double eps, bool rms, int hint)
{
    const float *nx = cpu_fast_next_row(x, n, hint);
    /* the next row streams in during the second pass, a line per 16 floats */
    double mean = rms ? 0 : row_sum(x, n, _mm512_setzero_ps(), false, NULL) / (double)n;
    float m32 = (float)mean;
    double var = row_sum(x, n, _mm512_set1_ps(m32), true, nx) / (double)n;
    __m512 mf = _mm512_set1_ps(m32), rs = _mm512_set1_ps((float)(1.0 / sqrt(var + eps)));
    ROW_STORE(y, n, hint & CPU_FAST_STREAM, NULL, norm512(x, w, b, m, i, mf, rs));
}

const cpu_fast_ops cpu_fast_avx512_ops = {
    .isa = "avx512",
    .gelu = cpu_gelu_f32_avx512,
    .softmax_row = cpu_softmax_row_f32_avx512,
    .norm_row = cpu_norm_row_f32_avx512,
    /* AVX-512 CPUs have AVX2 */
    .sum = cpu_sum_f32_avx2,
    .find_past = cpu_find_past_f32_avx2,
    .topk_row = cpu_topk_row_f32_avx2,
    .fft_pass2 = cpu_fft_pass2_avx2,
    .fft_pass4 = cpu_fft_pass4_avx2,
    .col_top1 = cpu_col_top1_avx2,
    .mask_fill32 = cpu_mask_fill32_avx2,
    .threshold_bwd32 = cpu_threshold_bwd32_avx2,
    .softmax_bw_row = cpu_softmax_bw_row_avx2,
};
