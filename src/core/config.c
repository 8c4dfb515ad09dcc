/* Configuration: every key is a row of config_keys.def with a type, a default and its allowed
 * values. ember.toml, files loaded with em_config_load_file, the EMBER_* environment and
 * em_config_set are layers (a later one wins), read once into typed values when they change;
 * the getters only load the winning value. Keys: docs/config.md. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core_impl.h"

#define BASE_FILE "ember.toml"
#define ERR_CAP   512

extern char **environ;

typedef enum cfg_type { T_BOOL, T_INT, T_U64, T_ENUM, T_STRING } cfg_type;

typedef struct cfg_def {
    const char *name, *def, *values;
    cfg_type type;
    int64_t min, max;
} cfg_def;

static const cfg_def defs[CFG_COUNT] = {
#define CFG(id, name_, type_, def_, min_, max_, values_, component, doc)                           \
    [CFG_##id] = {.name = name_,                                                                   \
                  .def = def_,                                                                     \
                  .values = values_,                                                               \
                  .type = T_##type_,                                                               \
                  .min = min_,                                                                     \
                  .max = max_},
#include "config_keys.def"
#undef CFG
};

/* The layers, a later one winning. */
enum { L_BASE, L_FILE, L_ENV, L_SET, N_LAYERS };

/* One layer's value of a key. Strings are interned: they stay valid for the life of the
 * process, so a getter's result survives any later change. */
typedef struct cfg_val {
    bool set;
    int64_t num;     /* bool 0/1, the integer (an unsigned one's bits), an enum's index */
    const char *str; /* the canonical text */
    const char *src; /* where it came from: "ember.toml:3", "EMBER_THREADS", "em_config_set" */
} cfg_val;

/* A key of a family (log.<component>), by name. */
typedef struct fam_key {
    char *name;
    cfg_val v[N_LAYERS];
} fam_key;

static pthread_mutex_t cfg_lock = PTHREAD_MUTEX_INITIALIZER;
static cfg_val vals[CFG_COUNT][N_LAYERS]; /* under cfg_lock */
static cfg_val defaults[CFG_COUNT];       /* parsed once, at start-up */
static fam_key *fams;                     /* under cfg_lock */
static int n_fams, cap_fams;

/* The winning value of each key, for the getters. */
static _Atomic int64_t win_num[CFG_COUNT];
static const char *_Atomic win_str[CFG_COUNT];
static const char *_Atomic win_src[CFG_COUNT]; /* NULL: the default */

typedef struct istr {
    struct istr *next;
    char s[];
} istr;
static istr *interned;
static pthread_mutex_t intern_lock = PTHREAD_MUTEX_INITIALIZER;

/* NULL on out of memory. */
static const char *intern(const char *s)
{
    pthread_mutex_lock(&intern_lock);
    const char *r = NULL;
    for (istr *it = interned; it && !r; it = it->next)
        if (!strcmp(it->s, s)) r = it->s;
    if (!r) {
        size_t len = strlen(s);
        istr *it = malloc(sizeof *it + len + 1);
        if (it) {
            memcpy(it->s, s, len + 1);
            it->next = interned;
            interned = it;
            r = it->s;
        }
    }
    pthread_mutex_unlock(&intern_lock);
    return r;
}

/* ---- keys and values --------------------------------------------------------------------- */

static bool is_family(int k)
{
    return strchr(defs[k].name, '<') != NULL;
}

/* The key's id, -1 when unknown. "log.*" (the [log] table's "*") is "log"; any other "log.X"
 * is the family log.<component>. */
static int key_id(const char *key)
{
    if (!strcmp(key, "log.*")) return CFG_LOG;
    for (int k = 0; k < CFG_COUNT; k++) {
        const char *lt = strchr(defs[k].name, '<');
        if (!lt) {
            if (!strcmp(key, defs[k].name)) return k;
        } else {
            size_t plen = (size_t)(lt - defs[k].name);
            if (!strncmp(key, defs[k].name, plen) && key[plen] && !strchr(key + plen, '*'))
                return k;
        }
    }
    return -1;
}

static bool same_word(const char *a, const char *b, size_t blen)
{
    return strlen(a) == blen && !strncasecmp(a, b, blen);
}

/* The vocabulary of booleans, in either case: true/false, on/off, yes/no, 1/0. */
static int parse_bool(const char *s)
{
    static const char *const yes[] = {"true", "on", "yes", "1"}, *const no[] = {"false", "off",
                                                                                "no", "0"};
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(s, yes[i])) return 1;
        if (!strcasecmp(s, no[i])) return 0;
    }
    return -1;
}

/* The index of s among an enum's '|'-separated values (any case), -1 when absent, -2 when out
 * of memory; *canon gets the table's spelling (interned). */
static int enum_index(const char *values, const char *s, const char **canon)
{
    int i = 0;
    for (const char *p = values;; i++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (same_word(s, p, len)) {
            char buf[64];
            snprintf(buf, sizeof buf, "%.*s", (int)len, p);
            *canon = intern(buf);
            return *canon ? i : -2;
        }
        if (!bar) return -1;
        p = bar + 1;
    }
}

/* "a, b, c" from "a|b|c". */
static void list_values(const char *values, char *buf, size_t cap)
{
    size_t n = 0;
    for (const char *p = values; *p && n + 3 < cap; p++) {
        if (*p == '|') {
            buf[n++] = ',';
            buf[n++] = ' ';
        } else {
            buf[n++] = *p;
        }
    }
    buf[n] = '\0';
}

/* Parses text as key k's value into *out (src not set). False with the reason in why ("is not
 * an integer from 0 to 64"), or out of memory (why empty). */
static bool parse_value(int k, const char *text, cfg_val *out, char *why, size_t cap)
{
    const cfg_def *d = &defs[k];
    char buf[32];
    why[0] = '\0';
    *out = (cfg_val){.set = true};
    switch (d->type) {
    case T_BOOL: {
        int b = parse_bool(text);
        if (b < 0) {
            snprintf(why, cap, "is not a boolean (true/false, on/off, yes/no, 1/0)");
            return false;
        }
        out->num = b;
        out->str = intern(b ? "true" : "false");
        break;
    }
    case T_INT: {
        bool auto_ok = d->values && !strcmp(d->values, "auto");
        char *end;
        errno = 0;
        long long v = 0;
        if (auto_ok && !strcasecmp(text, "auto")) {
            v = 0;
        } else {
            v = strtoll(text, &end, 10);
            if (end == text || *end || isspace((unsigned char)text[0]) || errno == ERANGE ||
                v < d->min || v > d->max) {
                snprintf(why, cap, "is not an integer from %lld to %lld%s", (long long)d->min,
                         (long long)d->max, auto_ok ? " or auto (0)" : "");
                return false;
            }
        }
        out->num = v;
        snprintf(buf, sizeof buf, "%lld", v);
        out->str = intern(v == 0 && auto_ok ? "auto" : buf);
        break;
    }
    case T_U64: {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(text, &end, 10);
        if (end == text || *end || !isdigit((unsigned char)text[0]) || errno == ERANGE) {
            snprintf(why, cap, "is not an unsigned 64-bit integer");
            return false;
        }
        out->num = (int64_t)v;
        snprintf(buf, sizeof buf, "%llu", v);
        out->str = intern(buf);
        break;
    }
    case T_ENUM: {
        const char *canon = NULL;
        int i = enum_index(d->values, text, &canon);
        /* a choice with on and off takes every boolean word for them */
        int b = i == -1 ? parse_bool(text) : -1;
        if (b >= 0 && enum_index(d->values, "on", &canon) >= 0)
            i = enum_index(d->values, b ? "on" : "off", &canon);
        if (i == -2) return false;
        if (i < 0) {
            char list[160];
            list_values(d->values, list, sizeof list);
            snprintf(why, cap, "is not one of %s", list);
            return false;
        }
        out->num = i;
        out->str = canon;
        break;
    }
    case T_STRING: out->str = intern(text); break;
    }
    return out->str != NULL;
}

/* ---- the winning values ------------------------------------------------------------------ */

static const cfg_val *top(const cfg_val v[N_LAYERS])
{
    for (int l = N_LAYERS - 1; l >= 0; l--)
        if (v[l].set) return &v[l];
    return NULL;
}

/* Caller holds cfg_lock. */
static void publish(int k)
{
    const cfg_val *v = top(vals[k]);
    const cfg_val *w = v ? v : &defaults[k];
    atomic_store(&win_num[k], w->num);
    atomic_store(&win_str[k], w->str);
    atomic_store(&win_src[k], v ? v->src : NULL);
}

/* The family key named name (created when missing and create is set); NULL when absent or out
 * of memory. Caller holds cfg_lock. */
static fam_key *fam_find(const char *name, bool create)
{
    for (int i = 0; i < n_fams; i++)
        if (!strcmp(fams[i].name, name)) return &fams[i];
    if (!create) return NULL;
    if (n_fams == cap_fams) {
        int cap = cap_fams ? 2 * cap_fams : 8;
        fam_key *grown = realloc(fams, (size_t)cap * sizeof *grown);
        if (!grown) return NULL;
        fams = grown;
        cap_fams = cap;
    }
    char *copy = strdup(name);
    if (!copy) return NULL;
    fams[n_fams] = (fam_key){.name = copy};
    return &fams[n_fams++];
}

/* Sets (or with v->set false, clears) key's value in layer l. False on out of memory. Caller
 * holds cfg_lock. */
static bool put(int k, const char *key, int l, const cfg_val *v)
{
    if (is_family(k)) {
        fam_key *f = fam_find(key, v->set);
        if (f) f->v[l] = *v;
        return f || !v->set;
    }
    vals[k][l] = *v;
    publish(k);
    return true;
}

/* Clears layer l of every key. Caller holds cfg_lock. */
static void clear_layer(int l)
{
    for (int k = 0; k < CFG_COUNT; k++) {
        vals[k][l] = (cfg_val){0};
        publish(k);
    }
    for (int i = 0; i < n_fams; i++) fams[i].v[l] = (cfg_val){0};
}

/* ---- pending settings and warnings ------------------------------------------------------- */

/* Settings read from one source, checked before they are stored, and the warnings about the
 * ones left out (logged once the lock is released). */
typedef struct entry {
    int k;
    char *key;
    cfg_val v;
} entry;

typedef struct batch {
    entry *e;
    int n, cap;
    char **warn;
    int n_warn, cap_warn;
    bool oom;
} batch;

static void batch_warn(batch *b, const char *fmt, ...) EM_PRINTF(2, 3);

static void batch_warn(batch *b, const char *fmt, ...)
{
    char msg[ERR_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (b->n_warn == b->cap_warn) {
        int cap = b->cap_warn ? 2 * b->cap_warn : 4;
        char **grown = realloc(b->warn, (size_t)cap * sizeof *grown);
        if (!grown) {
            b->oom = true;
            return;
        }
        b->warn = grown;
        b->cap_warn = cap;
    }
    char *copy = strdup(msg);
    if (!copy) {
        b->oom = true;
        return;
    }
    b->warn[b->n_warn++] = copy;
}

/* Checks key = text from `where` ("ember.toml:3", "EMBER_SEED") and adds it, or a warning. */
static void batch_add(batch *b, const char *key, const char *text, const char *where)
{
    int k = key_id(key);
    if (k < 0) {
        batch_warn(b, "%s: unknown key '%s'; ignored", where, key);
        return;
    }
    cfg_val v;
    char why[256];
    if (!parse_value(k, text, &v, why, sizeof why)) {
        if (why[0])
            batch_warn(b, "%s: %s = '%s' %s; ignored", where, key, text, why);
        else
            b->oom = true;
        return;
    }
    v.src = intern(where);
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 16;
        entry *grown = realloc(b->e, (size_t)cap * sizeof *grown);
        if (!grown) {
            b->oom = true;
            return;
        }
        b->e = grown;
        b->cap = cap;
    }
    char *copy = strdup(k == CFG_LOG ? defs[CFG_LOG].name : key);
    if (!copy || !v.src) {
        free(copy);
        b->oom = true;
        return;
    }
    b->e[b->n++] = (entry){.k = k, .key = copy, .v = v};
}

/* Stores the batch's settings in layer l; false on out of memory. Caller holds cfg_lock. */
static bool batch_store(const batch *b, int l)
{
    bool ok = true;
    for (int i = 0; i < b->n; i++) ok &= put(b->e[i].k, b->e[i].key, l, &b->e[i].v);
    return ok;
}

/* Logs the warnings (without the lock: the logger may read the configuration) and frees. */
static void batch_finish(batch *b)
{
    for (int i = 0; i < b->n_warn; i++) {
        em_log_msg("config", EM_LOG_WARN, "%s", b->warn[i]);
        free(b->warn[i]);
    }
    if (b->oom) em_log_msg("config", EM_LOG_WARN, "out of memory: some settings not read");
    for (int i = 0; i < b->n; i++) free(b->e[i].key);
    free(b->e);
    free(b->warn);
    *b = (batch){0};
}

typedef struct file_ctx {
    batch *b;
    const char *path;
} file_ctx;

static bool file_entry(void *ctx, const char *key, const char *value, int line)
{
    file_ctx *c = ctx;
    char where[600];
    snprintf(where, sizeof where, "%s:%d", c->path, line);
    batch_add(c->b, key, value, where);
    return true;
}

/* Reads path into b: EM_OK (a missing file with allow_missing: nothing), else the status with
 * the reason in err. */
static em_status read_file(const char *path, bool allow_missing, batch *b, char *err, size_t cap)
{
    char *text;
    bool missing;
    em_status st = core_toml_read(path, &text, &missing, err, cap);
    if (st != EM_OK) return missing && allow_missing ? EM_OK : st;
    file_ctx c = {b, path};
    bool ok = core_toml_parse(text, path, file_entry, &c, err, cap);
    free(text);
    return ok ? EM_OK : EM_ERR_FORMAT;
}

/* EMBER_ + the key upper-cased, '.' and '-' becoming '_'. */
static void env_name(const char *key, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "EMBER_%s", key);
    for (size_t i = 6; i < n && i < cap; i++)
        buf[i] = (buf[i] == '.' || buf[i] == '-') ? '_' : (char)toupper((unsigned char)buf[i]);
}

/* The EMBER_* variables of every key into b; an empty variable counts as unset. */
static void read_env(batch *b)
{
    for (int k = 0; k < CFG_COUNT; k++) {
        if (is_family(k)) continue;
        char name[128];
        env_name(defs[k].name, name, sizeof name);
        const char *v = getenv(name);
        if ((!v || !*v) && k == CFG_THREADS) {
            snprintf(name, sizeof name, "EMBER_NUM_THREADS");
            v = getenv(name);
        }
        if (v && *v) batch_add(b, defs[k].name, v, name);
    }
    /* EMBER_LOG_<COMPONENT>; EMBER_LOG_FILE is the log_file key, not a component "file" */
    for (char **env = environ; env && *env; env++) {
        const char *e = *env;
        if (strncmp(e, "EMBER_LOG_", 10) || !strncmp(e, "EMBER_LOG_FILE=", 15)) continue;
        const char *eq = strchr(e, '=');
        if (!eq || eq == e + 10 || eq - e > 200 || !eq[1]) continue;
        char key[256] = "log.", name[256];
        size_t n = 4;
        for (const char *c = e + 10; c < eq; c++) key[n++] = (char)tolower((unsigned char)*c);
        key[n] = '\0';
        snprintf(name, sizeof name, "%.*s", (int)(eq - e), e);
        batch_add(b, key, eq + 1, name);
    }
}

/* ---- applying settings ------------------------------------------------------------------- */

enum {
    APPLY_LOG = 1,
    APPLY_LOG_FILE = 2,
    APPLY_THREADS = 4,
    APPLY_SEED = 8,
    APPLY_ALL = 15,
};

static int apply_flags(int k)
{
    switch (k) {
    case CFG_LOG:
    case CFG_LOG_COMPONENT: return APPLY_LOG;
    case CFG_LOG_FILE: return APPLY_LOG_FILE;
    case CFG_THREADS: return APPLY_THREADS;
    case CFG_SEED: return APPLY_SEED;
    default: return 0;
    }
}

static int batch_flags(const batch *b)
{
    int f = 0;
    for (int i = 0; i < b->n; i++) f |= apply_flags(b->e[i].k);
    return f;
}

/* "log" first, as setting every level resets per-component ones; then each log.<component>.
 * Only keys that a layer sets are applied: an absent one leaves the current setting alone. */
static void apply_log_levels(void)
{
    if (core_cfg_is_set(CFG_LOG))
        em_log_set_level(NULL, (em_log_level)em_log_level_parse(core_cfg_str(CFG_LOG)));
    typedef struct level {
        char name[200];
        const char *value;
    } level;
    level *levels = NULL;
    int n = 0;
    pthread_mutex_lock(&cfg_lock);
    levels = n_fams ? malloc((size_t)n_fams * sizeof *levels) : NULL;
    for (int i = 0; levels && i < n_fams; i++) {
        const cfg_val *v = top(fams[i].v);
        if (!v) continue;
        snprintf(levels[n].name, sizeof levels[n].name, "%s", fams[i].name + 4);
        levels[n++].value = v->str;
    }
    bool oom = n_fams && !levels;
    pthread_mutex_unlock(&cfg_lock);
    if (oom) em_log_msg("config", EM_LOG_WARN, "out of memory: component log levels not set");
    for (int i = 0; i < n; i++)
        em_log_set_level(levels[i].name, (em_log_level)em_log_level_parse(levels[i].value));
    free(levels);
}

static void apply(int flags)
{
    if (flags & APPLY_LOG) apply_log_levels();
    if ((flags & APPLY_LOG_FILE) && core_cfg_is_set(CFG_LOG_FILE)) {
        const char *path = core_cfg_str(CFG_LOG_FILE);
        em_log_to_file(*path ? path : NULL);
    }
    if ((flags & APPLY_THREADS) && core_cfg_is_set(CFG_THREADS)) {
        int64_t n = core_cfg_int(CFG_THREADS);
        em_set_num_threads(n == 0 ? core_hw_threads() : (int)n);
    }
    if ((flags & APPLY_SEED) && core_cfg_is_set(CFG_SEED))
        em_seed((uint64_t)core_cfg_int(CFG_SEED));
}

/* Applies without leaving an error pending: a bad setting in a file or the environment is a
 * warning, not a failure of whichever call happened to initialise the library. */
static void apply_quietly(int flags)
{
    bool had = em_failed();
    uint64_t mark = core_error_mark();
    apply(flags);
    if (!core_failed_since(mark)) return;
    /* with an earlier error pending this one's message was not recorded; that one stays */
    em_log_msg("config", EM_LOG_WARN, "applying the configuration: %s",
               had ? "failed" : em_last_error());
    core_error_forget(mark);
}

/* Re-reads ember.toml (unless it is malformed: then EM_ERR_FORMAT with the reason in err, and
 * the layer stays) and the environment, then applies everything; the warnings come after, so
 * that the levels a file sets already hold for them. */
static em_status load_base_and_env(char *err, size_t cap)
{
    batch base = {0}, env = {0};
    em_status st = read_file(BASE_FILE, true, &base, err, cap);
    read_env(&env);
    pthread_mutex_lock(&cfg_lock);
    bool ok = true;
    if (st == EM_OK) {
        clear_layer(L_BASE);
        ok &= batch_store(&base, L_BASE);
    }
    clear_layer(L_ENV);
    ok &= batch_store(&env, L_ENV);
    pthread_mutex_unlock(&cfg_lock);
    apply_quietly(APPLY_ALL);
    base.oom |= !ok;
    batch_finish(&base);
    batch_finish(&env);
    return st;
}

/* ---- initialisation ---------------------------------------------------------------------- */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
/* Set while this thread runs the initialisation, whose own calls back into the library (which
 * all call core_init) must not wait for themselves. */
static EM_THREAD_LOCAL bool initializing;

static void do_init(void)
{
    initializing = true;
    for (int k = 0; k < CFG_COUNT; k++) {
        char why[256];
        if (defs[k].def && !parse_value(k, defs[k].def, &defaults[k], why, sizeof why))
            defaults[k] = (cfg_val){0}; /* out of memory: the type's zero */
        defaults[k].set = false;
        publish(k);
    }
    char err[ERR_CAP];
    em_status st = load_base_and_env(err, sizeof err);
    if (st != EM_OK) em_log_msg("config", EM_LOG_WARN, "ignoring %s: %s", BASE_FILE, err);
    initializing = false;
}

void core_init(void)
{
    if (initializing) return;
    pthread_once(&init_once, do_init);
}

/* ---- typed getters ----------------------------------------------------------------------- */

bool core_cfg_bool(core_cfg_key k)
{
    core_init();
    return atomic_load(&win_num[k]) != 0;
}

int64_t core_cfg_int(core_cfg_key k)
{
    core_init();
    return atomic_load(&win_num[k]);
}

const char *core_cfg_str(core_cfg_key k)
{
    core_init();
    return atomic_load(&win_str[k]);
}

bool core_cfg_is(core_cfg_key k, const char *value)
{
    const char *v = core_cfg_str(k);
    return v && !strcmp(v, value);
}

bool core_cfg_is_set(core_cfg_key k)
{
    core_init();
    return atomic_load(&win_src[k]) != NULL;
}

const char *core_cfg_source(core_cfg_key k)
{
    core_init();
    const char *src = atomic_load(&win_src[k]);
    return src ? src : "the default";
}

int64_t core_max_tensor_bytes(void)
{
    return core_cfg_int(CFG_MAX_TENSOR_MB) << 20;
}

/* ---- the public entry points ------------------------------------------------------------- */

static const char *type_name(cfg_type t)
{
    switch (t) {
    case T_BOOL: return "a boolean";
    case T_INT:
    case T_U64: return "an integer";
    case T_ENUM: return "a choice";
    case T_STRING: return "a string";
    }
    return "?";
}

/* The key's id for a getter fn that takes the given types, or -1 with EM_ERR_INVALID_ARG. */
static int getter_key(const char *fn, const char *key, cfg_type a, cfg_type b)
{
    core_init();
    int k = key ? key_id(key) : -1;
    if (k < 0) {
        if (key)
            em_error(EM_ERR_INVALID_ARG, "%s: unknown key '%s'", fn, key);
        else
            em_error(EM_ERR_INVALID_ARG, "%s: key is NULL", fn);
        return -1;
    }
    if (defs[k].type != a && defs[k].type != b) {
        em_error(EM_ERR_INVALID_ARG, "%s: %s is %s key", fn, key, type_name(defs[k].type));
        return -1;
    }
    return k;
}

bool em_config_get_bool(const char *key)
{
    int k = getter_key("em_config_get_bool", key, T_BOOL, T_BOOL);
    return k >= 0 && core_cfg_bool((core_cfg_key)k);
}

int64_t em_config_get_int(const char *key)
{
    int k = getter_key("em_config_get_int", key, T_INT, T_U64);
    return k >= 0 ? core_cfg_int((core_cfg_key)k) : 0;
}

const char *em_config_get_string(const char *key)
{
    int k = getter_key("em_config_get_string", key, T_STRING, T_ENUM);
    if (k < 0) return NULL;
    if (!is_family(k)) return core_cfg_str((core_cfg_key)k);
    pthread_mutex_lock(&cfg_lock);
    fam_key *f = fam_find(key, false);
    const cfg_val *v = f ? top(f->v) : NULL;
    const char *r = v ? v->str : NULL;
    pthread_mutex_unlock(&cfg_lock);
    return r ? r : core_cfg_str(CFG_LOG);
}

bool em_config_is_set(const char *key)
{
    core_init();
    int k = key ? key_id(key) : -1;
    if (k < 0) {
        if (key)
            em_error(EM_ERR_INVALID_ARG, "em_config_is_set: unknown key '%s'", key);
        else
            em_error(EM_ERR_INVALID_ARG, "em_config_is_set: key is NULL");
        return false;
    }
    if (!is_family(k)) return core_cfg_is_set((core_cfg_key)k);
    pthread_mutex_lock(&cfg_lock);
    fam_key *f = fam_find(key, false);
    bool set = f && top(f->v);
    pthread_mutex_unlock(&cfg_lock);
    return set;
}

em_status em_config_set(const char *key, const char *value)
{
    core_init();
    if (!key || !*key) return em_error(EM_ERR_INVALID_ARG, "em_config_set: empty key");
    int k = key_id(key);
    if (k < 0)
        return em_error(EM_ERR_INVALID_ARG, "em_config_set: unknown key '%s' (docs/config.md)",
                        key);
    cfg_val v = {0};
    char why[256];
    if (value && !parse_value(k, value, &v, why, sizeof why)) {
        if (!why[0]) return em_error(EM_ERR_OOM, "em_config_set: out of memory setting '%s'", key);
        return em_error(EM_ERR_INVALID_ARG, "em_config_set: %s = '%s' %s", key, value, why);
    }
    v.src = value ? intern("em_config_set") : NULL;
    if (value && !v.src)
        return em_error(EM_ERR_OOM, "em_config_set: out of memory setting '%s'", key);
    pthread_mutex_lock(&cfg_lock);
    bool ok = put(k, k == CFG_LOG ? defs[CFG_LOG].name : key, L_SET, &v);
    pthread_mutex_unlock(&cfg_lock);
    if (!ok) return em_error(EM_ERR_OOM, "em_config_set: out of memory setting '%s'", key);
    uint64_t mark = core_error_mark();
    apply(apply_flags(k));
    return core_failed_since(mark) ? em_last_status() : EM_OK;
}

em_status em_config_load_file(const char *path)
{
    core_init();
    if (!path) return em_error(EM_ERR_INVALID_ARG, "em_config_load_file: path is NULL");
    batch b = {0};
    char err[ERR_CAP];
    em_status st = read_file(path, false, &b, err, sizeof err);
    if (st != EM_OK) {
        batch_finish(&b);
        return em_error(st, "em_config_load_file: %s", err);
    }
    pthread_mutex_lock(&cfg_lock);
    bool ok = batch_store(&b, L_FILE);
    pthread_mutex_unlock(&cfg_lock);
    apply_quietly(batch_flags(&b));
    batch_finish(&b);
    if (!ok) return em_error(EM_ERR_OOM, "em_config_load_file: out of memory storing %s", path);
    return EM_OK;
}

em_status em_config_reload(void)
{
    core_init();
    char err[ERR_CAP];
    em_status st = load_base_and_env(err, sizeof err);
    if (st != EM_OK) return em_error(st, "em_config_reload: %s", err);
    return EM_OK;
}
