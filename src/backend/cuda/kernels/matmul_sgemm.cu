// The exact f32 matmul kernels (em_mm_sgemm, em_mm_sgemm_v4_*): part of the matmul unit, in a
// file of its own so that scripts/cuda_emu/sgemm_emu.cpp runs it on the CPU as NVRTC compiles it.
#include "matmul.cuh"
#include "matmul_ep.cuh"

// ---- f32: 128 x 128 block tiles, 8 x 8 outputs per thread, f32 accumulation ----------------
// Thread (ty, tx) owns rows ty*4..+3 and 64+ty*4..+3, columns tx*4..+3 and 64+tx*4..+3.

// The thread's 8 values of A and of B for one k step, from row k of the shared tiles (k-major);
// sw: the row's column swizzle (sgemm_v4), XORed into each float4's column.
template <int H = 64>
__device__ __forceinline__ void sg_frag(float (&av)[8], float (&bv)[8], const float *as,
                                        const float *bs, int ty, int tx, int sw = 0)
{
    const float4 a0 = *(const float4 *)&as[(ty * 4) ^ sw],
                 a1 = *(const float4 *)&as[(H + ty * 4) ^ sw];
    const float4 b0 = *(const float4 *)&bs[(tx * 4) ^ sw],
                 b1 = *(const float4 *)&bs[(H + tx * 4) ^ sw];
    av[0] = a0.x, av[1] = a0.y, av[2] = a0.z, av[3] = a0.w;
    av[4] = a1.x, av[5] = a1.y, av[6] = a1.z, av[7] = a1.w;
    bv[0] = b0.x, bv[1] = b0.y, bv[2] = b0.z, bv[3] = b0.w;
    bv[4] = b1.x, bv[5] = b1.y, bv[6] = b1.z, bv[7] = b1.w;
}

__device__ __forceinline__ void sg_fma(float (&acc)[8][8], const float (&av)[8],
                                       const float (&bv)[8])
{
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
}

// One k step: the thread's 8 x 8 products from row k of the shared A and B tiles.
template <int H = 64>
__device__ __forceinline__ void sg_products(float (&acc)[8][8], const float *as, const float *bs,
                                            int ty, int tx, int sw = 0)
{
    float av[8], bv[8];
    sg_frag<H>(av, bv, as, bs, ty, tx, sw);
    sg_fma(acc, av, bv);
}

// The thread's outputs into contiguous cb [M][N] (float4 where N allows), inside the edges.
template <int H = 64>
__device__ __forceinline__ void sg_store(float (&acc)[8][8], float *cb, i64 m0, i64 n0, i64 M,
                                         i64 N, int ty, int tx, const mmidx &s, i64 bt)
{
    const bool vec = (N & 3) == 0;
    if (s.ep.on) // matmul_bias_act: the epilogue on the values before they are stored
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const i64 row = m0 + (i < 4 ? ty * 4 + i : H + ty * 4 + i - 4);
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const i64 col = n0 + (j >> 2) * H + tx * 4 + (j & 3);
                if (row < M && col < N)
                    acc[i][j] = ep_apply<2>(s.ep, acc[i][j], col, (bt * M + row) * N + col);
            }
        }
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const i64 row = m0 + (i < 4 ? ty * 4 + i : H + ty * 4 + i - 4);
        if (row >= M) continue;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const i64 col = n0 + h * H + tx * 4;
            float *p = cb + row * N + col;
            if (vec && col + 3 < N)
                *(float4 *)p = make_float4(acc[i][4 * h], acc[i][4 * h + 1], acc[i][4 * h + 2],
                                           acc[i][4 * h + 3]);
            else
                for (int j = 0; j < 4; j++)
                    if (col + j < N) p[j] = acc[i][4 * h + j];
        }
    }
}

// em_mm_sgemm: any strides; the loads follow whichever of each operand's strides is 1 so they
// coalesce.
extern "C" __global__ void __launch_bounds__(256)
    em_mm_sgemm(const float *a, const float *b, float *c, mmidx s)
{
    __shared__ __align__(16) float As[2][8][128];
    __shared__ __align__(16) float Bs[2][8][128];
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const i64 M = s.M, N = s.N, K = s.K;
    const i64 m0 = (i64)blockIdx.y * 128, n0 = (i64)blockIdx.x * 128;
    const bool a_m_fast = s.sam == 1 && s.sak != 1, b_n_fast = s.sbn == 1 || s.sbk != 1;
    for (i64 bt = blockIdx.z; bt < s.nbatch; bt += gridDim.z) {
        i64 ao, bo;
        batch_offsets(s, bt, ao, bo);
        float ra[4], rb[4];
        auto fetch = [&](i64 k0) {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int idx = tid + i * 256;
                int m = a_m_fast ? (idx & 127) : (idx >> 3), k = a_m_fast ? (idx >> 7) : (idx & 7);
                i64 gm = m0 + m, gk = k0 + k;
                ra[i] = gm < M && gk < K ? a[ao + gm * s.sam + gk * s.sak] : 0.f;
                int n = b_n_fast ? (idx & 127) : (idx >> 3), kb = b_n_fast ? (idx >> 7) : (idx & 7);
                i64 gn = n0 + n, gkb = k0 + kb;
                rb[i] = gn < N && gkb < K ? b[bo + gkb * s.sbk + gn * s.sbn] : 0.f;
            }
        };
        auto store = [&](int buf) {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int idx = tid + i * 256;
                int m = a_m_fast ? (idx & 127) : (idx >> 3), k = a_m_fast ? (idx >> 7) : (idx & 7);
                As[buf][k][m] = ra[i];
                int n = b_n_fast ? (idx & 127) : (idx >> 3), kb = b_n_fast ? (idx >> 7) : (idx & 7);
                Bs[buf][kb][n] = rb[i];
            }
        };
        float acc[8][8];
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int j = 0; j < 8; j++) acc[i][j] = 0.f;
        fetch(0);
        store(0);
        __syncthreads();
        int buf = 0;
        for (i64 k0 = 0; k0 < K; k0 += 8) {
            bool more = k0 + 8 < K;
            if (more) fetch(k0 + 8); // global loads in flight during the products
#pragma unroll
            for (int k = 0; k < 8; k++) sg_products(acc, As[buf][k], Bs[buf][k], ty, tx);
            if (more) store(buf ^ 1);
            __syncthreads();
            buf ^= 1;
        }
        sg_store(acc, c + bt * M * N, m0, n0, M, N, ty, tx, s, bt);
        __syncthreads();
    }
}

// ---- f32 with 16-byte loads: T x T x 16 block tiles (T = 128: 256 threads; T = 64: 64 threads),
// 8 x 8 outputs per thread ------------------------------------------------------------------------
// For operands whose contiguous dim, other strides and batch strides are multiples of 4 floats:
// each thread reads T / 64 (T = 128: two) float4 of A and as many of B per k tile along each
// operand's contiguous dim
// (AK: A is k-contiguous, else m-contiguous; BK: B is k-contiguous, else n-contiguous), keeps
// them in registers while the current tile's products run, then stores them into the other
// shared buffer. Shared tiles are [16][T + 4] k-major (rows padded; a k-contiguous operand is
// transposed by the stores). Each output sums its products in k order, as em_mm_sgemm does.
#define SG_BK 16 // even: sgemm_v4 alternates two fragment buffers over the k steps
template <int AK, int BK, int T>
__device__ __forceinline__ void sgemm_v4(const float *a, const float *b, float *c, const mmidx &s)
{
    constexpr int TX = T / 8, NT = TX * TX, P = T + 4; // threads per row of the grid; in all
    __shared__ __align__(16) float As[2][SG_BK][P];
    __shared__ __align__(16) float Bs[2][SG_BK][P];
    // Each warp takes 4 rows by 8 columns of the thread grid, so a k step's shared reads are 4
    // distinct float4 of A and 8 of B per warp (one 128-byte wavefront each; a warp spanning 2
    // rows by 16 columns needed 2 for B). T = 64 is one warp per 4 grid rows either way.
    constexpr int WX = TX / 8; // warps per row of the thread grid
    const unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int tx = (w % WX) * 8 + lane % 8, ty = (w / WX) * 4 + lane / 8;
    const i64 M = s.M, N = s.N, K = s.K;
    // T = 64 (several blocks per multiprocessor): tiles in groups of 8 tile rows, column by
    // column inside a group, so the blocks resident together share A and B rows in L2 (on
    // T = 128, one block per multiprocessor, it cost more than it saved and is left out)
    i64 m0 = (i64)blockIdx.y * T, n0 = (i64)blockIdx.x * T;
    if (T == 64) {
        const unsigned nx = gridDim.x, pid = blockIdx.y * nx + blockIdx.x;
        const unsigned first = pid / (8 * nx) * 8, r = pid % (8 * nx);
        const unsigned gm = gridDim.y - first < 8 ? gridDim.y - first : 8;
        m0 = (i64)(first + r % gm) * T, n0 = (i64)(r / gm) * T;
    }
    // this thread's float4 of each tile: (row, k) for a k-contiguous operand, else (k, col)
    constexpr int NL = SG_BK * T / 4 / NT, Q = SG_BK / 4, C4 = T / 4; // per thread; k run; row
    int ar[NL], ak[NL], br[NL], bk[NL];
#pragma unroll
    for (int i = 0; i < NL; i++) {
        // unsigned index arithmetic: with signed ints ptxas kept 219-233 registers, not 153-168
        const unsigned idx = threadIdx.x + i * NT;
        ar[i] = AK ? idx / Q : (idx % C4) * 4;
        ak[i] = AK ? (idx % Q) * 4 : idx / C4;
        br[i] = BK ? idx / Q : (idx % C4) * 4;
        bk[i] = BK ? (idx % Q) * 4 : idx / C4;
    }
    // pointer steps per k tile
    const i64 sta = AK ? SG_BK : SG_BK * s.sak, stb = BK ? SG_BK : SG_BK * s.sbk;
    for (i64 bt = blockIdx.z; bt < s.nbatch; bt += gridDim.z) {
        i64 ao, bo;
        batch_offsets(s, bt, ao, bo);
        // running pointers to this thread's float4 of the next tile; rows past M or N read zero
        const float *pa[NL], *pb[NL];
        bool va[NL], vb[NL];
#pragma unroll
        for (int i = 0; i < NL; i++) {
            const i64 gm = m0 + ar[i], gn = n0 + br[i];
            va[i] = gm < M;
            vb[i] = gn < N;
            pa[i] = a + ao + (va[i] ? (AK ? gm * s.sam + ak[i] : ak[i] * s.sak + gm) : 0);
            pb[i] = b + bo + (vb[i] ? (BK ? gn * s.sbn + bk[i] : bk[i] * s.sbk + gn) : 0);
        }
        float4 ra[NL], rb[NL];
        auto fetch = [&](i64 k0) {
#pragma unroll
            for (int i = 0; i < NL; i++) {
                const float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
                ra[i] = va[i] && k0 + ak[i] < K ? *(const float4 *)pa[i] : z;
                rb[i] = vb[i] && k0 + bk[i] < K ? *(const float4 *)pb[i] : z;
                pa[i] += sta;
                pb[i] += stb;
            }
        };
        // The pipelined 64-tile kernel (PIPE, below) stores column c of row k at c ^ (k & SW)
        // (whole float4 keep their place): a warp's transposing stores of A write rows k, k + 4,
        // k + 8, k + 12 at 8 columns each, and with rows of T + 4 floats rows k and k + 8 fall
        // on the same banks (two wavefronts per store), which SW = 8 avoids. On the other kernels
        // the XORed addresses' extra instructions cost more than the conflicts they remove, so
        // there SW = 0 and the addresses are plain.
        constexpr bool PIPE = T == 64 && AK && !BK;
        constexpr int SW = PIPE ? 8 : 0;
        auto store = [&](int buf) {
#pragma unroll
            for (int i = 0; i < NL; i++) {
                if (AK) {
                    const int c = ar[i] ^ (ak[i] & SW); // ak[i] .. + 3 share k & 8
                    As[buf][ak[i]][c] = ra[i].x;
                    As[buf][ak[i] + 1][c] = ra[i].y;
                    As[buf][ak[i] + 2][c] = ra[i].z;
                    As[buf][ak[i] + 3][c] = ra[i].w;
                } else
                    *(float4 *)&As[buf][ak[i]][ar[i] ^ (ak[i] & SW)] = ra[i];
                if (BK) {
                    const int c = br[i] ^ (bk[i] & SW);
                    Bs[buf][bk[i]][c] = rb[i].x;
                    Bs[buf][bk[i] + 1][c] = rb[i].y;
                    Bs[buf][bk[i] + 2][c] = rb[i].z;
                    Bs[buf][bk[i] + 3][c] = rb[i].w;
                } else
                    *(float4 *)&Bs[buf][bk[i]][br[i] ^ (bk[i] & SW)] = rb[i];
            }
        };
        float acc[8][8];
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int j = 0; j < 8; j++) acc[i][j] = 0.f;
        fetch(0);
        store(0);
        __syncthreads();
        // T = 64 with A k-contiguous and B n-contiguous (a @ b of row-major matrices): the values
        // of step k + 1 are read from shared memory while step k's products run, and the next
        // tile is stored and the barrier passed before the last step's products, so the first
        // step's reads wait behind them rather than stall every warp after the barrier (at the
        // same number of resident blocks). The other layouts' 64-tile kernels would need enough
        // registers with it to lose resident blocks, which slows the x @ W^T products that take
        // them, so they keep the plain order; so does T = 128, where ptxas schedules the
        // one-block kernel's reads better itself.
        float fa[2][8], fb[2][8];
        if (PIPE) sg_frag<T / 2>(fa[0], fb[0], As[0][0], Bs[0][0], ty, tx);
        int buf = 0;
        for (i64 k0 = 0; k0 < K; k0 += SG_BK) {
            const bool more = k0 + SG_BK < K;
            if (more) fetch(k0 + SG_BK); // global loads in flight during the products
            if (PIPE) {
#pragma unroll
                for (int k = 0; k < SG_BK; k++) {
                    if (k + 1 < SG_BK)
                        sg_frag<T / 2>(fa[(k + 1) & 1], fb[(k + 1) & 1], As[buf][k + 1],
                                       Bs[buf][k + 1], ty, tx, (k + 1) & SW);
                    else if (more) {
                        store(buf ^ 1);
                        __syncthreads();
                        sg_frag<T / 2>(fa[0], fb[0], As[buf ^ 1][0], Bs[buf ^ 1][0], ty, tx);
                    }
                    sg_fma(acc, fa[k & 1], fb[k & 1]);
                }
            } else {
#pragma unroll
                for (int k = 0; k < SG_BK; k++)
                    sg_products<T / 2>(acc, As[buf][k], Bs[buf][k], ty, tx, k & SW);
                if (more) store(buf ^ 1);
                __syncthreads();
            }
            buf ^= 1;
        }
        sg_store<T / 2>(acc, c + bt * M * N, m0, n0, M, N, ty, tx, s, bt);
        __syncthreads();
    }
}

// One block per multiprocessor: its 157-159 registers stay unspilled (2 blocks would cap it
// at 128 and spill: slower than one block, as are k tiles of 8; bench/RESULTS.md).
// The 64 x 64 tiles (two warps) are for products with few 128 x 128 tiles: several blocks share
// a multiprocessor.
#define SGEMM_V4(name, AK, BK)                                                                     \
    extern "C" __global__ void __launch_bounds__(256, 1)                                           \
        name(const float *a, const float *b, float *c, mmidx s)                                    \
    {                                                                                              \
        sgemm_v4<AK, BK, 128>(a, b, c, s);                                                         \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(64) name##_t64(const float *a, const float *b,    \
                                                                float *c, mmidx s)                 \
    {                                                                                              \
        sgemm_v4<AK, BK, 64>(a, b, c, s);                                                          \
    }
SGEMM_V4(em_mm_sgemm_v4_kn, 1, 0)
SGEMM_V4(em_mm_sgemm_v4_kk, 1, 1)
SGEMM_V4(em_mm_sgemm_v4_mn, 0, 0)
SGEMM_V4(em_mm_sgemm_v4_mk, 0, 1)
