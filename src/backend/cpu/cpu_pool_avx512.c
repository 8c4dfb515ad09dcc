/* AVX-512 pieces of the f32 max-pool fast path (cpu_pool_fast.c): 16 output columns at a time
 * for inputs with contiguous rows and stride-1 windows, 16 channels at a time for channels-last
 * inputs. Each tap blends the value and a 32-bit in-plane index (row * W + column offset) where
 * v > best or v is NaN, after the first valid tap initialises; planes are below 2^30 elements.
 * A values-only op (g->idx == NULL) runs the same blends and skips the index stores. */
#include <immintrin.h>

#include "cpu_pool_fast.h"

void cpu_maxpool_rows_avx512(const cpu_maxpool_geom *g, int64_t r0, int64_t r1)
{
    /* columns whose whole window lies inside the row */
    int64_t lo = g->pw, hi = g->W - 1 + g->pw - (g->kw - 1) * g->dw; /* ow in [lo, hi] */
    if (hi > g->OW - 1) hi = g->OW - 1;
    const __m512i lane = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    for (int64_t r = r0; r < r1; r++) {
        int64_t oh = r % g->OH, pl = r / g->OH, n = pl / g->C, c = pl % g->C;
        const float *p = g->x + n * g->x_sn + c * g->x_sc;
        int64_t ob = r * g->OW;
        int64_t ih0 = oh * g->sh - g->ph;
        int64_t nvalid = 0;
        for (int64_t a = 0; a < g->kh; a++) {
            int64_t ih = ih0 + a * g->dh;
            nvalid += ih >= 0 && ih < g->H;
        }
        int64_t ow = 0;
        for (; ow < lo && ow < g->OW; ow++) cpu_maxpool_one(g, n, c, oh, ow);
        if (nvalid > 0) {
            for (; ow + 16 <= hi + 1; ow += 16) {
                __m512 best = _mm512_setzero_ps();
                __m512i bidx = _mm512_setzero_si512();
                bool first = true;
                for (int64_t a = 0; a < g->kh; a++) {
                    int64_t ih = ih0 + a * g->dh;
                    if (ih < 0 || ih >= g->H) continue;
                    const float *row = p + ih * g->x_sh + (ow - g->pw);
                    for (int64_t b = 0; b < g->kw; b++) {
                        __m512 v = _mm512_loadu_ps(row + b * g->dw);
                        __m512i lin = _mm512_set1_epi32((int)(ih * g->W + b * g->dw));
                        if (first) {
                            best = v;
                            bidx = lin;
                            first = false;
                            continue;
                        }
                        __mmask16 m = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) |
                                      _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
                        best = _mm512_mask_mov_ps(best, m, v);
                        bidx = _mm512_mask_mov_epi32(bidx, m, lin);
                    }
                }
                _mm512_storeu_ps(g->out + ob + ow, best);
                if (!g->idx) continue;
                __m512i base = _mm512_add_epi64(lane, _mm512_set1_epi64(ow - g->pw));
                __m512i i0 = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(bidx));
                __m512i i1 = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(bidx, 1));
                _mm512_storeu_si512(g->idx + ob + ow, _mm512_add_epi64(i0, base));
                _mm512_storeu_si512(
                    g->idx + ob + ow + 8,
                    _mm512_add_epi64(i1, _mm512_add_epi64(base, _mm512_set1_epi64(8))));
            }
        }
        for (; ow < g->OW; ow++) cpu_maxpool_one(g, n, c, oh, ow);
    }
}

void cpu_maxpool_cl_avx512(const cpu_maxpool_geom *g, int64_t u0, int64_t u1)
{
    int64_t cblocks = (g->C + 15) / 16;
    int64_t plane = g->OH * g->OW;
    float vals[16];
    int32_t ids[16];
    for (int64_t u = u0; u < u1; u++) {
        int64_t cb = u % cblocks, rest = u / cblocks, oh = rest % g->OH, n = rest / g->OH;
        int64_t c0 = cb * 16, cnt = g->C - c0 < 16 ? g->C - c0 : 16;
        __mmask16 cm = (__mmask16)((1u << cnt) - 1);
        const float *p = g->x + n * g->x_sn + c0; /* x_sc == 1 */
        int64_t ih0 = oh * g->sh - g->ph;
        int64_t *idx = g->idx ? g->idx + (n * g->C + c0) * plane + oh * g->OW : NULL;
        float *out = g->out + (n * g->C + c0) * plane + oh * g->OW;
        for (int64_t ow = 0; ow < g->OW; ow++) {
            int64_t iw0 = ow * g->sw - g->pw;
            __m512 best = _mm512_set1_ps(-INFINITY);
            __m512i bidx = _mm512_set1_epi32(-1);
            bool first = true;
            for (int64_t a = 0; a < g->kh; a++) {
                int64_t ih = ih0 + a * g->dh;
                if (ih < 0 || ih >= g->H) continue;
                for (int64_t b = 0; b < g->kw; b++) {
                    int64_t iw = iw0 + b * g->dw;
                    if (iw < 0 || iw >= g->W) continue;
                    __m512 v = _mm512_maskz_loadu_ps(cm, p + ih * g->x_sh + iw * g->x_sw);
                    __m512i lin = _mm512_set1_epi32((int)(ih * g->W + iw));
                    if (first) {
                        best = v;
                        bidx = lin;
                        first = false;
                        continue;
                    }
                    __mmask16 m = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) |
                                  _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
                    best = _mm512_mask_mov_ps(best, m, v);
                    bidx = _mm512_mask_mov_epi32(bidx, m, lin);
                }
            }
            _mm512_storeu_ps(vals, best);
            _mm512_storeu_si512(ids, bidx);
            for (int64_t l = 0; l < cnt; l++) {
                out[l * plane + ow] = vals[l];
                if (idx) idx[l * plane + ow] = ids[l];
            }
        }
    }
}
