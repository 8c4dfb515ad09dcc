/* Off x86 (built there only, CMakeLists.txt): the AVX2 / AVX-512 convolution helpers that
 * cpu_conv.c and cpu_conv_wgrad.c name. Their paths run only while cpu_gemm_x86() holds, which
 * it never does here, so these are never called; each stops the program if one ever is. */
#include <stdio.h>
#include <stdlib.h>

#include "cpu_conv_direct.h"

static void absent(const char *fn)
{
    fprintf(stderr, "ember: %s called on a build without the x86 kernels\n", fn);
    abort();
}

void cpu_conv_direct_6x16_avx2(int64_t K, const float *Ap, const float *b, const int64_t *off,
                               float *C, int64_t ldc, int mr, int nr, bool accumulate)
{
    (void)K, (void)Ap, (void)b, (void)off, (void)C, (void)ldc, (void)mr, (void)nr;
    (void)accumulate;
    absent(__func__);
}

void cpu_conv_direct_6x16_avx512(int64_t K, const float *Ap, const float *b, const int64_t *off,
                                 float *C, int64_t ldc, int mr, int nr, bool accumulate)
{
    (void)K, (void)Ap, (void)b, (void)off, (void)C, (void)ldc, (void)mr, (void)nr;
    (void)accumulate;
    absent(__func__);
}

void cpu_conv_direct_small_avx2(const float *xrow, const int64_t *off, int K, const float *wp,
                                const float *bias, int64_t Co, int64_t OW, float *y, int64_t ys)
{
    (void)xrow, (void)off, (void)K, (void)wp, (void)bias, (void)Co, (void)OW, (void)y, (void)ys;
    absent(__func__);
}

void cpu_conv_direct_out_avx2(const float *t, float *o, int64_t n, float bias)
{
    (void)t, (void)o, (void)n, (void)bias;
    absent(__func__);
}

void cpu_conv_wgrad_pack_avx2(const float *b, int64_t step, const int64_t *off, int n, int w,
                              int64_t run, float *dst)
{
    (void)b, (void)step, (void)off, (void)n, (void)w, (void)run, (void)dst;
    absent(__func__);
}

void cpu_conv_wgrad_copy_avx2(const float *b, int64_t step, const int64_t *off, int n, int w,
                              int64_t run, float *dst)
{
    (void)b, (void)step, (void)off, (void)n, (void)w, (void)run, (void)dst;
    absent(__func__);
}

void cpu_conv_wgrad_nhwc_row_avx2(const float *s, int64_t cs, int64_t C, int64_t W, float *d)
{
    (void)s, (void)cs, (void)C, (void)W, (void)d;
    absent(__func__);
}

void cpu_conv_wgrad_dots_avx2(const float *gy, int64_t sn, int64_t sc, const float *xp,
                              int64_t item, int64_t Wp, const int64_t *off, int J, int64_t N,
                              int64_t OH, int64_t OW, int64_t co0, int64_t co1, float *gw)
{
    (void)gy, (void)sn, (void)sc, (void)xp, (void)item, (void)Wp, (void)off, (void)J, (void)N;
    (void)OH, (void)OW, (void)co0, (void)co1, (void)gw;
    absent(__func__);
}

void cpu_wino_in_avx2(const float *d, int64_t Wq, float *v, int64_t xs)
{
    (void)d, (void)Wq, (void)v, (void)xs;
    absent(__func__);
}

void cpu_wino_out_avx2(const float *m, int64_t xs, float bias, float *y, int64_t ys, bool row2,
                       int ncols)
{
    (void)m, (void)xs, (void)bias, (void)y, (void)ys, (void)row2, (void)ncols;
    absent(__func__);
}

void cpu_conv_gather2_avx2(const float *s, float *d, int64_t n)
{
    (void)s, (void)d, (void)n;
    absent(__func__);
}
