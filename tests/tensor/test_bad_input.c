/* Bad-input sweep over the public tensor API: NULL arguments (and NULL propagation keeping the
 * first error), optional NULL arguments that must work, out-of-range dims, refused dtypes and
 * mismatched shapes, each checked for the status code and a message naming the function. */
#include <string.h>

#include "harness.h"

/* ---- checking helpers -------------------------------------------------------------------- */

static bool ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* needle occurs in msg as a whole token: "em_add" does not match inside "em_add_scalar", "3"
 * does not match inside "13" or "-3". */
static bool has_token(const char *msg, const char *needle)
{
    size_t n = strlen(needle);
    bool left = ident_char(needle[0]) || needle[0] == '-';
    bool right = ident_char(needle[n - 1]);
    for (const char *p = strstr(msg, needle); p; p = strstr(p + 1, needle)) {
        if (left && p > msg && (ident_char(p[-1]) || p[-1] == '-')) continue;
        if (right && ident_char(p[n])) continue;
        return true;
    }
    return false;
}

/* The call failed (`failed`), recorded `code`, and its message names fn (and n1, n2). */
static void expect_(bool failed, em_status code, const char *fn, const char *n1, const char *n2,
                    const char *expr, int line)
{
    em_status got = em_last_status();
    const char *msg = em_last_error();
    bool ok = failed && got == code && has_token(msg, fn) && (!n1 || has_token(msg, n1)) &&
              (!n2 || has_token(msg, n2));
    h_check_(ok, __FILE__, line, "%s: expected %s%s naming %s%s%s%s%s, got %s: \"%s\"", expr,
             failed ? "" : "failure with ", em_status_name(code), fn, n1 ? ", " : "", n1 ? n1 : "",
             n2 ? ", " : "", n2 ? n2 : "", em_status_name(got), msg);
    em_clear_error();
}

/* Turns a value-returning call into "it returned" for E_V/N_V on calls without a failure value. */
static bool called(int64_t v)
{
    (void)v;
    return true;
}

static const char *const PENDING = "first pending error";

static void pend_(void)
{
    em_clear_error();
    em_error(EM_ERR_SHAPE, "%s", PENDING);
}

/* A NULL argument given while an earlier error is pending: the call fails, the first error
 * stays. */
static void keep_(bool failed, const char *expr, int line)
{
    bool ok = failed && em_last_status() == EM_ERR_SHAPE && !strcmp(em_last_error(), PENDING);
    h_check_(ok, __FILE__, line,
             "%s with an error pending: expected failure keeping \"%s\", got %s%s: \"%s\"", expr,
             PENDING, failed ? "" : "success, ", em_status_name(em_last_status()), em_last_error());
    em_clear_error();
}

static void ok_(bool succeeded, const char *expr, int line)
{
    h_check_(succeeded && !em_failed(), __FILE__, line, "%s: expected success, got %s: \"%s\"",
             expr, em_status_name(em_last_status()), em_last_error());
    em_clear_error();
}

#define FAILS_T(e) ((e) == NULL)
#define FAILS_S(e) ((e) != EM_OK)

/* The macros stringify the call at the outermost level so failures print it as written. */
#define E_T_(code, fn, n1, n2, e, s) expect_(FAILS_T(e), code, fn, n1, n2, s, __LINE__)
#define E_S_(code, fn, n1, n2, e, s)                                                               \
    do {                                                                                           \
        em_status st_ = (e);                                                                       \
        expect_(st_ == (code), code, fn, n1, n2, s, __LINE__);                                     \
    } while (0)
/* Pointer-returning call must fail with code naming fn (and n1, n2). */
#define E_T(code, fn, n1, n2, e) E_T_(code, fn, n1, n2, e, #e)
/* em_status-returning call must return code naming fn. */
#define E_S(code, fn, n1, n2, e) E_S_(code, fn, n1, n2, e, #e)
/* Any call, with `failed` a boolean expression that is true when it reported failure. */
#define E_V(code, fn, failed) expect_((failed), code, fn, NULL, NULL, #failed, __LINE__)

/* NULL argument: EM_ERR_INVALID_ARG naming fn, then the same call with an error pending keeps
 * the pending error. */
#define N_T(fn, e)                                                                                 \
    do {                                                                                           \
        em_clear_error();                                                                          \
        E_T_(EM_ERR_INVALID_ARG, fn, NULL, NULL, e, #e);                                           \
        pend_();                                                                                   \
        keep_(FAILS_T(e), #e, __LINE__);                                                           \
    } while (0)
#define N_S(fn, e)                                                                                 \
    do {                                                                                           \
        em_clear_error();                                                                          \
        E_S_(EM_ERR_INVALID_ARG, fn, NULL, NULL, e, #e);                                           \
        pend_();                                                                                   \
        keep_(FAILS_S(e), #e, __LINE__);                                                           \
    } while (0)
#define N_V(fn, failed)                                                                            \
    do {                                                                                           \
        em_clear_error();                                                                          \
        expect_((failed), EM_ERR_INVALID_ARG, fn, NULL, NULL, #failed, __LINE__);                  \
        pend_();                                                                                   \
        keep_((failed), #failed, __LINE__);                                                        \
    } while (0)

/* Must succeed (an optional argument given as NULL). */
#define OK_T(e) ok_((e) != NULL, #e, __LINE__)
#define OK_S(e) ok_((e) == EM_OK, #e, __LINE__)

/* Wrong dtype / mismatched shapes. */
#define DT_T(fn, n1, n2, e) E_T_(EM_ERR_DTYPE, fn, n1, n2, e, #e)
#define SH_T(fn, n1, n2, e) E_T_(EM_ERR_SHAPE, fn, n1, n2, e, #e)
#define SH_S(fn, n1, n2, e) E_S_(EM_ERR_SHAPE, fn, n1, n2, e, #e)

/* Out-of-range dim: EM_ERR_INDEX naming fn and the dim value. */
static void dim_(bool failed, const char *fn, int dim, const char *expr, int line)
{
    char b[24];
    snprintf(b, sizeof b, "%d", dim);
    expect_(failed, EM_ERR_INDEX, fn, b, NULL, expr, line);
}

/* Runs e with `bad` set to rank and to -rank-1 (the first dims out of range on each side). */
#define BAD_DIMS_T(rank, fn, e)                                                                    \
    do {                                                                                           \
        const int bads_[2] = {(rank), -(rank)-1};                                                  \
        for (int k_ = 0; k_ < 2; k_++) {                                                           \
            int bad = bads_[k_];                                                                   \
            dim_(FAILS_T(e), fn, bad, #e, __LINE__);                                               \
        }                                                                                          \
    } while (0)
#define BAD_DIMS_S(rank, fn, e)                                                                    \
    do {                                                                                           \
        const int bads_[2] = {(rank), -(rank)-1};                                                  \
        for (int k_ = 0; k_ < 2; k_++) {                                                           \
            int bad = bads_[k_];                                                                   \
            dim_(FAILS_S(e), fn, bad, #e, __LINE__);                                               \
        }                                                                                          \
    } while (0)
#define BAD_DIMS_V(rank, fn, failed)                                                               \
    do {                                                                                           \
        const int bads_[2] = {(rank), -(rank)-1};                                                  \
        for (int k_ = 0; k_ < 2; k_++) {                                                           \
            int bad = bads_[k_];                                                                   \
            dim_((failed), fn, bad, #failed, __LINE__);                                            \
        }                                                                                          \
    } while (0)

/* ---- inputs ------------------------------------------------------------------------------ */

static em_tensor *F(em_shape s) /* f32 values in [-1, 1) */
{
    return em_rand_uniform(s, -1, 1, EM_F32, EM_CPU);
}

static em_tensor *T(em_shape s, em_dtype dt) /* zeros of any dtype */
{
    return em_zeros(s, dt, EM_CPU);
}

#define S23 EM_SHAPE(2, 3)
#define S4  EM_SHAPE(4)

/* ---- metadata, data in/out, printing ----------------------------------------------------- */

static void test_meta_data(void)
{
    em_scope_begin();
    em_tensor *x = F(S23);
    int64_t idx[2] = {0, 0};
    double buf[6];

    /* getters documented with an error: NULL and out-of-range dims */
    N_V("em_tensor_dim", em_tensor_dim(NULL, 0) == -1);
    BAD_DIMS_V(2, "em_tensor_dim", em_tensor_dim(x, bad) == -1);
    N_V("em_tensor_stride", called(em_tensor_stride(NULL, 0)));
    BAD_DIMS_V(2, "em_tensor_stride", called(em_tensor_stride(x, bad)));

    /* NULL-tolerant getters do not crash and leave a pending error alone */
    pend_();
    em_shape s0 = em_tensor_shape(NULL);
    CHECK(s0.rank == 0 && em_tensor_rank(NULL) == 0 && em_tensor_numel(NULL) == 0,
          "shape/rank/numel of NULL");
    CHECK(!em_tensor_is_contiguous(NULL) && !em_tensor_shares_storage(NULL, x) &&
              !em_tensor_shares_storage(x, NULL) && em_tensor_data(NULL) == NULL,
          "contiguous/shares_storage/data of NULL");
    (void)em_tensor_dtype(NULL);
    (void)em_tensor_device(NULL);
    (void)em_tensor_offset(NULL);
    CHECK(em_retain(NULL) == NULL && em_keep(NULL) == NULL, "retain/keep of NULL give NULL");
    em_release(NULL);
    keep_(true, "metadata getters on NULL", __LINE__);

    /* data out */
    N_S("em_to_data", em_to_data(NULL, buf, EM_F64, 6));
    N_S("em_to_data", em_to_data(x, NULL, EM_F64, 6));
    E_S(EM_ERR_DTYPE, "em_to_data", NULL, NULL, em_to_data(x, buf, (em_dtype)42, 6));
    N_V("em_item_f64", isnan(em_item_f64(NULL)));
    E_V(EM_ERR_SHAPE, "em_item_f64", isnan(em_item_f64(x)));
    N_V("em_item_i64", called(em_item_i64(NULL)));
    E_V(EM_ERR_SHAPE, "em_item_i64", called(em_item_i64(x)));
    N_V("em_get_f64", isnan(em_get_f64(NULL, idx)));
    N_V("em_get_f64", isnan(em_get_f64(x, NULL)));
    int64_t far[2] = {0, 3};
    E_V(EM_ERR_INDEX, "em_get_f64", isnan(em_get_f64(x, far)));
    N_T("em_to_device", em_to_device(NULL, EM_CPU));
    char *str = NULL;
    N_V("em_tensor_format", (str = em_tensor_format(NULL, (em_print_options){0})) == NULL);
    em_free(str);

    /* data in */
    float f[2] = {1, 2};
    N_T("em_from_data", em_from_data(NULL, EM_F32, EM_SHAPE(2), EM_F32, EM_CPU));
    N_T("em_from_f32", em_from_f32(NULL, EM_SHAPE(2)));
    N_T("em_from_f64", em_from_f64(NULL, EM_SHAPE(2)));
    N_T("em_from_i64", em_from_i64(NULL, EM_SHAPE(2)));
    N_T("em_from_blob", em_from_blob(NULL, EM_F32, EM_SHAPE(2), NULL, NULL));
    SH_T("em_from_data", NULL, NULL, em_from_data(f, EM_F32, EM_SHAPE(-2), EM_F32, EM_CPU));
    SH_T("em_from_f32", NULL, NULL, em_from_f32(f, EM_SHAPE(2, -1)));
    SH_T("em_from_blob", NULL, NULL, em_from_blob(f, EM_F32, EM_SHAPE(2, -1), NULL, NULL));
    DT_T("em_from_data", NULL, NULL, em_from_data(f, EM_F32, EM_SHAPE(2), (em_dtype)42, EM_CPU));
    DT_T("em_from_blob", NULL, NULL, em_from_blob(f, (em_dtype)42, EM_SHAPE(2), NULL, NULL));
    em_scope_end();
}

/* ---- creation ---------------------------------------------------------------------------- */

static void test_creation(void)
{
    em_scope_begin();
    em_tensor *x = F(S23), *v = F(EM_SHAPE(3));
    em_shape neg = EM_SHAPE(2, -1);
    em_dtype bad_dt = (em_dtype)42;

    /* negative dims and invalid dtypes, each message naming the function called */
    SH_T("em_empty", NULL, NULL, em_empty(neg, EM_F32, EM_CPU));
    SH_T("em_zeros", NULL, NULL, em_zeros(neg, EM_F32, EM_CPU));
    SH_T("em_ones", NULL, NULL, em_ones(neg, EM_F32, EM_CPU));
    SH_T("em_full", NULL, NULL, em_full(neg, 1, EM_F32, EM_CPU));
    SH_T("em_rand", NULL, NULL, em_rand(neg, EM_F32, EM_CPU));
    SH_T("em_randn", NULL, NULL, em_randn(neg, EM_F32, EM_CPU));
    SH_T("em_rand_uniform", NULL, NULL, em_rand_uniform(neg, 0, 1, EM_F32, EM_CPU));
    SH_T("em_rand_normal", NULL, NULL, em_rand_normal(neg, 0, 1, EM_F32, EM_CPU));
    SH_T("em_bernoulli_p", NULL, NULL, em_bernoulli_p(neg, 0.5, EM_F32, EM_CPU));
    SH_T("em_randint", NULL, NULL, em_randint(0, 5, neg, EM_I32, EM_CPU));
    SH_T("em_linspace", NULL, NULL, em_linspace(0, 1, -1, EM_F32, EM_CPU));
    SH_T("em_eye", NULL, NULL, em_eye(-2, 3, EM_F32, EM_CPU));
    DT_T("em_empty", NULL, NULL, em_empty(S23, bad_dt, EM_CPU));
    DT_T("em_zeros", NULL, NULL, em_zeros(S23, bad_dt, EM_CPU));
    DT_T("em_ones", NULL, NULL, em_ones(S23, bad_dt, EM_CPU));
    DT_T("em_full", NULL, NULL, em_full(S23, 1, bad_dt, EM_CPU));
    DT_T("em_scalar", NULL, NULL, em_scalar(1, bad_dt, EM_CPU));
    DT_T("em_arange", NULL, NULL, em_arange(0, 3, 1, bad_dt, EM_CPU));
    /* random floats need a float dtype */
    DT_T("em_rand", "i32", NULL, em_rand(S23, EM_I32, EM_CPU));
    DT_T("em_randn", "i32", NULL, em_randn(S23, EM_I32, EM_CPU));
    DT_T("em_rand_uniform", "i32", NULL, em_rand_uniform(S23, 0, 1, EM_I32, EM_CPU));
    DT_T("em_rand_normal", "i32", NULL, em_rand_normal(S23, 0, 1, EM_I32, EM_CPU));

    /* tensor arguments */
    N_T("em_bernoulli", em_bernoulli(NULL));
    DT_T("em_bernoulli", "i32", NULL, em_bernoulli(T(S23, EM_I32)));
    N_T("em_empty_like", em_empty_like(NULL));
    N_T("em_zeros_like", em_zeros_like(NULL));
    N_T("em_ones_like", em_ones_like(NULL));
    N_T("em_full_like", em_full_like(NULL, 2));
    N_T("em_rand_like", em_rand_like(NULL));
    N_T("em_randn_like", em_randn_like(NULL));
    DT_T("em_rand_like", "i32", NULL, em_rand_like(T(S23, EM_I32)));
    DT_T("em_randn_like", "i32", NULL, em_randn_like(T(S23, EM_I32)));
    N_T("em_one_hot", em_one_hot(NULL, 3));
    DT_T("em_one_hot", "f32", NULL, em_one_hot(x, 3));
    N_T("em_tril", em_tril(NULL, 0));
    N_T("em_triu", em_triu(NULL, 0));
    SH_T("em_tril", "[3]", NULL, em_tril(v, 0));
    SH_T("em_triu", "[3]", NULL, em_triu(v, 0));

    em_tensor *outs[2];
    em_tensor *pair[2] = {v, NULL};
    em_tensor *bad2[2] = {v, x};
    N_S("em_meshgrid", em_meshgrid(NULL, 1, outs));
    N_S("em_meshgrid", em_meshgrid(pair, 1, NULL));
    N_S("em_meshgrid", em_meshgrid(pair, 2, outs));
    SH_S("em_meshgrid", "[2, 3]", NULL, em_meshgrid(bad2, 2, outs));
    em_scope_end();
}

/* ---- views and casts --------------------------------------------------------------------- */

static void test_views(void)
{
    em_scope_begin();
    em_tensor *x = F(S23);
    N_T("em_reshape", em_reshape(NULL, S23));
    SH_T("em_reshape", "[2, 3]", "[4]", em_reshape(x, S4));
    N_T("em_view", em_view(NULL, S23));
    SH_T("em_view", "[2, 3]", "[4]", em_view(x, S4));
    N_T("em_flatten", em_flatten(NULL, 0, -1));
    BAD_DIMS_T(2, "em_flatten", em_flatten(x, bad, -1));
    BAD_DIMS_T(2, "em_flatten", em_flatten(x, 0, bad));
    N_T("em_permute", em_permute(NULL, EM_AXES(1, 0)));
    BAD_DIMS_T(2, "em_permute", em_permute(x, EM_AXES(0, bad)));
    N_T("em_transpose", em_transpose(NULL, 0, 1));
    BAD_DIMS_T(2, "em_transpose", em_transpose(x, bad, 0));
    BAD_DIMS_T(2, "em_transpose", em_transpose(x, 0, bad));
    N_T("em_slice", em_slice(NULL, 0, 0, 1, 1));
    BAD_DIMS_T(2, "em_slice", em_slice(x, bad, 0, 1, 1));
    N_T("em_narrow", em_narrow(NULL, 0, 0, 1));
    BAD_DIMS_T(2, "em_narrow", em_narrow(x, bad, 0, 1));
    N_T("em_select", em_select(NULL, 0, 0));
    BAD_DIMS_T(2, "em_select", em_select(x, bad, 0));
    E_T(EM_ERR_INDEX, "em_select", "5", NULL, em_select(x, 1, 5));
    N_T("em_expand", em_expand(NULL, S23));
    SH_T("em_expand", "[2, 3]", "[4, 3]", em_expand(x, EM_SHAPE(4, 3)));
    N_T("em_squeeze", em_squeeze(NULL, EM_ALL));
    BAD_DIMS_T(2, "em_squeeze", em_squeeze(x, EM_AXES(bad)));
    N_T("em_unsqueeze", em_unsqueeze(NULL, 0));
    /* unsqueeze inserts: dims -3..2 are valid for rank 2 */
    BAD_DIMS_T(3, "em_unsqueeze", em_unsqueeze(x, bad));
    N_T("em_flip", em_flip(NULL, EM_AXES(0)));
    BAD_DIMS_T(2, "em_flip", em_flip(x, EM_AXES(bad)));
    N_T("em_unfold", em_unfold(NULL, 0, 1, 1));
    BAD_DIMS_T(2, "em_unfold", em_unfold(x, bad, 1, 1));
    N_T("em_contiguous", em_contiguous(NULL));
    N_T("em_clone", em_clone(NULL));
    N_T("em_cast", em_cast(NULL, EM_F64));
    DT_T("em_cast", NULL, NULL, em_cast(x, (em_dtype)42));
    em_scope_end();
}

/* ---- unary and activations --------------------------------------------------------------- */

typedef em_tensor *(*unary_fn)(const em_tensor *);
typedef struct {
    const char *name;
    unary_fn fn;
} unary_case;
#define U(f)                                                                                       \
    {                                                                                              \
        "em_" #f, em_##f                                                                           \
    }

static const unary_case UNARY[] = {
    U(neg),         U(abs),          U(sign),       U(exp),         U(exp2),        U(log),
    U(log2),        U(log1p),        U(expm1),      U(sqrt),        U(rsqrt),       U(square),
    U(reciprocal),  U(sin),          U(cos),        U(tan),         U(asin),        U(acos),
    U(atan),        U(sinh),         U(cosh),       U(tanh),        U(asinh),       U(acosh),
    U(atanh),       U(erf),          U(floor),      U(ceil),        U(round),       U(trunc),
    U(isnan),       U(isinf),        U(isfinite),   U(logical_not), U(bitwise_not), U(relu),
    U(relu6),       U(selu),         U(gelu),       U(gelu_tanh),   U(silu),        U(sigmoid),
    U(log_sigmoid), U(hard_sigmoid), U(hard_swish), U(mish),        U(softsign),
};
/* Activations defined for floating-point inputs only. */
static const unary_case FLOAT_ACT[] = {
    U(selu),        U(gelu),         U(gelu_tanh),  U(silu), U(sigmoid),
    U(log_sigmoid), U(hard_sigmoid), U(hard_swish), U(mish), U(softsign),
};
/* Ops that refuse bool (numeric-only). */
static const unary_case NO_BOOL[] = {
    U(neg), U(abs), U(floor), U(ceil), U(round), U(trunc), U(relu), U(relu6),
};
#define COUNT(a) (int)(sizeof(a) / sizeof((a)[0]))

static void test_unary(void)
{
    em_scope_begin();
    em_tensor *f = F(S23), *i = T(S23, EM_I32), *b = T(S23, EM_BOOL);
    char what[64];
    for (int k = 0; k < COUNT(UNARY); k++) {
        snprintf(what, sizeof what, "%s(NULL)", UNARY[k].name);
        em_clear_error();
        expect_(UNARY[k].fn(NULL) == NULL, EM_ERR_INVALID_ARG, UNARY[k].name, NULL, NULL, what,
                __LINE__);
        pend_();
        keep_(UNARY[k].fn(NULL) == NULL, what, __LINE__);
    }
    for (int k = 0; k < COUNT(FLOAT_ACT); k++) {
        snprintf(what, sizeof what, "%s(i32)", FLOAT_ACT[k].name);
        expect_(FLOAT_ACT[k].fn(i) == NULL, EM_ERR_DTYPE, FLOAT_ACT[k].name, "i32", NULL, what,
                __LINE__);
        snprintf(what, sizeof what, "%s(bool)", FLOAT_ACT[k].name);
        expect_(FLOAT_ACT[k].fn(b) == NULL, EM_ERR_DTYPE, FLOAT_ACT[k].name, "bool", NULL, what,
                __LINE__);
    }
    for (int k = 0; k < COUNT(NO_BOOL); k++) {
        snprintf(what, sizeof what, "%s(bool)", NO_BOOL[k].name);
        expect_(NO_BOOL[k].fn(b) == NULL, EM_ERR_DTYPE, NO_BOOL[k].name, "bool", NULL, what,
                __LINE__);
    }
    DT_T("em_bitwise_not", "f32", NULL, em_bitwise_not(f));
    DT_T("em_bitwise_not", "f64", NULL, em_bitwise_not(T(S23, EM_F64)));

    /* activations with parameters */
    N_T("em_leaky_relu", em_leaky_relu(NULL, 0.01));
    N_T("em_elu", em_elu(NULL, 1));
    N_T("em_celu", em_celu(NULL, 1));
    N_T("em_softplus", em_softplus(NULL, 1, 20));
    N_T("em_hardtanh", em_hardtanh(NULL, -1, 1));
    DT_T("em_leaky_relu", "i32", NULL, em_leaky_relu(i, 0.01));
    DT_T("em_elu", "i32", NULL, em_elu(i, 1));
    DT_T("em_celu", "i32", NULL, em_celu(i, 1));
    DT_T("em_softplus", "i32", NULL, em_softplus(i, 1, 20));
    DT_T("em_hardtanh", "bool", NULL, em_hardtanh(b, -1, 1));
    em_scope_end();
}

/* ---- binary ------------------------------------------------------------------------------ */

typedef em_tensor *(*binary_fn)(const em_tensor *, const em_tensor *);
typedef struct {
    const char *name;
    binary_fn fn;
    bool integer; /* integer inputs only (bitwise and shift ops) */
} binary_case;
#define B(f, i)                                                                                    \
    {                                                                                              \
        "em_" #f, em_##f, i                                                                        \
    }

static const binary_case BINARY[] = {
    B(add, false),          B(sub, false),        B(mul, false),         B(div, false),
    B(floor_divide, false), B(remainder, false),  B(fmod, false),        B(pow, false),
    B(atan2, false),        B(hypot, false),      B(minimum, false),     B(maximum, false),
    B(eq, false),           B(ne, false),         B(lt, false),          B(le, false),
    B(gt, false),           B(ge, false),         B(logical_and, false), B(logical_or, false),
    B(logical_xor, false),  B(bitwise_and, true), B(bitwise_or, true),   B(bitwise_xor, true),
    B(shift_left, true),    B(shift_right, true),
};

typedef em_tensor *(*scalar_fn)(const em_tensor *, double);
typedef struct {
    const char *name;
    scalar_fn fn;
} scalar_case;
#define SC(f)                                                                                      \
    {                                                                                              \
        "em_" #f, em_##f                                                                           \
    }

static const scalar_case SCALAR_OPS[] = {
    SC(add_scalar),     SC(sub_scalar),     SC(rsub_scalar), SC(mul_scalar),       SC(div_scalar),
    SC(rdiv_scalar),    SC(pow_scalar),     SC(rpow_scalar), SC(remainder_scalar), SC(fmod_scalar),
    SC(minimum_scalar), SC(maximum_scalar), SC(eq_scalar),   SC(ne_scalar),        SC(lt_scalar),
    SC(le_scalar),      SC(gt_scalar),      SC(ge_scalar),
};

static void test_binary(void)
{
    em_scope_begin();
    em_tensor *f23 = F(S23), *f4 = F(S4), *i23 = T(S23, EM_I32), *i4 = T(S4, EM_I32);
    em_tensor *b23 = T(S23, EM_BOOL), *f64 = T(S23, EM_F64);
    char what[80];
    for (int k = 0; k < COUNT(BINARY); k++) {
        const binary_case *c = &BINARY[k];
        em_tensor *a = c->integer ? i23 : f23, *o = c->integer ? i4 : f4;
        snprintf(what, sizeof what, "%s(NULL, b)", c->name);
        em_clear_error();
        expect_(c->fn(NULL, a) == NULL, EM_ERR_INVALID_ARG, c->name, NULL, NULL, what, __LINE__);
        pend_();
        keep_(c->fn(NULL, a) == NULL, what, __LINE__);
        snprintf(what, sizeof what, "%s(a, NULL)", c->name);
        expect_(c->fn(a, NULL) == NULL, EM_ERR_INVALID_ARG, c->name, NULL, NULL, what, __LINE__);
        pend_();
        keep_(c->fn(a, NULL) == NULL, what, __LINE__);
        snprintf(what, sizeof what, "%s([2, 3], [4])", c->name);
        expect_(c->fn(a, o) == NULL, EM_ERR_SHAPE, c->name, "[2, 3]", "[4]", what, __LINE__);
        snprintf(what, sizeof what, "%s([4], [2, 3])", c->name);
        expect_(c->fn(o, a) == NULL, EM_ERR_SHAPE, c->name, "[4]", "[2, 3]", what, __LINE__);
        if (c->integer) {
            snprintf(what, sizeof what, "%s(f32, f32)", c->name);
            expect_(c->fn(f23, f23) == NULL, EM_ERR_DTYPE, c->name, "f32", NULL, what, __LINE__);
            snprintf(what, sizeof what, "%s(i32, f64)", c->name);
            expect_(c->fn(i23, f64) == NULL, EM_ERR_DTYPE, c->name, "f64", NULL, what, __LINE__);
        }
    }
    /* shifts are integer-only; bool arithmetic that PyTorch refuses */
    DT_T("em_shift_left", "bool", NULL, em_shift_left(b23, b23));
    DT_T("em_shift_right", "bool", NULL, em_shift_right(b23, b23));
    DT_T("em_sub", "bool", NULL, em_sub(b23, b23));
    DT_T("em_floor_divide", "bool", NULL, em_floor_divide(b23, b23));
    DT_T("em_remainder", "bool", NULL, em_remainder(b23, b23));
    DT_T("em_fmod", "bool", NULL, em_fmod(b23, b23));
    DT_T("em_pow", "bool", NULL, em_pow(b23, b23));

    for (int k = 0; k < COUNT(SCALAR_OPS); k++) {
        snprintf(what, sizeof what, "%s(NULL, 2)", SCALAR_OPS[k].name);
        em_clear_error();
        expect_(SCALAR_OPS[k].fn(NULL, 2) == NULL, EM_ERR_INVALID_ARG, SCALAR_OPS[k].name, NULL,
                NULL, what, __LINE__);
        pend_();
        keep_(SCALAR_OPS[k].fn(NULL, 2) == NULL, what, __LINE__);
    }

    /* where: cond is bool, three-way broadcasting */
    N_T("em_where", em_where(NULL, f23, f23));
    N_T("em_where", em_where(b23, NULL, f23));
    N_T("em_where", em_where(b23, f23, NULL));
    DT_T("em_where", "i32", NULL, em_where(i23, f23, f23));
    DT_T("em_where", "f32", NULL, em_where(f23, f23, f23));
    SH_T("em_where", "[2, 3]", "[4]", em_where(b23, f4, f23));
    SH_T("em_where", "[2, 3]", "[4]", em_where(b23, f23, f4));
    SH_T("em_where", "[4]", "[2, 3]", em_where(T(S4, EM_BOOL), f23, f23));

    N_T("em_masked_fill", em_masked_fill(NULL, b23, 0));
    N_T("em_masked_fill", em_masked_fill(f23, NULL, 0));
    DT_T("em_masked_fill", "f32", NULL, em_masked_fill(f23, f23, 0));
    SH_T("em_masked_fill", "[4]", "[2, 3]", em_masked_fill(f23, T(S4, EM_BOOL), 0));
    SH_T("em_masked_fill", "[3, 2, 3]", "[2, 3]",
         em_masked_fill(f23, T(EM_SHAPE(3, 2, 3), EM_BOOL), 0));

    N_T("em_clamp", em_clamp(NULL, 0, 1));
    DT_T("em_clamp", "bool", NULL, em_clamp(b23, 0, 1));
    N_T("em_clamp_tensor", em_clamp_tensor(NULL, f23, f23));
    SH_T("em_clamp_tensor", "[2, 3]", "[4]", em_clamp_tensor(f23, f4, f23));
    SH_T("em_clamp_tensor", "[2, 3]", "[4]", em_clamp_tensor(f23, f23, f4));

    N_T("em_lerp", em_lerp(NULL, f23, 0.5));
    N_T("em_lerp", em_lerp(f23, NULL, 0.5));
    DT_T("em_lerp", "i32", NULL, em_lerp(i23, i23, 0.5));
    SH_T("em_lerp", "[2, 3]", "[4]", em_lerp(f23, f4, 0.5));
    N_T("em_lerp_tensor", em_lerp_tensor(NULL, f23, f23));
    N_T("em_lerp_tensor", em_lerp_tensor(f23, NULL, f23));
    N_T("em_lerp_tensor", em_lerp_tensor(f23, f23, NULL));
    DT_T("em_lerp_tensor", "i32", NULL, em_lerp_tensor(f23, f23, i23));
    SH_T("em_lerp_tensor", "[2, 3]", "[4]", em_lerp_tensor(f23, f23, f4));
    em_scope_end();
}

/* ---- reductions, scans, softmax ---------------------------------------------------------- */

typedef em_tensor *(*reduce_fn)(const em_tensor *, em_axes, bool);
typedef struct {
    const char *name;
    reduce_fn fn;
    bool float_only;
} reduce_case;
#define R(f, fl)                                                                                   \
    {                                                                                              \
        "em_" #f, em_##f, fl                                                                       \
    }

static em_tensor *var1(const em_tensor *x, em_axes d, bool k)
{
    return em_var(x, d, 1, k);
}
static em_tensor *std1(const em_tensor *x, em_axes d, bool k)
{
    return em_std(x, d, 1, k);
}
static em_tensor *norm2(const em_tensor *x, em_axes d, bool k)
{
    return em_norm(x, 2, d, k);
}

static const reduce_case REDUCE[] = {
    R(sum, false),          R(mean, true),          R(prod, false),
    R(max, false),          R(min, false),          R(logsumexp, true),
    R(any, false),          R(all, false),          R(count_nonzero, false),
    {"em_var", var1, true}, {"em_std", std1, true}, {"em_norm", norm2, true},
};

typedef em_tensor *(*along_fn)(const em_tensor *, int);
typedef struct {
    const char *name;
    along_fn fn;
    bool float_only;
} along_case;

static const along_case ALONG[] = {
    {"em_cumsum", em_cumsum, false},
    {"em_cumprod", em_cumprod, false},
    {"em_softmax", em_softmax, true},
    {"em_log_softmax", em_log_softmax, true},
};

static void test_reduce(void)
{
    em_scope_begin();
    em_tensor *x = F(S23), *i = T(S23, EM_I32), *v = NULL, *ix = NULL;
    char what[80];
    for (int k = 0; k < COUNT(REDUCE); k++) {
        const reduce_case *c = &REDUCE[k];
        snprintf(what, sizeof what, "%s(NULL)", c->name);
        em_clear_error();
        expect_(c->fn(NULL, EM_ALL, false) == NULL, EM_ERR_INVALID_ARG, c->name, NULL, NULL, what,
                __LINE__);
        pend_();
        keep_(c->fn(NULL, EM_ALL, false) == NULL, what, __LINE__);
        for (int bad = -3; bad <= 2; bad += 5) {
            snprintf(what, sizeof what, "%s(x, EM_AXES(%d))", c->name, bad);
            dim_(c->fn(x, EM_AXES(bad), false) == NULL, c->name, bad, what, __LINE__);
            snprintf(what, sizeof what, "%s(x, EM_AXES(0, %d))", c->name, bad);
            dim_(c->fn(x, EM_AXES(0, bad), true) == NULL, c->name, bad, what, __LINE__);
        }
        if (c->float_only) {
            snprintf(what, sizeof what, "%s(i32)", c->name);
            expect_(c->fn(i, EM_ALL, false) == NULL, EM_ERR_DTYPE, c->name, "i32", NULL, what,
                    __LINE__);
        }
    }
    for (int k = 0; k < COUNT(ALONG); k++) {
        const along_case *c = &ALONG[k];
        snprintf(what, sizeof what, "%s(NULL, 0)", c->name);
        em_clear_error();
        expect_(c->fn(NULL, 0) == NULL, EM_ERR_INVALID_ARG, c->name, NULL, NULL, what, __LINE__);
        pend_();
        keep_(c->fn(NULL, 0) == NULL, what, __LINE__);
        for (int bad = -3; bad <= 2; bad += 5) {
            snprintf(what, sizeof what, "%s(x, %d)", c->name, bad);
            dim_(c->fn(x, bad) == NULL, c->name, bad, what, __LINE__);
        }
        if (c->float_only) {
            snprintf(what, sizeof what, "%s(i32, 0)", c->name);
            expect_(c->fn(i, 0) == NULL, EM_ERR_DTYPE, c->name, "i32", NULL, what, __LINE__);
        }
    }

    /* argmax/argmin: dim in [-rank, rank) or, per the header, dim < -rank = flattened */
    N_T("em_argmax", em_argmax(NULL, 0, false));
    N_T("em_argmin", em_argmin(NULL, 0, false));
    E_T(EM_ERR_INDEX, "em_argmax", "2", NULL, em_argmax(x, 2, false));
    E_T(EM_ERR_INDEX, "em_argmin", "2", NULL, em_argmin(x, 2, false));
    E_T(EM_ERR_INDEX, "em_argmax", "-3", NULL, em_argmax(x, -3, false));
    E_T(EM_ERR_INDEX, "em_argmin", "-3", NULL, em_argmin(x, -3, false));
    OK_T(em_argmax(x, EM_FLAT, false));

    N_S("em_max_dim", em_max_dim(NULL, 0, false, &v, &ix));
    N_S("em_min_dim", em_min_dim(NULL, 0, false, &v, &ix));
    BAD_DIMS_S(2, "em_max_dim", em_max_dim(x, bad, false, &v, &ix));
    BAD_DIMS_S(2, "em_min_dim", em_min_dim(x, bad, false, &v, &ix));

    N_S("em_cummax", em_cummax(NULL, 0, &v, &ix));
    N_S("em_cummin", em_cummin(NULL, 0, &v, &ix));
    BAD_DIMS_S(2, "em_cummax", em_cummax(x, bad, &v, &ix));
    BAD_DIMS_S(2, "em_cummin", em_cummin(x, bad, &v, &ix));
    /* indices are optional */
    OK_S(em_cummax(x, 1, &v, NULL));
    OK_S(em_cummin(x, 1, &v, NULL));
    em_scope_end();
}

/* ---- linear algebra ---------------------------------------------------------------------- */

static void test_linalg(void)
{
    em_scope_begin();
    em_tensor *m23 = F(S23), *m45 = F(EM_SHAPE(4, 5)), *v3 = F(EM_SHAPE(3)), *v4 = F(S4);
    em_tensor *d23 = T(S23, EM_F64), *d3 = T(EM_SHAPE(3), EM_F64);
    em_tensor *b23 = T(S23, EM_BOOL), *b32 = T(EM_SHAPE(3, 2), EM_BOOL);
    N_T("em_matmul", em_matmul(NULL, m23));
    N_T("em_matmul", em_matmul(m23, NULL));
    DT_T("em_matmul", "f32", "f64", em_matmul(m23, T(EM_SHAPE(3, 2), EM_F64)));
    DT_T("em_matmul", "bool", NULL, em_matmul(b23, b32));
    SH_T("em_matmul", "[2, 3]", "[4, 5]", em_matmul(m23, m45));
    SH_T("em_matmul", "[2, 3]", "[4]", em_matmul(m23, v4));
    SH_T("em_matmul", "[2, 2, 3]", "[3, 3, 4]",
         em_matmul(F(EM_SHAPE(2, 2, 3)), F(EM_SHAPE(3, 3, 4))));
    N_T("em_dot", em_dot(NULL, v3));
    N_T("em_dot", em_dot(v3, NULL));
    DT_T("em_dot", "f32", "f64", em_dot(v3, d3));
    SH_T("em_dot", "3", "4", em_dot(v3, v4));
    SH_T("em_dot", "[2, 3]", "[3]", em_dot(m23, v3));
    N_T("em_outer", em_outer(NULL, v3));
    N_T("em_outer", em_outer(v3, NULL));
    DT_T("em_outer", "f32", "f64", em_outer(v3, d3));
    SH_T("em_outer", "[2, 3]", "[3]", em_outer(m23, v3));
    N_T("em_matvec", em_matvec(NULL, v3));
    N_T("em_matvec", em_matvec(m23, NULL));
    DT_T("em_matvec", "f64", "f32", em_matvec(d23, v3));
    SH_T("em_matvec", "[2, 3]", "[4]", em_matvec(m23, v4));
    SH_T("em_matvec", "[3]", "[3]", em_matvec(v3, v3));
    em_scope_end();
}

/* ---- indexing ---------------------------------------------------------------------------- */

static void test_index(void)
{
    em_scope_begin();
    em_tensor *x = F(S23), *idx = T(S23, EM_I64), *fidx = F(S23), *src = F(S23);
    em_tensor *i2 = T(EM_SHAPE(2), EM_I64), *f2 = F(EM_SHAPE(2)), *b23 = T(S23, EM_BOOL);
    N_T("em_gather", em_gather(NULL, 0, idx));
    N_T("em_gather", em_gather(x, 0, NULL));
    BAD_DIMS_T(2, "em_gather", em_gather(x, bad, idx));
    DT_T("em_gather", "f32", NULL, em_gather(x, 0, fidx));
    SH_T("em_gather", "[2]", "[2, 3]", em_gather(x, 0, i2));
    SH_T("em_gather", "[3, 3]", "[2, 3]", em_gather(x, 1, T(EM_SHAPE(3, 3), EM_I64)));

    N_T("em_scatter", em_scatter(NULL, 0, idx, src, EM_SCATTER_ASSIGN));
    N_T("em_scatter", em_scatter(x, 0, NULL, src, EM_SCATTER_ASSIGN));
    N_T("em_scatter", em_scatter(x, 0, idx, NULL, EM_SCATTER_ASSIGN));
    BAD_DIMS_T(2, "em_scatter", em_scatter(x, bad, idx, src, EM_SCATTER_ADD));
    DT_T("em_scatter", "f32", NULL, em_scatter(x, 0, fidx, src, EM_SCATTER_ASSIGN));
    DT_T("em_scatter", "f64", "f32", em_scatter(x, 0, idx, T(S23, EM_F64), EM_SCATTER_ASSIGN));
    SH_T("em_scatter", "[2, 3]", "[2, 2]",
         em_scatter(x, 0, idx, F(EM_SHAPE(2, 2)), EM_SCATTER_ASSIGN));
    SH_T("em_scatter", "[2]", "[2, 3]", em_scatter(x, 0, i2, src, EM_SCATTER_ASSIGN));

    N_T("em_index_select", em_index_select(NULL, 0, i2));
    N_T("em_index_select", em_index_select(x, 0, NULL));
    BAD_DIMS_T(2, "em_index_select", em_index_select(x, bad, i2));
    DT_T("em_index_select", "f32", NULL, em_index_select(x, 0, f2));
    SH_T("em_index_select", "[2, 3]", NULL, em_index_select(x, 0, idx));

    N_T("em_index_add", em_index_add(NULL, 0, i2, src, 1));
    N_T("em_index_add", em_index_add(x, 0, NULL, src, 1));
    N_T("em_index_add", em_index_add(x, 0, i2, NULL, 1));
    BAD_DIMS_T(2, "em_index_add", em_index_add(x, bad, i2, src, 1));
    DT_T("em_index_add", "f32", NULL, em_index_add(x, 0, f2, src, 1));
    DT_T("em_index_add", "f64", "f32", em_index_add(x, 0, i2, T(S23, EM_F64), 1));
    SH_T("em_index_add", "[3, 3]", "[2, 3]", em_index_add(x, 0, i2, F(EM_SHAPE(3, 3)), 1));

    N_T("em_masked_select", em_masked_select(NULL, b23));
    N_T("em_masked_select", em_masked_select(x, NULL));
    DT_T("em_masked_select", "i32", NULL, em_masked_select(x, T(S23, EM_I32)));
    SH_T("em_masked_select", "[2, 3]", "[4]", em_masked_select(x, T(S4, EM_BOOL)));

    N_T("em_nonzero", em_nonzero(NULL));

    int64_t st[2] = {0, 0}, en[2] = {2, 2}, sp[2] = {1, 1};
    N_T("em_slice_assign", em_slice_assign(NULL, st, en, sp, src));
    N_T("em_slice_assign", em_slice_assign(x, st, en, sp, NULL));
    SH_T("em_slice_assign", "[2, 3]", "[2, 2]", em_slice_assign(x, st, en, sp, src));

    N_T("em_embedding", em_embedding(NULL, i2));
    N_T("em_embedding", em_embedding(x, NULL));
    DT_T("em_embedding", "f32", NULL, em_embedding(x, f2));
    DT_T("em_embedding", "i32", NULL, em_embedding(T(S23, EM_I32), i2));
    SH_T("em_embedding", "[2, 3, 4]", NULL, em_embedding(F(EM_SHAPE(2, 3, 4)), i2));
    em_scope_end();
}

/* ---- combine and split ------------------------------------------------------------------- */

static void test_combine(void)
{
    em_scope_begin();
    em_tensor *x = F(S23), *y = F(EM_SHAPE(2, 4)), *z = F(EM_SHAPE(3, 2));
    em_tensor *xx[2] = {x, x}, *xn[2] = {x, NULL}, *xy[2] = {x, y}, *xz[2] = {x, z};
    em_tensor *out[8];
    int n_out = 0;
    int64_t sizes[2] = {1, 1}, shift[1] = {1};

    N_T("em_cat", em_cat(NULL, 2, 0));
    N_T("em_cat", em_cat(xn, 2, 0));
    BAD_DIMS_T(2, "em_cat", em_cat(xx, 2, bad));
    SH_T("em_cat", "[2, 4]", "[2, 3]", em_cat(xy, 2, 0));
    OK_T(em_cat(xy, 2, 1));
    N_T("em_stack", em_stack(NULL, 2, 0));
    N_T("em_stack", em_stack(xn, 2, 0));
    /* stack inserts a dim: -3..2 are valid for rank-2 inputs */
    BAD_DIMS_T(3, "em_stack", em_stack(xx, 2, bad));
    SH_T("em_stack", "[3, 2]", "[2, 3]", em_stack(xz, 2, 0));

    N_S("em_split", em_split(NULL, 1, 0, out, 8, &n_out));
    N_S("em_split", em_split(x, 1, 0, NULL, 8, &n_out));
    BAD_DIMS_S(2, "em_split", em_split(x, 1, bad, out, 8, &n_out));
    N_S("em_split_sizes", em_split_sizes(NULL, sizes, 2, 0, out));
    N_S("em_split_sizes", em_split_sizes(x, NULL, 2, 0, out));
    N_S("em_split_sizes", em_split_sizes(x, sizes, 2, 0, NULL));
    BAD_DIMS_S(2, "em_split_sizes", em_split_sizes(x, sizes, 2, bad, out));
    SH_S("em_split_sizes", NULL, NULL, em_split_sizes(x, sizes, 2, 1, out));
    N_S("em_chunk", em_chunk(NULL, 2, 0, out, &n_out));
    N_S("em_chunk", em_chunk(x, 2, 0, NULL, &n_out));
    BAD_DIMS_S(2, "em_chunk", em_chunk(x, 2, bad, out, &n_out));

    N_T("em_repeat", em_repeat(NULL, EM_SHAPE(1, 1)));
    SH_T("em_repeat", NULL, NULL, em_repeat(x, EM_SHAPE(2)));
    N_T("em_tile", em_tile(NULL, EM_SHAPE(1, 1)));

    int dims1[1] = {0};
    N_T("em_roll", em_roll(NULL, shift, dims1, 1));
    N_T("em_roll", em_roll(x, NULL, dims1, 1));
    N_T("em_roll", em_roll(x, shift, NULL, 1));
    BAD_DIMS_T(2, "em_roll", em_roll(x, shift, (int[1]){bad}, 1));

    int64_t pads[2] = {1, 1};
    N_T("em_pad", em_pad(NULL, pads, 1, EM_PAD_CONSTANT, 0));
    N_T("em_pad", em_pad(x, NULL, 1, EM_PAD_CONSTANT, 0));
    int64_t big[2] = {3, 0};
    SH_T("em_pad", NULL, NULL, em_pad(x, big, 1, EM_PAD_REFLECT, 0));
    em_scope_end();
}

/* ---- ordering and signal ----------------------------------------------------------------- */

static void test_order_signal(void)
{
    em_scope_begin();
    em_tensor *x = F(S23), *v = NULL, *ix = NULL;
    N_S("em_sort", em_sort(NULL, 0, false, &v, &ix));
    BAD_DIMS_S(2, "em_sort", em_sort(x, bad, false, &v, &ix));
    /* either output pointer may be NULL */
    OK_S(em_sort(x, 1, false, &v, NULL));
    OK_S(em_sort(x, 1, true, NULL, &ix));
    N_T("em_argsort", em_argsort(NULL, 0, false));
    BAD_DIMS_T(2, "em_argsort", em_argsort(x, bad, false));
    N_S("em_topk", em_topk(NULL, 1, 0, true, &v, &ix));
    BAD_DIMS_S(2, "em_topk", em_topk(x, 1, bad, true, &v, &ix));
    E_S(EM_ERR_INDEX, "em_topk", "4", NULL, em_topk(x, 4, 1, true, &v, &ix));
    N_S("em_median", em_median(NULL, 0, false, &v, &ix));
    BAD_DIMS_S(2, "em_median", em_median(x, bad, false, &v, &ix));
    /* the median's indices are optional */
    OK_S(em_median(x, 1, false, &v, NULL));
    OK_S(em_median(x, EM_FLAT, false, &v, NULL));

    em_tensor *c = F(EM_SHAPE(3, 5, 2)); /* complex [3, 5] */
    N_T("em_rfft", em_rfft(NULL, 0, 0));
    BAD_DIMS_T(2, "em_rfft", em_rfft(x, bad, 0));
    DT_T("em_rfft", "i32", NULL, em_rfft(T(S23, EM_I32), 1, 0));
    N_T("em_irfft", em_irfft(NULL, 0, 0));
    BAD_DIMS_T(2, "em_irfft", em_irfft(c, bad, 0));
    DT_T("em_irfft", "i32", NULL, em_irfft(T(EM_SHAPE(3, 5, 2), EM_I32), 1, 0));
    SH_T("em_irfft", "[2, 3]", NULL, em_irfft(x, 1, 0));
    em_scope_end();
}

/* ---- convolution ------------------------------------------------------------------------- */

typedef em_tensor *(*conv_fn)(const em_tensor *, const em_tensor *, const em_tensor *,
                              em_conv_opts);

static void conv_case(const char *fn, conv_fn conv, em_shape xs, em_shape ws, em_shape wbad,
                      int64_t c_out)
{
    em_scope_begin();
    em_conv_opts o = {0};
    em_tensor *x = F(xs), *w = F(ws), *bias = F(EM_SHAPE(c_out));
    char what[96];
    snprintf(what, sizeof what, "%s(NULL, w, bias)", fn);
    em_clear_error();
    expect_(conv(NULL, w, bias, o) == NULL, EM_ERR_INVALID_ARG, fn, NULL, NULL, what, __LINE__);
    pend_();
    keep_(conv(NULL, w, bias, o) == NULL, what, __LINE__);
    snprintf(what, sizeof what, "%s(x, NULL, bias)", fn);
    expect_(conv(x, NULL, bias, o) == NULL, EM_ERR_INVALID_ARG, fn, NULL, NULL, what, __LINE__);
    pend_();
    keep_(conv(x, NULL, bias, o) == NULL, what, __LINE__);
    snprintf(what, sizeof what, "%s(x, w, NULL) (bias is optional)", fn);
    ok_(conv(x, w, NULL, o) != NULL, what, __LINE__);
    snprintf(what, sizeof what, "%s(i32 x)", fn);
    expect_(conv(T(xs, EM_I32), T(ws, EM_I32), NULL, o) == NULL, EM_ERR_DTYPE, fn, "i32", NULL,
            what, __LINE__);
    snprintf(what, sizeof what, "%s(f32 x, f64 w)", fn);
    expect_(conv(x, T(ws, EM_F64), NULL, o) == NULL, EM_ERR_DTYPE, fn, "f64", "f32", what,
            __LINE__);
    snprintf(what, sizeof what, "%s(f32 x, f64 bias)", fn);
    expect_(conv(x, w, T(EM_SHAPE(c_out), EM_F64), o) == NULL, EM_ERR_DTYPE, fn, "f64", "f32", what,
            __LINE__);
    snprintf(what, sizeof what, "%s(weight channels mismatch)", fn);
    expect_(conv(x, F(wbad), NULL, o) == NULL, EM_ERR_SHAPE, fn, NULL, NULL, what, __LINE__);
    snprintf(what, sizeof what, "%s(bias [%lld])", fn, (long long)(c_out + 1));
    char bs[32];
    snprintf(bs, sizeof bs, "[%lld]", (long long)(c_out + 1));
    expect_(conv(x, w, F(EM_SHAPE(c_out + 1)), o) == NULL, EM_ERR_SHAPE, fn, bs, NULL, what,
            __LINE__);
    snprintf(what, sizeof what, "%s(input of rank 1)", fn);
    expect_(conv(F(EM_SHAPE(5)), w, NULL, o) == NULL, EM_ERR_SHAPE, fn, "[5]", NULL, what,
            __LINE__);
    em_scope_end();
}

static void test_conv(void)
{
    conv_case("em_conv1d", em_conv1d, EM_SHAPE(1, 3, 8), EM_SHAPE(4, 3, 3), EM_SHAPE(4, 2, 3), 4);
    conv_case("em_conv2d", em_conv2d, EM_SHAPE(1, 3, 5, 5), EM_SHAPE(4, 3, 3, 3),
              EM_SHAPE(4, 2, 3, 3), 4);
    conv_case("em_conv3d", em_conv3d, EM_SHAPE(1, 2, 4, 4, 4), EM_SHAPE(3, 2, 2, 2, 2),
              EM_SHAPE(3, 4, 2, 2, 2), 3);
    /* transposed: w [Cin, Cout/groups, k...] */
    conv_case("em_conv_transpose1d", em_conv_transpose1d, EM_SHAPE(1, 3, 5), EM_SHAPE(3, 4, 3),
              EM_SHAPE(2, 4, 3), 4);
    conv_case("em_conv_transpose2d", em_conv_transpose2d, EM_SHAPE(1, 3, 4, 4),
              EM_SHAPE(3, 4, 2, 2), EM_SHAPE(2, 4, 2, 2), 4);
    conv_case("em_conv_transpose3d", em_conv_transpose3d, EM_SHAPE(1, 2, 3, 3, 3),
              EM_SHAPE(2, 3, 2, 2, 2), EM_SHAPE(5, 3, 2, 2, 2), 3);

    em_scope_begin();
    int64_t k[2] = {2, 2}, one[2] = {1, 1}, zero[2] = {0, 0}, osz[2] = {3, 3};
    N_T("em_im2col", em_im2col(NULL, k, one, zero, one));
    N_T("em_im2col", em_im2col(F(EM_SHAPE(1, 2, 3, 3)), NULL, one, zero, one));
    DT_T("em_im2col", "i32", NULL, em_im2col(T(EM_SHAPE(1, 2, 3, 3), EM_I32), k, one, zero, one));
    SH_T("em_im2col", "[3, 3]", NULL, em_im2col(F(EM_SHAPE(3, 3)), k, one, zero, one));
    N_T("em_col2im", em_col2im(NULL, osz, k, one, zero, one));
    N_T("em_col2im", em_col2im(F(EM_SHAPE(1, 8, 4)), NULL, k, one, zero, one));
    N_T("em_col2im", em_col2im(F(EM_SHAPE(1, 8, 4)), osz, NULL, one, zero, one));
    DT_T("em_col2im", "i32", NULL, em_col2im(T(EM_SHAPE(1, 8, 4), EM_I32), osz, k, one, zero, one));
    SH_T("em_col2im", "[1, 8, 5]", NULL, em_col2im(F(EM_SHAPE(1, 8, 5)), osz, k, one, zero, one));
    em_scope_end();
}

/* ---- pooling, resizing ------------------------------------------------------------------- */

static void test_pool(void)
{
    em_scope_begin();
    em_pool_opts o = {.kernel = {2, 2, 2}};
    em_tensor *x1 = F(EM_SHAPE(1, 2, 6)), *x2 = F(EM_SHAPE(1, 2, 4, 4));
    em_tensor *x3 = F(EM_SHAPE(1, 2, 4, 4, 4)), *ix = NULL;
    em_tensor *r2 = F(EM_SHAPE(4, 4));

    N_T("em_max_pool1d", em_max_pool1d(NULL, o, &ix));
    N_T("em_max_pool2d", em_max_pool2d(NULL, o, &ix));
    N_T("em_max_pool3d", em_max_pool3d(NULL, o, &ix));
    /* indices are optional */
    OK_T(em_max_pool1d(x1, o, NULL));
    OK_T(em_max_pool2d(x2, o, NULL));
    OK_T(em_max_pool3d(x3, o, NULL));
    DT_T("em_max_pool1d", "i32", NULL, em_max_pool1d(T(EM_SHAPE(1, 2, 6), EM_I32), o, &ix));
    DT_T("em_max_pool2d", "i32", NULL, em_max_pool2d(T(EM_SHAPE(1, 2, 4, 4), EM_I32), o, &ix));
    DT_T("em_max_pool3d", "i32", NULL, em_max_pool3d(T(EM_SHAPE(1, 2, 4, 4, 4), EM_I32), o, &ix));
    SH_T("em_max_pool2d", "[6]", NULL, em_max_pool2d(F(EM_SHAPE(6)), o, &ix));
    SH_T("em_max_pool3d", "[4, 4]", NULL, em_max_pool3d(r2, o, &ix));

    N_T("em_avg_pool1d", em_avg_pool1d(NULL, o));
    N_T("em_avg_pool2d", em_avg_pool2d(NULL, o));
    N_T("em_avg_pool3d", em_avg_pool3d(NULL, o));
    DT_T("em_avg_pool1d", "i32", NULL, em_avg_pool1d(T(EM_SHAPE(1, 2, 6), EM_I32), o));
    DT_T("em_avg_pool2d", "i32", NULL, em_avg_pool2d(T(EM_SHAPE(1, 2, 4, 4), EM_I32), o));
    DT_T("em_avg_pool3d", "bool", NULL, em_avg_pool3d(T(EM_SHAPE(1, 2, 4, 4, 4), EM_BOOL), o));
    SH_T("em_avg_pool1d", "[6]", NULL, em_avg_pool1d(F(EM_SHAPE(6)), o));
    SH_T("em_avg_pool3d", "[4, 4]", NULL, em_avg_pool3d(r2, o));

    N_T("em_adaptive_avg_pool1d", em_adaptive_avg_pool1d(NULL, 2));
    N_T("em_adaptive_avg_pool2d", em_adaptive_avg_pool2d(NULL, 2, 2));
    N_T("em_adaptive_max_pool1d", em_adaptive_max_pool1d(NULL, 2, &ix));
    N_T("em_adaptive_max_pool2d", em_adaptive_max_pool2d(NULL, 2, 2, &ix));
    OK_T(em_adaptive_max_pool1d(x1, 2, NULL));
    OK_T(em_adaptive_max_pool2d(x2, 2, 2, NULL));
    DT_T("em_adaptive_avg_pool1d", "i32", NULL,
         em_adaptive_avg_pool1d(T(EM_SHAPE(1, 2, 6), EM_I32), 2));
    DT_T("em_adaptive_avg_pool2d", "i32", NULL,
         em_adaptive_avg_pool2d(T(EM_SHAPE(1, 2, 4, 4), EM_I32), 2, 2));
    DT_T("em_adaptive_max_pool1d", "i32", NULL,
         em_adaptive_max_pool1d(T(EM_SHAPE(1, 2, 6), EM_I32), 2, &ix));
    DT_T("em_adaptive_max_pool2d", "i32", NULL,
         em_adaptive_max_pool2d(T(EM_SHAPE(1, 2, 4, 4), EM_I32), 2, 2, &ix));
    SH_T("em_adaptive_avg_pool2d", "[6]", NULL, em_adaptive_avg_pool2d(F(EM_SHAPE(6)), 2, 2));

    N_T("em_interpolate", em_interpolate(NULL, EM_SHAPE(8, 8), EM_INTERP_NEAREST, false));
    DT_T("em_interpolate", "i32", NULL,
         em_interpolate(T(EM_SHAPE(1, 2, 4, 4), EM_I32), EM_SHAPE(8, 8), EM_INTERP_NEAREST, false));
    SH_T("em_interpolate", "[1, 2, 6]", "[8, 8]",
         em_interpolate(x1, EM_SHAPE(8, 8), EM_INTERP_BILINEAR, false));

    N_T("em_pixel_shuffle", em_pixel_shuffle(NULL, 2));
    N_T("em_pixel_unshuffle", em_pixel_unshuffle(NULL, 2));
    SH_T("em_pixel_shuffle", "[4, 4]", NULL, em_pixel_shuffle(r2, 2));
    SH_T("em_pixel_unshuffle", "[4, 4]", NULL, em_pixel_unshuffle(r2, 2));
    em_scope_end();
}

/* ---- normalisation, attention, dropout --------------------------------------------------- */

static void test_norm(void)
{
    em_scope_begin();
    em_tensor *x = F(EM_SHAPE(2, 4, 3)), *xi = T(EM_SHAPE(2, 4, 3), EM_I32);
    em_tensor *w3 = F(EM_SHAPE(3)), *w4 = F(S4), *d3 = T(EM_SHAPE(3), EM_F64);
    em_tensor *d4 = T(S4, EM_F64);

    N_T("em_layer_norm", em_layer_norm(NULL, 1, w3, w3, 1e-5));
    OK_T(em_layer_norm(x, 1, NULL, NULL, 1e-5));
    OK_T(em_layer_norm(x, 1, w3, NULL, 1e-5));
    OK_T(em_layer_norm(x, 1, NULL, w3, 1e-5));
    DT_T("em_layer_norm", "i32", NULL, em_layer_norm(xi, 1, NULL, NULL, 1e-5));
    DT_T("em_layer_norm", "f64", "f32", em_layer_norm(x, 1, d3, NULL, 1e-5));
    SH_T("em_layer_norm", "[4]", "[3]", em_layer_norm(x, 1, w4, NULL, 1e-5));
    SH_T("em_layer_norm", "[4]", "[3]", em_layer_norm(x, 1, NULL, w4, 1e-5));

    N_T("em_rms_norm", em_rms_norm(NULL, 1, w3, 1e-5));
    OK_T(em_rms_norm(x, 1, NULL, 1e-5));
    DT_T("em_rms_norm", "i32", NULL, em_rms_norm(xi, 1, NULL, 1e-5));
    DT_T("em_rms_norm", "f64", "f32", em_rms_norm(x, 1, d3, 1e-5));
    SH_T("em_rms_norm", "[4]", "[3]", em_rms_norm(x, 1, w4, 1e-5));

    N_T("em_group_norm", em_group_norm(NULL, 2, w4, w4, 1e-5));
    OK_T(em_group_norm(x, 2, NULL, NULL, 1e-5));
    DT_T("em_group_norm", "i32", NULL, em_group_norm(xi, 2, NULL, NULL, 1e-5));
    DT_T("em_group_norm", "f64", "f32", em_group_norm(x, 2, d4, NULL, 1e-5));
    SH_T("em_group_norm", "[3]", "[4]", em_group_norm(x, 2, w3, NULL, 1e-5));
    SH_T("em_group_norm", "[3]", "[4]", em_group_norm(x, 2, NULL, w3, 1e-5));

    N_T("em_batch_norm", em_batch_norm(NULL, w4, w4, w4, w4, 1e-5));
    N_T("em_batch_norm", em_batch_norm(x, NULL, w4, w4, w4, 1e-5));
    N_T("em_batch_norm", em_batch_norm(x, w4, NULL, w4, w4, 1e-5));
    OK_T(em_batch_norm(x, w4, em_abs(w4), NULL, NULL, 1e-5));
    DT_T("em_batch_norm", "i32", NULL, em_batch_norm(xi, w4, w4, NULL, NULL, 1e-5));
    DT_T("em_batch_norm", "f64", "f32", em_batch_norm(x, d4, w4, NULL, NULL, 1e-5));
    SH_T("em_batch_norm", "[3]", "[4]", em_batch_norm(x, w3, w4, NULL, NULL, 1e-5));
    SH_T("em_batch_norm", "[3]", "[4]", em_batch_norm(x, w4, w3, NULL, NULL, 1e-5));
    SH_T("em_batch_norm", "[3]", "[4]", em_batch_norm(x, w4, w4, w3, NULL, 1e-5));
    SH_T("em_batch_norm", "[3]", "[4]", em_batch_norm(x, w4, w4, NULL, w3, 1e-5));

    /* q [2, 4, 3], k [2, 5, 3], v [2, 5, 6] */
    em_sdpa_opts so = {0};
    em_tensor *q = x, *k = F(EM_SHAPE(2, 5, 3)), *v = F(EM_SHAPE(2, 5, 6));
    N_T("em_sdpa", em_sdpa(NULL, k, v, NULL, so));
    N_T("em_sdpa", em_sdpa(q, NULL, v, NULL, so));
    N_T("em_sdpa", em_sdpa(q, k, NULL, NULL, so));
    OK_T(em_sdpa(q, k, v, NULL, so));
    OK_T(em_sdpa(q, k, v, T(EM_SHAPE(4, 5), EM_BOOL), so));
    DT_T("em_sdpa", "i32", NULL,
         em_sdpa(xi, T(EM_SHAPE(2, 5, 3), EM_I32), T(EM_SHAPE(2, 5, 6), EM_I32), NULL, so));
    DT_T("em_sdpa", "f64", "f32", em_sdpa(q, T(EM_SHAPE(2, 5, 3), EM_F64), v, NULL, so));
    DT_T("em_sdpa", "i32", NULL, em_sdpa(q, k, v, T(EM_SHAPE(4, 5), EM_I32), so));
    SH_T("em_sdpa", "[2, 4, 3]", "[2, 5, 4]", em_sdpa(q, F(EM_SHAPE(2, 5, 4)), v, NULL, so));
    SH_T("em_sdpa", "[2, 6, 6]", NULL, em_sdpa(q, k, F(EM_SHAPE(2, 6, 6)), NULL, so));
    SH_T("em_sdpa", "[3, 5]", "[2, 4, 5]", em_sdpa(q, k, v, T(EM_SHAPE(3, 5), EM_BOOL), so));
    SH_T("em_sdpa", "[2, 4, 3]", "[3, 5, 3]",
         em_sdpa(q, F(EM_SHAPE(3, 5, 3)), F(EM_SHAPE(3, 5, 6)), NULL, so));

    N_T("em_dropout", em_dropout(NULL, 0.5, true));
    DT_T("em_dropout", "i32", NULL, em_dropout(xi, 0.5, true));
    em_scope_end();
}

int main(void)
{
    h_init();
    test_meta_data();
    test_creation();
    test_views();
    test_unary();
    test_binary();
    test_reduce();
    test_linalg();
    test_index();
    test_combine();
    test_order_signal();
    test_conv();
    test_pool();
    test_norm();
    CHECK(!em_failed(), "no error left pending: %s", em_last_error());
    return h_finish();
}
