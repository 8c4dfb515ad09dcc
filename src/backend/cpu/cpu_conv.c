/* CPU kernels for convolution: conv as im2col + one GEMM per group, transposed conv as one GEMM
 * per group + col2im (scatter-add), and the im2col/col2im ops themselves. 1-D and 2-D work as
 * 3-D with size-1 dims; f16/bf16 and non-contiguous operands go through f32/f64 scratch.
 */
#include "../../ir/decode.h"
#include "cpu.h"
#include "cpu_cache.h"
#include "cpu_conv_direct.h"
#include "cpu_fast.h"
#include "cpu_gemm.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* im2col scratch alive at once is kept under this many bytes (the batch goes in pieces). */
#define COL_BUDGET ((int64_t)256 << 20)
/* conv forward: im2col + GEMM go by blocks of output rows of about this many column bytes */
#define CHUNK_BYTES ((int64_t)512 << 10)

/* One sliding-window pass: an image [c, in[0], in[1], in[2]] and windows at out[0..2] positions,
 * window element (k0, k1, k2) of position o reading image position o*s - p + k*d. */
typedef struct geo {
    int64_t c;
    int64_t in[3], out[3], k[3], s[3], p[3], d[3];
    int64_t in_n, out_n, k_n; /* products of in, out, k */
} geo;

static void geo_finish(geo *g)
{
    g->in_n = g->in[0] * g->in[1] * g->in[2];
    g->out_n = g->out[0] * g->out[1] * g->out[2];
    g->k_n = g->k[0] * g->k[1] * g->k[2];
}

/* Window positions o in [lo, hi) along a dim (of out_len positions) read inside [0, len) for
 * kernel offset k: 0 <= o*s - p + k*d < len. */
static void valid_range(int64_t len, int64_t out_len, int64_t s, int64_t p, int64_t kd, int64_t *lo,
                        int64_t *hi)
{
    int64_t a = p - kd, b = len + p - kd;
    int64_t l = a <= 0 ? 0 : (a + s - 1) / s;
    int64_t h = b <= 0 ? 0 : (b + s - 1) / s;
    if (h > out_len) h = out_len;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* Per row of im2col/col2im: the image position of window (o0, o1) is valid or not, then a run
 * [lo, hi) along the last dim that reads img[o2*s2 + base]. */
typedef struct fold_ctx {
    const geo *g;
    bool dbl;
    const char *src;
    char *dst;
} fold_ctx;

/* im2col for 'same'-size windows at stride 1 along the last two dims (3x3 pad 1, say): for a
 * kernel offset, a whole output plane is the input plane shifted by a constant, so it is one
 * long copy (from the first to the last valid element, never reading outside the plane) and then
 * zeros over the positions that fall in the padding (the few that wrapped across a row edge). */
static void im2col_range_same(const fold_ctx *x, int64_t c0, int64_t c1)
{
    const geo *g = x->g;
    size_t es = x->dbl ? 8 : 4;
    int64_t H = g->in[1], W = g->in[2], R = g->out[1], plane = H * W, oplane = R * W;
    for (int64_t c = c0; c < c1; c++) {
        const char *img = x->src + (size_t)(c * g->in_n) * es;
        for (int64_t k0 = 0; k0 < g->k[0]; k0++)
            for (int64_t k1 = 0; k1 < g->k[1]; k1++)
                for (int64_t k2 = 0; k2 < g->k[2]; k2++) {
                    int64_t row = c * g->k_n + (k0 * g->k[1] + k1) * g->k[2] + k2;
                    char *col = x->dst + (size_t)(row * g->out_n) * es;
                    int64_t rlo, rhi, lo, hi;
                    valid_range(H, R, 1, g->p[1], k1 * g->d[1], &rlo, &rhi);
                    valid_range(W, W, 1, g->p[2], k2 * g->d[2], &lo, &hi);
                    int64_t shift = (k1 * g->d[1] - g->p[1]) * W + (k2 * g->d[2] - g->p[2]);
                    for (int64_t o0 = 0; o0 < g->out[0]; o0++) {
                        int64_t i0 = o0 * g->s[0] - g->p[0] + k0 * g->d[0];
                        char *dp = col + (size_t)(o0 * oplane) * es;
                        if (i0 < 0 || i0 >= g->in[0] || rlo >= rhi || lo >= hi) {
                            memset(dp, 0, (size_t)oplane * es);
                            continue;
                        }
                        const char *sp = img + (size_t)(i0 * plane) * es;
                        int64_t a = rlo * W + lo, b = (rhi - 1) * W + hi;
                        memcpy(dp + (size_t)a * es, sp + (size_t)(a + shift) * es,
                               (size_t)(b - a) * es);
                        memset(dp, 0, (size_t)a * es);
                        memset(dp + (size_t)b * es, 0, (size_t)(oplane - b) * es);
                        if (lo > 0 || hi < W)
                            for (int64_t o1 = rlo; o1 < rhi; o1++) {
                                char *r = dp + (size_t)(o1 * W) * es;
                                if (x->dbl) {
                                    for (int64_t o = 0; o < lo; o++) ((double *)r)[o] = 0;
                                    for (int64_t o = hi; o < W; o++) ((double *)r)[o] = 0;
                                } else {
                                    for (int64_t o = 0; o < lo; o++) ((float *)r)[o] = 0;
                                    for (int64_t o = hi; o < W; o++) ((float *)r)[o] = 0;
                                }
                            }
                    }
                }
    }
}

/* col [c*k_n, out_n] <- img [c, in_n] for channels [c0, c1). */
static void im2col_range(void *vctx, int64_t c0, int64_t c1)
{
    const fold_ctx *x = vctx;
    const geo *g = x->g;
    size_t es = x->dbl ? 8 : 4;
    if (g->s[1] == 1 && g->s[2] == 1 && g->out[2] == g->in[2]) {
        im2col_range_same(x, c0, c1);
        return;
    }
    for (int64_t c = c0; c < c1; c++) {
        const char *img = x->src + (size_t)(c * g->in_n) * es;
        for (int64_t k0 = 0; k0 < g->k[0]; k0++)
            for (int64_t k1 = 0; k1 < g->k[1]; k1++)
                for (int64_t k2 = 0; k2 < g->k[2]; k2++) {
                    int64_t row = c * g->k_n + (k0 * g->k[1] + k1) * g->k[2] + k2;
                    char *col = x->dst + (size_t)(row * g->out_n) * es;
                    int64_t lo, hi, off2 = k2 * g->d[2] - g->p[2];
                    valid_range(g->in[2], g->out[2], g->s[2], g->p[2], k2 * g->d[2], &lo, &hi);
                    for (int64_t o0 = 0; o0 < g->out[0]; o0++) {
                        int64_t i0 = o0 * g->s[0] - g->p[0] + k0 * g->d[0];
                        for (int64_t o1 = 0; o1 < g->out[1]; o1++) {
                            int64_t i1 = o1 * g->s[1] - g->p[1] + k1 * g->d[1];
                            char *dr = col + (size_t)((o0 * g->out[1] + o1) * g->out[2]) * es;
                            if (i0 < 0 || i0 >= g->in[0] || i1 < 0 || i1 >= g->in[1]) {
                                memset(dr, 0, (size_t)g->out[2] * es);
                                continue;
                            }
                            /* most rows need no zeros: skip the calls (rows are short) */
                            if (lo > 0) memset(dr, 0, (size_t)lo * es);
                            if (hi < g->out[2])
                                memset(dr + (size_t)hi * es, 0, (size_t)(g->out[2] - hi) * es);
                            int64_t base = (i0 * g->in[1] + i1) * g->in[2] + off2, s2 = g->s[2];
                            if (s2 == 1) {
                                if (hi > lo)
                                    memcpy(dr + (size_t)lo * es, img + (size_t)(base + lo) * es,
                                           (size_t)(hi - lo) * es);
                            } else if (x->dbl) {
                                const double *sp = (const double *)img + base;
                                double *dp = (double *)dr;
                                for (int64_t o = lo; o < hi; o++) dp[o] = sp[o * s2];
                            } else {
                                const float *sp = (const float *)img + base;
                                float *dp = (float *)dr;
                                for (int64_t o = lo; o < hi; o++) dp[o] = sp[o * s2];
                            }
                        }
                    }
                }
    }
}

/* img [c, in_n] += col [c*k_n, out_n] (scatter-add) for channels [c0, c1). Each channel's plane
 * is summed in one fixed order by one thread, so the result does not depend on the split. */
static void col2im_range(void *vctx, int64_t c0, int64_t c1)
{
    const fold_ctx *x = vctx;
    const geo *g = x->g;
    size_t es = x->dbl ? 8 : 4;
    for (int64_t c = c0; c < c1; c++) {
        char *img = x->dst + (size_t)(c * g->in_n) * es;
        for (int64_t k0 = 0; k0 < g->k[0]; k0++)
            for (int64_t k1 = 0; k1 < g->k[1]; k1++)
                for (int64_t k2 = 0; k2 < g->k[2]; k2++) {
                    int64_t row = c * g->k_n + (k0 * g->k[1] + k1) * g->k[2] + k2;
                    const char *col = x->src + (size_t)(row * g->out_n) * es;
                    int64_t lo, hi, off2 = k2 * g->d[2] - g->p[2];
                    valid_range(g->in[2], g->out[2], g->s[2], g->p[2], k2 * g->d[2], &lo, &hi);
                    for (int64_t o0 = 0; o0 < g->out[0]; o0++) {
                        int64_t i0 = o0 * g->s[0] - g->p[0] + k0 * g->d[0];
                        if (i0 < 0 || i0 >= g->in[0]) continue;
                        for (int64_t o1 = 0; o1 < g->out[1]; o1++) {
                            int64_t i1 = o1 * g->s[1] - g->p[1] + k1 * g->d[1];
                            if (i1 < 0 || i1 >= g->in[1]) continue;
                            const char *sr = col + (size_t)((o0 * g->out[1] + o1) * g->out[2]) * es;
                            int64_t base = (i0 * g->in[1] + i1) * g->in[2] + off2, s2 = g->s[2];
                            if (x->dbl) {
                                const double *sp = (const double *)sr;
                                double *dp = (double *)img + base;
                                for (int64_t o = lo; o < hi; o++) dp[o * s2] += sp[o];
                            } else {
                                const float *sp = (const float *)sr;
                                float *dp = (float *)img + base;
                                for (int64_t o = lo; o < hi; o++) dp[o * s2] += sp[o];
                            }
                        }
                    }
                }
    }
}

/* Runs im2col (or col2im) over g->c channels, spread over the pool when large (inline when
 * already inside a parallel region). */
static void fold_run(const geo *g, bool dbl, const void *src, void *dst, bool to_cols)
{
    fold_ctx x = {g, dbl, src, dst};
    int64_t per = g->k_n * g->out_n;
    int64_t grain = per >= CPU_PAR_MIN ? 1 : CPU_PAR_MIN / (per ? per : 1);
    em_parallel_for(g->c, grain, to_cols ? im2col_range : col2im_range, &x);
}

/* C[M,N] = op(A) . B + beta*C in the compute type. */
static void gemm(bool dbl, bool ta, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                 const void *B, int64_t ldb, bool accumulate, void *C, int64_t ldc)
{
    /* Few output columns (weight gradients: N = kernel taps) and a long K: the GEMM's unpacked
     * small-N path is slow there, so compute C^T = B^T . op(A)^T (N rows, M columns; packed)
     * into a malloc'd scratch (not em_alloc: allocation counts stay as they were) and add it. */
    if (N < 16 && M >= 16 && M * N * K >= (1 << 18)) {
        size_t es = dbl ? sizeof(double) : sizeof(float);
        void *t = malloc((size_t)(M * N) * es);
        if (t) {
            if (dbl)
                cpu_dgemm(true, !ta, N, M, K, 1.0, B, ldb, A, lda, 0.0, t, M);
            else
                cpu_sgemm(true, !ta, N, M, K, 1.0f, B, ldb, A, lda, 0.0f, t, M);
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    if (dbl) {
                        double *c = (double *)C + i * ldc + j, v = ((double *)t)[j * M + i];
                        *c = accumulate ? *c + v : v;
                    } else {
                        float *c = (float *)C + i * ldc + j, v = ((float *)t)[j * M + i];
                        *c = accumulate ? *c + v : v;
                    }
                }
            free(t);
            return;
        }
    }
    if (dbl)
        cpu_dgemm(ta, false, M, N, K, 1.0, A, lda, B, ldb, accumulate ? 1.0 : 0.0, C, ldc);
    else
        cpu_sgemm(ta, false, M, N, K, 1.0f, A, lda, B, ldb, accumulate ? 1.0f : 0.0f, C, ldc);
}

/* A view of scratch memory, so cpu_copy_convert can fill or read it. */
typedef struct wrapped {
    ir_tensor t;
} wrapped;

static void wrap(wrapped *w, void *data, em_dtype dt, const ir_tensor *like)
{
    memset(w, 0, sizeof *w);
    w->t.data = data;
    w->t.device = like->device;
    w->t.dtype = dt;
    w->t.rank = like->rank;
    memcpy(w->t.shape, like->shape, sizeof w->t.shape);
    ir_contiguous_strides(like->shape, like->rank, w->t.strides);
}

static void *scratch(int64_t elems, size_t es)
{
    /* through the caching allocator: im2col buffers are large and reused call after call */
    return cpu_cache_alloc((size_t)(elems > 0 ? elems : 1) * es);
}

/* t's values, contiguous in dtype ct: t's own memory when it already is, else a converted copy
 * (*owned set; cpu_cache_free it). NULL on allocation failure. */
static void *as_contig(const ir_tensor *t, em_dtype ct, void **owned)
{
    *owned = NULL;
    if (t->dtype == ct && ir_is_contiguous(t)) return ir_ptr(t);
    void *p = scratch(ir_numel(t), em_dtype_size(ct));
    if (!p) return NULL;
    if (ir_numel(t) > 0) {
        wrapped w;
        wrap(&w, p, ct, t);
        cpu_copy_convert(&w.t, t);
    }
    *owned = p;
    return p;
}

/* ---- conv and conv_transpose ------------------------------------------------------------- */

typedef struct conv_job {
    bool dbl, transposed, direct;
    geo g; /* one group: image side has g.c channels */
    int64_t groups;
    int64_t cin, cout; /* channels of x and of the output */
    int64_t x_n, y_n;  /* spatial sizes of x and of the output */
    const char *x, *w, *bias;
    char *y;
    char *col;
    int64_t col_elems; /* per slot */
    int64_t first;     /* batch item of slot 0 */
    bool per_slot;     /* each item its own slot (batch-parallel) */
} conv_job;

/* Output rows of item n start as the bias (or zero); the GEMMs then accumulate into them. */
static void fill_bias(const conv_job *j, char *ys)
{
    for (int64_t co = 0; co < j->cout; co++) {
        if (j->dbl) {
            double v = j->bias ? ((const double *)j->bias)[co] : 0.0,
                   *p = (double *)ys + co * j->y_n;
            for (int64_t i = 0; i < j->y_n; i++) p[i] = v;
        } else {
            float v = j->bias ? ((const float *)j->bias)[co] : 0.0f, *p = (float *)ys + co * j->y_n;
            for (int64_t i = 0; i < j->y_n; i++) p[i] = v;
        }
    }
}

/* x: [cin, x_n] -> y: [cout, y_n] for one batch item. */
static void conv_item(const conv_job *j, int64_t n)
{
    size_t es = j->dbl ? 8 : 4;
    const char *xs = j->x + (size_t)(n * j->cin * j->x_n) * es;
    char *ys = j->y + (size_t)(n * j->cout * j->y_n) * es;
    char *col =
        j->col ? j->col + (size_t)((j->per_slot ? n - j->first : 0) * j->col_elems) * es : NULL;
    fill_bias(j, ys);
    int64_t cig = j->cin / j->groups, cog = j->cout / j->groups, kn = j->g.k_n;
    for (int64_t gi = 0; gi < j->groups; gi++) {
        if (cig == 0 || cog == 0) break;
        const char *xg = xs + (size_t)(gi * cig * j->x_n) * es;
        char *yg = ys + (size_t)(gi * cog * j->y_n) * es;
        if (!j->transposed) {
            /* w_g [cog, cig*kn] . cols [cig*kn, y_n] */
            const char *wg = j->w + (size_t)(gi * cog * cig * kn) * es;
            if (j->direct) {
                gemm(j->dbl, false, cog, j->y_n, cig * kn, wg, cig * kn, xg, j->y_n, true, yg,
                     j->y_n);
                continue;
            }
            /* output rows in chunks whose columns stay in cache between im2col and the GEMM's
             * packing (a window geometry shifted by r0 rows: pad p - r0*s) */
            const geo *g = &j->g;
            int64_t rows = g->out[1], rowb = cig * kn * g->out[2] * (int64_t)es;
            if (g->out[0] == 1 && rowb * rows > 2 * CHUNK_BYTES) {
                rows = CHUNK_BYTES / rowb;
                int64_t minr = (256 + g->out[2] - 1) / g->out[2];
                if (rows < minr) rows = minr;
                if (rows > g->out[1]) rows = g->out[1];
            }
            for (int64_t r0 = 0; r0 < g->out[1]; r0 += rows) {
                geo sub = *g;
                sub.out[1] = g->out[1] - r0 < rows ? g->out[1] - r0 : rows;
                sub.p[1] = g->p[1] - r0 * g->s[1];
                geo_finish(&sub);
                fold_run(&sub, j->dbl, xg, col, true);
                gemm(j->dbl, false, cog, sub.out_n, cig * kn, wg, cig * kn, col, sub.out_n, true,
                     yg + (size_t)(r0 * g->out[2]) * es, j->y_n);
            }
        } else {
            /* w_g^T [cog*kn, cig] . x_g [cig, x_n], then scattered into the image */
            const char *wg = j->w + (size_t)(gi * cig * cog * kn) * es;
            if (j->direct) {
                gemm(j->dbl, true, cog, j->x_n, cig, wg, cog, xg, j->x_n, true, yg, j->y_n);
            } else {
                gemm(j->dbl, true, cog * kn, j->x_n, cig, wg, cog * kn, xg, j->x_n, false, col,
                     j->x_n);
                fold_run(&j->g, j->dbl, col, yg, false);
            }
        }
    }
}

/* ---- f32 2-D convolution with im2col written straight into the GEMM's packed panels ------
 * The weights of every group are packed once per op into the micro-kernel's A panels (MR rows
 * per k, zero padded); for each block of output positions and each block of KC reduction
 * rows, the im2col rows are built in a small L1-resident buffer and scattered as the B panels
 * (NR positions per k), then the register kernel accumulates into the output (the first K block
 * overwrites it, so the output is never filled first). A bias is the first reduction row: its
 * weights are the bias, its im2col row all ones. Work units are (item, block of output
 * positions); every output element sums the same K blocks in the same order whatever the thread
 * count. */

typedef struct fused_conv {
    const conv_job *j;
    const cpu_gemm_kernels *k;
    int64_t mr, nr, kc, nc; /* register tile, K block, block of output positions */
    int64_t mp;             /* cog rounded up to mr */
    const float *ap;        /* packed weights: per group mp * Kb floats, K blocks in order */
    int64_t Kb;             /* reduction rows: the bias row (if any), then the im2col's K */
    int64_t nblocks;        /* blocks of output positions per item */
    atomic_bool failed;     /* a task found no memory for its panels */
} fused_conv;

/* The kernel set cpu_sgemm would use, when it has register kernels (NULL for portable). */
static const cpu_gemm_kernels *fused_kernels(void)
{
#if CPU_X86
    const char *name = cpu_gemm_kernel_name();
    if (!strcmp(name, "avx512")) return &cpu_gemm_kernels_avx512;
    if (!strcmp(name, "avx2")) return &cpu_gemm_kernels_avx2;
#endif
    return NULL;
}

/* Row kk of one item's im2col matrix (2-D windows) over output positions [j0, j0 + n): t[i]
 * is the image value under tap kk of position j0 + i, or 0 in the padding. */
static void col_row(const geo *g, const float *img, int64_t kk, int64_t j0, int64_t n, float *t)
{
    int64_t c = kk / g->k_n, tap = kk % g->k_n, a = tap / g->k[2], e = tap % g->k[2];
    const float *src = img + c * g->in_n;
    int64_t OW = g->out[2], W = g->in[2], s2 = g->s[2], off2 = e * g->d[2] - g->p[2];
    int64_t lo, hi;
    valid_range(W, OW, s2, g->p[2], e * g->d[2], &lo, &hi);
    int64_t oh = j0 / OW, ow = j0 % OW;
    for (int64_t i = 0; i < n; oh++, ow = 0) {
        int64_t run = OW - ow < n - i ? OW - ow : n - i, end = ow + run;
        int64_t ih = oh * g->s[1] - g->p[1] + a * g->d[1];
        float *d = t + i - ow; /* d[o] is output column o of this row */
        i += run;
        if (ih < 0 || ih >= g->in[1] || lo >= hi) {
            for (int64_t o = ow; o < end; o++) d[o] = 0;
            continue;
        }
        int64_t vlo = lo > ow ? lo : ow, vhi = hi < end ? hi : end;
        for (int64_t o = ow; o < vlo && o < end; o++) d[o] = 0;
        const float *sr = src + ih * W;
        if (s2 == 1) {
            if (vhi > vlo) memcpy(d + vlo, sr + vlo + off2, (size_t)(vhi - vlo) * sizeof(float));
        } else if (s2 == 2) { /* the fused path runs with the x86 kernels only */
            if (vhi > vlo) cpu_conv_gather2_avx2(sr + 2 * vlo + off2, d + vlo, vhi - vlo);
        } else {
            for (int64_t o = vlo; o < vhi; o++) d[o] = sr[o * s2 + off2];
        }
        for (int64_t o = vhi > vlo ? vhi : vlo; o < end; o++) d[o] = 0;
    }
}

/* Units [u0, u1) of items x blocks of output positions; buf holds kc * nc + nc floats. */
static void fused_units(const fused_conv *f, int64_t u0, int64_t u1, float *buf)
{
    const conv_job *j = f->j;
    const geo *g = &j->g;
    int64_t cog = j->cout / j->groups, Kb = f->Kb, hb = j->bias != NULL;
    int64_t cig = j->cin / j->groups, mr = f->mr, nr = f->nr, kc = f->kc;
    float *bp = buf, *tmp = buf + kc * f->nc;
    for (int64_t u = u0; u < u1; u++) {
        int64_t n = u / f->nblocks, j0 = (u % f->nblocks) * f->nc;
        int64_t ncb = j->y_n - j0 < f->nc ? j->y_n - j0 : f->nc;
        int64_t npan = (ncb + nr - 1) / nr;
        const float *xs = (const float *)j->x + n * j->cin * j->x_n;
        float *ys = (float *)j->y + n * j->cout * j->y_n;
        for (int64_t gi = 0; gi < j->groups; gi++) {
            const float *xg = xs + gi * cig * j->x_n;
            float *yg = ys + gi * cog * j->y_n + j0;
            for (int64_t k0 = 0; k0 < Kb; k0 += kc) {
                int64_t kcb = Kb - k0 < kc ? Kb - k0 : kc;
                /* B panels: panel p holds positions p*nr .. p*nr+nr-1, nr floats per k */
                for (int64_t k = 0; k < kcb; k++) {
                    if (hb && k0 + k == 0) {
                        for (int64_t i = 0; i < npan * nr; i++) tmp[i] = 1.0f;
                    } else {
                        col_row(g, xg, k0 + k - hb, j0, ncb, tmp);
                        for (int64_t i = ncb; i < npan * nr; i++) tmp[i] = 0;
                    }
                    float *dst = bp + k * nr;
                    if (nr == 16) /* a fixed-size copy compiles to a few vector moves */
                        for (int64_t pn = 0; pn < npan; pn++)
                            memcpy(dst + pn * kcb * 16, tmp + pn * 16, 16 * sizeof(float));
                    else
                        for (int64_t pn = 0; pn < npan; pn++)
                            memcpy(dst + pn * kcb * nr, tmp + pn * nr, (size_t)nr * sizeof(float));
                }
                const float *ap = f->ap + gi * f->mp * Kb + k0 * f->mp;
                for (int64_t pn = 0; pn < npan; pn++) {
                    int nrr = (int)(ncb - pn * nr < nr ? ncb - pn * nr : nr);
                    for (int64_t i0 = 0; i0 < cog; i0 += mr) {
                        int mrr = (int)(cog - i0 < mr ? cog - i0 : mr);
                        f->k->s_ukr(kcb, ap + i0 * kcb, bp + pn * kcb * nr,
                                    yg + i0 * j->y_n + pn * nr, j->y_n, 1.0f, k0 ? 1.0f : 0.0f, mrr,
                                    nrr);
                    }
                }
            }
        }
    }
}

static void fused_range(void *ctx, int64_t u0, int64_t u1)
{
    fused_conv *f = ctx;
    /* malloc, not em_alloc: per-task scratch, like the GEMM's own packing buffers */
    float *buf = malloc((size_t)(f->kc * f->nc + f->nc) * sizeof(float));
    if (!buf) {
        atomic_store(&f->failed, true);
        return;
    }
    fused_units(f, u0, u1, buf);
    free(buf);
}

/* Runs an f32 2-D forward convolution through the packed path: 1 when done, 0 when the path
 * does not apply (nothing written), -1 when memory ran out. */
static int conv_fused(const conv_job *j, int64_t nb)
{
    const geo *g = &j->g;
    if (j->dbl || j->transposed || j->direct || g->k[0] != 1 || g->in[0] != 1 || g->out[0] != 1)
        return 0;
    const cpu_gemm_kernels *k = fused_kernels();
    int64_t cig = j->cin / j->groups, cog = j->cout / j->groups, K = cig * g->k_n;
    if (!k || cig == 0 || cog == 0 || K == 0) return 0;
    fused_conv f = {.j = j, .k = k, .mr = k->s_mr, .nr = k->s_nr, .kc = k->s_kc};
    f.nc = (384 + f.nr - 1) / f.nr * f.nr;
    f.mp = (cog + f.mr - 1) / f.mr * f.mr;
    f.nblocks = (j->y_n + f.nc - 1) / f.nc;
    int64_t hb = j->bias != NULL, Kb = K + hb;
    f.Kb = Kb;
    float *ap = scratch(j->groups * f.mp * Kb, sizeof(float));
    if (!ap) return -1;
    /* A panels: for group gi and K block k0, panel i0 holds rows i0 .. i0+mr-1, mr per k;
       reduction row 0 is the bias where there is one */
    const float *w = (const float *)j->w, *bias = (const float *)j->bias;
    for (int64_t gi = 0; gi < j->groups; gi++)
        for (int64_t k0 = 0; k0 < Kb; k0 += f.kc) {
            int64_t kcb = Kb - k0 < f.kc ? Kb - k0 : f.kc;
            float *blk = ap + gi * f.mp * Kb + k0 * f.mp;
            for (int64_t i0 = 0; i0 < f.mp; i0 += f.mr)
                for (int64_t kk = 0; kk < kcb; kk++)
                    for (int64_t r = 0; r < f.mr; r++) {
                        int64_t co = gi * cog + i0 + r, kw = k0 + kk - hb;
                        blk[(i0 * kcb) + kk * f.mr + r] = i0 + r >= cog ? 0.0f
                                                          : kw < 0      ? bias[co]
                                                                        : w[co * K + kw];
                    }
        }
    f.ap = ap;
    atomic_init(&f.failed, false);
    em_parallel_for(nb * f.nblocks, 1, fused_range, &f);
    cpu_cache_free(ap);
    return atomic_load(&f.failed) ? -1 : 1;
}

/* ---- direct stride-1 f32 2-D convolution (AVX2) ----------------------------------------
 * With stride 1, the im2col value of position (oh, ow) under tap (a, e) is the zero-padded
 * image at (oh + a*dh, ow + e*dw): on the padded grid (row length Wp) it is the padded plane
 * read at q + a*dh*Wp + e*dw for q = oh*Wp + ow. So the register kernel reads its 16 positions
 * of each reduction row straight from the padded image (one offset per row) and the 9x larger
 * im2col panels are never written. Positions with ow >= OW (the last columns of each padded
 * row) are computed and dropped when the tile is copied out with the bias. */

static atomic_bool direct_off;

void cpu_conv_direct_enable(bool on)
{
    atomic_store(&direct_off, !on);
}

typedef struct direct_conv {
    const conv_job *j;
    int64_t Hp, Wp, plane_p; /* padded image */
    int64_t K, kb, mp, nq, qblk, nblocks;
    float *xp; /* padded images, xp_item floats per item */
    int64_t xp_item;
    float *ap;    /* packed weights, mp * K per group: 6 rows per k */
    int64_t *off; /* K offsets into a group's padded planes */
    atomic_bool failed;
} direct_conv;

/* Input plane pi (sample * cin + channel) of an f32 2-D conv, zero-padded: dst holds `plane`
 * floats in rows of Wp, the input at (pt, pl). Shared by the direct and Winograd paths. */
static void pad_plane(const conv_job *j, int64_t pi, float *dst, int64_t plane, int64_t Wp)
{
    const geo *g = &j->g;
    int64_t H = g->in[1], W = g->in[2], pt = g->p[1], pl = g->p[2];
    const float *src = (const float *)j->x + pi * j->x_n;
    memset(dst, 0, (size_t)plane * sizeof(float));
    for (int64_t h = 0; h < H; h++)
        memcpy(dst + (h + pt) * Wp + pl, src + h * W, (size_t)W * sizeof(float));
}

static void direct_pad(void *ctx, int64_t p0, int64_t p1)
{
    const direct_conv *d = ctx;
    const conv_job *j = d->j;
    for (int64_t pi = p0; pi < p1; pi++) {
        int64_t n = pi / j->cin, c = pi % j->cin;
        float *dst = d->xp + n * d->xp_item + c * d->plane_p;
        pad_plane(j, pi, dst, d->plane_p, d->Wp);
        if (c == j->cin - 1) /* the slack the last tiles read past the last plane */
            memset(dst + d->plane_p, 0, (size_t)(d->xp_item - j->cin * d->plane_p) * sizeof(float));
    }
}

typedef void (*direct_kernel_fn)(int64_t K, const float *Ap, const float *b, const int64_t *off,
                                 float *C, int64_t ldc, int mr, int nr, bool accumulate);

/* The 6 x 16 register kernel for the GEMM kernels in use: the AVX-512 one beside the AVX-512
 * GEMM (the same bytes as the AVX2 one, twice the lanes per instruction). */
static direct_kernel_fn direct_kernel(void)
{
    return strcmp(cpu_gemm_kernel_name(), "avx512") ? cpu_conv_direct_6x16_avx2
                                                    : cpu_conv_direct_6x16_avx512;
}

static void direct_units(direct_conv *d, int64_t u0, int64_t u1, float *yb)
{
    const direct_kernel_fn kern = direct_kernel();
    const conv_job *j = d->j;
    const geo *g = &j->g;
    int64_t cig = j->cin / j->groups, cog = j->cout / j->groups, OW = g->out[2];
    for (int64_t u = u0; u < u1; u++) {
        int64_t n = u / d->nblocks, q0 = (u % d->nblocks) * d->qblk;
        int64_t nqb = d->nq - q0 < d->qblk ? d->nq - q0 : d->qblk;
        for (int64_t gi = 0; gi < j->groups; gi++) {
            const float *xg = d->xp + n * d->xp_item + gi * cig * d->plane_p;
            const float *ap = d->ap + gi * d->mp * d->K;
            /* K in blocks, so that a block's slice of the weights and of the image rows
             * stay in L1 while the tile sweeps the output channels */
            for (int64_t k0 = 0; k0 < d->K; k0 += d->kb) {
                int64_t kbn = d->K - k0 < d->kb ? d->K - k0 : d->kb;
                for (int64_t pn = 0; pn < nqb; pn += 16) {
                    int nrr = (int)(nqb - pn < 16 ? nqb - pn : 16);
                    for (int64_t i0 = 0; i0 < cog; i0 += 6) {
                        int mrr = (int)(cog - i0 < 6 ? cog - i0 : 6);
                        kern(kbn, ap + i0 * d->K + k0 * 6, xg + q0 + pn, d->off + k0,
                             yb + i0 * d->qblk + pn, d->qblk, mrr, nrr, k0 > 0);
                    }
                }
            }
            float *y = (float *)j->y + (n * j->cout + gi * cog) * j->y_n;
            int64_t oh0 = q0 / d->Wp, ow0 = q0 % d->Wp;
            for (int64_t co = 0; co < cog; co++) {
                float v = j->bias ? ((const float *)j->bias)[gi * cog + co] : 0.0f;
                const float *t = yb + co * d->qblk;
                float *yr = y + co * j->y_n;
                /* one padded row at a time: its first OW positions are outputs, the rest the
                 * columns that wrap into the right padding */
                for (int64_t i = 0, oh = oh0, ow = ow0; i < nqb; oh++, ow = 0) {
                    int64_t run = d->Wp - ow < nqb - i ? d->Wp - ow : nqb - i;
                    int64_t nout = ow < OW ? (OW - ow < run ? OW - ow : run) : 0;
                    if (nout > 0) cpu_conv_direct_out_avx2(t + i, yr + oh * OW + ow, nout, v);
                    i += run;
                }
            }
        }
    }
}

/* Few reduction terms (K <= 16, one group): rows of outputs written straight into y by
 * cpu_conv_direct_small_avx2, the weights in 8-channel panels (d->ap), a task per output row. */
static void direct_small_rows(void *ctx, int64_t r0, int64_t r1)
{
    const direct_conv *d = ctx;
    const conv_job *j = d->j;
    int64_t OH = j->g.out[1], OW = j->g.out[2];
    for (int64_t r = r0; r < r1; r++) {
        int64_t n = r / OH, oh = r % OH;
        cpu_conv_direct_small_avx2(d->xp + n * d->xp_item + oh * d->Wp, d->off, (int)d->K, d->ap,
                                   (const float *)j->bias, j->cout, OW,
                                   (float *)j->y + n * j->cout * j->y_n + oh * OW, j->y_n);
    }
}

static void direct_range(void *ctx, int64_t u0, int64_t u1)
{
    direct_conv *d = ctx;
    int64_t cog = d->j->cout / d->j->groups;
    /* malloc, not em_alloc: per-task scratch, like the GEMM's own packing buffers */
    float *yb = malloc((size_t)((cog + 6) * d->qblk) * sizeof(float));
    if (!yb) {
        atomic_store(&d->failed, true);
        return;
    }
    direct_units(d, u0, u1, yb);
    free(yb);
}

/* Runs an f32 2-D stride-1 forward convolution through the direct AVX2 path: 1 when done, 0
 * when the path does not apply (nothing written), -1 when memory ran out. */
static int conv_direct(const conv_job *j, int64_t nb)
{
    const geo *g = &j->g;
    if (j->dbl || j->transposed || j->direct || g->k[0] != 1 || g->in[0] != 1 || g->out[0] != 1)
        return 0;
    if (g->s[1] != 1 || g->s[2] != 1 || !cpu_gemm_x86() || atomic_load(&direct_off)) return 0;
    int64_t cig = j->cin / j->groups, cog = j->cout / j->groups, kn = g->k_n;
    if (cig == 0 || cog == 0) return 0;
    direct_conv d = {.j = j};
    d.Wp = g->out[2] + (g->k[2] - 1) * g->d[2];
    d.Hp = g->out[1] + (g->k[1] - 1) * g->d[1];
    /* the padded image must hold the input where the forward's pads put it */
    if (d.Wp < g->in[2] + g->p[2] || d.Hp < g->in[1] + g->p[1]) return 0;
    d.plane_p = d.Hp * d.Wp;
    d.K = cig * kn;
    d.kb = 192; /* 6 x 192 weights and 192 image rows of 64 bytes: L1-sized */
    d.mp = (cog + 5) / 6 * 6;
    d.nq = g->out[1] * d.Wp;
    d.qblk = 384;
    d.nblocks = (d.nq + d.qblk - 1) / d.qblk;
    d.xp_item = j->cin * d.plane_p + 16 + (g->k[2] - 1) * g->d[2];
    d.xp = scratch(nb * d.xp_item, sizeof(float));
    /* 6-row panels per group, or 8-channel ones on the small path */
    int64_t ap_rows = d.mp > (cog + 7) / 8 * 8 ? d.mp : (cog + 7) / 8 * 8;
    d.ap = scratch(j->groups * ap_rows * d.K, sizeof(float));
    d.off = scratch(d.K, sizeof(int64_t));
    int rc = -1;
    if (!d.xp || !d.ap || !d.off) goto out;
    for (int64_t k = 0; k < d.K; k++) {
        int64_t ci = k / kn, t = k % kn, a = t / g->k[2], e = t % g->k[2];
        d.off[k] = ci * d.plane_p + a * g->d[1] * d.Wp + e * g->d[2];
    }
    const float *w = (const float *)j->w; /* [cout, cig * kn] */
    bool small = j->groups == 1 && d.K <= 16;
    if (small) { /* 8-channel panels: ap[(co / 8) K 8 + k 8 + co % 8] */
        for (int64_t co = 0; co < (cog + 7) / 8 * 8; co++)
            for (int64_t k = 0; k < d.K; k++)
                d.ap[co / 8 * d.K * 8 + k * 8 + co % 8] = co < cog ? w[co * d.K + k] : 0.0f;
    } else
        for (int64_t gi = 0; gi < j->groups; gi++)
            for (int64_t i0 = 0; i0 < d.mp; i0 += 6)
                for (int64_t k = 0; k < d.K; k++)
                    for (int64_t r = 0; r < 6; r++)
                        d.ap[gi * d.mp * d.K + i0 * d.K + k * 6 + r] =
                            i0 + r < cog ? w[(gi * cog + i0 + r) * d.K + k] : 0.0f;
    atomic_init(&d.failed, false);
    int64_t planes = nb * j->cin;
    em_parallel_for(planes, d.plane_p >= 4096 ? 1 : 4096 / d.plane_p + 1, direct_pad, &d);
    if (small) /* rows of about 4096 multiply-adds or more per task */
        em_parallel_for(nb * g->out[1], 4096 / (d.K * cog * g->out[2] + 1) + 1, direct_small_rows,
                        &d);
    else
        em_parallel_for(nb * d.nblocks, 1, direct_range, &d);
    rc = atomic_load(&d.failed) ? -1 : 1;
out:
    cpu_cache_free(d.xp);
    cpu_cache_free(d.ap);
    cpu_cache_free(d.off);
    return rc;
}

/* ---- Winograd F(2x2, 3x3) for stride-1 3x3 f32 convolutions (AVX2 kernel set) -------------
 * Each 2 x 2 block of outputs (a tile) comes from a 4 x 4 window of the zero-padded image d:
 * y = A^T [ sum over c of (G g_c G^T) .* (B^T d_c B) ] A, 16 element-wise products per
 * channel pair instead of 36 multiply-adds (2.25x fewer). The 16 positions xi of the
 * transformed window are 16 independent products M_xi [Co, tiles] = U_xi [Co, C] . V_xi [C,
 * tiles], run on the direct path's 6 x 16 register kernel over chunks of WG_TB tiles (V and M
 * of a chunk stay in L2). Transforms use only 0, +-1 and 1/2, so rounding stays close to the
 * direct sums (tests: test_conv_fast, f64 references). */

static atomic_bool wino_off;

void cpu_conv_winograd_enable(bool on)
{
    atomic_store(&wino_off, !on);
}

#define WG_TB  32 /* tiles per chunk: two 16-wide register tiles */
#define WG_TBS 40 /* a row of V or M: WG_TB tiles and room for an 8-tile run's overhang */

typedef struct wino_conv {
    const conv_job *j;
    int64_t C, Co, TH, TW, Hq, Wq, plane, item, mp;
    int64_t rows, rpc, spr; /* tile rows N * TH; rows per chunk (TW <= WG_TB) or segments per
                               row (TW > WG_TB: WG_TB tiles each) */
    float *xp;              /* [N][C][Hq][Wq] zero-padded, 16 floats of slack */
    float *u;               /* [16][mp / 6][C][6]: U_xi in 6-row panels */
    int64_t off[256];       /* row k of V: k * WG_TBS */
    atomic_bool failed;
} wino_conv;

static void wino_pad(void *ctx, int64_t p0, int64_t p1)
{
    const wino_conv *w = ctx;
    for (int64_t pi = p0; pi < p1; pi++)
        pad_plane(w->j, pi, w->xp + pi * w->plane, w->plane, w->Wq);
}

/* Chunk ch: its tile rows [r0, r1) and tile columns [tw0, tw1) of each (q = tile index within
 * the chunk, row by row). */
static void wino_span(const wino_conv *w, int64_t ch, int64_t *r0, int64_t *r1, int64_t *tw0,
                      int64_t *tw1)
{
    if (w->spr == 1) {
        *r0 = ch * w->rpc, *r1 = *r0 + w->rpc < w->rows ? *r0 + w->rpc : w->rows;
        *tw0 = 0, *tw1 = w->TW;
    } else {
        *r0 = ch / w->spr, *r1 = *r0 + 1;
        *tw0 = ch % w->spr * WG_TB, *tw1 = *tw0 + WG_TB < w->TW ? *tw0 + WG_TB : w->TW;
    }
}

static void wino_chunks(void *ctx, int64_t c0, int64_t c1)
{
    wino_conv *w = ctx;
    const direct_kernel_fn kern = direct_kernel();
    const conv_job *j = w->j;
    int64_t C = w->C, Co = w->Co, OH = j->g.out[1], OW = j->g.out[2];
    int64_t vxs = C * WG_TBS, mxs = w->mp * WG_TBS; /* xi strides of V and M */
    float *v = cpu_cache_alloc((size_t)(16 * vxs) * sizeof(float));
    float *m = cpu_cache_alloc((size_t)(16 * mxs) * sizeof(float));
    if (!v || !m) {
        atomic_store(&w->failed, true);
        cpu_cache_free(v), cpu_cache_free(m);
        return;
    }
    for (int64_t ch = c0; ch < c1; ch++) {
        int64_t r0, r1, tw0, tw1;
        wino_span(w, ch, &r0, &r1, &tw0, &tw1);
        int64_t per = tw1 - tw0, nt = (r1 - r0) * per;
        /* V[xi][c][q] = (B^T d B)[xi], 8 tiles of a row at a time (a row's last run spills
           into the next row's first columns, which that row then overwrites, or into the
           row's slack) */
        for (int64_t c = 0; c < C; c++)
            for (int64_t r = r0; r < r1; r++) {
                int64_t n = r / w->TH, th = r % w->TH;
                const float *d = w->xp + n * w->item + c * w->plane + 2 * th * w->Wq;
                float *vr = v + c * WG_TBS + (r - r0) * per - tw0;
                for (int64_t tw = tw0; tw < tw1; tw += 8)
                    cpu_wino_in_avx2(d + 2 * tw, w->Wq, vr + tw, vxs);
            }
        if (nt < WG_TB) /* zeros in the columns no tile fills */
            for (int64_t r = 0; r < 16 * C; r++)
                memset(v + r * WG_TBS + nt, 0, (size_t)(WG_TB - nt) * sizeof(float));
        /* M_xi [Co][q] = U_xi . V_xi on the register kernel (columns past nt unread) */
        for (int xi = 0; xi < 16; xi++)
            for (int64_t k0 = 0; k0 < C; k0 += 192) {
                int64_t kb = C - k0 < 192 ? C - k0 : 192;
                for (int64_t q0 = 0; q0 < nt; q0 += 16)
                    for (int64_t i0 = 0; i0 < Co; i0 += 6) {
                        int mr = (int)(Co - i0 < 6 ? Co - i0 : 6);
                        kern(kb, w->u + ((int64_t)xi * w->mp + i0) * C + k0 * 6,
                             v + xi * vxs + k0 * WG_TBS + q0, w->off,
                             m + xi * mxs + i0 * WG_TBS + q0, WG_TBS, mr, 16, k0 > 0);
                    }
            }
        /* y = A^T M A + bias, 8 tiles of a row at a time */
        for (int64_t r = r0; r < r1; r++) {
            int64_t n = r / w->TH, oh = 2 * (r % w->TH);
            for (int64_t co = 0; co < Co; co++) {
                float b = j->bias ? ((const float *)j->bias)[co] : 0.0f;
                float *y = (float *)j->y + (n * j->cout + co) * j->y_n + oh * OW;
                const float *mr = m + co * WG_TBS + (r - r0) * per - tw0;
                for (int64_t tw = tw0; tw < tw1; tw += 8) {
                    int64_t cols = OW - 2 * tw, lim = 2 * (tw1 - tw);
                    if (cols > lim) cols = lim;
                    cpu_wino_out_avx2(mr + tw, mxs, b, y + 2 * tw, OW, oh + 1 < OH,
                                      (int)(cols < 16 ? cols : 16));
                }
            }
        }
    }
    cpu_cache_free(v);
    cpu_cache_free(m);
}

/* The Winograd path: 1 when done, 0 when it does not apply, -1 when memory ran out. */
static int conv_winograd(const conv_job *j, int64_t nb)
{
    const geo *g = &j->g;
    if (j->dbl || j->transposed || j->direct || j->groups != 1 || g->k[0] != 1 || g->in[0] != 1 ||
        g->out[0] != 1 || atomic_load(&wino_off))
        return 0;
    if (g->k[1] != 3 || g->k[2] != 3 || g->s[1] != 1 || g->s[2] != 1 || g->d[1] != 1 ||
        g->d[2] != 1 || !cpu_gemm_x86())
        return 0;
    int64_t C = j->cin, Co = j->cout, OH = g->out[1], OW = g->out[2];
    if (C < 16 || C > 256 || Co < 16 || OH < 2 || OW < 2) return 0;
    wino_conv *w = calloc(1, sizeof *w);
    if (!w) return -1;
    w->j = j, w->C = C, w->Co = Co;
    w->TH = (OH + 1) / 2, w->TW = (OW + 1) / 2, w->rows = nb * w->TH;
    w->rpc = w->TW <= WG_TB ? WG_TB / w->TW : 1;
    w->spr = w->TW <= WG_TB ? 1 : (w->TW + WG_TB - 1) / WG_TB;
    w->Hq = 2 * w->TH + 2, w->Wq = 2 * w->TW + 2;
    if (w->Hq < g->in[1] + g->p[1] || w->Wq < g->in[2] + g->p[2]) {
        free(w);
        return 0;
    }
    w->plane = w->Hq * w->Wq, w->item = C * w->plane, w->mp = (Co + 5) / 6 * 6;
    for (int64_t k = 0; k < C; k++) w->off[k] = k * WG_TBS;
    w->xp = scratch(nb * w->item + 16, sizeof(float));
    w->u = scratch(16 * w->mp * C, sizeof(float));
    int rc = -1;
    if (!w->xp || !w->u) goto out;
    /* U_xi = (G g G^T)[xi], G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1], in 6-row panels */
    const float *wt = (const float *)j->w;
    memset(w->u, 0, (size_t)(16 * w->mp * C) * sizeof(float));
    for (int64_t co = 0; co < Co; co++)
        for (int64_t c = 0; c < C; c++) {
            const float *k = wt + (co * C + c) * 9;
            float t[4][3], u[4][4];
            for (int e = 0; e < 3; e++) {
                t[0][e] = k[e], t[3][e] = k[6 + e];
                t[1][e] = 0.5f * (k[e] + k[3 + e] + k[6 + e]);
                t[2][e] = 0.5f * (k[e] - k[3 + e] + k[6 + e]);
            }
            for (int i = 0; i < 4; i++) {
                u[i][0] = t[i][0], u[i][3] = t[i][2];
                u[i][1] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
                u[i][2] = 0.5f * (t[i][0] - t[i][1] + t[i][2]);
            }
            for (int xi = 0; xi < 16; xi++)
                w->u[((int64_t)xi * w->mp + co / 6 * 6) * C + c * 6 + co % 6] = u[xi / 4][xi % 4];
        }
    atomic_init(&w->failed, false);
    memset(w->xp + nb * w->item, 0, 16 * sizeof(float)); /* the windows' overhang reads it */
    em_parallel_for(nb * C, 1, wino_pad, w);
    int64_t chunks = w->spr == 1 ? (w->rows + w->rpc - 1) / w->rpc : w->rows * w->spr;
    em_parallel_for(chunks, 1, wino_chunks, w);
    rc = atomic_load(&w->failed) ? -1 : 1;
out:
    cpu_cache_free(w->xp);
    cpu_cache_free(w->u);
    free(w);
    return rc;
}

static void conv_items(void *ctx, int64_t b, int64_t e)
{
    const conv_job *j = ctx;
    for (int64_t n = b; n < e; n++) conv_item(j, j->first + n);
}

static em_status exec_conv(const ir_op *op)
{
    bool transposed = op->kind == EM_OP_CONV_TRANSPOSE;
    const ir_tensor *x = op->in[0], *w = op->in[1], *b = op->n_in > 2 ? op->in[2] : NULL;
    ir_tensor *out = op->out[0];
    int nsp = op->p.conv.nd;
    bool batched = x->rank == nsp + 2;
    int cd = batched ? 1 : 0;
    int64_t nb = batched ? x->shape[0] : 1;
    if (ir_numel(out) == 0) return EM_OK;

    conv_job j;
    memset(&j, 0, sizeof j);
    j.transposed = transposed;
    j.dbl = x->dtype == EM_F64;
    j.groups = op->p.conv.groups;
    j.cin = x->shape[cd];
    j.cout = out->shape[cd];
    geo *g = &j.g;
    bool unit = true;
    /* spatial dims right-aligned in the 3 slots: the innermost runs are the image rows */
    ir_win3 w3;
    ir_conv_windows(op->kind, &op->p.conv, x->shape, x->rank, w->shape, out->shape, out->rank, &w3);
    for (int q = 0; q < 3; q++) {
        g->k[q] = w3.k[q], g->s[q] = w3.s[q], g->p[q] = w3.p[q], g->d[q] = w3.d[q];
        g->in[q] = w3.in[q], g->out[q] = w3.out[q];
        if (g->k[q] != 1 || g->s[q] != 1 || g->p[q] != 0 || w3.in[q] != w3.out[q]) unit = false;
    }
    geo_finish(g);
    g->c = transposed ? j.cout / j.groups : j.cin / j.groups;
    j.x_n = transposed ? g->out_n : g->in_n;
    j.y_n = transposed ? g->in_n : g->out_n;
    j.direct = unit;

    em_dtype ct = j.dbl ? EM_F64 : EM_F32;
    size_t es = em_dtype_size(ct);
    void *xo = NULL, *wo = NULL, *bo = NULL, *yo = NULL, *co = NULL;
    em_status st = EM_ERR_OOM;
    j.x = as_contig(x, ct, &xo);
    j.w = as_contig(w, ct, &wo);
    if (!j.x || !j.w) goto done;
    if (b) {
        bo = scratch(j.cout, es);
        if (!bo) goto done;
        size_t bes = em_dtype_size(b->dtype);
        for (int64_t i = 0; i < j.cout; i++) {
            double v = ir_get_f64(ir_ptr(b) + i * b->strides[0] * (int64_t)bes, b->dtype);
            if (j.dbl)
                ((double *)bo)[i] = v;
            else
                ((float *)bo)[i] = (float)v;
        }
        j.bias = bo;
    }
    if (out->dtype == ct) {
        j.y = ir_ptr(out);
    } else {
        j.y = yo = scratch(ir_numel(out), es);
        if (!yo) goto done;
    }

    int fused = conv_winograd(&j, nb);
    if (fused == 0) fused = conv_direct(&j, nb);
    if (fused == 0) fused = conv_fused(&j, nb);
    if (fused != 0) {
        st = fused > 0 ? EM_OK : EM_ERR_OOM;
        if (fused > 0 && yo) {
            wrapped wy;
            wrap(&wy, yo, ct, out);
            cpu_copy_convert(out, &wy.t);
        }
        goto done;
    }
    /* Work per item (multiply-adds) decides between batch-parallel items with inline GEMMs and
     * one item at a time with the GEMM on the pool; either gives the same numbers. */
    int64_t per_item = j.cout * (transposed ? j.x_n * (j.cin / j.groups) * g->k_n
                                            : j.y_n * (j.cin / j.groups) * g->k_n);
    bool batch_par =
        nb > 1 && nb * per_item >= ((int64_t)1 << 20) && (nb >= 8 || per_item < ((int64_t)1 << 22));
    j.col_elems = j.direct ? 0 : g->c * g->k_n * (transposed ? j.x_n : j.y_n);
    if (j.direct && j.cin / j.groups == 0) j.col_elems = 0;
    int64_t slots = 1;
    if (batch_par && j.col_elems > 0) {
        slots = COL_BUDGET / (j.col_elems * (int64_t)es);
        if (slots < 1) slots = 1;
        if (slots > nb) slots = nb;
    } else if (batch_par) {
        slots = nb;
    }
    if (j.col_elems > 0) {
        co = scratch(slots * j.col_elems, es);
        if (!co) goto done;
        j.col = co;
    }
    if (batch_par) {
        j.per_slot = true;
        for (int64_t n0 = 0; n0 < nb; n0 += slots) {
            j.first = n0;
            em_parallel_for(nb - n0 < slots ? nb - n0 : slots, 1, conv_items, &j);
        }
    } else {
        conv_items(&j, 0, nb);
    }
    if (yo) {
        wrapped wy;
        wrap(&wy, yo, ct, out);
        cpu_copy_convert(out, &wy.t);
    }
    st = EM_OK;
done:
    cpu_cache_free(xo);
    cpu_cache_free(wo);
    cpu_cache_free(bo);
    cpu_cache_free(yo);
    cpu_cache_free(co);
    return st;
}

/* ---- im2col / col2im --------------------------------------------------------------------- */

/* IM2COL: x [N, C, H, W] -> [N, C*kh*kw, L]; COL2IM: cols [N, C*kh*kw, L] -> [N, C, H, W].
 * Batch and channels fold into one channel axis, as both layouts are channel-major per item. */
static em_status exec_fold(const ir_op *op)
{
    bool to_cols = op->kind == EM_OP_IM2COL;
    const ir_tensor *src = op->in[0];
    ir_tensor *out = op->out[0];
    if (ir_numel(out) == 0) return EM_OK;
    geo g;
    memset(&g, 0, sizeof g);
    ir_win3 w3;
    ir_fold_windows(&op->p.fold, &w3);
    for (int q = 0; q < 3; q++) {
        g.k[q] = w3.k[q], g.s[q] = w3.s[q], g.p[q] = w3.p[q], g.d[q] = w3.d[q];
        g.in[q] = w3.in[q], g.out[q] = w3.out[q];
    }
    geo_finish(&g);
    /* channels over the whole batch */
    const ir_tensor *image = to_cols ? src : out;
    g.c = ir_numel(image) / (g.in_n ? g.in_n : 1);

    bool dbl = src->dtype == EM_F64;
    em_dtype ct = dbl ? EM_F64 : EM_F32;
    size_t es = em_dtype_size(ct);
    void *so = NULL, *yo = NULL;
    em_status st = EM_ERR_OOM;
    const void *s = as_contig(src, ct, &so);
    void *y = ir_ptr(out);
    if (!s) goto done;
    if (out->dtype != ct) {
        y = yo = scratch(ir_numel(out), es);
        if (!yo) goto done;
    }
    if (!to_cols) memset(y, 0, (size_t)ir_numel(out) * es);
    fold_run(&g, dbl, s, y, to_cols);
    if (yo) {
        wrapped wy;
        wrap(&wy, yo, ct, out);
        cpu_copy_convert(out, &wy.t);
    }
    st = EM_OK;
done:
    cpu_cache_free(so);
    cpu_cache_free(yo);
    return st;
}

em_status cpu_exec_conv(const ir_op *op)
{
    switch (op->kind) {
    case EM_OP_CONV:
    case EM_OP_CONV_TRANSPOSE: return exec_conv(op);
    case EM_OP_IM2COL:
    case EM_OP_COL2IM: return exec_fold(op);
    default: break;
    }
    return em_error(EM_ERR_UNSUPPORTED, "cpu: op %s is not a convolution op", em_op_name(op->kind));
}
