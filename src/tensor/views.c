/* Zero-copy views: reshape (when the strides allow), permute, transpose, slice, narrow, select,
 * expand, squeeze, unsqueeze, flip, unfold. Each is recorded as a view op so autodiff sees it. */
#include <string.h>

#include "op.h"

/* Records a view op whose output v was made from t. */
static em_tensor *record_view(em_op_kind kind, em_tensor *t, em_tensor *v, const em_params *p)
{
    return tn_run(kind, v, &t, 1, p);
}

/* Strides for viewing t as `shape` without a copy, following the classic algorithm: walk
 * both shapes from the back in chunks of equal element count. False when impossible. */
static bool view_strides(const em_tensor *t, const int64_t *shape, int rank, int64_t *out)
{
    int64_t numel = tn_numel(t);
    if (numel == 0 || t->rank == 0) {
        tn_contiguous_strides(shape, rank, out);
        return true;
    }
    int view_d = rank - 1;
    int64_t chunk_base_stride = t->strides[t->rank - 1];
    int64_t tensor_numel = 1, view_numel = 1;
    for (int d = t->rank - 1; d >= 0; d--) {
        tensor_numel *= t->shape[d];
        if (d == 0 ||
            (t->shape[d - 1] != 1 && t->strides[d - 1] != tensor_numel * chunk_base_stride)) {
            while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
                out[view_d] = view_numel * chunk_base_stride;
                view_numel *= shape[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return false;
            if (d > 0) {
                chunk_base_stride = t->strides[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

/* Resolves one -1 in shape against numel; checks the element count. */
static bool infer_shape(const char *op, const em_tensor *t, em_shape *s)
{
    if (s->rank < 0 || s->rank > EM_MAX_RANK) {
        em_error(EM_ERR_SHAPE, "%s: rank %d is outside [0, %d]", op, s->rank, EM_MAX_RANK);
        return false;
    }
    int infer = -1;
    int64_t known = 1;
    for (int d = 0; d < s->rank; d++) {
        if (s->dims[d] == -1) {
            if (infer >= 0) {
                em_error(EM_ERR_SHAPE, "%s: more than one -1 in %s", op,
                         tn_dims_str(s->dims, s->rank));
                return false;
            }
            infer = d;
        } else if (s->dims[d] < 0) {
            em_error(EM_ERR_SHAPE, "%s: negative size in %s", op, tn_dims_str(s->dims, s->rank));
            return false;
        } else if (!core_mul_ok(known, s->dims[d], &known)) {
            em_error(EM_ERR_SHAPE, "%s: shape %s is too large", op, tn_dims_str(s->dims, s->rank));
            return false;
        }
    }
    int64_t numel = tn_numel(t);
    if (infer >= 0) {
        if (known == 0 || numel % known != 0) {
            em_error(EM_ERR_SHAPE, "%s: cannot reshape %s (%lld elements) into %s", op,
                     tn_dims_str(t->shape, t->rank), (long long)numel,
                     tn_dims_str(s->dims, s->rank));
            return false;
        }
        s->dims[infer] = numel / known;
        known = numel;
    }
    if (known != numel) {
        em_error(EM_ERR_SHAPE, "%s: cannot reshape %s (%lld elements) into %s", op,
                 tn_dims_str(t->shape, t->rank), (long long)numel, tn_dims_str(s->dims, s->rank));
        return false;
    }
    /* an empty shape's other dims still make its strides: [0, 2^62, 2^62] has none that fit,
       in elements or (as kernels step) in bytes */
    int64_t span = 0;
    if (!core_span_ok(s->dims, s->rank, &span) ||
        !core_mul_ok(span, (int64_t)em_dtype_size(t->dtype), &span)) {
        em_error(EM_ERR_SHAPE, "%s: shape %s is too large", op, tn_dims_str(s->dims, s->rank));
        return false;
    }
    return true;
}

em_tensor *em_view(const em_tensor *t, em_shape shape)
{
    if (!tn_check_ptr("em_view", t, "t") || !infer_shape("em_view", t, &shape)) return NULL;
    int64_t st[EM_MAX_RANK];
    if (!view_strides(t, shape.dims, shape.rank, st)) {
        em_error(EM_ERR_SHAPE,
                 "em_view: a tensor of shape %s with these strides cannot be "
                 "viewed as %s; use em_reshape",
                 tn_dims_str(t->shape, t->rank), tn_dims_str(shape.dims, shape.rank));
        return NULL;
    }
    em_tensor *v = tn_view_of(t, shape.dims, st, shape.rank, t->offset);
    return record_view(EM_OP_RESHAPE, (em_tensor *)t, v, NULL);
}

em_tensor *em_reshape(const em_tensor *t, em_shape shape)
{
    if (!tn_check_ptr("em_reshape", t, "t") || !infer_shape("em_reshape", t, &shape)) return NULL;
    int64_t st[EM_MAX_RANK];
    if (view_strides(t, shape.dims, shape.rank, st)) {
        em_tensor *v = tn_view_of(t, shape.dims, st, shape.rank, t->offset);
        return record_view(EM_OP_RESHAPE, (em_tensor *)t, v, NULL);
    }
    em_tensor *c = em_contiguous(t);
    if (!c) return NULL;
    em_tensor *r = em_view(c, shape);
    em_release(c);
    return r;
}

em_tensor *em_flatten(const em_tensor *t, int start_dim, int end_dim)
{
    if (!tn_check_ptr("em_flatten", t, "t")) return NULL;
    if (t->rank == 0) return em_reshape(t, EM_SHAPE(1));
    if (!tn_norm_dim("em_flatten", t->rank, &start_dim) ||
        !tn_norm_dim("em_flatten", t->rank, &end_dim))
        return NULL;
    if (start_dim > end_dim) {
        em_error(EM_ERR_INVALID_ARG, "em_flatten: start_dim %d is after end_dim %d", start_dim,
                 end_dim);
        return NULL;
    }
    em_shape s = {.rank = 0};
    for (int d = 0; d < t->rank; d++) {
        if (d > start_dim && d <= end_dim) {
            s.dims[s.rank - 1] *= t->shape[d];
            continue;
        }
        s.dims[s.rank++] = t->shape[d];
    }
    return em_reshape(t, s);
}

em_tensor *em_permute(const em_tensor *t, em_axes order)
{
    if (!tn_check_ptr("em_permute", t, "t")) return NULL;
    if (order.n != t->rank) {
        em_error(EM_ERR_INVALID_ARG, "em_permute: %d dims given for a tensor of rank %d", order.n,
                 t->rank);
        return NULL;
    }
    uint32_t seen = 0;
    int64_t shape[EM_MAX_RANK], st[EM_MAX_RANK];
    em_params p = {.permute = {.perm = {0}}};
    for (int i = 0; i < order.n; i++) {
        int d = order.d[i];
        if (!tn_norm_dim("em_permute", t->rank, &d)) return NULL;
        if (seen & (1u << d)) {
            em_error(EM_ERR_INVALID_ARG, "em_permute: dim %d appears more than once", d);
            return NULL;
        }
        seen |= 1u << d;
        shape[i] = t->shape[d];
        st[i] = t->strides[d];
        p.permute.perm[i] = d;
    }
    em_tensor *v = tn_view_of(t, shape, st, t->rank, t->offset);
    return record_view(EM_OP_PERMUTE, (em_tensor *)t, v, &p);
}

em_tensor *em_transpose(const em_tensor *t, int d0, int d1)
{
    if (!tn_check_ptr("em_transpose", t, "t")) return NULL;
    if (!tn_norm_dim("em_transpose", t->rank, &d0) || !tn_norm_dim("em_transpose", t->rank, &d1))
        return NULL;
    em_axes order = {.n = t->rank};
    for (int d = 0; d < t->rank; d++) order.d[d] = d;
    if (t->rank > 0) {
        order.d[d0] = d1;
        order.d[d1] = d0;
    }
    return em_permute(t, order);
}

/* The view of elements start, start + step, ... before end along dim, with start and end
 * already in [0, n] and start <= end; the record keeps the normalised bounds. */
static em_tensor *slice_view(const em_tensor *t, int dim, int64_t start, int64_t end, int64_t step)
{
    int64_t len = core_ceil_div(end - start, step);
    /* a window of at most one element moves by no step: record it with step 1, so that no
     * stride or bound computed from a huge step can overflow */
    if (len <= 1) {
        step = 1;
        end = start + len;
    }
    int64_t shape[EM_MAX_RANK], st[EM_MAX_RANK], off = t->offset, delta = 0;
    memcpy(shape, t->shape, sizeof shape);
    memcpy(st, t->strides, sizeof st);
    shape[dim] = len;
    if (!core_mul_ok(t->strides[dim], step, &st[dim])) {
        em_error(EM_ERR_SHAPE, "em_slice: step %lld overflows the stride %lld of dim %d",
                 (long long)step, (long long)t->strides[dim], dim);
        return NULL;
    }
    /* an empty slice keeps t's offset: its start may be one past the last element */
    if (len > 0 &&
        (!core_mul_ok(start, t->strides[dim], &delta) || !core_add_ok(off, delta, &off))) {
        em_error(EM_ERR_SHAPE, "em_slice: start %lld overflows the offset of dim %d",
                 (long long)start, dim);
        return NULL;
    }
    em_tensor *v = tn_view_of(t, shape, st, t->rank, off);
    em_params p = {.slice = {.dim = dim, .start = start, .end = end, .step = step}};
    return record_view(EM_OP_SLICE, (em_tensor *)t, v, &p);
}

em_tensor *em_slice(const em_tensor *t, int dim, int64_t start, int64_t end, int64_t step)
{
    if (!tn_check_ptr("em_slice", t, "t")) return NULL;
    if (t->rank == 0) {
        em_error(EM_ERR_INDEX, "em_slice: cannot slice a rank-0 tensor");
        return NULL;
    }
    if (!tn_norm_dim("em_slice", t->rank, &dim)) return NULL;
    if (step <= 0) {
        em_error(EM_ERR_INVALID_ARG, "em_slice: step must be positive, got %lld", (long long)step);
        return NULL;
    }
    int64_t n = t->shape[dim];
    /* a negative bound counts from the end (never overflows: n >= 0), then both clamp */
    if (start < 0) start += n;
    if (end < 0) end += n;
    start = start < 0 ? 0 : (start > n ? n : start);
    end = end < start ? start : (end > n ? n : end);
    return slice_view(t, dim, start, end, step);
}

em_tensor *em_narrow(const em_tensor *t, int dim, int64_t start, int64_t length)
{
    if (!tn_check_ptr("em_narrow", t, "t")) return NULL;
    if (t->rank == 0) {
        em_error(EM_ERR_INDEX, "em_narrow: cannot narrow a rank-0 tensor");
        return NULL;
    }
    if (!tn_norm_dim("em_narrow", t->rank, &dim)) return NULL;
    int64_t n = t->shape[dim], s = start;
    if (s < 0) s += n;
    /* length > n - s rather than s + length > n: the sum may overflow */
    if (s < 0 || s > n || length < 0 || length > n - s) {
        em_error(EM_ERR_INDEX, "em_narrow: start %lld length %lld exceed dim %d of size %lld",
                 (long long)start, (long long)length, dim, (long long)n);
        return NULL;
    }
    return slice_view(t, dim, s, s + length, 1);
}

em_tensor *em_select(const em_tensor *t, int dim, int64_t index)
{
    if (!tn_check_ptr("em_select", t, "t")) return NULL;
    if (t->rank == 0) {
        em_error(EM_ERR_INDEX, "em_select: cannot index a rank-0 tensor");
        return NULL;
    }
    if (!tn_norm_dim("em_select", t->rank, &dim)) return NULL;
    int64_t n = t->shape[dim];
    if (index < -n || index >= n) {
        em_error(EM_ERR_INDEX, "em_select: index %lld is out of range for dim %d of size %lld",
                 (long long)index, dim, (long long)n);
        return NULL;
    }
    if (index < 0) index += n;
    em_tensor *s = em_slice(t, dim, index, index + 1, 1);
    if (!s) return NULL;
    em_shape out = {.rank = 0};
    for (int d = 0; d < t->rank; d++)
        if (d != dim) out.dims[out.rank++] = t->shape[d];
    em_tensor *r = em_view(s, out);
    em_release(s);
    return r;
}

em_tensor *em_expand(const em_tensor *t, em_shape shape)
{
    if (!tn_check_ptr("em_expand", t, "t")) return NULL;
    if (shape.rank < t->rank || shape.rank > EM_MAX_RANK) {
        em_error(EM_ERR_SHAPE, "em_expand: cannot expand %s to %s", tn_dims_str(t->shape, t->rank),
                 tn_dims_str(shape.dims, shape.rank < 0 ? 0 : shape.rank));
        return NULL;
    }
    int lead = shape.rank - t->rank;
    int64_t st[EM_MAX_RANK];
    for (int i = 0; i < shape.rank; i++) {
        int d = i - lead;
        int64_t have = d >= 0 ? t->shape[d] : 1;
        if (shape.dims[i] == -1) {
            if (d < 0) {
                em_error(EM_ERR_SHAPE, "em_expand: -1 is not allowed for a new leading dim");
                return NULL;
            }
            shape.dims[i] = have;
        }
        if (have == shape.dims[i])
            st[i] = d >= 0 ? t->strides[d] : 0;
        else if (have == 1 && shape.dims[i] >= 0)
            st[i] = 0;
        else {
            em_error(EM_ERR_SHAPE, "em_expand: cannot expand %s to %s",
                     tn_dims_str(t->shape, t->rank), tn_dims_str(shape.dims, shape.rank));
            return NULL;
        }
    }
    int64_t numel = 0;
    if (!core_numel_ok(shape.dims, shape.rank, &numel)) {
        em_error(EM_ERR_SHAPE, "em_expand: shape %s has more than 2^63 elements",
                 tn_dims_str(shape.dims, shape.rank));
        return NULL;
    }
    em_tensor *v = tn_view_of(t, shape.dims, st, shape.rank, t->offset);
    return record_view(EM_OP_EXPAND, (em_tensor *)t, v, NULL);
}

em_tensor *em_squeeze(const em_tensor *t, em_axes dims)
{
    if (!tn_check_ptr("em_squeeze", t, "t")) return NULL;
    uint32_t mask;
    if (!tn_axes_mask("em_squeeze", dims, t->rank, &mask)) return NULL;
    em_shape s = {.rank = 0};
    for (int d = 0; d < t->rank; d++)
        if (!((mask & (1u << d)) && t->shape[d] == 1)) s.dims[s.rank++] = t->shape[d];
    return em_view(t, s);
}

em_tensor *em_unsqueeze(const em_tensor *t, int dim)
{
    if (!tn_check_ptr("em_unsqueeze", t, "t")) return NULL;
    if (t->rank >= EM_MAX_RANK) {
        em_error(EM_ERR_SHAPE, "em_unsqueeze: rank %d is already the maximum", t->rank);
        return NULL;
    }
    int r = t->rank + 1;
    if (dim < -r || dim >= r) {
        em_error(EM_ERR_INDEX, "em_unsqueeze: dim %d is out of range for a tensor of rank %d", dim,
                 t->rank);
        return NULL;
    }
    if (dim < 0) dim += r;
    em_shape s = {.rank = r};
    for (int d = 0, j = 0; d < r; d++) s.dims[d] = d == dim ? 1 : t->shape[j++];
    return em_view(t, s);
}

em_tensor *em_flip(const em_tensor *t, em_axes dims)
{
    if (!tn_check_ptr("em_flip", t, "t")) return NULL;
    if (dims.n == 0) {
        em_error(EM_ERR_INVALID_ARG, "em_flip: no dims given");
        return NULL;
    }
    uint32_t mask;
    if (!tn_axes_mask("em_flip", dims, t->rank, &mask)) return NULL;
    int64_t st[EM_MAX_RANK];
    int64_t off = t->offset;
    for (int d = 0; d < t->rank; d++) {
        st[d] = t->strides[d];
        if (mask & (1u << d)) {
            if (t->shape[d] > 0) off += (t->shape[d] - 1) * t->strides[d];
            st[d] = -t->strides[d];
        }
    }
    em_tensor *v = tn_view_of(t, t->shape, st, t->rank, off);
    em_params p = {.flip = {.mask = mask}};
    return record_view(EM_OP_FLIP, (em_tensor *)t, v, &p);
}

em_tensor *em_unfold(const em_tensor *t, int dim, int64_t size, int64_t step)
{
    if (!tn_check_ptr("em_unfold", t, "t")) return NULL;
    if (t->rank >= EM_MAX_RANK) {
        em_error(EM_ERR_SHAPE, "em_unfold: rank %d is already the maximum", t->rank);
        return NULL;
    }
    if (!tn_norm_dim("em_unfold", t->rank, &dim)) return NULL;
    int64_t n = t->rank ? t->shape[dim] : 1;
    if (size < 0 || size > n || step <= 0) {
        em_error(EM_ERR_INVALID_ARG,
                 "em_unfold: size %lld and step %lld do not fit dim %d of size %lld",
                 (long long)size, (long long)step, dim, (long long)n);
        return NULL;
    }
    int64_t shape[EM_MAX_RANK], st[EM_MAX_RANK];
    int r = t->rank;
    for (int d = 0; d < r; d++) {
        shape[d] = t->shape[d];
        st[d] = t->strides[d];
    }
    int64_t dstride = r ? t->strides[dim] : 1;
    if (r == 0) {
        r = 1;
        shape[0] = 1;
        st[0] = 1;
    }
    shape[dim] = (n - size) / step + 1;
    /* one window moves by no step (and a huge step would overflow the stride) */
    if (shape[dim] == 1) step = 1;
    if (!core_mul_ok(dstride, step, &st[dim])) {
        em_error(EM_ERR_SHAPE, "em_unfold: step %lld overflows the stride %lld of dim %d",
                 (long long)step, (long long)dstride, dim);
        return NULL;
    }
    shape[r] = size;
    st[r] = dstride;
    em_tensor *v = tn_view_of(t, shape, st, r + 1, t->offset);
    em_params p = {.unfold = {.dim = dim, .size = size, .step = step}};
    return record_view(EM_OP_UNFOLD, (em_tensor *)t, v, &p);
}

/* A contiguous copy of t; errors name fn. */
static em_tensor *clone_named(const char *fn, const em_tensor *t)
{
    em_tensor *out = tn_new_for(fn, t->dtype, t->shape, t->rank, t->storage->device);
    em_tensor *in = (em_tensor *)t;
    return tn_run(EM_OP_COPY, out, &in, 1, NULL);
}

em_tensor *em_contiguous(const em_tensor *t)
{
    if (!tn_check_ptr("em_contiguous", t, "t")) return NULL;
    if (tn_is_contiguous(t)) return tn_share((em_tensor *)t);
    return clone_named("em_contiguous", t);
}

em_tensor *em_clone(const em_tensor *t)
{
    if (!tn_check_ptr("em_clone", t, "t")) return NULL;
    return clone_named("em_clone", t);
}

em_tensor *em_cast(const em_tensor *t, em_dtype dtype)
{
    if (!tn_check_ptr("em_cast", t, "t")) return NULL;
    if (!em_dtype_valid((int)dtype)) {
        em_error(EM_ERR_DTYPE, "em_cast: invalid dtype %d", (int)dtype);
        return NULL;
    }
    em_tensor *out = tn_new_for("em_cast", dtype, t->shape, t->rank, t->storage->device);
    em_tensor *in = (em_tensor *)t;
    return tn_run(EM_OP_CAST, out, &in, 1, NULL);
}
