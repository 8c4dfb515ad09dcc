/* Tabular learning on two of scikit-learn's bundled data sets (Debian's python3-sklearn, linked
 * into the data cache by scripts/fetch-data.sh sklearn):
 *
 *   diabetes: 442 patients, 10 features -> disease progression after one year. An MLP regressor
 *             trained with the MSE loss on standardised features and target; reports the test
 *             MSE (original units) and R^2.
 *   wine:     178 wines, 13 features -> 3 cultivars. An MLP classifier (cross-entropy); reports
 *             the test accuracy.
 *
 * Each set is shuffled with a fixed seed and split 80% / 20% (train / test); features are
 * standardised with the training part's mean and standard deviation only.
 *
 *   ./build/regression [--task diabetes|wine|both] [--epochs N] [--lr X] [--seed S]
 *                      [--data DIR] [--verbose]
 *
 * DIR holds the sklearn CSVs (default ${EMBER_DATA:-~/.cache/ember}/sklearn).
 */
#include <ember/ember.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "Usage: regression [options]\n"
    "Trains MLPs on scikit-learn's diabetes (regression) and wine (classification) sets.\n"
    "\n"
    "  --task T      diabetes, wine or both (default both)\n"
    "  --epochs N    epochs to train (default 200; wine stops at 100)\n"
    "  --lr X        AdamW's learning rate (default 0.003)\n"
    "  --seed S      split, initialisation and batch order (default 7)\n"
    "  --data DIR    the scikit-learn CSVs (default ${EMBER_DATA:-~/.cache/ember}/sklearn)\n"
    "  --verbose     show the learner's progress\n"
    "  -h, --help    print this help and exit\n";

/* A whole integer in [min, max] for option `flag`, or a message and exit status 2. */
static int64_t int_arg(const char *flag, const char *s, int64_t min, int64_t max)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) {
        fprintf(stderr, "regression: --%s expects an integer from %lld to %lld, got '%s'\n", flag,
                (long long)min, (long long)max, s);
        exit(2);
    }
    return v;
}

/* A finite number > 0 for option `flag`, or a message and exit status 2. */
static double pos_arg(const char *flag, const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v <= 0) {
        fprintf(stderr, "regression: --%s expects a number > 0, got '%s'\n", flag, s);
        exit(2);
    }
    return v;
}

typedef struct app {
    em_module *net;
    em_loader *train, *test;
    bool classify;
} app;

static em_status run_batch(em_loader *loader, const app *a, em_step_out *out)
{
    em_batch b;
    if (!em_loader_next(loader, &b)) {
        out->end = true;
        return em_failed() ? em_last_status() : EM_OK;
    }
    em_tensor *x = b.t[0], *y = b.t[1];
    em_tensor *pred = em_forward(a->net, x);
    if (a->classify) {
        out->loss = em_cross_entropy(pred, y, (em_ce_cfg){0});
        out->outputs = pred;
        out->targets = em_retain(y); /* the learner releases what a step hands back */
    } else {
        out->loss = em_mse_loss(pred, y, EM_REDUCTION_MEAN);
        em_release(pred);
    }
    out->items = b.size;
    em_batch_free(&b);
    return out->loss ? EM_OK : em_last_status();
}

static em_status train_step(const em_step_ctx *ctx, em_step_out *out)
{
    app *a = ctx->user;
    if (ctx->batch == 0) em_loader_reset(a->train, ctx->epoch);
    return run_batch(a->train, a, out);
}

static em_status val_step(const em_step_ctx *ctx, em_step_out *out)
{
    app *a = ctx->user;
    if (ctx->batch == 0) em_loader_reset(a->test, 0);
    return run_batch(a->test, a, out);
}

/* Every item of ds stacked into one batch: fields 0 and 1 into *x and *y (new references).
 * Consumes ds. */
static em_status load_all(em_dataset *ds, em_tensor **x, em_tensor **y)
{
    em_loader *l = em_loader_new(ds, (em_loader_cfg){.batch_size = em_dataset_len(ds)});
    em_batch b;
    if (!l || !em_loader_next(l, &b)) {
        em_loader_free(l);
        return em_last_status();
    }
    *x = em_retain(b.t[0]);
    *y = b.n > 1 ? em_retain(b.t[1]) : NULL;
    em_batch_free(&b);
    em_loader_free(l);
    return EM_OK;
}

/* (t - mean) / std with the statistics of dim 0 of `ref`. */
static em_tensor *standardise(const em_tensor *t, const em_tensor *ref)
{
    em_scope_begin();
    em_tensor *mu = em_mean(ref, EM_AXES(0), true);
    em_tensor *sd = em_std(ref, EM_AXES(0), 0, true);
    em_tensor *out = em_keep(em_div(em_sub(t, mu), sd));
    em_scope_end();
    return out;
}

/* Splits (x, y) 80/20 after a shuffle by seed; new references in the four outputs. */
static em_status split(em_tensor *x, em_tensor *y, uint64_t seed, em_tensor **xtr, em_tensor **ytr,
                       em_tensor **xte, em_tensor **yte)
{
    em_tensor *both[2] = {x, y};
    em_dataset *all = em_dataset_from_tensors(both, NULL, 2), *tr = NULL, *te = NULL;
    if (!all || em_dataset_split(all, 0.8, true, seed, &tr, &te) != EM_OK) return em_last_status();
    if (load_all(tr, xtr, ytr) != EM_OK || load_all(te, xte, yte) != EM_OK) return em_last_status();
    return EM_OK;
}

typedef struct opts {
    int64_t epochs;
    double lr;
    uint64_t seed;
    bool verbose;
} opts;

/* Trains net on (xtr, ytr) with validation on (xte, yte); prints the loss curve. */
static em_status fit(app *a, const char *name, em_tensor *xtr, em_tensor *ytr, em_tensor *xte,
                     em_tensor *yte, int64_t batch, double weight_decay, const opts *o)
{
    em_tensor *tr[2] = {xtr, ytr}, *te[2] = {xte, yte};
    a->train =
        em_loader_new(em_dataset_from_tensors(tr, NULL, 2),
                      (em_loader_cfg){.batch_size = batch, .shuffle = true, .seed = o->seed});
    a->test = em_loader_new(em_dataset_from_tensors(te, NULL, 2),
                            (em_loader_cfg){.batch_size = em_tensor_dim(xte, 0)});
    em_optim *opt = em_adamw_new(a->net, (em_adam_cfg){.lr = o->lr, .weight_decay = weight_decay});
    em_sched *sched = em_sched_cosine_new(opt, o->epochs, 0);
    em_learner *l = NULL;
    em_status st = EM_OK;
    if (!a->train || !a->test || !opt || !sched) {
        st = em_last_status();
        goto done;
    }
    l = em_learner_new(a->net, opt, sched,
                       (em_learner_cfg){.epochs = o->epochs,
                                        .train_batches = em_loader_num_batches(a->train),
                                        .val_batches = em_loader_num_batches(a->test),
                                        .train_step = train_step,
                                        .val_step = val_step,
                                        .user = a,
                                        .name = name,
                                        .ckpt_every = o->epochs,
                                        .keep_last = 1,
                                        .quiet = !o->verbose});
    char hp[128];
    snprintf(hp, sizeof hp, "%lld", (long long)batch);
    if (l) em_learner_log_param(l, "batch size", hp);
    snprintf(hp, sizeof hp, "cosine over %lld epochs to 0", (long long)o->epochs);
    if (l) em_learner_log_param(l, "schedule", hp);
    st = l ? em_learner_fit(l) : em_last_status();
    if (st != EM_OK) goto done;
    const char *metric = a->classify ? "val_accuracy" : "val_loss";
    printf("  epoch  train loss  test %s\n", a->classify ? "accuracy" : "loss (standardised)");
    for (int64_t e = 0; e < em_learner_epochs_done(l); e++) {
        if ((e + 1) % (o->epochs / 5 > 0 ? o->epochs / 5 : 1) && e != 0) continue;
        printf("  %5lld  %10.4f  %.4f\n", (long long)e + 1, em_learner_metric(l, e, "loss"),
               em_learner_metric(l, e, metric));
    }
    printf("  run directory: %s\n", em_learner_run_dir(l));
done:
    em_learner_free(l);
    em_sched_free(sched);
    em_optim_free(opt);
    em_loader_free(a->train);
    em_loader_free(a->test);
    return st;
}

static em_status diabetes(const char *dir, const opts *o)
{
    char px[1200], py[1200];
    snprintf(px, sizeof px, "%s/diabetes_data_raw.csv.gz", dir);
    snprintf(py, sizeof py, "%s/diabetes_target.csv.gz", dir);
    em_tensor *x = NULL, *y = NULL, *dummy = NULL;
    em_tensor *xtr = NULL, *ytr = NULL, *xte = NULL, *yte = NULL;
    em_dataset *dx = em_dataset_csv(px, (em_csv_cfg){.delimiter = ' ', .header = -1});
    em_dataset *dy = em_dataset_csv(py, (em_csv_cfg){.delimiter = ' ', .header = -1});
    if (!dx || !dy) {
        em_dataset_free(dx);
        em_dataset_free(dy);
        return em_last_status();
    }
    if (load_all(dx, &x, &dummy) != EM_OK || load_all(dy, &y, &dummy) != EM_OK)
        return em_last_status();
    if (split(x, y, o->seed, &xtr, &ytr, &xte, &yte) != EM_OK) return em_last_status();
    printf("diabetes: %lld train, %lld test, %lld features -> disease progression\n",
           (long long)em_tensor_dim(xtr, 0), (long long)em_tensor_dim(xte, 0),
           (long long)em_tensor_dim(xtr, 1));

    em_tensor *xtr_s = standardise(xtr, xtr), *xte_s = standardise(xte, xtr);
    em_tensor *ytr_s = standardise(ytr, ytr), *yte_s = standardise(yte, ytr);
    em_seed(o->seed);
    app a = {.net = em_sequential(EM_CPU, em_linear_new(10, 32, EM_CPU), em_relu_new(),
                                  em_dropout_new(0.1), em_linear_new(32, 1, EM_CPU))};
    em_status st = fit(&a, "regression_diabetes", xtr_s, ytr_s, xte_s, yte_s, 32, 0.05, o);
    if (st == EM_OK) {
        /* Test predictions back in the target's units. */
        em_module_train(a.net, false);
        em_no_grad_begin();
        em_scope_begin();
        em_tensor *mu = em_mean(ytr, EM_AXES(0), true), *sd = em_std(ytr, EM_AXES(0), 0, true);
        em_tensor *pred = em_add(em_mul(em_forward(a.net, xte_s), sd), mu);
        double mse = em_item_f64(em_mean(em_square(em_sub(pred, yte)), EM_ALL, false));
        double var = em_item_f64(em_var(yte, EM_ALL, 0, false));
        /* the same for the best constant (the training mean) and for plain least squares are
         * what R^2 compares against: R^2 = 1 - MSE / Var(y_test) */
        double r2 = 1 - mse / var;
        printf("diabetes test MSE: %.1f (RMSE %.1f), R^2: %.3f (test target variance %.1f)\n", mse,
               sqrt(mse), r2, var);
        st = em_scope_end();
        em_no_grad_end();
    }
    em_module_free(a.net);
    em_release(x), em_release(y), em_release(xtr), em_release(ytr), em_release(xte);
    em_release(yte), em_release(xtr_s), em_release(xte_s), em_release(ytr_s), em_release(yte_s);
    return st;
}

static em_status wine(const char *dir, const opts *o)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/wine_data.csv", dir);
    em_tensor *x = NULL, *y = NULL, *xtr = NULL, *ytr = NULL, *xte = NULL, *yte = NULL;
    /* first row "178,13,class_0,class_1,class_2" is skipped as a header */
    em_dataset *ds = em_dataset_csv(p, (em_csv_cfg){.label = true, .label_col = -1});
    if (!ds || load_all(ds, &x, &y) != EM_OK) return em_last_status();
    if (split(x, y, o->seed, &xtr, &ytr, &xte, &yte) != EM_OK) return em_last_status();
    printf("wine: %lld train, %lld test, %lld features -> 3 cultivars\n",
           (long long)em_tensor_dim(xtr, 0), (long long)em_tensor_dim(xte, 0),
           (long long)em_tensor_dim(xtr, 1));
    em_tensor *xtr_s = standardise(xtr, xtr), *xte_s = standardise(xte, xtr);
    em_seed(o->seed);
    app a = {.net = em_sequential(EM_CPU, em_linear_new(13, 32, EM_CPU), em_relu_new(),
                                  em_linear_new(32, 3, EM_CPU)),
             .classify = true};
    opts ow = *o;
    if (ow.epochs > 100) ow.epochs = 100; /* converges long before */
    em_status st = fit(&a, "regression_wine", xtr_s, ytr, xte_s, yte, 16, 0.01, &ow);
    if (st == EM_OK) {
        em_module_train(a.net, false);
        em_no_grad_begin();
        em_scope_begin();
        em_tensor *pred = em_argmax(em_forward(a.net, xte_s), 1, false);
        double acc = em_item_f64(em_mean(em_cast(em_eq(pred, yte), EM_F64), EM_ALL, false));
        printf("wine test accuracy: %.2f%% (%lld of %lld)\n", 100 * acc,
               (long long)llround(acc * (double)em_tensor_dim(xte, 0)),
               (long long)em_tensor_dim(xte, 0));
        st = em_scope_end();
        em_no_grad_end();
    }
    em_module_free(a.net);
    em_release(x), em_release(y), em_release(xtr), em_release(ytr), em_release(xte);
    em_release(yte), em_release(xtr_s), em_release(xte_s);
    return st;
}

int main(int argc, char **argv)
{
    opts o = {.epochs = 200, .lr = 3e-3, .seed = 7};
    const char *task = "both", *data = NULL;
    static const struct option options[] = {
        {"task", required_argument, 0, 't'}, {"epochs", required_argument, 0, 'e'},
        {"lr", required_argument, 0, 'l'},   {"seed", required_argument, 0, 's'},
        {"data", required_argument, 0, 'd'}, {"verbose", no_argument, 0, 'v'},
        {"help", no_argument, 0, 'h'},       {0, 0, 0, 0}};
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, ":h", options, NULL)) != -1;) {
        switch (c) {
        case 't': task = optarg; break;
        case 'e': o.epochs = int_arg("epochs", optarg, 1, 1000000); break;
        case 'l': o.lr = pos_arg("lr", optarg); break;
        case 's': o.seed = (uint64_t)int_arg("seed", optarg, 0, INT64_MAX); break;
        case 'd': data = optarg; break;
        case 'v': o.verbose = true; break;
        case 'h': fputs(usage, stdout); return 0;
        case ':':
            fprintf(stderr, "regression: %s needs a value\nTry 'regression --help'.\n",
                    argv[optind - 1]);
            return 2;
        default:
            fprintf(stderr, "regression: unknown option '%s'\nTry 'regression --help'.\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "regression: unexpected argument '%s'\nTry 'regression --help'.\n",
                argv[optind]);
        return 2;
    }
    bool do_diabetes = !strcmp(task, "diabetes") || !strcmp(task, "both");
    bool do_wine = !strcmp(task, "wine") || !strcmp(task, "both");
    if (!do_diabetes && !do_wine) {
        fprintf(stderr, "regression: --task expects diabetes, wine or both, got '%s'\n", task);
        return 2;
    }
    /* The learner logs every epoch at INFO unless a level is configured: keep quiet runs quiet
     * (EMBER_LOG_TRAIN=info still shows them). */
    if (!o.verbose && !em_config_is_set("log.train") && !em_config_is_set("log"))
        em_config_set("log.train", "warn");
    char dir[1024];
    if (data)
        snprintf(dir, sizeof dir, "%s", data);
    else if (getenv("EMBER_DATA"))
        snprintf(dir, sizeof dir, "%s/sklearn", getenv("EMBER_DATA"));
    else
        snprintf(dir, sizeof dir, "%s/.cache/ember/sklearn", getenv("HOME") ? getenv("HOME") : ".");
    em_status st = EM_OK;
    if (do_diabetes) st = diabetes(dir, &o);
    if (st == EM_OK && do_wine) st = wine(dir, &o);
    if (st != EM_OK) {
        fprintf(stderr, "regression: %s\n(fetch the data with scripts/fetch-data.sh sklearn)\n",
                em_last_error());
        return 1;
    }
    return 0;
}
