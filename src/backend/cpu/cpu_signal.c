/* CPU kernels for the real FFT and its inverse, in double precision whatever the dtype: an
 * iterative radix-2 FFT for power-of-two lengths and Bluestein's chirp-z algorithm (a
 * convolution done with power-of-two FFTs) for every other length. One plan (twiddles, chirp)
 * is built per op and shared read-only by the rows, which run in parallel. */
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu.h"

static const double PI = 3.14159265358979323846;

typedef struct fft_plan {
    int64_t n;     /* transform length */
    int64_t m;     /* power-of-two length the butterflies run on (n, or Bluestein's size) */
    double *tw;    /* m/2 complex exp(-2 pi i j / m), interleaved (re, im) */
    double *chirp; /* Bluestein: n complex exp(-pi i k^2 / n) */
    double *bfft;  /* Bluestein: FFT of the conjugate chirp, m complex */
} fft_plan;

static bool is_pow2(int64_t n)
{
    return n > 0 && (n & (n - 1)) == 0;
}

/* In-place unnormalised FFT of m (a power of two) complex values; inverse uses conj twiddles. */
static void fft_pow2(double *a, int64_t m, const double *tw, bool inverse)
{
    for (int64_t i = 1, j = 0; i < m; i++) { /* bit reversal */
        int64_t bit = m >> 1;
        for (; j & bit; bit >>= 1) j ^= bit;
        j |= bit;
        if (i < j) {
            double tr = a[2 * i], ti = a[2 * i + 1];
            a[2 * i] = a[2 * j], a[2 * i + 1] = a[2 * j + 1];
            a[2 * j] = tr, a[2 * j + 1] = ti;
        }
    }
    double sgn = inverse ? -1.0 : 1.0;
    for (int64_t len = 2; len <= m; len <<= 1) {
        int64_t half = len >> 1, step = m / len;
        for (int64_t s = 0; s < m; s += len) {
            for (int64_t k = 0; k < half; k++) {
                double wr = tw[2 * k * step], wi = sgn * tw[2 * k * step + 1];
                double *p = a + 2 * (s + k), *q = a + 2 * (s + k + half);
                double xr = q[0] * wr - q[1] * wi, xi = q[0] * wi + q[1] * wr;
                q[0] = p[0] - xr, q[1] = p[1] - xi;
                p[0] += xr, p[1] += xi;
            }
        }
    }
}

static void plan_free(fft_plan *p)
{
    free(p->tw);
    free(p->chirp);
    free(p->bfft);
}

static bool plan_init(fft_plan *p, int64_t n)
{
    memset(p, 0, sizeof *p);
    p->n = n;
    p->m = 1;
    if (is_pow2(n))
        p->m = n;
    else
        while (p->m < 2 * n - 1) p->m <<= 1;
    int64_t m = p->m;
    p->tw = malloc((size_t)(m / 2 + 1) * 2 * sizeof(double));
    if (!p->tw) return false;
    for (int64_t j = 0; j < m / 2; j++) {
        double ang = -2.0 * PI * (double)j / (double)m;
        p->tw[2 * j] = cos(ang);
        p->tw[2 * j + 1] = sin(ang);
    }
    if (m == n) return true;
    p->chirp = malloc((size_t)n * 2 * sizeof(double));
    p->bfft = calloc((size_t)m * 2, sizeof(double));
    if (!p->chirp || !p->bfft) return false;
    for (int64_t k = 0; k < n; k++) {
        /* k^2 mod 2n keeps the angle small and exact */
        int64_t q = (int64_t)(((uint64_t)k * (uint64_t)k) % (uint64_t)(2 * n));
        double ang = -PI * (double)q / (double)n;
        p->chirp[2 * k] = cos(ang);
        p->chirp[2 * k + 1] = sin(ang);
    }
    double *b = p->bfft;
    for (int64_t k = 0; k < n; k++) {
        b[2 * k] = p->chirp[2 * k];
        b[2 * k + 1] = -p->chirp[2 * k + 1];
        if (k > 0) {
            b[2 * (m - k)] = b[2 * k];
            b[2 * (m - k) + 1] = b[2 * k + 1];
        }
    }
    fft_pow2(b, m, p->tw, false);
    return true;
}

/* In-place forward DFT of p->n complex values in a; work holds 2 * p->m doubles. */
static void fft_forward(const fft_plan *p, double *a, double *work)
{
    int64_t n = p->n, m = p->m;
    if (m == n) {
        fft_pow2(a, n, p->tw, false);
        return;
    }
    const double *w = p->chirp;
    for (int64_t k = 0; k < n; k++) {
        work[2 * k] = a[2 * k] * w[2 * k] - a[2 * k + 1] * w[2 * k + 1];
        work[2 * k + 1] = a[2 * k] * w[2 * k + 1] + a[2 * k + 1] * w[2 * k];
    }
    memset(work + 2 * n, 0, (size_t)(m - n) * 2 * sizeof(double));
    fft_pow2(work, m, p->tw, false);
    for (int64_t k = 0; k < m; k++) {
        double br = p->bfft[2 * k], bi = p->bfft[2 * k + 1];
        double xr = work[2 * k], xi = work[2 * k + 1];
        work[2 * k] = xr * br - xi * bi;
        work[2 * k + 1] = xr * bi + xi * br;
    }
    fft_pow2(work, m, p->tw, true);
    double inv_m = 1.0 / (double)m;
    for (int64_t k = 0; k < n; k++) {
        double cr = work[2 * k] * inv_m, ci = work[2 * k + 1] * inv_m;
        a[2 * k] = cr * w[2 * k] - ci * w[2 * k + 1];
        a[2 * k + 1] = cr * w[2 * k + 1] + ci * w[2 * k];
    }
}

/* ---- rows -------------------------------------------------------------------------------- */

typedef struct sig_ctx {
    const em_op *op;
    fft_plan plan;
    int rank, dim;                /* rank of the real/complex shape without the trailing 2 */
    int64_t shape[EM_MAX_RANK];   /* row iteration shape (dim's entry unused) */
    int64_t xst[EM_MAX_RANK + 1]; /* input element strides (complex input: + trailing) */
    int64_t yst[EM_MAX_RANK + 1]; /* output element strides */
    int64_t xlen, ylen;           /* points along dim in the input and output */
    atomic_bool failed;
} sig_ctx;

static void sig_rows(void *vctx, int64_t b, int64_t e)
{
    sig_ctx *c = vctx;
    const em_tensor *x = c->op->in[0], *y = c->op->out[0];
    int64_t n = c->plan.n;
    double *a = malloc((size_t)n * 2 * sizeof(double));
    double *work = malloc((size_t)c->plan.m * 2 * sizeof(double));
    if (!a || !work) {
        atomic_store(&c->failed, true);
        free(a);
        free(work);
        return;
    }
    size_t xes = em_dtype_size(x->dtype), yes = em_dtype_size(y->dtype);
    const char *xb = tn_ptr(x);
    char *yb = tn_ptr(y);
    int64_t xs = c->xst[c->dim], ys = c->yst[c->dim];
    bool forward = c->op->kind == EM_OP_RFFT;
    for (int64_t row = b; row < e; row++) {
        int64_t xo = 0, yo = 0, r = row;
        for (int d = c->rank - 1; d >= 0; d--) {
            if (d == c->dim) continue;
            int64_t i = r % c->shape[d];
            r /= c->shape[d];
            xo += i * c->xst[d];
            yo += i * c->yst[d];
        }
        if (forward) {
            /* x: [L] real -> a: [n] complex (padded or cropped) -> y: [n/2+1, 2] */
            int64_t L = c->xlen < n ? c->xlen : n;
            for (int64_t j = 0; j < n; j++) {
                a[2 * j] = j < L ? cpu_get_f64(xb + (xo + j * xs) * (int64_t)xes, x->dtype) : 0;
                a[2 * j + 1] = 0;
            }
            fft_forward(&c->plan, a, work);
            int64_t yc = c->yst[c->rank];
            for (int64_t k = 0; k < c->ylen; k++) {
                char *p = yb + (yo + k * ys) * (int64_t)yes;
                cpu_set_f64(p, y->dtype, a[2 * k]);
                cpu_set_f64(p + yc * (int64_t)yes, y->dtype, a[2 * k + 1]);
            }
        } else {
            /* x: [B, 2] Hermitian half -> a: [n] full spectrum -> y: [n] real / n */
            int64_t xc = c->xst[c->rank], half = n / 2;
            for (int64_t k = 0; k <= half; k++) {
                double re = 0, im = 0;
                if (k < c->xlen) {
                    const char *p = xb + (xo + k * xs) * (int64_t)xes;
                    re = cpu_get_f64(p, x->dtype);
                    im = cpu_get_f64(p + xc * (int64_t)xes, x->dtype);
                }
                if (k == 0 || (n % 2 == 0 && k == half)) im = 0;
                /* inverse via conj(FFT(conj(X))) */
                a[2 * k] = re;
                a[2 * k + 1] = -im;
                if (k > 0 && k < n - k) {
                    a[2 * (n - k)] = re;
                    a[2 * (n - k) + 1] = im;
                }
            }
            fft_forward(&c->plan, a, work);
            double inv_n = 1.0 / (double)n;
            for (int64_t j = 0; j < n; j++)
                cpu_set_f64(yb + (yo + j * ys) * (int64_t)yes, y->dtype, a[2 * j] * inv_n);
        }
    }
    free(a);
    free(work);
}

em_status cpu_exec_signal(const em_op *op)
{
    if (op->kind != EM_OP_RFFT && op->kind != EM_OP_IRFFT)
        return em_error(EM_ERR_UNSUPPORTED, "cpu: op %s is not a signal op", em_op_name(op->kind));
    const em_tensor *x = op->in[0], *y = op->out[0];
    sig_ctx c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.dim = (int)op->i[0];
    int64_t n = op->i[1];
    bool forward = op->kind == EM_OP_RFFT;
    c.rank = forward ? x->rank : y->rank;
    const em_tensor *real = forward ? x : y;
    for (int d = 0; d < c.rank; d++) c.shape[d] = real->shape[d];
    for (int d = 0; d < x->rank; d++) c.xst[d] = x->strides[d];
    for (int d = 0; d < y->rank; d++) c.yst[d] = y->strides[d];
    c.xlen = x->shape[c.dim];
    c.ylen = y->shape[c.dim];
    int64_t rows = 1;
    for (int d = 0; d < c.rank; d++)
        if (d != c.dim) rows *= c.shape[d];
    if (rows == 0) return EM_OK;
    if (!plan_init(&c.plan, n)) {
        plan_free(&c.plan);
        return em_error(EM_ERR_OOM, "cpu: %s: out of memory for a length-%lld plan",
                        em_op_name(op->kind), (long long)n);
    }
    int64_t grain = CPU_PAR_MIN / (n * 8) + 1;
    em_parallel_for(rows, grain, sig_rows, &c);
    plan_free(&c.plan);
    if (atomic_load(&c.failed))
        return em_error(EM_ERR_OOM, "cpu: %s: out of memory", em_op_name(op->kind));
    return EM_OK;
}
