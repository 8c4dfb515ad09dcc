/* Configuration: a reader for the TOML subset Ember uses, the layers (ember.toml < files loaded
 * by em_config_load_file < EMBER_* environment < em_config_set) and core_init, which loads them
 * once and applies log levels, the log file, the thread count, the seed and the tensor size limit.
 * Keys: docs/config.md. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_impl.h"

#define BASE_FILE "ember.toml"
#define ERR_CAP   512

extern char **environ;

typedef struct kv {
    char *key;
    const char *val; /* interned */
} kv;

typedef struct kv_list {
    kv *items;
    int n, cap;
} kv_list;

static pthread_mutex_t cfg_lock = PTHREAD_MUTEX_INITIALIZER;
static kv_list base_layer; /* ember.toml in the working directory */
static kv_list file_layer; /* em_config_load_file, later files winning */
static kv_list set_layer;  /* em_config_set */

/* Every value ever handed out stays valid for the life of the process: values are interned and
 * never freed, so em_config_get's result survives a reload. Configuration is small. */
typedef struct istr {
    struct istr *next;
    char s[];
} istr;
static istr *interned;

/* Caller holds cfg_lock. NULL on out of memory. */
static const char *intern(const char *s)
{
    for (istr *it = interned; it; it = it->next)
        if (!strcmp(it->s, s)) return it->s;
    size_t len = strlen(s);
    istr *it = malloc(sizeof *it + len + 1);
    if (!it) return NULL;
    memcpy(it->s, s, len + 1);
    it->next = interned;
    interned = it;
    return it->s;
}

/* ---- key/value lists --------------------------------------------------------------------- */

static kv *kv_find(const kv_list *l, const char *key)
{
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->items[i].key, key)) return &l->items[i];
    return NULL;
}

/* Sets key to an already interned value (NULL removes it). False on out of memory. */
static bool kv_put(kv_list *l, const char *key, const char *val)
{
    kv *e = kv_find(l, key);
    if (e && val) {
        e->val = val;
        return true;
    }
    if (e) {
        free(e->key);
        *e = l->items[--l->n];
        return true;
    }
    if (!val) return true;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        kv *grown = realloc(l->items, (size_t)cap * sizeof *grown);
        if (!grown) return false;
        l->items = grown;
        l->cap = cap;
    }
    char *k = strdup(key);
    if (!k) return false;
    l->items[l->n++] = (kv){.key = k, .val = val};
    return true;
}

static void kv_clear(kv_list *l)
{
    for (int i = 0; i < l->n; i++) free(l->items[i].key);
    free(l->items);
    *l = (kv_list){0};
}

/* ---- the TOML subset --------------------------------------------------------------------- */

typedef struct sbuf {
    char *s;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_putc(sbuf *b, char c)
{
    if (b->oom) return;
    if (b->n + 2 > b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        char *grown = realloc(b->s, cap);
        if (!grown) {
            b->oom = true;
            return;
        }
        b->s = grown;
        b->cap = cap;
    }
    b->s[b->n++] = c;
    b->s[b->n] = '\0';
}

static void sb_puts(sbuf *b, const char *s)
{
    while (*s) sb_putc(b, *s++);
}

static const char *sb_str(sbuf *b)
{
    return b->s ? b->s : "";
}

static void sb_reset(sbuf *b)
{
    b->n = 0;
    if (b->s) b->s[0] = '\0';
}

typedef struct parser {
    const char *p; /* cursor into the NUL-terminated text */
    const char *path;
    int line;
    bool failed;
    bool scratch; /* check only: values are not interned (core_config_parse_memory) */
    char err[ERR_CAP];
} parser;

static bool fail(parser *ps, const char *fmt, ...) EM_PRINTF(2, 3);

static bool fail(parser *ps, const char *fmt, ...)
{
    if (ps->failed) return false;
    ps->failed = true;
    int n = snprintf(ps->err, sizeof ps->err, "%s:%d: ", ps->path, ps->line);
    if (n < 0 || n >= (int)sizeof ps->err) return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ps->err + n, sizeof ps->err - (size_t)n, fmt, ap);
    va_end(ap);
    return false;
}

static bool at_eol(const parser *ps)
{
    return *ps->p == '\n' || *ps->p == '\0' || (*ps->p == '\r' && ps->p[1] == '\n');
}

static void skip_ws(parser *ps)
{
    while (*ps->p == ' ' || *ps->p == '\t') ps->p++;
}

/* Whitespace, an optional comment, then the end of the line. */
static bool expect_eol(parser *ps, const char *after)
{
    skip_ws(ps);
    if (*ps->p == '#')
        while (!at_eol(ps)) ps->p++;
    if (!at_eol(ps)) return fail(ps, "unexpected '%c' after %s", *ps->p, after);
    return true;
}

static bool is_bare(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '-';
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static void put_utf8(sbuf *b, uint32_t cp)
{
    if (cp < 0x80) {
        sb_putc(b, (char)cp);
    } else if (cp < 0x800) {
        sb_putc(b, (char)(0xc0 | (cp >> 6)));
        sb_putc(b, (char)(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
        sb_putc(b, (char)(0xe0 | (cp >> 12)));
        sb_putc(b, (char)(0x80 | ((cp >> 6) & 0x3f)));
        sb_putc(b, (char)(0x80 | (cp & 0x3f)));
    } else {
        sb_putc(b, (char)(0xf0 | (cp >> 18)));
        sb_putc(b, (char)(0x80 | ((cp >> 12) & 0x3f)));
        sb_putc(b, (char)(0x80 | ((cp >> 6) & 0x3f)));
        sb_putc(b, (char)(0x80 | (cp & 0x3f)));
    }
}

/* A basic ("...", escapes) or literal ('...') single-line string; the cursor is on the quote. */
static bool parse_string(parser *ps, sbuf *out)
{
    char q = *ps->p;
    if (ps->p[1] == q && ps->p[2] == q) return fail(ps, "multi-line strings are not supported");
    ps->p++;
    for (;;) {
        char c = *ps->p;
        if (at_eol(ps)) return fail(ps, "unterminated string");
        ps->p++;
        if (c == q) return true;
        if ((unsigned char)c < 0x20 && c != '\t') return fail(ps, "control character in a string");
        if (c != '\\' || q == '\'') {
            sb_putc(out, c);
            continue;
        }
        char e = *ps->p++;
        switch (e) {
        case 'b': sb_putc(out, '\b'); break;
        case 't': sb_putc(out, '\t'); break;
        case 'n': sb_putc(out, '\n'); break;
        case 'f': sb_putc(out, '\f'); break;
        case 'r': sb_putc(out, '\r'); break;
        case '"': sb_putc(out, '"'); break;
        case '\\': sb_putc(out, '\\'); break;
        case 'u':
        case 'U': {
            int len = e == 'u' ? 4 : 8;
            uint32_t cp = 0;
            for (int i = 0; i < len; i++) {
                int h = hexval(ps->p[i]);
                if (h < 0) return fail(ps, "bad \\%c escape", e);
                cp = cp * 16 + (uint32_t)h;
            }
            if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                return fail(ps, "\\%c escape is not a Unicode scalar value", e);
            ps->p += len;
            put_utf8(out, cp);
            break;
        }
        default: ps->p--; return fail(ps, "unknown escape '\\%c'", at_eol(ps) ? ' ' : e);
        }
    }
}

/* One key, dotted parts joined with '.': bare parts or quoted strings, spaces around dots. */
static bool parse_key(parser *ps, sbuf *out)
{
    for (;;) {
        skip_ws(ps);
        if (*ps->p == '"' || *ps->p == '\'') {
            if (!parse_string(ps, out)) return false;
        } else if (is_bare(*ps->p)) {
            while (is_bare(*ps->p)) sb_putc(out, *ps->p++);
        } else {
            if (at_eol(ps)) return fail(ps, "expected a key");
            return fail(ps, "expected a key, found '%c'", *ps->p);
        }
        skip_ws(ps);
        if (*ps->p != '.') return true;
        ps->p++;
        sb_putc(out, '.');
    }
}

/* A run of digits where '_' may only stand between two digits; appends the digits. */
static bool digit_run(const char **s, sbuf *out, int (*isdig)(int))
{
    const char *p = *s;
    if (!isdig((unsigned char)*p)) return false;
    while (isdig((unsigned char)*p) || *p == '_') {
        if (*p == '_') {
            if (!isdig((unsigned char)p[1])) return false;
        } else {
            sb_putc(out, *p);
        }
        p++;
    }
    *s = p;
    return true;
}

static int is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static int is_odigit(int c)
{
    return c >= '0' && c <= '7';
}

static int is_bdigit(int c)
{
    return c == '0' || c == '1';
}

/* A TOML integer or float token; writes its canonical text (integers in decimal, floats as
 * written without '_' or '+'). */
static bool parse_number(parser *ps, const char *tok, sbuf *out)
{
    const char *s = tok;
    char sign = 0;
    if (*s == '+' || *s == '-') sign = *s++;
    if (!strcmp(s, "inf") || !strcmp(s, "nan")) {
        if (sign == '-') sb_putc(out, '-');
        sb_puts(out, s);
        return true;
    }
    sbuf digits = {0};
    bool ok = false;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'o' || s[1] == 'b')) {
        int base = s[1] == 'x' ? 16 : s[1] == 'o' ? 8 : 2;
        int (*isdig)(int) = base == 16 ? isxdigit : base == 8 ? is_odigit : is_bdigit;
        s += 2;
        if (sign) {
            fail(ps, "a sign is not allowed on '%s'", tok);
        } else if (!digit_run(&s, &digits, isdig) || *s) {
            fail(ps, "invalid integer '%s'", tok);
        } else {
            errno = 0;
            unsigned long long v = strtoull(sb_str(&digits), NULL, base);
            if (errno == ERANGE || v > (unsigned long long)INT64_MAX) {
                fail(ps, "integer '%s' does not fit in 64 bits", tok);
            } else {
                char buf[32];
                snprintf(buf, sizeof buf, "%llu", v);
                sb_puts(out, buf);
                ok = !digits.oom;
            }
        }
        free(digits.s);
        return ok;
    }
    if (sign == '-') sb_putc(&digits, '-');
    bool is_float = false;
    const char *int_start = s;
    if (!digit_run(&s, &digits, is_digit)) goto bad;
    if (int_start[0] == '0' && is_digit((unsigned char)int_start[1])) {
        fail(ps, "leading zeros are not allowed in '%s'", tok);
        goto done;
    }
    if (*s == '.') {
        s++;
        sb_putc(&digits, '.');
        if (!digit_run(&s, &digits, is_digit)) goto bad;
        is_float = true;
    }
    if (*s == 'e' || *s == 'E') {
        sb_putc(&digits, *s++);
        if (*s == '+' || *s == '-') sb_putc(&digits, *s++);
        if (!digit_run(&s, &digits, is_digit)) goto bad;
        is_float = true;
    }
    if (*s) goto bad;
    if (digits.oom) {
        fail(ps, "out of memory");
        goto done;
    }
    if (is_float) {
        sb_puts(out, sb_str(&digits));
    } else {
        errno = 0;
        long long v = strtoll(sb_str(&digits), NULL, 10);
        if (errno == ERANGE) {
            fail(ps, "integer '%s' does not fit in 64 bits", tok);
            goto done;
        }
        char buf[32];
        snprintf(buf, sizeof buf, "%lld", v);
        sb_puts(out, buf);
    }
    ok = true;
    goto done;
bad:
    if (strchr(tok, ':') || (strchr(tok, '-') && is_digit((unsigned char)tok[0])))
        fail(ps, "dates and times are not supported ('%s')", tok);
    else
        fail(ps, "invalid value '%s'", tok);
done:
    free(digits.s);
    return ok;
}

static bool parse_value(parser *ps, sbuf *out)
{
    char c = *ps->p;
    if (c == '"' || c == '\'') return parse_string(ps, out);
    if (c == '[') return fail(ps, "arrays are not supported");
    if (c == '{') return fail(ps, "inline tables are not supported");
    if (at_eol(ps) || c == '#') return fail(ps, "expected a value after '='");
    sbuf tok = {0};
    while (!at_eol(ps) && *ps->p != ' ' && *ps->p != '\t' && *ps->p != '#') sb_putc(&tok, *ps->p++);
    bool ok;
    if (tok.oom)
        ok = fail(ps, "out of memory");
    else if (!strcmp(sb_str(&tok), "true") || !strcmp(sb_str(&tok), "false")) {
        sb_puts(out, sb_str(&tok));
        ok = true;
    } else
        ok = parse_number(ps, sb_str(&tok), out);
    free(tok.s);
    return ok;
}

/* Parses `text` into `out` (flat "table.key" -> value). On failure ps->err says where. */
static bool parse_toml(parser *ps, kv_list *out)
{
    sbuf table = {0}, key = {0}, val = {0}, full = {0};
    if (!strncmp(ps->p, "\xEF\xBB\xBF", 3)) ps->p += 3; /* UTF-8 byte-order mark */
    ps->line = 1;
    while (*ps->p) {
        skip_ws(ps);
        if (*ps->p == '[') {
            if (ps->p[1] == '[') {
                fail(ps, "arrays of tables are not supported");
                break;
            }
            ps->p++;
            sb_reset(&table);
            if (!parse_key(ps, &table)) break;
            if (*ps->p != ']') {
                fail(ps, "expected ']' after the table name");
                break;
            }
            ps->p++;
            if (!expect_eol(ps, "the table header")) break;
        } else if (*ps->p != '#' && !at_eol(ps)) {
            sb_reset(&key);
            sb_reset(&val);
            sb_reset(&full);
            if (!parse_key(ps, &key)) break;
            if (*ps->p != '=') {
                fail(ps, "expected '=' after key '%s'", sb_str(&key));
                break;
            }
            ps->p++;
            skip_ws(ps);
            if (!parse_value(ps, &val) || !expect_eol(ps, "the value")) break;
            if (table.n) {
                sb_puts(&full, sb_str(&table));
                sb_putc(&full, '.');
            }
            sb_puts(&full, sb_str(&key));
            if (table.oom || key.oom || val.oom || full.oom) {
                fail(ps, "out of memory");
                break;
            }
            if (kv_find(out, sb_str(&full))) {
                fail(ps, "duplicate key '%s'", sb_str(&full));
                break;
            }
            pthread_mutex_lock(&cfg_lock);
            const char *v = ps->scratch ? "" : intern(sb_str(&val));
            bool stored = v && kv_put(out, sb_str(&full), v);
            pthread_mutex_unlock(&cfg_lock);
            if (!stored) {
                fail(ps, "out of memory");
                break;
            }
        }
        while (!at_eol(ps)) ps->p++; /* the rest of a comment line */
        if (*ps->p == '\r') ps->p++;
        if (*ps->p == '\n') {
            ps->p++;
            ps->line++;
        }
    }
    free(table.s);
    free(key.s);
    free(val.s);
    free(full.s);
    return !ps->failed;
}

/* Reads and parses a file into `out`. EM_ERR_IO (with *missing set when it does not exist) or
 * EM_ERR_FORMAT, with a message in err. */
static em_status read_toml(const char *path, kv_list *out, bool *missing, char *err, size_t cap)
{
    *missing = false;
    FILE *f = fopen(path, "rb");
    if (!f) {
        *missing = errno == ENOENT;
        snprintf(err, cap, "cannot open %s: %s", path, strerror(errno));
        return EM_ERR_IO;
    }
    sbuf text = {0};
    char chunk[4096];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
        for (size_t i = 0; i < got; i++) sb_putc(&text, chunk[i]);
    bool read_err = ferror(f);
    fclose(f);
    if (read_err || text.oom) {
        snprintf(err, cap, "cannot read %s", path);
        free(text.s);
        return read_err ? EM_ERR_IO : EM_ERR_OOM;
    }
    if (text.n != strlen(sb_str(&text))) {
        snprintf(err, cap, "%s: contains a NUL byte", path);
        free(text.s);
        return EM_ERR_FORMAT;
    }
    parser ps = {.p = sb_str(&text), .path = path};
    bool ok = parse_toml(&ps, out);
    free(text.s);
    if (!ok) {
        snprintf(err, cap, "%s", ps.err);
        kv_clear(out);
        return EM_ERR_FORMAT;
    }
    return EM_OK;
}

em_status core_config_parse_memory(const char *text, size_t len, char *err, size_t cap)
{
    char *copy = malloc(len + 1);
    if (!copy) return EM_ERR_OOM;
    memcpy(copy, text, len);
    copy[len] = 0;
    em_status st = EM_OK;
    if (strlen(copy) != len) {
        snprintf(err, cap, "<memory>: contains a NUL byte");
        st = EM_ERR_FORMAT;
    } else {
        kv_list out = {0};
        parser ps = {.p = copy, .path = "<memory>", .scratch = true};
        if (!parse_toml(&ps, &out)) {
            snprintf(err, cap, "%s", ps.err);
            st = EM_ERR_FORMAT;
        }
        kv_clear(&out);
    }
    free(copy);
    return st;
}

/* ---- lookup ------------------------------------------------------------------------------ */

/* EMBER_ + the key upper-cased, '.' and '-' becoming '_'. False when the key is too long. */
static bool env_name(const char *key, char *buf, size_t cap)
{
    size_t len = strlen(key);
    if (len + 7 > cap) return false;
    memcpy(buf, "EMBER_", 6);
    for (size_t i = 0; i < len; i++) {
        char c = key[i];
        buf[6 + i] = (c == '.' || c == '-') ? '_' : (char)toupper((unsigned char)c);
    }
    buf[6 + len] = '\0';
    return true;
}

static const char *env_value(const char *key)
{
    char name[256];
    if (!env_name(key, name, sizeof name)) return NULL;
    const char *v = getenv(name);
    if ((!v || !*v) && !strcmp(key, "threads")) v = getenv("EMBER_NUM_THREADS");
    return v && *v ? v : NULL;
}

/* Caller holds cfg_lock. */
static const char *lookup(const char *key)
{
    kv *e = kv_find(&set_layer, key);
    if (e) return e->val;
    const char *v = env_value(key);
    if (v) return intern(v);
    if ((e = kv_find(&file_layer, key))) return e->val;
    if ((e = kv_find(&base_layer, key))) return e->val;
    return NULL;
}

const char *em_config_get(const char *key)
{
    core_init();
    if (!key) return NULL;
    pthread_mutex_lock(&cfg_lock);
    const char *v = lookup(key);
    pthread_mutex_unlock(&cfg_lock);
    return v;
}

static bool parse_i64(const char *s, int64_t *out)
{
    if (!strcmp(s, "true") || !strcmp(s, "false")) {
        *out = s[0] == 't';
        return true;
    }
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno == ERANGE) return false;
    *out = v;
    return true;
}

static bool parse_u64(const char *s, uint64_t *out)
{
    while (isspace((unsigned char)*s)) s++;
    if (*s == '-' || *s == '+') return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end || errno == ERANGE) return false;
    *out = v;
    return true;
}

int64_t em_config_get_int(const char *key, int64_t fallback)
{
    const char *v = em_config_get(key);
    int64_t x;
    if (!v) return fallback;
    if (parse_i64(v, &x)) return x;
    em_log_msg("config", EM_LOG_WARN, "%s = '%s' is not an integer; using %lld", key, v,
               (long long)fallback);
    return fallback;
}

/* ---- applying settings ------------------------------------------------------------------- */

enum {
    APPLY_LOG = 1,
    APPLY_LOG_FILE = 2,
    APPLY_THREADS = 4,
    APPLY_SEED = 8,
    APPLY_MAX_TENSOR = 16,
    APPLY_ALL = 31,
};

/* max_tensor_mb in bytes (0: no limit but the device's memory); read on every tensor
 * allocation, so it is applied here rather than looked up each time. */
static _Atomic int64_t max_tensor_bytes;

int64_t core_max_tensor_bytes(void)
{
    core_init();
    return atomic_load(&max_tensor_bytes);
}

static bool is_log_key(const char *key)
{
    return !strcmp(key, "log") || !strncmp(key, "log.", 4);
}

static int apply_flags(const char *key)
{
    if (is_log_key(key)) return APPLY_LOG;
    if (!strcmp(key, "log_file")) return APPLY_LOG_FILE;
    if (!strcmp(key, "threads")) return APPLY_THREADS;
    if (!strcmp(key, "seed")) return APPLY_SEED;
    if (!strcmp(key, "max_tensor_mb")) return APPLY_MAX_TENSOR;
    return 0;
}

/* The model-file readers' limits (docs/store.md): positive integers. */
static bool is_store_limit(const char *key)
{
    static const char *const keys[] = {
        "store_max_header",   "store_max_pickle",    "store_max_memory_mb", "store_budget_scale",
        "store_expand_ratio", "store_expand_min_mb", "store_zip_ratio",     "store_zip_entries"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (!strcmp(key, keys[i])) return true;
    return false;
}

/* Checks a value for a key that is applied or is a limit; writes the reason to err when it is
 * not valid. */
static bool value_ok(const char *key, const char *v, char *err, size_t cap)
{
    int64_t n;
    uint64_t u;
    if (is_log_key(key) && em_log_level_parse(v) < 0) {
        snprintf(err, cap, "%s = '%s' is not a log level (trace, debug, info, warn, error, off)",
                 key, v);
        return false;
    }
    if (!strcmp(key, "threads") && (!parse_i64(v, &n) || n < 0 || n > INT_MAX)) {
        snprintf(err, cap, "threads = '%s' is not a thread count (0 = one per core)", v);
        return false;
    }
    if (!strcmp(key, "seed") && !parse_u64(v, &u)) {
        snprintf(err, cap, "seed = '%s' is not an unsigned 64-bit integer", v);
        return false;
    }
    if (!strcmp(key, "max_tensor_mb") && (!parse_i64(v, &n) || n < 0 || n > (INT64_MAX >> 20))) {
        snprintf(err, cap, "max_tensor_mb = '%s' is not a size in MiB (0 = no limit)", v);
        return false;
    }
    if (is_store_limit(key) && (!parse_i64(v, &n) || n <= 0)) {
        snprintf(err, cap, "%s = '%s' is not a positive integer", key, v);
        return false;
    }
    return true;
}

static void apply_level(const char *key, const char *component)
{
    const char *v = em_config_get(key);
    char err[ERR_CAP];
    if (!v) return;
    if (!value_ok(key, v, err, sizeof err)) {
        em_log_msg("config", EM_LOG_WARN, "%s; ignored", err);
        return;
    }
    em_log_set_level(component, (em_log_level)em_log_level_parse(v));
}

/* False on out of memory. */
static bool add_name(kv_list *names, const char *key)
{
    return kv_find(names, key) || kv_put(names, key, "");
}

/* "log" (and "log.*") first, as setting every level resets per-component ones; then each
 * "log.<component>" present in any layer or as an EMBER_LOG_<COMPONENT> variable. */
static void apply_log_levels(void)
{
    apply_level("log", NULL);
    apply_level("log.*", NULL);
    kv_list names = {0};
    bool ok = true;
    pthread_mutex_lock(&cfg_lock);
    const kv_list *layers[] = {&base_layer, &file_layer, &set_layer};
    for (int l = 0; l < 3; l++)
        for (int i = 0; i < layers[l]->n; i++) {
            const char *k = layers[l]->items[i].key;
            if (!strncmp(k, "log.", 4) && k[4] && strcmp(k, "log.*")) ok &= add_name(&names, k);
        }
    /* EMBER_LOG_FILE is the log_file key, not a component called "file". */
    for (char **env = environ; env && *env; env++) {
        const char *e = *env;
        if (strncmp(e, "EMBER_LOG_", 10) || !strncmp(e, "EMBER_LOG_FILE=", 15)) continue;
        const char *eq = strchr(e, '=');
        if (!eq || eq == e + 10 || eq - e > 200) continue;
        char key[256] = "log.";
        size_t n = 4;
        for (const char *c = e + 10; c < eq; c++) key[n++] = (char)tolower((unsigned char)*c);
        key[n] = '\0';
        ok &= add_name(&names, key);
    }
    pthread_mutex_unlock(&cfg_lock);
    if (!ok) em_log_msg("config", EM_LOG_WARN, "out of memory: some component log levels not set");
    for (int i = 0; i < names.n; i++) apply_level(names.items[i].key, names.items[i].key + 4);
    kv_clear(&names);
}

static void apply(int flags)
{
    char err[ERR_CAP];
    const char *v;
    if (flags & APPLY_LOG) apply_log_levels();
    if ((flags & APPLY_LOG_FILE) && (v = em_config_get("log_file"))) em_log_to_file(*v ? v : NULL);
    if ((flags & APPLY_THREADS) && (v = em_config_get("threads"))) {
        int64_t n;
        if (!value_ok("threads", v, err, sizeof err))
            em_log_msg("config", EM_LOG_WARN, "%s", err);
        else if (parse_i64(v, &n))
            em_set_num_threads(n == 0 ? core_hw_threads() : (int)n);
    }
    if ((flags & APPLY_SEED) && (v = em_config_get("seed"))) {
        uint64_t s;
        if (!value_ok("seed", v, err, sizeof err))
            em_log_msg("config", EM_LOG_WARN, "%s", err);
        else if (parse_u64(v, &s))
            em_seed(s);
    }
    if (flags & APPLY_MAX_TENSOR) {
        /* unlike the keys above, removing it (em_config_set with NULL) lifts the limit */
        int64_t mb = 0;
        v = em_config_get("max_tensor_mb");
        if (v && !value_ok("max_tensor_mb", v, err, sizeof err)) {
            em_log_msg("config", EM_LOG_WARN, "%s", err);
        } else {
            if (v) parse_i64(v, &mb);
            atomic_store(&max_tensor_bytes, mb << 20);
        }
    }
}

/* Applies without leaving an error pending: a bad value in a file or the environment is a
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

/* Replaces the ember.toml layer when the file parses; a missing file empties it. */
static em_status load_base(char *err, size_t cap)
{
    kv_list fresh = {0};
    bool missing;
    em_status st = read_toml(BASE_FILE, &fresh, &missing, err, cap);
    if (st != EM_OK && !missing) return st;
    pthread_mutex_lock(&cfg_lock);
    kv_clear(&base_layer);
    base_layer = fresh;
    pthread_mutex_unlock(&cfg_lock);
    return EM_OK;
}

/* ---- initialisation ---------------------------------------------------------------------- */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
/* Set while this thread runs the initialisation, whose own calls back into the library (which
 * all call core_init) must not wait for themselves. */
static EM_THREAD_LOCAL bool initializing;

static void do_init(void)
{
    initializing = true;
    char err[ERR_CAP];
    em_status st = load_base(err, sizeof err);
    apply_quietly(APPLY_ALL);
    if (st != EM_OK) em_log_msg("config", EM_LOG_WARN, "ignoring %s: %s", BASE_FILE, err);
    initializing = false;
}

void core_init(void)
{
    if (initializing) return;
    pthread_once(&init_once, do_init);
}

/* ---- the public entry points ------------------------------------------------------------- */

em_status em_config_set(const char *key, const char *value)
{
    core_init();
    if (!key || !*key) return em_error(EM_ERR_INVALID_ARG, "em_config_set: empty key");
    char err[ERR_CAP];
    if (value && !value_ok(key, value, err, sizeof err))
        return em_error(EM_ERR_INVALID_ARG, "em_config_set: %s", err);
    pthread_mutex_lock(&cfg_lock);
    const char *v = value ? intern(value) : NULL;
    bool ok = (v || !value) && kv_put(&set_layer, key, v);
    pthread_mutex_unlock(&cfg_lock);
    if (!ok) return em_error(EM_ERR_OOM, "em_config_set: out of memory setting '%s'", key);
    uint64_t mark = core_error_mark();
    apply(apply_flags(key));
    return core_failed_since(mark) ? em_last_status() : EM_OK;
}

em_status em_config_load_file(const char *path)
{
    core_init();
    if (!path) return em_error(EM_ERR_INVALID_ARG, "em_config_load_file: path is NULL");
    kv_list fresh = {0};
    bool missing;
    char err[ERR_CAP];
    em_status st = read_toml(path, &fresh, &missing, err, sizeof err);
    if (st != EM_OK) return em_error(st, "em_config_load_file: %s", err);
    int flags = 0;
    bool ok = true;
    pthread_mutex_lock(&cfg_lock);
    for (int i = 0; i < fresh.n; i++) {
        ok = ok && kv_put(&file_layer, fresh.items[i].key, fresh.items[i].val);
        flags |= apply_flags(fresh.items[i].key);
    }
    pthread_mutex_unlock(&cfg_lock);
    kv_clear(&fresh);
    if (!ok) return em_error(EM_ERR_OOM, "em_config_load_file: out of memory storing %s", path);
    apply_quietly(flags);
    return EM_OK;
}

em_status em_config_reload(void)
{
    core_init();
    char err[ERR_CAP];
    em_status st = load_base(err, sizeof err);
    apply_quietly(APPLY_ALL);
    if (st != EM_OK) return em_error(st, "em_config_reload: %s", err);
    return EM_OK;
}
