/* Conformance tests for reductions, scans and softmax: every op against an f64 reference
 * written here (plain loops over doubles), over every dtype the op accepts, all layouts, single,
 * several, negative and all dims, keepdim, size-0/size-1/rank-0 shapes, NaN/Inf, a large tensor
 * whose results must be bitwise equal for 1, 2 and 3 threads, and bad input. */
#include <stdint.h>
#include <string.h>

#include "conf.h"
#include "tensor/op.h"

static const em_dtype all_dtypes[] = {EM_F64, EM_F32, EM_F16, EM_BF16, EM_I64,
                                      EM_I32, EM_I16, EM_I8,  EM_U8,   EM_BOOL};
#define N_ALL   (int)(sizeof all_dtypes / sizeof all_dtypes[0])
#define N_FLOAT 4 /* the first four of all_dtypes */

static bool is_float(em_dtype dt)
{
    return dt == EM_F64 || dt == EM_F32 || dt == EM_F16 || dt == EM_BF16;
}

/* Random input range per dtype: small integers give ties, bool is half true. */
static void range_of(em_dtype dt, double *lo, double *hi)
{
    *lo = -2;
    *hi = 2;
    if (dt == EM_BOOL)
        *lo = 0;
    else if (dt == EM_U8)
        *lo = 0, *hi = 5;
    else if (!is_float(dt))
        *lo = -4, *hi = 5;
}

/* ---- reference: group the input values per output ---------------------------------------- */

typedef struct groups {
    int64_t M, N; /* outputs, values per output */
    double *g;    /* g[o * N + j]: j-th reduced value (row-major over reduced dims) of output o */
    em_shape out;
} groups;

static uint32_t ref_mask(em_axes ax, int rank)
{
    if (ax.n == 0) return rank ? (1u << rank) - 1 : 0;
    uint32_t m = 0;
    for (int i = 0; i < ax.n; i++) {
        if (rank == 0) continue;
        int d = ax.d[i] < 0 ? ax.d[i] + rank : ax.d[i];
        m |= 1u << d;
    }
    return m;
}

static groups group(const double *v, em_shape s, uint32_t mask, bool keepdim)
{
    groups G = {1, 1, NULL, {.rank = 0}};
    for (int d = 0; d < s.rank; d++) {
        if ((mask >> d) & 1u) {
            G.N *= s.dims[d];
            if (keepdim) G.out.dims[G.out.rank++] = 1;
        } else {
            G.M *= s.dims[d];
            G.out.dims[G.out.rank++] = s.dims[d];
        }
    }
    G.g = malloc((size_t)(G.M * G.N > 0 ? G.M * G.N : 1) * sizeof *G.g);
    int64_t n = em_shape_numel(s), idx[EM_MAX_RANK] = {0};
    for (int64_t lin = 0; lin < n; lin++) {
        int64_t o = 0, j = 0;
        for (int d = 0; d < s.rank; d++) {
            if ((mask >> d) & 1u)
                j = j * s.dims[d] + idx[d];
            else
                o = o * s.dims[d] + idx[d];
        }
        G.g[o * G.N + j] = v[lin];
        h_next_index(s, idx);
    }
    return G;
}

typedef enum rk {
    K_SUM,
    K_MEAN,
    K_PROD,
    K_MAX,
    K_MIN,
    K_VAR,
    K_STD,
    K_NORM,
    K_LSE,
    K_ANY,
    K_ALL,
    K_COUNT,
    K_ARGMAX,
    K_ARGMIN,
} rk;

static double r_max(const double *g, int64_t n, bool want_max, int64_t *arg)
{
    double m = g[0];
    int64_t a = 0;
    for (int64_t j = 1; j < n && !isnan(m); j++) {
        if (isnan(g[j]) || (want_max ? g[j] > m : g[j] < m)) {
            m = g[j];
            a = j;
        }
    }
    if (arg) *arg = a;
    return m;
}

static double ref_reduce(rk k, const double *g, int64_t n, double p, int64_t corr)
{
    double s = 0;
    int64_t cnt = 0, arg;
    switch (k) {
    case K_SUM:
        for (int64_t j = 0; j < n; j++) s += g[j];
        return s;
    case K_MEAN:
        for (int64_t j = 0; j < n; j++) s += g[j];
        return s / (double)n;
    case K_PROD:
        s = 1;
        for (int64_t j = 0; j < n; j++) s *= g[j];
        return s;
    case K_MAX: return r_max(g, n, true, NULL);
    case K_MIN: return r_max(g, n, false, NULL);
    case K_ARGMAX: r_max(g, n, true, &arg); return (double)arg;
    case K_ARGMIN: r_max(g, n, false, &arg); return (double)arg;
    case K_VAR:
    case K_STD: {
        double mean = 0, m2 = 0;
        for (int64_t j = 0; j < n; j++) mean += g[j];
        mean /= (double)n;
        for (int64_t j = 0; j < n; j++) m2 += (g[j] - mean) * (g[j] - mean);
        double div = (double)n - (double)corr;
        double var = m2 / (div > 0 ? div : 0);
        return k == K_STD ? sqrt(var) : var;
    }
    case K_NORM:
        if (isinf(p)) {
            double m = p > 0 ? 0 : INFINITY;
            for (int64_t j = 0; j < n; j++) {
                double a = fabs(g[j]);
                if (isnan(a)) return NAN;
                m = p > 0 ? fmax(m, a) : fmin(m, a);
            }
            return m;
        }
        if (p == 0) {
            for (int64_t j = 0; j < n; j++) s += g[j] != 0;
            return s;
        }
        for (int64_t j = 0; j < n; j++) s += pow(fabs(g[j]), p);
        return pow(s, 1.0 / p);
    case K_LSE: {
        if (n == 0) return -INFINITY;
        double m = r_max(g, n, true, NULL);
        if (isnan(m)) return NAN;
        if (isinf(m)) return m;
        for (int64_t j = 0; j < n; j++) s += exp(g[j] - m);
        return m + log(s);
    }
    case K_ANY:
    case K_ALL:
    case K_COUNT:
        for (int64_t j = 0; j < n; j++) cnt += g[j] != 0;
        return k == K_ANY ? cnt > 0 : k == K_ALL ? cnt == n : (double)cnt;
    }
    return 0;
}

/* ---- the mask reductions ----------------------------------------------------------------- */

typedef struct mop {
    const char *name;
    rk k;
    bool float_only;
    bool no_identity; /* an empty reduction is an error */
    double p;
    int64_t corr;
} mop;

static const mop mops[] = {
    {"em_sum", K_SUM, false, false, 0, 0},        {"em_mean", K_MEAN, true, false, 0, 0},
    {"em_prod", K_PROD, false, false, 0, 0},      {"em_max", K_MAX, false, true, 0, 0},
    {"em_min", K_MIN, false, true, 0, 0},         {"em_var", K_VAR, true, false, 0, 1},
    {"em_var", K_VAR, true, false, 0, 0},         {"em_std", K_STD, true, false, 0, 1},
    {"em_std", K_STD, true, false, 0, 3},         {"em_norm", K_NORM, true, false, 2, 0},
    {"em_norm", K_NORM, true, false, 1, 0},       {"em_norm", K_NORM, true, false, 3, 0},
    {"em_norm", K_NORM, true, false, 0.5, 0},     {"em_norm", K_NORM, true, false, 0, 0},
    {"em_norm", K_NORM, true, true, INFINITY, 0}, {"em_norm", K_NORM, true, true, -INFINITY, 0},
    {"em_logsumexp", K_LSE, true, false, 0, 0},   {"em_any", K_ANY, false, false, 0, 0},
    {"em_all", K_ALL, false, false, 0, 0},        {"em_count_nonzero", K_COUNT, false, false, 0, 0},
};
#define N_MOPS (int)(sizeof mops / sizeof mops[0])

static em_tensor *call_mop(const mop *m, const em_tensor *x, em_axes ax, bool kd)
{
    switch (m->k) {
    case K_SUM: return em_sum(x, ax, kd);
    case K_MEAN: return em_mean(x, ax, kd);
    case K_PROD: return em_prod(x, ax, kd);
    case K_MAX: return em_max(x, ax, kd);
    case K_MIN: return em_min(x, ax, kd);
    case K_VAR: return em_var(x, ax, m->corr, kd);
    case K_STD: return em_std(x, ax, m->corr, kd);
    case K_NORM: return em_norm(x, m->p, ax, kd);
    case K_LSE: return em_logsumexp(x, ax, kd);
    case K_ANY: return em_any(x, ax, kd);
    case K_ALL: return em_all(x, ax, kd);
    case K_COUNT: return em_count_nonzero(x, ax, kd);
    default: return NULL;
    }
}

static em_dtype mop_out_dtype(const mop *m, em_dtype in)
{
    switch (m->k) {
    case K_SUM:
    case K_PROD: return is_float(in) ? in : EM_I64;
    case K_ANY:
    case K_ALL: return EM_BOOL;
    case K_COUNT: return EM_I64;
    default: return in;
    }
}

/* Checks one reduction of values v (shape s, dtype dt, layout lay) against the reference. */
static void check_mop(const mop *m, const double *v, em_shape s, em_dtype dt, h_layout lay,
                      em_axes ax, bool kd)
{
    em_scope_begin();
    em_tensor *x = h_from_values(v, s, dt, lay);
    uint32_t mask = ref_mask(ax, s.rank);
    groups G = group(v, s, mask, kd);
    em_tensor *y = call_mop(m, x, ax, kd);
    char what[160], sh[64];
    snprintf(what, sizeof what, "%s(p=%g c=%lld) %s %s layout %d axes n=%d [%d %d] keepdim %d",
             m->name, m->p, (long long)m->corr, em_shape_str(s, sh, sizeof sh), em_dtype_name(dt),
             (int)lay, ax.n, ax.d[0], ax.d[1], (int)kd);
    if (m->no_identity && G.N == 0) {
        CHECK(y == NULL, "%s: expected an error for an empty reduction", what);
        CHECK_ERR(EM_ERR_SHAPE, m->name);
    } else {
        em_dtype odt = mop_out_dtype(m, dt);
        CHECK(!y || em_tensor_dtype(y) == odt, "%s: dtype %s, expected %s", what,
              em_dtype_name(em_tensor_dtype(y)), em_dtype_name(odt));
        double *e = malloc((size_t)(G.M ? G.M : 1) * sizeof *e);
        for (int64_t o = 0; o < G.M; o++)
            e[o] = h_round_to(ref_reduce(m->k, G.g + o * G.N, G.N, m->p, m->corr), odt);
        double atol = h_atol(odt), rtol = h_rtol(odt);
        /* the f64 inputs make sums of ~60 terms: allow their rounding */
        if (odt == EM_F64) atol = rtol = 1e-12;
        h_check_tensor(what, y, e, G.out, atol, rtol);
        free(e);
    }
    free(G.g);
    em_scope_end();
}

typedef struct scase {
    em_shape s;
    em_axes ax[8];
    int nax;
} scase;

static void test_mask_reductions(void)
{
    const scase cases[] = {
        {EM_SHAPE(3, 4, 5),
         {EM_ALL, EM_AXES(0), EM_AXES(1), EM_AXES(-1), EM_AXES(0, 2), EM_AXES(-1, 0), EM_AXES(1, 2),
          EM_AXES(0, 1, 2)},
         8},
        {EM_SHAPE(2, 1, 3), {EM_AXES(1), EM_ALL, EM_AXES(0, -1)}, 3},
        {EM_SHAPE(0, 3), {EM_AXES(0), EM_AXES(1), EM_ALL}, 3},
        {EM_SHAPE(4, 0, 2), {EM_AXES(1), EM_AXES(0), EM_AXES(0, 2)}, 3},
        {EM_SCALAR, {EM_ALL, EM_AXES(0), EM_AXES(-1)}, 3},
        {EM_SHAPE(7), {EM_ALL, EM_AXES(0)}, 2},
        {EM_SHAPE(2, 3, 2, 3), {EM_AXES(0, 2), EM_AXES(1, 3), EM_AXES(-1, -2)}, 3},
        /* a kept dim of 16 or more: the outer-reduction path, contiguous and transposed */
        {EM_SHAPE(17, 3), {EM_AXES(1), EM_AXES(0), EM_ALL}, 3},
        {EM_SHAPE(2, 3, 20), {EM_AXES(0, 1), EM_AXES(1), EM_AXES(0)}, 3},
    };
    for (int mi = 0; mi < N_MOPS; mi++) {
        const mop *m = &mops[mi];
        for (int di = 0; di < (m->float_only ? N_FLOAT : N_ALL); di++) {
            em_dtype dt = all_dtypes[di];
            double lo, hi;
            range_of(dt, &lo, &hi);
            if (m->k == K_PROD && !is_float(dt)) lo = -2, hi = 3; /* no i64 overflow */
            for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
                const scase *c = &cases[ci];
                em_scope_begin();
                double *v;
                h_rand(c->s, dt, H_CONTIG, lo, hi, &v);
                em_scope_end();
                for (int lay = 0; lay < H_LAYOUT_COUNT; lay++)
                    for (int a = 0; a < c->nax; a++)
                        for (int kd = 0; kd < 2; kd++)
                            check_mop(m, v, c->s, dt, (h_layout)lay, c->ax[a], kd);
                free(v);
            }
        }
    }
}

/* ---- one-dim reductions with indices ----------------------------------------------------- */

/* argmax/argmin (dim or EM_FLAT) and max_dim/min_dim against the reference. */
static void check_arg(const double *v, em_shape s, em_dtype dt, h_layout lay, int dim, bool kd)
{
    em_scope_begin();
    em_tensor *x = h_from_values(v, s, dt, lay);
    uint32_t mask;
    if (dim == EM_FLAT)
        mask = s.rank ? (1u << s.rank) - 1 : 0;
    else
        mask = s.rank ? 1u << (dim < 0 ? dim + s.rank : dim) : 0;
    groups G = group(v, s, mask, kd);
    if (dim == EM_FLAT && !kd) G.out.rank = 0;
    double *ea = malloc((size_t)(G.M ? G.M : 1) * sizeof *ea);
    double *ei = malloc((size_t)(G.M ? G.M : 1) * sizeof *ei);
    double *ex = malloc((size_t)(G.M ? G.M : 1) * sizeof *ex);
    double *en = malloc((size_t)(G.M ? G.M : 1) * sizeof *en);
    for (int64_t o = 0; o < G.M && G.N > 0; o++) {
        int64_t a;
        ex[o] = r_max(G.g + o * G.N, G.N, true, &a);
        ea[o] = (double)a;
        en[o] = r_max(G.g + o * G.N, G.N, false, &a);
        ei[o] = (double)a;
    }
    char what[128], sh[64];
    snprintf(what, sizeof what, "%s %s layout %d dim %d keepdim %d", em_shape_str(s, sh, sizeof sh),
             em_dtype_name(dt), (int)lay, dim, (int)kd);
    em_tensor *am = em_argmax(x, dim, kd), *an = em_argmin(x, dim, kd);
    if (G.N == 0) {
        CHECK(am == NULL, "argmax %s: expected an error", what);
        CHECK_ERR(EM_ERR_SHAPE, "em_argmax");
        CHECK(an == NULL, "argmin %s: expected an error", what);
    } else {
        char w2[160];
        snprintf(w2, sizeof w2, "em_argmax %s", what);
        h_check_tensor(w2, am, ea, G.out, 0, 0);
        CHECK(!am || em_tensor_dtype(am) == EM_I64, "%s: not i64", w2);
        snprintf(w2, sizeof w2, "em_argmin %s", what);
        h_check_tensor(w2, an, ei, G.out, 0, 0);
    }
    em_clear_error();
    if (dim != EM_FLAT) {
        em_tensor *vals = NULL, *idx = NULL;
        em_status st = em_max_dim(x, dim, kd, &vals, &idx);
        char w2[160];
        if (G.N == 0) {
            CHECK(st == EM_ERR_SHAPE && !vals && !idx, "max_dim %s: expected an error", what);
            CHECK_ERR(EM_ERR_SHAPE, "em_max_dim");
        } else {
            snprintf(w2, sizeof w2, "em_max_dim values %s", what);
            h_check_tensor(w2, vals, ex, G.out, 0, 0);
            CHECK(!vals || em_tensor_dtype(vals) == dt, "%s: dtype", w2);
            snprintf(w2, sizeof w2, "em_max_dim indices %s", what);
            h_check_tensor(w2, idx, ea, G.out, 0, 0);
            st = em_min_dim(x, dim, kd, &vals, &idx);
            CHECK(st == EM_OK, "em_min_dim %s: %s", what, em_last_error());
            snprintf(w2, sizeof w2, "em_min_dim values %s", what);
            h_check_tensor(w2, vals, en, G.out, 0, 0);
            snprintf(w2, sizeof w2, "em_min_dim indices %s", what);
            h_check_tensor(w2, idx, ei, G.out, 0, 0);
        }
    }
    em_clear_error();
    free(ea);
    free(ei);
    free(ex);
    free(en);
    free(G.g);
    em_scope_end();
}

static void test_arg_reductions(void)
{
    const em_shape shapes[] = {EM_SHAPE(3, 4, 5), EM_SHAPE(2, 1, 6), EM_SHAPE(0, 3), EM_SCALAR,
                               EM_SHAPE(9)};
    for (int di = 0; di < N_ALL; di++) {
        em_dtype dt = all_dtypes[di];
        double lo, hi;
        range_of(dt, &lo, &hi);
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            em_shape s = shapes[si];
            em_scope_begin();
            double *v;
            h_rand(s, dt, H_CONTIG, lo, hi, &v);
            em_scope_end();
            /* float ties: round some values to integers */
            if (is_float(dt))
                for (int64_t i = 0; i < em_shape_numel(s); i += 3) v[i] = round(v[i]);
            int r = s.rank ? s.rank : 1;
            for (int lay = 0; lay < H_LAYOUT_COUNT; lay++)
                for (int kd = 0; kd < 2; kd++) {
                    for (int d = -r; d < r; d++) check_arg(v, s, dt, (h_layout)lay, d, kd);
                    check_arg(v, s, dt, (h_layout)lay, EM_FLAT, kd);
                }
            free(v);
        }
    }
}

/* ---- scans and softmax ------------------------------------------------------------------- */

typedef enum sk { S_CUMSUM, S_CUMPROD, S_CUMMAX, S_CUMMIN, S_SOFTMAX, S_LOGSOFTMAX } sk;

/* Reference along dim of v (shape s): out values, and positions for cummax/cummin. */
static void ref_along(sk k, const double *v, em_shape s, int dim, double *out, double *pos)
{
    int64_t n = em_shape_numel(s);
    if (n == 0) return;
    int64_t len = s.rank ? s.dims[dim] : 1, inner = 1;
    for (int d = dim + 1; d < s.rank; d++) inner *= s.dims[d];
    int64_t outer = n / (len * inner);
    for (int64_t a = 0; a < outer; a++)
        for (int64_t b = 0; b < inner; b++) {
            const double *x = v + a * len * inner + b;
            double *y = out + a * len * inner + b, *q = pos + a * len * inner + b;
            double acc = k == S_CUMPROD ? 1 : 0, best = 0, m = -INFINITY, sum = 0;
            int64_t bi = 0;
            if (k == S_SOFTMAX || k == S_LOGSOFTMAX) {
                for (int64_t i = 0; i < len; i++)
                    if (isnan(x[i * inner]) || x[i * inner] > m) m = isnan(m) ? m : x[i * inner];
                for (int64_t i = 0; i < len; i++) sum += exp(x[i * inner] - m);
            }
            for (int64_t i = 0; i < len; i++) {
                double xi = x[i * inner];
                switch (k) {
                case S_CUMSUM: y[i * inner] = acc += xi; break;
                case S_CUMPROD: y[i * inner] = acc *= xi; break;
                case S_CUMMAX:
                case S_CUMMIN:
                    if (i == 0 || isnan(xi) ||
                        (!isnan(best) && (k == S_CUMMAX ? xi >= best : xi <= best))) {
                        best = xi;
                        bi = i;
                    }
                    y[i * inner] = best;
                    q[i * inner] = (double)bi;
                    break;
                case S_SOFTMAX: y[i * inner] = exp(xi - m) / sum; break;
                case S_LOGSOFTMAX: y[i * inner] = xi - m - log(sum); break;
                }
            }
        }
}

static const char *const along_names[] = {"em_cumsum", "em_cumprod", "em_cummax",
                                          "em_cummin", "em_softmax", "em_log_softmax"};

static void check_along(sk k, const double *v, em_shape s, em_dtype dt, h_layout lay, int dim)
{
    em_scope_begin();
    em_tensor *x = h_from_values(v, s, dt, lay);
    int64_t n = em_shape_numel(s);
    double *e = malloc((size_t)(n ? n : 1) * sizeof *e);
    double *pos = malloc((size_t)(n ? n : 1) * sizeof *pos);
    int nd = s.rank == 0 ? 0 : (dim < 0 ? dim + s.rank : dim);
    ref_along(k, v, s, nd, e, pos);
    em_dtype odt = dt;
    if ((k == S_CUMSUM || k == S_CUMPROD) && !is_float(dt)) odt = EM_I64;
    for (int64_t i = 0; i < n; i++) e[i] = h_round_to(e[i], odt);
    char what[128], sh[64];
    snprintf(what, sizeof what, "%s %s %s layout %d dim %d", along_names[k],
             em_shape_str(s, sh, sizeof sh), em_dtype_name(dt), (int)lay, dim);
    em_tensor *y = NULL, *idx = NULL;
    switch (k) {
    case S_CUMSUM: y = em_cumsum(x, dim); break;
    case S_CUMPROD: y = em_cumprod(x, dim); break;
    case S_CUMMAX: em_cummax(x, dim, &y, &idx); break;
    case S_CUMMIN: em_cummin(x, dim, &y, &idx); break;
    case S_SOFTMAX: y = em_softmax(x, dim); break;
    case S_LOGSOFTMAX: y = em_log_softmax(x, dim); break;
    }
    h_check_tensor(what, y, e, s, h_atol(odt), h_rtol(odt));
    CHECK(!y || em_tensor_dtype(y) == odt, "%s: dtype %s", what, em_dtype_name(em_tensor_dtype(y)));
    if (k == S_CUMMAX || k == S_CUMMIN) {
        strncat(what, " indices", sizeof what - strlen(what) - 1);
        h_check_tensor(what, idx, pos, s, 0, 0);
        /* indices are optional */
        em_tensor *y2 = NULL;
        em_status st = k == S_CUMMAX ? em_cummax(x, dim, &y2, NULL) : em_cummin(x, dim, &y2, NULL);
        CHECK(st == EM_OK && y2, "%s without indices", what);
    }
    em_clear_error();
    free(e);
    free(pos);
    em_scope_end();
}

static void test_along(void)
{
    const em_shape shapes[] = {EM_SHAPE(3, 4, 5), EM_SHAPE(2, 0, 3), EM_SHAPE(1), EM_SCALAR,
                               EM_SHAPE(6, 1)};
    for (int k = S_CUMSUM; k <= S_LOGSOFTMAX; k++) {
        bool fl = k == S_SOFTMAX || k == S_LOGSOFTMAX;
        for (int di = 0; di < (fl ? N_FLOAT : N_ALL); di++) {
            em_dtype dt = all_dtypes[di];
            double lo, hi;
            range_of(dt, &lo, &hi);
            if (k == S_CUMPROD)
                lo = is_float(dt) ? -1.5 : (dt == EM_U8 || dt == EM_BOOL ? 0 : -2),
                hi = is_float(dt) ? 1.5 : 3;
            for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
                em_shape s = shapes[si];
                em_scope_begin();
                double *v;
                h_rand(s, dt, H_CONTIG, lo, hi, &v);
                em_scope_end();
                if (is_float(dt) && (k == S_CUMMAX || k == S_CUMMIN))
                    for (int64_t i = 0; i < em_shape_numel(s); i += 3) v[i] = round(v[i]);
                int r = s.rank ? s.rank : 1;
                for (int lay = 0; lay < H_LAYOUT_COUNT; lay++)
                    for (int d = -r; d < r; d++) check_along((sk)k, v, s, dt, (h_layout)lay, d);
                free(v);
            }
        }
    }
}

/* softmax_backward(y, g, dim, log) (the softmax rules' record): y (g - sum(g y)) or
 * g - exp(y) sum(g) along dim, against f64 from the stored values; y and g in different layouts,
 * every dim, rows long enough for every kernel a device picks by length (warp, block, general);
 * on a device also against the CPU's record; y and g of different dtypes (the composition). */
static void check_softmax_backward(void)
{
    const em_shape shapes[] = {EM_SHAPE(3, 4, 5), EM_SHAPE(2, 0, 3), EM_SCALAR,
                               EM_SHAPE(6, 1),    EM_SHAPE(7, 100),  EM_SHAPE(5, 333),
                               EM_SHAPE(3, 1000), EM_SHAPE(2, 3000), EM_SHAPE(3, 1501),
                               EM_SHAPE(2, 9000)};
    const int ns = (int)(sizeof shapes / sizeof shapes[0]);
    for (int di = 0; di < N_FLOAT; di++)
        for (int si = 0; si < ns; si++)
            for (int lg = 0; lg < 2; lg++) {
                em_dtype dt = all_dtypes[di];
                em_shape s = shapes[si];
                int64_t n = em_shape_numel(s);
                bool longrow = si >= 4;
                int r = s.rank ? s.rank : 1;
                em_scope_begin();
                double *yv, *gv;
                h_rand(s, dt, H_CONTIG, lg ? -6 : 0, lg ? 0 : 1, &yv);
                h_rand(s, dt, H_CONTIG, -2, 2, &gv);
                double *e = malloc((size_t)(n ? n : 1) * sizeof *e);
                for (int lay = 0; lay < (longrow ? 1 : H_LAYOUT_COUNT); lay++)
                    for (int d = longrow ? -1 : -r; d < (longrow ? 0 : r); d++) {
                        em_scope_begin();
                        int nd = s.rank == 0 ? 0 : (d < 0 ? d + s.rank : d);
                        int64_t len = s.rank ? s.dims[nd] : 1, inner = 1;
                        for (int k = nd + 1; k < s.rank; k++) inner *= s.dims[k];
                        for (int64_t a = 0; n && a < n / (len * inner); a++)
                            for (int64_t b = 0; b < inner; b++) {
                                int64_t o = a * len * inner + b;
                                double sum = 0;
                                for (int64_t i = 0; i < len; i++)
                                    sum += gv[o + i * inner] * (lg ? 1 : yv[o + i * inner]);
                                for (int64_t i = 0; i < len; i++) {
                                    double y = yv[o + i * inner], g = gv[o + i * inner];
                                    e[o + i * inner] =
                                        h_round_to(lg ? g - exp(y) * sum : y * (g - sum), dt);
                                }
                            }
                        em_tensor *y = h_from_values(yv, s, dt, (h_layout)lay);
                        em_tensor *g =
                            h_from_values(gv, s, dt, (h_layout)((lay + 1) % H_LAYOUT_COUNT));
                        char what[128], sh[64];
                        snprintf(what, sizeof what, "softmax_backward%s %s %s layout %d dim %d",
                                 lg ? " (log)" : "", em_shape_str(s, sh, sizeof sh),
                                 em_dtype_name(dt), lay, d);
                        em_tensor *got = tn_softmax_backward(y, g, d, lg);
                        h_check_tensor(what, got, e, s, h_atol(dt), h_rtol(dt));
                        if (h_dev.backend != 0) {
                            em_tensor *yc = em_to_device(y, EM_CPU), *gc = em_to_device(g, EM_CPU);
                            h_check_tensor(what, tn_softmax_backward(yc, gc, d, lg), e, s,
                                           h_atol(dt), h_rtol(dt));
                        }
                        if (dt != EM_F64 && lay == 0 && !lg) /* g wider: composed, in f64 */
                            h_check_tensor(what, tn_softmax_backward(y, em_cast(g, EM_F64), d, lg),
                                           e, s, h_atol(dt), h_rtol(dt));
                        CHECK_OK(what);
                        em_scope_end();
                    }
                free(e);
                free(yv);
                free(gv);
                em_scope_end();
            }
    em_scope_begin();
    em_tensor *y = em_zeros(EM_SHAPE(2, 3), EM_F32, h_dev);
    CHECK(!tn_softmax_backward(y, y, 2, false), "softmax_backward dim 2 of rank 2");
    CHECK_ERR(EM_ERR_INDEX, "tn_softmax_backward: dim 2");
    em_scope_end();
}

/* log_softmax_gather(x, dim, t) and its backward (cross entropy's records): x[t] - logsumexp(x)
 * and g (onehot(t) - softmax(x)) along dim, against f64 from the stored values; x, t and g in
 * every layout, every dim, rows long enough for every kernel a device picks by length; one line's
 * index out of range (the forward gives NaN, the backward a line of zeros); on a device
 * also against the CPU's records; a wrongly shaped t fails. */
static void check_log_softmax_gather(void)
{
    const em_shape shapes[] = {EM_SHAPE(3, 4, 5), EM_SHAPE(2, 0, 3), EM_SHAPE(7),
                               EM_SHAPE(6, 1),    EM_SHAPE(7, 100),  EM_SHAPE(5, 333),
                               EM_SHAPE(3, 1000), EM_SHAPE(2, 3000), EM_SHAPE(3, 1501),
                               EM_SHAPE(2, 9000), EM_SHAPE(33, 10)};
    const int ns = (int)(sizeof shapes / sizeof shapes[0]);
    for (int di = 0; di < N_FLOAT; di++)
        for (int si = 0; si < ns; si++) {
            em_dtype dt = all_dtypes[di];
            em_shape s = shapes[si];
            int64_t n = em_shape_numel(s);
            bool longrow = si >= 4 && si < ns - 1;
            em_scope_begin();
            double *xv;
            h_rand(s, dt, H_CONTIG, -4, 4, &xv);
            for (int lay = 0; lay < (longrow ? 1 : H_LAYOUT_COUNT); lay++)
                for (int d = longrow ? -1 : -s.rank; d < (longrow ? 0 : s.rank); d++) {
                    em_scope_begin();
                    int nd = d < 0 ? d + s.rank : d;
                    int64_t len = s.dims[nd], inner = 1;
                    if (len == 0) {
                        em_scope_end();
                        continue;
                    }
                    for (int k = nd + 1; k < s.rank; k++) inner *= s.dims[k];
                    int64_t lines = n / len;
                    em_shape ts = {.rank = s.rank - 1};
                    for (int k = 0, j = 0; k < s.rank; k++)
                        if (k != nd) ts.dims[j++] = s.dims[k];
                    double *tv = malloc((size_t)(lines ? lines : 1) * sizeof *tv);
                    double *gv, *ef = malloc((size_t)(lines ? lines : 1) * sizeof *ef);
                    double *eb = malloc((size_t)(n ? n : 1) * sizeof *eb);
                    h_rand(ts, dt, H_CONTIG, -2, 2, &gv);
                    for (int64_t r = 0; r < lines; r++) tv[r] = (double)((r * 7 + 3) % len);
                    if (lines > 1) tv[lines / 2] = (lines & 1) ? -1 : (double)len; /* out */
                    for (int64_t a = 0; a < lines / (inner ? inner : 1); a++)
                        for (int64_t b = 0; b < inner; b++) {
                            int64_t o = a * len * inner + b, r = a * inner + b;
                            double m = -INFINITY, sum = 0;
                            for (int64_t i = 0; i < len; i++) m = fmax(m, xv[o + i * inner]);
                            for (int64_t i = 0; i < len; i++) sum += exp(xv[o + i * inner] - m);
                            int64_t t = (int64_t)tv[r];
                            bool in = t >= 0 && t < len;
                            ef[r] = in ? h_round_to(xv[o + t * inner] - m - log(sum), dt) : NAN;
                            for (int64_t i = 0; i < len; i++)
                                eb[o + i * inner] =
                                    in ? h_round_to(gv[r] * ((i == t ? 1.0 : 0.0) -
                                                             exp(xv[o + i * inner] - m) / sum),
                                                    dt)
                                       : 0.0;
                        }
                    em_tensor *x = h_from_values(xv, s, dt, (h_layout)lay);
                    em_tensor *t =
                        h_from_values(tv, ts, EM_I64, (h_layout)((lay + 1) % H_LAYOUT_COUNT));
                    em_tensor *g =
                        h_from_values(gv, ts, dt, (h_layout)((lay + 2) % H_LAYOUT_COUNT));
                    char what[128], sh[64];
                    snprintf(what, sizeof what, "log_softmax_gather %s %s layout %d dim %d",
                             em_shape_str(s, sh, sizeof sh), em_dtype_name(dt), lay, d);
                    h_check_tensor(what, tn_log_softmax_gather(x, d, t), ef, ts, h_atol(dt),
                                   h_rtol(dt));
                    strncat(what, " backward", sizeof what - strlen(what) - 1);
                    h_check_tensor(what, tn_log_softmax_gather_backward(x, d, t, g), eb, s,
                                   h_atol(dt), h_rtol(dt));
                    if (h_dev.backend != 0) {
                        em_tensor *xc = em_to_device(x, EM_CPU), *tc = em_to_device(t, EM_CPU);
                        em_tensor *gc = em_to_device(g, EM_CPU);
                        h_check_tensor(what, tn_log_softmax_gather_backward(xc, d, tc, gc), eb, s,
                                       h_atol(dt), h_rtol(dt));
                        h_check_tensor(what, tn_log_softmax_gather(xc, d, tc), ef, ts, h_atol(dt),
                                       h_rtol(dt));
                    }
                    CHECK_OK(what);
                    free(tv);
                    free(gv);
                    free(ef);
                    free(eb);
                    em_scope_end();
                }
            free(xv);
            em_scope_end();
        }
    em_scope_begin();
    em_tensor *x = em_zeros(EM_SHAPE(2, 3), EM_F32, h_dev);
    CHECK(!tn_log_softmax_gather(x, 1, em_zeros(EM_SHAPE(3), EM_I64, h_dev)), "t of 3 for 2 lines");
    CHECK_ERR(EM_ERR_SHAPE, "tn_log_softmax_gather: t must be i64");
    CHECK(!tn_log_softmax_gather_backward(x, 1, em_zeros(EM_SHAPE(2), EM_I64, h_dev),
                                          em_zeros(EM_SHAPE(2), EM_F64, h_dev)),
          "g of another dtype");
    CHECK_ERR(EM_ERR_SHAPE, "tn_log_softmax_gather_backward: t and g must be");
    em_scope_end();
}

/* ---- NaN, Inf, empty and hand-made cases ------------------------------------------------- */

static void expect1(const char *what, em_tensor *t, double e)
{
    h_check_tensor(what, t, &e, EM_SCALAR, 0, 0);
}

static void test_special(void)
{
    em_scope_begin();
    const double nanv[] = {1, NAN, 5, NAN, -1};
    for (int di = 0; di < N_FLOAT; di++) {
        em_dtype dt = all_dtypes[di];
        em_tensor *x = h_from_values(nanv, EM_SHAPE(5), dt, H_FLIPPED);
        /* stored flipped, read as 1 NaN 5 NaN -1 */
        expect1("max with NaN", em_max(x, EM_ALL, false), NAN);
        expect1("min with NaN", em_min(x, EM_ALL, false), NAN);
        expect1("argmax first NaN", em_argmax(x, EM_FLAT, false), 1);
        expect1("argmin first NaN", em_argmin(x, 0, false), 1);
        expect1("sum with NaN", em_sum(x, EM_ALL, false), NAN);
        expect1("logsumexp with NaN", em_logsumexp(x, EM_ALL, false), NAN);
        expect1("norm inf with NaN", em_norm(x, INFINITY, EM_ALL, false), NAN);
        expect1("any with NaN", em_any(x, EM_ALL, false), 1);
        expect1("count with NaN", em_count_nonzero(x, EM_ALL, false), 5);
        em_tensor *v = NULL, *i = NULL;
        CHECK(em_cummax(x, 0, &v, &i) == EM_OK, "cummax NaN");
        const double cv[] = {1, NAN, NAN, NAN, NAN}, ci[] = {0, 1, 1, 3, 3};
        h_check_tensor("cummax NaN values", v, cv, EM_SHAPE(5), 0, 0);
        h_check_tensor("cummax NaN indices (a NaN takes over)", i, ci, EM_SHAPE(5), 0, 0);
        const double ninf[] = {-INFINITY, -INFINITY, -INFINITY};
        em_tensor *mi = h_from_values(ninf, EM_SHAPE(1, 3), dt, H_CONTIG);
        expect1("logsumexp all -inf", em_logsumexp(mi, EM_ALL, false), -INFINITY);
        const double sm[] = {NAN, NAN, NAN};
        h_check_tensor("softmax all -inf", em_softmax(mi, 1), sm, EM_SHAPE(1, 3), 0, 0);
        h_check_tensor("log_softmax all -inf", em_log_softmax(mi, -1), sm, EM_SHAPE(1, 3), 0, 0);
        const double pinf[] = {1, INFINITY, -INFINITY};
        em_tensor *pi = h_from_values(pinf, EM_SHAPE(3), dt, H_STRIDED);
        expect1("logsumexp +inf", em_logsumexp(pi, EM_ALL, false), INFINITY);
        expect1("max +inf", em_max(pi, EM_ALL, false), INFINITY);
        expect1("argmin -inf", em_argmin(pi, EM_FLAT, false), 2);
        expect1("norm -inf", em_norm(pi, -INFINITY, EM_ALL, false), 1);
        /* var with N - correction <= 0: 0/0 = NaN, positive/0 = inf, like PyTorch */
        const double one[] = {3};
        em_tensor *o1 = h_from_values(one, EM_SHAPE(1), dt, H_CONTIG);
        expect1("var of one element", em_var(o1, EM_ALL, 1, false), NAN);
        const double two[] = {1, 3};
        em_tensor *o2 = h_from_values(two, EM_SHAPE(2), dt, H_CONTIG);
        expect1("var correction 2 of 2", em_var(o2, EM_ALL, 2, false), INFINITY);
        expect1("var correction 5 of 2", em_var(o2, EM_ALL, 5, false), INFINITY);
        expect1("std correction 0", em_std(o2, EM_ALL, 0, false), 1);
        /* empty EM_ALL reductions give the identities */
        em_tensor *e = em_zeros(EM_SHAPE(2, 0, 3), dt, h_dev);
        expect1("sum empty", em_sum(e, EM_ALL, false), 0);
        expect1("prod empty", em_prod(e, EM_ALL, false), 1);
        expect1("mean empty", em_mean(e, EM_ALL, false), NAN);
        expect1("logsumexp empty", em_logsumexp(e, EM_ALL, false), -INFINITY);
        expect1("norm empty", em_norm(e, 2, EM_ALL, false), 0);
        expect1("any empty", em_any(e, EM_ALL, false), 0);
        expect1("all empty", em_all(e, EM_ALL, false), 1);
        expect1("count empty", em_count_nonzero(e, EM_ALL, false), 0);
        const double ones6[] = {1, 1, 1, 1, 1, 1};
        h_check_tensor("prod empty keepdim dim 1", em_prod(e, EM_AXES(1), true), ones6,
                       EM_SHAPE(2, 1, 3), 0, 0);
        /* ties: argmax and max_dim give the first index, cummax/cummin the latest */
        const double tie[] = {2, 7, 7, 1, 1};
        em_tensor *t = h_from_values(tie, EM_SHAPE(5), dt, H_STRIDED);
        expect1("argmax tie", em_argmax(t, 0, false), 1);
        expect1("argmin tie", em_argmin(t, 0, false), 3);
        CHECK(em_cummin(t, 0, &v, &i) == EM_OK, "cummin tie");
        const double mi_i[] = {0, 0, 0, 3, 4};
        h_check_tensor("cummin tie indices", i, mi_i, EM_SHAPE(5), 0, 0);
        CHECK(em_max_dim(t, 0, false, &v, &i) == EM_OK, "max_dim tie");
        expect1("max_dim tie index", i, 1);
        /* rank-0 and keepdim shapes */
        em_tensor *s = em_scalar(4, dt, h_dev);
        expect1("argmax scalar", em_argmax(s, EM_FLAT, true), 0);
        expect1("sum scalar keepdim", em_sum(s, EM_AXES(-1), true), 4);
        expect1("softmax scalar", em_softmax(s, 0), 1);
        double ones3[] = {0};
        h_check_tensor("argmax flat keepdim", em_argmax(mi, EM_FLAT, true), ones3, EM_SHAPE(1, 1),
                       0, 0);
    }
    /* integer sums widen to i64 and wrap like it */
    const int64_t big[] = {INT64_MAX, 1, 5};
    em_tensor *b = h_from_i64(big, EM_SHAPE(3));
    expect1("i64 prod small", em_prod(em_narrow(b, 0, 1, 2), EM_ALL, false), 5);
    int64_t got = 0;
    em_to_data(em_sum(b, EM_ALL, false), &got, EM_I64, 1);
    CHECK(got == INT64_MIN + 5, "i64 sum wraps: %lld", (long long)got);
    em_tensor *i8 = em_full(EM_SHAPE(300), 100, EM_I8, h_dev);
    em_tensor *si8 = em_sum(i8, EM_ALL, false);
    CHECK(si8 && em_tensor_dtype(si8) == EM_I64, "sum of i8 is i64");
    expect1("sum of i8 does not overflow", si8, 30000);
    em_tensor *bo = em_full(EM_SHAPE(4), 1, EM_BOOL, h_dev);
    expect1("sum of bool", em_sum(bo, EM_ALL, false), 4);
    expect1("cumsum of bool", em_select(em_cumsum(bo, 0), 0, 3), 4);
    /* f16 sums accumulate in f32 or better: 4096 ones would stop at 2048 in f16 */
    em_tensor *h = em_ones(EM_SHAPE(4096), EM_F16, h_dev);
    expect1("f16 sum accumulates wide", em_sum(h, EM_ALL, false), 4096);
    expect1("f16 cumsum accumulates wide", em_select(em_cumsum(h, 0), 0, 4095), 4096);
    CHECK_OK("special cases");
    em_scope_end();
}

/* ---- a large tensor: accuracy and identical bits for any thread count -------------------- */

typedef struct big_out {
    em_tensor *t[16];
    int n;
} big_out;

static void run_big(const em_tensor *x, big_out *o)
{
    o->n = 0;
    em_tensor *v = NULL, *i = NULL;
    o->t[o->n++] = em_sum(x, EM_ALL, false);
    o->t[o->n++] = em_sum(x, EM_AXES(0), false); /* column sums */
    o->t[o->n++] = em_sum(x, EM_AXES(1), true);
    o->t[o->n++] = em_mean(x, EM_AXES(0), false);
    o->t[o->n++] = em_var(x, EM_ALL, 1, false);
    o->t[o->n++] = em_norm(x, 2, EM_ALL, false);
    o->t[o->n++] = em_logsumexp(x, EM_AXES(1), false);
    o->t[o->n++] = em_argmax(x, EM_FLAT, false);
    o->t[o->n++] = em_prod(x, EM_AXES(0), false);
    o->t[o->n++] = em_softmax(x, 1);
    o->t[o->n++] = em_log_softmax(x, 0);
    o->t[o->n++] = em_cumsum(x, 1);
    em_max_dim(x, 0, false, &v, &i);
    o->t[o->n++] = v;
    o->t[o->n++] = i;
}

static void test_big(void)
{
    em_dtype dts[] = {EM_F32, EM_F64};
    for (int di = 0; di < 2; di++) {
        em_scope_begin();
        em_shape s = EM_SHAPE(320, 400); /* 128000 elements */
        double *v;
        em_tensor *x = h_rand(s, dts[di], H_CONTIG, 0.5, 1.5, &v);
        double *vt; /* xt's values, stored transposed: xt[i][j] = vt[j * 320 + i] */
        em_tensor *xt =
            em_transpose(h_rand(EM_SHAPE(400, 320), dts[di], H_CONTIG, 0.5, 1.5, &vt), 0, 1);
        int old = em_get_num_threads();
        big_out r[3], rt[3];
        for (int th = 1; th <= 3; th++) {
            em_set_num_threads(th);
            run_big(x, &r[th - 1]);
            run_big(xt, &rt[th - 1]);
        }
        em_set_num_threads(old);
        for (int k = 0; k < r[0].n; k++)
            for (int th = 1; th < 3; th++) {
                const em_tensor *a = r[0].t[k], *b = r[th].t[k];
                const em_tensor *at = rt[0].t[k], *bt = rt[th].t[k];
                CHECK(h_same_bytes(a, b), "big %s output %d differs between 1 and %d threads",
                      em_dtype_name(dts[di]), k, th + 1);
                CHECK(h_same_bytes(at, bt),
                      "big transposed %s output %d differs between 1 and %d threads",
                      em_dtype_name(dts[di]), k, th + 1);
            }
        /* accuracy of a few against the reference */
        double tot = 0, tol = dts[di] == EM_F32 ? 1e-6 : 1e-12;
        for (int64_t i = 0; i < 128000; i++) tot += v[i];
        double e = h_round_to(tot, dts[di]);
        h_check_tensor("big sum", r[0].t[0], &e, EM_SCALAR, 0, tol);
        double *col = malloc(400 * sizeof *col), *lse = malloc(320 * sizeof *lse);
        for (int c = 0; c < 400; c++) {
            double sc = 0;
            for (int rr = 0; rr < 320; rr++) sc += v[rr * 400 + c];
            col[c] = h_round_to(sc, dts[di]);
        }
        h_check_tensor("big column sums", r[0].t[1], col, EM_SHAPE(400), 0, tol);
        for (int rr = 0; rr < 320; rr++) {
            double m = -INFINITY, sc = 0;
            for (int c = 0; c < 400; c++) m = fmax(m, v[rr * 400 + c]);
            for (int c = 0; c < 400; c++) sc += exp(v[rr * 400 + c] - m);
            lse[rr] = h_round_to(m + log(sc), dts[di]);
        }
        h_check_tensor("big logsumexp", r[0].t[6], lse, EM_SHAPE(320), 0, tol);
        double mean = tot / 128000, m2 = 0;
        for (int64_t i = 0; i < 128000; i++) m2 += (v[i] - mean) * (v[i] - mean);
        e = h_round_to(m2 / 127999, dts[di]);
        h_check_tensor("big var", r[0].t[4], &e, EM_SCALAR, 0, tol);
        /* transposed input: sums over dim 1 (unit-stride kept dim) and means over dim 0 */
        double *rs = malloc(320 * sizeof *rs), *cm = malloc(400 * sizeof *cm);
        for (int i = 0; i < 320; i++) {
            double sc = 0;
            for (int j = 0; j < 400; j++) sc += vt[j * 320 + i];
            rs[i] = h_round_to(sc, dts[di]);
        }
        for (int j = 0; j < 400; j++) {
            double sc = 0;
            for (int i = 0; i < 320; i++) sc += vt[j * 320 + i];
            cm[j] = h_round_to(sc / 320, dts[di]);
        }
        h_check_tensor("big transposed row sums", rt[0].t[2], rs, EM_SHAPE(320, 1), 0, tol);
        h_check_tensor("big transposed column means", rt[0].t[3], cm, EM_SHAPE(400), 0, tol);
        free(rs);
        free(cm);
        free(vt);
        free(col);
        free(lse);
        free(v);
        em_scope_end();
    }
}

/* ---- bad input --------------------------------------------------------------------------- */

static void test_errors(void)
{
    em_scope_begin();
    em_tensor *x = em_zeros(EM_SHAPE(2, 3), EM_F32, h_dev);
    em_tensor *xi = em_zeros(EM_SHAPE(2, 3), EM_I32, h_dev);
    em_tensor *e = em_zeros(EM_SHAPE(0, 3), EM_F32, h_dev);
    CHECK(!em_sum(NULL, EM_ALL, false), "sum NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_sum");
    /* a NULL input keeps the first error */
    CHECK(!em_mean(em_sum(x, EM_AXES(5), false), EM_ALL, false), "chain");
    CHECK_ERR(EM_ERR_INDEX, "em_sum: dim 5");
    CHECK(!em_sum(x, EM_AXES(-3), false), "dim -3");
    CHECK_ERR(EM_ERR_INDEX, "em_sum: dim -3");
    CHECK(!em_sum(x, EM_AXES(0, -2), false), "repeated");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_sum");
    CHECK(!em_mean(xi, EM_ALL, false), "mean i32");
    CHECK_ERR(EM_ERR_DTYPE, "em_mean: dtype i32");
    CHECK(!em_var(xi, EM_ALL, 1, false), "var i32");
    CHECK_ERR(EM_ERR_DTYPE, "em_var");
    CHECK(!em_std(xi, EM_ALL, 1, false), "std i32");
    CHECK_ERR(EM_ERR_DTYPE, "em_std");
    CHECK(!em_norm(xi, 2, EM_ALL, false), "norm i32");
    CHECK_ERR(EM_ERR_DTYPE, "em_norm");
    CHECK(!em_logsumexp(xi, EM_ALL, false), "lse i32");
    CHECK_ERR(EM_ERR_DTYPE, "em_logsumexp");
    CHECK(!em_softmax(xi, 0), "softmax i32");
    CHECK_ERR(EM_ERR_DTYPE, "em_softmax");
    CHECK(!em_log_softmax(xi, 0), "log_softmax i32");
    CHECK_ERR(EM_ERR_DTYPE, "em_log_softmax");
    CHECK(!em_var(x, EM_ALL, -1, false), "negative correction");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_var");
    CHECK(!em_norm(x, NAN, EM_ALL, false), "NaN p");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_norm");
    CHECK(!em_max(e, EM_AXES(0), false), "max empty");
    CHECK_ERR(EM_ERR_SHAPE, "em_max: cannot reduce an empty dim");
    CHECK(!em_min(e, EM_ALL, true), "min empty");
    CHECK_ERR(EM_ERR_SHAPE, "em_min");
    CHECK(!em_norm(e, INFINITY, EM_ALL, false), "inf norm empty");
    CHECK_ERR(EM_ERR_SHAPE, "em_norm");
    CHECK(em_max(e, EM_AXES(1), false) != NULL, "max over the non-empty dim is fine");
    CHECK_OK("max over the non-empty dim");
    CHECK(!em_argmax(x, 2, false), "argmax dim");
    CHECK_ERR(EM_ERR_INDEX, "em_argmax: dim 2");
    CHECK(!em_argmin(e, EM_FLAT, false), "argmin empty");
    CHECK_ERR(EM_ERR_SHAPE, "em_argmin");
    CHECK(!em_argmax(NULL, 0, false), "argmax NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_argmax");
    em_tensor *v = x, *i = x;
    CHECK(em_max_dim(x, 3, false, &v, &i) == EM_ERR_INDEX && !v && !i, "max_dim dim");
    CHECK_ERR(EM_ERR_INDEX, "em_max_dim: dim 3");
    CHECK(em_min_dim(NULL, 0, false, &v, &i) == EM_ERR_INVALID_ARG, "min_dim NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_min_dim");
    CHECK(em_min_dim(e, 0, false, &v, &i) == EM_ERR_SHAPE, "min_dim empty");
    CHECK_ERR(EM_ERR_SHAPE, "em_min_dim");
    CHECK(!em_cumsum(x, -4), "cumsum dim");
    CHECK_ERR(EM_ERR_INDEX, "em_cumsum: dim -4");
    CHECK(!em_cumprod(NULL, 0), "cumprod NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_cumprod");
    CHECK(em_cummax(x, 2, &v, &i) == EM_ERR_INDEX, "cummax dim");
    CHECK_ERR(EM_ERR_INDEX, "em_cummax: dim 2");
    CHECK(em_cummin(NULL, 0, &v, NULL) == EM_ERR_INVALID_ARG, "cummin NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_cummin");
    CHECK(!em_softmax(x, 2), "softmax dim");
    CHECK_ERR(EM_ERR_INDEX, "em_softmax: dim 2");
    CHECK(!em_any(NULL, EM_ALL, false), "any NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_any");
    CHECK(!em_all(x, EM_AXES(9), false), "all dim");
    CHECK_ERR(EM_ERR_INDEX, "em_all");
    CHECK(!em_count_nonzero(x, EM_AXES(1, 1), false), "count repeated");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_count_nonzero");
    CHECK(!em_prod(x, EM_AXES(2), false), "prod dim");
    CHECK_ERR(EM_ERR_INDEX, "em_prod");
    em_scope_end();
}

void conf_reduce(void)
{
    test_mask_reductions();
    test_arg_reductions();
    test_along();
    check_softmax_backward();
    check_log_softmax_gather();
    test_special();
    test_big();
    test_errors();
}
