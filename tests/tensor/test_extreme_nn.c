/* Extreme-argument sweep over include/ember/nn*.h, autodiff.h, optim.h, data.h, train.h and
 * store.h (test_extreme.c covers core.h and tensor.h): every function that takes a size, dim,
 * index, count, pad, stride, kernel size, step or seed gets 0, -1, INT64_MAX, INT64_MIN, 2^31,
 * 2^32, 2^62 (INT_MAX, INT_MIN for ints) and must succeed or fail with an error naming itself,
 * never crash or trip a sanitizer. Tensor storage is capped at 64 MiB (max_tensor_mb).
 *
 * Covered (nn.h): em_module_alloc, em_forward_n, em_module_parameters, em_init_fans,
 *   em_init_constant, em_init_uniform, em_init_normal, em_init_trunc_normal,
 *   em_init_kaiming_uniform, em_init_kaiming_normal, em_init_xavier_uniform,
 *   em_init_xavier_normal, em_init_orthogonal, em_linear_new, em_linear_new_cfg, em_softmax_new,
 *   em_flatten_new.
 * (nn_layers.h): em_conv1d/2d/3d_new, em_conv_transpose1d/2d/3d_new, em_max_pool1d/2d/3d_new,
 *   em_avg_pool1d/2d/3d_new, em_adaptive_avg_pool1d/2d_new, em_adaptive_max_pool1d/2d_new,
 *   em_batch_norm1d/2d/3d_new, em_instance_norm1d/2d/3d_new, em_layer_norm_new,
 *   em_rms_norm_new, em_group_norm_new, em_embedding_new, em_log_softmax_new, em_softmin_new,
 *   em_prelu_new, em_glu_new, em_swiglu_new, em_upsample_new, em_pixel_shuffle_new,
 *   em_pixel_unshuffle_new, em_unfold_new, em_fold_new.
 * (nn_seq.h): em_mha_new, em_sinusoidal_table, em_sinusoidal_pe_new,
 *   em_sinusoidal_pe_forward, em_rope, em_feed_forward_new, em_transformer_encoder_layer_new,
 *   em_transformer_decoder_layer_new, em_transformer_encoder_new, em_transformer_decoder_new,
 *   em_rnn_new, em_lstm_new, em_gru_new.
 * (nn_loss.h): em_cross_entropy and em_nll_loss (ignore_index, class ids), em_ctc_loss (blank).
 * (autodiff.h): em_backward_with, em_checkpoint.
 * (optim.h): em_muon_new (ns_steps), em_sched_constant_new, em_sched_step_new,
 *   em_sched_multistep_new, em_sched_linear_new, em_sched_cosine_new,
 *   em_sched_cosine_restarts_new, em_sched_warmup_new, em_sched_noam_new,
 *   em_sched_onecycle_new, em_sched_plateau_new, em_sched_step.
 * (data.h): em_dataset_alloc, em_dataset_get, em_dataset_get_at, em_data_uniform,
 *   em_dataset_from_tensors, em_dataset_subset, em_dataset_take, em_dataset_sample,
 *   em_dataset_shuffle, em_dataset_windows, em_dataset_random_crop, em_dataset_random_flip,
 *   em_dataset_normalize, em_image_crop_pad, em_image_resize, em_image_folder_class,
 *   em_text_from_string, em_text_char, em_text_decode, em_loader_new (batch_size, workers,
 *   prefetch, seed), em_loader_reset, em_batch_stack.
 * (train.h): em_metrics_new, em_metrics_add_loss, em_metrics_update_ids,
 *   em_metrics_confusion, em_learner_new (epochs, batches, grad_accum, topk, ckpt_every,
 *   keep_last, patience, log_every), em_learner_metric.
 * (store.h): em_tensor_dict_name_at, em_tensor_dict_tensor_at, em_tensor_dict_meta_key_at,
 *   em_tensor_dict_meta_value_at, em_safetensors_load_memory, em_store_info_entry,
 *   em_store_info_meta_key_at, em_store_info_meta_value_at. */
#include "extreme.h"

static em_tensor *F(em_shape s)
{
    return em_rand_uniform(s, -1, 1, EM_F32, EM_CPU);
}

/* A module-returning call: checked, then freed. */
#define M(fn, e)                                                                                   \
    do {                                                                                           \
        em_module *m_ = (e);                                                                       \
        outcome_(m_ != NULL, fn, #e, __LINE__);                                                    \
        em_module_free(m_);                                                                        \
    } while (0)

/* A module made from e (when it can be) runs forward on x: either may fail, naming fn or
 * em_forward. */
static void run_module_(em_module *m, const char *fn, em_tensor *x, const char *expr, int line)
{
    if (!outcome_(m != NULL, fn, expr, line)) return;
    em_tensor *y = em_forward(m, x);
    bool ok = y != NULL, pending = em_failed();
    h_check_(ok ? !pending : pending, __FILE__, line, "%s [%s]: forward %s with \"%s\"", expr, args,
             ok ? "succeeded" : "failed", em_last_error());
    em_clear_error();
    em_release(y);
    em_module_free(m);
}
#define RUN(fn, e, x) run_module_((e), fn, (x), #e, __LINE__)

/* ---- nn.h -------------------------------------------------------------------------------- */

static void test_nn_core(void)
{
    em_scope_begin();
    em_tensor *x = F(EM_SHAPE(2, 3, 4));
    for (int i = 0; i < N64; i++)
        for (int j = 0; j < N64; j++) {
            int64_t a = V64[i], b = V64[j];
            em_shape s = EM_SHAPE(a, b, 3);
            ARGS("%lld, %lld", (long long)a, (long long)b);
            int64_t fi = -7, fo = -7;
            em_init_fans(s, &fi, &fo); /* saturates: any shape, no overflow */
            em_init_fans(EM_SHAPE(a, b), &fi, &fo);
            T("em_init_constant", em_init_constant(s, 1, EM_F32, EM_CPU));
            T("em_init_uniform", em_init_uniform(s, 0, 1, EM_F32, EM_CPU));
            T("em_init_normal", em_init_normal(s, 0, 1, EM_F32, EM_CPU));
            T("em_init_trunc_normal", em_init_trunc_normal(s, 0, 1, -2, 2, EM_F32, EM_CPU));
            T("em_init_kaiming_uniform",
              em_init_kaiming_uniform(s, 0, false, EM_NL_RELU, EM_F32, EM_CPU));
            T("em_init_kaiming_normal",
              em_init_kaiming_normal(s, 0, true, EM_NL_RELU, EM_F32, EM_CPU));
            T("em_init_xavier_uniform", em_init_xavier_uniform(s, 1, EM_F32, EM_CPU));
            T("em_init_xavier_normal", em_init_xavier_normal(s, 1, EM_F32, EM_CPU));
            T("em_init_orthogonal",
              em_init_orthogonal(EM_SHAPE(a < 64 ? a : 3, b), 1, EM_F32, EM_CPU));
            M("em_linear_new", em_linear_new(a, b, EM_CPU));
            M("em_linear_new", em_linear_new_cfg(a, b, (em_linear_cfg){.no_bias = true}, EM_CPU));
        }
    for (int i = 0; i < NINT; i++)
        for (int j = 0; j < NINT; j++) {
            ARGS("dims %d, %d", VINT[i], VINT[j]);
            RUN("em_flatten_new", em_flatten_new(VINT[i], VINT[j]), x);
        }
    for (int i = 0; i < NINT; i++) {
        ARGS("dim %d", VINT[i]);
        RUN("em_softmax_new", em_softmax_new(VINT[i]), x);
        RUN("em_log_softmax_new", em_log_softmax_new(VINT[i]), x);
        RUN("em_softmin_new", em_softmin_new(VINT[i]), x);
        RUN("em_glu_new", em_glu_new(VINT[i]), x);
        em_module *lin = em_linear_new(4, 2, EM_CPU);
        em_tensor *ins[2] = {x, x};
        /* its errors name the em_forward family */
        if (VINT[i] <= 2) T("em_forward", em_forward_n(lin, ins, VINT[i]));
        em_tensor *ps[4];
        const char *nm[4];
        int got = em_module_parameters(lin, ps, nm, VINT[i] > 4 ? 4 : VINT[i]);
        CHECK(got == 2, "em_module_parameters(cap %d) counted %d", VINT[i], got);
        em_clear_error();
        em_module_free(lin);
    }
    static const em_module_type plain = {"Plain", NULL, NULL, NULL};
    /* (a size between 1 TiB and SIZE_MAX - 128 would reach malloc, which AddressSanitizer
       aborts on instead of returning NULL) */
    const size_t sizes[] = {0, 1, SIZE_MAX};
    for (int i = 0; i < 3; i++) {
        ARGS("size %zu", sizes[i]);
        void *m = em_module_alloc(sizes[i], &plain, EM_CPU);
        /* a failed allocation is reported by em_alloc */
        outcome_(m != NULL, m || em_last_status() == EM_ERR_OOM ? "em_alloc" : "em_module_alloc",
                 "em_module_alloc(size)", __LINE__);
        em_module_free(m);
    }
    em_scope_end();
}

/* ---- nn_layers.h ------------------------------------------------------------------------- */

static void test_layers(void)
{
    em_scope_begin();
    em_tensor *x1 = F(EM_SHAPE(1, 2, 6)), *x2 = F(EM_SHAPE(1, 2, 6, 6));
    em_tensor *x3 = F(EM_SHAPE(1, 2, 3, 3, 3));
    for (int i = 0; i < N64; i++)
        for (int j = 0; j < N64; j++) {
            int64_t a = V64[i], b = V64[j];
            ARGS("%lld, %lld", (long long)a, (long long)b);
            em_conv2d_cfg c2[] = {
                {.in = a, .out = b, .kernel = {1, 1}},
                {.in = 2, .out = 2, .kernel = {a, b}},
                {.in = 2, .out = 2, .kernel = {3, 3}, .stride = {a, b}},
                {.in = 2, .out = 2, .kernel = {3, 3}, .padding = {a, b}},
                {.in = 2, .out = 2, .kernel = {3, 3}, .dilation = {a, b}},
                {.in = 2, .out = 2, .kernel = {3, 3}, .groups = a},
                {.in = 2,
                 .out = 2,
                 .kernel = {3, 3},
                 .padding_type = EM_PADDING_SAME,
                 .dilation = {a, b}},
                {.in = 2,
                 .out = 2,
                 .kernel = {3, 3},
                 .padding_type = EM_PADDING_ASYMMETRIC,
                 .padding = {a, 1},
                 .padding_end = {1, b}},
                {.in = 2, .out = 2, .kernel = {3, 3}, .stride = {2, 2}, .output_padding = {a, b}},
            };
            for (int k = 0; k < 9; k++) {
                em_conv2d_cfg c = c2[k];
                RUN("em_conv2d_new", em_conv2d_new(c, EM_CPU), x2);
                RUN("em_conv_transpose2d_new", em_conv_transpose2d_new(c, EM_CPU), x2);
                em_conv1d_cfg c1 = {.in = c.in,
                                    .out = c.out,
                                    .kernel = {c.kernel[0]},
                                    .stride = {c.stride[1]},
                                    .padding = {c.padding[1]},
                                    .dilation = {c.dilation[1]},
                                    .groups = c.groups,
                                    .padding_type = c.padding_type,
                                    .padding_end = {c.padding_end[1]},
                                    .output_padding = {c.output_padding[1]}};
                RUN("em_conv1d_new", em_conv1d_new(c1, EM_CPU), x1);
                RUN("em_conv_transpose1d_new", em_conv_transpose1d_new(c1, EM_CPU), x1);
                em_conv3d_cfg c3 = {.in = c.in,
                                    .out = c.out,
                                    .kernel = {c.kernel[0], 1, c.kernel[1]},
                                    .stride = {c.stride[0], 1, c.stride[1]},
                                    .padding = {c.padding[0], 0, c.padding[1]},
                                    .dilation = {c.dilation[0], 1, c.dilation[1]},
                                    .groups = c.groups};
                RUN("em_conv3d_new", em_conv3d_new(c3, EM_CPU), x3);
                RUN("em_conv_transpose3d_new", em_conv_transpose3d_new(c3, EM_CPU), x3);
            }
            em_pool2d_cfg p2[] = {
                {.kernel = {a, b}},
                {.kernel = {2, 2}, .stride = {a, b}},
                {.kernel = {a, a}, .padding = {b, b}},
                {.kernel = {2, 2}, .dilation = {a, b}, .ceil_mode = true},
            };
            for (int k = 0; k < 4; k++) {
                em_pool2d_cfg p = p2[k];
                RUN("em_max_pool2d_new", em_max_pool2d_new(p), x2);
                RUN("em_avg_pool2d_new", em_avg_pool2d_new(p), x2);
                em_pool1d_cfg q = {.kernel = {p.kernel[0]},
                                   .stride = {p.stride[1]},
                                   .padding = {p.padding[0]},
                                   .dilation = {p.dilation[1]}};
                RUN("em_max_pool1d_new", em_max_pool1d_new(q), x1);
                RUN("em_avg_pool1d_new", em_avg_pool1d_new(q), x1);
                em_pool3d_cfg r = {.kernel = {p.kernel[0], 1, p.kernel[1]},
                                   .stride = {p.stride[0], 1, p.stride[1]},
                                   .padding = {p.padding[0], 0, p.padding[1]}};
                RUN("em_max_pool3d_new", em_max_pool3d_new(r), x3);
                RUN("em_avg_pool3d_new", em_avg_pool3d_new(r), x3);
            }
            RUN("em_adaptive_avg_pool1d_new", em_adaptive_avg_pool1d_new(a), x1);
            RUN("em_adaptive_max_pool1d_new", em_adaptive_max_pool1d_new(a), x1);
            RUN("em_adaptive_avg_pool2d_new", em_adaptive_avg_pool2d_new(a, b), x2);
            RUN("em_adaptive_max_pool2d_new", em_adaptive_max_pool2d_new(a, b), x2);
            em_layer_norm_cfg ln = {.shape = EM_SHAPE(a, b)};
            M("em_layer_norm_new", em_layer_norm_new(ln, EM_CPU));
            M("em_rms_norm_new", em_rms_norm_new(ln, EM_CPU));
            RUN("em_group_norm_new",
                em_group_norm_new((em_group_norm_cfg){.groups = a, .channels = b}, EM_CPU), x2);
            M("em_embedding_new", em_embedding_new((em_embedding_cfg){.num = a, .dim = b}, EM_CPU));
            M("em_embedding_new",
              em_embedding_new(
                  (em_embedding_cfg){.num = 5, .dim = 2, .padding_idx = a, .has_padding_idx = true},
                  EM_CPU));
            M("em_swiglu_new", em_swiglu_new((em_swiglu_cfg){.d_in = a, .d_out = b}, EM_CPU));
            em_upsample_cfg up = {.size = {a, b}};
            RUN("em_upsample_new", em_upsample_new(up), x2);
            up = (em_upsample_cfg){.scale = {(double)a, (double)b}};
            RUN("em_upsample_new", em_upsample_new(up), x2);
            em_fold_cfg fc = {.kernel = {a, b}, .stride = {b, a}};
            RUN("em_unfold_new", em_unfold_new(fc), x2);
            fc = (em_fold_cfg){.output_size = {a, b}, .kernel = {2, 2}};
            RUN("em_fold_new", em_fold_new(fc), F(EM_SHAPE(1, 8, 25)));
        }
    for (int i = 0; i < N64; i++) {
        int64_t a = V64[i];
        ARGS("%lld", (long long)a);
        em_norm_cfg nc = {.num_features = a};
        RUN("em_batch_norm1d_new", em_batch_norm1d_new(nc, EM_CPU), x1);
        RUN("em_batch_norm2d_new", em_batch_norm2d_new(nc, EM_CPU), x2);
        RUN("em_batch_norm3d_new", em_batch_norm3d_new(nc, EM_CPU), x3);
        RUN("em_instance_norm1d_new", em_instance_norm1d_new(nc, EM_CPU), x1);
        RUN("em_instance_norm2d_new", em_instance_norm2d_new(nc, EM_CPU), x2);
        RUN("em_instance_norm3d_new", em_instance_norm3d_new(nc, EM_CPU), x3);
        RUN("em_prelu_new", em_prelu_new(a, EM_CPU), x2);
        RUN("em_pixel_shuffle_new", em_pixel_shuffle_new(a), x2);
        RUN("em_pixel_unshuffle_new", em_pixel_unshuffle_new(a), x2);
    }
    em_scope_end();
}

/* ---- nn_seq.h ---------------------------------------------------------------------------- */

static void test_seq(void)
{
    em_scope_begin();
    em_tensor *x = F(EM_SHAPE(2, 3, 4));
    for (int i = 0; i < N64; i++)
        for (int j = 0; j < N64; j++) {
            int64_t a = V64[i], b = V64[j];
            ARGS("%lld, %lld", (long long)a, (long long)b);
            T("em_sinusoidal_table", em_sinusoidal_table(a, b, EM_F32, EM_CPU));
            RUN("em_mha_new", em_mha_new((em_mha_cfg){.embed_dim = a, .num_heads = b}, EM_CPU), x);
            RUN("em_mha_new",
                em_mha_new(
                    (em_mha_cfg){.embed_dim = 4, .num_heads = 2, .num_kv_heads = a, .kdim = b},
                    EM_CPU),
                x);
            RUN("em_feed_forward_new",
                em_feed_forward_new((em_ffn_cfg){.d_model = a, .dim_feedforward = b}, EM_CPU), x);
            em_transformer_cfg tc = {.d_model = 4,
                                     .nhead = a,
                                     .dim_feedforward = b,
                                     .num_layers = 1,
                                     .no_dropout = true};
            RUN("em_transformer_encoder_layer_new", em_transformer_encoder_layer_new(tc, EM_CPU),
                x);
            M("em_transformer_decoder_layer_new", em_transformer_decoder_layer_new(tc, EM_CPU));
            tc = (em_transformer_cfg){.d_model = 4,
                                      .nhead = 2,
                                      .dim_feedforward = 8,
                                      .num_layers = a,
                                      .no_dropout = true};
            RUN("em_transformer_encoder_new", em_transformer_encoder_new(tc, EM_CPU), x);
            M("em_transformer_decoder_new", em_transformer_decoder_new(tc, EM_CPU));
            em_rnn_cfg rc = {.input_size = a, .hidden_size = b};
            RUN("em_rnn_new", em_rnn_new(rc, EM_CPU), x);
            M("em_lstm_new", em_lstm_new(rc, EM_CPU));
            rc = (em_rnn_cfg){.input_size = 4, .hidden_size = 2, .num_layers = a};
            RUN("em_gru_new", em_gru_new(rc, EM_CPU), x);
            em_module *pe =
                em_sinusoidal_pe_new((em_posenc_cfg){.d_model = a, .max_len = b}, EM_CPU);
            RUN("em_sinusoidal_pe_new",
                em_sinusoidal_pe_new((em_posenc_cfg){.d_model = a, .max_len = b}, EM_CPU), x);
            em_clear_error();
            em_module_free(pe);
        }
    em_module *pe = em_sinusoidal_pe_new((em_posenc_cfg){.d_model = 4, .max_len = 16}, EM_CPU);
    for (int i = 0; i < N64; i++) {
        ARGS("offset %lld", (long long)V64[i]);
        T("em_sinusoidal_pe_forward", em_sinusoidal_pe_forward(pe, x, V64[i]));
        T("em_rope", em_rope(x, V64[i], 0));
    }
    em_module_free(pe);
    em_scope_end();
}

/* ---- nn_loss.h and autodiff.h ------------------------------------------------------------ */

static em_status seg(void *ctx, em_tensor *const *in, int n_in, em_tensor **out, int n_out)
{
    (void)ctx;
    for (int k = 0; k < n_out; k++) out[k] = em_mul(in[0], in[0]);
    return em_failed() ? em_last_status() : EM_OK;
}

static void test_loss_autodiff(void)
{
    em_scope_begin();
    em_tensor *logits = F(EM_SHAPE(2, 3));
    for (int i = 0; i < N64; i++)
        for (int j = 0; j < N64; j++) {
            int64_t t[2] = {V64[i], 1};
            ARGS("target %lld, ignore_index %lld", (long long)V64[i], (long long)V64[j]);
            em_tensor *target = em_from_i64(t, EM_SHAPE(2));
            em_ce_cfg cfg = {.ignore_index = V64[j]};
            T("em_cross_entropy", em_cross_entropy(logits, target, cfg));
            T("em_nll_loss", em_nll_loss(em_log_softmax(logits, 1), target, cfg));
        }
    em_tensor *lp = em_log_softmax(F(EM_SHAPE(4, 1, 3)), 2); /* [T, N, C] */
    for (int i = 0; i < N64; i++) {
        int64_t tg[2] = {1, V64[i]}, il[1] = {4}, tl[1] = {2};
        ARGS("blank/label %lld", (long long)V64[i]);
        em_tensor *targets = em_from_i64(tg, EM_SHAPE(1, 2));
        em_tensor *in_len = em_from_i64(il, EM_SHAPE(1)), *tg_len = em_from_i64(tl, EM_SHAPE(1));
        T("em_ctc_loss", em_ctc_loss(lp, targets, in_len, tg_len, (em_ctc_cfg){.blank = V64[i]}));
        int64_t big[1] = {V64[i]};
        T("em_ctc_loss", em_ctc_loss(lp, em_from_i64(tl, EM_SHAPE(1, 1)),
                                     em_from_i64(big, EM_SHAPE(1)), tg_len, (em_ctc_cfg){0}));
    }
    em_tensor *leaf = em_requires_grad(F(EM_SHAPE(3)), true);
    for (int i = 0; i < NINT; i++) {
        int n = VINT[i];
        ARGS("n %d", n);
        em_tensor *y = em_mul(leaf, leaf);
        em_tensor *outs[8] = {y, y, y, y, y, y, y, y};
        if (n <= 8) {
            em_grads *g = em_backward_with(outs, NULL, n, (em_backward_opts){.retain_graph = true});
            /* its errors name the em_backward family */
            outcome_(g != NULL, "em_backward", "em_backward_with(outs, NULL, n)", __LINE__);
            em_grads_free(g);
        }
        em_tensor *ins[8] = {leaf, leaf, leaf, leaf, leaf, leaf, leaf, leaf};
        em_tensor *cout[8] = {0};
        for (int m = 0; m < 3; m++) {
            int n_out = m == 0 ? n : m == 1 ? 1 : 2;
            int n_in = m == 0 ? 1 : n;
            if (n_in > 8 || n_out > 8) continue;
            ARGS("n_in %d n_out %d", n_in, n_out);
            em_status st = em_checkpoint(seg, NULL, ins, n_in, cout, n_out);
            outcome_(st == EM_OK, "em_checkpoint", "em_checkpoint(seg, ins, n_in, cout, n_out)",
                     __LINE__);
            for (int k = 0; k < 8; k++) {
                if (st == EM_OK && k < n_out) em_release(cout[k]);
                cout[k] = NULL;
            }
        }
    }
    em_scope_end();
}

/* ---- optim.h ----------------------------------------------------------------------------- */

static void sched_(em_sched *s, const char *fn, const char *expr, int line)
{
    if (!outcome_(s != NULL, fn, expr, line)) return;
    for (int k = 0; k < 5; k++) {
        double lr = em_sched_step(s, 1.0);
        h_check_(!isnan(lr) && lr >= 0, __FILE__, line, "%s [%s]: step %d gave lr %g", expr, args,
                 k, lr);
    }
    em_clear_error();
    em_sched_free(s);
}
#define SCHED(fn, e) sched_((e), fn, #e, __LINE__)

static void test_optim(void)
{
    em_module *lin = em_linear_new(3, 2, EM_CPU);
    for (int i = 0; i < NINT; i++) {
        ARGS("ns_steps %d", VINT[i]);
        em_optim *o = em_muon_new(lin, (em_muon_cfg){.ns_steps = VINT[i]});
        outcome_(o != NULL, "em_muon_new", "em_muon_new(lin, ns_steps)", __LINE__);
        em_optim_free(o);
    }
    em_optim *o = em_sgd_new(lin, (em_sgd_cfg){.lr = 0.1});
    for (int i = 0; i < N64; i++)
        for (int j = 0; j < N64; j++) {
            int64_t a = V64[i], b = V64[j];
            ARGS("%lld, %lld", (long long)a, (long long)b);
            SCHED("em_sched_constant_new", em_sched_constant_new(o, 0.5, a));
            SCHED("em_sched_step_new", em_sched_step_new(o, a, 0.5));
            int64_t ms[3] = {a, b, 3};
            SCHED("em_sched_multistep_new", em_sched_multistep_new(o, ms, 3, 0.5));
            SCHED("em_sched_linear_new", em_sched_linear_new(o, 0.5, 1, a));
            SCHED("em_sched_cosine_new", em_sched_cosine_new(o, a, 0));
            SCHED("em_sched_cosine_restarts_new", em_sched_cosine_restarts_new(o, a, b, 0));
            SCHED("em_sched_warmup_new", em_sched_warmup_new(o, a, 0.1, NULL));
            SCHED("em_sched_noam_new", em_sched_noam_new(o, a, b));
            SCHED("em_sched_onecycle_new", em_sched_onecycle_new(o, 1, a, 0.3, 25, 1e4));
            SCHED("em_sched_plateau_new", em_sched_plateau_new(o, false, 0.5, a, 1e-4, b, 0));
            em_optim_set_lr(o, 0.1);
        }
    for (int i = 0; i < NINT; i++) {
        int64_t ms[2] = {1, 2};
        ARGS("n %d", VINT[i]);
        if (VINT[i] <= 2)
            SCHED("em_sched_multistep_new", em_sched_multistep_new(o, ms, VINT[i], 0.5));
    }
    em_optim_free(o);
    em_module_free(lin);
}

/* ---- data.h ------------------------------------------------------------------------------ */

static em_dataset *rows(int64_t n)
{
    em_tensor *x = em_arange(0, (double)(n * 3), 1, EM_F32, EM_CPU);
    em_tensor *x2 = em_reshape(x, EM_SHAPE(n, 3));
    em_tensor *y = em_arange(0, (double)n, 1, EM_I64, EM_CPU);
    em_tensor *ts[2] = {x2, y};
    const char *names[2] = {"x", "y"};
    em_dataset *ds = em_dataset_from_tensors(ts, names, 2);
    em_release(x), em_release(x2), em_release(y);
    return ds;
}

static em_dataset *images(void)
{
    em_tensor *img = em_rand(EM_SHAPE(4, 3, 5, 6), EM_F32, EM_CPU);
    em_tensor *ts[1] = {img};
    const char *names[1] = {"image"};
    em_dataset *ds = em_dataset_from_tensors(ts, names, 1);
    em_release(img);
    return ds;
}

/* A dataset-returning call; when it worked, its first items are read (each succeeds or fails
 * naming fn: a crop larger than the images is only seen there), then it is freed. */
static void ds_(em_dataset *ds, const char *fn, const char *expr, int line)
{
    if (!outcome_(ds != NULL, fn, expr, line)) return;
    int64_t n = em_dataset_len(ds);
    for (int64_t i = 0; i < n && i < 8; i++) {
        em_item it = {0};
        outcome_(em_dataset_get(ds, i, &it) == EM_OK, fn, expr, line);
        em_item_free(&it);
    }
    em_dataset_free(ds);
}
#define DS(fn, e) ds_((e), fn, #e, __LINE__)

static void test_data(void)
{
    em_scope_begin();
    em_dataset *base = rows(6);
    for (int i = 0; i < N64; i++) {
        int64_t a = V64[i];
        em_item it = {0};
        ARGS("index %lld", (long long)a);
        bool in = a >= -6 && a < 6;
        em_status st = em_dataset_get(base, a, &it);
        CHECK((st == EM_OK) == in, "get(%lld)", (long long)a);
        outcome_(st == EM_OK, "em_dataset_get", "em_dataset_get(base, a)", __LINE__);
        em_item_free(&it);
        st = em_dataset_get_at(base, a, a, &it);
        outcome_(st == EM_OK, "em_dataset_get", "em_dataset_get_at(base, a, a)", __LINE__);
        em_item_free(&it);
        for (int j = 0; j < N64; j++) {
            int64_t b = V64[j];
            ARGS("%lld, %lld", (long long)a, (long long)b);
            double u = em_data_uniform((uint64_t)a, a, b, (uint32_t)j);
            CHECK(u >= 0 && u < 1, "em_data_uniform [%s]", args);
            DS("em_dataset_subset", em_dataset_subset(em_dataset_retain(base), a, b));
            int64_t idx[3] = {a, b, 0};
            DS("em_dataset_take", em_dataset_take(em_dataset_retain(base), idx, 3));
            DS("em_dataset_windows", em_dataset_windows(em_arange(0, 10, 1, EM_F32, EM_CPU), a, b));
            em_dataset *im = images();
            DS("em_dataset_random_crop", em_dataset_random_crop(im, 0, a, b, 1, (uint64_t)a));
            DS("em_dataset_random_crop", em_dataset_random_crop(images(), 0, 3, 4, a, (uint64_t)b));
            em_tensor *img = em_rand(EM_SHAPE(3, 5, 6), EM_F32, EM_CPU);
            T("em_image_crop_pad", em_image_crop_pad(img, a, b, 2, 2, 1));
            T("em_image_crop_pad", em_image_crop_pad(img, 0, 0, a, b, 0));
            T("em_image_crop_pad", em_image_crop_pad(img, 0, 0, 2, 2, a));
            T("em_image_resize", em_image_resize(img, a, b));
        }
        ARGS("%lld", (long long)a);
        DS("em_dataset_sample", em_dataset_sample(em_dataset_retain(base), a, true, 1));
        DS("em_dataset_sample", em_dataset_sample(em_dataset_retain(base), a, false, 1));
        DS("em_dataset_shuffle", em_dataset_shuffle(em_dataset_retain(base), (uint64_t)a));
        int64_t idx[2] = {0, 1};
        if (a >= -1 && a <= 2)
            DS("em_dataset_take", em_dataset_take(em_dataset_retain(base), idx, a));
        em_loader *l = em_loader_new(em_dataset_retain(base),
                                     (em_loader_cfg){.batch_size = a, .seed = (uint64_t)a});
        if (outcome_(l != NULL, "em_loader_new", "em_loader_new(batch_size)", __LINE__)) {
            em_batch b = {0};
            int batches = 0;
            while (em_loader_next(l, &b)) {
                batches++;
                em_batch_free(&b);
            }
            CHECK(!em_failed() && batches == em_loader_num_batches(l), "loader batches [%s]", args);
            em_loader_reset(l, a);
            em_clear_error();
            em_loader_free(l);
        }
    }
    for (int i = 0; i < NINT; i++) {
        int v = VINT[i];
        ARGS("%d", v);
        em_tensor *ts[2] = {em_zeros(EM_SHAPE(4, 2), EM_F32, EM_CPU),
                            em_zeros(EM_SHAPE(4), EM_I64, EM_CPU)};
        if (v <= 2) DS("em_dataset_from_tensors", em_dataset_from_tensors(ts, NULL, v));
        DS("em_dataset_random_flip", em_dataset_random_flip(images(), v, 0.5, 0.5, 1));
        DS("em_dataset_random_crop", em_dataset_random_crop(images(), v, 3, 3, 0, 1));
        double mean[3] = {0, 0, 0}, sd[3] = {1, 1, 1};
        if (v <= 3) DS("em_dataset_normalize", em_dataset_normalize(images(), 0, mean, sd, v));
        DS("em_dataset_normalize", em_dataset_normalize(images(), v, mean, sd, 1));
        CHECK(em_image_folder_class(base, v) == NULL, "image_folder_class(%d) of a non-folder", v);
        em_clear_error();
        em_loader *l = em_loader_new(
            em_dataset_retain(base),
            (em_loader_cfg){.batch_size = 2, .workers = v > 8 ? 8 : v, .prefetch = v});
        if (outcome_(l != NULL, "em_loader_new", "em_loader_new(workers, prefetch)", __LINE__)) {
            em_batch b = {0};
            while (em_loader_next(l, &b)) em_batch_free(&b);
            em_clear_error();
            em_loader_free(l);
        }
    }
    const size_t dsz[] = {0, 1, SIZE_MAX};
    static const em_dataset_type kind = {"kind", NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        ARGS("size %zu", dsz[i]);
        em_dataset *d = em_dataset_alloc(dsz[i], &kind);
        outcome_(d != NULL, "em_dataset_alloc", "em_dataset_alloc(size)", __LINE__);
        if (d) em_dataset_free(d);
    }
    em_text *txt = em_text_from_string("hello", 5);
    const int ids[] = {0, -1, 4, 5, INT_MAX, INT_MIN};
    for (int i = 0; i < 6; i++) {
        uint32_t c = em_text_char(txt, ids[i]);
        CHECK((c != 0) == (ids[i] >= 0 && ids[i] < em_text_vocab_size(txt)), "text_char(%d)",
              ids[i]);
        em_clear_error();
    }
    int64_t tid[3] = {0, INT64_MAX, INT64_MIN};
    char out[16];
    const size_t caps[] = {0, 1, 2, 16};
    for (int i = 0; i < 4; i++) {
        ARGS("cap %zu", caps[i]);
        size_t nb = em_text_decode(txt, em_from_i64(tid, EM_SHAPE(1)), out, caps[i]);
        CHECK(caps[i] == 0 || nb < caps[i], "decode into %zu bytes wrote %zu", caps[i], nb);
        em_text_decode(txt, em_from_i64(tid, EM_SHAPE(3)), out, caps[i]);
        em_clear_error();
    }
    em_text_free(txt);
    em_text *t0 = em_text_from_string("", 0);
    em_text_free(t0);
    em_clear_error();
    em_dataset_free(base);
    em_scope_end();
}

/* ---- train.h and store.h ----------------------------------------------------------------- */

static em_status no_step(const em_step_ctx *ctx, em_step_out *out)
{
    (void)ctx;
    out->end = true;
    return EM_OK;
}

static void test_train_store(void)
{
    em_scope_begin();
    for (int i = 0; i < NINT; i++) {
        ARGS("topk %d", VINT[i]);
        em_metrics *m = em_metrics_new(VINT[i]);
        if (!outcome_(m != NULL, "em_metrics_new", "em_metrics_new(topk)", __LINE__)) continue;
        for (int j = 0; j < N64; j++) {
            int64_t v = V64[j];
            em_metrics_add_loss(m, 1.0, v, v);
            int64_t pred[2] = {v, 1}, tgt[2] = {1, v};
            ARGS("topk %d, class %lld", VINT[i], (long long)v);
            em_status st = em_metrics_update_ids(m, pred, tgt, 2);
            /* its errors name the em_metrics_update family */
            outcome_(st == EM_OK, "em_metrics_update", "em_metrics_update_ids(m, pred, tgt)",
                     __LINE__);
            st = em_metrics_update_ids(m, pred, tgt, v < 0 ? v : 0);
            outcome_(st == EM_OK, "em_metrics_update", "em_metrics_update_ids(n)", __LINE__);
            em_metric_values mv = em_metrics_compute(m);
            (void)mv;
            for (int k = 0; k < NINT; k++) (void)em_metrics_confusion(m, VINT[k], VINT[i]);
            em_clear_error();
        }
        em_metrics_free(m);
    }
    em_module *lin = em_linear_new(2, 2, EM_CPU);
    em_optim *o = em_sgd_new(lin, (em_sgd_cfg){.lr = 0.1});
    for (int i = 0; i < N64; i++) {
        int64_t a = V64[i];
        ARGS("%lld", (long long)a);
        em_learner_cfg c = {.train_step = no_step,
                            .no_run_dir = true,
                            .quiet = true,
                            .epochs = a,
                            .train_batches = a,
                            .val_batches = a,
                            .ckpt_every = a,
                            .patience = a,
                            .log_every = a,
                            .grad_accum = (int)(a % 1000),
                            .topk = (int)(a % 100),
                            .keep_last = (int)(a % 100)};
        em_learner *l = em_learner_new(lin, o, NULL, c);
        if (outcome_(l != NULL, "em_learner_new", "em_learner_new(cfg)", __LINE__)) {
            for (int j = 0; j < N64; j++) (void)em_learner_metric(l, V64[j], "loss");
            em_clear_error();
            em_learner_free(l);
        }
    }
    em_optim_free(o);
    em_module_free(lin);

    /* a tensor the caller owns (released below) */
    em_tensor *a = em_keep(F(EM_SHAPE(2)));
    em_tensor_dict *d = em_tensor_dict_new();
    em_tensor_dict_add(d, "a", a);
    em_tensor_dict_set_meta(d, "k", "v");
    for (int i = 0; i < N64; i++) {
        int64_t k = V64[i];
        bool in = k == 0;
        CHECK((em_tensor_dict_name_at(d, k) != NULL) == in, "dict name_at(%lld)", (long long)k);
        CHECK((em_tensor_dict_tensor_at(d, k) != NULL) == in, "dict tensor_at(%lld)", (long long)k);
        CHECK((em_tensor_dict_meta_key_at(d, k) != NULL) == in, "dict meta_key_at(%lld)",
              (long long)k);
        CHECK((em_tensor_dict_meta_value_at(d, k) != NULL) == in, "dict meta_value_at(%lld)",
              (long long)k);
        em_clear_error();
    }
    const char *path = "/tmp/ember_test_extreme.safetensors";
    if (em_safetensors_save(path, d, NULL) == EM_OK) {
        em_store_info *info = em_safetensors_inspect(path);
        CHECK(info != NULL, "inspect: %s", em_last_error());
        for (int i = 0; info && i < N64; i++) {
            int64_t k = V64[i];
            bool in = k == 0;
            CHECK((em_store_info_entry(info, k) != NULL) == in, "info entry(%lld)", (long long)k);
            CHECK((em_store_info_meta_key_at(info, k) != NULL) == in, "info meta_key_at(%lld)",
                  (long long)k);
            CHECK((em_store_info_meta_value_at(info, k) != NULL) == in, "info meta_value_at(%lld)",
                  (long long)k);
            em_clear_error();
        }
        em_store_info_free(info);
        remove(path);
    }
    em_clear_error();
    const char bytes[16] = {0};
    const size_t sizes[] = {0, 1, 8, 16};
    for (int i = 0; i < 4; i++) {
        ARGS("size %zu", sizes[i]);
        em_tensor_dict *r = em_safetensors_load_memory(bytes, sizes[i], "zeros");
        outcome_(r != NULL, "zeros", "em_safetensors_load_memory(bytes, size)", __LINE__);
        em_tensor_dict_free(r);
    }
    em_tensor_dict_free(d);
    em_release(a);
    em_scope_end();
}

int main(void)
{
    h_init();
    em_config_set("max_tensor_mb", "64");
    test_nn_core();
    test_layers();
    test_seq();
    test_loss_autodiff();
    test_optim();
    test_data();
    test_train_store();
    em_config_set("max_tensor_mb", NULL);
    return h_finish();
}
