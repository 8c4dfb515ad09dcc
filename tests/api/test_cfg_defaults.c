/* Options structs whose zero value is the default: for every struct of include/ember/ with a
 * default other than zero, the zero value ((em_x_cfg){0} in C, em_x_cfg{} in C++) behaves
 * exactly as the documented defaults written out. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* ---- optimizers ------------------------------------------------------------------------------ */

typedef em_optim *(*make_optim)(em_module *m, const void *cfg);
static em_optim *sgd(em_module *m, const void *c)
{
    return em_sgd_new(m, *(const em_sgd_cfg *)c);
}
static em_optim *adam(em_module *m, const void *c)
{
    return em_adam_new(m, *(const em_adam_cfg *)c);
}
static em_optim *adamw(em_module *m, const void *c)
{
    return em_adamw_new(m, *(const em_adam_cfg *)c);
}
static em_optim *rmsprop(em_module *m, const void *c)
{
    return em_rmsprop_new(m, *(const em_rmsprop_cfg *)c);
}
static em_optim *adagrad(em_module *m, const void *c)
{
    return em_adagrad_new(m, *(const em_adagrad_cfg *)c);
}
static em_optim *lion(em_module *m, const void *c)
{
    return em_lion_new(m, *(const em_lion_cfg *)c);
}
static em_optim *muon(em_module *m, const void *c)
{
    return em_muon_new(m, *(const em_muon_cfg *)c);
}

static const char *mlp_names[] = {"0.weight", "0.bias", "2.weight", "2.bias"};

/* The same seeded MLP trained 3 steps on a fixed batch by the optimizer `make` builds from cfg. */
static em_module *train3(make_optim make, const void *cfg)
{
    em_seed(7);
    em_module *net = em_sequential(EM_CPU, em_linear_new(5, 4, EM_CPU), em_tanh_new(),
                                   em_linear_new(4, 3, EM_CPU));
    em_optim *o = make(net, cfg);
    CHECK(o != NULL, "optimizer: %s", em_last_error());
    em_tensor *x = em_randn(EM_SHAPE(8, 5), EM_F32, EM_CPU);
    em_tensor *y = em_randint(0, 3, EM_SHAPE(8), EM_I64, EM_CPU);
    for (int i = 0; i < 3 && o; i++) {
        em_scope_begin();
        em_tensor *loss = em_cross_entropy(em_forward(net, x), y, (em_ce_cfg){0});
        em_optim_step(o, em_backward(loss));
        em_scope_end();
    }
    CHECK_OK("train3");
    em_release(x);
    em_release(y);
    em_optim_free(o);
    return net;
}

/* true when both modules hold the same bytes under every name in names[] */
static bool same_params(em_module *a, em_module *b, const char *const *names, int n)
{
    bool same = true;
    for (int i = 0; i < n; i++)
        same = same && h_same_bytes(em_module_get(a, names[i]), em_module_get(b, names[i]));
    return same;
}

static void check_optim(const char *what, make_optim make, const void *zero, const void *dflt,
                        const void *other)
{
    em_module *a = train3(make, zero), *b = train3(make, dflt), *c = train3(make, other);
    CHECK(same_params(a, b, mlp_names, 4), "%s: the zero config trains as the defaults", what);
    CHECK(!same_params(a, c, mlp_names, 4), "%s: a non-default config trains differently", what);
    em_module_free(a);
    em_module_free(b);
    em_module_free(c);
}

static void test_optimizers(void)
{
    check_optim("sgd", sgd, &(em_sgd_cfg){0}, &(em_sgd_cfg){.lr = 1e-3}, &(em_sgd_cfg){.lr = 1e-2});
    em_adam_cfg adam_d = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
    check_optim("adam", adam, &(em_adam_cfg){0}, &adam_d, &(em_adam_cfg){.beta1 = 0.5});
    em_adam_cfg adamw_d = adam_d;
    adamw_d.weight_decay = 1e-2;
    check_optim("adamw", adamw, &(em_adam_cfg){0}, &adamw_d, &(em_adam_cfg){.weight_decay = 0.5});
    check_optim("rmsprop", rmsprop, &(em_rmsprop_cfg){0},
                &(em_rmsprop_cfg){.lr = 1e-2, .alpha = 0.99, .eps = 1e-8},
                &(em_rmsprop_cfg){.alpha = 0.5});
    check_optim("adagrad", adagrad, &(em_adagrad_cfg){0},
                &(em_adagrad_cfg){.lr = 1e-2, .eps = 1e-10}, &(em_adagrad_cfg){.lr = 0.1});
    check_optim("lion", lion, &(em_lion_cfg){0},
                &(em_lion_cfg){.lr = 1e-4, .beta1 = 0.9, .beta2 = 0.99},
                &(em_lion_cfg){.lr = 1e-3});
    em_muon_cfg muon_d = {.lr = 2e-2, .momentum = 0.95, .ns_steps = 5, .fallback = adamw_d};
    check_optim("muon", muon, &(em_muon_cfg){0}, &muon_d, &(em_muon_cfg){.ns_steps = 2});
    check_optim("muon fallback", muon, &(em_muon_cfg){0}, &muon_d,
                &(em_muon_cfg){.fallback = {.weight_decay = 0.5}});
}

/* ---- losses ---------------------------------------------------------------------------------- */

/* a and b: results inside a scope, which releases them */
static bool same_value(const em_tensor *a, const em_tensor *b)
{
    return a && b && h_same_bytes(a, b);
}

static void test_losses(void)
{
    em_scope_begin();
    /* cross entropy: class -100 (PyTorch's ignore_index) is skipped */
    em_tensor *logits = em_randn(EM_SHAPE(3, 4), EM_F64, EM_CPU);
    em_tensor *t = em_from_i64((int64_t[]){1, -100, 2}, EM_SHAPE(3));
    em_tensor *t2 = em_from_i64((int64_t[]){1, 2}, EM_SHAPE(2));
    em_tensor *rows = em_index_select(logits, 0, em_from_i64((int64_t[]){0, 2}, EM_SHAPE(2)));
    CHECK(same_value((em_cross_entropy(logits, t, (em_ce_cfg){0})),
                     (em_cross_entropy(logits, t, (em_ce_cfg){.ignore_index = -100}))),
          "cross entropy: ignore_index 0 means -100");
    CHECK(h_close(em_item_f64(em_cross_entropy(logits, t, (em_ce_cfg){0})),
                  em_item_f64(em_cross_entropy(rows, t2, (em_ce_cfg){0})), 1e-15, 1e-15),
          "cross entropy: target -100 is ignored");

    em_tensor *a = em_randn(EM_SHAPE(4, 3), EM_F64, EM_CPU),
              *p = em_randn(EM_SHAPE(4, 3), EM_F64, EM_CPU);
    em_tensor *n = em_randn(EM_SHAPE(4, 3), EM_F64, EM_CPU);
    CHECK(same_value((em_triplet_margin_loss(a, p, n, (em_triplet_cfg){0})),
                     (em_triplet_margin_loss(a, p, n,
                                             (em_triplet_cfg){.margin = 1, .p = 2, .eps = 1e-6}))),
          "triplet: margin 1, p 2, eps 1e-6");
    CHECK(!same_value((em_triplet_margin_loss(a, p, n, (em_triplet_cfg){0})),
                      (em_triplet_margin_loss(a, p, n, (em_triplet_cfg){.margin = 3}))),
          "triplet: the margin matters");

    /* rates and variances below the defaults' eps, so that eps decides the value */
    em_tensor *rate = em_from_f64((double[]){1e-12, 0.5, 2}, EM_SHAPE(3));
    em_tensor *cnt = em_from_f64((double[]){1, 0, 3}, EM_SHAPE(3));
    CHECK(same_value((em_poisson_nll_loss(rate, cnt, (em_poisson_cfg){.no_log_input = true})),
                     (em_poisson_nll_loss(rate, cnt,
                                          (em_poisson_cfg){.no_log_input = true, .eps = 1e-8}))),
          "poisson: eps 1e-8");
    em_tensor *var = em_from_f64((double[]){1e-9, 0.5, 2}, EM_SHAPE(3));
    CHECK(same_value((em_gaussian_nll_loss(rate, cnt, var, (em_gaussian_cfg){0})),
                     (em_gaussian_nll_loss(rate, cnt, var, (em_gaussian_cfg){.eps = 1e-6}))),
          "gaussian: eps 1e-6");
    em_scope_end();
    CHECK_OK("losses");
}

/* ---- layers ---------------------------------------------------------------------------------- */

/* Two layers built from two configs with the same seed: same outputs, same summary. */
typedef em_module *(*make_layer)(const void *cfg);
static void check_layer(const char *what, make_layer make, const void *zero, const void *dflt,
                        em_tensor *x, bool summary)
{
    em_seed(3);
    em_module *a = make(zero);
    em_seed(3);
    em_module *b = make(dflt);
    CHECK(a && b, "%s: %s", what, em_last_error());
    if (!a || !b) {
        em_module_free(a);
        em_module_free(b);
        return;
    }
    char *sa = em_module_summary(a), *sb = em_module_summary(b);
    CHECK(sa && sb && (!summary || strcmp(sa, sb) == 0), "%s: summaries\n%s\n%s", what, sa, sb);
    em_free(sa);
    em_free(sb);
    if (x) {
        em_scope_begin();
        CHECK(same_value(em_forward(a, x), em_forward(b, x)), "%s: same output", what);
        em_scope_end();
    }
    em_module_free(a);
    em_module_free(b);
}

static em_module *bn(const void *c)
{
    return em_batch_norm2d_new(*(const em_norm_cfg *)c, EM_CPU);
}
static em_module *ln(const void *c)
{
    return em_layer_norm_new(*(const em_layer_norm_cfg *)c, EM_CPU);
}
static em_module *rms(const void *c)
{
    return em_rms_norm_new(*(const em_layer_norm_cfg *)c, EM_CPU);
}
static em_module *gn(const void *c)
{
    return em_group_norm_new(*(const em_group_norm_cfg *)c, EM_CPU);
}
static em_module *conv(const void *c)
{
    return em_conv2d_new(*(const em_conv2d_cfg *)c, EM_CPU);
}
static em_module *maxpool(const void *c)
{
    return em_max_pool2d_new(*(const em_pool2d_cfg *)c);
}
static em_module *unfold(const void *c)
{
    return em_unfold_new(*(const em_fold_cfg *)c);
}
static em_module *mha(const void *c)
{
    return em_mha_new(*(const em_mha_cfg *)c, EM_CPU);
}
static em_module *pe(const void *c)
{
    return em_sinusoidal_pe_new(*(const em_posenc_cfg *)c, EM_CPU);
}
static em_module *rnn(const void *c)
{
    return em_lstm_new(*(const em_rnn_cfg *)c, EM_CPU);
}
static em_module *encoder(const void *c)
{
    return em_transformer_encoder_new(*(const em_transformer_cfg *)c, EM_CPU);
}

static void test_layers(void)
{
    em_scope_begin();
    /* inputs with a tiny spread, so that the norms' eps shows in the output */
    em_tensor *img = em_mul_scalar(em_randn(EM_SHAPE(2, 4, 5, 5), EM_F32, EM_CPU), 1e-3);
    em_seed(3);
    em_module *b0 = bn(&(em_norm_cfg){.num_features = 4});
    em_seed(3);
    em_module *b1 = bn(&(em_norm_cfg){.num_features = 4, .eps = 1e-5, .momentum = 0.1});
    CHECK(same_value(em_forward(b0, img), em_forward(b1, img)), "batch norm: eps 1e-5");
    const char *stats[] = {"running_mean", "running_var", "num_batches_tracked"};
    CHECK(same_params(b0, b1, stats, 3), "batch norm: momentum 0.1");
    em_module_free(b0);
    em_module_free(b1);

    em_tensor *rowsx = em_mul_scalar(em_randn(EM_SHAPE(3, 6), EM_F32, EM_CPU), 1e-4);
    check_layer("layer norm", ln, &(em_layer_norm_cfg){.shape = EM_SHAPE(6)},
                &(em_layer_norm_cfg){.shape = EM_SHAPE(6), .eps = 1e-5}, rowsx, true);
    /* RMS norm's eps 0 is the input dtype's epsilon, which its summary prints as "None" */
    check_layer("rms norm", rms, &(em_layer_norm_cfg){.shape = EM_SHAPE(6)},
                &(em_layer_norm_cfg){.shape = EM_SHAPE(6), .eps = FLT_EPSILON}, rowsx, false);
    check_layer("group norm", gn, &(em_group_norm_cfg){.groups = 2, .channels = 4},
                &(em_group_norm_cfg){.groups = 2, .channels = 4, .eps = 1e-5}, img, true);
    check_layer(
        "conv2d", conv, &(em_conv2d_cfg){.in = 4, .out = 3, .kernel = {3, 3}},
        &(em_conv2d_cfg){
            .in = 4, .out = 3, .kernel = {3, 3}, .stride = {1, 1}, .dilation = {1, 1}, .groups = 1},
        img, true);
    check_layer("max pool", maxpool, &(em_pool2d_cfg){.kernel = {2, 2}},
                &(em_pool2d_cfg){.kernel = {2, 2}, .stride = {2, 2}, .dilation = {1, 1}}, img,
                true);
    check_layer("unfold", unfold, &(em_fold_cfg){.kernel = {2, 2}},
                &(em_fold_cfg){.kernel = {2, 2}, .stride = {1, 1}, .dilation = {1, 1}}, img, true);

    em_tensor *seq = em_randn(EM_SHAPE(2, 5, 8), EM_F32, EM_CPU);
    check_layer("mha", mha, &(em_mha_cfg){.embed_dim = 8, .num_heads = 2, .rotary = true},
                &(em_mha_cfg){.embed_dim = 8,
                              .num_heads = 2,
                              .num_kv_heads = 2,
                              .kdim = 8,
                              .vdim = 8,
                              .rotary = true,
                              .rope_base = 10000},
                seq, true);
    check_layer("positional encoding", pe, &(em_posenc_cfg){.d_model = 8},
                &(em_posenc_cfg){.d_model = 8, .max_len = 5000}, seq, true);
    check_layer("lstm", rnn, &(em_rnn_cfg){.input_size = 8, .hidden_size = 3},
                &(em_rnn_cfg){.input_size = 8, .hidden_size = 3, .num_layers = 1}, seq, true);
    /* the encoder's dropout is random: compared through the summary */
    check_layer("transformer encoder", encoder,
                &(em_transformer_cfg){.d_model = 8, .nhead = 2, .num_layers = 1},
                &(em_transformer_cfg){.d_model = 8,
                                      .nhead = 2,
                                      .num_layers = 1,
                                      .dim_feedforward = 2048,
                                      .dropout = 0.1,
                                      .layer_norm_eps = 1e-5},
                NULL, true);
    em_seed(3);
    em_module *enc = encoder(&(em_transformer_cfg){.d_model = 8, .nhead = 2, .num_layers = 1});
    em_tensor *w = em_module_get(enc, "layers.0.linear1.weight");
    CHECK(w && em_tensor_dim(w, 0) == 2048, "transformer: dim_feedforward 2048");
    em_module_free(enc);
    em_seed(3);
    em_module *p = pe(&(em_posenc_cfg){.d_model = 8});
    CHECK(em_tensor_dim(em_module_get(p, "pe"), 0) == 5000, "positional encoding: max_len 5000");
    em_module_free(p);
    em_scope_end();
    CHECK_OK("layers");
}

/* ---- functional options ---------------------------------------------------------------------- */

static void test_functional(void)
{
    em_scope_begin();
    em_tensor *x = em_randn(EM_SHAPE(1, 2, 6, 6), EM_F64, EM_CPU);
    em_tensor *w = em_randn(EM_SHAPE(3, 2, 3, 3), EM_F64, EM_CPU);
    CHECK(same_value(
              (em_conv2d(x, w, NULL, (em_conv_opts){0})),
              (em_conv2d(x, w, NULL,
                         (em_conv_opts){.stride = {1, 1, 1}, .dilation = {1, 1, 1}, .groups = 1}))),
          "conv opts: stride, dilation, groups 1");
    CHECK(same_value((em_max_pool2d(x, (em_pool_opts){.kernel = {2, 2}}, NULL)),
                     (em_max_pool2d(
                         x, (em_pool_opts){.kernel = {2, 2}, .stride = {2, 2}, .dilation = {1, 1}},
                         NULL))),
          "pool opts: stride = kernel, dilation 1");
    em_tensor *q = em_randn(EM_SHAPE(2, 4, 8), EM_F64, EM_CPU);
    CHECK(same_value((em_sdpa(q, q, q, NULL, (em_sdpa_opts){0})),
                     (em_sdpa(q, q, q, NULL, (em_sdpa_opts){.scale = 1 / sqrt(8.0)}))),
          "sdpa: scale 1/sqrt(E)");
    em_tensor *big = em_arange(0, 2000, 1, EM_F32, EM_CPU);
    char *s0 = em_tensor_format(big, (em_print_options){0});
    char *s1 = em_tensor_format(big, (em_print_options){.threshold = 1000, .edge_items = 3});
    CHECK(s0 && s1 && strcmp(s0, s1) == 0, "print options: threshold 1000, edge_items 3");
    em_free(s0);
    em_free(s1);
    em_scope_end();
    CHECK_OK("functional");
}

/* ---- data ------------------------------------------------------------------------------------ */

static void test_data(void)
{
    char path[] = "/tmp/ember_cfg_defaultsXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "temporary file");
    const char *csv = "a,b,c\n1,2,3\n4,5,6\n7,8,9\n";
    CHECK(write(fd, csv, strlen(csv)) == (ssize_t)strlen(csv), "write csv");
    close(fd);
    em_dataset *d0 = em_dataset_csv(path, (em_csv_cfg){.label = true});
    em_dataset *d1 =
        em_dataset_csv(path, (em_csv_cfg){.delimiter = ',', .label = true, .label_col = 0});
    CHECK(d0 && d1 && em_dataset_len(d0) == 3 && em_dataset_len(d1) == 3,
          "csv: ',' and the header row skipped");
    em_item i0 = {0}, i1 = {0};
    em_dataset_get(d0, 1, &i0);
    em_dataset_get(d1, 1, &i1);
    CHECK(i0.n == 2 && em_item_i64(i0.t[1]) == 4 && h_same_bytes(i0.t[0], i1.t[0]),
          "csv: label_col 0 is the first column");
    em_item_free(&i0);
    em_item_free(&i1);
    em_dataset_free(d1);
    em_loader *l = em_loader_new(d0, (em_loader_cfg){0});
    CHECK(l && em_loader_num_batches(l) == 3, "loader: batch_size 1");
    em_batch b;
    CHECK(em_loader_next(l, &b) && b.size == 1, "loader: one item per batch");
    em_batch_free(&b);
    em_loader_free(l);
    unlink(path);
    CHECK_OK("data");
}

/* ---- learner --------------------------------------------------------------------------------- */

static em_module *learner_net;

static em_status step(const em_step_ctx *ctx, em_step_out *out)
{
    em_tensor *x = em_ones(EM_SHAPE(2, 3), EM_F32, EM_CPU);
    out->loss = em_mean(em_square(em_forward(learner_net, x)), EM_ALL, false);
    em_release(x);
    return out->loss ? EM_OK : em_last_status();
}

static void test_learner(void)
{
    learner_net = em_linear_new(3, 1, EM_CPU);
    em_optim *o = em_sgd_new(learner_net, (em_sgd_cfg){0});
    em_learner *l = em_learner_new(
        learner_net, o, NULL,
        (em_learner_cfg){
            .train_step = step, .train_batches = 2, .no_run_dir = true, .quiet = true});
    CHECK(l && em_learner_fit(l) == EM_OK, "learner: %s", em_last_error());
    CHECK(em_learner_epochs_done(l) == 1 && em_learner_steps(l) == 2,
          "learner: epochs 0 means 1, grad_accum 0 means 1 (%lld epochs, %lld steps)",
          (long long)em_learner_epochs_done(l), (long long)em_learner_steps(l));
    em_learner_free(l);
    em_optim_free(o);
    em_module_free(learner_net);
    CHECK_OK("learner");
}

int main(void)
{
    h_init();
    test_optimizers();
    test_losses();
    test_layers();
    test_functional();
    test_data();
    test_learner();
    return h_finish();
}
