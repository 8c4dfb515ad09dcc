/* CPU kernels for ordering ops: a stable merge sort of row indices keyed by the row's values
 * (doubles for floats with NaN as the largest, int64 for integers and bool), small-k top-k by
 * insertion into a sorted buffer (contiguous f32 rows skip ahead with a vector threshold test,
 * rows of 256 and more first bound the top k by the best of interleaved groups, so most
 * elements are skipped without a branch; top-1 of contiguous f32 down a dim other than the last
 * runs column-wise), and the lower median.
 * Rows are spread over the thread pool; each row is independent, so results do not depend on the
 * split. */
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu.h"
#include "cpu_fast.h"

/* ---- comparators and the stable merge sort ----------------------------------------------- */

#define LT_F64(a, b) (!isnan(a) && (isnan(b) || (a) < (b)))
#define GT_F64(a, b) LT_F64(b, a)
#define LT_I64(a, b) ((a) < (b))
#define GT_I64(a, b) ((b) < (a))

/* Sorts idx[0..n) (positions in key) so that BEFORE(key[x], key[y]) holds for x ahead of y,
 * keeping equal keys in index order. tmp has room for n. */
#define DEFINE_SORT(name, T, BEFORE)                                                               \
    static void name(const T *key, int64_t *idx, int64_t *tmp, int64_t n)                          \
    {                                                                                              \
        const int64_t run = 16;                                                                    \
        for (int64_t s = 0; s < n; s += run) { /* insertion sort of short runs */                  \
            int64_t e = s + run < n ? s + run : n;                                                 \
            for (int64_t i = s + 1; i < e; i++) {                                                  \
                int64_t v = idx[i], j = i;                                                         \
                while (j > s && BEFORE(key[v], key[idx[j - 1]])) {                                 \
                    idx[j] = idx[j - 1];                                                           \
                    j--;                                                                           \
                }                                                                                  \
                idx[j] = v;                                                                        \
            }                                                                                      \
        }                                                                                          \
        int64_t *src = idx, *dst = tmp;                                                            \
        for (int64_t w = run; w < n; w *= 2) {                                                     \
            for (int64_t lo = 0; lo < n; lo += 2 * w) {                                            \
                int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;       \
                int64_t a = lo, b = mid, o = lo;                                                   \
                while (a < mid && b < hi)                                                          \
                    dst[o++] = BEFORE(key[src[b]], key[src[a]]) ? src[b++] : src[a++];             \
                while (a < mid) dst[o++] = src[a++];                                               \
                while (b < hi) dst[o++] = src[b++];                                                \
            }                                                                                      \
            int64_t *t = src;                                                                      \
            src = dst;                                                                             \
            dst = t;                                                                               \
        }                                                                                          \
        if (src != idx) memcpy(idx, src, (size_t)n * sizeof *idx);                                 \
    }                                                                                              \
    /* The first k of the same order, by insertion into a sorted buffer (k small). */              \
    static void name##_topk(const T *key, int64_t *buf, int64_t n, int64_t k)                      \
    {                                                                                              \
        int64_t cnt = 0;                                                                           \
        for (int64_t i = 0; i < n; i++) {                                                          \
            if (cnt == k && !BEFORE(key[i], key[buf[k - 1]])) continue;                            \
            int64_t j = cnt < k ? cnt++ : k - 1;                                                   \
            while (j > 0 && BEFORE(key[i], key[buf[j - 1]])) {                                     \
                buf[j] = buf[j - 1];                                                               \
                j--;                                                                               \
            }                                                                                      \
            buf[j] = i;                                                                            \
        }                                                                                          \
    }

DEFINE_SORT(sort_f64_asc, double, LT_F64)
DEFINE_SORT(sort_f64_desc, double, GT_F64)
DEFINE_SORT(sort_i64_asc, int64_t, LT_I64)
DEFINE_SORT(sort_i64_desc, int64_t, GT_I64)

/* Small-k top-k of one contiguous f32 row with the vector skip test: once the buffer holds k
 * indices, find_past jumps to the next element that beats the current k-th value (or is NaN);
 * the scalar insertion then decides with the same order as the sort. */
static void topk_f32_row(const cpu_fast_ops *f, const float *x, int64_t *buf, int64_t n, int64_t k,
                         bool desc)
{
    int64_t cnt = 0;
    for (int64_t i = 0; i < n; i++) {
        if (cnt == k) {
            i = f->find_past(x, i, n, x[buf[k - 1]], desc);
            if (i == n) break;
            float t = x[buf[k - 1]];
            if (desc ? !GT_F64(x[i], t) : !LT_F64(x[i], t)) continue;
        }
        int64_t j = cnt < k ? cnt++ : k - 1;
        while (j > 0 && (desc ? GT_F64(x[i], x[buf[j - 1]]) : LT_F64(x[i], x[buf[j - 1]]))) {
            buf[j] = buf[j - 1];
            j--;
        }
        buf[j] = i;
    }
}

/* topk_f32_row for rows without NaN: the k values kept beside their indices (the insertion
 * compares floats in the buffer, not doubles read through the indices). false at the first NaN
 * met (the caller then runs topk_f32_row, whose order puts NaNs first). Ties keep index order as
 * in the sort (cpu_topk_insert). */
static inline __attribute__((always_inline)) bool topk_f32_clean(const cpu_fast_ops *f,
                                                                 const float *x, int64_t *buf,
                                                                 float *val, int64_t n, int64_t k,
                                                                 bool desc)
{
    int64_t cnt = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i >= k) {
            i = f->find_past(x, i, n, val[k - 1], desc);
            if (i == n) break;
        }
        if (!cpu_topk_insert(x[i], i, val, buf, &cnt, k, desc)) return false;
    }
    return true;
}

/* Rows of 256 or more take the vector kernel's bounded pass (cpu_fast.h). */
static void topk_f32(const cpu_fast_ops *f, const float *x, int64_t *buf, float *val, int64_t n,
                     int64_t k, bool desc)
{
    bool ok = f->topk_row && n >= 256 ? f->topk_row(x, n, k, desc, val, buf)
              : desc                  ? topk_f32_clean(f, x, buf, val, n, k, true)
                                      : topk_f32_clean(f, x, buf, val, n, k, false);
    if (!ok) topk_f32_row(f, x, buf, n, k, desc);
}

/* ---- top-1 down a column ----------------------------------------------------------------- */

/* k = 1 along a dim other than the last of a contiguous f32 tensor, x as [outer, n, inner]: the
 * vector kernel keeps a running best per column over a block of columns, so that every read is
 * sequential (the row path would gather each short row across the whole tensor). */
#define COL_BLOCK 512

typedef struct col1_ctx {
    const cpu_fast_ops *f;
    const float *x;
    float *v;
    int64_t *ix;
    int64_t n, inner, per_outer; /* column blocks per outer index */
    bool desc;
} col1_ctx;

static void col1_blocks(void *vctx, int64_t b, int64_t e)
{
    const col1_ctx *c = vctx;
    for (int64_t t = b; t < e; t++) {
        int64_t o = t / c->per_outer, j0 = (t % c->per_outer) * COL_BLOCK;
        int64_t w = c->inner - j0 < COL_BLOCK ? c->inner - j0 : COL_BLOCK;
        c->f->col_top1(c->x + o * c->n * c->inner + j0, c->n, c->inner, w, c->v + o * c->inner + j0,
                       c->ix + o * c->inner + j0, c->desc);
    }
}

static bool try_col1(const ir_op *op, int dim, int64_t n, int64_t k)
{
    const ir_tensor *x = op->in[0], *v = op->out[0], *ix = op->out[1];
    const cpu_fast_ops *f = cpu_fast();
    if (!f || !f->col_top1 || op->kind != EM_OP_TOPK || k != 1 || x->dtype != EM_F32 ||
        x->rank < 2 || n > INT32_MAX || dim == x->rank - 1 || !ir_is_contiguous(x) ||
        !ir_is_contiguous(v) || !ir_is_contiguous(ix))
        return false;
    col1_ctx cc = {f, (const float *)ir_ptr(x), (float *)ir_ptr(v), (int64_t *)ir_ptr(ix), n, 1,
                   0, op->p.order.largest};
    int64_t outer = 1;
    for (int d = 0; d < dim; d++) outer *= x->shape[d];
    for (int d = dim + 1; d < x->rank; d++) cc.inner *= x->shape[d];
    cc.per_outer = (cc.inner + COL_BLOCK - 1) / COL_BLOCK;
    int64_t blocks = outer * cc.per_outer;
    em_parallel_for(blocks, CPU_PAR_MIN / (COL_BLOCK * n) + 1, col1_blocks, &cc);
    return true;
}

/* ---- rows -------------------------------------------------------------------------------- */

typedef struct order_ctx {
    const ir_op *op;
    int rank, dim;
    int64_t shape[EM_MAX_RANK]; /* x's shape (rank >= 1) */
    int64_t st[3][EM_MAX_RANK]; /* element strides of x, values, indices */
    char *base[3];
    size_t es;
    bool is_float;
    int64_t n, k; /* row length; outputs per row (SORT n, TOPK k, MEDIAN 1) */
    const cpu_fast_ops *fast;
    atomic_bool failed;
} order_ctx;

/* The k chosen elements of one row (positions idx in x's row xr) to the values and indices. */
static void put_row(const order_ctx *c, const int64_t *off, const char *xr, int64_t xs,
                    const int64_t *idx)
{
    char *vr = c->base[1] + off[1] * (int64_t)c->es;
    int64_t *ir = (int64_t *)c->base[2] + off[2];
    int64_t vs = c->st[1][c->dim] * (int64_t)c->es, is = c->st[2][c->dim];
    for (int64_t j = 0; j < c->k; j++) {
        memcpy(vr + j * vs, xr + idx[j] * xs, c->es);
        ir[j * is] = idx[j];
    }
}

static void order_rows(void *vctx, int64_t b, int64_t e)
{
    order_ctx *c = vctx;
    const ir_op *op = c->op;
    int64_t n = c->n;
    em_dtype dt = c->op->in[0]->dtype;
    bool desc = op->kind != EM_OP_MEDIAN && op->p.order.descending;
    bool small_k = op->kind == EM_OP_TOPK && c->k <= 32 && c->k * 4 < n;
    void *key = malloc((size_t)(n ? n : 1) * 8);
    int64_t *idx = malloc((size_t)(n ? n : 1) * sizeof *idx);
    int64_t *tmp = malloc((size_t)(n ? n : 1) * sizeof *tmp);
    if (!key || !idx || !tmp) {
        atomic_store(&c->failed, true);
        free(key), free(idx), free(tmp);
        return;
    }
    double *kd = key;
    int64_t *ki = key;
    for (int64_t row = b; row < e; row++) {
        int64_t off[3] = {0, 0, 0}, r = row;
        for (int d = c->rank - 1; d >= 0; d--) {
            if (d == c->dim) continue;
            int64_t i = r % c->shape[d];
            r /= c->shape[d];
            for (int t = 0; t < 3; t++) off[t] += i * c->st[t][d];
        }
        const char *xr = c->base[0] + off[0] * (int64_t)c->es;
        int64_t xs = c->st[0][c->dim] * (int64_t)c->es;
        if (small_k && dt == EM_F32 && xs == 4 && c->fast && c->fast->find_past) {
            topk_f32(c->fast, (const float *)xr, idx, (float *)key, n, c->k, desc);
            put_row(c, off, xr, xs, idx);
            continue;
        }
        bool has_nan = false;
        int64_t first_nan = -1;
        for (int64_t j = 0; j < n; j++) {
            const char *p = xr + j * xs;
            if (c->is_float) {
                kd[j] = ir_get_f64(p, dt);
                if (isnan(kd[j]) && !has_nan) has_nan = true, first_nan = j;
            } else {
                ki[j] = ir_get_i64(p, dt);
            }
            idx[j] = j;
        }
        if (op->kind == EM_OP_MEDIAN && has_nan) {
            idx[0] = first_nan;
        } else if (small_k) {
            if (c->is_float)
                desc ? sort_f64_desc_topk(kd, idx, n, c->k) : sort_f64_asc_topk(kd, idx, n, c->k);
            else
                desc ? sort_i64_desc_topk(ki, idx, n, c->k) : sort_i64_asc_topk(ki, idx, n, c->k);
        } else {
            if (c->is_float)
                desc ? sort_f64_desc(kd, idx, tmp, n) : sort_f64_asc(kd, idx, tmp, n);
            else
                desc ? sort_i64_desc(ki, idx, tmp, n) : sort_i64_asc(ki, idx, tmp, n);
            if (op->kind == EM_OP_MEDIAN) idx[0] = idx[(n - 1) / 2];
        }
        put_row(c, off, xr, xs, idx);
    }
    free(key);
    free(idx);
    free(tmp);
}

em_status cpu_exec_order(const ir_op *op)
{
    if (op->kind != EM_OP_SORT && op->kind != EM_OP_TOPK && op->kind != EM_OP_MEDIAN)
        return em_error(EM_ERR_UNSUPPORTED, "cpu: op %s is not an ordering op",
                        em_op_name(op->kind));
    const ir_tensor *x = op->in[0], *v = op->out[0], *ix = op->out[1];
    order_ctx c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.es = em_dtype_size(x->dtype);
    c.is_float = em_dtype_is_float(x->dtype);
    c.dim = op->p.order.dim;
    c.rank = x->rank ? x->rank : 1;
    for (int d = 0; d < c.rank; d++) {
        c.shape[d] = x->rank ? x->shape[d] : 1;
        c.st[0][d] = x->rank ? x->strides[d] : 0;
    }
    /* outputs: same rank as x, except MEDIAN without keepdim, where dim is gone */
    bool dropped = op->kind == EM_OP_MEDIAN && v->rank < x->rank;
    for (int d = 0, j = 0; d < c.rank; d++) {
        if ((dropped && d == c.dim) || v->rank == 0) {
            c.st[1][d] = c.st[2][d] = 0;
            if (!(dropped && d == c.dim)) j++;
            continue;
        }
        c.st[1][d] = v->strides[j];
        c.st[2][d] = ix->strides[j];
        j++;
    }
    c.fast = cpu_fast();
    c.base[0] = ir_ptr(x);
    c.base[1] = ir_ptr(v);
    c.base[2] = ir_ptr(ix);
    c.n = c.shape[c.dim];
    c.k = op->kind == EM_OP_SORT ? c.n : op->kind == EM_OP_TOPK ? op->p.order.k : 1;
    int64_t rows = 1;
    for (int d = 0; d < c.rank; d++)
        if (d != c.dim) rows *= c.shape[d];
    if (rows == 0 || c.k == 0) return EM_OK;
    if (try_col1(op, c.dim, c.n, c.k)) return EM_OK;
    int64_t grain = CPU_PAR_MIN / (c.n ? c.n : 1) + 1;
    em_parallel_for(rows, grain, order_rows, &c);
    if (atomic_load(&c.failed))
        return em_error(EM_ERR_OOM, "cpu: %s: out of memory", em_op_name(op->kind));
    return EM_OK;
}
