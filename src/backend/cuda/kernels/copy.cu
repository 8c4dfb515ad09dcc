// Fills and strided gathers by element size (1, 2, 4 or 8 bytes), so every dtype shares one kernel.
#include "prelude.cuh"

#define FILL(NAME, T)                                                                              \
    extern "C" __global__ void NAME(T *o, i64 n, u64 pattern)                                      \
    {                                                                                              \
        T v = (T)pattern;                                                                          \
        GRID_LOOP(n) o[i] = v;                                                                     \
    }
FILL(em_fill_1, unsigned char)
FILL(em_fill_2, unsigned short)
FILL(em_fill_4, unsigned int)
FILL(em_fill_8, u64)

// y (contiguous) = x seen through s (shape and element strides)
#define STRIDED(NAME, T)                                                                           \
    extern "C" __global__ void NAME(const T *x, T *y, i64 n, strided s)                            \
    {                                                                                              \
        GRID_LOOP(n)                                                                               \
        {                                                                                          \
            i64 r = i, off = 0;                                                                    \
            for (int d = s.rank - 1; d >= 0; d--) {                                                \
                i64 q = r / s.shape[d];                                                            \
                off += (r - q * s.shape[d]) * s.strides[d];                                        \
                r = q;                                                                             \
            }                                                                                      \
            y[i] = x[off];                                                                         \
        }                                                                                          \
    }
STRIDED(em_strided_1, unsigned char)
STRIDED(em_strided_2, unsigned short)
STRIDED(em_strided_4, unsigned int)
STRIDED(em_strided_8, u64)
