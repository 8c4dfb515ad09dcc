/* Checks every CPU GEMM path (portable, AVX2, AVX-512 micro-kernels; packed and unpacked;
 * all transposes; alpha/beta; leading dims; edge sizes around the blocks) against a naive f64
 * reference (tolerance from K and the magnitudes, since the vectorised sums round in their
 * own order), that the result does not depend on the thread count, that matmul_bias_act's
 * epilogue gives the unfused sequence's bits on each path, and that operands packed by a
 * callback (cpu_gemm_src) give the bits of the same values read from memory. */
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

static int max_threads = 2; /* the suites' thread counts: 1 and 2 (1 only: EMBER_TEST_ONE_THREAD) */

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
        /* several KC blocks for every kernel set (KC <= 1024), row blocks shared between the
         * threads with a cut last panel, a product too short for a row block per thread (the
         * threads split the columns), and more columns than one NC block; more rows than one
         * MC block (252 with AVX-512 on a 2 MiB L2) with several KC blocks */
        {20, 37, 1100},
        {260, 13, 1100},
        {175, 29, 530},
        {5, 300, 200},
        {8, 4100, 30},
        {3, 3300, 50},
        /* enough rows for several MC blocks: on 2 threads the row tasks shrink toward the end
         * of each region (plan_rows), with a cut last panel and two KC blocks */
        {1210, 45, 530},
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

static int default_threads; /* em_get_num_threads() at start: the machine's cores by default */

/* The same product with 1, 2, 3 and all the cores' threads must be bitwise identical (packed and
 * unpacked; on several threads the KC blocks of 197 x 150 x 777, 1210 x 45 x 530 and 600 x 70 x
 * 2000 run in one region, the last with B's two ring slots reused several times). */

static void thread_invariance(const char *kern)
{
    if (!cpu_gemm_use(kern)) return;
    static const gcase cases[] = {
        {150, 170, 300}, {1, 4000, 80},   {3000, 2, 60},  {40, 2000, 9},  {3000, 1, 70},
        {1, 2500, 333},  {197, 150, 777}, {5, 300, 200},  {13, 4200, 40}, {64, 288, 3000},
        {9, 33, 2600},   {1210, 45, 530}, {600, 70, 2000}};
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
            double *d0 = malloc(sizeof(double) * (size_t)nc);
            for (int64_t i = 0; i < nc; i++) c1[i] = (float)(d1[i] = d0[i] = h_uniform());
            em_set_num_threads(1);
            cpu_sgemm(ta, tb, g.M, g.N, g.K, 1.5f, a, lda, b, ldb, 0.5f, c1, g.N);
            cpu_dgemm(ta, tb, g.M, g.N, g.K, 1.5, da, lda, db, ldb, 0.5, d1, g.N);
            /* 3 threads on 2 cores: other interleavings; all cores where there are more */
            int counts[] = {2, 3, default_threads}, ncount = default_threads > 3 ? 3 : 2;
            for (int ci = 0; ci < ncount; ci++) {
                int th = counts[ci];
                for (int64_t i = 0; i < nc; i++) c2[i] = (float)(d2[i] = d0[i]);
                em_set_num_threads(th);
                cpu_sgemm(ta, tb, g.M, g.N, g.K, 1.5f, a, lda, b, ldb, 0.5f, c2, g.N);
                cpu_dgemm(ta, tb, g.M, g.N, g.K, 1.5, da, lda, db, ldb, 0.5, d2, g.N);
                CHECK(!memcmp(c1, c2, sizeof(float) * (size_t)nc) &&
                          !memcmp(d1, d2, sizeof(double) * (size_t)nc),
                      "%s: 1 and %d threads differ for %lldx%lldx%lld ta=%d tb=%d", kern, th,
                      (long long)g.M, (long long)g.N, (long long)g.K, ta, tb);
            }
            free(a), free(b), free(c1), free(c2), free(da), free(db), free(d0), free(d1), free(d2);
        }
    }
}

/* ---- matmul_bias_act epilogue -----------------------------------------------------------------
 * The fused op against the unfused sequence em_matmul, em_add, activation: bit for bit in f32
 * and f64 (the epilogue adds the bias and runs the unary kernels' own code); for f16/bf16
 * against the f32 sequence on the inputs converted to f32, rounded once at the end (what the
 * fused op computes). Shapes through every GEMM path: unpacked, packed with several KC and NC
 * blocks, the long-K path, GEMV rows and columns, K = 0. */
static em_tensor *unfused(const em_tensor *a, const em_tensor *b, const em_tensor *bias, em_act act)
{
    em_tensor *y = em_matmul(a, b);
    if (bias) y = em_add(y, bias);
    switch (act) {
    case EM_ACT_RELU: return em_relu(y);
    case EM_ACT_GELU: return em_gelu(y);
    case EM_ACT_GELU_TANH: return em_gelu_tanh(y);
    case EM_ACT_SILU: return em_silu(y);
    default: return y;
    }
}

static void epilogue_suite(const char *kern)
{
    if (!cpu_gemm_use(kern)) return;
    static const gcase cases[] = {{7, 9, 5},      {65, 70, 130}, {20, 37, 1100}, {5, 4100, 30},
                                  {37, 45, 2100}, {1, 300, 37},  {150, 1, 61},   {6, 7, 0}};
    static const em_dtype dts[] = {EM_F32, EM_F64, EM_F16, EM_BF16};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (size_t d = 0; d < 4; d++)
            for (int act = EM_ACT_NONE; act <= EM_ACT_SILU; act++)
                for (int wb = 0; wb < 2; wb++) {
                    em_scope_begin();
                    gcase g = cases[c];
                    em_dtype dt = dts[d];
                    /* b as a transposed view (the Linear layout) for odd cases */
                    h_layout lb = c % 2 ? H_TRANSPOSED : H_CONTIG;
                    em_tensor *a = h_rand(EM_SHAPE(g.M, g.K), dt, H_CONTIG, -1, 1, NULL);
                    em_tensor *b = h_rand(EM_SHAPE(g.K, g.N), dt, lb, -1, 1, NULL);
                    em_tensor *bias = wb ? h_rand(EM_SHAPE(g.N), dt, H_CONTIG, -1, 1, NULL) : NULL;
                    em_tensor *got = em_matmul_bias_act(a, b, bias, (em_act)act), *want;
                    if (dt == EM_F32 || dt == EM_F64)
                        want = unfused(a, b, bias, (em_act)act);
                    else
                        want = em_cast(unfused(em_cast(a, EM_F32), em_cast(b, EM_F32),
                                               bias ? em_cast(bias, EM_F32) : NULL, (em_act)act),
                                       dt);
                    CHECK(got && want && h_same_bytes(got, want),
                          "%s: matmul_bias_act act %d bias %d %s %lldx%lldx%lld differs from the "
                          "unfused sequence",
                          kern, act, wb, em_dtype_name(dt), (long long)g.M, (long long)g.N,
                          (long long)g.K);
                    em_scope_end();
                }
}

/* ---- em_matmul's operands packed from the tensors ---------------------------------------------
 * f16 / bf16 operands and f32 / f64 ones without a unit stride are packed straight from the
 * tensor, converted as they are packed, for products the GEMM packs anyway: the result must have
 * the bits of the product of contiguous f32 (f64) copies, rounded once to f16 / bf16. Every
 * layout of the harness (transposed, every other element, negative strides) on each side (with
 * two or three layouts on the other), one batched product with a broadcast B, and a small product
 * (the unpacked loops, on copies). */
static void operand_suite(const char *kern)
{
    if (!cpu_gemm_use(kern)) return;
    static const gcase cases[] = {
        {65, 70, 130}, {20, 37, 1100}, {150, 40, 61}, {300, 9, 33}, {5, 6, 7}};
    static const em_dtype dts[] = {EM_F32, EM_F64, EM_F16, EM_BF16};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (size_t d = 0; d < 4; d++)
            for (int la = 0; la < H_LAYOUT_COUNT; la++)
                for (int lb = la; lb < H_LAYOUT_COUNT; lb += 2) { /* each layout on each side */
                    em_scope_begin();
                    gcase g = cases[c];
                    em_dtype dt = dts[d], wt = dt == EM_F64 ? EM_F64 : EM_F32;
                    bool batched = c == 0 && la == lb;
                    em_tensor *a =
                        batched ? h_rand(EM_SHAPE(3, g.M, g.K), dt, (h_layout)la, -1, 1, NULL)
                                : h_rand(EM_SHAPE(g.M, g.K), dt, (h_layout)la, -1, 1, NULL);
                    em_tensor *b = h_rand(EM_SHAPE(g.K, g.N), dt, (h_layout)lb, -1, 1, NULL);
                    em_tensor *got = em_matmul(a, b);
                    em_tensor *want =
                        em_matmul(em_contiguous(em_cast(a, wt)), em_contiguous(em_cast(b, wt)));
                    if (dt != wt) want = em_cast(want, dt);
                    CHECK(got && want && h_same_bytes(got, want),
                          "%s: matmul %s %lldx%lldx%lld layouts %d / %d%s differs from the "
                          "product of contiguous copies",
                          kern, em_dtype_name(dt), (long long)g.M, (long long)g.N, (long long)g.K,
                          la, lb, batched ? " (batched)" : "");
                    em_scope_end();
                }
}

/* ---- operands packed by a callback ------------------------------------------------------------
 * The callback packs from an ordinary matrix, X [rows, K] row-major (op(A), or op(B)^T), so the
 * product must have the bits of cpu_sgemm / cpu_dgemm on the same matrices (packed path:
 * products past the unpacked and vector sizes), on 1 and 2 threads. */
typedef struct mat_src {
    const void *x;
    int64_t ld;
    bool dbl;
} mat_src;

static void pack_mat(const void *vc, int64_t k0, int64_t kc, int64_t i0, int n, int w, void *dst)
{
    const mat_src *m = vc;
    for (int64_t k = 0; k < kc; k++)
        for (int c = 0; c < w; c++) {
            if (m->dbl)
                ((double *)dst)[k * w + c] =
                    c < n ? ((const double *)m->x)[(i0 + c) * m->ld + k0 + k] : 0;
            else
                ((float *)dst)[k * w + c] =
                    c < n ? ((const float *)m->x)[(i0 + c) * m->ld + k0 + k] : 0;
        }
}

static void src_suite(const char *kern)
{
    if (!cpu_gemm_use(kern)) return;
    static const gcase cases[] = {{40, 50, 60},  {7, 300, 2000}, {64, 288, 3000},
                                  {9, 33, 2600}, {130, 70, 300}, {2, 100, 400}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gcase g = cases[c];
        /* A [M, K] and B^T [N, K], row-major */
        float *a = malloc(sizeof(float) * (size_t)(g.M * g.K));
        float *bt = malloc(sizeof(float) * (size_t)(g.N * g.K));
        double *da = malloc(sizeof(double) * (size_t)(g.M * g.K));
        double *dbt = malloc(sizeof(double) * (size_t)(g.N * g.K));
        for (int64_t i = 0; i < g.M * g.K; i++) a[i] = (float)(da[i] = 2 * h_uniform() - 1);
        for (int64_t i = 0; i < g.N * g.K; i++) bt[i] = (float)(dbt[i] = 2 * h_uniform() - 1);
        size_t nc = (size_t)(g.M * g.N);
        float *want = malloc(sizeof(float) * nc), *got = malloc(sizeof(float) * nc);
        double *dwant = malloc(sizeof(double) * nc), *dgot = malloc(sizeof(double) * nc);
        mat_src sa = {a, g.K, false}, sb = {bt, g.K, false}, dsa = {da, g.K, true},
                dsb = {dbt, g.K, true};
        cpu_gemm_src pa = {pack_mat, &sa}, pb = {pack_mat, &sb}, dpa = {pack_mat, &dsa},
                     dpb = {pack_mat, &dsb};
        for (int t = 1; t <= max_threads; t++) {
            em_set_num_threads(t);
            cpu_sgemm(false, true, g.M, g.N, g.K, 1.0f, a, g.K, bt, g.K, 0.0f, want, g.N);
            cpu_dgemm(false, true, g.M, g.N, g.K, 1.0, da, g.K, dbt, g.K, 0.0, dwant, g.N);
            for (int side = 0; side < 3; side++) { /* A, B, both by callback */
                bool ok =
                    cpu_sgemm_src(false, true, g.M, g.N, g.K, 1.0f, a, g.K, side != 1 ? &pa : NULL,
                                  bt, g.K, side != 0 ? &pb : NULL, 0.0f, got, g.N, NULL);
                bool dok =
                    cpu_dgemm_src(false, true, g.M, g.N, g.K, 1.0, da, g.K, side != 1 ? &dpa : NULL,
                                  dbt, g.K, side != 0 ? &dpb : NULL, 0.0, dgot, g.N, NULL);
                CHECK(ok && dok && !memcmp(got, want, sizeof(float) * nc) &&
                          !memcmp(dgot, dwant, sizeof(double) * nc),
                      "%s: callback-packed side %d differs from memory for %lldx%lldx%lld on %d "
                      "threads",
                      kern, side, (long long)g.M, (long long)g.N, (long long)g.K, t);
            }
        }
        free(a), free(bt), free(da), free(dbt), free(want), free(got), free(dwant), free(dgot);
    }
}

#if defined(__x86_64__) || defined(__i386__)
/* The ISA packers (cpu_spack_fn, cpu_spack_bt_fn; the x86 sets have them) are plain copies:
 * byte for byte what the driver's C loops write, for every k tail, and nothing past the panel. */
static void packer_suite(const char *kern, const cpu_gemm_kernels *k)
{
    if (!cpu_gemm_use(kern)) return;
    cpu_gemm_use(NULL);
    static const int64_t kcs[] = {1, 7, 15, 16, 17, 31, 32, 33, 100, 256, 513};
    for (int side = 0; side < 2; side++) {
        /* side 0: A panel of MR rows (dst[k * MR + r] = A[r * ld + k]); 1: B^T panel of NR */
        if (!(side ? (void *)k->s_pack_bt : (void *)k->s_pack_a)) continue;
        int w = side ? k->s_nr : k->s_mr;
        for (size_t t = 0; t < sizeof kcs / sizeof kcs[0]; t++) {
            int64_t kc = kcs[t], ld = kc + 5, guard = 64;
            float *src = malloc(sizeof(float) * (size_t)(w * ld));
            float *dst = malloc(sizeof(float) * (size_t)(kc * w + guard));
            for (int64_t i = 0; i < w * ld; i++) src[i] = (float)i * 0.5f - 7.0f;
            for (int64_t i = 0; i < kc * w + guard; i++) dst[i] = -1234.5f;
            if (side)
                k->s_pack_bt(kc, src, ld, dst);
            else
                k->s_pack_a(kc, src, ld, dst);
            int64_t bad = 0;
            for (int64_t kk = 0; kk < kc; kk++)
                for (int c = 0; c < w; c++) bad += dst[kk * w + c] != src[c * ld + kk];
            for (int64_t i = kc * w; i < kc * w + guard; i++) bad += dst[i] != -1234.5f;
            CHECK(bad == 0,
                  "%s %s packer, kc %lld: %lld values differ or were written past the "
                  "panel",
                  kern, side ? "B^T" : "A", (long long)kc, (long long)bad);
            free(src);
            free(dst);
        }
    }
}
#endif

int main(void)
{
    h_init();
    int threads = em_get_num_threads();
    default_threads = threads;
    static const char *const sets[] = {"portable", "avx2", "avx512", "neon"};
    /* For the Arm build under qemu-user (scripts/cross-arm64.sh): EMBER_TEST_GEMM_SETS=neon (a
     * comma-separated list) runs those sets only; EMBER_TEST_ONE_THREAD=1 keeps every product on
     * one thread (Debian 12's qemu-user hangs in the guest's pthread_create) */
    const char *only = getenv("EMBER_TEST_GEMM_SETS");
    if (getenv("EMBER_TEST_ONE_THREAD")) max_threads = 1;
    for (int s = 0; s < 4; s++) {
        if (only && !strstr(only, sets[s])) continue;
        for (int t = 1; t <= max_threads; t++) { /* the whole suite on 1, then 2 threads */
            em_set_num_threads(t);
            kernel_suite(sets[s]);
            epilogue_suite(sets[s]);
        }
        operand_suite(sets[s]); /* on max_threads */
        if (max_threads > 1)
            thread_invariance(sets[s]);
        else
            printf("gemm: %s thread invariance skipped (one thread)\n", sets[s]);
        src_suite(sets[s]);
    }
#if defined(__x86_64__) || defined(__i386__)
    packer_suite("avx2", &cpu_gemm_kernels_avx2);
    packer_suite("avx512", &cpu_gemm_kernels_avx512);
#endif
    cpu_gemm_use(NULL);
    em_set_num_threads(threads);
    return h_finish();
}
