// Scaled dot-product attention (the SDPA record): a general kernel for every dtype, mask and
// layout that computes in f64 as the CPU backend does, and a flash-attention kernel for f16/bf16
// with head dim 64 or 128 (tensor cores, online softmax, no L x S matrix in memory).
// Names start with attn_ / em_attn_ (the module is one translation unit).

// Geometry of one SDPA record; element strides, batch dims right-aligned to the output's batch
// shape with stride 0 where an input is broadcast. Matches attn_geo in cuda_attention.c.
struct attn_geo {
    i64 bshape[8];
    i64 qb[8], kb[8], vb[8], mb[8];
    i64 qs[2], ks[2], vs[2], ms[2]; // row and column strides (mask: 0 on broadcast dims)
    i64 L, S, E, Ev, nbatch;
    double scale;
    int nb, causal, mkind; // mkind: 0 none, 1 bool (true = attend), 2 additive
};

template <int DT> struct attn_t;
template <> struct attn_t<0> { // f32
    typedef float T;
    static __device__ __forceinline__ double get(T v)
    {
        return (double)v;
    }
    static __device__ __forceinline__ T put(double d)
    {
        return (float)d;
    }
};
template <> struct attn_t<1> { // f64
    typedef double T;
    static __device__ __forceinline__ double get(T v)
    {
        return v;
    }
    static __device__ __forceinline__ T put(double d)
    {
        return d;
    }
};
template <> struct attn_t<2> { // f16
    typedef unsigned short T;
    static __device__ __forceinline__ double get(T v)
    {
        float f;
        asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(v));
        return (double)f;
    }
    static __device__ __forceinline__ T put(double d)
    {
        unsigned short h;
        asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(h) : "f"((float)d));
        return h;
    }
};
template <> struct attn_t<3> { // bf16
    typedef unsigned short T;
    static __device__ __forceinline__ double get(T v)
    {
        return (double)__uint_as_float((unsigned)v << 16);
    }
    static __device__ __forceinline__ T put(double d)
    {
        unsigned short h;
        asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(h) : "f"((float)d));
        return h;
    }
};

#define ATTN_THREADS 128

// Fixed-tree block reduction (max when MX, else sum) of 128 values; every thread gets the result.
template <int MX> __device__ double attn_reduce(double v, double *red)
{
    const int tid = threadIdx.x;
    red[tid] = v;
    __syncthreads();
    for (int w = ATTN_THREADS / 2; w > 0; w >>= 1) {
        if (tid < w) {
            double a = red[tid], b = red[tid + w];
            red[tid] = MX ? (b > a ? b : a) : a + b;
        }
        __syncthreads();
    }
    double r = red[0];
    __syncthreads();
    return r;
}

// One block per (batch, query row); three passes over the keys: the max score, the sum of
// exp(score - max), then the weighted sum of v in key order (the CPU's order), 128 keys at a time.
// Scores are cached in shared memory when S fits (cache_s), the q row when E fits (cache_q).
// q [..., L, E], k [..., S, E], v [..., S, Ev], mask -> out [..., L, Ev] contiguous.
template <int DT>
__device__ void attn_general(const typename attn_t<DT>::T *q, const typename attn_t<DT>::T *k,
                             const typename attn_t<DT>::T *v, const void *mask,
                             typename attn_t<DT>::T *out, const attn_geo &g, int cache_q,
                             int cache_s)
{
    typedef attn_t<DT> A;
    extern __shared__ __align__(16) double attn_sm[];
    __shared__ double red[ATTN_THREADS];
    __shared__ double pj[ATTN_THREADS];
    double *qsh = attn_sm, *ssh = attn_sm + (cache_q ? g.E : 0);
    const int tid = threadIdx.x;
    const i64 rows = g.nbatch * g.L;
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const i64 b = r / g.L, i = r - b * g.L;
        i64 qo = 0, ko = 0, vo = 0, mo = 0, rem = b;
        for (int d = g.nb - 1; d >= 0; d--) {
            i64 qt = rem / g.bshape[d], c = rem - qt * g.bshape[d];
            qo += c * g.qb[d];
            ko += c * g.kb[d];
            vo += c * g.vb[d];
            mo += c * g.mb[d];
            rem = qt;
        }
        const typename A::T *qr = q + qo + i * g.qs[0];
        const typename A::T *kb = k + ko, *vb = v + vo;
        mo += i * g.ms[0];
        typename A::T *orow = out + r * g.Ev;
        if (g.S == 0) {
            for (i64 e = tid; e < g.Ev; e += ATTN_THREADS) orow[e] = A::put(0.0);
            continue;
        }
        if (cache_q) {
            for (i64 e = tid; e < g.E; e += ATTN_THREADS) qsh[e] = A::get(qr[e * g.qs[1]]);
            __syncthreads();
        }
        auto score = [&](i64 j) -> double {
            bool keep = !(g.causal && j > i);
            double add = 0;
            if (g.mkind == 1)
                keep = keep && ((const unsigned char *)mask)[mo + j * g.ms[1]] != 0;
            else if (g.mkind == 2)
                add = A::get(((const typename A::T *)mask)[mo + j * g.ms[1]]);
            if (!keep) return -__longlong_as_double(0x7ff0000000000000ll);
            const typename A::T *kr = kb + j * g.ks[0];
            double dot = 0;
            for (i64 e = 0; e < g.E; e++)
                dot += (cache_q ? qsh[e] : A::get(qr[e * g.qs[1]])) * A::get(kr[e * g.ks[1]]);
            return dot * g.scale + add;
        };
        const double ninf = -__longlong_as_double(0x7ff0000000000000ll);
        double mx = ninf;
        for (i64 j = tid; j < g.S; j += ATTN_THREADS) {
            double sc = score(j);
            if (cache_s) ssh[j] = sc;
            if (sc > mx) mx = sc;
        }
        mx = attn_reduce<1>(mx, red); // also orders the ssh writes before the reads below
        double sum = 0;
        for (i64 j = tid; j < g.S; j += ATTN_THREADS) {
            double sc = cache_s ? ssh[j] : score(j);
            sum += mx == ninf ? __longlong_as_double(0x7ff8000000000000ll) : exp(sc - mx);
        }
        sum = attn_reduce<0>(sum, red);
        // Ev in chunks of 4 * 128 outputs per pass (registers); more passes recompute p
        for (i64 e0 = 0; e0 < g.Ev; e0 += 4 * ATTN_THREADS) {
            double acc[4] = {0, 0, 0, 0};
            for (i64 j0 = 0; j0 < g.S; j0 += ATTN_THREADS) {
                i64 j = j0 + tid;
                if (j < g.S) {
                    double sc = cache_s ? ssh[j] : score(j);
                    double s =
                        mx == ninf ? __longlong_as_double(0x7ff8000000000000ll) : exp(sc - mx);
                    pj[tid] = s / sum;
                }
                __syncthreads();
                i64 nj = g.S - j0 < ATTN_THREADS ? g.S - j0 : ATTN_THREADS;
                for (i64 jj = 0; jj < nj; jj++) {
                    double p = pj[jj];
                    if (p == 0) continue;
                    const typename A::T *vr = vb + (j0 + jj) * g.vs[0];
#pragma unroll
                    for (int t = 0; t < 4; t++) {
                        i64 e = e0 + t * ATTN_THREADS + tid;
                        if (e < g.Ev) acc[t] += p * A::get(vr[e * g.vs[1]]);
                    }
                }
                __syncthreads();
            }
#pragma unroll
            for (int t = 0; t < 4; t++) {
                i64 e = e0 + t * ATTN_THREADS + tid;
                if (e < g.Ev) orow[e] = A::put(acc[t]);
            }
        }
        __syncthreads(); // qsh and ssh are rewritten for the next row
    }
}

#define ATTN_GENERAL(NAME, DT)                                                                     \
    extern "C" __global__ void __launch_bounds__(ATTN_THREADS) NAME(                               \
        const attn_t<DT>::T *q, const attn_t<DT>::T *k, const attn_t<DT>::T *v, const void *mask,  \
        attn_t<DT>::T *out, attn_geo g, int cache_q, int cache_s, const int *only_if)              \
    {                                                                                              \
        if (only_if && !*only_if) return; /* the matmul path's output stands */                    \
        attn_general<DT>(q, k, v, mask, out, g, cache_q, cache_s);                                 \
    }
ATTN_GENERAL(em_attn_general_f32, 0)
ATTN_GENERAL(em_attn_general_f64, 1)
ATTN_GENERAL(em_attn_general_f16, 2)
ATTN_GENERAL(em_attn_general_bf16, 3)

// ---- flash attention forward, f16/bf16, head dim D = E = Ev of 64 or 128 -----------------------
// One block of 8 warps per 128 query rows of one batch index; each warp owns 16 rows, its Q
// fragments held in registers for the whole pass. K and V tiles of 64 keys are double-buffered in
// shared memory with cp.async (rows padded by 8 halves so ldmatrix rows fall in distinct banks).
// S = Q K^T and O += P V on mma.sync m16n8k16 with f32 accumulation; the softmax is online, in
// base 2 (scores times scale * log2 e), with the row max and sum kept per thread and combined over
// the four lanes that share a row. Causal (key j > query i masked): tiles past the block's last
// row are skipped, and blocks start from the heaviest. Inputs: last dim contiguous, row strides
// multiples of 8 halves, 16-byte aligned bases (the host checks); out [..., L, D] contiguous. A
// mask (bool: false drops the key; additive, of the input type) is read per score, any strides.

#define ATTN_BM 128
#define ATTN_BN 64

__device__ __forceinline__ unsigned attn_smem(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void attn_cp16(unsigned dst, const void *src, bool valid)
{
    int n = valid ? 16 : 0; // nothing read: the 16 bytes are zero-filled
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}

__device__ __forceinline__ void attn_ldsm4(unsigned addr, unsigned &r0, unsigned &r1, unsigned &r2,
                                           unsigned &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

// A 32-bit store to the shared-window byte address addr.
__device__ __forceinline__ void attn_sts32(unsigned addr, unsigned x)
{
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(x));
}

__device__ __forceinline__ void attn_ldsm4_t(unsigned addr, unsigned &r0, unsigned &r1,
                                             unsigned &r2, unsigned &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

template <int BF>
__device__ __forceinline__ void attn_mma(float *c, const unsigned *a, unsigned b0, unsigned b1)
{
    if (BF)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats rounded to nearest even, packed low = x, high = y.
template <int BF> __device__ __forceinline__ unsigned attn_pack(float x, float y)
{
    unsigned r;
    if (BF)
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(y), "f"(x));
    else
        asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(y), "f"(x));
    return r;
}

// Row i's base-2 log-sum-exp from its running max m (scaled, base 2) and sum l of 2^(s - m), into
// lse[base + i] by the first lane of the row's quad; +inf where every key was masked (m = -inf:
// the backward then takes P = 0). Nothing when lse is NULL or the row is past L.
__device__ __forceinline__ void attn_store_lse(float *lse, i64 base, i64 i, i64 L, float m,
                                               float l)
{
    if (lse && i < L && (threadIdx.x & 3) == 0)
        lse[base + i] = m == -__int_as_float(0x7f800000) ? __int_as_float(0x7f800000) : m + log2f(l);
}

__device__ __forceinline__ float attn_exp2(float x)
{
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
    return r;
}

struct attn_flash_arg {
    i64 bshape[8];
    i64 qb[8], kb[8], vb[8], mb[8]; // batch strides (elements), 0 where broadcast
    i64 qs, ks, vs;                 // row strides (elements)
    i64 ms[2];                      // mask row and column strides (0 where broadcast)
    i64 L, S, nbatch;
    float scale_log2; // scale * log2(e)
    float inv_scale;  // an additive mask enters the raw scores as add / scale
    int nb, causal, mkind;
};

template <int BF> __device__ __forceinline__ float attn_h2f(unsigned short h)
{
    if (BF) return __uint_as_float((unsigned)h << 16);
    float f;
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(h));
    return f;
}

// MK: the mask kind (0 none, 1 bool, 2 additive), fixed per kernel so the plain one keeps its
// registers.
template <int BF, int D, int MK>
__device__ void attn_flash(const unsigned short *q, const unsigned short *k,
                           const unsigned short *v, const void *mask, unsigned short *out,
                           float *lse, const attn_flash_arg &g)
{
    constexpr int P = D + 8;        // smem pitch in halves
    constexpr int KT = D / 16;      // k-steps of S = Q K^T
    constexpr int NT = ATTN_BN / 8; // n-tiles of S (keys)
    constexpr int OT = D / 8;       // n-tiles of O
    constexpr int CH = D / 8;       // 16-byte chunks per row
    extern __shared__ __align__(16) unsigned short attn_fsm[];
    unsigned short *Qs = attn_fsm;             // [128][P]
    unsigned short *Ks = Qs + ATTN_BM * P;     // [2][64][P]
    unsigned short *Vs = Ks + 2 * ATTN_BN * P; // [2][64][P]
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const float ninf = -__int_as_float(0x7f800000);
    const i64 L = g.L, S = g.S;
    const i64 mblocks = (L + ATTN_BM - 1) / ATTN_BM;
    for (i64 work = (i64)blockIdx.y * gridDim.x + blockIdx.x; work < mblocks * g.nbatch;
         work += (i64)gridDim.x * gridDim.y) {
        // non-causal: a batch index's row blocks run together (its K and V stay in L2); causal:
        // the row blocks with the most key tiles first, over all batch indices
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

        auto load_kv = [&](int buf, int t) {
            const i64 n0 = (i64)t * ATTN_BN;
            unsigned short *kd = Ks + buf * ATTN_BN * P, *vd = Vs + buf * ATTN_BN * P;
#pragma unroll
            for (int it = 0; it < ATTN_BN * CH / 256; it++) {
                int c = tid + it * 256, row = c / CH, col = (c % CH) * 8;
                i64 j = n0 + row;
                bool ok = j < S;
                attn_cp16(attn_smem(kd + row * P + col), ok ? kg + j * g.ks + col : kg, ok);
                attn_cp16(attn_smem(vd + row * P + col), ok ? vg + j * g.vs + col : vg, ok);
            }
        };
#pragma unroll
        for (int it = 0; it < ATTN_BM * CH / 256; it++) {
            int c = tid + it * 256, row = c / CH, col = (c % CH) * 8;
            i64 i = m0 + row;
            bool ok = i < L;
            attn_cp16(attn_smem(Qs + row * P + col), ok ? qg + i * g.qs + col : qg, ok);
        }
        if (ntiles > 0) load_kv(0, 0);
        asm volatile("cp.async.commit_group;\n" ::);

        float o[OT][4];
#pragma unroll
        for (int t = 0; t < OT; t++) o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.f;
        float mrow[2] = {ninf, ninf}, lrow[2] = {0.f, 0.f};
        unsigned qf[KT][4];
        const int r0 = warp * 16;              // the warp's first row in the block
        const i64 qi0 = m0 + r0 + (lane >> 2); // this thread's rows: qi0 and qi0 + 8

        for (int t = 0; t < ntiles; t++) {
            if (t + 1 < ntiles) load_kv((t + 1) & 1, t + 1);
            asm volatile("cp.async.commit_group;\n" ::);
            asm volatile("cp.async.wait_group 1;\n" ::);
            __syncthreads();
            if (t == 0) {
#pragma unroll
                for (int kk = 0; kk < KT; kk++)
                    attn_ldsm4(attn_smem(Qs + (r0 + (lane & 15)) * P + kk * 16 + (lane >> 4) * 8),
                               qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3]);
            }
            const unsigned short *kb = Ks + (t & 1) * ATTN_BN * P;
            const unsigned short *vb = Vs + (t & 1) * ATTN_BN * P;
            const i64 n0 = (i64)t * ATTN_BN;
            // S = Q K^T: [16 x 64] per warp
            float s[NT][4];
#pragma unroll
            for (int n = 0; n < NT; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
            for (int kk = 0; kk < KT; kk++)
#pragma unroll
                for (int p = 0; p < NT / 2; p++) {
                    unsigned b0, b1, b2, b3;
                    attn_ldsm4(attn_smem(kb + (p * 16 + (lane & 7) + ((lane >> 4) << 3)) * P +
                                         kk * 16 + ((lane >> 3) & 1) * 8),
                               b0, b1, b2, b3);
                    attn_mma<BF>(s[2 * p], qf[kk], b0, b1);
                    attn_mma<BF>(s[2 * p + 1], qf[kk], b2, b3);
                }
            // masks: keys past S, causal keys past the row, the mask tensor
            const bool edge = n0 + ATTN_BN > S || (g.causal && n0 + ATTN_BN - 1 > m0 + r0) || MK;
            if (edge) {
#pragma unroll
                for (int n = 0; n < NT; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        i64 j = n0 + n * 8 + (lane & 3) * 2 + (e & 1);
                        i64 i = qi0 + (e >> 1) * 8;
                        if (j >= S || (g.causal && j > i))
                            s[n][e] = ninf;
                        else if (MK && i < L) {
                            i64 mi = mo + i * g.ms[0] + j * g.ms[1];
                            if (MK == 1) {
                                if (!((const unsigned char *)mask)[mi]) s[n][e] = ninf;
                            } else
                                s[n][e] +=
                                    attn_h2f<BF>(((const unsigned short *)mask)[mi]) * g.inv_scale;
                        }
                    }
            }
            // online softmax, two rows per thread
            float alpha[2];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                float mx = ninf;
#pragma unroll
                for (int n = 0; n < NT; n++) mx = fmaxf(mx, fmaxf(s[n][2 * h], s[n][2 * h + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                float mnew = fmaxf(mrow[h], mx * g.scale_log2);
                float mu = mnew == ninf ? 0.f : mnew; // a row with nothing kept yet
                alpha[h] = attn_exp2(mrow[h] - mu);
                mrow[h] = mnew;
                float sum = 0.f;
#pragma unroll
                for (int n = 0; n < NT; n++) {
                    float p0 = attn_exp2(fmaf(s[n][2 * h], g.scale_log2, -mu));
                    float p1 = attn_exp2(fmaf(s[n][2 * h + 1], g.scale_log2, -mu));
                    s[n][2 * h] = p0;
                    s[n][2 * h + 1] = p1;
                    sum += p0 + p1;
                }
                lrow[h] = lrow[h] * alpha[h] + sum;
            }
#pragma unroll
            for (int t2 = 0; t2 < OT; t2++) {
                o[t2][0] *= alpha[0];
                o[t2][1] *= alpha[0];
                o[t2][2] *= alpha[1];
                o[t2][3] *= alpha[1];
            }
            // O += P V: P from the S accumulators (the C layout of two n-tiles is the A layout)
#pragma unroll
            for (int kk = 0; kk < ATTN_BN / 16; kk++) {
                unsigned pa[4];
                pa[0] = attn_pack<BF>(s[2 * kk][0], s[2 * kk][1]);
                pa[1] = attn_pack<BF>(s[2 * kk][2], s[2 * kk][3]);
                pa[2] = attn_pack<BF>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
                pa[3] = attn_pack<BF>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
                for (int p = 0; p < OT / 2; p++) {
                    unsigned b0, b1, b2, b3;
                    attn_ldsm4_t(
                        attn_smem(vb + (kk * 16 + (lane & 15)) * P + p * 16 + (lane >> 4) * 8), b0,
                        b1, b2, b3);
                    attn_mma<BF>(o[2 * p], pa, b0, b1);
                    attn_mma<BF>(o[2 * p + 1], pa, b2, b3);
                }
            }
            __syncthreads(); // the next iteration's load overwrites the other buffer
        }
        asm volatile("cp.async.wait_group 0;\n" ::);
        __syncthreads(); // Qs is reloaded for the next work item
                         // finish: the row sums over the quad, then O / l
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float l = lrow[h];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            lrow[h] = 1.f / l;
            attn_store_lse(lse, bt * L, qi0 + h * 8, L, mrow[h], l);
        }
#pragma unroll
        for (int h = 0; h < 2; h++) {
            i64 i = qi0 + h * 8;
            if (i >= L) continue;
            unsigned short *orow = out + (bt * L + i) * D;
#pragma unroll
            for (int t2 = 0; t2 < OT; t2++) {
                int col = t2 * 8 + (lane & 3) * 2;
                *(unsigned *)(orow + col) =
                    attn_pack<BF>(o[t2][2 * h] * lrow[h], o[t2][2 * h + 1] * lrow[h]);
            }
        }
    }
}

// D = 64 without a mask fits in 128 registers, so two blocks share a multiprocessor; else one.
#define ATTN_FLASH(NAME, BF, D, MK)                                                                \
    extern "C" __global__ void __launch_bounds__(256, D == 64 && !MK ? 2 : 1)                      \
        NAME(const unsigned short *q, const unsigned short *k, const unsigned short *v,            \
             const void *mask, unsigned short *out, float *lse, attn_flash_arg g)                  \
    {                                                                                              \
        attn_flash<BF, D, MK>(q, k, v, mask, out, lse, g);                                         \
    }
#define ATTN_FLASH3(NAME, BF, D)                                                                   \
    ATTN_FLASH(NAME, BF, D, 0) ATTN_FLASH(NAME##_mbool, BF, D, 1) ATTN_FLASH(NAME##_madd, BF, D, 2)
ATTN_FLASH3(em_attn_flash_f16_d64, 0, 64)
ATTN_FLASH3(em_attn_flash_f16_d128, 0, 128)
ATTN_FLASH3(em_attn_flash_bf16_d64, 1, 64)
ATTN_FLASH3(em_attn_flash_bf16_d128, 1, 128)
