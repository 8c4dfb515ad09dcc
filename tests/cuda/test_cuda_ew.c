/* The CUDA elementwise family against the CPU backend on large and odd sizes: unary and binary
 * ops on f16, bf16, integer and bool dtypes, mixed-dtype and broadcast operands, transposed,
 * sliced and flipped views, the integer edge cases (division by zero, INT_MIN / -1, shifts
 * past the width), where / clamp / lerp, the gradients of logit and logaddexp (the op table's
 * derivatives, EW_GRAD), every cast pair, the creation ops and the random ops
 * on the narrow float dtypes. Without a CUDA device it prints one line and passes. */
#include <string.h>

#include "backend/backend.h"
#include "harness.h"
#include "tensor/op.h"

static em_device dev;

typedef em_tensor *(*un_fn)(const em_tensor *);
typedef em_tensor *(*bin_fn)(const em_tensor *, const em_tensor *);

/* got (device) against want (CPU): same dtype, shape and values within atol + rtol |want|.
 * Both NULL (the op refused the inputs on both backends) passes. */
static void compare(const char *what, em_tensor *got, em_tensor *want, double atol, double rtol)
{
    if (!got && !want) { /* both backends refused the op: nothing to compare */
        em_clear_error();
        return;
    }
    h_compare_dev(what, got, want, atol, rtol, dev);
    if (!got || !want) em_clear_error();
}

enum { L_CONTIG, L_TRANSPOSED, L_SLICED, L_FLIPPED, L_COUNT };
static const char *layout_name[] = {"contiguous", "transposed", "sliced", "flipped"};

/* A CPU tensor *c and the same values on the device *d, both seen through `layout`; values
 * uniform in [lo, hi) (integers for integer dtypes), the first few special when `special`. */
static void mk(em_shape sh, int layout, em_dtype dt, double lo, double hi, bool special,
               em_tensor **c, em_tensor **d)
{
    em_shape b = sh;
    int r = sh.rank;
    if (layout == L_TRANSPOSED && r >= 2) {
        b.dims[r - 1] = sh.dims[r - 2];
        b.dims[r - 2] = sh.dims[r - 1];
    }
    if (layout == L_SLICED && r >= 1) b.dims[r - 1] = 2 * sh.dims[r - 1] + 1;
    int64_t n = 1;
    for (int i = 0; i < b.rank; i++) n *= b.dims[i];
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    bool is_int = !em_dtype_is_float(dt);
    for (int64_t i = 0; i < n; i++) {
        double x = lo + (hi - lo) * h_uniform();
        v[i] = dt == EM_BOOL ? (x > 0) : is_int ? floor(x) : h_round_to(x, dt);
    }
    static const double sp[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0, -1.0, 0.5};
    if (special && !is_int)
        for (int64_t i = 0; i < n && i < 8; i++) v[i * 7 % n] = sp[i];
    em_tensor *cb = em_from_data(v, EM_F64, b, dt, EM_CPU);
    free(v);
    em_tensor *db = em_to_device(cb, dev);
    if (layout == L_TRANSPOSED && r >= 2) {
        *c = em_transpose(cb, r - 2, r - 1);
        *d = em_transpose(db, r - 2, r - 1);
    } else if (layout == L_SLICED && r >= 1) {
        *c = em_slice(cb, r - 1, 1, b.dims[r - 1], 2);
        *d = em_slice(db, r - 1, 1, b.dims[r - 1], 2);
    } else if (layout == L_FLIPPED && r >= 1) {
        *c = em_flip(cb, EM_AXES(0));
        *d = em_flip(db, EM_AXES(0));
    } else {
        *c = cb, *d = db;
    }
}

static double tol(em_dtype dt)
{
    return 2 * h_rtol(dt);
}

/* ---- unary ------------------------------------------------------------------------------------
 */

static em_tensor *leaky(const em_tensor *x)
{
    return em_leaky_relu(x, 0.07);
}
static em_tensor *elu(const em_tensor *x)
{
    return em_elu(x, 0.8);
}
static em_tensor *celu(const em_tensor *x)
{
    return em_celu(x, 1.7);
}
static em_tensor *softplus(const em_tensor *x)
{
    return em_softplus(x, 2.0, 3.0);
}
static em_tensor *hardtanh(const em_tensor *x)
{
    return em_hardtanh(x, -0.6, 2.5);
}

static void test_unary(void)
{
    static const struct {
        const char *name;
        un_fn f;
    } ops[] = {
        {"neg", em_neg},
        {"abs", em_abs},
        {"sign", em_sign},
        {"exp", em_exp},
        {"log1p", em_log1p},
        {"sqrt", em_sqrt},
        {"square", em_square},
        {"sin", em_sin},
        {"tanh", em_tanh},
        {"erf", em_erf},
        {"floor", em_floor},
        {"round", em_round},
        {"isnan", em_isnan},
        {"isinf", em_isinf},
        {"isfinite", em_isfinite},
        {"logical_not", em_logical_not},
        {"bitwise_not", em_bitwise_not},
        {"relu", em_relu},
        {"relu6", em_relu6},
        {"sigmoid", em_sigmoid},
        {"gelu", em_gelu},
        {"silu", em_silu},
        {"mish", em_mish},
        {"leaky_relu", leaky},
        {"elu", elu},
        {"celu", celu},
        {"softplus", softplus},
        {"hardtanh", hardtanh},
    };
    const em_dtype dts[] = {EM_F16, EM_BF16, EM_F32, EM_I32, EM_I8, EM_U8, EM_I64, EM_BOOL};
    const em_shape shapes[] = {EM_SHAPE(70001, 3), EM_SHAPE(129, 1031)};
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++)
        for (int s = 0; s < 2; s++)
            for (int l = 0; l < L_COUNT; l++) {
                em_scope_begin();
                em_tensor *c, *d;
                mk(shapes[s], l, dts[t], dts[t] == EM_U8 ? 0 : -4, dts[t] == EM_U8 ? 200 : 4, true,
                   &c, &d);
                for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
                    em_tensor *want = ops[k].f(c);
                    em_clear_error();
                    em_tensor *got = ops[k].f(d);
                    em_dtype od = want ? em_tensor_dtype(want) : EM_F32;
                    char what[96];
                    snprintf(what, sizeof what, "%s %s %s [%lld,%lld]", ops[k].name,
                             em_dtype_name(dts[t]), layout_name[l], (long long)shapes[s].dims[0],
                             (long long)shapes[s].dims[1]);
                    compare(what, got, want, tol(od), tol(od));
                }
                em_scope_end();
            }
}

/* ---- binary -----------------------------------------------------------------------------------
 */

static void test_binary(void)
{
    static const struct {
        const char *name;
        bin_fn f;
    } ops[] = {
        {"add", em_add},
        {"sub", em_sub},
        {"mul", em_mul},
        {"div", em_div},
        {"floor_divide", em_floor_divide},
        {"remainder", em_remainder},
        {"fmod", em_fmod},
        {"pow", em_pow},
        {"atan2", em_atan2},
        {"hypot", em_hypot},
        {"minimum", em_minimum},
        {"maximum", em_maximum},
        {"eq", em_eq},
        {"ne", em_ne},
        {"lt", em_lt},
        {"ge", em_ge},
        {"logical_and", em_logical_and},
        {"logical_xor", em_logical_xor},
        {"bitwise_and", em_bitwise_and},
        {"bitwise_or", em_bitwise_or},
        {"bitwise_xor", em_bitwise_xor},
        {"shift_left", em_shift_left},
        {"shift_right", em_shift_right},
    };
    const em_dtype pairs[][2] = {{EM_F16, EM_F16}, {EM_BF16, EM_BF16}, {EM_I32, EM_I32},
                                 {EM_I64, EM_I32}, {EM_U8, EM_I8},     {EM_F32, EM_I64},
                                 {EM_F16, EM_F32}, {EM_BOOL, EM_BOOL}, {EM_I16, EM_I16},
                                 {EM_F32, EM_F32}, {EM_F64, EM_F32}};
    /* broadcast pairs with more than 2^16 rows, long rows and odd tails */
    const em_shape sa[] = {EM_SHAPE(70001, 3), EM_SHAPE(257, 1, 129), EM_SHAPE(3, 40000)};
    const em_shape sb[] = {EM_SHAPE(3), EM_SHAPE(1, 65, 129), EM_SHAPE(3, 40000)};
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++)
        for (int s = 0; s < 3; s++)
            for (int l = 0; l < L_COUNT; l++) {
                em_scope_begin();
                em_tensor *ca, *da, *cb, *db;
                mk(sa[s], l, pairs[p][0], -60, 60, false, &ca, &da);
                /* a positive divisor and shift count below every width */
                mk(sb[s], s == 2 ? l : L_CONTIG, pairs[p][1], 1, 7.99, false, &cb, &db);
                for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
                    em_tensor *want = ops[k].f(ca, cb);
                    em_clear_error();
                    em_tensor *got = ops[k].f(da, db);
                    em_dtype od = want ? em_tensor_dtype(want) : EM_F32;
                    char what[96];
                    snprintf(what, sizeof what, "%s %s,%s %s shape %d", ops[k].name,
                             em_dtype_name(pairs[p][0]), em_dtype_name(pairs[p][1]), layout_name[l],
                             s);
                    compare(what, got, want, tol(od), tol(od));
                }
                em_scope_end();
            }
}

/* f32 add / sub / mul / div of a row broadcast (the em_*_bc_f32 kernels): [R, C] with [R, 1],
 * [C], [1, C] or [R, C], either side, with float4 rows (C % 4 == 0), without (C odd), from
 * misaligned rows (a sliced [R, C] starting one float in) and flipped rows (a negative row
 * stride), NaN, infinities and zeros among the values; exact against the CPU (f32 arithmetic
 * rounds as the CPU's f64 computation rounded). */
static void test_row_broadcast(void)
{
    static const bin_fn ops[] = {em_add, em_sub, em_mul, em_div};
    static const char *names[] = {"add", "sub", "mul", "div"};
    const int64_t R = 517, cols[] = {1024, 1023, 4};
    for (int ci = 0; ci < 3; ci++)
        for (int l = 0; l < L_COUNT; l++)
            for (int other = 0; other < 4; other++) {
                int64_t C = cols[ci];
                em_shape so = other == 0   ? EM_SHAPE(R, 1)
                              : other == 1 ? EM_SHAPE(C)
                              : other == 2 ? EM_SHAPE(1, C)
                                           : EM_SHAPE(R, C);
                em_scope_begin();
                em_tensor *ca, *da, *cb, *db;
                mk(EM_SHAPE(R, C), l == L_TRANSPOSED ? L_CONTIG : l, EM_F32, -4, 4, true, &ca, &da);
                mk(so, other == 3 ? l : L_CONTIG, EM_F32, -4, 4, true, &cb, &db);
                if (l == L_SLICED) { /* rows that start one float past a 16-byte boundary */
                    ca = em_slice(em_cat((em_tensor *[]){ca, ca}, 2, 1), 1, 1, C + 1, 1);
                    da = em_slice(em_cat((em_tensor *[]){da, da}, 2, 1), 1, 1, C + 1, 1);
                }
                for (int k = 0; k < 4; k++)
                    for (int side = 0; side < 2; side++) {
                        char what[96];
                        snprintf(what, sizeof what, "%s [%lld, %lld] %s with shape %d, side %d",
                                 names[k], (long long)R, (long long)C, layout_name[l], other, side);
                        em_tensor *want = side ? ops[k](cb, ca) : ops[k](ca, cb);
                        em_tensor *got = side ? ops[k](db, da) : ops[k](da, db);
                        compare(what, got, want, 0, 0);
                    }
                em_scope_end();
            }
}

/* INT_MIN / -1, division by zero (an error on both backends), shifts at and past the width. */
static void test_int_edges(void)
{
    const em_dtype dts[] = {EM_I64, EM_I32, EM_I16, EM_I8, EM_U8};
    const double mins[] = {-9223372036854775808.0, -2147483648.0, -32768, -128, 0};
    for (int t = 0; t < 5; t++) {
        em_scope_begin();
        int64_t n = 100003;
        double *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
        for (int64_t i = 0; i < n; i++) {
            a[i] = i % 5 == 0 ? mins[t] : floor(-100 + 200 * h_uniform());
            if (dts[t] == EM_U8 && a[i] < 0) a[i] = -a[i];
            b[i] = i % 3 == 0 ? (dts[t] == EM_U8 ? 1 : -1) : floor(1 + 70 * h_uniform());
        }
        em_tensor *ca = em_from_data(a, EM_F64, EM_SHAPE(n), dts[t], EM_CPU);
        em_tensor *cb = em_from_data(b, EM_F64, EM_SHAPE(n), dts[t], EM_CPU);
        em_tensor *da = em_to_device(ca, dev), *db = em_to_device(cb, dev);
        bin_fn fs[] = {em_floor_divide, em_remainder,  em_fmod,        em_mul,
                       em_sub,          em_shift_left, em_shift_right, em_pow};
        const char *names[] = {"floor_divide", "remainder",  "fmod",        "mul",
                               "sub",          "shift_left", "shift_right", "pow"};
        for (int k = 0; k < 8; k++) {
            char what[64];
            snprintf(what, sizeof what, "%s %s edges", names[k], em_dtype_name(dts[t]));
            compare(what, fs[k](da, db), fs[k](ca, cb), 0, 0);
        }
        /* a zero divisor somewhere in the middle */
        b[n / 2 + 1] = 0;
        em_tensor *cz = em_from_data(b, EM_F64, EM_SHAPE(n), dts[t], EM_CPU);
        em_tensor *dz = em_to_device(cz, dev);
        em_clear_error();
        CHECK(em_floor_divide(da, dz) == NULL, "floor_divide %s by zero: no error",
              em_dtype_name(dts[t]));
        CHECK_ERR(EM_ERR_INVALID_ARG, "division by zero");
        CHECK(em_remainder(da, dz) == NULL, "remainder %s by zero: no error",
              em_dtype_name(dts[t]));
        CHECK_ERR(EM_ERR_INVALID_ARG, "division by zero");
        free(a);
        free(b);
        em_scope_end();
    }
}

/* ---- where, clamp, lerp -----------------------------------------------------------------------
 */

static void test_select(void)
{
    const em_dtype dts[] = {EM_F16, EM_BF16, EM_I32, EM_U8, EM_F32, EM_F64};
    for (int t = 0; t < 6; t++)
        for (int l = 0; l < L_COUNT; l++) {
            em_scope_begin();
            em_dtype dt = dts[t];
            em_tensor *cx, *dx, *cc, *dc, *cy, *dy, *clo, *dlo, *chi, *dhi;
            mk(EM_SHAPE(70001, 5), l, dt, 0, 100, true, &cx, &dx);
            mk(EM_SHAPE(70001, 1), L_CONTIG, EM_BOOL, -1, 1, false, &cc, &dc);
            mk(EM_SHAPE(5), L_CONTIG, EM_F32, -50, 50, false, &cy, &dy);
            mk(EM_SHAPE(70001, 5), l, dt, 0, 40, false, &clo, &dlo);
            mk(EM_SHAPE(5), L_CONTIG, dt, 50, 90, false, &chi, &dhi);
            char what[64];
            snprintf(what, sizeof what, "where %s %s", em_dtype_name(dt), layout_name[l]);
            em_tensor *w = em_where(cc, cx, cy);
            compare(what, em_where(dc, dx, dy), w, 0, 0);
            snprintf(what, sizeof what, "clamp %s %s", em_dtype_name(dt), layout_name[l]);
            compare(what, em_clamp(dx, 10.3, 77.7), em_clamp(cx, 10.3, 77.7), 0, 0);
            compare(what, em_clamp(dx, NAN, 33), em_clamp(cx, NAN, 33), 0, 0);
            snprintf(what, sizeof what, "clamp_tensor %s %s", em_dtype_name(dt), layout_name[l]);
            compare(what, em_clamp_tensor(dx, dlo, dhi), em_clamp_tensor(cx, clo, chi), 0, 0);
            compare(what, em_clamp_tensor(dx, NULL, dhi), em_clamp_tensor(cx, NULL, chi), 0, 0);
            compare(what, em_clamp_tensor(dx, dlo, NULL), em_clamp_tensor(cx, clo, NULL), 0, 0);
            if (em_dtype_is_float(dt)) {
                snprintf(what, sizeof what, "lerp %s %s", em_dtype_name(dt), layout_name[l]);
                compare(what, em_lerp(dx, dlo, 0.3), em_lerp(cx, clo, 0.3), tol(dt), tol(dt));
                compare(what, em_lerp(dx, dlo, 0.8), em_lerp(cx, clo, 0.8), tol(dt), tol(dt));
                em_tensor *cw, *dw;
                mk(EM_SHAPE(70001, 1), L_CONTIG, dt, -0.5, 1.5, false, &cw, &dw);
                compare(what, em_lerp_tensor(dx, dhi, dw), em_lerp_tensor(cx, chi, cw), tol(dt),
                        tol(dt));
            }
            em_scope_end();
        }
}

/* ---- gradients from the op table (EW_GRAD) ----------------------------------------------------
 */

/* t seen through `layout` (t contiguous [r, c]): its transpose, every other column or its rows
 * reversed; the gradient flows back through the view to t. */
static em_tensor *view(em_tensor *t, int layout)
{
    switch (layout) {
    case L_TRANSPOSED: return em_transpose(t, 0, 1);
    case L_SLICED: return em_slice(t, 1, 0, em_tensor_shape(t).dims[1], 2);
    case L_FLIPPED: return em_flip(t, EM_AXES(0));
    default: return t;
    }
}

/* The gradient of sum(w * f(...)) for logit and logaddexp (whose backward rules take the
 * derivative from the op table: an ew_grad record) on the device against the CPU, with strided
 * views, a broadcast operand and f64 / f32 / bf16; and an ew_grad record of a kind with no
 * derivative refused on the device as on the CPU. */
static void test_grad(void)
{
    const em_dtype dts[] = {EM_F64, EM_F32, EM_BF16};
    for (int t = 0; t < 3; t++)
        for (int l = 0; l < L_COUNT; l++) {
            em_scope_begin();
            em_dtype dt = dts[t];
            em_tensor *cx, *dx, *ca, *da, *cb, *db, *cw, *dw;
            mk(EM_SHAPE(1031, 66), L_CONTIG, dt, 0.02, 0.98, false, &cx, &dx);
            mk(EM_SHAPE(1031, 66), L_CONTIG, dt, -30, 30, false, &ca, &da);
            mk(EM_SHAPE(66), L_CONTIG, EM_F32, -30, 30, false, &cb, &db);
            em_shape ws = em_tensor_shape(view(cx, l));
            mk(ws, L_CONTIG, dt, -2, 2, false, &cw, &dw);
            em_tensor *leaves[2][4] = {{cx, ca, cb, NULL}, {dx, da, db, NULL}};
            em_tensor *g[2][3];
            for (int d = 0; d < 2; d++) {
                for (int i = 0; i < 3; i++) em_requires_grad(leaves[d][i], true);
                em_tensor *w = d ? dw : cw;
                em_tensor *y1 = em_logit(view(leaves[d][0], l));
                /* b [66] broadcast along the rows of a's view (its last dim is 66 when the view
                   keeps the columns) */
                em_tensor *av = view(leaves[d][1], l == L_FLIPPED ? l : L_CONTIG);
                em_tensor *y2 = em_logaddexp(av, leaves[d][2]);
                em_tensor *loss = em_add(em_sum(em_mul(y1, w), EM_ALL, false),
                                         em_sum(em_mul(y2, em_logit(leaves[d][0])), EM_ALL, false));
                em_grads *gr = em_backward(loss);
                CHECK(gr, "grad %s %s: backward on %s (%s)", em_dtype_name(dt), layout_name[l],
                      d ? "cuda:0" : "the CPU", em_last_error());
                for (int i = 0; i < 3; i++) g[d][i] = gr ? em_grad(gr, leaves[d][i]) : NULL;
            }
            static const char *names[] = {"d/dx (logit)", "d/da (logaddexp)", "d/db (logaddexp)"};
            for (int i = 0; i < 3; i++) {
                char what[96];
                snprintf(what, sizeof what, "grad %s %s %s", names[i], em_dtype_name(dt),
                         layout_name[l]);
                /* db sums 1031 rows of f32 or bf16 products */
                double tl = i == 2 && dt != EM_F64 ? 50 * tol(EM_F32) : 4 * tol(dt);
                compare(what, g[1][i], g[0][i], tl, tl);
            }
            em_scope_end();
        }
    em_scope_begin();
    em_tensor *cx, *dx;
    mk(EM_SHAPE(5, 7), L_CONTIG, EM_F32, -3, 3, false, &cx, &dx);
    em_op floor_op = {.kind = EM_OP_FLOOR}, logit_op = {.kind = EM_OP_LOGIT};
    em_tensor *dy = em_floor(dx), *cy = em_floor(cx);
    CHECK(tn_ew_grad(&floor_op, 0, &cx, 1, cy) == NULL, "ew_grad of floor refused on the CPU");
    CHECK_ERR(EM_ERR_UNSUPPORTED, "no derivative");
    CHECK(tn_ew_grad(&floor_op, 0, &dx, 1, dy) == NULL, "ew_grad of floor refused on cuda:0");
    CHECK(em_last_status() != EM_OK, "ew_grad of floor: an error on cuda:0");
    em_clear_error();
    compare("ew_grad logit [5, 7] f32", tn_ew_grad(&logit_op, 0, &dx, 1, em_logit(dx)),
            tn_ew_grad(&logit_op, 0, &cx, 1, em_logit(cx)), 0, 0);
    em_scope_end();
}

/* ---- casts ------------------------------------------------------------------------------------
 */

static void test_cast(void)
{
    const em_dtype dts[] = {EM_F64, EM_F32, EM_F16, EM_BF16, EM_I64,
                            EM_I32, EM_I16, EM_I8,  EM_U8,   EM_BOOL};
    int64_t n = 3 * 33337;
    double *v = malloc((size_t)n * sizeof *v);
    static const double sp[] = {NAN,   INFINITY, -INFINITY, 1e20, -1e20, 3e9,     -3e9,
                                70000, -70000,   300.7,     -3.5, 255.5, 65519.9, 65520,
                                1e-8,  -0.0,     2.5,       -2.5, 0.5,   1e300,   -1e-300};
    for (int64_t i = 0; i < n; i++)
        v[i] = i < (int64_t)(sizeof sp / sizeof sp[0]) ? sp[i] : -1000 + 2000 * h_uniform();
    for (int a = 0; a < 10; a++)
        for (int l = 0; l < L_COUNT; l++) {
            em_scope_begin();
            em_tensor *cb = em_from_data(v, EM_F64, EM_SHAPE(3, 33337), dts[a], EM_CPU);
            em_tensor *db = em_to_device(cb, dev);
            em_tensor *c = cb, *d = db;
            if (l == L_TRANSPOSED) c = em_transpose(cb, 0, 1), d = em_transpose(db, 0, 1);
            if (l == L_SLICED) c = em_slice(cb, 1, 5, 33337, 3), d = em_slice(db, 1, 5, 33337, 3);
            if (l == L_FLIPPED) c = em_flip(cb, EM_AXES(0, 1)), d = em_flip(db, EM_AXES(0, 1));
            for (int b = 0; b < 10; b++) {
                char what[64];
                snprintf(what, sizeof what, "cast %s -> %s %s", em_dtype_name(dts[a]),
                         em_dtype_name(dts[b]), layout_name[l]);
                compare(what, em_cast(d, dts[b]), em_cast(c, dts[b]), 0, 0);
            }
            em_scope_end();
        }
    free(v);
}

/* ---- creation and random ----------------------------------------------------------------------
 */

static void test_create(void)
{
    const em_dtype dts[] = {EM_F16, EM_BF16, EM_F32, EM_F64, EM_I32, EM_I64, EM_U8, EM_I16};
    for (int t = 0; t < 8; t++) {
        em_scope_begin();
        em_dtype dt = dts[t];
        char what[64];
        snprintf(what, sizeof what, "arange %s", em_dtype_name(dt));
        compare(what, em_arange(-3, 200000, 1.5, dt, dev), em_arange(-3, 200000, 1.5, dt, EM_CPU),
                0, 0);
        snprintf(what, sizeof what, "linspace %s", em_dtype_name(dt));
        compare(what, em_linspace(-7, 250, 100003, dt, dev),
                em_linspace(-7, 250, 100003, dt, EM_CPU), 0, 0);
        snprintf(what, sizeof what, "eye %s", em_dtype_name(dt));
        compare(what, em_eye(1031, 77, dt, dev), em_eye(1031, 77, dt, EM_CPU), 0, 0);
        for (int l = 0; l < L_COUNT; l++) {
            em_tensor *c, *d;
            mk(EM_SHAPE(3, 257, 131), l, dt, -100, 100, true, &c, &d);
            const int64_t ks[] = {0, -3, 5, 200};
            for (int k = 0; k < 4; k++) {
                snprintf(what, sizeof what, "tril %s %s k=%lld", em_dtype_name(dt), layout_name[l],
                         (long long)ks[k]);
                compare(what, em_tril(d, ks[k]), em_tril(c, ks[k]), 0, 0);
                snprintf(what, sizeof what, "triu %s %s k=%lld", em_dtype_name(dt), layout_name[l],
                         (long long)ks[k]);
                compare(what, em_triu(d, ks[k]), em_triu(c, ks[k]), 0, 0);
            }
        }
        em_scope_end();
    }
    const em_dtype its[] = {EM_I64, EM_I32, EM_U8, EM_I16};
    for (int t = 0; t < 4; t++)
        for (int l = 0; l < L_COUNT; l++) {
            em_scope_begin();
            em_tensor *c, *d;
            mk(EM_SHAPE(70001, 3), l, its[t], 0, 37, false, &c, &d);
            char what[64];
            snprintf(what, sizeof what, "one_hot %s %s", em_dtype_name(its[t]), layout_name[l]);
            compare(what, em_one_hot(d, 37), em_one_hot(c, 37), 0, 0);
            em_scope_end();
        }
}

static void test_random(void)
{
    const em_dtype dts[] = {EM_F16, EM_BF16, EM_F32, EM_F64};
    em_shape sh = EM_SHAPE(70001, 3);
    for (int t = 0; t < 4; t++) {
        em_scope_begin();
        em_dtype dt = dts[t];
        em_tensor *cp, *dp, *cx, *dx;
        mk(sh, L_TRANSPOSED, dt, 0, 1, false, &cp, &dp);
        mk(sh, L_SLICED, dt, -3, 3, false, &cx, &dx);
        em_seed(5);
        em_tensor *du = em_rand_uniform(sh, -2, 0.25, dt, dev);
        em_tensor *dn = em_randn(sh, dt, dev);
        em_tensor *db = em_bernoulli(dp), *dbp = em_bernoulli_p(sh, 0.7, dt, dev);
        em_tensor *dd = em_dropout(dx, 0.3, true);
        em_tensor *di = em_randint(-9, 1000, sh, EM_I32, dev);
        em_seed(5);
        em_tensor *cu = em_rand_uniform(sh, -2, 0.25, dt, EM_CPU);
        em_tensor *cn = em_randn(sh, dt, EM_CPU);
        em_tensor *cb = em_bernoulli(cp), *cbp = em_bernoulli_p(sh, 0.7, dt, EM_CPU);
        em_tensor *cd = em_dropout(cx, 0.3, true);
        em_tensor *ci = em_randint(-9, 1000, sh, EM_I32, EM_CPU);
        char what[64];
        snprintf(what, sizeof what, "random %s", em_dtype_name(dt));
        compare(what, du, cu, 0, 0);
        compare(what, dn, cn, tol(dt), tol(dt));
        compare(what, db, cb, 0, 0);
        compare(what, dbp, cbp, 0, 0);
        compare(what, dd, cd, 0, 0);
        compare(what, di, ci, 0, 0);
        em_scope_end();
    }
}

int main(void)
{
    h_init();
    h_dev = EM_CPU; /* the reference tensors stay on the CPU whatever EMBER_TEST_DEVICE says */
    em_backends_init();
    if (em_backend_find("cuda") < 0) {
        printf("skipped: no CUDA device\n");
        return 0;
    }
    dev = em_device_parse("cuda:0");
    CHECK_OK("em_device_parse(\"cuda:0\")");
    test_unary();
    test_binary();
    test_row_broadcast();
    test_int_edges();
    test_select();
    test_grad();
    test_cast();
    test_create();
    test_random();
    em_device_sync(dev);
    CHECK_OK("em_device_sync");
    return h_finish();
}
