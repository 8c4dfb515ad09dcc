/* Named tensor dictionaries (ordered names -> tensors plus string metadata) and the store info
 * lists that inspect functions return. */
#include "../tensor/tensor_impl.h"
#include "store_impl.h"

#include <string.h>

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
    if (!st_grow((void **)&d->names, &cap, d->n + 1, sizeof *d->names)) return EM_ERR_OOM;
    cap = d->cap;
    if (!st_grow((void **)&d->tensors, &cap, d->n + 1, sizeof *d->tensors)) return EM_ERR_OOM;
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
    if (!st_grow((void **)keys, &c, *n + 1, sizeof **keys)) return EM_ERR_OOM;
    c = *cap;
    if (!st_grow((void **)vals, &c, *n + 1, sizeof **vals)) return EM_ERR_OOM;
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
