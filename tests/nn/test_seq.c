/* Sequence layers against PyTorch golden fixtures (scripts/fixtures_seq.py): multi-head
 * attention (self, cross, grouped-query), KV-cache decoding, transformer layers and stacks,
 * sinusoidal and rotary encodings, RNN/LSTM/GRU; forward values and gradients, and bad input. */
#include <string.h>

#include "harness.h"

#define RTOL 1e-10
#define ATOL 1e-12

static h_fixture *fx;

static em_tensor *fx_bool(const char *name)
{
    return em_cast(h_fixture_tensor(fx, name), EM_BOOL);
}

static bool check_fx(const char *what, const em_tensor *got, const char *name, double atol,
                     double rtol)
{
    em_shape s;
    const double *v = h_fixture_values(fx, name, &s);
    if (!v || !got) {
        CHECK(false, "%s: missing %s (%s)", what, got ? "fixture" : "result", em_last_error());
        em_clear_error();
        return false;
    }
    return h_check_tensor(what, got, v, s, atol, rtol);
}

/* ---- parameter loading by PyTorch name ---------------------------------------------------- */

typedef struct names {
    char n[64][64];
    int count;
} names;

static void collect(void *ctx, const char *name, em_module_entry *e)
{
    names *ns = ctx;
    if (e->is_buffer || ns->count >= 64) return;
    snprintf(ns->n[ns->count++], 64, "%s", name);
}

static void set_dotted(em_module *m, const char *name, em_tensor *t)
{
    const char *dot = strrchr(name, '.');
    em_module *owner = m;
    if (dot) {
        char parent[64];
        snprintf(parent, sizeof parent, "%.*s", (int)(dot - name), name);
        owner = em_module_find(m, parent);
    }
    CHECK(owner && em_module_set(owner, dot ? dot + 1 : name, t) == EM_OK, "set %s: %s", name,
          em_last_error());
}

/* Every parameter of m from "<src>.p.<name>" in dtype dt; the counts must agree with PyTorch. */
static void load_params(em_module *m, const char *src, em_dtype dt)
{
    names ns = {.count = 0};
    em_module_visit(m, collect, &ns);
    for (int i = 0; i < ns.count; i++) {
        char key[160];
        snprintf(key, sizeof key, "%s.p.%s", src, ns.n[i]);
        em_tensor *t = h_fixture_tensor(fx, key);
        if (!t) continue;
        em_tensor *c = em_cast(t, dt);
        em_release(t);
        set_dotted(m, ns.n[i], c);
    }
    char key[160];
    snprintf(key, sizeof key, "%s.nparams", src);
    CHECK(em_module_count(m, false) == (int64_t)h_fixture_scalar(fx, key),
          "%s: %lld parameters, PyTorch has %g", src, (long long)em_module_count(m, false),
          h_fixture_scalar(fx, key));
}

/* loss = sum_i sum(outs[i] * <case>.s<i>) */
static em_grads *seeded_backward(const char *cas, em_tensor *const *outs, int n)
{
    em_tensor *loss = NULL;
    for (int i = 0; i < n; i++) {
        char key[96];
        snprintf(key, sizeof key, "%s.s%d", cas, i);
        em_tensor *s = em_cast(h_fixture_tensor(fx, key), em_tensor_dtype(outs[i]));
        em_tensor *term = em_sum(em_mul(outs[i], s), EM_ALL, false);
        loss = loss ? em_add(loss, term) : term;
    }
    em_grads *g = em_backward(loss);
    CHECK(g != NULL, "%s: backward: %s", cas, em_last_error());
    return g;
}

static void check_grad(const char *cas, em_grads *g, const em_tensor *leaf, const char *key)
{
    char what[128], name[128];
    snprintf(what, sizeof what, "%s grad %s", cas, key);
    snprintf(name, sizeof name, "%s.%s", cas, key);
    check_fx(what, g ? em_grad(g, leaf) : NULL, name, ATOL, RTOL);
}

static void check_param_grads(const char *cas, em_module *m, em_grads *g)
{
    names ns = {.count = 0};
    em_module_visit(m, collect, &ns);
    for (int i = 0; i < ns.count; i++) {
        char key[96];
        snprintf(key, sizeof key, "g.%s", ns.n[i]);
        check_grad(cas, g, em_module_get(m, ns.n[i]), key);
    }
}

static em_tensor *input(const char *cas, const char *what)
{
    char key[96];
    snprintf(key, sizeof key, "%s.%s", cas, what);
    return em_requires_grad(h_fixture_tensor(fx, key), true);
}

/* ---- multi-head attention ----------------------------------------------------------------- */

static void test_mha_self(void)
{
    em_scope_begin();
    em_module *m = em_mha_new((em_mha_cfg){.embed_dim = 8, .num_heads = 2}, EM_CPU);
    CHECK(m && em_module_get(m, "in_proj_weight") && em_module_get(m, "out_proj.bias"),
          "mha names: %s", em_last_error());
    em_module_cast(m, EM_F64);
    load_params(m, "mha_self", EM_F64);
    em_tensor *x = input("mha_self", "x");
    em_tensor *kpm = fx_bool("mha_self.kpm");
    em_tensor *w = NULL;
    em_tensor *y = em_mha_forward(
        m, x, NULL, NULL, (em_mha_args){.key_padding_mask = kpm, .causal = true, .weights = &w});
    check_fx("mha self y", y, "mha_self.y", ATOL, RTOL);
    check_fx("mha self weights", w, "mha_self.w", ATOL, RTOL);
    em_grads *g = seeded_backward("mha_self", &y, 1);
    check_grad("mha_self", g, x, "gx");
    check_param_grads("mha_self", m, g);

    /* the same through em_sdpa (no weights) with a bool attn_mask in place of causal */
    em_tensor *causal = em_ne_scalar(em_triu(em_ones(EM_SHAPE(5, 5), EM_F32, EM_CPU), 1), 0);
    em_tensor *y2 =
        em_mha_forward(m, x, x, x, (em_mha_args){.key_padding_mask = kpm, .attn_mask = causal});
    check_fx("mha self y (sdpa, bool mask)", y2, "mha_self.y", ATOL, RTOL);
    g = seeded_backward("mha_self", &y2, 1);
    check_grad("mha_self", g, x, "gx");
    check_param_grads("mha_self", m, g);

    /* seq_first layout: the same values transposed */
    em_module *ms =
        em_mha_new((em_mha_cfg){.embed_dim = 8, .num_heads = 2, .seq_first = true}, EM_CPU);
    em_module_cast(ms, EM_F64);
    load_params(ms, "mha_self", EM_F64);
    em_tensor *ys = em_mha_forward(ms, em_transpose(x, 0, 1), NULL, NULL,
                                   (em_mha_args){.key_padding_mask = kpm, .causal = true});
    check_fx("mha seq_first y", em_transpose(ys, 0, 1), "mha_self.y", ATOL, RTOL);
    em_module_free(ms);

    /* unbatched [L, E]: batch 0 alone */
    em_tensor *y0 =
        em_mha_forward(m, em_select(x, 0, 0), NULL, NULL, (em_mha_args){.causal = true});
    em_tensor *ref = em_select(h_fixture_tensor(fx, "mha_self.y"), 0, 0);
    double *rv = h_values(ref);
    h_check_tensor("mha unbatched", y0, rv, EM_SHAPE(5, 8), ATOL, RTOL);
    free(rv);

    /* training mode with attention dropout: the explicit path, gradients everywhere */
    em_module *md =
        em_mha_new((em_mha_cfg){.embed_dim = 8, .num_heads = 2, .dropout = 0.5}, EM_CPU);
    em_module_cast(md, EM_F64);
    em_tensor *yd = em_forward(md, x);
    CHECK(yd && em_shape_equal(em_tensor_shape(yd), EM_SHAPE(2, 5, 8)), "dropout forward");
    em_grads *gd = em_backward(em_sum(em_square(yd), EM_ALL, false));
    CHECK(gd && em_grads_count(gd) == 5, "dropout gradients (%d)", gd ? em_grads_count(gd) : -1);
    em_module_free(md);

    /* one f32 pass */
    em_module_cast(m, EM_F32);
    load_params(m, "mha_self", EM_F32);
    em_tensor *y32 = em_mha_forward(m, em_cast(x, EM_F32), NULL, NULL,
                                    (em_mha_args){.key_padding_mask = kpm, .causal = true});
    CHECK(y32 && em_tensor_dtype(y32) == EM_F32, "f32 result");
    check_fx("mha self f32", y32, "mha_self.y", 1e-6, 1e-5);
    em_module_free(m);
    CHECK_OK("mha self");
    em_scope_end();
}

static void test_mha_cross(void)
{
    em_scope_begin();
    em_module *m =
        em_mha_new((em_mha_cfg){.embed_dim = 8, .num_heads = 2, .kdim = 6, .vdim = 7}, EM_CPU);
    CHECK(m && em_module_get(m, "q_proj_weight") && !em_module_get(m, "in_proj_weight"),
          "separate projections when kdim/vdim differ");
    em_module_cast(m, EM_F64);
    load_params(m, "mha_cross", EM_F64);
    em_tensor *q = input("mha_cross", "q"), *k = input("mha_cross", "k");
    em_tensor *v = input("mha_cross", "v");
    em_tensor *w = NULL;
    em_tensor *y = em_mha_forward(m, q, k, v,
                                  (em_mha_args){.key_padding_mask = fx_bool("mha_cross.kpm"),
                                                .attn_mask = h_fixture_tensor(fx, "mha_cross.am"),
                                                .weights = &w});
    check_fx("mha cross y", y, "mha_cross.y", ATOL, RTOL);
    check_fx("mha cross weights", w, "mha_cross.w", ATOL, RTOL);
    em_grads *g = seeded_backward("mha_cross", &y, 1);
    check_grad("mha_cross", g, q, "gq");
    check_grad("mha_cross", g, k, "gk");
    check_grad("mha_cross", g, v, "gv");
    check_param_grads("mha_cross", m, g);
    /* per-head weights average to the reported ones */
    em_tensor *wh = NULL;
    em_mha_forward(m, q, k, v,
                   (em_mha_args){.key_padding_mask = fx_bool("mha_cross.kpm"),
                                 .attn_mask = h_fixture_tensor(fx, "mha_cross.am"),
                                 .weights = &wh,
                                 .per_head_weights = true});
    CHECK(wh && em_shape_equal(em_tensor_shape(wh), EM_SHAPE(2, 2, 5, 4)), "per-head weights");
    check_fx("per-head mean", em_mean(wh, EM_AXES(1), false), "mha_cross.w", ATOL, RTOL);
    em_module_free(m);
    CHECK_OK("mha cross");
    em_scope_end();
}

static void test_gqa(void)
{
    em_scope_begin();
    em_module *m =
        em_mha_new((em_mha_cfg){.embed_dim = 8, .num_heads = 4, .num_kv_heads = 2}, EM_CPU);
    CHECK(m && em_tensor_dim(em_module_get(m, "k_proj_weight"), 0) == 4 &&
              em_tensor_dim(em_module_get(m, "in_proj_bias"), 0) == 16,
          "gqa shapes");
    em_module_cast(m, EM_F64);
    load_params(m, "gqa", EM_F64);
    em_tensor *x = input("gqa", "x");
    em_tensor *w = NULL;
    em_tensor *y = em_mha_forward(
        m, x, NULL, NULL,
        (em_mha_args){.key_padding_mask = fx_bool("gqa.kpm"), .causal = true, .weights = &w});
    check_fx("gqa y", y, "gqa.y", ATOL, RTOL);
    check_fx("gqa weights", w, "gqa.w", ATOL, RTOL);
    em_grads *g = seeded_backward("gqa", &y, 1);
    check_grad("gqa", g, x, "gx");
    check_param_grads("gqa", m, g);
    /* the sdpa path agrees */
    em_tensor *y2 = em_mha_forward(
        m, x, NULL, NULL, (em_mha_args){.key_padding_mask = fx_bool("gqa.kpm"), .causal = true});
    check_fx("gqa y (sdpa)", y2, "gqa.y", ATOL, RTOL);
    em_module_free(m);
    CHECK_OK("gqa");
    em_scope_end();
}

/* Incremental decoding with a cache equals full causal attention (packed heads, and
 * grouped-query heads with rotary encoding). */
static void test_kv_cache(void)
{
    em_mha_cfg cfgs[2] = {{.embed_dim = 8, .num_heads = 2},
                          {.embed_dim = 8, .num_heads = 4, .num_kv_heads = 2, .rotary = true}};
    for (int c = 0; c < 2; c++) {
        em_scope_begin();
        em_seed(40 + (uint64_t)c);
        em_module *m = em_mha_new(cfgs[c], EM_CPU);
        em_module_cast(m, EM_F64);
        em_tensor *x = em_randn(EM_SHAPE(2, 6, 8), EM_F64, EM_CPU);
        em_tensor *full = em_mha_forward(m, x, NULL, NULL, (em_mha_args){.causal = true});
        em_kv_cache cache = {0};
        int64_t cuts[4] = {0, 2, 3, 6};
        em_tensor *parts[3];
        for (int i = 0; i < 3; i++)
            parts[i] = em_mha_forward(m, em_narrow(x, 1, cuts[i], cuts[i + 1] - cuts[i]), NULL,
                                      NULL, (em_mha_args){.causal = true, .cache = &cache});
        CHECK(cache.len == 6 &&
                  em_shape_equal(em_tensor_shape(cache.k), EM_SHAPE(2, 2, 6, c ? 2 : 4)),
              "cache holds 6 positions");
        em_tensor *inc = em_cat(parts, 3, 1);
        double *fv = h_values(full);
        h_check_tensor(c ? "kv cache (gqa, rotary)" : "kv cache", inc, fv, EM_SHAPE(2, 6, 8), 1e-12,
                       1e-10);
        free(fv);
        em_kv_cache_clear(&cache);
        CHECK(cache.k == NULL && cache.len == 0, "cache cleared");
        em_module_free(m);
        CHECK_OK("kv cache");
        em_scope_end();
    }
}

/* ---- transformer --------------------------------------------------------------------------- */

static void tf_case(const char *cas, em_module *m, const char *params_from, bool decoder,
                    em_transformer_masks mk, bool param_grads)
{
    CHECK(m != NULL, "%s: %s", cas, em_last_error());
    if (!m) return;
    em_module_cast(m, EM_F64);
    load_params(m, params_from, EM_F64);
    em_module_train(m, false);
    em_tensor *x = input(cas, "x");
    em_tensor *mem = decoder ? input(cas, "m") : NULL;
    em_tensor *y = decoder ? em_transformer_decode(m, x, mem, mk) : em_transformer_encode(m, x, mk);
    char what[64];
    snprintf(what, sizeof what, "%s y", cas);
    char key[64];
    snprintf(key, sizeof key, "%s.y", cas);
    check_fx(what, y, key, ATOL, RTOL);
    if (!y) return;
    em_grads *g = seeded_backward(cas, &y, 1);
    check_grad(cas, g, x, "gx");
    if (decoder) check_grad(cas, g, mem, "gm");
    if (param_grads) check_param_grads(cas, m, g);
}

static void test_transformer(void)
{
    em_scope_begin();
    em_tensor *tkpm = fx_bool("tf.tkpm"), *mkpm = fx_bool("tf.mkpm");
    em_tensor *causal = em_ne_scalar(em_triu(em_ones(EM_SHAPE(5, 5), EM_F32, EM_CPU), 1), 0);
    em_transformer_cfg base = {.d_model = 8, .nhead = 2, .dim_feedforward = 8};

    em_transformer_cfg c = base;
    em_module *m = em_transformer_encoder_layer_new(c, EM_CPU);
    CHECK(m && em_module_get(m, "self_attn.in_proj_weight") && em_module_get(m, "linear1.weight") &&
              em_module_get(m, "norm2.bias"),
          "encoder layer names");
    tf_case("enc_post", m, "enc_post", false,
            (em_transformer_masks){.src_causal = true, .src_key_padding_mask = tkpm}, true);
    em_module_free(m);

    c.norm_first = true;
    c.activation = EM_FFN_GELU;
    m = em_transformer_encoder_layer_new(c, EM_CPU);
    tf_case("enc_pre", m, "enc_pre", false,
            (em_transformer_masks){.src_mask = causal, .src_key_padding_mask = tkpm}, false);
    em_module_free(m);

    c = base;
    m = em_transformer_decoder_layer_new(c, EM_CPU);
    CHECK(m && em_module_get(m, "multihead_attn.out_proj.weight") &&
              em_module_get(m, "norm3.weight"),
          "decoder layer names");
    em_transformer_masks dm = {
        .tgt_causal = true, .tgt_key_padding_mask = tkpm, .memory_key_padding_mask = mkpm};
    tf_case("dec_post", m, "dec_post", true, dm, false);
    em_module_free(m);

    c.norm_first = true;
    c.activation = EM_FFN_GELU;
    m = em_transformer_decoder_layer_new(c, EM_CPU);
    dm.tgt_causal = false;
    dm.tgt_mask = causal;
    tf_case("dec_pre", m, "dec_pre", true, dm, true);
    em_module_free(m);

    c = base;
    c.num_layers = 2;
    c.final_norm = true;
    m = em_transformer_encoder_new(c, EM_CPU);
    CHECK(m && em_module_get(m, "layers.1.self_attn.out_proj.weight") &&
              em_module_get(m, "norm.weight"),
          "encoder stack names");
    char *sum = em_module_summary(m);
    CHECK(sum && strstr(sum, "layers: ModuleList") && strstr(sum, "TransformerEncoderLayer") &&
              strstr(sum, "self_attn: MultiheadAttention(embed_dim=8, num_heads=2"),
          "summary:\n%s", sum ? sum : "");
    em_free(sum);
    tf_case("enc_stack", m, "enc_stack", false,
            (em_transformer_masks){.src_key_padding_mask = tkpm}, false);
    em_module_free(m);

    c = base;
    c.num_layers = 2;
    c.norm_first = true;
    m = em_transformer_decoder_new(c, EM_CPU);
    tf_case("dec_stack", m, "dec_stack", true, (em_transformer_masks){.tgt_causal = true}, false);

    /* em_forward_n without masks, training mode with dropout: runs and reaches the parameters */
    em_module_train(m, true);
    em_tensor *in[2] = {h_fixture_tensor(fx, "dec_stack.x"), h_fixture_tensor(fx, "dec_stack.m")};
    em_tensor *y = em_forward_n(m, in, 2);
    CHECK(y && em_shape_equal(em_tensor_shape(y), EM_SHAPE(2, 5, 8)), "decoder em_forward_n");
    em_grads *g = em_backward(em_sum(y, EM_ALL, false));
    CHECK(g && em_grads_count(g) == 36, "gradients reach every parameter (%d)",
          g ? em_grads_count(g) : -1);
    em_module_free(m);

    /* the feed-forward block alone */
    em_module *ff = em_feed_forward_new((em_ffn_cfg){.d_model = 8, .dim_feedforward = 16}, EM_CPU);
    CHECK(ff && em_module_count(ff, true) == 8 * 16 + 16 + 16 * 8 + 8, "ffn parameters");
    em_tensor *fy = em_forward(ff, em_ones(EM_SHAPE(2, 3, 8), EM_F32, EM_CPU));
    CHECK(fy && em_shape_equal(em_tensor_shape(fy), EM_SHAPE(2, 3, 8)), "ffn shape");
    em_module_free(ff);
    CHECK_OK("transformer");
    em_scope_end();
}

/* ---- positional encodings ------------------------------------------------------------------ */

static void test_posenc(void)
{
    em_scope_begin();
    em_tensor *t = em_sinusoidal_table(16, 7, EM_F64, EM_CPU);
    check_fx("sinusoidal table", t, "sin.table", ATOL, RTOL);
    em_module *pe = em_sinusoidal_pe_new((em_posenc_cfg){.d_model = 7, .max_len = 16}, EM_CPU);
    em_tensor *x = h_fixture_tensor(fx, "sin.x");
    em_tensor *y32 = em_sinusoidal_pe_forward(pe, em_cast(x, EM_F32), 3);
    check_fx("sinusoidal f32", y32, "sin.y3", 1e-6, 1e-5);
    em_module_set(pe, "pe", em_sinusoidal_table(16, 7, EM_F64, EM_CPU));
    check_fx("sinusoidal offset 3", em_sinusoidal_pe_forward(pe, x, 3), "sin.y3", ATOL, RTOL);
    CHECK(em_sinusoidal_pe_forward(pe, x, 12) == NULL, "past max_len");
    CHECK_ERR(EM_ERR_INDEX, "max_len 16");
    em_module_free(pe);

    em_tensor *r = input("rope", "x");
    em_tensor *ry = em_rope(r, 3, 0);
    check_fx("rope", ry, "rope.y", ATOL, RTOL);
    em_grads *g = seeded_backward("rope", &ry, 1);
    check_grad("rope", g, r, "gx");
    CHECK_OK("posenc");
    em_scope_end();
}

/* ---- recurrent ----------------------------------------------------------------------------- */

static void test_rnn(void)
{
    const char *cases[4] = {"rnn", "lstm", "gru", "rnn_relu"};
    for (int i = 0; i < 4; i++) {
        em_scope_begin();
        const char *cas = cases[i];
        em_rnn_cfg cfg = {
            .input_size = 3, .hidden_size = 4, .num_layers = 2, .bidirectional = true};
        if (i == 3)
            cfg = (em_rnn_cfg){
                .input_size = 3, .hidden_size = 4, .nonlinearity = EM_RNN_RELU, .seq_first = true};
        em_module *m = i == 1   ? em_lstm_new(cfg, EM_CPU)
                       : i == 2 ? em_gru_new(cfg, EM_CPU)
                                : em_rnn_new(cfg, EM_CPU);
        CHECK(m != NULL, "%s: %s", cas, em_last_error());
        em_module_cast(m, EM_F64);
        load_params(m, cas, EM_F64);
        em_tensor *x = input(cas, "x");
        em_tensor *h0 = i < 3 ? input(cas, "h0") : NULL;
        em_tensor *c0 = i == 1 ? input(cas, "c0") : NULL;
        em_tensor *hn = NULL, *cn = NULL;
        em_tensor *y = em_rnn_forward(m, x, h0, c0, &hn, i == 1 ? &cn : NULL);
        char what[64];
        snprintf(what, sizeof what, "%s output", cas);
        char key[64];
        snprintf(key, sizeof key, "%s.y", cas);
        check_fx(what, y, key, ATOL, RTOL);
        snprintf(key, sizeof key, "%s.hn", cas);
        check_fx(key, hn, key, ATOL, RTOL);
        if (i == 1) check_fx("lstm.cn", cn, "lstm.cn", ATOL, RTOL);
        if (!y || !hn) {
            em_module_free(m);
            em_scope_end();
            continue;
        }
        em_tensor *outs[3] = {y, hn, cn};
        em_grads *g = seeded_backward(cas, outs, i == 1 ? 3 : 2);
        check_grad(cas, g, x, "gx");
        if (h0) check_grad(cas, g, h0, "gh0");
        if (c0) check_grad(cas, g, c0, "gc0");
        check_param_grads(cas, m, g);
        em_module_free(m);
        CHECK_OK(cas);
        em_scope_end();
    }
}

/* ---- bad input ----------------------------------------------------------------------------- */

static void test_bad(void)
{
    em_scope_begin();
    CHECK(!em_mha_new((em_mha_cfg){.embed_dim = 8, .num_heads = 3}, EM_CPU), "8 %% 3");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_mha_new: embed_dim 8 is not divisible by num_heads 3");
    CHECK(!em_mha_new((em_mha_cfg){.embed_dim = 8, .num_heads = 4, .num_kv_heads = 3}, EM_CPU),
          "kv heads");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_mha_new: num_kv_heads 3 does not divide num_heads 4");
    CHECK(!em_mha_new((em_mha_cfg){.embed_dim = 0, .num_heads = 1}, EM_CPU), "zero embed");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_mha_new");
    CHECK(!em_transformer_encoder_layer_new((em_transformer_cfg){.d_model = 8, .nhead = 3}, EM_CPU),
          "nhead 3");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_transformer_encoder_layer_new");
    CHECK(!em_transformer_decoder_new((em_transformer_cfg){.d_model = 8, .nhead = 2}, EM_CPU),
          "no layers");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_transformer_decoder_new: num_layers 0");
    CHECK(!em_transformer_decoder_layer_new(
              (em_transformer_cfg){.d_model = 8, .nhead = 2, .activation = 7}, EM_CPU),
          "activation");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_transformer_decoder_layer_new: unknown activation");
    CHECK(!em_lstm_new((em_rnn_cfg){.input_size = 3}, EM_CPU), "hidden 0");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_lstm_new");
    CHECK(!em_gru_new((em_rnn_cfg){.input_size = 3, .hidden_size = 2, .dropout = 1.5}, EM_CPU),
          "dropout");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_gru_new: dropout");
    CHECK(!em_gru_new((em_rnn_cfg){.input_size = 3, .hidden_size = 2, .nonlinearity = EM_RNN_RELU},
                      EM_CPU),
          "gru relu");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_gru_new");
    CHECK(!em_sinusoidal_pe_new((em_posenc_cfg){0}, EM_CPU), "d_model 0");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_sinusoidal_pe_new");
    CHECK(!em_feed_forward_new((em_ffn_cfg){.d_model = 4}, EM_CPU), "ffn");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_feed_forward_new");
    CHECK(!em_rope(em_zeros(EM_SHAPE(2, 3), EM_F32, EM_CPU), 0, 0), "odd rope");
    CHECK_ERR(EM_ERR_SHAPE, "em_rope");

    em_module *m = em_mha_new((em_mha_cfg){.embed_dim = 8, .num_heads = 2}, EM_CPU);
    em_tensor *x = em_zeros(EM_SHAPE(2, 5, 8), EM_F32, EM_CPU);
    CHECK(!em_mha_forward(m, em_zeros(EM_SHAPE(2, 5, 6), EM_F32, EM_CPU), NULL, NULL,
                          (em_mha_args){0}),
          "wrong embed");
    CHECK_ERR(EM_ERR_SHAPE, "em_mha_forward");
    CHECK(!em_mha_forward(
              m, x, NULL, NULL,
              (em_mha_args){.key_padding_mask = em_zeros(EM_SHAPE(2, 4), EM_BOOL, EM_CPU)}),
          "kpm shape");
    CHECK_ERR(EM_ERR_SHAPE, "key_padding_mask");
    CHECK(!em_mha_forward(m, x, NULL, NULL,
                          (em_mha_args){.attn_mask = em_zeros(EM_SHAPE(3, 5, 5), EM_BOOL, EM_CPU)}),
          "attn_mask shape");
    CHECK_ERR(EM_ERR_SHAPE, "attn_mask");
    em_tensor *two[2] = {x, x};
    CHECK(!em_forward_n(m, two, 2), "two inputs");
    CHECK_ERR(EM_ERR_INVALID_ARG, "MultiheadAttention");
    em_module *lstm = em_lstm_new((em_rnn_cfg){.input_size = 3, .hidden_size = 2}, EM_CPU);
    CHECK(!em_rnn_forward(lstm, x, NULL, NULL, NULL, NULL), "lstm input size");
    CHECK_ERR(EM_ERR_SHAPE, "em_rnn_forward");
    CHECK(!em_rnn_forward(lstm, em_zeros(EM_SHAPE(2, 5, 3), EM_F32, EM_CPU),
                          em_zeros(EM_SHAPE(2, 2, 2), EM_F32, EM_CPU), NULL, NULL, NULL),
          "h0 shape");
    CHECK_ERR(EM_ERR_SHAPE, "h0");
    CHECK(!em_rnn_forward(m, x, NULL, NULL, NULL, NULL), "not an rnn");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_rnn_forward");
    em_module_free(lstm);
    em_module_free(m);
    em_scope_end();
}

int main(void)
{
    h_init();
    fx = h_fixture_load("seq.emfx");
    CHECK(fx != NULL, "fixture seq.emfx");
    if (fx) {
        test_mha_self();
        test_mha_cross();
        test_gqa();
        test_kv_cache();
        test_transformer();
        test_posenc();
        test_rnn();
        test_bad();
        h_fixture_free(fx);
    }
    return h_finish();
}
