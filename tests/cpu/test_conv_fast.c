/* The transposed-GEMM path of the CPU convolution (cpu_conv.c: few output positions, many
 * reduction terms, as in weight gradients): conv2d and conv_transpose2d shapes that take it,
 * f32 and f64, bias and accumulation, several thread counts, against naive f64 references; and
 * the direct (stride 1) and packed f32 forward paths against the same references and the
 * im2col + GEMM path. */
#include <string.h>

#include "backend/cpu/cpu_conv_direct.h"
#include "backend/cpu/cpu_gemm.h"
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

/* The direct stride-1 path (B read from the padded image) and the packed f32 path (im2col rows
 * written into the GEMM's B panels), cpu_conv.c, against an f64 reference and against the
 * im2col + GEMM path they replace (the portable kernel set):
 * groups, strides, dilation, uneven pads, 1-D, K over one block, positions over one block
 * with tails, rows not a multiple of the register tile, bias or none, 1 and 2 threads. */
static void packed_case(int64_t B, int64_t C, int64_t H, int64_t W, int64_t Co, int64_t groups,
                        int64_t kh, int64_t kw, int64_t st, int64_t dil, int64_t pl, int64_t ph,
                        bool bias, bool one_d)
{
    em_scope_begin();
    double *xv, *wv, *bv = NULL;
    int64_t Cg = C / groups, Cog = Co / groups;
    em_tensor *x = h_rand(EM_SHAPE(B, C, H, W), EM_F32, H_CONTIG, -1, 1, &xv);
    em_tensor *w = h_rand(EM_SHAPE(Co, Cg, kh, kw), EM_F32, H_CONTIG, -1, 1, &wv);
    em_tensor *b = bias ? h_rand(EM_SHAPE(Co), EM_F32, H_CONTIG, -1, 1, &bv) : NULL;
    int64_t hp = one_d ? 0 : 1; /* 1-D: no padding, stride or dilation along H */
    int64_t hs = one_d ? 1 : st, hd = one_d ? 1 : dil;
    int64_t OH = (H + hp * (pl + ph) - hd * (kh - 1) - 1) / hs + 1;
    int64_t OW = (W + pl + ph - dil * (kw - 1) - 1) / st + 1;
    double *ref = calloc((size_t)(B * Co * OH * OW), sizeof(double));
    for (int64_t n = 0; n < B; n++)
        for (int64_t co = 0; co < Co; co++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double sum = bias ? bv[co] : 0;
                    int64_t gi = co / Cog;
                    for (int64_t c = 0; c < Cg; c++)
                        for (int64_t a = 0; a < kh; a++)
                            for (int64_t e = 0; e < kw; e++) {
                                int64_t ih = oh * hs - hp * pl + a * hd;
                                int64_t iw = ow * st - pl + e * dil;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                sum += xv[((n * C + gi * Cg + c) * H + ih) * W + iw] *
                                       wv[((co * Cg + c) * kh + a) * kw + e];
                            }
                    ref[((n * Co + co) * OH + oh) * OW + ow] = sum;
                }
    em_conv_opts o = {.stride = {st, st},
                      .pad_lo = {pl, pl},
                      .pad_hi = {ph, ph},
                      .dilation = {dil, dil},
                      .groups = groups};
    if (one_d) { /* [B, C, W] with H == 1 and kh == 1: the 1-D op on the same values */
        x = em_reshape(x, EM_SHAPE(B, C, W));
        w = em_reshape(w, EM_SHAPE(Co, Cg, kw));
        o = (em_conv_opts){
            .stride = {st}, .pad_lo = {pl}, .pad_hi = {ph}, .dilation = {dil}, .groups = groups};
    }
    em_shape os = one_d ? EM_SHAPE(B, Co, OW) : EM_SHAPE(B, Co, OH, OW);
    double tol = 2e-4 * sqrt((double)(Cg * kh * kw));
    /* Winograd (3x3 stride 1, else the direct path), direct (stride 1), packed, portable */
    for (int path = 0; path <= 3; path++)
        for (int th = 1; th <= 2; th++) {
            em_set_num_threads(th);
            cpu_gemm_use(path == 3 ? "portable" : NULL);
            cpu_conv_winograd_enable(path == 0);
            cpu_conv_direct_enable(path <= 1);
            em_tensor *y = one_d ? em_conv1d(x, w, b, o) : em_conv2d(x, w, b, o);
            CHECK_OK("em_conv");
            char what[220];
            snprintf(what, sizeof what,
                     "packed conv%s [%lld,%lld,%lld,%lld] Co %lld groups %lld k%lldx%lld s%lld "
                     "d%lld pads %lld/%lld bias %d %s threads %d",
                     one_d ? "1d" : "2d", (long long)B, (long long)C, (long long)H, (long long)W,
                     (long long)Co, (long long)groups, (long long)kh, (long long)kw, (long long)st,
                     (long long)dil, (long long)pl, (long long)ph, bias,
                     path == 3   ? "portable"
                     : path == 2 ? "packed"
                     : path == 1 ? "direct"
                                 : "winograd",
                     th);
            h_check_tensor(what, y, ref, os, tol, tol);
        }
    cpu_gemm_use(NULL);
    cpu_conv_winograd_enable(true);
    cpu_conv_direct_enable(true);
    em_set_num_threads(2);
    free(xv), free(wv), free(bv), free(ref);
    em_scope_end();
}

/* The AVX-512 register kernel against the AVX2 one, where the CPU has both: the same bytes for
 * every tile cut (mr, nr), K, and with and without accumulation (the contract of
 * cpu_conv_direct.h: one FMA per k in k order, then one add into C). */
static void kernel_case(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx2") ||
        !__builtin_cpu_supports("fma")) {
#else
    {
#endif
        printf("skipped: the AVX-512 conv kernel (no AVX-512 here)\n");
        return;
    }
    enum { KMAX = 37, LDC = 21 };
    float ap[KMAX * 6], b[KMAX * 24 + 16], c0[6 * LDC], c1[6 * LDC];
    int64_t off[KMAX];
    uint32_t r = 12345;
    for (size_t i = 0; i < sizeof b / sizeof *b; i++)
        b[i] = (float)((r = r * 1103515245u + 12345u) >> 8) / 16777216.0f - 0.5f;
    for (size_t i = 0; i < sizeof ap / sizeof *ap; i++)
        ap[i] = (float)((r = r * 1103515245u + 12345u) >> 8) / 16777216.0f - 0.5f;
    for (int k = 0; k < KMAX; k++) off[k] = (k * 7) % (KMAX * 24);
    const int64_t ks[] = {1, 2, 13, KMAX};
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
        for (int mr = 1; mr <= 6; mr++)
            for (int nr = 1; nr <= 16; nr += (nr < 3 || nr > 14) ? 1 : 6)
                for (int acc = 0; acc < 2; acc++) {
                    for (int i = 0; i < 6 * LDC; i++) c0[i] = c1[i] = (float)i * 0.25f;
                    cpu_conv_direct_6x16_avx2(ks[ki], ap, b, off, c0, LDC, mr, nr, acc);
                    cpu_conv_direct_6x16_avx512(ks[ki], ap, b, off, c1, LDC, mr, nr, acc);
                    CHECK(!memcmp(c0, c1, sizeof c0),
                          "conv register kernels differ: K %lld mr %d nr %d accumulate %d",
                          (long long)ks[ki], mr, nr, acc);
                }
}

int main(void)
{
    h_init();
    kernel_case();
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
    packed_case(3, 5, 11, 13, 7, 1, 3, 3, 1, 1, 1, 1, true, false);   /* odd sizes, Co < tile */
    packed_case(2, 64, 9, 47, 13, 1, 3, 3, 1, 1, 1, 1, false, false); /* K = 576: three blocks */
    packed_case(1, 3, 37, 41, 20, 1, 7, 7, 2, 1, 3, 3, true, false);  /* 7x7 stride 2 */
    packed_case(1, 48, 15, 29, 10, 1, 3, 3, 2, 1, 1, 1, true, false); /* K 432 + bias: 2 blocks */
    packed_case(2, 6, 10, 12, 9, 3, 3, 2, 1, 2, 2, 1, true, false);   /* groups, dilation */
    packed_case(2, 4, 26, 31, 8, 2, 5, 3, 3, 1, 0, 2, false, false);  /* stride 3, uneven pads */
    packed_case(1, 1, 28, 28, 32, 1, 3, 3, 1, 1, 1, 1, true, false);  /* the CNN's first conv */
    packed_case(2, 7, 1, 900, 11, 1, 1, 5, 2, 1, 2, 2, true, true);   /* 1-D, 449 positions */
    packed_case(1, 2, 5, 5, 3, 1, 5, 5, 1, 1, 0, 0, false, false);    /* one output position */
    packed_case(2, 3, 3, 20, 5, 1, 3, 3, 1, 1, 2, 0, true, false);    /* pads over the kernel */
    packed_case(1, 25, 10, 21, 7, 1, 3, 3, 1, 1, 1, 1, true, false);  /* K = 225: a short block */
    packed_case(1, 8, 30, 9, 14, 2, 2, 4, 1, 3, 3, 3, false, false);  /* dilation 3, groups */
    /* at most 16 reduction terms: output rows straight from the padded image */
    packed_case(2, 1, 9, 19, 13, 1, 3, 3, 1, 2, 2, 1, false, false); /* dilation 2, Co % 8 */
    packed_case(3, 3, 5, 6, 1, 1, 1, 1, 1, 1, 0, 0, true, false);    /* 1x1, one channel out */
    packed_case(1, 2, 7, 33, 20, 1, 2, 4, 1, 1, 1, 2, true, false);  /* K = 16 */
    packed_case(2, 1, 1, 45, 9, 1, 1, 5, 1, 1, 2, 2, true, true);    /* 1-D, K = 5 */
    /* 3x3 stride 1 with at least 16 channels each way: Winograd F(2x2, 3x3) */
    packed_case(3, 16, 14, 14, 16, 1, 3, 3, 1, 1, 1, 1, true, false); /* even sizes */
    packed_case(2, 32, 9, 13, 37, 1, 3, 3, 1, 1, 1, 1, false, false); /* odd, Co % 6 != 0 */
    packed_case(1, 20, 11, 6, 18, 1, 3, 3, 1, 1, 0, 2, true, false);  /* pads 0 / 2 */
    packed_case(2, 200, 5, 7, 24, 1, 3, 3, 1, 1, 1, 1, true, false);  /* C > 192: two K blocks */
    packed_case(5, 17, 3, 3, 16, 1, 3, 3, 1, 1, 0, 0, false, false);  /* one output, chunks */
    packed_case(4, 24, 20, 19, 40, 1, 3, 3, 1, 1, 1, 1, true, false); /* several chunks */
    return h_finish();
}
