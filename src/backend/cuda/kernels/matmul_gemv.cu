// Matrix-vector products (MATMUL records with N == 1 or M == 1), memory-bound: f32 accumulation,
// any strides, batches. TY: 0 f32, 1 f16, 2 bf16. Output contiguous [batch][M][N].
#include "matmul.cuh"
template <int TY> __device__ __forceinline__ float gv_ld(const void *p, i64 i)
{
    if (TY == 0) return ((const float *)p)[i];
    unsigned short h = ((const unsigned short *)p)[i];
    return TY == 1 ? em_h2f(h) : em_b2f(h);
}

template <int TY> __device__ __forceinline__ void gv_st(void *p, i64 i, float v)
{
    if (TY == 0)
        ((float *)p)[i] = v;
    else
        ((unsigned short *)p)[i] = TY == 1 ? em_f2h(v) : em_f2b(v);
}

// N == 1: c[m] = sum_k A[m][k] x[k], one warp per row; lanes take every 32nd k (f32 rows with unit
// strides and 16-byte alignment: every 32nd float4), then a fixed shuffle tree.
template <int TY>
__device__ __forceinline__ void gemv_rows(const void *a, const void *b, void *c, const mmidx &s)
{
    const int lane = threadIdx.x & 31;
    const i64 warps = (i64)gridDim.x * (blockDim.x >> 5), rows = s.nbatch * s.M;
    for (i64 r = (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); r < rows; r += warps) {
        const i64 bt = r / s.M, m = r - bt * s.M;
        i64 ao, bo;
        batch_offsets(s, bt, ao, bo);
        ao += m * s.sam;
        float acc = 0.f;
        if (TY == 0 && s.sak == 1 && s.sbk == 1 && (s.K & 3) == 0 &&
            !(((unsigned long long)((const float *)a + ao) |
               (unsigned long long)((const float *)b + bo)) &
              15)) {
            const float4 *av = (const float4 *)((const float *)a + ao);
            const float4 *xv = (const float4 *)((const float *)b + bo);
            for (i64 q = lane; q < s.K / 4; q += 32) {
                const float4 u = av[q], v = xv[q];
                acc = fmaf(u.x, v.x, acc);
                acc = fmaf(u.y, v.y, acc);
                acc = fmaf(u.z, v.z, acc);
                acc = fmaf(u.w, v.w, acc);
            }
        } else
            for (i64 k = lane; k < s.K; k += 32)
                acc = fmaf(gv_ld<TY>(a, ao + k * s.sak), gv_ld<TY>(b, bo + k * s.sbk), acc);
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (lane == 0) gv_st<TY>(c, r, acc);
    }
}

// M == 1: c[n] = sum_k x[k] B[k][n], one thread per column (a warp reads 32 neighbouring columns)
// over slice blockIdx.y of `parts` equal k slices; with parts > 1 the slice sums go to ws
// [batch][parts][N] and gemv_sum adds them in slice order.
template <int TY>
__device__ __forceinline__ void gemv_cols(const void *a, const void *b, void *c, float *ws,
                                          const mmidx &s, int parts)
{
    const i64 n = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 slice = (s.K + parts - 1) / parts, k0 = blockIdx.y * slice;
    const i64 k1 = k0 + slice < s.K ? k0 + slice : s.K;
    if (n >= s.N) return;
    for (i64 bt = blockIdx.z; bt < s.nbatch; bt += gridDim.z) {
        i64 ao, bo;
        batch_offsets(s, bt, ao, bo);
        bo += n * s.sbn;
        float acc = 0.f;
        i64 k = k0;
        for (; k + 4 <= k1; k += 4) { // four loads in flight
            const float x0 = gv_ld<TY>(a, ao + k * s.sak), x1 = gv_ld<TY>(a, ao + (k + 1) * s.sak);
            const float x2 = gv_ld<TY>(a, ao + (k + 2) * s.sak),
                        x3 = gv_ld<TY>(a, ao + (k + 3) * s.sak);
            const float y0 = gv_ld<TY>(b, bo + k * s.sbk), y1 = gv_ld<TY>(b, bo + (k + 1) * s.sbk);
            const float y2 = gv_ld<TY>(b, bo + (k + 2) * s.sbk),
                        y3 = gv_ld<TY>(b, bo + (k + 3) * s.sbk);
            acc = fmaf(x0, y0, acc);
            acc = fmaf(x1, y1, acc);
            acc = fmaf(x2, y2, acc);
            acc = fmaf(x3, y3, acc);
        }
        for (; k < k1; k++)
            acc = fmaf(gv_ld<TY>(a, ao + k * s.sak), gv_ld<TY>(b, bo + k * s.sbk), acc);
        if (parts == 1)
            gv_st<TY>(c, bt * s.N + n, acc);
        else
            ws[(bt * parts + blockIdx.y) * s.N + n] = acc;
    }
}

// gemv_cols for f32 with B's columns contiguous (sbn == 1) and 16-byte aligned rows: a block
// takes 128 neighbouring columns (a float4 per lane) of its k slice; its 8 warps take every 8th
// row of the slice (eight rows in flight per lane), and their sums are added in warp order
// through shared memory.
__device__ __forceinline__ void gemv_cols4(const float *a, const float *b, float *c, float *ws,
                                           const mmidx &s, int parts)
{
    __shared__ float4 part[8][32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const i64 n = (i64)blockIdx.x * 128 + lane * 4;
    const i64 slice = (s.K + parts - 1) / parts, k0 = blockIdx.y * slice;
    const i64 k1 = k0 + slice < s.K ? k0 + slice : s.K;
    const bool live = n < s.N;
    for (i64 bt = blockIdx.z; bt < s.nbatch; bt += gridDim.z) {
        i64 ao, bo;
        batch_offsets(s, bt, ao, bo);
        const float *x = a + ao, *bb = b + bo + (live ? n : 0);
        float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
        auto step = [&](float xv, float4 y) {
            acc.x = fmaf(xv, y.x, acc.x);
            acc.y = fmaf(xv, y.y, acc.y);
            acc.z = fmaf(xv, y.z, acc.z);
            acc.w = fmaf(xv, y.w, acc.w);
        };
        i64 k = k0 + w;
        if (live) {
            for (; k + 56 < k1; k += 64) {
                float4 y[8];
#pragma unroll
                for (int q = 0; q < 8; q++) y[q] = *(const float4 *)(bb + (k + 8 * q) * s.sbk);
#pragma unroll
                for (int q = 0; q < 8; q++) step(x[(k + 8 * q) * s.sak], y[q]);
            }
            for (; k < k1; k += 8) step(x[k * s.sak], *(const float4 *)(bb + k * s.sbk));
        }
        part[w][lane] = acc;
        __syncthreads();
        if (w == 0 && live) {
            float4 t = part[0][lane];
#pragma unroll
            for (int v = 1; v < 8; v++) {
                const float4 u = part[v][lane];
                t.x += u.x, t.y += u.y, t.z += u.z, t.w += u.w;
            }
            float *o = parts == 1 ? c + bt * s.N + n : ws + (bt * parts + blockIdx.y) * s.N + n;
            *(float4 *)o = t;
        }
        __syncthreads();
    }
}

extern "C" __global__ void em_gemv_cols4_f32(const float *a, const float *b, float *c, float *ws,
                                             mmidx s, int parts)
{
    gemv_cols4(a, b, c, ws, s, parts);
}

// Slice sums in slice order; eight loads issued before their adds (the adds stay in order).
template <int TY>
__device__ __forceinline__ void gemv_sum(const float *ws, void *c, i64 N, i64 nb, int parts)
{
    GRID_LOOP(N * nb)
    {
        const i64 bt = i / N, n = i - bt * N;
        const float *w = ws + bt * parts * N + n;
        float acc = 0.f;
        int p = 0;
        for (; p + 8 <= parts; p += 8) {
            float v[8];
#pragma unroll
            for (int q = 0; q < 8; q++) v[q] = w[(p + q) * N];
#pragma unroll
            for (int q = 0; q < 8; q++) acc += v[q];
        }
        for (; p < parts; p++) acc += w[p * N];
        gv_st<TY>(c, i, acc);
    }
}

#define GEMV_KERNELS(ty, TY)                                                                       \
    extern "C" __global__ void em_gemv_rows_##ty(const void *a, const void *b, void *c, mmidx s)   \
    {                                                                                              \
        gemv_rows<TY>(a, b, c, s);                                                                 \
    }                                                                                              \
    extern "C" __global__ void em_gemv_cols_##ty(const void *a, const void *b, void *c, float *ws, \
                                                 mmidx s, int parts)                               \
    {                                                                                              \
        gemv_cols<TY>(a, b, c, ws, s, parts);                                                      \
    }                                                                                              \
    extern "C" __global__ void em_gemv_sum_##ty(const float *ws, void *c, i64 N, i64 nb,           \
                                                int parts)                                         \
    {                                                                                              \
        gemv_sum<TY>(ws, c, N, nb, parts);                                                         \
    }
GEMV_KERNELS(f32, 0)
GEMV_KERNELS(f16, 1)
GEMV_KERNELS(bf16, 2)
