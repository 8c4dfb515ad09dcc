/* The `ember` command line: version and device information, and the model-file tools
 * (inspect, convert) of the store layer. Exit status: 0 success, 1 the operation failed,
 * 2 the command line was wrong. */
#include <ember/ember.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

typedef struct command {
    const char *name, *args, *summary, *details;
    int (*run)(int argc, char **argv);
} command;

static const command *find_command(const char *name);

static void print_usage(FILE *f)
{
    fprintf(f, "usage: ember [--help] [--version] <command> [<args>]\n\n"
               "commands:\n"
               "  version              print the library version\n"
               "  devices              list the devices this build can use\n"
               "  inspect FILE         list the tensors and metadata of a model file\n"
               "  convert IN OUT       write a model file as safetensors\n"
               "  cuda-cache ARCH [DIR]\n"
               "                       compile the CUDA kernels into the kernel cache\n"
               "  help [COMMAND]       print this help, or a command's\n\n"
               "Run 'ember COMMAND --help' for a command's options.\n");
}

static void print_command_usage(FILE *f, const command *c)
{
    fprintf(f, "usage: ember %s%s%s\n\n%s\n", c->name, *c->args ? " " : "", c->args, c->summary);
    if (*c->details) fprintf(f, "\n%s", c->details);
}

/* A command-line mistake: the message, a hint, exit status 2. */
static int usage_error(const char *cmd, const char *fmt, const char *arg)
{
    fprintf(stderr, "ember%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'ember %s%s--help'.\n", cmd ? cmd : "", cmd ? " " : "");
    return 2;
}

static int fail(void)
{
    /* the message may quote a file's bytes: control characters are escaped */
    fputs("ember: ", stderr);
    for (const unsigned char *p = (const unsigned char *)em_last_error(); *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            fprintf(stderr, "\\x%02x", *p);
        else
            fputc(*p, stderr);
    fputc('\n', stderr);
    return 1;
}

/* Parses the options every command takes (--help) plus `extra`; returns the option character,
 * -1 at the end of options, 'h' after printing help, '?' after a bad option. */
static int next_option(const command *c, int argc, char **argv, const char *shortopts,
                       const struct option *extra)
{
    struct option opts[8] = {{"help", no_argument, NULL, 'h'}};
    for (int i = 0; extra && extra[i].name && i < 6; i++) opts[i + 1] = extra[i];
    opterr = 0;
    int o = getopt_long(argc, argv, shortopts, opts, NULL);
    if (o == 'h') print_command_usage(stdout, c);
    if (o == '?') {
        const char *bad = argv[optind - 1];
        if (optopt && strchr(shortopts, optopt))
            usage_error(c->name, "option '%s' needs a value", bad);
        else
            usage_error(c->name, "unknown option '%s'", bad);
    }
    return o;
}

/* Checks the number of operands left after the options. */
static bool operands(const command *c, int argc, char **argv, int min, int max)
{
    int n = argc - optind;
    if (n < min) {
        usage_error(c->name, "%s", min - n == 1 ? "missing an argument" : "missing arguments");
        return false;
    }
    if (n > max) {
        usage_error(c->name, "unexpected argument '%s'", argv[optind + max]);
        return false;
    }
    return true;
}

/* "1.2 MiB": bytes in binary units, for people; exact counts are printed beside them. */
static const char *human(int64_t bytes, char *buf, size_t cap)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 6) v /= 1024, u++;
    if (u == 0)
        snprintf(buf, cap, "%lld B", (long long)bytes);
    else
        snprintf(buf, cap, "%.1f %s", v, units[u]);
    return buf;
}

/* ---- inspect ----------------------------------------------------------------------------- */

/* Writes text from a file with its control characters escaped (\x1b...), so a tensor name or
 * metadata value cannot move the cursor or rewrite the terminal; pads to `width` columns. */
static void print_text(const char *s, int width)
{
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p < 0x20 || *p == 0x7f) {
            n += printf("\\x%02x", *p);
        } else {
            putchar(*p);
            n += (*p & 0xc0) != 0x80; /* one column per UTF-8 character */
        }
    }
    for (; n < width; n++) putchar(' ');
}

static int cmd_inspect(int argc, char **argv)
{
    const command *c = find_command("inspect");
    int o;
    while ((o = next_option(c, argc, argv, "h", NULL)) != -1)
        if (o == 'h' || o == '?') return o == 'h' ? 0 : 2;
    if (!operands(c, argc, argv, 1, 1)) return 2;
    const char *path = argv[optind];
    em_store_info *info = em_store_inspect(path);
    if (!info) return fail();
    int64_t total = 0;
    char shape[160], size[32];
    int64_t n = em_store_info_count(info);
    printf("%s: %lld tensor%s\n", path, (long long)n, n == 1 ? "" : "s");
    for (int64_t i = 0; i < n; i++) {
        const em_store_entry *e = em_store_info_entry(info, i);
        printf("  ");
        print_text(e->name, 40);
        printf(" %-5s %-20s %10s\n", em_dtype_name(e->dtype),
               em_shape_str(e->shape, shape, sizeof shape), human(e->nbytes, size, sizeof size));
        total += e->nbytes;
    }
    printf("total: %s (%lld bytes)\n", human(total, size, sizeof size), (long long)total);
    if (em_store_info_meta_count(info)) printf("metadata:\n");
    for (int64_t i = 0; i < em_store_info_meta_count(info); i++) {
        printf("  ");
        print_text(em_store_info_meta_key_at(info, i), 0);
        printf(" = ");
        print_text(em_store_info_meta_value_at(info, i), 0);
        printf("\n");
    }
    em_store_info_free(info);
    return 0;
}

/* ---- convert ----------------------------------------------------------------------------- */

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Bytes of the distinct elements an expanded (stride-0) view holds. */
static int64_t held_bytes(const em_tensor *t)
{
    int64_t n = (int64_t)em_dtype_size(em_tensor_dtype(t));
    for (int d = 0; d < em_tensor_rank(t); d++) {
        int64_t dim = em_tensor_dim(t, d);
        if (dim == 0) return 0;
        if (em_tensor_stride(t, d) != 0) n *= dim;
    }
    return n;
}

/* safetensors has no strides: an expanded tensor from a .pt file is written out in full, so
 * one that would grow past store_expand_ratio times what it holds (and past
 * store_expand_min_mb) is refused, as the .pt reader refuses such copies. */
static bool check_expanded(const em_tensor_dict *d)
{
    int64_t ratio = em_config_get_int("store_expand_ratio");
    int64_t min_mb = em_config_get_int("store_expand_min_mb");
    if (ratio <= 0) ratio = 16;
    if (min_mb <= 0) min_mb = 64;
    for (int64_t i = 0; i < em_tensor_dict_count(d); i++) {
        const em_tensor *t = em_tensor_dict_tensor_at(d, i);
        int64_t full = em_tensor_numel(t) * (int64_t)em_dtype_size(em_tensor_dtype(t));
        int64_t held = held_bytes(t);
        double allowed = (double)held * (double)ratio;
        if (allowed < (double)min_mb * 1048576.0) allowed = (double)min_mb * 1048576.0;
        if ((double)full > allowed) {
            char a[32], b[32];
            em_error(EM_ERR_INVALID_ARG,
                     "tensor \"%s\" is an expanded view of %s that would take %s written out, "
                     "more than %lld times what it holds (limits store_expand_ratio, "
                     "store_expand_min_mb)",
                     em_tensor_dict_name_at(d, i), human(held, a, sizeof a),
                     human(full, b, sizeof b), (long long)ratio);
            return false;
        }
    }
    return true;
}

static int cmd_convert(int argc, char **argv)
{
    const command *c = find_command("convert");
    static const struct option extra[] = {{"dtype", required_argument, NULL, 'd'}, {0}};
    int dtype = -1, o;
    while ((o = next_option(c, argc, argv, "hd:", extra)) != -1) {
        if (o == 'h' || o == '?') return o == 'h' ? 0 : 2;
        dtype = em_dtype_parse(optarg);
        if (dtype < 0 || !em_dtype_is_float((em_dtype)dtype))
            return usage_error(c->name, "--dtype takes f16, bf16, f32 or f64, not '%s'", optarg);
    }
    if (!operands(c, argc, argv, 2, 2)) return 2;
    const char *in = argv[optind], *out = argv[optind + 1];
    if (!ends_with(out, ".safetensors"))
        return usage_error(c->name,
                           "%s: the output must be a .safetensors file (Ember writes only "
                           "safetensors)",
                           out);
    em_tensor_dict *src = em_store_load(in);
    if (!src) return fail();
    if (!check_expanded(src)) { /* before a cast would materialise them */
        em_tensor_dict_free(src);
        return fail();
    }
    em_tensor_dict *dst = src;
    if (dtype >= 0) {
        dst = em_tensor_dict_new();
        for (int64_t i = 0; dst && i < em_tensor_dict_meta_count(src); i++)
            em_tensor_dict_set_meta(dst, em_tensor_dict_meta_key_at(src, i),
                                    em_tensor_dict_meta_value_at(src, i));
        for (int64_t i = 0; dst && i < em_tensor_dict_count(src); i++) {
            em_tensor *t = em_tensor_dict_tensor_at(src, i);
            em_tensor *x =
                em_dtype_is_float(em_tensor_dtype(t)) ? em_cast(t, (em_dtype)dtype) : em_retain(t);
            if (!x || em_tensor_dict_add(dst, em_tensor_dict_name_at(src, i), x) != EM_OK) {
                em_release(x);
                em_tensor_dict_free(dst);
                em_tensor_dict_free(src);
                return fail();
            }
            em_release(x);
        }
    }
    const char *meta[] = {"converted_by", "ember", NULL};
    em_status s = em_safetensors_save(out, dst, meta);
    if (dst != src) em_tensor_dict_free(dst);
    em_tensor_dict_free(src);
    if (s != EM_OK) return fail();
    printf("wrote %s\n", out);
    return 0;
}

/* ---- version, devices, cuda-cache -------------------------------------------------------- */

static int cmd_version(int argc, char **argv)
{
    const command *c = find_command("version");
    int o;
    while ((o = next_option(c, argc, argv, "h", NULL)) != -1)
        if (o == 'h' || o == '?') return o == 'h' ? 0 : 2;
    if (!operands(c, argc, argv, 0, 0)) return 2;
    printf("ember %s\n", em_version());
    return 0;
}

static double gib(int64_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0 * 1024.0);
}

/* One line per device: what it is and its memory. */
static int cmd_devices(int argc, char **argv)
{
    const command *c = find_command("devices");
    int o;
    while ((o = next_option(c, argc, argv, "h", NULL)) != -1)
        if (o == 'h' || o == '?') return o == 'h' ? 0 : 2;
    if (!operands(c, argc, argv, 0, 0)) return 2;
    char name[32];
    em_device d = em_device_default();
    if (em_last_status() != EM_OK) {
        printf("default device: none (%s)\n", em_last_error());
        em_clear_error();
    } else {
        printf("default device: %s\n", em_device_str(d, name, sizeof name));
    }
    const char *backends[] = {"cpu", "cuda"};
    for (int b = 0; b < 2; b++) {
        int n = em_device_count(backends[b]);
        if (n == 0) printf("%s: no device found\n", backends[b]);
        for (int i = 0; i < n; i++) {
            if (b == 0)
                snprintf(name, sizeof name, "%s", backends[b]);
            else
                snprintf(name, sizeof name, "%s:%d", backends[b], i);
            em_device dev = em_device_parse(name);
            em_device_props p;
            em_device_mem_stats m;
            if (em_device_get_props(dev, &p) != EM_OK || em_device_get_mem_stats(dev, &m) != EM_OK)
                return fail();
            if (b == 0)
                printf("%s: %s, %d hardware threads (%d used)", name, p.name, p.processors,
                       em_get_num_threads());
            else
                printf("%s: %s, compute capability %d.%d, %d multiprocessors", name, p.name,
                       p.compute_major, p.compute_minor, p.processors);
            if (p.total_memory > 0) printf(", %.1f GiB", gib(p.total_memory));
            if (m.free_bytes >= 0) printf(" (%.1f GiB free)", gib(m.free_bytes));
            if (m.limit_bytes > 0) printf(", Ember's pool capped at %.1f GiB", gib(m.limit_bytes));
            printf("\n");
        }
    }
    return 0;
}

static int cmd_cuda_cache(int argc, char **argv)
{
    const command *c = find_command("cuda-cache");
    int o;
    while ((o = next_option(c, argc, argv, "h", NULL)) != -1)
        if (o == 'h' || o == '?') return o == 'h' ? 0 : 2;
    if (!operands(c, argc, argv, 1, 2)) return 2;
    const char *arch = argv[optind], *dir = optind + 1 < argc ? argv[optind + 1] : NULL;
    int n = 0;
    if (em_cuda_build_cache(arch, dir, &n) != EM_OK) return fail();
    printf("%d kernel units compiled for %s\n", n, arch);
    return 0;
}

static int cmd_help(int argc, char **argv);

static const command commands[] = {
    {"version", "", "Print the library version.", "", cmd_version},
    {"devices", "", "List the devices this build can use, with their memory.", "", cmd_devices},
    {"inspect", "FILE",
     "List the tensors (name, dtype, shape, size) and metadata of a .safetensors or .pt/.pth\n"
     "file. The format is told by the file's content; only the safetensors header or the\n"
     "pickle is read.",
     "", cmd_inspect},
    {"convert", "[--dtype f16|bf16|f32|f64] IN OUT",
     "Write IN (.safetensors or .pt/.pth, told by content) as the safetensors file OUT\n"
     "(metadata converted_by=ember). OUT must end in .safetensors.",
     "options:\n"
     "  --dtype DTYPE   cast floating-point tensors to f16, bf16, f32 or f64\n"
     "                  (integers and bools are kept)\n",
     cmd_convert},
    {"cuda-cache", "ARCH [DIR]",
     "Compile the CUDA kernels for ARCH (sm_90a on Hopper) into the kernel cache DIR\n"
     "(default: the cache_dir setting, else ~/.cache/ember). Needs NVRTC, not a GPU.",
     "", cmd_cuda_cache},
    {"help", "[COMMAND]", "Print the list of commands, or one command's help.", "", cmd_help},
};

static const command *find_command(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    return NULL;
}

static int cmd_help(int argc, char **argv)
{
    const command *c = find_command("help");
    int o;
    while ((o = next_option(c, argc, argv, "h", NULL)) != -1)
        if (o == 'h' || o == '?') return o == 'h' ? 0 : 2;
    if (!operands(c, argc, argv, 0, 1)) return 2;
    if (optind == argc) {
        print_usage(stdout);
        return 0;
    }
    const command *target = find_command(argv[optind]);
    if (!target) return usage_error(NULL, "unknown command '%s'", argv[optind]);
    print_command_usage(stdout, target);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'}, {"version", no_argument, NULL, 'V'}, {0}};
    opterr = 0;
    int o = getopt_long(argc, argv, "+hV", opts, NULL);
    if (o == 'h') {
        print_usage(stdout);
        return 0;
    }
    if (o == 'V') {
        printf("ember %s\n", em_version());
        return 0;
    }
    if (o == '?') return usage_error(NULL, "unknown option '%s'", argv[optind - 1]);
    if (optind >= argc) {
        print_usage(stderr);
        return 2;
    }
    em_pt_register(); /* inspect and convert read .pt files */
    const command *c = find_command(argv[optind]);
    if (!c) return usage_error(NULL, "unknown command '%s'", argv[optind]);
    /* the command parses its own arguments after its name (options may follow operands) */
    int sub_argc = argc - optind;
    char **sub_argv = argv + optind;
    optind = 0; /* restarts getopt */
    return c->run(sub_argc, sub_argv);
}
