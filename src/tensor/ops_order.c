/* Ordering ops: stable sort, argsort, top-k and the lower median along one dim.
 * Records (every kind has in[0] = x, out[0] = values in x's dtype, out[1] = i64 indices into x
 * along dim; both outputs are always computed; parameters em_p_order):
 *   SORT   dim, descending. Stable; NaN sorts as the largest value.
 *   TOPK   dim, k, largest. Sorted (largest first when largest); ties keep the lower index
 *          first.
 *   MEDIAN dim, keepdim. Lower median: the element a stable ascending sort puts at
 *          position (n-1)/2; a row holding NaN gives its first NaN. em_median with EM_FLAT
 *          records a MEDIAN over dim 0 of the [numel] reshape.
 * A rank-0 x is treated as one element along dim 0. */
#include <string.h>

#include "op.h"

/* Normalises dim for an op over one dim (rank 0 accepts 0 and -1). */
static bool order_dim(const char *fn, const em_tensor *x, int *dim)
{
    return tn_norm_dim(fn, x->rank, dim);
}

/* Runs a two-output ordering op; stores (or releases) the outputs. */
static em_status run2(em_op_kind kind, const em_tensor *x, const int64_t *shape, int rank,
                      em_p_order p, em_tensor **values, em_tensor **indices)
{
    em_op op;
    memset(&op, 0, sizeof op);
    op.kind = kind;
    op.n_in = 1;
    op.in[0] = (em_tensor *)x;
    op.n_out = 2;
    op.out[0] = tn_new(x->dtype, shape, rank, x->storage->device);
    op.out[1] = op.out[0] ? tn_new(EM_I64, shape, rank, x->storage->device) : NULL;
    op.p.order = p;
    em_status st = tn_dispatch(&op);
    if (st != EM_OK) return st;
    if (values)
        *values = op.out[0];
    else
        em_release(op.out[0]);
    if (indices)
        *indices = op.out[1];
    else
        em_release(op.out[1]);
    return EM_OK;
}

static bool check_x(const char *fn, const em_tensor *x)
{
    if (!tn_check_ptr(fn, x, "x")) return false;
    if (!em_dtype_valid((int)x->dtype)) {
        em_error(EM_ERR_DTYPE, "%s: invalid dtype %d", fn, (int)x->dtype);
        return false;
    }
    return true;
}

static void clear_outs(em_tensor **values, em_tensor **indices)
{
    if (values) *values = NULL;
    if (indices) *indices = NULL;
}

em_status em_sort(const em_tensor *x, int dim, bool descending, em_tensor **values,
                  em_tensor **indices)
{
    const char *fn = "em_sort";
    clear_outs(values, indices);
    if (!check_x(fn, x) || !order_dim(fn, x, &dim)) return em_last_status();
    if (!values && !indices)
        return em_error(EM_ERR_INVALID_ARG, "%s: values and indices are both NULL", fn);
    em_p_order p = {.dim = dim, .descending = descending};
    return run2(EM_OP_SORT, x, x->shape, x->rank, p, values, indices);
}

em_tensor *em_argsort(const em_tensor *x, int dim, bool descending)
{
    const char *fn = "em_argsort";
    if (!check_x(fn, x) || !order_dim(fn, x, &dim)) return NULL;
    em_tensor *idx = NULL;
    em_p_order p = {.dim = dim, .descending = descending};
    if (run2(EM_OP_SORT, x, x->shape, x->rank, p, NULL, &idx) != EM_OK) return NULL;
    return idx;
}

em_status em_topk(const em_tensor *x, int64_t k, int dim, bool largest, em_tensor **values,
                  em_tensor **indices)
{
    const char *fn = "em_topk";
    clear_outs(values, indices);
    if (!check_x(fn, x) || !order_dim(fn, x, &dim)) return em_last_status();
    if (!values && !indices)
        return em_error(EM_ERR_INVALID_ARG, "%s: values and indices are both NULL", fn);
    int64_t n = x->rank ? x->shape[dim] : 1;
    if (k < 0 || k > n)
        return em_error(EM_ERR_INDEX, "%s: k %lld is outside [0, %lld] (the size of dim %d)", fn,
                        (long long)k, (long long)n, dim);
    int64_t shape[EM_MAX_RANK];
    memcpy(shape, x->shape, sizeof shape);
    if (x->rank) shape[dim] = k;
    em_p_order p = {.dim = dim, .k = k, .largest = largest};
    return run2(EM_OP_TOPK, x, shape, x->rank, p, values, indices);
}

em_status em_median(const em_tensor *x, int dim, bool keepdim, em_tensor **values,
                    em_tensor **indices)
{
    const char *fn = "em_median";
    clear_outs(values, indices);
    if (!check_x(fn, x)) return em_last_status();
    if (!values && !indices)
        return em_error(EM_ERR_INVALID_ARG, "%s: values and indices are both NULL", fn);
    if (dim == EM_FLAT) {
        int64_t numel = tn_numel(x);
        if (numel == 0)
            return em_error(EM_ERR_SHAPE, "%s: cannot take the median of an empty tensor", fn);
        em_tensor *flat = em_reshape(x, EM_SHAPE(numel));
        if (!flat) return em_last_status();
        int64_t scalar_shape[1] = {1};
        em_status st =
            run2(EM_OP_MEDIAN, flat, scalar_shape, 0, (em_p_order){.dim = 0}, values, indices);
        em_release(flat);
        return st;
    }
    if (!order_dim(fn, x, &dim)) return em_last_status();
    int64_t n = x->rank ? x->shape[dim] : 1;
    if (n == 0)
        return em_error(EM_ERR_SHAPE, "%s: dim %d has size 0, so it has no median", fn, dim);
    int64_t shape[EM_MAX_RANK];
    int r = 0;
    for (int d = 0; d < x->rank; d++) {
        if (d != dim)
            shape[r++] = x->shape[d];
        else if (keepdim)
            shape[r++] = 1;
    }
    em_p_order p = {.dim = dim, .keepdim = keepdim};
    return run2(EM_OP_MEDIAN, x, shape, r, p, values, indices);
}
