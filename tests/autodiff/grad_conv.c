/* Gradient checks for convolutions (1-D/2-D/3-D, strides, asymmetric padding, dilation, groups,
 * depthwise, bias or none, unbatched), transposed convolutions (out_pad, dilation past the
 * stride), im2col and col2im, the internal conv_weight_grad record; second order for conv2d,
 * conv_transpose2d and conv_weight_grad. */
#include "grad.h"
#include "tensor/op.h"

typedef struct conv_case {
    const char *name;
    int nsp;
    bool transposed;
    em_conv_opts o;
    int64_t x[5], w[5];
    int xr;
    bool bias;
} conv_case;

static em_tensor *f_conv(em_tensor *const *in, int n, void *ctx)
{
    const conv_case *c = ctx;
    const em_tensor *b = n > 2 ? in[2] : NULL;
    em_tensor *y = NULL;
    switch (c->nsp) {
    case 1:
        y = c->transposed ? em_conv_transpose1d(in[0], in[1], b, c->o)
                          : em_conv1d(in[0], in[1], b, c->o);
        break;
    case 2:
        y = c->transposed ? em_conv_transpose2d(in[0], in[1], b, c->o)
                          : em_conv2d(in[0], in[1], b, c->o);
        break;
    default:
        y = c->transposed ? em_conv_transpose3d(in[0], in[1], b, c->o)
                          : em_conv3d(in[0], in[1], b, c->o);
        break;
    }
    return y ? em_mul(y, y) : NULL; /* non-zero second derivatives */
}

static em_shape mk_shape(const int64_t *d, int r)
{
    em_shape s = {.rank = r};
    for (int i = 0; i < r; i++) s.dims[i] = d[i];
    return s;
}

static void run_conv(const conv_case *c, bool second)
{
    for (int l = 0; l < H_LAYOUT_COUNT; l++) {
        em_scope_begin();
        em_tensor *in[3];
        in[0] = g_in(mk_shape(c->x, c->xr), (h_layout)l, -1, 1);
        in[1] = g_in(mk_shape(c->w, c->nsp + 2), (h_layout)((l + 1) % H_LAYOUT_COUNT), -1, 1);
        int64_t cout = c->transposed ? c->w[1] * (c->o.groups ? c->o.groups : 1) : c->w[0];
        if (c->bias) in[2] = g_in(EM_SHAPE(cout), H_CONTIG, -1, 1);
        char what[96];
        snprintf(what, sizeof what, "%s layout %d", c->name, l);
        h_gradcheck(what, f_conv, (void *)c, in, c->bias ? 3 : 2, NULL, 0, 0);
        if (second && l == 0)
            h_gradgradcheck(what, f_conv, (void *)c, in, c->bias ? 3 : 2, NULL, 0, 0);
        em_scope_end();
    }
}

static const conv_case conv_cases[] = {
    {"conv2d pad 1 bias",
     2,
     false,
     {.pad_lo = {1, 1}, .pad_hi = {1, 1}},
     {2, 2, 4, 4},
     {3, 2, 3, 3},
     4,
     true},
    /* stride 1, ungrouped, batch > 1: the stacked-batch weight gradient (kh != kw, pads
     * differing per dim, more output channels than C*kh*kw) */
    {"conv2d stacked 2x3 pad (0, 1)",
     2,
     false,
     {.pad_lo = {0, 1}, .pad_hi = {0, 1}},
     {3, 2, 5, 4},
     {2, 2, 2, 3},
     4,
     false},
    {"conv2d stacked Co > C*k",
     2,
     false,
     {.pad_lo = {1, 1}, .pad_hi = {1, 1}},
     {2, 1, 4, 3},
     {5, 1, 2, 2},
     4,
     true},
    {"conv1d stacked pad 1",
     1,
     false,
     {.pad_lo = {1}, .pad_hi = {1}},
     {3, 2, 7},
     {3, 2, 3},
     3,
     true},
    {"conv2d stride 2 asym pad dil groups 2",
     2,
     false,
     {.stride = {2, 1}, .pad_lo = {1, 0}, .pad_hi = {0, 2}, .dilation = {1, 2}, .groups = 2},
     {1, 4, 5, 5},
     {4, 2, 2, 3},
     4,
     false},
    {"conv2d depthwise stride 2",
     2,
     false,
     {.stride = {2, 2}, .pad_lo = {1, 1}, .pad_hi = {1, 1}, .groups = 2},
     {2, 2, 5, 4},
     {2, 1, 3, 3},
     4,
     true},
    {"conv2d unbatched", 2, false, {.stride = {1, 2}}, {2, 4, 5}, {2, 2, 2, 2}, 3, true},
    {"conv1d stride 2 dil 2 asym pad",
     1,
     false,
     {.stride = {2}, .pad_lo = {2}, .pad_hi = {1}, .dilation = {2}},
     {2, 2, 8},
     {3, 2, 3},
     3,
     true},
    {"conv1d unbatched groups 2",
     1,
     false,
     {.groups = 2, .stride = {3}},
     {4, 9},
     {2, 2, 2},
     2,
     false},
    {"conv3d groups 2 pad",
     3,
     false,
     {.pad_lo = {1, 0, 1}, .pad_hi = {0, 1, 0}, .groups = 2},
     {1, 2, 3, 3, 3},
     {2, 1, 2, 2, 2},
     5,
     true},
    {"conv_transpose2d stride 2 pad out_pad",
     2,
     true,
     {.stride = {2, 2}, .pad_lo = {1, 0}, .pad_hi = {1, 1}, .out_pad = {1, 0}},
     {1, 2, 3, 3},
     {2, 3, 3, 2},
     4,
     true},
    {"conv_transpose2d groups 2 dil 2",
     2,
     true,
     {.stride = {1, 2}, .dilation = {2, 1}, .groups = 2, .out_pad = {1, 1}},
     {2, 4, 2, 3},
     {4, 1, 2, 2},
     4,
     false},
    {"conv_transpose1d unbatched dil 3 out_pad 2",
     1,
     true,
     {.stride = {2}, .dilation = {3}, .out_pad = {2}, .pad_lo = {1}, .pad_hi = {2}},
     {2, 4},
     {2, 2, 3},
     2,
     true},
    {"conv_transpose3d stride 2",
     3,
     true,
     {.stride = {2, 1, 2}, .pad_lo = {0, 1, 0}, .pad_hi = {0, 1, 0}},
     {1, 2, 2, 2, 2},
     {2, 1, 2, 3, 2},
     5,
     true},
};

typedef struct fold_case {
    bool col2im;
    int64_t k[2], d[2], p[2], s[2], img[2];
} fold_case;

static em_tensor *f_fold(em_tensor *const *in, int n, void *ctx)
{
    (void)n;
    const fold_case *c = ctx;
    em_tensor *y = c->col2im ? em_col2im(in[0], c->img, c->k, c->d, c->p, c->s)
                             : em_im2col(in[0], c->k, c->d, c->p, c->s);
    return y ? em_mul(y, y) : NULL;
}

static void run_fold(void)
{
    const fold_case cases[] = {
        {false, {2, 3}, {1, 1}, {1, 0}, {2, 1}, {4, 4}},
        {false, {2, 2}, {2, 1}, {0, 1}, {1, 2}, {4, 3}},
        {true, {2, 3}, {1, 1}, {1, 0}, {2, 1}, {4, 4}},
        {true, {2, 2}, {2, 1}, {0, 1}, {1, 2}, {4, 3}},
    };
    for (int ci = 0; ci < 4; ci++) {
        const fold_case *c = &cases[ci];
        int64_t bh = (c->img[0] + 2 * c->p[0] - c->d[0] * (c->k[0] - 1) - 1) / c->s[0] + 1;
        int64_t bw = (c->img[1] + 2 * c->p[1] - c->d[1] * (c->k[1] - 1) - 1) / c->s[1] + 1;
        for (int batched = 0; batched < 2; batched++)
            for (int l = 0; l < H_LAYOUT_COUNT; l++) {
                em_scope_begin();
                em_shape s = c->col2im ? EM_SHAPE(2, c->k[0] * c->k[1] * 2, bh * bw)
                                       : EM_SHAPE(2, 2, c->img[0], c->img[1]);
                if (!batched) { /* drop the batch dim */
                    for (int i = 0; i + 1 < s.rank; i++) s.dims[i] = s.dims[i + 1];
                    s.rank--;
                }
                em_tensor *x = g_in(s, (h_layout)l, -1, 1);
                char what[96];
                snprintf(what, sizeof what, "%s case %d batched %d layout %d",
                         c->col2im ? "col2im" : "im2col", ci, batched, l);
                h_gradcheck(what, f_fold, (void *)c, &x, 1, NULL, 0, 0);
                if (l == 0 && batched) h_gradgradcheck(what, f_fold, (void *)c, &x, 1, NULL, 0, 0);
                em_scope_end();
            }
    }
}

/* The CONV_WEIGHT_GRAD record (what conv2d's rule emits on the CPU) as a function of x and gy,
 * through its own rule; on the CPU even when the suite runs on another device (where the
 * front-end composes other ops instead). */
typedef struct wgrad_case {
    int64_t x[4], gy[4], k[2], lo[2], hi[2], st[2], dil[2];
} wgrad_case;

static em_tensor *f_wgrad(em_tensor *const *in, int n, void *ctx)
{
    (void)n;
    const wgrad_case *c = ctx;
    em_tensor *g = tn_conv2d_weight_grad(in[0], in[1], c->k, c->st, c->dil, c->lo, c->hi);

    return g ? em_mul(g, g) : NULL;
}

static void run_wgrad(void)
{
    em_device dev = h_dev;
    h_dev = EM_CPU; /* the harness makes inputs and weights on h_dev */
    const wgrad_case cases[] = {
        {{2, 2, 4, 5}, {2, 3, 4, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
        {{3, 1, 5, 4}, {3, 4, 5, 2}, {2, 3}, {1, 0}, {0, 0}, {1, 1}, {1, 1}},
        /* stride 2 x 1 (a row of x in no window), dilation 1 x 2 */
        {{2, 2, 6, 5}, {2, 3, 3, 4}, {2, 2}, {1, 0}, {0, 1}, {2, 1}, {1, 2}},
    };
    for (int ci = 0; ci < 3; ci++) {
        const wgrad_case *c = &cases[ci];
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            em_scope_begin();
            em_tensor *in[2];
            in[0] = g_in(mk_shape(c->x, 4), (h_layout)l, -1, 1);
            in[1] = g_in(mk_shape(c->gy, 4), (h_layout)((l + 1) % H_LAYOUT_COUNT), -1, 1);
            char what[96];
            snprintf(what, sizeof what, "conv_weight_grad case %d layout %d", ci, l);
            h_gradcheck(what, f_wgrad, (void *)c, in, 2, NULL, 0, 0);
            if (l == 0) h_gradgradcheck(what, f_wgrad, (void *)c, in, 2, NULL, 0, 0);
            em_scope_end();
        }
    }
    h_dev = dev;
}

/* f32 inputs get f32 gradients of the inputs' shapes. */
static void run_f32(void)
{
    em_scope_begin();
    em_tensor *x = em_requires_grad(em_rand(EM_SHAPE(1, 2, 4, 4), EM_F32, h_dev), true);
    em_tensor *w = em_requires_grad(em_rand(EM_SHAPE(2, 1, 3, 3), EM_F32, h_dev), true);
    em_tensor *b = em_requires_grad(em_rand(EM_SHAPE(2), EM_F32, h_dev), true);
    em_tensor *y = em_conv2d(x, w, b, (em_conv_opts){.groups = 2, .stride = {2, 2}});
    em_tensor *t = em_conv_transpose2d(y, w, NULL, (em_conv_opts){.groups = 2});
    em_grads *g = em_backward(em_sum(t, EM_ALL, false));
    CHECK(g != NULL, "conv f32 backward failed: %s", em_last_error());
    em_tensor *in[3] = {x, w, b};
    for (int i = 0; g && i < 3; i++) {
        em_tensor *gi = em_grad(g, in[i]);
        CHECK(gi && em_tensor_dtype(gi) == EM_F32 &&
                  em_shape_equal(em_tensor_shape(gi), em_tensor_shape(in[i])),
              "conv f32 gradient %d: wrong dtype or shape", i);
        em_release(gi);
    }
    em_scope_end();
}

void grad_conv(void)
{
    int n = (int)(sizeof conv_cases / sizeof conv_cases[0]);
    for (int i = 0; i < n; i++) {
        bool second = conv_cases[i].nsp == 2;
        run_conv(&conv_cases[i], second);
    }
    run_fold();
    run_wgrad();
    run_f32();
}
