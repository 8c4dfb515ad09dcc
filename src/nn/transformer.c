/* Transformer encoder/decoder layers and stacks with torch.nn.Transformer*'s parameter names,
 * and the position-wise feed-forward block. */
#include <stdio.h>
#include <string.h>

#include "nn_impl.h"

/* ---- LayerNorm over the last dim (private: the names weight/bias match PyTorch's) ---------- */

typedef struct ln_module {
    em_module base;
    int64_t d;
    double eps;
} ln_module;

static em_tensor *ln_forward(em_module *m, em_tensor *const *in, int n)
{
    if (!nn_check_inputs("LayerNorm", n, 1)) return NULL;
    return em_layer_norm(in[0], 1, em_module_get(m, "weight"), em_module_get(m, "bias"),
                         ((ln_module *)m)->eps);
}

static void ln_describe(const em_module *m, char *buf, size_t cap)
{
    const ln_module *l = (const ln_module *)m;
    snprintf(buf, cap, "(%lld,), eps=%g", (long long)l->d, l->eps);
}

static const em_module_type ln_type = {"LayerNorm", ln_forward, NULL, ln_describe};

static em_module *ln_new(int64_t d, double eps, em_device dev)
{
    ln_module *l = em_module_alloc(sizeof *l, &ln_type, dev);
    if (!l) return NULL;
    l->d = d;
    l->eps = eps;
    em_no_grad_begin();
    em_module_param(&l->base, "weight", em_ones(EM_SHAPE(d), EM_F32, dev));
    em_module_param(&l->base, "bias", em_zeros(EM_SHAPE(d), EM_F32, dev));
    em_no_grad_end();
    return &l->base;
}

/* ---- ModuleList (children only) ---------------------------------------------------------- */

static const em_module_type list_type = {"ModuleList", NULL, NULL, NULL};

/* ---- feed-forward ------------------------------------------------------------------------ */

/* linear2(dropout(act(linear1(x)))) with m's children linear1 and linear2 */
static em_tensor *ffn_apply(em_module *m, em_ffn_activation act, double p, const em_tensor *x)
{
    em_tensor *h = em_forward(em_module_find(m, "linear1"), (em_tensor *)x);
    h = act == EM_FFN_GELU ? em_gelu(h) : em_relu(h);
    h = em_dropout(h, p, m->training);
    return em_forward(em_module_find(m, "linear2"), h);
}

typedef struct ffn_module {
    em_module base;
    em_ffn_cfg cfg;
} ffn_module;

static em_tensor *ffn_forward(em_module *m, em_tensor *const *in, int n)
{
    if (!nn_check_inputs("FeedForward", n, 1)) return NULL;
    ffn_module *f = (ffn_module *)m;
    em_scope_begin();
    em_tensor *y = ffn_apply(m, f->cfg.activation, f->cfg.dropout, in[0]);
    if (y) em_keep(y);
    em_scope_end();
    return y;
}

static void ffn_describe(const em_module *m, char *buf, size_t cap)
{
    const ffn_module *f = (const ffn_module *)m;
    snprintf(buf, cap, "d_model=%lld, dim_feedforward=%lld, activation=%s, dropout=%g",
             (long long)f->cfg.d_model, (long long)f->cfg.dim_feedforward,
             f->cfg.activation == EM_FFN_GELU ? "gelu" : "relu", f->cfg.dropout);
}

static const em_module_type ffn_type = {"FeedForward", ffn_forward, NULL, ffn_describe};

static bool check_act(const char *fn, em_ffn_activation a)
{
    if (a == EM_FFN_RELU || a == EM_FFN_GELU) return true;
    em_error(EM_ERR_INVALID_ARG, "%s: unknown activation %d (EM_FFN_RELU or EM_FFN_GELU)", fn,
             (int)a);
    return false;
}

em_module *em_feed_forward_new(em_ffn_cfg cfg, em_device dev)
{
    uint64_t mark = core_error_mark();
    const char *fn = "em_feed_forward_new";
    if (cfg.d_model <= 0 || cfg.dim_feedforward <= 0) {
        em_error(EM_ERR_INVALID_ARG, "%s: d_model %lld and dim_feedforward %lld must be positive",
                 fn, (long long)cfg.d_model, (long long)cfg.dim_feedforward);
        return NULL;
    }
    if (!(cfg.dropout >= 0 && cfg.dropout < 1)) {
        em_error(EM_ERR_INVALID_ARG, "%s: dropout %g is outside [0, 1)", fn, cfg.dropout);
        return NULL;
    }
    if (!check_act(fn, cfg.activation)) return NULL;
    if (!nn_check_param(fn, EM_SHAPE(cfg.dim_feedforward, cfg.d_model), dev)) return NULL;
    ffn_module *f = em_module_alloc(sizeof *f, &ffn_type, dev);
    if (!f) return NULL;
    f->cfg = cfg;
    em_module_child(&f->base, "linear1", em_linear_new(cfg.d_model, cfg.dim_feedforward, dev));
    em_module_child(&f->base, "linear2", em_linear_new(cfg.dim_feedforward, cfg.d_model, dev));
    if (core_failed_since(mark)) {
        em_module_free(&f->base);
        return NULL;
    }
    return &f->base;
}

/* ---- layers ------------------------------------------------------------------------------ */

typedef struct tf_module {
    em_module base;
    em_transformer_cfg cfg; /* defaults resolved */
} tf_module;

static em_tensor *enc_layer_forward_n(em_module *m, em_tensor *const *in, int n);
static em_tensor *dec_layer_forward_n(em_module *m, em_tensor *const *in, int n);

static void tf_describe(const em_module *m, char *buf, size_t cap)
{
    const em_transformer_cfg *c = &((const tf_module *)m)->cfg;
    int k = snprintf(buf, cap, "d_model=%lld, nhead=%lld, dim_feedforward=%lld, dropout=%g, %s%s",
                     (long long)c->d_model, (long long)c->nhead, (long long)c->dim_feedforward,
                     c->dropout, c->activation == EM_FFN_GELU ? "gelu" : "relu",
                     c->norm_first ? ", norm_first" : "");
    if (c->num_layers > 0 && k >= 0 && (size_t)k < cap)
        snprintf(buf + k, cap - (size_t)k, ", num_layers=%lld", (long long)c->num_layers);
}

static const em_module_type enc_layer_type = {"TransformerEncoderLayer", enc_layer_forward_n, NULL,
                                              tf_describe};
static const em_module_type dec_layer_type = {"TransformerDecoderLayer", dec_layer_forward_n, NULL,
                                              tf_describe};

static bool resolve(const char *fn, em_transformer_cfg *c, bool stack, em_device dev)
{
    if (c->dim_feedforward == 0) c->dim_feedforward = 2048;
    if (c->no_dropout)
        c->dropout = 0;
    else if (c->dropout == 0)
        c->dropout = 0.1;
    if (c->layer_norm_eps == 0) c->layer_norm_eps = 1e-5;
    if (c->d_model <= 0 || c->nhead <= 0 || c->dim_feedforward <= 0) {
        em_error(EM_ERR_INVALID_ARG,
                 "%s: d_model %lld, nhead %lld and dim_feedforward %lld must be positive", fn,
                 (long long)c->d_model, (long long)c->nhead, (long long)c->dim_feedforward);
        return false;
    }
    if (c->d_model % c->nhead != 0) {
        em_error(EM_ERR_INVALID_ARG, "%s: d_model %lld is not divisible by nhead %lld", fn,
                 (long long)c->d_model, (long long)c->nhead);
        return false;
    }
    if (!(c->dropout >= 0 && c->dropout < 1)) {
        em_error(EM_ERR_INVALID_ARG, "%s: dropout %g is outside [0, 1)", fn, c->dropout);
        return false;
    }
    if (!(c->layer_norm_eps > 0)) {
        em_error(EM_ERR_INVALID_ARG, "%s: layer_norm_eps %g must be positive", fn,
                 c->layer_norm_eps);
        return false;
    }
    if (stack && c->num_layers < 1) {
        em_error(EM_ERR_INVALID_ARG, "%s: num_layers %lld must be at least 1", fn,
                 (long long)c->num_layers);
        return false;
    }
    if (!stack) c->num_layers = 0;
    /* a layer's largest weights, [3 d, d] and [d_ff, d], and all layers' weights together
       (4 bytes times about 4 d^2 + 2 d d_ff + 16 d each), checked before any is made */
    int64_t d = c->d_model, d3 = 0, per = 0, bytes = 0;
    bool fits = core_mul_ok(3, d, &d3) && core_muladd_ok(4, d, 16, &per) &&
                core_muladd_ok(2, c->dim_feedforward, per, &per) && core_mul_ok(per, 4 * d, &per) &&
                core_mul_ok(per, c->num_layers > 0 ? c->num_layers : 1, &bytes);
    if (!fits) {
        em_error(EM_ERR_INVALID_ARG,
                 "%s: d_model %lld, dim_feedforward %lld and num_layers %lld are too large", fn,
                 (long long)d, (long long)c->dim_feedforward, (long long)c->num_layers);
        return false;
    }
    if (!nn_check_param(fn, EM_SHAPE(d3, d), dev) ||
        !nn_check_param(fn, EM_SHAPE(c->dim_feedforward, d), dev) ||
        !tn_check_work(fn, "its parameters", EM_U8, &bytes, 1, dev))
        return false;
    return check_act(fn, c->activation);
}

static em_module *layer_new(em_transformer_cfg c, bool decoder, em_device dev)
{
    uint64_t mark = core_error_mark();
    tf_module *t = em_module_alloc(sizeof *t, decoder ? &dec_layer_type : &enc_layer_type, dev);
    if (!t) return NULL;
    t->cfg = c;
    em_mha_cfg a = {.embed_dim = c.d_model,
                    .num_heads = c.nhead,
                    .dropout = c.dropout,
                    .seq_first = c.seq_first};
    em_module_child(&t->base, "self_attn", em_mha_new(a, dev));
    if (decoder) em_module_child(&t->base, "multihead_attn", em_mha_new(a, dev));
    em_module_child(&t->base, "linear1", em_linear_new(c.d_model, c.dim_feedforward, dev));
    em_module_child(&t->base, "linear2", em_linear_new(c.dim_feedforward, c.d_model, dev));
    em_module_child(&t->base, "norm1", ln_new(c.d_model, c.layer_norm_eps, dev));
    em_module_child(&t->base, "norm2", ln_new(c.d_model, c.layer_norm_eps, dev));
    if (decoder) em_module_child(&t->base, "norm3", ln_new(c.d_model, c.layer_norm_eps, dev));
    if (core_failed_since(mark)) {
        em_module_free(&t->base);
        return NULL;
    }
    return &t->base;
}

em_module *em_transformer_encoder_layer_new(em_transformer_cfg cfg, em_device dev)
{
    if (!resolve("em_transformer_encoder_layer_new", &cfg, false, dev)) return NULL;
    return layer_new(cfg, false, dev);
}

em_module *em_transformer_decoder_layer_new(em_transformer_cfg cfg, em_device dev)
{
    if (!resolve("em_transformer_decoder_layer_new", &cfg, false, dev)) return NULL;
    return layer_new(cfg, true, dev);
}

/* dropout(attn(x, kv, kv)) */
static em_tensor *attn_block(em_module *l, const char *name, const em_tensor *x,
                             const em_tensor *kv, const em_tensor *mask, const em_tensor *kpm,
                             bool causal)
{
    const em_transformer_cfg *c = &((tf_module *)l)->cfg;
    em_tensor *y =
        em_mha_forward(em_module_find(l, name), x, kv, kv,
                       (em_mha_args){.attn_mask = mask, .key_padding_mask = kpm, .causal = causal});
    return em_dropout(y, c->dropout, l->training);
}

static em_tensor *ff_block(em_module *l, const em_tensor *x)
{
    const em_transformer_cfg *c = &((tf_module *)l)->cfg;
    return em_dropout(ffn_apply(l, c->activation, c->dropout, x), c->dropout, l->training);
}

static em_tensor *norm(em_module *l, const char *name, const em_tensor *x)
{
    return em_forward(em_module_find(l, name), (em_tensor *)x);
}

/* One layer; decoder when memory is not NULL. Runs inside the caller's scope. */
static em_tensor *layer_apply(em_module *l, const em_tensor *x, const em_tensor *memory,
                              em_transformer_masks mk)
{
    bool dec = l->type == &dec_layer_type;
    const em_tensor *mask = dec ? mk.tgt_mask : mk.src_mask;
    const em_tensor *kpm = dec ? mk.tgt_key_padding_mask : mk.src_key_padding_mask;
    bool causal = dec ? mk.tgt_causal : mk.src_causal;
    const char *ff_norm = dec ? "norm3" : "norm2";
    em_tensor *h = (em_tensor *)x;
    if (((tf_module *)l)->cfg.norm_first) {
        em_tensor *n1 = norm(l, "norm1", h);
        h = em_add(h, attn_block(l, "self_attn", n1, NULL, mask, kpm, causal));
        if (dec)
            h = em_add(h, attn_block(l, "multihead_attn", norm(l, "norm2", h), memory,
                                     mk.memory_mask, mk.memory_key_padding_mask, false));
        h = em_add(h, ff_block(l, norm(l, ff_norm, h)));
    } else {
        h = norm(l, "norm1", em_add(h, attn_block(l, "self_attn", h, NULL, mask, kpm, causal)));
        if (dec)
            h = norm(l, "norm2",
                     em_add(h, attn_block(l, "multihead_attn", h, memory, mk.memory_mask,
                                          mk.memory_key_padding_mask, false)));
        h = norm(l, ff_norm, em_add(h, ff_block(l, h)));
    }
    return h;
}

/* ---- stacks ------------------------------------------------------------------------------ */

static em_tensor *enc_stack_forward_n(em_module *m, em_tensor *const *in, int n);
static em_tensor *dec_stack_forward_n(em_module *m, em_tensor *const *in, int n);

static const em_module_type enc_stack_type = {"TransformerEncoder", enc_stack_forward_n, NULL,
                                              tf_describe};
static const em_module_type dec_stack_type = {"TransformerDecoder", dec_stack_forward_n, NULL,
                                              tf_describe};

static em_module *stack_new(const char *fn, em_transformer_cfg cfg, bool decoder, em_device dev)
{
    uint64_t mark = core_error_mark();
    if (!resolve(fn, &cfg, true, dev)) return NULL;
    tf_module *t = em_module_alloc(sizeof *t, decoder ? &dec_stack_type : &enc_stack_type, dev);
    if (!t) return NULL;
    t->cfg = cfg;
    em_module *list = em_module_alloc(sizeof(em_module), &list_type, dev);
    em_module_child(&t->base, "layers", list);
    for (int64_t i = 0; list && i < cfg.num_layers && !core_failed_since(mark); i++) {
        char name[24];
        snprintf(name, sizeof name, "%lld", (long long)i);
        em_module_child(list, name, layer_new(cfg, decoder, dev));
    }
    if (cfg.final_norm)
        em_module_child(&t->base, "norm", ln_new(cfg.d_model, cfg.layer_norm_eps, dev));
    if (core_failed_since(mark)) {
        em_module_free(&t->base);
        return NULL;
    }
    return &t->base;
}

em_module *em_transformer_encoder_new(em_transformer_cfg cfg, em_device dev)
{
    return stack_new("em_transformer_encoder_new", cfg, false, dev);
}

em_module *em_transformer_decoder_new(em_transformer_cfg cfg, em_device dev)
{
    return stack_new("em_transformer_decoder_new", cfg, true, dev);
}

static em_tensor *run(const char *fn, em_module *m, const em_tensor *x, const em_tensor *memory,
                      em_transformer_masks mk, bool decoder)
{
    if (!tn_check_ptr(fn, m, "m") || !tn_check_ptr(fn, x, decoder ? "tgt" : "src") ||
        (decoder && !tn_check_ptr(fn, memory, "memory")))
        return NULL;
    const em_module_type *layer_t = decoder ? &dec_layer_type : &enc_layer_type;
    const em_module_type *stack_t = decoder ? &dec_stack_type : &enc_stack_type;
    if (m->type != layer_t && m->type != stack_t) {
        em_error(EM_ERR_INVALID_ARG, "%s: module is a %s, not a %s or %s", fn,
                 m->type ? m->type->name : "?", layer_t->name, stack_t->name);
        return NULL;
    }
    em_scope_begin();
    em_tensor *h = (em_tensor *)x;
    if (m->type == layer_t) {
        h = layer_apply(m, h, memory, mk);
    } else {
        em_module *list = em_module_find(m, "layers");
        for (int i = 0; i < list->n_children && h; i++)
            h = layer_apply(list->children[i].child, h, memory, mk);
        em_module *fn_norm = em_module_find(m, "norm");
        if (fn_norm && h) h = em_forward(fn_norm, h);
    }
    bool ok = h && !tn_scope_failed();
    if (ok) em_keep(h);
    em_scope_end();
    return ok ? h : NULL;
}

em_tensor *em_transformer_encode(em_module *enc, const em_tensor *src, em_transformer_masks mk)
{
    return run("em_transformer_encode", enc, src, NULL, mk, false);
}

em_tensor *em_transformer_decode(em_module *dec, const em_tensor *tgt, const em_tensor *memory,
                                 em_transformer_masks mk)
{
    return run("em_transformer_decode", dec, tgt, memory, mk, true);
}

static em_tensor *enc_layer_forward_n(em_module *m, em_tensor *const *in, int n)
{
    if (!nn_check_inputs(m->type->name, n, 1)) return NULL;
    return em_transformer_encode(m, in[0], (em_transformer_masks){0});
}

static em_tensor *dec_layer_forward_n(em_module *m, em_tensor *const *in, int n)
{
    if (!nn_check_inputs(m->type->name, n, 2)) return NULL;
    return em_transformer_decode(m, in[0], in[1], (em_transformer_masks){0});
}

static em_tensor *enc_stack_forward_n(em_module *m, em_tensor *const *in, int n)
{
    return enc_layer_forward_n(m, in, n);
}

static em_tensor *dec_stack_forward_n(em_module *m, em_tensor *const *in, int n)
{
    return dec_layer_forward_n(m, in, n);
}
