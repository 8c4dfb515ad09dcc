/* Pooling, adaptive pooling, interpolation and pixel (un)shuffle front-ends.
 * Records (parameters in src/ir/ir.h; the kernels pad spatial dims to three with leading size-1
 * dims, ir_pool_windows):
 *   MAX_POOL / AVG_POOL  in: x [N, C, spatial...]; em_p_pool: nd (1..3), kernel, stride, pad,
 *       dilation, ceil_mode, count_include_pad (avg). MAX_POOL has two outputs: values and i64
 *       argmax indices flattened within each sample-channel plane (PyTorch's convention).
 *   MAX_POOL_VALUES  the parameters of MAX_POOL and its values only (the indices are not asked
 *       for): the forward moves half the bytes, and its backward rule recomputes the indices.
 *   ADAPTIVE_AVG_POOL / ADAPTIVE_MAX_POOL  em_p_adaptive: nd and the output sizes; max has two
 *       outputs.
 *   INTERPOLATE  em_p_interp: nd (1 or 2), the output sizes, mode, align_corners.
 *   PIXEL_SHUFFLE / PIXEL_UNSHUFFLE  em_p_shuffle: r.
 * Inputs may be unbatched ([C, spatial...]); outputs then drop the batch dim too. */
#include <string.h>

#include "op.h"

/* The most positions one pooling window may have. */
#define POOL_WINDOW_MAX (INT64_C(1) << 24)

typedef struct pool_geom {
    int nd;
    bool unbatched;
    int64_t k[3], s[3], p[3], d[3], in[3], out[3];
} pool_geom;

static bool check_input(const char *fn, const em_tensor *x, int nd, bool *unbatched)
{
    if (!tn_check_ptr(fn, x, "x")) return false;
    if (x->rank != nd + 2 && x->rank != nd + 1) {
        em_error(EM_ERR_SHAPE, "%s: input must be [N, C, %d spatial dims] or unbatched, got %s", fn,
                 nd, tn_dims_str(x->shape, x->rank));
        return false;
    }
    *unbatched = x->rank == nd + 1;
    return true;
}

/* Output shape: batch (unless unbatched), channels, spatial sizes. */
static int out_shape(const em_tensor *x, int nd, const int64_t *sp, int64_t *shape)
{
    int r = 0;
    for (int d = 0; d < x->rank - nd; d++) shape[r++] = x->shape[d];
    for (int d = 0; d < nd; d++) shape[r++] = sp[d];
    return r;
}

/* Windows of span d (k - 1) + 1 every s over L padded by p on each side; -1 when the span, the
 * padded length or the stride passes TN_GEOM_MAX. */
static int64_t pool_out_size(int64_t L, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil)
{
    int64_t span = 0, padded = 0, last = 0;
    if (!core_muladd_ok(d, k - 1, 1, &span) || !core_muladd_ok(2, p, L, &padded) ||
        span > TN_GEOM_MAX || padded > TN_GEOM_MAX || s > TN_GEOM_MAX)
        return -1;
    int64_t num = padded - span;
    if (num < 0) return 0;
    int64_t out = (ceil ? core_ceil_div(num, s) : num / s) + 1;
    /* the last window must start inside the input or the left padding (L + p <= padded fits) */
    if (ceil && (!core_mul_ok(out - 1, s, &last) || last >= L + p)) out--;
    return out;
}

static bool pool_setup(const char *fn, const em_tensor *x, int nd, em_pool_opts o, pool_geom *g)
{
    if (!check_input(fn, x, nd, &g->unbatched)) return false;
    if (!em_dtype_is_float(x->dtype)) {
        em_error(EM_ERR_DTYPE, "%s: input must be a float tensor, got %s", fn,
                 em_dtype_name(x->dtype));
        return false;
    }
    g->nd = nd;
    for (int i = 0; i < nd; i++) {
        g->k[i] = o.kernel[i];
        g->s[i] = o.stride[i] ? o.stride[i] : o.kernel[i];
        g->p[i] = o.pad[i];
        g->d[i] = o.dilation[i] ? o.dilation[i] : 1;
        g->in[i] = x->shape[x->rank - nd + i];
        if (g->k[i] <= 0 || g->s[i] <= 0 || g->d[i] <= 0 || g->p[i] < 0) {
            em_error(EM_ERR_INVALID_ARG,
                     "%s: kernel %lld, stride %lld, padding %lld, dilation %lld in spatial dim "
                     "%d are not valid",
                     fn, (long long)g->k[i], (long long)g->s[i], (long long)g->p[i],
                     (long long)g->d[i], i);
            return false;
        }
        if (g->p[i] > g->k[i] / 2) {
            em_error(EM_ERR_INVALID_ARG,
                     "%s: padding %lld is more than half the kernel %lld in spatial dim %d", fn,
                     (long long)g->p[i], (long long)g->k[i], i);
            return false;
        }
        g->out[i] = pool_out_size(g->in[i], g->k[i], g->s[i], g->p[i], g->d[i], o.ceil_mode);
        if (g->out[i] < 0) {
            em_error(EM_ERR_INVALID_ARG,
                     "%s: kernel %lld, padding %lld, dilation %lld, stride %lld over input size "
                     "%lld pass 2^62 in spatial dim %d",
                     fn, (long long)g->k[i], (long long)g->p[i], (long long)g->d[i],
                     (long long)g->s[i], (long long)g->in[i], i);
            return false;
        }
        if (g->out[i] == 0) {
            em_error(EM_ERR_SHAPE,
                     "%s: input size %lld with kernel %lld, padding %lld, dilation %lld leaves "
                     "no output in spatial dim %d",
                     fn, (long long)g->in[i], (long long)g->k[i], (long long)g->p[i],
                     (long long)g->d[i], i);
            return false;
        }
    }
    /* every kernel visits each position of its window, padding included: bound that work (and
       the int sizes of the device kernels) */
    int64_t volume = 1;
    bool fits = true;
    for (int i = 0; i < nd; i++) {
        fits = fits && g->k[i] <= POOL_WINDOW_MAX / volume && g->s[i] <= INT32_MAX &&
               g->d[i] <= INT32_MAX;
        if (fits) volume *= g->k[i];
    }
    if (!fits) {
        em_error(EM_ERR_INVALID_ARG,
                 "%s: kernel %s (at most 2^24 positions in all), stride or dilation (at most "
                 "2^31 - 1) too large",
                 fn, tn_dims_str(g->k, nd));
        return false;
    }
    return true;
}

static em_params pool_params(const pool_geom *g, em_pool_opts o)
{
    em_params p;
    memset(&p, 0, sizeof p);
    p.pool.nd = g->nd;
    for (int i = 0; i < g->nd; i++) {
        p.pool.kernel[i] = g->k[i];
        p.pool.stride[i] = g->s[i];
        p.pool.pad[i] = g->p[i];
        p.pool.dilation[i] = g->d[i];
    }
    p.pool.ceil_mode = o.ceil_mode;
    p.pool.count_include_pad = !o.exclude_pad;
    return p;
}

/* Dispatches a two-output op (values, i64 indices); hands the indices out or drops them. */
static em_tensor *run_with_indices(const char *fn, em_op_kind kind, const em_tensor *x,
                                   const int64_t *shape, int rank, const em_params *p,
                                   em_tensor **indices)
{
    if (indices) *indices = NULL;
    em_op op;
    memset(&op, 0, sizeof op);
    op.kind = kind;
    op.n_in = 1;
    op.in[0] = (em_tensor *)x;
    op.n_out = 2;
    op.out[0] = tn_new_for(fn, x->dtype, shape, rank, x->storage->device);
    op.out[1] = op.out[0] ? tn_new_for(fn, EM_I64, shape, rank, x->storage->device) : NULL;
    if (!op.out[1]) {
        em_release(op.out[0]);
        return NULL;
    }
    op.p = *p;
    if (tn_dispatch(&op) != EM_OK) return NULL;
    if (indices)
        *indices = op.out[1];
    else
        em_release(op.out[1]);
    return op.out[0];
}

static em_tensor *max_pool(const char *fn, const em_tensor *x, int nd, em_pool_opts o,
                           em_tensor **indices)
{
    if (indices) *indices = NULL;
    pool_geom g;
    if (!pool_setup(fn, x, nd, o, &g)) return NULL;
    int64_t shape[EM_MAX_RANK];
    em_params p = pool_params(&g, o);
    int r = out_shape(x, nd, g.out, shape);
    if (!indices) {
        em_tensor *in = (em_tensor *)x;
        return tn_run(EM_OP_MAX_POOL_VALUES, tn_new_for(fn, x->dtype, shape, r, x->storage->device),
                      &in, 1, &p);
    }
    return run_with_indices(fn, EM_OP_MAX_POOL, x, shape, r, &p, indices);
}

static em_tensor *avg_pool(const char *fn, const em_tensor *x, int nd, em_pool_opts o)
{
    pool_geom g;
    if (!pool_setup(fn, x, nd, o, &g)) return NULL;
    int64_t shape[EM_MAX_RANK];
    em_params p = pool_params(&g, o);
    int r = out_shape(x, nd, g.out, shape);
    em_tensor *in = (em_tensor *)x;
    return tn_run(EM_OP_AVG_POOL, tn_new_for(fn, x->dtype, shape, r, x->storage->device), &in, 1,
                  &p);
}

em_tensor *em_max_pool1d(const em_tensor *x, em_pool_opts o, em_tensor **indices)
{
    return max_pool("em_max_pool1d", x, 1, o, indices);
}

em_tensor *em_max_pool2d(const em_tensor *x, em_pool_opts o, em_tensor **indices)
{
    return max_pool("em_max_pool2d", x, 2, o, indices);
}

em_tensor *em_max_pool3d(const em_tensor *x, em_pool_opts o, em_tensor **indices)
{
    return max_pool("em_max_pool3d", x, 3, o, indices);
}

em_tensor *em_avg_pool1d(const em_tensor *x, em_pool_opts o)
{
    return avg_pool("em_avg_pool1d", x, 1, o);
}

em_tensor *em_avg_pool2d(const em_tensor *x, em_pool_opts o)
{
    return avg_pool("em_avg_pool2d", x, 2, o);
}

em_tensor *em_avg_pool3d(const em_tensor *x, em_pool_opts o)
{
    return avg_pool("em_avg_pool3d", x, 3, o);
}

static bool adaptive_setup(const char *fn, const em_tensor *x, int nd, const int64_t *out,
                           em_params *p, int64_t *shape, int *rank)
{
    bool unbatched;
    if (!check_input(fn, x, nd, &unbatched)) return false;
    if (!em_dtype_is_float(x->dtype)) {
        em_error(EM_ERR_DTYPE, "%s: input must be a float tensor, got %s", fn,
                 em_dtype_name(x->dtype));
        return false;
    }
    memset(p, 0, sizeof *p);
    p->adaptive.nd = nd;
    for (int i = 0; i < nd; i++) {
        if (out[i] <= 0) {
            em_error(EM_ERR_INVALID_ARG, "%s: output size %lld is not positive", fn,
                     (long long)out[i]);
            return false;
        }
        if (x->shape[x->rank - nd + i] == 0) {
            em_error(EM_ERR_SHAPE, "%s: input spatial size is 0 in %s", fn,
                     tn_dims_str(x->shape, x->rank));
            return false;
        }
        p->adaptive.out[i] = out[i];
    }
    *rank = out_shape(x, nd, out, shape);
    return true;
}

em_tensor *em_adaptive_avg_pool1d(const em_tensor *x, int64_t out_l)
{
    em_params p;
    int64_t shape[EM_MAX_RANK], out[1] = {out_l};
    int r;
    if (!adaptive_setup("em_adaptive_avg_pool1d", x, 1, out, &p, shape, &r)) return NULL;
    em_tensor *in = (em_tensor *)x;
    return tn_run(EM_OP_ADAPTIVE_AVG_POOL,
                  tn_new_for("em_adaptive_avg_pool1d", x->dtype, shape, r, x->storage->device), &in,
                  1, &p);
}

em_tensor *em_adaptive_avg_pool2d(const em_tensor *x, int64_t out_h, int64_t out_w)
{
    em_params p;
    int64_t shape[EM_MAX_RANK], out[2] = {out_h, out_w};
    int r;
    if (!adaptive_setup("em_adaptive_avg_pool2d", x, 2, out, &p, shape, &r)) return NULL;
    em_tensor *in = (em_tensor *)x;
    return tn_run(EM_OP_ADAPTIVE_AVG_POOL,
                  tn_new_for("em_adaptive_avg_pool2d", x->dtype, shape, r, x->storage->device), &in,
                  1, &p);
}

em_tensor *em_adaptive_max_pool1d(const em_tensor *x, int64_t out_l, em_tensor **indices)
{
    if (indices) *indices = NULL;
    em_params p;
    int64_t shape[EM_MAX_RANK], out[1] = {out_l};
    int r;
    if (!adaptive_setup("em_adaptive_max_pool1d", x, 1, out, &p, shape, &r)) return NULL;
    return run_with_indices("em_adaptive_max_pool1d", EM_OP_ADAPTIVE_MAX_POOL, x, shape, r, &p,
                            indices);
}

em_tensor *em_adaptive_max_pool2d(const em_tensor *x, int64_t out_h, int64_t out_w,
                                  em_tensor **indices)
{
    if (indices) *indices = NULL;
    em_params p;
    int64_t shape[EM_MAX_RANK], out[2] = {out_h, out_w};
    int r;
    if (!adaptive_setup("em_adaptive_max_pool2d", x, 2, out, &p, shape, &r)) return NULL;
    return run_with_indices("em_adaptive_max_pool2d", EM_OP_ADAPTIVE_MAX_POOL, x, shape, r, &p,
                            indices);
}

em_tensor *em_interpolate(const em_tensor *x, em_shape size, em_interp_mode mode,
                          bool align_corners)
{
    const char *fn = "em_interpolate";
    if (!tn_check_ptr(fn, x, "x")) return NULL;
    int nd = size.rank;
    if (nd < 1 || nd > 2 || x->rank != nd + 2) {
        em_error(EM_ERR_SHAPE,
                 "%s: input %s and size %s: expected [N, C, L] with one size or [N, C, H, W] "
                 "with two",
                 fn, tn_dims_str(x->shape, x->rank),
                 tn_dims_str(size.dims, size.rank < 0   ? 0
                                        : size.rank > 8 ? 8
                                                        : size.rank));
        return NULL;
    }
    if (!em_dtype_is_float(x->dtype)) {
        em_error(EM_ERR_DTYPE, "%s: input must be a float tensor, got %s", fn,
                 em_dtype_name(x->dtype));
        return NULL;
    }
    if ((int)mode < 0 || mode > EM_INTERP_BICUBIC || (mode == EM_INTERP_BICUBIC && nd != 2)) {
        em_error(EM_ERR_INVALID_ARG, "%s: mode %d is not valid for %d spatial dims", fn, (int)mode,
                 nd);
        return NULL;
    }
    if (mode == EM_INTERP_NEAREST && align_corners) {
        em_error(EM_ERR_INVALID_ARG, "%s: align_corners only applies to linear and cubic modes",
                 fn);
        return NULL;
    }
    em_params p = {.interp = {.nd = nd, .mode = mode, .align_corners = align_corners}};
    for (int i = 0; i < nd; i++) {
        if (size.dims[i] <= 0 || x->shape[2 + i] <= 0) {
            em_error(EM_ERR_SHAPE, "%s: cannot resize %s to %s", fn, tn_dims_str(x->shape, x->rank),
                     tn_dims_str(size.dims, nd));
            return NULL;
        }
        p.interp.size[i] = size.dims[i];
    }
    int64_t shape[EM_MAX_RANK];
    int r = out_shape(x, nd, size.dims, shape);
    em_tensor *in = (em_tensor *)x;
    return tn_run(EM_OP_INTERPOLATE, tn_new_for(fn, x->dtype, shape, r, x->storage->device), &in, 1,
                  &p);
}

static em_tensor *shuffle(const char *fn, em_op_kind kind, const em_tensor *x, int64_t r)
{
    if (!tn_check_ptr(fn, x, "x")) return NULL;
    if (x->rank < 3) {
        em_error(EM_ERR_SHAPE, "%s: input must have at least 3 dims [..., C, H, W], got %s", fn,
                 tn_dims_str(x->shape, x->rank));
        return NULL;
    }
    if (r <= 0) {
        em_error(EM_ERR_INVALID_ARG, "%s: factor %lld is not positive", fn, (long long)r);
        return NULL;
    }
    int64_t shape[EM_MAX_RANK];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->rank);
    int c = x->rank - 3, h = x->rank - 2, w = x->rank - 1;
    int64_t rr = 0;
    bool fits = core_mul_ok(r, r, &rr);
    if (kind == EM_OP_PIXEL_SHUFFLE) {
        /* r * r past int64_t divides no channel count (only 0 channels, which stay 0) */
        if (fits ? x->shape[c] % rr != 0 : x->shape[c] != 0) {
            em_error(EM_ERR_SHAPE, "%s: %lld channels are not divisible by %lld^2", fn,
                     (long long)x->shape[c], (long long)r);
            return NULL;
        }
        shape[c] = fits ? x->shape[c] / rr : 0;
        fits = core_mul_ok(x->shape[h], r, &shape[h]) && core_mul_ok(x->shape[w], r, &shape[w]);
    } else {
        if (x->shape[h] % r != 0 || x->shape[w] % r != 0) {
            em_error(EM_ERR_SHAPE, "%s: spatial size %lldx%lld is not divisible by %lld", fn,
                     (long long)x->shape[h], (long long)x->shape[w], (long long)r);
            return NULL;
        }
        fits = fits && core_mul_ok(x->shape[c], rr, &shape[c]);
        shape[h] /= r;
        shape[w] /= r;
    }
    if (!fits) {
        em_error(EM_ERR_SHAPE, "%s: factor %lld makes the shape of %s overflow", fn, (long long)r,
                 tn_dims_str(x->shape, x->rank));
        return NULL;
    }
    em_params p = {.shuffle = {.r = r}};
    em_tensor *in = (em_tensor *)x;
    return tn_run(kind, tn_new_for(fn, x->dtype, shape, x->rank, x->storage->device), &in, 1, &p);
}

em_tensor *em_pixel_shuffle(const em_tensor *x, int64_t r)
{
    return shuffle("em_pixel_shuffle", EM_OP_PIXEL_SHUFFLE, x, r);
}

em_tensor *em_pixel_unshuffle(const em_tensor *x, int64_t r)
{
    return shuffle("em_pixel_unshuffle", EM_OP_PIXEL_UNSHUFFLE, x, r);
}
