// Layer and RMS norm gradients of f32 rows (NORM_BACKWARD): part of the rows unit, in a file of
// its own so that scripts/cuda_emu/norm_emu.cpp runs it on the CPU as NVRTC compiles it.
#include "prelude.cuh"
#include "smem.cuh"

// ---- NORM_BACKWARD: layer / RMS norm gradients of f32 rows (a block of 256 per row, VPT
// elements of x and g per thread in registers; V4: float4 loads and stores, the thread's elements
// 4 (tid + 256 i) + c, for rows whose length is a multiple of 4 and 16-byte aligned pointers).
// Per row: the sums of x and x^2 in one double block reduction (mean, rstd), then the sums of
// gx = g w and gx xhat in another, dx = rstd (gx - mean(gx) - xhat mean(gx xhat)) (rms: without
// mean(gx)). A block walks rows blockIdx.x, + gridDim.x, ...; where pw / pb are not NULL each
// thread adds g xhat and g of its columns into dynamic shared memory ([2][len] floats: no other
// thread touches them) and the block writes them at the end as its partial row of
// [gridDim.x, len] (em_norm_bw_cols_f32 adds the partials in block order).
__device__ __forceinline__ void row_sum2(double &a, double &b, double2 *sh)
{
    for (int o = 16; o > 0; o >>= 1) {
        a += __shfl_xor_sync(0xffffffffu, a, o);
        b += __shfl_xor_sync(0xffffffffu, b, o);
    }
    int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    __syncthreads();
    if (l == 0) sh[w] = make_double2(a, b);
    __syncthreads();
    a = 0, b = 0;
    for (int k = 0; k < 8; k++) a += sh[k].x, b += sh[k].y; // fixed order: reproducible
}

// the column of a thread's k-th element
template <bool V4> __device__ __forceinline__ i64 nbw_col(int k)
{
    return V4 ? 4 * ((i64)threadIdx.x + (k >> 2) * 256) + (k & 3) : (i64)threadIdx.x + k * 256;
}

template <int VPT, bool V4>
__device__ void norm_bw_rows(const float *x, const float *w, const float *g, float *dx, float *pw,
                             float *pb, i64 rows, i64 len, double eps, int rms)
{
    float *norm_bw_acc = dyn_smem<float>();
    __shared__ double2 sh2[8];
    float *aw = norm_bw_acc, *ab = norm_bw_acc + (pw ? len : 0);
#pragma unroll
    for (int k = 0; k < VPT; k++) {
        const i64 j = nbw_col<V4>(k);
        if (j < len && pw) aw[j] = 0.f;
        if (j < len && pb) ab[j] = 0.f;
    }
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * len, *gr = g + r * len;
        float xv[VPT], gv[VPT], wv[VPT];
        if (V4) {
#pragma unroll
            for (int k = 0; k < VPT; k += 4) {
                const i64 j = nbw_col<V4>(k);
                const float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
                const float4 a = j < len ? *(const float4 *)(xr + j) : z;
                const float4 b = j < len ? *(const float4 *)(gr + j) : z;
                const float4 c = j < len && w ? *(const float4 *)(w + j) : make_float4(1.f, 1.f, 1.f, 1.f);
                xv[k] = a.x, xv[k + 1] = a.y, xv[k + 2] = a.z, xv[k + 3] = a.w;
                gv[k] = b.x, gv[k + 1] = b.y, gv[k + 2] = b.z, gv[k + 3] = b.w;
                wv[k] = c.x, wv[k + 1] = c.y, wv[k + 2] = c.z, wv[k + 3] = c.w;
            }
        } else {
#pragma unroll
            for (int k = 0; k < VPT; k++) {
                const i64 j = nbw_col<V4>(k);
                xv[k] = j < len ? xr[j] : 0.f;
                gv[k] = j < len ? gr[j] : 0.f;
                wv[k] = j < len && w ? w[j] : 1.f;
            }
        }
        double s = 0, q = 0;
#pragma unroll
        for (int k = 0; k < VPT; k++) { // elements past len hold 0
            s += (double)xv[k];
            q += (double)xv[k] * (double)xv[k];
        }
        row_sum2(s, q, sh2);
        const double mean = rms ? 0.0 : s / (double)len;
        const double var = q / (double)len - mean * mean;
        const float mf = (float)mean, rs = (float)(1.0 / sqrt((var > 0 ? var : 0.0) + eps));
        double s1 = 0, s2 = 0;
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            const i64 j = nbw_col<V4>(k);
            const float xh = (xv[k] - mf) * rs, gx = gv[k] * wv[k];
            if (j < len) {
                s1 += (double)gx;
                s2 += (double)(gx * xh);
                if (pw) aw[j] += gv[k] * xh;
                if (pb) ab[j] += gv[k];
            }
            xv[k] = xh;
            gv[k] = gx;
        }
        row_sum2(s1, s2, sh2);
        const float m1 = rms ? 0.f : (float)(s1 / (double)len), m2 = (float)(s2 / (double)len);
        float *dr = dx + r * len;
        if (V4) {
#pragma unroll
            for (int k = 0; k < VPT; k += 4) {
                const i64 j = nbw_col<V4>(k);
                if (j < len)
                    *(float4 *)(dr + j) = make_float4(
                        rs * (gv[k] - m1 - xv[k] * m2), rs * (gv[k + 1] - m1 - xv[k + 1] * m2),
                        rs * (gv[k + 2] - m1 - xv[k + 2] * m2), rs * (gv[k + 3] - m1 - xv[k + 3] * m2));
            }
        } else {
#pragma unroll
            for (int k = 0; k < VPT; k++) {
                const i64 j = nbw_col<V4>(k);
                if (j < len) dr[j] = rs * (gv[k] - m1 - xv[k] * m2);
            }
        }
    }
#pragma unroll
    for (int k = 0; k < VPT; k++) {
        const i64 j = nbw_col<V4>(k);
        if (j >= len) continue;
        if (pw) pw[blockIdx.x * len + j] = aw[j];
        if (pb) pb[blockIdx.x * len + j] = ab[j];
    }
}

// SFX: empty for the scalar kernel, x4 for the float4 one; MINB: the resident blocks per
// multiprocessor the host's grid counts on
#define NORM_BW(SFX, V, X4, MINB)                                                                  \
    extern "C" __global__ void __launch_bounds__(256, MINB) em_norm_bw_f32##SFX##_v##V(            \
        const float *x, const float *w, const float *g, float *dx, float *pw, float *pb, i64 rows, \
        i64 len, double eps, int rms)                                                              \
    {                                                                                              \
        norm_bw_rows<V, X4>(x, w, g, dx, pw, pb, rows, len, eps, rms);                             \
    }
NORM_BW(, 1, false, 4)
NORM_BW(, 2, false, 4)
NORM_BW(, 4, false, 4)
NORM_BW(, 8, false, 4)
NORM_BW(, 16, false, 3)
NORM_BW(, 32, false, 2)
NORM_BW(x4, 4, true, 4)
NORM_BW(x4, 8, true, 4)
NORM_BW(x4, 16, true, 3)
NORM_BW(x4, 32, true, 2)

// Column sums of the partial rows: dw[j] = sum over the nparts rows of pw[., j] (db from pb
// likewise; either may be NULL), added in row order in double. Blocks of 32 x 8 threads: 32
// columns, the partial rows split 8 ways and the 8 sums added in order. nparts 0 writes zeros.
extern "C" __global__ void __launch_bounds__(256)
    em_norm_bw_cols_f32(const float *pw, const float *pb, i64 nparts, i64 len, float *dw, float *db)
{
    __shared__ double sh[2][8][33];
    const i64 j = (i64)blockIdx.x * 32 + threadIdx.x;
    const i64 per = (nparts + 7) / 8, p0 = threadIdx.y * per;
    const i64 p1 = p0 + per < nparts ? p0 + per : nparts;
    double a = 0, b = 0;
    if (j < len)
        for (i64 p = p0; p < p1; p++) {
            if (pw) a += (double)pw[p * len + j];
            if (pb) b += (double)pb[p * len + j];
        }
    sh[0][threadIdx.y][threadIdx.x] = a;
    sh[1][threadIdx.y][threadIdx.x] = b;
    __syncthreads();
    if (threadIdx.y == 0 && j < len) {
        for (int k = 1; k < 8; k++) a += sh[0][k][threadIdx.x], b += sh[1][k][threadIdx.x];
        if (dw) dw[j] = (float)a;
        if (db) db[j] = (float)b;
    }
}
