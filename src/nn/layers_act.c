/* Activation layers beyond nn.h's basic ones: the parameter-free activations as modules,
 * PReLU (learned slope), GLU and SwiGLU (gated). */
#include <math.h>
#include <stdio.h>

#include "nn_impl.h"

/* ---- parameter-free activations ---------------------------------------------------------- */

typedef enum act_kind {
    ACT_RELU6,
    ACT_ELU,
    ACT_SELU,
    ACT_CELU,
    ACT_GELU_TANH,
    ACT_LOG_SIGMOID,
    ACT_HARD_SIGMOID,
    ACT_HARD_SWISH,
    ACT_MISH,
    ACT_SOFTPLUS,
    ACT_SOFTSIGN,
    ACT_HARDTANH,
    ACT_TANHSHRINK,
    ACT_LOG_SOFTMAX,
    ACT_SOFTMIN,
    ACT_GLU,
    ACT_COUNT,
} act_kind;

typedef struct act_module {
    em_module base;
    act_kind kind;
    double a, b;
    int dim;
} act_module;

static em_tensor *glu(const em_tensor *x, int dim)
{
    int r = em_tensor_rank(x);
    int d = dim < 0 ? dim + r : dim;
    if (d < 0 || d >= r || em_tensor_dim(x, d) % 2) {
        char sb[96];
        em_error(EM_ERR_SHAPE, "em_forward: GLU needs an even size along dim %d, got shape %s", dim,
                 em_shape_str(em_tensor_shape(x), sb, sizeof sb));
        return NULL;
    }
    int64_t h = em_tensor_dim(x, d) / 2;
    em_tensor *a = em_narrow(x, d, 0, h), *b = em_narrow(x, d, h, h);
    em_tensor *s = em_sigmoid(b);
    em_tensor *y = em_mul(a, s);
    em_release(a);
    em_release(b);
    em_release(s);
    return y;
}

static em_tensor *act_forward(em_module *m, em_tensor *const *in, int n)
{
    act_module *a = (act_module *)m;
    if (!nn_check_inputs(m->type->name, n, 1) || !tn_check_ptr("em_forward", in[0], "x"))
        return NULL;
    em_tensor *x = in[0];
    switch (a->kind) {
    case ACT_RELU6: return em_relu6(x);
    case ACT_ELU: return em_elu(x, a->a);
    case ACT_SELU: return em_selu(x);
    case ACT_CELU: return em_celu(x, a->a);
    case ACT_GELU_TANH: return em_gelu_tanh(x);
    case ACT_LOG_SIGMOID: return em_log_sigmoid(x);
    case ACT_HARD_SIGMOID: return em_hard_sigmoid(x);
    case ACT_HARD_SWISH: return em_hard_swish(x);
    case ACT_MISH: return em_mish(x);
    case ACT_SOFTPLUS: return em_softplus(x, a->a, a->b);
    case ACT_SOFTSIGN: return em_softsign(x);
    case ACT_HARDTANH: return em_hardtanh(x, a->a, a->b);
    case ACT_TANHSHRINK: {
        em_tensor *t = em_tanh(x);
        em_tensor *y = em_sub(x, t);
        em_release(t);
        return y;
    }
    case ACT_LOG_SOFTMAX: return em_log_softmax(x, a->dim);
    case ACT_SOFTMIN: {
        em_tensor *nx = em_neg(x);
        em_tensor *y = em_softmax(nx, a->dim);
        em_release(nx);
        return y;
    }
    case ACT_GLU: return glu(x, a->dim);
    case ACT_COUNT: break;
    }
    return NULL;
}

static void act_describe(const em_module *m, char *buf, size_t cap)
{
    const act_module *a = (const act_module *)m;
    switch (a->kind) {
    case ACT_ELU:
    case ACT_CELU: snprintf(buf, cap, "alpha=%g", a->a); break;
    case ACT_SOFTPLUS: snprintf(buf, cap, "beta=%g, threshold=%g", a->a, a->b); break;
    case ACT_HARDTANH: snprintf(buf, cap, "min_val=%g, max_val=%g", a->a, a->b); break;
    case ACT_GELU_TANH: snprintf(buf, cap, "approximate=tanh"); break;
    case ACT_LOG_SOFTMAX:
    case ACT_SOFTMIN:
    case ACT_GLU: snprintf(buf, cap, "dim=%d", a->dim); break;
    default: buf[0] = '\0';
    }
}

static const em_module_type act_types[ACT_COUNT] = {
    {"ReLU6", act_forward, NULL, act_describe},
    {"ELU", act_forward, NULL, act_describe},
    {"SELU", act_forward, NULL, act_describe},
    {"CELU", act_forward, NULL, act_describe},
    {"GELU", act_forward, NULL, act_describe},
    {"LogSigmoid", act_forward, NULL, act_describe},
    {"Hardsigmoid", act_forward, NULL, act_describe},
    {"Hardswish", act_forward, NULL, act_describe},
    {"Mish", act_forward, NULL, act_describe},
    {"Softplus", act_forward, NULL, act_describe},
    {"Softsign", act_forward, NULL, act_describe},
    {"Hardtanh", act_forward, NULL, act_describe},
    {"Tanhshrink", act_forward, NULL, act_describe},
    {"LogSoftmax", act_forward, NULL, act_describe},
    {"Softmin", act_forward, NULL, act_describe},
    {"GLU", act_forward, NULL, act_describe},
};

static em_module *act_new(act_kind k, double a, double b, int dim)
{
    act_module *m = em_module_alloc(sizeof *m, &act_types[k], EM_CPU);
    if (!m) return NULL;
    m->kind = k;
    m->a = a;
    m->b = b;
    m->dim = dim;
    return &m->base;
}

em_module *em_relu6_new(void)
{
    return act_new(ACT_RELU6, 0, 0, 0);
}

em_module *em_elu_new(double alpha)
{
    return act_new(ACT_ELU, alpha, 0, 0);
}

em_module *em_selu_new(void)
{
    return act_new(ACT_SELU, 0, 0, 0);
}

em_module *em_celu_new(double alpha)
{
    if (alpha == 0 || isnan(alpha)) {
        em_error(EM_ERR_INVALID_ARG, "em_celu_new: alpha %g must be non-zero", alpha);
        return NULL;
    }
    return act_new(ACT_CELU, alpha, 0, 0);
}

em_module *em_gelu_tanh_new(void)
{
    return act_new(ACT_GELU_TANH, 0, 0, 0);
}

em_module *em_log_sigmoid_new(void)
{
    return act_new(ACT_LOG_SIGMOID, 0, 0, 0);
}

em_module *em_hard_sigmoid_new(void)
{
    return act_new(ACT_HARD_SIGMOID, 0, 0, 0);
}

em_module *em_hard_swish_new(void)
{
    return act_new(ACT_HARD_SWISH, 0, 0, 0);
}

em_module *em_mish_new(void)
{
    return act_new(ACT_MISH, 0, 0, 0);
}

em_module *em_softplus_new(double beta, double threshold)
{
    if (!(beta > 0)) {
        em_error(EM_ERR_INVALID_ARG, "em_softplus_new: beta %g must be positive", beta);
        return NULL;
    }
    return act_new(ACT_SOFTPLUS, beta, threshold, 0);
}

em_module *em_softsign_new(void)
{
    return act_new(ACT_SOFTSIGN, 0, 0, 0);
}

em_module *em_hardtanh_new(double min_val, double max_val)
{
    if (!(min_val <= max_val)) {
        em_error(EM_ERR_INVALID_ARG, "em_hardtanh_new: min_val %g is above max_val %g", min_val,
                 max_val);
        return NULL;
    }
    return act_new(ACT_HARDTANH, min_val, max_val, 0);
}

em_module *em_tanhshrink_new(void)
{
    return act_new(ACT_TANHSHRINK, 0, 0, 0);
}

em_module *em_log_softmax_new(int dim)
{
    return act_new(ACT_LOG_SOFTMAX, 0, 0, dim);
}

em_module *em_softmin_new(int dim)
{
    return act_new(ACT_SOFTMIN, 0, 0, dim);
}

em_module *em_glu_new(int dim)
{
    return act_new(ACT_GLU, 0, 0, dim);
}

/* ---- PReLU ------------------------------------------------------------------------------- */

typedef struct prelu_module {
    em_module base;
    int64_t num;
} prelu_module;

static em_tensor *prelu_forward(em_module *m, em_tensor *const *in, int n)
{
    prelu_module *p = (prelu_module *)m;
    if (!nn_check_inputs("PReLU", n, 1) || !tn_check_ptr("em_forward", in[0], "x")) return NULL;
    em_tensor *x = in[0];
    int r = em_tensor_rank(x);
    int cdim = r >= 2 ? 1 : 0;
    if (p->num > 1 && (r == 0 || em_tensor_dim(x, cdim) != p->num)) {
        char sb[96];
        em_error(EM_ERR_SHAPE, "em_forward: PReLU(%lld) expects %lld channels in dim %d, got %s",
                 (long long)p->num, (long long)p->num, cdim,
                 em_shape_str(em_tensor_shape(x), sb, sizeof sb));
        return NULL;
    }
    em_scope_begin();
    em_tensor *w = em_module_get(m, "weight");
    if (p->num > 1 && r > cdim + 1) {
        em_shape s = {.rank = r - cdim};
        s.dims[0] = p->num;
        for (int d = 1; d < s.rank; d++) s.dims[d] = 1;
        w = em_reshape(w, s);
    }
    /* x > 0 ? x : w * x; the gradient at 0 goes to the w * x branch, as PyTorch's */
    em_tensor *y = em_where(em_gt_scalar(x, 0), x, em_mul(w, x));
    em_keep(y);
    em_scope_end();
    return y;
}

static void prelu_describe(const em_module *m, char *buf, size_t cap)
{
    snprintf(buf, cap, "num_parameters=%lld", (long long)((const prelu_module *)m)->num);
}

static const em_module_type prelu_type = {"PReLU", prelu_forward, NULL, prelu_describe};

em_module *em_prelu_new(int64_t num_parameters, em_device dev)
{
    uint64_t mark = core_error_mark();
    if (num_parameters < 0) {
        em_error(EM_ERR_INVALID_ARG, "em_prelu_new: num_parameters %lld must be positive",
                 (long long)num_parameters);
        return NULL;
    }
    if (!nn_check_param("em_prelu_new", EM_SHAPE(num_parameters), dev)) return NULL;
    prelu_module *p = em_module_alloc(sizeof *p, &prelu_type, dev);
    if (!p) return NULL;
    p->num = num_parameters ? num_parameters : 1;
    em_no_grad_begin();
    em_module_param(&p->base, "weight", em_full(EM_SHAPE(p->num), 0.25, EM_F32, dev));
    em_no_grad_end();
    if (core_failed_since(mark)) {
        em_module_free(&p->base);
        return NULL;
    }
    return &p->base;
}

/* ---- SwiGLU ------------------------------------------------------------------------------ */

typedef struct swiglu_module {
    em_module base;
    em_swiglu_cfg cfg;
} swiglu_module;

static em_tensor *swiglu_forward(em_module *m, em_tensor *const *in, int n)
{
    if (!nn_check_inputs("SwiGLU", n, 1)) return NULL;
    em_scope_begin();
    em_tensor *a = em_forward(em_module_find(m, "w1"), in[0]);
    em_tensor *b = em_forward(em_module_find(m, "w2"), in[0]);
    em_tensor *y = em_mul(em_silu(a), b);
    em_keep(y);
    em_scope_end();
    return y;
}

static void swiglu_describe(const em_module *m, char *buf, size_t cap)
{
    const swiglu_module *s = (const swiglu_module *)m;
    snprintf(buf, cap, "d_in=%lld, d_out=%lld%s", (long long)s->cfg.d_in, (long long)s->cfg.d_out,
             s->cfg.bias ? ", bias=true" : "");
}

static const em_module_type swiglu_type = {"SwiGLU", swiglu_forward, NULL, swiglu_describe};

em_module *em_swiglu_new(em_swiglu_cfg cfg, em_device dev)
{
    uint64_t mark = core_error_mark();
    if (cfg.d_in <= 0 || cfg.d_out <= 0) {
        em_error(EM_ERR_INVALID_ARG, "em_swiglu_new: sizes d_in=%lld d_out=%lld must be positive",
                 (long long)cfg.d_in, (long long)cfg.d_out);
        return NULL;
    }
    if (!nn_check_param("em_swiglu_new", EM_SHAPE(cfg.d_out, cfg.d_in), dev)) return NULL;
    swiglu_module *s = em_module_alloc(sizeof *s, &swiglu_type, dev);
    if (!s) return NULL;
    s->cfg = cfg;
    em_linear_cfg lc = {.no_bias = !cfg.bias};
    em_module_child(&s->base, "w1", em_linear_new_cfg(cfg.d_in, cfg.d_out, lc, dev));
    em_module_child(&s->base, "w2", em_linear_new_cfg(cfg.d_in, cfg.d_out, lc, dev));
    if (core_failed_since(mark) || s->base.n_children != 2) {
        em_module_free(&s->base);
        return NULL;
    }
    return &s->base;
}
