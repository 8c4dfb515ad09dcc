/* AVX2+FMA kernels behind cpu_fast.h (8 f32 lanes; f64 accumulation in two 4-lane halves), for
 * the row ops, the top-k tests and the FFT passes. Compiled with -mavx2 -mfma (CMake gives
 * *_avx2.c files their own flags); reached only through cpu_fast() on CPUs that have both. The
 * AVX-512 kernels' formulas, except layer norm's one-read statistics (below). */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu_fast.h"

/* Lanes [0, left) set (left clamped to 8), for maskload/maskstore and blends. */
static inline __m256i tail_mask(int64_t left)
{
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    int l = left >= 8 ? 8 : (int)left;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(l), idx);
}

/* erf on [-4, 4] (clamped), the same rational approximation as cpu_unary.c's erf_fast. */
static inline __m256 erf256(__m256 v)
{
    __m256 x = _mm256_min_ps(_mm256_set1_ps(4.0f), _mm256_max_ps(_mm256_set1_ps(-4.0f), v));
    __m256 x2 = _mm256_mul_ps(x, x);
    __m256 p = _mm256_fmadd_ps(x2, _mm256_set1_ps(-2.72614225801306e-10f),
                               _mm256_set1_ps(2.77068142495902e-08f));
    p = _mm256_fmadd_ps(x2, p, _mm256_set1_ps(-2.10102402082508e-06f));
    p = _mm256_fmadd_ps(x2, p, _mm256_set1_ps(-5.69250639462346e-05f));
    p = _mm256_fmadd_ps(x2, p, _mm256_set1_ps(-7.34990630326855e-04f));
    p = _mm256_fmadd_ps(x2, p, _mm256_set1_ps(-2.95459980854025e-03f));
    p = _mm256_fmadd_ps(x2, p, _mm256_set1_ps(-1.60960333262415e-02f));
    __m256 q = _mm256_fmadd_ps(x2, _mm256_set1_ps(-1.45660718464996e-05f),
                               _mm256_set1_ps(-2.13374055278905e-04f));
    q = _mm256_fmadd_ps(x2, q, _mm256_set1_ps(-1.68282697438203e-03f));
    q = _mm256_fmadd_ps(x2, q, _mm256_set1_ps(-7.37332916720468e-03f));
    q = _mm256_fmadd_ps(x2, q, _mm256_set1_ps(-1.42647390514189e-02f));
    return _mm256_div_ps(_mm256_mul_ps(x, p), q);
}

static inline __m256 gelu256(__m256 v)
{
    __m256 e = erf256(_mm256_mul_ps(v, _mm256_set1_ps(0.70710678118654752f)));
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), v),
                         _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

/* Elements before y's first 32-byte boundary (at most n): stream stores need it aligned. */
static inline int64_t head_len(const float *y, int64_t n)
{
    int64_t h = (int64_t)((32 - ((uintptr_t)y & 31)) & 31) / 4;
    return h < n ? h : n;
}

static void gelu(const float *x, float *y, int64_t n, int hint)
{
    bool stream = hint & CPU_FAST_STREAM;
    int64_t i = 0;
    if (stream && ((uintptr_t)y & 3) == 0) {
        int64_t h = head_len(y, n);
        if (h) {
            __m256i m = tail_mask(h);
            _mm256_maskstore_ps(y, m, gelu256(_mm256_maskload_ps(x, m)));
        }
        for (i = h; i + 16 <= n; i += 16) {
            __m256 a = gelu256(_mm256_loadu_ps(x + i)), c = gelu256(_mm256_loadu_ps(x + i + 8));
            _mm256_stream_ps(y + i, a);
            _mm256_stream_ps(y + i + 8, c);
        }
    } else {
        for (; i + 16 <= n; i += 16) {
            __m256 a = gelu256(_mm256_loadu_ps(x + i)), c = gelu256(_mm256_loadu_ps(x + i + 8));
            _mm256_storeu_ps(y + i, a);
            _mm256_storeu_ps(y + i + 8, c);
        }
    }
    for (; i < n; i += 8) {
        __m256i m = tail_mask(n - i);
        _mm256_maskstore_ps(y + i, m, gelu256(_mm256_maskload_ps(x + i, m)));
    }
}

/* y[0, n) = s * src[0, n) (src may be y); with stream, the aligned body goes around the caches. */
static void scale_store(const float *src, float *y, int64_t n, __m256 s, bool stream)
{
    int64_t i = 0;
    if (stream) {
        int64_t h = head_len(y, n);
        if (h) {
            __m256i m = tail_mask(h);
            _mm256_maskstore_ps(y, m, _mm256_mul_ps(_mm256_maskload_ps(src, m), s));
        }
        for (i = h; i + 8 <= n; i += 8)
            _mm256_stream_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(src + i), s));
    } else {
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(src + i), s));
    }
    if (i < n) {
        __m256i m = tail_mask(n - i);
        _mm256_maskstore_ps(y + i, m, _mm256_mul_ps(_mm256_maskload_ps(src + i, m), s));
    }
}

/* exp(x) in f32 for softmax's arguments x <= 0 (or NaN), with fewer operations than a
 * full-range exp (on CPUs that split 256-bit operations in two, softmax is bound by this
 * arithmetic; the AVX-512 kernel uses the same reduction and polynomial): a shorter reduction and
 * polynomial (accuracy below), and 2^n straight into the exponent bits, so results below exp(-86)
 * (< 5e-38, where that would leave the normal range) flush to 0. -inf gives 0, NaN stays NaN. */
static inline __m256 exp256_nonpos(__m256 x)
{
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    /* one-constant reduction (f32(ln 2) is 1.9e-9 off, so r is off by |n| 1.9e-9) and
     * (e^r - 1 - r) / r^2 on |r| <= ln2/2 to degree 4, fitted for relative error: exp is off by
     * 9.4e-8 at most (relative) on [-10, 0], 3e-7 on [-86, 0], where the results are tiny */
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693147180559945f), x);
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(1.37704354710877e-3f), r,
                               _mm256_set1_ps(8.36892332881689e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.16691899299622e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.66665181517601e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.99999910593033e-1f));
    __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23); /* NaN, -inf lanes: masked below */
    __m256 v = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(y), e));
    return _mm256_and_ps(v, _mm256_cmp_ps(x, _mm256_set1_ps(-86.0f), _CMP_NLT_UQ));
}

static inline void acc_pd(__m256d *lo, __m256d *hi, __m256 v)
{
    *lo = _mm256_add_pd(*lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    *hi = _mm256_add_pd(*hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

static inline double hsum_pd(__m256d v)
{
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

static inline float hmax_ps(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

#define SOFTMAX_BUF 4096 /* floats: rows up to this keep their exponentials on the stack */

// x, y: [n] -> y = softmax(x) (or log_softmax): max, then exp and f64 sum (the exponentials go
// to y, or with stream to a buffer on the stack), then one scaling pass; a row of a few KiB
// stays in L1 between the passes, and with stream y is written once, around the caches.
static void softmax_row(const float *x, float *y, int64_t n, bool lg, int hint)
{
    bool stream = hint & CPU_FAST_STREAM;
    float buf[SOFTMAX_BUF];
    float *e = stream && n <= SOFTMAX_BUF ? buf : y;
    /* a NaN anywhere need not reach the max: its exponential makes the sum NaN, and with it
     * every output, as the portable kernel's NaN max does */
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 mv = ninf;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(x + i));
    if (i < n) {
        __m256i m = tail_mask(n - i);
        mv = _mm256_max_ps(
            mv, _mm256_blendv_ps(ninf, _mm256_maskload_ps(x + i, m), _mm256_castsi256_ps(m)));
    }
    __m256 mb = _mm256_set1_ps(hmax_ps(mv));
    /* f64 sums of four vectors at a time added in f32 (exponentials <= 1: two roundings of
     * 2^-24 relative per group) */
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    /* the next row streams into L1 while this one's exponentials are computed, two lines per 32
       floats: the max pass is the row's first read, from memory, and would otherwise wait on it */
    const float *nx = cpu_fast_next_row(x, n, hint);
    for (i = 0; i + 32 <= n; i += 32) {
        if (nx) {
            _mm_prefetch((const char *)(nx + i), _MM_HINT_T0);
            _mm_prefetch((const char *)(nx + i + 16), _MM_HINT_T0);
        }
        __m256 v0 = exp256_nonpos(_mm256_sub_ps(_mm256_loadu_ps(x + i), mb));
        __m256 v1 = exp256_nonpos(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), mb));
        __m256 v2 = exp256_nonpos(_mm256_sub_ps(_mm256_loadu_ps(x + i + 16), mb));
        __m256 v3 = exp256_nonpos(_mm256_sub_ps(_mm256_loadu_ps(x + i + 24), mb));
        if (!lg) {
            _mm256_storeu_ps(e + i, v0);
            _mm256_storeu_ps(e + i + 8, v1);
            _mm256_storeu_ps(e + i + 16, v2);
            _mm256_storeu_ps(e + i + 24, v3);
        }
        acc_pd(&s0, &s1, _mm256_add_ps(_mm256_add_ps(v0, v1), _mm256_add_ps(v2, v3)));
    }
    for (; i < n; i += 8) {
        __m256i m = tail_mask(n - i);
        __m256 v = _mm256_and_ps(exp256_nonpos(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), mb)),
                                 _mm256_castsi256_ps(m));
        if (!lg) _mm256_maskstore_ps(e + i, m, v);
        acc_pd(&s0, &s1, v);
    }
    double sum = hsum_pd(_mm256_add_pd(s0, s1));
    if (lg) {
        __m256 ls = _mm256_set1_ps((float)log(sum));
        for (i = 0; i < n; i += 8) {
            __m256i m = tail_mask(n - i);
            __m256 v = _mm256_sub_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), mb), ls);
            _mm256_maskstore_ps(y + i, m, v);
        }
        return;
    }
    scale_store(e, y, n, _mm256_set1_ps((float)(1.0 / sum)), e != y);
}

/* Shifted sums of one f32 vector (zeros in masked-off lanes of d): s += d, q += d * d, in f64. */
static inline void acc_moments(__m256d *s0, __m256d *s1, __m256d *q0, __m256d *q1, __m256 v,
                               __m256d k, __m256d keep0, __m256d keep1)
{
    __m256d a = _mm256_and_pd(_mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), k), keep0);
    __m256d c =
        _mm256_and_pd(_mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), k), keep1);
    *s0 = _mm256_add_pd(*s0, a);
    *s1 = _mm256_add_pd(*s1, c);
    *q0 = _mm256_fmadd_pd(a, a, *q0);
    *q1 = _mm256_fmadd_pd(c, c, *q1);
}

/* (x - mean) * rstd * w + b for the 8 elements at i (w, b may be NULL); masked: lanes of m. */
static inline __m256 norm_full(const float *x, const float *w, const float *b, int64_t i, __m256 mf,
                               __m256 rs)
{
    __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), mf), rs);
    if (w) v = _mm256_mul_ps(v, _mm256_loadu_ps(w + i));
    if (b) v = _mm256_add_ps(v, _mm256_loadu_ps(b + i));
    return v;
}

static inline __m256 norm_masked(const float *x, const float *w, const float *b, int64_t i,
                                 __m256i m, __m256 mf, __m256 rs)
{
    __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), mf), rs);
    if (w) v = _mm256_mul_ps(v, _mm256_maskload_ps(w + i, m));
    if (b) v = _mm256_add_ps(v, _mm256_maskload_ps(b + i, m));
    return v;
}

// x, y: [n]; w, b: [n] or NULL -> y = (x - mean) / sqrt(var + eps) * w + b (rms: no mean).
// One read for the statistics: sums of d = x - x[0] and d^2 in f64 (the shift keeps
// sum(d^2)/n - mean(d)^2 free of cancellation when the mean is large), then one read and write.
static void norm_row(const float *x, float *y, const float *w, const float *b, int64_t n,
                     double eps, bool rms, int hint)
{
    bool stream = hint & CPU_FAST_STREAM;
    /* with CPU_FAST_BIG the next row streams in during the output pass, a line per 16 floats, so
       the next row's statistics pass does not start from memory */
    const float *nx = cpu_fast_next_row(x, n, hint);
    double k = rms ? 0.0 : (double)x[0];
    __m256d kv = _mm256_set1_pd(k), all = _mm256_castsi256_pd(_mm256_set1_epi64x(-1));
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, q0 = s0, q1 = s0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        acc_moments(&s0, &s1, &q0, &q1, _mm256_loadu_ps(x + i), kv, all, all);
    if (i < n) {
        __m256i m = tail_mask(n - i);
        __m256d m0 = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(m)));
        __m256d m1 = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_extracti128_si256(m, 1)));
        acc_moments(&s0, &s1, &q0, &q1, _mm256_maskload_ps(x + i, m), kv, m0, m1);
    }
    double sd = hsum_pd(_mm256_add_pd(s0, s1)) / (double)n;
    double var = hsum_pd(_mm256_add_pd(q0, q1)) / (double)n;
    double mean = 0;
    if (!rms) {
        mean = k + sd;
        var -= sd * sd;
        if (var < 0) var = 0;
    }
    __m256 mf = _mm256_set1_ps((float)mean), rs = _mm256_set1_ps((float)(1.0 / sqrt(var + eps)));
    i = 0;
    if (stream) {
        int64_t h = head_len(y, n);
        if (h) {
            __m256i m = tail_mask(h);
            _mm256_maskstore_ps(y, m, norm_masked(x, w, b, 0, m, mf, rs));
        }
        for (i = h; i + 8 <= n; i += 8) {
            if (nx && ((i - h) & 15) == 0) _mm_prefetch((const char *)(nx + i), _MM_HINT_T0);
            _mm256_stream_ps(y + i, norm_full(x, w, b, i, mf, rs));
        }
    } else {
        for (; i + 8 <= n; i += 8) {
            if (nx && (i & 15) == 0) _mm_prefetch((const char *)(nx + i), _MM_HINT_T0);
            _mm256_storeu_ps(y + i, norm_full(x, w, b, i, mf, rs));
        }
    }
    if (i < n) {
        __m256i m = tail_mask(n - i);
        _mm256_maskstore_ps(y + i, m, norm_masked(x, w, b, i, m, mf, rs));
    }
}

/* The f32 sum of x[0, 1024) over four accumulators (32 values per lane each): one add per
 * vector instead of two conversions and two f64 adds, so the loop keeps up with memory; no
 * software prefetch, which gained nothing here. */
static inline __m256 block_sum(const float *x)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int k = 0; k < 1024; k += 32) {
        a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + k));
        a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + k + 8));
        a2 = _mm256_add_ps(a2, _mm256_loadu_ps(x + k + 16));
        a3 = _mm256_add_ps(a3, _mm256_loadu_ps(x + k + 24));
    }
    return _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
}

/* The sum of x[0, n): blocks of 1024 floats in f32, each block's vector added in f64, then the
 * tail in f64, in a fixed order. */
double cpu_sum_f32_avx2(const float *x, int64_t n)
{
    __m256d d0 = _mm256_setzero_pd(), d1 = d0;
    int64_t i = 0;
    for (; i + 1024 <= n; i += 1024) acc_pd(&d0, &d1, block_sum(x + i));
    for (; i < n; i += 8) acc_pd(&d0, &d1, _mm256_maskload_ps(x + i, tail_mask(n - i)));
    return hsum_pd(_mm256_add_pd(d0, d1));
}

int64_t cpu_find_past_f32_avx2(const float *x, int64_t from, int64_t n, float t, bool desc)
{
    __m256 tv = _mm256_set1_ps(t);
    /* "not <=" and "not >=" are true for NaN lanes as well */
    int64_t i = from;
    for (; i + 16 <= n; i += 16) {
        __m256 a = desc ? _mm256_cmp_ps(_mm256_loadu_ps(x + i), tv, _CMP_NLE_UQ)
                        : _mm256_cmp_ps(_mm256_loadu_ps(x + i), tv, _CMP_NGE_UQ);
        __m256 c = desc ? _mm256_cmp_ps(_mm256_loadu_ps(x + i + 8), tv, _CMP_NLE_UQ)
                        : _mm256_cmp_ps(_mm256_loadu_ps(x + i + 8), tv, _CMP_NGE_UQ);
        unsigned m = (unsigned)_mm256_movemask_ps(a) | (unsigned)_mm256_movemask_ps(c) << 8;
        if (m) return i + __builtin_ctz(m);
    }
    for (; i < n; i++)
        if (desc ? !(x[i] <= t) : !(x[i] >= t)) return i;
    return n;
}

/* The top k of a row with G = 8 nv groups (k <= G <= n). */
static inline __attribute__((always_inline)) bool
topk_row(const float *x, int64_t n, int64_t k, float *val, int64_t *idx, bool desc, int nv)
{
    /* 1. the best of G interleaved groups (element i in group i % G, NaNs passed over): the
          k-th best of those G values is reached by k elements (one per group), so every element
          of the top k is at least as good as it */
    const __m256 init = _mm256_set1_ps(desc ? -INFINITY : INFINITY);
    __m256 a[4];
    for (int r = 0; r < nv; r++) a[r] = init;
    int64_t i = 0;
    for (; i + 8 * nv <= n; i += 8 * nv)
        for (int r = 0; r < nv; r++) {
            __m256 v = _mm256_loadu_ps(x + i + 8 * r);
            a[r] = desc ? _mm256_max_ps(v, a[r]) : _mm256_min_ps(v, a[r]);
        }
    float g[32];
    for (int r = 0; r < nv; r++) _mm256_storeu_ps(g + 8 * r, a[r]);
    for (; i < n; i++) {
        int64_t r = i % (8 * nv);
        if (desc ? x[i] > g[r] : x[i] < g[r]) g[r] = x[i];
    }
    for (int r = 0; r < nv; r++) a[r] = _mm256_loadu_ps(g + 8 * r);
    /* t = the k-th best of g: the worst g[r] with fewer than k values strictly better */
    float t = desc ? INFINITY : -INFINITY;
    for (int r = 0; r < 8 * nv; r++) {
        __m256 gr = _mm256_set1_ps(g[r]);
        int better = 0;
        for (int q = 0; q < nv; q++)
            better += __builtin_popcount((unsigned)_mm256_movemask_ps(
                desc ? _mm256_cmp_ps(a[q], gr, _CMP_GT_OQ) : _mm256_cmp_ps(a[q], gr, _CMP_LT_OQ)));
        if (better < k) t = desc ? (g[r] < t ? g[r] : t) : (g[r] > t ? g[r] : t);
    }
    /* 2. the elements at least as good as t (and NaNs), in index order, into the buffer */
    __m256 tv = _mm256_set1_ps(t);
    int64_t cnt = 0;
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        /* "not <" and "not >" are true for NaN lanes as well */
        unsigned m = (unsigned)_mm256_movemask_ps(desc ? _mm256_cmp_ps(v, tv, _CMP_NLT_UQ)
                                                       : _mm256_cmp_ps(v, tv, _CMP_NGT_UQ));
        for (; m; m &= m - 1) {
            int64_t e = i + __builtin_ctz(m);
            if (!cpu_topk_insert(x[e], e, val, idx, &cnt, k, desc)) return false;
        }
    }
    for (; i < n; i++)
        if (!(desc ? x[i] < t : x[i] > t) && !cpu_topk_insert(x[i], i, val, idx, &cnt, k, desc))
            return false;
    return cnt == k; /* always (k elements reach t); were t ever too high, the scalar path */
}

/* G, the groups of the first pass: the smallest of 8, 16, 32 that is at least k, not more: the
 * bound's k-th-best search costs G^2 / 8 compares, more than the extra candidates it saves
 * (bench/RESULTS.md, evidence section). */
bool cpu_topk_row_f32_avx2(const float *x, int64_t n, int64_t k, bool desc, float *val,
                           int64_t *idx)
{
    if (k < 1 || k > 32 || n < 32) return false;
    if (k <= 8)
        return desc ? topk_row(x, n, k, val, idx, true, 1) : topk_row(x, n, k, val, idx, false, 1);
    if (k <= 16)
        return desc ? topk_row(x, n, k, val, idx, true, 2) : topk_row(x, n, k, val, idx, false, 2);
    return desc ? topk_row(x, n, k, val, idx, true, 4) : topk_row(x, n, k, val, idx, false, 4);
}

/* (ar + i ai) * (wr + i wi) over 4 lanes. */
static inline void cmul(__m256d ar, __m256d ai, __m256d wr, __m256d wi, __m256d *r, __m256d *i)
{
    *r = _mm256_fmsub_pd(ar, wr, _mm256_mul_pd(ai, wi));
    *i = _mm256_fmadd_pd(ar, wi, _mm256_mul_pd(ai, wr));
}

/* Span-h butterflies for k in [k0, k1) of one block of 2h at re/im (w: the span's twiddles). */
static inline void span2(double *re, double *im, const double *wr, const double *wi, int64_t h,
                         int64_t k0, int64_t k1)
{
    int64_t k = k0;
    for (; k + 4 <= k1; k += 4) {
        __m256d tr, ti;
        cmul(_mm256_loadu_pd(re + k + h), _mm256_loadu_pd(im + k + h), _mm256_loadu_pd(wr + k),
             _mm256_loadu_pd(wi + k), &tr, &ti);
        __m256d ur = _mm256_loadu_pd(re + k), ui = _mm256_loadu_pd(im + k);
        _mm256_storeu_pd(re + k, _mm256_add_pd(ur, tr));
        _mm256_storeu_pd(im + k, _mm256_add_pd(ui, ti));
        _mm256_storeu_pd(re + k + h, _mm256_sub_pd(ur, tr));
        _mm256_storeu_pd(im + k + h, _mm256_sub_pd(ui, ti));
    }
    for (; k < k1; k++) {
        double vr = re[k + h], vi = im[k + h];
        double tr = vr * wr[k] - vi * wi[k], ti = vr * wi[k] + vi * wr[k];
        double ur = re[k], ui = im[k];
        re[k] = ur + tr, im[k] = ui + ti;
        re[k + h] = ur - tr, im[k + h] = ui - ti;
    }
}

void cpu_fft_pass2_avx2(double *re, double *im, const double *twr, const double *twi, int64_t h,
                        int64_t t0, int64_t t1)
{
    while (t0 < t1) {
        int64_t blk = t0 / h, k0 = t0 % h, k1 = t1 - blk * h < h ? t1 - blk * h : h;
        span2(re + blk * 2 * h, im + blk * 2 * h, twr + h, twi + h, h, k0, k1);
        t0 = blk * h + k1;
    }
}

/* Spans h and 2h at once for k in [k0, k1) of one block of 4h; scalar lanes for a ragged
 * range go through two span2 calls' worth of arithmetic per point, as the portable pass. */
static inline void span4(double *re, double *im, const double *twr, const double *twi, int64_t h,
                         int64_t k0, int64_t k1)
{
    const double *w1r = twr + h, *w1i = twi + h, *w2r = twr + 2 * h, *w2i = twi + 2 * h;
    int64_t k = k0;
    for (; k + 4 <= k1; k += 4) {
        __m256d wr = _mm256_loadu_pd(w1r + k), wi = _mm256_loadu_pd(w1i + k);
        __m256d t1r, t1i, t3r, t3i;
        cmul(_mm256_loadu_pd(re + k + h), _mm256_loadu_pd(im + k + h), wr, wi, &t1r, &t1i);
        cmul(_mm256_loadu_pd(re + k + 3 * h), _mm256_loadu_pd(im + k + 3 * h), wr, wi, &t3r, &t3i);
        __m256d a0r = _mm256_loadu_pd(re + k), a0i = _mm256_loadu_pd(im + k);
        __m256d a2r = _mm256_loadu_pd(re + k + 2 * h), a2i = _mm256_loadu_pd(im + k + 2 * h);
        __m256d b0r = _mm256_add_pd(a0r, t1r), b0i = _mm256_add_pd(a0i, t1i);
        __m256d b1r = _mm256_sub_pd(a0r, t1r), b1i = _mm256_sub_pd(a0i, t1i);
        __m256d b2r = _mm256_add_pd(a2r, t3r), b2i = _mm256_add_pd(a2i, t3i);
        __m256d b3r = _mm256_sub_pd(a2r, t3r), b3i = _mm256_sub_pd(a2i, t3i);
        __m256d t2r, t2i, t4r, t4i;
        cmul(b2r, b2i, _mm256_loadu_pd(w2r + k), _mm256_loadu_pd(w2i + k), &t2r, &t2i);
        cmul(b3r, b3i, _mm256_loadu_pd(w2r + k + h), _mm256_loadu_pd(w2i + k + h), &t4r, &t4i);
        _mm256_storeu_pd(re + k, _mm256_add_pd(b0r, t2r));
        _mm256_storeu_pd(im + k, _mm256_add_pd(b0i, t2i));
        _mm256_storeu_pd(re + k + 2 * h, _mm256_sub_pd(b0r, t2r));
        _mm256_storeu_pd(im + k + 2 * h, _mm256_sub_pd(b0i, t2i));
        _mm256_storeu_pd(re + k + h, _mm256_add_pd(b1r, t4r));
        _mm256_storeu_pd(im + k + h, _mm256_add_pd(b1i, t4i));
        _mm256_storeu_pd(re + k + 3 * h, _mm256_sub_pd(b1r, t4r));
        _mm256_storeu_pd(im + k + 3 * h, _mm256_sub_pd(b1i, t4i));
    }
    if (k < k1) { /* the ragged end: span h at k and k + 2h, then span 2h at k and k + h */
        span2(re, im, w1r, w1i, h, k, k1);
        span2(re + 2 * h, im + 2 * h, w1r, w1i, h, k, k1);
        span2(re, im, w2r, w2i, 2 * h, k, k1);
        span2(re, im, w2r, w2i, 2 * h, k + h, k1 + h);
    }
}

void cpu_fft_pass4_avx2(double *re, double *im, const double *twr, const double *twi, int64_t h,
                        int64_t t0, int64_t t1)
{
    while (t0 < t1) {
        int64_t blk = t0 / h, k0 = t0 % h, k1 = t1 - blk * h < h ? t1 - blk * h : h;
        span4(re + blk * 4 * h, im + blk * 4 * h, twr, twi, h, k0, k1);
        t0 = blk * h + k1;
    }
}

/* Lanes where a comes before b: desc, a > b or a is NaN and b is not; else a < b or b is NaN
 * and a is not (the sort's order with NaN as the largest). */
static inline __m256 before(__m256 a, __m256 b, bool desc)
{
    __m256 an = _mm256_cmp_ps(a, a, _CMP_UNORD_Q), bn = _mm256_cmp_ps(b, b, _CMP_UNORD_Q);
    if (desc) return _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_GT_OQ), _mm256_andnot_ps(bn, an));
    return _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_LT_OQ), _mm256_andnot_ps(an, bn));
}

void cpu_col_top1_avx2(const float *x, int64_t n, int64_t stride, int64_t w, float *v, int64_t *ix,
                       bool desc)
{
    int64_t j = 0;
    for (; j + 8 <= w; j += 8) {
        __m256 best = _mm256_loadu_ps(x + j);
        __m256i at = _mm256_setzero_si256();
        for (int64_t i = 1; i < n; i++) {
            __m256 a = _mm256_loadu_ps(x + i * stride + j);
            __m256 take = before(a, best, desc);
            best = _mm256_blendv_ps(best, a, take);
            at = _mm256_castps_si256(_mm256_blendv_ps(
                _mm256_castsi256_ps(at), _mm256_castsi256_ps(_mm256_set1_epi32((int)i)), take));
        }
        _mm256_storeu_ps(v + j, best);
        _mm256_storeu_si256((__m256i *)(ix + j), _mm256_cvtepi32_epi64(_mm256_castsi256_si128(at)));
        _mm256_storeu_si256((__m256i *)(ix + j + 4),
                            _mm256_cvtepi32_epi64(_mm256_extracti128_si256(at, 1)));
    }
    for (; j < w; j++) {
        float best = x[j];
        int64_t at = 0;
        for (int64_t i = 1; i < n; i++) {
            float a = x[i * stride + j];
            bool take = desc ? (a > best || (a != a && best == best))
                             : (a < best || (best != best && a == a));
            if (take) best = a, at = i;
        }
        v[j] = best;
        ix[j] = at;
    }
}

void cpu_mask_fill32_avx2(uint32_t *o, const uint32_t *x, const uint8_t *m, uint32_t f, int64_t n)
{
    __m256i fv = _mm256_set1_epi32((int)f), zero = _mm256_setzero_si256();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i mb = _mm_loadl_epi64((const __m128i *)(m + i));
        /* all ones where m[i] == 0: those lanes keep x */
        __m256i keep = _mm256_cmpeq_epi32(_mm256_cvtepu8_epi32(mb), zero);
        __m256i xv = _mm256_loadu_si256((const __m256i *)(x + i));
        _mm256_storeu_si256((__m256i *)(o + i), _mm256_blendv_epi8(fv, xv, keep));
    }
    for (; i < n; i++) o[i] = m[i] ? f : x[i];
}

void cpu_threshold_bwd32_avx2(float *o, const float *g, const float *y, float t, int64_t n)
{
    __m256 tv = _mm256_set1_ps(t);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        /* all ones where y <= t (ordered: NaN keeps g); and-not leaves +0 there */
        __m256 drop = _mm256_cmp_ps(_mm256_loadu_ps(y + i), tv, _CMP_LE_OQ);
        _mm256_storeu_ps(o + i, _mm256_andnot_ps(drop, _mm256_loadu_ps(g + i)));
    }
    for (; i < n; i++) {
        uint32_t b;
        memcpy(&b, g + i, sizeof b);
        b = y[i] <= t ? 0u : b;
        memcpy(o + i, &b, sizeof b);
    }
}

/* The gradient through one row of softmax (o = y (g - sum(g y))) or log-softmax (o = g - exp(y)
 * sum(g)): the f32 products (or g) added in f64, the outputs in f32; exp as softmax's (y <= 88:
 * log-softmax outputs are <= 0). */
void cpu_softmax_bw_row_avx2(const float *y, const float *g, float *o, int64_t n, bool lg)
{
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 gv = _mm256_loadu_ps(g + i);
        acc_pd(&s0, &s1, lg ? gv : _mm256_mul_ps(gv, _mm256_loadu_ps(y + i)));
    }
    if (i < n) {
        __m256i m = tail_mask(n - i);
        __m256 gv = _mm256_maskload_ps(g + i, m); /* zeros past the end */
        acc_pd(&s0, &s1, lg ? gv : _mm256_mul_ps(gv, _mm256_maskload_ps(y + i, m)));
    }
    __m256 sv = _mm256_set1_ps((float)hsum_pd(_mm256_add_pd(s0, s1)));
    for (i = 0; i < n; i += 8) {
        __m256i m = tail_mask(n - i);
        __m256 yv = _mm256_maskload_ps(y + i, m), gv = _mm256_maskload_ps(g + i, m);
        __m256 r = lg ? _mm256_fnmadd_ps(exp256_nonpos(yv), sv, gv)
                      : _mm256_mul_ps(yv, _mm256_sub_ps(gv, sv));
        _mm256_maskstore_ps(o + i, m, r);
    }
}

const cpu_fast_ops cpu_fast_avx2_ops = {
    .isa = "avx2",
    .gelu = gelu,
    .softmax_row = softmax_row,
    .norm_row = norm_row,
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
