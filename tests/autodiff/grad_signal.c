/* Gradient checks for the real FFT pair: rfft and irfft for even and odd n, padded and cropped
 * n, along the last and a leading dim, over non-contiguous layouts; second order through the
 * squared spectrum. */
#include "grad.h"

typedef struct fft_case {
    bool inverse;
    int dim;
    int64_t n;
    em_shape shape;
} fft_case;

static em_tensor *f_fft(em_tensor *const *in, int n, void *ctx)
{
    (void)n;
    const fft_case *c = ctx;
    em_tensor *y = c->inverse ? em_irfft(in[0], c->dim, c->n) : em_rfft(in[0], c->dim, c->n);
    return y ? em_mul(y, y) : NULL;
}

void grad_signal(void)
{
    const fft_case cases[] = {
        {false, -1, 0, EM_SHAPE(2, 6)},     /* even n */
        {false, 1, 0, EM_SHAPE(2, 5)},      /* odd n */
        {false, 1, 8, EM_SHAPE(2, 6)},      /* zero-padded to 8 */
        {false, 1, 4, EM_SHAPE(2, 6)},      /* cropped to 4 */
        {false, 1, 7, EM_SHAPE(2, 5)},      /* odd, padded */
        {false, 1, 3, EM_SHAPE(2, 6)},      /* odd, cropped */
        {false, 0, 0, EM_SHAPE(5, 3)},      /* a leading dim */
        {false, 1, 6, EM_SHAPE(2, 4, 3)},   /* middle dim, padded */
        {false, 0, 1, EM_SHAPE(3, 2)},      /* one point */
        {true, -1, 0, EM_SHAPE(2, 4, 2)},   /* n = 6 from 4 bins */
        {true, 1, 7, EM_SHAPE(2, 4, 2)},    /* odd n, 4 bins */
        {true, 1, 5, EM_SHAPE(2, 4, 2)},    /* bins cropped to 3 */
        {true, 1, 10, EM_SHAPE(2, 4, 2)},   /* bins zero-padded to 6 */
        {true, 1, 8, EM_SHAPE(2, 4, 2)},    /* even n, bins padded to 5 */
        {true, 0, 0, EM_SHAPE(4, 3, 2)},    /* a leading dim */
        {true, 1, 3, EM_SHAPE(2, 3, 2, 2)}, /* middle dim, cropped */
        {true, 0, 1, EM_SHAPE(2, 3, 2)},    /* one output point */
    };
    const int nc = (int)(sizeof cases / sizeof cases[0]);
    for (int c = 0; c < nc; c++)
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            em_scope_begin();
            em_tensor *x = g_in(cases[c].shape, (h_layout)l, -2, 2);
            char what[64];
            snprintf(what, sizeof what, "%s case %d layout %d", cases[c].inverse ? "irfft" : "rfft",
                     c, l);
            h_gradcheck(what, f_fft, (void *)&cases[c], &x, 1, NULL, 0, 0);
            if (l == 0) h_gradgradcheck(what, f_fft, (void *)&cases[c], &x, 1, NULL, 0, 0);
            em_scope_end();
        }

    /* f32: gradients keep the dtype and the input's shape */
    for (int inv = 0; inv < 2; inv++) {
        em_scope_begin();
        em_shape s = inv ? EM_SHAPE(3, 4, 2) : EM_SHAPE(3, 6);
        em_tensor *x = em_requires_grad(em_rand(s, EM_F32, h_dev), true);
        em_tensor *y = inv ? em_irfft(x, 1, 5) : em_rfft(x, 1, 8);
        em_tensor *l = y ? em_sum(em_mul(y, y), EM_ALL, false) : NULL;
        em_grads *g = l ? em_backward(l) : NULL;
        em_tensor *gx = g ? em_grad(g, x) : NULL;
        CHECK(gx && em_tensor_dtype(gx) == EM_F32 && em_tensor_numel(gx) == em_tensor_numel(x),
              "%s: f32 input gets an f32 gradient of its shape", inv ? "irfft" : "rfft");
        em_release(gx);
        CHECK_OK("fft f32");
        em_scope_end();
    }
}
