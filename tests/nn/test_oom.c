/* Allocation failures in modules, losses, optimizers and module files: each allocation of a
 * layer's constructor, of its forward and backward pass, of a loss, of an optimizer's steps and
 * of em_module_save/em_module_load is made to fail in turn (em_mem_fail_at n = 1, 2, ... until a
 * run completes). Every failing run must return an error and leak nothing; the run that completes
 * gives the values of a run without failures. Also: em_sequential frees every module it is given
 * when one of them is NULL. */
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define SEED       777u
#define WALK_LIMIT 20000

static int64_t live0, bytes0;

static void baseline(void)
{
    live0 = em_live_tensors();
    bytes0 = em_mem_get_stats().current_bytes;
}

static bool no_leak(const char *what, int64_t n)
{
    int64_t live = em_live_tensors() - live0, bytes = em_mem_get_stats().current_bytes - bytes0;
    CHECK(live == 0 && bytes == 0, "%s, allocation %lld: %lld handles and %lld bytes leaked", what,
          (long long)n, (long long)live, (long long)bytes);
    return live == 0 && bytes == 0;
}

/* A failing run's error: out of memory, with a message. */
static void check_oom(const char *what, int64_t n)
{
    CHECK(em_last_status() == EM_ERR_OOM && em_last_error()[0],
          "%s, allocation %lld: error %s (%s) instead of out of memory", what, (long long)n,
          em_status_name(em_last_status()), em_last_error());
    em_clear_error();
}

/* sum(t * r) with r fixed random values. */
static em_tensor *lossof(em_tensor *t)
{
    return em_sum(em_mul(t, em_rand_like(t)), EM_ALL, false);
}

/* ---- em_sequential ----------------------------------------------------------------------- */

static void test_sequential(void)
{
    baseline();
    /* a constructor failing in the middle: the modules before and after it are freed */
    em_module *net = em_sequential(EM_CPU, em_linear_new(4, 3, EM_CPU), em_relu_new(),
                                   em_linear_new(-1, 2, EM_CPU), em_dropout_new(0.1),
                                   em_linear_new(3, 2, EM_CPU));
    CHECK(net == NULL, "a failed constructor fails the Sequential");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_linear_new");
    no_leak("em_sequential with a failed constructor", 0);

    /* a NULL with no error pending is named */
    net = em_sequential(EM_CPU, em_relu_new(), NULL, em_linear_new(2, 2, EM_CPU));
    CHECK(net == NULL, "a NULL module fails the Sequential");
    CHECK_ERR(EM_ERR_INVALID_ARG, "module 1 of 3 is NULL");
    no_leak("em_sequential with a NULL module", 0);

    /* a trailing NULL (an end marker) is a NULL module too */
    net = em_sequential(EM_CPU, em_linear_new(2, 2, EM_CPU), em_relu_new(), NULL);
    CHECK(net == NULL, "a trailing NULL fails the Sequential");
    CHECK_ERR(EM_ERR_INVALID_ARG, "module 2 of 3 is NULL");
    no_leak("em_sequential with a trailing NULL", 0);

    em_module *mods[2] = {em_tanh_new(), em_linear_new(2, 1, EM_CPU)};
    net = em_sequential_of(EM_CPU, mods, 2);
    CHECK(net && net->n_children == 2 && strcmp(net->children[1].name, "1") == 0, "from an array");
    em_module_free(net);
    CHECK(em_sequential_of(EM_CPU, NULL, 1) == NULL, "no array");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_sequential_of");
    no_leak("em_sequential_of", 0);

    /* every allocation failing in turn, constructors included */
    int failures = 0;
    int64_t n;
    for (n = 1; n < WALK_LIMIT; n++) {
        em_mem_fail_at(n);
        net = em_sequential(EM_CPU, em_linear_new(4, 8, EM_CPU), em_relu_new(),
                            em_layer_norm_new((em_layer_norm_cfg){.shape = EM_SHAPE(8)}, EM_CPU),
                            em_dropout_new(0.5), em_linear_new(8, 2, EM_CPU));
        em_mem_fail_at(0);
        if (net) {
            CHECK(!em_failed() && net->n_children == 5, "the Sequential is whole");
            em_module_free(net);
        } else {
            failures++;
            check_oom("em_sequential", n);
        }
        bool clean = no_leak("em_sequential", n);
        if (net || !clean) break;
    }
    CHECK(failures >= 10 && n < WALK_LIMIT, "em_sequential: %d failing allocations", failures);
    printf("%-44s %5d failing allocations\n", "em_sequential", failures);
}

/* ---- layers ------------------------------------------------------------------------------ */

typedef struct layer_case {
    const char *name;
    em_module *(*make)(void);
    em_tensor *(*input)(void);
    /* the forward (NULL: em_forward) */
    em_tensor *(*run)(em_module *m, em_tensor *x);
} layer_case;

static em_tensor *in_2x4(void)
{
    return em_randn(EM_SHAPE(2, 4), EM_F32, EM_CPU);
}
static em_tensor *in_seq(void) /* [N, L, E] */
{
    return em_randn(EM_SHAPE(2, 3, 4), EM_F32, EM_CPU);
}
static em_tensor *in_1d(void)
{
    return em_randn(EM_SHAPE(2, 2, 6), EM_F32, EM_CPU);
}
static em_tensor *in_2d(void)
{
    return em_randn(EM_SHAPE(1, 2, 4, 4), EM_F32, EM_CPU);
}
static em_tensor *in_3d(void)
{
    return em_randn(EM_SHAPE(1, 2, 3, 4, 4), EM_F32, EM_CPU);
}
static em_tensor *in_tokens(void)
{
    return em_randint(0, 6, EM_SHAPE(2, 3), EM_I64, EM_CPU);
}

static em_module *mk_mlp(void)
{
    return em_sequential(EM_CPU, em_linear_new(4, 5, EM_CPU), em_relu_new(),
                         em_linear_new(5, 3, EM_CPU), em_gelu_new(), em_flatten_new(0, -1));
}
static em_module *mk_acts(void)
{
    return em_sequential(EM_CPU, em_tanh_new(), em_sigmoid_new(), em_silu_new(),
                         em_leaky_relu_new(0.1), em_relu6_new(), em_elu_new(1.0), em_selu_new(),
                         em_celu_new(1.0), em_gelu_tanh_new(), em_log_sigmoid_new(),
                         em_hard_sigmoid_new(), em_hard_swish_new(), em_mish_new());
}
static em_module *mk_acts2(void)
{
    return em_sequential(EM_CPU, em_softplus_new(1, 20), em_softsign_new(), em_hardtanh_new(-1, 1),
                         em_tanhshrink_new(), em_softmax_new(-1), em_log_softmax_new(-1),
                         em_softmin_new(0), em_dropout_new(0.25), em_identity_new());
}
static em_module *mk_gated(void)
{
    return em_sequential(
        EM_CPU, em_prelu_new(4, EM_CPU),
        em_swiglu_new((em_swiglu_cfg){.d_in = 4, .d_out = 6, .bias = true}, EM_CPU),
        em_glu_new(-1));
}
static em_module *mk_conv1d(void)
{
    return em_sequential(
        EM_CPU,
        em_conv1d_new(
            (em_conv1d_cfg){
                .in = 2, .out = 3, .kernel = {3}, .padding = {1}, .padding_mode = EM_PAD_REFLECT},
            EM_CPU),
        em_conv_transpose1d_new((em_conv1d_cfg){.in = 3, .out = 2, .kernel = {2}, .stride = {2}},
                                EM_CPU),
        em_max_pool1d_new((em_pool1d_cfg){.kernel = {2}}),
        em_avg_pool1d_new((em_pool1d_cfg){.kernel = {3}, .stride = {1}, .padding = {1}}),
        em_adaptive_avg_pool1d_new(4), em_adaptive_max_pool1d_new(3),
        em_batch_norm1d_new((em_norm_cfg){.num_features = 2}, EM_CPU),
        em_instance_norm1d_new((em_norm_cfg){.num_features = 2, .affine = true}, EM_CPU));
}
static em_module *mk_conv2d(void)
{
    return em_sequential(
        EM_CPU,
        em_conv2d_new(
            (em_conv2d_cfg){.in = 2, .out = 4, .kernel = {3, 3}, .padding_type = EM_PADDING_SAME},
            EM_CPU),
        em_batch_norm2d_new((em_norm_cfg){.num_features = 4}, EM_CPU),
        em_group_norm_new((em_group_norm_cfg){.groups = 2, .channels = 4}, EM_CPU),
        em_max_pool2d_new((em_pool2d_cfg){.kernel = {2, 2}}),
        em_conv_transpose2d_new(
            (em_conv2d_cfg){.in = 4, .out = 2, .kernel = {2, 2}, .stride = {2, 2}}, EM_CPU),
        em_instance_norm2d_new((em_norm_cfg){.num_features = 2, .track_running_stats = true},
                               EM_CPU),
        em_avg_pool2d_new((em_pool2d_cfg){.kernel = {2, 2}}), em_adaptive_avg_pool2d_new(3, 3),
        em_adaptive_max_pool2d_new(2, 2));
}
static em_module *mk_resample(void)
{
    return em_sequential(
        EM_CPU, em_upsample_new((em_upsample_cfg){.scale = {2, 2}, .mode = EM_INTERP_BILINEAR}),
        em_pixel_unshuffle_new(2), em_pixel_shuffle_new(2),
        em_unfold_new((em_fold_cfg){.kernel = {2, 2}, .stride = {2, 2}}),
        em_fold_new((em_fold_cfg){.output_size = {8, 8}, .kernel = {2, 2}, .stride = {2, 2}}),
        em_rms_norm_new((em_layer_norm_cfg){.shape = EM_SHAPE(8)}, EM_CPU));
}
static em_module *mk_conv3d(void)
{
    return em_sequential(
        EM_CPU,
        em_conv3d_new((em_conv3d_cfg){.in = 2, .out = 2, .kernel = {1, 2, 2}, .padding = {0, 1, 1}},
                      EM_CPU),
        em_conv_transpose3d_new((em_conv3d_cfg){.in = 2, .out = 2, .kernel = {1, 2, 2}}, EM_CPU),
        em_batch_norm3d_new((em_norm_cfg){.num_features = 2}, EM_CPU),
        em_instance_norm3d_new((em_norm_cfg){.num_features = 2}, EM_CPU),
        em_max_pool3d_new((em_pool3d_cfg){.kernel = {1, 2, 2}}),
        em_avg_pool3d_new((em_pool3d_cfg){.kernel = {1, 2, 2}}));
}
static em_module *mk_embedding(void)
{
    return em_sequential(
        EM_CPU,
        em_embedding_new(
            (em_embedding_cfg){.num = 6, .dim = 4, .padding_idx = 0, .has_padding_idx = true},
            EM_CPU),
        em_layer_norm_new((em_layer_norm_cfg){.shape = EM_SHAPE(4)}, EM_CPU),
        em_feed_forward_new((em_ffn_cfg){.d_model = 4, .dim_feedforward = 8, .dropout = 0.1},
                            EM_CPU));
}
static em_module *mk_mha(void)
{
    return em_mha_new(
        (em_mha_cfg){.embed_dim = 4, .num_heads = 2, .num_kv_heads = 1, .rotary = true}, EM_CPU);
}
static em_tensor *run_mha(em_module *m, em_tensor *x)
{
    em_tensor *w = NULL;
    em_tensor *y = em_mha_forward(m, x, x, x, (em_mha_args){.causal = true, .weights = &w});
    return w ? em_add(lossof(y), lossof(w)) : NULL;
}
static em_module *mk_encoder(void)
{
    return em_transformer_encoder_new((em_transformer_cfg){.d_model = 4,
                                                           .nhead = 2,
                                                           .dim_feedforward = 6,
                                                           .dropout = 0.1,
                                                           .num_layers = 1,
                                                           .final_norm = true},
                                      EM_CPU);
}
static em_tensor *run_encoder(em_module *m, em_tensor *x)
{
    return em_transformer_encode(m, x, (em_transformer_masks){.src_causal = true});
}
static em_module *mk_decoder(void)
{
    return em_transformer_decoder_layer_new((em_transformer_cfg){.d_model = 4,
                                                                 .nhead = 2,
                                                                 .dim_feedforward = 6,
                                                                 .no_dropout = true,
                                                                 .norm_first = true,
                                                                 .activation = EM_FFN_GELU},
                                            EM_CPU);
}
static em_tensor *run_decoder(em_module *m, em_tensor *x)
{
    em_tensor *mem = em_narrow(x, 1, 0, 2);
    return em_transformer_decode(m, x, mem, (em_transformer_masks){.tgt_causal = true});
}
static em_module *mk_pe(void)
{
    return em_sinusoidal_pe_new((em_posenc_cfg){.d_model = 4, .max_len = 8, .dropout = 0.1},
                                EM_CPU);
}
static em_tensor *run_pe(em_module *m, em_tensor *x)
{
    return em_rope(em_sinusoidal_pe_forward(m, x, 1), 2, 0);
}
static em_module *mk_lstm(void)
{
    return em_lstm_new((em_rnn_cfg){.input_size = 4,
                                    .hidden_size = 3,
                                    .num_layers = 2,
                                    .bidirectional = true,
                                    .dropout = 0.2},
                       EM_CPU);
}
static em_module *mk_gru(void)
{
    return em_gru_new((em_rnn_cfg){.input_size = 4, .hidden_size = 3}, EM_CPU);
}
static em_module *mk_rnn(void)
{
    return em_rnn_new(
        (em_rnn_cfg){
            .input_size = 4, .hidden_size = 3, .nonlinearity = EM_RNN_RELU, .seq_first = true},
        EM_CPU);
}
static em_tensor *run_rnn(em_module *m, em_tensor *x)
{
    em_tensor *h = NULL, *c = NULL;
    em_tensor *y = em_rnn_forward(m, x, NULL, NULL, &h, &c);
    em_tensor *l = y && h ? em_add(lossof(y), lossof(h)) : NULL;
    return c ? em_add(l, lossof(c)) : l;
}

static const layer_case layers[] = {
    {"Linear, ReLU, GELU, Flatten", mk_mlp, in_2x4, NULL},
    {"activations", mk_acts, in_2x4, NULL},
    {"activations, softmax, dropout", mk_acts2, in_2x4, NULL},
    {"PReLU, SwiGLU, GLU", mk_gated, in_2x4, NULL},
    {"conv, pool, norm 1-D", mk_conv1d, in_1d, NULL},
    {"conv, pool, norm 2-D", mk_conv2d, in_2d, NULL},
    {"upsample, pixel shuffle, fold, RMS norm", mk_resample, in_2d, NULL},
    {"conv, pool, norm 3-D", mk_conv3d, in_3d, NULL},
    {"embedding, layer norm, feed forward", mk_embedding, in_tokens, NULL},
    {"multi-head attention", mk_mha, in_seq, run_mha},
    {"transformer encoder", mk_encoder, in_seq, run_encoder},
    {"transformer decoder layer", mk_decoder, in_seq, run_decoder},
    {"sinusoidal encoding, rotary", mk_pe, in_seq, run_pe},
    {"LSTM", mk_lstm, in_seq, run_rnn},
    {"GRU", mk_gru, in_seq, run_rnn},
    {"RNN", mk_rnn, in_seq, run_rnn},
};

/* One run: forward, a loss, backward. The loss's value, or NAN on failure. */
static double layer_run(const layer_case *lc, em_module *m, int64_t fail_at)
{
    em_seed(SEED + 1);
    em_tensor *x = lc->input();
    if (em_dtype_is_float(em_tensor_dtype(x))) em_requires_grad(x, true);
    em_mem_fail_at(fail_at);
    em_tensor *y = lc->run ? lc->run(m, x) : em_forward(m, x);
    em_tensor *loss = y ? (em_tensor_numel(y) == 1 ? y : lossof(y)) : NULL;
    em_grads *g = loss ? em_backward(loss) : NULL;
    em_mem_fail_at(0);
    if (!g) return NAN;
    CHECK(em_grads_count(g) > 0 || em_module_count(m, true) == 0, "%s: gradients", lc->name);
    return em_item_f64(loss);
}

static void test_constructor(const char *name, em_module *(*make)(void))
{
    baseline();
    int failures = 0;
    int64_t n;
    for (n = 1; n < WALK_LIMIT; n++) {
        em_mem_fail_at(n);
        em_module *m = make();
        em_mem_fail_at(0);
        if (m)
            CHECK(!em_failed(), "%s: a module with an error pending: %s", name, em_last_error());
        else
            failures++, check_oom(name, n);
        em_module_free(m);
        em_clear_error();
        if (!no_leak(name, n) || m) break;
    }
    CHECK(n < WALK_LIMIT, "%s: the constructor completes", name);
}

static void test_layers(void)
{
    for (size_t i = 0; i < sizeof layers / sizeof *layers; i++) {
        const layer_case *lc = &layers[i];
        test_constructor(lc->name, lc->make);
        em_seed(SEED);
        em_module *m = lc->make();
        CHECK(m != NULL, "%s: made: %s", lc->name, em_last_error());
        if (!m) {
            em_clear_error();
            continue;
        }
        em_scope_begin();
        double want =
            layer_run(lc, m, 0); /* lazy state (caches) is made here, before the baseline */
        em_scope_end();
        CHECK(!isnan(want) && !em_failed(), "%s: runs: %s", lc->name, em_last_error());
        em_clear_error();
        baseline();
        int failures = 0;
        int64_t n;
        for (n = 1; n < WALK_LIMIT && !isnan(want); n++) {
            em_scope_begin();
            double got = layer_run(lc, m, n);
            /* a failed optional argument (a class weight) gives a loss without it: the pending
             * error is what tells the program, so the run counts as a failure */
            bool failed = isnan(got) || em_failed();
            if (failed) {
                failures++;
                check_oom(lc->name, n);
            } else {
                CHECK(h_close(got, want, 1e-6, 1e-5), "%s: loss %g, want %g", lc->name, got, want);
            }
            em_scope_end();
            em_clear_error();
            if (!no_leak(lc->name, n) || !failed) break;
        }
        CHECK(failures > 0 && n < WALK_LIMIT, "%s: walked", lc->name);
        printf("%-44s %5d failing allocations\n", lc->name, failures);
        em_module_free(m);
    }
}

/* ---- losses ------------------------------------------------------------------------------ */

static em_tensor *leaf(em_shape s)
{
    return em_requires_grad(em_randn(s, EM_F32, EM_CPU), true);
}

static em_tensor *losses_a(void)
{
    em_tensor *x = leaf(EM_SHAPE(3, 4)), *y = em_randn(EM_SHAPE(3, 4), EM_F32, EM_CPU);
    em_tensor *t = em_randint(0, 4, EM_SHAPE(3), EM_I64, EM_CPU);
    em_tensor *w = em_rand(EM_SHAPE(4), EM_F32, EM_CPU);
    em_tensor *acc =
        em_add(em_cross_entropy(x, t, (em_ce_cfg){0}),
               em_cross_entropy(x, t, (em_ce_cfg){.weight = w, .label_smoothing = 0.1}));
    acc = em_add(acc, em_cross_entropy(x, em_softmax(y, 1), (em_ce_cfg){0}));
    acc = em_add(acc, em_nll_loss(em_log_softmax(x, 1), t,
                                  (em_ce_cfg){.reduction = EM_REDUCTION_SUM, .ignore_index = 2}));
    acc = em_add(acc, em_mse_loss(x, y, EM_REDUCTION_MEAN));
    acc = em_add(acc, em_l1_loss(x, y, EM_REDUCTION_SUM));
    acc = em_add(acc, em_smooth_l1_loss(x, y, EM_REDUCTION_MEAN, 0.5));
    return em_add(acc, em_huber_loss(x, y, EM_REDUCTION_MEAN, 0.7));
}

static em_tensor *losses_b(void)
{
    em_tensor *x = leaf(EM_SHAPE(3, 4)), *p = em_rand(EM_SHAPE(3, 4), EM_F32, EM_CPU);
    em_tensor *pw = em_rand(EM_SHAPE(4), EM_F32, EM_CPU);
    em_tensor *acc = em_add(em_bce_loss(em_sigmoid(x), p, (em_bce_cfg){0}),
                            em_bce_with_logits(x, p, (em_bce_cfg){.pos_weight = pw}));
    acc = em_add(acc,
                 em_kl_div(em_log_softmax(x, 1), em_softmax(p, 1), EM_REDUCTION_BATCHMEAN, false));
    acc = em_add(acc, em_poisson_nll_loss(x, p, (em_poisson_cfg){.full = true}));
    return em_add(acc, em_gaussian_nll_loss(x, p, em_add_scalar(p, 0.5), (em_gaussian_cfg){0}));
}

static em_tensor *losses_c(void)
{
    em_tensor *a = leaf(EM_SHAPE(3, 4)), *b = leaf(EM_SHAPE(3, 4)), *c = leaf(EM_SHAPE(3, 4));
    float yv[3] = {1, -1, 1};
    em_tensor *y = em_from_data(yv, EM_F32, EM_SHAPE(3), EM_F32, EM_CPU);
    em_tensor *acc =
        em_add(em_cosine_embedding_loss(a, b, y, EM_REDUCTION_MEAN, 0.1),
               em_margin_ranking_loss(em_sum(a, EM_AXES(1), false), em_sum(b, EM_AXES(1), false), y,
                                      EM_REDUCTION_MEAN, 0.2));
    return em_add(acc, em_triplet_margin_loss(a, b, c, (em_triplet_cfg){.swap = true}));
}

static em_tensor *losses_ctc(void)
{
    em_tensor *x = leaf(EM_SHAPE(6, 2, 4)); /* [T, N, C] */
    int64_t tv[4] = {1, 2, 3, 3}, il[2] = {6, 5}, tl[2] = {2, 2};
    em_tensor *t = em_from_data(tv, EM_I64, EM_SHAPE(2, 2), EM_I64, EM_CPU);
    em_tensor *ilen = em_from_data(il, EM_I64, EM_SHAPE(2), EM_I64, EM_CPU);
    em_tensor *tlen = em_from_data(tl, EM_I64, EM_SHAPE(2), EM_I64, EM_CPU);
    return em_ctc_loss(em_log_softmax(x, 2), t, ilen, tlen, (em_ctc_cfg){0});
}

typedef struct loss_case {
    const char *name;
    em_tensor *(*build)(void);
} loss_case;

static const loss_case losses[] = {
    {"cross entropy, nll, mse, l1, smooth l1, huber", losses_a},
    {"bce, kl, poisson, gaussian", losses_b},
    {"cosine, margin ranking, triplet", losses_c},
    {"ctc", losses_ctc},
};

static double loss_run(const loss_case *lc, int64_t fail_at)
{
    em_seed(SEED);
    em_mem_fail_at(fail_at);
    em_tensor *loss = lc->build();
    em_grads *g = loss ? em_backward(loss) : NULL;
    em_mem_fail_at(0);
    return g ? em_item_f64(loss) : NAN;
}

static void test_losses(void)
{
    for (size_t i = 0; i < sizeof losses / sizeof *losses; i++) {
        const loss_case *lc = &losses[i];
        baseline();
        em_scope_begin();
        double want = loss_run(lc, 0);
        em_scope_end();
        CHECK(!isnan(want) && !em_failed(), "%s: runs: %s", lc->name, em_last_error());
        em_clear_error();
        int failures = 0;
        int64_t n;
        for (n = 1; n < WALK_LIMIT && !isnan(want); n++) {
            em_scope_begin();
            double got = loss_run(lc, n);
            /* a failed optional argument (a class weight) gives a loss without it: the pending
             * error is what tells the program, so the run counts as a failure */
            bool failed = isnan(got) || em_failed();
            if (failed) {
                failures++;
                check_oom(lc->name, n);
            } else {
                CHECK(h_close(got, want, 1e-6, 1e-5), "%s: loss %g, want %g", lc->name, got, want);
            }
            em_scope_end();
            em_clear_error();
            if (!no_leak(lc->name, n) || !failed) break;
        }
        CHECK(failures > 0 && n < WALK_LIMIT, "%s: walked", lc->name);
        printf("%-44s %5d failing allocations\n", lc->name, failures);
    }
}

/* ---- optimizers -------------------------------------------------------------------------- */

typedef struct optim_case {
    const char *name;
    em_optim *(*make)(em_module *m);
} optim_case;

static em_optim *mk_sgd(em_module *m)
{
    return em_sgd_new(
        m, (em_sgd_cfg){.lr = 0.1, .momentum = 0.9, .nesterov = true, .weight_decay = 0.01});
}
static em_optim *mk_adam(em_module *m)
{
    return em_adam_new(m, (em_adam_cfg){.amsgrad = true, .weight_decay = 0.01});
}
static em_optim *mk_adamw(em_module *m)
{
    return em_adamw_new(m, (em_adam_cfg){0});
}
static em_optim *mk_rmsprop(em_module *m)
{
    return em_rmsprop_new(m, (em_rmsprop_cfg){.centered = true, .momentum = 0.5});
}
static em_optim *mk_adagrad(em_module *m)
{
    return em_adagrad_new(m, (em_adagrad_cfg){.lr_decay = 0.01});
}
static em_optim *mk_lion(em_module *m)
{
    return em_lion_new(m, (em_lion_cfg){.weight_decay = 0.1});
}
static em_optim *mk_muon(em_module *m)
{
    return em_muon_new(m, (em_muon_cfg){0});
}

static const optim_case optims[] = {
    {"SGD", mk_sgd},         {"Adam", mk_adam}, {"AdamW", mk_adamw}, {"RMSprop", mk_rmsprop},
    {"Adagrad", mk_adagrad}, {"Lion", mk_lion}, {"Muon", mk_muon},
};

static em_module *optim_net(void)
{
    em_seed(SEED);
    return em_sequential(EM_CPU, em_linear_new(4, 3, EM_CPU), em_tanh_new(),
                         em_linear_new(3, 2, EM_CPU));
}

/* Gradients of the net on fixed data (scope-owned). */
static em_grads *optim_grads(em_module *net)
{
    em_seed(SEED + 2);
    return em_backward(lossof(em_forward(net, in_2x4())));
}

/* The sum of every parameter's values. */
static double param_sum(em_module *net)
{
    em_tensor *p[8];
    int n = em_module_parameters(net, p, NULL, 8);
    double s = 0;
    for (int i = 0; i < n && i < 8; i++) {
        em_tensor *t = em_sum(p[i], EM_ALL, false);
        s += em_item_f64(t);
        em_release(t);
    }
    return s;
}

/* A fresh net, an optimizer made and stepped twice (with clipping and scaling in between) with the
 * n-th allocation failing; the parameters' sum afterwards, or NAN on failure. After a failure the
 * optimizer, if it was made, must still step. */
static double optim_run(const optim_case *oc, int64_t fail_at)
{
    em_module *net = optim_net();
    em_scope_begin();
    em_grads *g = optim_grads(net);
    em_mem_fail_at(fail_at);
    em_optim *o = oc->make(net);
    bool ok = o && em_optim_step(o, g) == EM_OK && !isnan(em_clip_grad_norm(g, 0.5, 2.0)) &&
              em_clip_grad_value(g, 0.1) == EM_OK && em_grads_scale(g, 0.5) == EM_OK &&
              em_optim_step(o, g) == EM_OK;
    em_mem_fail_at(0);
    double r = NAN;
    if (ok) {
        CHECK(!em_failed(), "%s, allocation %lld: steps with an error pending: %s", oc->name,
              (long long)fail_at, em_last_error());
        r = param_sum(net);
    } else {
        check_oom(oc->name, fail_at);
        CHECK(!o || em_optim_step(o, g) == EM_OK,
              "%s, allocation %lld: a step after a failure fails: %s", oc->name, (long long)fail_at,
              em_last_error());
        em_clear_error();
    }
    em_optim_free(o);
    em_scope_end();
    em_module_free(net);
    return r;
}

static void test_optimizers(void)
{
    for (size_t i = 0; i < sizeof optims / sizeof *optims; i++) {
        const optim_case *oc = &optims[i];
        baseline();
        double want = optim_run(oc, 0);
        CHECK(!isnan(want) && !em_failed(), "%s: runs: %s", oc->name, em_last_error());
        em_clear_error();
        int failures = 0;
        int64_t n;
        for (n = 1; n < WALK_LIMIT && !isnan(want); n++) {
            double got = optim_run(oc, n);
            if (isnan(got)) {
                failures++;
            } else {
                CHECK(h_close(got, want, 1e-6, 1e-5), "%s: parameters sum to %g, want %g", oc->name,
                      got, want);
            }
            em_clear_error();
            if (!no_leak(oc->name, n) || !isnan(got)) break;
        }
        CHECK(failures > 0 && n < WALK_LIMIT, "%s: walked", oc->name);
        printf("%-44s %5d failing allocations\n", oc->name, failures);
    }
}

/* ---- module files ------------------------------------------------------------------------ */

static em_module *file_net(uint64_t seed)
{
    em_seed(seed);
    return em_sequential(EM_CPU, em_linear_new(4, 3, EM_CPU),
                         em_batch_norm1d_new((em_norm_cfg){.num_features = 3}, EM_CPU),
                         em_linear_new(3, 2, EM_CPU));
}

static void test_module_files(void)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/ember_oom_%d.safetensors", (int)getpid());
    em_module *src = file_net(SEED);
    double want = param_sum(src);
    baseline();
    int saves = 0, loads = 0;
    int64_t n;
    for (n = 1; n < WALK_LIMIT; n++) {
        unlink(path);
        em_mem_fail_at(n);
        em_status st = em_module_save(src, path, (const char *const[]){"note", "oom", NULL});
        em_mem_fail_at(0);
        if (st != EM_OK) {
            saves++;
            check_oom("em_module_save", n);
            CHECK(access(path, F_OK) != 0, "a failed save leaves no file");
        } else {
            CHECK(!em_failed(), "em_module_save, allocation %lld: saved with an error pending: %s",
                  (long long)n, em_last_error());
        }
        em_clear_error();
        if (!no_leak("em_module_save", n) || st == EM_OK) break;
    }
    CHECK(saves > 0 && n < WALK_LIMIT, "em_module_save walked");
    printf("%-44s %5d failing allocations\n", "em_module_save", saves);
    em_module *dst = file_net(SEED + 9);
    CHECK(!h_close(param_sum(dst), want, 1e-6, 1e-6), "other values before the load");
    baseline();
    for (n = 1; n < WALK_LIMIT; n++) {
        em_mem_fail_at(n);
        em_status st = em_module_load(dst, path, NULL, NULL);
        em_mem_fail_at(0);
        if (st != EM_OK) {
            loads++;
            check_oom("em_module_load", n);
        } else {
            CHECK(!em_failed(), "em_module_load, allocation %lld: loaded with an error pending: %s",
                  (long long)n, em_last_error());
            CHECK(h_close(param_sum(dst), want, 1e-6, 1e-6), "loaded values");
        }
        em_clear_error();
        if (st == EM_OK || !no_leak("em_module_load", n)) break; /* a load changes the module */
    }
    CHECK(loads > 0 && n < WALK_LIMIT, "em_module_load walked");
    printf("%-44s %5d failing allocations\n", "em_module_load", loads);
    unlink(path);
    em_module_free(dst);
    em_module_free(src);
}

int main(void)
{
    h_init();
    test_sequential();
    test_layers();
    test_losses();
    test_optimizers();
    test_module_files();
    return h_finish();
}
