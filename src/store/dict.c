/* Named tensor dictionaries (ordered names -> tensors plus string metadata) and the store info
 * lists that inspect functions return. */
#include "../tensor/tensor_impl.h"
#include "store_impl.h"

#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* Names and metadata keys are indexed by hash: files with 100k tensors or metadata keys load
 * in linear time. */
struct em_tensor_dict {
    int64_t n, cap;
    char **names;
    em_tensor **tensors;
    st_index names_ix;
    int64_t nmeta, capmeta;
    char **mkeys, **mvals;
    st_index meta_ix;
};

struct em_store_info {
    int64_t n, cap;
    em_store_entry *entries;
    st_index names_ix;
    int64_t nmeta, capmeta;
    char **mkeys, **mvals;
    st_index meta_ix;
};

/* ---- name index -------------------------------------------------------------------------- */

/* Names come from files, so the hash is keyed (SipHash-1-3 with a key drawn once per process):
 * a file cannot be built whose names all land in one bucket and make lookups quadratic. */
static uint64_t sip_key[2];
static pthread_once_t sip_once = PTHREAD_ONCE_INIT;

static void sip_init(void)
{
    if (getrandom(sip_key, sizeof sip_key, GRND_NONBLOCK) != (ssize_t)sizeof sip_key) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        sip_key[0] = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)&ts;
        sip_key[1] = (uint64_t)ts.tv_sec * 0xbf58476d1ce4e5b9ull ^ (uint64_t)getpid();
    }
}

#define ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1, v1 = ROTL(v1, 13), v1 ^= v0, v0 = ROTL(v0, 32);                                  \
        v2 += v3, v3 = ROTL(v3, 16), v3 ^= v2;                                                     \
        v0 += v3, v3 = ROTL(v3, 21), v3 ^= v0;                                                     \
        v2 += v1, v1 = ROTL(v1, 17), v1 ^= v2, v2 = ROTL(v2, 32);                                  \
    } while (0)

uint64_t st_hash(const char *s)
{
    pthread_once(&sip_once, sip_init);
    uint64_t v0 = 0x736f6d6570736575ull ^ sip_key[0], v1 = 0x646f72616e646f6dull ^ sip_key[1];
    uint64_t v2 = 0x6c7967656e657261ull ^ sip_key[0], v3 = 0x7465646279746573ull ^ sip_key[1];
    size_t len = strlen(s), i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t m;
        memcpy(&m, s + i, 8); /* little-endian hosts (docs/store.md) */
        v3 ^= m;
        SIPROUND;
        v0 ^= m;
    }
    uint64_t b = (uint64_t)len << 56;
    for (size_t k = 0; i + k < len; k++) b |= (uint64_t)(unsigned char)s[i + k] << (8 * k);
    v3 ^= b;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

int64_t st_index_find(const st_index *ix, const char *name, st_name_fn name_at, const void *ctx)
{
    if (!ix->cap) return -1;
    uint64_t h = st_hash(name), mask = (uint64_t)ix->cap - 1;
    for (uint64_t k = h & mask;; k = (k + 1) & mask) {
        if (ix->pos[k] < 0) return -1;
        if (ix->hash[k] == h && strcmp(name_at(ctx, ix->pos[k]), name) == 0) return ix->pos[k];
    }
}

static void index_put(st_index *ix, uint64_t h, int64_t pos)
{
    uint64_t mask = (uint64_t)ix->cap - 1, k = h & mask;
    while (ix->pos[k] >= 0) k = (k + 1) & mask;
    ix->pos[k] = pos;
    ix->hash[k] = h;
}

bool st_index_add(st_index *ix, const char *name, int64_t pos)
{
    if (2 * (ix->n + 1) > ix->cap) { /* load factor at most 1/2 */
        int64_t cap = ix->cap ? 2 * ix->cap : 16;
        st_index g = {em_alloc((size_t)cap * sizeof *g.pos), em_alloc((size_t)cap * sizeof *g.hash),
                      cap, ix->n};
        if (!g.pos || !g.hash) {
            em_free(g.pos);
            em_free(g.hash);
            return false;
        }
        for (int64_t i = 0; i < cap; i++) g.pos[i] = -1;
        for (int64_t i = 0; i < ix->cap; i++)
            if (ix->pos[i] >= 0) index_put(&g, ix->hash[i], ix->pos[i]);
        st_index_free(ix);
        *ix = g;
    }
    index_put(ix, st_hash(name), pos);
    ix->n++;
    return true;
}

void st_index_free(st_index *ix)
{
    em_free(ix->pos);
    em_free(ix->hash);
    *ix = (st_index){0};
}

char *st_strdup(const char *s)
{
    size_t n = strlen(s);
    char *r = em_alloc(n + 1);
    if (r) memcpy(r, s, n + 1);
    return r;
}

void st_free_deleter(void *data, void *user)
{
    (void)user;
    em_free(data);
}

em_tensor *st_own(em_tensor *t)
{
    if (!t) return NULL;
    em_retain(t);
    em_release(t); /* drops a scope's reference when there is one */
    return t;
}

/* Grows an array of `size`-byte items to hold at least need items. */
static bool grow(void **arr, int64_t *cap, int64_t need, size_t size)
{
    if (need <= *cap) return true;
    int64_t nc = *cap ? *cap * 2 : 8;
    while (nc < need) nc *= 2;
    void *na = em_alloc((size_t)nc * size);
    if (!na) return false;
    if (*arr) memcpy(na, *arr, (size_t)*cap * size);
    em_free(*arr);
    *arr = na;
    *cap = nc;
    return true;
}

em_tensor_dict *em_tensor_dict_new(void)
{
    return em_calloc(sizeof(em_tensor_dict));
}

void em_tensor_dict_free(em_tensor_dict *d)
{
    if (!d) return;
    for (int64_t i = 0; i < d->n; i++) {
        em_free(d->names[i]);
        tn_release_ref(d->tensors[i]); /* the plain reference add took */
    }
    for (int64_t i = 0; i < d->nmeta; i++) {
        em_free(d->mkeys[i]);
        em_free(d->mvals[i]);
    }
    em_free(d->names);
    em_free(d->tensors);
    em_free(d->mkeys);
    em_free(d->mvals);
    st_index_free(&d->names_ix);
    st_index_free(&d->meta_ix);
    em_free(d);
}

static const char *str_at(const void *arr, int64_t i)
{
    return ((char *const *)arr)[i];
}

static int64_t find_name(const em_tensor_dict *d, const char *name)
{
    return st_index_find(&d->names_ix, name, str_at, d->names);
}

em_status em_tensor_dict_add(em_tensor_dict *d, const char *name, em_tensor *t)
{
    if (!d || !name || !t)
        return em_error(EM_ERR_INVALID_ARG, "em_tensor_dict_add: %s is NULL",
                        !d      ? "dict"
                        : !name ? "name"
                                : "tensor");
    if (!name[0]) return em_error(EM_ERR_INVALID_ARG, "em_tensor_dict_add: empty name");
    if (find_name(d, name) >= 0)
        return em_error(EM_ERR_INVALID_ARG, "em_tensor_dict_add: duplicate name \"%s\"", name);
    int64_t cap = d->cap;
    if (!grow((void **)&d->names, &cap, d->n + 1, sizeof *d->names)) return EM_ERR_OOM;
    cap = d->cap;
    if (!grow((void **)&d->tensors, &cap, d->n + 1, sizeof *d->tensors)) return EM_ERR_OOM;
    d->cap = cap;
    char *copy = st_strdup(name);
    if (!copy) return EM_ERR_OOM;
    if (!st_index_add(&d->names_ix, name, d->n)) {
        em_free(copy);
        return em_error(EM_ERR_OOM, "em_tensor_dict_add: out of memory");
    }
    d->names[d->n] = copy;
    d->tensors[d->n] = em_retain(t);
    d->n++;
    return EM_OK;
}

em_status st_dict_add_owned(em_tensor_dict *d, const char *name, em_tensor *t)
{
    em_status s = em_tensor_dict_add(d, name, t);
    em_release(t);
    return s;
}

em_tensor *em_tensor_dict_get(const em_tensor_dict *d, const char *name)
{
    if (!d || !name) return NULL;
    int64_t i = find_name(d, name);
    return i < 0 ? NULL : d->tensors[i];
}

int64_t em_tensor_dict_count(const em_tensor_dict *d)
{
    return d ? d->n : 0;
}

const char *em_tensor_dict_name_at(const em_tensor_dict *d, int64_t i)
{
    return d && i >= 0 && i < d->n ? d->names[i] : NULL;
}

em_tensor *em_tensor_dict_tensor_at(const em_tensor_dict *d, int64_t i)
{
    return d && i >= 0 && i < d->n ? d->tensors[i] : NULL;
}

static em_status meta_set(char ***keys, char ***vals, int64_t *n, int64_t *cap, st_index *ix,
                          const char *key, const char *value)
{
    int64_t at = st_index_find(ix, key, str_at, *keys);
    if (at >= 0) {
        char *v = st_strdup(value);
        if (!v) return EM_ERR_OOM;
        em_free((*vals)[at]);
        (*vals)[at] = v;
        return EM_OK;
    }
    int64_t c = *cap;
    if (!grow((void **)keys, &c, *n + 1, sizeof **keys)) return EM_ERR_OOM;
    c = *cap;
    if (!grow((void **)vals, &c, *n + 1, sizeof **vals)) return EM_ERR_OOM;
    *cap = c;
    char *k = st_strdup(key), *v = st_strdup(value);
    if (!k || !v || !st_index_add(ix, key, *n)) {
        em_free(k);
        em_free(v);
        return EM_ERR_OOM;
    }
    (*keys)[*n] = k;
    (*vals)[*n] = v;
    (*n)++;
    return EM_OK;
}

em_status em_tensor_dict_set_meta(em_tensor_dict *d, const char *key, const char *value)
{
    if (!d || !key || !value)
        return em_error(EM_ERR_INVALID_ARG, "em_tensor_dict_set_meta: %s is NULL",
                        !d     ? "dict"
                        : !key ? "key"
                               : "value");
    return meta_set(&d->mkeys, &d->mvals, &d->nmeta, &d->capmeta, &d->meta_ix, key, value);
}

const char *em_tensor_dict_get_meta(const em_tensor_dict *d, const char *key)
{
    if (!d || !key) return NULL;
    int64_t i = st_index_find(&d->meta_ix, key, str_at, d->mkeys);
    return i < 0 ? NULL : d->mvals[i];
}

int64_t em_tensor_dict_meta_count(const em_tensor_dict *d)
{
    return d ? d->nmeta : 0;
}

const char *em_tensor_dict_meta_key_at(const em_tensor_dict *d, int64_t i)
{
    return d && i >= 0 && i < d->nmeta ? d->mkeys[i] : NULL;
}

const char *em_tensor_dict_meta_value_at(const em_tensor_dict *d, int64_t i)
{
    return d && i >= 0 && i < d->nmeta ? d->mvals[i] : NULL;
}

/* ---- store info -------------------------------------------------------------------------- */

em_store_info *st_info_new(void)
{
    return em_calloc(sizeof(em_store_info));
}

static const char *entry_name_at(const void *arr, int64_t i)
{
    return ((const em_store_entry *)arr)[i].name;
}

em_status st_info_add(em_store_info *info, const char *who, const char *name, em_dtype dt,
                      em_shape shape, int64_t nbytes, int64_t offset)
{
    if (st_index_find(&info->names_ix, name, entry_name_at, info->entries) >= 0)
        return em_error(EM_ERR_FORMAT, "%s: duplicate tensor name \"%.200s\"", who, name);
    if (!grow((void **)&info->entries, &info->cap, info->n + 1, sizeof *info->entries))
        return EM_ERR_OOM;
    char *copy = st_strdup(name);
    if (!copy) return EM_ERR_OOM;
    if (!st_index_add(&info->names_ix, name, info->n)) {
        em_free(copy);
        return EM_ERR_OOM;
    }
    info->entries[info->n++] = (em_store_entry){
        .name = copy, .dtype = dt, .shape = shape, .nbytes = nbytes, .offset = offset};
    return EM_OK;
}

em_status st_info_add_meta(em_store_info *info, const char *key, const char *value)
{
    return meta_set(&info->mkeys, &info->mvals, &info->nmeta, &info->capmeta, &info->meta_ix, key,
                    value);
}

int64_t em_store_info_count(const em_store_info *info)
{
    return info ? info->n : 0;
}

const em_store_entry *em_store_info_entry(const em_store_info *info, int64_t i)
{
    return info && i >= 0 && i < info->n ? &info->entries[i] : NULL;
}

int64_t em_store_info_meta_count(const em_store_info *info)
{
    return info ? info->nmeta : 0;
}

const char *em_store_info_meta_key_at(const em_store_info *info, int64_t i)
{
    return info && i >= 0 && i < info->nmeta ? info->mkeys[i] : NULL;
}

const char *em_store_info_meta_value_at(const em_store_info *info, int64_t i)
{
    return info && i >= 0 && i < info->nmeta ? info->mvals[i] : NULL;
}

void em_store_info_free(em_store_info *info)
{
    if (!info) return;
    for (int64_t i = 0; i < info->n; i++) em_free((void *)info->entries[i].name);
    for (int64_t i = 0; i < info->nmeta; i++) {
        em_free(info->mkeys[i]);
        em_free(info->mvals[i]);
    }
    em_free(info->entries);
    em_free(info->mkeys);
    em_free(info->mvals);
    st_index_free(&info->names_ix);
    st_index_free(&info->meta_ix);
    em_free(info);
}
