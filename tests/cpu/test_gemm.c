/* Checks every CPU GEMM path (portable, AVX2, AVX-512 micro-kernels; packed and unpacked;
 * all transposes; alpha/beta; leading dims; edge sizes around the blocks) against a naive f64
 * reference (tolerance from K and the magnitudes, since the vectorised sums round in their
 * own order), and that the result does not depend on the thread count. */
#include <float.h>
#include <string.h>

#include "backend/cpu/cpu_gemm.h"
#include "harness.h"

#define PAD      3     /* extra columns in every leading dimension */
#define SENTINEL 777.0 /* value of C's padding, which must survive */

typedef struct gcase {
    int64_t M, N, K;
} gcase;

/* Random values in [-1, 1) in a rows x cols matrix with leading dimension ld. */
static double *rand_mat(int64_t rows, int64_t ld)
{
    double *m = malloc(sizeof(double) * (size_t)(rows * ld + 1));
    for (int64_t i = 0; i < rows * ld; i++) m[i] = 2 * h_uniform() - 1;
    return m;
}

/* Runs one product in f32 and f64 and compares with the f64 reference. */
static void check_case(const char *kern, bool ta, bool tb, gcase g, double alpha, double beta,
                       bool nan_c)
{
    int64_t M = g.M, N = g.N, K = g.K;
    int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    int64_t lda = ac + PAD, ldb = bc + PAD, ldc = N + PAD;
    double *A = rand_mat(ar, lda), *B = rand_mat(br, ldb), *C0 = rand_mat(M, ldc);
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = N; j < ldc; j++) C0[i * ldc + j] = SENTINEL;
        if (nan_c)
            for (int64_t j = 0; j < N; j++) C0[i * ldc + j] = NAN;
    }
    /* values rounded to f32 so both precisions start from the same inputs */
    for (int64_t i = 0; i < ar * lda; i++) A[i] = (float)A[i];
    for (int64_t i = 0; i < br * ldb; i++) B[i] = (float)B[i];
    for (int64_t i = 0; i < M * ldc; i++) C0[i] = (float)C0[i];
    size_t na = (size_t)(ar * lda), nb = (size_t)(br * ldb), nc = (size_t)(M * ldc);
    float *fa = malloc(4 * na + 4), *fb = malloc(4 * nb + 4), *fc = malloc(4 * nc + 4);
    double *dc = malloc(8 * nc + 8);
    for (size_t i = 0; i < na; i++) fa[i] = (float)A[i];
    for (size_t i = 0; i < nb; i++) fb[i] = (float)B[i];
    for (size_t i = 0; i < nc; i++) fc[i] = (float)C0[i], dc[i] = C0[i];
    cpu_sgemm(ta, tb, M, N, K, (float)alpha, fa, lda, fb, ldb, (float)beta, fc, ldc);
    cpu_dgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, dc, ldc);
    int bad_f = 0, bad_d = 0;
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < ldc; j++) {
            double ref, mag = 0;
            if (j >= N) {
                ref = SENTINEL;
            } else {
                double s = 0;
                for (int64_t k = 0; k < K; k++) {
                    double a = ta ? A[k * lda + i] : A[i * lda + k];
                    double b = tb ? B[j * ldb + k] : B[k * ldb + j];
                    s += a * b;
                    mag += fabs(a * b);
                }
                ref = alpha * s + (beta == 0 ? 0 : beta * C0[i * ldc + j]);
                mag = fabs(alpha) * mag + (beta == 0 ? 0 : fabs(beta * C0[i * ldc + j]));
            }
            double tf = (double)(K + 4) * FLT_EPSILON * mag + 1e-30;
            double td = (double)(K + 4) * DBL_EPSILON * mag + 1e-300;
            double gf = fc[i * ldc + j], gd = dc[i * ldc + j];
            if (!(fabs(gf - ref) <= tf) && bad_f++ < 3)
                CHECK(
                    false,
                    "%s sgemm ta=%d tb=%d %lldx%lldx%lld a=%g b=%g: C[%lld,%lld] = %.9g, want %.9g",
                    kern, ta, tb, (long long)M, (long long)N, (long long)K, alpha, beta,
                    (long long)i, (long long)j, gf, ref);
            if (!(fabs(gd - ref) <= td) && bad_d++ < 3)
                CHECK(false,
                      "%s dgemm ta=%d tb=%d %lldx%lldx%lld a=%g b=%g: C[%lld,%lld] = %.17g, want "
                      "%.17g",
                      kern, ta, tb, (long long)M, (long long)N, (long long)K, alpha, beta,
                      (long long)i, (long long)j, gd, ref);
        }
    }
    CHECK(bad_f == 0 && bad_d == 0, "%s ta=%d tb=%d %lldx%lldx%lld alpha=%g beta=%g nan_c=%d", kern,
          ta, tb, (long long)M, (long long)N, (long long)K, alpha, beta, nan_c);
    free(A), free(B), free(C0), free(fa), free(fb), free(fc), free(dc);
}

static void kernel_suite(const char *kern)
{
    if (!cpu_gemm_use(kern)) {
        printf("gemm: kernel set %s not supported on this CPU; skipped\n", kern);
        return;
    }
    CHECK(!strcmp(cpu_gemm_kernel_name(), kern), "kernel %s selected", kern);
    /* sizes: tiny (unpacked), vector-shaped, odd sizes across MR/NR/MC and KC = 256 */
    static const gcase cases[] = {
        {1, 1, 1},
        {3, 7, 5},
        {1, 65, 40},
        {70, 1, 33},
        {2, 130, 9},
        {17, 33, 65},
        {13, 35, 257},
        {65, 130, 31},
        {37, 70, 300},
        {250, 20, 130},
        {7, 250, 260},
        /* several KC blocks for every kernel set (KC <= 512), row blocks shared between the
         * threads with a cut last panel, a product too short for a row block per thread (the
         * threads split the columns), and more columns than one NC block */
        {20, 37, 1100},
        {175, 29, 530},
        {5, 300, 200},
        {8, 4100, 30},
        {3, 3300, 50},
        /* long reductions into a small C (K >= 4 KC: one task per column share runs every KC
         * block), with cut edge tiles */
        {37, 45, 2100},
        {9, 32, 2500},
        /* GEMV shapes: K and the output length off the vector widths, several blocks */
        {1, 1, 300},
        {1, 1037, 45},
        {1, 300, 37},
        {150, 1, 261},
        {5, 1, 3},
        {1, 7, 1},
    };
    static const double ab[][2] = {{1, 0}, {2.5, 0}, {1, 1}, {-0.5, 0.75}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int t = 0; t < 4; t++)
            for (int s = 0; s < 4; s++)
                check_case(kern, t & 1, t >> 1, cases[c], ab[s][0], ab[s][1],
                           ab[s][1] == 0 && (c + (size_t)t) % 2 == 0);
    /* degenerate sizes: K = 0 scales C by beta, M or N = 0 touches nothing */
    check_case(kern, false, false, (gcase){5, 6, 0}, 1, 0, true);
    check_case(kern, true, true, (gcase){5, 6, 0}, 2, 0.5, false);
    check_case(kern, false, true, (gcase){0, 6, 4}, 1, 0, false);
    check_case(kern, true, false, (gcase){5, 0, 4}, 1, 1, false);
    /* alpha = 0 does not read A or B */
    check_case(kern, false, false, (gcase){9, 40, 20}, 0, 0.5, false);
}

/* The same product with 1 and 2 threads must be bitwise identical (packed and unpacked). */
static void thread_invariance(const char *kern)
{
    if (!cpu_gemm_use(kern)) return;
    static const gcase cases[] = {{150, 170, 300}, {1, 4000, 80},   {3000, 2, 60},   {40, 2000, 9},
                                  {3000, 1, 70},   {1, 2500, 333},  {197, 150, 777}, {5, 300, 200},
                                  {13, 4200, 40},  {64, 288, 3000}, {9, 33, 2600}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gcase g = cases[c];
        for (int t = 0; t < 4; t++) {
            bool ta = t & 1, tb = t >> 1;
            int64_t lda = (ta ? g.M : g.K) + 1, ldb = (tb ? g.K : g.N) + 1;
            int64_t na = (ta ? g.K : g.M) * lda, nb = (tb ? g.N : g.K) * ldb, nc = g.M * g.N;
            float *a = malloc(sizeof(float) * (size_t)na), *b = malloc(sizeof(float) * (size_t)nb);
            float *c1 = malloc(sizeof(float) * (size_t)nc),
                  *c2 = malloc(sizeof(float) * (size_t)nc);
            double *da = malloc(sizeof(double) * (size_t)na),
                   *db = malloc(sizeof(double) * (size_t)nb);
            double *d1 = malloc(sizeof(double) * (size_t)nc),
                   *d2 = malloc(sizeof(double) * (size_t)nc);
            for (int64_t i = 0; i < na; i++) a[i] = (float)(da[i] = 2 * h_uniform() - 1);
            for (int64_t i = 0; i < nb; i++) b[i] = (float)(db[i] = 2 * h_uniform() - 1);
            for (int64_t i = 0; i < nc; i++) c1[i] = c2[i] = (float)(d1[i] = d2[i] = h_uniform());
            em_set_num_threads(1);
            cpu_sgemm(ta, tb, g.M, g.N, g.K, 1.5f, a, lda, b, ldb, 0.5f, c1, g.N);
            cpu_dgemm(ta, tb, g.M, g.N, g.K, 1.5, da, lda, db, ldb, 0.5, d1, g.N);
            em_set_num_threads(2);
            cpu_sgemm(ta, tb, g.M, g.N, g.K, 1.5f, a, lda, b, ldb, 0.5f, c2, g.N);
            cpu_dgemm(ta, tb, g.M, g.N, g.K, 1.5, da, lda, db, ldb, 0.5, d2, g.N);
            CHECK(!memcmp(c1, c2, sizeof(float) * (size_t)nc) &&
                      !memcmp(d1, d2, sizeof(double) * (size_t)nc),
                  "%s: 1 and 2 threads differ for %lldx%lldx%lld ta=%d tb=%d", kern, (long long)g.M,
                  (long long)g.N, (long long)g.K, ta, tb);
            free(a), free(b), free(c1), free(c2), free(da), free(db), free(d1), free(d2);
        }
    }
}

int main(void)
{
    h_init();
    int threads = em_get_num_threads();
    static const char *const sets[] = {"portable", "avx2", "avx512"};
    for (int s = 0; s < 3; s++) {
        for (int t = 1; t <= 2; t++) { /* the whole suite on 1 and on 2 threads */
            em_set_num_threads(t);
            kernel_suite(sets[s]);
        }
        thread_invariance(sets[s]);
    }
    cpu_gemm_use(NULL);
    em_set_num_threads(threads);
    return h_finish();
}
