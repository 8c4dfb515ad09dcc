/* Small AVX2 helpers shared by the CPU backend's AVX2 files (each built with -mavx2 -mfma). */
#ifndef EMBER_CPU_AVX2_H
#define EMBER_CPU_AVX2_H

#include <immintrin.h>
#include <stdint.h>

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* Lanes [0, n) set, for masked loads and stores (n clamped to [0, 8]). */
static inline __m256i cpu_avx2_lanes(int64_t n)
{
    int k = n < 0 ? 0 : n > 8 ? 8 : (int)n;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* v[0], v[2], ..., v[14] in order, reading v[0 .. 14] only: the even lanes of v[0 .. 7] and the
 * odd lanes of v[7 .. 14] (r0 r2 r8 r10 | r4 r6 r12 r14), then the 64-bit pairs in order. */
static ALWAYS_INLINE __m256 cpu_avx2_even8(const float *v)
{
    __m256 p =
        _mm256_shuffle_ps(_mm256_loadu_ps(v), _mm256_loadu_ps(v + 7), _MM_SHUFFLE(3, 1, 2, 0));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(p), 0xD8));
}

/* t[i] = (a[0][i], ..., a[7][i]): an 8x8 f32 block transposed in registers. Every a is read
 * before any t is written, so a == t transposes in place. */
static inline void cpu_avx2_transpose8(const __m256 *a, __m256 *t)
{
    __m256 t0 = _mm256_unpacklo_ps(a[0], a[1]), t1 = _mm256_unpackhi_ps(a[0], a[1]);
    __m256 t2 = _mm256_unpacklo_ps(a[2], a[3]), t3 = _mm256_unpackhi_ps(a[2], a[3]);
    __m256 t4 = _mm256_unpacklo_ps(a[4], a[5]), t5 = _mm256_unpackhi_ps(a[4], a[5]);
    __m256 t6 = _mm256_unpacklo_ps(a[6], a[7]), t7 = _mm256_unpackhi_ps(a[6], a[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    t[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    t[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    t[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    t[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    t[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    t[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    t[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    t[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

#endif
