/* Backward rules for pooling, adaptive pooling, interpolation and pixel (un)shuffle.
 * Average pooling, adaptive average pooling and interpolation are separable linear maps: per
 * spatial dim an [out, in] weight matrix that depends only on sizes and parameters, built on the
 * host and applied to the gradient with em_matmul (so the rule stays differentiable in g). Max
 * pooling routes the gradient through the saved argmax indices with a scatter-add (values-only
 * max pooling recomputes them first). */
#include <math.h>
#include <stdlib.h>

#include "../ir/decode.h"
#include "autodiff_impl.h"

/* Per-dim weights of the forward map; m is [out, in] row-major, zeroed by the caller. */
typedef void (*weights_fn)(const em_op *op, int d, int64_t in, int64_t out, double *m);

/* avg_pool along spatial dim d, with the divisor rule of the CPU kernel: the padded window
 * clipped at the end of the padding (count_include_pad) or the valid taps only; the divisor
 * of a window is the product of the per-dim counts, so it factors over dims. */
static void avg_weights(const em_op *op, int d, int64_t in, int64_t out, double *m)
{
    const em_p_pool *pp = &op->p.pool;
    int64_t k = pp->kernel[d], s = pp->stride[d], p = pp->pad[d], dl = pp->dilation[d];
    bool include_pad = pp->count_include_pad;
    for (int64_t o = 0; o < out; o++) {
        int64_t st = o * s - p, valid = 0;
        for (int64_t t = 0; t < k; t++) {
            int64_t i = st + t * dl;
            valid += i >= 0 && i < in;
        }
        int64_t count = valid;
        if (include_pad) {
            int64_t hi = st + (k - 1) * dl + 1;
            if (hi > in + p) hi = in + p;
            count = (hi - st + dl - 1) / dl;
        }
        if (count == 0) continue;
        for (int64_t t = 0; t < k; t++) {
            int64_t i = st + t * dl;
            if (i >= 0 && i < in) m[o * in + i] += 1.0 / (double)count;
        }
    }
}

static void adaptive_weights(const em_op *op, int d, int64_t in, int64_t out, double *m)
{
    (void)op;
    (void)d;
    for (int64_t o = 0; o < out; o++) {
        int64_t lo = o * in / out, hi = ((o + 1) * in + out - 1) / out;
        for (int64_t i = lo; i < hi; i++) m[o * in + i] = 1.0 / (double)(hi - lo);
    }
}

static int64_t clampi(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

static void interp_weights(const em_op *op, int d, int64_t in, int64_t out, double *m)
{
    (void)d;
    int mode = (int)op->p.interp.mode;
    bool align = op->p.interp.align_corners;
    for (int64_t o = 0; o < out; o++) {
        double *row = m + o * in;
        if (mode == EM_INTERP_NEAREST) {
            int64_t i = (int64_t)floor((double)o * (double)in / (double)out);
            row[clampi(i, 0, in - 1)] += 1.0;
        } else if (mode == EM_INTERP_BILINEAR) {
            double sc = ir_interp_src(o, in, out, align, false);
            int64_t i0 = (int64_t)sc;
            if (i0 > in - 1) i0 = in - 1;
            int64_t i1 = i0 + (i0 < in - 1);
            double l = sc - (double)i0;
            row[i0] += 1 - l;
            row[i1] += l;
        } else {
            double sc = ir_interp_src(o, in, out, align, true);
            int64_t i0 = (int64_t)floor(sc);
            double t = sc - (double)i0;
            for (int a = 0; a < 4; a++) row[clampi(i0 - 1 + a, 0, in - 1)] += ir_cubic_weight(t, a);
        }
    }
}

/* g [..., out spatial] -> [..., in spatial]: the transpose of the separable map applied one
 * spatial dim at a time (g moved so the dim is last, times the [out, in] matrix). */
static em_tensor *linear_backward(ad_ctx *c, int nd, weights_fn wf)
{
    em_tensor *t = ad_gout(c, 0);
    em_shape in = ad_in_shape(c, 0);
    for (int d = 0; d < nd && t; d++) {
        int ax = in.rank - nd + d, last = in.rank - 1;
        int64_t ni = in.dims[ax], no = t->shape[ax];
        double *m = calloc((size_t)(ni * no), sizeof *m);
        if (!m) {
            em_error(EM_ERR_OOM, "em_backward: out of memory");
            return NULL;
        }
        wf(c->op, d, ni, no, m);
        em_tensor *mt = em_from_data(m, EM_F64, EM_SHAPE(no, ni), t->dtype, em_tensor_device(t));
        free(m);
        em_tensor *moved = ax == last ? t : em_transpose(t, ax, last);
        em_tensor *r = em_matmul(moved, mt);
        t = ax == last ? r : em_transpose(r, ax, last);
    }
    return t;
}

/* Max pooling: g scattered (added) to the argmax positions, flattened per sample-channel
 * plane. */
static em_tensor *max_backward(ad_ctx *c, int nd, em_tensor *idx)
{
    em_tensor *g = ad_gout(c, 0);
    if (!g || !idx) return NULL;
    em_shape in = ad_in_shape(c, 0);
    int64_t in_plane = 1, out_plane = 1;
    for (int d = 0; d < nd; d++) {
        in_plane *= in.dims[in.rank - nd + d];
        out_plane *= g->shape[g->rank - nd + d];
    }
    int64_t planes = in_plane ? em_tensor_numel(g) / (out_plane ? out_plane : 1) : 0;
    em_tensor *g2 = em_reshape(g, EM_SHAPE(planes, out_plane));
    em_tensor *i2 = em_reshape(idx, EM_SHAPE(planes, out_plane));
    em_tensor *s =
        tn_scatter_inrange(ad_zero_base(EM_SHAPE(planes, in_plane), g), 1, i2, g2, EM_SCATTER_ADD);
    return s ? em_reshape(s, in) : NULL;
}

/* Values-only max pooling kept no indices: they are recomputed from the saved input by the
 * indexed kind (the same kernels, so the same argmax) and the gradient is routed as above. */
static em_tensor *max_values_backward(ad_ctx *c, int nd)
{
    const em_op *op = c->op;
    const em_p_pool *pp = &op->p.pool;
    em_pool_opts o = {.ceil_mode = pp->ceil_mode};
    for (int d = 0; d < nd; d++) {
        o.kernel[d] = pp->kernel[d];
        o.stride[d] = pp->stride[d];
        o.pad[d] = pp->pad[d];
        o.dilation[d] = pp->dilation[d];
    }
    em_tensor *x = em_detach(op->in[0]), *idx = NULL;
    em_tensor *v = nd == 1   ? em_max_pool1d(x, o, &idx)
                   : nd == 2 ? em_max_pool2d(x, o, &idx)
                             : em_max_pool3d(x, o, &idx);
    em_tensor *gin = v ? max_backward(c, nd, idx) : NULL;
    em_release(v);
    em_release(idx);
    em_release(x);
    return gin;
}

em_status ad_rule_pool(ad_ctx *c)
{
    const em_op *op = c->op;
    if (!c->needs[0]) return EM_OK;
    int nd = ir_spatial_dims(op->kind, &op->p);
    switch (op->kind) {
    case EM_OP_MAX_POOL:
    case EM_OP_ADAPTIVE_MAX_POOL: c->gin[0] = max_backward(c, nd, c->out[1]); break;
    case EM_OP_MAX_POOL_VALUES: c->gin[0] = max_values_backward(c, nd); break;
    case EM_OP_AVG_POOL: c->gin[0] = linear_backward(c, nd, avg_weights); break;
    case EM_OP_ADAPTIVE_AVG_POOL: c->gin[0] = linear_backward(c, nd, adaptive_weights); break;
    case EM_OP_INTERPOLATE: c->gin[0] = linear_backward(c, nd, interp_weights); break;
    case EM_OP_PIXEL_SHUFFLE: c->gin[0] = em_pixel_unshuffle(ad_gout(c, 0), op->p.shuffle.r); break;
    case EM_OP_PIXEL_UNSHUFFLE: c->gin[0] = em_pixel_shuffle(ad_gout(c, 0), op->p.shuffle.r); break;
    default: return ad_no_rule(c);
    }
    return c->gin[0] ? EM_OK : em_last_status();
}
