// The argument of the matmul kernels: batch shape and strides, the 2-D strides of a and b, and
// matmul_bias_act's epilogue (bias, the saved pre-activation, the activation). Matches mm_arg in
// cuda_matmul.c.
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
#endif
