/* Printing in Burn's layout: the data block (summarised past a threshold with edge items), then
 * shape, device, backend and dtype. Floats use the shortest form that reads back exactly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backend/backend.h"
#include "../backend/cpu/cpu.h"
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

/* Shortest decimal that reads back to the same value in the dtype, with ".0" on integral
 * values (as Rust's Debug does). */
static void fmt_float(sbuf *b, double v, em_dtype dt, int precision)
{
    if (v != v) {
        sb_str(b, "NaN");
        return;
    }
    if (v == INFINITY || v == -INFINITY) {
        sb_str(b, v < 0 ? "-inf" : "inf");
        return;
    }
    char tmp[64];
    if (precision > 0) {
        snprintf(tmp, sizeof tmp, "%.*f", precision, v);
        sb_str(b, tmp);
        return;
    }
    int max_digits = dt == EM_F64 ? 17 : 9;
    for (int digits = 1; digits <= max_digits; digits++) {
        snprintf(tmp, sizeof tmp, "%.*g", digits, v);
        double back = strtod(tmp, NULL);
        bool same = dt == EM_F64   ? back == v
                    : dt == EM_F32 ? (float)back == (float)v
                    : dt == EM_F16 ? em_f32_to_f16((float)back) == em_f32_to_f16((float)v)
                                   : em_f32_to_bf16((float)back) == em_f32_to_bf16((float)v);
        if (same) break;
    }
    if (!strpbrk(tmp, ".eEn")) strcat(tmp, ".0");
    sb_str(b, tmp);
}

static void fmt_value(sbuf *b, const em_tensor *t, const char *p, int precision)
{
    if (em_dtype_is_float(t->dtype))
        fmt_float(b, cpu_get_f64(p, t->dtype), t->dtype, precision);
    else if (t->dtype == EM_BOOL)
        sb_str(b, *(const uint8_t *)p ? "true" : "false");
    else
        sb_fmt(b, "%lld", (long long)cpu_get_i64(p, t->dtype));
}

typedef struct print_ctx {
    const em_tensor *t;
    bool summarise;
    int64_t edge;
    int precision;
} print_ctx;

static void fmt_block(sbuf *b, const print_ctx *c, int d, int64_t off)
{
    const em_tensor *t = c->t;
    size_t es = em_dtype_size(t->dtype);
    int64_t n = t->shape[d];
    bool cut = c->summarise && n > 2 * c->edge;
    sb_str(b, "[");
    for (int64_t i = 0; i < n; i++) {
        if (cut && i == c->edge) {
            if (d == t->rank - 1)
                sb_str(b, "...");
            else {
                sb_str(b, "...\n");
                for (int k = 0; k <= d; k++) sb_str(b, " ");
            }
            i = n - c->edge;
            if (d == t->rank - 1) sb_str(b, ", ");
        }
        int64_t o = off + i * t->strides[d];
        if (d == t->rank - 1)
            fmt_value(b, t, (const char *)t->storage->data + o * (int64_t)es, c->precision);
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
    sbuf b = {0};
    sb_str(&b, "Tensor {\n  data:\n");
    if (h->rank == 0)
        fmt_value(&b, h, tn_ptr(h), c.precision);
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
    char *s = em_tensor_format(t, (em_print_options){0});
    if (!s) {
        printf("Tensor { <error: %s> }\n", em_last_error());
        return;
    }
    printf("%s\n", s);
    em_free(s);
}
