// Cross entropy's kernels and the long-row softmax: part of the reduce unit, in a file of its own
// so that scripts/cuda_emu/lsg_emu.cpp runs it on the CPU as NVRTC compiles it.
#include "reduce.cuh"

// ---- log_softmax gathered at an index (cross entropy) and its gradient ----------------------
// LOG_SOFTMAX_GATHER: out[r] = x[t[r]] - logsumexp(x) on line r (NaN for t out of range);
// LOG_SOFTMAX_GATHER_BACKWARD (bw): o = g[r] (onehot(t[r]) - softmax(x)) along the line (zeros for
// t out of range). t, g and the forward's output are contiguous, indexed by line.

// Any dtype and strides, one block of 256 threads per line (rdline: xs / sx walk x, os0 / s0 the
// backward's output): max and sum of exp(x - max) as em_rd_softmax, in double, as cpu_reduce.c's
// lsg_line.
extern "C" __global__ void __launch_bounds__(256)
    em_rd_lsg(int bw, int dt, const void *x, const i64 *t, const void *g, void *o, rdline s)
{
    __shared__ double sh[8];
    const bool single = dt != RD_F64;
    for (i64 r = blockIdx.x; r < s.lines; r += gridDim.x) {
        i64 xo, oo, unused;
        rd_line(s, r, &xo, &oo, &unused);
        double m = -RD_INF;
        for (i64 k = threadIdx.x; k < s.len; k += 256) {
            double v = rd_ldf(x, dt, xo + k * s.sx);
            if (m == m && (v > m || v != v)) m = v;
        }
        m = rd_bmax(m, sh);
        double acc = 0;
        for (i64 k = threadIdx.x; k < s.len; k += 256) {
            double v = rd_ldf(x, dt, xo + k * s.sx);
            acc += single ? (double)expf((float)(v - m)) : exp(v - m);
        }
        const double sum = rd_bsum(acc, sh);
        const i64 ti = t[r];
        const bool in = ti >= 0 && ti < s.len;
        if (!bw) {
            if (threadIdx.x == 0)
                rd_stf(o, dt, r,
                       in ? (rd_ldf(x, dt, xo + ti * s.sx) - m) - log(sum)
                          : __longlong_as_double(0x7ff8000000000000ll));
            continue;
        }
        const double gv = in ? rd_ldf(g, dt, r) : 0.0, inv = 1.0 / sum;
        for (i64 k = threadIdx.x; k < s.len; k += 256) {
            double v = rd_ldf(x, dt, xo + k * s.sx);
            double e = single ? (double)expf((float)(v - m)) : exp(v - m);
            rd_stf(o, dt, oo + k * s.s0, gv * ((k == ti ? 1.0 : 0.0) - e * inv));
        }
    }
}

// Online max / sum of exp(v - max) in f32: a NaN poisons the line; -inf adds nothing (a line of
// -inf alone keeps a zero sum: its log-softmax is NaN, as the CPU's).
__device__ __forceinline__ void lsg_add(float &m, float &s, float v)
{
    if (v != v)
        m = v, s = v;
    else if (v > m)
        s = s * expf(m - v) + 1.f, m = v;
    else if (v > -__int_as_float(0x7f800000))
        s += expf(v - m);
}

__device__ __forceinline__ void lsg_comb(float &m, float &s, float m2, float s2)
{
    float M = (m != m || m2 != m2) ? __int_as_float(0x7fc00000) : fmaxf(m, m2);
    float a = s == 0.f ? 0.f : s * expf(m - M), b = s2 == 0.f ? 0.f : s2 * expf(m2 - M);
    m = M, s = a + b; // symmetric: every lane of a butterfly gets the same pair
}

// Max m and sum s of exp(x - m) over a contiguous f32 row of len for thread tid of T per row (T =
// 32, a warp; T = 256, a block of 256, whose shared pair shm / shs it uses): one read, online,
// float4 when vec (len % 4 == 0 and aligned); every thread of the row gets the same pair.
template <int T>
__device__ __forceinline__ void row_max_sum(const float *xr, i64 len, int tid, bool vec, float &m,
                                            float &s, float *shm, float *shs)
{
    m = -__int_as_float(0x7f800000), s = 0.f;
    if (vec) {
        for (i64 j = (i64)tid * 4; j < len; j += T * 4) {
            float4 q = *(const float4 *)(xr + j);
            lsg_add(m, s, q.x), lsg_add(m, s, q.y), lsg_add(m, s, q.z), lsg_add(m, s, q.w);
        }
    } else {
        for (i64 j = tid; j < len; j += T) lsg_add(m, s, xr[j]);
    }
    for (int k = 16; k > 0; k >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, k), s2 = __shfl_xor_sync(0xffffffffu, s, k);
        lsg_comb(m, s, m2, s2);
    }
    if (T != 32) {
        __syncthreads();
        if ((threadIdx.x & 31) == 0) shm[threadIdx.x >> 5] = m, shs[threadIdx.x >> 5] = s;
        __syncthreads();
        m = shm[0], s = shs[0];
        for (int k = 1; k < 8; k++) lsg_comb(m, s, shm[k], shs[k]); // fixed order
    }
}

// Contiguous f32 rows along the last dim: T = 32, a warp per row (8 rows per block of 256); T =
// 256, a block per row. One read of the row for max and sum; the backward reads it again (mostly
// from L2) and streams the gradient out.
template <int T>
__device__ __forceinline__ void lsg_rows(int bw, const float *x, const i64 *t, const float *g,
                                         float *o, i64 rows, int len)
{
    __shared__ float shm[8], shs[8];
    const int tid = T == 32 ? (threadIdx.x & 31) : threadIdx.x;
    const i64 per = T == 32 ? (blockDim.x >> 5) : 1;
    const bool vec =
        (len & 3) == 0 && (((unsigned long long)x | (unsigned long long)(bw ? o : x)) & 15) == 0;
    for (i64 r = (i64)blockIdx.x * per + (T == 32 ? (threadIdx.x >> 5) : 0); r < rows;
         r += (i64)gridDim.x * per) {
        const float *xr = x + r * len;
        float m, s;
        row_max_sum<T>(xr, len, tid, vec, m, s, shm, shs);
        const i64 ti = t[r];
        const bool in = ti >= 0 && ti < len;
        if (!bw) {
            if (tid == 0) o[r] = in ? (xr[ti] - m) - logf(s) : __int_as_float(0x7fc00000);
            continue;
        }
        const float gv = in ? g[r] : 0.f, inv = 1.f / s;
        float *orow = o + r * len;
        if (vec) {
            for (int j = tid * 4; j < len; j += T * 4) {
                float4 q = *(const float4 *)(xr + j), w;
                w.x = gv * ((j == ti ? 1.f : 0.f) - expf(q.x - m) * inv);
                w.y = gv * ((j + 1 == ti ? 1.f : 0.f) - expf(q.y - m) * inv);
                w.z = gv * ((j + 2 == ti ? 1.f : 0.f) - expf(q.z - m) * inv);
                w.w = gv * ((j + 3 == ti ? 1.f : 0.f) - expf(q.w - m) * inv);
                __stcs((float4 *)(orow + j), w);
            }
        } else {
            for (int j = tid; j < len; j += T)
                __stcs(orow + j, gv * ((j == ti ? 1.f : 0.f) - expf(xr[j] - m) * inv));
        }
    }
}

extern "C" __global__ void __launch_bounds__(256)
    em_lsg_warp_f32(int bw, const float *x, const i64 *t, const float *g, float *o, i64 rows, int len)
{
    lsg_rows<32>(bw, x, t, g, o, rows, len);
}

extern "C" __global__ void __launch_bounds__(256)
    em_lsg_rows_f32(int bw, const float *x, const i64 *t, const float *g, float *o, i64 rows, int len)
{
    lsg_rows<256>(bw, x, t, g, o, rows, len);
}

// Softmax / log-softmax of contiguous f32 rows longer than the register kernels take (len >
// 8192): a block of 256 per row, max and sum in one read (row_max_sum), then a second read
// (mostly from L2) writing y = exp(x - m) / s or (x - m) - log(s), streamed.
extern "C" __global__ void __launch_bounds__(256)
    em_softmax_long_f32(int logsm, const float *x, float *y, i64 rows, i64 len)
{
    __shared__ float shm[8], shs[8];
    const bool vec = (len & 3) == 0 && ((((unsigned long long)x) | ((unsigned long long)y)) & 15) == 0;
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * len;
        float *yr = y + r * len;
        float m, s;
        row_max_sum<256>(xr, len, threadIdx.x, vec, m, s, shm, shs);
        const float inv = 1.f / s, ls = logf(s);
        if (vec) {
            for (i64 j = (i64)threadIdx.x * 4; j < len; j += 1024) {
                float4 q = *(const float4 *)(xr + j), w;
                if (logsm)
                    w.x = (q.x - m) - ls, w.y = (q.y - m) - ls, w.z = (q.z - m) - ls,
                    w.w = (q.w - m) - ls;
                else
                    w.x = expf(q.x - m) * inv, w.y = expf(q.y - m) * inv,
                    w.z = expf(q.z - m) * inv, w.w = expf(q.w - m) * inv;
                __stcs((float4 *)(yr + j), w);
            }
        } else {
            for (i64 j = threadIdx.x; j < len; j += 256)
                __stcs(yr + j, logsm ? (xr[j] - m) - ls : expf(xr[j] - m) * inv);
        }
    }
}
