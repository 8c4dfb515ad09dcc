// The PTX of the copy-engine pipeline (sm_90a; matmul_tw.cuh, matmul_wgmma.cu, matmul_sgt.cu):
// the tensor map a kernel takes, mbarriers, bulk tensor copies (2-D and 4-D boxes, im2col), the
// block's dynamic shared memory and the register split between the producer and consumer
// warpgroups. scripts/cuda_emu/sgt_emu.cpp defines this header's guard and emulates each function
// on the CPU.
#ifndef EMBER_CUDA_MATMUL_TMA_CUH
#define EMBER_CUDA_MATMUL_TMA_CUH
#include "prelude.cuh"

struct __align__(64) em_tmap {
    unsigned long long w[16];
};

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
                 "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void mbar_arrive(unsigned bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// Waits until the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity)
{
    unsigned done = 0;
    while (!done)
        asm volatile("{\n.reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
}

// Box of map at element coordinates (c0 innermost, c1) into shared dst; completes on bar.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const em_tmap *map, int c0, int c1,
                                            unsigned bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
                 "l"((unsigned long long)map), "r"(c0), "r"(c1), "r"(bar)
                 : "memory");
}

__device__ __forceinline__ void tma_load_4d(unsigned dst, const em_tmap *map, int c0, int c1,
                                            int c2, int c3, unsigned bar)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
                 "l"((unsigned long long)map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
                 : "memory");
}

// The copy engine's im2col mode (a map from cuTensorMapEncodeIm2col): pixels from (c, w, h, n),
// each read at the offsets (ow, oh).
__device__ __forceinline__ void tma_load_im2col(unsigned dst, const em_tmap *map, int c, int w,
                                                int h, int n, unsigned short ow,
                                                unsigned short oh, unsigned bar)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4, %5}], [%6], {%7, %8};\n" ::"r"(dst),
                 "l"((unsigned long long)map), "r"(c), "r"(w), "r"(h), "r"(n), "r"(bar), "h"(ow),
                 "h"(oh)
                 : "memory");
}

// Makes the mbarriers' initialisation visible to the copy engine and the other threads.
__device__ __forceinline__ void mbar_fence_init()
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// The block's dynamic shared memory (tw_start aligns the stage area in it to 1024 bytes).
__device__ __forceinline__ unsigned char *tw_dyn_smem()
{
    extern __shared__ __align__(1024) unsigned char tws[];
    return tws;
}

// The register split: the producer warpgroup drops to 40 registers a thread, the consumer
// warpgroups rise to 232.
__device__ __forceinline__ void tw_regs_producer()
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
}

__device__ __forceinline__ void tw_regs_consumer()
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
}
#endif
