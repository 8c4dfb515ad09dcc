/* Conformance of rfft/irfft against a naive O(n^2) DFT in double, the round trip
 * irfft(rfft(x)) == x, and PyTorch golden fixtures (tests/fixtures/signal.emfx). */
#include <string.h>

#include "conf.h"

static const double TWO_PI = 6.28318530717958647692;

static const int64_t lengths[] = {1, 2, 3, 5, 7, 12, 100, 1000, 4096, 6000};
#define N_LENGTHS (int)(sizeof lengths / sizeof lengths[0])

/* cos/sin of 2 pi m / n for m < n, so the naive sums index a table instead of calling trig. */
static double *trig_table(int64_t n)
{
    double *t = malloc((size_t)n * 2 * sizeof *t);
    for (int64_t m = 0; m < n; m++) {
        t[2 * m] = cos(TWO_PI * (double)m / (double)n);
        t[2 * m + 1] = sin(TWO_PI * (double)m / (double)n);
    }
    return t;
}

/* X[k] = sum_{j<n} x[j] e^{-2 pi i jk/n} for k <= n/2; x has len points (padded/cropped). */
static void naive_rfft(const double *x, int64_t len, int64_t n, double *out)
{
    double *tw = trig_table(n);
    for (int64_t k = 0; k <= n / 2; k++) {
        double re = 0, im = 0;
        for (int64_t j = 0, m = 0; j < n && j < len; j++, m = m + k >= n ? m + k - n : m + k) {
            re += x[j] * tw[2 * m];
            im -= x[j] * tw[2 * m + 1];
        }
        out[2 * k] = re;
        out[2 * k + 1] = im;
    }
    free(tw);
}

/* y[t] = (1/n) sum_k X[k] e^{2 pi i kt/n} over the Hermitian extension of bins X[0..bins). */
static void naive_irfft(const double *X, int64_t bins, int64_t n, double *y)
{
    double *tw = trig_table(n);
    for (int64_t t = 0; t < n; t++) {
        double s = bins > 0 ? X[0] : 0;
        for (int64_t k = 1, m = t; k <= n / 2 && k < bins;
             k++, m = m + t >= n ? m + t - n : m + t) {
            double term = X[2 * k] * tw[2 * m] - X[2 * k + 1] * tw[2 * m + 1];
            s += (n % 2 == 0 && k == n / 2) ? term : 2 * term;
        }
        y[t] = s / (double)n;
    }
    free(tw);
}

static double max_abs(const double *v, int64_t n)
{
    double m = 1;
    for (int64_t i = 0; i < n; i++)
        if (fabs(v[i]) > m) m = fabs(v[i]);
    return m;
}

/* Absolute tolerance for sums: the dtype's tolerance scaled by the largest magnitude. */
static double sum_atol(em_dtype dt, const double *ref, int64_t n)
{
    return h_atol(dt) * max_abs(ref, n);
}

static void check_lengths(void)
{
    for (int li = 0; li < N_LENGTHS; li++) {
        int64_t n = lengths[li];
        bool small = n <= 100;
        static const em_dtype dts[] = {EM_F64, EM_F32, EM_F16, EM_BF16};
        for (int k = 0; k < (small ? 4 : 2); k++) {
            em_dtype dt = dts[k];
            for (int lay = 0; lay < (small ? H_LAYOUT_COUNT : 1); lay++) {
                em_scope_begin();
                /* x: [2, n] along dim 1 */
                double *xv;
                em_tensor *x = h_rand(EM_SHAPE(2, n), dt, (h_layout)lay, -1, 1, &xv);
                int64_t bins = n / 2 + 1;
                double *ref = malloc((size_t)(2 * bins * 2) * sizeof *ref);
                for (int r = 0; r < 2; r++) naive_rfft(xv + r * n, n, n, ref + r * bins * 2);
                char what[64];
                snprintf(what, sizeof what, "rfft n=%lld %s layout %d", (long long)n,
                         em_dtype_name(dt), lay);
                em_tensor *X = em_rfft(x, 1, 0);
                h_check_tensor(what, X, ref, EM_SHAPE(2, bins, 2), sum_atol(dt, ref, 4 * bins),
                               h_rtol(dt));
                /* the round trip gives x back */
                snprintf(what, sizeof what, "irfft(rfft) n=%lld %s layout %d", (long long)n,
                         em_dtype_name(dt), lay);
                double tol = dt == EM_F64 ? 1e-10 : h_atol(dt) * 4;
                h_check_tensor(what, em_irfft(X, -1, n), xv, EM_SHAPE(2, n), tol, 0);
                free(ref);
                free(xv);
                /* irfft of a random half spectrum, DC/Nyquist imaginary parts set (ignored) */
                double *cv;
                em_tensor *c = h_rand(EM_SHAPE(bins, 3, 2), dt, (h_layout)lay, -1, 1, &cv);
                double *cr = malloc((size_t)bins * 2 * sizeof *cr);
                double *yr = malloc((size_t)n * 3 * sizeof *yr),
                       *col = malloc((size_t)n * sizeof *col);
                for (int j = 0; j < 3; j++) {
                    for (int64_t b = 0; b < bins; b++) {
                        cr[2 * b] = cv[(b * 3 + j) * 2];
                        cr[2 * b + 1] = cv[(b * 3 + j) * 2 + 1];
                    }
                    naive_irfft(cr, bins, n, col);
                    for (int64_t t = 0; t < n; t++) yr[t * 3 + j] = col[t];
                }
                snprintf(what, sizeof what, "irfft n=%lld %s layout %d", (long long)n,
                         em_dtype_name(dt), lay);
                h_check_tensor(what, em_irfft(c, 0, n), yr, EM_SHAPE(n, 3),
                               dt == EM_F64 ? 1e-10 : h_atol(dt), h_rtol(dt));
                free(cr);
                free(yr);
                free(col);
                free(cv);
                em_scope_end();
            }
        }
    }
}

static void check_pad_crop(void)
{
    em_scope_begin();
    double *xv;
    em_tensor *x = h_rand(EM_SHAPE(5, 2), EM_F64, H_TRANSPOSED, -1, 1, &xv);
    double col[5], ref[2 * 5 * 2], out[10];
    static const int64_t ns[3] = {8, 3, 1};
    for (int q = 0; q < 3; q++) {
        int64_t n = ns[q], bins = n / 2 + 1;
        for (int j = 0; j < 2; j++) {
            for (int i = 0; i < 5; i++) col[i] = xv[i * 2 + j];
            naive_rfft(col, 5, n, out);
            for (int64_t b = 0; b < bins; b++) {
                ref[(b * 2 + j) * 2] = out[2 * b];
                ref[(b * 2 + j) * 2 + 1] = out[2 * b + 1];
            }
        }
        h_check_tensor("rfft padded/cropped", em_rfft(x, 0, n), ref, EM_SHAPE(bins, 2, 2), 1e-10,
                       1e-10);
    }
    /* irfft with fewer bins than n/2+1 (zero-padded) and more (cropped) */
    double *cv;
    em_tensor *c = h_rand(EM_SHAPE(4, 2), EM_F64, H_CONTIG, -1, 1, &cv);
    double y[10];
    naive_irfft(cv, 4, 10, y);
    h_check_tensor("irfft padded bins", em_irfft(c, 0, 10), y, EM_SHAPE(10), 1e-12, 0);
    naive_irfft(cv, 2, 3, y);
    h_check_tensor("irfft cropped bins", em_irfft(c, 0, 3), y, EM_SHAPE(3), 1e-12, 0);
    naive_irfft(cv, 4, 6, y);
    h_check_tensor("irfft default n", em_irfft(c, 0, 0), y, EM_SHAPE(6), 1e-12, 0);
    /* empty batch dims */
    em_tensor *e = em_zeros(EM_SHAPE(0, 5), EM_F32, h_dev);
    em_tensor *E = em_rfft(e, 1, 0);
    CHECK(E && em_shape_equal(em_tensor_shape(E), EM_SHAPE(0, 3, 2)), "rfft of an empty batch");
    free(xv);
    free(cv);
    em_scope_end();
}

static void check_fixtures(void)
{
    h_fixture *fx = h_fixture_load("signal.emfx");
    if (!fx) return;
    static const em_dtype fdt[] = {EM_F64, EM_F32};
    for (int k = 0; k < 2; k++) {
        em_dtype dt = fdt[k];
        double tol = dt == EM_F64 ? 1e-10 : 1e-4; /* f32 inputs are rounded from torch's f64 */
        for (int li = 0; li < 7; li++) {
            em_scope_begin();
            int64_t n = lengths[li];
            char name[32], oname[32];
            em_shape s, ys;
            snprintf(name, sizeof name, "rfft%lld_x", (long long)n);
            snprintf(oname, sizeof oname, "rfft%lld_y", (long long)n);
            const double *xv = h_fixture_values(fx, name, &s);
            const double *yv = h_fixture_values(fx, oname, &ys);
            if (xv && yv)
                h_check_tensor(oname, em_rfft(h_from_values(xv, s, dt, H_FLIPPED), 0, 0), yv, ys,
                               tol, tol);
            snprintf(name, sizeof name, "irfft%lld_x", (long long)n);
            snprintf(oname, sizeof oname, "irfft%lld_y", (long long)n);
            xv = h_fixture_values(fx, name, &s);
            yv = h_fixture_values(fx, oname, &ys);
            if (xv && yv)
                h_check_tensor(oname, em_irfft(h_from_values(xv, s, dt, H_STRIDED), 0, n), yv, ys,
                               tol, tol);
            em_scope_end();
        }
        em_scope_begin();
        em_shape s, ys;
        const double *xv = h_fixture_values(fx, "rfft2d_x", &s);
        em_tensor *x = h_from_values(xv, s, dt, H_TRANSPOSED);
        const double *yv = h_fixture_values(fx, "rfft2d_pad_y", &ys);
        if (yv) h_check_tensor("rfft2d_pad_y", em_rfft(x, 0, 8), yv, ys, tol, tol);
        yv = h_fixture_values(fx, "rfft2d_crop_y", &ys);
        if (yv) h_check_tensor("rfft2d_crop_y", em_rfft(x, -2, 4), yv, ys, tol, tol);
        xv = h_fixture_values(fx, "irfft2d_x", &s);
        yv = h_fixture_values(fx, "irfft2d_y", &ys);
        if (xv && yv)
            h_check_tensor("irfft2d_y", em_irfft(h_from_values(xv, s, dt, H_CONTIG), 1, 7), yv, ys,
                           tol, tol);
        em_scope_end();
    }
    h_fixture_free(fx);
}

static void check_bad(void)
{
    em_scope_begin();
    em_tensor *x = em_zeros(EM_SHAPE(4, 3), EM_F32, h_dev);
    CHECK(em_rfft(NULL, 0, 0) == NULL, "rfft NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_rfft");
    CHECK(em_rfft(x, 2, 0) == NULL, "rfft bad dim");
    CHECK_ERR(EM_ERR_INDEX, "em_rfft: dim 2");
    em_tensor *i = em_zeros(EM_SHAPE(4), EM_I32, h_dev);
    CHECK(em_rfft(i, 0, 0) == NULL, "rfft of ints");
    CHECK_ERR(EM_ERR_DTYPE, "em_rfft: dtype i32");
    CHECK(em_rfft(em_scalar(1, EM_F32, h_dev), 0, 0) == NULL, "rfft of a scalar");
    CHECK_ERR(EM_ERR_SHAPE, "em_rfft");
    CHECK(em_rfft(em_zeros(EM_SHAPE(0), EM_F32, h_dev), 0, 0) == NULL, "rfft of no points");
    CHECK_ERR(EM_ERR_SHAPE, "em_rfft");
    CHECK(em_irfft(x, 0, 0) == NULL, "irfft of a non-complex shape");
    CHECK_ERR(EM_ERR_SHAPE, "em_irfft: input of shape [4, 3]");
    em_tensor *c = em_zeros(EM_SHAPE(4, 2), EM_F32, h_dev);
    CHECK(em_irfft(c, 1, 0) == NULL, "irfft dim on the complex axis");
    CHECK_ERR(EM_ERR_INDEX, "em_irfft");
    em_tensor *c1 = em_zeros(EM_SHAPE(1, 2), EM_F32, h_dev);
    CHECK(em_irfft(c1, 0, 0) == NULL, "irfft of one bin needs n");
    CHECK_ERR(EM_ERR_SHAPE, "em_irfft");
    CHECK(em_irfft(NULL, 0, 0) == NULL, "irfft NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_irfft");
    em_scope_end();
}

void conf_signal(void)
{
    check_lengths();
    check_pad_crop();
    check_fixtures();
    check_bad();
}
