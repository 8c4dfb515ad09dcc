// ---- flash attention forward, f16/bf16, head dim D = E = Ev of 64 or 128 -----------------------
// S = Q K^T and O += P V on mma.sync m16n8k16 with f32 accumulation; the softmax is online, in
// base 2 (scores times scale * log2 e), with the row max and sum kept per thread and combined over
// the four lanes that share a row. Causal (key j > query i masked): tiles past the block's last
// row are skipped, and blocks start from the heaviest. out [..., L, D] contiguous. A mask (bool:
// false drops the key; additive, of the input type) is read per score, any strides.
// One block of 4 warps per 128 query rows; each warp owns 32 rows (two m16
// tiles), so every K or V fragment read from shared memory feeds two mma.sync instead of one. Q
// stays in shared memory and its fragments are read per k-step (two ldmatrix per 16 MMAs of
// S = Q K^T), which leaves the registers to the 2 x 16 x 64 scores and the 2 x 16 x D output.
// K and V tiles of 64 keys are double-buffered in separate cp.async groups: S = Q K^T waits only
// for K, V is awaited just before O += P V (P is packed to the input type before that wait, so
// the f32 scores are dead by then). O is rescaled only when a row max of the warp moved. Two
// blocks per multiprocessor (4 x 64 + 32 registers of accumulators and scores per thread at D =
// 128). With lse non-NULL each row's base-2 log-sum-exp goes there too (attn_store_lse).
#include "attention_flash.cuh"
#include "attention_mma.cuh"

template <int BF, int D, int MK>
__device__ void attn_flash2(const unsigned short *q, const unsigned short *k,
                            const unsigned short *v, const void *mask, unsigned short *out,
                            float *lse, const attn_flash_arg &g)
{
    constexpr int P = D + 8;        // smem pitch in halves
    constexpr int KT = D / 16;      // k-steps of S = Q K^T
    constexpr int NT = ATTN_BN / 8; // n-tiles of S (keys)
    constexpr int OT = D / 8;       // n-tiles of O
    constexpr int CH = D / 8;       // 16-byte chunks per row
    constexpr int NTH = 128;        // threads per block
    unsigned short *attn_f2sm = attn_dyn_smem();
    // shared-window byte addresses: Q [128][P], K [2][64][P], V [2][64][P] (halves)
    const unsigned Qs = attn_smem(attn_f2sm);
    const unsigned Ks = Qs + ATTN_BM * P * 2;
    const unsigned Vs = Ks + 2 * ATTN_BN * P * 2;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const float ninf = -__int_as_float(0x7f800000);
    const i64 L = g.L, S = g.S;
    const i64 mblocks = (L + ATTN_BM - 1) / ATTN_BM;
    for (i64 work = (i64)blockIdx.y * gridDim.x + blockIdx.x; work < mblocks * g.nbatch;
         work += (i64)gridDim.x * gridDim.y) {
        i64 bt, mb;
        if (g.causal) {
            i64 mi = work / g.nbatch;
            bt = work - mi * g.nbatch;
            mb = mblocks - 1 - mi;
        } else {
            bt = work / mblocks;
            mb = work - bt * mblocks;
        }
        const i64 m0 = mb * ATTN_BM;
        i64 qo = 0, ko = 0, vo = 0, mo = 0, rem = bt;
        for (int d = g.nb - 1; d >= 0; d--) {
            i64 qt = rem / g.bshape[d], c = rem - qt * g.bshape[d];
            qo += c * g.qb[d];
            ko += c * g.kb[d];
            vo += c * g.vb[d];
            mo += c * g.mb[d];
            rem = qt;
        }
        const unsigned short *qg = q + qo, *kg = k + ko, *vg = v + vo;
        i64 kend = S;
        if (g.causal && m0 + ATTN_BM < kend) kend = m0 + ATTN_BM;
        const int ntiles = (int)((kend + ATTN_BN - 1) / ATTN_BN);

        // one 64-row tile of x (K or V) into dst; rows past S zero-filled. Thread tid copies the
        // 16-byte chunk tid % CH of rows tid / CH + it * NTH / CH.
        const int lrow0 = tid / CH, lcol = (tid % CH) * 8;
        auto load_tile = [&](unsigned dst, const unsigned short *x, i64 xs, int t) {
            const i64 j0 = (i64)t * ATTN_BN + lrow0;
            const unsigned short *src = x + j0 * xs + lcol;
            const unsigned d0 = dst + (lrow0 * P + lcol) * 2;
#pragma unroll
            for (int it = 0; it < ATTN_BN * CH / NTH; it++) {
                bool ok = j0 + it * (NTH / CH) < S;
                attn_cp16(d0 + it * (NTH / CH) * P * 2, ok ? src : x, ok);
                src += (NTH / CH) * xs;
            }
        };
        {
            const unsigned short *src = qg + (m0 + lrow0) * g.qs + lcol;
            const unsigned d0 = Qs + (lrow0 * P + lcol) * 2;
#pragma unroll
            for (int it = 0; it < ATTN_BM * CH / NTH; it++) {
                bool ok = m0 + lrow0 + it * (NTH / CH) < L;
                attn_cp16(d0 + it * (NTH / CH) * P * 2, ok ? src : qg, ok);
                src += (NTH / CH) * g.qs;
            }
        }
        // groups in flight at the top of iteration t: K(t) (with Q when t = 0), then V(t)
        if (ntiles > 0) load_tile(Ks, kg, g.ks, 0);
        attn_cp_commit();
        if (ntiles > 0) load_tile(Vs, vg, g.vs, 0);
        attn_cp_commit();

        float o[2][OT][4];
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int t2 = 0; t2 < OT; t2++)
                o[mt][t2][0] = o[mt][t2][1] = o[mt][t2][2] = o[mt][t2][3] = 0.f;
        // this thread's rows: qi0 + 8 h for h = 0..3 (m-tile h >> 1, accumulator half h & 1)
        float mrow[4] = {ninf, ninf, ninf, ninf}, lrow[4] = {0.f, 0.f, 0.f, 0.f};
        const int r0 = warp * 32; // the warp's first row in the block
        const i64 qi0 = m0 + r0 + (lane >> 2);

        for (int t = 0; t < ntiles; t++) {
            attn_cp_wait<1>(); // K(t) landed
            __syncthreads(); // ... for every thread, and all are done with tile t - 1
            if (t + 1 < ntiles) load_tile(Ks + ((t + 1) & 1) * ATTN_BN * P * 2, kg, g.ks, t + 1);
            attn_cp_commit();
            if (t + 1 < ntiles) load_tile(Vs + ((t + 1) & 1) * ATTN_BN * P * 2, vg, g.vs, t + 1);
            attn_cp_commit();
            const unsigned kb = Ks + (t & 1) * ATTN_BN * P * 2;
            const unsigned vb = Vs + (t & 1) * ATTN_BN * P * 2;
            const i64 n0 = (i64)t * ATTN_BN;
            // S = Q K^T: [2 x 16 x 64] per warp
            float s[2][NT][4];
#pragma unroll
            for (int mt = 0; mt < 2; mt++)
#pragma unroll
                for (int n = 0; n < NT; n++)
                    s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
#pragma unroll
            for (int kk = 0; kk < KT; kk++) {
                unsigned qa[2][4];
#pragma unroll
                for (int mt = 0; mt < 2; mt++)
                    attn_ldsm4(Qs + ((r0 + mt * 16 + (lane & 15)) * P + kk * 16 + (lane >> 4) * 8) *
                                        2,
                               qa[mt][0], qa[mt][1], qa[mt][2], qa[mt][3]);
#pragma unroll
                for (int p = 0; p < NT / 2; p++) {
                    unsigned b0, b1, b2, b3;
                    attn_ldsm4(kb + ((p * 16 + (lane & 7) + ((lane >> 4) << 3)) * P + kk * 16 +
                                     ((lane >> 3) & 1) * 8) *
                                        2,
                               b0, b1, b2, b3);
#pragma unroll
                    for (int mt = 0; mt < 2; mt++) {
                        attn_mma<BF>(s[mt][2 * p], qa[mt], b0, b1);
                        attn_mma<BF>(s[mt][2 * p + 1], qa[mt], b2, b3);
                    }
                }
            }
            // masks: keys past S, causal keys past the row, the mask tensor. Key n0 + jr
            // of row qi0 + ir (jr < 64, ir < 32) is past S when jr >= slim and past the row
            // when jr > cd + ir (both clamped to int, where they decide the same); with
            // jr = (lane & 3) * 2 + jc, key jc of row ir is dropped when jc >= lim.
            const bool edge = n0 + ATTN_BN > S || (g.causal && n0 + ATTN_BN - 1 > m0 + r0) || MK;
            if (edge) {
                const int slim = (int)(S - n0 < ATTN_BN ? S - n0 : ATTN_BN);
                const i64 dq = qi0 - n0;
                const int cd = !g.causal           ? ATTN_BN
                               : dq > ATTN_BN      ? ATTN_BN
                               : dq < -2 * ATTN_BN ? -2 * ATTN_BN
                                                   : (int)dq;
#pragma unroll
                for (int h = 0; h < 4; h++) {
                    const int ir = h * 8;
                    const i64 i = qi0 + ir;
                    const i64 mrb = mo + i * g.ms[0] + (n0 + (lane & 3) * 2) * g.ms[1];
                    const int lim = min(slim, cd + ir + 1) - (lane & 3) * 2;
#pragma unroll
                    for (int n = 0; n < NT; n++)
#pragma unroll
                        for (int e = 0; e < 2; e++) {
                            float &x = s[h >> 1][n][2 * (h & 1) + e];
                            if (n * 8 + e >= lim)
                                x = ninf;
                            else if (MK && i < L) {
                                i64 mi = mrb + (n * 8 + e) * g.ms[1];
                                if (MK == 1) {
                                    if (!((const unsigned char *)mask)[mi]) x = ninf;
                                } else
                                    x += attn_h2f<BF>(((const unsigned short *)mask)[mi]) *
                                         g.inv_scale;
                            }
                        }
                }
            }
            // online softmax, four rows per thread
            float alpha[4];
#pragma unroll
            for (int h = 0; h < 4; h++) {
                const int c0 = 2 * (h & 1);
                float mx = ninf;
#pragma unroll
                for (int n = 0; n < NT; n++)
                    mx = fmaxf(mx, fmaxf(s[h >> 1][n][c0], s[h >> 1][n][c0 + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                float mnew = fmaxf(mrow[h], mx * g.scale_log2);
                float mu = mnew == ninf ? 0.f : mnew; // a row with nothing kept yet
                alpha[h] = mnew == mrow[h] ? 1.f : attn_exp2(mrow[h] - mu);
                mrow[h] = mnew;
                float sum = 0.f;
#pragma unroll
                for (int n = 0; n < NT; n++) {
                    float p0 = attn_exp2(fmaf(s[h >> 1][n][c0], g.scale_log2, -mu));
                    float p1 = attn_exp2(fmaf(s[h >> 1][n][c0 + 1], g.scale_log2, -mu));
                    s[h >> 1][n][c0] = p0;
                    s[h >> 1][n][c0 + 1] = p1;
                    sum += p0 + p1;
                }
                lrow[h] = lrow[h] * alpha[h] + sum;
            }
            if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f || alpha[2] != 1.f ||
                                            alpha[3] != 1.f)) {
#pragma unroll
                for (int mt = 0; mt < 2; mt++)
#pragma unroll
                    for (int t2 = 0; t2 < OT; t2++) {
                        o[mt][t2][0] *= alpha[2 * mt];
                        o[mt][t2][1] *= alpha[2 * mt];
                        o[mt][t2][2] *= alpha[2 * mt + 1];
                        o[mt][t2][3] *= alpha[2 * mt + 1];
                    }
            }
            // P in the input type, laid out as the A operand (the C layout of two n-tiles is
            // the A layout)
            unsigned pa[2][ATTN_BN / 16][4];
#pragma unroll
            for (int mt = 0; mt < 2; mt++)
#pragma unroll
                for (int kk = 0; kk < ATTN_BN / 16; kk++) {
                    pa[mt][kk][0] = attn_pack<BF>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
                    pa[mt][kk][1] = attn_pack<BF>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                    pa[mt][kk][2] = attn_pack<BF>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
                    pa[mt][kk][3] = attn_pack<BF>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
                }
            attn_cp_wait<2>(); // V(t) landed
            __syncthreads();
            // O += P V
#pragma unroll
            for (int kk = 0; kk < ATTN_BN / 16; kk++)
#pragma unroll
                for (int p = 0; p < OT / 2; p++) {
                    unsigned b0, b1, b2, b3;
                    attn_ldsm4_t(vb + ((kk * 16 + (lane & 15)) * P + p * 16 + (lane >> 4) * 8) * 2,
                                 b0, b1, b2, b3);
#pragma unroll
                    for (int mt = 0; mt < 2; mt++) {
                        attn_mma<BF>(o[mt][2 * p], pa[mt][kk], b0, b1);
                        attn_mma<BF>(o[mt][2 * p + 1], pa[mt][kk], b2, b3);
                    }
                }
        }
        attn_cp_wait<0>();
        __syncthreads(); // Q, K and V are reloaded for the next work item

        // finish: the row sums over the quad, then O / l (and lse, when asked)
#pragma unroll
        for (int h = 0; h < 4; h++) {
            float l = lrow[h];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            lrow[h] = 1.f / l;
            attn_store_lse(lse, bt * L, qi0 + h * 8, L, mrow[h], l);
        }
#pragma unroll
        for (int h = 0; h < 4; h++) {
            i64 i = qi0 + h * 8;
            if (i >= L) continue;
            const int mt = h >> 1, c0 = 2 * (h & 1);
            unsigned short *orow = out + (bt * L + i) * D;
#pragma unroll
            for (int t2 = 0; t2 < OT; t2++) {
                int col = t2 * 8 + (lane & 3) * 2;
                *(unsigned *)(orow + col) =
                    attn_pack<BF>(o[mt][t2][c0] * lrow[h], o[mt][t2][c0 + 1] * lrow[h]);
            }
        }
    }
}

#define ATTN_FLASH2(NAME, BF, D, MK)                                                               \
    extern "C" __global__ void __launch_bounds__(128, 2)                                           \
        NAME(const unsigned short *q, const unsigned short *k, const unsigned short *v,            \
             const void *mask, unsigned short *out, float *lse, attn_flash_arg g)                  \
    {                                                                                              \
        attn_flash2<BF, D, MK>(q, k, v, mask, out, lse, g);                                        \
    }
#define ATTN_FLASH2_3(NAME, BF, D)                                                                 \
    ATTN_FLASH2(NAME, BF, D, 0)                                                                    \
    ATTN_FLASH2(NAME##_mbool, BF, D, 1) ATTN_FLASH2(NAME##_madd, BF, D, 2)
ATTN_FLASH2_3(em_attn_flash2_f16_d64, 0, 64)
ATTN_FLASH2_3(em_attn_flash2_f16_d128, 0, 128)
ATTN_FLASH2_3(em_attn_flash2_bf16_d64, 1, 64)
ATTN_FLASH2_3(em_attn_flash2_bf16_d128, 1, 128)
