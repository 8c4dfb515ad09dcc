/* CPU kernels for reductions, scans and softmax. Each output element is reduced by one thread,
 * over fixed-size blocks of its inputs combined in order, so results never depend on the
 * thread count. Floats accumulate in f64, integers and bool in i64 (wrapping). */
#include <stdint.h>
#include <stdlib.h>

#include "../../ir/decode.h"
#include "cpu.h"
#include "cpu_fast.h"

#define CH  256   /* elements converted to f64 / i64 at a time */
#define BLK 16384 /* elements per reduction block; partial results combine in block order */

/* ---- chunk loads and stores (any dtype, any byte stride) --------------------------------- */

static void load_f64(double *d, const char *p, int64_t s, int64_t n, em_dtype dt)
{
    if (dt == EM_F32) {
        if (s == 4) {
            const float *f = (const float *)p;
            for (int64_t i = 0; i < n; i++) d[i] = f[i];
        } else {
            for (int64_t i = 0; i < n; i++) d[i] = *(const float *)(p + i * s);
        }
    } else if (dt == EM_F64) {
        if (s == 8)
            memcpy(d, p, (size_t)n * sizeof *d);
        else
            for (int64_t i = 0; i < n; i++) d[i] = *(const double *)(p + i * s);
    } else {
        for (int64_t i = 0; i < n; i++) d[i] = ir_get_f64(p + i * s, dt);
    }
}

static void load_i64(int64_t *d, const char *p, int64_t s, int64_t n, em_dtype dt)
{
    if (dt == EM_I64)
        for (int64_t i = 0; i < n; i++) d[i] = *(const int64_t *)(p + i * s);
    else
        for (int64_t i = 0; i < n; i++) d[i] = ir_get_i64(p + i * s, dt);
}

static void store_f64(char *p, int64_t s, const double *v, int64_t n, em_dtype dt)
{
    if (dt == EM_F32 && s == 4) {
        float *f = (float *)p;
        for (int64_t i = 0; i < n; i++) f[i] = (float)v[i];
    } else if (dt == EM_F64) {
        for (int64_t i = 0; i < n; i++) *(double *)(p + i * s) = v[i];
    } else {
        for (int64_t i = 0; i < n; i++) ir_set_f64(p + i * s, dt, v[i]);
    }
}

static void store_i64(char *p, int64_t s, const int64_t *v, int64_t n, em_dtype dt)
{
    if (dt == EM_I64)
        for (int64_t i = 0; i < n; i++) *(int64_t *)(p + i * s) = v[i];
    else
        for (int64_t i = 0; i < n; i++) ir_set_i64(p + i * s, dt, v[i]);
}

/* Sum in eight interleaved lanes (vectorisable, and more accurate than one running sum). */
static double lanesum(const double *x, int64_t n)
{
    double l[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) l[k] += x[i + k];
    for (int k = 0; i < n; i++, k++) l[k] += x[i];
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

/* ---- mask reductions --------------------------------------------------------------------- */

/* What one element contributes, whatever the op kind that asked. */
typedef ir_red red;

typedef struct acc {
    double s;
    uint64_t u;  /* integer sum / product (wrapping), nonzero count */
    int64_t v;   /* integer max / min */
    int64_t idx; /* position of the max / min in the reduced elements; -1 while empty */
} acc;

typedef struct rplan {
    const ir_op *op;
    red r;
    bool ints; /* integer domain (exact i64) instead of f64 */
    em_dtype xdt;
    int nk, nr;
    int64_t kshape[EM_MAX_RANK], kx[EM_MAX_RANK], ko[2][EM_MAX_RANK]; /* kept dims, bytes */
    int64_t rshape[EM_MAX_RANK], rx[EM_MAX_RANK];                     /* reduced dims, bytes */
    int64_t M, N, nblk;
    const char *xb;
    char *ob[2];
    em_dtype odt[2];
    double p;             /* norm order */
    const double *center; /* per-output mean or shift for IR_RED_SQDEV / IR_RED_EXPSUM */
    double *first;        /* when set, the pass writes its per-output result here */
    acc *part;            /* M * nblk block partials */
} rplan;

static inline bool nan_(double x)
{
    return x != x;
}

static void acc_init(const rplan *p, acc *a)
{
    a->s = 0;
    a->u = p->r == IR_RED_PROD ? 1 : 0;
    a->v = p->r == IR_RED_MIN || p->r == IR_RED_ARGMIN ? INT64_MAX : INT64_MIN;
    a->idx = -1;
    switch (p->r) {
    case IR_RED_PROD: a->s = 1; break;
    case IR_RED_MAX: a->s = -INFINITY; break;
    case IR_RED_MIN:
    case IR_RED_ABSMIN: a->s = INFINITY; break;
    default: break;
    }
}

static void chunk_f(const rplan *p, acc *a, const double *x, int64_t n, int64_t j0, double c)
{
    switch (p->r) {
    case IR_RED_SUM: a->s += lanesum(x, n); break;
    case IR_RED_PROD:
        for (int64_t i = 0; i < n; i++) a->s *= x[i];
        break;
    case IR_RED_MAX:
        for (int64_t i = 0; i < n; i++)
            if (x[i] > a->s || nan_(x[i])) a->s = x[i];
        break;
    case IR_RED_MIN:
        for (int64_t i = 0; i < n; i++)
            if (x[i] < a->s || nan_(x[i])) a->s = x[i];
        break;
    case IR_RED_ARGMAX:
        for (int64_t i = 0; i < n; i++)
            if (a->idx < 0 || (!nan_(a->s) && (x[i] > a->s || nan_(x[i])))) {
                a->s = x[i];
                a->idx = j0 + i;
            }
        break;
    case IR_RED_ARGMIN:
        for (int64_t i = 0; i < n; i++)
            if (a->idx < 0 || (!nan_(a->s) && (x[i] < a->s || nan_(x[i])))) {
                a->s = x[i];
                a->idx = j0 + i;
            }
        break;
    case IR_RED_COUNT:
        for (int64_t i = 0; i < n; i++) a->u += x[i] != 0;
        break;
    case IR_RED_SQDEV: {
        double t[CH];
        for (int64_t i = 0; i < n; i++) t[i] = (x[i] - c) * (x[i] - c);
        a->s += lanesum(t, n);
        break;
    }
    case IR_RED_EXPSUM: {
        double t[CH];
        if (p->xdt == EM_F64)
            for (int64_t i = 0; i < n; i++) t[i] = exp(x[i] - c);
        else
            for (int64_t i = 0; i < n; i++) t[i] = expf((float)(x[i] - c));
        a->s += lanesum(t, n);
        break;
    }
    case IR_RED_ABS1: {
        double t[CH];
        for (int64_t i = 0; i < n; i++) t[i] = fabs(x[i]);
        a->s += lanesum(t, n);
        break;
    }
    case IR_RED_SQ: {
        double t[CH];
        for (int64_t i = 0; i < n; i++) t[i] = x[i] * x[i];
        a->s += lanesum(t, n);
        break;
    }
    case IR_RED_ABSMAX:
        for (int64_t i = 0; i < n; i++)
            if (fabs(x[i]) > a->s || nan_(x[i])) a->s = fabs(x[i]);
        break;
    case IR_RED_ABSMIN:
        for (int64_t i = 0; i < n; i++)
            if (fabs(x[i]) < a->s || nan_(x[i])) a->s = fabs(x[i]);
        break;
    case IR_RED_ABSPOW: {
        double t[CH];
        for (int64_t i = 0; i < n; i++) t[i] = pow(fabs(x[i]), p->p);
        a->s += lanesum(t, n);
        break;
    }
    }
}

static void chunk_i(const rplan *p, acc *a, const int64_t *x, int64_t n, int64_t j0)
{
    switch (p->r) {
    case IR_RED_SUM:
        for (int64_t i = 0; i < n; i++) a->u += (uint64_t)x[i];
        break;
    case IR_RED_PROD:
        for (int64_t i = 0; i < n; i++) a->u *= (uint64_t)x[i];
        break;
    case IR_RED_MAX:
        for (int64_t i = 0; i < n; i++)
            if (x[i] > a->v) a->v = x[i];
        break;
    case IR_RED_MIN:
        for (int64_t i = 0; i < n; i++)
            if (x[i] < a->v) a->v = x[i];
        break;
    case IR_RED_ARGMAX:
        for (int64_t i = 0; i < n; i++)
            if (a->idx < 0 || x[i] > a->v) {
                a->v = x[i];
                a->idx = j0 + i;
            }
        break;
    case IR_RED_ARGMIN:
        for (int64_t i = 0; i < n; i++)
            if (a->idx < 0 || x[i] < a->v) {
                a->v = x[i];
                a->idx = j0 + i;
            }
        break;
    case IR_RED_COUNT:
        for (int64_t i = 0; i < n; i++) a->u += x[i] != 0;
        break;
    default: break;
    }
}

/* a = a then b, where b covers later elements than a. */
static void combine(const rplan *p, acc *a, const acc *b)
{
    switch (p->r) {
    case IR_RED_PROD:
        a->s *= b->s;
        a->u *= b->u;
        break;
    case IR_RED_MAX:
    case IR_RED_ABSMAX:
        if (!nan_(a->s) && (b->s > a->s || nan_(b->s))) a->s = b->s;
        if (b->v > a->v) a->v = b->v;
        break;
    case IR_RED_MIN:
    case IR_RED_ABSMIN:
        if (!nan_(a->s) && (b->s < a->s || nan_(b->s))) a->s = b->s;
        if (b->v < a->v) a->v = b->v;
        break;
    case IR_RED_ARGMAX:
    case IR_RED_ARGMIN: {
        if (b->idx < 0) break;
        bool take;
        if (a->idx < 0)
            take = true;
        else if (p->ints)
            take = p->r == IR_RED_ARGMAX ? b->v > a->v : b->v < a->v;
        else
            take =
                !nan_(a->s) && ((p->r == IR_RED_ARGMAX ? b->s > a->s : b->s < a->s) || nan_(b->s));
        if (take) *a = *b;
        break;
    }
    default:
        a->s += b->s;
        a->u += b->u;
        break;
    }
}

/* Where output o reads (x) and writes (out[0], out[1]). */
static const char *locate(const rplan *p, int64_t o, char **o0, char **o1)
{
    const char *x = p->xb;
    char *a = p->ob[0], *b = p->ob[1];
    for (int d = p->nk - 1; d >= 0; d--) {
        int64_t i = o % p->kshape[d];
        o /= p->kshape[d];
        x += i * p->kx[d];
        a += i * p->ko[0][d];
        if (b) b += i * p->ko[1][d];
    }
    *o0 = a;
    *o1 = b;
    return x;
}

/* Reduces elements [j0, j1) (row-major over the reduced dims) of the output at x into a. */
static void reduce_block(const rplan *p, const char *x, int64_t j0, int64_t j1, double c, acc *a)
{
    acc_init(p, a);
    if (j0 >= j1) return;
    int nr = p->nr;
    int64_t idx[EM_MAX_RANK];
    int64_t j = j0;
    for (int d = nr - 1; d >= 0; d--) {
        idx[d] = j % p->rshape[d];
        j /= p->rshape[d];
    }
    int64_t len = p->rshape[nr - 1], s = p->rx[nr - 1];
    double fb[CH];
    int64_t ib[CH];
    for (j = j0; j < j1;) {
        const char *q = x + idx[nr - 1] * s;
        for (int d = 0; d < nr - 1; d++) q += idx[d] * p->rx[d];
        int64_t seg = len - idx[nr - 1];
        if (seg > j1 - j) seg = j1 - j;
        for (int64_t k = 0; k < seg; k += CH) {
            int64_t n = seg - k < CH ? seg - k : CH;
            if (p->ints) {
                load_i64(ib, q + k * s, s, n, p->xdt);
                chunk_i(p, a, ib, n, j + k);
            } else {
                load_f64(fb, q + k * s, s, n, p->xdt);
                chunk_f(p, a, fb, n, j + k, c);
            }
        }
        j += seg;
        idx[nr - 1] += seg;
        for (int d = nr - 1; d > 0 && idx[d] == p->rshape[d]; d--) {
            idx[d] = 0;
            idx[d - 1]++;
        }
    }
}

/* Writes the result of output o. */
static void finish(const rplan *p, int64_t o, char *o0, char *o1, const acc *a)
{
    const ir_op *op = p->op;
    double n = (double)p->N;
    if (p->first) { /* first pass of var/std (mean) or logsumexp (shift) */
        p->first[o] = op->kind == EM_OP_LOGSUMEXP ? (isinf(a->s) ? 0 : a->s) : a->s / n;
        return;
    }
    em_dtype dt = p->odt[0];
    switch (op->kind) {
    case EM_OP_SUM:
    case EM_OP_PROD:
        if (p->ints)
            ir_set_i64(o0, dt, (int64_t)a->u);
        else
            ir_set_f64(o0, dt, a->s);
        return;
    case EM_OP_MEAN: ir_set_f64(o0, dt, a->s / n); return;
    case EM_OP_MAX:
    case EM_OP_MIN:
        if (p->ints)
            ir_set_i64(o0, dt, a->v);
        else
            ir_set_f64(o0, dt, a->s);
        return;
    case EM_OP_ARGMAX:
    case EM_OP_ARGMIN: *(int64_t *)o0 = a->idx; return;
    case EM_OP_MAX_DIM:
    case EM_OP_MIN_DIM:
        if (p->ints)
            ir_set_i64(o0, dt, a->v);
        else
            ir_set_f64(o0, dt, a->s);
        *(int64_t *)o1 = a->idx;
        return;
    case EM_OP_VAR:
    case EM_OP_STD: {
        double div = n - (double)op->p.reduce.correction;
        double var = a->s / (div > 0 ? div : 0);
        ir_set_f64(o0, dt, op->kind == EM_OP_STD ? sqrt(var) : var);
        return;
    }
    case EM_OP_NORM: {
        double q = p->p, v;
        if (isinf(q))
            v = a->s;
        else if (q == 0)
            v = (double)a->u;
        else if (q == 1)
            v = a->s;
        else if (q == 2)
            v = sqrt(a->s);
        else
            v = pow(a->s, 1.0 / q);
        ir_set_f64(o0, dt, v);
        return;
    }
    case EM_OP_LOGSUMEXP: ir_set_f64(o0, dt, log(a->s) + p->center[o]); return;
    case EM_OP_ANY: *(uint8_t *)o0 = a->u > 0; return;
    case EM_OP_ALL: *(uint8_t *)o0 = a->u == (uint64_t)p->N; return;
    case EM_OP_COUNT_NONZERO: *(int64_t *)o0 = (int64_t)a->u; return;
    default: return;
    }
}

static void reduce_output(const rplan *p, int64_t o)
{
    char *o0, *o1;
    const char *x = locate(p, o, &o0, &o1);
    double c = p->center ? p->center[o] : 0;
    acc tot, a;
    for (int64_t b = 0; b < p->nblk; b++) {
        int64_t j0 = b * BLK, j1 = j0 + BLK < p->N ? j0 + BLK : p->N;
        reduce_block(p, x, j0, j1, c, b ? &a : &tot);
        if (b) combine(p, &tot, &a);
    }
    finish(p, o, o0, o1, &tot);
}

static void outputs_range(void *ctx, int64_t b, int64_t e)
{
    for (int64_t o = b; o < e; o++) reduce_output(ctx, o);
}

static void blocks_range(void *ctx, int64_t b, int64_t e)
{
    const rplan *p = ctx;
    for (int64_t t = b; t < e; t++) {
        int64_t o = t / p->nblk, blk = t % p->nblk;
        char *o0, *o1;
        const char *x = locate(p, o, &o0, &o1);
        int64_t j0 = blk * BLK, j1 = j0 + BLK < p->N ? j0 + BLK : p->N;
        reduce_block(p, x, j0, j1, p->center ? p->center[o] : 0, &p->part[t]);
    }
}

/* Runs every output of the plan. Few outputs with many blocks each spread the blocks over the
 * threads; otherwise the outputs are spread. Both compute the same block partials and combine
 * them in the same order, so the bits are identical. */
static em_status run_plan(rplan *p)
{
    if (p->M == 0) return EM_OK;
    if (p->nblk > 1 && p->M < 16) {
        p->part = em_alloc((size_t)(p->M * p->nblk) * sizeof *p->part);
        if (!p->part) return em_last_status();
        em_parallel_for(p->M * p->nblk, 1, blocks_range, p);
        for (int64_t o = 0; o < p->M; o++) {
            acc *a = &p->part[o * p->nblk];
            for (int64_t b = 1; b < p->nblk; b++) combine(p, a, &a[b]);
            char *o0, *o1;
            locate(p, o, &o0, &o1);
            finish(p, o, o0, o1, a);
        }
        em_free(p->part);
        p->part = NULL;
        return EM_OK;
    }
    int64_t per = p->N > 0 ? p->N : 1;
    em_parallel_for(p->M, CPU_PAR_MIN / per + 1, outputs_range, p);
    return EM_OK;
}

/* Splits x's dims into kept and reduced ones, dropping size-1 dims and merging neighbours that
 * are contiguous across each other (the row-major order of both stays the same). */
static void plan_dims(rplan *p, const ir_op *op, uint32_t mask, bool keepdim)
{
    const ir_tensor *x = op->in[0];
    int64_t es = (int64_t)em_dtype_size(x->dtype), eo[2] = {0, 0};
    p->op = op;
    p->xdt = x->dtype;
    p->xb = ir_ptr(x);
    for (int k = 0; k < 2; k++) {
        p->ob[k] = k < op->n_out ? ir_ptr(op->out[k]) : NULL;
        p->odt[k] = k < op->n_out ? op->out[k]->dtype : EM_F64;
        eo[k] = k < op->n_out ? (int64_t)em_dtype_size(op->out[k]->dtype) : 0;
    }
    ir_rplan g; /* in elements; this plan walks bytes */
    ir_reduce_plan(op, mask, keepdim, &g);
    p->nk = g.nk, p->nr = g.nr, p->M = g.M, p->N = g.N;
    for (int m = 0; m < g.nk; m++) {
        p->kshape[m] = g.kshape[m], p->kx[m] = g.kx[m] * es;
        for (int k = 0; k < 2; k++) p->ko[k][m] = g.ko[k][m] * eo[k];
    }
    for (int m = 0; m < g.nr; m++) p->rshape[m] = g.rshape[m], p->rx[m] = g.rx[m] * es;
    p->nblk = p->N > BLK ? (p->N + BLK - 1) / BLK : 1;
}

/* ---- outer reductions: sum/mean where a kept dim is unit-stride in x and out ------------- */

/* Sums COLS neighbouring outputs at once, walking the reduced elements in order: each step
 * reads COLS contiguous inputs (column sums of a row-major matrix, or a transposed input). */
#define COLS 64

typedef struct col_ctx {
    const rplan *p;
    int c;          /* the unit-stride kept dim */
    int64_t nchunk; /* chunks of COLS along it */
} col_ctx;

// x: outputs [outer..., C] with C unit-stride, reduced dims anywhere -> out [outer..., C]
static void col_range(void *vctx, int64_t b, int64_t e)
{
    const col_ctx *cc = vctx;
    const rplan *p = cc->p;
    int64_t es = (int64_t)em_dtype_size(p->xdt), C = p->kshape[cc->c];
    for (int64_t g = b; g < e; g++) {
        int64_t q = g / cc->nchunk, c0 = (g % cc->nchunk) * COLS;
        int64_t w = C - c0 < COLS ? C - c0 : COLS;
        const char *x = p->xb + c0 * es;
        char *o = p->ob[0] + c0 * es;
        for (int d = p->nk - 1; d >= 0; d--) {
            if (d == cc->c) continue;
            int64_t i = q % p->kshape[d];
            q /= p->kshape[d];
            x += i * p->kx[d];
            o += i * p->ko[0][d];
        }
        double acc_[COLS] = {0};
        int64_t idx[EM_MAX_RANK] = {0};
        for (int64_t j = 0; j < p->N; j++) {
            const char *r = x;
            for (int d = 0; d < p->nr; d++) r += idx[d] * p->rx[d];
            if (p->xdt == EM_F32)
                for (int64_t k = 0; k < w; k++) acc_[k] += ((const float *)r)[k];
            else
                for (int64_t k = 0; k < w; k++) acc_[k] += ((const double *)r)[k];
            for (int d = p->nr - 1; d >= 0; d--) {
                if (++idx[d] < p->rshape[d]) break;
                idx[d] = 0;
            }
        }
        if (p->op->kind == EM_OP_MEAN)
            for (int64_t k = 0; k < w; k++) acc_[k] /= (double)p->N;
        store_f64(o, es, acc_, w, p->odt[0]);
    }
}

static bool try_columns(const rplan *p)
{
    em_op_kind kind = p->op->kind;
    if ((kind != EM_OP_SUM && kind != EM_OP_MEAN) || (p->xdt != EM_F32 && p->xdt != EM_F64))
        return false;
    int64_t es = (int64_t)em_dtype_size(p->xdt);
    if (p->N < 2 || p->odt[0] != p->xdt) return false;
    for (int c = 0; c < p->nk; c++) {
        if (p->kx[c] != es || p->ko[0][c] != es || p->kshape[c] < 16) continue;
        col_ctx cc = {p, c, (p->kshape[c] + COLS - 1) / COLS};
        int64_t groups = p->M / p->kshape[c] * cc.nchunk;
        em_parallel_for(groups, CPU_PAR_MIN / (p->N * COLS) + 1, col_range, &cc);
        return true;
    }
    return false;
}

static em_status exec_mask_reduce(const ir_op *op)
{
    const ir_tensor *x = op->in[0];
    bool keepdim;
    uint32_t mask = ir_reduce_mask(op->kind, &op->p, x->rank, &keepdim);
    rplan p;
    memset(&p, 0, sizeof p);
    plan_dims(&p, op, mask, keepdim && op->out[0]->rank == x->rank);
    if (p.M == 0) return EM_OK;
    if (try_columns(&p)) return EM_OK;
    p.r = ir_red_of(op, &p.ints);
    p.p = op->p.reduce.p;
    if (op->kind == EM_OP_VAR || op->kind == EM_OP_STD || op->kind == EM_OP_LOGSUMEXP) {
        double *first = em_alloc((size_t)(p.M ? p.M : 1) * sizeof *first);
        if (!first) return em_last_status();
        red second = p.r;
        p.r = op->kind == EM_OP_LOGSUMEXP ? IR_RED_MAX : IR_RED_SUM;
        p.first = first;
        em_status st = run_plan(&p);
        p.first = NULL;
        p.center = first;
        p.r = second;
        if (st == EM_OK) st = run_plan(&p);
        em_free(first);
        return st;
    }
    return run_plan(&p);
}

/* ---- scans and softmax along one dim ----------------------------------------------------- */

typedef struct lplan {
    const ir_op *op;
    em_dtype xdt, odt;
    bool ints;
    int n;                                                           /* other dims */
    int64_t shape[EM_MAX_RANK], xs[EM_MAX_RANK], os[2][EM_MAX_RANK]; /* bytes */
    int64_t len, sx, so[2];                                          /* the scanned dim, bytes */
    int64_t gs[EM_MAX_RANK], sg; /* SOFTMAX_BACKWARD's g (in[1]): other dims, the dim; bytes */
    const char *xb, *gb;
    const int64_t *tb; /* LOG_SOFTMAX_GATHER[_BACKWARD]'s t: line r's index is tb[r] */
    const char *pgb;   /* ... the backward's g (x's dtype), pgb[r] */
    char *ob[2];
    const cpu_fast_ops *fast; /* vector row kernels, or NULL */
    int hint;                 /* the softmax rows' store hint (cpu_store_begin) */
} lplan;

/* exp(x - m) over a chunk: in f32 for f32/f16/bf16 inputs (as PyTorch), in f64 for f64. */
static void exp_shift(double *b, int64_t n, double m, bool single)
{
    if (single)
        for (int64_t i = 0; i < n; i++) b[i] = expf((float)(b[i] - m));
    else
        for (int64_t i = 0; i < n; i++) b[i] = exp(b[i] - m);
}

// x, y: one line of len elements -> y = softmax(x) or log_softmax(x)
static void softmax_line(const lplan *p, const char *x, char *y)
{
    if (p->xdt == EM_F32 && p->odt == EM_F32 && p->sx == 4 && p->so[0] == 4 && p->fast) {
        p->fast->softmax_row((const float *)x, (float *)y, p->len, p->op->kind == EM_OP_LOG_SOFTMAX,
                             p->hint);
        return;
    }
    double b[CH];
    double m = -INFINITY;
    bool single = p->xdt != EM_F64;
    int64_t sy = p->so[0];
    for (int64_t k = 0; k < p->len; k += CH) {
        int64_t n = p->len - k < CH ? p->len - k : CH;
        load_f64(b, x + k * p->sx, p->sx, n, p->xdt);
        for (int64_t i = 0; i < n; i++)
            if (b[i] > m || nan_(b[i])) m = nan_(m) ? m : b[i];
    }
    bool lg = p->op->kind == EM_OP_LOG_SOFTMAX;
    /* f32 and f64 outputs hold the exponentials exactly: keep them for the last pass */
    bool keep = !lg && (p->odt == EM_F32 || p->odt == EM_F64);
    double sum = 0;
    for (int64_t k = 0; k < p->len; k += CH) {
        int64_t n = p->len - k < CH ? p->len - k : CH;
        load_f64(b, x + k * p->sx, p->sx, n, p->xdt);
        exp_shift(b, n, m, single);
        sum += lanesum(b, n);
        if (keep) store_f64(y + k * sy, sy, b, n, p->odt);
    }
    double ls = log(sum), inv = 1.0 / sum;
    for (int64_t k = 0; k < p->len; k += CH) {
        int64_t n = p->len - k < CH ? p->len - k : CH;
        if (keep) {
            load_f64(b, y + k * sy, sy, n, p->odt);
        } else {
            load_f64(b, x + k * p->sx, p->sx, n, p->xdt);
            if (!lg) exp_shift(b, n, m, single);
        }
        if (lg)
            for (int64_t i = 0; i < n; i++) b[i] = (b[i] - m) - ls;
        else
            for (int64_t i = 0; i < n; i++) b[i] *= inv;
        store_f64(y + k * sy, sy, b, n, p->odt);
    }
}

/* y, g, o: one line of len elements -> o = y (g - sum(g y)), or for log-softmax (i1 = 1)
 * g - exp(y) sum(g); the sum in f64, exp in f32 below f64, one rounding per output (contiguous
 * f32 lines: the vector row, outputs in f32). */
static void softmax_bw_line(const lplan *p, const char *y, const char *g, char *o)
{
    double b[CH], c[CH];
    bool lg = p->op->p.dim.log, single = p->xdt != EM_F64;
    if (p->xdt == EM_F32 && p->sx == 4 && p->sg == 4 && p->so[0] == 4 && p->fast &&
        p->fast->softmax_bw_row) {
        p->fast->softmax_bw_row((const float *)y, (const float *)g, (float *)o, p->len, lg);
        return;
    }
    double s = 0;
    for (int64_t k = 0; k < p->len; k += CH) {
        int64_t n = p->len - k < CH ? p->len - k : CH;
        load_f64(c, g + k * p->sg, p->sg, n, p->xdt);
        if (!lg) {
            load_f64(b, y + k * p->sx, p->sx, n, p->xdt);
            for (int64_t i = 0; i < n; i++) c[i] *= b[i];
        }
        s += lanesum(c, n);
    }
    for (int64_t k = 0; k < p->len; k += CH) {
        int64_t n = p->len - k < CH ? p->len - k : CH;
        load_f64(b, y + k * p->sx, p->sx, n, p->xdt);
        load_f64(c, g + k * p->sg, p->sg, n, p->xdt);
        if (lg)
            for (int64_t i = 0; i < n; i++)
                b[i] = c[i] - (single ? (double)expf((float)b[i]) : exp(b[i])) * s;
        else
            for (int64_t i = 0; i < n; i++) b[i] *= c[i] - s;
        store_f64(o + k * p->so[0], p->so[0], b, n, p->odt);
    }
}

/* LOG_SOFTMAX_GATHER[_BACKWARD] on line r (x its first element, y the backward's output line):
 * the forward writes x[t] - logsumexp(x) to out[r] (NaN for t out of range), the backward
 * g[r] (onehot(t) - softmax(x)) (zeros for t out of range, as gather's gradient drops it).
 * Max and sum as softmax_line (exp in f32 below f64, the sum in f64); contiguous f32 lines take
 * the vector softmax row into tmp (len floats) or the output line. */
static void lsg_line(const lplan *p, const char *x, int64_t r, char *y, float *tmp)
{
    bool bw = p->op->kind == EM_OP_LOG_SOFTMAX_GATHER_BACKWARD, single = p->xdt != EM_F64;
    int64_t t = p->tb[r], es = (int64_t)em_dtype_size(p->xdt);
    bool in = t >= 0 && t < p->len;
    double gv = 0, b[CH];
    if (bw && in) load_f64(&gv, p->pgb + r * es, es, 1, p->xdt); /* else a line of zeros */
    if (p->xdt == EM_F32 && p->sx == 4 && p->fast && (bw ? p->so[0] == 4 : tmp != NULL)) {
        float *o = bw ? (float *)y : tmp;
        p->fast->softmax_row((const float *)x, o, p->len, !bw, 0);
        if (!bw) {
            ((float *)p->ob[0])[r] = in ? o[t] : NAN;
            return;
        }
        float ng = (float)-gv, st = in ? o[t] : 0;
        for (int64_t k = 0; k < p->len; k++) o[k] *= ng;
        if (in) o[t] = (float)(gv * (1.0 - (double)st));
        return;
    }
    double m = -INFINITY, sum = 0;
    for (int64_t k = 0; k < p->len; k += CH) {
        int64_t n = p->len - k < CH ? p->len - k : CH;
        load_f64(b, x + k * p->sx, p->sx, n, p->xdt);
        for (int64_t i = 0; i < n; i++)
            if (b[i] > m || nan_(b[i])) m = nan_(m) ? m : b[i];
    }
    for (int64_t k = 0; k < p->len; k += CH) {
        int64_t n = p->len - k < CH ? p->len - k : CH;
        load_f64(b, x + k * p->sx, p->sx, n, p->xdt);
        exp_shift(b, n, m, single);
        sum += lanesum(b, n);
    }
    double ls = log(sum), inv = 1.0 / sum;
    if (!bw) {
        double v = NAN;
        if (in) load_f64(&v, x + t * p->sx, p->sx, 1, p->xdt);
        v = in ? (v - m) - ls : NAN;
        store_f64(p->ob[0] + r * es, es, &v, 1, p->odt);
        return;
    }
    for (int64_t k = 0; k < p->len; k += CH) {
        int64_t n = p->len - k < CH ? p->len - k : CH;
        load_f64(b, x + k * p->sx, p->sx, n, p->xdt);
        exp_shift(b, n, m, single);
        for (int64_t i = 0; i < n; i++) b[i] = gv * ((k + i == t ? 1.0 : 0.0) - b[i] * inv);
        store_f64(y + k * p->so[0], p->so[0], b, n, p->odt);
    }
}

static void scan_line(const lplan *p, const char *x, char *y, char *yi)
{
    em_op_kind kind = p->op->kind;
    double fb[CH];
    int64_t ib[CH], pos[CH];
    double fc = kind == EM_OP_CUMPROD ? 1 : 0;
    uint64_t uc = kind == EM_OP_CUMPROD ? 1 : 0;
    int64_t best_i = 0, best_v = 0;
    double best_f = 0;
    bool is_max = kind == EM_OP_CUMMAX;
    for (int64_t k = 0; k < p->len; k += CH) {
        int64_t n = p->len - k < CH ? p->len - k : CH;
        if (p->ints) {
            load_i64(ib, x + k * p->sx, p->sx, n, p->xdt);
            for (int64_t i = 0; i < n; i++) {
                switch (kind) {
                case EM_OP_CUMSUM: ib[i] = (int64_t)(uc += (uint64_t)ib[i]); break;
                case EM_OP_CUMPROD: ib[i] = (int64_t)(uc *= (uint64_t)ib[i]); break;
                default:
                    if (k + i == 0 || (is_max ? ib[i] >= best_v : ib[i] <= best_v)) {
                        best_v = ib[i];
                        best_i = k + i;
                    }
                    ib[i] = best_v;
                    pos[i] = best_i;
                }
            }
            store_i64(y + k * p->so[0], p->so[0], ib, n, p->odt);
        } else {
            load_f64(fb, x + k * p->sx, p->sx, n, p->xdt);
            for (int64_t i = 0; i < n; i++) {
                switch (kind) {
                case EM_OP_CUMSUM: fb[i] = fc += fb[i]; break;
                case EM_OP_CUMPROD: fb[i] = fc *= fb[i]; break;
                default:
                    /* PyTorch's rule: a NaN always takes over, nothing replaces a NaN */
                    if (k + i == 0 || nan_(fb[i]) ||
                        (!nan_(best_f) && (is_max ? fb[i] >= best_f : fb[i] <= best_f))) {
                        best_f = fb[i];
                        best_i = k + i;
                    }
                    fb[i] = best_f;
                    pos[i] = best_i;
                }
            }
            store_f64(y + k * p->so[0], p->so[0], fb, n, p->odt);
        }
        if (yi) store_i64(yi + k * p->so[1], p->so[1], pos, n, EM_I64);
    }
}

static void lines_range(void *ctx, int64_t b, int64_t e)
{
    const lplan *p = ctx;
    /* the forward's f32 vector rows write log_softmax here */
    float *tmp =
        p->op->kind == EM_OP_LOG_SOFTMAX_GATHER && p->xdt == EM_F32 && p->sx == 4 && p->fast
            ? malloc((size_t)p->len * sizeof(float))
            : NULL;
    for (int64_t r = b; r < e; r++) {
        const char *x = p->xb, *g = p->gb;
        char *y = p->ob[0], *yi = p->ob[1];
        int64_t q = r;
        for (int d = p->n - 1; d >= 0; d--) {
            int64_t i = q % p->shape[d];
            q /= p->shape[d];
            x += i * p->xs[d];
            y += i * p->os[0][d];
            if (yi) yi += i * p->os[1][d];
            if (g) g += i * p->gs[d];
        }
        if (p->tb)
            lsg_line(p, x, r, y, tmp);
        else if (g)
            softmax_bw_line(p, x, g, y);
        else if (p->op->kind == EM_OP_SOFTMAX || p->op->kind == EM_OP_LOG_SOFTMAX)
            softmax_line(p, x, y);
        else
            scan_line(p, x, y, yi);
    }
    free(tmp);
    if (p->hint & CPU_FAST_STREAM) cpu_fast_stream_fence();
}

static em_status exec_along(const ir_op *op)
{
    const ir_tensor *x = op->in[0];
    lplan p;
    memset(&p, 0, sizeof p);
    p.op = op;
    p.xdt = x->dtype;
    p.odt = op->out[0]->dtype;
    p.ints = !em_dtype_is_float(x->dtype);
    p.xb = ir_ptr(x);
    p.fast = cpu_fast();
    for (int k = 0; k < op->n_out; k++) p.ob[k] = ir_ptr(op->out[k]);
    const ir_tensor *g = op->kind == EM_OP_SOFTMAX_BACKWARD ? op->in[1] : NULL;
    if (g) p.gb = ir_ptr(g);
    /* the gather forward's output is shaped like t, indexed by line: no strides along x */
    bool picked = op->kind == EM_OP_LOG_SOFTMAX_GATHER;
    if (picked || op->kind == EM_OP_LOG_SOFTMAX_GATHER_BACKWARD)
        p.tb = (const int64_t *)ir_ptr(op->in[1]);
    if (op->kind == EM_OP_LOG_SOFTMAX_GATHER_BACKWARD) p.pgb = ir_ptr(op->in[2]);
    int dim = op->p.dim.dim;
    int64_t es = (int64_t)em_dtype_size(x->dtype);
    p.len = 1;
    int64_t rows = 1;
    for (int d = 0; d < x->rank; d++) {
        int64_t st[2];
        for (int k = 0; k < op->n_out; k++)
            st[k] = picked ? 0 : op->out[k]->strides[d] * (int64_t)em_dtype_size(op->out[k]->dtype);
        if (d == dim) {
            p.len = x->shape[d];
            p.sx = x->strides[d] * es;
            if (g) p.sg = g->strides[d] * es;
            for (int k = 0; k < op->n_out; k++) p.so[k] = st[k];
            continue;
        }
        rows *= x->shape[d];
        p.shape[p.n] = x->shape[d];
        p.xs[p.n] = x->strides[d] * es;
        if (g) p.gs[p.n] = g->strides[d] * es;
        for (int k = 0; k < op->n_out; k++) p.os[k][p.n] = st[k];
        p.n++;
    }
    if (rows == 0 || p.len == 0) return EM_OK;
    /* the store hint serves the f32 softmax rows only (softmax_line) */
    bool fast_rows = (op->kind == EM_OP_SOFTMAX || op->kind == EM_OP_LOG_SOFTMAX) && p.fast &&
                     p.xdt == EM_F32 && p.odt == EM_F32 && p.sx == 4 && p.so[0] == 4;
    cpu_store_plan sp =
        cpu_store_begin(CPU_STORE_SOFTMAX, fast_rows ? rows * p.len * (int64_t)sizeof(float) : 0);
    p.hint = sp.hint;
    em_parallel_for(rows, CPU_PAR_MIN / p.len + 1, lines_range, &p);
    cpu_store_end(&sp);
    return EM_OK;
}

/* Sum/mean of a whole contiguous f32 tensor: fixed blocks summed in f64 (AVX-512 or AVX2) in
 * parallel, partials added in block order, so the result does not depend on the thread count. */
#define SUM_BLOCK ((int64_t)1 << 16)

typedef struct sum_ctx {
    const float *x;
    int64_t n;
    double *part;
    const cpu_fast_ops *fast;
} sum_ctx;

static void sum_blocks(void *vctx, int64_t b, int64_t e)
{
    const sum_ctx *c = vctx;
    for (int64_t k = b; k < e; k++) {
        int64_t lo = k * SUM_BLOCK, hi = lo + SUM_BLOCK < c->n ? lo + SUM_BLOCK : c->n;
        c->part[k] = c->fast->sum(c->x + lo, hi - lo);
    }
}

static bool sum_all_f32(const ir_op *op)
{
    const ir_tensor *x = op->in[0];
    ir_tensor *o = op->out[0];
    int64_t n = ir_numel(x);
    const cpu_fast_ops *fast = cpu_fast();
    uint32_t all = x->rank ? (uint32_t)((1u << x->rank) - 1) : 0;
    if (x->dtype != EM_F32 || o->dtype != EM_F32 || ir_numel(o) != 1 || n < SUM_BLOCK ||
        (op->p.reduce.mask & all) != all || !ir_is_contiguous(x) || !fast)
        return false;
    int64_t nb = (n + SUM_BLOCK - 1) / SUM_BLOCK;
    double *part = malloc((size_t)nb * sizeof(double));
    if (!part) return false;
    sum_ctx c = {(const float *)ir_ptr(x), n, part, fast};
    em_parallel_for(nb, 1, sum_blocks, &c);
    double s = 0;
    for (int64_t k = 0; k < nb; k++) s += part[k];
    free(part);
    if (op->kind == EM_OP_MEAN) s /= (double)n;
    *(float *)ir_ptr(o) = (float)s;
    return true;
}

em_status cpu_exec_reduce(const ir_op *op)
{
    if ((op->kind == EM_OP_SUM || op->kind == EM_OP_MEAN) && sum_all_f32(op)) return EM_OK;
    switch (op->kind) {
    case EM_OP_CUMSUM:
    case EM_OP_CUMPROD:
    case EM_OP_CUMMAX:
    case EM_OP_CUMMIN:
    case EM_OP_SOFTMAX:
    case EM_OP_LOG_SOFTMAX:
    case EM_OP_SOFTMAX_BACKWARD:
    case EM_OP_LOG_SOFTMAX_GATHER:
    case EM_OP_LOG_SOFTMAX_GATHER_BACKWARD: return exec_along(op);
    case EM_OP_SUM:
    case EM_OP_MEAN:
    case EM_OP_PROD:
    case EM_OP_MAX:
    case EM_OP_MIN:
    case EM_OP_ARGMAX:
    case EM_OP_ARGMIN:
    case EM_OP_VAR:
    case EM_OP_STD:
    case EM_OP_NORM:
    case EM_OP_LOGSUMEXP:
    case EM_OP_ANY:
    case EM_OP_ALL:
    case EM_OP_COUNT_NONZERO:
    case EM_OP_MAX_DIM:
    case EM_OP_MIN_DIM: return exec_mask_reduce(op);
    default: break;
    }
    return em_error(EM_ERR_UNSUPPORTED, "cpu: op %s is not a reduction", em_op_name(op->kind));
}
