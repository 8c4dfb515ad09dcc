// Reductions over any set of dims of strided inputs of every dtype, scans and softmax along one
// dim (cuda_reduce.c launches them). They mirror cpu_reduce.c: floats accumulate in double,
// integers and bool in 64-bit wrapping integers; each thread reduces a fixed interleaved subset
// and a fixed tree combines the subsets, so results do not depend on timing. Arg-reductions
// break ties by the lower position, which is what the CPU's sequential scan gives.
#include "reduce.cuh"

// ---- mask reductions ------------------------------------------------------------------------

// what one element contributes (cpu_reduce.c's `red`)
#define R_SUM    0
#define R_PROD   1
#define R_MAX    2
#define R_MIN    3
#define R_ARGMAX 4
#define R_ARGMIN 5
#define R_COUNT  6
#define R_SQDEV  7
#define R_EXPSUM 8
#define R_ABS1   9
#define R_SQ     10
#define R_ABSMAX 11
#define R_ABSMIN 12
#define R_ABSPOW 13

// how the result is written
#define FIN_SUM    0 // sum, prod
#define FIN_MEAN   1
#define FIN_MAXMIN 2
#define FIN_ARG    3 // argmax, argmin: i64 position
#define FIN_PAIR   4 // max_dim, min_dim: value and i64 position
#define FIN_VAR    5
#define FIN_STD    6
#define FIN_NORM   7
#define FIN_LSE    8
#define FIN_ANY    9
#define FIN_ALL    10
#define FIN_COUNT  11

// Kept dims (k*) index the outputs, reduced dims (r*) the N reduced elements in row-major
// order; strides in elements of x (kx, rx), out[0] (ko0) and out[1] (ko1).
struct rdplan {
    i64 kshape[8], kx[8], ko0[8], ko1[8];
    i64 rshape[8], rx[8];
    int nk, nr;
    i64 M, N;
};

struct rdacc {
    double s;
    u64 u;   // integer sum / product, nonzero count
    i64 v;   // integer max / min
    i64 idx; // position of the max / min; -1 while empty
};

__device__ __forceinline__ void rd_init(int r, rdacc &a)
{
    a.s = r == R_PROD ? 1.0 : r == R_MAX ? -RD_INF : (r == R_MIN || r == R_ABSMIN) ? RD_INF : 0.0;
    a.u = r == R_PROD ? 1 : 0;
    a.v = (r == R_MIN || r == R_ARGMIN) ? (i64)0x7fffffffffffffffll : (i64)0x8000000000000000ull;
    a.idx = -1;
}

__device__ __forceinline__ void rd_addf(int r, rdacc &a, double x, i64 j, double c, double p,
                                        bool single)
{
    switch (r) {
    case R_SUM: a.s += x; break;
    case R_PROD: a.s *= x; break;
    case R_MAX:
        if (a.s == a.s && (x > a.s || x != x)) a.s = x;
        break;
    case R_MIN:
        if (a.s == a.s && (x < a.s || x != x)) a.s = x;
        break;
    case R_ARGMAX:
        if (a.idx < 0 || (a.s == a.s && (x > a.s || x != x))) a.s = x, a.idx = j;
        break;
    case R_ARGMIN:
        if (a.idx < 0 || (a.s == a.s && (x < a.s || x != x))) a.s = x, a.idx = j;
        break;
    case R_COUNT: a.u += x != 0; break;
    case R_SQDEV: a.s += (x - c) * (x - c); break;
    case R_EXPSUM: a.s += single ? (double)expf((float)(x - c)) : exp(x - c); break;
    case R_ABS1: a.s += fabs(x); break;
    case R_SQ: a.s += x * x; break;
    case R_ABSMAX:
        if (a.s == a.s && (fabs(x) > a.s || x != x)) a.s = fabs(x);
        break;
    case R_ABSMIN:
        if (a.s == a.s && (fabs(x) < a.s || x != x)) a.s = fabs(x);
        break;
    default: a.s += pow(fabs(x), p); break;
    }
}

__device__ __forceinline__ void rd_addi(int r, rdacc &a, i64 x, i64 j)
{
    switch (r) {
    case R_SUM: a.u += (u64)x; break;
    case R_PROD: a.u *= (u64)x; break;
    case R_MAX:
        if (x > a.v) a.v = x;
        break;
    case R_MIN:
        if (x < a.v) a.v = x;
        break;
    case R_ARGMAX:
        if (a.idx < 0 || x > a.v) a.v = x, a.idx = j;
        break;
    case R_ARGMIN:
        if (a.idx < 0 || x < a.v) a.v = x, a.idx = j;
        break;
    case R_COUNT: a.u += x != 0; break;
    default: break;
    }
}

// a = a combined with b; for the arg-reductions b may cover earlier or later elements than a
__device__ __forceinline__ void rd_comb(int r, bool ints, rdacc &a, const rdacc &b)
{
    switch (r) {
    case R_PROD:
        a.s *= b.s;
        a.u *= b.u;
        break;
    case R_MAX:
    case R_ABSMAX:
        if (a.s == a.s && (b.s > a.s || b.s != b.s)) a.s = b.s;
        if (b.v > a.v) a.v = b.v;
        break;
    case R_MIN:
    case R_ABSMIN:
        if (a.s == a.s && (b.s < a.s || b.s != b.s)) a.s = b.s;
        if (b.v < a.v) a.v = b.v;
        break;
    case R_ARGMAX:
    case R_ARGMIN: {
        if (b.idx < 0) break;
        bool take, mx = r == R_ARGMAX;
        if (a.idx < 0)
            take = true;
        else if (ints)
            take = (mx ? b.v > a.v : b.v < a.v) || (b.v == a.v && b.idx < a.idx);
        else {
            bool an = a.s != a.s, bn = b.s != b.s;
            if (an || bn)
                take = bn && (!an || b.idx < a.idx);
            else
                take = (mx ? b.s > a.s : b.s < a.s) || (b.s == a.s && b.idx < a.idx);
        }
        if (take) a = b;
        break;
    }
    default:
        a.s += b.s;
        a.u += b.u;
        break;
    }
}

// offsets of output o in x, out[0] and out[1]
__device__ __forceinline__ void rd_loc(const rdplan &s, i64 o, i64 *xo, i64 *o0, i64 *o1)
{
    i64 a = 0, b = 0, c = 0;
    for (int d = s.nk - 1; d >= 0; d--) {
        i64 q = o / s.kshape[d], i = o - q * s.kshape[d];
        a += i * s.kx[d];
        b += i * s.ko0[d];
        c += i * s.ko1[d];
        o = q;
    }
    *xo = a, *o0 = b, *o1 = c;
}

__device__ __forceinline__ i64 rd_roff(const rdplan &s, i64 j)
{
    if (s.nr == 1) return j * s.rx[0];
    i64 off = 0;
    for (int d = s.nr - 1; d >= 0; d--) {
        i64 q = j / s.rshape[d];
        off += (j - q * s.rshape[d]) * s.rx[d];
        j = q;
    }
    return off;
}

struct rdargs {
    int r, fin, ints, xdt, odt;
    double p;  // norm order
    i64 corr;  // var / std correction
    int first; // write the per-output value to center instead (first pass of var / lse)
};

__device__ void rd_finish(const rdargs &g, const rdplan &s, i64 o, const rdacc &a, void *out0,
                          i64 *out1, double *center)
{
    i64 xo, p0, p1;
    rd_loc(s, o, &xo, &p0, &p1);
    double n = (double)s.N;
    if (g.first) {
        center[o] = g.fin == FIN_LSE ? (isinf(a.s) ? 0.0 : a.s) : a.s / n;
        return;
    }
    switch (g.fin) {
    case FIN_SUM:
        if (g.ints)
            rd_sti(out0, g.odt, p0, (i64)a.u);
        else
            rd_stf(out0, g.odt, p0, a.s);
        return;
    case FIN_MEAN: rd_stf(out0, g.odt, p0, a.s / n); return;
    case FIN_MAXMIN:
    case FIN_PAIR:
        if (g.ints)
            rd_sti(out0, g.odt, p0, a.v);
        else
            rd_stf(out0, g.odt, p0, a.s);
        if (g.fin == FIN_PAIR) out1[p1] = a.idx;
        return;
    case FIN_ARG: ((i64 *)out0)[p0] = a.idx; return;
    case FIN_VAR:
    case FIN_STD: {
        double div = n - (double)g.corr;
        double var = a.s / (div > 0 ? div : 0);
        rd_stf(out0, g.odt, p0, g.fin == FIN_STD ? sqrt(var) : var);
        return;
    }
    case FIN_NORM: {
        double q = g.p, v;
        if (isinf(q))
            v = a.s;
        else if (q == 0)
            v = (double)a.u;
        else if (q == 1)
            v = a.s;
        else if (q == 2)
            v = sqrt(a.s);
        else
            v = pow(a.s, 1.0 / q);
        rd_stf(out0, g.odt, p0, v);
        return;
    }
    case FIN_LSE: rd_stf(out0, g.odt, p0, log(a.s) + center[o]); return;
    case FIN_ANY: ((unsigned char *)out0)[p0] = a.u > 0; return;
    case FIN_ALL: ((unsigned char *)out0)[p0] = a.u == (u64)s.N; return;
    default: ((i64 *)out0)[p0] = (i64)a.u; return;
    }
}

// Groups of G threads (a power of two up to 256) reduce one task each: task t is slice b of
// output o (nsplit fixed slices of the N elements), with o = t / nsplit, b = t % nsplit, or with
// `cols` (G = 1, neighbouring threads on neighbouring outputs: coalesced when the outputs are
// unit-stride in x) o = t % M, b = t / M. With nsplit 1 the group writes the result, else its
// partial goes to part[o * nsplit + b] for em_rd_combine.
extern "C" __global__ void __launch_bounds__(256)
    em_rd_reduce(rdargs g, const void *x, void *out0, i64 *out1, rdplan s, double *center,
                 rdacc *part, i64 nsplit, int G, int cols)
{
    __shared__ rdacc sh[256];
    const int tid = threadIdx.x, lane = tid & (G - 1);
    const int per = 256 / G;
    const i64 tasks = s.M * nsplit;
    const i64 chunk = nsplit > 1 ? (s.N + nsplit - 1) / nsplit : s.N;
    const bool single = g.xdt != RD_F64;
    for (i64 base = (i64)blockIdx.x * per; base < tasks; base += (i64)gridDim.x * per) {
        i64 t = base + tid / G;
        rdacc a;
        rd_init(g.r, a);
        i64 o = 0, b = 0;
        if (t < tasks) {
            if (cols)
                b = t / s.M, o = t - b * s.M;
            else
                o = t / nsplit, b = t - o * nsplit;
            i64 xo, p0, p1;
            rd_loc(s, o, &xo, &p0, &p1);
            i64 lo = b * chunk, hi = lo + chunk < s.N ? lo + chunk : s.N;
            double c = center && !g.first ? center[o] : 0.0;
            if (g.ints) {
                for (i64 j = lo + lane; j < hi; j += G)
                    rd_addi(g.r, a, rd_ldi(x, g.xdt, xo + rd_roff(s, j)), j);
            } else {
                for (i64 j = lo + lane; j < hi; j += G)
                    rd_addf(g.r, a, rd_ldf(x, g.xdt, xo + rd_roff(s, j)), j, c, g.p, single);
            }
        }
        if (G > 1) {
            sh[tid] = a;
            __syncthreads();
            for (int w = G >> 1; w > 0; w >>= 1) {
                if (lane < w) rd_comb(g.r, g.ints, sh[tid], sh[tid + w]);
                __syncthreads();
            }
            a = sh[tid];
            __syncthreads();
        }
        if (lane == 0 && t < tasks) {
            if (nsplit == 1)
                rd_finish(g, s, o, a, out0, out1, center);
            else
                part[o * nsplit + b] = a;
        }
    }
}

// One block per output: thread l combines partials l, l + 256, ... in order, then the fixed tree.
extern "C" __global__ void __launch_bounds__(256)
    em_rd_combine(rdargs g, const rdacc *part, void *out0, i64 *out1, rdplan s, double *center,
                  i64 nsplit)
{
    __shared__ rdacc sh[256];
    const int tid = threadIdx.x;
    for (i64 o = blockIdx.x; o < s.M; o += gridDim.x) {
        rdacc a;
        rd_init(g.r, a);
        for (i64 b = tid; b < nsplit; b += 256) rd_comb(g.r, g.ints, a, part[o * nsplit + b]);
        sh[tid] = a;
        __syncthreads();
        for (int w = 128; w > 0; w >>= 1) {
            if (tid < w) rd_comb(g.r, g.ints, sh[tid], sh[tid + w]);
            __syncthreads();
        }
        if (tid == 0) rd_finish(g, s, o, sh[0], out0, out1, center);
        __syncthreads();
    }
}

// Sum or mean of n contiguous f32 (x 16-byte aligned): slice b of `chunk` elements (a multiple
// of 1024) is summed in double with 16-byte streaming loads, four in flight per thread, into
// part[b]. Blocks stride over the nb slices, so the partials depend only on n.
extern "C" __global__ void __launch_bounds__(256)
    em_rd_sum_part_f32(const float *x, i64 n, i64 chunk, i64 nb, double *part)
{
    __shared__ double sh[8];
    const int tid = threadIdx.x;
    for (i64 blk = blockIdx.x; blk < nb; blk += gridDim.x) {
        i64 lo = blk * chunk, hi = lo + chunk < n ? lo + chunk : n;
        double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        const float4 *x4 = (const float4 *)(x + lo);
        i64 nq = (hi - lo) >> 2, q = tid;
        for (; q + 768 < nq; q += 1024) {
            float4 u = __ldcs(x4 + q), v = __ldcs(x4 + q + 256), w = __ldcs(x4 + q + 512),
                   z = __ldcs(x4 + q + 768);
            a0 += ((double)u.x + (double)u.y) + ((double)u.z + (double)u.w);
            a1 += ((double)v.x + (double)v.y) + ((double)v.z + (double)v.w);
            a2 += ((double)w.x + (double)w.y) + ((double)w.z + (double)w.w);
            a3 += ((double)z.x + (double)z.y) + ((double)z.z + (double)z.w);
        }
        for (; q < nq; q += 256) {
            float4 u = __ldcs(x4 + q);
            a0 += ((double)u.x + (double)u.y) + ((double)u.z + (double)u.w);
        }
        for (i64 t = lo + nq * 4 + tid; t < hi; t += 256) a1 += (double)x[t];
        double v = (a0 + a1) + (a2 + a3);
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if ((tid & 31) == 0) sh[tid >> 5] = v;
        __syncthreads();
        if (tid == 0) {
            double r = 0;
            for (int k = 0; k < 8; k++) r += sh[k];
            part[blk] = r;
        }
        __syncthreads();
    }
}

// The nb partials summed in a fixed tree by one block; y = sum (or sum / n when mean).
extern "C" __global__ void __launch_bounds__(256)
    em_rd_sum_fin_f32(const double *part, i64 nb, float *y, int mean, i64 n)
{
    __shared__ double sh[256];
    const int tid = threadIdx.x;
    double a = 0;
    for (i64 b = tid; b < nb; b += 256) a += part[b];
    sh[tid] = a;
    __syncthreads();
    for (int w = 128; w > 0; w >>= 1) {
        if (tid < w) sh[tid] += sh[tid + w];
        __syncthreads();
    }
    if (tid == 0) y[0] = (float)(mean ? sh[0] / (double)n : sh[0]);
}

// Sum (or mean) over the leading rows of a contiguous f32 [R, C] into y [C] (a bias gradient):
// thread t of the grid's x walks rows [r0, r0 + rows) of columns 4t .. 4t + 3 (vec: float4
// loads, C a multiple of 4 and x 16-byte aligned) or of column t, four rows at a time (16 or 4
// loads in flight: one float of two rows at a time leaves too few to cover the memory's
// latency), f64 sums, coalesced across the warp; blockIdx.y is the row slice. One slice writes
// y, more write their partials to part [nsplit, C] for em_rd_cols_fin_f32.
template <int V>
__device__ void rd_cols(const float *x, i64 R, i64 C, i64 rows, double *part, float *y, int mean)
{
    const i64 c = ((i64)blockIdx.x * 256 + threadIdx.x) * V;
    if (c >= C) return;
    const i64 r0 = (i64)blockIdx.y * rows, r1 = r0 + rows < R ? r0 + rows : R;
    double a[4][V];
    for (int k = 0; k < 4; k++)
        for (int v = 0; v < V; v++) a[k][v] = 0;
    i64 r = r0;
    for (; r + 3 < r1; r += 4) {
        float l[4][V];
        for (int k = 0; k < 4; k++) {
            const float *p = x + (r + k) * C + c;
            if constexpr (V == 4) {
                float4 q = __ldcs((const float4 *)p);
                l[k][0] = q.x, l[k][1] = q.y, l[k][2] = q.z, l[k][3] = q.w;
            } else {
                l[k][0] = __ldcs(p);
            }
        }
        for (int k = 0; k < 4; k++)
            for (int v = 0; v < V; v++) a[k][v] += (double)l[k][v];
    }
    for (; r < r1; r++)
        for (int v = 0; v < V; v++) a[0][v] += (double)__ldcs(x + r * C + c + v);
    for (int v = 0; v < V; v++) {
        const double t = (a[0][v] + a[1][v]) + (a[2][v] + a[3][v]);
        if (gridDim.y == 1)
            y[c + v] = (float)(mean ? t / (double)R : t);
        else
            part[(i64)blockIdx.y * C + c + v] = t;
    }
}

extern "C" __global__ void __launch_bounds__(256)
    em_rd_cols_f32(const float *x, i64 R, i64 C, i64 rows, double *part, float *y, int mean,
                   int vec)
{
    if (vec)
        rd_cols<4>(x, R, C, rows, part, y, mean);
    else
        rd_cols<1>(x, R, C, rows, part, y, mean);
}

// y[c] = the nsplit partials of column c added in slice order (divided by R for a mean).
extern "C" __global__ void em_rd_cols_fin_f32(const double *part, i64 nsplit, i64 C, i64 R,
                                              float *y, int mean)
{
    GRID_LOOP(C)
    {
        double a = 0;
        for (i64 b = 0; b < nsplit; b++) a += part[b * C + i];
        y[i] = (float)(mean ? a / (double)R : a);
    }
}

// y[r] = the sum (mean) of row r of a contiguous f32 x [R, C]: `wide` rows (C >= 2048) take a
// block of 256 threads each, others a warp (8 rows a block); f64 sums, float4 loads when vec
// (x 16-byte aligned and C a multiple of 4): faster on such rows than the reduce plan's general
// path (bench/RESULTS.md).
extern "C" __global__ void __launch_bounds__(256)
    em_rd_rows_f32(const float *x, i64 R, i64 C, float *y, int mean, int wide, int vec)
{
    __shared__ double wsum[8];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int width = wide ? 256 : 32, me = wide ? threadIdx.x : lane;
    const i64 per = wide ? 1 : 8;
    for (i64 r = (i64)blockIdx.x * per + (wide ? 0 : warp); r < R; r += (i64)gridDim.x * per) {
        const float *p = x + r * C;
        double a0 = 0, a1 = 0;
        if (vec) {
            const float4 *p4 = (const float4 *)p;
            for (i64 j = me; j < C / 4; j += width) {
                float4 v = __ldcs(p4 + j);
                a0 += (double)v.x + (double)v.y;
                a1 += (double)v.z + (double)v.w;
            }
        } else {
            for (i64 j = me; j < C; j += width) a0 += (double)__ldcs(p + j);
        }
        double a = a0 + a1;
        for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
        if (wide) {
            if (lane == 0) wsum[warp] = a;
            __syncthreads();
            a = 0;
            for (int w = 0; w < 8; w++) a += wsum[w];
            __syncthreads();
        }
        if (me == 0) y[r] = (float)(mean ? a / (double)C : a);
    }
}

// ---- scans along one dim: one thread per line, sequential like the CPU -----------------------

// op: 0 cumsum, 1 cumprod, 2 cummax, 3 cummin
extern "C" __global__ void em_rd_scan(int op, int ints, int xdt, int odt, const void *x, void *y,
                                      i64 *yi, rdline s)
{
    for (i64 r = (i64)blockIdx.x * blockDim.x + threadIdx.x; r < s.lines;
         r += (i64)blockDim.x * gridDim.x) {
        i64 xo, o0, o1;
        rd_line(s, r, &xo, &o0, &o1);
        bool is_max = op == 2;
        i64 best_i = 0, best_v = 0;
        double best_f = 0;
        if (ints) {
            u64 uc = op == 1 ? 1 : 0;
            for (i64 k = 0; k < s.len; k++) {
                i64 v = rd_ldi(x, xdt, xo + k * s.sx);
                if (op == 0)
                    v = (i64)(uc += (u64)v);
                else if (op == 1)
                    v = (i64)(uc *= (u64)v);
                else {
                    if (k == 0 || (is_max ? v >= best_v : v <= best_v)) best_v = v, best_i = k;
                    v = best_v;
                    yi[o1 + k * s.s1] = best_i;
                }
                rd_sti(y, odt, o0 + k * s.s0, v);
            }
        } else {
            double fc = op == 1 ? 1 : 0;
            for (i64 k = 0; k < s.len; k++) {
                double v = rd_ldf(x, xdt, xo + k * s.sx);
                if (op == 0)
                    v = fc += v;
                else if (op == 1)
                    v = fc *= v;
                else {
                    if (k == 0 || v != v ||
                        (best_f == best_f && (is_max ? v >= best_f : v <= best_f)))
                        best_f = v, best_i = k;
                    v = best_f;
                    yi[o1 + k * s.s1] = best_i;
                }
                rd_stf(y, odt, o0 + k * s.s0, v);
            }
        }
    }
}

// Long lines: one block per line, tiles of 2048 elements, 8 consecutive ones per thread. A scan
// state combines associatively (a before b), so the tile is scanned by warp shuffles, the warp
// totals in order, and a carry across tiles. cummax / cummin keep the CPU's rule: a NaN always
// takes over (the latest NaN wins), nothing replaces a NaN, ties move to the latest position.
struct scst {
    double f;
    u64 u;
    i64 v, i; // integer running max / min; its position (-1: no element yet)
};

__device__ __forceinline__ scst sc_id(int op)
{
    scst a;
    a.f = op == 1 ? 1.0 : 0.0;
    a.u = op == 1 ? 1 : 0;
    a.v = 0;
    a.i = -1;
    return a;
}

__device__ __forceinline__ scst sc_one(int ints, const void *x, int xdt, i64 off, i64 k)
{
    scst a;
    a.i = k;
    if (ints) {
        a.v = rd_ldi(x, xdt, off);
        a.u = (u64)a.v;
        a.f = 0;
    } else {
        a.f = rd_ldf(x, xdt, off);
        a.u = 0;
        a.v = 0;
    }
    return a;
}

__device__ __forceinline__ scst sc_comb(int op, int ints, scst a, const scst &b)
{
    if (op == 0 || op == 1) {
        if (op == 0)
            a.f += b.f, a.u += b.u;
        else
            a.f *= b.f, a.u *= b.u;
        if (b.i >= 0) a.i = b.i;
        return a;
    }
    if (b.i < 0) return a;
    if (a.i < 0) return b;
    bool mx = op == 2;
    if (ints) return (mx ? b.v >= a.v : b.v <= a.v) ? b : a;
    if (b.f != b.f) return b;
    if (a.f != a.f) return a;
    return (mx ? b.f >= a.f : b.f <= a.f) ? b : a;
}

__device__ __forceinline__ scst sc_up(scst a, int o)
{
    a.f = __shfl_up_sync(0xffffffffu, a.f, o);
    a.u = __shfl_up_sync(0xffffffffu, a.u, o);
    a.v = __shfl_up_sync(0xffffffffu, a.v, o);
    a.i = __shfl_up_sync(0xffffffffu, a.i, o);
    return a;
}

extern "C" __global__ void __launch_bounds__(256)
    em_rd_scan_block(int op, int ints, int xdt, int odt, const void *x, void *y, i64 *yi, rdline s)
{
    __shared__ scst wsum[8];
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    for (i64 r = blockIdx.x; r < s.lines; r += gridDim.x) {
        i64 xo, o0, o1;
        rd_line(s, r, &xo, &o0, &o1);
        scst carry = sc_id(op);
        for (i64 base = 0; base < s.len; base += 2048) {
            i64 j0 = base + tid * 8;
            scst agg = sc_id(op);
            for (int e = 0; e < 8; e++)
                if (j0 + e < s.len)
                    agg =
                        sc_comb(op, ints, agg, sc_one(ints, x, xdt, xo + (j0 + e) * s.sx, j0 + e));
            scst inc = agg;
            for (int o = 1; o < 32; o <<= 1) {
                scst t = sc_up(inc, o);
                if (lane >= o) inc = sc_comb(op, ints, t, inc);
            }
            scst exc = sc_up(inc, 1);
            if (lane == 0) exc = sc_id(op);
            if (lane == 31) wsum[w] = inc;
            __syncthreads();
            scst wp = sc_id(op), tot = sc_id(op);
            for (int k = 0; k < 8; k++) {
                if (k < w) wp = sc_comb(op, ints, wp, wsum[k]);
                tot = sc_comb(op, ints, tot, wsum[k]);
            }
            scst st = sc_comb(op, ints, carry, sc_comb(op, ints, wp, exc));
            for (int e = 0; e < 8; e++) {
                i64 k = j0 + e;
                if (k >= s.len) break;
                st = sc_comb(op, ints, st, sc_one(ints, x, xdt, xo + k * s.sx, k));
                if (op <= 1) {
                    if (ints)
                        rd_sti(y, odt, o0 + k * s.s0, (i64)st.u);
                    else
                        rd_stf(y, odt, o0 + k * s.s0, st.f);
                } else {
                    if (ints)
                        rd_sti(y, odt, o0 + k * s.s0, st.v);
                    else
                        rd_stf(y, odt, o0 + k * s.s0, st.f);
                    yi[o1 + k * s.s1] = st.i;
                }
            }
            carry = sc_comb(op, ints, carry, tot);
            __syncthreads();
        }
    }
}

// ---- softmax / log-softmax along one dim, any float dtype, strided: one block per line -----

// cpu_reduce.c's softmax_line: max, sum of exp(x - max) (in f32 for f32/f16/bf16), one write.
extern "C" __global__ void __launch_bounds__(256)
    em_rd_softmax(int logsm, int xdt, int odt, const void *x, void *y, rdline s)
{
    __shared__ double sh[8];
    const int tid = threadIdx.x;
    const bool single = xdt != RD_F64;
    for (i64 r = blockIdx.x; r < s.lines; r += gridDim.x) {
        i64 xo, o0, o1;
        rd_line(s, r, &xo, &o0, &o1);
        double m = -RD_INF;
        for (i64 k = tid; k < s.len; k += 256) {
            double v = rd_ldf(x, xdt, xo + k * s.sx);
            if (m == m && (v > m || v != v)) m = v;
        }
        m = rd_bmax(m, sh);
        double acc = 0;
        for (i64 k = tid; k < s.len; k += 256) {
            double v = rd_ldf(x, xdt, xo + k * s.sx);
            acc += single ? (double)expf((float)(v - m)) : exp(v - m);
        }
        double sum = rd_bsum(acc, sh), ls = log(sum), inv = 1.0 / sum;
        for (i64 k = tid; k < s.len; k += 256) {
            double v = rd_ldf(x, xdt, xo + k * s.sx), o;
            if (logsm)
                o = (v - m) - ls;
            else {
                double e = single ? (double)expf((float)(v - m)) : exp(v - m);
                if (odt == RD_F32) e = (double)(float)e; // the CPU keeps the f32-rounded exp
                o = e * inv;
            }
            rd_stf(y, odt, o0 + k * s.s0, o);
        }
    }
}

// Contiguous f32 rows of len <= 1024, one warp per row: each lane keeps up to 32 values in
// registers (len / 4 float4 loads when len % 128 == 0 and the base is 16-byte aligned).
template <int V>
__device__ __forceinline__ void rd_softmax_warp(int logsm, const float *x, float *y, i64 rows,
                                                int len)
{
    const int lane = threadIdx.x & 31;
    const i64 wpb = blockDim.x >> 5;
    const bool vec =
        (len & 127) == 0 && ((((unsigned long long)x) | ((unsigned long long)y)) & 15) == 0;
    for (i64 r = (i64)blockIdx.x * wpb + (threadIdx.x >> 5); r < rows; r += (i64)gridDim.x * wpb) {
        const float *xr = x + r * len;
        float v[V];
        float m = -__int_as_float(0x7f800000);
        if (vec) {
#pragma unroll
            for (int k = 0; k < V / 4; k++) {
                int j = (k * 32 + lane) * 4;
                float4 q = j < len ? __ldcs((const float4 *)(xr + j)) : make_float4(m, m, m, m);
                v[4 * k] = q.x, v[4 * k + 1] = q.y, v[4 * k + 2] = q.z, v[4 * k + 3] = q.w;
            }
        } else {
#pragma unroll
            for (int k = 0; k < V; k++) {
                int j = k * 32 + lane;
                v[k] = j < len ? xr[j] : -__int_as_float(0x7f800000);
            }
        }
#pragma unroll
        for (int k = 0; k < V; k++)
            if (m == m && (v[k] > m || v[k] != v[k])) m = v[k];
        for (int o = 16; o > 0; o >>= 1) {
            float u = __shfl_xor_sync(0xffffffffu, m, o);
            if (m == m && (u > m || u != u)) m = u;
        }
        float acc = 0;
#pragma unroll
        for (int k = 0; k < V; k++) {
            float d = v[k] - m, e = expf(d); // padding lanes give exp(-inf) = 0
            acc += e;
            v[k] = logsm ? d : e;
        }
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        float inv = 1.0f / acc, ls = logf(acc);
        float *yr = y + r * len;
        if (vec) {
#pragma unroll
            for (int k = 0; k < V / 4; k++) {
                int j = (k * 32 + lane) * 4;
                if (j < len) {
                    float4 q;
                    if (logsm)
                        q = make_float4(v[4 * k] - ls, v[4 * k + 1] - ls, v[4 * k + 2] - ls,
                                        v[4 * k + 3] - ls);
                    else
                        q = make_float4(v[4 * k] * inv, v[4 * k + 1] * inv, v[4 * k + 2] * inv,
                                        v[4 * k + 3] * inv);
                    __stcs((float4 *)(yr + j), q);
                }
            }
        } else {
#pragma unroll
            for (int k = 0; k < V; k++) {
                int j = k * 32 + lane;
                if (j < len) yr[j] = logsm ? v[k] - ls : v[k] * inv;
            }
        }
    }
}

#define RD_SOFTMAX_WARP(V)                                                                         \
    extern "C" __global__ void __launch_bounds__(256)                                              \
        em_rd_softmax_warp_v##V(int logsm, const float *x, float *y, i64 rows, int len)            \
    {                                                                                              \
        rd_softmax_warp<V>(logsm, x, y, rows, len);                                                \
    }
RD_SOFTMAX_WARP(4)
RD_SOFTMAX_WARP(8)
RD_SOFTMAX_WARP(16)
RD_SOFTMAX_WARP(32)

// ---- softmax / log-softmax backward (SOFTMAX_BACKWARD) -------------------------------------
// y the forward's output, g its gradient: o = y (g - sum(g y)), or for log-softmax (lg)
// g - exp(y) sum(g), the sums along the line.

// Any dtype and strides, one block of 256 threads per line (rdline: xs / sx walk y, os0 / s0
// the output, os1 / s1 g): the sum in double, exp in f32 below f64, one rounding per output, as
// cpu_reduce.c's softmax_bw_line.
extern "C" __global__ void __launch_bounds__(256)
    em_rd_softmax_bw(int lg, int dt, const void *y, const void *g, void *o, rdline s)
{
    __shared__ double sh[8];
    const bool single = dt != RD_F64;
    for (i64 r = blockIdx.x; r < s.lines; r += gridDim.x) {
        i64 yo, oo, go;
        rd_line(s, r, &yo, &oo, &go);
        double acc = 0;
        for (i64 k = threadIdx.x; k < s.len; k += 256) {
            double gv = rd_ldf(g, dt, go + k * s.s1);
            acc += lg ? gv : gv * rd_ldf(y, dt, yo + k * s.sx);
        }
        double sum = rd_bsum(acc, sh);
        for (i64 k = threadIdx.x; k < s.len; k += 256) {
            double yv = rd_ldf(y, dt, yo + k * s.sx), gv = rd_ldf(g, dt, go + k * s.s1);
            double e = single ? (double)expf((float)yv) : exp(yv);
            rd_stf(o, dt, oo + k * s.s0, lg ? gv - e * sum : yv * (gv - sum));
        }
    }
}

// V values of a row of len floats for thread t of T per row (elements t, t + T, ..., or float4s
// at 4 (t + k T) when vec), zeros past the end.
template <int V, int T>
__device__ __forceinline__ void sbw_load(const float *p, float *v, int len, int t, bool vec)
{
    if (V >= 4 && vec) {
#pragma unroll
        for (int k = 0; k < V / 4; k++) {
            int j = (k * T + t) * 4;
            float4 q = j < len ? __ldcs((const float4 *)(p + j)) : make_float4(0.f, 0.f, 0.f, 0.f);
            v[4 * k] = q.x, v[4 * k + 1] = q.y, v[4 * k + 2] = q.z, v[4 * k + 3] = q.w;
        }
    } else {
#pragma unroll
        for (int k = 0; k < V; k++) {
            int j = k * T + t;
            v[k] = j < len ? __ldcs(p + j) : 0.f;
        }
    }
}

template <int V, int T>
__device__ __forceinline__ void sbw_store(float *p, const float *v, int len, int t, bool vec)
{
    if (V >= 4 && vec) {
#pragma unroll
        for (int k = 0; k < V / 4; k++) {
            int j = (k * T + t) * 4;
            if (j < len)
                __stcs((float4 *)(p + j),
                       make_float4(v[4 * k], v[4 * k + 1], v[4 * k + 2], v[4 * k + 3]));
        }
    } else {
#pragma unroll
        for (int k = 0; k < V; k++) {
            int j = k * T + t;
            if (j < len) __stcs(p + j, v[k]);
        }
    }
}

// Contiguous f32 rows of len <= T V: T = 32, a warp per row (8 rows per block of 256); T = 256,
// a block per row. Each thread keeps its V values of y and g in registers; its partial sum (at
// most V terms) in f32, added across the row in double; the outputs in f32.
template <int V, int T>
__device__ __forceinline__ void softmax_bw_rows(int lg, const float *y, const float *g, float *o,
                                                i64 rows, int len)
{
    __shared__ double sh[8];
    const int t = T == 32 ? (threadIdx.x & 31) : threadIdx.x;
    const i64 per = T == 32 ? (blockDim.x >> 5) : 1;
    const bool vec =
        (len & 3) == 0 &&
        (((unsigned long long)y | (unsigned long long)g | (unsigned long long)o) & 15) == 0;
    for (i64 r = (i64)blockIdx.x * per + (T == 32 ? (threadIdx.x >> 5) : 0); r < rows;
         r += (i64)gridDim.x * per) {
        float a[V], b[V]; // g, y
        sbw_load<V, T>(g + r * len, a, len, t, vec);
        sbw_load<V, T>(y + r * len, b, len, t, vec);
        float acc = 0.f;
#pragma unroll
        for (int k = 0; k < V; k++) acc += lg ? a[k] : a[k] * b[k];
        double sum = acc;
        for (int m = 16; m > 0; m >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, m);
        if (T != 32) {
            __syncthreads();
            if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = sum;
            __syncthreads();
            sum = 0;
            for (int k = 0; k < 8; k++) sum += sh[k]; // fixed order: reproducible
        }
        const float s = (float)sum;
#pragma unroll
        for (int k = 0; k < V; k++) b[k] = lg ? a[k] - expf(b[k]) * s : b[k] * (a[k] - s);
        sbw_store<V, T>(o + r * len, b, len, t, vec);
    }
}

#define SOFTMAX_BW(V)                                                                              \
    extern "C" __global__ void __launch_bounds__(256) em_softmax_bw_warp_v##V(                     \
        int lg, const float *y, const float *g, float *o, i64 rows, int len)                       \
    {                                                                                              \
        softmax_bw_rows<V, 32>(lg, y, g, o, rows, len);                                            \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(256) em_softmax_bw_rows_v##V(                     \
        int lg, const float *y, const float *g, float *o, i64 rows, int len)                       \
    {                                                                                              \
        softmax_bw_rows<V, 256>(lg, y, g, o, rows, len);                                           \
    }
SOFTMAX_BW(4)
SOFTMAX_BW(8)
SOFTMAX_BW(16)
SOFTMAX_BW(32)
