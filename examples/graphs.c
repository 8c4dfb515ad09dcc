/* Graphs from C: a model's inference step recorded once and replayed for every batch, with new
 * inputs written into the captured input tensor (em_copy_into). On a device without graphs (the
 * CPU) the same loop runs the step eagerly, so the program is written once. Each replay's result
 * is checked against the eager step on the same batch.
 * Run: ./build/example_graphs, or EMBER_DEVICE=cuda:0 ./build/example_graphs */
#include <ember/ember.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>

/* The step: class probabilities of x (no autograd: inference). Its tensors belong to the
 * caller's scope. */
static em_tensor *infer(em_module *net, em_tensor *x)
{
    em_no_grad_begin();
    em_tensor *p = em_softmax(em_forward(net, x), -1);
    em_no_grad_end();
    return p;
}

/* Largest |a - b| of two tensors of one shape. */
static double max_diff(const em_tensor *a, const em_tensor *b)
{
    em_scope_begin();
    double d = em_item_f64(em_max(em_abs(em_sub(a, b)), EM_ALL, false));
    em_scope_end();
    return d;
}

/* Takes only --help: usage on stdout and exit status 0; anything else is refused (status 2). */
static int parse_args(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
        if (c == 'h') {
            printf(
                "Usage: example_graphs\n"
                "Captures an MLP's inference step once as a graph and replays it for every batch,\n"
                "checking each replay against the eager step. The device comes from EMBER_DEVICE.\n"
                "  -h, --help    print this help and exit\n");
            return 0;
        }
        fprintf(stderr, "example_graphs: unknown option '%s'\nTry 'example_graphs --help'.\n",
                argv[optind - 1]);
        return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "example_graphs: unexpected argument '%s'\nTry 'example_graphs --help'.\n",
                argv[optind]);
        return 2;
    }
    return -1;
}

int main(int argc, char **argv)
{
    int rc = parse_args(argc, argv);
    if (rc >= 0) return rc;
    em_device dev = em_device_default(); /* "cpu" unless EMBER_DEVICE or ember.toml say so */
    char name[32];
    em_device_str(dev, name, sizeof name);
    em_seed(3);
    const int64_t batch = 64, d = 256, classes = 10;
    em_module *net = em_sequential(EM_CPU, em_linear_new(d, 512, EM_CPU), em_relu_new(),
                                   em_linear_new(512, 512, EM_CPU), em_relu_new(),
                                   em_linear_new(512, classes, EM_CPU));
    em_module_to(net, dev);
    em_module_train(net, false);

    /* the graph's input: made once, refilled in place for every batch */
    em_tensor *x = em_zeros(EM_SHAPE(batch, d), EM_F32, dev);
    em_scope_begin(); /* warm-up: kernels compile and tune on first use */
    infer(net, x);
    em_scope_end();
    em_graph *g = NULL;
    em_tensor *probs = NULL; /* the captured output: each replay writes it */
    if (em_graph_capture_begin(dev) == EM_OK) {
        em_scope_begin(); /* the step's intermediates go at its end; probs is kept */
        probs = em_retain(infer(net, x));
        em_scope_end();
        g = em_graph_capture_end(dev);
        if (!g) {
            fprintf(stderr, "capture failed: %s\n", em_last_error());
            return 1;
        }
        printf("%s: the step is a graph (%.2f MiB of device memory), replayed per batch\n", name,
               em_graph_memory_bytes(g) / 1048576.0);
    } else {
        printf("%s: no graphs here (%s); the step runs eagerly\n", name, em_last_error());
        em_clear_error();
    }

    double worst = 0;
    for (int step = 0; step < 8; step++) {
        em_scope_begin();
        em_tensor *b = em_randn(EM_SHAPE(batch, d), EM_F32, EM_CPU); /* the next batch */
        if (em_copy_into(x, b) != EM_OK) break;
        em_tensor *p = g ? (em_graph_replay(g), probs) : infer(net, x);
        em_tensor *want = infer(net, x); /* the same step, eagerly, for the check */
        double diff = max_diff(p, want);
        worst = fmax(worst, diff);
        int64_t first = em_item_i64(em_argmax(em_slice(p, 0, 0, 1, 1), 1, false));
        printf("batch %d: sample 0 -> class %lld, max |result - eager| = %.3g\n", step,
               (long long)first, diff);
        em_scope_end();
    }
    em_graph_free(g);
    em_release(probs);
    em_release(x);
    em_module_free(net);
    if (em_failed()) {
        fprintf(stderr, "ember: %s\n", em_last_error());
        return 1;
    }
    printf("largest difference: %.3g\n", worst);
    return worst <= 1e-5 ? 0 : 1;
}
