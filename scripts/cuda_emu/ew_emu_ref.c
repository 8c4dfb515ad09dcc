/* The CPU side of the elementwise emulator (ew_emu.cpp): the op table's elementwise rows with
 * their sample ranges (tests/ew_samples.def) and the CPU backend's generated kernels
 * (cpu_ew_gen.c, compiled beside this file) behind plain C signatures. */
#include <string.h>

#include "cpu_ew_gen.h"
#include "ir/ir.h"
#include "ew_emu_ref.h"

static const struct {
    const char *name, *expr, *d[2];
    uint32_t flags;
    ir_dtype_rule rule;
    bool act;
} rows[] = {
#define X(kind, str, fam, fl, imin, imax, omin, omax, par, dt, doc, low, e, d0, d1, d2)            \
    {str, #e, {#d0, #d1}, (fl), IR_DT_##dt, strcmp("em_p_" #par, "em_p_act") == 0},
#include "ir/ops.def"
#undef X
};

static const struct {
    const char *name;
    double lo, hi;
} samples[] = {
#define EW_SAMPLE(n, lo, hi)              {#n, lo, hi},
#define EW_SAMPLE2(n, alo, ahi, blo, bhi) {#n, alo, ahi},
#include "ew_samples.def"
#undef EW_SAMPLE2
#undef EW_SAMPLE
};

int ref_n_kinds(void)
{
    return (int)(sizeof rows / sizeof rows[0]);
}

static bool rule_in(ir_dtype_rule r, const ir_dtype_rule *set, int n)
{
    for (int i = 0; i < n; i++)
        if (set[i] == r) return true;
    return false;
}

bool ref_kind(int k, ref_row *out)
{
    memset(out, 0, sizeof *out);
    uint32_t f = rows[k].flags;
    if (!(f & (IR_EW1 | IR_EW2)) || (f & IR_INTERNAL) || strcmp(rows[k].expr, "IR_NOEXPR") == 0)
        return false;
    ir_dtype_rule r = rows[k].rule;
    static const ir_dtype_rule not_float1[] = {IR_DT_BOOL, IR_DT_BITWISE, IR_DT_INT},
                               int1[] = {IR_DT_KEEP_NUM, IR_DT_KEEP_ALL, IR_DT_SQUARE,
                                         IR_DT_BITWISE},
                               int2[] = {IR_DT_PROMOTE, IR_DT_PROMOTE_NUM, IR_DT_COMPARE,
                                         IR_DT_BITWISE, IR_DT_INT};
    out->name = rows[k].name;
    out->binary = (f & IR_EW2) != 0;
    out->act = rows[k].act;
    out->int_div = (f & IR_INT_DIV) != 0;
    out->pred = !out->binary && r == IR_DT_BOOL;
    out->to_bool = out->binary && (r == IR_DT_COMPARE || r == IR_DT_LOGICAL);
    out->floats = out->binary ? !rule_in(r, not_float1 + 1, 2) : !rule_in(r, not_float1, 3);
    out->ints = out->binary ? rule_in(r, int2, 5) : rule_in(r, int1, 4);
    for (int i = 0; i < 2; i++)
        out->grad[i] =
            (f & IR_DIFF) && (i == 0 || out->binary) && strcmp(rows[k].d[i], "IR_NOEXPR") != 0;
    out->lo = -4, out->hi = 4;
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++)
        if (strcmp(samples[i].name, out->name) == 0) {
            out->lo = samples[i].lo, out->hi = samples[i].hi;
            out->sampled = true;
        }
    return true;
}

void ref_unary_f32(int k, double a, double b, const float *x, float *y, long n)
{
    em_params p = {.act = {.v = {a, b}}};
    cpu_gen_unary_f32((em_op_kind)k, &p, x, y, n);
}

void ref_unary_f64(int k, double a, double b, const double *x, double *y, long n)
{
    em_params p = {.act = {.v = {a, b}}};
    cpu_gen_unary_f64((em_op_kind)k, &p, x, y, n);
}

void ref_unary_i64(int k, double a, double b, const int64_t *x, int64_t *y, long n, int bits)
{
    em_params p = {.act = {.v = {a, b}}};
    cpu_gen_unary_i64((em_op_kind)k, &p, x, y, n, bits);
}

void ref_unary_pred(int k, const double *x, uint8_t *y, long n)
{
    cpu_gen_unary_pred((em_op_kind)k, x, y, n);
}

void ref_binary_f64(int k, const double *a, const double *b, double *o, long n)
{
    cpu_gen_binary_f64((em_op_kind)k, a, b, o, n);
}

void ref_binary_i64(int k, const int64_t *a, const int64_t *b, int64_t *o, long n, int bits)
{
    cpu_gen_binary_i64((em_op_kind)k, a, b, o, n, bits);
}

bool ref_grad_f64(int k, int arg, double pa, double pb, const double *a, const double *b,
                  const double *y, double *d, long n)
{
    em_params p = {.act = {.v = {pa, pb}}};
    return cpu_gen_grad_f64((em_op_kind)k, arg, &p, a, b, y, d, n);
}
