// The flash attention kernels (kernels/attention_flash2.cu forward, kernels/attention_bwd.cu
// backward) run on the CPU: one std::thread per CUDA thread of a 128-thread block, blocks one
// after the other, and ldmatrix, mma.sync m16n8k16, shuffles and __syncthreads emulated through
// barriers (cp.async becomes a synchronous copy). Checks the kernels' fragment layouts and
// control flow against f64 references without a GPU; the forward, which runs on the H200, checks
// the emulation itself. Built and run by scripts/cuda-emu-attention.sh (C++20, minutes).
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#include <functional>
typedef long long i64;
typedef unsigned long long u64;
// the headers the kernels include: attention_mma.cuh's PTX is emulated below, and prelude.cuh
// holds nothing they use beyond the types above
#define EMBER_CUDA_PRELUDE_CUH
#define EMBER_CUDA_ATTENTION_MMA_CUH
#define __device__
#define __forceinline__
#define __global__
#define __align__(x)
#define __launch_bounds__(...)
struct dim3e {
    unsigned x, y, z;
};
thread_local dim3e threadIdx, blockIdx;
dim3e gridDim;
alignas(16) static unsigned char g_smem[256 * 1024];
static std::barrier<> *blockbar;
static std::barrier<> *warpbar[8];
static void __syncthreads()
{
    blockbar->arrive_and_wait();
}
static unsigned long long wslot[8][32][8];
static inline void wsync()
{
    warpbar[threadIdx.x >> 5]->arrive_and_wait();
}
static float __int_as_float(int i)
{
    float f;
    memcpy(&f, &i, 4);
    return f;
}
static float __uint_as_float(unsigned i)
{
    float f;
    memcpy(&f, &i, 4);
    return f;
}
static float __shfl_xor_sync(unsigned, float v, int m)
{
    int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    memcpy(&wslot[w][l][0], &v, 4);
    wsync();
    float r;
    memcpy(&r, &wslot[w][l ^ m][0], 4);
    wsync();
    return r;
}
static unsigned attn_smem(const void *p)
{
    return (unsigned)((const unsigned char *)p - g_smem);
}
static void attn_cp16(unsigned dst, const void *src, bool valid)
{
    if (valid)
        memcpy(g_smem + dst, src, 16);
    else
        memset(g_smem + dst, 0, 16);
}
static unsigned short sh(unsigned addr)
{
    unsigned short h;
    memcpy(&h, g_smem + addr, 2);
    return h;
}
static void attn_ldsm4(unsigned addr, unsigned &r0, unsigned &r1, unsigned &r2, unsigned &r3)
{
    int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    wslot[w][l][0] = addr;
    wsync();
    unsigned r[4];
    for (int i = 0; i < 4; i++) {
        unsigned ra = (unsigned)wslot[w][8 * i + (l >> 2)][0];
        unsigned lo = sh(ra + (l & 3) * 4), hi = sh(ra + (l & 3) * 4 + 2);
        r[i] = lo | (hi << 16);
    }
    wsync();
    r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
}
static void attn_cp_commit()
{
}
template <int N> static void attn_cp_wait()
{
}
static unsigned short *attn_dyn_smem()
{
    return (unsigned short *)g_smem;
}
static void attn_sts32(unsigned addr, unsigned x)
{
    memcpy(g_smem + addr, &x, 4);
}
static void attn_ldsm4_t(unsigned addr, unsigned &r0, unsigned &r1, unsigned &r2, unsigned &r3)
{
    int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    wslot[w][l][0] = addr;
    wsync();
    unsigned r[4];
    for (int i = 0; i < 4; i++) {
        unsigned ra0 = (unsigned)wslot[w][8 * i + 2 * (l & 3)][0];
        unsigned ra1 = (unsigned)wslot[w][8 * i + 2 * (l & 3) + 1][0];
        unsigned lo = sh(ra0 + (l >> 2) * 2), hi = sh(ra1 + (l >> 2) * 2);
        r[i] = lo | (hi << 16);
    }
    wsync();
    r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
}
template <int BF> static float attn_h2f(unsigned short h)
{
    if (BF) return __uint_as_float((unsigned)h << 16);
    _Float16 f;
    memcpy(&f, &h, 2);
    return (float)f;
}
template <int BF> static unsigned short f2h(float x)
{
    if (BF) {
        unsigned u;
        memcpy(&u, &x, 4);
        u += 0x7fff + ((u >> 16) & 1);
        return (unsigned short)(u >> 16);
    }
    _Float16 f = (_Float16)x;
    unsigned short h;
    memcpy(&h, &f, 2);
    return h;
}
template <int BF> static unsigned attn_pack(float x, float y)
{
    return f2h<BF>(x) | ((unsigned)f2h<BF>(y) << 16);
}
static float attn_exp2(float x)
{
    return exp2f(x);
}
template <int BF> static void attn_mma(float *c, const unsigned *a, unsigned b0, unsigned b1)
{
    int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    unsigned long long *s = wslot[w][l];
    for (int i = 0; i < 4; i++) s[i] = a[i];
    s[4] = b0, s[5] = b1;
    float cc[4] = {c[0], c[1], c[2], c[3]};
    wsync();
    auto A = [&](int r, int k) {
        int reg = (r >= 8) + 2 * (k >= 8), lane = (r % 8) * 4 + (k % 8) / 2;
        unsigned v = (unsigned)wslot[w][lane][reg];
        return attn_h2f<BF>((unsigned short)(k % 2 ? v >> 16 : v & 0xffff));
    };
    auto B = [&](int k, int n) {
        int reg = 4 + (k >= 8), lane = n * 4 + (k % 8) / 2;
        unsigned v = (unsigned)wslot[w][lane][reg];
        return attn_h2f<BF>((unsigned short)(k % 2 ? v >> 16 : v & 0xffff));
    };
    for (int e = 0; e < 4; e++) {
        int r = (l >> 2) + 8 * (e >> 1), n = (l & 3) * 2 + (e & 1);
        float acc = cc[e];
        for (int k = 0; k < 16; k++) acc += A(r, k) * B(k, n);
        c[e] = acc;
    }
    wsync();
}
static int min(int a, int b)
{
    return a < b ? a : b;
}
static int __any_sync(unsigned, int p)
{
    int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    wslot[w][l][0] = p != 0;
    wsync();
    int r = 0;
    for (int i = 0; i < 32; i++) r |= (int)wslot[w][i][0];
    wsync();
    return r;
}
#include "../../src/backend/cuda/kernels/attention_bwd.cu"
#include "../../src/backend/cuda/kernels/attention_flash2.cu"

static int run_forward()
{
    const int L = 70, S = 130, D = 64;
    std::vector<unsigned short> q(L * D), k(S * D), v(S * D), o(L * D);
    std::vector<float> lse(L);
    for (auto *x : {&q, &k, &v})
        for (auto &e : *x) e = f2h<1>((float)(2.0 * rand() / RAND_MAX - 1));
    attn_flash_arg a;
    memset(&a, 0, sizeof a);
    a.nb = 1, a.bshape[0] = 1, a.nbatch = 1, a.L = L, a.S = S, a.qs = a.ks = a.vs = D;
    a.scale_log2 = (float)(0.125 * 1.4426950408889634), a.inv_scale = 8, a.causal = 1;
    gridDim = {1, 1, 1};
    std::barrier<> bb(128), w0(32), w1(32), w2(32), w3(32);
    blockbar = &bb, warpbar[0] = &w0, warpbar[1] = &w1, warpbar[2] = &w2, warpbar[3] = &w3;
    std::vector<std::thread> th;
    for (unsigned t = 0; t < 128; t++)
        th.emplace_back([&, t] {
            threadIdx = {t, 0, 0};
            blockIdx = {0, 0, 0};
            attn_flash2<1, 64, 0>(q.data(), k.data(), v.data(), nullptr, o.data(), lse.data(), a);
        });
    for (auto &x : th) x.join();
    double err = 0, mx = 0, lerr = 0;
    for (int i = 0; i < L; i++) {
        std::vector<double> p(S);
        double m = -INFINITY, sum = 0;
        for (int j = 0; j <= i && j < S; j++) {
            double s = 0;
            for (int e = 0; e < D; e++)
                s += (double)attn_h2f<1>(q[i * D + e]) * attn_h2f<1>(k[j * D + e]);
            p[j] = s * 0.125;
            m = fmax(m, p[j]);
        }
        for (int j = 0; j <= i && j < S; j++) sum += p[j] = exp(p[j] - m);
        lerr = fmax(lerr, fabs((m + log(sum)) / log(2.0) - lse[i]));
        for (int e = 0; e < D; e++) {
            double acc = 0;
            for (int j = 0; j <= i && j < S; j++) acc += p[j] / sum * attn_h2f<1>(v[j * D + e]);
            err = fmax(err, fabs(acc - attn_h2f<1>(o[i * D + e])));
            mx = fmax(mx, fabs(acc));
        }
    }
    bool ok = err < 2.5e-2 * mx && lerr < 1e-4;
    printf("forward (attn_flash2, causal L=70 S=130 D=64): max err %.3g of max %.3g, lse max err "
           "%.3g %s\n",
           err, mx, lerr, ok ? "ok" : "FAIL");
    return !ok;
}

// ---- the backward against an f64 reference
// -----------------------------------------------------------------------------
static double urand()
{
    return rand() / (RAND_MAX + 1.0);
}
template <int BF, int D, int MK>
static int run(int B, int L, int S, bool causal, double scale, unsigned grid)
{
    std::vector<unsigned short> q(B * L * D), k(B * S * D), v(B * S * D), o(B * L * D),
        g(B * L * D);
    std::vector<unsigned char> mb(L * S);
    std::vector<unsigned short> ma(L * S);
    auto fill = [](std::vector<unsigned short> &x) {
        for (auto &e : x) e = f2h<BF>((float)(2 * urand() - 1));
    };
    fill(q), fill(k), fill(v), fill(g);
    for (int i = 0; i < L * S; i++)
        mb[i] = urand() < 0.7 && i / S != 3, ma[i] = f2h<BF>((float)(-3 * urand()));
    if (MK == 2)
        for (int j = 0; j < S; j++) ma[5 * S + j] = f2h<BF>(-INFINITY);
    auto kept = [&](int i, int j) { return !(causal && j > i) && (MK != 1 || mb[i * S + j]); };
    // reference (double): forward output o (rounded), then the gradients
    std::vector<double> dq(B * L * D), dk(B * S * D, 0), dv(B * S * D, 0), P(S);
    std::vector<float> lse_ref(B * L); // what the forward hands the backward
    for (int b = 0; b < B; b++)
        for (int i = 0; i < L; i++) {
            double mx = -INFINITY;
            for (int j = 0; j < S; j++) {
                double s = -INFINITY;
                if (kept(i, j)) {
                    s = 0;
                    for (int e = 0; e < D; e++)
                        s += (double)attn_h2f<BF>(q[(b * L + i) * D + e]) *
                             attn_h2f<BF>(k[(b * S + j) * D + e]);
                    s *= scale;
                    if (MK == 2) s += attn_h2f<BF>(ma[i * S + j]);
                }
                P[j] = s;
                if (s > mx) mx = s;
            }
            double sum = 0;
            for (int j = 0; j < S; j++) sum += P[j] = mx == -INFINITY ? 0 : exp(P[j] - mx);
            lse_ref[b * L + i] = mx == -INFINITY ? INFINITY : (float)((mx + log(sum)) / log(2.0));
            for (int j = 0; j < S; j++) P[j] = mx == -INFINITY ? 0 : P[j] / sum;
            for (int e = 0; e < D; e++) {
                double acc = 0;
                for (int j = 0; j < S; j++) acc += P[j] * attn_h2f<BF>(v[(b * S + j) * D + e]);
                o[(b * L + i) * D + e] = f2h<BF>(mx == -INFINITY ? NAN : (float)acc);
            }
            double Dd = 0;
            if (mx > -INFINITY)
                for (int e = 0; e < D; e++)
                    Dd += (double)attn_h2f<BF>(g[(b * L + i) * D + e]) *
                          attn_h2f<BF>(o[(b * L + i) * D + e]);
            for (int e = 0; e < D; e++) dq[(b * L + i) * D + e] = 0;
            for (int j = 0; j < S; j++) {
                double dp = 0;
                for (int e = 0; e < D; e++)
                    dp += (double)attn_h2f<BF>(g[(b * L + i) * D + e]) *
                          attn_h2f<BF>(v[(b * S + j) * D + e]);
                double ds = P[j] * (dp - Dd);
                for (int e = 0; e < D; e++) {
                    dq[(b * L + i) * D + e] += scale * ds * attn_h2f<BF>(k[(b * S + j) * D + e]);
                    dk[(b * S + j) * D + e] += scale * ds * attn_h2f<BF>(q[(b * L + i) * D + e]);
                    dv[(b * S + j) * D + e] += P[j] * attn_h2f<BF>(g[(b * L + i) * D + e]);
                }
            }
        }
    attn_bwd_arg a;
    memset(&a, 0, sizeof a);
    a.nb = 1, a.bshape[0] = B, a.nbatch = B, a.L = L, a.S = S;
    a.qb[0] = L * D, a.kb[0] = S * D, a.vb[0] = S * D, a.ob[0] = L * D, a.gb[0] = L * D;
    a.qs = a.ks = a.vs = a.os = a.gs = D;
    a.ms[0] = S, a.ms[1] = 1;
    a.scale = (float)scale, a.scale_log2 = (float)(scale * 1.4426950408889634),
    a.inv_scale = (float)(1 / scale);
    a.causal = causal, a.mkind = MK;
    const void *mask = MK == 1   ? (const void *)mb.data()
                       : MK == 2 ? (const void *)ma.data()
                                 : nullptr;
    std::vector<unsigned short> gq(B * L * D, 0x7fc0), gk(B * S * D, 0x7fc0), gv(B * S * D, 0x7fc0);
    std::vector<float> lse(B * L), dd(B * L);
    auto launch = [&](std::function<void()> body, unsigned nth = 128) {
        gridDim = {grid, 1, 1};
        for (unsigned bx = 0; bx < grid; bx++) {
            std::barrier<> bb(nth), w0(32), w1(32), w2(32), w3(32), w4(32), w5(32), w6(32), w7(32);
            blockbar = &bb, warpbar[0] = &w0, warpbar[1] = &w1, warpbar[2] = &w2, warpbar[3] = &w3;
            warpbar[4] = &w4, warpbar[5] = &w5, warpbar[6] = &w6, warpbar[7] = &w7;
            std::vector<std::thread> th;
            for (unsigned t = 0; t < nth; t++)
                th.emplace_back([&, t, bx] {
                    threadIdx = {t, 0, 0};
                    blockIdx = {bx, 0, 0};
                    body();
                });
            for (auto &x : th) x.join();
        }
    };
    launch([&] {
        attn_bwd_dq<BF, D, MK>(q.data(), k.data(), v.data(), o.data(), g.data(), mask, gq.data(),
                               lse.data(), dd.data(), nullptr, a);
    });
    launch(
        [&] {
            attn_bwd_dkdv2<BF, D, MK>(q.data(), k.data(), v.data(), g.data(), mask, lse.data(),
                                      dd.data(), gk.data(), gv.data(), a);
        },
        256);
    int fails = 0;
    auto cmp = [&](const char *nm, std::vector<unsigned short> &got, std::vector<double> &want) {
        double mx = 0, err = 0;
        int bad = 0;
        for (size_t i = 0; i < want.size(); i++) {
            double x = attn_h2f<BF>(got[i]);
            if (!std::isfinite(x)) {
                bad++;
                continue;
            }
            mx = fmax(mx, fabs(want[i]));
            err = fmax(err, fabs(x - want[i]));
        }
        bool ok = !bad && err <= (BF ? 2.5e-2 : 4e-3) * fmax(mx, 1e-3);
        printf("  %s: max err %.3g of max %.3g, %d non-finite %s\n", nm, err, mx, bad,
               ok ? "ok" : "FAIL");
        fails += !ok;
    };
    printf("BF%d D%d MK%d B%d L%d S%d causal%d grid%u\n", BF, D, MK, B, L, S, causal, grid);
    cmp("dq", gq, dq), cmp("dk", gk, dk), cmp("dv", gv, dv);
    // with the forward's lse (the reference's, rounded to f32): the dq kernel without its first
    // pass, the dq2 kernel, and the dk/dv kernel reading that lse
    std::vector<float> dd2(B * L, NAN);
    std::fill(gq.begin(), gq.end(), 0x7fc0);
    launch([&] {
        attn_bwd_dq<BF, D, MK>(q.data(), k.data(), v.data(), o.data(), g.data(), mask, gq.data(),
                               nullptr, dd2.data(), lse_ref.data(), a);
    });
    cmp("dq (forward's lse)", gq, dq);
    std::fill(gq.begin(), gq.end(), 0x7fc0);
    std::fill(dd2.begin(), dd2.end(), NAN);
    launch([&] {
        attn_bwd_dq2<BF, D, MK>(q.data(), k.data(), v.data(), o.data(), g.data(), mask, gq.data(),
                                dd2.data(), lse_ref.data(), a);
    });
    cmp("dq2 (forward's lse)", gq, dq);
    std::fill(gk.begin(), gk.end(), 0x7fc0);
    std::fill(gv.begin(), gv.end(), 0x7fc0);
    launch(
        [&] {
            attn_bwd_dkdv2<BF, D, MK>(q.data(), k.data(), v.data(), g.data(), mask, lse_ref.data(),
                                      dd2.data(), gk.data(), gv.data(), a);
        },
        256);
    cmp("dk (forward's lse)", gk, dk), cmp("dv (forward's lse)", gv, dv);
    return fails;
}
int main()
{
    int f = run_forward();
    f += run<1, 64, 0>(3, 1, 64, false, 0.125, 2);
    f += run<1, 64, 0>(1, 64, 1, true, 0.125, 1);
    f += run<1, 64, 0>(2, 70, 130, false, 0.125, 3);
    f += run<1, 64, 0>(1, 130, 70, true, 0.125, 2);
    f += run<1, 64, 1>(1, 100, 90, false, 0.2, 2);
    f += run<1, 64, 2>(1, 66, 129, true, 0.125, 2);
    f += run<0, 128, 0>(1, 65, 65, true, 0.09, 2);
    f += run<1, 128, 1>(2, 40, 150, true, 0.09, 3);
    printf("%s\n", f ? "FAILURES" : "all ok");
    return f != 0;
}
