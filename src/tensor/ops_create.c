/* Creation ops: constant fills, ranges, identity, random tensors, one-hot, triangles. Their
 * records' parameters are em_p_fill, em_p_arange, em_p_linspace, em_p_random (the Philox stream
 * and the distribution), em_p_one_hot and em_p_diag (src/ir/ir.h). */
#include <math.h>

#include "../backend/backend.h"
#include "op.h"

/* The shape, dtype and device, and the size against the device's memory (tn_check_alloc). */
static bool check_create(const char *op, em_shape *s, em_dtype dt, em_device dev)
{
    em_backends_init();
    if (s->rank < 0 || s->rank > EM_MAX_RANK) {
        em_error(EM_ERR_SHAPE, "%s: rank %d is outside [0, %d]", op, s->rank, EM_MAX_RANK);
        return false;
    }
    if (!em_dtype_valid((int)dt)) {
        em_error(EM_ERR_DTYPE, "%s: invalid dtype %d", op, (int)dt);
        return false;
    }
    const em_backend *be = em_backend_get(dev.backend);
    if (!be || dev.index < 0 || dev.index >= be->device_count()) {
        char b[32];
        em_error(EM_ERR_DEVICE, "%s: device %s does not exist", op,
                 em_device_str(dev, b, sizeof b));
        return false;
    }
    return tn_check_alloc(op, dt, s->dims, s->rank, dev);
}

static em_tensor *run0(em_op_kind k, em_tensor *out, const em_params *p)
{
    /* nothing to fill (and no input to record): kernels would still walk the outer dims of a
       [2^40, 0] tensor */
    if (out && tn_numel(out) == 0) return out;
    return tn_run(k, out, NULL, 0, p);
}

/* The smallest and largest value dt holds exactly as an integer: the integer dtypes' bounds,
 * +-2^(mantissa bits + 1) for floats (PyTorch's bounds for random_ on them). */
static void exact_int_range(em_dtype dt, int64_t *lo, int64_t *hi)
{
    static const int64_t top[EM_DTYPE_COUNT] = {
        [EM_F64] = INT64_C(1) << 53, [EM_F32] = INT64_C(1) << 24,
        [EM_F16] = INT64_C(1) << 11, [EM_BF16] = INT64_C(1) << 8,
        [EM_I64] = INT64_MAX,        [EM_I32] = INT32_MAX,
        [EM_I16] = INT16_MAX,        [EM_I8] = INT8_MAX,
        [EM_U8] = UINT8_MAX,         [EM_BOOL] = 1,
    };
    *hi = em_dtype_valid((int)dt) ? top[dt] : INT64_MAX;
    *lo = dt == EM_U8 || dt == EM_BOOL ? 0 : dt == EM_I64 ? INT64_MIN : -*hi - (dt >= EM_I32);
}

em_tensor *em_empty(em_shape shape, em_dtype dtype, em_device dev)
{
    if (!check_create("em_empty", &shape, dtype, dev)) return NULL;
    return tn_new(dtype, shape.dims, shape.rank, dev);
}

static em_tensor *full_named(const char *fn, em_shape shape, double value, em_dtype dtype,
                             em_device dev)
{
    if (!check_create(fn, &shape, dtype, dev)) return NULL;
    em_params p = {.fill = {.value = value}};
    return run0(EM_OP_FILL, tn_new(dtype, shape.dims, shape.rank, dev), &p);
}

em_tensor *em_full(em_shape shape, double value, em_dtype dtype, em_device dev)
{
    return full_named("em_full", shape, value, dtype, dev);
}

em_tensor *em_zeros(em_shape shape, em_dtype dtype, em_device dev)
{
    return full_named("em_zeros", shape, 0.0, dtype, dev);
}

em_tensor *em_ones(em_shape shape, em_dtype dtype, em_device dev)
{
    return full_named("em_ones", shape, 1.0, dtype, dev);
}

em_tensor *em_scalar(double value, em_dtype dtype, em_device dev)
{
    return full_named("em_scalar", EM_SCALAR, value, dtype, dev);
}

em_tensor *em_arange(double start, double end, double step, em_dtype dtype, em_device dev)
{
    em_shape s = {.rank = 1};
    if (!check_create("em_arange", &s, dtype, dev)) return NULL; /* dtype and device */
    if (step == 0 || !isfinite(start) || !isfinite(end) || !isfinite(step)) {
        em_error(EM_ERR_INVALID_ARG, "em_arange: bad range start %g end %g step %g", start, end,
                 step);
        return NULL;
    }
    double n = ceil((end - start) / step);
    if (n < 0) n = 0;
    if (n > 1e12) {
        em_error(EM_ERR_INVALID_ARG, "em_arange: %g elements is too many", n);
        return NULL;
    }
    s.dims[0] = (int64_t)n;
    int64_t lo = 0, hi = 0;
    exact_int_range(dtype, &lo, &hi);
    double last = start + (n - 1) * step;
    if (n > 0 && !em_dtype_is_float(dtype) &&
        !(fmin(start, last) >= (double)lo && fmax(start, last) < (double)hi + 1.0)) {
        em_error(EM_ERR_INVALID_ARG, "em_arange: values from %g to %g do not fit %s", start, last,
                 em_dtype_name(dtype));
        return NULL;
    }
    em_params p = {.arange = {.start = start, .step = step}};
    return run0(EM_OP_ARANGE, tn_new_for("em_arange", dtype, s.dims, 1, dev), &p);
}

em_tensor *em_linspace(double start, double end, int64_t steps, em_dtype dtype, em_device dev)
{
    em_shape s = EM_SHAPE(steps);
    if (!check_create("em_linspace", &s, dtype, dev)) return NULL;
    em_params p = {.linspace = {.start = start, .end = end}};
    return run0(EM_OP_LINSPACE, tn_new(dtype, s.dims, 1, dev), &p);
}

em_tensor *em_eye(int64_t n, int64_t m, em_dtype dtype, em_device dev)
{
    if (m < 0) m = n;
    em_shape s = EM_SHAPE(n, m);
    if (!check_create("em_eye", &s, dtype, dev)) return NULL;
    return run0(EM_OP_EYE, tn_new(dtype, s.dims, 2, dev), NULL);
}

static em_tensor *random_op(const char *name, em_op_kind k, em_shape s, double a, double b,
                            int64_t lo, int64_t hi, em_dtype dt, em_device dev)
{
    if (!check_create(name, &s, dt, dev)) return NULL;
    em_rng_state st = em_rng_get_state();
    em_tensor *out = tn_new(dt, s.dims, s.rank, dev);
    if (!out) return NULL;
    uint64_t off = em_rng_reserve((uint64_t)tn_numel(out) * 2);
    em_params p = {
        .random = {.seed = st.seed, .offset = off, .v = {a, b}, .int_low = lo, .int_high = hi}};
    return run0(k, out, &p);
}

static em_tensor *uniform_named(const char *fn, em_shape shape, double low, double high,
                                em_dtype dtype, em_device dev)
{
    if (!em_dtype_is_float(dtype)) {
        em_error(EM_ERR_DTYPE, "%s: dtype %s is not a float type", fn, em_dtype_name(dtype));
        return NULL;
    }
    if (!(low <= high)) {
        em_error(EM_ERR_INVALID_ARG, "%s: low %g is above high %g", fn, low, high);
        return NULL;
    }
    return random_op(fn, EM_OP_RAND_UNIFORM, shape, low, high, 0, 0, dtype, dev);
}

static em_tensor *normal_named(const char *fn, em_shape shape, double mean, double std,
                               em_dtype dtype, em_device dev)
{
    if (!em_dtype_is_float(dtype)) {
        em_error(EM_ERR_DTYPE, "%s: dtype %s is not a float type", fn, em_dtype_name(dtype));
        return NULL;
    }
    if (!(std >= 0)) {
        em_error(EM_ERR_INVALID_ARG, "%s: std %g is negative", fn, std);
        return NULL;
    }
    return random_op(fn, EM_OP_RAND_NORMAL, shape, mean, std, 0, 0, dtype, dev);
}

em_tensor *em_rand_uniform(em_shape shape, double low, double high, em_dtype dtype, em_device dev)
{
    return uniform_named("em_rand_uniform", shape, low, high, dtype, dev);
}

em_tensor *em_rand(em_shape shape, em_dtype dtype, em_device dev)
{
    return uniform_named("em_rand", shape, 0.0, 1.0, dtype, dev);
}

em_tensor *em_rand_normal(em_shape shape, double mean, double std, em_dtype dtype, em_device dev)
{
    return normal_named("em_rand_normal", shape, mean, std, dtype, dev);
}

em_tensor *em_randn(em_shape shape, em_dtype dtype, em_device dev)
{
    return normal_named("em_randn", shape, 0.0, 1.0, dtype, dev);
}

em_tensor *em_bernoulli_p(em_shape shape, double p, em_dtype dtype, em_device dev)
{
    if (!(p >= 0 && p <= 1)) {
        em_error(EM_ERR_INVALID_ARG, "em_bernoulli_p: probability %g is outside [0, 1]", p);
        return NULL;
    }
    return random_op("em_bernoulli_p", EM_OP_BERNOULLI, shape, p, 0, 0, 0, dtype, dev);
}

em_tensor *em_bernoulli(const em_tensor *p)
{
    if (!tn_check_ptr("em_bernoulli", p, "p")) return NULL;
    if (!em_dtype_is_float(p->dtype)) {
        em_error(EM_ERR_DTYPE, "em_bernoulli: probabilities must be float, got %s",
                 em_dtype_name(p->dtype));
        return NULL;
    }
    em_rng_state st = em_rng_get_state();
    em_tensor *out = tn_new(p->dtype, p->shape, p->rank, p->storage->device);
    if (!out) return NULL;
    uint64_t off = em_rng_reserve((uint64_t)tn_numel(out) * 2);
    em_params par = {.random = {.seed = st.seed, .offset = off}};
    em_tensor *in = (em_tensor *)p;
    return tn_run(EM_OP_BERNOULLI, out, &in, 1, &par);
}

em_tensor *em_randint(int64_t low, int64_t high, em_shape shape, em_dtype dtype, em_device dev)
{
    if (low >= high) {
        em_error(EM_ERR_INVALID_ARG, "em_randint: empty range [%lld, %lld)", (long long)low,
                 (long long)high);
        return NULL;
    }
    int64_t width = 0, dlo = 0, dhi = 0;
    if (!core_sub_ok(high, low, &width)) {
        em_error(EM_ERR_INVALID_ARG,
                 "em_randint: range [%lld, %lld) holds more than 2^63 - 1 values", (long long)low,
                 (long long)high);
        return NULL;
    }
    exact_int_range(dtype, &dlo, &dhi);
    if (low < dlo || high - 1 > dhi) {
        em_error(EM_ERR_INVALID_ARG, "em_randint: range [%lld, %lld) does not fit %s",
                 (long long)low, (long long)high, em_dtype_name(dtype));
        return NULL;
    }
    return random_op("em_randint", EM_OP_RANDINT, shape, 0, 0, low, high, dtype, dev);
}

em_tensor *em_empty_like(const em_tensor *t)
{
    if (!tn_check_ptr("em_empty_like", t, "t")) return NULL;
    return em_empty(tn_shape(t), t->dtype, t->storage->device);
}

em_tensor *em_zeros_like(const em_tensor *t)
{
    if (!tn_check_ptr("em_zeros_like", t, "t")) return NULL;
    return full_named("em_zeros_like", tn_shape(t), 0.0, t->dtype, t->storage->device);
}

em_tensor *em_ones_like(const em_tensor *t)
{
    if (!tn_check_ptr("em_ones_like", t, "t")) return NULL;
    return full_named("em_ones_like", tn_shape(t), 1.0, t->dtype, t->storage->device);
}

em_tensor *em_full_like(const em_tensor *t, double value)
{
    if (!tn_check_ptr("em_full_like", t, "t")) return NULL;
    return full_named("em_full_like", tn_shape(t), value, t->dtype, t->storage->device);
}

em_tensor *em_rand_like(const em_tensor *t)
{
    if (!tn_check_ptr("em_rand_like", t, "t")) return NULL;
    return uniform_named("em_rand_like", tn_shape(t), 0.0, 1.0, t->dtype, t->storage->device);
}

em_tensor *em_randn_like(const em_tensor *t)
{
    if (!tn_check_ptr("em_randn_like", t, "t")) return NULL;
    return normal_named("em_randn_like", tn_shape(t), 0.0, 1.0, t->dtype, t->storage->device);
}

em_tensor *em_one_hot(const em_tensor *indices, int64_t num_classes)
{
    if (!tn_check_ptr("em_one_hot", indices, "indices")) return NULL;
    if (!em_dtype_is_int(indices->dtype)) {
        em_error(EM_ERR_DTYPE, "em_one_hot: indices must be integers, got %s",
                 em_dtype_name(indices->dtype));
        return NULL;
    }
    if (indices->rank >= EM_MAX_RANK) {
        em_error(EM_ERR_SHAPE, "em_one_hot: rank %d leaves no room for the class dim",
                 indices->rank);
        return NULL;
    }
    /* Validate the indices on the host: the output shape depends on them when classes < 0. */
    int64_t n = tn_numel(indices);
    int64_t *v = n ? em_alloc((size_t)n * sizeof *v) : NULL;
    if (n && !v) return NULL;
    if (n && em_to_data(indices, v, EM_I64, n) != EM_OK) {
        em_free(v);
        return NULL;
    }
    int64_t maxv = -1;
    for (int64_t i = 0; i < n; i++) {
        if (v[i] < 0 || (num_classes >= 0 && v[i] >= num_classes)) {
            em_error(EM_ERR_INDEX, "em_one_hot: index %lld is outside [0, %lld)", (long long)v[i],
                     (long long)num_classes);
            em_free(v);
            return NULL;
        }
        if (v[i] > maxv) maxv = v[i];
    }
    em_free(v);
    if (num_classes < 0 && maxv == INT64_MAX) {
        em_error(EM_ERR_INDEX, "em_one_hot: index %lld leaves no class count", (long long)maxv);
        return NULL;
    }
    if (num_classes < 0) num_classes = maxv + 1;
    int64_t shape[EM_MAX_RANK];
    for (int d = 0; d < indices->rank; d++) shape[d] = indices->shape[d];
    shape[indices->rank] = num_classes;
    em_tensor *out =
        tn_new_for("em_one_hot", EM_I64, shape, indices->rank + 1, indices->storage->device);
    em_params p = {.one_hot = {.classes = num_classes}};
    em_tensor *in = (em_tensor *)indices;
    return tn_run(EM_OP_ONE_HOT, out, &in, 1, &p);
}

static em_tensor *triangle(const char *name, em_op_kind k, const em_tensor *t, int64_t diag)
{
    if (!tn_check_ptr(name, t, "t")) return NULL;
    if (t->rank < 2) {
        em_error(EM_ERR_SHAPE, "%s: needs at least 2 dims, got shape %s", name,
                 tn_dims_str(t->shape, t->rank));
        return NULL;
    }
    em_tensor *out = tn_new(t->dtype, t->shape, t->rank, t->storage->device);
    em_params p = {.diag = {.k = diag}};
    em_tensor *in = (em_tensor *)t;
    return tn_run(k, out, &in, 1, &p);
}

em_tensor *em_tril(const em_tensor *t, int64_t k)
{
    return triangle("em_tril", EM_OP_TRIL, t, k);
}

em_tensor *em_triu(const em_tensor *t, int64_t k)
{
    return triangle("em_triu", EM_OP_TRIU, t, k);
}

em_status em_meshgrid(em_tensor *const *tensors, int n, em_tensor **out)
{
    if (!tn_check_ptr("em_meshgrid", tensors, "tensors") ||
        !tn_check_ptr("em_meshgrid", out, "out"))
        return em_last_status();
    if (n < 1 || n > EM_MAX_RANK)
        return em_error(EM_ERR_INVALID_ARG, "em_meshgrid: %d tensors given, 1 to %d allowed", n,
                        EM_MAX_RANK);
    em_shape s = {.rank = n};
    for (int i = 0; i < n; i++) {
        if (!tn_check_ptr("em_meshgrid", tensors[i], "tensors[i]")) return em_last_status();
        if (tensors[i]->rank != 1)
            return em_error(EM_ERR_SHAPE, "em_meshgrid: tensor %d has shape %s, not 1-D", i,
                            tn_dims_str(tensors[i]->shape, tensors[i]->rank));
        s.dims[i] = tensors[i]->shape[0];
    }
    for (int i = 0; i < n; i++) out[i] = NULL;
    for (int i = 0; i < n; i++) {
        em_shape v = {.rank = n};
        for (int d = 0; d < n; d++) v.dims[d] = d == i ? s.dims[i] : 1;
        em_tensor *r = em_view(tensors[i], v);
        out[i] = r ? em_expand(r, s) : NULL;
        em_release(r);
        if (!out[i]) {
            for (int j = 0; j < i; j++) {
                em_release(out[j]);
                out[j] = NULL;
            }
            return em_last_status();
        }
    }
    return EM_OK;
}
