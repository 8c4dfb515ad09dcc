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

/* ---- micro-kernels (cpu_gemm.c picks one set at run time) -------------------------------- */

/* C[mr, nr] (row stride ldc) = alpha * Ap . Bp + beta * C over kc steps, where Ap holds MR
 * values per k (a packed row panel, zero padded) and Bp NR values per k. mr <= MR, nr <= NR
 * cut the tile at the matrix edge; beta == 0 never reads C. Edge tiles use the same
 * arithmetic per element as full ones. */
typedef void (*cpu_sgemm_ukr)(int64_t kc, const float *Ap, const float *Bp, float *C, int64_t ldc,
                              float alpha, float beta, int mr, int nr);
typedef void (*cpu_dgemm_ukr)(int64_t kc, const double *Ap, const double *Bp, double *C,
                              int64_t ldc, double alpha, double beta, int mr, int nr);

/* One ISA's kernels with their register tile (MR x NR) and cache blocks (MC, KC, NC). */
typedef struct cpu_gemm_kernels {
    const char *name;
    cpu_sgemm_ukr s_ukr;
    int s_mr, s_nr, s_mc, s_kc, s_nc;
    cpu_dgemm_ukr d_ukr;
    int d_mr, d_nr, d_mc, d_kc, d_nc;
} cpu_gemm_kernels;

extern const cpu_gemm_kernels cpu_gemm_kernels_avx2;   /* cpu_gemm_avx2.c: 6x16 f32, 6x8 f64 */
extern const cpu_gemm_kernels cpu_gemm_kernels_avx512; /* cpu_gemm_avx512.c */

/* Tests: true forces the portable C micro-kernels; false returns to the run-time choice
 * (which EMBER_GEMM=portable|avx2|avx512 can also steer, read once). */
void cpu_gemm_force_portable(bool on);
/* Tests: forces the kernel set called `name` ("portable", "avx2", "avx512"); NULL returns to
 * the run-time choice. False (and no change) when this CPU cannot run that set. */
bool cpu_gemm_use(const char *name);
/* Name of the kernel set the next call will use ("portable", "avx2", "avx512"). */
const char *cpu_gemm_kernel_name(void);

#endif
