/* The transposed-GEMM path of the CPU convolution (cpu_conv.c: few output positions, many
 * reduction terms, as in weight gradients): conv2d and conv_transpose2d shapes that take it,
 * f32 and f64, bias and accumulation, several thread counts, against naive f64 references. */
#include "harness.h"

static void conv_case(em_dtype dt, int64_t B, int64_t C, int64_t H, int64_t W, int64_t Co,
                      int64_t kh, int64_t kw, int64_t pad, bool bias)
{
    em_scope_begin();
    double *xv, *wv, *bv = NULL;
    em_tensor *x = h_rand(EM_SHAPE(B, C, H, W), dt, H_CONTIG, -1, 1, &xv);
    em_tensor *w = h_rand(EM_SHAPE(Co, C, kh, kw), dt, H_CONTIG, -1, 1, &wv);
    em_tensor *b = bias ? h_rand(EM_SHAPE(Co), dt, H_CONTIG, -1, 1, &bv) : NULL;
    int64_t OH = H + 2 * pad - kh + 1, OW = W + 2 * pad - kw + 1;
    double *ref = calloc((size_t)(B * Co * OH * OW), sizeof(double));
    for (int64_t n = 0; n < B; n++)
        for (int64_t co = 0; co < Co; co++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double s = bias ? bv[co] : 0;
                    for (int64_t c = 0; c < C; c++)
                        for (int64_t a = 0; a < kh; a++)
                            for (int64_t e = 0; e < kw; e++) {
                                int64_t ih = oh - pad + a, iw = ow - pad + e;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                s += xv[((n * C + c) * H + ih) * W + iw] *
                                     wv[((co * C + c) * kh + a) * kw + e];
                            }
                    ref[((n * Co + co) * OH + oh) * OW + ow] = s;
                }
    for (int th = 1; th <= 3; th++) {
        em_set_num_threads(th);
        em_tensor *y =
            em_conv2d(x, w, b, (em_conv_opts){.pad_lo = {pad, pad}, .pad_hi = {pad, pad}});
        CHECK_OK("em_conv2d");
        char what[160];
        snprintf(what, sizeof what, "conv2d %s [%lld,%lld,%lld,%lld] k%lldx%lld Co %lld threads %d",
                 em_dtype_name(dt), (long long)B, (long long)C, (long long)H, (long long)W,
                 (long long)kh, (long long)kw, (long long)Co, th);
        double tol = dt == EM_F32 ? 2e-4 * sqrt((double)(C * kh * kw)) : 1e-9;
        h_check_tensor(what, y, ref, EM_SHAPE(B, Co, OH, OW), tol, tol);
    }
    em_set_num_threads(2);
    free(xv), free(wv), free(bv), free(ref);
    em_scope_end();
}

/* conv_transpose2d stride 1, no padding: y[n, co, i + a, j + e] += x[n, ci, i, j] w[ci, co, a, e]
 */
static void convt_case(em_dtype dt, int64_t B, int64_t Ci, int64_t H, int64_t W, int64_t Co,
                       int64_t k)
{
    em_scope_begin();
    double *xv, *wv;
    em_tensor *x = h_rand(EM_SHAPE(B, Ci, H, W), dt, H_CONTIG, -1, 1, &xv);
    em_tensor *w = h_rand(EM_SHAPE(Ci, Co, k, k), dt, H_CONTIG, -1, 1, &wv);
    int64_t OH = H + k - 1, OW = W + k - 1;
    double *ref = calloc((size_t)(B * Co * OH * OW), sizeof(double));
    for (int64_t n = 0; n < B; n++)
        for (int64_t ci = 0; ci < Ci; ci++)
            for (int64_t i = 0; i < H; i++)
                for (int64_t j = 0; j < W; j++)
                    for (int64_t co = 0; co < Co; co++)
                        for (int64_t a = 0; a < k; a++)
                            for (int64_t e = 0; e < k; e++)
                                ref[((n * Co + co) * OH + i + a) * OW + j + e] +=
                                    xv[((n * Ci + ci) * H + i) * W + j] *
                                    wv[((ci * Co + co) * k + a) * k + e];
    for (int th = 1; th <= 3; th += 2) {
        em_set_num_threads(th);
        em_tensor *y = em_conv_transpose2d(x, w, NULL, (em_conv_opts){0});
        CHECK_OK("em_conv_transpose2d");
        char what[160];
        snprintf(what, sizeof what, "conv_transpose2d %s Ci %lld [%lldx%lld] Co %lld threads %d",
                 em_dtype_name(dt), (long long)Ci, (long long)H, (long long)W, (long long)Co, th);
        double tol = dt == EM_F32 ? 2e-4 * sqrt((double)Ci) : 1e-9;
        h_check_tensor(what, y, ref, EM_SHAPE(B, Co, OH, OW), tol, tol);
    }
    em_set_num_threads(2);
    free(xv), free(wv), free(ref);
    em_scope_end();
}

/* conv2d stride 1 with dilation and per-side padding: the 'same'-size shapes take im2col's
 * plane-shift path (one copy per kernel offset, then zeros at the padded borders). */
static void same_case(em_dtype dt, int64_t B, int64_t C, int64_t H, int64_t W, int64_t Co,
                      int64_t kh, int64_t kw, int64_t dil, int64_t plh, int64_t phh, int64_t plw,
                      int64_t phw, int64_t st)
{
    em_scope_begin();
    double *xv, *wv;
    em_tensor *x = h_rand(EM_SHAPE(B, C, H, W), dt, H_CONTIG, -1, 1, &xv);
    em_tensor *w = h_rand(EM_SHAPE(Co, C, kh, kw), dt, H_CONTIG, -1, 1, &wv);
    int64_t OH = (H + plh + phh - dil * (kh - 1) - 1) / st + 1,
            OW = (W + plw + phw - dil * (kw - 1) - 1) / st + 1;
    double *ref = calloc((size_t)(B * Co * OH * OW), sizeof(double));
    for (int64_t n = 0; n < B; n++)
        for (int64_t co = 0; co < Co; co++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double s = 0;
                    for (int64_t c = 0; c < C; c++)
                        for (int64_t a = 0; a < kh; a++)
                            for (int64_t e = 0; e < kw; e++) {
                                int64_t ih = oh * st - plh + a * dil, iw = ow * st - plw + e * dil;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                s += xv[((n * C + c) * H + ih) * W + iw] *
                                     wv[((co * C + c) * kh + a) * kw + e];
                            }
                    ref[((n * Co + co) * OH + oh) * OW + ow] = s;
                }
    for (int th = 1; th <= 2; th++) {
        em_set_num_threads(th);
        em_tensor *y = em_conv2d(x, w, NULL,
                                 (em_conv_opts){.pad_lo = {plh, plw},
                                                .pad_hi = {phh, phw},
                                                .dilation = {dil, dil},
                                                .stride = {st, st}});
        CHECK_OK("em_conv2d");
        char what[200];
        snprintf(what, sizeof what,
                 "conv2d %s [%lld,%lld,%lld,%lld] k%lldx%lld dil %lld pads %lld/%lld %lld/%lld "
                 "threads %d",
                 em_dtype_name(dt), (long long)B, (long long)C, (long long)H, (long long)W,
                 (long long)kh, (long long)kw, (long long)dil, (long long)plh, (long long)phh,
                 (long long)plw, (long long)phw, th);
        double tol = dt == EM_F32 ? 2e-4 * sqrt((double)(C * kh * kw)) : 1e-9;
        h_check_tensor(what, y, ref, EM_SHAPE(B, Co, OH, OW), tol, tol);
    }
    em_set_num_threads(2);
    free(xv), free(wv), free(ref);
    em_scope_end();
}

int main(void)
{
    h_init();
    em_dtype dts[] = {EM_F32, EM_F64};
    for (int i = 0; i < 2; i++) {
        conv_case(dts[i], 2, 40, 20, 20, 24, 18, 18, 0, true);  /* 3x3 outputs, K = 12960 */
        conv_case(dts[i], 1, 33, 17, 15, 17, 16, 13, 1, false); /* 4x5 outputs, odd sizes */
        conv_case(dts[i], 1, 64, 14, 14, 64, 14, 14, 1, false); /* the CNN weight-gradient shape */
        convt_case(dts[i], 1, 600, 3, 3, 8, 3);                 /* x_n = 9 columns */
        same_case(dts[i], 9, 5, 11, 13, 7, 3, 3, 1, 1, 1, 1, 1, 1); /* batch-parallel 3x3 */
        same_case(dts[i], 2, 3, 9, 10, 4, 3, 3, 2, 2, 2, 2, 2, 1);  /* dilated */
        same_case(dts[i], 2, 3, 6, 7, 4, 2, 4, 1, 1, 0, 2, 1, 1);   /* even kernels, uneven pads */
        same_case(dts[i], 2, 3, 1, 7, 4, 5, 5, 1, 2, 2, 2, 2, 1);   /* kernel taller than x */
        same_case(dts[i], 1, 2, 1, 1, 3, 3, 3, 1, 1, 1, 1, 1, 1);   /* 1x1 image */
        same_case(dts[i], 2, 3, 8, 8, 4, 3, 3, 1, 0, 0, 1, 1, 1);   /* same width only */
        /* im2col + GEMM by blocks of output rows (over 1 MB of columns per item) */
        same_case(dts[i], 1, 64, 24, 24, 8, 3, 3, 1, 1, 1, 1, 1, 1);
        same_case(dts[i], 1, 16, 60, 60, 4, 7, 7, 1, 3, 3, 3, 3, 2); /* stride 2 */
    }
    return h_finish();
}
