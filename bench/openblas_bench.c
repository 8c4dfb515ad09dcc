/* OpenBLAS peer: cblas_sgemm on square matrices and cblas_sgemv both layouts, 2 threads.
 * Prints the kernel OpenBLAS chose ("openblas_core") and its configuration, then one timing
 * line per case (bench_common.h) and one "openblas_check" line: 64 sampled outputs of the
 * case's last call against f64 sums (bench/run.sh lets OpenBLAS pick its kernels for this CPU,
 * which an old OpenBLAS may get wrong on a newer one). */
#include <cblas.h>
#include <stdbool.h>

#include "bench_common.h"

char *openblas_get_corename(void);
char *openblas_get_config(void);
void openblas_set_num_threads(int n);

typedef struct mm {
    int n;
    float *a, *b, *c;
} mm;

static void run_gemm(void *ctx)
{
    mm *m = ctx;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m->n, m->n, m->n, 1.0f, m->a, m->n, m->b,
                m->n, 0.0f, m->c, m->n);
}

static void run_gemv_n(void *ctx)
{
    mm *m = ctx;
    cblas_sgemv(CblasRowMajor, CblasNoTrans, m->n, m->n, 1.0f, m->a, m->n, m->b, 1, 0.0f, m->c, 1);
}

static void run_gemv_t(void *ctx)
{
    mm *m = ctx;
    cblas_sgemv(CblasRowMajor, CblasTrans, m->n, m->n, 1.0f, m->a, m->n, m->b, 1, 0.0f, m->c, 1);
}

/* Largest |c - ref| / sum |a b| over 64 sampled outputs of C = op(A) . B (B: n x cols). */
static double check(const float *a, bool ta, const float *b, int cols, const float *c, int n)
{
    double worst = 0;
    unsigned s = 12345;
    for (int t = 0; t < 64; t++) {
        s = s * 1103515245u + 12345u;
        int i = (int)((s >> 8) % (unsigned)n), j = (int)((s >> 4) % (unsigned)cols);
        double ref = 0, mag = 0;
        for (int k = 0; k < n; k++) {
            double p = (double)(ta ? a[(size_t)k * n + i] : a[(size_t)i * n + k]) *
                       b[(size_t)k * cols + j];
            ref += p;
            mag += p < 0 ? -p : p;
        }
        double e = (c[(size_t)i * cols + j] - ref) / (mag > 0 ? mag : 1);
        if (e < 0) e = -e;
        if (e > worst) worst = e;
    }
    return worst;
}

static void report(const char *name, double err)
{
    printf("openblas_check\t%s %s (worst error %.1e of sum |a b|)\n", name,
           err <= 1e-4 ? "ok" : "WRONG", err);
}

static float *randm(size_t n)
{
    float *p = aligned_alloc(64, ((n * 4 + 63) / 64) * 64);
    for (size_t i = 0; i < n; i++) p[i] = (float)rand() / RAND_MAX - 0.5f;
    return p;
}

int main(int argc, char **argv)
{
    openblas_set_num_threads(2);
    printf("openblas_core\t%s\n", openblas_get_corename());
    printf("openblas_config\t%s\n", openblas_get_config());
    int sizes[] = {256, 1024, 2048, 4096};
    for (int i = 0; i < 4; i++) {
        int n = sizes[i];
        char name[64];
        snprintf(name, sizeof name, "matmul_%d", n);
        if (!bench_selected(argc, argv, name)) continue;
        mm m = {n, randm((size_t)n * n), randm((size_t)n * n), randm((size_t)n * n)};
        bench_run(name, run_gemm, &m, n <= 256 ? 20 : 1,
                  n >= 4096   ? 3
                  : n >= 2048 ? 5
                  : n >= 1024 ? 15
                              : 101,
                  n >= 4096 ? 10 : 3);
        report(name, check(m.a, false, m.b, n, m.c, n));
        free(m.a);
        free(m.b);
        free(m.c);
    }
    mm v = {4096, randm(4096u * 4096u), randm(4096), randm(4096)};
    if (bench_selected(argc, argv, "gemv_n")) {
        bench_run("gemv_n", run_gemv_n, &v, 3, 21, 3);
        report("gemv_n", check(v.a, false, v.b, 1, v.c, v.n));
    }
    if (bench_selected(argc, argv, "gemv_t")) {
        bench_run("gemv_t", run_gemv_t, &v, 3, 21, 3);
        report("gemv_t", check(v.a, true, v.b, 1, v.c, v.n));
    }
    free(v.a);
    free(v.b);
    free(v.c);
    return 0;
}
