/* The layer modules of nn_layers.h against PyTorch (scripts/fixtures_layers.py): outputs, input
 * and parameter gradients, running statistics after training steps, in f64 and f32; default
 * initialisation statistics, train/eval behaviour, summaries and bad configurations. */
#include <string.h>

#include "harness.h"

/* ---- the modules of the fixture cases, configured as the script's PyTorch modules --------- */

static em_module *make(const char *n)
{
#define IS(s) (strcmp(n, s) == 0)
    em_device cpu = EM_CPU;
    if (IS("conv1d"))
        return em_conv1d_new(
            (em_conv1d_cfg){.in = 4, .out = 6, .kernel = {3}, .stride = {2}, .padding = {1}}, cpu);
    if (IS("conv1d_same"))
        return em_conv1d_new(
            (em_conv1d_cfg){
                .in = 3, .out = 4, .kernel = {4}, .dilation = {2}, .padding_type = EM_PADDING_SAME},
            cpu);
    if (IS("conv2d"))
        return em_conv2d_new(
            (em_conv2d_cfg){.in = 3, .out = 4, .kernel = {3, 3}, .padding = {1, 1}}, cpu);
    if (IS("conv2d_groups"))
        return em_conv2d_new((em_conv2d_cfg){.in = 4,
                                             .out = 6,
                                             .kernel = {3, 2},
                                             .stride = {2, 1},
                                             .padding = {1, 0},
                                             .dilation = {1, 2},
                                             .groups = 2},
                             cpu);
    if (IS("conv2d_valid"))
        return em_conv2d_new((em_conv2d_cfg){.in = 2,
                                             .out = 3,
                                             .kernel = {2, 2},
                                             .padding_type = EM_PADDING_VALID,
                                             .no_bias = true},
                             cpu);
    if (IS("conv2d_same_even"))
        return em_conv2d_new(
            (em_conv2d_cfg){.in = 2, .out = 3, .kernel = {2, 4}, .padding_type = EM_PADDING_SAME},
            cpu);
    if (IS("conv2d_asym"))
        return em_conv2d_new((em_conv2d_cfg){.in = 2,
                                             .out = 3,
                                             .kernel = {3, 3},
                                             .padding = {0, 1},
                                             .padding_end = {2, 0},
                                             .padding_type = EM_PADDING_ASYMMETRIC},
                             cpu);
    if (IS("conv2d_reflect"))
        return em_conv2d_new((em_conv2d_cfg){.in = 2,
                                             .out = 3,
                                             .kernel = {3, 3},
                                             .padding = {1, 1},
                                             .padding_mode = EM_PAD_REFLECT},
                             cpu);
    if (IS("conv3d"))
        return em_conv3d_new(
            (em_conv3d_cfg){
                .in = 2, .out = 3, .kernel = {2, 3, 2}, .stride = {1, 2, 1}, .padding = {1, 0, 1}},
            cpu);
    if (IS("convt1d"))
        return em_conv_transpose1d_new((em_conv1d_cfg){.in = 3,
                                                       .out = 4,
                                                       .kernel = {3},
                                                       .stride = {2},
                                                       .padding = {1},
                                                       .output_padding = {1}},
                                       cpu);
    if (IS("convt2d"))
        return em_conv_transpose2d_new((em_conv2d_cfg){.in = 4,
                                                       .out = 6,
                                                       .kernel = {3, 3},
                                                       .stride = {2, 2},
                                                       .padding = {1, 1},
                                                       .output_padding = {1, 1},
                                                       .groups = 2},
                                       cpu);
    if (IS("convt2d_dil"))
        return em_conv_transpose2d_new((em_conv2d_cfg){.in = 2,
                                                       .out = 3,
                                                       .kernel = {2, 3},
                                                       .stride = {2, 1},
                                                       .padding = {0, 1},
                                                       .dilation = {1, 2},
                                                       .no_bias = true},
                                       cpu);
    if (IS("convt3d"))
        return em_conv_transpose3d_new(
            (em_conv3d_cfg){.in = 2, .out = 2, .kernel = {2, 2, 2}, .stride = {2, 2, 2}}, cpu);
    if (IS("maxpool1d"))
        return em_max_pool1d_new((em_pool1d_cfg){.kernel = {3}, .stride = {2}, .padding = {1}});
    if (IS("maxpool2d"))
        return em_max_pool2d_new((em_pool2d_cfg){
            .kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true});
    if (IS("maxpool2d_dil"))
        return em_max_pool2d_new(
            (em_pool2d_cfg){.kernel = {2, 2}, .stride = {1, 1}, .dilation = {2, 2}});
    if (IS("maxpool3d")) return em_max_pool3d_new((em_pool3d_cfg){.kernel = {2, 2, 2}});
    if (IS("avgpool1d"))
        return em_avg_pool1d_new((em_pool1d_cfg){.kernel = {3}, .stride = {2}, .padding = {1}});
    if (IS("avgpool2d"))
        return em_avg_pool2d_new((em_pool2d_cfg){.kernel = {3, 3},
                                                 .stride = {2, 2},
                                                 .padding = {1, 1},
                                                 .ceil_mode = true,
                                                 .exclude_pad = true});
    if (IS("avgpool3d"))
        return em_avg_pool3d_new((em_pool3d_cfg){.kernel = {2, 2, 2}, .stride = {1, 1, 1}});
    if (IS("adavg1d")) return em_adaptive_avg_pool1d_new(4);
    if (IS("adavg2d")) return em_adaptive_avg_pool2d_new(3, 2);
    if (IS("admax1d")) return em_adaptive_max_pool1d_new(3);
    if (IS("admax2d")) return em_adaptive_max_pool2d_new(2, 3);
    if (IS("bn1d")) return em_batch_norm1d_new((em_norm_cfg){.num_features = 4}, cpu);
    if (IS("bn1d_seq")) return em_batch_norm1d_new((em_norm_cfg){.num_features = 3}, cpu);
    if (IS("bn2d") || IS("bn2d_eval"))
        return em_batch_norm2d_new((em_norm_cfg){.num_features = 3}, cpu);
    if (IS("bn2d_cum"))
        return em_batch_norm2d_new((em_norm_cfg){.num_features = 3, .cumulative_average = true},
                                   cpu);
    if (IS("bn2d_notrack"))
        return em_batch_norm2d_new((em_norm_cfg){.num_features = 2, .no_track_running_stats = true},
                                   cpu);
    if (IS("bn3d"))
        return em_batch_norm3d_new(
            (em_norm_cfg){.num_features = 2, .no_affine = true, .momentum = 0.3}, cpu);
    if (IS("in1d")) return em_instance_norm1d_new((em_norm_cfg){.num_features = 3}, cpu);
    if (IS("in2d_affine"))
        return em_instance_norm2d_new((em_norm_cfg){.num_features = 3, .affine = true}, cpu);
    if (IS("in2d_track"))
        return em_instance_norm2d_new(
            (em_norm_cfg){.num_features = 3, .affine = true, .track_running_stats = true}, cpu);
    if (IS("in2d_track_eval"))
        return em_instance_norm2d_new((em_norm_cfg){.num_features = 3, .track_running_stats = true},
                                      cpu);
    if (IS("in3d")) return em_instance_norm3d_new((em_norm_cfg){.num_features = 2}, cpu);
    if (IS("ln")) return em_layer_norm_new((em_layer_norm_cfg){.shape = EM_SHAPE(4, 5)}, cpu);
    if (IS("ln_noaffine"))
        return em_layer_norm_new(
            (em_layer_norm_cfg){.shape = EM_SHAPE(5), .eps = 1e-3, .no_affine = true}, cpu);
    if (IS("gn")) return em_group_norm_new((em_group_norm_cfg){.groups = 3, .channels = 6}, cpu);
    if (IS("rms"))
        return em_rms_norm_new((em_layer_norm_cfg){.shape = EM_SHAPE(5), .eps = 1e-6}, cpu);
    if (IS("relu6")) return em_relu6_new();
    if (IS("elu")) return em_elu_new(0.7);
    if (IS("selu")) return em_selu_new();
    if (IS("celu")) return em_celu_new(1.3);
    if (IS("gelu_tanh")) return em_gelu_tanh_new();
    if (IS("logsigmoid")) return em_log_sigmoid_new();
    if (IS("hardsigmoid")) return em_hard_sigmoid_new();
    if (IS("hardswish")) return em_hard_swish_new();
    if (IS("mish")) return em_mish_new();
    if (IS("softplus")) return em_softplus_new(2, 3);
    if (IS("softsign")) return em_softsign_new();
    if (IS("hardtanh")) return em_hardtanh_new(-0.5, 1.5);
    if (IS("tanhshrink")) return em_tanhshrink_new();
    if (IS("logsoftmax")) return em_log_softmax_new(1);
    if (IS("softmin")) return em_softmin_new(-1);
    if (IS("prelu")) return em_prelu_new(1, cpu);
    if (IS("prelu_c")) return em_prelu_new(3, cpu);
    if (IS("glu")) return em_glu_new(-1);
    if (IS("glu_dim1")) return em_glu_new(1);
    if (IS("swiglu")) return em_swiglu_new((em_swiglu_cfg){.d_in = 5, .d_out = 4}, cpu);
    if (IS("swiglu_bias"))
        return em_swiglu_new((em_swiglu_cfg){.d_in = 3, .d_out = 2, .bias = true}, cpu);
    if (IS("up_nearest")) return em_upsample_new((em_upsample_cfg){.size = {6, 7}});
    if (IS("up_bilinear"))
        return em_upsample_new((em_upsample_cfg){.scale = {2}, .mode = EM_INTERP_BILINEAR});
    if (IS("up_bilinear_ac"))
        return em_upsample_new(
            (em_upsample_cfg){.size = {5, 7}, .mode = EM_INTERP_BILINEAR, .align_corners = true});
    if (IS("up_bicubic"))
        return em_upsample_new((em_upsample_cfg){.scale = {2, 2}, .mode = EM_INTERP_BICUBIC});
    if (IS("up_linear"))
        return em_upsample_new((em_upsample_cfg){.scale = {3}, .mode = EM_INTERP_BILINEAR});
    if (IS("pixel_shuffle")) return em_pixel_shuffle_new(2);
    if (IS("pixel_unshuffle")) return em_pixel_unshuffle_new(2);
    if (IS("unfold"))
        return em_unfold_new((em_fold_cfg){.kernel = {2, 3}, .padding = {1, 1}, .stride = {2, 1}});
    if (IS("fold")) return em_fold_new((em_fold_cfg){.output_size = {5, 6}, .kernel = {2, 2}});
    if (IS("embedding")) return em_embedding_new((em_embedding_cfg){.num = 10, .dim = 4}, cpu);
    if (IS("embedding_pad"))
        return em_embedding_new(
            (em_embedding_cfg){.num = 10, .dim = 4, .padding_idx = 2, .has_padding_idx = true},
            cpu);
#undef IS
    return NULL;
}

static const char *cases[] = {
    "conv1d",
    "conv1d_same",
    "conv2d",
    "conv2d_groups",
    "conv2d_valid",
    "conv2d_same_even",
    "conv2d_asym",
    "conv2d_reflect",
    "conv3d",
    "convt1d",
    "convt2d",
    "convt2d_dil",
    "convt3d",
    "maxpool1d",
    "maxpool2d",
    "maxpool2d_dil",
    "maxpool3d",
    "avgpool1d",
    "avgpool2d",
    "avgpool3d",
    "adavg1d",
    "adavg2d",
    "admax1d",
    "admax2d",
    "bn1d",
    "bn1d_seq",
    "bn2d",
    "bn2d_eval",
    "bn2d_cum",
    "bn2d_notrack",
    "bn3d",
    "in1d",
    "in2d_affine",
    "in2d_track",
    "in2d_track_eval",
    "in3d",
    "ln",
    "ln_noaffine",
    "gn",
    "rms",
    "relu6",
    "elu",
    "selu",
    "celu",
    "gelu_tanh",
    "logsigmoid",
    "hardsigmoid",
    "hardswish",
    "mish",
    "softplus",
    "softsign",
    "hardtanh",
    "tanhshrink",
    "logsoftmax",
    "softmin",
    "prelu",
    "prelu_c",
    "glu",
    "glu_dim1",
    "swiglu",
    "swiglu_bias",
    "up_nearest",
    "up_bilinear",
    "up_bilinear_ac",
    "up_bicubic",
    "up_linear",
    "pixel_shuffle",
    "pixel_unshuffle",
    "unfold",
    "fold",
    "embedding",
    "embedding_pad",
};

/* ---- running a fixture case -------------------------------------------------------------- */

typedef struct entries {
    int n;
    char name[16][64];
    bool buffer[16];
} entries;

static void collect(void *ctx, const char *name, em_module_entry *e)
{
    entries *l = ctx;
    if (l->n >= 16) return;
    snprintf(l->name[l->n], sizeof l->name[0], "%s", name);
    l->buffer[l->n++] = e->is_buffer;
}

/* Sets the dotted parameter or buffer `name` of m. */
static void set_entry(em_module *m, const char *name, em_tensor *t)
{
    const char *dot = strrchr(name, '.');
    if (!dot) {
        em_module_set(m, name, t);
        return;
    }
    char parent[64];
    snprintf(parent, sizeof parent, "%.*s", (int)(dot - name), name);
    em_module_set(em_module_find(m, parent), dot + 1, t);
}

static bool check(const char *what, const em_tensor *got, h_fixture *fx, const char *key,
                  em_dtype dt)
{
    em_shape s;
    const double *v = h_fixture_values(fx, key, &s);
    if (!v) return false;
    if (!got) {
        CHECK(false, "%s: no tensor (%s)", what, em_last_error());
        em_clear_error();
        return false;
    }
    double atol = dt == EM_F64 ? 1e-12 : 1e-5, rtol = dt == EM_F64 ? 1e-10 : 1e-5;
    return h_check_tensor(what, got, v, s, atol, rtol);
}

static int run_case(h_fixture *fx, const char *c, em_dtype dt)
{
    char key[160], what[200];
    int fails = h_failed;
    em_module *m = make(c);
    CHECK(m != NULL, "%s: constructor failed: %s", c, em_last_error());
    if (!m) {
        em_clear_error();
        return 1;
    }
    em_scope_begin();
    em_module_cast(m, dt);
    entries ents = {0};
    em_module_visit(m, collect, &ents);
    for (int i = 0; i < ents.n; i++) {
        snprintf(key, sizeof key, "%s.p.%s", c, ents.name[i]);
        em_tensor *t = h_fixture_tensor(fx, key);
        if (t && em_tensor_dtype(t) == EM_F64 && dt != EM_F64) t = em_cast(t, dt);
        if (t) set_entry(m, ents.name[i], t);
    }
    snprintf(key, sizeof key, "%s.train", c);
    em_module_train(m, h_fixture_scalar(fx, key) != 0);
    snprintf(key, sizeof key, "%s.steps", c);
    int steps = (int)h_fixture_scalar(fx, key);
    for (int s = 0; s < steps; s++) {
        snprintf(key, sizeof key, "%s.x%d", c, s);
        em_tensor *x = h_fixture_tensor(fx, key);
        bool fl = x && em_tensor_dtype(x) == EM_F64;
        if (fl && dt != EM_F64) x = em_cast(x, dt);
        if (fl) em_requires_grad(x, true);
        em_tensor *y = em_forward(m, x);
        snprintf(key, sizeof key, "%s.y%d", c, s);
        snprintf(what, sizeof what, "%s %s step %d output", c, em_dtype_name(dt), s);
        if (!check(what, y, fx, key, dt)) continue;
        CHECK(em_tensor_dtype(y) == dt, "%s: dtype %s", what, em_dtype_name(em_tensor_dtype(y)));
        /* L = sum(y * w), w[i] = cos(0.7 i + 0.3) */
        int64_t n = em_tensor_numel(y);
        em_tensor *idx = em_arange(0, (double)n, 1, EM_F64, EM_CPU);
        em_tensor *w = em_cast(
            em_reshape(em_cos(em_add_scalar(em_mul_scalar(idx, 0.7), 0.3)), em_tensor_shape(y)),
            dt);
        em_grads *g = em_backward(em_sum(em_mul(y, w), EM_ALL, false));
        CHECK(g != NULL, "%s: backward: %s", c, em_last_error());
        if (!g) {
            em_clear_error();
            continue;
        }
        if (fl) {
            snprintf(key, sizeof key, "%s.gx%d", c, s);
            snprintf(what, sizeof what, "%s %s step %d grad x", c, em_dtype_name(dt), s);
            check(what, em_grad(g, x), fx, key, dt);
        }
        for (int i = 0; i < ents.n; i++) {
            if (ents.buffer[i]) continue;
            snprintf(key, sizeof key, "%s.g%d.%s", c, s, ents.name[i]);
            snprintf(what, sizeof what, "%s %s step %d grad %s", c, em_dtype_name(dt), s,
                     ents.name[i]);
            em_tensor *gp = em_grad(g, em_module_get(m, ents.name[i]));
            if (!gp) gp = em_zeros_like(em_module_get(m, ents.name[i])); /* no path: zero */
            check(what, gp, fx, key, dt);
        }
    }
    for (int i = 0; i < ents.n; i++) {
        if (!ents.buffer[i]) continue;
        snprintf(key, sizeof key, "%s.r.%s", c, ents.name[i]);
        snprintf(what, sizeof what, "%s %s buffer %s after %d steps", c, em_dtype_name(dt),
                 ents.name[i], steps);
        check(what, em_module_get(m, ents.name[i]), fx, key, dt);
    }
    em_scope_end();
    em_module_free(m);
    CHECK_OK(c);
    return h_failed - fails;
}

static void test_fixtures(void)
{
    h_fixture *fx = h_fixture_load("layers.emfx");
    CHECK(fx != NULL, "layers.emfx loads");
    if (!fx) return;
    int n = (int)(sizeof cases / sizeof cases[0]), bad = 0;
    for (int i = 0; i < n; i++) bad += run_case(fx, cases[i], EM_F64) != 0;
    for (int i = 0; i < n; i++) bad += run_case(fx, cases[i], EM_F32) != 0;
    printf("layer fixture cases: %d of %d failing (f64 and f32)\n", bad, 2 * n);
    h_fixture_free(fx);
}

/* ---- default initialisation -------------------------------------------------------------- */

static void stats(em_tensor *t, double *maxabs, double *mean, double *var)
{
    int64_t n = em_tensor_numel(t);
    double *v = h_values(t), mx = 0, s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) {
        mx = fmax(mx, fabs(v[i]));
        s += v[i];
        s2 += v[i] * v[i];
    }
    free(v);
    *maxabs = mx;
    *mean = s / (double)n;
    *var = s2 / (double)n - *mean * *mean;
}

static void check_uniform(const char *what, em_tensor *t, double bound)
{
    double mx, mean, var;
    CHECK(t != NULL, "%s exists", what);
    if (!t) return;
    stats(t, &mx, &mean, &var);
    CHECK(mx <= bound && mx > 0.95 * bound, "%s: max |w| %g vs bound %g", what, mx, bound);
    CHECK(fabs(var - bound * bound / 3) < 0.1 * bound * bound / 3, "%s: variance %g vs %g", what,
          var, bound * bound / 3);
}

static bool all_equal(em_tensor *t, double v)
{
    if (!t) return false;
    int64_t n = em_tensor_numel(t);
    double *x = h_values(t);
    bool ok = true;
    for (int64_t i = 0; i < n; i++) ok = ok && x[i] == v;
    free(x);
    return ok;
}

static void test_init(void)
{
    em_seed(7);
    /* Conv: kaiming_uniform(a=sqrt 5) = U(+-1/sqrt(fan_in)), bias the same bound */
    em_module *c = em_conv2d_new((em_conv2d_cfg){.in = 16, .out = 32, .kernel = {3, 3}}, EM_CPU);
    check_uniform("conv2d weight", em_module_get(c, "weight"), 1 / sqrt(16 * 9.0));
    double mx, mean, var;
    stats(em_module_get(c, "bias"), &mx, &mean, &var);
    CHECK(mx <= 1 / sqrt(16 * 9.0), "conv2d bias bound");
    CHECK(em_tensor_dtype(em_module_get(c, "weight")) == EM_F32, "layers start in f32");
    em_module_free(c);
    em_module *g =
        em_conv1d_new((em_conv1d_cfg){.in = 32, .out = 64, .kernel = {5}, .groups = 4}, EM_CPU);
    check_uniform("grouped conv1d weight", em_module_get(g, "weight"), 1 / sqrt(8 * 5.0));
    em_module_free(g);
    /* transposed: weight [in, out/groups, k], fan_in = out/groups * k */
    em_module *t = em_conv_transpose2d_new(
        (em_conv2d_cfg){.in = 40, .out = 24, .kernel = {3, 3}, .groups = 2}, EM_CPU);
    em_tensor *tw = em_module_get(t, "weight");
    CHECK(em_shape_equal(em_tensor_shape(tw), EM_SHAPE(40, 12, 3, 3)), "convT weight shape");
    check_uniform("conv_transpose2d weight", tw, 1 / sqrt(12 * 9.0));
    stats(em_module_get(t, "bias"), &mx, &mean, &var);
    CHECK(mx <= 1 / sqrt(12 * 9.0) && em_tensor_numel(em_module_get(t, "bias")) == 24,
          "convT bias");
    em_module_free(t);
    em_module *c3 = em_conv3d_new(
        (em_conv3d_cfg){.in = 4, .out = 16, .kernel = {3, 3, 3}, .no_bias = true}, EM_CPU);
    check_uniform("conv3d weight", em_module_get(c3, "weight"), 1 / sqrt(4 * 27.0));
    CHECK(em_module_get(c3, "bias") == NULL, "no_bias");
    em_module_free(c3);
    /* Embedding N(0, 1) */
    em_module *e = em_embedding_new((em_embedding_cfg){.num = 200, .dim = 50}, EM_CPU);
    stats(em_module_get(e, "weight"), &mx, &mean, &var);
    CHECK(fabs(mean) < 0.03 && fabs(var - 1) < 0.05, "embedding N(0,1): mean %g var %g", mean, var);
    em_module_free(e);
    e = em_embedding_new(
        (em_embedding_cfg){.num = 5, .dim = 3, .padding_idx = -1, .has_padding_idx = true}, EM_CPU);
    em_scope_begin();
    CHECK(e && all_equal(em_select(em_module_get(e, "weight"), 0, 4), 0),
          "padding row (-1 -> 4) starts at zero");
    em_scope_end();
    em_module_free(e);
    /* norms: ones and zeros; running statistics zeros/ones/0 */
    em_module *bn = em_batch_norm2d_new((em_norm_cfg){.num_features = 5}, EM_CPU);
    CHECK(all_equal(em_module_get(bn, "weight"), 1) && all_equal(em_module_get(bn, "bias"), 0) &&
              all_equal(em_module_get(bn, "running_mean"), 0) &&
              all_equal(em_module_get(bn, "running_var"), 1) &&
              all_equal(em_module_get(bn, "num_batches_tracked"), 0),
          "batch norm init");
    CHECK(em_tensor_dtype(em_module_get(bn, "num_batches_tracked")) == EM_I64 &&
              em_tensor_rank(em_module_get(bn, "num_batches_tracked")) == 0,
          "num_batches_tracked is an i64 scalar");
    CHECK(em_module_count(bn, true) == 10 && em_module_count(bn, false) == 21, "bn counts");
    em_module_free(bn);
    em_module *in = em_instance_norm2d_new((em_norm_cfg){.num_features = 5}, EM_CPU);
    CHECK(in && in->n_params == 0, "instance norm: no affine, no running stats by default");
    em_module_free(in);
    em_module *ln = em_layer_norm_new((em_layer_norm_cfg){.shape = EM_SHAPE(3, 4)}, EM_CPU);
    CHECK(all_equal(em_module_get(ln, "weight"), 1) && all_equal(em_module_get(ln, "bias"), 0),
          "layer norm init");
    em_module_free(ln);
    ln = em_layer_norm_new((em_layer_norm_cfg){.shape = EM_SHAPE(4), .no_bias = true}, EM_CPU);
    CHECK(ln && em_module_get(ln, "bias") == NULL && em_module_get(ln, "weight"), "no_bias");
    em_module_free(ln);
    em_module *gn = em_group_norm_new((em_group_norm_cfg){.groups = 2, .channels = 4}, EM_CPU);
    CHECK(all_equal(em_module_get(gn, "weight"), 1) && all_equal(em_module_get(gn, "bias"), 0),
          "group norm init");
    em_module_free(gn);
    em_module *rms = em_rms_norm_new((em_layer_norm_cfg){.shape = EM_SHAPE(4)}, EM_CPU);
    CHECK(all_equal(em_module_get(rms, "weight"), 1) && !em_module_get(rms, "bias"), "rms init");
    em_module_free(rms);
    em_module *p = em_prelu_new(0, EM_CPU);
    CHECK(all_equal(em_module_get(p, "weight"), 0.25) &&
              em_tensor_numel(em_module_get(p, "weight")) == 1,
          "PReLU 0.25, one parameter by default");
    em_module_free(p);
    em_module *sw = em_swiglu_new((em_swiglu_cfg){.d_in = 300, .d_out = 8}, EM_CPU);
    CHECK(sw && em_module_get(sw, "w1.bias") == NULL, "SwiGLU: no bias by default");
    check_uniform("SwiGLU w2", em_module_get(sw, "w2.weight"), 1 / sqrt(300.0));
    em_module_free(sw);
}

/* ---- modes, summaries, shapes ------------------------------------------------------------ */

static void test_train_eval(void)
{
    em_seed(11);
    em_module *bn = em_batch_norm1d_new((em_norm_cfg){.num_features = 3}, EM_CPU);
    em_scope_begin();
    em_tensor *x = em_add_scalar(em_mul_scalar(em_randn(EM_SHAPE(64, 3), EM_F32, EM_CPU), 2), 5);
    em_tensor *y = em_forward(bn, x);
    /* training: batch statistics, so the output is normalised */
    em_tensor *m = em_mean(y, EM_AXES(0), false);
    double *mv = h_values(m);
    CHECK(fabs(mv[0]) < 1e-5 && fabs(mv[2]) < 1e-5, "train mode normalises with the batch mean");
    free(mv);
    CHECK(em_item_i64(em_module_get(bn, "num_batches_tracked")) == 1, "one batch tracked");
    double *rm = h_values(em_module_get(bn, "running_mean"));
    CHECK(fabs(rm[1] - 0.5) < 0.1, "running mean moved 10%% toward 5: %g", rm[1]);
    free(rm);
    /* evaluation: running statistics, buffers untouched */
    em_module_train(bn, false);
    em_tensor *ye = em_forward(bn, x);
    em_tensor *me = em_mean(ye, EM_AXES(0), false);
    double *mev = h_values(me);
    CHECK(mev[0] > 1, "eval mode uses the running statistics (mean %g)", mev[0]);
    free(mev);
    CHECK(em_item_i64(em_module_get(bn, "num_batches_tracked")) == 1, "eval tracks nothing");
    /* training with one value per channel is refused, as PyTorch */
    em_module_train(bn, true);
    CHECK(em_forward(bn, em_ones(EM_SHAPE(1, 3), EM_F32, EM_CPU)) == NULL, "one value");
    CHECK_ERR(EM_ERR_SHAPE, "more than 1 value per channel");
    em_module_train(bn, false);
    CHECK(em_forward(bn, em_ones(EM_SHAPE(1, 3), EM_F32, EM_CPU)) != NULL, "eval batch of one");
    CHECK(em_forward(bn, em_ones(EM_SHAPE(4, 5), EM_F32, EM_CPU)) == NULL, "wrong channels");
    CHECK_ERR(EM_ERR_SHAPE, "BatchNorm1d");
    em_scope_end();
    em_module_free(bn);

    /* the activations are stateless in both modes; the shapes come out as PyTorch's */
    em_scope_begin();
    em_module *net = em_sequential(
        EM_CPU,
        em_conv2d_new((em_conv2d_cfg){.in = 3, .out = 8, .kernel = {3, 3}, .padding = {1, 1}},
                      EM_CPU),
        em_batch_norm2d_new((em_norm_cfg){.num_features = 8}, EM_CPU), em_hard_swish_new(),
        em_max_pool2d_new((em_pool2d_cfg){.kernel = {2, 2}}),
        em_conv_transpose2d_new(
            (em_conv2d_cfg){.in = 8, .out = 4, .kernel = {2, 2}, .stride = {2, 2}}, EM_CPU),
        em_group_norm_new((em_group_norm_cfg){.groups = 2, .channels = 4}, EM_CPU),
        em_pixel_unshuffle_new(2), em_adaptive_avg_pool2d_new(1, 0));
    CHECK(net != NULL, "a small network: %s", em_last_error());
    em_tensor *img = em_randn(EM_SHAPE(2, 3, 8, 6), EM_F32, EM_CPU);
    em_tensor *out = em_forward(net, img);
    CHECK(out && em_shape_equal(em_tensor_shape(out), EM_SHAPE(2, 16, 1, 3)), "network output");
    char *sum = em_module_summary(net);
    CHECK(sum && strstr(sum, "Conv2d(in=3, out=8, kernel=(3, 3), padding=(1, 1))") &&
              strstr(sum, "BatchNorm2d(8, eps=1e-05, momentum=0.1, affine=true, "
                          "track_running_stats=true)") &&
              strstr(sum, "running_var [8] f32 (buffer)") &&
              strstr(sum, "ConvTranspose2d(in=8, out=4, kernel=(2, 2), stride=(2, 2))") &&
              strstr(sum, "MaxPool2d(kernel=(2, 2), stride=(2, 2), padding=(0, 0))") &&
              strstr(sum, "GroupNorm(2, 4, eps=1e-05, affine=true)") &&
              strstr(sum, "PixelUnshuffle(downscale_factor=2)") &&
              strstr(sum, "AdaptiveAvgPool2d(output_size=(1, 0))") && strstr(sum, "Hardswish"),
          "summary:\n%s", sum ? sum : "");
    em_free(sum);
    em_module_free(net);
    em_scope_end();

    /* conv "same" keeps the size for odd and even kernels; unbatched input works */
    em_scope_begin();
    em_module *same = em_conv2d_new((em_conv2d_cfg){.in = 2,
                                                    .out = 2,
                                                    .kernel = {4, 5},
                                                    .dilation = {2, 1},
                                                    .padding_type = EM_PADDING_SAME,
                                                    .padding_mode = EM_PAD_CIRCULAR},
                                    EM_CPU);
    em_tensor *o = em_forward(same, em_randn(EM_SHAPE(2, 9, 7), EM_F32, EM_CPU));
    CHECK(o && em_shape_equal(em_tensor_shape(o), EM_SHAPE(2, 9, 7)), "same, unbatched");
    em_module_free(same);
    em_scope_end();
    CHECK_OK("train/eval");
}

/* ---- bad configurations ------------------------------------------------------------------ */

static void test_errors(void)
{
    CHECK(!em_conv2d_new((em_conv2d_cfg){.in = 3, .out = 4, .kernel = {3, 3}, .groups = 2}, EM_CPU),
          "groups not dividing");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_conv2d_new: groups=2 must divide in=3");
    CHECK(!em_conv1d_new((em_conv1d_cfg){.in = 3, .out = 4}, EM_CPU), "no kernel");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_conv1d_new: kernel[0] is 0");
    CHECK(!em_conv2d_new((em_conv2d_cfg){.in = 1,
                                         .out = 1,
                                         .kernel = {3, 3},
                                         .stride = {2, 2},
                                         .padding_type = EM_PADDING_SAME},
                         EM_CPU),
          "same with stride");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_conv2d_new: padding \"same\" is not supported for strided");
    CHECK(!em_conv3d_new((em_conv3d_cfg){.in = 1,
                                         .out = 1,
                                         .kernel = {1, 1, 1},
                                         .padding = {1, 0, 0},
                                         .padding_type = EM_PADDING_VALID},
                         EM_CPU),
          "valid with padding");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_conv3d_new: padding values given");
    CHECK(!em_conv2d_new((em_conv2d_cfg){.in = 1, .out = 1, .kernel = {1, 1}, .padding_end = {1}},
                         EM_CPU),
          "padding_end without asymmetric");
    CHECK_ERR(EM_ERR_INVALID_ARG, "EM_PADDING_ASYMMETRIC");
    CHECK(!em_conv1d_new((em_conv1d_cfg){.in = 1, .out = 1, .kernel = {2}, .output_padding = {1}},
                         EM_CPU),
          "output_padding on a plain conv");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_conv1d_new: output_padding is for transposed");
    CHECK(
        !em_conv_transpose2d_new(
            (em_conv2d_cfg){.in = 1, .out = 1, .kernel = {2, 2}, .output_padding = {1, 1}}, EM_CPU),
        "output_padding >= stride");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_conv_transpose2d_new: output_padding[0]=1");
    CHECK(!em_conv_transpose1d_new(
              (em_conv1d_cfg){.in = 1, .out = 1, .kernel = {2}, .padding_type = EM_PADDING_SAME},
              EM_CPU),
          "same on a transposed conv");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_conv_transpose1d_new");
    CHECK(!em_conv_transpose3d_new((em_conv3d_cfg){.in = 0, .out = 1, .kernel = {1, 1, 1}}, EM_CPU),
          "zero channels");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_conv_transpose3d_new");
    CHECK(!em_max_pool2d_new((em_pool2d_cfg){.kernel = {2, 2}, .padding = {2, 0}}), "pool pad");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_max_pool2d_new: padding[0]=2 must be at most half");
    CHECK(!em_avg_pool1d_new((em_pool1d_cfg){.kernel = {2}, .dilation = {2}}), "avg dilation");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_avg_pool1d_new");
    CHECK(!em_max_pool3d_new((em_pool3d_cfg){0}), "no kernel");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_max_pool3d_new");
    CHECK(!em_adaptive_avg_pool2d_new(-1, 2), "negative adaptive size");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_adaptive_avg_pool2d_new");
    CHECK(!em_batch_norm2d_new((em_norm_cfg){0}, EM_CPU), "no features");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_batch_norm2d_new: num_features 0");
    CHECK(!em_batch_norm1d_new((em_norm_cfg){.num_features = 2, .momentum = 2}, EM_CPU),
          "momentum 2");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_batch_norm1d_new");
    CHECK(!em_instance_norm1d_new((em_norm_cfg){.num_features = 2, .no_affine = true}, EM_CPU),
          "batch-norm flags on instance norm");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_instance_norm1d_new");
    CHECK(!em_group_norm_new((em_group_norm_cfg){.groups = 4, .channels = 6}, EM_CPU),
          "groups not dividing channels");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_group_norm_new: groups=4");
    CHECK(!em_layer_norm_new((em_layer_norm_cfg){0}, EM_CPU), "empty normalized shape");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_layer_norm_new");
    CHECK(!em_rms_norm_new((em_layer_norm_cfg){.shape = EM_SHAPE(3), .no_bias = true}, EM_CPU),
          "rms bias flag");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_rms_norm_new");
    CHECK(!em_embedding_new(
              (em_embedding_cfg){.num = 4, .dim = 2, .padding_idx = 4, .has_padding_idx = true},
              EM_CPU),
          "padding_idx out of range");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_embedding_new: padding_idx 4");
    CHECK(!em_upsample_new((em_upsample_cfg){0}), "no size or scale");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_upsample_new");
    CHECK(!em_upsample_new((em_upsample_cfg){.size = {2, 2}, .align_corners = true}),
          "align_corners with nearest");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_upsample_new: align_corners");
    CHECK(!em_pixel_shuffle_new(0), "factor 0");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_pixel_shuffle_new");
    CHECK(!em_fold_new((em_fold_cfg){.kernel = {2, 2}}), "fold without output size");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_fold_new: output_size");
    CHECK(!em_swiglu_new((em_swiglu_cfg){.d_in = 3}, EM_CPU), "swiglu size");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_swiglu_new");
    CHECK(!em_prelu_new(-1, EM_CPU), "prelu count");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_prelu_new");
    CHECK(!em_softplus_new(0, 20), "softplus beta");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_softplus_new");
    CHECK(!em_hardtanh_new(1, -1), "hardtanh bounds");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_hardtanh_new");

    /* forward-time shape errors name the layer */
    em_scope_begin();
    em_module *c = em_conv2d_new((em_conv2d_cfg){.in = 3, .out = 4, .kernel = {3, 3}}, EM_CPU);
    CHECK(!em_forward(c, em_ones(EM_SHAPE(1, 2, 5, 5), EM_F32, EM_CPU)), "wrong channels");
    CHECK_ERR(EM_ERR_SHAPE, "Conv2d expects 3 input channels, got 2");
    CHECK(!em_forward(c, em_ones(EM_SHAPE(5, 5), EM_F32, EM_CPU)), "wrong rank");
    CHECK_ERR(EM_ERR_SHAPE, "Conv2d expects [N, C, H, W]");
    em_module_free(c);
    em_module *glu = em_glu_new(-1);
    CHECK(!em_forward(glu, em_ones(EM_SHAPE(2, 3), EM_F32, EM_CPU)), "odd GLU dim");
    CHECK_ERR(EM_ERR_SHAPE, "GLU needs an even size");
    em_module_free(glu);
    em_module *pr = em_prelu_new(3, EM_CPU);
    CHECK(!em_forward(pr, em_ones(EM_SHAPE(2, 4), EM_F32, EM_CPU)), "PReLU channels");
    CHECK_ERR(EM_ERR_SHAPE, "PReLU(3)");
    em_module_free(pr);
    em_scope_end();
}

int main(void)
{
    h_init();
    test_fixtures();
    test_init();
    test_train_eval();
    test_errors();
    return h_finish();
}
