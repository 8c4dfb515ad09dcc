/* Conformance of pooling, adaptive pooling, interpolation and pixel (un)shuffle: f64 references
 * written here over dtypes and layouts, PyTorch golden fixtures (scripts/fixtures_pool.py), and
 * bad input. */
#include <string.h>

#include "conf.h"

static const em_dtype float_dtypes[4] = {EM_F64, EM_F32, EM_F16, EM_BF16};

/* Reference 2-D pooling on [P, H, W] planes (P = N*C). */
static void ref_pool2d(const double *x, int64_t P, int64_t H, int64_t W, const int64_t k[2],
                       const int64_t s[2], const int64_t p[2], const int64_t d[2], int64_t OH,
                       int64_t OW, bool is_max, bool include_pad, double *y, double *idx)
{
    for (int64_t pl = 0; pl < P; pl++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                double best = -INFINITY, sum = 0;
                int64_t bi = -1, cnt = 0;
                for (int64_t a = 0; a < k[0]; a++)
                    for (int64_t b = 0; b < k[1]; b++) {
                        int64_t ih = oh * s[0] - p[0] + a * d[0], iw = ow * s[1] - p[1] + b * d[1];
                        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                        double v = x[(pl * H + ih) * W + iw];
                        if (bi < 0 || v > best || isnan(v)) {
                            best = v;
                            bi = ih * W + iw;
                        }
                        sum += v;
                        cnt++;
                    }
                int64_t o = (pl * OH + oh) * OW + ow;
                if (is_max) {
                    y[o] = best;
                    idx[o] = (double)bi;
                } else {
                    if (include_pad) {
                        int64_t h0 = oh * s[0] - p[0], w0 = ow * s[1] - p[1];
                        int64_t h1 = h0 + k[0] > H + p[0] ? H + p[0] : h0 + k[0];
                        int64_t w1 = w0 + k[1] > W + p[1] ? W + p[1] : w0 + k[1];
                        cnt = (h1 - h0) * (w1 - w0);
                    }
                    y[o] = sum / (double)cnt;
                }
            }
}

static void check_pool_ref(void)
{
    const int64_t H = 7, W = 6;
    struct {
        int64_t k[2], s[2], p[2], d[2];
        bool ceil;
    } cases[] = {
        {{2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
        {{3, 3}, {2, 2}, {1, 1}, {1, 1}, true},
        {{3, 2}, {1, 2}, {1, 1}, {2, 1}, false},
        {{1, 1}, {1, 1}, {0, 0}, {1, 1}, false},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < H_LAYOUT_COUNT; l++) {
                em_dtype dt = float_dtypes[k];
                em_scope_begin();
                double *xv;
                em_tensor *x = h_rand(EM_SHAPE(2, 3, H, W), dt, (h_layout)l, -5, 5, &xv);
                if (ci == 1 && l == 0) xv[5] = NAN; /* NaN wins max pooling */
                if (ci == 1 && l == 0) x = h_from_values(xv, EM_SHAPE(2, 3, H, W), dt, H_CONTIG);
                em_pool_opts o = {.ceil_mode = cases[ci].ceil};
                int64_t out[2];
                for (int i = 0; i < 2; i++) {
                    o.kernel[i] = cases[ci].k[i];
                    o.stride[i] = cases[ci].s[i];
                    o.pad[i] = cases[ci].p[i];
                    o.dilation[i] = cases[ci].d[i];
                    int64_t L = i ? W : H;
                    int64_t num = L + 2 * o.pad[i] - o.dilation[i] * (o.kernel[i] - 1) - 1;
                    out[i] =
                        (o.ceil_mode ? (num + o.stride[i] - 1) / o.stride[i] : num / o.stride[i]) +
                        1;
                    if (o.ceil_mode && (out[i] - 1) * o.stride[i] >= L + o.pad[i]) out[i]--;
                }
                int64_t n = 6 * out[0] * out[1];
                double *y = malloc((size_t)n * sizeof *y), *yi = malloc((size_t)n * sizeof *yi);
                em_shape os = EM_SHAPE(2, 3, out[0], out[1]);
                double tol = h_atol(dt) * 10;
                ref_pool2d(xv, 6, H, W, cases[ci].k, cases[ci].s, cases[ci].p, cases[ci].d, out[0],
                           out[1], true, false, y, yi);
                em_tensor *idx = NULL;
                h_check_tensor("max_pool2d", em_max_pool2d(x, o, &idx), y, os, 0, 0);
                h_check_tensor("max_pool2d indices", idx, yi, os, 0, 0);
                em_release(idx);
                h_check_tensor("max_pool2d values only", em_max_pool2d(x, o, NULL), y, os, 0, 0);
                if (cases[ci].d[0] == 1 && cases[ci].d[1] == 1) {
                    ref_pool2d(xv, 6, H, W, cases[ci].k, cases[ci].s, cases[ci].p, cases[ci].d,
                               out[0], out[1], false, true, y, yi);
                    h_check_tensor("avg_pool2d", em_avg_pool2d(x, o), y, os, tol, tol);
                    o.exclude_pad = true;
                    ref_pool2d(xv, 6, H, W, cases[ci].k, cases[ci].s, cases[ci].p, cases[ci].d,
                               out[0], out[1], false, false, y, yi);
                    h_check_tensor("avg_pool2d exclude pad", em_avg_pool2d(x, o), y, os, tol, tol);
                }
                free(y);
                free(yi);
                free(xv);
                em_scope_end();
            }
}

static void check_adaptive_interp_ref(void)
{
    for (int k = 0; k < 4; k++)
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            em_dtype dt = float_dtypes[k];
            double tol = h_atol(dt) * 10;
            em_scope_begin();
            const int64_t H = 7, W = 5, OH = 3, OW = 4;
            double *xv;
            em_tensor *x = h_rand(EM_SHAPE(2, 2, H, W), dt, (h_layout)l, -3, 3, &xv);
            double avg[48], mx[48], mi[48];
            for (int64_t pl = 0; pl < 4; pl++)
                for (int64_t oh = 0; oh < OH; oh++)
                    for (int64_t ow = 0; ow < OW; ow++) {
                        int64_t h0 = oh * H / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
                        int64_t w0 = ow * W / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
                        double s = 0, best = -INFINITY;
                        int64_t bi = 0;
                        for (int64_t a = h0; a < h1; a++)
                            for (int64_t b = w0; b < w1; b++) {
                                double v = xv[(pl * H + a) * W + b];
                                s += v;
                                if (v > best) {
                                    best = v;
                                    bi = a * W + b;
                                }
                            }
                        int64_t o = (pl * OH + oh) * OW + ow;
                        avg[o] = s / (double)((h1 - h0) * (w1 - w0));
                        mx[o] = best;
                        mi[o] = (double)bi;
                    }
            em_shape os = EM_SHAPE(2, 2, OH, OW);
            h_check_tensor("adaptive_avg_pool2d", em_adaptive_avg_pool2d(x, OH, OW), avg, os, tol,
                           tol);
            em_tensor *idx = NULL;
            h_check_tensor("adaptive_max_pool2d", em_adaptive_max_pool2d(x, OH, OW, &idx), mx, os,
                           0, 0);
            h_check_tensor("adaptive_max_pool2d indices", idx, mi, os, 0, 0);
            em_release(idx);
            /* nearest and bilinear (align_corners both ways) */
            const int64_t RH = 9, RW = 3;
            double near[108], bil[108], bil_ac[108];
            for (int64_t pl = 0; pl < 4; pl++)
                for (int64_t oh = 0; oh < RH; oh++)
                    for (int64_t ow = 0; ow < RW; ow++) {
                        int64_t o = (pl * RH + oh) * RW + ow;
                        int64_t nh = (int64_t)floor((double)oh * H / RH);
                        int64_t nw = (int64_t)floor((double)ow * W / RW);
                        near[o] = xv[(pl * H + nh) * W + nw];
                        for (int ac = 0; ac < 2; ac++) {
                            double sh = ac ? (double)oh * (H - 1) / (RH - 1)
                                           : fmax(0, (oh + 0.5) * H / RH - 0.5);
                            double sw = ac ? (double)ow * (W - 1) / (RW - 1)
                                           : fmax(0, (ow + 0.5) * W / RW - 0.5);
                            int64_t h0 = (int64_t)sh, w0 = (int64_t)sw;
                            int64_t h1 = h0 + 1 < H ? h0 + 1 : h0, w1 = w0 + 1 < W ? w0 + 1 : w0;
                            double lh = sh - h0, lw = sw - w0;
                            const double *p = xv + pl * H * W;
                            double v =
                                (1 - lh) * ((1 - lw) * p[h0 * W + w0] + lw * p[h0 * W + w1]) +
                                lh * ((1 - lw) * p[h1 * W + w0] + lw * p[h1 * W + w1]);
                            (ac ? bil_ac : bil)[o] = v;
                        }
                    }
            em_shape rs = EM_SHAPE(2, 2, RH, RW);
            h_check_tensor("interpolate nearest",
                           em_interpolate(x, EM_SHAPE(RH, RW), EM_INTERP_NEAREST, false), near, rs,
                           0, 0);
            h_check_tensor("interpolate bilinear",
                           em_interpolate(x, EM_SHAPE(RH, RW), EM_INTERP_BILINEAR, false), bil, rs,
                           tol, tol);
            h_check_tensor("interpolate bilinear align_corners",
                           em_interpolate(x, EM_SHAPE(RH, RW), EM_INTERP_BILINEAR, true), bil_ac,
                           rs, tol, tol);
            /* pixel shuffle round trip and one element, any dtype */
            em_tensor *ps = em_pixel_shuffle(em_reshape(x, EM_SHAPE(1, 4, H, W)), 2);
            CHECK(ps && em_shape_equal(em_tensor_shape(ps), EM_SHAPE(1, 1, 2 * H, 2 * W)),
                  "pixel_shuffle shape");
            /* out[0, 0, 2h+i, 2w+j] = in[0, 2i+j, h, w] */
            CHECK(ps &&
                      em_get_f64(ps, (int64_t[]){0, 0, 3, 4}) == xv[((2 * 1 + 0) * H + 1) * W + 2],
                  "pixel_shuffle element");
            double *back = xv;
            h_check_tensor("pixel_unshuffle inverts", em_pixel_unshuffle(ps, 2), back,
                           EM_SHAPE(1, 4, H, W), 0, 0);
            free(xv);
            em_scope_end();
        }
    em_scope_begin();
    int64_t iv[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    em_tensor *xi = em_reshape(h_from_i64(iv, EM_SHAPE(8)), EM_SHAPE(1, 2, 2, 2));
    em_tensor *pi = em_pixel_shuffle(xi, 1);
    CHECK(pi && em_tensor_dtype(pi) == EM_I64, "pixel_shuffle of integers");
    em_scope_end();
}

static void compare_fixture(h_fixture *fx, const char *name, em_tensor *got, double tol)
{
    em_shape s;
    const double *want = h_fixture_values(fx, name, &s);
    if (!want) return;
    h_check_tensor(name, got, want, s, tol, tol);
}

static void check_fixtures(void)
{
    h_fixture *fx = h_fixture_load("pool.emfx");
    if (!fx) return;
    for (int pass = 0; pass < 2; pass++) {
        em_scope_begin();
        double tol = pass ? 1e-5 : 1e-10;
        em_dtype dt = pass ? EM_F32 : EM_F64;
        em_tensor *x1 = em_cast(h_fixture_tensor(fx, "x1"), dt);
        em_tensor *x2 = em_cast(h_fixture_tensor(fx, "x2"), dt);
        em_tensor *x3 = em_cast(h_fixture_tensor(fx, "x3"), dt);
        em_tensor *xi = em_cast(h_fixture_tensor(fx, "xi"), dt);
        em_tensor *xs = em_cast(h_fixture_tensor(fx, "xs"), dt);
        em_tensor *idx;
        compare_fixture(
            fx, "max2d_a",
            em_max_pool2d(x2,
                          (em_pool_opts){
                              .kernel = {3, 3}, .stride = {2, 2}, .pad = {1, 1}, .ceil_mode = true},
                          &idx),
            tol);
        compare_fixture(fx, "max2d_a.idx", idx, 0);
        compare_fixture(fx, "max2d_b",
                        em_max_pool2d(x2,
                                      (em_pool_opts){.kernel = {2, 3},
                                                     .stride = {1, 2},
                                                     .pad = {1, 0},
                                                     .dilation = {2, 2}},
                                      &idx),
                        tol);
        compare_fixture(fx, "max2d_b.idx", idx, 0);
        em_pool_opts a = {.kernel = {3, 3}, .stride = {2, 2}, .pad = {1, 1}, .ceil_mode = true};
        compare_fixture(fx, "avg2d_a", em_avg_pool2d(x2, a), tol);
        a.exclude_pad = true;
        compare_fixture(fx, "avg2d_b", em_avg_pool2d(x2, a), tol);
        em_pool_opts o1 = {.kernel = {4}, .stride = {3}, .pad = {2}};
        compare_fixture(fx, "max1d", em_max_pool1d(x1, o1, &idx), tol);
        compare_fixture(fx, "max1d.idx", idx, 0);
        compare_fixture(fx, "avg1d", em_avg_pool1d(x1, o1), tol);
        compare_fixture(
            fx, "max3d",
            em_max_pool3d(
                x3, (em_pool_opts){.kernel = {2, 2, 2}, .stride = {1, 2, 2}, .pad = {1, 1, 1}},
                &idx),
            tol);
        compare_fixture(fx, "max3d.idx", idx, 0);
        compare_fixture(fx, "avg3d",
                        em_avg_pool3d(x3, (em_pool_opts){.kernel = {2, 3, 2},
                                                         .stride = {2, 2, 2},
                                                         .pad = {1, 1, 0},
                                                         .ceil_mode = true}),
                        tol);
        compare_fixture(fx, "aavg2d", em_adaptive_avg_pool2d(x2, 4, 3), tol);
        compare_fixture(fx, "amax2d", em_adaptive_max_pool2d(x2, 5, 3, &idx), tol);
        compare_fixture(fx, "amax2d.idx", idx, 0);
        compare_fixture(fx, "aavg1d", em_adaptive_avg_pool1d(x1, 4), tol);
        compare_fixture(fx, "amax1d", em_adaptive_max_pool1d(x1, 5, &idx), tol);
        compare_fixture(fx, "amax1d.idx", idx, 0);
        compare_fixture(fx, "nearest", em_interpolate(xi, EM_SHAPE(7, 3), EM_INTERP_NEAREST, 0),
                        tol);
        compare_fixture(fx, "bilinear",
                        em_interpolate(xi, EM_SHAPE(8, 7), EM_INTERP_BILINEAR, false), tol);
        compare_fixture(fx, "bilinear_ac",
                        em_interpolate(xi, EM_SHAPE(8, 7), EM_INTERP_BILINEAR, true), tol);
        compare_fixture(fx, "bicubic", em_interpolate(xi, EM_SHAPE(9, 6), EM_INTERP_BICUBIC, false),
                        tol);
        compare_fixture(fx, "bicubic_ac",
                        em_interpolate(xi, EM_SHAPE(3, 6), EM_INTERP_BICUBIC, true), tol);
        compare_fixture(fx, "linear1d", em_interpolate(x1, EM_SHAPE(17), EM_INTERP_BILINEAR, 0),
                        tol);
        compare_fixture(fx, "nearest1d", em_interpolate(x1, EM_SHAPE(5), EM_INTERP_NEAREST, 0),
                        tol);
        compare_fixture(fx, "shuffle", em_pixel_shuffle(xs, 2), tol);
        compare_fixture(fx, "unshuffle", em_pixel_unshuffle(em_pixel_shuffle(xs, 2), 2), tol);
        em_scope_end();
    }
    h_fixture_free(fx);
}

static void check_errors(void)
{
    em_scope_begin();
    em_tensor *x = em_ones(EM_SHAPE(1, 2, 4, 4), EM_F32, h_dev);
    em_tensor *idx = (em_tensor *)1;
    CHECK(em_max_pool2d(x, (em_pool_opts){.kernel = {2, 2}, .pad = {2, 0}}, &idx) == NULL &&
              idx == NULL,
          "pad more than half the kernel");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_max_pool2d: padding 2 is more than half the kernel 2");
    CHECK(em_avg_pool2d(x, (em_pool_opts){.kernel = {5, 5}}) == NULL, "kernel larger than input");
    CHECK_ERR(EM_ERR_SHAPE, "em_avg_pool2d: input size 4 with kernel 5");
    CHECK(em_max_pool1d(x, (em_pool_opts){.kernel = {2}}, NULL) == NULL, "wrong rank");
    CHECK_ERR(EM_ERR_SHAPE, "em_max_pool1d");
    CHECK(em_avg_pool2d(x, (em_pool_opts){0}) == NULL, "kernel 0");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_avg_pool2d");
    CHECK(em_max_pool2d(em_ones(EM_SHAPE(1, 1, 2, 2), EM_I32, h_dev),
                        (em_pool_opts){.kernel = {2, 2}}, NULL) == NULL,
          "integer pooling");
    CHECK_ERR(EM_ERR_DTYPE, "em_max_pool2d: input must be a float tensor, got i32");
    CHECK(em_adaptive_avg_pool2d(x, 0, 2) == NULL, "adaptive size 0");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_adaptive_avg_pool2d");
    CHECK(em_interpolate(x, EM_SHAPE(3), EM_INTERP_NEAREST, false) == NULL, "interp rank");
    CHECK_ERR(EM_ERR_SHAPE, "em_interpolate");
    CHECK(em_interpolate(x, EM_SHAPE(3, 3), EM_INTERP_NEAREST, true) == NULL, "nearest + ac");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_interpolate: align_corners");
    CHECK(em_pixel_shuffle(em_ones(EM_SHAPE(1, 3, 2, 2), EM_F32, h_dev), 2) == NULL, "shuffle");
    CHECK_ERR(EM_ERR_SHAPE, "em_pixel_shuffle: 3 channels are not divisible by 2^2");
    CHECK(em_pixel_unshuffle(x, 3) == NULL, "unshuffle");
    CHECK_ERR(EM_ERR_SHAPE, "em_pixel_unshuffle");
    CHECK(em_max_pool2d(NULL, (em_pool_opts){.kernel = {2, 2}}, NULL) == NULL, "NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_max_pool2d: argument `x` is NULL");
    /* unbatched input keeps its rank */
    em_tensor *u = em_max_pool2d(em_ones(EM_SHAPE(2, 4, 4), EM_F32, h_dev),
                                 (em_pool_opts){.kernel = {2, 2}}, NULL);
    CHECK(u && em_shape_equal(em_tensor_shape(u), EM_SHAPE(2, 2, 2)), "unbatched pooling");
    em_scope_end();
}

void conf_pool(void)
{
    check_pool_ref();
    check_adaptive_interp_ref();
    check_fixtures();
    check_errors();
}
