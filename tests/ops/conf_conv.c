/* Conformance of the convolution family against direct f64 loops: conv1d/2d/3d and their
 * transposes over stride, asymmetric padding, dilation, groups, out_pad, bias, batch and
 * unbatched inputs, every layout of x, w and bias, and four float dtypes; im2col/col2im and
 * their adjoint identity; the internal conv_weight_grad record (on h_dev, where a device without
 * it composes other ops, and on the CPU); PyTorch golden fixtures; bad inputs. */
#include <string.h>

#include "conf.h"
#include "tensor/op.h"

typedef struct conv_case {
    int nsp;
    bool transposed;
    int64_t n; /* batch; -1 = unbatched input */
    int64_t cin, cout, groups;
    int64_t in[3], k[3], stride[3], plo[3], phi[3], dil[3], opad[3];
    bool bias;
} conv_case;

/* Spatial size of the output along dim d, by the PyTorch formulas. */
static int64_t out_len(const conv_case *c, int d)
{
    int64_t s = c->stride[d] ? c->stride[d] : 1, dl = c->dil[d] ? c->dil[d] : 1;
    if (c->transposed)
        return (c->in[d] - 1) * s - c->plo[d] - c->phi[d] + dl * (c->k[d] - 1) + c->opad[d] + 1;
    return (c->in[d] + c->plo[d] + c->phi[d] - dl * (c->k[d] - 1) - 1) / s + 1;
}

/* Pads a case to 3 spatial dims: size 1, kernel 1, stride 1, dilation 1, no padding. */
typedef struct geo3 {
    int64_t in[3], out[3], k[3], s[3], p[3], d[3];
} geo3;

static geo3 geo_of(const conv_case *c)
{
    geo3 g;
    for (int d = 0; d < 3; d++) {
        bool has = d < c->nsp;
        g.in[d] = has ? c->in[d] : 1;
        g.out[d] = has ? out_len(c, d) : 1;
        g.k[d] = has ? c->k[d] : 1;
        g.s[d] = has && c->stride[d] ? c->stride[d] : 1;
        g.p[d] = has ? c->plo[d] : 0;
        g.d[d] = has && c->dil[d] ? c->dil[d] : 1;
    }
    return g;
}

/* Direct convolution: y[n, co, o] = b[co] + sum_{ci in group, k} x[n, ci, o*s - p + k*d] w. */
static void ref_conv(const conv_case *c, const double *x, const double *w, const double *b,
                     double *y)
{
    geo3 g = geo_of(c);
    int64_t nb = c->n < 0 ? 1 : c->n, cig = c->cin / c->groups, cog = c->cout / c->groups;
    int64_t in_n = g.in[0] * g.in[1] * g.in[2], out_n = g.out[0] * g.out[1] * g.out[2];
    int64_t k_n = g.k[0] * g.k[1] * g.k[2];
    for (int64_t n = 0; n < nb; n++)
        for (int64_t co = 0; co < c->cout; co++)
            for (int64_t o0 = 0; o0 < g.out[0]; o0++)
                for (int64_t o1 = 0; o1 < g.out[1]; o1++)
                    for (int64_t o2 = 0; o2 < g.out[2]; o2++) {
                        double acc = b ? b[co] : 0.0;
                        int64_t grp = co / cog;
                        for (int64_t cl = 0; cl < cig; cl++) {
                            int64_t ci = grp * cig + cl;
                            for (int64_t k0 = 0; k0 < g.k[0]; k0++)
                                for (int64_t k1 = 0; k1 < g.k[1]; k1++)
                                    for (int64_t k2 = 0; k2 < g.k[2]; k2++) {
                                        int64_t i0 = o0 * g.s[0] - g.p[0] + k0 * g.d[0];
                                        int64_t i1 = o1 * g.s[1] - g.p[1] + k1 * g.d[1];
                                        int64_t i2 = o2 * g.s[2] - g.p[2] + k2 * g.d[2];
                                        if (i0 < 0 || i0 >= g.in[0] || i1 < 0 || i1 >= g.in[1] ||
                                            i2 < 0 || i2 >= g.in[2])
                                            continue;
                                        double xv = x[(n * c->cin + ci) * in_n +
                                                      (i0 * g.in[1] + i1) * g.in[2] + i2];
                                        double wv = w[(co * cig + cl) * k_n +
                                                      (k0 * g.k[1] + k1) * g.k[2] + k2];
                                        acc += xv * wv;
                                    }
                        }
                        y[(n * c->cout + co) * out_n + (o0 * g.out[1] + o1) * g.out[2] + o2] = acc;
                    }
}

/* Transposed convolution by its definition: every x[n, ci, i] * w[ci, co, k] lands on
 * y[n, co, i*s - p + k*d] when that is inside the output. */
static void ref_conv_t(const conv_case *c, const double *x, const double *w, const double *b,
                       double *y)
{
    geo3 g = geo_of(c);
    int64_t nb = c->n < 0 ? 1 : c->n, cig = c->cin / c->groups, cog = c->cout / c->groups;
    int64_t in_n = g.in[0] * g.in[1] * g.in[2], out_n = g.out[0] * g.out[1] * g.out[2];
    int64_t k_n = g.k[0] * g.k[1] * g.k[2];
    for (int64_t n = 0; n < nb; n++)
        for (int64_t co = 0; co < c->cout; co++)
            for (int64_t o = 0; o < out_n; o++) y[(n * c->cout + co) * out_n + o] = b ? b[co] : 0;
    for (int64_t n = 0; n < nb; n++)
        for (int64_t ci = 0; ci < c->cin; ci++)
            for (int64_t i0 = 0; i0 < g.in[0]; i0++)
                for (int64_t i1 = 0; i1 < g.in[1]; i1++)
                    for (int64_t i2 = 0; i2 < g.in[2]; i2++) {
                        double xv =
                            x[(n * c->cin + ci) * in_n + (i0 * g.in[1] + i1) * g.in[2] + i2];
                        int64_t grp = ci / cig;
                        for (int64_t cl = 0; cl < cog; cl++)
                            for (int64_t k0 = 0; k0 < g.k[0]; k0++)
                                for (int64_t k1 = 0; k1 < g.k[1]; k1++)
                                    for (int64_t k2 = 0; k2 < g.k[2]; k2++) {
                                        int64_t o0 = i0 * g.s[0] - g.p[0] + k0 * g.d[0];
                                        int64_t o1 = i1 * g.s[1] - g.p[1] + k1 * g.d[1];
                                        int64_t o2 = i2 * g.s[2] - g.p[2] + k2 * g.d[2];
                                        if (o0 < 0 || o0 >= g.out[0] || o1 < 0 || o1 >= g.out[1] ||
                                            o2 < 0 || o2 >= g.out[2])
                                            continue;
                                        double wv = w[(ci * cog + cl) * k_n +
                                                      (k0 * g.k[1] + k1) * g.k[2] + k2];
                                        int64_t co = grp * cog + cl;
                                        y[(n * c->cout + co) * out_n +
                                          (o0 * g.out[1] + o1) * g.out[2] + o2] += xv * wv;
                                    }
                    }
}

typedef em_tensor *(*conv_fn)(const em_tensor *, const em_tensor *, const em_tensor *,
                              em_conv_opts);

static conv_fn conv_fn_of(int nsp, bool transposed)
{
    static const conv_fn f[2][3] = {
        {em_conv1d, em_conv2d, em_conv3d},
        {em_conv_transpose1d, em_conv_transpose2d, em_conv_transpose3d}};
    return f[transposed][nsp - 1];
}

static em_conv_opts opts_of(const conv_case *c)
{
    em_conv_opts o;
    memset(&o, 0, sizeof o);
    for (int d = 0; d < 3; d++) {
        o.stride[d] = c->stride[d];
        o.pad_lo[d] = c->plo[d];
        o.pad_hi[d] = c->phi[d];
        o.dilation[d] = c->dil[d];
        o.out_pad[d] = c->opad[d];
    }
    o.groups = c->groups == 1 ? 0 : c->groups; /* 0 must mean 1 */
    return o;
}

static void shapes_of(const conv_case *c, em_shape *xs, em_shape *ws, em_shape *ys)
{
    xs->rank = ys->rank = 0;
    if (c->n >= 0) {
        xs->dims[xs->rank++] = c->n;
        ys->dims[ys->rank++] = c->n;
    }
    xs->dims[xs->rank++] = c->cin;
    ys->dims[ys->rank++] = c->cout;
    ws->rank = 2;
    ws->dims[0] = c->transposed ? c->cin : c->cout;
    ws->dims[1] = c->transposed ? c->cout / c->groups : c->cin / c->groups;
    for (int d = 0; d < c->nsp; d++) {
        xs->dims[xs->rank++] = c->in[d];
        ys->dims[ys->rank++] = out_len(c, d);
        ws->dims[ws->rank++] = c->k[d];
    }
}

/* Products summed per output element: the tolerance grows with its square root (rounding
 * errors of a K-term f32 sum). */
static double terms(const conv_case *c)
{
    int64_t k = 1;
    for (int d = 0; d < c->nsp; d++) k *= c->k[d];
    return (double)((c->transposed ? c->cout : c->cin) / c->groups * k);
}

static void run_conv_case(const conv_case *c, int idx, em_dtype dt, h_layout lx, h_layout lw)
{
    em_scope_begin();
    em_shape xs, ws, ys;
    shapes_of(c, &xs, &ws, &ys);
    double *xv, *wv, *bv = NULL;
    em_tensor *x = h_rand(xs, dt, lx, -1, 1, &xv);
    em_tensor *w = h_rand(ws, dt, lw, -1, 1, &wv);
    em_tensor *b = c->bias ? h_rand(EM_SHAPE(c->cout), dt, lw, -1, 1, &bv) : NULL;
    int64_t ny = em_shape_numel(ys);
    double *expect = malloc((size_t)(ny ? ny : 1) * sizeof *expect);
    if (c->transposed)
        ref_conv_t(c, xv, wv, bv, expect);
    else
        ref_conv(c, xv, wv, bv, expect);
    for (int64_t i = 0; i < ny; i++) expect[i] = h_round_to(expect[i], dt);
    em_tensor *y = conv_fn_of(c->nsp, c->transposed)(x, w, b, opts_of(c));
    char what[128];
    snprintf(what, sizeof what, "conv case %d (%s%dd, %s, layouts x %d w %d)", idx,
             c->transposed ? "transpose" : "", c->nsp, em_dtype_name(dt), (int)lx, (int)lw);
    double sq = sqrt(terms(c) + 1);
    h_check_tensor(what, y, expect, ys, h_atol(dt) * sq, h_rtol(dt));
    if (y) CHECK(em_tensor_dtype(y) == dt, "%s: output dtype", what);
    CHECK_OK(what);
    free(expect);
    free(xv);
    free(wv);
    free(bv);
    em_scope_end();
}

#define V3(a, b, c)                                                                                \
    {                                                                                              \
        a, b, c                                                                                    \
    }

static const conv_case conv_cases[] = {
    /* conv1d: groups, stride, asymmetric padding, dilation */
    {1, false, 3, 4, 6, 2, V3(9, 0, 0), V3(3, 0, 0), V3(2, 0, 0), V3(1, 0, 0), V3(2, 0, 0),
     V3(2, 0, 0), V3(0, 0, 0), true},
    /* unbatched 1x1 (the direct path), no bias */
    {1, false, -1, 3, 2, 1, V3(7, 0, 0), V3(1, 0, 0), V3(0, 0, 0), V3(0, 0, 0), V3(0, 0, 0),
     V3(0, 0, 0), V3(0, 0, 0), false},
    /* depthwise */
    {1, false, 1, 4, 4, 4, V3(5, 0, 0), V3(5, 0, 0), V3(1, 0, 0), V3(2, 0, 0), V3(2, 0, 0),
     V3(1, 0, 0), V3(0, 0, 0), true},
    /* size-1 spatial */
    {1, false, 2, 2, 3, 1, V3(1, 0, 0), V3(1, 0, 0), V3(0, 0, 0), V3(0, 0, 0), V3(0, 0, 0),
     V3(0, 0, 0), V3(0, 0, 0), true},
    /* empty batch */
    {1, false, 0, 2, 3, 1, V3(4, 0, 0), V3(2, 0, 0), V3(0, 0, 0), V3(0, 0, 0), V3(0, 0, 0),
     V3(0, 0, 0), V3(0, 0, 0), true},
    /* no input channels: the output is the bias */
    {1, false, 2, 0, 3, 1, V3(4, 0, 0), V3(2, 0, 0), V3(0, 0, 0), V3(0, 0, 0), V3(0, 0, 0),
     V3(0, 0, 0), V3(0, 0, 0), true},
    {1, true, 2, 0, 3, 1, V3(4, 0, 0), V3(2, 0, 0), V3(0, 0, 0), V3(0, 0, 0), V3(0, 0, 0),
     V3(0, 0, 0), V3(0, 0, 0), true},
    /* conv2d */
    {2, false, 3, 4, 6, 2, V3(7, 6, 0), V3(3, 2, 0), V3(2, 1, 0), V3(1, 0, 0), V3(0, 2, 0),
     V3(1, 2, 0), V3(0, 0, 0), true},
    {2, false, 1, 3, 5, 1, V3(5, 4, 0), V3(1, 1, 0), V3(0, 0, 0), V3(0, 0, 0), V3(0, 0, 0),
     V3(0, 0, 0), V3(0, 0, 0), false},
    {2, false, -1, 2, 4, 1, V3(6, 6, 0), V3(3, 3, 0), V3(3, 2, 0), V3(1, 1, 0), V3(1, 0, 0),
     V3(0, 0, 0), V3(0, 0, 0), true},
    /* depthwise with channel multiplier 2 and dilation */
    {2, false, 2, 3, 6, 3, V3(5, 5, 0), V3(3, 3, 0), V3(1, 1, 0), V3(1, 1, 0), V3(1, 1, 0),
     V3(2, 2, 0), V3(0, 0, 0), true},
    /* 1x1 kernel on a padded 1x1 image, strided 1x1 (im2col path) */
    {2, false, 1, 2, 2, 1, V3(1, 1, 0), V3(1, 1, 0), V3(0, 0, 0), V3(1, 1, 0), V3(1, 1, 0),
     V3(0, 0, 0), V3(0, 0, 0), false},
    {2, false, 2, 2, 3, 1, V3(5, 4, 0), V3(1, 1, 0), V3(2, 2, 0), V3(0, 0, 0), V3(0, 0, 0),
     V3(0, 0, 0), V3(0, 0, 0), true},
    /* conv3d */
    {3, false, 3, 2, 4, 2, V3(4, 5, 3), V3(2, 3, 2), V3(1, 2, 1), V3(1, 0, 1), V3(0, 1, 0),
     V3(1, 1, 2), V3(0, 0, 0), true},
    {3, false, -1, 2, 2, 1, V3(3, 3, 3), V3(1, 1, 1), V3(0, 0, 0), V3(0, 0, 0), V3(0, 0, 0),
     V3(0, 0, 0), V3(0, 0, 0), false},
    /* conv_transpose1d */
    {1, true, 3, 4, 6, 2, V3(5, 0, 0), V3(3, 0, 0), V3(2, 0, 0), V3(1, 0, 0), V3(0, 0, 0),
     V3(1, 0, 0), V3(1, 0, 0), true},
    {1, true, -1, 3, 2, 1, V3(4, 0, 0), V3(1, 0, 0), V3(0, 0, 0), V3(0, 0, 0), V3(0, 0, 0),
     V3(0, 0, 0), V3(0, 0, 0), false},
    {1, true, 1, 3, 3, 3, V3(4, 0, 0), V3(3, 0, 0), V3(3, 0, 0), V3(0, 0, 0), V3(1, 0, 0),
     V3(2, 0, 0), V3(2, 0, 0), true},
    /* conv_transpose2d */
    {2, true, 3, 4, 6, 2, V3(4, 3, 0), V3(3, 2, 0), V3(2, 3, 0), V3(1, 0, 0), V3(0, 1, 0),
     V3(1, 2, 0), V3(1, 2, 0), true},
    {2, true, 1, 2, 3, 1, V3(3, 3, 0), V3(1, 1, 0), V3(0, 0, 0), V3(0, 0, 0), V3(0, 0, 0),
     V3(0, 0, 0), V3(0, 0, 0), false},
    {2, true, -1, 2, 2, 1, V3(1, 1, 0), V3(2, 3, 0), V3(0, 0, 0), V3(0, 0, 0), V3(0, 0, 0),
     V3(0, 0, 0), V3(0, 0, 0), true},
    {2, true, 2, 2, 2, 1, V3(3, 3, 0), V3(1, 1, 0), V3(2, 2, 0), V3(0, 0, 0), V3(0, 0, 0),
     V3(0, 0, 0), V3(0, 0, 0), true},
    /* conv_transpose3d */
    {3, true, 3, 2, 4, 2, V3(3, 2, 3), V3(2, 2, 3), V3(2, 1, 2), V3(0, 1, 1), V3(1, 0, 0),
     V3(1, 2, 1), V3(1, 1, 0), true},
    {3, true, -1, 2, 2, 1, V3(2, 2, 2), V3(1, 1, 1), V3(0, 0, 0), V3(0, 0, 0), V3(0, 0, 0),
     V3(0, 0, 0), V3(0, 0, 0), false},
};

static void test_conv_cases(void)
{
    int nc = (int)(sizeof conv_cases / sizeof conv_cases[0]);
    for (int i = 0; i < nc; i++) {
        const conv_case *c = &conv_cases[i];
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            run_conv_case(c, i, EM_F64, (h_layout)l, (h_layout)((l + i) % H_LAYOUT_COUNT));
            run_conv_case(c, i, EM_F32, (h_layout)((l + i) % H_LAYOUT_COUNT), (h_layout)l);
        }
        run_conv_case(c, i, EM_F16, (h_layout)(i % H_LAYOUT_COUNT), H_CONTIG);
        run_conv_case(c, i, EM_BF16, H_CONTIG, (h_layout)(i % H_LAYOUT_COUNT));
    }
}

/* Larger batches take the batch-parallel path; the numbers must not depend on the thread
 * count, bit for bit. */
static void test_conv_large(void)
{
    static const conv_case big[] = {
        {2, false, 8, 16, 16, 1, V3(16, 16, 0), V3(3, 3, 0), V3(1, 1, 0), V3(1, 1, 0), V3(1, 1, 0),
         V3(0, 0, 0), V3(0, 0, 0), true},
        {2, true, 8, 16, 8, 2, V3(8, 8, 0), V3(4, 4, 0), V3(2, 2, 0), V3(1, 1, 0), V3(1, 1, 0),
         V3(0, 0, 0), V3(0, 0, 0), true},
        {2, false, 2, 32, 32, 1, V3(12, 12, 0), V3(1, 1, 0), V3(0, 0, 0), V3(0, 0, 0), V3(0, 0, 0),
         V3(0, 0, 0), V3(0, 0, 0), false},
    };
    for (int i = 0; i < 3; i++) {
        run_conv_case(&big[i], 100 + i, EM_F32, H_CONTIG, H_CONTIG);
        em_scope_begin();
        em_shape xs, ws, ys;
        shapes_of(&big[i], &xs, &ws, &ys);
        em_tensor *x = h_rand(xs, EM_F32, H_CONTIG, -1, 1, NULL);
        em_tensor *w = h_rand(ws, EM_F32, H_CONTIG, -1, 1, NULL);
        em_tensor *b = h_rand(EM_SHAPE(big[i].cout), EM_F32, H_CONTIG, -1, 1, NULL);
        conv_fn f = conv_fn_of(big[i].nsp, big[i].transposed);
        int threads = em_get_num_threads();
        em_set_num_threads(1);
        double *v1 = h_values(f(x, w, b, opts_of(&big[i])));
        em_set_num_threads(threads > 1 ? threads : 2);
        double *v2 = h_values(f(x, w, b, opts_of(&big[i])));
        em_set_num_threads(threads);
        CHECK(memcmp(v1, v2, (size_t)em_shape_numel(ys) * sizeof *v1) == 0,
              "large conv %d: results differ between 1 and several threads", i);
        free(v1);
        free(v2);
        CHECK_OK("large conv");
        em_scope_end();
    }
}

/* ---- im2col / col2im --------------------------------------------------------------------- */

typedef struct fold_case {
    int64_t n; /* -1: unbatched */
    int64_t c, h, w;
    int64_t k[2], d[2], p[2], s[2];
} fold_case;

static void fold_geo(const fold_case *f, int64_t *bh, int64_t *bw)
{
    int64_t d0 = f->d[0] ? f->d[0] : 1, d1 = f->d[1] ? f->d[1] : 1;
    int64_t s0 = f->s[0] ? f->s[0] : 1, s1 = f->s[1] ? f->s[1] : 1;
    *bh = (f->h + 2 * f->p[0] - d0 * (f->k[0] - 1) - 1) / s0 + 1;
    *bw = (f->w + 2 * f->p[1] - d1 * (f->k[1] - 1) - 1) / s1 + 1;
}

/* For every (n, c, i, j, block) the image index it reads, or -1 for padding. */
static int64_t fold_src(const fold_case *f, int64_t n, int64_t c, int64_t i, int64_t j, int64_t b0,
                        int64_t b1)
{
    int64_t d0 = f->d[0] ? f->d[0] : 1, d1 = f->d[1] ? f->d[1] : 1;
    int64_t s0 = f->s[0] ? f->s[0] : 1, s1 = f->s[1] ? f->s[1] : 1;
    int64_t y = b0 * s0 - f->p[0] + i * d0, x = b1 * s1 - f->p[1] + j * d1;
    if (y < 0 || y >= f->h || x < 0 || x >= f->w) return -1;
    return ((n * f->c + c) * f->h + y) * f->w + x;
}

/* cols[n, (c*kh + i)*kw + j, b0*bw + b1] = img[...] (im2col), or img += cols (col2im). */
static void ref_fold(const fold_case *f, const double *img, double *cols, double *img_out)
{
    int64_t bh, bw, nb = f->n < 0 ? 1 : f->n;
    fold_geo(f, &bh, &bw);
    if (img_out)
        for (int64_t i = 0; i < nb * f->c * f->h * f->w; i++) img_out[i] = 0;
    for (int64_t n = 0; n < nb; n++)
        for (int64_t c = 0; c < f->c; c++)
            for (int64_t i = 0; i < f->k[0]; i++)
                for (int64_t j = 0; j < f->k[1]; j++)
                    for (int64_t b0 = 0; b0 < bh; b0++)
                        for (int64_t b1 = 0; b1 < bw; b1++) {
                            int64_t row = (c * f->k[0] + i) * f->k[1] + j;
                            int64_t ci =
                                (n * f->c * f->k[0] * f->k[1] + row) * bh * bw + b0 * bw + b1;
                            int64_t src = fold_src(f, n, c, i, j, b0, b1);
                            if (img_out) {
                                if (src >= 0) img_out[src] += cols[ci];
                            } else {
                                cols[ci] = src >= 0 ? img[src] : 0;
                            }
                        }
}

static const fold_case fold_cases[] = {
    {2, 3, 7, 6, {3, 2}, {1, 2}, {1, 0}, {2, 1}}, {-1, 2, 5, 5, {2, 2}, {0, 0}, {0, 0}, {0, 0}},
    {1, 1, 1, 1, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, {3, 2, 6, 4, {3, 3}, {2, 1}, {2, 1}, {1, 3}},
    {0, 2, 4, 4, {2, 2}, {1, 1}, {0, 0}, {2, 2}},
};

static void test_fold(void)
{
    em_dtype dts[] = {EM_F64, EM_F32, EM_F16, EM_BF16};
    int nf = (int)(sizeof fold_cases / sizeof fold_cases[0]);
    for (int fi = 0; fi < nf; fi++) {
        const fold_case *f = &fold_cases[fi];
        int64_t bh, bw;
        fold_geo(f, &bh, &bw);
        em_shape is, cs;
        if (f->n >= 0) {
            is = EM_SHAPE(f->n, f->c, f->h, f->w);
            cs = EM_SHAPE(f->n, f->c * f->k[0] * f->k[1], bh * bw);
        } else {
            is = EM_SHAPE(f->c, f->h, f->w);
            cs = EM_SHAPE(f->c * f->k[0] * f->k[1], bh * bw);
        }
        int64_t ni = em_shape_numel(is), ncol = em_shape_numel(cs);
        int64_t out_size[2] = {f->h, f->w};
        for (int di = 0; di < 4; di++) {
            for (int l = 0; l < H_LAYOUT_COUNT; l++) {
                if (di >= 2 && l != (fi + di) % H_LAYOUT_COUNT) continue;
                em_dtype dt = dts[di];
                em_scope_begin();
                char what[96];
                double *xv, *cv;
                em_tensor *x = h_rand(is, dt, (h_layout)l, -1, 1, &xv);
                em_tensor *cols = h_rand(cs, dt, (h_layout)l, -1, 1, &cv);
                double *e1 = malloc((size_t)(ncol ? ncol : 1) * sizeof *e1);
                double *e2 = malloc((size_t)(ni ? ni : 1) * sizeof *e2);
                ref_fold(f, xv, e1, NULL);
                ref_fold(f, NULL, cv, e2);
                for (int64_t i = 0; i < ni; i++) e2[i] = h_round_to(e2[i], dt);
                snprintf(what, sizeof what, "im2col case %d %s layout %d", fi, em_dtype_name(dt),
                         l);
                h_check_tensor(what, em_im2col(x, f->k, f->d, f->p, f->s), e1, cs, 0, 0);
                snprintf(what, sizeof what, "col2im case %d %s layout %d", fi, em_dtype_name(dt),
                         l);
                double tol = (double)(f->k[0] * f->k[1]);
                h_check_tensor(what, em_col2im(cols, out_size, f->k, f->d, f->p, f->s), e2, is,
                               h_atol(dt) * tol, h_rtol(dt));
                CHECK_OK(what);
                if (dt == EM_F64) {
                    /* adjoint: <im2col(x), y> == <x, col2im(y)> */
                    double *a = h_values(em_im2col(x, f->k, f->d, f->p, f->s));
                    double *b = h_values(em_col2im(cols, out_size, f->k, f->d, f->p, f->s));
                    double l1 = 0, r1 = 0, mag = 0;
                    for (int64_t i = 0; i < ncol; i++) {
                        l1 += a[i] * cv[i];
                        mag += fabs(a[i] * cv[i]);
                    }
                    for (int64_t i = 0; i < ni; i++) r1 += xv[i] * b[i];
                    CHECK(fabs(l1 - r1) <= 1e-12 * (mag + 1),
                          "fold case %d: adjoint identity %.17g vs %.17g", fi, l1, r1);
                    free(a);
                    free(b);
                }
                free(e1);
                free(e2);
                free(xv);
                free(cv);
                em_scope_end();
            }
        }
    }
}

/* ---- PyTorch golden fixtures ------------------------------------------------------------- */

static void test_fixture_conv(h_fixture *fx, const char *name, bool transposed)
{
    char key[64];
    em_shape s;
    snprintf(key, sizeof key, "%s_opts", name);
    const double *ov = h_fixture_values(fx, key, &s);
    if (!ov) return;
    int nsp = (int)ov[0];
    em_conv_opts o;
    memset(&o, 0, sizeof o);
    for (int d = 0; d < 3; d++) {
        o.stride[d] = (int64_t)ov[1 + d];
        o.pad_lo[d] = (int64_t)ov[4 + d];
        o.pad_hi[d] = (int64_t)ov[7 + d];
        o.dilation[d] = (int64_t)ov[10 + d];
        o.out_pad[d] = (int64_t)ov[13 + d];
    }
    o.groups = (int64_t)ov[16];
    for (int pass = 0; pass < 2; pass++) {
        em_dtype dt = pass == 0 ? EM_F64 : EM_F32;
        em_scope_begin();
        em_tensor *t[3];
        const char *sfx[3] = {"x", "w", "b"};
        em_shape shp[3] = {{.rank = 1}, {.rank = 1}, {.rank = 1}};
        for (int i = 0; i < 3; i++) {
            snprintf(key, sizeof key, "%s_%s", name, sfx[i]);
            const double *v = h_fixture_values(fx, key, &shp[i]);
            t[i] = v ? em_from_data(v, EM_F64, shp[i], dt, h_dev) : NULL;
        }
        em_tensor *b = em_shape_numel(shp[2]) > 0 ? t[2] : NULL;
        snprintf(key, sizeof key, "%s_y", name);
        em_shape ys;
        const double *yv = h_fixture_values(fx, key, &ys);
        if (t[0] && t[1] && yv) {
            em_tensor *y = conv_fn_of(nsp, transposed)(t[0], t[1], b, o);
            char what[64];
            snprintf(what, sizeof what, "torch %s (%s)", name, em_dtype_name(dt));
            double tol = dt == EM_F64 ? 1e-10 : 1e-5;
            h_check_tensor(what, y, yv, ys, tol, tol);
            CHECK_OK(what);
        }
        em_scope_end();
    }
}

static void test_fixtures(void)
{
    h_fixture *fx = h_fixture_load("conv.emfx");
    if (!fx) return;
    test_fixture_conv(fx, "conv2d", false);
    test_fixture_conv(fx, "conv1d", false);
    test_fixture_conv(fx, "conv3d", false);
    test_fixture_conv(fx, "convt2d", true);
    test_fixture_conv(fx, "convt1d", true);
    test_fixture_conv(fx, "convt3d", true);
    const char *names[2] = {"unfold", "fold"};
    for (int k = 0; k < 2; k++) {
        char key[32];
        em_shape s, ys;
        snprintf(key, sizeof key, "%s_opts", names[k]);
        const double *ov = h_fixture_values(fx, key, &s);
        snprintf(key, sizeof key, "%s_y", names[k]);
        const double *yv = h_fixture_values(fx, key, &ys);
        if (!ov || !yv) continue;
        int64_t kk[2] = {(int64_t)ov[0], (int64_t)ov[1]}, dl[2] = {(int64_t)ov[2], (int64_t)ov[3]};
        int64_t pd[2] = {(int64_t)ov[4], (int64_t)ov[5]}, st[2] = {(int64_t)ov[6], (int64_t)ov[7]};
        for (int pass = 0; pass < 2; pass++) {
            em_dtype dt = pass == 0 ? EM_F64 : EM_F32;
            em_scope_begin();
            snprintf(key, sizeof key, "%s_x", names[k]);
            em_shape xs;
            const double *xv = h_fixture_values(fx, key, &xs);
            em_tensor *x = em_from_data(xv, EM_F64, xs, dt, h_dev);
            em_tensor *y;
            if (k == 0) {
                y = em_im2col(x, kk, dl, pd, st);
            } else {
                int64_t os[2] = {(int64_t)ov[8], (int64_t)ov[9]};
                y = em_col2im(x, os, kk, dl, pd, st);
            }
            char what[64];
            snprintf(what, sizeof what, "torch %s (%s)", names[k], em_dtype_name(dt));
            double tol = dt == EM_F64 ? 1e-10 : 1e-5;
            h_check_tensor(what, y, yv, ys, tol, tol);
            CHECK_OK(what);
            em_scope_end();
        }
    }
    h_fixture_free(fx);
}

/* ---- bad inputs -------------------------------------------------------------------------- */

static void test_bad_inputs(void)
{
    em_scope_begin();
    em_tensor *x = em_zeros(EM_SHAPE(1, 3, 5, 5), EM_F32, h_dev);
    em_tensor *w = em_zeros(EM_SHAPE(2, 4, 3, 3), EM_F32, h_dev);
    em_tensor *w3 = em_zeros(EM_SHAPE(4, 3, 3, 3), EM_F32, h_dev);
    em_conv_opts o0 = {0};

    CHECK(em_conv2d(NULL, w, NULL, o0) == NULL, "NULL x");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_conv2d");
    CHECK(em_conv2d(x, NULL, NULL, o0) == NULL, "NULL w");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_conv2d");
    /* NULL propagation keeps the first error */
    em_error(EM_ERR_SHAPE, "earlier failure");
    CHECK(em_conv2d(NULL, w, NULL, o0) == NULL, "NULL x after an error");
    CHECK_ERR(EM_ERR_SHAPE, "earlier failure");

    CHECK(em_conv2d(x, w, NULL, o0) == NULL, "channel mismatch");
    CHECK_ERR(EM_ERR_SHAPE, "em_conv2d: input has 3 channels, weight expects 4 (groups 1)");

    em_conv_opts og = {.groups = 2};
    em_tensor *x4 = em_zeros(EM_SHAPE(1, 4, 5, 5), EM_F32, h_dev);
    CHECK(em_conv2d(x, w3, NULL, og) == NULL, "groups not dividing channels");
    CHECK_ERR(EM_ERR_SHAPE, "em_conv2d: groups 2 does not divide the 3 input channels");
    em_tensor *w5 = em_zeros(EM_SHAPE(5, 2, 3, 3), EM_F32, h_dev);
    CHECK(em_conv2d(x4, w5, NULL, og) == NULL, "groups not dividing out channels");
    CHECK_ERR(EM_ERR_SHAPE, "groups 2 does not divide the 5 output channels");

    CHECK(em_conv1d(x, w3, NULL, o0) == NULL, "rank");
    CHECK_ERR(EM_ERR_SHAPE, "em_conv1d: input must have rank 3");
    CHECK(em_conv2d(x, em_zeros(EM_SHAPE(4, 3, 3), EM_F32, h_dev), NULL, o0) == NULL, "w rank");
    CHECK_ERR(EM_ERR_SHAPE, "em_conv2d: weight must have rank 4");

    CHECK(em_conv2d(em_zeros(EM_SHAPE(1, 3, 5, 5), EM_I32, h_dev), w3, NULL, o0) == NULL,
          "int dtype");
    CHECK_ERR(EM_ERR_DTYPE, "em_conv2d: input dtype i32 is not supported");
    CHECK(em_conv2d(x, em_zeros(EM_SHAPE(4, 3, 3, 3), EM_F64, h_dev), NULL, o0) == NULL,
          "mixed dtypes");
    CHECK_ERR(EM_ERR_DTYPE, "em_conv2d: weight dtype f64 differs from the input's dtype f32");
    CHECK(em_conv2d(x, w3, em_zeros(EM_SHAPE(4), EM_F16, h_dev), o0) == NULL, "bias dtype");
    CHECK_ERR(EM_ERR_DTYPE, "bias dtype f16");
    CHECK(em_conv2d(x, w3, em_zeros(EM_SHAPE(3), EM_F32, h_dev), o0) == NULL, "bias shape");
    CHECK_ERR(EM_ERR_SHAPE, "em_conv2d: bias must have shape [4]");

    em_tensor *big_w = em_zeros(EM_SHAPE(4, 3, 7, 3), EM_F32, h_dev);
    CHECK(em_conv2d(x, big_w, NULL, o0) == NULL, "kernel larger than input");
    CHECK_ERR(EM_ERR_SHAPE, "input size 5, kernel 7 (dilation 1), padding 0+0");
    em_conv_opts od = {.dilation = {3, 1}};
    CHECK(em_conv2d(x, w3, NULL, od) == NULL, "dilated kernel larger than input");
    CHECK_ERR(EM_ERR_SHAPE, "kernel 3 (dilation 3)");
    em_conv_opts on = {.stride = {-1, 1}};
    CHECK(em_conv2d(x, w3, NULL, on) == NULL, "negative stride");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_conv2d: stride[0] is -1");
    em_conv_opts op = {.out_pad = {1, 0}};
    CHECK(em_conv2d(x, w3, NULL, op) == NULL, "out_pad on conv");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_conv2d: out_pad[0] is 1");

    /* transposed: w [Cin, Cout/groups, k...] */
    em_tensor *wt = em_zeros(EM_SHAPE(3, 2, 3, 3), EM_F32, h_dev);
    em_conv_opts ot = {.stride = {2, 2}, .out_pad = {2, 0}};
    CHECK(em_conv_transpose2d(x, wt, NULL, ot) == NULL, "out_pad too large");
    CHECK_ERR(EM_ERR_INVALID_ARG,
              "em_conv_transpose2d: out_pad[0] is 2; it must be smaller than stride 2 or "
              "dilation 1");
    CHECK(em_conv_transpose2d(x4, wt, NULL, o0) == NULL, "transposed channels");
    CHECK_ERR(EM_ERR_SHAPE, "em_conv_transpose2d: input has 4 channels, weight expects 3");
    em_conv_opts obig = {.pad_lo = {4, 0}, .pad_hi = {4, 0}};
    CHECK(em_conv_transpose2d(x, wt, NULL, obig) == NULL, "transposed output empty");
    CHECK_ERR(EM_ERR_SHAPE, "em_conv_transpose2d: output size");
    CHECK(em_conv_transpose3d(x, wt, NULL, o0) == NULL, "transposed rank");
    CHECK_ERR(EM_ERR_SHAPE, "em_conv_transpose3d: weight must have rank 5");
    CHECK(em_conv3d(em_zeros(EM_SHAPE(2, 3), EM_F32, h_dev), w3, NULL, o0) == NULL, "x rank");
    CHECK_ERR(EM_ERR_SHAPE,
              "em_conv3d: input must have rank 5 (batched) or 4 (unbatched), got [2, 3]");

    /* im2col / col2im */
    int64_t k2[2] = {2, 2}, k9[2] = {9, 2}, os[2] = {5, 5}, neg[2] = {-1, 1};
    CHECK(em_im2col(NULL, k2, NULL, NULL, NULL) == NULL, "im2col NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_im2col");
    CHECK(em_im2col(x, NULL, NULL, NULL, NULL) == NULL, "im2col NULL kernel");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_im2col: argument `kernel` is NULL");
    CHECK(em_im2col(x, k9, NULL, NULL, NULL) == NULL, "im2col kernel too large");
    CHECK_ERR(EM_ERR_SHAPE, "em_im2col: no blocks along dim 0: image size 5, kernel 9");
    CHECK(em_im2col(x, k2, NULL, neg, NULL) == NULL, "im2col negative padding");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_im2col: bad parameters along dim 0");
    CHECK(em_im2col(em_zeros(EM_SHAPE(5, 5), EM_F32, h_dev), k2, NULL, NULL, NULL) == NULL,
          "im2col rank");
    CHECK_ERR(EM_ERR_SHAPE, "em_im2col: input must be [N, C, H, W] or [C, H, W], got [5, 5]");
    CHECK(em_im2col(em_zeros(EM_SHAPE(1, 1, 3, 3), EM_I64, h_dev), k2, NULL, NULL, NULL) == NULL,
          "im2col dtype");
    CHECK_ERR(EM_ERR_DTYPE, "em_im2col: input dtype i64");
    em_tensor *cols = em_zeros(EM_SHAPE(1, 12, 16), EM_F32, h_dev);
    CHECK(em_col2im(cols, os, k2, NULL, NULL, NULL) != NULL, "col2im ok");
    CHECK_OK("col2im ok");
    em_tensor *cols_bad = em_zeros(EM_SHAPE(1, 12, 15), EM_F32, h_dev);
    CHECK(em_col2im(cols_bad, os, k2, NULL, NULL, NULL) == NULL, "col2im block count");
    CHECK_ERR(EM_ERR_SHAPE, "em_col2im: input [1, 12, 15] has 15 blocks, but out_size [5, 5]");
    em_tensor *cols_rows = em_zeros(EM_SHAPE(1, 10, 16), EM_F32, h_dev);
    CHECK(em_col2im(cols_rows, os, k2, NULL, NULL, NULL) == NULL, "col2im rows");
    CHECK_ERR(EM_ERR_SHAPE, "is not a multiple of the kernel size 2*2");
    CHECK(em_col2im(cols, NULL, k2, NULL, NULL, NULL) == NULL, "col2im NULL out_size");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_col2im: argument `out_size` is NULL");
    CHECK(em_col2im(NULL, os, k2, NULL, NULL, NULL) == NULL, "col2im NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_col2im");
    em_scope_end();
}

/* ---- conv_weight_grad (internal) ------------------------------------------------------------ */

/* gw[co, c, a, b] = sum_{n, oh, ow} gy[n, co, oh, ow] x[n, c, oh sh + a dh - pt,
 * ow sw + b dw - pl]. */
static void test_weight_grad(void)
{
    static const int64_t cases[][15] = {
        /* n  c  co  h  w  kh kw pt pb pl pr sh sw dh dw */
        {2, 3, 4, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
        {3, 1, 8, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
        {1, 2, 3, 4, 4, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1},
        {2, 2, 3, 6, 7, 5, 3, 2, 0, 1, 2, 1, 1, 1, 1},
        {2, 3, 4, 9, 8, 3, 3, 1, 1, 1, 1, 2, 2, 1, 1},  /* stride 2, a row left over */
        {1, 2, 5, 11, 9, 3, 2, 2, 1, 0, 1, 3, 2, 2, 3}, /* strides and dilations */
    };
    em_dtype dts[] = {EM_F64, EM_F32, EM_F16, EM_BF16};
    for (int ci = 0; ci < 6; ci++) {
        const int64_t *k = cases[ci];
        int64_t N = k[0], C = k[1], Co = k[2], H = k[3], W = k[4], kh = k[5], kw = k[6];
        int64_t sh = k[11], sw = k[12], dh = k[13], dw = k[14];
        int64_t OH = (H + k[7] + k[8] - dh * (kh - 1) - 1) / sh + 1;
        int64_t OW = (W + k[9] + k[10] - dw * (kw - 1) - 1) / sw + 1;
        int64_t kern[2] = {kh, kw}, lo[2] = {k[7], k[9]}, hi[2] = {k[8], k[10]};
        int64_t st[2] = {sh, sw}, dil[2] = {dh, dw};
        for (int di = 0; di < 4; di++)
            for (int l = 0; l < H_LAYOUT_COUNT; l++) {
                if (di >= 2 && l != ci % H_LAYOUT_COUNT) continue;
                em_dtype dt = dts[di];
                em_scope_begin();
                double *xv, *gv;
                em_tensor *x = h_rand(EM_SHAPE(N, C, H, W), dt, (h_layout)l, -1, 1, &xv);
                em_tensor *gy = h_rand(EM_SHAPE(N, Co, OH, OW), dt,
                                       (h_layout)((l + 1) % H_LAYOUT_COUNT), -1, 1, &gv);
                double *e = calloc((size_t)(Co * C * kh * kw), sizeof *e);
                for (int64_t o = 0; o < Co; o++)
                    for (int64_t c = 0; c < C; c++)
                        for (int64_t a = 0; a < kh; a++)
                            for (int64_t b = 0; b < kw; b++) {
                                double s = 0;
                                for (int64_t n = 0; n < N; n++)
                                    for (int64_t oh = 0; oh < OH; oh++)
                                        for (int64_t ow = 0; ow < OW; ow++) {
                                            int64_t ih = oh * sh + a * dh - k[7];
                                            int64_t iw = ow * sw + b * dw - k[9];
                                            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                            s += gv[((n * Co + o) * OH + oh) * OW + ow] *
                                                 xv[((n * C + c) * H + ih) * W + iw];
                                        }
                                e[((o * C + c) * kh + a) * kw + b] = s;
                            }
                double tol = (double)(N * OH * OW);
                char what[96];
                snprintf(what, sizeof what, "conv_weight_grad case %d %s layout %d", ci,
                         em_dtype_name(dt), l);
                em_shape ws = EM_SHAPE(Co, C, kh, kw);
                h_check_tensor(what, tn_conv2d_weight_grad(x, gy, kern, st, dil, lo, hi), e, ws,
                               h_atol(dt) * tol, h_rtol(dt) * tol);
                if (h_dev.backend != 0) { /* the record itself, on the CPU */
                    em_tensor *xc = em_to_device(x, EM_CPU), *gc = em_to_device(gy, EM_CPU);
                    snprintf(what, sizeof what, "conv_weight_grad case %d %s layout %d on cpu", ci,
                             em_dtype_name(dt), l);
                    h_check_tensor(what, tn_conv2d_weight_grad(xc, gc, kern, st, dil, lo, hi), e,
                                   ws, h_atol(dt) * tol, h_rtol(dt) * tol);
                }
                CHECK_OK(what);
                free(e);
                free(xv);
                free(gv);
                em_scope_end();
            }
    }
    /* bad inputs */
    em_scope_begin();
    int64_t k3[2] = {3, 3}, p1[2] = {1, 1};
    em_tensor *x = em_zeros(EM_SHAPE(2, 3, 5, 5), EM_F32, h_dev);
    CHECK(tn_conv2d_weight_grad(x, em_zeros(EM_SHAPE(2, 4, 4, 5), EM_F32, h_dev), k3, NULL, NULL,
                                p1, p1) == NULL,
          "conv_weight_grad: gy of the wrong size accepted");
    CHECK_ERR(EM_ERR_SHAPE, "conv_weight_grad");
    CHECK(tn_conv2d_weight_grad(x, em_zeros(EM_SHAPE(2, 4, 5, 5), EM_I32, h_dev), k3, NULL, NULL,
                                p1, p1) == NULL,
          "conv_weight_grad: an int gy accepted");
    CHECK_ERR(EM_ERR_DTYPE, "conv_weight_grad");
    em_scope_end();
}

void conf_conv(void)
{
    test_conv_cases();
    test_weight_grad();
    test_conv_large();
    test_fold();
    test_fixtures();
    test_bad_inputs();
}
