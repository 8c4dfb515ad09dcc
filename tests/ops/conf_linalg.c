/* Conformance tests for the linalg family: em_matmul (1-D, 2-D, batched and broadcast N-D, all
 * layouts, every numeric dtype, odd sizes through the GEMM's packed and unpacked paths, size-0
 * dims, NaN/Inf) and em_dot, em_outer, em_matvec against an f64 reference, plus bad input. */
#include <stdint.h>
#include <string.h>

#include "conf.h"

typedef em_tensor *(*bin_fn)(const em_tensor *, const em_tensor *);

static const em_dtype all_dtypes[] = {EM_F64, EM_F32, EM_F16, EM_BF16, EM_I64,
                                      EM_I32, EM_I16, EM_I8,  EM_U8};

/* Integer results wrap to the width of the dtype, like PyTorch. */
static double wrap_to(double v, em_dtype dt)
{
    int64_t i = (int64_t)v;
    switch (dt) {
    case EM_I32: return (int32_t)(uint32_t)(uint64_t)i;
    case EM_I16: return (int16_t)(uint16_t)(uint64_t)i;
    case EM_I8: return (int8_t)(uint8_t)(uint64_t)i;
    case EM_U8: return (uint8_t)(uint64_t)i;
    default: return (double)i;
    }
}

/* torch.matmul on row-major doubles: out (exact sums), mag (sums of |a*b|), shape *so. */
static void ref_matmul(const double *va, em_shape sa, const double *vb, em_shape sb, em_shape *so,
                       double **out, double **mag, int64_t *Kout)
{
    bool a1 = sa.rank == 1, b1 = sb.rank == 1;
    int64_t M = a1 ? 1 : sa.dims[sa.rank - 2], K = sa.dims[sa.rank - 1];
    int64_t N = b1 ? 1 : sb.dims[sb.rank - 1];
    int ra = sa.rank > 2 ? sa.rank - 2 : 0, rb = sb.rank > 2 ? sb.rank - 2 : 0;
    int R = ra > rb ? ra : rb;
    em_shape batch = {.rank = R};
    for (int d = 0; d < R; d++) {
        int64_t x = d - (R - ra) >= 0 ? sa.dims[d - (R - ra)] : 1;
        int64_t y = d - (R - rb) >= 0 ? sb.dims[d - (R - rb)] : 1;
        batch.dims[d] = x == 1 ? y : x;
    }
    so->rank = 0;
    for (int d = 0; d < R; d++) so->dims[so->rank++] = batch.dims[d];
    if (!a1) so->dims[so->rank++] = M;
    if (!b1) so->dims[so->rank++] = N;
    int64_t nb = 1;
    for (int d = 0; d < R; d++) nb *= batch.dims[d];
    *out = calloc((size_t)(nb * M * N) + 1, sizeof(double));
    *mag = calloc((size_t)(nb * M * N) + 1, sizeof(double));
    *Kout = K;
    int64_t idx[EM_MAX_RANK] = {0};
    for (int64_t t = 0; t < nb; t++) {
        int64_t rem = t, ia = 0, ib = 0, sta = M * K, stb = K * N;
        for (int d = R - 1; d >= 0; d--) {
            idx[d] = rem % batch.dims[d];
            rem /= batch.dims[d];
        }
        for (int d = R - 1; d >= 0; d--) {
            int da = d - (R - ra), db = d - (R - rb);
            if (da >= 0) {
                ia += (sa.dims[da] == 1 ? 0 : idx[d]) * sta;
                sta *= sa.dims[da];
            }
            if (db >= 0) {
                ib += (sb.dims[db] == 1 ? 0 : idx[d]) * stb;
                stb *= sb.dims[db];
            }
        }
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0, m = 0;
                for (int64_t k = 0; k < K; k++) {
                    double p = va[ia + i * K + k] * vb[ib + k * N + j];
                    s += p;
                    m += fabs(p);
                }
                (*out)[(t * M + i) * N + j] = s;
                (*mag)[(t * M + i) * N + j] = m;
            }
    }
}

/* Compares got with the reference: floats within the dtype's tolerance plus the accumulation
 * bound (K + 2) * eps * sum |a*b| (sums run in f32 for f32/f16/bf16); integers exactly. */
static void compare(const char *what, const em_tensor *got, em_dtype dt, em_shape so,
                    const double *ref, const double *mag, int64_t K)
{
    if (!got) {
        CHECK(false, "%s: returned NULL (%s)", what, em_last_error());
        em_clear_error();
        return;
    }
    em_shape gs = em_tensor_shape(got);
    bool same = gs.rank == so.rank && em_tensor_dtype(got) == dt;
    for (int d = 0; same && d < so.rank; d++) same = gs.dims[d] == so.dims[d];
    CHECK(same, "%s: shape/dtype of the result", what);
    if (!same) return;
    int64_t n = 1;
    for (int d = 0; d < so.rank; d++) n *= so.dims[d];
    double *g = h_values(got);
    double eps = dt == EM_F64 ? 0x1p-53 : 0x1p-24;
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        bool ok;
        if (em_dtype_is_float(dt)) {
            double r = h_round_to(ref[i], dt);
            double tol = h_atol(dt) + h_rtol(dt) * fabs(r) + (double)(K + 2) * eps * mag[i];
            ok = h_close(g[i], r, tol, 0) || (isnan(g[i]) && isnan(ref[i]));
        } else {
            ok = g[i] == wrap_to(ref[i], dt);
        }
        if (!ok && bad++ < 3)
            CHECK(false, "%s: element %lld = %.9g, want %.9g", what, (long long)i, g[i], ref[i]);
    }
    CHECK(bad == 0, "%s", what);
    free(g);
}

/* Random operands in the given layouts, fn(a, b) against the torch.matmul reference. */
static void check_mm(const char *name, bin_fn fn, em_shape sa, em_shape sb, em_dtype dt,
                     h_layout la, h_layout lb)
{
    em_scope_begin();
    double lo = dt == EM_U8 ? 0 : em_dtype_is_float(dt) ? -1 : -6, hi = dt == EM_U8 ? 9 : 1;
    if (!em_dtype_is_float(dt) && dt != EM_U8) hi = 6;
    double *va, *vb, *ref, *mag;
    em_tensor *a = h_rand(sa, dt, la, lo, hi, &va), *b = h_rand(sb, dt, lb, lo, hi, &vb);
    em_shape so;
    int64_t K;
    ref_matmul(va, sa, vb, sb, &so, &ref, &mag, &K);
    char what[160];
    {
        char sas[64] = "", sbs[64] = "";
        for (int d = 0; d < sa.rank; d++)
            snprintf(sas + strlen(sas), sizeof sas - strlen(sas), "%s%lld", d ? "," : "",
                     (long long)sa.dims[d]);
        for (int d = 0; d < sb.rank; d++)
            snprintf(sbs + strlen(sbs), sizeof sbs - strlen(sbs), "%s%lld", d ? "," : "",
                     (long long)sb.dims[d]);
        snprintf(what, sizeof what, "%s %s [%s] @ [%s] layouts %d/%d", name, em_dtype_name(dt), sas,
                 sbs, (int)la, (int)lb);
    }
    compare(what, fn(a, b), dt, so, ref, mag, K);
    free(va), free(vb), free(ref), free(mag);
    em_scope_end();
}

static void matmul_dtypes_layouts(void)
{
    for (size_t d = 0; d < sizeof all_dtypes / sizeof all_dtypes[0]; d++)
        for (int la = 0; la < H_LAYOUT_COUNT; la++)
            for (int lb = 0; lb < H_LAYOUT_COUNT; lb++)
                check_mm("matmul", em_matmul, EM_SHAPE(7, 17), EM_SHAPE(17, 5), all_dtypes[d],
                         (h_layout)la, (h_layout)lb);
    /* the packed GEMM path with transposed and strided operands */
    for (int la = 0; la < H_LAYOUT_COUNT; la++)
        for (int lb = 0; lb < H_LAYOUT_COUNT; lb++) {
            check_mm("matmul", em_matmul, EM_SHAPE(65, 130), EM_SHAPE(130, 33), EM_F32,
                     (h_layout)la, (h_layout)lb);
            check_mm("matmul", em_matmul, EM_SHAPE(33, 70), EM_SHAPE(70, 65), EM_F64, (h_layout)la,
                     (h_layout)lb);
        }
    check_mm("matmul", em_matmul, EM_SHAPE(40, 70), EM_SHAPE(70, 50), EM_F16, H_TRANSPOSED,
             H_CONTIG);
    check_mm("matmul", em_matmul, EM_SHAPE(40, 70), EM_SHAPE(70, 50), EM_BF16, H_CONTIG,
             H_TRANSPOSED);
}

static void matmul_odd_sizes(void)
{
    static const int64_t sz[][3] = {{1, 1, 1},    {3, 7, 17},  {17, 65, 3},  {65, 130, 7},
                                    {130, 3, 65}, {7, 1, 130}, {1, 130, 65}, {130, 130, 130}};
    for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
        em_shape sa = EM_SHAPE(sz[i][0], sz[i][2]), sb = EM_SHAPE(sz[i][2], sz[i][1]);
        check_mm("matmul odd", em_matmul, sa, sb, EM_F32, H_CONTIG, H_TRANSPOSED);
        check_mm("matmul odd", em_matmul, sa, sb, EM_F64, H_TRANSPOSED, H_CONTIG);
        if (sz[i][0] * sz[i][1] * sz[i][2] < 20000)
            check_mm("matmul odd", em_matmul, sa, sb, EM_I32, H_STRIDED, H_FLIPPED);
    }
}

static void matmul_ranks(void)
{
    typedef struct rcase {
        em_shape a, b;
    } rcase;
    const rcase cases[] = {
        {EM_SHAPE(5), EM_SHAPE(5)},                    /* dot -> scalar */
        {EM_SHAPE(5), EM_SHAPE(5, 3)},                 /* [1,5] @ [5,3], 1 removed */
        {EM_SHAPE(4, 5), EM_SHAPE(5)},                 /* matrix-vector */
        {EM_SHAPE(2, 1, 3, 4), EM_SHAPE(5, 4, 6)},     /* broadcast batch -> [2,5,3,6] */
        {EM_SHAPE(3), EM_SHAPE(2, 3, 4)},              /* 1-D @ batched */
        {EM_SHAPE(2, 3, 4), EM_SHAPE(4)},              /* batched @ 1-D */
        {EM_SHAPE(1, 3, 4), EM_SHAPE(2, 4, 5)},        /* size-1 batch broadcast */
        {EM_SHAPE(3, 4), EM_SHAPE(2, 2, 4, 3)},        /* 2-D @ 4-D */
        {EM_SHAPE(6, 2, 9, 8), EM_SHAPE(6, 1, 8, 10)}, /* many small batches */
        {EM_SHAPE(2, 1, 1, 1, 1, 3, 2), EM_SHAPE(1, 2, 4)},
    };
    const em_dtype dts[] = {EM_F32, EM_F64, EM_F16, EM_I64, EM_U8};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
            for (int l = 0; l < H_LAYOUT_COUNT; l++)
                check_mm("matmul ranks", em_matmul, cases[c].a, cases[c].b, dts[d], (h_layout)l,
                         (h_layout)((l + c) % H_LAYOUT_COUNT));
}

static void matmul_empty(void)
{
    const em_shape cases[][2] = {
        {EM_SHAPE(3, 0), EM_SHAPE(0, 4)},                                         /* K = 0: zeros */
        {EM_SHAPE(0, 3), EM_SHAPE(3, 4)},                                         /* M = 0: empty */
        {EM_SHAPE(3, 2), EM_SHAPE(2, 0)},                                         /* N = 0 */
        {EM_SHAPE(2, 0, 3), EM_SHAPE(3, 4)}, {EM_SHAPE(0, 2, 3), EM_SHAPE(3, 4)}, /* no batches */
        {EM_SHAPE(0), EM_SHAPE(0)}, /* empty dot -> 0 */
        {EM_SHAPE(2, 4, 0), EM_SHAPE(0, 5)},
    };
    const em_dtype dts[] = {EM_F32, EM_F64, EM_BF16, EM_I16};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
            check_mm("matmul empty", em_matmul, cases[c][0], cases[c][1], dts[d], H_CONTIG,
                     H_CONTIG);
}

static void matmul_nonfinite(void)
{
    const em_dtype dts[] = {EM_F32, EM_F64, EM_F16, EM_BF16};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        em_scope_begin();
        /* a: [3, 4] with a NaN in row 1; b: [4, 3] with +Inf in column 0 and -Inf in column 2 */
        double va[12] = {1, 2, 0.5, -1, 0.25, NAN, 1, 2, 1, 1, 1, 1};
        double vb[12] = {INFINITY, 1, 1, 1, 2, -INFINITY, 0, 3, 1, 1, 1, 1};
        em_shape sa = EM_SHAPE(3, 4), sb = EM_SHAPE(4, 3), so;
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            em_tensor *a = h_from_values(va, sa, dts[d], (h_layout)l);
            em_tensor *b = h_from_values(vb, sb, dts[d], (h_layout)((l + 1) % H_LAYOUT_COUNT));
            double *ref, *mag;
            int64_t K;
            ref_matmul(va, sa, vb, sb, &so, &ref, &mag, &K);
            for (int i = 0; i < 9; i++)
                if (!isfinite(mag[i])) mag[i] = 0;
            char what[64];
            snprintf(what, sizeof what, "matmul NaN/Inf %s layout %d", em_dtype_name(dts[d]), l);
            compare(what, em_matmul(a, b), dts[d], so, ref, mag, K);
            free(ref), free(mag);
        }
        em_scope_end();
    }
}

static em_tensor *outer_fn(const em_tensor *a, const em_tensor *b)
{
    return em_outer(a, b);
}

/* Reference for the outer product: [n] x [m] -> a[i] * b[j]. */
static void check_outer(em_dtype dt, h_layout la, h_layout lb)
{
    em_scope_begin();
    double *va, *vb;
    double lo = em_dtype_is_float(dt) ? -1 : 0, hi = em_dtype_is_float(dt) ? 1 : 20;
    em_tensor *a = h_rand(EM_SHAPE(6), dt, la, lo, hi, &va);
    em_tensor *b = h_rand(EM_SHAPE(9), dt, lb, lo, hi, &vb);
    double ref[54], mag[54];
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 9; j++)
            ref[i * 9 + j] = va[i] * vb[j], mag[i * 9 + j] = fabs(ref[i * 9 + j]);
    char what[64];
    snprintf(what, sizeof what, "outer %s layouts %d/%d", em_dtype_name(dt), la, lb);
    compare(what, outer_fn(a, b), dt, EM_SHAPE(6, 9), ref, mag, 1);
    free(va), free(vb);
    em_scope_end();
}

static void helpers(void)
{
    const em_dtype dts[] = {EM_F32, EM_F64, EM_BF16, EM_I64, EM_I8};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            h_layout l2 = (h_layout)((l + 2) % H_LAYOUT_COUNT);
            check_mm("dot", em_dot, EM_SHAPE(37), EM_SHAPE(37), dts[d], (h_layout)l, l2);
            check_mm("dot", em_dot, EM_SHAPE(0), EM_SHAPE(0), dts[d], (h_layout)l, l2);
            check_mm("matvec", em_matvec, EM_SHAPE(13, 37), EM_SHAPE(37), dts[d], (h_layout)l, l2);
            check_mm("matvec", em_matvec, EM_SHAPE(300, 70), EM_SHAPE(70), dts[d], (h_layout)l, l2);
            check_outer(dts[d], (h_layout)l, l2);
        }
}

static void bad_inputs(void)
{
    em_scope_begin();
    em_device cpu = h_dev;
    em_tensor *a = em_zeros(EM_SHAPE(2, 3), EM_F32, cpu),
              *b = em_zeros(EM_SHAPE(4, 5), EM_F32, cpu);
    em_tensor *v3 = em_zeros(EM_SHAPE(3), EM_F32, cpu), *v4 = em_zeros(EM_SHAPE(4), EM_F32, cpu);
    em_tensor *d = em_zeros(EM_SHAPE(3, 4), EM_F64, cpu);
    em_tensor *bo = em_zeros(EM_SHAPE(3, 3), EM_BOOL, cpu);
    em_tensor *s = em_scalar(1, EM_F32, cpu);
    em_tensor *b3 = em_zeros(EM_SHAPE(2, 3, 4), EM_F32, cpu),
              *c3 = em_zeros(EM_SHAPE(3, 4, 5), EM_F32, cpu);
    CHECK_OK("setup");

    CHECK(em_matmul(NULL, a) == NULL, "NULL a");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_matmul");
    CHECK(em_matmul(a, NULL) == NULL, "NULL b");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_matmul");
    CHECK(em_matmul(a, b) == NULL, "bad shapes");
    CHECK_ERR(EM_ERR_SHAPE, "em_matmul: shapes [2, 3] and [4, 5] do not fit (3 != 4)");
    CHECK(em_matmul(a, d) == NULL, "dtype mismatch");
    CHECK_ERR(EM_ERR_DTYPE, "em_matmul: dtypes f32 and f64");
    CHECK(em_matmul(bo, bo) == NULL, "bool");
    CHECK_ERR(EM_ERR_DTYPE, "em_matmul: dtype bool");
    CHECK(em_matmul(s, a) == NULL, "rank 0");
    CHECK_ERR(EM_ERR_SHAPE, "em_matmul");
    CHECK(em_matmul(b3, c3) == NULL, "batch broadcast");
    CHECK_ERR(EM_ERR_SHAPE, "em_matmul: batch dims of shapes [2, 3, 4] and [3, 4, 5]");
    CHECK(em_matmul(v3, v4) == NULL, "1-D lengths");
    CHECK_ERR(EM_ERR_SHAPE, "(3 != 4)");
    /* NULL propagation keeps the first error */
    CHECK(em_matmul(em_matmul(a, b), a) == NULL, "chain");
    CHECK_ERR(EM_ERR_SHAPE, "do not fit");

    CHECK(em_dot(a, v3) == NULL, "dot of a matrix");
    CHECK_ERR(EM_ERR_SHAPE, "em_dot: expected two 1-D tensors, got shapes [2, 3] and [3]");
    CHECK(em_dot(v3, v4) == NULL, "dot lengths");
    CHECK_ERR(EM_ERR_SHAPE, "em_dot: lengths 3 and 4");
    CHECK(em_dot(NULL, v4) == NULL, "dot NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_dot");
    CHECK(em_outer(a, v3) == NULL, "outer of a matrix");
    CHECK_ERR(EM_ERR_SHAPE, "em_outer");
    CHECK(em_outer(v3, em_zeros(EM_SHAPE(2), EM_I32, cpu)) == NULL, "outer dtypes");
    CHECK_ERR(EM_ERR_DTYPE, "em_outer: dtypes f32 and i32");
    CHECK(em_matvec(v3, v3) == NULL, "matvec of a vector");
    CHECK_ERR(EM_ERR_SHAPE, "em_matvec");
    CHECK(em_matvec(a, v4) == NULL, "matvec lengths");
    CHECK_ERR(EM_ERR_SHAPE, "em_matvec: shapes [2, 3] and [4] do not fit (3 != 4)");
    CHECK(em_matvec(bo, em_zeros(EM_SHAPE(3), EM_BOOL, cpu)) == NULL, "matvec bool");
    CHECK_ERR(EM_ERR_DTYPE, "em_matvec");
    em_scope_end();
}

/* ---- matmul_bias_act ---------------------------------------------------------------------- */

/* PyTorch's definitions in f64. */
static double ref_act(double z, em_act act)
{
    switch (act) {
    case EM_ACT_RELU: return z < 0 ? 0 : z;
    case EM_ACT_GELU: return 0.5 * z * (1 + erf(z / sqrt(2.0)));
    case EM_ACT_GELU_TANH:
        return 0.5 * z * (1 + tanh(sqrt(2.0 / M_PI) * (z + 0.044715 * z * z * z)));
    case EM_ACT_SILU: return z / (1 + exp(-z));
    default: return z;
    }
}

static const char *const act_names[] = {"none", "relu", "gelu", "gelu_tanh", "silu"};

/* act(a @ b + bias) against the f64 reference: the product's tolerance (its error passes through
 * act' <= 1.13, and the bias adds one more rounding), f32's erf approximation in gelu. */
static void check_mba(em_shape sa, em_shape sb, bool with_bias, em_act act, em_dtype dt,
                      h_layout la, h_layout lb)
{
    em_scope_begin();
    double *va, *vb, *vbias = NULL, *ref, *mag;
    em_tensor *a = h_rand(sa, dt, la, -1, 1, &va), *b = h_rand(sb, dt, lb, -1, 1, &vb);
    em_shape so;
    int64_t K;
    ref_matmul(va, sa, vb, sb, &so, &ref, &mag, &K);
    int64_t N = sb.rank == 1 ? 1 : sb.dims[sb.rank - 1], n = 1;
    for (int d = 0; d < so.rank; d++) n *= so.dims[d];
    em_tensor *bias = with_bias ? h_rand(EM_SHAPE(N), dt, lb, -1, 1, &vbias) : NULL;
    for (int64_t i = 0; i < n; i++) {
        double z = ref[i] + (vbias ? vbias[i % N] : 0);
        ref[i] = ref_act(z, act);
        mag[i] = 1.2 * (mag[i] + fabs(z));
    }
    char what[160];
    snprintf(what, sizeof what, "matmul_bias_act %s %s bias=%d [%lld..] @ [..%lld] layouts %d/%d",
             act_names[act], em_dtype_name(dt), with_bias, (long long)sa.dims[0], (long long)N,
             (int)la, (int)lb);
    compare(what, em_matmul_bias_act(a, b, bias, act), dt, so, ref, mag, K);
    free(va), free(vb), free(vbias), free(ref), free(mag);
    em_scope_end();
}

static void matmul_bias_act(void)
{
    typedef struct mcase {
        em_shape a, b;
    } mcase;
    const mcase cases[] = {
        {EM_SHAPE(7, 17), EM_SHAPE(17, 5)},         /* unpacked GEMM */
        {EM_SHAPE(65, 130), EM_SHAPE(130, 33)},     /* packed, cut edge tiles */
        {EM_SHAPE(1, 40), EM_SHAPE(40, 37)},        /* GEMV, M = 1 */
        {EM_SHAPE(37, 40), EM_SHAPE(40, 1)},        /* GEMV, N = 1 */
        {EM_SHAPE(37, 40), EM_SHAPE(40)},           /* 1-D b: bias of length 1 */
        {EM_SHAPE(40), EM_SHAPE(40, 9)},            /* 1-D a */
        {EM_SHAPE(2, 3, 9, 8), EM_SHAPE(3, 8, 10)}, /* batched, b broadcast over dim 0 */
        {EM_SHAPE(3, 5, 0), EM_SHAPE(0, 6)},        /* K = 0: act(bias) */
    };
    const em_dtype dts[] = {EM_F64, EM_F32, EM_F16, EM_BF16};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
            for (int act = EM_ACT_NONE; act <= EM_ACT_SILU; act++)
                for (int wb = 0; wb < 2; wb++) {
                    h_layout la = (h_layout)((c + (size_t)act) % H_LAYOUT_COUNT);
                    h_layout lb = (h_layout)((c + d + (size_t)wb) % H_LAYOUT_COUNT);
                    check_mba(cases[c].a, cases[c].b, wb, (em_act)act, dts[d], la, lb);
                }
    /* every layout pair once through the packed path */
    for (int la = 0; la < H_LAYOUT_COUNT; la++)
        for (int lb = 0; lb < H_LAYOUT_COUNT; lb++)
            check_mba(EM_SHAPE(70, 33), EM_SHAPE(33, 65), true, EM_ACT_GELU, EM_F32, (h_layout)la,
                      (h_layout)lb);
}

static void matmul_bias_act_bad_inputs(void)
{
    em_scope_begin();
    em_device dev = h_dev;
    em_tensor *a = em_zeros(EM_SHAPE(2, 3), EM_F32, dev),
              *b = em_zeros(EM_SHAPE(3, 4), EM_F32, dev);
    em_tensor *b5 = em_zeros(EM_SHAPE(5), EM_F32, dev), *b4 = em_zeros(EM_SHAPE(4), EM_F32, dev);
    em_tensor *b14 = em_zeros(EM_SHAPE(1, 4), EM_F32, dev);
    em_tensor *b4d = em_zeros(EM_SHAPE(4), EM_F64, dev);
    em_tensor *ai = em_zeros(EM_SHAPE(2, 3), EM_I32, dev),
              *bi = em_zeros(EM_SHAPE(3, 4), EM_I32, dev);
    CHECK_OK("setup");
    CHECK(em_matmul_bias_act(a, b, b5, EM_ACT_RELU) == NULL, "bias length");
    CHECK_ERR(EM_ERR_SHAPE, "em_matmul_bias_act: bias of shape [5], want [4] (the product's N)");
    CHECK(em_matmul_bias_act(a, b, b14, EM_ACT_NONE) == NULL, "bias rank");
    CHECK_ERR(EM_ERR_SHAPE, "em_matmul_bias_act: bias of shape [1, 4], want [4]");
    CHECK(em_matmul_bias_act(a, b, b4d, EM_ACT_GELU) == NULL, "bias dtype");
    CHECK_ERR(EM_ERR_DTYPE, "em_matmul_bias_act: bias dtype f64 differs from the operands' f32");
    CHECK(em_matmul_bias_act(ai, bi, NULL, EM_ACT_NONE) == NULL, "integers");
    CHECK_ERR(EM_ERR_DTYPE, "em_matmul_bias_act: dtype i32 is not supported");
    CHECK(em_matmul_bias_act(a, b, b4, (em_act)9) == NULL, "activation code");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_matmul_bias_act: activation code 9");
    CHECK(em_matmul_bias_act(a, a, b4, EM_ACT_SILU) == NULL, "shapes");
    CHECK_ERR(EM_ERR_SHAPE, "em_matmul_bias_act: shapes [2, 3] and [2, 3] do not fit");
    CHECK(em_matmul_bias_act(NULL, b, b4, EM_ACT_SILU) == NULL, "NULL a");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_matmul_bias_act");
    if (dev.backend != EM_CPU.backend) { /* a bias on another device */
        em_tensor *bc = em_zeros(EM_SHAPE(4), EM_F32, EM_CPU);
        CHECK(em_matmul_bias_act(a, b, bc, EM_ACT_RELU) == NULL, "bias device");
        CHECK_ERR(EM_ERR_DEVICE, "em_matmul_bias_act");
    }
    em_scope_end();
}

void conf_linalg(void)
{
    matmul_bias_act();
    matmul_bias_act_bad_inputs();
    matmul_dtypes_layouts();
    matmul_odd_sizes();
    matmul_ranks();
    matmul_empty();
    matmul_nonfinite();
    helpers();
    bad_inputs();
}
