// The mma.sync tensor-core kernels' shared tile pitches and the PTX they are built from
// (sm_80 and later): shared-window addresses, cp.async copies, ldmatrix, mma.sync m16n8k16 with
// f32 accumulation and f16 / bf16 conversions (matmul.cu, matmul_conv.cu, matmul_wgmma.cu).
#ifndef EMBER_CUDA_MATMUL_MMA_CUH
#define EMBER_CUDA_MATMUL_MMA_CUH
#include "prelude.cuh"

#define TC_BM     128
#define TC_BK     32
#define TC_STAGES 4
#define TC_PAD_K  40  // pitch (halves) of a tile stored [128][32]: 80 B, ldmatrix rows hit 8 banks
#define TC_PAD_MN 136 // pitch (halves) of a tile stored [32][128]: 272 B, likewise
// A stage holds the A tile (128 x 32) and the B tile (32 x BN, or BN x 32 when B is k-contiguous).
#define TC_B_HALVES(BN)     ((BN)*TC_PAD_K > 32 * ((BN) + 8) ? (BN)*TC_PAD_K : 32 * ((BN) + 8))
#define TC_STAGE_HALVES(BN) (128 * TC_PAD_K + TC_B_HALVES(BN))

__device__ __forceinline__ unsigned smem_u32(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void cp_async16(unsigned dst, const void *src, bool valid)
{
    int n = valid ? 16 : 0; // 0 bytes read: the 16 bytes are zero-filled
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}

__device__ __forceinline__ void ldsm_x4(unsigned addr, unsigned &r0, unsigned &r1, unsigned &r2,
                                        unsigned &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

__device__ __forceinline__ void ldsm_x4_t(unsigned addr, unsigned &r0, unsigned &r1, unsigned &r2,
                                          unsigned &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

template <int BF>
__device__ __forceinline__ void mma16816(float *c, const unsigned *a, const unsigned *b)
{
    if (BF)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Two floats rounded to nearest even, packed low = x, high = y.
template <int BF> __device__ __forceinline__ unsigned pack2(float x, float y)
{
    unsigned r;
    if (BF)
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(y), "f"(x));
    else
        asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(y), "f"(x));
    return r;
}

template <int BF> __device__ __forceinline__ float half_to_f(unsigned short h)
{
    if (BF) return __uint_as_float((unsigned)h << 16);
    float f;
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(h));
    return f;
}

template <int BF> __device__ __forceinline__ unsigned short f_to_half(float f)
{
    unsigned short h;
    if (BF)
        asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(h) : "f"(f));
    else
        asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(h) : "f"(f));
    return h;
}
#endif
