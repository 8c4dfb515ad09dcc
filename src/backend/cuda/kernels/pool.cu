// Max pooling over up to three spatial dims (leading dims of size 1 fill the rest; a plane fits
// 32-bit indices: the host checks), one thread per output element: the window's maximum and its
// index flattened within the sample-channel plane (PyTorch's convention; idx may be NULL for a
// values-only pool). A NaN wins, the last one in scan order, as on the CPU. x and the outputs are
// contiguous. f16/bf16 (H = 1, 2: T is their bits) compare as f32 and copy the winning value's
// bits.
struct poolg {
    i64 in[3], out[3], k[3], s[3], p[3], d[3];
    i64 planes;
};

template <int H, typename T> __device__ __forceinline__ float maxpool_h2f(T v)
{
    if (H == 2) return __uint_as_float((unsigned)v << 16);
    float f;
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"((unsigned short)v));
    return f;
}

template <int H, typename V, typename T> __device__ __forceinline__ V maxpool_val(T v)
{
    if (H == 0) return (V)v;
    return (V)maxpool_h2f<H>(v);
}

// Grid: x over output positions of a plane (32-bit index arithmetic), y over planes.
template <typename T, typename V = T, int H = 0>
__device__ void max_pool(const T *x, T *y, i64 *idx, const poolg &g)
{
    const int i0 = (int)g.in[0], i1 = (int)g.in[1], i2 = (int)g.in[2];
    const int o1 = (int)g.out[1], o2 = (int)g.out[2];
    const int ip = i0 * i1 * i2, op = (int)(g.out[0] * o1 * o2);
    for (i64 pl = blockIdx.y; pl < g.planes; pl += gridDim.y) {
        const T *xp = x + pl * ip;
        for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < op; r += blockDim.x * gridDim.x) {
            int ow = r % o2, t = r / o2, oh = t % o1, od = t / o1;
            int s0 = od * (int)g.s[0] - (int)g.p[0], s1 = oh * (int)g.s[1] - (int)g.p[1];
            int s2 = ow * (int)g.s[2] - (int)g.p[2];
            V best = (V)0;
            T braw = (T)0;
            int bi = -1;
            for (int a = 0; a < (int)g.k[0]; a++) {
                int id = s0 + a * (int)g.d[0];
                if (id < 0 || id >= i0) continue;
                for (int b = 0; b < (int)g.k[1]; b++) {
                    int ih = s1 + b * (int)g.d[1];
                    if (ih < 0 || ih >= i1) continue;
                    for (int e = 0; e < (int)g.k[2]; e++) {
                        int iw = s2 + e * (int)g.d[2];
                        if (iw < 0 || iw >= i2) continue;
                        int li = (id * i1 + ih) * i2 + iw;
                        T raw = xp[li];
                        V v = maxpool_val<H, V>(raw);
                        if (bi < 0 || v > best || v != v) {
                            best = v;
                            braw = raw;
                            bi = li;
                        }
                    }
                }
            }
            T ninf = H == 1   ? (T)0xfc00
                     : H == 2 ? (T)0xff80
                              : (T)-__int_as_float(0x7f800000); // -inf: an empty window
            y[pl * op + r] = bi < 0 ? ninf : braw;
            if (idx) idx[pl * op + r] = bi;
        }
    }
}

extern "C" __global__ void em_max_pool_f32(const float *x, float *y, i64 *idx, poolg g)
{
    max_pool<float>(x, y, idx, g);
}

extern "C" __global__ void em_max_pool_f64(const double *x, double *y, i64 *idx, poolg g)
{
    max_pool<double>(x, y, idx, g);
}

extern "C" __global__ void em_max_pool_f16(const unsigned short *x, unsigned short *y, i64 *idx,
                                           poolg g)
{
    max_pool<unsigned short, float, 1>(x, y, idx, g);
}

extern "C" __global__ void em_max_pool_bf16(const unsigned short *x, unsigned short *y, i64 *idx,
                                            poolg g)
{
    max_pool<unsigned short, float, 2>(x, y, idx, g);
}
