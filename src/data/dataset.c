/* Datasets: items, the dataset header, in-memory datasets, and the index transforms (shuffle,
 * subset, take, split, sample, concat, map, sliding windows). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_impl.h"

/* ---- items ------------------------------------------------------------------------------- */

em_status em_item_push(em_item *it, const char *name, em_tensor *t)
{
    if (!it) {
        em_release(t);
        return em_error(EM_ERR_INVALID_ARG, "em_item_push: item is NULL");
    }
    if (!t)
        return em_failed() ? em_last_status()
                           : em_error(EM_ERR_INVALID_ARG, "em_item_push: tensor is NULL");
    if (it->n >= EM_ITEM_MAX) {
        em_release(t);
        return em_error(EM_ERR_INDEX, "em_item_push: an item holds at most %d tensors",
                        EM_ITEM_MAX);
    }
    it->names[it->n] = name;
    it->t[it->n++] = t;
    return EM_OK;
}

em_tensor *em_item_get(const em_item *it, const char *name)
{
    if (!it || !name) return NULL;
    for (int i = 0; i < it->n; i++)
        if (it->names[i] && strcmp(it->names[i], name) == 0) return it->t[i];
    return NULL;
}

void em_item_free(em_item *it)
{
    if (!it) return;
    for (int i = 0; i < it->n; i++) em_release(it->t[i]);
    memset(it, 0, sizeof *it);
}

/* ---- the header -------------------------------------------------------------------------- */

em_dataset *em_dataset_alloc(size_t size, const em_dataset_type *type)
{
    if (size < sizeof(em_dataset) || !type || !type->len || !type->get) {
        em_error(EM_ERR_INVALID_ARG,
                 "em_dataset_alloc: size %zu or type (len and get required) invalid", size);
        return NULL;
    }
    em_dataset *ds = em_calloc(size);
    if (!ds) return NULL;
    ds->type = type;
    ds->refcount = 1;
    return ds;
}

em_dataset *em_dataset_retain(em_dataset *ds)
{
    if (ds) ds->refcount++;
    return ds;
}

void em_dataset_free(em_dataset *ds)
{
    if (!ds || --ds->refcount > 0) return;
    if (ds->type->destroy) ds->type->destroy(ds);
    em_free(ds);
}

int64_t em_dataset_len(em_dataset *ds)
{
    if (!ds) {
        em_error(EM_ERR_INVALID_ARG, "em_dataset_len: dataset is NULL");
        return -1;
    }
    return ds->type->len(ds);
}

em_status em_dataset_get_at(em_dataset *ds, int64_t index, int64_t epoch, em_item *out)
{
    if (!out) return em_error(EM_ERR_INVALID_ARG, "em_dataset_get: item is NULL");
    memset(out, 0, sizeof *out);
    if (!ds) return em_error(EM_ERR_INVALID_ARG, "em_dataset_get: dataset is NULL");
    int64_t n = ds->type->len(ds);
    if (index < 0) index += n;
    if (index < 0 || index >= n)
        return em_error(EM_ERR_INDEX, "em_dataset_get: index %lld outside a %s dataset of %lld",
                        (long long)index, ds->type->name ? ds->type->name : "user", (long long)n);
    uint64_t mark = em_error_mark();
    em_status s = ds->type->get(ds, index, epoch, out);
    if (s == EM_OK && em_failed_since(mark)) s = em_last_status();
    if (s != EM_OK) {
        em_item_free(out);
        if (!em_failed())
            em_error(s, "em_dataset_get: %s dataset failed on item %lld",
                     ds->type->name ? ds->type->name : "user", (long long)index);
    }
    return s;
}

em_status em_dataset_get(em_dataset *ds, int64_t index, em_item *out)
{
    return em_dataset_get_at(ds, index, 0, out);
}

/* ---- randomness -------------------------------------------------------------------------- */

static uint64_t splitmix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

uint64_t dt_mix(uint64_t seed, uint64_t salt)
{
    return splitmix(seed ^ splitmix(salt));
}

double em_data_uniform(uint64_t seed, int64_t epoch, int64_t index, uint32_t j)
{
    return em_rng_uniform_at(dt_mix(seed, (uint64_t)epoch), (uint64_t)index * 256u, j & 511u);
}

/* Fisher-Yates over idx[0..n) from the stream (key, 0): the same permutation everywhere. */
static void permute(int64_t *idx, int64_t n, uint64_t key)
{
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(em_rng_uniform_at(key, 0, (uint64_t)i) * (double)(i + 1));
        if (j > i) j = i;
        int64_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
}

/* ---- in-memory datasets ------------------------------------------------------------------ */

static int64_t mem_len(em_dataset *ds)
{
    return ((dt_mem *)ds)->n;
}

static em_status mem_get(em_dataset *ds, int64_t i, int64_t epoch, em_item *out)
{
    dt_mem *m = (dt_mem *)ds;
    for (int k = 0; k < m->nf; k++) {
        dt_field *f = &m->f[k];
        const unsigned char *p = f->base + (size_t)i * f->row_bytes;
        em_tensor *t;
        if (f->scale == 0) {
            t = em_from_data(p, f->dtype, f->row, f->out_dtype, EM_CPU);
        } else {
            /* u8 pixels -> floats times scale, without a second tensor */
            int64_t cnt = em_shape_numel(f->row);
            t = em_empty(f->row, f->out_dtype, EM_CPU);
            if (t) {
                if (f->out_dtype == EM_F64) {
                    double *d = em_tensor_data(t);
                    for (int64_t j = 0; j < cnt; j++) d[j] = p[j] * f->scale;
                } else {
                    float *d = em_tensor_data(t);
                    for (int64_t j = 0; j < cnt; j++) d[j] = (float)(p[j] * f->scale);
                }
            }
        }
        em_status s = em_item_push(out, f->name[0] ? f->name : NULL, t);
        if (s != EM_OK) return s;
    }
    return EM_OK;
}

static void mem_destroy(em_dataset *ds)
{
    dt_mem *m = (dt_mem *)ds;
    for (int k = 0; k < m->nf; k++) em_release(m->f[k].src); /* no scope holds it */
}

static const em_dataset_type mem_type = {"memory", mem_len, mem_get, mem_destroy};

dt_mem *dt_mem_new(int64_t n)
{
    dt_mem *m = (dt_mem *)em_dataset_alloc(sizeof(dt_mem), &mem_type);
    if (m) m->n = n;
    return m;
}

bool dt_mem_add(dt_mem *m, const char *name, em_tensor *t, em_shape row, em_dtype out_dtype,
                double scale)
{
    if (!t) return false;
    if (m->nf >= EM_ITEM_MAX) {
        em_release(t);
        em_error(EM_ERR_INDEX, "dataset: more than %d fields", EM_ITEM_MAX);
        return false;
    }
    em_tensor *c = NULL;
    if (em_device_equal(em_tensor_device(t), EM_CPU)) {
        c = em_contiguous(t);
    } else {
        em_tensor *h = em_to_device(t, EM_CPU);
        c = em_contiguous(h);
        em_release(h);
    }
    em_release(t);
    if (!c) return false;
    int64_t n0 = em_tensor_rank(c) > 0 ? em_tensor_dim(c, 0) : -1;
    int64_t per = n0 > 0 ? em_tensor_numel(c) / n0 : 0;
    if (n0 != m->n || (n0 > 0 && per != em_shape_numel(row))) {
        char b[64];
        em_error(EM_ERR_SHAPE, "dataset: field %s of shape %s does not have %lld rows of %lld",
                 name ? name : "?", em_shape_str(em_tensor_shape(c), b, sizeof b), (long long)m->n,
                 (long long)em_shape_numel(row));
        em_release(c);
        return false;
    }
    if (scale != 0 &&
        (em_tensor_dtype(c) != EM_U8 || (out_dtype != EM_F32 && out_dtype != EM_F64))) {
        em_release(c);
        em_error(EM_ERR_INTERNAL, "dataset: scaling only from u8 to f32/f64");
        return false;
    }
    /* The dataset keeps a handle of its own on c's storage, taken out of the current scope: no
       scope ever holds it, so em_release in mem_destroy gives back exactly the dataset's
       reference (on c itself, em_release would give back a scope's first). */
    em_tensor *own = em_detach(c);
    em_release(c);
    if (!own) return false;
    dt_field *f = &m->f[m->nf++];
    f->src = em_retain(own);
    em_release(own); /* the scope's reference, when a scope took one */
    f->base = em_tensor_data(own);
    f->dtype = em_tensor_dtype(own);
    f->out_dtype = out_dtype;
    f->scale = scale;
    f->row = row;
    f->row_bytes = (size_t)per * em_dtype_size(f->dtype);
    snprintf(f->name, sizeof f->name, "%s", name ? name : "");
    return true;
}

em_dataset *em_dataset_from_tensors(em_tensor *const *tensors, const char *const *names, int n)
{
    if (!tensors || n < 1 || n > EM_ITEM_MAX) {
        em_error(EM_ERR_INVALID_ARG, "em_dataset_from_tensors: need 1 to %d tensors, got %d",
                 EM_ITEM_MAX, n);
        return NULL;
    }
    for (int k = 0; k < n; k++) {
        if (!tensors[k] || em_tensor_rank(tensors[k]) < 1) {
            em_error(EM_ERR_SHAPE, "em_dataset_from_tensors: tensor %d is NULL or rank 0", k);
            return NULL;
        }
    }
    int64_t len = em_tensor_dim(tensors[0], 0);
    dt_mem *m = dt_mem_new(len);
    if (!m) return NULL;
    for (int k = 0; k < n; k++) {
        em_shape s = em_tensor_shape(tensors[k]);
        if (s.dims[0] != len) {
            em_error(EM_ERR_SHAPE,
                     "em_dataset_from_tensors: tensor %d has %lld rows, tensor 0 has %lld", k,
                     (long long)s.dims[0], (long long)len);
            em_dataset_free(&m->base);
            return NULL;
        }
        em_shape row = {.rank = s.rank - 1};
        for (int d = 1; d < s.rank; d++) row.dims[d - 1] = s.dims[d];
        if (!dt_mem_add(m, names ? names[k] : NULL, em_contiguous(tensors[k]), row,
                        em_tensor_dtype(tensors[k]), 0)) {
            em_dataset_free(&m->base);
            return NULL;
        }
    }
    return &m->base;
}

/* ---- index transforms -------------------------------------------------------------------- */

typedef struct dt_index {
    em_dataset base;
    em_dataset *src;
    int64_t n, start;
    int64_t *idx; /* NULL: start + i */
} dt_index;

static int64_t index_len(em_dataset *ds)
{
    return ((dt_index *)ds)->n;
}

static em_status index_get(em_dataset *ds, int64_t i, int64_t epoch, em_item *out)
{
    dt_index *x = (dt_index *)ds;
    int64_t j = x->idx ? x->idx[i] : x->start + i;
    return x->src->type->get(x->src, j, epoch, out);
}

static void index_destroy(em_dataset *ds)
{
    dt_index *x = (dt_index *)ds;
    em_free(x->idx);
    em_dataset_free(x->src);
}

static const em_dataset_type index_type = {"index", index_len, index_get, index_destroy};

/* Takes src and idx (em_alloc'd, may be NULL). */
static em_dataset *index_new(em_dataset *src, int64_t *idx, int64_t start, int64_t n)
{
    dt_index *x = (dt_index *)em_dataset_alloc(sizeof(dt_index), &index_type);
    if (!x) {
        em_free(idx);
        em_dataset_free(src);
        return NULL;
    }
    x->src = src;
    x->idx = idx;
    x->start = start;
    x->n = n;
    return &x->base;
}

static int64_t *iota(int64_t n)
{
    int64_t *idx = em_alloc((size_t)(n > 0 ? n : 1) * sizeof *idx);
    if (idx)
        for (int64_t i = 0; i < n; i++) idx[i] = i;
    return idx;
}

static bool check_src(em_dataset *src, const char *what)
{
    if (src) return true;
    if (!em_failed()) em_error(EM_ERR_INVALID_ARG, "%s: source dataset is NULL", what);
    return false;
}

em_dataset *em_dataset_shuffle(em_dataset *src, uint64_t seed)
{
    if (!check_src(src, "em_dataset_shuffle")) return NULL;
    int64_t n = src->type->len(src);
    int64_t *idx = iota(n);
    if (!idx) {
        em_dataset_free(src);
        return NULL;
    }
    permute(idx, n, dt_mix(seed, 0x5348u));
    return index_new(src, idx, 0, n);
}

em_dataset *em_dataset_subset(em_dataset *src, int64_t start, int64_t count)
{
    if (!check_src(src, "em_dataset_subset")) return NULL;
    int64_t n = src->type->len(src);
    if (start < 0 || count < 0 || start > n || count > n - start) {
        em_error(EM_ERR_INDEX, "em_dataset_subset: [%lld, %lld + %lld) outside a dataset of %lld",
                 (long long)start, (long long)start, (long long)count, (long long)n);
        em_dataset_free(src);
        return NULL;
    }
    return index_new(src, NULL, start, count);
}

em_dataset *em_dataset_take(em_dataset *src, const int64_t *indices, int64_t k)
{
    if (!check_src(src, "em_dataset_take")) return NULL;
    int64_t n = src->type->len(src);
    if (k < 0 || (k > 0 && !indices)) {
        em_error(EM_ERR_INVALID_ARG, "em_dataset_take: %lld indices", (long long)k);
        em_dataset_free(src);
        return NULL;
    }
    int64_t *idx = em_alloc((size_t)(k > 0 ? k : 1) * sizeof *idx);
    if (!idx) {
        em_dataset_free(src);
        return NULL;
    }
    for (int64_t i = 0; i < k; i++) {
        int64_t j = indices[i] < 0 ? indices[i] + n : indices[i];
        if (j < 0 || j >= n) {
            em_error(EM_ERR_INDEX, "em_dataset_take: index %lld outside a dataset of %lld",
                     (long long)indices[i], (long long)n);
            em_free(idx);
            em_dataset_free(src);
            return NULL;
        }
        idx[i] = j;
    }
    return index_new(src, idx, 0, k);
}

em_status em_dataset_split(em_dataset *src, double frac, bool shuffle, uint64_t seed,
                           em_dataset **first, em_dataset **second)
{
    if (first) *first = NULL;
    if (second) *second = NULL;
    if (!check_src(src, "em_dataset_split")) return em_last_status();
    if (!first || !second || !(frac >= 0 && frac <= 1)) {
        em_dataset_free(src);
        return em_error(EM_ERR_INVALID_ARG,
                        "em_dataset_split: fraction %g outside [0, 1] or NULL outputs", frac);
    }
    int64_t n = src->type->len(src);
    int64_t na = (int64_t)floor(frac * (double)n + 0.5);
    if (na > n) na = n;
    int64_t *a = iota(n);
    int64_t *b = em_alloc((size_t)(n - na > 0 ? n - na : 1) * sizeof *b);
    if (!a || !b) {
        em_free(a);
        em_free(b);
        em_dataset_free(src);
        return em_last_status();
    }
    if (shuffle) permute(a, n, dt_mix(seed, 0x5350u));
    memcpy(b, a + na, (size_t)(n - na) * sizeof *b);
    em_dataset_retain(src);
    *first = index_new(src, a, 0, na);
    *second = index_new(src, b, 0, n - na);
    if (!*first || !*second) {
        em_dataset_free(*first);
        em_dataset_free(*second);
        *first = *second = NULL;
        return em_last_status();
    }
    return EM_OK;
}

em_dataset *em_dataset_sample(em_dataset *src, int64_t k, bool replacement, uint64_t seed)
{
    if (!check_src(src, "em_dataset_sample")) return NULL;
    int64_t n = src->type->len(src);
    if (k < 0 || (!replacement && k > n) || (replacement && n == 0 && k > 0)) {
        em_error(EM_ERR_INVALID_ARG,
                 "em_dataset_sample: %lld items %s replacement from a dataset of %lld",
                 (long long)k, replacement ? "with" : "without", (long long)n);
        em_dataset_free(src);
        return NULL;
    }
    /* the k indices are held in memory */
    if (!em_tensor_check_size("em_dataset_sample", EM_SHAPE(k), EM_I64, EM_CPU)) {
        em_dataset_free(src);
        return NULL;
    }
    uint64_t key = dt_mix(seed, 0x534Du);
    int64_t *idx;
    if (replacement) {
        idx = em_alloc((size_t)(k > 0 ? k : 1) * sizeof *idx);
        if (idx)
            for (int64_t i = 0; i < k; i++) {
                int64_t j = (int64_t)(em_rng_uniform_at(key, 0, (uint64_t)i) * (double)n);
                idx[i] = j < n ? j : n - 1;
            }
    } else {
        /* partial Fisher-Yates: the first k of a random permutation */
        idx = iota(n);
        if (idx)
            for (int64_t i = 0; i < k; i++) {
                int64_t j = i + (int64_t)(em_rng_uniform_at(key, 0, (uint64_t)i) * (double)(n - i));
                if (j >= n) j = n - 1;
                int64_t t = idx[i];
                idx[i] = idx[j];
                idx[j] = t;
            }
    }
    if (!idx) {
        em_dataset_free(src);
        return NULL;
    }
    return index_new(src, idx, 0, k);
}

/* ---- concat ------------------------------------------------------------------------------ */

typedef struct dt_concat {
    em_dataset base;
    int n;
    em_dataset **parts;
    int64_t *ends; /* cumulative lengths */
} dt_concat;

static int64_t concat_len(em_dataset *ds)
{
    dt_concat *c = (dt_concat *)ds;
    return c->n ? c->ends[c->n - 1] : 0;
}

static em_status concat_get(em_dataset *ds, int64_t i, int64_t epoch, em_item *out)
{
    dt_concat *c = (dt_concat *)ds;
    int k = 0;
    while (i >= c->ends[k]) k++;
    int64_t j = i - (k ? c->ends[k - 1] : 0);
    return c->parts[k]->type->get(c->parts[k], j, epoch, out);
}

static void concat_destroy(em_dataset *ds)
{
    dt_concat *c = (dt_concat *)ds;
    for (int k = 0; k < c->n; k++) em_dataset_free(c->parts[k]);
    em_free(c->parts);
    em_free(c->ends);
}

static const em_dataset_type concat_type = {"concat", concat_len, concat_get, concat_destroy};

em_dataset *em_dataset_concat(em_dataset *const *parts, int n)
{
    bool ok = parts && n > 0;
    for (int k = 0; ok && k < n; k++) ok = parts[k] != NULL;
    dt_concat *c = ok ? (dt_concat *)em_dataset_alloc(sizeof(dt_concat), &concat_type) : NULL;
    if (c) {
        c->parts = em_alloc((size_t)n * sizeof *c->parts);
        c->ends = em_alloc((size_t)n * sizeof *c->ends);
        if (!c->parts || !c->ends) ok = false;
    }
    if (!ok || !c) {
        if (!em_failed())
            em_error(EM_ERR_INVALID_ARG, "em_dataset_concat: NULL or empty list of parts");
        for (int k = 0; parts && k < n; k++) em_dataset_free(parts[k]);
        if (c) {
            c->n = 0;
            em_dataset_free(&c->base);
        }
        return NULL;
    }
    int64_t total = 0;
    for (int k = 0; k < n; k++) {
        c->parts[k] = parts[k];
        total += parts[k]->type->len(parts[k]);
        c->ends[k] = total;
    }
    c->n = n;
    return &c->base;
}

/* ---- map --------------------------------------------------------------------------------- */

typedef struct dt_map {
    em_dataset base;
    em_dataset *src;
    em_map_fn fn;
    void *user;
    void (*user_free)(void *);
} dt_map;

static int64_t map_len(em_dataset *ds)
{
    dt_map *m = (dt_map *)ds;
    return m->src->type->len(m->src);
}

static em_status map_get(em_dataset *ds, int64_t i, int64_t epoch, em_item *out)
{
    dt_map *m = (dt_map *)ds;
    em_status s = m->src->type->get(m->src, i, epoch, out);
    if (s != EM_OK) return s;
    return m->fn(out, i, epoch, m->user);
}

static void map_destroy(em_dataset *ds)
{
    dt_map *m = (dt_map *)ds;
    if (m->user_free) m->user_free(m->user);
    em_dataset_free(m->src);
}

static const em_dataset_type map_type = {"map", map_len, map_get, map_destroy};

em_dataset *em_dataset_map(em_dataset *src, em_map_fn fn, void *user, void (*user_free)(void *))
{
    if (!check_src(src, "em_dataset_map") || !fn) {
        if (src) em_error(EM_ERR_INVALID_ARG, "em_dataset_map: fn is NULL");
        em_dataset_free(src);
        if (user_free) user_free(user);
        return NULL;
    }
    dt_map *m = (dt_map *)em_dataset_alloc(sizeof(dt_map), &map_type);
    if (!m) {
        em_dataset_free(src);
        if (user_free) user_free(user);
        return NULL;
    }
    m->src = src;
    m->fn = fn;
    m->user = user;
    m->user_free = user_free;
    return &m->base;
}

/* ---- one-field transforms (the augmentations use these) ----------------------------------- */

typedef struct dt_fmap {
    em_dataset base;
    em_dataset *src;
    int field;
    dt_field_fn fn;
    const char *what;
    void *ctx;
} dt_fmap;

static int64_t fmap_len(em_dataset *ds)
{
    dt_fmap *m = (dt_fmap *)ds;
    return m->src->type->len(m->src);
}

static em_status fmap_get(em_dataset *ds, int64_t i, int64_t epoch, em_item *out)
{
    dt_fmap *m = (dt_fmap *)ds;
    em_status s = m->src->type->get(m->src, i, epoch, out);
    if (s != EM_OK) return s;
    if (m->field >= out->n)
        return em_error(EM_ERR_INDEX, "%s: field %d of an item with %d", m->what, m->field, out->n);
    em_tensor *t = m->fn(out->t[m->field], i, epoch, m->ctx);
    if (!t) return em_failed() ? em_last_status() : em_error(EM_ERR_INTERNAL, "%s failed", m->what);
    em_release(out->t[m->field]);
    out->t[m->field] = t;
    return EM_OK;
}

static void fmap_destroy(em_dataset *ds)
{
    dt_fmap *m = (dt_fmap *)ds;
    em_free(m->ctx);
    em_dataset_free(m->src);
}

static const em_dataset_type fmap_type = {"transform", fmap_len, fmap_get, fmap_destroy};

em_dataset *dt_field_map(em_dataset *src, int field, dt_field_fn fn, const void *ctx,
                         size_t ctx_size, const char *what)
{
    if (!check_src(src, what)) return NULL;
    if (field < 0 || field >= EM_ITEM_MAX) {
        em_error(EM_ERR_INDEX, "%s: field %d outside [0, %d)", what, field, EM_ITEM_MAX);
        em_dataset_free(src);
        return NULL;
    }
    dt_fmap *m = (dt_fmap *)em_dataset_alloc(sizeof(dt_fmap), &fmap_type);
    void *c = em_alloc(ctx_size ? ctx_size : 1);
    if (!m || !c) {
        em_free(c);
        em_free(m);
        em_dataset_free(src);
        return NULL;
    }
    if (ctx_size) memcpy(c, ctx, ctx_size);
    m->src = src;
    m->field = field;
    m->fn = fn;
    m->what = what;
    m->ctx = c;
    return &m->base;
}

/* ---- sliding windows --------------------------------------------------------------------- */

typedef struct dt_win {
    em_dataset base;
    int64_t *seq;
    int64_t n, length, stride, count;
} dt_win;

static int64_t win_len(em_dataset *ds)
{
    return ((dt_win *)ds)->count;
}

static em_status win_get(em_dataset *ds, int64_t i, int64_t epoch, em_item *out)
{
    dt_win *w = (dt_win *)ds;
    const int64_t *p = w->seq + i * w->stride;
    em_status s = em_item_push(out, "x", em_from_i64(p, EM_SHAPE(w->length)));
    if (s == EM_OK) s = em_item_push(out, "y", em_from_i64(p + 1, EM_SHAPE(w->length)));
    return s;
}

static void win_destroy(em_dataset *ds)
{
    em_free(((dt_win *)ds)->seq);
}

static const em_dataset_type win_type = {"windows", win_len, win_get, win_destroy};

em_dataset *em_dataset_windows(const em_tensor *seq, int64_t length, int64_t stride)
{
    if (!seq || em_tensor_rank(seq) != 1 || length < 1 || stride < 0) {
        em_error(EM_ERR_INVALID_ARG,
                 "em_dataset_windows: need a 1-D sequence, length >= 1 (got %lld), stride >= 0",
                 (long long)length);
        return NULL;
    }
    if (stride == 0) stride = 1;
    int64_t n = em_tensor_numel(seq);
    dt_win *w = (dt_win *)em_dataset_alloc(sizeof(dt_win), &win_type);
    if (!w) return NULL;
    w->seq = em_alloc((size_t)(n > 0 ? n : 1) * sizeof *w->seq);
    if (!w->seq || em_to_data(seq, w->seq, EM_I64, n) != EM_OK) {
        em_dataset_free(&w->base);
        return NULL;
    }
    w->n = n;
    w->length = length;
    w->stride = stride;
    w->count = n > length ? (n - length - 1) / stride + 1 : 0;
    return &w->base;
}
