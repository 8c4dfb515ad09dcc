/* Autodiff behaviour: the API (leaves, no_grad, detach, accumulation, retain_graph, seeds,
 * dtypes), gradients of a small MLP and CNN against PyTorch, memory returning to the baseline,
 * checkpointing lowering peak memory with identical gradients, higher-order gradients and
 * anomaly mode. */
#include <string.h>

#include "harness.h"
#include "tensor/op.h"

static void test_api(void)
{
    em_scope_begin();
    double xv[3] = {1, 2, 3};
    em_tensor *x = em_requires_grad(em_from_f64(xv, EM_SHAPE(3)), true);
    CHECK(em_tensor_requires_grad(x) && !em_tensor_has_grad_fn(x), "leaf");
    /* x used twice: gradients accumulate */
    em_tensor *y = em_sum(em_add(em_mul(x, x), x), EM_ALL, false);
    CHECK(em_tensor_has_grad_fn(y) && strcmp(em_tensor_grad_fn(y), "sum") == 0, "grad fn name");
    em_grads *g = em_backward(y);
    double want[3] = {3, 5, 7};
    h_check_tensor("d(x^2 + x)", em_grad(g, x), want, EM_SHAPE(3), 0, 0);
    CHECK(em_grads_count(g) == 1, "one leaf");
    /* a second backward without retain_graph is an error */
    CHECK(em_backward(y) == NULL, "graph freed");
    CHECK_ERR(EM_ERR_STATE, "retain_graph");
    /* with retain_graph it works twice */
    em_tensor *y2 = em_sum(em_mul(x, x), EM_ALL, false);
    em_grads *g1 = em_backward_opt(y2, (em_backward_opts){.retain_graph = true});
    em_grads *g2 = em_backward(y2);
    double two[3] = {2, 4, 6};
    h_check_tensor("retain 1", em_grad(g1, x), two, EM_SHAPE(3), 0, 0);
    h_check_tensor("retain 2", em_grad(g2, x), two, EM_SHAPE(3), 0, 0);
    /* no_grad and detach cut the graph */
    em_no_grad_begin();
    em_tensor *n = em_mul(x, x);
    em_no_grad_end();
    CHECK(!em_tensor_requires_grad(n), "no_grad records nothing");
    em_tensor *d = em_detach(x);
    CHECK(!em_tensor_requires_grad(d) && em_tensor_shares_storage(d, x), "detach");
    CHECK(em_backward(em_sum(d, EM_ALL, false)) == NULL, "backward of a constant");
    CHECK_ERR(EM_ERR_STATE, "does not require grad");
    /* non-scalar loss needs a seed */
    em_tensor *v = em_mul(x, x);
    CHECK(em_backward(v) == NULL, "non-scalar loss");
    CHECK_ERR(EM_ERR_SHAPE, "em_backward_with");
    double sv[3] = {1, 0, -1};
    em_tensor *seed = em_from_f64(sv, EM_SHAPE(3));
    em_grads *gs = em_backward_with(&v, &seed, 1, (em_backward_opts){0});
    double ws[3] = {2, 0, -6};
    h_check_tensor("seeded backward", em_grad(gs, x), ws, EM_SHAPE(3), 0, 0);
    /* integer results never carry gradients */
    em_tensor *am = em_argmax(x, 0, false);
    CHECK(am && !em_tensor_requires_grad(am), "argmax has no graph");
    CHECK(em_requires_grad(em_zeros(EM_SHAPE(2), EM_I32, EM_CPU), true) == NULL, "int leaf");
    CHECK_ERR(EM_ERR_DTYPE, "em_requires_grad");
    /* gradients take the leaf's dtype */
    em_tensor *xf = em_requires_grad(em_ones(EM_SHAPE(2), EM_F32, EM_CPU), true);
    em_grads *gf = em_backward(em_sum(em_cast(xf, EM_F64), EM_ALL, false));
    em_tensor *gxf = em_grad(gf, xf);
    CHECK(gxf && em_tensor_dtype(gxf) == EM_F32, "f32 leaf gets an f32 gradient");
    /* a leaf that took no part gets no gradient */
    em_tensor *other = em_requires_grad(em_ones(EM_SHAPE(2), EM_F64, EM_CPU), true);
    CHECK(em_grad(gf, other) == NULL && !em_failed(), "unrelated leaf");
    em_scope_end();
}

/* linear: x [B, in] . w [out, in]^T + b */
static em_tensor *linear(em_tensor *x, em_tensor *w, em_tensor *b)
{
    return em_add(em_matmul(x, em_transpose(w, 0, 1)), b);
}

static em_tensor *cross_entropy(em_tensor *logits, em_tensor *y)
{
    em_tensor *lp = em_log_softmax(logits, 1);
    em_tensor *picked = em_gather(lp, 1, em_unsqueeze(y, 1));
    return em_neg(em_mean(picked, EM_ALL, false));
}

static void check_param_grads(h_fixture *fx, const char *prefix, const char *const *names,
                              em_tensor **params, int n, em_grads *g, double rtol)
{
    for (int i = 0; i < n; i++) {
        char key[64];
        snprintf(key, sizeof key, "%s.g%s", prefix, names[i]);
        em_shape s;
        const double *want = h_fixture_values(fx, key, &s);
        if (want) h_check_tensor(key, em_grad(g, params[i]), want, s, rtol * 1e-2, rtol);
    }
}

static void test_golden(em_dtype dt, double rtol)
{
    h_fixture *fx = h_fixture_load("autodiff.emfx");
    if (!fx) return;
    em_scope_begin();
    const char *mn[6] = {"w1", "b1", "w2", "b2", "w3", "b3"};
    em_tensor *mp[6];
    for (int i = 0; i < 6; i++) {
        char key[32];
        snprintf(key, sizeof key, "mlp.%s", mn[i]);
        mp[i] = em_requires_grad(em_cast(h_fixture_tensor(fx, key), dt), true);
    }
    em_tensor *x = em_cast(h_fixture_tensor(fx, "mlp.x"), dt);
    em_tensor *y = h_fixture_tensor(fx, "mlp.y");
    em_tensor *h = em_tanh(linear(x, mp[0], mp[1]));
    h = em_relu(linear(h, mp[2], mp[3]));
    em_tensor *loss = cross_entropy(linear(h, mp[4], mp[5]), y);
    CHECK(loss && h_close(em_item_f64(loss), h_fixture_scalar(fx, "mlp.loss"), 1e-6, rtol),
          "mlp loss");
    em_grads *g = em_backward(loss);
    CHECK(g != NULL, "mlp backward: %s", em_last_error());
    if (g) check_param_grads(fx, "mlp", mn, mp, 6, g, rtol);
    em_clear_error();

    const char *cn[6] = {"c1", "cb1", "c2", "cb2", "wl", "bl"};
    em_tensor *cp[6];
    for (int i = 0; i < 6; i++) {
        char key[32];
        snprintf(key, sizeof key, "cnn.%s", cn[i]);
        cp[i] = em_requires_grad(em_cast(h_fixture_tensor(fx, key), dt), true);
    }
    em_tensor *xc = em_cast(h_fixture_tensor(fx, "cnn.x"), dt);
    em_tensor *yc = h_fixture_tensor(fx, "cnn.y");
    em_tensor *a = em_conv2d(xc, cp[0], cp[1], (em_conv_opts){.pad_lo = {1, 1}, .pad_hi = {1, 1}});
    a = em_max_pool2d(em_relu(a), (em_pool_opts){.kernel = {2, 2}}, NULL);
    a = em_gelu(em_conv2d(a, cp[2], cp[3], (em_conv_opts){0}));
    a = em_avg_pool2d(a, (em_pool_opts){.kernel = {1, 1}});
    em_tensor *lc = cross_entropy(linear(em_flatten(a, 1, -1), cp[4], cp[5]), yc);
    CHECK(lc && h_close(em_item_f64(lc), h_fixture_scalar(fx, "cnn.loss"), 1e-6, rtol), "cnn loss");
    em_grads *gc = em_backward(lc);
    CHECK(gc != NULL, "cnn backward: %s", em_last_error());
    if (gc) check_param_grads(fx, "cnn", cn, cp, 6, gc, rtol);
    em_clear_error();
    em_scope_end();
    h_fixture_free(fx);
}

/* Deep MLP block used by the memory and checkpoint tests: 4 layers of 64 units. */
typedef struct deep_ctx {
    em_tensor *w[4];
} deep_ctx;

static em_status deep_block(void *vctx, em_tensor *const *in, int n_in, em_tensor **out, int n_out)
{
    /* in[0] is the activation, in[1..4] the block's weights: tensors a segment
     * differentiates through are passed as inputs */
    em_tensor *h = in[0];
    for (int i = 0; i < 4; i++) h = em_tanh(em_matmul(h, in[1 + i]));
    out[0] = h;
    return h ? EM_OK : em_last_status();
}

/* Runs 4 blocks (optionally checkpointed) and a backward pass; returns the peak bytes above
 * the start; the gradient of every weight goes to grads[] (host copies). */
static int64_t run_deep(bool checkpoint, deep_ctx *blocks, em_tensor *x, double **grads)
{
    int64_t base = em_mem_get_stats().current_bytes;
    em_mem_reset_peak();
    em_scope_begin();
    em_tensor *h = x;
    for (int b = 0; b < 4; b++) {
        em_tensor *out = NULL;
        em_tensor *in[5] = {h, blocks[b].w[0], blocks[b].w[1], blocks[b].w[2], blocks[b].w[3]};
        if (checkpoint)
            em_checkpoint(deep_block, NULL, in, 5, &out, 1);
        else
            deep_block(NULL, in, 5, &out, 1);
        h = out;
    }
    em_grads *g = em_backward(em_sum(em_mul(h, h), EM_ALL, false));
    CHECK(g != NULL, "deep backward (checkpoint %d): %s", checkpoint, em_last_error());
    for (int b = 0; b < 4; b++)
        for (int i = 0; i < 4; i++)
            grads[b * 4 + i] = g ? h_values(em_grad(g, blocks[b].w[i])) : NULL;
    int64_t peak = em_mem_get_stats().peak_bytes - base;
    em_scope_end();
    return peak;
}

static void test_memory_and_checkpoint(void)
{
    em_seed(11);
    deep_ctx blocks[4];
    for (int b = 0; b < 4; b++)
        for (int i = 0; i < 4; i++)
            blocks[b].w[i] = em_requires_grad(
                em_rand_uniform(EM_SHAPE(64, 64), -0.2, 0.2, EM_F32, EM_CPU), true);
    em_tensor *x = em_randn(EM_SHAPE(256, 64), EM_F32, EM_CPU);
    int64_t bytes0 = em_mem_get_stats().current_bytes;
    int64_t live0 = em_live_tensors();
    double *g_plain[16], *g_ckpt[16];
    int64_t peak_plain = run_deep(false, blocks, x, g_plain);
    CHECK(em_mem_get_stats().current_bytes == bytes0 && em_live_tensors() == live0,
          "after backward and release, memory is back to the baseline (%lld bytes, %lld "
          "tensors over)",
          (long long)(em_mem_get_stats().current_bytes - bytes0),
          (long long)(em_live_tensors() - live0));
    int64_t peak_ckpt = run_deep(true, blocks, x, g_ckpt);
    CHECK(em_mem_get_stats().current_bytes == bytes0 && em_live_tensors() == live0,
          "checkpointed run returns to the baseline too");
    printf("  deep MLP peak: %lld bytes plain, %lld checkpointed\n", (long long)peak_plain,
           (long long)peak_ckpt);
    CHECK(peak_ckpt < peak_plain * 3 / 4, "checkpointing lowers peak memory (%lld vs %lld)",
          (long long)peak_ckpt, (long long)peak_plain);
    int same = 0;
    for (int k = 0; k < 16; k++) {
        if (g_plain[k] && g_ckpt[k] && memcmp(g_plain[k], g_ckpt[k], 64 * 64 * sizeof(double)) == 0)
            same++;
        free(g_plain[k]);
        free(g_ckpt[k]);
    }
    CHECK(same == 16, "checkpointed gradients are identical (%d of 16 weights)", same);
    for (int b = 0; b < 4; b++)
        for (int i = 0; i < 4; i++) em_release(blocks[b].w[i]);
    em_release(x);
}

static void test_higher_order(void)
{
    em_scope_begin();
    /* f(x) = sum(x^3): grad = 3x^2, Hessian-vector product with v = 6 x v */
    double xv[3] = {1, -2, 0.5}, vv[3] = {1, 2, 3};
    em_tensor *x = em_requires_grad(em_from_f64(xv, EM_SHAPE(3)), true);
    em_tensor *v = em_from_f64(vv, EM_SHAPE(3));
    em_tensor *f = em_sum(em_mul(em_mul(x, x), x), EM_ALL, false);
    em_grads *g = em_backward_opt(f, (em_backward_opts){.create_graph = true});
    em_tensor *gx = em_grad(g, x);
    CHECK(gx && em_tensor_requires_grad(gx), "gradient with create_graph is differentiable");
    em_grads *hv = em_backward(em_sum(em_mul(gx, v), EM_ALL, false));
    double want[3] = {6, -24, 9};
    h_check_tensor("Hessian-vector product", em_grad(hv, x), want, EM_SHAPE(3), 1e-12, 0);
    /* gradient penalty style: d/dx |grad|^2 */
    em_tensor *x2 = em_requires_grad(em_from_f64(xv, EM_SHAPE(3)), true);
    em_tensor *f2 = em_sum(em_mul(em_mul(x2, x2), x2), EM_ALL, false);
    em_grads *g2 = em_backward_opt(f2, (em_backward_opts){.create_graph = true});
    em_tensor *gp = em_sum(em_square(em_grad(g2, x2)), EM_ALL, false);
    em_grads *gg = em_backward(gp);
    /* |3x^2|^2 = 9x^4 -> 36 x^3 */
    double want2[3] = {36, -288, 4.5};
    h_check_tensor("gradient penalty", em_grad(gg, x2), want2, EM_SHAPE(3), 1e-12, 0);
    em_scope_end();
}

/* Ops of kind k that one backward pass of y ran (the op profiler's count). */
static int64_t backward_ops(em_tensor *y, em_op_kind k, em_backward_opts o, em_grads **g)
{
    tn_profile_reset();
    tn_profile_enable(true);
    *g = em_backward_opt(y, o);
    tn_profile_enable(false);
    int64_t n = 0;
    double secs;
    tn_profile_get(k, &n, &secs);
    return n;
}

/* Slices of one tensor: a plain pass joins their gradients in one concatenation (zeros in the
 * gaps) where they are disjoint along one dim, else pads and adds them as the slice rule does;
 * with create_graph the rule's pads are recorded. */
static void test_slice_gradients(void)
{
    em_scope_begin();
    double xv[12];
    for (int i = 0; i < 12; i++) xv[i] = i - 5;
    em_tensor *x = em_requires_grad(em_from_f64(xv, EM_SHAPE(2, 6)), true);
    /* y = sum(q) + sum(k^2) + 3 sum(v): d/dx = 1, 2x, 3 on columns [0, 2), [2, 4), [4, 6) */
    em_tensor *q = em_narrow(x, 1, 0, 2), *k = em_narrow(x, 1, 2, 2), *v = em_narrow(x, 1, 4, 2);
    em_tensor *y = em_add(em_add(em_sum(q, EM_ALL, false), em_sum(em_mul(k, k), EM_ALL, false)),
                          em_mul_scalar(em_sum(v, EM_ALL, false), 3));
    em_grads *g;
    CHECK(backward_ops(y, EM_OP_PAD, (em_backward_opts){.retain_graph = true}, &g) == 0,
          "tiling slices: no pads");
    double want[12] = {1, 1, -6, -4, 3, 3, 1, 1, 6, 8, 3, 3};
    h_check_tensor("tiling slices", em_grad(g, x), want, EM_SHAPE(2, 6), 0, 0);
    CHECK(backward_ops(y, EM_OP_CAT, (em_backward_opts){.retain_graph = true}, &g) == 1,
          "tiling slices: one concatenation");
    h_check_tensor("tiling slices, again", em_grad(g, x), want, EM_SHAPE(2, 6), 0, 0);
    /* create_graph: the rule (three pads, recorded) */
    CHECK(backward_ops(y, EM_OP_PAD, (em_backward_opts){.create_graph = true}, &g) == 3,
          "create_graph: the slice rule's pads");
    h_check_tensor("tiling slices, create_graph", em_grad(g, x), want, EM_SHAPE(2, 6), 0, 0);
    /* a gap between two slices and after them, and x used whole too */
    em_tensor *y2 = em_add(em_sum(em_narrow(x, 1, 3, 1), EM_ALL, false),
                           em_add(em_sum(em_narrow(x, 1, 0, 2), EM_ALL, false),
                                  em_sum(em_mul_scalar(x, 0.5), EM_ALL, false)));
    CHECK(backward_ops(y2, EM_OP_CAT, (em_backward_opts){0}, &g) == 1, "gaps: one concatenation");
    double want2[12] = {1.5, 1.5, 0.5, 1.5, 0.5, 0.5, 1.5, 1.5, 0.5, 1.5, 0.5, 0.5};
    h_check_tensor("slices with gaps", em_grad(g, x), want2, EM_SHAPE(2, 6), 0, 0);
    /* overlapping slices: padded and added */
    em_tensor *y3 = em_add(em_sum(em_narrow(x, 1, 0, 4), EM_ALL, false),
                           em_sum(em_narrow(x, 1, 2, 4), EM_ALL, false));
    CHECK(backward_ops(y3, EM_OP_PAD, (em_backward_opts){0}, &g) == 2, "overlapping: two pads");
    double want3[12] = {1, 1, 2, 2, 1, 1, 1, 1, 2, 2, 1, 1};
    h_check_tensor("overlapping slices", em_grad(g, x), want3, EM_SHAPE(2, 6), 0, 0);
    em_scope_end();
}

static void test_anomaly(void)
{
    em_scope_begin();
    double xv[2] = {0, 1};
    em_tensor *x = em_requires_grad(em_from_f64(xv, EM_SHAPE(2)), true);
    em_tensor *y = em_sum(em_sqrt(x), EM_ALL, false); /* d sqrt at 0 is inf */
    em_set_detect_anomaly(true);
    CHECK(em_backward(y) == NULL, "anomaly stops the pass");
    CHECK_ERR(EM_ERR_STATE, "the backward rule of sqrt produced NaN or Inf");
    em_set_detect_anomaly(false);
    em_tensor *y2 = em_sum(em_sqrt(x), EM_ALL, false);
    em_grads *g = em_backward(y2);
    CHECK(g != NULL, "without anomaly mode the pass completes (inf gradient)");
    em_scope_end();
}

int main(void)
{
    h_init();
    test_api();
    test_golden(EM_F64, 1e-10);
    test_golden(EM_F32, 1e-4);
    test_higher_order();
    test_slice_gradients();
    test_anomaly();
    test_memory_and_checkpoint();
    return h_finish();
}
