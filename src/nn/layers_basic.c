/* Basic modules: Sequential, Identity, Linear, activation modules, Flatten, Dropout. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn_impl.h"

/* ---- Sequential -------------------------------------------------------------------------- */

static em_act fused_act(const em_module *m);
static bool is_linear(const em_module *m);
static em_tensor *linear_run(em_module *m, em_tensor *x, em_act act);

/* Children in order; a Linear directly followed by a plain ReLU, GELU or SiLU module (this
 * file's parameter-free ones) runs as one em_matmul_bias_act, the activation applied in the
 * product's epilogue (the same values as the two modules one after the other). */
static em_tensor *seq_forward(em_module *m, em_tensor *const *in, int n)
{
    if (m->n_children == 0) return n == 1 ? tn_share(in[0]) : NULL;
    em_tensor *h = NULL;
    for (int i = 0; i < m->n_children; i++) {
        em_module *c = m->children[i].child;
        em_act act = EM_ACT_NONE;
        if (is_linear(c) && i + 1 < m->n_children) act = fused_act(m->children[i + 1].child);
        em_tensor *const *x = i == 0 ? in : &h;
        int nx = i == 0 ? n : 1;
        em_tensor *next;
        if (act == EM_ACT_NONE)
            next = em_forward_n(c, x, nx);
        else
            next = nn_check_inputs("Linear", nx, 1) ? linear_run(c, x[0], act) : NULL;
        em_release(h);
        h = next;
        if (act != EM_ACT_NONE) i++; /* the activation module ran in the epilogue */
        if (!h) break;
    }
    return h;
}

static const em_module_type seq_type = {"Sequential", seq_forward, NULL, NULL};

em_module *em_sequential_new(em_device dev)
{
    return em_module_alloc(sizeof(em_module), &seq_type, dev);
}

em_module *em_sequential_push(em_module *seq, em_module *m)
{
    if (!seq) {
        em_module_free(m);
        return NULL;
    }
    char name[16];
    snprintf(name, sizeof name, "%d", seq->n_children);
    return em_module_child(seq, name, m) ? seq : NULL;
}

em_module *em_sequential_of(em_device dev, em_module *const *mods, int n)
{
    if (n < 0 || (n > 0 && !mods)) {
        em_error(EM_ERR_INVALID_ARG, "em_sequential_of: n = %d with mods %s", n,
                 mods ? "given" : "NULL");
        return NULL;
    }
    em_module *seq = em_sequential_new(dev);
    bool ok = seq != NULL;
    /* every module given is taken: pushed while all goes well, freed once something failed */
    for (int i = 0; i < n; i++) {
        if (!mods[i]) {
            if (ok) em_error(EM_ERR_INVALID_ARG, "em_sequential: module %d of %d is NULL", i, n);
            ok = false;
        } else if (!ok) {
            em_module_free(mods[i]);
        } else {
            ok = em_sequential_push(seq, mods[i]) != NULL;
        }
    }
    if (!ok) {
        em_module_free(seq);
        return NULL;
    }
    return seq;
}

/* ---- Identity ---------------------------------------------------------------------------- */

static em_tensor *identity_forward(em_module *m, em_tensor *const *in, int n)
{
    if (!nn_check_inputs("Identity", n, 1)) return NULL;
    return tn_share(in[0]);
}

static const em_module_type identity_type = {"Identity", identity_forward, NULL, NULL};

em_module *em_identity_new(void)
{
    return em_module_alloc(sizeof(em_module), &identity_type, EM_CPU);
}

/* ---- Linear ------------------------------------------------------------------------------ */

typedef struct linear_module {
    em_module base;
    int64_t in, out;
    em_tensor *weight, *bias; /* borrowed from the registry */
} linear_module;

/* act(x W^T + b) in one op: the bias and the activation in the product's epilogue. */
static em_tensor *linear_run(em_module *m, em_tensor *x, em_act act)
{
    em_tensor *w = em_module_get(m, "weight"), *b = em_module_get(m, "bias");
    em_tensor *wt = em_transpose(w, 0, 1);
    em_tensor *y = em_matmul_bias_act(x, wt, b, act);
    em_release(wt);
    return y;
}

static em_tensor *linear_forward(em_module *m, em_tensor *const *in, int n)
{
    if (!nn_check_inputs("Linear", n, 1)) return NULL;
    return linear_run(m, in[0], EM_ACT_NONE);
}

static void linear_describe(const em_module *m, char *buf, size_t cap)
{
    const linear_module *l = (const linear_module *)m;
    snprintf(buf, cap, "in=%lld, out=%lld%s", (long long)l->in, (long long)l->out,
             em_module_get((em_module *)m, "bias") ? "" : ", bias=false");
}

static const em_module_type linear_type = {"Linear", linear_forward, NULL, linear_describe};

static bool is_linear(const em_module *m)
{
    return m->type == &linear_type;
}

em_module *em_linear_new_cfg(int64_t in, int64_t out, em_linear_cfg cfg, em_device dev)
{
    uint64_t mark = core_error_mark();
    if (in <= 0 || out <= 0) {
        em_error(EM_ERR_INVALID_ARG, "em_linear_new: sizes in=%lld out=%lld must be positive",
                 (long long)in, (long long)out);
        return NULL;
    }
    if (!nn_check_param("em_linear_new", EM_SHAPE(out, in), dev)) return NULL;
    linear_module *l = em_module_alloc(sizeof *l, &linear_type, dev);
    if (!l) return NULL;
    l->in = in;
    l->out = out;
    em_no_grad_begin();
    /* PyTorch: kaiming_uniform_(a=sqrt(5)) for the weight, U(-1/sqrt(in), 1/sqrt(in)) bias */
    em_module_param(&l->base, "weight",
                    em_init_kaiming_uniform(EM_SHAPE(out, in), sqrt(5.0), false, EM_NL_LEAKY_RELU,
                                            EM_F32, dev));
    if (!cfg.no_bias) {
        double bound = 1.0 / sqrt((double)in);
        em_module_param(&l->base, "bias",
                        em_rand_uniform(EM_SHAPE(out), -bound, bound, EM_F32, dev));
    }
    em_no_grad_end();
    if (core_failed_since(mark)) {
        em_module_free(&l->base);
        return NULL;
    }
    return &l->base;
}

em_module *em_linear_new(int64_t in, int64_t out, em_device dev)
{
    return em_linear_new_cfg(in, out, (em_linear_cfg){0}, dev);
}

/* ---- activations and shape modules --------------------------------------------------------- */

typedef enum act_kind {
    ACT_RELU,
    ACT_GELU,
    ACT_TANH,
    ACT_SIGMOID,
    ACT_SILU,
    ACT_LEAKY,
    ACT_SOFTMAX,
    ACT_FLATTEN,
    ACT_DROPOUT,
} act_kind;

typedef struct act_module {
    em_module base;
    act_kind kind;
    double p;
    int a, b;
} act_module;

static em_tensor *act_forward(em_module *m, em_tensor *const *in, int n)
{
    act_module *a = (act_module *)m;
    if (!nn_check_inputs(m->type->name, n, 1)) return NULL;
    em_tensor *x = in[0];
    switch (a->kind) {
    case ACT_RELU: return em_relu(x);
    case ACT_GELU: return em_gelu(x);
    case ACT_TANH: return em_tanh(x);
    case ACT_SIGMOID: return em_sigmoid(x);
    case ACT_SILU: return em_silu(x);
    case ACT_LEAKY: return em_leaky_relu(x, a->p);
    case ACT_SOFTMAX: return em_softmax(x, a->a);
    case ACT_FLATTEN: return em_flatten(x, a->a, a->b);
    case ACT_DROPOUT: return em_dropout(x, a->p, m->training);
    }
    return NULL;
}

static void act_describe(const em_module *m, char *buf, size_t cap)
{
    const act_module *a = (const act_module *)m;
    switch (a->kind) {
    case ACT_LEAKY: snprintf(buf, cap, "negative_slope=%g", a->p); break;
    case ACT_SOFTMAX: snprintf(buf, cap, "dim=%d", a->a); break;
    case ACT_FLATTEN: snprintf(buf, cap, "start_dim=%d, end_dim=%d", a->a, a->b); break;
    case ACT_DROPOUT: snprintf(buf, cap, "p=%g", a->p); break;
    default: buf[0] = '\0';
    }
}

static const em_module_type act_types[] = {
    {"ReLU", act_forward, NULL, act_describe},    {"GELU", act_forward, NULL, act_describe},
    {"Tanh", act_forward, NULL, act_describe},    {"Sigmoid", act_forward, NULL, act_describe},
    {"SiLU", act_forward, NULL, act_describe},    {"LeakyReLU", act_forward, NULL, act_describe},
    {"Softmax", act_forward, NULL, act_describe}, {"Flatten", act_forward, NULL, act_describe},
    {"Dropout", act_forward, NULL, act_describe},
};

/* The epilogue activation of a plain ReLU, GELU or SiLU module, else EM_ACT_NONE. */
static em_act fused_act(const em_module *m)
{
    if (m->type == &act_types[ACT_RELU]) return EM_ACT_RELU;
    if (m->type == &act_types[ACT_GELU]) return EM_ACT_GELU;
    if (m->type == &act_types[ACT_SILU]) return EM_ACT_SILU;
    return EM_ACT_NONE;
}

static em_module *act_new(act_kind k, double p, int a, int b)
{
    act_module *m = em_module_alloc(sizeof *m, &act_types[k], EM_CPU);
    if (!m) return NULL;
    m->kind = k;
    m->p = p;
    m->a = a;
    m->b = b;
    return &m->base;
}

em_module *em_relu_new(void)
{
    return act_new(ACT_RELU, 0, 0, 0);
}

em_module *em_gelu_new(void)
{
    return act_new(ACT_GELU, 0, 0, 0);
}

em_module *em_tanh_new(void)
{
    return act_new(ACT_TANH, 0, 0, 0);
}

em_module *em_sigmoid_new(void)
{
    return act_new(ACT_SIGMOID, 0, 0, 0);
}

em_module *em_silu_new(void)
{
    return act_new(ACT_SILU, 0, 0, 0);
}

em_module *em_leaky_relu_new(double slope)
{
    return act_new(ACT_LEAKY, slope, 0, 0);
}

em_module *em_softmax_new(int dim)
{
    return act_new(ACT_SOFTMAX, 0, dim, 0);
}

em_module *em_flatten_new(int start_dim, int end_dim)
{
    return act_new(ACT_FLATTEN, 0, start_dim, end_dim);
}

em_module *em_dropout_new(double p)
{
    if (!(p >= 0 && p <= 1)) {
        em_error(EM_ERR_INVALID_ARG, "em_dropout_new: probability %g is outside [0, 1]", p);
        return NULL;
    }
    return act_new(ACT_DROPOUT, p, 0, 0);
}
