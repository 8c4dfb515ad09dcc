/* The CUDA index, combine and resampling kernels against the CPU backend on sizes the
 * conformance suite does not reach: many blocks, more than 2^16 rows, long lines of duplicate
 * indices (scatter and index_add must combine them in the CPU's order), compaction over many
 * chunks, strided and broadcast inputs, 16-bit and integer dtypes, the index error, and the
 * in-range forms that skip the check (the kernels' guard: NaN or dropped sources). Without
 * a CUDA device it prints one line and passes. */
#include <string.h>

#include "backend/backend.h"
#include "harness.h"
#include "tensor/op.h"

static em_device dev;

/* One case: f builds the result from inputs in[0..n) (on whichever device they live). */
typedef em_tensor *(*case_fn)(em_tensor *const *in);

static void compare(const char *what, em_tensor *got, em_tensor *want, double rtol)
{
    CHECK(got && want, "%s: missing result (%s)", what, em_last_error());
    if (!got || !want) return;
    CHECK(em_tensor_device(got).backend == dev.backend, "%s: result not on the device", what);
    int64_t n = em_tensor_numel(want);
    CHECK(em_tensor_numel(got) == n, "%s: %lld elements, want %lld", what,
          (long long)em_tensor_numel(got), (long long)n);
    if (em_tensor_numel(got) != n || n == 0) return;
    bool exact_int = em_tensor_dtype(want) == EM_I64;
    double *g = malloc((size_t)n * 8), *w = malloc((size_t)n * 8);
    int64_t *gi = (int64_t *)g, *wi = (int64_t *)w;
    em_dtype rd = exact_int ? EM_I64 : EM_F64;
    em_to_data(got, g, rd, n);
    CHECK_OK("em_to_data");
    em_to_data(want, w, rd, n);
    CHECK_OK("em_to_data");
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++) {
        if (exact_int) {
            if (gi[i] != wi[i]) bad = i;
        } else if (isnan(w[i]) ? !isnan(g[i]) : fabs(g[i] - w[i]) > rtol * fabs(w[i])) {
            if (!(g[i] == w[i])) bad = i;
        }
    }
    if (exact_int)
        CHECK(bad < 0, "%s: element %lld is %lld, want %lld (n=%lld)", what, (long long)bad,
              bad < 0 ? 0LL : (long long)gi[bad], bad < 0 ? 0LL : (long long)wi[bad], (long long)n);
    else
        CHECK(bad < 0, "%s: element %lld is %.17g, want %.17g (n=%lld)", what, (long long)bad,
              bad < 0 ? 0.0 : g[bad], bad < 0 ? 0.0 : w[bad], (long long)n);
    free(g);
    free(w);
}

/* Runs f on the CPU inputs and on their device copies and compares (rtol 0: bit-exact). */
static void run_case(const char *what, case_fn f, em_tensor *const *cpu_in, int n, double rtol)
{
    em_scope_begin();
    em_tensor *dev_in[6];
    for (int k = 0; k < n; k++) dev_in[k] = em_to_device(cpu_in[k], dev);
    CHECK_OK(what);
    em_tensor *want = f(cpu_in);
    em_tensor *got = f(dev_in);
    compare(what, got, want, rtol);
    em_clear_error();
    em_scope_end();
}

static em_tensor *randint(int64_t lo, int64_t hi, em_shape s, em_dtype dt)
{
    return em_randint(lo, hi, s, dt, EM_CPU);
}

/* ---- cases --------------------------------------------------------------------------------- */

static em_tensor *c_gather_t(em_tensor *const *in) /* transposed x, dim 0 */
{
    return em_gather(em_transpose(in[0], 0, 1), 0, in[1]);
}
static em_tensor *c_gather_1(em_tensor *const *in)
{
    return em_gather(in[0], 1, in[1]);
}
static em_tensor *c_scatter_add(em_tensor *const *in)
{
    return em_scatter(in[0], 0, in[1], in[2], EM_SCATTER_ADD);
}
static em_tensor *c_scatter_mul(em_tensor *const *in)
{
    return em_scatter(in[0], 1, in[1], in[2], EM_SCATTER_MUL);
}
static em_tensor *c_scatter_min(em_tensor *const *in)
{
    return em_scatter(in[0], 1, in[1], in[2], EM_SCATTER_MIN);
}
static em_tensor *c_scatter_max(em_tensor *const *in)
{
    return em_scatter(in[0], 0, in[1], in[2], EM_SCATTER_MAX);
}
static em_tensor *c_scatter_assign(em_tensor *const *in)
{
    return em_scatter(in[0], 0, in[1], in[2], EM_SCATTER_ASSIGN);
}
static em_tensor *c_scatter_scalar(em_tensor *const *in)
{
    return em_scatter(em_transpose(in[0], 0, 1), 1, in[1], in[2], EM_SCATTER_ADD);
}
static em_tensor *c_scatter_1d_add(em_tensor *const *in)
{
    return em_scatter(in[0], 0, in[1], in[2], EM_SCATTER_ADD);
}
static em_tensor *c_scatter_1d_max(em_tensor *const *in)
{
    return em_scatter(in[0], 0, em_flip(in[1], EM_AXES(0)), in[2], EM_SCATTER_MAX);
}
static em_tensor *c_index_select(em_tensor *const *in)
{
    return em_index_select(in[0], 0, in[1]);
}
static em_tensor *c_index_select_t(em_tensor *const *in)
{
    return em_index_select(em_transpose(in[0], 0, 1), 1, in[1]);
}
static em_tensor *c_index_add(em_tensor *const *in)
{
    return em_index_add(in[0], 0, in[1], in[2], 0.5);
}
static em_tensor *c_index_add_int(em_tensor *const *in)
{
    return em_index_add(in[0], 1, in[1], in[2], 3.0);
}
static em_tensor *c_embedding(em_tensor *const *in)
{
    return em_embedding(in[0], in[1]);
}
static em_tensor *c_embedding_t(em_tensor *const *in)
{
    return em_embedding(em_transpose(in[0], 0, 1), em_transpose(in[1], 0, 1));
}
static em_tensor *c_masked_select(em_tensor *const *in)
{
    return em_masked_select(in[0], em_gt_scalar(in[1], 0.3));
}
static em_tensor *c_nonzero(em_tensor *const *in)
{
    return em_nonzero(em_transpose(in[0], 0, 1));
}
static em_tensor *c_slice_assign(em_tensor *const *in)
{
    int64_t st[2] = {1, 5}, en[2] = {INT64_MAX / 2, -3}, sp[2] = {3, 7};
    return em_slice_assign(in[0], st, en, sp, in[1]);
}
static em_tensor *c_cat(em_tensor *const *in)
{
    em_tensor *t[3] = {in[0], em_transpose(in[1], 0, 1), in[2]};
    return em_cat(t, 3, 1);
}
static em_tensor *c_repeat(em_tensor *const *in)
{
    return em_repeat(em_transpose(in[0], 0, 1), EM_SHAPE(2, 30001, 7));
}
static em_tensor *c_roll(em_tensor *const *in)
{
    int64_t sh[3] = {-1234567, 333, 5};
    int dims[3] = {0, 1, 0};
    return em_roll(in[0], sh, dims, 3);
}
static em_tensor *c_pad_constant(em_tensor *const *in)
{
    int64_t p[4] = {3, 5, -2, 7};
    return em_pad(em_transpose(in[0], 2, 3), p, 2, EM_PAD_CONSTANT, -2.5);
}
static em_tensor *c_pad_reflect(em_tensor *const *in)
{
    int64_t p[4] = {3, 5, 2, 7};
    return em_pad(in[0], p, 2, EM_PAD_REFLECT, 0);
}
static em_tensor *c_pad_replicate(em_tensor *const *in)
{
    int64_t p[4] = {30, 1, 0, 9};
    return em_pad(in[0], p, 2, EM_PAD_REPLICATE, 0);
}
static em_tensor *c_pad_circular(em_tensor *const *in)
{
    int64_t p[4] = {11, 3, 4, 0};
    return em_pad(in[0], p, 2, EM_PAD_CIRCULAR, 0);
}
static em_tensor *c_shuffle(em_tensor *const *in)
{
    return em_pixel_shuffle(em_transpose(in[0], 2, 3), 3);
}
static em_tensor *c_unshuffle(em_tensor *const *in)
{
    return em_pixel_unshuffle(in[0], 4);
}
static em_tensor *c_avg_pool(em_tensor *const *in)
{
    em_pool_opts o = {.kernel = {3, 4}, .stride = {2, 3}, .pad = {1, 2}, .ceil_mode = true};
    return em_avg_pool2d(em_transpose(in[0], 2, 3), o);
}
static em_tensor *c_avg_pool_excl(em_tensor *const *in)
{
    em_pool_opts o = {.kernel = {5}, .stride = {3}, .pad = {2}, .exclude_pad = true};
    return em_avg_pool1d(in[0], o);
}
static em_tensor *c_adaptive_avg(em_tensor *const *in)
{
    return em_adaptive_avg_pool2d(em_transpose(in[0], 2, 3), 7, 13);
}
static em_tensor *c_adaptive_max(em_tensor *const *in)
{
    return em_adaptive_max_pool2d(in[0], 11, 5, NULL);
}
static em_tensor *c_adaptive_max_idx(em_tensor *const *in)
{
    em_tensor *idx = NULL;
    em_tensor *v = em_adaptive_max_pool2d(in[0], 11, 5, &idx);
    (void)v;
    return idx;
}
static em_tensor *c_nearest(em_tensor *const *in)
{
    return em_interpolate(in[0], EM_SHAPE(211, 97), EM_INTERP_NEAREST, false);
}
static em_tensor *c_bilinear(em_tensor *const *in)
{
    return em_interpolate(em_transpose(in[0], 2, 3), EM_SHAPE(211, 97), EM_INTERP_BILINEAR, false);
}
static em_tensor *c_bilinear_ac(em_tensor *const *in)
{
    return em_interpolate(in[0], EM_SHAPE(33, 301), EM_INTERP_BILINEAR, true);
}
static em_tensor *c_bicubic(em_tensor *const *in)
{
    return em_interpolate(in[0], EM_SHAPE(211, 97), EM_INTERP_BICUBIC, false);
}
static em_tensor *c_im2col(em_tensor *const *in)
{
    int64_t k[2] = {3, 2}, d[2] = {2, 1}, p[2] = {1, 1}, s[2] = {2, 3};
    return em_im2col(em_transpose(in[0], 2, 3), k, d, p, s);
}
static em_tensor *c_col2im(em_tensor *const *in)
{
    int64_t out[2] = {61, 47}, k[2] = {3, 2}, d[2] = {2, 1}, p[2] = {1, 1}, s[2] = {2, 3};
    return em_col2im(in[0], out, k, d, p, s);
}

static void test_gather_family(void)
{
    em_scope_begin();
    em_tensor *x = em_randn(EM_SHAPE(513, 257), EM_F32, EM_CPU);
    em_tensor *in1[2] = {x, randint(0, 257, EM_SHAPE(200, 513), EM_I32)};
    run_case("gather dim 0, transposed x, i32 index", c_gather_t, in1, 2, 0);
    em_tensor *in2[2] = {x, randint(0, 257, EM_SHAPE(513, 70001), EM_I64)};
    run_case("gather dim 1, 70001 per row", c_gather_1, in2, 2, 0);
    em_tensor *rows = em_randn(EM_SHAPE(70000, 33), EM_F16, EM_CPU);
    em_tensor *in3[2] = {rows, randint(0, 70000, EM_SHAPE(100003), EM_I64)};
    run_case("index_select f16 rows", c_index_select, in3, 2, 0);
    em_tensor *in4[2] = {rows, randint(0, 32000, EM_SHAPE(777), EM_I16)};
    run_case("index_select transposed, i16 index", c_index_select_t, in4, 2, 0);
    em_tensor *w = em_randn(EM_SHAPE(10000, 96), EM_BF16, EM_CPU);
    em_tensor *in5[2] = {w, randint(0, 10000, EM_SHAPE(300, 257), EM_I32)};
    run_case("embedding bf16", c_embedding, in5, 2, 0);
    em_tensor *wt = em_randn(EM_SHAPE(96, 5000), EM_F32, EM_CPU);
    em_tensor *in6[2] = {wt, randint(0, 256, EM_SHAPE(257, 300), EM_U8)};
    run_case("embedding transposed weight and indices", c_embedding_t, in6, 2, 0);
    em_scope_end();
}

static void test_scatter_family(void)
{
    em_scope_begin();
    /* long lines of duplicates: the f64 sums must match the CPU's order bit for bit */
    em_tensor *in1[3] = {em_randn(EM_SHAPE(7000, 3), EM_F64, EM_CPU),
                         randint(0, 7000, EM_SHAPE(200003, 3), EM_I64),
                         em_randn(EM_SHAPE(200003, 3), EM_F64, EM_CPU)};
    run_case("scatter add f64, 200003 duplicates per line", c_scatter_add, in1, 3, 0);
    em_tensor *in2[3] = {randint(-5, 5, EM_SHAPE(70001, 9), EM_I32),
                         randint(0, 9, EM_SHAPE(70001, 40), EM_I64),
                         randint(-3, 4, EM_SHAPE(70001, 40), EM_I32)};
    run_case("scatter mul i32 (wrapping)", c_scatter_mul, in2, 3, 0);
    em_tensor *in3[3] = {em_randn(EM_SHAPE(70001, 9), EM_F16, EM_CPU),
                         randint(0, 9, EM_SHAPE(70001, 40), EM_I8),
                         em_randn(EM_SHAPE(70001, 40), EM_F16, EM_CPU)};
    run_case("scatter min f16", c_scatter_min, in3, 3, 0);
    em_tensor *in4[3] = {em_randn(EM_SHAPE(1000, 300), EM_BF16, EM_CPU),
                         randint(0, 1000, EM_SHAPE(5000, 300), EM_I64),
                         em_randn(EM_SHAPE(5000, 300), EM_BF16, EM_CPU)};
    run_case("scatter max bf16", c_scatter_max, in4, 3, 0);
    run_case("scatter assign (last duplicate wins)", c_scatter_assign, in4, 3, 0);
    em_tensor *in5[3] = {em_randn(EM_SHAPE(300, 1000), EM_F32, EM_CPU),
                         randint(0, 300, EM_SHAPE(1000, 700), EM_I32),
                         em_full(EM_SCALAR, 0.25, EM_F64, EM_CPU)};
    run_case("scatter add of a rank-0 src, transposed x", c_scatter_scalar, in5, 3, 0);
    /* a 1-D index: one line, sorted by destination */
    em_tensor *in8[3] = {em_randn(EM_SHAPE(1000), EM_F32, EM_CPU),
                         randint(0, 1000, EM_SHAPE(100000), EM_I64),
                         em_randn(EM_SHAPE(100003), EM_F32, EM_CPU)};
    run_case("scatter add, 1-D index of 100000", c_scatter_1d_add, in8, 3, 0);
    run_case("scatter max, 1-D flipped index", c_scatter_1d_max, in8, 3, 0);
    run_case("scatter assign, 1-D index", c_scatter_assign, in8, 3, 0);
    /* embedding backward's shape: many tokens into a small table */
    em_tensor *in6[3] = {em_zeros(EM_SHAPE(5000, 64), EM_F32, EM_CPU),
                         randint(0, 5000, EM_SHAPE(70001), EM_I64),
                         em_randn(EM_SHAPE(70001, 64), EM_F32, EM_CPU)};
    run_case("index_add f32, 70001 rows", c_index_add, in6, 3, 0);
    em_tensor *in7[3] = {randint(-9, 9, EM_SHAPE(65, 70), EM_I16),
                         randint(0, 70, EM_SHAPE(4099), EM_I32),
                         randint(-9, 9, EM_SHAPE(65, 4099), EM_I16)};
    run_case("index_add i16 along dim 1", c_index_add_int, in7, 3, 0);
    em_scope_end();
}

static void test_compact_and_copies(void)
{
    em_scope_begin();
    em_tensor *in1[2] = {em_randn(EM_SHAPE(1000, 701), EM_F32, EM_CPU),
                         em_rand(EM_SHAPE(701), EM_F32, EM_CPU)};
    run_case("masked_select, broadcast mask, 343 chunks", c_masked_select, in1, 2, 0);
    em_tensor *nz = em_mul(randint(0, 2, EM_SHAPE(513, 1031), EM_I16),
                           randint(-3, 3, EM_SHAPE(513, 1031), EM_I16));
    em_tensor *in2[1] = {nz};
    run_case("nonzero i16, transposed", c_nonzero, in2, 1, 0);
    em_tensor *in3[2] = {em_randn(EM_SHAPE(1000, 300), EM_F32, EM_CPU),
                         em_randn(EM_SHAPE(1, 42), EM_F64, EM_CPU)};
    run_case("slice_assign with steps, broadcast f64 src", c_slice_assign, in3, 2, 0);
    em_tensor *in4[3] = {randint(-99, 99, EM_SHAPE(70000, 5), EM_I64),
                         randint(-99, 99, EM_SHAPE(1, 70000), EM_I32),
                         randint(-99, 99, EM_SHAPE(70000, 2), EM_I64)};
    run_case("cat of mixed dtypes, transposed piece", c_cat, in4, 3, 0);
    em_tensor *in5[1] = {em_randn(EM_SHAPE(5, 3), EM_F64, EM_CPU)};
    run_case("repeat to 6.3M elements", c_repeat, in5, 1, 0);
    em_tensor *in6[1] = {randint(0, 255, EM_SHAPE(1000, 777), EM_U8)};
    run_case("roll u8", c_roll, in6, 1, 0);
    em_tensor *img = em_randn(EM_SHAPE(4, 3, 300, 301), EM_F32, EM_CPU);
    em_tensor *in7[1] = {img};
    run_case("pad constant (negative crops), transposed", c_pad_constant, in7, 1, 0);
    run_case("pad reflect", c_pad_reflect, in7, 1, 0);
    run_case("pad replicate", c_pad_replicate, in7, 1, 0);
    run_case("pad circular", c_pad_circular, in7, 1, 0);
    em_tensor *in8[1] = {em_randn(EM_SHAPE(2, 36, 100, 101), EM_BF16, EM_CPU)};
    run_case("pixel_shuffle r=3, transposed", c_shuffle, in8, 1, 0);
    em_tensor *in9[1] = {em_randn(EM_SHAPE(3, 5, 128, 96), EM_F64, EM_CPU)};
    run_case("pixel_unshuffle r=4", c_unshuffle, in9, 1, 0);
    em_scope_end();
}

static void test_resample(void)
{
    em_scope_begin();
    em_tensor *x = em_randn(EM_SHAPE(4, 3, 301, 299), EM_F32, EM_CPU);
    em_tensor *in1[1] = {x};
    run_case("avg_pool2d ceil mode, transposed", c_avg_pool, in1, 1, 1e-6);
    run_case("adaptive_avg_pool2d", c_adaptive_avg, in1, 1, 1e-6);
    run_case("adaptive_max_pool2d values", c_adaptive_max, in1, 1, 0);
    run_case("adaptive_max_pool2d indices", c_adaptive_max_idx, in1, 1, 0);
    em_tensor *in2[1] = {em_randn(EM_SHAPE(3, 5, 70001), EM_F64, EM_CPU)};
    run_case("avg_pool1d exclude_pad f64", c_avg_pool_excl, in2, 1, 1e-12);
    em_tensor *in3[1] = {em_randn(EM_SHAPE(2, 3, 100, 150), EM_F64, EM_CPU)};
    run_case("interpolate nearest", c_nearest, in3, 1, 0);
    run_case("interpolate bilinear, transposed", c_bilinear, in3, 1, 1e-12);
    run_case("interpolate bilinear align_corners", c_bilinear_ac, in3, 1, 1e-12);
    run_case("interpolate bicubic", c_bicubic, in3, 1, 1e-12);
    em_tensor *in4[1] = {em_randn(EM_SHAPE(2, 5, 47, 61), EM_F16, EM_CPU)};
    run_case("im2col f16, transposed", c_im2col, in4, 1, 0);
    em_tensor *in5[1] = {em_randn(EM_SHAPE(2, 5 * 6, 30 * 16), EM_BF16, EM_CPU)};
    run_case("col2im bf16", c_col2im, in5, 1, 1e-2);
    em_scope_end();
}

/* The out-of-range index is reported like the CPU's, naming the first bad value. */
static void test_index_error(void)
{
    em_scope_begin();
    int64_t n = 200000;
    int64_t *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = i % 1000;
    v[150001] = 1000 + 7; /* the first bad one in row-major order */
    v[190000] = -3;
    em_tensor *idx = em_from_data(v, EM_I64, EM_SHAPE(n), EM_I64, EM_CPU);
    em_tensor *x = em_randn(EM_SHAPE(1000, 4), EM_F32, EM_CPU);
    em_tensor *dx = em_to_device(x, dev), *di = em_to_device(idx, dev);
    CHECK(em_index_select(dx, 0, di) == NULL, "index_select: a bad index must fail");
    CHECK_ERR(EM_ERR_INDEX, "em_index_select: index 1007 is out of range for dim 0 of size 1000");
    CHECK(em_embedding(dx, di) == NULL, "embedding: a bad index must fail");
    CHECK_ERR(EM_ERR_INDEX, "em_embedding: index 1007 is out of range for dim 0 of size 1000");
    free(v);
    em_scope_end();
}

/* The in-range forms (tn_*_inrange: the index an op produced or the caller checked) skip the
 * read-back check on the device: fed a bad index anyway, the kernels' guard still holds (a
 * gathered NaN, a dropped source), where the public forms fail as the CPU does. */
static void test_known_in_range(void)
{
    em_scope_begin();
    const int64_t iv[6] = {2, 0, 5, 1, -1, 3}; /* 5 and -1 are out of range for 4 rows */
    const int64_t ok[6] = {2, 0, 0, 1, 0, 3};  /* the same with the bad ones at row 0 */
    em_tensor *xi = em_to_device(em_from_data(iv, EM_I64, EM_SHAPE(6), EM_I64, EM_CPU), dev);
    em_tensor *xo = em_to_device(em_from_data(ok, EM_I64, EM_SHAPE(6), EM_I64, EM_CPU), dev);
    em_tensor *x = em_to_device(em_randn(EM_SHAPE(4, 3), EM_F32, EM_CPU), dev);
    em_tensor *src = em_to_device(em_randn(EM_SHAPE(6, 3), EM_F32, EM_CPU), dev);
    /* gather along dim 0 with a [6, 3] index: rows 2 and 4 are bad */
    em_tensor *gi = em_expand(em_unsqueeze(xi, 1), EM_SHAPE(6, 3));
    CHECK(!em_gather(x, 0, gi), "gather: a bad index must fail");
    CHECK_ERR(EM_ERR_INDEX, "em_gather: index 5 is out of range");
    em_tensor *g = em_to_device(tn_gather_inrange(x, 0, gi), EM_CPU);
    em_tensor *want =
        em_to_device(em_gather(x, 0, em_expand(em_unsqueeze(xo, 1), EM_SHAPE(6, 3))), EM_CPU);
    CHECK_OK("tn_gather_inrange");
    for (int64_t r = 0; g && want && r < 6; r++)
        for (int64_t c = 0; c < 3; c++) {
            double v = em_get_f64(g, (int64_t[]){r, c}), w = em_get_f64(want, (int64_t[]){r, c});
            if (r == 2 || r == 4)
                CHECK(isnan(v), "gather in range: row %lld (a bad index) gives %g, not NaN",
                      (long long)r, v);
            else
                CHECK(v == w, "gather in range: [%lld, %lld] %g, want %g", (long long)r,
                      (long long)c, v, w);
        }
    /* index_add and scatter-add: the bad sources dropped, as a twin with them zeroed */
    em_tensor *keep = em_to_device(
        em_from_data((const double[]){1, 1, 0, 1, 0, 1}, EM_F64, EM_SHAPE(6, 1), EM_F32, EM_CPU),
        dev);
    em_tensor *src0 = em_mul(src, keep);
    em_tensor *sw =
        em_scatter(x, 0, em_expand(em_unsqueeze(xo, 1), EM_SHAPE(6, 3)), src0, EM_SCATTER_ADD);
    compare("index_add in range, bad sources dropped", tn_index_add_inrange(x, 0, xi, src, 1.0),
            em_index_add(x, 0, xo, src0, 1.0), 0);
    compare("scatter in range, bad sources dropped",
            tn_scatter_inrange(x, 0, gi, src, EM_SCATTER_ADD), sw, 0);
    /* 40 sources (the sorted path: a counting sort on the host) with two bad indices */
    int64_t lv[40], lo[40];
    double kv[40];
    for (int i = 0; i < 40; i++) lv[i] = lo[i] = i % 4, kv[i] = 1;
    lv[7] = 9, lv[31] = -2, lo[7] = lo[31] = 0, kv[7] = kv[31] = 0;
    em_tensor *li = em_to_device(em_from_data(lv, EM_I64, EM_SHAPE(40), EM_I64, EM_CPU), dev);
    em_tensor *lw = em_to_device(em_from_data(lo, EM_I64, EM_SHAPE(40), EM_I64, EM_CPU), dev);
    em_tensor *lk = em_to_device(em_from_data(kv, EM_F64, EM_SHAPE(40, 1), EM_F32, EM_CPU), dev);
    em_tensor *ls = em_to_device(em_randn(EM_SHAPE(40, 3), EM_F32, EM_CPU), dev);
    compare("index_add in range, 40 sources, bad ones dropped",
            tn_index_add_inrange(x, 0, li, ls, 1.0), em_index_add(x, 0, lw, em_mul(ls, lk), 1.0),
            0);
    em_scope_end();
}

int main(void)
{
    em_backends_init();
    if (em_backend_find("cuda") < 0) {
        printf("skipped: no CUDA device\n");
        return 0;
    }
    h_init();
    h_dev = EM_CPU;
    dev = em_device_parse("cuda:0");
    CHECK_OK("em_device_parse(\"cuda:0\")");
    test_gather_family();
    test_scatter_family();
    test_compact_and_copies();
    test_known_in_range();
    test_resample();
    test_index_error();
    em_device_sync(dev);
    CHECK_OK("em_device_sync");
    return h_finish();
}
