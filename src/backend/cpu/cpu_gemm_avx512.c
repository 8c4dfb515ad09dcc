/* AVX-512 GEMM micro-kernels: 12x32 f32 and 12x16 f64 register tiles (24 accumulators each),
 * reached through cpu_gemm_kernels_avx512 when the CPU has AVX-512 F/VL/BW/DQ. */
#include <immintrin.h>
#include <stdint.h>

#define CPU_GEMM_GEMV_TEMPLATES
#include "cpu_gemm.h"

#define MR 12
/* Software prefetch distances, in elements, along the packed panels: 32 k steps ahead for A
 * (12 per k), 32 for B (32 per k; two lines per step). Without them the panels streamed in
 * behind the k loop; 32 steps was the best distance swept (bench/RESULTS.md, evidence section).
 * The address is formed as an integer: past the panel's end it is only a hint, never a
 * pointer. */
#define PFA 384
#define PFB 1024
#define PREFETCH(p, off)                                                                           \
    _mm_prefetch((const char *)((uintptr_t)(p) + (off) * sizeof *(p)), _MM_HINT_T0)

#define ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define DECL(r) V c##r##_0 = VZERO(), c##r##_1 = c##r##_0;
#define STEP(r)                                                                                    \
    x = VSET1(a[r]);                                                                               \
    c##r##_0 = VFMADD(x, b0, c##r##_0);                                                            \
    c##r##_1 = VFMADD(x, b1, c##r##_1);
#define SAVE(r) {c##r##_0, c##r##_1},
/* row r of a full tile: alpha acc (+ beta c), straight from the accumulators */
#define STORE_ROW(r)                                                                               \
    VSTORE(c + r * ldc, VMUL(va, c##r##_0));                                                       \
    VSTORE(c + r * ldc + VL, VMUL(va, c##r##_1));
#define STORE_BETA(r)                                                                              \
    VSTORE(c + r * ldc, VFMADD(vb, VLOADU(c + r * ldc), VMUL(va, c##r##_0)));                      \
    VSTORE(c + r * ldc + VL, VFMADD(vb, VLOADU(c + r * ldc + VL), VMUL(va, c##r##_1)));

/* VZERO, VSET1, VFMADD, VMUL, VLOADU, VSTORE and VL (the lanes) name the intrinsics of the
 * element type (defined per kernel). The accumulators are 24 named vectors (not an array) so
 * they stay in registers. */
#define UKR_BODY(T, NR)                                                                            \
    do {                                                                                           \
        ROWS(DECL)                                                                                 \
        for (int r = 0; r < mr; r++) { /* the C tile's rows, loaded and stored at the end */       \
            _mm_prefetch((const char *)(c + r * ldc), _MM_HINT_T0);                                \
            _mm_prefetch((const char *)(c + r * ldc + nr - 1), _MM_HINT_T0);                       \
        }                                                                                          \
        for (int64_t k = 0; k < kc; k++, a += MR, b += NR) {                                       \
            PREFETCH(a, PFA);                                                                      \
            PREFETCH(b, PFB);                                                                      \
            PREFETCH(b, PFB + VL);                                                                 \
            V b0 = VLOADU(b), b1 = VLOADU(b + VL), x;                                              \
            ROWS(STEP)                                                                             \
        }                                                                                          \
        V va = VSET1(alpha), vb = VSET1(beta);                                                     \
        if (mr == MR && nr == NR) {                                                                \
            if (beta != 0) {                                                                       \
                ROWS(STORE_BETA)                                                                   \
            } else {                                                                               \
                ROWS(STORE_ROW)                                                                    \
            }                                                                                      \
        } else {                                                                                   \
            V acc[MR][2] = {ROWS(SAVE)};                                                           \
            T tile[MR * NR];                                                                       \
            for (int r = 0; r < MR; r++)                                                           \
                for (int j = 0; j < NR; j++)                                                       \
                    tile[r * NR + j] = beta != 0 && r < mr && j < nr ? c[r * ldc + j] : 0;         \
            for (int r = 0; r < mr; r++)                                                           \
                for (int h = 0; h < 2; h++) {                                                      \
                    T *p = tile + r * NR + h * VL;                                                 \
                    V t = VMUL(va, acc[r][h]);                                                     \
                    if (beta != 0) t = VFMADD(vb, VLOADU(p), t);                                   \
                    VSTORE(p, t);                                                                  \
                }                                                                                  \
            for (int r = 0; r < mr; r++)                                                           \
                for (int j = 0; j < nr; j++) c[r * ldc + j] = tile[r * NR + j];                    \
        }                                                                                          \
    } while (0)

/* c: [12, 32] f32 tile; a: 12 values per k; b: 32 values per k. */
static void sgemm_12x32(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                        float alpha, float beta, int mr, int nr)
{
    typedef __m512 V;
#define VZERO  _mm512_setzero_ps
#define VSET1  _mm512_set1_ps
#define VFMADD _mm512_fmadd_ps
#define VMUL   _mm512_mul_ps
#define VLOADU _mm512_loadu_ps
#define VSTORE _mm512_storeu_ps
#define VL     16
    UKR_BODY(float, 32);
#undef VZERO
#undef VSET1
#undef VFMADD
#undef VMUL
#undef VLOADU
#undef VSTORE
#undef VL
}

/* c: [12, 16] f64 tile; a: 12 values per k; b: 16 values per k. */
static void dgemm_12x16(int64_t kc, const double *a, const double *b, double *c, int64_t ldc,
                        double alpha, double beta, int mr, int nr)
{
    typedef __m512d V;
#define VZERO  _mm512_setzero_pd
#define VSET1  _mm512_set1_pd
#define VFMADD _mm512_fmadd_pd
#define VMUL   _mm512_mul_pd
#define VLOADU _mm512_loadu_pd
#define VSTORE _mm512_storeu_pd
#define VL     8
    UKR_BODY(double, 16);
#undef VZERO
#undef VSET1
#undef VFMADD
#undef VMUL
#undef VLOADU
#undef VSTORE
#undef VL
}

/* ---- GEMV kernels (cpu_gemm.h: dot and axpy) --------------------------------------------- */

#define TAILMASK(cnt) ((MASK)((1u << (cnt)) - 1))
/* Per element type: T, V, MASK, LANES and the intrinsics the kernels above name. */
#define T       float
#define V       __m512
#define MASK    __mmask16
#define LANES   16
#define VZERO   _mm512_setzero_ps
#define VSET1   _mm512_set1_ps
#define VLOAD   _mm512_loadu_ps
#define VMLOAD  _mm512_maskz_loadu_ps
#define VSTORE  _mm512_storeu_ps
#define VMSTORE _mm512_mask_storeu_ps
#define VFMA    _mm512_fmadd_ps
#define VADD    _mm512_add_ps
#define VRED    _mm512_reduce_add_ps
DOT_FN(sdot_avx512)
AXPY_FN(saxpy_avx512)
#undef T
#undef V
#undef MASK
#undef LANES
#undef VZERO
#undef VSET1
#undef VLOAD
#undef VMLOAD
#undef VSTORE
#undef VMSTORE
#undef VFMA
#undef VADD
#undef VRED
#define T       double
#define V       __m512d
#define MASK    __mmask8
#define LANES   8
#define VZERO   _mm512_setzero_pd
#define VSET1   _mm512_set1_pd
#define VLOAD   _mm512_loadu_pd
#define VMLOAD  _mm512_maskz_loadu_pd
#define VSTORE  _mm512_storeu_pd
#define VMSTORE _mm512_mask_storeu_pd
#define VFMA    _mm512_fmadd_pd
#define VADD    _mm512_add_pd
#define VRED    _mm512_reduce_add_pd
DOT_FN(ddot_avx512)
AXPY_FN(daxpy_avx512)

const cpu_gemm_kernels cpu_gemm_kernels_avx512 = {
    .name = "avx512",
    .s_ukr = sgemm_12x32,
    .s_mr = 12,
    .s_nr = 32,
    .s_mc = 480,
    .s_kc = 512,
    .s_nc = 4096,
    .d_ukr = dgemm_12x16,
    .d_mr = 12,
    .d_nr = 16,
    .d_mc = 120,
    .d_kc = 256,
    .d_nc = 3072,
    .s_dot = sdot_avx512,
    .s_axpy = saxpy_avx512,
    .d_dot = ddot_avx512,
    .d_axpy = daxpy_avx512,
};
