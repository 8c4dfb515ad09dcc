// matmul_bias_act's epilogue as the matmul kernels apply it in their stores (matmul.cu,
// matmul_sgemm.cu, matmul_wgmma.cu). The CPU emulators (scripts/cuda_emu/emu_common.h) define
// this header's guard and give an f32 version of ep_apply.
#ifndef EMBER_CUDA_MATMUL_EP_CUH
#define EMBER_CUDA_MATMUL_EP_CUH
#include "ew_scalar.cuh"
#include "matmul.cuh"
#include "matmul_mma.cuh"

// struct mmep, e.on == 0 for a plain product. In f32 before the store's rounding: bias[col] added
// (bias in the output type TY: 0 f16, 1 bf16, 2 f32), the pre-activation stored at element idx
// of pre when asked for, then the activation with the unary kernels' definitions (unary_f), so
// the value matches em_add then the activation up to the roundings the fused form skips.
__device__ __noinline__ float ep_act(int act, float v)
{
    switch (act) {
    case 1: return unary_f(OP_RELU, v, 0.f, 0.f);
    case 2: return unary_f(OP_GELU, v, 0.f, 0.f);
    case 3: return unary_f(OP_GELU_TANH, v, 0.f, 0.f);
    case 4: return unary_f(OP_SILU, v, 0.f, 0.f);
    default: return v;
    }
}

template <int TY> __device__ __forceinline__ float ep_apply(const mmep &e, float v, i64 col, i64 idx)
{
    if (e.bias) {
        if (TY == 2)
            v += ((const float *)e.bias)[col * e.bs];
        else
            v += half_to_f<TY>(((const unsigned short *)e.bias)[col * e.bs]);
    }
    if (e.pre) {
        if (TY == 2)
            ((float *)e.pre)[idx] = v;
        else
            ((unsigned short *)e.pre)[idx] = f_to_half<TY>(v);
    }
    return e.act ? ep_act(e.act, v) : v;
}
#endif
