/* A short tour of Ember's tensors: creation, views, chained ops inside a scope, printing and
 * error handling. Run: ./build/example_tour */
#include <ember/ember.h>
#include <getopt.h>
#include <stdio.h>

/* Takes only --help: usage on stdout and exit status 0; anything else is refused (status 2). */
static int parse_args(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
        if (c == 'h') {
            printf("Usage: example_tour\n"
                   "A short tour of tensors: creation, views, scopes, printing and errors.\n"
                   "  -h, --help    print this help and exit\n");
            return 0;
        }
        fprintf(stderr, "example_tour: unknown option '%s'\nTry 'example_tour --help'.\n",
                argv[optind - 1]);
        return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "example_tour: unexpected argument '%s'\nTry 'example_tour --help'.\n",
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
    em_seed(42);

    em_scope_begin(); /* every tensor created below is released at em_scope_end */
    em_tensor *x = em_randn(EM_SHAPE(4, 8), EM_F32, dev);
    em_tensor *w = em_rand_uniform(EM_SHAPE(8, 3), -0.5, 0.5, EM_F32, dev);
    em_tensor *b = em_arange(0, 3, 1, EM_F32, dev);

    /* a tiny dense layer: softmax(relu(x @ w + b)) */
    em_tensor *probs = em_softmax(em_relu(em_add(em_matmul(x, w), b)), -1);
    em_tensor *cls = em_argmax(probs, -1, false);
    printf("probabilities:\n");
    em_print(probs);
    printf("predicted classes:\n");
    em_print(cls);

    /* views share memory: a transposed, flipped slice costs nothing until it is copied */
    em_tensor *v = em_flip(em_slice(em_transpose(x, 0, 1), 0, 0, 8, 2), EM_AXES(1));
    printf("every other row of x^T, columns reversed (a view: %s):\n",
           em_tensor_shares_storage(v, x) ? "yes" : "no");
    em_print(v);

    /* statistics over dims */
    em_print(em_std(x, EM_AXES(1), 1, true));

    /* errors are values: an op given bad shapes returns NULL, later ops pass NULL through,
     * and the first message is kept */
    em_tensor *bad = em_softmax(em_add(x, em_ones(EM_SHAPE(5), EM_F32, dev)), -1);
    if (!bad) printf("expected error: %s\n", em_last_error());
    em_clear_error();

    /* the device and its memory as Ember's allocator sees it (`ember devices` prints them too) */
    char devname[32];
    em_device_props props;
    em_device_mem_stats mem;
    if (em_device_get_props(dev, &props) == EM_OK && em_device_get_mem_stats(dev, &mem) == EM_OK)
        printf("%s (%s): %lld bytes in use, %lld cached, %.0f MiB free\n",
               em_device_str(dev, devname, sizeof devname), props.name, (long long)mem.in_use_bytes,
               (long long)mem.cached_bytes, (double)mem.free_bytes / (1 << 20));
    em_scope_end();

    if (em_failed()) {
        fprintf(stderr, "ember: %s\n", em_last_error());
        return 1;
    }
    return 0;
}
