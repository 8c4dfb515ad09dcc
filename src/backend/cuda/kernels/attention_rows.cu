// The scores of attention computed by the matmul kernels (cuda_attention.c's f32/f64 path):
// one block (or, for rows of at most 2048, one warp) per row of S scores, in place: scale, the
// causal cut, the mask, then a softmax with the CPU GEMM path's arithmetic (scores and exp in T,
// the row sum in f64, p = e * (1 / sum); a row with nothing kept is NaN).
#include "attention.cuh"
#define AR_T 256

template <typename T> __device__ __forceinline__ T ar_exp(T x);
template <> __device__ __forceinline__ float ar_exp<float>(float x)
{
    return expf(x);
}
template <> __device__ __forceinline__ double ar_exp<double>(double x)
{
    return exp(x);
}

// The mask's element offset for batch index b (the mask broadcast over the batch dims).
__device__ __forceinline__ i64 ar_mask_off(const attn_geo &g, i64 b)
{
    i64 mo = 0, rem = b;
    for (int d = g.nb - 1; d >= 0; d--) {
        i64 q = rem / g.bshape[d];
        mo += (rem - q * g.bshape[d]) * g.mb[d];
        rem = q;
    }
    return mo;
}

// Scores j = j0, j0 + stride, ... of row r (query i): scaled, causally cut and masked in place
// (-inf where not kept); returns the largest of them (-inf for none).
template <typename T>
__device__ __forceinline__ T ar_mask_row(T *r, const void *mask, const attn_geo &g, i64 mo, i64 i,
                                         i64 j0, int stride)
{
    const T ninf = (T)-__longlong_as_double(0x7ff0000000000000ll);
    T mx = ninf;
    for (i64 j = j0; j < g.S; j += stride) {
        bool keep = !(g.causal && j > i);
        T x = ninf;
        if (g.mkind == 1)
            keep = keep && ((const unsigned char *)mask)[mo + i * g.ms[0] + j * g.ms[1]];
        if (keep) {
            x = r[j] * (T)g.scale;
            if (g.mkind == 2) x += ((const T *)mask)[mo + i * g.ms[0] + j * g.ms[1]];
        }
        r[j] = x;
        mx = x > mx ? x : mx;
    }
    return mx;
}

template <typename T> __device__ void attn_rows(T *sc, const void *mask, attn_geo g)
{
    __shared__ double red[AR_T / 32];
    const T ninf = (T)-__longlong_as_double(0x7ff0000000000000ll);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    for (i64 row = blockIdx.x; row < g.nbatch * g.L; row += gridDim.x) {
        i64 b = row / g.L, i = row - b * g.L;
        T *r = sc + row * g.S;
        T mx = ar_mask_row<T>(r, mask, g, ar_mask_off(g, b), i, tid, AR_T);
        // the row max: warps, then the block (fixed order)
        for (int o = 16; o > 0; o >>= 1) {
            T y = __shfl_xor_sync(0xffffffffu, mx, o);
            mx = y > mx ? y : mx;
        }
        __syncthreads();
        if (lane == 0) red[warp] = (double)mx;
        __syncthreads();
        T m = (T)red[0];
        for (int w = 1; w < AR_T / 32; w++) m = (T)red[w] > m ? (T)red[w] : m;
        double sum = 0;
        for (i64 j = tid; j < g.S; j += AR_T) {
            T e = m == ninf ? (T)__longlong_as_double(0x7ff8000000000000ll) : ar_exp<T>(r[j] - m);
            r[j] = e;
            sum += (double)e;
        }
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        __syncthreads();
        if (lane == 0) red[warp] = sum;
        __syncthreads();
        double tot = 0;
        for (int w = 0; w < AR_T / 32; w++) tot += red[w];
        T inv = (T)(1.0 / tot);
        for (i64 j = tid; j < g.S; j += AR_T) r[j] *= inv;
    }
}

// The same with one warp per row (AR_T / 32 rows per block) and no block barriers, for rows of
// at most 2048 scores (a block of 256 threads per row of 256 spends most of its time in the
// barriers). The row max is the same; the f64 row sum adds the lanes' partial sums in a fixed
// order.
template <typename T> __device__ void attn_rows_warp(T *sc, const void *mask, attn_geo g)
{
    const T ninf = (T)-__longlong_as_double(0x7ff0000000000000ll);
    const int lane = threadIdx.x & 31;
    const i64 nrows = g.nbatch * g.L, step = (i64)gridDim.x * (AR_T / 32);
    for (i64 row = (i64)blockIdx.x * (AR_T / 32) + (threadIdx.x >> 5); row < nrows; row += step) {
        i64 b = row / g.L, i = row - b * g.L;
        T *r = sc + row * g.S;
        T mx = ar_mask_row<T>(r, mask, g, ar_mask_off(g, b), i, lane, 32);
        for (int o = 16; o > 0; o >>= 1) {
            T y = __shfl_xor_sync(0xffffffffu, mx, o);
            mx = y > mx ? y : mx;
        }
        double sum = 0;
        for (i64 j = lane; j < g.S; j += 32) {
            T e = mx == ninf ? (T)__longlong_as_double(0x7ff8000000000000ll) : ar_exp<T>(r[j] - mx);
            r[j] = e;
            sum += (double)e;
        }
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        T inv = (T)(1.0 / sum);
        for (i64 j = lane; j < g.S; j += 32) r[j] *= inv;
    }
}

extern "C" __global__ void __launch_bounds__(AR_T)
    em_attn_rows_w_f32(float *sc, const void *mask, attn_geo g)
{
    attn_rows_warp<float>(sc, mask, g);
}

extern "C" __global__ void __launch_bounds__(AR_T)
    em_attn_rows_w_f64(double *sc, const void *mask, attn_geo g)
{
    attn_rows_warp<double>(sc, mask, g);
}

extern "C" __global__ void __launch_bounds__(AR_T)
    em_attn_rows_f32(float *sc, const void *mask, attn_geo g)
{
    attn_rows<float>(sc, mask, g);
}

extern "C" __global__ void __launch_bounds__(AR_T)
    em_attn_rows_f64(double *sc, const void *mask, attn_geo g)
{
    attn_rows<double>(sc, mask, g);
}

// flag = 1 when any element of v (a strided view, `struct strided` of prelude.cuh) is
// not finite.
template <typename T> __device__ void attn_nonfinite(const T *v, i64 n, strided s, int *flag)
{
    GRID_LOOP(n)
    {
        i64 r = i, off = 0;
        for (int d = s.rank - 1; d >= 0; d--) {
            i64 q = r / s.shape[d];
            off += (r - q * s.shape[d]) * s.strides[d];
            r = q;
        }
        T x = v[off];
        if (!(x - x == (T)0)) *flag = 1; // inf - inf and NaN - NaN are NaN
    }
}

extern "C" __global__ void em_attn_nonfinite_f32(const float *v, i64 n, strided s, int *flag)
{
    attn_nonfinite<float>(v, n, s, flag);
}

extern "C" __global__ void em_attn_nonfinite_f64(const double *v, i64 n, strided s, int *flag)
{
    attn_nonfinite<double>(v, n, s, flag);
}
