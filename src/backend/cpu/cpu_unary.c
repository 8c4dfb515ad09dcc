/* CPU kernels for the unary family (math and activations). Each row of the strided loop is
 * processed in chunks: loaded into a small typed buffer (or read in place when it is a
 * contiguous f32/f64 row), transformed by the kernel generated from the op table's expression
 * (build/gen/cpu_ew_gen.c; GELU's hand-tuned vector kernel where the CPU has one), and stored. f16,
 * bf16 and integer inputs of float math compute in f32; f64 computes in double; integer-preserving
 * ops compute in int64 and wrap to the output width. The output never overlaps the input (the inner
 * loops take restrict pointers). */
#include "cpu.h"
#include "cpu_ew_gen.h"
#include "cpu_fast.h"

#define CHUNK 256

/* How a kernel computes, chosen once per op from the dtypes. */
typedef enum domain {
    D_F32,   /* float buffer; output f32, f16 or bf16 */
    D_F64,   /* double buffer; f64 -> f64 */
    D_INT,   /* int64 buffer; integer or bool -> integer or bool */
    D_PRED,  /* any -> bool (isnan, isinf, isfinite, logical_not) */
    D_GRAD1, /* EW_GRAD of a unary kind: x, y */
    D_GRAD2, /* EW_GRAD of a binary kind: a, b, y */
} domain;

typedef struct uctx {
    em_op_kind kind;
    em_dtype dt_in, dt_out;
    domain dom;
    em_params p;              /* the record's parameters */
    const cpu_fast_ops *fast; /* vector kernels, or NULL */
    int hint;                 /* GELU's store hint (cpu_store_begin) */
    em_dtype dt_ops[3];       /* EW_GRAD: the dtypes of its operands (inputs, output) */
} uctx;

/* y[i] = op(x[i]) for n floats (distinct buffers): the hand-tuned vector GELU where the CPU has
 * one, else the kernel generated from the op table. */
static void run_f32(const uctx *c, const float *restrict x, float *restrict y, int64_t n)
{
    if (c->kind == EM_OP_GELU && c->fast) {
        c->fast->gelu(x, y, n, c->hint);
        if (c->hint & CPU_FAST_STREAM) cpu_fast_stream_fence();
        return;
    }
    cpu_gen_unary_f32(c->kind, &c->p, x, y, n);
}

static void run_f64(const uctx *c, const double *restrict x, double *restrict y, int64_t n)
{
    cpu_gen_unary_f64(c->kind, &c->p, x, y, n);
}

/* Integer-preserving ops on int64 values (wrapping arithmetic, as two's complement). */
static void run_int(const uctx *c, const int64_t *restrict x, int64_t *restrict y, int64_t n)
{
    int bits = c->dt_in == EM_BOOL ? 1 : 8 * (int)em_dtype_size(c->dt_in);
    cpu_gen_unary_i64(c->kind, &c->p, x, y, n, bits);
}

/* ---- loads and stores --------------------------------------------------------------------- */

static void load_f32(float *buf, const char *p, int64_t s, em_dtype dt, int64_t n)
{
    switch (dt) {
    case EM_F32:
        for (int64_t i = 0; i < n; i++) buf[i] = *(const float *)(p + i * s);
        break;
    case EM_F16:
        for (int64_t i = 0; i < n; i++) buf[i] = em_f16_to_f32(*(const uint16_t *)(p + i * s));
        break;
    case EM_BF16:
        for (int64_t i = 0; i < n; i++) buf[i] = em_bf16_to_f32(*(const uint16_t *)(p + i * s));
        break;
    case EM_I64: /* one rounding, int64 -> float */
        for (int64_t i = 0; i < n; i++) buf[i] = (float)*(const int64_t *)(p + i * s);
        break;
    default: /* narrower integers and bool are exact in double */
        for (int64_t i = 0; i < n; i++) buf[i] = (float)ir_get_f64(p + i * s, dt);
        break;
    }
}

static void store_f32(char *p, int64_t s, em_dtype dt, const float *buf, int64_t n)
{
    switch (dt) {
    case EM_F32:
        for (int64_t i = 0; i < n; i++) *(float *)(p + i * s) = buf[i];
        break;
    case EM_F16:
        for (int64_t i = 0; i < n; i++) *(uint16_t *)(p + i * s) = em_f32_to_f16(buf[i]);
        break;
    case EM_BF16:
        for (int64_t i = 0; i < n; i++) *(uint16_t *)(p + i * s) = em_f32_to_bf16(buf[i]);
        break;
    default: break;
    }
}

static inline int64_t imin(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* One row of the loop: p[0]/s[0] the output, p[1]/s[1] the input. */
static void row_f32(char **p, const int64_t *s, int64_t n, void *vctx)
{
    const uctx *c = vctx;
    float xb[CHUNK], yb[CHUNK];
    bool in_direct = c->dt_in == EM_F32 && s[1] == 4;
    bool out_direct = c->dt_out == EM_F32 && s[0] == 4;
    if (in_direct && out_direct) { /* whole row in one call: no buffer to bound */
        run_f32(c, (const float *)p[1], (float *)p[0], n);
        return;
    }
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        int64_t m = imin(CHUNK, n - i0);
        const char *in = p[1] + i0 * s[1];
        char *out = p[0] + i0 * s[0];
        const float *src = xb;
        if (in_direct)
            src = (const float *)in;
        else
            load_f32(xb, in, s[1], c->dt_in, m);
        float *dst = out_direct ? (float *)out : yb;
        run_f32(c, src, dst, m);
        if (!out_direct) store_f32(out, s[0], c->dt_out, yb, m);
    }
}

static void row_f64(char **p, const int64_t *s, int64_t n, void *vctx)
{
    const uctx *c = vctx;
    double xb[CHUNK], yb[CHUNK];
    bool in_direct = s[1] == 8, out_direct = s[0] == 8;
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        int64_t m = imin(CHUNK, n - i0);
        const char *in = p[1] + i0 * s[1];
        char *out = p[0] + i0 * s[0];
        const double *src = xb;
        if (in_direct)
            src = (const double *)in;
        else
            for (int64_t i = 0; i < m; i++) xb[i] = *(const double *)(in + i * s[1]);
        double *dst = out_direct ? (double *)out : yb;
        run_f64(c, src, dst, m);
        if (!out_direct)
            for (int64_t i = 0; i < m; i++) *(double *)(out + i * s[0]) = yb[i];
    }
}

static void row_int(char **p, const int64_t *s, int64_t n, void *vctx)
{
    const uctx *c = vctx;
    int64_t xb[CHUNK], yb[CHUNK];
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        int64_t m = imin(CHUNK, n - i0);
        const char *in = p[1] + i0 * s[1];
        char *out = p[0] + i0 * s[0];
        for (int64_t i = 0; i < m; i++) xb[i] = ir_get_i64(in + i * s[1], c->dt_in);
        run_int(c, xb, yb, m);
        for (int64_t i = 0; i < m; i++) ir_set_i64(out + i * s[0], c->dt_out, yb[i]);
    }
}

/* The kinds whose dtype rule gives bool (isnan, isinf, isfinite, logical_not), from any dtype
 * through double: exact for the tests they make (no nonzero integer converts to 0). */
static void row_pred(char **p, const int64_t *s, int64_t n, void *vctx)
{
    const uctx *c = vctx;
    double buf[CHUNK];
    uint8_t yb[CHUNK];
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        int64_t m = imin(CHUNK, n - i0);
        const char *x = p[1] + i0 * s[1];
        uint8_t *y = (uint8_t *)p[0] + i0 * s[0];
        for (int64_t i = 0; i < m; i++) buf[i] = ir_get_f64(x + i * s[1], c->dt_in);
        cpu_gen_unary_pred(c->kind, buf, yb, m);
        for (int64_t i = 0; i < m; i++) y[i * s[0]] = yb[i];
    }
}

/* EW_GRAD: p[0] the derivative, p[1] (and p[2]) the forward's inputs, the last its output; in
 * double whatever the float dtype. */
static void row_grad(char **p, const int64_t *s, int64_t n, void *vctx)
{
    const uctx *c = vctx;
    const em_p_ew_grad *g = &c->p.ew_grad;
    em_params fp = {.act = g->act};
    int ny = c->dom == D_GRAD2 ? 3 : 2;
    double ab[CHUNK], bb[CHUNK], yb[CHUNK], db[CHUNK];
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        int64_t m = imin(CHUNK, n - i0);
        for (int64_t i = 0; i < m; i++) {
            ab[i] = ir_get_f64(p[1] + (i0 + i) * s[1], c->dt_ops[0]);
            if (ny == 3) bb[i] = ir_get_f64(p[2] + (i0 + i) * s[2], c->dt_ops[1]);
            yb[i] = ir_get_f64(p[ny] + (i0 + i) * s[ny], c->dt_ops[ny - 1]);
        }
        cpu_gen_grad_f64((em_op_kind)g->kind, g->arg, &fp, ab, ny == 3 ? bb : NULL, yb, db, m);
        for (int64_t i = 0; i < m; i++) ir_set_f64(p[0] + (i0 + i) * s[0], c->dt_out, db[i]);
    }
}

void cpu_act_f32(em_op_kind kind, const float *x, float *y, int64_t n)
{
    uctx c = {.kind = kind, .dt_in = EM_F32, .dt_out = EM_F32, .dom = D_F32, .fast = cpu_fast()};
    run_f32(&c, x, y, n);
}

void cpu_act_f64(em_op_kind kind, const double *x, double *y, int64_t n)
{
    uctx c = {.kind = kind, .dt_in = EM_F64, .dt_out = EM_F64, .dom = D_F64};
    run_f64(&c, x, y, n);
}

/* EW_GRAD over the forward's operands (broadcast to the output's shape). */
static em_status exec_grad(const ir_op *op)
{
    const ir_tensor *o = op->out[0];
    uctx c = {.kind = op->kind, .dt_in = op->in[0]->dtype, .dt_out = o->dtype, .p = op->p};
    c.dom = op->n_in == 3 ? D_GRAD2 : D_GRAD1;
    if (!cpu_gen_grad_f64((em_op_kind)op->p.ew_grad.kind, op->p.ew_grad.arg, &op->p, NULL, NULL,
                          NULL, NULL, 0))
        return em_error(EM_ERR_UNSUPPORTED,
                        "ew_grad: the op table gives %s no derivative by input %d",
                        em_op_name((em_op_kind)op->p.ew_grad.kind), (int)op->p.ew_grad.arg);
    int64_t st[CPU_MAX_OPS][EM_MAX_RANK];
    char *base[CPU_MAX_OPS];
    cpu_bstrides(o, o->shape, o->rank, st[0]);
    base[0] = ir_ptr(o);
    for (int k = 0; k < op->n_in; k++) {
        cpu_bstrides(op->in[k], o->shape, o->rank, st[k + 1]);
        base[k + 1] = ir_ptr(op->in[k]);
        c.dt_ops[k] = op->in[k]->dtype; /* a binary kind's inputs may differ (a wrapped scalar) */
    }
    cpu_loop(o->rank, o->shape, op->n_in + 1, base, st, row_grad, &c, true);
    return EM_OK;
}

// x: any shape, any strides -> out: same shape, contiguous
em_status cpu_exec_unary(const ir_op *op)
{
    if (op->kind == EM_OP_EW_GRAD) return exec_grad(op);
    const ir_tensor *x = op->in[0];
    const ir_tensor *o = op->out[0];
    uctx c = {
        .kind = op->kind,
        .dt_in = x->dtype,
        .dt_out = o->dtype,
        .p = op->p,
        .fast = cpu_fast(),
    };
    /* f32 outputs are written in place (contiguous); others go through a buffer on the stack */
    bool fast_gelu = op->kind == EM_OP_GELU && c.fast && o->dtype == EM_F32;
    cpu_store_plan sp = cpu_store_begin(CPU_STORE_GELU, fast_gelu ? (int64_t)ir_numel(o) * 4 : 0);
    c.hint = sp.hint;
    if (ir_info_of(op->kind)->dtype == IR_DT_BOOL) /* isnan, isinf, isfinite, logical_not */
        c.dom = D_PRED;
    else if (x->dtype == EM_F64)
        c.dom = D_F64;
    else if (em_dtype_is_float(o->dtype))
        c.dom = D_F32;
    else
        c.dom = D_INT;
    cpu_row_fn fn = c.dom == D_F32   ? row_f32
                    : c.dom == D_F64 ? row_f64
                    : c.dom == D_INT ? row_int
                                     : row_pred;
    int64_t st[2][EM_MAX_RANK];
    cpu_bstrides(o, o->shape, o->rank, st[0]);
    cpu_bstrides(x, o->shape, o->rank, st[1]);
    char *base[2] = {ir_ptr(o), ir_ptr(x)};
    cpu_loop(o->rank, o->shape, 2, base, st, fn, &c, true);
    cpu_store_end(&sp);
    return EM_OK;
}
