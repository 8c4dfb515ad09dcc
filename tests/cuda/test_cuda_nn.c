/* The CUDA backend's norms, real FFT, integer matmul, grouped / f16 / strided convolution and
 * strided / half max pooling against the CPU backend, on sizes the conformance suite does not
 * reach: long rows, more than 2^16 rows, multi-block grids, tails, strided and flipped inputs. */
#include <string.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_conv.h"
#include "harness.h"
#include "tensor/op.h"

static em_device dev;

/* got (on the device) against want (CPU) as f64, elementwise; reports the first mismatch. */
static void compare(const char *what, em_tensor *got, em_tensor *want, double atol, double rtol)
{
    h_compare_dev(what, got, want, atol, rtol, dev);
}

/* A random tensor of shape sh on the CPU (*c) and the same values on the device (*d); layout 1:
 * a transposed view of the last two dims, 2: flipped along dim 0, 3: every other element of
 * the last dim (a view with step 2). */
static void mk(em_shape sh, int layout, em_dtype dt, double lo, double hi, em_tensor **c,
               em_tensor **d)
{
    if (layout == 1 && sh.rank >= 2) {
        em_shape b = sh;
        b.dims[sh.rank - 1] = sh.dims[sh.rank - 2];
        b.dims[sh.rank - 2] = sh.dims[sh.rank - 1];
        em_tensor *cb = h_rand(b, dt, H_CONTIG, lo, hi, NULL);
        *c = em_transpose(cb, sh.rank - 2, sh.rank - 1);
        *d = em_transpose(em_to_device(cb, dev), sh.rank - 2, sh.rank - 1);
        return;
    }
    if (layout == 3 && sh.rank >= 1) {
        em_shape b = sh;
        b.dims[sh.rank - 1] *= 2;
        em_tensor *cb = h_rand(b, dt, H_CONTIG, lo, hi, NULL);
        int64_t e = b.dims[sh.rank - 1];
        *c = em_slice(cb, sh.rank - 1, 0, e, 2);
        *d = em_slice(em_to_device(cb, dev), sh.rank - 1, 0, e, 2);
        return;
    }
    em_tensor *cb = h_rand(sh, dt, H_CONTIG, lo, hi, NULL);
    em_tensor *db = em_to_device(cb, dev);
    if (layout == 2 && sh.rank >= 1) {
        *c = em_flip(cb, EM_AXES(0));
        *d = em_flip(db, EM_AXES(0));
        return;
    }
    *c = cb, *d = db;
}

static const em_dtype fdts[] = {EM_F32, EM_F64, EM_F16, EM_BF16};
#define N_FDTS 4

static double tol_of(em_dtype dt)
{
    return dt == EM_F64 ? 1e-10 : dt == EM_F32 ? 2e-4 : dt == EM_F16 ? 4e-3 : 3e-2;
}

static void test_norms(void)
{
    typedef struct ncase {
        em_shape x;
        int n_norm, layout;
    } ncase;
    const ncase cs[] = {
        {EM_SHAPE(3, 20000), 1, 0},   /* long rows: several passes of the block */
        {EM_SHAPE(70000, 3), 1, 0},   /* more than 2^16 rows */
        {EM_SHAPE(4, 37, 129), 2, 1}, /* transposed */
        {EM_SHAPE(5, 9001), 1, 3},    /* a step-2 view */
        {EM_SHAPE(6, 8, 33), 1, 2},   /* flipped */
    };
    for (int t = 0; t < N_FDTS; t++)
        for (size_t p = 0; p < sizeof cs / sizeof cs[0]; p++) {
            em_scope_begin();
            em_tensor *cx, *dx, *cw, *dw, *cb, *db;
            mk(cs[p].x, cs[p].layout, fdts[t], -2, 3, &cx, &dx);
            em_shape ps = {.rank = cs[p].n_norm};
            for (int d = 0; d < ps.rank; d++) ps.dims[d] = cs[p].x.dims[cs[p].x.rank - ps.rank + d];
            mk(ps, p % 2 ? 2 : 0, fdts[t], 0.5, 1.5, &cw, &dw);
            mk(ps, 0, fdts[t], -1, 1, &cb, &db);
            char what[96];
            double tol = tol_of(fdts[t]);
            snprintf(what, sizeof what, "layer_norm %s %s layout %d", em_dtype_name(fdts[t]),
                     tn_dims_str(cs[p].x.dims, cs[p].x.rank), cs[p].layout);
            compare(what, em_layer_norm(dx, cs[p].n_norm, dw, db, 1e-5),
                    em_layer_norm(cx, cs[p].n_norm, cw, cb, 1e-5), tol, tol);
            compare(what, em_layer_norm(dx, cs[p].n_norm, NULL, NULL, 1e-5),
                    em_layer_norm(cx, cs[p].n_norm, NULL, NULL, 1e-5), tol, tol);
            snprintf(what, sizeof what, "rms_norm %s %s layout %d", em_dtype_name(fdts[t]),
                     tn_dims_str(cs[p].x.dims, cs[p].x.rank), cs[p].layout);
            compare(what, em_rms_norm(dx, cs[p].n_norm, dw, 1e-6),
                    em_rms_norm(cx, cs[p].n_norm, cw, 1e-6), tol, tol);
            em_scope_end();
        }
    /* group norm (one group, several, one per channel) and batch norm on [N, C, H, W] */
    const int64_t groups[] = {1, 3, 12};
    for (int t = 0; t < N_FDTS; t++)
        for (int layout = 0; layout < 3; layout++) {
            em_scope_begin();
            em_tensor *cx, *dx, *cw, *dw, *cb, *db, *cm, *dm, *cv, *dv;
            mk(EM_SHAPE(3, 12, 41, 43), layout, fdts[t], -2, 3, &cx, &dx);
            mk(EM_SHAPE(12), layout == 2 ? 2 : 0, fdts[t], 0.5, 1.5, &cw, &dw);
            mk(EM_SHAPE(12), 0, fdts[t], -1, 1, &cb, &db);
            mk(EM_SHAPE(12), 0, fdts[t], -1, 1, &cm, &dm);
            mk(EM_SHAPE(12), 0, fdts[t], 0.2, 2, &cv, &dv);
            double tol = tol_of(fdts[t]);
            char what[96];
            for (int g = 0; g < 3; g++) {
                snprintf(what, sizeof what, "group_norm %s G=%lld layout %d",
                         em_dtype_name(fdts[t]), (long long)groups[g], layout);
                compare(what, em_group_norm(dx, groups[g], dw, db, 1e-5),
                        em_group_norm(cx, groups[g], cw, cb, 1e-5), tol, tol);
            }
            snprintf(what, sizeof what, "group_norm %s no affine layout %d", em_dtype_name(fdts[t]),
                     layout);
            compare(what, em_group_norm(dx, 4, NULL, NULL, 1e-5),
                    em_group_norm(cx, 4, NULL, NULL, 1e-5), tol, tol);
            snprintf(what, sizeof what, "batch_norm %s layout %d", em_dtype_name(fdts[t]), layout);
            compare(what, em_batch_norm(dx, dm, dv, dw, db, 1e-5),
                    em_batch_norm(cx, cm, cv, cw, cb, 1e-5), tol, tol);
            compare(what, em_batch_norm(dx, dm, dv, NULL, NULL, 1e-5),
                    em_batch_norm(cx, cm, cv, NULL, NULL, 1e-5), tol, tol);
            em_scope_end();
        }
}

static void test_int_matmul(void)
{
    const em_dtype dts[] = {EM_I64, EM_I32, EM_I16, EM_I8, EM_U8};
    typedef struct mcase {
        em_shape a, b;
        int la, lb;
    } mcase;
    const mcase cs[] = {
        {EM_SHAPE(300, 70), EM_SHAPE(70, 513), 0, 0},
        {EM_SHAPE(129, 65), EM_SHAPE(65, 33), 1, 1},
        {EM_SHAPE(3, 1, 40, 17), EM_SHAPE(5, 17, 9), 0, 2},
        {EM_SHAPE(1000), EM_SHAPE(1000, 7), 0, 0},
        {EM_SHAPE(70000, 3), EM_SHAPE(3), 0, 0},
    };
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++)
        for (size_t p = 0; p < sizeof cs / sizeof cs[0]; p++) {
            em_scope_begin();
            em_tensor *ca, *da, *cb, *db;
            double lo = dts[t] == EM_U8 ? 0 : -100, hi = 100;
            mk(cs[p].a, cs[p].la, dts[t], lo, hi, &ca, &da);
            mk(cs[p].b, cs[p].lb, dts[t], lo, hi, &cb, &db);
            char what[96];
            snprintf(what, sizeof what, "matmul %s %s x %s", em_dtype_name(dts[t]),
                     tn_dims_str(cs[p].a.dims, cs[p].a.rank),
                     tn_dims_str(cs[p].b.dims, cs[p].b.rank));
            compare(what, em_matmul(da, db), em_matmul(ca, cb), 0, 0);
            em_scope_end();
        }
}

/* Which dtypes test_conv runs: all, only f16/bf16 (again on each path of config
 * cuda_conv_kernel) or only f32 (again on the copy-engine path: cuda_conv_kernel sgt_im2col). */
enum { CONV_ALL, CONV_HALVES, CONV_F32 };

static void test_conv(int only)
{
    typedef struct ccase {
        int nd;
        bool tr;
        em_shape x, w;
        em_conv_opts o;
        int layout;
    } ccase;
    const ccase cs[] = {
        {2,
         false,
         EM_SHAPE(2, 6, 31, 29),
         EM_SHAPE(9, 2, 3, 3),
         {.groups = 3, .pad_lo = {1, 1}, .pad_hi = {1, 1}},
         0},
        {2,
         false,
         EM_SHAPE(3, 16, 40, 41),
         EM_SHAPE(16, 1, 3, 3),
         {.groups = 16, .stride = {2, 1}, .pad_lo = {1, 1}, .pad_hi = {1, 1}},
         1},
        {1, false, EM_SHAPE(4, 8, 3001), EM_SHAPE(8, 4, 5), {.groups = 2, .dilation = {2}}, 3},
        {3, false, EM_SHAPE(2, 4, 9, 10, 11), EM_SHAPE(4, 2, 2, 3, 2), {.groups = 2}, 2},
        {2,
         true,
         EM_SHAPE(2, 6, 17, 15),
         EM_SHAPE(6, 2, 3, 3),
         {.groups = 3, .stride = {2, 2}, .pad_lo = {1, 1}, .pad_hi = {1, 1}, .out_pad = {1, 0}},
         1},
        {2, true, EM_SHAPE(1, 8, 20, 20), EM_SHAPE(8, 1, 4, 4), {.groups = 8, .stride = {2, 2}}, 0},
        {2, /* 16 outputs per group: im2col + the matmul batched over (sample, group) */
         false,
         EM_SHAPE(2, 8, 30, 31),
         EM_SHAPE(32, 4, 3, 3),
         {.groups = 2, .stride = {1, 2}, .pad_lo = {1, 0}, .pad_hi = {1, 2}},
         2},
        {2,
         false,
         EM_SHAPE(2, 3, 65, 66),
         EM_SHAPE(5, 3, 3, 3),
         {.pad_lo = {1, 1}, .pad_hi = {1, 1}},
         1},
        /* f16/bf16 run these as the implicit GEMM: channels-last with 128-row tiles, gathered
         * with element-wise weight loads and 64-row tiles, channels-last 1-D, groups with
         * stride and dilation, a 1x1 kernel with a partial last row tile, a kernel as large as
         * the image (K = 8 58 58, split), gathered with 16-byte weight rows (K = 24) */
        {2,
         false,
         EM_SHAPE(2, 64, 20, 21),
         EM_SHAPE(128, 64, 3, 3),
         {.pad_lo = {1, 1}, .pad_hi = {1, 1}},
         0},
        {2,
         false,
         EM_SHAPE(2, 3, 45, 47),
         EM_SHAPE(64, 3, 7, 7),
         {.stride = {2, 2}, .pad_lo = {3, 3}, .pad_hi = {3, 3}},
         1},
        {1,
         false,
         EM_SHAPE(4, 32, 500),
         EM_SHAPE(48, 32, 5),
         {.dilation = {3}, .pad_lo = {2}, .pad_hi = {2}},
         2},
        {2,
         false,
         EM_SHAPE(2, 32, 17, 19),
         EM_SHAPE(64, 8, 3, 3),
         {.groups = 4, .stride = {2, 2}, .dilation = {2, 2}, .pad_lo = {2, 2}, .pad_hi = {2, 1}},
         3},
        {2, false, EM_SHAPE(3, 40, 9, 11), EM_SHAPE(200, 40, 1, 1), {.groups = 1}, 0},
        {2, false, EM_SHAPE(2, 12, 33, 35), EM_SHAPE(136, 6, 2, 2), {.groups = 2}, 1},
        /* gathered, 128-row tiles, element-wise weight loads (K = 45); gathered, 64-row tiles,
         * 16-byte weight rows (K = 8) */
        {2, false, EM_SHAPE(2, 5, 19, 23), EM_SHAPE(80, 5, 3, 3), {.pad_lo = {1, 0}}, 0},
        {2, false, EM_SHAPE(2, 4, 21, 18), EM_SHAPE(48, 4, 1, 2), {.stride = {2, 1}}, 2},
        {2, false, EM_SHAPE(16, 8, 60, 60), EM_SHAPE(24, 8, 58, 58), {.groups = 1}, 0},
        /* the wgmma implicit GEMM: two k tiles per tap, 80 output channels (a part row tile),
         * dilation, odd OW (element stores); OW = 300 (two column boxes per row); even OW
         * (pair stores), uneven padding */
        {2,
         false,
         EM_SHAPE(2, 128, 9, 13),
         EM_SHAPE(80, 128, 3, 3),
         {.dilation = {2, 1}, .pad_lo = {1, 1}, .pad_hi = {1, 1}},
         0},
        {2,
         false,
         EM_SHAPE(1, 64, 3, 300),
         EM_SHAPE(64, 64, 1, 3),
         {.pad_lo = {0, 1}, .pad_hi = {0, 1}},
         1},
        {2,
         false,
         EM_SHAPE(3, 64, 12, 10),
         EM_SHAPE(136, 64, 2, 2),
         {.pad_lo = {1, 0}, .pad_hi = {0, 1}},
         2},
        /* the columns and one product: stride, dilation and uneven padding in both dims, a
         * strided input */
        {2,
         false,
         EM_SHAPE(2, 16, 23, 19),
         EM_SHAPE(96, 16, 3, 3),
         {.stride = {2, 1}, .dilation = {1, 2}, .pad_lo = {1, 2}, .pad_hi = {0, 1}},
         3},
    };
    for (int t = 0; t < N_FDTS; t++)
        for (size_t p = 0; p < sizeof cs / sizeof cs[0]; p++) {
            bool half = fdts[t] == EM_F16 || fdts[t] == EM_BF16;
            if ((only == CONV_HALVES && !half) || (only == CONV_F32 && fdts[t] != EM_F32)) continue;
            em_scope_begin();
            em_tensor *cx, *dx, *cw, *dw, *cb, *db;
            mk(cs[p].x, cs[p].layout, fdts[t], -1, 1, &cx, &dx);
            mk(cs[p].w, p % 2 ? 2 : 0, fdts[t], -1, 1, &cw, &dw);
            int64_t cout = cs[p].tr ? cs[p].w.dims[1] * cs[p].o.groups : cs[p].w.dims[0];
            mk(EM_SHAPE(cout), 0, fdts[t], -1, 1, &cb, &db);
            em_tensor *(*f)(const em_tensor *, const em_tensor *, const em_tensor *, em_conv_opts);
            if (cs[p].tr)
                f = cs[p].nd == 1   ? em_conv_transpose1d
                    : cs[p].nd == 2 ? em_conv_transpose2d
                                    : em_conv_transpose3d;
            else
                f = cs[p].nd == 1 ? em_conv1d : cs[p].nd == 2 ? em_conv2d : em_conv3d;
            char what[96];
            snprintf(what, sizeof what, "conv%s%dd %s %s groups %lld", cs[p].tr ? "_transpose" : "",
                     cs[p].nd, em_dtype_name(fdts[t]), tn_dims_str(cs[p].x.dims, cs[p].x.rank),
                     (long long)cs[p].o.groups);
            int64_t K = cs[p].w.dims[1]; /* sums of K products: f32 rounding grows with K */
            for (int d = 2; d < cs[p].w.rank; d++) K *= cs[p].w.dims[d];
            double tol = fdts[t] == EM_F64   ? 1e-11
                         : fdts[t] == EM_F32 ? (K > 10000 ? 1e-3 : 1e-4)
                                             : tol_of(fdts[t]);
            compare(what, f(dx, dw, db, cs[p].o), f(cx, cw, cb, cs[p].o), tol, tol);
            compare(what, f(dx, dw, NULL, cs[p].o), f(cx, cw, NULL, cs[p].o), tol, tol);
            em_scope_end();
        }
}

/* Each f16/bf16 conv path at a size where the persistent kernels loop over more tiles than
 * the device has multiprocessors ([32, 256, 28, 28] 3x3 and a 1x1 with 512 channels), against
 * the exact f32 conv on the device of the same values, rounded once. */
static void test_conv_large(void)
{
    const struct {
        em_shape x, w;
        int64_t pad;
    } cs[] = {{EM_SHAPE(32, 256, 28, 28), EM_SHAPE(256, 256, 3, 3), 1},
              {EM_SHAPE(16, 512, 14, 14), EM_SHAPE(384, 512, 1, 1), 0}};
    const char *paths[] = {"mma", "columns", "wgmma", NULL};
    for (int t = 0; t < 2; t++)
        for (size_t p = 0; p < sizeof cs / sizeof cs[0]; p++) {
            em_scope_begin();
            em_dtype dt = t ? EM_BF16 : EM_F16;
            em_tensor *x = em_to_device(h_rand(cs[p].x, dt, H_CONTIG, -1, 1, NULL), dev);
            em_tensor *w = em_to_device(h_rand(cs[p].w, dt, H_CONTIG, -1, 1, NULL), dev);
            em_tensor *b =
                em_to_device(h_rand(EM_SHAPE(cs[p].w.dims[0]), dt, H_CONTIG, -1, 1, NULL), dev);
            em_conv_opts o = {.pad_lo = {cs[p].pad, cs[p].pad}, .pad_hi = {cs[p].pad, cs[p].pad}};
            em_tensor *want = em_cast(
                em_conv2d(em_cast(x, EM_F32), em_cast(w, EM_F32), em_cast(b, EM_F32), o), dt);
            for (int i = 0; i < 4; i++) {
                em_config_set("cuda_conv_kernel", paths[i]);
                char what[96];
                snprintf(what, sizeof what, "conv2d %s %s on %s", em_dtype_name(dt),
                         tn_dims_str(cs[p].x.dims, cs[p].x.rank), paths[i] ? paths[i] : "auto");
                /* one rounding each way of a sum of up to 4608 terms of size < 1 */
                compare(what, em_conv2d(x, w, b, o), want, 0.05, tol_of(dt));
            }
            em_scope_end();
        }
}

/* The f32 copy-engine convolution (config cuda_conv_kernel sgt_im2col: the im2col mode, which
 * auto takes from 128 input channels) at the sizes of test_conv_large, where each block walks
 * several tiles, and at [32, 512, 14, 14] (tiles across rows and images), against
 * em_conv_ig_f32 on the same values; also split-K (config cuda_conv_splits: 3 and 2 k ranges),
 * summed by em_conv_splitk_f32 with the bias. */
static void test_conv_large_f32(void)
{
    const struct {
        em_shape x, w;
        int64_t pad;
    } cs[] = {{EM_SHAPE(32, 256, 28, 28), EM_SHAPE(256, 256, 3, 3), 1},
              {EM_SHAPE(32, 512, 14, 14), EM_SHAPE(512, 512, 3, 3), 1},
              {EM_SHAPE(16, 512, 14, 14), EM_SHAPE(384, 512, 1, 1), 0}};
    for (size_t p = 0; p < sizeof cs / sizeof cs[0]; p++) {
        em_scope_begin();
        em_tensor *x = em_to_device(h_rand(cs[p].x, EM_F32, H_CONTIG, -1, 1, NULL), dev);
        em_tensor *w = em_to_device(h_rand(cs[p].w, EM_F32, H_CONTIG, -1, 1, NULL), dev);
        em_tensor *b =
            em_to_device(h_rand(EM_SHAPE(cs[p].w.dims[0]), EM_F32, H_CONTIG, -1, 1, NULL), dev);
        em_conv_opts o = {.pad_lo = {cs[p].pad, cs[p].pad}, .pad_hi = {cs[p].pad, cs[p].pad}};
        em_config_set("cuda_conv_kernel", "mma");
        em_tensor *want = em_conv2d(x, w, b, o);
        /* sgt_im2col, auto (sgt_im2col from 128 channels), then sgt_im2col split-K */
        for (int i = 0; i < 4; i++) {
            const char *path = i == 1 ? "auto" : "sgt_im2col";
            const char *kern = "em_conv_sgt_f32_i2c";
            const char *splits = i == 2 ? "3" : i == 3 ? "2" : "1";
            em_config_set("cuda_conv_kernel", i == 1 ? NULL : path);
            em_config_set("cuda_conv_splits", i == 1 ? NULL : splits);
            uint64_t n0 = cuda_kernel_uses(dev.index, kern),
                     s0 = cuda_kernel_uses(dev.index, "em_conv_splitk_f32");
            char what[112];
            snprintf(what, sizeof what, "conv2d f32 %s on %s, %s k ranges",
                     tn_dims_str(cs[p].x.dims, cs[p].x.rank), path, i == 1 ? "auto" : splits);
            /* both f32 sums of up to 4608 terms of size < 1, in different orders */
            compare(what, em_conv2d(x, w, b, o), want, 2e-3, 1e-4);
            if (cuda_wgmma_device(dev.index)) {
                CHECK(cuda_kernel_uses(dev.index, kern) > n0, "%s: %s did not run", what, kern);
                if (i >= 2)
                    CHECK(cuda_kernel_uses(dev.index, "em_conv_splitk_f32") > s0,
                          "%s: em_conv_splitk_f32 did not run", what);
            }
        }
        em_config_set("cuda_conv_kernel", NULL);
        em_config_set("cuda_conv_splits", NULL);
        em_scope_end();
    }
}

/* f16/bf16 conv of an input that is contiguous but starts at an odd element (a reshaped slice
 * of a flat tensor): the channels-last copies read it two bytes at a time. Each path. */
static void test_conv_odd_offset(void)
{
    const char *paths[] = {"mma", "columns", "wgmma", NULL};
    for (int t = 0; t < 2; t++) {
        em_scope_begin();
        em_dtype dt = t ? EM_BF16 : EM_F16;
        em_shape xs = EM_SHAPE(2, 64, 9, 10);
        int64_t n = 2 * 64 * 9 * 10;
        em_tensor *flat = h_rand(EM_SHAPE(n + 1), dt, H_CONTIG, -1, 1, NULL);
        em_tensor *cx = em_reshape(em_slice(flat, 0, 1, n + 1, 1), xs);
        em_tensor *dx = em_reshape(em_slice(em_to_device(flat, dev), 0, 1, n + 1, 1), xs);
        CHECK(dx && dx->offset == 1 && tn_is_contiguous(dx), "the input is not a view at 1");
        em_tensor *cw, *dw;
        mk(EM_SHAPE(64, 64, 3, 3), 0, dt, -1, 1, &cw, &dw);
        em_conv_opts o = {.pad_lo = {1, 1}, .pad_hi = {1, 1}};
        em_tensor *want = em_conv2d(cx, cw, NULL, o);
        for (int i = 0; i < 4; i++) {
            em_config_set("cuda_conv_kernel", paths[i]);
            char what[96];
            snprintf(what, sizeof what, "conv2d %s, input at an odd element, on %s",
                     em_dtype_name(dt), paths[i] ? paths[i] : "auto");
            compare(what, em_conv2d(dx, dw, NULL, o), want, tol_of(dt), tol_of(dt));
        }
        em_scope_end();
    }
}

static void test_max_pool(void)
{
    for (int t = 0; t < N_FDTS; t++)
        for (int layout = 0; layout < 4; layout++) {
            em_scope_begin();
            em_tensor *cx, *dx, *ci = NULL, *di = NULL;
            mk(EM_SHAPE(3, 5, 67, 131), layout, fdts[t], -4, 4, &cx, &dx);
            em_pool_opts o = {.kernel = {3, 2}, .stride = {2, 2}, .pad = {1, 1}};
            char what[64];
            snprintf(what, sizeof what, "max_pool2d %s layout %d", em_dtype_name(fdts[t]), layout);
            compare(what, em_max_pool2d(dx, o, &di), em_max_pool2d(cx, o, &ci), 0, 0);
            compare("max_pool2d indices", di, ci, 0, 0);
            em_scope_end();
        }
}

static void test_fft(void)
{
    const int64_t ns[] = {1, 2, 4096, 8192, 1000, 4097, 12};
    const em_dtype dts[] = {EM_F32, EM_F64};
    for (int t = 0; t < 2; t++)
        for (size_t p = 0; p < sizeof ns / sizeof ns[0]; p++)
            for (int dim = 0; dim < 3; dim++) {
                em_scope_begin();
                int64_t n = ns[p], L = n > 2 ? n - n / 3 : n; /* zero-padded to n */
                em_shape sh = dim == 0   ? EM_SHAPE(L, 3)
                              : dim == 1 ? EM_SHAPE(2, L, 3)
                                         : EM_SHAPE(3, 2, L);
                em_tensor *cx, *dx;
                mk(sh, dim == 0 ? 1 : dim == 1 ? 2 : 3, dts[t], -1, 1, &cx, &dx);
                char what[64];
                double tol = dts[t] == EM_F64 ? 1e-9 : 1e-3;
                snprintf(what, sizeof what, "rfft %s n=%lld dim %d", em_dtype_name(dts[t]),
                         (long long)n, dim);
                em_tensor *cy = em_rfft(cx, dim, n), *dy = em_rfft(dx, dim, n);
                compare(what, dy, cy, tol * sqrt((double)n), tol);
                snprintf(what, sizeof what, "irfft %s n=%lld dim %d", em_dtype_name(dts[t]),
                         (long long)n, dim);
                compare(what, em_irfft(dy, dim, n), em_irfft(cy, dim, n), tol, tol);
                /* more points than the spectrum holds: the missing bins are zeros */
                int64_t m = n + 5;
                compare(what, em_irfft(dy, dim, m), em_irfft(cy, dim, m), tol, tol);
                em_scope_end();
            }
}

int main(void)
{
    h_init();
    h_dev = EM_CPU; /* the reference tensors stay on the CPU whatever EMBER_TEST_DEVICE says */
    em_backends_init();
    if (em_backend_find("cuda") < 0) {
        printf("skipped: no CUDA device\n");
        return 0;
    }
    dev = em_device_parse("cuda:0");
    CHECK_OK("em_device_parse(\"cuda:0\")");
    test_norms();
    test_int_matmul();
    test_conv(CONV_ALL);
    /* f32 on the copy-engine kernel (sm_90: one group, 32k input channels, stride 1), the
     * rest on em_conv_ig_f32 as without it; five of the cases fit, each run with and without
     * a bias */
    {
        const char *kern = "em_conv_sgt_f32_i2c";
        uint64_t n0 = cuda_kernel_uses(dev.index, kern);
        em_config_set("cuda_conv_kernel", "sgt_im2col");
        test_conv(CONV_F32);
        em_config_set("cuda_conv_kernel", NULL);
        em_device_sync(dev);
        uint64_t n = cuda_kernel_uses(dev.index, kern) - n0;
        if (cuda_wgmma_device(dev.index))
            CHECK(n >= 10,
                  "cuda_conv_kernel sgt_im2col: %s ran %llu times, not for every case "
                  "that fits",
                  kern, (unsigned long long)n);
    }
    /* f16/bf16 conv on each path asked for where the shape allows it (else the mma.sync
     * implicit GEMM): mma.sync everywhere, the columns and one product (one group, 8k input
     * channels), the wgmma implicit GEMM (on sm_90: one group, 64k input channels, stride 1) */
    const char *paths[] = {"mma", "columns", "wgmma"};
    for (int i = 0; i < 3; i++) {
        em_config_set("cuda_conv_kernel", paths[i]);
        CHECK_OK("em_config_set(cuda_conv_kernel)");
        test_conv(CONV_HALVES);
    }
    em_config_set("cuda_conv_kernel", NULL);
    test_conv_large();
    test_conv_large_f32();
    test_conv_odd_offset();
    test_max_pool();
    test_fft();
    em_device_sync(dev);
    CHECK_OK("em_device_sync");
    return h_finish();
}
