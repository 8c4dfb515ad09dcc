/* CUDA host code for LAYER_NORM (the cases the row kernel of rows.cu does not take), RMS_NORM,
 * GROUP_NORM, BATCH_NORM, RFFT, IRFFT and integer MATMUL, with kernels in kernels/conv_nn.cu; also
 * the staging (strided -> contiguous, f16/bf16 -> f32) the convolutions and pools use. */
#include <stdio.h>
#include <string.h>

#include "cuda.h"
#include "cuda_nn.h"

typedef struct nnv_arg { /* matches `struct nnv` in kernels/conv_nn.cu */
    int64_t shape[8], st[8];
    int rank;
} nnv_arg;

typedef struct fft_arg { /* matches `struct fftg` in kernels/conv_nn.cu */
    int64_t outer, inner, L, n, P;
    int64_t so, sl, si, sc;
} fft_arg;

typedef cuda_mm_geom imm_arg;

static bool is_float(em_dtype dt)
{
    return dt == EM_F32 || dt == EM_F64 || dt == EM_F16 || dt == EM_BF16;
}

static const char *fname(em_dtype dt)
{
    return dt == EM_F32 ? "f32" : dt == EM_F64 ? "f64" : dt == EM_F16 ? "f16" : "bf16";
}

/* t's element strides, with dims merged where they are contiguous to each other (fewer divides
 * in the kernels); a rank-0 tensor becomes [1]. */
static nnv_arg view_of(const ir_tensor *t)
{
    nnv_arg v;
    memset(&v, 0, sizeof v);
    v.rank = 0;
    for (int d = 0; d < t->rank; d++) {
        if (t->shape[d] == 1) continue;
        if (v.rank > 0 && v.st[v.rank - 1] == t->strides[d] * t->shape[d]) {
            v.shape[v.rank - 1] *= t->shape[d];
            v.st[v.rank - 1] = t->strides[d];
        } else {
            v.shape[v.rank] = t->shape[d];
            v.st[v.rank] = t->strides[d];
            v.rank++;
        }
    }
    if (v.rank == 0) v.shape[0] = 1, v.st[0] = 0, v.rank = 1;
    return v;
}

static CUfunction kernel2(int dev, const char *fam, em_dtype dt, const char *what)
{
    char name[48];
    snprintf(name, sizeof name, "em_nn_%s_%s", fam, fname(dt));
    return cuda_kernel(dev, name, what);
}

/* ---- norms ---------------------------------------------------------------------------------- */

static bool norm_ok(const ir_op *op)
{
    const ir_tensor *x = op->in[0];
    if (!is_float(x->dtype) || op->n_out != 1 || op->out[0]->dtype != x->dtype ||
        !ir_is_contiguous(op->out[0]) || x->rank > 8)
        return false;
    for (int i = 1; i < op->n_in; i++)
        if (op->in[i]->dtype != x->dtype || op->in[i]->rank > 8) return false;
    if (op->kind == EM_OP_GROUP_NORM || op->kind == EM_OP_BATCH_NORM) return x->rank >= 2;
    return true;
}

/* Threads per block for `rows` rows of `inner` elements: a multiple of 32 up to 256, or 1024 for
 * few long rows (group norm's), so that the device fills up. */
static unsigned row_threads(int64_t rows, int64_t inner)
{
    if (inner >= 8192 && rows < 2048) return 1024;
    int64_t t = (inner + 31) / 32 * 32;
    return (unsigned)(t < 32 ? 32 : t > 256 ? 256 : t);
}

static em_status run_norm(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *x = op->in[0], *y = op->out[0];
    int64_t n = ir_numel(x);
    if (n == 0) return EM_OK;
    bool rms = op->kind == EM_OP_RMS_NORM;
    int64_t inner = 1, rg = 1, sp = 1;
    if (op->kind == EM_OP_GROUP_NORM) {
        int64_t N = x->shape[0], C = x->shape[1], G = op->p.norm.groups;
        sp = n / (N * C);
        inner = (C / G) * sp;
        rg = G;
    } else
        for (int d = x->rank - op->p.norm.n_norm; d < x->rank; d++) inner *= x->shape[d];
    if (inner == 0) return EM_OK;
    int64_t rows = n / inner;
    bool has_w = op->p.norm.has_weight, has_b = !rms && op->p.norm.has_bias;
    const ir_tensor *w = has_w ? op->in[1] : NULL, *b = has_b ? op->in[has_w ? 2 : 1] : NULL;
    nnv_arg xv = view_of(x), wv = w ? view_of(w) : view_of(x), bv = b ? view_of(b) : view_of(x);
    CUfunction f = kernel2(dev, "norm", x->dtype, what);
    if (!f) return em_last_status();
    void *xp = ir_ptr(x), *yp = ir_ptr(y);
    void *wp = w ? ir_ptr(w) : NULL, *bp = b ? ir_ptr(b) : NULL;
    int irms = rms;
    double eps = op->p.norm.eps;
    int cached = inner <= 6144; /* the row in 48 KiB of shared memory */
    void *params[] = {&xp,   &xv,    &yp, &wp, &wv,   &bp,  &bv,
                      &rows, &inner, &rg, &sp, &irms, &eps, &cached};
    unsigned grid[3] = {(unsigned)(rows > (1 << 20) ? (1 << 20) : rows), 1, 1};
    unsigned block[3] = {row_threads(rows, inner), 1, 1};
    unsigned smem = cached ? (unsigned)(inner * 8) : 0;
    return cuda_launch_grid_smem(dev, f, grid, block, smem, params, what);
}

static em_status run_batch_norm(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *x = op->in[0], *y = op->out[0];
    long long n = ir_numel(x);
    if (n == 0) return EM_OK;
    long long C = x->shape[1], sp = n / (x->shape[0] * C);
    bool has_w = op->p.norm.has_weight, has_b = op->p.norm.has_bias;
    const ir_tensor *m = op->in[1], *v = op->in[2];
    const ir_tensor *w = has_w ? op->in[3] : NULL, *b = has_b ? op->in[has_w ? 4 : 3] : NULL;
    nnv_arg xv = view_of(x), mv = view_of(m), vv = view_of(v);
    nnv_arg wv = w ? view_of(w) : mv, bv = b ? view_of(b) : mv;
    CUfunction f = kernel2(dev, "batch_norm", x->dtype, what);
    if (!f) return em_last_status();
    void *xp = ir_ptr(x), *yp = ir_ptr(y), *mp = ir_ptr(m), *vp = ir_ptr(v);
    void *wp = w ? ir_ptr(w) : NULL, *bp = b ? ir_ptr(b) : NULL;
    double eps = op->p.norm.eps;
    void *params[] = {&xp, &xv, &yp, &mp, &mv, &vp, &vv, &wp, &wv, &bp, &bv, &n, &C, &sp, &eps};
    return cuda_launch(dev, f, n, params, what);
}

/* ---- real FFT ------------------------------------------------------------------------------- */

static bool fft_ok(const ir_op *op)
{
    const ir_tensor *x = op->in[0], *y = op->out[0];
    return op->n_in == 1 && op->n_out == 1 && is_float(x->dtype) && y->dtype == x->dtype &&
           ir_is_contiguous(y) && op->p.fft.n >= 1;
}

/* Whether dims [d0, d1) of t index like one dim of stride *stride (dims of size 1 skipped). */
static bool merge_dims(const ir_tensor *t, int d0, int d1, int64_t *stride)
{
    int last = -1;
    for (int d = d0; d < d1; d++) {
        if (t->shape[d] == 1) continue;
        if (last >= 0 && t->strides[last] != t->strides[d] * t->shape[d]) return false;
        last = d;
    }
    *stride = last >= 0 ? t->strides[last] : 0;
    return true;
}

/* m = 2^lg complex values per signal of the work buffer a, in place: bit reversal, then one
 * launch per stage. */
static em_status fft_pass(int dev, void *a, long long sig, int lg, double sign, const char *what)
{
    CUfunction rev = cuda_kernel(dev, "em_nn_fft_bitrev", what);
    CUfunction stage = rev ? cuda_kernel(dev, "em_nn_fft_stage", what) : NULL;
    if (!stage) return em_last_status();
    long long m = 1LL << lg;
    void *p1[] = {&a, &sig, &lg};
    em_status st = cuda_launch(dev, rev, sig * m, p1, what);
    for (long long h = 1; h < m && st == EM_OK; h <<= 1) {
        void *p2[] = {&a, &sig, &lg, &h, &sign};
        st = cuda_launch(dev, stage, sig * m / 2, p2, what);
    }
    return st;
}

/* Powers of two above the shared-memory size and every other length (Bluestein) through a
 * pooled work buffer of complex doubles (kernels/conv_nn.cu). */
static em_status fft_global(int dev, void *xp, void *yp, fft_arg *g, int lg, bool pow2, bool inv,
                            em_dtype dt, const char *what)
{
    int mlg = lg;
    if (!pow2)
        while (((int64_t)1 << mlg) < 2 * g->n - 1) mlg++;
    long long m = 1LL << mlg, sig = g->outer * g->inner;
    int iinv = inv, blue = !pow2;
    void *a = cuda_pool_alloc(dev, (size_t)(sig * m) * 16);
    void *b = a && blue ? cuda_pool_alloc(dev, (size_t)m * 16) : NULL;
    if (!a || (blue && !b)) {
        cuda_pool_free(dev, a);
        return em_last_status();
    }
    em_status st = EM_OK;
    if (blue) { /* the FFT of the chirp's conjugate, shared by every signal */
        CUfunction f = cuda_kernel(dev, "em_nn_fft_bfill", what);
        long long n = g->n, one = 1;
        void *p[] = {&b, &n, &m};
        st = f ? cuda_launch(dev, f, m, p, what) : em_last_status();
        if (st == EM_OK) st = fft_pass(dev, b, one, mlg, -1.0, what);
    }
    CUfunction load = st == EM_OK ? kernel2(dev, "fft_load", dt, what) : NULL;
    if (st == EM_OK && !load) st = em_last_status();
    if (st == EM_OK) {
        void *p[] = {&xp, &a, g, &m, &iinv, &blue};
        st = cuda_launch(dev, load, sig * m, p, what);
    }
    if (st == EM_OK) st = fft_pass(dev, a, sig, mlg, inv && !blue ? 1.0 : -1.0, what);
    if (st == EM_OK && blue) {
        CUfunction f = cuda_kernel(dev, "em_nn_fft_bmul", what);
        void *p[] = {&a, &b, &sig, &m};
        st = f ? cuda_launch(dev, f, sig * m, p, what) : em_last_status();
        if (st == EM_OK) st = fft_pass(dev, a, sig, mlg, 1.0, what);
    }
    CUfunction store = st == EM_OK ? kernel2(dev, "fft_store", dt, what) : NULL;
    if (st == EM_OK && !store) st = em_last_status();
    if (st == EM_OK) {
        void *p[] = {&a, &yp, g, &m, &iinv, &blue};
        st = cuda_launch(dev, store, sig * g->P, p, what);
    }
    cuda_pool_free(dev, a); /* stream order: the kernels above are done with them before reuse */
    cuda_pool_free(dev, b);
    return st;
}

static em_status run_fft(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *x = op->in[0], *y = op->out[0];
    bool inv = op->kind == EM_OP_IRFFT;
    int dim = op->p.fft.dim, xr = inv ? x->rank - 1 : x->rank;
    fft_arg g;
    memset(&g, 0, sizeof g);
    g.n = op->p.fft.n;
    g.P = inv ? g.n : g.n / 2 + 1;
    g.L = x->shape[dim];
    g.outer = g.inner = 1;
    for (int d = 0; d < dim; d++) g.outer *= x->shape[d];
    for (int d = dim + 1; d < xr; d++) g.inner *= x->shape[d];
    if (g.outer * g.inner * g.P == 0) return EM_OK;
    /* the kernels index [outer, L, inner]: outer and inner must each merge into one strided
     * dim, else x is packed contiguous first */
    void *tmp = NULL;
    ir_tensor xc = *x;
    if (!merge_dims(x, 0, dim, &g.so) || !merge_dims(x, dim + 1, xr, &g.si)) {
        em_status st = cuda_nn_stage(dev, x, false, &xc, &tmp, what);
        if (st != EM_OK) return st;
        merge_dims(&xc, 0, dim, &g.so);
        merge_dims(&xc, dim + 1, xr, &g.si);
    }
    g.sl = xc.strides[dim];
    g.sc = inv ? xc.strides[xc.rank - 1] : 0;
    void *xp = ir_ptr(&xc), *yp = ir_ptr(y);
    int lg = 0;
    while (((int64_t)1 << lg) < g.n) lg++;
    em_status st;
    bool pow2 = ((int64_t)1 << lg) == g.n;
    if (pow2 && lg <= 12) {
        CUfunction f = kernel2(dev, inv ? "irfft_pow2" : "rfft_pow2", x->dtype, what);
        int64_t sig = g.outer * g.inner;
        unsigned grid[3] = {(unsigned)(sig > (1 << 20) ? (1 << 20) : sig), 1, 1};
        unsigned block[3] = {g.n >= 512 ? 256u : g.n >= 64 ? 64u : 32u, 1, 1};
        void *params[] = {&xp, &yp, &g, &lg};
        st = f ? cuda_launch_grid_smem(dev, f, grid, block, (unsigned)(2 * g.n * 8), params, what)
               : em_last_status();
    } else if (!pow2 && g.n <= 32) {
        CUfunction f = kernel2(dev, inv ? "irfft_direct" : "rfft_direct", x->dtype, what);
        void *params[] = {&xp, &yp, &g};
        st = f ? cuda_launch(dev, f, g.outer * g.P * g.inner, params, what) : em_last_status();
    } else
        st = fft_global(dev, xp, yp, &g, lg, pow2, inv, x->dtype, what);
    cuda_pool_free(dev, tmp); /* stream order: the transform has read it before any reuse */
    return st;
}

/* ---- the entry points ----------------------------------------------------------------------- */

bool cuda_nn_claims(em_op_kind kind)
{
    return kind == EM_OP_LAYER_NORM || kind == EM_OP_RMS_NORM || kind == EM_OP_GROUP_NORM ||
           kind == EM_OP_BATCH_NORM || kind == EM_OP_RFFT || kind == EM_OP_IRFFT;
}

bool cuda_nn_supports(const ir_op *op)
{
    if (op->kind == EM_OP_RFFT || op->kind == EM_OP_IRFFT) return fft_ok(op);
    return norm_ok(op);
}

em_status cuda_nn_exec(const ir_op *op, int dev, const char *what)
{
    switch (op->kind) {
    case EM_OP_RFFT:
    case EM_OP_IRFFT: return run_fft(op, dev, what);
    case EM_OP_BATCH_NORM: return run_batch_norm(op, dev, what);
    default: return run_norm(op, dev, what);
    }
}

/* ---- integer matmul ------------------------------------------------------------------------- */

static const char *int_name(em_dtype dt)
{
    switch (dt) {
    case EM_I64: return "i64";
    case EM_I32: return "i32";
    case EM_I16: return "i16";
    case EM_I8: return "i8";
    case EM_U8: return "u8";
    default: return NULL;
    }
}

bool cuda_nn_int_matmul_ok(const ir_op *op)
{
    em_dtype o = op->out[0]->dtype;
    return op->n_in == 2 && int_name(o) && op->in[0]->dtype == o && op->in[1]->dtype == o &&
           ir_is_contiguous(op->out[0]);
}

/* The record's operands as in run_matmul (ops_linalg.c: i0/i1 mark 1-D operands, i2..i4 = M K
 * N, i5 = batch rank R, i6.. = batch shape). */
em_status cuda_nn_int_matmul(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *a = op->in[0], *b = op->in[1], *o = op->out[0];
    imm_arg s;
    cuda_mm_geometry(op, &s);
    long long total = s.nbatch * s.M * s.N;
    if (total == 0) return EM_OK;
    char name[32];
    snprintf(name, sizeof name, "em_nn_matmul_%s", int_name(o->dtype));
    CUfunction f = cuda_kernel(dev, name, what);
    if (!f) return em_last_status();
    void *ap = ir_ptr(a), *bp = ir_ptr(b), *cp = ir_ptr(o);
    void *params[] = {&ap, &bp, &cp, &s};
    return cuda_launch(dev, f, total, params, what);
}

/* ---- staging -------------------------------------------------------------------------------- */

em_status cuda_nn_stage(int dev, const ir_tensor *t, bool to_f32, ir_tensor *view, void **buf,
                        const char *what)
{
    *buf = NULL;
    *view = *t;
    if (t->dtype == EM_F32) to_f32 = false;
    if (!to_f32 && ir_is_contiguous(t)) return EM_OK;
    em_dtype dt = to_f32 ? EM_F32 : t->dtype;
    long long n = ir_numel(t);
    *buf = cuda_pool_alloc(dev, (size_t)(n > 0 ? n : 1) * em_dtype_size(dt));
    if (!*buf) return em_last_status();
    view->data = *buf;
    view->dtype = dt;
    ir_contiguous_strides(t->shape, t->rank, view->strides);
    if (n == 0) return EM_OK;
    CUfunction f = kernel2(dev, "pack", t->dtype, what);
    if (!f) return em_last_status();
    nnv_arg v = view_of(t);
    void *xp = ir_ptr(t), *yp = *buf;
    int tf = to_f32;
    void *params[] = {&xp, &v, &yp, &n, &tf};
    return cuda_launch(dev, f, n, params, what);
}

em_status cuda_nn_from_f32(int dev, const void *src, const ir_tensor *dst, const char *what)
{
    long long n = ir_numel(dst);
    if (n == 0) return EM_OK;
    CUfunction f =
        cuda_kernel(dev, dst->dtype == EM_F16 ? "em_nn_f32_to_f16" : "em_nn_f32_to_bf16", what);
    if (!f) return em_last_status();
    void *yp = ir_ptr(dst);
    void *params[] = {(void *)&src, &yp, &n};
    return cuda_launch(dev, f, n, params, what);
}
