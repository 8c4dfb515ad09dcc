/* Tensor layer: ownership and scopes, data in and out, printing, devices, error state, and
 * an allocation-failure walk through a realistic program. */
#include <string.h>

#include "harness.h"

static double first(const em_tensor *t)
{
    int64_t idx[EM_MAX_RANK] = {0};
    return em_get_f64(t, idx);
}

static void test_scopes(void)
{
    int64_t live0 = em_live_tensors();
    em_scope_begin();
    em_tensor *a = em_ones(EM_SHAPE(4), EM_F32, EM_CPU);
    em_tensor *b = em_reshape(a, EM_SHAPE(2, 2));
    CHECK(em_scope_depth() == 1, "depth 1");
    em_scope_begin();
    em_tensor *c = em_transpose(b, 0, 1);
    em_tensor *kept = em_keep(em_contiguous(c));
    em_zeros(EM_SHAPE(3), EM_F32, EM_CPU);
    em_scope_end();
    /* kept moved to the outer scope; c and the zeros were released */
    CHECK(em_live_tensors() == live0 + 3, "inner scope released its tensors (%lld live)",
          (long long)(em_live_tensors() - live0));
    CHECK(first(kept) == 1, "kept tensor usable");
    em_scope_end();
    CHECK(em_live_tensors() == live0, "outer scope released the kept tensor too");

    /* keep at depth 1 hands ownership to the caller */
    em_scope_begin();
    em_tensor *own = em_keep(em_full(EM_SHAPE(2), 3, EM_I32, EM_CPU));
    em_scope_end();
    CHECK(own && first(own) == 3, "owned tensor survives its scope");
    em_release(own);
    CHECK(em_live_tensors() == live0, "caller released it");

    /* release inside a scope is not a double free; a retained tensor outlives the scope */
    em_scope_begin();
    em_tensor *r = em_ones(EM_SHAPE(2), EM_F32, EM_CPU);
    em_release(r);
    em_tensor *rr = em_retain(em_ones(EM_SHAPE(2), EM_F32, EM_CPU));
    em_scope_end();
    CHECK(em_live_tensors() == live0 + 1, "retained tensor outlives the scope");
    em_release(rr);
    CHECK(em_live_tensors() == live0, "released");
    CHECK(em_scope_end() == EM_ERR_STATE, "scope_end without scope");
    CHECK_ERR(EM_ERR_STATE, "em_scope_end");

    /* a view keeps its storage alive after the base is released */
    em_tensor *base = em_arange(0, 6, 1, EM_F64, EM_CPU);
    em_tensor *view = em_slice(base, 0, 4, 6, 1);
    em_release(base);
    CHECK(first(view) == 4, "view outlives its base");
    em_release(view);
    CHECK(em_live_tensors() == live0, "no handles left");
}

static void test_data(void)
{
    em_scope_begin();
    float f[6] = {1.5f, -2, 3, 0.25f, 1e-3f, -7};
    em_tensor *t = em_from_f32(f, EM_SHAPE(2, 3));
    CHECK(t && em_tensor_dtype(t) == EM_F32 && em_tensor_numel(t) == 6, "from_f32");
    double out[6];
    CHECK(em_to_data(t, out, EM_F64, 6) == EM_OK, "to_data");
    int same = 0;
    for (int i = 0; i < 6; i++) same += out[i] == (double)f[i];
    CHECK(same == 6, "values round trip");
    /* reading through a transposed view gives row-major order of the view */
    em_tensor *tt = em_transpose(t, 0, 1);
    float back[6];
    em_to_data(tt, back, EM_F32, 6);
    CHECK(back[0] == 1.5f && back[1] == 0.25f && back[2] == -2 && back[5] == -7, "transposed read");
    CHECK(em_to_data(t, out, EM_F64, 5) != EM_OK, "buffer too small");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_to_data: buffer holds 5 elements, tensor [2, 3] has 6");
    /* dtype conversion on the way in */
    int64_t iv[3] = {1, 300, -2};
    em_tensor *u8 = em_from_data(iv, EM_I64, EM_SHAPE(3), EM_U8, EM_CPU);
    uint8_t ub[3];
    em_to_data(u8, ub, EM_U8, 3);
    CHECK(ub[0] == 1 && ub[1] == 44 && ub[2] == 254, "i64 -> u8 wraps");
    em_tensor *h = em_from_data(f, EM_F32, EM_SHAPE(6), EM_F16, EM_CPU);
    CHECK(h && em_item_f64(em_narrow(h, 0, 3, 1)) == 0.25, "f32 -> f16");
    CHECK(em_item_f64(t) != em_item_f64(t), "item of 6 elements is NaN");
    CHECK_ERR(EM_ERR_SHAPE, "em_item_f64");
    CHECK(em_item_i64(em_scalar(-3, EM_I8, EM_CPU)) == -3, "item_i64");
    int64_t idx[2] = {1, -1};
    CHECK(em_get_f64(t, idx) == -7, "get with negative index");
    idx[0] = 2;
    CHECK(isnan(em_get_f64(t, idx)), "get out of range");
    CHECK_ERR(EM_ERR_INDEX, "em_get_f64");
    CHECK(em_from_data(NULL, EM_F32, EM_SHAPE(2), EM_F32, EM_CPU) == NULL, "NULL data");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_from_data");
    em_tensor *z = em_from_data(NULL, EM_F32, EM_SHAPE(0, 4), EM_F32, EM_CPU);
    CHECK(z && em_tensor_numel(z) == 0, "NULL data is fine for an empty tensor");

    /* caller memory without a copy */
    static int freed;
    double blob[4] = {1, 2, 3, 4};
    em_tensor *bt = em_from_blob(blob, EM_F64, EM_SHAPE(2, 2), NULL, NULL);
    blob[3] = 40;
    CHECK(em_get_f64(bt, (int64_t[]){1, 1}) == 40, "from_blob shares memory");
    em_scope_end();
    (void)freed;

    /* metadata */
    em_scope_begin();
    em_tensor *m = em_zeros(EM_SHAPE(2, 3, 4), EM_BF16, EM_CPU);
    CHECK(em_tensor_rank(m) == 3 && em_tensor_dim(m, -1) == 4 && em_tensor_stride(m, 0) == 12,
          "rank/dim/stride");
    CHECK(em_tensor_dim(m, 3) == -1, "dim out of range");
    CHECK_ERR(EM_ERR_INDEX, "em_tensor_dim: dim 3 is out of range for a tensor of rank 3");
    CHECK(em_tensor_is_contiguous(m) && !em_tensor_is_contiguous(em_transpose(m, 0, 2)),
          "contiguity");
    CHECK(em_tensor_data(m) != NULL, "data pointer");
    char buf[64];
    CHECK(strcmp(em_shape_str(em_tensor_shape(m), buf, sizeof buf), "[2, 3, 4]") == 0,
          "shape string");
    em_scope_end();
}

static void test_print(void)
{
    em_scope_begin();
    float f[6] = {0.12345679f, 1, -2.5f, 3e-7f, NAN, INFINITY};
    em_tensor *t = em_from_f32(f, EM_SHAPE(2, 3));
    char *s = em_tensor_format(t, (em_print_options){0});
    const char *want =
        "Tensor {\n  data:\n[[1.2345679e-01, 1.0e+00, -2.5e+00],\n [3.0e-07, NaN, inf]],\n"
        "  shape:  [2, 3],\n  device:  cpu,\n  backend:  \"cpu\",\n"
        "  dtype:  \"f32\",\n}";
    CHECK(s && strcmp(s, want) == 0, "format:\n%s\nexpected:\n%s", s ? s : "(null)", want);
    em_free(s);
    s = em_tensor_format(em_arange(0, 3, 1, EM_I64, EM_CPU), (em_print_options){0});
    CHECK(s && strstr(s, "[0, 1, 2]") && strstr(s, "\"i64\""), "int format: %s", s);
    em_free(s);
    s = em_tensor_format(em_eye(2, 2, EM_BOOL, EM_CPU), (em_print_options){0});
    CHECK(s && strstr(s, "[[true, false],\n [false, true]]"), "bool format: %s", s);
    em_free(s);
    s = em_tensor_format(em_scalar(2, EM_F64, EM_CPU), (em_print_options){0});
    CHECK(s && strstr(s, "data:\n2.0,\n  shape:  [],"), "scalar format: %s", s);
    em_free(s);
    /* summarised: 2000 elements, 3 edge items */
    s = em_tensor_format(em_reshape(em_arange(0, 2000, 1, EM_I32, EM_CPU), EM_SHAPE(20, 100)),
                         (em_print_options){0});
    CHECK(s && strstr(s, "[[0, 1, 2, ..., 97, 98, 99],\n [100, 101, 102, ..., 197, 198, 199],\n"
                         " [200, 201, 202, ..., 297, 298, 299],\n ...\n [1700, 1701"),
          "summarised format: %s", s);
    em_free(s);
    s = em_tensor_format(em_full(EM_SHAPE(2), 1.0 / 3.0, EM_F32, EM_CPU),
                         (em_print_options){.precision = 2});
    CHECK(s && strstr(s, "[0.33, 0.33]"), "precision: %s", s);
    em_free(s);
    CHECK(em_tensor_format(NULL, (em_print_options){0}) == NULL, "format NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_tensor_format");
    em_scope_end();
}

static void test_devices_errors(void)
{
    char buf[32];
    em_device d = em_device_parse("cpu");
    CHECK(em_device_equal(d, EM_CPU) && strcmp(em_device_str(d, buf, sizeof buf), "cpu") == 0,
          "parse cpu");
    em_device_parse("tpu:0");
    CHECK_ERR(EM_ERR_DEVICE, "unknown device \"tpu:0\"");
    em_device_parse("cpu:1");
    CHECK_ERR(EM_ERR_DEVICE, "does not exist");
    em_device_parse("cpu:x");
    CHECK_ERR(EM_ERR_DEVICE, "bad device index");
    CHECK(strcmp(em_device_backend_name(EM_CPU), "cpu") == 0, "backend name");
    CHECK(em_device_sync(EM_CPU) == EM_OK, "sync");

    /* the first error of a chain is kept */
    em_error(EM_ERR_SHAPE, "first");
    em_error(EM_ERR_DTYPE, "second");
    CHECK(em_last_status() == EM_ERR_SHAPE && strcmp(em_last_error(), "first") == 0,
          "first error wins");
    em_clear_error();
    CHECK(!em_failed() && em_last_error()[0] == '\0', "cleared");
    CHECK(strcmp(em_status_name(EM_ERR_OOM), "out of memory") == 0, "status name");
}

/* A realistic little program over the tensor layer; returns false on any error and releases
 * everything in every case. */
static bool program(void)
{
    em_scope_begin();
    em_tensor *x = em_randn(EM_SHAPE(8, 16), EM_F32, EM_CPU);
    em_tensor *w = em_rand(EM_SHAPE(16, 4), EM_F64, EM_CPU);
    em_tensor *xt = em_contiguous(em_transpose(x, 0, 1));
    em_tensor *h = em_cast(em_flip(xt, EM_AXES(1)), EM_F16);
    em_tensor *y = em_reshape(em_slice(h, 0, 1, 16, 3), EM_SHAPE(-1));
    em_tensor *z = em_cast(em_expand(em_unsqueeze(y, 0), EM_SHAPE(3, -1)), EM_F64);
    em_tensor *o = em_one_hot(em_randint(0, 5, EM_SHAPE(7), EM_I64, EM_CPU), 5);
    em_tensor *tr = em_tril(em_clone(w), -1);
    char *s = z && o && tr ? em_tensor_format(z, (em_print_options){.threshold = 10}) : NULL;
    bool ok = s != NULL;
    em_free(s);
    em_scope_end();
    return ok;
}

static void test_alloc_failure_walk(void)
{
    int64_t bytes0 = em_mem_get_stats().current_bytes;
    int64_t live0 = em_live_tensors();
    CHECK(program(), "program runs: %s", em_last_error());
    em_clear_error();
    int failures_seen = 0;
    bool completed = false;
    for (int64_t n = 1; n < 10000 && !completed; n++) {
        em_mem_fail_at(n);
        bool ok = program();
        bool injected = em_last_status() == EM_ERR_OOM;
        em_mem_fail_at(0);
        if (ok && !em_failed())
            completed = true; /* the n-th allocation is past the program */
        else {
            failures_seen++;
            if (!injected || ok)
                CHECK(false, "allocation %lld: program %s with error %s (%s)", (long long)n,
                      ok ? "succeeded" : "failed", em_status_name(em_last_status()),
                      em_last_error());
        }
        em_clear_error();
        CHECK(em_live_tensors() == live0, "allocation %lld: %lld handles leaked", (long long)n,
              (long long)(em_live_tensors() - live0));
        CHECK(em_mem_get_stats().current_bytes == bytes0, "allocation %lld: %lld bytes leaked",
              (long long)n, (long long)(em_mem_get_stats().current_bytes - bytes0));
    }
    CHECK(completed && failures_seen > 20, "walked %d failing allocations", failures_seen);
}

int main(void)
{
    h_init();
    test_scopes();
    test_data();
    test_print();
    test_devices_errors();
    test_alloc_failure_walk();
    return h_finish();
}
