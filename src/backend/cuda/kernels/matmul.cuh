// The argument of the matmul kernels: batch shape and strides, the 2-D strides of a and b, and
// matmul_bias_act's epilogue (bias, the saved pre-activation, the activation). Matches mm_arg in
// cuda_matmul.c. Portable: the CPU emulators (scripts/cuda_emu) include it as it is.
#ifndef EMBER_CUDA_MATMUL_CUH
#define EMBER_CUDA_MATMUL_CUH
#include "prelude.cuh"

struct mmep {
    const void *bias;
    void *pre;
    i64 bs;
    int on, act;
};
struct mmidx {
    i64 bshape[8], ast[8], bst[8];
    int R;
    i64 M, K, N, sam, sak, sbk, sbn, nbatch;
    mmep ep;
};

// Batch entry bt's element offsets into a (ao) and b (bo).
__device__ __forceinline__ void batch_offsets(const mmidx &s, i64 bt, i64 &ao, i64 &bo)
{
    ao = 0;
    bo = 0;
    i64 r = bt;
    for (int d = s.R - 1; d >= 0; d--) {
        i64 q = r / s.bshape[d], cc = r - q * s.bshape[d];
        ao += cc * s.ast[d];
        bo += cc * s.bst[d];
        r = q;
    }
}
#endif
