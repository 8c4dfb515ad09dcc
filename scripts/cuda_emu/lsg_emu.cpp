// Cross entropy's row kernels (kernels/reduce.cu: lsg_rows, behind em_lsg_warp_f32 and
// em_lsg_rows_f32) run on the CPU: one std::thread per CUDA thread of a 256-thread block, blocks
// one after the other, shuffles and __syncthreads through barriers. Checks the online max / sum,
// the warp and block combines, the float4 and scalar paths and the grid-stride row loop against
// f64 references (log_softmax at t; g (onehot(t) - softmax)), with a row whose index is out of
// range and rows holding -inf. Built and run by scripts/cuda-emu-lsg.sh.
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
typedef long long i64;
#define __device__
#define __forceinline__
#define __shared__ static
struct dim3e {
    unsigned x, y, z;
};
thread_local dim3e threadIdx, blockIdx;
dim3e gridDim, blockDim;
struct alignas(16) float4 {
    float x, y, z, w;
};
static std::barrier<> *blockbar;
static std::barrier<> *warpbar[8];
static float wslot[8][32];
static void __syncthreads()
{
    blockbar->arrive_and_wait();
}
static float __int_as_float(int i)
{
    float f;
    memcpy(&f, &i, 4);
    return f;
}
static float __shfl_xor_sync(unsigned, float v, int m)
{
    int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    wslot[w][l] = v;
    warpbar[w]->arrive_and_wait();
    float r = wslot[w][l ^ m];
    warpbar[w]->arrive_and_wait();
    return r;
}
template <typename T> static void __stcs(T *p, T v)
{
    *p = v;
}
#include "lsg_emu_kernels.inc"

static int fails;
static i64 checks;

static void check(const char *what, double want, float got)
{
    checks++;
    bool ok = std::isnan(want) ? std::isnan(got)
                               : std::fabs(got - want) <= 1e-5 + 1e-5 * std::fabs(want);
    if (!ok && fails++ < 20) fprintf(stderr, "FAIL %s: got %.9g, want %.9g\n", what, got, want);
}

// rows x len logits (row 1 partly -inf when there are two rows or more; one index out of range)
template <int T> static void run_case(int bw, i64 rows, int len, unsigned blocks, int off)
{
    std::vector<float> buf((size_t)(rows * len + 8)), g(rows), o((size_t)(bw ? rows * len + 8 : rows));
    float *x = buf.data() + off; // off = 1: a base that is not 16-byte aligned
    std::vector<i64> t(rows);
    srand(7 + len);
    for (i64 i = 0; i < rows * len; i++) x[i] = (float)(rand() % 20000) / 2500.f - 4.f;
    if (rows > 1)
        for (int j = 0; j < len; j += 3) x[len + j] = -INFINITY;
    for (i64 r = 0; r < rows; r++) {
        t[r] = (r * 7 + 1) % len;
        if (rows > 1 && r == 1 && t[r] % 3 == 0) t[r]++;
        g[r] = (float)(rand() % 2000) / 1000.f - 1.f;
    }
    if (rows > 2) t[2] = len; // out of range
    float *op = o.data() + (bw ? off : 0);
    gridDim = {blocks, 1, 1};
    blockDim = {256, 1, 1};
    for (unsigned b = 0; b < blocks; b++) {
        std::barrier<> bb(256), w0(32), w1(32), w2(32), w3(32), w4(32), w5(32), w6(32), w7(32);
        std::barrier<> *ws[8] = {&w0, &w1, &w2, &w3, &w4, &w5, &w6, &w7};
        blockbar = &bb;
        for (int k = 0; k < 8; k++) warpbar[k] = ws[k];
        std::vector<std::thread> th;
        for (unsigned tid = 0; tid < 256; tid++)
            th.emplace_back([&, b, tid] {
                blockIdx = {b, 0, 0};
                threadIdx = {tid, 0, 0};
                lsg_rows<T>(bw, x, t.data(), g.data(), op, rows, len);
            });
        for (auto &h : th) h.join();
    }
    char what[96];
    for (i64 r = 0; r < rows; r++) {
        const float *xr = x + r * len;
        double m = -INFINITY, s = 0;
        for (int j = 0; j < len; j++) m = std::fmax(m, (double)xr[j]);
        for (int j = 0; j < len; j++) s += std::exp((double)xr[j] - m);
        bool in = t[r] >= 0 && t[r] < len;
        snprintf(what, sizeof what, "T %d %s rows %lld len %d off %d row %lld", T,
                 bw ? "backward" : "forward", rows, len, off, r);
        if (!bw) {
            check(what, in ? xr[t[r]] - m - std::log(s) : NAN, op[r]);
            continue;
        }
        for (int j = 0; j < len; j++)
            check(what, in ? g[r] * ((j == t[r] ? 1.0 : 0.0) - std::exp(xr[j] - m) / s) : 0.0,
                  op[r * len + j]);
    }
}

int main()
{
    for (int bw = 0; bw < 2; bw++)
        for (int off = 0; off < 2; off++) {
            run_case<32>(bw, 5, 10, 1, off);    // scalar (len % 4), fewer rows than warps
            run_case<32>(bw, 19, 100, 2, off);  // float4 when aligned, rows past the grid
            run_case<32>(bw, 3, 1000, 1, off);
            run_case<256>(bw, 4, 1501, 3, off); // scalar, fewer blocks than rows
            run_case<256>(bw, 3, 3000, 2, off);
            run_case<256>(bw, 2, 9000, 1, off);
        }
    printf("%lld checks, %d failed\n", checks, fails);
    return fails != 0;
}
