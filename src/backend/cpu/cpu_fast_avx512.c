/* AVX-512 row kernels behind cpu_fast.h. Compiled with AVX-512 flags (CMake gives *_avx512.c
 * files their own); reached only through cpu_fast() on CPUs with AVX-512F+DQ. */
#include <immintrin.h>
#include <math.h>

#include "cpu_fast.h"

static inline __mmask16 tail_mask(int64_t left)
{
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

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

static void cpu_gelu_f32_avx512(const float *x, float *y, int64_t n, bool stream)
{
    (void)stream; /* the stores stay cached */
    const __m512 r2 = _mm512_set1_ps(0.70710678118654752f), half = _mm512_set1_ps(0.5f),
                 one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        __m512 e = erf512(_mm512_mul_ps(v, r2));
        __m512 r = _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_add_ps(one, e));
        _mm512_mask_storeu_ps(y + i, m, r);
    }
}

/* exp(x) in f32 (Cephes-style range reduction, degree-6 polynomial, scalef); inputs below -104
 * give 0, NaN stays NaN. */
static inline __m512 exp512(__m512 x)
{
    x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x); /* NaN in x survives (second operand) */
    x = _mm512_min_ps(_mm512_set1_ps(88.7f), x);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p =
        _mm512_fmadd_ps(_mm512_set1_ps(1.9875691500e-4f), r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(y, n);
}

static inline void acc_pd(__m512d *lo, __m512d *hi, __m512 v)
{
    *lo = _mm512_add_pd(*lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    *hi = _mm512_add_pd(
        *hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}

static void cpu_softmax_row_f32_avx512(const float *x, float *y, int64_t n, bool lg, bool stream)
{
    (void)stream; /* the stores stay cached */
    __m512 mv = _mm512_set1_ps(-INFINITY);
    __mmask16 nan = 0;
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), m, x + i);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        mv = _mm512_max_ps(mv, v);
    }
    float mx = nan ? NAN : _mm512_reduce_max_ps(mv);
    __m512 mb = _mm512_set1_ps(mx);
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m512 e =
            _mm512_maskz_mov_ps(m, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), mb)));
        if (!lg) _mm512_mask_storeu_ps(y + i, m, e);
        acc_pd(&s0, &s1, e);
    }
    double sum = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
    if (lg) {
        __m512 ls = _mm512_set1_ps((float)log(sum));
        for (int64_t i = 0; i < n; i += 16) {
            __mmask16 m = tail_mask(n - i);
            __m512 v = _mm512_sub_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), mb), ls);
            _mm512_mask_storeu_ps(y + i, m, v);
        }
        return;
    }
    __m512 inv = _mm512_set1_ps((float)(1.0 / sum));
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + i), inv));
    }
}

static void cpu_norm_row_f32_avx512(const float *x, float *y, const float *w, const float *b,
                                    int64_t n, double eps, bool rms, bool stream)
{
    (void)stream; /* the stores stay cached */
    double mean = 0;
    if (!rms) {
        __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
        for (int64_t i = 0; i < n; i += 16)
            acc_pd(&s0, &s1, _mm512_maskz_loadu_ps(tail_mask(n - i), x + i));
        mean = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1)) / (double)n;
    }
    __m512d v0 = _mm512_setzero_pd(), v1 = _mm512_setzero_pd();
    __m512d md = _mm512_set1_pd(mean);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        __m512d a = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
        __m512d c =
            _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
        a = _mm512_maskz_sub_pd((__mmask8)m, a, md);
        c = _mm512_maskz_sub_pd((__mmask8)(m >> 8), c, md);
        v0 = _mm512_fmadd_pd(a, a, v0);
        v1 = _mm512_fmadd_pd(c, c, v1);
    }
    double var = _mm512_reduce_add_pd(_mm512_add_pd(v0, v1)) / (double)n;
    __m512 mf = _mm512_set1_ps((float)mean), rs = _mm512_set1_ps((float)(1.0 / sqrt(var + eps)));
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), mf), rs);
        if (w) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, w + i));
        if (b) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, b + i));
        _mm512_mask_storeu_ps(y + i, m, v);
    }
}

static double cpu_sum_f32_avx512(const float *x, int64_t n)
{
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd(), a2 = _mm512_setzero_pd(),
            a3 = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc_pd(&a0, &a1, _mm512_loadu_ps(x + i));
        acc_pd(&a2, &a3, _mm512_loadu_ps(x + i + 16));
    }
    for (; i < n; i += 16) acc_pd(&a0, &a1, _mm512_maskz_loadu_ps(tail_mask(n - i), x + i));
    return _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3)));
}

const cpu_fast_ops cpu_fast_avx512_ops = {
    .isa = "avx512",
    .gelu = cpu_gelu_f32_avx512,
    .softmax_row = cpu_softmax_row_f32_avx512,
    .norm_row = cpu_norm_row_f32_avx512,
    .sum = cpu_sum_f32_avx512,
    /* AVX-512 CPUs have AVX2 */
    .find_past = cpu_find_past_f32_avx2,
    .fft_pass2 = cpu_fft_pass2_avx2,
    .fft_pass4 = cpu_fft_pass4_avx2,
    .col_top1 = cpu_col_top1_avx2,
    .mask_fill32 = cpu_mask_fill32_avx2,
    .threshold_bwd32 = cpu_threshold_bwd32_avx2,
};
