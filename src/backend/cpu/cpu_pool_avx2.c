/* AVX2 pieces of the f32 max-pool fast path (cpu_pool_fast.c): 8 output columns at a time for
 * inputs with contiguous rows and stride-1 windows, 8 channels x 8 columns at a time (transposed
 * in registers into the NCHW output) for channels-last inputs. With indices, each tap blends the
 * value and a 32-bit in-plane index where v > best or v is NaN, after the first valid tap
 * initialises (planes are below 2^30 elements). Without indices (g->idx == NULL) each tap is a
 * plain max plus a NaN flag; a vector that met a NaN is redone by cpu_maxpool_one, so values
 * match the indexed kernels bit for bit. */
#include <immintrin.h>

#include "cpu_avx2.h"
#include "cpu_pool_fast.h"

/* Elements q[0], q[s], ..., q[7 s] for s = 1 or 2, reading q[0 .. 8 s) when full, else only
 * q[0 .. avail). Lanes of a stride-2 load come in the order 0 1 4 5 2 3 6 7 (max and blends
 * are lane-wise, so one permute at the end restores the order). */
static ALWAYS_INLINE __m256 load_cols(const float *q, int64_t sw, bool full, int64_t avail)
{
    if (sw == 1) return full ? _mm256_loadu_ps(q) : _mm256_maskload_ps(q, cpu_avx2_lanes(avail));
    __m256 a, b;
    if (full) {
        a = _mm256_loadu_ps(q);
        b = _mm256_loadu_ps(q + 8);
    } else {
        a = _mm256_maskload_ps(q, cpu_avx2_lanes(avail));
        b = _mm256_maskload_ps(q + 8, cpu_avx2_lanes(avail - 8));
    }
    return _mm256_shuffle_ps(a, b, 0x88);
}

/* Up to 8 outputs (ow .. ow+cnt-1) of one row whose windows lie inside the row: rows[a] are
 * the nvalid window rows of the plane p, lins[a] their in-plane offsets. sw (1 or 2), full
 * (8 outputs whose loads stay inside the row) and io (NULL: values only) are constants at
 * each call, so every variant compiles to its own loop. */
static ALWAYS_INLINE void row_vec(const cpu_maxpool_geom *g, const float *p, int64_t ih0,
                                  const float *const *rows, const int64_t *lins, int nvalid,
                                  int64_t ow, int64_t cnt, float *vo, int64_t *io, int64_t sw,
                                  bool full)
{
    int64_t c0 = ow * sw - g->pw; /* first input column of lane 0 */
    __m256 best = load_cols(rows[0] + c0, sw, full, g->W - c0);
    __m256 nan = _mm256_cmp_ps(best, best, _CMP_UNORD_Q);
    __m256i bidx = _mm256_set1_epi32((int)lins[0]);
    for (int a = 0; a < nvalid; a++) {
        const float *row = rows[a] + c0;
        for (int64_t b = a == 0; b < g->kw; b++) {
            int64_t off = b * g->dw; /* lanes past cnt may read on to the row's end */
            __m256 v = load_cols(row + off, sw, full, g->W - c0 - off);
            if (!io) {
                nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
                best = _mm256_max_ps(v, best); /* v > best ? v : best: ties keep the first */
                continue;
            }
            __m256i lin = _mm256_set1_epi32((int)(lins[a] + off));
            __m256 m =
                _mm256_or_ps(_mm256_cmp_ps(v, best, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
            best = _mm256_blendv_ps(best, v, m);
            bidx = _mm256_castps_si256(
                _mm256_blendv_ps(_mm256_castsi256_ps(bidx), _mm256_castsi256_ps(lin), m));
        }
    }
    if (sw == 2) {
        best = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(best), 0xD8));
        if (!io) nan = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(nan), 0xD8));
        if (io) bidx = _mm256_permute4x64_epi64(bidx, 0xD8);
    }
    if (!io) {
        int nm = _mm256_movemask_ps(nan) & ((1 << cnt) - 1);
        if (nm) { /* lanes that met a NaN take the scalar result (which NaN, as indexed) */
            float t[8];
            _mm256_storeu_ps(t, best);
            for (int64_t j = 0; j < cnt; j++) {
                int64_t bi;
                if (nm >> j & 1) t[j] = cpu_maxpool_window(g, p, ih0, ow + j, &bi);
            }
            best = _mm256_loadu_ps(t);
        }
    }
    if (cnt == 8)
        _mm256_storeu_ps(vo + ow, best);
    else { /* not vmaskmovps: its stores are slow microcode on some AMD cores */
        float t[8];
        _mm256_storeu_ps(t, best);
        for (int64_t j = 0; j < cnt; j++) vo[ow + j] = t[j];
    }
    if (!io) return;
    /* index = in-plane offset of the tap + column of the lane's window start */
    __m256i col = _mm256_add_epi32(
        _mm256_set1_epi32((int)c0),
        _mm256_mullo_epi32(_mm256_set1_epi32((int)sw), _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0)));
    bidx = _mm256_add_epi32(bidx, col);
    __m256i i0 = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(bidx));
    __m256i i1 = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(bidx, 1));
    if (cnt == 8) {
        _mm256_storeu_si256((__m256i *)(io + ow), i0);
        _mm256_storeu_si256((__m256i *)(io + ow + 4), i1);
    } else {
        int64_t t[8];
        _mm256_storeu_si256((__m256i *)t, i0);
        _mm256_storeu_si256((__m256i *)(t + 4), i1);
        for (int64_t j = 0; j < cnt; j++) io[ow + j] = t[j];
    }
}

/* The interior outputs [ow, hi] of one row, 8 at a time (the loads of the last vectors
 * masked), for a constant stride sw and values-only or indexed. */
static ALWAYS_INLINE void row_interior(const cpu_maxpool_geom *g, const float *p, int64_t ih0,
                                       const float *const *rows, const int64_t *lins, int nvalid,
                                       int64_t ow, int64_t hi, float *vo, int64_t *io, int64_t sw)
{
    /* full vectors: the last tap's 8 sw floats from c0 + (kw-1) dw stay inside the row */
    int64_t span = (g->kw - 1) * g->dw + 8 * sw;
    for (; ow + 8 <= hi + 1 && ow * sw - g->pw + span <= g->W; ow += 8)
        row_vec(g, p, ih0, rows, lins, nvalid, ow, 8, vo, io, sw, true);
    for (; ow <= hi; ow += 8) {
        int64_t cnt = hi + 1 - ow < 8 ? hi + 1 - ow : 8;
        row_vec(g, p, ih0, rows, lins, nvalid, ow, cnt, vo, io, sw, false);
    }
}

/* rows [r0, r1) of N*C*OH output rows; x_sw == 1, sw == 1 or 2. The interior columns (whole
 * window inside the row) go 8 at a time, the last vector masked; borders are scalar. */
void cpu_maxpool_rows_avx2(const cpu_maxpool_geom *g, int64_t r0, int64_t r1)
{
    /* interior: ow in [lo, hi] */
    int64_t lo = (g->pw + g->sw - 1) / g->sw;
    int64_t last = g->W - 1 + g->pw - (g->kw - 1) * g->dw; /* last window start, + pw */
    int64_t hi = last < 0 ? -1 : last / g->sw;
    if (hi > g->OW - 1) hi = g->OW - 1;
    for (int64_t r = r0; r < r1; r++) {
        int64_t oh = r % g->OH, pl = r / g->OH, n = pl / g->C, c = pl % g->C;
        const float *p = g->x + n * g->x_sn + c * g->x_sc;
        int64_t ob = r * g->OW;
        float *vo = g->out + ob;
        int64_t *io = g->idx ? g->idx + ob : NULL;
        int64_t ih0 = oh * g->sh - g->ph;
        const float *rows[64];
        int64_t lins[64];
        int nvalid = 0;
        bool fits = true; /* windows of more than 64 valid rows go through the scalar path */
        for (int64_t a = 0; a < g->kh && fits; a++) {
            int64_t ih = ih0 + a * g->dh;
            if (ih < 0 || ih >= g->H) continue;
            if (nvalid == 64) {
                fits = false;
                break;
            }
            rows[nvalid] = p + ih * g->x_sh;
            lins[nvalid++] = ih * g->W;
        }
        int64_t ow = 0, bi;
        for (; ow < lo && ow < g->OW; ow++) {
            vo[ow] = cpu_maxpool_window(g, p, ih0, ow, &bi);
            if (io) io[ow] = bi;
        }
        if (nvalid > 0 && fits && ow <= hi) {
            if (g->sw == 1 && !io)
                row_interior(g, p, ih0, rows, lins, nvalid, ow, hi, vo, NULL, 1);
            else if (g->sw == 1)
                row_interior(g, p, ih0, rows, lins, nvalid, ow, hi, vo, io, 1);
            else if (!io)
                row_interior(g, p, ih0, rows, lins, nvalid, ow, hi, vo, NULL, 2);
            else
                row_interior(g, p, ih0, rows, lins, nvalid, ow, hi, vo, io, 2);
            ow = hi + 1;
        }
        for (; ow < g->OW; ow++) {
            vo[ow] = cpu_maxpool_window(g, p, ih0, ow, &bi);
            if (io) io[ow] = bi;
        }
    }
}

/* Taps t in [t0, t1) of a window starting at i0 (stride-free: i = i0 + t * d) that fall in
 * [0, len). */
static inline void tap_range(int64_t i0, int64_t d, int64_t k, int64_t len, int64_t *t0,
                             int64_t *t1)
{
    int64_t lo = i0 >= 0 ? 0 : (-i0 + d - 1) / d;
    int64_t hi = i0 > len - 1 ? 0 : (len - 1 - i0) / d + 1;
    *t0 = lo;
    *t1 = hi < k ? hi : k;
}

/* One channel vector (8 channels, the live ones in cm unless full) of output (oh, ow): taps
 * a in [a0, a1) and b in [b0, b1) are the valid ones. Values in *best, 32-bit in-plane indices
 * in *bidx when idx; returns the NaN mask (values path). idx and full are constants at each
 * call. */
static ALWAYS_INLINE __m256 cl_window(const cpu_maxpool_geom *g, const float *p, __m256i cm,
                                      bool full, int64_t ih0, int64_t a0, int64_t a1, int64_t iw0,
                                      int64_t b0, int64_t b1, bool idx, __m256 *best_out,
                                      __m256i *bidx_out)
{
    if (a0 >= a1 || b0 >= b1) { /* no valid tap: -inf and index -1, as the scalar kernel */
        *best_out = _mm256_set1_ps(-INFINITY);
        *bidx_out = _mm256_set1_epi32(-1);
        return _mm256_setzero_ps();
    }
    int64_t sb = g->dw * g->x_sw; /* step between taps along a row */
    const float *q0 = p + (ih0 + a0 * g->dh) * g->x_sh + (iw0 + b0 * g->dw) * g->x_sw;
    __m256 best = full ? _mm256_loadu_ps(q0) : _mm256_maskload_ps(q0, cm);
    __m256 nan = _mm256_cmp_ps(best, best, _CMP_UNORD_Q);
    __m256i bidx = _mm256_set1_epi32((int)((ih0 + a0 * g->dh) * g->W + iw0 + b0 * g->dw));
    for (int64_t a = a0; a < a1; a++) {
        const float *q = p + (ih0 + a * g->dh) * g->x_sh + iw0 * g->x_sw;
        int64_t lin = (ih0 + a * g->dh) * g->W + iw0;
        for (int64_t b = a == a0 ? b0 + 1 : b0; b < b1; b++) {
            __m256 v = full ? _mm256_loadu_ps(q + b * sb) : _mm256_maskload_ps(q + b * sb, cm);
            if (!idx) {
                nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
                best = _mm256_max_ps(v, best); /* ties keep the first (signed zeros) */
                continue;
            }
            __m256i li = _mm256_set1_epi32((int)(lin + b * g->dw));
            __m256 m =
                _mm256_or_ps(_mm256_cmp_ps(v, best, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
            best = _mm256_blendv_ps(best, v, m);
            bidx = _mm256_castps_si256(
                _mm256_blendv_ps(_mm256_castsi256_ps(bidx), _mm256_castsi256_ps(li), m));
        }
    }
    *best_out = best;
    *bidx_out = bidx;
    return nan;
}

/* The 8 channel vectors of columns ow0 .. ow0+nw-1 (channels c0 .. c0+7) of output row oh. */
static ALWAYS_INLINE int cl_tile(const cpu_maxpool_geom *g, const float *p, __m256i cm, bool full,
                                 int64_t ih0, int64_t a0, int64_t a1, int64_t ow0, int64_t nw,
                                 bool idx, __m256 *vals, __m256 *ids)
{
    int nanmask = 0;
    for (int64_t j = 0; j < 8; j++) {
        if (j >= nw) {
            vals[j] = _mm256_setzero_ps();
            ids[j] = _mm256_setzero_ps();
            continue;
        }
        int64_t iw0 = (ow0 + j) * g->sw - g->pw, b0, b1;
        tap_range(iw0, g->dw, g->kw, g->W, &b0, &b1);
        __m256i bi;
        __m256 nan = cl_window(g, p, cm, full, ih0, a0, a1, iw0, b0, b1, idx, &vals[j], &bi);
        ids[j] = _mm256_castsi256_ps(bi);
        if (!idx && _mm256_movemask_ps(nan)) nanmask |= 1 << j;
    }
    return nanmask;
}

/* units [u0, u1) of N*OH output rows of a channels-last input (x_sc == 1): for each block of 8
 * channels and 8 columns, 8 channel vectors are computed, transposed and stored as 8 runs of 8
 * columns in 8 output planes. */
void cpu_maxpool_cl_avx2(const cpu_maxpool_geom *g, int64_t u0, int64_t u1)
{
    int64_t plane = g->OH * g->OW;
    bool with_idx = g->idx != NULL;
    for (int64_t u = u0; u < u1; u++) {
        int64_t oh = u % g->OH, n = u / g->OH;
        int64_t ih0 = oh * g->sh - g->ph, a0, a1;
        tap_range(ih0, g->dh, g->kh, g->H, &a0, &a1);
        /* channel blocks outside, columns inside: neighbouring windows share most taps, so
         * one block's slice of the window rows is reused from L1 */
        for (int64_t c0 = 0; c0 < g->C; c0 += 8) {
            int64_t cnt = g->C - c0 < 8 ? g->C - c0 : 8;
            for (int64_t ow0 = 0; ow0 < g->OW; ow0 += 8) {
                int64_t nw = g->OW - ow0 < 8 ? g->OW - ow0 : 8;
                __m256i cm = cpu_avx2_lanes(cnt);
                const float *p = g->x + n * g->x_sn + c0;
                __m256 vals[8], ids[8];
                int nanmask;
                if (cnt == 8 && !with_idx)
                    nanmask = cl_tile(g, p, cm, true, ih0, a0, a1, ow0, nw, false, vals, ids);
                else if (cnt == 8)
                    nanmask = cl_tile(g, p, cm, true, ih0, a0, a1, ow0, nw, true, vals, ids);
                else if (!with_idx)
                    nanmask = cl_tile(g, p, cm, false, ih0, a0, a1, ow0, nw, false, vals, ids);
                else
                    nanmask = cl_tile(g, p, cm, false, ih0, a0, a1, ow0, nw, true, vals, ids);
                cpu_avx2_transpose8(vals, vals);
                float *out = g->out + (n * g->C + c0) * plane + oh * g->OW + ow0;
                if (with_idx) cpu_avx2_transpose8(ids, ids);
                for (int64_t l = 0; l < cnt; l++) {
                    float *o = out + l * plane;
                    if (nw == 8) {
                        _mm256_storeu_ps(o, vals[l]);
                    } else {
                        float t[8];
                        _mm256_storeu_ps(t, vals[l]);
                        for (int64_t j = 0; j < nw; j++) o[j] = t[j];
                    }
                    if (!with_idx) continue;
                    int64_t *io = g->idx + (n * g->C + c0 + l) * plane + oh * g->OW + ow0;
                    __m256i iv = _mm256_castps_si256(ids[l]);
                    __m256i i0 = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(iv));
                    __m256i i1 = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(iv, 1));
                    if (nw == 8) {
                        _mm256_storeu_si256((__m256i *)io, i0);
                        _mm256_storeu_si256((__m256i *)(io + 4), i1);
                    } else {
                        int64_t t[8];
                        _mm256_storeu_si256((__m256i *)t, i0);
                        _mm256_storeu_si256((__m256i *)(t + 4), i1);
                        for (int64_t j = 0; j < nw; j++) io[j] = t[j];
                    }
                }
                for (int64_t j = 0; nanmask && j < nw; j++)
                    if (nanmask >> j & 1)
                        for (int64_t l = 0; l < cnt; l++)
                            cpu_maxpool_one(g, n, c0 + l, oh, ow0 + j);
            }
        }
    }
}
