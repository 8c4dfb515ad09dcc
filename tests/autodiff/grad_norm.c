/* Gradient checks for normalisation (layer, RMS, group, batch), scaled dot-product attention and
 * dropout: every optional input and parameter variant, non-contiguous layouts, batch broadcasting
 * and masks for attention, second order where cheap, the exact dropout mask, f32 gradients. */
#include "grad.h"

/* ---- layer, RMS, group and batch norm ---------------------------------------------------- */

enum { K_LAYER, K_RMS, K_GROUP, K_BATCH };

typedef struct norm_case {
    int kind;
    int64_t arg; /* n_norm or groups */
    bool w, b;
    double eps;
} norm_case;

/* Inputs: x, then (batch norm) mean, var, then the optional weight and bias. */
static em_tensor *f_norm(em_tensor *const *in, int n, void *ctx)
{
    (void)n;
    const norm_case *c = ctx;
    int k = c->kind == K_BATCH ? 3 : 1;
    em_tensor *w = c->w ? in[k++] : NULL;
    em_tensor *b = c->b ? in[k++] : NULL;
    switch (c->kind) {
    case K_LAYER: return em_layer_norm(in[0], (int)c->arg, w, b, c->eps);
    case K_RMS: return em_rms_norm(in[0], (int)c->arg, w, c->eps);
    case K_GROUP: return em_group_norm(in[0], c->arg, w, b, c->eps);
    default: return em_batch_norm(in[0], in[1], in[2], w, b, c->eps);
    }
}

static void check_norm(const char *name, norm_case c, em_shape xs, bool second)
{
    static const char *kinds[] = {"layer_norm", "rms_norm", "group_norm", "batch_norm"};
    em_shape ps; /* parameter shape */
    if (c.kind == K_LAYER || c.kind == K_RMS) {
        ps.rank = (int)c.arg;
        for (int d = 0; d < ps.rank; d++) ps.dims[d] = xs.dims[xs.rank - ps.rank + d];
    } else
        ps = EM_SHAPE(xs.dims[1]);
    for (int l = 0; l < H_LAYOUT_COUNT; l++) {
        em_scope_begin();
        em_tensor *in[5];
        int n = 0;
        in[n++] = g_in(xs, (h_layout)l, -2, 2);
        if (c.kind == K_BATCH) {
            in[n++] = g_in(ps, H_CONTIG, -1, 1);
            in[n++] = g_in(ps, (h_layout)l, 0.5, 2); /* variances */
        }
        if (c.w) in[n++] = g_in(ps, (h_layout)l, 0.5, 1.5);
        if (c.b) in[n++] = g_in(ps, H_CONTIG, -1, 1);
        char what[96];
        snprintf(what, sizeof what, "%s %s layout %d", kinds[c.kind], name, l);
        h_gradcheck(what, f_norm, &c, in, n, NULL, 0, 0);
        if (second && l == 0) h_gradgradcheck(what, f_norm, &c, in, n, NULL, 0, 0);
        em_scope_end();
    }
}

static void norm_checks(void)
{
    /* layer norm: one and two normalised dims, each optional parameter */
    check_norm("last dim", (norm_case){K_LAYER, 1, false, false, 1e-5}, EM_SHAPE(2, 3, 4), true);
    check_norm("weight bias", (norm_case){K_LAYER, 1, true, true, 1e-5}, EM_SHAPE(2, 3, 4), true);
    check_norm("weight", (norm_case){K_LAYER, 1, true, false, 1e-5}, EM_SHAPE(3, 4), false);
    check_norm("bias", (norm_case){K_LAYER, 1, false, true, 0.1}, EM_SHAPE(3, 4), false);
    check_norm("two dims", (norm_case){K_LAYER, 2, true, true, 1e-5}, EM_SHAPE(2, 3, 4), true);
    check_norm("all dims", (norm_case){K_LAYER, 2, false, false, 1e-5}, EM_SHAPE(4, 5), false);
    /* RMS norm */
    check_norm("last dim", (norm_case){K_RMS, 1, false, false, 1e-6}, EM_SHAPE(2, 3, 4), true);
    check_norm("weight", (norm_case){K_RMS, 1, true, false, 1e-6}, EM_SHAPE(2, 3, 4), true);
    check_norm("two dims", (norm_case){K_RMS, 2, true, false, 0.1}, EM_SHAPE(2, 3, 4), true);
    /* group norm: spatial dims or none, one group, one channel per group */
    check_norm("2 groups", (norm_case){K_GROUP, 2, true, true, 1e-5}, EM_SHAPE(2, 4, 3), true);
    check_norm("no affine", (norm_case){K_GROUP, 2, false, false, 1e-5}, EM_SHAPE(2, 4, 3), false);
    check_norm("1 group", (norm_case){K_GROUP, 1, true, false, 1e-5}, EM_SHAPE(2, 3, 2, 2), false);
    check_norm("C groups", (norm_case){K_GROUP, 3, false, true, 1e-5}, EM_SHAPE(2, 3, 4), false);
    check_norm("rank 2", (norm_case){K_GROUP, 2, true, true, 1e-5}, EM_SHAPE(3, 4), false);
    /* batch norm: gradients to x, mean, var, weight, bias */
    check_norm("affine", (norm_case){K_BATCH, 0, true, true, 1e-5}, EM_SHAPE(2, 3, 2), true);
    check_norm("plain", (norm_case){K_BATCH, 0, false, false, 1e-3}, EM_SHAPE(2, 3, 2), false);
    check_norm("bias", (norm_case){K_BATCH, 0, false, true, 1e-5}, EM_SHAPE(3, 2, 2, 1), false);
    check_norm("rank 2", (norm_case){K_BATCH, 0, true, false, 1e-5}, EM_SHAPE(4, 3), false);
}

/* ---- attention --------------------------------------------------------------------------- */

typedef struct sdpa_case {
    const char *name;
    em_shape q, k, v, mask;
    int mask_kind; /* 0 none, 1 bool (held here), 2 additive (the fourth input) */
    bool causal;
    double scale;
    em_tensor *bool_mask;
} sdpa_case;

static em_tensor *f_sdpa(em_tensor *const *in, int n, void *ctx)
{
    const sdpa_case *c = ctx;
    em_tensor *mask = c->mask_kind == 1 ? c->bool_mask : n > 3 ? in[3] : NULL;
    return em_sdpa(in[0], in[1], in[2], mask, (em_sdpa_opts){c->causal, c->scale});
}

/* A keep-mask with column 0 always kept, so no row is fully masked (even with causal). */
static em_tensor *keep_mask(em_shape s)
{
    int64_t n = 1;
    for (int d = 0; d < s.rank; d++) n *= s.dims[d];
    double *v = malloc((size_t)n * sizeof *v);
    int64_t cols = s.dims[s.rank - 1];
    for (int64_t i = 0; i < n; i++) v[i] = (i % cols == 0 || (i * 7 + i / cols) % 3 != 0);
    em_tensor *f = h_from_f64(v, s);
    free(v);
    em_tensor *m = em_ne_scalar(f, 0);
    em_release(f);
    return m;
}

static void check_sdpa(sdpa_case c, bool second)
{
    for (int l = 0; l < H_LAYOUT_COUNT; l++) {
        em_scope_begin();
        em_tensor *in[4] = {g_in(c.q, (h_layout)l, -1, 1), g_in(c.k, (h_layout)l, -1, 1),
                            g_in(c.v, (h_layout)(H_LAYOUT_COUNT - 1 - l), -1, 1), NULL};
        int n = 3;
        if (c.mask_kind == 1) c.bool_mask = keep_mask(c.mask);
        if (c.mask_kind == 2) in[n++] = g_in(c.mask, (h_layout)l, -1, 1);
        char what[96];
        snprintf(what, sizeof what, "sdpa %s layout %d", c.name, l);
        h_gradcheck(what, f_sdpa, &c, in, n, NULL, 0, 0);
        if (second && l == 0) h_gradgradcheck(what, f_sdpa, &c, in, n, NULL, 0, 0);
        em_scope_end();
    }
}

static void sdpa_checks(void)
{
    em_shape none = {.rank = 0};
    check_sdpa((sdpa_case){"plain", EM_SHAPE(2, 3, 4), EM_SHAPE(2, 5, 4), EM_SHAPE(2, 5, 3), none,
                           0, false, 0, NULL},
               true);
    check_sdpa((sdpa_case){"no batch scale", EM_SHAPE(3, 2), EM_SHAPE(4, 2), EM_SHAPE(4, 3), none,
                           0, false, 0.7, NULL},
               false);
    /* batch broadcasting between q, k and v */
    check_sdpa((sdpa_case){"broadcast", EM_SHAPE(2, 1, 3, 2), EM_SHAPE(2, 4, 2),
                           EM_SHAPE(1, 2, 4, 2), none, 0, false, 0, NULL},
               true);
    check_sdpa((sdpa_case){"kv shared", EM_SHAPE(2, 3, 2), EM_SHAPE(4, 2), EM_SHAPE(4, 3), none, 0,
                           false, 0, NULL},
               false);
    check_sdpa((sdpa_case){"causal", EM_SHAPE(2, 4, 3), EM_SHAPE(2, 4, 3), EM_SHAPE(2, 4, 2), none,
                           0, true, 0, NULL},
               true);
    check_sdpa((sdpa_case){"causal L<S", EM_SHAPE(3, 2), EM_SHAPE(5, 2), EM_SHAPE(5, 2), none, 0,
                           true, 0, NULL},
               false);
    check_sdpa((sdpa_case){"bool mask", EM_SHAPE(2, 3, 2), EM_SHAPE(2, 5, 2), EM_SHAPE(2, 5, 2),
                           EM_SHAPE(3, 5), 1, false, 0, NULL},
               true);
    check_sdpa((sdpa_case){"bool mask causal", EM_SHAPE(2, 4, 2), EM_SHAPE(2, 4, 2),
                           EM_SHAPE(2, 4, 2), EM_SHAPE(2, 4, 4), 1, true, 0, NULL},
               false);
    /* additive masks get gradients summed back to their broadcast shape */
    check_sdpa((sdpa_case){"additive mask", EM_SHAPE(2, 3, 2), EM_SHAPE(2, 4, 2), EM_SHAPE(2, 4, 2),
                           EM_SHAPE(3, 4), 2, false, 0, NULL},
               true);
    check_sdpa((sdpa_case){"additive row mask causal", EM_SHAPE(2, 3, 2), EM_SHAPE(4, 2),
                           EM_SHAPE(2, 4, 2), EM_SHAPE(2, 1, 4), 2, true, 0.5, NULL},
               false);
    check_sdpa((sdpa_case){"additive full mask", EM_SHAPE(2, 3, 2), EM_SHAPE(2, 3, 2),
                           EM_SHAPE(2, 3, 2), EM_SHAPE(2, 3, 3), 2, false, 0, NULL},
               false);
}

/* ---- dropout ----------------------------------------------------------------------------- */

typedef struct drop_case {
    double p;
    em_rng_state st;
    bool squared;
} drop_case;

/* The same generator state on every call, so every evaluation draws the same mask. */
static em_tensor *f_drop(em_tensor *const *in, int n, void *ctx)
{
    (void)n;
    const drop_case *c = ctx;
    em_rng_set_state(c->st);
    em_tensor *y = em_dropout(in[0], c->p, true);
    return c->squared ? em_mul(y, in[0]) : y;
}

/* Backward of sum(dropout(x)) must be exactly keep / (1 - p), with keep read off the output
 * (x has no zeros), and must leave the global generator where it was. */
static void drop_exact(em_dtype dt, h_layout l, double p)
{
    em_scope_begin();
    em_tensor *x = em_requires_grad(h_rand(EM_SHAPE(5, 6), dt, l, 0.5, 1.5, NULL), true);
    em_tensor *y = em_dropout(x, p, true);
    em_rng_state before = em_rng_get_state();
    em_grads *g = em_backward(em_sum(y, EM_ALL, false));
    em_rng_state after = em_rng_get_state();
    CHECK(before.seed == after.seed && before.offset == after.offset,
          "dropout backward moved the generator (%llu -> %llu)", (unsigned long long)before.offset,
          (unsigned long long)after.offset);
    em_tensor *gx = g ? em_grad(g, x) : NULL;
    CHECK(gx != NULL, "dropout: no gradient: %s", em_last_error());
    if (gx) {
        CHECK(em_tensor_dtype(gx) == dt, "dropout: gradient dtype %s for %s input",
              em_dtype_name(em_tensor_dtype(gx)), em_dtype_name(dt));
        double *gv = h_values(gx), *yv = h_values(y);
        int bad = 0, kept = 0;
        double scale = 1.0 / (1.0 - p);
        if (dt == EM_F32) scale = (float)scale;
        for (int i = 0; i < 30; i++) {
            double want = yv[i] != 0 ? scale : 0.0;
            kept += yv[i] != 0;
            bad += gv[i] != want;
        }
        CHECK(bad == 0, "dropout p %g layout %d: %d gradient elements are not keep/(1-p)", p, l,
              bad);
        CHECK(kept > 0 && kept < 30, "dropout p %g: %d of 30 kept (mask degenerate)", p, kept);
        free(gv);
        free(yv);
    }
    em_scope_end();
}

static void drop_checks(void)
{
    for (int l = 0; l < H_LAYOUT_COUNT; l++) {
        drop_exact(EM_F64, (h_layout)l, 0.4);
        em_scope_begin();
        drop_case c = {0.3, em_rng_get_state(), l == 0};
        em_tensor *x = g_in(EM_SHAPE(4, 5), (h_layout)l, -2, 2);
        char what[64];
        snprintf(what, sizeof what, "dropout layout %d", l);
        h_gradcheck(what, f_drop, &c, &x, 1, NULL, 0, 0);
        if (l == 0) h_gradgradcheck(what, f_drop, &c, &x, 1, NULL, 0, 0);
        em_scope_end();
    }
    drop_exact(EM_F32, H_CONTIG, 0.25);
    drop_exact(EM_F64, H_TRANSPOSED, 0.8);
    /* p = 1 drops everything: zero (or no) gradient */
    em_scope_begin();
    em_tensor *x = em_requires_grad(g_in(EM_SHAPE(3, 2), H_CONTIG, 0.5, 1), true);
    em_grads *g = em_backward(em_sum(em_dropout(x, 1.0, true), EM_ALL, false));
    CHECK(g != NULL, "dropout p 1: backward failed: %s", em_last_error());
    em_tensor *gx = g ? em_grad(g, x) : NULL;
    if (gx) {
        em_tensor *a = em_sum(em_abs(gx), EM_ALL, false);
        CHECK(a && em_item_f64(a) == 0, "dropout p 1: nonzero gradient");
    }
    em_clear_error();
    em_scope_end();
}

/* ---- f32 and f16 gradients
 * ----------------------------------------------------------------------- */

/* Backward of f32 and f16 layer norm and f32 attention gives gradients of the inputs' dtype and
 * shape, close to the f64 ones. */
static void low_precision_norm(em_dtype dt, double tol)
{
    em_scope_begin();
    em_shape sh[3] = {EM_SHAPE(2, 3, 4), EM_SHAPE(4), EM_SHAPE(4)};
    em_tensor *x64[3], *xlo[3];
    for (int i = 0; i < 3; i++) {
        /* values representable in dt, so both runs see the same inputs */
        x64[i] = em_cast(em_cast(g_in(sh[i], H_CONTIG, -1, 1), dt), EM_F64);
        xlo[i] = em_requires_grad(em_cast(x64[i], dt), true);
        em_requires_grad(x64[i], true);
    }
    em_tensor *w = em_cast(em_cast(g_in(sh[0], H_CONTIG, -1, 1), dt), EM_F64);
    em_tensor *y64 = em_layer_norm(x64[0], 1, x64[1], x64[2], 1e-5);
    em_tensor *ylo = em_layer_norm(xlo[0], 1, xlo[1], xlo[2], 1e-5);
    em_grads *g64 = em_backward(em_sum(em_mul(y64, w), EM_ALL, false));
    em_grads *glo = em_backward(em_sum(em_mul(ylo, em_cast(w, dt)), EM_ALL, false));
    CHECK(g64 && glo, "layer_norm %s: backward failed: %s", em_dtype_name(dt), em_last_error());
    for (int i = 0; g64 && glo && i < 3; i++) {
        em_tensor *a = em_grad(glo, xlo[i]), *b = em_grad(g64, x64[i]);
        CHECK(a && em_tensor_dtype(a) == dt, "layer_norm %s: input %d gradient has another dtype",
              em_dtype_name(dt), i);
        if (a && b) {
            double *bv = h_values(b);
            char what[64];
            snprintf(what, sizeof what, "layer_norm %s grad %d", em_dtype_name(dt), i);
            h_check_tensor(what, a, bv, sh[i], tol, tol);
            free(bv);
        }
    }
    em_clear_error();
    em_scope_end();
}

static void low_precision_sdpa(em_dtype dt)
{
    em_scope_begin();
    em_tensor *q = em_requires_grad(em_rand(EM_SHAPE(2, 3, 4), dt, h_dev), true);
    em_tensor *k = em_requires_grad(em_rand(EM_SHAPE(5, 4), dt, h_dev), true);
    em_tensor *v = em_requires_grad(em_rand(EM_SHAPE(1, 5, 2), dt, h_dev), true);
    em_tensor *o = em_sdpa(q, k, v, NULL, (em_sdpa_opts){.causal = true});
    em_grads *g = em_backward(em_sum(o, EM_ALL, false));
    CHECK(g != NULL, "sdpa %s: backward failed: %s", em_dtype_name(dt), em_last_error());
    em_tensor *qkv[3] = {q, k, v};
    for (int i = 0; g && i < 3; i++) {
        em_tensor *gi = em_grad(g, qkv[i]);
        CHECK(gi && em_tensor_dtype(gi) == dt &&
                  em_shape_equal(em_tensor_shape(gi), em_tensor_shape(qkv[i])),
              "sdpa %s: gradient %d has the wrong dtype or shape", em_dtype_name(dt), i);
    }
    /* every query attends to key 0 and the output sums v's rows with weights 1: grad v row 0
     * gets the most, and the gradients sum to the number of output elements */
    em_tensor *gv = g ? em_grad(g, v) : NULL;
    em_tensor *tot = gv ? em_sum(em_cast(gv, EM_F64), EM_ALL, false) : NULL;
    CHECK(tot && fabs(em_item_f64(tot) - 12.0) < 1e-2, "sdpa %s: sum of grad v %g, expected 12",
          em_dtype_name(dt), tot ? em_item_f64(tot) : NAN);
    em_clear_error();
    em_scope_end();
}

static void low_precision_checks(void)
{
    low_precision_norm(EM_F32, 1e-4);
    low_precision_norm(EM_F16, 3e-2);
    low_precision_sdpa(EM_F32);
    low_precision_sdpa(EM_F16);
}

/* The fused backward record (sdpa_backward) against the composed rule (config
 * sdpa_fused_backward = off) on the same graph: every float dtype, causal, bool and additive
 * masks, many batch indices (the CPU runs them in parallel), one, and k, v broadcast. */
static void sdpa_fused_case(em_shape qs, em_shape ks, em_dtype dt, bool causal, int mk)
{
    em_scope_begin();
    em_tensor *q = em_randn(qs, dt, h_dev), *k = em_randn(ks, dt, h_dev);
    em_tensor *v = em_randn(ks, dt, h_dev);
    int64_t L = qs.dims[qs.rank - 2], S = ks.dims[ks.rank - 2];
    em_tensor *m = NULL; /* a bool mask keeps the diagonal, so no row is fully masked */
    if (mk == 1)
        m = em_logical_or(em_gt_scalar(em_rand(EM_SHAPE(L, S), EM_F32, h_dev), 0.3),
                          em_ne_scalar(em_eye(L, S, EM_F32, h_dev), 0));
    if (mk == 2) m = em_mul_scalar(em_rand(EM_SHAPE(L, S), dt, h_dev), -2);
    em_tensor *g[2][3];
    for (int side = 0; side < 2; side++) {
        em_config_set("sdpa_fused_backward", side ? "off" : NULL);
        em_tensor *x[3] = {em_requires_grad(em_detach(q), true),
                           em_requires_grad(em_detach(k), true),
                           em_requires_grad(em_detach(v), true)};
        em_tensor *y = em_sdpa(x[0], x[1], x[2], m, (em_sdpa_opts){.causal = causal});
        em_grads *gr = em_backward(em_sum(em_square(y), EM_ALL, false));
        for (int i = 0; i < 3; i++) g[side][i] = em_cast(em_grad(gr, x[i]), EM_F64);
    }
    em_config_set("sdpa_fused_backward", NULL);
    CHECK_OK("sdpa fused vs composed");
    double tol = dt == EM_F64 ? 1e-10 : dt == EM_F32 ? 1e-4 : 3e-2;
    for (int i = 0; i < 3 && !em_failed(); i++) {
        double err = em_item_f64(em_max(em_abs(em_sub(g[0][i], g[1][i])), EM_ALL, false));
        double mx = em_item_f64(em_max(em_abs(g[1][i]), EM_ALL, false));
        CHECK(err <= tol * (mx > 0 ? mx : 1),
              "sdpa fused vs composed %s causal %d mask %d input %d: %g over %g", em_dtype_name(dt),
              causal, mk, i, err, mx);
    }
    em_clear_error();
    em_scope_end();
}

static void sdpa_fused_checks(void)
{
    static const em_dtype dts[4] = {EM_F64, EM_F32, EM_BF16, EM_F16};
    for (int t = 0; t < 4; t++)
        for (int c = 0; c < 2; c++)
            for (int mk = 0; mk < 3; mk++) {
                sdpa_fused_case(EM_SHAPE(4, 3, 13, 8), EM_SHAPE(4, 3, 20, 8), dts[t], c, mk);
                sdpa_fused_case(EM_SHAPE(1, 21, 4), EM_SHAPE(1, 17, 4), dts[t], c, mk);
                sdpa_fused_case(EM_SHAPE(2, 3, 9, 8), EM_SHAPE(11, 8), dts[t], c, mk);
            }
}

void grad_norm(void)
{
    norm_checks();
    sdpa_checks();
    sdpa_fused_checks();
    drop_checks();
    low_precision_checks();
}
