/* Trains a small CNN on the full Fashion-MNIST (60,000 training and 10,000 test images, from
 * Debian's dataset-fashion-mnist) and reports the test accuracy. The learner draws a live
 * dashboard on a terminal (plain progress lines otherwise) and writes runs/fashion_mnist/ with
 * metrics, checkpoints, summary.md and report.html.
 *
 *   ./build/fashion_mnist [--epochs N] [--batch B] [--lr X] [--workers W] [--resume]
 *                         [--data DIR] [--limit N] [--device cpu]
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
    if (ctx->batch == 0) em_loader_reset(a->train, ctx->epoch); /* epoch k: its own shuffle */
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
    /* 1x28x28 -> 32x14x14 -> 64x7x7 -> 128 -> 10 */
    return em_sequential(
        dev,
        em_conv2d_new((em_conv2d_cfg){.in = 1, .out = 32, .kernel = {3, 3}, .padding = {1, 1}},
                      dev),
        em_relu_new(), em_max_pool2d_new((em_pool2d_cfg){.kernel = {2, 2}}),
        em_conv2d_new((em_conv2d_cfg){.in = 32, .out = 64, .kernel = {3, 3}, .padding = {1, 1}},
                      dev),
        em_relu_new(), em_max_pool2d_new((em_pool2d_cfg){.kernel = {2, 2}}), em_flatten_new(1, -1),
        em_linear_new(64 * 7 * 7, 128, dev), em_relu_new(), em_dropout_new(0.25),
        em_linear_new(128, 10, dev));
}

int main(int argc, char **argv)
{
    int64_t epochs = 4, batch = 128, limit = 0;
    double lr = 1e-3;
    int workers = 1;
    bool resume = false;
    const char *data = getenv("EMBER_DATA_FASHION");
    if (!data) data = "/usr/share/datasets/fashion-mnist";
    const char *device = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--epochs") && i + 1 < argc)
            epochs = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--lr") && i + 1 < argc)
            lr = atof(argv[++i]);
        else if (!strcmp(argv[i], "--workers") && i + 1 < argc)
            workers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--limit") && i + 1 < argc)
            limit = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--data") && i + 1 < argc)
            data = argv[++i];
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = argv[++i];
        else if (!strcmp(argv[i], "--resume"))
            resume = true;
        else {
            fprintf(stderr, "unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    em_device dev = device ? em_device_parse(device) : em_device_default();
    char ti[512], tl[512], vi[512], vl[512];
    snprintf(ti, sizeof ti, "%s/train-images-idx3-ubyte.gz", data);
    snprintf(tl, sizeof tl, "%s/train-labels-idx1-ubyte.gz", data);
    snprintf(vi, sizeof vi, "%s/t10k-images-idx3-ubyte.gz", data);
    snprintf(vl, sizeof vl, "%s/t10k-labels-idx1-ubyte.gz", data);
    em_dataset *train = em_dataset_idx(ti, tl, (em_idx_cfg){0});
    em_dataset *test = em_dataset_idx(vi, vl, (em_idx_cfg){0});
    if (!train || !test) {
        fprintf(stderr, "fashion_mnist: %s\n(install the data with scripts/fetch-data.sh)\n",
                em_last_error());
        return 1;
    }
    if (limit > 0) train = em_dataset_subset(train, 0, limit);
    /* normalise with Fashion-MNIST's mean and std */
    const double mean[1] = {0.2860}, std[1] = {0.3530};
    train = em_dataset_normalize(train, 0, mean, std, 1);
    test = em_dataset_normalize(test, 0, mean, std, 1);
    em_seed(7);
    app a = {.net = cnn(dev)};
    a.train = em_loader_new(
        train,
        (em_loader_cfg){
            .batch_size = batch, .shuffle = true, .seed = 7, .workers = workers, .device = dev});
    a.test =
        em_loader_new(test, (em_loader_cfg){.batch_size = 500, .workers = workers, .device = dev});
    em_optim *opt = em_adam_new(a.net, (em_adam_cfg){.lr = lr});
    em_sched *sched = em_sched_cosine_new(opt, epochs, 0);
    if (!a.net || !a.train || !a.test || !opt || !sched) {
        fprintf(stderr, "fashion_mnist: %s\n", em_last_error());
        return 1;
    }
    char *summary = em_module_summary(a.net);
    printf("%s", summary);
    em_free(summary);
    em_learner *l = em_learner_new(a.net, opt, sched,
                                   (em_learner_cfg){.epochs = epochs,
                                                    .train_batches = em_loader_num_batches(a.train),
                                                    .val_batches = em_loader_num_batches(a.test),
                                                    .train_step = train_step,
                                                    .val_step = val_step,
                                                    .user = &a,
                                                    .name = "fashion_mnist",
                                                    .keep_last = 2,
                                                    .keep_best = true,
                                                    .monitor = "val_accuracy",
                                                    .monitor_mode = EM_MODE_MAX,
                                                    .resume = resume,
                                                    .log_every = 100});
    em_status st = l ? em_learner_fit(l) : em_last_status();
    if (st == EM_OK) {
        int64_t best_epoch = -1;
        double best = em_learner_best(l, &best_epoch);
        double last = em_learner_metric(l, em_learner_epochs_done(l) - 1, "val_accuracy");
        printf("test accuracy: %.2f%% after %lld epochs (best %.2f%% at epoch %lld)\n", 100 * last,
               (long long)em_learner_epochs_done(l), 100 * best, (long long)best_epoch + 1);
        printf("run directory: %s (report.html, summary.md, checkpoints/)\n",
               em_learner_run_dir(l));
    } else {
        fprintf(stderr, "fashion_mnist: %s\n", em_last_error());
    }
    em_learner_free(l);
    em_sched_free(sched);
    em_optim_free(opt);
    em_loader_free(a.train);
    em_loader_free(a.test);
    em_module_free(a.net);
    return st == EM_OK ? 0 : 1;
}
