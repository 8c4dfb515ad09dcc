// Random numbers on the device from the same Philox 4x32-10 stream as the CPU (src/core/rng.c):
// element i of an op with {seed, offset} reads counter offset + i / 2. Uniform values, Bernoulli
// draws, random integers and dropout masks equal the CPU's bit for bit; normal values go through
// the device's log, sqrt, sin and cos, which agree with the CPU's to within an ulp of double.
#include "prelude.cuh"
__device__ __forceinline__ void philox(u64 c, u64 seed, unsigned w[4])
{
    unsigned c0 = (unsigned)c, c1 = (unsigned)(c >> 32), c2 = 0, c3 = 0;
    unsigned k0 = (unsigned)seed, k1 = (unsigned)(seed >> 32);
#pragma unroll
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        unsigned lo0 = 0xD2511F53u * c0, hi0 = __umulhi(0xD2511F53u, c0);
        unsigned lo1 = 0xCD9E8D57u * c2, hi1 = __umulhi(0xCD9E8D57u, c2);
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    w[0] = c0, w[1] = c1, w[2] = c2, w[3] = c3;
}

__device__ __forceinline__ double to_unit(unsigned hi, unsigned lo)
{
    return ((double)(hi >> 5) * 67108864.0 + (double)(lo >> 6)) / 9007199254740992.0;
}

__device__ __forceinline__ double uniform_at(u64 seed, u64 off, u64 i)
{
    unsigned w[4];
    philox(off + i / 2, seed, w);
    int k = (int)(i % 2) * 2;
    return to_unit(w[k], w[k + 1]);
}

__device__ __forceinline__ double normal_at(u64 seed, u64 off, u64 i)
{
    unsigned w[4];
    philox(off + i / 2, seed, w);
    double u1 = to_unit(w[0], w[1]), u2 = to_unit(w[2], w[3]);
    double r = sqrt(-2.0 * log(1.0 - u1)), th = 6.283185307179586476925286766559 * u2;
    return (i % 2) ? r * sin(th) : r * cos(th);
}

// ---- any dtype (kernels/ew.cu's element access); the output is contiguous --------------------

// largest value of dt strictly below hi (`below` in cpu_create.c)
__device__ double ew_below(double hi, int dt)
{
    if (dt == EW_F32) return nextafterf((float)hi, -__int_as_float(0x7f800000));
    if (dt == EW_F16 || dt == EW_BF16) {
        unsigned short h = dt == EW_F16 ? em_f2h((float)hi) : em_f2b((float)hi);
        if ((h & 0x7fff) == 0)
            h = 0x8001;
        else if (h & 0x8000)
            h = (unsigned short)(h + 1);
        else
            h = (unsigned short)(h - 1);
        return dt == EW_F16 ? em_h2f(h) : em_b2f(h);
    }
    return nextafter(hi, -__longlong_as_double(0x7ff0000000000000ll));
}

// kind 0 uniform [a, b), 1 normal a + b z, 2 Bernoulli(p) with p = a or operand 0 of s (pp, dp),
// 3 randint lo + [0, range) with lo = ilo, range = irange
// In a graph (gen not NULL) seed and the first counter come from gen[0] and gen[1] + off.
extern "C" __global__ void ew_rng(int kind, void *y, int dt, i64 n, u64 seed, u64 off, double a,
                                  double b, const void *pp, int dp, i64 ilo, i64 irange, ew_idx s,
                                  const u64 *gen)
{
    if (gen) seed = gen[0], off += gen[1];
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)blockDim.x * gridDim.x) {
        if (kind == 0) {
            ew_setf(y, dt, i, __dadd_rn(a, __dmul_rn(uniform_at(seed, off, (u64)i), b - a)));
            if (b > a && ew_getf(y, dt, i) >= b) ew_setf(y, dt, i, ew_below(b, dt));
        } else if (kind == 1)
            ew_setf(y, dt, i, __dadd_rn(a, __dmul_rn(b, normal_at(seed, off, (u64)i))));
        else if (kind == 2) {
            double p = a;
            if (pp) {
                i64 f[4];
                ew_offs(s, i, f);
                p = ew_getf(pp, dp, f[0]);
            }
            ew_setf(y, dt, i, uniform_at(seed, off, (u64)i) < p ? 1.0 : 0.0);
        } else {
            i64 k = (i64)(uniform_at(seed, off, (u64)i) * (double)irange);
            if (k >= irange) k = irange - 1;
            ew_seti(y, dt, i, ilo + k);
        }
    }
}

// dropout of a strided x (operand 0) into a contiguous y of any float dtype
extern "C" __global__ void ew_dropout(const void *x, int dx, void *y, int dt, i64 n, u64 seed,
                                      u64 off, double p, double scale, ew_idx s, const u64 *gen)
{
    if (gen) seed = gen[0], off += gen[1];
    EW_LOOP(n)
    double v = uniform_at(seed, off, (u64)i) >= p ? ew_getf(x, dx, f[0]) * scale : 0.0;
    ew_setf(y, dt, i, v);
    EW_END
}
// A graph's parameter block at a replay (cuda_graph.c): n 8-byte words by value into dst.
struct graph_words {
    u64 w[500];
};
extern "C" __global__ void em_graph_params(u64 *dst, unsigned n, graph_words v)
{
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) dst[i] = v.w[i];
}
