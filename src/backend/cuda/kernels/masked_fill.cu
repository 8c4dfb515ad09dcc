// masked_fill for any element size (it only moves bytes): x and the mask broadcast to the
// output through struct bidx; the fill value arrives as the bits the CPU's conversion gives.
#include "prelude.cuh"

// element offsets (in elements) of up to 4 operands (in0, in1, in2, out) at linear index i of
// the output's shape; broadcast dims have stride 0
struct bidx {
    i64 shape[8];
    i64 st[4][8];
    int rank;
};

__device__ void boffs(const bidx &s, i64 i, i64 *o)
{
    o[0] = o[1] = o[2] = o[3] = 0;
    for (int d = s.rank - 1; d >= 0; d--) {
        i64 q = i / s.shape[d], c = i - q * s.shape[d];
        o[0] += c * s.st[0][d];
        o[1] += c * s.st[1][d];
        o[2] += c * s.st[2][d];
        o[3] += c * s.st[3][d];
        i = q;
    }
}

#define MFILL_KERNEL(SZ, T)                                                                        \
    extern "C" __global__ void em_mfill_s##SZ(const T *x, const unsigned char *m, T *o, i64 n,     \
                                              u64 pattern, bidx s)                                 \
    {                                                                                              \
        T v = (T)pattern;                                                                          \
        GRID_LOOP(n)                                                                               \
        {                                                                                          \
            i64 f[4];                                                                              \
            boffs(s, i, f);                                                                        \
            o[f[3]] = m[f[1]] ? v : x[f[0]];                                                       \
        }                                                                                          \
    }
MFILL_KERNEL(1, unsigned char)
MFILL_KERNEL(2, unsigned short)
MFILL_KERNEL(4, unsigned int)
MFILL_KERNEL(8, unsigned long long)
