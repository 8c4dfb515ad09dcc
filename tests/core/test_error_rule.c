/* The error rule: a function fails only because of its own arguments or work, never because an
 * earlier error is still pending; a NULL argument fails it and keeps the error that made the
 * NULL, so a chain reports its first error; a pending error stays until em_clear_error. And a
 * configured device that is not there fails at em_device_default, naming the setting. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define STALE_FILE "/nonexistent/run/checkpoints/latest.safetensors"

/* A failure as a program meets it: "resume if a checkpoint exists", and there is none. */
static void make_stale_error(void)
{
    em_module *m = em_linear_new(2, 2, EM_CPU);
    CHECK(em_module_load(m, STALE_FILE, NULL, NULL) != EM_OK, "the load fails");
    em_module_free(m);
    CHECK(em_failed() && strstr(em_last_error(), STALE_FILE), "the load's error is pending: %s",
          em_last_error());
}

/* The stale error is still the pending one: nothing in between replaced or cleared it. */
static void check_still_stale(const char *after)
{
    CHECK(em_failed() && strstr(em_last_error(), STALE_FILE),
          "after %s the pending error is the load's, got: %s", after, em_last_error());
}

static int n_made;

/* Frees m and counts it; a NULL is a failed constructor. */
static void made(const char *what, em_module *m)
{
    CHECK(m != NULL, "%s returns a module with an earlier error pending", what);
    if (m) n_made++;
    em_module_free(m);
}

static void test_constructors(void)
{
    make_stale_error();
    em_device d = EM_CPU;
    made("em_linear_new", em_linear_new(4, 3, d));
    made("em_linear_new_cfg", em_linear_new_cfg(4, 3, (em_linear_cfg){.no_bias = true}, d));
    made("em_conv1d_new", em_conv1d_new((em_conv1d_cfg){.in = 2, .out = 3, .kernel = {3}}, d));
    made("em_conv2d_new", em_conv2d_new((em_conv2d_cfg){.in = 2, .out = 3, .kernel = {3, 3}}, d));
    made("em_conv3d_new",
         em_conv3d_new((em_conv3d_cfg){.in = 2, .out = 3, .kernel = {1, 3, 3}}, d));
    made("em_conv_transpose1d_new",
         em_conv_transpose1d_new((em_conv1d_cfg){.in = 2, .out = 3, .kernel = {3}}, d));
    made("em_conv_transpose2d_new",
         em_conv_transpose2d_new((em_conv2d_cfg){.in = 2, .out = 3, .kernel = {3, 3}}, d));
    made("em_conv_transpose3d_new",
         em_conv_transpose3d_new((em_conv3d_cfg){.in = 2, .out = 3, .kernel = {1, 3, 3}}, d));
    made("em_max_pool1d_new", em_max_pool1d_new((em_pool1d_cfg){.kernel = {2}}));
    made("em_max_pool2d_new", em_max_pool2d_new((em_pool2d_cfg){.kernel = {2, 2}}));
    made("em_max_pool3d_new", em_max_pool3d_new((em_pool3d_cfg){.kernel = {2, 2, 2}}));
    made("em_avg_pool1d_new", em_avg_pool1d_new((em_pool1d_cfg){.kernel = {2}}));
    made("em_avg_pool2d_new", em_avg_pool2d_new((em_pool2d_cfg){.kernel = {2, 2}}));
    made("em_avg_pool3d_new", em_avg_pool3d_new((em_pool3d_cfg){.kernel = {2, 2, 2}}));
    made("em_adaptive_avg_pool1d_new", em_adaptive_avg_pool1d_new(2));
    made("em_adaptive_avg_pool2d_new", em_adaptive_avg_pool2d_new(2, 2));
    made("em_adaptive_max_pool1d_new", em_adaptive_max_pool1d_new(2));
    made("em_adaptive_max_pool2d_new", em_adaptive_max_pool2d_new(2, 2));
    em_norm_cfg nc = {.num_features = 3};
    made("em_batch_norm1d_new", em_batch_norm1d_new(nc, d));
    made("em_batch_norm2d_new", em_batch_norm2d_new(nc, d));
    made("em_batch_norm3d_new", em_batch_norm3d_new(nc, d));
    made("em_instance_norm1d_new", em_instance_norm1d_new(nc, d));
    made("em_instance_norm2d_new", em_instance_norm2d_new(nc, d));
    made("em_instance_norm3d_new", em_instance_norm3d_new(nc, d));
    made("em_layer_norm_new", em_layer_norm_new((em_layer_norm_cfg){.shape = EM_SHAPE(4)}, d));
    made("em_rms_norm_new", em_rms_norm_new((em_layer_norm_cfg){.shape = EM_SHAPE(4)}, d));
    made("em_group_norm_new",
         em_group_norm_new((em_group_norm_cfg){.groups = 2, .channels = 4}, d));
    made("em_embedding_new", em_embedding_new((em_embedding_cfg){.num = 10, .dim = 4}, d));
    made("em_relu_new", em_relu_new());
    made("em_gelu_new", em_gelu_new());
    made("em_tanh_new", em_tanh_new());
    made("em_sigmoid_new", em_sigmoid_new());
    made("em_silu_new", em_silu_new());
    made("em_leaky_relu_new", em_leaky_relu_new(0.1));
    made("em_relu6_new", em_relu6_new());
    made("em_elu_new", em_elu_new(1));
    made("em_selu_new", em_selu_new());
    made("em_celu_new", em_celu_new(1));
    made("em_gelu_tanh_new", em_gelu_tanh_new());
    made("em_log_sigmoid_new", em_log_sigmoid_new());
    made("em_hard_sigmoid_new", em_hard_sigmoid_new());
    made("em_hard_swish_new", em_hard_swish_new());
    made("em_mish_new", em_mish_new());
    made("em_softplus_new", em_softplus_new(1, 20));
    made("em_softsign_new", em_softsign_new());
    made("em_hardtanh_new", em_hardtanh_new(-1, 1));
    made("em_tanhshrink_new", em_tanhshrink_new());
    made("em_softmax_new", em_softmax_new(-1));
    made("em_log_softmax_new", em_log_softmax_new(-1));
    made("em_softmin_new", em_softmin_new(-1));
    made("em_prelu_new", em_prelu_new(3, d));
    made("em_glu_new", em_glu_new(-1));
    made("em_swiglu_new", em_swiglu_new((em_swiglu_cfg){.d_in = 4, .d_out = 6}, d));
    made("em_upsample_new", em_upsample_new((em_upsample_cfg){.scale = {2, 2}}));
    made("em_pixel_shuffle_new", em_pixel_shuffle_new(2));
    made("em_pixel_unshuffle_new", em_pixel_unshuffle_new(2));
    made("em_unfold_new", em_unfold_new((em_fold_cfg){.kernel = {2, 2}}));
    made("em_fold_new", em_fold_new((em_fold_cfg){.output_size = {4, 4}, .kernel = {2, 2}}));
    made("em_identity_new", em_identity_new());
    made("em_flatten_new", em_flatten_new(1, -1));
    made("em_dropout_new", em_dropout_new(0.5));
    made("em_mha_new", em_mha_new((em_mha_cfg){.embed_dim = 8, .num_heads = 2}, d));
    em_transformer_cfg tc = {.d_model = 8, .nhead = 2, .dim_feedforward = 16, .num_layers = 2};
    made("em_transformer_encoder_layer_new", em_transformer_encoder_layer_new(tc, d));
    made("em_transformer_decoder_layer_new", em_transformer_decoder_layer_new(tc, d));
    made("em_transformer_encoder_new", em_transformer_encoder_new(tc, d));
    made("em_transformer_decoder_new", em_transformer_decoder_new(tc, d));
    made("em_feed_forward_new",
         em_feed_forward_new((em_ffn_cfg){.d_model = 8, .dim_feedforward = 16}, d));
    em_rnn_cfg rc = {.input_size = 4, .hidden_size = 5, .num_layers = 2};
    made("em_rnn_new", em_rnn_new(rc, d));
    made("em_lstm_new", em_lstm_new(rc, d));
    made("em_gru_new", em_gru_new(rc, d));
    made("em_sinusoidal_pe_new", em_sinusoidal_pe_new((em_posenc_cfg){.d_model = 8}, d));
    em_module *seq = em_sequential_push(em_sequential_new(d), em_linear_new(4, 3, d));
    made("em_sequential_new + em_sequential_push", em_sequential_push(seq, em_relu_new()));
    CHECK(n_made == 72, "%d of 72 constructors made their module", n_made);
    check_still_stale("the constructors");
    em_clear_error();
}

static em_status one_step(const em_step_ctx *ctx, em_step_out *out)
{
    (void)ctx;
    out->end = true;
    return EM_OK;
}

/* A whole training step, its optimizers, schedulers, data and metrics with the error pending. */
static void test_training(void)
{
    em_seed(5);
    em_tensor *x = em_randn(EM_SHAPE(16, 4), EM_F32, EM_CPU);
    em_tensor *y = em_randint(0, 3, EM_SHAPE(16), EM_I64, EM_CPU);
    make_stale_error();
    em_module *net = em_sequential_push(
        em_sequential_push(em_sequential_new(EM_CPU), em_linear_new(4, 8, EM_CPU)),
        em_linear_new(8, 3, EM_CPU));
    CHECK(net != NULL, "a model");
    em_optim *opts[7] = {
        em_sgd_new(net, (em_sgd_cfg){.lr = 0.1}), em_adam_new(net, (em_adam_cfg){0}),
        em_adamw_new(net, (em_adam_cfg){0}),      em_rmsprop_new(net, (em_rmsprop_cfg){0}),
        em_adagrad_new(net, (em_adagrad_cfg){0}), em_lion_new(net, (em_lion_cfg){0}),
        em_muon_new(net, (em_muon_cfg){0}),
    };
    for (int i = 0; i < 7; i++) CHECK(opts[i] != NULL, "optimizer %d", i);
    em_sched *sch[4] = {
        em_sched_step_new(opts[0], 2, 0.5),
        em_sched_cosine_new(opts[1], 10, 0),
        em_sched_exponential_new(opts[2], 0.9),
        em_sched_plateau_new(opts[3], false, 0.5, 2, 1e-4, 0, 0),
    };
    for (int i = 0; i < 4; i++) CHECK(sch[i] != NULL, "scheduler %d", i);
    double first = 0, last = 0;
    for (int s = 0; s < 5; s++) {
        em_scope_begin();
        em_tensor *loss = em_cross_entropy(em_forward(net, x), y, (em_ce_cfg){0});
        em_grads *g = em_backward(loss);
        CHECK(loss && g && em_grads_count(g) == 4, "step %d: loss and 4 gradients", s);
        CHECK(em_optim_step(opts[0], g) == EM_OK, "step %d: SGD steps", s);
        for (int i = 1; i < 7; i++) CHECK(em_optim_step(opts[i], g) == EM_OK, "optimizer %d", i);
        for (int i = 0; i < 4; i++) CHECK(!isnan(em_sched_step(sch[i], 1.0)), "scheduler %d", i);
        if (s == 0) first = em_item_f64(loss);
        last = em_item_f64(loss);
        em_scope_end();
    }
    CHECK(last < first, "the loss falls: %g -> %g", first, last);

    em_tensor *fields[2] = {x, y};
    em_dataset *ds = em_dataset_shuffle(em_dataset_from_tensors(fields, NULL, 2), 3);
    em_loader *l = em_loader_new(ds, (em_loader_cfg){.batch_size = 4, .workers = 1});
    CHECK(l != NULL, "a loader");
    int batches = 0;
    em_batch b;
    while (l && em_loader_next(l, &b)) {
        batches++;
        em_batch_free(&b);
    }
    CHECK(batches == 4, "the loader gives 4 batches, got %d", batches);
    em_loader_free(l);

    em_metrics *mt = em_metrics_new(0);
    CHECK(mt != NULL, "metrics");
    em_metrics_free(mt);
    em_learner *lr =
        em_learner_new(net, opts[0], NULL,
                       (em_learner_cfg){.train_step = one_step, .no_run_dir = true, .quiet = true});
    CHECK(lr != NULL, "a learner");
    em_learner_free(lr);
    check_still_stale("a training step, optimizers, schedulers, a loader and a learner");
    em_clear_error();

    for (int i = 0; i < 4; i++) em_sched_free(sch[i]);
    for (int i = 0; i < 7; i++) em_optim_free(opts[i]);
    em_module_free(net);
    em_release(x);
    em_release(y);
}

/* A NULL in the middle of a chain: the first error is the one reported. */
static void test_chains(void)
{
    em_scope_begin();
    em_tensor *a = em_ones(EM_SHAPE(2, 3), EM_F32, EM_CPU);
    em_tensor *r = em_sum(em_relu(em_add(a, em_reshape(a, EM_SHAPE(4, 4)))), EM_ALL, false);
    CHECK(r == NULL, "the chain fails");
    CHECK(em_last_status() == EM_ERR_SHAPE && !strncmp(em_last_error(), "em_reshape", 10),
          "its first error is reported: %s", em_last_error());
    em_clear_error();

    /* a constructor failing for its own reason says why */
    CHECK(em_linear_new(0, 3, EM_CPU) == NULL, "Linear of 0 inputs");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_linear_new: sizes in=0 out=3 must be positive");
    em_module *net = em_linear_new(3, 2, EM_CPU);
    CHECK(em_forward(net, em_reshape(a, EM_SHAPE(5))) == NULL, "forward of a failed input");
    CHECK(!strncmp(em_last_error(), "em_reshape", 10), "the input's error is kept: %s",
          em_last_error());
    em_clear_error();

    /* with an earlier error pending, a new failure keeps the pending one (handling an error
       means clearing it) */
    make_stale_error();
    CHECK(em_add(a, em_ones(EM_SHAPE(5), EM_F32, EM_CPU)) == NULL, "a failing op");
    check_still_stale("a failing op");
    em_clear_error();
    CHECK(em_add(a, em_ones(EM_SHAPE(5), EM_F32, EM_CPU)) == NULL, "the same op after clearing");
    CHECK_ERR(EM_ERR_SHAPE, "em_add: shapes [2, 3] and [5] cannot broadcast");
    em_module_free(net);
    em_scope_end();
}

/* A device that is not there stops the program at em_device_default, naming the setting. */
static void test_missing_device(void)
{
    bool cuda7 = em_device_count("cuda") > 7;
    em_clear_error();
    if (!cuda7) {
        setenv("EMBER_DEVICE", "cuda:7", 1);
        em_config_reload(); /* the environment is read at start-up and by a reload */
        em_device d = em_device_default();
        CHECK(d.backend == EM_DEVICE_NONE.backend && d.index == EM_DEVICE_NONE.index,
              "EM_DEVICE_NONE for a missing GPU");
        CHECK(em_last_status() == EM_ERR_DEVICE &&
                  !strncmp(em_last_error(), "em_device_default: EMBER_DEVICE=cuda:7: ", 40) &&
                  (strstr(em_last_error(), "no CUDA device") ||
                   strstr(em_last_error(), "does not exist")),
              "the message names the setting: %s", em_last_error());
        em_clear_error();
        CHECK(em_linear_new(4, 4, d) == NULL, "a module on no device fails");
        CHECK_ERR(EM_ERR_DEVICE, "device none does not exist");
        CHECK(em_zeros(EM_SHAPE(2), EM_F32, d) == NULL, "a tensor on no device fails");
        CHECK_ERR(EM_ERR_DEVICE, "em_zeros: device none does not exist");
        char buf[16];
        CHECK(!strcmp(em_device_str(d, buf, sizeof buf), "none"), "its name: %s", buf);
    }
    setenv("EMBER_DEVICE", "tpu:0", 1);
    em_config_reload();
    em_device_default();
    CHECK_ERR(EM_ERR_DEVICE, "em_device_default: EMBER_DEVICE=tpu:0: unknown device \"tpu:0\"");
    unsetenv("EMBER_DEVICE");
    em_config_reload();
    CHECK(em_config_set("device", "cpu:3") == EM_OK, "device set");
    em_device_default();
    CHECK_ERR(EM_ERR_DEVICE, "em_device_default: device = \"cpu:3\" (em_config_set): device "
                             "\"cpu:3\" does not exist (1 device)");
    CHECK(em_config_set("device", NULL) == EM_OK, "device unset");
    em_device d = em_device_default();
    CHECK(em_device_equal(d, EM_CPU), "the default is the CPU again");
    CHECK_OK("em_device_default");
}

int main(void)
{
    h_init();
    test_constructors();
    test_training();
    test_chains();
    test_missing_device();
    return h_finish();
}
