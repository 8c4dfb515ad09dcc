// What every kernel unit starts from: the integer types, the grid-stride loop and the f16 and
// bf16 conversions the CPU backend uses.
// NVRTC gets this file as a named header (cuda_kernels.c embeds it at build time).
#ifndef EMBER_CUDA_PRELUDE_CUH
#define EMBER_CUDA_PRELUDE_CUH
typedef long long i64;
typedef unsigned long long u64;
#define GRID_LOOP(n)                                                                               \
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                              \
         i += (i64)blockDim.x * gridDim.x)
/* f16 and bf16 bits to and from f32, exactly as src/core/dtype.c converts (round to
 * nearest even, NaN kept quiet with its payload's top bits) */
__device__ __forceinline__ float em_h2f(unsigned short h)
{
    unsigned sign = ((unsigned)h & 0x8000u) << 16, e = ((unsigned)h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return __uint_as_float(sign | 0x7f800000u | (m ? 0x400000u | (m << 13) : 0u));
    if (e == 0) {
        if (m == 0) return __uint_as_float(sign);
        e = 113;
        while (!(m & 0x400u)) {
            m <<= 1;
            e--;
        }
        return __uint_as_float(sign | (e << 23) | ((m & 0x3ffu) << 13));
    }
    return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));
}
__device__ __forceinline__ unsigned short em_f2h(float f)
{
    unsigned x = __float_as_uint(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (unsigned short)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);
    if (ax >= 0x38800000u) {
        unsigned odd = (ax >> 13) & 1u;
        ax += 0xc8000fffu + odd;
        return (unsigned short)(sign | (ax >> 13));
    }
    if (ax <= 0x33000000u) return (unsigned short)sign;
    unsigned e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, shift = 126u - e;
    unsigned k = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (k & 1u))) k++;
    return (unsigned short)(sign | k);
}
__device__ __forceinline__ float em_b2f(unsigned short b)
{
    return __uint_as_float((unsigned)b << 16);
}
__device__ __forceinline__ unsigned short em_f2b(float f)
{
    unsigned x = __float_as_uint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x0040u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (unsigned short)(x >> 16);
}
// A strided view: shape and element strides, rank at most 16 (copy.cu, attention_rows.cu).
struct strided {
    i64 shape[16];
    i64 strides[16];
    int rank;
};
#endif
