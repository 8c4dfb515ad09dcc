/* Optimizers against PyTorch 1.13 (tests/fixtures/optim.emfx from scripts/fixtures_optim.py):
 * 20-step parameter trajectories of a small f64 MLP for every optimizer and configuration,
 * parameter groups, the converted-copy path (non-contiguous and f32 parameters), clipping,
 * accumulation, state save/restore and bad input. */
#include <math.h>
#include <string.h>

#include "backend/backend.h"
#include "harness.h"
#include <ember/optim.h>

static h_fixture *fx;
static const char *names[] = {"0.weight", "0.bias", "2.weight", "2.bias"};
#define STEPS 20

static em_module *mlp(em_dtype dt)
{
    em_module *net =
        em_sequential(h_dev, em_linear_new(4, 3, h_dev), em_tanh_new(), em_linear_new(3, 2, h_dev));
    em_module_cast(net, EM_F64);
    for (int i = 0; i < 4; i++) {
        char key[64];
        snprintf(key, sizeof key, "init.%s", names[i]);
        em_tensor *v = h_fixture_tensor(fx, key);
        if (dt != EM_F64) {
            em_tensor *c = em_cast(v, dt);
            em_release(v);
            v = c;
        }
        char child[2] = {names[i][0], 0};
        em_module_set(em_module_find(net, child), names[i] + 2, v);
    }
    if (dt != EM_F64) em_module_cast(net, dt);
    CHECK_OK("mlp");
    return net;
}

static em_grads *grads_of(em_module *net, em_tensor *x, em_tensor *y)
{
    em_tensor *out = em_forward(net, x);
    em_tensor *loss = em_mean(em_square(em_sub(out, y)), EM_ALL, false);
    return em_backward(loss);
}

typedef em_optim *(*make_fn)(em_module *m);

/* Runs 20 steps and compares the parameters after each with the fixture's "<tag>.<name>". */
static void check_trajectory(const char *tag, em_module *net, em_optim *o, double rtol)
{
    em_tensor *x = h_fixture_tensor(fx, "x"), *y = h_fixture_tensor(fx, "y");
    CHECK(o != NULL, "%s: optimizer: %s", tag, em_last_error());
    if (!o) return;
    double worst = 0;
    bool ok = true;
    for (int s = 0; s < STEPS && ok; s++) {
        em_scope_begin();
        em_grads *g = grads_of(net, x, y);
        em_status st = em_optim_step(o, g);
        em_scope_end();
        CHECK(st == EM_OK, "%s: step %d: %s", tag, s, em_last_error());
        for (int i = 0; i < 4; i++) {
            char key[96];
            snprintf(key, sizeof key, "%s.%s", tag, names[i]);
            em_shape shp;
            const double *want = h_fixture_values(fx, key, &shp);
            em_tensor *p = em_module_get(net, names[i]);
            int64_t n = em_tensor_numel(p);
            double *got = h_values(p);
            for (int64_t j = 0; j < n; j++) {
                double w = want[s * n + j], d = fabs(got[j] - w) / fmax(fabs(w), 1e-3);
                if (d > worst) worst = d;
                if (d > rtol) {
                    CHECK(false, "%s: step %d %s[%lld] = %.17g, torch %.17g", tag, s + 1, names[i],
                          (long long)j, got[j], w);
                    ok = false;
                    break;
                }
            }
            free(got);
            if (!ok) break;
        }
    }
    CHECK(em_optim_steps(o) == STEPS, "%s: steps %lld", tag, (long long)em_optim_steps(o));
    if (ok) printf("  %-12s max rel diff %.2e\n", tag, worst);
    em_release(x);
    em_release(y);
}

static void run(const char *tag, em_optim *(*make)(em_module *), double rtol)
{
    em_module *net = mlp(EM_F64);
    em_optim *o = make(net);
    check_trajectory(tag, net, o, rtol);
    em_optim_free(o);
    em_module_free(net);
}

#define OPT(fname, expr)                                                                           \
    static em_optim *fname(em_module *m)                                                           \
    {                                                                                              \
        return expr;                                                                               \
    }

OPT(mk_sgd, em_sgd_new(m, (em_sgd_cfg){.lr = 0.1}))
OPT(mk_sgd_mom, em_sgd_new(m, (em_sgd_cfg){.lr = 0.1, .momentum = 0.9, .dampening = 0.3}))
OPT(mk_sgd_nest,
    em_sgd_new(m,
               (em_sgd_cfg){.lr = 0.05, .momentum = 0.9, .nesterov = true, .weight_decay = 1e-2}))
OPT(mk_sgd_max, em_sgd_new(m, (em_sgd_cfg){.lr = 0.01, .momentum = 0.5, .maximize = true}))
OPT(mk_adam, em_adam_new(m, (em_adam_cfg){.lr = 1e-2}))
OPT(mk_adam_ams, em_adam_new(m, (em_adam_cfg){.lr = 1e-2,
                                              .amsgrad = true,
                                              .weight_decay = 1e-2,
                                              .beta1 = 0.8,
                                              .beta2 = 0.99}))
OPT(mk_adam_max, em_adam_new(m, (em_adam_cfg){.lr = 1e-3, .maximize = true, .eps = 1e-6}))
OPT(mk_adamw, em_adamw_new(m, (em_adam_cfg){.lr = 1e-2, .weight_decay = 0.1}))
OPT(mk_adamw_ams, em_adamw_new(m, (em_adam_cfg){.lr = 1e-2, .amsgrad = true}))
OPT(mk_rms, em_rmsprop_new(m, (em_rmsprop_cfg){0}))
OPT(mk_rms_cm,
    em_rmsprop_new(m, (em_rmsprop_cfg){
                          .alpha = 0.9, .centered = true, .momentum = 0.9, .weight_decay = 1e-3}))
OPT(mk_rms_max, em_rmsprop_new(m, (em_rmsprop_cfg){.lr = 1e-3, .momentum = 0.5, .maximize = true}))
OPT(mk_adagrad, em_adagrad_new(m, (em_adagrad_cfg){.lr = 0.1}))
OPT(mk_adagrad_opt, em_adagrad_new(m, (em_adagrad_cfg){.lr = 0.1,
                                                       .lr_decay = 0.01,
                                                       .weight_decay = 0.01,
                                                       .initial_accumulator_value = 0.1}))
OPT(mk_adagrad_max, em_adagrad_new(m, (em_adagrad_cfg){.maximize = true}))
OPT(mk_lion, em_lion_new(m, (em_lion_cfg){.lr = 1e-3}))
OPT(mk_lion_wd,
    em_lion_new(m, (em_lion_cfg){.lr = 3e-3, .beta1 = 0.8, .beta2 = 0.95, .weight_decay = 0.5}))
OPT(mk_muon, em_muon_new(m, (em_muon_cfg){0}))
OPT(mk_muon_opt, em_muon_new(m, (em_muon_cfg){.lr = 5e-2,
                                              .momentum = 0.9,
                                              .no_nesterov = true,
                                              .ns_steps = 3,
                                              .weight_decay = 0.1,
                                              .fallback = {.lr = 1e-2, .weight_decay = EM_ZERO}}))

static em_optim *mk_groups(em_module *m)
{
    em_optim *o = em_adamw_new(m, (em_adam_cfg){.lr = 1e-2});
    CHECK(em_optim_add_group(o, "0.*", 0.05, NAN) == EM_OK, "group 0.*");
    CHECK(em_optim_add_group(o, "*.bias", NAN, 0.1) == EM_OK, "group *.bias");
    return o;
}

static void test_trajectories(void)
{
    const double r = 1e-9;
    run("sgd", mk_sgd, r);
    run("sgd_mom", mk_sgd_mom, r);
    run("sgd_nest", mk_sgd_nest, r);
    run("sgd_max", mk_sgd_max, r);
    run("adam", mk_adam, r);
    run("adam_ams", mk_adam_ams, r);
    run("adam_max", mk_adam_max, r);
    run("adamw", mk_adamw, r);
    run("adamw_ams", mk_adamw_ams, r);
    run("rmsprop", mk_rms, r);
    run("rms_cm", mk_rms_cm, r);
    run("rms_max", mk_rms_max, r);
    run("adagrad", mk_adagrad, r);
    run("adagrad_opt", mk_adagrad_opt, r);
    run("adagrad_max", mk_adagrad_max, r);
    run("lion", mk_lion, r);
    run("lion_wd", mk_lion_wd, r);
    run("muon", mk_muon, r);
    run("muon_opt", mk_muon_opt, r);
    run("groups", mk_groups, r);
}

/* Parameters that are not CPU f32/f64 contiguous go through a converted copy that is swapped
 * into the module; the trajectory is the same. */
static void test_other_layouts(void)
{
    em_module *net = mlp(EM_F64);
    em_tensor *w = em_module_get(net, "0.weight");
    em_no_grad_begin();
    em_tensor *wt0 = em_transpose(w, 0, 1);
    em_tensor *wt = em_contiguous(wt0);
    em_release(wt0);
    em_tensor *nc = em_transpose(wt, 0, 1); /* same values, not contiguous */
    em_release(wt);
    em_no_grad_end();
    em_module_set(em_module_find(net, "0"), "weight", nc);
    CHECK(!em_tensor_is_contiguous(em_module_get(net, "0.weight")), "non-contiguous weight");
    em_optim *o = em_adam_new(net, (em_adam_cfg){.lr = 1e-2});
    check_trajectory("adam", net, o, 1e-9);
    CHECK(em_tensor_requires_grad(em_module_get(net, "0.weight")), "swapped weight is a leaf");
    em_optim_free(o);
    em_module_free(net);

    /* f32 parameters (fast path) follow the f64 trajectory to f32 precision */
    net = mlp(EM_F32);
    o = em_adam_new(net, (em_adam_cfg){.lr = 1e-2});
    em_tensor *x = h_fixture_tensor(fx, "x"), *y = h_fixture_tensor(fx, "y");
    em_tensor *x32 = em_cast(x, EM_F32), *y32 = em_cast(y, EM_F32);
    em_tensor *p0 = em_module_get(net, "2.weight");
    for (int s = 0; s < STEPS; s++) {
        em_scope_begin();
        em_optim_step(o, grads_of(net, x32, y32));
        em_scope_end();
    }
    /* in place on the CPU and on devices with a fused update; other devices swap a copy in */
    const em_backend *be = em_backend_get(h_dev.backend);
    if (h_dev.backend == 0 || (be && be->update))
        CHECK(em_module_get(net, "2.weight") == p0, "f32 parameter updated in place");
    p0 = em_module_get(net, "2.weight");
    em_shape shp;
    const double *want = h_fixture_values(fx, "adam.2.weight", &shp);
    h_check_tensor("adam f32 2.weight", p0, want + (STEPS - 1) * 6, EM_SHAPE(2, 3), 1e-5, 1e-4);
    CHECK_OK("f32 run");
    em_release(x32);
    em_release(y32);
    em_release(x);
    em_release(y);
    em_optim_free(o);
    em_module_free(net);
}

static void check_grads(const char *tag, em_grads *g, em_module *net, double rtol)
{
    for (int i = 0; i < 4; i++) {
        char key[96];
        snprintf(key, sizeof key, "%s.%s", tag, names[i]);
        em_shape shp;
        const double *want = h_fixture_values(fx, key, &shp);
        em_tensor *gi = em_grad(g, em_module_get(net, names[i]));
        h_check_tensor(key, gi, want, shp, 1e-14, rtol);
        em_release(gi);
    }
}

static void test_clip(void)
{
    em_module *net = mlp(EM_F64);
    em_tensor *x = h_fixture_tensor(fx, "x"), *y = h_fixture_tensor(fx, "y");
    struct {
        const char *tag;
        double max_norm, p;
    } cases[] = {
        {"clip2", 0.5, 2}, {"clipinf", 0.1, INFINITY}, {"clip1", 0.3, 1}, {"clipbig", 100, 0}};
    for (int c = 0; c < 4; c++) {
        em_scope_begin();
        em_grads *g = grads_of(net, x, y);
        double total = em_clip_grad_norm(g, cases[c].max_norm, cases[c].p);
        char key[64];
        snprintf(key, sizeof key, "%s.total", cases[c].tag);
        double want = h_fixture_scalar(fx, key);
        CHECK(h_close(total, want, 0, 1e-12), "%s: total norm %.17g, torch %.17g", cases[c].tag,
              total, want);
        check_grads(cases[c].tag, g, net, 1e-12);
        em_scope_end();
    }
    em_scope_begin();
    em_grads *g = grads_of(net, x, y);
    CHECK(em_clip_grad_value(g, 0.05) == EM_OK, "clip value");
    check_grads("clipval", g, net, 0);
    em_scope_end();

    /* accumulation: mean over 8 rows = (mean over rows 0-3 + mean over rows 4-7) / 2 */
    em_grads *acc = em_grads_new();
    CHECK(acc && em_grads_count(acc) == 0, "empty container");
    for (int half = 0; half < 2; half++) {
        em_scope_begin();
        em_tensor *xs = em_narrow(x, 0, 4 * half, 4), *ys = em_narrow(y, 0, 4 * half, 4);
        CHECK(em_grads_accumulate(acc, grads_of(net, xs, ys)) == EM_OK, "accumulate %d", half);
        em_scope_end();
    }
    CHECK(em_grads_count(acc) == 4, "accumulated %d leaves", em_grads_count(acc));
    CHECK(em_grads_scale(acc, 0.5) == EM_OK, "scale");
    check_grads("grad", acc, net, 1e-12);
    /* a step from accumulated gradients equals a full-batch SGD step */
    em_optim *o = em_sgd_new(net, (em_sgd_cfg){.lr = 0.1});
    CHECK(em_optim_step(o, acc) == EM_OK, "step from accumulated grads");
    em_shape shp;
    const double *want = h_fixture_values(fx, "sgd.2.bias", &shp);
    h_check_tensor("sgd step from accumulation", em_module_get(net, "2.bias"), want, EM_SHAPE(2),
                   1e-14, 1e-12);
    em_optim_free(o);
    em_grads_free(acc);
    em_release(x);
    em_release(y);
    em_module_free(net);
}

/* ---- state save / restore ---------------------------------------------------------------- */

typedef struct saved {
    em_tensor *t[32];
    char names[32][128];
    int n;
} saved;

static void save_fn(void *ctx, const char *name, em_tensor *t)
{
    saved *s = ctx;
    if (s->n < 32) {
        snprintf(s->names[s->n], sizeof s->names[0], "%s", name);
        s->t[s->n++] = em_keep(t);
    } else {
        em_release(t);
    }
}

static void test_state(void)
{
    make_fn makers[] = {mk_adam_ams, mk_rms_cm, mk_sgd_nest, mk_adagrad_opt, mk_lion, mk_muon};
    const char *tags[] = {"adam_ams", "rms_cm", "sgd_nest", "adagrad_opt", "lion", "muon"};
    em_tensor *x = h_fixture_tensor(fx, "x"), *y = h_fixture_tensor(fx, "y");
    for (int k = 0; k < 6; k++) {
        em_module *a = mlp(EM_F64), *b = mlp(EM_F64);
        em_optim *oa = makers[k](a), *ob = makers[k](b);
        for (int s = 0; s < 7; s++) {
            em_scope_begin();
            em_optim_step(oa, grads_of(a, x, y));
            em_scope_end();
        }
        saved sv = {.n = 0};
        CHECK(em_optim_state_visit(oa, save_fn, &sv) == EM_OK, "%s: visit", tags[k]);
        bool has_step = false;
        for (int i = 0; i < sv.n; i++) {
            has_step |= strcmp(sv.names[i], "step") == 0;
            CHECK(em_optim_state_set(ob, sv.names[i], sv.t[i]) == EM_OK, "%s: set %s: %s", tags[k],
                  sv.names[i], em_last_error());
            em_release(sv.t[i]);
        }
        CHECK(has_step && sv.n > 4, "%s: %d state tensors", tags[k], sv.n);
        em_no_grad_begin();
        for (int i = 0; i < 4; i++) { /* same parameters */
            char child[2] = {names[i][0], 0};
            em_module_set(em_module_find(b, child), names[i] + 2,
                          em_clone(em_module_get(a, names[i])));
        }
        em_no_grad_end();
        CHECK(em_optim_steps(ob) == 7, "%s: restored step count", tags[k]);
        for (int s = 0; s < 5; s++) {
            em_scope_begin();
            em_optim_step(oa, grads_of(a, x, y));
            em_optim_step(ob, grads_of(b, x, y));
            em_scope_end();
        }
        bool same = true;
        for (int i = 0; i < 4; i++) {
            em_tensor *pa = em_module_get(a, names[i]), *pb = em_module_get(b, names[i]);
            double *va = h_values(pa), *vb = h_values(pb);
            same &= memcmp(va, vb, (size_t)em_tensor_numel(pa) * sizeof(double)) == 0;
            free(va);
            free(vb);
        }
        CHECK(same, "%s: restored optimizer continues bit-identically", tags[k]);
        CHECK_OK(tags[k]);
        em_optim_free(oa);
        em_optim_free(ob);
        em_module_free(a);
        em_module_free(b);
    }
    em_release(x);
    em_release(y);
}

static void test_frozen_and_missing(void)
{
    em_module *net = mlp(EM_F64);
    em_module_freeze(net, "0.*", true);
    em_optim *o = em_sgd_new(net, (em_sgd_cfg){.lr = 0.1});
    em_tensor *w0 = em_clone(em_module_get(net, "0.weight"));
    em_tensor *x = h_fixture_tensor(fx, "x"), *y = h_fixture_tensor(fx, "y");
    em_scope_begin();
    em_optim_step(o, grads_of(net, x, y));
    em_scope_end();
    double *a = h_values(w0);
    h_check_tensor("frozen weight unchanged", em_module_get(net, "0.weight"), a, EM_SHAPE(3, 4), 0,
                   0);
    free(a);
    em_shape shp;
    const double *want = h_fixture_values(fx, "sgd.2.bias", &shp);
    h_check_tensor("trained bias", em_module_get(net, "2.bias"), want, EM_SHAPE(2), 1e-14, 1e-12);
    em_release(w0);
    em_release(x);
    em_release(y);
    em_optim_free(o);
    em_module_free(net);
}

static void test_bad_input(void)
{
    em_module *net = mlp(EM_F64);
    CHECK(em_sgd_new(NULL, (em_sgd_cfg){.lr = 0.1}) == NULL, "NULL module");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_sgd_new");
    CHECK(em_sgd_new(net, (em_sgd_cfg){.lr = -0.1}) == NULL, "sgd lr < 0");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_sgd_new: invalid lr");
    CHECK(em_sgd_new(net, (em_sgd_cfg){.lr = 0.1, .nesterov = true}) == NULL, "nesterov");
    CHECK_ERR(EM_ERR_INVALID_ARG, "nesterov");
    CHECK(em_adam_new(net, (em_adam_cfg){.beta1 = -0.5}) == NULL, "negative beta1");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_adam_new: invalid beta1");
    CHECK(em_adamw_new(net, (em_adam_cfg){.beta2 = 1.0}) == NULL, "beta2 1");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_adamw_new: invalid beta2");
    CHECK(em_adam_new(net, (em_adam_cfg){.eps = -1}) == NULL, "negative eps");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_adam_new: invalid eps");
    CHECK(em_adam_new(NULL, (em_adam_cfg){0}) == NULL, "adam NULL module");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_adam_new: module is NULL");
    CHECK(em_rmsprop_new(net, (em_rmsprop_cfg){.lr = -1}) == NULL, "negative lr");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_rmsprop_new: invalid lr");
    CHECK(em_adagrad_new(net, (em_adagrad_cfg){.lr_decay = -1}) == NULL, "lr_decay");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_adagrad_new: invalid lr_decay");
    CHECK(em_lion_new(net, (em_lion_cfg){.beta2 = 2}) == NULL, "lion beta2");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_lion_new: invalid beta2");
    CHECK(em_muon_new(net, (em_muon_cfg){.ns_steps = -1}) == NULL, "ns_steps");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_muon_new: invalid ns_steps");
    CHECK(em_optim_step(NULL, NULL) == EM_ERR_INVALID_ARG, "step NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_optim_step");
    em_optim *o = em_adam_new(net, (em_adam_cfg){.beta1 = EM_ZERO, .eps = EM_ZERO});
    CHECK(o != NULL, "EM_ZERO betas accepted");
    CHECK(em_optim_add_group(o, NULL, 1, 1) == EM_ERR_INVALID_ARG, "group NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_optim_add_group");
    CHECK(em_optim_add_group(o, "*", -1, NAN) == EM_ERR_INVALID_ARG, "group lr < 0");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_optim_add_group: invalid lr");
    em_tensor *t = em_zeros(EM_SHAPE(3), EM_F64, EM_CPU);
    CHECK(em_optim_state_set(o, "0.weight.bogus", t) == EM_ERR_INVALID_ARG, "bad state name");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_optim_state_set: no state \"0.weight.bogus\"");
    CHECK(em_optim_state_set(o, "0.weight.exp_avg", t) == EM_ERR_SHAPE, "bad state shape");
    CHECK_ERR(EM_ERR_SHAPE, "em_optim_state_set");
    CHECK(isnan(em_clip_grad_norm(NULL, 1, 2)), "clip NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_clip_grad_norm");
    CHECK(em_clip_grad_value(NULL, 1) == EM_ERR_INVALID_ARG, "clip value NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_clip_grad_value");
    CHECK(em_grads_accumulate(NULL, NULL) == EM_ERR_INVALID_ARG, "accumulate NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_grads_accumulate");
    em_release(t);
    em_optim_free(o);
    em_optim_free(NULL);
    em_module_free(net);
}

int main(void)
{
    h_init();
    fx = h_fixture_load("optim.emfx");
    if (!fx) return h_finish();
    test_trajectories();
    test_other_layouts();
    test_clip();
    test_state();
    test_frozen_and_missing();
    test_bad_input();
    h_fixture_free(fx);
    return h_finish();
}
