// The copy-engine pipeline's portable parts (matmul_wgmma.cu, matmul_sgt.cu): the stage count,
// the persistent grid's walk over output tiles and split-K ranges, the stages' mbarriers, the
// producer's loop, the convolution's geometry and the f32 kernels' macro. The PTX comes from
// matmul_tma.cuh; scripts/cuda_emu/sgt_emu.cpp includes this header as it is.
#ifndef EMBER_CUDA_MATMUL_TW_CUH
#define EMBER_CUDA_MATMUL_TW_CUH
#include "matmul.cuh"
#include "matmul_mma.cuh"
#include "matmul_tma.cuh"

#define TW_STAGES 4

// Output tile t of tm x tn: 16 row tiles at a time, walking the rows fastest.
__device__ __forceinline__ void tw_tile(int t, int tm, int tn, int &mt, int &nt)
{
    const int per = 16 * tn, g = t / per, r = t - g * per, first = g * 16;
    const int gs = tm - first < 16 ? tm - first : 16;
    mt = first + r % gs;
    nt = r / gs;
}

// Work unit u of tm x tn output tiles each split into `splits` k ranges (split-K): the tile
// (tw_tile's order over u / splits) and its k tiles [k0, k1) of kts, the ranges as even as the
// division allows (none empty while splits <= kts). With splits 1, the tile u and all of k.
__device__ __forceinline__ void tw_unit(int u, int tm, int tn, int kts, int splits, int &mt,
                                        int &nt, int &k0, int &k1)
{
    const int t = u / splits, s = u - t * splits;
    tw_tile(t, tm, tn, mt, nt);
    k0 = s * kts / splits;
    k1 = (s + 1) * kts / splits;
}

// The mbarriers of the stages (full: one arrival, the producer's; empty: one per consumer warp)
// and the register split between the producer and consumer warpgroups.
__device__ __forceinline__ void tw_init(unsigned full0, unsigned empty0)
{
    if (threadIdx.x == 0) {
        for (int s = 0; s < TW_STAGES; s++) {
            mbar_init(full0 + 8 * s, 1);
            mbar_init(empty0 + 8 * s, 8);
        }
        mbar_fence_init();
    }
    __syncthreads();
}

// Every wgmma kernel's start: the stage area, 1024-byte aligned in dynamic shared memory (its
// address returned), with the stages' mbarriers initialised. (The register split stays in the
// kernels' own producer and consumer branches: moved in here, ptxas gave the narrow kernels 116
// registers and the wide ones 8 bytes of spills.)
__device__ __forceinline__ unsigned tw_start(unsigned stage)
{
    const unsigned base = (smem_u32(tw_dyn_smem()) + 1023u) & ~1023u;
    const unsigned full0 = base + TW_STAGES * stage;
    tw_init(full0, full0 + 8 * TW_STAGES);
    return base;
}

// The producer thread's loop: for each work unit of this block (tw_unit: an output tile in
// tw_tile's order, or with splits > 1 one of its k ranges) and each of its k tiles, waits until
// the next stage is released, expects `bytes` on the stage's full mbarrier and calls load(stage
// address, full mbarrier, mt, nt, kt) to issue the copies.
template <typename Load>
__device__ __forceinline__ void tw_produce(unsigned base, unsigned stage, unsigned bytes, int tm,
                                           int tn, int kts, Load &&load, int splits = 1)
{
    const unsigned full0 = base + TW_STAGES * stage, empty0 = full0 + 8 * TW_STAGES;
    int it = 0;
    for (int u = blockIdx.x; u < tm * tn * splits; u += gridDim.x) {
        int mt, nt, k0, k1;
        tw_unit(u, tm, tn, kts, splits, mt, nt, k0, k1);
        for (int kt = k0; kt < k1; kt++, it++) {
            const int s = it % TW_STAGES;
            mbar_wait(empty0 + 8 * s, ((it / TW_STAGES) & 1) ^ 1);
            const unsigned full = full0 + 8 * s;
            mbar_expect_tx(full, bytes);
            load(base + s * stage, full, mt, nt, kt);
        }
    }
}

struct twconv { // matches tw_conv_arg in cuda_conv.c
    int Cout, OH, OW, KW, ph, pw, dh, dw;
    int BW, BH, tw, th; // box; column tiles per image: tw along OW, th along OH
    int ntiles, cpt;    // column tiles (N th tw); k tiles per tap (C / 64)
    int kts;            // Kh Kw C / 64
    int npix;           // N OH OW (the f32 im2col kernel's columns)
    int splits;         // k ranges per output tile (em_conv_sgt_f32*; the others take 1)
};

// Column tile nt: image n, first output row oh0 and column ow0.
__device__ __forceinline__ void twc_cols(const twconv &g, int nt, int &n, int &oh0, int &ow0)
{
    const int per = g.th * g.tw, r = nt - (n = nt / per) * per, rh = r / g.tw;
    oh0 = rh * g.BH;
    ow0 = (r - rh * g.tw) * g.BW;
}

// A kernel of one block of 384 threads per multiprocessor with an f32 output from two tensor
// maps: name(first map, second map, c, rows, columns, K, epilogue) calls body (a device function)
// with the maps' addresses and the rest.
#define TMAP_F32_KERNEL(name, ...)                                                                 \
    extern "C" __global__ void __launch_bounds__(384, 1)                                           \
        name(const __grid_constant__ em_tmap ma, const __grid_constant__ em_tmap mb, float *c,     \
             int M, int N, int K, mmep ep)                                                         \
    {                                                                                              \
        __VA_ARGS__(&ma, &mb, c, M, N, K, ep);                                                     \
    }
#endif
