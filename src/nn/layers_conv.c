/* Convolution and pooling layers: Conv1d/2d/3d, ConvTranspose1d/2d/3d, MaxPool/AvgPool 1d-3d,
 * adaptive pooling, and Unfold/Fold (im2col/col2im), with PyTorch's options and init. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn_impl.h"

/* ---- convolution ------------------------------------------------------------------------- */

/* The options of any spatial rank, resolved to concrete values. */
typedef struct conv_spec {
    int64_t in, out, groups;
    int64_t kernel[3], stride[3], padding[3], padding_end[3], dilation[3], output_padding[3];
    em_padding padding_type;
    em_pad_mode padding_mode;
    bool no_bias;
} conv_spec;

typedef struct conv_module {
    em_module base;
    int nd;
    bool transposed;
    conv_spec s;
    int64_t pad_lo[3], pad_hi[3]; /* resolved padding per spatial dim */
} conv_module;

static void tuple_str(char *buf, size_t cap, const int64_t *v, int nd)
{
    size_t k = (size_t)snprintf(buf, cap, "(");
    for (int d = 0; d < nd && k < cap; d++)
        k += (size_t)snprintf(buf + k, cap - k, d ? ", %lld" : "%lld", (long long)v[d]);
    if (k < cap) snprintf(buf + k, cap - k, nd == 1 ? ",)" : ")");
}

static bool all_eq(const int64_t *v, int nd, int64_t x)
{
    for (int d = 0; d < nd; d++)
        if (v[d] != x) return false;
    return true;
}

static em_tensor *conv_forward(em_module *m, em_tensor *const *in, int n)
{
    conv_module *c = (conv_module *)m;
    const char *name = m->type->name;
    if (!nn_check_inputs(name, n, 1) || !tn_check_ptr("em_forward", in[0], "x")) return NULL;
    em_tensor *x = in[0];
    int r = em_tensor_rank(x);
    if (r != c->nd + 2 && r != c->nd + 1) {
        char sb[96];
        em_error(EM_ERR_SHAPE, "em_forward: %s expects [N, C, %s] or [C, %s] input, got %s", name,
                 c->nd == 1   ? "L"
                 : c->nd == 2 ? "H, W"
                              : "D, H, W",
                 c->nd == 1   ? "L"
                 : c->nd == 2 ? "H, W"
                              : "D, H, W",
                 em_shape_str(em_tensor_shape(x), sb, sizeof sb));
        return NULL;
    }
    int64_t ch = em_tensor_dim(x, r - c->nd - 1);
    if (ch != c->s.in) {
        em_error(EM_ERR_SHAPE, "em_forward: %s expects %lld input channels, got %lld", name,
                 (long long)c->s.in, (long long)ch);
        return NULL;
    }
    em_conv_opts o = {.groups = c->s.groups};
    for (int d = 0; d < c->nd; d++) {
        o.stride[d] = c->s.stride[d];
        o.dilation[d] = c->s.dilation[d];
        o.out_pad[d] = c->s.output_padding[d];
        o.pad_lo[d] = c->pad_lo[d];
        o.pad_hi[d] = c->pad_hi[d];
    }
    em_tensor *w = em_module_get(m, "weight"), *b = em_module_get(m, "bias");
    em_tensor *padded = NULL;
    if (c->s.padding_mode != EM_PAD_CONSTANT &&
        !(all_eq(c->pad_lo, c->nd, 0) && all_eq(c->pad_hi, c->nd, 0))) {
        /* pad pairs run from the last dim, as F.pad */
        int64_t pads[6];
        for (int d = 0; d < c->nd; d++) {
            pads[2 * d] = c->pad_lo[c->nd - 1 - d];
            pads[2 * d + 1] = c->pad_hi[c->nd - 1 - d];
            o.pad_lo[c->nd - 1 - d] = o.pad_hi[c->nd - 1 - d] = 0;
        }
        padded = em_pad(x, pads, c->nd, c->s.padding_mode, 0);
        if (!padded) return NULL;
        x = padded;
    }
    em_tensor *y;
    if (c->transposed) {
        y = c->nd == 1   ? em_conv_transpose1d(x, w, b, o)
            : c->nd == 2 ? em_conv_transpose2d(x, w, b, o)
                         : em_conv_transpose3d(x, w, b, o);
    } else {
        y = c->nd == 1   ? em_conv1d(x, w, b, o)
            : c->nd == 2 ? em_conv2d(x, w, b, o)
                         : em_conv3d(x, w, b, o);
    }
    em_release(padded);
    return y;
}

static void conv_describe(const em_module *m, char *buf, size_t cap)
{
    const conv_module *c = (const conv_module *)m;
    char t[64];
    size_t k = 0;
#define APPEND(...)                                                                                \
    do {                                                                                           \
        if (k < cap) k += (size_t)snprintf(buf + k, cap - k, __VA_ARGS__);                         \
    } while (0)
    tuple_str(t, sizeof t, c->s.kernel, c->nd);
    APPEND("in=%lld, out=%lld, kernel=%s", (long long)c->s.in, (long long)c->s.out, t);
    if (!all_eq(c->s.stride, c->nd, 1)) {
        tuple_str(t, sizeof t, c->s.stride, c->nd);
        APPEND(", stride=%s", t);
    }
    if (c->s.padding_type == EM_PADDING_SAME)
        APPEND(", padding=same");
    else if (c->s.padding_type == EM_PADDING_VALID)
        APPEND(", padding=valid");
    else if (!all_eq(c->pad_lo, c->nd, 0) || !all_eq(c->pad_hi, c->nd, 0)) {
        tuple_str(t, sizeof t, c->pad_lo, c->nd);
        APPEND(", padding=%s", t);
        if (c->s.padding_type == EM_PADDING_ASYMMETRIC) {
            tuple_str(t, sizeof t, c->pad_hi, c->nd);
            APPEND(", padding_end=%s", t);
        }
    }
    if (!all_eq(c->s.output_padding, c->nd, 0)) {
        tuple_str(t, sizeof t, c->s.output_padding, c->nd);
        APPEND(", output_padding=%s", t);
    }
    if (!all_eq(c->s.dilation, c->nd, 1)) {
        tuple_str(t, sizeof t, c->s.dilation, c->nd);
        APPEND(", dilation=%s", t);
    }
    if (c->s.groups != 1) APPEND(", groups=%lld", (long long)c->s.groups);
    static const char *modes[] = {"zeros", "reflect", "replicate", "circular"};
    if (c->s.padding_mode != EM_PAD_CONSTANT) APPEND(", padding_mode=%s", modes[c->s.padding_mode]);
    if (c->s.no_bias) APPEND(", bias=false");
#undef APPEND
}

static const em_module_type conv_types[2][3] = {
    {{"Conv1d", conv_forward, NULL, conv_describe},
     {"Conv2d", conv_forward, NULL, conv_describe},
     {"Conv3d", conv_forward, NULL, conv_describe}},
    {{"ConvTranspose1d", conv_forward, NULL, conv_describe},
     {"ConvTranspose2d", conv_forward, NULL, conv_describe},
     {"ConvTranspose3d", conv_forward, NULL, conv_describe}},
};

static bool check_dims(const char *fn, const char *what, const int64_t *v, int nd, int64_t min)
{
    for (int d = 0; d < nd; d++) {
        if (v[d] < min) {
            em_error(EM_ERR_INVALID_ARG, "%s: %s[%d] is %lld; it must be at least %lld", fn, what,
                     d, (long long)v[d], (long long)min);
            return false;
        }
    }
    return true;
}

static void default_dims(int64_t *v, int nd, int64_t def)
{
    for (int d = 0; d < nd; d++)
        if (v[d] == 0) v[d] = def;
}

/* Validates and resolves the options; false with an error naming fn. */
static bool conv_resolve(const char *fn, int nd, bool transposed, conv_spec *s, int64_t *lo,
                         int64_t *hi)
{
    if (s->in <= 0 || s->out <= 0) {
        em_error(EM_ERR_INVALID_ARG, "%s: channels in=%lld out=%lld must be positive", fn,
                 (long long)s->in, (long long)s->out);
        return false;
    }
    if (!check_dims(fn, "kernel", s->kernel, nd, 1) ||
        !check_dims(fn, "stride", s->stride, nd, 0) ||
        !check_dims(fn, "padding", s->padding, nd, 0) ||
        !check_dims(fn, "padding_end", s->padding_end, nd, 0) ||
        !check_dims(fn, "dilation", s->dilation, nd, 0) ||
        !check_dims(fn, "output_padding", s->output_padding, nd, 0))
        return false;
    default_dims(s->stride, nd, 1);
    default_dims(s->dilation, nd, 1);
    if (s->groups < 0) {
        em_error(EM_ERR_INVALID_ARG, "%s: groups is %lld; it must not be negative", fn,
                 (long long)s->groups);
        return false;
    }
    if (s->groups == 0) s->groups = 1;
    if (s->in % s->groups || s->out % s->groups) {
        em_error(EM_ERR_INVALID_ARG, "%s: groups=%lld must divide in=%lld and out=%lld", fn,
                 (long long)s->groups, (long long)s->in, (long long)s->out);
        return false;
    }
    if ((unsigned)s->padding_type > EM_PADDING_ASYMMETRIC) {
        em_error(EM_ERR_INVALID_ARG, "%s: unknown padding_type %d", fn, (int)s->padding_type);
        return false;
    }
    if ((unsigned)s->padding_mode > EM_PAD_CIRCULAR) {
        em_error(EM_ERR_INVALID_ARG, "%s: unknown padding_mode %d", fn, (int)s->padding_mode);
        return false;
    }
    if ((s->padding_type == EM_PADDING_SAME || s->padding_type == EM_PADDING_VALID) &&
        (!all_eq(s->padding, nd, 0) || !all_eq(s->padding_end, nd, 0))) {
        em_error(EM_ERR_INVALID_ARG, "%s: padding values given with padding_type %s", fn,
                 s->padding_type == EM_PADDING_SAME ? "same" : "valid");
        return false;
    }
    if (s->padding_type != EM_PADDING_ASYMMETRIC && !all_eq(s->padding_end, nd, 0)) {
        em_error(EM_ERR_INVALID_ARG, "%s: padding_end needs padding_type EM_PADDING_ASYMMETRIC",
                 fn);
        return false;
    }
    if (s->padding_type == EM_PADDING_SAME) {
        if (transposed) {
            em_error(EM_ERR_INVALID_ARG,
                     "%s: padding \"same\" is not supported for transposed "
                     "convolutions",
                     fn);
            return false;
        }
        if (!all_eq(s->stride, nd, 1)) {
            em_error(EM_ERR_INVALID_ARG,
                     "%s: padding \"same\" is not supported for strided convolutions", fn);
            return false;
        }
    }
    if (transposed) {
        if (s->padding_mode != EM_PAD_CONSTANT) {
            em_error(EM_ERR_INVALID_ARG, "%s: only zero padding_mode is supported", fn);
            return false;
        }
        for (int d = 0; d < nd; d++) {
            if (s->output_padding[d] >= s->stride[d] && s->output_padding[d] >= s->dilation[d]) {
                em_error(EM_ERR_INVALID_ARG,
                         "%s: output_padding[%d]=%lld must be smaller than stride (%lld) or "
                         "dilation (%lld)",
                         fn, d, (long long)s->output_padding[d], (long long)s->stride[d],
                         (long long)s->dilation[d]);
                return false;
            }
        }
    } else if (!all_eq(s->output_padding, nd, 0)) {
        em_error(EM_ERR_INVALID_ARG, "%s: output_padding is for transposed convolutions only", fn);
        return false;
    }
    for (int d = 0; d < nd; d++) {
        switch (s->padding_type) {
        case EM_PADDING_EXPLICIT: lo[d] = hi[d] = s->padding[d]; break;
        case EM_PADDING_VALID: lo[d] = hi[d] = 0; break;
        case EM_PADDING_ASYMMETRIC:
            lo[d] = s->padding[d];
            hi[d] = s->padding_end[d];
            break;
        case EM_PADDING_SAME: {
            int64_t total = 0;
            if (!core_mul_ok(s->dilation[d], s->kernel[d] - 1, &total)) {
                em_error(EM_ERR_INVALID_ARG,
                         "%s: kernel[%d]=%lld with dilation %lld overflows the \"same\" padding",
                         fn, d, (long long)s->kernel[d], (long long)s->dilation[d]);
                return false;
            }
            lo[d] = total / 2;
            hi[d] = total - lo[d];
            break;
        }
        }
    }
    return true;
}

static em_module *conv_new(const char *fn, int nd, bool transposed, conv_spec s, em_device dev)
{
    uint64_t mark = core_error_mark();
    int64_t lo[3] = {0}, hi[3] = {0};
    if (!conv_resolve(fn, nd, transposed, &s, lo, hi)) return NULL;
    em_shape ws = {.rank = nd + 2};
    ws.dims[0] = transposed ? s.in : s.out;
    ws.dims[1] = transposed ? s.out / s.groups : s.in / s.groups;
    for (int d = 0; d < nd; d++) ws.dims[2 + d] = s.kernel[d];
    if (!nn_check_param(fn, ws, dev)) return NULL;
    conv_module *c = em_module_alloc(sizeof *c, &conv_types[transposed][nd - 1], dev);
    if (!c) return NULL;
    c->nd = nd;
    c->transposed = transposed;
    c->s = s;
    memcpy(c->pad_lo, lo, sizeof lo);
    memcpy(c->pad_hi, hi, sizeof hi);
    int64_t fan_in;
    em_init_fans(ws, &fan_in, NULL);
    em_no_grad_begin();
    /* PyTorch's _ConvNd.reset_parameters: kaiming_uniform_(a=sqrt(5)), bias U(+-1/sqrt(fan_in)) */
    em_module_param(&c->base, "weight",
                    em_init_kaiming_uniform(ws, sqrt(5.0), false, EM_NL_LEAKY_RELU, EM_F32, dev));
    if (!s.no_bias) {
        double bound = fan_in > 0 ? 1.0 / sqrt((double)fan_in) : 0;
        em_module_param(&c->base, "bias",
                        em_rand_uniform(EM_SHAPE(s.out), -bound, bound, EM_F32, dev));
    }
    em_no_grad_end();
    if (core_failed_since(mark)) {
        em_module_free(&c->base);
        return NULL;
    }
    return &c->base;
}

#define CONV_SPEC(cfg, nd)                                                                         \
    conv_spec s = {.in = cfg.in,                                                                   \
                   .out = cfg.out,                                                                 \
                   .groups = cfg.groups,                                                           \
                   .padding_type = cfg.padding_type,                                               \
                   .padding_mode = cfg.padding_mode,                                               \
                   .no_bias = cfg.no_bias};                                                        \
    for (int d = 0; d < nd; d++) {                                                                 \
        s.kernel[d] = cfg.kernel[d];                                                               \
        s.stride[d] = cfg.stride[d];                                                               \
        s.padding[d] = cfg.padding[d];                                                             \
        s.padding_end[d] = cfg.padding_end[d];                                                     \
        s.dilation[d] = cfg.dilation[d];                                                           \
        s.output_padding[d] = cfg.output_padding[d];                                               \
    }

em_module *em_conv1d_new(em_conv1d_cfg cfg, em_device dev)
{
    CONV_SPEC(cfg, 1)
    return conv_new("em_conv1d_new", 1, false, s, dev);
}

em_module *em_conv2d_new(em_conv2d_cfg cfg, em_device dev)
{
    CONV_SPEC(cfg, 2)
    return conv_new("em_conv2d_new", 2, false, s, dev);
}

em_module *em_conv3d_new(em_conv3d_cfg cfg, em_device dev)
{
    CONV_SPEC(cfg, 3)
    return conv_new("em_conv3d_new", 3, false, s, dev);
}

em_module *em_conv_transpose1d_new(em_conv1d_cfg cfg, em_device dev)
{
    CONV_SPEC(cfg, 1)
    return conv_new("em_conv_transpose1d_new", 1, true, s, dev);
}

em_module *em_conv_transpose2d_new(em_conv2d_cfg cfg, em_device dev)
{
    CONV_SPEC(cfg, 2)
    return conv_new("em_conv_transpose2d_new", 2, true, s, dev);
}

em_module *em_conv_transpose3d_new(em_conv3d_cfg cfg, em_device dev)
{
    CONV_SPEC(cfg, 3)
    return conv_new("em_conv_transpose3d_new", 3, true, s, dev);
}

/* ---- pooling ----------------------------------------------------------------------------- */

typedef enum pool_kind { POOL_MAX, POOL_AVG, POOL_ADAPTIVE_MAX, POOL_ADAPTIVE_AVG } pool_kind;

typedef struct pool_module {
    em_module base;
    pool_kind kind;
    int nd;
    em_pool_opts o;
    int64_t out[2]; /* adaptive output size; 0 keeps the input dim */
} pool_module;

static em_tensor *pool_forward(em_module *m, em_tensor *const *in, int n)
{
    pool_module *p = (pool_module *)m;
    if (!nn_check_inputs(m->type->name, n, 1) || !tn_check_ptr("em_forward", in[0], "x"))
        return NULL;
    em_tensor *x = in[0];
    switch (p->kind) {
    case POOL_MAX: {
        /* When the op will be recorded, the indexed kind keeps the argmax for the backward
         * pass; otherwise the values-only kind moves half the bytes. */
        em_tensor *idx = NULL, **want = NULL;
        if (em_grad_enabled() && em_tensor_requires_grad(x)) want = &idx;
        em_tensor *y = p->nd == 1   ? em_max_pool1d(x, p->o, want)
                       : p->nd == 2 ? em_max_pool2d(x, p->o, want)
                                    : em_max_pool3d(x, p->o, want);
        em_release(idx);
        return y;
    }
    case POOL_AVG:
        return p->nd == 1   ? em_avg_pool1d(x, p->o)
               : p->nd == 2 ? em_avg_pool2d(x, p->o)
                            : em_avg_pool3d(x, p->o);
    case POOL_ADAPTIVE_MAX:
    case POOL_ADAPTIVE_AVG: {
        int r = em_tensor_rank(x);
        int64_t o[2];
        for (int d = 0; d < p->nd; d++)
            o[d] = p->out[d] ? p->out[d] : (r >= p->nd ? em_tensor_dim(x, r - p->nd + d) : 1);
        if (p->kind == POOL_ADAPTIVE_MAX)
            return p->nd == 1 ? em_adaptive_max_pool1d(x, o[0], NULL)
                              : em_adaptive_max_pool2d(x, o[0], o[1], NULL);
        return p->nd == 1 ? em_adaptive_avg_pool1d(x, o[0]) : em_adaptive_avg_pool2d(x, o[0], o[1]);
    }
    }
    return NULL;
}

static void pool_describe(const em_module *m, char *buf, size_t cap)
{
    const pool_module *p = (const pool_module *)m;
    char t[64];
    if (p->kind == POOL_ADAPTIVE_MAX || p->kind == POOL_ADAPTIVE_AVG) {
        tuple_str(t, sizeof t, p->out, p->nd);
        snprintf(buf, cap, "output_size=%s", t);
        return;
    }
    char st[64], pd[64];
    tuple_str(t, sizeof t, p->o.kernel, p->nd);
    tuple_str(st, sizeof st, p->o.stride, p->nd);
    tuple_str(pd, sizeof pd, p->o.pad, p->nd);
    size_t k = (size_t)snprintf(buf, cap, "kernel=%s, stride=%s, padding=%s", t, st, pd);
    if (p->kind == POOL_MAX && !all_eq(p->o.dilation, p->nd, 1) && k < cap) {
        tuple_str(t, sizeof t, p->o.dilation, p->nd);
        k += (size_t)snprintf(buf + k, cap - k, ", dilation=%s", t);
    }
    if (p->o.ceil_mode && k < cap) k += (size_t)snprintf(buf + k, cap - k, ", ceil_mode=true");
    if (p->o.exclude_pad && k < cap) snprintf(buf + k, cap - k, ", count_include_pad=false");
}

static const em_module_type pool_types[4][3] = {
    {{"MaxPool1d", pool_forward, NULL, pool_describe},
     {"MaxPool2d", pool_forward, NULL, pool_describe},
     {"MaxPool3d", pool_forward, NULL, pool_describe}},
    {{"AvgPool1d", pool_forward, NULL, pool_describe},
     {"AvgPool2d", pool_forward, NULL, pool_describe},
     {"AvgPool3d", pool_forward, NULL, pool_describe}},
    {{"AdaptiveMaxPool1d", pool_forward, NULL, pool_describe},
     {"AdaptiveMaxPool2d", pool_forward, NULL, pool_describe},
     {NULL, NULL, NULL, NULL}},
    {{"AdaptiveAvgPool1d", pool_forward, NULL, pool_describe},
     {"AdaptiveAvgPool2d", pool_forward, NULL, pool_describe},
     {NULL, NULL, NULL, NULL}},
};

static em_module *pool_new(const char *fn, pool_kind kind, int nd, const int64_t *kernel,
                           const int64_t *stride, const int64_t *pad, const int64_t *dil,
                           bool ceil_mode, bool exclude_pad)
{
    em_pool_opts o = {.ceil_mode = ceil_mode, .exclude_pad = exclude_pad};
    for (int d = 0; d < nd; d++) {
        o.kernel[d] = kernel[d];
        o.stride[d] = stride[d];
        o.pad[d] = pad[d];
        o.dilation[d] = dil[d];
    }
    if (!check_dims(fn, "kernel", o.kernel, nd, 1) || !check_dims(fn, "stride", o.stride, nd, 0) ||
        !check_dims(fn, "padding", o.pad, nd, 0) || !check_dims(fn, "dilation", o.dilation, nd, 0))
        return NULL;
    for (int d = 0; d < nd; d++) {
        if (o.stride[d] == 0) o.stride[d] = o.kernel[d];
        if (o.dilation[d] == 0) o.dilation[d] = 1;
        if (o.pad[d] > o.kernel[d] / 2) { /* 2 pad > kernel, without overflowing */
            em_error(EM_ERR_INVALID_ARG,
                     "%s: padding[%d]=%lld must be at most half the kernel "
                     "size %lld",
                     fn, d, (long long)o.pad[d], (long long)o.kernel[d]);
            return NULL;
        }
    }
    if (kind == POOL_AVG && !all_eq(o.dilation, nd, 1)) {
        em_error(EM_ERR_INVALID_ARG, "%s: average pooling has no dilation", fn);
        return NULL;
    }
    pool_module *p = em_module_alloc(sizeof *p, &pool_types[kind][nd - 1], EM_CPU);
    if (!p) return NULL;
    p->kind = kind;
    p->nd = nd;
    p->o = o;
    return &p->base;
}

em_module *em_max_pool1d_new(em_pool1d_cfg c)
{
    return pool_new("em_max_pool1d_new", POOL_MAX, 1, c.kernel, c.stride, c.padding, c.dilation,
                    c.ceil_mode, c.exclude_pad);
}

em_module *em_max_pool2d_new(em_pool2d_cfg c)
{
    return pool_new("em_max_pool2d_new", POOL_MAX, 2, c.kernel, c.stride, c.padding, c.dilation,
                    c.ceil_mode, c.exclude_pad);
}

em_module *em_max_pool3d_new(em_pool3d_cfg c)
{
    return pool_new("em_max_pool3d_new", POOL_MAX, 3, c.kernel, c.stride, c.padding, c.dilation,
                    c.ceil_mode, c.exclude_pad);
}

em_module *em_avg_pool1d_new(em_pool1d_cfg c)
{
    return pool_new("em_avg_pool1d_new", POOL_AVG, 1, c.kernel, c.stride, c.padding, c.dilation,
                    c.ceil_mode, c.exclude_pad);
}

em_module *em_avg_pool2d_new(em_pool2d_cfg c)
{
    return pool_new("em_avg_pool2d_new", POOL_AVG, 2, c.kernel, c.stride, c.padding, c.dilation,
                    c.ceil_mode, c.exclude_pad);
}

em_module *em_avg_pool3d_new(em_pool3d_cfg c)
{
    return pool_new("em_avg_pool3d_new", POOL_AVG, 3, c.kernel, c.stride, c.padding, c.dilation,
                    c.ceil_mode, c.exclude_pad);
}

static em_module *adaptive_new(const char *fn, pool_kind kind, int nd, int64_t a, int64_t b)
{
    if (a < 0 || b < 0) {
        em_error(EM_ERR_INVALID_ARG, "%s: output size %lld%s%s must not be negative", fn,
                 (long long)(a < 0 ? a : b), "", "");
        return NULL;
    }
    pool_module *p = em_module_alloc(sizeof *p, &pool_types[kind][nd - 1], EM_CPU);
    if (!p) return NULL;
    p->kind = kind;
    p->nd = nd;
    p->out[0] = a;
    p->out[1] = b;
    return &p->base;
}

em_module *em_adaptive_avg_pool1d_new(int64_t out_l)
{
    return adaptive_new("em_adaptive_avg_pool1d_new", POOL_ADAPTIVE_AVG, 1, out_l, 0);
}

em_module *em_adaptive_avg_pool2d_new(int64_t out_h, int64_t out_w)
{
    return adaptive_new("em_adaptive_avg_pool2d_new", POOL_ADAPTIVE_AVG, 2, out_h, out_w);
}

em_module *em_adaptive_max_pool1d_new(int64_t out_l)
{
    return adaptive_new("em_adaptive_max_pool1d_new", POOL_ADAPTIVE_MAX, 1, out_l, 0);
}

em_module *em_adaptive_max_pool2d_new(int64_t out_h, int64_t out_w)
{
    return adaptive_new("em_adaptive_max_pool2d_new", POOL_ADAPTIVE_MAX, 2, out_h, out_w);
}

/* ---- Unfold / Fold ----------------------------------------------------------------------- */

typedef struct fold_module {
    em_module base;
    bool fold;
    int64_t out[2], kernel[2], stride[2], padding[2], dilation[2];
} fold_module;

static em_tensor *fold_forward(em_module *m, em_tensor *const *in, int n)
{
    fold_module *f = (fold_module *)m;
    if (!nn_check_inputs(m->type->name, n, 1)) return NULL;
    if (f->fold) return em_col2im(in[0], f->out, f->kernel, f->dilation, f->padding, f->stride);
    return em_im2col(in[0], f->kernel, f->dilation, f->padding, f->stride);
}

static void fold_describe(const em_module *m, char *buf, size_t cap)
{
    const fold_module *f = (const fold_module *)m;
    char o[48], k[48], d[48], p[48], s[48];
    tuple_str(o, sizeof o, f->out, 2);
    tuple_str(k, sizeof k, f->kernel, 2);
    tuple_str(d, sizeof d, f->dilation, 2);
    tuple_str(p, sizeof p, f->padding, 2);
    tuple_str(s, sizeof s, f->stride, 2);
    if (f->fold)
        snprintf(buf, cap, "output_size=%s, kernel=%s, dilation=%s, padding=%s, stride=%s", o, k, d,
                 p, s);
    else
        snprintf(buf, cap, "kernel=%s, dilation=%s, padding=%s, stride=%s", k, d, p, s);
}

static const em_module_type fold_types[2] = {
    {"Unfold", fold_forward, NULL, fold_describe},
    {"Fold", fold_forward, NULL, fold_describe},
};

static em_module *fold_new(const char *fn, bool fold, em_fold_cfg c)
{
    if (!check_dims(fn, "kernel", c.kernel, 2, 1) || !check_dims(fn, "stride", c.stride, 2, 0) ||
        !check_dims(fn, "padding", c.padding, 2, 0) ||
        !check_dims(fn, "dilation", c.dilation, 2, 0) ||
        (fold && !check_dims(fn, "output_size", c.output_size, 2, 1)))
        return NULL;
    fold_module *f = em_module_alloc(sizeof *f, &fold_types[fold], EM_CPU);
    if (!f) return NULL;
    f->fold = fold;
    for (int d = 0; d < 2; d++) {
        f->out[d] = c.output_size[d];
        f->kernel[d] = c.kernel[d];
        f->stride[d] = c.stride[d] ? c.stride[d] : 1;
        f->padding[d] = c.padding[d];
        f->dilation[d] = c.dilation[d] ? c.dilation[d] : 1;
    }
    return &f->base;
}

em_module *em_unfold_new(em_fold_cfg cfg)
{
    return fold_new("em_unfold_new", false, cfg);
}

em_module *em_fold_new(em_fold_cfg cfg)
{
    return fold_new("em_fold_new", true, cfg);
}
