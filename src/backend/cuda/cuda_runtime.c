/* CUDA runtime groundwork: libcuda loaded with dlopen, device discovery, one primary context
 * per device, and a stream-aware caching device-memory pool with statistics. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"

cuda_driver cuda_drv;

#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT     16
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static bool probe_ok;
static int n_devices;
static cuda_device_info devices[CUDA_MAX_DEVICES];

static void *load_sym(void *lib, const char *name, bool *ok)
{
    void *p = dlsym(lib, name);
    if (!p) *ok = false;
    return p;
}

/* dlsym returns void *; converting it to a function pointer goes through memcpy to stay within
 * ISO C. */
#define LOAD(field, sym)                                                                           \
    do {                                                                                           \
        void *p_ = load_sym(lib, sym, &ok);                                                        \
        memcpy(&cuda_drv.field, &p_, sizeof p_);                                                   \
    } while (0)
/* An optional function: NULL when missing; alt (or NULL) is a second name to try. */
static void *load_opt(void *lib, const char *sym, const char *alt)
{
    void *p = dlsym(lib, sym);
    return p || !alt ? p : dlsym(lib, alt);
}

#define LOAD_OPT(field, sym, alt)                                                                  \
    do {                                                                                           \
        void *p_ = load_opt(lib, sym, alt);                                                        \
        memcpy(&cuda_drv.field, &p_, sizeof p_);                                                   \
    } while (0)

static void probe(void)
{
    if (!core_cfg_bool(CFG_CUDA)) return;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    bool ok = true;
    LOAD(cuInit, "cuInit");
    LOAD(cuDriverGetVersion, "cuDriverGetVersion");
    LOAD(cuDeviceGetCount, "cuDeviceGetCount");
    LOAD(cuDeviceGet, "cuDeviceGet");
    LOAD(cuDeviceGetName, "cuDeviceGetName");
    LOAD(cuDeviceGetAttribute, "cuDeviceGetAttribute");
    LOAD(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    LOAD(cuCtxSetCurrent, "cuCtxSetCurrent");
    LOAD(cuCtxSynchronize, "cuCtxSynchronize");
    LOAD(cuMemAlloc, "cuMemAlloc_v2");
    LOAD(cuMemFree, "cuMemFree_v2");
    LOAD(cuMemcpyHtoD, "cuMemcpyHtoD_v2");
    LOAD(cuMemcpyDtoH, "cuMemcpyDtoH_v2");
    LOAD(cuMemcpyDtoD, "cuMemcpyDtoD_v2");
    LOAD(cuModuleLoadData, "cuModuleLoadData");
    LOAD(cuModuleGetFunction, "cuModuleGetFunction");
    LOAD(cuLaunchKernel, "cuLaunchKernel");
    LOAD(cuFuncSetAttribute, "cuFuncSetAttribute");
    LOAD(cuGetErrorName, "cuGetErrorName");
    LOAD(cuGetErrorString, "cuGetErrorString");
    LOAD(cuStreamCreate, "cuStreamCreate");
    LOAD(cuStreamDestroy, "cuStreamDestroy_v2");
    LOAD(cuStreamSynchronize, "cuStreamSynchronize");
    LOAD(cuStreamWaitEvent, "cuStreamWaitEvent");
    LOAD(cuEventCreate, "cuEventCreate");
    LOAD(cuEventDestroy, "cuEventDestroy_v2");
    LOAD(cuEventRecord, "cuEventRecord");
    LOAD(cuEventQuery, "cuEventQuery");
    LOAD(cuEventSynchronize, "cuEventSynchronize");
    LOAD(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    LOAD(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
    LOAD(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
    LOAD(cuMemsetD32Async, "cuMemsetD32Async");
    LOAD_OPT(cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime");
    LOAD_OPT(cuMemHostAlloc, "cuMemHostAlloc", NULL);
    LOAD_OPT(cuMemFreeHost, "cuMemFreeHost", NULL);
    LOAD_OPT(cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer", NULL);
    LOAD_OPT(cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess", NULL);
    LOAD_OPT(cuMemcpyPeerAsync, "cuMemcpyPeerAsync", NULL);
    LOAD_OPT(cuDeviceTotalMem, "cuDeviceTotalMem_v2", NULL);
    LOAD_OPT(cuMemGetInfo, "cuMemGetInfo_v2", NULL);
    LOAD_OPT(cuStreamCreateWithPriority, "cuStreamCreateWithPriority", NULL);
    LOAD_OPT(cuCtxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange", NULL);
    LOAD_OPT(cuStreamGetPriority, "cuStreamGetPriority", NULL);
    LOAD_OPT(cuStreamBeginCapture, "cuStreamBeginCapture_v2", NULL);
    LOAD_OPT(cuStreamEndCapture, "cuStreamEndCapture", NULL);
    LOAD_OPT(cuThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode", NULL);
    LOAD_OPT(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", NULL);
    LOAD_OPT(cuGraphLaunch, "cuGraphLaunch", NULL);
    LOAD_OPT(cuGraphExecDestroy, "cuGraphExecDestroy", NULL);
    LOAD_OPT(cuGraphDestroy, "cuGraphDestroy", NULL);
    if (!cuda_drv.cuMemHostAlloc || !cuda_drv.cuMemFreeHost)
        cuda_drv.cuMemHostAlloc = NULL, cuda_drv.cuMemFreeHost = NULL;
    if (!ok) {
        em_log_msg("cuda", EM_LOG_WARN, "libcuda lacks a driver function Ember needs; no cuda");
        return;
    }
    void *tm = dlsym(lib, "cuTensorMapEncodeTiled"); /* optional: CUDA 12 and later */
    memcpy(&cuda_drv.cuTensorMapEncodeTiled, &tm, sizeof tm);
    void *ti = dlsym(lib, "cuTensorMapEncodeIm2col");
    memcpy(&cuda_drv.cuTensorMapEncodeIm2col, &ti, sizeof ti);
    if (cuda_drv.cuInit(0) != 0) return;
    int count = 0;
    if (cuda_drv.cuDeviceGetCount(&count) != 0 || count <= 0) return;
    if (count > CUDA_MAX_DEVICES) count = CUDA_MAX_DEVICES;
    for (int i = 0; i < count; i++) {
        cuda_device_info *d = &devices[n_devices];
        if (cuda_drv.cuDeviceGet(&d->dev, i) != 0) break;
        if (cuda_drv.cuDevicePrimaryCtxRetain(&d->ctx, d->dev) != 0) break;
        cuda_drv.cuDeviceGetAttribute(&d->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                      d->dev);
        cuda_drv.cuDeviceGetAttribute(&d->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                      d->dev);
        if (cuda_drv.cuDeviceGetAttribute(&d->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                          d->dev) != 0 ||
            d->sm_count < 1)
            d->sm_count = 1;
        if (cuda_drv.cuDeviceGetName(d->name, (int)sizeof d->name, d->dev) != 0)
            strcpy(d->name, "?");
        size_t total = 0;
        if (cuda_drv.cuDeviceTotalMem && cuda_drv.cuDeviceTotalMem(&total, d->dev) == 0)
            d->total_mem = (int64_t)total;
        n_devices++;
    }
    probe_ok = n_devices > 0;
    if (probe_ok)
        em_log_msg("cuda", EM_LOG_INFO, "%d device%s, cuda:0 is %s (sm_%d%d)", n_devices,
                   n_devices == 1 ? "" : "s", devices[0].name, devices[0].cc_major,
                   devices[0].cc_minor);
}

bool cuda_backend_probe(void)
{
    pthread_once(&probe_once, probe);
    return probe_ok;
}

int cuda_device_count(void)
{
    return cuda_backend_probe() ? n_devices : 0;
}

const cuda_device_info *cuda_device(int device)
{
    if (device < 0 || device >= cuda_device_count()) return NULL;
    return &devices[device];
}

em_status cuda_fail(em_status code, CUresult r, const char *what, const char *call, int device)
{
    const char *name = NULL, *desc = NULL;
    if (cuda_drv.cuGetErrorName) cuda_drv.cuGetErrorName(r, &name);
    if (cuda_drv.cuGetErrorString) cuda_drv.cuGetErrorString(r, &desc);
    return em_error(code, "%s: %s failed on cuda:%d: %s (%s)", what, call, device,
                    name ? name : "CUDA_ERROR_UNKNOWN", desc ? desc : "unknown error");
}

em_status cuda_enter(int device, const char *what)
{
    const cuda_device_info *d = cuda_device(device);
    if (!d) return em_error(EM_ERR_DEVICE, "%s: device cuda:%d does not exist", what, device);
    CUresult r = cuda_drv.cuCtxSetCurrent(d->ctx);
    if (r != 0) return cuda_fail(EM_ERR_DEVICE, r, what, "cuCtxSetCurrent", device);
    return EM_OK;
}

/* ---- caching memory pool -------------------------------------------------------------------
 * Sizes are rounded to classes (powers of two up to 1 MiB, then multiples of 2 MiB) and a freed
 * block waits in its device's cache for a request of the same class. Live blocks are kept in a
 * hash table keyed by address so free() knows their size.
 *
 * Streams: a block remembers the stream it was handed out for and, when it differs, the freeing
 * thread's current stream (the work queued on the block is on those two). A request prefers a
 * block whose streams are its own (stream order alone makes reuse safe); otherwise it takes one of
 * the right size and first makes its stream wait, on the device, for the work queued so far on
 * the block's streams (an event recorded now covers everything queued before the free). Stream 0
 * means no pending work: all streams are blocking, so the legacy stream is ordered with them. */

typedef struct pool_block {
    CUdeviceptr ptr;
    size_t size;
    CUstream stream;   /* handed out for (0: none pending) */
    CUstream freed_on; /* the freeing thread's stream when it differed (0: none) */
    bool persistent;   /* exactly sized, back to the driver when freed */
    cuda_gpool *gp;    /* the graph whose memory this is (NULL: the device's) */
    struct pool_block *next;
} pool_block;

/* A graph's memory (cuda_graph.c): every block handed out while its capture ran, or freed by the
 * capturing thread meanwhile, belongs to the graph, which replays work on those addresses; freed
 * blocks wait in its own cache (reused by later allocations of the same capture) until the graph
 * is gone, then join the device's cache, as do its blocks freed after that. */
struct cuda_gpool {
    pool_block *cached;
    int64_t live;  /* its blocks handed out and not yet freed */
    int64_t bytes; /* its blocks' bytes (cached and live) */
    bool closed;   /* the graph is gone */
    CUstream last; /* the stream its work last ran on (0: none since the capture) */
    int device;
    struct cuda_gpool *next; /* the device's graphs that are not closed */
};

#define POOL_BUCKETS 1024

typedef struct pool {
    pool_block *live[POOL_BUCKETS];
    pool_block *cached; /* free blocks, any class */
    cuda_gpool *graphs; /* graph pools not closed */
    em_cuda_pool_stats st;
    int64_t limit;   /* bytes in use + cached at most (0: none) */
    bool limit_read; /* the config key cuda_memory_limit_mb has been read */
} pool;

static pool pools[CUDA_MAX_DEVICES];
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

size_t cuda_size_class(size_t n)
{
    if (n <= 512) return 512;
    if (n <= ((size_t)1 << 20)) {
        size_t c = 512;
        while (c < n) c <<= 1;
        return c;
    }
    size_t step = (size_t)2 << 20;
    return (n + step - 1) / step * step;
}

static size_t bucket_of(CUdeviceptr p)
{
    return (size_t)((p >> 9) * 0x9E3779B97F4A7C15ull >> 54) % POOL_BUCKETS;
}

/* Frees every cached block; the device is synchronised first, since a cached block may still be
 * read or written by queued work. */
static void release_cached(int device, pool *pl)
{
    if (pl->cached) cuda_drv.cuCtxSynchronize();
    for (pool_block *b = pl->cached, *next; b; b = next) {
        next = b->next;
        cuda_drv.cuMemFree(b->ptr);
        pl->st.cached_bytes -= (int64_t)b->size;
        free(b);
    }
    pl->cached = NULL;
    (void)device;
}

static bool own_stream(CUstream x, CUstream s)
{
    return x == 0 || x == s;
}

/* Orders stream s after the work queued on b's other streams (pool_lock held). */
static void order_reuse(int device, pool *pl, const pool_block *b, CUstream s)
{
    CUstream on[2] = {b->stream, b->freed_on};
    for (int i = 0; i < 2; i++) {
        if (own_stream(on[i], s) || (i == 1 && on[1] == on[0])) continue;
        uint64_t before = core_error_mark();
        if (cuda_stream_order(device, s, device, on[i], "cuda alloc") != EM_OK) {
            /* no event: wait on the host instead (correct, only slower) */
            cuda_forget_error(before);
            cuda_drv.cuStreamSynchronize(on[i]);
        }
        pl->st.stream_waits++;
    }
}

#define OVER_LIMIT (-1) /* driver_block's *r when the pool's limit refused the block */

/* The pool's limit in bytes (0: none), the config key read on first use (pool_lock held). */
static int64_t pool_limit(pool *pl)
{
    if (!pl->limit_read) {
        pl->limit = core_cfg_int(CFG_CUDA_MEMORY_LIMIT_MB) * 1024 * 1024;
        pl->limit_read = true;
    }
    return pl->limit;
}

/* A new block of sz bytes from the driver (pool_lock held): when cuMemAlloc fails, or the block
 * would pass the pool's limit, the cache goes back to the driver and it is tried once more. NULL
 * with *r set (0 with no host memory, OVER_LIMIT past the limit). */
static pool_block *driver_block(int device, pool *pl, size_t sz, CUresult *r)
{
    /* while this thread captures a graph the cache cannot go back (that synchronises the
     * device, which a capture forbids) */
    bool capturing = cuda_capture_pool(device) != NULL;
    int64_t limit = pool_limit(pl);
    if (limit && pl->st.in_use_bytes + pl->st.cached_bytes + (int64_t)sz > limit) {
        if (!capturing) release_cached(device, pl);
        int64_t held = pl->st.in_use_bytes + (capturing ? pl->st.cached_bytes : 0);
        if (held + (int64_t)sz > limit) {
            *r = OVER_LIMIT;
            return NULL;
        }
    }
    CUdeviceptr p = 0;
    int mode = cuda_capture_relax(); /* cuMemAlloc is not captured: allowed during a capture */
    *r = cuda_drv.cuMemAlloc(&p, sz);
    cuda_capture_restore(mode);
    if (*r != 0 && pl->cached && !capturing) {
        release_cached(device, pl);
        *r = cuda_drv.cuMemAlloc(&p, sz);
    }
    if (*r != 0) return NULL;
    pool_block *b = malloc(sizeof *b);
    if (!b) {
        cuda_drv.cuMemFree(p);
        return NULL;
    }
    b->ptr = p;
    b->size = sz;
    b->persistent = false;
    b->gp = NULL;
    pl->st.device_allocs++;
    return b;
}

/* Records the failure of driver_block (pool_lock released). */
static void *alloc_failed(int device, size_t sz, CUresult r)
{
    if (r == OVER_LIMIT) {
        em_cuda_pool_stats st;
        cuda_pool_stats(device, &st);
        em_error(EM_ERR_OOM,
                 "cuda alloc: %zu bytes on cuda:%d would pass its memory limit of %lld bytes "
                 "(%lld in use; em_device_set_memory_limit, cuda_memory_limit_mb)",
                 sz, device, (long long)pools[device].limit, (long long)st.in_use_bytes);
        return NULL;
    }
    if (r == 0) {
        em_error(EM_ERR_OOM, "cuda alloc: out of host memory for the pool's bookkeeping");
        return NULL;
    }
    char call[64];
    snprintf(call, sizeof call, "cuMemAlloc(%zu bytes)", sz);
    cuda_fail(EM_ERR_OOM, r, "cuda alloc", call, device);
    return NULL;
}

/* Makes b part of graph pool gp (pool_lock held). */
static void adopt(pool_block *b, cuda_gpool *gp)
{
    b->persistent = false; /* the graph's now: freed into its cache like the rest */
    b->gp = gp;
    gp->bytes += (int64_t)b->size;
}

/* Hands b out for work on stream s (pool_lock held); while this thread captures a graph on the
 * device, b becomes the graph's. */
static void *hand_out(int device, pool *pl, pool_block *b, CUstream s)
{
    cuda_gpool *gp = cuda_capture_pool(device);
    if (gp && !b->gp) adopt(b, gp);
    if (b->gp) b->gp->live++;
    b->stream = s;
    b->freed_on = 0;
    size_t h = bucket_of(b->ptr);
    b->next = pl->live[h];
    pl->live[h] = b;
    pl->st.in_use_bytes += (int64_t)b->size;
    if (b->persistent) pl->st.persistent_bytes += (int64_t)b->size;
    if (pl->st.in_use_bytes > pl->st.peak_in_use_bytes)
        pl->st.peak_in_use_bytes = pl->st.in_use_bytes;
    return (void *)(uintptr_t)b->ptr;
}

/* Unlinks and returns a block of size sz from list *pp whose queued work is all on stream s (or
 * none), or NULL (pool_lock held). */
static pool_block *take_own(pool_block **pp, size_t sz, CUstream s)
{
    for (; *pp; pp = &(*pp)->next) {
        pool_block *b = *pp;
        if (b->size == sz && own_stream(b->stream, s) && own_stream(b->freed_on, s)) {
            *pp = b->next;
            return b;
        }
    }
    return NULL;
}

void *cuda_pool_alloc(int device, size_t nbytes)
{
    if (cuda_enter(device, "cuda alloc") != EM_OK) return NULL;
    CUstream s = cuda_stream(device);
    size_t sz = cuda_size_class(nbytes);
    pthread_mutex_lock(&pool_lock);
    pool *pl = &pools[device];
    pool_block *b = NULL;
    cuda_gpool *gp = cuda_capture_pool(device);
    if (gp) {
        /* a capture: the graph's own freed blocks, or the device's used on s alone (a block last
         * used on another stream would need a wait on an event from outside the capture) */
        b = take_own(&gp->cached, sz, s);
        if (!b) b = take_own(&pl->cached, sz, s);
    } else {
        /* prefer a block whose streams are s, else any of the size, ordered after its work */
        pool_block **other = NULL;
        for (pool_block **pp = &pl->cached; *pp; pp = &(*pp)->next) {
            if ((*pp)->size != sz) continue;
            if (own_stream((*pp)->stream, s) && own_stream((*pp)->freed_on, s)) {
                b = *pp;
                *pp = b->next;
                break;
            }
            if (!other) other = pp;
        }
        if (!b && other) {
            b = *other;
            *other = b->next;
            order_reuse(device, pl, b, s);
        }
    }
    if (b) {
        pl->st.cached_bytes -= (int64_t)sz;
        pl->st.reuses++;
    }
    CUresult r = 0;
    if (!b && !(b = driver_block(device, pl, sz, &r))) {
        pthread_mutex_unlock(&pool_lock);
        return alloc_failed(device, sz, r);
    }
    void *p = hand_out(device, pl, b, s);
    pthread_mutex_unlock(&pool_lock);
    return p;
}

void *cuda_pool_alloc_persistent(int device, size_t nbytes)
{
    if (cuda_enter(device, "cuda alloc") != EM_OK) return NULL;
    CUstream s = cuda_stream(device);
    size_t sz = (nbytes + 511) / 512 * 512;
    if (sz < nbytes) {
        em_error(EM_ERR_OOM, "cuda alloc: %zu bytes is too large", nbytes);
        return NULL;
    }
    pthread_mutex_lock(&pool_lock);
    pool *pl = &pools[device];
    CUresult r = 0;
    pool_block *b = driver_block(device, pl, sz, &r);
    if (!b) {
        pthread_mutex_unlock(&pool_lock);
        return alloc_failed(device, sz, r);
    }
    b->persistent = true;
    void *p = hand_out(device, pl, b, s);
    pthread_mutex_unlock(&pool_lock);
    return p;
}

/* Gives a persistent block back to the driver once the work queued on it (on the stream it was
 * allocated for and the freeing thread's) is done. */
static void free_persistent(int device, pool_block *b)
{
    uint64_t before = core_error_mark();
    if (cuda_enter(device, "cuda free") == EM_OK) {
        if (b->stream) cuda_drv.cuStreamSynchronize(b->stream);
        if (b->freed_on) cuda_drv.cuStreamSynchronize(b->freed_on);
        cuda_drv.cuMemFree(b->ptr);
    } else {
        cuda_forget_error(before);
        em_log_msg("cuda", EM_LOG_ERROR, "cuda free: cuda:%d unusable, a block is lost", device);
    }
    free(b);
}

/* The pool side of a freed graph block b (pool_lock held): true when it went into its graph's
 * cache; else it has left the graph, which is released once nothing of it is left. */
static bool free_into_graph(pool *pl, pool_block *b)
{
    cuda_gpool *gp = b->gp;
    gp->live--;
    if (!gp->closed) {
        pl->st.cached_bytes += (int64_t)b->size;
        b->next = gp->cached;
        gp->cached = b;
        return true;
    }
    /* the graph is gone (its replays were waited for): an ordinary block now */
    gp->bytes -= (int64_t)b->size;
    b->gp = NULL;
    if (gp->live == 0) free(gp);
    return false;
}

void cuda_pool_free(int device, void *p)
{
    if (!p || device < 0 || device >= cuda_device_count()) return;
    CUdeviceptr dp = (CUdeviceptr)(uintptr_t)p;
    CUstream cur = cuda_stream_peek(device); /* NULL: this thread queued nothing on device */
    cuda_gpool *capture = cuda_capture_pool(device);
    pthread_mutex_lock(&pool_lock);
    pool *pl = &pools[device];
    size_t h = bucket_of(dp);
    for (pool_block **pp = &pl->live[h]; *pp; pp = &(*pp)->next)
        if ((*pp)->ptr == dp) {
            pool_block *b = *pp;
            *pp = b->next;
            b->freed_on = cur == b->stream ? 0 : cur;
            pl->st.in_use_bytes -= (int64_t)b->size;
            pl->st.frees++;
            if (capture && !b->gp) { /* freed during a capture: the graph may use it */
                if (b->persistent) pl->st.persistent_bytes -= (int64_t)b->size;
                adopt(b, capture);
                capture->live++;
            }
            if (b->gp && free_into_graph(pl, b)) {
                pthread_mutex_unlock(&pool_lock);
                return;
            }
            if (b->persistent) {
                pl->st.persistent_bytes -= (int64_t)b->size;
                pthread_mutex_unlock(&pool_lock);
                free_persistent(device, b);
                return;
            }
            pl->st.cached_bytes += (int64_t)b->size;
            b->next = pl->cached;
            pl->cached = b;
            pthread_mutex_unlock(&pool_lock);
            return;
        }
    pthread_mutex_unlock(&pool_lock);
    em_log_msg("cuda", EM_LOG_ERROR, "cuda free: %p was not allocated by the cuda:%d pool", p,
               device);
}

cuda_gpool *cuda_gpool_new(int device)
{
    cuda_gpool *gp = calloc(1, sizeof *gp);
    if (!gp) {
        em_error(EM_ERR_OOM, "em_graph_capture_begin: out of memory");
        return NULL;
    }
    gp->device = device;
    pthread_mutex_lock(&pool_lock);
    gp->next = pools[device].graphs;
    pools[device].graphs = gp;
    pthread_mutex_unlock(&pool_lock);
    return gp;
}

void cuda_gpool_launched(cuda_gpool *gp, CUstream s)
{
    pthread_mutex_lock(&pool_lock);
    gp->last = s;
    pthread_mutex_unlock(&pool_lock);
}

CUstream cuda_gpool_last(cuda_gpool *gp)
{
    pthread_mutex_lock(&pool_lock);
    CUstream s = gp->last;
    pthread_mutex_unlock(&pool_lock);
    return s;
}

int64_t cuda_gpool_bytes(cuda_gpool *gp)
{
    pthread_mutex_lock(&pool_lock);
    int64_t n = gp->bytes;
    pthread_mutex_unlock(&pool_lock);
    return n;
}

void cuda_gpool_close(cuda_gpool *gp)
{
    pthread_mutex_lock(&pool_lock);
    pool *pl = &pools[gp->device];
    for (cuda_gpool **pp = &pl->graphs; *pp; pp = &(*pp)->next)
        if (*pp == gp) {
            *pp = gp->next;
            break;
        }
    for (pool_block *b = gp->cached, *next; b; b = next) {
        next = b->next;
        b->gp = NULL;
        gp->bytes -= (int64_t)b->size;
        b->next = pl->cached;
        pl->cached = b;
    }
    gp->cached = NULL;
    gp->closed = true;
    bool gone = gp->live == 0;
    pthread_mutex_unlock(&pool_lock);
    if (gone) free(gp);
}

static void forget(pool_block *b, CUstream s)
{
    if (b->stream == s) b->stream = 0;
    if (b->freed_on == s) b->freed_on = 0;
}

void cuda_pool_forget_stream(int device, CUstream s)
{
    if (!s || device < 0 || device >= cuda_device_count()) return;
    pthread_mutex_lock(&pool_lock);
    pool *pl = &pools[device];
    for (pool_block *b = pl->cached; b; b = b->next) forget(b, s);
    for (cuda_gpool *gp = pl->graphs; gp; gp = gp->next) {
        for (pool_block *b = gp->cached; b; b = b->next) forget(b, s);
        if (gp->last == s) gp->last = 0;
    }
    for (size_t h = 0; h < POOL_BUCKETS; h++)
        for (pool_block *b = pl->live[h]; b; b = b->next) forget(b, s);
    pthread_mutex_unlock(&pool_lock);
}

bool cuda_pool_stats(int device, em_cuda_pool_stats *out)
{
    if (!out || device < 0 || device >= cuda_device_count()) return false;
    pthread_mutex_lock(&pool_lock);
    *out = pools[device].st;
    pthread_mutex_unlock(&pool_lock);
    return true;
}

int64_t cuda_pool_empty_cache(int device)
{
    /* not while this thread captures a graph: that synchronises the device */
    if (device < 0 || device >= cuda_device_count() || cuda_capture_pool(device)) return 0;
    if (cuda_enter(device, "cuda empty cache") != EM_OK) return 0;
    pthread_mutex_lock(&pool_lock);
    int64_t held = pools[device].st.cached_bytes;
    release_cached(device, &pools[device]);
    pthread_mutex_unlock(&pool_lock);
    return held;
}

void cuda_pool_reset_peak(int device)
{
    if (device < 0 || device >= cuda_device_count()) return;
    pthread_mutex_lock(&pool_lock);
    pools[device].st.peak_in_use_bytes = pools[device].st.in_use_bytes;
    pthread_mutex_unlock(&pool_lock);
}

em_status cuda_pool_set_limit(int device, int64_t bytes)
{
    pthread_mutex_lock(&pool_lock);
    pools[device].limit = bytes;
    pools[device].limit_read = true;
    pthread_mutex_unlock(&pool_lock);
    return EM_OK;
}

void cuda_device_props(int device, em_device_props *out)
{
    const cuda_device_info *d = cuda_device(device);
    if (!d) return;
    snprintf(out->name, sizeof out->name, "%s", d->name);
    out->total_memory = d->total_mem;
    out->processors = d->sm_count;
    out->compute_major = d->cc_major;
    out->compute_minor = d->cc_minor;
}

void cuda_device_mem_stats(int device, em_device_mem_stats *out)
{
    if (device < 0 || device >= cuda_device_count()) return;
    pthread_mutex_lock(&pool_lock);
    em_cuda_pool_stats st = pools[device].st;
    out->limit_bytes = pool_limit(&pools[device]);
    pthread_mutex_unlock(&pool_lock);
    out->in_use_bytes = st.in_use_bytes;
    out->peak_in_use_bytes = st.peak_in_use_bytes;
    out->cached_bytes = st.cached_bytes;
    out->persistent_bytes = st.persistent_bytes;
    out->allocs = st.device_allocs;
    out->reuses = st.reuses;
    size_t free_b = 0, total_b = 0;
    uint64_t before = core_error_mark();
    if (cuda_drv.cuMemGetInfo && cuda_enter(device, "em_device_get_mem_stats") == EM_OK &&
        cuda_drv.cuMemGetInfo(&free_b, &total_b) == 0) {
        out->free_bytes = (int64_t)free_b;
        out->total_bytes = (int64_t)total_b;
    } else {
        cuda_forget_error(before);
        out->total_bytes = cuda_device(device)->total_mem > 0 ? cuda_device(device)->total_mem : -1;
    }
}
