/* Gradient checks for max/avg pooling (1-D/2-D/3-D, padding, dilation, ceil_mode, the
 * count_include_pad rule, unbatched; the values-only and the indexed kinds), adaptive pooling,
 * interpolation (nearest, linear, bilinear, bicubic, align_corners both ways, up and down) and
 * pixel (un)shuffle; second order for avg_pool2d, interpolate and pixel shuffle. */
#include "grad.h"

typedef enum pool_kind {
    P_MAX,
    P_MAXI,
    P_AVG,
    P_AMAX,
    P_AAVG,
    P_INTERP,
    P_SHUF,
    P_UNSHUF
} pool_kind;

typedef struct pool_case {
    const char *name;
    pool_kind kind;
    int nd;
    em_pool_opts o;
    int64_t out[3]; /* adaptive / interpolate sizes */
    em_interp_mode mode;
    bool align;
    int64_t r;
    int64_t x[5];
    int xr;
    bool second;
} pool_case;

static em_tensor *f_pool(em_tensor *const *in, int n, void *ctx)
{
    (void)n;
    const pool_case *c = ctx;
    const em_tensor *x = in[0];
    em_tensor *y = NULL;
    switch (c->kind) {
    case P_MAX:
        y = c->nd == 1   ? em_max_pool1d(x, c->o, NULL)
            : c->nd == 2 ? em_max_pool2d(x, c->o, NULL)
                         : em_max_pool3d(x, c->o, NULL);
        break;
    case P_MAXI: { /* the indexed kind: gradients through the kept indices */
        em_tensor *idx = NULL;
        y = c->nd == 1   ? em_max_pool1d(x, c->o, &idx)
            : c->nd == 2 ? em_max_pool2d(x, c->o, &idx)
                         : em_max_pool3d(x, c->o, &idx);
        em_release(idx);
        break;
    }
    case P_AVG:
        y = c->nd == 1   ? em_avg_pool1d(x, c->o)
            : c->nd == 2 ? em_avg_pool2d(x, c->o)
                         : em_avg_pool3d(x, c->o);
        break;
    case P_AMAX:
        y = c->nd == 1 ? em_adaptive_max_pool1d(x, c->out[0], NULL)
                       : em_adaptive_max_pool2d(x, c->out[0], c->out[1], NULL);
        break;
    case P_AAVG:
        y = c->nd == 1 ? em_adaptive_avg_pool1d(x, c->out[0])
                       : em_adaptive_avg_pool2d(x, c->out[0], c->out[1]);
        break;
    case P_INTERP: {
        em_shape s = {.rank = c->nd, .dims = {c->out[0], c->out[1]}};
        y = em_interpolate(x, s, c->mode, c->align);
        break;
    }
    case P_SHUF: y = em_pixel_shuffle(x, c->r); break;
    case P_UNSHUF: y = em_pixel_unshuffle(x, c->r); break;
    }
    return y ? em_mul(y, y) : NULL; /* non-zero second derivatives */
}

static const pool_case cases[] = {
    /* max pooling (random inputs: ties have probability zero) */
    {"max_pool2d k2", P_MAX, 2, {.kernel = {2, 2}}, .x = {2, 2, 4, 5}, .xr = 4, .second = true},
    {"max_pool2d k2 indexed",
     P_MAXI,
     2,
     {.kernel = {2, 2}},
     .x = {2, 2, 4, 5},
     .xr = 4,
     .second = true},
    {"max_pool2d k3 s1 pad 1 dil 2 indexed",
     P_MAXI,
     2,
     {.kernel = {3, 3}, .stride = {1, 1}, .pad = {1, 1}, .dilation = {2, 1}},
     .x = {1, 2, 7, 6},
     .xr = 4},
    {"max_pool1d k2 indexed", P_MAXI, 1, {.kernel = {2}}, .x = {2, 3, 7}, .xr = 3},
    {"max_pool2d k3 s2 pad 1 ceil",
     P_MAX,
     2,
     {.kernel = {3, 3}, .stride = {2, 2}, .pad = {1, 1}, .ceil_mode = true},
     .x = {1, 2, 5, 6},
     .xr = 4},
    {"max_pool2d dil 2 unbatched",
     P_MAX,
     2,
     {.kernel = {2, 2}, .stride = {1, 2}, .dilation = {2, 1}},
     .x = {2, 5, 5},
     .xr = 3},
    {"max_pool1d k3 s1 pad 1",
     P_MAX,
     1,
     {.kernel = {3}, .stride = {1}, .pad = {1}},
     .x = {2, 2, 6},
     .xr = 3},
    {"max_pool3d k2",
     P_MAX,
     3,
     {.kernel = {2, 2, 2}, .stride = {1, 2, 2}},
     .x = {1, 2, 3, 4, 4},
     .xr = 5},
    /* average pooling */
    {"avg_pool2d k2", P_AVG, 2, {.kernel = {2, 2}}, .x = {2, 2, 4, 5}, .xr = 4, .second = true},
    {"avg_pool2d k3 s2 pad 1 include pad",
     P_AVG,
     2,
     {.kernel = {3, 3}, .stride = {2, 2}, .pad = {1, 1}},
     .x = {1, 2, 5, 6},
     .xr = 4,
     .second = true},
    {"avg_pool2d k3 s2 pad 1 ceil include pad",
     P_AVG,
     2,
     {.kernel = {3, 2}, .stride = {2, 2}, .pad = {1, 1}, .ceil_mode = true},
     .x = {1, 2, 6, 5},
     .xr = 4},
    {"avg_pool2d k3 s2 pad 1 ceil exclude pad",
     P_AVG,
     2,
     {.kernel = {3, 2}, .stride = {2, 2}, .pad = {1, 1}, .ceil_mode = true, .exclude_pad = true},
     .x = {1, 2, 6, 5},
     .xr = 4},
    {"avg_pool2d dil 2 unbatched",
     P_AVG,
     2,
     {.kernel = {2, 2}, .stride = {1, 1}, .dilation = {2, 1}},
     .x = {2, 4, 4},
     .xr = 3},
    {"avg_pool1d k3 s2 ceil exclude pad",
     P_AVG,
     1,
     {.kernel = {3}, .stride = {2}, .pad = {1}, .ceil_mode = true, .exclude_pad = true},
     .x = {2, 2, 6},
     .xr = 3},
    {"avg_pool3d k2 pad 1",
     P_AVG,
     3,
     {.kernel = {2, 2, 2}, .stride = {2, 1, 2}, .pad = {1, 0, 1}},
     .x = {1, 2, 3, 3, 4},
     .xr = 5},
    /* adaptive */
    {"adaptive_max_pool2d 5x4->3x2", P_AMAX, 2, .out = {3, 2}, .x = {2, 2, 5, 4}, .xr = 4},
    {"adaptive_max_pool1d 7->3 unbatched", P_AMAX, 1, .out = {3}, .x = {2, 7}, .xr = 2},
    {"adaptive_avg_pool2d 5x4->3x3", P_AAVG, 2, .out = {3, 3}, .x = {2, 2, 5, 4}, .xr = 4,
     .second = true},
    {"adaptive_avg_pool1d 7->3", P_AAVG, 1, .out = {3}, .x = {2, 2, 7}, .xr = 3},
    {"adaptive_avg_pool2d 3x2->5x3 unbatched", P_AAVG, 2, .out = {5, 3}, .x = {2, 3, 2}, .xr = 3},
    {"adaptive_max_pool2d 3x3->4x2", P_AMAX, 2, .out = {4, 2}, .x = {1, 2, 3, 3}, .xr = 4,
     .second = true},
    /* interpolation */
    {"interpolate nearest up 2-D", P_INTERP, 2, .out = {5, 7}, .mode = EM_INTERP_NEAREST,
     .x = {1, 2, 3, 4}, .xr = 4},
    {"interpolate nearest down 1-D", P_INTERP, 1, .out = {3}, .mode = EM_INTERP_NEAREST,
     .x = {2, 2, 7}, .xr = 3},
    {"interpolate bilinear up", P_INTERP, 2, .out = {5, 6}, .mode = EM_INTERP_BILINEAR,
     .x = {1, 2, 3, 4}, .xr = 4, .second = true},
    {"interpolate bilinear down align", P_INTERP, 2, .out = {2, 3}, .mode = EM_INTERP_BILINEAR,
     .align = true, .x = {2, 1, 4, 5}, .xr = 4, .second = true},
    {"interpolate bilinear down", P_INTERP, 2, .out = {3, 2}, .mode = EM_INTERP_BILINEAR,
     .x = {2, 1, 5, 5}, .xr = 4},
    {"interpolate linear 1-D align", P_INTERP, 1, .out = {7}, .mode = EM_INTERP_BILINEAR,
     .align = true, .x = {2, 2, 4}, .xr = 3},
    {"interpolate linear 1-D", P_INTERP, 1, .out = {3}, .mode = EM_INTERP_BILINEAR, .x = {2, 2, 5},
     .xr = 3},
    {"interpolate bicubic up", P_INTERP, 2, .out = {5, 6}, .mode = EM_INTERP_BICUBIC,
     .x = {1, 2, 3, 4}, .xr = 4},
    {"interpolate bicubic down align", P_INTERP, 2, .out = {3, 2}, .mode = EM_INTERP_BICUBIC,
     .align = true, .x = {1, 2, 5, 4}, .xr = 4},
    /* pixel shuffle */
    {"pixel_shuffle r2", P_SHUF, 2, .r = 2, .x = {2, 8, 2, 3}, .xr = 4, .second = true},
    {"pixel_shuffle r2 unbatched", P_SHUF, 2, .r = 2, .x = {4, 3, 2}, .xr = 3},
    {"pixel_unshuffle r2", P_UNSHUF, 2, .r = 2, .x = {2, 2, 4, 6}, .xr = 4, .second = true},
    {"pixel_unshuffle r3 extra dims", P_UNSHUF, 2, .r = 3, .x = {2, 1, 1, 3, 6}, .xr = 5},
};

/* f32 inputs get f32 gradients of the input's shape. */
static void run_f32(void)
{
    em_scope_begin();
    em_tensor *x = em_requires_grad(em_rand(EM_SHAPE(1, 2, 4, 4), EM_F32, h_dev), true);
    em_tensor *m = em_max_pool2d(x, (em_pool_opts){.kernel = {2, 2}}, NULL);
    em_tensor *a = em_interpolate(m, EM_SHAPE(3, 3), EM_INTERP_BILINEAR, false);
    em_tensor *p = em_avg_pool2d(a, (em_pool_opts){.kernel = {2, 2}, .stride = {1, 1}});
    em_grads *g = em_backward(em_sum(p, EM_ALL, false));
    CHECK(g != NULL, "pool f32 backward failed: %s", em_last_error());
    em_tensor *gx = g ? em_grad(g, x) : NULL;
    CHECK(gx && em_tensor_dtype(gx) == EM_F32 &&
              em_shape_equal(em_tensor_shape(gx), em_tensor_shape(x)),
          "pool f32 gradient: wrong dtype or shape");
    em_release(gx);
    em_scope_end();
}

void grad_pool(void)
{
    int n = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < n; i++) {
        const pool_case *c = &cases[i];
        em_shape s = {.rank = c->xr};
        for (int d = 0; d < c->xr; d++) s.dims[d] = c->x[d];
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            em_scope_begin();
            em_tensor *x = g_in(s, (h_layout)l, -1, 1);
            char what[96];
            snprintf(what, sizeof what, "%s layout %d", c->name, l);
            h_gradcheck(what, f_pool, (void *)c, &x, 1, NULL, 0, 0);
            if (c->second && l == 0) h_gradgradcheck(what, f_pool, (void *)c, &x, 1, NULL, 0, 0);
            em_scope_end();
        }
    }
    run_f32();
}
