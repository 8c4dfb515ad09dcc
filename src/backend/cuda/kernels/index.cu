// Index, combine and pixel-shuffle kernels (host side: cuda_index.c). Data movement is done by
// element size (1, 2, 4 or 8 bytes), so every dtype shares one kernel; index tensors of any
// integer dtype are read as 64-bit values. Offsets are in elements, 64-bit throughout.
#include "index.cuh"
#define IDX_LOOP(n)                                                                                \
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                              \
         i += (i64)blockDim.x * gridDim.x)

// A strided copy y[view] = x[view] over one shape with separate element strides (stride 0
// broadcasts).
struct idx_view {
    i64 shape[16];
    i64 xs[16];
    i64 ys[16];
    int rank;
};

// Per-dim index maps (REPEAT, ROLL, PAD): y is contiguous of shape; y[c] = x[sum map_d[c_d] *
// xs[d]], or the fill value when any map entry is -1. maps holds the dims' maps back to back.
struct idx_mapg {
    i64 shape[8];
    i64 xs[8];
    i64 moff[8];
    int rank;
};

// Gather-style reads: y (contiguous over shape) = x[sum c_d * xs[d] + index[sum c_d * is[d]] *
// sd]; xs has 0 on the indexed dim.
struct idx_gatherg {
    i64 shape[8];
    i64 is[8];
    i64 xs[8];
    i64 sd;
    int rank;
};

// Scatter-style writes along one dim: the loop shape is the index's (scatter) or src's
// (index_add); one thread per line (all coordinates but dim) walks the dim in order, so
// duplicate indices combine exactly in the row-major order of the CPU, without atomics.
struct idx_scatterg {
    i64 shape[8];
    i64 is[8];
    i64 ss[8];
    i64 ys[8]; // y's strides with 0 on dim
    i64 sd;    // y's stride on dim
    int rank, dim;
};

// Predicate + compaction (MASKED_SELECT, NONZERO): p is tested, x copied; loop over shape.
struct idx_compactg {
    i64 shape[8];
    i64 ps[8];
    i64 xs[8];
    int rank;
};

// index dtype codes: 0 i64, 1 i32, 2 i16, 3 i8, 4 u8 / bool
__device__ __forceinline__ i64 idx_read(const void *p, i64 off, int ik)
{
    switch (ik) {
    case 0: return ((const long long *)p)[off];
    case 1: return ((const int *)p)[off];
    case 2: return ((const short *)p)[off];
    case 3: return ((const signed char *)p)[off];
    default: return ((const unsigned char *)p)[off];
    }
}

template <typename T> __device__ void idx_copy(const T *x, T *y, i64 n, const idx_view &v)
{
    IDX_LOOP(n)
    {
        i64 r = i, xo = 0, yo = 0;
        for (int d = v.rank - 1; d >= 0; d--) {
            i64 q = r / v.shape[d], c = r - q * v.shape[d];
            xo += c * v.xs[d];
            yo += c * v.ys[d];
            r = q;
        }
        y[yo] = x[xo];
    }
}

template <typename T>
__device__ void idx_map(const T *x, T *y, i64 n, const idx_mapg &g, const i64 *maps, u64 fill)
{
    IDX_LOOP(n)
    {
        i64 r = i, xo = 0;
        bool f = false;
        for (int d = g.rank - 1; d >= 0; d--) {
            i64 q = r / g.shape[d], c = r - q * g.shape[d];
            i64 m = maps[g.moff[d] + c];
            f |= m < 0;
            xo += m * g.xs[d];
            r = q;
        }
        y[i] = f ? (T)fill : x[xo];
    }
}

// An index outside [0, size) reads no memory and gives the poison bits (NaN, or 0 for integers):
// eager calls check the range first, graph captures cannot (cuda_index.c).
template <typename T>
__device__ void idx_gather(const T *x, const void *ix, int ik, T *y, i64 n, const idx_gatherg &g,
                           i64 size, u64 poison)
{
    IDX_LOOP(n)
    {
        i64 r = i, xo = 0, io = 0;
        for (int d = g.rank - 1; d >= 0; d--) {
            i64 q = r / g.shape[d], c = r - q * g.shape[d];
            xo += c * g.xs[d];
            io += c * g.is[d];
            r = q;
        }
        const i64 v = idx_read(ix, io, ik);
        y[i] = v >= 0 && v < size ? x[xo + v * g.sd] : (T)poison;
    }
}

#define IDX_SIZED(SZ, T)                                                                           \
    extern "C" __global__ void idx_copy_##SZ(const T *x, T *y, i64 n, idx_view v)                  \
    {                                                                                              \
        idx_copy<T>(x, y, n, v);                                                                   \
    }                                                                                              \
    /* a copy of one element broadcast (every stride 0) into a contiguous y: no index math */     \
    extern "C" __global__ void idx_bcast_##SZ(const T *x, T *y, i64 n)                             \
    {                                                                                              \
        const T v = *x;                                                                            \
        IDX_LOOP(n) y[i] = v;                                                                      \
    }                                                                                              \
    extern "C" __global__ void idx_map_##SZ(const T *x, T *y, i64 n, idx_mapg g, const i64 *maps,  \
                                            u64 fill)                                              \
    {                                                                                              \
        idx_map<T>(x, y, n, g, maps, fill);                                                        \
    }                                                                                              \
    extern "C" __global__ void idx_gather_##SZ(const T *x, const void *ix, int ik, T *y, i64 n,    \
                                               idx_gatherg g, i64 size, u64 poison)                \
    {                                                                                              \
        idx_gather<T>(x, ix, ik, y, n, g, size, poison);                                           \
    }
IDX_SIZED(1, unsigned char)
IDX_SIZED(2, unsigned short)
IDX_SIZED(4, unsigned int)
IDX_SIZED(8, u64)

// Index range check over a strided index of shape g.shape (strides g.is): the smallest linear
// position holding a value outside [0, size) goes to *bad (initialised to ~0 by the host).
extern "C" __global__ void idx_check(const void *ix, int ik, i64 n, idx_gatherg g, i64 size,
                                     unsigned long long *bad)
{
    IDX_LOOP(n)
    {
        i64 r = i, io = 0;
        for (int d = g.rank - 1; d >= 0; d--) {
            i64 q = r / g.shape[d];
            io += (r - q * g.shape[d]) * g.is[d];
            r = q;
        }
        i64 v = idx_read(ix, io, ik);
        if (v < 0 || v >= size) atomicMin(bad, (unsigned long long)i);
    }
}

// ---- element loads and stores by dtype code (the CPU's cpu_get_* / cpu_set_* conversions;
// idx_getf / idx_setf: index.cuh)
__device__ __forceinline__ i64 idx_geti(const void *p, i64 o, int dt)
{
    switch (dt) {
    case 4: return ((const long long *)p)[o];
    case 5: return ((const int *)p)[o];
    case 6: return ((const short *)p)[o];
    case 7: return ((const signed char *)p)[o];
    case 8: return ((const unsigned char *)p)[o];
    default: return ((const unsigned char *)p)[o] != 0;
    }
}

__device__ __forceinline__ void idx_seti(void *p, i64 o, int dt, i64 v)
{
    switch (dt) {
    case 4: ((long long *)p)[o] = v; break;
    case 5: ((int *)p)[o] = (int)(unsigned)(u64)v; break;
    case 6: ((short *)p)[o] = (short)(unsigned short)(u64)v; break;
    case 7: ((signed char *)p)[o] = (signed char)(unsigned char)(u64)v; break;
    case 8: ((unsigned char *)p)[o] = (unsigned char)(u64)v; break;
    default: ((unsigned char *)p)[o] = v != 0; break;
    }
}

__device__ __forceinline__ double idx_combine_f(int mode, double a, double b)
{
    switch (mode) {
    case 1: return __dadd_rn(a, b); // never contracted: the CPU rounds the product first
    case 2: return __dmul_rn(a, b);
    case 3:
        return (a != a || b != b) ? __longlong_as_double(0x7ff8000000000000ll) : (b < a ? b : a);
    case 4:
        return (a != a || b != b) ? __longlong_as_double(0x7ff8000000000000ll) : (b > a ? b : a);
    default: return b;
    }
}

__device__ __forceinline__ i64 idx_combine_i(int mode, i64 a, i64 b)
{
    switch (mode) {
    case 1: return (i64)((u64)a + (u64)b);
    case 2: return (i64)((u64)a * (u64)b);
    case 3: return b < a ? b : a;
    case 4: return b > a ? b : a;
    default: return b;
    }
}

// y already holds x; mode: 0 assign, 1 add, 2 mul, 3 min, 4 max (em_reduce_mode). src is scaled
// by alpha (floats) or ialpha (integers) first, as index_add does; scatter passes 1. A source
// whose index lies outside [0, size) is skipped (checked before eager calls; in a capture the
// check cannot run).
extern "C" __global__ void idx_scatter(void *y, int dt, const void *ix, int ik, const void *src,
                                       idx_scatterg g, int mode, double alpha, i64 ialpha,
                                       i64 lines, i64 size)
{
    const i64 m = g.shape[g.dim];
    const int es = dt == 0 || dt == 4 ? 8 : dt == 1 || dt == 5 ? 4 : dt <= 3 || dt == 6 ? 2 : 1;
    IDX_LOOP(lines)
    {
        i64 r = i, yo = 0, io = 0, so = 0;
        for (int d = g.rank - 1; d >= 0; d--) {
            if (d == g.dim) continue;
            i64 q = r / g.shape[d], c = r - q * g.shape[d];
            yo += c * g.ys[d];
            io += c * g.is[d];
            so += c * g.ss[d];
            r = q;
        }
        for (i64 k = 0; k < m; k++) {
            const i64 v = idx_read(ix, io + k * g.is[g.dim], ik);
            if (v < 0 || v >= size) continue;
            i64 o = yo + v * g.sd, s = so + k * g.ss[g.dim];
            if (mode == 0) {
                switch (es) {
                case 8: ((u64 *)y)[o] = ((const u64 *)src)[s]; break;
                case 4: ((unsigned *)y)[o] = ((const unsigned *)src)[s]; break;
                case 2: ((unsigned short *)y)[o] = ((const unsigned short *)src)[s]; break;
                default: ((unsigned char *)y)[o] = ((const unsigned char *)src)[s]; break;
                }
            } else if (dt <= 3) {
                double b = idx_getf(src, s, dt);
                idx_setf(y, o, dt, idx_combine_f(mode, idx_getf(y, o, dt), __dmul_rn(alpha, b)));
            } else {
                i64 b = (i64)((u64)idx_geti(src, s, dt) * (u64)ialpha);
                idx_seti(y, o, dt, idx_combine_i(mode, idx_geti(y, o, dt), b));
            }
        }
    }
}

// ---- compaction: blocks of IDX_CHUNK elements, IDX_PER consecutive ones per thread ------------
#define IDX_PER   8
#define IDX_CHUNK (256 * IDX_PER)

__device__ __forceinline__ bool idx_pred(const void *p, i64 o, int pdt)
{
    if (pdt <= 3) return idx_getf(p, o, pdt) != 0.0;
    return idx_geti(p, o, pdt) != 0;
}

__device__ __forceinline__ void idx_offs(const idx_compactg &g, i64 i, i64 *po, i64 *xo, i64 *coord)
{
    *po = *xo = 0;
    for (int d = g.rank - 1; d >= 0; d--) {
        i64 q = i / g.shape[d], c = i - q * g.shape[d];
        *po += c * g.ps[d];
        *xo += c * g.xs[d];
        if (coord) coord[d] = c;
        i = q;
    }
}

// Phase 0: counts[block] = true elements of the block's chunk. Phase 1: writes them from
// offs[block] on, in order: x's elements (mode 0, es bytes) or coordinates as i64 (mode 1).
// Launch: 256 threads, one block per chunk (grid x, blocks beyond 2^31 are not needed here).
extern "C" __global__ void idx_compact(int phase, int mode, const void *p, int pdt, const void *x,
                                       int es, void *out, idx_compactg g, i64 n, i64 *counts,
                                       const i64 *offs)
{
    __shared__ i64 sc[256];
    const i64 base = (i64)blockIdx.x * IDX_CHUNK + (i64)threadIdx.x * IDX_PER;
    int cnt = 0;
    for (int j = 0; j < IDX_PER; j++) {
        i64 e = base + j, po, xo;
        if (e >= n) break;
        idx_offs(g, e, &po, &xo, NULL);
        cnt += idx_pred(p, po, pdt);
    }
    sc[threadIdx.x] = cnt;
    __syncthreads();
    for (int s = 1; s < 256; s <<= 1) { // inclusive Hillis-Steele scan
        i64 v = threadIdx.x >= (unsigned)s ? sc[threadIdx.x - s] : 0;
        __syncthreads();
        sc[threadIdx.x] += v;
        __syncthreads();
    }
    if (phase == 0) {
        if (threadIdx.x == 255) counts[blockIdx.x] = sc[255];
        return;
    }
    i64 k = offs[blockIdx.x] + sc[threadIdx.x] - cnt;
    for (int j = 0; j < IDX_PER; j++) {
        i64 e = base + j, po, xo, coord[8];
        if (e >= n) break;
        idx_offs(g, e, &po, &xo, coord);
        if (!idx_pred(p, po, pdt)) continue;
        if (mode == 1) {
            for (int d = 0; d < g.rank; d++) ((long long *)out)[k * g.rank + d] = coord[d];
        } else {
            switch (es) {
            case 8: ((u64 *)out)[k] = ((const u64 *)x)[xo]; break;
            case 4: ((unsigned *)out)[k] = ((const unsigned *)x)[xo]; break;
            case 2: ((unsigned short *)out)[k] = ((const unsigned short *)x)[xo]; break;
            default: ((unsigned char *)out)[k] = ((const unsigned char *)x)[xo]; break;
            }
        }
        k++;
    }
}

// ---- converting strided copy (cat of mixed dtypes, slice_assign): the CPU's copy rules ---------
__device__ __forceinline__ double idx_ld(const void *p, i64 o, int dt)
{
    if (dt <= 3) return idx_getf(p, o, dt);
    if (dt == 4) return (double)((const long long *)p)[o];
    return (double)idx_geti(p, o, dt);
}

__device__ __forceinline__ void idx_st(void *p, i64 o, int dt, double v)
{
    if (dt <= 3) {
        idx_setf(p, o, dt, v);
    } else if (dt == 9) {
        ((unsigned char *)p)[o] = v != 0;
    } else {
        i64 k = (v > -9.2233720368547758e18 && v < 9.2233720368547758e18)
                    ? (i64)v
                    : (i64)0x8000000000000000ull;
        idx_seti(p, o, dt, k);
    }
}

extern "C" __global__ void idx_convert(const void *x, int xdt, void *y, int ydt, i64 n, idx_view v)
{
    const bool exact_int = xdt >= 4 && ydt >= 4;
    IDX_LOOP(n)
    {
        i64 r = i, xo = 0, yo = 0;
        for (int d = v.rank - 1; d >= 0; d--) {
            i64 q = r / v.shape[d], c = r - q * v.shape[d];
            xo += c * v.xs[d];
            yo += c * v.ys[d];
            r = q;
        }
        if (exact_int)
            idx_seti(y, yo, ydt, idx_geti(x, xo, xdt));
        else if (ydt == 9)
            ((unsigned char *)y)[yo] = idx_ld(x, xo, xdt) != 0.0;
        else
            idx_st(y, yo, ydt, idx_ld(x, xo, xdt));
    }
}

// ---- index_add (and 1-D scatter) by destination: many source rows per line ------------------
// The host sorts the source positions k by index value, stably (a counting sort), into perm;
// destination j takes perm[offs[j] .. offs[j + 1]). One thread per (destination, line) adds its
// sources in increasing k, rounding to the dtype after every step as the CPU's serial loop does.
__device__ __forceinline__ double idx_roundf(int dt, double v)
{
    switch (dt) {
    case 0: return v;
    case 1: return (double)(float)v;
    case 2: return em_h2f(em_f2h((float)v));
    default: return __uint_as_float((unsigned)em_f2b((float)v) << 16);
    }
}

__device__ __forceinline__ i64 idx_wrap(int dt, i64 v)
{
    switch (dt) {
    case 4: return v;
    case 5: return (int)(unsigned)(u64)v;
    case 6: return (short)(unsigned short)(u64)v;
    case 7: return (signed char)(unsigned char)(u64)v;
    case 8: return (unsigned char)(u64)v;
    default: return v != 0;
    }
}

extern "C" __global__ void idx_add_sorted(void *y, int dt, const void *src, idx_scatterg g,
                                          int mode, double alpha, i64 ialpha, i64 lines,
                                          const i64 *perm, const i64 *offs, const i64 *ids,
                                          const i64 *nidsp)
{
    const i64 nids = *nidsp;
    for (i64 b = blockIdx.x; b < nids; b += gridDim.x) {
        const i64 j = ids[b], e0 = offs[j], e1 = offs[j + 1];
        for (i64 line = (i64)blockIdx.y * blockDim.x + threadIdx.x; line < lines;
             line += (i64)gridDim.y * blockDim.x) {
            i64 r = line, yo = 0, so = 0;
            for (int d = g.rank - 1; d >= 0; d--) {
                if (d == g.dim) continue;
                i64 q = r / g.shape[d], c = r - q * g.shape[d];
                yo += c * g.ys[d];
                so += c * g.ss[d];
                r = q;
            }
            yo += j * g.sd;
            const i64 sk = g.ss[g.dim];
            if (mode == 0) { // assign: the last source wins, its bytes unchanged
                const i64 s = so + perm[e1 - 1] * sk;
                const int es = dt == 0 || dt == 4   ? 8
                               : dt == 1 || dt == 5 ? 4
                               : dt <= 3 || dt == 6 ? 2
                                                    : 1;
                switch (es) {
                case 8: ((u64 *)y)[yo] = ((const u64 *)src)[s]; break;
                case 4: ((unsigned *)y)[yo] = ((const unsigned *)src)[s]; break;
                case 2: ((unsigned short *)y)[yo] = ((const unsigned short *)src)[s]; break;
                default: ((unsigned char *)y)[yo] = ((const unsigned char *)src)[s]; break;
                }
            } else if (dt <= 3) {
                double acc = idx_getf(y, yo, dt);
                for (i64 e = e0; e < e1; e++) {
                    double b = __dmul_rn(alpha, idx_getf(src, so + perm[e] * sk, dt));
                    acc = idx_roundf(dt, idx_combine_f(mode, acc, b));
                }
                idx_setf(y, yo, dt, acc);
            } else {
                i64 acc = idx_geti(y, yo, dt);
                for (i64 e = e0; e < e1; e++) {
                    i64 v = (i64)((u64)idx_geti(src, so + perm[e] * sk, dt) * (u64)ialpha);
                    acc = idx_wrap(dt, idx_combine_i(mode, acc, v));
                }
                idx_seti(y, yo, dt, acc);
            }
        }
    }
}

// The host's stable counting sort of index_add_sorted (cuda_index.c), on the device for graph
// captures, where the index cannot be read back. v: m destinations as i64; values outside
// [0, n) are left out. Out: offs[0..n] the bucket bounds, perm the source positions by
// destination (ascending within each), ids the nonempty destinations ascending, *nids their
// count; cur (n words) is scratch. One block of IDX_SORT_THREADS threads.
#define IDX_SORT_THREADS 1024

// Inclusive sums over the block of a (counts) and b (flags); *ta, *tb get the block's totals.
__device__ void idx_block_scan(i64 *a, i64 *b, i64 *ta, i64 *tb)
{
    __shared__ i64 wa[32], wb[32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    for (int o = 1; o < 32; o <<= 1) {
        i64 x = __shfl_up_sync(0xffffffffu, *a, o), y = __shfl_up_sync(0xffffffffu, *b, o);
        if (lane >= o) *a += x, *b += y;
    }
    if (lane == 31) wa[w] = *a, wb[w] = *b;
    __syncthreads();
    if (w == 0) {
        i64 x = wa[lane], y = wb[lane];
        for (int o = 1; o < 32; o <<= 1) {
            i64 px = __shfl_up_sync(0xffffffffu, x, o), py = __shfl_up_sync(0xffffffffu, y, o);
            if (lane >= o) x += px, y += py;
        }
        wa[lane] = x, wb[lane] = y;
    }
    __syncthreads();
    if (w > 0) *a += wa[w - 1], *b += wb[w - 1];
    *ta = wa[31], *tb = wb[31];
    __syncthreads(); // wa / wb are reused by the next call
}

extern "C" __global__ void __launch_bounds__(IDX_SORT_THREADS)
    idx_sort(const i64 *v, i64 m, i64 n, i64 *perm, i64 *offs, i64 *ids, i64 *nids, i64 *cur)
{
    const int t = threadIdx.x;
    for (i64 j = t; j <= n; j += IDX_SORT_THREADS) offs[j] = 0;
    __syncthreads();
    for (i64 k = t; k < m; k += IDX_SORT_THREADS) {
        const i64 d = v[k];
        if (d >= 0 && d < n) atomicAdd((unsigned long long *)&offs[d + 1], 1ull);
    }
    __syncthreads();
    // counts -> bounds (offs[j + 1] = sources before bucket j + 1), cur = each bucket's start,
    // and the nonempty buckets compacted into ids, in one pass of block-wide scans
    i64 carry = 0, found = 0;
    for (i64 base = 0; base < n; base += IDX_SORT_THREADS) {
        const i64 j = base + t;
        const i64 c = j < n ? offs[j + 1] : 0;
        i64 a = c, b = c > 0, ta, tb;
        idx_block_scan(&a, &b, &ta, &tb);
        if (j < n) {
            offs[j + 1] = carry + a;
            cur[j] = carry + a - c;
            if (c > 0) ids[found + b - 1] = j;
        }
        carry += ta, found += tb;
    }
    if (t == 0) *nids = found;
    __syncthreads();
    // stable placement by one warp, 32 sources at a time: each group of equal destinations takes
    // its slots from the bucket's cursor at once, in lane order
    if (t >= 32) return;
    for (i64 base = 0; base < m; base += 32) {
        const i64 k = base + t;
        const i64 d = k < m ? v[k] : -1;
        const bool in = d >= 0 && d < n;
#if __CUDA_ARCH__ >= 700
        const unsigned peers = __match_any_sync(0xffffffffu, in ? d : -1);
#else
        unsigned peers = 0;
        for (int l = 0; l < 32; l++)
            peers |= (__shfl_sync(0xffffffffu, in ? d : -1, l) == (in ? d : -1)) << l;
#endif
        const int leader = __ffs(peers) - 1;
        i64 slot = 0;
        if (in && t == leader) {
            slot = cur[d];
            cur[d] = slot + __popc(peers);
        }
        slot = __shfl_sync(0xffffffffu, slot, leader);
        if (in) perm[slot + __popc(peers & ((1u << t) - 1))] = k;
        __syncwarp();
    }
}
