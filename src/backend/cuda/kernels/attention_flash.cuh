// What the flash attention kernels (attention_flash2.cu forward, attention_bwd.cu backward) share
// and what runs on any C++ compiler: their tile sizes, the forward's argument and the store of a
// row's log-sum-exp. f16/bf16, head dim D = E = Ev of 64 or 128; inputs with the last dim
// contiguous, row strides multiples of 8 halves and 16-byte aligned bases (the host checks).
#ifndef EMBER_CUDA_ATTENTION_FLASH_CUH
#define EMBER_CUDA_ATTENTION_FLASH_CUH
#include "prelude.cuh"

#define ATTN_BM 128
#define ATTN_BN 64

struct attn_flash_arg {
    i64 bshape[8];
    i64 qb[8], kb[8], vb[8], mb[8]; // batch strides (elements), 0 where broadcast
    i64 qs, ks, vs;                 // row strides (elements)
    i64 ms[2];                      // mask row and column strides (0 where broadcast)
    i64 L, S, nbatch;
    float scale_log2; // scale * log2(e)
    float inv_scale;  // an additive mask enters the raw scores as add / scale
    int nb, causal, mkind;
};

// Row i's base-2 log-sum-exp from its running max m (scaled, base 2) and sum l of 2^(s - m), into
// lse[base + i] by the first lane of the row's quad; +inf where every key was masked (m = -inf:
// the backward then takes P = 0). Nothing when lse is NULL or the row is past L.
__device__ __forceinline__ void attn_store_lse(float *lse, i64 base, i64 i, i64 L, float m,
                                               float l)
{
    if (lse && i < L && (threadIdx.x & 3) == 0)
        lse[base + i] = m == -__int_as_float(0x7f800000) ? __int_as_float(0x7f800000) : m + log2f(l);
}
#endif
