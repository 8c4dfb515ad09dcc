/* Values-only f32 max pooling in two passes (the max of a window is the max over its columns of
 * the max over its rows): for each output row, a vertical pass takes the max over the window's
 * valid input rows at every input column the windows use, into a buffer padded with -inf where
 * windows leave the input, and a horizontal pass takes the max over kw buffer columns per output.
 * A k x k window then costs about 2k operations per output instead of k^2, and there are no
 * border cases. Large outputs are stored around the caches (stream stores). Channels-last inputs
 * take consecutive output rows in pairs where sh == dh and both rows' windows lie inside the
 * input: the two windows share kh - 1 rows, which the pair reads once (kh + 1 row loads for two
 * rows instead of 2 kh; 2 x 512 x 512 x 128, k5 s2 d2: 18.0 -> 15.4 ms on 2 Zen 3 cores, medians
 * of 6 alternated runs). Pairs follow the thread split, values do not (a max is exact).
 *
 * Exactness: where a window holds no NaN and no -0, its maximum does not depend on the order of
 * the taps, so these kernels give the row-by-row kernels' values bit for bit. The vertical pass
 * checks its input rows for both (a running sum per lane turns NaN on a NaN, or on inf - inf,
 * which only costs a redo; a running signed-integer minimum reaches INT_MIN only at -0), and an
 * output row (rows kernel) or unit (channels-last) whose rows hold either is recomputed by the
 * exact kernels of cpu_pool_avx2.c, which keep the first maximum in window order and the
 * portable kernel's NaN rule. */
#include <immintrin.h>
#include <limits.h>
#include <stdlib.h>

#include "cpu_avx2.h"
#include "cpu_pool_fast.h"

/* The checks of the vertical pass: per-lane running sum and signed-integer minimum. */
typedef struct sep_check {
    __m256 sum;
    __m256i min;
} sep_check;

/* Whether the checked values held a NaN or a -0 (or an inf - inf in the sums). */
static bool check_special(const sep_check *c)
{
    int nan = _mm256_movemask_ps(_mm256_cmp_ps(c->sum, c->sum, _CMP_UNORD_Q));
    int negz = _mm256_movemask_ps(
        _mm256_castsi256_ps(_mm256_cmpeq_epi32(c->min, _mm256_set1_epi32(INT_MIN))));
    return nan || negz;
}

/* Vertical max of n valid rows (rows[a] + j) at 8 columns; the rows' values join the checks
 * through their sum and minimum (one running sum and minimum per call site, kept in registers). */
static ALWAYS_INLINE __m256 vmax8(const float *const *rows, int n, int64_t j, bool full, __m256i m,
                                  sep_check *c)
{
    __m256 best = full ? _mm256_loadu_ps(rows[0] + j) : _mm256_maskload_ps(rows[0] + j, m);
    __m256 sum = best;
    __m256i mn = _mm256_castps_si256(best);
    for (int a = 1; a < n; a++) {
        __m256 v = full ? _mm256_loadu_ps(rows[a] + j) : _mm256_maskload_ps(rows[a] + j, m);
        sum = _mm256_add_ps(sum, v);
        mn = _mm256_min_epi32(mn, _mm256_castps_si256(v));
        best = _mm256_max_ps(v, best);
    }
    c->sum = _mm256_add_ps(c->sum, sum);
    c->min = _mm256_min_epi32(c->min, mn);
    return best;
}

static void check_init(sep_check *c)
{
    c->sum = _mm256_setzero_ps();
    c->min = _mm256_set1_epi32(INT_MAX);
}

/* Elements v[0], v[s], ..., v[7 s] for s = 1 or 2 (v[0 .. 16) readable for s = 2), in order. */
static ALWAYS_INLINE __m256 load_step(const float *v, int64_t s)
{
    if (s == 1) return _mm256_loadu_ps(v);
    __m256 p = _mm256_shuffle_ps(_mm256_loadu_ps(v), _mm256_loadu_ps(v + 8), 0x88);
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(p), 0xD8));
}

/* The horizontal pass of one output row: out[ow] = max over b of V[ow sw + b dw], 8 outputs at
 * a time (V readable well past the last window, so every vector is computed whole). */
static ALWAYS_INLINE void hmax_row(const cpu_maxpool_geom *g, const float *V, float *out,
                                   int64_t sw, bool stream)
{
    int64_t ow = 0;
    for (; ow + 8 <= g->OW; ow += 8) {
        const float *q = V + ow * sw;
        __m256 best = load_step(q, sw);
        for (int64_t b = 1; b < g->kw; b++)
            best = _mm256_max_ps(load_step(q + b * g->dw, sw), best);
        if (stream)
            _mm256_stream_ps(out + ow, best);
        else
            _mm256_storeu_ps(out + ow, best);
    }
    if (ow < g->OW) { /* not vmaskmovps: its stores are slow microcode on some AMD cores */
        const float *q = V + ow * sw;
        __m256 best = load_step(q, sw);
        for (int64_t b = 1; b < g->kw; b++)
            best = _mm256_max_ps(load_step(q + b * g->dw, sw), best);
        float t[8];
        _mm256_storeu_ps(t, best);
        for (int64_t j = 0; ow + j < g->OW; j++) out[ow + j] = t[j];
    }
}

/* Buffer floats of the rows kernel: pw of padding, W columns, then -inf to past the last vector
 * of windows (8 sw + (kw - 1) dw beyond the last vector's start) and 16 floats of slack. */
static int64_t rows_buf_len(const cpu_maxpool_geom *g)
{
    int64_t last = ((g->OW + 7) / 8) * 8 * g->sw + (g->kw - 1) * g->dw + 16;
    int64_t n = g->pw + ((g->W + 7) / 8) * 8;
    return (last > n ? last : n) + 16;
}

bool cpu_maxpool_rows_sep_avx2(const cpu_maxpool_geom *g, int64_t r0, int64_t r1, bool stream)
{
    int64_t len = rows_buf_len(g);
    float *V = malloc(sizeof(float) * (size_t)len);
    if (!V) return false;
    for (int64_t i = 0; i < g->pw; i++) V[i] = -INFINITY;
    bool aligned = (((uintptr_t)g->out | (uintptr_t)(g->OW * 4)) & 31) == 0;
    for (int64_t r = r0; r < r1; r++) {
        int64_t oh = r % g->OH, pl = r / g->OH, n = pl / g->C, c = pl % g->C;
        const float *p = g->x + n * g->x_sn + c * g->x_sc;
        const float *rows[64], *ahead;
        int nv = cpu_maxpool_window_rows_ahead(g, p, oh, rows, &ahead);
        sep_check ck;
        check_init(&ck);
        bool exact = nv <= 0;
        if (!exact) {
            float *Vc = V + g->pw;
            int64_t j = 0;
            for (; j + 8 <= g->W; j += 8) {
                if (ahead && (j & 15) == 0) _mm_prefetch((const char *)(ahead + j), _MM_HINT_T0);
                _mm256_storeu_ps(Vc + j, vmax8(rows, nv, j, true, _mm256_setzero_si256(), &ck));
            }
            if (j < g->W) {
                __m256i m = cpu_avx2_lanes(g->W - j);
                __m256 v = vmax8(rows, nv, j, false, m, &ck);
                _mm256_storeu_ps(
                    Vc + j, _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), v, _mm256_castsi256_ps(m)));
            }
            for (int64_t i = g->pw + g->W; i < len; i++) V[i] = -INFINITY;
            exact = check_special(&ck);
        }
        if (exact) { /* empty windows, over 64 rows, a NaN or a -0: the exact kernel */
            cpu_maxpool_rows_avx2(g, r, r + 1);
            continue;
        }
        float *out = g->out + r * g->OW;
        if (g->sw == 1 && stream && aligned)
            hmax_row(g, V, out, 1, true);
        else if (g->sw == 1)
            hmax_row(g, V, out, 1, false);
        else if (stream && aligned)
            hmax_row(g, V, out, 2, true);
        else
            hmax_row(g, V, out, 2, false);
    }
    if (stream) _mm_sfence();
    free(V);
    return true;
}

/* The vertical pass of one output row of a channels-last input (C % 8 == 0): V[q][C] = the max
 * over the valid rows at input column iw_min + q G (all channels, which lie contiguous), -inf
 * outside the input, the next rows prefetched. false when the rows held a NaN or a -0. */
static bool cl_vertical(const cpu_maxpool_geom *g, const float *const *rows, int nv,
                        const float *ahead, int64_t iw_min, int64_t G, int64_t Q, float *V)
{
    sep_check ck;
    check_init(&ck);
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    for (int64_t q = 0; q < Q; q++) {
        int64_t iw = iw_min + q * G;
        float *vq = V + q * g->C;
        if (iw < 0 || iw >= g->W) {
            for (int64_t h = 0; h < g->C; h += 8) _mm256_storeu_ps(vq + h, ninf);
            continue;
        }
        int64_t off = iw * g->x_sw;
        for (int64_t h = 0; h < g->C; h += 8) {
            if (ahead && (h & 15) == 0) _mm_prefetch((const char *)(ahead + off + h), _MM_HINT_T0);
            _mm256_storeu_ps(vq + h, vmax8(rows, nv, off + h, true, _mm256_setzero_si256(), &ck));
        }
    }
    return !check_special(&ck);
}

/* The vertical pass of two consecutive output rows whose windows share all rows but one each
 * (sh == dh, all kh rows valid for both): rows[0 .. kh] holds the kh + 1 rows, the first kh for
 * the upper output row (into V0) and the last kh for the lower (into V1), so the kh - 1 shared
 * rows are read once; ahead0 and ahead1 (or NULL) are prefetched: the rows the next pair adds. */
static bool cl_vertical2(const cpu_maxpool_geom *g, const float *const *rows, const float *ahead0,
                         const float *ahead1, int64_t iw_min, int64_t G, int64_t Q, float *V0,
                         float *V1)
{
    sep_check ck;
    check_init(&ck);
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    const __m256i none = _mm256_setzero_si256();
    int kh = (int)g->kh;
    for (int64_t q = 0; q < Q; q++) {
        int64_t iw = iw_min + q * G;
        float *v0 = V0 + q * g->C, *v1 = V1 + q * g->C;
        if (iw < 0 || iw >= g->W) {
            for (int64_t h = 0; h < g->C; h += 8) {
                _mm256_storeu_ps(v0 + h, ninf);
                _mm256_storeu_ps(v1 + h, ninf);
            }
            continue;
        }
        int64_t off = iw * g->x_sw;
        for (int64_t h = 0; h < g->C; h += 8) {
            if ((h & 15) == 0) {
                if (ahead0) _mm_prefetch((const char *)(ahead0 + off + h), _MM_HINT_T0);
                if (ahead1) _mm_prefetch((const char *)(ahead1 + off + h), _MM_HINT_T0);
            }
            __m256 mid = vmax8(rows + 1, kh - 1, off + h, true, none, &ck);
            __m256 top = vmax8(rows, 1, off + h, true, none, &ck);
            __m256 bot = vmax8(rows + kh, 1, off + h, true, none, &ck);
            _mm256_storeu_ps(v0 + h, _mm256_max_ps(top, mid));
            _mm256_storeu_ps(v1 + h, _mm256_max_ps(bot, mid));
        }
    }
    return !check_special(&ck);
}

/* The horizontal pass for the channels [c0, c0 + cn) (cn = 8 or 16) of one output row: 16 outputs
 * at a time, the max over kw buffer columns, transposed into the NCHW output planes (out0: the
 * row's start in channel 0's plane). */
static ALWAYS_INLINE void cl_horizontal(const cpu_maxpool_geom *g, const float *V, int64_t c0,
                                        int cn, int64_t sq, int64_t dq, float *out0, bool stream)
{
    int64_t plane = g->OH * g->OW, C = g->C;
    float res[16][16] __attribute__((aligned(32))) = {{0}}; /* [ow][channel] */
    for (int64_t ow0 = 0; ow0 < g->OW; ow0 += 16) {
        int64_t nw = g->OW - ow0 < 16 ? g->OW - ow0 : 16;
        for (int64_t j = 0; j < nw; j++) {
            const float *v = V + (ow0 + j) * sq * C + c0;
            for (int h = 0; h < cn; h += 8) {
                __m256 best = _mm256_loadu_ps(v + h);
                for (int64_t b = 1; b < g->kw; b++)
                    best = _mm256_max_ps(_mm256_loadu_ps(v + b * dq * C + h), best);
                _mm256_store_ps(&res[j][h], best);
            }
        }
        /* 8 channels at a time: both 8-column halves transposed, then each channel's 16
           columns stored back to back (one cache line when aligned, for the stream stores) */
        for (int h = 0; h < cn; h += 8) {
            __m256 t[16];
            for (int i = 0; i < 16; i++) t[i] = _mm256_load_ps(&res[i][h]);
            cpu_avx2_transpose8(t, t);         /* t[l]: channel c0 + h + l, columns 0 .. 7 */
            cpu_avx2_transpose8(t + 8, t + 8); /* t[8 + l]: columns 8 .. 15 */
            for (int l = 0; l < 8; l++) {
                float *o = out0 + (c0 + h + l) * plane + ow0;
                if (nw == 16 && stream) {
                    _mm256_stream_ps(o, t[l]);
                    _mm256_stream_ps(o + 8, t[8 + l]);
                } else if (nw == 16) {
                    _mm256_storeu_ps(o, t[l]);
                    _mm256_storeu_ps(o + 8, t[8 + l]);
                } else {
                    float s[16];
                    _mm256_storeu_ps(s, t[l]);
                    _mm256_storeu_ps(s + 8, t[8 + l]);
                    for (int64_t k = 0; k < nw; k++) o[k] = s[k];
                }
            }
        }
    }
}

/* The horizontal pass of one output row for all channels, 16 (then 8) at a time. */
static void cl_row_out(const cpu_maxpool_geom *g, const float *V, int64_t sq, int64_t dq,
                       float *out0, bool stream)
{
    for (int64_t c0 = 0; c0 < g->C; c0 += 16) {
        int cn = g->C - c0 >= 16 ? 16 : 8;
        if (stream)
            cl_horizontal(g, V, c0, cn, sq, dq, out0, true);
        else
            cl_horizontal(g, V, c0, cn, sq, dq, out0, false);
    }
}

bool cpu_maxpool_cl_sep_avx2(const cpu_maxpool_geom *g, int64_t u0, int64_t u1, bool stream)
{
    int64_t G = cpu_pool_gcd(g->sw, g->dw), iw_min = -g->pw;
    int64_t iw_max = (g->OW - 1) * g->sw - g->pw + (g->kw - 1) * g->dw;
    int64_t Q = (iw_max - iw_min) / G + 1, sq = g->sw / G, dq = g->dw / G;
    /* consecutive output rows in pairs where their windows overlap in all rows but one */
    bool pairs = g->sh == g->dh && g->kh >= 2 && g->kh <= 32;
    float *V = malloc(sizeof(float) * (size_t)(Q * g->C) * (pairs ? 2 : 1));
    if (!V) return false;
    float *V1 = V + Q * g->C;
    int64_t plane = g->OH * g->OW;
    /* a 32-byte aligned out row start for every plane and row: stream stores then apply */
    bool aligned =
        (((uintptr_t)g->out | (uintptr_t)(g->OW * 4) | (uintptr_t)(plane * 4)) & 31) == 0;
    bool st = stream && aligned;
    for (int64_t u = u0; u < u1; u++) {
        int64_t oh = u % g->OH, n = u / g->OH;
        const float *p = g->x + n * g->x_sn;
        float *out0 = g->out + n * g->C * plane + oh * g->OW;
        int64_t top = oh * g->sh - g->ph; /* the upper row's first window row */
        if (pairs && u + 1 < u1 && oh + 1 < g->OH && top >= 0 &&
            top + g->kh * g->dh < g->H) { /* both rows' kh window rows valid */
            const float *rows[33];
            for (int a = 0; a <= (int)g->kh; a++) rows[a] = p + (top + a * g->dh) * g->x_sh;
            int64_t next = top + g->kh * g->dh + g->sh; /* the rows the next pair adds */
            const float *a0 = next < g->H ? p + next * g->x_sh : NULL;
            const float *a1 = next + g->sh < g->H ? p + (next + g->sh) * g->x_sh : NULL;
            if (cl_vertical2(g, rows, a0, a1, iw_min, G, Q, V, V1)) {
                cl_row_out(g, V, sq, dq, out0, st);
                cl_row_out(g, V1, sq, dq, out0 + g->OW, st);
            } else {
                cpu_maxpool_cl_avx2(g, u, u + 2); /* the exact kernel */
            }
            u++;
            continue;
        }
        const float *rows[64], *ahead;
        int nv = cpu_maxpool_window_rows_ahead(g, p, oh, rows, &ahead);
        if (nv <= 0 || !cl_vertical(g, rows, nv, ahead, iw_min, G, Q, V)) {
            cpu_maxpool_cl_avx2(g, u, u + 1); /* the exact kernel */
            continue;
        }
        cl_row_out(g, V, sq, dq, out0, st);
    }
    if (st) _mm_sfence();
    free(V);
    return true;
}
