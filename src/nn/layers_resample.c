/* Lookup and resampling layers: Embedding, Upsample, PixelShuffle and PixelUnshuffle. */
#include <math.h>
#include <stdio.h>

#include "nn_impl.h"

/* ---- Embedding --------------------------------------------------------------------------- */

typedef struct embedding_module {
    em_module base;
    int64_t num, dim;
    int64_t padding_idx; /* -1: none (resolved to a row otherwise) */
} embedding_module;

static em_tensor *embedding_forward(em_module *m, em_tensor *const *in, int n)
{
    embedding_module *e = (embedding_module *)m;
    if (!nn_check_inputs("Embedding", n, 1) || !tn_check_ptr("em_forward", in[0], "indices"))
        return NULL;
    em_tensor *w = em_module_get(m, "weight");
    if (e->padding_idx < 0) return em_embedding(w, in[0]);
    em_scope_begin();
    /* the padding row reads its (detached) value and passes no gradient back */
    em_tensor *rows = em_reshape(em_arange(0, (double)e->num, 1, EM_I64, em_tensor_device(w)),
                                 EM_SHAPE(e->num, 1));
    em_tensor *mask = em_eq_scalar(rows, (double)e->padding_idx);
    em_tensor *weff = em_where(mask, em_detach(w), w);
    em_tensor *y = em_embedding(weff, in[0]);
    em_keep(y);
    em_scope_end();
    return y;
}

static void embedding_describe(const em_module *m, char *buf, size_t cap)
{
    const embedding_module *e = (const embedding_module *)m;
    if (e->padding_idx >= 0)
        snprintf(buf, cap, "%lld, %lld, padding_idx=%lld", (long long)e->num, (long long)e->dim,
                 (long long)e->padding_idx);
    else
        snprintf(buf, cap, "%lld, %lld", (long long)e->num, (long long)e->dim);
}

static const em_module_type embedding_type = {"Embedding", embedding_forward, NULL,
                                              embedding_describe};

em_module *em_embedding_new(em_embedding_cfg c, em_device dev)
{
    uint64_t mark = core_error_mark();
    if (c.num <= 0 || c.dim <= 0) {
        em_error(EM_ERR_INVALID_ARG, "em_embedding_new: sizes num=%lld dim=%lld must be positive",
                 (long long)c.num, (long long)c.dim);
        return NULL;
    }
    int64_t pidx = -1;
    if (c.has_padding_idx) {
        if (c.padding_idx < -c.num || c.padding_idx >= c.num) {
            em_error(EM_ERR_INVALID_ARG,
                     "em_embedding_new: padding_idx %lld is outside the %lld embeddings",
                     (long long)c.padding_idx, (long long)c.num);
            return NULL;
        }
        pidx = c.padding_idx < 0 ? c.padding_idx + c.num : c.padding_idx;
    }
    if (!nn_check_param("em_embedding_new", EM_SHAPE(c.num, c.dim), dev)) return NULL;
    embedding_module *e = em_module_alloc(sizeof *e, &embedding_type, dev);
    if (!e) return NULL;
    e->num = c.num;
    e->dim = c.dim;
    e->padding_idx = pidx;
    em_no_grad_begin();
    em_tensor *w = em_randn(EM_SHAPE(c.num, c.dim), EM_F32, dev);
    if (w && pidx >= 0) {
        /* PyTorch zeroes the padding row at init */
        em_tensor *row = em_zeros(EM_SHAPE(1, c.dim), EM_F32, dev);
        int64_t st[2] = {pidx, 0}, en[2] = {pidx + 1, c.dim}, sp[2] = {1, 1};
        em_tensor *w2 = em_slice_assign(w, st, en, sp, row);
        em_release(row);
        em_release(w);
        w = w2;
    }
    em_module_param(&e->base, "weight", w);
    em_no_grad_end();
    if (core_failed_since(mark)) {
        em_module_free(&e->base);
        return NULL;
    }
    return &e->base;
}

/* ---- Upsample ---------------------------------------------------------------------------- */

typedef struct upsample_module {
    em_module base;
    em_upsample_cfg cfg;
} upsample_module;

static em_tensor *upsample_forward(em_module *m, em_tensor *const *in, int n)
{
    upsample_module *u = (upsample_module *)m;
    if (!nn_check_inputs("Upsample", n, 1) || !tn_check_ptr("em_forward", in[0], "x")) return NULL;
    em_tensor *x = in[0];
    int r = em_tensor_rank(x);
    if (r != 3 && r != 4) {
        char sb[96];
        em_error(EM_ERR_SHAPE, "em_forward: Upsample expects [N, C, L] or [N, C, H, W], got %s",
                 em_shape_str(em_tensor_shape(x), sb, sizeof sb));
        return NULL;
    }
    em_shape size = {.rank = r - 2};
    for (int d = 0; d < size.rank; d++) {
        double scaled = floor((double)em_tensor_dim(x, 2 + d) * u->cfg.scale[d]);
        if (!u->cfg.size[d] && !(scaled < 0x1p62)) { /* also Inf: no int64_t holds it */
            em_error(EM_ERR_SHAPE,
                     "em_forward: Upsample's scale %g makes dim %d of size %lld too "
                     "large",
                     u->cfg.scale[d], 2 + d, (long long)em_tensor_dim(x, 2 + d));
            return NULL;
        }
        size.dims[d] = u->cfg.size[d] ? u->cfg.size[d] : (int64_t)scaled;
    }
    return em_interpolate(x, size, u->cfg.mode, u->cfg.align_corners);
}

static void upsample_describe(const em_module *m, char *buf, size_t cap)
{
    const upsample_module *u = (const upsample_module *)m;
    static const char *modes[] = {"nearest", "bilinear", "bicubic"};
    const char *mode = (unsigned)u->cfg.mode < 3 ? modes[u->cfg.mode] : "?";
    if (u->cfg.size[0])
        snprintf(buf, cap, "size=(%lld, %lld), mode=%s%s", (long long)u->cfg.size[0],
                 (long long)u->cfg.size[1], mode,
                 u->cfg.align_corners ? ", align_corners=true" : "");
    else
        snprintf(buf, cap, "scale_factor=(%g, %g), mode=%s%s", u->cfg.scale[0], u->cfg.scale[1],
                 mode, u->cfg.align_corners ? ", align_corners=true" : "");
}

static const em_module_type upsample_type = {"Upsample", upsample_forward, NULL, upsample_describe};

em_module *em_upsample_new(em_upsample_cfg c)
{
    bool has_size = c.size[0] > 0, has_scale = c.scale[0] > 0;
    if (has_size == has_scale || c.size[0] < 0 || c.size[1] < 0 || c.scale[0] < 0 ||
        c.scale[1] < 0 || isnan(c.scale[0]) || isnan(c.scale[1])) {
        em_error(EM_ERR_INVALID_ARG,
                 "em_upsample_new: give either a positive size or a positive scale (size %lld, "
                 "scale %g)",
                 (long long)c.size[0], c.scale[0]);
        return NULL;
    }
    if ((unsigned)c.mode > EM_INTERP_BICUBIC) {
        em_error(EM_ERR_INVALID_ARG, "em_upsample_new: unknown mode %d", (int)c.mode);
        return NULL;
    }
    if (c.align_corners && c.mode == EM_INTERP_NEAREST) {
        em_error(EM_ERR_INVALID_ARG, "em_upsample_new: align_corners needs a linear or cubic mode");
        return NULL;
    }
    /* a single value serves both dims, as PyTorch's scalar size/scale_factor */
    if (has_size && c.size[1] == 0) c.size[1] = c.size[0];
    if (has_scale && c.scale[1] == 0) c.scale[1] = c.scale[0];
    upsample_module *u = em_module_alloc(sizeof *u, &upsample_type, EM_CPU);
    if (!u) return NULL;
    u->cfg = c;
    return &u->base;
}

/* ---- PixelShuffle / PixelUnshuffle ------------------------------------------------------- */

typedef struct shuffle_module {
    em_module base;
    int64_t r;
    bool unshuffle;
} shuffle_module;

static em_tensor *shuffle_forward(em_module *m, em_tensor *const *in, int n)
{
    shuffle_module *s = (shuffle_module *)m;
    if (!nn_check_inputs(m->type->name, n, 1)) return NULL;
    return s->unshuffle ? em_pixel_unshuffle(in[0], s->r) : em_pixel_shuffle(in[0], s->r);
}

static void shuffle_describe(const em_module *m, char *buf, size_t cap)
{
    const shuffle_module *s = (const shuffle_module *)m;
    snprintf(buf, cap, "%s_factor=%lld", s->unshuffle ? "downscale" : "upscale", (long long)s->r);
}

static const em_module_type shuffle_types[2] = {
    {"PixelShuffle", shuffle_forward, NULL, shuffle_describe},
    {"PixelUnshuffle", shuffle_forward, NULL, shuffle_describe},
};

static em_module *shuffle_new(const char *fn, int64_t r, bool unshuffle)
{
    if (r <= 0) {
        em_error(EM_ERR_INVALID_ARG, "%s: factor %lld must be positive", fn, (long long)r);
        return NULL;
    }
    shuffle_module *s = em_module_alloc(sizeof *s, &shuffle_types[unshuffle], EM_CPU);
    if (!s) return NULL;
    s->r = r;
    s->unshuffle = unshuffle;
    return &s->base;
}

em_module *em_pixel_shuffle_new(int64_t upscale)
{
    return shuffle_new("em_pixel_shuffle_new", upscale, false);
}

em_module *em_pixel_unshuffle_new(int64_t downscale)
{
    return shuffle_new("em_pixel_unshuffle_new", downscale, true);
}
