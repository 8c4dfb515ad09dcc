/* Loss functions against PyTorch (tests/fixtures/loss.emfx from scripts/fixtures_loss.py):
 * values and input/target gradients for every reduction, in f64 (also strided) and f32; integer
 * target dtypes; finite-difference checks of CTC; bad input. */
#include <string.h>

#include "harness.h"

typedef em_tensor *(*loss_fn)(em_tensor *const *in, em_reduction r);

#define CE(name, ...)                                                                              \
    static em_tensor *f_##name(em_tensor *const *in, em_reduction r)                               \
    {                                                                                              \
        return em_cross_entropy(in[0], in[1], (em_ce_cfg){.reduction = r, __VA_ARGS__});           \
    }
CE(ce, .weight = NULL)
CE(ce_w, .weight = in[2])
CE(ce_ign, .ignore_index = 1)
CE(ce_ign100, .weight = NULL)
CE(ce_ls, .label_smoothing = 0.2)
CE(ce_ls_w_ign, .weight = in[2], .ignore_index = 3, .label_smoothing = 0.15)
CE(ce_nd, .weight = in[2], .ignore_zero = true)
CE(ce_nd_ls, .label_smoothing = 0.3)
CE(ce_prob, .weight = NULL)
CE(ce_prob_ls_w, .weight = in[2], .label_smoothing = 0.1)
CE(ce_prob_nd, .weight = NULL)
CE(ce_unb, .weight = NULL)
CE(ce_allign, .weight = NULL)

static em_tensor *f_nll_w_ign(em_tensor *const *in, em_reduction r)
{
    return em_nll_loss(in[0], in[1],
                       (em_ce_cfg){.reduction = r, .weight = in[2], .ignore_index = 2});
}
static em_tensor *f_nll_nd(em_tensor *const *in, em_reduction r)
{
    return em_nll_loss(in[0], in[1], (em_ce_cfg){.reduction = r});
}

#define F2(name, expr)                                                                             \
    static em_tensor *f_##name(em_tensor *const *in, em_reduction r)                               \
    {                                                                                              \
        return expr;                                                                               \
    }
F2(mse, em_mse_loss(in[0], in[1], r))
F2(l1, em_l1_loss(in[0], in[1], r))
F2(sl1, em_smooth_l1_loss(in[0], in[1], r, 0))
F2(sl1_b, em_smooth_l1_loss(in[0], in[1], r, 0.5))
F2(sl1_b0, em_smooth_l1_loss(in[0], in[1], r, EM_ZERO))
F2(huber, em_huber_loss(in[0], in[1], r, 0))
F2(huber_d, em_huber_loss(in[0], in[1], r, 0.7))
F2(bce, em_bce_loss(in[0], in[1], (em_bce_cfg){.reduction = r}))
F2(bce_w, em_bce_loss(in[0], in[1], (em_bce_cfg){.reduction = r, .weight = in[2]}))
F2(bcel, em_bce_with_logits(in[0], in[1], (em_bce_cfg){.reduction = r}))
F2(bcel_w_pw,
   em_bce_with_logits(in[0], in[1],
                      (em_bce_cfg){.reduction = r, .weight = in[2], .pos_weight = in[3]}))
F2(bcel_pw, em_bce_with_logits(in[0], in[1], (em_bce_cfg){.reduction = r, .pos_weight = in[2]}))
F2(bcel_ext, em_bce_with_logits(in[0], in[1], (em_bce_cfg){.reduction = r}))
F2(bcel_ext_pw, em_bce_with_logits(in[0], in[1], (em_bce_cfg){.reduction = r, .pos_weight = in[2]}))
F2(kl, em_kl_div(in[0], in[1], r, false))
F2(kl_log, em_kl_div(in[0], in[1], r, true))
F2(kl_zero, em_kl_div(in[0], in[1], r, false))
F2(cos, em_cosine_embedding_loss(in[0], in[1], in[2], r, 0))
F2(cos_m, em_cosine_embedding_loss(in[0], in[1], in[2], r, -0.2))
F2(cos_unb, em_cosine_embedding_loss(in[0], in[1], in[2], r, 0))
F2(rank, em_margin_ranking_loss(in[0], in[1], in[2], r, 0))
F2(rank_m, em_margin_ranking_loss(in[0], in[1], in[2], r, 0.5))
F2(trip, em_triplet_margin_loss(in[0], in[1], in[2], (em_triplet_cfg){.reduction = r}))
F2(trip_p1, em_triplet_margin_loss(in[0], in[1], in[2],
                                   (em_triplet_cfg){.reduction = r, .margin = 3, .p = 1}))
F2(trip_swap,
   em_triplet_margin_loss(in[0], in[1], in[2],
                          (em_triplet_cfg){
                              .reduction = r, .margin = 2, .p = 3, .eps = 1e-3, .swap = true}))
F2(pois, em_poisson_nll_loss(in[0], in[1], (em_poisson_cfg){.reduction = r}))
F2(pois_rate,
   em_poisson_nll_loss(in[0], in[1],
                       (em_poisson_cfg){.reduction = r, .no_log_input = true, .eps = 1e-3}))
F2(pois_full, em_poisson_nll_loss(in[0], in[1], (em_poisson_cfg){.reduction = r, .full = true}))
F2(gauss, em_gaussian_nll_loss(in[0], in[1], in[2], (em_gaussian_cfg){.reduction = r}))
F2(gauss_full, em_gaussian_nll_loss(in[0], in[1], in[2],
                                    (em_gaussian_cfg){.reduction = r, .full = true, .eps = 1e-2}))
F2(gauss_short, em_gaussian_nll_loss(in[0], in[1], in[2], (em_gaussian_cfg){.reduction = r}))
F2(gauss_last1, em_gaussian_nll_loss(in[0], in[1], in[2], (em_gaussian_cfg){.reduction = r}))

#define CTC(name, ...)                                                                             \
    static em_tensor *f_##name(em_tensor *const *in, em_reduction r)                               \
    {                                                                                              \
        return em_ctc_loss(em_log_softmax(in[0], -1), in[1], in[2], in[3],                         \
                           (em_ctc_cfg){.reduction = r, __VA_ARGS__});                             \
    }
CTC(ctc, .blank = 0)
CTC(ctc_cat, .blank = 0)
CTC(ctc_blank4_empty, .blank = 4)
CTC(ctc_inf, .blank = 0)
CTC(ctc_zinf, .zero_infinity = true)
CTC(ctc_unb, .blank = 0)

typedef struct lcase {
    const char *name;
    int n;
    loss_fn fn;
} lcase;

#define C_(name, n)                                                                                \
    {                                                                                              \
#name, n, f_##name                                                                         \
    }
static const lcase cases[] = {
    C_(ce, 2),          C_(ce_w, 3),
    C_(ce_ign, 2),      C_(ce_ign100, 2),
    C_(ce_ls, 2),       C_(ce_ls_w_ign, 3),
    C_(ce_nd, 3),       C_(ce_nd_ls, 2),
    C_(ce_prob, 2),     C_(ce_prob_ls_w, 3),
    C_(ce_prob_nd, 2),  C_(ce_unb, 2),
    C_(ce_allign, 2),   C_(nll_w_ign, 3),
    C_(nll_nd, 2),      C_(mse, 2),
    C_(l1, 2),          C_(sl1, 2),
    C_(sl1_b, 2),       C_(sl1_b0, 2),
    C_(huber, 2),       C_(huber_d, 2),
    C_(bce, 2),         C_(bce_w, 3),
    C_(bcel, 2),        C_(bcel_w_pw, 4),
    C_(bcel_pw, 3),     C_(bcel_ext, 2),
    C_(bcel_ext_pw, 3), C_(kl, 2),
    C_(kl_log, 2),      C_(kl_zero, 2),
    C_(cos, 3),         C_(cos_m, 3),
    C_(cos_unb, 3),     C_(rank, 3),
    C_(rank_m, 3),      C_(trip, 3),
    C_(trip_p1, 3),     C_(trip_swap, 3),
    C_(pois, 2),        C_(pois_rate, 2),
    C_(pois_full, 2),   C_(gauss, 3),
    C_(gauss_full, 3),  C_(gauss_short, 3),
    C_(gauss_last1, 3), C_(ctc, 4),
    C_(ctc_cat, 4),     C_(ctc_blank4_empty, 4),
    C_(ctc_inf, 4),     C_(ctc_zinf, 4),
    C_(ctc_unb, 4),
};

static const char *red_names[4] = {"mean", "sum", "none", "batchmean"};

/* An input of the fixture in dtype dt (float inputs) and the given layout. */
static em_tensor *load_input(h_fixture *fx, const char *name, em_dtype dt, h_layout layout)
{
    em_shape s;
    const double *v = h_fixture_values(fx, name, &s);
    if (!v) return NULL;
    em_tensor *t = h_fixture_tensor(fx, name);
    bool is_int = em_tensor_dtype(t) == EM_I64;
    em_release(t);
    return h_from_values(v, s, is_int ? EM_I64 : dt, layout);
}

static int n_compared;

static void run_case(h_fixture *fx, const lcase *c, em_dtype dt, h_layout layout)
{
    char key[160], what[200];
    snprintf(key, sizeof key, "%s.meta", c->name);
    em_shape ms;
    const double *meta = h_fixture_values(fx, key, &ms);
    if (!meta) return;
    double atol = dt == EM_F64 ? 1e-12 : 1e-6, rtol = dt == EM_F64 ? 1e-10 : 1e-5;
    for (int r = 0; r < 4; r++) {
        if (meta[r] == 0) continue;
        em_scope_begin();
        em_tensor *in[8] = {0};
        bool any = false;
        for (int i = 0; i < c->n; i++) {
            snprintf(key, sizeof key, "%s.in%d", c->name, i);
            in[i] = load_input(fx, key, dt, layout);
            if (meta[4 + i] != 0) {
                em_requires_grad(in[i], true);
                any = true;
            }
        }
        em_tensor *loss = c->fn(in, (em_reduction)r);
        snprintf(what, sizeof what, "%s %s %s layout %d", c->name, red_names[r], em_dtype_name(dt),
                 (int)layout);
        CHECK(loss != NULL, "%s: %s", what, em_last_error());
        em_clear_error();
        snprintf(key, sizeof key, "%s.%s.loss", c->name, red_names[r]);
        em_shape ls;
        const double *lv = h_fixture_values(fx, key, &ls);
        if (loss && lv) {
            CHECK(em_tensor_dtype(loss) == dt, "%s: loss dtype %s", what,
                  em_dtype_name(em_tensor_dtype(loss)));
            h_check_tensor(what, loss, lv, ls, atol, rtol);
            n_compared++;
        }
        if (loss && any) {
            em_tensor *obj = loss;
            if (r == EM_REDUCTION_NONE) {
                snprintf(key, sizeof key, "%s.none.cot", c->name);
                em_tensor *cot = em_cast(h_fixture_tensor(fx, key), dt);
                obj = em_sum(em_mul(loss, cot), EM_ALL, false);
            }
            em_grads *g = em_backward(obj);
            CHECK(g != NULL, "%s backward: %s", what, em_last_error());
            em_clear_error();
            for (int i = 0; g && i < c->n; i++) {
                if (meta[4 + i] == 0) continue;
                snprintf(key, sizeof key, "%s.%s.g%d", c->name, red_names[r], i);
                em_shape gs;
                const double *gv = h_fixture_values(fx, key, &gs);
                em_tensor *gr = em_grad(g, in[i]);
                char gw[240];
                snprintf(gw, sizeof gw, "%s grad of input %d", what, i);
                if (!gr) gr = em_zeros(gs, dt, EM_CPU);
                if (gv) h_check_tensor(gw, gr, gv, gs, atol, rtol);
                em_release(gr);
                n_compared++;
            }
        }
        em_scope_end();
    }
}

static void test_fixtures(void)
{
    h_fixture *fx = h_fixture_load("loss.emfx");
    if (!fx) return;
    int nc = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < nc; i++) {
        run_case(fx, &cases[i], EM_F64, H_CONTIG);
        run_case(fx, &cases[i], EM_F64, H_STRIDED);
        run_case(fx, &cases[i], EM_F32, H_CONTIG);
    }
    printf("  %d values and gradients compared with PyTorch over %d cases\n", n_compared, nc);
    h_fixture_free(fx);
}

/* Class indices of any integer dtype give the same loss. */
static void test_target_dtypes(void)
{
    em_scope_begin();
    double xv[12] = {0.1, -0.4, 2.0, 0.3, 1.5, -1.0, 0.0, 0.2, 0.7, -0.3, 0.9, 1.1};
    em_tensor *x = em_from_f64(xv, EM_SHAPE(3, 4));
    int64_t yv[3] = {2, 0, 3};
    em_tensor *y = em_from_i64(yv, EM_SHAPE(3));
    double ref = em_item_f64(em_cross_entropy(x, y, (em_ce_cfg){0}));
    em_dtype dts[] = {EM_I32, EM_I16, EM_I8, EM_U8};
    for (int i = 0; i < 4; i++) {
        em_tensor *l = em_cross_entropy(x, em_cast(y, dts[i]), (em_ce_cfg){0});
        CHECK(l && fabs(em_item_f64(l) - ref) < 1e-15, "cross-entropy with %s targets: %s",
              em_dtype_name(dts[i]), em_last_error());
        em_clear_error();
    }
    /* ignore_zero skips class 0; without it class 0 counts. */
    double all = em_item_f64(em_cross_entropy(x, y, (em_ce_cfg){.reduction = EM_REDUCTION_SUM}));
    double skip = em_item_f64(
        em_cross_entropy(x, y, (em_ce_cfg){.reduction = EM_REDUCTION_SUM, .ignore_zero = true}));
    double lse1 = log(exp(1.5) + exp(-1.0) + exp(0.0) + exp(0.2));
    CHECK(fabs((all - skip) - (lse1 - 1.5)) < 1e-12, "ignore_zero removes sample 1's loss");
    em_scope_end();
}

/* Finite differences of CTC with respect to unnormalised log_probs: Ember's gradient is the
 * exact derivative (PyTorch's assumes a log_softmax in front). */
typedef struct ctc_ctx {
    em_tensor *targets, *il, *tl;
    em_reduction r;
} ctc_ctx;

static em_tensor *ctc_f(em_tensor *const *in, int n, void *vctx)
{
    ctc_ctx *c = vctx;
    return em_ctc_loss(in[0], c->targets, c->il, c->tl, (em_ctc_cfg){.reduction = c->r});
}

static void test_ctc_gradcheck(void)
{
    em_scope_begin();
    em_seed(3);
    em_tensor *lp = em_rand_uniform(EM_SHAPE(5, 2, 4), -2.5, -0.2, EM_F64, EM_CPU);
    int64_t tv[4] = {1, 1, 3, 2};
    int64_t il[2] = {5, 4}, tl[2] = {2, 2};
    ctc_ctx c = {em_from_i64(tv, EM_SHAPE(2, 2)), em_from_i64(il, EM_SHAPE(2)),
                 em_from_i64(tl, EM_SHAPE(2)), EM_REDUCTION_MEAN};
    CHECK(h_gradcheck("ctc mean wrt log_probs", ctc_f, &c, &lp, 1, NULL, 1e-7, 1e-5), "ctc");
    c.r = EM_REDUCTION_NONE;
    CHECK(h_gradcheck("ctc none wrt log_probs", ctc_f, &c, &lp, 1, NULL, 1e-7, 1e-5), "ctc");
    em_scope_end();
}

/* Second order: the losses are op graphs, so create_graph differentiates them again. */
static em_tensor *ce_f(em_tensor *const *in, int n, void *vctx)
{
    return em_cross_entropy(in[0], vctx, (em_ce_cfg){.weight = in[1], .label_smoothing = 0.2});
}

/* without label smoothing (the log_softmax_gather records): weights, an ignored target, a spatial
 * [N, C, d] input, reductions mean and none */
static em_tensor *ce_pick_f(em_tensor *const *in, int n, void *vctx)
{
    return em_cross_entropy(in[0], vctx, (em_ce_cfg){.weight = in[1], .ignore_index = 1});
}

static em_tensor *ce_pick_none_f(em_tensor *const *in, int n, void *vctx)
{
    return em_mul(em_cross_entropy(in[0], vctx, (em_ce_cfg){.reduction = EM_REDUCTION_NONE}),
                  in[1]);
}

static em_tensor *bcel_f(em_tensor *const *in, int n, void *vctx)
{
    return em_bce_with_logits(in[0], in[1], (em_bce_cfg){.pos_weight = in[2]});
}

static em_tensor *gauss_f(em_tensor *const *in, int n, void *vctx)
{
    return em_gaussian_nll_loss(in[0], in[1], in[2], (em_gaussian_cfg){.full = true});
}

static void test_second_order(void)
{
    em_scope_begin();
    em_seed(11);
    int64_t yv[4] = {2, 0, 1, 2};
    em_tensor *y = em_from_i64(yv, EM_SHAPE(4));
    em_tensor *ce_in[2] = {em_randn(EM_SHAPE(4, 3), EM_F64, EM_CPU),
                           em_rand_uniform(EM_SHAPE(3), 0.5, 1.5, EM_F64, EM_CPU)};
    CHECK(h_gradcheck("ce logits and weight", ce_f, y, ce_in, 2, NULL, 0, 0), "ce");
    CHECK(h_gradgradcheck("ce second order", ce_f, y, ce_in, 2, NULL, 0, 0), "ce 2nd");
    CHECK(h_gradcheck("ce (no smoothing) logits and weight", ce_pick_f, y, ce_in, 2, NULL, 0, 0),
          "ce pick");
    CHECK(h_gradgradcheck("ce (no smoothing) second order", ce_pick_f, y, ce_in, 2, NULL, 0, 0),
          "ce pick 2nd");
    int64_t ysv[6] = {2, 0, 1, 1, 0, 2};
    em_tensor *ys = em_from_i64(ysv, EM_SHAPE(2, 3));
    em_tensor *cs_in[2] = {em_randn(EM_SHAPE(2, 3, 3), EM_F64, EM_CPU),
                           em_randn(EM_SHAPE(2, 3), EM_F64, EM_CPU)};
    CHECK(h_gradcheck("ce [N, C, d] none", ce_pick_none_f, ys, cs_in, 2, NULL, 0, 0), "ce nd");
    CHECK(h_gradgradcheck("ce [N, C, d] none 2nd", ce_pick_none_f, ys, cs_in, 2, NULL, 0, 0),
          "ce nd 2nd");
    em_tensor *b_in[3] = {em_randn(EM_SHAPE(3, 2), EM_F64, EM_CPU),
                          em_rand(EM_SHAPE(3, 2), EM_F64, EM_CPU),
                          em_rand_uniform(EM_SHAPE(2), 0.5, 2, EM_F64, EM_CPU)};
    CHECK(h_gradgradcheck("bce with logits second order", bcel_f, NULL, b_in, 3, NULL, 0, 0),
          "bcel 2nd");
    em_tensor *g_in[3] = {em_randn(EM_SHAPE(3, 2), EM_F64, EM_CPU),
                          em_randn(EM_SHAPE(3, 2), EM_F64, EM_CPU),
                          em_rand_uniform(EM_SHAPE(3, 2), 0.5, 2, EM_F64, EM_CPU)};
    CHECK(h_gradgradcheck("gaussian nll second order", gauss_f, NULL, g_in, 3, NULL, 0, 0),
          "gauss 2nd");
    em_scope_end();
}

/* Losses train: a few SGD steps on a linear classifier lower the cross-entropy. */
static void test_training_step(void)
{
    em_seed(7);
    em_scope_begin();
    em_tensor *w = em_requires_grad(em_zeros(EM_SHAPE(4, 3), EM_F64, EM_CPU), true);
    em_tensor *x = em_randn(EM_SHAPE(8, 4), EM_F64, EM_CPU);
    int64_t yv[8] = {0, 1, 2, 0, 1, 2, 0, 1};
    em_tensor *y = em_from_i64(yv, EM_SHAPE(8));
    double first = 0, last = 0;
    for (int it = 0; it < 20; it++) {
        em_scope_begin();
        em_tensor *loss = em_cross_entropy(em_matmul(x, w), y, (em_ce_cfg){0});
        last = em_item_f64(loss);
        if (it == 0) first = last;
        em_grads *g = em_backward(loss);
        em_tensor *gw = em_grad(g, w);
        em_no_grad_begin();
        em_tensor *nw = em_keep(em_sub(w, em_mul_scalar(gw, 0.5)));
        em_no_grad_end();
        em_release(gw);
        em_scope_end();
        em_release(w);
        w = em_requires_grad(nw, true);
    }
    CHECK(fabs(first - log(3.0)) < 1e-12 && last < first - 0.1, "training: %g -> %g", first, last);
    em_release(w);
    em_scope_end();
}

static void test_bad_input(void)
{
    em_scope_begin();
    em_tensor *x = em_zeros(EM_SHAPE(3, 4), EM_F64, EM_CPU);
    int64_t yv[3] = {0, 4, 1};
    em_tensor *ybad = em_from_i64(yv, EM_SHAPE(3));
    em_tensor *y = em_zeros(EM_SHAPE(3), EM_I64, EM_CPU);
    CHECK(!em_cross_entropy(x, ybad, (em_ce_cfg){0}), "target 4 of 4 classes");
    CHECK_ERR(EM_ERR_INDEX, "em_cross_entropy: target 4 is out of range");
    /* ignored targets (-100) beside a bad one: the bad one is named; ignored alone pass */
    int64_t ypad[4] = {-100, 2, -5, -100};
    CHECK(!em_nll_loss(em_zeros(EM_SHAPE(4, 4), EM_F64, EM_CPU), em_from_i64(ypad, EM_SHAPE(4)),
                       (em_ce_cfg){0}),
          "target -5 beside ignored ones");
    CHECK_ERR(EM_ERR_INDEX, "em_nll_loss: target -5 is out of range for 4 classes");
    ypad[2] = 3;
    CHECK(em_nll_loss(em_zeros(EM_SHAPE(4, 4), EM_F64, EM_CPU), em_from_i64(ypad, EM_SHAPE(4)),
                      (em_ce_cfg){0}) != NULL,
          "ignored targets and classes");
    CHECK_OK("ignored targets and classes");
    CHECK(!em_cross_entropy(x, em_zeros(EM_SHAPE(4), EM_I64, EM_CPU), (em_ce_cfg){0}),
          "target shape");
    CHECK_ERR(EM_ERR_SHAPE, "em_cross_entropy");
    CHECK(!em_cross_entropy(em_zeros(EM_SHAPE(3, 4), EM_I64, EM_CPU), y, (em_ce_cfg){0}),
          "int logits");
    CHECK_ERR(EM_ERR_DTYPE, "em_cross_entropy");
    CHECK(!em_cross_entropy(x, em_zeros(EM_SHAPE(3), EM_BOOL, EM_CPU), (em_ce_cfg){0}),
          "bool target");
    CHECK_ERR(EM_ERR_DTYPE, "em_cross_entropy");
    CHECK(!em_cross_entropy(x, em_zeros(EM_SHAPE(3, 5), EM_F64, EM_CPU), (em_ce_cfg){0}),
          "probability target shape");
    CHECK_ERR(EM_ERR_SHAPE, "em_cross_entropy");
    CHECK(!em_cross_entropy(x, y, (em_ce_cfg){.weight = em_ones(EM_SHAPE(3), EM_F64, EM_CPU)}),
          "weight shape");
    CHECK_ERR(EM_ERR_SHAPE, "em_cross_entropy: weight");
    CHECK(!em_cross_entropy(x, y, (em_ce_cfg){.label_smoothing = 1.5}), "label smoothing");
    CHECK_ERR(EM_ERR_INVALID_ARG, "label_smoothing");
    CHECK(!em_cross_entropy(NULL, y, (em_ce_cfg){0}), "NULL logits");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_cross_entropy");
    CHECK(!em_cross_entropy(x, y, (em_ce_cfg){.reduction = (em_reduction)9}), "reduction");
    CHECK_ERR(EM_ERR_INVALID_ARG, "reduction");
    CHECK(!em_nll_loss(x, em_zeros(EM_SHAPE(3, 4), EM_F64, EM_CPU), (em_ce_cfg){0}),
          "nll float target");
    CHECK_ERR(EM_ERR_DTYPE, "em_nll_loss");
    CHECK(!em_nll_loss(x, y, (em_ce_cfg){.label_smoothing = 0.1}), "nll smoothing");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_nll_loss");
    CHECK(!em_mse_loss(x, em_zeros(EM_SHAPE(3, 5), EM_F64, EM_CPU), 0), "mse shapes");
    CHECK_ERR(EM_ERR_SHAPE, "em_mse_loss");
    CHECK(!em_l1_loss(x, x, EM_REDUCTION_BATCHMEAN), "l1 batchmean");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_l1_loss");
    CHECK(!em_huber_loss(x, x, 0, -1), "huber delta");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_huber_loss");
    CHECK(!em_bce_loss(em_full(EM_SHAPE(3, 4), 1.5, EM_F64, EM_CPU), x, (em_bce_cfg){0}),
          "bce input > 1");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_bce_loss: every input must lie in [0, 1]");
    CHECK(!em_bce_loss(x, em_zeros(EM_SHAPE(4), EM_F64, EM_CPU), (em_bce_cfg){0}), "bce shapes");
    CHECK_ERR(EM_ERR_SHAPE, "em_bce_loss");
    CHECK(!em_bce_loss(x, x, (em_bce_cfg){.pos_weight = x}), "bce pos_weight");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_bce_loss");
    CHECK(
        !em_bce_with_logits(x, x, (em_bce_cfg){.pos_weight = em_ones(EM_SHAPE(3), EM_F64, EM_CPU)}),
        "pos_weight shape");
    CHECK_ERR(EM_ERR_SHAPE, "em_bce_with_logits");
    CHECK(!em_kl_div(x, em_zeros(EM_SHAPE(2, 4), EM_F64, EM_CPU), 0, false), "kl shapes");
    CHECK_ERR(EM_ERR_SHAPE, "em_kl_div");
    CHECK(!em_cosine_embedding_loss(x, x, em_zeros(EM_SHAPE(4), EM_I64, EM_CPU), 0, 0), "cosine y");
    CHECK_ERR(EM_ERR_SHAPE, "em_cosine_embedding_loss");
    CHECK(!em_margin_ranking_loss(x, x, y, 0, 0), "ranking ranks");
    CHECK_ERR(EM_ERR_SHAPE, "em_margin_ranking_loss");
    em_tensor *x3 = em_zeros(EM_SHAPE(2, 3, 4), EM_F64, EM_CPU);
    CHECK(!em_triplet_margin_loss(x3, x3, x3, (em_triplet_cfg){0}), "triplet rank 3");
    CHECK_ERR(EM_ERR_SHAPE, "em_triplet_margin_loss");
    CHECK(!em_gaussian_nll_loss(x, x, em_ones(EM_SHAPE(4), EM_F64, EM_CPU), (em_gaussian_cfg){0}),
          "gaussian var shape");
    CHECK_ERR(EM_ERR_SHAPE, "em_gaussian_nll_loss: var");
    CHECK(!em_gaussian_nll_loss(x, x, em_full(EM_SHAPE(3, 4), -1, EM_F64, EM_CPU),
                                (em_gaussian_cfg){0}),
          "gaussian negative var");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_gaussian_nll_loss: var has negative");
    /* CTC */
    em_tensor *lp = em_zeros(EM_SHAPE(4, 2, 3), EM_F64, EM_CPU);
    int64_t tv[4] = {1, 2, 1, 0}, il[2] = {4, 4}, tl[2] = {2, 2}, ilb[2] = {5, 4};
    em_tensor *tg = em_from_i64(tv, EM_SHAPE(2, 2));
    em_tensor *ilt = em_from_i64(il, EM_SHAPE(2)), *tlt = em_from_i64(tl, EM_SHAPE(2));
    em_tensor *out = em_ctc_loss(lp, tg, ilt, tlt, (em_ctc_cfg){0});
    CHECK(!out, "ctc label equal to blank");
    CHECK_ERR(EM_ERR_INDEX, "em_ctc_loss: target label 0");
    CHECK(!em_ctc_loss(lp, tg, em_from_i64(ilb, EM_SHAPE(2)), tlt, (em_ctc_cfg){.blank = 2}),
          "input length > T");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_ctc_loss: input_lengths[0]");
    CHECK(!em_ctc_loss(lp, tg, em_from_i64(il, EM_SHAPE(1, 2)), tlt, (em_ctc_cfg){.blank = 2}),
          "length shape");
    CHECK_ERR(EM_ERR_SHAPE, "em_ctc_loss");
    CHECK(!em_ctc_loss(lp, tg, ilt, tlt, (em_ctc_cfg){.blank = 3}), "blank out of range");
    CHECK_ERR(EM_ERR_INDEX, "em_ctc_loss: blank");
    CHECK(!em_ctc_loss(em_zeros(EM_SHAPE(4, 2, 3, 1), EM_F64, EM_CPU), tg, ilt, tlt,
                       (em_ctc_cfg){.blank = 2}),
          "log_probs rank 4");
    CHECK_ERR(EM_ERR_SHAPE, "em_ctc_loss");
    CHECK(!em_ctc_loss(lp, em_zeros(EM_SHAPE(2, 2), EM_F64, EM_CPU), ilt, tlt, (em_ctc_cfg){0}),
          "float targets");
    CHECK_ERR(EM_ERR_DTYPE, "em_ctc_loss");
    em_scope_end();
}

int main(void)
{
    h_init();
    test_fixtures();
    test_target_dtypes();
    test_ctc_gradcheck();
    test_second_order();
    test_training_step();
    test_bad_input();
    return h_finish();
}
