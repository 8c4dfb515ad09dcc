/* Signal ops: the real FFT and its inverse along one dim, complex values stored as a trailing
 * (real, imaginary) dim of size 2.
 * Records (em_p_fft):
 *   RFFT  in[0] = x [..., L, ...] float, dim, n (points; x is zero-padded or cropped to n along
 *         dim) -> y [..., n/2+1, ..., 2] of x's dtype. Unnormalised forward FFT.
 *   IRFFT in[0] = X [..., B, ..., 2] float, dim (of X without its trailing 2), n
 *         (output points; X is zero-padded or cropped to n/2+1 bins) -> y [..., n, ...], real,
 *         X's dtype; divides by n ("backward" norm). The imaginary parts of the DC bin and, for
 *         even n, of the Nyquist bin are ignored, as pocketfft does. */
#include <string.h>

#include "op.h"

static bool check_float(const char *fn, const em_tensor *x)
{
    if (!em_dtype_is_float(x->dtype)) {
        em_error(EM_ERR_DTYPE, "%s: dtype %s is not supported (float inputs only)", fn,
                 em_dtype_name(x->dtype));
        return false;
    }
    return true;
}

em_tensor *em_rfft(const em_tensor *x, int dim, int64_t n)
{
    const char *fn = "em_rfft";
    if (!tn_check_ptr(fn, x, "x") || !check_float(fn, x)) return NULL;
    if (x->rank == 0) {
        em_error(EM_ERR_SHAPE, "%s: needs a tensor of rank >= 1, got rank 0", fn);
        return NULL;
    }
    if (x->rank >= EM_MAX_RANK) {
        em_error(EM_ERR_SHAPE, "%s: rank %d leaves no room for the complex dim", fn, x->rank);
        return NULL;
    }
    if (!tn_norm_dim(fn, x->rank, &dim)) return NULL;
    if (n <= 0) n = x->shape[dim];
    if (n < 1) {
        em_error(EM_ERR_SHAPE, "%s: invalid number of points %lld along dim %d", fn, (long long)n,
                 dim);
        return NULL;
    }
    int64_t shape[EM_MAX_RANK];
    memcpy(shape, x->shape, sizeof shape);
    shape[dim] = n / 2 + 1;
    shape[x->rank] = 2;
    em_tensor *out = tn_new_for(fn, x->dtype, shape, x->rank + 1, x->storage->device);
    em_params p = {.fft = {.dim = dim, .n = n}};
    em_tensor *in = (em_tensor *)x;
    return tn_run(EM_OP_RFFT, out, &in, 1, &p);
}

em_tensor *em_irfft(const em_tensor *x, int dim, int64_t n)
{
    const char *fn = "em_irfft";
    if (!tn_check_ptr(fn, x, "x") || !check_float(fn, x)) return NULL;
    if (x->rank < 2 || x->shape[x->rank - 1] != 2) {
        em_error(EM_ERR_SHAPE,
                 "%s: input of shape %s is not complex (needs rank >= 2 and a last dim of 2)", fn,
                 tn_dims_str(x->shape, x->rank));
        return NULL;
    }
    int r = x->rank - 1;
    if (!tn_norm_dim(fn, r, &dim)) return NULL;
    if (n <= 0 && !core_mul_ok(2, x->shape[dim] - 1, &n)) n = -1;
    if (n < 1) {
        em_error(EM_ERR_SHAPE, "%s: invalid number of output points %lld from %lld bins", fn,
                 (long long)n, (long long)x->shape[dim]);
        return NULL;
    }
    int64_t shape[EM_MAX_RANK];
    memcpy(shape, x->shape, sizeof shape);
    shape[dim] = n;
    em_tensor *out = tn_new_for(fn, x->dtype, shape, r, x->storage->device);
    em_params p = {.fft = {.dim = dim, .n = n}};
    em_tensor *in = (em_tensor *)x;
    return tn_run(EM_OP_IRFFT, out, &in, 1, &p);
}
