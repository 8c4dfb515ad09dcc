// Fast matmul kernels: tensor cores (mma.sync m16n8k16, matmul_mma.cuh) for f16 and bf16 with f32
// accumulation, TF32 for f32, and the epilogue as its own pass (struct mmidx: matmul.cuh; the
// epilogue: matmul_ep.cuh). The exact f32 kernels are in matmul_sgemm.cu.
// C[b] = A[b] . B[b]: A [M, K], B [K, N], C [M, N] contiguous; batch offsets from mmidx.
#include "ew_scalar.cuh"
#include "matmul_ep.cuh"
#include "matmul_mma.cuh"

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
