/* CPU kernels for the index family: gather-style reads (gather, index_select, embedding),
 * scatter-style writes (scatter, index_add), masked_select, nonzero and slice_assign.
 * Index values are checked in one serial pass first, so errors name the first bad value in
 * row-major order and the copy loops need no checks. */
#include "cpu.h"

/* ---- index range check ------------------------------------------------------------------- */

typedef struct range_ctx {
    em_dtype dt;
    int64_t size;
    bool bad;
    int64_t value;
} range_ctx;

static void range_row(char **p, const int64_t *s, int64_t n, void *ctx)
{
    range_ctx *c = ctx;
    if (c->bad) return;
    const char *q = p[0];
    for (int64_t i = 0; i < n; i++, q += s[0]) {
        int64_t v = c->dt == EM_I64 ? *(const int64_t *)q : ir_get_i64(q, c->dt);
        if (v < 0 || v >= c->size) {
            c->bad = true;
            c->value = v;
            return;
        }
    }
}

/* Every value of index must lie in [0, size) (dim `dim` of the indexed tensor). */
static em_status check_range(const ir_op *op, const ir_tensor *index, int dim, int64_t size)
{
    int64_t st[1][EM_MAX_RANK];
    cpu_bstrides(index, index->shape, index->rank, st[0]);
    char *base[1] = {ir_ptr(index)};
    range_ctx c = {index->dtype, size, false, 0};
    cpu_loop(index->rank, index->shape, 1, base, st, range_row, &c, false);
    if (!c.bad) return EM_OK;
    return em_error(EM_ERR_INDEX, "em_%s: index %lld is out of range for dim %d of size %lld",
                    em_op_name(op->kind), (long long)c.value, dim, (long long)size);
}

static int64_t size_of_dim(const ir_tensor *t, int dim)
{
    return t->rank == 0 ? 1 : t->shape[dim];
}

/* ---- gather-style reads ------------------------------------------------------------------ */

/* Operands: 0 = out, 1 = index, 2 = x with a zero stride along the indexed dim; the element
 * read is x + index * sd (bytes). */
typedef struct gather_ctx {
    size_t es;
    em_dtype idt;
    int64_t sd;
} gather_ctx;

#define GATHER_LOOP(T, IDX)                                                                        \
    for (int64_t i = 0; i < n; i++, o += s[0], ix += s[1], xb += s[2])                             \
        *(T *)o = *(const T *)(xb + (IDX)*c->sd);

#define GATHER_CASE(T)                                                                             \
    if (c->idt == EM_I64) {                                                                        \
        GATHER_LOOP(T, *(const int64_t *)ix)                                                       \
    } else {                                                                                       \
        GATHER_LOOP(T, ir_get_i64(ix, c->idt))                                                     \
    }                                                                                              \
    break;

static void gather_row(char **p, const int64_t *s, int64_t n, void *ctx)
{
    const gather_ctx *c = ctx;
    char *o = p[0];
    const char *ix = p[1];
    const char *xb = p[2];
    switch (c->es) {
    case 1: GATHER_CASE(uint8_t)
    case 2: GATHER_CASE(uint16_t)
    case 4: GATHER_CASE(uint32_t)
    default: GATHER_CASE(uint64_t)
    }
}

static void run_gather(int rank, const int64_t *shape, const ir_tensor *out, const ir_tensor *index,
                       int64_t ist[EM_MAX_RANK], const ir_tensor *x, int64_t xst[EM_MAX_RANK],
                       int64_t sd)
{
    int64_t st[3][EM_MAX_RANK];
    cpu_bstrides(out, shape, rank, st[0]);
    memcpy(st[1], ist, sizeof st[1]);
    memcpy(st[2], xst, sizeof st[2]);
    char *base[3] = {ir_ptr(out), ir_ptr(index), ir_ptr(x)};
    gather_ctx c = {em_dtype_size(x->dtype), index->dtype, sd};
    cpu_loop(rank, shape, 3, base, st, gather_row, &c, true);
}

// x: [..., n, ...], index: [..., m, ...] (same rank) -> out: index's shape
static em_status exec_gather(const ir_op *op)
{
    const ir_tensor *x = op->in[0], *index = op->in[1];
    ir_tensor *out = op->out[0];
    int dim = op->p.index.dim;
    em_status st = check_range(op, index, dim, size_of_dim(x, dim));
    if (st != EM_OK) return st;
    int64_t es = (int64_t)em_dtype_size(x->dtype), ies = (int64_t)em_dtype_size(index->dtype);
    int64_t ist[EM_MAX_RANK] = {0}, xst[EM_MAX_RANK] = {0};
    for (int d = 0; d < index->rank; d++) {
        ist[d] = index->strides[d] * ies;
        xst[d] = d == dim ? 0 : x->strides[d] * es;
    }
    int64_t sd = x->rank ? x->strides[dim] * es : 0;
    run_gather(index->rank, index->shape, out, index, ist, x, xst, sd);
    return EM_OK;
}

/* Index values as a fresh i64 array (em_free it); NULL on allocation failure. */
static int64_t *read_indices(const ir_tensor *index)
{
    int64_t n = ir_numel(index);
    int64_t *v = em_alloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) return NULL;
    for (int64_t i = 0; i < n; i++) v[i] = ir_get_i64(ir_elem(index, i), index->dtype);
    return v;
}

/* Row copies for a contiguous source: out row r = (o, i) takes x row (o, idx[i]). */
typedef struct rows_ctx {
    char *out;
    const char *x;
    const int64_t *idx;
    int64_t n;      /* indices per outer block */
    int64_t xrows;  /* rows of x per outer block */
    size_t rowsize; /* bytes per row */
} rows_ctx;

static void copy_rows(void *ctx, int64_t b, int64_t e)
{
    const rows_ctx *c = ctx;
    for (int64_t r = b; r < e; r++) {
        int64_t o = r / c->n, i = r % c->n;
        memcpy(c->out + (size_t)r * c->rowsize,
               c->x + (size_t)(o * c->xrows + c->idx[i]) * c->rowsize, c->rowsize);
    }
}

static em_status gather_rows(ir_tensor *out, const ir_tensor *x, const ir_tensor *index,
                             int64_t outer, int64_t xrows, int64_t inner)
{
    int64_t *idx = read_indices(index);
    if (!idx) return em_last_status();
    rows_ctx c = {ir_ptr(out),     ir_ptr(x), idx,
                  ir_numel(index), xrows,     (size_t)inner * em_dtype_size(x->dtype)};
    int64_t rows = outer * c.n;
    int64_t grain = CPU_PAR_MIN / (inner ? inner : 1) + 1;
    if (rows * inner < CPU_PAR_MIN)
        copy_rows(&c, 0, rows);
    else
        em_parallel_for(rows, grain, copy_rows, &c);
    em_free(idx);
    return EM_OK;
}

// x: [..., n, ...], index: [m] -> out: x's shape with n replaced by m
static em_status exec_index_select(const ir_op *op)
{
    const ir_tensor *x = op->in[0], *index = op->in[1];
    ir_tensor *out = op->out[0];
    int dim = op->p.index.dim;
    em_status st = check_range(op, index, dim, size_of_dim(x, dim));
    if (st != EM_OK) return st;
    if (ir_numel(out) == 0) return EM_OK;
    int64_t inner = 1, outer = 1;
    for (int d = dim + 1; d < x->rank; d++) inner *= x->shape[d];
    for (int d = 0; d < dim; d++) outer *= x->shape[d];
    if (ir_is_contiguous(x) && inner >= 4)
        return gather_rows(out, x, index, outer, size_of_dim(x, dim), inner);
    int64_t es = (int64_t)em_dtype_size(x->dtype), ies = (int64_t)em_dtype_size(index->dtype);
    int64_t ist[EM_MAX_RANK] = {0}, xst[EM_MAX_RANK] = {0};
    for (int d = 0; d < x->rank; d++) xst[d] = d == dim ? 0 : x->strides[d] * es;
    if (x->rank && index->rank) ist[dim] = index->strides[0] * ies;
    int64_t sd = x->rank ? x->strides[dim] * es : 0;
    run_gather(out->rank, out->shape, out, index, ist, x, xst, sd);
    return EM_OK;
}

// weight: [num, D], indices: [...] -> out: [..., D]
static em_status exec_embedding(const ir_op *op)
{
    const ir_tensor *w = op->in[0], *index = op->in[1];
    ir_tensor *out = op->out[0];
    em_status st = check_range(op, index, 0, w->shape[0]);
    if (st != EM_OK) return st;
    if (ir_numel(out) == 0) return EM_OK;
    if (ir_is_contiguous(w) && w->shape[1] >= 4)
        return gather_rows(out, w, index, 1, w->shape[0], w->shape[1]);
    int64_t es = (int64_t)em_dtype_size(w->dtype), ies = (int64_t)em_dtype_size(index->dtype);
    int r = index->rank;
    int64_t ist[EM_MAX_RANK] = {0}, xst[EM_MAX_RANK] = {0};
    for (int d = 0; d < r; d++) ist[d] = index->strides[d] * ies;
    xst[r] = w->strides[1] * es;
    run_gather(out->rank, out->shape, out, index, ist, w, xst, w->strides[0] * es);
    return EM_OK;
}

/* ---- scatter-style writes ---------------------------------------------------------------- */

/* Operands: 0 = out with a zero stride along the indexed dim, 1 = index, 2 = src; element i
 * combines src into out + index * sd. Runs serially so duplicates apply in row-major order. */
typedef struct scatter_ctx {
    em_dtype dt, idt;
    size_t es;
    int mode; /* em_reduce_mode */
    int64_t sd;
    double alpha; /* index_add: src is scaled by alpha (1 for scatter) */
    int64_t ialpha;
} scatter_ctx;

static double combine_f(int mode, double a, double b)
{
    switch (mode) {
    case EM_SCATTER_ADD: return a + b;
    case EM_SCATTER_MUL: return a * b;
    case EM_SCATTER_MIN: return (isnan(a) || isnan(b)) ? NAN : (b < a ? b : a);
    case EM_SCATTER_MAX: return (isnan(a) || isnan(b)) ? NAN : (b > a ? b : a);
    default: return b;
    }
}

static int64_t combine_i(int mode, int64_t a, int64_t b)
{
    switch (mode) {
    case EM_SCATTER_ADD: return (int64_t)((uint64_t)a + (uint64_t)b);
    case EM_SCATTER_MUL: return (int64_t)((uint64_t)a * (uint64_t)b);
    case EM_SCATTER_MIN: return b < a ? b : a;
    case EM_SCATTER_MAX: return b > a ? b : a;
    default: return b;
    }
}

static void scatter_row(char **p, const int64_t *s, int64_t n, void *ctx)
{
    const scatter_ctx *c = ctx;
    char *ob = p[0];
    const char *ix = p[1], *sp = p[2];
    bool fl = em_dtype_is_float(c->dt);
    for (int64_t i = 0; i < n; i++, ob += s[0], ix += s[1], sp += s[2]) {
        int64_t v = c->idt == EM_I64 ? *(const int64_t *)ix : ir_get_i64(ix, c->idt);
        char *dst = ob + v * c->sd;
        if (c->mode == EM_SCATTER_ASSIGN) {
            memcpy(dst, sp, c->es);
        } else if (fl) {
            double b = ir_get_f64(sp, c->dt);
            ir_set_f64(dst, c->dt, combine_f(c->mode, ir_get_f64(dst, c->dt), c->alpha * b));
        } else {
            int64_t b = ir_get_i64(sp, c->dt);
            b = (int64_t)((uint64_t)b * (uint64_t)c->ialpha);
            ir_set_i64(dst, c->dt, combine_i(c->mode, ir_get_i64(dst, c->dt), b));
        }
    }
}

static void run_scatter(int rank, const int64_t *shape, ir_tensor *out, int dim,
                        const ir_tensor *index, int64_t ist[EM_MAX_RANK], const char *src,
                        int64_t sst[EM_MAX_RANK], int mode, double alpha)
{
    int64_t es = (int64_t)em_dtype_size(out->dtype);
    int64_t st[3][EM_MAX_RANK] = {{0}};
    for (int d = 0; d < out->rank; d++) st[0][d] = d == dim ? 0 : out->strides[d] * es;
    memcpy(st[1], ist, sizeof st[1]);
    memcpy(st[2], sst, sizeof st[2]);
    char *base[3] = {ir_ptr(out), ir_ptr(index), (char *)src};
    scatter_ctx c = {
        out->dtype, index->dtype,  (size_t)es, mode, out->rank ? out->strides[dim] * es : 0,
        alpha,      (int64_t)alpha};
    cpu_loop(rank, shape, 3, base, st, scatter_row, &c, false);
}

/* Scatter-add along the last dim of a matrix (max-pool gradients, say): x [R, n] (rows
 * contiguous or one broadcast value), index i64 [r, m] and src [>= r, >= m] with contiguous rows.
 * Duplicates can only meet within a row, so rows go in parallel; each row is first x's row, then
 * its entries in order with the generic path's arithmetic (the sum in double), so the bytes are
 * the generic path's. */
typedef struct scatter_rows_ctx {
    bool dbl;
    int64_t n, m, irows;
    const char *x, *idx, *src;
    int64_t xs0, xs1, is0, ss0; /* row strides (elements); xs1 is 0 or 1 */
    char *out;
} scatter_rows_ctx;

/* True when the es-byte value at p is +0.0 (all bits zero): a fill that memset can do. */
static bool is_pos_zero(const void *p, size_t es)
{
    static const char zero[8];
    return memcmp(p, zero, es) == 0;
}

static void scatter_add_rows(void *vctx, int64_t r0, int64_t r1)
{
    const scatter_rows_ctx *c = vctx;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t *ix = (const int64_t *)c->idx + r * c->is0;
        if (c->dbl) {
            double *o = (double *)c->out + r * c->n;
            const double *xr = (const double *)c->x + r * c->xs0, *sr;
            if (c->xs1)
                memcpy(o, xr, (size_t)c->n * sizeof *o);
            else if (is_pos_zero(xr, sizeof *xr))
                memset(o, 0, (size_t)c->n * sizeof *o);
            else
                for (int64_t j = 0; j < c->n; j++) o[j] = xr[0];
            if (r >= c->irows) continue;
            sr = (const double *)c->src + r * c->ss0;
            for (int64_t i = 0; i < c->m; i++) o[ix[i]] = o[ix[i]] + sr[i];
        } else {
            float *o = (float *)c->out + r * c->n;
            const float *xr = (const float *)c->x + r * c->xs0, *sr;
            if (c->xs1)
                memcpy(o, xr, (size_t)c->n * sizeof *o);
            else if (is_pos_zero(xr, sizeof *xr))
                memset(o, 0, (size_t)c->n * sizeof *o);
            else
                for (int64_t j = 0; j < c->n; j++) o[j] = xr[0];
            if (r >= c->irows) continue;
            sr = (const float *)c->src + r * c->ss0;
            for (int64_t i = 0; i < c->m; i++) o[ix[i]] = (float)((double)o[ix[i]] + (double)sr[i]);
        }
    }
}

/* The fast path above when the operands fit it (true: done). */
static bool scatter_add_fast(const ir_op *op)
{
    const ir_tensor *x = op->in[0], *index = op->in[1], *src = op->in[2];
    ir_tensor *out = op->out[0];
    if (op->p.index.mode != EM_SCATTER_ADD || x->rank != 2 || op->p.index.dim != 1 ||
        (x->dtype != EM_F32 && x->dtype != EM_F64) || src->dtype != x->dtype || src->rank != 2 ||
        index->dtype != EM_I64 || !ir_is_contiguous(out) ||
        (x->strides[1] != 0 && x->strides[1] != 1) ||
        (index->shape[1] > 1 && index->strides[1] != 1) ||
        (index->shape[1] > 1 && src->strides[1] != 1))
        return false;
    scatter_rows_ctx c = {.dbl = x->dtype == EM_F64,
                          .n = x->shape[1],
                          .m = index->shape[1],
                          .irows = index->shape[0],
                          .x = ir_ptr(x),
                          .idx = ir_ptr(index),
                          .src = ir_ptr(src),
                          .xs0 = x->strides[0],
                          .xs1 = x->strides[1],
                          .is0 = index->strides[0],
                          .ss0 = src->strides[0],
                          .out = ir_ptr(out)};
    int64_t rows = x->shape[0], per = c.n + c.m;
    if (rows * per < CPU_PAR_MIN)
        scatter_add_rows(&c, 0, rows);
    else
        em_parallel_for(rows, CPU_PAR_MIN / (per ? per : 1) + 1, scatter_add_rows, &c);
    return true;
}

// x: [..., n, ...], index and src: [..., m, ...] (src at least index's size) -> out: x's shape
static em_status exec_scatter(const ir_op *op)
{
    const ir_tensor *x = op->in[0], *index = op->in[1], *src = op->in[2];
    ir_tensor *out = op->out[0];
    int dim = op->p.index.dim;
    int mode = (int)op->p.index.mode;
    em_status st = check_range(op, index, dim, size_of_dim(x, dim));
    if (st != EM_OK) return st;
    if (scatter_add_fast(op)) return EM_OK;
    cpu_copy_convert(out, x);
    int64_t ies = (int64_t)em_dtype_size(index->dtype);
    int64_t ist[EM_MAX_RANK] = {0}, sst[EM_MAX_RANK] = {0};
    for (int d = 0; d < index->rank; d++) ist[d] = index->strides[d] * ies;
    /* a rank-0 src is one value, converted once to out's dtype and read with stride 0 */
    uint64_t scalar = 0;
    const char *sp = (const char *)&scalar;
    if (src->rank == 0) {
        const char *q = ir_ptr(src);
        if (em_dtype_is_float(out->dtype) || em_dtype_is_float(src->dtype))
            ir_set_f64(&scalar, out->dtype, ir_get_f64(q, src->dtype));
        else
            ir_set_i64(&scalar, out->dtype, ir_get_i64(q, src->dtype));
    } else {
        int64_t ses = (int64_t)em_dtype_size(src->dtype);
        for (int d = 0; d < src->rank; d++) sst[d] = src->strides[d] * ses;
        sp = ir_ptr(src);
    }
    run_scatter(index->rank, index->shape, out, dim, index, ist, sp, sst, mode, 1.0);
    return EM_OK;
}

// x: [..., n, ...], index: [m], src: [..., m, ...] -> out: x's shape
static em_status exec_index_add(const ir_op *op)
{
    const ir_tensor *x = op->in[0], *index = op->in[1], *src = op->in[2];
    ir_tensor *out = op->out[0];
    int dim = op->p.index.dim;
    em_status st = check_range(op, index, dim, size_of_dim(x, dim));
    if (st != EM_OK) return st;
    cpu_copy_convert(out, x);
    int64_t ies = (int64_t)em_dtype_size(index->dtype), es = (int64_t)em_dtype_size(src->dtype);
    int64_t ist[EM_MAX_RANK] = {0}, sst[EM_MAX_RANK] = {0};
    for (int d = 0; d < src->rank; d++) sst[d] = src->strides[d] * es;
    if (src->rank && index->rank) ist[dim] = index->strides[0] * ies;
    run_scatter(src->rank, src->shape, out, dim, index, ist, ir_ptr(src), sst, EM_SCATTER_ADD,
                op->p.index.alpha);
    return EM_OK;
}

/* ---- data-dependent outputs -------------------------------------------------------------- */

typedef struct masked_ctx {
    char *out;
    int64_t k, cap;
    size_t es;
} masked_ctx;

static void masked_row(char **p, const int64_t *s, int64_t n, void *ctx)
{
    masked_ctx *c = ctx;
    const char *xp = p[0], *mp = p[1];
    for (int64_t i = 0; i < n; i++, xp += s[0], mp += s[1]) {
        if (!*(const uint8_t *)mp) continue;
        if (c->k < c->cap) memcpy(c->out + (size_t)c->k * c->es, xp, c->es);
        c->k++;
    }
}

// x and mask broadcast to shape b -> out: [count of true in the broadcast mask]
static em_status exec_masked_select(const ir_op *op)
{
    const ir_tensor *x = op->in[0], *mask = op->in[1];
    ir_tensor *out = op->out[0];
    int br = op->p.shape.rank;
    int64_t shape[EM_MAX_RANK];
    for (int d = 0; d < br; d++) shape[d] = op->p.shape.dims[d];
    int64_t st[2][EM_MAX_RANK];
    cpu_bstrides(x, shape, br, st[0]);
    cpu_bstrides(mask, shape, br, st[1]);
    char *base[2] = {ir_ptr(x), ir_ptr(mask)};
    masked_ctx c = {ir_ptr(out), 0, out->shape[0], em_dtype_size(x->dtype)};
    cpu_loop(br, shape, 2, base, st, masked_row, &c, false);
    if (c.k != c.cap)
        return em_error(EM_ERR_INTERNAL, "em_masked_select: counted %lld elements, found %lld",
                        (long long)c.cap, (long long)c.k);
    return EM_OK;
}

// x: [...] of rank r -> out: [count, r] i64 coordinates
static em_status exec_nonzero(const ir_op *op)
{
    const ir_tensor *x = op->in[0];
    ir_tensor *out = op->out[0];
    int r = x->rank;
    int64_t numel = ir_numel(x), cap = out->shape[0], k = 0;
    int64_t idx[EM_MAX_RANK] = {0}, bs[EM_MAX_RANK];
    int64_t es = (int64_t)em_dtype_size(x->dtype);
    for (int d = 0; d < r; d++) bs[d] = x->strides[d] * es;
    const char *p = ir_ptr(x);
    int64_t *o = (int64_t *)ir_ptr(out);
    bool fl = em_dtype_is_float(x->dtype);
    for (int64_t lin = 0; lin < numel; lin++) {
        bool nz = fl ? ir_get_f64(p, x->dtype) != 0 : ir_get_i64(p, x->dtype) != 0;
        if (nz) {
            if (k < cap)
                for (int d = 0; d < r; d++) o[k * r + d] = idx[d];
            k++;
        }
        for (int d = r - 1; d >= 0; d--) {
            p += bs[d];
            if (++idx[d] < x->shape[d]) break;
            p -= bs[d] * x->shape[d];
            idx[d] = 0;
        }
    }
    if (k != cap)
        return em_error(EM_ERR_INTERNAL, "em_nonzero: counted %lld elements, found %lld",
                        (long long)cap, (long long)k);
    return EM_OK;
}

// x: [...], src broadcastable to the region x[start:end:step] -> out: x's shape
static em_status exec_slice_assign(const ir_op *op)
{
    const ir_tensor *x = op->in[0], *src = op->in[1];
    ir_tensor *out = op->out[0];
    cpu_copy_convert(out, x);
    ir_tensor region = *out;
    for (int d = 0; d < out->rank; d++) {
        const em_p_slice_assign *sa = &op->p.slice_assign;
        int64_t start = sa->start[d], end = sa->end[d], step = sa->step[d];
        region.shape[d] = (end - start + step - 1) / step;
        region.strides[d] = out->strides[d] * step;
        region.data =
            ir_ptr(&region) + start * out->strides[d] * (int64_t)em_dtype_size(out->dtype);
    }
    cpu_copy_convert(&region, src);
    return EM_OK;
}

em_status cpu_exec_index(const ir_op *op)
{
    switch (op->kind) {
    case EM_OP_GATHER: return exec_gather(op);
    case EM_OP_SCATTER: return exec_scatter(op);
    case EM_OP_INDEX_SELECT: return exec_index_select(op);
    case EM_OP_INDEX_ADD: return exec_index_add(op);
    case EM_OP_MASKED_SELECT: return exec_masked_select(op);
    case EM_OP_NONZERO: return exec_nonzero(op);
    case EM_OP_SLICE_ASSIGN: return exec_slice_assign(op);
    case EM_OP_EMBEDDING: return exec_embedding(op);
    default:
        return em_error(EM_ERR_UNSUPPORTED, "cpu: op %s is not in the index family",
                        em_op_name(op->kind));
    }
}
