/* Convolution front-ends: conv1d/2d/3d, their transposes, im2col (unfold) and col2im (fold).
 *
 * IR records:
 * CONV, CONV_TRANSPOSE: in[0] = x [N, C, spatial...] or unbatched [C, spatial...] (the output
 *   is then unbatched too), in[1] = w ([Cout, C/groups, k...] for CONV, [Cin, Cout/groups, k...]
 *   for CONV_TRANSPOSE), in[2] = bias [Cout] (n_in 3) or absent (n_in 2). All of one float
 *   dtype. em_p_conv: nd spatial dims (1..3); per spatial dim d < 3 (entries past nd hold the
 *   defaults) stride, pad_lo, pad_hi, dilation, out_pad (0 for CONV); groups. Kernel sizes come
 *   from w's shape, output sizes from out[0]'s shape.
 * IM2COL: in[0] = x [N, C, H, W] or [C, H, W] -> [N, C*kh*kw, L] or [C*kh*kw, L], L the number
 *   of blocks (torch.nn.functional.unfold). COL2IM: in[0] = cols [N, C*kh*kw, L] or
 *   [C*kh*kw, L] -> [N, C, H, W] or [C, H, W], summing overlapping blocks (F.fold, the adjoint
 *   of IM2COL). Both em_p_fold: kernel (kh, kw), dilation, padding (both sides), stride, image
 *   size (H, W): the input's for IM2COL, the output's for COL2IM.
 * CONV_WEIGHT_GRAD (tn_conv2d_weight_grad, internal: the conv rule's weight gradient): in[0] =
 *   x [N, C, H, W], in[1] = gy [N, Co, OH, OW], one float dtype -> gw [Co, C, kh, kw],
 *   gw[co, c, a, b] = sum_{n, oh, ow} gy[n, co, oh, ow] * x[n, c, oh sh + a dh - pt,
 *   ow sw + b dw - pl] (0 outside x): the weight gradient of an ungrouped conv2d. em_p_wgrad:
 *   kernel (kh, kw), pad_lo (pt, pl), pad_hi, stride (sh, sw), dilation (dh, dw); OH = (H + pt +
 *   pad_hi[0] - dh (kh - 1) - 1) / sh + 1, OW likewise.
 */
#include <string.h>

#include "op.h"

static bool conv_dtype_ok(const char *fn, const em_tensor *t, const char *what, const em_tensor *x)
{
    if (t->dtype != EM_F64 && t->dtype != EM_F32 && t->dtype != EM_F16 && t->dtype != EM_BF16) {
        em_error(EM_ERR_DTYPE, "%s: %s dtype %s is not supported (float dtypes only)", fn, what,
                 em_dtype_name(t->dtype));
        return false;
    }
    if (x && t->dtype != x->dtype) {
        em_error(EM_ERR_DTYPE, "%s: %s dtype %s differs from the input's dtype %s", fn, what,
                 em_dtype_name(t->dtype), em_dtype_name(x->dtype));
        return false;
    }
    return true;
}

/* Resolves one option array: 0 -> def, negative -> error. */
static bool conv_opt(const char *fn, const char *name, const int64_t *src, int64_t *dst, int nsp,
                     int64_t def, bool zero_is_default)
{
    for (int d = 0; d < 3; d++) {
        int64_t v = d < nsp ? src[d] : 0;
        if (v < 0) {
            em_error(EM_ERR_INVALID_ARG, "%s: %s[%d] is %lld; it must not be negative", fn, name, d,
                     (long long)v);
            return false;
        }
        dst[d] = (v == 0 && zero_is_default) ? def : v;
    }
    return true;
}

static em_tensor *conv_nd(const char *fn, int nsp, bool transposed, const em_tensor *x,
                          const em_tensor *w, const em_tensor *bias, em_conv_opts o)
{
    if (!tn_check_ptr(fn, x, "x") || !tn_check_ptr(fn, w, "w")) return NULL;
    if (!conv_dtype_ok(fn, x, "input", NULL) || !conv_dtype_ok(fn, w, "weight", x)) return NULL;
    if (bias && !conv_dtype_ok(fn, bias, "bias", x)) return NULL;
    if (x->rank != nsp + 2 && x->rank != nsp + 1) {
        em_error(EM_ERR_SHAPE, "%s: input must have rank %d (batched) or %d (unbatched), got %s",
                 fn, nsp + 2, nsp + 1, tn_dims_str(x->shape, x->rank));
        return NULL;
    }
    if (w->rank != nsp + 2) {
        em_error(EM_ERR_SHAPE, "%s: weight must have rank %d ([%s, %s, kernel...]), got %s", fn,
                 nsp + 2, transposed ? "Cin" : "Cout", transposed ? "Cout/groups" : "C/groups",
                 tn_dims_str(w->shape, w->rank));
        return NULL;
    }
    int64_t stride[3], plo[3], phi[3], dil[3], opad[3];
    if (!conv_opt(fn, "stride", o.stride, stride, nsp, 1, true) ||
        !conv_opt(fn, "pad_lo", o.pad_lo, plo, nsp, 0, true) ||
        !conv_opt(fn, "pad_hi", o.pad_hi, phi, nsp, 0, true) ||
        !conv_opt(fn, "dilation", o.dilation, dil, nsp, 1, true) ||
        !conv_opt(fn, "out_pad", o.out_pad, opad, nsp, 0, true))
        return NULL;
    if (o.groups < 0) {
        em_error(EM_ERR_INVALID_ARG, "%s: groups is %lld; it must not be negative", fn,
                 (long long)o.groups);
        return NULL;
    }
    int64_t groups = o.groups ? o.groups : 1;
    if (!transposed) {
        for (int d = 0; d < nsp; d++) {
            if (opad[d] != 0) {
                em_error(EM_ERR_INVALID_ARG,
                         "%s: out_pad[%d] is %lld; it applies only to "
                         "transposed convolutions",
                         fn, d, (long long)opad[d]);
                return NULL;
            }
        }
    }

    bool batched = x->rank == nsp + 2;
    int cdim = batched ? 1 : 0;
    int64_t c_in = x->shape[cdim];
    int64_t c_out;
    if (c_in % groups != 0) {
        em_error(EM_ERR_SHAPE, "%s: groups %lld does not divide the %lld input channels", fn,
                 (long long)groups, (long long)c_in);
        return NULL;
    }
    if (!transposed) {
        c_out = w->shape[0];
        if (c_out % groups != 0) {
            em_error(EM_ERR_SHAPE,
                     "%s: groups %lld does not divide the %lld output channels "
                     "(weight %s)",
                     fn, (long long)groups, (long long)c_out, tn_dims_str(w->shape, w->rank));
            return NULL;
        }
        int64_t expect = 0;
        if (!core_mul_ok(w->shape[1], groups, &expect)) expect = -1; /* matches no count */
        if (expect != c_in) {
            em_error(EM_ERR_SHAPE, "%s: input has %lld channels, weight expects %lld (groups %lld)",
                     fn, (long long)c_in, (long long)expect, (long long)groups);
            return NULL;
        }
    } else {
        if (w->shape[0] != c_in) {
            em_error(EM_ERR_SHAPE,
                     "%s: input has %lld channels, weight expects %lld (weight %s, "
                     "groups %lld)",
                     fn, (long long)c_in, (long long)w->shape[0], tn_dims_str(w->shape, w->rank),
                     (long long)groups);
            return NULL;
        }
        if (!core_mul_ok(w->shape[1], groups, &c_out)) {
            em_error(EM_ERR_SHAPE, "%s: weight %s with groups %lld has too many output channels",
                     fn, tn_dims_str(w->shape, w->rank), (long long)groups);
            return NULL;
        }
    }
    if (bias && (bias->rank != 1 || bias->shape[0] != c_out)) {
        em_error(EM_ERR_SHAPE, "%s: bias must have shape [%lld] (the output channels), got %s", fn,
                 (long long)c_out, tn_dims_str(bias->shape, bias->rank));
        return NULL;
    }

    int64_t shape[EM_MAX_RANK];
    /* what kernels may materialise: the zero-padded input (the uncropped output when
       transposed) and the columns [C, k..., positions...] of an im2col */
    int64_t padded_shape[EM_MAX_RANK], cols[EM_MAX_RANK];
    int r = 0, rp = 0, rc = 0;
    if (batched) shape[r++] = x->shape[0], padded_shape[rp++] = x->shape[0];
    shape[r++] = c_out;
    padded_shape[rp++] = transposed ? c_out : c_in;
    cols[rc++] = transposed ? c_out : c_in;
    for (int d = 0; d < nsp; d++) cols[rc++] = w->shape[2 + d];
    for (int d = 0; d < nsp; d++) {
        int64_t len = x->shape[cdim + 1 + d], k = w->shape[2 + d];
        if (k <= 0) {
            em_error(EM_ERR_SHAPE, "%s: weight %s has an empty kernel along spatial dim %d", fn,
                     tn_dims_str(w->shape, w->rank), d);
            return NULL;
        }
        int64_t span, padded = 0, n;
        bool fits = core_muladd_ok(dil[d], k - 1, 1, &span) && span <= TN_GEOM_MAX &&
                    stride[d] <= TN_GEOM_MAX && plo[d] <= TN_GEOM_MAX && phi[d] <= TN_GEOM_MAX;
        if (!transposed) {
            fits = fits && core_add_ok(len, plo[d], &padded) &&
                   core_add_ok(padded, phi[d], &padded) && padded <= TN_GEOM_MAX;
            padded_shape[rp++] = padded;
            n = fits && padded >= span ? (padded - span) / stride[d] + 1 : 0;
            if (!fits) {
                em_error(EM_ERR_INVALID_ARG,
                         "%s: input size %lld, kernel %lld (dilation %lld), padding %lld+%lld and "
                         "stride %lld pass 2^62 along spatial dim %d",
                         fn, (long long)len, (long long)k, (long long)dil[d], (long long)plo[d],
                         (long long)phi[d], (long long)stride[d], d);
                return NULL;
            }
            if (n <= 0) {
                em_error(EM_ERR_SHAPE,
                         "%s: output size %lld along spatial dim %d: input size "
                         "%lld, kernel %lld (dilation %lld), padding %lld+%lld, stride %lld",
                         fn, (long long)n, d, (long long)len, (long long)k, (long long)dil[d],
                         (long long)plo[d], (long long)phi[d], (long long)stride[d]);
                return NULL;
            }
        } else {
            int64_t lim = stride[d] > dil[d] ? stride[d] : dil[d];
            if (opad[d] >= lim) {
                em_error(EM_ERR_INVALID_ARG,
                         "%s: out_pad[%d] is %lld; it must be smaller than "
                         "stride %lld or dilation %lld",
                         fn, d, (long long)opad[d], (long long)stride[d], (long long)dil[d]);
                return NULL;
            }
            /* (len - 1) stride + span + out_pad - pad_lo - pad_hi, the uncropped part checked */
            int64_t full = 0;
            fits = fits && len > 0 && core_mul_ok(len - 1, stride[d], &full) &&
                   core_add_ok(full, span, &full) && core_add_ok(full, opad[d], &full) &&
                   full <= TN_GEOM_MAX;
            n = fits ? full - plo[d] - phi[d] : 0;
            padded_shape[rp++] = full;
            if (len > 0 && !fits) {
                em_error(EM_ERR_INVALID_ARG,
                         "%s: input size %lld, kernel %lld (dilation %lld), stride %lld, "
                         "padding %lld+%lld and out_pad %lld pass 2^62 along spatial dim %d",
                         fn, (long long)len, (long long)k, (long long)dil[d], (long long)stride[d],
                         (long long)plo[d], (long long)phi[d], (long long)opad[d], d);
                return NULL;
            }
            if (len <= 0 || n <= 0) {
                em_error(EM_ERR_SHAPE,
                         "%s: output size %lld along spatial dim %d: input size "
                         "%lld, kernel %lld (dilation %lld), padding %lld+%lld, stride %lld, "
                         "out_pad %lld",
                         fn, (long long)(len <= 0 ? 0 : n), d, (long long)len, (long long)k,
                         (long long)dil[d], (long long)plo[d], (long long)phi[d],
                         (long long)stride[d], (long long)opad[d]);
                return NULL;
            }
        }
        shape[r++] = n;
        cols[rc + d] = transposed ? len : n;
    }
    rc += nsp;
    em_dtype work = em_dtype_size(x->dtype) < 4 ? EM_F32 : x->dtype; /* f16/bf16 work in f32 */
    if (!tn_check_work(fn, transposed ? "the uncropped output" : "the padded input", work,
                       padded_shape, rp, x->storage->device) ||
        !tn_check_work(fn, "the im2col columns", work, cols, rc, x->storage->device))
        return NULL;

    em_params p = {.conv = {.nd = nsp, .groups = groups}};
    for (int d = 0; d < 3; d++) {
        p.conv.stride[d] = stride[d];
        p.conv.pad_lo[d] = plo[d];
        p.conv.pad_hi[d] = phi[d];
        p.conv.dilation[d] = dil[d];
        p.conv.out_pad[d] = opad[d];
    }
    em_tensor *in[3] = {(em_tensor *)x, (em_tensor *)w, (em_tensor *)bias};
    em_tensor *out = tn_new_for(fn, x->dtype, shape, r, x->storage->device);
    return tn_run(transposed ? EM_OP_CONV_TRANSPOSE : EM_OP_CONV, out, in, bias ? 3 : 2, &p);
}

em_tensor *em_conv1d(const em_tensor *x, const em_tensor *w, const em_tensor *bias, em_conv_opts o)
{
    return conv_nd("em_conv1d", 1, false, x, w, bias, o);
}

em_tensor *em_conv2d(const em_tensor *x, const em_tensor *w, const em_tensor *bias, em_conv_opts o)
{
    return conv_nd("em_conv2d", 2, false, x, w, bias, o);
}

em_tensor *em_conv3d(const em_tensor *x, const em_tensor *w, const em_tensor *bias, em_conv_opts o)
{
    return conv_nd("em_conv3d", 3, false, x, w, bias, o);
}

em_tensor *em_conv_transpose1d(const em_tensor *x, const em_tensor *w, const em_tensor *bias,
                               em_conv_opts o)
{
    return conv_nd("em_conv_transpose1d", 1, true, x, w, bias, o);
}

em_tensor *em_conv_transpose2d(const em_tensor *x, const em_tensor *w, const em_tensor *bias,
                               em_conv_opts o)
{
    return conv_nd("em_conv_transpose2d", 2, true, x, w, bias, o);
}

em_tensor *em_conv_transpose3d(const em_tensor *x, const em_tensor *w, const em_tensor *bias,
                               em_conv_opts o)
{
    return conv_nd("em_conv_transpose3d", 3, true, x, w, bias, o);
}

/* Fills *fp from the fold/unfold arguments (NULL or 0 dilation/stride mean 1, NULL padding
 * means 0; the image size img) and computes the blocks per dim; false + error naming fn. */
static bool fold_params(const char *fn, const int64_t kernel[2], const int64_t dilation[2],
                        const int64_t padding[2], const int64_t stride[2], const int64_t img[2],
                        em_p_fold *fp, int64_t blocks[2])
{
    if (!kernel) {
        em_error(EM_ERR_INVALID_ARG, "%s: argument `kernel` is NULL", fn);
        return false;
    }
    for (int d = 0; d < 2; d++) {
        int64_t k = kernel[d], dl = dilation ? dilation[d] : 1, p = padding ? padding[d] : 0,
                s = stride ? stride[d] : 1;
        if (dl == 0) dl = 1;
        if (s == 0) s = 1;
        if (k <= 0 || dl < 0 || p < 0 || s < 0) {
            em_error(EM_ERR_INVALID_ARG,
                     "%s: bad parameters along dim %d: kernel %lld, dilation "
                     "%lld, padding %lld, stride %lld (kernel must be positive, the others not "
                     "negative)",
                     fn, d, (long long)k, (long long)dl, (long long)p, (long long)s);
            return false;
        }
        fp->kernel[d] = k;
        fp->dilation[d] = dl;
        fp->pad[d] = p;
        fp->stride[d] = s;
        fp->image[d] = img[d];
        int64_t span = 0, padded = 0;
        if (!core_muladd_ok(dl, k - 1, 1, &span) || !core_muladd_ok(2, p, img[d], &padded) ||
            span > TN_GEOM_MAX || padded > TN_GEOM_MAX || s > TN_GEOM_MAX) {
            em_error(EM_ERR_INVALID_ARG,
                     "%s: image size %lld, kernel %lld (dilation %lld), padding %lld and stride "
                     "%lld pass 2^62 along dim %d",
                     fn, (long long)img[d], (long long)k, (long long)dl, (long long)p, (long long)s,
                     d);
            return false;
        }
        blocks[d] = padded >= span ? (padded - span) / s + 1 : 0;
        if (blocks[d] <= 0) {
            em_error(EM_ERR_SHAPE,
                     "%s: no blocks along dim %d: image size %lld, kernel %lld "
                     "(dilation %lld), padding %lld, stride %lld",
                     fn, d, (long long)img[d], (long long)k, (long long)dl, (long long)p,
                     (long long)s);
            return false;
        }
    }
    return true;
}

em_tensor *em_im2col(const em_tensor *x, const int64_t kernel[2], const int64_t dilation[2],
                     const int64_t padding[2], const int64_t stride[2])
{
    const char *fn = "em_im2col";
    if (!tn_check_ptr(fn, x, "x") || !conv_dtype_ok(fn, x, "input", NULL)) return NULL;
    if (x->rank != 4 && x->rank != 3) {
        em_error(EM_ERR_SHAPE, "%s: input must be [N, C, H, W] or [C, H, W], got %s", fn,
                 tn_dims_str(x->shape, x->rank));
        return NULL;
    }
    int b = x->rank == 4;
    em_params p;
    int64_t blocks[2], img[2] = {x->shape[b + 1], x->shape[b + 2]};
    if (img[0] <= 0 || img[1] <= 0) {
        em_error(EM_ERR_SHAPE, "%s: input %s has an empty image", fn,
                 tn_dims_str(x->shape, x->rank));
        return NULL;
    }
    if (!fold_params(fn, kernel, dilation, padding, stride, img, &p.fold, blocks)) return NULL;
    const int64_t *kn = p.fold.kernel;
    int64_t shape[3], rows, len;
    int r = 0;
    if (!core_mul_ok(x->shape[b], kn[0], &rows) || !core_mul_ok(rows, kn[1], &rows) ||
        !core_mul_ok(blocks[0], blocks[1], &len)) {
        em_error(EM_ERR_SHAPE, "%s: kernel [%lld, %lld] over input %s gives too large a result", fn,
                 (long long)kn[0], (long long)kn[1], tn_dims_str(x->shape, x->rank));
        return NULL;
    }
    if (b) shape[r++] = x->shape[0];
    shape[r++] = rows;
    shape[r++] = len;
    em_tensor *in[1] = {(em_tensor *)x};
    return tn_run(EM_OP_IM2COL, tn_new_for(fn, x->dtype, shape, r, x->storage->device), in, 1, &p);
}

em_tensor *em_col2im(const em_tensor *cols, const int64_t out_size[2], const int64_t kernel[2],
                     const int64_t dilation[2], const int64_t padding[2], const int64_t stride[2])
{
    const char *fn = "em_col2im";
    if (!tn_check_ptr(fn, cols, "cols") || !conv_dtype_ok(fn, cols, "input", NULL)) return NULL;
    if (!out_size) {
        em_error(EM_ERR_INVALID_ARG, "%s: argument `out_size` is NULL", fn);
        return NULL;
    }
    if (cols->rank != 3 && cols->rank != 2) {
        em_error(EM_ERR_SHAPE, "%s: input must be [N, C*kh*kw, L] or [C*kh*kw, L], got %s", fn,
                 tn_dims_str(cols->shape, cols->rank));
        return NULL;
    }
    if (out_size[0] < 0 || out_size[1] < 0) {
        em_error(EM_ERR_INVALID_ARG, "%s: negative out_size [%lld, %lld]", fn,
                 (long long)out_size[0], (long long)out_size[1]);
        return NULL;
    }
    int b = cols->rank == 3;
    em_params p;
    int64_t blocks[2];
    if (!fold_params(fn, kernel, dilation, padding, stride, out_size, &p.fold, blocks)) return NULL;
    const int64_t *kn = p.fold.kernel;
    int64_t kk, nblocks, rows = cols->shape[b], len = cols->shape[b + 1];
    /* a product past int64_t is larger than any dim: no match */
    if (!core_mul_ok(kn[0], kn[1], &kk)) kk = INT64_MAX;
    if (!core_mul_ok(blocks[0], blocks[1], &nblocks)) nblocks = -1;
    if (rows % kk != 0) {
        em_error(EM_ERR_SHAPE,
                 "%s: input %s: dim %d (%lld) is not a multiple of the kernel "
                 "size %lld*%lld",
                 fn, tn_dims_str(cols->shape, cols->rank), b, (long long)rows, (long long)kn[0],
                 (long long)kn[1]);
        return NULL;
    }
    if (len != nblocks) {
        em_error(EM_ERR_SHAPE,
                 "%s: input %s has %lld blocks, but out_size [%lld, %lld] with "
                 "kernel [%lld, %lld] gives %lld*%lld",
                 fn, tn_dims_str(cols->shape, cols->rank), (long long)len, (long long)out_size[0],
                 (long long)out_size[1], (long long)kn[0], (long long)kn[1], (long long)blocks[0],
                 (long long)blocks[1]);
        return NULL;
    }
    int64_t shape[4];
    int r = 0;
    if (b) shape[r++] = cols->shape[0];
    shape[r++] = rows / kk;
    shape[r++] = out_size[0];
    shape[r++] = out_size[1];
    em_tensor *in[1] = {(em_tensor *)cols};
    return tn_run(EM_OP_COL2IM, tn_new_for(fn, cols->dtype, shape, r, cols->storage->device), in, 1,
                  &p);
}

em_tensor *tn_conv2d_weight_grad(const em_tensor *x, const em_tensor *gy, const int64_t k[2],
                                 const int64_t stride_in[2], const int64_t dil_in[2],
                                 const int64_t pad_lo[2], const int64_t pad_hi[2])
{
    int64_t stride[2] = {stride_in ? stride_in[0] : 1, stride_in ? stride_in[1] : 1};
    int64_t dil[2] = {dil_in ? dil_in[0] : 1, dil_in ? dil_in[1] : 1};
    const char *fn = "conv_weight_grad";
    if (!tn_check_ptr(fn, x, "x") || !tn_check_ptr(fn, gy, "gy")) return NULL;
    if (!conv_dtype_ok(fn, x, "input", NULL) || !conv_dtype_ok(fn, gy, "output gradient", x))
        return NULL;
    if (x->rank != 4 || gy->rank != 4 || gy->shape[0] != x->shape[0]) {
        em_error(EM_ERR_SHAPE, "%s: x %s and gy %s must be [N, C, H, W] and [N, Co, OH, OW]", fn,
                 tn_dims_str(x->shape, x->rank), tn_dims_str(gy->shape, gy->rank));
        return NULL;
    }
    for (int d = 0; d < 2; d++) {
        int64_t span = x->shape[2 + d] + pad_lo[d] + pad_hi[d] - dil[d] * (k[d] - 1) - 1;
        bool ok = k[d] >= 1 && stride[d] >= 1 && dil[d] >= 1 && pad_lo[d] >= 0 && pad_hi[d] >= 0;
        if (!ok || span < 0 || gy->shape[2 + d] != span / stride[d] + 1) {
            em_error(EM_ERR_SHAPE,
                     "%s: kernel %lld, stride %lld, dilation %lld, pads (%lld, %lld) over x %s do "
                     "not give gy %s (dim %d)",
                     fn, (long long)k[d], (long long)stride[d], (long long)dil[d],
                     (long long)pad_lo[d], (long long)pad_hi[d], tn_dims_str(x->shape, x->rank),
                     tn_dims_str(gy->shape, gy->rank), d);
            return NULL;
        }
    }
    int64_t shape[4] = {gy->shape[1], x->shape[1], k[0], k[1]};
    em_op op;
    memset(&op, 0, sizeof op);
    op.kind = EM_OP_CONV_WEIGHT_GRAD;
    op.n_in = 2, op.n_out = 1;
    op.in[0] = (em_tensor *)x, op.in[1] = (em_tensor *)gy;
    em_p_wgrad *wg = &op.p.wgrad;
    for (int d = 0; d < 2; d++) {
        wg->kernel[d] = k[d], wg->pad_lo[d] = pad_lo[d], wg->pad_hi[d] = pad_hi[d];
        wg->stride[d] = stride[d], wg->dilation[d] = dil[d];
    }
    op.out[0] = tn_new(x->dtype, shape, 4, x->storage->device);
    return tn_dispatch(&op) == EM_OK ? op.out[0] : NULL;
}
