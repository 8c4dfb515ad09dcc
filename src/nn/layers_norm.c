/* Normalisation layers: BatchNorm1d/2d/3d and InstanceNorm1d/2d/3d (batch statistics in
 * training, running statistics kept like PyTorch's), LayerNorm, GroupNorm and RMSNorm. */
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "nn_impl.h"

/* ---- BatchNorm and InstanceNorm ---------------------------------------------------------- */

typedef struct bn_module {
    em_module base;
    bool instance;
    int nd; /* spatial dims: 1..3 (BatchNorm1d also takes [N, C]) */
    int64_t channels;
    double eps, momentum;
    bool cumulative, affine, track;
} bn_module;

static const char *bn_shape_hint(const bn_module *b)
{
    if (b->instance)
        return b->nd == 1 ? "[N, C, L]" : b->nd == 2 ? "[N, C, H, W]" : "[N, C, D, H, W]";
    return b->nd == 1 ? "[N, C] or [N, C, L]" : b->nd == 2 ? "[N, C, H, W]" : "[N, C, D, H, W]";
}

/* A [C] tensor viewed as [1, C, 1, ...] to broadcast against a rank-r input. */
static em_tensor *per_channel(em_tensor *t, int r)
{
    em_shape s = {.rank = r};
    for (int d = 0; d < r; d++) s.dims[d] = 1;
    s.dims[1] = em_tensor_numel(t);
    return em_reshape(t, s);
}

/* new = old * (1 - f) + batch * f, stored back in old's dtype as buffer `name`. */
static void blend_buffer(em_module *m, const char *name, em_tensor *batch, double f)
{
    em_tensor *old = em_module_get(m, name);
    em_tensor *mix =
        em_add(em_mul_scalar(old, 1 - f), em_mul_scalar(em_cast(batch, em_tensor_dtype(old)), f));
    if (mix) em_module_set(m, name, mix);
}

/* Updates running_mean/var (under no_grad) from the batch mean and unbiased variance [C]. */
static void bn_update_running(bn_module *b, em_tensor *mean, em_tensor *uvar)
{
    em_module *m = &b->base;
    double f = b->momentum;
    if (!b->instance) { /* PyTorch's instance norm keeps the counter at 0 */
        em_tensor *nbt = em_module_get(m, "num_batches_tracked");
        int64_t count = em_item_i64(nbt) + 1;
        em_module_set(m, "num_batches_tracked",
                      em_full(EM_SCALAR, (double)count, EM_I64, em_tensor_device(nbt)));
        if (b->cumulative) f = 1.0 / (double)count;
    }
    blend_buffer(m, "running_mean", mean, f);
    blend_buffer(m, "running_var", uvar, f);
}

static em_tensor *bn_forward(em_module *m, em_tensor *const *in, int n)
{
    bn_module *b = (bn_module *)m;
    const char *name = m->type->name;
    if (!nn_check_inputs(name, n, 1) || !tn_check_ptr("em_forward", in[0], "x")) return NULL;
    em_tensor *x = in[0];
    int r = em_tensor_rank(x);
    bool rank_ok = r == b->nd + 2 || (!b->instance && b->nd == 1 && r == 2);
    if (!rank_ok || em_tensor_dim(x, 1) != b->channels) {
        char sb[96];
        em_error(EM_ERR_SHAPE, "em_forward: %s(%lld) expects %s input with C=%lld, got %s", name,
                 (long long)b->channels, bn_shape_hint(b), (long long)b->channels,
                 em_shape_str(em_tensor_shape(x), sb, sizeof sb));
        return NULL;
    }
    em_tensor *w = em_module_get(m, "weight"), *bias = em_module_get(m, "bias");
    bool batch_stats = m->training || !b->track;
    if (!batch_stats) {
        return em_batch_norm(x, em_module_get(m, "running_mean"), em_module_get(m, "running_var"),
                             w, bias, b->eps);
    }
    /* statistics over N and the spatial dims (batch norm) or the spatial dims (instance norm) */
    em_axes ax = {.n = 0};
    if (!b->instance) ax.d[ax.n++] = 0;
    for (int d = 2; d < r; d++) ax.d[ax.n++] = d;
    int64_t count = 1;
    for (int i = 0; i < ax.n; i++) count *= em_tensor_dim(x, ax.d[i]);
    if (m->training && count <= 1) {
        em_error(EM_ERR_SHAPE,
                 "em_forward: %s needs more than 1 value per channel when "
                 "training, got input %s",
                 name, bn_shape_hint(b));
        return NULL;
    }
    em_scope_begin();
    em_tensor *y;
    em_tensor *mean = NULL, *var = NULL;
    if (b->instance) {
        y = em_group_norm(x, b->channels, w, bias, b->eps);
    } else {
        /* y = (x - mean) * rsqrt(var + eps) * w + b, differentiable through mean and var */
        mean = em_mean(x, ax, true);
        var = em_var(x, ax, 0, true);
        y = em_mul(em_sub(x, mean), em_rsqrt(em_add_scalar(var, b->eps)));
        if (w) y = em_add(em_mul(y, per_channel(w, r)), per_channel(bias, r));
    }
    if (y && m->training && b->track) {
        em_no_grad_begin();
        em_tensor *bm, *bv;
        if (b->instance) {
            /* PyTorch averages the per-instance statistics over the batch */
            em_tensor *xd = em_detach(x);
            bm = em_mean(em_mean(xd, ax, false), EM_AXES(0), false);
            bv = em_mean(em_var(xd, ax, 1, false), EM_AXES(0), false);
        } else {
            bm = em_reshape(mean, EM_SHAPE(b->channels));
            bv = em_mul_scalar(em_reshape(var, EM_SHAPE(b->channels)),
                               (double)count / (double)(count - 1));
        }
        if (bm && bv) bn_update_running(b, bm, bv);
        em_no_grad_end();
    }
    if (tn_scope_failed()) y = NULL;
    em_keep(y);
    em_scope_end();
    return y;
}

static void bn_describe(const em_module *m, char *buf, size_t cap)
{
    const bn_module *b = (const bn_module *)m;
    char mom[32];
    if (b->cumulative)
        snprintf(mom, sizeof mom, "None");
    else
        snprintf(mom, sizeof mom, "%g", b->momentum);
    snprintf(buf, cap, "%lld, eps=%g, momentum=%s, affine=%s, track_running_stats=%s",
             (long long)b->channels, b->eps, mom, b->affine ? "true" : "false",
             b->track ? "true" : "false");
}

static const em_module_type bn_types[2][3] = {
    {{"BatchNorm1d", bn_forward, NULL, bn_describe},
     {"BatchNorm2d", bn_forward, NULL, bn_describe},
     {"BatchNorm3d", bn_forward, NULL, bn_describe}},
    {{"InstanceNorm1d", bn_forward, NULL, bn_describe},
     {"InstanceNorm2d", bn_forward, NULL, bn_describe},
     {"InstanceNorm3d", bn_forward, NULL, bn_describe}},
};

static em_module *bn_new(const char *fn, bool instance, int nd, em_norm_cfg c, em_device dev)
{
    uint64_t mark = core_error_mark();
    if (c.num_features <= 0) {
        em_error(EM_ERR_INVALID_ARG, "%s: num_features %lld must be positive", fn,
                 (long long)c.num_features);
        return NULL;
    }
    if (c.eps < 0 || c.momentum < 0 || c.momentum > 1 || isnan(c.eps) || isnan(c.momentum)) {
        em_error(EM_ERR_INVALID_ARG, "%s: eps %g must be >= 0 and momentum %g in [0, 1]", fn, c.eps,
                 c.momentum);
        return NULL;
    }
    if (instance && c.cumulative_average) {
        em_error(EM_ERR_INVALID_ARG, "%s: instance norm has no cumulative average", fn);
        return NULL;
    }
    if (instance ? (c.no_affine || c.no_track_running_stats)
                 : (c.affine || c.track_running_stats)) {
        em_error(EM_ERR_INVALID_ARG, "%s: use %s for %s", fn,
                 instance ? "affine/track_running_stats (off by default)"
                          : "no_affine/no_track_running_stats (on by default)",
                 instance ? "instance norm" : "batch norm");
        return NULL;
    }
    if (!nn_check_param(fn, EM_SHAPE(c.num_features), dev)) return NULL;
    bn_module *b = em_module_alloc(sizeof *b, &bn_types[instance][nd - 1], dev);
    if (!b) return NULL;
    b->instance = instance;
    b->nd = nd;
    b->channels = c.num_features;
    b->eps = c.eps > 0 ? c.eps : 1e-5;
    b->momentum = c.momentum > 0 ? c.momentum : 0.1;
    b->cumulative = c.cumulative_average;
    b->affine = instance ? c.affine : !c.no_affine;
    b->track = instance ? c.track_running_stats : !c.no_track_running_stats;
    em_shape s = EM_SHAPE(c.num_features);
    em_no_grad_begin();
    if (b->affine) {
        em_module_param(&b->base, "weight", em_ones(s, EM_F32, dev));
        em_module_param(&b->base, "bias", em_zeros(s, EM_F32, dev));
    }
    if (b->track) {
        em_module_buffer(&b->base, "running_mean", em_zeros(s, EM_F32, dev));
        em_module_buffer(&b->base, "running_var", em_ones(s, EM_F32, dev));
        em_module_buffer(&b->base, "num_batches_tracked", em_zeros(EM_SCALAR, EM_I64, dev));
    }
    em_no_grad_end();
    if (core_failed_since(mark)) {
        em_module_free(&b->base);
        return NULL;
    }
    return &b->base;
}

em_module *em_batch_norm1d_new(em_norm_cfg cfg, em_device dev)
{
    return bn_new("em_batch_norm1d_new", false, 1, cfg, dev);
}

em_module *em_batch_norm2d_new(em_norm_cfg cfg, em_device dev)
{
    return bn_new("em_batch_norm2d_new", false, 2, cfg, dev);
}

em_module *em_batch_norm3d_new(em_norm_cfg cfg, em_device dev)
{
    return bn_new("em_batch_norm3d_new", false, 3, cfg, dev);
}

em_module *em_instance_norm1d_new(em_norm_cfg cfg, em_device dev)
{
    return bn_new("em_instance_norm1d_new", true, 1, cfg, dev);
}

em_module *em_instance_norm2d_new(em_norm_cfg cfg, em_device dev)
{
    return bn_new("em_instance_norm2d_new", true, 2, cfg, dev);
}

em_module *em_instance_norm3d_new(em_norm_cfg cfg, em_device dev)
{
    return bn_new("em_instance_norm3d_new", true, 3, cfg, dev);
}

/* ---- LayerNorm, RMSNorm, GroupNorm ------------------------------------------------------- */

typedef struct ln_module {
    em_module base;
    bool rms;
    em_shape shape;
    double eps; /* 0 for RMSNorm: the input dtype's epsilon */
    int64_t groups, channels;
} ln_module;

static em_tensor *ln_forward(em_module *m, em_tensor *const *in, int n)
{
    ln_module *l = (ln_module *)m;
    if (!nn_check_inputs(m->type->name, n, 1) || !tn_check_ptr("em_forward", in[0], "x"))
        return NULL;
    em_tensor *x = in[0], *w = em_module_get(m, "weight"), *b = em_module_get(m, "bias");
    if (!l->rms) return em_layer_norm(x, l->shape.rank, w, b, l->eps);
    double eps = l->eps;
    if (eps == 0) {
        em_dtype dt = em_tensor_dtype(x);
        eps = dt == EM_F64    ? DBL_EPSILON
              : dt == EM_F16  ? 0x1p-10
              : dt == EM_BF16 ? 0x1p-7
                              : FLT_EPSILON;
    }
    return em_rms_norm(x, l->shape.rank, w, eps);
}

static void ln_describe(const em_module *m, char *buf, size_t cap)
{
    const ln_module *l = (const ln_module *)m;
    char sb[96];
    em_shape_str(l->shape, sb, sizeof sb);
    bool w = em_module_get((em_module *)m, "weight") != NULL;
    bool b = em_module_get((em_module *)m, "bias") != NULL;
    if (l->rms && l->eps == 0)
        snprintf(buf, cap, "%s, eps=None, elementwise_affine=%s", sb, w ? "true" : "false");
    else if (l->rms)
        snprintf(buf, cap, "%s, eps=%g, elementwise_affine=%s", sb, l->eps, w ? "true" : "false");
    else
        snprintf(buf, cap, "%s, eps=%g, elementwise_affine=%s%s", sb, l->eps, w ? "true" : "false",
                 w && !b ? ", bias=false" : "");
}

static const em_module_type ln_type = {"LayerNorm", ln_forward, NULL, ln_describe};
static const em_module_type rms_type = {"RMSNorm", ln_forward, NULL, ln_describe};

static em_module *ln_new(const char *fn, bool rms, em_layer_norm_cfg c, em_device dev)
{
    uint64_t mark = core_error_mark();
    bool ok = c.shape.rank >= 1 && c.shape.rank <= EM_MAX_RANK;
    for (int d = 0; ok && d < c.shape.rank; d++) ok = c.shape.dims[d] > 0;
    if (!ok) {
        em_error(EM_ERR_INVALID_ARG,
                 "%s: normalized shape must have 1 to %d positive dims (rank %d given)", fn,
                 EM_MAX_RANK, c.shape.rank);
        return NULL;
    }
    if (c.eps < 0 || isnan(c.eps)) {
        em_error(EM_ERR_INVALID_ARG, "%s: eps %g is negative", fn, c.eps);
        return NULL;
    }
    if (rms && c.no_bias) {
        em_error(EM_ERR_INVALID_ARG, "%s: RMSNorm has no bias (use no_affine)", fn);
        return NULL;
    }
    if (!nn_check_param(fn, c.shape, dev)) return NULL;
    ln_module *l = em_module_alloc(sizeof *l, rms ? &rms_type : &ln_type, dev);
    if (!l) return NULL;
    l->rms = rms;
    l->shape = c.shape;
    l->eps = rms ? c.eps : (c.eps > 0 ? c.eps : 1e-5);
    em_no_grad_begin();
    if (!c.no_affine) {
        em_module_param(&l->base, "weight", em_ones(c.shape, EM_F32, dev));
        if (!rms && !c.no_bias) em_module_param(&l->base, "bias", em_zeros(c.shape, EM_F32, dev));
    }
    em_no_grad_end();
    if (core_failed_since(mark)) {
        em_module_free(&l->base);
        return NULL;
    }
    return &l->base;
}

em_module *em_layer_norm_new(em_layer_norm_cfg cfg, em_device dev)
{
    return ln_new("em_layer_norm_new", false, cfg, dev);
}

em_module *em_rms_norm_new(em_layer_norm_cfg cfg, em_device dev)
{
    return ln_new("em_rms_norm_new", true, cfg, dev);
}

static em_tensor *gn_forward(em_module *m, em_tensor *const *in, int n)
{
    ln_module *l = (ln_module *)m;
    if (!nn_check_inputs(m->type->name, n, 1) || !tn_check_ptr("em_forward", in[0], "x"))
        return NULL;
    em_tensor *x = in[0];
    if (em_tensor_rank(x) < 2 || em_tensor_dim(x, 1) != l->channels) {
        char sb[96];
        em_error(EM_ERR_SHAPE, "em_forward: GroupNorm expects [N, %lld, ...] input, got %s",
                 (long long)l->channels, em_shape_str(em_tensor_shape(x), sb, sizeof sb));
        return NULL;
    }
    return em_group_norm(x, l->groups, em_module_get(m, "weight"), em_module_get(m, "bias"),
                         l->eps);
}

static void gn_describe(const em_module *m, char *buf, size_t cap)
{
    const ln_module *l = (const ln_module *)m;
    snprintf(buf, cap, "%lld, %lld, eps=%g, affine=%s", (long long)l->groups,
             (long long)l->channels, l->eps,
             em_module_get((em_module *)m, "weight") ? "true" : "false");
}

static const em_module_type gn_type = {"GroupNorm", gn_forward, NULL, gn_describe};

em_module *em_group_norm_new(em_group_norm_cfg c, em_device dev)
{
    uint64_t mark = core_error_mark();
    if (c.groups <= 0 || c.channels <= 0 || c.channels % c.groups) {
        em_error(EM_ERR_INVALID_ARG,
                 "em_group_norm_new: groups=%lld must be positive and divide channels=%lld",
                 (long long)c.groups, (long long)c.channels);
        return NULL;
    }
    if (c.eps < 0 || isnan(c.eps)) {
        em_error(EM_ERR_INVALID_ARG, "em_group_norm_new: eps %g is negative", c.eps);
        return NULL;
    }
    if (!nn_check_param("em_group_norm_new", EM_SHAPE(c.channels), dev)) return NULL;
    ln_module *l = em_module_alloc(sizeof *l, &gn_type, dev);
    if (!l) return NULL;
    l->groups = c.groups;
    l->channels = c.channels;
    l->eps = c.eps > 0 ? c.eps : 1e-5;
    em_no_grad_begin();
    if (!c.no_affine) {
        em_module_param(&l->base, "weight", em_ones(EM_SHAPE(c.channels), EM_F32, dev));
        em_module_param(&l->base, "bias", em_zeros(EM_SHAPE(c.channels), EM_F32, dev));
    }
    em_no_grad_end();
    if (core_failed_since(mark)) {
        em_module_free(&l->base);
        return NULL;
    }
    return &l->base;
}
