/* The machine's own limits: FMA peak (f32 GFLOP/s, AVX-512 when the CPU has it, else AVX2) on 1
 * and 2 threads, and STREAM-like copy and triad bandwidth (GB/s, 2 threads, bytes read + written
 * as STREAM counts them). Lines: "peak_fma_1t  GFLOPS", "peak_fma_2t ...", "bw_copy GBs",
 * "bw_triad GBs". */
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>

#include "bench_common.h"

#define FMA_ITERS 200000000LL

__attribute__((target("avx512f"))) static double fma_loop512(int64_t iters)
{
    /* different starting values: equal ones let the compiler fold the chains (see below) */
    __m512 a0 = _mm512_set1_ps(1.00f), a1 = _mm512_set1_ps(1.01f), a2 = _mm512_set1_ps(1.02f),
           a3 = _mm512_set1_ps(1.03f), a4 = _mm512_set1_ps(1.04f), a5 = _mm512_set1_ps(1.05f),
           a6 = _mm512_set1_ps(1.06f), a7 = _mm512_set1_ps(1.07f), a8 = _mm512_set1_ps(1.08f),
           a9 = _mm512_set1_ps(1.09f), a10 = _mm512_set1_ps(1.10f), a11 = _mm512_set1_ps(1.11f);
    __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (int64_t i = 0; i < iters; i++) {
        a0 = _mm512_fmadd_ps(a0, m, c);
        a1 = _mm512_fmadd_ps(a1, m, c);
        a2 = _mm512_fmadd_ps(a2, m, c);
        a3 = _mm512_fmadd_ps(a3, m, c);
        a4 = _mm512_fmadd_ps(a4, m, c);
        a5 = _mm512_fmadd_ps(a5, m, c);
        a6 = _mm512_fmadd_ps(a6, m, c);
        a7 = _mm512_fmadd_ps(a7, m, c);
        a8 = _mm512_fmadd_ps(a8, m, c);
        a9 = _mm512_fmadd_ps(a9, m, c);
        a10 = _mm512_fmadd_ps(a10, m, c);
        a11 = _mm512_fmadd_ps(a11, m, c);
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                             _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
    return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) static double fma_loop256(int64_t iters)
{
    /* Twelve named accumulators with different starting values: an array indexed in a loop can
     * stay in memory, and equal starting values let the compiler fold the twelve chains into
     * one (both seen: 46 and 268 "GFLOP/s" where the machine does about 180). */
    __m256 a0 = _mm256_set1_ps(1.00f), a1 = _mm256_set1_ps(1.01f), a2 = _mm256_set1_ps(1.02f),
           a3 = _mm256_set1_ps(1.03f), a4 = _mm256_set1_ps(1.04f), a5 = _mm256_set1_ps(1.05f),
           a6 = _mm256_set1_ps(1.06f), a7 = _mm256_set1_ps(1.07f), a8 = _mm256_set1_ps(1.08f),
           a9 = _mm256_set1_ps(1.09f), a10 = _mm256_set1_ps(1.10f), a11 = _mm256_set1_ps(1.11f);
    __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (int64_t i = 0; i < iters; i++) {
        a0 = _mm256_fmadd_ps(a0, m, c);
        a1 = _mm256_fmadd_ps(a1, m, c);
        a2 = _mm256_fmadd_ps(a2, m, c);
        a3 = _mm256_fmadd_ps(a3, m, c);
        a4 = _mm256_fmadd_ps(a4, m, c);
        a5 = _mm256_fmadd_ps(a5, m, c);
        a6 = _mm256_fmadd_ps(a6, m, c);
        a7 = _mm256_fmadd_ps(a7, m, c);
        a8 = _mm256_fmadd_ps(a8, m, c);
        a9 = _mm256_fmadd_ps(a9, m, c);
        a10 = _mm256_fmadd_ps(a10, m, c);
        a11 = _mm256_fmadd_ps(a11, m, c);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0];
}

static int use512;
static int64_t fma_iters;
static volatile double sink;

static void *fma_thread(void *arg)
{
    sink = use512 ? fma_loop512(fma_iters) : fma_loop256(fma_iters);
    return NULL;
}

/* GFLOP/s of nthreads running the loop at once. */
static double fma_peak(int nthreads)
{
    int lanes = use512 ? 16 : 8;
    pthread_t th[8];
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = bench_now();
        for (int i = 0; i < nthreads; i++) pthread_create(&th[i], NULL, fma_thread, NULL);
        for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
        double dt = bench_now() - t0;
        double gf = (double)nthreads * fma_iters * 12 * lanes * 2 / dt / 1e9;
        if (gf > best) best = gf;
    }
    return best;
}

typedef struct bw_job {
    float *a, *b, *c;
    size_t n;
    int triad;
} bw_job;

static void *bw_thread(void *arg)
{
    bw_job *j = arg;
    if (j->triad) {
        for (size_t i = 0; i < j->n; i++) j->a[i] = j->b[i] + 3.0f * j->c[i];
    } else {
        memcpy(j->a, j->b, j->n * sizeof(float));
    }
    return NULL;
}

/* Median GB/s over reps of a 2-thread copy (8 bytes per element moved) or triad (12). */
static double bandwidth(float *a, float *b, float *c, size_t n, int triad)
{
    double t[7];
    for (int rep = 0; rep < 7; rep++) {
        pthread_t th[2];
        bw_job jobs[2];
        double t0 = bench_now();
        for (int k = 0; k < 2; k++) {
            size_t lo = n * k / 2, hi = n * (k + 1) / 2;
            jobs[k] = (bw_job){a + lo, b + lo, c + lo, hi - lo, triad};
            pthread_create(&th[k], NULL, bw_thread, &jobs[k]);
        }
        for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
        t[rep] = bench_now() - t0;
    }
    qsort(t, 7, sizeof *t, bench_cmp);
    return (double)n * sizeof(float) * (triad ? 3 : 2) / t[3] / 1e9;
}

int main(void)
{
    __builtin_cpu_init();
    use512 = __builtin_cpu_supports("avx512f");
    fma_iters = FMA_ITERS / (use512 ? 2 : 1) / 10;
    fma_peak(1); /* warm-up: clocks */
    printf("isa\t%s\n", use512 ? "avx512" : "avx2");
    printf("peak_fma_1t\t%.1f\n", fma_peak(1));
    printf("peak_fma_2t\t%.1f\n", fma_peak(2));
    size_t n = (size_t)64 << 20; /* 256 MB per array */
    float *a = aligned_alloc(64, n * 4), *b = aligned_alloc(64, n * 4),
          *c = aligned_alloc(64, n * 4);
    for (size_t i = 0; i < n; i++) a[i] = 0, b[i] = 1, c[i] = 2;
    printf("bw_copy\t%.2f\n", bandwidth(a, b, c, n, 0));
    printf("bw_triad\t%.2f\n", bandwidth(a, b, c, n, 1));
    free(a);
    free(b);
    free(c);
    return 0;
}
