/* Extreme-argument sweep over include/ember/core.h and include/ember/tensor.h: every function
 * that takes a size, dim, index, count, pad, stride, kernel size, step or seed is called with
 * 0, -1, INT64_MAX, INT64_MIN, 2^31, 2^32, 2^62 (INT_MAX and INT_MIN for int parameters) and
 * must either succeed with the right values or fail with an error naming the function: never a
 * crash, a sanitizer report, or a silently wrong result. tests/tensor/test_extreme_nn.c covers
 * the other headers. Tensor storage is capped at 64 MiB (max_tensor_mb) so that no call
 * allocates much; the cap and the device-memory limit are tested on their own.
 *
 * Covered (core.h): em_alloc, em_calloc, em_parallel_for, em_seed, em_rng_reserve,
 *   em_rng_uniform_at, em_rng_normal_at, em_rng_u32_at, em_philox4x32, em_config_get_int,
 *   em_dtype_size, em_dtype_name, em_dtype_valid, em_dtype_is_float, em_dtype_is_int,
 *   em_dtype_promote.
 * Covered (tensor.h): em_shape_numel, em_shape_equal, em_shape_str, em_device_str,
 *   em_device_get_props, em_device_get_mem_stats, em_device_empty_cache,
 *   em_device_set_memory_limit, em_device_reset_peak, em_device_sync,
 *   em_device_persistent_begin/end, em_stream_new, em_stream_new_priority, em_event_new,
 *   em_graph_capture_begin, em_graph_capturing, em_tensor_dim, em_tensor_stride, em_get_f64,
 *   em_to_data, em_from_data, em_from_f32, em_from_f64, em_from_i64, em_from_blob,
 *   em_tensor_format, em_empty, em_zeros, em_ones, em_full, em_rand, em_randn, em_rand_uniform,
 *   em_rand_normal, em_bernoulli_p, em_randint, em_arange, em_linspace, em_eye, em_one_hot,
 *   em_tril, em_triu, em_reshape, em_view, em_flatten, em_permute, em_transpose, em_slice,
 *   em_narrow, em_select, em_expand, em_squeeze, em_unsqueeze, em_flip, em_unfold, em_cast,
 *   em_sum, em_mean, em_prod, em_max, em_min, em_any, em_all, em_count_nonzero, em_logsumexp,
 *   em_norm, em_var, em_std, em_max_dim, em_min_dim, em_argmax, em_argmin, em_cumsum,
 *   em_cumprod, em_cummax, em_cummin, em_softmax, em_log_softmax, em_gather, em_scatter,
 *   em_index_select, em_index_add, em_slice_assign, em_embedding, em_cat, em_stack, em_split,
 *   em_split_sizes, em_chunk, em_repeat, em_tile, em_roll, em_pad, em_sort, em_argsort,
 *   em_topk, em_median, em_conv1d/2d/3d, em_conv_transpose1d/2d/3d, em_max_pool1d/2d/3d,
 *   em_avg_pool1d/2d/3d, em_adaptive_avg_pool1d/2d, em_adaptive_max_pool1d/2d, em_interpolate,
 *   em_im2col, em_col2im, em_pixel_shuffle, em_pixel_unshuffle, em_layer_norm, em_rms_norm,
 *   em_group_norm, em_rfft, em_irfft, em_add (broadcast shapes), em_matmul (batch shapes). */
#include "extreme.h"

static em_tensor *F(em_shape s)
{
    return em_rand_uniform(s, -1, 1, EM_F32, EM_CPU);
}

static em_tensor *I(em_shape s, const int64_t *v)
{
    return em_from_i64(v, s);
}

static bool shape_is(const em_tensor *t, em_shape s)
{
    return t && em_shape_equal(em_tensor_shape(t), s);
}

/* ---- the reported cases, with their right answers ---------------------------------------- */

static void test_reported(void)
{
    em_scope_begin();
    em_tensor *x = F(EM_SHAPE(1, 4, 2, 2));
    args[0] = '\0';

    /* r * r wrapped to 0 and the channel check divided by it */
    FAILS("em_pixel_shuffle", em_pixel_shuffle(x, (int64_t)1 << 32));
    FAILS("em_pixel_unshuffle", em_pixel_unshuffle(x, (int64_t)1 << 32));

    /* element counts that overflow: -1, not a wrapped product */
    CHECK(em_shape_numel(EM_SHAPE((int64_t)1 << 32, ((int64_t)1 << 32) - 1, 0)) == -1,
          "numel of [2^32, 2^32 - 1, 0]");
    CHECK(em_shape_numel(EM_SHAPE((int64_t)1 << 31, (int64_t)1 << 31)) == (int64_t)1 << 62,
          "numel of [2^31, 2^31]");
    CHECK(em_shape_numel(EM_SHAPE(0, 5)) == 0 && em_shape_numel(EM_SCALAR) == 1,
          "numel of [0, 5] and []");
    CHECK(em_shape_numel(EM_SHAPE(2, -3)) == -1, "numel of a negative dim");
    CHECK(em_shape_numel((em_shape){.rank = 9}) == -1, "numel of rank 9");

    /* narrow past the end is an error, not an empty view */
    FAILS("em_narrow", em_narrow(x, 0, INT64_MAX, 2));
    FAILS("em_narrow", em_narrow(x, 1, 2, INT64_MAX));
    FAILS("em_narrow", em_narrow(x, 1, INT64_MIN, 1));
    em_tensor *n = em_narrow(x, 1, 4, 0); /* an empty view at the end is fine */
    CHECK(shape_is(n, EM_SHAPE(1, 0, 2, 2)), "narrow(x, 1, 4, 0)");
    em_clear_error();

    /* slice with a huge end and step: one row */
    em_tensor *s = em_slice(x, 0, 0, INT64_MAX, INT64_MAX);
    CHECK(shape_is(s, EM_SHAPE(1, 4, 2, 2)), "slice(x, 0, 0, MAX, MAX) keeps its one row");
    s = em_slice(x, 1, 1, INT64_MAX, INT64_MAX);
    CHECK(shape_is(s, EM_SHAPE(1, 1, 2, 2)), "slice(x, 1, 1, MAX, MAX) is row 1");
    CHECK(s && em_get_f64(s, (int64_t[]){0, 0, 1, 1}) == em_get_f64(x, (int64_t[]){0, 1, 1, 1}),
          "slice(x, 1, 1, MAX, MAX) reads row 1");
    s = em_slice(x, 1, INT64_MIN, INT64_MAX, 3);
    CHECK(shape_is(s, EM_SHAPE(1, 2, 2, 2)), "slice(x, 1, MIN, MAX, 3): rows 0 and 3");
    CHECK(s && em_get_f64(s, (int64_t[]){0, 1, 0, 0}) == em_get_f64(x, (int64_t[]){0, 3, 0, 0}),
          "slice(x, 1, MIN, MAX, 3) reads row 3");
    em_clear_error();

    /* randint over the whole int64 range: refused (it cannot be drawn), not all INT64_MIN */
    FAILS("em_randint", em_randint(INT64_MIN, INT64_MAX, EM_SHAPE(4), EM_I64, EM_CPU));
    FAILS("em_randint", em_randint(INT64_MIN, 0, EM_SHAPE(4), EM_I64, EM_CPU)); /* 2^63 values */
    em_tensor *r = em_randint(INT64_MIN + 1, 0, EM_SHAPE(64), EM_I64, EM_CPU);
    int64_t rv[64];
    bool spread = r && em_to_data(r, rv, EM_I64, 64) == EM_OK;
    int64_t lo = 0, hi = INT64_MIN;
    for (int i = 0; spread && i < 64; i++) {
        spread = rv[i] < 0;
        lo = rv[i] < lo ? rv[i] : lo;
        hi = rv[i] > hi ? rv[i] : hi;
    }
    CHECK(spread && lo < INT64_MIN / 2 && hi > INT64_MIN / 2,
          "randint(MIN + 1, 0) spreads over [MIN + 1, 0)");
    FAILS("em_randint", em_randint(0, 300, EM_SHAPE(4), EM_U8, EM_CPU));
    FAILS("em_randint", em_randint(-129, 0, EM_SHAPE(4), EM_I8, EM_CPU));
    FAILS("em_randint", em_randint(0, (1 << 24) + 2, EM_SHAPE(4), EM_F32, EM_CPU));
    r = em_randint(-128, 128, EM_SHAPE(4), EM_I8, EM_CPU);
    CHECK(r != NULL, "randint(-128, 128) fits i8");
    em_clear_error();

    /* expand to [2^62, 2^62] cannot be: 2^124 elements */
    em_tensor *one = em_scalar(1, EM_F32, EM_CPU);
    FAILS("em_expand", em_expand(one, EM_SHAPE((int64_t)1 << 62, (int64_t)1 << 62)));
    em_tensor *big = em_expand(one, EM_SHAPE((int64_t)1 << 31, (int64_t)1 << 31));
    CHECK(big && em_tensor_numel(big) == (int64_t)1 << 62, "expand to [2^31, 2^31]: a view");
    FAILS("em_contiguous", em_contiguous(big)); /* 2^64 bytes */
    em_clear_error();

    /* pads past int64: an error before any overflow */
    int64_t pads[4] = {INT64_MAX, INT64_MAX, 0, 0};
    FAILS("em_pad", em_pad(x, pads, 2, EM_PAD_CONSTANT, 0));
    em_tensor *w = F(EM_SHAPE(2, 4, 1, 1));
    FAILS("em_conv2d",
          em_conv2d(x, w, NULL, (em_conv_opts){.pad_lo = {INT64_MAX, 1}, .pad_hi = {1, 1}}));
    FAILS("em_conv2d", em_conv2d(x, w, NULL, (em_conv_opts){.pad_lo = {1, (int64_t)1 << 62}}));
    em_scope_end();
}

/* ---- allocation limits ------------------------------------------------------------------- */

static void test_limits(void)
{
    em_scope_begin();
    args[0] = '\0';
    /* the configured cap (64 MiB here): 16 Mi f32 fit, one more element does not */
    em_tensor *t = em_empty(EM_SHAPE(16 << 20), EM_F32, EM_CPU);
    CHECK(t != NULL, "64 MiB under a 64 MiB cap: %s", em_last_error());
    em_release(t);
    em_clear_error();
    FAILS("em_empty", em_empty(EM_SHAPE((16 << 20) + 1), EM_F32, EM_CPU));
    t = em_zeros(EM_SHAPE((16 << 20) + 1), EM_F32, EM_CPU);
    CHECK(!t && em_last_status() == EM_ERR_OOM && strstr(em_last_error(), "67108868 bytes") &&
              strstr(em_last_error(), "max_tensor_mb"),
          "the cap's message names the size and the key: %s", em_last_error());
    em_clear_error();

    /* without a cap, the device's memory: a PiB tensor fails at once, allocating nothing */
    CHECK(em_config_set("max_tensor_mb", NULL) == EM_OK, "lift the cap");
    em_mem_stats before = em_mem_get_stats();
    t = em_empty(EM_SHAPE((int64_t)1 << 48), EM_F32, EM_CPU);
    CHECK(!t && em_last_status() == EM_ERR_OOM && strstr(em_last_error(), "cpu's memory") &&
              strstr(em_last_error(), "1125899906842624 bytes"),
          "a PiB tensor: %s", em_last_error());
    em_clear_error();
    /* a 2^31 x 2^31 Linear: refused before any parameter is made (the bias alone is 8 GiB) */
    em_module *lin = em_linear_new((int64_t)1 << 31, (int64_t)1 << 31, EM_CPU);
    CHECK(!lin && names(em_last_error(), "em_linear_new"), "em_linear_new(2^31, 2^31): %s",
          em_last_error());
    em_clear_error();
    lin = em_linear_new((int64_t)1 << 20, (int64_t)1 << 20, EM_CPU); /* 4 TiB of weight */
    CHECK(!lin && em_last_status() == EM_ERR_OOM && names(em_last_error(), "em_linear_new"),
          "em_linear_new(2^20, 2^20): %s", em_last_error());
    em_clear_error();
    em_mem_stats after = em_mem_get_stats();
    CHECK(after.peak_bytes - before.peak_bytes < (1 << 20) &&
              after.current_bytes == before.current_bytes,
          "refused tensors allocate nothing (peak grew by %lld bytes)",
          (long long)(after.peak_bytes - before.peak_bytes));
    CHECK(em_config_set("max_tensor_mb", "-1") == EM_ERR_INVALID_ARG, "a negative cap");
    em_clear_error();
    CHECK(em_config_set("max_tensor_mb", "64") == EM_OK, "cap again");
    em_scope_end();
}

/* ---- core.h ------------------------------------------------------------------------------ */

static void count_range(void *ctx, int64_t b, int64_t e)
{
    __atomic_fetch_add((int64_t *)ctx, e - b, __ATOMIC_RELAXED);
}

static void test_core(void)
{
    void *p = em_alloc(SIZE_MAX);
    CHECK(!p && em_last_status() == EM_ERR_OOM, "em_alloc(SIZE_MAX)");
    em_clear_error();
    p = em_calloc(SIZE_MAX - 63);
    CHECK(!p && em_last_status() == EM_ERR_OOM, "em_calloc(SIZE_MAX - 63)");
    em_clear_error();
    p = em_alloc(0);
    em_free(p);
    em_clear_error();

    /* the loop covers [0, n) exactly whatever the grain */
    const int64_t ns[] = {0, 1, 1000, -1, INT64_MIN};
    const int64_t grains[] = {0, 1, -1, INT64_MAX, INT64_MIN, 7};
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 6; b++) {
            int64_t got = 0;
            em_parallel_for(ns[a], grains[b], count_range, &got);
            CHECK(got == (ns[a] > 0 ? ns[a] : 0), "parallel_for(%lld, %lld) covered %lld",
                  (long long)ns[a], (long long)grains[b], (long long)got);
        }

    const uint64_t seeds[] = {0, 1, UINT64_MAX, (uint64_t)1 << 63, (uint64_t)1 << 32};
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 5; j++) {
            double u = em_rng_uniform_at(seeds[i], seeds[j], seeds[(i + j) % 5]);
            double z = em_rng_normal_at(seeds[i], seeds[j], seeds[(i + j) % 5]);
            (void)em_rng_u32_at(seeds[i], seeds[j], seeds[(i + j) % 5]);
            CHECK(u >= 0 && u < 1 && isfinite(z), "rng at (%llu, %llu)",
                  (unsigned long long)seeds[i], (unsigned long long)seeds[j]);
        }
    em_rng_state st = em_rng_get_state();
    em_rng_set_state((em_rng_state){.seed = UINT64_MAX, .offset = UINT64_MAX - 1});
    (void)em_rng_reserve(UINT64_MAX);
    em_tensor *r = em_rand(EM_SHAPE(5), EM_F32, EM_CPU); /* the offset wraps: still numbers */
    CHECK(r != NULL, "rand after the offset wrapped");
    em_release(r);
    em_seed(UINT64_MAX);
    em_rng_set_state(st);
    uint32_t ctr[4] = {UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX}, key[2] = {UINT32_MAX, 0};
    uint32_t out[4];
    em_philox4x32(ctr, key, out);
    em_clear_error();

    CHECK(em_config_set("store_max_header", "9223372036854775807") == EM_OK &&
              em_config_get_int("store_max_header") == INT64_MAX,
          "config int INT64_MAX");
    CHECK(em_config_set("store_max_header", "9223372036854775808") == EM_ERR_INVALID_ARG &&
              em_config_get_int("store_max_header") == INT64_MAX,
          "config int past INT64_MAX refused");
    em_clear_error();
    em_config_set("store_max_header", NULL);
    em_clear_error();

    const int dts[] = {-1, EM_DTYPE_COUNT, INT_MAX, INT_MIN};
    for (int i = 0; i < 4; i++) {
        CHECK(!em_dtype_valid(dts[i]), "dtype %d invalid", dts[i]);
        CHECK(em_dtype_size((em_dtype)dts[i]) == 0, "size of dtype %d", dts[i]);
        CHECK(!strcmp(em_dtype_name((em_dtype)dts[i]), "?"), "name of dtype %d", dts[i]);
        CHECK(!em_dtype_is_float((em_dtype)dts[i]) && !em_dtype_is_int((em_dtype)dts[i]),
              "kind of dtype %d", dts[i]);
        (void)em_dtype_promote((em_dtype)dts[i], EM_F32);
        (void)em_dtype_promote(EM_I8, (em_dtype)dts[i]);
    }
    em_clear_error();
}

/* ---- shapes, devices, metadata, data in and out ------------------------------------------ */

static void test_meta(void)
{
    em_scope_begin();
    char buf[64];
    const int ranks[] = {-1, 0, 8, 9, INT_MAX, INT_MIN};
    for (int i = 0; i < 6; i++) {
        em_shape s = {.rank = ranks[i]};
        for (int d = 0; d < EM_MAX_RANK; d++) s.dims[d] = V64[d % N64];
        em_shape_str(s, buf, sizeof buf);
        em_shape_str(s, buf, 1);
        CHECK(buf[0] == '\0', "shape_str with cap 1");
        (void)em_shape_equal(s, s);
        int64_t n = em_shape_numel(s);
        CHECK(ranks[i] < 0 || ranks[i] > 8 ? n == -1 : n >= -1, "numel of rank %d", ranks[i]);
    }
    for (int i = 0; i < N64; i++)
        for (int j = 0; j < N64; j++) {
            int64_t a = V64[i], b = V64[j], want;
            bool fits = a >= 0 && b >= 0 && !__builtin_mul_overflow(a ? a : 1, b ? b : 1, &want);
            want = a && b ? want : 0;
            CHECK(em_shape_numel(EM_SHAPE(a, b)) == (fits ? want : -1), "numel of [%lld, %lld]",
                  (long long)a, (long long)b);
        }

    const em_device devs[] = {{0, INT16_MAX}, {0, -1}, {INT16_MAX, 0}, {-1, 0}, {7, 3}};
    for (int i = 0; i < 5; i++) {
        em_device d = devs[i];
        ARGS("device {%d, %d}", d.backend, d.index);
        em_device_str(d, buf, sizeof buf);
        em_device_str(d, buf, 0);
        em_device_props props;
        em_device_mem_stats ms;
        S("em_device_get_props", em_device_get_props(d, &props));
        S("em_device_get_mem_stats", em_device_get_mem_stats(d, &ms));
        CHECK(em_device_empty_cache(d) == -1, "empty_cache of a missing device");
        em_clear_error();
        S("em_device_reset_peak", em_device_reset_peak(d));
        S("em_device_sync", em_device_sync(d));
        S("em_device_persistent_begin", em_device_persistent_begin(d));
        S("em_device_persistent_end", em_device_persistent_end(d));
        S("em_device_set_memory_limit", em_device_set_memory_limit(d, INT64_MAX));
        em_stream *s = em_stream_new(d);
        outcome_(s != NULL, "em_stream_new", "em_stream_new(d)", __LINE__);
        em_stream_free(s);
        em_event *e = em_event_new(d);
        outcome_(e != NULL, "em_event_new", "em_event_new(d)", __LINE__);
        em_event_free(e);
        S("em_graph_capture_begin", em_graph_capture_begin(d));
        CHECK(!em_graph_capturing(d), "not capturing");
        em_clear_error();
    }
    for (int i = 0; i < NINT; i++) {
        em_stream *s = em_stream_new_priority(EM_CPU, VINT[i]);
        CHECK(s && em_stream_priority(s) == 0, "CPU stream with priority %d", VINT[i]);
        em_stream_free(s);
        em_clear_error();
    }
    const int64_t limits[] = {0, -1, INT64_MAX, INT64_MIN};
    for (int i = 0; i < 4; i++) {
        ARGS("limit %lld", (long long)limits[i]);
        /* the CPU has no pool limit: an error naming the function, whatever the value */
        CHECK(em_device_set_memory_limit(EM_CPU, limits[i]) != EM_OK &&
                  names(em_last_error(), "em_device_set_memory_limit"),
              "set_memory_limit(cpu, %lld)", (long long)limits[i]);
        em_clear_error();
    }

    em_tensor *x = F(EM_SHAPE(2, 3));
    for (int i = 0; i < NINT; i++) {
        int d = VINT[i];
        ARGS("d %d", d);
        int64_t v = em_tensor_dim(x, d);
        outcome_(v != -1, "em_tensor_dim", "em_tensor_dim(x, d)", __LINE__);
        v = em_tensor_stride(x, d);
        outcome_(!em_failed(), "em_tensor_stride", "em_tensor_stride(x, d)", __LINE__);
    }
    for (int i = 0; i < N64; i++)
        for (int j = 0; j < N64; j++) {
            int64_t idx[2] = {V64[i], V64[j]};
            ARGS("index [%lld, %lld]", (long long)idx[0], (long long)idx[1]);
            double v = em_get_f64(x, idx);
            bool in = idx[0] >= -2 && idx[0] < 2 && idx[1] >= -3 && idx[1] < 3;
            CHECK(in != isnan(v), "get_f64 [%s]", args);
            outcome_(in, "em_get_f64", "em_get_f64(x, idx)", __LINE__);
        }
    double out[6];
    for (int i = 0; i < N64; i++) {
        ARGS("count %lld", (long long)V64[i]);
        /* out holds 6; a larger count only promises room, which is never used past numel */
        S("em_to_data", em_to_data(x, out, EM_F64, V64[i]));
    }

    float data[4] = {1, 2, 3, 4};
    for (int i = 0; i < N64; i++)
        for (int j = 0; j < N64; j++) {
            em_shape s = EM_SHAPE(V64[i], V64[j]);
            int64_t n = em_shape_numel(s);
            if (n > 4) continue; /* would read past data */
            ARGS("shape [%lld, %lld]", (long long)V64[i], (long long)V64[j]);
            T("em_from_data", em_from_data(data, EM_F32, s, EM_F64, EM_CPU));
            T("em_from_f32", em_from_f32(data, s));
            T("em_from_blob", em_from_blob(data, EM_F32, s, NULL, NULL));
        }
    for (int i = 0; i < N64; i++) {
        em_shape s = EM_SHAPE(V64[i], V64[i]);
        if (em_shape_numel(s) <= 4 && em_shape_numel(s) >= 0) continue;
        ARGS("shape [%lld, %lld]", (long long)V64[i], (long long)V64[i]);
        /* shapes larger than the data: refused by size (the caller must own numel elements) */
        if (em_shape_numel(s) < 0) {
            T("em_from_f64", em_from_f64((const double *)data, s));
            T("em_from_i64", em_from_i64((const int64_t *)data, s));
            T("em_from_blob", em_from_blob(data, EM_F32, s, NULL, NULL));
        }
    }

    /* print options: any threshold, edge count and precision */
    em_tensor *big = F(EM_SHAPE(5, 40));
    for (int i = 0; i < N64; i++)
        for (int j = 0; j < NINT; j++) {
            em_print_options o = {
                .threshold = V64[i], .edge_items = V64[(i + j) % N64], .precision = VINT[j]};
            char *str = em_tensor_format(big, o);
            CHECK(str && strstr(str, "shape:  [5, 40]"), "format with %lld, %lld, %d",
                  (long long)o.threshold, (long long)o.edge_items, o.precision);
            em_free(str);
            em_clear_error();
        }
    em_scope_end();
}

/* ---- creation ---------------------------------------------------------------------------- */

static void test_creation(void)
{
    em_scope_begin();
    for (int i = 0; i < N64; i++)
        for (int j = 0; j < N64; j++) {
            em_shape s = EM_SHAPE(V64[i], V64[j]);
            ARGS("shape [%lld, %lld]", (long long)V64[i], (long long)V64[j]);
            T("em_empty", em_empty(s, EM_F32, EM_CPU));
            T("em_zeros", em_zeros(s, EM_I8, EM_CPU));
            T("em_ones", em_ones(s, EM_F64, EM_CPU));
            T("em_full", em_full(s, 2, EM_BOOL, EM_CPU));
            T("em_rand", em_rand(s, EM_F16, EM_CPU));
            T("em_randn", em_randn(s, EM_F32, EM_CPU));
            T("em_rand_uniform", em_rand_uniform(s, -1, 1, EM_BF16, EM_CPU));
            T("em_rand_normal", em_rand_normal(s, 0, 1, EM_F32, EM_CPU));
            T("em_bernoulli_p", em_bernoulli_p(s, 0.5, EM_U8, EM_CPU));
            T("em_randint", em_randint(V64[i], V64[j], EM_SHAPE(3), EM_I64, EM_CPU));
            T("em_randint", em_randint(0, 9, s, EM_I32, EM_CPU));
            T("em_eye", em_eye(V64[i], V64[j], EM_F32, EM_CPU));
        }
    for (int i = 0; i < N64; i++) {
        ARGS("steps %lld", (long long)V64[i]);
        T("em_linspace", em_linspace(0, 1, V64[i], EM_F32, EM_CPU));
    }
    const double ends[] = {0, 1, -1, 1e12, 1e19, -1e19, 1e300, INFINITY, NAN, 9.3e18};
    for (int i = 0; i < 10; i++)
        for (int j = 0; j < 10; j++)
            for (int k = 0; k < 10; k++) {
                ARGS("arange(%g, %g, %g)", ends[i], ends[j], ends[k]);
                T("em_arange", em_arange(ends[i], ends[j], ends[k], EM_I64, EM_CPU));
            }
    /* each value of an arange within i64 is exact */
    em_tensor *a = em_arange(9.2e18, 9.21e18, 4e15, EM_I64, EM_CPU);
    CHECK(a && em_tensor_numel(a) == 3 && em_get_f64(a, (int64_t[]){2}) == 9.208e18,
          "arange near INT64_MAX: %s", em_last_error());
    em_clear_error();

    int64_t iv[3] = {0, 2, 1};
    em_tensor *idx = I(EM_SHAPE(3), iv);
    for (int i = 0; i < N64; i++) {
        ARGS("classes %lld", (long long)V64[i]);
        T("em_one_hot", em_one_hot(idx, V64[i]));
    }
    int64_t ext[2] = {INT64_MAX, INT64_MIN};
    for (int i = 0; i < 2; i++) {
        ARGS("index %lld", (long long)ext[i]);
        FAILS("em_one_hot", em_one_hot(I(EM_SHAPE(1), &ext[i]), -1));
        FAILS("em_one_hot", em_one_hot(I(EM_SHAPE(1), &ext[i]), 5));
    }
    em_tensor *m = F(EM_SHAPE(3, 4));
    for (int i = 0; i < N64; i++) {
        ARGS("k %lld", (long long)V64[i]);
        T("em_tril", em_tril(m, V64[i]));
        T("em_triu", em_triu(m, V64[i]));
    }
    em_tensor *lower = em_tril(m, INT64_MIN), *upper = em_triu(m, INT64_MIN);
    double lo_sum = lower ? em_item_f64(em_sum(em_abs(lower), EM_ALL, false)) : -1;
    CHECK(lo_sum == 0, "tril(MIN) is all zeros");
    CHECK(upper && h_same_bytes(upper, m), "triu(MIN) is the whole matrix");
    em_clear_error();
    em_scope_end();
}

/* ---- views ------------------------------------------------------------------------------- */

static void test_views(void)
{
    em_scope_begin();
    em_tensor *x = F(EM_SHAPE(2, 3, 4));
    em_tensor *e = em_zeros(EM_SHAPE(0, 3), EM_F32, EM_CPU);
    for (int i = 0; i < N64; i++)
        for (int j = 0; j < N64; j++) {
            em_shape s = EM_SHAPE(V64[i], V64[j]);
            ARGS("shape [%lld, %lld]", (long long)V64[i], (long long)V64[j]);
            T("em_reshape", em_reshape(x, s));
            T("em_view", em_view(x, s));
            T("em_reshape", em_reshape(e, s));
            T("em_expand", em_expand(e, s));
            T("em_expand", em_expand(em_view(x, EM_SHAPE(24, 1)), s));
            T("em_expand", em_expand(x, EM_SHAPE(V64[i], V64[j], 3, 4)));
            em_tensor *ex = em_expand(em_scalar(1, EM_F32, EM_CPU), s);
            bool fits = em_shape_numel(s) >= 0;
            CHECK((ex != NULL) == fits, "expand of a scalar to [%s]", args);
            em_clear_error();
        }
    for (int i = 0; i < NINT; i++)
        for (int j = 0; j < NINT; j++) {
            int a = VINT[i], b = VINT[j];
            ARGS("dims %d, %d", a, b);
            T("em_flatten", em_flatten(x, a, b));
            T("em_transpose", em_transpose(x, a, b));
            T("em_permute", em_permute(x, EM_AXES(a, b, 0)));
            T("em_squeeze", em_squeeze(x, EM_AXES(a, b)));
            T("em_flip", em_flip(x, EM_AXES(a, b)));
        }
    for (int i = 0; i < NINT; i++) {
        ARGS("dim %d", VINT[i]);
        T("em_unsqueeze", em_unsqueeze(x, VINT[i]));
        em_axes bad = {.n = VINT[i]};
        T("em_squeeze", em_squeeze(x, bad));
        T("em_flip", em_flip(x, bad));
        T("em_permute", em_permute(x, bad));
    }
    for (int d = -4; d < 4; d++)
        for (int i = 0; i < N64; i++)
            for (int j = 0; j < N64; j++) {
                int64_t a = V64[i], b = V64[j];
                ARGS("dim %d, %lld, %lld", d, (long long)a, (long long)b);
                T("em_narrow", em_narrow(x, d, a, b));
                T("em_select", em_select(x, d, a));
                T("em_unfold", em_unfold(x, d, a, b));
                for (int k = 0; k < N64; k++) {
                    ARGS("dim %d, %lld, %lld, step %lld", d, (long long)a, (long long)b,
                         (long long)V64[k]);
                    em_tensor *s = em_slice(x, d, a, b, V64[k]);
                    outcome_(s != NULL, "em_slice", "em_slice(x, d, a, b, step)", __LINE__);
                    if (s) { /* a view on x's own elements (tn_view_of checks every view) */
                        em_tensor *c = em_contiguous(s);
                        CHECK(c != NULL, "slice [%s] reads back", args);
                        em_release(c);
                    }
                    em_release(s);
                    em_clear_error();
                }
            }
    /* a huge step on one element, then a copy: the single element, whatever the step */
    em_tensor *u = em_unfold(x, 2, 4, INT64_MAX);
    CHECK(shape_is(u, EM_SHAPE(2, 3, 1, 4)), "unfold(x, 2, 4, MAX) is one window");
    em_tensor *u2 = em_unfold(x, 2, 1, INT64_MAX);
    CHECK(shape_is(u2, EM_SHAPE(2, 3, 1, 1)), "unfold(x, 2, 1, MAX) is one window of 1");
    em_clear_error();
    const int dts[] = {-1, EM_DTYPE_COUNT, INT_MAX, INT_MIN};
    for (int i = 0; i < 4; i++) {
        ARGS("dtype %d", dts[i]);
        T("em_cast", em_cast(x, (em_dtype)dts[i]));
    }
    em_scope_end();
}

/* ---- reductions and scans ---------------------------------------------------------------- */

static void test_reduce(void)
{
    em_scope_begin();
    em_tensor *x = F(EM_SHAPE(2, 3, 4));
    for (int i = 0; i < NINT; i++)
        for (int j = 0; j < NINT; j++) {
            em_axes ax = EM_AXES(VINT[i], VINT[j]);
            ARGS("dims %d, %d", VINT[i], VINT[j]);
            T("em_sum", em_sum(x, ax, true));
            T("em_mean", em_mean(x, ax, false));
            T("em_prod", em_prod(x, ax, false));
            T("em_max", em_max(x, ax, false));
            T("em_min", em_min(x, ax, true));
            T("em_any", em_any(x, ax, false));
            T("em_all", em_all(x, ax, false));
            T("em_count_nonzero", em_count_nonzero(x, ax, false));
            T("em_logsumexp", em_logsumexp(x, ax, false));
            T("em_norm", em_norm(x, 2, ax, false));
        }
    for (int i = 0; i < NINT; i++) {
        em_axes bad = {.n = VINT[i], .d = {0, 1}};
        ARGS("n %d", VINT[i]);
        T("em_sum", em_sum(x, bad, false));
        T("em_var", em_var(x, bad, 1, false));
    }
    for (int i = 0; i < N64; i++) {
        ARGS("correction %lld", (long long)V64[i]);
        T("em_var", em_var(x, EM_AXES(1), V64[i], false));
        T("em_std", em_std(x, EM_ALL, V64[i], true));
    }
    for (int i = 0; i < NINT; i++) {
        int d = VINT[i];
        em_tensor *v = NULL, *ix = NULL;
        ARGS("dim %d", d);
        S("em_max_dim", em_max_dim(x, d, false, &v, &ix));
        em_release(v), em_release(ix), v = ix = NULL;
        S("em_min_dim", em_min_dim(x, d, true, &v, &ix));
        em_release(v), em_release(ix), v = ix = NULL;
        T("em_argmax", em_argmax(x, d, false));
        T("em_argmin", em_argmin(x, d, true));
        T("em_cumsum", em_cumsum(x, d));
        T("em_cumprod", em_cumprod(x, d));
        S("em_cummax", em_cummax(x, d, &v, &ix));
        em_release(v), em_release(ix), v = ix = NULL;
        S("em_cummin", em_cummin(x, d, &v, NULL));
        em_release(v), v = NULL;
        T("em_softmax", em_softmax(x, d));
        T("em_log_softmax", em_log_softmax(x, d));
        S("em_sort", em_sort(x, d, false, &v, &ix));
        em_release(v), em_release(ix), v = ix = NULL;
        T("em_argsort", em_argsort(x, d, true));
        S("em_median", em_median(x, d, false, &v, &ix));
        em_release(v), em_release(ix), v = ix = NULL;
        for (int k = 0; k < N64; k++) {
            ARGS("dim %d, k %lld", d, (long long)V64[k]);
            S("em_topk", em_topk(x, V64[k], d, true, &v, &ix));
            em_release(v), em_release(ix), v = ix = NULL;
        }
    }
    /* broadcasting of expanded views whose product overflows */
    em_tensor *one = em_ones(EM_SHAPE(1, 1), EM_F32, EM_CPU);
    em_tensor *col = em_expand(one, EM_SHAPE((int64_t)1 << 40, 1));
    em_tensor *row = em_expand(one, EM_SHAPE(1, (int64_t)1 << 40));
    args[0] = '\0';
    FAILS("em_add", em_add(col, row));
    em_tensor *yes = em_expand(em_ones(EM_SHAPE(1, 1), EM_BOOL, EM_CPU), EM_SHAPE(1, 1 << 20));
    FAILS("em_where", em_where(yes, col, row));
    FAILS("em_gt_scalar", em_gt_scalar(col, 0)); /* 1 TiB of bool */
    em_tensor *bm =
        em_expand(em_ones(EM_SHAPE(1, 1, 1), EM_F32, EM_CPU), EM_SHAPE((int64_t)1 << 40, 1, 1));
    em_tensor *bm2 = em_expand(em_ones(EM_SHAPE(1, 1, 1, 1), EM_F32, EM_CPU),
                               EM_SHAPE((int64_t)1 << 40, 1, 1, 1));
    FAILS("em_matmul", em_matmul(bm, bm2));
    em_scope_end();
}

/* ---- indexing ---------------------------------------------------------------------------- */

static void test_index(void)
{
    em_scope_begin();
    em_tensor *x = F(EM_SHAPE(3, 4));
    em_tensor *w = F(EM_SHAPE(5, 2));
    for (int i = 0; i < N64; i++) {
        int64_t v = V64[i];
        bool in3 = v >= 0 && v < 3;
        ARGS("index value %lld", (long long)v);
        em_tensor *ix1 = I(EM_SHAPE(1), &v);
        int64_t two[2] = {v, 0};
        em_tensor *ix2 = I(EM_SHAPE(1, 2), two);
        em_tensor *r = em_gather(x, 0, ix2);
        CHECK((r != NULL) == in3, "gather with %lld", (long long)v);
        outcome_(r != NULL, "em_gather", "em_gather(x, 0, ix2)", __LINE__);
        r = em_scatter(x, 0, ix2, em_ones(EM_SHAPE(1, 2), EM_F32, EM_CPU), EM_SCATTER_ADD);
        CHECK((r != NULL) == in3, "scatter with %lld", (long long)v);
        outcome_(r != NULL, "em_scatter", "em_scatter(...)", __LINE__);
        r = em_index_select(x, 0, ix1);
        CHECK((r != NULL) == in3, "index_select with %lld", (long long)v);
        outcome_(r != NULL, "em_index_select", "em_index_select(x, 0, ix1)", __LINE__);
        r = em_index_add(x, 0, ix1, em_ones(EM_SHAPE(1, 4), EM_F32, EM_CPU), 1);
        CHECK((r != NULL) == in3, "index_add with %lld", (long long)v);
        outcome_(r != NULL, "em_index_add", "em_index_add(...)", __LINE__);
        r = em_embedding(w, ix1);
        CHECK((r != NULL) == (v >= 0 && v < 5), "embedding with %lld", (long long)v);
        outcome_(r != NULL, "em_embedding", "em_embedding(w, ix1)", __LINE__);
        em_tensor *c = em_ones(EM_SHAPE(1), EM_I64, EM_CPU);
        T("em_one_hot", em_one_hot(c, v));
    }
    for (int i = 0; i < NINT; i++) {
        int64_t z = 0;
        ARGS("dim %d", VINT[i]);
        T("em_gather", em_gather(x, VINT[i], I(EM_SHAPE(1, 1), &z)));
        T("em_index_select", em_index_select(x, VINT[i], I(EM_SHAPE(1), &z)));
    }
    em_tensor *src = em_ones(EM_SHAPE(1, 1), EM_F32, EM_CPU);
    for (int i = 0; i < N64; i++)
        for (int j = 0; j < N64; j++)
            for (int k = 0; k < N64; k += 2) {
                int64_t st[2] = {V64[i], 0}, en[2] = {V64[j], 1}, sp[2] = {V64[k], 1};
                ARGS("start %lld end %lld step %lld", (long long)V64[i], (long long)V64[j],
                     (long long)V64[k]);
                T("em_slice_assign", em_slice_assign(x, st, en, sp, src));
            }
    em_scope_end();
}

/* ---- combine ----------------------------------------------------------------------------- */

static void test_combine(void)
{
    em_scope_begin();
    em_tensor *x = F(EM_SHAPE(2, 3));
    em_tensor *xs[2] = {x, x};
    em_tensor *out[8] = {0};
    for (int i = 0; i < NINT; i++) {
        int v = VINT[i];
        ARGS("n/dim %d", v);
        if (v <= 2) T("em_cat", em_cat(xs, v, 0));
        if (v <= 2) T("em_stack", em_stack(xs, v, 0));
        T("em_cat", em_cat(xs, 2, v));
        T("em_stack", em_stack(xs, 2, v));
        int got = 0;
        /* chunk writes at most min(chunks, size of dim) views */
        if (S("em_chunk", em_chunk(x, v, 1, out, &got)))
            for (int k = 0; k < got; k++) em_release(out[k]);
        if (S("em_chunk", em_chunk(x, 2, v, out, &got)))
            for (int k = 0; k < got; k++) em_release(out[k]);
        int64_t sz[2] = {1, 2};
        if (v <= 2 && S("em_split_sizes", em_split_sizes(x, sz, v, 1, out)))
            for (int k = 0; k < v; k++) em_release(out[k]);
    }
    for (int i = 0; i < N64; i++) {
        int got = 0;
        ARGS("size %lld", (long long)V64[i]);
        if (S("em_split", em_split(x, V64[i], 1, out, 8, &got)))
            for (int k = 0; k < got; k++) em_release(out[k]);
        for (int j = 0; j < N64; j++) {
            int64_t sz[2] = {V64[i], V64[j]};
            ARGS("sizes %lld, %lld", (long long)V64[i], (long long)V64[j]);
            if (S("em_split_sizes", em_split_sizes(x, sz, 2, 1, out)))
                em_release(out[0]), em_release(out[1]);
            em_shape reps = EM_SHAPE(V64[i], V64[j]);
            T("em_repeat", em_repeat(x, reps));
            T("em_tile", em_tile(x, reps));
            int64_t shifts[2] = {V64[i], V64[j]};
            int dims[2] = {0, 1};
            em_tensor *r = em_roll(x, shifts, dims, 2);
            outcome_(r != NULL, "em_roll", "em_roll(x, shifts, dims, 2)", __LINE__);
            if (r) { /* the same as rolling by the shifts modulo the sizes */
                int64_t small[2] = {((V64[i] % 2) + 2) % 2, ((V64[j] % 3) + 3) % 3};
                em_tensor *want = em_roll(x, small, dims, 2);
                CHECK(h_same_bytes(r, want), "roll by [%s]", args);
            }
            em_release(r);
            em_clear_error();
            T("em_roll", em_roll(x, shifts, NULL, 0));
            for (int mode = 0; mode < 4; mode++) {
                int64_t pads[4] = {V64[i], V64[j], V64[j], V64[i]};
                ARGS("pads %lld, %lld mode %d", (long long)V64[i], (long long)V64[j], mode);
                T("em_pad", em_pad(x, pads, 2, (em_pad_mode)mode, 0));
                T("em_pad", em_pad(x, pads, 1, (em_pad_mode)mode, 0));
            }
        }
    }
    for (int i = 0; i < NINT; i++) {
        ARGS("n %d", VINT[i]);
        int64_t shifts[20] = {0};
        int dims[20] = {0};
        if (VINT[i] <= 20) T("em_roll", em_roll(x, shifts, dims, VINT[i]));
        int64_t pads[16] = {0};
        if (VINT[i] <= 8) T("em_pad", em_pad(x, pads, VINT[i], EM_PAD_CONSTANT, 0));
    }
    em_scope_end();
}

/* ---- convolution, pooling, resampling, norms, signal ------------------------------------- */

static void test_nn_functional(void)
{
    em_scope_begin();
    em_tensor *x1 = F(EM_SHAPE(1, 2, 5)), *x2 = F(EM_SHAPE(1, 2, 5, 5));
    em_tensor *x3 = F(EM_SHAPE(1, 2, 3, 3, 3));
    em_tensor *w1 = F(EM_SHAPE(2, 2, 3)), *w2 = F(EM_SHAPE(2, 2, 3, 3));
    em_tensor *w3 = F(EM_SHAPE(2, 2, 1, 1, 1));
    for (int i = 0; i < N64; i++)
        for (int j = 0; j < N64; j++) {
            int64_t a = V64[i], b = V64[j];
            ARGS("%lld, %lld", (long long)a, (long long)b);
            em_conv_opts os[] = {
                {.stride = {a, b, a}},
                {.pad_lo = {a, b, 1}, .pad_hi = {b, a, 1}},
                {.dilation = {a, b, a}},
                {.out_pad = {a, b, 0}, .stride = {a, b, 2}},
                {.groups = a, .stride = {b, 1, 1}},
            };
            for (int k = 0; k < 5; k++) {
                T("em_conv1d", em_conv1d(x1, w1, NULL, os[k]));
                T("em_conv2d", em_conv2d(x2, w2, NULL, os[k]));
                T("em_conv3d", em_conv3d(x3, w3, NULL, os[k]));
                T("em_conv_transpose1d", em_conv_transpose1d(x1, w1, NULL, os[k]));
                T("em_conv_transpose2d", em_conv_transpose2d(x2, w2, NULL, os[k]));
                T("em_conv_transpose3d", em_conv_transpose3d(x3, w3, NULL, os[k]));
            }
            em_pool_opts ps[] = {
                {.kernel = {a, b, 2}},
                {.kernel = {3, 3, 3}, .stride = {a, b, a}},
                {.kernel = {a, a, a}, .pad = {b, b, b}},
                {.kernel = {2, 2, 2}, .dilation = {a, b, a}},
                {.kernel = {a, 2, 2}, .stride = {b, 1, 1}, .ceil_mode = true},
                {.kernel = {a, b, 2}, .pad = {a / 2, b / 2, 1}, .ceil_mode = true},
            };
            for (int k = 0; k < 6; k++) {
                em_tensor *ix = NULL;
                T("em_max_pool1d", em_max_pool1d(x1, ps[k], NULL));
                T("em_max_pool2d", em_max_pool2d(x2, ps[k], &ix));
                em_release(ix);
                T("em_max_pool3d", em_max_pool3d(x3, ps[k], NULL));
                T("em_avg_pool1d", em_avg_pool1d(x1, ps[k]));
                T("em_avg_pool2d", em_avg_pool2d(x2, ps[k]));
                T("em_avg_pool3d", em_avg_pool3d(x3, ps[k]));
            }
            T("em_adaptive_avg_pool1d", em_adaptive_avg_pool1d(x1, a));
            T("em_adaptive_avg_pool2d", em_adaptive_avg_pool2d(x2, a, b));
            T("em_adaptive_max_pool1d", em_adaptive_max_pool1d(x1, a, NULL));
            em_tensor *ix = NULL;
            T("em_adaptive_max_pool2d", em_adaptive_max_pool2d(x2, a, b, &ix));
            em_release(ix);
            T("em_interpolate", em_interpolate(x1, EM_SHAPE(a), EM_INTERP_BILINEAR, false));
            T("em_interpolate", em_interpolate(x2, EM_SHAPE(a, b), EM_INTERP_NEAREST, false));
            T("em_interpolate", em_interpolate(x2, EM_SHAPE(b, a), EM_INTERP_BICUBIC, true));
            int64_t ab[2] = {a, b}, one[2] = {1, 1}, k2[2] = {2, 2}, zero[2] = {0, 0};
            T("em_im2col", em_im2col(x2, ab, NULL, NULL, NULL));
            T("em_im2col", em_im2col(x2, k2, ab, NULL, NULL));
            T("em_im2col", em_im2col(x2, k2, NULL, ab, NULL));
            T("em_im2col", em_im2col(x2, k2, NULL, zero, ab));
            em_tensor *cols = em_im2col(x2, k2, NULL, NULL, NULL); /* [1, 8, 16] */
            int64_t five[2] = {5, 5};
            T("em_col2im", em_col2im(cols, ab, k2, NULL, NULL, NULL));
            T("em_col2im", em_col2im(cols, five, ab, NULL, NULL, NULL));
            T("em_col2im", em_col2im(cols, five, k2, ab, NULL, NULL));
            T("em_col2im", em_col2im(cols, five, k2, one, ab, NULL));
            T("em_col2im", em_col2im(cols, five, k2, one, zero, ab));
            em_release(cols);
        }
    em_tensor *xs = F(EM_SHAPE(1, 4, 2, 2)), *xz = em_zeros(EM_SHAPE(1, 0, 0, 0), EM_F32, EM_CPU);
    for (int i = 0; i < N64; i++) {
        int64_t r = V64[i];
        ARGS("r %lld", (long long)r);
        T("em_pixel_shuffle", em_pixel_shuffle(xs, r));
        T("em_pixel_unshuffle", em_pixel_unshuffle(xs, r));
        T("em_pixel_shuffle", em_pixel_shuffle(xz, r));
        T("em_pixel_unshuffle", em_pixel_unshuffle(xz, r));
        T("em_group_norm", em_group_norm(xs, r, NULL, NULL, 1e-5));
        for (int d = -3; d < 3; d++) {
            ARGS("dim %d, n %lld", d, (long long)r);
            T("em_rfft", em_rfft(x1, d, r));
            T("em_irfft", em_irfft(em_rfft(x1, -1, 0), d, r));
        }
    }
    for (int i = 0; i < NINT; i++) {
        ARGS("n_norm %d", VINT[i]);
        T("em_layer_norm", em_layer_norm(xs, VINT[i], NULL, NULL, 1e-5));
        T("em_rms_norm", em_rms_norm(xs, VINT[i], NULL, 1e-5));
        ARGS("dim %d", VINT[i]);
        T("em_rfft", em_rfft(x1, VINT[i], 4));
    }
    em_scope_end();
}

int main(void)
{
    h_init();
    em_config_set("max_tensor_mb", "64");
    test_reported();
    test_limits();
    test_core();
    test_meta();
    test_creation();
    test_views();
    test_reduce();
    test_index();
    test_combine();
    test_nn_functional();
    em_config_set("max_tensor_mb", NULL);
    return h_finish();
}
