/* Cache-blocked GEMM in the GotoBLAS/BLIS layout: panels of B (KC x NC) and A (MC x KC) are
 * packed into aligned buffers, then a register-blocked micro-kernel (portable C here, AVX2 or
 * AVX-512 in their own files, chosen once at run time) sweeps the tiles of C. */
#include <ember/core.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core_impl.h"
#include "cpu_fast.h"
#include "cpu_gemm.h"

/* ---- portable micro-kernels -------------------------------------------------------------- */

#define PMR 4
#define PNR 8

#define PORTABLE_UKR(name, T)                                                                      \
    static void name(int64_t kc, const T *a, const T *b, T *c, int64_t ldc, T alpha, T beta,       \
                     int mr, int nr)                                                               \
    {                                                                                              \
        T acc[PMR][PNR];                                                                           \
        memset(acc, 0, sizeof acc);                                                                \
        for (int64_t k = 0; k < kc; k++, a += PMR, b += PNR)                                       \
            for (int r = 0; r < PMR; r++)                                                          \
                for (int j = 0; j < PNR; j++) acc[r][j] += a[r] * b[j];                            \
        for (int r = 0; r < mr; r++) {                                                             \
            T *cr = c + r * ldc;                                                                   \
            for (int j = 0; j < nr; j++) {                                                         \
                T t = alpha * acc[r][j];                                                           \
                cr[j] = beta == 0 ? t : t + beta * cr[j];                                          \
            }                                                                                      \
        }                                                                                          \
    }

PORTABLE_UKR(sgemm_ukr_portable, float)
PORTABLE_UKR(dgemm_ukr_portable, double)

/* GEMV (cpu_gemm.h): dot with eight independent accumulators (k in steps of 8, fixed tree,
 * then the tail); axpy updates y once per k, k ascending. */
#define PORTABLE_GEMV(dot, axpy, T)                                                                \
    static void dot(int64_t n, int64_t K, const T *A, int64_t lda, const T *x, T *y)               \
    {                                                                                              \
        for (int64_t r = 0; r < n; r++, A += lda) {                                                \
            T s[8] = {0};                                                                          \
            int64_t k = 0;                                                                         \
            for (; k + 8 <= K; k += 8)                                                             \
                for (int u = 0; u < 8; u++) s[u] += A[k + u] * x[k + u];                           \
            T t = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));               \
            for (; k < K; k++) t += A[k] * x[k];                                                   \
            y[r] = t;                                                                              \
        }                                                                                          \
    }                                                                                              \
    static void axpy(int64_t n, int64_t K, const T *A, int64_t lda, const T *x, T *y)              \
    {                                                                                              \
        for (int64_t j = 0; j < n; j++) y[j] = 0;                                                  \
        for (int64_t k = 0; k < K; k++) {                                                          \
            const T *a = A + k * lda;                                                              \
            T xk = x[k];                                                                           \
            for (int64_t j = 0; j < n; j++) y[j] += xk * a[j];                                     \
        }                                                                                          \
    }

PORTABLE_GEMV(sdot_portable, saxpy_portable, float)
PORTABLE_GEMV(ddot_portable, daxpy_portable, double)

static const cpu_gemm_kernels kernels_portable = {
    .name = "portable",
    .s_ukr = sgemm_ukr_portable,
    .s_mr = PMR,
    .s_nr = PNR,
    .s_mc = 128,
    .s_kc = 256,
    .s_nc = 2048,
    .d_ukr = dgemm_ukr_portable,
    .d_mr = PMR,
    .d_nr = PNR,
    .d_mc = 64,
    .d_kc = 256,
    .d_nc = 2048,
    .s_dot = sdot_portable,
    .s_axpy = saxpy_portable,
    .d_dot = ddot_portable,
    .d_axpy = daxpy_portable,
};

/* ---- kernel selection -------------------------------------------------------------------- */

static const cpu_gemm_kernels *auto_kernels = &kernels_portable;
static pthread_once_t choose_once = PTHREAD_ONCE_INIT;
static _Atomic(const cpu_gemm_kernels *) forced;

#if CPU_X86
static bool has_avx2, has_avx512;

/* The AVX-512 set with its f32 blocking fitted to the L2 cache: with 2 MiB or more per core
 * (Intel's server cores), KC 1024 and the A block (MC x KC) in about half of it, which halves
 * the passes over C against KC 512; smaller L2s (1 MiB on the Zen 4 these were first tuned on)
 * keep 480 / 512, with NC 4096 (one column block at N = 4096 instead of 3072 + 1024, so no
 * narrow second block). The numbers behind both are in bench/RESULTS.md, evidence section. */
static cpu_gemm_kernels avx512_fitted;

static void fit_avx512(void)
{
    avx512_fitted = cpu_gemm_kernels_avx512;
#ifdef _SC_LEVEL2_CACHE_SIZE
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (l2 >= 2L << 20) {
        int64_t kc = 1024, mc = l2 / 2 / (kc * (int64_t)sizeof(float));
        mc -= mc % avx512_fitted.s_mr;
        avx512_fitted.s_kc = kc;
        avx512_fitted.s_mc = mc < 480 ? mc : 480;
        avx512_fitted.s_nc = 3072; /* the 12 MiB B block this blocking was tuned with */
    }
#endif
}
#endif

/* Config gemm = portable keeps the C kernels; on x86, gemm = avx2 passes over AVX-512. */
static void choose_kernels(void)
{
    const char *want = core_cfg_str(CFG_GEMM);
#if CPU_X86
    fit_avx512();
    __builtin_cpu_init();
    has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    has_avx512 = has_avx2 && __builtin_cpu_supports("avx512f") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512dq");
    if (want && !strcmp(want, "portable")) return;
    if (has_avx512 && !(want && !strcmp(want, "avx2")))
        auto_kernels = &avx512_fitted;
    else if (has_avx2)
        auto_kernels = &cpu_gemm_kernels_avx2;
#elif defined(__aarch64__)
    if (!(want && !strcmp(want, "portable")))
        auto_kernels = &cpu_gemm_kernels_neon; /* Advanced SIMD: part of the base architecture */
#else
    (void)want;
#endif
}

static const cpu_gemm_kernels *kernels(void)
{
    pthread_once(&choose_once, choose_kernels);
    const cpu_gemm_kernels *k = atomic_load(&forced);
    return k ? k : auto_kernels;
}

bool cpu_gemm_use(const char *name)
{
    pthread_once(&choose_once, choose_kernels);
    const cpu_gemm_kernels *k = NULL;
    if (!name)
        k = NULL;
    else if (!strcmp(name, "portable"))
        k = &kernels_portable;
#if CPU_X86
    else if (!strcmp(name, "avx2") && has_avx2)
        k = &cpu_gemm_kernels_avx2;
    else if (!strcmp(name, "avx512") && has_avx512)
        k = &avx512_fitted;
#endif
#if defined(__aarch64__)
    else if (!strcmp(name, "neon"))
        k = &cpu_gemm_kernels_neon;
#endif
    else
        return false;
    atomic_store(&forced, k);
    return true;
}

void cpu_gemm_force_portable(bool on)
{
    cpu_gemm_use(on ? "portable" : NULL);
}

const char *cpu_gemm_kernel_name(void)
{
    return kernels()->name;
}

bool cpu_gemm_x86(void)
{
    const char *k = cpu_gemm_kernel_name();
    return CPU_X86 && (!strcmp(k, "avx2") || !strcmp(k, "avx512"));
}

/* ---- shared sizes ------------------------------------------------------------------------ */

#define SMALL_MNK  32768  /* below this M*N*K: no packing */
#define PAR_MNK    262144 /* from this M*N*K: use the pool */
#define SUPER_M    4096   /* rows of A packed at once */
#define SMALL_COLS 256    /* column block of the unpacked path */
#define GEMV_ROWS  64     /* rows per task of a dot-shaped GEMV */
#define GEMV_BYTES 8192   /* output columns per task of an axpy-shaped GEMV, in bytes */

bool cpu_gemm_packed(int64_t M, int64_t N, int64_t K)
{
    return M > 1 && N > 1 && M * N * K > SMALL_MNK;
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static int64_t round_up(int64_t a, int64_t m)
{
    return (a + m - 1) / m * m;
}

/* Splits npan row panels of A into the tasks of one region (each task packs its panels and
 * sweeps the whole B block): panels [bound[t], bound[t + 1]) for t < the returned count. One
 * thread: n_ic equal tasks, one per MC block; fewer MC blocks than threads: one equal task per
 * thread (small products, where each task's overhead counts more than the balance gained).
 * Else tasks of at most one MC block while much is left, then shrinking toward TAIL_ROWS rows,
 * so that when one thread runs slower (cores of one VM need not run alike) the other waits at
 * the region's end for a small task, not for up to a whole MC block (bench/RESULTS.md, evidence
 * section). The split never changes a result. */
#define TAIL_ROWS 96
#define B_RING    2 /* B's slots when the KC blocks run in one region (all_k) */
#define PLAN_MAX  256

static int64_t plan_rows(int64_t npan, int64_t n_ic, int threads, int mr, int64_t *bound)
{
    int64_t n = 0, p = 0;
    bound[0] = 0;
    if (threads <= 1 || n_ic < threads) { /* equal tasks, a multiple of the thread count */
        int64_t nb = (n_ic + threads - 1) / threads * threads;
        for (n = 0; n < nb; n++) bound[n + 1] = (n + 1) * npan / nb;
        return nb;
    }
    int64_t big = (npan + n_ic - 1) / n_ic;
    int64_t small = (TAIL_ROWS + mr - 1) / mr, few = (npan + 2 * threads - 1) / (2 * threads);
    if (small > few) small = few; /* little work: about two tasks per thread */
    if (small < (npan + PLAN_MAX - 1) / PLAN_MAX) small = (npan + PLAN_MAX - 1) / PLAN_MAX;
    while (p < npan) {
        int64_t s = (npan - p + 2 * threads - 1) / (2 * threads);
        s = s > big ? big : s < small ? small : s;
        p = p + s < npan ? p + s : npan;
        bound[++n] = p;
    }
    return n;
}

/* Packing buffers are kept between calls (a few slots, the largest kept) so a product does not
 * pay for fresh pages each time; big ones are 2 MiB aligned and asked to be huge pages, which
 * spares the TLB when the micro-kernel walks the packed panels. */
#define POOL_SLOTS 4

typedef struct pool_buf {
    void *p;
    size_t cap;
} pool_buf;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pool_buf pool[POOL_SLOTS];

/* A buffer of at least elems * es bytes (64-byte aligned, 64 bytes of slack), or p == NULL. */
static pool_buf buf_get(int64_t elems, size_t es)
{
    size_t n = (size_t)round_up(elems * (int64_t)es + 64, 64);
    pool_buf b = {0};
    pthread_mutex_lock(&pool_lock);
    int best = -1;
    for (int i = 0; i < POOL_SLOTS; i++)
        if (pool[i].p && pool[i].cap >= n && (best < 0 || pool[i].cap < pool[best].cap)) best = i;
    if (best >= 0) {
        b = pool[best];
        pool[best] = (pool_buf){0};
    }
    pthread_mutex_unlock(&pool_lock);
    if (b.p) return b;
    b.cap = n;
    b.p = n >= EM__HUGE_PAGE ? core_alloc_huge(&b.cap) : aligned_alloc(64, n);
    if (!b.p) b.cap = 0;
    return b;
}

/* Returns a buffer to the pool; the smallest one is freed when every slot is taken. */
static void buf_put(pool_buf b)
{
    if (!b.p) return;
    pthread_mutex_lock(&pool_lock);
    int slot = 0;
    for (int i = 1; i < POOL_SLOTS; i++)
        if (!pool[i].p || (pool[slot].p && pool[i].cap < pool[slot].cap)) slot = i;
    if (!pool[slot].p || pool[slot].cap < b.cap) {
        pool_buf old = pool[slot];
        pool[slot] = b;
        b = old;
    }
    pthread_mutex_unlock(&pool_lock);
    free(b.p);
}

/* Prefetching a row a few k ahead keeps strided panel reads from waiting on each line. */
#define PREFETCH(p) __builtin_prefetch(p)

/* ---- the driver, once per element type --------------------------------------------------- */

/* Every C element is computed the same way whatever the thread split: for each KC block of K
 * in order, C = alpha * (sum over the block, k ascending, from 0) + beta' * C, with beta' the
 * caller's beta for the first block and 1 after. The unpacked path (small or vector-shaped
 * products) instead sums all of K, k ascending, then applies alpha and beta once. */
#define DEFINE_GEMM(T, P)                                                                          \
    typedef struct P##ctx {                                                                        \
        bool ta, tb;                                                                               \
        int64_t M, N, K, lda, ldb, ldc;                                                            \
        T alpha, beta;                                                                             \
        const T *A, *B;                                                                            \
        T *C;                                                                                      \
        int mr, nr;                                                                                \
        int64_t mc;                                                                                \
        void (*ukr)(int64_t, const T *, const T *, T *, int64_t, T, T, int, int);                  \
        void (*pack)(int64_t, const T *, int64_t, T *);    /* full row-major A panels, or NULL */  \
        void (*pack_bt)(int64_t, const T *, int64_t, T *); /* full transposed B panels, or NULL */ \
        /* current block */                                                                        \
        int64_t jc, nc, pc, kc, ms, mlen, nj, jchunk, npan, nblk;                                  \
        const int64_t *bound; /* nblk > 0: task t's row panels [bound[t], bound[t + 1]) */         \
        bool bshare;          /* the macro tasks pack B themselves (share_b) */                    \
        int64_t npan_b, bgrain;                                                                    \
        int64_t ntask, task_elems; /* long_k: tasks and buffer floats per task */                  \
        int64_t kblk, bslot;       /* all_k: KC, elements per B ring slot */                       \
        _Atomic int64_t *kb;       /* all_k: per KC block next, done, finished; per task rows */   \
        _Atomic int64_t *bnext, *bdone;                                                            \
        T beta_blk;                                                                                \
        T *Ap, *Bp;                                                                                \
        const cpu_gemm_epi *epi;         /* run on each finished block, or NULL */                 \
        const cpu_gemm_src *asrc, *bsrc; /* operands packed by a callback, or NULL */              \
    } P##ctx;                                                                                      \
                                                                                                   \
    /* The epilogue on rows [i0, i0 + rows) x cols [j0, j0 + cols) of C. */                        \
    static void P##epi_block(const P##ctx *g, int64_t i0, int64_t j0, int64_t rows, int64_t cols)  \
    {                                                                                              \
        if (g->epi && rows > 0 && cols > 0)                                                        \
            g->epi->fn(g->epi->ctx, g->C + i0 * g->ldc + j0, g->ldc, i0, j0, rows, cols);          \
    }                                                                                              \
                                                                                                   \
    /* Full panels: dst[k * w + c] = s[k * ld + c] (copy_rows) or s[c * ld + k] (gather_cols).     \
     * The switch hands the loops a constant width so they unroll and vectorise. */                \
    static inline void P##copy_rows_w(T *restrict dst, const T *restrict s, int64_t ld,            \
                                      int64_t kc, int w)                                           \
    {                                                                                              \
        for (int64_t k = 0; k < kc; k++, dst += w, s += ld) {                                      \
            PREFETCH(s + 8 * ld);                                                                  \
            for (int c = 0; c < w; c++) dst[c] = s[c];                                             \
        }                                                                                          \
    }                                                                                              \
    static void P##copy_rows(T *dst, const T *s, int64_t ld, int64_t kc, int w)                    \
    {                                                                                              \
        switch (w) {                                                                               \
        case 6: P##copy_rows_w(dst, s, ld, kc, 6); break;                                          \
        case 8: P##copy_rows_w(dst, s, ld, kc, 8); break;                                          \
        case 12: P##copy_rows_w(dst, s, ld, kc, 12); break;                                        \
        case 16: P##copy_rows_w(dst, s, ld, kc, 16); break;                                        \
        case 32: P##copy_rows_w(dst, s, ld, kc, 32); break;                                        \
        default: P##copy_rows_w(dst, s, ld, kc, w); break;                                         \
        }                                                                                          \
    }                                                                                              \
    static inline void P##gather_cols_w(T *restrict dst, const T *restrict s, int64_t ld,          \
                                        int64_t kc, int w)                                         \
    {                                                                                              \
        for (int64_t k = 0; k < kc; k++, dst += w)                                                 \
            for (int c = 0; c < w; c++) dst[c] = s[c * ld + k];                                    \
    }                                                                                              \
    static void P##gather_cols(T *dst, const T *s, int64_t ld, int64_t kc, int w)                  \
    {                                                                                              \
        switch (w) {                                                                               \
        case 4: P##gather_cols_w(dst, s, ld, kc, 4); break;                                        \
        case 6: P##gather_cols_w(dst, s, ld, kc, 6); break;                                        \
        case 8: P##gather_cols_w(dst, s, ld, kc, 8); break;                                        \
        case 12: P##gather_cols_w(dst, s, ld, kc, 12); break;                                      \
        case 16: P##gather_cols_w(dst, s, ld, kc, 16); break;                                      \
        default: P##gather_cols_w(dst, s, ld, kc, w); break;                                       \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    /* npan full panels side by side: row k of B is read once, left to right, and split into       \
     * the panels (dst + p * w * kc), so the reads stream instead of striding per panel. Each      \
     * piece is a memcpy of w elements: with w constant it compiles to vector moves, where the     \
     * element loop became a call to memmove per piece (64 bytes for f32 at w = 16). */            \
    static inline void P##copy_panels_w(T *restrict dst, const T *restrict s, int64_t ld,          \
                                        int64_t kc, int w, int64_t npan)                           \
    {                                                                                              \
        for (int64_t k = 0; k < kc; k++, s += ld)                                                  \
            for (int64_t p = 0; p < npan; p++)                                                     \
                memcpy(dst + p * w * kc + k * w, s + p * w, sizeof(T) * (size_t)w);                \
    }                                                                                              \
    static void P##copy_panels(T *dst, const T *s, int64_t ld, int64_t kc, int w, int64_t npan)    \
    {                                                                                              \
        switch (w) {                                                                               \
        case 8: P##copy_panels_w(dst, s, ld, kc, 8, npan); break;                                  \
        case 16: P##copy_panels_w(dst, s, ld, kc, 16, npan); break;                                \
        case 32: P##copy_panels_w(dst, s, ld, kc, 32, npan); break;                                \
        default: P##copy_panels_w(dst, s, ld, kc, w, npan); break;                                 \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    static void P##pack_b(void *vc, int64_t b, int64_t e)                                          \
    {                                                                                              \
        const P##ctx *g = vc;                                                                      \
        int nr = g->nr;                                                                            \
        if (g->bsrc) {                                                                             \
            for (int64_t p = b; p < e; p++) {                                                      \
                int64_t j0 = g->jc + p * nr;                                                       \
                g->bsrc->pack(g->bsrc->ctx, g->pc, g->kc, j0, (int)min64(nr, g->jc + g->nc - j0),  \
                              nr, g->Bp + p * nr * g->kc);                                         \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        if (!g->tb) { /* the full panels of [b, e) at once; a cut last panel below */              \
            int64_t full = min64(e, g->nc / nr);                                                   \
            if (full > b)                                                                          \
                P##copy_panels(g->Bp + b * nr * g->kc, g->B + g->pc * g->ldb + g->jc + b * nr,     \
                               g->ldb, g->kc, nr, full - b);                                       \
            b = full > b ? full : b;                                                               \
        }                                                                                          \
        for (int64_t p = b; p < e; p++) {                                                          \
            int64_t j0 = g->jc + p * nr;                                                           \
            int n = (int)min64(nr, g->jc + g->nc - j0);                                            \
            T *dst = g->Bp + p * nr * g->kc;                                                       \
            if (!g->tb && n == nr) {                                                               \
                P##copy_rows(dst, g->B + g->pc * g->ldb + j0, g->ldb, g->kc, nr);                  \
            } else if (!g->tb) {                                                                   \
                for (int64_t k = 0; k < g->kc; k++, dst += nr) {                                   \
                    const T *s = g->B + (g->pc + k) * g->ldb + j0;                                 \
                    for (int c = 0; c < n; c++) dst[c] = s[c];                                     \
                    for (int c = n; c < nr; c++) dst[c] = 0;                                       \
                }                                                                                  \
            } else if (n == nr && g->pack_bt) {                                                    \
                g->pack_bt(g->kc, g->B + j0 * g->ldb + g->pc, g->ldb, dst);                        \
            } else if (n == nr) {                                                                  \
                P##gather_cols(dst, g->B + j0 * g->ldb + g->pc, g->ldb, g->kc, nr);                \
            } else {                                                                               \
                for (int c = 0; c < nr; c++) {                                                     \
                    if (c >= n) {                                                                  \
                        for (int64_t k = 0; k < g->kc; k++) dst[k * nr + c] = 0;                   \
                        continue;                                                                  \
                    }                                                                              \
                    const T *s = g->B + (j0 + c) * g->ldb + g->pc;                                 \
                    for (int64_t k = 0; k < g->kc; k++) dst[k * nr + c] = s[k];                    \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    static void P##pack_a(void *vc, int64_t b, int64_t e)                                          \
    {                                                                                              \
        const P##ctx *g = vc;                                                                      \
        int mr = g->mr;                                                                            \
        for (int64_t p = b; p < e; p++) {                                                          \
            int64_t i0 = g->ms + p * mr;                                                           \
            int m = (int)min64(mr, g->ms + g->mlen - i0);                                          \
            T *dst = g->Ap + p * mr * g->kc;                                                       \
            if (g->asrc) {                                                                         \
                g->asrc->pack(g->asrc->ctx, g->pc, g->kc, i0, m, mr, dst);                         \
            } else if (!g->ta && m == mr && g->pack) {                                             \
                g->pack(g->kc, g->A + i0 * g->lda + g->pc, g->lda, dst);                           \
            } else if (!g->ta && m == mr) {                                                        \
                P##gather_cols(dst, g->A + i0 * g->lda + g->pc, g->lda, g->kc, mr);                \
            } else if (g->ta && m == mr) {                                                         \
                P##copy_rows(dst, g->A + g->pc * g->lda + i0, g->lda, g->kc, mr);                  \
            } else if (g->ta) {                                                                    \
                for (int64_t k = 0; k < g->kc; k++, dst += mr) {                                   \
                    const T *s = g->A + (g->pc + k) * g->lda + i0;                                 \
                    for (int r = 0; r < m; r++) dst[r] = s[r];                                     \
                    for (int r = m; r < mr; r++) dst[r] = 0;                                       \
                }                                                                                  \
            } else {                                                                               \
                for (int r = 0; r < mr; r++) {                                                     \
                    if (r >= m) {                                                                  \
                        for (int64_t k = 0; k < g->kc; k++) dst[k * mr + r] = 0;                   \
                        continue;                                                                  \
                    }                                                                              \
                    const T *s = g->A + (i0 + r) * g->lda + g->pc;                                 \
                    for (int64_t k = 0; k < g->kc; k++) dst[k * mr + r] = s[k];                    \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    /* B packed by whichever tasks of the region are running: each claims chunks of panels         \
     * until none are left. A task waits (after packing its A) only for panels claimed by          \
     * running tasks, so the region cannot deadlock even when its tasks run one after another. */  \
    static void P##share_b(const P##ctx *g)                                                        \
    {                                                                                              \
        int64_t p;                                                                                 \
        while ((p = atomic_fetch_add(g->bnext, g->bgrain)) < g->npan_b) {                          \
            int64_t e = min64(p + g->bgrain, g->npan_b);                                           \
            P##pack_b((void *)g, p, e);                                                            \
            atomic_fetch_add(g->bdone, e - p);                                                     \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    /* The micro-kernel over rows [i0, i1) x columns [j0, j1) of the current block (packed A and   \
     * B), then the epilogue when the block is K's last. */                                        \
    static void P##sweep(const P##ctx *g, int64_t i0, int64_t i1, int64_t j0, int64_t j1)          \
    {                                                                                              \
        for (int64_t jr = j0; jr < j1; jr += g->nr) {                                              \
            const T *bp = g->Bp + (jr / g->nr) * g->nr * g->kc;                                    \
            int nr = (int)min64(g->nr, g->nc - jr);                                                \
            for (int64_t ir = i0; ir < i1; ir += g->mr) {                                          \
                const T *ap = g->Ap + (ir / g->mr) * g->mr * g->kc;                                \
                T *c = g->C + (g->ms + ir) * g->ldc + g->jc + jr;                                  \
                g->ukr(g->kc, ap, bp, c, g->ldc, g->alpha, g->beta_blk,                            \
                       (int)min64(g->mr, g->mlen - ir), nr);                                       \
            }                                                                                      \
        }                                                                                          \
        if (g->pc + g->kc == g->K) /* the block's last K step: it is final and in cache */         \
            P##epi_block(g, g->ms + i0, g->jc + j0, i1 - i0, j1 - j0);                             \
    }                                                                                              \
                                                                                                   \
    /* Task t: with nblk > 0, packs row panels [bound[t], bound[t + 1]) of A itself (so they       \
     * sit in this core's cache) and sweeps all columns of the B block; else                       \
     * rows [ic*MC, +MC) of the already packed super-block, columns [js*jchunk, +jchunk). */       \
    static void P##macro(void *vc, int64_t b, int64_t e)                                           \
    {                                                                                              \
        const P##ctx *g = vc;                                                                      \
        for (int64_t t = b; t < e; t++) {                                                          \
            if (g->nblk > 0) {                                                                     \
                int64_t p0 = g->bound[t], p1 = g->bound[t + 1];                                    \
                if (g->bshare) P##share_b(g);                                                      \
                P##pack_a(vc, p0, p1);                                                             \
                if (g->bshare)                                                                     \
                    while (atomic_load(g->bdone) < g->npan_b) sched_yield();                       \
                P##sweep(g, p0 * g->mr, min64(p1 * g->mr, g->mlen), 0, g->nc);                     \
            } else {                                                                               \
                int64_t i0 = (t / g->nj) * g->mc, j0 = (t % g->nj) * g->jchunk;                    \
                P##sweep(g, i0, min64(i0 + g->mc, g->mlen), j0, min64(j0 + g->jchunk, g->nc));     \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    /* Every KC block of one column block in one pool region: task t is row task t % nblk of       \
     * KC block t / nblk, taken in order, so a thread that finishes its share of a block goes on   \
     * to the next block's rows instead of waiting for the other at the block's end (one wake-up   \
     * and one final wait per product instead of one per KC block). Blocks pack B into a ring of   \
     * B_RING slots: the first tasks of a block pack it (share_b) once every task of the block     \
     * that used the slot before has finished. A task waits for its rows' previous block (C is     \
     * accumulated block after block) and for its block's B; it waits only on tasks taken before   \
     * it, which run on threads that are running, so the region cannot deadlock. kb holds per      \
     * block: next B chunk, B panels done, tasks finished; then per row task the blocks done.      \
     * Each C element sees the same blocks, packed values and micro-kernel calls as block by       \
     * block (the same bits). */                                                                   \
    static void P##all_k(void *vc, int64_t b, int64_t e)                                           \
    {                                                                                              \
        const P##ctx *g0 = vc;                                                                     \
        int64_t nkb = (g0->K + g0->kblk - 1) / g0->kblk;                                           \
        _Atomic int64_t *rows = g0->kb + 3 * nkb;                                                  \
        for (int64_t t = b; t < e; t++) {                                                          \
            int64_t q = t / g0->nblk, r = t % g0->nblk;                                            \
            P##ctx g = *g0;                                                                        \
            g.pc = q * g0->kblk;                                                                   \
            g.kc = min64(g0->kblk, g0->K - g.pc);                                                  \
            g.beta_blk = q == 0 ? g0->beta : (T)1;                                                 \
            g.Bp = g0->Bp + (q % B_RING) * g0->bslot;                                              \
            g.bnext = g0->kb + 3 * q, g.bdone = g.bnext + 1;                                       \
            if (atomic_load(g.bnext) < g.npan_b) {                                                 \
                if (q >= B_RING)                                                                   \
                    while (atomic_load(g0->kb + 3 * (q - B_RING) + 2) < g0->nblk) sched_yield();   \
                P##share_b(&g);                                                                    \
            }                                                                                      \
            while (atomic_load(rows + r) < q) sched_yield();                                       \
            int64_t p0 = g.bound[r], p1 = g.bound[r + 1];                                          \
            /* the rows' panels at a KC stride from panel p0 on, so that a short last block's      \
             * panels stay inside the band's own part of Ap, which other bands' tasks of the       \
             * block before may still be reading */                                                \
            g.Ap = g0->Ap + p0 * g.mr * (g0->kblk - g.kc);                                         \
            P##pack_a(&g, p0, p1);                                                                 \
            while (atomic_load(g.bdone) < g.npan_b) sched_yield();                                 \
            P##sweep(&g, p0 *g.mr, min64(p1 *g.mr, g.mlen), 0, g.nc);                              \
            atomic_store(rows + r, q + 1);                                                         \
            atomic_fetch_add(g0->kb + 3 * q + 2, 1);                                               \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    /* A long reduction into a small C (weight gradients: K = batch x positions): task t owns      \
     * column panels [t * np / ntask, (t + 1) * np / ntask) and runs every KC block itself,        \
     * packing all of A and its own B panels into its slice of Ap, so one pool wake-up serves      \
     * the whole product instead of one per KC block. Each C element gets the same packed          \
     * values, KC blocks and micro-kernel calls as on the general path (the same bits). */         \
    static void P##long_k(void *vc, int64_t b, int64_t e)                                          \
    {                                                                                              \
        const P##ctx *g0 = vc;                                                                     \
        int mr = g0->mr, nr = g0->nr;                                                              \
        int64_t np = (g0->N + nr - 1) / nr, apan = (g0->M + mr - 1) / mr;                          \
        int64_t kb = g0->kc; /* the KC block, set by the caller */                                 \
        for (int64_t t = b; t < e; t++) {                                                          \
            int64_t p0 = t * np / g0->ntask, p1 = (t + 1) * np / g0->ntask;                        \
            if (p1 <= p0) continue;                                                                \
            P##ctx g = *g0;                                                                        \
            g.Ap = g0->Ap + t * g0->task_elems;                                                    \
            g.Bp = g.Ap + apan * mr * kb;                                                          \
            g.jc = p0 * nr;                                                                        \
            g.nc = min64(p1 * nr, g0->N) - g.jc;                                                   \
            g.ms = 0, g.mlen = g0->M;                                                              \
            for (int64_t pc = 0; pc < g0->K; pc += kb) {                                           \
                g.pc = pc;                                                                         \
                g.kc = min64(kb, g0->K - pc);                                                      \
                g.beta_blk = pc == 0 ? g0->beta : (T)1;                                            \
                P##pack_b(&g, 0, p1 - p0);                                                         \
                P##pack_a(&g, 0, apan);                                                            \
                for (int64_t jr = 0; jr < g.nc; jr += nr) {                                        \
                    const T *bp = g.Bp + (jr / nr) * nr * g.kc;                                    \
                    int n = (int)min64(nr, g.nc - jr);                                             \
                    for (int64_t ir = 0; ir < g.M; ir += mr) {                                     \
                        const T *ap = g.Ap + (ir / mr) * mr * g.kc;                                \
                        g.ukr(g.kc, ap, bp, g.C + ir * g.ldc + g.jc + jr, g.ldc, g.alpha,          \
                              g.beta_blk, (int)min64(mr, g.M - ir), n);                            \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
            P##epi_block(&g, 0, g.jc, g.M, g.nc);                                                  \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    /* Unpacked path over rows [b, e) (or, for one-row products, column blocks [b, e)). */         \
    static void P##small_rect(const P##ctx *g, int64_t i0, int64_t i1, int64_t j0, int64_t j1)     \
    {                                                                                              \
        T acc[SMALL_COLS];                                                                         \
        for (int64_t i = i0; i < i1; i++) {                                                        \
            for (int64_t jb = j0; jb < j1; jb += SMALL_COLS) {                                     \
                int64_t n = min64(SMALL_COLS, j1 - jb);                                            \
                if (g->tb) {                                                                       \
                    for (int64_t j = 0; j < n; j++) {                                              \
                        const T *brow = g->B + (jb + j) * g->ldb;                                  \
                        T s = 0;                                                                   \
                        if (g->ta)                                                                 \
                            for (int64_t k = 0; k < g->K; k++)                                     \
                                s += g->A[k * g->lda + i] * brow[k];                               \
                        else                                                                       \
                            for (int64_t k = 0; k < g->K; k++)                                     \
                                s += g->A[i * g->lda + k] * brow[k];                               \
                        acc[j] = s;                                                                \
                    }                                                                              \
                } else {                                                                           \
                    for (int64_t j = 0; j < n; j++) acc[j] = 0;                                    \
                    for (int64_t k = 0; k < g->K; k++) {                                           \
                        T a = g->ta ? g->A[k * g->lda + i] : g->A[i * g->lda + k];                 \
                        const T *brow = g->B + k * g->ldb + jb;                                    \
                        for (int64_t j = 0; j < n; j++) acc[j] += a * brow[j];                     \
                    }                                                                              \
                }                                                                                  \
                T *c = g->C + i * g->ldc + jb;                                                     \
                for (int64_t j = 0; j < n; j++) {                                                  \
                    T t = g->alpha * acc[j];                                                       \
                    c[j] = g->beta == 0 ? t : t + g->beta * c[j];                                  \
                }                                                                                  \
                P##epi_block(g, i, jb, 1, n);                                                      \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    static void P##small_rows(void *vc, int64_t b, int64_t e)                                      \
    {                                                                                              \
        const P##ctx *g = vc;                                                                      \
        P##small_rect(g, b, e, 0, g->N);                                                           \
    }                                                                                              \
                                                                                                   \
    static void P##small_cols(void *vc, int64_t b, int64_t e)                                      \
    {                                                                                              \
        const P##ctx *g = vc;                                                                      \
        P##small_rect(g, 0, g->M, b *SMALL_COLS, min64(e *SMALL_COLS, g->N));                      \
    }                                                                                              \
                                                                                                   \
    static void P##run(em_range_fn fn, P##ctx *g, int64_t n, int64_t grain, bool par)              \
    {                                                                                              \
        if (par) /* the row tasks are planned for chunks started in order (plan_rows) */           \
            core_parallel_for_in_order(n, grain, fn, g);                                           \
        else                                                                                       \
            fn(g, 0, n);                                                                           \
    }                                                                                              \
                                                                                                   \
    /* Runs column block g->jc of the product with P##all_k when the row tasks' plan suits (the    \
     * caller checked the rest: several threads, M in one super-block, two or more KC blocks, and  \
     * B_RING slots of g->bslot elements for B): false, and nothing done, otherwise. */            \
    static bool P##all_k_region(P##ctx *g, int threads, int64_t MC, int64_t KC, int64_t *bound)    \
    {                                                                                              \
        int64_t nkb = (g->K + KC - 1) / KC, npan = (g->M + g->mr - 1) / g->mr;                     \
        int64_t n_ic = (g->M + MC - 1) / MC;                                                       \
        if (round_up(n_ic, threads) > npan) return false;                                          \
        g->ms = 0, g->mlen = g->M, g->npan = npan;                                                 \
        g->nblk = plan_rows(npan, n_ic, threads, g->mr, bound);                                    \
        g->bound = bound;                                                                          \
        g->kb = calloc((size_t)(3 * nkb + g->nblk), sizeof *g->kb); /* all zero: lock-free */      \
        if (!g->kb) return false;                                                                  \
        g->kblk = KC;                                                                              \
        g->npan_b = (g->nc + g->nr - 1) / g->nr;                                                   \
        g->bgrain = 1 + 16384 / (g->nr * KC);                                                      \
        P##run(P##all_k, g, nkb * g->nblk, 1, true);                                               \
        free((void *)g->kb);                                                                       \
        g->kb = NULL;                                                                              \
        return true;                                                                               \
    }                                                                                              \
                                                                                                   \
    /* Vector-shaped products: out[i * ldo] = alpha * (dot or axpy sum) + beta * out[..] in        \
     * blocks of GEMV_ROWS rows / GEMV_BYTES of columns; the split does not change any sum. */     \
    typedef struct P##vctx {                                                                       \
        bool dot;                                                                                  \
        int64_t n, K, lda, ldo;                                                                    \
        const T *A, *x;                                                                            \
        T *out;                                                                                    \
        T alpha, beta;                                                                             \
        void (*fn)(int64_t, int64_t, const T *, int64_t, const T *, T *);                          \
    } P##vctx;                                                                                     \
                                                                                                   \
    static void P##gemv_blocks(void *vc, int64_t b, int64_t e)                                     \
    {                                                                                              \
        const P##vctx *v = vc;                                                                     \
        T y[GEMV_BYTES / sizeof(T)];                                                               \
        int64_t bs = v->dot ? GEMV_ROWS : (int64_t)(GEMV_BYTES / sizeof(T));                       \
        for (int64_t blk = b; blk < e; blk++) {                                                    \
            int64_t i0 = blk * bs, n = min64(bs, v->n - i0);                                       \
            v->fn(n, v->K, v->dot ? v->A + i0 * v->lda : v->A + i0, v->lda, v->x, y);              \
            T *o = v->out + i0 * v->ldo;                                                           \
            for (int64_t i = 0; i < n; i++) {                                                      \
                T t = v->alpha * y[i];                                                             \
                o[i * v->ldo] = v->beta == 0 ? t : t + v->beta * o[i * v->ldo];                    \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    /* False when the vector's copy could not be allocated (the caller falls back). */             \
    static bool P##gemv(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T *A,    \
                        int64_t lda, const T *B, int64_t ldb, T beta, T *C, int64_t ldc, bool par, \
                        void (*dot)(int64_t, int64_t, const T *, int64_t, const T *, T *),         \
                        void (*axpy)(int64_t, int64_t, const T *, int64_t, const T *, T *))        \
    {                                                                                              \
        P##vctx v = {.K = K, .alpha = alpha, .beta = beta, .out = C};                              \
        const T *x;                                                                                \
        int64_t xs;                                                                                \
        if (N == 1) { /* C[:, 0] = op(A) . b */                                                    \
            v.dot = !ta, v.n = M, v.A = A, v.lda = lda, v.ldo = ldc;                               \
            x = B, xs = tb ? 1 : ldb;                                                              \
        } else { /* M == 1: C[0, :] = a . op(B) */                                                 \
            v.dot = tb, v.n = N, v.A = B, v.lda = ldb, v.ldo = 1;                                  \
            x = A, xs = ta ? lda : 1;                                                              \
        }                                                                                          \
        T *xc = NULL;                                                                              \
        if (xs != 1 && K > 1) {                                                                    \
            xc = malloc(sizeof(T) * (size_t)K);                                                    \
            if (!xc) return false;                                                                 \
            for (int64_t k = 0; k < K; k++) xc[k] = x[k * xs];                                     \
            x = xc;                                                                                \
        }                                                                                          \
        v.x = x;                                                                                   \
        v.fn = v.dot ? dot : axpy;                                                                 \
        int64_t bs = v.dot ? GEMV_ROWS : (int64_t)(GEMV_BYTES / sizeof(T));                        \
        if (par)                                                                                   \
            em_parallel_for((v.n + bs - 1) / bs, 1, P##gemv_blocks, &v);                           \
        else                                                                                       \
            P##gemv_blocks(&v, 0, (v.n + bs - 1) / bs);                                            \
        free(xc);                                                                                  \
        return true;                                                                               \
    }                                                                                              \
                                                                                                   \
    static bool P##gemm(                                                                           \
        bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T *A, int64_t lda,       \
        const T *B, int64_t ldb, T beta, T *C, int64_t ldc,                                        \
        void (*ukr)(int64_t, const T *, const T *, T *, int64_t, T, T, int, int),                  \
        void (*pack)(int64_t, const T *, int64_t, T *),                                            \
        void (*pack_bt)(int64_t, const T *, int64_t, T *), int mr, int nr, int64_t MC, int64_t KC, \
        int64_t NC, void (*dot)(int64_t, int64_t, const T *, int64_t, const T *, T *),             \
        void (*axpy)(int64_t, int64_t, const T *, int64_t, const T *, T *),                        \
        const cpu_gemm_epi *epi, const cpu_gemm_src *asrc, const cpu_gemm_src *bsrc)               \
    {                                                                                              \
        if (M <= 0 || N <= 0) return true;                                                         \
        if (K <= 0 || alpha == 0) {                                                                \
            for (int64_t i = 0; i < M; i++)                                                        \
                for (int64_t j = 0; j < N; j++)                                                    \
                    C[i * ldc + j] = beta == 0 ? (T)0 : beta * C[i * ldc + j];                     \
            if (epi) epi->fn(epi->ctx, C, ldc, 0, 0, M, N);                                        \
            return true;                                                                           \
        }                                                                                          \
        P##ctx g = {.ta = ta,                                                                      \
                    .tb = tb,                                                                      \
                    .M = M,                                                                        \
                    .N = N,                                                                        \
                    .K = K,                                                                        \
                    .lda = lda,                                                                    \
                    .ldb = ldb,                                                                    \
                    .ldc = ldc,                                                                    \
                    .alpha = alpha,                                                                \
                    .beta = beta,                                                                  \
                    .A = A,                                                                        \
                    .B = B,                                                                        \
                    .C = C,                                                                        \
                    .mr = mr,                                                                      \
                    .nr = nr,                                                                      \
                    .mc = MC,                                                                      \
                    .ukr = ukr,                                                                    \
                    .pack = pack,                                                                  \
                    .pack_bt = pack_bt,                                                            \
                    .epi = epi,                                                                    \
                    .asrc = asrc,                                                                  \
                    .bsrc = bsrc};                                                                 \
        int64_t mnk = M * N * K;                                                                   \
        bool par = mnk >= PAR_MNK && em_get_num_threads() > 1;                                     \
        bool srcs = asrc || bsrc; /* callbacks pack: only the packed path reads them */            \
        if ((M == 1 || N == 1) && !srcs &&                                                         \
            P##gemv(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, par, dot, axpy)) {       \
            if (epi) epi->fn(epi->ctx, C, ldc, 0, 0, M, N); /* after the GEMV: one pass */         \
            return true;                                                                           \
        }                                                                                          \
        bool small = !srcs && !cpu_gemm_packed(M, N, K);                                           \
        /* B ring slots when the KC blocks may run in one region (P##all_k) */                     \
        bool all_k = par && M <= SUPER_M && K > KC;                                                \
        int64_t ring = all_k ? B_RING : 1;                                                         \
        pool_buf Bb = {0}, Ab = {0};                                                               \
        if (!small) {                                                                              \
            int64_t kcap = min64(K, KC);                                                           \
            Bb = buf_get(ring * kcap * round_up(min64(N, NC), nr), sizeof(T));                     \
            Ab = buf_get(kcap * round_up(min64(M, SUPER_M), mr), sizeof(T));                       \
            if ((!Bb.p || !Ab.p) && srcs) {                                                        \
                buf_put(Bb);                                                                       \
                buf_put(Ab);                                                                       \
                return false;                                                                      \
            }                                                                                      \
            if (!Bb.p || !Ab.p) small = true; /* out of memory: the unpacked path needs none */    \
        }                                                                                          \
        if (small) {                                                                               \
            buf_put(Bb);                                                                           \
            buf_put(Ab);                                                                           \
            if (M == 1)                                                                            \
                P##run(P##small_cols, &g, (N + SMALL_COLS - 1) / SMALL_COLS, 1, par);              \
            else                                                                                   \
                P##run(P##small_rows, &g, M, 1, par);                                              \
            return true;                                                                           \
        }                                                                                          \
        g.Ap = Ab.p;                                                                               \
        g.Bp = Bb.p;                                                                               \
        int threads = par ? em_get_num_threads() : 1;                                              \
        if (threads > 1 && K >= 4 * KC && M <= MC && N <= NC && (N + nr - 1) / nr >= threads) {    \
            /* long_k: per task all of A and its share of the B panels, for one KC block */        \
            int64_t kcap = min64(K, KC), np = (N + nr - 1) / nr;                                   \
            g.ntask = threads;                                                                     \
            g.task_elems = round_up(kcap * (round_up(M, mr) + (np / threads + 1) * nr), 16);       \
            g.kc = kcap;                                                                           \
            pool_buf Lb = buf_get(g.task_elems * threads, sizeof(T));                              \
            if (Lb.p) {                                                                            \
                g.Ap = Lb.p;                                                                       \
                P##run(P##long_k, &g, threads, 1, true);                                           \
                buf_put(Lb);                                                                       \
                buf_put(Ab);                                                                       \
                buf_put(Bb);                                                                       \
                return true;                                                                       \
            }                                                                                      \
            g.Ap = Ab.p;                                                                           \
        }                                                                                          \
        int64_t bound[PLAN_MAX + 1];                                                               \
        g.bslot = min64(K, KC) * round_up(min64(N, NC), nr);                                       \
        /* column blocks of equal width (whole register tiles), none wider than NC */              \
        int64_t ncb = round_up((N + (N + NC - 1) / NC - 1) / ((N + NC - 1) / NC), nr);             \
        for (int64_t jc = 0; jc < N; jc += ncb) {                                                  \
            g.jc = jc;                                                                             \
            g.nc = min64(ncb, N - jc);                                                             \
            if (all_k && P##all_k_region(&g, threads, MC, KC, bound)) continue;                    \
            for (int64_t pc = 0; pc < K; pc += KC) {                                               \
                g.pc = pc;                                                                         \
                g.kc = min64(KC, K - pc);                                                          \
                g.beta_blk = pc == 0 ? beta : (T)1;                                                \
                int64_t npan_b = (g.nc + nr - 1) / nr;                                             \
                _Atomic int64_t bnext = 0, bdone = 0;                                              \
                g.bnext = &bnext, g.bdone = &bdone;                                                \
                g.npan_b = npan_b;                                                                 \
                g.bgrain = 1 + 16384 / (nr * g.kc);                                                \
                bool b_packed = false;                                                             \
                for (int64_t ms = 0; ms < M; ms += SUPER_M) {                                      \
                    g.ms = ms;                                                                     \
                    g.mlen = min64(SUPER_M, M - ms);                                               \
                    g.npan = (g.mlen + mr - 1) / mr;                                               \
                    int64_t n_ic = (g.mlen + MC - 1) / MC;                                         \
                    if (round_up(n_ic, threads) <= g.npan) {                                       \
                        g.nblk = plan_rows(g.npan, n_ic, threads, mr, bound);                      \
                        g.bound = bound;                                                           \
                        g.bshare = !b_packed; /* B packed inside this region: one wake-up less */  \
                        P##run(P##macro, &g, g.nblk, 1, par);                                      \
                        b_packed = true;                                                           \
                        continue;                                                                  \
                    }                                                                              \
                    if (!b_packed) P##run(P##pack_b, &g, npan_b, g.bgrain, par);                   \
                    b_packed = true;                                                               \
                    g.nblk = 0;                                                                    \
                    P##run(P##pack_a, &g, g.npan, 1 + 16384 / (mr * g.kc), par);                   \
                    g.nj = 1;                                                                      \
                    if (n_ic < 2 * threads && threads > 1)                                         \
                        g.nj = min64(npan_b, (2 * threads + n_ic - 1) / n_ic);                     \
                    g.jchunk = round_up((g.nc + g.nj - 1) / g.nj, nr);                             \
                    g.nj = (g.nc + g.jchunk - 1) / g.jchunk;                                       \
                    P##run(P##macro, &g, n_ic *g.nj, 1, par);                                      \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        buf_put(Ab);                                                                               \
        buf_put(Bb);                                                                               \
        return true;                                                                               \
    }

DEFINE_GEMM(float, s_)
DEFINE_GEMM(double, d_)

void cpu_sgemm_epi(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                   int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
                   const cpu_gemm_epi *epi)
{
    const cpu_gemm_kernels *k = kernels();
    (void)s_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, k->s_ukr, k->s_pack_a,
                 k->s_pack_bt, k->s_mr, k->s_nr, k->s_mc, k->s_kc, k->s_nc, k->s_dot, k->s_axpy,
                 epi, NULL, NULL);
}

void cpu_dgemm_epi(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double *A,
                   int64_t lda, const double *B, int64_t ldb, double beta, double *C, int64_t ldc,
                   const cpu_gemm_epi *epi)
{
    const cpu_gemm_kernels *k = kernels();
    (void)d_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, k->d_ukr, NULL, NULL,
                 k->d_mr, k->d_nr, k->d_mc, k->d_kc, k->d_nc, k->d_dot, k->d_axpy, epi, NULL, NULL);
}

bool cpu_sgemm_src(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                   int64_t lda, const cpu_gemm_src *asrc, const float *B, int64_t ldb,
                   const cpu_gemm_src *bsrc, float beta, float *C, int64_t ldc,
                   const cpu_gemm_epi *epi)
{
    const cpu_gemm_kernels *k = kernels();
    return s_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, k->s_ukr, k->s_pack_a,
                  k->s_pack_bt, k->s_mr, k->s_nr, k->s_mc, k->s_kc, k->s_nc, k->s_dot, k->s_axpy,
                  epi, asrc, bsrc);
}

bool cpu_dgemm_src(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double *A,
                   int64_t lda, const cpu_gemm_src *asrc, const double *B, int64_t ldb,
                   const cpu_gemm_src *bsrc, double beta, double *C, int64_t ldc,
                   const cpu_gemm_epi *epi)
{
    const cpu_gemm_kernels *k = kernels();
    return d_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, k->d_ukr, NULL, NULL,
                  k->d_mr, k->d_nr, k->d_mc, k->d_kc, k->d_nc, k->d_dot, k->d_axpy, epi, asrc,
                  bsrc);
}

void cpu_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
               int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    cpu_sgemm_epi(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL);
}

void cpu_dgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double *A,
               int64_t lda, const double *B, int64_t ldb, double beta, double *C, int64_t ldc)
{
    cpu_dgemm_epi(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL);
}
