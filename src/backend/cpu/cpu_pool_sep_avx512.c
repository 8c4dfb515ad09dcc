/* Values-only f32 max pooling of channels-last inputs in two passes, AVX-512 (the AVX2 version
 * and the reasoning behind the two passes are in cpu_pool_sep_avx2.c). Each output row's
 * vertical pass takes the max over the window's valid input rows at every input column the
 * windows use (all channels, 16 at a time) into a buffer padded with -inf; the horizontal pass
 * takes the max over kw buffer columns for 16 output columns x 16 channels and transposes them
 * in registers into a staging block, which is stored out per channel into the NCHW output planes
 * (stream stores for whole lines of large outputs).
 *
 * Where the row stride equals the row dilation (sh == dh, as in k3 s1 d1 or Burn's k5 s2 d2),
 * the windows of output rows oh and oh + 1 share kh - 1 input rows: such pairs are done in one
 * vertical pass over kh + 1 rows, the max of the shared rows taken once (kh + 1 loads for two
 * output rows instead of 2 kh); the two rows the previous pair did not read are prefetched 16
 * columns ahead of the loads.
 *
 * Exactness as in the AVX2 kernels: every loaded value joins a per-lane running sum (NaN on a
 * NaN or an inf - inf) and a signed-integer minimum (INT_MIN only at -0), and an output row
 * whose rows held either is recomputed by the exact kernel (cpu_maxpool_cl_avx512). */
#include <immintrin.h>
#include <limits.h>
#include <stdlib.h>

#include "cpu_avx2.h"
#include "cpu_pool_fast.h"

typedef struct ck512 {
    __m512 sum;
    __m512i min;
} ck512;

static void ck_init(ck512 *c)
{
    c->sum = _mm512_setzero_ps();
    c->min = _mm512_set1_epi32(INT_MAX);
}

static ALWAYS_INLINE void ck_add(ck512 *c, __m512 v)
{
    c->sum = _mm512_add_ps(c->sum, v);
    c->min = _mm512_min_epi32(c->min, _mm512_castps_si512(v));
}

/* Whether the checked values held a NaN or a -0 (or an inf - inf in the sums). */
static bool ck_special(const ck512 *c)
{
    return _mm512_cmp_ps_mask(c->sum, c->sum, _CMP_UNORD_Q) ||
           _mm512_cmpeq_epi32_mask(c->min, _mm512_set1_epi32(INT_MIN));
}

/* The columns of the vertical pass: input column iw_min + q G for q in [0, Q). */
typedef struct cl_cols {
    int64_t G, iw_min, Q, sq, dq;
    int64_t Qp; /* Q and the -inf columns a last block of 16 outputs may read past it */
} cl_cols;

/* How far ahead (in buffer columns) the vertical passes prefetch the newest input rows. */
#define PF_COLS 16

static ALWAYS_INLINE void prefetch_ahead(const cpu_maxpool_geom *g, const cl_cols *cc,
                                         const float *row, int64_t iw, int64_t h)
{
    if (iw + PF_COLS * cc->G < g->W)
        _mm_prefetch((const char *)(row + (iw + PF_COLS * cc->G) * g->x_sw + h), _MM_HINT_T0);
}

/* Buffers are blocked by 16 channels: channels [h, h + 16) of column q at V + h Q + 16 q, so
 * the horizontal pass over one block reads it front to back. */
static ALWAYS_INLINE float *vat(float *V, int64_t Qp, int64_t q, int64_t h)
{
    return V + h * Qp + 16 * q;
}

static void fill_ninf(float *V, int64_t Q, int64_t q, int64_t C)
{
    for (int64_t h = 0; h < C; h += 16)
        _mm512_storeu_ps(vat(V, Q, q, h), _mm512_set1_ps(-INFINITY));
}

/* The vertical pass of one output row: column q of V = the max over the nv valid rows (the
 * last of them, the newest, prefetched ahead). */
static bool vertical1(const cpu_maxpool_geom *g, const cl_cols *cc, const float *const *rows,
                      int nv, float *V)
{
    ck512 ck;
    ck_init(&ck);
    int64_t C = g->C;
    for (int64_t q = 0; q < cc->Q; q++) {
        int64_t iw = cc->iw_min + q * cc->G;
        if (iw < 0 || iw >= g->W) {
            fill_ninf(V, cc->Qp, q, C);
            continue;
        }
        int64_t off = iw * g->x_sw;
        for (int64_t h = 0; h < C; h += 16) {
            prefetch_ahead(g, cc, rows[nv - 1], iw, h);
            __m512 best = _mm512_loadu_ps(rows[0] + off + h);
            ck_add(&ck, best);
            for (int a = 1; a < nv; a++) {
                __m512 v = _mm512_loadu_ps(rows[a] + off + h);
                ck_add(&ck, v);
                best = _mm512_max_ps(v, best);
            }
            _mm512_storeu_ps(vat(V, cc->Qp, q, h), best);
        }
    }
    return !ck_special(&ck);
}

/* The vertical pass of two output rows whose windows are rows t[0 .. kh) and t[1 .. kh]: V0 and
 * V1 from one max over the shared rows t[1 .. kh). The rows the previous pair did not read,
 * t[kh - 1] and t[kh], are prefetched ahead. */
static bool vertical2(const cpu_maxpool_geom *g, const cl_cols *cc, const float *const *t,
                      float *V0, float *V1)
{
    ck512 ck;
    ck_init(&ck);
    int64_t C = g->C;
    int kh = (int)g->kh;
    for (int64_t q = 0; q < cc->Q; q++) {
        int64_t iw = cc->iw_min + q * cc->G;
        if (iw < 0 || iw >= g->W) {
            fill_ninf(V0, cc->Qp, q, C);
            fill_ninf(V1, cc->Qp, q, C);
            continue;
        }
        int64_t off = iw * g->x_sw;
        for (int64_t h = 0; h < C; h += 16) {
            prefetch_ahead(g, cc, t[kh - 1], iw, h);
            prefetch_ahead(g, cc, t[kh], iw, h);
            __m512 mid = _mm512_set1_ps(-INFINITY);
            for (int a = 1; a < kh; a++) {
                __m512 v = _mm512_loadu_ps(t[a] + off + h);
                ck_add(&ck, v);
                mid = _mm512_max_ps(v, mid);
            }
            __m512 first = _mm512_loadu_ps(t[0] + off + h);
            __m512 last = _mm512_loadu_ps(t[kh] + off + h);
            ck_add(&ck, first);
            ck_add(&ck, last);
            _mm512_storeu_ps(vat(V0, cc->Qp, q, h), _mm512_max_ps(first, mid));
            _mm512_storeu_ps(vat(V1, cc->Qp, q, h), _mm512_max_ps(last, mid));
        }
    }
    return !ck_special(&ck);
}

/* 16 x 16 transpose: r[i] holds column i of 16 rows (lanes: channels); afterwards r[l] holds
 * channel l's 16 columns. */
static ALWAYS_INLINE void transpose16(__m512 *r)
{
    __m512 t[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 4) {
#pragma GCC unroll 2
        for (int k = 0; k < 2; k++) {
            __m512d a = _mm512_castps_pd(t[i + k]), b = _mm512_castps_pd(t[i + 2 + k]);
            r[i + 2 * k] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
            r[i + 2 * k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
        }
    }
    /* r[i + k] now holds, in 128-bit lane L, rows i .. i + 4 of channel 4 L + k */
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        int lo = (i / 4) * 8 + i % 4, hi = lo + 4;
        t[lo] = _mm512_shuffle_f32x4(r[lo], r[hi], 0x88);
        t[hi] = _mm512_shuffle_f32x4(r[lo], r[hi], 0xDD);
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        int lo = i, hi = i + 8;
        r[lo] = _mm512_shuffle_f32x4(t[lo], t[hi], 0x88);
        r[hi] = _mm512_shuffle_f32x4(t[lo], t[hi], 0xDD);
    }
}

/* 16 output columns of one 16-channel block, transposed: r[l] = channel l's 16 columns, column
 * j the max over b < kw of v[16 (j sq + b dq)] (blocked buffer). */
static ALWAYS_INLINE void hblock(const float *v, int64_t sq, int64_t dq, int64_t kw, __m512 *r)
{
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++) r[j] = _mm512_loadu_ps(v + 16 * j * sq);
    for (int64_t b = 1; b < kw; b++) {
        const float *vb = v + 16 * b * dq;
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++) r[j] = _mm512_max_ps(_mm512_loadu_ps(vb + 16 * j * sq), r[j]);
    }
    transpose16(r);
}

/* Stores L floats from s to d: with stream stores for the whole 64-byte lines of d (regular
 * ones for the partial lines at either end, which neighbouring rows share), or all regular. */
static void store_run(float *d, const float *s, int64_t L, bool stream)
{
    int64_t i = 0;
    if (stream) {
        int64_t head = (int64_t)((64 - ((uintptr_t)d & 63)) & 63) / 4;
        if (head > L) head = L;
        if (head) _mm512_mask_storeu_ps(d, (__mmask16)((1u << head) - 1), _mm512_loadu_ps(s));
        for (i = head; i + 16 <= L; i += 16) _mm512_stream_ps(d + i, _mm512_loadu_ps(s + i));
    } else {
        for (; i + 16 <= L; i += 16) _mm512_storeu_ps(d + i, _mm512_loadu_ps(s + i));
    }
    if (i < L) {
        __mmask16 m = (__mmask16)((1u << (L - i)) - 1);
        _mm512_mask_storeu_ps(d + i, m, _mm512_maskz_loadu_ps(m, s + i));
    }
}

/* The horizontal pass of nr consecutive output rows from their buffers Vs[0 .. nr) into the
 * planes at out0 (the first row's start in channel 0's plane): per 16 channels, 16 output
 * columns at a time, the max over kw buffer columns transposed into a staging block S
 * (16 channels x nr rows, back to back as in the planes), then S stored out per channel. */
static void horizontal(const cpu_maxpool_geom *g, const cl_cols *cc, float *const *Vs, int nr,
                       float *out0, float *S, bool stream)
{
    int64_t C = g->C, plane = g->OH * g->OW, L = nr * g->OW;
    for (int64_t c0 = 0; c0 < C; c0 += 16) {
        for (int k = 0; k < nr; k++) {
            const float *V = Vs[k];
            const float *Vb = V + c0 * cc->Qp;
            float *Sk = S + k * g->OW;
            __m512 r[16];
            for (int64_t ow0 = 0; ow0 < g->OW; ow0 += 16) {
                /* a last block past OW reads the buffer's padding and writes S's slack (or the
                   next row's start, which is written after it) */
                hblock(Vb + 16 * ow0 * cc->sq, cc->sq, cc->dq, g->kw, r);
#pragma GCC unroll 16
                for (int l = 0; l < 16; l++) _mm512_storeu_ps(Sk + l * (L + 16) + ow0, r[l]);
            }
        }
        for (int l = 0; l < 16; l++)
            store_run(out0 + (c0 + l) * plane, S + l * (L + 16), L, stream);
    }
}

bool cpu_maxpool_cl_sep_avx512(const cpu_maxpool_geom *g, int64_t u0, int64_t u1, bool stream)
{
    cl_cols cc;
    cc.G = cpu_pool_gcd(g->sw, g->dw);
    cc.iw_min = -g->pw;
    int64_t iw_max = (g->OW - 1) * g->sw - g->pw + (g->kw - 1) * g->dw;
    cc.Q = (iw_max - cc.iw_min) / cc.G + 1;
    cc.sq = g->sw / cc.G;
    cc.dq = g->dw / cc.G;
    int64_t slen = 16 * (2 * g->OW + 16);
    cc.Qp = cc.Q + 16 * cc.sq;
    float *V = malloc(sizeof(float) * (size_t)(2 * cc.Qp * g->C + slen));
    if (!V) return false;
    float *V1 = V + cc.Qp * g->C, *S = V1 + cc.Qp * g->C;
    for (int64_t q = cc.Q; q < cc.Qp; q++) {
        fill_ninf(V, cc.Qp, q, g->C);
        fill_ninf(V1, cc.Qp, q, g->C);
    }
    float *Vs[2] = {V, V1};
    int64_t plane = g->OH * g->OW;
    int64_t cb = g->C / 16; /* the exact kernel's units: N * OH * cb */
    bool pairs = g->sh == g->dh && g->kh >= 2 && g->kh <= 63;
    for (int64_t u = u0; u < u1;) {
        int64_t oh = u % g->OH, n = u / g->OH;
        const float *p = g->x + n * g->x_sn;
        float *out0 = g->out + n * g->C * plane + oh * g->OW;
        int64_t ih0 = oh * g->sh - g->ph;
        /* a pair: both rows in [u0, u1) and one plane, every window row inside the input */
        if (pairs && u + 1 < u1 && oh + 1 < g->OH && ih0 >= 0 && ih0 + g->kh * g->dh < g->H) {
            const float *t[64];
            for (int64_t a = 0; a <= g->kh; a++) t[a] = p + (ih0 + a * g->dh) * g->x_sh;
            if (vertical2(g, &cc, t, V, V1))
                horizontal(g, &cc, Vs, 2, out0, S, stream);
            else
                cpu_maxpool_cl_avx512(g, u * cb, (u + 2) * cb); /* the exact kernel */
            u += 2;
            continue;
        }
        const float *rows[64];
        int nv = cpu_maxpool_window_rows(g, p, oh, rows);
        if (nv > 0 && vertical1(g, &cc, rows, nv, V))
            horizontal(g, &cc, Vs, 1, out0, S, stream);
        else
            cpu_maxpool_cl_avx512(g, u * cb, (u + 1) * cb);
        u++;
    }
    if (stream) _mm_sfence();
    free(V);
    return true;
}

/* ---- contiguous rows (NCHW and other x_sw == 1 layouts), sw 1 or 2 --------------------------
 * The AVX2 rows kernel's two passes on 16 columns at a time: the vertical pass over the valid
 * window rows into a buffer padded with -inf (the row the output row two below adds prefetched),
 * the horizontal pass over kw buffer columns per output, stride 2 deinterleaved by one
 * two-source permute. Rows whose windows hold a NaN or a -0 are recomputed by the exact AVX2
 * rows kernel (the exact kernels of every instruction set give the same values). */

/* Buffer floats: pw of padding, W columns, then -inf to past the last vector of windows (16 sw
 * + (kw - 1) dw beyond the last vector's start) and slack. */
static int64_t rows_len(const cpu_maxpool_geom *g)
{
    int64_t last = ((g->OW + 15) / 16) * 16 * g->sw + (g->kw - 1) * g->dw + 32;
    int64_t n = g->pw + ((g->W + 15) / 16) * 16;
    return (last > n ? last : n) + 32;
}

/* Elements v[0], v[s], ..., v[15 s] for s = 1 or 2 (v[0 .. 32) readable for s = 2), in order. */
static ALWAYS_INLINE __m512 load_step16(const float *v, int64_t s)
{
    if (s == 1) return _mm512_loadu_ps(v);
    const __m512i even =
        _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    return _mm512_permutex2var_ps(_mm512_loadu_ps(v), even, _mm512_loadu_ps(v + 16));
}

/* out[ow] = max over b of V[ow sw + b dw], 16 outputs at a time; the last block under a mask. */
static ALWAYS_INLINE void rows_hmax(const cpu_maxpool_geom *g, const float *V, float *out,
                                    int64_t sw, bool stream)
{
    int64_t ow = 0;
    for (; ow < g->OW; ow += 16) {
        const float *q = V + ow * sw;
        __m512 best = load_step16(q, sw);
        for (int64_t b = 1; b < g->kw; b++)
            best = _mm512_max_ps(load_step16(q + b * g->dw, sw), best);
        if (ow + 16 > g->OW)
            _mm512_mask_storeu_ps(out + ow, (__mmask16)((1u << (g->OW - ow)) - 1), best);
        else if (stream)
            _mm512_stream_ps(out + ow, best);
        else
            _mm512_storeu_ps(out + ow, best);
    }
}

bool cpu_maxpool_rows_sep_avx512(const cpu_maxpool_geom *g, int64_t r0, int64_t r1, bool stream)
{
    int64_t len = rows_len(g);
    float *V = malloc(sizeof(float) * (size_t)len);
    if (!V) return false;
    for (int64_t i = 0; i < len; i++) V[i] = -INFINITY;
    stream = stream && (((uintptr_t)g->out | (uintptr_t)(g->OW * 4)) & 63) == 0;
    float *Vc = V + g->pw;
    for (int64_t r = r0; r < r1; r++) {
        int64_t oh = r % g->OH, pl = r / g->OH, n = pl / g->C, c = pl % g->C;
        const float *p = g->x + n * g->x_sn + c * g->x_sc;
        const float *rows[64], *ahead;
        int nv = cpu_maxpool_window_rows_ahead(g, p, oh, rows, &ahead);
        bool exact = nv <= 0;
        if (!exact) {
            ck512 ck;
            ck_init(&ck);
            for (int64_t j = 0; j < g->W; j += 16) {
                __mmask16 m = g->W - j >= 16 ? 0xFFFF : (__mmask16)((1u << (g->W - j)) - 1);
                if (ahead) _mm_prefetch((const char *)(ahead + j), _MM_HINT_T0);
                __m512 best = _mm512_maskz_loadu_ps(m, rows[0] + j);
                ck_add(&ck, best);
                for (int a = 1; a < nv; a++) {
                    __m512 v = _mm512_maskz_loadu_ps(m, rows[a] + j);
                    ck_add(&ck, v);
                    best = _mm512_max_ps(v, best);
                }
                /* the masked-off lanes keep the buffer's -inf */
                _mm512_mask_storeu_ps(Vc + j, m, best);
            }
            exact = ck_special(&ck);
        }
        if (exact) { /* empty windows, over 64 rows, a NaN or a -0: the exact kernel */
            cpu_maxpool_rows_avx2(g, r, r + 1);
            continue;
        }
        float *out = g->out + r * g->OW;
        if (g->sw == 1 && stream)
            rows_hmax(g, V, out, 1, true);
        else if (g->sw == 1)
            rows_hmax(g, V, out, 1, false);
        else if (stream)
            rows_hmax(g, V, out, 2, true);
        else
            rows_hmax(g, V, out, 2, false);
    }
    if (stream) _mm_sfence();
    free(V);
    return true;
}
