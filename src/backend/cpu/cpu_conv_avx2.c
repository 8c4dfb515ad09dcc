/* AVX2 + FMA register kernel of the direct stride-1 convolution (cpu_conv.c): a 6 x 16 tile of
 * output channels x positions over the whole reduction, B read straight from the padded image
 * (row k of B is the 16 floats at b + off[k]) instead of from packed im2col panels. */
#include <immintrin.h>

#include "cpu_avx2.h"
#include "cpu_conv_direct.h"

void cpu_conv_direct_6x16_avx2(int64_t K, const float *Ap, const float *b, const int64_t *off,
                               float *C, int64_t ldc, int mr, int nr, bool accumulate)
{
    /* twelve named accumulators: the tile stays in registers */
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int64_t k = 0; k < K; k++, Ap += 6) {
        const float *q = b + off[k];
        __m256 b0 = _mm256_loadu_ps(q), b1 = _mm256_loadu_ps(q + 8), a;
        a = _mm256_broadcast_ss(Ap + 0);
        c00 = _mm256_fmadd_ps(a, b0, c00);
        c01 = _mm256_fmadd_ps(a, b1, c01);
        a = _mm256_broadcast_ss(Ap + 1);
        c10 = _mm256_fmadd_ps(a, b0, c10);
        c11 = _mm256_fmadd_ps(a, b1, c11);
        a = _mm256_broadcast_ss(Ap + 2);
        c20 = _mm256_fmadd_ps(a, b0, c20);
        c21 = _mm256_fmadd_ps(a, b1, c21);
        a = _mm256_broadcast_ss(Ap + 3);
        c30 = _mm256_fmadd_ps(a, b0, c30);
        c31 = _mm256_fmadd_ps(a, b1, c31);
        a = _mm256_broadcast_ss(Ap + 4);
        c40 = _mm256_fmadd_ps(a, b0, c40);
        c41 = _mm256_fmadd_ps(a, b1, c41);
        a = _mm256_broadcast_ss(Ap + 5);
        c50 = _mm256_fmadd_ps(a, b0, c50);
        c51 = _mm256_fmadd_ps(a, b1, c51);
    }
    __m256 acc[6][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    for (int r = 0; r < mr; r++) {
        float *c = C + r * ldc;
        if (nr == 16) {
            if (accumulate) {
                acc[r][0] = _mm256_add_ps(_mm256_loadu_ps(c), acc[r][0]);
                acc[r][1] = _mm256_add_ps(_mm256_loadu_ps(c + 8), acc[r][1]);
            }
            _mm256_storeu_ps(c, acc[r][0]);
            _mm256_storeu_ps(c + 8, acc[r][1]);
            continue;
        }
        float t[16];
        _mm256_storeu_ps(t, acc[r][0]);
        _mm256_storeu_ps(t + 8, acc[r][1]);
        for (int j = 0; j < nr; j++) c[j] = accumulate ? c[j] + t[j] : t[j];
    }
}

void cpu_conv_direct_small_avx2(const float *xrow, const int64_t *off, int K, const float *wp,
                                const float *bias, int64_t Co, int64_t OW, float *y, int64_t ys)
{
    for (int64_t co0 = 0; co0 < Co; co0 += 8, wp += 8 * K) {
        int cn = Co - co0 < 8 ? (int)(Co - co0) : 8;
        for (int64_t ow = 0; ow < OW; ow += 8) {
            int m = OW - ow < 8 ? (int)(OW - ow) : 8;
            __m256i lm = cpu_avx2_lanes(m);
            /* eight named accumulators: they stay in registers */
            __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0,
                   c7 = c0;
            const float *w = wp;
            for (int k = 0; k < K; k++, w += 8) {
                const float *q = xrow + off[k] + ow;
                __m256 xv = m == 8 ? _mm256_loadu_ps(q) : _mm256_maskload_ps(q, lm);
                c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(w + 0), xv, c0);
                c1 = _mm256_fmadd_ps(_mm256_broadcast_ss(w + 1), xv, c1);
                c2 = _mm256_fmadd_ps(_mm256_broadcast_ss(w + 2), xv, c2);
                c3 = _mm256_fmadd_ps(_mm256_broadcast_ss(w + 3), xv, c3);
                c4 = _mm256_fmadd_ps(_mm256_broadcast_ss(w + 4), xv, c4);
                c5 = _mm256_fmadd_ps(_mm256_broadcast_ss(w + 5), xv, c5);
                c6 = _mm256_fmadd_ps(_mm256_broadcast_ss(w + 6), xv, c6);
                c7 = _mm256_fmadd_ps(_mm256_broadcast_ss(w + 7), xv, c7);
            }
            __m256 acc[8] = {c0, c1, c2, c3, c4, c5, c6, c7};
            for (int c = 0; c < cn; c++) {
                __m256 v = bias ? _mm256_add_ps(_mm256_set1_ps(bias[co0 + c]), acc[c]) : acc[c];
                float *o = y + (co0 + c) * ys + ow;
                if (m == 8)
                    _mm256_storeu_ps(o, v);
                else
                    _mm256_maskstore_ps(o, lm, v);
            }
        }
    }
}

void cpu_conv_direct_out_avx2(const float *t, float *o, int64_t n, float bias)
{
    __m256 v = _mm256_set1_ps(bias);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, _mm256_add_ps(v, _mm256_loadu_ps(t + i)));
    if (i < n) {
        __m256i m = cpu_avx2_lanes(n - i);
        _mm256_maskstore_ps(o + i, m, _mm256_add_ps(v, _mm256_maskload_ps(t + i, m)));
    }
}

void cpu_conv_gather2_avx2(const float *s, float *d, int64_t n)
{
    int64_t o = 0;
    for (; o + 8 <= n; o += 8) _mm256_storeu_ps(d + o, cpu_avx2_even8(s + 2 * o));
    for (; o < n; o++) d[o] = s[2 * o];
}

/* Eight rows of m <= 8 floats (zeros for rows >= nr; nothing read past a row's m), transposed:
 * t[i] = (r[0][i], ..., r[7][i]) for i < m. */
static inline void load_t8(const float *const *r, int nr, int m, __m256 *t)
{
    __m256 a[8];
    if (m == 8) {
        for (int c = 0; c < 8; c++) a[c] = c < nr ? _mm256_loadu_ps(r[c]) : _mm256_setzero_ps();
    } else {
        __m256i lm = cpu_avx2_lanes(m);
        for (int c = 0; c < 8; c++)
            a[c] = c < nr ? _mm256_maskload_ps(r[c], lm) : _mm256_setzero_ps();
    }
    cpu_avx2_transpose8(a, t);
}

/* As load_t8 for rows read at step 2: r[c][0], r[c][2], ..., r[c][2 (m - 1)] (nothing read past
 * the last). */
static inline void load_t8_s2(const float *const *r, int nr, int m, __m256 *t)
{
    __m256 a[8];
    for (int c = 0; c < 8; c++) {
        if (c >= nr) {
            a[c] = _mm256_setzero_ps();
        } else if (m == 8) {
            a[c] = cpu_avx2_even8(r[c]);
        } else {
            float v[8] = {0};
            for (int i = 0; i < m; i++) v[i] = r[c][2 * i];
            a[c] = _mm256_loadu_ps(v);
        }
    }
    cpu_avx2_transpose8(a, t);
}

void cpu_conv_wgrad_pack_avx2(const float *b, int64_t step, const int64_t *off, int n, int w,
                              int64_t run, float *dst)
{
    int tail = w % 8;
    __m256i tm = cpu_avx2_lanes(tail);
    for (int64_t k = 0; k < run; k += 8) {
        int m = run - k < 8 ? (int)(run - k) : 8;
        for (int g = 0; g < w; g += 8) {
            const float *r[8];
            int nr = n - g < 8 ? n - g : 8;
            for (int c = 0; c < nr; c++) r[c] = b + off[g + c] + k * step;
            __m256 t[8];
            if (step == 2)
                load_t8_s2(r, nr, m, t);
            else
                load_t8(r, nr, m, t);
            if (g + 8 <= w) {
                for (int i = 0; i < m; i++) _mm256_storeu_ps(dst + (k + i) * w + g, t[i]);
            } else if (w < 8) {
                /* one narrow group, rows ascending, each stored 8 wide: a row's spill into the
                 * next row is overwritten by that row's own store; only the run's last row is
                 * masked (masked stores are slow on some cores) */
                int last = k + m == run ? m - 1 : m;
                for (int i = 0; i < last; i++) _mm256_storeu_ps(dst + (k + i) * w, t[i]);
                if (last < m) _mm256_maskstore_ps(dst + (k + last) * w, tm, t[last]);
            } else {
                for (int i = 0; i < m; i++) _mm256_maskstore_ps(dst + (k + i) * w + g, tm, t[i]);
            }
        }
    }
}

void cpu_conv_wgrad_copy_avx2(const float *b, int64_t step, const int64_t *off, int n, int w,
                              int64_t run, float *dst)
{
    for (int64_t r = 0; r < run; r++, b += step, dst += w) {
        int g = 0;
        for (; g < n; g += 8) _mm256_storeu_ps(dst + g, _mm256_loadu_ps(b + off[g]));
        for (; g < w; g += 8) _mm256_storeu_ps(dst + g, _mm256_setzero_ps());
    }
}

void cpu_conv_wgrad_nhwc_row_avx2(const float *s, int64_t cs, int64_t C, int64_t W, float *d)
{
    for (int64_t w0 = 0; w0 < W; w0 += 8) {
        int m = W - w0 < 8 ? (int)(W - w0) : 8;
        __m256i lm = cpu_avx2_lanes(m);
        for (int64_t c0 = 0; c0 < C; c0 += 8) {
            __m256 a[8];
            if (m == 8)
                for (int c = 0; c < 8; c++) a[c] = _mm256_loadu_ps(s + (c0 + c) * cs + w0);
            else
                for (int c = 0; c < 8; c++) a[c] = _mm256_maskload_ps(s + (c0 + c) * cs + w0, lm);
            __m256 t[8];
            cpu_avx2_transpose8(a, t);
            for (int i = 0; i < m; i++) _mm256_storeu_ps(d + (w0 + i) * C + c0, t[i]);
        }
    }
}

/* The lanes of v added in a fixed order. */
static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

/* cpu_conv_wgrad_dots_avx2 for a J known here, so the J accumulators stay in registers. */
static inline __attribute__((always_inline)) void
dots_j(const float *gy, int64_t sn, int64_t sc, const float *xp, int64_t item, int64_t Wp,
       const int64_t *off, const int J, int64_t N, int64_t OH, int64_t OW, int64_t co, float *gw)
{
    __m256 acc[12];
    int64_t o[12];
#pragma GCC unroll 12
    for (int j = 0; j < J; j++) acc[j] = _mm256_setzero_ps(), o[j] = off[j];
    int64_t tail = OW % 8;
    __m256i tm = cpu_avx2_lanes(tail);
    for (int64_t n = 0; n < N; n++)
        for (int64_t oh = 0; oh < OH; oh++) {
            const float *g = gy + n * sn + co * sc + oh * OW, *x = xp + n * item + oh * Wp;
            int64_t ow = 0;
            for (; ow + 8 <= OW; ow += 8) {
                __m256 gv = _mm256_loadu_ps(g + ow);
#pragma GCC unroll 12
                for (int j = 0; j < J; j++)
                    acc[j] = _mm256_fmadd_ps(gv, _mm256_loadu_ps(x + o[j] + ow), acc[j]);
            }
            if (tail) {
                __m256 gv = _mm256_maskload_ps(g + ow, tm);
#pragma GCC unroll 12
                for (int j = 0; j < J; j++)
                    acc[j] = _mm256_fmadd_ps(gv, _mm256_maskload_ps(x + o[j] + ow, tm), acc[j]);
            }
        }
#pragma GCC unroll 12
    for (int j = 0; j < J; j++) gw[co * J + j] = hsum8(acc[j]);
}

void cpu_conv_wgrad_dots_avx2(const float *gy, int64_t sn, int64_t sc, const float *xp,
                              int64_t item, int64_t Wp, const int64_t *off, int J, int64_t N,
                              int64_t OH, int64_t OW, int64_t co0, int64_t co1, float *gw)
{
    for (int64_t co = co0; co < co1; co++) switch (J) {
#define DOTS_CASE(n)                                                                               \
    case n: dots_j(gy, sn, sc, xp, item, Wp, off, n, N, OH, OW, co, gw); break;
            DOTS_CASE(1)
            DOTS_CASE(2)
            DOTS_CASE(3)
            DOTS_CASE(4)
            DOTS_CASE(5)
            DOTS_CASE(6)
            DOTS_CASE(7)
            DOTS_CASE(8)
            DOTS_CASE(9)
            DOTS_CASE(10)
            DOTS_CASE(11)
            DOTS_CASE(12)
#undef DOTS_CASE
        default: break;
        }
}

/* Even and odd elements of the 16 floats at p: e[k] = p[2k], o[k] = p[2k + 1]. */
static inline void deint16(const float *p, __m256 *e, __m256 *o)
{
    __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
    *e = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
    *o = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
}

void cpu_wino_in_avx2(const float *d, int64_t Wq, float *v, int64_t xs)
{
    __m256 r[4][4]; /* r[i][e]: row transform of window column e, for 8 tiles */
    __m256 c[4][4]; /* c[row][e]: the windows' column e of image row `row` */
    for (int i = 0; i < 4; i++) {
        deint16(d + i * Wq, &c[i][0], &c[i][1]);
        deint16(d + i * Wq + 2, &c[i][2], &c[i][3]);
    }
    for (int e = 0; e < 4; e++) {
        r[0][e] = _mm256_sub_ps(c[0][e], c[2][e]);
        r[1][e] = _mm256_add_ps(c[1][e], c[2][e]);
        r[2][e] = _mm256_sub_ps(c[2][e], c[1][e]);
        r[3][e] = _mm256_sub_ps(c[1][e], c[3][e]);
    }
    for (int i = 0; i < 4; i++) {
        _mm256_storeu_ps(v + (4 * i + 0) * xs, _mm256_sub_ps(r[i][0], r[i][2]));
        _mm256_storeu_ps(v + (4 * i + 1) * xs, _mm256_add_ps(r[i][1], r[i][2]));
        _mm256_storeu_ps(v + (4 * i + 2) * xs, _mm256_sub_ps(r[i][2], r[i][1]));
        _mm256_storeu_ps(v + (4 * i + 3) * xs, _mm256_sub_ps(r[i][1], r[i][3]));
    }
}

/* n < 16 floats of v at p (masked store). */
static inline void store_n(float *p, __m256 v, int n)
{
    __m256i m = cpu_avx2_lanes(n);
    _mm256_maskstore_ps(p, m, v);
}

/* One output row of 8 tiles: a (column 0 of each tile) and b (column 1) interleaved, the first
 * ncols of the 16 floats stored at y. */
static inline void store_pairs(float *y, __m256 a, __m256 b, int ncols)
{
    __m256 lo = _mm256_unpacklo_ps(a, b), hi = _mm256_unpackhi_ps(a, b);
    __m256 f = _mm256_permute2f128_ps(lo, hi, 0x20), g = _mm256_permute2f128_ps(lo, hi, 0x31);
    if (ncols >= 16) {
        _mm256_storeu_ps(y, f);
        _mm256_storeu_ps(y + 8, g);
    } else if (ncols >= 8) { /* the last 8 columns again, overlapping: no masked store */
        float t[16];
        _mm256_storeu_ps(t, f);
        _mm256_storeu_ps(t + 8, g);
        _mm256_storeu_ps(y, f);
        _mm256_storeu_ps(y + ncols - 8, _mm256_loadu_ps(t + ncols - 8));
    } else
        store_n(y, f, ncols);
}

void cpu_wino_out_avx2(const float *m, int64_t xs, float bias, float *y, int64_t ys, bool row2,
                       int ncols)
{
    __m256 s[2][4];
    for (int e = 0; e < 4; e++) {
        __m256 m0 = _mm256_loadu_ps(m + e * xs), m1 = _mm256_loadu_ps(m + (4 + e) * xs);
        __m256 m2 = _mm256_loadu_ps(m + (8 + e) * xs), m3 = _mm256_loadu_ps(m + (12 + e) * xs);
        s[0][e] = _mm256_add_ps(_mm256_add_ps(m0, m1), m2);
        s[1][e] = _mm256_sub_ps(_mm256_sub_ps(m1, m2), m3);
    }
    __m256 b = _mm256_set1_ps(bias);
    for (int i = 0; i < (row2 ? 2 : 1); i++) {
        __m256 y0 = _mm256_add_ps(b, _mm256_add_ps(_mm256_add_ps(s[i][0], s[i][1]), s[i][2]));
        __m256 y1 = _mm256_add_ps(b, _mm256_sub_ps(_mm256_sub_ps(s[i][1], s[i][2]), s[i][3]));
        store_pairs(y + i * ys, y0, y1, ncols);
    }
}
