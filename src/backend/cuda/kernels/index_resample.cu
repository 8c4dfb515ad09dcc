// Average pooling, adaptive average/max pooling and interpolation (host side: cuda_resample.c),
// one thread per output element, mirroring the CPU kernels of cpu_pool.c: the same scan order,
// f64 accumulation, and f64 arithmetic kept free of contractions (the CPU rounds each step).
// Spatial dims are padded to three with leading size-1 dims; x is read through its strides (the
// leading dims are the planes), y is contiguous. Float dtypes through index.cuh's dtype helpers.
#include "index.cuh"
struct rs_geom {
    i64 in[3], out[3], k[3], s[3], p[3], d[3];
    i64 lead[2], lst[2]; // leading (plane) dims of x and their strides
    i64 xs[3];           // x's spatial strides (0 for padded dims)
    i64 planes;
    int nlead, incl_pad, mode, align;
};

__device__ __forceinline__ i64 rs_base(const rs_geom &g, i64 pl)
{
    i64 off = 0;
    for (int d = g.nlead - 1; d >= 0; d--) {
        i64 q = pl / g.lead[d];
        off += (pl - q * g.lead[d]) * g.lst[d];
        pl = q;
    }
    return off;
}

#define RS_LOOP                                                                                    \
    const i64 op = g.out[0] * g.out[1] * g.out[2], n = op * g.planes;                              \
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;                                \
         i += (i64)blockDim.x * gridDim.x) {                                                       \
        i64 pl = i / op, r = i - pl * op;                                                          \
        const i64 ow = r % g.out[2], t = r / g.out[2], oh = t % g.out[1], od = t / g.out[1];       \
        const i64 base = rs_base(g, pl);

#define RS_END }

// AVG_POOL: the window's mean over the positions inside the input (count_include_pad: the
// window clipped to the padded input); an empty window gives NaN.
extern "C" __global__ void rs_avg_pool(const void *x, int dt, void *y, rs_geom g)
{
    RS_LOOP
    i64 st[3] = {od * g.s[0] - g.p[0], oh * g.s[1] - g.p[1], ow * g.s[2] - g.p[2]};
    double sum = 0;
    i64 count = 0;
    for (i64 a = 0; a < g.k[0]; a++) {
        i64 id = st[0] + a * g.d[0];
        if (id < 0 || id >= g.in[0]) continue;
        for (i64 b = 0; b < g.k[1]; b++) {
            i64 ih = st[1] + b * g.d[1];
            if (ih < 0 || ih >= g.in[1]) continue;
            for (i64 e = 0; e < g.k[2]; e++) {
                i64 iw = st[2] + e * g.d[2];
                if (iw < 0 || iw >= g.in[2]) continue;
                sum += idx_getf(x, base + id * g.xs[0] + ih * g.xs[1] + iw * g.xs[2], dt);
                count++;
            }
        }
    }
    if (g.incl_pad) {
        count = 1;
        for (int k = 0; k < 3; k++) {
            i64 lo = st[k], hi = st[k] + (g.k[k] - 1) * g.d[k] + 1;
            if (hi > g.in[k] + g.p[k]) hi = g.in[k] + g.p[k];
            count *= (hi - lo + g.d[k] - 1) / g.d[k];
        }
    }
    idx_setf(y, i, dt, count ? sum / (double)count : __longlong_as_double(0x7ff8000000000000ll));
    RS_END
}

// ADAPTIVE_AVG_POOL / ADAPTIVE_MAX_POOL (is_max; idx: i64 argmax within the plane, the first
// maximum, a NaN wins).
extern "C" __global__ void rs_adaptive(const void *x, int dt, void *y, long long *idx, int is_max,
                                       rs_geom g)
{
    RS_LOOP
    i64 o3[3] = {od, oh, ow}, lo[3], hi[3];
    for (int k = 0; k < 3; k++) {
        lo[k] = o3[k] * g.in[k] / g.out[k];
        hi[k] = ((o3[k] + 1) * g.in[k] + g.out[k] - 1) / g.out[k];
    }
    double best = -__longlong_as_double(0x7ff0000000000000ll), sum = 0;
    i64 best_i = -1;
    for (i64 a = lo[0]; a < hi[0]; a++)
        for (i64 b = lo[1]; b < hi[1]; b++)
            for (i64 e = lo[2]; e < hi[2]; e++) {
                double v = idx_getf(x, base + a * g.xs[0] + b * g.xs[1] + e * g.xs[2], dt);
                sum += v;
                if (v > best || v != v || best_i < 0) {
                    best = v;
                    best_i = (a * g.in[1] + b) * g.in[2] + e;
                }
            }
    if (is_max) {
        idx_setf(y, i, dt, best);
        if (idx) idx[i] = best_i;
    } else {
        i64 cnt = (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);
        idx_setf(y, i, dt, sum / (double)cnt);
    }
    RS_END
}

__device__ __forceinline__ double rs_src(i64 o, i64 in, i64 out, int align, bool cubic)
{
    if (align) return out > 1 ? (double)o * (double)(in - 1) / (double)(out - 1) : 0.0;
    double s = __dadd_rn(((double)o + 0.5) * (double)in / (double)out, -0.5);
    return (!cubic && s < 0) ? 0.0 : s;
}

__device__ __forceinline__ double rs_mad(double a, double b, double c)
{
    return __dadd_rn(__dmul_rn(a, b), c); // rounded twice, as the CPU's a * b + c
}

// The CPU's cubic_w step by step: ((A x - 5A) x + 8A) x - 4A outside, ((A+2) x - (A+3)) x x + 1
// inside (A = -0.75; the constants are exact).
__device__ __forceinline__ double rs_cubic_w(double t, int k)
{
    const double A = -0.75;
    double v = k == 0 ? t + 1 : k == 1 ? t : k == 2 ? 1 - t : 2 - t;
    if (k == 0 || k == 3) return rs_mad(rs_mad(rs_mad(A, v, -5 * A), v, 8 * A), v, -4 * A);
    return __dadd_rn(__dmul_rn(__dmul_rn(rs_mad(A + 2, v, -(A + 3)), v), v), 1.0);
}

__device__ __forceinline__ i64 rs_clamp(i64 v, i64 lo, i64 hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

// INTERPOLATE over [H, W] (1-D input: H = 1). mode 0 nearest, 1 bilinear, 2 bicubic (A = -0.75,
// clamped borders).
extern "C" __global__ void rs_interp(const void *x, int dt, void *y, rs_geom g)
{
    RS_LOOP(void) od;
    const i64 IH = g.in[1], IW = g.in[2], OH = g.out[1], OW = g.out[2];
    const i64 hs = g.xs[1], ws = g.xs[2];
    double v;
    if (g.mode == 0) {
        i64 ih = (i64)floor((double)oh * (double)IH / (double)OH);
        i64 iw = (i64)floor((double)ow * (double)IW / (double)OW);
        v = idx_getf(x, base + rs_clamp(ih, 0, IH - 1) * hs + rs_clamp(iw, 0, IW - 1) * ws, dt);
    } else if (g.mode == 1) {
        double sh = rs_src(oh, IH, OH, g.align, false), sw = rs_src(ow, IW, OW, g.align, false);
        i64 h0 = (i64)sh, w0 = (i64)sw;
        if (h0 > IH - 1) h0 = IH - 1;
        if (w0 > IW - 1) w0 = IW - 1;
        i64 h1 = h0 + (h0 < IH - 1), w1 = w0 + (w0 < IW - 1);
        double lh = sh - (double)h0, lw = sw - (double)w0;
        double v00 = idx_getf(x, base + h0 * hs + w0 * ws, dt);
        double v01 = idx_getf(x, base + h0 * hs + w1 * ws, dt);
        double v10 = idx_getf(x, base + h1 * hs + w0 * ws, dt);
        double v11 = idx_getf(x, base + h1 * hs + w1 * ws, dt);
        double top = __dadd_rn(__dmul_rn(1 - lw, v00), __dmul_rn(lw, v01));
        double bot = __dadd_rn(__dmul_rn(1 - lw, v10), __dmul_rn(lw, v11));
        v = __dadd_rn(__dmul_rn(1 - lh, top), __dmul_rn(lh, bot));
    } else {
        double sh = rs_src(oh, IH, OH, g.align, true), sw = rs_src(ow, IW, OW, g.align, true);
        i64 h0 = (i64)floor(sh), w0 = (i64)floor(sw);
        double th = sh - (double)h0, tw = sw - (double)w0;
        v = 0;
        for (int a = 0; a < 4; a++) {
            i64 hh = rs_clamp(h0 - 1 + a, 0, IH - 1);
            double row = 0;
            for (int b = 0; b < 4; b++) {
                i64 ww = rs_clamp(w0 - 1 + b, 0, IW - 1);
                row = __dadd_rn(
                    row, __dmul_rn(rs_cubic_w(tw, b), idx_getf(x, base + hh * hs + ww * ws, dt)));
            }
            v = rs_mad(rs_cubic_w(th, a), row, v);
        }
    }
    idx_setf(y, i, dt, v);
    RS_END
}
