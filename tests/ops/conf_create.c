/* Conformance of creation ops, copies and casts against f64 references. */
#include <string.h>

#include "conf.h"

static const em_dtype all_dtypes[] = {EM_F64, EM_F32, EM_F16, EM_BF16, EM_I64,
                                      EM_I32, EM_I16, EM_I8,  EM_U8,   EM_BOOL};
#define N_DTYPES (int)(sizeof all_dtypes / sizeof all_dtypes[0])

static void check_fill(void)
{
    for (int k = 0; k < N_DTYPES; k++) {
        em_dtype dt = all_dtypes[k];
        em_scope_begin();
        em_shape s = EM_SHAPE(3, 0, 2);
        em_tensor *e = em_full(s, 5, dt, h_dev);
        CHECK(e && em_tensor_numel(e) == 0, "full of size 0 (%s)", em_dtype_name(dt));
        s = EM_SHAPE(4, 5);
        double v = dt == EM_BOOL ? 1 : 3;
        double expect[20];
        for (int i = 0; i < 20; i++) expect[i] = v;
        h_check_tensor("full", em_full(s, v, dt, h_dev), expect, s, 0, 0);
        for (int i = 0; i < 20; i++) expect[i] = 0;
        h_check_tensor("zeros", em_zeros(s, dt, h_dev), expect, s, 0, 0);
        for (int i = 0; i < 20; i++) expect[i] = 1;
        h_check_tensor("ones", em_ones(s, dt, h_dev), expect, s, 0, 0);
        em_tensor *sc = em_scalar(2, dt, h_dev);
        CHECK(sc && em_tensor_rank(sc) == 0 && em_item_f64(sc) == (dt == EM_BOOL ? 1 : 2),
              "scalar %s", em_dtype_name(dt));
        em_tensor *src = em_full(s, 1, dt, h_dev);
        h_check_tensor("zeros_like", em_zeros_like(src), (double[20]){0}, s, 0, 0);
        h_check_tensor("ones_like", em_ones_like(src), expect, s, 0, 0);
        em_tensor *el = em_empty_like(src);
        CHECK(el && em_tensor_dtype(el) == dt && em_shape_equal(em_tensor_shape(el), s),
              "empty_like %s", em_dtype_name(dt));
        h_check_tensor("full_like", em_full_like(src, 1), expect, s, 0, 0);
        em_scope_end();
    }
    em_scope_begin();
    double big = 3e9;
    em_tensor *t = em_full(EM_SHAPE(2), big, EM_I64, h_dev);
    CHECK(t && em_item_i64(em_narrow(t, 0, 1, 1)) == 3000000000LL, "full i64 keeps large values");
    em_tensor *nan = em_full(EM_SHAPE(2), NAN, EM_F32, h_dev);
    CHECK(nan && isnan(em_get_f64(nan, (int64_t[]){1})), "full NaN");
    em_scope_end();
}

static void check_ranges(void)
{
    em_scope_begin();
    double ex[10];
    for (int i = 0; i < 10; i++) ex[i] = i;
    h_check_tensor("arange f32", em_arange(0, 10, 1, EM_F32, h_dev), ex, EM_SHAPE(10), 0, 0);
    h_check_tensor("arange i64", em_arange(0, 10, 1, EM_I64, h_dev), ex, EM_SHAPE(10), 0, 0);
    double ex2[4] = {5, 3.5, 2, 0.5};
    h_check_tensor("arange negative step", em_arange(5, 0, -1.5, EM_F64, h_dev), ex2, EM_SHAPE(4),
                   0, 0);
    em_tensor *empty = em_arange(3, 3, 1, EM_F32, h_dev);
    CHECK(empty && em_tensor_numel(empty) == 0, "arange empty");
    CHECK(em_arange(0, 1, 0, EM_F32, h_dev) == NULL, "arange step 0 fails");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_arange");
    double ls[5] = {-1, -0.5, 0, 0.5, 1};
    h_check_tensor("linspace", em_linspace(-1, 1, 5, EM_F64, h_dev), ls, EM_SHAPE(5), 1e-15, 0);
    h_check_tensor("linspace f16", em_linspace(-1, 1, 5, EM_F16, h_dev), ls, EM_SHAPE(5), 0, 0);
    double one[1] = {2};
    h_check_tensor("linspace 1", em_linspace(2, 7, 1, EM_F32, h_dev), one, EM_SHAPE(1), 0, 0);
    em_tensor *l0 = em_linspace(0, 1, 0, EM_F32, h_dev);
    CHECK(l0 && em_tensor_numel(l0) == 0, "linspace 0 steps");
    CHECK(em_linspace(0, 1, -1, EM_F32, h_dev) == NULL, "linspace negative steps");
    CHECK_ERR(EM_ERR_SHAPE, "em_linspace");
    double eye[6] = {1, 0, 0, 0, 1, 0};
    h_check_tensor("eye 2x3", em_eye(2, 3, EM_I32, h_dev), eye, EM_SHAPE(2, 3), 0, 0);
    double eye2[4] = {1, 0, 0, 1};
    h_check_tensor("eye square", em_eye(2, -1, EM_BOOL, h_dev), eye2, EM_SHAPE(2, 2), 0, 0);
    em_scope_end();
}

static void check_random(void)
{
    em_scope_begin();
    em_seed(7);
    em_tensor *a = em_rand(EM_SHAPE(1000), EM_F32, h_dev);
    em_seed(7);
    em_tensor *b = em_rand(EM_SHAPE(1000), EM_F32, h_dev);
    em_tensor *c = em_rand(EM_SHAPE(1000), EM_F32, h_dev);
    double *va = h_values(a), *vb = h_values(b), *vc = h_values(c);
    int same = 0, differ = 0, in_range = 0;
    double mean = 0;
    for (int i = 0; i < 1000; i++) {
        same += va[i] == vb[i];
        differ += va[i] != vc[i];
        in_range += va[i] >= 0 && va[i] < 1;
        mean += va[i] / 1000;
    }
    CHECK(same == 1000, "same seed gives the same numbers");
    CHECK(differ > 990, "the stream advances between calls");
    CHECK(in_range == 1000, "rand in [0, 1)");
    CHECK(fabs(mean - 0.5) < 0.05, "rand mean %g", mean);
    /* values follow the documented stream: element i is em_rng_uniform_at(seed, offset, i) */
    em_seed(99);
    em_rng_state st = em_rng_get_state();
    em_tensor *d = em_rand(EM_SHAPE(16), EM_F64, h_dev);
    double *vd = h_values(d);
    int follows = 0;
    for (int i = 0; i < 16; i++)
        follows += vd[i] == em_rng_uniform_at(st.seed, st.offset, (uint64_t)i);
    CHECK(follows == 16, "rand follows the Philox stream");
    free(vd);
    free(va);
    free(vb);
    free(vc);

    em_tensor *n = em_randn(EM_SHAPE(20000), EM_F64, h_dev);
    double *vn = h_values(n);
    double m = 0, s2 = 0;
    for (int i = 0; i < 20000; i++) m += vn[i] / 20000;
    for (int i = 0; i < 20000; i++) s2 += (vn[i] - m) * (vn[i] - m) / 20000;
    CHECK(fabs(m) < 0.03 && fabs(sqrt(s2) - 1) < 0.03, "randn mean %g std %g", m, sqrt(s2));
    free(vn);
    em_tensor *n2 = em_rand_normal(EM_SHAPE(4000), 3, 0.5, EM_F32, h_dev);
    double *v2 = h_values(n2);
    m = 0;
    for (int i = 0; i < 4000; i++) m += v2[i] / 4000;
    CHECK(fabs(m - 3) < 0.05, "rand_normal mean %g", m);
    free(v2);
    em_tensor *u = em_rand_uniform(EM_SHAPE(4000), -2, -1, EM_BF16, h_dev);
    double *vu = h_values(u);
    int ok = 0;
    for (int i = 0; i < 4000; i++) ok += vu[i] >= -2 && vu[i] < -1;
    CHECK(ok == 4000, "rand_uniform bf16 within [-2, -1)");
    free(vu);

    em_tensor *ri = em_randint(-3, 4, EM_SHAPE(5000), EM_I16, h_dev);
    double *vr = h_values(ri);
    int hist[7] = {0};
    ok = 1;
    for (int i = 0; i < 5000; i++) {
        if (vr[i] < -3 || vr[i] > 3)
            ok = 0;
        else
            hist[(int)vr[i] + 3]++;
    }
    CHECK(ok, "randint within range");
    for (int i = 0; i < 7; i++)
        CHECK(hist[i] > 550, "randint value %d drawn %d times", i - 3, hist[i]);
    free(vr);

    em_tensor *bp = em_bernoulli_p(EM_SHAPE(10000), 0.25, EM_F32, h_dev);
    em_tensor *bs = em_bernoulli_p(EM_SHAPE(10), 0, EM_BOOL, h_dev);
    double *vb2 = h_values(bp);
    double frac = 0;
    for (int i = 0; i < 10000; i++) frac += vb2[i] / 10000;
    CHECK(fabs(frac - 0.25) < 0.02, "bernoulli_p fraction %g", frac);
    CHECK(bs && em_item_f64(em_narrow(bs, 0, 3, 1)) == 0, "bernoulli p=0");
    free(vb2);
    double probs[6] = {0, 1, 0, 1, 1, 0};
    em_tensor *p = h_from_values(probs, EM_SHAPE(2, 3), EM_F64, H_TRANSPOSED);
    h_check_tensor("bernoulli of 0/1 probabilities", em_bernoulli(p), probs, EM_SHAPE(2, 3), 0, 0);
    em_tensor *rl = em_rand_like(p);
    CHECK(rl && em_tensor_dtype(rl) == EM_F64, "rand_like");
    em_tensor *rn = em_randn_like(p);
    CHECK(rn && em_tensor_numel(rn) == 6, "randn_like");

    CHECK(em_rand(EM_SHAPE(2), EM_I32, h_dev) == NULL, "rand of ints fails");
    CHECK_ERR(EM_ERR_DTYPE, "em_rand");
    CHECK(em_randint(3, 3, EM_SHAPE(2), EM_I32, h_dev) == NULL, "randint empty range");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_randint");
    CHECK(em_bernoulli_p(EM_SHAPE(2), 1.5, EM_F32, h_dev) == NULL, "bernoulli p > 1");
    CHECK_ERR(EM_ERR_INVALID_ARG, "1.5");
    CHECK(em_bernoulli(NULL) == NULL, "bernoulli NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_bernoulli");
    em_scope_end();
}

static void check_one_hot_tri(void)
{
    em_scope_begin();
    int64_t idx[4] = {2, 0, 1, 2};
    em_tensor *i = h_from_i64(idx, EM_SHAPE(2, 2));
    double ex[12] = {0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1};
    h_check_tensor("one_hot", em_one_hot(i, 3), ex, EM_SHAPE(2, 2, 3), 0, 0);
    h_check_tensor("one_hot inferred", em_one_hot(i, -1), ex, EM_SHAPE(2, 2, 3), 0, 0);
    em_tensor *it = em_transpose(i, 0, 1);
    double ext[12] = {0, 0, 1, 0, 1, 0, 1, 0, 0, 0, 0, 1};
    h_check_tensor("one_hot strided", em_one_hot(it, 3), ext, EM_SHAPE(2, 2, 3), 0, 0);
    CHECK(em_one_hot(i, 2) == NULL, "one_hot index out of range");
    CHECK_ERR(EM_ERR_INDEX, "em_one_hot");
    em_tensor *f = em_zeros(EM_SHAPE(2), EM_F32, h_dev);
    CHECK(em_one_hot(f, 2) == NULL, "one_hot of floats");
    CHECK_ERR(EM_ERR_DTYPE, "f32");

    for (int layout = 0; layout < H_LAYOUT_COUNT; layout++) {
        const em_dtype dts[3] = {EM_F32, EM_I64, EM_BOOL};
        for (int k = 0; k < 3; k++) {
            em_shape s = EM_SHAPE(2, 3, 4);
            double *v;
            em_tensor *x = h_rand(s, dts[k], (h_layout)layout, -3, 3, &v);
            for (int64_t diag = -2; diag <= 2; diag++) {
                double lo[24], up[24];
                for (int b = 0; b < 2; b++)
                    for (int r = 0; r < 3; r++)
                        for (int c = 0; c < 4; c++) {
                            int o = (b * 3 + r) * 4 + c;
                            lo[o] = c - r <= diag ? v[o] : 0;
                            up[o] = c - r >= diag ? v[o] : 0;
                        }
                h_check_tensor("tril", em_tril(x, diag), lo, s, 0, 0);
                h_check_tensor("triu", em_triu(x, diag), up, s, 0, 0);
            }
            free(v);
        }
    }
    CHECK(em_tril(em_zeros(EM_SHAPE(3), EM_F32, h_dev), 0) == NULL, "tril of 1-D");
    CHECK_ERR(EM_ERR_SHAPE, "em_tril");

    em_tensor *a = em_arange(0, 3, 1, EM_F32, h_dev);
    em_tensor *b = em_arange(10, 12, 1, EM_F32, h_dev);
    em_tensor *grid[2];
    CHECK(em_meshgrid((em_tensor *[]){a, b}, 2, grid) == EM_OK, "meshgrid");
    double gx[6] = {0, 0, 1, 1, 2, 2}, gy[6] = {10, 11, 10, 11, 10, 11};
    h_check_tensor("meshgrid x", grid[0], gx, EM_SHAPE(3, 2), 0, 0);
    h_check_tensor("meshgrid y", grid[1], gy, EM_SHAPE(3, 2), 0, 0);
    em_release(grid[0]);
    em_release(grid[1]);
    CHECK(em_meshgrid((em_tensor *[]){a, i}, 2, grid) != EM_OK, "meshgrid of 2-D fails");
    CHECK_ERR(EM_ERR_SHAPE, "em_meshgrid");
    em_scope_end();
}

static void check_casts(void)
{
    /* every pair of dtypes, on values every dtype can hold, through every layout */
    const double vals[8] = {0, 1, 2, 7, 100, 127, 3, 1};
    for (int a = 0; a < N_DTYPES; a++)
        for (int b = 0; b < N_DTYPES; b++)
            for (int layout = 0; layout < H_LAYOUT_COUNT; layout++) {
                em_scope_begin();
                double v[8];
                for (int i = 0; i < 8; i++) v[i] = h_round_to(vals[i], all_dtypes[a]);
                em_tensor *x = h_from_values(v, EM_SHAPE(2, 4), all_dtypes[a], (h_layout)layout);
                double ex[8];
                for (int i = 0; i < 8; i++) ex[i] = h_round_to(v[i], all_dtypes[b]);
                em_tensor *y = em_cast(x, all_dtypes[b]);
                CHECK(y && em_tensor_dtype(y) == all_dtypes[b], "cast dtype");
                h_check_tensor("cast", y, ex, EM_SHAPE(2, 4), 0, 0);
                em_tensor *c = em_contiguous(x);
                CHECK(c && em_tensor_is_contiguous(c), "contiguous");
                h_check_tensor("contiguous", c, v, EM_SHAPE(2, 4), 0, 0);
                em_tensor *cl = em_clone(x);
                CHECK(cl && !em_tensor_shares_storage(cl, x), "clone copies");
                h_check_tensor("clone", cl, v, EM_SHAPE(2, 4), 0, 0);
                em_scope_end();
            }
    /* conversions with rounding and special values */
    em_scope_begin();
    double f[7] = {-2.7, -0.5, 0.5, 2.7, NAN, INFINITY, 1e10};
    em_tensor *x = h_from_f64(f, EM_SHAPE(7));
    double to_bool[7] = {1, 1, 1, 1, 1, 1, 1};
    h_check_tensor("f64 -> bool", em_cast(x, EM_BOOL), to_bool, EM_SHAPE(7), 0, 0);
    em_tensor *head = em_narrow(x, 0, 0, 4);
    double to_i[4] = {-2, 0, 0, 2};
    h_check_tensor("f64 -> i32 truncates", em_cast(head, EM_I32), to_i, EM_SHAPE(4), 0, 0);
    double to_h[7] = {
        h_round_to(-2.7, EM_F16), -0.5, 0.5, h_round_to(2.7, EM_F16), NAN, INFINITY, INFINITY};
    h_check_tensor("f64 -> f16", em_cast(x, EM_F16), to_h, EM_SHAPE(7), 0, 0);
    int64_t big[2] = {INT64_MAX, -5};
    em_tensor *bi = h_from_i64(big, EM_SHAPE(2));
    int64_t back[2];
    em_to_data(em_cast(em_cast(bi, EM_I64), EM_I64), back, EM_I64, 2);
    CHECK(back[0] == INT64_MAX && back[1] == -5, "i64 copies stay exact");
    double wrap[2] = {255, 251};
    h_check_tensor("i64 -> u8 wraps", em_cast(bi, EM_U8), wrap, EM_SHAPE(2), 0, 0);
    CHECK(em_cast(x, (em_dtype)42) == NULL, "cast to an invalid dtype");
    CHECK_ERR(EM_ERR_DTYPE, "em_cast");
    CHECK(em_cast(NULL, EM_F32) == NULL, "cast NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_cast");
    em_scope_end();
}

static void check_bad_creation(void)
{
    em_scope_begin();
    CHECK(em_zeros(EM_SHAPE(2, -1), EM_F32, h_dev) == NULL, "negative dim");
    CHECK_ERR(EM_ERR_SHAPE, "[2, -1]");
    CHECK(em_zeros(EM_SHAPE(2), (em_dtype)99, h_dev) == NULL, "bad dtype");
    CHECK_ERR(EM_ERR_DTYPE, "em_zeros: invalid dtype 99");
    CHECK(em_zeros(EM_SHAPE(2), EM_F32, (em_device){5, 0}) == NULL, "bad device");
    CHECK_ERR(EM_ERR_DEVICE, "em_zeros: device");
    CHECK(em_zeros(EM_SHAPE(1 << 30, 1 << 30, 1 << 30), EM_F32, h_dev) == NULL, "overflow");
    CHECK(em_failed(), "overflow is an error");
    em_clear_error();
    em_shape big = {.rank = 9};
    CHECK(em_zeros(big, EM_F32, h_dev) == NULL, "rank 9");
    CHECK_ERR(EM_ERR_SHAPE, "rank 9");
    em_scope_end();
}

void conf_create(void)
{
    check_fill();
    check_ranges();
    check_random();
    check_one_hot_tri();
    check_casts();
    check_bad_creation();
}
