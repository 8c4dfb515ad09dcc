/* The CUDA elementwise family: supports() and exec() for unary, binary, comparison, logical,
 * bitwise and shift kinds of every dtype, WHERE, CLAMP, LERP, THRESHOLD_BACKWARD, EW_GRAD, CAST,
 * the range and triangle creation ops, ONE_HOT, the random creation ops and DROPOUT. Contiguous
 * same-dtype f32/f64 runs take the vectorised kernels of rows.cu and cuda_kernels.c; everything
 * else runs the run-time-dtype kernels of kernels/ew.cu over rank-collapsed strides, with the CPU
 * backend's compute dtypes and conversions. */
#include <stdio.h>
#include <string.h>

#include "cuda.h"
#include "cuda_elementwise.h"

/* ---- which kinds ---------------------------------------------------------------------------- */

/* Every elementwise kind with a scalar expression in the op table: its code is generated into
 * cuda_ew_gen.cuh (tools/opgen.c), so a new row runs here with no edit. */
static bool has_code(em_op_kind k)
{
    return ir_info_of(k)->expr[0] && !ir_has(k, IR_INTERNAL);
}

static bool unary_kind(em_op_kind k)
{
    return ir_has(k, IR_EW1) && has_code(k);
}

static bool binary_kind(em_op_kind k)
{
    return ir_has(k, IR_EW2) && has_code(k);
}

static bool cmp_kind(em_op_kind k)
{
    return ir_info_of(k)->dtype == IR_DT_COMPARE;
}

static bool logical_kind(em_op_kind k)
{
    return ir_info_of(k)->dtype == IR_DT_LOGICAL;
}

/* The float kinds of binary_d (cuda_ew_gen.cuh): the binary arithmetic ones (their dtype rules
 * promote), not comparisons, logical, bitwise or shift kinds. */
static bool float_arith(em_op_kind k)
{
    switch (ir_info_of(k)->dtype) {
    case IR_DT_PROMOTE:
    case IR_DT_PROMOTE_NUM:
    case IR_DT_PROMOTE_FLOAT: return binary_kind(k);
    default: return false;
    }
}

bool cuda_ew_claims(em_op_kind k)
{
    switch (k) {
    case EM_OP_ARANGE:
    case EM_OP_LINSPACE:
    case EM_OP_EYE:
    case EM_OP_ONE_HOT:
    case EM_OP_TRIL:
    case EM_OP_TRIU:
    case EM_OP_CAST:
    case EM_OP_RAND_UNIFORM:
    case EM_OP_RAND_NORMAL:
    case EM_OP_BERNOULLI:
    case EM_OP_RANDINT:
    case EM_OP_DROPOUT:
    case EM_OP_WHERE:
    case EM_OP_CLAMP:
    case EM_OP_LERP:
    case EM_OP_THRESHOLD_BACKWARD:
    case EM_OP_EW_GRAD: return true;
    default: return unary_kind(k) || binary_kind(k);
    }
}

/* ---- compute domains (as cpu_unary.c and cpu_binary.c choose them) --------------------------- */

enum { DOM_F32, DOM_F64, DOM_INT, DOM_PRED };

static int unary_domain(const ir_op *op)
{
    if (ir_info_of(op->kind)->dtype == IR_DT_BOOL) return DOM_PRED;
    if (op->in[0]->dtype == EM_F64) return DOM_F64;
    return em_dtype_is_float(op->out[0]->dtype) ? DOM_F32 : DOM_INT;
}

static bool low_float(em_dtype dt)
{
    return dt == EM_F32 || dt == EM_F16 || dt == EM_BF16;
}

/* The dtype a binary-family record computes in (cpu_exec_binary). */
static em_dtype compute_dtype(const ir_op *op)
{
    if (cmp_kind(op->kind)) return em_dtype_promote(op->in[0]->dtype, op->in[1]->dtype);
    if (logical_kind(op->kind)) return EM_F64;
    return op->out[0]->dtype;
}

static bool valid_dt(em_dtype dt)
{
    return (int)dt >= 0 && dt < EM_DTYPE_COUNT;
}

static bool ranks_ok(const ir_op *op)
{
    for (int i = 0; i < op->n_in; i++)
        if (!op->in[i] || !valid_dt(op->in[i]->dtype) || op->in[i]->rank > op->out[0]->rank)
            return false;
    return op->n_out >= 1 && op->out[0] && valid_dt(op->out[0]->dtype);
}

static bool same_shape(const ir_tensor *a, const ir_tensor *b)
{
    if (a->rank != b->rank) return false;
    for (int d = 0; d < a->rank; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

static int popcount2(int64_t f)
{
    return (int)(f & 1) + (int)((f >> 1) & 1);
}

/* EW_GRAD records whose forward kind has a derivative by the input (the grad_d cases of
 * cuda_ew_gen.cuh, as cpu_gen_grad_f64 has them): x, y of a unary kind or a, b, y of a binary
 * one, into a float output. Others are declined; the CPU refuses them with its message. */
static bool grad_supported(const ir_op *op)
{
    int k = op->p.ew_grad.kind, arg = op->p.ew_grad.arg;
    if (k < 0 || k >= EM_OP_COUNT || arg < 0 || arg > 1) return false;
    em_op_kind fk = (em_op_kind)k;
    if (!ir_has(fk, IR_DIFF) || !ir_info_of(fk)->d[arg][0]) return false;
    bool shape =
        (op->n_in == 2 && arg == 0 && unary_kind(fk)) || (op->n_in == 3 && binary_kind(fk));
    return shape && ranks_ok(op) && em_dtype_is_float(op->out[0]->dtype);
}

bool cuda_ew_supports(const ir_op *op)
{
    em_op_kind k = op->kind;
    if (op->n_out < 1 || !op->out[0]) return false;
    const ir_tensor *o = op->out[0];
    em_dtype od = o->dtype;
    if (!valid_dt(od)) return false;
    if (unary_kind(k)) {
        if (op->n_in != 1 || !ranks_ok(op) || !same_shape(op->in[0], o)) return false;
        switch (unary_domain(op)) {
        case DOM_PRED: return od == EM_BOOL;
        case DOM_F64: return od == EM_F64;
        case DOM_F32: return low_float(od);
        default: return !em_dtype_is_float(od);
        }
    }
    if (binary_kind(k)) return op->n_in == 2 && ranks_ok(op);
    switch (k) {
    case EM_OP_WHERE: return op->n_in == 3 && ranks_ok(op) && op->in[0]->dtype == EM_BOOL;
    case EM_OP_CLAMP: {
        int bounds = op->p.clamp.bounds;
        return op->n_in == (bounds ? 1 + popcount2(bounds) : 1) && ranks_ok(op);
    }
    case EM_OP_LERP: return op->n_in == 3 && ranks_ok(op);
    case EM_OP_THRESHOLD_BACKWARD:
        return op->n_in == 2 && ranks_ok(op) && em_dtype_is_float(od) && op->in[0]->dtype == od &&
               op->in[1]->dtype == od && same_shape(op->in[0], o) && same_shape(op->in[1], o);
    case EM_OP_CAST: return op->n_in == 1 && ranks_ok(op) && same_shape(op->in[0], o);
    case EM_OP_EW_GRAD: return grad_supported(op);
    case EM_OP_ARANGE:
    case EM_OP_LINSPACE: return ir_is_contiguous(o);
    case EM_OP_EYE: return ir_is_contiguous(o) && o->rank == 2;
    case EM_OP_ONE_HOT:
        return op->n_in == 1 && od == EM_I64 && ir_is_contiguous(o) &&
               em_dtype_is_int(op->in[0]->dtype) && o->rank == op->in[0]->rank + 1;
    case EM_OP_TRIL:
    case EM_OP_TRIU:
        return op->n_in == 1 && o->rank >= 2 && op->in[0]->dtype == od && ir_is_contiguous(o) &&
               same_shape(op->in[0], o);
    case EM_OP_RAND_UNIFORM:
    case EM_OP_RAND_NORMAL:
    case EM_OP_RANDINT: return op->n_in == 0 && ir_is_contiguous(o);
    case EM_OP_BERNOULLI:
        return ir_is_contiguous(o) &&
               (op->n_in == 0 || (op->n_in == 1 && ranks_ok(op) && same_shape(op->in[0], o)));
    case EM_OP_DROPOUT:
        return op->n_in == 1 && ranks_ok(op) && ir_is_contiguous(o) && same_shape(op->in[0], o);
    default: return false;
    }
}

/* ---- strides ------------------------------------------------------------------------------- */

typedef struct ew_idx { /* matches `struct ew_idx` in kernels/ew.cu */
    int64_t shape[8];
    int64_t st[4][8];
    int rank;
} ew_idx;

/* shr = ceil(log2 d), mul = floor(2^32 (2^shr - d) / d) + 1 (Granlund and Montgomery, 1994):
 * the row-broadcast kernels' division by the row length. */
void cuda_fast_div(uint64_t d, uint32_t *mul, int *shr)
{
    int l = 0;
    while (((uint64_t)1 << l) < d) l++;
    *shr = l;
    *mul = (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << l) - d)) / d + 1);
}

/* Element strides of up to three inputs (operands 0..2) and the output (operand 3) over the
 * output's shape, with size-1 dims dropped and dims merged where every operand steps through
 * them as through one. */
static void make_idx(ew_idx *s, ir_tensor *const *in, int n_in, const ir_tensor *o)
{
    int64_t st[4][EM_MAX_RANK];
    memset(s, 0, sizeof *s);
    memset(st, 0, sizeof st);
    int r = o->rank;
    for (int k = 0; k < n_in && k < 3; k++)
        if (in[k]) ir_broadcast_strides(in[k], o->shape, r, st[k]);
    for (int d = 0; d < r; d++) st[3][d] = o->strides[d];
    int m = 0;
    for (int d = 0; d < r; d++) {
        if (o->shape[d] == 1) continue;
        bool merge = m > 0;
        for (int k = 0; k < 4 && merge; k++) merge = s->st[k][m - 1] == st[k][d] * o->shape[d];
        if (merge) {
            s->shape[m - 1] *= o->shape[d];
            for (int k = 0; k < 4; k++) s->st[k][m - 1] = st[k][d];
            continue;
        }
        s->shape[m] = o->shape[d];
        for (int k = 0; k < 4; k++) s->st[k][m] = st[k][d];
        m++;
    }
    s->rank = m;
}

/* As make_idx for one tensor t walked in its own row-major order (operands 0 and 3 alike). */
static void make_idx1(ew_idx *s, const ir_tensor *t)
{
    ir_tensor v = *(t), *in[1] = {&v};
    make_idx(s, in, 1, &v);
}

static int dtc(em_dtype dt)
{
    return (int)dt;
}

static bool contig_same(const ir_op *op)
{
    const ir_tensor *o = op->out[0];
    if (!ir_is_contiguous(o)) return false;
    for (int i = 0; i < op->n_in; i++)
        if (!same_shape(op->in[i], o) || !ir_is_contiguous(op->in[i])) return false;
    return true;
}

/* ---- unary ----------------------------------------------------------------------------------- */

static em_status run_unary(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *x = op->in[0], *o = op->out[0];
    long long n = ir_numel(o);
    if (n == 0) return EM_OK;
    int kind = (int)op->kind, dom = unary_domain(op);
    double a = op->p.act.v[0], b = op->p.act.v[1];
    void *xp = ir_ptr(x), *yp = ir_ptr(o);
    em_dtype dt = x->dtype;
    if ((dom == DOM_F32 || dom == DOM_F64) && o->dtype == dt && (dt == EM_F32 || dt == EM_F64) &&
        contig_same(op)) {
        bool v4 = dt == EM_F32 && (((uintptr_t)xp | (uintptr_t)yp) & 15) == 0;
        const char *name = v4 ? "em_unary_v4_f32" : dt == EM_F32 ? "em_unary_f32" : "em_unary_f64";
        CUfunction f = cuda_kernel(dev, name, what);
        if (!f) return em_last_status();
        void *params[] = {&kind, &xp, &yp, &n, &a, &b};
        long long threads = v4 ? (n / 4 > 4 ? n / 4 : 4) : n;
        return cuda_launch(dev, f, threads, params, what);
    }
    ew_idx s;
    make_idx(&s, op->in, 1, o);
    CUfunction f = cuda_kernel(dev, "ew_unary", what);
    if (!f) return em_last_status();
    int di = dtc(dt), dout = dtc(o->dtype);
    void *params[] = {&kind, &dom, &xp, &di, &yp, &dout, &n, &a, &b, &s};
    return cuda_launch(dev, f, n, params, what);
}

/* ---- binary ---------------------------------------------------------------------------------- */

/* f32 add / sub / mul / div (arith names it) into a contiguous output whose collapsed view s has
 * rank 1 or 2 and operands that step along its rows by 0 or 1 (a row broadcast): the
 * em_<arith>_bc_f32 kernels of rows.cu. False when the view does not fit; else *st is the
 * launch's status. */
static bool run_row_broadcast(const ir_op *op, int dev, const ew_idx *s, const char *arith,
                              em_status *st, const char *what)
{
    int r = s->rank;
    if (r < 1 || r > 2) return false;
    int64_t C = s->shape[r - 1], R = r == 2 ? s->shape[0] : 1, xr = r == 2 ? s->st[0][0] : 0,
            yr = r == 2 ? s->st[1][0] : 0;
    if (R * C >= ((int64_t)1 << 31)) return false; /* the kernels' 32-bit indices */
    int xc = (int)s->st[0][r - 1], yc = (int)s->st[1][r - 1];
    if (s->st[3][r - 1] != 1 || (r == 2 && s->st[3][0] != C) || s->st[0][r - 1] > 1 ||
        s->st[1][r - 1] > 1 || s->st[0][r - 1] < 0 || s->st[1][r - 1] < 0)
        return false;
    void *xp = ir_ptr(op->in[0]), *yp = ir_ptr(op->in[1]), *op_ = ir_ptr(op->out[0]);
    /* float4s: whole rows of them, every row start of a column-walking operand aligned */
    int vec = C % 4 == 0 && (((uintptr_t)xp | (uintptr_t)yp | (uintptr_t)op_) & 15) == 0 &&
              (!xc || xr % 4 == 0) && (!yc || yr % 4 == 0);
    uint32_t n = (uint32_t)(vec ? R * C / 4 : R * C), W = (uint32_t)(vec ? C / 4 : C), mul;
    int shr;
    cuda_fast_div(W, &mul, &shr);
    char name[32];
    snprintf(name, sizeof name, "em_%s_bc_f32", arith);
    CUfunction f = cuda_kernel(dev, name, what);
    long long xrl = xr, yrl = yr;
    void *params[] = {(void *)&xp, (void *)&yp, &op_, &n,   &W,  &mul,
                      &shr,        &xrl,        &xc,  &yrl, &yc, &vec};
    *st = f ? cuda_launch(dev, f, n, params, what) : em_last_status();
    return true;
}

static em_status run_binary(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *x = op->in[0], *y = op->in[1], *o = op->out[0];
    long long n = ir_numel(o);
    if (n == 0) return EM_OK;
    int kind = (int)op->kind;
    em_dtype dt = x->dtype, cdt = compute_dtype(op);
    bool cmp = cmp_kind(op->kind);
    void *xp = ir_ptr(x), *yp = ir_ptr(y), *op_ = ir_ptr(o);
    bool ff = (dt == EM_F32 || dt == EM_F64) && y->dtype == dt &&
              ((cmp && o->dtype == EM_BOOL) || (float_arith(op->kind) && o->dtype == dt));
    const char *arith = op->kind == EM_OP_ADD   ? "add"
                        : op->kind == EM_OP_SUB ? "sub"
                        : op->kind == EM_OP_MUL ? "mul"
                        : op->kind == EM_OP_DIV ? "div"
                                                : NULL;
    if (ff && contig_same(op)) {
        char name[32];
        bool v4 =
            dt == EM_F32 && !cmp && (((uintptr_t)xp | (uintptr_t)yp | (uintptr_t)op_) & 15) == 0;
        if (v4 && arith) { /* kernels/rows.cu: in f32, the same results */
            snprintf(name, sizeof name, "em_%s_v4_f32", arith);
            CUfunction f = cuda_kernel(dev, name, what);
            if (!f) return em_last_status();
            void *params[] = {&xp, &yp, &op_, &n};
            return cuda_launch(dev, f, n / 4 > 4 ? n / 4 : 4, params, what);
        }
        if (v4)
            snprintf(name, sizeof name, "em_binary_v4_f32");
        else
            snprintf(name, sizeof name, "em_%s_%s", cmp ? "compare" : "binary",
                     dt == EM_F32 ? "f32" : "f64");
        CUfunction f = cuda_kernel(dev, name, what);
        if (!f) return em_last_status();
        void *params[] = {&kind, &xp, &yp, &op_, &n};
        return cuda_launch(dev, f, v4 ? (n / 4 > 4 ? n / 4 : 4) : n, params, what);
    }
    int which = op->p.binary.scalar_in;
    if ((which == 1 || which == 2) && float_arith(op->kind) && o->dtype == EM_F32 &&
        op->in[which - 1]->rank == 0 && op->in[which - 1]->dtype == EM_F64 &&
        op->in[2 - which]->dtype == EM_F32 && same_shape(op->in[2 - which], o) &&
        ir_is_contiguous(op->in[2 - which]) && ir_is_contiguous(o)) {
        /* a *_scalar form on a contiguous f32 tensor */
        void *tp = ir_ptr(op->in[2 - which]), *sp = ir_ptr(op->in[which - 1]);
        int aligned = (((uintptr_t)tp | (uintptr_t)op_) & 15) == 0;
        CUfunction f = cuda_kernel(dev, "ew_binary_fs", what);
        if (!f) return em_last_status();
        void *params[] = {&kind, &tp, &sp, &which, &op_, &n, &aligned};
        return cuda_launch(dev, f, aligned ? (n / 4 > 4 ? n / 4 : 4) : n, params, what);
    }
    ew_idx s;
    make_idx(&s, op->in, 2, o);
    em_status bst;
    if (ff && dt == EM_F32 && arith && run_row_broadcast(op, dev, &s, arith, &bst, what))
        return bst;
    if (ff && dt == EM_F32) {
        CUfunction f = cuda_kernel(dev, "ew_binary_ff", what);
        if (!f) return em_last_status();
        int c = cmp;
        void *params[] = {&kind, &xp, &yp, &op_, &c, &n, &s};
        return cuda_launch(dev, f, n, params, what);
    }
    CUfunction f = cuda_kernel(dev, "ew_binary", what);
    if (!f) return em_last_status();
    int dx = dtc(dt), dy = dtc(y->dtype), dout = dtc(o->dtype), dc = dtc(cdt);
    int imode = !em_dtype_is_float(cdt), bits = 8 * (int)em_dtype_size(o->dtype);
    bool divides = imode && (op->kind == EM_OP_FLOOR_DIVIDE || op->kind == EM_OP_REMAINDER ||
                             op->kind == EM_OP_FMOD);
    int *flag = NULL;
    if (divides) {
        flag = cuda_pool_alloc(dev, sizeof(int));
        if (!flag) return em_last_status();
        if (cuda_memset32(dev, flag, 0, 1, what) != EM_OK) {
            cuda_pool_free(dev, flag);
            return em_last_status();
        }
    }
    void *fp = flag;
    void *params[] = {&kind, &xp, &dx, &yp, &dy, &op_, &dout, &dc, &imode, &bits, &n, &s, &fp};
    em_status st = cuda_launch(dev, f, n, params, what);
    if (flag) {
        int hit = 0;
        if (st == EM_OK) st = cuda_copy_to_host(dev, &hit, flag, sizeof hit, what);
        cuda_pool_free(dev, flag);
        if (st == EM_OK && hit)
            st = em_error(EM_ERR_INVALID_ARG, "%s: integer division by zero", what);
    }
    return st;
}

/* WHERE, CLAMP (scalar or tensor bounds), LERP */
static em_status run_select(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *o = op->out[0];
    long long n = ir_numel(o);
    if (n == 0) return EM_OK;
    ew_idx s;
    make_idx(&s, op->in, op->n_in, o);
    void *p[3] = {NULL, NULL, NULL};
    int d[3] = {0, 0, 0};
    for (int i = 0; i < op->n_in && i < 3; i++)
        p[i] = ir_ptr(op->in[i]), d[i] = dtc(op->in[i]->dtype);
    void *yp = ir_ptr(o);
    int dout = dtc(o->dtype), cdt = dtc(o->dtype), imode = !em_dtype_is_float(o->dtype);
    CUfunction f;
    if (op->kind == EM_OP_WHERE) {
        if (!(f = cuda_kernel(dev, "ew_where", what))) return em_last_status();
        void *params[] = {&p[0], &p[1], &d[1], &p[2], &d[2], &yp, &dout, &n, &s};
        return cuda_launch(dev, f, n, params, what);
    }
    if (op->kind == EM_OP_LERP) {
        /* the CPU's f32 row (cpu_loop collapses dims as make_idx does): f32 a, b and out of
         * unit stride along the innermost dim, w constant along it */
        int last = s.rank - 1;
        int f32mode = o->dtype == EM_F32 && op->in[0]->dtype == EM_F32 &&
                      op->in[1]->dtype == EM_F32 && last >= 0 && s.st[0][last] == 1 &&
                      s.st[1][last] == 1 && s.st[2][last] == 0 && s.st[3][last] == 1;
        if (!(f = cuda_kernel(dev, "ew_lerp", what))) return em_last_status();
        void *params[] = {&p[0], &d[0], &p[1], &d[1],    &p[2], &d[2],
                          &yp,   &dout, &cdt,  &f32mode, &n,    &s};
        return cuda_launch(dev, f, n, params, what);
    }
    if (op->p.clamp.bounds == 0) {
        double lo = op->p.clamp.lo, hi = op->p.clamp.hi;
        if (!(f = cuda_kernel(dev, "ew_clamp", what))) return em_last_status();
        void *params[] = {&p[0], &d[0], &yp, &dout, &cdt, &imode, &lo, &hi, &n, &s};
        return cuda_launch(dev, f, n, params, what);
    }
    /* tensor bounds: operand 1 the lower, operand 2 the upper bound */
    int flags = op->p.clamp.bounds & 3;
    ew_idx s2 = s;
    void *lp = NULL, *hp = NULL;
    int dl = 0, dh = 0;
    if (flags & 1) lp = p[1], dl = d[1];
    if (flags & 2) {
        int j = (flags & 1) ? 2 : 1;
        hp = p[j], dh = d[j];
        if (j == 1) memcpy(s2.st[2], s.st[1], sizeof s.st[1]);
    }
    if (!(f = cuda_kernel(dev, "ew_clamp_t", what))) return em_last_status();
    void *params[] = {&p[0], &d[0], &lp, &dl, &hp, &dh, &yp, &dout, &cdt, &imode, &flags, &n, &s2};
    return cuda_launch(dev, f, n, params, what);
}

/* THRESHOLD_BACKWARD (relu's backward): y <= t ? +0 : g; contiguous f32 in rows.cu's kernel */
static em_status run_threshold_bwd(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *o = op->out[0];
    long long n = ir_numel(o);
    if (n == 0) return EM_OK;
    void *gp = ir_ptr(op->in[0]), *yp = ir_ptr(op->in[1]), *op_ = ir_ptr(o);
    CUfunction f;
    if (o->dtype == EM_F32 && contig_same(op)) {
        int v4 = (((uintptr_t)gp | (uintptr_t)yp | (uintptr_t)op_) & 15) == 0;
        float t = (float)op->p.threshold.threshold;
        if (!(f = cuda_kernel(dev, "em_threshold_bwd_f32", what))) return em_last_status();
        void *params[] = {&gp, &yp, &op_, &t, &n, &v4};
        return cuda_launch(dev, f, v4 ? (n / 4 > 4 ? n / 4 : 4) : n, params, what);
    }
    ew_idx s;
    make_idx(&s, op->in, 2, o);
    double t = op->p.threshold.threshold;
    int dt = dtc(o->dtype);
    if (!(f = cuda_kernel(dev, "ew_threshold_bwd", what))) return em_last_status();
    void *params[] = {&gp, &yp, &op_, &dt, &t, &n, &s};
    return cuda_launch(dev, f, n, params, what);
}

/* EW_GRAD: operand 0 the forward's x (a), 1 its b (binary kinds), 2 its output y */
static em_status run_grad(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *o = op->out[0];
    long long n = ir_numel(o);
    if (n == 0) return EM_OK;
    int binary = op->n_in == 3;
    ir_tensor *ops[3] = {op->in[0], binary ? op->in[1] : NULL, op->in[op->n_in - 1]};
    ew_idx s;
    make_idx(&s, ops, 3, o);
    void *ap = ir_ptr(ops[0]), *bp = binary ? ir_ptr(ops[1]) : NULL, *yp = ir_ptr(ops[2]),
         *op_ = ir_ptr(o);
    int kind = op->p.ew_grad.kind, arg = op->p.ew_grad.arg;
    int da = dtc(ops[0]->dtype), db = binary ? dtc(ops[1]->dtype) : 0, dy = dtc(ops[2]->dtype),
        dout = dtc(o->dtype);
    double pa = op->p.ew_grad.act.v[0], pb = op->p.ew_grad.act.v[1];
    CUfunction f = cuda_kernel(dev, "ew_grad", what);
    if (!f) return em_last_status();
    void *params[] = {&kind, &arg, &binary, &ap, &da, &bp, &db, &yp,
                      &dy,   &op_, &dout,   &pa, &pb, &n,  &s};
    return cuda_launch(dev, f, n, params, what);
}

/* ---- casts and creation -----------------------------------------------------------------------
 */

static em_status run_cast(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *x = op->in[0], *o = op->out[0];
    long long n = ir_numel(o);
    if (n == 0) return EM_OK;
    ew_idx s;
    make_idx(&s, op->in, 1, o);
    CUfunction f = cuda_kernel(dev, "ew_cast", what);
    if (!f) return em_last_status();
    void *xp = ir_ptr(x), *yp = ir_ptr(o);
    int dx = dtc(x->dtype), dout = dtc(o->dtype);
    void *params[] = {&xp, &dx, &yp, &dout, &n, &s};
    return cuda_launch(dev, f, n, params, what);
}

static em_status run_create(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *o = op->out[0];
    long long n = ir_numel(o);
    if (n == 0) return EM_OK;
    void *yp = ir_ptr(o);
    int dout = dtc(o->dtype);
    CUfunction f;
    if (op->kind == EM_OP_ONE_HOT) {
        const ir_tensor *idx = op->in[0];
        ew_idx s;
        make_idx1(&s, idx);
        long long classes = op->p.one_hot.classes;
        void *ip = ir_ptr(idx);
        int di = dtc(idx->dtype);
        if (!(f = cuda_kernel(dev, "ew_one_hot", what))) return em_last_status();
        void *params[] = {&ip, &di, &yp, &n, &classes, &s};
        return cuda_launch(dev, f, n, params, what);
    }
    if (op->kind == EM_OP_TRIL || op->kind == EM_OP_TRIU) {
        ew_idx s;
        make_idx(&s, op->in, 1, o);
        long long r = o->shape[o->rank - 2], c = o->shape[o->rank - 1], k = op->p.diag.k;
        int upper = op->kind == EM_OP_TRIU;
        void *xp = ir_ptr(op->in[0]);
        if (!(f = cuda_kernel(dev, "ew_tri", what))) return em_last_status();
        void *params[] = {&xp, &yp, &dout, &n, &r, &c, &k, &upper, &s};
        return cuda_launch(dev, f, n, params, what);
    }
    int kind = op->kind == EM_OP_ARANGE ? 0 : op->kind == EM_OP_LINSPACE ? 1 : 2;
    double a = kind == 0 ? op->p.arange.start : kind == 1 ? op->p.linspace.start : 0;
    double b = kind == 0 ? op->p.arange.step : kind == 1 ? op->p.linspace.end : 0;
    long long cols = kind == 2 ? o->shape[1] : 1;
    if (!(f = cuda_kernel(dev, "ew_range", what))) return em_last_status();
    void *params[] = {&kind, &yp, &dout, &n, &a, &b, &cols};
    return cuda_launch(dev, f, n, params, what);
}

/* RAND_UNIFORM, RAND_NORMAL, BERNOULLI, RANDINT, DROPOUT from the Philox stream of the record's
 * em_p_random (in a graph capture, from the graph's pair that each replay fills:
 * cuda_capture_rng). */
static em_status run_random(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *o = op->out[0];
    long long n = ir_numel(o);
    if (n == 0) return EM_OK;
    const em_p_random *r = &op->p.random;
    unsigned long long seed = r->seed, off = r->offset;
    void *gen;
    em_status st = cuda_capture_rng(dev, seed, &off, &gen, what);
    if (st != EM_OK) return st;
    void *yp = ir_ptr(o);
    int dout = dtc(o->dtype);
    ew_idx s;
    memset(&s, 0, sizeof s);
    if (op->n_in == 1) make_idx(&s, op->in, 1, o);
    CUfunction f;
    if (op->kind == EM_OP_DROPOUT) {
        double p = r->p, scale = p >= 1 ? 0.0 : 1.0 / (1.0 - p);
        void *xp = ir_ptr(op->in[0]);
        int dx = dtc(op->in[0]->dtype);
        if (!(f = cuda_kernel(dev, "ew_dropout", what))) return em_last_status();
        void *params[] = {&xp, &dx, &yp, &dout, &n, &seed, &off, &p, &scale, &s, &gen};
        return cuda_launch(dev, f, n, params, what);
    }
    int kind = op->kind == EM_OP_RAND_UNIFORM  ? 0
               : op->kind == EM_OP_RAND_NORMAL ? 1
               : op->kind == EM_OP_BERNOULLI   ? 2
                                               : 3;
    double a = r->v[0], b = r->v[1];
    long long lo = r->int_low, range = r->int_high - r->int_low;
    void *pp = op->n_in == 1 ? ir_ptr(op->in[0]) : NULL;
    int dp = op->n_in == 1 ? dtc(op->in[0]->dtype) : 0;
    if (!(f = cuda_kernel(dev, "ew_rng", what))) return em_last_status();
    void *params[] = {&kind, &yp, &dout, &n, &seed, &off, &a, &b, &pp, &dp, &lo, &range, &s, &gen};
    return cuda_launch(dev, f, n, params, what);
}

em_status cuda_ew_exec(const ir_op *op, int dev, const char *what)
{
    em_op_kind k = op->kind;
    if (unary_kind(k)) return run_unary(op, dev, what);
    if (binary_kind(k)) return run_binary(op, dev, what);
    switch (k) {
    case EM_OP_WHERE:
    case EM_OP_CLAMP:
    case EM_OP_LERP: return run_select(op, dev, what);
    case EM_OP_THRESHOLD_BACKWARD: return run_threshold_bwd(op, dev, what);
    case EM_OP_EW_GRAD: return run_grad(op, dev, what);
    case EM_OP_CAST: return run_cast(op, dev, what);
    case EM_OP_RAND_UNIFORM:
    case EM_OP_RAND_NORMAL:
    case EM_OP_BERNOULLI:
    case EM_OP_RANDINT:
    case EM_OP_DROPOUT: return run_random(op, dev, what);
    default: return run_create(op, dev, what);
    }
}
