// Convolution pieces: im2col and its adjoint col2im over up to three spatial dims (leading dims
// of size 1 fill the rest), and a per-channel bias add. CONV runs as im2col + the matmul
// kernels, CONV_TRANSPOSE as matmul + col2im (cuda_conv.c). Contiguous tensors.
// A "block" position l indexes the grid g.blk (conv: output positions; the image is the input).
#include "conv.cuh"

// cols [n][c * K][L] from img [n][c][img...]; K = k0 k1 k2, L = blk0 blk1 blk2; 0 outside.
template <typename T> __device__ void im2col_nd(const T *img, T *cols, const convg &g)
{
    const i64 K = g.k[0] * g.k[1] * g.k[2], L = g.blk[0] * g.blk[1] * g.blk[2];
    const i64 ip = g.img[0] * g.img[1] * g.img[2], total = g.n * g.c * K * L;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)blockDim.x * gridDim.x) {
        i64 l = i % L, r = i / L;
        i64 kk = r % K, nc = r / K; // nc = n * c + c
        i64 b2 = l % g.blk[2], t = l / g.blk[2], b1 = t % g.blk[1], b0 = t / g.blk[1];
        i64 k2 = kk % g.k[2], u = kk / g.k[2], k1 = u % g.k[1], k0 = u / g.k[1];
        i64 x0 = b0 * g.s[0] - g.p[0] + k0 * g.d[0], x1 = b1 * g.s[1] - g.p[1] + k1 * g.d[1];
        i64 x2 = b2 * g.s[2] - g.p[2] + k2 * g.d[2];
        bool in = x0 >= 0 && x0 < g.img[0] && x1 >= 0 && x1 < g.img[1] && x2 >= 0 && x2 < g.img[2];
        cols[i] = in ? img[nc * ip + (x0 * g.img[1] + x1) * g.img[2] + x2] : (T)0;
    }
}

// img [n][c][img...] = the sum over every (kernel offset, block) that reads each position, in a
// fixed order (deterministic, no atomics), accumulated in double.
template <typename T> __device__ void col2im_nd(const T *cols, T *img, const convg &g)
{
    const i64 K = g.k[0] * g.k[1] * g.k[2], L = g.blk[0] * g.blk[1] * g.blk[2];
    const i64 ip = g.img[0] * g.img[1] * g.img[2], total = g.n * g.c * ip;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)blockDim.x * gridDim.x) {
        i64 pos = i % ip, nc = i / ip;
        i64 x2 = pos % g.img[2], t = pos / g.img[2], x1 = t % g.img[1], x0 = t / g.img[1];
        double acc = 0;
        for (i64 k0 = 0; k0 < g.k[0]; k0++) {
            i64 q0 = x0 + g.p[0] - k0 * g.d[0];
            if (q0 < 0 || q0 % g.s[0]) continue;
            q0 /= g.s[0];
            if (q0 >= g.blk[0]) continue;
            for (i64 k1 = 0; k1 < g.k[1]; k1++) {
                i64 q1 = x1 + g.p[1] - k1 * g.d[1];
                if (q1 < 0 || q1 % g.s[1]) continue;
                q1 /= g.s[1];
                if (q1 >= g.blk[1]) continue;
                for (i64 k2 = 0; k2 < g.k[2]; k2++) {
                    i64 q2 = x2 + g.p[2] - k2 * g.d[2];
                    if (q2 < 0 || q2 % g.s[2]) continue;
                    q2 /= g.s[2];
                    if (q2 >= g.blk[2]) continue;
                    i64 kk = (k0 * g.k[1] + k1) * g.k[2] + k2, l = (q0 * g.blk[1] + q1) * g.blk[2] + q2;
                    acc += (double)cols[(nc * K + kk) * L + l];
                }
            }
        }
        img[i] = (T)acc;
    }
}

// y [n][c][L] += bias[c]
template <typename T> __device__ void bias_add(T *y, const T *bias, i64 c, i64 L, i64 total)
{
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)blockDim.x * gridDim.x)
        y[i] = (T)((double)y[i] + (double)bias[(i / L) % c]);
}

#define CONV_KERNELS(SUF, T)                                                                       \
    extern "C" __global__ void em_im2col_##SUF(const T *x, T *cols, convg g)                       \
    {                                                                                              \
        im2col_nd<T>(x, cols, g);                                                                  \
    }                                                                                              \
    extern "C" __global__ void em_col2im_##SUF(const T *cols, T *y, convg g)                       \
    {                                                                                              \
        col2im_nd<T>(cols, y, g);                                                                  \
    }                                                                                              \
    extern "C" __global__ void em_bias_add_##SUF(T *y, const T *b, i64 c, i64 L, i64 total)        \
    {                                                                                              \
        bias_add<T>(y, b, c, L, total);                                                            \
    }
CONV_KERNELS(f32, float)
CONV_KERNELS(f64, double)

// im2col only moves elements (0 is +0.0 in f16 and bf16 too): one kernel for both 16-bit floats
extern "C" __global__ void em_im2col_u16(const unsigned short *x, unsigned short *cols, convg g)
{
    im2col_nd<unsigned short>(x, cols, g);
}
