/* Module parameters and buffers to and from files by dotted name: safetensors save, and a
 * validating load from safetensors or .pt with filters, regex renames, naming adapters, dtype
 * casts and a report. Nothing in the module changes unless the whole load is accepted. */
#include <fnmatch.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ember/nn.h>

#include "../backend/backend.h"
#include "store_impl.h"

/* ---- growing strings --------------------------------------------------------------------- */

typedef struct mbuf {
    char *p;
    size_t n, cap;
    bool oom;
} mbuf;

static void mb_put(mbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 128;
        while (nc < b->n + n + 1) nc *= 2;
        char *np = em_alloc(nc);
        if (!np) {
            b->oom = true;
            return;
        }
        if (b->p) memcpy(np, b->p, b->n);
        em_free(b->p);
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void mb_str(mbuf *b, const char *s)
{
    mb_put(b, s, strlen(s));
}

/* The finished string (em_free it), or NULL with EM_ERR_OOM. */
static char *mb_done(mbuf *b, const char *fn)
{
    if (!b->oom && !b->p) mb_put(b, "", 0);
    if (b->oom) {
        em_free(b->p);
        em_error(EM_ERR_OOM, "%s: out of memory", fn);
        return NULL;
    }
    return b->p;
}

/* ---- state dict and save ----------------------------------------------------------------- */

typedef struct sd_ctx {
    em_tensor_dict *d;
    em_status st;
} sd_ctx;

static void sd_fn(void *vctx, const char *name, em_module_entry *e)
{
    sd_ctx *c = vctx;
    if (c->st == EM_OK) c->st = em_tensor_dict_add(c->d, name, e->tensor);
}

em_tensor_dict *em_module_state_dict(em_module *m)
{
    if (!m) {
        em_error(EM_ERR_INVALID_ARG, "em_module_state_dict: module is NULL");
        return NULL;
    }
    sd_ctx c = {em_tensor_dict_new(), EM_OK};
    if (!c.d) return NULL;
    em_module_visit(m, sd_fn, &c);
    if (c.st != EM_OK) {
        em_tensor_dict_free(c.d);
        return NULL;
    }
    return c.d;
}

em_status em_module_save(em_module *m, const char *path, const char *const *metadata)
{
    if (!m || !path)
        return em_error(EM_ERR_INVALID_ARG, "em_module_save: %s is NULL", !m ? "module" : "path");
    em_tensor_dict *d = em_module_state_dict(m);
    if (!d) return em_last_status();
    em_status st = em_tensor_dict_set_meta(d, "format", "pt");
    if (st == EM_OK) st = em_safetensors_save(path, d, metadata);
    em_tensor_dict_free(d);
    return st;
}

/* ---- load report ------------------------------------------------------------------------- */

static void list_free(em_load_list *l)
{
    for (int i = 0; i < l->n; i++) {
        em_free(l->items[i].name);
        em_free(l->items[i].file_name);
        em_free(l->items[i].detail);
    }
    em_free(l->items);
    *l = (em_load_list){0};
}

void em_load_report_free(em_load_report *r)
{
    if (!r) return;
    list_free(&r->loaded);
    list_free(&r->missing);
    list_free(&r->unexpected);
    list_free(&r->mismatched);
    list_free(&r->skipped);
}

static char *dup_or_null(const char *s, bool *ok)
{
    if (!s) return NULL;
    char *r = st_strdup(s);
    if (!r) *ok = false;
    return r;
}

static bool list_add(em_load_list *l, const char *name, const char *file_name, const char *detail)
{
    if (l->n == l->cap) {
        int nc = l->cap ? l->cap * 2 : 8;
        em_load_item *ni = em_alloc((size_t)nc * sizeof *ni);
        if (!ni) return false;
        if (l->items) memcpy(ni, l->items, (size_t)l->n * sizeof *ni);
        em_free(l->items);
        l->items = ni;
        l->cap = nc;
    }
    bool ok = true;
    em_load_item it = {dup_or_null(name, &ok), dup_or_null(file_name, &ok),
                       dup_or_null(detail, &ok)};
    if (!ok) {
        em_free(it.name);
        em_free(it.file_name);
        em_free(it.detail);
        return false;
    }
    l->items[l->n++] = it;
    return true;
}

/* "name", "name <- file name" when renamed, and " (detail)". */
static void item_text(mbuf *b, const em_load_item *it)
{
    mb_str(b, it->name ? it->name : it->file_name);
    if (it->name && it->file_name && strcmp(it->name, it->file_name) != 0) {
        mb_str(b, " <- ");
        mb_str(b, it->file_name);
    }
    if (it->detail) {
        mb_str(b, " (");
        mb_str(b, it->detail);
        mb_str(b, ")");
    }
}

char *em_load_report_str(const em_load_report *r)
{
    if (!r) {
        em_error(EM_ERR_INVALID_ARG, "em_load_report_str: report is NULL");
        return NULL;
    }
    mbuf b = {0};
    char head[200];
    snprintf(head, sizeof head, "loaded %d, missing %d, unexpected %d, mismatched %d, skipped %d\n",
             r->loaded.n, r->missing.n, r->unexpected.n, r->mismatched.n, r->skipped.n);
    mb_str(&b, head);
    const em_load_list *lists[5] = {&r->loaded, &r->missing, &r->unexpected, &r->mismatched,
                                    &r->skipped};
    static const char *const titles[5] = {"loaded", "missing", "unexpected", "mismatched",
                                          "skipped"};
    for (int k = 0; k < 5; k++) {
        if (!lists[k]->n) continue;
        mb_str(&b, titles[k]);
        mb_str(&b, ":");
        for (int i = 0; i < lists[k]->n; i++) {
            mb_str(&b, i ? ", " : " ");
            item_text(&b, &lists[k]->items[i]);
        }
        mb_str(&b, "\n");
    }
    return mb_done(&b, "em_load_report_str");
}

/* ---- regex renames ----------------------------------------------------------------------- */

typedef struct rule {
    regex_t re;
    const char *repl;
    bool compiled;
} rule;

static void rules_free(rule *r, int n)
{
    for (int i = 0; i < n; i++)
        if (r[i].compiled) regfree(&r[i].re);
    em_free(r);
}

static rule *rules_compile(const em_remap *remap, int n, const char *fn)
{
    rule *r = em_calloc((size_t)(n ? n : 1) * sizeof *r);
    if (!r) return NULL;
    for (int i = 0; i < n; i++) {
        const char *pat = remap[i].pattern, *rep = remap[i].replacement;
        if (!pat || !rep) {
            rules_free(r, n);
            em_error(EM_ERR_INVALID_ARG, "%s: remap rule %d has a NULL %s", fn, i,
                     !pat ? "pattern" : "replacement");
            return NULL;
        }
        int rc = regcomp(&r[i].re, pat, REG_EXTENDED);
        if (rc != 0) {
            char msg[160];
            regerror(rc, &r[i].re, msg, sizeof msg);
            rules_free(r, n);
            em_error(EM_ERR_INVALID_ARG, "%s: remap rule %d: bad regex \"%.100s\": %s", fn, i, pat,
                     msg);
            return NULL;
        }
        r[i].compiled = true;
        r[i].repl = rep;
        for (const char *q = rep; *q; q++) {
            if (*q != '\\' || !q[1]) continue;
            q++;
            if (*q >= '0' && *q <= '9' && (size_t)(*q - '0') > r[i].re.re_nsub) {
                size_t groups = r[i].re.re_nsub;
                rules_free(r, n);
                em_error(EM_ERR_INVALID_ARG,
                         "%s: remap rule %d: replacement \"%.100s\" uses \\%c but the pattern has "
                         "%zu group(s)",
                         fn, i, rep, *q, groups);
                return NULL;
            }
        }
    }
    return r;
}

static void put_replacement(mbuf *b, const char *repl, const char *subject, const regmatch_t *m)
{
    for (const char *q = repl; *q; q++) {
        if (*q == '\\' && q[1] >= '0' && q[1] <= '9') {
            const regmatch_t *g = &m[q[1] - '0'];
            if (g->rm_so >= 0) mb_put(b, subject + g->rm_so, (size_t)(g->rm_eo - g->rm_so));
            q++;
        } else if (*q == '\\' && q[1] == '\\') {
            mb_put(b, "\\", 1);
            q++;
        } else {
            mb_put(b, q, 1);
        }
    }
}

/* Every non-overlapping match of r in `in` replaced (as Python's re.sub). em_free the result. */
static char *rule_apply(const rule *r, const char *in)
{
    mbuf b = {0};
    const char *p = in;
    int eflags = 0;
    for (;;) {
        regmatch_t m[10];
        if (regexec(&r->re, p, 10, m, eflags) != 0) break;
        mb_put(&b, p, (size_t)m[0].rm_so);
        put_replacement(&b, r->repl, p, m);
        if (m[0].rm_eo == m[0].rm_so) { /* empty match: step over one character */
            if (!p[m[0].rm_eo]) {
                p += m[0].rm_eo;
                break;
            }
            mb_put(&b, p + m[0].rm_eo, 1);
            p += m[0].rm_eo + 1;
        } else {
            p += m[0].rm_eo;
        }
        eflags = REG_NOTBOL;
    }
    mb_str(&b, p);
    return mb_done(&b, "em_module_load");
}

/* ---- load -------------------------------------------------------------------------------- */

typedef struct target {
    char *name;
    em_module_entry *e;
    int claimed_by;  /* index of the file tensor matched to it, -1 when none */
    int order;       /* visit order, for reports in module order */
    bool mismatched; /* claimed but not loadable (detail says why) */
    char detail[160];
} target;

typedef struct targets {
    target *t;
    int n, cap;
    bool oom;
} targets;

static void collect_fn(void *vctx, const char *name, em_module_entry *e)
{
    targets *ts = vctx;
    if (ts->oom) return;
    if (ts->n == ts->cap) {
        int nc = ts->cap ? ts->cap * 2 : 64;
        target *nt = em_alloc((size_t)nc * sizeof *nt);
        if (!nt) {
            ts->oom = true;
            return;
        }
        if (ts->t) memcpy(nt, ts->t, (size_t)ts->n * sizeof *nt);
        em_free(ts->t);
        ts->t = nt;
        ts->cap = nc;
    }
    char *nm = st_strdup(name);
    if (!nm) {
        ts->oom = true;
        return;
    }
    ts->t[ts->n] = (target){.name = nm, .e = e, .claimed_by = -1, .order = ts->n};
    ts->n++;
}

static int cmp_target(const void *a, const void *b)
{
    return strcmp(((const target *)a)->name, ((const target *)b)->name);
}

static int find_target(const targets *ts, const char *name)
{
    int lo = 0, hi = ts->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(name, ts->t[mid].name);
        if (c == 0) return mid;
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return -1;
}

/* Writes into out (cap bytes) the name with known wrapper prefixes removed: "module."
 * (DataParallel / DistributedDataParallel), "model." and "state_dict." (checkpoint nesting). */
static void strip_prefixes(const char *name, char *out, size_t cap)
{
    static const char *const pre[] = {"module.", "model.", "state_dict."};
    bool again = true;
    while (again) {
        again = false;
        for (size_t i = 0; i < sizeof pre / sizeof *pre; i++) {
            size_t l = strlen(pre[i]);
            if (strncmp(name, pre[i], l) == 0 && name[l]) {
                name += l;
                again = true;
            }
        }
    }
    snprintf(out, cap, "%s", name);
}

/* Old normalisation names: a last component "gamma" -> "weight", "beta" -> "bias". False when
 * the name has neither. */
static bool rename_gamma_beta(const char *name, char *out, size_t cap)
{
    const char *dot = strrchr(name, '.');
    const char *leaf = dot ? dot + 1 : name;
    const char *to = strcmp(leaf, "gamma") == 0  ? "weight"
                     : strcmp(leaf, "beta") == 0 ? "bias"
                                                 : NULL;
    if (!to) return false;
    snprintf(out, cap, "%.*s%s", (int)(leaf - name), name, to);
    return true;
}

/* The module entry for a (remapped) file name: the name itself, then through the adapters.
 * The name used goes to out. */
static int resolve(const targets *ts, const char *name, bool adapters, char *out, size_t cap)
{
    snprintf(out, cap, "%s", name);
    int k = find_target(ts, name);
    if (k >= 0 || !adapters) return k;
    char stripped[600], renamed[600];
    strip_prefixes(name, stripped, sizeof stripped);
    if (strcmp(stripped, name) != 0 && (k = find_target(ts, stripped)) >= 0) {
        snprintf(out, cap, "%s", stripped);
        return k;
    }
    if (rename_gamma_beta(stripped, renamed, sizeof renamed) &&
        (k = find_target(ts, renamed)) >= 0) {
        snprintf(out, cap, "%s", renamed);
        return k;
    }
    return -1;
}

static bool glob_any(const char *const *globs, const char *name)
{
    for (size_t i = 0; globs && globs[i]; i++)
        if (fnmatch(globs[i], name, 0) == 0) return true;
    return false;
}

static bool wanted(const em_load_opts *o, const char *name)
{
    if (o->include && o->include[0] && !glob_any(o->include, name)) return false;
    return !glob_any(o->exclude, name);
}

/* Whether a file dtype may be converted to the module's: float to float, integer to integer. */
static bool convertible(em_dtype from, em_dtype to)
{
    if (from == to) return true;
    if (em_dtype_is_float(from) && em_dtype_is_float(to)) return true;
    return em_dtype_is_int(from) && em_dtype_is_int(to);
}

/* Appends "a, b, c" (up to about `room` characters, then "...") to b. */
static void list_brief(mbuf *b, const char *title, const em_load_list *l, size_t room)
{
    if (!l->n) return;
    char head[64];
    snprintf(head, sizeof head, "%s%d %s (", b->n ? "; " : "", l->n, title);
    mb_str(b, head);
    size_t start = b->n;
    for (int i = 0; i < l->n; i++) {
        if (b->n - start > room) {
            mb_str(b, ", ...");
            break;
        }
        if (i) mb_str(b, ", ");
        item_text(b, &l->items[i]);
    }
    mb_str(b, ")");
}

typedef struct plan_item {
    int target;
    em_tensor *t; /* plain reference */
} plan_item;

static em_status load_dict(em_module *m, const em_tensor_dict *d, const em_load_opts *opts,
                           em_load_report *rep, const char *src)
{
    const char *fn = "em_module_load";
    em_load_opts o = opts ? *opts : (em_load_opts){0};
    if (o.n_remap < 0 || (o.n_remap > 0 && !o.remap))
        return em_error(EM_ERR_INVALID_ARG, "%s: %d remap rules but remap is NULL", fn, o.n_remap);
    rule *rules = rules_compile(o.remap, o.n_remap, fn);
    if (!rules) return em_last_status();
    targets ts = {0};
    em_module_visit(m, collect_fn, &ts);
    int64_t nfile = em_tensor_dict_count(d);
    plan_item *plan = em_calloc((size_t)(nfile ? nfile : 1) * sizeof *plan);
    em_status st = EM_OK;
    if (ts.oom || !plan) {
        st = em_error(EM_ERR_OOM, "%s: out of memory", fn);
        goto out;
    }
    if (ts.n) qsort(ts.t, (size_t)ts.n, sizeof *ts.t, cmp_target); /* a module may have none */
    int nplan = 0;
    bool ok = true; /* no allocation failure while reporting */
    em_scope_begin();
    em_no_grad_begin();
    /* Exact names claim their entries first, so "fc.weight" beats an adapted
     * "module.fc.weight" whatever the file order. */
    for (int pass = 0; pass < 2 && st == EM_OK; pass++) {
        for (int64_t i = 0; i < nfile && st == EM_OK; i++) {
            const char *fname = em_tensor_dict_name_at(d, i);
            em_tensor *ft = em_tensor_dict_tensor_at(d, i);
            char *name = st_strdup(fname);
            for (int r = 0; name && r < o.n_remap; r++) {
                char *nn = rule_apply(&rules[r], name);
                em_free(name);
                name = nn;
            }
            if (!name) {
                st = em_last_status() != EM_OK ? em_last_status() : EM_ERR_OOM;
                break;
            }
            char used[600];
            int k = resolve(&ts, name, !o.no_adapters, used, sizeof used);
            bool exact = k >= 0 && strcmp(used, name) == 0;
            em_free(name);
            if ((pass == 0) != exact) continue; /* pass 0: exact names; pass 1: the rest */
            if (!wanted(&o, used)) {
                ok = ok && list_add(&rep->skipped, used, fname, NULL);
                continue;
            }
            if (k < 0) {
                ok = ok && list_add(&rep->unexpected, used, fname, NULL);
                continue;
            }
            target *tg = &ts.t[k];
            if (tg->claimed_by >= 0) {
                char det[800];
                snprintf(det, sizeof det, "%.600s already loaded from %.80s", tg->name,
                         em_tensor_dict_name_at(d, tg->claimed_by));
                ok = ok && list_add(&rep->unexpected, used, fname, det);
                continue;
            }
            em_tensor *cur = tg->e->tensor;
            em_shape fs = em_tensor_shape(ft), ms = em_tensor_shape(cur);
            em_dtype fdt = em_tensor_dtype(ft), mdt = em_tensor_dtype(cur);
            char s1[70], s2[70];
            tg->claimed_by = (int)i;
            if (!em_shape_equal(fs, ms)) {
                snprintf(tg->detail, sizeof tg->detail, "shape %s in the file, %s in the module",
                         em_shape_str(fs, s1, sizeof s1), em_shape_str(ms, s2, sizeof s2));
                tg->mismatched = true;
                continue;
            }
            if (!convertible(fdt, mdt)) {
                snprintf(tg->detail, sizeof tg->detail, "dtype %s in the file, %s in the module",
                         em_dtype_name(fdt), em_dtype_name(mdt));
                tg->mismatched = true;
                continue;
            }
            em_dtype want = o.keep_dtype ? fdt : mdt;
            em_device to = em_tensor_device(cur);
            bool scoped = em_backend_persistent_enter(to); /* the module's storage from now on */
            em_tensor *nt = em_to_device(want == fdt ? ft : em_cast(ft, want), to);
            /* an expanded view from a .pt file becomes the module's own memory */
            if (nt && !em_tensor_is_contiguous(nt)) nt = em_contiguous(nt);
            if (scoped) em_backend_persistent_leave(to);
            if (!nt) {
                st = em_last_status();
                break;
            }
            /* marked here, where a failure still changes nothing (em_module_set would) */
            if (!tg->e->is_buffer && em_dtype_is_float(want) && !em_tensor_requires_grad(nt) &&
                !em_requires_grad(nt, true)) {
                st = em_last_status();
                break;
            }
            plan[nplan++] = (plan_item){k, em_retain(nt)};
            if (fdt != mdt)
                snprintf(tg->detail, sizeof tg->detail, "%s %s %s", em_dtype_name(fdt),
                         o.keep_dtype ? "kept, module had" : "cast to", em_dtype_name(mdt));
        }
    }
    em_no_grad_end();
    em_scope_end();
    if (st != EM_OK) goto out;
    /* loaded, missing and mismatched in module order */
    int *by_order = em_alloc((size_t)(ts.n ? ts.n : 1) * sizeof *by_order);
    if (!by_order) ok = false;
    for (int k = 0; by_order && k < ts.n; k++) by_order[ts.t[k].order] = k;
    for (int j = 0; by_order && j < ts.n; j++) {
        const target *tg = &ts.t[by_order[j]];
        const char *fname = tg->claimed_by >= 0 ? em_tensor_dict_name_at(d, tg->claimed_by) : NULL;
        const char *det = tg->detail[0] ? tg->detail : NULL;
        if (!fname) {
            if (wanted(&o, tg->name)) ok = ok && list_add(&rep->missing, tg->name, NULL, NULL);
        } else {
            ok = ok &&
                 list_add(tg->mismatched ? &rep->mismatched : &rep->loaded, tg->name, fname, det);
        }
    }
    em_free(by_order);
    if (!ok) {
        st = em_error(EM_ERR_OOM, "%s: out of memory writing the report", fn);
        goto out;
    }
    if (!o.partial && (rep->missing.n || rep->unexpected.n || rep->mismatched.n)) {
        mbuf b = {0};
        list_brief(&b, "missing", &rep->missing, 80);
        list_brief(&b, "unexpected", &rep->unexpected, 80);
        list_brief(&b, "mismatched", &rep->mismatched, 120);
        list_free(&rep->loaded);
        st = em_error(EM_ERR_INVALID_ARG,
                      "%s: %.80s does not match the module (strict; nothing loaded): %.380s", fn,
                      src, b.p ? b.p : "out of memory");
        em_free(b.p);
        goto out;
    }
    /* Everything is accepted: swap the tensors in. */
    for (int j = 0; j < nplan; j++) {
        const char *name = ts.t[plan[j].target].name;
        const char *dot = strrchr(name, '.');
        em_module *owner = m;
        if (dot) {
            char path[600];
            snprintf(path, sizeof path, "%.*s", (int)(dot - name), name);
            owner = em_module_find(m, path);
        }
        em_status s = owner ? em_module_set(owner, dot ? dot + 1 : name, plan[j].t)
                            : em_error(EM_ERR_INTERNAL, "%s: no owner for %s", fn, name);
        plan[j].t = NULL;
        if (s != EM_OK && st == EM_OK) st = s;
    }
out:
    for (int64_t j = 0; plan && j < nfile; j++) em_release(plan[j].t);
    em_free(plan);
    for (int k = 0; k < ts.n; k++) em_free(ts.t[k].name);
    em_free(ts.t);
    rules_free(rules, o.n_remap);
    return st;
}

em_status em_module_load_dict(em_module *m, const em_tensor_dict *d, const em_load_opts *opts,
                              em_load_report *report)
{
    if (!m || !d)
        return em_error(EM_ERR_INVALID_ARG, "em_module_load: %s is NULL", !m ? "module" : "dict");
    em_load_report local = {0};
    em_status st = load_dict(m, d, opts, report ? report : &local, "the dictionary");
    em_load_report_free(&local);
    return st;
}

em_status em_module_load(em_module *m, const char *path, const em_load_opts *opts,
                         em_load_report *report)
{
    if (!m || !path)
        return em_error(EM_ERR_INVALID_ARG, "em_module_load: %s is NULL", !m ? "module" : "path");
    /* the format is told by content: a zip archive (torch.save since 1.6) or safetensors */
    em_tensor_dict *d = st_load_any("em_module_load", path, NULL, NULL);
    if (!d) return em_last_status();
    em_load_report local = {0};
    em_status st = load_dict(m, d, opts, report ? report : &local, path);
    em_load_report_free(&local);
    em_tensor_dict_free(d);
    return st;
}
