/* Positional encodings: the sinusoidal table of "Attention is all you need" as a module, and
 * rotary position embedding (RoPE, half-split layout) as a differentiable function. */
#include <math.h>
#include <stdio.h>

#include "nn_impl.h"

em_tensor *em_sinusoidal_table(int64_t max_len, int64_t d_model, em_dtype dt, em_device dev)
{
    if (max_len <= 0 || d_model <= 0) {
        em_error(EM_ERR_INVALID_ARG,
                 "em_sinusoidal_table: max_len %lld and d_model %lld must be positive",
                 (long long)max_len, (long long)d_model);
        return NULL;
    }
    /* the result, and the f64 table it is computed in */
    if (!tn_check_alloc("em_sinusoidal_table", dt, EM_SHAPE(max_len, d_model).dims, 2, dev) ||
        !tn_check_alloc("em_sinusoidal_table", EM_F64, EM_SHAPE(max_len, d_model).dims, 2, EM_CPU))
        return NULL;
    size_t n = (size_t)(max_len * d_model);
    double *v = em_alloc(n * sizeof *v);
    if (!v) return NULL;
    for (int64_t p = 0; p < max_len; p++)
        for (int64_t i = 0; i < d_model; i++) {
            /* the pair (2j, 2j+1) shares the frequency 10000^(-2j/d), as PyTorch's tutorial */
            int64_t j2 = i - (i % 2);
            double ang = (double)p * exp((double)j2 * (-log(10000.0) / (double)d_model));
            v[p * d_model + i] = i % 2 == 0 ? sin(ang) : cos(ang);
        }
    em_tensor *t = em_from_data(v, EM_F64, EM_SHAPE(max_len, d_model), dt, dev);
    em_free(v);
    return t;
}

typedef struct posenc_module {
    em_module base;
    int64_t d_model, max_len;
    double dropout;
    bool seq_first;
} posenc_module;

static em_tensor *posenc_forward_n(em_module *m, em_tensor *const *in, int n)
{
    if (!nn_check_inputs("SinusoidalPositionalEncoding", n, 1)) return NULL;
    return em_sinusoidal_pe_forward(m, in[0], 0);
}

static void posenc_describe(const em_module *m, char *buf, size_t cap)
{
    const posenc_module *p = (const posenc_module *)m;
    snprintf(buf, cap, "d_model=%lld, max_len=%lld, dropout=%g", (long long)p->d_model,
             (long long)p->max_len, p->dropout);
}

static const em_module_type posenc_type = {"SinusoidalPositionalEncoding", posenc_forward_n, NULL,
                                           posenc_describe};

em_module *em_sinusoidal_pe_new(em_posenc_cfg cfg, em_device dev)
{
    uint64_t mark = core_error_mark();
    const char *fn = "em_sinusoidal_pe_new";
    int64_t max_len = cfg.max_len ? cfg.max_len : 5000;
    if (cfg.d_model <= 0 || max_len <= 0) {
        em_error(EM_ERR_INVALID_ARG, "%s: d_model %lld and max_len %lld must be positive", fn,
                 (long long)cfg.d_model, (long long)max_len);
        return NULL;
    }
    if (!(cfg.dropout >= 0 && cfg.dropout < 1)) {
        em_error(EM_ERR_INVALID_ARG, "%s: dropout %g is outside [0, 1)", fn, cfg.dropout);
        return NULL;
    }
    if (!nn_check_param(fn, EM_SHAPE(max_len, cfg.d_model), dev) ||
        !tn_check_alloc(fn, EM_F64, EM_SHAPE(max_len, cfg.d_model).dims, 2, EM_CPU))
        return NULL;
    posenc_module *p = em_module_alloc(sizeof *p, &posenc_type, dev);
    if (!p) return NULL;
    p->d_model = cfg.d_model;
    p->max_len = max_len;
    p->dropout = cfg.dropout;
    p->seq_first = cfg.seq_first;
    em_module_buffer(&p->base, "pe", em_sinusoidal_table(max_len, cfg.d_model, EM_F32, dev));
    if (core_failed_since(mark)) {
        em_module_free(&p->base);
        return NULL;
    }
    return &p->base;
}

em_tensor *em_sinusoidal_pe_forward(em_module *m, const em_tensor *x, int64_t offset)
{
    const char *fn = "em_sinusoidal_pe_forward";
    if (!tn_check_ptr(fn, m, "m") || !tn_check_ptr(fn, x, "x")) return NULL;
    if (m->type != &posenc_type) {
        em_error(EM_ERR_INVALID_ARG, "%s: module is a %s, not SinusoidalPositionalEncoding", fn,
                 m->type ? m->type->name : "?");
        return NULL;
    }
    posenc_module *p = (posenc_module *)m;
    int rank = em_tensor_rank(x);
    char buf[64];
    /* [N, L, E], [L, N, E] (seq_first) or unbatched [L, E] */
    int ldim = rank == 3 && !p->seq_first ? 1 : 0;
    if ((rank != 2 && rank != 3) || em_tensor_dim(x, -1) != p->d_model) {
        em_error(EM_ERR_SHAPE, "%s: input %s must be [N, L, %lld], [L, N, %lld] or [L, %lld]", fn,
                 em_shape_str(em_tensor_shape(x), buf, sizeof buf), (long long)p->d_model,
                 (long long)p->d_model, (long long)p->d_model);
        return NULL;
    }
    int64_t L = em_tensor_dim(x, ldim);
    if (offset < 0 || offset > p->max_len - L) { /* offset + L > max_len, not overflowing */
        em_error(EM_ERR_INDEX, "%s: %lld positions from %lld exceed max_len %lld", fn, (long long)L,
                 (long long)offset, (long long)p->max_len);
        return NULL;
    }
    em_scope_begin();
    em_tensor *pe = em_narrow(em_module_get(m, "pe"), 0, offset, L); /* [L, E] */
    if (rank == 3 && p->seq_first) pe = em_unsqueeze(pe, 1);
    if (pe && em_tensor_dtype(pe) != em_tensor_dtype(x)) pe = em_cast(pe, em_tensor_dtype(x));
    em_tensor *y = em_dropout(em_add(x, pe), p->dropout, m->training);
    if (y) em_keep(y);
    em_scope_end();
    return y;
}

em_tensor *em_rope(const em_tensor *x, int64_t offset, double base)
{
    const char *fn = "em_rope";
    if (!tn_check_ptr(fn, x, "x")) return NULL;
    char buf[64];
    int rank = em_tensor_rank(x);
    if (rank < 2 || em_tensor_dim(x, -1) % 2 != 0 || !em_dtype_is_float(em_tensor_dtype(x))) {
        em_error(EM_ERR_SHAPE, "%s: x %s (%s) must be a float [..., L, D] with D even", fn,
                 em_shape_str(em_tensor_shape(x), buf, sizeof buf),
                 em_dtype_name(em_tensor_dtype(x)));
        return NULL;
    }
    if (offset < 0) {
        em_error(EM_ERR_INVALID_ARG, "%s: position offset %lld is negative", fn, (long long)offset);
        return NULL;
    }
    if (base <= 0) base = 10000.0;
    int64_t L = em_tensor_dim(x, -2), D = em_tensor_dim(x, -1), half = D / 2;
    size_t n = (size_t)(L * D);
    double *c = em_alloc(2 * n * sizeof *c);
    if (!c) return NULL;
    double *s = c + n;
    for (int64_t p = 0; p < L; p++)
        for (int64_t i = 0; i < D; i++) {
            int64_t j = i % half;
            double ang = ((double)p + (double)offset) * pow(base, -2.0 * (double)j / (double)D);
            c[p * D + i] = cos(ang);
            s[p * D + i] = sin(ang);
        }
    em_dtype dt = em_tensor_dtype(x);
    em_device dev = em_tensor_device(x);
    em_scope_begin();
    em_tensor *cs = em_from_data(c, EM_F64, EM_SHAPE(L, D), dt, dev);
    em_tensor *sn = em_from_data(s, EM_F64, EM_SHAPE(L, D), dt, dev);
    em_free(c);
    /* rotate_half: [x1, x2] -> [-x2, x1] */
    em_tensor *halves[2] = {em_neg(em_narrow(x, -1, half, half)), em_narrow(x, -1, 0, half)};
    em_tensor *rot = halves[0] && halves[1] ? em_cat(halves, 2, -1) : NULL;
    em_tensor *y = em_add(em_mul(x, cs), em_mul(rot, sn));
    if (y) em_keep(y);
    em_scope_end();
    return y;
}
