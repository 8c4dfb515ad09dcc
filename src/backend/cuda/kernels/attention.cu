// Scaled dot-product attention (the SDPA record): a general kernel for every dtype, mask and
// layout that computes in f64 as the CPU backend does. The flash-attention kernels for f16/bf16
// are in attention_flash2.cu (forward) and attention_bwd.cu (backward).
#include "attention.cuh"

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
