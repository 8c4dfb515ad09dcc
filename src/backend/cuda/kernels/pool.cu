// Max pooling over up to three spatial dims (leading dims of size 1 fill the rest), one thread per
// output element: the window's maximum and its index flattened within the sample-channel plane
// (PyTorch's convention; idx may be NULL for a values-only pool). A NaN wins, the last one in scan
// order, as on the CPU. x and the outputs are contiguous.
struct poolg {
    i64 in[3], out[3], k[3], s[3], p[3], d[3];
    i64 planes;
};

template <typename T>
__device__ void max_pool(const T *x, T *y, i64 *idx, const poolg &g)
{
    const i64 ip = g.in[0] * g.in[1] * g.in[2], op = g.out[0] * g.out[1] * g.out[2];
    const i64 n = g.planes * op;
    for (i64 o = (i64)blockIdx.x * blockDim.x + threadIdx.x; o < n; o += (i64)blockDim.x * gridDim.x) {
        i64 pl = o / op, r = o - pl * op;
        i64 ow = r % g.out[2], t = r / g.out[2];
        i64 oh = t % g.out[1], od = t / g.out[1];
        i64 s0 = od * g.s[0] - g.p[0], s1 = oh * g.s[1] - g.p[1], s2 = ow * g.s[2] - g.p[2];
        const T *xp = x + pl * ip;
        double best = -__longlong_as_double(0x7ff0000000000000ll);
        i64 bi = -1;
        for (i64 a = 0; a < g.k[0]; a++) {
            i64 id = s0 + a * g.d[0];
            if (id < 0 || id >= g.in[0]) continue;
            for (i64 b = 0; b < g.k[1]; b++) {
                i64 ih = s1 + b * g.d[1];
                if (ih < 0 || ih >= g.in[1]) continue;
                for (i64 e = 0; e < g.k[2]; e++) {
                    i64 iw = s2 + e * g.d[2];
                    if (iw < 0 || iw >= g.in[2]) continue;
                    i64 li = (id * g.in[1] + ih) * g.in[2] + iw;
                    double v = (double)xp[li];
                    if (v > best || v != v || bi < 0) {
                        best = v;
                        bi = li;
                    }
                }
            }
        }
        y[o] = (T)best;
        if (idx) idx[o] = bi;
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
