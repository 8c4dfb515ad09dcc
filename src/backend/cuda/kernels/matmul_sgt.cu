// The exact f32 matmul and convolution fed by the copy engine (em_mm_sgt_*, em_conv_sgt_f32_i2c,
// em_conv_splitk_f32), sm_90a only: part of the matmul unit, in a file of its own so that
// scripts/cuda_emu/sgt_emu.cpp runs it on the CPU as NVRTC compiles it.
#include "matmul.cuh"
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) // sm_90a: the bulk tensor copies, mbarriers, setmaxnreg
#include "matmul_ep.cuh"
#include "matmul_tw.cuh"

// ---- exact f32 on the copy engine: em_mm_sgt_<a><b> --------------------------------------------
// Exact f32 products (FFMA, each output summed in k order as em_mm_sgemm_v4 does) whose operands
// arrive by bulk tensor copies, so the 8 consumer warps issue nothing but shared loads and FFMAs
// in the k loop: no global loads, no staging registers, no transposing stores, no block barrier.
// Warpgroup 0's first thread is the producer (tw_produce: 4 stages of 32 k, full / empty
// mbarriers), warpgroups 1 and 2 the consumers (setmaxnreg: 40 and 232 registers);
// the grid holds one block per multiprocessor, each walking output tiles of 128 x 128 in
// tw_tile's order, so the next tile's stages fill while the consumers store the last one.
// Stage: A's tile at 0, B's at 16 KiB. A k-contiguous operand (a = k: A [M][K]; b = k: B [N][K])
// comes in one box of 32 k x 128 rows with the 128-byte swizzle (row r's 16-byte chunk q at
// q ^ (r % 8)); an m- or n-contiguous one (a = m: A [K][M]; b = n: B [K][N]) in one unswizzled
// box of 128 x 32 k, [k][128]. Thread (ty, tx) of the 16 x 16 grid (a warp: 4 rows x 8 columns
// of it) owns 8 rows and 8 columns: rows ty*4 + 0..3 and 64 + ty*4 + 0..3 from an m-contiguous A
// (float4 along m), rows ty + 16 i from a k-contiguous one (float4 of 4 k steps per row, the
// swizzle sending a warp's 4 rows to 4 different chunks: one wavefront); likewise the columns.
#define SGT_STAGE 32768

// The thread's 8 rows (r: ty for A, tx for B) of 4 k steps 4 q .. 4 q + 3 from a stage tile t, KC:
// the operand is k-contiguous. v[i][kk]: row i, k step 4 q + kk.
template <int KC>
__device__ __forceinline__ void sgt_frag(float (&v)[8][4], const unsigned char *t, int q, int r)
{
    if (KC) {
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const float4 x = *(const float4 *)(t + r * 128 + i * 2048 + ((q ^ (r & 7)) << 4));
            v[i][0] = x.x, v[i][1] = x.y, v[i][2] = x.z, v[i][3] = x.w;
        }
    } else {
#pragma unroll
        for (int kk = 0; kk < 4; kk++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const float4 x = *(const float4 *)(t + (q * 4 + kk) * 512 + h * 256 + r * 16);
                v[4 * h][kk] = x.x, v[4 * h + 1][kk] = x.y, v[4 * h + 2][kk] = x.z;
                v[4 * h + 3][kk] = x.w;
            }
    }
}

// The kernels' body: an M x N output in tiles of 128 x 128, K in k tiles of 32, `bytes` per stage,
// each tile's k tiles in `splits` ranges (tw_unit) summed separately. load(stage address, full
// mbarrier, mt, nt, kt) issues a stage's copies (A's tile at 0, B's at 16 KiB); store(acc, mt,
// nt, ty, tx, s) writes the thread's 8 x 8 sums of range s of a tile.
template <int AK, int BK, typename Load, typename Store>
__device__ void sgt_run(int M, int N, int K, unsigned bytes, int splits, Load &&load, Store &&store)
{
    unsigned char *const tws = tw_dyn_smem();
    const unsigned base = tw_start(SGT_STAGE);
    const unsigned char *sm = tws + (base - smem_u32(tws));
    const int tid = threadIdx.x;
    const int tm = (M + 127) / 128, tn = (N + 127) / 128, tiles = tm * tn, kts = (K + 31) / 32;
    if (tid < 128) {
        tw_regs_producer();
        if (tid == 0) tw_produce(base, SGT_STAGE, bytes, tm, tn, kts, load, splits);
        return;
    }
    tw_regs_consumer();
    const int w = (tid >> 5) - 4, lane = tid & 31;
    const int tx = (w & 1) * 8 + (lane & 7), ty = (w >> 1) * 4 + (lane >> 3);
    const unsigned full0 = base + TW_STAGES * SGT_STAGE, empty0 = full0 + 8 * TW_STAGES;
    int it = 0;
    for (int u = blockIdx.x; u < tiles * splits; u += gridDim.x) {
        int mt, nt, k0, k1;
        tw_unit(u, tm, tn, kts, splits, mt, nt, k0, k1);
        float acc[8][8];
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int j = 0; j < 8; j++) acc[i][j] = 0.f;
        for (int kt = k0; kt < k1; kt++, it++) {
            const int s = it % TW_STAGES;
            mbar_wait(full0 + 8 * s, (it / TW_STAGES) & 1);
            const unsigned char *st = sm + s * SGT_STAGE;
#pragma unroll
            for (int q = 0; q < 8; q++) {
                float a[8][4], b[8][4];
                sgt_frag<AK>(a, st, q, ty);
                sgt_frag<BK>(b, st + 16384, q, tx);
#pragma unroll
                for (int kk = 0; kk < 4; kk++)
#pragma unroll
                    for (int i = 0; i < 8; i++)
#pragma unroll
                        for (int j = 0; j < 8; j++) acc[i][j] = fmaf(a[i][kk], b[j][kk], acc[i][j]);
            }
            __syncwarp();
            if (lane == 0) mbar_arrive(empty0 + 8 * s);
        }
        store(acc, mt, nt, ty, tx, u % splits);
    }
}

// sgt_matmul's store of one tile (with the matmul_bias_act epilogue).
template <int AK, int BK>
__device__ __forceinline__ void sgt_store(const float (&acc)[8][8], float *c, int M, int N,
                                          const mmep &ep, int mt, int nt, int ty, int tx)
{
    const i64 m0 = (i64)mt * 128, n0 = (i64)nt * 128;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const i64 row = m0 + (AK ? ty + 16 * i : (i >> 2) * 64 + ty * 4 + (i & 3));
        if (row >= M) continue;
        float *cr = c + row * N;
        if constexpr (BK) {
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const i64 col = n0 + tx + 16 * j;
                if (col < N)
                    cr[col] = ep.on ? ep_apply<2>(ep, acc[i][j], col, row * N + col) : acc[i][j];
            }
        } else
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const i64 col = n0 + h * 64 + tx * 4;
            float v[4];
#pragma unroll
            for (int e = 0; e < 4; e++)
                v[e] = ep.on && col + e < N ? ep_apply<2>(ep, acc[i][4 * h + e], col + e, row * N + col + e)
                                            : acc[i][4 * h + e];
            if ((N & 3) == 0 && col + 3 < N)
                *(float4 *)(cr + col) = make_float4(v[0], v[1], v[2], v[3]);
            else
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (col + e < N) cr[col + e] = v[e];
        }
    }
}

template <int AK, int BK>
__device__ void sgt_matmul(const em_tmap *ma, const em_tmap *mb, float *c, int M, int N, int K,
                           const mmep &ep)
{
    auto fetch = [&](unsigned sa, unsigned full, int mt, int nt, int kt) {
        const int m0 = mt * 128, n0 = nt * 128, k0 = kt * 32;
        if (AK)
            tma_load_2d(sa, ma, k0, m0, full);
        else
            tma_load_2d(sa, ma, m0, k0, full);
        if (BK)
            tma_load_2d(sa + 16384, mb, k0, n0, full);
        else
            tma_load_2d(sa + 16384, mb, n0, k0, full);
    };
    auto put = [&](const float (&acc)[8][8], int mt, int nt, int ty, int tx, int) {
        sgt_store<AK, BK>(acc, c, M, N, ep, mt, nt, ty, tx);
    };
    sgt_run<AK, BK>(M, N, K, SGT_STAGE, 1, fetch, put);
}

// em_mm_sgt_<a><b>: a = k (A [M][K]) or m ([K][M]), b = k (B [N][K]) or n ([K][N]).
TMAP_F32_KERNEL(em_mm_sgt_kn, sgt_matmul<1, 0>)
TMAP_F32_KERNEL(em_mm_sgt_kk, sgt_matmul<1, 1>)
TMAP_F32_KERNEL(em_mm_sgt_mn, sgt_matmul<0, 0>)
TMAP_F32_KERNEL(em_mm_sgt_mk, sgt_matmul<0, 1>)

// em_conv_sgt_f32_i2c: the exact f32 convolution (2-D, stride 1, C a multiple of 32) on sgt_run,
// as tw_conv's implicit GEMM: A is w channels-last as [Cout][Kh Kw C] (k-contiguous, boxes of 32
// k x 128 rows), B for k tile kt (tap kt / (C / 32), 32 channels from c0) and column tile nt comes
// from x channels-last [N][H][W][C] (128 bytes a pixel, the 128-byte swizzle, the padding
// zero-filled by the copy engine) in the copy engine's im2col mode: 128 consecutive output pixels
// (n, oh, ow) from p0 = 128 nt, across rows and images: the load starts at (c0, ow - pw, oh - ph,
// n) of p0's pixel and walks the map's bounding box (lower corner -p, upper p_hi - d (k - 1): one
// position per output pixel), each pixel read at the tap's offsets (kw dw, kh dh). Each output is
// summed over taps, then channels, in k order; the bias added after. y [N][Cout][OH][OW].
// With g.splits > 1 (split-K, for tile counts that leave the last wave of multiprocessors half
// idle) each tile's k tiles come in g.splits ranges (tw_unit): range 0's sums go to y, range s's
// to ws + (s - 1) N Cout OH OW, and em_conv_splitk_f32 adds them up with the bias.
__device__ void sgt_conv(const em_tmap *ma, const em_tmap *mb, float *y, float *ws,
                         const float *bias, const twconv &g)
{
    const int plane = g.OH * g.OW;
    auto fetch = [&](unsigned sa, unsigned full, int mt, int nt, int kt) {
        const int tap = kt / g.cpt, kh = tap / g.KW;
        const int c0 = (kt - tap * g.cpt) * 32, kw = tap - kh * g.KW;
        tma_load_2d(sa, ma, kt * 32, mt * 128, full);
        const int p0 = nt * 128, n = p0 / plane, r = p0 - n * plane, oh = r / g.OW;
        tma_load_im2col(sa + 16384, mb, c0, r - oh * g.OW - g.pw, oh - g.ph, n,
                        (unsigned short)(kw * g.dw), (unsigned short)(kh * g.dh), full);
    };
    auto put = [&](const float (&acc)[8][8], int mt, int nt, int ty, int tx, int s) {
        float *dst = s ? ws + (long long)(s - 1) * g.npix * g.Cout : y;
        long long off[8]; // column j's offset in y of output channel 0, or -1 outside
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int p = nt * 128 + tx + 16 * j, n = p / plane;
            off[j] = p < g.npix ? (long long)n * g.Cout * plane + (p - n * plane) : -1;
        }
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int m = mt * 128 + ty + 16 * i;
            if (m >= g.Cout) continue;
            const float b = bias && g.splits == 1 ? bias[m] : 0.f;
#pragma unroll
            for (int j = 0; j < 8; j++)
                if (off[j] >= 0) dst[off[j] + (long long)m * plane] = acc[i][j] + b;
        }
    };
    // g.ntiles column tiles, g.kts k tiles (the host keeps g.ntiles * 128 within int)
    sgt_run<1, 1>(g.Cout, g.ntiles * 128, g.kts * 32, 16384 + 128 * 128, g.splits, fetch, put);
}

extern "C" __global__ void __launch_bounds__(384, 1)
    em_conv_sgt_f32_i2c(const __grid_constant__ em_tmap ma, const __grid_constant__ em_tmap mb,
                        float *y, float *ws, const float *bias, twconv g)
{
    sgt_conv(&ma, &mb, y, ws, bias, g);
}

// em_conv_sgt_f32_i2c's split-K sums: y = ((y + ws[0]) + ws[1] ...) + bias, over y's n = N Cout OH
// OW elements (grid-stride), the ranges added in k order.
extern "C" __global__ void em_conv_splitk_f32(float *y, const float *ws, const float *bias,
                                              twconv g)
{
    const long long n = (long long)g.npix * g.Cout, plane = (long long)g.OH * g.OW;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x) {
        float v = y[i];
        for (int s = 1; s < g.splits; s++) v += ws[(s - 1) * n + i];
        y[i] = bias ? v + bias[i / plane % g.Cout] : v;
    }
}
#endif
