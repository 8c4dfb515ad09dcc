// Bandwidth kernels: 16-byte vectorised f32 elementwise ops on contiguous tensors and row
// kernels (softmax, log-softmax, layer_norm) that read a row once into registers and write it once.
// Appended to the module source by cuda_kernels.c (unary_f, binary_d, OP_* come from there).
#include "ew_scalar.cuh"

// y = f(x) over n contiguous floats; the vector part covers n / 4 float4s when x and y are
// 16-byte aligned (the host checks), the rest is done element by element.
extern "C" __global__ void em_unary_v4_f32(int op, const float *x, float *y, i64 n, double a,
                                           double b)
{
    float af = (float)a, bf = (float)b;
    i64 n4 = n >> 2;
    const float4 *x4 = (const float4 *)x;
    float4 *y4 = (float4 *)y;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n4;
         i += (i64)blockDim.x * gridDim.x) {
        float4 v = x4[i];
        v.x = unary_f(op, v.x, af, bf);
        v.y = unary_f(op, v.y, af, bf);
        v.z = unary_f(op, v.z, af, bf);
        v.w = unary_f(op, v.w, af, bf);
        y4[i] = v;
    }
    i64 t = n4 * 4 + (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) y[t] = unary_f(op, x[t], af, bf);
}

extern "C" __global__ void em_binary_v4_f32(int op, const float *x, const float *y, float *o, i64 n)
{
    i64 n4 = n >> 2;
    const float4 *x4 = (const float4 *)x, *y4 = (const float4 *)y;
    float4 *o4 = (float4 *)o;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n4;
         i += (i64)blockDim.x * gridDim.x) {
        float4 a = x4[i], b = y4[i], r;
        r.x = (float)binary_d(op, (double)a.x, (double)b.x);
        r.y = (float)binary_d(op, (double)a.y, (double)b.y);
        r.z = (float)binary_d(op, (double)a.z, (double)b.z);
        r.w = (float)binary_d(op, (double)a.w, (double)b.w);
        o4[i] = r;
    }
    i64 t = n4 * 4 + (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) o[t] = (float)binary_d(op, (double)x[t], (double)y[t]);
}

// relu's backward on contiguous f32 (THRESHOLD_BACKWARD): y <= t ? +0 : g, compared in f32 as
// the CPU's vector row; n / 4 float4s when all three are 16-byte aligned (v4), else one by one
extern "C" __global__ void em_threshold_bwd_f32(const float *g, const float *y, float *o, float t,
                                                i64 n, int v4)
{
    i64 n4 = v4 ? n >> 2 : 0;
    const float4 *g4 = (const float4 *)g, *y4 = (const float4 *)y;
    float4 *o4 = (float4 *)o;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n4;
         i += (i64)blockDim.x * gridDim.x) {
        float4 a = g4[i], b = y4[i];
        a.x = b.x <= t ? 0.f : a.x;
        a.y = b.y <= t ? 0.f : a.y;
        a.z = b.z <= t ? 0.f : a.z;
        a.w = b.w <= t ? 0.f : a.w;
        o4[i] = a;
    }
    for (i64 i = n4 * 4 + (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (i64)blockDim.x * gridDim.x)
        o[i] = y[i] <= t ? 0.f : g[i];
}

// add, sub, mul and div of contiguous f32 in f32 arithmetic: one IEEE f32 operation rounds as
// the f64 operation rounded to f32 does (f64 carries more than 2 x 24 + 2 bits), so these give
// the general kernel's results without its per-element op switch and conversions.
template <int K> __device__ __forceinline__ float arith_f(float a, float b)
{
    return K == 0 ? a + b : K == 1 ? a - b : K == 2 ? a * b : a / b;
}

template <int K> __device__ void arith_v4(const float *x, const float *y, float *o, i64 n)
{
    i64 n4 = n >> 2;
    const float4 *x4 = (const float4 *)x, *y4 = (const float4 *)y;
    float4 *o4 = (float4 *)o;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n4;
         i += (i64)blockDim.x * gridDim.x) {
        float4 a = x4[i], b = y4[i], r;
        r.x = arith_f<K>(a.x, b.x);
        r.y = arith_f<K>(a.y, b.y);
        r.z = arith_f<K>(a.z, b.z);
        r.w = arith_f<K>(a.w, b.w);
        o4[i] = r;
    }
    i64 t = n4 * 4 + (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) o[t] = arith_f<K>(x[t], y[t]);
}

extern "C" __global__ void em_add_v4_f32(const float *x, const float *y, float *o, i64 n)
{
    arith_v4<0>(x, y, o, n);
}
extern "C" __global__ void em_sub_v4_f32(const float *x, const float *y, float *o, i64 n)
{
    arith_v4<1>(x, y, o, n);
}
extern "C" __global__ void em_mul_v4_f32(const float *x, const float *y, float *o, i64 n)
{
    arith_v4<2>(x, y, o, n);
}
extern "C" __global__ void em_div_v4_f32(const float *x, const float *y, float *o, i64 n)
{
    arith_v4<3>(x, y, o, n);
}

// o [R, C] contiguous = x (op) y for f32 operands of row and column strides (xr, xc), (yr, yc),
// the column strides 0 or 1: a row broadcast ([R, 1] or [C] against [R, C]) without the general
// kernel's index walk and f64 switch. n elements (vec: n float4s, W = C / 4 of them a row; every
// operand read along its row is then 16-byte aligned), all below 2^31, so the row of index i is
// (umulhi(i, mul) + i) >> shr (division by W).
template <int K>
__device__ void arith_bc(const float *x, const float *y, float *o, unsigned n, unsigned W,
                         unsigned mul, int shr, i64 xr, int xc, i64 yr, int yc, int vec)
{
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        const unsigned r = (__umulhi(i, mul) + i) >> shr, c = i - r * W;
        if (vec) {
            const float *xp = x + r * xr, *yp = y + r * yr;
            float4 a = xc ? ((const float4 *)xp)[c] : make_float4(*xp, *xp, *xp, *xp);
            float4 b = yc ? ((const float4 *)yp)[c] : make_float4(*yp, *yp, *yp, *yp);
            ((float4 *)o)[i] = make_float4(arith_f<K>(a.x, b.x), arith_f<K>(a.y, b.y),
                                           arith_f<K>(a.z, b.z), arith_f<K>(a.w, b.w));
        } else {
            o[i] = arith_f<K>(x[r * xr + c * xc], y[r * yr + c * yc]);
        }
    }
}

#define ARITH_BC(NAME, K)                                                                          \
    extern "C" __global__ void NAME(const float *x, const float *y, float *o, unsigned n,          \
                                    unsigned W, unsigned mul, int shr, i64 xr, int xc, i64 yr,     \
                                    int yc, int vec)                                               \
    {                                                                                              \
        arith_bc<K>(x, y, o, n, W, mul, shr, xr, xc, yr, yc, vec);                                 \
    }
ARITH_BC(em_add_bc_f32, 0)
ARITH_BC(em_sub_bc_f32, 1)
ARITH_BC(em_mul_bc_f32, 2)
ARITH_BC(em_div_bc_f32, 3)

// ---- row kernels: one block of 256 threads per row of `len` contiguous elements (len <= 256 *
// VPT); each thread keeps its elements (tid, tid + 256, ...) in VPT registers.

__device__ __forceinline__ double row_sum(double v, double *sh)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    __syncthreads();
    if (l == 0) sh[w] = v;
    __syncthreads();
    double r = 0;
    for (int k = 0; k < 8; k++) r += sh[k]; // fixed order: reproducible
    return r;
}

__device__ __forceinline__ float row_max(float v, float *sh)
{
    for (int o = 16; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = (v != v || u > v) ? (v != v ? v : u) : v;
    }
    int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    __syncthreads();
    if (l == 0) sh[w] = v;
    __syncthreads();
    float r = sh[0];
    for (int k = 1; k < 8; k++) r = (r != r || sh[k] > r) ? (r != r ? r : sh[k]) : r;
    return r;
}

// softmax (logsm 0) or log-softmax (1) of f32 rows: max, then sum of exp(x - max) accumulated
// in double, then one write.
template <int VPT>
__device__ void softmax_rows(int logsm, const float *x, float *y, i64 rows, i64 len)
{
    __shared__ double shd[8];
    __shared__ float shf[8];
    const int tid = threadIdx.x;
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * len;
        float v[VPT];
        float m = -__int_as_float(0x7f800000);
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            i64 j = tid + k * 256;
            v[k] = j < len ? xr[j] : -__int_as_float(0x7f800000);
            if (j < len) m = (m != m || v[k] > m) ? (m != m ? m : v[k]) : m;
        }
        m = row_max(m, shf);
        double acc = 0;
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            i64 j = tid + k * 256;
            if (j < len) {
                v[k] = v[k] - m;
                acc += (double)expf(v[k]);
            }
        }
        double sum = row_sum(acc, shd);
        float inv = (float)(1.0 / sum), ls = (float)log(sum);
        float *yr = y + r * len;
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            i64 j = tid + k * 256;
            if (j < len) yr[j] = logsm ? v[k] - ls : expf(v[k]) * inv;
        }
    }
}

// layer_norm over rows of len contiguous elements: mean and (biased) variance in double from the
// registers, then y = (x - mean) * rstd * w + b (w, b optional, contiguous [len]).
// f32 rows whose length is a multiple of 4, 16-byte aligned (VPT >= 4): float4 loads and stores,
// per-thread partial sums in f32 (at most VPT terms) added across the block in double, and the
// output computed in f32 from the double mean and rstd rounded to f32.
template <int VPT>
__device__ void layer_norm_rows_f32x4(const float *x, const float *w, const float *bias, float *y,
                                      i64 rows, i64 len, double eps)
{
    __shared__ double shd[8];
    const int tid = threadIdx.x;
    constexpr int NV = VPT / 4;
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const float4 *xr = (const float4 *)(x + r * len);
        const i64 n4 = len / 4;
        float4 v[NV];
        float s = 0.f;
#pragma unroll
        for (int k = 0; k < NV; k++) {
            const i64 j = tid + k * 256;
            v[k] = j < n4 ? xr[j] : make_float4(0.f, 0.f, 0.f, 0.f);
            s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
        }
        const double mean = row_sum((double)s, shd) / (double)len;
        const float mf = (float)mean;
        float q = 0.f;
#pragma unroll
        for (int k = 0; k < NV; k++)
            if (tid + k * 256 < n4) {
                const float a = v[k].x - mf, b = v[k].y - mf, c = v[k].z - mf, d = v[k].w - mf;
                q += (a * a + b * b) + (c * c + d * d);
            }
        const float rs = (float)(1.0 / sqrt(row_sum((double)q, shd) / (double)len + eps));
        float4 *yr = (float4 *)(y + r * len);
#pragma unroll
        for (int k = 0; k < NV; k++) {
            const i64 j = tid + k * 256;
            if (j >= n4) continue;
            float4 o = make_float4((v[k].x - mf) * rs, (v[k].y - mf) * rs, (v[k].z - mf) * rs,
                                   (v[k].w - mf) * rs);
            if (w) {
                const float4 g = ((const float4 *)w)[j];
                o.x *= g.x, o.y *= g.y, o.z *= g.z, o.w *= g.w;
            }
            if (bias) {
                const float4 b = ((const float4 *)bias)[j];
                o.x += b.x, o.y += b.y, o.z += b.z, o.w += b.w;
            }
            yr[j] = o;
        }
    }
}

template <typename T, int VPT>
__device__ void layer_norm_rows(const T *x, const T *w, const T *bias, T *y, i64 rows, i64 len,
                                double eps)
{
    __shared__ double shd[8];
    const int tid = threadIdx.x;
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * len;
        T v[VPT];
        double s = 0;
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            i64 j = tid + k * 256;
            v[k] = j < len ? xr[j] : (T)0;
            s += (double)v[k];
        }
        double mean = row_sum(s, shd) / (double)len;
        double q = 0;
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            i64 j = tid + k * 256;
            if (j < len) {
                double d = (double)v[k] - mean;
                q += d * d;
            }
        }
        double rstd = 1.0 / sqrt(row_sum(q, shd) / (double)len + eps);
        T *yr = y + r * len;
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            i64 j = tid + k * 256;
            if (j < len) {
                double o = ((double)v[k] - mean) * rstd;
                if (w) o *= (double)w[j];
                if (bias) o += (double)bias[j];
                yr[j] = (T)o;
            }
        }
    }
}

// One kernel per registers-per-thread count: the host picks the smallest VPT with 256 * VPT >= len.
#define ROW_KERNELS(V)                                                                             \
    extern "C" __global__ void __launch_bounds__(256)                                              \
        em_softmax_rows_f32_v##V(int logsm, const float *x, float *y, i64 rows, i64 len)           \
    {                                                                                              \
        softmax_rows<V>(logsm, x, y, rows, len);                                                   \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(256) em_layer_norm_rows_f32_v##V(                 \
        const float *x, const float *w, const float *b, float *y, i64 rows, i64 len, double eps)   \
    {                                                                                              \
        layer_norm_rows<float, V>(x, w, b, y, rows, len, eps);                                     \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(256)                                              \
        em_layer_norm_rows_f64_v##V(const double *x, const double *w, const double *b, double *y,  \
                                    i64 rows, i64 len, double eps)                                 \
    {                                                                                              \
        layer_norm_rows<double, V>(x, w, b, y, rows, len, eps);                                    \
    }
// Four blocks per multiprocessor (64 registers) keep 64 KiB of rows in flight on each.
#define LN_X4(V)                                                                                   \
    extern "C" __global__ void __launch_bounds__(256, 4) em_layer_norm_rows_f32x4_v##V(            \
        const float *x, const float *w, const float *b, float *y, i64 rows, i64 len, double eps)   \
    {                                                                                              \
        layer_norm_rows_f32x4<V>(x, w, b, y, rows, len, eps);                                      \
    }
LN_X4(4)
LN_X4(8)
LN_X4(16)
ROW_KERNELS(1)
ROW_KERNELS(2)
ROW_KERNELS(4)
ROW_KERNELS(8)
ROW_KERNELS(16)
ROW_KERNELS(32)
