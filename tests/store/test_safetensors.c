/* safetensors: bit-exact round trips of every dtype and edge shape, metadata, the reference
 * fixture written by scripts/fixtures_store.py, the malformed-header corpus (ST-02..05), saving
 * over a mapped file (ST-06), a writer killed mid-save, and allocation failures. */
#include <dirent.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ember/store.h>

#include "harness.h"

static char tmpdir[256];

static const char *tmp_path(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

/* Row-major bytes of t in its own dtype (malloc'd). */
static unsigned char *read_file(const char *path, size_t *n)
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

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    fwrite(p, 1, n, f);
    fclose(f);
}

/* ---- round trips ------------------------------------------------------------------------- */

static void test_round_trip(void)
{
    em_shape shapes[] = {EM_SCALAR, EM_SHAPE(0), EM_SHAPE(1), EM_SHAPE(3, 5), EM_SHAPE(2, 0, 4)};
    em_tensor_dict *d = em_tensor_dict_new();
    char name[64];
    int count = 0;
    for (int dt = 0; dt < EM_DTYPE_COUNT; dt++) {
        for (int s = 0; s < 5; s++) {
            double lo = dt == EM_U8 ? 0 : -100, hi = dt == EM_BOOL ? 2 : 100;
            h_layout lay = shapes[s].rank >= 2 ? H_TRANSPOSED : H_CONTIG;
            em_tensor *t = h_rand(shapes[s], (em_dtype)dt, lay, lo, hi, NULL);
            snprintf(name, sizeof name, "%s.shape%d", em_dtype_name((em_dtype)dt), s);
            CHECK(em_tensor_dict_add(d, name, t) == EM_OK, "add %s", name);
            em_release(t);
            count++;
        }
    }
    CHECK_OK("building dict");
    em_tensor_dict_set_meta(d, "format", "pt");
    em_tensor_dict_set_meta(d, "note", "quote\" back\\slash\nnewline ünïcödé");
    const char *extra[] = {"format", "ember", "epoch", "3", NULL};
    const char *path = tmp_path("rt.safetensors");
    CHECK(em_safetensors_save(path, d, extra) == EM_OK, "save: %s", em_last_error());
    CHECK_OK("save");

    /* Layout: header length multiple of 8 at the start, JSON begins with '{', padding spaces. */
    size_t n;
    unsigned char *raw = read_file(path, &n);
    uint64_t hn = 0;
    for (int i = 7; i >= 0; i--) hn = (hn << 8) | raw[i];
    CHECK((8 + hn) % 8 == 0 && raw[8] == '{', "header length %llu padded", (unsigned long long)hn);
    CHECK(raw[8 + hn - 1] == '}' || raw[8 + hn - 1] == ' ', "header ends with } or spaces");
    free(raw);

    em_safetensors_opts copy = {.copy = true};
    for (int mode = 0; mode < 2; mode++) {
        em_tensor_dict *l = em_safetensors_load(path, mode ? &copy : NULL);
        CHECK_OK("load");
        CHECK(em_tensor_dict_count(l) == count, "count %lld", (long long)em_tensor_dict_count(l));
        int same = 0;
        for (int64_t i = 0; i < em_tensor_dict_count(d); i++) {
            const char *nm = em_tensor_dict_name_at(d, i);
            bool ok = h_same_bytes(em_tensor_dict_tensor_at(d, i), em_tensor_dict_get(l, nm));
            CHECK(ok, "%s mode %d bit-identical", nm, mode);
            same += ok;
        }
        CHECK(same == count, "all %d tensors identical", count);
        /* Sorted by descending alignment, then name. */
        bool sorted = true;
        for (int64_t i = 1; i < em_tensor_dict_count(l); i++) {
            size_t a = em_dtype_size(em_tensor_dtype(em_tensor_dict_tensor_at(l, i - 1)));
            size_t b = em_dtype_size(em_tensor_dtype(em_tensor_dict_tensor_at(l, i)));
            if (a < b || (a == b && strcmp(em_tensor_dict_name_at(l, i - 1),
                                           em_tensor_dict_name_at(l, i)) > 0))
                sorted = false;
        }
        CHECK(sorted, "file order: alignment then name");
        const char *fmt = em_tensor_dict_get_meta(l, "format");
        const char *note = em_tensor_dict_get_meta(l, "note");
        const char *epoch = em_tensor_dict_get_meta(l, "epoch");
        CHECK(fmt && strcmp(fmt, "ember") == 0, "extra metadata wins: %s", fmt ? fmt : "(null)");
        CHECK(note && strcmp(note, em_tensor_dict_get_meta(d, "note")) == 0, "metadata escapes");
        CHECK(epoch && strcmp(epoch, "3") == 0, "epoch metadata");
        CHECK(em_tensor_dict_meta_count(l) == 3, "3 metadata pairs");
        em_tensor_dict_free(l);
    }
    /* Inspect lists without data. */
    em_store_info *info = em_safetensors_inspect(path);
    CHECK_OK("inspect");
    CHECK(em_store_info_count(info) == count, "inspect count");
    CHECK(em_store_info_meta_count(info) == 3, "inspect metadata");
    em_store_info_free(info);
    /* The in-memory reader agrees. */
    raw = read_file(path, &n);
    em_tensor_dict *m = em_safetensors_load_memory(raw, n, "rt");
    CHECK_OK("load_memory");
    CHECK(em_tensor_dict_count(m) == count, "memory count");
    em_tensor_dict_free(m);
    free(raw);
    /* A loaded tensor outlives its dict (the mapping is refcounted). */
    em_tensor_dict *l = em_safetensors_load(path, NULL);
    em_tensor *keep = em_retain(em_tensor_dict_get(l, "f32.shape3"));
    em_tensor_dict_free(l);
    CHECK(h_same_bytes(keep, em_tensor_dict_get(d, "f32.shape3")), "tensor outlives dict");
    em_release(keep);
    em_tensor_dict_free(d);
}

/* ---- the reference fixture --------------------------------------------------------------- */

static void test_fixture(void)
{
    const char *dir = getenv("EMBER_FIXTURES");
    char path[600];
    snprintf(path, sizeof path, "%s/store/ref.safetensors", dir ? dir : "tests/fixtures");
    em_tensor_dict *d = em_safetensors_load(path, NULL);
    CHECK_OK("load reference fixture");
    if (!d) return;
    CHECK(em_tensor_dict_count(d) == 4, "fixture has 4 tensors");
    /* Written by numpy: a = arange(12, f32).reshape(3,4); b = arange(5, i64) - 2;
     * c = [1, 0.5, -2] as f16; e = [True, False] */
    double a[12], b[5] = {-2, -1, 0, 1, 2}, c[3] = {1, 0.5, -2}, e[2] = {1, 0};
    for (int i = 0; i < 12; i++) a[i] = i;
    h_check_tensor("fixture a", em_tensor_dict_get(d, "a"), a, EM_SHAPE(3, 4), 0, 0);
    h_check_tensor("fixture b", em_tensor_dict_get(d, "b"), b, EM_SHAPE(5), 0, 0);
    h_check_tensor("fixture c", em_tensor_dict_get(d, "c"), c, EM_SHAPE(3), 0, 0);
    h_check_tensor("fixture e", em_tensor_dict_get(d, "e"), e, EM_SHAPE(2), 0, 0);
    CHECK(em_tensor_dtype(em_tensor_dict_get(d, "c")) == EM_F16, "c is f16");
    const char *who = em_tensor_dict_get_meta(d, "writer");
    CHECK(who && strcmp(who, "fixtures_store.py") == 0, "fixture metadata");
    /* Our writer produces the same bytes as the independent one. */
    const char *out = tmp_path("ref_again.safetensors");
    em_safetensors_save(out, d, NULL);
    CHECK_OK("re-save fixture");
    size_t n1, n2;
    unsigned char *x = read_file(path, &n1), *y = read_file(out, &n2);
    CHECK(x && y && n1 == n2 && memcmp(x, y, n1) == 0, "re-saved fixture is byte-identical");
    free(x);
    free(y);
    em_tensor_dict_free(d);
}

/* ---- malformed files --------------------------------------------------------------------- */

/* An image: 8-byte length (hlen, or the real one when hlen == UINT64_MAX - 1), header, data. */
static unsigned char *image(const char *header, uint64_t hlen, size_t ndata, size_t *n)
{
    size_t h = strlen(header);
    if (hlen == UINT64_MAX - 1) hlen = h;
    *n = 8 + h + ndata;
    unsigned char *b = calloc(1, *n + 1);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(hlen >> (8 * i));
    memcpy(b + 8, header, h);
    for (size_t i = 0; i < ndata; i++) b[8 + h + i] = (unsigned char)i;
    return b;
}

#define REAL (UINT64_MAX - 1)

static void expect_bad(const char *what, const unsigned char *b, size_t n, const char *needle)
{
    em_tensor_dict *d = em_safetensors_load_memory(b, n, what);
    CHECK(d == NULL, "%s: rejected", what);
    em_tensor_dict_free(d);
    h_check_err_(EM_ERR_FORMAT, needle, __FILE__, __LINE__);
    /* The same through a real file and the mmap path, and through inspect. */
    const char *p = tmp_path("bad.safetensors");
    write_file(p, b, n);
    d = em_safetensors_load(p, NULL);
    CHECK(d == NULL, "%s: rejected from file", what);
    em_tensor_dict_free(d);
    CHECK(strstr(em_last_error(), "bad.safetensors") != NULL, "%s: message names the file: %s",
          what, em_last_error());
    h_check_err_(EM_ERR_FORMAT, needle, __FILE__, __LINE__);
    em_store_info *info = em_safetensors_inspect(p);
    CHECK(info == NULL, "%s: inspect rejects", what);
    em_store_info_free(info);
    h_check_err_(EM_ERR_FORMAT, needle, __FILE__, __LINE__);
}

static void bad(const char *what, const char *header, uint64_t hlen, size_t ndata,
                const char *needle)
{
    size_t n;
    unsigned char *b = image(header, hlen, ndata, &n);
    expect_bad(what, b, n, needle);
    free(b);
}

static void test_malformed(void)
{
    const char *ok1 = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    unsigned char seven[7] = {1, 0, 0, 0, 0, 0, 0};
    expect_bad("7-byte file", seven, 7, "shorter than the 8-byte");
    bad("N=0", "", 0, 0, "header length is 0");
    size_t hl = strlen(ok1);
    bad("N past EOF", ok1, hl + 9, 8, "past the end of the file");
    bad("N=2^64-1", ok1, UINT64_MAX, 8, "overflows");
    bad("N over cap", ok1, 100000001, 8, "exceeds the limit");
    bad("overlap",
        "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"y\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
        REAL, 12, "overlaps");
    bad("gap",
        "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"y\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}",
        REAL, 20, "gap");
    bad("begin > end", "{\"x\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,0]}}", REAL, 4,
        "begin 4 > end 0");
    bad("out of bounds", ok1, REAL, 4, "past the end");
    bad("trailing byte", ok1, REAL, 9, "trailing");
    bad("size != numel*elt", "{\"x\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}",
        REAL, 8, "needs 12");
    bad("numel overflow",
        "{\"x\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
        "\"data_offsets\":[0,8]}}",
        REAL, 8, "overflows");
    bad("byte size overflow",
        "{\"x\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904],\"data_offsets\":[0,8]}}", REAL,
        8, "overflows");
    bad("duplicate key",
        "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
        "\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
        REAL, 8, "duplicate key");
    bad("non-string metadata",
        "{\"__metadata__\":{\"a\":1},\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"
        "}",
        REAL, 8, "not a string");
    {
        size_t n;
        char h[80];
        snprintf(h, sizeof h, "%s", ok1);
        unsigned char *b = image(h, strlen(h) + 4, 8, &n);
        /* NUL padding: the header declares 4 more bytes, which are zero. */
        unsigned char *b2 = calloc(1, n + 4);
        memcpy(b2, b, 8 + strlen(h));
        memcpy(b2 + 8 + strlen(h) + 4, b + 8 + strlen(h), 8);
        expect_bad("NUL padding", b2, n + 4, "NUL");
        free(b);
        free(b2);
    }
    bad("invalid UTF-8", "{\"x\xff\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
        REAL, 8, "UTF-8");
    bad("overlong UTF-8",
        "{\"x\xc0\xaf\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", REAL, 8,
        "UTF-8");
    {
        size_t depth = 100000;
        char *h = malloc(depth * 2 + 64);
        size_t k = 0;
        k += (size_t)sprintf(h, "{\"__metadata__\":");
        for (size_t i = 0; i < depth; i++) h[k++] = '[';
        for (size_t i = 0; i < depth; i++) h[k++] = ']';
        h[k++] = '}';
        h[k] = 0;
        bad("depth bomb", h, REAL, 0, "deeper than 64");
        free(h);
    }
    bad("unknown dtype", "{\"x\":{\"dtype\":\"Q7\",\"shape\":[2],\"data_offsets\":[0,8]}}", REAL, 8,
        "unknown dtype");
    bad("unsupported dtype", "{\"x\":{\"dtype\":\"U16\",\"shape\":[4],\"data_offsets\":[0,8]}}",
        REAL, 8, "not supported");
    bad("leading space", " {}", REAL, 0, "begin with '{'");
    bad("not an object", "{\"x\":[1,2]}", REAL, 0, "not a JSON object");
    bad("missing field", "{\"x\":{\"dtype\":\"F32\",\"shape\":[2]}}", REAL, 0, "data_offsets");
    bad("negative dim", "{\"x\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", REAL,
        8, "non-negative");
    bad("rank 9", "{\"x\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}",
        REAL, 1, "rank 9");
    bad("bad JSON", "{\"x\":{\"dtype\":\"F32\",,}}", REAL, 0, "invalid JSON");
    bad("unterminated", "{\"x", REAL, 0, "unterminated");
    bad("lone surrogate", "{\"\\ud800\":1}", REAL, 0, "surrogate");
    bad("escaped NUL", "{\"a\\u0000\":{}}", REAL, 0, "NUL");

    /* Accepted: unsorted-but-contiguous offsets, empty header object, trailing-space padding. */
    size_t n;
    unsigned char *b = image("{\"y\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,4]},"
                             "\"x\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}   ",
                             REAL, 4, &n);
    em_tensor_dict *d = em_safetensors_load_memory(b, n, "unsorted");
    CHECK_OK("unsorted-but-contiguous accepted");
    double x[2] = {0, 1}, y[2] = {2, 3};
    if (d) {
        h_check_tensor("x", em_tensor_dict_get(d, "x"), x, EM_SHAPE(2), 0, 0);
        h_check_tensor("y", em_tensor_dict_get(d, "y"), y, EM_SHAPE(2), 0, 0);
    }
    em_tensor_dict_free(d);
    free(b);
    b = image("{}", REAL, 0, &n);
    d = em_safetensors_load_memory(b, n, "empty");
    CHECK_OK("empty header accepted");
    CHECK(d && em_tensor_dict_count(d) == 0, "no tensors");
    em_tensor_dict_free(d);
    free(b);
}

/* ST-05: F32 data at an offset 2 mod 4 loads through the copy path. */
static void test_misaligned(void)
{
    const char *h = "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
                    "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[2,10]}}";
    size_t hl = strlen(h), n = 8 + hl + 10;
    unsigned char *b = calloc(1, n);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, h, hl);
    float v[2] = {1.5f, -3.25f};
    b[8 + hl] = 7;
    b[8 + hl + 1] = 9;
    memcpy(b + 8 + hl + 2, v, 8);
    const char *p = tmp_path("misaligned.safetensors");
    write_file(p, b, n);
    em_tensor_dict *d = em_safetensors_load(p, NULL);
    CHECK_OK("misaligned load");
    double e[2] = {1.5, -3.25}, a[2] = {7, 9};
    if (d) {
        h_check_tensor("misaligned f32", em_tensor_dict_get(d, "b"), e, EM_SHAPE(2), 0, 0);
        h_check_tensor("u8 before it", em_tensor_dict_get(d, "a"), a, EM_SHAPE(2), 0, 0);
        CHECK((uintptr_t)em_tensor_data(em_tensor_dict_get(d, "b")) % 4 == 0, "aligned copy");
    }
    em_tensor_dict_free(d);
    free(b);
}

/* ST-06: saving over a file that a loaded dict maps leaves the loaded tensors intact. */
static void test_save_over_mapped(void)
{
    const char *p = tmp_path("over.safetensors");
    double v1[6] = {1, 2, 3, 4, 5, 6}, v2[6] = {-1, -2, -3, -4, -5, -6};
    em_tensor_dict *d = em_tensor_dict_new();
    em_tensor *t = em_from_f64(v1, EM_SHAPE(2, 3));
    em_tensor_dict_add(d, "w", t);
    em_release(t);
    em_safetensors_save(p, d, NULL);
    em_tensor_dict_free(d);
    em_tensor_dict *old = em_safetensors_load(p, NULL);
    CHECK_OK("load before overwrite");

    d = em_tensor_dict_new();
    t = em_from_f64(v2, EM_SHAPE(2, 3));
    em_tensor_dict_add(d, "w", t);
    em_release(t);
    CHECK(em_safetensors_save(p, d, NULL) == EM_OK, "save over mapped file");
    em_tensor_dict_free(d);
    h_check_tensor("old mapping intact", em_tensor_dict_get(old, "w"), v1, EM_SHAPE(2, 3), 0, 0);
    em_tensor_dict *nw = em_safetensors_load(p, NULL);
    CHECK_OK("load after overwrite");
    h_check_tensor("new file", em_tensor_dict_get(nw, "w"), v2, EM_SHAPE(2, 3), 0, 0);
    em_tensor_dict_free(nw);
    em_tensor_dict_free(old);
}

static int count_temps(const char *prefix)
{
    DIR *dir = opendir(tmpdir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dir)))
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
    closedir(dir);
    return n;
}

static void remove_temps(const char *prefix)
{
    DIR *dir = opendir(tmpdir);
    struct dirent *e;
    while ((e = readdir(dir)))
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) unlink(tmp_path(e->d_name));
    closedir(dir);
}

static void on_xfsz(int sig)
{
    (void)sig;
    raise(SIGKILL); /* die mid-write, like a power cut or the OOM killer */
}

/* A writer killed while saving: the previous file survives whole and no partial file replaces
 * it. The child's file-size limit makes the kill land inside write() deterministically. The
 * same limit with SIGXFSZ ignored makes write() fail: the save reports it and cleans up. */
static void test_killed_writer(void)
{
    const char *p = tmp_path("crash.safetensors");
    double v[4] = {1, 2, 3, 4};
    em_tensor_dict *d = em_tensor_dict_new();
    em_tensor *t = em_from_f64(v, EM_SHAPE(4));
    em_tensor_dict_add(d, "small", t);
    em_release(t);
    em_safetensors_save(p, d, NULL);
    em_tensor_dict_free(d);
    CHECK_OK("first save");

    for (int mode = 0; mode < 2; mode++) {
        pid_t pid = fork();
        if (pid == 0) {
            struct rlimit rl = {1 << 20, 1 << 20};
            setrlimit(RLIMIT_FSIZE, &rl);
            signal(SIGXFSZ, mode == 0 ? on_xfsz : SIG_IGN);
            em_tensor_dict *big = em_tensor_dict_new();
            em_tensor *z = em_zeros(EM_SHAPE(1 << 20), EM_F32, EM_CPU); /* 4 MiB */
            em_tensor_dict_add(big, "big", z);
            em_status s = em_safetensors_save(p, big, NULL);
            _exit(s == EM_ERR_IO ? 3 : 4);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        if (mode == 0)
            CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child killed mid-write");
        else
            CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 3, "write error reported as I/O");
        em_tensor_dict *l = em_safetensors_load(p, NULL);
        CHECK_OK("previous file loads");
        CHECK(l && em_tensor_dict_count(l) == 1, "previous file intact");
        if (l)
            h_check_tensor("previous values", em_tensor_dict_get(l, "small"), v, EM_SHAPE(4), 0, 0);
        em_tensor_dict_free(l);
        if (mode == 0) {
            CHECK(count_temps(".crash.safetensors.") == 1, "killed writer left only its temp file");
            /* the next save to the same path removes it (its writer's lock died with it) */
            em_tensor_dict *again = em_safetensors_load(p, &(em_safetensors_opts){.copy = true});
            CHECK(em_safetensors_save(p, again, NULL) == EM_OK, "save after the kill");
            em_tensor_dict_free(again);
            CHECK(count_temps(".crash.safetensors.") == 0, "the killed writer's temp file removed");
        } else
            CHECK(count_temps(".crash.safetensors.") == 0, "failed save removed its temp file");
        remove_temps(".crash.safetensors.");
    }
}

/* Allocation failures at every step of a load leave no leak and a clean error. */
static void test_alloc_failures(void)
{
    const char *p = tmp_path("oom.safetensors");
    em_tensor_dict *d = em_tensor_dict_new();
    for (int i = 0; i < 4; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "t%d", i);
        em_tensor *t = em_ones(EM_SHAPE(3, i + 1), i % 2 ? EM_F16 : EM_I32, EM_CPU);
        em_tensor_dict_add(d, nm, t);
        em_release(t);
    }
    em_tensor_dict_set_meta(d, "k", "v");
    em_safetensors_save(p, d, NULL);
    em_tensor_dict_free(d);
    int failures = 0;
    for (int k = 1; k < 60; k++) {
        em_mem_fail_at(k);
        em_tensor_dict *l =
            em_safetensors_load(p, k % 2 ? NULL : &(em_safetensors_opts){.copy = true});
        em_mem_fail_at(0);
        if (!l) {
            failures++;
            CHECK(em_failed(), "failure %d records an error", k);
        }
        em_tensor_dict_free(l);
        em_clear_error();
    }
    CHECK(failures > 5, "allocation failures exercised (%d)", failures);
}

/* A dict holds its own reference: a scope-owned tensor added to a dict freed inside the scope is
 * released once by each, and nothing stays alive. */
static void test_dict_scope(void)
{
    int64_t live = em_live_tensors();
    em_scope_begin();
    em_tensor_dict *d = em_tensor_dict_new();
    CHECK(em_tensor_dict_add(d, "a", em_rand(EM_SHAPE(2), EM_F32, EM_CPU)) == EM_OK, "add: %s",
          em_last_error());
    em_tensor_dict_free(d);
    em_scope_end();
    CHECK(em_live_tensors() == live, "dict in a scope: %lld tensors left",
          (long long)(em_live_tensors() - live));
}

static void test_bad_args(void)
{
    CHECK(em_safetensors_load(NULL, NULL) == NULL, "NULL path");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_safetensors_load");
    CHECK(em_safetensors_load(tmp_path("missing.safetensors"), NULL) == NULL, "missing file");
    CHECK_ERR(EM_ERR_IO, "missing.safetensors");
    em_tensor_dict *d = em_tensor_dict_new();
    em_tensor *t = em_scalar(1, EM_F32, EM_CPU);
    CHECK(em_tensor_dict_add(d, "a", t) == EM_OK, "add");
    CHECK(em_tensor_dict_add(d, "a", t) == EM_ERR_INVALID_ARG, "duplicate add");
    CHECK_ERR(EM_ERR_INVALID_ARG, "duplicate name");
    CHECK(em_tensor_dict_add(d, "__metadata__", t) == EM_OK, "reserved name added");
    CHECK(em_safetensors_save(tmp_path("r.safetensors"), d, NULL) == EM_ERR_INVALID_ARG,
          "reserved name refused on save");
    CHECK_ERR(EM_ERR_INVALID_ARG, "reserved");
    em_release(t);
    em_tensor_dict_free(d);
    d = em_tensor_dict_new();
    CHECK(em_safetensors_save("/nonexistent-dir/x.safetensors", d, NULL) == EM_ERR_IO,
          "unwritable directory");
    CHECK_ERR(EM_ERR_IO, "x.safetensors");
    em_tensor_dict_free(d);
}

int main(void)
{
    h_init();
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ember_st_XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    test_round_trip();
    test_fixture();
    test_malformed();
    test_misaligned();
    test_save_over_mapped();
    test_killed_writer();
    test_alloc_failures();
    test_dict_scope();
    test_bad_args();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return h_finish();
}
