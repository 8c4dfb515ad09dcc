/* Every input of the fuzzers' corpora (fuzz/corpus/<target>/: seeds, hostile files and the
 * inputs that once crashed a reader, named regress-*) through the entry points its fuzz target
 * calls, in the ordinary test build: under the sanitizer build this replays the whole corpus
 * with ASan and UBSan on every test run. Readers may refuse an input; none may crash, leak or
 * leave no error when it fails. */
#include <dirent.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include <ember/data.h>
#include <ember/pt.h>

#include "core/core_impl.h"
#include "harness.h"
#include "store/store_impl.h"

static char tmpfile_path[256];

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

static const char *as_file(const unsigned char *data, size_t n)
{
    FILE *f = fopen(tmpfile_path, "wb");
    if (n) fwrite(data, 1, n, f);
    fclose(f);
    return tmpfile_path;
}

/* The calls of fuzz/fuzz_<target>.c; true when the input was accepted. */
static bool replay(const char *target, const unsigned char *d, size_t n)
{
    bool ok = false;
    if (!strcmp(target, "fuzz_pt")) {
        if (n >= 2 && d[0] == 'P' && d[1] == 'K') {
            em_tensor_dict *x = em_pt_load_memory(d, n, "corpus");
            ok = x != NULL;
            em_tensor_dict_free(x);
        } else {
            ok = pt_unpickle_memory(d, n, "corpus") == EM_OK;
        }
    } else if (!strcmp(target, "fuzz_safetensors")) {
        em_tensor_dict *x = em_safetensors_load_memory(d, n, "corpus");
        ok = x != NULL;
        em_tensor_dict_free(x);
    } else if (!strcmp(target, "fuzz_json")) {
        js_doc *doc = js_parse((const char *)d, n, "corpus");
        ok = doc != NULL;
        js_free(doc);
    } else if (!strcmp(target, "fuzz_config")) {
        char err[512];
        em_status s = core_config_parse_memory((const char *)d, n, err, sizeof err);
        ok = s == EM_OK;
        if (!ok) em_error(s, "%s", err); /* the parse-only entry reports through err */
    } else if (!strcmp(target, "fuzz_image")) {
        em_image_cfg cfg = {0};
        if (n) cfg = (em_image_cfg){.channels = d[n - 1] & 1 ? 1 : 3, .raw_u8 = d[n - 1] & 2};
        em_tensor *t = em_image_read(as_file(d, n), cfg);
        ok = t != NULL;
        em_release(t);
    } else if (!strcmp(target, "fuzz_idx")) {
        em_tensor *t = em_idx_read(as_file(d, n));
        ok = t != NULL;
        em_release(t);
    } else if (!strcmp(target, "fuzz_text")) {
        em_text *t = em_text_from_string((const char *)d, n);
        ok = t != NULL;
        if (t) {
            em_release(em_text_tokens(t));
            em_dataset_free(em_dataset_text_lines(t));
        }
        em_text_free(t);
    } else if (!strcmp(target, "fuzz_mnist_json")) {
        char dir[300];
        snprintf(dir, sizeof dir, "%s.d", tmpfile_path);
        mkdir(dir, 0700);
        for (int c = 0; c < 10; c++) {
            char path[400];
            snprintf(path, sizeof path, "%s/%d.json", dir, c);
            FILE *f = fopen(path, "wb");
            if (n) fwrite(d, 1, n, f);
            fclose(f);
        }
        em_dataset *ds = em_dataset_mnist_json(dir, (em_idx_cfg){.flatten = n & 1});
        ok = ds != NULL;
        em_dataset_free(ds);
        for (int c = 0; c < 10; c++) {
            char path[400];
            snprintf(path, sizeof path, "%s/%d.json", dir, c);
            unlink(path);
        }
        rmdir(dir);
    } else if (!strcmp(target, "fuzz_csv")) {
        if (!n) return true;
        uint8_t o = d[0];
        em_csv_cfg cfg = {.delimiter = "\0; \t"[o & 3],
                          .header = (int)((o >> 2) % 3) - 1,
                          .label = o & 16,
                          .label_col = o & 32 ? 0 : -1,
                          .label_float = o & 64,
                          .f64 = o & 128};
        em_dataset *ds = em_dataset_csv(as_file(d + 1, n - 1), cfg);
        ok = ds != NULL;
        for (int64_t i = 0; ds && i < em_dataset_len(ds) && i < 4; i++) {
            em_item it = {0};
            if (em_dataset_get(ds, i, &it) == EM_OK) em_item_free(&it);
        }
        em_dataset_free(ds);
    }
    return ok;
}

int main(void)
{
    h_init();
    snprintf(tmpfile_path, sizeof tmpfile_path, "/tmp/ember_corpus_%d", (int)getpid());
    static const char *const targets[] = {"fuzz_pt",     "fuzz_safetensors", "fuzz_json",
                                          "fuzz_config", "fuzz_image",       "fuzz_idx",
                                          "fuzz_csv",    "fuzz_text",        "fuzz_mnist_json"};
    for (size_t k = 0; k < sizeof targets / sizeof *targets; k++) {
        char dir[300];
        snprintf(dir, sizeof dir, "fuzz/corpus/%s", targets[k]);
        DIR *dd = opendir(dir);
        CHECK(dd != NULL, "%s exists", dir);
        if (!dd) continue;
        int files = 0, accepted = 0;
        for (struct dirent *e; (e = readdir(dd));) {
            if (e->d_name[0] == '.') continue;
            char path[600];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            size_t n = 0;
            unsigned char *d = read_all(path, &n);
            if (!d) continue;
            files++;
            em_clear_error();
            bool ok = replay(targets[k], d, n);
            accepted += ok;
            /* a refusal always says why; inputs that once crashed must now be refused */
            if (!ok) CHECK(em_failed(), "%s: refused with an error", path);
            if (!strncmp(e->d_name, "regress-", 8)) CHECK(!ok, "%s: refused", path);
            em_clear_error();
            free(d);
        }
        closedir(dd);
        printf("%s: %d inputs, %d accepted\n", targets[k], files, accepted);
        CHECK(files >= 3, "%s: %d inputs", targets[k], files);
    }
    unlink(tmpfile_path);
    return h_finish();
}
