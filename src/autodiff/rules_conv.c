/* Backward rules for convolutions, their transposes, im2col and col2im. Every gradient is again a
 * convolution (or fold/unfold), so gradients of gradients come from these same rules. */
#include "autodiff_impl.h"

static em_tensor *conv_any(int nsp, bool transposed, const em_tensor *x, const em_tensor *w,
                           em_conv_opts o)
{
    switch (nsp) {
    case 1: return transposed ? em_conv_transpose1d(x, w, NULL, o) : em_conv1d(x, w, NULL, o);
    case 2: return transposed ? em_conv_transpose2d(x, w, NULL, o) : em_conv2d(x, w, NULL, o);
    default: return transposed ? em_conv_transpose3d(x, w, NULL, o) : em_conv3d(x, w, NULL, o);
    }
}

/* t cut to `size` along its last nsp dims (results of the adjoint convolutions can run a few
 * elements past the input when strides leave a remainder). */
static em_tensor *crop(em_tensor *t, int nsp, const int64_t *size)
{
    for (int d = 0; d < nsp && t; d++) {
        int ax = t->rank - nsp + d;
        if (t->shape[ax] != size[d]) t = em_slice(t, ax, 0, size[d], 1);
    }
    return t;
}

/* Sum of t [rows, cols] over its rows as a row of ones times t ([1, cols]): the GEMM's
 * vector path reads t once, where the general reduction walks it column by column. */
static em_tensor *sum_rows(const em_tensor *t, int64_t rows, int64_t cols)
{
    em_tensor *ones = em_ones(EM_SHAPE(1, rows), em_tensor_dtype(t), em_tensor_device(t));
    return em_matmul(ones, em_reshape(t, EM_SHAPE(rows, cols)));
}

/* Gradient of a convolution's weight: for x [N, C, sp...] and gy [N, Co, osp...] (output of
 * the forward CONV with the geometry g, or playing that role), returns
 * gw[co, ci, k] = sum_{n, o} gy[n, co, o] * x_padded[n, grp(co) * C/G + ci, o * s + k * dil],
 * shape [Co, C/G, k...]. Computed as a grouped convolution whose batch is the C/G input
 * channels of a group, whose channels are (group, sample) pairs and whose kernel is gy, with
 * stride and dilation swapped. */
static em_tensor *weight_grad(const em_tensor *x, const em_tensor *gy, const em_p_conv *g,
                              const int64_t *ksize)
{
    int nsp = g->nd;
    int64_t G = g->groups, N = x->shape[0], C = x->shape[1];
    em_shape s5 = {.rank = nsp + 3};
    s5.dims[0] = N;
    s5.dims[1] = G;
    s5.dims[2] = C / G;
    for (int d = 0; d < nsp; d++) s5.dims[3 + d] = x->shape[2 + d];
    em_tensor *xg = em_reshape(x, s5); /* [N, G, C/G, sp...] */
    em_axes perm = {.n = nsp + 3};
    perm.d[0] = 2;
    perm.d[1] = 1;
    perm.d[2] = 0;
    for (int d = 0; d < nsp; d++) perm.d[3 + d] = 3 + d;
    em_tensor *xp = em_permute(xg, perm); /* [C/G, G, N, sp...] */
    em_shape s4 = {.rank = nsp + 2};
    s4.dims[0] = C / G;
    s4.dims[1] = G * N;
    for (int d = 0; d < nsp; d++) s4.dims[2 + d] = x->shape[2 + d];
    em_tensor *xb = em_reshape(xp, s4);     /* [C/G, G*N, sp...] */
    em_tensor *gk = em_transpose(gy, 0, 1); /* [Co, N, osp...] */
    em_conv_opts o = {.groups = G};
    for (int d = 0; d < nsp; d++) {
        o.stride[d] = g->dilation[d];
        o.dilation[d] = g->stride[d];
        o.pad_lo[d] = g->pad_lo[d];
        o.pad_hi[d] = g->pad_hi[d];
    }
    em_tensor *r = crop(conv_any(nsp, false, xb, gk, o), nsp, ksize); /* [C/G, Co, k...] */
    return r ? em_transpose(r, 0, 1) : NULL;
}

/* The weight gradient of an ungrouped 2-D convolution over a batch as one CONV_WEIGHT_GRAD
 * record on the CPU (one GEMM with the batch inside the reduction, its im2col operand packed
 * straight from the padded images). NULL without an error when the geometry does not fit. */
static em_tensor *weight_grad_fused(const em_tensor *x, const em_tensor *gy, const em_p_conv *g,
                                    const int64_t *ksize)
{
    if (g->nd != 2 || g->groups != 1 || x->rank != 4) return NULL;
    /* CPU only: its GEMM runs a long-K product with a small output at full speed, where the
       CUDA kernels' 128 x 128 tiles leave the GPU idle and the per-sample products win
       (bench/RESULTS.md, evidence section) */
    if (em_tensor_device(x).backend != 0) return NULL;
    int64_t k[2] = {ksize[0], ksize[1]}, lo[2] = {g->pad_lo[0], g->pad_lo[1]};
    int64_t hi[2] = {g->pad_hi[0], g->pad_hi[1]}, st[2] = {g->stride[0], g->stride[1]};
    int64_t dil[2] = {g->dilation[0], g->dilation[1]};
    for (int d = 0; d < 2; d++) {
        int64_t span = x->shape[2 + d] + lo[d] + hi[d] - dil[d] * (k[d] - 1) - 1;
        if (span < 0 || gy->shape[2 + d] != span / st[d] + 1) return NULL;
    }
    return tn_conv2d_weight_grad(x, gy, k, st, dil, lo, hi);
}

/* The same weight gradient for 1-D and 2-D convolutions with symmetric padding, as im2col of x
 * (1-D as 2-D with a 1 x k kernel) followed
 * by one matmul per (sample, group), summed over the batch:
 * gw[g] = sum_n gy_n[g] [Co/G, L] . cols_n[g] [C/G*kh*kw, L]^T. The windows have the kernel's
 * size (3x3, say), not the output plane's, so the unfold is a cheap pass over x. NULL without
 * an error when the geometry does not fit (the caller then uses weight_grad). */
static em_tensor *weight_grad_im2col(const em_tensor *x, const em_tensor *gy, const em_p_conv *g,
                                     const int64_t *ksize)
{
    if (!x || !gy) return NULL;
    if (g->nd == 1) {
        /* as a 2-D convolution over [N, C, 1, L] with a 1 x k kernel */
        em_p_conv g2 = *g;
        g2.nd = 2;
        g2.stride[0] = g2.dilation[0] = 1;
        g2.pad_lo[0] = g2.pad_hi[0] = 0;
        g2.stride[1] = g->stride[0];
        g2.dilation[1] = g->dilation[0];
        g2.pad_lo[1] = g->pad_lo[0];
        g2.pad_hi[1] = g->pad_hi[0];
        int64_t k2[2] = {1, ksize[0]};
        em_tensor *r = weight_grad_im2col(em_unsqueeze(x, 2), em_unsqueeze(gy, 2), &g2, k2);
        return r ? em_reshape(r, EM_SHAPE(r->shape[0], r->shape[1], ksize[0])) : NULL;
    }
    if (g->nd != 2) return NULL;
    uint64_t mark = core_error_mark();
    em_tensor *st = weight_grad_fused(x, gy, g, ksize);
    if (st || core_failed_since(mark)) return st;
    if (g->pad_lo[0] != g->pad_hi[0] || g->pad_lo[1] != g->pad_hi[1]) return NULL;
    int64_t G = g->groups, N = x->shape[0], C = x->shape[1], Co = gy->shape[1];
    int64_t L = gy->shape[2] * gy->shape[3], kk = ksize[0] * ksize[1];
    for (int d = 0; d < 2; d++) {
        /* the blocks im2col makes must be exactly gy's positions */
        int64_t span = x->shape[2 + d] + 2 * g->pad_lo[d] - g->dilation[d] * (ksize[d] - 1) - 1;
        if (span < 0 || span / g->stride[d] + 1 != gy->shape[2 + d]) return NULL;
    }
    if (N == 0 || L == 0 || C == 0 || Co == 0) return NULL;
    int64_t kern[2] = {ksize[0], ksize[1]}, dil[2] = {g->dilation[0], g->dilation[1]},
            pad[2] = {g->pad_lo[0], g->pad_lo[1]}, str[2] = {g->stride[0], g->stride[1]};
    em_tensor *cols = em_im2col(x, kern, dil, pad, str); /* [N, C*kk, L] */
    if (!cols) return NULL;
    em_tensor *cg = em_reshape(cols, EM_SHAPE(N, G, C / G * kk, L));
    em_tensor *gg = em_reshape(gy, EM_SHAPE(N, G, Co / G, L));
    em_tensor *p = em_matmul(gg, em_transpose(cg, 2, 3)); /* [N, G, Co/G, C/G*kk] */
    em_tensor *s = N == 1 ? p : sum_rows(p, N, Co * (C / G) * kk);
    return em_reshape(s, EM_SHAPE(Co, C / G, ksize[0], ksize[1]));
}

/* The input gradient of a stride-1, ungrouped convolution as a forward convolution of gy with
 * the kernel flipped and its two channel dims swapped, padded by dil * (k - 1) minus the
 * forward's pads: the forward's direct path needs no column buffer and no scatter-add
 * (col2im), which the conv_transpose adjoint does. NULL without an error when the geometry
 * does not fit. */
static em_tensor *input_grad_flipped(const em_tensor *gy, const em_tensor *w, const em_p_conv *g,
                                     const int64_t *ksz)
{
    int nsp = g->nd;
    if (g->groups != 1 || nsp > 2) return NULL;
    em_conv_opts o = {.groups = 1};
    for (int d = 0; d < nsp; d++) {
        int64_t span = g->dilation[d] * (ksz[d] - 1);
        if (g->stride[d] != 1 || span < g->pad_lo[d] || span < g->pad_hi[d]) return NULL;
        o.dilation[d] = g->dilation[d];
        o.pad_lo[d] = span - g->pad_lo[d];
        o.pad_hi[d] = span - g->pad_hi[d];
    }
    em_axes sp = {.n = nsp};
    for (int d = 0; d < nsp; d++) sp.d[d] = 2 + d;
    em_tensor *wf = em_flip(em_transpose(w, 0, 1), sp); /* [C, Co, k...], taps reversed */
    return conv_any(nsp, false, gy, wf, o);
}

/* t with a leading batch dim of 1 when the record was unbatched. */
static em_tensor *batched(em_tensor *t, bool unbatched)
{
    return unbatched ? em_unsqueeze(t, 0) : t;
}

static em_status conv_backward(ad_ctx *c, bool transposed)
{
    const em_op *op = c->op;
    em_p_conv g = op->p.conv;
    int nsp = g.nd;
    em_tensor *x = op->in[0], *w = op->in[1];
    em_tensor *gy = ad_gout(c, 0);
    if (!gy) return em_last_status();
    em_shape xs = ad_in_shape(c, 0), ws = ad_in_shape(c, 1);
    bool unbatched = xs.rank == nsp + 1;
    const int64_t *xsp = xs.dims + xs.rank - nsp, *ksz = ws.dims + 2;
    if (c->needs[0]) {
        em_conv_opts o = {.groups = g.groups};
        for (int d = 0; d < nsp; d++) {
            o.stride[d] = g.stride[d];
            o.pad_lo[d] = g.pad_lo[d];
            o.pad_hi[d] = g.pad_hi[d];
            o.dilation[d] = g.dilation[d];
        }
        if (!transposed) {
            /* conv_transpose with the same weight; out_pad restores the remainder the forward
             * stride dropped */
            for (int d = 0; d < nsp; d++) {
                int64_t lo = gy->shape[gy->rank - nsp + d];
                int64_t base = (lo - 1) * g.stride[d] - g.pad_lo[d] - g.pad_hi[d] +
                               g.dilation[d] * (ksz[d] - 1) + 1;
                o.out_pad[d] = xsp[d] - base;
            }
            c->gin[0] = input_grad_flipped(gy, w, &g, ksz);
            if (!c->gin[0] && ad_status(c) == EM_OK) c->gin[0] = conv_any(nsp, true, gy, w, o);
        } else {
            c->gin[0] = crop(conv_any(nsp, false, gy, w, o), nsp, xsp);
        }
    }
    if (c->needs[1]) {
        em_tensor *xb = batched(x, unbatched), *gb = batched(gy, unbatched);
        if (!xb || !gb) return em_last_status();
        /* conv: gw[co, ci] pairs output with input; conv_transpose: the roles swap */
        const em_tensor *a = transposed ? gb : xb, *b = transposed ? xb : gb;
        c->gin[1] = weight_grad_im2col(a, b, &g, ksz);
        if (!c->gin[1] && ad_status(c) == EM_OK) c->gin[1] = weight_grad(a, b, &g, ksz);
    }
    if (op->n_in > 2 && c->needs[2]) {
        /* gb [N, Co, L]: sums over L (a matrix-vector product), then over N */
        em_tensor *gb = batched(gy, unbatched);
        if (!gb) return em_last_status();
        int64_t N = gb->shape[0], Co = gb->shape[1], L = 1;
        for (int d = 2; d < gb->rank; d++) L *= gb->shape[d];
        if (N * Co * L == 0) {
            em_axes dims = {.n = 0};
            for (int d = 0; d < gb->rank; d++)
                if (d != 1) dims.d[dims.n++] = d;
            c->gin[2] = em_sum(gb, dims, false);
        } else {
            em_tensor *ones = em_ones(EM_SHAPE(L, 1), gb->dtype, em_tensor_device(gb));
            em_tensor *per = em_matmul(em_reshape(gb, EM_SHAPE(N * Co, L)), ones);
            c->gin[2] = N == 1 ? em_reshape(per, EM_SHAPE(Co))
                               : em_reshape(sum_rows(per, N, Co), EM_SHAPE(Co));
        }
    }
    return ad_status(c);
}

/* CONV_WEIGHT_GRAD: gw is bilinear in x and gy; for its upstream gradient gg [Co, C, kh, kw],
 * d/dgy is the forward conv2d of x with gg as weight and d/dx the input gradient of that conv,
 * conv_transpose2d(gy, gg), both with the record's pads, strides and dilations (out_pad gives
 * back the rows and columns of x a stride left out of every window). */
static em_status weight_grad_backward(ad_ctx *c)
{
    const em_op *op = c->op;
    em_tensor *gg = ad_gout(c, 0);
    if (!gg) return em_last_status();
    const em_p_wgrad *wg = &op->p.wgrad;
    em_conv_opts o = {.groups = 1};
    for (int d = 0; d < 2; d++) {
        o.pad_lo[d] = wg->pad_lo[d];
        o.pad_hi[d] = wg->pad_hi[d];
        o.stride[d] = wg->stride[d];
        o.dilation[d] = wg->dilation[d];
        int64_t span = ad_in_shape(c, 0).dims[2 + d] + o.pad_lo[d] + o.pad_hi[d] -
                       o.dilation[d] * (wg->kernel[d] - 1) - 1;
        o.out_pad[d] = span % o.stride[d];
    }
    if (c->needs[0]) c->gin[0] = em_conv_transpose2d(op->in[1], gg, NULL, o);
    o.out_pad[0] = o.out_pad[1] = 0;
    if (c->needs[1]) c->gin[1] = em_conv2d(op->in[0], gg, NULL, o);
    return ad_status(c);
}

em_status ad_rule_conv(ad_ctx *c)
{
    const em_op *op = c->op;
    switch (op->kind) {
    case EM_OP_CONV_WEIGHT_GRAD: return weight_grad_backward(c);
    case EM_OP_CONV: return conv_backward(c, false);
    case EM_OP_CONV_TRANSPOSE: return conv_backward(c, true);
    case EM_OP_IM2COL:
    case EM_OP_COL2IM: {
        if (!c->needs[0]) return EM_OK;
        const em_p_fold *f = &op->p.fold;
        em_tensor *g = ad_gout(c, 0);
        /* each is the other's adjoint with the same parameters */
        c->gin[0] = op->kind == EM_OP_IM2COL
                        ? em_col2im(g, f->image, f->kernel, f->dilation, f->pad, f->stride)
                        : em_im2col(g, f->kernel, f->dilation, f->pad, f->stride);
        return c->gin[0] ? EM_OK : em_last_status();
    }
    default: return ad_no_rule(c);
    }
}
