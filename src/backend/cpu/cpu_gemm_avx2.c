/* AVX2 + FMA GEMM micro-kernels: 6x16 f32 and 6x8 f64 register tiles (12 accumulators each),
 * reached through cpu_gemm_kernels_avx2 when the CPU has AVX2 and FMA. */
#include <immintrin.h>

#define CPU_GEMM_GEMV_TEMPLATES
#include "cpu_gemm.h"

/* Writes acc (rows of two vectors) into C: alpha * acc + beta * C. Edge tiles go through a
 * local tile so every element sees the same vector arithmetic as in a full tile. */
#define STORE_TILE(T, V, LANES, MR, NR, load, store, mul, fmadd, set1)                             \
    do {                                                                                           \
        V va = set1(alpha), vb = set1(beta);                                                       \
        if (mr == MR && nr == NR) {                                                                \
            for (int r = 0; r < MR; r++)                                                           \
                for (int h = 0; h < 2; h++) {                                                      \
                    T *p = c + r * ldc + h * LANES;                                                \
                    V t = mul(va, acc[r][h]);                                                      \
                    if (beta != 0) t = fmadd(vb, load(p), t);                                      \
                    store(p, t);                                                                   \
                }                                                                                  \
        } else {                                                                                   \
            T tile[MR * NR];                                                                       \
            for (int r = 0; r < MR; r++)                                                           \
                for (int j = 0; j < NR; j++)                                                       \
                    tile[r * NR + j] = beta != 0 && r < mr && j < nr ? c[r * ldc + j] : 0;         \
            for (int r = 0; r < mr; r++)                                                           \
                for (int h = 0; h < 2; h++) {                                                      \
                    T *p = tile + r * NR + h * LANES;                                              \
                    V t = mul(va, acc[r][h]);                                                      \
                    if (beta != 0) t = fmadd(vb, load(p), t);                                      \
                    store(p, t);                                                                   \
                }                                                                                  \
            for (int r = 0; r < mr; r++)                                                           \
                for (int j = 0; j < nr; j++) c[r * ldc + j] = tile[r * NR + j];                    \
        }                                                                                          \
    } while (0)

/* Asks for the tile's rows of C (first and last element of each) while the k loop runs, so
 * the loads and stores at the end do not wait on memory. */
#define PREFETCH_C(c, ldc, mr, nr)                                                                 \
    for (int r = 0; r < (mr); r++) {                                                               \
        _mm_prefetch((const char *)((c) + r * (ldc)), _MM_HINT_T0);                                \
        _mm_prefetch((const char *)((c) + r * (ldc) + (nr)-1), _MM_HINT_T0);                       \
    }

/* c: [6, 16] f32 tile; a: 6 values per k; b: 16 values per k. */
static void sgemm_6x16(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                       float alpha, float beta, int mr, int nr)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    PREFETCH_C(c, ldc, mr, 16);
    for (int64_t k = 0; k < kc; k++, a += 6, b += 16) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        __m256 x = _mm256_broadcast_ss(a);
        c00 = _mm256_fmadd_ps(x, b0, c00);
        c01 = _mm256_fmadd_ps(x, b1, c01);
        x = _mm256_broadcast_ss(a + 1);
        c10 = _mm256_fmadd_ps(x, b0, c10);
        c11 = _mm256_fmadd_ps(x, b1, c11);
        x = _mm256_broadcast_ss(a + 2);
        c20 = _mm256_fmadd_ps(x, b0, c20);
        c21 = _mm256_fmadd_ps(x, b1, c21);
        x = _mm256_broadcast_ss(a + 3);
        c30 = _mm256_fmadd_ps(x, b0, c30);
        c31 = _mm256_fmadd_ps(x, b1, c31);
        x = _mm256_broadcast_ss(a + 4);
        c40 = _mm256_fmadd_ps(x, b0, c40);
        c41 = _mm256_fmadd_ps(x, b1, c41);
        x = _mm256_broadcast_ss(a + 5);
        c50 = _mm256_fmadd_ps(x, b0, c50);
        c51 = _mm256_fmadd_ps(x, b1, c51);
    }
    __m256 acc[6][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    STORE_TILE(float, __m256, 8, 6, 16, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_mul_ps,
               _mm256_fmadd_ps, _mm256_set1_ps);
}

/* c: [6, 8] f64 tile; a: 6 values per k; b: 8 values per k. */
static void dgemm_6x8(int64_t kc, const double *a, const double *b, double *c, int64_t ldc,
                      double alpha, double beta, int mr, int nr)
{
    __m256d c00 = _mm256_setzero_pd(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256d c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    PREFETCH_C(c, ldc, mr, 8);
    for (int64_t k = 0; k < kc; k++, a += 6, b += 8) {
        __m256d b0 = _mm256_loadu_pd(b), b1 = _mm256_loadu_pd(b + 4);
        __m256d x = _mm256_broadcast_sd(a);
        c00 = _mm256_fmadd_pd(x, b0, c00);
        c01 = _mm256_fmadd_pd(x, b1, c01);
        x = _mm256_broadcast_sd(a + 1);
        c10 = _mm256_fmadd_pd(x, b0, c10);
        c11 = _mm256_fmadd_pd(x, b1, c11);
        x = _mm256_broadcast_sd(a + 2);
        c20 = _mm256_fmadd_pd(x, b0, c20);
        c21 = _mm256_fmadd_pd(x, b1, c21);
        x = _mm256_broadcast_sd(a + 3);
        c30 = _mm256_fmadd_pd(x, b0, c30);
        c31 = _mm256_fmadd_pd(x, b1, c31);
        x = _mm256_broadcast_sd(a + 4);
        c40 = _mm256_fmadd_pd(x, b0, c40);
        c41 = _mm256_fmadd_pd(x, b1, c41);
        x = _mm256_broadcast_sd(a + 5);
        c50 = _mm256_fmadd_pd(x, b0, c50);
        c51 = _mm256_fmadd_pd(x, b1, c51);
    }
    __m256d acc[6][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    STORE_TILE(double, __m256d, 4, 6, 8, _mm256_loadu_pd, _mm256_storeu_pd, _mm256_mul_pd,
               _mm256_fmadd_pd, _mm256_set1_pd);
}

/* One 6-row panel of a row-major A (cpu_spack_fn): eight k at a time, the six rows (and two
 * zero rows) go through an 8x8 transpose; each k's six values are stored with a full vector
 * that the next k overwrites, the last k of a group with a 4 + 2 store so nothing past the
 * group is written. */
static void spack_a6(int64_t kc, const float *A, int64_t lda, float *dst)
{
    const float *r0 = A, *r1 = r0 + lda, *r2 = r1 + lda, *r3 = r2 + lda, *r4 = r3 + lda,
                *r5 = r4 + lda;
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8, dst += 48) {
        __m256 a0 = _mm256_loadu_ps(r0 + k), a1 = _mm256_loadu_ps(r1 + k);
        __m256 a2 = _mm256_loadu_ps(r2 + k), a3 = _mm256_loadu_ps(r3 + k);
        __m256 a4 = _mm256_loadu_ps(r4 + k), a5 = _mm256_loadu_ps(r5 + k);
        __m256 z = _mm256_setzero_ps();
        /* t: pairs of rows interleaved; u: four rows per 128-bit lane; o_j: k = j (and j + 4) */
        __m256 t0 = _mm256_unpacklo_ps(a0, a1), t1 = _mm256_unpackhi_ps(a0, a1);
        __m256 t2 = _mm256_unpacklo_ps(a2, a3), t3 = _mm256_unpackhi_ps(a2, a3);
        __m256 t4 = _mm256_unpacklo_ps(a4, a5), t5 = _mm256_unpackhi_ps(a4, a5);
        __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
        __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
        __m256 u4 = _mm256_shuffle_ps(t4, z, 0x44), u5 = _mm256_shuffle_ps(t4, z, 0xEE);
        __m256 u6 = _mm256_shuffle_ps(t5, z, 0x44), u7 = _mm256_shuffle_ps(t5, z, 0xEE);
        _mm256_storeu_ps(dst + 0, _mm256_permute2f128_ps(u0, u4, 0x20));
        _mm256_storeu_ps(dst + 6, _mm256_permute2f128_ps(u1, u5, 0x20));
        _mm256_storeu_ps(dst + 12, _mm256_permute2f128_ps(u2, u6, 0x20));
        _mm256_storeu_ps(dst + 18, _mm256_permute2f128_ps(u3, u7, 0x20));
        _mm256_storeu_ps(dst + 24, _mm256_permute2f128_ps(u0, u4, 0x31));
        _mm256_storeu_ps(dst + 30, _mm256_permute2f128_ps(u1, u5, 0x31));
        _mm256_storeu_ps(dst + 36, _mm256_permute2f128_ps(u2, u6, 0x31));
        __m256 o7 = _mm256_permute2f128_ps(u3, u7, 0x31);
        _mm_storeu_ps(dst + 42, _mm256_castps256_ps128(o7));
        _mm_storel_pi((__m64 *)(void *)(dst + 46), _mm256_extractf128_ps(o7, 1));
    }
    for (; k < kc; k++, dst += 6) {
        dst[0] = r0[k], dst[1] = r1[k], dst[2] = r2[k];
        dst[3] = r3[k], dst[4] = r4[k], dst[5] = r5[k];
    }
}

/* Eight rows r[0..7] of 8 floats from column k on, transposed: dst[i * ld + j] = r[j][k + i]. */
static inline void transpose8(const float *const *r, int64_t k, float *dst, int64_t ld)
{
    __m256 a0 = _mm256_loadu_ps(r[0] + k), a1 = _mm256_loadu_ps(r[1] + k);
    __m256 a2 = _mm256_loadu_ps(r[2] + k), a3 = _mm256_loadu_ps(r[3] + k);
    __m256 a4 = _mm256_loadu_ps(r[4] + k), a5 = _mm256_loadu_ps(r[5] + k);
    __m256 a6 = _mm256_loadu_ps(r[6] + k), a7 = _mm256_loadu_ps(r[7] + k);
    __m256 t0 = _mm256_unpacklo_ps(a0, a1), t1 = _mm256_unpackhi_ps(a0, a1);
    __m256 t2 = _mm256_unpacklo_ps(a2, a3), t3 = _mm256_unpackhi_ps(a2, a3);
    __m256 t4 = _mm256_unpacklo_ps(a4, a5), t5 = _mm256_unpackhi_ps(a4, a5);
    __m256 t6 = _mm256_unpacklo_ps(a6, a7), t7 = _mm256_unpackhi_ps(a6, a7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(dst + 0 * ld, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(dst + 1 * ld, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(dst + 2 * ld, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(dst + 3 * ld, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(dst + 4 * ld, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(dst + 5 * ld, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(dst + 6 * ld, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(dst + 7 * ld, _mm256_permute2f128_ps(u3, u7, 0x31));
}

/* A full 16-column panel of a transposed B: two 8x8 transposes per 8 values of k instead of
 * sixteen strided gathers per k. */
static void spack_bt16(int64_t kc, const float *B, int64_t ldb, float *dst)
{
    const float *r[16];
    for (int c = 0; c < 16; c++) r[c] = B + c * ldb;
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8, dst += 128) {
        transpose8(r, k, dst, 16);
        transpose8(r + 8, k, dst + 8, 16);
    }
    for (; k < kc; k++, dst += 16)
        for (int c = 0; c < 16; c++) dst[c] = r[c][k];
}

/* ---- GEMV kernels (cpu_gemm.h: dot and axpy) --------------------------------------------- */

/* Fixed-order horizontal sums. */
static float hsum_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static double hsum_pd(__m256d v)
{
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
    return _mm_cvtsd_f64(s);
}

#define T     float
#define V     __m256
#define MASK  __m256i
#define LANES 8
#define TAILMASK(cnt)                                                                              \
    _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(cnt)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
#define VZERO            _mm256_setzero_ps
#define VSET1            _mm256_set1_ps
#define VLOAD            _mm256_loadu_ps
#define VMLOAD(m, p)     _mm256_maskload_ps(p, m)
#define VSTORE           _mm256_storeu_ps
#define VMSTORE(p, m, v) _mm256_maskstore_ps(p, m, v)
#define VFMA             _mm256_fmadd_ps
#define VADD             _mm256_add_ps
#define VRED             hsum_ps
DOT_FN(sdot_avx2)
AXPY_FN(saxpy_avx2)
#undef T
#undef V
#undef MASK
#undef LANES
#undef TAILMASK
#undef VZERO
#undef VSET1
#undef VLOAD
#undef VMLOAD
#undef VSTORE
#undef VMSTORE
#undef VFMA
#undef VADD
#undef VRED
#define T     double
#define V     __m256d
#define MASK  __m256i
#define LANES 4
#define TAILMASK(cnt)                                                                              \
    _mm256_cmpgt_epi64(_mm256_set1_epi64x((long long)(cnt)), _mm256_setr_epi64x(0, 1, 2, 3))
#define VZERO            _mm256_setzero_pd
#define VSET1            _mm256_set1_pd
#define VLOAD            _mm256_loadu_pd
#define VMLOAD(m, p)     _mm256_maskload_pd(p, m)
#define VSTORE           _mm256_storeu_pd
#define VMSTORE(p, m, v) _mm256_maskstore_pd(p, m, v)
#define VFMA             _mm256_fmadd_pd
#define VADD             _mm256_add_pd
#define VRED             hsum_pd
DOT_FN(ddot_avx2)
AXPY_FN(daxpy_avx2)

const cpu_gemm_kernels cpu_gemm_kernels_avx2 = {
    .name = "avx2",
    .s_ukr = sgemm_6x16,
    .s_mr = 6,
    .s_nr = 16,
    .s_mc = 168,
    .s_kc = 384,
    .s_nc = 4096,
    .d_ukr = dgemm_6x8,
    .d_mr = 6,
    .d_nr = 8,
    .d_mc = 120,
    .d_kc = 256,
    .d_nc = 3072,
    .s_pack_a = spack_a6,
    .s_pack_bt = spack_bt16,
    .s_dot = sdot_avx2,
    .s_axpy = saxpy_avx2,
    .d_dot = ddot_avx2,
    .d_axpy = daxpy_avx2,
};
