/* A small bounded JSON reader for file headers: recursion capped at JS_MAX_DEPTH, strict UTF-8,
 * no NUL in strings, duplicate keys rejected; values live in one arena freed at once. */
#include "store_impl.h"

#include <stdlib.h>
#include <string.h>

typedef struct js_chunk {
    struct js_chunk *prev;
    size_t used, cap;
    unsigned char data[];
} js_chunk;

struct js_doc {
    js_chunk *chunks;
    js_value *root;
    uint64_t used, max; /* arena bytes taken, and the caller's cap on them */
};

typedef struct js_parser {
    const char *p, *end;
    const char *who;
    js_doc *doc;
    bool failed;
} js_parser;

static bool fail(js_parser *ps, const char *what)
{
    if (!ps->failed) {
        em_error(EM_ERR_FORMAT, "%s: invalid JSON header: %s", ps->who, what);
    }
    ps->failed = true;
    return false;
}

static void *arena(js_parser *ps, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    js_chunk *c = ps->doc->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        /* A header of tiny values ("[0,0,0,...]") takes 32 times its size parsed: the cap
         * keeps a hostile one from taking the machine's memory. */
        if (ps->doc->used + cap > ps->doc->max) {
            if (!ps->failed)
                em_error(EM_ERR_FORMAT,
                         "%s: invalid JSON header: parsing it needs more than %llu bytes of "
                         "memory (limits store_budget_scale, store_max_memory_mb)",
                         ps->who, (unsigned long long)ps->doc->max);
            ps->failed = true;
            return NULL;
        }
        ps->doc->used += cap;
        js_chunk *nc = em_alloc(sizeof *nc + cap);
        if (!nc) {
            ps->failed = true;
            return NULL;
        }
        nc->prev = c;
        nc->used = 0;
        nc->cap = cap;
        ps->doc->chunks = nc;
        c = nc;
    }
    void *r = c->data + c->used;
    c->used += n;
    return r;
}

static void skip_ws(js_parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool read_hex4(js_parser *ps, unsigned *out)
{
    if (ps->end - ps->p < 4) return fail(ps, "truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(ps->p[i]);
        if (h < 0) return fail(ps, "bad \\u escape");
        v = (v << 4) | (unsigned)h;
    }
    ps->p += 4;
    *out = v;
    return true;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Parses a string at ps->p (which is '"'); decoded text goes to the arena. */
static bool parse_string(js_parser *ps, const char **out, size_t *out_len)
{
    ps->p++;
    const char *start = ps->p;
    /* The decoded string is never longer than the raw one. */
    const char *q = start;
    while (q < ps->end && *q != '"') q += (*q == '\\' && q + 1 < ps->end) ? 2 : 1;
    if (q >= ps->end) return fail(ps, "unterminated string");
    char *buf = arena(ps, (size_t)(q - start) + 1);
    if (!buf) return false;
    size_t n = 0;
    while (ps->p < ps->end && *ps->p != '"') {
        unsigned char c = (unsigned char)*ps->p;
        if (c < 0x20) return fail(ps, "control character in string");
        if (c == '\\') {
            ps->p++;
            if (ps->p >= ps->end) return fail(ps, "unterminated string");
            char e = *ps->p++;
            switch (e) {
            case '"': buf[n++] = '"'; break;
            case '\\': buf[n++] = '\\'; break;
            case '/': buf[n++] = '/'; break;
            case 'b': buf[n++] = '\b'; break;
            case 'f': buf[n++] = '\f'; break;
            case 'n': buf[n++] = '\n'; break;
            case 'r': buf[n++] = '\r'; break;
            case 't': buf[n++] = '\t'; break;
            case 'u': {
                unsigned cp;
                if (!read_hex4(ps, &cp)) return false;
                if (cp >= 0xDC00 && cp <= 0xDFFF) return fail(ps, "lone low surrogate");
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    unsigned lo;
                    if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u')
                        return fail(ps, "lone high surrogate");
                    ps->p += 2;
                    if (!read_hex4(ps, &lo)) return false;
                    if (lo < 0xDC00 || lo > 0xDFFF) return fail(ps, "bad surrogate pair");
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                if (cp == 0) return fail(ps, "NUL (\\u0000) in string");
                n += put_utf8(buf + n, cp);
                break;
            }
            default: return fail(ps, "bad escape in string");
            }
        } else {
            size_t k = st_utf8_len((const unsigned char *)ps->p, (size_t)(ps->end - ps->p));
            if (!k) return fail(ps, "invalid UTF-8 in string");
            memcpy(buf + n, ps->p, k);
            n += k;
            ps->p += k;
        }
    }
    ps->p++; /* closing quote */
    buf[n] = 0;
    *out = buf;
    *out_len = n;
    return true;
}

static bool parse_number(js_parser *ps, js_value *v)
{
    const char *s = ps->p;
    if (ps->p < ps->end && *ps->p == '-') ps->p++;
    if (ps->p >= ps->end) return fail(ps, "bad number");
    if (*ps->p == '0') {
        ps->p++;
    } else if (*ps->p >= '1' && *ps->p <= '9') {
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
    } else {
        return fail(ps, "bad number");
    }
    if (ps->p < ps->end && *ps->p == '.') {
        ps->p++;
        if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') return fail(ps, "bad number");
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
    }
    if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        ps->p++;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-')) ps->p++;
        if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') return fail(ps, "bad number");
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
    }
    v->type = JS_NUM;
    v->s = s;
    v->len = (size_t)(ps->p - s);
    return true;
}

static int cmp_keys(const void *a, const void *b)
{
    const js_value *x = *(const js_value *const *)a, *y = *(const js_value *const *)b;
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, n);
    if (c) return c;
    return (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

static bool check_duplicates(js_parser *ps, js_value *obj)
{
    if (obj->n < 2) return true;
    js_value **keys = em_alloc((size_t)obj->n * sizeof *keys);
    if (!keys) return fail(ps, "out of memory");
    int64_t i = 0;
    for (js_value *c = obj->child; c; c = c->next) keys[i++] = c;
    qsort(keys, (size_t)obj->n, sizeof *keys, cmp_keys);
    for (i = 1; i < obj->n; i++) {
        if (cmp_keys(&keys[i - 1], &keys[i]) == 0) {
            if (!ps->failed)
                em_error(EM_ERR_FORMAT, "%s: invalid JSON header: duplicate key \"%.200s\"",
                         ps->who, keys[i]->key);
            ps->failed = true;
            em_free(keys);
            return false;
        }
    }
    em_free(keys);
    return true;
}

static bool parse_value(js_parser *ps, js_value *v, int depth)
{
    if (depth > JS_MAX_DEPTH) return fail(ps, "nesting deeper than 64 levels");
    skip_ws(ps);
    if (ps->p >= ps->end) return fail(ps, "unexpected end");
    char c = *ps->p;
    if (c == '{' || c == '[') {
        bool obj = c == '{';
        char close = obj ? '}' : ']';
        v->type = obj ? JS_OBJ : JS_ARR;
        ps->p++;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            return true;
        }
        js_value *last = NULL;
        for (;;) {
            js_value *item = arena(ps, sizeof *item);
            if (!item) return fail(ps, "out of memory");
            memset(item, 0, sizeof *item);
            if (obj) {
                skip_ws(ps);
                if (ps->p >= ps->end || *ps->p != '"') return fail(ps, "expected a key string");
                if (!parse_string(ps, &item->key, &item->key_len)) return false;
                skip_ws(ps);
                if (ps->p >= ps->end || *ps->p != ':') return fail(ps, "expected ':'");
                ps->p++;
            }
            if (!parse_value(ps, item, depth + 1)) return false;
            if (last)
                last->next = item;
            else
                v->child = item;
            last = item;
            v->n++;
            skip_ws(ps);
            if (ps->p >= ps->end) return fail(ps, "unexpected end");
            if (*ps->p == ',') {
                ps->p++;
                continue;
            }
            if (*ps->p == close) {
                ps->p++;
                break;
            }
            return fail(ps, obj ? "expected ',' or '}'" : "expected ',' or ']'");
        }
        return obj ? check_duplicates(ps, v) : true;
    }
    if (c == '"') {
        v->type = JS_STR;
        return parse_string(ps, &v->s, &v->len);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(ps, v);
    size_t left = (size_t)(ps->end - ps->p);
    if (left >= 4 && memcmp(ps->p, "true", 4) == 0) {
        v->type = JS_BOOL, v->b = true, ps->p += 4;
        return true;
    }
    if (left >= 5 && memcmp(ps->p, "false", 5) == 0) {
        v->type = JS_BOOL, v->b = false, ps->p += 5;
        return true;
    }
    if (left >= 4 && memcmp(ps->p, "null", 4) == 0) {
        v->type = JS_NULL, ps->p += 4;
        return true;
    }
    if (c == 0) return fail(ps, "NUL byte (headers may be padded only with spaces)");
    return fail(ps, "unexpected character");
}

void js_free(js_doc *doc)
{
    if (!doc) return;
    js_chunk *c = doc->chunks;
    while (c) {
        js_chunk *p = c->prev;
        em_free(c);
        c = p;
    }
    em_free(doc);
}

js_doc *js_parse(const char *text, size_t len, const char *who)
{
    js_doc *doc = em_calloc(sizeof *doc);
    if (!doc) return NULL;
    st_limits lim = st_get_limits();
    doc->max = st_budget(16, len, 1 << 20, lim.budget_scale);
    if (doc->max > lim.max_memory) doc->max = lim.max_memory;
    js_parser ps = {.p = text, .end = text + len, .who = who, .doc = doc};
    js_value *root = arena(&ps, sizeof *root);
    if (!root) {
        js_free(doc);
        return NULL;
    }
    memset(root, 0, sizeof *root);
    if (!parse_value(&ps, root, 1)) {
        if (!em_failed()) em_error(EM_ERR_OOM, "%s: out of memory parsing the header", who);
        js_free(doc);
        return NULL;
    }
    while (ps.p < ps.end && *ps.p == ' ') ps.p++;
    if (ps.p != ps.end) {
        if (*ps.p == 0)
            fail(&ps, "NUL byte after the JSON (headers may be padded only with spaces)");
        else
            fail(&ps, "trailing characters after the JSON value");
        js_free(doc);
        return NULL;
    }
    doc->root = root;
    return doc;
}

const js_value *js_root(const js_doc *doc)
{
    return doc->root;
}

bool js_get_u64(const js_value *v, uint64_t *out)
{
    if (!v || v->type != JS_NUM || v->len == 0) return false;
    uint64_t r = 0;
    for (size_t i = 0; i < v->len; i++) {
        char c = v->s[i];
        if (c < '0' || c > '9') return false;
        unsigned d = (unsigned)(c - '0');
        if (r > (UINT64_MAX - d) / 10) return false;
        r = r * 10 + d;
    }
    *out = r;
    return true;
}
