/* CPU kernel of CONV_WEIGHT_GRAD, the weight gradient of a stride-1 conv2d, as ONE GEMM over the
 * whole batch: gw [Co, C*kh*kw] = gy' [Co, N*OH*OW] . cols^T, whose im2col operand cols is never
 * written: the GEMM's packing callback reads its panels straight from the zero-padded images
 * (an implicit im2col), so the column matrix (kh*kw times the image) costs no memory pass. */
#include <string.h>

#include "cpu.h"
#include "cpu_cache.h"
#include "cpu_conv_direct.h"
#include "cpu_gemm.h"

/* cols[j, q] for column j = (c, a, b) of C*kh*kw and position q = (n, oh, ow) of N*OH*OW is
 * the padded image xp[n, c, oh + a, ow + b]. */
typedef struct wg_cols {
    const void *xp; /* [N, C, Hp, Wp] in the work type, then WG_SLACK zeros */
    bool dbl, avx2;
    int64_t kh, kw, Wp, OH, OW, plane, item; /* plane = Hp * Wp, item = C * plane */
} wg_cols;

#define WG_MAXW  64 /* widest register tile side of any kernel set */
#define WG_SLACK 8  /* the AVX2 packer reads up to 7 elements past a row's last position */

/* The GEMM's packing callback: dst[k * w + c] = cols[j0 + c, k0 + k], zeros for c >= n. A
 * block of positions is walked one output row (a run of OW positions, or what is left of it)
 * at a time: along a run, every column reads consecutive elements of the padded image. */
static void pack_cols(const void *vc, int64_t k0, int64_t kc, int64_t j0, int n, int w, void *dst)
{
    const wg_cols *x = vc;
    int64_t off[WG_MAXW], kk = x->kh * x->kw;
    for (int c = 0; c < n; c++) {
        int64_t j = j0 + c, t = j % kk;
        off[c] = (j / kk) * x->plane + (t / x->kw) * x->Wp + t % x->kw;
    }
    int64_t L = x->OH * x->OW, img = k0 / L, l = k0 % L, oh = l / x->OW, ow = l % x->OW;
    bool vec = x->avx2 && w % 8 == 0;
    for (int64_t k = 0; k < kc;) {
        int64_t run = x->OW - ow < kc - k ? x->OW - ow : kc - k;
        int64_t base = img * x->item + oh * x->Wp + ow;
        if (x->dbl) {
            const double *b = (const double *)x->xp + base;
            double *d = (double *)dst + k * w;
            for (int64_t r = 0; r < run; r++, d += w) {
                for (int c = 0; c < n; c++) d[c] = b[r + off[c]];
                for (int c = n; c < w; c++) d[c] = 0;
            }
        } else if (vec) {
            cpu_conv_wgrad_pack_avx2((const float *)x->xp + base, off, n, w, run,
                                     (float *)dst + k * w);
        } else {
            const float *b = (const float *)x->xp + base;
            float *d = (float *)dst + k * w;
            for (int64_t r = 0; r < run; r++, d += w) {
                for (int c = 0; c < n; c++) d[c] = b[r + off[c]];
                for (int c = n; c < w; c++) d[c] = 0;
            }
        }
        k += run;
        ow += run;
        if (ow == x->OW) {
            ow = 0;
            if (++oh == x->OH) oh = 0, img++;
        }
    }
}

/* A stack-only tensor header over scratch memory (any strides), for cpu_copy_convert. */
typedef struct wg_view {
    em_storage st;
    em_tensor t;
} wg_view;

static em_tensor *view_of(wg_view *v, void *data, em_dtype dt, const int64_t *shape,
                          const int64_t *strides, int64_t offset)
{
    memset(v, 0, sizeof *v);
    v->st.data = data;
    v->st.device = EM_CPU;
    v->t.dtype = dt;
    v->t.rank = 4;
    memcpy(v->t.shape, shape, 4 * sizeof(int64_t));
    memcpy(v->t.strides, strides, 4 * sizeof(int64_t));
    v->t.offset = offset;
    v->t.storage = &v->st;
    return &v->t;
}

/* x [N, C, H, W], gy [N, Co, OH, OW] -> gw [Co, C, kh, kw] (ops_conv.c). f16/bf16 go through
 * f32. The product takes the longer of Co and C*kh*kw as its columns, the implicit im2col as
 * the operand on that side (B when C*kh*kw >= Co, else A), so the long reduction runs in the
 * GEMM's one-region long-K path on two threads. */
em_status cpu_exec_conv_wgrad(const em_op *op)
{
    const em_tensor *x = op->in[0], *gy = op->in[1];
    em_tensor *out = op->out[0];
    if (tn_numel(out) == 0) return EM_OK;
    bool dbl = x->dtype == EM_F64;
    em_dtype ct = dbl ? EM_F64 : EM_F32;
    size_t es = em_dtype_size(ct);
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
    int64_t Co = gy->shape[1], OH = gy->shape[2], OW = gy->shape[3];
    int64_t kh = op->i[0], kw = op->i[1], pt = op->i[2], pl = op->i[3];
    int64_t Hp = H + pt + op->i[4], Wp = W + pl + op->i[5];
    int64_t ckk = C * kh * kw, K = N * OH * OW;
    wg_cols cols = {.dbl = dbl,
                    .avx2 = strcmp(cpu_gemm_kernel_name(), "portable") != 0,
                    .kh = kh,
                    .kw = kw,
                    .Wp = Wp,
                    .OH = OH,
                    .OW = OW,
                    .plane = Hp * Wp,
                    .item = C * Hp * Wp};
    bool b_side = ckk >= Co;
    void *xp = cpu_cache_alloc((size_t)(N * cols.item + WG_SLACK) * es);
    void *gt = cpu_cache_alloc((size_t)(K * Co > 0 ? K * Co : 1) * es);
    /* C of the product: out itself when it is contiguous in the work type and not transposed */
    bool direct = b_side && out->dtype == ct && tn_is_contiguous(out);
    void *cm = direct ? tn_ptr(out) : cpu_cache_alloc((size_t)(ckk * Co) * es);
    em_status st = EM_ERR_OOM;
    if (!xp || !gt || !cm) goto done;
    /* the padded images: zeros, then x at (pt, pl) of each plane */
    memset(xp, 0, (size_t)(N * cols.item + WG_SLACK) * es);
    wg_view vx, vg, vc;
    int64_t xst[4] = {cols.item, cols.plane, Wp, 1};
    cpu_copy_convert(view_of(&vx, xp, ct, x->shape, xst, pt * Wp + pl), x);
    /* gy' [Co, N * OH * OW]: gy with its first two dims swapped */
    int64_t gst[4] = {OH * OW, K, OW, 1};
    cpu_copy_convert(view_of(&vg, gt, ct, gy->shape, gst, 0), gy);
    cols.xp = xp;
    cpu_gemm_src src = {.pack = pack_cols, .ctx = &cols};
    bool ok;
    if (dbl)
        ok = b_side ? cpu_dgemm_src(false, true, Co, ckk, K, 1.0, gt, K, NULL, NULL, 0, &src, 0.0,
                                    cm, ckk)
                    : cpu_dgemm_src(false, true, ckk, Co, K, 1.0, NULL, 0, &src, gt, K, NULL, 0.0,
                                    cm, Co);
    else
        ok = b_side ? cpu_sgemm_src(false, true, Co, ckk, K, 1.0f, gt, K, NULL, NULL, 0, &src, 0.0f,
                                    cm, ckk)
                    : cpu_sgemm_src(false, true, ckk, Co, K, 1.0f, NULL, 0, &src, gt, K, NULL, 0.0f,
                                    cm, Co);
    if (!ok) goto done;
    if (!direct) {
        /* cm is gw [Co, ckk] or, from the A side, gw^T [ckk, Co] */
        int64_t cs[4] = {ckk, kh * kw, kw, 1}, ts[4] = {1, kh * kw * Co, kw * Co, Co};
        cpu_copy_convert(out, view_of(&vc, cm, ct, out->shape, b_side ? cs : ts, 0));
    }
    st = EM_OK;
done:
    cpu_cache_free(xp);
    cpu_cache_free(gt);
    if (!direct) cpu_cache_free(cm);
    return st;
}
