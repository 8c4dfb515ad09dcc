// Max pooling over up to three spatial dims (leading dims of size 1 fill the rest; a plane fits
// 32-bit indices: the host checks), one thread per output element: the window's maximum and its
// index flattened within the sample-channel plane (PyTorch's convention; idx may be NULL for a
// values-only pool). A NaN wins, the last one in scan order, as on the CPU. x and the outputs are
// contiguous. f16/bf16 (H = 1, 2: T is their bits) compare as f32 and copy the winning value's
// bits.
#include "prelude.cuh"
struct poolg {
    i64 in[3], out[3], k[3], s[3], p[3], d[3];
    i64 planes;
};

template <int H, typename T> __device__ __forceinline__ float maxpool_h2f(T v)
{
    if (H == 2) return __uint_as_float((unsigned)v << 16);
    float f;
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"((unsigned short)v));
    return f;
}

template <int H, typename V, typename T> __device__ __forceinline__ V maxpool_val(T v)
{
    if (H == 0) return (V)v;
    return (V)maxpool_h2f<H>(v);
}

// Grid: x over output positions of a plane (32-bit index arithmetic), y over planes.
template <typename T, typename V = T, int H = 0>
__device__ void max_pool(const T *x, T *y, i64 *idx, const poolg &g)
{
    const int i0 = (int)g.in[0], i1 = (int)g.in[1], i2 = (int)g.in[2];
    const int o1 = (int)g.out[1], o2 = (int)g.out[2];
    const int ip = i0 * i1 * i2, op = (int)(g.out[0] * o1 * o2);
    for (i64 pl = blockIdx.y; pl < g.planes; pl += gridDim.y) {
        const T *xp = x + pl * ip;
        for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < op; r += blockDim.x * gridDim.x) {
            int ow = r % o2, t = r / o2, oh = t % o1, od = t / o1;
            int s0 = od * (int)g.s[0] - (int)g.p[0], s1 = oh * (int)g.s[1] - (int)g.p[1];
            int s2 = ow * (int)g.s[2] - (int)g.p[2];
            V best = (V)0;
            T braw = (T)0;
            int bi = -1;
            for (int a = 0; a < (int)g.k[0]; a++) {
                int id = s0 + a * (int)g.d[0];
                if (id < 0 || id >= i0) continue;
                for (int b = 0; b < (int)g.k[1]; b++) {
                    int ih = s1 + b * (int)g.d[1];
                    if (ih < 0 || ih >= i1) continue;
                    for (int e = 0; e < (int)g.k[2]; e++) {
                        int iw = s2 + e * (int)g.d[2];
                        if (iw < 0 || iw >= i2) continue;
                        int li = (id * i1 + ih) * i2 + iw;
                        T raw = xp[li];
                        V v = maxpool_val<H, V>(raw);
                        if (bi < 0 || v > best || v != v) {
                            best = v;
                            braw = raw;
                            bi = li;
                        }
                    }
                }
            }
            T ninf = H == 1   ? (T)0xfc00
                     : H == 2 ? (T)0xff80
                              : (T)-__int_as_float(0x7f800000); // -inf: an empty window
            y[pl * op + r] = bi < 0 ? ninf : braw;
            if (idx) idx[pl * op + r] = bi;
        }
    }
}

extern "C" __global__ void em_max_pool_f32(const float *x, float *y, i64 *idx, poolg g)
{
    max_pool<float>(x, y, idx, g);
}

extern "C" __global__ void em_max_pool_f64(const double *x, double *y, i64 *idx, poolg g)
{
    max_pool<double>(x, y, idx, g);
}

extern "C" __global__ void em_max_pool_f16(const unsigned short *x, unsigned short *y, i64 *idx,
                                           poolg g)
{
    max_pool<unsigned short, float, 1>(x, y, idx, g);
}

extern "C" __global__ void em_max_pool_bf16(const unsigned short *x, unsigned short *y, i64 *idx,
                                            poolg g)
{
    max_pool<unsigned short, float, 2>(x, y, idx, g);
}

// 2-D pooling (in[0] = k[0] = 1) through shared memory: a block covers MPT_W x MPT_H outputs of
// one plane and first loads the input tile they read (iw_t x ih_t elements, coalesced), then
// every output scans its window there in the same order, with the same rule and the same bounds
// checks as max_pool above, so values and indices are identical. Grid: x, y over output tiles,
// z over planes.
#define MPT_W 32
#define MPT_H 16
template <typename T, typename V = T, int H = 0>
__device__ void max_pool_tiled(const T *x, T *y, i64 *idx, const poolg &g, int iw_t, int ih_t)
{
    extern __shared__ __align__(16) unsigned char mpt_smem[];
    T *tile = (T *)mpt_smem;
    const int i1 = (int)g.in[1], i2 = (int)g.in[2], o1 = (int)g.out[1], o2 = (int)g.out[2];
    const int k1 = (int)g.k[1], k2 = (int)g.k[2], s1 = (int)g.s[1], s2 = (int)g.s[2];
    const int d1 = (int)g.d[1], d2 = (int)g.d[2];
    const int ow0 = blockIdx.x * MPT_W, oh0 = blockIdx.y * MPT_H;
    const int bw = ow0 * s2 - (int)g.p[2], bh = oh0 * s1 - (int)g.p[1]; // the tile's origin
    const int ip = i1 * i2, op = o1 * o2, nt = iw_t * ih_t;
    const int tx = threadIdx.x % MPT_W, ty = threadIdx.x / MPT_W, rows = blockDim.x / MPT_W;
    for (i64 pl = blockIdx.z; pl < g.planes; pl += gridDim.z) {
        const T *xp = x + pl * ip;
        __syncthreads(); // the previous plane's tile is no longer read
        for (int t = threadIdx.x; t < nt; t += blockDim.x) {
            int r = t / iw_t, c = t - r * iw_t, ih = bh + r, iw = bw + c;
            tile[t] = ih >= 0 && ih < i1 && iw >= 0 && iw < i2 ? xp[ih * i2 + iw] : (T)0;
        }
        __syncthreads();
        for (int rr = ty; rr < MPT_H; rr += rows) {
            int oh = oh0 + rr, ow = ow0 + tx;
            if (oh >= o1 || ow >= o2) continue;
            int sh = oh * s1 - (int)g.p[1], sw = ow * s2 - (int)g.p[2];
            V best = (V)0;
            T braw = (T)0;
            int bi = -1;
            for (int b = 0; b < k1; b++) {
                int ih = sh + b * d1;
                if (ih < 0 || ih >= i1) continue;
                for (int e = 0; e < k2; e++) {
                    int iw = sw + e * d2;
                    if (iw < 0 || iw >= i2) continue;
                    T raw = tile[(ih - bh) * iw_t + (iw - bw)];
                    V v = maxpool_val<H, V>(raw);
                    if (bi < 0 || v > best || v != v) {
                        best = v;
                        braw = raw;
                        bi = ih * i2 + iw;
                    }
                }
            }
            T ninf = H == 1   ? (T)0xfc00
                     : H == 2 ? (T)0xff80
                              : (T)-__int_as_float(0x7f800000);
            i64 o = pl * op + (i64)oh * o2 + ow;
            y[o] = bi < 0 ? ninf : braw;
            if (idx) idx[o] = bi;
        }
    }
}

extern "C" __global__ void __launch_bounds__(256)
    em_max_pool_tiled_f32(const float *x, float *y, i64 *idx, poolg g, int iw_t, int ih_t)
{
    max_pool_tiled<float>(x, y, idx, g, iw_t, ih_t);
}

extern "C" __global__ void __launch_bounds__(256)
    em_max_pool_tiled_f64(const double *x, double *y, i64 *idx, poolg g, int iw_t, int ih_t)
{
    max_pool_tiled<double>(x, y, idx, g, iw_t, ih_t);
}

extern "C" __global__ void __launch_bounds__(256)
    em_max_pool_tiled_f16(const unsigned short *x, unsigned short *y, i64 *idx, poolg g, int iw_t,
                          int ih_t)
{
    max_pool_tiled<unsigned short, float, 1>(x, y, idx, g, iw_t, ih_t);
}

extern "C" __global__ void __launch_bounds__(256)
    em_max_pool_tiled_bf16(const unsigned short *x, unsigned short *y, i64 *idx, poolg g,
                           int iw_t, int ih_t)
{
    max_pool_tiled<unsigned short, float, 2>(x, y, idx, g, iw_t, ih_t);
}

// Values only, 3 x 3 windows, stride 1, dilation 1 (2-D): a block covers 128 output columns x 16
// rows of one plane. The input tile (130 x 18) goes to shared memory with -inf where the window
// leaves the input; for values this is exact: a -inf pad only ever stands in for a maximum of
// -inf, and an empty window gives -inf as the general kernel does. Each thread walks one column
// down the tile: the max of 3 along the row (kept for the last three rows), then of those 3
// rows, with max_pool's rule (the later value wins when greater or NaN) applied rows outer,
// columns inner, so the result is the general scan's.
#define MP3_W 128
#define MP3_H 16
template <typename T> __device__ __forceinline__ T mp3_comb(T best, T v)
{
    return (v > best || v != v) ? v : best;
}

template <typename T> __device__ void max_pool_3x3s1(const T *x, T *y, const poolg &g)
{
    __shared__ T tile[MP3_H + 2][MP3_W + 2];
    const int i1 = (int)g.in[1], i2 = (int)g.in[2], o1 = (int)g.out[1], o2 = (int)g.out[2];
    const int ow0 = blockIdx.x * MP3_W, oh0 = blockIdx.y * MP3_H;
    const int bw = ow0 - (int)g.p[2], bh = oh0 - (int)g.p[1];
    const T ninf = (T)-__int_as_float(0x7f800000);
    const int c = threadIdx.x;
    for (i64 pl = blockIdx.z; pl < g.planes; pl += gridDim.z) {
        const T *xp = x + pl * (i64)i1 * i2;
        __syncthreads();
        for (int t = threadIdx.x; t < (MP3_H + 2) * (MP3_W + 2); t += blockDim.x) {
            int r = t / (MP3_W + 2), cc = t - r * (MP3_W + 2), ih = bh + r, iw = bw + cc;
            tile[r][cc] = ih >= 0 && ih < i1 && iw >= 0 && iw < i2 ? xp[(i64)ih * i2 + iw] : ninf;
        }
        __syncthreads();
        const int ow = ow0 + c;
        if (ow < o2) {
            T *yp = y + pl * (i64)o1 * o2 + ow;
            T h0 = ninf, h1 = ninf;
#pragma unroll
            for (int r = 0; r < MP3_H + 2; r++) {
                T h = mp3_comb(mp3_comb(tile[r][c], tile[r][c + 1]), tile[r][c + 2]);
                int oh = oh0 + r - 2;
                if (r >= 2 && oh < o1) yp[(i64)oh * o2] = mp3_comb(mp3_comb(h0, h1), h);
                h0 = h1;
                h1 = h;
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(MP3_W) em_max_pool3s1_f32(const float *x, float *y,
                                                                       poolg g)
{
    max_pool_3x3s1<float>(x, y, g);
}

extern "C" __global__ void __launch_bounds__(MP3_W) em_max_pool3s1_f64(const double *x, double *y,
                                                                       poolg g)
{
    max_pool_3x3s1<double>(x, y, g);
}
