/* Recurrent layers (RNN, LSTM, GRU) as a loop over time of differentiable ops, with PyTorch's
 * parameter names, gate order, initialisation and state layout. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn_impl.h"

typedef enum rnn_kind { RNN_PLAIN = 0, RNN_LSTM = 1, RNN_GRU = 2 } rnn_kind;

typedef struct rnn_module {
    em_module base;
    em_rnn_cfg cfg; /* defaults resolved */
    rnn_kind kind;
    int64_t gates;
} rnn_module;

static em_tensor *rnn_forward_n(em_module *m, em_tensor *const *in, int n);

static void rnn_describe(const em_module *m, char *buf, size_t cap)
{
    const rnn_module *r = (const rnn_module *)m;
    const em_rnn_cfg *c = &r->cfg;
    snprintf(buf, cap, "%lld, %lld, num_layers=%lld%s%s%s%s", (long long)c->input_size,
             (long long)c->hidden_size, (long long)c->num_layers,
             r->kind == RNN_PLAIN && c->nonlinearity == EM_RNN_RELU ? ", nonlinearity=relu" : "",
             c->no_bias ? ", bias=false" : "", c->bidirectional ? ", bidirectional" : "",
             c->seq_first ? ", seq_first" : "");
}

static const em_module_type rnn_types[3] = {
    {"RNN", rnn_forward_n, NULL, rnn_describe},
    {"LSTM", rnn_forward_n, NULL, rnn_describe},
    {"GRU", rnn_forward_n, NULL, rnn_describe},
};

static const char *ctor_names[3] = {"em_rnn_new", "em_lstm_new", "em_gru_new"};

static em_module *rnn_new(rnn_kind kind, em_rnn_cfg cfg, em_device dev)
{
    uint64_t mark = core_error_mark();
    const char *fn = ctor_names[kind];
    if (cfg.num_layers == 0) cfg.num_layers = 1;
    if (cfg.input_size <= 0 || cfg.hidden_size <= 0 || cfg.num_layers < 1) {
        em_error(EM_ERR_INVALID_ARG,
                 "%s: input_size %lld, hidden_size %lld and num_layers %lld must be positive", fn,
                 (long long)cfg.input_size, (long long)cfg.hidden_size, (long long)cfg.num_layers);
        return NULL;
    }
    if (!(cfg.dropout >= 0 && cfg.dropout < 1)) {
        em_error(EM_ERR_INVALID_ARG, "%s: dropout %g is outside [0, 1)", fn, cfg.dropout);
        return NULL;
    }
    if (cfg.nonlinearity != EM_RNN_TANH && cfg.nonlinearity != EM_RNN_RELU) {
        em_error(EM_ERR_INVALID_ARG, "%s: unknown nonlinearity %d (EM_RNN_TANH or EM_RNN_RELU)", fn,
                 (int)cfg.nonlinearity);
        return NULL;
    }
    if (kind != RNN_PLAIN && cfg.nonlinearity != EM_RNN_TANH) {
        em_error(EM_ERR_INVALID_ARG, "%s: nonlinearity applies to em_rnn_new only", fn);
        return NULL;
    }
    /* every layer's weights [G H, in], [G H, H] and biases, checked before any is made */
    int64_t gates = kind == RNN_LSTM  ? 4
                    : kind == RNN_GRU ? 3
                                      : 1,
            gh = 0, hd = 0, widest = 0, ldirs = 0, all = 0;
    bool fits = core_mul_ok(gates, cfg.hidden_size, &gh) &&
                core_mul_ok(cfg.hidden_size, cfg.bidirectional ? 2 : 1, &hd) &&
                core_add_ok(cfg.input_size > hd ? cfg.input_size : hd, cfg.hidden_size, &widest) &&
                core_add_ok(widest, 2, &widest) &&
                core_mul_ok(cfg.num_layers, cfg.bidirectional ? 2 : 1, &ldirs);
    if (!fits || !nn_check_param(fn, EM_SHAPE(gh, widest), dev) || !core_mul_ok(ldirs, gh, &all) ||
        !tn_check_work(fn, "its parameters", EM_F32, EM_SHAPE(all, widest).dims, 2, dev)) {
        if (!fits)
            em_error(EM_ERR_INVALID_ARG, "%s: input_size %lld and hidden_size %lld are too large",
                     fn, (long long)cfg.input_size, (long long)cfg.hidden_size);
        else if (!em_failed())
            em_error(EM_ERR_OOM, "%s: %lld layers of hidden_size %lld are too many", fn,
                     (long long)cfg.num_layers, (long long)cfg.hidden_size);
        return NULL;
    }
    rnn_module *r = em_module_alloc(sizeof *r, &rnn_types[kind], dev);
    if (!r) return NULL;
    r->cfg = cfg;
    r->kind = kind;
    r->gates = kind == RNN_LSTM ? 4 : kind == RNN_GRU ? 3 : 1;
    int64_t H = cfg.hidden_size, GH = r->gates * H, dirs = cfg.bidirectional ? 2 : 1;
    double k = 1.0 / sqrt((double)H);
    em_no_grad_begin();
    for (int64_t l = 0; l < cfg.num_layers; l++)
        for (int64_t d = 0; d < dirs; d++) {
            int64_t in = l == 0 ? cfg.input_size : H * dirs;
            const char *sfx = d ? "_reverse" : "";
            char name[48];
            snprintf(name, sizeof name, "weight_ih_l%lld%s", (long long)l, sfx);
            em_module_param(&r->base, name, em_rand_uniform(EM_SHAPE(GH, in), -k, k, EM_F32, dev));
            snprintf(name, sizeof name, "weight_hh_l%lld%s", (long long)l, sfx);
            em_module_param(&r->base, name, em_rand_uniform(EM_SHAPE(GH, H), -k, k, EM_F32, dev));
            if (cfg.no_bias) continue;
            snprintf(name, sizeof name, "bias_ih_l%lld%s", (long long)l, sfx);
            em_module_param(&r->base, name, em_rand_uniform(EM_SHAPE(GH), -k, k, EM_F32, dev));
            snprintf(name, sizeof name, "bias_hh_l%lld%s", (long long)l, sfx);
            em_module_param(&r->base, name, em_rand_uniform(EM_SHAPE(GH), -k, k, EM_F32, dev));
        }
    em_no_grad_end();
    if (core_failed_since(mark)) {
        em_module_free(&r->base);
        return NULL;
    }
    return &r->base;
}

em_module *em_rnn_new(em_rnn_cfg cfg, em_device dev)
{
    return rnn_new(RNN_PLAIN, cfg, dev);
}

em_module *em_lstm_new(em_rnn_cfg cfg, em_device dev)
{
    return rnn_new(RNN_LSTM, cfg, dev);
}

em_module *em_gru_new(em_rnn_cfg cfg, em_device dev)
{
    return rnn_new(RNN_GRU, cfg, dev);
}

static em_tensor *param(em_module *m, const char *kind, int64_t l, bool rev)
{
    char name[48];
    snprintf(name, sizeof name, "%s_l%lld%s", kind, (long long)l, rev ? "_reverse" : "");
    return em_module_get(m, name);
}

/* x [..., in] -> x w^T (+ b) */
static em_tensor *affine(const em_tensor *x, const em_tensor *w, const em_tensor *b)
{
    em_tensor *y = em_matmul(x, em_transpose(w, 0, 1));
    return b ? em_add(y, b) : y;
}

/* One time step. gx = W_ih x + b_ih, h/c the previous states [N, H]; new states to *h, *c. */
static void cell(const rnn_module *r, const em_tensor *gx, const em_tensor *w_hh,
                 const em_tensor *b_hh, em_tensor **h, em_tensor **c)
{
    int64_t H = r->cfg.hidden_size;
    em_tensor *gh = affine(*h, w_hh, b_hh);
    if (r->kind == RNN_PLAIN) {
        em_tensor *a = em_add(gx, gh);
        *h = r->cfg.nonlinearity == EM_RNN_RELU ? em_relu(a) : em_tanh(a);
    } else if (r->kind == RNN_LSTM) {
        em_tensor *g = em_add(gx, gh);
        em_tensor *i = em_sigmoid(em_narrow(g, -1, 0, H));
        em_tensor *f = em_sigmoid(em_narrow(g, -1, H, H));
        em_tensor *gg = em_tanh(em_narrow(g, -1, 2 * H, H));
        em_tensor *o = em_sigmoid(em_narrow(g, -1, 3 * H, H));
        *c = em_add(em_mul(f, *c), em_mul(i, gg));
        *h = em_mul(o, em_tanh(*c));
    } else {
        /* r, z from both sides; n = tanh(W_in x + b_in + r * (W_hn h + b_hn)) */
        em_tensor *rg = em_sigmoid(em_add(em_narrow(gx, -1, 0, H), em_narrow(gh, -1, 0, H)));
        em_tensor *z = em_sigmoid(em_add(em_narrow(gx, -1, H, H), em_narrow(gh, -1, H, H)));
        em_tensor *n =
            em_tanh(em_add(em_narrow(gx, -1, 2 * H, H), em_mul(rg, em_narrow(gh, -1, 2 * H, H))));
        /* (1 - z) * n + z * h = n + z * (h - n) */
        *h = em_add(n, em_mul(z, em_sub(*h, n)));
    }
}

static bool check_state(const char *fn, const char *what, const em_tensor *s, em_shape want,
                        em_dtype dt)
{
    char b1[64], b2[64];
    if (!s) return true;
    if (!em_shape_equal(em_tensor_shape(s), want) || em_tensor_dtype(s) != dt) {
        em_error(EM_ERR_SHAPE, "%s: %s has shape %s (%s), expected %s (%s)", fn, what,
                 em_shape_str(em_tensor_shape(s), b1, sizeof b1), em_dtype_name(em_tensor_dtype(s)),
                 em_shape_str(want, b2, sizeof b2), em_dtype_name(dt));
        return false;
    }
    return true;
}

em_tensor *em_rnn_forward(em_module *m, const em_tensor *x, const em_tensor *h0,
                          const em_tensor *c0, em_tensor **h_n, em_tensor **c_n)
{
    const char *fn = "em_rnn_forward";
    if (!tn_check_ptr(fn, m, "m") || !tn_check_ptr(fn, x, "x")) return NULL;
    if (m->type != &rnn_types[0] && m->type != &rnn_types[1] && m->type != &rnn_types[2]) {
        em_error(EM_ERR_INVALID_ARG, "%s: module is a %s, not an RNN, LSTM or GRU", fn,
                 m->type ? m->type->name : "?");
        return NULL;
    }
    rnn_module *r = (rnn_module *)m;
    const em_rnn_cfg *cfg = &r->cfg;
    char buf[64];
    int rank = em_tensor_rank(x);
    if ((rank != 2 && rank != 3) || em_tensor_dim(x, -1) != cfg->input_size ||
        em_tensor_dim(x, -2) == 0 || !em_dtype_is_float(em_tensor_dtype(x))) {
        em_error(EM_ERR_SHAPE,
                 "%s: input %s (%s) must be a float %s with input_size %lld and a non-empty "
                 "sequence",
                 fn, em_shape_str(em_tensor_shape(x), buf, sizeof buf),
                 em_dtype_name(em_tensor_dtype(x)), cfg->seq_first ? "[T, N, I]" : "[N, T, I]",
                 (long long)cfg->input_size);
        return NULL;
    }
    if (c0 && r->kind != RNN_LSTM) {
        em_error(EM_ERR_INVALID_ARG, "%s: c0 is for an LSTM, not a %s", fn, m->type->name);
        return NULL;
    }
    bool unbatched = rank == 2;
    int64_t dirs = cfg->bidirectional ? 2 : 1, LD = cfg->num_layers * dirs, H = cfg->hidden_size;
    int64_t N = unbatched ? 1 : em_tensor_dim(x, cfg->seq_first ? 1 : 0);
    int64_t T = em_tensor_dim(x, unbatched ? 0 : cfg->seq_first ? 0 : 1);
    em_dtype dt = em_tensor_dtype(x);
    em_shape sshape = unbatched ? EM_SHAPE(LD, H) : EM_SHAPE(LD, N, H);
    if (!check_state(fn, "h0", h0, sshape, dt) || !check_state(fn, "c0", c0, sshape, dt))
        return NULL;
    em_tensor **steps = em_alloc((size_t)(T + 2 * LD) * sizeof *steps);
    if (!steps) return NULL;
    em_tensor **hs = steps + T, **cs = hs + LD;
    em_scope_begin();
    em_tensor *in = (em_tensor *)x; /* [N, T, I] */
    if (unbatched) {
        in = em_unsqueeze(in, 0);
        if (h0) h0 = em_unsqueeze(h0, 1);
        if (c0) c0 = em_unsqueeze(c0, 1);
    } else if (cfg->seq_first) {
        in = em_transpose(in, 0, 1);
    }
    em_tensor *zero = em_zeros(EM_SHAPE(N, H), dt, em_tensor_device(x));
    for (int64_t l = 0; l < cfg->num_layers && !tn_scope_failed(); l++) {
        em_tensor *outs[2] = {NULL, NULL};
        for (int64_t d = 0; d < dirs && !tn_scope_failed(); d++) {
            int64_t idx = l * dirs + d;
            em_tensor *xw = affine(in, param(m, "weight_ih", l, d), param(m, "bias_ih", l, d));
            em_tensor *w_hh = param(m, "weight_hh", l, d), *b_hh = param(m, "bias_hh", l, d);
            em_tensor *h = h0 ? em_select(h0, 0, idx) : zero;
            em_tensor *c = c0 ? em_select(c0, 0, idx) : zero;
            for (int64_t s = 0; s < T && !tn_scope_failed(); s++) {
                int64_t t = d ? T - 1 - s : s;
                cell(r, em_select(xw, 1, t), w_hh, b_hh, &h, &c);
                steps[t] = h;
            }
            if (tn_scope_failed()) break;
            outs[d] = em_stack(steps, (int)T, 1); /* [N, T, H] */
            hs[idx] = h;
            cs[idx] = c;
        }
        if (tn_scope_failed()) break;
        in = dirs == 2 ? em_cat(outs, 2, -1) : outs[0];
        if (l + 1 < cfg->num_layers) in = em_dropout(in, cfg->dropout, m->training);
    }
    em_tensor *out = NULL, *hn = NULL, *cn = NULL;
    if (!tn_scope_failed()) {
        out = unbatched ? em_squeeze(in, EM_AXES(0)) : cfg->seq_first ? em_transpose(in, 0, 1) : in;
        if (h_n) hn = em_stack(hs, (int)LD, 0);
        if (c_n && r->kind == RNN_LSTM) cn = em_stack(cs, (int)LD, 0);
        if (unbatched) {
            if (hn) hn = em_squeeze(hn, EM_AXES(1));
            if (cn) cn = em_squeeze(cn, EM_AXES(1));
        }
    }
    bool ok = out && !tn_scope_failed();
    if (ok) {
        em_keep(out);
        if (h_n) *h_n = em_keep(hn);
        if (c_n) *c_n = cn ? em_keep(cn) : NULL;
    }
    em_scope_end();
    em_free(steps);
    return ok ? out : NULL;
}

static em_tensor *rnn_forward_n(em_module *m, em_tensor *const *in, int n)
{
    if (n < 1 || n > 3) {
        em_error(EM_ERR_INVALID_ARG, "em_forward: %s takes 1 to 3 inputs (x, h0, c0), got %d",
                 m->type->name, n);
        return NULL;
    }
    return em_rnn_forward(m, in[0], n > 1 ? in[1] : NULL, n > 2 ? in[2] : NULL, NULL, NULL);
}
