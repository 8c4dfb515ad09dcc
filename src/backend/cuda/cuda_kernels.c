/* The CUDA kernels: the units of kernels/ files (embedded at build time), each compiled by NVRTC
 * (loaded with dlopen) for the device's own architecture on first use (in parallel), with every
 * embedded file and the op table's generated cuda_ew_gen.cuh (the OP_* numbers of em_op_kind and
 * the elementwise scalar code) as named headers,
 * and cached on disk keyed by a hash of the unit's source, of every file it includes, of the NVRTC
 * version and of the architecture. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuda.h"

/* ---- NVRTC ------------------------------------------------------------------------------ */

typedef struct _nvrtcProgram *nvrtcProgram;
typedef int nvrtcResult;

static struct {
    nvrtcResult (*Version)(int *, int *);
    nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int,
                                 const char *const *, const char *const *);
    nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetProgramLog)(nvrtcProgram, char *);
    nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetCUBIN)(nvrtcProgram, char *);
    nvrtcResult (*DestroyProgram)(nvrtcProgram *);
    const char *(*GetErrorString)(nvrtcResult);
} nvrtc;
static bool nvrtc_loaded;
static char nvrtc_tried[512];

#define NVLOAD(field, sym)                                                                         \
    do {                                                                                           \
        void *p_ = dlsym(lib, sym);                                                                \
        if (!p_) ok = false;                                                                       \
        memcpy(&nvrtc.field, &p_, sizeof p_);                                                      \
    } while (0)

/* Loads NVRTC: the config key cuda_nvrtc (a path) when it is set, and nothing else then (a
 * library the user named and that does not load is an error, not a reason to take another);
 * else the usual sonames and CUDA's install folder. */
static bool load_nvrtc(void)
{
    if (nvrtc_loaded) return true;
    const char *chosen = core_cfg_str(CFG_CUDA_NVRTC);
    const char *names[] = {chosen,
                           "libnvrtc.so",
                           "libnvrtc.so.13",
                           "libnvrtc.so.12",
                           "libnvrtc.so.11.2",
                           "/usr/local/cuda/lib64/libnvrtc.so",
                           "/usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so"};
    void *lib = NULL;
    nvrtc_tried[0] = '\0';
    size_t tries = chosen && *chosen ? 1 : sizeof names / sizeof names[0];
    for (size_t i = 0; i < tries && !lib; i++) {
        if (!names[i] || !*names[i]) continue;
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        size_t len = strlen(nvrtc_tried);
        snprintf(nvrtc_tried + len, sizeof nvrtc_tried - len, "%s%s", len ? ", " : "", names[i]);
    }
    if (!lib) return false;
    bool ok = true;
    NVLOAD(Version, "nvrtcVersion");
    NVLOAD(CreateProgram, "nvrtcCreateProgram");
    NVLOAD(CompileProgram, "nvrtcCompileProgram");
    NVLOAD(GetProgramLogSize, "nvrtcGetProgramLogSize");
    NVLOAD(GetProgramLog, "nvrtcGetProgramLog");
    NVLOAD(GetCUBINSize, "nvrtcGetCUBINSize");
    NVLOAD(GetCUBIN, "nvrtcGetCUBIN");
    NVLOAD(DestroyProgram, "nvrtcDestroyProgram");
    NVLOAD(GetErrorString, "nvrtcGetErrorString");
    nvrtc_loaded = ok;
    if (!ok) snprintf(nvrtc_tried, sizeof nvrtc_tried, "an NVRTC lacking nvrtcGetCUBIN");
    return ok;
}

/* ---- the modules: one per unit, built once per device ---------------------------------- */

#define CUDA_MAX_UNITS 32
#define CUDA_MAX_FILES 64

typedef struct kunit {
    char stem[48];
    int files[CUDA_MAX_FILES];
    int nfiles;
} kunit;

static kunit units[CUDA_MAX_UNITS];
static int n_units = -1;
static int n_files;
/* the header the op table's generator writes (build/gen/cuda_ew_gen_cuh.c) */
#define GEN_HEADER "cuda_ew_gen.cuh"
static CUmodule modules[CUDA_MAX_DEVICES][CUDA_MAX_UNITS];
static bool built[CUDA_MAX_DEVICES];
static cuda_module_origin origins[CUDA_MAX_DEVICES];
static char cache_paths[CUDA_MAX_DEVICES][1024];
static pthread_mutex_t module_lock = PTHREAD_MUTEX_INITIALIZER;

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && !strcmp(s + n - t, tail);
}

/* Groups the embedded .cu files by stem (the name before the first '_' or '.'), in the embedded
 * order. */
static void find_units(void)
{
    if (n_units >= 0) return;
    n_units = 0;
    for (n_files = 0; cuda_embedded_sources[n_files] && n_files < CUDA_MAX_FILES; n_files++) {
        const char *name = cuda_embedded_names[n_files];
        if (!ends_with(name, ".cu")) continue;
        size_t stem = strcspn(name, "_.");
        if (stem >= sizeof units[0].stem) stem = sizeof units[0].stem - 1;
        int u = 0;
        while (u < n_units && (strlen(units[u].stem) != stem || strncmp(units[u].stem, name, stem)))
            u++;
        if (u == n_units) {
            if (n_units == CUDA_MAX_UNITS) break;
            memcpy(units[u].stem, name, stem);
            units[u].stem[stem] = '\0';
            units[u].nfiles = 0;
            n_units++;
        }
        units[u].files[units[u].nfiles++] = n_files;
    }
}

/* A unit's source: an #include of each of its files. Caller frees. */
static char *unit_source(const kunit *u)
{
    size_t cap = 1, len = 0;
    for (int f = 0; f < u->nfiles; f++) cap += strlen(cuda_embedded_names[u->files[f]]) + 16;
    char *s = malloc(cap);
    if (!s) return NULL;
    s[0] = '\0';
    for (int f = 0; f < u->nfiles; f++)
        len += (size_t)snprintf(s + len, cap - len, "#include \"%s\"\n",
                                cuda_embedded_names[u->files[f]]);
    return s;
}

/* The text of the named header `name` (length n), NULL when there is none. */
static const char *header_text(const char *name, size_t n)
{
    if (n == strlen(GEN_HEADER) && !strncmp(name, GEN_HEADER, n)) return cuda_ew_gen_cuh;
    for (int i = 0; i < n_files; i++)
        if (strlen(cuda_embedded_names[i]) == n && !strncmp(cuda_embedded_names[i], name, n))
            return cuda_embedded_sources[i];
    return NULL;
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Hashes into h each header src includes ("#include \"name\"" lines), depth first, each once
 * (seen: the headers hashed so far, by their text). */
static uint64_t hash_includes(uint64_t h, const char *src, const char **seen, int *nseen)
{
    for (const char *p = strstr(src, "#include \""); p; p = strstr(p + 1, "#include \"")) {
        const char *name = p + strlen("#include \"");
        size_t n = strcspn(name, "\"\n");
        const char *text = header_text(name, n);
        bool done = !text;
        for (int i = 0; i < *nseen && !done; i++) done = seen[i] == text;
        if (done || *nseen == CUDA_MAX_FILES + 1) continue;
        seen[(*nseen)++] = text;
        h = fnv1a(h, name, n);
        h = fnv1a(h, text, strlen(text));
        h = hash_includes(h, text, seen, nseen);
    }
    return h;
}

static void mkdirs(const char *path)
{
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(tmp, 0755);
            *p = '/';
        }
    mkdir(tmp, 0755);
}

static void *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    void *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long sz = ftell(f);
        if (sz > 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)sz))) {
            if (fread(buf, 1, (size_t)sz, f) != (size_t)sz) {
                free(buf);
                buf = NULL;
            } else
                *n = (size_t)sz;
        }
    }
    fclose(f);
    return buf;
}

/* Writes through a temporary name and renames, so concurrent processes never read half a file. */
static bool write_file(const char *path, const void *data, size_t n)
{
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, n, f) == n;
    ok = fclose(f) == 0 && ok;
    if (ok && rename(tmp, path) == 0) return true;
    remove(tmp);
    return false;
}

static em_status compile(int device, const char *unit, const char *src, const char *arch,
                         char **cubin, size_t *n, const char *what)
{
    nvrtcProgram prog = NULL;
    const char *hsrc[CUDA_MAX_FILES + 1], *hname[CUDA_MAX_FILES + 1];
    int nh = 0;
    for (int i = 0; i < n_files; i++, nh++) {
        hsrc[nh] = cuda_embedded_sources[i];
        hname[nh] = cuda_embedded_names[i];
    }
    hsrc[nh] = cuda_ew_gen_cuh;
    hname[nh++] = GEN_HEADER;
    nvrtcResult r = nvrtc.CreateProgram(&prog, src, unit, nh, hsrc, hname);
    if (r != 0)
        return em_error(EM_ERR_DEVICE, "%s: nvrtcCreateProgram failed: %s", what,
                        nvrtc.GetErrorString(r));
    char archopt[64];
    snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", arch);
    /* config cuda_ptxas_info (EMBER_CUDA_PTXAS_INFO=1): ptxas reports each kernel's registers,
     * stack frame and spills, printed to stderr (a kernel developer's check) */
    const bool verbose = core_cfg_bool(CFG_CUDA_PTXAS_INFO);
    const char *opts[] = {archopt, "--std=c++17", "-default-device", "--ptxas-options=-v"};
    r = nvrtc.CompileProgram(prog, verbose ? 4 : 3, opts);
    if (r == 0 && verbose) {
        size_t ln = 0;
        nvrtc.GetProgramLogSize(prog, &ln);
        char *log = malloc(ln + 1);
        if (log && nvrtc.GetProgramLog(prog, log) == 0) {
            log[ln] = '\0';
            fprintf(stderr, "%s (%s):\n%s\n", unit, arch, log);
        }
        free(log);
    }
    if (r != 0) {
        size_t ln = 0;
        nvrtc.GetProgramLogSize(prog, &ln);
        char *log = malloc(ln + 1);
        if (log) {
            log[0] = '\0';
            nvrtc.GetProgramLog(prog, log);
            if (ln > 2000) log[2000] = '\0';
        }
        em_error(EM_ERR_DEVICE,
                 "%s: NVRTC could not compile the kernels of %s for %s on cuda:%d: %s\n%s", what,
                 unit, arch, device, nvrtc.GetErrorString(r), log ? log : "");
        free(log);
        nvrtc.DestroyProgram(&prog);
        return EM_ERR_DEVICE;
    }
    size_t sz = 0;
    r = nvrtc.GetCUBINSize(prog, &sz);
    char *buf = r == 0 && sz ? malloc(sz) : NULL;
    if (buf) r = nvrtc.GetCUBIN(prog, buf);
    nvrtc.DestroyProgram(&prog);
    if (!buf || r != 0) {
        free(buf);
        return em_error(EM_ERR_DEVICE, "%s: nvrtcGetCUBIN failed for %s", what, arch);
    }
    *cubin = buf;
    *n = sz;
    return EM_OK;
}

/* One unit's build: its cubin from the cache file, else compiled (on a worker thread). */
typedef struct unit_job {
    const kunit *u;
    int device;
    const char *arch;
    char name[64]; /* "<stem>-unit.cu" for NVRTC's messages */
    char path[1100];
    char *src, *cubin;
    size_t n;
    bool compiled;
    em_status st;
    char err[2600];
} unit_job;

static void *compile_job(void *p)
{
    unit_job *j = p;
    j->st = compile(j->device, j->name, j->src, j->arch, &j->cubin, &j->n, "cuda");
    if (j->st != EM_OK) snprintf(j->err, sizeof j->err, "%s", em_last_error());
    em_clear_error();
    j->compiled = true;
    return NULL;
}

/* Compiles the jobs without a cubin, in parallel (one thread each; inline when a thread cannot
 * start). The first failure's status, with its message recorded. */
static em_status compile_jobs(unit_job *jobs, int n)
{
    pthread_t th[CUDA_MAX_UNITS];
    bool started[CUDA_MAX_UNITS] = {false};
    for (int i = 0; i < n; i++)
        if (!jobs[i].cubin) started[i] = pthread_create(&th[i], NULL, compile_job, &jobs[i]) == 0;
    for (int i = 0; i < n; i++) {
        if (started[i])
            pthread_join(th[i], NULL);
        else if (!jobs[i].cubin)
            compile_job(&jobs[i]);
    }
    for (int i = 0; i < n; i++)
        if (jobs[i].st != EM_OK) return em_error(jobs[i].st, "%s", jobs[i].err);
    return EM_OK;
}

static void free_jobs(unit_job *jobs, int n)
{
    for (int i = 0; i < n; i++) {
        free(jobs[i].src);
        free(jobs[i].cubin);
    }
    free(jobs);
}

/* Sources and cache paths of every unit for arch; NULL when out of memory. */
static unit_job *make_jobs(int device, const char *arch, const char *cache_dir)
{
    find_units();
    unit_job *jobs = calloc((size_t)(n_units ? n_units : 1), sizeof *jobs);
    if (!jobs) return NULL;
    int maj = 0, min = 0;
    nvrtc.Version(&maj, &min);
    int ver[2] = {maj, min};
    for (int i = 0; i < n_units; i++) {
        unit_job *j = &jobs[i];
        j->u = &units[i];
        j->device = device;
        j->arch = arch;
        j->st = EM_OK;
        snprintf(j->name, sizeof j->name, "%.47s-unit.cu", units[i].stem);
        j->src = unit_source(&units[i]);
        if (!j->src) {
            free_jobs(jobs, n_units);
            return NULL;
        }
        const char *seen[CUDA_MAX_FILES + 1];
        int nseen = 0;
        uint64_t h = fnv1a(0xcbf29ce484222325ull, j->src, strlen(j->src));
        h = hash_includes(h, j->src, seen, &nseen);
        h = fnv1a(h, ver, sizeof ver);
        if (cache_dir && *cache_dir)
            snprintf(j->path, sizeof j->path, "%.900s/cuda-%.47s-%016llx-%s.cubin", cache_dir,
                     units[i].stem, (unsigned long long)h, arch);
    }
    return jobs;
}

/* The kernel cache's directory: the config key cache_dir, else ~/.cache/ember (in buf); NULL
 * when neither is known. */
static const char *cache_dir(char *buf, size_t cap)
{
    const char *dir = core_cfg_str(CFG_CACHE_DIR);
    if (dir && *dir) return dir;
    const char *home = getenv("HOME");
    if (!home || !*home) return NULL;
    snprintf(buf, cap, "%s/.cache/ember", home);
    return buf;
}

static em_status build_modules(int device, const char *what)
{
    const cuda_device_info *d = cuda_device(device);
    if (!load_nvrtc())
        return em_error(EM_ERR_DEVICE,
                        "%s: cannot load NVRTC to compile the CUDA kernels (tried %s; set the "
                        "config key cuda_nvrtc to the path of libnvrtc.so)",
                        what, nvrtc_tried);
    char arch[32];
    /* Hopper gets its architecture-specific target (sm_90a), which has the wgmma instructions */
    snprintf(arch, sizeof arch, "sm_%d%d%s", d->cc_major, d->cc_minor,
             d->cc_major == 9 && d->cc_minor == 0 ? "a" : "");

    char dbuf[900];
    const char *dir = cache_dir(dbuf, sizeof dbuf);
    if (dir) mkdirs(dir);
    char *path = cache_paths[device];
    path[0] = '\0';
    if (dir) snprintf(path, 1024, "%s/cuda-<unit>-<hash>-%s.cubin", dir, arch);

    unit_job *jobs = make_jobs(device, arch, dir);
    if (!jobs) return em_error(EM_ERR_OOM, "%s: out of memory building the kernel source", what);
    for (int i = 0; i < n_units; i++) {
        unit_job *j = &jobs[i];
        j->cubin = j->path[0] ? read_file(j->path, &j->n) : NULL;
        CUresult r = j->cubin ? cuda_drv.cuModuleLoadData(&modules[device][i], j->cubin) : 1;
        if (j->cubin && r != 0) { /* a stale or damaged file: rebuild it */
            em_log_msg("cuda", EM_LOG_WARN, "ignoring unloadable kernel cache file %s", j->path);
            free(j->cubin);
            j->cubin = NULL;
        }
    }
    em_status st = compile_jobs(jobs, n_units);
    bool any = false;
    for (int i = 0; i < n_units && st == EM_OK; i++) {
        unit_job *j = &jobs[i];
        if (!j->compiled) continue;
        any = true;
        CUresult r = cuda_drv.cuModuleLoadData(&modules[device][i], j->cubin);
        if (r != 0) {
            char call[96];
            snprintf(call, sizeof call, "cuModuleLoadData(%s)", j->name);
            st = cuda_fail(EM_ERR_DEVICE, r, what, call, device);
        } else if (j->path[0])
            write_file(j->path, j->cubin, j->n);
    }
    free_jobs(jobs, n_units);
    if (st != EM_OK) return st;
    built[device] = true;
    origins[device] = any ? CUDA_MODULE_COMPILED : CUDA_MODULE_CACHED;
    em_log_msg("cuda", EM_LOG_INFO, "kernels for cuda:%d (%s, %d units) %s %s", device, arch,
               n_units, any ? "compiled; cached in" : "loaded from", path[0] ? path : "(no cache)");
    return EM_OK;
}

/* Compiles every unit for arch; with dir, writes the cubins there under the names build_modules
 * looks for, skipping units whose file is already there (*compiled: units compiled). */
static em_status compile_units(const char *arch, const char *dir, int *compiled, const char *what)
{
    if (compiled) *compiled = 0;
    pthread_mutex_lock(&module_lock);
    bool have = load_nvrtc();
    unit_job *jobs = have ? make_jobs(-1, arch, dir) : NULL;
    int n = n_units;
    pthread_mutex_unlock(&module_lock);
    if (!have)
        return em_error(EM_ERR_UNSUPPORTED, "%s: cannot load NVRTC (tried %s)", what, nvrtc_tried);
    if (!jobs) return em_error(EM_ERR_OOM, "%s: out of memory", what);
    for (int i = 0; i < n; i++) /* a present file is kept (its name carries the source hash) */
        if (jobs[i].path[0]) jobs[i].cubin = read_file(jobs[i].path, &jobs[i].n);
    em_status st = compile_jobs(jobs, n);
    for (int i = 0; i < n && st == EM_OK && dir; i++)
        if (jobs[i].compiled && !write_file(jobs[i].path, jobs[i].cubin, jobs[i].n))
            st = em_error(EM_ERR_IO, "%s: cannot write %s", what, jobs[i].path);
    for (int i = 0; i < n && compiled; i++) *compiled += jobs[i].compiled;
    free_jobs(jobs, n);
    return st;
}

em_status cuda_compile_check(const char *arch)
{
    return compile_units(arch, NULL, NULL, "cuda_compile_check");
}

em_status em_cuda_build_cache(const char *arch, const char *dir, int *compiled)
{
    if (compiled) *compiled = 0;
    bool ok = arch && strncmp(arch, "sm_", 3) == 0 && arch[3] >= '1' && arch[3] <= '9';
    for (const char *p = ok ? arch + 4 : ""; *p && ok; p++)
        ok = (*p >= '0' && *p <= '9') || (p[1] == '\0' && (*p == 'a' || *p == 'f'));
    if (!ok)
        return em_error(EM_ERR_INVALID_ARG,
                        "em_cuda_build_cache: architecture '%s' is not of the "
                        "form sm_<digits>[a|f] (e.g. sm_90a for Hopper's wgmma kernels)",
                        arch ? arch : "(null)");
    char dbuf[900];
    if (!dir || !*dir) dir = cache_dir(dbuf, sizeof dbuf);
    if (!dir)
        return em_error(EM_ERR_INVALID_ARG, "em_cuda_build_cache: no directory given, no config "
                                            "key cache_dir and no HOME");
    mkdirs(dir);
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return em_error(EM_ERR_IO, "em_cuda_build_cache: cannot create the directory %s", dir);
    return compile_units(arch, dir, compiled, "em_cuda_build_cache");
}

/* Functions found so far, per device: open addressing on the name's hash. */
#define FN_SLOTS 2048
typedef struct fn_slot {
    uint64_t hash;
    char *name;
    CUfunction f;
    uint64_t uses; /* cuda_kernel calls that returned f */
} fn_slot;
static fn_slot fn_table[CUDA_MAX_DEVICES][FN_SLOTS];

/* The slot of device's table holding name (hash h), else the free slot where it would go, else
 * NULL (the table full). The caller holds module_lock. */
static fn_slot *fn_find(int device, const char *name, uint64_t h)
{
    fn_slot *tab = fn_table[device];
    size_t k = (size_t)h % FN_SLOTS;
    for (size_t probe = 0; probe < FN_SLOTS; probe++, k = (k + 1) % FN_SLOTS)
        if (!tab[k].name || (tab[k].hash == h && !strcmp(tab[k].name, name))) return &tab[k];
    return NULL;
}

CUfunction cuda_kernel(int device, const char *name, const char *what)
{
    if (cuda_enter(device, what) != EM_OK) return NULL;
    uint64_t h = fnv1a(0xcbf29ce484222325ull, name, strlen(name));
    pthread_mutex_lock(&module_lock);
    fn_slot *slot = fn_find(device, name, h);
    if (slot && slot->name) {
        CUfunction f = slot->f;
        slot->uses += f != NULL;
        pthread_mutex_unlock(&module_lock);
        return f;
    }
    em_status st = built[device] ? EM_OK : build_modules(device, what);
    CUfunction f = NULL;
    CUresult r = 1;
    for (int i = 0; st == EM_OK && i < n_units && !f; i++)
        r = cuda_drv.cuModuleGetFunction(&f, modules[device][i], name);
    if (f && slot) { /* remember it (the table only fills up with thousands of names) */
        slot->name = strdup(name);
        slot->hash = h;
        slot->f = slot->name ? f : NULL;
        slot->uses = slot->f != NULL;
    }
    pthread_mutex_unlock(&module_lock);
    if (st != EM_OK) return NULL;
    if (!f) {
        char call[128];
        snprintf(call, sizeof call, "cuModuleGetFunction(\"%s\")", name);
        cuda_fail(EM_ERR_INTERNAL, r, what, call, device);
    }
    return f;
}

uint64_t cuda_kernel_uses(int device, const char *name)
{
    if (device < 0 || device >= CUDA_MAX_DEVICES) return 0;
    pthread_mutex_lock(&module_lock);
    const fn_slot *slot = fn_find(device, name, fnv1a(0xcbf29ce484222325ull, name, strlen(name)));
    uint64_t n = slot && slot->name ? slot->uses : 0;
    pthread_mutex_unlock(&module_lock);
    return n;
}

em_status cuda_launch(int device, CUfunction f, int64_t n, void **params, const char *what)
{
    if (n <= 0) return EM_OK;
    const unsigned threads = 256;
    int64_t blocks = (n + threads - 1) / threads;
    if (blocks > 65536) blocks = 65536; /* the grid-stride loop covers the rest */
    CUresult r = cuda_drv.cuLaunchKernel(f, (unsigned)blocks, 1, 1, threads, 1, 1, 0,
                                         cuda_stream(device), params, NULL);
    if (r != 0) return cuda_fail(EM_ERR_DEVICE, r, what, "cuLaunchKernel", device);
    return EM_OK;
}

em_status cuda_launch_blocks(int device, CUfunction f, int64_t nblocks, void **params,
                             const char *what)
{
    if (nblocks <= 0) return EM_OK;
    if (nblocks > (1 << 20)) nblocks = 1 << 20; /* the kernels loop over the rest */
    CUresult r = cuda_drv.cuLaunchKernel(f, (unsigned)nblocks, 1, 1, 256, 1, 1, 0,
                                         cuda_stream(device), params, NULL);
    if (r != 0) return cuda_fail(EM_ERR_DEVICE, r, what, "cuLaunchKernel", device);
    return EM_OK;
}

em_status cuda_launch_grid(int device, CUfunction f, const unsigned grid[3],
                           const unsigned block[3], void **params, const char *what)
{
    if (!grid[0] || !grid[1] || !grid[2]) return EM_OK;
    CUresult r = cuda_drv.cuLaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                         0, cuda_stream(device), params, NULL);
    if (r != 0) return cuda_fail(EM_ERR_DEVICE, r, what, "cuLaunchKernel", device);
    return EM_OK;
}

em_status cuda_launch_grid_smem(int device, CUfunction f, const unsigned grid[3],
                                const unsigned block[3], unsigned smem, void **params,
                                const char *what)
{
    if (!grid[0] || !grid[1] || !grid[2]) return EM_OK;
    if (smem > 48 * 1024) {
        /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
        CUresult r = cuda_drv.cuFuncSetAttribute(f, 8, (int)smem);
        if (r != 0) return cuda_fail(EM_ERR_DEVICE, r, what, "cuFuncSetAttribute", device);
    }
    CUresult r = cuda_drv.cuLaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                         smem, cuda_stream(device), params, NULL);
    if (r != 0) return cuda_fail(EM_ERR_DEVICE, r, what, "cuLaunchKernel", device);
    return EM_OK;
}

cuda_module_origin cuda_module_origin_of(int device)
{
    if (device < 0 || device >= CUDA_MAX_DEVICES) return CUDA_MODULE_NONE;
    return origins[device];
}

const char *cuda_module_cache_path(int device)
{
    if (device < 0 || device >= CUDA_MAX_DEVICES) return "";
    return cache_paths[device];
}
