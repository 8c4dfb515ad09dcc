/* Vectorised row kernels for the hot f32 element-wise, softmax, layer-norm, sum, top-k and FFT
 * paths, one set per ISA (cpu_fast_avx512.c, cpu_fast_avx2.c), reached through cpu_fast(): the
 * table for the best ISA the CPU has, or NULL for the portable paths. Each kernel works on one
 * row (or one block) in a fixed order, so results do not depend on the thread count. */
#ifndef EMBER_CPU_FAST_H
#define EMBER_CPU_FAST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* 1 where the x86 ISA files (*_avx2.c, *_avx512.c) are built and __builtin_cpu_supports knows
 * their features; elsewhere those files are left out (CMakeLists.txt) and nothing names them. */
#if defined(__x86_64__) || defined(__i386__)
#define CPU_X86 1
#else
#define CPU_X86 0
#endif

typedef struct cpu_fast_ops {
    const char *isa;
    /* y = x * 0.5 * (1 + erf(x / sqrt 2)) for n floats (rational erf as the portable f32 path).
     * hint (here and below): CPU_FAST_BIG and CPU_FAST_STREAM bits (cpu_store_begin sets them
     * for an op's output). Streamed stores are not fenced here: a caller that passes
     * CPU_FAST_STREAM calls cpu_fast_stream_fence() once after its last call of a task, before
     * the task's outputs are handed on. */
    void (*gelu)(const float *x, float *y, int64_t n, int hint);
    /* One line of n floats: softmax (or log_softmax) as the portable kernel defines it (the max
     * is NaN when any element is; the sum of exponentials accumulates in f64). */
    void (*softmax_row)(const float *x, float *y, int64_t n, bool log, int hint);
    /* Layer norm (or RMS norm) of one row: mean and variance in f64 (the AVX-512 kernel sums
       blocks of 1024 floats in f32 and adds the blocks in f64), then f32 affine. */
    void (*norm_row)(const float *x, float *y, const float *w, const float *b, int64_t n,
                     double eps, bool rms, int hint);
    /* Sum of n floats, in f64 (AVX2: each vector converted; AVX-512: f32 partial sums of 16
     * values per lane, then f64), the lanes combined in a fixed order. */
    double (*sum)(const float *x, int64_t n);
    /* First index i >= from with x[i] > t (desc) or x[i] < t (!desc), or NaN, or n if none:
     * the skip test of the small-k top-k (NULL: no vector version). */
    int64_t (*find_past)(const float *x, int64_t from, int64_t n, float t, bool desc);
    /* The top k (1 <= k <= 32) of a row of n >= 32 floats without NaN, best first, ties in index
     * order, as the sort orders them: values to val[0, k), positions to idx[0, k). A first pass
     * takes the best of G interleaved groups (8, 16 or 32, at least k), whose k-th best bounds
     * the top k, so only the elements reaching it are inserted. false (val, idx undefined) on a
     * NaN or other n, k. */
    bool (*topk_row)(const float *x, int64_t n, int64_t k, bool desc, float *val, int64_t *idx);
    /* A pass of decimation-in-time FFT butterflies t in [t0, t1), t = block * h + k (h >= 4),
     * over split re/im arrays: radix 2 (span h, blocks of 2h) or radix 4 (spans h and 2h,
     * blocks of 4h); tw[h + k] = exp(-i pi k / h). As cpu_signal.c's portable passes. */
    void (*fft_pass2)(double *re, double *im, const double *twr, const double *twi, int64_t h,
                      int64_t t0, int64_t t1);
    void (*fft_pass4)(double *re, double *im, const double *twr, const double *twi, int64_t h,
                      int64_t t0, int64_t t1);
    /* Top-1 down w columns of n rows (row i at x + i * stride): v[j] the largest (desc) or
     * smallest, ix[j] its row; NaN beats everything, ties keep the lower row (n < 2^31). */
    void (*col_top1)(const float *x, int64_t n, int64_t stride, int64_t w, float *v, int64_t *ix,
                     bool desc);
    /* o[i] = m[i] ? f : x[i] for n 32-bit elements (bit copies: masked_fill of f32/i32), m one
     * byte per element, nonzero meaning true. */
    void (*mask_fill32)(uint32_t *o, const uint32_t *x, const uint8_t *m, uint32_t f, int64_t n);
    /* o[i] = y[i] <= t ? +0 : g[i] (g's bits) for n floats: relu's backward in one pass. */
    void (*threshold_bwd32)(float *o, const float *g, const float *y, float t, int64_t n);
    /* One row of n floats of softmax's gradient, o = y (g - sum(g y)), or log-softmax's, o = g -
     * exp(y) sum(g): the sum in f64 of f32 terms, the outputs in f32 (softmax_backward). */
    void (*softmax_bw_row)(const float *y, const float *g, float *o, int64_t n, bool log);
} cpu_fast_ops;

/* Orders the streamed (non-temporal) stores of the row kernels before what follows: once per task
 * instead of once per row, since a fence per row of a few KiB stalls the softmax measurably
 * (bench/RESULTS.md, evidence section). */
static inline void cpu_fast_stream_fence(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_sfence();
#endif
}

/* Store hints of the row kernels. CPU_FAST_BIG: a large output of contiguous rows, so row
 * kernels prefetch the next row (cpu_fast_next_row); CPU_FAST_STREAM: store the aligned body of
 * the output around the caches (non-temporal). */
#define CPU_FAST_BIG    1
#define CPU_FAST_STREAM 2

/* Outputs of at least this many bytes are large (past the L3 share): they get CPU_FAST_BIG and,
 * where cpu_store_begin finds it faster, CPU_FAST_STREAM. */
#define CPU_FAST_STREAM_MIN ((int64_t)16 << 20)

/* Which stores a large output of each op family gets. Streaming around the caches is not faster
 * everywhere, and which families gain from it differs from one CPU to the next
 * (bench/RESULTS.md, evidence section). With config cpu_stream_stores = auto (the default) a
 * family's first
 * large call streams, its next six try the two, three each (the first of each three settles
 * the caches, the other two are timed per byte), and the faster (by its fastest timed call;
 * around the caches unless through is 2 % faster) is kept for the process (cpu_store.c); on /
 * off fix it. Results are the same bits either way. */
typedef enum cpu_store_kind {
    CPU_STORE_GELU,
    CPU_STORE_SOFTMAX,
    CPU_STORE_NORM,
    CPU_STORE_POOL_ROWS, /* the two-pass max pool over contiguous rows (NCHW) */
    CPU_STORE_POOL_CL,   /* the two-pass channels-last max pool */
    CPU_STORE_KINDS
} cpu_store_kind;

typedef struct cpu_store_plan {
    int hint; /* CPU_FAST_BIG / CPU_FAST_STREAM for this call */
    cpu_store_kind kind;
    int trial; /* which store this call tries (0 through, 1 around the caches), or -1 */
    int64_t bytes, t0;
} cpu_store_plan;

/* The hint for an op of `kind` writing `bytes` bytes; times the call when it is a trial, until
 * cpu_store_end. */
cpu_store_plan cpu_store_begin(cpu_store_kind kind, int64_t bytes);
void cpu_store_end(const cpu_store_plan *p);
/* Tests: 1 streams every large output, 0 none, -1 returns to the configuration. */
void cpu_store_force(int mode);
/* The decision for kind: 1 around the caches, 0 through them, -1 not yet made. */
int cpu_store_decision(cpu_store_kind kind);

/* The row after x (n floats on) where large outputs (CPU_FAST_BIG) suggest contiguous rows of a big
 * tensor and n is at most CPU_FAST_PREFETCH_ROW: the softmax and norm row kernels prefetch it
 * while they compute on x from L1, so the memory keeps streaming through their arithmetic
 * (prefetches do not fault, so a row that is the tensor's last is harmless); NULL otherwise. */
#define CPU_FAST_PREFETCH_ROW 8192

static inline const float *cpu_fast_next_row(const float *x, int64_t n, int hint)
{
    return (hint & CPU_FAST_BIG) && n <= CPU_FAST_PREFETCH_ROW ? x + n : NULL;
}

/* The kernels for this CPU, or NULL when none applies or cpu_fast_force_portable is on. */
const cpu_fast_ops *cpu_fast(void);
/* Turns every fast path off (tests compare against the portable kernels). */
void cpu_fast_force_portable(bool on);
bool cpu_fast_portable_forced(void);

/* One element into a top-k buffer (val, idx sorted best first, *cnt of k filled): it enters
 * only past every value at least as good (ties keep index order). false on a NaN. */
static inline __attribute__((always_inline)) bool
cpu_topk_insert(float v, int64_t e, float *val, int64_t *idx, int64_t *cnt, int64_t k, bool desc)
{
    if (v != v) return false;
    if (*cnt == k && !(desc ? v > val[k - 1] : v < val[k - 1])) return true;
    int64_t j = *cnt < k ? (*cnt)++ : k - 1;
    while (j > 0 && (desc ? v > val[j - 1] : v < val[j - 1])) {
        val[j] = val[j - 1];
        idx[j] = idx[j - 1];
        j--;
    }
    val[j] = v;
    idx[j] = e;
    return true;
}

/* AVX2 kernels the AVX-512 table shares. */
int64_t cpu_find_past_f32_avx2(const float *x, int64_t from, int64_t n, float t, bool desc);
bool cpu_topk_row_f32_avx2(const float *x, int64_t n, int64_t k, bool desc, float *val,
                           int64_t *idx);
/* The whole sum: 256-bit loads stream from memory faster than 512-bit ones on Zen 4
 * (bench/RESULTS.md, evidence section), so both tables use this one and give the same bits. On
 * Intel's AVX-512 cores the two forms were not compared (only checked for values). */
double cpu_sum_f32_avx2(const float *x, int64_t n);
void cpu_fft_pass2_avx2(double *re, double *im, const double *twr, const double *twi, int64_t h,
                        int64_t t0, int64_t t1);
void cpu_fft_pass4_avx2(double *re, double *im, const double *twr, const double *twi, int64_t h,
                        int64_t t0, int64_t t1);
void cpu_col_top1_avx2(const float *x, int64_t n, int64_t stride, int64_t w, float *v, int64_t *ix,
                       bool desc);
void cpu_mask_fill32_avx2(uint32_t *o, const uint32_t *x, const uint8_t *m, uint32_t f, int64_t n);
void cpu_threshold_bwd32_avx2(float *o, const float *g, const float *y, float t, int64_t n);
void cpu_softmax_bw_row_avx2(const float *y, const float *g, float *o, int64_t n, bool lg);

extern const cpu_fast_ops cpu_fast_avx512_ops;
extern const cpu_fast_ops cpu_fast_avx2_ops;

#endif
