// The exact f32 matmul kernels fed by the copy engine (em_mm_sgt_* of kernels/matmul_wgmma.cu) run
// on the CPU: one std::thread per CUDA thread of a block, blocks one after the other. The bulk
// tensor copy (a 2-D box, zero fill past the edges, the 128-byte swizzle or none), the mbarriers
// (arrivals, transaction bytes, phase parity) and __syncwarp are emulated, so the kernels' stage
// protocol, shared-memory layouts, swizzled reads, tile walk and stores are checked against f64
// sums without a GPU. Built and run by scripts/cuda-emu-sgemm.sh (C++20).
#include <condition_variable>
#include <cstring>
#include <mutex>

#include "emu_common.h"
#define __grid_constant__
#define TW_STAGES 4

// The block's shared memory: "addresses" are byte offsets into it.
alignas(1024) static unsigned char smem[4 * 32768 + 2048];
static const unsigned char *tws = smem;
static unsigned smem_u32(const void *p)
{
    return (unsigned)((const unsigned char *)p - smem);
}

// A tensor map: a 2-D operand [outer][inner] of floats, rows ld floats apart, boxes of
// box_in x box_out, swizzled or not.
struct em_tmap {
    const float *p;
    i64 inner, outer, ld;
    int box_in, box_out, swizzle;
};

struct mbarrier {
    std::mutex m;
    std::condition_variable cv;
    unsigned count = 0, pending = 0, phase = 0;
    long tx = 0;
};
static mbarrier bars[16];
static unsigned bar_base; // the address of bars[0]
static mbarrier &bar_at(unsigned addr)
{
    unsigned i = (addr - bar_base) / 8;
    if ((addr - bar_base) % 8 || i >= 16) {
        fprintf(stderr, "bad mbarrier address %u\n", addr);
        abort();
    }
    return bars[i];
}
static void complete_if_done(mbarrier &b) // caller holds b.m
{
    if (b.pending == 0 && b.tx == 0) {
        b.phase++;
        b.pending = b.count;
        b.cv.notify_all();
    }
}
static void mbar_init(unsigned bar, unsigned count)
{
    mbarrier &b = bar_at(bar);
    std::lock_guard<std::mutex> g(b.m);
    b.count = b.pending = count;
    b.phase = 0;
    b.tx = 0;
}
static void mbar_expect_tx(unsigned bar, unsigned bytes)
{
    mbarrier &b = bar_at(bar);
    std::lock_guard<std::mutex> g(b.m);
    b.tx += bytes;
    b.pending--;
    complete_if_done(b);
}
static void mbar_arrive(unsigned bar)
{
    mbarrier &b = bar_at(bar);
    std::lock_guard<std::mutex> g(b.m);
    b.pending--;
    complete_if_done(b);
}
// mbarrier.try_wait.parity: done once the phase of parity `parity` has completed, i.e. while the
// current phase's parity differs from it
static void mbar_wait(unsigned bar, unsigned parity)
{
    mbarrier &b = bar_at(bar);
    std::unique_lock<std::mutex> g(b.m);
    b.cv.wait(g, [&] { return (b.phase & 1) != parity; });
}
// the copy engine: the box at element coordinates (c0 innermost, c1), zero past the edges, rows
// of box_in floats, with the 128-byte swizzle the 16-byte chunk of bits 4-6 XORed with bits 7-9
static void tma_load_2d(unsigned dst, const em_tmap *m, int c0, int c1, unsigned bar)
{
    for (int r = 0; r < m->box_out; r++)
        for (int e = 0; e < m->box_in; e++) {
            const i64 o = c1 + r, i = c0 + e;
            const float v = o < m->outer && i < m->inner ? m->p[o * m->ld + i] : 0.f;
            unsigned off = (unsigned)(r * m->box_in + e) * 4;
            if (m->swizzle) off ^= ((off >> 7) & 7) << 4;
            memcpy(smem + dst + off, &v, 4);
        }
    mbarrier &b = bar_at(bar);
    std::lock_guard<std::mutex> g(b.m);
    b.tx -= (long)m->box_in * m->box_out * 4;
    complete_if_done(b);
}
static std::barrier<> *block_bar, *warp_bars[12];
static void __syncthreads()
{
    block_bar->arrive_and_wait();
}
static void __syncwarp()
{
    warp_bars[threadIdx.x / 32]->arrive_and_wait();
}
// as kernels/matmul_wgmma.cu's: the stage area 1024-byte aligned, full (1 arrival) and empty (8)
// mbarriers after the stages
static unsigned tw_start(unsigned stage)
{
    const unsigned base = (smem_u32(tws) + 1023u) & ~1023u;
    const unsigned full0 = base + TW_STAGES * stage, empty0 = full0 + 8 * TW_STAGES;
    if (threadIdx.x == 0) {
        bar_base = full0;
        for (int s = 0; s < TW_STAGES; s++) {
            mbar_init(full0 + 8 * s, 1);
            mbar_init(empty0 + 8 * s, 8);
        }
    }
    __syncthreads();
    return base;
}

// tw_tile, tw_produce and the sgt kernels, cut from kernels/matmul_wgmma.cu by
// scripts/cuda-emu-sgemm.sh
#include "sgt_emu_kernels.inc"

typedef void (*kern)(const em_tmap, const em_tmap, float *, int, int, int, mmep);

static void launch(kern f, unsigned blocks, const em_tmap &ma, const em_tmap &mb, float *c, int M,
                   int N, int K, const mmep &ep)
{
    gridDim = {blocks, 1, 1};
    for (unsigned x = 0; x < blocks; x++) {
        std::barrier<> bar(384);
        block_bar = &bar;
        for (int w = 0; w < 12; w++) warp_bars[w] = new std::barrier<>(32);
        std::vector<std::thread> th;
        for (unsigned t = 0; t < 384; t++)
            th.emplace_back([=, &ma, &mb, &ep] {
                threadIdx = {t, 0, 0};
                blockIdx = {x, 0, 0};
                f(ma, mb, c, M, N, K, ep);
            });
        for (auto &t : th) t.join();
        for (int w = 0; w < 12; w++) delete warp_bars[w];
    }
}

int main()
{
    struct kcase {
        kern f;
        int ak, bk; // ak: A k-contiguous; bk: B k-contiguous
        const char *name;
    } ks[] = {{em_mm_sgt_kn, 1, 0, "em_mm_sgt_kn"},
              {em_mm_sgt_kk, 1, 1, "em_mm_sgt_kk"},
              {em_mm_sgt_mn, 0, 0, "em_mm_sgt_mn"},
              {em_mm_sgt_mk, 0, 1, "em_mm_sgt_mk"}};
    // M, N, K, blocks: partial tiles, a K tail, K under one k tile, blocks walking several tiles
    const int shapes[][4] = {{200, 264, 136, 3}, {128, 128, 32, 1}, {260, 132, 36, 2},  {8, 300, 20, 3},
                             {300, 72, 100, 2},  {129, 260, 264, 4}, {140, 520, 40, 2}};
    long long wrong = 0, checks = 0;
    for (auto &sh : shapes)
        for (auto &k : ks)
            for (int epi = 0; epi < 2; epi++) {
                const int M = sh[0], N = sh[1], K = sh[2];
                const int tiles = (M + 127) / 128 * ((N + 127) / 128);
                const unsigned blocks = (unsigned)(sh[3] < tiles ? sh[3] : tiles);
                // leading dims one float4 longer than the rows: the maps' strides, not the sizes
                const i64 lda = (k.ak ? K : M) + 4, ldb = (k.bk ? K : N) + 4;
                std::vector<float> A(lda * (k.ak ? M : K)), B(ldb * (k.bk ? N : K)), C(M * N, -7.f),
                    bias(N), pre(M * N, -9.f);
                for (auto &v : A) v = (float)(rand() % 17 - 8) / 8;
                for (auto &v : B) v = (float)(rand() % 13 - 6) / 4;
                for (auto &v : bias) v = (float)(rand() % 5 - 2);
                // as run_sgt encodes them: k-contiguous 32 k x 128 rows swizzled, else 128 x 32
                const em_tmap ma = k.ak ? em_tmap{A.data(), K, M, lda, 32, 128, 1}
                                        : em_tmap{A.data(), M, K, lda, 128, 32, 0};
                const em_tmap mb = k.bk ? em_tmap{B.data(), K, N, ldb, 32, 128, 1}
                                        : em_tmap{B.data(), N, K, ldb, 128, 32, 0};
                mmep ep{};
                if (epi) ep = {bias.data(), pre.data(), 1, 1, 1};
                launch(k.f, blocks, ma, mb, C.data(), M, N, K, ep);
                int bad = 0;
                for (i64 i = 0; i < M; i++)
                    for (i64 j = 0; j < N; j++) {
                        double r = 0;
                        for (i64 q = 0; q < K; q++)
                            r += (double)A[k.ak ? i * lda + q : q * lda + i] *
                                 B[k.bk ? j * ldb + q : q * ldb + j];
                        const i64 o = i * N + j;
                        bad += emu_check(r, epi, bias[j], pre[o], C[o], checks);
                    }
                if (bad)
                    printf("FAIL %s %dx%dx%d epilogue %d: %d wrong\n", k.name, M, N, K, epi, bad);
                wrong += bad;
            }
    printf("copy-engine kernels: %lld passed, %lld failed\n", checks - wrong, wrong);
    return wrong != 0;
}
