/* Reductions over any set of dims (SUM MEAN PROD MAX MIN ARGMAX ARGMIN VAR STD NORM LOGSUMEXP
 * ANY ALL COUNT_NONZERO MAX_DIM MIN_DIM), scans (CUMSUM CUMPROD CUMMAX CUMMIN), SOFTMAX and
 * LOG_SOFTMAX along one dim, their gradient SOFTMAX_BACKWARD, LOG_SOFTMAX_GATHER (cross entropy)
 * and its gradient, and SORT TOPK MEDIAN, for every
 * dtype and any input strides, with the CPU backend's semantics (cpu_reduce.c, cpu_order.c).
 * The kernels are in kernels/reduce.cu, kernels/reduce_lsg.cu and kernels/reduce_sort.cu. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cuda_reduce.h"

static int fin_of(em_op_kind k);
static int scan_code(em_op_kind k);

/* The reductions by flag, each where the kernels have its finish (fin_of) or scan code; the
 * softmax kinds and the ordering kinds by name. */
bool cuda_reduce_claims(em_op_kind k)
{
    if (ir_has(k, IR_REDUCE)) return fin_of(k) >= 0;
    if (ir_has(k, IR_SCAN)) return scan_code(k) >= 0;
    switch (k) {
    case EM_OP_SOFTMAX:
    case EM_OP_LOG_SOFTMAX:
    case EM_OP_SOFTMAX_BACKWARD:
    case EM_OP_LOG_SOFTMAX_GATHER:
    case EM_OP_LOG_SOFTMAX_GATHER_BACKWARD:
    case EM_OP_SORT:
    case EM_OP_TOPK:
    case EM_OP_MEDIAN: return true;
    default: return false;
    }
}

/* LOG_SOFTMAX_GATHER[_BACKWARD]: x float; t i64, contiguous, one per line; the backward's g x's
 * dtype, contiguous, one per line; the output x's dtype, one per line (contiguous) or like x */
static bool lsg_supports(const ir_op *op)
{
    bool bw = op->kind == EM_OP_LOG_SOFTMAX_GATHER_BACKWARD;
    if (op->n_in != (bw ? 3 : 2) || op->n_out != 1 || !op->in[0] || !op->in[1] || !op->out[0] ||
        (bw && !op->in[2]))
        return false;
    const ir_tensor *x = op->in[0], *t = op->in[1], *o = op->out[0];
    int dim = op->p.dim.dim;
    if (x->rank < 1 || x->rank > 8 || dim < 0 || dim >= x->rank || !em_dtype_is_float(x->dtype) ||
        o->dtype != x->dtype || t->dtype != EM_I64 || !ir_is_contiguous(t) ||
        ir_numel(t) * x->shape[dim] != ir_numel(x))
        return false;
    if (!bw) return ir_is_contiguous(o) && ir_numel(o) == ir_numel(t);
    const ir_tensor *g = op->in[2];
    return g->dtype == x->dtype && ir_is_contiguous(g) && ir_numel(g) == ir_numel(t) &&
           ir_same_shape(o, x);
}

/* SOFTMAX_BACKWARD: y, g and the output of one float dtype and shape */
static bool softmax_bw_supports(const ir_op *op)
{
    if (op->n_in != 2 || op->n_out != 1 || !op->in[0] || !op->in[1] || !op->out[0]) return false;
    const ir_tensor *y = op->in[0], *g = op->in[1], *o = op->out[0];
    return y->rank <= 8 && em_dtype_is_float(y->dtype) && g->dtype == y->dtype &&
           o->dtype == y->dtype && ir_same_shape(y, g) && ir_same_shape(y, o);
}

static bool is_order(em_op_kind k)
{
    return k == EM_OP_SORT || k == EM_OP_TOPK || k == EM_OP_MEDIAN;
}

bool cuda_reduce_supports(const ir_op *op)
{
    if (op->kind == EM_OP_SOFTMAX_BACKWARD) return softmax_bw_supports(op);
    if (op->kind == EM_OP_LOG_SOFTMAX_GATHER || op->kind == EM_OP_LOG_SOFTMAX_GATHER_BACKWARD)
        return lsg_supports(op);
    if (op->n_in != 1 || op->n_out < 1 || !op->in[0] || !op->out[0]) return false;
    const ir_tensor *x = op->in[0];
    if (x->rank > 8 || (unsigned)x->dtype >= EM_DTYPE_COUNT) return false;
    em_op_kind k = op->kind;
    bool two = k == EM_OP_MAX_DIM || k == EM_OP_MIN_DIM || k == EM_OP_CUMMAX || k == EM_OP_CUMMIN ||
               is_order(k);
    if (two && (op->n_out != 2 || !op->out[1] || op->out[1]->dtype != EM_I64)) return false;
    if (is_order(k) && x->rank && x->shape[op->p.order.dim] > INT32_MAX) return false;
    if (k == EM_OP_SOFTMAX || k == EM_OP_LOG_SOFTMAX)
        return op->n_out == 1 && em_dtype_is_float(x->dtype) &&
               em_dtype_is_float(op->out[0]->dtype);
    return true;
}

/* ---- mask reductions ------------------------------------------------------------------------ */

/* the accumulation codes are src/ir/decode.h's ir_red (the kernels read the same numbers) */
enum {
    FIN_SUM,
    FIN_MEAN,
    FIN_MAXMIN,
    FIN_ARG,
    FIN_PAIR,
    FIN_VAR,
    FIN_STD,
    FIN_NORM,
    FIN_LSE,
    FIN_ANY,
    FIN_ALL,
    FIN_COUNT
};

typedef struct rdplan { /* matches `struct rdplan` in kernels/reduce.cu */
    int64_t kshape[8], kx[8], ko0[8], ko1[8];
    int64_t rshape[8], rx[8];
    int nk, nr;
    int64_t M, N;
} rdplan;

typedef struct rdargs { /* matches `struct rdargs` */
    int r, fin, ints, xdt, odt;
    double p;
    int64_t corr;
    int first;
} rdargs;

typedef struct rdacc { /* matches `struct rdacc` */
    double s;
    uint64_t u;
    int64_t v, idx;
} rdacc;

/* The reduction's plan (ir_reduce_plan, the CPU's too) in the kernels' `struct rdplan`. */
static void plan_dims(rdplan *p, const ir_op *op, uint32_t mask, bool keepdim)
{
    ir_rplan g;
    ir_reduce_plan(op, mask, keepdim, &g);
    memset(p, 0, sizeof *p);
    p->nk = g.nk, p->nr = g.nr, p->M = g.M, p->N = g.N;
    for (int m = 0; m < g.nk; m++)
        p->kshape[m] = g.kshape[m], p->kx[m] = g.kx[m], p->ko0[m] = g.ko[0][m],
        p->ko1[m] = g.ko[1][m];
    for (int m = 0; m < g.nr; m++) p->rshape[m] = g.rshape[m], p->rx[m] = g.rx[m];
}

/* The finish of a REDUCE kind in the kernels (kernels/reduce.cu); -1 where they have none. */
static int fin_of(em_op_kind k)
{
    switch (k) {
    case EM_OP_SUM:
    case EM_OP_PROD: return FIN_SUM;
    case EM_OP_MEAN: return FIN_MEAN;
    case EM_OP_MAX:
    case EM_OP_MIN: return FIN_MAXMIN;
    case EM_OP_ARGMAX:
    case EM_OP_ARGMIN: return FIN_ARG;
    case EM_OP_MAX_DIM:
    case EM_OP_MIN_DIM: return FIN_PAIR;
    case EM_OP_VAR: return FIN_VAR;
    case EM_OP_STD: return FIN_STD;
    case EM_OP_NORM: return FIN_NORM;
    case EM_OP_LOGSUMEXP: return FIN_LSE;
    case EM_OP_ANY: return FIN_ANY;
    case EM_OP_ALL: return FIN_ALL;
    case EM_OP_COUNT_NONZERO: return FIN_COUNT;
    default: return -1;
    }
}

/* The scan kernels' code of a SCAN kind (em_rd_scan in kernels/reduce.cu); -1 where they have
 * none. */
static int scan_code(em_op_kind k)
{
    switch (k) {
    case EM_OP_CUMSUM: return 0;
    case EM_OP_CUMPROD: return 1;
    case EM_OP_CUMMAX: return 2;
    case EM_OP_CUMMIN: return 3;
    default: return -1;
    }
}

static int sm_count(int dev)
{
    int n = 0;
    const cuda_device_info *d = cuda_device(dev);
    if (!d || cuda_drv.cuDeviceGetAttribute(&n, 16 /* MULTIPROCESSOR_COUNT */, d->dev) || n < 1)
        n = 132;
    return n;
}

/* Sum or mean of a whole contiguous, 16-byte aligned f32 tensor into an f32 scalar. */
static em_status sum_all_f32(const ir_op *op, int dev, int64_t n, const char *what)
{
    const int64_t chunk = 16384;
    long long nb = (n + chunk - 1) / chunk, cl = chunk, nl = n;
    double *part = cuda_pool_alloc(dev, (size_t)nb * sizeof(double));
    if (!part) return em_last_status();
    CUfunction fp = cuda_kernel(dev, "em_rd_sum_part_f32", what);
    CUfunction ff = fp ? cuda_kernel(dev, "em_rd_sum_fin_f32", what) : NULL;
    em_status st = em_last_status();
    if (fp && ff) {
        const void *xp = ir_ptr(op->in[0]);
        void *pp = part, *yp = ir_ptr(op->out[0]);
        int mean = op->kind == EM_OP_MEAN;
        long long grid = (long long)sm_count(dev) * 8;
        if (grid > nb) grid = nb;
        unsigned g1[3] = {(unsigned)grid, 1, 1}, b1[3] = {256, 1, 1};
        void *p1[] = {&xp, &nl, &cl, &nb, &pp};
        st = cuda_launch_grid(dev, fp, g1, b1, p1, what);
        unsigned g2[3] = {1, 1, 1};
        void *p2[] = {&pp, &nb, &yp, &mean, &nl};
        if (st == EM_OK) st = cuda_launch_grid(dev, ff, g2, b1, p2, what);
    }
    cuda_pool_free(dev, part); /* stream order: the kernels above finish before any reuse */
    return st;
}

/* Sum or mean of a contiguous f32 x over its leading dims (R rows of C contiguous outputs, s.nr
 * == 1, s.nk == 1): a thread per column (four with float4 loads) and row slice, slices of at
 * least 16 rows, as many as it takes to give the GPU 64K threads, their f64 partials added in
 * slice order by a second kernel. The reduce plan's path gave one thread per output and slice of
 * 64 rows (a [512, 768] bias gradient: 6144 threads). */
static em_status sum_cols_f32(const ir_op *op, int dev, const rdplan *s, const char *what)
{
    long long R = s->N, C = s->M;
    const void *xp = ir_ptr(op->in[0]);
    int vec = C % 4 == 0 && ((uintptr_t)xp & 15) == 0; /* a thread per 4 columns */
    long long lanes = vec ? C / 4 : C;
    long long nsplit = (65536 + lanes - 1) / lanes, cap = R / 16 > 1 ? R / 16 : 1;
    if (nsplit > cap) nsplit = cap;
    if (nsplit > 65535) nsplit = 65535;
    long long rows = (R + nsplit - 1) / nsplit;
    nsplit = (R + rows - 1) / rows;
    double *part = NULL;
    if (nsplit > 1) {
        part = cuda_pool_alloc(dev, (size_t)(nsplit * C) * sizeof(double));
        if (!part) return em_last_status();
    }
    CUfunction f = cuda_kernel(dev, "em_rd_cols_f32", what);
    CUfunction ff = f && part ? cuda_kernel(dev, "em_rd_cols_fin_f32", what) : NULL;
    em_status st = em_last_status();
    if (f && (!part || ff)) {
        void *pp = part, *yp = ir_ptr(op->out[0]);
        int mean = op->kind == EM_OP_MEAN;
        unsigned grid[3] = {(unsigned)((lanes + 255) / 256), (unsigned)nsplit, 1},
                 block[3] = {256, 1, 1};
        void *p1[] = {(void *)&xp, &R, &C, &rows, &pp, &yp, &mean, &vec};
        st = cuda_launch_grid(dev, f, grid, block, p1, what);
        void *p2[] = {&pp, &nsplit, &C, &R, &yp, &mean};
        if (st == EM_OK && part) st = cuda_launch(dev, ff, C, p2, what);
    }
    cuda_pool_free(dev, part); /* stream order: the kernels above finish before any reuse */
    return st;
}

/* Sum or mean of a contiguous f32 x over its last dim (R rows of C elements, into contiguous
 * outputs): em_rd_rows_f32, a block or a warp per row. */
static em_status sum_rows_f32(const ir_op *op, int dev, const rdplan *s, const char *what)
{
    long long R = s->M, C = s->N;
    CUfunction f = cuda_kernel(dev, "em_rd_rows_f32", what);
    if (!f) return em_last_status();
    const void *xp = ir_ptr(op->in[0]);
    void *yp = ir_ptr(op->out[0]);
    int mean = op->kind == EM_OP_MEAN, wide = C >= 2048,
        vec = C % 4 == 0 && ((uintptr_t)xp & 15) == 0;
    long long blocks = wide ? R : (R + 7) / 8;
    unsigned grid[3] = {(unsigned)(blocks < 65535 ? blocks : 65535), 1, 1}, block[3] = {256, 1, 1};
    void *params[] = {&xp, &R, &C, &yp, &mean, &wide, &vec};
    return cuda_launch_grid(dev, f, grid, block, params, what);
}

/* One pass of the plan: groups of G threads per (output, slice) task, partials combined by
 * em_rd_combine when the N elements are split. */
static em_status reduce_pass(int dev, rdargs *g, const rdplan *s, const void *x, void *o0, void *o1,
                             double *center, const char *what)
{
    long long G = 1, nsplit = 1;
    /* the innermost kept dim unit-stride in x: one thread per output, warps read along it */
    int cols = s->nk > 0 && s->kx[s->nk - 1] == 1 && s->kshape[s->nk - 1] >= 32 && s->N >= 8;
    if (cols) {
        while (s->M * nsplit < 65536 && s->N / (nsplit * 2) >= 64) nsplit *= 2;
    } else {
        while (G < 256 && G * 4 < s->N) G *= 2;
        if (s->N >= 16384 && s->M < 2048) {
            nsplit = (s->N + 8191) / 8192;
            long long cap = 4096 / s->M > 1 ? 4096 / s->M : 1;
            if (nsplit > cap) nsplit = cap;
        }
        if (nsplit > 1) G = 256;
    }
    rdacc *part = NULL;
    if (nsplit > 1) {
        part = cuda_pool_alloc(dev, (size_t)(s->M * nsplit) * sizeof(rdacc));
        if (!part) return em_last_status();
    }
    CUfunction f = cuda_kernel(dev, "em_rd_reduce", what);
    CUfunction fc = f && part ? cuda_kernel(dev, "em_rd_combine", what) : NULL;
    em_status st = em_last_status();
    if (f && (!part || fc)) {
        int Gi = (int)G;
        long long per = 256 / G, tasks = s->M * nsplit;
        long long blocks = (tasks + per - 1) / per;
        if (blocks > (1 << 20)) blocks = 1 << 20;
        unsigned grid[3] = {(unsigned)blocks, 1, 1}, block[3] = {256, 1, 1};
        void *pp = part;
        void *p1[] = {g, (void *)&x, &o0, &o1, (void *)s, &center, &pp, &nsplit, &Gi, &cols};
        st = cuda_launch_grid(dev, f, grid, block, p1, what);
        if (st == EM_OK && part) {
            long long nb2 = s->M < (1 << 20) ? s->M : (1 << 20);
            unsigned grid2[3] = {(unsigned)nb2, 1, 1};
            void *p2[] = {g, &pp, &o0, &o1, (void *)s, &center, &nsplit};
            st = cuda_launch_grid(dev, fc, grid2, block, p2, what);
        }
    }
    if (part) cuda_pool_free(dev, part);
    return st;
}

static em_status run_mask_reduce(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *x = op->in[0];
    bool keepdim;
    uint32_t mask = ir_reduce_mask(op->kind, &op->p, x->rank, &keepdim);
    rdplan s;
    plan_dims(&s, op, mask, keepdim && op->out[0]->rank == x->rank);
    if (s.M == 0) return EM_OK;
    if ((op->kind == EM_OP_SUM || op->kind == EM_OP_MEAN) && x->dtype == EM_F32 &&
        op->out[0]->dtype == EM_F32 && s.M == 1 && s.N >= 65536 && ir_is_contiguous(x) &&
        ((uintptr_t)ir_ptr(x) & 15) == 0)
        return sum_all_f32(op, dev, s.N, what);
    if ((op->kind == EM_OP_SUM || op->kind == EM_OP_MEAN) && x->dtype == EM_F32 &&
        op->out[0]->dtype == EM_F32 && s.nr == 1 && s.nk == 1 && s.kx[0] == 1 && s.ko0[0] == 1 &&
        s.rx[0] == s.M && s.M >= 32 && s.N >= 32 && ir_is_contiguous(x))
        return sum_cols_f32(op, dev, &s, what);
    if ((op->kind == EM_OP_SUM || op->kind == EM_OP_MEAN) && x->dtype == EM_F32 &&
        op->out[0]->dtype == EM_F32 && s.nr == 1 && s.nk == 1 && s.rx[0] == 1 && s.kx[0] == s.N &&
        s.ko0[0] == 1 && s.N >= 32 && ir_is_contiguous(x) && ir_is_contiguous(op->out[0]))
        return sum_rows_f32(op, dev, &s, what);
    rdargs g;
    memset(&g, 0, sizeof g);
    bool ints;
    g.r = ir_red_of(op, &ints);
    g.ints = ints;
    g.fin = fin_of(op->kind);
    g.xdt = (int)x->dtype;
    g.odt = (int)op->out[0]->dtype;
    g.p = op->p.reduce.p;
    g.corr = op->p.reduce.correction;
    const void *xp = ir_ptr(x);
    void *o0 = ir_ptr(op->out[0]), *o1 = op->n_out > 1 ? ir_ptr(op->out[1]) : NULL;
    if (op->kind != EM_OP_VAR && op->kind != EM_OP_STD && op->kind != EM_OP_LOGSUMEXP)
        return reduce_pass(dev, &g, &s, xp, o0, o1, NULL, what);
    /* two passes: the per-output mean (var, std) or max (logsumexp), then the sum around it */
    double *center = cuda_pool_alloc(dev, (size_t)s.M * sizeof(double));
    if (!center) return em_last_status();
    int second = g.r;
    g.r = op->kind == EM_OP_LOGSUMEXP ? IR_RED_MAX : IR_RED_SUM;
    g.first = 1;
    em_status st = reduce_pass(dev, &g, &s, xp, o0, o1, center, what);
    g.r = second;
    g.first = 0;
    if (st == EM_OK) st = reduce_pass(dev, &g, &s, xp, o0, o1, center, what);
    cuda_pool_free(dev, center);
    return st;
}

/* ---- along one dim: scans, softmax, ordering ------------------------------------------------- */

typedef struct rdline { /* matches `struct rdline` in kernels/reduce.cuh */
    int64_t shape[8], xs[8], os0[8], os1[8];
    int n;
    int64_t lines, len, sx, s0, s1;
} rdline;

/* The lines along dim of x (rank 0: one line of one element); outputs have x's rank unless
 * `dropped` (MEDIAN without keepdim), where dim is absent from them. */
static void plan_line(rdline *s, const ir_op *op, int dim, bool dropped)
{
    const ir_tensor *x = op->in[0], *o0 = op->out[0], *o1 = op->n_out > 1 ? op->out[1] : NULL;
    memset(s, 0, sizeof *s);
    s->len = 1;
    s->lines = 1;
    for (int d = 0, j = 0; d < x->rank; d++) {
        bool here = !(dropped && d == dim) && o0->rank > 0;
        int64_t a = here ? o0->strides[j] : 0, b = here && o1 ? o1->strides[j] : 0;
        if (!(dropped && d == dim)) j++;
        if (d == dim) {
            s->len = x->shape[d];
            s->sx = x->strides[d];
            s->s0 = a, s->s1 = b;
            continue;
        }
        s->lines *= x->shape[d];
        s->shape[s->n] = x->shape[d];
        s->xs[s->n] = x->strides[d];
        s->os0[s->n] = a;
        s->os1[s->n] = b;
        s->n++;
    }
}

static em_status run_scan(const ir_op *op, int dev, const char *what)
{
    rdline s;
    plan_line(&s, op, op->p.dim.dim, false);
    if (s.lines == 0 || s.len == 0) return EM_OK;
    bool block = s.len >= 256 || (s.lines < 1024 && s.len >= 16);
    CUfunction f = cuda_kernel(dev, block ? "em_rd_scan_block" : "em_rd_scan", what);
    if (!f) return em_last_status();
    int kind = scan_code(op->kind), ints = !em_dtype_is_float(op->in[0]->dtype);
    int xdt = (int)op->in[0]->dtype, odt = (int)op->out[0]->dtype;
    const void *xp = ir_ptr(op->in[0]);
    void *yp = ir_ptr(op->out[0]), *ip = op->n_out > 1 ? ir_ptr(op->out[1]) : NULL;
    void *params[] = {&kind, &ints, &xdt, &odt, (void *)&xp, &yp, &ip, &s};
    if (block) return cuda_launch_blocks(dev, f, s.lines, params, what);
    return cuda_launch(dev, f, s.lines, params, what);
}

/* A kernel with a warp per row: 8 rows per block of 256 threads (the grid capped at 2^20 blocks;
 * the kernels loop over the rows past it). */
static em_status launch_warp_rows(int dev, CUfunction f, long long rows, void **params,
                                  const char *what)
{
    long long blocks = (rows + 7) / 8;
    if (blocks > (1 << 20)) blocks = 1 << 20;
    unsigned grid[3] = {(unsigned)blocks, 1, 1}, block[3] = {256, 1, 1};
    return cuda_launch_grid(dev, f, grid, block, params, what);
}

static em_status run_softmax(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *x = op->in[0], *o = op->out[0];
    rdline s;
    int dim = x->rank ? op->p.dim.dim : 0;
    plan_line(&s, op, dim, false);
    if (s.lines == 0 || s.len == 0) return EM_OK;
    int logsm = op->kind == EM_OP_LOG_SOFTMAX;
    const void *xp = ir_ptr(x);
    void *yp = ir_ptr(o);
    if (x->dtype == EM_F32 && o->dtype == EM_F32 && ir_is_contiguous(x) && ir_is_contiguous(o) &&
        dim == x->rank - 1 && s.len <= 1024) {
        int v = 4;
        while (32 * v < s.len) v *= 2;
        char name[40];
        snprintf(name, sizeof name, "em_rd_softmax_warp_v%d", v);
        CUfunction f = cuda_kernel(dev, name, what);
        if (!f) return em_last_status();
        long long rows = s.lines;
        int len = (int)s.len;
        void *params[] = {&logsm, (void *)&xp, &yp, &rows, &len};
        return launch_warp_rows(dev, f, rows, params, what);
    }
    if (x->dtype == EM_F32 && o->dtype == EM_F32 && ir_is_contiguous(x) && ir_is_contiguous(o) &&
        dim == x->rank - 1 && s.len <= 8192) {
        /* rows.cu: one block of 256 threads per row, up to 32 values per thread in registers */
        int v = 1;
        while (v < 32 && 256 * (int64_t)v < s.len) v *= 2;
        char name[40];
        snprintf(name, sizeof name, "em_softmax_rows_f32_v%d", v);
        CUfunction f = cuda_kernel(dev, name, what);
        if (!f) return em_last_status();
        long long rows = s.lines, len = s.len;
        void *params[] = {&logsm, (void *)&xp, &yp, &rows, &len};
        return cuda_launch_blocks(dev, f, rows, params, what);
    }
    if (x->dtype == EM_F32 && o->dtype == EM_F32 && ir_is_contiguous(x) && ir_is_contiguous(o) &&
        dim == x->rank - 1) {
        /* longer rows: a block per row, max and sum in one read, then a second read writing */
        CUfunction f = cuda_kernel(dev, "em_softmax_long_f32", what);
        if (!f) return em_last_status();
        long long rows = s.lines, len = s.len;
        void *params[] = {&logsm, (void *)&xp, &yp, &rows, &len};
        return cuda_launch_blocks(dev, f, rows, params, what);
    }
    CUfunction f = cuda_kernel(dev, "em_rd_softmax", what);
    if (!f) return em_last_status();
    int xdt = (int)x->dtype, odt = (int)o->dtype;
    void *params[] = {&logsm, &xdt, &odt, (void *)&xp, &yp, &s};
    return cuda_launch_blocks(dev, f, s.lines, params, what);
}

/* SOFTMAX_BACKWARD (kernels/reduce.cu): contiguous f32 rows along the last dim in registers, a
 * warp per row up to 1024 elements, a block of 256 threads per row up to 8192; anything else a
 * block per line in f64 (em_rd_softmax_bw, the rdline's second output strides walking g). */
static em_status run_softmax_bw(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *y = op->in[0], *g = op->in[1], *o = op->out[0];
    rdline s;
    int dim = y->rank ? op->p.dim.dim : 0;
    plan_line(&s, op, dim, false);
    if (s.lines == 0 || s.len == 0) return EM_OK;
    for (int d = 0, j = 0; d < y->rank; d++) {
        if (d == dim)
            s.s1 = g->strides[d];
        else
            s.os1[j++] = g->strides[d];
    }
    int lg = op->p.dim.log;
    const void *yp = ir_ptr(y), *gp = ir_ptr(g);
    void *op_ = ir_ptr(o);
    char name[40];
    if (y->dtype == EM_F32 && ir_is_contiguous(y) && ir_is_contiguous(g) && ir_is_contiguous(o) &&
        dim == y->rank - 1 && s.len <= 8192) {
        bool warp = s.len <= 1024;
        int v = warp ? 4 : 8;
        while ((warp ? 32 : 256) * v < s.len) v *= 2;
        snprintf(name, sizeof name, "em_softmax_bw_%s_v%d", warp ? "warp" : "rows", v);
        CUfunction f = cuda_kernel(dev, name, what);
        if (!f) return em_last_status();
        long long rows = s.lines;
        int len = (int)s.len;
        void *params[] = {&lg, (void *)&yp, (void *)&gp, &op_, &rows, &len};
        if (!warp) return cuda_launch_blocks(dev, f, rows, params, what);
        return launch_warp_rows(dev, f, rows, params, what);
    }
    CUfunction f = cuda_kernel(dev, "em_rd_softmax_bw", what);
    if (!f) return em_last_status();
    int dt = (int)y->dtype;
    void *params[] = {&lg, &dt, (void *)&yp, (void *)&gp, &op_, &s};
    return cuda_launch_blocks(dev, f, s.lines, params, what);
}

/* LOG_SOFTMAX_GATHER[_BACKWARD] (kernels/reduce_lsg.cu): contiguous f32 rows along the last dim a
 * warp per row up to 1024 elements, else a block of 256 per row (online max / sum in one read;
 * the backward reads the row again); anything else a block per line in f64 (em_rd_lsg). t, g
 * and the forward's output are indexed by line (the rdline's line order is row-major). */
static em_status run_lsg(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *x = op->in[0], *o = op->out[0];
    int bw = op->kind == EM_OP_LOG_SOFTMAX_GATHER_BACKWARD;
    int dim = op->p.dim.dim;
    rdline s;
    plan_line(&s, op, dim, !bw); /* the forward's output lacks the dim */
    if (s.lines == 0 || s.len == 0) return EM_OK;
    const void *xp = ir_ptr(x), *tp = ir_ptr(op->in[1]), *gp = bw ? ir_ptr(op->in[2]) : NULL;
    void *op_ = ir_ptr(o);
    if (x->dtype == EM_F32 && ir_is_contiguous(x) && dim == x->rank - 1 && s.len <= INT32_MAX &&
        (!bw || ir_is_contiguous(o))) {
        bool warp = s.len <= 1024;
        CUfunction f = cuda_kernel(dev, warp ? "em_lsg_warp_f32" : "em_lsg_rows_f32", what);
        if (!f) return em_last_status();
        long long rows = s.lines;
        int len = (int)s.len;
        void *params[] = {&bw, (void *)&xp, (void *)&tp, (void *)&gp, &op_, &rows, &len};
        if (!warp) return cuda_launch_blocks(dev, f, rows, params, what);
        return launch_warp_rows(dev, f, rows, params, what);
    }
    CUfunction f = cuda_kernel(dev, "em_rd_lsg", what);
    if (!f) return em_last_status();
    int dt = (int)x->dtype;
    void *params[] = {&bw, &dt, (void *)&xp, (void *)&tp, (void *)&gp, &op_, &s};
    return cuda_launch_blocks(dev, f, s.lines, params, what);
}

typedef struct soargs { /* matches `struct soargs` in kernels/reduce_sort.cu */
    int op, desc, isf, dt, es;
    int64_t k;
} soargs;

#define SO_T 4096 /* the shared-memory tile of kernels/reduce_sort.cu */

/* Rows longer than SO_T: every row padded to a power of two P and bitonic-sorted in a pooled
 * buffer (tiles in shared memory, the long strides one launch each). */
static em_status sort_long(int dev, soargs *g, rdline *s, const void *xp, void *vp, void *ip,
                           const char *what)
{
    long long P = SO_T;
    while (P < s->len) P *= 2;
    long long total = s->lines * P;
    char *buf = cuda_pool_alloc(dev, (size_t)total * 12);
    if (!buf) return em_last_status();
    void *key = buf, *pos = buf + (size_t)total * 8;
    CUfunction fl = cuda_kernel(dev, "em_so_gload", what);
    CUfunction fs = fl ? cuda_kernel(dev, "em_so_gshared", what) : NULL;
    CUfunction fg = fs ? cuda_kernel(dev, "em_so_gstep", what) : NULL;
    CUfunction fo = fg ? cuda_kernel(dev, "em_so_gout", what) : NULL;
    em_status st = fo ? EM_OK : em_last_status();
    long long tiles = total / SO_T < (1 << 20) ? total / SO_T : (1 << 20);
    unsigned grid[3] = {(unsigned)tiles, 1, 1}, block[3] = {1024, 1, 1};
    if (st == EM_OK) {
        void *p1[] = {g, (void *)&xp, s, &P, &key, &pos};
        st = cuda_launch(dev, fl, total, p1, what);
    }
    long long zero = 0;
    if (st == EM_OK) {
        void *p2[] = {&key, &pos, &total, &P, &zero};
        st = cuda_launch_grid_smem(dev, fs, grid, block, SO_T * 12, p2, what);
    }
    for (long long size = 2 * SO_T; size <= P && st == EM_OK; size *= 2) {
        for (long long stride = size / 2; stride >= SO_T && st == EM_OK; stride /= 2) {
            void *p3[] = {&key, &pos, &total, &P, &size, &stride};
            st = cuda_launch(dev, fg, total / 2, p3, what);
        }
        void *p2[] = {&key, &pos, &total, &P, &size};
        if (st == EM_OK) st = cuda_launch_grid_smem(dev, fs, grid, block, SO_T * 12, p2, what);
    }
    if (st == EM_OK) {
        void *p4[] = {g, (void *)&xp, &vp, &ip, s, &P, &key, &pos};
        st = cuda_launch(dev, fo, s->lines * (g->op == 2 ? 1 : g->k), p4, what);
    }
    cuda_pool_free(dev, buf); /* stream order: the kernels above finish before any reuse */
    return st;
}

static em_status run_order(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *x = op->in[0], *v = op->out[0];
    int dim = x->rank ? op->p.order.dim : 0;
    bool dropped = op->kind == EM_OP_MEDIAN && v->rank < x->rank;
    rdline s;
    plan_line(&s, op, dim, dropped);
    if (x->rank == 0) s.len = 1;
    soargs g;
    memset(&g, 0, sizeof g);
    g.op = op->kind == EM_OP_SORT ? 0 : op->kind == EM_OP_TOPK ? 1 : 2;
    g.desc = op->kind != EM_OP_MEDIAN && op->p.order.descending;
    g.isf = em_dtype_is_float(x->dtype);
    g.dt = (int)x->dtype;
    g.es = (int)em_dtype_size(x->dtype);
    g.k = g.op == 0 ? s.len : g.op == 1 ? op->p.order.k : 1;
    if (s.lines == 0 || g.k == 0 || s.len == 0) return EM_OK;
    const void *xp = ir_ptr(x);
    void *vp = ir_ptr(v), *ip = ir_ptr(op->out[1]);
    unsigned block[3] = {256, 1, 1};
    long long blocks = s.lines < (1 << 20) ? s.lines : (1 << 20);
    unsigned grid[3] = {(unsigned)blocks, 1, 1};
    if (s.len <= 32) {
        CUfunction f = cuda_kernel(dev, "em_so_small", what);
        if (!f) return em_last_status();
        void *params[] = {&g, (void *)&xp, &vp, &ip, &s};
        return cuda_launch(dev, f, s.lines, params, what);
    }
    if (g.op == 1 && g.k <= 32 && s.len <= 1024) {
        int vpl = 2;
        while (32 * vpl < s.len) vpl *= 2;
        char name[40];
        snprintf(name, sizeof name, "em_so_topk_warp%s_v%d", g.es <= 4 ? "32" : "", vpl);
        CUfunction f = cuda_kernel(dev, name, what);
        if (!f) return em_last_status();
        void *params[] = {&g, (void *)&xp, &vp, &ip, &s};
        return launch_warp_rows(dev, f, s.lines, params, what);
    }
    if (g.op == 1 && g.k <= 16 && s.len > 1024) {
        CUfunction f = cuda_kernel(dev, "em_so_topk_small", what);
        if (!f) return em_last_status();
        block[0] = 128;
        void *params[] = {&g, (void *)&xp, &vp, &ip, &s};
        return cuda_launch_grid(dev, f, grid, block, params, what);
    }
    if (s.len <= 4096) {
        int P = 64;
        while (P < s.len) P *= 2;
        CUfunction f = cuda_kernel(dev, "em_so_block", what);
        if (!f) return em_last_status();
        block[0] = P / 2 < 512 ? (unsigned)(P / 2) : 512;
        void *params[] = {&g, (void *)&xp, &vp, &ip, &s, &P};
        return cuda_launch_grid_smem(dev, f, grid, block, (unsigned)P * 12, params, what);
    }
    return sort_long(dev, &g, &s, xp, vp, ip, what);
}

em_status cuda_reduce_exec(const ir_op *op, int dev, const char *what)
{
    if (ir_has(op->kind, IR_REDUCE)) return run_mask_reduce(op, dev, what);
    if (ir_has(op->kind, IR_SCAN)) return run_scan(op, dev, what);
    if (is_order(op->kind)) return run_order(op, dev, what);
    if (op->kind == EM_OP_SOFTMAX_BACKWARD) return run_softmax_bw(op, dev, what);
    if (op->kind == EM_OP_LOG_SOFTMAX_GATHER || op->kind == EM_OP_LOG_SOFTMAX_GATHER_BACKWARD)
        return run_lsg(op, dev, what);
    return run_softmax(op, dev, what);
}
