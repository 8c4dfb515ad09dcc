/* CPU kernels for normalisation (layer, RMS, group, batch), scaled dot-product attention and
 * dropout. Inputs of any layout are read into contiguous f64 rows (f32 contiguous input takes a
 * direct path); statistics accumulate in f64. */
#include <stdatomic.h>

#include "cpu.h"
#include "cpu_fast.h"
#include "cpu_gemm.h"

typedef struct norm_ctx {
    const double *x;
    double *y;
    const double *w, *b;
    int64_t inner;        /* elements normalised together */
    int64_t param_period; /* weight index = element index % period (layer/rms) */
    double eps;
    bool rms;
} norm_ctx;

/* The mean (0 for RMS) and 1 / sqrt(biased variance + eps) of a row of n doubles. */
static double row_rstd(const double *x, int64_t n, double eps, bool rms, double *mean)
{
    double m = 0, var = 0;
    if (!rms) {
        for (int64_t i = 0; i < n; i++) m += x[i];
        m /= (double)n;
    }
    for (int64_t i = 0; i < n; i++) var += (x[i] - m) * (x[i] - m);
    *mean = m;
    return 1.0 / sqrt(var / (double)n + eps);
}

static void norm_rows(void *vctx, int64_t r0, int64_t r1)
{
    const norm_ctx *c = vctx;
    for (int64_t r = r0; r < r1; r++) {
        const double *x = c->x + r * c->inner;
        double *y = c->y + r * c->inner;
        double mean, rstd = row_rstd(x, c->inner, c->eps, c->rms, &mean);
        for (int64_t i = 0; i < c->inner; i++) {
            double v = (x[i] - mean) * rstd;
            if (c->w) v *= c->w[i % c->param_period];
            if (c->b) v += c->b[i % c->param_period];
            y[i] = v;
        }
    }
}

/* Layer norm over the last dims of a contiguous f32 tensor, in f32 with f64 statistics. */
typedef struct ln32_ctx {
    const float *x, *w, *b;
    float *y;
    int64_t inner;
    double eps;
    bool rms;
    const cpu_fast_ops *fast;
    int hint; /* the row kernels' store hint (cpu_store_begin) */
} ln32_ctx;

static void ln32_rows(void *vctx, int64_t r0, int64_t r1)
{
    const ln32_ctx *c = vctx;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = c->x + r * c->inner;
        float *y = c->y + r * c->inner;
        if (c->fast) {
            c->fast->norm_row(x, y, c->w, c->b, c->inner, c->eps, c->rms, c->hint);
            continue;
        }
        double mean = 0, var = 0;
        if (!c->rms) {
            for (int64_t i = 0; i < c->inner; i++) mean += x[i];
            mean /= (double)c->inner;
        }
        for (int64_t i = 0; i < c->inner; i++) {
            double d = x[i] - mean;
            var += d * d;
        }
        var /= (double)c->inner;
        float m = (float)mean, rstd = (float)(1.0 / sqrt(var + c->eps));
        for (int64_t i = 0; i < c->inner; i++) {
            float v = (x[i] - m) * rstd;
            if (c->w) v *= c->w[i];
            if (c->b) v += c->b[i];
            y[i] = v;
        }
    }
    if (c->fast && (c->hint & CPU_FAST_STREAM)) cpu_fast_stream_fence();
}

static em_status exec_layer_rms(const ir_op *op, bool rms)
{
    const ir_tensor *x = op->in[0];
    ir_tensor *out = op->out[0];
    int n_norm = op->p.norm.n_norm;
    bool has_w = op->p.norm.has_weight, has_b = !rms && op->p.norm.has_bias;
    const ir_tensor *w = has_w ? op->in[1] : NULL;
    const ir_tensor *b = has_b ? op->in[has_w ? 2 : 1] : NULL;
    int64_t inner = 1;
    for (int d = x->rank - n_norm; d < x->rank; d++) inner *= x->shape[d];
    int64_t n = ir_numel(x);
    if (n == 0) return EM_OK;
    int64_t rows = n / inner;
    int64_t grain = inner >= 4096 ? 1 : 4096 / inner + 1;
    if (x->dtype == EM_F32 && ir_is_contiguous(x) && (!w || ir_is_contiguous(w)) &&
        (!b || ir_is_contiguous(b))) {
        ln32_ctx c = {(const float *)ir_ptr(x),
                      w ? (const float *)ir_ptr(w) : NULL,
                      b ? (const float *)ir_ptr(b) : NULL,
                      (float *)ir_ptr(out),
                      inner,
                      op->p.norm.eps,
                      rms,
                      cpu_fast(),
                      0};
        cpu_store_plan sp = cpu_store_begin(CPU_STORE_NORM, c.fast ? n * 4 : 0);
        c.hint = sp.hint;
        em_parallel_for(rows, grain, ln32_rows, &c);
        cpu_store_end(&sp);
        return EM_OK;
    }
    double *xv = cpu_load_f64(x), *yv = em_alloc((size_t)n * sizeof(double));
    double *wv = w ? cpu_load_f64(w) : NULL, *bv = b ? cpu_load_f64(b) : NULL;
    em_status st = EM_OK;
    if (!xv || !yv || (w && !wv) || (b && !bv))
        st = EM_ERR_OOM;
    else {
        norm_ctx c = {xv, yv, wv, bv, inner, inner, op->p.norm.eps, rms};
        em_parallel_for(rows, grain, norm_rows, &c);
        cpu_store_f64(out, yv);
    }
    em_free(xv);
    em_free(yv);
    em_free(wv);
    em_free(bv);
    return st;
}

/* NORM_BACKWARD (layer / RMS norm gradients, see ops_norm.c) in f64: the rows are split into a
 * fixed number of chunks (not one per thread, so the sums do not depend on the thread count);
 * each chunk writes its rows' dx and adds its rows' dweight / dbias terms into its own partial
 * row, and the partials are added in chunk order. Contiguous f32 x, g and dx are read and written
 * in place (a row at a time through f64 scratch); any other layout or dtype is loaded whole. */
typedef struct normbw_ctx {
    const double *x, *g; /* f64 copies, or NULL on the f32 path */
    double *dx;
    const float *xf, *gf; /* the f32 path */
    float *dxf;
    const double *w;
    double *pw, *pb; /* [chunks][inner] partial sums, NULL where not asked */
    double *scratch; /* f32 path: [chunks][3 inner] */
    int64_t rows, inner, chunks;
    double eps;
    bool rms;
} normbw_ctx;

static void normbw_row(const normbw_ctx *c, const double *x, const double *g, double *dx,
                       double *pw, double *pb)
{
    const int64_t n = c->inner;
    const double *w = c->w;
    double mean, s1 = 0, s2 = 0, rstd = row_rstd(x, n, c->eps, c->rms, &mean);
    for (int64_t i = 0; i < n; i++) {
        double xh = (x[i] - mean) * rstd, gx = w ? g[i] * w[i] : g[i];
        s1 += gx;
        s2 += gx * xh;
        if (pw) pw[i] += g[i] * xh;
        if (pb) pb[i] += g[i];
    }
    double m1 = c->rms ? 0 : s1 / (double)n, m2 = s2 / (double)n;
    for (int64_t i = 0; i < n; i++) {
        double gx = w ? g[i] * w[i] : g[i];
        dx[i] = rstd * (gx - m1 - (x[i] - mean) * rstd * m2);
    }
}

static void normbw_chunks(void *vctx, int64_t c0, int64_t c1)
{
    const normbw_ctx *c = vctx;
    const int64_t n = c->inner;
    for (int64_t ch = c0; ch < c1; ch++) {
        double *pw = c->pw ? c->pw + ch * n : NULL, *pb = c->pb ? c->pb + ch * n : NULL;
        double *xs = c->scratch ? c->scratch + ch * 3 * n : NULL;
        double *gs = xs ? xs + n : NULL, *ds = xs ? xs + 2 * n : NULL;
        for (int64_t r = ch * c->rows / c->chunks; r < (ch + 1) * c->rows / c->chunks; r++) {
            if (!c->xf) {
                normbw_row(c, c->x + r * n, c->g + r * n, c->dx + r * n, pw, pb);
                continue;
            }
            for (int64_t i = 0; i < n; i++) xs[i] = c->xf[r * n + i], gs[i] = c->gf[r * n + i];
            normbw_row(c, xs, gs, ds, pw, pb);
            for (int64_t i = 0; i < n; i++) c->dxf[r * n + i] = (float)ds[i];
        }
    }
}

static em_status exec_norm_backward(const ir_op *op)
{
    const ir_tensor *x = op->in[0];
    bool has_w = op->p.norm_bw.has_weight, want_w = op->p.norm_bw.want_dw,
         want_b = op->p.norm_bw.want_db;
    const ir_tensor *w = has_w ? op->in[1] : NULL, *g = op->in[has_w ? 2 : 1];
    ir_tensor *dx = op->out[0];
    int64_t inner = 1;
    for (int d = x->rank - op->p.norm_bw.n_norm; d < x->rank; d++) inner *= x->shape[d];
    if (inner == 0) return EM_OK; /* every output is empty */
    int64_t rows = ir_numel(x) / inner;
    /* up to 32 chunks, fewer where the partial rows would pass 32 MiB */
    int64_t chunks = rows < 32 ? rows : 32;
    while (chunks > 1 && chunks * inner * 16 > ((int64_t)32 << 20)) chunks /= 2;
    if (chunks < 1) chunks = 1;
    bool f32 =
        x->dtype == EM_F32 && ir_is_contiguous(x) && ir_is_contiguous(g) && ir_is_contiguous(dx);
    size_t pn = (size_t)(chunks * inner) * sizeof(double);
    normbw_ctx c = {.w = w ? cpu_load_f64(w) : NULL,
                    .pw = want_w ? em_alloc(pn) : NULL,
                    .pb = want_b ? em_alloc(pn) : NULL,
                    .rows = rows,
                    .inner = inner,
                    .chunks = chunks,
                    .eps = op->p.norm_bw.eps,
                    .rms = op->p.norm_bw.rms};
    if (f32) {
        c.xf = (const float *)ir_ptr(x), c.gf = (const float *)ir_ptr(g);
        c.dxf = (float *)ir_ptr(dx);
        c.scratch = em_alloc(pn * 3);
    } else {
        c.x = cpu_load_f64(x), c.g = cpu_load_f64(g);
        c.dx = em_alloc((size_t)(rows * inner) * sizeof(double));
    }
    em_status st = EM_OK;
    if ((w && !c.w) || (want_w && !c.pw) || (want_b && !c.pb) || (f32 && !c.scratch) ||
        (!f32 && (!c.x || !c.g || (rows && !c.dx)))) {
        st = em_error(EM_ERR_OOM, "norm_backward: out of memory");
    } else {
        if (c.pw) memset(c.pw, 0, pn);
        if (c.pb) memset(c.pb, 0, pn);
        em_parallel_for(chunks, 1, normbw_chunks, &c);
        if (!f32) cpu_store_f64(dx, c.dx);
        double *p[2] = {c.pw, c.pb};
        for (int k = 0, o = 1; k < 2; k++) {
            if (!p[k]) continue;
            for (int64_t ch = 1; ch < chunks; ch++) /* in chunk order */
                for (int64_t i = 0; i < inner; i++) p[k][i] += p[k][ch * inner + i];
            cpu_store_f64(op->out[o++], p[k]);
        }
    }
    em_free((void *)c.x);
    em_free((void *)c.g);
    em_free(c.dx);
    em_free((void *)c.w);
    em_free(c.pw);
    em_free(c.pb);
    em_free(c.scratch);
    return st;
}

/* Group norm: for each sample and group, normalise C/G channels x spatial; then per-channel
 * affine. */
static em_status exec_group_norm(const ir_op *op)
{
    const ir_tensor *x = op->in[0];
    int64_t G = op->p.norm.groups;
    bool has_w = op->p.norm.has_weight, has_b = op->p.norm.has_bias;
    const ir_tensor *w = has_w ? op->in[1] : NULL;
    const ir_tensor *b = has_b ? op->in[has_w ? 2 : 1] : NULL;
    int64_t N = x->shape[0], C = x->shape[1];
    int64_t n = ir_numel(x);
    if (n == 0) return EM_OK;
    int64_t spatial = n / (N * C);
    double *xv = cpu_load_f64(x), *yv = em_alloc((size_t)n * sizeof(double));
    double *wv = w ? cpu_load_f64(w) : NULL, *bv = b ? cpu_load_f64(b) : NULL;
    if (!xv || !yv || (w && !wv) || (b && !bv)) {
        em_free(xv);
        em_free(yv);
        em_free(wv);
        em_free(bv);
        return EM_ERR_OOM;
    }
    /* normalise each (sample, group) block, no affine */
    norm_ctx c = {xv, yv, NULL, NULL, (C / G) * spatial, 1, op->p.norm.eps, false};
    em_parallel_for(N * G, 1, norm_rows, &c);
    for (int64_t s = 0; s < N; s++)
        for (int64_t ch = 0; ch < C; ch++) {
            double *y = yv + (s * C + ch) * spatial;
            double wk = wv ? wv[ch] : 1, bk = bv ? bv[ch] : 0;
            for (int64_t i = 0; i < spatial; i++) y[i] = y[i] * wk + bk;
        }
    cpu_store_f64(op->out[0], yv);
    em_free(xv);
    em_free(yv);
    em_free(wv);
    em_free(bv);
    return EM_OK;
}

static em_status exec_batch_norm(const ir_op *op)
{
    const ir_tensor *x = op->in[0];
    bool has_w = op->p.norm.has_weight, has_b = op->p.norm.has_bias;
    const ir_tensor *w = has_w ? op->in[3] : NULL;
    const ir_tensor *b = has_b ? op->in[has_w ? 4 : 3] : NULL;
    int64_t N = x->shape[0], C = x->shape[1];
    int64_t n = ir_numel(x);
    if (n == 0) return EM_OK;
    int64_t spatial = n / (N * C);
    double *xv = cpu_load_f64(x), *yv = em_alloc((size_t)n * sizeof(double));
    double *mv = cpu_load_f64(op->in[1]), *vv = cpu_load_f64(op->in[2]);
    double *wv = w ? cpu_load_f64(w) : NULL, *bv = b ? cpu_load_f64(b) : NULL;
    em_status st = EM_OK;
    if (!xv || !yv || !mv || !vv || (w && !wv) || (b && !bv))
        st = EM_ERR_OOM;
    else {
        for (int64_t s = 0; s < N; s++)
            for (int64_t ch = 0; ch < C; ch++) {
                double scale = 1.0 / sqrt(vv[ch] + op->p.norm.eps) * (wv ? wv[ch] : 1);
                double shift = (bv ? bv[ch] : 0) - mv[ch] * scale;
                const double *xr = xv + (s * C + ch) * spatial;
                double *yr = yv + (s * C + ch) * spatial;
                for (int64_t i = 0; i < spatial; i++) yr[i] = xr[i] * scale + shift;
            }
        cpu_store_f64(op->out[0], yv);
    }
    em_free(xv);
    em_free(yv);
    em_free(mv);
    em_free(vv);
    em_free(wv);
    em_free(bv);
    return st;
}

/* Attention: for each batch index and query row, scores over S, masked softmax, weighted sum. */
typedef struct sdpa_ctx {
    const ir_op *op;
    int64_t L, S, E, Ev;
    int nb; /* batch rank */
    const int64_t *bshape;
    atomic_int oom; /* set when a worker could not get its scratch row */
} sdpa_ctx;

/* Element address of t at batch index bidx (broadcast against the output batch shape), row,
 * col of its last two dims. */
static const char *at(const ir_tensor *t, int nb, const int64_t *bidx, int64_t row, int64_t col)
{
    int64_t off = 0;
    int lead = nb - (t->rank - 2);
    for (int d = 0; d < t->rank - 2; d++) {
        int64_t i = bidx[d + lead];
        if (t->shape[d] == 1) i = 0;
        off += i * t->strides[d];
    }
    off += row * t->strides[t->rank - 2] + col * t->strides[t->rank - 1];
    return ir_ptr(t) + off * (int64_t)em_dtype_size(t->dtype);
}

/* Mask value at [bidx, i, j] (mask broadcast to [batch..., L, S]). */
static const char *mask_at(const ir_tensor *m, int nb, const int64_t *bidx, int64_t i, int64_t j)
{
    int64_t full[EM_MAX_RANK];
    for (int d = 0; d < nb; d++) full[d] = bidx[d];
    full[nb] = i;
    full[nb + 1] = j;
    int lead = nb + 2 - m->rank;
    int64_t off = 0;
    for (int d = 0; d < m->rank; d++) {
        int64_t idx = m->shape[d] == 1 ? 0 : full[d + lead];
        off += idx * m->strides[d];
    }
    return ir_ptr(m) + off * (int64_t)em_dtype_size(m->dtype);
}

static void sdpa_rows(void *vctx, int64_t r0, int64_t r1)
{
    sdpa_ctx *c = vctx;
    const ir_op *op = c->op;
    const ir_tensor *q = op->in[0], *k = op->in[1], *v = op->in[2];
    const ir_tensor *mask = op->n_in > 3 ? op->in[3] : NULL;
    ir_tensor *out = op->out[0];
    bool causal = op->p.sdpa.causal;
    int mkind = op->p.sdpa.mask_kind;
    double scale = op->p.sdpa.scale;
    double *s = em_alloc((size_t)(c->S + c->E + c->Ev + 3) * sizeof(double));
    if (!s) {
        atomic_store(&c->oom, 1);
        return;
    }
    double *qrow = s + c->S, *acc = qrow + c->E;
    size_t es = em_dtype_size(out->dtype);
    for (int64_t r = r0; r < r1; r++) {
        int64_t b = r / c->L, i = r % c->L;
        int64_t bidx[EM_MAX_RANK];
        int64_t rem = b;
        for (int d = c->nb - 1; d >= 0; d--) {
            bidx[d] = rem % c->bshape[d];
            rem /= c->bshape[d];
        }
        for (int64_t e = 0; e < c->E; e++) qrow[e] = ir_get_f64(at(q, c->nb, bidx, i, e), q->dtype);
        double mx = -INFINITY;
        for (int64_t j = 0; j < c->S; j++) {
            bool keep = !(causal && j > i);
            double add = 0;
            if (mask && mkind == 1)
                keep = keep && *(const uint8_t *)mask_at(mask, c->nb, bidx, i, j);
            if (mask && mkind == 2) add = ir_get_f64(mask_at(mask, c->nb, bidx, i, j), mask->dtype);
            double sc = -INFINITY;
            if (keep) {
                double dot = 0;
                for (int64_t e = 0; e < c->E; e++)
                    dot += qrow[e] * ir_get_f64(at(k, c->nb, bidx, j, e), k->dtype);
                sc = dot * scale + add;
            }
            s[j] = sc;
            if (sc > mx) mx = sc;
        }
        double sum = 0;
        for (int64_t j = 0; j < c->S; j++) {
            s[j] = mx == -INFINITY ? NAN : exp(s[j] - mx);
            sum += s[j];
        }
        for (int64_t e = 0; e < c->Ev; e++) acc[e] = 0;
        for (int64_t j = 0; j < c->S; j++) {
            double p = s[j] / sum;
            if (p == 0) continue;
            for (int64_t e = 0; e < c->Ev; e++)
                acc[e] += p * ir_get_f64(at(v, c->nb, bidx, j, e), v->dtype);
        }
        char *dst = ir_ptr(out) + (r * c->Ev) * (int64_t)es;
        for (int64_t e = 0; e < c->Ev; e++)
            ir_set_f64(dst + e * (int64_t)es, out->dtype, c->S == 0 ? 0.0 : acc[e]);
    }
    em_free(s);
}

/* ---- attention through the GEMM (f32/f64, matrix-like q, k, v) -------------------------------
 * Per batch index and block of query rows: scores = scale Q K^T (one GEMM), the mask and a
 * softmax per row in place, then out = P V (a second GEMM). Units (batch, block) run in parallel;
 * the GEMMs inside a unit run on its thread. A unit whose V holds a non-finite value takes the
 * row-by-row path above, which skips zero probabilities (0 * inf would make NaN here). */

/* Operand layout of the last two dims: trans = stored transposed; ld = leading dimension. */
static bool mat_layout(const ir_tensor *t, bool *trans, int64_t *ld)
{
    int64_t rs = t->strides[t->rank - 2], cs = t->strides[t->rank - 1];
    int64_t rows = t->shape[t->rank - 2], cols = t->shape[t->rank - 1];
    if (cs == 1 || cols <= 1) {
        *trans = false;
        *ld = rows <= 1 ? (cols > 1 ? cols : 1) : rs;
        return *ld >= cols;
    }
    if (rs == 1 || rows <= 1) {
        *trans = true;
        *ld = cs;
        return *ld >= rows;
    }
    return false;
}

typedef struct sdpa_gemm_ctx {
    sdpa_ctx *c;
    int64_t lb, nblk;
    bool tq, tk, tv;
    int64_t ldq, ldk, ldv;
    atomic_int oom;
} sdpa_gemm_ctx;

/* row[0, n) <- its softmax in place, given its max mx: the exponentials summed in double, then
 * one reciprocal multiplied in; a row whose max is -inf (every score masked) becomes NaN. */
#define SOFTMAX_ROW(T, EXP, row, n, mx)                                                            \
    do {                                                                                           \
        double sum_ = 0;                                                                           \
        for (int64_t j_ = 0; j_ < (n); j_++) {                                                     \
            T e_ = (mx) == -INFINITY ? (T)NAN : EXP((row)[j_] - (mx));                             \
            (row)[j_] = e_;                                                                        \
            sum_ += e_;                                                                            \
        }                                                                                          \
        T inv_ = (T)(1 / sum_);                                                                    \
        for (int64_t j_ = 0; j_ < (n); j_++) (row)[j_] *= inv_;                                    \
    } while (0)

#define SDPA_BLOCK(T, GEMM, EXP)                                                                   \
    do {                                                                                           \
        T *sc = (T *)scratch;                                                                      \
        const T *qp = (const T *)at(q, c->nb, bidx, i0, 0);                                        \
        const T *kp = (const T *)at(k, c->nb, bidx, 0, 0);                                         \
        const T *vp = (const T *)at(v, c->nb, bidx, 0, 0);                                         \
        /* sc [rows, S] = scale * Q[i0:i0+rows] . K^T */                                           \
        GEMM(g->tq, !g->tk, rows, c->S, c->E, (T)scale, qp, g->ldq, kp, g->ldk, 0, sc, c->S);      \
        for (int64_t r = 0; r < rows; r++) {                                                       \
            T *row = sc + r * c->S, mx = -INFINITY;                                                \
            int64_t i = i0 + r;                                                                    \
            for (int64_t j = 0; j < c->S; j++) {                                                   \
                bool keep = !(causal && j > i);                                                    \
                if (mask && mkind == 1)                                                            \
                    keep = keep && *(const uint8_t *)mask_at(mask, c->nb, bidx, i, j);             \
                T x = -INFINITY;                                                                   \
                if (keep) {                                                                        \
                    x = row[j];                                                                    \
                    if (mask && mkind == 2)                                                        \
                        x += (T)ir_get_f64(mask_at(mask, c->nb, bidx, i, j), mask->dtype);         \
                }                                                                                  \
                row[j] = x;                                                                        \
                if (x > mx) mx = x;                                                                \
            }                                                                                      \
            SOFTMAX_ROW(T, EXP, row, c->S, mx);                                                    \
        }                                                                                          \
        /* out [rows, Ev] = P . V */                                                               \
        GEMM(false, g->tv, rows, c->Ev, c->S, (T)1, sc, c->S, vp, g->ldv, 0, (T *)dst, c->Ev);     \
    } while (0)

static bool finite_v(const sdpa_ctx *c, const ir_tensor *v, const int64_t *bidx)
{
    for (int64_t j = 0; j < c->S; j++)
        for (int64_t e = 0; e < c->Ev; e++)
            if (!isfinite(ir_get_f64(at(v, c->nb, bidx, j, e), v->dtype))) return false;
    return true;
}

static void sdpa_gemm_units(void *vctx, int64_t u0, int64_t u1)
{
    sdpa_gemm_ctx *g = vctx;
    sdpa_ctx *c = g->c;
    const ir_op *op = c->op;
    const ir_tensor *q = op->in[0], *k = op->in[1], *v = op->in[2];
    const ir_tensor *mask = op->n_in > 3 ? op->in[3] : NULL;
    ir_tensor *out = op->out[0];
    bool causal = op->p.sdpa.causal;
    int mkind = op->p.sdpa.mask_kind;
    double scale = op->p.sdpa.scale;
    size_t es = em_dtype_size(out->dtype);
    void *scratch = em_alloc((size_t)(g->lb * c->S) * es);
    if (!scratch) {
        atomic_store(&g->oom, 1);
        return;
    }
    for (int64_t u = u0; u < u1; u++) {
        int64_t b = u / g->nblk, i0 = (u % g->nblk) * g->lb;
        int64_t rows = c->L - i0 < g->lb ? c->L - i0 : g->lb;
        int64_t bidx[EM_MAX_RANK], rem = b;
        for (int d = c->nb - 1; d >= 0; d--) {
            bidx[d] = rem % c->bshape[d];
            rem /= c->bshape[d];
        }
        char *dst = ir_ptr(out) + ((b * c->L + i0) * c->Ev) * (int64_t)es;
        if (!finite_v(c, v, bidx)) {
            sdpa_rows(c, b * c->L + i0, b * c->L + i0 + rows);
            continue;
        }
        if (out->dtype == EM_F32)
            SDPA_BLOCK(float, cpu_sgemm, expf);
        else
            SDPA_BLOCK(double, cpu_dgemm, exp);
    }
    em_free(scratch);
}

/* True when the GEMM path ran op (f32/f64, every operand matrix-like, S > 0). */
static bool sdpa_gemm(sdpa_ctx *c, em_status *st)
{
    const ir_op *op = c->op;
    const ir_tensor *q = op->in[0], *k = op->in[1], *v = op->in[2];
    em_dtype dt = op->out[0]->dtype;
    if ((dt != EM_F32 && dt != EM_F64) || q->dtype != dt || k->dtype != dt || v->dtype != dt ||
        c->S == 0 || c->L == 0)
        return false;
    sdpa_gemm_ctx g = {.c = c};
    if (!mat_layout(q, &g.tq, &g.ldq) || !mat_layout(k, &g.tk, &g.ldk) ||
        !mat_layout(v, &g.tv, &g.ldv))
        return false;
    /* blocks of up to 64 query rows, and at most 2^20 scores of scratch per unit */
    g.lb = c->L < 64 ? c->L : 64;
    while (g.lb > 1 && g.lb * c->S > ((int64_t)1 << 20)) g.lb /= 2;
    g.nblk = (c->L + g.lb - 1) / g.lb;
    int64_t batches = ir_numel(op->out[0]) / (c->L * c->Ev);
    atomic_init(&g.oom, 0);
    em_parallel_for(batches * g.nblk, 1, sdpa_gemm_units, &g);
    *st = atomic_load(&g.oom) || atomic_load(&c->oom) ? EM_ERR_OOM : EM_OK;
    return true;
}

static em_status exec_sdpa(const ir_op *op)
{
    ir_tensor *out = op->out[0];
    int nb = out->rank - 2;
    sdpa_ctx c = {
        .op = op,
        .L = out->shape[nb],
        .Ev = out->shape[nb + 1],
        .S = op->in[1]->shape[op->in[1]->rank - 2],
        .E = op->in[0]->shape[op->in[0]->rank - 1],
        .nb = nb,
        .bshape = out->shape,
    };
    int64_t rows = ir_numel(out) / (c.Ev ? c.Ev : 1);
    if (c.Ev == 0) return EM_OK;
    atomic_init(&c.oom, 0);
    em_status st;
    if (sdpa_gemm(&c, &st)) return st;
    int64_t grain = c.S * c.E > 4096 ? 1 : 16;
    em_parallel_for(rows, grain, sdpa_rows, &c);
    return atomic_load(&c.oom) ? EM_ERR_OOM : EM_OK;
}

/* ---- attention backward (SDPA_BACKWARD) ------------------------------------------------------
 * Per batch index, blocks of query rows: P = softmax(scale Q K^T + mask) as the forward's GEMM
 * path computes it (a fully masked row all zero), D = rowsum(G * O), dS = P * (G V^T - D), then
 * dQ = scale dS K for the block, dV += P^T G and dK += scale dS^T Q over the blocks in order.
 * f64 records compute in f64, the others in f32 (f16/bf16 widened). The GEMMs use the pool;
 * the row work between them is spread over it too. */

typedef struct bwd_geo {
    const ir_op *op;
    int nb;
    const int64_t *bshape;
    int64_t L, S, E, Ev, lb; /* lb: query rows per block */
    atomic_int *oom;         /* set when a task could not get its scratch */
} bwd_geo;

/* rows x cols of t at batch index bidx from row r0, widened into dst (row-major, ld cols). */
static void load_rows(const ir_tensor *t, const bwd_geo *c, const int64_t *bidx, int64_t r0,
                      int64_t rows, int64_t cols, void *dst, bool dbl)
{
    bool direct = t->dtype == (dbl ? EM_F64 : EM_F32) && t->strides[t->rank - 1] == 1;
    size_t es = dbl ? sizeof(double) : sizeof(float);
    for (int64_t r = 0; r < rows; r++) {
        char *d = (char *)dst + (size_t)(r * cols) * es;
        if (direct) {
            memcpy(d, at(t, c->nb, bidx, r0 + r, 0), (size_t)cols * es);
            continue;
        }
        for (int64_t e = 0; e < cols; e++) {
            double x = ir_get_f64(at(t, c->nb, bidx, r0 + r, e), t->dtype);
            if (dbl)
                ((double *)d)[e] = x;
            else
                ((float *)d)[e] = (float)x;
        }
    }
}

/* rows x cols from src (row-major) into the contiguous output `out` at element offset off. */
static void store_rows(ir_tensor *out, int64_t off, int64_t n, const void *src, bool dbl)
{
    size_t es = em_dtype_size(out->dtype);
    char *d = ir_ptr(out) + off * (int64_t)es;
    if (out->dtype == (dbl ? EM_F64 : EM_F32)) {
        memcpy(d, src, (size_t)n * es);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        ir_set_f64(d + i * (int64_t)es, out->dtype,
                   dbl ? ((const double *)src)[i] : (double)((const float *)src)[i]);
}

typedef struct bwd_rows_ctx {
    const bwd_geo *c;
    const int64_t *bidx;
    int64_t i0;
    void *p, *dp, *dd; /* [rows, S] scores then probabilities; [rows, S] dP then dS; [rows] D */
    const void *o, *g; /* [rows, Ev] the block's output and output gradient */
    const cpu_fast_ops *fast;
    bool dbl, second; /* second: turn dP into dS, else scores into P and compute D */
} bwd_rows_ctx;

#define SDPA_BWD_ROWS(T, EXP, FAST)                                                                \
    do {                                                                                           \
        T *P = (T *)x->p, *DP = (T *)x->dp, *DD = (T *)x->dd;                                      \
        for (int64_t r = r0; r < r1; r++) {                                                        \
            T *row = P + r * c->S, *drow = DP + r * c->S;                                          \
            int64_t i = x->i0 + r;                                                                 \
            if (x->second) {                                                                       \
                for (int64_t j = 0; j < c->S; j++) drow[j] = row[j] * (drow[j] - DD[r]);           \
                continue;                                                                          \
            }                                                                                      \
            T mx = -INFINITY;                                                                      \
            for (int64_t j = 0; j < c->S; j++) {                                                   \
                bool keep = !(causal && j > i);                                                    \
                if (mask && mkind == 1)                                                            \
                    keep = keep && *(const uint8_t *)mask_at(mask, c->nb, x->bidx, i, j);          \
                T s = -INFINITY;                                                                   \
                if (keep) {                                                                        \
                    s = row[j];                                                                    \
                    if (mask && mkind == 2)                                                        \
                        s += (T)ir_get_f64(mask_at(mask, c->nb, x->bidx, i, j), mask->dtype);      \
                }                                                                                  \
                row[j] = s;                                                                        \
                if (s > mx) mx = s;                                                                \
            }                                                                                      \
            if (mx == -INFINITY) { /* every key masked: no probability, no gradient */             \
                for (int64_t j = 0; j < c->S; j++) row[j] = 0;                                     \
                DD[r] = 0;                                                                         \
                continue;                                                                          \
            }                                                                                      \
            if (FAST) { /* the softmax kernel em_softmax runs */                                   \
                (FAST)->softmax_row((const float *)row, (float *)row, c->S, false, 0);             \
            } else {                                                                               \
                SOFTMAX_ROW(T, EXP, row, c->S, mx);                                                \
            }                                                                                      \
            const T *orow = (const T *)x->o + r * c->Ev, *grow = (const T *)x->g + r * c->Ev;      \
            double d = 0;                                                                          \
            for (int64_t e = 0; e < c->Ev; e++) d += (double)orow[e] * (double)grow[e];            \
            DD[r] = (T)d;                                                                          \
        }                                                                                          \
    } while (0)

static void bwd_rows(void *vctx, int64_t r0, int64_t r1)
{
    const bwd_rows_ctx *x = vctx;
    const bwd_geo *c = x->c;
    const ir_op *op = c->op;
    const ir_tensor *mask = ir_sdpa_bwd_mask(op); /* the lse, if any, is not used here */
    bool causal = op->p.sdpa.causal;
    int mkind = op->p.sdpa.mask_kind;
    if (x->dbl)
        SDPA_BWD_ROWS(double, exp, (const cpu_fast_ops *)NULL);
    else
        SDPA_BWD_ROWS(float, expf, x->fast);
}

#define SDPA_BWD_GEMM(T, GEMM)                                                                     \
    do {                                                                                           \
        T *Kb = (T *)kbuf, *Vb = (T *)vbuf, *Qb = (T *)qbuf, *Gb = (T *)gbuf;                      \
        T *P = (T *)pbuf, *DP = (T *)dpbuf, *dQ = (T *)dqbuf, *dK = (T *)dkbuf, *dV = (T *)dvbuf;  \
        T sc = (T)scale;                                                                           \
        /* P [rows, S] = scale Q K^T, then masked and normalised by bwd_rows */                    \
        GEMM(false, true, rows, c.S, c.E, sc, Qb, c.E, Kb, c.E, 0, P, c.S);                        \
        rx.second = false;                                                                         \
        em_parallel_for(rows, grain, bwd_rows, &rx);                                               \
        /* dP [rows, S] = G V^T; dS = P (dP - D) in place */                                       \
        GEMM(false, true, rows, c.S, c.Ev, (T)1, Gb, c.Ev, Vb, c.Ev, 0, DP, c.S);                  \
        rx.second = true;                                                                          \
        em_parallel_for(rows, grain, bwd_rows, &rx);                                               \
        GEMM(false, false, rows, c.E, c.S, sc, DP, c.S, Kb, c.E, 0, dQ, c.E);                      \
        GEMM(true, false, c.S, c.Ev, rows, (T)1, P, c.S, Gb, c.Ev, (T)(i0 ? 1 : 0), dV, c.Ev);     \
        GEMM(true, false, c.S, c.E, rows, sc, DP, c.S, Qb, c.E, (T)(i0 ? 1 : 0), dK, c.E);         \
    } while (0)

/* Batch indices [b0, b1) of the record, one after the other with their own scratch. */
static void bwd_batches(void *vctx, int64_t b0, int64_t b1)
{
    const bwd_geo *cp = vctx;
    bwd_geo c = *cp;
    const ir_op *op = c.op;
    ir_tensor *dq = op->out[0], *dk = op->out[1], *dv = op->out[2];
    bool dbl = dq->dtype == EM_F64;
    size_t ts = dbl ? sizeof(double) : sizeof(float);
    double scale = op->p.sdpa.scale;
    int64_t lb = c.lb;
    void *kbuf = em_alloc((size_t)(c.S * c.E) * ts), *vbuf = em_alloc((size_t)(c.S * c.Ev) * ts);
    void *dkbuf = em_alloc((size_t)(c.S * c.E) * ts), *dvbuf = em_alloc((size_t)(c.S * c.Ev) * ts);
    void *qbuf = em_alloc((size_t)(lb * c.E) * ts), *gbuf = em_alloc((size_t)(lb * c.Ev) * ts);
    void *dqbuf = em_alloc((size_t)(lb * c.E) * ts), *ddbuf = em_alloc((size_t)lb * ts);
    void *pbuf = em_alloc((size_t)(lb * c.S) * ts), *dpbuf = em_alloc((size_t)(lb * c.S) * ts);
    void *obuf = em_alloc((size_t)(lb * c.Ev) * ts);
    bool ok =
        kbuf && vbuf && dkbuf && dvbuf && qbuf && gbuf && dqbuf && ddbuf && pbuf && dpbuf && obuf;
    if (!ok) atomic_store(cp->oom, 1);
    int64_t grain = c.S * (c.E + c.Ev) > 4096 ? 1 : 8;
    const cpu_fast_ops *fast = dbl ? NULL : cpu_fast();
    for (int64_t b = b0; b < b1 && ok; b++) {
        int64_t bidx[EM_MAX_RANK], rem = b;
        for (int d = c.nb - 1; d >= 0; d--) {
            bidx[d] = rem % c.bshape[d];
            rem /= c.bshape[d];
        }
        load_rows(op->in[1], &c, bidx, 0, c.S, c.E, kbuf, dbl);
        load_rows(op->in[2], &c, bidx, 0, c.S, c.Ev, vbuf, dbl);
        for (int64_t i0 = 0; i0 < c.L; i0 += lb) {
            int64_t rows = c.L - i0 < lb ? c.L - i0 : lb;
            load_rows(op->in[0], &c, bidx, i0, rows, c.E, qbuf, dbl);
            load_rows(op->in[4], &c, bidx, i0, rows, c.Ev, gbuf, dbl);
            load_rows(op->in[3], &c, bidx, i0, rows, c.Ev, obuf, dbl);
            bwd_rows_ctx rx = {&c, bidx, i0, pbuf, dpbuf, ddbuf, obuf, gbuf, fast, dbl, false};
            if (dbl)
                SDPA_BWD_GEMM(double, cpu_dgemm);
            else
                SDPA_BWD_GEMM(float, cpu_sgemm);
            store_rows(dq, (b * c.L + i0) * c.E, rows * c.E, dqbuf, dbl);
        }
        store_rows(dk, b * c.S * c.E, c.S * c.E, dkbuf, dbl);
        store_rows(dv, b * c.S * c.Ev, c.S * c.Ev, dvbuf, dbl);
    }
    em_free(kbuf);
    em_free(vbuf);
    em_free(dkbuf);
    em_free(dvbuf);
    em_free(qbuf);
    em_free(gbuf);
    em_free(dqbuf);
    em_free(ddbuf);
    em_free(pbuf);
    em_free(dpbuf);
    em_free(obuf);
}

static em_status exec_sdpa_backward(const ir_op *op)
{
    ir_tensor *dq = op->out[0], *dk = op->out[1], *dv = op->out[2];
    int nb = dq->rank - 2;
    atomic_int oom;
    atomic_init(&oom, 0);
    bwd_geo c = {
        .op = op,
        .nb = nb,
        .bshape = dq->shape,
        .L = dq->shape[nb],
        .E = dq->shape[nb + 1],
        .S = dk->shape[nb],
        .Ev = dv->shape[nb + 1],
        .oom = &oom,
    };
    int64_t nbatch = 1;
    for (int d = 0; d < nb; d++) nbatch *= dq->shape[d];
    size_t es = em_dtype_size(dq->dtype);
    if (c.L == 0 || c.S == 0 || nbatch == 0) { /* no scores: every gradient is zero */
        memset(ir_ptr(dq), 0, (size_t)ir_numel(dq) * es);
        memset(ir_ptr(dk), 0, (size_t)ir_numel(dk) * es);
        memset(ir_ptr(dv), 0, (size_t)ir_numel(dv) * es);
        return EM_OK;
    }
    /* blocks of query rows holding at most 2^20 scores (two such matrices per block) */
    c.lb = c.L;
    while (c.lb > 16 && c.lb * c.S > ((int64_t)1 << 20)) c.lb = (c.lb + 1) / 2;
    /* enough batch indices for every thread: one per task (the GEMMs inside run inline);
       otherwise one after the other, each spread over the pool by its GEMMs and row loops */
    if (nbatch >= 2 * (int64_t)em_get_num_threads())
        em_parallel_for(nbatch, 1, bwd_batches, &c);
    else
        bwd_batches(&c, 0, nbatch);
    return atomic_load(&oom) ? em_error(EM_ERR_OOM, "em_sdpa_backward: out of memory") : EM_OK;
}

typedef struct drop_ctx {
    const ir_op *op;
    double keep_scale;
} drop_ctx;

static void drop_range(void *vctx, int64_t b, int64_t e)
{
    const drop_ctx *c = vctx;
    const ir_op *op = c->op;
    const ir_tensor *x = op->in[0];
    ir_tensor *out = op->out[0];
    size_t es = em_dtype_size(out->dtype);
    for (int64_t i = b; i < e; i++) {
        const em_p_random *r = &op->p.random;
        double u = em_rng_uniform_at(r->seed, r->offset, (uint64_t)i);
        double v = u >= r->p ? ir_get_f64(ir_elem(x, i), x->dtype) * c->keep_scale : 0.0;
        ir_set_f64(ir_ptr(out) + i * (int64_t)es, out->dtype, v);
    }
}

em_status cpu_exec_norm(const ir_op *op)
{
    switch (op->kind) {
    case EM_OP_LAYER_NORM: return exec_layer_rms(op, false);
    case EM_OP_RMS_NORM: return exec_layer_rms(op, true);
    case EM_OP_GROUP_NORM: return exec_group_norm(op);
    case EM_OP_BATCH_NORM: return exec_batch_norm(op);
    case EM_OP_SDPA: return exec_sdpa(op);
    case EM_OP_SDPA_BACKWARD: return exec_sdpa_backward(op);
    case EM_OP_NORM_BACKWARD: return exec_norm_backward(op);
    case EM_OP_DROPOUT: {
        drop_ctx c = {op, op->p.random.p >= 1 ? 0.0 : 1.0 / (1.0 - op->p.random.p)};
        em_parallel_for(ir_numel(op->out[0]), 4096, drop_range, &c);
        return EM_OK;
    }
    default: break;
    }
    return em_error(EM_ERR_UNSUPPORTED, "cpu: op %s is not a norm op", em_op_name(op->kind));
}
