/* Backward rules for the real FFT pair. With W_k the weights of the Hermitian extension (bins
 * other than DC and, for even n, Nyquist stand for two conjugate bins):
 *   rfft:  dx = n * irfft(g * w) with w = 1 at DC/Nyquist and 1/2 elsewhere, then cropped or
 *          zero-padded from n points back to x's length;
 *   irfft: dX = rfft(g) * c / n with c = 1 at DC/Nyquist and 2 elsewhere (the ignored imaginary
 *          parts of DC/Nyquist get 0), then padded or cropped from n/2+1 bins to X's bins. */
#include <stdlib.h>

#include "autodiff_impl.h"

/* t zero-padded (or cropped, for negative amounts) by lo/hi along dim. */
static em_tensor *pad_dim(const em_tensor *t, int dim, int64_t lo, int64_t hi)
{
    if (lo == 0 && hi == 0) return (em_tensor *)t;
    int rank = em_tensor_shape(t).rank, pairs = rank - dim;
    int64_t pads[2 * EM_MAX_RANK] = {0};
    pads[2 * (rank - 1 - dim)] = lo;
    pads[2 * (rank - 1 - dim) + 1] = hi;
    return em_pad(t, pads, pairs, EM_PAD_CONSTANT, 0.0);
}

/* Per-bin weights shaped to broadcast against a complex tensor of `rank` dims (trailing 2
 * included) with `bins` bins at dim: w[k][part] as given by re/im weights for DC, Nyquist
 * (even n only) and the other bins. */
static em_tensor *bin_weights(const em_tensor *like, int rank, int dim, int64_t bins, int64_t n,
                              double edge_re, double edge_im, double mid)
{
    double *w = malloc((size_t)bins * 2 * sizeof *w);
    if (!w) {
        em_error(EM_ERR_OOM, "fft backward: out of memory");
        return NULL;
    }
    for (int64_t k = 0; k < bins; k++) {
        bool edge = k == 0 || (n % 2 == 0 && k == n / 2);
        w[2 * k] = edge ? edge_re : mid;
        w[2 * k + 1] = edge ? edge_im : mid;
    }
    em_shape s = {.rank = rank};
    for (int d = 0; d < rank; d++) s.dims[d] = 1;
    s.dims[dim] = bins;
    s.dims[rank - 1] = 2;
    em_tensor *t = em_from_data(w, EM_F64, s, em_tensor_dtype(like), em_tensor_device(like));
    free(w);
    return t;
}

em_status ad_rule_signal(ad_ctx *c)
{
    const em_op *op = c->op;
    if (op->kind != EM_OP_RFFT && op->kind != EM_OP_IRFFT) return ad_no_rule(c);
    if (!c->needs[0]) return EM_OK;
    em_tensor *g = ad_gout(c, 0);
    if (!g) return em_last_status();
    em_shape in = ad_in_shape(c, 0);
    int dim = op->p.fft.dim;
    int64_t n = op->p.fft.n, bins = n / 2 + 1;
    if (op->kind == EM_OP_RFFT) {
        /* g: [..., bins, ..., 2] -> dx: [..., L, ...] */
        em_tensor *w = bin_weights(g, in.rank + 1, dim, bins, n, 1.0, 1.0, 0.5);
        em_tensor *gw = w ? em_mul(g, w) : NULL;
        em_tensor *y = gw ? em_irfft(gw, dim, n) : NULL;
        em_tensor *dx = y ? em_mul_scalar(y, (double)n) : NULL;
        if (dx) c->gin[0] = pad_dim(dx, dim, 0, in.dims[dim] - n);
    } else {
        /* g: [..., n, ...] -> dX: [..., B, ..., 2] */
        em_tensor *G = em_rfft(g, dim, n);
        em_tensor *w = bin_weights(g, in.rank, dim, bins, n, 1.0 / (double)n, 0.0, 2.0 / (double)n);
        em_tensor *gw = G && w ? em_mul(G, w) : NULL;
        if (gw) c->gin[0] = pad_dim(gw, dim, 0, in.dims[dim] - bins);
    }
    return ad_status(c);
}
