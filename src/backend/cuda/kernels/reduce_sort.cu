// Ordering ops (sort, top-k, median) along one dim, mirroring cpu_order.c. Every element becomes
// a 64-bit key whose unsigned order is the op's order (NaN largest, -0 equal to +0, inverted for
// descending) and rows are sorted by (key, position): the positions make every key distinct, so
// any correct sort gives the CPU's stable order. Uses rd_ldf / rd_ldi and struct rdline of
// reduce.cuh.
#include "reduce.cuh"

__device__ __forceinline__ u64 so_key(const void *x, int isf, int dt, i64 off, int desc)
{
    u64 k;
    if (isf) {
        double d = rd_ldf(x, dt, off);
        if (d != d)
            k = ~0ull;
        else {
            if (d == 0) d = 0.0; // -0 sorts with +0
            u64 b = (u64)__double_as_longlong(d);
            k = (b >> 63) ? ~b : b | 0x8000000000000000ull;
        }
    } else {
        k = (u64)rd_ldi(x, dt, off) ^ 0x8000000000000000ull;
    }
    return desc ? ~k : k;
}

__device__ __forceinline__ void so_copy(const void *x, i64 xoff, void *v, i64 voff, int es)
{
    switch (es) {
    case 1: ((unsigned char *)v)[voff] = ((const unsigned char *)x)[xoff]; break;
    case 2: ((unsigned short *)v)[voff] = ((const unsigned short *)x)[xoff]; break;
    case 4: ((unsigned *)v)[voff] = ((const unsigned *)x)[xoff]; break;
    default: ((u64 *)v)[voff] = ((const u64 *)x)[xoff]; break;
    }
}

struct soargs {
    int op;   // 0 sort, 1 top-k, 2 median
    int desc; // sort descending / top-k largest
    int isf, dt, es;
    i64 k; // outputs per row (sort: n, median: 1)
};

// Which sorted position row position j of the output takes (median: (n-1)/2, or the first NaN,
// which an ascending order puts at the first key ~0).
__device__ __forceinline__ i64 so_pick_median(const u64 *key, i64 n, i64 step)
{
    if (key[(n - 1) * step] == ~0ull) {
        i64 lo = 0, hi = n - 1; // first position holding the NaN key
        while (lo < hi) {
            i64 mid = (lo + hi) / 2;
            if (key[mid * step] == ~0ull)
                hi = mid;
            else
                lo = mid + 1;
        }
        return lo;
    }
    return (n - 1) / 2;
}

// Rows of n <= 32: one thread per row, stable insertion sort in registers.
extern "C" __global__ void em_so_small(soargs g, const void *x, void *vals, i64 *ind, rdline s)
{
    for (i64 r = (i64)blockIdx.x * blockDim.x + threadIdx.x; r < s.lines;
         r += (i64)blockDim.x * gridDim.x) {
        i64 xo, o0, o1;
        rd_line(s, r, &xo, &o0, &o1);
        int n = (int)s.len;
        if (g.op == 1 && g.k == 1) { // top-1: the first position of the smallest key
            u64 best = so_key(x, g.isf, g.dt, xo, g.desc);
            int bp = 0;
            for (int i = 1; i < n; i++) {
                u64 kv = so_key(x, g.isf, g.dt, xo + i * s.sx, g.desc);
                if (kv < best) best = kv, bp = i;
            }
            so_copy(x, xo + bp * s.sx, vals, o0, g.es);
            ind[o1] = bp;
            continue;
        }
        u64 key[32];
        int pos[32];
        for (int i = 0; i < n; i++) {
            u64 kv = so_key(x, g.isf, g.dt, xo + i * s.sx, g.desc);
            int j = i;
            while (j > 0 && kv < key[j - 1]) {
                key[j] = key[j - 1];
                pos[j] = pos[j - 1];
                j--;
            }
            key[j] = kv;
            pos[j] = i;
        }
        if (g.op == 2) {
            int p = (int)so_pick_median(key, n, 1);
            so_copy(x, xo + pos[p] * s.sx, vals, o0, g.es);
            ind[o1] = pos[p];
            continue;
        }
        for (int j = 0; j < (int)g.k; j++) {
            so_copy(x, xo + pos[j] * s.sx, vals, o0 + j * s.s0, g.es);
            ind[o1 + j * s.s1] = pos[j];
        }
    }
}

// Rows of n <= P (a power of two, P <= 4096): one block per row, bitonic sort of (key, position)
// in shared memory (P * 12 bytes of dynamic shared memory).
extern "C" __global__ void __launch_bounds__(512)
    em_so_block(soargs g, const void *x, void *vals, i64 *ind, rdline s, int P)
{
    extern __shared__ u64 so_sh[];
    u64 *key = so_sh;
    int *pos = (int *)(so_sh + P);
    const int tid = threadIdx.x, nt = blockDim.x;
    const i64 n = s.len;
    for (i64 r = blockIdx.x; r < s.lines; r += gridDim.x) {
        i64 xo, o0, o1;
        rd_line(s, r, &xo, &o0, &o1);
        for (int i = tid; i < P; i += nt) {
            key[i] = i < n ? so_key(x, g.isf, g.dt, xo + i * s.sx, g.desc) : ~0ull;
            pos[i] = i;
        }
        __syncthreads();
        for (int size = 2; size <= P; size <<= 1) {
            for (int stride = size >> 1; stride > 0; stride >>= 1) {
                for (int i = tid; i < P / 2; i += nt) {
                    int a = 2 * i - (i & (stride - 1)), b = a + stride;
                    u64 ka = key[a], kb = key[b];
                    int pa = pos[a], pb = pos[b];
                    bool gt = ka > kb || (ka == kb && pa > pb);
                    if (gt == ((a & size) == 0)) {
                        key[a] = kb, key[b] = ka;
                        pos[a] = pb, pos[b] = pa;
                    }
                }
                __syncthreads();
            }
        }
        if (g.op == 2) {
            if (tid == 0) {
                i64 p = so_pick_median(key, n, 1);
                so_copy(x, xo + pos[p] * s.sx, vals, o0, g.es);
                ind[o1] = pos[p];
            }
        } else {
            for (i64 j = tid; j < g.k; j += nt) {
                so_copy(x, xo + pos[j] * s.sx, vals, o0 + j * s.s0, g.es);
                ind[o1 + j * s.s1] = pos[j];
            }
        }
        __syncthreads();
    }
}

// Longer rows: a bitonic sort of every row padded to P (a power of two) in global scratch,
// key[row * P + i] and pos[row * P + i]. em_so_gload fills it, em_so_gshared sorts or merges
// tiles of SO_T elements in shared memory, em_so_gstep does the compare-exchange steps whose
// stride is SO_T or more, em_so_gout writes the first k (or the median) of every row.
#define SO_T 4096

extern "C" __global__ void em_so_gload(soargs g, const void *x, rdline s, i64 P, u64 *key,
                                       unsigned *pos)
{
    const i64 total = s.lines * P;
    for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (i64)blockDim.x * gridDim.x) {
        i64 r = t / P, i = t - r * P;
        if (i < s.len) {
            i64 xo, o0, o1;
            rd_line(s, r, &xo, &o0, &o1);
            key[t] = so_key(x, g.isf, g.dt, xo + i * s.sx, g.desc);
        } else {
            key[t] = ~0ull;
        }
        pos[t] = (unsigned)i;
    }
}

__device__ __forceinline__ void so_cx(u64 *key, unsigned *pos, i64 a, i64 b, bool up)
{
    u64 ka = key[a], kb = key[b];
    unsigned pa = pos[a], pb = pos[b];
    bool gt = ka > kb || (ka == kb && pa > pb);
    if (gt == up) {
        key[a] = kb, key[b] = ka;
        pos[a] = pb, pos[b] = pa;
    }
}

// size 0: sorts every tile (sizes 2 .. SO_T); else the strides SO_T / 2 .. 1 of bitonic merge
// `size`. The direction of a pair comes from its position in the row.
extern "C" __global__ void __launch_bounds__(1024)
    em_so_gshared(u64 *key, unsigned *pos, i64 total, i64 P, i64 size)
{
    extern __shared__ u64 so_sh[];
    u64 *k = so_sh;
    unsigned *p = (unsigned *)(so_sh + SO_T);
    const int tid = threadIdx.x, nt = blockDim.x;
    for (i64 base = (i64)blockIdx.x * SO_T; base < total; base += (i64)gridDim.x * SO_T) {
        for (int i = tid; i < SO_T; i += nt) k[i] = key[base + i], p[i] = pos[base + i];
        __syncthreads();
        i64 s0 = size ? size : 2, s1 = size ? size : SO_T;
        for (i64 sz = s0; sz <= s1; sz <<= 1) {
            for (int stride = (int)((size ? SO_T : sz) >> 1); stride > 0; stride >>= 1) {
                for (int i = tid; i < SO_T / 2; i += nt) {
                    int a = 2 * i - (i & (stride - 1));
                    so_cx(k, p, a, a + stride, (((base + a) & (P - 1)) & sz) == 0);
                }
                __syncthreads();
            }
        }
        for (int i = tid; i < SO_T; i += nt) key[base + i] = k[i], pos[base + i] = p[i];
        __syncthreads();
    }
}

extern "C" __global__ void em_so_gstep(u64 *key, unsigned *pos, i64 total, i64 P, i64 size,
                                       i64 stride)
{
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total / 2;
         i += (i64)blockDim.x * gridDim.x) {
        i64 a = 2 * i - (i & (stride - 1));
        so_cx(key, pos, a, a + stride, ((a & (P - 1)) & size) == 0);
    }
}

extern "C" __global__ void em_so_gout(soargs g, const void *x, void *vals, i64 *ind, rdline s,
                                      i64 P, const u64 *key, const unsigned *pos)
{
    const i64 kk = g.op == 2 ? 1 : g.k, total = s.lines * kk;
    for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (i64)blockDim.x * gridDim.x) {
        i64 r = t / kk, j = t - r * kk;
        i64 xo, o0, o1;
        rd_line(s, r, &xo, &o0, &o1);
        if (g.op == 2) j = so_pick_median(key + r * P, s.len, 1);
        i64 q = pos[r * P + j];
        so_copy(x, xo + q * s.sx, vals, o0 + (g.op == 2 ? 0 : j * s.s0), g.es);
        ind[o1 + (g.op == 2 ? 0 : j * s.s1)] = q;
    }
}

// Top-k with small k (k <= 16) of rows over 1024: one block per row; each thread
// keeps the best k of its interleaved share in a sorted register list, then the lists are merged
// pairwise in shared memory by a fixed tree. 128 threads.
extern "C" __global__ void __launch_bounds__(128)
    em_so_topk_small(soargs g, const void *x, void *vals, i64 *ind, rdline s)
{
    __shared__ u64 shk[128 * 16];
    __shared__ i64 shp[128 * 16];
    const int tid = threadIdx.x;
    const int k = (int)g.k;
    const i64 n = s.len;
    for (i64 r = blockIdx.x; r < s.lines; r += gridDim.x) {
        i64 xo, o0, o1;
        rd_line(s, r, &xo, &o0, &o1);
        u64 key[16];
        i64 pos[16];
        int cnt = 0;
        for (i64 i = tid; i < n; i += 128) {
            u64 kv = so_key(x, g.isf, g.dt, xo + i * s.sx, g.desc);
            if (cnt == k && kv >= key[k - 1]) continue; // later positions lose ties
            int j = cnt < k ? cnt++ : k - 1;
            while (j > 0 && kv < key[j - 1]) {
                key[j] = key[j - 1];
                pos[j] = pos[j - 1];
                j--;
            }
            key[j] = kv;
            pos[j] = i;
        }
        for (int j = 0; j < 16; j++) {
            shk[tid * 16 + j] = j < cnt ? key[j] : ~0ull;
            shp[tid * 16 + j] = j < cnt ? pos[j] : (i64)0x7fffffffffffffffll;
        }
        __syncthreads();
        for (int w = 64; w > 0; w >>= 1) {
            if (tid < w) {
                const u64 *ak = shk + tid * 16, *bk = shk + (tid + w) * 16;
                const i64 *ap = shp + tid * 16, *bp = shp + (tid + w) * 16;
                u64 mk[16];
                i64 mp[16];
                int a = 0, b = 0;
                for (int j = 0; j < k; j++) {
                    bool tb = bk[b] < ak[a] || (bk[b] == ak[a] && bp[b] < ap[a]);
                    if (tb)
                        mk[j] = bk[b], mp[j] = bp[b++];
                    else
                        mk[j] = ak[a], mp[j] = ap[a++];
                }
                for (int j = 0; j < k; j++) shk[tid * 16 + j] = mk[j], shp[tid * 16 + j] = mp[j];
            }
            __syncthreads();
        }
        if (tid < k) {
            i64 p = shp[tid];
            so_copy(x, xo + p * s.sx, vals, o0 + tid * s.s0, g.es);
            ind[o1 + tid * s.s1] = p;
        }
        __syncthreads();
    }
}

// One warp per row of a top-k: pick(xo) returns, on lane j < k, the row position of pick j (xo:
// the row's element offset); lane j writes it and its value.
template <typename F>
__device__ __forceinline__ void so_warp_rows(const soargs &g, const void *x, void *vals, i64 *ind,
                                             const rdline &s, F pick)
{
    const int lane = threadIdx.x & 31;
    const i64 wpb = blockDim.x >> 5;
    for (i64 r = (i64)blockIdx.x * wpb + (threadIdx.x >> 5); r < s.lines;
         r += (i64)gridDim.x * wpb) {
        i64 xo, o0, o1;
        rd_line(s, r, &xo, &o0, &o1);
        const int mine = pick(xo);
        if (lane < g.k) {
            so_copy(x, xo + (i64)mine * s.sx, vals, o0 + lane * s.s0, g.es);
            ind[o1 + lane * s.s1] = mine;
        }
    }
}

// Top-k with k <= 32 of rows of up to 32 * V elements: one warp per row, V keys per lane in
// registers; k rounds each pick the smallest (key, position) pair after the previous pick by a
// warp-wide minimum, so the picks come out in the stable order. Lane j writes pick j.
template <int V>
__device__ __forceinline__ void so_topk_warp(const soargs &g, const void *x, void *vals, i64 *ind,
                                             const rdline &s)
{
    const int lane = threadIdx.x & 31;
    const int n = (int)s.len, k = (int)g.k;
    so_warp_rows(g, x, vals, ind, s, [&](i64 xo) {
        u64 key[V];
#pragma unroll
        for (int v = 0; v < V; v++) {
            int i = v * 32 + lane;
            key[v] = i < n ? so_key(x, g.isf, g.dt, xo + i * s.sx, g.desc) : ~0ull;
        }
        u64 pk = 0;
        int pp = -1, mine = 0;
        for (int j = 0; j < k; j++) {
            u64 bk = ~0ull;
            int bp = 0x7fffffff;
#pragma unroll
            for (int v = 0; v < V; v++) {
                int p = v * 32 + lane;
                u64 kv = key[v];
                bool after = kv > pk || (kv == pk && p > pp);
                if (after && (kv < bk || (kv == bk && p < bp))) bk = kv, bp = p;
            }
            for (int o = 16; o > 0; o >>= 1) {
                u64 ok = __shfl_xor_sync(0xffffffffu, bk, o);
                int op = __shfl_xor_sync(0xffffffffu, bp, o);
                if (ok < bk || (ok == bk && op < bp)) bk = ok, bp = op;
            }
            pk = bk, pp = bp;
            if (lane == j) mine = bp;
        }
        return mine;
    });
}

// so_key's order in 32 bits, for dtypes of at most 4 bytes (every value is exact in a float or an
// int): NaN largest, -0 with +0, desc reverses.
__device__ __forceinline__ unsigned so_key32f(float f, int desc)
{
    unsigned k;
    if (f != f)
        k = ~0u;
    else {
        if (f == 0) f = 0.f;
        unsigned b = __float_as_uint(f);
        k = (b >> 31) ? ~b : b | 0x80000000u;
    }
    return desc ? ~k : k;
}

__device__ __forceinline__ unsigned so_key32(const void *x, int isf, int dt, i64 off, int desc)
{
    if (isf) return so_key32f((float)rd_ldf(x, dt, off), desc);
    unsigned k = (unsigned)(int)rd_ldi(x, dt, off) ^ 0x80000000u;
    return desc ? ~k : k;
}

// so_topk_warp for dtypes of at most 4 bytes: each element is one 64-bit word, key << 32 |
// position, so (key, position) order is integer order; a round takes the minimum word above the
// last pick, over four independent chains per lane and then across the warp.
template <int V>
__device__ __forceinline__ void so_topk_warp32(const soargs &g, const void *x, void *vals, i64 *ind,
                                               const rdline &s)
{
    const int lane = threadIdx.x & 31;
    const int n = (int)s.len, k = (int)g.k;
    so_warp_rows(g, x, vals, ind, s, [&](i64 xo) {
        u64 w[V];
        if (g.dt == RD_F32) { // no dtype switch between the loads: all V in flight at once
            const float *xf = (const float *)x + xo;
#pragma unroll
            for (int v = 0; v < V; v++) {
                int i = v * 32 + lane;
                float f = i < n ? xf[i * s.sx] : 0.f;
                w[v] = i < n ? (u64)so_key32f(f, g.desc) << 32 | (unsigned)i : ~0ull;
            }
        } else
#pragma unroll
            for (int v = 0; v < V; v++) {
                int i = v * 32 + lane;
                w[v] =
                    i < n ? (u64)so_key32(x, g.isf, g.dt, xo + i * s.sx, g.desc) << 32 | (unsigned)i
                          : ~0ull;
            }
        u64 last = 0;
        int mine = 0;
        for (int j = 0; j < k; j++) {
            u64 b[4] = {~0ull, ~0ull, ~0ull, ~0ull};
#pragma unroll
            for (int v = 0; v < V; v++) {
                u64 c = j == 0 || w[v] > last ? w[v] : ~0ull;
                b[v & 3] = c < b[v & 3] ? c : b[v & 3];
            }
            u64 best = b[0] < b[1] ? b[0] : b[1], b23 = b[2] < b[3] ? b[2] : b[3];
            best = best < b23 ? best : b23;
            for (int o = 16; o > 0; o >>= 1) {
                u64 other = __shfl_xor_sync(0xffffffffu, best, o);
                best = other < best ? other : best;
            }
            last = best;
            if (lane == j) mine = (int)(unsigned)best;
        }
        return mine;
    });
}

#define SO_TOPK_WARP(V)                                                                            \
    extern "C" __global__ void __launch_bounds__(256)                                              \
        em_so_topk_warp_v##V(soargs g, const void *x, void *vals, i64 *ind, rdline s)              \
    {                                                                                              \
        so_topk_warp<V>(g, x, vals, ind, s);                                                       \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(256)                                              \
        em_so_topk_warp32_v##V(soargs g, const void *x, void *vals, i64 *ind, rdline s)            \
    {                                                                                              \
        so_topk_warp32<V>(g, x, vals, ind, s);                                                     \
    }
SO_TOPK_WARP(2)
SO_TOPK_WARP(4)
SO_TOPK_WARP(8)
SO_TOPK_WARP(16)
SO_TOPK_WARP(32)
