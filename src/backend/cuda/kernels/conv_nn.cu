// Normalisation (layer, RMS, group, batch), integer matmul and the real FFT pair. Inputs are read
// through their element strides (struct nnv, up to 8 dims), outputs are contiguous. Floating
// dtypes are a template code DT: 0 f32, 1 f64, 2 f16, 3 bf16; values are computed in double and
// stored through f32 (as the CPU's ir_set_f64 does).
#include "conv.cuh"
#include "matmul.cuh"
struct nnv {
    i64 shape[8], st[8];
    int rank;
};

// Offset in elements of row-major linear index lin of view v.
__device__ __forceinline__ i64 nnv_off(const nnv &v, i64 lin)
{
    i64 o = 0;
    for (int d = v.rank - 1; d > 0; d--) {
        i64 q = lin / v.shape[d];
        o += (lin - q * v.shape[d]) * v.st[d];
        lin = q;
    }
    return o + lin * v.st[0];
}

template <int DT> __device__ __forceinline__ double nn_ld(const void *p, i64 i)
{
    if (DT == 0) return (double)((const float *)p)[i];
    if (DT == 1) return ((const double *)p)[i];
    unsigned short h = ((const unsigned short *)p)[i];
    if (DT == 3) return (double)__uint_as_float((unsigned)h << 16);
    float f;
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(h));
    return (double)f;
}

template <int DT> __device__ __forceinline__ void nn_st(void *p, i64 i, double v)
{
    if (DT == 1) {
        ((double *)p)[i] = v;
        return;
    }
    float f = (float)v;
    if (DT == 0) {
        ((float *)p)[i] = f;
        return;
    }
    unsigned short h;
    if (DT == 3)
        asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(h) : "f"(f));
    else
        asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(h) : "f"(f));
    ((unsigned short *)p)[i] = h;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024) in a fixed order; every thread
// gets the result. sh holds 32 doubles.
__device__ double nn_block_sum(double v, double *sh)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    __syncthreads(); // sh may still be read from a previous call
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    double t = lane < nw ? sh[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
    return t;
}

// One block per row of `inner` elements (x linear index r * inner + i): mean (unless rms) and
// biased variance in double, then (x - mean) * rstd, times w and plus b at parameter index
// ((r % rg) * inner + i) / sp (layer/rms: rg = sp = 1; group norm: rg = groups, sp = spatial).
// With `cached`, dynamic shared memory holds the row (inner doubles), so x is read once; each
// thread reads back only the elements it stored.
template <int DT>
__device__ void nn_norm(const void *x, nnv xv, void *y, const void *w, nnv wv, const void *b,
                        nnv bv, i64 rows, i64 inner, i64 rg, i64 sp, int rms, double eps,
                        int cached)
{
    __shared__ double sh[32];
    extern __shared__ double nn_rowsh[];
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        i64 base = r * inner;
        double s = 0;
        for (i64 i = threadIdx.x; i < inner && (!rms || cached); i += blockDim.x) {
            double v = nn_ld<DT>(x, nnv_off(xv, base + i));
            if (cached) nn_rowsh[i] = v;
            s += v;
        }
        double mean = rms ? 0.0 : nn_block_sum(s, sh) / (double)inner;
        double q = 0;
        for (i64 i = threadIdx.x; i < inner; i += blockDim.x) {
            double d = (cached ? nn_rowsh[i] : nn_ld<DT>(x, nnv_off(xv, base + i))) - mean;
            q += d * d;
        }
        double rstd = 1.0 / sqrt(nn_block_sum(q, sh) / (double)inner + eps);
        i64 pbase = (r % rg) * inner;
        for (i64 i = threadIdx.x; i < inner; i += blockDim.x) {
            double v = cached ? nn_rowsh[i] : nn_ld<DT>(x, nnv_off(xv, base + i));
            v = (v - mean) * rstd;
            i64 c = (pbase + i) / sp;
            if (w) v *= nn_ld<DT>(w, nnv_off(wv, c));
            if (b) v += nn_ld<DT>(b, nnv_off(bv, c));
            nn_st<DT>(y, base + i, v);
        }
    }
}

// Batch norm with given statistics: x [N, C, sp] -> y = x * scale + shift per channel, scale =
// w / sqrt(var + eps), shift = b - mean * scale (w, b optional).
template <int DT>
__device__ void nn_batch_norm(const void *x, nnv xv, void *y, const void *m, nnv mv,
                              const void *var, nnv vv, const void *w, nnv wv, const void *b, nnv bv,
                              i64 n, i64 C, i64 sp, double eps)
{
    GRID_LOOP(n)
    {
        i64 c = (i / sp) % C;
        double scale = 1.0 / sqrt(nn_ld<DT>(var, nnv_off(vv, c)) + eps);
        if (w) scale *= nn_ld<DT>(w, nnv_off(wv, c));
        double shift =
            (b ? nn_ld<DT>(b, nnv_off(bv, c)) : 0.0) - nn_ld<DT>(m, nnv_off(mv, c)) * scale;
        nn_st<DT>(y, i, nn_ld<DT>(x, nnv_off(xv, i)) * scale + shift);
    }
}

#define NN_NORM_KERNELS(S, DT)                                                                     \
    extern "C" __global__ void __launch_bounds__(1024) em_nn_norm_##S(                             \
        const void *x, nnv xv, void *y, const void *w, nnv wv, const void *b, nnv bv, i64 rows,    \
        i64 inner, i64 rg, i64 sp, int rms, double eps, int cached)                                \
    {                                                                                              \
        nn_norm<DT>(x, xv, y, w, wv, b, bv, rows, inner, rg, sp, rms, eps, cached);                \
    }                                                                                              \
    extern "C" __global__ void em_nn_batch_norm_##S(                                               \
        const void *x, nnv xv, void *y, const void *m, nnv mv, const void *var, nnv vv,            \
        const void *w, nnv wv, const void *b, nnv bv, i64 n, i64 C, i64 sp, double eps)            \
    {                                                                                              \
        nn_batch_norm<DT>(x, xv, y, m, mv, var, vv, w, wv, b, bv, n, C, sp, eps);                  \
    }
NN_NORM_KERNELS(f32, 0)
NN_NORM_KERNELS(f64, 1)
NN_NORM_KERNELS(f16, 2)
NN_NORM_KERNELS(bf16, 3)

// ---- integer matmul: one thread per output element, products summed in order into a wrapping
// 64-bit accumulator, stored truncated to the dtype (the CPU's i64 accumulate). mmidx comes
// from the module prelude (batch dims broadcast through stride 0).
template <typename T> __device__ void nn_imatmul(const T *a, const T *b, T *c, const mmidx &s)
{
    i64 total = s.nbatch * s.M * s.N;
    GRID_LOOP(total)
    {
        i64 col = i % s.N, t = i / s.N, row = t % s.M, bt = t / s.M;
        i64 ao = 0, bo = 0, r = bt;
        for (int d = s.R - 1; d >= 0; d--) {
            i64 q = r / s.bshape[d], cc = r - q * s.bshape[d];
            ao += cc * s.ast[d];
            bo += cc * s.bst[d];
            r = q;
        }
        const T *ap = a + ao + row * s.sam;
        const T *bp = b + bo + col * s.sbn;
        u64 acc = 0;
        for (i64 k = 0; k < s.K; k++) acc += (u64)(i64)ap[k * s.sak] * (u64)(i64)bp[k * s.sbk];
        c[i] = (T)(i64)acc;
    }
}

#define NN_IMATMUL(S, T)                                                                           \
    extern "C" __global__ void em_nn_matmul_##S(const T *a, const T *b, T *c, mmidx s)             \
    {                                                                                              \
        nn_imatmul<T>(a, b, c, s);                                                                 \
    }
NN_IMATMUL(i64, long long)
NN_IMATMUL(i32, int)
NN_IMATMUL(i16, short)
NN_IMATMUL(i8, signed char)
NN_IMATMUL(u8, unsigned char)

// ---- real FFT pair along one dim, in double ------------------------------------------------
// The input is viewed as [outer, L, inner] (element strides so, sl, si; for IRFFT a trailing
// (re, im) stride sc), the output as contiguous [outer, P, inner] (RFFT: P = n/2 + 1 complex,
// IRFFT: P = n real). Twiddle angles use (k * t) mod n, so they stay exact for long signals.
#define NN_PI 3.14159265358979323846

struct fftg {
    i64 outer, inner, L, n, P;
    i64 so, sl, si, sc;
};

// Power-of-two lengths up to 2^NN_FFT_LOG run in shared memory, one block per signal; other
// lengths (and longer ones) are summed directly per output.
#define NN_FFT_LOG 12

// In-place radix-2 FFT of m = 2^lg complex values in shared memory (re, im), sign -1 forward.
__device__ void nn_fft_shared(double *re, double *im, int lg, double sign)
{
    int m = 1 << lg;
    for (int i = threadIdx.x; i < m && lg > 0; i += blockDim.x) {
        int j = (int)(__brev((unsigned)i) >> (32 - lg));
        if (i < j) {
            double tr = re[i], ti = im[i];
            re[i] = re[j], im[i] = im[j];
            re[j] = tr, im[j] = ti;
        }
    }
    __syncthreads();
    for (int h = 1; h < m; h <<= 1) {
        for (int t = threadIdx.x; t < m / 2; t += blockDim.x) {
            int k = t & (h - 1), p = (t - k) * 2 + k, q = p + h;
            double s, c;
            sincospi(sign * (double)k / (double)h, &s, &c);
            double vr = re[q] * c - im[q] * s, vi = re[q] * s + im[q] * c;
            double ur = re[p], ui = im[p];
            re[p] = ur + vr, im[p] = ui + vi;
            re[q] = ur - vr, im[q] = ui - vi;
        }
        __syncthreads();
    }
}

// One block per signal (outer * inner of them), n a power of two <= 2^NN_FFT_LOG; dynamic shared
// memory holds 2 n doubles.
template <int DT> __device__ void nn_rfft_pow2(const void *x, void *y, const fftg &g, int lg)
{
    extern __shared__ double nn_fsh[];
    double *re = nn_fsh, *im = nn_fsh + g.n;
    i64 sig = g.outer * g.inner;
    for (i64 s = blockIdx.x; s < sig; s += gridDim.x) {
        i64 o = s / g.inner, in = s % g.inner;
        for (i64 t = threadIdx.x; t < g.n; t += blockDim.x) {
            re[t] = t < g.L ? nn_ld<DT>(x, o * g.so + t * g.sl + in * g.si) : 0.0;
            im[t] = 0;
        }
        __syncthreads();
        nn_fft_shared(re, im, lg, -1.0);
        for (i64 k = threadIdx.x; k < g.P; k += blockDim.x) {
            i64 oi = ((o * g.P + k) * g.inner + in) * 2;
            nn_st<DT>(y, oi, re[k]);
            nn_st<DT>(y, oi + 1, im[k]);
        }
        __syncthreads();
    }
}

// The spectrum's value at bin k (hermitian, imag of DC and of the even-n Nyquist bin dropped).
template <int DT>
__device__ __forceinline__ void nn_bin(const void *x, const fftg &g, i64 o, i64 in, i64 k,
                                       double &xr, double &xi)
{
    xr = xi = 0;
    if (k >= g.L) return;
    i64 off = o * g.so + k * g.sl + in * g.si;
    xr = nn_ld<DT>(x, off);
    if (k != 0 && 2 * k != g.n) xi = nn_ld<DT>(x, off + g.sc);
}

template <int DT> __device__ void nn_irfft_pow2(const void *x, void *y, const fftg &g, int lg)
{
    extern __shared__ double nn_fsh[];
    double *re = nn_fsh, *im = nn_fsh + g.n;
    i64 sig = g.outer * g.inner;
    for (i64 s = blockIdx.x; s < sig; s += gridDim.x) {
        i64 o = s / g.inner, in = s % g.inner;
        for (i64 k = threadIdx.x; k <= g.n / 2; k += blockDim.x) {
            double xr, xi;
            nn_bin<DT>(x, g, o, in, k, xr, xi);
            re[k] = xr, im[k] = xi;
            if (k > 0 && k < g.n - k) re[g.n - k] = xr, im[g.n - k] = -xi;
        }
        __syncthreads();
        nn_fft_shared(re, im, lg, 1.0);
        double inv = 1.0 / (double)g.n;
        for (i64 t = threadIdx.x; t < g.n; t += blockDim.x)
            nn_st<DT>(y, (o * g.n + t) * g.inner + in, re[t] * inv);
        __syncthreads();
    }
}

// Direct sums, one thread per output value: RFFT bin k of signal (o, in).
template <int DT> __device__ void nn_rfft_direct(const void *x, void *y, const fftg &g)
{
    i64 total = g.outer * g.P * g.inner, lim = g.L < g.n ? g.L : g.n;
    GRID_LOOP(total)
    {
        i64 in = i % g.inner, t = i / g.inner, k = t % g.P, o = t / g.P;
        const i64 base = o * g.so + in * g.si;
        double sr = 0, si = 0;
        i64 ph = 0; // k * j mod n
        for (i64 j = 0; j < lim; j++) {
            double v = nn_ld<DT>(x, base + j * g.sl), s, c;
            sincospi(-2.0 * (double)ph / (double)g.n, &s, &c);
            sr += v * c, si += v * s;
            ph += k;
            if (ph >= g.n) ph -= g.n;
        }
        nn_st<DT>(y, 2 * i, sr);
        nn_st<DT>(y, 2 * i + 1, si);
    }
}

// IRFFT sample t: (X0 + 2 sum_{0<k<n/2} Re(X_k e^{2 pi i k t / n}) + [even n] X_{n/2} (-1)^t) / n.
template <int DT> __device__ void nn_irfft_direct(const void *x, void *y, const fftg &g)
{
    i64 total = g.outer * g.n * g.inner;
    GRID_LOOP(total)
    {
        i64 in = i % g.inner, u = i / g.inner, t = u % g.n, o = u / g.n;
        i64 kmax = g.n / 2 < g.L - 1 ? g.n / 2 : g.L - 1;
        double acc = 0;
        i64 ph = 0; // k * t mod n
        for (i64 k = 0; k <= kmax; k++) {
            double xr, xi, s, c;
            nn_bin<DT>(x, g, o, in, k, xr, xi);
            sincospi(2.0 * (double)ph / (double)g.n, &s, &c);
            double term = xr * c - xi * s;
            acc += (k == 0 || 2 * k == g.n) ? term : 2.0 * term;
            ph += t;
            if (ph >= g.n) ph -= g.n;
        }
        nn_st<DT>(y, i, acc / (double)g.n);
    }
}

// ---- FFTs through global memory for the other lengths: sig signals of m = 2^lg complex values
// (interleaved re, im) in a work buffer, one launch per radix-2 stage. A length n that is not a
// power of two runs Bluestein's algorithm: a[t] = v[t] w[t] (chirp w[t] = exp(-i pi t^2 / n)),
// zero-padded to m >= 2n - 1, convolved with conj(w) through FFT, multiply, inverse FFT, then
// X[k] = w[k] conv[k] / m. IRFFT runs the forward transform of the conjugated spectrum (its real
// part is the inverse's).
__device__ __forceinline__ void nn_chirp(i64 k, i64 n, double &c, double &s)
{
    u64 q = ((u64)k * (u64)k) % (u64)(2 * n); // k^2 mod 2n keeps the angle small and exact
    sincospi(-(double)q / (double)n, &s, &c);
}

extern "C" __global__ void em_nn_fft_bitrev(double *a, i64 sig, int lg)
{
    i64 m = (i64)1 << lg;
    GRID_LOOP(sig * m)
    {
        i64 s = i >> lg, t = i & (m - 1);
        i64 j = (i64)(__brevll((u64)t) >> (64 - lg));
        if (t < j) {
            double *p = a + 2 * (s * m + t), *q = a + 2 * (s * m + j);
            double r0 = p[0], r1 = p[1];
            p[0] = q[0], p[1] = q[1];
            q[0] = r0, q[1] = r1;
        }
    }
}

// The butterflies of span h (all signals): u + w v and u - w v, w = exp(sign i pi k / h).
extern "C" __global__ void em_nn_fft_stage(double *a, i64 sig, int lg, i64 h, double sign)
{
    i64 m = (i64)1 << lg, half = m >> 1;
    GRID_LOOP(sig * half)
    {
        i64 s = i >> (lg - 1), t = i & (half - 1);
        i64 k = t & (h - 1);
        double *p = a + 2 * (s * m + (t - k) * 2 + k), *q = p + 2 * h;
        double sn, c;
        sincospi(sign * (double)k / (double)h, &sn, &c);
        double vr = q[0] * c - q[1] * sn, vi = q[0] * sn + q[1] * c;
        double ur = p[0], ui = p[1];
        p[0] = ur + vr, p[1] = ui + vi;
        q[0] = ur - vr, q[1] = ui - vi;
    }
}

// b[t] = conj(w[|t|]) for the circular convolution's kernel, t in (-n, n) wrapped to [0, m).
extern "C" __global__ void em_nn_fft_bfill(double *b, i64 n, i64 m)
{
    GRID_LOOP(m)
    {
        i64 k = i < n ? i : i > m - n ? m - i : -1;
        double c = 0, s = 0;
        if (k >= 0) nn_chirp(k, n, c, s);
        b[2 * i] = c, b[2 * i + 1] = -s;
    }
}

// a[s][t] *= b[t] (complex).
extern "C" __global__ void em_nn_fft_bmul(double *a, const double *b, i64 sig, i64 m)
{
    GRID_LOOP(sig * m)
    {
        i64 t = i % m;
        double xr = a[2 * i], xi = a[2 * i + 1], br = b[2 * t], bi = b[2 * t + 1];
        a[2 * i] = xr * br - xi * bi, a[2 * i + 1] = xr * bi + xi * br;
    }
}

// Work buffer from the input: inv = 0 RFFT (x real), 1 IRFFT (the hermitian spectrum of length
// n); blue: times the chirp (IRFFT: conjugated first).
template <int DT>
__device__ void nn_fft_load(const void *x, double *a, fftg g, i64 m, int inv, int blue)
{
    GRID_LOOP(g.outer * g.inner * m)
    {
        i64 s = i / m, t = i % m, o = s / g.inner, in = s % g.inner;
        double vr = 0, vi = 0;
        if (t < g.n) {
            if (!inv) {
                if (t < g.L) vr = nn_ld<DT>(x, o * g.so + t * g.sl + in * g.si);
            } else {
                bool up = 2 * t > g.n;
                nn_bin<DT>(x, g, o, in, up ? g.n - t : t, vr, vi);
                if (up != (bool)blue) vi = -vi;
            }
            if (blue) {
                double c, sn;
                nn_chirp(t, g.n, c, sn);
                double r = vr * c - vi * sn;
                vi = vr * sn + vi * c, vr = r;
            }
        }
        a[2 * i] = vr, a[2 * i + 1] = vi;
    }
}

// The output from the work buffer (blue: scaled by 1/m and times the chirp).
template <int DT>
__device__ void nn_fft_store(const double *a, void *y, fftg g, i64 m, int inv, int blue)
{
    GRID_LOOP(g.outer * g.inner * g.P)
    {
        i64 in = i % g.inner, u = i / g.inner, k = u % g.P, o = u / g.P;
        const double *p = a + 2 * ((o * g.inner + in) * m + k);
        double re = p[0], im = p[1];
        if (blue) {
            double c, sn;
            nn_chirp(k, g.n, c, sn);
            double r = (re * c - im * sn) / (double)m;
            im = (re * sn + im * c) / (double)m, re = r;
        }
        if (inv)
            nn_st<DT>(y, i, re / (double)g.n);
        else {
            nn_st<DT>(y, 2 * i, re);
            nn_st<DT>(y, 2 * i + 1, im);
        }
    }
}

#define NN_FFT_KERNELS(S, DT)                                                                      \
    extern "C" __global__ void em_nn_rfft_pow2_##S(const void *x, void *y, fftg g, int lg)         \
    {                                                                                              \
        nn_rfft_pow2<DT>(x, y, g, lg);                                                             \
    }                                                                                              \
    extern "C" __global__ void em_nn_irfft_pow2_##S(const void *x, void *y, fftg g, int lg)        \
    {                                                                                              \
        nn_irfft_pow2<DT>(x, y, g, lg);                                                            \
    }                                                                                              \
    extern "C" __global__ void em_nn_rfft_direct_##S(const void *x, void *y, fftg g)               \
    {                                                                                              \
        nn_rfft_direct<DT>(x, y, g);                                                               \
    }                                                                                              \
    extern "C" __global__ void em_nn_irfft_direct_##S(const void *x, void *y, fftg g)              \
    {                                                                                              \
        nn_irfft_direct<DT>(x, y, g);                                                              \
    }                                                                                              \
    extern "C" __global__ void em_nn_fft_load_##S(const void *x, double *a, fftg g, i64 m,         \
                                                  int inv, int blue)                               \
    {                                                                                              \
        nn_fft_load<DT>(x, a, g, m, inv, blue);                                                    \
    }                                                                                              \
    extern "C" __global__ void em_nn_fft_store_##S(const double *a, void *y, fftg g, i64 m,        \
                                                   int inv, int blue)                              \
    {                                                                                              \
        nn_fft_store<DT>(a, y, g, m, inv, blue);                                                   \
    }
NN_FFT_KERNELS(f32, 0)
NN_FFT_KERNELS(f64, 1)
NN_FFT_KERNELS(f16, 2)
NN_FFT_KERNELS(bf16, 3)

// ---- f32 back to f16/bf16: n contiguous values (the f16/bf16 convolutions' results).
extern "C" __global__ void em_nn_f32_to_f16(const float *x, void *y, i64 n)
{
    GRID_LOOP(n) nn_st<2>(y, i, (double)x[i]);
}

extern "C" __global__ void em_nn_f32_to_bf16(const float *x, void *y, i64 n)
{
    GRID_LOOP(n) nn_st<3>(y, i, (double)x[i]);
}

// ---- packing: n values of a strided view into a contiguous buffer of the same dtype, or of f32
// when to_f32 (the f16/bf16 convolutions run in f32).
template <int DT> __device__ void nn_pack(const void *x, nnv xv, void *y, i64 n, int to_f32)
{
    GRID_LOOP(n)
    {
        double v = nn_ld<DT>(x, nnv_off(xv, i));
        if (to_f32)
            ((float *)y)[i] = (float)v;
        else
            nn_st<DT>(y, i, v);
    }
}

#define NN_PACK(S, DT)                                                                             \
    extern "C" __global__ void em_nn_pack_##S(const void *x, nnv xv, void *y, i64 n, int to_f32)   \
    {                                                                                              \
        nn_pack<DT>(x, xv, y, n, to_f32);                                                          \
    }
NN_PACK(f32, 0)
NN_PACK(f64, 1)
NN_PACK(f16, 2)
NN_PACK(bf16, 3)

// ---- direct convolution for few output channels per group (depthwise and the like), where an
// im2col + matmul would run mostly empty tiles: one thread per output element, x [n][c][img...],
// w [cout][c / G][k...], y [n][cout][blk...] contiguous (convg from conv.cu: img = the input's
// sizes, blk = the output's), bias optional.
template <typename T, typename A>
__device__ void nn_conv_direct(const T *x, const T *w, const T *bias, T *y, const convg &g,
                               i64 cout, i64 G)
{
    const i64 L = g.blk[0] * g.blk[1] * g.blk[2], ip = g.img[0] * g.img[1] * g.img[2];
    const i64 Kt = g.k[0] * g.k[1] * g.k[2], cg = g.c / G, og = cout / G;
    GRID_LOOP(g.n * cout * L)
    {
        i64 l = i % L, r = i / L, co = r % cout, n = r / cout;
        i64 b2 = l % g.blk[2], t = l / g.blk[2], b1 = t % g.blk[1], b0 = t / g.blk[1];
        i64 o0 = b0 * g.s[0] - g.p[0], o1 = b1 * g.s[1] - g.p[1], o2 = b2 * g.s[2] - g.p[2];
        const T *xg = x + (n * g.c + (co / og) * cg) * ip;
        const T *wc = w + co * cg * Kt;
        A acc = 0;
        for (i64 ci = 0; ci < cg; ci++, xg += ip, wc += Kt)
            for (i64 k0 = 0; k0 < g.k[0]; k0++) {
                i64 x0 = o0 + k0 * g.d[0];
                if (x0 < 0 || x0 >= g.img[0]) continue;
                for (i64 k1 = 0; k1 < g.k[1]; k1++) {
                    i64 x1 = o1 + k1 * g.d[1];
                    if (x1 < 0 || x1 >= g.img[1]) continue;
                    const T *xr = xg + (x0 * g.img[1] + x1) * g.img[2];
                    const T *wr = wc + (k0 * g.k[1] + k1) * g.k[2];
                    for (i64 k2 = 0; k2 < g.k[2]; k2++) {
                        i64 x2 = o2 + k2 * g.d[2];
                        if (x2 >= 0 && x2 < g.img[2]) acc += (A)xr[x2] * (A)wr[k2];
                    }
                }
            }
        y[i] = (T)(acc + (bias ? (A)bias[co] : (A)0));
    }
}

extern "C" __global__ void em_nn_conv_direct_f32(const float *x, const float *w, const float *b,
                                                 float *y, convg g, i64 cout, i64 G)
{
    nn_conv_direct<float, float>(x, w, b, y, g, cout, G);
}

extern "C" __global__ void em_nn_conv_direct_f64(const double *x, const double *w, const double *b,
                                                 double *y, convg g, i64 cout, i64 G)
{
    nn_conv_direct<double, double>(x, w, b, y, g, cout, G);
}
