/* A reader for the subset of TOML that ember.toml uses: [table] headers, key = value lines with
 * bare, quoted or dotted keys, # comments, one-line strings, integers, floats and booleans.
 * Keys come out flattened ("log.cpu"), values as text (strings decoded, integers in decimal). */
#include "file_open.h"
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_impl.h"

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
    char *err;
    size_t cap;
} parser;

static bool fail(parser *ps, const char *fmt, ...) EM_PRINTF(2, 3);

static bool fail(parser *ps, const char *fmt, ...)
{
    if (ps->failed) return false;
    ps->failed = true;
    int n = snprintf(ps->err, ps->cap, "%s:%d: ", ps->path, ps->line);
    if (n < 0 || (size_t)n >= ps->cap) return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ps->err + n, ps->cap - (size_t)n, fmt, ap);
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

/* The keys seen so far, for duplicates: a list is enough for a configuration file. */
typedef struct seen {
    char **keys;
    int n, cap;
} seen;

/* False on out of memory. */
static bool seen_add(seen *s, const char *key, bool *dup)
{
    *dup = false;
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->keys[i], key)) {
            *dup = true;
            return true;
        }
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        char **grown = realloc(s->keys, (size_t)cap * sizeof *grown);
        if (!grown) return false;
        s->keys = grown;
        s->cap = cap;
    }
    char *k = strdup(key);
    if (!k) return false;
    s->keys[s->n++] = k;
    return true;
}

bool core_toml_parse(const char *text, const char *path, core_toml_fn fn, void *ctx, char *err,
                     size_t cap)
{
    parser ps0 = {.p = text, .path = path, .err = err, .cap = cap}, *ps = &ps0;
    sbuf table = {0}, key = {0}, val = {0}, full = {0};
    seen keys = {0};
    if (cap) err[0] = '\0';
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
            int line = ps->line;
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
            bool dup;
            if (table.oom || key.oom || val.oom || full.oom ||
                !seen_add(&keys, sb_str(&full), &dup)) {
                fail(ps, "out of memory");
                break;
            }
            if (dup) {
                fail(ps, "duplicate key '%s'", sb_str(&full));
                break;
            }
            if (fn && !fn(ctx, sb_str(&full), sb_str(&val), line)) {
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
    for (int i = 0; i < keys.n; i++) free(keys.keys[i]);
    free(keys.keys);
    free(table.s);
    free(key.s);
    free(val.s);
    free(full.s);
    return !ps->failed;
}

em_status core_toml_read(const char *path, char **text, bool *missing, char *err, size_t cap)
{
    *text = NULL;
    *missing = false;
    const char *why;
    int fd = core_open_regular(path, NULL, &why);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        *missing = fd < 0 && errno == ENOENT;
        if (fd >= 0) {
            why = strerror(errno);
            close(fd);
        }
        snprintf(err, cap, "cannot open %s: %s", path, why);
        return EM_ERR_IO;
    }
    sbuf b = {0};
    char chunk[4096];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
        for (size_t i = 0; i < got; i++) sb_putc(&b, chunk[i]);
    bool read_err = ferror(f);
    fclose(f);
    if (read_err || b.oom) {
        snprintf(err, cap, "cannot read %s", path);
        free(b.s);
        return read_err ? EM_ERR_IO : EM_ERR_OOM;
    }
    if (b.n != strlen(sb_str(&b))) {
        snprintf(err, cap, "%s: contains a NUL byte", path);
        free(b.s);
        return EM_ERR_FORMAT;
    }
    if (!b.s) b.s = strdup("");
    if (!b.s) {
        snprintf(err, cap, "cannot read %s: out of memory", path);
        return EM_ERR_OOM;
    }
    *text = b.s;
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
    } else if (!core_toml_parse(copy, "<memory>", NULL, NULL, err, cap)) {
        st = EM_ERR_FORMAT;
    }
    free(copy);
    return st;
}
