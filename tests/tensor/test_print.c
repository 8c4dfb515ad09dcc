/* Printed tensors, compared as exact strings: one float notation per tensor chosen as PyTorch
 * chooses it (fixed-point unless the values span more than three decades, pass 1e8 or go below
 * 1e-4 when not all integral), shortest digits that read back in the dtype, NaN and infinities,
 * negative zero, integers, bools, f16 and bf16; printing NULL keeps a pending error. */
#include <string.h>

#include "harness.h"

/* The data block of t's printout: the text between "data:\n" and ",\n  shape:". */
static char *data_of(const em_tensor *t, em_print_options o)
{
    char *s = em_tensor_format(t, o);
    if (!s) return NULL;
    char *a = strstr(s, "data:\n"), *b = strstr(s, ",\n  shape:");
    if (!a || !b || b < a) {
        em_free(s);
        return NULL;
    }
    a += 6;
    memmove(s, a, (size_t)(b - a));
    s[b - a] = '\0';
    return s;
}

static void expect_(const em_tensor *t, em_print_options o, const char *want, int line)
{
    char *got = data_of(t, o);
    h_check_(got && !strcmp(got, want), __FILE__, line, "printed\n%s\nexpected\n%s",
             got ? got : em_last_error(), want);
    em_free(got);
    em_clear_error();
}

#define EXPECT(t, want)      expect_((t), (em_print_options){0}, (want), __LINE__)
#define EXPECT_O(t, o, want) expect_((t), (o), (want), __LINE__)

static em_tensor *f32(const float *v, int64_t n)
{
    return em_from_f32(v, EM_SHAPE(n));
}

static em_tensor *f64(const double *v, int64_t n)
{
    return em_from_f64(v, EM_SHAPE(n));
}

static em_tensor *as(const double *v, int64_t n, em_dtype dt)
{
    return em_from_data(v, EM_F64, EM_SHAPE(n), dt, EM_CPU);
}

static void test_floats(void)
{
    em_scope_begin();
    /* integral values: fixed-point with ".0", never "2e+01" */
    EXPECT(f32((float[]){14, 20, 100, 120}, 4), "[14.0, 20.0, 100.0, 120.0]");
    EXPECT(f64((double[]){-3, 0, 1000}, 3), "[-3.0, 0.0, 1000.0]");
    /* fractions in range: the shortest digits that read back */
    EXPECT(f32((float[]){0.1f, 2.5f, -7.25f}, 3), "[0.1, 2.5, -7.25]");
    EXPECT(f32((float[]){0.12345679f, 1}, 2), "[0.12345679, 1.0]");
    EXPECT(f64((double[]){0.1 + 0.2}, 1), "[0.30000000000000004]");
    EXPECT(f32((float[]){2e-4f, 0.05f}, 2), "[0.0002, 0.05]");
    EXPECT(f32((float[]){1e-4f, 0.05f}, 2), "[1.0e-04, 5.0e-02]"); /* 1e-4f is below 1e-4 */
    /* more than three decades apart: every element scientific */
    EXPECT(f32((float[]){0.5f, 1234.5f}, 2), "[5.0e-01, 1.2345e+03]");
    EXPECT(f32((float[]){1, 2, 3000}, 3), "[1.0e+00, 2.0e+00, 3.0e+03]");
    /* tiny (below 1e-4) or huge (past 1e8) */
    EXPECT(f64((double[]){1e-8, 1}, 2), "[1.0e-08, 1.0e+00]");
    EXPECT(f32((float[]){3e-7f}, 1), "[3.0e-07]");
    EXPECT(f32((float[]){1e10f, 2e10f}, 2), "[1.0e+10, 2.0e+10]");
    EXPECT(f32((float[]){123456789.0f}, 1), "[1.2345679e+08]");
    EXPECT(f64((double[]){1e300, -1e-300}, 2), "[1.0e+300, -1.0e-300]");
    /* NaN and infinities take no part in the choice */
    EXPECT(f32((float[]){NAN, INFINITY, -INFINITY, 1.5f}, 4), "[NaN, inf, -inf, 1.5]");
    EXPECT(f32((float[]){NAN, 1e-9f}, 2), "[NaN, 1.0e-09]");
    EXPECT(f32((float[]){INFINITY, -INFINITY}, 2), "[inf, -inf]");
    /* zeros, negative zero */
    EXPECT(f32((float[]){-0.0f, 0.0f, 2}, 3), "[-0.0, 0.0, 2.0]");
    EXPECT(f32((float[]){0, 0}, 2), "[0.0, 0.0]");
    EXPECT(f32((float[]){-0.0f, 1e-9f}, 2), "[-0.0e+00, 1.0e-09]");
    /* f16 and bf16: digits that read back in their own precision */
    EXPECT(as((double[]){0.5, 100.25}, 2, EM_F16), "[0.5, 100.25]");
    EXPECT(as((double[]){0.1, 3}, 2, EM_F16), "[0.1, 3.0]");
    EXPECT(as((double[]){3.140625, 256}, 2, EM_BF16), "[3.14, 256.0]");
    EXPECT(as((double[]){65504, 1e-3}, 2, EM_F16), "[6.55e+04, 1.0e-03]");
    /* precision: that many digits in the tensor's notation */
    EXPECT_O(f32((float[]){1.0f / 3, 2}, 2), ((em_print_options){.precision = 2}), "[0.33, 2.00]");
    EXPECT_O(f64((double[]){1e-8, 1}, 2), ((em_print_options){.precision = 3}),
             "[1.000e-08, 1.000e+00]");
    /* scalars and matrices */
    EXPECT(em_scalar(2, EM_F64, EM_CPU), "2.0");
    EXPECT(em_scalar(1e-9, EM_F64, EM_CPU), "1.0e-09");
    EXPECT(em_from_f32((float[]){1, 2.5f, 30, 400}, EM_SHAPE(2, 2)),
           "[[1.0, 2.5],\n [30.0, 400.0]]");
    /* summarised: the choice sees the printed elements only (here 0 .. 1999: sci) */
    em_tensor *r = em_arange(0, 2000, 1, EM_F32, EM_CPU);
    EXPECT(r, "[0.0e+00, 1.0e+00, 2.0e+00, ..., 1.997e+03, 1.998e+03, 1.999e+03]");
    EXPECT(em_add_scalar(em_arange(0, 2000, 1, EM_F32, EM_CPU), 1000),
           "[1000.0, 1001.0, 1002.0, ..., 2997.0, 2998.0, 2999.0]");
    em_scope_end();
}

static void test_other_dtypes(void)
{
    em_scope_begin();
    int64_t iv[3] = {INT64_MIN, 0, INT64_MAX};
    EXPECT(em_from_i64(iv, EM_SHAPE(3)), "[-9223372036854775808, 0, 9223372036854775807]");
    EXPECT(as((double[]){255, 0, 7}, 3, EM_U8), "[255, 0, 7]");
    EXPECT(as((double[]){-128, 127}, 2, EM_I8), "[-128, 127]");
    EXPECT(as((double[]){1, 0, 1}, 3, EM_BOOL), "[true, false, true]");
    EXPECT(em_zeros(EM_SHAPE(2, 0), EM_F32, EM_CPU), "[[],\n []]");
    em_scope_end();
}

static void test_null(void)
{
    /* printing NULL records nothing: a pending error stays the one reported */
    em_clear_error();
    em_print(NULL);
    CHECK(!em_failed(), "em_print(NULL) recorded \"%s\"", em_last_error());
    em_error(EM_ERR_SHAPE, "em_add: the first error");
    em_print(NULL);
    CHECK(em_last_status() == EM_ERR_SHAPE && !strcmp(em_last_error(), "em_add: the first error"),
          "em_print(NULL) kept the pending error: \"%s\"", em_last_error());
    em_clear_error();
    /* the format call itself still reports NULL as a bad argument when nothing is pending */
    CHECK(em_tensor_format(NULL, (em_print_options){0}) == NULL, "format NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_tensor_format");
}

int main(void)
{
    h_init();
    test_floats();
    test_other_dtypes();
    test_null();
    return h_finish();
}
