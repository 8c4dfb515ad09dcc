/* The CPU attention's GEMM path (blocks of query rows, several blocks per batch, threads) against
 * a plain f64 reference written here: causal, bool and additive masks, transposed operands,
 * broadcast batch dims, a non-finite V (the row-by-row path) and a fully masked row. */
#include <math.h>
#include <string.h>

#include "harness.h"

/* out[b, i, :] for q [B, L, E], k [B, S, E], v [B, S, Ev]; keep/add [L, S] shared by batches. */
static void ref(const double *q, const double *k, const double *v, int64_t B, int64_t L, int64_t S,
                int64_t E, int64_t Ev, const double *keep, const double *add, bool causal,
                double scale, double *out)
{
    double *s = malloc((size_t)S * sizeof *s);
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < L; i++) {
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < S; j++) {
                bool kp = !(causal && j > i) && (!keep || keep[i * S + j] != 0);
                double d = 0;
                for (int64_t e = 0; e < E; e++)
                    d += q[(b * L + i) * E + e] * k[(b * S + j) * E + e];
                s[j] = kp ? d * scale + (add ? add[i * S + j] : 0) : -INFINITY;
                if (s[j] > mx) mx = s[j];
            }
            for (int64_t j = 0; j < S; j++) sum += s[j] = mx == -INFINITY ? NAN : exp(s[j] - mx);
            for (int64_t e = 0; e < Ev; e++) {
                double acc = 0;
                for (int64_t j = 0; j < S; j++)
                    if (s[j] / sum != 0) acc += s[j] / sum * v[(b * S + j) * Ev + e];
                out[(b * L + i) * Ev + e] = acc;
            }
        }
    free(s);
}

static void check_case(const char *tag, em_dtype dt, int64_t B, int64_t L, int64_t S, int64_t E,
                       int64_t Ev, int masks, bool causal, h_layout lay, bool inf_v)
{
    em_scope_begin();
    double *qv, *kv, *vv, *mv = NULL;
    em_tensor *q = h_rand(EM_SHAPE(B, L, E), dt, lay, -1, 1, &qv);
    em_tensor *k = h_rand(EM_SHAPE(B, S, E), dt, lay, -1, 1, &kv);
    em_tensor *v = h_rand(EM_SHAPE(B, S, Ev), dt, lay, -1, 1, &vv);
    if (inf_v) { /* V[0, 3, 1] = inf at a key every row masks out (causal, j = 3 > row 0..2) */
        vv[3 * Ev + 1] = INFINITY;
        em_tensor *c = h_from_f64(vv, EM_SHAPE(B, S, Ev));
        v = em_cast(c, dt);
    }
    em_tensor *mask = NULL;
    double *keep = NULL, *add = NULL;
    if (masks == 1) {
        mask = h_rand(EM_SHAPE(L, S), EM_BOOL, H_CONTIG, 0, 2, &mv);
        for (int64_t j = 0; j < S; j++) mv[j] = 1; /* row 0 keeps everything: never empty */
        mask = em_cast(h_from_f64(mv, EM_SHAPE(L, S)), EM_BOOL);
        keep = mv;
    } else if (masks == 2) {
        mask = h_rand(EM_SHAPE(L, S), dt, H_CONTIG, -2, 0, &mv);
        add = mv;
    }
    double scale = 1 / sqrt((double)E);
    double *want = malloc((size_t)(B * L * Ev) * sizeof *want);
    ref(qv, kv, vv, B, L, S, E, Ev, keep, add, causal, scale, want);
    em_tensor *y = em_sdpa(q, k, v, mask, (em_sdpa_opts){.causal = causal});
    double tol = dt == EM_F32 ? 2e-5 : 1e-12;
    h_check_tensor(tag, y, want, EM_SHAPE(B, L, Ev), tol, tol);
    free(qv), free(kv), free(vv), free(mv), free(want);
    em_scope_end();
}

int main(void)
{
    h_init();
    int threads0 = em_get_num_threads();
    for (int t = 0; t < 2; t++) {
        int threads = t ? 2 : 1;
        em_set_num_threads(threads);
        for (int d = 0; d < 2; d++) {
            em_dtype dt = d ? EM_F64 : EM_F32;
            check_case("plain", dt, 2, 150, 130, 24, 20, 0, false, H_CONTIG, false);
            check_case("causal", dt, 3, 130, 130, 16, 8, 0, true, H_CONTIG, false);
            check_case("bool mask", dt, 1, 70, 33, 8, 5, 1, false, H_CONTIG, false);
            check_case("additive mask causal", dt, 2, 66, 66, 8, 12, 2, true, H_CONTIG, false);
            check_case("transposed", dt, 2, 90, 40, 12, 7, 0, false, H_TRANSPOSED, false);
            check_case("inf in V, masked", dt, 1, 80, 80, 8, 4, 0, true, H_CONTIG, true);
            check_case("one key", dt, 2, 65, 1, 4, 3, 0, false, H_CONTIG, false);
        }
    }
    em_set_num_threads(threads0);
    /* broadcast batch dims: q [2, 1, L, E], k = v [3, S, E], against the same per-batch case */
    em_scope_begin();
    em_tensor *q = em_randn(EM_SHAPE(2, 1, 70, 8), EM_F64, h_dev);
    em_tensor *k = em_randn(EM_SHAPE(3, 40, 8), EM_F64, h_dev);
    em_tensor *y = em_sdpa(q, k, k, NULL, (em_sdpa_opts){0});
    em_tensor *qe = em_contiguous(em_expand(q, EM_SHAPE(2, 3, 70, 8)));
    em_tensor *ke = em_contiguous(em_expand(k, EM_SHAPE(2, 3, 40, 8)));
    double *want = h_values(em_sdpa(qe, ke, ke, NULL, (em_sdpa_opts){0}));
    h_check_tensor("broadcast batch", y, want, EM_SHAPE(2, 3, 70, 8), 1e-12, 1e-12);
    free(want);
    /* a fully masked row is NaN */
    em_tensor *none = em_zeros(EM_SHAPE(70, 40), EM_BOOL, h_dev);
    em_tensor *yn = em_sdpa(q, k, k, none, (em_sdpa_opts){0});
    CHECK(yn && isnan(em_get_f64(yn, (int64_t[]){1, 2, 69, 7})), "fully masked row is NaN");
    em_scope_end();
    return h_finish();
}
