/* OpenBLAS peer: cblas_sgemm on square matrices and cblas_sgemv both layouts, 2 threads.
 * Prints the kernel OpenBLAS chose ("openblas_core") and its configuration, then one timing
 * line per case (bench_common.h). */
#include <cblas.h>

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
        bench_run(name, run_gemm, &m, 1, n >= 4096 ? 3 : n >= 2048 ? 5 : 15, n >= 4096 ? 10 : 3);
        free(m.a);
        free(m.b);
        free(m.c);
    }
    mm v = {4096, randm(4096u * 4096u), randm(4096), randm(4096)};
    if (bench_selected(argc, argv, "gemv_n")) bench_run("gemv_n", run_gemv_n, &v, 3, 21, 3);
    if (bench_selected(argc, argv, "gemv_t")) bench_run("gemv_t", run_gemv_t, &v, 3, 21, 3);
    free(v.a);
    free(v.b);
    free(v.c);
    return 0;
}
