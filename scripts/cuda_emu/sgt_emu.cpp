// The exact f32 matmul and convolution kernels fed by the copy engine (em_mm_sgt_* and
// em_conv_sgt_f32_i2c of kernels/matmul_sgt.cu) run on the CPU: one std::thread per CUDA thread of a
// block, blocks one after the other. The bulk tensor copy (2-D and 4-D boxes, zero fill off the
// operand on either side, the 128-byte swizzle or none), the mbarriers
// (arrivals, transaction bytes, phase parity) and __syncwarp are emulated, so the kernels' stage
// protocol, shared-memory layouts, swizzled reads, tile walk and stores are checked against f64
// sums without a GPU. Built and run by scripts/cuda-emu-sgemm.sh (C++20).
#include <condition_variable>
#include <cstring>
#include <mutex>

#include "emu_common.h"
#define __grid_constant__
// kernels/matmul_sgt.cu's sm_90a part, with the PTX of the headers below emulated here
#define __CUDA_ARCH_FEAT_SM90_ALL
#define EMBER_CUDA_MATMUL_MMA_CUH
#define EMBER_CUDA_MATMUL_TMA_CUH

// The block's shared memory: "addresses" are byte offsets into it.
alignas(1024) static unsigned char smem[4 * 32768 + 2048];
static unsigned char *tw_dyn_smem()
{
    return smem;
}
static unsigned smem_u32(const void *p)
{
    return (unsigned)((const unsigned char *)p - smem);
}

// A tensor map: an operand of rank 2 or 4 (dims[0] innermost, contiguous; st[d] the element
// stride of dim d), read in boxes of box[0] x ... elements, with the 128-byte swizzle or none.
struct em_tmap {
    const float *p;
    int rank;
    i64 dims[4], st[4];
    int box[4], swizzle;
    // im2col mode (rank 4, [N][H][W][C]): the bounding box's corners {w, h}, box[0] channels a
    // pixel, box[1] pixels a load
    int im2col, lower[2], upper[2];
};
// A 2-D map [outer][inner], rows ld floats apart, as run_sgt encodes one.
static em_tmap map2(const float *p, i64 inner, i64 outer, i64 ld, int box_in, int box_out, int sw)
{
    return {p, 2, {inner, outer, 1, 1}, {1, ld, 0, 0}, {box_in, box_out, 1, 1}, sw};
}

struct mbarrier {
    std::mutex m;
    std::condition_variable cv;
    unsigned count = 0, pending = 0, phase = 0;
    long tx = 0;
};
// the block's mbarriers in the order mbar_init met them, at the addresses bar_addr
static mbarrier bars[16];
static unsigned bar_addr[16];
static int nbars;
static mbarrier &bar_at(unsigned addr)
{
    for (int i = 0; i < nbars; i++)
        if (bar_addr[i] == addr) return bars[i];
    fprintf(stderr, "no mbarrier at address %u\n", addr);
    abort();
}
static void complete_if_done(mbarrier &b) // caller holds b.m
{
    if (b.pending == 0 && b.tx == 0) {
        b.phase++;
        b.pending = b.count;
        b.cv.notify_all();
    }
}
// one thread initialises a block's mbarriers before a block barrier (tw_init)
static void mbar_init(unsigned bar, unsigned count)
{
    int i = 0;
    while (i < nbars && bar_addr[i] != bar) i++;
    if (i == nbars) {
        if (nbars == 16) {
            fprintf(stderr, "more than 16 mbarriers\n");
            abort();
        }
        bar_addr[nbars++] = bar;
    }
    mbarrier &b = bars[i];
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
// the copy engine: the box at element coordinates c (c[0] innermost; negative ones allowed), zero
// off the operand, stored densely with the box's dim 0 fastest; with the 128-byte swizzle the
// 16-byte chunk of bits 4-6 XORed with bits 7-9
static void tma_load(unsigned dst, const em_tmap *m, const int (&c)[4], unsigned bar)
{
    const int *b = m->box;
    long n = 0;
    for (int i3 = 0; i3 < b[3]; i3++)
        for (int i2 = 0; i2 < b[2]; i2++)
            for (int i1 = 0; i1 < b[1]; i1++)
                for (int i0 = 0; i0 < b[0]; i0++, n++) {
                    const i64 x[4] = {(i64)c[0] + i0, (i64)c[1] + i1, (i64)c[2] + i2,
                                      (i64)c[3] + i3};
                    bool in = true;
                    i64 o = 0;
                    for (int d = 0; d < m->rank; d++) {
                        in = in && x[d] >= 0 && x[d] < m->dims[d];
                        o += x[d] * m->st[d];
                    }
                    const float v = in ? m->p[o] : 0.f;
                    unsigned off = (unsigned)n * 4;
                    if (m->swizzle) off ^= ((off >> 7) & 7) << 4;
                    memcpy(smem + dst + off, &v, 4);
                }
    mbarrier &mb = bar_at(bar);
    std::lock_guard<std::mutex> g(mb.m);
    mb.tx -= n * 4;
    complete_if_done(mb);
}
// im2col mode as the copy engine documents it: box[1] pixels from the start (w, h, n), walking the
// bounding box [lower, dim - 1 + upper] along w, then h, then n, each read at (w + ow, h + oh)
// (box[0] channels from c; zero off the tensor or past the last image)
static void tma_load_im2col(unsigned dst, const em_tmap *m, int c, int w, int h, int n,
                            unsigned short ow, unsigned short oh, unsigned bar)
{
    const i64 bw = m->dims[1] + m->upper[0] - m->lower[0],
              bh = m->dims[2] + m->upper[1] - m->lower[1];
    const i64 first = ((i64)n * bh + (h - m->lower[1])) * bw + (w - m->lower[0]);
    long bytes = 0;
    for (int i = 0; i < m->box[1]; i++) {
        const i64 q = first + i, pn = q / (bw * bh), r = q - pn * bw * bh;
        const i64 ih = r / bw + m->lower[1] + oh, iw = r % bw + m->lower[0] + ow;
        for (int e = 0; e < m->box[0]; e++, bytes += 4) {
            const i64 ch = c + e;
            const bool in = pn < m->dims[3] && ih >= 0 && ih < m->dims[2] && iw >= 0 &&
                            iw < m->dims[1] && ch < m->dims[0];
            const float v = in ? m->p[pn * m->st[3] + ih * m->st[2] + iw * m->st[1] + ch] : 0.f;
            unsigned off = (unsigned)bytes;
            if (m->swizzle) off ^= ((off >> 7) & 7) << 4;
            memcpy(smem + dst + off, &v, 4);
        }
    }
    mbarrier &mb = bar_at(bar);
    std::lock_guard<std::mutex> g(mb.m);
    mb.tx -= bytes;
    complete_if_done(mb);
}
static void tma_load_2d(unsigned dst, const em_tmap *m, int c0, int c1, unsigned bar)
{
    tma_load(dst, m, {c0, c1, 0, 0}, bar);
}
static void tma_load_4d(unsigned dst, const em_tmap *m, int c0, int c1, int c2, int c3,
                        unsigned bar)
{
    tma_load(dst, m, {c0, c1, c2, c3}, bar);
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
static void mbar_fence_init()
{
}
static void tw_regs_producer()
{
}
static void tw_regs_consumer()
{
}

static dim3e blockDim = {384, 1, 1}; // launch's blocks

// the sgt kernels, with kernels/matmul_tw.cuh's tile walk, stages and producer loop
#include "../../src/backend/cuda/kernels/matmul_sgt.cu"

typedef void (*kern)(const em_tmap, const em_tmap, float *, int, int, int, mmep);

// Runs body() as each of 384 threads of blocks blocks, one block after the other.
template <typename Body> static void launch(unsigned blocks, Body body)
{
    gridDim = {blocks, 1, 1};
    for (unsigned x = 0; x < blocks; x++) {
        std::barrier<> bar(384);
        block_bar = &bar;
        for (int w = 0; w < 12; w++) warp_bars[w] = new std::barrier<>(32);
        std::vector<std::thread> th;
        for (unsigned t = 0; t < 384; t++)
            th.emplace_back([=, &body] {
                threadIdx = {t, 0, 0};
                blockIdx = {x, 0, 0};
                body();
            });
        for (auto &t : th) t.join();
        for (int w = 0; w < 12; w++) delete warp_bars[w];
    }
}

// em_conv_sgt_f32_i2c against f64 sums: x channels-last [N][H][W][C], w [Cout][KH][KW][C], the
// geometry as conv_sgt (cuda_conv.c) sets it, tw_conv_tiles' column tiles of 128 included; with
// splits > 1, each tile's k tiles in that many ranges, then em_conv_splitk_f32's sums.
static void check_conv(bool i2c, int splits, int N, int C, int H, int W, int Cout, int KH, int KW,
                       int ph, int pw, int phi, int pwi, int dh, int dw, unsigned blocks,
                       long long &checks, long long &wrong)
{
    const int OH = H + ph + phi - dh * (KH - 1), OW = W + pw + pwi - dw * (KW - 1);
    twconv g{Cout, OH, OW, KW, ph, pw, dh, dw};
    const int tw = (OW + 127) / 128, bw = (OW + tw - 1) / tw;
    const int most = 128 / bw < OH ? 128 / bw : OH, th = (OH + most - 1) / most;
    g.BW = bw, g.tw = tw, g.th = th, g.BH = (OH + th - 1) / th, g.ntiles = N * th * tw;
    g.cpt = C / 32, g.kts = KH * KW * C / 32, g.npix = N * OH * OW;
    if (i2c) g.ntiles = (g.npix + 127) / 128;
    g.splits = splits;
    std::vector<float> x((size_t)N * H * W * C), w((size_t)Cout * KH * KW * C), bias(Cout),
        y((size_t)N * Cout * OH * OW, -7.f), ws((size_t)(splits - 1) * N * Cout * OH * OW, -5.f);
    for (auto &v : x) v = (float)(rand() % 17 - 8) / 8;
    for (auto &v : w) v = (float)(rand() % 13 - 6) / 4;
    for (auto &v : bias) v = (float)(rand() % 5 - 2);
    const i64 K = (i64)KH * KW * C;
    const em_tmap ma = map2(w.data(), K, Cout, K, 32, 128, 1);
    em_tmap mb = {
        x.data(), 4, {C, W, H, N}, {1, C, (i64)W * C, (i64)H * W * C}, {32, g.BW, g.BH, 1}, 1};
    if (i2c) // as conv_sgt encodes it
        mb.im2col = 1, mb.box[1] = 128, mb.box[2] = 1, mb.lower[0] = -pw, mb.lower[1] = -ph,
        mb.upper[0] = pwi - dw * (KW - 1), mb.upper[1] = phi - dh * (KH - 1);
    const float *bp = bias.data();
    const unsigned units = (unsigned)((Cout + 127) / 128 * g.ntiles * splits);
    launch(blocks < units ? blocks : units, [&] {
        em_conv_sgt_f32_i2c(ma, mb, y.data(), ws.data(), bp, g);
    });
    if (splits > 1) launch(2, [&] { em_conv_splitk_f32(y.data(), ws.data(), bp, g); });
    int bad = 0;
    for (int n = 0; n < N; n++)
        for (int m = 0; m < Cout; m++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    double r = bias[m];
                    for (int kh = 0; kh < KH; kh++)
                        for (int kw = 0; kw < KW; kw++) {
                            const int ih = oh - ph + kh * dh, iw = ow - pw + kw * dw;
                            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                            for (int c = 0; c < C; c++)
                                r += (double)w[((i64)(m * KH + kh) * KW + kw) * C + c] *
                                     x[(((i64)n * H + ih) * W + iw) * C + c];
                        }
                    const float v = y[(((i64)n * Cout + m) * OH + oh) * OW + ow];
                    bad += std::fabs(r - v) > 1e-3;
                    checks++;
                }
    if (bad)
        printf("FAIL em_conv_sgt_f32%s N%d C%d %dx%d -> %d, %dx%d pad %d,%d/%d,%d dil %d,%d, %d "
               "k ranges: %d wrong\n",
               i2c ? "_i2c" : "", N, C, H, W, Cout, KH, KW, ph, pw, phi, pwi, dh, dw, splits, bad);
    wrong += bad;
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
    const int shapes[][4] = {{200, 264, 136, 3}, {128, 128, 32, 1}, {260, 132, 36, 2},
                             {8, 300, 20, 3},    {300, 72, 100, 2}, {129, 260, 264, 4},
                             {140, 520, 40, 2}};
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
                const em_tmap ma = k.ak ? map2(A.data(), K, M, lda, 32, 128, 1)
                                        : map2(A.data(), M, K, lda, 128, 32, 0);
                const em_tmap mb = k.bk ? map2(B.data(), K, N, ldb, 32, 128, 1)
                                        : map2(B.data(), N, K, ldb, 128, 32, 0);
                mmep ep{};
                if (epi) ep = {bias.data(), pre.data(), 1, 1, 1};
                launch(blocks, [&] { k.f(ma, mb, C.data(), M, N, K, ep); });
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
    // N, C, H, W, Cout, KH, KW, pad lo h/w, pad hi h/w, dilation h/w, blocks: 14 x 14 in two
    // column tiles of 7 rows with Cout's tile partial; two Cout tiles and a last column tile of
    // fewer rows; 5 x 5 taps on a 5 x 5 image; OW over 128 (two boxes per row), dilation 2 and
    // uneven padding; a 1 x 1 kernel; padding only before
    const int convs[][14] = {{2, 32, 14, 14, 40, 3, 3, 1, 1, 1, 1, 1, 1, 3},
                             {1, 64, 9, 20, 130, 3, 3, 1, 1, 1, 1, 1, 1, 3},
                             {3, 32, 5, 5, 16, 5, 5, 2, 2, 2, 2, 1, 1, 2},
                             {1, 32, 7, 150, 24, 3, 1, 2, 0, 2, 0, 2, 1, 2},
                             {2, 96, 12, 12, 64, 1, 1, 0, 0, 0, 0, 1, 1, 2},
                             {1, 32, 11, 11, 20, 3, 3, 1, 1, 0, 0, 1, 1, 1}};
    // each also split-K: 3 k ranges (of 3 k tiles each for 3 x 3 taps of 32 channels, 8, 8 and 9
    // for 5 x 5, one each for the 1 x 1 kernel's 3), and 2 for the first
    for (auto &c : convs)
        for (int splits = 1; splits <= 3; splits++)
            if (splits != 2 || &c == convs)
                check_conv(true, splits, c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8],
                           c[9], c[10], c[11], c[12], (unsigned)c[13], checks, wrong);
    printf("copy-engine kernels: %lld passed, %lld failed\n", checks - wrong, wrong);
    return wrong != 0;
}
