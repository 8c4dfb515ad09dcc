/* Values-only f32 max pooling in two passes (the max of a window is the max over its columns of
 * the max over its rows): for each output row, a vertical pass takes the max over the window's
 * valid input rows at every input column the windows use, into a buffer padded with -inf where
 * windows leave the input, and a horizontal pass takes the max over kw buffer columns per output.
 * A k x k window then costs about 2k operations per output instead of k^2, and there are no
 * border cases. Large outputs are stored around the caches (stream stores). Channels-last inputs
 * take consecutive output rows in pairs where sh == dh and both rows' windows lie inside the
 * input: the two windows share kh - 1 rows, which the pair reads once (kh + 1 row loads for two
 * rows instead of 2 kh). Pairs follow the thread split, values do not (a max is exact). The
 * channels-last buffers are blocked by 16 channels, read front to back by the horizontal pass,
 * which keeps 8 columns x 8 channels in registers and transposes them into a staging block,
 * stored out per channel with stream stores for whole lines at any row alignment: output rows of
 * odd lengths (254 floats) would otherwise take regular stores, and every output line would be
 * read before it is written.
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

/* Elements v[0], v[s], ..., v[7 s] for s = 1 or 2, in order. */
static ALWAYS_INLINE __m256 load_step(const float *v, int64_t s)
{
    return s == 1 ? _mm256_loadu_ps(v) : cpu_avx2_even8(v);
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

/* The channels-last buffers are blocked by 16 channels (a last block of 8 where C % 16 == 8):
 * channel h of column q at V + h0 Qp + cn q + (h - h0) for its block [h0, h0 + cn) (Qp: the
 * columns and the -inf ones past them), so the horizontal pass reads each block front to back. */
static ALWAYS_INLINE float *vat(float *V, int64_t C, int64_t Qp, int64_t q, int64_t h)
{
    int64_t h0 = h & ~(int64_t)15, cn = C - h0 >= 16 ? 16 : 8;
    return V + h0 * Qp + cn * q + (h - h0);
}

/* The vertical pass of one output row of a channels-last input (C % 8 == 0): V[q][C] = the max
 * over the valid rows at input column iw_min + q G (all channels, which lie contiguous), -inf
 * outside the input, the next rows prefetched. false when the rows held a NaN or a -0. */
static bool cl_vertical(const cpu_maxpool_geom *g, const float *const *rows, int nv,
                        const float *ahead, int64_t iw_min, int64_t G, int64_t Q, int64_t Qp,
                        float *V)
{
    sep_check ck;
    check_init(&ck);
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    for (int64_t q = 0; q < Q; q++) {
        int64_t iw = iw_min + q * G;
        if (iw < 0 || iw >= g->W) {
            for (int64_t h = 0; h < g->C; h += 8) _mm256_storeu_ps(vat(V, g->C, Qp, q, h), ninf);
            continue;
        }
        int64_t off = iw * g->x_sw;
        for (int64_t h = 0; h < g->C; h += 8) {
            if (ahead && (h & 15) == 0) _mm_prefetch((const char *)(ahead + off + h), _MM_HINT_T0);
            _mm256_storeu_ps(vat(V, g->C, Qp, q, h),
                             vmax8(rows, nv, off + h, true, _mm256_setzero_si256(), &ck));
        }
    }
    return !check_special(&ck);
}

/* The vertical pass of two consecutive output rows whose windows share all rows but one each
 * (sh == dh, all kh rows valid for both): rows[0 .. kh] holds the kh + 1 rows, the first kh for
 * the upper output row (into V0) and the last kh for the lower (into V1), so the kh - 1 shared
 * rows are read once; ahead0 and ahead1 (or NULL) are prefetched: the rows the next pair adds. */
static bool cl_vertical2(const cpu_maxpool_geom *g, const float *const *rows, const float *ahead0,
                         const float *ahead1, int64_t iw_min, int64_t G, int64_t Q, int64_t Qp,
                         float *V0, float *V1)
{
    sep_check ck;
    check_init(&ck);
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    const __m256i none = _mm256_setzero_si256();
    int kh = (int)g->kh;
    for (int64_t q = 0; q < Q; q++) {
        int64_t iw = iw_min + q * G;
        if (iw < 0 || iw >= g->W) {
            for (int64_t h = 0; h < g->C; h += 8) {
                _mm256_storeu_ps(vat(V0, g->C, Qp, q, h), ninf);
                _mm256_storeu_ps(vat(V1, g->C, Qp, q, h), ninf);
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
            _mm256_storeu_ps(vat(V0, g->C, Qp, q, h), _mm256_max_ps(top, mid));
            _mm256_storeu_ps(vat(V1, g->C, Qp, q, h), _mm256_max_ps(bot, mid));
        }
    }
    return !check_special(&ck);
}

/* Stores L floats from s to d: with stream stores for the whole 64-byte lines of d (regular
 * ones for the partial lines at either end, which neighbouring rows share), or all regular. */
static void store_run(float *d, const float *s, int64_t L, bool stream)
{
    int64_t i = 0;
    if (stream) {
        int64_t head = (int64_t)((64 - ((uintptr_t)d & 63)) & 63) / 4;
        for (; i < head && i < L; i++) d[i] = s[i];
        for (; i + 16 <= L; i += 16) {
            _mm256_stream_ps(d + i, _mm256_loadu_ps(s + i));
            _mm256_stream_ps(d + i + 8, _mm256_loadu_ps(s + i + 8));
        }
    }
    for (; i + 8 <= L; i += 8) _mm256_storeu_ps(d + i, _mm256_loadu_ps(s + i));
    for (; i < L; i++) d[i] = s[i];
}

/* The horizontal pass for the channels [c0, c0 + cn) (cn = 8 or 16) of one output row: 8
 * outputs x 8 channels at a time in registers, the max over kw buffer columns, transposed into
 * the staging rows S + l ls (channel c0 + l). A last block of fewer than 8 outputs reads the
 * buffer's -inf columns past Q and writes 8, into the slack or the next row's start, which is
 * written after it. */
static ALWAYS_INLINE void cl_horizontal(const cpu_maxpool_geom *g, const float *V, int64_t Qp,
                                        int64_t c0, int cn, int64_t sq, int64_t dq, float *S,
                                        int64_t ls)
{
    const float *Vb = V + c0 * Qp; /* the block, cn floats per column */
    int64_t js = sq * cn, bs = dq * cn;
    for (int64_t ow0 = 0; ow0 < g->OW; ow0 += 8) {
        for (int h = 0; h < cn; h += 8) {
            const float *v = Vb + ow0 * js + h;
            __m256 r[8];
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) r[j] = _mm256_loadu_ps(v + j * js);
            for (int64_t b = 1; b < g->kw; b++) {
                const float *vb = v + b * bs;
#pragma GCC unroll 8
                for (int j = 0; j < 8; j++)
                    r[j] = _mm256_max_ps(_mm256_loadu_ps(vb + j * js), r[j]);
            }
            cpu_avx2_transpose8(r, r); /* r[l]: channel c0 + h + l, the 8 columns */
#pragma GCC unroll 8
            for (int l = 0; l < 8; l++) _mm256_storeu_ps(S + (h + l) * ls + ow0, r[l]);
        }
    }
}

/* The horizontal pass of nr consecutive output rows (their buffers Vs[0 .. nr)) into the planes
 * at out0 (the first row's start in channel 0's plane), 16 (then 8) channels at a time: the
 * rows go into a staging block S (16 rows of ls floats: per channel the nr output rows back to
 * back, as in its plane), then each channel's run of nr OW floats is stored out, with stream
 * stores for its whole lines when `stream` (the planes' rows start at any alignment). */
static void cl_rows_out(const cpu_maxpool_geom *g, float *const *Vs, int nr, int64_t Qp, int64_t sq,
                        int64_t dq, float *out0, float *S, int64_t ls, bool stream)
{
    int64_t plane = g->OH * g->OW, L = nr * g->OW;
    for (int64_t c0 = 0; c0 < g->C; c0 += 16) {
        int cn = g->C - c0 >= 16 ? 16 : 8;
        for (int k = 0; k < nr; k++) cl_horizontal(g, Vs[k], Qp, c0, cn, sq, dq, S + k * g->OW, ls);
        for (int l = 0; l < cn; l++) store_run(out0 + (c0 + l) * plane, S + l * ls, L, stream);
    }
}

bool cpu_maxpool_cl_sep_avx2(const cpu_maxpool_geom *g, int64_t u0, int64_t u1, bool stream)
{
    int64_t G = cpu_pool_gcd(g->sw, g->dw), iw_min = -g->pw;
    int64_t iw_max = (g->OW - 1) * g->sw - g->pw + (g->kw - 1) * g->dw;
    int64_t Q = (iw_max - iw_min) / G + 1, sq = g->sw / G, dq = g->dw / G;
    /* consecutive output rows in pairs where their windows overlap in all rows but one */
    bool pairs = g->sh == g->dh && g->kh >= 2 && g->kh <= 32;
    int64_t ls = 2 * g->OW + 16; /* a staging row: two output rows and a block's slack */
    int64_t Qp = Q + 8 * sq;     /* Q and the -inf columns a last block of 8 outputs reads */
    float *V = malloc(sizeof(float) * (size_t)(2 * Qp * g->C + 16 * ls));
    if (!V) return false;
    float *V1 = V + Qp * g->C, *S = V1 + Qp * g->C;
    for (int64_t q = Q; q < Qp; q++)
        for (int64_t h = 0; h < g->C; h += 8) {
            _mm256_storeu_ps(vat(V, g->C, Qp, q, h), _mm256_set1_ps(-INFINITY));
            _mm256_storeu_ps(vat(V1, g->C, Qp, q, h), _mm256_set1_ps(-INFINITY));
        }
    float *Vs[2] = {V, V1};
    int64_t plane = g->OH * g->OW;
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
            if (cl_vertical2(g, rows, a0, a1, iw_min, G, Q, Qp, V, V1))
                cl_rows_out(g, Vs, 2, Qp, sq, dq, out0, S, ls, stream);
            else
                cpu_maxpool_cl_avx2(g, u, u + 2); /* the exact kernel */
            u++;
            continue;
        }
        const float *rows[64], *ahead;
        int nv = cpu_maxpool_window_rows_ahead(g, p, oh, rows, &ahead);
        if (nv <= 0 || !cl_vertical(g, rows, nv, ahead, iw_min, G, Q, Qp, V)) {
            cpu_maxpool_cl_avx2(g, u, u + 1); /* the exact kernel */
            continue;
        }
        cl_rows_out(g, Vs, 1, Qp, sq, dq, out0, S, ls, stream);
    }
    if (stream) _mm_sfence();
    free(V);
    return true;
}
