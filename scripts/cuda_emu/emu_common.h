// What the exact f32 matmul emulators (sgemm_emu.cpp, sgt_emu.cpp) share: CUDA C's qualifiers
// spelled away, the thread and block indices (thread-local: one std::thread per CUDA thread),
// float4 and the bit casts prelude.cuh uses, kernels/matmul.cuh as it is, and in place of
// kernels/matmul_ep.cuh (its guard defined here) an f32 version of matmul_bias_act's epilogue
// (bias, the saved pre-activation, ReLU only).
#ifndef EMBER_CUDA_EMU_COMMON_H
#define EMBER_CUDA_EMU_COMMON_H
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
typedef long long i64;
#define __device__
#define __forceinline__
#define __global__
#define __align__(x) __attribute__((aligned(x)))
#define __launch_bounds__(...)
struct dim3e {
    unsigned x, y, z;
};
thread_local dim3e threadIdx, blockIdx;
dim3e gridDim;
struct float4 {
    float x, y, z, w;
};
static float4 make_float4(float a, float b, float c, float d)
{
    return {a, b, c, d};
}
static float __uint_as_float(unsigned i)
{
    float f;
    memcpy(&f, &i, 4);
    return f;
}
static unsigned __float_as_uint(float f)
{
    unsigned i;
    memcpy(&i, &f, 4);
    return i;
}
#include "../../src/backend/cuda/kernels/matmul.cuh"
#define EMBER_CUDA_MATMUL_EP_CUH
// the epilogue with f32 bias, the pre-activation and ReLU (act 1) only
template <int TY> static float ep_apply(const mmep &e, float v, i64 col, i64 idx)
{
    if (e.bias) v += ((const float *)e.bias)[col * e.bs];
    if (e.pre) ((float *)e.pre)[idx] = v;
    return e.act == 1 ? (v > 0 ? v : 0) : v;
}
// One output checked against its f64 sum r: with the epilogue (epi), r + bias against the saved
// pre-activation and ReLU of that against the output c. Counts checks; returns how many failed.
static int emu_check(double r, bool epi, float bias, float pre, float c, i64 &checks)
{
    int bad = 0;
    if (epi) {
        r += bias;
        bad += std::fabs(r - pre) > 1e-3;
        r = r > 0 ? r : 0;
    }
    checks += 1 + epi;
    return bad + (std::fabs(r - c) > 1e-3);
}
#endif
