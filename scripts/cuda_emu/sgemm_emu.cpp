// The exact f32 matmul kernels of kernels/matmul_sgemm.cu (em_mm_sgemm for any strides, the 16-byte
// em_mm_sgemm_v4_* on 128 x 128 and 64 x 64 tiles) run on the CPU: one std::thread per CUDA
// thread of a block, blocks one after the other, __syncthreads through a barrier. Checks the
// kernels' index arithmetic, edges, batches and the matmul_bias_act epilogue against f64 sums
// without a GPU. Built and run by scripts/cuda-emu-sgemm.sh (C++20, seconds).
#include "emu_common.h"
#define __shared__ static
static std::barrier<> *blockbar;
static void __syncthreads()
{
    blockbar->arrive_and_wait();
}
#include "../../src/backend/cuda/kernels/matmul_sgemm.cu"

typedef void (*kern)(const float *, const float *, float *, mmidx);

static void launch(kern f, unsigned gx, unsigned gy, unsigned gz, unsigned nt, const float *a,
                   const float *b, float *c, const mmidx &s)
{
    gridDim = {gx, gy, gz};
    for (unsigned z = 0; z < gz; z++)
        for (unsigned y = 0; y < gy; y++)
            for (unsigned x = 0; x < gx; x++) {
                std::barrier<> bar(nt);
                blockbar = &bar;
                std::vector<std::thread> th;
                for (unsigned t = 0; t < nt; t++)
                    th.emplace_back([=, &s] {
                        threadIdx = {t, 0, 0};
                        blockIdx = {x, y, z};
                        f(a, b, c, s);
                    });
                for (auto &t : th) t.join();
            }
}

int main()
{
    struct kcase {
        kern f;
        int tile, threads, ak, bk; // ak: A k-contiguous; bk: B k-contiguous
        const char *name;
    } ks[] = {
        {em_mm_sgemm, 128, 256, 1, 0, "em_mm_sgemm (A [M][K])"},
        {em_mm_sgemm, 128, 256, 0, 1, "em_mm_sgemm (A [K][M], B [N][K])"},
        {em_mm_sgemm_v4_kn, 128, 256, 1, 0, "em_mm_sgemm_v4_kn"},
        {em_mm_sgemm_v4_kk, 128, 256, 1, 1, "em_mm_sgemm_v4_kk"},
        {em_mm_sgemm_v4_mn, 128, 256, 0, 0, "em_mm_sgemm_v4_mn"},
        {em_mm_sgemm_v4_mk, 128, 256, 0, 1, "em_mm_sgemm_v4_mk"},
        {em_mm_sgemm_v4_kn_t64, 64, 64, 1, 0, "em_mm_sgemm_v4_kn_t64"},
        {em_mm_sgemm_v4_kk_t64, 64, 64, 1, 1, "em_mm_sgemm_v4_kk_t64"},
        {em_mm_sgemm_v4_mn_t64, 64, 64, 0, 0, "em_mm_sgemm_v4_mn_t64"},
        {em_mm_sgemm_v4_mk_t64, 64, 64, 0, 1, "em_mm_sgemm_v4_mk_t64"},
    };
    // M, N, K: partial tiles, one k tile, K shorter than a tile, several of each
    const int shapes[][3] = {{200, 264, 136},
                             {128, 128, 16},
                             {260, 132, 36},
                             {8, 300, 20},
                             {600, 72, 20}}; // the last: 10 row tiles of 64, two groups of rows
    long long wrong = 0, checks = 0;
    for (auto &sh : shapes)
        for (auto &k : ks)
            for (int epi = 0; epi < 2; epi++) {
                const i64 M = sh[0], N = sh[1], K = sh[2], nb = 2;
                // the any-stride kernel gets padded leading dims (rows not 16-byte multiples)
                const i64 pad = k.f == em_mm_sgemm ? 1 : 0;
                const i64 lda = (k.ak ? K : M) + pad, ldb = (k.bk ? K : N) + pad;
                const i64 asz = lda * (k.ak ? M : K), bsz = ldb * (k.bk ? N : K);
                std::vector<float> A(nb * asz), B(nb * bsz), C(nb * M * N, -7.f), bias(N),
                    pre(nb * M * N, -9.f);
                for (auto &v : A) v = (float)(rand() % 17 - 8) / 8;
                for (auto &v : B) v = (float)(rand() % 13 - 6) / 4;
                for (auto &v : bias) v = (float)(rand() % 5 - 2);
                mmidx s{};
                s.R = 1, s.bshape[0] = nb, s.ast[0] = asz, s.bst[0] = bsz;
                s.M = M, s.N = N, s.K = K, s.nbatch = nb;
                s.sam = k.ak ? lda : 1, s.sak = k.ak ? 1 : lda;
                s.sbk = k.bk ? 1 : ldb, s.sbn = k.bk ? ldb : 1;
                if (epi) s.ep = {bias.data(), pre.data(), 1, 1, 1};
                launch(k.f, (unsigned)((N + k.tile - 1) / k.tile),
                       (unsigned)((M + k.tile - 1) / k.tile), (unsigned)nb, (unsigned)k.threads,
                       A.data(), B.data(), C.data(), s);
                int bad = 0;
                for (i64 bt = 0; bt < nb; bt++)
                    for (i64 i = 0; i < M; i++)
                        for (i64 j = 0; j < N; j++) {
                            double r = 0;
                            for (i64 q = 0; q < K; q++)
                                r += (double)A[bt * asz + i * s.sam + q * s.sak] *
                                     B[bt * bsz + q * s.sbk + j * s.sbn];
                            const i64 o = (bt * M + i) * N + j;
                            bad += emu_check(r, epi, bias[j], pre[o], C[o], checks);
                        }
                if (bad)
                    printf("FAIL %s %lldx%lldx%lld epilogue %d: %d wrong\n", k.name, M, N, K, epi,
                           bad);
                wrong += bad;
            }
    printf("%lld passed, %lld failed\n", checks - wrong, wrong);
    return wrong != 0;
}
