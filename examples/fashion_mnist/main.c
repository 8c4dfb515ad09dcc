/* Trains a small CNN on the full Fashion-MNIST (60,000 training and 10,000 test images, from
 * Debian's dataset-fashion-mnist) and reports the test accuracy. The learner draws a live
 * dashboard on a terminal (plain progress lines otherwise) and writes runs/fashion_mnist/ with
 * metrics, checkpoints, summary.md and report.html.
 *
 *   ./build/fashion_mnist [--epochs N] [--batch B] [--lr X] [--workers W] [--resume]
 *                         [--data DIR] [--limit N] [--device cpu]
 */
#include <ember/ember.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "Usage: fashion_mnist [options]\n"
    "Trains a small CNN on Fashion-MNIST and reports the test accuracy.\n"
    "\n"
    "  --epochs N    epochs to train (default 4)\n"
    "  --batch B     training batch size (default 128)\n"
    "  --lr X        Adam's learning rate (default 0.001)\n"
    "  --workers W   loader threads, 0: the main thread (default 1)\n"
    "  --limit N     train on the first N images only\n"
    "  --data DIR    the IDX files (default $EMBER_DATA_FASHION or\n"
    "                /usr/share/datasets/fashion-mnist)\n"
    "  --device D    cpu, cuda:0 ... (default $EMBER_DEVICE or cpu)\n"
    "  --resume      continue runs/fashion_mnist from its latest checkpoint\n"
    "  -h, --help    print this help and exit\n";

/* A whole integer in [min, max] for option `flag`, or a message and exit status 2. */
static int64_t int_arg(const char *flag, const char *s, int64_t min, int64_t max)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) {
        fprintf(stderr, "fashion_mnist: --%s expects an integer from %lld to %lld, got '%s'\n",
                flag, (long long)min, (long long)max, s);
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
        fprintf(stderr, "fashion_mnist: --%s expects a number > 0, got '%s'\n", flag, s);
        exit(2);
    }
    return v;
}

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
    static const struct option opts[] = {
        {"epochs", required_argument, 0, 'e'}, {"batch", required_argument, 0, 'b'},
        {"lr", required_argument, 0, 'l'},     {"workers", required_argument, 0, 'w'},
        {"limit", required_argument, 0, 'n'},  {"data", required_argument, 0, 'd'},
        {"device", required_argument, 0, 'D'}, {"resume", no_argument, 0, 'r'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, ":h", opts, NULL)) != -1;) {
        switch (c) {
        case 'e': epochs = int_arg("epochs", optarg, 1, 100000); break;
        case 'b': batch = int_arg("batch", optarg, 1, 60000); break;
        case 'l': lr = pos_arg("lr", optarg); break;
        case 'w': workers = (int)int_arg("workers", optarg, 0, 256); break;
        case 'n': limit = int_arg("limit", optarg, 1, 60000); break;
        case 'd': data = optarg; break;
        case 'D': device = optarg; break;
        case 'r': resume = true; break;
        case 'h': fputs(usage, stdout); return 0;
        case ':':
            fprintf(stderr, "fashion_mnist: %s needs a value\nTry 'fashion_mnist --help'.\n",
                    argv[optind - 1]);
            return 2;
        default:
            fprintf(stderr, "fashion_mnist: unknown option '%s'\nTry 'fashion_mnist --help'.\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "fashion_mnist: unexpected argument '%s'\nTry 'fashion_mnist --help'.\n",
                argv[optind]);
        return 2;
    }
    em_device dev = device ? em_device_parse(device) : em_device_default();
    if (em_failed()) {
        fprintf(stderr, "fashion_mnist: %s\n", em_last_error());
        return 2;
    }
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
    char hp[128];
    snprintf(hp, sizeof hp, "%lld", (long long)batch);
    if (l) em_learner_log_param(l, "batch size", hp);
    snprintf(hp, sizeof hp, "cosine over %lld epochs to 0", (long long)epochs);
    if (l) em_learner_log_param(l, "schedule", hp);
    snprintf(hp, sizeof hp, "%lld training images%s", (long long)em_dataset_len(train),
             limit > 0 ? " (--limit)" : "");
    if (l) em_learner_log_param(l, "data", hp);
    em_status st = l ? em_learner_fit(l) : em_last_status();
    if (st == EM_OK && em_learner_epochs_done(l) == 0) {
        printf("stopped before the first epoch ended: --resume continues the run\n");
    } else if (st == EM_OK) {
        int64_t best_epoch = -1, done = em_learner_epochs_done(l);
        double best = em_learner_best(l, &best_epoch);
        double last = em_learner_metric(l, done - 1, "val_accuracy");
        printf("test accuracy: %.2f%% after %lld epoch%s (best %.2f%% at epoch %lld)\n", 100 * last,
               (long long)done, done == 1 ? "" : "s", 100 * best, (long long)best_epoch + 1);
        printf("run directory: %s (report.html, summary.md, checkpoints/)\n",
               em_learner_run_dir(l));
        if (em_learner_stop_reason(l) == EM_STOP_INTERRUPT)
            printf("stopped early: --resume continues the run\n");
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
