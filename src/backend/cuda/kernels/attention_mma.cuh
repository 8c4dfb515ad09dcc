// The PTX the flash attention kernels are built from: shared-window addresses, cp.async copies
// and their groups, ldmatrix, mma.sync m16n8k16 with f32 accumulation, packing to f16/bf16, exp2
// and the block's dynamic shared memory. scripts/cuda_emu/attention_emu.cpp defines this header's
// guard and emulates each function on the CPU.
#ifndef EMBER_CUDA_ATTENTION_MMA_CUH
#define EMBER_CUDA_ATTENTION_MMA_CUH
#include "prelude.cuh"

__device__ __forceinline__ unsigned attn_smem(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void attn_cp16(unsigned dst, const void *src, bool valid)
{
    int n = valid ? 16 : 0; // nothing read: the 16 bytes are zero-filled
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}

__device__ __forceinline__ void attn_ldsm4(unsigned addr, unsigned &r0, unsigned &r1, unsigned &r2,
                                           unsigned &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

// A 32-bit store to the shared-window byte address addr.
__device__ __forceinline__ void attn_sts32(unsigned addr, unsigned x)
{
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(x));
}

__device__ __forceinline__ void attn_ldsm4_t(unsigned addr, unsigned &r0, unsigned &r1,
                                             unsigned &r2, unsigned &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

template <int BF>
__device__ __forceinline__ void attn_mma(float *c, const unsigned *a, unsigned b0, unsigned b1)
{
    if (BF)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats rounded to nearest even, packed low = x, high = y.
template <int BF> __device__ __forceinline__ unsigned attn_pack(float x, float y)
{
    unsigned r;
    if (BF)
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(y), "f"(x));
    else
        asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(y), "f"(x));
    return r;
}

__device__ __forceinline__ float attn_exp2(float x)
{
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
    return r;
}

template <int BF> __device__ __forceinline__ float attn_h2f(unsigned short h)
{
    if (BF) return __uint_as_float((unsigned)h << 16);
    float f;
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ void attn_cp_commit()
{
    asm volatile("cp.async.commit_group;\n" ::);
}

// Waits until at most N of this thread's cp.async groups are in flight.
template <int N> __device__ __forceinline__ void attn_cp_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// The block's dynamic shared memory (the launch's smem bytes), 16-byte aligned.
__device__ __forceinline__ unsigned short *attn_dyn_smem()
{
    extern __shared__ __align__(16) unsigned short attn_dsm[];
    return attn_dsm;
}
#endif
