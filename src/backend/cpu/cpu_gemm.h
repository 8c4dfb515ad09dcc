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

#endif
