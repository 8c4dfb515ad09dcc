/* The vector row kernels (cpu_fast.h: AVX-512 or AVX2, whichever the CPU has: GELU,
 * softmax/log_softmax, layer/RMS norm, whole sum/mean, the small-k top-k skip test, the 32-bit
 * masked_fill, relu's one-pass backward, softmax's backward) and the power-of-two real FFT
 * against the portable paths
 * (cpu_fast_force_portable): odd lengths and tails, NaN and infinities, ties, strided inputs (which
 * take the portable path), and bitwise-identical results for 1, 2 and 3 threads. On CPUs without
 * AVX2 the element-wise sides are both the portable path. The row kernels of every table the CPU
 * can run (AVX2 beside AVX-512) are also called directly against f64, with each store hint. */
#include <string.h>

#include "backend/cpu/cpu_fast.h"
#include "harness.h"
#include "tensor/op.h"

typedef em_tensor *(*op1)(em_tensor *x, em_tensor *w, em_tensor *b);

static em_tensor *f_gelu(em_tensor *x, em_tensor *w, em_tensor *b)
{
    return em_gelu(x);
}
static em_tensor *f_softmax(em_tensor *x, em_tensor *w, em_tensor *b)
{
    return em_softmax(x, -1);
}
static em_tensor *f_log_softmax(em_tensor *x, em_tensor *w, em_tensor *b)
{
    return em_log_softmax(x, -1);
}
static em_tensor *f_layer_norm(em_tensor *x, em_tensor *w, em_tensor *b)
{
    return em_layer_norm(x, 1, w, b, 1e-5);
}
static em_tensor *f_layer_norm_plain(em_tensor *x, em_tensor *w, em_tensor *b)
{
    return em_layer_norm(x, 1, NULL, NULL, 1e-5);
}
static em_tensor *f_rms_norm(em_tensor *x, em_tensor *w, em_tensor *b)
{
    return em_rms_norm(x, 1, w, 1e-6);
}
static em_tensor *f_sum(em_tensor *x, em_tensor *w, em_tensor *b)
{
    return em_sum(x, EM_ALL, false);
}
static em_tensor *f_mean(em_tensor *x, em_tensor *w, em_tensor *b)
{
    return em_mean(x, EM_ALL, false);
}

static void compare(const char *name, op1 f, em_shape s, bool specials, h_layout layout, double tol)
{
    em_scope_begin();
    int64_t n = em_shape_numel(s), last = s.dims[s.rank - 1];
    double *v = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) v[i] = 8 * h_uniform() - 4;
    if (specials && n > 40) {
        v[3] = NAN;          /* a NaN row (softmax: all NaN) */
        v[n - 1] = INFINITY; /* an infinity in the last row */
        v[n - 2] = -INFINITY;
        if (last + 1 < n) v[last + 1] = -30; /* a far tail for GELU/exp */
    }
    em_tensor *x = h_from_values(v, s, EM_F32, layout);
    em_tensor *w = h_rand(EM_SHAPE(last), EM_F32, H_CONTIG, -2, 2, NULL);
    em_tensor *b = h_rand(EM_SHAPE(last), EM_F32, H_CONTIG, -2, 2, NULL);
    cpu_fast_force_portable(true);
    em_tensor *ref = f(x, w, b);
    cpu_fast_force_portable(false);
    CHECK_OK(name);
    double *rv = h_values(ref);
    em_shape os = em_tensor_shape(ref);
    char what[160];
    float *first = NULL;
    int64_t on = em_shape_numel(os);
    for (int th = 1; th <= 3; th++) {
        em_set_num_threads(th);
        em_tensor *y = f(x, w, b);
        CHECK_OK(name);
        snprintf(what, sizeof what, "%s n=%lld last=%lld layout %d threads %d", name, (long long)n,
                 (long long)last, (int)layout, th);
        h_check_tensor(what, y, rv, os, tol, tol);
        float *got = malloc(sizeof(float) * (size_t)(on ? on : 1));
        em_to_data(y, got, EM_F32, on);
        if (!first)
            first = got;
        else {
            CHECK(memcmp(first, got, sizeof(float) * (size_t)on) == 0,
                  "%s: same bits for every thread count", what);
            free(got);
        }
    }
    em_set_num_threads(2);
    free(first);
    free(v);
    free(rv);
    em_scope_end();
}

/* masked_fill of f32 and i32 (the 32-bit bit-copy kernel) against the portable loop: the same
 * bytes, NaN and -0.0 among the values and as the fill, for 1 and 2 threads. */
static void compare_masked_fill(int64_t rows, int64_t n, em_dtype dt, double fill, h_layout layout)
{
    em_scope_begin();
    int64_t cnt = rows * n;
    double *v = malloc(sizeof(double) * (size_t)cnt);
    for (int64_t i = 0; i < cnt; i++)
        v[i] = dt == EM_F32 ? 8 * h_uniform() - 4 : (double)(i % 97) - 40;
    if (dt == EM_F32 && cnt > 2) v[1] = NAN, v[2] = -0.0;
    em_tensor *x = h_from_values(v, EM_SHAPE(rows, n), dt, layout);
    em_tensor *m = em_lt_scalar(h_rand(EM_SHAPE(rows, n), EM_F32, layout, -1, 1, NULL), 0.0);
    cpu_fast_force_portable(true);
    em_tensor *ref = em_masked_fill(x, m, fill);
    cpu_fast_force_portable(false);
    CHECK_OK("masked_fill");
    for (int th = 1; th <= 2; th++) {
        em_set_num_threads(th);
        em_tensor *y = em_masked_fill(x, m, fill);
        CHECK(y && ref && h_same_bytes(y, ref),
              "masked_fill %s %lldx%lld fill %g layout %d threads %d", em_dtype_name(dt),
              (long long)rows, (long long)n, fill, (int)layout, th);
    }
    em_set_num_threads(2);
    free(v);
    em_scope_end();
}

/* softmax_backward (cpu_fast.h softmax_bw_row) against the portable line (f64 throughout):
 * within 2e-6 of the row's scale, y a real softmax or log-softmax output (log: down to -100,
 * where exp flushes), the same bits for 1, 2 and 3 threads; strided rows take the portable
 * line on both sides. */
static void compare_softmax_bw(int64_t rows, int64_t n, bool lg, h_layout layout)
{
    em_scope_begin();
    em_tensor *x = h_rand(EM_SHAPE(rows, n), EM_F32, layout, lg ? -100 : -4, 4, NULL);
    em_tensor *g = h_rand(EM_SHAPE(rows, n), EM_F32, layout, -2, 2, NULL);
    em_tensor *y = lg ? em_log_softmax(x, -1) : em_softmax(x, -1);
    cpu_fast_force_portable(true);
    em_tensor *ref = tn_softmax_backward(y, g, -1, lg);
    cpu_fast_force_portable(false);
    CHECK_OK("softmax_backward");
    double *rv = h_values(ref);
    float *first = NULL;
    char what[96];
    for (int th = 1; th <= 3; th++) {
        em_set_num_threads(th);
        em_tensor *o = tn_softmax_backward(y, g, -1, lg);
        snprintf(what, sizeof what, "softmax_backward%s %lldx%lld layout %d threads %d",
                 lg ? " (log)" : "", (long long)rows, (long long)n, (int)layout, th);
        /* errors scale with the row's sum, at most n * 2 in size */
        h_check_tensor(what, o, rv, EM_SHAPE(rows, n), 2e-6 * (lg ? 2.0 * (double)n : 2.0), 2e-6);
        float *got = malloc(sizeof(float) * (size_t)(rows * n));
        em_to_data(o, got, EM_F32, rows * n);
        if (!first)
            first = got;
        else {
            CHECK(memcmp(first, got, sizeof(float) * (size_t)(rows * n)) == 0,
                  "%s: same bits for every thread count", what);
            free(got);
        }
    }
    em_set_num_threads(2);
    free(first);
    free(rv);
    em_scope_end();
}

/* threshold_backward (relu's backward, cpu_fast.h threshold_bwd32) against the portable loop:
 * the same bytes, with NaN, -0.0 and infinities among g and y, y exactly at t, and the
 * composition it replaces (masked_fill of le), for 1 and 2 threads. */
static void compare_threshold(int64_t rows, int64_t n, double t, h_layout layout)
{
    em_scope_begin();
    int64_t cnt = rows * n;
    double *gv = malloc(sizeof(double) * (size_t)cnt), *yv = malloc(sizeof(double) * (size_t)cnt);
    for (int64_t i = 0; i < cnt; i++) {
        gv[i] = 8 * h_uniform() - 4;
        yv[i] = i % 5 == 0 ? t : 2 * h_uniform() - 1;
    }
    if (cnt > 6) {
        gv[1] = NAN, gv[2] = -0.0, gv[3] = -INFINITY;
        yv[4] = NAN, yv[5] = -0.0, yv[6] = INFINITY;
    }
    em_tensor *g = h_from_values(gv, EM_SHAPE(rows, n), EM_F32, layout);
    em_tensor *y = h_from_values(yv, EM_SHAPE(rows, n), EM_F32, layout);
    cpu_fast_force_portable(true);
    em_tensor *ref = tn_threshold_backward(g, y, t);
    cpu_fast_force_portable(false);
    em_tensor *old = em_masked_fill(g, em_le_scalar(y, t), 0.0);
    CHECK_OK("threshold_backward");
    CHECK(ref && old && h_same_bytes(ref, old),
          "threshold_backward %lldx%lld t %g layout %d: not "
          "the bytes of masked_fill(g, le(y, t), 0)",
          (long long)rows, (long long)n, t, (int)layout);
    for (int th = 1; th <= 2; th++) {
        em_set_num_threads(th);
        em_tensor *o = tn_threshold_backward(g, y, t);
        CHECK(o && ref && h_same_bytes(o, ref),
              "threshold_backward %lldx%lld t %g layout %d "
              "threads %d",
              (long long)rows, (long long)n, t, (int)layout, th);
    }
    em_set_num_threads(2);
    free(gv);
    free(yv);
    em_scope_end();
}

/* top-k of x: [rows, n] along the last dim against the portable selection: the same values and
 * indices exactly (ties keep the lower index, NaN counts as the largest). */
static void compare_topk_at(em_shape shape, int dim, int64_t k, bool largest, int kind,
                            h_layout layout)
{
    em_scope_begin();
    int64_t cnt = em_shape_numel(shape);
    double *v = malloc(sizeof(double) * (size_t)cnt);
    for (int64_t i = 0; i < cnt; i++) {
        double u = h_uniform();
        /* kind 0: distinct reals; 1: a few repeated values (ties); 2: with NaN and infinities;
           3: infinities and zeros of both signs (ties of -0 and +0), no NaN */
        v[i] = kind == 1 ? (double)(int)(u * 5) : 8 * u - 4;
        if (kind == 2 && i % 37 == 5) v[i] = NAN;
        if (kind >= 2 && i % 53 == 7) v[i] = i % 2 ? INFINITY : -INFINITY;
        if (kind == 3 && i % 7 == 3) v[i] = i % 3 ? 0.0 : -0.0;
    }
    em_tensor *x = h_from_values(v, shape, EM_F32, layout);
    em_tensor *rv = NULL, *ri = NULL;
    cpu_fast_force_portable(true);
    em_status st = em_topk(x, k, dim, largest, &rv, &ri);
    cpu_fast_force_portable(false);
    CHECK(st == EM_OK, "topk reference numel=%lld k=%lld", (long long)cnt, (long long)k);
    for (int th = 1; th <= 3; th++) {
        em_set_num_threads(th);
        em_tensor *gv = NULL, *gi = NULL;
        st = em_topk(x, k, dim, largest, &gv, &gi);
        CHECK(st == EM_OK && h_same_bytes(gv, rv) && h_same_bytes(gi, ri),
              "topk rank %d numel=%lld dim %d k=%lld largest=%d kind %d layout %d threads %d: "
              "same values and indices as the portable path",
              shape.rank, (long long)cnt, dim, (long long)k, (int)largest, kind, (int)layout, th);
    }
    em_set_num_threads(2);
    free(v);
    em_scope_end();
}

static void compare_topk(int64_t rows, int64_t n, int64_t k, bool largest, int kind,
                         h_layout layout)
{
    compare_topk_at(EM_SHAPE(rows, n), -1, k, largest, kind, layout);
}

/* rfft of x: [rows, n] (power-of-two n: the half-length complex FFT) against the full-length
 * complex FFT the portable path runs, for f32 and f64, padded and cropped. */
static void compare_rfft(int64_t rows, int64_t len, int64_t n, em_dtype dt, h_layout layout)
{
    em_scope_begin();
    em_tensor *x = h_rand(EM_SHAPE(rows, len), dt, layout, -1, 1, NULL);
    cpu_fast_force_portable(true);
    em_tensor *ref = em_rfft(x, 1, n);
    cpu_fast_force_portable(false);
    CHECK_OK("rfft reference");
    double *rv = h_values(ref);
    em_shape os = em_tensor_shape(ref);
    int64_t on = em_shape_numel(os);
    double big = 0;
    for (int64_t i = 0; i < on; i++) big = fabs(rv[i]) > big ? fabs(rv[i]) : big;
    double tol = (dt == EM_F64 ? 1e-12 : 2e-6) * (big > 1 ? big : 1);
    em_tensor *first = NULL;
    char what[160];
    for (int th = 1; th <= 3; th++) {
        em_set_num_threads(th);
        em_tensor *y = em_rfft(x, 1, n);
        CHECK_OK("rfft");
        snprintf(what, sizeof what, "rfft rows=%lld len=%lld n=%lld %s layout %d threads %d",
                 (long long)rows, (long long)len, (long long)n, em_dtype_name(dt), (int)layout, th);
        h_check_tensor(what, y, rv, os, tol, 0);
        if (!first)
            first = y;
        else
            CHECK(h_same_bytes(first, y), "%s: same bits for every thread count", what);
    }
    em_set_num_threads(2);
    free(rv);
    em_scope_end();
}

/* The vector FFT passes over ragged sub-ranges (the scalar lanes at the ends) against one call
 * over the whole range (every lane vectorised): the same arithmetic up to rounding. */
static void compare_fft_passes(void)
{
    const cpu_fast_ops *f = cpu_fast();
    if (!f || !f->fft_pass2) return;
    enum { M = 256 };
    double twr[M], twi[M], re[2][M], im[2][M];
    for (int64_t h = 1; h < M; h <<= 1)
        for (int64_t k = 0; k < h; k++) {
            twr[h + k] = cos(-3.14159265358979323846 * (double)k / (double)h);
            twi[h + k] = sin(-3.14159265358979323846 * (double)k / (double)h);
        }
    for (int radix = 2; radix <= 4; radix += 2)
        for (int64_t h = 4; h * radix <= M; h *= 2) {
            for (int i = 0; i < M; i++) re[0][i] = re[1][i] = 2 * h_uniform() - 1;
            for (int i = 0; i < M; i++) im[0][i] = im[1][i] = 2 * h_uniform() - 1;
            int64_t total = M / radix, cuts[] = {0, 1, 6, 7, 13, 22, 23, 41, total};
            void (*pass)(double *, double *, const double *, const double *, int64_t, int64_t,
                         int64_t) = radix == 2 ? f->fft_pass2 : f->fft_pass4;
            pass(re[0], im[0], twr, twi, h, 0, total);
            for (int c = 0; c + 1 < (int)(sizeof cuts / sizeof *cuts); c++) {
                int64_t a = cuts[c] < total ? cuts[c] : total;
                int64_t b = cuts[c + 1] < total ? cuts[c + 1] : total;
                if (a < b) pass(re[1], im[1], twr, twi, h, a, b);
            }
            double worst = 0;
            for (int i = 0; i < M; i++) {
                worst = fmax(worst, fabs(re[0][i] - re[1][i]));
                worst = fmax(worst, fabs(im[0][i] - im[1][i]));
            }
            CHECK(worst < 1e-13, "fft pass radix %d h=%lld in ragged pieces: off by %g", radix,
                  (long long)h, worst);
        }
}

#if defined(__x86_64__) || defined(__i386__)
/* Every ISA table this CPU can run (the AVX2 one too where AVX-512 is chosen), kernel by kernel:
 * GELU, softmax, log_softmax and layer norm rows of several lengths at three alignments, against
 * f64, and with each store hint (CPU_FAST_BIG, CPU_FAST_STREAM) the same bytes as without one,
 * nothing written outside the row. */
static double gelu_ref(double v)
{
    return 0.5 * v * (1 + erf(v / sqrt(2.0)));
}

static void row_kernels(const cpu_fast_ops *t)
{
    int64_t lens[] = {1, 7, 16, 33, 1000, 1025, 4099, 5000};
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
        int64_t n = lens[li], cap = n + 64;
        float *x = malloc(sizeof(float) * (size_t)cap), *w = malloc(sizeof(float) * (size_t)n);
        float *b = malloc(sizeof(float) * (size_t)n), *y0 = malloc(sizeof(float) * (size_t)cap);
        float *y = malloc(sizeof(float) * (size_t)cap);
        double *r = malloc(sizeof(double) * (size_t)n);
        for (int64_t i = 0; i < cap; i++) x[i] = (float)(12 * h_uniform() - 6);
        for (int64_t i = 0; i < n; i++)
            w[i] = (float)(h_uniform() + 0.5), b[i] = (float)(h_uniform() - 0.5);
        for (int off = 0; off < 3; off++)
            for (int op = 0; op < 4; op++) {
                const float *xi = x + off;
                double m = -INFINITY, sum = 0, mean = 0, var = 0;
                for (int64_t i = 0; i < n; i++) m = xi[i] > m ? xi[i] : m, mean += xi[i];
                for (int64_t i = 0; i < n; i++) sum += exp((double)xi[i] - m);
                mean /= (double)n;
                for (int64_t i = 0; i < n; i++) var += (xi[i] - mean) * (xi[i] - mean);
                var /= (double)n;
                for (int64_t i = 0; i < n; i++)
                    r[i] = op == 0   ? gelu_ref(xi[i])
                           : op == 1 ? exp((double)xi[i] - m) / sum
                           : op == 2 ? (double)xi[i] - m - log(sum)
                                     : (xi[i] - mean) / sqrt(var + 1e-5) * w[i] + b[i];
                double tol = op == 3 ? 1e-5 : 2e-6;
                for (int hint = 0; hint < 4; hint++) {
                    float *o = hint ? y : y0;
                    for (int64_t i = 0; i < cap; i++) o[i] = -7.0f; /* a guard around the row */
                    switch (op) {
                    case 0: t->gelu(xi, o + off, n, hint); break;
                    case 1: t->softmax_row(xi, o + off, n, false, hint); break;
                    case 2: t->softmax_row(xi, o + off, n, true, hint); break;
                    default: t->norm_row(xi, o + off, w, b, n, 1e-5, false, hint); break;
                    }
                    cpu_fast_stream_fence();
                    if (hint) {
                        CHECK(!memcmp(y0, y, sizeof(float) * (size_t)cap),
                              "%s row kernel %d, n %lld, offset %d: hint %d changed the bytes",
                              t->isa, op, (long long)n, off, hint);
                        continue;
                    }
                    int64_t worst = -1;
                    for (int64_t i = 0; i < cap; i++) {
                        bool in = i >= off && i < off + n;
                        if (in ? !(fabs(o[i] - r[i - off]) <= tol * (1 + fabs(r[i - off])))
                               : o[i] != -7.0f) {
                            worst = i;
                            break;
                        }
                    }
                    CHECK(worst < 0, "%s row kernel %d, n %lld, offset %d: element %lld wrong",
                          t->isa, op, (long long)n, off, (long long)worst);
                }
            }
        free(x), free(w), free(b), free(y0), free(y), free(r);
    }
}

#endif

static void isa_tables(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        row_kernels(&cpu_fast_avx2_ops);
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"))
        row_kernels(&cpu_fast_avx512_ops);
#endif
}

/* The automatic store choice (cpu_store_begin, configuration auto): a large softmax's first
 * call streams, the next ones try streaming and storing through the caches, then one of the two
 * is kept; every call gives the bits a streamed call gives. */
static void store_choice(void)
{
    if (!cpu_fast()) return; /* no vector rows: nothing is timed */
    em_scope_begin();
    em_tensor *x = h_rand(EM_SHAPE(4100, 1025), EM_F32, H_CONTIG, -4, 4, NULL);
    cpu_store_force(1);
    em_tensor *ref = em_softmax(x, -1);
    cpu_store_force(-1);
    CHECK_OK("softmax (store choice)");
    bool automatic = cpu_store_decision(CPU_STORE_SOFTMAX) < 0;
    for (int i = 0; i < 8; i++) {
        em_tensor *y = em_softmax(x, -1);
        CHECK(y && h_same_bytes(y, ref),
              "softmax call %d under the automatic store choice: the "
              "streamed call's bytes",
              i);
    }
    if (automatic)
        CHECK(cpu_store_decision(CPU_STORE_SOFTMAX) >= 0,
              "the store choice is made within 8 large softmax calls");
    em_scope_end();
}

int main(void)
{
    h_init();
    struct {
        const char *name;
        op1 f;
        double tol;
    } ops[] = {
        {"gelu", f_gelu, 2e-6},
        {"softmax", f_softmax, 2e-6},
        {"log_softmax", f_log_softmax, 2e-6},
        {"layer_norm", f_layer_norm, 1e-5},
        {"layer_norm (no affine)", f_layer_norm_plain, 1e-5},
        {"rms_norm", f_rms_norm, 1e-5},
    };
    int64_t lens[] = {1, 7, 15, 16, 17, 31, 33, 100, 1000, 4099};
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++)
        for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
            compare(ops[k].name, ops[k].f, EM_SHAPE(5, lens[i]), true, H_CONTIG, ops[k].tol);
            compare(ops[k].name, ops[k].f, EM_SHAPE(3, lens[i]), false, H_TRANSPOSED, ops[k].tol);
        }
    /* outputs past CPU_FAST_STREAM_MIN: stored around the caches (streaming stores) and, the
     * other choice of cpu_store_begin, through them with the next-row prefetch; odd row
     * lengths start rows off the 32- and 64-byte boundaries; rows past the softmax kernels'
     * 4096-float stack buffer keep their exponentials in the output */
    for (int st = 1; st >= 0; st--) {
        cpu_store_force(st);
        compare(st ? "gelu (streamed)" : "gelu (large, cached)", f_gelu, EM_SHAPE(4100, 1025), true,
                H_CONTIG, 2e-6);
        compare(st ? "softmax (streamed)" : "softmax (large, cached)", f_softmax,
                EM_SHAPE(4100, 1025), true, H_CONTIG, 2e-6);
        compare(st ? "log_softmax (streamed)" : "log_softmax (large, cached)", f_log_softmax,
                EM_SHAPE(4100, 1025), true, H_CONTIG, 2e-6);
        compare(st ? "softmax (streamed, long rows)" : "softmax (large, cached, long rows)",
                f_softmax, EM_SHAPE(1030, 4103), true, H_CONTIG, 2e-6);
        compare(st ? "layer_norm (streamed)" : "layer_norm (large, cached)", f_layer_norm,
                EM_SHAPE(1025, 4099), true, H_CONTIG, 1e-5);
        compare(st ? "rms_norm (streamed)" : "rms_norm (large, cached)", f_rms_norm,
                EM_SHAPE(1025, 4099), true, H_CONTIG, 1e-5);
    }
    cpu_store_force(-1);
    store_choice();
    isa_tables();
    /* whole sums: below, at and past the 65536-element block, with tails */
    int64_t sums[] = {65535, 65536, 65537, 3 * 65536 + 17, 1000003};
    for (size_t i = 0; i < sizeof sums / sizeof *sums; i++) {
        compare("sum", f_sum, EM_SHAPE(sums[i]), false, H_CONTIG, 1e-5);
        compare("mean", f_mean, EM_SHAPE(sums[i]), false, H_CONTIG, 1e-5);
        compare("sum 2-D", f_sum, EM_SHAPE(sums[i] / 7, 7), false, H_CONTIG, 1e-5);
        compare("sum NaN", f_sum, EM_SHAPE(sums[i]), true, H_CONTIG, 1e-5);
    }
    compare("sum strided", f_sum, EM_SHAPE(300, 301), false, H_STRIDED, 1e-5);
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
        compare_masked_fill(3, lens[i], EM_F32, 0.0, H_CONTIG);
        compare_masked_fill(3, lens[i], EM_F32, NAN, H_CONTIG);
        compare_masked_fill(2, lens[i], EM_I32, -7, H_CONTIG);
        compare_masked_fill(3, lens[i], EM_F32, -0.0, H_TRANSPOSED);
    }
    compare_masked_fill(2048, 784, EM_F32, 0.0, H_CONTIG); /* train_cnn's ReLU gradient */
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
        compare_threshold(3, lens[i], 0.0, H_CONTIG);
        compare_threshold(2, lens[i], 0.25, H_CONTIG);
        compare_threshold(3, lens[i], -0.5, H_TRANSPOSED);
    }
    compare_threshold(2048, 784, 0.0, H_CONTIG); /* train_cnn's first ReLU */
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++)
        for (int lg = 0; lg < 2; lg++) {
            compare_softmax_bw(3, lens[i], lg, H_CONTIG);
            compare_softmax_bw(2, lens[i], lg, H_TRANSPOSED);
        }
    compare_softmax_bw(512, 1000, true, H_CONTIG); /* a classifier's log-softmax rows */

    /* rows of 256 and more: the vector kernel's bounded pass, with 8, 16 or 32 groups by k */
    int64_t tk_lens[] = {1, 7, 15, 16, 17, 31, 33, 100, 255, 256, 263, 1000, 4099};
    int64_t tk_ks[] = {1, 3, 8, 9, 10, 16, 17, 32};
    for (size_t i = 0; i < sizeof tk_lens / sizeof *tk_lens; i++)
        for (size_t j = 0; j < sizeof tk_ks / sizeof *tk_ks; j++) {
            if (tk_ks[j] > tk_lens[i]) continue;
            for (int kind = 0; kind < 4; kind++)
                for (int largest = 0; largest < 2; largest++)
                    compare_topk(5, tk_lens[i], tk_ks[j], largest, kind, H_CONTIG);
            compare_topk(3, tk_lens[i], tk_ks[j], true, 2, H_TRANSPOSED);
        }

    /* k = 1 down a dim that is not the last (the column path), column counts off the block */
    for (int kind = 0; kind < 3; kind++)
        for (int largest = 0; largest < 2; largest++) {
            compare_topk_at(EM_SHAPE(16, 1100), 0, 1, largest, kind, H_CONTIG);
            compare_topk_at(EM_SHAPE(3, 7, 513), 1, 1, largest, kind, H_CONTIG);
            compare_topk_at(EM_SHAPE(5, 9, 4), 0, 1, largest, kind, H_CONTIG);
            compare_topk_at(EM_SHAPE(1, 33), 0, 1, largest, kind, H_CONTIG);
        }
    compare_topk_at(EM_SHAPE(16, 100), 0, 1, true, 2, H_TRANSPOSED);
    compare_topk_at(EM_SHAPE(16, 100), 0, 3, true, 2, H_CONTIG);

    /* every power of two from the shortest that takes the half-length FFT to lengths past one
     * L2 block (breadth passes of radix 2 and 4), plus padding and cropping */
    for (int64_t n = 16; n <= ((int64_t)1 << 19); n *= 2) {
        compare_rfft(n <= 4096 ? 3 : 1, n, n, EM_F32, H_CONTIG);
        if (n <= 4096 || n == ((int64_t)1 << 18)) compare_rfft(2, n, n, EM_F64, H_CONTIG);
    }
    compare_rfft(3, 64, 64, EM_F32, H_TRANSPOSED);
    compare_rfft(3, 64, 64, EM_F16, H_STRIDED);
    compare_rfft(2, 1000, 1024, EM_F32, H_CONTIG); /* padded */
    compare_rfft(2, 3000, 2048, EM_F64, H_CONTIG); /* cropped */
    compare_fft_passes();
    return h_finish();
}
