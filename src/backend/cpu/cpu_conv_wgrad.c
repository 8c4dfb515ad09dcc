/* CPU kernel of CONV_WEIGHT_GRAD, the weight gradient of a conv2d, as ONE GEMM over the whole
 * batch: gw [Co, C*kh*kw] = gy' [Co, N*OH*OW] . cols^T, whose im2col operand cols is never
 * written: the GEMM's packing callback reads its panels straight from the zero-padded images
 * (an implicit im2col), so the column matrix (kh*kw times the image) costs no memory pass. */
#include <assert.h>
#include <string.h>

#include "cpu.h"
#include "cpu_cache.h"
#include "cpu_conv_direct.h"
#include "cpu_gemm.h"

/* cols[j, q] for column j of C*kh*kw and position q = (n, oh, ow) of N*OH*OW is the padded
 * image at (n, c, oh sh + a dh, ow sw + b dw), the column j = (c, a, b) for channel-major images
 * [N, C, Hp, Wp] or j = (a, b, c) for channels-last ones [N, Hp, Wp, C] (then 8 consecutive
 * columns are 8 consecutive floats of the image: vector copies instead of transposes). */
typedef struct wg_cols {
    const void *xp; /* the padded images in the work type */
    bool dbl, avx2, nhwc;
    int64_t C, kh, kw, Wp, OH, OW, item; /* item = C * Hp * Wp */
    int64_t sh, sw, dh, dw;              /* strides and dilations */
} wg_cols;

#define WG_MAXW 64 /* widest register tile side of any kernel set */

/* dst[r * w + c] = b[off[c] + r * step] for r < run, c < n; zeros for n <= c < w. `groups`: the
 * offsets run in whole groups of 8 consecutive elements (channels-last images). */
static void pack_run(const void *b, bool dbl, bool avx2, bool groups, int64_t step,
                     const int64_t *off, int n, int w, int64_t run, void *dst)
{
    if (dbl) {
        const double *s = b;
        double *d = dst;
        for (int64_t r = 0; r < run; r++, d += w, s += step) {
            for (int c = 0; c < n; c++) d[c] = s[off[c]];
            for (int c = n; c < w; c++) d[c] = 0;
        }
    } else if (avx2 && groups && n % 8 == 0 && w % 8 == 0) {
        cpu_conv_wgrad_copy_avx2(b, step, off, n, w, run, dst);
    } else if (avx2 && (step == 1 || step == 2)) {
        cpu_conv_wgrad_pack_avx2(b, step, off, n, w, run, dst);
    } else {
        const float *s = b;
        float *d = dst;
        for (int64_t r = 0; r < run; r++, d += w, s += step) {
            for (int c = 0; c < n; c++) d[c] = s[off[c]];
            for (int c = n; c < w; c++) d[c] = 0;
        }
    }
}

/* The GEMM's packing callback: dst[k * w + c] = cols[j0 + c, k0 + k], zeros for c >= n. A
 * block of positions is walked one output row (a run of OW positions, or what is left of it)
 * at a time: along a run, every column reads the image at a fixed step (sw, or sw C
 * channels-last). */
static void pack_cols(const void *vc, int64_t k0, int64_t kc, int64_t j0, int n, int w, void *dst)
{
    const wg_cols *x = vc;
    assert(n <= w && w <= WG_MAXW);
    int64_t off[WG_MAXW], kk = x->kh * x->kw, plane = x->item / x->C;
    int64_t step = x->nhwc ? x->C : 1, row = x->Wp * step;
    size_t es = x->dbl ? sizeof(double) : sizeof(float);
    for (int c = 0; c < n; c++) {
        int64_t j = j0 + c;
        if (x->nhwc) {
            int64_t t = j / x->C;
            off[c] = ((t / x->kw) * x->dh * x->Wp + t % x->kw * x->dw) * x->C + j % x->C;
        } else {
            int64_t t = j % kk;
            off[c] = (j / kk) * plane + (t / x->kw) * x->dh * x->Wp + t % x->kw * x->dw;
        }
    }
    int64_t L = x->OH * x->OW, img = k0 / L, l = k0 % L, oh = l / x->OW, ow = l % x->OW;
    for (int64_t k = 0; k < kc;) {
        int64_t run = x->OW - ow < kc - k ? x->OW - ow : kc - k;
        int64_t base = img * x->item + oh * x->sh * row + ow * x->sw * step;
        pack_run((const char *)x->xp + (size_t)base * es, x->dbl, x->avx2, x->nhwc, x->sw * step,
                 off, n, w, run, (char *)dst + (size_t)(k * w) * es);
        k += run;
        ow += run;
        if (ow == x->OW) {
            ow = 0;
            if (++oh == x->OH) oh = 0, img++;
        }
    }
}

/* gy as the product's other operand, Y[co, q] = gy[n, co, l] for q = (n, l), l < L = OH*OW,
 * packed straight from gy when its planes are contiguous in the work type: within one image the
 * rows of Y are rows of gy. */
typedef struct wg_rows {
    const void *y;
    bool dbl, avx2;
    int64_t L, sn, sc; /* gy's element strides along n and co */
} wg_rows;

static void pack_rows(const void *vc, int64_t k0, int64_t kc, int64_t i0, int n, int w, void *dst)
{
    const wg_rows *g = vc;
    assert(n <= w && w <= WG_MAXW);
    int64_t off[WG_MAXW];
    size_t es = g->dbl ? sizeof(double) : sizeof(float);
    for (int c = 0; c < n; c++) off[c] = (i0 + c) * g->sc;
    int64_t img = k0 / g->L, l = k0 % g->L;
    for (int64_t k = 0; k < kc; l = 0, img++) {
        int64_t run = g->L - l < kc - k ? g->L - l : kc - k;
        pack_run((const char *)g->y + (img * g->sn + l) * (int64_t)es, g->dbl, g->avx2, false, 1,
                 off, n, w, run, (char *)dst + (size_t)(k * w) * es);
        k += run;
    }
}

/* The channels-last padded images: xp[n, h + pt, w + pl, c] = x[n, c, h, w], zeros around. */
typedef struct nhwc_job {
    const void *x;
    int64_t xs[4]; /* x's element strides */
    void *xp;
    bool dbl, avx2;
    int64_t C, H, W, Hp, Wp, pt, pl;
} nhwc_job;

#define NHWC_ROWS(T, AVX)                                                                          \
    for (int64_t rw = r0; rw < r1; rw++) {                                                         \
        int64_t n = rw / j->Hp, h = rw % j->Hp - j->pt;                                            \
        T *d = (T *)j->xp + rw * j->Wp * j->C;                                                     \
        if (h < 0 || h >= j->H) {                                                                  \
            memset(d, 0, (size_t)(j->Wp * j->C) * sizeof(T));                                      \
            continue;                                                                              \
        }                                                                                          \
        memset(d, 0, (size_t)(j->pl * j->C) * sizeof(T));                                          \
        memset(d + (j->pl + j->W) * j->C, 0, (size_t)((j->Wp - j->pl - j->W) * j->C) * sizeof(T)); \
        const T *s = (const T *)j->x + n * j->xs[0] + h * j->xs[2];                                \
        if (AVX) {                                                                                 \
            cpu_conv_wgrad_nhwc_row_avx2((const float *)(const void *)s, j->xs[1], j->C, j->W,     \
                                         (float *)(void *)(d + j->pl * j->C));                     \
            continue;                                                                              \
        }                                                                                          \
        for (int64_t c = 0; c < j->C; c++) {                                                       \
            const T *sc = s + c * j->xs[1];                                                        \
            T *dc = d + j->pl * j->C + c;                                                          \
            for (int64_t w = 0; w < j->W; w++) dc[w * j->C] = sc[w * j->xs[3]];                    \
        }                                                                                          \
    }

static void nhwc_rows(void *ctx, int64_t r0, int64_t r1)
{
    const nhwc_job *j = ctx;
    if (j->dbl) {
        NHWC_ROWS(double, false)
    } else {
        bool avx = j->avx2 && j->xs[3] == 1;
        NHWC_ROWS(float, avx)
    }
}

/* A view of scratch memory (any strides; offset in elements), for cpu_copy_convert. */
typedef struct wg_view {
    ir_tensor t;
} wg_view;

static ir_tensor *view_of(wg_view *v, void *data, em_dtype dt, const int64_t *shape,
                          const int64_t *strides, int64_t offset)
{
    memset(v, 0, sizeof *v);
    v->t.data = (char *)data + offset * (int64_t)em_dtype_size(dt);
    v->t.device = EM_CPU;
    v->t.dtype = dt;
    v->t.rank = 4;
    memcpy(v->t.shape, shape, 4 * sizeof(int64_t));
    memcpy(v->t.strides, strides, 4 * sizeof(int64_t));
    return &v->t;
}

/* The dot-product path (cpu_conv_wgrad_dots_avx2): f32 gy with contiguous rows and planes, at
 * most 12 columns; the GEMM would spend most of its time packing such thin panels (conv1 of
 * the benchmark CNN: 9 columns). */
typedef struct dots_job {
    const float *gy, *xp;
    int64_t sn, sc, item, Wp, N, OH, OW;
    const int64_t *off;
    int J;
    float *gw;
} dots_job;

static void dots_range(void *ctx, int64_t c0, int64_t c1)
{
    const dots_job *d = ctx;
    cpu_conv_wgrad_dots_avx2(d->gy, d->sn, d->sc, d->xp, d->item, d->Wp, d->off, d->J, d->N, d->OH,
                             d->OW, c0, c1, d->gw);
}

static em_status wgrad_dots(const ir_op *op, const ir_tensor *x, const ir_tensor *gy,
                            ir_tensor *out)
{
    int64_t N = x->shape[0], C = x->shape[1], Co = gy->shape[1], OH = gy->shape[2];
    const em_p_wgrad *wg = &op->p.wgrad;
    int64_t OW = gy->shape[3], kh = wg->kernel[0], kw = wg->kernel[1], pt = wg->pad_lo[0],
            pl = wg->pad_lo[1];
    int64_t Hp = x->shape[2] + pt + wg->pad_hi[0], Wp = x->shape[3] + pl + wg->pad_hi[1];
    int64_t item = C * Hp * Wp, off[12];
    int J = (int)(C * kh * kw);
    for (int j = 0; j < J; j++)
        off[j] = (j / (kh * kw)) * Hp * Wp + (j % (kh * kw) / kw) * Wp + j % kw;
    float *xp = cpu_cache_alloc((size_t)(N * item) * sizeof(float));
    bool direct = out->dtype == EM_F32 && ir_is_contiguous(out);
    float *gw = direct ? ir_ptr(out) : cpu_cache_alloc((size_t)(Co * J) * sizeof(float));
    em_status st = EM_ERR_OOM;
    if (xp && gw) {
        wg_view vx, vc;
        memset(xp, 0, (size_t)(N * item) * sizeof(float));
        int64_t xst[4] = {item, Hp * Wp, Wp, 1};
        cpu_copy_convert(view_of(&vx, xp, EM_F32, x->shape, xst, pt * Wp + pl), x);
        dots_job d = {.gy = (const float *)(const void *)ir_ptr(gy),
                      .xp = xp,
                      .sn = gy->strides[0],
                      .sc = gy->strides[1],
                      .item = item,
                      .Wp = Wp,
                      .N = N,
                      .OH = OH,
                      .OW = OW,
                      .off = off,
                      .J = J,
                      .gw = gw};
        /* one task per output channel at the least: results never depend on the split */
        em_parallel_for(Co, 1, dots_range, &d);
        if (!direct) {
            int64_t cs[4] = {J, kh * kw, kw, 1};
            cpu_copy_convert(out, view_of(&vc, gw, EM_F32, out->shape, cs, 0));
        }
        st = EM_OK;
    }
    cpu_cache_free(xp);
    if (!direct) cpu_cache_free(gw);
    return st;
}

/* x [N, C, H, W], gy [N, Co, OH, OW] -> gw [Co, C, kh, kw] (ops_conv.c). f16/bf16 go through
 * f32. The product takes the longer of Co and C*kh*kw as its columns, the implicit im2col as
 * the operand on that side (B when C*kh*kw >= Co, else A), so the long reduction runs in the
 * GEMM's one-region long-K path on two threads. B side with C a multiple of 8: the images are
 * padded channels-last and the columns taken tap-major, gw permuted back at the end. */
em_status cpu_exec_conv_wgrad(const ir_op *op)
{
    const ir_tensor *x = op->in[0], *gy = op->in[1];
    ir_tensor *out = op->out[0];
    if (ir_numel(out) == 0) return EM_OK;
    bool dbl = x->dtype == EM_F64;
    em_dtype ct = dbl ? EM_F64 : EM_F32;
    size_t es = em_dtype_size(ct);
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
    int64_t Co = gy->shape[1], OH = gy->shape[2], OW = gy->shape[3];
    const em_p_wgrad *wg = &op->p.wgrad;
    int64_t kh = wg->kernel[0], kw = wg->kernel[1], pt = wg->pad_lo[0], pl = wg->pad_lo[1];
    int64_t Hp = H + pt + wg->pad_hi[0], Wp = W + pl + wg->pad_hi[1];
    int64_t ckk = C * kh * kw, K = N * OH * OW;
    int64_t sh = wg->stride[0], sw = wg->stride[1], dh = wg->dilation[0], dw = wg->dilation[1];
    bool unit = sh == 1 && sw == 1 && dh == 1 && dw == 1;
    if (!dbl && unit && ckk <= 12 && gy->dtype == EM_F32 && gy->strides[3] == 1 &&
        (OH == 1 || gy->strides[2] == OW) && cpu_gemm_x86())
        return wgrad_dots(op, x, gy, out);
    bool b_side = ckk >= Co;
    wg_cols cols = {.dbl = dbl,
                    .avx2 = cpu_gemm_x86(),
                    /* channels-last where whole 8-float groups of a panel are one tap */
                    .nhwc = b_side && C % 8 == 0,
                    .C = C,
                    .kh = kh,
                    .kw = kw,
                    .Wp = Wp,
                    .OH = OH,
                    .OW = OW,
                    .item = C * Hp * Wp,
                    .sh = sh,
                    .sw = sw,
                    .dh = dh,
                    .dw = dw};
    void *xp = cpu_cache_alloc((size_t)(N * cols.item > 0 ? N * cols.item : 1) * es);
    /* gy as B (its channels the product's columns) is packed straight from gy where its planes
     * are contiguous in the work type; else, and as A, from a copy gy' [Co, K] (on the A side
     * every long-K task packs all of A, and packing it twice from gy's rows costs more than the
     * copy plus the GEMM's own row-panel packing) */
    bool gy_direct = !b_side && gy->dtype == ct && gy->strides[3] == 1 && gy->strides[2] == OW;
    void *gt = gy_direct ? NULL : cpu_cache_alloc((size_t)(K * Co > 0 ? K * Co : 1) * es);
    void *xo = NULL; /* x converted to the work type, for channels-last f16/bf16 */
    /* C of the product: out itself when it is contiguous in the work type and in its order */
    bool direct = b_side && !cols.nhwc && out->dtype == ct && ir_is_contiguous(out);
    void *cm = direct ? ir_ptr(out) : cpu_cache_alloc((size_t)(ckk * Co) * es);
    em_status st = EM_ERR_OOM;
    if (!xp || (!gy_direct && !gt) || !cm) goto done;
    wg_view vx, vg, vc;
    if (cols.nhwc) {
        nhwc_job nj = {.x = ir_ptr(x),
                       .xp = xp,
                       .dbl = dbl,
                       .avx2 = cols.avx2,
                       .C = C,
                       .H = H,
                       .W = W,
                       .Hp = Hp,
                       .Wp = Wp,
                       .pt = pt,
                       .pl = pl};
        memcpy(nj.xs, x->strides, sizeof nj.xs);
        if (x->dtype != ct) {
            xo = cpu_cache_alloc((size_t)(N * C * H * W) * es);
            if (!xo) goto done;
            int64_t cs[4] = {C * H * W, H * W, W, 1};
            cpu_copy_convert(view_of(&vx, xo, ct, x->shape, cs, 0), x);
            nj.x = xo;
            memcpy(nj.xs, cs, sizeof nj.xs);
        }
        int64_t rows = N * Hp;
        em_parallel_for(rows, 4096 / (Wp * C + 1) + 1, nhwc_rows, &nj);
    } else {
        /* the padded images: zeros, then x at (pt, pl) of each plane */
        memset(xp, 0, (size_t)(N * cols.item) * es);
        int64_t xst[4] = {cols.item, Hp * Wp, Wp, 1};
        cpu_copy_convert(view_of(&vx, xp, ct, x->shape, xst, pt * Wp + pl), x);
    }
    wg_rows rows = {.y = ir_ptr(gy), .dbl = dbl, .avx2 = cols.avx2, .L = OH * OW};
    if (gy_direct) {
        rows.sn = gy->strides[0];
        rows.sc = gy->strides[1];
    } else {
        /* gy' [Co, N * OH * OW]: gy with its first two dims swapped */
        int64_t gst[4] = {OH * OW, K, OW, 1};
        cpu_copy_convert(view_of(&vg, gt, ct, gy->shape, gst, 0), gy);
    }
    cols.xp = xp;
    cpu_gemm_src src = {.pack = pack_cols, .ctx = &cols}, ysrc = {.pack = pack_rows, .ctx = &rows};
    const cpu_gemm_src *gs = gy_direct ? &ysrc : NULL;
    const cpu_gemm_src *as = b_side ? gs : &src, *bs = b_side ? &src : gs;
    int64_t M = b_side ? Co : ckk, Nn = b_side ? ckk : Co;
    bool ok;
    if (dbl)
        ok = cpu_dgemm_src(false, true, M, Nn, K, 1.0, gt, K, as, gt, K, bs, 0.0, cm, Nn, NULL);
    else
        ok = cpu_sgemm_src(false, true, M, Nn, K, 1.0f, gt, K, as, gt, K, bs, 0.0f, cm, Nn, NULL);
    if (!ok) goto done;
    if (!direct) {
        /* cm is gw [Co, ckk] ([Co, kh, kw, C] channels-last) or, from the A side, gw^T */
        int64_t cs[4] = {ckk, kh * kw, kw, 1}, ts[4] = {1, kh * kw * Co, kw * Co, Co};
        int64_t ns[4] = {ckk, 1, kw * C, C};
        cpu_copy_convert(out, view_of(&vc, cm, ct, out->shape,
                                      cols.nhwc ? ns
                                      : b_side  ? cs
                                                : ts,
                                      0));
    }
    st = EM_OK;
done:
    cpu_cache_free(xp);
    cpu_cache_free(gt);
    cpu_cache_free(xo);
    if (!direct) cpu_cache_free(cm);
    return st;
}
