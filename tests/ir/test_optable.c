/* The op table (src/ir/ops.def): its rows are consistent (names, arity, flags, parameters), and
 * the scalar expressions and derivatives it records for the elementwise kinds agree with what the
 * CPU kernels compute and with the gradients the backward rules give, so a code generator can
 * take them as the kinds' definitions. */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "ir/decode.h"
#include "ir/scalar.h"
#include "tensor/op.h"

/* ---- the expressions, compiled: which = 0 the value, 1..3 the derivative by in[which-1] ---- */

/* float-domain rows (integer-only dtype rules evaluate in eval_int) */
/* clang-format off */
#define IR_NOEXPR           (NAN)
#define F_(e)               ((double)(e))
#define F_NONE(e)           (NAN)
#define FX_EXPLICIT(e)      F_(e)
#define FX_SAME(e)          F_(e)
#define FX_FLOAT_MATH(e)    F_(e)
#define FX_KEEP_NUM(e)      F_(e)
#define FX_KEEP_ALL(e)      F_(e)
#define FX_SQUARE(e)        F_(e)
#define FX_BOOL(e)          F_(e)
#define FX_BITWISE(e)       F_NONE(e)
#define FX_INT(e)           F_NONE(e)
#define FX_FLOAT(e)         F_(e)
#define FX_PROMOTE(e)       F_(e)
#define FX_PROMOTE_NUM(e)   F_(e)
#define FX_PROMOTE_FLOAT(e) F_(e)
#define FX_PROMOTE_TAIL(e)  F_(e)
#define FX_PROMOTE_ALL(e)   F_(e)
#define FX_COMPARE(e)       F_(e)
#define FX_LOGICAL(e)       F_(e)
#define FX_CLAMP(e)         F_(e)
#define FX_SUM(e)           F_(e)
#define FX_I64(e)           F_(e)

static double eval_float(em_op_kind k, int which, double x, double a, double b, double c, double y,
                         const em_params *pp)
{
    const em_params p = *pp;
    (void)x, (void)a, (void)b, (void)c, (void)y, (void)p;
    switch (k) {
#define X(kind, str, fam, fl, imin, imax, omin, omax, par, dt, doc, low, e, d0, d1, d2)            \
    case EM_OP_##kind:                                                                             \
        return which == 0   ? FX_##dt(e)                                                           \
               : which == 1 ? FX_##dt(d0)                                                          \
               : which == 2 ? FX_##dt(d1)                                                          \
                            : FX_##dt(d2);
#include "ir/ops.def"
#undef X
    default: return NAN;
    }
}

/* integer-domain rows (dtype rules BITWISE and INT): the value in int64_t for a dtype of `bits`
 * bits; the other rows are no cases here */
#define IR_INT_CASE_BITWISE(kind, e) case EM_OP_##kind: return (int64_t)(e);
#define IR_INT_CASE_INT(kind, e)     case EM_OP_##kind: return (int64_t)(e);
#define IR_INT_CASE_EXPLICIT(kind, e)
#define IR_INT_CASE_SAME(kind, e)
#define IR_INT_CASE_FLOAT_MATH(kind, e)
#define IR_INT_CASE_KEEP_NUM(kind, e)
#define IR_INT_CASE_KEEP_ALL(kind, e)
#define IR_INT_CASE_SQUARE(kind, e)
#define IR_INT_CASE_BOOL(kind, e)
#define IR_INT_CASE_FLOAT(kind, e)
#define IR_INT_CASE_PROMOTE(kind, e)
#define IR_INT_CASE_PROMOTE_NUM(kind, e)
#define IR_INT_CASE_PROMOTE_FLOAT(kind, e)
#define IR_INT_CASE_PROMOTE_TAIL(kind, e)
#define IR_INT_CASE_PROMOTE_ALL(kind, e)
#define IR_INT_CASE_COMPARE(kind, e)
#define IR_INT_CASE_LOGICAL(kind, e)
#define IR_INT_CASE_CLAMP(kind, e)
#define IR_INT_CASE_SUM(kind, e)
#define IR_INT_CASE_I64(kind, e)

static bool int_domain(em_op_kind k)
{
    ir_dtype_rule r = ir_info_of(k)->dtype;
    return r == IR_DT_BITWISE || r == IR_DT_INT;
}

static int64_t eval_int(em_op_kind k, int64_t x, int64_t a, int64_t b, int bits)
{
    (void)x, (void)a, (void)b, (void)bits;
    switch (k) {
        /* clang-format off */
#define X(kind, str, fam, fl, imin, imax, omin, omax, par, dt, doc, low, e, d0, d1, d2) IR_INT_CASE_##dt(kind, e)
#include "ir/ops.def"
#undef X
        /* clang-format on */
    default: return 0;
    }
}

/* ---- the rows ------------------------------------------------------------------------------ */

static bool elementwise(em_op_kind k)
{
    return ir_has(k, IR_EW1 | IR_EW2 | IR_EW);
}

static void check_rows(void)
{
    for (int k = 0; k < EM_OP_COUNT; k++) {
        const ir_info *r = ir_info_of((em_op_kind)k);
        CHECK(r->name && r->name[0] && strcmp(em_op_name((em_op_kind)k), r->name) == 0,
              "kind %d has no name", k);
        for (int j = 0; j < k; j++)
            CHECK(strcmp(ir_ops[j].name, r->name) != 0, "kinds %d and %d are both `%s`", j, k,
                  r->name);
        CHECK(r->in_min >= 0 && r->in_min <= r->in_max && r->in_max <= EM_OP_MAX_IN,
              "%s: inputs %d-%d", r->name, r->in_min, r->in_max);
        CHECK(r->out_min >= 1 && r->out_min <= r->out_max && r->out_max <= EM_OP_MAX_OUT,
              "%s: outputs %d-%d", r->name, r->out_min, r->out_max);
        CHECK(r->param_size > 0 && r->param_size <= sizeof(em_params), "%s: parameter size %d",
              r->name, r->param_size);
        CHECK(r->dtypes && r->dtypes[0], "%s: no dtypes for the docs", r->name);
        CHECK(!(ir_has((em_op_kind)k, IR_DIFF) && ir_has((em_op_kind)k, IR_ZERO_GRAD)),
              "%s: both differentiable and of zero gradient", r->name);
        if (ir_has((em_op_kind)k, IR_EW1))
            CHECK(!strcmp(r->family, "unary") && r->in_min == 1 && r->in_max == 1,
                  "%s: an elementwise unary kind out of the unary family", r->name);
        if (ir_has((em_op_kind)k, IR_EW2))
            CHECK(!strcmp(r->family, "binary") && r->in_min == 2 && r->in_max == 2,
                  "%s: an elementwise binary kind out of the binary family", r->name);
        if (ir_has((em_op_kind)k, IR_VIEW))
            CHECK(!strcmp(r->family, "view"), "%s: a view out of the view family", r->name);
        if (elementwise((em_op_kind)k)) {
            CHECK(r->expr[0], "%s: elementwise without a scalar expression", r->name);
            if (ir_has((em_op_kind)k, IR_DIFF | IR_ZERO_GRAD) && !int_domain((em_op_kind)k)) {
                bool any = false;
                for (int i = 0; i < 3; i++) any = any || r->d[i][0];
                CHECK(any, "%s: differentiable and elementwise without a derivative", r->name);
            }
        } else {
            CHECK(ir_has((em_op_kind)k, IR_EW1 | IR_EW2 | IR_EW) || r->d[0][0] == '\0' ||
                      !strcmp(r->family, "create"),
                  "%s: a derivative without an elementwise expression", r->name);
        }
    }
}

/* ---- values and derivatives against the kernels and the rules ---------------------------- */

/* The test's parameters per kind (zero for the kinds without). */
static em_params params_of(em_op_kind k)
{
    em_params p;
    memset(&p, 0, sizeof p);
    switch (k) {
    case EM_OP_LEAKY_RELU: p.act.negative_slope = 0.1; break;
    case EM_OP_ELU: p.act.alpha = 0.7; break;
    case EM_OP_CELU: p.act.alpha = 1.3; break;
    case EM_OP_SOFTPLUS: p.act.beta = 1.5, p.act.threshold = 2.0; break;
    case EM_OP_HARDTANH: p.act.min_val = -0.7, p.act.max_val = 1.2; break;
    case EM_OP_MASKED_FILL: p.fill.value = 2.5; break;
    case EM_OP_CLAMP: p.clamp.lo = -0.5, p.clamp.hi = 0.8; break;
    case EM_OP_THRESHOLD_BACKWARD: p.threshold.threshold = 0.3; break;
    default: break;
    }
    return p;
}

static bool close_(double e, double k, double rtol)
{
    if (isnan(e) || isnan(k)) return isnan(e) && isnan(k);
    if (isinf(e) || isinf(k)) return e == k;
    return fabs(e - k) <= rtol * (fabs(k) > 1 ? fabs(k) : 1);
}

/* Points for the values (specials included) and, finite and off every kink, for the
 * derivatives. */
static const double vals[] = {-7.3, -3.1, -2.0001, -1.2, -0.77, -0.31,    -0.05,
                              0.0,  -0.0, 0.04,    0.29, 0.6,   0.93,     1.5,
                              2.2,  3.7,  6.1,     25.0, NAN,   INFINITY, -INFINITY};
static const double dvals[] = {-4.7, -2.9, -1.3, -0.83, -0.41, -0.11, 0.07,
                               0.37, 0.71, 0.97, 1.45,  2.8,   4.1,   7.3};
#define NV  ((int)(sizeof vals / sizeof vals[0]))
#define NDV ((int)(sizeof dvals / sizeof dvals[0]))

/* Runs kind k's record on f64 inputs (bool where the kind takes a mask or a condition). */
static em_tensor *run_kind(em_op_kind k, em_tensor *const *in, int n, const em_params *p)
{
    em_dtype out = EM_F64;
    ir_dtype_rule r = ir_info_of(k)->dtype;
    if (r == IR_DT_BOOL || r == IR_DT_COMPARE || r == IR_DT_LOGICAL) out = EM_BOOL;
    em_tensor *shape_of = in[n - 1];
    for (int i = 0; i < n; i++)
        if (em_tensor_numel(in[i]) > em_tensor_numel(shape_of)) shape_of = in[i];
    em_shape s = em_tensor_shape(shape_of);
    return tn_run(k, tn_new(out, s.dims, s.rank, EM_CPU), in, n, p);
}

static bool bool_input(em_op_kind k, int i)
{
    return (k == EM_OP_WHERE && i == 0) || (k == EM_OP_MASKED_FILL && i == 1);
}

/* Input i's values at sample j of a grid over `pts` (each input walks the grid at its own pace,
 * so every pair of values meets); 0/1 for a bool input. */
static double point(em_op_kind k, int i, int j, const double *pts, int npts)
{
    if (bool_input(k, i)) return (double)((j / (i + 1)) % 2);
    int step = 1;
    for (int t = 0; t < i; t++) step *= npts;
    return pts[(j / step) % npts];
}

static void check_float_kind(em_op_kind k, bool derivatives)
{
    const ir_info *r = ir_info_of(k);
    int n = r->in_min;
    const double *pts = derivatives ? dvals : vals;
    int npts = derivatives ? NDV : NV, total = 1;
    for (int i = 0; i < n; i++) total *= npts;
    em_params p = params_of(k);
    em_scope_begin();
    em_tensor *in[3] = {NULL, NULL, NULL};
    double *v[3];
    for (int i = 0; i < n; i++) {
        v[i] = em_alloc((size_t)total * sizeof(double));
        for (int j = 0; j < total; j++) v[i][j] = point(k, i, j, pts, npts);
        in[i] = em_from_f64(v[i], EM_SHAPE(total));
        if (bool_input(k, i)) in[i] = em_cast(in[i], EM_BOOL);
        if (derivatives && !bool_input(k, i)) in[i] = em_requires_grad(in[i], true);
    }
    em_tensor *y = run_kind(k, in, n, &p);
    CHECK(y != NULL, "%s: the kernel failed: %s", r->name, em_last_error());
    double *yv = em_alloc((size_t)total * sizeof(double));
    if (y) em_to_data(y, yv, EM_F64, total);
    em_tensor *grads[3] = {NULL, NULL, NULL};
    if (derivatives && y) {
        em_grads *g = em_backward(em_sum(y, EM_ALL, false));
        CHECK(g != NULL, "%s: backward failed: %s", r->name, em_last_error());
        for (int i = 0; g && i < n; i++)
            if (!bool_input(k, i)) grads[i] = em_grad(g, in[i]);
    }
    int bad = 0;
    for (int j = 0; y && j < total && bad < 3; j++) {
        double a = n > 0 ? v[0][j] : 0, b = n > 1 ? v[1][j] : 0, c = n > 2 ? v[2][j] : 0;
        double x = a;
        if (!derivatives) {
            double e = eval_float(k, 0, x, a, b, c, 0, &p);
            if (!close_(e, yv[j], 1e-12)) {
                CHECK(false, "%s(%g, %g, %g): the table says %.17g, the kernel %.17g", r->name, a,
                      b, c, e, yv[j]);
                bad++;
            }
            continue;
        }
        for (int i = 0; i < n; i++) {
            if (bool_input(k, i) || !r->d[i][0]) continue;
            double e = eval_float(k, i + 1, x, a, b, c, yv[j], &p);
            double gv = grads[i] ? em_get_f64(grads[i], (int64_t[]){j}) : 0.0;
            if (!close_(e, gv, 1e-9)) {
                CHECK(false, "%s(%g, %g, %g): d/d in[%d] is %.17g by the table, %.17g by the rule",
                      r->name, a, b, c, i, e, gv);
                bad++;
            }
        }
    }
    for (int i = 0; i < n; i++) em_free(v[i]);
    em_free(yv);
    em_scope_end();
}

static void check_int_kind(em_op_kind k)
{
    const ir_info *r = ir_info_of(k);
    enum { NI = 13 };
    static const int64_t iv[NI] = {-70, -9, -3, -1, 0, 1, 2, 5, 33, 63, 64, 100, INT64_MAX};
    const int ni = NI;
    int n = r->in_min, total = n == 1 ? ni : ni * ni;
    em_scope_begin();
    int64_t a[NI * NI], b[NI * NI];
    for (int j = 0; j < total; j++) a[j] = iv[j % ni], b[j] = iv[(j / ni) % ni];
    em_tensor *in[2] = {em_from_i64(a, EM_SHAPE(total)), em_from_i64(b, EM_SHAPE(total))};
    em_tensor *y = tn_run(k, tn_new(EM_I64, (int64_t[]){total}, 1, EM_CPU), in, n, NULL);
    CHECK(y != NULL, "%s: the kernel failed: %s", r->name, em_last_error());
    int64_t out[NI * NI];
    if (y) em_to_data(y, out, EM_I64, total);
    for (int j = 0, bad = 0; y && j < total && bad < 3; j++) {
        int64_t e = eval_int(k, a[j], a[j], b[j], 64);
        if (e != out[j]) {
            CHECK(false, "%s(%lld, %lld): the table says %lld, the kernel %lld", r->name,
                  (long long)a[j], (long long)b[j], (long long)e, (long long)out[j]);
            bad++;
        }
    }
    em_scope_end();
}

static void check_expressions(void)
{
    int checked = 0, derived = 0;
    for (int k = 0; k < EM_OP_COUNT; k++) {
        em_op_kind kind = (em_op_kind)k;
        if (!elementwise(kind)) continue;
        if (int_domain(kind)) {
            check_int_kind(kind);
        } else {
            check_float_kind(kind, false);
            ir_dtype_rule dr = ir_info_of(kind)->dtype;
            bool float_out = dr != IR_DT_BOOL && dr != IR_DT_COMPARE && dr != IR_DT_LOGICAL;
            if (ir_has(kind, IR_DIFF | IR_ZERO_GRAD) && float_out) {
                check_float_kind(kind, true);
                derived++;
            }
        }
        checked++;
    }
    CHECK(checked >= 80 && derived >= 50, "only %d expressions and %d derivatives checked", checked,
          derived);
}

int main(void)
{
    h_init();
    check_rows();
    check_expressions();
    return h_finish();
}
