/* em_sdpa on the CUDA backend against the CPU backend on the same inputs, on sizes the
 * conformance suite does not reach: the flash kernel (f16/bf16, head dims 64 and 128, several key
 * tiles, tails, causal with L != S, bool and additive masks, permuted, transposed and broadcast
 * inputs) and the general kernel (every float dtype, bool and additive masks, keys and head dims
 * past its shared-memory caches, more than 512 value columns, more than 2^16 rows, transposed and
 * flipped inputs, empty and fully masked cases). The fused backward (SDPA_BACKWARD) against the
 * cpu's record on the same shapes, layouts and masks, and through the autodiff rule. Without a
 * CUDA device it prints one line and passes. */
#include <math.h>
#include <string.h>

#include "backend/backend.h"
#include "harness.h"
#include "tensor/op.h"

static em_device dev;

/* got (device) and want (cpu) as f64, elementwise; reports the first mismatch. */
static void compare(const char *what, em_tensor *got, em_tensor *want, double atol, double rtol)
{
    h_compare_dev(what, got, want, atol, rtol, dev);
}

/* A cpu tensor of shape s with values uniform in [lo, hi), rounded to dt. */
static em_tensor *rnd(em_shape s, em_dtype dt, double lo, double hi)
{
    int64_t n = 1;
    for (int d = 0; d < s.rank; d++) n *= s.dims[d];
    double *v = malloc((size_t)n * sizeof *v + 8);
    for (int64_t i = 0; i < n; i++) v[i] = lo + (hi - lo) * h_uniform();
    em_tensor *t = em_from_data(v, EM_F64, s, dt, EM_CPU);
    free(v);
    return t;
}

/* A cpu bool mask [L, S], true with probability `keep`, row `dead` all false. */
static em_tensor *bool_mask(int64_t L, int64_t S, double keep, int64_t dead)
{
    double *v = malloc((size_t)(L * S) * sizeof *v + 8);
    for (int64_t i = 0; i < L * S; i++) v[i] = i / S != dead && h_uniform() < keep;
    em_tensor *t = em_from_data(v, EM_F64, EM_SHAPE(L, S), EM_BOOL, EM_CPU);
    free(v);
    return t;
}

static em_tensor *on_dev(em_tensor *t)
{
    return t ? em_to_device(t, dev) : NULL;
}

typedef em_tensor *(*view_fn)(em_tensor *);

static em_tensor *same(em_tensor *t)
{
    return t;
}

/* [B, L, H, D] stored, seen as [B, H, L, D] (rows H * D apart, the usual projection layout) */
static em_tensor *heads(em_tensor *t)
{
    return em_permute(t, EM_AXES(0, 2, 1, 3));
}

/* the last two dims stored transposed */
static em_tensor *trans(em_tensor *t)
{
    return em_transpose(t, -2, -1);
}

static em_tensor *flip0(em_tensor *t)
{
    return em_flip(t, EM_AXES(0));
}

/* check() runs flash cases: the two-output record must give the lse (else it must decline). */
static bool flash_cases;

/* The rows' base-2 log-sum-exp of the scaled, masked scores of q (cpu, after its view) against
 * k, in f64 on the cpu: [B..., L], -inf where every key is masked. */
static em_tensor *lse_ref(em_tensor *q, em_tensor *k, em_tensor *m, em_sdpa_opts o)
{
    em_shape qs = em_tensor_shape(q), ks = em_tensor_shape(k);
    double scale = o.scale > 0 ? o.scale : 1 / sqrt((double)qs.dims[qs.rank - 1]);
    em_tensor *sc = em_mul_scalar(
        em_matmul(em_cast(q, EM_F64), em_transpose(em_cast(k, EM_F64), -2, -1)), scale);
    if (m && em_tensor_dtype(m) != EM_BOOL) sc = em_add(sc, em_cast(m, EM_F64));
    if (m && em_tensor_dtype(m) == EM_BOOL) sc = em_masked_fill(sc, em_logical_not(m), -INFINITY);
    if (o.causal) {
        em_tensor *ones =
            em_ones(EM_SHAPE(qs.dims[qs.rank - 2], ks.dims[ks.rank - 2]), EM_F64, EM_CPU);
        sc = em_masked_fill(sc, em_ne_scalar(em_triu(ones, 1), 0), -INFINITY);
    }
    return em_mul_scalar(em_logsumexp(sc, EM_AXES(-1), false), 1 / log(2.0));
}

/* The device's lse (tn_sdpa_lse) against lse_ref: +inf where the reference is -inf. */
static void check_lse(const char *what, em_tensor *got, em_tensor *want)
{
    CHECK(got && want, "%s: lse missing (%s)", what, em_last_error());
    if (!got || !want) return;
    CHECK(em_shape_equal(em_tensor_shape(got), em_tensor_shape(want)) &&
              em_tensor_dtype(got) == EM_F32,
          "%s: lse shape or dtype", what);
    double *a = h_values(em_to_device(got, EM_CPU)), *b = h_values(want);
    int64_t n = em_tensor_numel(want), bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++) {
        bool ok = isinf(b[i]) && b[i] < 0 ? isinf(a[i]) && a[i] > 0
                                          : fabs(a[i] - b[i]) <= 1e-3 + 1e-5 * fabs(b[i]);
        if (!ok) bad = i;
    }
    CHECK(bad < 0, "%s: lse[%lld] = %.9g, expected %.9g", what, (long long)bad,
          bad < 0 ? 0 : a[bad], bad < 0 ? 0 : b[bad]);
    free(a);
    free(b);
}

/* Runs em_sdpa on the cpu tensors (after `view`) and on device copies of them (the same view),
 * and compares, with the device's lse (the two-output record) against lse_ref; with `general`
 * also with the flash kernel switched off, which declines the two-output record. */
static void check(const char *what, em_tensor *q, em_tensor *k, em_tensor *v, em_tensor *m,
                  view_fn vq, view_fn vk, em_sdpa_opts o, double atol, double rtol, bool general)
{
    em_scope_begin();
    em_tensor *want = em_sdpa(vq(q), vk(k), vk(v), m, o);
    CHECK_OK(what);
    em_tensor *qd = vq(on_dev(q)), *kd = vk(on_dev(k)), *vd = vk(on_dev(v)), *md = on_dev(m);
    int64_t before = tn_fallback_count(EM_OP_SDPA);
    compare(what, em_sdpa(qd, kd, vd, md, o), want, atol, rtol);
    CHECK(tn_fallback_count(EM_OP_SDPA) == before, "%s: ran on the cpu", what);
    char name[220];
    em_tensor *lse = NULL;
    snprintf(name, sizeof name, "%s (with lse)", what);
    compare(name, tn_sdpa_lse(qd, kd, vd, md, o, &lse), want, atol, rtol);
    if (flash_cases)
        check_lse(name, lse, lse_ref(vq(q), vk(k), m, o));
    else
        CHECK(!lse, "%s: the general kernel claimed the lse output", name);
    if (general) {
        snprintf(name, sizeof name, "%s (general kernel)", what);
        em_config_set("cuda_flash", "off");
        double tol = em_tensor_dtype(want) == EM_BF16 ? 8e-3 : 1e-3; /* an ulp of the output */
        compare(name, em_sdpa(qd, kd, vd, md, o), want, 1e-6, tol);
        lse = NULL;
        compare(name, tn_sdpa_lse(qd, kd, vd, md, o, &lse), want, 1e-6, tol);
        CHECK(!lse, "%s: the general kernel claimed the lse output", name);
        em_config_set("cuda_flash", NULL);
    }
    em_scope_end();
}

/* The flash kernel: f16 and bf16, head dims 64 and 128. */
static void test_flash(void)
{
    flash_cases = true;
    static const struct {
        int64_t B, H, L, S;
        bool causal;
    } cases[] = {
        {2, 3, 300, 517, false},   {2, 3, 300, 517, true},   {1, 2, 129, 129, true},
        {1, 2, 2048, 2048, false}, {1, 2, 2048, 2048, true}, {1, 1, 700, 200, true},
        {1, 1, 200, 700, true},    {3, 1, 1, 64, false},     {1, 2, 64, 1, true},
    };
    em_dtype dts[2] = {EM_BF16, EM_F16};
    int64_t dims[2] = {64, 128};
    for (int t = 0; t < 2; t++)
        for (int di = 0; di < 2; di++)
            for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
                em_dtype dt = dts[t];
                int64_t D = dims[di], B = cases[c].B, H = cases[c].H, L = cases[c].L,
                        S = cases[c].S;
                /* bf16: the probabilities are rounded to bf16 for the P V product */
                double atol = dt == EM_BF16 ? 4e-3 : 1e-3, rtol = dt == EM_BF16 ? 1.6e-2 : 2e-3;
                em_scope_begin();
                char name[160];
                snprintf(name, sizeof name, "flash %s D=%lld B=%lld H=%lld L=%lld S=%lld%s",
                         em_dtype_name(dt), (long long)D, (long long)B, (long long)H, (long long)L,
                         (long long)S, cases[c].causal ? " causal" : "");
                em_sdpa_opts o = {.causal = cases[c].causal};
                em_tensor *q = rnd(EM_SHAPE(B, H, L, D), dt, -1, 1);
                em_tensor *k = rnd(EM_SHAPE(B, H, S, D), dt, -1, 1);
                em_tensor *v = rnd(EM_SHAPE(B, H, S, D), dt, -1, 1);
                check(name, q, k, v, NULL, same, same, o, atol, rtol, L * S <= 300 * 517);
                /* larger scores: a sharper softmax */
                snprintf(name, sizeof name, "flash %s D=%lld L=%lld S=%lld scale 0.5%s",
                         em_dtype_name(dt), (long long)D, (long long)L, (long long)S,
                         cases[c].causal ? " causal" : "");
                o.scale = 0.5;
                check(name, q, k, v, NULL, same, same, o, atol, rtol, false);
                em_scope_end();
            }
    /* q, k, v as [B, H, L, D] views of [B, L, H, D] projections; k and v broadcast over H */
    for (int t = 0; t < 2; t++) {
        em_dtype dt = dts[t];
        double atol = dt == EM_BF16 ? 4e-3 : 1e-3, rtol = dt == EM_BF16 ? 1.6e-2 : 2e-3;
        em_scope_begin();
        em_tensor *q = rnd(EM_SHAPE(2, 333, 4, 128), dt, -1, 1);
        em_tensor *k = rnd(EM_SHAPE(2, 400, 4, 128), dt, -1, 1);
        em_tensor *v = rnd(EM_SHAPE(2, 400, 4, 128), dt, -1, 1);
        check("flash permuted heads", q, k, v, NULL, heads, heads, (em_sdpa_opts){0}, atol, rtol,
              true);
        check("flash permuted heads causal", q, k, v, NULL, heads, heads,
              (em_sdpa_opts){.causal = true}, atol, rtol, false);
        em_tensor *q4 = rnd(EM_SHAPE(2, 3, 250, 64), dt, -1, 1);
        em_tensor *k1 = rnd(EM_SHAPE(2, 1, 300, 64), dt, -1, 1);
        em_tensor *v1 = rnd(EM_SHAPE(2, 1, 300, 64), dt, -1, 1);
        check("flash k, v broadcast over heads", q4, k1, v1, NULL, same, same, (em_sdpa_opts){0},
              atol, rtol, true);
        /* k, v stored [.., D, S] (gathered into contiguous buffers first), q flipped */
        em_tensor *kt = rnd(EM_SHAPE(2, 3, 64, 300), dt, -1, 1);
        em_tensor *vt = rnd(EM_SHAPE(2, 3, 64, 300), dt, -1, 1);
        check("flash transposed k, v, flipped q", q4, kt, vt, NULL, flip0, trans,
              (em_sdpa_opts){.causal = true}, atol, rtol, true);
        /* masks: bool [L, S] with a fully masked row (NaN), additive [B, 1, L, S] */
        em_tensor *bm = bool_mask(250, 300, 0.7, 77);
        check("flash bool mask", q4, k1, v1, bm, same, same, (em_sdpa_opts){0}, atol, rtol, true);
        check("flash bool mask causal", q4, k1, v1, bm, same, same, (em_sdpa_opts){.causal = true},
              atol, rtol, true);
        em_tensor *am = rnd(EM_SHAPE(2, 1, 250, 300), dt, -3, 0);
        check("flash additive mask", q4, k1, v1, am, same, same, (em_sdpa_opts){.scale = 0.3}, atol,
              rtol, true);
        em_tensor *qb = rnd(EM_SHAPE(1, 2, 1000, 128), dt, -1, 1);
        em_tensor *kb = rnd(EM_SHAPE(1, 2, 1000, 128), dt, -1, 1);
        check("flash D=128 bool mask L=S=1000", qb, kb, kb, bool_mask(1000, 1000, 0.5, 999), same,
              same, (em_sdpa_opts){0}, atol, rtol, false);
        em_tensor *k0 = rnd(EM_SHAPE(300, 64), dt, -1, 1);
        em_tensor *v0 = rnd(EM_SHAPE(300, 64), dt, -1, 1);
        check("flash k, v of rank 2", q4, k0, v0, NULL, same, same, (em_sdpa_opts){.causal = true},
              atol, rtol, false);
        em_scope_end();
    }
}

/* The general kernel: every float dtype, masks, long rows, many rows, strided inputs. */
static void test_general(void)
{
    em_dtype dts[4] = {EM_F64, EM_F32, EM_F16, EM_BF16};
    for (int t = 0; t < 4; t++) {
        em_dtype dt = dts[t];
        /* f32 and f64 run through the matmul kernels on both devices (sums in different orders) */
        double tol = dt == EM_F64 ? 1e-12 : dt == EM_F32 ? 1e-5 : dt == EM_F16 ? 1e-3 : 8e-3;
        char name[160];
        em_scope_begin();
        /* masks: bool [L, S] over the batch, additive [B, 1, L, S] over the heads */
        em_tensor *q = rnd(EM_SHAPE(2, 3, 37, 20), dt, -1, 1);
        em_tensor *k = rnd(EM_SHAPE(2, 3, 300, 20), dt, -1, 1);
        em_tensor *v = rnd(EM_SHAPE(2, 3, 300, 9), dt, -1, 1);
        em_tensor *bm = em_gt_scalar(rnd(EM_SHAPE(37, 300), EM_F32, 0, 1), 0.3);
        em_tensor *am = rnd(EM_SHAPE(2, 1, 37, 300), dt, -3, 0);
        snprintf(name, sizeof name, "general %s bool mask", em_dtype_name(dt));
        check(name, q, k, v, bm, same, same, (em_sdpa_opts){0}, tol, tol, false);
        snprintf(name, sizeof name, "general %s bool mask causal", em_dtype_name(dt));
        check(name, q, k, v, bm, same, same, (em_sdpa_opts){.causal = true}, tol, tol, false);
        snprintf(name, sizeof name, "general %s additive mask scale 0.7", em_dtype_name(dt));
        check(name, q, k, v, am, same, same, (em_sdpa_opts){.scale = 0.7}, tol, tol, false);
        /* S past the score cache, E past the q cache, Ev over 512 (several passes) */
        em_tensor *ql = rnd(EM_SHAPE(1, 3, 1100), dt, -1, 1);
        em_tensor *kl = rnd(EM_SHAPE(1, 6000, 1100), dt, -0.2, 0.2);
        em_tensor *vl = rnd(EM_SHAPE(1, 6000, 700), dt, -1, 1);
        snprintf(name, sizeof name, "general %s S=6000 E=1100 Ev=700", em_dtype_name(dt));
        check(name, ql, kl, vl, NULL, same, same, (em_sdpa_opts){0}, tol, tol, false);
        snprintf(name, sizeof name, "general %s S=6000 E=1100 Ev=700 causal", em_dtype_name(dt));
        check(name, ql, kl, vl, NULL, same, same, (em_sdpa_opts){.causal = true}, tol, tol, false);
        /* more than 2^16 query rows */
        em_tensor *qm = rnd(EM_SHAPE(70000, 1, 8), dt, -1, 1);
        em_tensor *km = rnd(EM_SHAPE(70000, 5, 8), dt, -1, 1);
        em_tensor *vm = rnd(EM_SHAPE(70000, 5, 3), dt, -1, 1);
        snprintf(name, sizeof name, "general %s 70000 batches", em_dtype_name(dt));
        check(name, qm, km, vm, NULL, same, same, (em_sdpa_opts){0}, tol, tol, false);
        /* transposed k and v storage, flipped q */
        em_tensor *qf = rnd(EM_SHAPE(3, 50, 16), dt, -1, 1);
        em_tensor *kt = rnd(EM_SHAPE(3, 16, 70), dt, -1, 1);
        em_tensor *vt = rnd(EM_SHAPE(3, 16, 70), dt, -1, 1);
        snprintf(name, sizeof name, "general %s transposed k, v, flipped q", em_dtype_name(dt));
        check(name, qf, kt, vt, NULL, flip0, trans, (em_sdpa_opts){.causal = true}, tol, tol,
              false);
        /* an infinity in V at a key the first rows never see (causal): the general kernel,
           which skips zero probabilities as the CPU does */
        double vv[160];
        for (int e = 0; e < 160; e++) vv[e] = (e / 8) % 10 == 3 ? INFINITY : 2 * h_uniform() - 1;
        em_tensor *vi = em_from_data(vv, EM_F64, EM_SHAPE(1, 2, 10, 8), dt, EM_CPU);
        snprintf(name, sizeof name, "general %s inf in V, causal", em_dtype_name(dt));
        check(name, rnd(EM_SHAPE(1, 2, 10, 8), dt, -1, 1), rnd(EM_SHAPE(1, 2, 10, 8), dt, -1, 1),
              vi, NULL, same, same, (em_sdpa_opts){.causal = true}, tol, tol, false);
        em_scope_end();
    }
    em_scope_begin();
    /* fully masked rows give NaN; S = 0 gives zeros */
    em_tensor *q = rnd(EM_SHAPE(2, 4, 8), EM_F32, -1, 1);
    em_tensor *none = em_zeros(EM_SHAPE(4, 6), EM_BOOL, EM_CPU);
    em_tensor *k = rnd(EM_SHAPE(2, 6, 8), EM_F32, -1, 1);
    check("general fully masked", q, k, k, none, same, same, (em_sdpa_opts){0}, 0, 0, false);
    em_tensor *k0 = em_zeros(EM_SHAPE(2, 0, 8), EM_F32, EM_CPU);
    check("general S = 0", q, k0, k0, NULL, same, same, (em_sdpa_opts){0}, 0, 0, false);
    em_tensor *q0 = em_zeros(EM_SHAPE(2, 0, 8), EM_F32, EM_CPU);
    check("general L = 0", q0, k, k, NULL, same, same, (em_sdpa_opts){0}, 0, 0, false);
    /* f16/bf16 with a head dim the flash kernel does not take */
    em_tensor *qh = rnd(EM_SHAPE(2, 100, 96), EM_BF16, -1, 1);
    em_tensor *kh = rnd(EM_SHAPE(2, 130, 96), EM_BF16, -1, 1);
    check("general bf16 D=96", qh, kh, kh, NULL, same, same, (em_sdpa_opts){.causal = true}, 1e-6,
          8e-3, false);
    em_scope_end();
}

/* ---- the fused backward (SDPA_BACKWARD, kernels/attention_bwd.cu) ------------------------- */

/* max |got - want| over max |want| (got from the device), both finite where want is. */
static void compare_rel(const char *what, em_tensor *got, em_tensor *want, double tol)
{
    CHECK(got && want, "%s: missing result (%s)", what, em_last_error());
    if (!got || !want) return;
    CHECK(em_shape_equal(em_tensor_shape(got), em_tensor_shape(want)), "%s: shape", what);
    double *a = h_values(em_to_device(got, EM_CPU)), *b = h_values(want);
    int64_t n = em_tensor_numel(want);
    double mx = 0, err = 0;
    int64_t worst = 0, bad = -1;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(b[i]) || !isfinite(a[i])) {
            if (bad < 0 && !(isnan(a[i]) && isnan(b[i])) && a[i] != b[i]) bad = i;
            continue;
        }
        if (fabs(b[i]) > mx) mx = fabs(b[i]);
        if (fabs(a[i] - b[i]) > err) err = fabs(a[i] - b[i]), worst = i;
    }
    CHECK(bad < 0, "%s: element %lld is %g, expected %g", what, (long long)bad,
          bad < 0 ? 0 : a[bad], bad < 0 ? 0 : b[bad]);
    /* gradients that vanish (S = 1: dS = dP - D = 0) leave rounding noise (4.95e-6 measured on
       f16 dk at D = 128): a floor of 1e-2 under the scale */
    CHECK(err <= tol * (mx > 1e-2 ? mx : 1e-2),
          "%s: max error %.3g at %lld (%g vs %g) over max |%g|", what, err, (long long)worst,
          a[worst], b[worst], mx);
    free(a);
    free(b);
}

/* The record on cpu tensors (after the views) and on device copies (same views): the forward
 * output o and the gradient g come from the cpu, so both sides differentiate the same values. */
static void check_bwd(const char *what, em_tensor *q, em_tensor *k, em_tensor *v, em_tensor *m,
                      view_fn vq, view_fn vk, em_sdpa_opts o)
{
    em_scope_begin();
    em_tensor *qc = vq(q), *kc = vk(k), *vc = vk(v);
    int mk = m ? (em_tensor_dtype(m) == EM_BOOL ? 1 : 2) : 0;
    double scale = o.scale > 0
                       ? o.scale
                       : 1 / sqrt((double)em_tensor_shape(q).dims[em_tensor_shape(q).rank - 1]);
    em_tensor *out = em_sdpa(qc, kc, vc, m, o);
    em_tensor *g = rnd(em_tensor_shape(out), em_tensor_dtype(q), -1, 1);
    em_tensor *want[3] = {NULL, NULL, NULL}, *got[3] = {NULL, NULL, NULL};
    tn_sdpa_backward(qc, kc, vc, out, g, m, NULL, mk, o.causal, scale, &want[0], &want[1],
                     &want[2]);
    CHECK_OK(what);
    em_tensor *qd = vq(on_dev(q)), *kd = vk(on_dev(k)), *vd = vk(on_dev(v));
    int64_t before = tn_fallback_count(EM_OP_SDPA_BACKWARD);
    int64_t lowered = tn_lowered_count(EM_OP_SDPA_BACKWARD);
    em_status st = tn_sdpa_backward(qd, kd, vd, on_dev(out), on_dev(g), on_dev(m), NULL, mk,
                                    o.causal, scale, &got[0], &got[1], &got[2]);
    CHECK(st == EM_OK, "%s: the device failed: %s", what, em_last_error());
    CHECK(tn_fallback_count(EM_OP_SDPA_BACKWARD) == before, "%s: ran on the cpu", what);
    CHECK(tn_lowered_count(EM_OP_SDPA_BACKWARD) == lowered, "%s: the device declined", what);
    /* bf16: P and dS are rounded to bf16 for the products, as in the forward */
    double tol = em_tensor_dtype(q) == EM_BF16 ? 2.5e-2 : 4e-3;
    static const char *names[3] = {"dq", "dk", "dv"};
    for (int i = 0; i < 3 && st == EM_OK; i++) {
        char name[240];
        snprintf(name, sizeof name, "%s: %s", what, names[i]);
        compare_rel(name, got[i], want[i], tol);
    }
    /* again with the lse of the device's forward on the same inputs: the dq2 kernel, no first
       pass */
    em_tensor *lse = NULL;
    tn_sdpa_lse(qd, kd, vd, on_dev(m), o, &lse);
    CHECK(lse, "%s: the device's forward wrote no lse (%s)", what, em_last_error());
    if (lse) {
        st = tn_sdpa_backward(qd, kd, vd, on_dev(out), on_dev(g), on_dev(m), lse, mk, o.causal,
                              scale, &got[0], &got[1], &got[2]);
        CHECK(st == EM_OK, "%s: with lse, the device declined or failed: %s", what,
              em_last_error());
        for (int i = 0; i < 3 && st == EM_OK; i++) {
            char name[240];
            snprintf(name, sizeof name, "%s: %s (forward's lse)", what, names[i]);
            compare_rel(name, got[i], want[i], tol);
        }
    }
    em_clear_error();
    em_scope_end();
}

/* Through autodiff: the sdpa rule on cuda:0 emits the fused record (counted, nothing on the
 * cpu), the gradients match the cpu's; an additive mask that needs a gradient composes. */
static void check_rule(const char *what, em_shape qs, em_shape ks, em_dtype dt, bool causal,
                       em_tensor *m, bool mask_grad)
{
    em_scope_begin();
    em_tensor *q = rnd(qs, dt, -1, 1), *k = rnd(ks, dt, -1, 1), *v = rnd(ks, dt, -1, 1);
    em_shape os = qs;
    em_tensor *g = rnd(os, dt, -1, 1);
    em_tensor *grads[2][4];
    int64_t fused0 = tn_op_count(EM_OP_SDPA_BACKWARD), fused1 = 0;
    for (int side = 0; side < 2; side++) {
        em_device d = side ? dev : EM_CPU;
        em_tensor *x[4] = {em_requires_grad(em_to_device(q, d), true),
                           em_requires_grad(em_to_device(k, d), true),
                           em_requires_grad(em_to_device(v, d), true),
                           m ? em_requires_grad(em_to_device(m, d), mask_grad) : NULL};
        int64_t c0 = tn_op_count(EM_OP_SDPA_BACKWARD);
        em_tensor *y = em_sdpa(x[0], x[1], x[2], x[3], (em_sdpa_opts){.causal = causal});
        em_grads *gr = em_backward(em_sum(em_mul(y, em_to_device(g, d)), EM_ALL, false));
        CHECK_OK(what);
        for (int i = 0; i < 4; i++) grads[side][i] = x[i] && gr ? em_grad(gr, x[i]) : NULL;
        if (side) fused1 = tn_op_count(EM_OP_SDPA_BACKWARD) - c0;
    }
    bool want_fused = !mask_grad;
    CHECK((fused1 > 0) == want_fused, "%s: the device rule %s the fused record", what,
          fused1 > 0 ? "emitted" : "did not emit");
    (void)fused0;
    double tol = dt == EM_BF16 ? 2.5e-2 : 4e-3;
    static const char *names[4] = {"dq", "dk", "dv", "dmask"};
    for (int i = 0; i < (mask_grad ? 4 : 3); i++) {
        char name[240];
        snprintf(name, sizeof name, "%s: rule %s", what, names[i]);
        compare_rel(name, grads[1][i], grads[0][i], tol);
    }
    em_clear_error();
    em_scope_end();
}

static void test_backward(void)
{
    static const struct {
        int64_t B, H, L, S;
        bool causal;
    } cases[] = {
        {2, 3, 300, 517, false},   {2, 3, 300, 517, true},   {1, 2, 129, 129, true},
        {1, 2, 1024, 1024, false}, {1, 2, 1024, 1024, true}, {1, 1, 700, 200, true},
        {1, 1, 200, 700, true},    {3, 1, 1, 64, false},     {1, 2, 64, 1, true},
        {4, 4, 65, 63, false},
    };
    em_dtype dts[2] = {EM_BF16, EM_F16};
    int64_t dims[2] = {64, 128};
    for (int t = 0; t < 2; t++)
        for (int di = 0; di < 2; di++)
            for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
                em_dtype dt = dts[t];
                int64_t D = dims[di], B = cases[c].B, H = cases[c].H, L = cases[c].L,
                        S = cases[c].S;
                em_scope_begin();
                char name[160];
                snprintf(name, sizeof name, "backward %s D=%lld B=%lld H=%lld L=%lld S=%lld%s",
                         em_dtype_name(dt), (long long)D, (long long)B, (long long)H, (long long)L,
                         (long long)S, cases[c].causal ? " causal" : "");
                em_sdpa_opts o = {.causal = cases[c].causal};
                em_tensor *q = rnd(EM_SHAPE(B, H, L, D), dt, -1, 1);
                em_tensor *k = rnd(EM_SHAPE(B, H, S, D), dt, -1, 1);
                em_tensor *v = rnd(EM_SHAPE(B, H, S, D), dt, -1, 1);
                check_bwd(name, q, k, v, NULL, same, same, o);
                if (L * S <= 300 * 517) {
                    strcat(name, " scale 0.5");
                    o.scale = 0.5;
                    check_bwd(name, q, k, v, NULL, same, same, o);
                }
                em_scope_end();
            }
    for (int t = 0; t < 2; t++) {
        em_dtype dt = dts[t];
        em_scope_begin();
        em_tensor *q = rnd(EM_SHAPE(2, 333, 4, 128), dt, -1, 1);
        em_tensor *k = rnd(EM_SHAPE(2, 400, 4, 128), dt, -1, 1);
        em_tensor *v = rnd(EM_SHAPE(2, 400, 4, 128), dt, -1, 1);
        check_bwd("backward permuted heads", q, k, v, NULL, heads, heads, (em_sdpa_opts){0});
        check_bwd("backward permuted heads causal", q, k, v, NULL, heads, heads,
                  (em_sdpa_opts){.causal = true});
        em_tensor *q4 = rnd(EM_SHAPE(2, 3, 250, 64), dt, -1, 1);
        em_tensor *k1 = rnd(EM_SHAPE(2, 1, 300, 64), dt, -1, 1);
        em_tensor *v1 = rnd(EM_SHAPE(2, 1, 300, 64), dt, -1, 1);
        check_bwd("backward k, v broadcast over heads", q4, k1, v1, NULL, same, same,
                  (em_sdpa_opts){0});
        em_tensor *kt = rnd(EM_SHAPE(2, 3, 64, 300), dt, -1, 1);
        em_tensor *vt = rnd(EM_SHAPE(2, 3, 64, 300), dt, -1, 1);
        check_bwd("backward transposed k, v, flipped q", q4, kt, vt, NULL, flip0, trans,
                  (em_sdpa_opts){.causal = true});
        /* bool [L, S] with a fully masked row (zero gradient there), additive [B, 1, L, S] */
        em_tensor *bm = bool_mask(250, 300, 0.7, 77);
        check_bwd("backward bool mask", q4, k1, v1, bm, same, same, (em_sdpa_opts){0});
        check_bwd("backward bool mask causal", q4, k1, v1, bm, same, same,
                  (em_sdpa_opts){.causal = true});
        em_tensor *am = rnd(EM_SHAPE(2, 1, 250, 300), dt, -3, 0);
        check_bwd("backward additive mask", q4, k1, v1, am, same, same,
                  (em_sdpa_opts){.scale = 0.3});
        em_tensor *qb = rnd(EM_SHAPE(1, 2, 1000, 128), dt, -1, 1);
        em_tensor *kb = rnd(EM_SHAPE(1, 2, 1000, 128), dt, -1, 1);
        check_bwd("backward D=128 bool mask L=S=1000", qb, kb, kb, bool_mask(1000, 1000, 0.5, 999),
                  same, same, (em_sdpa_opts){0});
        em_tensor *k0 = rnd(EM_SHAPE(300, 64), dt, -1, 1);
        em_tensor *v0 = rnd(EM_SHAPE(300, 64), dt, -1, 1);
        check_bwd("backward k, v of rank 2", q4, k0, v0, NULL, same, same,
                  (em_sdpa_opts){.causal = true});
        /* through the autodiff rule */
        check_rule("rule causal", EM_SHAPE(2, 2, 200, 64), EM_SHAPE(2, 2, 200, 64), dt, true, NULL,
                   false);
        check_rule("rule L != S", EM_SHAPE(1, 3, 130, 128), EM_SHAPE(1, 3, 257, 128), dt, false,
                   NULL, false);
        check_rule("rule bool mask", EM_SHAPE(2, 2, 100, 64), EM_SHAPE(2, 2, 90, 64), dt, false,
                   bool_mask(100, 90, 0.6, 5), false);
        em_tensor *am2 = rnd(EM_SHAPE(2, 1, 100, 90), dt, -2, 0);
        check_rule("rule additive mask", EM_SHAPE(2, 2, 100, 64), EM_SHAPE(2, 2, 90, 64), dt, false,
                   am2, false);
        check_rule("rule additive mask with its gradient", EM_SHAPE(2, 2, 100, 64),
                   EM_SHAPE(2, 2, 90, 64), dt, false, am2, true);
        em_scope_end();
    }
}

int main(void)
{
    h_init();
    h_dev = EM_CPU;
    em_backends_init();
    if (em_backend_find("cuda") < 0) {
        printf("skipped: no CUDA device\n");
        return h_finish();
    }
    dev = em_device_parse("cuda:0");
    CHECK_OK("em_device_parse(\"cuda:0\")");
    test_general();
    test_backward();
    test_flash();
    return h_finish();
}
