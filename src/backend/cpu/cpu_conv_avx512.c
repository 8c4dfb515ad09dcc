/* AVX-512 register kernel of the direct stride-1 f32 convolution and of the Winograd products
 * (cpu_conv.c), behind the same contract as cpu_conv_direct_6x16_avx2 (cpu_conv_direct.h): one
 * fused multiply-add per k, k ascending, then one add into C, so both kernels give the same
 * bytes. A 16-float row of B is one zmm register: 6 accumulators instead of 12 ymm, half the
 * instructions for the same products. Compiled with AVX-512 flags; reached only where the
 * AVX-512 GEMM kernels are in use. */
#include <immintrin.h>

#include "cpu_conv_direct.h"

void cpu_conv_direct_6x16_avx512(int64_t K, const float *Ap, const float *b, const int64_t *off,
                                 float *C, int64_t ldc, int mr, int nr, bool accumulate)
{
    __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
    for (int64_t k = 0; k < K; k++, Ap += 6) {
        __m512 bv = _mm512_loadu_ps(b + off[k]);
        c0 = _mm512_fmadd_ps(_mm512_set1_ps(Ap[0]), bv, c0);
        c1 = _mm512_fmadd_ps(_mm512_set1_ps(Ap[1]), bv, c1);
        c2 = _mm512_fmadd_ps(_mm512_set1_ps(Ap[2]), bv, c2);
        c3 = _mm512_fmadd_ps(_mm512_set1_ps(Ap[3]), bv, c3);
        c4 = _mm512_fmadd_ps(_mm512_set1_ps(Ap[4]), bv, c4);
        c5 = _mm512_fmadd_ps(_mm512_set1_ps(Ap[5]), bv, c5);
    }
    __m512 acc[6] = {c0, c1, c2, c3, c4, c5};
    const __mmask16 m = nr >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nr) - 1);
    for (int r = 0; r < mr; r++) {
        float *c = C + r * ldc;
        __m512 v = acc[r];
        if (accumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, c), v);
        _mm512_mask_storeu_ps(c, m, v);
    }
}
