/* Module save/load by name: round trips of every dtype, strict and partial loads, include and
 * exclude filters, regex renames with back-references, the naming adapters, dtype casts both
 * ways and keep_dtype, the report, strict failures leaving the module untouched, bad regexes. */
#include <string.h>
#include <unistd.h>

#include <ember/pt.h>
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

static const em_module_type holder_type = {"Holder", NULL, NULL, NULL};

static em_module *holder(void)
{
    return em_module_alloc(sizeof(em_module), &holder_type, EM_CPU);
}

/* A tree with parameters of every float dtype and buffers of every dtype, random values. */
static em_module *all_dtypes(void)
{
    em_module *root = holder(), *sub = holder();
    const em_dtype fl[4] = {EM_F32, EM_F64, EM_F16, EM_BF16};
    for (int i = 0; i < 4; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "w_%s", em_dtype_name(fl[i]));
        em_module_param(sub, nm, h_rand(EM_SHAPE(3, i + 1), fl[i], H_CONTIG, -2, 2, NULL));
    }
    for (int dt = 0; dt < EM_DTYPE_COUNT; dt++) {
        char nm[32];
        snprintf(nm, sizeof nm, "b_%s", em_dtype_name((em_dtype)dt));
        em_module_buffer(root, nm, h_rand(EM_SHAPE(2, 2), (em_dtype)dt, H_CONTIG, -50, 50, NULL));
    }
    em_module_buffer(root, "scalar", h_rand(EM_SCALAR, EM_I64, H_CONTIG, 0, 100, NULL));
    em_module_child(root, "sub", sub);
    return root;
}

typedef struct snap {
    int n;
    const char *names[64];
    em_tensor *t[64];
} snap;

static void snap_fn(void *vctx, const char *name, em_module_entry *e)
{
    snap *s = vctx;
    s->names[s->n] = e->name; /* the entry's own string, stable */
    s->t[s->n++] = e->tensor;
    (void)name;
}

static snap take(em_module *m)
{
    snap s = {0};
    em_module_visit(m, snap_fn, &s);
    return s;
}

/* The module still holds exactly the tensors of s. */
static bool unchanged(em_module *m, const snap *s)
{
    snap now = take(m);
    if (now.n != s->n) return false;
    for (int i = 0; i < s->n; i++)
        if (now.t[i] != s->t[i]) return false;
    return true;
}

typedef struct cmp_ctx {
    em_module *other;
    int same, n;
} cmp_ctx;

static void cmp_fn(void *vctx, const char *name, em_module_entry *e)
{
    cmp_ctx *c = vctx;
    c->n++;
    if (h_same_bytes(e->tensor, em_module_get(c->other, name))) c->same++;
}

static void test_round_trip(void)
{
    em_module *a = all_dtypes(), *b = all_dtypes();
    em_module_freeze(b, "sub.w_f16", true);
    const char *p = tmp_path("all.safetensors");
    const char *meta[] = {"epoch", "3", "format", "ember", NULL};
    CHECK(em_module_save(a, p, meta) == EM_OK, "save");
    CHECK_OK("save");

    em_tensor_dict *d = em_safetensors_load(p, NULL);
    CHECK(d && em_tensor_dict_count(d) == 15, "15 tensors in the file");
    CHECK(d && em_tensor_dict_get(d, "sub.w_bf16") && em_tensor_dict_get(d, "b_bool") &&
              em_tensor_dict_get(d, "scalar"),
          "dotted names, buffers included");
    CHECK(d && strcmp(em_tensor_dict_get_meta(d, "epoch"), "3") == 0 &&
              strcmp(em_tensor_dict_get_meta(d, "format"), "ember") == 0,
          "metadata (the caller's wins over format=pt)");
    em_tensor_dict_free(d);
    CHECK(em_module_save(a, p, NULL) == EM_OK, "save without metadata");
    d = em_safetensors_load(p, NULL);
    CHECK(d && strcmp(em_tensor_dict_get_meta(d, "format"), "pt") == 0, "format=pt");
    em_tensor_dict_free(d);

    em_load_report rep = {0};
    CHECK(em_module_load(b, p, NULL, &rep) == EM_OK, "strict load");
    CHECK_OK("load");
    CHECK(rep.loaded.n == 15 && rep.missing.n == 0 && rep.unexpected.n == 0 &&
              rep.mismatched.n == 0 && rep.skipped.n == 0,
          "report: 15 loaded");
    em_load_report_free(&rep);
    cmp_ctx c = {a, 0, 0};
    em_module_visit(b, cmp_fn, &c);
    CHECK(c.n == 15 && c.same == 15, "every tensor bit-exact with its dtype (%d/%d)", c.same, c.n);
    em_tensor *w = em_module_get(b, "sub.w_f32");
    CHECK(em_tensor_requires_grad(w), "parameters stay trainable");
    CHECK(!em_tensor_requires_grad(em_module_get(b, "b_f32")), "buffers are not");
    CHECK(em_module_count(b, true) == 3 * (1 + 2 + 4), "frozen flag kept (f16 excluded)");
    /* gradients flow to the loaded leaf */
    em_tensor *s = em_sum(w, EM_ALL, false);
    em_grads *g = em_backward(s);
    em_tensor *gw = g ? em_grad(g, w) : NULL;
    CHECK(gw != NULL, "gradient reaches the loaded parameter");
    em_release(gw);
    em_grads_free(g);
    em_release(s);
    em_module_free(a);
    em_module_free(b);
}

/* A small model: "enc.weight" [4, 3], "enc.bias" [4], "ln.weight"/"ln.bias" [4], buffer
 * "ln.count" (i64 scalar). */
static em_module *small(void)
{
    em_module *root = holder(), *enc = holder(), *ln = holder();
    em_module_param(enc, "weight", h_rand(EM_SHAPE(4, 3), EM_F32, H_CONTIG, -1, 1, NULL));
    em_module_param(enc, "bias", h_rand(EM_SHAPE(4), EM_F32, H_CONTIG, -1, 1, NULL));
    em_module_param(ln, "weight", h_rand(EM_SHAPE(4), EM_F32, H_CONTIG, -1, 1, NULL));
    em_module_param(ln, "bias", h_rand(EM_SHAPE(4), EM_F32, H_CONTIG, -1, 1, NULL));
    em_module_buffer(ln, "count", em_scalar(7, EM_I64, EM_CPU));
    em_module_child(root, "enc", enc);
    em_module_child(root, "ln", ln);
    return root;
}

/* Writes a file with the given names -> tensors (NULL-terminated name list). */
static void write_file(const char *p, const char *const *names, em_tensor *const *ts)
{
    em_tensor_dict *d = em_tensor_dict_new();
    for (int i = 0; names[i]; i++) em_tensor_dict_add(d, names[i], ts[i]);
    em_safetensors_save(p, d, NULL);
    em_tensor_dict_free(d);
    CHECK_OK("write fixture file");
}

static bool has_item(const em_load_list *l, const char *name)
{
    for (int i = 0; i < l->n; i++)
        if ((l->items[i].name && strcmp(l->items[i].name, name) == 0) ||
            (l->items[i].file_name && strcmp(l->items[i].file_name, name) == 0))
            return true;
    return false;
}

static void test_strict_and_partial(void)
{
    em_module *src = small(), *m = small();
    const char *p = tmp_path("strict.safetensors");
    em_tensor *wrong = em_zeros(EM_SHAPE(3), EM_F32, EM_CPU);
    em_tensor *extra = em_ones(EM_SHAPE(2), EM_F32, EM_CPU);
    /* ln.bias missing, "head.weight" unexpected, ln.weight of the wrong shape */
    const char *names[] = {"enc.weight", "enc.bias", "ln.weight", "ln.count", "head.weight", NULL};
    em_tensor *ts[] = {em_module_get(src, "enc.weight"), em_module_get(src, "enc.bias"), wrong,
                       em_module_get(src, "ln.count"), extra};
    write_file(p, names, ts);
    snap before = take(m);

    em_load_report rep = {0};
    CHECK(em_module_load(m, p, NULL, &rep) == EM_ERR_INVALID_ARG, "strict fails");
    CHECK_ERR(EM_ERR_INVALID_ARG, "1 missing (ln.bias); 1 unexpected (head.weight); 1 mismatched "
                                  "(ln.weight (shape [3] in the file, [4] in the module))");
    CHECK(unchanged(m, &before), "strict failure leaves the module untouched");
    CHECK(rep.loaded.n == 0, "nothing reported loaded");
    CHECK(rep.missing.n == 1 && has_item(&rep.missing, "ln.bias"), "missing ln.bias");
    CHECK(rep.unexpected.n == 1 && has_item(&rep.unexpected, "head.weight"), "unexpected head");
    CHECK(rep.mismatched.n == 1 && has_item(&rep.mismatched, "ln.weight") &&
              strstr(rep.mismatched.items[0].detail, "shape [3] in the file, [4] in the module"),
          "mismatched ln.weight with its shapes");
    em_load_report_free(&rep);

    CHECK(em_module_load(m, p, &(em_load_opts){.partial = true}, &rep) == EM_OK, "partial");
    CHECK_OK("partial");
    CHECK(rep.loaded.n == 3 && rep.missing.n == 1 && rep.unexpected.n == 1 && rep.mismatched.n == 1,
          "partial report 3/1/1/1");
    CHECK(h_same_bytes(em_module_get(m, "enc.weight"), em_module_get(src, "enc.weight")) &&
              h_same_bytes(em_module_get(m, "ln.count"), em_module_get(src, "ln.count")),
          "matching entries loaded");
    CHECK(em_module_get(m, "ln.weight") == before.t[2] &&
              em_module_get(m, "ln.bias") == before.t[3],
          "mismatched and missing entries kept");
    char *s = em_load_report_str(&rep);
    CHECK(s && strstr(s, "loaded 3, missing 1, unexpected 1, mismatched 1, skipped 0\n") &&
              strstr(s, "loaded: enc.weight, enc.bias, ln.count\n") &&
              strstr(s, "missing: ln.bias\n") && strstr(s, "unexpected: head.weight\n") &&
              strstr(s, "mismatched: ln.weight (shape [3] in the file, [4] in the module)\n"),
          "report text:\n%s", s ? s : "(null)");
    em_free(s);
    em_load_report_free(&rep);

    /* dtype kinds that cannot convert */
    em_tensor *fcount = em_scalar(2.5, EM_F32, EM_CPU);
    const char *n2[] = {"ln.count", NULL};
    write_file(p, n2, &fcount);
    CHECK(em_module_load(m, p, &(em_load_opts){.partial = true}, &rep) == EM_OK, "partial dtype");
    CHECK(rep.mismatched.n == 1 && strcmp(rep.mismatched.items[0].detail,
                                          "dtype f32 in the file, i64 in the module") == 0,
          "float into an integer buffer is a mismatch");
    em_load_report_free(&rep);
    em_release(fcount);

    em_release(wrong);
    em_release(extra);
    em_module_free(src);
    em_module_free(m);
}

static void test_filters(void)
{
    em_module *src = small(), *m = small();
    const char *p = tmp_path("filters.safetensors");
    CHECK(em_module_save(src, p, NULL) == EM_OK, "save");
    snap before = take(m);
    em_load_report rep = {0};
    const char *inc[] = {"enc.*", NULL};
    CHECK(em_module_load(m, p, &(em_load_opts){.include = inc}, &rep) == EM_OK,
          "include enc.* (strict: the rest is neither missing nor unexpected)");
    CHECK(rep.loaded.n == 2 && rep.skipped.n == 3 && rep.missing.n == 0, "2 loaded, 3 skipped");
    CHECK(h_same_bytes(em_module_get(m, "enc.bias"), em_module_get(src, "enc.bias")), "enc loaded");
    CHECK(em_module_get(m, "ln.weight") == before.t[2], "ln untouched");
    em_load_report_free(&rep);

    const char *exc[] = {"*.bias", "ln.count", NULL};
    em_module *m2 = small();
    snap b2 = take(m2);
    CHECK(em_module_load(m2, p, &(em_load_opts){.exclude = exc}, &rep) == EM_OK, "exclude");
    CHECK(rep.loaded.n == 2 && rep.skipped.n == 3 && has_item(&rep.skipped, "enc.bias") &&
              has_item(&rep.skipped, "ln.count"),
          "biases and count skipped");
    CHECK(em_module_get(m2, "enc.bias") == b2.t[1] && em_module_get(m2, "ln.weight") != b2.t[2],
          "excluded kept, others loaded");
    em_load_report_free(&rep);
    /* include and exclude together */
    const char *inc2[] = {"ln.*", NULL}, *exc2[] = {"*.count", NULL};
    CHECK(em_module_load(m2, p, &(em_load_opts){.include = inc2, .exclude = exc2}, &rep) == EM_OK,
          "include and exclude");
    CHECK(rep.loaded.n == 2 && has_item(&rep.loaded, "ln.bias"), "ln.weight and ln.bias");
    em_load_report_free(&rep);
    em_module_free(m2);
    em_module_free(src);
    em_module_free(m);
}

static void test_remap(void)
{
    em_module *src = small(), *m = small();
    const char *p = tmp_path("remap.safetensors");
    const char *names[] = {"encoder/0/w",  "encoder/0/b",  "norm_layer.w",
                           "norm_layer.b", "norm_layer.n", NULL};
    em_tensor *ts[] = {em_module_get(src, "enc.weight"), em_module_get(src, "enc.bias"),
                       em_module_get(src, "ln.weight"), em_module_get(src, "ln.bias"),
                       em_module_get(src, "ln.count")};
    write_file(p, names, ts);
    const em_remap rules[] = {
        {"^encoder/([0-9]+)/", "enc.\\1."}, /* "enc.0.w": groups and literal dots */
        {"^enc\\.[0-9]+\\.", "enc."},       /* applied after the first rule */
        {"^norm_layer", "ln"},
        {"\\.w$", ".weight"},
        {"\\.b$", ".bias"},
        {"\\.n$", ".count"},
    };
    em_load_report rep = {0};
    CHECK(em_module_load(m, p, &(em_load_opts){.remap = rules, .n_remap = 6}, &rep) == EM_OK,
          "regex remap");
    CHECK_OK("remap");
    CHECK(rep.loaded.n == 5, "all 5 loaded through the renames");
    CHECK(rep.loaded.n > 0 && strcmp(rep.loaded.items[0].name, "enc.weight") == 0 &&
              strcmp(rep.loaded.items[0].file_name, "encoder/0/w") == 0,
          "report keeps both names");
    cmp_ctx c = {src, 0, 0};
    em_module_visit(m, cmp_fn, &c);
    CHECK(c.same == 5, "values loaded");
    char *s = em_load_report_str(&rep);
    CHECK(s && strstr(s, "enc.weight <- encoder/0/w"), "renames shown in the report");
    em_free(s);
    em_load_report_free(&rep);

    /* every match replaced (global), \0 is the whole match, \\ a backslash */
    const char *n2[] = {"xa_xb", NULL};
    em_module *h = holder();
    em_module_param(h, "[xa]_[xb]", em_zeros(EM_SHAPE(4, 3), EM_F32, EM_CPU));
    em_tensor *t2 = em_module_get(src, "enc.weight");
    write_file(p, n2, &t2);
    const em_remap wrap[] = {{"x[a-z]", "[\\0]"}};
    CHECK(em_module_load(h, p, &(em_load_opts){.remap = wrap, .n_remap = 1}, NULL) == EM_OK,
          "global replacement with \\0");
    CHECK_OK("global");
    em_module_free(h);
    h = holder();
    em_module_param(h, "a\\b", em_zeros(EM_SHAPE(4, 3), EM_F32, EM_CPU));
    const em_remap bs[] = {{"^xa_xb$", "a\\\\b"}};
    CHECK(em_module_load(h, p, &(em_load_opts){.remap = bs, .n_remap = 1}, NULL) == EM_OK,
          "escaped backslash");
    CHECK_OK("backslash");
    em_module_free(h);

    /* bad regexes and references */
    snap before = take(m);
    const em_remap bad1[] = {{"(unclosed", "x"}};
    CHECK(em_module_load(m, p, &(em_load_opts){.remap = bad1, .n_remap = 1}, NULL) ==
              EM_ERR_INVALID_ARG,
          "bad regex refused");
    CHECK_ERR(EM_ERR_INVALID_ARG, "bad regex \"(unclosed\"");
    const em_remap bad2[] = {{"^(a)b", "\\2"}};
    CHECK(em_module_load(m, p, &(em_load_opts){.remap = bad2, .n_remap = 1}, NULL) ==
              EM_ERR_INVALID_ARG,
          "reference to a missing group refused");
    CHECK_ERR(EM_ERR_INVALID_ARG, "uses \\2 but the pattern has 1 group");
    const em_remap bad3[] = {{NULL, "x"}};
    CHECK(em_module_load(m, p, &(em_load_opts){.remap = bad3, .n_remap = 1}, NULL) ==
              EM_ERR_INVALID_ARG,
          "NULL pattern refused");
    CHECK_ERR(EM_ERR_INVALID_ARG, "NULL pattern");
    CHECK(em_module_load(m, p, &(em_load_opts){.n_remap = 2}, NULL) == EM_ERR_INVALID_ARG,
          "n_remap without rules");
    CHECK_ERR(EM_ERR_INVALID_ARG, "remap is NULL");
    CHECK(unchanged(m, &before), "module untouched by refused options");
    em_module_free(src);
    em_module_free(m);
}

static void test_adapters(void)
{
    em_module *src = small(), *m = small();
    const char *p = tmp_path("adapt.safetensors");
    /* DataParallel inside a "model." wrapper, old LayerNorm names, a plain name */
    const char *names[] = {"module.enc.weight",
                           "model.module.enc.bias",
                           "state_dict.ln.gamma",
                           "ln.beta",
                           "ln.count",
                           NULL};
    em_tensor *ts[] = {em_module_get(src, "enc.weight"), em_module_get(src, "enc.bias"),
                       em_module_get(src, "ln.weight"), em_module_get(src, "ln.bias"),
                       em_module_get(src, "ln.count")};
    write_file(p, names, ts);
    em_load_report rep = {0};
    CHECK(em_module_load(m, p, NULL, &rep) == EM_OK, "adapters on by default");
    CHECK_OK("adapters");
    CHECK(rep.loaded.n == 5, "5 loaded");
    cmp_ctx c = {src, 0, 0};
    em_module_visit(m, cmp_fn, &c);
    CHECK(c.same == 5, "adapted values loaded");
    CHECK(has_item(&rep.loaded, "state_dict.ln.gamma") && has_item(&rep.loaded, "ln.weight"),
          "gamma -> weight after the prefix");
    em_load_report_free(&rep);
    em_module *m2 = small();
    CHECK(em_module_load(m2, p, &(em_load_opts){.no_adapters = true, .partial = true}, &rep) ==
              EM_OK,
          "no adapters");
    CHECK(rep.loaded.n == 1 && rep.unexpected.n == 4 && rep.missing.n == 4,
          "only the exact name loads");
    em_load_report_free(&rep);
    em_module_free(m2);

    /* an exact name wins over an adapted one whatever the order */
    em_tensor *other = em_zeros(EM_SHAPE(4, 3), EM_F32, EM_CPU);
    const char *n2[] = {"module.enc.weight", "enc.weight", NULL};
    em_tensor *t2[] = {other, em_module_get(src, "enc.weight")};
    write_file(p, n2, t2);
    em_module *m3 = small();
    CHECK(em_module_load(m3, p, &(em_load_opts){.partial = true}, &rep) == EM_OK, "conflict");
    CHECK(h_same_bytes(em_module_get(m3, "enc.weight"), em_module_get(src, "enc.weight")),
          "exact name loaded");
    CHECK(rep.unexpected.n == 1 &&
              strcmp(rep.unexpected.items[0].file_name, "module.enc.weight") == 0 &&
              strstr(rep.unexpected.items[0].detail, "already loaded from enc.weight"),
          "adapted duplicate reported");
    em_load_report_free(&rep);
    em_module_free(m3);
    em_release(other);
    em_module_free(src);
    em_module_free(m);
}

static void test_dtypes(void)
{
    em_module *src = small();
    const char *p16 = tmp_path("f16.safetensors"), *p32 = tmp_path("f32.safetensors");
    /* an f16 file into the f32 model */
    CHECK(em_module_cast(src, EM_F16) == EM_OK, "cast source to f16");
    CHECK(em_module_save(src, p16, NULL) == EM_OK, "save f16");
    em_module *m = small();
    em_load_report rep = {0};
    CHECK(em_module_load(m, p16, NULL, &rep) == EM_OK, "f16 file into f32 model");
    em_tensor *w = em_module_get(m, "enc.weight");
    CHECK(em_tensor_dtype(w) == EM_F32 && em_tensor_requires_grad(w), "cast to the module's f32");
    em_tensor *w16 = em_cast(w, EM_F16);
    CHECK(h_same_bytes(w16, em_module_get(src, "enc.weight")), "values exact (f16 in f32)");
    em_release(w16);
    CHECK(rep.loaded.n == 5 && rep.loaded.items[0].detail &&
              strcmp(rep.loaded.items[0].detail, "f16 cast to f32") == 0,
          "report notes the cast");
    CHECK(em_tensor_dtype(em_module_get(m, "ln.count")) == EM_I64, "integer buffer kept i64");
    em_load_report_free(&rep);

    /* and back: the f32 model saved, loaded into an f16 model */
    CHECK(em_module_save(m, p32, NULL) == EM_OK, "save f32");
    em_module *h = small();
    em_module_cast(h, EM_F16);
    CHECK(em_module_load(h, p32, NULL, NULL) == EM_OK, "f32 file into f16 model");
    CHECK(h_same_bytes(em_module_get(h, "enc.weight"), em_module_get(src, "enc.weight")),
          "f16 values round-trip");
    em_module_free(h);

    /* keep_dtype: the module takes the file's dtype */
    em_module *k = small();
    CHECK(em_module_load(k, p16, &(em_load_opts){.keep_dtype = true}, &rep) == EM_OK, "keep_dtype");
    w = em_module_get(k, "ln.bias");
    CHECK(em_tensor_dtype(w) == EM_F16 && em_tensor_requires_grad(w), "parameter is now f16");
    CHECK(h_same_bytes(w, em_module_get(src, "ln.bias")), "file values kept exactly");
    CHECK(strcmp(rep.loaded.items[0].detail, "f16 kept, module had f32") == 0, "report");
    em_load_report_free(&rep);
    em_module_free(k);

    /* integer widths convert: an i32 count into the i64 buffer */
    em_tensor *c32 = em_scalar(41, EM_I32, EM_CPU);
    const char *n1[] = {"ln.count", NULL};
    write_file(p16, n1, &c32);
    CHECK(em_module_load(m, p16, &(em_load_opts){.include = n1}, NULL) == EM_OK, "i32 into i64");
    em_tensor *cnt = em_module_get(m, "ln.count");
    CHECK(em_tensor_dtype(cnt) == EM_I64 && em_item_i64(cnt) == 41, "count 41 as i64");
    em_release(c32);
    em_module_free(m);
    em_module_free(src);
}

/* Allocation failures anywhere in a load: a clean error, the module untouched, no leak. */
static void test_alloc_failures(void)
{
    em_module *src = small(), *m = small();
    const char *p = tmp_path("oom.safetensors");
    em_module_cast(src, EM_F16); /* the load casts too */
    CHECK(em_module_save(src, p, NULL) == EM_OK, "save");
    const em_remap rules[] = {{"^(enc|ln)\\.", "\\1."}};
    int failures = 0, k;
    for (k = 1; k < 400; k++) {
        snap before = take(m);
        em_load_report rep = {0};
        em_mem_fail_at(k);
        em_status st = em_module_load(m, p, &(em_load_opts){.remap = rules, .n_remap = 1}, &rep);
        em_mem_fail_at(0);
        em_load_report_free(&rep);
        if (st == EM_OK) {
            CHECK(!em_failed(), "success at %d leaves no error (%s)", k, em_last_error());
            break;
        }
        failures++;
        CHECK(em_failed(), "failure %d records an error", k);
        em_clear_error();
        CHECK(unchanged(m, &before), "failure %d leaves the module untouched", k);
    }
    CHECK(failures > 10 && k < 400, "allocation failures exercised (%d), then success", failures);
    em_module_free(src);
    em_module_free(m);
}

static void test_bad_args(void)
{
    em_module *m = small();
    CHECK(em_module_save(NULL, tmp_path("x"), NULL) == EM_ERR_INVALID_ARG, "NULL module");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_module_save");
    CHECK(em_module_load(m, NULL, NULL, NULL) == EM_ERR_INVALID_ARG, "NULL path");
    CHECK_ERR(EM_ERR_INVALID_ARG, "path is NULL");
    CHECK(em_module_load(m, tmp_path("missing.safetensors"), NULL, NULL) == EM_ERR_IO,
          "missing file");
    CHECK_ERR(EM_ERR_IO, "missing.safetensors");
    FILE *f = fopen(tmp_path("junk.pt"), "wb");
    fputs("PK\3\4 not really a zip", f);
    fclose(f);
    CHECK(em_module_load(m, tmp_path("junk.pt"), NULL, NULL) == EM_ERR_FORMAT, "broken zip");
    CHECK_ERR(EM_ERR_FORMAT, "junk.pt");
    em_module_free(m);
}

int main(void)
{
    h_init();
    em_pt_register(); /* em_module_load reads .pt files too */
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ember_mio_XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    test_round_trip();
    test_strict_and_partial();
    test_filters();
    test_remap();
    test_adapters();
    test_dtypes();
    test_alloc_failures();
    test_bad_args();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return h_finish();
}
