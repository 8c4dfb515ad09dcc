/* Printing in Burn's layout: the data block (summarised past a threshold with edge items), then
 * shape, device, backend and dtype. Floats use the shortest digits that read back exactly, in
 * one notation per tensor (fixed-point or scientific, chosen as PyTorch chooses). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backend/backend.h"
#include "../ir/elem.h"
#include "op.h"

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t len)
{
    if (b->oom) return;
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + len + 1) cap *= 2;
        char *q = em_alloc(cap);
        if (!q) {
            b->oom = true;
            return;
        }
        if (b->p) memcpy(q, b->p, b->n);
        em_free(b->p);
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

static void sb_fmt(sbuf *b, const char *fmt, ...) EM_PRINTF(2, 3);
static void sb_fmt(sbuf *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) sb_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* How a tensor's floats are written, chosen once per tensor as PyTorch does: fixed-point
 * ("120.0", "0.5") when the printed values' magnitudes allow it, else scientific notation for
 * every element ("1.5e-07"), so that a column of values reads in one form. */
typedef struct float_stats {
    bool any;      /* a finite non-zero value was seen */
    bool ints;     /* every finite value is integral */
    double lo, hi; /* smallest and largest finite non-zero |value| */
} float_stats;

static void stats_add(float_stats *st, double v)
{
    if (!isfinite(v)) return;
    if (v != floor(v)) st->ints = false;
    double a = fabs(v);
    if (a == 0) return;
    if (!st->any || a < st->lo) st->lo = a;
    if (!st->any || a > st->hi) st->hi = a;
    st->any = true;
}

/* PyTorch's rule (torch/_tensor_str.py): scientific when the values span more than three
 * decades or pass 1e8, or (not all integral) go below 1e-4. */
static bool stats_sci(const float_stats *st)
{
    return st->any &&
           (st->hi / st->lo > 1000.0 || st->hi > 1.0e8 || (!st->ints && st->lo < 1.0e-4));
}

/* Whether the text reads back to v in dtype dt. */
static bool reads_back(const char *text, double v, em_dtype dt)
{
    double back = strtod(text, NULL);
    switch (dt) {
    case EM_F64: return back == v;
    case EM_F32: return (float)back == (float)v;
    case EM_F16: return em_f32_to_f16((float)back) == em_f32_to_f16((float)v);
    default: return em_f32_to_bf16((float)back) == em_f32_to_bf16((float)v);
    }
}

/* A finite v in the tensor's form: precision > 0 digits after the point, else the fewest that
 * read back exactly; integral fixed values keep ".0" and a scientific mantissa keeps one
 * decimal ("1.0e+10"), as Rust's Debug and PyTorch mark floats. */
static void fmt_float(sbuf *b, double v, em_dtype dt, int precision, bool sci)
{
    if (v != v) {
        sb_str(b, "NaN");
        return;
    }
    if (v == INFINITY || v == -INFINITY) {
        sb_str(b, v < 0 ? "-inf" : "inf");
        return;
    }
    char tmp[80];
    const char *form = sci ? "%.*e" : "%.*f";
    if (precision > 0) {
        snprintf(tmp, sizeof tmp, form, precision > 40 ? 40 : precision, v);
        sb_str(b, tmp);
        return;
    }
    /* fixed-point values are at least 1e-4 (or integral) and at most 1e8 here, so 24 decimals
       cover f64's 17 significant digits; a mantissa needs at most 16 */
    int most = sci ? 16 : 24;
    for (int digits = 0; digits <= most; digits++) {
        snprintf(tmp, sizeof tmp, form, digits, v);
        if (reads_back(tmp, v, dt)) break;
    }
    char *e = strchr(tmp, 'e');
    if (!strchr(tmp, '.')) {
        if (e) { /* "1e+10" -> "1.0e+10" */
            memmove(e + 2, e, strlen(e) + 1);
            e[0] = '.';
            e[1] = '0';
        } else {
            strcat(tmp, ".0");
        }
    }
    sb_str(b, tmp);
}

typedef struct print_ctx {
    const em_tensor *t;
    bool summarise;
    int64_t edge;
    int precision;
    bool sci; /* floats in scientific notation */
} print_ctx;

static void fmt_value(sbuf *b, const print_ctx *c, const char *p)
{
    const em_tensor *t = c->t;
    if (em_dtype_is_float(t->dtype))
        fmt_float(b, ir_get_f64(p, t->dtype), t->dtype, c->precision, c->sci);
    else if (t->dtype == EM_BOOL)
        sb_str(b, *(const uint8_t *)p ? "true" : "false");
    else
        sb_fmt(b, "%lld", (long long)ir_get_i64(p, t->dtype));
}

/* Indices printed along a dim of n: all, or the first and last `edge` when summarised (moves
 * *i past the middle and returns true where the "..." goes). */
static bool skipped(const print_ctx *c, int64_t n, int64_t *i)
{
    if (c->summarise && c->edge < n - c->edge && *i == c->edge) { /* n > 2 edge, not overflowing */
        *i = n - c->edge;
        return true;
    }
    return false;
}

/* The float statistics of the elements that will be printed. */
static void scan_block(const print_ctx *c, int d, int64_t off, float_stats *st)
{
    const em_tensor *t = c->t;
    size_t es = em_dtype_size(t->dtype);
    int64_t n = t->shape[d];
    for (int64_t i = 0; i < n; i++) {
        skipped(c, n, &i);
        int64_t o = off + i * t->strides[d];
        if (d == t->rank - 1)
            stats_add(st, ir_get_f64((const char *)t->storage->data + o * (int64_t)es, t->dtype));
        else
            scan_block(c, d + 1, o, st);
    }
}

static void fmt_block(sbuf *b, const print_ctx *c, int d, int64_t off)
{
    const em_tensor *t = c->t;
    size_t es = em_dtype_size(t->dtype);
    int64_t n = t->shape[d];
    sb_str(b, "[");
    for (int64_t i = 0; i < n; i++) {
        if (skipped(c, n, &i)) {
            if (d == t->rank - 1)
                sb_str(b, "...");
            else {
                sb_str(b, "...\n");
                for (int k = 0; k <= d; k++) sb_str(b, " ");
            }
            if (d == t->rank - 1) sb_str(b, ", ");
        }
        int64_t o = off + i * t->strides[d];
        if (d == t->rank - 1)
            fmt_value(b, c, (const char *)t->storage->data + o * (int64_t)es);
        else
            fmt_block(b, c, d + 1, o);
        if (i + 1 < n) {
            sb_str(b, ",");
            if (d == t->rank - 1)
                sb_str(b, " ");
            else {
                sb_str(b, "\n");
                for (int k = 0; k <= d; k++) sb_str(b, " ");
            }
        }
    }
    sb_str(b, "]");
}

char *em_tensor_format(const em_tensor *t, em_print_options opt)
{
    if (!tn_check_ptr("em_tensor_format", t, "t")) return NULL;
    em_tensor *h = (em_tensor *)t;
    if (t->storage->device.backend != 0) {
        h = em_to_device((em_tensor *)t, EM_CPU);
        if (!h) return NULL;
    }
    print_ctx c = {
        .t = h,
        .edge = opt.edge_items > 0 ? opt.edge_items : 3,
        .precision = opt.precision,
    };
    int64_t threshold = opt.threshold > 0 ? opt.threshold : 1000;
    c.summarise = tn_numel(h) > threshold;
    if (em_dtype_is_float(h->dtype)) {
        float_stats st = {.ints = true};
        if (h->rank == 0)
            stats_add(&st, ir_get_f64(tn_ptr(h), h->dtype));
        else
            scan_block(&c, 0, h->offset, &st);
        c.sci = stats_sci(&st);
    }
    sbuf b = {0};
    sb_str(&b, "Tensor {\n  data:\n");
    if (h->rank == 0)
        fmt_value(&b, &c, tn_ptr(h));
    else
        fmt_block(&b, &c, 0, h->offset);
    char dev[32];
    sb_fmt(&b, ",\n  shape:  %s,\n", tn_dims_str(h->shape, h->rank));
    sb_fmt(&b, "  device:  %s,\n", em_device_str(t->storage->device, dev, sizeof dev));
    sb_fmt(&b, "  backend:  \"%s\",\n", em_device_backend_name(t->storage->device));
    sb_fmt(&b, "  dtype:  \"%s\",\n}", em_dtype_name(h->dtype));
    if (h != t) em_release(h);
    if (b.oom) {
        em_free(b.p);
        return NULL;
    }
    return b.p;
}

void em_print(const em_tensor *t)
{
    /* a NULL result of a failed chain: say so without recording anything, so the chain's own
       error stays the one to report */
    if (!t) {
        printf("Tensor(NULL)\n");
        return;
    }
    char *s = em_tensor_format(t, (em_print_options){0});
    if (!s) {
        printf("Tensor { <error: %s> }\n", em_last_error());
        return;
    }
    printf("%s\n", s);
    em_free(s);
}
