/* Conformance of ordering ops (sort, argsort, topk, median) against an O(n^2) rank-counting
 * reference, plus PyTorch golden fixtures (tests/fixtures/order.emfx from
 * scripts/fixtures_order.py). */
#include <string.h>

#include "conf.h"

static const em_dtype dtypes[] = {EM_F64, EM_F32, EM_F16, EM_BF16, EM_I64,
                                  EM_I32, EM_I16, EM_I8,  EM_U8,   EM_BOOL};
#define N_DTYPES (int)(sizeof dtypes / sizeof dtypes[0])

static bool lt_nan(double a, double b)
{
    return !isnan(a) && (isnan(b) || a < b);
}

static bool same(double a, double b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

/* True when element j (value a) goes ahead of element i (value b) in a stable sort. */
static bool ahead(double a, int64_t j, double b, int64_t i, bool desc)
{
    if (same(a, b)) return j < i;
    return desc ? lt_nan(b, a) : lt_nan(a, b);
}

/* Row-major argsort of xv (shape s) along dim, by counting for each element how many go
 * ahead of it. */
static int64_t *ref_argsort(const double *xv, em_shape s, int dim, bool desc)
{
    int64_t numel = em_shape_numel(s);
    int64_t *out = malloc((size_t)(numel ? numel : 1) * sizeof *out);
    if (numel == 0) return out;
    int64_t n = s.dims[dim];
    int64_t idx[EM_MAX_RANK] = {0};
    do {
        if (idx[dim] != 0) continue;
        int64_t base[EM_MAX_RANK];
        memcpy(base, idx, sizeof base);
        for (int64_t i = 0; i < n; i++) {
            base[dim] = i;
            double b = xv[h_offset(s, base)];
            int64_t rank = 0;
            for (int64_t j = 0; j < n; j++) {
                base[dim] = j;
                if (j != i && ahead(xv[h_offset(s, base)], j, b, i, desc)) rank++;
            }
            base[dim] = rank;
            out[h_offset(s, base)] = i;
        }
    } while (h_next_index(s, idx));
    return out;
}

/* Values / indices of the first k of each row of an argsort (shape s -> s with dim = k). */
static void ref_take(const double *xv, const int64_t *order, em_shape s, int dim, int64_t k,
                     double *vals, double *inds)
{
    em_shape ys = s;
    ys.dims[dim] = k;
    if (em_shape_numel(ys) == 0) return;
    int64_t idx[EM_MAX_RANK] = {0};
    do {
        int64_t src[EM_MAX_RANK];
        memcpy(src, idx, sizeof src);
        int64_t o = order[h_offset(s, src)];
        src[dim] = o;
        vals[h_offset(ys, idx)] = xv[h_offset(s, src)];
        inds[h_offset(ys, idx)] = (double)o;
    } while (h_next_index(ys, idx));
}

/* Random values with many ties; NaN and infinities sprinkled in for float dtypes. */
static em_tensor *tie_rand(em_shape s, em_dtype dt, h_layout lay, double **values)
{
    int64_t n = em_shape_numel(s);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        double x = floor(h_uniform() * 9) - (dt == EM_U8 || dt == EM_BOOL ? 0 : 4);
        if (em_dtype_is_float(dt)) {
            double u = h_uniform();
            if (u < 0.08)
                x = NAN;
            else if (u < 0.12)
                x = INFINITY;
            else if (u < 0.16)
                x = -INFINITY;
            else if (u < 0.5)
                x += 0.5;
        }
        v[i] = h_round_to(x, dt);
    }
    *values = v;
    return h_from_values(v, s, dt, lay);
}

static void check_sort_topk(void)
{
    static const em_shape shapes[] = {
        {2, {4, 9}}, {1, {13}}, {3, {2, 1, 3}}, {2, {3, 0}}, {3, {3, 5, 2}}};
    for (int k = 0; k < N_DTYPES; k++) {
        em_dtype dt = dtypes[k];
        for (int lay = 0; lay < H_LAYOUT_COUNT; lay++) {
            for (int si = 0; si < (int)(sizeof shapes / sizeof shapes[0]); si++) {
                em_shape s = shapes[si];
                for (int dim = 0; dim < s.rank; dim++) {
                    em_scope_begin();
                    double *xv;
                    em_tensor *x = tie_rand(s, dt, (h_layout)lay, &xv);
                    int64_t numel = em_shape_numel(s);
                    double *ev = malloc((size_t)(numel + 1) * sizeof *ev);
                    double *ei = malloc((size_t)(numel + 1) * sizeof *ei);
                    for (int desc = 0; desc < 2; desc++) {
                        int64_t *order = ref_argsort(xv, s, dim, desc);
                        ref_take(xv, order, s, dim, s.dims[dim], ev, ei);
                        em_tensor *v = NULL, *ix = NULL;
                        char what[96];
                        snprintf(what, sizeof what, "sort %s layout %d shape %d dim %d desc %d",
                                 em_dtype_name(dt), lay, si, dim, desc);
                        CHECK(em_sort(x, dim, desc, &v, &ix) == EM_OK, "%s runs", what);
                        h_check_tensor(what, v, ev, s, 0, 0);
                        h_check_tensor(what, ix, ei, s, 0, 0);
                        CHECK(!v || em_tensor_dtype(v) == dt, "%s keeps the dtype", what);
                        h_check_tensor("argsort", em_argsort(x, dim - s.rank, desc), ei, s, 0, 0);
                        int64_t n = s.dims[dim];
                        int64_t ks[4] = {0, 1, n / 2, n};
                        for (int q = 0; q < 4; q++) {
                            if (ks[q] > n) continue;
                            em_shape ys = s;
                            ys.dims[dim] = ks[q];
                            ref_take(xv, order, s, dim, ks[q], ev, ei);
                            v = ix = NULL;
                            snprintf(what, sizeof what,
                                     "topk %s layout %d shape %d dim %d k %lld %s",
                                     em_dtype_name(dt), lay, si, dim, (long long)ks[q],
                                     desc ? "largest" : "smallest");
                            CHECK(em_topk(x, ks[q], dim, desc, &v, &ix) == EM_OK, "%s runs", what);
                            h_check_tensor(what, v, ev, ys, 0, 0);
                            h_check_tensor(what, ix, ei, ys, 0, 0);
                        }
                        free(order);
                    }
                    free(ev);
                    free(ei);
                    free(xv);
                    em_scope_end();
                }
            }
        }
    }
    /* long rows: the small-k selection path and the full sort path, plus parallel rows */
    for (int lay = 0; lay < H_LAYOUT_COUNT; lay++) {
        em_scope_begin();
        em_shape s = EM_SHAPE(6, 300);
        double *xv;
        em_tensor *x = tie_rand(s, EM_F32, (h_layout)lay, &xv);
        double *ev = malloc(1800 * sizeof *ev), *ei = malloc(1800 * sizeof *ei);
        for (int desc = 0; desc < 2; desc++) {
            int64_t *order = ref_argsort(xv, s, 1, desc);
            for (int q = 0; q < 3; q++) {
                int64_t kk = q == 0 ? 5 : q == 1 ? 32 : 150;
                ref_take(xv, order, s, 1, kk, ev, ei);
                em_tensor *v, *ix;
                CHECK(em_topk(x, kk, 1, desc, &v, &ix) == EM_OK, "topk long");
                h_check_tensor("topk long values", v, ev, EM_SHAPE(6, kk), 0, 0);
                h_check_tensor("topk long indices", ix, ei, EM_SHAPE(6, kk), 0, 0);
            }
            free(order);
        }
        free(ev);
        free(ei);
        free(xv);
        em_scope_end();
    }
    em_scope_begin();
    /* i64 values that collide as doubles still sort exactly */
    int64_t big[4] = {(1LL << 60) + 3, (1LL << 60) + 1, (1LL << 60) + 2, -(1LL << 60)};
    em_tensor *b = h_from_i64(big, EM_SHAPE(4));
    h_check_tensor("argsort i64 exact", em_argsort(b, 0, false), (double[]){3, 1, 2, 0},
                   EM_SHAPE(4), 0, 0);
    /* rank 0 */
    em_tensor *sc = em_scalar(3, EM_F32, h_dev), *v, *ix;
    CHECK(em_sort(sc, 0, false, &v, &ix) == EM_OK && em_tensor_rank(v) == 0 &&
              em_item_f64(v) == 3 && em_item_i64(ix) == 0,
          "sort of a scalar");
    em_scope_end();
}

/* ---- median ------------------------------------------------------------------------------ */

static void check_median(void)
{
    static const em_shape shapes[] = {{2, {4, 7}}, {2, {3, 8}}, {1, {1}}, {3, {2, 1, 4}}};
    for (int k = 0; k < N_DTYPES; k++) {
        em_dtype dt = dtypes[k];
        for (int lay = 0; lay < H_LAYOUT_COUNT; lay++) {
            for (int si = 0; si < 4; si++) {
                em_shape s = shapes[si];
                for (int dim = 0; dim < s.rank; dim++) {
                    em_scope_begin();
                    double *xv;
                    em_tensor *x = tie_rand(s, dt, (h_layout)lay, &xv);
                    int64_t *order = ref_argsort(xv, s, dim, false);
                    int64_t n = s.dims[dim];
                    em_shape ks = s, ds = {.rank = 0};
                    ks.dims[dim] = 1;
                    for (int d = 0; d < s.rank; d++)
                        if (d != dim) ds.dims[ds.rank++] = s.dims[d];
                    int64_t m = em_shape_numel(ks);
                    double *ev = malloc((size_t)m * sizeof *ev),
                           *ei = malloc((size_t)m * sizeof *ei);
                    int64_t idx[EM_MAX_RANK] = {0};
                    do {
                        int64_t src[EM_MAX_RANK];
                        memcpy(src, idx, sizeof src);
                        int64_t pick = -1;
                        for (int64_t j = 0; j < n && pick < 0; j++) { /* torch: first NaN */
                            src[dim] = j;
                            if (isnan(xv[h_offset(s, src)])) pick = j;
                        }
                        if (pick < 0) {
                            src[dim] = (n - 1) / 2;
                            pick = order[h_offset(s, src)];
                        }
                        src[dim] = pick;
                        ev[h_offset(ks, idx)] = xv[h_offset(s, src)];
                        ei[h_offset(ks, idx)] = (double)pick;
                    } while (h_next_index(ks, idx));
                    for (int keep = 0; keep < 2; keep++) {
                        em_tensor *v = NULL, *ix = NULL;
                        char what[96];
                        snprintf(what, sizeof what, "median %s layout %d shape %d dim %d keep %d",
                                 em_dtype_name(dt), lay, si, dim, keep);
                        CHECK(em_median(x, dim, keep, &v, &ix) == EM_OK, "%s runs", what);
                        h_check_tensor(what, v, ev, keep ? ks : ds, 0, 0);
                        h_check_tensor(what, ix, ei, keep ? ks : ds, 0, 0);
                    }
                    free(ev);
                    free(ei);
                    free(order);
                    free(xv);
                    em_scope_end();
                }
            }
        }
    }
    em_scope_begin();
    double fv[6] = {5, 1, 4, 2, 6, 3};
    em_tensor *x = h_from_values(fv, EM_SHAPE(2, 3), EM_I32, H_TRANSPOSED);
    em_tensor *v = NULL, *ix = NULL;
    CHECK(em_median(x, EM_FLAT, false, &v, &ix) == EM_OK && em_tensor_rank(v) == 0 &&
              em_item_f64(v) == 3 && em_item_i64(ix) == 5,
          "median of all elements (lower median 3 at flat index 5)");
    v = NULL;
    CHECK(em_median(x, EM_FLAT, false, &v, NULL) == EM_OK && v && em_item_f64(v) == 3,
          "median of all without indices");
    em_scope_end();
}

/* ---- PyTorch fixtures -------------------------------------------------------------------- */

static void check_fixture_pair(h_fixture *fx, const char *vname, const char *iname, em_tensor *v,
                               em_tensor *ix, em_dtype dt)
{
    em_shape s;
    const double *ev = h_fixture_values(fx, vname, &s);
    const double *ei = h_fixture_values(fx, iname, &s);
    if (!ev || !ei) return;
    h_check_tensor(vname, v, ev, s, h_atol(dt), h_rtol(dt));
    h_check_tensor(iname, ix, ei, s, 0, 0);
}

static void check_fixtures(void)
{
    h_fixture *fx = h_fixture_load("order.emfx");
    if (!fx) return;
    static const em_dtype fdt[] = {EM_F64, EM_F32};
    for (int k = 0; k < 2; k++) {
        em_dtype dt = fdt[k];
        for (int lay = 0; lay < H_LAYOUT_COUNT; lay++) {
            em_scope_begin();
            em_shape s;
            const double *xv = h_fixture_values(fx, "sort_x", &s);
            em_tensor *x = h_from_values(xv, s, dt, (h_layout)lay);
            em_tensor *v, *ix;
            static const char *names[4][2] = {{"sort_d1_asc_v", "sort_d1_asc_i"},
                                              {"sort_d1_desc_v", "sort_d1_desc_i"},
                                              {"sort_d0_asc_v", "sort_d0_asc_i"},
                                              {"sort_d0_desc_v", "sort_d0_desc_i"}};
            for (int q = 0; q < 4; q++) {
                CHECK(em_sort(x, q < 2 ? 1 : 0, q % 2, &v, &ix) == EM_OK, "sort fixture");
                check_fixture_pair(fx, names[q][0], names[q][1], v, ix, dt);
            }
            xv = h_fixture_values(fx, "topk_x", &s);
            x = h_from_values(xv, s, dt, (h_layout)lay);
            CHECK(em_topk(x, 4, 1, true, &v, &ix) == EM_OK, "topk fixture");
            check_fixture_pair(fx, "topk_large_v", "topk_large_i", v, ix, dt);
            CHECK(em_topk(x, 4, -1, false, &v, &ix) == EM_OK, "topk fixture");
            check_fixture_pair(fx, "topk_small_v", "topk_small_i", v, ix, dt);
            CHECK(em_topk(x, 3, 0, true, &v, &ix) == EM_OK, "topk fixture");
            check_fixture_pair(fx, "topk_d0_v", "topk_d0_i", v, ix, dt);
            xv = h_fixture_values(fx, "median7_x", &s);
            x = h_from_values(xv, s, dt, (h_layout)lay);
            CHECK(em_median(x, 1, false, &v, &ix) == EM_OK, "median fixture");
            check_fixture_pair(fx, "median7_v", "median7_i", v, ix, dt);
            CHECK(em_median(x, EM_FLAT, false, &v, NULL) == EM_OK && v &&
                      em_item_f64(v) == h_fixture_scalar(fx, "median_all"),
                  "median of all matches torch");
            xv = h_fixture_values(fx, "median8_x", &s);
            x = h_from_values(xv, s, dt, (h_layout)lay);
            CHECK(em_median(x, 1, false, &v, &ix) == EM_OK, "median fixture");
            check_fixture_pair(fx, "median8_v", "median8_i", v, ix, dt);
            em_scope_end();
        }
    }
    h_fixture_free(fx);
}

static void check_bad(void)
{
    em_scope_begin();
    em_tensor *x = em_zeros(EM_SHAPE(2, 5), EM_F32, h_dev), *v, *ix;
    CHECK(em_sort(NULL, 0, false, &v, &ix) != EM_OK, "sort NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_sort");
    CHECK(em_sort(x, 2, false, &v, &ix) != EM_OK, "sort bad dim");
    CHECK_ERR(EM_ERR_INDEX, "em_sort: dim 2");
    CHECK(em_argsort(x, -3, false) == NULL, "argsort bad dim");
    CHECK_ERR(EM_ERR_INDEX, "em_argsort");
    CHECK(em_topk(x, 6, 1, true, &v, &ix) != EM_OK, "topk k too large");
    CHECK_ERR(EM_ERR_INDEX, "em_topk: k 6 is outside [0, 5]");
    CHECK(em_topk(x, -1, 1, true, &v, &ix) != EM_OK, "topk negative k");
    CHECK_ERR(EM_ERR_INDEX, "em_topk: k -1");
    CHECK(em_topk(x, 1, 1, true, NULL, NULL) != EM_OK, "topk without outputs");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_topk");
    CHECK(em_median(x, 4, false, &v, &ix) != EM_OK, "median bad dim");
    CHECK_ERR(EM_ERR_INDEX, "em_median");
    em_tensor *e = em_zeros(EM_SHAPE(2, 0), EM_F32, h_dev);
    CHECK(em_median(e, 1, false, &v, &ix) != EM_OK, "median of an empty dim");
    CHECK_ERR(EM_ERR_SHAPE, "em_median");
    CHECK(em_median(e, EM_FLAT, false, &v, &ix) != EM_OK, "median of an empty tensor");
    CHECK_ERR(EM_ERR_SHAPE, "em_median");
    em_scope_end();
}

void conf_order(void)
{
    check_sort_topk();
    check_median();
    check_fixtures();
    check_bad();
}
