/* Conformance of layer/RMS/group/batch norm, attention and dropout: f64 references written
 * here, PyTorch golden fixtures (scripts/fixtures_norm.py), dtypes, layouts, bad input. */
#include <string.h>

#include "conf.h"
#include "tensor/op.h"

static const em_dtype float_dtypes[4] = {EM_F64, EM_F32, EM_F16, EM_BF16};

/* Reference: normalise rows of `inner` elements; rms skips the mean. */
static void ref_norm_rows(const double *x, double *y, int64_t rows, int64_t inner, const double *w,
                          const double *b, double eps, bool rms)
{
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * inner;
        double mean = 0, var = 0;
        if (!rms) {
            for (int64_t i = 0; i < inner; i++) mean += xr[i];
            mean /= (double)inner;
        }
        for (int64_t i = 0; i < inner; i++) var += (xr[i] - mean) * (xr[i] - mean);
        var /= (double)inner;
        for (int64_t i = 0; i < inner; i++) {
            double v = (xr[i] - mean) / sqrt(var + eps);
            y[r * inner + i] = v * (w ? w[i] : 1) + (b ? b[i] : 0);
        }
    }
}

static double tol_for(em_dtype dt)
{
    return dt == EM_F64 ? 1e-10 : dt == EM_F32 ? 2e-5 : dt == EM_F16 ? 1e-2 : 6e-2;
}

static void check_layer_rms(void)
{
    for (int k = 0; k < 4; k++)
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            em_dtype dt = float_dtypes[k];
            em_scope_begin();
            em_shape s = EM_SHAPE(3, 4, 6);
            double *xv, *wv, *bv;
            em_tensor *x = h_rand(s, dt, (h_layout)l, -2, 2, &xv);
            em_tensor *w = h_rand(EM_SHAPE(4, 6), dt, (h_layout)l, -1, 1, &wv);
            em_tensor *b = h_rand(EM_SHAPE(4, 6), dt, H_CONTIG, -1, 1, &bv);
            double y[72];
            double tol = tol_for(dt);
            ref_norm_rows(xv, y, 3, 24, wv, bv, 1e-5, false);
            h_check_tensor("layer_norm 2 dims", em_layer_norm(x, 2, w, b, 1e-5), y, s, tol, tol);
            ref_norm_rows(xv, y, 12, 6, NULL, NULL, 1e-3, false);
            h_check_tensor("layer_norm no affine", em_layer_norm(x, 1, NULL, NULL, 1e-3), y, s, tol,
                           tol);
            ref_norm_rows(xv, y, 3, 24, wv, NULL, 1e-6, true);
            h_check_tensor("rms_norm", em_rms_norm(x, 2, w, 1e-6), y, s, tol, tol);
            ref_norm_rows(xv, y, 12, 6, NULL, NULL, 1e-6, true);
            h_check_tensor("rms_norm no weight", em_rms_norm(x, 1, NULL, 1e-6), y, s, tol, tol);
            free(xv);
            free(wv);
            free(bv);
            em_scope_end();
        }
    /* a large contiguous f32 case takes the parallel path */
    em_scope_begin();
    double *xv;
    em_tensor *x = h_rand(EM_SHAPE(300, 200), EM_F32, H_CONTIG, -3, 3, &xv);
    double *y = malloc(60000 * sizeof *y);
    ref_norm_rows(xv, y, 300, 200, NULL, NULL, 1e-5, false);
    h_check_tensor("layer_norm large", em_layer_norm(x, 1, NULL, NULL, 1e-5), y, EM_SHAPE(300, 200),
                   2e-5, 2e-5);
    free(y);
    free(xv);
    /* constant rows: zero variance gives zeros, not NaN */
    em_tensor *c = em_full(EM_SHAPE(2, 3), 5, EM_F32, h_dev);
    double zeros[6] = {0};
    h_check_tensor("layer_norm constant", em_layer_norm(c, 1, NULL, NULL, 1e-5), zeros,
                   EM_SHAPE(2, 3), 0, 0);
    em_tensor *e = em_layer_norm(em_zeros(EM_SHAPE(0, 3), EM_F32, h_dev), 1, NULL, NULL, 1e-5);
    CHECK(e && em_tensor_numel(e) == 0, "layer_norm of empty batch");
    em_scope_end();
}

static void check_group_batch(void)
{
    for (int k = 0; k < 4; k++)
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            em_dtype dt = float_dtypes[k];
            double tol = tol_for(dt);
            em_scope_begin();
            em_shape s = EM_SHAPE(2, 6, 3, 2);
            double *xv, *wv, *bv, *mv, *vv;
            em_tensor *x = h_rand(s, dt, (h_layout)l, -2, 2, &xv);
            em_tensor *w = h_rand(EM_SHAPE(6), dt, (h_layout)l, -1, 1, &wv);
            em_tensor *b = h_rand(EM_SHAPE(6), dt, H_CONTIG, -1, 1, &bv);
            em_tensor *m = h_rand(EM_SHAPE(6), dt, H_STRIDED, -1, 1, &mv);
            em_tensor *v = h_rand(EM_SHAPE(6), dt, H_CONTIG, 0.5, 2, &vv);
            double y[72];
            /* group norm with 3 groups: blocks of 2 channels x 6 spatial */
            ref_norm_rows(xv, y, 6, 12, NULL, NULL, 1e-5, false);
            for (int n = 0; n < 2; n++)
                for (int ch = 0; ch < 6; ch++)
                    for (int i = 0; i < 6; i++) {
                        double *p = &y[(n * 6 + ch) * 6 + i];
                        *p = *p * wv[ch] + bv[ch];
                    }
            h_check_tensor("group_norm", em_group_norm(x, 3, w, b, 1e-5), y, s, tol, tol);
            for (int n = 0; n < 2; n++)
                for (int ch = 0; ch < 6; ch++)
                    for (int i = 0; i < 6; i++) {
                        int o = (n * 6 + ch) * 6 + i;
                        y[o] = (xv[o] - mv[ch]) / sqrt(vv[ch] + 1e-5) * wv[ch] + bv[ch];
                    }
            h_check_tensor("batch_norm", em_batch_norm(x, m, v, w, b, 1e-5), y, s, tol, tol);
            for (int n = 0; n < 2; n++)
                for (int ch = 0; ch < 6; ch++)
                    for (int i = 0; i < 6; i++) {
                        int o = (n * 6 + ch) * 6 + i;
                        y[o] = (xv[o] - mv[ch]) / sqrt(vv[ch] + 1e-3);
                    }
            h_check_tensor("batch_norm no affine", em_batch_norm(x, m, v, NULL, NULL, 1e-3), y, s,
                           tol, tol);
            free(xv);
            free(wv);
            free(bv);
            free(mv);
            free(vv);
            em_scope_end();
        }
}

/* Reference attention on contiguous f64 arrays [B, L, E], [B, S, E], [B, S, Ev]; mask_kind 0/1/2
 * with a [B, L, S] mask array (already broadcast). */
static void ref_sdpa(const double *q, const double *k, const double *v, int64_t B, int64_t L,
                     int64_t S, int64_t E, int64_t Ev, const double *mask, int mask_kind,
                     bool causal, double scale, double *out)
{
    double *s = malloc((size_t)(S ? S : 1) * sizeof *s);
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < L; i++) {
            double mx = -INFINITY;
            for (int64_t j = 0; j < S; j++) {
                double dot = 0;
                for (int64_t e = 0; e < E; e++)
                    dot += q[(b * L + i) * E + e] * k[(b * S + j) * E + e];
                double sc = dot * scale;
                if (causal && j > i) sc = -INFINITY;
                if (mask_kind == 1 && mask[(b * L + i) * S + j] == 0) sc = -INFINITY;
                if (mask_kind == 2) sc += mask[(b * L + i) * S + j];
                s[j] = sc;
                if (sc > mx) mx = sc;
            }
            double sum = 0;
            for (int64_t j = 0; j < S; j++) sum += s[j] = exp(s[j] - mx);
            for (int64_t e = 0; e < Ev; e++) {
                double acc = 0;
                for (int64_t j = 0; j < S; j++) acc += s[j] / sum * v[(b * S + j) * Ev + e];
                out[(b * L + i) * Ev + e] = mx == -INFINITY ? NAN : acc;
            }
        }
    free(s);
}

static void check_sdpa(void)
{
    for (int k = 0; k < 4; k++)
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            em_dtype dt = float_dtypes[k];
            double tol = tol_for(dt) * 2;
            em_scope_begin();
            const int64_t B = 3, L = 4, S = 5, E = 6, Ev = 3;
            double *qv, *kv, *vv, *mv;
            em_tensor *q = h_rand(EM_SHAPE(B, L, E), dt, (h_layout)l, -1, 1, &qv);
            em_tensor *kt = h_rand(EM_SHAPE(B, S, E), dt, (h_layout)l, -1, 1, &kv);
            em_tensor *v = h_rand(EM_SHAPE(B, S, Ev), dt, H_CONTIG, -1, 1, &vv);
            double out[36];
            em_shape os = EM_SHAPE(B, L, Ev);
            ref_sdpa(qv, kv, vv, B, L, S, E, Ev, NULL, 0, false, 1 / sqrt(6.0), out);
            h_check_tensor("sdpa", em_sdpa(q, kt, v, NULL, (em_sdpa_opts){0}), out, os, tol, tol);
            ref_sdpa(qv, kv, vv, B, L, S, E, Ev, NULL, 0, true, 0.5, out);
            h_check_tensor("sdpa causal scale",
                           em_sdpa(q, kt, v, NULL, (em_sdpa_opts){.causal = true, .scale = 0.5}),
                           out, os, tol, tol);
            /* bool mask [L, S] broadcast over the batch */
            em_tensor *bm = h_rand(EM_SHAPE(L, S), EM_BOOL, (h_layout)l, 0, 2, &mv);
            double full[60];
            for (int64_t b = 0; b < B; b++) memcpy(full + b * L * S, mv, sizeof(double) * L * S);
            ref_sdpa(qv, kv, vv, B, L, S, E, Ev, full, 1, false, 1 / sqrt(6.0), out);
            h_check_tensor("sdpa bool mask", em_sdpa(q, kt, v, bm, (em_sdpa_opts){0}), out, os, tol,
                           tol);
            free(mv);
            /* additive mask [B, 1, S] */
            em_tensor *am = h_rand(EM_SHAPE(B, 1, S), dt, H_CONTIG, -2, 0, &mv);
            for (int64_t b = 0; b < B; b++)
                for (int64_t i = 0; i < L; i++)
                    for (int64_t j = 0; j < S; j++) full[(b * L + i) * S + j] = mv[b * S + j];
            ref_sdpa(qv, kv, vv, B, L, S, E, Ev, full, 2, false, 1 / sqrt(6.0), out);
            h_check_tensor("sdpa additive mask", em_sdpa(q, kt, v, am, (em_sdpa_opts){0}), out, os,
                           tol, tol);
            free(mv);
            free(qv);
            free(kv);
            free(vv);
            em_scope_end();
        }
    em_scope_begin();
    /* a fully masked row gives NaN, like PyTorch */
    em_tensor *q = em_ones(EM_SHAPE(2, 2), EM_F32, h_dev);
    em_tensor *none = em_zeros(EM_SHAPE(2, 2), EM_BOOL, h_dev);
    em_tensor *y = em_sdpa(q, q, q, none, (em_sdpa_opts){0});
    CHECK(y && isnan(em_get_f64(y, (int64_t[]){0, 0})), "fully masked row is NaN");
    /* batch dims broadcast: q [2, 1, L, E] with k, v [3, S, E] */
    em_tensor *qb = em_randn(EM_SHAPE(2, 1, 3, 4), EM_F32, h_dev);
    em_tensor *kb = em_randn(EM_SHAPE(3, 5, 4), EM_F32, h_dev);
    em_tensor *yb = em_sdpa(qb, kb, kb, NULL, (em_sdpa_opts){0});
    CHECK(yb && em_shape_equal(em_tensor_shape(yb), EM_SHAPE(2, 3, 3, 4)), "broadcast batch");
    em_scope_end();
}

/* Reference gradients of attention on contiguous f64 arrays: q [B, L, E], k, v [S, E], [S, Ev]
 * shared by the batch when kb is 0 (else [B, S, *]), o and g [B, L, Ev], mask [B, L, S]; dq,
 * dk, dv over the full batch. A fully masked row has no probability and no gradient. */
static void ref_sdpa_bwd(const double *q, const double *k, const double *v, const double *o,
                         const double *g, int64_t B, int64_t L, int64_t S, int64_t E, int64_t Ev,
                         bool kb, const double *mask, int mask_kind, bool causal, double scale,
                         double *dq, double *dk, double *dv)
{
    double *p = malloc((size_t)S * sizeof *p);
    memset(dk, 0, sizeof(double) * (size_t)(B * S * E));
    memset(dv, 0, sizeof(double) * (size_t)(B * S * Ev));
    for (int64_t b = 0; b < B; b++) {
        const double *kr = k + (kb ? b * S * E : 0), *vr = v + (kb ? b * S * Ev : 0);
        for (int64_t i = 0; i < L; i++) {
            const double *qi = q + (b * L + i) * E, *gi = g + (b * L + i) * Ev;
            double mx = -INFINITY;
            for (int64_t j = 0; j < S; j++) {
                double dot = 0;
                for (int64_t e = 0; e < E; e++) dot += qi[e] * kr[j * E + e];
                double sc = dot * scale;
                if (causal && j > i) sc = -INFINITY;
                if (mask_kind == 1 && mask[(b * L + i) * S + j] == 0) sc = -INFINITY;
                if (mask_kind == 2) sc += mask[(b * L + i) * S + j];
                p[j] = sc;
                if (sc > mx) mx = sc;
            }
            double sum = 0, d = 0;
            for (int64_t j = 0; j < S; j++) sum += p[j] = mx == -INFINITY ? 0 : exp(p[j] - mx);
            for (int64_t e = 0; e < Ev && mx > -INFINITY; e++) d += gi[e] * o[(b * L + i) * Ev + e];
            for (int64_t e = 0; e < E; e++) dq[(b * L + i) * E + e] = 0;
            for (int64_t j = 0; j < S; j++) {
                double pj = mx == -INFINITY ? 0 : p[j] / sum, dp = 0;
                for (int64_t e = 0; e < Ev; e++) dp += gi[e] * vr[j * Ev + e];
                double ds = pj * (dp - d);
                for (int64_t e = 0; e < E; e++) {
                    dq[(b * L + i) * E + e] += scale * ds * kr[j * E + e];
                    dk[(b * S + j) * E + e] += scale * ds * qi[e];
                }
                for (int64_t e = 0; e < Ev; e++) dv[(b * S + j) * Ev + e] += pj * gi[e];
            }
        }
    }
    free(p);
}

/* The SDPA_BACKWARD record (what the sdpa rule emits) against the reference: four dtypes and
 * layouts, causal, bool and additive masks, k and v shared by the batch, a fully masked row. */
static void check_sdpa_backward(void)
{
    for (int t = 0; t < 4; t++)
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            em_dtype dt = float_dtypes[t];
            double tol = tol_for(dt) * 2;
            em_scope_begin();
            const int64_t B = 2, L = 5, S = 7, E = 4, Ev = 3;
            double *qv, *kv, *vv, *gv, *mv;
            em_tensor *q = h_rand(EM_SHAPE(B, L, E), dt, (h_layout)l, -1, 1, &qv);
            em_tensor *kt = h_rand(EM_SHAPE(S, E), dt, (h_layout)l, -1, 1, &kv);
            em_tensor *v = h_rand(EM_SHAPE(B, S, Ev), dt, (h_layout)(3 - l), -1, 1, &vv);
            em_tensor *g = h_rand(EM_SHAPE(B, L, Ev), dt, (h_layout)l, -1, 1, &gv);
            h_rand(EM_SHAPE(L, S), EM_BOOL, (h_layout)l, 0, 2, &mv);
            double full[70], dq[40], dk[56], dv[42], *kfull = malloc(sizeof(double) * B * S * E);
            for (int64_t j = 0; j < S; j++) { /* row 1 keeps nothing, row 0 key 0 */
                mv[S + j] = 0;
                mv[j] = j == 0;
            }
            for (int64_t i = 0; i < B * S * E; i++) kfull[i] = kv[i % (S * E)];
            em_tensor *bmask = em_ne_scalar(h_from_values(mv, EM_SHAPE(L, S), EM_F64, H_CONTIG), 0);
            em_tensor *am = h_rand(EM_SHAPE(B, 1, S), dt, H_CONTIG, -2, 0, NULL);
            double *amv = h_values(am);
            for (int c = 0; c < 4; c++) {
                bool causal = c == 1 || c == 3;
                int mk = c < 2 ? 0 : c == 2 ? 1 : 2;
                em_tensor *m = mk == 1 ? bmask : mk == 2 ? am : NULL;
                double scale = c == 1 ? 0.5 : 1 / sqrt((double)E);
                for (int64_t b = 0; b < B; b++)
                    for (int64_t i = 0; i < L; i++)
                        for (int64_t j = 0; j < S; j++)
                            full[(b * L + i) * S + j] = mk == 1 ? mv[i * S + j] : amv[b * S + j];
                em_tensor *o =
                    em_sdpa(q, kt, v, m, (em_sdpa_opts){.causal = causal, .scale = scale});
                double *ov = o ? h_values(o) : NULL;
                em_tensor *gq = NULL, *gk = NULL, *gvv = NULL;
                em_status st =
                    o ? tn_sdpa_backward(q, kt, v, o, g, m, NULL, mk, causal, scale, &gq, &gk, &gvv)
                      : EM_ERR_INTERNAL;
                CHECK(st == EM_OK, "sdpa_backward %s case %d: %s", em_dtype_name(dt), c,
                      em_last_error());
                if (st == EM_OK && ov) {
                    ref_sdpa_bwd(qv, kfull, vv, ov, gv, B, L, S, E, Ev, true, full, mk, causal,
                                 scale, dq, dk, dv);
                    char what[64];
                    snprintf(what, sizeof what, "sdpa_backward %d dq", c);
                    h_check_tensor(what, gq, dq, EM_SHAPE(B, L, E), tol, tol);
                    snprintf(what, sizeof what, "sdpa_backward %d dk", c);
                    h_check_tensor(what, gk, dk, EM_SHAPE(B, S, E), tol, tol);
                    snprintf(what, sizeof what, "sdpa_backward %d dv", c);
                    h_check_tensor(what, gvv, dv, EM_SHAPE(B, S, Ev), tol, tol);
                }
                free(ov);
            }
            free(amv);
            free(kfull);
            free(qv);
            free(kv);
            free(vv);
            free(gv);
            free(mv);
            em_scope_end();
        }
    /* the shapes of the CUDA flash backward (f16/bf16, head dim 64): k and v per batch index */
    for (int t = 2; t < 4; t++)
        for (int c = 0; c < 2; c++) {
            em_dtype dt = float_dtypes[t];
            em_scope_begin();
            const int64_t B = 2, L = 70, S = 65, E = 64;
            double *qv, *kv, *vv, *gv;
            em_tensor *q = h_rand(EM_SHAPE(B, L, E), dt, H_CONTIG, -1, 1, &qv);
            em_tensor *kt = h_rand(EM_SHAPE(B, S, E), dt, H_CONTIG, -1, 1, &kv);
            em_tensor *v = h_rand(EM_SHAPE(B, S, E), dt, H_CONTIG, -1, 1, &vv);
            em_tensor *g = h_rand(EM_SHAPE(B, L, E), dt, H_CONTIG, -1, 1, &gv);
            double scale = 0.125;
            em_tensor *o = em_sdpa(q, kt, v, NULL, (em_sdpa_opts){.causal = c == 1});
            double *ov = o ? h_values(o) : NULL;
            double *dq = malloc(sizeof(double) * B * L * E),
                   *dk = malloc(sizeof(double) * B * S * E),
                   *dv = malloc(sizeof(double) * B * S * E);
            em_tensor *gq = NULL, *gk = NULL, *gvv = NULL;
            em_status st =
                o ? tn_sdpa_backward(q, kt, v, o, g, NULL, NULL, 0, c == 1, scale, &gq, &gk, &gvv)
                  : EM_ERR_INTERNAL;
            CHECK(st == EM_OK, "sdpa_backward %s D=64: %s", em_dtype_name(dt), em_last_error());
            if (st == EM_OK && ov) {
                ref_sdpa_bwd(qv, kv, vv, ov, gv, B, L, S, E, E, true, NULL, 0, c == 1, scale, dq,
                             dk, dv);
                double tol = tol_for(dt) * 2;
                h_check_tensor("sdpa_backward D=64 dq", gq, dq, EM_SHAPE(B, L, E), tol, tol);
                h_check_tensor("sdpa_backward D=64 dk", gk, dk, EM_SHAPE(B, S, E), tol, tol);
                h_check_tensor("sdpa_backward D=64 dv", gvv, dv, EM_SHAPE(B, S, E), tol, tol);
            }
            free(ov);
            free(dq);
            free(dk);
            free(dv);
            free(qv);
            free(kv);
            free(vv);
            free(gv);
            em_scope_end();
        }
    /* no keys or no queries: zero gradients */
    em_scope_begin();
    em_tensor *q = em_ones(EM_SHAPE(2, 3, 4), EM_F32, h_dev),
              *k0 = em_ones(EM_SHAPE(2, 0, 4), EM_F32, h_dev);
    em_tensor *o = em_sdpa(q, k0, k0, NULL, (em_sdpa_opts){0});
    em_tensor *gq = NULL, *gk = NULL, *gv = NULL;
    CHECK(o && tn_sdpa_backward(q, k0, k0, o, o, NULL, NULL, 0, false, 0.5, &gq, &gk, &gv) == EM_OK,
          "sdpa_backward S = 0");
    if (gq) CHECK(em_item_f64(em_sum(em_abs(gq), EM_ALL, false)) == 0, "sdpa_backward S = 0: dq");
    em_scope_end();
}

static void check_fixtures(void)
{
    h_fixture *fx = h_fixture_load("norm.emfx");
    if (!fx) return;
    em_scope_begin();
    em_shape s;
    em_tensor *x = h_fixture_tensor(fx, "ln.x");
    em_tensor *xf = em_cast(x, EM_F32);
    const double *want = h_fixture_values(fx, "ln.y", &s);
    em_tensor *w = h_fixture_tensor(fx, "ln.w"), *b = h_fixture_tensor(fx, "ln.b");
    h_check_tensor("torch layer_norm f64", em_layer_norm(x, 2, w, b, 1e-5), want, s, 1e-10, 1e-10);
    h_check_tensor("torch layer_norm f32",
                   em_layer_norm(xf, 2, em_cast(w, EM_F32), em_cast(b, EM_F32), 1e-5), want, s,
                   1e-5, 1e-5);
    want = h_fixture_values(fx, "ln.y_noaffine", &s);
    h_check_tensor("torch layer_norm no affine", em_layer_norm(x, 1, NULL, NULL, 1e-3), want, s,
                   1e-10, 1e-10);
    want = h_fixture_values(fx, "rms.y", &s);
    h_check_tensor("torch rms_norm", em_rms_norm(x, 1, h_fixture_tensor(fx, "rms.w"), 1e-6), want,
                   s, 1e-10, 1e-10);
    em_tensor *xg = h_fixture_tensor(fx, "gn.x");
    em_tensor *wg = h_fixture_tensor(fx, "gn.w"), *bg = h_fixture_tensor(fx, "gn.b");
    want = h_fixture_values(fx, "gn.y", &s);
    h_check_tensor("torch group_norm", em_group_norm(xg, 3, wg, bg, 1e-5), want, s, 1e-10, 1e-10);
    h_check_tensor(
        "torch group_norm f32",
        em_group_norm(em_cast(xg, EM_F32), 3, em_cast(wg, EM_F32), em_cast(bg, EM_F32), 1e-5), want,
        s, 1e-5, 1e-5);
    want = h_fixture_values(fx, "bn.y", &s);
    h_check_tensor("torch batch_norm",
                   em_batch_norm(xg, h_fixture_tensor(fx, "bn.mean"),
                                 h_fixture_tensor(fx, "bn.var"), wg, bg, 1e-5),
                   want, s, 1e-10, 1e-10);
    em_tensor *q = h_fixture_tensor(fx, "sdpa.q"), *k = h_fixture_tensor(fx, "sdpa.k"),
              *v = h_fixture_tensor(fx, "sdpa.v");
    em_tensor *bm = em_cast(h_fixture_tensor(fx, "sdpa.bool_mask"), EM_BOOL);
    em_tensor *am = h_fixture_tensor(fx, "sdpa.add_mask");
    want = h_fixture_values(fx, "sdpa.y", &s);
    h_check_tensor("torch sdpa", em_sdpa(q, k, v, NULL, (em_sdpa_opts){0}), want, s, 1e-10, 1e-10);
    h_check_tensor("torch sdpa f32",
                   em_sdpa(em_cast(q, EM_F32), em_cast(k, EM_F32), em_cast(v, EM_F32), NULL,
                           (em_sdpa_opts){0}),
                   want, s, 1e-5, 1e-5);
    want = h_fixture_values(fx, "sdpa.y_causal", &s);
    h_check_tensor("torch sdpa causal", em_sdpa(q, k, v, NULL, (em_sdpa_opts){.causal = true}),
                   want, s, 1e-10, 1e-10);
    want = h_fixture_values(fx, "sdpa.y_bool", &s);
    h_check_tensor("torch sdpa bool mask", em_sdpa(q, k, v, bm, (em_sdpa_opts){0}), want, s, 1e-10,
                   1e-10);
    want = h_fixture_values(fx, "sdpa.y_add", &s);
    h_check_tensor("torch sdpa additive mask", em_sdpa(q, k, v, am, (em_sdpa_opts){.scale = 0.3}),
                   want, s, 1e-10, 1e-10);
    em_scope_end();
    h_fixture_free(fx);
}

static void check_dropout(void)
{
    em_scope_begin();
    em_tensor *x = em_ones(EM_SHAPE(100, 100), EM_F32, h_dev);
    em_seed(5);
    em_tensor *y = em_dropout(x, 0.3, true);
    double *v = h_values(y);
    int zeros = 0, scaled = 0;
    for (int i = 0; i < 10000; i++) {
        zeros += v[i] == 0;
        scaled += fabs(v[i] - 1 / 0.7) < 1e-6;
    }
    CHECK(zeros + scaled == 10000, "dropout outputs 0 or x/(1-p)");
    CHECK(abs(zeros - 3000) < 200, "dropout drops about 30%% (%d)", zeros);
    free(v);
    em_seed(5);
    em_tensor *y2 = em_dropout(em_transpose(x, 0, 1), 0.3, true);
    double *v1 = h_values(y), *v2 = h_values(y2);
    CHECK(memcmp(v1, v2, 10000 * sizeof(double)) == 0, "dropout mask depends only on the seed");
    free(v1);
    free(v2);
    em_tensor *id = em_dropout(x, 0.3, false);
    CHECK(id && em_tensor_shares_storage(id, x), "eval-mode dropout is the identity");
    em_tensor *all = em_dropout(em_cast(x, EM_BF16), 1, true);
    double zero1[1] = {0};
    h_check_tensor("dropout p=1", em_narrow(em_reshape(all, EM_SHAPE(-1)), 0, 77, 1), zero1,
                   EM_SHAPE(1), 0, 0);
    CHECK(em_dropout(x, 1.5, true) == NULL, "p > 1");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_dropout: probability 1.5");
    CHECK(em_dropout(em_zeros(EM_SHAPE(2), EM_I32, h_dev), 0.5, true) == NULL, "int dropout");
    CHECK_ERR(EM_ERR_DTYPE, "em_dropout");
    em_scope_end();
}

static void check_errors(void)
{
    em_scope_begin();
    em_tensor *x = em_ones(EM_SHAPE(2, 4, 3), EM_F32, h_dev);
    em_tensor *w = em_ones(EM_SHAPE(4), EM_F32, h_dev);
    CHECK(em_layer_norm(x, 1, w, NULL, 1e-5) == NULL, "layer_norm weight shape");
    CHECK_ERR(EM_ERR_SHAPE, "em_layer_norm: weight has shape [4], expected [3]");
    CHECK(em_layer_norm(x, 4, NULL, NULL, 1e-5) == NULL, "layer_norm too many dims");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_layer_norm");
    CHECK(em_layer_norm(NULL, 1, NULL, NULL, 1e-5) == NULL, "layer_norm NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_layer_norm: argument `x` is NULL");
    CHECK(em_rms_norm(em_ones(EM_SHAPE(2), EM_I64, h_dev), 1, NULL, 1e-5) == NULL, "rms int");
    CHECK_ERR(EM_ERR_DTYPE, "em_rms_norm: x must be a float tensor, got i64");
    CHECK(em_group_norm(x, 3, NULL, NULL, 1e-5) == NULL, "groups do not divide");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_group_norm: 3 groups do not divide 4 channels");
    CHECK(em_batch_norm(x, w, em_ones(EM_SHAPE(4), EM_F64, h_dev), NULL, NULL, 1e-5) == NULL,
          "batch_norm var dtype");
    CHECK_ERR(EM_ERR_DTYPE, "em_batch_norm: var has dtype f64");
    CHECK(em_batch_norm(x, NULL, w, NULL, NULL, 1e-5) == NULL, "batch_norm NULL mean");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_batch_norm");
    em_tensor *q = em_ones(EM_SHAPE(2, 3, 4), EM_F32, h_dev);
    em_tensor *k = em_ones(EM_SHAPE(2, 5, 3), EM_F32, h_dev);
    CHECK(em_sdpa(q, k, k, NULL, (em_sdpa_opts){0}) == NULL, "sdpa E mismatch");
    CHECK_ERR(EM_ERR_SHAPE, "em_sdpa: shapes q [2, 3, 4], k [2, 5, 3]");
    em_tensor *k2 = em_ones(EM_SHAPE(2, 5, 4), EM_F32, h_dev);
    em_tensor *m = em_ones(EM_SHAPE(3, 4), EM_BOOL, h_dev);
    CHECK(em_sdpa(q, k2, k2, m, (em_sdpa_opts){0}) == NULL, "sdpa mask shape");
    CHECK_ERR(EM_ERR_SHAPE, "em_sdpa: mask of shape [3, 4]");
    CHECK(em_sdpa(q, k2, em_cast(k2, EM_F64), NULL, (em_sdpa_opts){0}) == NULL, "sdpa dtypes");
    CHECK_ERR(EM_ERR_DTYPE, "em_sdpa");
    em_scope_end();
}

/* Reference for NORM_BACKWARD: dx, dw (sum over rows of g xhat), db (sum over rows of g) in f64
 * from the stored values, each rounded to dt. */
static void ref_norm_backward(const double *x, const double *w, const double *g, int64_t rows,
                              int64_t n, double eps, bool rms, em_dtype dt, double *dx, double *dw,
                              double *db)
{
    for (int64_t i = 0; i < n; i++) dw[i] = db[i] = 0;
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * n, *gr = g + r * n;
        double mean = 0, var = 0, s1 = 0, s2 = 0;
        for (int64_t i = 0; i < n && !rms; i++) mean += xr[i] / (double)n;
        for (int64_t i = 0; i < n; i++) var += (xr[i] - mean) * (xr[i] - mean) / (double)n;
        double rstd = 1 / sqrt(var + eps);
        for (int64_t i = 0; i < n; i++) {
            double xh = (xr[i] - mean) * rstd;
            s1 += gr[i] * (w ? w[i] : 1);
            s2 += gr[i] * (w ? w[i] : 1) * xh;
            dw[i] += gr[i] * xh;
            db[i] += gr[i];
        }
        for (int64_t i = 0; i < n; i++) {
            double gx = gr[i] * (w ? w[i] : 1), xh = (xr[i] - mean) * rstd;
            dx[r * n + i] =
                h_round_to(rstd * (gx - (rms ? 0 : s1 / (double)n) - xh * s2 / (double)n), dt);
        }
    }
    for (int64_t i = 0; i < n; i++) dw[i] = h_round_to(dw[i], dt), db[i] = h_round_to(db[i], dt);
}

/* tn_norm_backward (the layer / RMS norm gradients' record) against f64: every float dtype, x,
 * weight and g in every layout (short rows), one and two normalised dims, rows long enough for
 * every kernel a device picks by length (and past its register rows), more rows than a device
 * grid's blocks (the weight's partial sums), empty batches (zero weight gradients) and empty rows;
 * on a device also the CPU's record; wrong shapes and arguments fail. */
static void check_norm_backward(void)
{
    const em_shape shapes[] = {EM_SHAPE(3, 4, 6), EM_SHAPE(7),        EM_SHAPE(33, 10),
                               EM_SHAPE(5, 1),    EM_SHAPE(7, 100),   EM_SHAPE(5, 333),
                               EM_SHAPE(3, 1000), EM_SHAPE(2, 3000),  EM_SHAPE(3, 8192),
                               EM_SHAPE(2, 9000), EM_SHAPE(1100, 64), EM_SHAPE(600, 256),
                               EM_SHAPE(0, 5),    EM_SHAPE(4, 0)};
    const int ns = (int)(sizeof shapes / sizeof shapes[0]);
    for (int di = 0; di < 4; di++)
        for (int si = 0; si < ns; si++)
            for (int nn = 1; nn <= (si == 0 ? 2 : 1); nn++) {
                em_dtype dt = float_dtypes[di];
                em_shape s = shapes[si];
                bool small = si < 4;
                int64_t numel = em_shape_numel(s), n = 1;
                em_shape ws = {.rank = nn};
                for (int k = 0; k < nn; k++) n *= ws.dims[k] = s.dims[s.rank - nn + k];
                int64_t rows = n ? numel / n : 0;
                em_scope_begin();
                double *xv, *wv, *gv;
                h_rand(s, dt, H_CONTIG, -2, 3, &xv);
                h_rand(ws, dt, H_CONTIG, -1.5, 1.5, &wv);
                h_rand(s, dt, H_CONTIG, -1, 1, &gv);
                double *edx = malloc((size_t)(numel ? numel : 1) * sizeof *edx);
                double *edw = malloc((size_t)(n ? n : 1) * sizeof *edw);
                double *edb = malloc((size_t)(n ? n : 1) * sizeof *edb);
                for (int lay = 0; lay < (small ? H_LAYOUT_COUNT : 1); lay++)
                    for (int v = 0; v < 4; v++) { /* rms, has weight: 00 01 10 11 */
                        em_scope_begin();
                        bool rms = v & 2, has_w = v & 1;
                        double eps = rms ? 1e-6 : 1e-5;
                        em_tensor *x = h_from_values(xv, s, dt, (h_layout)lay);
                        em_tensor *w =
                            has_w ? h_from_values(wv, ws, dt, (h_layout)((lay + 1) % 4)) : NULL;
                        em_tensor *g = h_from_values(gv, s, dt, (h_layout)((lay + 2) % 4));
                        ref_norm_backward(xv, has_w ? wv : NULL, gv, rows, n, eps, rms, dt, edx,
                                          edw, edb);
                        char what[128], sh[64];
                        snprintf(what, sizeof what, "norm_backward %s %s n_norm %d layout %d %s%s",
                                 em_shape_str(s, sh, sizeof sh), em_dtype_name(dt), nn, lay,
                                 rms ? "rms" : "layer", has_w ? " weight" : "");
                        double atol = h_atol(dt) * 4, rtol = h_rtol(dt) * 4;
                        em_tensor *d[3] = {NULL, NULL, NULL};
                        bool with_b = !rms && (lay & 1) == 0;
                        for (int dev = 0; dev < (h_dev.backend != 0 ? 2 : 1); dev++) {
                            em_tensor *xx = dev ? em_to_device(x, EM_CPU) : x;
                            em_tensor *ww = dev && w ? em_to_device(w, EM_CPU) : w;
                            em_tensor *gg = dev ? em_to_device(g, EM_CPU) : g;
                            em_status st =
                                tn_norm_backward(xx, ww, gg, nn, eps, rms, &d[0],
                                                 has_w ? &d[1] : NULL, with_b ? &d[2] : NULL);
                            CHECK(st == EM_OK, "%s: %s", what, em_last_error());
                            h_check_tensor(what, d[0], edx, s, atol, rtol);
                            if (has_w) h_check_tensor(what, d[1], edw, ws, atol, rtol);
                            if (with_b) h_check_tensor(what, d[2], edb, ws, atol, rtol);
                        }
                        CHECK_OK(what);
                        em_scope_end();
                    }
                free(xv);
                free(wv);
                free(gv);
                free(edx);
                free(edw);
                free(edb);
                em_scope_end();
            }
    em_scope_begin();
    em_tensor *x = em_zeros(EM_SHAPE(2, 3), EM_F32, h_dev), *d = NULL, *dw = NULL, *db = NULL;
    CHECK(tn_norm_backward(x, NULL, em_zeros(EM_SHAPE(2, 4), EM_F32, h_dev), 1, 1e-5, false, &d,
                           NULL, NULL) != EM_OK &&
              !d,
          "g of another shape");
    CHECK_ERR(EM_ERR_SHAPE, "tn_norm_backward: g has shape [2, 4], expected [2, 3]");
    CHECK(tn_norm_backward(x, em_zeros(EM_SHAPE(3), EM_F64, h_dev), x, 1, 1e-5, false, &d, &dw,
                           NULL) != EM_OK,
          "weight of another dtype");
    CHECK_ERR(EM_ERR_DTYPE, "tn_norm_backward: weight has dtype f64");
    CHECK(tn_norm_backward(x, NULL, x, 1, 1e-5, false, &d, &dw, NULL) != EM_OK && !dw,
          "a weight gradient without a weight");
    CHECK_ERR(EM_ERR_INVALID_ARG, "tn_norm_backward");
    CHECK(tn_norm_backward(x, NULL, x, 1, 1e-5, true, &d, NULL, &db) != EM_OK,
          "a bias gradient for rms norm");
    CHECK_ERR(EM_ERR_INVALID_ARG, "tn_norm_backward");
    CHECK(tn_norm_backward(x, NULL, x, 3, 1e-5, false, &d, NULL, NULL) != EM_OK,
          "n_norm past the rank");
    CHECK_ERR(EM_ERR_INVALID_ARG, "tn_norm_backward: n_norm 3 of a rank-2 x");
    em_scope_end();
}

void conf_norm(void)
{
    check_layer_rms();
    check_norm_backward();
    check_group_batch();
    check_sdpa();
    check_sdpa_backward();
    check_fixtures();
    check_dropout();
    check_errors();
}
