/* The CUDA backend against the CPU backend on the same inputs: data round trips, fill, casts,
 * copies of strided views, every elementwise op it implements (contiguous, and on transposed,
 * flipped and broadcast inputs), where/masked_fill/clamp, the reductions and softmax, the pool
 * and the kernel cache, and its error messages. Without a CUDA device it checks that the backend is
 * absent. */
#include <string.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_conv.h"
#include "harness.h"
#include "tensor/op.h"

static em_device dev;

static const int64_t sizes[] = {1, 7, 1000, 4099, 196613};
#define N_SIZES (int)(sizeof sizes / sizeof sizes[0])

/* n random values in [lo, hi); with `special`, the first ones are NaN, +-inf, +-0 and +-1. */
static double *values(int64_t n, double lo, double hi, bool special)
{
    double *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = lo + (hi - lo) * h_uniform();
    static const double sp[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0, -1.0, 0.5};
    if (special)
        for (int64_t i = 0; i < n && i < 8; i++) v[i] = sp[i];
    return v;
}

/* Both tensors as f64 (or i64 when exact) compared elementwise; reports the first mismatch. */
static void compare(const char *what, em_tensor *got, em_tensor *want, double atol, double rtol)
{
    h_compare_dev(what, got, want, atol, rtol, dev);
}

static em_tensor *pair(const double *v, int64_t n, em_dtype dt, em_tensor **on_dev)
{
    em_tensor *c = em_from_data(v, EM_F64, EM_SHAPE(n), dt, EM_CPU);
    *on_dev = em_to_device(c, dev);
    return c;
}

static void test_round_trip(void)
{
    const em_dtype dts[] = {EM_F32, EM_F64, EM_I64, EM_I32, EM_I16, EM_U8, EM_BOOL, EM_F16};
    for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++)
        for (int s = 0; s < N_SIZES; s++) {
            em_scope_begin();
            double *v = values(sizes[s], -100, 100, false);
            em_tensor *d, *c = pair(v, sizes[s], dts[k], &d);
            em_tensor *back = em_to_device(d, EM_CPU);
            CHECK(back && em_tensor_device(back).backend == 0, "round trip to the host");
            char what[64];
            snprintf(what, sizeof what, "round trip %s n=%lld", em_dtype_name(dts[k]),
                     (long long)sizes[s]);
            compare(what, d, c, 0, 0);
            if (back) {
                size_t nb = (size_t)sizes[s] * em_dtype_size(dts[k]);
                CHECK(memcmp(em_tensor_data(back), em_tensor_data(c), nb) == 0, "%s: bytes differ",
                      what);
            }
            free(v);
            em_scope_end();
        }
    /* strided views on the device become contiguous through the strided copy kernel */
    em_scope_begin();
    em_tensor *c = h_rand(EM_SHAPE(37, 53), EM_F32, H_CONTIG, -1, 1, NULL);
    em_tensor *d = em_to_device(c, dev);
    compare("contiguous(transpose)", em_contiguous(em_transpose(d, 0, 1)),
            em_contiguous(em_transpose(c, 0, 1)), 0, 0);
    compare("contiguous(flip)", em_contiguous(em_flip(d, (em_axes){1, {0}})),
            em_contiguous(em_flip(c, (em_axes){1, {0}})), 0, 0);
    compare("to_device(transposed cpu view)", em_to_device(em_transpose(c, 0, 1), dev),
            em_contiguous(em_transpose(c, 0, 1)), 0, 0);
    if (em_backend_get(dev.backend)->device_count() > 1) {
        em_device d1 = {dev.backend, 1};
        compare("cuda:0 -> cuda:1", em_to_device(em_to_device(d, d1), dev), c, 0, 0);
    }
    em_scope_end();
}

static void test_fill(void)
{
    const em_dtype dts[] = {EM_F32, EM_F64, EM_I64, EM_I32, EM_I8, EM_U8, EM_BOOL, EM_F16, EM_BF16};
    const double vals[] = {3.25, -7.0, 0.0, 1e10};
    for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++)
        for (size_t j = 0; j < sizeof vals / sizeof vals[0]; j++) {
            em_scope_begin();
            char what[64];
            snprintf(what, sizeof what, "full(%g) %s", vals[j], em_dtype_name(dts[k]));
            compare(what, em_full(EM_SHAPE(3, 1001), vals[j], dts[k], dev),
                    em_full(EM_SHAPE(3, 1001), vals[j], dts[k], EM_CPU), 0, 0);
            em_scope_end();
        }
}

static void test_cast(void)
{
    const em_dtype dts[] = {EM_F32, EM_F64, EM_I64};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            for (int s = 0; s < N_SIZES; s++) {
                em_scope_begin();
                double *v = values(sizes[s], -1e6, 1e6, dts[a] != EM_I64);
                if (sizes[s] > 9) v[8] = 1e30; /* out of i64 range */
                em_tensor *d, *c = pair(v, sizes[s], dts[a], &d);
                char what[64];
                snprintf(what, sizeof what, "cast %s -> %s n=%lld", em_dtype_name(dts[a]),
                         em_dtype_name(dts[b]), (long long)sizes[s]);
                compare(what, em_cast(d, dts[b]), em_cast(c, dts[b]), 0, 0);
                free(v);
                em_scope_end();
            }
}

static em_params params_for(em_op_kind k)
{
    em_params p = {.act = {.v = {0, 0}}};
    switch (k) {
    case EM_OP_LEAKY_RELU: p.act.negative_slope = 0.01; break;
    case EM_OP_ELU: p.act.alpha = 1.0; break;
    case EM_OP_CELU: p.act.alpha = 1.3; break;
    case EM_OP_SOFTPLUS: p.act.beta = 1.5, p.act.threshold = 2.0; break;
    case EM_OP_HARDTANH: p.act.min_val = -0.7, p.act.max_val = 1.2; break;
    default: break;
    }
    return p;
}

/* The kinds flagged `flag` (IR_EW1, IR_EW2) with a scalar expression in the op table, the logical
 * ones left out: every such kind runs on CUDA from its generated code. */
static size_t table_kinds(uint32_t flag, em_op_kind *out)
{
    size_t n = 0;
    for (int k = 0; k < EM_OP_COUNT; k++) {
        const ir_info *r = ir_info_of((em_op_kind)k);
        if ((r->flags & flag) && r->expr[0] && !(r->flags & IR_INTERNAL) &&
            r->dtype != IR_DT_LOGICAL)
            out[n++] = (em_op_kind)k;
    }
    return n;
}

static double atol_of(em_dtype dt)
{
    return dt == EM_F32 ? 2e-6 : 1e-14;
}

static double rtol_of(em_dtype dt)
{
    return dt == EM_F32 ? 1e-5 : 1e-13;
}

static void test_unary(void)
{
    em_op_kind kinds[EM_OP_COUNT];
    const size_t n_kinds = table_kinds(IR_EW1, kinds);
    const em_dtype dts[] = {EM_F32, EM_F64};
    for (size_t k = 0; k < n_kinds; k++)
        for (int t = 0; t < 2; t++)
            for (int s = 0; s < N_SIZES; s++) {
                /* float in, same float out: the predicates (bool out) and bitwise_not (integers
                   only) are tested through their front-ends in test_cuda_ew.c */
                em_op_kind kk = kinds[k];
                if (kk == EM_OP_ISNAN || kk == EM_OP_ISINF || kk == EM_OP_ISFINITE ||
                    kk == EM_OP_LOGICAL_NOT || kk == EM_OP_BITWISE_NOT)
                    continue;
                em_scope_begin();
                double *v = values(sizes[s], -3, 3, true);
                em_tensor *d, *c = pair(v, sizes[s], dts[t], &d);
                em_params f = params_for(kinds[k]);
                em_tensor *oc = tn_new(dts[t], &sizes[s], 1, EM_CPU);
                em_tensor *od = tn_new(dts[t], &sizes[s], 1, dev);
                oc = tn_run(kinds[k], oc, &c, 1, &f);
                od = tn_run(kinds[k], od, &d, 1, &f);
                char what[64];
                snprintf(what, sizeof what, "%s %s n=%lld", em_op_name(kinds[k]),
                         em_dtype_name(dts[t]), (long long)sizes[s]);
                compare(what, od, oc, atol_of(dts[t]), rtol_of(dts[t]));
                free(v);
                em_scope_end();
            }
}

static void test_binary(void)
{
    em_op_kind kinds[EM_OP_COUNT];
    const size_t n_kinds = table_kinds(IR_EW2, kinds);
    const em_dtype dts[] = {EM_F32, EM_F64};
    for (size_t k = 0; k < n_kinds; k++)
        for (int t = 0; t < 2; t++)
            for (int s = 0; s < N_SIZES; s++) {
                /* float in, same float out: the predicates (bool out) and bitwise_not (integers
                   only) are tested through their front-ends in test_cuda_ew.c */
                em_op_kind kk = kinds[k];
                if (kk == EM_OP_ISNAN || kk == EM_OP_ISINF || kk == EM_OP_ISFINITE ||
                    kk == EM_OP_LOGICAL_NOT || kk == EM_OP_BITWISE_NOT)
                    continue;
                em_scope_begin();
                double *v = values(sizes[s], -3, 3, true);
                double *w = values(sizes[s], -3, 3, false);
                if (sizes[s] > 20) { /* zeros and equal pairs on the right too */
                    w[9] = 0, w[10] = -0.0, w[11] = NAN, w[12] = INFINITY;
                    w[13] = v[13], w[14] = v[14];
                }
                em_tensor *d, *c = pair(v, sizes[s], dts[t], &d);
                em_tensor *d2, *c2 = pair(w, sizes[s], dts[t], &d2);
                bool cmp = ir_info_of(kinds[k])->dtype == IR_DT_COMPARE;
                em_dtype od_t = cmp ? EM_BOOL : dts[t];
                em_tensor *ic[2] = {c, c2}, *id[2] = {d, d2};
                em_tensor *oc = tn_run(kinds[k], tn_new(od_t, &sizes[s], 1, EM_CPU), ic, 2, NULL);
                em_tensor *od = tn_run(kinds[k], tn_new(od_t, &sizes[s], 1, dev), id, 2, NULL);
                char what[64];
                snprintf(what, sizeof what, "%s %s n=%lld", em_op_name(kinds[k]),
                         em_dtype_name(dts[t]), (long long)sizes[s]);
                compare(what, od, oc, atol_of(dts[t]), rtol_of(dts[t]));
                free(v);
                free(w);
                em_scope_end();
            }
    /* the public front-ends reach the same kernels */
    em_scope_begin();
    em_tensor *a = h_rand(EM_SHAPE(5, 9), EM_F32, H_CONTIG, -2, 2, NULL);
    em_tensor *b = h_rand(EM_SHAPE(5, 9), EM_F32, H_CONTIG, -2, 2, NULL);
    em_tensor *da = em_to_device(a, dev), *db = em_to_device(b, dev);
    compare("em_add", em_add(da, db), em_add(a, b), 0, 0);
    compare("em_lt", em_lt(da, db), em_lt(a, b), 0, 0);
    compare("em_sigmoid", em_sigmoid(da), em_sigmoid(a), 2e-6, 1e-5);
    em_scope_end();
}

/* The same random values as a CPU tensor *c and a device tensor *d, both seen through the same
 * view: 0 contiguous, 1 last two dims transposed (rank >= 2), 2 dim 0 flipped (rank >= 1). */
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
    em_tensor *cb = h_rand(sh, dt, H_CONTIG, lo, hi, NULL);
    em_tensor *db = em_to_device(cb, dev);
    if (layout == 2 && sh.rank >= 1) {
        *c = em_flip(cb, EM_AXES(0));
        *d = em_flip(db, EM_AXES(0));
        return;
    }
    *c = cb, *d = db;
}

/* pairs of shapes that broadcast (and same-shape pairs for the strided layouts) */
static const em_shape bshapes[][2] = {
    {EM_SHAPE(5, 1, 7), EM_SHAPE(3, 1)},
    {EM_SHAPE(4, 6), EM_SHAPE(6)},
    {EM_SHAPE(33, 65), EM_SHAPE(33, 65)},
    {EM_SHAPE(2, 3, 4, 5), EM_SHAPE(1)},
    {EM_SHAPE(1, 2, 1, 2, 1, 2, 1, 3), EM_SHAPE(2, 1, 2, 1, 2, 1, 2, 1)},
    {EM_SHAPE(0, 3), EM_SHAPE(3)},
    {EM_SCALAR, EM_SHAPE(4, 1)}};
#define N_BSHAPES (int)(sizeof bshapes / sizeof bshapes[0])

static void test_broadcast(void)
{
    em_op_kind kinds[EM_OP_COUNT];
    const size_t n_kinds = table_kinds(IR_EW2, kinds);
    const em_dtype dts[] = {EM_F32, EM_F64};
    for (size_t k = 0; k < n_kinds; k++)
        for (int t = 0; t < 2; t++)
            for (int p = 0; p < N_BSHAPES; p++)
                for (int la = 0; la < 3; la++) {
                    em_scope_begin();
                    em_tensor *ca, *da, *cb, *db;
                    mk(bshapes[p][0], la, dts[t], -3, 3, &ca, &da);
                    mk(bshapes[p][1], (la + 1) % 3, dts[t], -3, 3, &cb, &db);
                    int64_t s[EM_MAX_RANK];
                    int r;
                    tn_broadcast_shapes("test", bshapes[p][0].dims, bshapes[p][0].rank,
                                        bshapes[p][1].dims, bshapes[p][1].rank, s, &r);
                    bool cmp = ir_info_of(kinds[k])->dtype == IR_DT_COMPARE;
                    em_dtype odt = cmp ? EM_BOOL : dts[t];
                    em_tensor *ic[2] = {ca, cb}, *id[2] = {da, db};
                    em_tensor *oc = tn_run(kinds[k], tn_new(odt, s, r, EM_CPU), ic, 2, NULL);
                    em_tensor *od = tn_run(kinds[k], tn_new(odt, s, r, dev), id, 2, NULL);
                    char what[96];
                    snprintf(what, sizeof what, "%s %s %s x %s layout %d", em_op_name(kinds[k]),
                             em_dtype_name(dts[t]),
                             tn_dims_str(bshapes[p][0].dims, bshapes[p][0].rank),
                             tn_dims_str(bshapes[p][1].dims, bshapes[p][1].rank), la);
                    compare(what, od, oc, atol_of(dts[t]), rtol_of(dts[t]));
                    em_scope_end();
                }
    /* unary ops on strided views */
    static const em_op_kind un[] = {EM_OP_EXP, EM_OP_TANH, EM_OP_CELU, EM_OP_GELU, EM_OP_ABS};
    for (size_t k = 0; k < sizeof un / sizeof un[0]; k++)
        for (int t = 0; t < 2; t++)
            for (int la = 1; la < 3; la++) {
                em_scope_begin();
                em_tensor *c, *d;
                mk(EM_SHAPE(3, 17, 9), la, dts[t], -3, 3, &c, &d);
                em_params f = params_for(un[k]);
                const int64_t sh[3] = {3, 17, 9};
                em_tensor *oc = tn_run(un[k], tn_new(dts[t], sh, 3, EM_CPU), &c, 1, &f);
                em_tensor *od = tn_run(un[k], tn_new(dts[t], sh, 3, dev), &d, 1, &f);
                char what[64];
                snprintf(what, sizeof what, "%s %s layout %d", em_op_name(un[k]),
                         em_dtype_name(dts[t]), la);
                compare(what, od, oc, atol_of(dts[t]), rtol_of(dts[t]));
                em_scope_end();
            }
    /* where, masked_fill, clamp (and the public front-ends) */
    for (int t = 0; t < 2; t++)
        for (int la = 0; la < 3; la++) {
            em_scope_begin();
            em_tensor *ca, *da, *cb, *db, *cm, *dm;
            mk(EM_SHAPE(6, 1, 5), la, dts[t], -3, 3, &ca, &da);
            mk(EM_SHAPE(4, 5), (la + 1) % 3, dts[t], -3, 3, &cb, &db);
            mk(EM_SHAPE(4, 1), la, dts[t], -1, 1, &cm, &dm);
            em_tensor *mc = em_gt(cm, em_zeros(EM_SCALAR, dts[t], EM_CPU));
            em_tensor *md = em_gt(dm, em_zeros(EM_SCALAR, dts[t], dev));
            char what[64];
            snprintf(what, sizeof what, "where %s layout %d", em_dtype_name(dts[t]), la);
            compare(what, em_where(md, da, db), em_where(mc, ca, cb), 0, 0);
            snprintf(what, sizeof what, "masked_fill %s layout %d", em_dtype_name(dts[t]), la);
            compare(what, em_masked_fill(db, md, -2.5), em_masked_fill(cb, mc, -2.5), 0, 0);
            snprintf(what, sizeof what, "clamp %s layout %d", em_dtype_name(dts[t]), la);
            compare(what, em_clamp(da, -1.1, 0.7), em_clamp(ca, -1.1, 0.7), 0, 0);
            compare(what, em_clamp(da, NAN, 0.7), em_clamp(ca, NAN, 0.7), 0, 0);
            compare(what, em_clamp(da, -0.3, NAN), em_clamp(ca, -0.3, NAN), 0, 0);
            compare("em_add broadcast", em_add(da, db), em_add(ca, cb), 0, 0);
            em_scope_end();
        }
}

static void test_reduce(void)
{
    /* [600, 70] and [40, 5, 64] over dim 0: the column-sum kernel (f32, contiguous) */
    static const em_shape shapes[] = {
        EM_SHAPE(7, 300), EM_SHAPE(3, 4, 5, 6), EM_SHAPE(2, 100000), EM_SHAPE(5, 0, 3),
        EM_SCALAR,        EM_SHAPE(1, 1, 9),    EM_SHAPE(600, 70),   EM_SHAPE(40, 5, 64)};
    static const em_axes axes[] = {EM_ALL, EM_AXES(0), EM_AXES(-1), EM_AXES(0, 2)};
    const em_dtype dts[] = {EM_F32, EM_F64};
    for (int t = 0; t < 2; t++)
        for (size_t p = 0; p < sizeof shapes / sizeof shapes[0]; p++)
            for (int la = 0; la < 3; la++)
                for (size_t a = 0; a < sizeof axes / sizeof axes[0]; a++)
                    for (int keep = 0; keep < 2; keep++) {
                        if (axes[a].n == 2 && shapes[p].rank < 3) continue; /* dim 2 */
                        if (shapes[p].rank == 0 && axes[a].n) continue;
                        em_scope_begin();
                        em_tensor *c, *d;
                        mk(shapes[p], la, dts[t], -3, 3, &c, &d);
                        double rt = dts[t] == EM_F32 ? 1e-5 : 1e-12;
                        em_tensor *(*fns[4])(const em_tensor *, em_axes, bool) = {em_sum, em_mean,
                                                                                  em_max, em_min};
                        static const char *names[4] = {"sum", "mean", "max", "min"};
                        for (int f = 0; f < 4; f++) {
                            if (f >= 2 && em_tensor_numel(c) == 0) continue;
                            char what[96];
                            snprintf(what, sizeof what, "%s %s %s axes#%d keep %d layout %d",
                                     names[f], em_dtype_name(dts[t]),
                                     tn_dims_str(shapes[p].dims, shapes[p].rank), (int)a, keep, la);
                            compare(what, fns[f](d, axes[a], keep != 0),
                                    fns[f](c, axes[a], keep != 0), f < 2 ? rt : 0, f < 2 ? rt : 0);
                        }
                        em_scope_end();
                    }
    /* NaN propagates through max/min/sum */
    em_scope_begin();
    double v[6] = {1, NAN, 3, 4, 5, -INFINITY};
    em_tensor *c = em_from_data(v, EM_F64, EM_SHAPE(2, 3), EM_F32, EM_CPU);
    em_tensor *d = em_to_device(c, dev);
    compare("max NaN", em_max(d, EM_AXES(1), false), em_max(c, EM_AXES(1), false), 0, 0);
    compare("min NaN", em_min(d, EM_AXES(0), false), em_min(c, EM_AXES(0), false), 0, 0);
    compare("sum NaN", em_sum(d, EM_ALL, false), em_sum(c, EM_ALL, false), 0, 0);
    em_scope_end();
    /* softmax and log_softmax along every dim */
    static const em_shape ss[] = {EM_SHAPE(4, 37, 5), EM_SHAPE(3, 2000), EM_SHAPE(6)};
    for (int t = 0; t < 2; t++)
        for (size_t p = 0; p < sizeof ss / sizeof ss[0]; p++)
            for (int la = 0; la < 3; la++)
                for (int dim = -1; dim < ss[p].rank; dim++) {
                    em_scope_begin();
                    em_tensor *cx, *dx;
                    mk(ss[p], la, dts[t], -20, 20, &cx, &dx);
                    char what[96];
                    double rt = dts[t] == EM_F32 ? 1e-5 : 1e-12;
                    snprintf(what, sizeof what, "softmax %s %s dim %d layout %d",
                             em_dtype_name(dts[t]), tn_dims_str(ss[p].dims, ss[p].rank), dim, la);
                    compare(what, em_softmax(dx, dim), em_softmax(cx, dim), 1e-7, rt);
                    what[0] = 'S';
                    compare(what, em_log_softmax(dx, dim), em_log_softmax(cx, dim), rt, rt);
                    em_scope_end();
                }
}

static void test_matmul_tiles(const char *tile);

/* f16/bf16 products go through the wgmma kernel (2-D, sm_90: TMA loads, 128- or 256-column
 * tiles) and the mma.sync ones with 128 x 128 or 128 x 256 tiles; each
 * pass forces one. */
static void test_matmul(void)
{
    em_config_set("cuda_wgmma", "off");
    test_matmul_tiles("narrow");
    em_config_set("cuda_gemv_parts", "3"); /* uneven k slices */
    test_matmul_tiles("wide");
    em_config_set("cuda_gemv_parts", NULL);
    em_config_set("cuda_wgmma", "on");
    test_matmul_tiles("auto");
    test_matmul_tiles("narrow");
    test_matmul_tiles("wide");
    /* exact f32 on the copy-engine kernels (sm_90) wherever the layout fits: each of the four
     * (layouts 0 and 1 of the 2-D shapes) must have run, not fallen back */
    const char *sgt[] = {"em_mm_sgt_kn", "em_mm_sgt_kk", "em_mm_sgt_mn", "em_mm_sgt_mk"};
    uint64_t uses[4];
    for (int i = 0; i < 4; i++) uses[i] = cuda_kernel_uses(0, sgt[i]);
    em_config_set("cuda_f32_tma", "on");
    test_matmul_tiles("auto");
    em_config_set("cuda_f32_tma", "auto");
    for (int i = 0; cuda_wgmma_device(0) && i < 4; i++)
        CHECK(cuda_kernel_uses(0, sgt[i]) > uses[i], "cuda_f32_tma on: %s never ran", sgt[i]);
    em_config_set("cuda_mm_tile", "auto");
    em_config_set("cuda_f32_tile", "auto");
}

static void test_matmul_tiles(const char *tile)
{
    em_config_set("cuda_mm_tile", tile);
    /* the exact f32 kernels' 64 x 64 tiles in the narrow passes, 128 x 128 in the wide ones */
    em_config_set("cuda_f32_tile", !strcmp(tile, "narrow") ? "64"
                                   : !strcmp(tile, "wide") ? "128"
                                                           : "auto");
    static const em_shape ps[][2] = {{EM_SHAPE(5, 7), EM_SHAPE(7, 3)},
                                     {EM_SHAPE(33, 70), EM_SHAPE(70, 17)},
                                     {EM_SHAPE(2, 3, 20, 9), EM_SHAPE(9, 18)},
                                     {EM_SHAPE(3, 1, 4, 5), EM_SHAPE(2, 5, 6)},
                                     {EM_SHAPE(7), EM_SHAPE(7)},
                                     {EM_SHAPE(7), EM_SHAPE(2, 7, 4)},
                                     {EM_SHAPE(3, 6, 7), EM_SHAPE(7)},
                                     {EM_SHAPE(4, 0), EM_SHAPE(0, 3)},
                                     {EM_SHAPE(0, 5), EM_SHAPE(5, 2)},
                                     {EM_SHAPE(1, 1), EM_SHAPE(1, 1)},
                                     /* multiples of 8: the tensor-core kernels (f16, bf16), with
                                        partial 128 x 128 tiles, several k tiles, batches */
                                     {EM_SHAPE(200, 264), EM_SHAPE(264, 136)},
                                     {EM_SHAPE(3, 64, 40), EM_SHAPE(3, 40, 72)},
                                     {EM_SHAPE(2, 1, 136, 24), EM_SHAPE(3, 24, 8)},
                                     {EM_SHAPE(256, 512), EM_SHAPE(512, 384)},
                                     /* wgmma: a K tail in the last stage, K below one stage
                                        (A read M-major), more tiles than multiprocessors */
                                     {EM_SHAPE(300, 1000), EM_SHAPE(1000, 520)},
                                     {EM_SHAPE(136, 36), EM_SHAPE(36, 72)},
                                     {EM_SHAPE(1100, 72), EM_SHAPE(72, 4100)},
                                     /* matrix-vector kernels: long rows, many k slices,
                                        batches */
                                     {EM_SHAPE(3000, 520), EM_SHAPE(520)},
                                     {EM_SHAPE(520), EM_SHAPE(520, 3000)},
                                     {EM_SHAPE(1, 4100), EM_SHAPE(4100, 300)},
                                     {EM_SHAPE(2, 1, 1, 700), EM_SHAPE(3, 700, 1)},
                                     {EM_SHAPE(3, 1, 900), EM_SHAPE(3, 900, 1028)},
                                     {EM_SHAPE(2, 1, 600), EM_SHAPE(2, 600, 4400)},
                                     {EM_SHAPE(1000), EM_SHAPE(1000, 8200)},
                                     /* f32 split-K (few tiles, K >= 512), batched */
                                     {EM_SHAPE(2, 100, 768), EM_SHAPE(768, 64)},
                                     {EM_SHAPE(40, 4104), EM_SHAPE(4104, 72)},
                                     {EM_SHAPE(8, 16), EM_SHAPE(16)},
                                     {EM_SHAPE(16), EM_SHAPE(16, 8)}};
    const em_dtype dts[] = {EM_F32, EM_F64, EM_F16, EM_BF16};
    for (int t = 0; t < 4; t++)
        for (size_t p = 0; p < sizeof ps / sizeof ps[0]; p++)
            for (int la = 0; la < 3; la++)
                for (int lb = 0; lb < 3; lb += 1 + (p < 10)) {
                    em_scope_begin();
                    em_tensor *ca, *da, *cb, *db;
                    mk(ps[p][0], la, dts[t], -1, 1, &ca, &da);
                    mk(ps[p][1], p < 10 ? (la + 1) % 3 : lb, dts[t], -1, 1, &cb, &db);
                    char what[96];
                    snprintf(what, sizeof what, "matmul %s %s %s x %s layout %d/%d", tile,
                             em_dtype_name(dts[t]), tn_dims_str(ps[p][0].dims, ps[p][0].rank),
                             tn_dims_str(ps[p][1].dims, ps[p][1].rank), la, lb);
                    /* f32: device and CPU sum in different orders; f16/bf16: both round an f32
                       sum once, so results can differ by an ulp of the output type */
                    double atol = dts[t] == EM_F32   ? 1e-4
                                  : dts[t] == EM_F64 ? 1e-12
                                  : dts[t] == EM_F16 ? 2e-3
                                                     : 2e-2;
                    double rtol = dts[t] == EM_F16 ? 2e-3 : dts[t] == EM_BF16 ? 1.6e-2 : atol;
                    compare(what, em_matmul(da, db), em_matmul(ca, cb), atol, rtol);
                    em_scope_end();
                }
}

/* The wgmma kernel's two tile widths add each output's products in the same order, so the tile
 * choice (the tuner's, or the rule's) never changes a result: both agree bit for bit. Then a
 * product large enough to be tuned (2^30 multiply-adds) against the CPU. */
static void test_matmul_tile_widths(void)
{
    static const em_shape ps[][2] = {{EM_SHAPE(300, 1000), EM_SHAPE(1000, 520)},
                                     {EM_SHAPE(1100, 72), EM_SHAPE(72, 4100)}};
    const em_dtype dts[] = {EM_BF16, EM_F16, EM_F32};
    for (int t = 0; t < 3; t++)
        for (size_t p = 0; p < 2; p++)
            for (int la = 0; la < 2; la++) {
                em_scope_begin();
                em_config_set("cuda_tf32", dts[t] == EM_F32 ? "1" : "0");
                em_tensor *ca, *da, *cb, *db;
                mk(ps[p][0], la, dts[t], -1, 1, &ca, &da);
                mk(ps[p][1], 1 - la, dts[t], -1, 1, &cb, &db);
                em_config_set("cuda_mm_tile", "wide");
                em_tensor *w = em_matmul(da, db);
                em_config_set("cuda_mm_tile", "narrow");
                em_tensor *n = em_matmul(da, db);
                char what[96];
                snprintf(what, sizeof what, "matmul tile widths %s %s layout %d",
                         em_dtype_name(dts[t]), tn_dims_str(ps[p][0].dims, 2), la);
                compare(what, n, w, 0, 0);
                em_scope_end();
            }
    em_config_set("cuda_mm_tile", "auto");
    em_config_set("cuda_tf32", "0");
    em_scope_begin();
    em_tensor *ca, *da, *cb, *db;
    mk(EM_SHAPE(1024, 1024), 0, EM_BF16, -1, 1, &ca, &da);
    mk(EM_SHAPE(1024, 1024), 0, EM_BF16, -1, 1, &cb, &db);
    compare("matmul bf16 1024^3 (tuned)", em_matmul(da, db), em_matmul(ca, cb), 2e-2, 1.6e-2);
    compare("matmul bf16 1024^3 (tuned, again)", em_matmul(da, db), em_matmul(ca, cb), 2e-2,
            1.6e-2);
    em_scope_end();
}

/* f32 matmul on TF32 tensor cores (cuda_tf32 on): operands keep 10 mantissa bits, so results
 * differ from the CPU's by about 2^-11 of the products' magnitude. */
static void test_matmul_tf32(void)
{
    static const em_shape ps[][2] = {
        {EM_SHAPE(200, 264), EM_SHAPE(264, 136)},       {EM_SHAPE(3, 64, 40), EM_SHAPE(3, 40, 72)},
        {EM_SHAPE(2, 1, 132, 20), EM_SHAPE(3, 20, 12)}, {EM_SHAPE(256, 512), EM_SHAPE(512, 384)},
        {EM_SHAPE(2, 100, 768), EM_SHAPE(768, 64)},     {EM_SHAPE(5, 7), EM_SHAPE(7, 3)},
        {EM_SHAPE(136, 36), EM_SHAPE(36, 72)},          {EM_SHAPE(1100, 72), EM_SHAPE(72, 4100)}};
    em_config_set("cuda_tf32", "1");
    for (size_t p = 0; p < sizeof ps / sizeof ps[0]; p++)
        for (int la = 0; la < 2; la++)
            for (int lb = 0; lb < 2; lb++) {
                em_scope_begin();
                em_tensor *ca, *da, *cb, *db;
                mk(ps[p][0], la, EM_F32, -1, 1, &ca, &da);
                mk(ps[p][1], lb, EM_F32, -1, 1, &cb, &db);
                char what[96];
                snprintf(what, sizeof what, "matmul tf32 %s x %s layout %d/%d",
                         tn_dims_str(ps[p][0].dims, ps[p][0].rank),
                         tn_dims_str(ps[p][1].dims, ps[p][1].rank), la, lb);
                double k = (double)ps[p][0].dims[ps[p][0].rank - 1];
                compare(what, em_matmul(da, db), em_matmul(ca, cb), 2e-3 * sqrt(k), 2e-3);
                em_scope_end();
            }
    /* B a column slice ([K][N] rows 148 apart, N = 141): the product computed transposed writes
     * rows of c 141 long, which its 16-byte stores cannot take (the scalar path), with and
     * without the epilogue */
    em_scope_begin();
    em_tensor *ca, *da, *cb, *db, *cbias, *dbias;
    mk(EM_SHAPE(301, 264), 0, EM_F32, -1, 1, &ca, &da);
    mk(EM_SHAPE(264, 148), 0, EM_F32, -1, 1, &cb, &db);
    mk(EM_SHAPE(141), 0, EM_F32, -1, 1, &cbias, &dbias);
    em_tensor *cbs = em_narrow(cb, 1, 4, 141), *dbs = em_narrow(db, 1, 4, 141);
    double tol = 2e-3 * sqrt(264.0);
    compare("matmul tf32 301x264 x 264x141 (column slice of B)", em_matmul(da, dbs),
            em_matmul(ca, cbs), tol, 2e-3);
    compare("matmul_bias_act tf32 gelu 301x264 x 264x141 (column slice of B)",
            em_matmul_bias_act(da, dbs, dbias, EM_ACT_GELU),
            em_matmul_bias_act(ca, cbs, cbias, EM_ACT_GELU), tol, 2e-3);
    em_scope_end();
    em_config_set("cuda_tf32", "0");
}

/* matmul_bias_act on the device against the CPU's, for every activation, with and without a
 * bias (flipped, so strided, on odd cases), f32/f64/f16/bf16, over each product path: the
 * f32 kernels (epilogue in the store), split-K, TF32, the tensor-core and wgmma kernels
 * (epilogue in the store), the any-stride f16/bf16 kernel, GEMV, batched and K = 0 (a separate
 * epilogue pass); also against the unfused sequence on the device, and gradients. */
static void test_matmul_bias_act_paths(const char *label)
{
    static const em_shape ps[][2] = {
        {EM_SHAPE(5, 7), EM_SHAPE(7, 3)},           {EM_SHAPE(33, 70), EM_SHAPE(70, 17)},
        {EM_SHAPE(2, 3, 20, 9), EM_SHAPE(9, 18)},   {EM_SHAPE(7), EM_SHAPE(2, 7, 4)},
        {EM_SHAPE(3, 6, 7), EM_SHAPE(7)},           {EM_SHAPE(4, 0), EM_SHAPE(0, 3)},
        {EM_SHAPE(200, 264), EM_SHAPE(264, 136)},   {EM_SHAPE(3, 64, 40), EM_SHAPE(3, 40, 72)},
        {EM_SHAPE(300, 1000), EM_SHAPE(1000, 520)}, {EM_SHAPE(1100, 72), EM_SHAPE(72, 4100)},
        {EM_SHAPE(3000, 520), EM_SHAPE(520)},       {EM_SHAPE(1, 4100), EM_SHAPE(4100, 300)},
        {EM_SHAPE(2, 100, 768), EM_SHAPE(768, 64)}};
    const em_dtype dts[] = {EM_F32, EM_F64, EM_F16, EM_BF16};
    for (int t = 0; t < 4; t++)
        for (size_t p = 0; p < sizeof ps / sizeof ps[0]; p++)
            for (int act = EM_ACT_NONE; act <= EM_ACT_SILU; act++)
                for (int wb = 0; wb < 2; wb++) {
                    em_scope_begin();
                    int la = (int)(p + (size_t)act) % 2, lb = (int)(p + (size_t)wb) % 2;
                    em_tensor *ca, *da, *cb, *db, *cbias = NULL, *dbias = NULL;
                    mk(ps[p][0], la, dts[t], -1, 1, &ca, &da);
                    mk(ps[p][1], lb, dts[t], -1, 1, &cb, &db);
                    const em_shape sb = ps[p][1];
                    int64_t n = sb.rank == 1 ? 1 : sb.dims[sb.rank - 1];
                    if (wb) mk(EM_SHAPE(n), (int)p % 3 == 2 ? 2 : 0, dts[t], -1, 1, &cbias, &dbias);
                    char what[128];
                    snprintf(what, sizeof what, "matmul_bias_act %s act %d bias %d %s %s x %s",
                             label, act, wb, em_dtype_name(dts[t]),
                             tn_dims_str(ps[p][0].dims, ps[p][0].rank),
                             tn_dims_str(sb.dims, sb.rank));
                    /* TF32: 2e-3 sqrt(K), as test_matmul_tf32 */
                    const em_shape sa = ps[p][0];
                    double kd = (double)sa.dims[sa.rank - 1];
                    double tf = strcmp(label, "tf32") ? 1 : 20 * sqrt(kd > 1 ? kd : 1);
                    double atol = dts[t] == EM_F32   ? 1e-4 * tf
                                  : dts[t] == EM_F64 ? 1e-12
                                  : dts[t] == EM_F16 ? 2e-3
                                                     : 2e-2;
                    double rtol = dts[t] == EM_F16 ? 2e-3 : dts[t] == EM_BF16 ? 1.6e-2 : atol;
                    em_tensor *got = em_matmul_bias_act(da, db, dbias, (em_act)act);
                    compare(what, got, em_matmul_bias_act(ca, cb, cbias, (em_act)act), atol, rtol);
                    /* the unfused sequence on the device: its extra roundings apart */
                    em_tensor *u = em_matmul(da, db);
                    if (dbias) u = em_add(u, dbias);
                    u = act == EM_ACT_RELU        ? em_relu(u)
                        : act == EM_ACT_GELU      ? em_gelu(u)
                        : act == EM_ACT_GELU_TANH ? em_gelu_tanh(u)
                        : act == EM_ACT_SILU      ? em_silu(u)
                                                  : u;
                    em_tensor *uh = em_to_device(u, EM_CPU);
                    compare(what, got, uh, 2 * atol, 2 * rtol);
                    em_scope_end();
                }
}

static void test_matmul_bias_act(void)
{
    em_config_set("cuda_wgmma", "off");
    em_config_set("cuda_f32_tile", "128");
    test_matmul_bias_act_paths("mma.sync");
    em_config_set("cuda_f32_tile", "auto");
    em_config_set("cuda_wgmma", "on");
    test_matmul_bias_act_paths("wgmma");
    em_config_set("cuda_f32_tma", "on");
    test_matmul_bias_act_paths("f32 tma");
    em_config_set("cuda_f32_tma", "auto");
    /* three K slices wherever K allows them (the epilogue in the split-K sum), both f32 tiles */
    em_config_set("cuda_split_k", "3");
    test_matmul_bias_act_paths("split-K 3");
    em_config_set("cuda_f32_tile", "64");
    test_matmul_bias_act_paths("split-K 3, tile 64");
    em_config_set("cuda_f32_tile", "auto");
    em_config_set("cuda_split_k", "auto");
    em_config_set("cuda_tf32", "1");
    test_matmul_bias_act_paths("tf32");
    em_config_set("cuda_tf32", "0");
    /* gradients: the saved pre-activation (out[1]) on the device, bias summed over rows */
    for (int act = EM_ACT_NONE; act <= EM_ACT_SILU; act++) {
        em_scope_begin();
        em_tensor *cx, *dx, *cw, *dw, *cb, *dbv;
        mk(EM_SHAPE(2, 33, 40), 0, EM_F32, -1, 1, &cx, &dx);
        mk(EM_SHAPE(40, 24), 1, EM_F32, -1, 1, &cw, &dw);
        mk(EM_SHAPE(24), 0, EM_F32, -1, 1, &cb, &dbv);
        em_tensor *c_in[3] = {cx, cw, cb}, *d_in[3] = {dx, dw, dbv};
        em_tensor *cg[3], *dg[3];
        for (int side = 0; side < 2; side++) {
            em_tensor **in = side ? d_in : c_in;
            for (int i = 0; i < 3; i++) em_requires_grad(in[i], true);
            em_tensor *y = em_matmul_bias_act(in[0], in[1], in[2], (em_act)act);
            em_grads *g = em_backward(em_sum(em_mul(y, y), EM_ALL, false));
            for (int i = 0; i < 3; i++) (side ? dg : cg)[i] = g ? em_grad(g, in[i]) : NULL;
        }
        for (int i = 0; i < 3; i++) {
            char what[64];
            snprintf(what, sizeof what, "matmul_bias_act grad %d act %d", i, act);
            compare(what, dg[i], cg[i], 1e-3, 1e-3);
            em_release(dg[i]);
            em_release(cg[i]);
        }
        em_scope_end();
    }
}

/* max_pool1d/2d/3d with strides, padding, dilation and ceil mode: values and indices equal the
 * CPU's exactly (NaN included). */
static void test_max_pool(void)
{
    typedef struct pcase {
        int nd;
        em_shape x;
        em_pool_opts o;
    } pcase;
    const pcase cs[] = {
        {2, EM_SHAPE(2, 3, 17, 19), {.kernel = {3, 3}, .stride = {1, 1}, .pad = {1, 1}}},
        {2, EM_SHAPE(2, 4, 16, 16), {.kernel = {2, 2}}},
        {2,
         EM_SHAPE(1, 2, 23, 20),
         {.kernel = {5, 5},
          .stride = {2, 2},
          .pad = {2, 2},
          .dilation = {2, 2},
          .ceil_mode = true}},
        {2, EM_SHAPE(3, 9, 11), {.kernel = {3, 2}, .stride = {2, 1}}},
        {1, EM_SHAPE(2, 3, 40), {.kernel = {4}, .stride = {3}, .pad = {2}}},
        {3, EM_SHAPE(1, 2, 6, 7, 8), {.kernel = {2, 3, 2}, .stride = {2, 2, 2}, .pad = {1, 1, 0}}},
        /* several 32 x 16 output tiles of the shared-memory kernel, partial ones at the edges */
        {2, EM_SHAPE(2, 3, 70, 45), {.kernel = {3, 3}, .stride = {1, 1}, .pad = {1, 1}}},
        {2,
         EM_SHAPE(1, 2, 90, 130),
         {.kernel = {5, 3}, .stride = {2, 3}, .pad = {2, 1}, .dilation = {2, 1}}},
    };
    em_tensor *(*fns[3])(const em_tensor *, em_pool_opts,
                         em_tensor **) = {em_max_pool1d, em_max_pool2d, em_max_pool3d};
    const em_dtype dts[] = {EM_F32, EM_F64};
    for (int t = 0; t < 2; t++)
        for (size_t p = 0; p < sizeof cs / sizeof cs[0]; p++) {
            em_scope_begin();
            em_tensor *c, *d;
            mk(cs[p].x, 0, dts[t], -3, 3, &c, &d);
            if (p == 0 || p == 6 || p == 8) { /* NaNs where x > 2.8 */
                em_tensor *nan = em_scalar(NAN, dts[t], EM_CPU);
                c = em_where(em_gt(c, em_scalar(2.8, dts[t], EM_CPU)), nan, c);
                d = em_to_device(c, dev);
            }
            em_tensor *ci = NULL, *di = NULL;
            em_tensor *cv = fns[cs[p].nd - 1](c, cs[p].o, &ci);
            em_tensor *dv = fns[cs[p].nd - 1](d, cs[p].o, &di);
            char what[96];
            snprintf(what, sizeof what, "max_pool%dd %s %s", cs[p].nd, em_dtype_name(dts[t]),
                     tn_dims_str(cs[p].x.dims, cs[p].x.rank));
            compare(what, dv, cv, 0, 0);
            what[0] = 'M';
            compare(what, di, ci, 0, 0);
            what[0] = 'v'; /* values only (max_pool_values) */
            compare(what, fns[cs[p].nd - 1](d, cs[p].o, NULL), cv, 0, 0);
            em_scope_end();
        }
}

/* conv1d/2d/3d and conv_transpose2d (im2col/col2im + matmul on the device), unfold and fold. */
static void test_conv(void)
{
    typedef struct ccase {
        int nd;
        bool tr;
        em_shape x, w;
        em_conv_opts o;
        bool bias;
    } ccase;
    const ccase cs[] = {
        {2,
         false,
         EM_SHAPE(2, 3, 13, 11),
         EM_SHAPE(5, 3, 3, 3),
         {.pad_lo = {1, 1}, .pad_hi = {1, 1}},
         true},
        {2,
         false,
         EM_SHAPE(3, 4, 17, 16),
         EM_SHAPE(8, 4, 5, 3),
         {.stride = {2, 1}, .pad_lo = {2, 0}, .pad_hi = {1, 1}, .dilation = {1, 2}},
         false},
        {2, false, EM_SHAPE(4, 9, 9), EM_SHAPE(6, 4, 2, 2), {.stride = {2, 2}}, true},
        {1,
         false,
         EM_SHAPE(2, 3, 40),
         EM_SHAPE(4, 3, 5),
         {.stride = {3}, .pad_lo = {2}, .pad_hi = {2}},
         true},
        {3,
         false,
         EM_SHAPE(1, 2, 6, 7, 8),
         EM_SHAPE(3, 2, 2, 3, 2),
         {.pad_lo = {1, 1, 0}, .pad_hi = {0, 1, 1}},
         true},
        {2,
         true,
         EM_SHAPE(2, 5, 7, 6),
         EM_SHAPE(5, 3, 3, 3),
         {.stride = {2, 2}, .pad_lo = {1, 1}, .pad_hi = {1, 1}, .out_pad = {1, 0}},
         true},
        {2,
         true,
         EM_SHAPE(1, 4, 5, 5),
         EM_SHAPE(4, 2, 4, 4),
         {.stride = {1, 1}, .dilation = {2, 1}},
         false},
    };
    const em_dtype dts[] = {EM_F32, EM_F64};
    for (int t = 0; t < 2; t++)
        for (size_t p = 0; p < sizeof cs / sizeof cs[0]; p++) {
            em_scope_begin();
            em_tensor *cx, *dx, *cw, *dw, *cb = NULL, *db = NULL;
            mk(cs[p].x, 0, dts[t], -1, 1, &cx, &dx);
            mk(cs[p].w, 0, dts[t], -1, 1, &cw, &dw);
            if (cs[p].bias)
                mk(EM_SHAPE(cs[p].tr ? cs[p].w.dims[1] : cs[p].w.dims[0]), 0, dts[t], -1, 1, &cb,
                   &db);
            em_tensor *(*f)(const em_tensor *, const em_tensor *, const em_tensor *, em_conv_opts) =
                cs[p].tr        ? em_conv_transpose2d
                : cs[p].nd == 1 ? em_conv1d
                : cs[p].nd == 2 ? em_conv2d
                                : em_conv3d;
            char what[96];
            snprintf(what, sizeof what, "conv%s%dd %s %s", cs[p].tr ? "_transpose" : "", cs[p].nd,
                     em_dtype_name(dts[t]), tn_dims_str(cs[p].x.dims, cs[p].x.rank));
            double tol = dts[t] == EM_F32 ? 1e-4 : 1e-12;
            compare(what, f(dx, dw, db, cs[p].o), f(cx, cw, cb, cs[p].o), tol, tol);
            em_scope_end();
        }
    for (int t = 0; t < 2; t++) {
        em_scope_begin();
        const int64_t k[2] = {3, 2}, dil[2] = {1, 2}, pad[2] = {1, 0}, str[2] = {2, 1},
                      img[2] = {9, 8};
        em_tensor *cx, *dx;
        mk(EM_SHAPE(2, 3, 9, 8), 0, dts[t], -1, 1, &cx, &dx);
        em_tensor *cc = em_im2col(cx, k, dil, pad, str), *dc = em_im2col(dx, k, dil, pad, str);
        compare("im2col", dc, cc, 0, 0);
        double tol = dts[t] == EM_F32 ? 1e-6 : 1e-14;
        compare("col2im", em_col2im(dc, img, k, dil, pad, str),
                em_col2im(cc, img, k, dil, pad, str), tol, tol);
        em_scope_end();
    }
}

/* Integer and bool ops: wrapping arithmetic, comparisons, logical ops, where and masked_fill
 * must equal the CPU's exactly, broadcast and strided included. */
static void test_int_ops(void)
{
    const em_dtype dts[] = {EM_I64, EM_I32, EM_I16, EM_I8, EM_U8, EM_BOOL};
    em_tensor *(*bin[])(const em_tensor *, const em_tensor *) = {
        em_add, em_sub, em_mul, em_minimum, em_maximum,     em_eq,         em_ne,
        em_lt,  em_le,  em_gt,  em_ge,      em_logical_and, em_logical_or, em_logical_xor};
    static const char *names[] = {"add", "sub", "mul", "minimum", "maximum", "eq", "ne",
                                  "lt",  "le",  "gt",  "ge",      "and",     "or", "xor"};
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++)
        for (size_t f = 0; f < sizeof bin / sizeof bin[0]; f++) {
            if (dts[t] == EM_BOOL && f < 5) continue; /* bool arithmetic promotes */
            em_scope_begin();
            em_tensor *ca, *da, *cb, *db;
            double lo = dts[t] == EM_BOOL || dts[t] == EM_U8 ? 0 : -120;
            double hi = dts[t] == EM_BOOL ? 2 : 120;
            mk(EM_SHAPE(37, 29), (int)(f % 3), dts[t], lo, hi, &ca, &da);
            mk(EM_SHAPE(29), 0, dts[t], lo, hi, &cb, &db);
            char what[64];
            snprintf(what, sizeof what, "%s %s", names[f], em_dtype_name(dts[t]));
            compare(what, bin[f](da, db), bin[f](ca, cb), 0, 0);
            em_scope_end();
        }
    em_scope_begin();
    em_tensor *cx, *dx, *cm, *dm, *cy, *dy;
    mk(EM_SHAPE(5, 300), 1, EM_I64, -1000, 1000, &cx, &dx);
    mk(EM_SHAPE(5, 300), 0, EM_I64, -1000, 1000, &cy, &dy);
    mk(EM_SHAPE(300), 0, EM_BOOL, 0, 2, &cm, &dm);
    compare("masked_fill i64", em_masked_fill(dx, dm, -7), em_masked_fill(cx, cm, -7), 0, 0);
    compare("where i64", em_where(dm, dx, dy), em_where(cm, cx, cy), 0, 0);
    em_tensor *cf, *df, *cg, *dg;
    mk(EM_SHAPE(5, 300), 0, EM_F32, -1, 1, &cf, &df);
    mk(EM_SHAPE(5, 300), 2, EM_F32, -1, 1, &cg, &dg);
    compare("logical_or f32", em_logical_or(df, em_relu(dg)), em_logical_or(cf, em_relu(cg)), 0, 0);
    em_scope_end();
}

/* Random numbers: the device reads the CPU's Philox stream, so the same seed gives the same
 * values (normals to within an ulp of double before rounding). */
static void test_random(void)
{
    const em_dtype dts[] = {EM_F32, EM_F64};
    for (int t = 0; t < 2; t++) {
        em_scope_begin();
        em_shape sh = EM_SHAPE(7, 1001);
        em_seed(11);
        em_tensor *du = em_rand(sh, dts[t], dev), *dn = em_randn(sh, dts[t], dev);
        em_tensor *db = em_bernoulli_p(sh, 0.3, dts[t], dev);
        em_tensor *dx, *cx;
        mk(sh, 0, dts[t], -1, 1, &cx, &dx);
        em_tensor *dd = em_dropout(dx, 0.4, true);
        em_tensor *di = em_randint(-5, 17, sh, EM_I64, dev);
        em_seed(11);
        em_tensor *cu = em_rand(sh, dts[t], EM_CPU), *cn = em_randn(sh, dts[t], EM_CPU);
        em_tensor *cb = em_bernoulli_p(sh, 0.3, dts[t], EM_CPU);
        em_tensor *cd = em_dropout(cx, 0.4, true);
        em_tensor *ci = em_randint(-5, 17, sh, EM_I64, EM_CPU);
        compare("rand", du, cu, 0, 0);
        compare("randn", dn, cn, 1e-15, dts[t] == EM_F32 ? 1.2e-7 : 1e-15);
        compare("bernoulli", db, cb, 0, 0);
        compare("dropout", dd, cd, 0, 0);
        compare("randint", di, ci, 0, 0);
        em_scope_end();
    }
}

/* The *_scalar forms: a tensor and a rank-0 f64 scalar on the device. */
static void test_scalar_ops(void)
{
    em_tensor *(*fns[])(const em_tensor *, double) = {
        em_add_scalar, em_sub_scalar,  em_rsub_scalar, em_mul_scalar,
        em_div_scalar, em_rdiv_scalar, em_pow_scalar,  em_maximum_scalar};
    static const char *names[] = {"add", "sub", "rsub", "mul", "div", "rdiv", "pow", "maximum"};
    const em_dtype dts[] = {EM_F32, EM_F64};
    for (int t = 0; t < 2; t++)
        for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++) {
            em_scope_begin();
            em_tensor *c, *d;
            mk(EM_SHAPE(3, 1001), 0, dts[t], 0.1, 3, &c, &d);
            char what[64];
            snprintf(what, sizeof what, "%s_scalar %s", names[f], em_dtype_name(dts[t]));
            double tol = dts[t] == EM_F32 ? 1e-6 : 1e-14;
            compare(what, fns[f](d, 1.7), fns[f](c, 1.7), tol, tol);
            em_scope_end();
        }
}

static void test_layer_norm(void)
{
    /* (5, 1000), (3, 4096), (2, 2052): the float4 kernel, rows of 250 to 1024 float4 */
    static const em_shape xs[] = {EM_SHAPE(7, 300), EM_SHAPE(4, 5, 6), EM_SHAPE(3, 8192),
                                  EM_SHAPE(2, 1),   EM_SHAPE(5, 1000), EM_SHAPE(3, 4096),
                                  EM_SHAPE(2, 2052)};
    static const int nn[] = {1, 2, 1, 1, 1, 1, 1};
    const em_dtype dts[] = {EM_F32, EM_F64};
    for (int t = 0; t < 2; t++)
        for (size_t p = 0; p < sizeof xs / sizeof xs[0]; p++)
            for (int wb = 0; wb < 4; wb++) {
                em_scope_begin();
                em_tensor *cx, *dx, *cw = NULL, *dw = NULL, *cb = NULL, *db = NULL;
                mk(xs[p], 0, dts[t], -3, 3, &cx, &dx);
                em_shape ps = {.rank = nn[p]};
                for (int d = 0; d < nn[p]; d++) ps.dims[d] = xs[p].dims[xs[p].rank - nn[p] + d];
                if (wb & 1) mk(ps, 0, dts[t], -2, 2, &cw, &dw);
                if (wb & 2) mk(ps, 0, dts[t], -2, 2, &cb, &db);
                char what[96];
                snprintf(what, sizeof what, "layer_norm %s %s n_norm %d weight %d bias %d",
                         em_dtype_name(dts[t]), tn_dims_str(xs[p].dims, xs[p].rank), nn[p], wb & 1,
                         wb >> 1);
                double tol = dts[t] == EM_F32 ? 2e-5 : 1e-12;
                compare(what, em_layer_norm(dx, nn[p], dw, db, 1e-5),
                        em_layer_norm(cx, nn[p], cw, cb, 1e-5), tol, tol);
                em_scope_end();
            }
}

static void test_pool_and_cache(void)
{
    em_cuda_pool_stats s0, s1, s2;
    CHECK(cuda_pool_stats(dev.index, &s0), "pool stats");
    em_scope_begin();
    em_tensor *t = em_full(EM_SHAPE(1000, 1000), 1.0, EM_F32, dev);
    CHECK(t != NULL, "alloc 4 MB");
    CHECK(cuda_pool_stats(dev.index, &s1), "pool stats");
    CHECK(s1.in_use_bytes >= s0.in_use_bytes + 4000000, "in_use grows: %lld -> %lld",
          (long long)s0.in_use_bytes, (long long)s1.in_use_bytes);
    em_scope_end();
    em_scope_begin();
    em_tensor *u = em_full(EM_SHAPE(1000, 1000), 2.0, EM_F32, dev);
    CHECK(u != NULL, "alloc again");
    CHECK(cuda_pool_stats(dev.index, &s2), "pool stats");
    CHECK(s2.reuses > s1.reuses, "the freed block is reused (%lld -> %lld reuses)",
          (long long)s1.reuses, (long long)s2.reuses);
    CHECK(s2.device_allocs == s1.device_allocs, "no new cuMemAlloc (%lld -> %lld)",
          (long long)s1.device_allocs, (long long)s2.device_allocs);
    em_scope_end();
    cuda_pool_empty_cache(dev.index);
    CHECK(cuda_pool_stats(dev.index, &s2) && s2.cached_bytes == 0, "empty_cache empties it");
    cuda_module_origin o = cuda_module_origin_of(dev.index);
    CHECK(o == CUDA_MODULE_COMPILED || o == CUDA_MODULE_CACHED, "module built");
    printf("pool: peak %lld bytes, %lld cuMemAlloc, %lld reuses; kernels %s %s\n",
           (long long)s2.peak_in_use_bytes, (long long)s2.device_allocs, (long long)s2.reuses,
           o == CUDA_MODULE_CACHED ? "loaded from cache" : "compiled by NVRTC",
           cuda_module_cache_path(dev.index));
}

/* The public device queries and persistent storage on a real driver. */
static void test_device_queries(void)
{
    const cuda_device_info *d = cuda_device(dev.index);
    em_device_props p;
    CHECK(em_device_get_props(dev, &p) == EM_OK && !strcmp(p.name, d->name) &&
              p.processors == d->sm_count && p.compute_major == d->cc_major &&
              p.compute_minor == d->cc_minor && p.total_memory > ((int64_t)1 << 30),
          "props: \"%s\", %d SMs, %lld bytes", p.name, p.processors, (long long)p.total_memory);
    em_device_mem_stats m;
    CHECK(em_device_get_mem_stats(dev, &m) == EM_OK && m.total_bytes > p.total_memory / 2 &&
              m.total_bytes <= p.total_memory && m.free_bytes > 0 && m.free_bytes <= m.total_bytes,
          "memory: %lld free of %lld", (long long)m.free_bytes, (long long)m.total_bytes);
    printf("cuda:0: %.1f GiB, %.1f GiB free; pool %lld bytes in use, %lld cached\n",
           (double)m.total_bytes / (1 << 30), (double)m.free_bytes / (1 << 30),
           (long long)m.in_use_bytes, (long long)m.cached_bytes);
    int64_t p0 = m.persistent_bytes;
    CHECK(em_device_persistent_begin(dev) == EM_OK, "begin");
    em_tensor *t = em_full(EM_SHAPE(750001), 1.0, EM_F32, dev);
    CHECK(em_device_persistent_end(dev) == EM_OK, "end");
    em_device_get_mem_stats(dev, &m);
    CHECK(m.persistent_bytes - p0 == 3000320, "persistent: %lld bytes (3000004 rounded to 512)",
          (long long)(m.persistent_bytes - p0));
    em_tensor *s = em_sum(t, EM_ALL, false);
    CHECK(s && em_item_f64(s) == 750001.0, "the persistent tensor holds its values");
    em_release(s);
    em_release(t);
    em_device_get_mem_stats(dev, &m);
    CHECK(m.persistent_bytes == p0, "freed: back to the driver");
    h_check_persistent_module(dev, 512, true);
    CHECK(em_device_empty_cache(dev) >= 0, "empty_cache");
    em_device_get_mem_stats(dev, &m);
    CHECK(m.cached_bytes == 0, "nothing cached after empty_cache");
}

static void test_errors(void)
{
    em_scope_begin();
    em_tensor *a = em_to_device(h_rand(EM_SHAPE(2, 3), EM_F32, H_CONTIG, -1, 1, NULL), dev);
    em_tensor *b = em_to_device(h_rand(EM_SHAPE(3), EM_F32, H_CONTIG, -1, 1, NULL), dev);
    CHECK(em_add(a, em_full(EM_SHAPE(4), 1, EM_F32, dev)) == NULL, "shapes that do not broadcast");
    CHECK_ERR(EM_ERR_SHAPE, "em_add");
    /* an op record the backend declines (a bool matmul, which no front-end makes) fails with
       the unsupported-op error when cpu_fallback is off */
    em_tensor *p = em_full(EM_SHAPE(2, 2), 1, EM_BOOL, dev),
              *q = em_full(EM_SHAPE(2, 2), 1, EM_BOOL, dev);
    em_tensor *r = tn_new(EM_BOOL, (const int64_t[]){2, 2}, 2, dev); /* dispatch frees it */
    em_op mm = {.kind = EM_OP_MATMUL, .n_in = 2, .n_out = 1, .in = {p, q}, .out = {r}};
    mm.p.matmul = (em_p_matmul){.M = 2, .K = 2, .N = 2};
    CHECK(!tn_supported(&mm), "bool matmul is declined");
    CHECK(b && tn_dispatch(&mm) != EM_OK, "a declined op fails");
    CHECK_ERR(EM_ERR_UNSUPPORTED, "not supported by the cuda backend");
    em_tensor *c = h_rand(EM_SHAPE(2, 3), EM_F32, H_CONTIG, -1, 1, NULL);
    CHECK(em_add(a, c) == NULL, "devices must match");
    CHECK_ERR(EM_ERR_DEVICE, "em_add");
    em_device_parse("cuda:99");
    CHECK_ERR(EM_ERR_DEVICE, "does not exist");
    em_scope_end();
}

int main(void)
{
    h_init();
    h_dev = EM_CPU; /* the reference tensors stay on the CPU whatever EMBER_TEST_DEVICE says */
    em_backends_init();
    if (em_backend_find("cuda") < 0) {
        printf("skipped: no CUDA device\n");
        em_device_parse("cuda:0");
        CHECK_ERR(EM_ERR_DEVICE, "unknown device");
        return h_finish();
    }
    dev = em_device_parse("cuda:0");
    CHECK_OK("em_device_parse(\"cuda:0\")");
    printf("cuda:0 is %s (sm_%d%d)\n", cuda_device(0)->name, cuda_device(0)->cc_major,
           cuda_device(0)->cc_minor);
    test_round_trip();
    test_fill();
    test_cast();
    test_unary();
    test_binary();
    test_broadcast();
    test_reduce();
    test_matmul();
    test_matmul_tf32();
    test_matmul_tile_widths();
    test_matmul_bias_act();
    test_layer_norm();
    test_scalar_ops();
    test_max_pool();
    test_conv();
    test_random();
    test_int_ops();
    test_pool_and_cache();
    test_device_queries();
    test_errors();
    em_device_sync(dev);
    CHECK_OK("em_device_sync");
    return h_finish();
}
