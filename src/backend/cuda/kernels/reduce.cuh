// What the reduction kernels (reduce.cu, reduce_lsg.cu, reduce_sort.cu) share: element access
// by dtype, the lines along one dim (struct rdline) and the block sum and max of a 256-thread
// block.
#ifndef EMBER_CUDA_REDUCE_CUH
#define EMBER_CUDA_REDUCE_CUH
#include "prelude.cuh"

// ---- element access by dtype (the em_dtype numbering) ------------------------------------
#define RD_F64  0
#define RD_F32  1
#define RD_F16  2
#define RD_BF16 3
#define RD_I64  4
#define RD_I32  5
#define RD_I16  6
#define RD_I8   7
#define RD_U8   8
#define RD_BOOL 9

// element i (in elements) of p as double (ir_get_f64)
__device__ __forceinline__ double rd_ldf(const void *p, int dt, i64 i)
{
    switch (dt) {
    case RD_F64: return ((const double *)p)[i];
    case RD_F32: return (double)((const float *)p)[i];
    case RD_F16: return (double)em_h2f(((const unsigned short *)p)[i]);
    case RD_BF16: return (double)em_b2f(((const unsigned short *)p)[i]);
    case RD_I64: return (double)((const i64 *)p)[i];
    case RD_I32: return (double)((const int *)p)[i];
    case RD_I16: return (double)((const short *)p)[i];
    case RD_I8: return (double)((const signed char *)p)[i];
    case RD_U8: return (double)((const unsigned char *)p)[i];
    default: return ((const unsigned char *)p)[i] ? 1.0 : 0.0;
    }
}

__device__ __forceinline__ i64 rd_f2i(double v)
{
    if (!(v > -9.2233720368547758e18 && v < 9.2233720368547758e18))
        return (i64)0x8000000000000000ull;
    return (i64)v;
}

// element i of p as a 64-bit integer (ir_get_i64)
__device__ __forceinline__ i64 rd_ldi(const void *p, int dt, i64 i)
{
    switch (dt) {
    case RD_I64: return ((const i64 *)p)[i];
    case RD_I32: return ((const int *)p)[i];
    case RD_I16: return ((const short *)p)[i];
    case RD_I8: return ((const signed char *)p)[i];
    case RD_U8: return ((const unsigned char *)p)[i];
    case RD_BOOL: return ((const unsigned char *)p)[i] ? 1 : 0;
    default: return rd_f2i(rd_ldf(p, dt, i));
    }
}

// ir_set_i64
__device__ __forceinline__ void rd_sti(void *p, int dt, i64 i, i64 v)
{
    switch (dt) {
    case RD_I64: ((i64 *)p)[i] = v; break;
    case RD_I32: ((int *)p)[i] = (int)(unsigned)(u64)v; break;
    case RD_I16: ((short *)p)[i] = (short)(unsigned short)(u64)v; break;
    case RD_I8: ((signed char *)p)[i] = (signed char)(unsigned char)(u64)v; break;
    case RD_U8: ((unsigned char *)p)[i] = (unsigned char)(u64)v; break;
    case RD_BOOL: ((unsigned char *)p)[i] = v != 0; break;
    case RD_F64: ((double *)p)[i] = (double)v; break;
    case RD_F32: ((float *)p)[i] = (float)v; break;
    case RD_F16: ((unsigned short *)p)[i] = em_f2h((float)v); break;
    default: ((unsigned short *)p)[i] = em_f2b((float)v); break;
    }
}

// ir_set_f64
__device__ __forceinline__ void rd_stf(void *p, int dt, i64 i, double v)
{
    switch (dt) {
    case RD_F64: ((double *)p)[i] = v; break;
    case RD_F32: ((float *)p)[i] = (float)v; break;
    case RD_F16: ((unsigned short *)p)[i] = em_f2h((float)v); break;
    case RD_BF16: ((unsigned short *)p)[i] = em_f2b((float)v); break;
    case RD_BOOL: ((unsigned char *)p)[i] = v != 0; break;
    default: rd_sti(p, dt, i, rd_f2i(v)); break;
    }
}

#define RD_INF __longlong_as_double(0x7ff0000000000000ll)

// ---- lines along one dim ------------------------------------------------------------------

// Lines: the other dims (shape, strides of x, out[0], out[1] in elements); the scanned dim has
// len elements at strides sx, s0, s1.
struct rdline {
    i64 shape[8], xs[8], os0[8], os1[8];
    int n;
    i64 lines, len, sx, s0, s1;
};

__device__ __forceinline__ void rd_line(const rdline &s, i64 r, i64 *xo, i64 *o0, i64 *o1)
{
    i64 a = 0, b = 0, c = 0;
    for (int d = s.n - 1; d >= 0; d--) {
        i64 q = r / s.shape[d], i = r - q * s.shape[d];
        a += i * s.xs[d];
        b += i * s.os0[d];
        c += i * s.os1[d];
        r = q;
    }
    *xo = a, *o0 = b, *o1 = c;
}

// ---- a 256-thread block's sum and max (NaN wins), added in a fixed order --------------------

__device__ __forceinline__ double rd_bsum(double v, double *sh)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    double r = 0;
    for (int k = 0; k < 8; k++) r += sh[k];
    return r;
}

__device__ __forceinline__ double rd_bmax(double v, double *sh)
{
    for (int o = 16; o > 0; o >>= 1) {
        double u = __shfl_xor_sync(0xffffffffu, v, o);
        if (v == v && (u > v || u != u)) v = u;
    }
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    double r = sh[0];
    for (int k = 1; k < 8; k++)
        if (r == r && (sh[k] > r || sh[k] != sh[k])) r = sh[k];
    return r;
}
#endif
