// What the block-level kernel emulators (lsg_emu.cpp, norm_emu.cpp) share: CUDA C's qualifiers
// spelled away, one std::thread per CUDA thread of a block (blocks one after the other),
// __syncthreads and warp shuffles through barriers, float4 / double2, the bit casts prelude.cuh
// uses, the block's dynamic shared memory (smem.cuh's dyn_smem), and a checker against f64
// references that counts checks and failures. The kernel files are then included as they are.
#ifndef EMBER_CUDA_EMU_BLOCK_H
#define EMBER_CUDA_EMU_BLOCK_H
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
typedef long long i64;
typedef unsigned long long u64;
#define __device__
#define __global__
#define __launch_bounds__(...)
#define __forceinline__
#define __shared__ static
#define __align__(x)
struct dim3e {
    unsigned x, y, z;
};
thread_local dim3e threadIdx, blockIdx;
dim3e gridDim, blockDim;
struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(16) double2 {
    double x, y;
};
static float4 make_float4(float a, float b, float c, float d)
{
    return {a, b, c, d};
}
static double2 make_double2(double a, double b)
{
    return {a, b};
}
static std::barrier<> *blockbar;
static std::barrier<> *warpbar[8];
static void __syncthreads()
{
    blockbar->arrive_and_wait();
}
static float __int_as_float(int i)
{
    float f;
    memcpy(&f, &i, 4);
    return f;
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
static double __longlong_as_double(long long i)
{
    double d;
    memcpy(&d, &i, 8);
    return d;
}
template <typename T> static T __shfl_xor_sync(unsigned, T v, int m)
{
    static T slot[8][32]; // one per warp and lane, for each type
    int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    slot[w][l] = v;
    warpbar[w]->arrive_and_wait();
    T r = slot[w][l ^ m];
    warpbar[w]->arrive_and_wait();
    return r;
}

// smem.cuh: the dynamic shared memory of the one block running
#define EMBER_CUDA_SMEM_CUH
alignas(16) static unsigned char g_smem[2 * 8192 * 4];
template <typename T> static T *dyn_smem()
{
    return (T *)g_smem;
}

static int fails;
static i64 checks;

// runs fn on every thread of `blocks` blocks of bx x by threads (at most 256, whole warps along
// x; shuffles only where by is 1), one block after the other
template <typename F> static void launch(unsigned blocks, F fn, unsigned bx = 256, unsigned by = 1)
{
    gridDim = {blocks, 1, 1};
    blockDim = {bx, by, 1};
    const unsigned nt = bx * by;
    for (unsigned b = 0; b < blocks; b++) {
        std::barrier<> bb(nt), w0(32), w1(32), w2(32), w3(32), w4(32), w5(32), w6(32), w7(32);
        std::barrier<> *ws[8] = {&w0, &w1, &w2, &w3, &w4, &w5, &w6, &w7};
        blockbar = &bb;
        for (int k = 0; k < 8; k++) warpbar[k] = ws[k];
        std::vector<std::thread> th;
        for (unsigned tid = 0; tid < nt; tid++)
            th.emplace_back([&, b, tid] {
                blockIdx = {b, 0, 0};
                threadIdx = {tid % bx, tid / bx, 0};
                fn();
            });
        for (auto &h : th) h.join();
    }
}

static void check(const char *what, double want, double got, double tol = 1e-5, double rtol = -1)
{
    checks++;
    if (rtol < 0) rtol = tol;
    bool ok = std::isnan(want)   ? std::isnan(got)
              : std::isinf(want) ? got == want
                                 : std::fabs(got - want) <= tol + rtol * std::fabs(want);
    if (!ok && fails++ < 20) fprintf(stderr, "FAIL %s: got %.9g, want %.9g\n", what, got, want);
}
#endif
