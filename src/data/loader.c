/* The batcher and the multi-threaded loader: worker threads build batches k = 0, 1, ... (each
 * from a fixed slice of the epoch's order) into a ring of `prefetch` slots; the consumer takes
 * them strictly in order, so batch k is the same whatever the worker count. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_impl.h"

/* ---- batches ----------------------------------------------------------------------------- */

em_tensor *em_batch_get(const em_batch *b, const char *name)
{
    if (!b || !name) return NULL;
    for (int i = 0; i < b->n; i++)
        if (b->names[i] && strcmp(b->names[i], name) == 0) return b->t[i];
    return NULL;
}

void em_batch_free(em_batch *b)
{
    if (!b) return;
    for (int i = 0; i < b->n; i++) em_release(b->t[i]);
    memset(b, 0, sizeof *b);
}

em_status em_batch_stack(const em_item *items, int64_t n, em_batch *out, void *user)
{
    if (!items || n < 1 || !out) return em_error(EM_ERR_INVALID_ARG, "em_batch_stack: no items");
    int nf = items[0].n;
    for (int f = 0; f < nf; f++) {
        const em_tensor *t0 = items[0].t[f];
        em_shape s = em_tensor_shape(t0);
        em_dtype dt = em_tensor_dtype(t0);
        em_dtype od = (s.rank == 0 && (em_dtype_is_int(dt) || dt == EM_BOOL)) ? EM_I64 : dt;
        if (s.rank >= EM_MAX_RANK)
            return em_error(EM_ERR_SHAPE, "em_batch_stack: field %d has rank %d already", f,
                            s.rank);
        em_shape bs = {.rank = s.rank + 1};
        bs.dims[0] = n;
        for (int d = 0; d < s.rank; d++) bs.dims[d + 1] = s.dims[d];
        int64_t per = em_shape_numel(s);
        em_tensor *b = em_empty(bs, od, EM_CPU);
        if (!b) return em_last_status();
        unsigned char *p = em_tensor_data(b);
        size_t es = em_dtype_size(od);
        for (int64_t i = 0; i < n; i++) {
            const em_tensor *t = i < n && f < items[i].n ? items[i].t[f] : NULL;
            if (!t || items[i].n != nf || !em_shape_equal(em_tensor_shape(t), s) ||
                em_tensor_dtype(t) != dt) {
                char a[64], c[64];
                em_release(b);
                return em_error(EM_ERR_SHAPE,
                                "em_batch_stack: item %lld field %d is %s %s, item 0 has %s %s "
                                "(or the field counts differ)",
                                (long long)i, f, t ? em_dtype_name(em_tensor_dtype(t)) : "none",
                                t ? em_shape_str(em_tensor_shape(t), a, sizeof a) : "",
                                em_dtype_name(dt), em_shape_str(s, c, sizeof c));
            }
            if (em_to_data(t, p + (size_t)(i * per) * es, od, per) != EM_OK) {
                em_release(b);
                return em_last_status();
            }
        }
        out->t[out->n] = b;
        out->names[out->n++] = items[0].names[f];
    }
    return EM_OK;
}

/* ---- the loader -------------------------------------------------------------------------- */

typedef struct slot {
    int64_t k; /* batch number held, -1 when empty */
    em_batch b;
    em_status err;
    char msg[512];
} slot;

struct em_loader {
    em_dataset *ds;
    em_loader_cfg cfg;
    int64_t n_items, n_batches;
    int64_t *order;

    int64_t epoch, next_epoch;
    bool active;
    int64_t consumed, items_done;

    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_ready;
    slot *slots;
    int cap;
    int64_t next_k;
    bool stop;
    pthread_t *threads;
    int nthreads;
};

static void batch_range(const em_loader *l, int64_t k, int64_t *lo, int64_t *hi)
{
    *lo = k * l->cfg.batch_size;
    *hi = *lo + l->cfg.batch_size;
    if (*hi > l->n_items) *hi = l->n_items;
}

/* Builds batch k with no scope open and grad recording off; on failure the error stays
 * pending on this thread and `out` is empty. */
/* Puts m (a new reference: the current scope's, or the caller's outside scopes) in slot i of b
 * as a caller-owned reference, releasing the one there. */
static void batch_swap(em_batch *b, int i, em_tensor *m)
{
    em_retain(m);
    em_release(m); /* gives back the scope's reference, keeps the caller's */
    em_release(b->t[i]);
    b->t[i] = m;
}

static em_status build(em_loader *l, int64_t k, em_batch *out)
{
    memset(out, 0, sizeof *out);
    int64_t lo, hi;
    batch_range(l, k, &lo, &hi);
    int64_t n = hi - lo;
    em_item *items = calloc((size_t)n, sizeof *items);
    if (!items)
        return em_error(EM_ERR_OOM, "em_loader: out of memory for %lld items", (long long)n);
    em_status s = EM_OK;
    em_no_grad_begin();
    for (int64_t i = 0; i < n && s == EM_OK; i++)
        s = em_dataset_get_at(l->ds, l->order[lo + i], l->epoch, &items[i]);
    if (s == EM_OK) {
        em_batch_fn fn = l->cfg.batch_fn ? l->cfg.batch_fn : em_batch_stack;
        uint64_t mark = em_error_mark();
        s = fn(items, n, out, l->cfg.batch_user);
        if (s == EM_OK && em_failed_since(mark)) s = em_last_status();
    }
    em_no_grad_end();
    for (int64_t i = 0; i < n; i++) em_item_free(&items[i]);
    free(items);
    if (s != EM_OK) {
        em_batch_free(out);
        if (!em_failed())
            em_error(s, "em_loader: the batch function failed on batch %lld", (long long)k);
        return s;
    }
    if (l->cfg.pin_memory && !em_device_equal(l->cfg.device, EM_CPU)) {
        for (int i = 0; i < out->n; i++) {
            em_tensor *p = em_pin_memory(out->t[i]);
            if (!p) {
                em_batch_free(out);
                return em_last_status();
            }
            batch_swap(out, i, p);
        }
    }
    out->index = k;
    out->epoch = l->epoch;
    out->size = n;
    return EM_OK;
}

static void *worker_main(void *arg)
{
    em_loader *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->stop && l->next_k < l->n_batches && l->next_k >= l->consumed + l->cap)
            pthread_cond_wait(&l->cv_work, &l->mu);
        if (l->stop || l->next_k >= l->n_batches) break;
        int64_t k = l->next_k++;
        pthread_mutex_unlock(&l->mu);

        em_batch b;
        em_status s = build(l, k, &b);
        char msg[512] = "";
        if (s != EM_OK) {
            snprintf(msg, sizeof msg, "%s", em_last_error());
            em_clear_error();
        }

        pthread_mutex_lock(&l->mu);
        slot *sl = &l->slots[k % l->cap];
        sl->k = k;
        sl->b = b;
        sl->err = s;
        memcpy(sl->msg, msg, sizeof msg);
        pthread_cond_broadcast(&l->cv_ready);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static void stop_workers(em_loader *l)
{
    if (l->nthreads > 0) {
        pthread_mutex_lock(&l->mu);
        l->stop = true;
        pthread_cond_broadcast(&l->cv_work);
        pthread_mutex_unlock(&l->mu);
        for (int i = 0; i < l->nthreads; i++) pthread_join(l->threads[i], NULL);
        l->nthreads = 0;
    }
    for (int i = 0; i < l->cap; i++) {
        if (l->slots[i].k >= 0) em_batch_free(&l->slots[i].b);
        l->slots[i].k = -1;
    }
    l->stop = false;
}

static void end_epoch(em_loader *l)
{
    stop_workers(l);
    if (l->active) l->next_epoch = l->epoch + 1;
    l->active = false;
}

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

static bool start_epoch(em_loader *l)
{
    l->epoch = l->next_epoch;
    l->active = true;
    l->consumed = 0;
    l->items_done = 0;
    l->next_k = 0;
    l->stop = false;
    for (int64_t i = 0; i < l->n_items; i++) l->order[i] = i;
    if (l->cfg.shuffle)
        permute(l->order, l->n_items, dt_mix(l->cfg.seed + (uint64_t)l->epoch, 0x4C4Fu));
    int want = l->cfg.workers;
    for (int i = 0; i < want; i++) {
        if (pthread_create(&l->threads[i], NULL, worker_main, l) != 0) {
            em_error(EM_ERR_STATE, "em_loader: cannot start worker thread %d of %d", i, want);
            end_epoch(l);
            return false;
        }
        l->nthreads = i + 1;
    }
    return true;
}

em_loader *em_loader_new(em_dataset *ds, em_loader_cfg cfg)
{
    if (!ds) {
        if (!em_failed()) em_error(EM_ERR_INVALID_ARG, "em_loader_new: dataset is NULL");
        return NULL;
    }
    if (cfg.batch_size == 0) cfg.batch_size = 1;
    if (cfg.batch_size < 0 || cfg.workers < 0 || cfg.workers > 256 || cfg.prefetch < 0 ||
        cfg.prefetch > 4096) {
        em_error(EM_ERR_INVALID_ARG,
                 "em_loader_new: batch_size %lld, workers %d (0 to 256), prefetch %d (0 to 4096)",
                 (long long)cfg.batch_size, cfg.workers, cfg.prefetch);
        em_dataset_free(ds);
        return NULL;
    }
    em_loader *l = calloc(1, sizeof *l);
    if (!l) {
        em_error(EM_ERR_OOM, "em_loader_new: out of memory");
        em_dataset_free(ds);
        return NULL;
    }
    l->ds = ds;
    l->cfg = cfg;
    l->n_items = em_dataset_len(ds);
    l->n_batches =
        cfg.drop_last ? l->n_items / cfg.batch_size : core_ceil_div(l->n_items, cfg.batch_size);
    l->cap = cfg.prefetch ? cfg.prefetch : 2 * (cfg.workers > 0 ? cfg.workers : 1);
    l->order = malloc((size_t)(l->n_items > 0 ? l->n_items : 1) * sizeof *l->order);
    l->slots = calloc((size_t)l->cap, sizeof *l->slots);
    l->threads = calloc((size_t)(cfg.workers > 0 ? cfg.workers : 1), sizeof *l->threads);
    if (!l->order || !l->slots || !l->threads) {
        free(l->order);
        free(l->slots);
        free(l->threads);
        free(l);
        em_dataset_free(ds);
        em_error(EM_ERR_OOM, "em_loader_new: out of memory");
        return NULL;
    }
    for (int i = 0; i < l->cap; i++) l->slots[i].k = -1;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv_work, NULL);
    pthread_cond_init(&l->cv_ready, NULL);
    return l;
}

bool em_loader_next(em_loader *l, em_batch *out)
{
    if (out) memset(out, 0, sizeof *out);
    if (!l || !out) {
        em_error(EM_ERR_INVALID_ARG, "em_loader_next: loader or batch is NULL");
        return false;
    }
    if (!l->active && !start_epoch(l)) return false;
    int64_t k = l->consumed;
    if (k >= l->n_batches) {
        end_epoch(l);
        return false;
    }
    em_status s;
    if (l->nthreads == 0) {
        /* inline: a private scope so nothing joins the caller's, then caller-owned refs */
        em_scope_begin();
        s = build(l, k, out);
        for (int i = 0; i < out->n; i++) em_retain(out->t[i]);
        em_scope_end();
    } else {
        pthread_mutex_lock(&l->mu);
        slot *sl = &l->slots[k % l->cap];
        while (sl->k != k) pthread_cond_wait(&l->cv_ready, &l->mu);
        *out = sl->b;
        s = sl->err;
        if (s != EM_OK) em_error(s, "%s", sl->msg);
        sl->k = -1;
        memset(&sl->b, 0, sizeof sl->b);
        pthread_mutex_unlock(&l->mu);
    }
    if (s != EM_OK) {
        em_batch_free(out);
        end_epoch(l);
        return false;
    }
    if (!em_device_equal(l->cfg.device, EM_CPU)) {
        /* the batch's caller-owned references are swapped for ones on the device */
        for (int i = 0; i < out->n; i++) {
            em_tensor *m = em_to_device(out->t[i], l->cfg.device);
            if (!m) {
                em_batch_free(out);
                end_epoch(l);
                return false;
            }
            batch_swap(out, i, m);
        }
    }
    pthread_mutex_lock(&l->mu);
    l->consumed++;
    l->items_done += out->size;
    pthread_cond_broadcast(&l->cv_work);
    pthread_mutex_unlock(&l->mu);
    return true;
}

void em_loader_reset(em_loader *l, int64_t epoch)
{
    if (!l) return;
    end_epoch(l);
    if (epoch >= 0) l->next_epoch = epoch;
}

int64_t em_loader_num_batches(const em_loader *l)
{
    return l ? l->n_batches : 0;
}

em_loader_progress em_loader_get_progress(em_loader *l)
{
    em_loader_progress p = {0};
    if (!l) return p;
    pthread_mutex_lock(&l->mu);
    p.epoch = l->active ? l->epoch : l->next_epoch;
    p.batches_done = l->active ? l->consumed : 0;
    p.batches_total = l->n_batches;
    p.items_done = l->active ? l->items_done : 0;
    p.items_total = l->cfg.drop_last ? l->n_batches * l->cfg.batch_size : l->n_items;
    pthread_mutex_unlock(&l->mu);
    return p;
}

em_dataset *em_loader_dataset(const em_loader *l)
{
    return l ? l->ds : NULL;
}

void em_loader_free(em_loader *l)
{
    if (!l) return;
    stop_workers(l);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv_work);
    pthread_cond_destroy(&l->cv_ready);
    em_dataset_free(l->ds);
    free(l->order);
    free(l->slots);
    free(l->threads);
    free(l);
}
