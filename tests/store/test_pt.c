/* PyTorch .pt import: state dicts written by torch.save (every dtype, nested checkpoints,
 * views sharing storage) against expectations written independently as safetensors, the
 * malicious pickle (PT-02), size cross-checks (PT-03), zip hardening (PT-04, PT-05) and pickle
 * interpreter limits. */
#include <string.h>
#include <unistd.h>
#include <zip.h>

#include <ember/pt.h>

#include "harness.h"
#include "store/store_impl.h"

static char fixture_dir[512];

static const char *fixture(const char *name)
{
    static char buf[2][700];
    static int k;
    k ^= 1;
    snprintf(buf[k], sizeof buf[k], "%s/store/%s", fixture_dir, name);
    return buf[k];
}

/* Loads name.pt and compares it with name.expect.safetensors tensor by tensor. */
static void compare_fixture(const char *name)
{
    char pt[64], st[64];
    snprintf(pt, sizeof pt, "%s.pt", name);
    snprintf(st, sizeof st, "%s.expect.safetensors", name);
    em_tensor_dict *got = em_pt_load(fixture(pt));
    CHECK_OK(pt);
    em_tensor_dict *want = em_safetensors_load(fixture(st), NULL);
    CHECK_OK(st);
    if (!got || !want) goto out;
    CHECK(em_tensor_dict_count(got) == em_tensor_dict_count(want), "%s: %lld tensors, want %lld",
          name, (long long)em_tensor_dict_count(got), (long long)em_tensor_dict_count(want));
    for (int64_t i = 0; i < em_tensor_dict_count(want); i++) {
        const char *n = em_tensor_dict_name_at(want, i);
        CHECK(h_same_bytes(em_tensor_dict_get(got, n), em_tensor_dict_tensor_at(want, i)),
              "%s: %s bit-identical", name, n);
    }
    em_store_info *info = em_pt_inspect(fixture(pt));
    CHECK_OK("pt inspect");
    CHECK(em_store_info_count(info) == em_tensor_dict_count(want), "%s: inspect count", name);
    em_store_info_free(info);
out:
    em_tensor_dict_free(got);
    em_tensor_dict_free(want);
}

static void test_fixtures(void)
{
    compare_fixture("types");
    compare_fixture("nested");
    compare_fixture("views");
    /* PT-02: the os.system reduce is refused and nothing ran. */
    unlink("/tmp/ember_pwned");
    em_tensor_dict *d = em_pt_load(fixture("malicious.pt"));
    CHECK(d == NULL, "malicious pickle refused");
    CHECK_ERR(EM_ERR_FORMAT, "refused global posix.system");
    CHECK(access("/tmp/ember_pwned", F_OK) != 0, "canary: no command ran");
    em_tensor_dict_free(d);
}

/* em_store_load and em_store_inspect read .pt files once em_pt_register has added the reader,
 * and before that refuse them naming the library. */
static void test_register(void)
{
    em_tensor_dict *d = em_store_load(fixture("types.pt"));
    CHECK(d == NULL, "no .pt reader before em_pt_register");
    CHECK_ERR(EM_ERR_UNSUPPORTED, "needs the ember-pt library");
    CHECK(em_store_inspect(fixture("types.pt")) == NULL, "no listing either");
    CHECK_ERR(EM_ERR_UNSUPPORTED, "em_pt_register");
    CHECK(em_pt_register() == EM_OK && em_pt_register() == EM_OK, "register (twice)");
    d = em_store_load(fixture("types.pt"));
    em_tensor_dict *want = em_pt_load(fixture("types.pt"));
    CHECK_OK("em_store_load of a .pt file");
    CHECK(d && want && em_tensor_dict_count(d) == em_tensor_dict_count(want) &&
              em_tensor_dict_count(d) > 0,
          "em_store_load reads the .pt file as em_pt_load does");
    em_store_info *info = em_store_inspect(fixture("types.pt"));
    CHECK(info && em_store_info_count(info) == em_tensor_dict_count(want), "em_store_inspect");
    em_store_info_free(info);
    em_tensor_dict_free(d);
    em_tensor_dict_free(want);
    CHECK(em_store_add_reader(NULL) == EM_ERR_INVALID_ARG, "a NULL reader");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_store_add_reader");
    CHECK(em_store_add_reader(&(em_store_reader){.name = "x"}) == EM_ERR_INVALID_ARG,
          "a reader without functions");
    CHECK_ERR(EM_ERR_INVALID_ARG, "needs a name, claims and load");
}

/* ---- archives built in memory ------------------------------------------------------------ */

typedef struct entry {
    const char *name;
    const void *data;
    size_t len;
    bool deflate;
} entry;

static unsigned char *make_zip(const entry *e, int n, size_t *out_len)
{
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t *src = zip_source_buffer_create(NULL, 0, 0, &ze);
    zip_source_keep(src);
    zip_t *za = zip_open_from_source(src, ZIP_TRUNCATE, &ze);
    for (int i = 0; i < n; i++) {
        zip_source_t *s = zip_source_buffer(za, e[i].data, e[i].len, 0);
        zip_int64_t idx = zip_file_add(za, e[i].name, s, 0);
        zip_set_file_compression(za, (zip_uint64_t)idx,
                                 e[i].deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0);
    }
    zip_close(za);
    zip_source_open(src);
    zip_source_seek(src, 0, SEEK_END);
    zip_int64_t len = zip_source_tell(src);
    zip_source_seek(src, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)len + 1);
    zip_source_read(src, buf, (zip_uint64_t)len);
    zip_source_close(src);
    zip_source_free(src);
    zip_error_fini(&ze);
    *out_len = (size_t)len;
    return buf;
}

static void expect_bad_zip(const char *what, const entry *e, int n, const char *needle)
{
    size_t len;
    unsigned char *z = make_zip(e, n, &len);
    em_tensor_dict *d = em_pt_load_memory(z, len, what);
    CHECK(d == NULL, "%s: rejected", what);
    em_tensor_dict_free(d);
    h_check_err_(EM_ERR_FORMAT, needle, __FILE__, __LINE__);
    free(z);
}

/* A pickle {"w": tensor} whose storage declares `numel` floats, viewed with size/stride. */
static size_t tensor_pickle(unsigned char *out, int numel, int size, int stride)
{
    static const char a[] = "\x80\x02}(U\x01w"
                            "ctorch._utils\n_rebuild_tensor_v2\n"
                            "((U\x07storage"
                            "ctorch\nFloatStorage\n"
                            "U\x01"
                            "0U\x03"
                            "cpuK";
    size_t n = sizeof a - 1;
    memcpy(out, a, n);
    out[n++] = (unsigned char)numel;
    out[n++] = 't';
    out[n++] = 'Q';
    out[n++] = 'K';
    out[n++] = 0; /* offset */
    if (size >= 0) {
        out[n++] = 'K';
        out[n++] = (unsigned char)size;
    } else {
        out[n++] = 'J';
        memcpy(out + n, "\xff\xff\xff\xff", 4);
        n += 4;
    }
    out[n++] = 0x85;
    if (stride >= 0) {
        out[n++] = 'K';
        out[n++] = (unsigned char)stride;
    } else {
        out[n++] = 'J';
        memcpy(out + n, "\xff\xff\xff\xff", 4);
        n += 4;
    }
    out[n++] = 0x85;
    out[n++] = 0x89;
    out[n++] = '}';
    out[n++] = 't';
    out[n++] = 'R';
    out[n++] = 'u';
    out[n++] = '.';
    return n;
}

static void test_size_checks(void)
{
    unsigned char pk[256];
    float data[4] = {1, 2, 3, 4};
    /* A well-formed one first. */
    size_t n = tensor_pickle(pk, 4, 4, 1);
    entry ok[] = {{"a/data.pkl", pk, n, false},
                  {"a/byteorder", "little", 6, false},
                  {"a/data/0", data, 16, false}};
    size_t len;
    unsigned char *z = make_zip(ok, 3, &len);
    em_tensor_dict *d = em_pt_load_memory(z, len, "hand-made");
    CHECK_OK("hand-made pickle loads");
    double want[4] = {1, 2, 3, 4};
    if (d) h_check_tensor("hand-made", em_tensor_dict_get(d, "w"), want, EM_SHAPE(4), 0, 0);
    em_tensor_dict_free(d);
    /* Truncated archive. */
    d = em_pt_load_memory(z, len / 2, "truncated");
    CHECK(d == NULL, "truncated zip rejected");
    CHECK_ERR(EM_ERR_FORMAT, "truncated or damaged zip archive");
    free(z);

    n = tensor_pickle(pk, 5, 4, 1);
    expect_bad_zip("storage bigger than entry", ok, 3, "storage size mismatch");
    n = tensor_pickle(pk, 4, 5, 1);
    ok[0].len = n;
    expect_bad_zip("view past storage", ok, 3, "past the end of storage");
    n = tensor_pickle(pk, 4, 2, 4);
    ok[0].len = n;
    expect_bad_zip("stride past storage", ok, 3, "past the end of storage");
    n = tensor_pickle(pk, 4, 2, -1);
    ok[0].len = n;
    expect_bad_zip("negative stride", ok, 3, "malformed");
    n = tensor_pickle(pk, 4, -1, 1);
    ok[0].len = n;
    expect_bad_zip("negative size", ok, 3, "malformed");
    n = tensor_pickle(pk, 4, 4, 1);
    ok[0].len = n;
    expect_bad_zip("missing storage", ok, 2, "missing from the archive");
    entry big[] = {{"a/data.pkl", pk, n, false},
                   {"a/byteorder", "big", 3, false},
                   {"a/data/0", data, 16, false}};
    expect_bad_zip("big endian", big, 3, "byte order");
    entry ts[] = {{"a/data.pkl", pk, n, false},
                  {"a/constants.pkl", pk, n, false},
                  {"a/data/0", data, 16, false}};
    expect_bad_zip("TorchScript", ts, 3, "TorchScript");
    entry trav[] = {{"a/data.pkl", pk, n, false}, {"a/../../etc/x", data, 16, false}};
    expect_bad_zip("path traversal", trav, 2, "unsafe");
    entry outside[] = {{"a/data.pkl", pk, n, false}, {"b/data/0", data, 16, false}};
    expect_bad_zip("entry outside folder", outside, 2, "outside the archive folder");
    entry nopkl[] = {{"a/data/0", data, 16, false}};
    expect_bad_zip("no data.pkl", nopkl, 1, "no data.pkl");
    size_t bomb_len = 8 << 20;
    unsigned char *zeros = calloc(1, bomb_len);
    entry bomb[] = {{"a/data.pkl", pk, n, false}, {"a/data/0", zeros, bomb_len, true}};
    expect_bad_zip("zip bomb", bomb, 2, "zip bomb");
    free(zeros);
    /* Legacy (pre-1.6) files are plain pickles, not zips. */
    d = em_pt_load_memory(pk, n, "legacy");
    CHECK(d == NULL, "legacy format refused");
    CHECK_ERR(EM_ERR_FORMAT, "legacy");
}

static void bad_pickle(const char *what, const void *p, size_t n, const char *needle)
{
    em_status s = pt_unpickle_memory(p, n, what);
    CHECK(s == EM_ERR_FORMAT, "%s: rejected (%s)", what, em_status_name(s));
    h_check_err_(EM_ERR_FORMAT, needle, __FILE__, __LINE__);
    /* The same inside an archive. */
    entry e[] = {{"a/data.pkl", p, n, false}};
    expect_bad_zip(what, e, 1, needle);
}

#define BAD_PICKLE(what, lit, needle) bad_pickle(what, lit, sizeof lit - 1, needle)

static void test_pickle_limits(void)
{
    BAD_PICKLE("unknown opcode", "\x80\x02\x95", "refused pickle opcode 0x95 (FRAME)");
    BAD_PICKLE("INST opcode", "\x80\x02iposix\nsystem\n", "refused pickle opcode 0x69 (INST)");
    BAD_PICKLE("builtins.eval",
               "\x80\x02"
               "cbuiltins\neval\n",
               "refused global builtins.eval");
    BAD_PICKLE("huge memo", "\x80\x02Nr\xff\xff\xff\x7f.", "exceeds the limit");
    BAD_PICKLE("unset memo", "\x80\x02h\x05.", "memo index 5 is not set");
    BAD_PICKLE("stack underflow", "\x80\x02a.", "underflow");
    BAD_PICKLE("SETITEM on a list", "\x80\x02]NNs.", "not a dict");
    BAD_PICKLE("APPEND on a dict", "\x80\x02}Na.", "not a list");
    BAD_PICKLE("string past the end",
               "\x80\x02X\xff\x00\x00\x00"
               "ab",
               "truncated");
    BAD_PICKLE("no STOP", "\x80\x02}", "without STOP");
    BAD_PICKLE("REDUCE on a storage class",
               "\x80\x02"
               "ctorch\nFloatStorage\n)R.",
               "storage class");
    BAD_PICKLE("not a dict", "\x80\x02K\x05.", "does not hold a dict");
    BAD_PICKLE("bad persistent id",
               "\x80\x02U\x03"
               "abcQ.",
               "persistent id");
    /* Deep nesting: {"k": [[[...]]]} 100 levels, and 100000 open MARKs. */
    size_t depth = 100;
    unsigned char *p = malloc(depth * 2 + 32);
    size_t k = 0;
    memcpy(p, "\x80\x02}U\x01k", 6);
    k = 6;
    for (size_t i = 0; i < depth; i++) p[k++] = ']';
    for (size_t i = 1; i < depth; i++) p[k++] = 'a';
    p[k++] = 's';
    p[k++] = '.';
    bad_pickle("deep nesting", p, k, "deeper than 64");
    free(p);
    size_t marks = 100000;
    p = malloc(marks + 4);
    memcpy(p, "\x80\x02", 2);
    memset(p + 2, '(', marks);
    bad_pickle("mark bomb", p, marks + 2, "open MARKs");
    free(p);
    /* A self-referencing list: lst.append(lst) through the memo. */
    BAD_PICKLE("cycle",
               "\x80\x02}U\x01k]q\x00h\x00"
               "as.",
               "deeper than 64");
}

static void test_bad_args(void)
{
    CHECK(em_pt_load(NULL) == NULL, "NULL path");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_pt_load");
    CHECK(em_pt_load("/nonexistent/model.pt") == NULL, "missing file");
    CHECK_ERR(EM_ERR_IO, "model.pt");
    /* Allocation failures while importing leave no leak. */
    int failures = 0;
    for (int k = 1; k < 80; k++) {
        em_mem_fail_at(k);
        em_tensor_dict *d = em_pt_load(fixture("views.pt"));
        em_mem_fail_at(0);
        if (!d) failures++;
        em_tensor_dict_free(d);
        em_clear_error();
    }
    CHECK(failures > 5, "allocation failures exercised (%d)", failures);
}

int main(void)
{
    h_init();
    const char *dir = getenv("EMBER_FIXTURES");
    snprintf(fixture_dir, sizeof fixture_dir, "%s", dir ? dir : "tests/fixtures");
    test_register();
    test_fixtures();
    test_size_checks();
    test_pickle_limits();
    test_bad_args();
    return h_finish();
}
