/* Combine and split: cat, stack, split, chunk, repeat, tile, roll, pad.
 * Records (parameters in src/ir/ir.h):
 *   CAT    in[0..n_in) (1 to EM_OP_MAX_IN tensors, any dtypes; the output's dtype is the
 *          promoted one and the kernel converts), em_p_dim's dim. More than EM_OP_MAX_IN inputs
 *          are joined in groups (a cat of cats). 1-D inputs of shape [0] are left out.
 *   REPEAT in[0] = x, em_p_repeat: the output rank (>= x's rank) and repeats per output dim;
 *          x's dims align with the last x->rank output dims (leading new dims).
 *   ROLL   in[0] = x, em_p_roll: n (dim, shift) pairs, each shift reduced into [0, size of dim)
 *          (so sums and negations of shifts never overflow). The flattened form (n == 0 in the
 *          API) rolls a [numel] reshape on dim 0.
 *   PAD    in[0] = x, em_p_pad: mode, n_pairs (before, after) pairs for dim rank-1-k (from the
 *          last dim, F.pad order), the constant value.
 * split/split_sizes/chunk return views (em_narrow); stack is unsqueeze views + cat. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"

/* ---- cat and stack ----------------------------------------------------------------------- */

static bool is_legacy_empty(const em_tensor *t)
{
    return t->rank == 1 && t->shape[0] == 0;
}

/* Joins ts[0..n) (non-legacy-empty, checked) along dim into a new tensor of dtype dt. */
static em_tensor *cat_group(const char *fn, em_tensor *const *ts, int n, int dim, em_dtype dt)
{
    if (n > EM_OP_MAX_IN) {
        em_tensor *parts[EM_OP_MAX_IN] = {0};
        int groups = (n + EM_OP_MAX_IN - 1) / EM_OP_MAX_IN;
        if (groups > EM_OP_MAX_IN) groups = EM_OP_MAX_IN;
        int per = (n + groups - 1) / groups, made = 0;
        em_tensor *r = NULL;
        bool ok = true;
        for (int g = 0; g < groups && ok; g++) {
            int lo = g * per, hi = lo + per < n ? lo + per : n;
            if (lo >= hi) break;
            parts[made] = cat_group(fn, ts + lo, hi - lo, dim, dt);
            ok = parts[made] != NULL;
            if (ok) made++;
        }
        if (ok) r = cat_group(fn, parts, made, dim, dt);
        for (int g = 0; g < made; g++) em_release(parts[g]);
        return r;
    }
    int64_t shape[EM_MAX_RANK];
    memcpy(shape, ts[0]->shape, sizeof shape);
    shape[dim] = 0;
    for (int k = 0; k < n; k++) {
        if (!core_add_ok(shape[dim], ts[k]->shape[dim], &shape[dim])) {
            em_error(EM_ERR_SHAPE, "%s: the sizes along dim %d add up past 2^63", fn, dim);
            return NULL;
        }
    }
    em_tensor *out = tn_new_for(fn, dt, shape, ts[0]->rank, ts[0]->storage->device);
    em_params p = {.dim = {.dim = dim}};
    return tn_run(EM_OP_CAT, out, ts, n, &p);
}

static em_tensor *cat_impl(const char *fn, em_tensor *const *ts, int n, int dim)
{
    if (!tn_check_ptr(fn, ts, "tensors")) return NULL;
    if (n < 1) {
        em_error(EM_ERR_INVALID_ARG, "%s: needs at least one tensor, got %d", fn, n);
        return NULL;
    }
    for (int k = 0; k < n; k++) {
        char what[32];
        snprintf(what, sizeof what, "tensors[%d]", k);
        if (!tn_check_ptr(fn, ts[k], what)) return NULL;
    }
    em_dtype dt = ts[0]->dtype;
    int ref = -1;
    for (int k = 0; k < n; k++) {
        if (k > 0) dt = em_dtype_promote(dt, ts[k]->dtype);
        if (k > 0 && !tn_check_same_device(fn, ts[0], ts[k])) return NULL;
        if (ref < 0 && !is_legacy_empty(ts[k])) ref = k;
    }
    if (ref < 0) { /* every input is a legacy empty [0] tensor */
        int64_t z = 0;
        if (!(dim >= -1 && dim <= 0)) {
            em_error(EM_ERR_INDEX, "%s: dim %d is out of range for a tensor of rank 1", fn, dim);
            return NULL;
        }
        return tn_new(dt, &z, 1, ts[0]->storage->device);
    }
    const em_tensor *r0 = ts[ref];
    if (r0->rank == 0) {
        em_error(EM_ERR_SHAPE, "%s: tensors[%d] is rank 0 and cannot be concatenated", fn, ref);
        return NULL;
    }
    if (!tn_norm_dim(fn, r0->rank, &dim)) return NULL;
    em_tensor **use = malloc((size_t)n * sizeof *use);
    if (!use) {
        em_error(EM_ERR_OOM, "%s: out of memory", fn);
        return NULL;
    }
    int m = 0;
    for (int k = 0; k < n; k++) {
        const em_tensor *t = ts[k];
        if (is_legacy_empty(t)) continue;
        bool ok = t->rank == r0->rank;
        for (int d = 0; ok && d < t->rank; d++)
            if (d != dim && t->shape[d] != r0->shape[d]) ok = false;
        if (!ok) {
            em_error(EM_ERR_SHAPE,
                     "%s: tensors[%d] has shape %s, which does not match %s outside dim %d", fn, k,
                     tn_dims_str(t->shape, t->rank), tn_dims_str(r0->shape, r0->rank), dim);
            free(use);
            return NULL;
        }
        use[m++] = (em_tensor *)t;
    }
    em_tensor *r = cat_group(fn, use, m, dim, dt);
    free(use);
    return r;
}

em_tensor *em_cat(em_tensor *const *tensors, int n, int dim)
{
    return cat_impl("em_cat", tensors, n, dim);
}

em_tensor *em_stack(em_tensor *const *tensors, int n, int dim)
{
    const char *fn = "em_stack";
    if (!tn_check_ptr(fn, tensors, "tensors")) return NULL;
    if (n < 1) {
        em_error(EM_ERR_INVALID_ARG, "%s: needs at least one tensor, got %d", fn, n);
        return NULL;
    }
    for (int k = 0; k < n; k++) {
        char what[32];
        snprintf(what, sizeof what, "tensors[%d]", k);
        if (!tn_check_ptr(fn, tensors[k], what)) return NULL;
    }
    const em_tensor *t0 = tensors[0];
    for (int k = 1; k < n; k++) {
        const em_tensor *t = tensors[k];
        if (t->rank != t0->rank || memcmp(t->shape, t0->shape, sizeof(int64_t) * (size_t)t->rank)) {
            em_error(EM_ERR_SHAPE, "%s: tensors[%d] has shape %s but tensors[0] has %s", fn, k,
                     tn_dims_str(t->shape, t->rank), tn_dims_str(t0->shape, t0->rank));
            return NULL;
        }
    }
    int r = t0->rank + 1;
    if (r > EM_MAX_RANK) {
        em_error(EM_ERR_SHAPE, "%s: rank %d is already the maximum", fn, t0->rank);
        return NULL;
    }
    if (dim < -r || dim >= r) {
        em_error(EM_ERR_INDEX, "%s: dim %d is out of range for tensors of rank %d", fn, dim,
                 t0->rank);
        return NULL;
    }
    if (dim < 0) dim += r;
    em_tensor **u = calloc((size_t)n, sizeof *u);
    if (!u) {
        em_error(EM_ERR_OOM, "%s: out of memory", fn);
        return NULL;
    }
    em_tensor *res = NULL;
    bool ok = true;
    for (int k = 0; k < n && ok; k++) ok = (u[k] = em_unsqueeze(tensors[k], dim)) != NULL;
    if (ok) res = cat_impl(fn, u, n, dim);
    for (int k = 0; k < n; k++) em_release(u[k]);
    free(u);
    return res;
}

/* ---- split and chunk (views) ------------------------------------------------------------- */

/* Writes views of t along dim with the given sizes into out[]; releases them on failure. */
static em_status split_views(const char *fn, const em_tensor *t, const int64_t *sizes, int n,
                             int dim, em_tensor **out)
{
    int64_t start = 0;
    for (int k = 0; k < n; k++) {
        out[k] = em_narrow(t, dim, start, sizes[k]);
        if (!out[k]) {
            for (int j = 0; j < k; j++) {
                em_release(out[j]);
                out[j] = NULL;
            }
            return em_last_status() != EM_OK ? em_last_status()
                                             : em_error(EM_ERR_INTERNAL, "%s: narrow failed", fn);
        }
        start += sizes[k];
    }
    return EM_OK;
}

static bool split_prep(const char *fn, const em_tensor *t, int *dim, em_tensor **out)
{
    if (!tn_check_ptr(fn, t, "t") || !tn_check_ptr(fn, out, "out")) return false;
    if (t->rank == 0) {
        em_error(EM_ERR_INDEX, "%s: cannot split a rank-0 tensor", fn);
        return false;
    }
    return tn_norm_dim(fn, t->rank, dim);
}

em_status em_split(const em_tensor *t, int64_t size, int dim, em_tensor **out, int cap, int *n_out)
{
    const char *fn = "em_split";
    if (n_out) *n_out = 0;
    if (!split_prep(fn, t, &dim, out)) return em_last_status();
    int64_t len = t->shape[dim];
    if (size <= 0 && !(size == 0 && len == 0)) {
        return em_error(EM_ERR_INVALID_ARG, "%s: split size %lld must be positive", fn,
                        (long long)size);
    }
    int64_t count = size == 0 ? 1 : core_ceil_div(len, size);
    if (count < 1) count = 1;
    if (count > cap) {
        return em_error(EM_ERR_INVALID_ARG,
                        "%s: %lld pieces of size %lld along a dim of size %lld do not fit in "
                        "cap %d",
                        fn, (long long)count, (long long)size, (long long)len, cap);
    }
    int64_t *sizes = malloc((size_t)count * sizeof *sizes);
    if (!sizes) return em_error(EM_ERR_OOM, "%s: out of memory", fn);
    for (int64_t k = 0; k < count; k++) {
        int64_t left = len - k * size;
        sizes[k] = left < size ? left : size;
    }
    em_status st = split_views(fn, t, sizes, (int)count, dim, out);
    free(sizes);
    if (st != EM_OK) return st;
    if (n_out) *n_out = (int)count;
    return EM_OK;
}

em_status em_split_sizes(const em_tensor *t, const int64_t *sizes, int n, int dim, em_tensor **out)
{
    const char *fn = "em_split_sizes";
    if (!split_prep(fn, t, &dim, out) || !tn_check_ptr(fn, sizes, "sizes")) return em_last_status();
    if (n < 1) return em_error(EM_ERR_INVALID_ARG, "%s: needs at least one size, got %d", fn, n);
    int64_t sum = 0;
    for (int k = 0; k < n; k++) {
        if (sizes[k] < 0)
            return em_error(EM_ERR_INVALID_ARG, "%s: sizes[%d] = %lld is negative", fn, k,
                            (long long)sizes[k]);
        if (!core_add_ok(sum, sizes[k], &sum))
            return em_error(EM_ERR_SHAPE, "%s: sizes add up past 2^63 (dim %d has size %lld)", fn,
                            dim, (long long)t->shape[dim]);
    }
    if (sum != t->shape[dim]) {
        return em_error(EM_ERR_SHAPE, "%s: sizes sum to %lld but dim %d has size %lld", fn,
                        (long long)sum, dim, (long long)t->shape[dim]);
    }
    return split_views(fn, t, sizes, n, dim, out);
}

em_status em_chunk(const em_tensor *t, int chunks, int dim, em_tensor **out, int *n_out)
{
    const char *fn = "em_chunk";
    if (n_out) *n_out = 0;
    if (!split_prep(fn, t, &dim, out)) return em_last_status();
    if (chunks < 1)
        return em_error(EM_ERR_INVALID_ARG, "%s: chunks %d must be positive", fn, chunks);
    int64_t len = t->shape[dim];
    int64_t size = core_ceil_div(len, chunks);
    if (len == 0) { /* torch: `chunks` empty pieces */
        for (int k = 0; k < chunks; k++) {
            int64_t z = 0;
            em_status st = split_views(fn, t, &z, 1, dim, &out[k]);
            if (st != EM_OK) {
                for (int j = 0; j < k; j++) {
                    em_release(out[j]);
                    out[j] = NULL;
                }
                return st;
            }
        }
        if (n_out) *n_out = chunks;
        return EM_OK;
    }
    return em_split(t, size, dim, out, chunks, n_out);
}

/* ---- repeat and tile --------------------------------------------------------------------- */

static em_tensor *repeat_impl(const char *fn, const em_tensor *t, em_shape reps)
{
    if (reps.rank < t->rank || reps.rank > EM_MAX_RANK) {
        em_error(EM_ERR_SHAPE, "%s: %d repeats given for a tensor of rank %d (need %d to %d)", fn,
                 reps.rank, t->rank, t->rank, EM_MAX_RANK);
        return NULL;
    }
    int r = reps.rank, lead = r - t->rank;
    int64_t shape[EM_MAX_RANK];
    em_params p = {.repeat = {.rank = r}};
    for (int d = 0; d < r; d++) {
        if (reps.dims[d] < 0) {
            em_error(EM_ERR_INVALID_ARG, "%s: negative repeat count in %s", fn,
                     tn_dims_str(reps.dims, r));
            return NULL;
        }
        int64_t s = d < lead ? 1 : t->shape[d - lead];
        if (!core_mul_ok(s, reps.dims[d], &shape[d])) {
            em_error(EM_ERR_SHAPE, "%s: repeats %s make too large a tensor", fn,
                     tn_dims_str(reps.dims, r));
            return NULL;
        }
        p.repeat.reps[d] = reps.dims[d];
    }
    em_tensor *out = tn_new_for(fn, t->dtype, shape, r, t->storage->device);
    em_tensor *in = (em_tensor *)t;
    return tn_run(EM_OP_REPEAT, out, &in, 1, &p);
}

em_tensor *em_repeat(const em_tensor *t, em_shape repeats)
{
    if (!tn_check_ptr("em_repeat", t, "t")) return NULL;
    return repeat_impl("em_repeat", t, repeats);
}

em_tensor *em_tile(const em_tensor *t, em_shape reps)
{
    if (!tn_check_ptr("em_tile", t, "t")) return NULL;
    if (reps.rank < 0 || reps.rank > EM_MAX_RANK) {
        em_error(EM_ERR_SHAPE, "em_tile: %d reps is outside [0, %d]", reps.rank, EM_MAX_RANK);
        return NULL;
    }
    if (reps.rank < t->rank) { /* numpy: pad reps with leading ones */
        int pad = t->rank - reps.rank;
        em_shape full = {.rank = t->rank};
        for (int d = 0; d < t->rank; d++) full.dims[d] = d < pad ? 1 : reps.dims[d - pad];
        reps = full;
    }
    return repeat_impl("em_tile", t, reps);
}

/* ---- roll -------------------------------------------------------------------------------- */

em_tensor *em_roll(const em_tensor *t, const int64_t *shifts, const int *dims, int n)
{
    const char *fn = "em_roll";
    if (!tn_check_ptr(fn, t, "t") || !tn_check_ptr(fn, shifts, "shifts")) return NULL;
    if (n < 0 || n > EM_MAX_RANK * 2) {
        em_error(EM_ERR_INVALID_ARG, "%s: %d (shift, dim) pairs is outside [0, %d]", fn, n,
                 EM_MAX_RANK * 2);
        return NULL;
    }
    if (n == 0) { /* roll the flattened tensor, then restore the shape */
        int64_t numel = tn_numel(t);
        em_tensor *flat = em_reshape(t, EM_SHAPE(numel));
        if (!flat) return NULL;
        int d0 = 0;
        em_tensor *rolled = em_roll(flat, shifts, &d0, 1);
        em_release(flat);
        if (!rolled) return NULL;
        em_tensor *res = em_reshape(rolled, tn_shape(t));
        em_release(rolled);
        return res;
    }
    if (!tn_check_ptr(fn, dims, "dims")) return NULL;
    em_params p = {.roll = {.n = n}};
    for (int k = 0; k < n; k++) {
        int d = dims[k];
        if (t->rank == 0) {
            if (d != 0 && d != -1) {
                em_error(EM_ERR_INDEX, "%s: dim %d is out of range for a tensor of rank 0", fn, d);
                return NULL;
            }
            d = 0;
        } else if (!tn_norm_dim(fn, t->rank, &d)) {
            return NULL;
        }
        int64_t len = t->rank ? t->shape[d] : 1;
        p.roll.dims[k] = d;
        p.roll.shifts[k] = len ? (shifts[k] % len + len) % len : 0;
    }
    em_tensor *out = tn_new(t->dtype, t->shape, t->rank, t->storage->device);
    em_tensor *in = (em_tensor *)t;
    if (t->rank == 0) p.roll.n = 0; /* nothing to move in a scalar */
    return tn_run(EM_OP_ROLL, out, &in, 1, &p);
}

/* ---- pad --------------------------------------------------------------------------------- */

static const char *pad_mode_name(em_pad_mode m)
{
    switch (m) {
    case EM_PAD_CONSTANT: return "constant";
    case EM_PAD_REFLECT: return "reflect";
    case EM_PAD_REPLICATE: return "replicate";
    case EM_PAD_CIRCULAR: return "circular";
    default: return "?";
    }
}

em_tensor *em_pad(const em_tensor *t, const int64_t *pads, int n_pairs, em_pad_mode mode,
                  double value)
{
    const char *fn = "em_pad";
    if (!tn_check_ptr(fn, t, "t")) return NULL;
    if (n_pairs > 0 && !tn_check_ptr(fn, pads, "pads")) return NULL;
    if ((int)mode < EM_PAD_CONSTANT || (int)mode > EM_PAD_CIRCULAR) {
        em_error(EM_ERR_INVALID_ARG, "%s: unknown mode %d", fn, (int)mode);
        return NULL;
    }
    if (n_pairs < 0 || n_pairs > t->rank) {
        em_error(EM_ERR_INVALID_ARG, "%s: %d pad pairs for a tensor of rank %d", fn, n_pairs,
                 t->rank);
        return NULL;
    }
    int64_t shape[EM_MAX_RANK];
    memcpy(shape, t->shape, sizeof shape);
    em_params p = {.pad = {.mode = mode, .n_pairs = n_pairs, .value = value}};
    for (int k = 0; k < n_pairs; k++) {
        int d = t->rank - 1 - k;
        int64_t lo = pads[2 * k], hi = pads[2 * k + 1], n = t->shape[d];
        /* INT64_MIN has no negation, which the gradient's crop would need; lo + hi first, as
           it only overflows when n + lo + hi does */
        int64_t both = 0;
        if (lo == INT64_MIN || hi == INT64_MIN || !core_add_ok(lo, hi, &both) ||
            !core_add_ok(n, both, &shape[d])) {
            em_error(EM_ERR_SHAPE, "%s: pads (%lld, %lld) on dim %d of size %lld overflow", fn,
                     (long long)lo, (long long)hi, d, (long long)n);
            return NULL;
        }
        if (shape[d] < 0) {
            em_error(EM_ERR_SHAPE, "%s: pads (%lld, %lld) on dim %d of size %lld leave size %lld",
                     fn, (long long)lo, (long long)hi, d, (long long)n, (long long)shape[d]);
            return NULL;
        }
        if (mode != EM_PAD_CONSTANT) {
            /* the padded part must come from existing elements */
            int64_t lim = mode == EM_PAD_REFLECT ? n - 1 : mode == EM_PAD_CIRCULAR ? n : INT64_MAX;
            if ((lo > 0 || hi > 0) && n == 0) {
                em_error(EM_ERR_SHAPE, "%s: %s padding of dim %d needs a non-empty dim", fn,
                         pad_mode_name(mode), d);
                return NULL;
            }
            if (lo > lim || hi > lim) {
                em_error(EM_ERR_SHAPE,
                         "%s: %s pad (%lld, %lld) on dim %d must be %s the dim's size %lld", fn,
                         pad_mode_name(mode), (long long)lo, (long long)hi, d,
                         mode == EM_PAD_REFLECT ? "less than" : "at most", (long long)n);
                return NULL;
            }
        }
        /* a crop past the whole dim leaves only padding (constant), copies of the edge
           (replicate) or nothing (the other modes): crop exactly the dim instead, the same shape
           and values, so that no source index j - before overflows in a kernel */
        if (lo < -n) hi += lo + n, lo = -n;
        if (hi < -n) lo += hi + n, hi = -n;
        p.pad.pads[2 * k] = lo;
        p.pad.pads[2 * k + 1] = hi;
    }
    em_tensor *out = tn_new_for(fn, t->dtype, shape, t->rank, t->storage->device);
    em_tensor *in = (em_tensor *)t;
    return tn_run(EM_OP_PAD, out, &in, 1, &p);
}
