/* The public device queries: how many devices a backend has, what each is, its memory as its
 * allocator sees it, releasing the cache, and the per-thread persistent-allocation scopes. */
#include <stdio.h>
#include <string.h>

#include "backend.h"

#define MAX_DEV EM_MAX_THREAD_DEVICES

/* The calling thread's open em_device_persistent_begin scopes per device. */
static _Thread_local int tl_persist[EM_MAX_BACKENDS][MAX_DEV];

int em_device_count(const char *backend)
{
    em_backends_init();
    if (!backend) {
        em_error(EM_ERR_INVALID_ARG, "em_device_count: argument `backend` is NULL");
        return -1;
    }
    int b = em_backend_find(backend);
    if (b >= 0) return em_backend_get(b)->device_count();
    if (strcmp(backend, "cuda") == 0) return 0; /* registered only where a GPU was found */
    em_error(EM_ERR_DEVICE, "em_device_count: unknown backend \"%s\" (known: cpu, cuda)", backend);
    return -1;
}

em_status em_device_get_props(em_device d, em_device_props *out)
{
    if (!out) return em_error(EM_ERR_INVALID_ARG, "em_device_get_props: argument `out` is NULL");
    memset(out, 0, sizeof *out);
    const em_backend *b = em_backend_of("em_device_get_props", d);
    if (!b) return em_last_status();
    if (b->props) b->props(d.index, out);
    if (!out->name[0]) snprintf(out->name, sizeof out->name, "%s", b->name);
    return EM_OK;
}

em_status em_device_get_mem_stats(em_device d, em_device_mem_stats *out)
{
    if (!out)
        return em_error(EM_ERR_INVALID_ARG, "em_device_get_mem_stats: argument `out` is NULL");
    memset(out, 0, sizeof *out);
    out->free_bytes = out->total_bytes = -1;
    const em_backend *b = em_backend_of("em_device_get_mem_stats", d);
    if (!b) return em_last_status();
    if (b->mem_stats) b->mem_stats(d.index, out);
    return EM_OK;
}

int64_t em_device_empty_cache(em_device d)
{
    const em_backend *b = em_backend_of("em_device_empty_cache", d);
    if (!b) return -1;
    return b->empty_cache ? b->empty_cache(d.index) : 0;
}

em_status em_device_set_memory_limit(em_device d, int64_t bytes)
{
    const em_backend *b = em_backend_of("em_device_set_memory_limit", d);
    if (!b) return em_last_status();
    if (bytes < 0)
        return em_error(EM_ERR_INVALID_ARG, "em_device_set_memory_limit: %lld bytes is negative",
                        (long long)bytes);
    if (!b->set_memory_limit)
        return em_error(EM_ERR_UNSUPPORTED,
                        "em_device_set_memory_limit: the %s backend has no memory limit", b->name);
    return b->set_memory_limit(d.index, bytes);
}

em_status em_device_reset_peak(em_device d)
{
    const em_backend *b = em_backend_of("em_device_reset_peak", d);
    if (!b) return em_last_status();
    if (b->reset_peak) b->reset_peak(d.index);
    return EM_OK;
}

/* The depth counter of d for this thread; NULL when d has none. */
static int *persist_depth(em_device d)
{
    em_backends_init();
    const em_backend *b = em_backend_get(d.backend);
    if (!b || d.index < 0 || d.index >= b->device_count() || d.index >= MAX_DEV) return NULL;
    return &tl_persist[d.backend][d.index];
}

/* The depth counter of d; NULL with an error naming fn. */
static int *persist_depth_or_fail(const char *fn, em_device d)
{
    int *depth = persist_depth(d);
    if (!depth && em_backend_of(fn, d))
        em_error(EM_ERR_UNSUPPORTED, "%s: persistent scopes reach devices 0 to %d, not %d", fn,
                 MAX_DEV - 1, d.index);
    return depth;
}

em_status em_device_persistent_begin(em_device d)
{
    int *depth = persist_depth_or_fail("em_device_persistent_begin", d);
    if (!depth) return em_last_status();
    ++*depth;
    return EM_OK;
}

em_status em_device_persistent_end(em_device d)
{
    int *depth = persist_depth_or_fail("em_device_persistent_end", d);
    if (!depth) return em_last_status();
    if (*depth == 0)
        return em_error(EM_ERR_STATE, "em_device_persistent_end: no persistent scope is open on "
                                      "this device in this thread");
    --*depth;
    return EM_OK;
}

bool em_backend_persistent_enter(em_device dev)
{
    int *depth = persist_depth(dev);
    if (depth) ++*depth;
    return depth != NULL;
}

void em_backend_persistent_leave(em_device dev)
{
    int *depth = persist_depth(dev);
    if (depth && *depth > 0) --*depth;
}

bool em_backend_persistent(em_device dev)
{
    return dev.backend >= 0 && dev.backend < EM_MAX_BACKENDS && dev.index >= 0 &&
           dev.index < MAX_DEV && tl_persist[dev.backend][dev.index] > 0;
}
