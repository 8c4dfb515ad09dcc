/* The op table's generator: writes what docs/ops.md takes from src/ir/ops.def (below), and with
 * --gen DIR the code the build compiles from the table's scalar expressions (opgen_code.c). Each op
 * row's dtypes and grad cells (| `name` | dtypes | grad | notes |) come from the kind's row (the
 * notes stay as written), and the section between the markers below lists every kind with its
 * number, family, arity, parameters and lowering. It fails when a kind has no row in the page or
 * a row names no kind.
 * Usage: ember_opgen [--check] docs/ops.md | ember_opgen --gen DIR
 *   without --check the file is rewritten when it differs; with --check nothing is written and
 *   the exit status is 1 when the file is stale (scripts/check-generated.sh, the test suite).
 * Plain C over the table's X-macro: it links nothing of the library. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

#define BEGIN_MARK "<!-- op table: generated from src/ir/ops.def by tools/opgen.c -->"
#define END_MARK   "<!-- end of the generated op table -->"

typedef struct row {
    const char *name, *family, *params, *dtypes, *lowering;
    uint32_t flags;
    int in_min, in_max, out_min, out_max;
    const char *kind, *rule, *expr, *d[3]; /* NAME, the dtype rule, the expressions' text */
} row;

/* The expressions as text (# keeps IR_NOEXPR and the IR_ constants unexpanded). */
static const row rows[] = {
#define X(kind, str, fam, fl, imin, imax, omin, omax, par, dt, doc, low, e, d0, d1, d2)            \
    {str,  #fam, "em_p_" #par, doc,   low, (fl), imin,                                             \
     imax, omin, omax,         #kind, #dt, #e,   {#d0, #d1, #d2}},
#include "ir/ops.def"
#undef X
};
#define N_ROWS ((int)(sizeof rows / sizeof rows[0]))

typedef struct buf {
    char *s;
    size_t n, cap;
} buf;

static void put(buf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->s = realloc(b->s, b->cap);
        if (!b->s) {
            fprintf(stderr, "opgen: out of memory\n");
            exit(2);
        }
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

static void puts_(buf *b, const char *s)
{
    put(b, s, strlen(s));
}

static int find_kind(const char *name, size_t len)
{
    for (int k = 0; k < N_ROWS; k++)
        if (strlen(rows[k].name) == len && memcmp(rows[k].name, name, len) == 0) return k;
    return -1;
}

static const char *grad_of(const row *r)
{
    return (r->flags & IR_DIFF) ? "yes" : "no";
}

/* "1", "1-3": an arity range. */
static void arity(buf *b, int lo, int hi)
{
    char t[32];
    if (lo == hi)
        snprintf(t, sizeof t, "%d", lo);
    else
        snprintf(t, sizeof t, "%d-%d", lo, hi);
    puts_(b, t);
}

static void flag_words(buf *b, uint32_t f)
{
    static const struct {
        uint32_t bit;
        const char *word;
    } words[] = {
        {IR_EW1, "elementwise"},   {IR_EW2, "elementwise"}, {IR_EW, "elementwise"},
        {IR_REDUCE, "reduce"},     {IR_SCAN, "scan"},       {IR_ALONG_DIM, "along a dim"},
        {IR_VIEW, "view"},         {IR_CREATE, "creation"}, {IR_RANDOM, "random"},
        {IR_INTERNAL, "internal"},
    };
    bool any = false, ew = false;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        if (!(f & words[i].bit)) continue;
        bool is_ew = words[i].bit == IR_EW1 || words[i].bit == IR_EW2 || words[i].bit == IR_EW;
        if (is_ew && ew) continue;
        ew = ew || is_ew;
        if (any) puts_(b, ", ");
        puts_(b, words[i].word);
        any = true;
    }
}

/* The generated section: one line per kind, in the IR's numeric order. */
static void table(buf *b)
{
    puts_(b, BEGIN_MARK "\n\n");
    puts_(b, "| # | kind | family | inputs | outputs | parameters | traits | default lowering |\n");
    puts_(b, "|---|------|--------|--------|---------|------------|--------|------------------|\n");
    for (int k = 0; k < N_ROWS; k++) {
        const row *r = &rows[k];
        char t[64];
        snprintf(t, sizeof t, "| %d | `%s` | %s | ", k, r->name, r->family);
        puts_(b, t);
        arity(b, r->in_min, r->in_max);
        puts_(b, " | ");
        arity(b, r->out_min, r->out_max);
        puts_(b, " | ");
        if (strcmp(r->params, "em_p_none") != 0) {
            puts_(b, "`");
            puts_(b, r->params);
            puts_(b, "`");
        }
        puts_(b, " | ");
        flag_words(b, r->flags);
        puts_(b, " | ");
        puts_(b, r->lowering[0] ? r->lowering : "primitive");
        puts_(b, " |\n");
    }
    puts_(b, "\n" END_MARK);
}

/* The page with every op row's dtypes and grad cells and the generated section rewritten;
 * counts the kinds seen in rows into seen[] and reports rows naming no kind. */
static bool rewrite(const char *in, buf *out, int *seen)
{
    bool ok = true;
    const char *p = in;
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p + 1) : strlen(p);
        if (strncmp(p, BEGIN_MARK, strlen(BEGIN_MARK)) == 0) {
            const char *end = strstr(p, END_MARK);
            if (!end) {
                fprintf(stderr, "opgen: `%s` without `%s`\n", BEGIN_MARK, END_MARK);
                return false;
            }
            table(out);
            p = end + strlen(END_MARK);
            continue;
        }
        if (strncmp(p, "| `", 3) == 0) {
            const char *s = p + 3, *e = memchr(s, '`', len - 3);
            const char *c1 = e ? memchr(e, '|', (size_t)(p + len - e)) : NULL;
            const char *c2 = c1 ? memchr(c1 + 1, '|', (size_t)(p + len - c1 - 1)) : NULL;
            const char *c3 = c2 ? memchr(c2 + 1, '|', (size_t)(p + len - c2 - 1)) : NULL;
            if (e && c3) {
                int k = find_kind(s, (size_t)(e - s));
                if (k < 0) {
                    fprintf(stderr,
                            "opgen: docs/ops.md lists `%.*s`, which is no kind of the op "
                            "table\n",
                            (int)(e - s), s);
                    ok = false;
                } else {
                    seen[k]++;
                    put(out, p, (size_t)(c1 - p + 1));
                    puts_(out, " ");
                    puts_(out, rows[k].dtypes);
                    puts_(out, " | ");
                    puts_(out, grad_of(&rows[k]));
                    puts_(out, " ");
                    put(out, c3, (size_t)(p + len - c3));
                    p += len;
                    continue;
                }
            }
        }
        put(out, p, len);
        p += len;
    }
    return ok;
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    buf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) put(&b, chunk, n);
    fclose(f);
    if (!b.s) put(&b, "", 0);
    return b.s;
}

#include "opgen_code.c"

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--gen") == 0) return gen_code(argv[2]);
    bool check = argc == 3 && strcmp(argv[1], "--check") == 0;
    if (argc != 2 && !check) {
        fprintf(stderr, "usage: ember_opgen [--check] docs/ops.md | --gen DIR\n");
        return 2;
    }
    const char *path = argv[argc - 1];
    char *in = read_all(path);
    if (!in) {
        fprintf(stderr, "opgen: cannot read %s\n", path);
        return 2;
    }
    if (!strstr(in, BEGIN_MARK)) {
        fprintf(stderr, "opgen: %s has no `%s` line\n", path, BEGIN_MARK);
        return 2;
    }
    int seen[N_ROWS] = {0};
    buf out = {0};
    bool ok = rewrite(in, &out, seen);
    for (int k = 0; k < N_ROWS; k++) {
        if (seen[k] == 1) continue;
        fprintf(stderr, "opgen: %s has %d rows for `%s` (one wanted)\n", path, seen[k],
                rows[k].name);
        ok = false;
    }
    if (!ok) return 2;
    bool same = strcmp(in, out.s) == 0;
    if (check) {
        if (!same)
            fprintf(stderr, "opgen: %s is stale: run `cmake --build <build> --target ops_docs`\n",
                    path);
        return same ? 0 : 1;
    }
    if (!same) {
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(out.s, 1, out.n, f) != out.n || fclose(f) != 0) {
            fprintf(stderr, "opgen: cannot write %s\n", path);
            return 2;
        }
        printf("opgen: %s updated\n", path);
    }
    return 0;
}
