/* Devices and memory from C: what the device is, a model moved there (its parameters and the
 * optimizer's state in persistent storage), batches built into pinned host memory by the
 * loader's workers, a short training run, and the memory the device's allocator holds before and
 * after giving its cache back. Runs on the CPU, or on a GPU with EMBER_DEVICE=cuda:0.
 * Run: ./build/example_devices */
#include <ember/ember.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

static void show_memory(em_device dev, const char *when)
{
    em_device_mem_stats m;
    if (em_device_get_mem_stats(dev, &m) != EM_OK) return;
    printf("%-22s in use %8.2f MiB (peak %8.2f), persistent %6.2f MiB, cached %8.2f MiB\n", when,
           m.in_use_bytes / 1048576.0, m.peak_in_use_bytes / 1048576.0,
           m.persistent_bytes / 1048576.0, m.cached_bytes / 1048576.0);
}

/* Takes only --help: usage on stdout and exit status 0; anything else is refused (status 2). */
static int parse_args(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
        if (c == 'h') {
            printf(
                "Usage: example_devices\n"
                "Shows the device, moves a small model there, trains it briefly and reports the\n"
                "allocator's memory. The device comes from EMBER_DEVICE (default cpu).\n"
                "  -h, --help    print this help and exit\n");
            return 0;
        }
        fprintf(stderr, "example_devices: unknown option '%s'\nTry 'example_devices --help'.\n",
                argv[optind - 1]);
        return 2;
    }
    if (optind < argc) {
        fprintf(stderr,
                "example_devices: unexpected argument '%s'\nTry 'example_devices --help'.\n",
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
    em_device_props p;
    if (em_device_get_props(dev, &p) != EM_OK) {
        fprintf(stderr, "ember: %s\n", em_last_error());
        return 1;
    }
    printf("%s: %s, %d processors, %.1f GiB\n", em_device_str(dev, name, sizeof name), p.name,
           p.processors, p.total_memory / 1073741824.0);
    em_seed(7);

    /* a learnable task: the class of x is the largest of four fixed projections of it (the
       scope releases the tensors; the dataset keeps its own copies' references) */
    int64_t n = 4096, d = 32, classes = 4;
    em_scope_begin();
    em_tensor *x = em_randn(EM_SHAPE(n, d), EM_F32, EM_CPU);
    em_tensor *y =
        em_argmax(em_matmul(x, em_randn(EM_SHAPE(d, classes), EM_F32, EM_CPU)), 1, false);
    em_tensor *fields[2] = {x, y};
    em_dataset *ds = em_dataset_from_tensors(fields, (const char *[]){"x", "y"}, 2);
    em_scope_end();

    /* built on the CPU, moved to the device: parameters in persistent (exactly sized) storage */
    em_module *net = em_sequential(EM_CPU, em_linear_new(d, 64, EM_CPU), em_relu_new(),
                                   em_linear_new(64, classes, EM_CPU));
    em_module_to(net, dev);
    em_optim *opt = em_adam_new(net, (em_adam_cfg){.lr = 1e-2});
    show_memory(dev, "model on the device:");

    /* two workers build the batches, into pinned host memory when dev is a GPU, so each move
       to the device is one DMA that em_loader_next does not wait for */
    em_loader *ld = em_loader_new(ds, (em_loader_cfg){.batch_size = 256,
                                                      .shuffle = true,
                                                      .seed = 1,
                                                      .workers = 2,
                                                      .device = dev,
                                                      .pin_memory = true});
    double first = 0, last = 0;
    for (int epoch = 0; epoch < 5; epoch++) {
        double sum = 0;
        int batches = 0;
        em_batch b;
        while (em_loader_next(ld, &b)) {
            em_scope_begin();
            em_tensor *loss = em_cross_entropy(em_forward(net, em_batch_get(&b, "x")),
                                               em_batch_get(&b, "y"), (em_ce_cfg){0});
            em_optim_step(opt, em_backward(loss));
            sum += em_item_f64(loss);
            batches++;
            em_scope_end();
            em_batch_free(&b);
        }
        if (epoch == 0) first = sum / batches;
        last = sum / batches;
        printf("epoch %d: mean loss %.4f\n", epoch + 1, last);
    }
    show_memory(dev, "after training:");
    int64_t released = em_device_empty_cache(dev);
    show_memory(dev, "after empty_cache:");
    printf("empty_cache gave back %.2f MiB\n", released / 1048576.0);

    em_loader_free(ld);
    em_optim_free(opt);
    em_module_free(net);
    if (em_failed()) {
        fprintf(stderr, "ember: %s\n", em_last_error());
        return 1;
    }
    printf("loss %.4f -> %.4f\n", first, last);
    return last < first ? 0 : 1;
}
