/* Indexing ops: gather, scatter, index_select, index_add, masked_select, nonzero, slice_assign,
 * embedding. Index tensors may have any integer dtype (values read as i64); every output is a
 * new contiguous tensor and inputs are never modified.
 * Records (parameters in src/ir/ir.h):
 *   GATHER        in {x, index}        em_p_index: dim, inrange (index known in range)
 *   SCATTER       in {x, index, src}   em_p_index: dim, mode (src rank 0: one value), inrange
 *   INDEX_SELECT  in {x, index}        em_p_index: dim (index 1-D or rank 0)
 *   INDEX_ADD     in {x, index, src}   em_p_index: dim, alpha, inrange
 *   MASKED_SELECT in {x, mask}         em_p_shape: the broadcast shape
 *   NONZERO       in {x}               (none)
 *   SLICE_ASSIGN  in {x, src}          em_p_slice_assign: start, end, step per dim, normalised
 *                                      (0 <= start <= end <= size, step > 0)
 *   EMBEDDING     in {weight, indices} (none)
 * Out-of-range index values are found by the kernels, which fail with EM_ERR_INDEX. "Known in
 * range" (the tn_*_inrange forms: indices an op produced, or checked by the caller or by the
 * forward op whose gradient this is) lets a device backend skip its range check, a read back. */
#include <math.h>

#include "op.h"

static bool check_index_dtype(const char *op, const em_tensor *index, const char *what)
{
    if (em_dtype_is_int(index->dtype)) return true;
    em_error(EM_ERR_DTYPE, "%s: %s must have an integer dtype, got %s", op, what,
             em_dtype_name(index->dtype));
    return false;
}

static em_tensor *gather(const em_tensor *x, int dim, const em_tensor *index, bool inrange)
{
    const char *fn = "em_gather";
    if (!tn_check_ptr(fn, x, "x") || !tn_check_ptr(fn, index, "index")) return NULL;
    if (!tn_norm_dim(fn, x->rank, &dim) || !check_index_dtype(fn, index, "index") ||
        !tn_check_same_device(fn, x, index))
        return NULL;
    if (index->rank != x->rank) {
        em_error(EM_ERR_SHAPE, "%s: index %s and x %s must have the same rank", fn,
                 tn_dims_str(index->shape, index->rank), tn_dims_str(x->shape, x->rank));
        return NULL;
    }
    for (int d = 0; d < x->rank; d++) {
        if (d != dim && index->shape[d] > x->shape[d]) {
            em_error(EM_ERR_SHAPE, "%s: index %s is larger than x %s in dim %d", fn,
                     tn_dims_str(index->shape, index->rank), tn_dims_str(x->shape, x->rank), d);
            return NULL;
        }
    }
    em_tensor *in[2] = {(em_tensor *)x, (em_tensor *)index};
    em_params p = {.index = {.dim = dim, .inrange = inrange}};
    em_tensor *out = tn_new_for(fn, x->dtype, index->shape, index->rank, x->storage->device);
    return tn_run(EM_OP_GATHER, out, in, 2, &p);
}

em_tensor *em_gather(const em_tensor *x, int dim, const em_tensor *index)
{
    return gather(x, dim, index, false);
}

em_tensor *tn_gather_inrange(const em_tensor *x, int dim, const em_tensor *index)
{
    return gather(x, dim, index, true);
}

static em_tensor *scatter(const em_tensor *x, int dim, const em_tensor *index, const em_tensor *src,
                          em_reduce_mode mode, bool inrange)
{
    const char *fn = "em_scatter";
    if (!tn_check_ptr(fn, x, "x") || !tn_check_ptr(fn, index, "index") ||
        !tn_check_ptr(fn, src, "src"))
        return NULL;
    if (!tn_norm_dim(fn, x->rank, &dim) || !check_index_dtype(fn, index, "index") ||
        !tn_check_same_device(fn, x, index) || !tn_check_same_device(fn, x, src))
        return NULL;
    if ((int)mode < EM_SCATTER_ASSIGN || (int)mode > EM_SCATTER_MAX) {
        em_error(EM_ERR_INVALID_ARG, "%s: unknown reduce mode %d", fn, (int)mode);
        return NULL;
    }
    bool scalar_src = src->rank == 0;
    if (!scalar_src && src->dtype != x->dtype) {
        em_error(EM_ERR_DTYPE, "%s: src dtype %s differs from x dtype %s", fn,
                 em_dtype_name(src->dtype), em_dtype_name(x->dtype));
        return NULL;
    }
    if (index->rank != x->rank || (!scalar_src && src->rank != x->rank)) {
        em_error(EM_ERR_SHAPE, "%s: x %s, index %s and src %s must have the same rank", fn,
                 tn_dims_str(x->shape, x->rank), tn_dims_str(index->shape, index->rank),
                 tn_dims_str(src->shape, src->rank));
        return NULL;
    }
    for (int d = 0; d < x->rank; d++) {
        if (d != dim && index->shape[d] > x->shape[d]) {
            em_error(EM_ERR_SHAPE, "%s: index %s is larger than x %s in dim %d", fn,
                     tn_dims_str(index->shape, index->rank), tn_dims_str(x->shape, x->rank), d);
            return NULL;
        }
        if (!scalar_src && index->shape[d] > src->shape[d]) {
            em_error(EM_ERR_SHAPE, "%s: index %s is larger than src %s in dim %d", fn,
                     tn_dims_str(index->shape, index->rank), tn_dims_str(src->shape, src->rank), d);
            return NULL;
        }
    }
    em_tensor *in[3] = {(em_tensor *)x, (em_tensor *)index, (em_tensor *)src};
    em_params p = {.index = {.dim = dim, .mode = mode, .inrange = inrange}};
    em_tensor *out = tn_new_for(fn, x->dtype, x->shape, x->rank, x->storage->device);
    return tn_run(EM_OP_SCATTER, out, in, 3, &p);
}

em_tensor *em_scatter(const em_tensor *x, int dim, const em_tensor *index, const em_tensor *src,
                      em_reduce_mode mode)
{
    return scatter(x, dim, index, src, mode, false);
}

em_tensor *tn_scatter_inrange(const em_tensor *x, int dim, const em_tensor *index,
                              const em_tensor *src, em_reduce_mode mode)
{
    return scatter(x, dim, index, src, mode, true);
}

/* Checks that index is 1-D or rank 0; its length to *n. */
static bool check_vector_index(const char *op, const em_tensor *index, int64_t *n)
{
    if (index->rank > 1) {
        em_error(EM_ERR_SHAPE, "%s: index must be 1-D or rank 0, got shape %s", op,
                 tn_dims_str(index->shape, index->rank));
        return false;
    }
    *n = tn_numel(index);
    return true;
}

em_tensor *em_index_select(const em_tensor *x, int dim, const em_tensor *index)
{
    const char *fn = "em_index_select";
    if (!tn_check_ptr(fn, x, "x") || !tn_check_ptr(fn, index, "index")) return NULL;
    int64_t n;
    if (!tn_norm_dim(fn, x->rank, &dim) || !check_index_dtype(fn, index, "index") ||
        !tn_check_same_device(fn, x, index) || !check_vector_index(fn, index, &n))
        return NULL;
    if (x->rank == 0 && n != 1) {
        em_error(EM_ERR_SHAPE, "%s: index of shape %s for a rank-0 x must hold one element", fn,
                 tn_dims_str(index->shape, index->rank));
        return NULL;
    }
    int64_t shape[EM_MAX_RANK];
    for (int d = 0; d < x->rank; d++) shape[d] = d == dim ? n : x->shape[d];
    em_tensor *in[2] = {(em_tensor *)x, (em_tensor *)index};
    em_params p = {.index = {.dim = dim}};
    em_tensor *out = tn_new_for(fn, x->dtype, shape, x->rank, x->storage->device);
    return tn_run(EM_OP_INDEX_SELECT, out, in, 2, &p);
}

static em_tensor *index_add(const em_tensor *x, int dim, const em_tensor *index,
                            const em_tensor *src, double alpha, bool inrange)
{
    const char *fn = "em_index_add";
    if (!tn_check_ptr(fn, x, "x") || !tn_check_ptr(fn, index, "index") ||
        !tn_check_ptr(fn, src, "src"))
        return NULL;
    int64_t n;
    if (!tn_norm_dim(fn, x->rank, &dim) || !check_index_dtype(fn, index, "index") ||
        !tn_check_same_device(fn, x, index) || !tn_check_same_device(fn, x, src) ||
        !check_vector_index(fn, index, &n))
        return NULL;
    if (src->dtype != x->dtype) {
        em_error(EM_ERR_DTYPE, "%s: src dtype %s differs from x dtype %s", fn,
                 em_dtype_name(src->dtype), em_dtype_name(x->dtype));
        return NULL;
    }
    if (!em_dtype_is_float(x->dtype) && (alpha != floor(alpha) || fabs(alpha) >= 9.2e18)) {
        em_error(EM_ERR_INVALID_ARG, "%s: alpha %g must be an integer for dtype %s", fn, alpha,
                 em_dtype_name(x->dtype));
        return NULL;
    }
    bool ok = src->rank == x->rank;
    for (int d = 0; ok && d < x->rank; d++) ok = src->shape[d] == (d == dim ? n : x->shape[d]);
    if (ok && x->rank == 0) ok = n == 1;
    if (!ok) {
        em_error(EM_ERR_SHAPE,
                 "%s: src %s does not match x %s with dim %d of size %lld (the index length)", fn,
                 tn_dims_str(src->shape, src->rank), tn_dims_str(x->shape, x->rank), dim,
                 (long long)n);
        return NULL;
    }
    em_tensor *in[3] = {(em_tensor *)x, (em_tensor *)index, (em_tensor *)src};
    em_params p = {.index = {.dim = dim, .inrange = inrange, .alpha = alpha}};
    em_tensor *out = tn_new_for(fn, x->dtype, x->shape, x->rank, x->storage->device);
    return tn_run(EM_OP_INDEX_ADD, out, in, 3, &p);
}

em_tensor *em_index_add(const em_tensor *x, int dim, const em_tensor *index, const em_tensor *src,
                        double alpha)
{
    return index_add(x, dim, index, src, alpha, false);
}

em_tensor *tn_index_add_inrange(const em_tensor *x, int dim, const em_tensor *index,
                                const em_tensor *src, double alpha)
{
    return index_add(x, dim, index, src, alpha, true);
}

/* Number of true (non-zero) elements of t, read through a temporary bool copy. -1 on error. */
static int64_t count_true(const char *fn, const em_tensor *t)
{
    int64_t n = tn_numel(t);
    if (n == 0) return 0;
    /* an expanded t has more elements than storage: the copy must fit the host's memory */
    if (!tn_check_alloc(fn, EM_BOOL, t->shape, t->rank, EM_CPU)) return -1;
    uint8_t *buf = em_alloc((size_t)n);
    if (!buf) return -1;
    int64_t count = -1;
    if (em_to_data(t, buf, EM_BOOL, n) == EM_OK) {
        count = 0;
        for (int64_t i = 0; i < n; i++) count += buf[i] != 0;
    }
    em_free(buf);
    return count;
}

em_tensor *em_masked_select(const em_tensor *x, const em_tensor *mask)
{
    const char *fn = "em_masked_select";
    if (!tn_check_ptr(fn, x, "x") || !tn_check_ptr(fn, mask, "mask")) return NULL;
    if (!tn_check_same_device(fn, x, mask)) return NULL;
    if (mask->dtype != EM_BOOL) {
        em_error(EM_ERR_DTYPE, "%s: mask must be bool, got %s", fn, em_dtype_name(mask->dtype));
        return NULL;
    }
    int64_t bshape[EM_MAX_RANK];
    int br;
    if (!tn_broadcast_shapes(fn, x->shape, x->rank, mask->shape, mask->rank, bshape, &br))
        return NULL;
    int64_t bnumel = 0;
    core_numel_ok(bshape, br, &bnumel); /* tn_broadcast_shapes checked that it fits */
    int64_t mnumel = tn_numel(mask);
    int64_t count = 0;
    if (bnumel > 0) {
        /* each mask element repeats bnumel / mnumel times in the broadcast shape */
        int64_t ntrue = count_true(fn, mask);
        if (ntrue < 0) return NULL;
        count = ntrue * (bnumel / mnumel);
    }
    em_params p = {.shape = {.rank = br}};
    for (int d = 0; d < br; d++) p.shape.dims[d] = bshape[d];
    em_tensor *in[2] = {(em_tensor *)x, (em_tensor *)mask};
    em_tensor *out = tn_new_for(fn, x->dtype, &count, 1, x->storage->device);
    return tn_run(EM_OP_MASKED_SELECT, out, in, 2, &p);
}

em_tensor *em_nonzero(const em_tensor *x)
{
    const char *fn = "em_nonzero";
    if (!tn_check_ptr(fn, x, "x")) return NULL;
    int64_t count = count_true(fn, x);
    if (count < 0) return NULL;
    int64_t shape[2] = {count, x->rank};
    em_tensor *in[1] = {(em_tensor *)x};
    em_tensor *out = tn_new_for(fn, EM_I64, shape, 2, x->storage->device);
    return tn_run(EM_OP_NONZERO, out, in, 1, NULL);
}

em_tensor *em_slice_assign(const em_tensor *x, const int64_t *starts, const int64_t *ends,
                           const int64_t *steps, const em_tensor *src)
{
    const char *fn = "em_slice_assign";
    if (!tn_check_ptr(fn, x, "x") || !tn_check_ptr(fn, src, "src")) return NULL;
    if (!tn_check_same_device(fn, x, src)) return NULL;
    em_params p;
    em_p_slice_assign *sa = &p.slice_assign;
    int64_t region[EM_MAX_RANK];
    for (int d = 0; d < x->rank; d++) {
        int64_t n = x->shape[d];
        int64_t start = starts ? starts[d] : 0;
        int64_t end = ends ? ends[d] : n;
        int64_t step = steps ? steps[d] : 1;
        if (step <= 0) {
            em_error(EM_ERR_INVALID_ARG, "%s: step %lld of dim %d must be positive", fn,
                     (long long)step, d);
            return NULL;
        }
        if (start < 0) start += n;
        if (end < 0) end += n;
        start = start < 0 ? 0 : (start > n ? n : start);
        end = end < start ? start : (end > n ? n : end);
        region[d] = core_ceil_div(end - start, step);
        if (region[d] <= 1) { /* no step is taken: record 1, so no stride times step overflows */
            step = 1;
            end = start + region[d];
        }
        sa->start[d] = start;
        sa->end[d] = end;
        sa->step[d] = step;
    }
    int64_t b[EM_MAX_RANK];
    int br;
    bool ok = src->rank <= x->rank;
    if (ok) {
        uint64_t prev = core_error_mark();
        ok = tn_broadcast_shapes(fn, src->shape, src->rank, region, x->rank, b, &br);
        if (!ok) core_error_forget(prev);
        for (int d = 0; ok && d < br; d++) ok = b[d] == region[d];
    }
    if (!ok) {
        em_error(EM_ERR_SHAPE, "%s: src %s does not match (or broadcast to) the region %s", fn,
                 tn_dims_str(src->shape, src->rank), tn_dims_str(region, x->rank));
        return NULL;
    }
    em_tensor *in[2] = {(em_tensor *)x, (em_tensor *)src};
    em_tensor *out = tn_new_for(fn, x->dtype, x->shape, x->rank, x->storage->device);
    return tn_run(EM_OP_SLICE_ASSIGN, out, in, 2, &p);
}

em_tensor *em_embedding(const em_tensor *weight, const em_tensor *indices)
{
    const char *fn = "em_embedding";
    if (!tn_check_ptr(fn, weight, "weight") || !tn_check_ptr(fn, indices, "indices")) return NULL;
    if (!check_index_dtype(fn, indices, "indices") || !tn_check_same_device(fn, weight, indices))
        return NULL;
    if (!em_dtype_is_float(weight->dtype)) {
        em_error(EM_ERR_DTYPE, "%s: weight must have a float dtype, got %s", fn,
                 em_dtype_name(weight->dtype));
        return NULL;
    }
    if (weight->rank != 2) {
        em_error(EM_ERR_SHAPE, "%s: weight must be 2-D [num, dim], got shape %s", fn,
                 tn_dims_str(weight->shape, weight->rank));
        return NULL;
    }
    if (indices->rank >= EM_MAX_RANK) {
        em_error(EM_ERR_SHAPE, "%s: indices of shape %s leave no room for the embedding dim", fn,
                 tn_dims_str(indices->shape, indices->rank));
        return NULL;
    }
    int64_t shape[EM_MAX_RANK];
    for (int d = 0; d < indices->rank; d++) shape[d] = indices->shape[d];
    shape[indices->rank] = weight->shape[1];
    em_tensor *in[2] = {(em_tensor *)weight, (em_tensor *)indices};
    em_tensor *out =
        tn_new_for(fn, weight->dtype, shape, indices->rank + 1, weight->storage->device);
    return tn_run(EM_OP_EMBEDDING, out, in, 2, NULL);
}
