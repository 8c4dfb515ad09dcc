// Batched f64 matmul (f32, f16, bf16: matmul.cu, matmul_wgmma.cu): 16 x 16 output tiles, K in
// steps of 16 through shared memory, a fixed summation order; batch dims broadcast (stride 0).
#include "matmul.cuh"

#define TS 16
#define MATMUL(NAME, T)                                                                            \
    extern "C" __global__ void NAME(const T *a, const T *b, T *c, mmidx s)                         \
    {                                                                                              \
        __shared__ double As[TS][TS + 1], Bs[TS][TS + 1];                                          \
        int tx = threadIdx.x, ty = threadIdx.y;                                                    \
        i64 row = (i64)blockIdx.y * TS + ty, col = (i64)blockIdx.x * TS + tx;                      \
        for (i64 bt = blockIdx.z; bt < s.nbatch; bt += gridDim.z) {                                \
            i64 ao = 0, bo = 0, r = bt;                                                            \
            for (int d = s.R - 1; d >= 0; d--) {                                                   \
                i64 q = r / s.bshape[d], cc = r - q * s.bshape[d];                                 \
                ao += cc * s.ast[d];                                                               \
                bo += cc * s.bst[d];                                                               \
                r = q;                                                                             \
            }                                                                                      \
            double acc = 0;                                                                        \
            for (i64 k0 = 0; k0 < s.K; k0 += TS) {                                                 \
                As[ty][tx] = (row < s.M && k0 + tx < s.K)                                          \
                                 ? (double)a[ao + row * s.sam + (k0 + tx) * s.sak]                 \
                                 : 0.0;                                                            \
                Bs[ty][tx] = (k0 + ty < s.K && col < s.N)                                          \
                                 ? (double)b[bo + (k0 + ty) * s.sbk + col * s.sbn]                 \
                                 : 0.0;                                                            \
                __syncthreads();                                                                   \
                for (int k = 0; k < TS; k++) acc += As[ty][k] * Bs[k][tx];                         \
                __syncthreads();                                                                   \
            }                                                                                      \
            if (row < s.M && col < s.N) c[(bt * s.M + row) * s.N + col] = (T)acc;                  \
        }                                                                                          \
    }
MATMUL(em_matmul_f64, double)
