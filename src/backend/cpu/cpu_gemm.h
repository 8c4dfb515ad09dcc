/* CPU GEMM entry points shared by matmul, convolution and the layers above. */
#ifndef EMBER_CPU_GEMM_H
#define EMBER_CPU_GEMM_H

#include <stdbool.h>
#include <stdint.h>

/* C[M,N] = alpha * op(A)[M,K] . op(B)[K,N] + beta * C, row-major with leading dimensions
 * lda/ldb/ldc (elements); op(X) is X transposed when ta/tb. beta == 0 ignores C's old values
 * (NaN in C does not propagate). Multi-threaded on the pool for large products; the result
 * does not depend on the thread count. */
void cpu_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
               int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
void cpu_dgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double *A,
               int64_t lda, const double *B, int64_t ldb, double beta, double *C, int64_t ldc);

/* An epilogue run on C as the GEMM finishes it: fn(ctx, C + i0 * ldc + j0, ldc, i0, j0, rows,
 * cols) for each block of rows x cols at (i0, j0) right after its last K step, while the block is
 * still in cache (vector-shaped products: once over all of C after the GEMV). Every element is
 * passed exactly once and only its final value, so an element-wise epilogue gives the same
 * result whatever the blocking or the thread count. C is float * or double * by the GEMM. */
typedef struct cpu_gemm_epi {
    void (*fn)(const void *ctx, void *C, int64_t ldc, int64_t i0, int64_t j0, int64_t rows,
               int64_t cols);
    const void *ctx;
} cpu_gemm_epi;
/* cpu_sgemm / cpu_dgemm followed by epi (NULL: none) per finished block. */
void cpu_sgemm_epi(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                   int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
                   const cpu_gemm_epi *epi);
void cpu_dgemm_epi(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double *A,
                   int64_t lda, const double *B, int64_t ldb, double beta, double *C, int64_t ldc,
                   const cpu_gemm_epi *epi);

/* An operand the GEMM does not read from memory but has a callback pack (an implicit im2col):
 * pack(ctx, k0, kc, i0, n, w, dst) writes dst[k * w + c] = X[i0 + c, k0 + k] for c < n, k < kc
 * and zeros for n <= c < w, where X is op(A) [M, K] (w = the register tile's rows) or op(B)^T
 * [N, K] (w = its columns), values of the GEMM's element type. Any k0, kc, i0 and n. */
typedef struct cpu_gemm_src {
    void (*pack)(const void *ctx, int64_t k0, int64_t kc, int64_t i0, int n, int w, void *dst);
    const void *ctx;
} cpu_gemm_src;
/* cpu_sgemm_epi / cpu_dgemm_epi with A packed by asrc (A, lda, ta unused) and/or B by bsrc (B,
 * ldb, tb unused), NULL for one read from memory. Always the packed path with its blocking, so
 * the result is the one cpu_sgemm gives for the same values packed from memory (same bits) when
 * cpu_gemm_packed(M, N, K). False (C untouched) when the packing buffers could not be had. */
bool cpu_sgemm_src(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                   int64_t lda, const cpu_gemm_src *asrc, const float *B, int64_t ldb,
                   const cpu_gemm_src *bsrc, float beta, float *C, int64_t ldc,
                   const cpu_gemm_epi *epi);
bool cpu_dgemm_src(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double *A,
                   int64_t lda, const cpu_gemm_src *asrc, const double *B, int64_t ldb,
                   const cpu_gemm_src *bsrc, double beta, double *C, int64_t ldc,
                   const cpu_gemm_epi *epi);
/* Whether cpu_sgemm / cpu_dgemm take the packed path for these sizes (not the unpacked loops
 * of small products nor the GEMV of vector-shaped ones). */
bool cpu_gemm_packed(int64_t M, int64_t N, int64_t K);

/* ---- micro-kernels (cpu_gemm.c picks one set at run time) -------------------------------- */

/* C[mr, nr] (row stride ldc) = alpha * Ap . Bp + beta * C over kc steps, where Ap holds MR
 * values per k (a packed row panel, zero padded) and Bp NR values per k. mr <= MR, nr <= NR
 * cut the tile at the matrix edge; beta == 0 never reads C. Edge tiles use the same
 * arithmetic per element as full ones. */
typedef void (*cpu_sgemm_ukr)(int64_t kc, const float *Ap, const float *Bp, float *C, int64_t ldc,
                              float alpha, float beta, int mr, int nr);
typedef void (*cpu_dgemm_ukr)(int64_t kc, const double *Ap, const double *Bp, double *C,
                              int64_t ldc, double alpha, double beta, int mr, int nr);

/* Vector-shaped products (M == 1 or N == 1), raw sums without alpha/beta, x contiguous:
 * dot:  y[r] = sum_k A[r * lda + k] * x[k] for r < n (rows of A dotted with x). The order of
 *       one row's sum depends only on K, never on n or on the row's position.
 * axpy: y[j] = sum_k x[k] * A[k * lda + j] for j < n (k ascending, one fused or plain
 *       multiply-add per k, the same for every j). */
typedef void (*cpu_sgemv_fn)(int64_t n, int64_t K, const float *A, int64_t lda, const float *x,
                             float *y);
typedef void (*cpu_dgemv_fn)(int64_t n, int64_t K, const double *A, int64_t lda, const double *x,
                             double *y);

/* Packs one full row panel of a row-major A: dst[k * MR + r] = A[r * lda + k] for r < MR,
 * k < kc (a plain copy, so any implementation gives the same bytes). */
typedef void (*cpu_spack_fn)(int64_t kc, const float *A, int64_t lda, float *dst);

/* Packs one full column panel of a transposed B (B^T row-major, ldb): dst[k * NR + c] =
 * B[c * ldb + k] for c < NR, k < kc (a plain copy, like cpu_spack_fn). */
typedef void (*cpu_spack_bt_fn)(int64_t kc, const float *B, int64_t ldb, float *dst);

/* One ISA's kernels with their register tile (MR x NR) and cache blocks (MC, KC, NC);
 * s_pack_a and s_pack_bt may be NULL (the driver's C loops pack then). */
typedef struct cpu_gemm_kernels {
    const char *name;
    cpu_sgemm_ukr s_ukr;
    int s_mr, s_nr, s_mc, s_kc, s_nc;
    cpu_dgemm_ukr d_ukr;
    int d_mr, d_nr, d_mc, d_kc, d_nc;
    cpu_spack_fn s_pack_a;
    cpu_spack_bt_fn s_pack_bt;
    cpu_sgemv_fn s_dot, s_axpy;
    cpu_dgemv_fn d_dot, d_axpy;
} cpu_gemm_kernels;

/* x86 (built there only): */
extern const cpu_gemm_kernels cpu_gemm_kernels_avx2;   /* cpu_gemm_avx2.c: 6x16 f32, 6x8 f64 */
extern const cpu_gemm_kernels cpu_gemm_kernels_avx512; /* cpu_gemm_avx512.c */
/* 64-bit Arm (built there only): */
extern const cpu_gemm_kernels cpu_gemm_kernels_neon; /* cpu_gemm_neon.c: 8x12 f32, 8x6 f64 */

/* Tests: true forces the portable C micro-kernels; false returns to the run-time choice
 * (which EMBER_GEMM=portable|avx2 can also steer, read once). */
void cpu_gemm_force_portable(bool on);
/* Tests: forces the kernel set called `name` ("portable", "avx2", "avx512", "neon"); NULL
 * returns to the run-time choice. False (and no change) when this CPU cannot run that set. */
bool cpu_gemm_use(const char *name);
/* Name of the kernel set the next call will use ("portable", "avx2", "avx512", "neon"). */
const char *cpu_gemm_kernel_name(void);
/* Whether that set is one of the x86 ones, which the convolution's AVX2 / AVX-512 paths go
 * with (they are compiled on x86 only; with the portable set, which tests force to compare
 * against, the convolution takes its portable paths too). */
bool cpu_gemm_x86(void);

#ifdef CPU_GEMM_GEMV_TEMPLATES
/* ---- GEMV kernel templates for the ISA files ------------------------------------------------
 * An ISA file defines CPU_GEMM_GEMV_TEMPLATES before including this header, then per element
 * type T, V (vector), MASK, LANES, TAILMASK(cnt) and VZERO VSET1 VLOAD VMLOAD(mask, p) VSTORE
 * VMSTORE(p, mask, v) VFMA VADD VRED, and instantiates DOT_FN(name) and AXPY_FN(name). Masked
 * loads must not touch the masked-off elements (no reads past the matrix). */

/* One row's dot product uses two accumulators (k in steps of 2 * LANES), then one more
 * vector into the first, then the masked tail into the second, then a fixed reduction. The
 * six- and four-row loops run exactly that per row, so a row's result does not depend on its
 * group. */
#define DOT_ROW_DECL(r)                                                                            \
    V s##r##_0 = VZERO(), s##r##_1 = VZERO();                                                      \
    const T *a##r = A + (r)*lda;
#define DOT_ROW_2(r)                                                                               \
    s##r##_0 = VFMA(VLOAD(a##r + k), x0, s##r##_0);                                                \
    s##r##_1 = VFMA(VLOAD(a##r + k + LANES), x1, s##r##_1);
#define DOT_ROW_1(r)   s##r##_0 = VFMA(VLOAD(a##r + k), x0, s##r##_0);
#define DOT_ROW_T(r)   s##r##_1 = VFMA(VMLOAD(tm, a##r + k), x0, s##r##_1);
#define DOT_ROW_OUT(r) y[r] = VRED(VADD(s##r##_0, s##r##_1));

#define DOT_ROWS(NROWS)                                                                            \
    do {                                                                                           \
        NROWS(DOT_ROW_DECL)                                                                        \
        int64_t k = 0;                                                                             \
        for (; k + 2 * LANES <= K; k += 2 * LANES) {                                               \
            V x0 = VLOAD(x + k), x1 = VLOAD(x + k + LANES);                                        \
            NROWS(DOT_ROW_2)                                                                       \
        }                                                                                          \
        if (k + LANES <= K) {                                                                      \
            V x0 = VLOAD(x + k);                                                                   \
            NROWS(DOT_ROW_1)                                                                       \
            k += LANES;                                                                            \
        }                                                                                          \
        if (k < K) {                                                                               \
            V x0 = VMLOAD(tm, x + k);                                                              \
            NROWS(DOT_ROW_T)                                                                       \
        }                                                                                          \
        NROWS(DOT_ROW_OUT)                                                                         \
    } while (0)

#define R6(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define R4(X) X(0) X(1) X(2) X(3)
#define R1(X) X(0)

#define DOT_FN(NAME)                                                                               \
    static void NAME(int64_t n, int64_t K, const T *A, int64_t lda, const T *x, T *y)              \
    {                                                                                              \
        MASK tm = TAILMASK(K % LANES);                                                             \
        int64_t r = 0;                                                                             \
        for (; r + 6 <= n; r += 6, A += 6 * lda, y += 6) DOT_ROWS(R6);                             \
        for (; r + 4 <= n; r += 4, A += 4 * lda, y += 4) DOT_ROWS(R4);                             \
        for (; r < n; r++, A += lda, y++) DOT_ROWS(R1);                                            \
    }

/* axpy: y = 0, then for each k ascending y[j] = fma(x[k], A[k, j], y[j]) (masked at the edge,
 * same rounding), eight rows of A per pass over y (more streams from memory at once), then
 * four, then one. */
#define AXPY_FN(NAME)                                                                              \
    static void NAME(int64_t n, int64_t K, const T *A, int64_t lda, const T *x, T *y)              \
    {                                                                                              \
        MASK tm = TAILMASK(n % LANES);                                                             \
        int64_t nv = n - n % LANES;                                                                \
        for (int64_t j = 0; j < n; j++) y[j] = 0;                                                  \
        int64_t k = 0;                                                                             \
        for (; k + 8 <= K; k += 8) {                                                               \
            const T *a0 = A + k * lda, *a1 = a0 + lda, *a2 = a1 + lda, *a3 = a2 + lda;             \
            const T *a4 = a3 + lda, *a5 = a4 + lda, *a6 = a5 + lda, *a7 = a6 + lda;                \
            V x0 = VSET1(x[k]), x1 = VSET1(x[k + 1]), x2 = VSET1(x[k + 2]), x3 = VSET1(x[k + 3]);  \
            V x4 = VSET1(x[k + 4]), x5 = VSET1(x[k + 5]), x6 = VSET1(x[k + 6]);                    \
            V x7 = VSET1(x[k + 7]);                                                                \
            for (int64_t j = 0; j < nv; j += LANES) {                                              \
                V t = VLOAD(y + j);                                                                \
                t = VFMA(x0, VLOAD(a0 + j), t);                                                    \
                t = VFMA(x1, VLOAD(a1 + j), t);                                                    \
                t = VFMA(x2, VLOAD(a2 + j), t);                                                    \
                t = VFMA(x3, VLOAD(a3 + j), t);                                                    \
                t = VFMA(x4, VLOAD(a4 + j), t);                                                    \
                t = VFMA(x5, VLOAD(a5 + j), t);                                                    \
                t = VFMA(x6, VLOAD(a6 + j), t);                                                    \
                t = VFMA(x7, VLOAD(a7 + j), t);                                                    \
                VSTORE(y + j, t);                                                                  \
            }                                                                                      \
            if (nv < n) {                                                                          \
                V t = VMLOAD(tm, y + nv);                                                          \
                t = VFMA(x0, VMLOAD(tm, a0 + nv), t);                                              \
                t = VFMA(x1, VMLOAD(tm, a1 + nv), t);                                              \
                t = VFMA(x2, VMLOAD(tm, a2 + nv), t);                                              \
                t = VFMA(x3, VMLOAD(tm, a3 + nv), t);                                              \
                t = VFMA(x4, VMLOAD(tm, a4 + nv), t);                                              \
                t = VFMA(x5, VMLOAD(tm, a5 + nv), t);                                              \
                t = VFMA(x6, VMLOAD(tm, a6 + nv), t);                                              \
                t = VFMA(x7, VMLOAD(tm, a7 + nv), t);                                              \
                VMSTORE(y + nv, tm, t);                                                            \
            }                                                                                      \
        }                                                                                          \
        for (; k + 4 <= K; k += 4) {                                                               \
            const T *a0 = A + k * lda, *a1 = a0 + lda, *a2 = a1 + lda, *a3 = a2 + lda;             \
            V x0 = VSET1(x[k]), x1 = VSET1(x[k + 1]), x2 = VSET1(x[k + 2]), x3 = VSET1(x[k + 3]);  \
            for (int64_t j = 0; j < nv; j += LANES) {                                              \
                V t = VLOAD(y + j);                                                                \
                t = VFMA(x0, VLOAD(a0 + j), t);                                                    \
                t = VFMA(x1, VLOAD(a1 + j), t);                                                    \
                t = VFMA(x2, VLOAD(a2 + j), t);                                                    \
                t = VFMA(x3, VLOAD(a3 + j), t);                                                    \
                VSTORE(y + j, t);                                                                  \
            }                                                                                      \
            if (nv < n) {                                                                          \
                V t = VMLOAD(tm, y + nv);                                                          \
                t = VFMA(x0, VMLOAD(tm, a0 + nv), t);                                              \
                t = VFMA(x1, VMLOAD(tm, a1 + nv), t);                                              \
                t = VFMA(x2, VMLOAD(tm, a2 + nv), t);                                              \
                t = VFMA(x3, VMLOAD(tm, a3 + nv), t);                                              \
                VMSTORE(y + nv, tm, t);                                                            \
            }                                                                                      \
        }                                                                                          \
        for (; k < K; k++) {                                                                       \
            const T *a0 = A + k * lda;                                                             \
            V x0 = VSET1(x[k]);                                                                    \
            for (int64_t j = 0; j < nv; j += LANES)                                                \
                VSTORE(y + j, VFMA(x0, VLOAD(a0 + j), VLOAD(y + j)));                              \
            if (nv < n) VMSTORE(y + nv, tm, VFMA(x0, VMLOAD(tm, a0 + nv), VMLOAD(tm, y + nv)));    \
        }                                                                                          \
    }
#endif

#endif
