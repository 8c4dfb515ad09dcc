/* Parameter initialisers with torch.nn.init's formulas (gain, fans, Kaiming, Xavier,
 * truncated normal, orthogonal). All draw from the global generator and record nothing. */
#include <math.h>
#include <stdlib.h>

#include "nn_impl.h"

double em_init_gain(em_nonlinearity nl, double param)
{
    switch (nl) {
    case EM_NL_RELU: return sqrt(2.0);
    case EM_NL_LEAKY_RELU: return sqrt(2.0 / (1 + param * param));
    case EM_NL_TANH: return 5.0 / 3.0;
    case EM_NL_SELU: return 3.0 / 4.0;
    default: return 1.0;
    }
}

/* a * b, INT64_MAX (or INT64_MIN) where that does not fit: fans only scale bounds */
static int64_t sat_mul(int64_t a, int64_t b)
{
    int64_t r;
    if (core_mul_ok(a, b, &r)) return r;
    return (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
}

void em_init_fans(em_shape s, int64_t *fan_in, int64_t *fan_out)
{
    int rank = s.rank < 0 ? 0 : (s.rank > EM_MAX_RANK ? EM_MAX_RANK : s.rank);
    int64_t field = 1;
    for (int d = 2; d < rank; d++) field = sat_mul(field, s.dims[d]);
    int64_t in = rank >= 2 ? sat_mul(s.dims[1], field) : (rank == 1 ? s.dims[0] : 1);
    int64_t out = rank >= 2 ? sat_mul(s.dims[0], field) : (rank == 1 ? s.dims[0] : 1);
    if (fan_in) *fan_in = in;
    if (fan_out) *fan_out = out;
}

/* The shape, dtype and device of a new parameter, checked before any bound is computed from
 * them: false + an error naming fn. */
static bool init_check(const char *fn, em_shape s, em_dtype dt, em_device dev)
{
    if (!em_dtype_valid((int)dt)) {
        em_error(EM_ERR_DTYPE, "%s: invalid dtype %d", fn, (int)dt);
        return false;
    }
    return tn_check_alloc(fn, dt, s.dims, s.rank, dev);
}

em_tensor *em_init_constant(em_shape s, double v, em_dtype dt, em_device dev)
{
    if (!init_check("em_init_constant", s, dt, dev)) return NULL;
    return em_full(s, v, dt, dev);
}

em_tensor *em_init_uniform(em_shape s, double a, double b, em_dtype dt, em_device dev)
{
    if (!init_check("em_init_uniform", s, dt, dev)) return NULL;
    return em_rand_uniform(s, a, b, dt, dev);
}

em_tensor *em_init_normal(em_shape s, double mean, double std, em_dtype dt, em_device dev)
{
    if (!init_check("em_init_normal", s, dt, dev)) return NULL;
    return em_rand_normal(s, mean, std, dt, dev);
}

em_tensor *em_init_trunc_normal(em_shape s, double mean, double std, double a, double b,
                                em_dtype dt, em_device dev)
{
    /* inverse CDF: u uniform in [Phi(alpha), Phi(beta)], x = mean + std * sqrt2 * erfinv(2u-1) */
    if (!init_check("em_init_trunc_normal", s, dt, dev) ||
        !init_check("em_init_trunc_normal", s, EM_F64, EM_CPU))
        return NULL;
    double alpha = (a - mean) / std, beta = (b - mean) / std;
    double lo = 0.5 * (1 + erf(alpha / sqrt(2.0))), hi = 0.5 * (1 + erf(beta / sqrt(2.0)));
    em_tensor *u = em_rand_uniform(s, 2 * lo - 1, 2 * hi - 1, EM_F64, dev);
    int64_t n = em_shape_numel(s);
    double *v = em_alloc((size_t)(n ? n : 1) * sizeof *v);
    if (!u || !v || em_to_data(u, v, EM_F64, n) != EM_OK) {
        em_release(u);
        em_free(v);
        return NULL;
    }
    em_release(u);
    for (int64_t i = 0; i < n; i++) {
        /* erfinv by Newton iterations on erf */
        double y = v[i], x = 0;
        for (int it = 0; it < 60; it++) {
            double err = erf(x) - y;
            x -= err / (2 / sqrt(M_PI) * exp(-x * x));
            if (fabs(err) < 1e-15) break;
        }
        double r = mean + std * sqrt(2.0) * x;
        v[i] = r < a ? a : (r > b ? b : r);
    }
    em_tensor *t = em_from_data(v, EM_F64, s, dt, dev);
    em_free(v);
    return t;
}

static double fan_for(em_shape s, bool fan_out)
{
    int64_t in, out;
    em_init_fans(s, &in, &out);
    return (double)(fan_out ? out : in);
}

em_tensor *em_init_kaiming_uniform(em_shape s, double a, bool fan_out, em_nonlinearity nl,
                                   em_dtype dt, em_device dev)
{
    if (!init_check("em_init_kaiming_uniform", s, dt, dev)) return NULL;
    double std = em_init_gain(nl, a) / sqrt(fan_for(s, fan_out));
    double bound = sqrt(3.0) * std;
    return em_rand_uniform(s, -bound, bound, dt, dev);
}

em_tensor *em_init_kaiming_normal(em_shape s, double a, bool fan_out, em_nonlinearity nl,
                                  em_dtype dt, em_device dev)
{
    if (!init_check("em_init_kaiming_normal", s, dt, dev)) return NULL;
    double std = em_init_gain(nl, a) / sqrt(fan_for(s, fan_out));
    return em_rand_normal(s, 0, std, dt, dev);
}

em_tensor *em_init_xavier_uniform(em_shape s, double gain, em_dtype dt, em_device dev)
{
    if (!init_check("em_init_xavier_uniform", s, dt, dev)) return NULL;
    int64_t in, out;
    em_init_fans(s, &in, &out);
    double bound = gain * sqrt(6.0 / ((double)in + (double)out));
    return em_rand_uniform(s, -bound, bound, dt, dev);
}

em_tensor *em_init_xavier_normal(em_shape s, double gain, em_dtype dt, em_device dev)
{
    if (!init_check("em_init_xavier_normal", s, dt, dev)) return NULL;
    int64_t in, out;
    em_init_fans(s, &in, &out);
    return em_rand_normal(s, 0, gain * sqrt(2.0 / ((double)in + (double)out)), dt, dev);
}

em_tensor *em_init_orthogonal(em_shape s, double gain, em_dtype dt, em_device dev)
{
    /* QR (modified Gram-Schmidt) of a normal matrix [rows, cols], transposed when rows < cols,
     * with the sign correction of torch.nn.init.orthogonal_ */
    if (s.rank < 2) {
        em_error(EM_ERR_SHAPE, "em_init_orthogonal: needs at least 2 dims");
        return NULL;
    }
    /* its f64 work matrices are as large as the result */
    if (!init_check("em_init_orthogonal", s, dt, dev) ||
        !init_check("em_init_orthogonal", s, EM_F64, EM_CPU))
        return NULL;
    int64_t rows = s.dims[0], cols = em_shape_numel(s) / (rows ? rows : 1);
    bool tr = rows < cols;
    int64_t r = tr ? cols : rows, c = tr ? rows : cols; /* r >= c */
    em_tensor *g = em_randn(EM_SHAPE(r, c), EM_F64, EM_CPU);
    int64_t rc = r * c;
    double *a = em_alloc((size_t)(rc > 0 ? rc : 1) * sizeof *a);
    if (!g || !a || em_to_data(g, a, EM_F64, r * c) != EM_OK) {
        em_release(g);
        em_free(a);
        return NULL;
    }
    em_release(g);
    for (int64_t j = 0; j < c; j++) {
        for (int64_t k = 0; k < j; k++) {
            double dot = 0;
            for (int64_t i = 0; i < r; i++) dot += a[i * c + j] * a[i * c + k];
            for (int64_t i = 0; i < r; i++) a[i * c + j] -= dot * a[i * c + k];
        }
        double nrm = 0;
        for (int64_t i = 0; i < r; i++) nrm += a[i * c + j] * a[i * c + j];
        nrm = sqrt(nrm);
        for (int64_t i = 0; i < r; i++) a[i * c + j] /= nrm > 0 ? nrm : 1;
    }
    int64_t rcols = rows * cols;
    double *q = em_alloc((size_t)(rcols > 0 ? rcols : 1) * sizeof *q);
    if (!q) {
        em_free(a);
        return NULL;
    }
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            q[i * cols + j] = gain * (tr ? a[j * c + i] : a[i * c + j]);
    em_tensor *t = em_from_data(q, EM_F64, s, dt, dev);
    em_free(a);
    em_free(q);
    return t;
}
