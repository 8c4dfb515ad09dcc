/* The `ember` command line: version and device information, and the model-file tools
 * (inspect, convert) of the store layer. */
#include <ember/ember.h>
#include <ember/store.h>
#include <stdio.h>
#include <string.h>

static int usage(void)
{
    fprintf(stderr, "usage: ember <command>\n"
                    "  version    print the library version\n"
                    "  devices    list the devices this build can use\n"
                    "  inspect FILE\n"
                    "             list the tensors (dtype, shape, bytes) and metadata of a\n"
                    "             .safetensors or .pt/.pth file\n"
                    "  convert IN OUT [--dtype f16|bf16|f32|f64]\n"
                    "             write IN (.safetensors or .pt/.pth) as safetensors, casting\n"
                    "             floating-point tensors when --dtype is given\n"
                    "  cuda-cache ARCH [DIR]\n"
                    "             compile the CUDA kernels for ARCH (sm_90a on Hopper) into the\n"
                    "             kernel cache (DIR, default the cache_dir config or\n"
                    "             ~/.cache/ember); needs NVRTC, not a GPU\n");
    return 2;
}

static bool is_safetensors(const char *path)
{
    size_t n = strlen(path);
    return n >= 12 && strcmp(path + n - 12, ".safetensors") == 0;
}

static int fail(void)
{
    fprintf(stderr, "ember: %s\n", em_last_error());
    return 1;
}

static int cmd_inspect(const char *path)
{
    em_store_info *info = is_safetensors(path) ? em_safetensors_inspect(path) : em_pt_inspect(path);
    if (!info) return fail();
    int64_t total = 0;
    char shape[160];
    printf("%s: %lld tensors\n", path, (long long)em_store_info_count(info));
    for (int64_t i = 0; i < em_store_info_count(info); i++) {
        const em_store_entry *e = em_store_info_entry(info, i);
        printf("  %-40s %-5s %-20s %lld bytes\n", e->name, em_dtype_name(e->dtype),
               em_shape_str(e->shape, shape, sizeof shape), (long long)e->nbytes);
        total += e->nbytes;
    }
    printf("total: %lld bytes\n", (long long)total);
    if (em_store_info_meta_count(info)) printf("metadata:\n");
    for (int64_t i = 0; i < em_store_info_meta_count(info); i++)
        printf("  %s = %s\n", em_store_info_meta_key_at(info, i),
               em_store_info_meta_value_at(info, i));
    em_store_info_free(info);
    return 0;
}

static int cmd_convert(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    int dtype = -1;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--dtype") == 0 && i + 1 < argc) {
            dtype = em_dtype_parse(argv[++i]);
            if (dtype < 0 || !em_dtype_is_float((em_dtype)dtype)) {
                fprintf(stderr, "ember convert: --dtype takes f16, bf16, f32 or f64\n");
                return 2;
            }
        } else if (!in) {
            in = argv[i];
        } else if (!out) {
            out = argv[i];
        } else {
            return usage();
        }
    }
    if (!in || !out) return usage();
    em_tensor_dict *src = is_safetensors(in) ? em_safetensors_load(in, NULL) : em_pt_load(in);
    if (!src) return fail();
    em_tensor_dict *dst = src;
    if (dtype >= 0) {
        dst = em_tensor_dict_new();
        for (int64_t i = 0; dst && i < em_tensor_dict_meta_count(src); i++)
            em_tensor_dict_set_meta(dst, em_tensor_dict_meta_key_at(src, i),
                                    em_tensor_dict_meta_value_at(src, i));
        for (int64_t i = 0; dst && i < em_tensor_dict_count(src); i++) {
            em_tensor *t = em_tensor_dict_tensor_at(src, i);
            em_tensor *c =
                em_dtype_is_float(em_tensor_dtype(t)) ? em_cast(t, (em_dtype)dtype) : em_retain(t);
            if (!c || em_tensor_dict_add(dst, em_tensor_dict_name_at(src, i), c) != EM_OK) {
                em_release(c);
                em_tensor_dict_free(dst);
                em_tensor_dict_free(src);
                return fail();
            }
            em_release(c);
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

static double gib(int64_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0 * 1024.0);
}

/* One line per device: what it is and its memory. */
static int cmd_devices(void)
{
    char name[32];
    em_device d = em_device_default();
    if (em_last_status() != EM_OK) {
        printf("default device: cpu (%s)\n", em_last_error());
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

int main(int argc, char **argv)
{
    if (argc < 2) return usage();
    if (strcmp(argv[1], "version") == 0) {
        printf("ember %s\n", em_version());
        return 0;
    }
    if (strcmp(argv[1], "devices") == 0) return cmd_devices();
    if (strcmp(argv[1], "inspect") == 0) {
        if (argc != 3) return usage();
        return cmd_inspect(argv[2]);
    }
    if (strcmp(argv[1], "convert") == 0) return cmd_convert(argc - 2, argv + 2);
    if (strcmp(argv[1], "cuda-cache") == 0) {
        if (argc < 3 || argc > 4) return usage();
        int n = 0;
        if (em_cuda_build_cache(argv[2], argc == 4 ? argv[3] : NULL, &n) != EM_OK) return fail();
        printf("%d kernel units compiled for %s\n", n, argv[2]);
        return 0;
    }
    return usage();
}
