/* Reductions, scans and softmax: front-ends that validate once, infer the output and dispatch.
 * Records (N is the number of elements reduced into one output; parameters in src/ir/ir.h):
 *  SUM MEAN PROD MAX MIN LOGSUMEXP ANY ALL COUNT_NONZERO VAR STD NORM: em_p_reduce, the bitmask
 *    of the reduced dims of the input (EM_ALL sets every bit; 0 for a rank-0 input) and keepdim;
 *    VAR and STD divide by max(0, N - correction); NORM's order p (INFINITY, -INFINITY, 0 or
 *    any other).
 *  ARGMAX ARGMIN: em_p_dim, the dim in [0, rank) or -1 for the flattened tensor (EM_FLAT), and
 *    keepdim. A rank-0 input has dim 0 and nothing is reduced.
 *  MAX_DIM MIN_DIM: em_p_dim; out[0] values (input dtype), out[1] i64 indices (first
 *    occurrence; the first NaN when there is one).
 *  CUMSUM CUMPROD SOFTMAX LOG_SOFTMAX: em_p_dim's dim (0 for a rank-0 input).
 *  CUMMAX CUMMIN: em_p_dim's dim; out[0] values, out[1] i64 indices (ties move to the latest).
 *  SOFTMAX_BACKWARD (tn_softmax_backward, internal: the softmax and log_softmax rules): in[0] =
 *    y (the forward's output), in[1] = g, one float dtype and one shape; em_p_dim's dim and
 *    log -> y (g - sum(g y)) or g - exp(y) sum(g), the sums along the dim.
 *  LOG_SOFTMAX_GATHER (tn_log_softmax_gather, internal: cross entropy): in[0] = x (float, rank
 *    >= 1), in[1] = t (i64, contiguous, x's shape without the dim); em_p_dim's dim -> out (x's
 *    dtype, t's shape, contiguous; line r of x in row-major order of the other dims is t[r] and
 *    out[r]) = x[t] - logsumexp(x) along the dim, NaN where t is out of range.
 *  LOG_SOFTMAX_GATHER_BACKWARD (its rule): in[0] = x, in[1] = t as above, in[2] = g (x's dtype,
 *    t's shape, contiguous); em_p_dim's dim -> out like x = g (onehot(t) - softmax(x)) along the
 *    dim (a line of zeros where t is out of range: the gather's gradient drops it).
 * Output dtypes: sum/prod/cumsum/cumprod of integers or bool give i64, of floats the input
 * dtype; argmax/argmin/count_nonzero give i64; any/all give bool; the rest keep the dtype. */
#include <math.h>
#include <string.h>

#include "op.h"

/* Output shape of reducing `mask` dims of x. */
static em_tensor *reduced_out(const em_tensor *x, uint32_t mask, bool keepdim, em_dtype dt)
{
    int64_t shape[EM_MAX_RANK];
    int r = 0;
    for (int d = 0; d < x->rank; d++) {
        if (mask & (1u << d)) {
            if (keepdim) shape[r++] = 1;
        } else {
            shape[r++] = x->shape[d];
        }
    }
    return tn_new(dt, shape, r, x->storage->device);
}

static bool need_float(const char *fn, const em_tensor *x)
{
    if (em_dtype_is_float(x->dtype)) return true;
    em_error(EM_ERR_DTYPE, "%s: dtype %s is not supported (a float tensor is required)", fn,
             em_dtype_name(x->dtype));
    return false;
}

/* Ops without an identity (max, min, argmax, inf-norms) cannot reduce a size-0 dim. */
static bool need_nonempty(const char *fn, const em_tensor *x, uint32_t mask)
{
    for (int d = 0; d < x->rank; d++) {
        if ((mask & (1u << d)) && x->shape[d] == 0) {
            em_error(EM_ERR_SHAPE,
                     "%s: cannot reduce an empty dim (dim %d of size 0 in shape %s): the "
                     "operation has no identity",
                     fn, d, tn_dims_str(x->shape, x->rank));
            return false;
        }
    }
    return true;
}

static em_dtype widened(em_dtype dt)
{
    return em_dtype_is_float(dt) ? dt : EM_I64;
}

/* Shared path of the mask reductions: checks, output, dispatch. */
static em_tensor *reduce_op(const char *fn, em_op_kind kind, const em_tensor *x, em_axes dims,
                            bool keepdim, em_dtype out_dt, int64_t correction, double f0)
{
    uint32_t mask;
    if (!tn_axes_mask(fn, dims, x->rank, &mask)) return NULL;
    if ((kind == EM_OP_MAX || kind == EM_OP_MIN || (kind == EM_OP_NORM && isinf(f0))) &&
        !need_nonempty(fn, x, mask))
        return NULL;
    em_params p = {.reduce = {.mask = mask, .keepdim = keepdim, .correction = correction, .p = f0}};
    em_tensor *in = (em_tensor *)x;
    return tn_run(kind, reduced_out(x, mask, keepdim, out_dt), &in, 1, &p);
}

em_tensor *em_sum(const em_tensor *x, em_axes dims, bool keepdim)
{
    if (!tn_check_ptr("em_sum", x, "x")) return NULL;
    return reduce_op("em_sum", EM_OP_SUM, x, dims, keepdim, widened(x->dtype), 0, 0);
}

em_tensor *em_mean(const em_tensor *x, em_axes dims, bool keepdim)
{
    if (!tn_check_ptr("em_mean", x, "x") || !need_float("em_mean", x)) return NULL;
    return reduce_op("em_mean", EM_OP_MEAN, x, dims, keepdim, x->dtype, 0, 0);
}

em_tensor *em_prod(const em_tensor *x, em_axes dims, bool keepdim)
{
    if (!tn_check_ptr("em_prod", x, "x")) return NULL;
    return reduce_op("em_prod", EM_OP_PROD, x, dims, keepdim, widened(x->dtype), 0, 0);
}

em_tensor *em_max(const em_tensor *x, em_axes dims, bool keepdim)
{
    if (!tn_check_ptr("em_max", x, "x")) return NULL;
    return reduce_op("em_max", EM_OP_MAX, x, dims, keepdim, x->dtype, 0, 0);
}

em_tensor *em_min(const em_tensor *x, em_axes dims, bool keepdim)
{
    if (!tn_check_ptr("em_min", x, "x")) return NULL;
    return reduce_op("em_min", EM_OP_MIN, x, dims, keepdim, x->dtype, 0, 0);
}

static em_tensor *var_op(const char *fn, em_op_kind kind, const em_tensor *x, em_axes dims,
                         int64_t correction, bool keepdim)
{
    if (!tn_check_ptr(fn, x, "x") || !need_float(fn, x)) return NULL;
    if (correction < 0) {
        em_error(EM_ERR_INVALID_ARG, "%s: correction %lld is negative", fn, (long long)correction);
        return NULL;
    }
    return reduce_op(fn, kind, x, dims, keepdim, x->dtype, correction, 0);
}

em_tensor *em_var(const em_tensor *x, em_axes dims, int64_t correction, bool keepdim)
{
    return var_op("em_var", EM_OP_VAR, x, dims, correction, keepdim);
}

em_tensor *em_std(const em_tensor *x, em_axes dims, int64_t correction, bool keepdim)
{
    return var_op("em_std", EM_OP_STD, x, dims, correction, keepdim);
}

em_tensor *em_norm(const em_tensor *x, double p, em_axes dims, bool keepdim)
{
    if (!tn_check_ptr("em_norm", x, "x") || !need_float("em_norm", x)) return NULL;
    if (isnan(p)) {
        em_error(EM_ERR_INVALID_ARG, "em_norm: order p is NaN");
        return NULL;
    }
    return reduce_op("em_norm", EM_OP_NORM, x, dims, keepdim, x->dtype, 0, p);
}

em_tensor *em_logsumexp(const em_tensor *x, em_axes dims, bool keepdim)
{
    if (!tn_check_ptr("em_logsumexp", x, "x") || !need_float("em_logsumexp", x)) return NULL;
    return reduce_op("em_logsumexp", EM_OP_LOGSUMEXP, x, dims, keepdim, x->dtype, 0, 0);
}

em_tensor *em_any(const em_tensor *x, em_axes dims, bool keepdim)
{
    if (!tn_check_ptr("em_any", x, "x")) return NULL;
    return reduce_op("em_any", EM_OP_ANY, x, dims, keepdim, EM_BOOL, 0, 0);
}

em_tensor *em_all(const em_tensor *x, em_axes dims, bool keepdim)
{
    if (!tn_check_ptr("em_all", x, "x")) return NULL;
    return reduce_op("em_all", EM_OP_ALL, x, dims, keepdim, EM_BOOL, 0, 0);
}

em_tensor *em_count_nonzero(const em_tensor *x, em_axes dims, bool keepdim)
{
    if (!tn_check_ptr("em_count_nonzero", x, "x")) return NULL;
    return reduce_op("em_count_nonzero", EM_OP_COUNT_NONZERO, x, dims, keepdim, EM_I64, 0, 0);
}

/* ---- one-dim reductions with indices ----------------------------------------------------- */

static em_tensor *arg_op(const char *fn, em_op_kind kind, const em_tensor *x, int dim, bool keepdim)
{
    if (!tn_check_ptr(fn, x, "x")) return NULL;
    uint32_t mask;
    int d0;
    if (dim == EM_FLAT) {
        mask = x->rank ? (uint32_t)((1u << x->rank) - 1) : 0;
        d0 = -1;
    } else {
        if (!tn_norm_dim(fn, x->rank, &dim)) return NULL;
        mask = x->rank ? 1u << dim : 0;
        d0 = dim;
    }
    if (!need_nonempty(fn, x, mask)) return NULL;
    em_tensor *out;
    int64_t none[1] = {1};
    if (dim == EM_FLAT && !keepdim)
        out = tn_new(EM_I64, none, 0, x->storage->device);
    else
        out = reduced_out(x, mask, keepdim, EM_I64);
    em_params p = {.dim = {.dim = d0, .keepdim = keepdim}};
    em_tensor *in = (em_tensor *)x;
    return tn_run(kind, out, &in, 1, &p);
}

em_tensor *em_argmax(const em_tensor *x, int dim, bool keepdim)
{
    return arg_op("em_argmax", EM_OP_ARGMAX, x, dim, keepdim);
}

em_tensor *em_argmin(const em_tensor *x, int dim, bool keepdim)
{
    return arg_op("em_argmin", EM_OP_ARGMIN, x, dim, keepdim);
}

/* Dispatches a two-output op (values in x's dtype, i64 indices) and hands the outputs to the
 * caller's pointers (either may be NULL; the unwanted output is released). */
static em_status run_pair(em_op *op, em_tensor **values, em_tensor **indices)
{
    em_status st = tn_dispatch(op);
    if (st != EM_OK) return st;
    if (values)
        *values = op->out[0];
    else
        em_release(op->out[0]);
    if (indices)
        *indices = op->out[1];
    else
        em_release(op->out[1]);
    return EM_OK;
}

static em_status pair_fail(em_tensor **values, em_tensor **indices)
{
    em_status st = em_last_status();
    return st != EM_OK ? st : EM_ERR_INTERNAL;
}

static em_status dim_pair(const char *fn, em_op_kind kind, const em_tensor *x, int dim,
                          bool keepdim, em_tensor **values, em_tensor **indices)
{
    if (values) *values = NULL;
    if (indices) *indices = NULL;
    if (!tn_check_ptr(fn, x, "x")) return pair_fail(values, indices);
    if (!tn_norm_dim(fn, x->rank, &dim)) return pair_fail(values, indices);
    uint32_t mask = x->rank ? 1u << dim : 0;
    if (!need_nonempty(fn, x, mask)) return pair_fail(values, indices);
    em_op op;
    memset(&op, 0, sizeof op);
    op.kind = kind;
    op.n_in = 1;
    op.in[0] = (em_tensor *)x;
    op.n_out = 2;
    op.out[0] = reduced_out(x, mask, keepdim, x->dtype);
    op.out[1] = op.out[0] ? reduced_out(x, mask, keepdim, EM_I64) : NULL;
    op.p.dim = (em_p_dim){.dim = dim, .keepdim = keepdim};
    return run_pair(&op, values, indices);
}

em_status em_max_dim(const em_tensor *x, int dim, bool keepdim, em_tensor **values,
                     em_tensor **indices)
{
    return dim_pair("em_max_dim", EM_OP_MAX_DIM, x, dim, keepdim, values, indices);
}

em_status em_min_dim(const em_tensor *x, int dim, bool keepdim, em_tensor **values,
                     em_tensor **indices)
{
    return dim_pair("em_min_dim", EM_OP_MIN_DIM, x, dim, keepdim, values, indices);
}

/* ---- scans and softmax ------------------------------------------------------------------- */

static em_tensor *along_op(const char *fn, em_op_kind kind, const em_tensor *x, int dim,
                           em_dtype out_dt)
{
    if (!tn_norm_dim(fn, x->rank, &dim)) return NULL;
    em_params p = {.dim = {.dim = dim}};
    em_tensor *in = (em_tensor *)x;
    return tn_run(kind, tn_new(out_dt, x->shape, x->rank, x->storage->device), &in, 1, &p);
}

em_tensor *em_cumsum(const em_tensor *x, int dim)
{
    if (!tn_check_ptr("em_cumsum", x, "x")) return NULL;
    return along_op("em_cumsum", EM_OP_CUMSUM, x, dim, widened(x->dtype));
}

em_tensor *em_cumprod(const em_tensor *x, int dim)
{
    if (!tn_check_ptr("em_cumprod", x, "x")) return NULL;
    return along_op("em_cumprod", EM_OP_CUMPROD, x, dim, widened(x->dtype));
}

static em_status cum_pair(const char *fn, em_op_kind kind, const em_tensor *x, int dim,
                          em_tensor **values, em_tensor **indices)
{
    if (values) *values = NULL;
    if (indices) *indices = NULL;
    if (!tn_check_ptr(fn, x, "x")) return pair_fail(values, indices);
    if (!tn_norm_dim(fn, x->rank, &dim)) return pair_fail(values, indices);
    em_op op;
    memset(&op, 0, sizeof op);
    op.kind = kind;
    op.n_in = 1;
    op.in[0] = (em_tensor *)x;
    op.n_out = 2;
    op.out[0] = tn_new(x->dtype, x->shape, x->rank, x->storage->device);
    op.out[1] = op.out[0] ? tn_new(EM_I64, x->shape, x->rank, x->storage->device) : NULL;
    op.p.dim.dim = dim;
    return run_pair(&op, values, indices);
}

em_status em_cummax(const em_tensor *x, int dim, em_tensor **values, em_tensor **indices)
{
    return cum_pair("em_cummax", EM_OP_CUMMAX, x, dim, values, indices);
}

em_status em_cummin(const em_tensor *x, int dim, em_tensor **values, em_tensor **indices)
{
    return cum_pair("em_cummin", EM_OP_CUMMIN, x, dim, values, indices);
}

em_tensor *em_softmax(const em_tensor *x, int dim)
{
    if (!tn_check_ptr("em_softmax", x, "x") || !need_float("em_softmax", x)) return NULL;
    return along_op("em_softmax", EM_OP_SOFTMAX, x, dim, x->dtype);
}

em_tensor *em_log_softmax(const em_tensor *x, int dim)
{
    if (!tn_check_ptr("em_log_softmax", x, "x") || !need_float("em_log_softmax", x)) return NULL;
    return along_op("em_log_softmax", EM_OP_LOG_SOFTMAX, x, dim, x->dtype);
}

em_tensor *tn_softmax_backward(const em_tensor *y, const em_tensor *g, int dim, bool log)
{
    if (!y || !g) return NULL; /* the first error is kept */
    if (!tn_norm_dim("tn_softmax_backward", y->rank, &dim)) return NULL;
    em_op op;
    memset(&op, 0, sizeof op);
    op.kind = EM_OP_SOFTMAX_BACKWARD;
    op.p.dim = (em_p_dim){.dim = dim, .log = log};
    em_tensor *out;
    if (tn_run_fused2(&op, y, g, &out)) return out;
    return tn_softmax_backward_composed(y, g, dim, log);
}

/* t (and g) fit x for the LOG_SOFTMAX_GATHER records: i64 / x's dtype, x's shape without dim */
static bool lsg_check(const char *fn, const em_tensor *x, int *dim, const em_tensor *t,
                      const em_tensor *g)
{
    if (!need_float(fn, x)) return false;
    if (x->rank < 1) {
        em_error(EM_ERR_SHAPE, "%s: x must have a class dim, got shape []", fn);
        return false;
    }
    if (!tn_norm_dim(fn, x->rank, dim)) return false;
    bool ok = t->dtype == EM_I64 && t->rank == x->rank - 1;
    for (int d = 0, e = 0; ok && d < x->rank; d++)
        if (d != *dim) ok = t->shape[e++] == x->shape[d];
    if (ok && g)
        ok = g->dtype == x->dtype && em_shape_equal(em_tensor_shape(g), em_tensor_shape(t));
    if (!ok)
        em_error(EM_ERR_SHAPE, "%s: t%s must be i64 of x's shape %s without dim %d", fn,
                 g ? " and g" : "", tn_dims_str(x->shape, x->rank), *dim);
    return ok;
}

/* The record of x, t (and g) on one device, t and g made contiguous; NULL on an error. */
static em_tensor *lsg_run(em_op_kind kind, const em_tensor *x, int dim, const em_tensor *t,
                          const em_tensor *g)
{
    em_op op;
    memset(&op, 0, sizeof op);
    op.kind = kind;
    op.n_in = g ? 3 : 2;
    op.p.dim.dim = dim;
    op.in[0] = (em_tensor *)x;
    em_scope_begin();
    op.in[1] = em_contiguous(t);
    if (g) op.in[2] = em_contiguous(g);
    em_tensor *r = NULL;
    if (op.in[1] && (!g || op.in[2]))
        r = g ? tn_run_record(&op, x->dtype, x->shape, x->rank)
              : tn_run_record(&op, x->dtype, t->shape, t->rank);
    em_keep(r);
    em_scope_end();
    return r;
}

/* t or g on another device than x: the composition's ops say so */
static bool lsg_apart(const em_tensor *x, const em_tensor *t, const em_tensor *g)
{
    return !em_device_equal(t->storage->device, x->storage->device) ||
           (g && !em_device_equal(g->storage->device, x->storage->device));
}

em_tensor *tn_log_softmax_gather(const em_tensor *x, int dim, const em_tensor *t)
{
    if (!x || !t) return NULL; /* the first error is kept */
    if (!lsg_check("tn_log_softmax_gather", x, &dim, t, NULL)) return NULL;
    if (x->shape[dim] == 0 || lsg_apart(x, t, NULL))
        return tn_log_softmax_gather_composed(x, dim, t);
    return lsg_run(EM_OP_LOG_SOFTMAX_GATHER, x, dim, t, NULL);
}

em_tensor *tn_log_softmax_gather_backward(const em_tensor *x, int dim, const em_tensor *t,
                                          const em_tensor *g)
{
    if (!x || !t || !g) return NULL; /* the first error is kept */
    if (!lsg_check("tn_log_softmax_gather_backward", x, &dim, t, g)) return NULL;
    if (lsg_apart(x, t, g)) return tn_log_softmax_gather_backward_composed(x, dim, t, g);
    return lsg_run(EM_OP_LOG_SOFTMAX_GATHER_BACKWARD, x, dim, t, g);
}
