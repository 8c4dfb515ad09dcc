/* Learning-rate schedulers against PyTorch 1.13's (tests/fixtures/optim.emfx): the learning rate
 * after construction and after each of 40 steps, and bad input. */
#include <math.h>
#include <string.h>

#include "harness.h"
#include <ember/optim.h>

static h_fixture *fx;

typedef em_sched *(*mk_fn)(em_optim *o);

static void check_seq(const char *tag, mk_fn make, const double *metrics)
{
    em_module *net = em_linear_new(2, 1, EM_CPU);
    em_optim *o = em_sgd_new(net, (em_sgd_cfg){.lr = 0.1, .momentum = 0.9});
    em_sched *s = make(o);
    CHECK(s != NULL, "%s: %s", tag, em_last_error());
    char key[64];
    snprintf(key, sizeof key, "lr.%s", tag);
    em_shape shp;
    const double *want = h_fixture_values(fx, key, &shp);
    if (s && want) {
        bool ok = true;
        for (int64_t i = 0; i < shp.dims[0] && ok; i++) {
            double got = i == 0 ? em_sched_lr(s) : em_sched_step(s, metrics ? metrics[i - 1] : 0);
            ok = h_close(got, want[i], 1e-15, 1e-12) && em_optim_lr(o) == got;
            CHECK(ok, "%s: step %lld lr %.17g, torch %.17g (optimizer %.17g)", tag, (long long)i,
                  got, want[i], em_optim_lr(o));
        }
    }
    em_sched_free(s);
    em_optim_free(o);
    em_module_free(net);
}

#define SCHED(fname, expr)                                                                         \
    static em_sched *fname(em_optim *o)                                                            \
    {                                                                                              \
        return expr;                                                                               \
    }

static const int64_t milestones[] = {12, 5, 20};
SCHED(mk_constant, em_sched_constant_new(o, 0.5, 4))
SCHED(mk_step, em_sched_step_new(o, 7, 0.5))
SCHED(mk_multistep, em_sched_multistep_new(o, milestones, 3, 0.3))
SCHED(mk_exponential, em_sched_exponential_new(o, 0.9))
SCHED(mk_linear, em_sched_linear_new(o, 0.25, 1.0, 10))
SCHED(mk_linear_down, em_sched_linear_new(o, 1.0, 0.1, 30))
SCHED(mk_cosine, em_sched_cosine_new(o, 15, 0.001))
SCHED(mk_restarts, em_sched_cosine_restarts_new(o, 5, 2, 0.01))
SCHED(mk_restarts1, em_sched_cosine_restarts_new(o, 7, 0, 0))
SCHED(mk_onecycle, em_sched_onecycle_new(o, 1.0, 41, 0, 0, 0))
SCHED(mk_onecycle2, em_sched_onecycle_new(o, 0.5, 50, 0.5, 10, 100))
SCHED(mk_warmup_cos, em_sched_warmup_new(o, 5, 0.1, em_sched_cosine_new(o, 20, 0)))
SCHED(mk_warmup_exp, em_sched_warmup_new(o, 8, 0.2, em_sched_exponential_new(o, 0.95)))
SCHED(mk_noam, em_sched_noam_new(o, 64, 10))
SCHED(mk_plateau, em_sched_plateau_new(o, false, 0.5, 3, 0, 2, 0.004))
SCHED(mk_plateau_max, em_sched_plateau_new(o, true, 0, 2, 0.01, 0, 0))

static void test_sequences(void)
{
    check_seq("constant", mk_constant, NULL);
    check_seq("step", mk_step, NULL);
    check_seq("multistep", mk_multistep, NULL);
    check_seq("exponential", mk_exponential, NULL);
    check_seq("linear", mk_linear, NULL);
    check_seq("linear_down", mk_linear_down, NULL);
    check_seq("cosine", mk_cosine, NULL);
    check_seq("restarts", mk_restarts, NULL);
    check_seq("restarts1", mk_restarts1, NULL);
    check_seq("onecycle", mk_onecycle, NULL);
    check_seq("onecycle2", mk_onecycle2, NULL);
    check_seq("warmup_cos", mk_warmup_cos, NULL);
    check_seq("warmup_exp", mk_warmup_exp, NULL);
    check_seq("noam", mk_noam, NULL);
    em_shape shp;
    const double *m = h_fixture_values(fx, "plateau.metrics", &shp);
    check_seq("plateau", mk_plateau, m);
    double neg[64];
    for (int i = 0; i < shp.dims[0] && i < 64; i++) neg[i] = -m[i];
    check_seq("plateau_max", mk_plateau_max, neg);
}

/* Group learning rates scale with the scheduled base rate. */
static void test_groups_follow(void)
{
    em_module *net =
        em_sequential(EM_CPU, em_linear_new(2, 2, EM_CPU), em_linear_new(2, 1, EM_CPU));
    em_optim *o = em_sgd_new(net, (em_sgd_cfg){.lr = 0.1});
    em_optim_add_group(o, "1.*", 0.4, NAN);
    em_sched *s = em_sched_step_new(o, 1, 0.5);
    em_sched_step(s, 0);
    CHECK(em_optim_lr(o) == 0.05, "base lr %g", em_optim_lr(o));
    /* one SGD step with unit gradients moves group 1 by 0.4 * 0.5 */
    em_tensor *b0 = em_clone(em_module_get(net, "1.bias"));
    em_scope_begin();
    em_tensor *x = em_ones(EM_SHAPE(1, 2), EM_F32, EM_CPU);
    em_tensor *loss = em_sum(em_forward(net, x), EM_ALL, false);
    em_optim_step(o, em_backward(loss));
    em_scope_end();
    double before = em_item_f64(b0), after = em_item_f64(em_module_get(net, "1.bias"));
    CHECK(fabs(before - after - 0.2) < 1e-6, "group lr scaled: moved %g", before - after);
    em_release(b0);
    em_sched_free(s);
    em_optim_free(o);
    em_module_free(net);
}

static void test_bad_input(void)
{
    em_module *net = em_linear_new(2, 1, EM_CPU);
    em_optim *o = em_sgd_new(net, (em_sgd_cfg){.lr = 0.1});
    CHECK(em_sched_step_new(NULL, 1, 0.1) == NULL, "NULL optimizer");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_sched_step_new: optimizer is NULL");
    CHECK(em_sched_step_new(o, 0, 0.1) == NULL, "step_size 0");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_sched_step_new: invalid step_size");
    CHECK(em_sched_exponential_new(o, 0) == NULL, "gamma required");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_sched_exponential_new");
    CHECK(em_sched_cosine_new(o, 0, 0) == NULL, "t_max 0");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_sched_cosine_new: invalid t_max");
    CHECK(em_sched_cosine_restarts_new(o, 5, -1, 0) == NULL, "t_mult");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_sched_cosine_restarts_new: invalid t_mult");
    CHECK(em_sched_linear_new(o, 2, 1, 5) == NULL, "start_factor 2");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_sched_linear_new: invalid start_factor");
    CHECK(em_sched_onecycle_new(o, -1, 10, 0, 0, 0) == NULL, "max_lr");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_sched_onecycle_new: invalid max_lr");
    CHECK(em_sched_plateau_new(o, false, 1.5, 1, 0, 0, 0) == NULL, "factor");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_sched_plateau_new: invalid factor");
    CHECK(em_sched_noam_new(o, 0, 10) == NULL, "d_model");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_sched_noam_new: invalid d_model");
    CHECK(em_sched_warmup_new(o, 0, 0.1, NULL) == NULL, "warmup 0");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_sched_warmup_new: invalid warmup");
    CHECK(isnan(em_sched_step(NULL, 0)), "step NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_sched_step");
    em_sched *s = em_sched_onecycle_new(o, 1, 3, 0.5, 0, 0);
    for (int i = 0; i < 3; i++) em_sched_step(s, 0);
    CHECK(isnan(em_sched_step(s, 0)), "one-cycle past total_steps");
    CHECK_ERR(EM_ERR_STATE, "em_sched_step: one-cycle");
    em_sched_free(s);
    em_sched_free(NULL);
    em_optim_free(o);
    em_module_free(net);
}

int main(void)
{
    h_init();
    fx = h_fixture_load("optim.emfx");
    if (!fx) return h_finish();
    test_sequences();
    test_groups_follow();
    test_bad_input();
    h_fixture_free(fx);
    return h_finish();
}
