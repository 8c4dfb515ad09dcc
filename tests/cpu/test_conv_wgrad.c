/* The CPU's CONV_WEIGHT_GRAD (cpu_conv_wgrad.c: one GEMM whose im2col operand is packed straight
 * from the padded images) against a naive f64 reference and against the stacked pad + im2col +
 * matmul composition the conv rule ran before it, over kernel sizes 1/3/5, pads 0/1/2 (and
 * asymmetric), odd sizes, batch 1..9, both GEMM orientations (C*kh*kw >= Co or not), channel
 * counts that take the channels-last packing (multiples of 8), strided inputs, f32/f64/bf16,
 * every kernel set this CPU runs; bitwise the same on 1, 2 and 3 threads. Cases of at most 12
 * columns (C*kh*kw) with a contiguous f32 gy (layout 0: x strided) take the dot-product path on
 * the AVX2/AVX-512 sets (the portable set keeps the GEMM). */
#include <math.h>

#include "backend/cpu/cpu_gemm.h"
#include "harness.h"
#include "tensor/op.h"

typedef struct wg_case {
    int64_t n, c, co, h, w, kh, kw, pt, pb, pl, pr;
    int64_t sh, sw, dh, dw; /* strides and dilations */
} wg_case;

static int64_t out_h(const wg_case *k)
{
    return (k->h + k->pt + k->pb - k->dh * (k->kh - 1) - 1) / k->sh + 1;
}

static int64_t out_w(const wg_case *k)
{
    return (k->w + k->pl + k->pr - k->dw * (k->kw - 1) - 1) / k->sw + 1;
}

/* gw[co, c, a, b] = sum_{n, oh, ow} gy[n, co, oh, ow] x[n, c, oh sh + a dh - pt,
 * ow sw + b dw - pl]. */
static double *reference(const wg_case *k, const double *x, const double *gy)
{
    int64_t OH = out_h(k), OW = out_w(k);
    double *r = calloc((size_t)(k->co * k->c * k->kh * k->kw), sizeof(double));
    for (int64_t co = 0; co < k->co; co++)
        for (int64_t c = 0; c < k->c; c++)
            for (int64_t a = 0; a < k->kh; a++)
                for (int64_t b = 0; b < k->kw; b++) {
                    double s = 0;
                    for (int64_t n = 0; n < k->n; n++)
                        for (int64_t oh = 0; oh < OH; oh++)
                            for (int64_t ow = 0; ow < OW; ow++) {
                                int64_t ih = oh * k->sh + a * k->dh - k->pt;
                                int64_t iw = ow * k->sw + b * k->dw - k->pl;
                                if (ih < 0 || ih >= k->h || iw < 0 || iw >= k->w) continue;
                                s += gy[((n * k->co + co) * OH + oh) * OW + ow] *
                                     x[((n * k->c + c) * k->h + ih) * k->w + iw];
                            }
                    r[((co * k->c + c) * k->kh + a) * k->kw + b] = s;
                }
    return r;
}

/* The rule's former path (symmetric pads, N >= 2): the images padded by pt rows and stacked
 * along H, one im2col of the stack, gy padded with kh - 1 zero rows per image, one product. */
static em_tensor *stacked(const wg_case *k, const em_tensor *x, const em_tensor *gy)
{
    int64_t N = k->n, C = k->c, Co = k->co, kh = k->kh, kw = k->kw, p0 = k->pt, p1 = k->pl;
    int64_t Hs = k->h + 2 * p0, OW = k->w + 2 * p1 - kw + 1, ckk = C * kh * kw;
    int64_t Lt = (N * Hs - kh + 1) * OW;
    int64_t xpad[4] = {0, 0, p0, p0}, gpad[4] = {0, 0, 0, kh - 1};
    em_tensor *xs = em_pad(em_transpose(x, 0, 1), xpad, 2, EM_PAD_CONSTANT, 0.0);
    em_tensor *x1 = em_reshape(em_contiguous(xs), EM_SHAPE(1, C, N * Hs, k->w));
    int64_t kern[2] = {kh, kw}, one[2] = {1, 1}, pad[2] = {0, p1};
    em_tensor *cols = em_reshape(em_im2col(x1, kern, one, pad, one), EM_SHAPE(ckk, Lt));
    em_tensor *gp = em_pad(em_transpose(gy, 0, 1), gpad, 2, EM_PAD_CONSTANT, 0.0);
    em_tensor *gl = em_slice(em_reshape(em_contiguous(gp), EM_SHAPE(Co, N * Hs * OW)), 1, 0, Lt, 1);
    return em_reshape(em_matmul(gl, em_transpose(cols, 0, 1)), EM_SHAPE(Co, C, kh, kw));
}

static void run_case(const wg_case *k, em_dtype dt, h_layout lay)
{
    em_scope_begin();
    int64_t OH = out_h(k), OW = out_w(k);
    int64_t st[2] = {k->sh, k->sw}, dil[2] = {k->dh, k->dw};
    bool unit = st[0] == 1 && st[1] == 1 && dil[0] == 1 && dil[1] == 1;
    double *xv, *gv;
    em_tensor *x = h_rand(EM_SHAPE(k->n, k->c, k->h, k->w), dt, lay, -1, 1, &xv);
    em_tensor *gy =
        h_rand(EM_SHAPE(k->n, k->co, OH, OW), dt, (h_layout)((lay + 1) % 3), -1, 1, &gv);
    double *ref = reference(k, xv, gv);
    int64_t K = k->n * OH * OW, kern[2] = {k->kh, k->kw}, lo[2] = {k->pt, k->pl};
    int64_t hi[2] = {k->pb, k->pr};
    em_shape ws = EM_SHAPE(k->co, k->c, k->kh, k->kw);
    /* f32 sums of K products of values in [-1, 1): errors grow like sqrt(K) */
    double tol = dt == EM_F64 ? 1e-11 : dt == EM_F32 ? 2e-6 * sqrt((double)K) + 1e-5 : 2e-2;
    char what[200];
    snprintf(what, sizeof what,
             "conv_weight_grad %s layout %d N%lld C%lld Co%lld %lldx%lld k%lldx%lld pads "
             "(%lld,%lld,%lld,%lld) s%lldx%lld d%lldx%lld",
             em_dtype_name(dt), (int)lay, (long long)k->n, (long long)k->c, (long long)k->co,
             (long long)k->h, (long long)k->w, (long long)k->kh, (long long)k->kw, (long long)k->pt,
             (long long)k->pb, (long long)k->pl, (long long)k->pr, (long long)st[0],
             (long long)st[1], (long long)dil[0], (long long)dil[1]);
    const char *sets[3] = {"portable", "avx2", "avx512"};
    for (int s = 0; s < 3; s++) {
        if (!cpu_gemm_use(sets[s])) continue;
        em_tensor *first = NULL;
        for (int th = 1; th <= 3; th++) {
            em_set_num_threads(th);
            em_tensor *gw = tn_conv2d_weight_grad(x, gy, kern, st, dil, lo, hi);
            CHECK(gw != NULL, "%s: %s", what, em_last_error());
            if (!gw) break;
            char w2[260];
            snprintf(w2, sizeof w2, "%s %s %d threads", what, sets[s], th);
            h_check_tensor(w2, gw, ref, ws, tol, tol);
            if (first)
                CHECK(h_same_bytes(gw, first), "%s: not the bytes of 1 thread", w2);
            else
                first = gw;
        }
        /* the composition today's rule replaced (and what other backends run) */
        if (s == 1 && unit && k->pt == k->pb && k->pl == k->pr && k->n >= 2 && dt != EM_BF16) {
            em_tensor *old = stacked(k, x, gy);
            CHECK_OK("stacked composition");
            double *ov = old ? h_values(old) : NULL;
            if (ov && first)
                CHECK(h_check_tensor(what, first, ov, ws, tol, tol),
                      "%s: differs from the stacked path", what);
            free(ov);
        }
    }
    cpu_gemm_use(NULL);
    em_set_num_threads(2);
    free(xv);
    free(gv);
    free(ref);
    em_scope_end();
}

/* The rule end to end: em_conv2d's weight gradient through em_backward against the reference. */
static void through_backward(void)
{
    em_scope_begin();
    wg_case k = {.n = 3,
                 .c = 4,
                 .co = 5,
                 .h = 9,
                 .w = 7,
                 .kh = 3,
                 .kw = 3,
                 .pt = 1,
                 .pb = 1,
                 .pl = 1,
                 .pr = 1,
                 .sh = 1,
                 .sw = 1,
                 .dh = 1,
                 .dw = 1};
    double *xv, *wv;
    em_tensor *x = h_rand(EM_SHAPE(3, 4, 9, 7), EM_F64, H_CONTIG, -1, 1, &xv);
    em_tensor *w = h_rand(EM_SHAPE(5, 4, 3, 3), EM_F64, H_CONTIG, -1, 1, &wv);
    em_requires_grad(w, true);
    int64_t before = tn_op_count(EM_OP_CONV_WEIGHT_GRAD);
    em_tensor *y = em_conv2d(x, w, NULL, (em_conv_opts){.pad_lo = {1, 1}, .pad_hi = {1, 1}});
    em_grads *g = em_backward(em_sum(y, (em_axes){.n = 0}, false));
    CHECK_OK("conv2d backward");
    CHECK(tn_op_count(EM_OP_CONV_WEIGHT_GRAD) == before + 1, "the rule did not emit the record");
    double *ones = malloc(sizeof(double) * 3 * 5 * 9 * 7);
    for (int i = 0; i < 3 * 5 * 9 * 7; i++) ones[i] = 1;
    double *ref = reference(&k, xv, ones);
    em_tensor *gw = g ? em_grad(g, w) : NULL;
    CHECK(gw != NULL, "no weight gradient");
    if (gw) h_check_tensor("conv2d weight gradient", gw, ref, EM_SHAPE(5, 4, 3, 3), 1e-11, 1e-11);
    free(ref);
    /* stride 2 and dilation 2 x 1: the record too */
    wg_case k2 = k;
    k2.sh = k2.sw = 2, k2.dh = 2;
    before = tn_op_count(EM_OP_CONV_WEIGHT_GRAD);
    y = em_conv2d(
        x, w, NULL,
        (em_conv_opts){.stride = {2, 2}, .dilation = {2, 1}, .pad_lo = {1, 1}, .pad_hi = {1, 1}});
    g = em_backward(em_sum(y, (em_axes){.n = 0}, false));
    CHECK_OK("strided conv2d backward");
    CHECK(tn_op_count(EM_OP_CONV_WEIGHT_GRAD) == before + 1,
          "the rule did not emit the record at stride 2");
    ref = reference(&k2, xv, ones);
    gw = g ? em_grad(g, w) : NULL;
    CHECK(gw != NULL, "no weight gradient at stride 2");
    if (gw)
        h_check_tensor("strided conv2d weight gradient", gw, ref, EM_SHAPE(5, 4, 3, 3), 1e-11,
                       1e-11);
    free(ones);
    free(ref);
    free(xv);
    free(wv);
    em_scope_end();
}

static void bad_inputs(void)
{
    em_scope_begin();
    em_tensor *x = em_zeros(EM_SHAPE(2, 3, 5, 5), EM_F32, EM_CPU);
    em_tensor *gy = em_zeros(EM_SHAPE(2, 4, 5, 5), EM_F32, EM_CPU);
    int64_t k3[2] = {3, 3}, p1[2] = {1, 1}, p0[2] = {0, 0};
    CHECK(tn_conv2d_weight_grad(x, gy, k3, NULL, NULL, p0, p0) == NULL, "wrong gy size accepted");
    CHECK_ERR(EM_ERR_SHAPE, "conv_weight_grad");
    CHECK(tn_conv2d_weight_grad(x, em_zeros(EM_SHAPE(2, 4, 5, 5), EM_F64, EM_CPU), k3, NULL, NULL,
                                p1, p1) == NULL,
          "mixed dtypes accepted");
    CHECK_ERR(EM_ERR_DTYPE, "conv_weight_grad");
    CHECK(tn_conv2d_weight_grad(em_zeros(EM_SHAPE(3, 5, 5), EM_F32, EM_CPU), gy, k3, NULL, NULL, p1,
                                p1) == NULL,
          "rank 3 accepted");
    CHECK_ERR(EM_ERR_SHAPE, "conv_weight_grad");
    int64_t s2[2] = {2, 2}, s0[2] = {0, 1};
    CHECK(tn_conv2d_weight_grad(x, gy, k3, s2, NULL, p1, p1) == NULL,
          "gy of a stride-1 size accepted at stride 2");
    CHECK_ERR(EM_ERR_SHAPE, "conv_weight_grad");
    CHECK(tn_conv2d_weight_grad(x, gy, k3, s0, NULL, p1, p1) == NULL, "stride 0 accepted");
    CHECK_ERR(EM_ERR_SHAPE, "conv_weight_grad");
    em_tensor *ok = tn_conv2d_weight_grad(x, gy, k3, NULL, NULL, p1, p1);
    CHECK(ok && em_tensor_shape(ok).dims[0] == 4 && em_tensor_shape(ok).dims[1] == 3,
          "[Co, C, kh, kw] expected");
    em_scope_end();
}

int main(void)
{
    h_init();
    static const wg_case cases[] = {
        /* n  c  co  h   w  kh kw pt pb pl pr sh sw dh dw */
        {2, 3, 4, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},    /* C*k >= Co: B side */
        {3, 1, 8, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},    /* C*k < Co: A side */
        {2, 2, 3, 4, 4, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1},    /* 1x1 */
        {4, 3, 5, 9, 11, 5, 5, 2, 2, 2, 2, 1, 1, 1, 1},   /* 5x5 pad 2 */
        {3, 2, 7, 6, 5, 5, 3, 0, 0, 1, 1, 1, 1, 1, 1},    /* kh != kw, pad 0 rows */
        {2, 3, 2, 7, 7, 3, 5, 2, 0, 1, 2, 1, 1, 1, 1},    /* asymmetric pads */
        {1, 4, 6, 8, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},   /* one sample */
        {5, 2, 9, 1, 17, 1, 3, 0, 0, 1, 1, 1, 1, 1, 1},   /* conv1d as 1 x k */
        {9, 3, 20, 15, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, /* K = 1755: the GEMM's long-K region */
        {7, 1, 32, 12, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1,
         1}, /* long K, A side (conv1's geometry, smaller) */
        {8, 5, 3, 11, 21, 3, 3, 0, 0, 0, 0, 1, 1, 1, 1}, /* long K, Co < 6, wide rows */
        /* C a multiple of 8 on the B side: channels-last images, tap-major columns */
        {3, 8, 5, 6, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
        {2, 24, 10, 5, 9, 3, 3, 1, 0, 2, 1, 1, 1, 1, 1},   /* panels of 16 straddle two taps */
        {6, 16, 12, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, /* long K */
        {2, 32, 64, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},   /* conv2's channels */
        {3, 8, 9, 5, 5, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1},     /* 1x1, C*k < Co: A side */
        /* strides and dilations */
        {2, 3, 16, 23, 21, 7, 7, 3, 3, 3, 3, 2, 2, 1, 1}, /* a 7x7 stride-2 stem: B side */
        {3, 8, 6, 9, 10, 3, 3, 1, 1, 1, 1, 2, 2, 1, 1},   /* channels-last, stride 2 */
        {2, 4, 40, 9, 8, 3, 3, 1, 1, 1, 1, 2, 1, 1, 1},   /* A side, stride 2 x 1 */
        {3, 16, 8, 8, 8, 1, 1, 0, 0, 0, 0, 2, 2, 1, 1},   /* 1x1 stride 2 (a shortcut) */
        {2, 3, 4, 11, 12, 3, 3, 2, 2, 2, 2, 1, 1, 2, 2},  /* dilation 2 */
        {2, 8, 5, 13, 12, 3, 2, 2, 1, 0, 3, 3, 2, 2, 3},  /* both, channels-last, uneven */
        {9, 3, 20, 21, 19, 3, 3, 1, 1, 1, 1, 2, 2, 1, 1}, /* long K at stride 2 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_case(&cases[i], EM_F32, (h_layout)(i % 3));
        run_case(&cases[i], EM_F64, (h_layout)((i + 1) % 3));
    }
    /* A side with a contiguous gy (layout 0, packed straight from gy's rows) in f32 */
    run_case(&cases[1], EM_F32, H_STRIDED);
    run_case(&cases[9], EM_F32, H_STRIDED);
    /* at most 12 columns with a contiguous f32 gy (x strided): the dot-product path, also for
       one output row (1 x 3) and a 1 x 1 kernel over 8 channels */
    run_case(&cases[7], EM_F32, H_STRIDED);
    run_case(&cases[15], EM_F32, H_STRIDED);
    run_case(&cases[0], EM_BF16, H_CONTIG);
    run_case(&cases[1], EM_BF16, H_STRIDED);
    run_case(&cases[11], EM_BF16, H_TRANSPOSED);
    through_backward();
    bad_inputs();
    return h_finish();
}
