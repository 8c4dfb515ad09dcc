// ---- flash attention backward (the SDPA_BACKWARD record), f16/bf16, D = E = Ev of 64 or 128 ----
// FlashAttention-2's backward without float atomics, in two kernels built from attention_mma.cuh
// (mma.sync m16n8k16 with f32 accumulation, ldmatrix, cp.async):
//  1. em_attn_bwd_dq_*: one block of 4 warps per 64 query rows (16 per warp). Unless the
//     forward's lse is given (lse_in), a first pass over the key tiles computes S = Q K^T, the
//     row max and sum of the softmax (base 2, as the forward) and so lse = max + log2(sum);
//     D = rowsum(dO * O) comes from the rows. A second
//     pass recomputes S, P = exp2(S scale log2e - lse), dP = dO V^T, dS = P (dP - D) and
//     accumulates dQ += dS K in registers. D (and the computed lse) go to f32 buffers for kernel 2.
//     With the forward's lse, em_attn_bwd_dq2_* (below) does the second pass alone.
//  2. em_attn_bwd_dkdv2_* (below): one block of 8 warps per 128 keys, looping over the query
//     tiles: S^T = K Q^T, P^T from lse, dV += P^T dO, dP^T = V dO^T, dS^T = P^T (dP^T - D),
//     dK += dS^T Q, both accumulated in registers.
// Every output element is written by one thread from a fixed order of MMAs: deterministic.
// K and V tiles (kernel 1) and Q and dO tiles (kernel 2) of 64 rows are double-buffered; P and
// dS are rounded to the input type for the MMAs, as in the forward. Causal (key j > query i
// dropped): kernel 1 stops at the block's last row, kernel 2 starts at the tile holding its
// first key. A row whose every key is masked has lse = +inf, so P = 0 and D = 0 there: no
// gradient (the CPU record's semantics). Inputs: last dim contiguous, row and batch strides
// multiples of 8 halves, 16-byte aligned bases (the host checks); outputs contiguous.
#include "attention_flash.cuh"
#include "attention_mma.cuh"

struct attn_bwd_arg {
    i64 bshape[8];
    i64 qb[8], kb[8], vb[8], ob[8], gb[8], mb[8]; // batch strides (elements), 0 where broadcast
    i64 qs, ks, vs, os, gs;                       // row strides (elements)
    i64 ms[2];                                    // mask row and column strides
    i64 L, S, nbatch;
    float scale_log2; // scale * log2(e)
    float inv_scale;  // an additive mask enters the raw scores as add / scale
    float scale;
    int nb, causal, mkind;
};

#define ATTN_BB 64 // rows of a tile: query rows of a dq block, the query tiles of a dk/dv block

// Work item `work` of nbatch x mblocks query-row blocks: batch index bt, row block mb; causal,
// the row blocks with the most key tiles first, over all batch indices (as the forward).
__device__ __forceinline__ void attn_bwd_work(i64 work, i64 mblocks, i64 nbatch, int causal,
                                              i64 &bt, i64 &mb)
{
    if (causal) {
        const i64 mi = work / nbatch;
        bt = work - mi * nbatch;
        mb = mblocks - 1 - mi;
    } else {
        bt = work / mblocks;
        mb = work - bt * mblocks;
    }
}

// Offsets of batch index bt into q, k, v, o, dO and the mask.
__device__ __forceinline__ void attn_bwd_offsets(const attn_bwd_arg &g, i64 bt, i64 *off)
{
    for (int t = 0; t < 6; t++) off[t] = 0;
    i64 rem = bt;
    for (int d = g.nb - 1; d >= 0; d--) {
        i64 qt = rem / g.bshape[d], c = rem - qt * g.bshape[d];
        off[0] += c * g.qb[d];
        off[1] += c * g.kb[d];
        off[2] += c * g.vb[d];
        off[3] += c * g.ob[d];
        off[4] += c * g.gb[d];
        off[5] += c * g.mb[d];
        rem = qt;
    }
}

// Rows [r0, r0 + R) of x (row stride xs) into the shared tile at dst (pitch D + 8 halves) by
// the block's NTH threads; rows at or past n are zero-filled.
template <int D, int R = ATTN_BB, int NTH = 128>
__device__ __forceinline__ void attn_bwd_tile(unsigned dst, const unsigned short *x, i64 xs,
                                              i64 r0, i64 n)
{
    constexpr int P = D + 8, CH = D / 8;
    const int tid = threadIdx.x, lrow = tid / CH, lcol = (tid % CH) * 8;
#pragma unroll
    for (int it = 0; it < R * CH / NTH; it++) {
        const int row = lrow + it * (NTH / CH);
        const i64 j = r0 + row;
        const bool ok = j < n;
        attn_cp16(dst + (row * P + lcol) * 2, ok ? x + j * xs + lcol : x, ok);
    }
}

// acc[16 x 64] += A[16 rows of a, from row ar] . B^T where B is stored [64][D] (rows of b):
// the product of two row-major tiles over the head dim (S = Q K^T and its relatives).
template <int BF, int D>
__device__ __forceinline__ void attn_bwd_abt(float (*acc)[4], unsigned a, int ar, unsigned b)
{
    constexpr int P = D + 8;
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        unsigned af[4];
        attn_ldsm4(a + ((ar + (lane & 15)) * P + kk * 16 + (lane >> 4) * 8) * 2, af[0], af[1],
                   af[2], af[3]);
#pragma unroll
        for (int p = 0; p < ATTN_BB / 16; p++) {
            unsigned b0, b1, b2, b3;
            attn_ldsm4(b + ((p * 16 + (lane & 7) + ((lane >> 4) << 3)) * P + kk * 16 +
                            ((lane >> 3) & 1) * 8) *
                               2,
                       b0, b1, b2, b3);
            attn_mma<BF>(acc[2 * p], af, b0, b1);
            attn_mma<BF>(acc[2 * p + 1], af, b2, b3);
        }
    }
}

// acc[16 x D] += X[16 x 64] . B with X given as C-layout accumulators (rounded to the input type
// here) and B stored [64][D] row-major in shared memory (dQ += dS K, dV += P^T dO ...).
template <int BF, int D>
__device__ __forceinline__ void attn_bwd_xb(float (*acc)[4], float (*x)[4], unsigned b)
{
    constexpr int P = D + 8;
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int kk = 0; kk < ATTN_BB / 16; kk++) {
        unsigned xa[4]; // the C layout of two n-tiles is the A layout
        xa[0] = attn_pack<BF>(x[2 * kk][0], x[2 * kk][1]);
        xa[1] = attn_pack<BF>(x[2 * kk][2], x[2 * kk][3]);
        xa[2] = attn_pack<BF>(x[2 * kk + 1][0], x[2 * kk + 1][1]);
        xa[3] = attn_pack<BF>(x[2 * kk + 1][2], x[2 * kk + 1][3]);
#pragma unroll
        for (int p = 0; p < D / 16; p++) {
            unsigned b0, b1, b2, b3;
            attn_ldsm4_t(b + ((kk * 16 + (lane & 15)) * P + p * 16 + (lane >> 4) * 8) * 2, b0, b1,
                         b2, b3);
            attn_mma<BF>(acc[2 * p], xa, b0, b1);
            attn_mma<BF>(acc[2 * p + 1], xa, b2, b3);
        }
    }
}

// Masks the 16 x 8 NT scores s of rows i0 + (lane >> 2) + 8 (e >> 1) and columns
// j0 + n * 8 + (lane & 3) * 2 + (e & 1) (TR: rows are keys and columns queries): -inf past the
// keys' end S, for causal keys past their query, and where the mask tensor drops them (an
// additive mask is added, scaled like the raw scores).
template <int BF, int MK, int TR, int NT = ATTN_BB / 8>
__device__ __forceinline__ void attn_bwd_mask(float (*s)[4], i64 i0, i64 j0, i64 mo,
                                              const void *mask, const attn_bwd_arg &g)
{
    const int lane = threadIdx.x & 31;
    const float ninf = -__int_as_float(0x7f800000);
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const i64 r = i0 + (lane >> 2) + (e >> 1) * 8, c = j0 + n * 8 + (lane & 3) * 2 + (e & 1);
            const i64 i = TR ? c : r, j = TR ? r : c;
            if (j >= g.S || (g.causal && j > i))
                s[n][e] = ninf;
            else if (MK && i < g.L) {
                const i64 mi = mo + i * g.ms[0] + j * g.ms[1];
                if (MK == 1) {
                    if (!((const unsigned char *)mask)[mi]) s[n][e] = ninf;
                } else
                    s[n][e] += attn_h2f<BF>(((const unsigned short *)mask)[mi]) * g.inv_scale;
            }
        }
}

template <int BF, int D, int MK>
__device__ void attn_bwd_dq(const unsigned short *q, const unsigned short *k,
                            const unsigned short *v, const unsigned short *o,
                            const unsigned short *dout, const void *mask, unsigned short *dq,
                            float *lse_out, float *dd_out, const float *lse_in,
                            const attn_bwd_arg &g)
{
    constexpr int P = D + 8, NT = ATTN_BB / 8, OT = D / 8, TILE = ATTN_BB * P * 2;
    unsigned short *attn_bsm = attn_dyn_smem();
    // Q [64][P], dO [64][P], K [2][64][P], V [2][64][P] (halves)
    const unsigned Qs = attn_smem(attn_bsm), Gs = Qs + TILE, Ks = Gs + TILE, Vs = Ks + 2 * TILE;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const float ninf = -__int_as_float(0x7f800000), pinf = __int_as_float(0x7f800000);
    const i64 L = g.L, S = g.S, mblocks = (L + ATTN_BB - 1) / ATTN_BB;
    for (i64 work = (i64)blockIdx.y * gridDim.x + blockIdx.x; work < mblocks * g.nbatch;
         work += (i64)gridDim.x * gridDim.y) {
        i64 bt, mb;
        attn_bwd_work(work, mblocks, g.nbatch, g.causal, bt, mb);
        const i64 m0 = mb * ATTN_BB;
        i64 off[6];
        attn_bwd_offsets(g, bt, off);
        const unsigned short *qg = q + off[0], *kg = k + off[1], *vg = v + off[2];
        const unsigned short *og = o + off[3], *gg = dout + off[4];
        i64 kend = S;
        if (g.causal && m0 + ATTN_BB < kend) kend = m0 + ATTN_BB;
        const int ntiles = (int)((kend + ATTN_BB - 1) / ATTN_BB);
        const int r0 = warp * 16;
        const i64 qi0 = m0 + r0 + (lane >> 2); // this thread's rows: qi0 and qi0 + 8

        // pass 1 (without the forward's lse): lse per row. Groups: Q and dO, then K(t).
        attn_bwd_tile<D>(Qs, qg, g.qs, m0, L);
        attn_bwd_tile<D>(Gs, gg, g.gs, m0, L);
        attn_cp_commit();
        if (!lse_in) attn_bwd_tile<D>(Ks, kg, g.ks, 0, S);
        attn_cp_commit();
        float mrow[2] = {ninf, ninf}, lrow[2] = {0.f, 0.f};
        for (int t = 0; t < (lse_in ? 0 : ntiles); t++) {
            if (t + 1 < ntiles)
                attn_bwd_tile<D>(Ks + ((t + 1) & 1) * TILE, kg, g.ks, (i64)(t + 1) * ATTN_BB, S);
            attn_cp_commit();
            attn_cp_wait<1>();
            __syncthreads();
            const i64 n0 = (i64)t * ATTN_BB;
            float s[NT][4];
#pragma unroll
            for (int n = 0; n < NT; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
            attn_bwd_abt<BF, D>(s, Qs, r0, Ks + (t & 1) * TILE);
            if (n0 + ATTN_BB > S || (g.causal && n0 + ATTN_BB - 1 > m0 + r0) || MK)
                attn_bwd_mask<BF, MK, 0>(s, m0 + r0, n0, off[5], mask, g);
#pragma unroll
            for (int h = 0; h < 2; h++) {
                float mx = ninf;
#pragma unroll
                for (int n = 0; n < NT; n++) mx = fmaxf(mx, fmaxf(s[n][2 * h], s[n][2 * h + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float mnew = fmaxf(mrow[h], mx * g.scale_log2);
                const float mu = mnew == ninf ? 0.f : mnew;
                float sum = 0.f;
#pragma unroll
                for (int n = 0; n < NT; n++)
                    sum += attn_exp2(fmaf(s[n][2 * h], g.scale_log2, -mu)) +
                           attn_exp2(fmaf(s[n][2 * h + 1], g.scale_log2, -mu));
                lrow[h] = lrow[h] * (mnew == mrow[h] ? 1.f : attn_exp2(mrow[h] - mu)) + sum;
                mrow[h] = mnew;
            }
            __syncthreads(); // the next load overwrites the other buffer
        }
        attn_cp_wait<0>();
        __syncthreads();
        // pass 2 loads K(0), V(0) while lse and D are finished
        attn_bwd_tile<D>(Ks, kg, g.ks, 0, S);
        attn_bwd_tile<D>(Vs, vg, g.vs, 0, S);
        attn_cp_commit();
        float lse[2], dd[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const i64 i = qi0 + h * 8;
            float l = lrow[h];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            bool none = mrow[h] == ninf; // every key masked
            lse[h] = none ? pinf : mrow[h] + log2f(l);
            if (lse_in) {
                lse[h] = i < L ? lse_in[bt * L + i] : pinf;
                none = lse[h] == pinf;
            }
            const unsigned short *grow = attn_bsm + (ATTN_BB + r0 + (lane >> 2) + h * 8) * P; // dO
            float acc = 0.f;
            if (i < L) {
                const unsigned short *orow = og + i * g.os;
#pragma unroll
                for (int t2 = 0; t2 < OT; t2++) {
                    const int col = t2 * 8 + (lane & 3) * 2;
                    acc = fmaf(attn_h2f<BF>(grow[col]), attn_h2f<BF>(orow[col]), acc);
                    acc = fmaf(attn_h2f<BF>(grow[col + 1]), attn_h2f<BF>(orow[col + 1]), acc);
                }
            }
            acc += __shfl_xor_sync(0xffffffffu, acc, 1);
            acc += __shfl_xor_sync(0xffffffffu, acc, 2);
            dd[h] = none ? 0.f : acc;
            if (i < L && (lane & 3) == 0) {
                if (!lse_in) lse_out[bt * L + i] = lse[h];
                dd_out[bt * L + i] = dd[h];
            }
        }

        float acc[OT][4];
#pragma unroll
        for (int t2 = 0; t2 < OT; t2++) acc[t2][0] = acc[t2][1] = acc[t2][2] = acc[t2][3] = 0.f;
        for (int t = 0; t < ntiles; t++) {
            if (t + 1 < ntiles) {
                const i64 n1 = (i64)(t + 1) * ATTN_BB;
                attn_bwd_tile<D>(Ks + ((t + 1) & 1) * TILE, kg, g.ks, n1, S);
                attn_bwd_tile<D>(Vs + ((t + 1) & 1) * TILE, vg, g.vs, n1, S);
            }
            attn_cp_commit();
            attn_cp_wait<1>();
            __syncthreads();
            const unsigned kb = Ks + (t & 1) * TILE, vb = Vs + (t & 1) * TILE;
            const i64 n0 = (i64)t * ATTN_BB;
            float s[NT][4], dp[NT][4];
#pragma unroll
            for (int n = 0; n < NT; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) s[n][e] = dp[n][e] = 0.f;
            attn_bwd_abt<BF, D>(s, Qs, r0, kb);
            if (n0 + ATTN_BB > S || (g.causal && n0 + ATTN_BB - 1 > m0 + r0) || MK)
                attn_bwd_mask<BF, MK, 0>(s, m0 + r0, n0, off[5], mask, g);
            attn_bwd_abt<BF, D>(dp, Gs, r0, vb); // dP = dO V^T
#pragma unroll
            for (int n = 0; n < NT; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const float p = attn_exp2(fmaf(s[n][e], g.scale_log2, -lse[e >> 1]));
                    s[n][e] = p * (dp[n][e] - dd[e >> 1]); // dS
                }
            attn_bwd_xb<BF, D>(acc, s, kb); // dQ += dS K
            __syncthreads();
        }
        attn_cp_wait<0>();
        __syncthreads(); // the tiles are reloaded for the next work item
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const i64 i = qi0 + h * 8;
            if (i >= L) continue;
            unsigned short *row = dq + (bt * L + i) * D;
#pragma unroll
            for (int t2 = 0; t2 < OT; t2++) {
                const int col = t2 * 8 + (lane & 3) * 2;
                *(unsigned *)(row + col) =
                    attn_pack<BF>(acc[t2][2 * h] * g.scale, acc[t2][2 * h + 1] * g.scale);
            }
        }
    }
}

// em_attn_bwd_dq2_*: dQ from the forward's lse (lse_in), one block of 4 warps per 128 query rows,
// 32 per warp (two m16 tiles), so each K or V fragment read from shared memory feeds two MMAs.
// Key tiles of 32 (double-buffered with cp.async; Q and dO of 128 rows stay) keep the scores and
// dP at 2 x 16 x 32 per warp next to the 2 x 16 x D accumulators. Per tile: S = Q K^T,
// dP = dO V^T, dS = P (dP - D) with P = exp2(S scale log2 e - lse), dQ += dS K. D = rowsum(dO O)
// goes to dd_out for the dk/dv kernel. Same arithmetic per element as attn_bwd_dq's second pass
// (the sums over the head dim and over the keys in the same order).
#define ATTN_QB 128 // query rows per dq2 block
#define ATTN_KB 32  // keys per dq2 tile
template <int BF, int D, int MK>
__device__ void attn_bwd_dq2(const unsigned short *q, const unsigned short *k,
                             const unsigned short *v, const unsigned short *o,
                             const unsigned short *dout, const void *mask, unsigned short *dq,
                             float *dd_out, const float *lse_in, const attn_bwd_arg &g)
{
    constexpr int P = D + 8, OT = D / 8, KT = D / 16, NT = ATTN_KB / 8;
    constexpr int QT = ATTN_QB * P * 2, KTL = ATTN_KB * P * 2; // tile bytes
    unsigned short *attn_bsm = attn_dyn_smem();
    // Q [128][P], dO [128][P], K [2][32][P], V [2][32][P] (halves)
    const unsigned Qs = attn_smem(attn_bsm), Gs = Qs + QT, Ks = Gs + QT, Vs = Ks + 2 * KTL;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const float pinf = __int_as_float(0x7f800000);
    const i64 L = g.L, S = g.S, mblocks = (L + ATTN_QB - 1) / ATTN_QB;
    for (i64 work = (i64)blockIdx.y * gridDim.x + blockIdx.x; work < mblocks * g.nbatch;
         work += (i64)gridDim.x * gridDim.y) {
        i64 bt, mb;
        attn_bwd_work(work, mblocks, g.nbatch, g.causal, bt, mb);
        const i64 m0 = mb * ATTN_QB;
        i64 off[6];
        attn_bwd_offsets(g, bt, off);
        const unsigned short *kg = k + off[1], *vg = v + off[2], *og = o + off[3];
        i64 kend = S;
        if (g.causal && m0 + ATTN_QB < kend) kend = m0 + ATTN_QB;
        const int ntiles = (int)((kend + ATTN_KB - 1) / ATTN_KB);
        const int r0 = warp * 32;
        const i64 qi0 = m0 + r0 + (lane >> 2); // this thread's rows: qi0 + 8 h, h = 0..3

        attn_bwd_tile<D, ATTN_QB>(Qs, q + off[0], g.qs, m0, L);
        attn_bwd_tile<D, ATTN_QB>(Gs, dout + off[4], g.gs, m0, L);
        if (ntiles > 0) {
            attn_bwd_tile<D, ATTN_KB>(Ks, kg, g.ks, 0, S);
            attn_bwd_tile<D, ATTN_KB>(Vs, vg, g.vs, 0, S);
        }
        attn_cp_commit();
        float lse[4], dd[4];
#pragma unroll
        for (int h = 0; h < 4; h++) {
            const i64 i = qi0 + h * 8;
            lse[h] = i < L ? lse_in[bt * L + i] : pinf;
            float acc = 0.f; // D from the global dO and O rows (the tiles are in flight)
            if (i < L && lse[h] != pinf) {
                const unsigned short *orow = og + i * g.os, *grow = dout + off[4] + i * g.gs;
#pragma unroll
                for (int t2 = 0; t2 < OT; t2++) {
                    const int col = t2 * 8 + (lane & 3) * 2;
                    acc = fmaf(attn_h2f<BF>(grow[col]), attn_h2f<BF>(orow[col]), acc);
                    acc = fmaf(attn_h2f<BF>(grow[col + 1]), attn_h2f<BF>(orow[col + 1]), acc);
                }
            }
            acc += __shfl_xor_sync(0xffffffffu, acc, 1);
            acc += __shfl_xor_sync(0xffffffffu, acc, 2);
            dd[h] = acc;
            if (i < L && (lane & 3) == 0) dd_out[bt * L + i] = acc;
        }

        float acc[2][OT][4];
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int t2 = 0; t2 < OT; t2++)
                acc[mt][t2][0] = acc[mt][t2][1] = acc[mt][t2][2] = acc[mt][t2][3] = 0.f;
        for (int t = 0; t < ntiles; t++) {
            attn_cp_wait<0>(); // tile t (with Q and dO when t = 0)
            __syncthreads(); // ... for every thread, and all are done with tile t - 1
            if (t + 1 < ntiles) {
                const i64 n1 = (i64)(t + 1) * ATTN_KB;
                attn_bwd_tile<D, ATTN_KB>(Ks + ((t + 1) & 1) * KTL, kg, g.ks, n1, S);
                attn_bwd_tile<D, ATTN_KB>(Vs + ((t + 1) & 1) * KTL, vg, g.vs, n1, S);
            }
            attn_cp_commit();
            const unsigned kb = Ks + (t & 1) * KTL, vb = Vs + (t & 1) * KTL;
            const i64 n0 = (i64)t * ATTN_KB;
            float s[2][NT][4], dp[2][NT][4];
#pragma unroll
            for (int mt = 0; mt < 2; mt++)
#pragma unroll
                for (int n = 0; n < NT; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) s[mt][n][e] = dp[mt][n][e] = 0.f;
            // S = Q K^T and dP = dO V^T, each B fragment feeding both m tiles
#pragma unroll
            for (int kk = 0; kk < KT; kk++) {
                unsigned qa[2][4], ga[2][4];
#pragma unroll
                for (int mt = 0; mt < 2; mt++) {
                    const unsigned ao = ((r0 + mt * 16 + (lane & 15)) * P + kk * 16 + (lane >> 4) * 8) * 2;
                    attn_ldsm4(Qs + ao, qa[mt][0], qa[mt][1], qa[mt][2], qa[mt][3]);
                    attn_ldsm4(Gs + ao, ga[mt][0], ga[mt][1], ga[mt][2], ga[mt][3]);
                }
#pragma unroll
                for (int p = 0; p < NT / 2; p++) {
                    const unsigned bo =
                        ((p * 16 + (lane & 7) + ((lane >> 4) << 3)) * P + kk * 16 + ((lane >> 3) & 1) * 8) * 2;
                    unsigned b0, b1, b2, b3;
                    attn_ldsm4(kb + bo, b0, b1, b2, b3);
#pragma unroll
                    for (int mt = 0; mt < 2; mt++) {
                        attn_mma<BF>(s[mt][2 * p], qa[mt], b0, b1);
                        attn_mma<BF>(s[mt][2 * p + 1], qa[mt], b2, b3);
                    }
                    attn_ldsm4(vb + bo, b0, b1, b2, b3);
#pragma unroll
                    for (int mt = 0; mt < 2; mt++) {
                        attn_mma<BF>(dp[mt][2 * p], ga[mt], b0, b1);
                        attn_mma<BF>(dp[mt][2 * p + 1], ga[mt], b2, b3);
                    }
                }
            }
            if (n0 + ATTN_KB > S || (g.causal && n0 + ATTN_KB - 1 > m0 + r0) || MK)
#pragma unroll
                for (int mt = 0; mt < 2; mt++)
                    attn_bwd_mask<BF, MK, 0, NT>(s[mt], m0 + r0 + mt * 16, n0, off[5], mask, g);
#pragma unroll
            for (int mt = 0; mt < 2; mt++)
#pragma unroll
                for (int n = 0; n < NT; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int h = mt * 2 + (e >> 1);
                        const float p = attn_exp2(fmaf(s[mt][n][e], g.scale_log2, -lse[h]));
                        s[mt][n][e] = p * (dp[mt][n][e] - dd[h]); // dS
                    }
            // dQ += dS K
#pragma unroll
            for (int kk = 0; kk < ATTN_KB / 16; kk++) {
                unsigned xa[2][4]; // the C layout of two n-tiles is the A layout
#pragma unroll
                for (int mt = 0; mt < 2; mt++) {
                    xa[mt][0] = attn_pack<BF>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
                    xa[mt][1] = attn_pack<BF>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                    xa[mt][2] = attn_pack<BF>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
                    xa[mt][3] = attn_pack<BF>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
                }
#pragma unroll
                for (int p = 0; p < D / 16; p++) {
                    unsigned b0, b1, b2, b3;
                    attn_ldsm4_t(kb + ((kk * 16 + (lane & 15)) * P + p * 16 + (lane >> 4) * 8) * 2, b0,
                                 b1, b2, b3);
#pragma unroll
                    for (int mt = 0; mt < 2; mt++) {
                        attn_mma<BF>(acc[mt][2 * p], xa[mt], b0, b1);
                        attn_mma<BF>(acc[mt][2 * p + 1], xa[mt], b2, b3);
                    }
                }
            }
        }
        attn_cp_wait<0>();
        __syncthreads(); // the tiles are reloaded for the next work item
#pragma unroll
        for (int h = 0; h < 4; h++) {
            const i64 i = qi0 + h * 8;
            if (i >= L) continue;
            const int mt = h >> 1, c0 = 2 * (h & 1);
            unsigned short *row = dq + (bt * L + i) * D;
#pragma unroll
            for (int t2 = 0; t2 < OT; t2++) {
                const int col = t2 * 8 + (lane & 3) * 2;
                *(unsigned *)(row + col) =
                    attn_pack<BF>(acc[mt][t2][c0] * g.scale, acc[mt][t2][c0 + 1] * g.scale);
            }
        }
    }
}

// em_attn_bwd_dkdv2_*: dK and dV with P and dS passed through shared memory (FlashAttention-2's
// layout of the work), one block of 8 warps per 128 keys looping over query tiles of 64. For
// S^T = K Q^T and dP^T = V dO^T the warps split the 128 x 64 tile 4 (keys) x 2 (queries), 32 x 32
// each; P^T and dS^T, rounded to the input type, go to shared memory; for dV += P^T dO and
// dK += dS^T Q the warps split the 128 x D results 4 (keys) x 2 (halves of D), 32 x D/2 each, so
// every fragment read from shared memory feeds two to four MMAs and the accumulators take 4 D
// registers per thread. Q and dO tiles (with their lse and D) are double-buffered by cp.async.
// The sums over the head dim and over the queries run in a fixed order, P and dS rounded once.
#define ATTN_DKB 128 // keys per dkdv2 block
template <int BF, int D, int MK>
__device__ void attn_bwd_dkdv2(const unsigned short *q, const unsigned short *k,
                               const unsigned short *v, const unsigned short *dout,
                               const void *mask, const float *lse_in, const float *dd_in,
                               unsigned short *dk, unsigned short *dv, const attn_bwd_arg &g)
{
    constexpr int P = D + 8, PQ = ATTN_BB + 8, KT = D / 16, NTH = 256;
    constexpr int TILE = ATTN_BB * P * 2, KTILE = ATTN_DKB * P * 2, HT = D / 16;
    unsigned short *attn_bsm = attn_dyn_smem();
    // K [128][P], V [128][P], Q [2][64][P], dO [2][64][P], P^T [128][PQ], dS^T [128][PQ]
    // (halves), then lse [2][64], D [2][64] (floats)
    const unsigned Ks = attn_smem(attn_bsm), Vs = Ks + KTILE, Qs = Vs + KTILE, Gs = Qs + 2 * TILE;
    const unsigned Ps = Gs + 2 * TILE, Ds = Ps + ATTN_DKB * PQ * 2;
    float *lse_s = (float *)(attn_bsm + (2 * ATTN_DKB + 4 * ATTN_BB) * P + 2 * ATTN_DKB * PQ);
    float *dd_s = lse_s + 2 * ATTN_BB;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int kw = warp >> 1, qh = warp & 1; // 32 keys; 32 queries of the tile, or a half of D
    const int rk = kw * 32;                  // the warp's first key in the block
    const float pinf = __int_as_float(0x7f800000);
    const i64 L = g.L, S = g.S, nblocks = (S + ATTN_DKB - 1) / ATTN_DKB;
    const int qtiles = (int)((L + ATTN_BB - 1) / ATTN_BB);
    for (i64 work = (i64)blockIdx.y * gridDim.x + blockIdx.x; work < nblocks * g.nbatch;
         work += (i64)gridDim.x * gridDim.y) {
        i64 bt, nbk;
        if (g.causal) { // the key blocks with the most query tiles (the first ones) first
            nbk = work / g.nbatch;
            bt = work - nbk * g.nbatch;
        } else {
            bt = work / nblocks;
            nbk = work - bt * nblocks;
        }
        const i64 n0 = nbk * ATTN_DKB;
        i64 off[6];
        attn_bwd_offsets(g, bt, off);
        const unsigned short *qg = q + off[0], *gg = dout + off[4];
        const float *lb = lse_in + bt * L, *db = dd_in + bt * L;
        // causal: query tiles before the one holding n0 see none of this block's keys
        const int t0 = g.causal ? (int)(n0 / ATTN_BB) : 0;
        auto stage = [&](int buf, int t) {
            const i64 i0 = (i64)t * ATTN_BB;
            attn_bwd_tile<D, ATTN_BB, NTH>(Qs + buf * TILE, qg, g.qs, i0, L);
            attn_bwd_tile<D, ATTN_BB, NTH>(Gs + buf * TILE, gg, g.gs, i0, L);
            if (tid < ATTN_BB) {
                const i64 i = i0 + tid;
                lse_s[buf * ATTN_BB + tid] = i < L ? lb[i] : pinf;
                dd_s[buf * ATTN_BB + tid] = i < L ? db[i] : 0.f;
            }
        };
        attn_bwd_tile<D, ATTN_DKB, NTH>(Ks, k + off[1], g.ks, n0, S);
        attn_bwd_tile<D, ATTN_DKB, NTH>(Vs, v + off[2], g.vs, n0, S);
        if (t0 < qtiles) stage(t0 & 1, t0);
        attn_cp_commit();

        float adk[2][HT][4], adv[2][HT][4];
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int t2 = 0; t2 < HT; t2++)
#pragma unroll
                for (int e = 0; e < 4; e++) adk[mt][t2][e] = adv[mt][t2][e] = 0.f;
        for (int t = t0; t < qtiles; t++) {
            attn_cp_wait<0>(); // tile t (with K and V when t = t0)
            __syncthreads(); // ... for every thread, and all are done with tile t - 1
            if (t + 1 < qtiles) stage((t + 1) & 1, t + 1);
            attn_cp_commit();
            const int buf = t & 1;
            const unsigned qb = Qs + buf * TILE, gb = Gs + buf * TILE;
            const float *ls = lse_s + buf * ATTN_BB, *ds = dd_s + buf * ATTN_BB;
            const i64 i0 = (i64)t * ATTN_BB;
            // S^T = K Q^T and dP^T = V dO^T on the warp's 32 keys x 32 queries
            float s[2][4][4], dp[2][4][4];
#pragma unroll
            for (int mt = 0; mt < 2; mt++)
#pragma unroll
                for (int n = 0; n < 4; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) s[mt][n][e] = dp[mt][n][e] = 0.f;
#pragma unroll
            for (int kk = 0; kk < KT; kk++) {
                unsigned ka[2][4], va[2][4];
#pragma unroll
                for (int mt = 0; mt < 2; mt++) {
                    const unsigned ao = ((rk + mt * 16 + (lane & 15)) * P + kk * 16 + (lane >> 4) * 8) * 2;
                    attn_ldsm4(Ks + ao, ka[mt][0], ka[mt][1], ka[mt][2], ka[mt][3]);
                    attn_ldsm4(Vs + ao, va[mt][0], va[mt][1], va[mt][2], va[mt][3]);
                }
#pragma unroll
                for (int p = 0; p < 2; p++) {
                    const unsigned bo = ((qh * 32 + p * 16 + (lane & 7) + ((lane >> 4) << 3)) * P +
                                         kk * 16 + ((lane >> 3) & 1) * 8) *
                                        2;
                    unsigned b0, b1, b2, b3;
                    attn_ldsm4(qb + bo, b0, b1, b2, b3);
#pragma unroll
                    for (int mt = 0; mt < 2; mt++) {
                        attn_mma<BF>(s[mt][2 * p], ka[mt], b0, b1);
                        attn_mma<BF>(s[mt][2 * p + 1], ka[mt], b2, b3);
                    }
                    attn_ldsm4(gb + bo, b0, b1, b2, b3);
#pragma unroll
                    for (int mt = 0; mt < 2; mt++) {
                        attn_mma<BF>(dp[mt][2 * p], va[mt], b0, b1);
                        attn_mma<BF>(dp[mt][2 * p + 1], va[mt], b2, b3);
                    }
                }
            }
            // rows past L have lse = +inf (P = 0); keys past S are masked, and never stored
            if ((g.causal && n0 + rk + 31 > i0 + qh * 32) || MK)
#pragma unroll
                for (int mt = 0; mt < 2; mt++)
                    attn_bwd_mask<BF, MK, 1, 4>(s[mt], n0 + rk + mt * 16, i0 + qh * 32, off[5], mask, g);
            // P^T and dS^T, rounded to the input type, into shared memory
#pragma unroll
            for (int mt = 0; mt < 2; mt++)
#pragma unroll
                for (int n = 0; n < 4; n++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const int c = qh * 32 + n * 8 + (lane & 3) * 2;
                        const float p0 = attn_exp2(fmaf(s[mt][n][2 * h], g.scale_log2, -ls[c]));
                        const float p1 =
                            attn_exp2(fmaf(s[mt][n][2 * h + 1], g.scale_log2, -ls[c + 1]));
                        const float d0 = p0 * (dp[mt][n][2 * h] - ds[c]);
                        const float d1 = p1 * (dp[mt][n][2 * h + 1] - ds[c + 1]);
                        const unsigned o = ((rk + mt * 16 + (lane >> 2) + 8 * h) * PQ + c) * 2;
                        attn_sts32(Ps + o, attn_pack<BF>(p0, p1));
                        attn_sts32(Ds + o, attn_pack<BF>(d0, d1));
                    }
            __syncthreads();
            // dV += P^T dO and dK += dS^T Q on the warp's 32 keys x D/2 columns
#pragma unroll
            for (int kk = 0; kk < ATTN_BB / 16; kk++) {
                unsigned pa[2][4], da[2][4];
#pragma unroll
                for (int mt = 0; mt < 2; mt++) {
                    const unsigned ao = ((rk + mt * 16 + (lane & 15)) * PQ + kk * 16 + (lane >> 4) * 8) * 2;
                    attn_ldsm4(Ps + ao, pa[mt][0], pa[mt][1], pa[mt][2], pa[mt][3]);
                    attn_ldsm4(Ds + ao, da[mt][0], da[mt][1], da[mt][2], da[mt][3]);
                }
#pragma unroll
                for (int p = 0; p < HT / 2; p++) {
                    const unsigned bo =
                        ((kk * 16 + (lane & 15)) * P + qh * (D / 2) + p * 16 + (lane >> 4) * 8) * 2;
                    unsigned b0, b1, b2, b3;
                    attn_ldsm4_t(gb + bo, b0, b1, b2, b3);
#pragma unroll
                    for (int mt = 0; mt < 2; mt++) {
                        attn_mma<BF>(adv[mt][2 * p], pa[mt], b0, b1);
                        attn_mma<BF>(adv[mt][2 * p + 1], pa[mt], b2, b3);
                    }
                    attn_ldsm4_t(qb + bo, b0, b1, b2, b3);
#pragma unroll
                    for (int mt = 0; mt < 2; mt++) {
                        attn_mma<BF>(adk[mt][2 * p], da[mt], b0, b1);
                        attn_mma<BF>(adk[mt][2 * p + 1], da[mt], b2, b3);
                    }
                }
            }
        }
        attn_cp_wait<0>();
        __syncthreads(); // the tiles are reloaded for the next work item
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const i64 j = n0 + rk + mt * 16 + (lane >> 2) + h * 8;
                if (j >= S) continue;
                unsigned short *krow = dk + (bt * S + j) * D, *vrow = dv + (bt * S + j) * D;
#pragma unroll
                for (int t2 = 0; t2 < HT; t2++) {
                    const int col = qh * (D / 2) + t2 * 8 + (lane & 3) * 2;
                    *(unsigned *)(krow + col) = attn_pack<BF>(adk[mt][t2][2 * h] * g.scale,
                                                              adk[mt][t2][2 * h + 1] * g.scale);
                    *(unsigned *)(vrow + col) =
                        attn_pack<BF>(adv[mt][t2][2 * h], adv[mt][t2][2 * h + 1]);
                }
            }
    }
}

#define ATTN_BWD(NAME, BF, D, MK)                                                                  \
    extern "C" __global__ void __launch_bounds__(128, 2)                                           \
        em_attn_bwd_dq_##NAME(const unsigned short *q, const unsigned short *k,                    \
                              const unsigned short *v, const unsigned short *o,                    \
                              const unsigned short *dout, const void *mask, unsigned short *dq,    \
                              float *lse, float *dd, const float *lse_in, attn_bwd_arg g)          \
    {                                                                                              \
        attn_bwd_dq<BF, D, MK>(q, k, v, o, dout, mask, dq, lse, dd, lse_in, g);                    \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(128, 2)                                           \
        em_attn_bwd_dq2_##NAME(const unsigned short *q, const unsigned short *k,                   \
                               const unsigned short *v, const unsigned short *o,                   \
                               const unsigned short *dout, const void *mask, unsigned short *dq,   \
                               float *dd, const float *lse_in, attn_bwd_arg g)                     \
    {                                                                                              \
        attn_bwd_dq2<BF, D, MK>(q, k, v, o, dout, mask, dq, dd, lse_in, g);                        \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(256, 1)                                           \
        em_attn_bwd_dkdv2_##NAME(const unsigned short *q, const unsigned short *k,                 \
                                 const unsigned short *v, const unsigned short *dout,              \
                                 const void *mask, const float *lse, const float *dd,              \
                                 unsigned short *dk, unsigned short *dv, attn_bwd_arg g)           \
    {                                                                                              \
        attn_bwd_dkdv2<BF, D, MK>(q, k, v, dout, mask, lse, dd, dk, dv, g);                        \
    }
#define ATTN_BWD3(NAME, BF, D)                                                                     \
    ATTN_BWD(NAME, BF, D, 0) ATTN_BWD(NAME##_mbool, BF, D, 1) ATTN_BWD(NAME##_madd, BF, D, 2)
ATTN_BWD3(f16_d64, 0, 64)
ATTN_BWD3(f16_d128, 0, 128)
ATTN_BWD3(bf16_d64, 1, 64)
ATTN_BWD3(bf16_d128, 1, 128)
