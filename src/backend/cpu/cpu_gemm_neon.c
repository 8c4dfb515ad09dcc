/* AArch64 NEON (Advanced SIMD) GEMM micro-kernels: 8x12 f32 and 8x6 f64 register tiles (24
 * accumulators of 128 bits each, the B row in 3 registers, the A column in 2 or 4, 29-31 of the
 * 32 vector registers), and the GEMV kernels of cpu_gemm.h's templates, reached through
 * cpu_gemm_kernels_neon on 64-bit Arm, where Advanced SIMD is part of the base architecture.
 * Built only there (CMakeLists.txt); scripts/cross-arm64.sh builds and tests it on an x86 host
 * under qemu-user. */
#include <arm_neon.h>
#include <string.h>

#define CPU_GEMM_GEMV_TEMPLATES
#include "cpu_gemm.h"

/* Writes acc (MR rows of NV vectors) into C: alpha * acc + beta * C. Edge tiles go through a
 * local tile so every element sees the same vector arithmetic as in a full tile. */
#define STORE_TILE(T, V, LANES, MR, NR, NV, load, store, mul, fma, dup)                            \
    do {                                                                                           \
        V va = dup(alpha), vb = dup(beta);                                                         \
        T tile[MR * NR];                                                                           \
        bool full = mr == MR && nr == NR;                                                          \
        T *dst = full ? c : tile;                                                                  \
        int64_t ld = full ? ldc : NR;                                                              \
        if (!full)                                                                                 \
            for (int r = 0; r < MR; r++)                                                           \
                for (int j = 0; j < NR; j++)                                                       \
                    tile[r * NR + j] = beta != 0 && r < mr && j < nr ? c[r * ldc + j] : 0;         \
        for (int r = 0; r < MR; r++)                                                               \
            for (int h = 0; h < NV; h++) {                                                         \
                T *p = dst + r * ld + h * LANES;                                                   \
                V t = mul(va, acc[r][h]);                                                          \
                if (beta != 0) t = fma(t, vb, load(p));                                            \
                store(p, t);                                                                       \
            }                                                                                      \
        if (!full)                                                                                 \
            for (int r = 0; r < mr; r++)                                                           \
                for (int j = 0; j < nr; j++) c[r * ldc + j] = tile[r * NR + j];                    \
    } while (0)

/* c: [8, 12] f32 tile; a: 8 values per k; b: 12 values per k. */
static void sgemm_8x12(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                       float alpha, float beta, int mr, int nr)
{
    float32x4_t acc[8][3];
    for (int r = 0; r < 8; r++) acc[r][0] = acc[r][1] = acc[r][2] = vdupq_n_f32(0.f);
    for (int64_t k = 0; k < kc; k++, a += 8, b += 12) {
        float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4), b2 = vld1q_f32(b + 8);
        float32x4_t a0 = vld1q_f32(a), a1 = vld1q_f32(a + 4);
#define ROW(r, av, lane)                                                                           \
    acc[r][0] = vfmaq_laneq_f32(acc[r][0], b0, av, lane);                                          \
    acc[r][1] = vfmaq_laneq_f32(acc[r][1], b1, av, lane);                                          \
    acc[r][2] = vfmaq_laneq_f32(acc[r][2], b2, av, lane);
        ROW(0, a0, 0)
        ROW(1, a0, 1)
        ROW(2, a0, 2)
        ROW(3, a0, 3)
        ROW(4, a1, 0)
        ROW(5, a1, 1)
        ROW(6, a1, 2)
        ROW(7, a1, 3)
#undef ROW
    }
    STORE_TILE(float, float32x4_t, 4, 8, 12, 3, vld1q_f32, vst1q_f32, vmulq_f32, vfmaq_f32,
               vdupq_n_f32);
}

/* c: [8, 6] f64 tile; a: 8 values per k; b: 6 values per k. */
static void dgemm_8x6(int64_t kc, const double *a, const double *b, double *c, int64_t ldc,
                      double alpha, double beta, int mr, int nr)
{
    float64x2_t acc[8][3];
    for (int r = 0; r < 8; r++) acc[r][0] = acc[r][1] = acc[r][2] = vdupq_n_f64(0.);
    for (int64_t k = 0; k < kc; k++, a += 8, b += 6) {
        float64x2_t b0 = vld1q_f64(b), b1 = vld1q_f64(b + 2), b2 = vld1q_f64(b + 4);
        float64x2_t a0 = vld1q_f64(a), a1 = vld1q_f64(a + 2), a2 = vld1q_f64(a + 4);
        float64x2_t a3 = vld1q_f64(a + 6);
#define ROW(r, av, lane)                                                                           \
    acc[r][0] = vfmaq_laneq_f64(acc[r][0], b0, av, lane);                                          \
    acc[r][1] = vfmaq_laneq_f64(acc[r][1], b1, av, lane);                                          \
    acc[r][2] = vfmaq_laneq_f64(acc[r][2], b2, av, lane);
        ROW(0, a0, 0)
        ROW(1, a0, 1)
        ROW(2, a1, 0)
        ROW(3, a1, 1)
        ROW(4, a2, 0)
        ROW(5, a2, 1)
        ROW(6, a3, 0)
        ROW(7, a3, 1)
#undef ROW
    }
    STORE_TILE(double, float64x2_t, 2, 8, 6, 3, vld1q_f64, vst1q_f64, vmulq_f64, vfmaq_f64,
               vdupq_n_f64);
}

/* ---- GEMV kernels (cpu_gemm.h: dot and axpy) --------------------------------------------- */
/* NEON has no masked loads: the tail mask is the count of live lanes, and the tail goes through
 * a zeroed vector-sized buffer (no element past the count is read or written). */

static float32x4_t s_mload(int cnt, const float *p)
{
    float t[4] = {0};
    memcpy(t, p, (size_t)cnt * sizeof(float));
    return vld1q_f32(t);
}

static void s_mstore(float *p, int cnt, float32x4_t v)
{
    float t[4];
    vst1q_f32(t, v);
    memcpy(p, t, (size_t)cnt * sizeof(float));
}

static float64x2_t d_mload(int cnt, const double *p)
{
    double t[2] = {0};
    memcpy(t, p, (size_t)cnt * sizeof(double));
    return vld1q_f64(t);
}

static void d_mstore(double *p, int cnt, float64x2_t v)
{
    double t[2];
    vst1q_f64(t, v);
    memcpy(p, t, (size_t)cnt * sizeof(double));
}

/* Fixed-order horizontal sums: (l0 + l2) + (l1 + l3). */
static float s_hsum(float32x4_t v)
{
    float32x2_t s = vadd_f32(vget_low_f32(v), vget_high_f32(v));
    return vget_lane_f32(s, 0) + vget_lane_f32(s, 1);
}

static double d_hsum(float64x2_t v)
{
    return vgetq_lane_f64(v, 0) + vgetq_lane_f64(v, 1);
}

/* the templates' VFMA(a, b, c) is a * b + c; vfmaq(c, a, b) computes c + a * b, fused */
static float32x4_t s_fma(float32x4_t a, float32x4_t b, float32x4_t c)
{
    return vfmaq_f32(c, a, b);
}

static float64x2_t d_fma(float64x2_t a, float64x2_t b, float64x2_t c)
{
    return vfmaq_f64(c, a, b);
}

static float32x4_t s_zero(void)
{
    return vdupq_n_f32(0.f);
}

static float64x2_t d_zero(void)
{
    return vdupq_n_f64(0.);
}

#define T                float
#define V                float32x4_t
#define MASK             int
#define LANES            4
#define TAILMASK(cnt)    ((int)(cnt))
#define VZERO            s_zero
#define VSET1            vdupq_n_f32
#define VLOAD            vld1q_f32
#define VMLOAD(m, p)     s_mload(m, p)
#define VSTORE           vst1q_f32
#define VMSTORE(p, m, v) s_mstore(p, m, v)
#define VFMA             s_fma
#define VADD             vaddq_f32
#define VRED             s_hsum
DOT_FN(sdot_neon)
AXPY_FN(saxpy_neon)
#undef T
#undef V
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
#define T                double
#define V                float64x2_t
#define LANES            2
#define VZERO            d_zero
#define VSET1            vdupq_n_f64
#define VLOAD            vld1q_f64
#define VMLOAD(m, p)     d_mload(m, p)
#define VSTORE           vst1q_f64
#define VMSTORE(p, m, v) d_mstore(p, m, v)
#define VFMA             d_fma
#define VADD             vaddq_f64
#define VRED             d_hsum
DOT_FN(ddot_neon)
AXPY_FN(daxpy_neon)

/* Blocking for cores with 64 KiB of L1 data cache and 1 MiB of L2 (Neoverse N1/V1 class): a
 * 12 x 256 f32 B micro-panel (12 KiB) stays in L1 beside the 8 x 256 A panel (8 KiB); the MC x
 * KC A block (128 KiB) in L2. Not tuned on hardware (qemu-user checks the results only). */
const cpu_gemm_kernels cpu_gemm_kernels_neon = {
    .name = "neon",
    .s_ukr = sgemm_8x12,
    .s_mr = 8,
    .s_nr = 12,
    .s_mc = 128,
    .s_kc = 256,
    .s_nc = 4092,
    .d_ukr = dgemm_8x6,
    .d_mr = 8,
    .d_nr = 6,
    .d_mc = 96,
    .d_kc = 256,
    .d_nc = 3072,
    .s_pack_a = NULL,
    .s_pack_bt = NULL,
    .s_dot = sdot_neon,
    .s_axpy = saxpy_neon,
    .d_dot = ddot_neon,
    .d_axpy = daxpy_neon,
};
