/* safetensors: validating header reader, zero-copy mmap loads with a refcounted mapping, and a
 * streaming writer that replaces the destination atomically (temp file, fsync, rename). */
#include "store_impl.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
    const char *name;
    int dtype; /* -1: a valid safetensors dtype Ember has no type for */
} st_dtypes[] = {
    {"F64", EM_F64},     {"F32", EM_F32},     {"F16", EM_F16}, {"BF16", EM_BF16}, {"I64", EM_I64},
    {"I32", EM_I32},     {"I16", EM_I16},     {"I8", EM_I8},   {"U8", EM_U8},     {"BOOL", EM_BOOL},
    {"U16", -1},         {"U32", -1},         {"U64", -1},     {"C64", -1},       {"F8_E5M2", -1},
    {"F8_E4M3", -1},     {"F8_E8M0", -1},     {"F4", -1},      {"F6_E2M3", -1},   {"F6_E3M2", -1},
    {"F8_E4M3FNUZ", -1}, {"F8_E5M2FNUZ", -1},
};

static const char *dtype_st_name(em_dtype dt)
{
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (st_dtypes[i].dtype == (int)dt) return st_dtypes[i].name;
    return NULL;
}

static uint64_t read_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static const js_value *member(const js_value *obj, const char *key)
{
    for (const js_value *c = obj->child; c; c = c->next)
        if (strcmp(c->key, key) == 0) return c;
    return NULL;
}

typedef struct st_ent {
    const char *name;
    em_dtype dtype;
    em_shape shape;
    uint64_t begin, end, nbytes;
} st_ent;

static int cmp_ent(const void *a, const void *b)
{
    const st_ent *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

#define BAD(...) (em_error(EM_ERR_FORMAT, __VA_ARGS__), false)

/* Checks one tensor entry of the header and fills e. */
static bool parse_entry(const js_value *v, const char *fname, st_ent *e)
{
    const char *name = v->key;
    if (!name[0]) return BAD("%s: empty tensor name", fname);
    if (v->type != JS_OBJ) return BAD("%s: tensor \"%.200s\" is not a JSON object", fname, name);
    const js_value *dt = member(v, "dtype"), *sh = member(v, "shape"),
                   *off = member(v, "data_offsets");
    if (!dt || !sh || !off)
        return BAD("%s: tensor \"%.200s\" lacks \"%s\"", fname, name,
                   !dt   ? "dtype"
                   : !sh ? "shape"
                         : "data_offsets");
    if (dt->type != JS_STR) return BAD("%s: tensor \"%.200s\": dtype is not a string", fname, name);
    int dtype = -2;
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (strcmp(dt->s, st_dtypes[i].name) == 0) dtype = st_dtypes[i].dtype;
    if (dtype == -2)
        return BAD("%s: tensor \"%.200s\": unknown dtype \"%.40s\"", fname, name, dt->s);
    if (dtype == -1)
        return BAD("%s: tensor \"%.200s\": dtype %s is not supported by Ember", fname, name, dt->s);
    if (sh->type != JS_ARR) return BAD("%s: tensor \"%.200s\": shape is not an array", fname, name);
    if (sh->n > EM_MAX_RANK)
        return BAD("%s: tensor \"%.200s\": rank %lld exceeds %d", fname, name, (long long)sh->n,
                   EM_MAX_RANK);
    e->name = name;
    e->dtype = (em_dtype)dtype;
    e->shape.rank = (int)sh->n;
    /* Zero dims make the element count 0, but the other dims' product must still fit: shape
     * code multiplies dims in any order (em_shape_numel on [2^32, 2^32 - 1, 0] overflows). */
    int64_t nonzero = 1, numel = 1;
    int d = 0;
    for (const js_value *c = sh->child; c; c = c->next, d++) {
        uint64_t dim;
        if (!js_get_u64(c, &dim) || dim > (uint64_t)INT64_MAX)
            return BAD("%s: tensor \"%.200s\": shape entries must be non-negative integers", fname,
                       name);
        e->shape.dims[d] = (int64_t)dim;
        if (dim == 0)
            numel = 0;
        else if (__builtin_mul_overflow(nonzero, (int64_t)dim, &nonzero))
            return BAD("%s: tensor \"%.200s\": element count overflows", fname, name);
    }
    int64_t esz = (int64_t)em_dtype_size(e->dtype), bytes;
    if (__builtin_mul_overflow(nonzero, esz, &bytes))
        return BAD("%s: tensor \"%.200s\": byte size overflows", fname, name);
    e->nbytes = numel ? (uint64_t)bytes : 0;
    if (off->type != JS_ARR || off->n != 2 || !js_get_u64(off->child, &e->begin) ||
        !js_get_u64(off->child->next, &e->end))
        return BAD("%s: tensor \"%.200s\": data_offsets must be two non-negative integers", fname,
                   name);
    if (e->end < e->begin)
        return BAD("%s: tensor \"%.200s\": data_offsets begin %llu > end %llu", fname, name,
                   (unsigned long long)e->begin, (unsigned long long)e->end);
    if (e->end - e->begin != e->nbytes)
        return BAD("%s: tensor \"%.200s\": data_offsets span %llu bytes but %s %s needs %llu",
                   fname, name, (unsigned long long)(e->end - e->begin), dt->s,
                   em_shape_str(e->shape, (char[160]){0}, 160), (unsigned long long)e->nbytes);
    return true;
}

/* When the file's first bytes show another format (a zip, a pickle), says so and returns true:
 * a .pt file handed to the safetensors reader is named as such, not as a bad header length. */
static bool other_format(const unsigned char *head, size_t head_len, const char *fname)
{
    st_format f = st_sniff(head, head_len);
    if (f == ST_FMT_SAFETENSORS || f == ST_FMT_UNKNOWN) return false;
    em_error(EM_ERR_FORMAT, "%s: not a safetensors file: %s", fname, st_format_desc(f));
    return true;
}

/* Checks the 8-byte header length against the file size and the limit; *n gets it. head holds
 * the first head_len bytes of the file. */
static bool check_length(const unsigned char *head, size_t head_len, uint64_t file_size,
                         const char *fname, uint64_t *n)
{
    if (file_size < 8)
        return other_format(head, head_len, fname)
                   ? false
                   : BAD("%s: file is %llu bytes, shorter than the 8-byte header length field",
                         fname, (unsigned long long)file_size);
    *n = read_le64(head);
    uint64_t max = st_get_limits().max_header;
    if (*n == 0)
        return other_format(head, head_len, fname) ? false : BAD("%s: header length is 0", fname);
    if (*n > UINT64_MAX - 8)
        return other_format(head, head_len, fname)
                   ? false
                   : BAD("%s: header length %llu overflows", fname, (unsigned long long)*n);
    if (*n > max)
        return other_format(head, head_len, fname)
                   ? false
                   : BAD("%s: header length %llu exceeds the limit of %llu bytes "
                         "(store_max_header)",
                         fname, (unsigned long long)*n, (unsigned long long)max);
    if (8 + *n > file_size)
        return other_format(head, head_len, fname)
                   ? false
                   : BAD("%s: header length %llu runs past the end of the file (%llu bytes)", fname,
                         (unsigned long long)*n, (unsigned long long)file_size);
    if (head_len > 8 && head[8] != '{')
        return other_format(head, head_len, fname)
                   ? false
                   : BAD("%s: header does not begin with '{'", fname);
    return true;
}

/* Validates the header at buf (the first 8 + N bytes of a file of file_size bytes; buf_len is
 * how many bytes buf holds). Returns the entries in file order. */
static em_store_info *parse_header(const unsigned char *buf, size_t buf_len, uint64_t file_size,
                                   const char *fname)
{
    uint64_t n;
    if (!check_length(buf, buf_len, file_size, fname, &n)) return NULL;
    if (buf_len < 8 + n) {
        em_error(EM_ERR_INTERNAL, "%s: header buffer too short", fname);
        return NULL;
    }
    const char *text = (const char *)buf + 8;
    js_doc *doc = js_parse(text, (size_t)n, fname);
    if (!doc) return NULL;
    const js_value *root = js_root(doc);
    em_store_info *info = NULL;
    st_ent *ents = NULL;
    if (root->type != JS_OBJ) {
        em_error(EM_ERR_FORMAT, "%s: header is not a JSON object", fname);
        goto fail;
    }
    ents = em_alloc((size_t)(root->n ? root->n : 1) * sizeof *ents);
    info = st_info_new();
    if (!ents || !info) goto fail;
    int64_t ne = 0;
    const js_value *meta = NULL;
    for (const js_value *c = root->child; c; c = c->next) {
        if (strcmp(c->key, "__metadata__") == 0) {
            meta = c;
            continue;
        }
        if (!parse_entry(c, fname, &ents[ne])) goto fail;
        ne++;
    }
    if (meta) {
        if (meta->type != JS_OBJ) {
            em_error(EM_ERR_FORMAT, "%s: __metadata__ is not a JSON object", fname);
            goto fail;
        }
        for (const js_value *c = meta->child; c; c = c->next) {
            if (c->type != JS_STR) {
                em_error(EM_ERR_FORMAT, "%s: __metadata__ value for \"%.200s\" is not a string",
                         fname, c->key);
                goto fail;
            }
            if (st_info_add_meta(info, c->key, c->s) != EM_OK) goto fail;
        }
    }
    qsort(ents, (size_t)ne, sizeof *ents, cmp_ent);
    uint64_t at = 0;
    for (int64_t i = 0; i < ne; i++) {
        if (ents[i].begin != at) {
            em_error(EM_ERR_FORMAT, "%s: tensor \"%.200s\" data at %llu %s (expected %llu)", fname,
                     ents[i].name, (unsigned long long)ents[i].begin,
                     ents[i].begin < at ? "overlaps the previous tensor" : "leaves a gap",
                     (unsigned long long)at);
            goto fail;
        }
        at = ents[i].end;
    }
    if (8 + n + at != file_size) {
        if (8 + n + at > file_size || at > file_size)
            em_error(EM_ERR_FORMAT,
                     "%s: tensor data ends at byte %llu, past the end of the file (%llu bytes)",
                     fname, (unsigned long long)(8 + n + at), (unsigned long long)file_size);
        else
            em_error(EM_ERR_FORMAT,
                     "%s: %llu trailing bytes after the last tensor (data must cover the file)",
                     fname, (unsigned long long)(file_size - 8 - n - at));
        goto fail;
    }
    for (int64_t i = 0; i < ne; i++)
        if (st_info_add(info, fname, ents[i].name, ents[i].dtype, ents[i].shape,
                        (int64_t)ents[i].nbytes, (int64_t)(8 + n + ents[i].begin)) != EM_OK)
            goto fail;
    em_free(ents);
    js_free(doc);
    return info;
fail:
    if (!em_failed()) em_error(EM_ERR_OOM, "%s: out of memory reading the header", fname);
    em_free(ents);
    em_store_info_free(info);
    js_free(doc);
    return NULL;
}

em_store_info *st_parse_header(const unsigned char *buf, size_t size, const char *name)
{
    return parse_header(buf, size, size, name);
}

/* ---- loading ----------------------------------------------------------------------------- */

/* A file mapping shared by the tensors that view it; unmapped with the last of them. */
typedef struct st_map {
    atomic_long refs;
    void *base;
    size_t len;
} st_map;

static void map_release(st_map *m)
{
    if (atomic_fetch_sub(&m->refs, 1) == 1) {
        munmap(m->base, m->len);
        em_free(m);
    }
}

static void map_deleter(void *data, void *user)
{
    (void)data;
    map_release(user);
}

/* Builds the dict from a validated image; views into map when it is given and allowed. */
static em_tensor_dict *build_dict(const unsigned char *base, const em_store_info *info, st_map *map,
                                  const char *fname)
{
    em_tensor_dict *d = em_tensor_dict_new();
    if (!d) return NULL;
    for (int64_t i = 0; i < em_store_info_meta_count(info); i++)
        if (em_tensor_dict_set_meta(d, em_store_info_meta_key_at(info, i),
                                    em_store_info_meta_value_at(info, i)) != EM_OK)
            goto fail;
    for (int64_t i = 0; i < em_store_info_count(info); i++) {
        const em_store_entry *e = em_store_info_entry(info, i);
        const unsigned char *p = base + e->offset;
        size_t esz = em_dtype_size(e->dtype);
        em_tensor *t;
        if (map && (uintptr_t)p % esz == 0) {
            atomic_fetch_add(&map->refs, 1);
            t = em_from_blob((void *)p, e->dtype, e->shape, map_deleter, map);
            if (!t) map_release(map);
        } else {
            /* Misaligned or copy requested: an aligned private copy. */
            void *buf = em_alloc(e->nbytes ? (size_t)e->nbytes : 1);
            if (!buf) goto fail;
            memcpy(buf, p, (size_t)e->nbytes);
            t = em_from_blob(buf, e->dtype, e->shape, st_free_deleter, NULL);
            if (!t) em_free(buf);
        }
        if (!t || st_dict_add_owned(d, e->name, st_own(t)) != EM_OK) goto fail;
    }
    return d;
fail:
    if (!em_failed()) em_error(EM_ERR_OOM, "%s: out of memory loading tensors", fname);
    em_tensor_dict_free(d);
    return NULL;
}

em_tensor_dict *st_safetensors_load_fd(int fd, uint64_t file_size, const char *who, bool copy)
{
    unsigned char head[512];
    size_t got = st_head(fd, head, sizeof head);
    uint64_t n;
    if (!check_length(head, got, file_size, who, &n) || file_size > SIZE_MAX) {
        close(fd);
        return NULL;
    }
    size_t size = (size_t)file_size;
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
        em_error(EM_ERR_IO, "%s: cannot map the file: %s", who, strerror(errno));
        return NULL;
    }
    em_store_info *info = parse_header(base, size, size, who);
    if (!info) {
        munmap(base, size);
        return NULL;
    }
    st_map *map = NULL;
    if (!copy) {
        map = em_alloc(sizeof *map);
        if (!map) {
            em_store_info_free(info);
            munmap(base, size);
            return NULL;
        }
        atomic_init(&map->refs, 1);
        map->base = base;
        map->len = size;
    }
    em_tensor_dict *d = build_dict(base, info, map, who);
    em_store_info_free(info);
    if (map)
        map_release(map); /* the loader's reference; tensors hold the rest */
    else
        munmap(base, size);
    return d;
}

em_tensor_dict *em_safetensors_load(const char *path, const em_safetensors_opts *opts)
{
    if (!path) {
        em_error(EM_ERR_INVALID_ARG, "em_safetensors_load: path is NULL");
        return NULL;
    }
    uint64_t size;
    int fd = st_open("em_safetensors_load", path, &size);
    if (fd < 0) return NULL;
    char who[512];
    snprintf(who, sizeof who, "em_safetensors_load: %s", path);
    return st_safetensors_load_fd(fd, size, who, opts && opts->copy);
}

em_tensor_dict *em_safetensors_load_memory(const void *data, size_t size, const char *name)
{
    char who[512];
    snprintf(who, sizeof who, "em_safetensors_load_memory: %s", name ? name : "<memory>");
    if (!data && size) {
        em_error(EM_ERR_INVALID_ARG, "em_safetensors_load_memory: data is NULL");
        return NULL;
    }
    em_store_info *info = parse_header(data, size, size, who);
    if (!info) return NULL;
    em_tensor_dict *d = build_dict(data, info, NULL, who);
    em_store_info_free(info);
    return d;
}

em_store_info *st_safetensors_inspect_fd(int fd, uint64_t size, const char *who)
{
    unsigned char head[512];
    size_t got = st_head(fd, head, sizeof head);
    uint64_t n;
    em_store_info *info = NULL;
    if (!check_length(head, got, size, who, &n)) goto out;
    unsigned char *buf = em_alloc((size_t)(8 + n));
    if (!buf) goto out;
    if (st_head(fd, buf, (size_t)(8 + n)) != 8 + n)
        em_error(EM_ERR_IO, "%s: short read: %s", who, strerror(errno));
    else
        info = parse_header(buf, (size_t)(8 + n), size, who);
    em_free(buf);
out:
    close(fd);
    return info;
}

em_store_info *em_safetensors_inspect(const char *path)
{
    if (!path) {
        em_error(EM_ERR_INVALID_ARG, "em_safetensors_inspect: path is NULL");
        return NULL;
    }
    uint64_t size;
    int fd = st_open("em_safetensors_inspect", path, &size);
    if (fd < 0) return NULL;
    char who[512];
    snprintf(who, sizeof who, "em_safetensors_inspect: %s", path);
    return st_safetensors_inspect_fd(fd, size, who);
}

/* ---- saving ------------------------------------------------------------------------------ */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 1024;
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
    b->p[b->n] = 0;
}

static void sb_str(sbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

static void sb_json_str(sbuf *b, const char *s)
{
    sb_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\', esc[1] = (char)*p;
            sb_put(b, esc, 2);
        } else if (*p < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            sb_put(b, esc, 6);
        } else {
            sb_put(b, (const char *)p, 1);
        }
    }
    sb_put(b, "\"", 1);
}

static bool write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        c += w;
        n -= (size_t)w;
    }
    return true;
}

typedef struct sorted_ref {
    const char *name;
    em_tensor *t;
    size_t esz;
} sorted_ref;

static int cmp_sorted(const void *a, const void *b)
{
    const sorted_ref *x = a, *y = b;
    if (x->esz != y->esz) return x->esz > y->esz ? -1 : 1;
    return strcmp(x->name, y->name);
}

static bool valid_text(const char *s)
{
    return js_utf8_valid((const unsigned char *)s, strlen(s));
}

/* Builds the padded header for the tensors in write order. */
static bool build_header(sbuf *h, const sorted_ref *refs, int64_t n, const em_tensor_dict *dict,
                         const char *const *extra)
{
    sb_str(h, "{");
    int64_t nmeta = em_tensor_dict_meta_count(dict);
    size_t nextra = 0;
    while (extra && extra[2 * nextra]) nextra++;
    bool first = true;
    if (nmeta || nextra) {
        sb_str(h, "\"__metadata__\":{");
        for (int64_t i = 0; i < nmeta; i++) {
            const char *k = em_tensor_dict_meta_key_at(dict, i);
            bool overridden = false;
            for (size_t j = 0; j < nextra; j++)
                if (strcmp(extra[2 * j], k) == 0) overridden = true;
            if (overridden) continue;
            if (!first) sb_str(h, ",");
            first = false;
            sb_json_str(h, k);
            sb_str(h, ":");
            sb_json_str(h, em_tensor_dict_meta_value_at(dict, i));
        }
        for (size_t j = 0; j < nextra; j++) {
            bool later = false; /* the last of repeated extra keys wins */
            for (size_t m = j + 1; m < nextra; m++)
                if (strcmp(extra[2 * m], extra[2 * j]) == 0) later = true;
            if (later) continue;
            if (!first) sb_str(h, ",");
            first = false;
            sb_json_str(h, extra[2 * j]);
            sb_str(h, ":");
            sb_json_str(h, extra[2 * j + 1]);
        }
        sb_str(h, "}");
        first = false;
    }
    uint64_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        char num[64];
        em_tensor *t = refs[i].t;
        em_shape s = em_tensor_shape(t);
        if (!first) sb_str(h, ",");
        first = false;
        sb_json_str(h, refs[i].name);
        sb_str(h, ":{\"dtype\":\"");
        sb_str(h, dtype_st_name(em_tensor_dtype(t)));
        sb_str(h, "\",\"shape\":[");
        for (int d = 0; d < s.rank; d++) {
            snprintf(num, sizeof num, "%s%lld", d ? "," : "", (long long)s.dims[d]);
            sb_str(h, num);
        }
        uint64_t nb = (uint64_t)em_tensor_numel(t) * refs[i].esz;
        snprintf(num, sizeof num, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)at,
                 (unsigned long long)(at + nb));
        sb_str(h, num);
        at += nb;
    }
    sb_str(h, "}");
    while ((8 + h->n) % 8) sb_str(h, " ");
    return !h->oom;
}

/* Writes the tensors' bytes, one tensor at a time. */
static bool write_tensors(int fd, const sorted_ref *refs, int64_t n, const char *path)
{
    for (int64_t i = 0; i < n; i++) {
        em_tensor *t = refs[i].t;
        int64_t numel = em_tensor_numel(t);
        size_t nb = (size_t)numel * refs[i].esz;
        if (!nb) continue;
        const void *src = NULL;
        void *tmp = NULL;
        if (em_tensor_is_contiguous(t) && em_device_equal(em_tensor_device(t), EM_CPU))
            src = em_tensor_data(t);
        if (!src) {
            tmp = em_alloc(nb);
            if (!tmp) return false;
            if (em_to_data(t, tmp, em_tensor_dtype(t), numel) != EM_OK) {
                em_free(tmp);
                return false;
            }
            src = tmp;
        }
        bool ok = write_all(fd, src, nb);
        em_free(tmp);
        if (!ok) {
            em_error(EM_ERR_IO, "em_safetensors_save: writing %s: %s", path, strerror(errno));
            return false;
        }
    }
    return true;
}

/* The directory's name is cut on the stack: once the file is renamed into place the save has
 * happened, and a failed allocation here would leave it reported as done with an error pending. */
static void fsync_dir(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    const char *d = ".";
    if (slash == path) {
        d = "/";
    } else if (slash) {
        size_t n = (size_t)(slash - path);
        if (n >= sizeof dir) return;
        memcpy(dir, path, n);
        dir[n] = 0;
        d = dir;
    }
    int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* Where a save goes: path, or the file a symbolic link at path points to (the link stays and
 * the file it names is replaced). Directories, devices, FIFOs and sockets are refused, so a
 * save never turns /dev/null into a regular file. em_free the result. */
static char *save_target(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) return st_strdup(path);
        em_error(EM_ERR_IO, "em_safetensors_save: cannot stat %s: %s", path, strerror(errno));
        return NULL;
    }
    char *target = NULL;
    if (S_ISLNK(st.st_mode)) {
        char *real = realpath(path, NULL);
        if (!real || stat(real, &st) != 0) {
            em_error(EM_ERR_IO, "em_safetensors_save: %s is a symbolic link to a missing file",
                     path);
            free(real);
            return NULL;
        }
        target = st_strdup(real);
        free(real);
    } else {
        target = st_strdup(path);
    }
    if (!target) return NULL;
    if (!S_ISREG(st.st_mode)) {
        const char *kind = S_ISDIR(st.st_mode)    ? "a directory"
                           : S_ISCHR(st.st_mode)  ? "a character device"
                           : S_ISBLK(st.st_mode)  ? "a block device"
                           : S_ISFIFO(st.st_mode) ? "a FIFO"
                                                  : "not a regular file";
        em_error(EM_ERR_IO, "em_safetensors_save: %s is %s; only regular files are replaced", path,
                 kind);
        em_free(target);
        return NULL;
    }
    return target;
}

/* Splits path into its directory ("." when none), written to dir[cap], and file name; false
 * when the directory does not fit (the caller's best-effort work is then skipped). */
static bool split_path(const char *path, char *dir, size_t cap, const char **base)
{
    const char *slash = strrchr(path, '/');
    *base = slash ? slash + 1 : path;
    size_t dlen = slash ? (slash == path ? 1 : (size_t)(slash - path)) : 1;
    if (dlen + 1 > cap) return false;
    memcpy(dir, slash ? path : ".", dlen);
    dir[dlen] = 0;
    return true;
}

/* Whether name is a temporary file of a save to base: ".base.XXXXXX" (mkstemp's 6 letters). */
static bool is_temp_of(const char *name, const char *base)
{
    size_t bl = strlen(base);
    if (name[0] != '.' || strncmp(name + 1, base, bl) != 0 || name[1 + bl] != '.') return false;
    const char *x = name + 2 + bl;
    if (strlen(x) != 6) return false;
    for (int i = 0; i < 6; i++)
        if (!((x[i] >= 'a' && x[i] <= 'z') || (x[i] >= 'A' && x[i] <= 'Z') ||
              (x[i] >= '0' && x[i] <= '9')))
            return false;
    return true;
}

/* Removes the temporary files that killed saves to target left behind. A save in progress
 * holds a lock on its temporary file, so only the abandoned ones (whose writer is gone, and
 * with it the lock) are removed. */
static void remove_stale_temps(const char *target)
{
    /* best effort, so nothing here may fail the save: no allocation */
    char dir[PATH_MAX];
    const char *base;
    if (!split_path(target, dir, sizeof dir, &base)) return;
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!is_temp_of(e->d_name, base)) continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0)
            unlinkat(dirfd(d), e->d_name, 0);
        close(fd);
    }
    closedir(d);
}

/* Creates and locks the temporary file ".NAME.XXXXXX" next to target (so rename() is atomic
 * and stays in one file system). *tmp gets its name (em_free it). */
static int create_temp(const char *target, char **tmp)
{
    size_t plen = strlen(target);
    const char *slash = strrchr(target, '/');
    size_t dlen = slash ? (size_t)(slash - target) + 1 : 0;
    *tmp = em_alloc(plen + 16);
    if (!*tmp) return -1;
    for (;;) {
        memcpy(*tmp, target, dlen);
        snprintf(*tmp + dlen, plen + 16 - dlen, ".%s.XXXXXX", target + dlen);
        int fd = mkostemp(*tmp, O_CLOEXEC);
        if (fd < 0) {
            em_error(EM_ERR_IO, "em_safetensors_save: cannot create a temporary file for %s: %s",
                     target, strerror(errno));
            return -1;
        }
        /* Another save's clean-up may take the file between mkostemp and the lock; it is then
         * unlinked (no links left) and a new one is made. File systems without locks are
         * never cleaned up, so the file is used as it is. */
        struct stat st;
        if (flock(fd, LOCK_EX) != 0 || (fstat(fd, &st) == 0 && st.st_nlink > 0)) return fd;
        close(fd);
    }
}

em_status em_safetensors_save(const char *path, const em_tensor_dict *dict,
                              const char *const *metadata)
{
    if (!path || !dict)
        return em_error(EM_ERR_INVALID_ARG, "em_safetensors_save: %s is NULL",
                        !path ? "path" : "dict");
    int64_t n = em_tensor_dict_count(dict);
    for (size_t j = 0; metadata && metadata[2 * j]; j++) {
        if (!metadata[2 * j + 1])
            return em_error(EM_ERR_INVALID_ARG,
                            "em_safetensors_save: metadata key \"%s\" has no value",
                            metadata[2 * j]);
        if (!valid_text(metadata[2 * j]) || !valid_text(metadata[2 * j + 1]))
            return em_error(EM_ERR_INVALID_ARG,
                            "em_safetensors_save: metadata \"%.100s\" is not valid UTF-8",
                            metadata[2 * j]);
    }
    for (int64_t i = 0; i < em_tensor_dict_meta_count(dict); i++)
        if (!valid_text(em_tensor_dict_meta_key_at(dict, i)) ||
            !valid_text(em_tensor_dict_meta_value_at(dict, i)))
            return em_error(EM_ERR_INVALID_ARG,
                            "em_safetensors_save: metadata \"%.100s\" is not valid UTF-8",
                            em_tensor_dict_meta_key_at(dict, i));
    sorted_ref *refs = em_alloc((size_t)(n ? n : 1) * sizeof *refs);
    if (!refs) return EM_ERR_OOM;
    for (int64_t i = 0; i < n; i++) {
        const char *name = em_tensor_dict_name_at(dict, i);
        em_tensor *t = em_tensor_dict_tensor_at(dict, i);
        if (!valid_text(name) || strcmp(name, "__metadata__") == 0) {
            em_free(refs);
            return em_error(EM_ERR_INVALID_ARG, "em_safetensors_save: tensor name \"%.100s\" is %s",
                            name,
                            strcmp(name, "__metadata__") == 0 ? "reserved" : "not valid UTF-8");
        }
        refs[i] = (sorted_ref){name, t, em_dtype_size(em_tensor_dtype(t))};
    }
    qsort(refs, (size_t)n, sizeof *refs, cmp_sorted);
    sbuf h = {0};
    if (!build_header(&h, refs, n, dict, metadata)) {
        em_free(h.p);
        em_free(refs);
        return em_error(EM_ERR_OOM, "em_safetensors_save: out of memory building the header");
    }
    char *target = save_target(path);
    if (!target) {
        em_free(h.p);
        em_free(refs);
        return em_last_status();
    }
    remove_stale_temps(target);
    em_status rc = EM_OK;
    char *tmp = NULL;
    int fd = create_temp(target, &tmp);
    if (fd < 0) {
        rc = em_last_status();
        goto out;
    }
    fchmod(fd, 0644);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)h.n >> (8 * i));
    bool ok = write_all(fd, len8, 8) && write_all(fd, h.p, h.n);
    if (!ok)
        em_error(EM_ERR_IO, "em_safetensors_save: writing %s: %s", path, strerror(errno));
    else
        ok = write_tensors(fd, refs, n, path);
    if (ok && fsync(fd) != 0) {
        em_error(EM_ERR_IO, "em_safetensors_save: fsync %s: %s", path, strerror(errno));
        ok = false;
    }
    if (ok && rename(tmp, target) != 0) {
        em_error(EM_ERR_IO, "em_safetensors_save: rename to %s: %s", target, strerror(errno));
        ok = false;
    }
    if (!ok) unlink(tmp);
    /* Closing after the rename keeps the temporary file locked for as long as it has its
     * temporary name (remove_stale_temps). */
    if (close(fd) != 0 && ok) {
        em_error(EM_ERR_IO, "em_safetensors_save: close %s: %s", path, strerror(errno));
        ok = false;
    }
    if (!ok)
        rc = em_failed() ? em_last_status() : EM_ERR_IO;
    else
        fsync_dir(target);
out:
    em_free(tmp);
    em_free(target);
    em_free(h.p);
    em_free(refs);
    return rc;
}
