/* Portable reference GEMM (row-major, optional transposes). */
#include "cpu_gemm.h"

#define GEMM_BODY(T)                                                                           \
    for (int64_t i = 0; i < M; i++) {                                                          \
        for (int64_t j = 0; j < N; j++) {                                                      \
            T acc = 0;                                                                         \
            for (int64_t k = 0; k < K; k++) {                                                  \
                T a = ta ? A[k * lda + i] : A[i * lda + k];                                    \
                T b = tb ? B[j * ldb + k] : B[k * ldb + j];                                    \
                acc += a * b;                                                                  \
            }                                                                                  \
            C[i * ldc + j] = beta == 0 ? alpha * acc : alpha * acc + beta * C[i * ldc + j];    \
        }                                                                                      \
    }

void cpu_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
               int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    GEMM_BODY(float)
}

void cpu_dgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double *A,
               int64_t lda, const double *B, int64_t ldb, double beta, double *C, int64_t ldc)
{
    GEMM_BODY(double)
}
