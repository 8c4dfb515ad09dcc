/* The composite kinds' lowerings (src/tensor/lower.c): every row of the op table with a lowering
 * cell has a lowering function and no other row has one; each composite, run lowered (config
 * lower_composites) and by its CPU kernel, agrees with the f64 kernel, and its gradient through
 * the lowered form agrees with central differences; a backend without the kernel (the test-only
 * "sim" device) runs the lowering on its own device instead of sending the op to the CPU. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "tensor/op.h"

#define MAXIN 6

typedef struct lcase {
    em_op_kind kind;
    h_fn f;
    int n;
    em_shape shape[MAXIN];
    double lo[MAXIN], hi[MAXIN];
    int64_t classes[MAXIN]; /* > 0: an i64 index input in [0, classes) */
    bool grad;              /* checked against central differences, lowered */
} lcase;

static void lowering(bool on)
{
    em_config_set("lower_composites", on ? "true" : "false");
}

/* ---- the ops, each as an h_fn ---------------------------------------------------------- */

static em_tensor *f_gelu(em_tensor *const *in, int n, void *c)
{
    return em_gelu(in[0]);
}
static em_tensor *f_gelu_tanh(em_tensor *const *in, int n, void *c)
{
    return em_gelu_tanh(in[0]);
}
static em_tensor *f_silu(em_tensor *const *in, int n, void *c)
{
    return em_silu(in[0]);
}
static em_tensor *f_log_sigmoid(em_tensor *const *in, int n, void *c)
{
    return em_log_sigmoid(in[0]);
}
static em_tensor *f_hard_sigmoid(em_tensor *const *in, int n, void *c)
{
    return em_hard_sigmoid(in[0]);
}
static em_tensor *f_hard_swish(em_tensor *const *in, int n, void *c)
{
    return em_hard_swish(in[0]);
}
static em_tensor *f_mish(em_tensor *const *in, int n, void *c)
{
    return em_mish(in[0]);
}
static em_tensor *f_softsign(em_tensor *const *in, int n, void *c)
{
    return em_softsign(in[0]);
}
static em_tensor *f_masked_fill(em_tensor *const *in, int n, void *c)
{
    return em_masked_fill(in[0], em_gt_scalar(in[1], 0), 2.5);
}
static em_tensor *f_lerp(em_tensor *const *in, int n, void *c)
{
    return em_lerp_tensor(in[0], in[1], in[2]);
}
static em_tensor *f_mean(em_tensor *const *in, int n, void *c)
{
    return em_mean(in[0], EM_AXES(1), false);
}
static em_tensor *f_var(em_tensor *const *in, int n, void *c)
{
    return em_var(in[0], EM_AXES(0, 2), 1, true);
}
static em_tensor *f_std(em_tensor *const *in, int n, void *c)
{
    return em_std(in[0], EM_AXES(1), 0, false);
}
static em_tensor *f_norm(em_tensor *const *in, int n, void *c)
{
    return em_norm(in[0], 3, EM_AXES(1), false);
}
static em_tensor *f_logsumexp(em_tensor *const *in, int n, void *c)
{
    return em_logsumexp(in[0], EM_AXES(-1), false);
}
static em_tensor *f_softmax(em_tensor *const *in, int n, void *c)
{
    return em_softmax(in[0], 1);
}
static em_tensor *f_log_softmax(em_tensor *const *in, int n, void *c)
{
    return em_log_softmax(in[0], -1);
}
static em_tensor *f_embedding(em_tensor *const *in, int n, void *c)
{
    return em_embedding(in[0], in[1]);
}
static em_tensor *f_pixel_shuffle(em_tensor *const *in, int n, void *c)
{
    return em_pixel_shuffle(in[0], 2);
}
static em_tensor *f_pixel_unshuffle(em_tensor *const *in, int n, void *c)
{
    return em_pixel_unshuffle(in[0], 2);
}
static em_tensor *f_layer_norm(em_tensor *const *in, int n, void *c)
{
    return em_layer_norm(in[0], 1, in[1], in[2], 1e-5);
}
static em_tensor *f_rms_norm(em_tensor *const *in, int n, void *c)
{
    return em_rms_norm(in[0], 2, in[1], 1e-5);
}
static em_tensor *f_group_norm(em_tensor *const *in, int n, void *c)
{
    return em_group_norm(in[0], 2, in[1], in[2], 1e-5);
}
static em_tensor *f_batch_norm(em_tensor *const *in, int n, void *c)
{
    return em_batch_norm(in[0], in[1], in[2], in[3], in[4], 1e-5);
}
static em_tensor *f_sdpa(em_tensor *const *in, int n, void *c)
{
    return em_sdpa(in[0], in[1], in[2], NULL, (em_sdpa_opts){.causal = true});
}
static em_tensor *f_max_pool_values(em_tensor *const *in, int n, void *c)
{
    return em_max_pool2d(in[0], (em_pool_opts){.kernel = {2, 2}, .stride = {1, 1}}, NULL);
}
static em_tensor *flat3(em_tensor *a, em_tensor *b, em_tensor *c)
{
    em_tensor *t[3] = {em_flatten(a, 0, -1), em_flatten(b, 0, -1), c ? em_flatten(c, 0, -1) : NULL};
    return em_cat(t, c ? 3 : 2, 0);
}
static em_tensor *f_sdpa_backward(em_tensor *const *in, int n, void *c)
{
    em_tensor *o = em_sdpa(in[0], in[1], in[2], NULL, (em_sdpa_opts){.causal = true, .scale = 0.5});
    em_tensor *d[3] = {NULL, NULL, NULL};
    if (!o || tn_sdpa_backward(in[0], in[1], in[2], o, in[3], NULL, NULL, 0, true, 0.5, &d[0],
                               &d[1], &d[2]) != EM_OK)
        return NULL;
    return flat3(d[0], d[1], d[2]);
}
static em_tensor *f_matmul_bias_act(em_tensor *const *in, int n, void *c)
{
    return em_matmul_bias_act(in[0], in[1], in[2], EM_ACT_GELU);
}
static em_tensor *f_conv_weight_grad(em_tensor *const *in, int n, void *c)
{
    int64_t k[2] = {3, 3}, lo[2] = {1, 0}, hi[2] = {0, 1};
    return tn_conv2d_weight_grad(in[0], in[1], k, NULL, NULL, lo, hi);
}
static em_tensor *f_threshold_backward(em_tensor *const *in, int n, void *c)
{
    return tn_threshold_backward(in[0], in[1], 0.1);
}
static em_tensor *f_softmax_backward(em_tensor *const *in, int n, void *c)
{
    return em_add(tn_softmax_backward(in[0], in[1], 1, false),
                  tn_softmax_backward(in[0], in[1], 1, true));
}
static em_tensor *f_lsg(em_tensor *const *in, int n, void *c)
{
    return tn_log_softmax_gather(in[0], 1, in[1]);
}
static em_tensor *f_lsg_backward(em_tensor *const *in, int n, void *c)
{
    return tn_log_softmax_gather_backward(in[0], 1, in[1], in[2]);
}
static em_tensor *f_norm_backward(em_tensor *const *in, int n, void *c)
{
    em_tensor *d[3] = {NULL, NULL, NULL};
    if (tn_norm_backward(in[0], in[1], in[2], 1, 1e-5, false, &d[0], &d[1], &d[2]) != EM_OK)
        return NULL;
    return flat3(d[0], d[1], d[2]);
}

#define S(...) EM_SHAPE(__VA_ARGS__)
static const lcase cases[] = {
    {EM_OP_GELU, f_gelu, 1, {S(4, 5)}, {-4}, {4}, {0}, true},
    {EM_OP_GELU_TANH, f_gelu_tanh, 1, {S(4, 5)}, {-4}, {4}, {0}, true},
    {EM_OP_SILU, f_silu, 1, {S(4, 5)}, {-6}, {6}, {0}, true},
    {EM_OP_LOG_SIGMOID, f_log_sigmoid, 1, {S(4, 5)}, {-20}, {20}, {0}, true},
    {EM_OP_HARD_SIGMOID, f_hard_sigmoid, 1, {S(4, 5)}, {-5}, {5}, {0}, true},
    {EM_OP_HARD_SWISH, f_hard_swish, 1, {S(4, 5)}, {-5}, {5}, {0}, true},
    {EM_OP_MISH, f_mish, 1, {S(4, 5)}, {-5}, {5}, {0}, true},
    {EM_OP_SOFTSIGN, f_softsign, 1, {S(4, 5)}, {-5}, {5}, {0}, true},
    {EM_OP_MASKED_FILL, f_masked_fill, 2, {S(4, 5), S(5)}, {-2, -1}, {2, 1}, {0}, true},
    {EM_OP_LERP, f_lerp, 3, {S(3, 4), S(3, 4), S(4)}, {-2, -2, -1}, {2, 2, 2}, {0}, true},
    {EM_OP_MEAN, f_mean, 1, {S(3, 7, 2)}, {-3}, {3}, {0}, true},
    {EM_OP_VAR, f_var, 1, {S(3, 4, 5)}, {-3}, {3}, {0}, true},
    {EM_OP_STD, f_std, 1, {S(3, 6)}, {-3}, {3}, {0}, true},
    {EM_OP_NORM, f_norm, 1, {S(3, 6)}, {0.5}, {3}, {0}, true},
    {EM_OP_LOGSUMEXP, f_logsumexp, 1, {S(3, 8)}, {-30}, {30}, {0}, true},
    {EM_OP_SOFTMAX, f_softmax, 1, {S(3, 6, 2)}, {-10}, {10}, {0}, true},
    {EM_OP_LOG_SOFTMAX, f_log_softmax, 1, {S(3, 6)}, {-10}, {10}, {0}, true},
    {EM_OP_EMBEDDING, f_embedding, 2, {S(7, 3), S(2, 4)}, {-1, 0}, {1, 0}, {0, 7}, true},
    {EM_OP_PIXEL_SHUFFLE, f_pixel_shuffle, 1, {S(2, 8, 3, 2)}, {-1}, {1}, {0}, true},
    {EM_OP_PIXEL_UNSHUFFLE, f_pixel_unshuffle, 1, {S(2, 2, 4, 6)}, {-1}, {1}, {0}, true},
    {EM_OP_LAYER_NORM,
     f_layer_norm,
     3,
     {S(4, 6), S(6), S(6)},
     {-2, 0.5, -1},
     {2, 1.5, 1},
     {0},
     true},
    {EM_OP_RMS_NORM, f_rms_norm, 2, {S(3, 2, 4), S(2, 4)}, {-2, 0.5}, {2, 1.5}, {0}, true},
    {EM_OP_GROUP_NORM,
     f_group_norm,
     3,
     {S(2, 4, 3), S(4), S(4)},
     {-2, 0.5, -1},
     {2, 1.5, 1},
     {0},
     true},
    {EM_OP_BATCH_NORM,
     f_batch_norm,
     5,
     {S(2, 3, 4), S(3), S(3), S(3), S(3)},
     {-2, -0.5, 0.5, 0.5, -1},
     {2, 0.5, 2, 1.5, 1},
     {0},
     true},
    {EM_OP_SDPA,
     f_sdpa,
     3,
     {S(2, 4, 3), S(2, 5, 3), S(2, 5, 2)},
     {-1, -1, -1},
     {1, 1, 1},
     {0},
     true},
    {EM_OP_MAX_POOL_VALUES, f_max_pool_values, 1, {S(1, 2, 4, 4)}, {-3}, {3}, {0}, true},
    {EM_OP_SDPA_BACKWARD,
     f_sdpa_backward,
     4,
     {S(2, 4, 3), S(2, 5, 3), S(2, 5, 2), S(2, 4, 2)},
     {-1, -1, -1, -1},
     {1, 1, 1, 1},
     {0},
     false},
    {EM_OP_MATMUL_BIAS_ACT,
     f_matmul_bias_act,
     3,
     {S(3, 4), S(4, 5), S(5)},
     {-1, -1, -1},
     {1, 1, 1},
     {0},
     true},
    {EM_OP_CONV_WEIGHT_GRAD,
     f_conv_weight_grad,
     2,
     {S(2, 3, 5, 5), S(2, 4, 4, 4)},
     {-1, -1},
     {1, 1},
     {0},
     true},
    {EM_OP_THRESHOLD_BACKWARD,
     f_threshold_backward,
     2,
     {S(4, 5), S(4, 5)},
     {-1, -1},
     {1, 1},
     {0},
     false},
    {EM_OP_SOFTMAX_BACKWARD,
     f_softmax_backward,
     2,
     {S(3, 5), S(3, 5)},
     {0.05, -1},
     {0.5, 1},
     {0},
     true},
    {EM_OP_LOG_SOFTMAX_GATHER, f_lsg, 2, {S(4, 6), S(4)}, {-5, 0}, {5, 0}, {0, 6}, true},
    {EM_OP_LOG_SOFTMAX_GATHER_BACKWARD,
     f_lsg_backward,
     3,
     {S(4, 6), S(4), S(4)},
     {-5, 0, -1},
     {5, 0, 1},
     {0, 6, 0},
     true},
    {EM_OP_NORM_BACKWARD,
     f_norm_backward,
     3,
     {S(4, 6), S(6), S(4, 6)},
     {-2, 0.5, -1},
     {2, 1.5, 1},
     {0},
     false},
};
#undef S

static em_tensor *make_input(const lcase *c, int i, em_dtype dt)
{
    if (c->classes[i] > 0) {
        em_tensor *t = h_rand(c->shape[i], EM_F64, H_CONTIG, 0, (double)c->classes[i], NULL);
        return em_cast(em_floor(t), EM_I64);
    }
    return h_rand(c->shape[i], dt, H_CONTIG, c->lo[i], c->hi[i], NULL);
}

static double max_abs_diff(const double *a, const double *b, int64_t n, double *scale)
{
    double m = 0;
    *scale = 0;
    for (int64_t i = 0; i < n; i++) {
        m = fmax(m, fabs(a[i] - b[i]));
        *scale = fmax(*scale, fabs(b[i]));
    }
    return m;
}

static void check_case(const lcase *c)
{
    const char *name = em_op_name(c->kind);
    em_scope_begin();
    em_tensor *in64[MAXIN], *in32[MAXIN];
    for (int i = 0; i < c->n; i++) {
        in64[i] = make_input(c, i, EM_F64);
        in32[i] = c->classes[i] > 0 ? in64[i] : em_cast(in64[i], EM_F32);
    }
    /* the f64 kernel is the reference */
    lowering(false);
    int64_t l0 = tn_lowered_count(c->kind);
    em_tensor *ref = c->f(in64, c->n, NULL), *kern = c->f(in32, c->n, NULL);
    CHECK(tn_lowered_count(c->kind) == l0, "%s: lowered with the kernel there", name);
    lowering(true);
    em_tensor *low = c->f(in32, c->n, NULL), *low64 = c->f(in64, c->n, NULL);
    CHECK(tn_lowered_count(c->kind) >= l0 + 2, "%s: the lowering did not run (%lld times)", name,
          (long long)(tn_lowered_count(c->kind) - l0));
    lowering(false);
    CHECK(ref && kern && low && low64, "%s: %s", name, em_last_error());
    if (ref && kern && low && low64) {
        int64_t n = em_tensor_numel(ref);
        double *r = h_values(ref), *k = h_values(kern), *l = h_values(low), *l64 = h_values(low64);
        double scale, e_low = max_abs_diff(l, r, n, &scale), e_kern = max_abs_diff(k, r, n, &scale);
        double e_lk = max_abs_diff(l, k, n, &scale), e64 = max_abs_diff(l64, r, n, &scale);
        printf("%-28s max |lowered - f64| %.2e  |kernel - f64| %.2e  |lowered - kernel| %.2e  "
               "f64 lowered %.2e (scale %.2g)\n",
               name, e_low, e_kern, e_lk, e64, scale);
        double tol = 1e-5 * (1 + scale);
        CHECK(e_low <= tol, "%s: the f32 lowering is %.3g from the f64 kernel", name, e_low);
        CHECK(e64 <= 1e-12 * (1 + scale), "%s: the f64 lowering is %.3g from the kernel", name,
              e64);
        CHECK(em_shape_equal(em_tensor_shape(low), em_tensor_shape(ref)), "%s: shape", name);
        free(r), free(k), free(l), free(l64);
    }
    if (c->grad) {
        bool wrt[MAXIN];
        for (int i = 0; i < c->n; i++) wrt[i] = c->classes[i] == 0;
        if (c->kind == EM_OP_MASKED_FILL) wrt[1] = false; /* the mask's source */
        lowering(true);
        char what[80];
        snprintf(what, sizeof what, "%s lowered", name);
        h_gradcheck(what, c->f, NULL, in64, c->n, wrt, 1e-6, 1e-4);
        lowering(false);
    }
    CHECK_OK(name);
    em_clear_error();
    em_scope_end();
}

/* the table and the lowerings agree */
static void check_table(void)
{
    for (int k = 0; k < EM_OP_COUNT; k++) {
        bool cell = ir_ops[k].lowering[0] != '\0';
        CHECK(cell == tn_has_lowering((em_op_kind)k), "%s: lowering cell %s, lowering function %s",
              ir_ops[k].name, cell ? "set" : "empty",
              tn_has_lowering((em_op_kind)k) ? "present" : "absent");
    }
    /* every composite has a case here */
    for (int k = 0; k < EM_OP_COUNT; k++) {
        bool found = false;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            found |= (int)cases[i].kind == k;
        CHECK(found == tn_has_lowering((em_op_kind)k), "%s: no case in test_lower", ir_ops[k].name);
    }
}

/* A device whose backend lacks softmax, gelu and layer norm runs their lowerings there: the
 * composite records are lowered (not sent to the CPU), only the primitives they lower to go
 * through the CPU fallback, and the values match the CPU kernels'. */
static void check_device(void)
{
    h_register_sim_backend();
    em_device sim = em_device_parse("sim:0");
    em_config_set("cpu_fallback", "true");
    em_scope_begin();
    double *xv;
    em_tensor *x = h_rand(EM_SHAPE(3, 5), EM_F32, H_CONTIG, -3, 3, &xv);
    em_tensor *xs = em_to_device(x, sim);
    static const em_op_kind kinds[3] = {EM_OP_SOFTMAX, EM_OP_GELU, EM_OP_LAYER_NORM};
    em_tensor *want[3] = {em_softmax(x, 1), em_gelu(x), em_layer_norm(x, 1, NULL, NULL, 1e-5)};
    int64_t low[3], fb[3], exp_fb = tn_fallback_count(EM_OP_EXP);
    for (int i = 0; i < 3; i++)
        low[i] = tn_lowered_count(kinds[i]), fb[i] = tn_fallback_count(kinds[i]);
    em_tensor *got[3] = {em_softmax(xs, 1), em_gelu(xs), em_layer_norm(xs, 1, NULL, NULL, 1e-5)};
    for (int i = 0; i < 3; i++) {
        const char *name = em_op_name(kinds[i]);
        CHECK(got[i] && em_device_equal(em_tensor_device(got[i]), sim), "%s: not on the device",
              name);
        CHECK(tn_lowered_count(kinds[i]) == low[i] + 1, "%s: not lowered on the device", name);
        CHECK(tn_fallback_count(kinds[i]) == fb[i], "%s: sent to the cpu whole", name);
        if (got[i]) h_compare_dev(name, got[i], want[i], 1e-6, 1e-5, sim);
    }
    CHECK(tn_fallback_count(EM_OP_EXP) > exp_fb, "softmax's exp did not run through the fallback");
    CHECK_OK("lowered on the sim device");
    free(xv);
    em_scope_end();
    em_config_set("cpu_fallback", NULL);
}

int main(void)
{
    h_init();
    check_table();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);
    check_device();
    return h_finish();
}
