/* Conformance of the binary family (arithmetic, comparisons, logical, bitwise, shifts, scalar
 * forms, where, masked_fill, clamp, lerp, the internal threshold_backward) against f64 / int64
 * references written here, over dtypes, layouts, broadcasting, NaN/Inf and bad inputs. */
#include <math.h>
#include <string.h>

#include "conf.h"
#include "ir/ir.h"
#include "ir/scalar.h"
#include "tensor/op.h"

static const em_dtype all_dt[] = {EM_F64, EM_F32, EM_F16, EM_BF16, EM_I64,
                                  EM_I32, EM_I16, EM_I8,  EM_U8,   EM_BOOL};
#define N_DT (int)(sizeof all_dt / sizeof all_dt[0])

enum {
    O_ADD,
    O_SUB,
    O_MUL,
    O_DIV,
    O_FLOORDIV,
    O_REM,
    O_FMOD,
    O_POW,
    O_ATAN2,
    O_HYPOT,
    O_MIN,
    O_MAX,
    O_EQ,
    O_NE,
    O_LT,
    O_LE,
    O_GT,
    O_GE,
    O_LAND,
    O_LOR,
    O_LXOR,
    O_BAND,
    O_BOR,
    O_BXOR,
    O_SHL,
    O_SHR,
    O_COUNT
};

typedef em_tensor *(*bin_fn)(const em_tensor *, const em_tensor *);

static const struct {
    const char *name;
    bin_fn fn;
} ops[O_COUNT] = {
    {"em_add", em_add},
    {"em_sub", em_sub},
    {"em_mul", em_mul},
    {"em_div", em_div},
    {"em_floor_divide", em_floor_divide},
    {"em_remainder", em_remainder},
    {"em_fmod", em_fmod},
    {"em_pow", em_pow},
    {"em_atan2", em_atan2},
    {"em_hypot", em_hypot},
    {"em_minimum", em_minimum},
    {"em_maximum", em_maximum},
    {"em_eq", em_eq},
    {"em_ne", em_ne},
    {"em_lt", em_lt},
    {"em_le", em_le},
    {"em_gt", em_gt},
    {"em_ge", em_ge},
    {"em_logical_and", em_logical_and},
    {"em_logical_or", em_logical_or},
    {"em_logical_xor", em_logical_xor},
    {"em_bitwise_and", em_bitwise_and},
    {"em_bitwise_or", em_bitwise_or},
    {"em_bitwise_xor", em_bitwise_xor},
    {"em_shift_left", em_shift_left},
    {"em_shift_right", em_shift_right},
};

static bool is_f(em_dtype d)
{
    return em_dtype_is_float(d);
}

static bool is_cmp_op(int op)
{
    return op >= O_EQ && op <= O_GE;
}

/* ---- reference semantics ----------------------------------------------------------------- */

/* Expected result dtype of op for inputs promoting to pt; EM_OK or the expected error. */
static em_status expect_dtype(int op, em_dtype pt, em_dtype *out)
{
    *out = pt;
    if (is_cmp_op(op) || (op >= O_LAND && op <= O_LXOR))
        *out = EM_BOOL;
    else if (op == O_DIV || op == O_ATAN2 || op == O_HYPOT)
        *out = is_f(pt) ? pt : EM_F32;
    else if ((op == O_SUB || op == O_FLOORDIV || op == O_REM || op == O_FMOD || op == O_POW) &&
             pt == EM_BOOL)
        return EM_ERR_DTYPE;
    else if (op >= O_BAND && op <= O_BXOR && is_f(pt))
        return EM_ERR_DTYPE;
    else if ((op == O_SHL || op == O_SHR) && (is_f(pt) || pt == EM_BOOL))
        return EM_ERR_DTYPE;
    return EM_OK;
}

static int64_t wrap(int64_t v, em_dtype dt)
{
    switch (dt) {
    case EM_I32: return (int32_t)(uint32_t)(uint64_t)v;
    case EM_I16: return (int16_t)(uint16_t)(uint64_t)v;
    case EM_I8: return (int8_t)(uint8_t)(uint64_t)v;
    case EM_U8: return (uint8_t)(uint64_t)v;
    case EM_BOOL: return v != 0;
    default: return v;
    }
}

static double ref_float(int op, double x, double y)
{
    switch (op) {
    case O_ADD: return x + y;
    case O_SUB: return x - y;
    case O_MUL: return x * y;
    case O_DIV: return x / y;
    case O_FLOORDIV: {
        /* PyTorch's definition: floor of the exact quotient, IEEE result for y == 0 */
        if (y == 0) return x / y;
        double m = fmod(x, y), d = (x - m) / y;
        if (m != 0 && (y < 0) != (m < 0)) d -= 1;
        if (d == 0) return copysign(0.0, x / y);
        double f = floor(d);
        return d - f > 0.5 ? f + 1 : f;
    }
    case O_REM: {
        double m = fmod(x, y);
        return (m != 0 && (m < 0) != (y < 0)) ? m + y : m;
    }
    case O_FMOD: return fmod(x, y);
    case O_POW: return pow(x, y);
    case O_ATAN2: return atan2(x, y);
    case O_HYPOT: return hypot(x, y);
    case O_MIN: return (x != x || y != y) ? NAN : fmin(x, y);
    case O_MAX: return (x != x || y != y) ? NAN : fmax(x, y);
    case O_EQ: return x == y;
    case O_NE: return x != y;
    case O_LT: return x < y;
    case O_LE: return x <= y;
    case O_GT: return x > y;
    case O_GE: return x >= y;
    default: return 0;
    }
}

static int64_t ref_powi(int64_t a, int64_t b)
{
    if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;
    uint64_t r = 1;
    for (int64_t i = 0; i < b; i++) r *= (uint64_t)a;
    return (int64_t)r;
}

static double ref_int(int op, int64_t x, int64_t y, em_dtype od)
{
    int bits = 8 * (int)em_dtype_size(od);
    int64_t r = 0;
    switch (op) {
    case O_ADD: r = (int64_t)((uint64_t)x + (uint64_t)y); break;
    case O_SUB: r = (int64_t)((uint64_t)x - (uint64_t)y); break;
    case O_MUL: r = (int64_t)((uint64_t)x * (uint64_t)y); break;
    case O_FLOORDIV: r = (int64_t)floor((double)x / (double)y); break;
    case O_REM: r = x - y * (int64_t)floor((double)x / (double)y); break;
    case O_FMOD: r = x - y * (int64_t)trunc((double)x / (double)y); break;
    case O_POW: r = ref_powi(x, y); break;
    case O_MIN: r = x < y ? x : y; break;
    case O_MAX: r = x > y ? x : y; break;
    case O_EQ: r = x == y; break;
    case O_NE: r = x != y; break;
    case O_LT: r = x < y; break;
    case O_LE: r = x <= y; break;
    case O_GT: r = x > y; break;
    case O_GE: r = x >= y; break;
    case O_BAND: r = x & y; break;
    case O_BOR: r = x | y; break;
    case O_BXOR: r = x ^ y; break;
    case O_SHL: r = (y < 0 || y >= bits) ? 0 : (int64_t)((uint64_t)x << y); break;
    case O_SHR:
        r = (y < 0 || y >= bits) ? (x < 0 ? -1 : 0) : (int64_t)floor((double)x / ldexp(1, (int)y));
        break;
    default: break;
    }
    return (double)wrap(r, od);
}

/* Expected element: x of dtype-compute rules for op, result stored as od. cdt is the compute
 * dtype (od for arithmetic, the promoted inputs' dtype for comparisons). */
static double ref_elem(int op, double x, double y, em_dtype cdt, em_dtype od)
{
    if (op >= O_LAND && op <= O_LXOR) {
        bool a = x != 0, b = y != 0; /* NaN is true */
        return op == O_LAND ? (a && b) : op == O_LOR ? (a || b) : (a != b);
    }
    if (!is_f(cdt)) return ref_int(op, (int64_t)x, (int64_t)y, od);
    double r = ref_float(op, h_round_to(x, cdt), h_round_to(y, cdt));
    return h_round_to(r, od);
}

/* ---- inputs and broadcasting ------------------------------------------------------------- */

static double gen_value(int op, int side, em_dtype dt)
{
    double lo = -4, hi = 4;
    if (!is_f(dt)) {
        switch (dt) {
        case EM_I64: lo = -1e6, hi = 1e6; break;
        case EM_I32: lo = -1e5, hi = 1e5; break;
        case EM_I16: lo = -300, hi = 300; break;
        case EM_U8: lo = 0, hi = 256; break;
        case EM_BOOL: lo = 0, hi = 2; break;
        default: lo = -128, hi = 128; break;
        }
        if (op == O_POW) lo = dt == EM_U8 || dt == EM_BOOL ? 0 : side ? -2 : -4, hi = side ? 6 : 5;
        if ((op == O_SHL || op == O_SHR) && side == 1)
            lo = dt == EM_U8 || dt == EM_BOOL ? 0 : -2, hi = dt == EM_BOOL ? 2 : 11;
    } else if (op == O_POW && side == 1) {
        lo = -2, hi = 3;
    }
    double v = lo + (hi - lo) * h_uniform();
    if (!is_f(dt)) v = floor(v);
    if (dt == EM_BOOL) v = v != 0;
    /* integer divisors are never zero here (that is an error, tested on its own) */
    if (side == 1 && !is_f(dt) && v == 0 && (op == O_FLOORDIV || op == O_REM || op == O_FMOD))
        v = 1;
    return h_round_to(v, dt);
}

static em_tensor *gen_input(int op, int side, em_shape s, em_dtype dt, h_layout l, double **vals)
{
    int64_t n = em_shape_numel(s);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = gen_value(op, side, dt);
    *vals = v;
    return h_from_values(v, s, dt, l);
}

static em_shape bshape(em_shape a, em_shape b)
{
    em_shape o = {.rank = a.rank > b.rank ? a.rank : b.rank};
    for (int i = 0; i < o.rank; i++) {
        int64_t da = i < o.rank - a.rank ? 1 : a.dims[i - (o.rank - a.rank)];
        int64_t db = i < o.rank - b.rank ? 1 : b.dims[i - (o.rank - b.rank)];
        o.dims[i] = da == 1 ? db : da;
    }
    return o;
}

/* Row-major offset in s of the element that broadcasts to index idx of so. */
static int64_t bidx(em_shape s, em_shape so, const int64_t *idx)
{
    int lead = so.rank - s.rank;
    int64_t off = 0;
    for (int d = 0; d < s.rank; d++) off = off * s.dims[d] + (s.dims[d] == 1 ? 0 : idx[d + lead]);
    return off;
}

/* ---- tensor (op) tensor over dtypes, layouts and broadcasting ----------------------------- */

static void run_case(int op, em_dtype da, em_dtype db, em_shape sa, em_shape sb, h_layout l)
{
    em_scope_begin();
    double *va, *vb;
    em_tensor *a = gen_input(op, 0, sa, da, l, &va);
    em_tensor *b = gen_input(op, 1, sb, db, l, &vb);
    em_tensor *r = ops[op].fn(a, b);
    em_dtype pt = em_dtype_promote(da, db), od;
    em_status st = expect_dtype(op, pt, &od);
    char what[160], s1[64], s2[64];
    snprintf(what, sizeof what, "%s(%s %s, %s %s) layout %d", ops[op].name, em_dtype_name(da),
             em_shape_str(sa, s1, sizeof s1), em_dtype_name(db), em_shape_str(sb, s2, sizeof s2),
             (int)l);
    if (st != EM_OK) {
        CHECK(r == NULL, "%s should fail", what);
        CHECK_ERR(st, ops[op].name);
    } else if (r) {
        CHECK(em_tensor_dtype(r) == od, "%s: dtype %s, expected %s", what,
              em_dtype_name(em_tensor_dtype(r)), em_dtype_name(od));
        em_shape so = bshape(sa, sb);
        int64_t n = em_shape_numel(so);
        double *e = malloc((size_t)(n ? n : 1) * sizeof *e);
        em_dtype cdt = is_cmp_op(op) ? pt : od;
        int64_t idx[EM_MAX_RANK] = {0};
        for (int64_t i = 0; i < n; i++, h_next_index(so, idx))
            e[i] = ref_elem(op, va[bidx(sa, so, idx)], vb[bidx(sb, so, idx)], cdt, od);
        h_check_tensor(what, r, e, so, h_atol(od), h_rtol(od));
        free(e);
    } else {
        CHECK(false, "%s failed: %s", what, em_last_error());
        em_clear_error();
    }
    free(va);
    free(vb);
    em_scope_end();
}

static void check_binary_ops(void)
{
    static const em_shape sa[] = {{2, {2, 3}}, {3, {3, 1, 4}}, {1, {5}},    {0, {0}},
                                  {2, {0, 3}}, {1, {1}},       {2, {4, 1}}, {3, {2, 3, 4}}};
    static const em_shape sb[] = {{2, {2, 3}}, {2, {2, 1}}, {0, {0}},    {1, {5}},
                                  {2, {1, 3}}, {1, {1}},    {2, {1, 5}}, {1, {4}}};
    static const em_dtype mixed[][2] = {{EM_I32, EM_F16},  {EM_U8, EM_I8},    {EM_F32, EM_F64},
                                        {EM_BOOL, EM_F32}, {EM_I64, EM_BF16}, {EM_F16, EM_BF16},
                                        {EM_BOOL, EM_I8},  {EM_I16, EM_U8},   {EM_I64, EM_I32}};
    int n_shapes = (int)(sizeof sa / sizeof sa[0]);
    for (int op = 0; op < O_COUNT; op++) {
        for (int k = 0; k < N_DT; k++)
            for (int s = 0; s < n_shapes; s++)
                for (int l = 0; l < H_LAYOUT_COUNT; l++)
                    run_case(op, all_dt[k], all_dt[k], sa[s], sb[s], (h_layout)l);
        for (size_t k = 0; k < sizeof mixed / sizeof mixed[0]; k++)
            for (int s = 0; s < n_shapes; s++) {
                run_case(op, mixed[k][0], mixed[k][1], sa[s], sb[s], (h_layout)(s % 4));
                run_case(op, mixed[k][1], mixed[k][0], sa[s], sb[s], (h_layout)((s + 1) % 4));
            }
    }
}

/* NaN, infinities and signed zeros through every float op. */
static void check_special_values(void)
{
    static const double sv[] = {0.0, -0.0, 1, -1, 2.5, -3.75, 0.5, INFINITY, -INFINITY, NAN};
    enum { NV = sizeof sv / sizeof sv[0] };
    double va[NV * NV], vb[NV * NV], e[NV * NV];
    for (int i = 0; i < NV; i++)
        for (int j = 0; j < NV; j++) va[i * NV + j] = sv[i], vb[i * NV + j] = sv[j];
    static const em_dtype fdt[] = {EM_F64, EM_F32, EM_F16, EM_BF16};
    for (int k = 0; k < 4; k++) {
        em_dtype dt = fdt[k];
        for (int op = 0; op <= O_LXOR; op++) {
            em_scope_begin();
            for (int l = 0; l < H_LAYOUT_COUNT; l += 3) {
                em_tensor *a = h_from_values(va, EM_SHAPE(NV, NV), dt, (h_layout)l);
                em_tensor *b = h_from_values(vb, EM_SHAPE(NV, NV), dt, (h_layout)l);
                em_dtype od;
                expect_dtype(op, dt, &od);
                for (int i = 0; i < NV * NV; i++) e[i] = ref_elem(op, va[i], vb[i], dt, od);
                char what[96];
                snprintf(what, sizeof what, "%s special values %s", ops[op].name,
                         em_dtype_name(dt));
                h_check_tensor(what, ops[op].fn(a, b), e, EM_SHAPE(NV, NV), h_atol(od), h_rtol(od));
            }
            em_scope_end();
        }
    }
    /* signed zeros */
    em_scope_begin();
    em_tensor *nz = em_scalar(-0.0, EM_F32, h_dev), *one = em_scalar(-1, EM_F32, h_dev);
    em_tensor *z = em_scalar(0.0, EM_F32, h_dev);
    CHECK(signbit(em_item_f64(em_add(nz, nz))), "-0 + -0 is -0");
    CHECK(!signbit(em_item_f64(em_add(nz, z))), "-0 + 0 is +0");
    CHECK(signbit(em_item_f64(em_mul(one, z))), "-1 * 0 is -0");
    CHECK(em_item_f64(em_div(em_scalar(1, EM_F32, h_dev), nz)) == -INFINITY, "1 / -0 is -inf");
    CHECK(em_item_f64(em_eq(nz, z)) == 1, "-0 == 0");
    CHECK(signbit(em_item_f64(em_fmod(nz, em_scalar(3, EM_F32, h_dev)))), "fmod(-0, 3) is -0");
    em_scope_end();
}

/* ---- dtype promotion and integer exactness ----------------------------------------------- */

static void check_promotion(void)
{
    static const struct {
        em_dtype a, b, out;
    } table[] = {
        {EM_I32, EM_F16, EM_F16},   {EM_U8, EM_I8, EM_I16},      {EM_I8, EM_U8, EM_I16},
        {EM_I64, EM_F32, EM_F32},   {EM_BF16, EM_F16, EM_F32},   {EM_U8, EM_BOOL, EM_U8},
        {EM_F64, EM_I64, EM_F64},   {EM_BOOL, EM_BOOL, EM_BOOL}, {EM_I16, EM_I32, EM_I32},
        {EM_BF16, EM_I64, EM_BF16}, {EM_F32, EM_F16, EM_F32},    {EM_U8, EM_I64, EM_I64},
    };
    em_scope_begin();
    for (size_t k = 0; k < sizeof table / sizeof table[0]; k++) {
        em_tensor *r = em_add(em_ones(EM_SHAPE(2), table[k].a, h_dev),
                              em_ones(EM_SHAPE(2), table[k].b, h_dev));
        CHECK(r && em_tensor_dtype(r) == table[k].out, "add(%s, %s) -> %s, expected %s",
              em_dtype_name(table[k].a), em_dtype_name(table[k].b),
              r ? em_dtype_name(em_tensor_dtype(r)) : "NULL", em_dtype_name(table[k].out));
    }
    /* bool + bool stays bool (True + True = True), as PyTorch */
    em_tensor *t = em_ones(EM_SHAPE(3), EM_BOOL, h_dev);
    em_tensor *f = em_zeros(EM_SHAPE(3), EM_BOOL, h_dev);
    h_check_tensor("bool + bool", em_add(t, t), (double[]){1, 1, 1}, EM_SHAPE(3), 0, 0);
    h_check_tensor("bool * bool", em_mul(t, f), (double[]){0, 0, 0}, EM_SHAPE(3), 0, 0);
    /* ints divide to f32 */
    em_tensor *q =
        em_div(em_arange(0, 4, 1, EM_I32, h_dev), em_full(EM_SHAPE(4), 2, EM_I64, h_dev));
    CHECK(q && em_tensor_dtype(q) == EM_F32, "int / int is f32");
    h_check_tensor("int / int", q, (double[]){0, 0.5, 1, 1.5}, EM_SHAPE(4), 0, 0);
    em_scope_end();
}

static void check_int_exact(void)
{
    em_scope_begin();
    int64_t a[4] = {(1LL << 62) + 12345, (1LL << 53) + 1, INT64_MAX, INT64_MIN};
    int64_t b[4] = {(1LL << 53) + 1, 1, 1, -1};
    em_tensor *ta = h_from_i64(a, EM_SHAPE(4)), *tb = h_from_i64(b, EM_SHAPE(4));
    int64_t got[4];
    em_to_data(em_add(ta, tb), got, EM_I64, 4);
    CHECK(got[0] == (1LL << 62) + (1LL << 53) + 12346 && got[1] == (1LL << 53) + 2 &&
              got[2] == INT64_MIN && got[3] == INT64_MAX,
          "i64 add is exact and wraps (%lld %lld %lld %lld)", (long long)got[0], (long long)got[1],
          (long long)got[2], (long long)got[3]);
    em_to_data(em_floor_divide(ta, tb), got, EM_I64, 4);
    CHECK(got[1] == (1LL << 53) + 1 && got[2] == INT64_MAX && got[3] == INT64_MIN,
          "i64 floor_divide exact, INT64_MIN // -1 wraps");
    em_to_data(em_remainder(ta, tb), got, EM_I64, 4);
    CHECK(got[3] == 0, "INT64_MIN %% -1 is 0");
    em_to_data(em_mul(ta, em_full(EM_SHAPE(4), 2, EM_I64, h_dev)), got, EM_I64, 4);
    CHECK(got[2] == -2, "INT64_MAX * 2 wraps to -2");
    em_to_data(em_eq(ta, h_from_i64((int64_t[]){(1LL << 62) + 12344, 0, 0, 0}, EM_SHAPE(4))), got,
               EM_I64, 4);
    CHECK(got[0] == 0, "i64 comparison is exact beyond 2^53");
    /* i8 wraps */
    double x[4] = {100, -100, 127, -128}, y[4] = {100, -100, 1, -1};
    em_tensor *xa = h_from_values(x, EM_SHAPE(4), EM_I8, H_CONTIG);
    em_tensor *ya = h_from_values(y, EM_SHAPE(4), EM_I8, H_CONTIG);
    h_check_tensor("i8 add wraps", em_add(xa, ya), (double[]){-56, 56, -128, 127}, EM_SHAPE(4), 0,
                   0);
    h_check_tensor("i8 mul wraps", em_mul(xa, ya), (double[]){16, 16, 127, -128}, EM_SHAPE(4), 0,
                   0);
    h_check_tensor("i8 floor_divide -128 // -1", em_floor_divide(xa, ya),
                   (double[]){1, 1, 127, -128}, EM_SHAPE(4), 0, 0);
    /* remainder takes the divisor's sign, fmod the dividend's */
    double p[4] = {7, -7, 7, -7}, d[4] = {3, 3, -3, -3};
    em_tensor *pa = h_from_values(p, EM_SHAPE(4), EM_I32, H_CONTIG);
    em_tensor *da = h_from_values(d, EM_SHAPE(4), EM_I32, H_CONTIG);
    h_check_tensor("remainder signs", em_remainder(pa, da), (double[]){1, 2, -2, -1}, EM_SHAPE(4),
                   0, 0);
    h_check_tensor("fmod signs", em_fmod(pa, da), (double[]){1, -1, 1, -1}, EM_SHAPE(4), 0, 0);
    h_check_tensor("floor_divide signs", em_floor_divide(pa, da), (double[]){2, -3, -3, 2},
                   EM_SHAPE(4), 0, 0);
    /* shifts: counts outside [0, bits) give 0 (left) or the sign fill (right) */
    double sx[4] = {-8, -8, 5, 1}, sc[4] = {1, 40, 70, -1};
    em_tensor *sxa = h_from_values(sx, EM_SHAPE(4), EM_I32, H_CONTIG);
    em_tensor *sca = h_from_values(sc, EM_SHAPE(4), EM_I32, H_CONTIG);
    h_check_tensor("shift_right", em_shift_right(sxa, sca), (double[]){-4, -1, 0, 0}, EM_SHAPE(4),
                   0, 0);
    h_check_tensor("shift_left", em_shift_left(sxa, sca), (double[]){-16, 0, 0, 0}, EM_SHAPE(4), 0,
                   0);
    /* integer division by zero is an error */
    em_tensor *zero = em_zeros(EM_SHAPE(4), EM_I32, h_dev);
    CHECK(em_floor_divide(pa, zero) == NULL, "floor_divide by zero fails");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_floor_divide: integer division by zero");
    CHECK(em_remainder(pa, zero) == NULL, "remainder by zero fails");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_remainder: integer division by zero");
    CHECK(em_fmod(pa, zero) == NULL, "fmod by zero fails");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_fmod: integer division by zero");
    CHECK(em_remainder_scalar(pa, 0) == NULL, "remainder_scalar by zero fails");
    CHECK_ERR(EM_ERR_INVALID_ARG, "integer division by zero");
    /* float division by zero is IEEE */
    em_tensor *fz = em_div(pa, zero);
    CHECK(fz && isinf(em_get_f64(fz, (int64_t[]){0})), "int / 0 is inf in f32");
    em_scope_end();
}

/* ---- scalar forms ------------------------------------------------------------------------ */

typedef em_tensor *(*sc_fn)(const em_tensor *, double);

static const struct {
    const char *name;
    sc_fn fn;
    int op;
    bool rev;
} sops[] = {
    {"em_add_scalar", em_add_scalar, O_ADD, false},
    {"em_sub_scalar", em_sub_scalar, O_SUB, false},
    {"em_rsub_scalar", em_rsub_scalar, O_SUB, true},
    {"em_mul_scalar", em_mul_scalar, O_MUL, false},
    {"em_div_scalar", em_div_scalar, O_DIV, false},
    {"em_rdiv_scalar", em_rdiv_scalar, O_DIV, true},
    {"em_pow_scalar", em_pow_scalar, O_POW, false},
    {"em_rpow_scalar", em_rpow_scalar, O_POW, true},
    {"em_remainder_scalar", em_remainder_scalar, O_REM, false},
    {"em_fmod_scalar", em_fmod_scalar, O_FMOD, false},
    {"em_minimum_scalar", em_minimum_scalar, O_MIN, false},
    {"em_maximum_scalar", em_maximum_scalar, O_MAX, false},
    {"em_eq_scalar", em_eq_scalar, O_EQ, false},
    {"em_ne_scalar", em_ne_scalar, O_NE, false},
    {"em_lt_scalar", em_lt_scalar, O_LT, false},
    {"em_le_scalar", em_le_scalar, O_LE, false},
    {"em_gt_scalar", em_gt_scalar, O_GT, false},
    {"em_ge_scalar", em_ge_scalar, O_GE, false},
};

static bool integral(double s)
{
    return isfinite(s) && floor(s) == s;
}

static void check_scalar_forms(void)
{
    static const double svals[] = {2, -3, 2.5, 0.5, 0, 1};
    for (size_t f = 0; f < sizeof sops / sizeof sops[0]; f++) {
        int op = sops[f].op;
        for (int k = 0; k < N_DT; k++) {
            em_dtype dt = all_dt[k];
            for (size_t j = 0; j < sizeof svals / sizeof svals[0]; j++) {
                double s = svals[j];
                em_scope_begin();
                em_shape sh = EM_SHAPE(3, 4);
                double v[12];
                for (int i = 0; i < 12; i++) {
                    double lo = dt == EM_U8 || dt == EM_BOOL ? 0 : -4;
                    double x = lo + (6 - lo) * h_uniform();
                    if (!is_f(dt)) x = floor(x);
                    v[i] = h_round_to(x, dt);
                }
                em_tensor *a = h_from_values(v, sh, dt, (h_layout)(j % 4));
                em_tensor *r = sops[f].fn(a, s);
                char what[96];
                snprintf(what, sizeof what, "%s(%s, %g)", sops[f].name, em_dtype_name(dt), s);
                em_dtype od, cdt;
                em_status st = EM_OK;
                if (is_cmp_op(op)) {
                    od = EM_BOOL;
                    cdt = is_f(dt) ? dt : EM_F64;
                } else {
                    em_dtype pt = is_f(dt)        ? dt
                                  : !integral(s)  ? EM_F32
                                  : dt == EM_BOOL ? EM_I64
                                                  : dt;
                    st = expect_dtype(op, pt, &od);
                    cdt = od;
                    if (op == O_POW && !sops[f].rev && !is_f(od) && s < 0) st = EM_ERR_INVALID_ARG;
                    if ((op == O_REM || op == O_FMOD) && !is_f(od) && s == 0)
                        st = EM_ERR_INVALID_ARG;
                }
                if (st != EM_OK) {
                    CHECK(r == NULL, "%s should fail", what);
                    CHECK_ERR(st, op == O_REM    ? "em_remainder"
                                  : op == O_FMOD ? "em_fmod"
                                                 : sops[f].name);
                    em_scope_end();
                    continue;
                }
                CHECK(r && em_tensor_dtype(r) == od, "%s: dtype %s, expected %s", what,
                      r ? em_dtype_name(em_tensor_dtype(r)) : "NULL", em_dtype_name(od));
                double e[12];
                for (int i = 0; i < 12; i++) {
                    double x = v[i], y = s;
                    if (is_cmp_op(op) && is_f(dt)) y = h_round_to(s, dt);
                    e[i] = sops[f].rev ? ref_elem(op, y, x, cdt, od) : ref_elem(op, x, y, cdt, od);
                }
                h_check_tensor(what, r, e, sh, h_atol(od), h_rtol(od));
                em_scope_end();
            }
        }
    }
    em_scope_begin();
    /* the wrapped-number rule in a few explicit cases */
    em_tensor *h = em_ones(EM_SHAPE(2), EM_F16, h_dev);
    em_tensor *i = em_arange(0, 4, 1, EM_I32, h_dev);
    em_tensor *bl = em_ones(EM_SHAPE(2), EM_BOOL, h_dev);
    em_tensor *u = em_full(EM_SHAPE(2), 250, EM_U8, h_dev);
    CHECK(em_tensor_dtype(em_add_scalar(h, 1e-3)) == EM_F16, "f16 + scalar stays f16");
    CHECK(em_tensor_dtype(em_add_scalar(i, 2.5)) == EM_F32, "i32 + 2.5 is f32");
    CHECK(em_tensor_dtype(em_add_scalar(i, 2)) == EM_I32, "i32 + 2 stays i32");
    CHECK(em_tensor_dtype(em_add_scalar(bl, 1)) == EM_I64, "bool + 1 is i64");
    h_check_tensor("bool + 1", em_add_scalar(bl, 1), (double[]){2, 2}, EM_SHAPE(2), 0, 0);
    h_check_tensor("u8 + 10 wraps", em_add_scalar(u, 10), (double[]){4, 4}, EM_SHAPE(2), 0, 0);
    h_check_tensor("i32 < 2.5", em_lt_scalar(i, 2.5), (double[]){1, 1, 1, 0}, EM_SHAPE(4), 0, 0);
    h_check_tensor("i32 >= 2.5", em_ge_scalar(i, 2.5), (double[]){0, 0, 0, 1}, EM_SHAPE(4), 0, 0);
    h_check_tensor("i32 == 2", em_eq_scalar(i, 2), (double[]){0, 0, 1, 0}, EM_SHAPE(4), 0, 0);
    h_check_tensor("rsub", em_rsub_scalar(i, 10), (double[]){10, 9, 8, 7}, EM_SHAPE(4), 0, 0);
    h_check_tensor("rdiv", em_rdiv_scalar(em_add_scalar(i, 1), 1),
                   (double[]){1, 0.5, 1.0 / 3, 0.25}, EM_SHAPE(4), 1e-7, 1e-6);
    h_check_tensor("rpow", em_rpow_scalar(i, 2), (double[]){1, 2, 4, 8}, EM_SHAPE(4), 0, 0);
    /* float tensors compare against the scalar rounded to their dtype, as PyTorch */
    em_tensor *tenth = em_full(EM_SHAPE(1), 0.1, EM_F32, h_dev);
    h_check_tensor("f32 0.1 == 0.1", em_eq_scalar(tenth, 0.1), (double[]){1}, EM_SHAPE(1), 0, 0);
    CHECK(em_pow_scalar(i, -1) == NULL, "int ** negative scalar fails");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_pow_scalar");
    h_check_tensor("int ** -1 tensor", em_pow(i, em_full(EM_SHAPE(1), -1, EM_I32, h_dev)),
                   (double[]){0, 1, 0, 0}, EM_SHAPE(4), 0, 0);
    em_scope_end();
}

/* ---- where, masked_fill, clamp, lerp ----------------------------------------------------- */

static void check_where(void)
{
    static const em_dtype pairs[][2] = {{EM_F32, EM_F32}, {EM_I32, EM_F16},  {EM_I64, EM_I64},
                                        {EM_BOOL, EM_U8}, {EM_BF16, EM_F64}, {EM_I8, EM_I16}};
    em_shape sc = EM_SHAPE(3, 1, 4), sa = EM_SHAPE(2, 1), sb = EM_SHAPE(4);
    em_shape so = EM_SHAPE(3, 2, 4);
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            em_scope_begin();
            double *vc, *va, *vb;
            em_tensor *c = gen_input(O_ADD, 0, sc, EM_BOOL, (h_layout)l, &vc);
            em_tensor *a = gen_input(O_ADD, 0, sa, pairs[k][0], (h_layout)l, &va);
            em_tensor *b = gen_input(O_ADD, 0, sb, pairs[k][1], (h_layout)l, &vb);
            em_dtype od = em_dtype_promote(pairs[k][0], pairs[k][1]);
            double e[24];
            int64_t idx[EM_MAX_RANK] = {0};
            for (int i = 0; i < 24; i++, h_next_index(so, idx))
                e[i] = h_round_to(
                    vc[bidx(sc, so, idx)] ? va[bidx(sa, so, idx)] : vb[bidx(sb, so, idx)], od);
            em_tensor *r = em_where(c, a, b);
            CHECK(r && em_tensor_dtype(r) == od, "where dtype");
            h_check_tensor("where", r, e, so, h_atol(od), h_rtol(od));
            free(vc);
            free(va);
            free(vb);
            em_scope_end();
        }
    }
    em_scope_begin();
    /* f32 fast path, contiguous */
    double c6[6] = {1, 0, 1, 0, 0, 1}, a6[6] = {1, 2, 3, 4, 5, 6},
           b6[6] = {-1, -2, -3, -4, -5, NAN};
    h_check_tensor("where f32",
                   em_where(h_from_values(c6, EM_SHAPE(6), EM_BOOL, H_CONTIG),
                            h_from_values(a6, EM_SHAPE(6), EM_F32, H_CONTIG),
                            h_from_values(b6, EM_SHAPE(6), EM_F32, H_CONTIG)),
                   (double[]){1, -2, 3, -4, -5, 6}, EM_SHAPE(6), 0, 0);
    em_tensor *f = em_ones(EM_SHAPE(2), EM_F32, h_dev);
    CHECK(em_where(f, f, f) == NULL, "where with f32 cond fails");
    CHECK_ERR(EM_ERR_DTYPE, "em_where");
    em_tensor *bc = em_ones(EM_SHAPE(3), EM_BOOL, h_dev);
    CHECK(em_where(bc, f, f) == NULL, "where with mismatched shapes fails");
    CHECK_ERR(EM_ERR_SHAPE, "em_where");
    CHECK(em_where(bc, NULL, f) == NULL, "where NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_where");
    em_tensor *empty =
        em_where(em_ones(EM_SHAPE(0, 3), EM_BOOL, h_dev), em_ones(EM_SHAPE(1, 3), EM_F32, h_dev),
                 em_ones(EM_SHAPE(3), EM_I64, h_dev));
    CHECK(empty && em_tensor_numel(empty) == 0 && em_tensor_dim(empty, 0) == 0, "where size 0");
    em_scope_end();
}

static void check_masked_fill(void)
{
    static const em_shape masks[] = {{1, {4}}, {2, {3, 1}}, {0, {0}}, {2, {3, 4}}};
    for (int k = 0; k < N_DT; k++) {
        em_dtype dt = all_dt[k];
        for (int m = 0; m < 4; m++) {
            em_scope_begin();
            double *vx, *vm;
            em_shape sx = EM_SHAPE(3, 4);
            em_tensor *x = gen_input(O_ADD, 0, sx, dt, (h_layout)m, &vx);
            em_tensor *mask = gen_input(O_ADD, 0, masks[m], EM_BOOL, (h_layout)(3 - m), &vm);
            double value = -7.5;
            double e[12];
            int64_t idx[EM_MAX_RANK] = {0};
            for (int i = 0; i < 12; i++, h_next_index(sx, idx))
                e[i] = !vm[bidx(masks[m], sx, idx)] ? vx[i]
                       : is_f(dt) || dt == EM_BOOL  ? h_round_to(value, dt)
                                                    : (double)wrap((int64_t)value, dt);
            em_tensor *r = em_masked_fill(x, mask, value);
            CHECK(r && em_tensor_dtype(r) == dt, "masked_fill keeps the dtype");
            h_check_tensor("masked_fill", r, e, sx, 0, 0);
            free(vx);
            free(vm);
            em_scope_end();
        }
    }
    em_scope_begin();
    em_tensor *x = em_zeros(EM_SHAPE(3, 4), EM_F32, h_dev);
    em_tensor *nanm = em_masked_fill(x, em_ones(EM_SHAPE(1), EM_BOOL, h_dev), NAN);
    CHECK(nanm && isnan(em_get_f64(nanm, (int64_t[]){2, 3})), "masked_fill with NaN");
    CHECK(em_masked_fill(x, em_ones(EM_SHAPE(5), EM_BOOL, h_dev), 1) == NULL, "mask [5]");
    CHECK_ERR(EM_ERR_SHAPE, "em_masked_fill");
    CHECK(em_masked_fill(x, em_ones(EM_SHAPE(2, 3, 4), EM_BOOL, h_dev), 1) == NULL,
          "mask larger than x");
    CHECK_ERR(EM_ERR_SHAPE, "[2, 3, 4]");
    CHECK(em_masked_fill(x, em_ones(EM_SHAPE(4), EM_F32, h_dev), 1) == NULL, "f32 mask");
    CHECK_ERR(EM_ERR_DTYPE, "em_masked_fill");
    CHECK(em_masked_fill(NULL, x, 1) == NULL, "NULL x");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_masked_fill");
    em_scope_end();
}

static double ref_clamp(double v, double lo, double hi)
{
    if (v != v) return v;
    if (!isnan(lo) && v < lo) v = lo;
    if (!isnan(hi) && v > hi) v = hi;
    return v;
}

static void check_clamp(void)
{
    static const double bounds[][2] = {{-1, 2},        {NAN, 1},   {-1, NAN}, {3, 1},
                                       {-INFINITY, 2}, {0.5, 2.5}, {NAN, NAN}};
    for (int k = 0; k < N_DT; k++) {
        em_dtype dt = all_dt[k];
        for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++) {
            em_scope_begin();
            double lo = bounds[b][0], hi = bounds[b][1];
            double *vx;
            em_shape sx = EM_SHAPE(2, 5);
            em_tensor *x = gen_input(O_ADD, 0, sx, dt, (h_layout)(b % 4), &vx);
            if (is_f(dt)) vx[0] = NAN;
            em_release(x);
            x = h_from_values(vx, sx, dt, (h_layout)(b % 4));
            em_tensor *r = em_clamp(x, lo, hi);
            if (dt == EM_BOOL) {
                CHECK(r == NULL, "clamp on bool fails");
                CHECK_ERR(EM_ERR_DTYPE, "em_clamp");
                free(vx);
                em_scope_end();
                continue;
            }
            bool keep = is_f(dt) || ((isnan(lo) || integral(lo) || lo == -INFINITY) &&
                                     (isnan(hi) || integral(hi) || hi == INFINITY));
            em_dtype od = keep ? dt : EM_F32;
            CHECK(r && em_tensor_dtype(r) == od, "clamp(%s, %g, %g) dtype", em_dtype_name(dt), lo,
                  hi);
            double e[10];
            for (int i = 0; i < 10; i++) e[i] = h_round_to(ref_clamp(vx[i], lo, hi), od);
            char what[64];
            snprintf(what, sizeof what, "clamp(%s, %g, %g)", em_dtype_name(dt), lo, hi);
            h_check_tensor(what, r, e, sx, h_atol(od), h_rtol(od));
            free(vx);
            em_scope_end();
        }
    }
    /* tensor bounds broadcast together; NaN in a bound gives NaN */
    for (int l = 0; l < H_LAYOUT_COUNT; l++) {
        em_scope_begin();
        double *vx, *vl, *vh;
        em_shape sx = EM_SHAPE(3, 4), sl = EM_SHAPE(4), sh = EM_SHAPE(2, 3, 1);
        em_tensor *x = gen_input(O_ADD, 0, sx, EM_F32, (h_layout)l, &vx);
        em_tensor *lo = gen_input(O_ADD, 0, sl, EM_F32, (h_layout)l, &vl);
        em_tensor *hi = gen_input(O_ADD, 0, sh, EM_F64, (h_layout)l, &vh);
        vl[2] = NAN;
        em_release(lo);
        lo = h_from_values(vl, sl, EM_F32, (h_layout)l);
        em_shape so = EM_SHAPE(2, 3, 4);
        double e[24], e_lo[12], e_hi[24];
        int64_t idx[EM_MAX_RANK] = {0};
        for (int i = 0; i < 24; i++, h_next_index(so, idx)) {
            double v = vx[bidx(sx, so, idx)], a = vl[bidx(sl, so, idx)], b = vh[bidx(sh, so, idx)];
            e[i] = isnan(a) || isnan(b) ? NAN : fmin(fmax(v, a), b);
            e_hi[i] = fmin(v, b);
        }
        for (int i = 0; i < 12; i++) e_lo[i] = isnan(vl[i % 4]) ? NAN : fmax(vx[i], vl[i % 4]);
        em_tensor *r = em_clamp_tensor(x, lo, hi);
        CHECK(r && em_tensor_dtype(r) == EM_F64, "clamp_tensor promotes to f64");
        h_check_tensor("clamp_tensor", r, e, so, 1e-12, 0);
        h_check_tensor("clamp_tensor lo only", em_clamp_tensor(x, lo, NULL), e_lo, sx, 0, 0);
        h_check_tensor("clamp_tensor hi only", em_clamp_tensor(x, NULL, hi), e_hi, so, 0, 0);
        free(vx);
        free(vl);
        free(vh);
        em_scope_end();
    }
    em_scope_begin();
    em_tensor *xi = em_arange(-3, 4, 1, EM_I32, h_dev);
    h_check_tensor("clamp_tensor int",
                   em_clamp_tensor(xi, em_full(EM_SHAPE(1), -1, EM_I64, h_dev),
                                   em_full(EM_SHAPE(7), 2, EM_I16, h_dev)),
                   (double[]){-1, -1, -1, 0, 1, 2, 2}, EM_SHAPE(7), 0, 0);
    CHECK(em_clamp_tensor(xi, NULL, NULL) == NULL, "clamp_tensor without bounds fails");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_clamp_tensor");
    CHECK(em_clamp_tensor(xi, em_ones(EM_SHAPE(3), EM_I32, h_dev), NULL) == NULL, "bad shapes");
    CHECK_ERR(EM_ERR_SHAPE, "em_clamp_tensor");
    CHECK(em_clamp(NULL, 0, 1) == NULL, "clamp NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_clamp");
    em_scope_end();
}

static double ref_lerp(double a, double b, double w)
{
    return fabs(w) < 0.5 ? a + w * (b - a) : b - (b - a) * (1 - w);
}

static void check_lerp(void)
{
    static const em_dtype fdt[] = {EM_F64, EM_F32, EM_F16, EM_BF16};
    static const double ws[] = {0.3, 0.7, -0.2, 1.5};
    for (int k = 0; k < 4; k++) {
        em_dtype dt = fdt[k];
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            em_scope_begin();
            double *va, *vb, *vw;
            em_shape sa = EM_SHAPE(3, 1, 4), sb = EM_SHAPE(2, 1), sw = EM_SHAPE(4);
            em_shape so = EM_SHAPE(3, 2, 4);
            em_tensor *a = gen_input(O_ADD, 0, sa, dt, (h_layout)l, &va);
            em_tensor *b = gen_input(O_ADD, 0, sb, dt, (h_layout)l, &vb);
            em_tensor *w = gen_input(O_ADD, 0, sw, dt, (h_layout)l, &vw);
            double e[24];
            for (size_t j = 0; j < sizeof ws / sizeof ws[0]; j++) {
                int64_t idx[EM_MAX_RANK] = {0};
                for (int i = 0; i < 24; i++, h_next_index(so, idx))
                    e[i] = h_round_to(ref_lerp(va[bidx(sa, so, idx)], vb[bidx(sb, so, idx)],
                                               h_round_to(ws[j], dt)),
                                      dt);
                em_tensor *r = em_lerp(a, b, ws[j]);
                CHECK(r && em_tensor_dtype(r) == dt, "lerp dtype");
                h_check_tensor("lerp", r, e, so, 2 * h_atol(dt), 2 * h_rtol(dt));
            }
            int64_t idx[EM_MAX_RANK] = {0};
            for (int i = 0; i < 24; i++, h_next_index(so, idx))
                e[i] = h_round_to(
                    ref_lerp(va[bidx(sa, so, idx)], vb[bidx(sb, so, idx)], vw[bidx(sw, so, idx)]),
                    dt);
            /* the tolerance is doubled: w*(b-a) rounds twice in the 16-bit dtypes' f32 math */
            h_check_tensor("lerp_tensor", em_lerp_tensor(a, b, w), e, so, 2 * h_atol(dt),
                           2 * h_rtol(dt));
            free(va);
            free(vb);
            free(vw);
            em_scope_end();
        }
    }
    em_scope_begin();
    /* f32 fast path on contiguous inputs; both formula branches end exactly at a and b; an
     * infinite end gives what PyTorch's two formulas give (inf * 0 is NaN) */
    double a5[5] = {1, 2, 3, 4, INFINITY}, b5[5] = {11, 12, 13, 14, 0};
    em_tensor *a = h_from_values(a5, EM_SHAPE(5), EM_F32, H_CONTIG);
    em_tensor *b = h_from_values(b5, EM_SHAPE(5), EM_F32, H_CONTIG);
    h_check_tensor("lerp w=0", em_lerp(a, b, 0), (double[]){1, 2, 3, 4, NAN}, EM_SHAPE(5), 0, 0);
    h_check_tensor("lerp w=1", em_lerp(a, b, 1), (double[]){11, 12, 13, 14, NAN}, EM_SHAPE(5), 0,
                   0);
    h_check_tensor("lerp w=0.5", em_lerp(a, b, 0.5), (double[]){6, 7, 8, 9, INFINITY}, EM_SHAPE(5),
                   0, 0);
    em_tensor *ai = em_ones(EM_SHAPE(2), EM_I32, h_dev);
    CHECK(em_lerp(ai, ai, 0.5) == NULL, "lerp on ints fails");
    CHECK_ERR(EM_ERR_DTYPE, "em_lerp");
    CHECK(em_lerp_tensor(a, b, em_ones(EM_SHAPE(5), EM_I64, h_dev)) == NULL, "int weight fails");
    CHECK_ERR(EM_ERR_DTYPE, "em_lerp_tensor");
    CHECK(em_lerp_tensor(a, b, NULL) == NULL, "NULL weight fails");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_lerp_tensor");
    CHECK(em_lerp(a, em_ones(EM_SHAPE(3), EM_F32, h_dev), 0.5) == NULL, "shape mismatch");
    CHECK_ERR(EM_ERR_SHAPE, "em_lerp");
    em_scope_end();
}

/* ---- large inputs (the parallel path) ---------------------------------------------------- */

static void check_large(void)
{
    em_scope_begin();
    int64_t n = 50000;
    double *va, *vb;
    em_tensor *a = gen_input(O_ADD, 0, EM_SHAPE(n), EM_F32, H_CONTIG, &va);
    em_tensor *b = gen_input(O_ADD, 1, EM_SHAPE(n), EM_F32, H_CONTIG, &vb);
    double *e = malloc((size_t)n * sizeof *e);
    for (int64_t i = 0; i < n; i++) e[i] = (float)(va[i] + vb[i]);
    h_check_tensor("large add f32", em_add(a, b), e, EM_SHAPE(n), 0, 0);
    for (int64_t i = 0; i < n; i++) e[i] = (float)va[i] * (float)vb[i];
    h_check_tensor("large mul f32", em_mul(a, b), e, EM_SHAPE(n), 0, 0);
    /* broadcast [200, 250] * [250] and a scalar operand */
    em_tensor *a2 = em_reshape(a, EM_SHAPE(200, 250));
    em_tensor *b2 = em_narrow(b, 0, 0, 250);
    for (int64_t i = 0; i < n; i++) e[i] = (float)(va[i] - vb[i % 250]);
    h_check_tensor("large broadcast sub", em_sub(a2, b2), e, EM_SHAPE(200, 250), 0, 0);
    for (int64_t i = 0; i < n; i++) e[i] = va[i] > 0.5;
    h_check_tensor("large gt_scalar", em_gt_scalar(a, 0.5), e, EM_SHAPE(n), 0, 0);
    free(va);
    free(vb);
    /* strided i64 and f16 */
    em_shape s = EM_SHAPE(220, 200);
    em_tensor *ia = gen_input(O_SUB, 0, s, EM_I64, H_STRIDED, &va);
    em_tensor *ib = gen_input(O_SUB, 1, s, EM_I64, H_TRANSPOSED, &vb);
    for (int64_t i = 0; i < 44000; i++) e[i] = va[i] - vb[i];
    h_check_tensor("large i64 sub strided", em_sub(ia, ib), e, s, 0, 0);
    free(va);
    free(vb);
    em_tensor *ha = gen_input(O_MAX, 0, s, EM_F16, H_FLIPPED, &va);
    em_tensor *hb = gen_input(O_MAX, 1, s, EM_F16, H_CONTIG, &vb);
    for (int64_t i = 0; i < 44000; i++) e[i] = fmax(va[i], vb[i]);
    h_check_tensor("large f16 maximum", em_maximum(ha, hb), e, s, 0, 0);
    free(va);
    free(vb);
    free(e);
    em_scope_end();
}

/* ---- bad inputs -------------------------------------------------------------------------- */

static void check_bad_inputs(void)
{
    em_scope_begin();
    em_tensor *x = em_ones(EM_SHAPE(2, 3), EM_F32, h_dev);
    em_tensor *y = em_ones(EM_SHAPE(4), EM_F32, h_dev);
    for (int op = 0; op < O_COUNT; op++) {
        CHECK(ops[op].fn(NULL, x) == NULL, "%s(NULL, x)", ops[op].name);
        CHECK_ERR(EM_ERR_INVALID_ARG, ops[op].name);
        CHECK(ops[op].fn(x, NULL) == NULL, "%s(x, NULL)", ops[op].name);
        CHECK_ERR(EM_ERR_INVALID_ARG, ops[op].name);
    }
    for (size_t f = 0; f < sizeof sops / sizeof sops[0]; f++) {
        CHECK(sops[f].fn(NULL, 1) == NULL, "%s(NULL)", sops[f].name);
        CHECK_ERR(EM_ERR_INVALID_ARG, sops[f].name);
    }
    CHECK(em_add(x, y) == NULL, "add [2, 3] and [4] fails");
    CHECK(strstr(em_last_error(), "[2, 3]") && strstr(em_last_error(), "[4]"),
          "message names both shapes: %s", em_last_error());
    CHECK_ERR(EM_ERR_SHAPE, "em_add");
    /* a NULL input keeps the first error */
    CHECK(em_mul(em_sub(x, y), x) == NULL, "chain fails");
    CHECK_ERR(EM_ERR_SHAPE, "em_sub");
    /* dtypes */
    em_tensor *b = em_ones(EM_SHAPE(2), EM_BOOL, h_dev);
    CHECK(em_sub(b, b) == NULL, "bool - bool fails");
    CHECK_ERR(EM_ERR_DTYPE, "em_sub");
    CHECK(em_bitwise_and(x, x) == NULL, "bitwise on f32 fails");
    CHECK_ERR(EM_ERR_DTYPE, "f32");
    CHECK(em_shift_left(b, b) == NULL, "shift on bool fails");
    CHECK_ERR(EM_ERR_DTYPE, "em_shift_left");
    CHECK(em_pow(b, b) == NULL, "pow on bool fails");
    CHECK_ERR(EM_ERR_DTYPE, "em_pow");
    CHECK(em_where(NULL, x, x) == NULL, "where NULL cond");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_where");
    em_scope_end();
}

/* threshold_backward(g, y, t) = y <= t ? +0 : g (NaN y keeps g): on h_dev (where a device
 * without the record composes masked_fill and le) and on the CPU (the record), four float
 * dtypes, every layout, specials in g and y, y exactly at t; g and y of different dtypes (the
 * composition). */
static void check_threshold_backward(void)
{
    const em_dtype dts[] = {EM_F64, EM_F32, EM_F16, EM_BF16};
    const double ts[] = {0.0, 0.5, -1.0};
    em_shape s = EM_SHAPE(3, 4, 37);
    int64_t n = em_shape_numel(s);
    for (int d = 0; d < 4; d++)
        for (int l = 0; l < H_LAYOUT_COUNT; l++)
            for (int ti = 0; ti < 3; ti++) {
                em_scope_begin();
                double t = ts[ti], *gv, *yv;
                em_tensor *g0 = h_rand(s, dts[d], H_CONTIG, -3, 3, &gv);
                em_tensor *y0 = h_rand(s, dts[d], H_CONTIG, -2, 2, &yv);
                (void)g0, (void)y0;
                gv[0] = NAN, gv[1] = -0.0, gv[2] = INFINITY, gv[3] = -INFINITY;
                yv[4] = NAN, yv[5] = -0.0, yv[6] = INFINITY, yv[7] = -INFINITY;
                for (int64_t i = 8; i < n; i += 7) yv[i] = t;
                em_tensor *g = h_from_values(gv, s, dts[d], (h_layout)l);
                em_tensor *y = h_from_values(yv, s, dts[d], (h_layout)((l + 1) % H_LAYOUT_COUNT));
                double *e = malloc(sizeof(double) * (size_t)n);
                for (int64_t i = 0; i < n; i++) e[i] = yv[i] <= t ? 0.0 : gv[i];
                char what[96];
                snprintf(what, sizeof what, "threshold_backward %s layout %d t %g",
                         em_dtype_name(dts[d]), l, t);
                h_check_tensor(what, tn_threshold_backward(g, y, t), e, s, 0, 0);
                if (h_dev.backend != 0) {
                    em_tensor *gc = em_to_device(g, EM_CPU), *yc = em_to_device(y, EM_CPU);
                    h_check_tensor(what, tn_threshold_backward(gc, yc, t), e, s, 0, 0);
                }
                if (l == 0) { /* contiguous views one element in: not 16-byte aligned */
                    em_tensor *gf = em_narrow(em_flatten(g, 0, -1), 0, 1, n - 1);
                    em_tensor *yf = em_narrow(em_flatten(y, 0, -1), 0, 1, n - 1);
                    h_check_tensor(what, tn_threshold_backward(gf, yf, t), e + 1, EM_SHAPE(n - 1),
                                   0, 0);
                }
                if (dts[d] != EM_F64) /* y wider than g */
                    h_check_tensor(what, tn_threshold_backward(g, em_cast(y, EM_F64), t), e, s, 0,
                                   0);
                CHECK_OK(what);
                free(e);
                free(gv);
                free(yv);
                em_scope_end();
            }
}

/* ---- kinds with a sample range (tests/ew_samples.def): their table expression as reference -- */

static const struct {
    const char *name;
    double lo[2], hi[2];
} samples[] = {
#define EW_SAMPLE(n, lo, hi)
#define EW_SAMPLE2(n, alo, ahi, blo, bhi) {#n, {alo, blo}, {ahi, bhi}},
#include "../ew_samples.def"
#undef EW_SAMPLE2
#undef EW_SAMPLE
};
#define N_SAMPLES (int)(sizeof samples / sizeof samples[0])

/* The f64 value of a float binary kind's table expression (NaN for other kinds). */
static double table_ref(em_op_kind k, double a, double b)
{
    (void)a, (void)b;
    switch (k) {
#define X(kind, str, fam, fl, imin, imax, omin, omax, par, dt, doc, low, e, d0, d1, d2)            \
    case EM_OP_##kind:                                                                             \
        return (fl)&IR_EW2 && !((fl)&IR_INTERNAL) ? TB_FOR_##dt(e) : NAN;
#define TB_FOR_PROMOTE(e)       ((double)(e))
#define TB_FOR_PROMOTE_NUM(e)   ((double)(e))
#define TB_FOR_PROMOTE_FLOAT(e) ((double)(e))
#define TB_FOR_COMPARE(e)       ((double)(e))
#define TB_FOR_LOGICAL(e)       ((double)(e))
#define TB_FOR_EXPLICIT(e)      NAN
#define TB_FOR_SAME(e)          NAN
#define TB_FOR_FLOAT_MATH(e)    NAN
#define TB_FOR_KEEP_NUM(e)      NAN
#define TB_FOR_KEEP_ALL(e)      NAN
#define TB_FOR_SQUARE(e)        NAN
#define TB_FOR_BOOL(e)          NAN
#define TB_FOR_BITWISE(e)       NAN
#define TB_FOR_INT(e)           NAN
#define TB_FOR_FLOAT(e)         NAN
#define TB_FOR_PROMOTE_TAIL(e)  NAN
#define TB_FOR_PROMOTE_ALL(e)   NAN
#define TB_FOR_CLAMP(e)         NAN
#define TB_FOR_SUM(e)           NAN
#define TB_FOR_I64(e)           NAN
#define IR_NOEXPR               (NAN)
#include "ir/ops.def"
#undef X
    default: return NAN;
    }
}

static em_op_kind kind_named(const char *name)
{
    for (int k = 0; k < EM_OP_COUNT; k++)
        if (strcmp(em_op_name((em_op_kind)k), name) == 0) return (em_op_kind)k;
    return EM_OP_COUNT;
}

/* Each sampled kind in f64 and f32 over a broadcast pair, against its table expression. */
static void check_sampled(void)
{
    for (int i = 0; i < N_SAMPLES; i++) {
        em_op_kind k = kind_named(samples[i].name);
        CHECK(k < EM_OP_COUNT, "tests/ew_samples.def names %s, no kind", samples[i].name);
        if (k >= EM_OP_COUNT) continue;
        const em_dtype dts[] = {EM_F64, EM_F32};
        for (int d = 0; d < 2; d++)
            for (int l = 0; l < H_LAYOUT_COUNT; l++) {
                em_scope_begin();
                double av[12], bv[4], e[12];
                for (int j = 0; j < 12; j++)
                    av[j] = samples[i].lo[0] + (samples[i].hi[0] - samples[i].lo[0]) * j / 11.0;
                for (int j = 0; j < 4; j++)
                    bv[j] = samples[i].lo[1] + (samples[i].hi[1] - samples[i].lo[1]) * j / 3.0;
                em_tensor *a = h_from_values(av, EM_SHAPE(3, 4), dts[d], (h_layout)l);
                em_tensor *b = h_from_values(bv, EM_SHAPE(4), dts[d], H_CONTIG);
                for (int j = 0; j < 12; j++) {
                    double x = av[j], y = bv[j % 4];
                    if (dts[d] == EM_F32) x = (float)x, y = (float)y;
                    e[j] = table_ref(k, x, y);
                }
                char what[96];
                snprintf(what, sizeof what, "%s %s layout %d", samples[i].name,
                         em_dtype_name(dts[d]), l);
                h_check_tensor(what, tn_binary(what, k, a, b), e, EM_SHAPE(3, 4),
                               dts[d] == EM_F32 ? 1e-6 : 1e-14, dts[d] == EM_F32 ? 1e-6 : 1e-14);
                CHECK_OK(what);
                em_scope_end();
            }
    }
}

/* Every elementwise binary kind of the op table has an entry in ops[] or a sample range: a kind
 * added to the table without one fails here. */
static void check_table_cases(void)
{
    for (int k = 0; k < EM_OP_COUNT; k++) {
        if (!ir_has((em_op_kind)k, IR_EW2)) continue;
        bool found = false;
        for (int i = 0; i < O_COUNT; i++)
            found = found || strcmp(ops[i].name + 3, em_op_name((em_op_kind)k)) == 0;
        for (int i = 0; i < N_SAMPLES; i++)
            found = found || strcmp(samples[i].name, em_op_name((em_op_kind)k)) == 0;
        CHECK(found, "binary kind %s of the op table has no conformance case",
              em_op_name((em_op_kind)k));
    }
}

void conf_binary(void)
{
    check_table_cases();
    check_sampled();
    check_binary_ops();
    check_special_values();
    check_promotion();
    check_int_exact();
    check_scalar_forms();
    check_where();
    check_masked_fill();
    check_threshold_backward();
    check_clamp();
    check_lerp();
    check_large();
    check_bad_inputs();
}
