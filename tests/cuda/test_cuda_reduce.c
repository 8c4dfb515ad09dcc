/* The CUDA reductions, scans, softmax and ordering ops against the CPU backend on sizes the
 * conformance suite does not reach: more than 2^16 outputs, long rows split over many blocks,
 * column reductions, odd tails, transposed / sliced / flipped inputs, narrow dtypes, NaN and
 * ties. Without a CUDA device it prints one line and passes. */
#include <string.h>

#include "backend/cuda/cuda.h"
#include "harness.h"
#include "tensor/op.h"

static em_device dev;

typedef enum { V_UNIFORM, V_TIES, V_NAN } vmode;

/* x on the CPU (*c) and the same view of a device copy (*d): layout 0 contiguous, 1 the last two
 * dims transposed, 2 every other row of dim 0, 3 dim 0 flipped. */
static void mk(em_shape sh, em_dtype dt, int layout, vmode m, double lo, double hi, em_tensor **c,
               em_tensor **d)
{
    em_shape p = sh;
    if (layout == 1 && sh.rank >= 2) {
        p.dims[sh.rank - 1] = sh.dims[sh.rank - 2];
        p.dims[sh.rank - 2] = sh.dims[sh.rank - 1];
    }
    if (layout == 2 && sh.rank >= 1) p.dims[0] = 2 * sh.dims[0];
    int64_t n = 1;
    for (int i = 0; i < p.rank; i++) n *= p.dims[i];
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        double u = h_uniform();
        v[i] = m == V_TIES ? (double)(int)(u * 10) : lo + (hi - lo) * u;
        if (m == V_NAN && h_uniform() < 0.01) v[i] = NAN;
    }
    em_tensor *cb = em_from_data(v, EM_F64, p, dt, EM_CPU);
    free(v);
    em_tensor *db = em_to_device(cb, dev);
    if (layout == 1 && sh.rank >= 2) {
        *c = em_transpose(cb, sh.rank - 2, sh.rank - 1);
        *d = em_transpose(db, sh.rank - 2, sh.rank - 1);
    } else if (layout == 2 && sh.rank >= 1) {
        *c = em_slice(cb, 0, 0, p.dims[0], 2);
        *d = em_slice(db, 0, 0, p.dims[0], 2);
    } else if (layout == 3 && sh.rank >= 1) {
        *c = em_flip(cb, EM_AXES(0));
        *d = em_flip(db, EM_AXES(0));
    } else {
        *c = cb, *d = db;
    }
}

/* got (device) against want (CPU): i64 and bool exactly, floats within atol + rtol * |want|. */
static void compare(const char *what, em_tensor *got, em_tensor *want, double atol, double rtol)
{
    h_compare_dev(what, got, want, atol, rtol, dev);
}

static double tol(em_dtype dt)
{
    return dt == EM_F64 ? 1e-10 : dt == EM_F32 ? 2e-5 : dt == EM_F16 ? 2e-3 : 1.6e-2;
}

/* ---- mask reductions ------------------------------------------------------------------------ */

typedef em_tensor *(*red_fn)(const em_tensor *, em_axes, bool);

static em_tensor *var1(const em_tensor *x, em_axes a, bool k)
{
    return em_var(x, a, 1, k);
}
static em_tensor *std0(const em_tensor *x, em_axes a, bool k)
{
    return em_std(x, a, 0, k);
}
static em_tensor *norm1(const em_tensor *x, em_axes a, bool k)
{
    return em_norm(x, 1, a, k);
}
static em_tensor *norm2(const em_tensor *x, em_axes a, bool k)
{
    return em_norm(x, 2, a, k);
}
static em_tensor *norm3(const em_tensor *x, em_axes a, bool k)
{
    return em_norm(x, 3.5, a, k);
}
static em_tensor *norminf(const em_tensor *x, em_axes a, bool k)
{
    return em_norm(x, INFINITY, a, k);
}
static em_tensor *normninf(const em_tensor *x, em_axes a, bool k)
{
    return em_norm(x, -INFINITY, a, k);
}
static em_tensor *norm0(const em_tensor *x, em_axes a, bool k)
{
    return em_norm(x, 0, a, k);
}

static void test_reductions(void)
{
    static const struct {
        em_shape sh;
        em_axes ax;
    } cases[] = {
        {EM_SHAPE(70001, 3), EM_AXES(1)},      /* > 2^16 outputs of 3 */
        {EM_SHAPE(3, 300007), EM_AXES(1)},     /* few long rows: split over blocks */
        {EM_SHAPE(4099, 513), EM_AXES(0)},     /* column sums */
        {EM_SHAPE(1048583), EM_ALL},           /* one long vector, odd tail */
        {EM_SHAPE(33, 65, 67), EM_AXES(0, 2)}, /* two reduced dims around a kept one */
        {EM_SHAPE(2, 70000, 2), EM_AXES(1)},   /* long strided rows */
        {EM_SHAPE(1029, 1024), EM_AXES(1)},    /* row sums: a warp a row, float4 */
        {EM_SHAPE(33, 8192), EM_AXES(1)},      /* row sums: a block a row, float4 */
        {EM_SHAPE(1029, 1024), EM_AXES(0)},    /* column sums, float4 */
    };
    static const red_fn fns[] = {em_sum,   em_mean, em_prod, em_max, em_min,          em_logsumexp,
                                 var1,     std0,    norm1,   norm2,  norm3,           norminf,
                                 normninf, norm0,   em_any,  em_all, em_count_nonzero};
    static const char *names[] = {"sum",       "mean",         "prod",     "max",   "min",
                                  "logsumexp", "var1",         "std0",     "norm1", "norm2",
                                  "norm3.5",   "norminf",      "norm-inf", "norm0", "any",
                                  "all",       "count_nonzero"};
    const int nf = (int)(sizeof fns / sizeof fns[0]);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int layout = 0; layout < 4; layout++) {
            if (layout > 0 && c == 3 && layout != 3) continue;
            em_scope_begin();
            em_tensor *cx, *dx;
            /* values near 1 keep the products finite */
            mk(cases[c].sh, EM_F32, layout, V_UNIFORM, 0.999, 1.001, &cx, &dx);
            for (int f = 0; f < nf; f++)
                for (int keep = 0; keep < 2; keep++) {
                    char what[128];
                    snprintf(what, sizeof what, "%s f32 case %d layout %d keep %d", names[f],
                             (int)c, layout, keep);
                    double rt = f == 2 ? 1e-4 : 2e-5;
                    compare(what, fns[f](dx, cases[c].ax, keep), fns[f](cx, cases[c].ax, keep), rt,
                            rt);
                }
            em_scope_end();
        }
    /* every dtype for the kinds that take it; NaN for the floats */
    static const em_dtype dts[] = {EM_F64, EM_F16, EM_BF16, EM_I64, EM_I32,
                                   EM_I16, EM_I8,  EM_U8,   EM_BOOL};
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++)
        for (size_t c = 0; c < 3; c++) {
            em_scope_begin();
            em_dtype dt = dts[t];
            bool fl = em_dtype_is_float(dt);
            em_tensor *cx, *dx;
            mk(cases[c].sh, dt, c == 2 ? 1 : 3, fl ? V_NAN : V_UNIFORM, fl ? -2 : -100,
               fl ? 2 : 100, &cx, &dx);
            for (int f = 0; f < nf; f++) {
                if (!fl && (f == 1 || (f >= 5 && f <= 13))) continue; /* float-only kinds */
                char what[128];
                snprintf(what, sizeof what, "%s %s case %d", names[f], em_dtype_name(dt), (int)c);
                em_tensor *w = fns[f](cx, cases[c].ax, false);
                em_clear_error();
                if (!w) continue; /* the front-end refuses this dtype */
                double rt = f == 2 ? 1e-2 : 4 * tol(dt);
                compare(what, fns[f](dx, cases[c].ax, false), w, rt, rt);
            }
            em_scope_end();
        }
}

static void test_arg(void)
{
    static const em_shape shapes[] = {EM_SHAPE(70001, 5), EM_SHAPE(3, 200003), EM_SHAPE(4099, 300)};
    static const em_dtype dts[] = {EM_F32, EM_F64, EM_BF16, EM_I32, EM_U8};
    for (size_t s = 0; s < 3; s++)
        for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++)
            for (int vm = 0; vm < 3; vm++) {
                em_dtype dt = dts[t];
                if (vm == V_NAN && !em_dtype_is_float(dt)) continue;
                em_scope_begin();
                em_tensor *cx, *dx;
                mk(shapes[s], dt, s == 2 ? 1 : 2, (vmode)vm, -50, 50, &cx, &dx);
                for (int dim = -1; dim < 2; dim++) {
                    int dd = dim < 0 ? EM_FLAT : dim;
                    char what[128];
                    snprintf(what, sizeof what, "argmax %s shape#%d vals %d dim %d",
                             em_dtype_name(dt), (int)s, vm, dim);
                    compare(what, em_argmax(dx, dd, false), em_argmax(cx, dd, false), 0, 0);
                    what[4] = 'i', what[5] = 'n';
                    compare(what, em_argmin(dx, dd, true), em_argmin(cx, dd, true), 0, 0);
                    if (dim < 0) continue;
                    em_tensor *gv = NULL, *gi = NULL, *wv = NULL, *wi = NULL;
                    em_max_dim(dx, dim, false, &gv, &gi);
                    em_max_dim(cx, dim, false, &wv, &wi);
                    snprintf(what, sizeof what, "max_dim %s shape#%d vals %d dim %d",
                             em_dtype_name(dt), (int)s, vm, dim);
                    compare(what, gv, wv, 0, 0);
                    compare(what, gi, wi, 0, 0);
                    em_min_dim(dx, dim, true, &gv, &gi);
                    em_min_dim(cx, dim, true, &wv, &wi);
                    what[1] = 'i', what[2] = 'n';
                    compare(what, gv, wv, 0, 0);
                    compare(what, gi, wi, 0, 0);
                }
                em_scope_end();
            }
}

/* ---- scans ------------------------------------------------------------------------------------
 */

static void test_scans(void)
{
    static const em_shape shapes[] = {EM_SHAPE(70001, 3), EM_SHAPE(3, 100003), EM_SHAPE(301, 257)};
    static const em_dtype dts[] = {EM_F32, EM_F64, EM_F16, EM_I64, EM_I8, EM_BOOL};
    for (size_t s = 0; s < 3; s++)
        for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++)
            for (int dim = 0; dim < 2; dim++) {
                em_dtype dt = dts[t];
                bool fl = em_dtype_is_float(dt);
                em_scope_begin();
                em_tensor *cx, *dx;
                mk(shapes[s], dt, (int)(s + t) % 4, fl ? V_NAN : V_TIES, 0.9999, 1.0001, &cx, &dx);
                char what[128];
                double rt = 4 * tol(dt);
                snprintf(what, sizeof what, "cumsum %s shape#%d dim %d", em_dtype_name(dt), (int)s,
                         dim);
                compare(what, em_cumsum(dx, dim), em_cumsum(cx, dim), rt, rt);
                snprintf(what, sizeof what, "cumprod %s shape#%d dim %d", em_dtype_name(dt), (int)s,
                         dim);
                compare(what, em_cumprod(dx, dim), em_cumprod(cx, dim), rt, rt);
                for (int mx = 0; mx < 2; mx++) {
                    em_tensor *gv = NULL, *gi = NULL, *wv = NULL, *wi = NULL;
                    (mx ? em_cummax : em_cummin)(dx, dim, &gv, &gi);
                    (mx ? em_cummax : em_cummin)(cx, dim, &wv, &wi);
                    snprintf(what, sizeof what, "%s %s shape#%d dim %d", mx ? "cummax" : "cummin",
                             em_dtype_name(dt), (int)s, dim);
                    compare(what, gv, wv, 0, 0);
                    compare(what, gi, wi, 0, 0);
                }
                em_scope_end();
            }
}

/* ---- softmax ----------------------------------------------------------------------------------
 */

static void test_softmax(void)
{
    static const em_shape shapes[] = {EM_SHAPE(20000, 1024), EM_SHAPE(1000, 1000),
                                      EM_SHAPE(64, 5000),    EM_SHAPE(10, 20001),
                                      EM_SHAPE(70001, 7),    EM_SHAPE(3, 33, 129)};
    static const em_dtype dts[] = {EM_F32, EM_F64, EM_F16, EM_BF16};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++)
            for (int layout = 0; layout < 4; layout++) {
                if (t > 0 && layout > 1) continue;
                if (s == 0 && layout > 0 && t > 0) continue;
                em_dtype dt = dts[t];
                em_scope_begin();
                em_tensor *cx, *dx;
                mk(shapes[s], dt, layout, V_UNIFORM, -30, 30, &cx, &dx);
                int rank = shapes[s].rank;
                for (int dim = rank - 1; dim >= 0; dim--) {
                    if (dim != rank - 1 && s < 2) continue; /* the big rows: last dim only */
                    char what[128];
                    double rt = 4 * tol(dt);
                    snprintf(what, sizeof what, "softmax %s shape#%d layout %d dim %d",
                             em_dtype_name(dt), (int)s, layout, dim);
                    compare(what, em_softmax(dx, dim), em_softmax(cx, dim), 1e-7, rt);
                    what[0] = 'S';
                    compare(what, em_log_softmax(dx, dim), em_log_softmax(cx, dim), rt, rt);
                }
                em_scope_end();
            }
}

/* ---- ordering ---------------------------------------------------------------------------------
 */

static void test_order(void)
{
    static const em_shape shapes[] = {EM_SHAPE(70001, 5),  EM_SHAPE(257, 4096),
                                      EM_SHAPE(3, 10007),  EM_SHAPE(16, 64, 1024),
                                      EM_SHAPE(2, 100003), EM_SHAPE(999, 33)};
    static const em_dtype dts[] = {EM_F32, EM_F64, EM_F16, EM_I32, EM_I64, EM_U8};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++)
            for (int vm = 0; vm < 3; vm++) {
                em_dtype dt = dts[t];
                if (vm == V_NAN && !em_dtype_is_float(dt)) continue;
                if (vm == V_UNIFORM && !em_dtype_is_float(dt)) continue;
                em_scope_begin();
                em_tensor *cx, *dx;
                int layout = (int)(s + t + vm) % 4;
                mk(shapes[s], dt, layout, (vmode)vm, -1000, 1000, &cx, &dx);
                int last = shapes[s].rank - 1;
                char what[128];
                em_tensor *gv = NULL, *gi = NULL, *wv = NULL, *wi = NULL;
                if (s != 3 && s != 4) {
                    for (int desc = 0; desc < 2; desc++) {
                        em_sort(dx, last, desc, &gv, &gi);
                        em_sort(cx, last, desc, &wv, &wi);
                        snprintf(what, sizeof what, "sort %s shape#%d vals %d layout %d desc %d",
                                 em_dtype_name(dt), (int)s, vm, layout, desc);
                        compare(what, gv, wv, 0, 0);
                        compare(what, gi, wi, 0, 0);
                    }
                    em_median(dx, last, s & 1, &gv, &gi);
                    em_median(cx, last, s & 1, &wv, &wi);
                    snprintf(what, sizeof what, "median %s shape#%d vals %d layout %d",
                             em_dtype_name(dt), (int)s, vm, layout);
                    compare(what, gv, wv, 0, 0);
                    compare(what, gi, wi, 0, 0);
                }
                static const int64_t ks[] = {1, 5, 10, 16, 40};
                for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++)
                    for (int dim = 0; dim <= last; dim += last)
                        for (int lg = 0; lg < 2; lg++) {
                            if (ks[k] > shapes[s].dims[dim]) continue;
                            em_topk(dx, ks[k], dim, lg, &gv, &gi);
                            em_topk(cx, ks[k], dim, lg, &wv, &wi);
                            snprintf(what, sizeof what,
                                     "topk %s shape#%d vals %d layout %d k %d dim %d largest %d",
                                     em_dtype_name(dt), (int)s, vm, layout, (int)ks[k], dim, lg);
                            compare(what, gv, wv, 0, 0);
                            compare(what, gi, wi, 0, 0);
                        }
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
    test_reductions();
    test_arg();
    test_scans();
    test_softmax();
    test_order();
    em_device_sync(dev);
    CHECK_OK("em_device_sync");
    return h_finish();
}
