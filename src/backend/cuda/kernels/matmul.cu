// Fast matmul kernels: tensor cores (mma.sync m16n8k16) for f16 and bf16 with f32 accumulation,
// and a register-blocked f32 kernel (struct mmidx: matmul.cuh; the epilogue's activations:
// ew_scalar.cuh).
// C[b] = A[b] . B[b]: A [M, K], B [K, N], C [M, N] contiguous; batch offsets from mmidx.
#include "ew_scalar.cuh"
#include "matmul.cuh"

#define TC_BM     128
#define TC_BK     32
#define TC_STAGES 4
#define TC_PAD_K  40  // pitch (halves) of a tile stored [128][32]: 80 B, ldmatrix rows hit 8 banks
#define TC_PAD_MN 136 // pitch (halves) of a tile stored [32][128]: 272 B, likewise
// A stage holds the A tile (128 x 32) and the B tile (32 x BN, or BN x 32 when B is k-contiguous).
#define TC_B_HALVES(BN)     ((BN)*TC_PAD_K > 32 * ((BN) + 8) ? (BN)*TC_PAD_K : 32 * ((BN) + 8))
#define TC_STAGE_HALVES(BN) (128 * TC_PAD_K + TC_B_HALVES(BN))

__device__ __forceinline__ unsigned smem_u32(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void cp_async16(unsigned dst, const void *src, bool valid)
{
    int n = valid ? 16 : 0; // 0 bytes read: the 16 bytes are zero-filled
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}

__device__ __forceinline__ void ldsm_x4(unsigned addr, unsigned &r0, unsigned &r1, unsigned &r2,
                                        unsigned &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

__device__ __forceinline__ void ldsm_x4_t(unsigned addr, unsigned &r0, unsigned &r1, unsigned &r2,
                                          unsigned &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

template <int BF>
__device__ __forceinline__ void mma16816(float *c, const unsigned *a, const unsigned *b)
{
    if (BF)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Two floats rounded to nearest even, packed low = x, high = y.
template <int BF> __device__ __forceinline__ unsigned pack2(float x, float y)
{
    unsigned r;
    if (BF)
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(y), "f"(x));
    else
        asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(y), "f"(x));
    return r;
}

template <int BF> __device__ __forceinline__ float half_to_f(unsigned short h)
{
    if (BF) return __uint_as_float((unsigned)h << 16);
    float f;
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(h));
    return f;
}

template <int BF> __device__ __forceinline__ unsigned short f_to_half(float f)
{
    unsigned short h;
    if (BF)
        asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(h) : "f"(f));
    else
        asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(h) : "f"(f));
    return h;
}

// ---- matmul_bias_act's epilogue (struct mmep; e.on == 0 for a plain product) -----------------
// In f32 before the store's rounding: bias[col] added (bias in the output type TY: 0 f16, 1 bf16,
// 2 f32), the pre-activation stored at element idx of pre when asked for, then the activation
// with the unary kernels' definitions (unary_f), so the value matches em_add then the activation
// up to the roundings the fused form skips.
__device__ __noinline__ float ep_act(int act, float v)
{
    switch (act) {
    case 1: return unary_f(OP_RELU, v, 0.f, 0.f);
    case 2: return unary_f(OP_GELU, v, 0.f, 0.f);
    case 3: return unary_f(OP_GELU_TANH, v, 0.f, 0.f);
    case 4: return unary_f(OP_SILU, v, 0.f, 0.f);
    default: return v;
    }
}

template <int TY> __device__ __forceinline__ float ep_apply(const mmep &e, float v, i64 col, i64 idx)
{
    if (e.bias) {
        if (TY == 2)
            v += ((const float *)e.bias)[col * e.bs];
        else
            v += half_to_f<TY>(((const unsigned short *)e.bias)[col * e.bs]);
    }
    if (e.pre) {
        if (TY == 2)
            ((float *)e.pre)[idx] = v;
        else
            ((unsigned short *)e.pre)[idx] = f_to_half<TY>(v);
    }
    return e.act ? ep_act(e.act, v) : v;
}

// The epilogue as its own pass over a finished product c (paths whose kernels do not apply it):
// c = act(c + bias) in place, f32 arithmetic for f32/f16/bf16, f64 for f64.
template <int TY> __device__ __forceinline__ void mm_epi(void *c, const mmidx &s)
{
    GRID_LOOP(s.nbatch * s.M * s.N)
    {
        const i64 col = i % s.N;
        if (TY == 2) {
            float *p = (float *)c + i;
            *p = ep_apply<2>(s.ep, *p, col, i);
        } else {
            unsigned short *p = (unsigned short *)c + i;
            *p = f_to_half<TY>(ep_apply<TY>(s.ep, half_to_f<TY>(*p), col, i));
        }
    }
}
extern "C" __global__ void em_mm_epi_f16(void *c, mmidx s)
{
    mm_epi<0>(c, s);
}
extern "C" __global__ void em_mm_epi_bf16(void *c, mmidx s)
{
    mm_epi<1>(c, s);
}
extern "C" __global__ void em_mm_epi_f32(void *c, mmidx s)
{
    mm_epi<2>(c, s);
}
extern "C" __global__ void em_mm_epi_f64(double *c, mmidx s)
{
    const mmep &e = s.ep;
    GRID_LOOP(s.nbatch * s.M * s.N)
    {
        double v = c[i];
        if (e.bias) v += ((const double *)e.bias)[(i % s.N) * e.bs];
        if (e.pre) ((double *)e.pre)[i] = v;
        const int op = e.act == 1 ? OP_RELU : e.act == 2 ? OP_GELU : e.act == 3 ? OP_GELU_TANH : OP_SILU;
        c[i] = e.act ? unary_d(op, v, 0.0, 0.0) : v;
    }
}

__device__ __forceinline__ void batch_offsets(const mmidx &s, i64 bt, i64 &ao, i64 &bo)
{
    ao = 0;
    bo = 0;
    i64 r = bt;
    for (int d = s.R - 1; d >= 0; d--) {
        i64 q = r / s.bshape[d], cc = r - q * s.bshape[d];
        ao += cc * s.ast[d];
        bo += cc * s.bst[d];
        r = q;
    }
}

// AT: A is stored with m contiguous (sam == 1, lda = sak), else k contiguous (lda = sam).
// BT: B is stored with k contiguous (sbk == 1, ldb = sbn), else n contiguous (ldb = sbk).
// The host checks: contiguous dims multiples of 8, leading strides multiples of 8, 16-byte
// aligned bases, so every 16-byte chunk is wholly inside or outside the matrix.
// WN: the warp tile's width (32 or 64), so block tiles are 128 x 4 WN; warps 2 x 4, each 64 x WN.
template <int BF, int AT, int BT, int WN>
__device__ void tc_matmul(const unsigned short *a, const unsigned short *b, unsigned short *c,
                          const mmidx &s)
{
    extern __shared__ __align__(16) unsigned short smem[];
    constexpr int BN = 4 * WN, NJ = WN / 8, PB = BN + 8;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp >> 2, wn = warp & 3;
    const i64 M = s.M, N = s.N, K = s.K;
    const i64 lda = AT ? s.sak : s.sam, ldb = BT ? s.sbn : s.sbk;
    const i64 m0 = (i64)blockIdx.y * TC_BM, n0 = (i64)blockIdx.x * BN;
    const int ktiles = (int)((K + TC_BK - 1) / TC_BK);
    for (i64 bt = blockIdx.z; bt < s.nbatch; bt += gridDim.z) {
        i64 ao, bo;
        batch_offsets(s, bt, ao, bo);
        const unsigned short *ab = a + ao, *bb = b + bo;
        float acc[4][NJ][4];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < NJ; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;

        auto load_stage = [&](int stage, int kt) {
            unsigned short *As = smem + stage * TC_STAGE_HALVES(BN);
            unsigned short *Bs = As + 128 * TC_PAD_K;
            const i64 k0 = (i64)kt * TC_BK;
#pragma unroll
            for (int i = 0; i < 2; i++) { // A: 512 chunks of 8 halves
                int ch = tid + i * 256;
                if (!AT) {
                    int row = ch >> 2, kc = (ch & 3) * 8;
                    i64 m = m0 + row, k = k0 + kc;
                    bool v = m < M && k < K;
                    cp_async16(smem_u32(As + row * TC_PAD_K + kc), v ? ab + m * lda + k : ab, v);
                } else {
                    int row = ch >> 4, mc = (ch & 15) * 8;
                    i64 k = k0 + row, m = m0 + mc;
                    bool v = m < M && k < K;
                    cp_async16(smem_u32(As + row * TC_PAD_MN + mc), v ? ab + k * lda + m : ab, v);
                }
            }
#pragma unroll
            for (int i = 0; i < BN / 64; i++) { // B: 4 BN chunks of 8 halves
                int ch = tid + i * 256;
                if (!BT) {
                    int row = ch / (BN / 8), nc = (ch % (BN / 8)) * 8;
                    i64 k = k0 + row, n = n0 + nc;
                    bool v = n < N && k < K;
                    cp_async16(smem_u32(Bs + row * PB + nc), v ? bb + k * ldb + n : bb, v);
                } else {
                    int row = ch >> 2, kc = (ch & 3) * 8;
                    i64 n = n0 + row, k = k0 + kc;
                    bool v = n < N && k < K;
                    cp_async16(smem_u32(Bs + row * TC_PAD_K + kc), v ? bb + n * ldb + k : bb, v);
                }
            }
        };

#pragma unroll
        for (int st = 0; st < TC_STAGES - 1; st++) {
            if (st < ktiles) load_stage(st, st);
            asm volatile("cp.async.commit_group;\n" ::);
        }
        for (int kt = 0; kt < ktiles; kt++) {
            asm volatile("cp.async.wait_group %0;\n" ::"n"(TC_STAGES - 2));
            __syncthreads();
            int nt = kt + TC_STAGES - 1;
            if (nt < ktiles) load_stage(nt % TC_STAGES, nt);
            asm volatile("cp.async.commit_group;\n" ::);
            const unsigned short *As = smem + (kt % TC_STAGES) * TC_STAGE_HALVES(BN);
            const unsigned short *Bs = As + 128 * TC_PAD_K;
#pragma unroll
            for (int kk = 0; kk < TC_BK; kk += 16) {
                unsigned af[4][4], bfr[NJ][2];
#pragma unroll
                for (int mi = 0; mi < 4; mi++) {
                    int mb = wm * 64 + mi * 16;
                    if (!AT)
                        ldsm_x4(smem_u32(As + (mb + (lane & 15)) * TC_PAD_K + kk + (lane >> 4) * 8),
                                af[mi][0], af[mi][1], af[mi][2], af[mi][3]);
                    else
                        ldsm_x4_t(smem_u32(As + (kk + (lane & 7) + ((lane >> 4) << 3)) * TC_PAD_MN +
                                           mb + ((lane >> 3) & 1) * 8),
                                  af[mi][0], af[mi][1], af[mi][2], af[mi][3]);
                }
#pragma unroll
                for (int p = 0; p < NJ / 2; p++) {
                    int nb = wn * WN + p * 16;
                    if (!BT)
                        ldsm_x4_t(smem_u32(Bs + (kk + (lane & 15)) * PB + nb + (lane >> 4) * 8),
                                  bfr[2 * p][0], bfr[2 * p][1], bfr[2 * p + 1][0],
                                  bfr[2 * p + 1][1]);
                    else
                        ldsm_x4(smem_u32(Bs + (nb + (lane & 7) + ((lane >> 4) << 3)) * TC_PAD_K +
                                         kk + ((lane >> 3) & 1) * 8),
                                bfr[2 * p][0], bfr[2 * p][1], bfr[2 * p + 1][0], bfr[2 * p + 1][1]);
                }
#pragma unroll
                for (int mi = 0; mi < 4; mi++)
#pragma unroll
                    for (int nj = 0; nj < NJ; nj++) mma16816<BF>(acc[mi][nj], af[mi], bfr[nj]);
            }
        }
        asm volatile("cp.async.wait_group 0;\n" ::);
        __syncthreads(); // the next batch's prologue reuses the stages

        unsigned short *cb = c + bt * M * N;
#pragma unroll
        for (int mi = 0; mi < 4; mi++)
#pragma unroll
            for (int nj = 0; nj < NJ; nj++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    i64 row = m0 + wm * 64 + mi * 16 + (lane >> 2) + h * 8;
                    i64 col = n0 + wn * WN + nj * 8 + (lane & 3) * 2;
                    if (row >= M || col >= N) continue;
                    float x = acc[mi][nj][2 * h], y = acc[mi][nj][2 * h + 1];
                    if (s.ep.on) {
                        const i64 idx = (bt * M + row) * N + col;
                        x = ep_apply<BF>(s.ep, x, col, idx);
                        if (col + 1 < N) y = ep_apply<BF>(s.ep, y, col + 1, idx + 1);
                    }
                    unsigned v = pack2<BF>(x, y);
                    unsigned short *p = cb + row * N + col;
                    if (col + 1 < N && (N & 1) == 0)
                        *(unsigned *)p = v;
                    else {
                        p[0] = (unsigned short)(v & 0xffff);
                        if (col + 1 < N) p[1] = (unsigned short)(v >> 16);
                    }
                }
    }
}

#define TC_KERNEL(NAME, BF, AT, BT)                                                                \
    extern "C" __global__ void __launch_bounds__(256, 2)                                           \
        NAME(const unsigned short *a, const unsigned short *b, unsigned short *c, mmidx s)         \
    {                                                                                              \
        tc_matmul<BF, AT, BT, 32>(a, b, c, s);                                                     \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(256, 1)                                           \
        NAME##_w(const unsigned short *a, const unsigned short *b, unsigned short *c, mmidx s)     \
    {                                                                                              \
        tc_matmul<BF, AT, BT, 64>(a, b, c, s);                                                     \
    }
TC_KERNEL(em_mm_tc_f16_nn, 0, 0, 0)
TC_KERNEL(em_mm_tc_f16_nt, 0, 0, 1)
TC_KERNEL(em_mm_tc_f16_tn, 0, 1, 0)
TC_KERNEL(em_mm_tc_f16_tt, 0, 1, 1)
TC_KERNEL(em_mm_tc_bf16_nn, 1, 0, 0)
TC_KERNEL(em_mm_tc_bf16_nt, 1, 0, 1)
TC_KERNEL(em_mm_tc_bf16_tn, 1, 1, 0)
TC_KERNEL(em_mm_tc_bf16_tt, 1, 1, 1)

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
    // column inside a group, so the blocks resident together share A and B rows in L2 (1024^3 on
    // the H200: 0.0767 -> 0.0656 ms; on T = 128 it cost 0.8-1.0 % at 2048-4096 and was left out)
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
        // on the same banks (two wavefronts per store). With SW = 8, 1024^3 on the H200 ran
        // 0.593 ms against 0.629; on the other kernels the XORed addresses cost more than the
        // conflicts (128 tiles at 2048-8192 0.4-1.2 % slower, 1.3 % more instructions at 4096
        // although Nsight Compute's 4 % excess shared wavefronts went; the encoder's forward,
        // B k-contiguous, 4.30 -> 4.64 ms), so there SW = 0 and the code is as before.
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
        // step's reads wait behind them rather than stall every warp after the barrier (1024^3 on
        // the H200: 0.658 -> 0.629 ms; 235 -> 237 registers, four blocks per multiprocessor
        // either way). The other layouts' 64-tile kernels went from 168-195 registers (five or
        // six blocks) to 225-247 (four) with it, and a transformer encoder's forward, whose
        // x @ W^T products take them, from 4.34 to 4.42 ms, so they keep the plain order; on
        // T = 128 it ran 4-5 % slower (ptxas schedules the one-block kernel's reads itself).
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
// at 128 and spill; that measured 39.5 against 45.0 TFLOP/s at 4096 on the H200, and k tiles of 8
// 43.1).
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

// ---- f16 / bf16 for any strides and sizes (the tensor-core kernels need 16-byte rows) --------

template <int BF>
__device__ void half_matmul(const unsigned short *a, const unsigned short *b, unsigned short *c,
                            const mmidx &s)
{
    __shared__ float As[16][17], Bs[16][17];
    int tx = threadIdx.x, ty = threadIdx.y;
    i64 row = (i64)blockIdx.y * 16 + ty, col = (i64)blockIdx.x * 16 + tx;
    for (i64 bt = blockIdx.z; bt < s.nbatch; bt += gridDim.z) {
        i64 ao, bo;
        batch_offsets(s, bt, ao, bo);
        float acc = 0.f;
        for (i64 k0 = 0; k0 < s.K; k0 += 16) {
            As[ty][tx] = row < s.M && k0 + tx < s.K
                             ? half_to_f<BF>(a[ao + row * s.sam + (k0 + tx) * s.sak])
                             : 0.f;
            Bs[ty][tx] = k0 + ty < s.K && col < s.N
                             ? half_to_f<BF>(b[bo + (k0 + ty) * s.sbk + col * s.sbn])
                             : 0.f;
            __syncthreads();
            for (int k = 0; k < 16; k++) acc = fmaf(As[ty][k], Bs[k][tx], acc);
            __syncthreads();
        }
        if (row < s.M && col < s.N) c[(bt * s.M + row) * s.N + col] = f_to_half<BF>(acc);
    }
}

extern "C" __global__ void em_mm_half_f16(const unsigned short *a, const unsigned short *b,
                                          unsigned short *c, mmidx s)
{
    half_matmul<0>(a, b, c, s);
}

extern "C" __global__ void em_mm_half_bf16(const unsigned short *a, const unsigned short *b,
                                           unsigned short *c, mmidx s)
{
    half_matmul<1>(a, b, c, s);
}

// ---- TF32 tensor cores for f32 (mma.sync m16n8k8, operands rounded to tf32, f32 accumulation),
// used when the config key cuda_tf32 is on. 128 x 128 x 32 block tiles, 8 warps of 64 x 32,
// 3 cp.async stages. Tiles stored [128][32] have a pitch of 36 floats, [32][128] of 136: the
// fragment reads of a warp then fall in 32 distinct banks.
#define TF_STAGES       3
#define TF_PK           36
#define TF_PMN          136
#define TF_STAGE_FLOATS (2 * 128 * TF_PK)

__device__ __forceinline__ unsigned to_tf32(float f)
{
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(f));
    return r;
}

__device__ __forceinline__ void mma1688(float *c, const unsigned *a, const unsigned *b)
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// AT / BT as for tc_matmul; 16-byte chunks are 4 floats.
template <int AT, int BT>
__device__ void tf32_matmul(const float *a, const float *b, float *c, const mmidx &s)
{
    extern __shared__ __align__(16) float fsm[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp >> 2, wn = warp & 3, g = lane >> 2, t4 = lane & 3;
    const i64 M = s.M, N = s.N, K = s.K;
    const i64 lda = AT ? s.sak : s.sam, ldb = BT ? s.sbn : s.sbk;
    const i64 m0 = (i64)blockIdx.y * 128, n0 = (i64)blockIdx.x * 128;
    const int ktiles = (int)((K + 31) / 32);
    for (i64 bt = blockIdx.z; bt < s.nbatch; bt += gridDim.z) {
        i64 ao, bo;
        batch_offsets(s, bt, ao, bo);
        const float *ab = a + ao, *bb = b + bo;
        float acc[4][4][4];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;
        auto load_stage = [&](int stage, int kt) {
            float *As = fsm + stage * TF_STAGE_FLOATS;
            float *Bs = As + 128 * TF_PK;
            const i64 k0 = (i64)kt * 32;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int ch = tid + i * 256;
                if (!AT) {
                    int row = ch >> 3, kc = (ch & 7) * 4;
                    i64 m = m0 + row, k = k0 + kc;
                    bool v = m < M && k < K;
                    cp_async16(smem_u32(As + row * TF_PK + kc), v ? ab + m * lda + k : ab, v);
                } else {
                    int row = ch >> 5, mc = (ch & 31) * 4;
                    i64 k = k0 + row, m = m0 + mc;
                    bool v = m < M && k < K;
                    cp_async16(smem_u32(As + row * TF_PMN + mc), v ? ab + k * lda + m : ab, v);
                }
                if (!BT) {
                    int row = ch >> 5, nc = (ch & 31) * 4;
                    i64 k = k0 + row, n = n0 + nc;
                    bool v = n < N && k < K;
                    cp_async16(smem_u32(Bs + row * TF_PMN + nc), v ? bb + k * ldb + n : bb, v);
                } else {
                    int row = ch >> 3, kc = (ch & 7) * 4;
                    i64 n = n0 + row, k = k0 + kc;
                    bool v = n < N && k < K;
                    cp_async16(smem_u32(Bs + row * TF_PK + kc), v ? bb + n * ldb + k : bb, v);
                }
            }
        };
#pragma unroll
        for (int st = 0; st < TF_STAGES - 1; st++) {
            if (st < ktiles) load_stage(st, st);
            asm volatile("cp.async.commit_group;\n" ::);
        }
        for (int kt = 0; kt < ktiles; kt++) {
            asm volatile("cp.async.wait_group %0;\n" ::"n"(TF_STAGES - 2));
            __syncthreads();
            int nt = kt + TF_STAGES - 1;
            if (nt < ktiles) load_stage(nt % TF_STAGES, nt);
            asm volatile("cp.async.commit_group;\n" ::);
            const float *As = fsm + (kt % TF_STAGES) * TF_STAGE_FLOATS;
            const float *Bs = As + 128 * TF_PK;
#pragma unroll
            for (int kk = 0; kk < 32; kk += 8) {
                unsigned af[4][4], bfr[4][2];
#pragma unroll
                for (int mi = 0; mi < 4; mi++) {
                    int r0 = wm * 64 + mi * 16 + g;
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        int r = r0 + (e & 1) * 8, k = kk + t4 + (e >> 1) * 4;
                        af[mi][e] = to_tf32(AT ? As[k * TF_PMN + r] : As[r * TF_PK + k]);
                    }
                }
#pragma unroll
                for (int nj = 0; nj < 4; nj++) {
                    int n = wn * 32 + nj * 8 + g;
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        int k = kk + t4 + e * 4;
                        bfr[nj][e] = to_tf32(BT ? Bs[n * TF_PK + k] : Bs[k * TF_PMN + n]);
                    }
                }
#pragma unroll
                for (int mi = 0; mi < 4; mi++)
#pragma unroll
                    for (int nj = 0; nj < 4; nj++) mma1688(acc[mi][nj], af[mi], bfr[nj]);
            }
        }
        asm volatile("cp.async.wait_group 0;\n" ::);
        __syncthreads();
        float *cb = c + bt * M * N;
#pragma unroll
        for (int mi = 0; mi < 4; mi++)
#pragma unroll
            for (int nj = 0; nj < 4; nj++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    i64 row = m0 + wm * 64 + mi * 16 + g + h * 8;
                    i64 col = n0 + wn * 32 + nj * 8 + t4 * 2;
                    if (row >= M || col >= N) continue;
                    float *p = cb + row * N + col;
                    if (col + 1 < N && (N & 1) == 0)
                        *(float2 *)p = make_float2(acc[mi][nj][2 * h], acc[mi][nj][2 * h + 1]);
                    else {
                        p[0] = acc[mi][nj][2 * h];
                        if (col + 1 < N) p[1] = acc[mi][nj][2 * h + 1];
                    }
                }
    }
}

#define TF_KERNEL(NAME, AT, BT)                                                                    \
    extern "C" __global__ void __launch_bounds__(256, 2)                                           \
        NAME(const float *a, const float *b, float *c, mmidx s)                                    \
    {                                                                                              \
        tf32_matmul<AT, BT>(a, b, c, s);                                                           \
    }
TF_KERNEL(em_mm_tf32_nn, 0, 0)
TF_KERNEL(em_mm_tf32_nt, 0, 1)
TF_KERNEL(em_mm_tf32_tn, 1, 0)
TF_KERNEL(em_mm_tf32_tt, 1, 1)

// Split-K: out[b, i] = sum over p of ws[(b * parts + p) * mn + i], the slices in order, then
// s's matmul_bias_act epilogue where s.ep.on (s: the product's geometry, N its columns).
extern "C" __global__ void em_mm_splitk_sum_f32(const float *ws, float *out, i64 mn, i64 nb,
                                                int parts, mmidx s)
{
    GRID_LOOP(mn * nb)
    {
        i64 b = i / mn, e = i - b * mn;
        const float *w = ws + b * parts * mn + e;
        float v[16]; // the loads first, then the adds in slice order
#pragma unroll
        for (int p = 0; p < 16; p++) v[p] = p < parts ? w[p * mn] : 0.f;
        float acc = 0.f;
#pragma unroll
        for (int p = 0; p < 16; p++)
            if (p < parts) acc += v[p];
        out[i] = s.ep.on ? ep_apply<2>(s.ep, acc, e % s.N, i) : acc;
    }
}
