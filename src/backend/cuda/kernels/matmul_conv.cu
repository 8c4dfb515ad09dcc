// Convolution (1-D and 2-D, any stride / padding / dilation / groups) as an implicit GEMM on the
// tensor cores for f16 and bf16, f32 accumulation: per group g,
//   y[n, g M + m, l] = bias[g M + m] + sum_k w[g M + m, k] * x_col[k, n L + l]
// where k = (ci, kh, kw) runs over the Cg K_h K_w kernel taps and l = (oh, ow) over the output
// positions; x_col is never written: each k tile's column elements are gathered from x into
// shared memory. The batch joins the columns (n L + l), so small images still fill a tile.
// Uses the mma.sync helpers of matmul_mma.cuh. Contiguous x [N][Cx][H][W], w [Cy][Cg][Kh][Kw],
// y [N][Cy][OH][OW]; the host checks every offset fits in 32 bits.
#include "matmul.cuh"
#include "matmul_mma.cuh"

struct convig { // matches conv_ig_arg in cuda_conv.c
    int H, W, OW;
    int sh, sw, ph, pw;
    int Cg, M, K, L, ncols; // input channels per group, outputs per group, Cg Kh Kw, OH OW, N L
    int xn, yn;             // per-sample strides of x (Cx H W) and y (Cy L)
    int splits, tps;        // split-K: parts per group and k tiles per part (1, all: none)
    int ytot;               // numel of y: one part's slice of the f32 workspace
    int cx;                 // channels of x (its pitch in the channels-last copy)
};

// k -> {offset of tap k in x relative to the column's base, kh dilation_h | kw dilation_w << 16}
// (the host keeps both below 2^15); entries k >= K, up to the last whole tile, are zero.
extern "C" __global__ void em_conv_ig_taps(int2 *taps, int ktot, int K, int KHW, int KW, int dh,
                                           int dw, int H, int W)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= ktot) return;
    if (k >= K) {
        taps[k] = make_int2(0, 0);
        return;
    }
    int ci = k / KHW, r = k - ci * KHW, kh = r / KW, kw = r - kh * KW;
    taps[k] = make_int2(ci * H * W + kh * dh * W + kw * dw, kh * dh | kw * dw << 16);
}

#define CI_BK 32
#define CI_BN 128
#define CI_PB (CI_BN + 8) // pitch (halves) of the [32][128] column tile: ldmatrix rows on 8 banks

// The block's outputs y[n][grp M + m][l]: bias added in f32, one rounding to the output type;
// split-K parts write f32 partial sums to their slice of ws instead (em_conv_ig_sum_* adds them).
template <int BF, int MI>
__device__ __forceinline__ void conv_ig_store(const float (&acc)[MI][4][4],
                                              const unsigned short *bias, unsigned short *y,
                                              float *ws, const convig &g, int grp, int part,
                                              int m0, int n0, int wm, int wn, int lane)
{
    const int M = g.M;
#pragma unroll
    for (int nj = 0; nj < 4; nj++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            int jj = n0 + wn * 32 + nj * 8 + (lane & 3) * 2 + e;
            if (jj >= g.ncols) continue;
            int n = jj / g.L, l = jj - n * g.L;
            const long long yo = (long long)n * g.yn + (long long)grp * M * g.L + l;
#pragma unroll
            for (int mi = 0; mi < MI; mi++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    int m = m0 + wm * 16 * MI + mi * 16 + (lane >> 2) + h * 8;
                    if (m >= M) continue;
                    float v = acc[mi][nj][2 * h + e];
                    if (ws) {
                        ws[(long long)part * g.ytot + yo + (long long)m * g.L] = v;
                        continue;
                    }
                    if (bias) v += half_to_f<BF>(bias[grp * M + m]);
                    y[yo + (long long)m * g.L] = f_to_half<BF>(v);
                }
        }
}

// A warp's (16 MI) x 32 products over one 32-deep k tile in shared memory: A [rows][TC_PAD_K]
// k-contiguous; B [32 k][CI_PB] n-contiguous (KB = 0) or [128 n][TC_PAD_K] k-contiguous (KB = 1).
template <int BF, int MI, int KB>
__device__ __forceinline__ void ci_products(float (&acc)[MI][4][4], const unsigned short *As,
                                            const unsigned short *Bs, int wm, int wn, int lane)
{
#pragma unroll
    for (int kk = 0; kk < CI_BK; kk += 16) {
        unsigned af[MI][4], bfr[4][2];
#pragma unroll
        for (int mi = 0; mi < MI; mi++) {
            int mb = wm * 16 * MI + mi * 16;
            ldsm_x4(smem_u32(As + (mb + (lane & 15)) * TC_PAD_K + kk + (lane >> 4) * 8), af[mi][0],
                    af[mi][1], af[mi][2], af[mi][3]);
        }
#pragma unroll
        for (int p = 0; p < 2; p++) {
            int nb = wn * 32 + p * 16;
            if (KB)
                ldsm_x4(smem_u32(Bs + (nb + (lane & 7) + ((lane >> 4) << 3)) * TC_PAD_K + kk +
                                 ((lane >> 3) & 1) * 8),
                        bfr[2 * p][0], bfr[2 * p][1], bfr[2 * p + 1][0], bfr[2 * p + 1][1]);
            else
                ldsm_x4_t(smem_u32(Bs + (kk + (lane & 15)) * CI_PB + nb + (lane >> 4) * 8),
                          bfr[2 * p][0], bfr[2 * p][1], bfr[2 * p + 1][0], bfr[2 * p + 1][1]);
        }
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
#pragma unroll
            for (int nj = 0; nj < 4; nj++) mma16816<BF>(acc[mi][nj], af[mi], bfr[nj]);
    }
}

// MI m16 tiles per warp: block tiles (32 MI) x 128, warps 2 x 4, each (16 MI) x 32.
// AV: w rows are 16-byte chunks (K % 8 == 0, aligned base), loaded with cp.async; else
// element by element.
template <int BF, int AV, int MI>
__device__ void conv_igemm(const unsigned short *x, const unsigned short *w,
                           const unsigned short *bias, unsigned short *y, float *ws,
                           const int2 *taps, const convig &g)
{
    constexpr int BM = 32 * MI, A_H = BM * TC_PAD_K, STAGE = A_H + CI_BK * CI_PB;
    __shared__ __align__(16) unsigned short smem[2 * STAGE];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp >> 2, wn = warp & 3;
    const int grp = blockIdx.z / g.splits, part = blockIdx.z - grp * g.splits, M = g.M, K = g.K;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * CI_BN;
    const unsigned short *wg = w + (long long)grp * M * K;
    const int kt0 = part * g.tps, kt1 = min((K + CI_BK - 1) / CI_BK, kt0 + g.tps);

    // this thread's column of the gathered tile: fixed for the whole k loop
    const int col = tid & (CI_BN - 1), row0 = tid >> 7; // rows row0, row0 + 2, ... row0 + 30
    const int j = n0 + col;
    int ih0 = -(1 << 29), iw0 = 0, xbase = 0;
    if (j < g.ncols) {
        int n = j / g.L, l = j - n * g.L, oh = l / g.OW, ow = l - oh * g.OW;
        ih0 = oh * g.sh - g.ph;
        iw0 = ow * g.sw - g.pw;
        xbase = n * g.xn + grp * g.Cg * g.H * g.W + ih0 * g.W + iw0;
    }
    unsigned breg[CI_BK / 4]; // two rows' elements per register (rows row0 + 4 i and + 2)
    unsigned areg[AV ? 1 : BM * CI_BK / 512];

    auto load_b = [&](int kt) {
#pragma unroll
        for (int i = 0; i < CI_BK / 2; i++) {
            const int kr = kt * CI_BK + row0 + 2 * i;
            int2 t = __ldg(taps + kr);
            int ih = ih0 + (t.y & 0xffff), iw = iw0 + (t.y >> 16);
            bool v = kr < K && (unsigned)ih < (unsigned)g.H && (unsigned)iw < (unsigned)g.W;
            unsigned e = v ? __ldg(x + xbase + t.x) : 0u;
            if (i & 1)
                breg[i >> 1] |= e << 16;
            else
                breg[i >> 1] = e;
        }
    };
    auto store_b = [&](int stage) {
        unsigned short *Bs = smem + stage * STAGE + A_H;
#pragma unroll
        for (int i = 0; i < CI_BK / 2; i++)
            Bs[(row0 + 2 * i) * CI_PB + col] =
                (unsigned short)(i & 1 ? breg[i >> 1] >> 16 : breg[i >> 1] & 0xffff);
    };
    auto load_a = [&](int stage, int kt) { // AV: straight into shared memory
        unsigned short *As = smem + stage * STAGE;
        const int k0 = kt * CI_BK;
        if (AV) {
#pragma unroll
            for (int i = 0; i < BM * CI_BK / 8 / 256; i++) {
                int ch = tid + i * 256, r = ch >> 2, kc = (ch & 3) * 8;
                int m = m0 + r, k = k0 + kc;
                bool v = m < M && k < K;
                cp_async16(smem_u32(As + r * TC_PAD_K + kc), v ? wg + (long long)m * K + k : wg, v);
            }
            asm volatile("cp.async.commit_group;\n" ::);
        } else {
#pragma unroll
            for (int i = 0; i < BM * CI_BK / 256; i++) {
                int e = tid + i * 256, r = e / CI_BK, kc = e % CI_BK;
                int m = m0 + r, k = k0 + kc;
                unsigned v = m < M && k < K ? __ldg(wg + (long long)m * K + k) : 0u;
                if (i & 1)
                    areg[i >> 1] |= v << 16;
                else
                    areg[i >> 1] = v;
            }
        }
    };
    auto store_a = [&](int stage) {
        if (!AV) {
            unsigned short *As = smem + stage * STAGE;
#pragma unroll
            for (int i = 0; i < BM * CI_BK / 256; i++) {
                int e = tid + i * 256;
                As[(e / CI_BK) * TC_PAD_K + e % CI_BK] =
                    (unsigned short)(i & 1 ? areg[i >> 1] >> 16 : areg[i >> 1] & 0xffff);
            }
        } else
            asm volatile("cp.async.wait_group 0;\n" ::);
    };

    float acc[MI][4][4];
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int jn = 0; jn < 4; jn++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][jn][e] = 0.f;

    if (kt0 < kt1) {
        load_a(0, kt0);
        load_b(kt0);
        store_a(0);
        store_b(0);
    }
    __syncthreads();
    for (int kt = kt0; kt < kt1; kt++) {
        const int cur = (kt - kt0) & 1;
        const bool more = kt + 1 < kt1;
        if (more) { // the next tile's loads fly while this one is multiplied
            load_a(cur ^ 1, kt + 1);
            load_b(kt + 1);
        }
        const unsigned short *As = smem + cur * STAGE, *Bs = As + A_H;
        ci_products<BF, MI, 0>(acc, As, Bs, wm, wn, lane);
        if (more) {
            store_a(cur ^ 1);
            store_b(cur ^ 1);
        }
        __syncthreads();
    }

    conv_ig_store<BF, MI>(acc, bias, y, ws, g, grp, part, m0, n0, wm, wn, lane);
}

#define CONV_IG_KERNEL(NAME, BF, AV, MI)                                                           \
    extern "C" __global__ void __launch_bounds__(256, 2)                                           \
        NAME(const unsigned short *x, const unsigned short *w, const unsigned short *b,            \
             unsigned short *y, float *ws, const int2 *taps, convig g)                             \
    {                                                                                              \
        conv_igemm<BF, AV, MI>(x, w, b, y, ws, taps, g);                                           \
    }
CONV_IG_KERNEL(em_conv_ig_f16, 0, 1, 4)
CONV_IG_KERNEL(em_conv_ig_f16_a1, 0, 0, 4)
CONV_IG_KERNEL(em_conv_ig_f16_m64, 0, 1, 2)
CONV_IG_KERNEL(em_conv_ig_f16_m64_a1, 0, 0, 2)
CONV_IG_KERNEL(em_conv_ig_bf16, 1, 1, 4)
CONV_IG_KERNEL(em_conv_ig_bf16_a1, 1, 0, 4)
CONV_IG_KERNEL(em_conv_ig_bf16_m64, 1, 1, 2)
CONV_IG_KERNEL(em_conv_ig_bf16_m64_a1, 1, 0, 2)

// y[i] = bias[channel] + the split-K parts' sums, added in part order, rounded once.
template <int BF>
__device__ void conv_ig_sum(const float *ws, const unsigned short *bias, unsigned short *y,
                            convig g, int cy)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < g.ytot; i += blockDim.x * gridDim.x) {
        float acc = 0.f;
        for (int p = 0; p < g.splits; p++) acc += ws[(long long)p * g.ytot + i];
        if (bias) acc += half_to_f<BF>(bias[(i / g.L) % cy]);
        y[i] = f_to_half<BF>(acc);
    }
}

extern "C" __global__ void em_conv_ig_sum_f16(const float *ws, const unsigned short *b,
                                              unsigned short *y, convig g, int cy)
{
    conv_ig_sum<0>(ws, b, y, g, cy);
}

extern "C" __global__ void em_conv_ig_sum_bf16(const float *ws, const unsigned short *b,
                                               unsigned short *y, convig g, int cy)
{
    conv_ig_sum<1>(ws, b, y, g, cy);
}

// ---- channels-last: x copied to [N][H][W][Cx] and w to [Cy][Kh][Kw][Cg] first (Cg % 8 == 0),
// so k = (kh, kw, ci) runs along the channels and every 8 k of a column are one 16-byte chunk:
// both operands stream through cp.async (zero-filled outside the image) in a 4-stage pipeline.

// chunk q (k = 8 q) -> {offset in the channels-last x, kh dh | kw dw << 16}; zero past K.
extern "C" __global__ void em_conv_ig_taps_cl(int2 *taps, int nq, int K, int Cg, int KW, int dh,
                                              int dw, int W, int Cx)
{
    int q = blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= nq) return;
    int k = q * 8;
    if (k >= K) {
        taps[q] = make_int2(0, 0);
        return;
    }
    int r = k / Cg, ci = k - r * Cg, kh = r / KW, kw = r - kh * KW;
    taps[q] = make_int2((kh * dh * W + kw * dw) * Cx + ci, kh * dh | kw * dw << 16);
}

#define CL_STAGES 4
template <int BF, int MI>
__device__ void conv_cl(const unsigned short *x, const unsigned short *w, const unsigned short *bias,
                        unsigned short *y, float *ws, const int2 *taps, const convig &g)
{
    extern __shared__ __align__(16) unsigned short smem[];
    constexpr int BM = 32 * MI, A_H = BM * TC_PAD_K, STAGE = A_H + CI_BN * TC_PAD_K;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp >> 2, wn = warp & 3;
    const int grp = blockIdx.z / g.splits, part = blockIdx.z - grp * g.splits, M = g.M, K = g.K;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * CI_BN;
    const unsigned short *wg = w + (long long)grp * M * K;
    const int kt0 = part * g.tps, kt1 = min((K + CI_BK - 1) / CI_BK, kt0 + g.tps);
    const int kq = tid & 3; // this thread's 8-channel chunk of each k tile, for columns c and c + 64
    int ih0[2], iw0[2], xb[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        int j = n0 + (tid >> 2) + 64 * i;
        ih0[i] = -(1 << 29), iw0[i] = 0, xb[i] = 0;
        if (j < g.ncols) {
            int n = j / g.L, l = j - n * g.L, oh = l / g.OW, ow = l - oh * g.OW;
            ih0[i] = oh * g.sh - g.ph;
            iw0[i] = ow * g.sw - g.pw;
            xb[i] = ((n * g.H + ih0[i]) * g.W + iw0[i]) * g.cx + grp * g.Cg;
        }
    }
    auto load_stage = [&](int stage, int kt) {
        unsigned short *As = smem + stage * STAGE, *Bs = As + A_H;
        const int k0 = kt * CI_BK;
#pragma unroll
        for (int i = 0; i < BM * CI_BK / 8 / 256; i++) {
            int ch = tid + i * 256, r = ch >> 2, kc = (ch & 3) * 8;
            int m = m0 + r, k = k0 + kc;
            bool v = m < M && k < K;
            cp_async16(smem_u32(As + r * TC_PAD_K + kc), v ? wg + (long long)m * K + k : wg, v);
        }
        int2 t = __ldg(taps + kt * 4 + kq);
        int dh = t.y & 0xffff, dw = t.y >> 16;
        bool kv = k0 + kq * 8 < K;
#pragma unroll
        for (int i = 0; i < 2; i++) {
            int ih = ih0[i] + dh, iw = iw0[i] + dw;
            bool v = kv && (unsigned)ih < (unsigned)g.H && (unsigned)iw < (unsigned)g.W;
            cp_async16(smem_u32(Bs + ((tid >> 2) + 64 * i) * TC_PAD_K + kq * 8),
                       v ? x + xb[i] + t.x : x, v);
        }
    };

    float acc[MI][4][4];
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int jn = 0; jn < 4; jn++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][jn][e] = 0.f;
#pragma unroll
    for (int st = 0; st < CL_STAGES - 1; st++) {
        if (kt0 + st < kt1) load_stage(st, kt0 + st);
        asm volatile("cp.async.commit_group;\n" ::);
    }
    for (int kt = kt0; kt < kt1; kt++) {
        asm volatile("cp.async.wait_group %0;\n" ::"n"(CL_STAGES - 2));
        __syncthreads();
        int nt = kt + CL_STAGES - 1;
        if (nt < kt1) load_stage((nt - kt0) % CL_STAGES, nt);
        asm volatile("cp.async.commit_group;\n" ::);
        const unsigned short *As = smem + ((kt - kt0) % CL_STAGES) * STAGE, *Bs = As + A_H;
        ci_products<BF, MI, 1>(acc, As, Bs, wm, wn, lane);
    }
    asm volatile("cp.async.wait_group 0;\n" ::);
    conv_ig_store<BF, MI>(acc, bias, y, ws, g, grp, part, m0, n0, wm, wn, lane);
}

#define CONV_CL_KERNEL(NAME, BF, MI)                                                               \
    extern "C" __global__ void __launch_bounds__(256, 2)                                           \
        NAME(const unsigned short *x, const unsigned short *w, const unsigned short *b,            \
             unsigned short *y, float *ws, const int2 *taps, convig g)                             \
    {                                                                                              \
        conv_cl<BF, MI>(x, w, b, y, ws, taps, g);                                                  \
    }
CONV_CL_KERNEL(em_conv_cl_f16, 0, 4)
CONV_CL_KERNEL(em_conv_cl_f16_m64, 0, 2)
CONV_CL_KERNEL(em_conv_cl_bf16, 1, 4)
CONV_CL_KERNEL(em_conv_cl_bf16_m64, 1, 2)

// to_cl's phases element by element: tile t [c][p] from x (rows of P), y (rows of C) from t.
template <typename T>
__device__ __forceinline__ void cl_read(T (&t)[64][65], const T *x, long long base, int C, int P,
                                        int c0, int p0, int wy, int lane)
{
    for (int r = wy; r < 64; r += 8)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int q = lane + 32 * h;
            if (c0 + r < C && p0 + q < P) t[r][q] = x[base + (long long)(c0 + r) * P + p0 + q];
        }
}
template <typename T>
__device__ __forceinline__ void cl_write(const T (&t)[64][65], T *y, long long base, int C, int P,
                                         int c0, int p0, int wy, int lane)
{
    for (int r = wy; r < 64; r += 8)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int q = lane + 32 * h;
            if (p0 + r < P && c0 + q < C) y[base + (long long)(p0 + r) * C + c0 + q] = t[q][r];
        }
}

// y [n][p][c] = x [n][c][p] (x to channels-last; w [Cy][Cg][Kh Kw] to [Cy][Kh Kw][Cg]): 64 x 64
// tiles through shared memory (pitch 65: the column reads hit 32 banks), read along p and written
// along c. 16-bit elements (em_conv_to_cl_u16): two elements (4 bytes) per thread where the tile
// is whole and P (for the reads) or C (for the writes) is even and the base 4-byte aligned (a
// contiguous view may start at an odd element), else element by element; 32-bit elements
// (em_conv_to_cl_u32, the f32 copy-engine convolution's): element by element. Grid (P / 64,
// C / 64, n), 256 threads.
extern "C" __global__ void __launch_bounds__(256)
    em_conv_to_cl_u16(const unsigned short *x, unsigned short *y, int C, int P)
{
    __shared__ unsigned short t[64][65];
    const long long base = (long long)blockIdx.z * C * P;
    const int p0 = blockIdx.x * 64, c0 = blockIdx.y * 64, lane = threadIdx.x & 31,
              wy = threadIdx.x >> 5;
    const bool whole = p0 + 64 <= P && c0 + 64 <= C;
    if (whole && (P & 1) == 0 && ((unsigned long long)x & 3) == 0) {
#pragma unroll
        for (int r = wy; r < 64; r += 8) {
            const unsigned v = *(const unsigned *)(x + base + (long long)(c0 + r) * P + p0 + 2 * lane);
            t[r][2 * lane] = (unsigned short)v;
            t[r][2 * lane + 1] = (unsigned short)(v >> 16);
        }
    } else
        cl_read(t, x, base, C, P, c0, p0, wy, lane);
    __syncthreads();
    if (whole && (C & 1) == 0 && ((unsigned long long)y & 3) == 0) {
#pragma unroll
        for (int r = wy; r < 64; r += 8)
            *(unsigned *)(y + base + (long long)(p0 + r) * C + c0 + 2 * lane) =
                t[2 * lane][r] | (unsigned)t[2 * lane + 1][r] << 16;
    } else
        cl_write(t, y, base, C, P, c0, p0, wy, lane);
}

extern "C" __global__ void __launch_bounds__(256)
    em_conv_to_cl_u32(const unsigned *x, unsigned *y, int C, int P)
{
    __shared__ unsigned t[64][65];
    const long long base = (long long)blockIdx.z * C * P;
    const int p0 = blockIdx.x * 64, c0 = blockIdx.y * 64, lane = threadIdx.x & 31,
              wy = threadIdx.x >> 5;
    cl_read(t, x, base, C, P, c0, p0, wy, lane);
    __syncthreads();
    cl_write(t, y, base, C, P, c0, p0, wy, lane);
}

// The same for P < 32 (kernel taps of a weight): one thread per element of y, 32-bit index
// arithmetic (the host keeps n C P below 2^31).
template <typename T> __device__ void to_cl_small(const T *x, T *y, int C, int P, int total)
{
    const int cp = C * P;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += blockDim.x * gridDim.x) {
        const int n = i / cp, r = i - n * cp, p = r / C, c = r - p * C;
        y[i] = x[n * cp + c * P + p];
    }
}
extern "C" __global__ void em_conv_to_cl_small_u16(const unsigned short *x, unsigned short *y, int C,
                                                   int P, int total)
{
    to_cl_small(x, y, C, P, total);
}
extern "C" __global__ void em_conv_to_cl_small_u32(const unsigned *x, unsigned *y, int C, int P,
                                                   int total)
{
    to_cl_small(x, y, C, P, total);
}

// The columns of a convolution for the wgmma product (conv_cols in cuda_conv.c): from x
// channels-last [N][H][W][C], cols [N OH OW][Kh Kw C], row (n, oh, ow), column (kh, kw, c);
// zeros outside the image. C % 8 == 0: one thread per 8 channels (16 bytes), read and written
// along rows; the host keeps every index within 32 bits.
struct colg { // matches col_arg in cuda_conv.c
    int H, W, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, C8, total;
};
extern "C" __global__ void __launch_bounds__(256) em_im2col_cl_u16(const uint4 *x, uint4 *cols, colg g)
{
    const int row = g.KH * g.KW * g.C8, img = g.OH * g.OW;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < g.total; i += blockDim.x * gridDim.x) {
        int r = i / row, q = i - r * row;
        int t = q / g.C8, c8 = q - t * g.C8, kh = t / g.KW, kw = t - kh * g.KW;
        int n = r / img, p = r - n * img, oh = p / g.OW, ow = p - oh * g.OW;
        int ih = oh * g.sh - g.ph + kh * g.dh, iw = ow * g.sw - g.pw + kw * g.dw;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W) v = x[((n * g.H + ih) * g.W + iw) * g.C8 + c8];
        cols[i] = v;
    }
}

// ---- f32, exact (FFMA, f32 accumulation): the same implicit GEMM on sgemm-style register
// tiles. MR = 8: 128 x 128 block tiles, 8 x 8 outputs per thread (rows ty*4.. and 64 + ty*4..,
// columns tx*4.. and 64 + tx*4..); MR = 4: 64 x 256 tiles for at most 64 outputs per group, 4 x
// 16 per thread (columns tx*4 + 64 h). Shared tiles are k-major, [16][tile + 4]; w is read
// element by element along k, the columns gathered as in em_conv_ig_* (the same tap table).
#define CF_BK 16
template <int MR>
__device__ void conv_f32(const float *x, const float *w, const float *bias, float *y, float *ws,
                         const int2 *taps, const convig &g)
{
    constexpr int BM = 16 * MR, BN = MR == 8 ? 128 : 256;
    constexpr int NC = 64 / MR, NA = BM * CF_BK / 256, NB = CF_BK * BN / 256;
    __shared__ __align__(16) float As[2][CF_BK][BM + 4];
    __shared__ __align__(16) float Bs[2][CF_BK][BN + 4];
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int grp = blockIdx.z / g.splits, part = blockIdx.z - grp * g.splits, M = g.M, K = g.K;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const float *wg = w + (long long)grp * M * K;
    const int kt0 = part * g.tps, kt1 = min((K + CF_BK - 1) / CF_BK, kt0 + g.tps);
    const int col = tid % BN, row0 = tid / BN; // the gathered column; rows row0 + (256 / BN) i
    const int j = n0 + col;
    int ih0 = -(1 << 29), iw0 = 0, xbase = 0;
    if (j < g.ncols) {
        int n = j / g.L, l = j - n * g.L, oh = l / g.OW, ow = l - oh * g.OW;
        ih0 = oh * g.sh - g.ph;
        iw0 = ow * g.sw - g.pw;
        xbase = n * g.xn + grp * g.Cg * g.H * g.W + ih0 * g.W + iw0;
    }
    float ra[NA], rb[NB];
    auto fetch = [&](int kt) {
        const int k0 = kt * CF_BK;
#pragma unroll
        for (int i = 0; i < NA; i++) {
            int e = tid + i * 256, r = e / CF_BK, k = k0 + e % CF_BK, m = m0 + r;
            ra[i] = m < M && k < K ? __ldg(wg + (long long)m * K + k) : 0.f;
        }
#pragma unroll
        for (int i = 0; i < NB; i++) {
            const int kr = k0 + row0 + (256 / BN) * i;
            int2 t = __ldg(taps + kr);
            int ih = ih0 + (t.y & 0xffff), iw = iw0 + (t.y >> 16);
            bool v = kr < K && (unsigned)ih < (unsigned)g.H && (unsigned)iw < (unsigned)g.W;
            rb[i] = v ? __ldg(x + xbase + t.x) : 0.f;
        }
    };
    auto store = [&](int buf) {
#pragma unroll
        for (int i = 0; i < NA; i++) {
            int e = tid + i * 256;
            As[buf][e % CF_BK][e / CF_BK] = ra[i];
        }
#pragma unroll
        for (int i = 0; i < NB; i++) Bs[buf][row0 + (256 / BN) * i][col] = rb[i];
    };
    float acc[MR][NC];
#pragma unroll
    for (int i = 0; i < MR; i++)
#pragma unroll
        for (int c = 0; c < NC; c++) acc[i][c] = 0.f;
    if (kt0 < kt1) {
        fetch(kt0);
        store(0);
    }
    __syncthreads();
    int buf = 0;
    for (int kt = kt0; kt < kt1; kt++) {
        const bool more = kt + 1 < kt1;
        if (more) fetch(kt + 1); // global loads in flight during the products
#pragma unroll
        for (int k = 0; k < CF_BK; k++) {
            float av[MR], bv[NC];
            const float4 a0 = *(const float4 *)&As[buf][k][ty * 4];
            av[0] = a0.x, av[1] = a0.y, av[2] = a0.z, av[3] = a0.w;
            if (MR == 8) {
                const float4 a1 = *(const float4 *)&As[buf][k][64 + ty * 4];
                av[MR - 4] = a1.x, av[MR - 3] = a1.y, av[MR - 2] = a1.z, av[MR - 1] = a1.w;
            }
#pragma unroll
            for (int h = 0; h < NC / 4; h++) {
                const float4 b = *(const float4 *)&Bs[buf][k][h * 64 + tx * 4];
                bv[4 * h] = b.x, bv[4 * h + 1] = b.y, bv[4 * h + 2] = b.z, bv[4 * h + 3] = b.w;
            }
#pragma unroll
            for (int i = 0; i < MR; i++)
#pragma unroll
                for (int c = 0; c < NC; c++) acc[i][c] = fmaf(av[i], bv[c], acc[i][c]);
        }
        if (more) store(buf ^ 1);
        __syncthreads();
        buf ^= 1;
    }
    // y[n][grp M + m][l] (+ bias), or the part's f32 slice of ws; 4 columns at once where they
    // lie in one sample (L % 4 == 0)
    const bool vec = (g.L & 3) == 0;
#pragma unroll
    for (int h = 0; h < NC / 4; h++) {
        const int jj = n0 + h * 64 + tx * 4;
        if (jj >= g.ncols) continue;
        const int n = jj / g.L, l = jj - n * g.L;
        const long long yo = (long long)n * g.yn + (long long)grp * M * g.L + l;
        float *dst = ws ? ws + (long long)part * g.ytot : y;
#pragma unroll
        for (int i = 0; i < MR; i++) {
            const int m = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
            if (m >= M) continue;
            const float bb = !ws && bias ? bias[grp * M + m] : 0.f;
            float v[4];
#pragma unroll
            for (int e = 0; e < 4; e++) v[e] = acc[i][4 * h + e] + bb;
            if (vec && jj + 3 < g.ncols) {
                *(float4 *)(dst + yo + (long long)m * g.L) = make_float4(v[0], v[1], v[2], v[3]);
                continue;
            }
            for (int e = 0; e < 4 && jj + e < g.ncols; e++) { // a tail that may cross samples
                int je = jj + e, ne = je / g.L, le = je - ne * g.L;
                dst[(long long)ne * g.yn + (long long)(grp * M + m) * g.L + le] = v[e];
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(256, 1)
    em_conv_ig_f32(const float *x, const float *w, const float *b, float *y, float *ws,
                   const int2 *taps, convig g)
{
    conv_f32<8>(x, w, b, y, ws, taps, g);
}

extern "C" __global__ void __launch_bounds__(256, 1)
    em_conv_ig_f32_m64(const float *x, const float *w, const float *b, float *y, float *ws,
                       const int2 *taps, convig g)
{
    conv_f32<4>(x, w, b, y, ws, taps, g);
}

// y[i] = bias[channel] + the split-K parts' sums, added in part order (f32).
extern "C" __global__ void em_conv_ig_sum_f32(const float *ws, const float *bias, float *y, convig g,
                                              int cy)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < g.ytot; i += blockDim.x * gridDim.x) {
        float acc = 0.f;
        for (int p = 0; p < g.splits; p++) acc += ws[(long long)p * g.ytot + i];
        if (bias) acc += bias[(i / g.L) % cy];
        y[i] = acc;
    }
}
