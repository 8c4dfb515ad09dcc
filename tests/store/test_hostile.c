/* Hostile model files and special paths: the corpus of tests/fixtures/store/hostile (written by
 * scripts/hostile_files.py: memo bombs, expanded and overlapping views, overflowing shapes,
 * duplicate names, huge lengths and indices, damaged archives) through every loading API; the
 * limits' configuration keys; FIFOs, devices and symbolic links as sources and destinations;
 * stale temporary files; 100k tensors; messages that name what is wrong with a file. */
#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ember/nn.h>
#include <ember/pt.h>
#include <ember/store.h>

#include "harness.h"
#include "store/store_impl.h"

static char fixture_dir[512], tmpdir[256];

static const char *hostile(const char *name)
{
    static char buf[2][700];
    static int k;
    k ^= 1;
    snprintf(buf[k], sizeof buf[k], "%s/store/hostile/%s", fixture_dir, name);
    return buf[k];
}

static const char *tmp_path(const char *name)
{
    static char buf[16][512]; /* callers keep up to 16 paths at once */
    static int k;
    k = (k + 1) % 16;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static unsigned char *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)sz + 1);
    *n = fread(b, 1, (size_t)sz, f);
    fclose(f);
    return b;
}

/* The outcome of one call: "ok" with a result, else an error containing `want`. */
static void expect(const char *what, const char *file, bool got, const char *want)
{
    if (strcmp(want, "ok") == 0) {
        CHECK(got && !em_failed(), "%s %s: loads (%s)", what, file, em_last_error());
    } else {
        CHECK(!got && em_failed() && strstr(em_last_error(), want), "%s %s: error with \"%s\": %s",
              what, file, want, em_failed() ? em_last_error() : "(no error)");
    }
    em_clear_error();
}

/* Every file of the corpus through the loader and inspector of its format, the from-memory
 * loader and the loaders that tell the format by content. */
static void test_corpus(void)
{
    char *list = h_read_file(hostile("expect.txt"));
    CHECK(list != NULL, "expect.txt readable");
    if (!list) return;
    int files = 0;
    for (char *line = strtok(list, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#') continue;
        char *name = line, *load = strchr(name, '|'), *insp = load ? strchr(load + 1, '|') : NULL;
        if (!insp) continue;
        *load++ = 0;
        *insp++ = 0;
        files++;
        const char *path = hostile(name);
        bool pt = strstr(name, ".pt") != NULL;
        em_tensor_dict *d = pt ? em_pt_load(path) : em_safetensors_load(path, NULL);
        expect("load", name, d != NULL, load);
        em_tensor_dict_free(d);
        em_store_info *info = pt ? em_pt_inspect(path) : em_safetensors_inspect(path);
        expect("inspect", name, info != NULL, insp);
        em_store_info_free(info);
        size_t n = 0;
        unsigned char *bytes = read_all(path, &n);
        d = pt ? em_pt_load_memory(bytes, n, name) : em_safetensors_load_memory(bytes, n, name);
        expect("load_memory", name, d != NULL, load);
        em_tensor_dict_free(d);
        free(bytes);
        /* by content, a file with the other format's extension loads */
        bool misnamed =
            strcmp(name, "safetensors_named.pt") == 0 || strcmp(name, "zip_named.safetensors") == 0;
        d = em_store_load(path);
        expect("em_store_load", name, d != NULL, misnamed ? "ok" : load);
        em_tensor_dict_free(d);
    }
    free(list);
    CHECK(files >= 30, "%d hostile files", files);
}

/* The files that load: what they hold, and that nothing was materialised. */
static void test_loaded_values(void)
{
    /* 8 GiB of one float: an expanded view of 4 bytes */
    em_tensor_dict *d = em_pt_load(hostile("expand_8g.pt"));
    em_tensor *w = em_tensor_dict_get(d, "w");
    CHECK(w && em_tensor_dim(w, 0) == (int64_t)1 << 31 && em_tensor_stride(w, 0) == 0,
          "expand_8g: [2^31] with stride 0");
    if (w) {
        int64_t last = ((int64_t)1 << 31) - 1;
        CHECK(em_get_f64(w, &last) == 0.0, "expand_8g: last element is the storage's");
    }
    em_tensor_dict_free(d);
    CHECK_OK("expand_8g");
    /* [2^20, 2^12, 4] with strides [0, 0, 1] over [0, 1, 2, 3]: w[i, j, k] = k */
    d = em_pt_load(hostile("expand_2d.pt"));
    w = em_tensor_dict_get(d, "w");
    CHECK(w && em_tensor_stride(w, 0) == 0 && em_tensor_stride(w, 1) == 0 &&
              em_tensor_stride(w, 2) == 1,
          "expand_2d: the expanded dims keep stride 0");
    if (w) {
        int64_t ix[3] = {12345, 4000, 3}, iy[3] = {0, 7, 2};
        CHECK(em_get_f64(w, ix) == 3.0 && em_get_f64(w, iy) == 2.0, "expand_2d: w[i, j, k] = k");
    }
    em_tensor_dict_free(d);
    CHECK_OK("expand_2d");
    /* a module takes an expanded tensor as its own contiguous memory */
    static const em_module_type flat = {"Flat", NULL, NULL, NULL};
    em_module *m = em_module_alloc(sizeof(em_module), &flat, EM_CPU);
    em_module_buffer(m, "w", em_zeros(EM_SHAPE(1000, 4), EM_F32, EM_CPU));
    CHECK(em_module_load(m, hostile("expand_small.pt"), NULL, NULL) == EM_OK,
          "expanded into module");
    CHECK_OK("expand_small into a module");
    w = em_module_get(m, "w");
    CHECK(w && em_tensor_is_contiguous(w) && em_tensor_stride(w, 0) == 4,
          "module's copy is contiguous");
    if (w) {
        int64_t ix[2] = {999, 3};
        CHECK(em_get_f64(w, ix) == 3.0, "expand_small: w[999, 3] = 3");
    }
    em_module_free(m);
    /* a module without parameters takes nothing, partially (its empty name list was sorted
     * from a NULL array) */
    m = em_module_alloc(sizeof(em_module), &flat, EM_CPU);
    em_load_report rep = {0};
    CHECK(em_module_load(m, hostile("good.pt"), &(em_load_opts){.partial = true}, &rep) == EM_OK,
          "partial load into an empty module");
    CHECK(rep.unexpected.n == 1 && rep.loaded.n == 0, "the file's tensor is unexpected");
    em_load_report_free(&rep);
    em_module_free(m);
    CHECK_OK("empty module");
    /* one tensor under 200 names is one tensor */
    d = em_pt_load(hostile("shared_tensor.pt"));
    CHECK(em_tensor_dict_count(d) == 200, "shared_tensor: 200 names");
    CHECK(em_tensor_dict_get(d, "t0") == em_tensor_dict_get(d, "t199"),
          "shared_tensor: the names share one tensor");
    em_tensor_dict_free(d);
    CHECK_OK("shared_tensor");
    /* overlapping strides: listed with their full size, refused when copied */
    em_store_info *info = em_pt_inspect(hostile("overlap_16g.pt"));
    const em_store_entry *e = em_store_info_entry(info, 0);
    CHECK(e && e->nbytes == (int64_t)1 << 34, "overlap_16g: 16 GiB listed");
    em_store_info_free(info);
    CHECK_OK("overlap_16g inspect");
}

/* A pickle {"k": [m, m]} of `levels` levels of shared lists: 2^levels paths to walk. */
static size_t memo_pickle(unsigned char *p, int levels)
{
    size_t n = 0;
    memcpy(p, "\x80\x02]q\x00", 5);
    n = 5;
    for (int i = 1; i <= levels; i++) {
        unsigned char lv[] = {'(', 'h', (unsigned char)(i - 1), 'h', (unsigned char)(i - 1),
                              'l', 'q', (unsigned char)i};
        memcpy(p + n, lv, sizeof lv);
        n += sizeof lv;
    }
    unsigned char tail[] = {'}', 'U', 1, 'k', 'h', (unsigned char)levels, 's', '.'};
    memcpy(p + n, tail, sizeof tail);
    return n + sizeof tail;
}

/* The budgets scale with store_budget_scale; the copy limit with store_expand_ratio and
 * store_expand_min_mb; bad values are refused by em_config_set. */
static void test_limit_keys(void)
{
    unsigned char p[256];
    size_t n = memo_pickle(p, 18); /* 262,144 items to visit */
    CHECK(pt_unpickle_memory(p, n, "shared lists") == EM_ERR_FORMAT, "2^18 shared paths refused");
    CHECK_ERR(EM_ERR_FORMAT, "work budget");
    em_config_set("store_budget_scale", "16");
    CHECK(pt_unpickle_memory(p, n, "shared lists") == EM_OK, "allowed with store_budget_scale 16");
    CHECK_OK("store_budget_scale 16");
    em_config_set("store_budget_scale", NULL);

    CHECK(em_config_set("store_expand_ratio", "0") == EM_ERR_INVALID_ARG, "ratio 0 refused");
    CHECK_ERR(EM_ERR_INVALID_ARG, "store_expand_ratio");
    CHECK(em_config_set("store_max_header", "abc") == EM_ERR_INVALID_ARG, "non-number refused");
    CHECK_ERR(EM_ERR_INVALID_ARG, "is not an integer from 1 to");
    em_config_set("store_max_header", "10");
    em_tensor_dict *d = em_safetensors_load(hostile("../ref.safetensors"), NULL);
    CHECK(d == NULL, "header over store_max_header refused");
    CHECK_ERR(EM_ERR_FORMAT, "store_max_header");
    em_config_set("store_max_header", NULL);
    d = em_safetensors_load(hostile("../ref.safetensors"), NULL);
    CHECK(d != NULL, "default header limit loads the reference file");
    em_tensor_dict_free(d);
    CHECK_OK("reference file");
}

/* Reading from a FIFO must not block (nothing ever writes to this one), and nothing but a
 * regular file is read. */
static void test_special_sources(void)
{
    const char *fifo = tmp_path("model.pt");
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
    em_tensor_dict *d = em_pt_load(fifo);
    CHECK(!d, "pt load of a FIFO");
    CHECK_ERR(EM_ERR_IO, "is a FIFO");
    CHECK(!em_pt_inspect(fifo), "pt inspect of a FIFO");
    CHECK_ERR(EM_ERR_IO, "is a FIFO");
    CHECK(!em_safetensors_load(fifo, NULL), "safetensors load of a FIFO");
    CHECK_ERR(EM_ERR_IO, "is a FIFO");
    CHECK(!em_safetensors_inspect(fifo), "safetensors inspect of a FIFO");
    CHECK_ERR(EM_ERR_IO, "is a FIFO");
    CHECK(!em_store_load(fifo), "store load of a FIFO");
    CHECK_ERR(EM_ERR_IO, "is a FIFO");
    em_checkpoint_parts parts = {0};
    CHECK(em_checkpoint_read(fifo, &parts) != EM_OK, "checkpoint read of a FIFO");
    CHECK_ERR(EM_ERR_IO, "is a FIFO");
    unlink(fifo);
    CHECK(!em_store_load(tmpdir), "a directory");
    CHECK_ERR(EM_ERR_IO, "is a directory");
    CHECK(!em_safetensors_load("/dev/zero", NULL), "a device");
    CHECK_ERR(EM_ERR_IO, "character device");
}

static em_tensor_dict *small_dict(double v)
{
    em_tensor_dict *d = em_tensor_dict_new();
    em_tensor *t = em_from_f64((double[]){v, v + 1}, EM_SHAPE(2));
    em_tensor_dict_add(d, "w", t);
    em_release(t);
    return d;
}

static double first_value(const char *path)
{
    em_tensor_dict *d = em_safetensors_load(path, NULL);
    int64_t zero = 0;
    double v = d ? em_get_f64(em_tensor_dict_get(d, "w"), &zero) : -1;
    em_tensor_dict_free(d);
    return v;
}

static int count_prefix(const char *prefix)
{
    int n = 0;
    DIR *dir = opendir(tmpdir);
    for (struct dirent *e; dir && (e = readdir(dir));)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
    if (dir) closedir(dir);
    return n;
}

/* Saving never replaces a device, FIFO or directory; through a symbolic link it writes the file
 * the link names and keeps the link; abandoned temporary files are removed, a locked one
 * (a save in progress) is not. */
static void test_save_destinations(void)
{
    em_tensor_dict *d = small_dict(5);
    CHECK(em_safetensors_save("/dev/null", d, NULL) == EM_ERR_IO, "save to /dev/null refused");
    CHECK_ERR(EM_ERR_IO, "character device");
    struct stat st;
    CHECK(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode), "/dev/null is still a device");
    const char *link = tmp_path("null.safetensors");
    CHECK(symlink("/dev/null", link) == 0, "symlink to /dev/null");
    CHECK(em_safetensors_save(link, d, NULL) == EM_ERR_IO, "save through a link to a device");
    CHECK_ERR(EM_ERR_IO, "character device");
    CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode), "the link stays");
    CHECK(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode), "/dev/null is still a device");
    unlink(link);
    const char *fifo = tmp_path("fifo.safetensors");
    mkfifo(fifo, 0600);
    CHECK(em_safetensors_save(fifo, d, NULL) == EM_ERR_IO, "save to a FIFO refused");
    CHECK_ERR(EM_ERR_IO, "FIFO");
    CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode), "the FIFO stays");
    unlink(fifo);
    CHECK(em_safetensors_save(tmpdir, d, NULL) == EM_ERR_IO, "save to a directory refused");
    CHECK_ERR(EM_ERR_IO, "directory");

    /* a link to a regular file: the file is replaced, the link kept */
    const char *real = tmp_path("real.safetensors"), *alias = tmp_path("alias.safetensors");
    em_safetensors_save(real, d, NULL);
    symlink("real.safetensors", alias);
    em_tensor_dict *d2 = small_dict(7);
    CHECK(em_safetensors_save(alias, d2, NULL) == EM_OK, "save through a link");
    CHECK_OK("save through a link");
    CHECK(lstat(alias, &st) == 0 && S_ISLNK(st.st_mode), "the link is still a link");
    CHECK(first_value(real) == 7, "the linked file has the new values");
    const char *dangling = tmp_path("dangling.safetensors");
    symlink("missing.safetensors", dangling);
    CHECK(em_safetensors_save(dangling, d2, NULL) == EM_ERR_IO, "dangling link refused");
    CHECK_ERR(EM_ERR_IO, "missing file");
    unlink(dangling);

    /* abandoned temporaries go, a locked one stays */
    const char *stale = tmp_path(".real.safetensors.AbC123");
    const char *busy = tmp_path(".real.safetensors.Zz9999");
    const char *other = tmp_path(".real.safetensors.keep");
    FILE *f = fopen(stale, "w");
    fclose(f);
    f = fopen(other, "w");
    fclose(f);
    int fd = open(busy, O_CREAT | O_WRONLY, 0600);
    CHECK(fd >= 0 && flock(fd, LOCK_EX) == 0, "a save in progress holds its lock");
    CHECK(em_safetensors_save(real, d, NULL) == EM_OK, "save next to temporaries");
    CHECK_OK("save next to temporaries");
    CHECK(access(stale, F_OK) != 0, "the abandoned temporary file is removed");
    CHECK(access(busy, F_OK) == 0, "the locked temporary file stays");
    CHECK(access(other, F_OK) == 0, "a file not named like a temporary stays");
    CHECK(count_prefix(".real.safetensors.") == 2, "no temporary of the last save is left");
    close(fd);
    unlink(busy);
    unlink(other);
    unlink(real);
    unlink(alias);
    em_tensor_dict_free(d);
    em_tensor_dict_free(d2);
}

/* Messages say what is wrong with the file the user named. */
static void test_messages(void)
{
    static const em_module_type flat = {"Flat", NULL, NULL, NULL};
    em_module *m = em_module_alloc(sizeof(em_module), &flat, EM_CPU);
    CHECK(em_module_load(m, "/nonexistent/model.pt", NULL, NULL) == EM_ERR_IO, "missing file");
    CHECK(strstr(em_last_error(),
                 "em_module_load: cannot open /nonexistent/model.pt: no such file") &&
              !strstr(em_last_error(), "safetensors"),
          "missing file named as such: %s", em_last_error());
    em_clear_error();
    CHECK(em_module_load(m, hostile("truncated.pt"), NULL, NULL) == EM_ERR_FORMAT, "truncated");
    CHECK_ERR(EM_ERR_FORMAT, "truncated or damaged zip archive");
    CHECK(em_module_load(m, hostile("legacy.pt"), NULL, NULL) == EM_ERR_FORMAT, "legacy");
    CHECK_ERR(EM_ERR_FORMAT, "legacy (pre-1.6) torch.save file");
    CHECK(!em_pt_load("/nonexistent/model.pt"), "missing .pt");
    CHECK_ERR(EM_ERR_IO, "em_pt_load: cannot open /nonexistent/model.pt: no such file");
    CHECK(!em_safetensors_load(hostile("good.pt"), NULL), "a .pt given to safetensors");
    CHECK_ERR(EM_ERR_FORMAT, "not a safetensors file: it is a zip archive");
    const char *empty = tmp_path("empty.pt");
    FILE *f = fopen(empty, "w");
    fclose(f);
    CHECK(!em_store_load(empty), "empty file");
    CHECK_ERR(EM_ERR_FORMAT, "the file is empty");
    unlink(empty);
    em_module_free(m);
}

/* 100k tiny tensors: loaded (hash-indexed names), checked, and loaded into a 100k-entry
 * module (hash-indexed registration and lookup). */
static void test_many_tensors(void)
{
    const int n = 100000;
    size_t cap = (size_t)n * 80 + 64, len = 0;
    char *hdr = malloc(cap);
    len += (size_t)snprintf(hdr, cap, "{");
    for (int i = 0; i < n; i++)
        len +=
            (size_t)snprintf(hdr + len, cap - len,
                             "%s\"t%d\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[%d,%d]}",
                             i ? "," : "", i, 4 * i, 4 * i + 4);
    hdr[len++] = '}';
    while ((8 + len) % 8) hdr[len++] = ' ';
    size_t total = 8 + len + 4 * (size_t)n;
    unsigned char *file = malloc(total);
    for (int b = 0; b < 8; b++) file[b] = (unsigned char)((uint64_t)len >> (8 * b));
    memcpy(file + 8, hdr, len);
    for (int i = 0; i < n; i++) memcpy(file + 8 + len + 4 * (size_t)i, &i, 4);
    free(hdr);
    const char *path = tmp_path("many.safetensors");
    FILE *f = fopen(path, "wb");
    fwrite(file, 1, total, f);
    fclose(f);
    free(file);

    em_tensor_dict *d = em_safetensors_load(path, NULL);
    CHECK_OK("100k tensors load");
    CHECK(em_tensor_dict_count(d) == n, "100k tensors");
    bool right = true;
    for (int i = 0; d && i < n; i += 997) {
        char nm[16];
        snprintf(nm, sizeof nm, "t%d", i);
        em_tensor *t = em_tensor_dict_get(d, nm);
        right = right && t && em_item_i64(t) == i && strcmp(em_tensor_dict_name_at(d, i), nm) == 0;
    }
    CHECK(right, "names found and values right");
    CHECK(em_tensor_dict_add(d, "t77777", em_tensor_dict_get(d, "t1")) == EM_ERR_INVALID_ARG,
          "duplicate among 100k refused");
    CHECK_ERR(EM_ERR_INVALID_ARG, "duplicate name");
    em_tensor_dict_free(d);

    static const em_module_type flat = {"Flat", NULL, NULL, NULL};
    em_module *m = em_module_alloc(sizeof(em_module), &flat, EM_CPU);
    for (int i = 0; i < n; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "t%d", i);
        em_module_buffer(m, nm, em_full(EM_SHAPE(1), -1, EM_I32, EM_CPU));
    }
    CHECK_OK("100k buffers registered");
    CHECK(em_module_buffer(m, "t5", em_zeros(EM_SHAPE(1), EM_I32, EM_CPU)) == NULL,
          "a taken name refused");
    CHECK_ERR(EM_ERR_INVALID_ARG, "already registered");
    em_load_report rep = {0};
    CHECK(em_module_load(m, path, NULL, &rep) == EM_OK, "100k entries loaded into a module");
    CHECK_OK("module load");
    CHECK(rep.loaded.n == n, "all %d loaded", rep.loaded.n);
    CHECK(em_item_i64(em_module_get(m, "t54321")) == 54321, "a loaded value");
    em_load_report_free(&rep);
    em_module_free(m);
    unlink(path);
}

int main(void)
{
    h_init();
    em_pt_register(); /* em_module_load reads .pt files too */
    const char *dir = getenv("EMBER_FIXTURES");
    snprintf(fixture_dir, sizeof fixture_dir, "%s", dir ? dir : "tests/fixtures");
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ember_hostile_XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    test_corpus();
    test_loaded_values();
    test_limit_keys();
    test_special_sources();
    test_save_destinations();
    test_messages();
    test_many_tensors();
    rmdir(tmpdir);
    return h_finish();
}
