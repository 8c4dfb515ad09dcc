// What the index unit's files (index.cu, index_resample.cu) share: float element loads and stores
// by dtype code, as the CPU's cpu_get_* / cpu_set_* convert.
#ifndef EMBER_CUDA_INDEX_CUH
#define EMBER_CUDA_INDEX_CUH
#include "prelude.cuh"

// dtype codes: 0 f64, 1 f32, 2 f16, 3 bf16, 4 i64, 5 i32, 6 i16, 7 i8, 8 u8, 9 bool
__device__ __forceinline__ double idx_getf(const void *p, i64 o, int dt)
{
    switch (dt) {
    case 0: return ((const double *)p)[o];
    case 1: return ((const float *)p)[o];
    case 2: return em_h2f(((const unsigned short *)p)[o]);
    default: return __uint_as_float((unsigned)((const unsigned short *)p)[o] << 16);
    }
}

__device__ __forceinline__ void idx_setf(void *p, i64 o, int dt, double v)
{
    switch (dt) {
    case 0: ((double *)p)[o] = v; break;
    case 1: ((float *)p)[o] = (float)v; break;
    case 2: ((unsigned short *)p)[o] = em_f2h((float)v); break;
    default: ((unsigned short *)p)[o] = em_f2b((float)v); break;
    }
}
#endif
