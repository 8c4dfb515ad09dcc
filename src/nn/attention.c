/* Multi-head attention (torch.nn.MultiheadAttention's parameters and masks) with grouped-query
 * heads, rotary encoding and a caller-owned key/value cache, built on em_sdpa and matmul. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn_impl.h"

typedef struct mha_module {
    em_module base;
    int64_t E, H, Hkv, D, kdim, vdim;
    double dropout, rope_base;
    bool packed, bias, seq_first, rotary;
} mha_module;

static em_tensor *mha_forward_n(em_module *m, em_tensor *const *in, int n);

static void mha_describe(const em_module *m, char *buf, size_t cap)
{
    const mha_module *a = (const mha_module *)m;
    int k = snprintf(buf, cap, "embed_dim=%lld, num_heads=%lld", (long long)a->E, (long long)a->H);
    if (a->Hkv != a->H && k >= 0 && (size_t)k < cap)
        k += snprintf(buf + k, cap - (size_t)k, ", num_kv_heads=%lld", (long long)a->Hkv);
    if ((a->kdim != a->E || a->vdim != a->E) && k >= 0 && (size_t)k < cap)
        k += snprintf(buf + k, cap - (size_t)k, ", kdim=%lld, vdim=%lld", (long long)a->kdim,
                      (long long)a->vdim);
    if (a->dropout > 0 && k >= 0 && (size_t)k < cap)
        snprintf(buf + k, cap - (size_t)k, ", dropout=%g", a->dropout);
}

static const em_module_type mha_type = {"MultiheadAttention", mha_forward_n, NULL, mha_describe};

em_module *em_mha_new(em_mha_cfg cfg, em_device dev)
{
    uint64_t mark = core_error_mark();
    const char *fn = "em_mha_new";
    int64_t E = cfg.embed_dim, H = cfg.num_heads;
    int64_t Hkv = cfg.num_kv_heads ? cfg.num_kv_heads : H;
    int64_t kdim = cfg.kdim ? cfg.kdim : E, vdim = cfg.vdim ? cfg.vdim : E;
    if (E <= 0 || H <= 0 || Hkv <= 0 || kdim <= 0 || vdim <= 0) {
        em_error(EM_ERR_INVALID_ARG,
                 "%s: embed_dim %lld, num_heads %lld, num_kv_heads %lld, kdim %lld, vdim %lld "
                 "must be positive",
                 fn, (long long)E, (long long)H, (long long)Hkv, (long long)kdim, (long long)vdim);
        return NULL;
    }
    if (E % H != 0) {
        em_error(EM_ERR_INVALID_ARG, "%s: embed_dim %lld is not divisible by num_heads %lld", fn,
                 (long long)E, (long long)H);
        return NULL;
    }
    if (H % Hkv != 0) {
        em_error(EM_ERR_INVALID_ARG, "%s: num_kv_heads %lld does not divide num_heads %lld", fn,
                 (long long)Hkv, (long long)H);
        return NULL;
    }
    if (!(cfg.dropout >= 0 && cfg.dropout < 1)) {
        em_error(EM_ERR_INVALID_ARG, "%s: dropout %g is outside [0, 1)", fn, cfg.dropout);
        return NULL;
    }
    int64_t D = E / H;
    if (cfg.rotary && D % 2 != 0) {
        em_error(EM_ERR_INVALID_ARG, "%s: rotary encoding needs an even head dim, got %lld", fn,
                 (long long)D);
        return NULL;
    }
    int64_t E3 = -1;
    if (!core_mul_ok(3, E, &E3)) E3 = -1; /* refused by the check */
    if (!nn_check_param(fn, EM_SHAPE(E3, E), dev) || !nn_check_param(fn, EM_SHAPE(E, kdim), dev) ||
        !nn_check_param(fn, EM_SHAPE(E, vdim), dev))
        return NULL;
    mha_module *a = em_module_alloc(sizeof *a, &mha_type, dev);
    if (!a) return NULL;
    *a = (mha_module){.base = a->base,
                      .E = E,
                      .H = H,
                      .Hkv = Hkv,
                      .D = D,
                      .kdim = kdim,
                      .vdim = vdim,
                      .dropout = cfg.dropout,
                      .bias = !cfg.no_bias,
                      .seq_first = cfg.seq_first,
                      .rotary = cfg.rotary,
                      .rope_base = cfg.rope_base > 0 ? cfg.rope_base : 10000.0};
    a->packed = kdim == E && vdim == E && Hkv == H;
    int64_t KV = Hkv * D;
    em_no_grad_begin();
    if (a->packed) {
        em_module_param(&a->base, "in_proj_weight",
                        em_init_xavier_uniform(EM_SHAPE(3 * E, E), 1.0, EM_F32, dev));
    } else {
        em_module_param(&a->base, "q_proj_weight",
                        em_init_xavier_uniform(EM_SHAPE(E, E), 1.0, EM_F32, dev));
        em_module_param(&a->base, "k_proj_weight",
                        em_init_xavier_uniform(EM_SHAPE(KV, kdim), 1.0, EM_F32, dev));
        em_module_param(&a->base, "v_proj_weight",
                        em_init_xavier_uniform(EM_SHAPE(KV, vdim), 1.0, EM_F32, dev));
    }
    if (a->bias)
        em_module_param(&a->base, "in_proj_bias", em_zeros(EM_SHAPE(E + 2 * KV), EM_F32, dev));
    em_module *out = em_linear_new_cfg(E, E, (em_linear_cfg){.no_bias = cfg.no_bias}, dev);
    if (out && a->bias) em_module_set(out, "bias", em_zeros(EM_SHAPE(E), EM_F32, dev));
    em_module_child(&a->base, "out_proj", out);
    em_no_grad_end();
    if (core_failed_since(mark)) {
        em_module_free(&a->base);
        return NULL;
    }
    return &a->base;
}

void em_kv_cache_clear(em_kv_cache *cache)
{
    if (!cache) return;
    em_release(cache->k);
    em_release(cache->v);
    *cache = (em_kv_cache){0};
}

/* x [..., in] -> x w^T + b, the bias added by the product's epilogue */
static em_tensor *project(const em_tensor *x, const em_tensor *w, const em_tensor *b)
{
    return em_matmul_bias_act(x, em_transpose(w, 0, 1), b, EM_ACT_NONE);
}

/* [N, L, h*d] -> [N, h, L, d] */
static em_tensor *split_heads(const em_tensor *x, int64_t h, int64_t d)
{
    if (!x) return NULL;
    em_shape s = em_tensor_shape(x);
    return em_transpose(em_reshape(x, EM_SHAPE(s.dims[0], s.dims[1], h, d)), 1, 2);
}

/* [N, Hkv, S, d] -> [N, Hkv*g, S, d]: kv head j serves query heads j*g .. j*g+g-1 */
static em_tensor *repeat_kv(const em_tensor *x, int64_t g)
{
    if (!x || g == 1) return (em_tensor *)x;
    em_shape s = em_tensor_shape(x);
    em_tensor *e =
        em_expand(em_unsqueeze(x, 2), EM_SHAPE(s.dims[0], s.dims[1], g, s.dims[2], s.dims[3]));
    return em_reshape(e, EM_SHAPE(s.dims[0], s.dims[1] * g, s.dims[2], s.dims[3]));
}

static bool shape_is(const em_tensor *t, em_shape s)
{
    return em_shape_equal(em_tensor_shape(t), s);
}

/* The masks of one call as (ignore: bool, true = masked) and (add: float), either NULL,
 * broadcastable to [N, H, L, S]. */
static bool build_masks(const char *fn, const mha_module *a, em_mha_args args, bool unbatched,
                        int64_t N, int64_t L, int64_t S, em_dtype dt, em_device dev,
                        em_tensor **ignore, em_tensor **add)
{
    char b1[64], b2[64];
    *ignore = NULL;
    *add = NULL;
    const em_tensor *kpm = args.key_padding_mask, *am = args.attn_mask;
    if (kpm) {
        em_shape want = unbatched ? EM_SHAPE(S) : EM_SHAPE(N, S);
        if (!shape_is(kpm, want)) {
            em_error(EM_ERR_SHAPE, "%s: key_padding_mask has shape %s, expected %s", fn,
                     em_shape_str(em_tensor_shape(kpm), b1, sizeof b1),
                     em_shape_str(want, b2, sizeof b2));
            return false;
        }
        em_tensor *k4 = em_reshape(kpm, EM_SHAPE(N, 1, 1, S));
        if (em_tensor_dtype(kpm) == EM_BOOL)
            *ignore = k4;
        else
            *add = em_cast(k4, dt);
    }
    if (am) {
        em_shape s = em_tensor_shape(am);
        em_tensor *m4 = NULL;
        if (shape_is(am, EM_SHAPE(L, S)))
            m4 = (em_tensor *)am;
        else if (shape_is(am, EM_SHAPE(N * a->H, L, S)))
            m4 = em_reshape(am, EM_SHAPE(N, a->H, L, S));
        else {
            em_error(EM_ERR_SHAPE,
                     "%s: attn_mask has shape %s, expected [%lld, %lld] or [%lld, "
                     "%lld, %lld] (L, S or N*num_heads, L, S)",
                     fn, em_shape_str(s, b1, sizeof b1), (long long)L, (long long)S,
                     (long long)(N * a->H), (long long)L, (long long)S);
            return false;
        }
        if (em_tensor_dtype(am) == EM_BOOL)
            *ignore = *ignore ? em_logical_or(*ignore, m4) : m4;
        else {
            em_tensor *f = em_cast(m4, dt);
            *add = *add ? em_add(*add, f) : f;
        }
    }
    if (args.causal) {
        /* key j is hidden from query i when j > i + (S - L) */
        em_tensor *c = em_ne_scalar(em_triu(em_ones(EM_SHAPE(L, S), EM_F32, dev), S - L + 1), 0);
        *ignore = *ignore ? em_logical_or(*ignore, c) : c;
    }
    return !tn_scope_failed();
}

em_tensor *em_mha_forward(em_module *m, const em_tensor *query, const em_tensor *key,
                          const em_tensor *value, em_mha_args args)
{
    const char *fn = "em_mha_forward";
    if (!tn_check_ptr(fn, m, "m") || !tn_check_ptr(fn, query, "query")) return NULL;
    if (m->type != &mha_type) {
        em_error(EM_ERR_INVALID_ARG, "%s: module is a %s, not MultiheadAttention", fn,
                 m->type ? m->type->name : "?");
        return NULL;
    }
    mha_module *a = (mha_module *)m;
    if (!key) key = query;
    if (!value) value = key;
    char b1[64], b2[64], b3[64];
    int rank = em_tensor_rank(query);
    bool unbatched = rank == 2;
    if ((rank != 2 && rank != 3) || em_tensor_rank(key) != rank || em_tensor_rank(value) != rank ||
        em_tensor_dim(query, -1) != a->E || em_tensor_dim(key, -1) != a->kdim ||
        em_tensor_dim(value, -1) != a->vdim || em_tensor_dim(key, -2) != em_tensor_dim(value, -2) ||
        (rank == 3 &&
         (em_tensor_dim(key, a->seq_first ? 1 : 0) != em_tensor_dim(query, a->seq_first ? 1 : 0) ||
          em_tensor_dim(value, a->seq_first ? 1 : 0) !=
              em_tensor_dim(query, a->seq_first ? 1 : 0)))) {
        em_error(EM_ERR_SHAPE,
                 "%s: query %s, key %s, value %s do not fit embed_dim %lld, kdim %lld, vdim "
                 "%lld (%s layout)",
                 fn, em_shape_str(em_tensor_shape(query), b1, sizeof b1),
                 em_shape_str(em_tensor_shape(key), b2, sizeof b2),
                 em_shape_str(em_tensor_shape(value), b3, sizeof b3), (long long)a->E,
                 (long long)a->kdim, (long long)a->vdim, a->seq_first ? "[L, N, E]" : "[N, L, E]");
        return NULL;
    }
    em_kv_cache *cache = args.cache;
    int64_t offset = cache ? cache->len : 0;
    em_scope_begin();
    em_tensor *q = (em_tensor *)query, *k = (em_tensor *)key, *v = (em_tensor *)value;
    bool self = query == key && key == value;
    if (unbatched) {
        q = em_unsqueeze(q, 0);
        k = em_unsqueeze(k, 0);
        v = em_unsqueeze(v, 0);
    } else if (a->seq_first) {
        q = em_transpose(q, 0, 1);
        k = em_transpose(k, 0, 1);
        v = em_transpose(v, 0, 1);
    }
    int64_t N = em_tensor_dim(q, 0), L = em_tensor_dim(q, 1);
    int64_t E = a->E, KV = a->Hkv * a->D;
    em_tensor *b = em_module_get(m, "in_proj_bias");
    if (a->packed && self) {
        /* self-attention: one product with the whole in_proj_weight (3E columns fill the GPU
           better than three of E), its columns then cut into q, k and v */
        em_tensor *qkv = project(q, em_module_get(m, "in_proj_weight"), b); /* [N, L, 3E] */
        q = split_heads(em_narrow(qkv, 2, 0, E), a->H, a->D);
        k = split_heads(em_narrow(qkv, 2, E, E), a->H, a->D);
        v = split_heads(em_narrow(qkv, 2, 2 * E, E), a->H, a->D);
    } else {
        em_tensor *wq, *wk, *wv, *bq = NULL, *bk = NULL, *bv = NULL;
        if (a->packed) {
            em_tensor *w = em_module_get(m, "in_proj_weight");
            wq = em_narrow(w, 0, 0, E);
            wk = em_narrow(w, 0, E, E);
            wv = em_narrow(w, 0, 2 * E, E);
        } else {
            wq = em_module_get(m, "q_proj_weight");
            wk = em_module_get(m, "k_proj_weight");
            wv = em_module_get(m, "v_proj_weight");
        }
        if (b) {
            bq = em_narrow(b, 0, 0, E);
            bk = em_narrow(b, 0, E, KV);
            bv = em_narrow(b, 0, E + KV, KV);
        }
        q = split_heads(project(q, wq, bq), a->H, a->D);   /* [N, H, L, D] */
        k = split_heads(project(k, wk, bk), a->Hkv, a->D); /* [N, Hkv, S_new, D] */
        v = split_heads(project(v, wv, bv), a->Hkv, a->D);
    }
    if (a->rotary) {
        q = em_rope(q, offset, a->rope_base);
        k = em_rope(k, offset, a->rope_base);
    }
    if (cache && cache->k && k) {
        em_tensor *ks[2] = {cache->k, k}, *vs[2] = {cache->v, v};
        k = em_cat(ks, 2, 2);
        v = em_cat(vs, 2, 2);
    }
    if (cache && k && v && !tn_scope_failed()) {
        em_tensor *nk = em_retain(k), *nv = em_retain(v);
        em_release(cache->k);
        em_release(cache->v);
        cache->k = nk;
        cache->v = nv;
        cache->len = em_tensor_dim(k, 2);
    }
    em_tensor *out = NULL, *weights = NULL;
    int64_t S = k ? em_tensor_dim(k, 2) : 0;
    em_tensor *ignore = NULL, *add = NULL;
    if (!tn_scope_failed() && build_masks(fn, a, args, unbatched, N, L, S, em_tensor_dtype(q),
                                          em_tensor_device(q), &ignore, &add)) {
        k = repeat_kv(k, a->H / a->Hkv);
        v = repeat_kv(v, a->H / a->Hkv);
        bool drop = m->training && a->dropout > 0;
        if (args.weights || drop) {
            /* explicit softmax(q k^T / sqrt(D) + mask) v, the weights being needed */
            em_tensor *s =
                em_mul_scalar(em_matmul(q, em_transpose(k, -2, -1)), 1.0 / sqrt((double)a->D));
            if (ignore) s = em_masked_fill(s, ignore, -INFINITY);
            if (add) s = em_add(s, add);
            em_tensor *p = em_dropout(em_softmax(s, -1), a->dropout, m->training);
            out = em_matmul(p, v);
            if (args.weights) weights = args.per_head_weights ? p : em_mean(p, EM_AXES(1), false);
        } else {
            em_tensor *mask = NULL;
            if (add)
                mask = ignore ? em_masked_fill(add, ignore, -INFINITY) : add;
            else if (ignore)
                mask = em_logical_not(ignore);
            out = em_sdpa(q, k, v, mask, (em_sdpa_opts){0});
        }
        /* [N, H, L, D] -> [N, L, E] */
        out = em_reshape(em_transpose(out, 1, 2), EM_SHAPE(N, L, E));
        out = em_forward(em_module_find(m, "out_proj"), out);
        if (unbatched) {
            out = em_squeeze(out, EM_AXES(0));
            if (weights) weights = em_squeeze(weights, EM_AXES(0));
        } else if (a->seq_first) {
            out = em_transpose(out, 0, 1);
        }
    }
    bool ok = out && !tn_scope_failed();
    if (ok) {
        em_keep(out);
        if (args.weights) *args.weights = em_keep(weights);
    }
    em_scope_end();
    return ok ? out : NULL;
}

static em_tensor *mha_forward_n(em_module *m, em_tensor *const *in, int n)
{
    if (n == 1) return em_mha_forward(m, in[0], NULL, NULL, (em_mha_args){0});
    if (n == 3) return em_mha_forward(m, in[0], in[1], in[2], (em_mha_args){0});
    em_error(EM_ERR_INVALID_ARG,
             "em_forward: MultiheadAttention takes 1 (self) or 3 (query, key, value) inputs, "
             "got %d",
             n);
    return NULL;
}
