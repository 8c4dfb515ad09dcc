/* CPU kernels for the real FFT and its inverse, in double precision whatever the dtype. The
 * forward transform of a power-of-two length runs as a complex FFT of half the length plus a
 * post-pass, with plans kept per size; the other cases run a full-length complex FFT: an
 * iterative radix-2 FFT for power-of-two lengths and Bluestein's chirp-z algorithm (a
 * convolution done with power-of-two FFTs) for every other length, with one plan (twiddles,
 * chirp) built per op and shared read-only by the rows, which run in parallel. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu.h"
#include "cpu_fast.h"

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

/* ---- power-of-two real FFT: a complex FFT of n/2 points, then a split post-pass ------------
 * x: [n] real -> z[j] = x[2j] + i x[2j+1] (m = n/2 complex, split re/im arrays), gathered in
 * bit-reversed order -> decimation in time, natural order out: blocks of RF_LEAF points, each
 * small enough for L2, are gathered and run their first stages, then the last stages run
 * breadth-first over the whole array in radix-4 passes (split over the threads) -> X[k] = E[k] +
 * W^k O[k] with E, O the spectra of the even and odd samples, read off Z[k] and conj(Z[m-k]). Every
 * output's arithmetic is the same whatever the split, so results do not depend on the thread count.
 * Plans (twiddles per stage, the post-pass twiddles, the bit reversal) are built once per size
 * and kept. */
#define RF_LEAF  ((int64_t)1 << 15)
#define RF_MIN   16 /* shorter lengths take the general path */
#define RF_PLANS 8
#define RF_GRAIN ((int64_t)1 << 14)

typedef struct rf_plan {
    int64_t n, m;
    double *twr, *twi; /* [m]: entry h + k = exp(-i pi k / h), for h = 1, 2, 4 .. m/2, k < h */
    double *pwr, *pwi; /* [m/2 + 1]: W^k = exp(-2 pi i k / n) */
    int32_t *rev;      /* [m]: bit reversal over log2(m) bits */
} rf_plan;

static pthread_mutex_t rf_lock = PTHREAD_MUTEX_INITIALIZER;
static rf_plan *rf_plans[RF_PLANS]; /* kept for the life of the process */

static void rf_plan_free(rf_plan *p)
{
    if (!p) return;
    free(p->twr), free(p->twi), free(p->pwr), free(p->pwi), free(p->rev);
    free(p);
}

static rf_plan *rf_plan_build(int64_t n)
{
    rf_plan *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    int64_t m = n / 2;
    p->n = n;
    p->m = m;
    p->twr = malloc((size_t)m * sizeof(double));
    p->twi = malloc((size_t)m * sizeof(double));
    p->pwr = malloc((size_t)(m / 2 + 1) * sizeof(double));
    p->pwi = malloc((size_t)(m / 2 + 1) * sizeof(double));
    p->rev = malloc((size_t)m * sizeof(int32_t));
    if (!p->twr || !p->twi || !p->pwr || !p->pwi || !p->rev) {
        rf_plan_free(p);
        return NULL;
    }
    p->twr[0] = 1, p->twi[0] = 0;
    for (int64_t h = 1; h < m; h <<= 1)
        for (int64_t k = 0; k < h; k++) {
            double ang = -PI * (double)k / (double)h;
            p->twr[h + k] = cos(ang);
            p->twi[h + k] = sin(ang);
        }
    for (int64_t k = 0; k <= m / 2; k++) {
        double ang = -2.0 * PI * (double)k / (double)n;
        p->pwr[k] = cos(ang);
        p->pwi[k] = sin(ang);
    }
    int bits = 0;
    while (((int64_t)1 << bits) < m) bits++;
    for (int64_t k = 0; k < m; k++) {
        int64_t r = 0;
        for (int b = 0; b < bits; b++) r |= ((k >> b) & 1) << (bits - 1 - b);
        p->rev[k] = (int32_t)r;
    }
    return p;
}

/* The kept plan for length n, built on first use (NULL when out of memory). When the table is
 * full the plan goes to *own, for the caller to free. */
static const rf_plan *rf_plan_get(int64_t n, rf_plan **own)
{
    *own = NULL;
    pthread_mutex_lock(&rf_lock);
    const rf_plan *found = NULL;
    int k = 0;
    for (; k < RF_PLANS && rf_plans[k]; k++)
        if (rf_plans[k]->n == n) {
            found = rf_plans[k];
            break;
        }
    if (!found) {
        rf_plan *p = rf_plan_build(n);
        if (p && k < RF_PLANS)
            rf_plans[k] = p;
        else
            *own = p;
        found = p;
    }
    pthread_mutex_unlock(&rf_lock);
    return found;
}

/* DIT butterflies of span h over k in [k0, k1) of a block of 2h points: t = w v, then u + t
 * up and u - t down; w[k] = exp(-i pi k / h). */
static inline void rf_span2(double *restrict re, double *restrict im, const double *restrict wr,
                            const double *restrict wi, int64_t h, int64_t k0, int64_t k1)
{
    for (int64_t k = k0; k < k1; k++) {
        double vr = re[k + h], vi = im[k + h];
        double tr = vr * wr[k] - vi * wi[k], ti = vr * wi[k] + vi * wr[k];
        double ur = re[k], ui = im[k];
        re[k] = ur + tr, im[k] = ui + ti;
        re[k + h] = ur - tr, im[k + h] = ui - ti;
    }
}

/* Two DIT stages (spans h and 2h) at once over k in [k0, k1) of a block of 4h points: one read
 * and one write of the block instead of two. tw points at the whole table. */
static inline void rf_span4(double *restrict re, double *restrict im, const double *restrict twr,
                            const double *restrict twi, int64_t h, int64_t k0, int64_t k1)
{
    const double *w1r = twr + h, *w1i = twi + h, *w2r = twr + 2 * h, *w2i = twi + 2 * h;
    for (int64_t k = k0; k < k1; k++) {
        double a0r = re[k], a0i = im[k], a1r = re[k + h], a1i = im[k + h];
        double a2r = re[k + 2 * h], a2i = im[k + 2 * h], a3r = re[k + 3 * h], a3i = im[k + 3 * h];
        double t1r = a1r * w1r[k] - a1i * w1i[k], t1i = a1r * w1i[k] + a1i * w1r[k];
        double t3r = a3r * w1r[k] - a3i * w1i[k], t3i = a3r * w1i[k] + a3i * w1r[k];
        double b0r = a0r + t1r, b0i = a0i + t1i, b1r = a0r - t1r, b1i = a0i - t1i;
        double b2r = a2r + t3r, b2i = a2i + t3i, b3r = a2r - t3r, b3i = a2i - t3i;
        double t2r = b2r * w2r[k] - b2i * w2i[k], t2i = b2r * w2i[k] + b2i * w2r[k];
        double t4r = b3r * w2r[k + h] - b3i * w2i[k + h];
        double t4i = b3r * w2i[k + h] + b3i * w2r[k + h];
        re[k] = b0r + t2r, im[k] = b0i + t2i;
        re[k + 2 * h] = b0r - t2r, im[k + 2 * h] = b0i - t2i;
        re[k + h] = b1r + t4r, im[k + h] = b1i + t4i;
        re[k + 3 * h] = b1r - t4r, im[k + 3 * h] = b1i - t4i;
    }
}

/* A pass of butterflies t in [t0, t1), t = block * h + k: radix 2 (span h, blocks of 2h) or
 * radix 4 (spans h and 2h, blocks of 4h); tw is the whole twiddle table. */
static void rf_pass2(double *re, double *im, const double *twr, const double *twi, int64_t h,
                     int64_t t0, int64_t t1)
{
    while (t0 < t1) {
        int64_t blk = t0 / h, k0 = t0 % h, k1 = t1 - blk * h < h ? t1 - blk * h : h;
        rf_span2(re + blk * 2 * h, im + blk * 2 * h, twr + h, twi + h, h, k0, k1);
        t0 = blk * h + k1;
    }
}

static void rf_pass4(double *re, double *im, const double *twr, const double *twi, int64_t h,
                     int64_t t0, int64_t t1)
{
    while (t0 < t1) {
        int64_t blk = t0 / h, k0 = t0 % h, k1 = t1 - blk * h < h ? t1 - blk * h : h;
        rf_span4(re + blk * 4 * h, im + blk * 4 * h, twr, twi, h, k0, k1);
        t0 = blk * h + k1;
    }
}

typedef void (*rf_pass_fn)(double *re, double *im, const double *twr, const double *twi, int64_t h,
                           int64_t t0, int64_t t1);

/* All stages of one block of len points (len a power of two, >= 4). */
static void rf_block(double *re, double *im, const rf_plan *p, int64_t len, rf_pass_fn pass2,
                     rf_pass_fn pass4)
{
    /* spans 1 and 2 (twiddles 1; then 1 and -i) as one radix-4 step */
    for (int64_t b = 0; b < len; b += 4) {
        double *r = re + b, *i = im + b;
        double ar = r[0] + r[1], ai = i[0] + i[1], br = r[0] - r[1], bi = i[0] - i[1];
        double cr = r[2] + r[3], ci = i[2] + i[3], dr = i[2] - i[3], di = r[3] - r[2];
        r[0] = ar + cr, i[0] = ai + ci, r[2] = ar - cr, i[2] = ai - ci;
        r[1] = br + dr, i[1] = bi + di, r[3] = br - dr, i[3] = bi - di;
    }
    for (int64_t h = 4; h < len;) {
        if (4 * h <= len) {
            pass4(re, im, p->twr, p->twi, h, 0, len / 4);
            h *= 4;
        } else {
            pass2(re, im, p->twr, p->twi, h, 0, len / 2);
            h *= 2;
        }
    }
}

typedef struct rf_job {
    const rf_plan *p;
    rf_pass_fn pass2, pass4;
    double *re, *im;
    int64_t h; /* breadth pass: first span */
    const char *x;
    int64_t xs, xlen;
    em_dtype xdt;
    char *y;
    int64_t ys, yc;
    em_dtype ydt;
} rf_job;

static void rf_pack(void *ctx, int64_t b, int64_t e)
{
    const rf_job *j = ctx;
    const int32_t *rev = j->p->rev;
    int64_t L = j->xlen;
    if (j->xdt == EM_F32 && j->xs == 1 && L == j->p->n) {
        /* the usual case: whole contiguous f32 rows; the reads are scattered, so ask for them
         * ahead of use (the prefetch distance covers a memory latency) */
        const float *restrict x = (const float *)j->x;
        double *restrict re = j->re, *restrict im = j->im;
        for (int64_t t = b; t < e; t++) {
            if (t + 64 < e) __builtin_prefetch(x + 2 * (int64_t)rev[t + 64]);
            int64_t s = 2 * (int64_t)rev[t];
            re[t] = x[s];
            im[t] = x[s + 1];
        }
        return;
    }
    size_t es = em_dtype_size(j->xdt);
    for (int64_t t = b; t < e; t++) {
        int64_t s = 2 * (int64_t)rev[t];
        const char *q = j->x + s * j->xs * (int64_t)es;
        j->re[t] = s < L ? ir_get_f64(q, j->xdt) : 0;
        j->im[t] = s + 1 < L ? ir_get_f64(q + j->xs * (int64_t)es, j->xdt) : 0;
    }
}

static void rf_leaves(void *ctx, int64_t b, int64_t e)
{
    const rf_job *j = ctx;
    int64_t len = j->p->m < RF_LEAF ? j->p->m : RF_LEAF;
    for (int64_t t = b; t < e; t++) { /* gathered just before use: the block stays in L2 */
        rf_pack(ctx, t * len, (t + 1) * len);
        rf_block(j->re + t * len, j->im + t * len, j->p, len, j->pass2, j->pass4);
    }
}

static void rf_breadth4(void *ctx, int64_t b, int64_t e)
{
    const rf_job *j = ctx;
    j->pass4(j->re, j->im, j->p->twr, j->p->twi, j->h, b, e);
}

static void rf_breadth2(void *ctx, int64_t b, int64_t e)
{
    const rf_job *j = ctx;
    j->pass2(j->re, j->im, j->p->twr, j->p->twi, j->h, b, e);
}

static inline void rf_put(const rf_job *j, int64_t k, double re, double im)
{
    if (j->ydt == EM_F32) {
        float *y = (float *)j->y + k * j->ys;
        y[0] = (float)re;
        y[j->yc] = (float)im;
        return;
    }
    size_t es = em_dtype_size(j->ydt);
    char *y = j->y + k * j->ys * (int64_t)es;
    ir_set_f64(y, j->ydt, re);
    ir_set_f64(y + j->yc * (int64_t)es, j->ydt, im);
}

static void rf_post(void *ctx, int64_t b, int64_t e)
{
    const rf_job *j = ctx;
    const rf_plan *p = j->p;
    const double *re = j->re, *im = j->im;
    int64_t m = p->m;
    for (int64_t k = b; k < e; k++) {
        if (k == 0) {
            rf_put(j, 0, re[0] + im[0], 0);
            rf_put(j, m, re[0] - im[0], 0);
            continue;
        }
        double ar = re[k], ai = im[k], br = re[m - k], bi = -im[m - k]; /* B = conj(Z[m-k]) */
        double er = 0.5 * (ar + br), ei = 0.5 * (ai + bi);
        double or = 0.5 * (ai - bi), oi = -0.5 * (ar - br); /* O = -i (A - B) / 2 */
        double wr = p->pwr[k], wi = p->pwi[k];
        double tr = or *wr - oi * wi, ti = or *wi + oi * wr;
        rf_put(j, m - k, er - tr, ti - ei); /* X[m-k] = conj(E - W^k O) */
        rf_put(j, k, er + tr, ei + ti);
    }
}

/* x: [xlen] of dtype xdt at element stride xs -> y: [n/2 + 1] complex, y[k * ys] real and
 * y[k * ys + yc] imaginary (element strides); re/im hold n/2 doubles each. */
static void rfft_pow2(const rf_plan *p, const char *x, int64_t xs, int64_t xlen, em_dtype xdt,
                      char *y, int64_t ys, int64_t yc, em_dtype ydt, double *re, double *im)
{
    int64_t m = p->m;
    const cpu_fast_ops *f = cpu_fast();
    rf_job j = {p,
                f ? f->fft_pass2 : rf_pass2,
                f ? f->fft_pass4 : rf_pass4,
                re,
                im,
                0,
                x,
                xs,
                xlen < p->n ? xlen : p->n,
                xdt,
                y,
                ys,
                yc,
                ydt};
    int64_t leaf = m < RF_LEAF ? m : RF_LEAF;
    em_parallel_for(m / leaf, 1, rf_leaves, &j);
    for (int64_t h = leaf; h < m;) {
        j.h = h;
        if (4 * h <= m) {
            em_parallel_for(m / 4, RF_GRAIN, rf_breadth4, &j);
            h *= 4;
        } else {
            em_parallel_for(m / 2, RF_GRAIN, rf_breadth2, &j);
            h *= 2;
        }
    }
    em_parallel_for(m / 2 + 1, RF_GRAIN, rf_post, &j);
}

/* ---- rows -------------------------------------------------------------------------------- */

typedef struct sig_ctx {
    const ir_op *op;
    fft_plan plan;
    int rank, dim;                /* rank of the real/complex shape without the trailing 2 */
    int64_t shape[EM_MAX_RANK];   /* row iteration shape (dim's entry unused) */
    int64_t xst[EM_MAX_RANK + 1]; /* input element strides (complex input: + trailing) */
    int64_t yst[EM_MAX_RANK + 1]; /* output element strides */
    int64_t xlen, ylen;           /* points along dim in the input and output */
    const rf_plan *rf;            /* forward power-of-two lengths: the real-FFT plan */
    atomic_bool failed;
} sig_ctx;

/* Element offsets in x and y of the start of row `row` (the rows run over every dim but dim). */
static void row_offsets(const sig_ctx *c, int64_t row, int64_t *xo, int64_t *yo)
{
    *xo = *yo = 0;
    for (int d = c->rank - 1; d >= 0; d--) {
        if (d == c->dim) continue;
        int64_t i = row % c->shape[d];
        row /= c->shape[d];
        *xo += i * c->xst[d];
        *yo += i * c->yst[d];
    }
}

static void sig_rows(void *vctx, int64_t b, int64_t e)
{
    sig_ctx *c = vctx;
    const ir_tensor *x = c->op->in[0], *y = c->op->out[0];
    int64_t n = c->plan.n;
    size_t xes = em_dtype_size(x->dtype), yes = em_dtype_size(y->dtype);
    const char *xb = ir_ptr(x);
    char *yb = ir_ptr(y);
    int64_t xs = c->xst[c->dim], ys = c->yst[c->dim];
    bool forward = c->op->kind == EM_OP_RFFT;
    if (c->rf) {
        double *re = em_alloc((size_t)n * sizeof(double));
        if (!re) {
            atomic_store(&c->failed, true);
            return;
        }
        for (int64_t row = b; row < e; row++) {
            int64_t xo, yo;
            row_offsets(c, row, &xo, &yo);
            rfft_pow2(c->rf, xb + xo * (int64_t)xes, xs, c->xlen, x->dtype, yb + yo * (int64_t)yes,
                      ys, c->yst[c->rank], y->dtype, re, re + n / 2);
        }
        em_free(re);
        return;
    }
    double *a = malloc((size_t)n * 2 * sizeof(double));
    double *work = malloc((size_t)c->plan.m * 2 * sizeof(double));
    if (!a || !work) {
        atomic_store(&c->failed, true);
        free(a);
        free(work);
        return;
    }
    for (int64_t row = b; row < e; row++) {
        int64_t xo, yo;
        row_offsets(c, row, &xo, &yo);
        if (forward) {
            /* x: [L] real -> a: [n] complex (padded or cropped) -> y: [n/2+1, 2] */
            int64_t L = c->xlen < n ? c->xlen : n;
            for (int64_t j = 0; j < n; j++) {
                a[2 * j] = j < L ? ir_get_f64(xb + (xo + j * xs) * (int64_t)xes, x->dtype) : 0;
                a[2 * j + 1] = 0;
            }
            fft_forward(&c->plan, a, work);
            int64_t yc = c->yst[c->rank];
            for (int64_t k = 0; k < c->ylen; k++) {
                char *p = yb + (yo + k * ys) * (int64_t)yes;
                ir_set_f64(p, y->dtype, a[2 * k]);
                ir_set_f64(p + yc * (int64_t)yes, y->dtype, a[2 * k + 1]);
            }
        } else {
            /* x: [B, 2] Hermitian half -> a: [n] full spectrum -> y: [n] real / n */
            int64_t xc = c->xst[c->rank], half = n / 2;
            for (int64_t k = 0; k <= half; k++) {
                double re = 0, im = 0;
                if (k < c->xlen) {
                    const char *p = xb + (xo + k * xs) * (int64_t)xes;
                    re = ir_get_f64(p, x->dtype);
                    im = ir_get_f64(p + xc * (int64_t)xes, x->dtype);
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
                ir_set_f64(yb + (yo + j * ys) * (int64_t)yes, y->dtype, a[2 * j] * inv_n);
        }
    }
    free(a);
    free(work);
}

em_status cpu_exec_signal(const ir_op *op)
{
    if (op->kind != EM_OP_RFFT && op->kind != EM_OP_IRFFT)
        return em_error(EM_ERR_UNSUPPORTED, "cpu: op %s is not a signal op", em_op_name(op->kind));
    const ir_tensor *x = op->in[0], *y = op->out[0];
    sig_ctx c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.dim = op->p.fft.dim;
    int64_t n = op->p.fft.n;
    bool forward = op->kind == EM_OP_RFFT;
    c.rank = forward ? x->rank : y->rank;
    const ir_tensor *real = forward ? x : y;
    for (int d = 0; d < c.rank; d++) c.shape[d] = real->shape[d];
    for (int d = 0; d < x->rank; d++) c.xst[d] = x->strides[d];
    for (int d = 0; d < y->rank; d++) c.yst[d] = y->strides[d];
    c.xlen = x->shape[c.dim];
    c.ylen = y->shape[c.dim];
    int64_t rows = 1;
    for (int d = 0; d < c.rank; d++)
        if (d != c.dim) rows *= c.shape[d];
    if (rows == 0) return EM_OK;
    rf_plan *own = NULL;
    if (forward && is_pow2(n) && n >= RF_MIN && !cpu_fast_portable_forced()) {
        c.rf = rf_plan_get(n, &own);
        if (!c.rf)
            return em_error(EM_ERR_OOM, "cpu: rfft: out of memory for a length-%lld plan",
                            (long long)n);
        c.plan.n = n;
        em_parallel_for(rows, CPU_PAR_MIN / (n * 8) + 1, sig_rows, &c);
        rf_plan_free(own);
        if (atomic_load(&c.failed)) return em_error(EM_ERR_OOM, "cpu: rfft: out of memory");
        return EM_OK;
    }
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
