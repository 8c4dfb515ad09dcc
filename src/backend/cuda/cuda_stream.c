/* CUDA streams and events: one default stream per (host thread, device), made on first use,
 * waited for when its thread exits and then handed to a later thread, the thread's current stream
 * (em_stream_use), a cache of events for ordering streams, and the backend's em_stream_ops for the
 * public API. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"

#define CU_EVENT_DEFAULT  0x0
#define CU_EVENT_NO_TIME  0x2 /* CU_EVENT_DISABLE_TIMING */
#define CU_STREAM_BLOCKS  0x0 /* CU_STREAM_DEFAULT: ordered after the legacy NULL stream */
#define CUDA_NOT_READY    600
#define EVENT_CACHE_LIMIT 64

/* ---- per-thread streams -------------------------------------------------------------------
 * When a thread exits, its default streams are synchronised (so work it queued is done once it
 * has been joined) and go to a free list for the next thread that needs one, rather than being
 * destroyed: the pool may still remember them. */

#define SPARE_LIMIT 256

typedef struct thread_streams {
    CUstream def[CUDA_MAX_DEVICES]; /* this thread's default streams (NULL: not made yet) */
} thread_streams;

static _Thread_local thread_streams *tl_streams;
static _Thread_local CUstream
    tl_current[CUDA_MAX_DEVICES]; /* chosen by em_stream_use; NULL: default */
static pthread_key_t thread_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static CUstream spare[CUDA_MAX_DEVICES][SPARE_LIMIT];
static int n_spare[CUDA_MAX_DEVICES];
static pthread_mutex_t spare_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool warned;

/* Synchronises s, lets the pool forget it, destroys it. */
static void retire(int device, CUstream s)
{
    uint64_t before = core_error_mark();
    if (!s || cuda_enter(device, "cuda stream") != EM_OK) {
        cuda_forget_error(before);
        return;
    }
    cuda_drv.cuStreamSynchronize(s);
    cuda_pool_forget_stream(device, s);
    cuda_drv.cuStreamDestroy(s);
}

/* Thread exit: the thread's default streams are waited for and go to the free list (kept alive
 * past its limit). Driver calls only, no error recording: the thread is going. */
static void thread_exit(void *p)
{
    thread_streams *ts = p;
    tl_streams = NULL;
    for (int d = 0; d < CUDA_MAX_DEVICES; d++) {
        const cuda_device_info *info = cuda_device(d);
        if (ts->def[d] && info && cuda_drv.cuCtxSetCurrent(info->ctx) == 0)
            cuda_drv.cuStreamSynchronize(ts->def[d]);
    }
    pthread_mutex_lock(&spare_lock);
    for (int d = 0; d < CUDA_MAX_DEVICES; d++)
        if (ts->def[d] && n_spare[d] < SPARE_LIMIT) spare[d][n_spare[d]++] = ts->def[d];
    pthread_mutex_unlock(&spare_lock);
    free(ts);
}

static void make_key(void)
{
    pthread_key_create(&thread_key, thread_exit);
}

static CUstream make_default(int device)
{
    if (device < 0 || device >= CUDA_MAX_DEVICES) return NULL;
    if (!tl_streams) {
        pthread_once(&key_once, make_key);
        tl_streams = calloc(1, sizeof *tl_streams);
        if (!tl_streams) return NULL;
        pthread_setspecific(thread_key, tl_streams);
    }
    CUstream s = NULL;
    pthread_mutex_lock(&spare_lock);
    if (n_spare[device] > 0) s = spare[device][--n_spare[device]];
    pthread_mutex_unlock(&spare_lock);
    if (!s) {
        uint64_t before = core_error_mark();
        CUresult r = cuda_enter(device, "cuda stream") == EM_OK
                         ? cuda_drv.cuStreamCreate(&s, CU_STREAM_BLOCKS)
                         : 1;
        if (r != 0) {
            cuda_forget_error(before);
            if (!atomic_exchange(&warned, true))
                em_log_msg("cuda", EM_LOG_WARN,
                           "cuStreamCreate failed on cuda:%d (error %d); work goes on the legacy "
                           "stream",
                           device, r);
            return NULL;
        }
    }
    tl_streams->def[device] = s;
    return s;
}

CUstream cuda_stream(int device)
{
    if (device < 0 || device >= CUDA_MAX_DEVICES) return NULL;
    if (tl_current[device]) return tl_current[device];
    if (tl_streams && tl_streams->def[device]) return tl_streams->def[device];
    return make_default(device);
}

CUstream cuda_stream_peek(int device)
{
    if (device < 0 || device >= CUDA_MAX_DEVICES) return NULL;
    if (tl_current[device]) return tl_current[device];
    return tl_streams ? tl_streams->def[device] : NULL;
}

/* ---- events ------------------------------------------------------------------------------- */

static CUevent event_cache[CUDA_MAX_DEVICES][EVENT_CACHE_LIMIT];
static int event_count[CUDA_MAX_DEVICES];
static pthread_mutex_t event_lock = PTHREAD_MUTEX_INITIALIZER;

CUevent cuda_event_get(int device)
{
    if (device < 0 || device >= CUDA_MAX_DEVICES) return NULL;
    CUevent e = NULL;
    pthread_mutex_lock(&event_lock);
    if (event_count[device] > 0) e = event_cache[device][--event_count[device]];
    pthread_mutex_unlock(&event_lock);
    if (e) return e;
    CUresult r = cuda_drv.cuEventCreate(&e, CU_EVENT_NO_TIME);
    if (r != 0) {
        cuda_fail(EM_ERR_DEVICE, r, "cuda event", "cuEventCreate", device);
        return NULL;
    }
    return e;
}

void cuda_event_put(int device, CUevent e)
{
    if (!e) return;
    pthread_mutex_lock(&event_lock);
    if (event_count[device] < EVENT_CACHE_LIMIT) {
        event_cache[device][event_count[device]++] = e;
        e = NULL;
    }
    pthread_mutex_unlock(&event_lock);
    if (e) cuda_drv.cuEventDestroy(e);
}

em_status cuda_stream_order(int device, CUstream waiter, int on_device, CUstream on,
                            const char *what)
{
    if (waiter == on && device == on_device) return EM_OK;
    em_status st = on_device == device ? EM_OK : cuda_enter(on_device, what);
    CUevent e = st == EM_OK ? cuda_event_get(on_device) : NULL;
    if (!e) return em_last_status();
    CUresult r = cuda_drv.cuEventRecord(e, on);
    if (r) st = cuda_fail(EM_ERR_DEVICE, r, what, "cuEventRecord", on_device);
    if (st == EM_OK && on_device != device) st = cuda_enter(device, what);
    /* the wait takes the event's state now: the event may be recorded again afterwards */
    r = st == EM_OK ? cuda_drv.cuStreamWaitEvent(waiter, e, 0) : 0;
    if (r) st = cuda_fail(EM_ERR_DEVICE, r, what, "cuStreamWaitEvent", device);
    cuda_event_put(on_device, e);
    return st;
}

/* ---- the public API's streams and events (em_stream_ops) ------------------------------------
 * Explicit streams are plain CUstreams; an event is a CUevent with timing. */

static void *ops_stream_new(int device, int priority)
{
    if (cuda_enter(device, "em_stream_new") != EM_OK) return NULL;
    CUstream s = NULL;
    int least = 0, greatest = 0; /* CUDA's range: least is the larger number */
    bool prio = priority != 0 && cuda_drv.cuStreamCreateWithPriority &&
                cuda_drv.cuCtxGetStreamPriorityRange &&
                cuda_drv.cuCtxGetStreamPriorityRange(&least, &greatest) == 0;
    if (prio) priority = priority > least ? least : priority < greatest ? greatest : priority;
    CUresult r = prio ? cuda_drv.cuStreamCreateWithPriority(&s, CU_STREAM_BLOCKS, priority)
                      : cuda_drv.cuStreamCreate(&s, CU_STREAM_BLOCKS);
    if (r) {
        cuda_fail(EM_ERR_DEVICE, r, "em_stream_new",
                  prio ? "cuStreamCreateWithPriority" : "cuStreamCreate", device);
        return NULL;
    }
    return s;
}

static int ops_stream_priority(int device, void *s)
{
    int p = 0;
    (void)device; /* the stream knows its context */
    return cuda_drv.cuStreamGetPriority && cuda_drv.cuStreamGetPriority((CUstream)s, &p) == 0 ? p
                                                                                              : 0;
}

static void ops_stream_free(int device, void *s)
{
    if (device >= 0 && device < CUDA_MAX_DEVICES && tl_current[device] == s)
        tl_current[device] = NULL;
    retire(device, s);
}

static em_status ops_stream_use(int device, void *s)
{
    if (device < 0 || device >= CUDA_MAX_DEVICES)
        return em_error(EM_ERR_DEVICE, "em_stream_use: device cuda:%d does not exist", device);
    /* the thread's own default stream is "no explicit stream" */
    tl_current[device] = tl_streams && s == tl_streams->def[device] ? NULL : s;
    return EM_OK;
}

static void *ops_stream_current(int device)
{
    if (cuda_enter(device, "em_stream_current") != EM_OK) return NULL;
    return cuda_stream(device);
}

static em_status ops_stream_sync(int device, void *s)
{
    em_status st = cuda_enter(device, "em_stream_sync");
    if (st != EM_OK) return st;
    CUresult r = cuda_drv.cuStreamSynchronize(s ? s : cuda_stream(device));
    return r ? cuda_fail(EM_ERR_DEVICE, r, "em_stream_sync", "cuStreamSynchronize", device) : EM_OK;
}

static void *ops_event_new(int device)
{
    if (cuda_enter(device, "em_event_new") != EM_OK) return NULL;
    CUevent e = NULL;
    CUresult r = cuda_drv.cuEventCreate(&e, CU_EVENT_DEFAULT);
    if (r) {
        cuda_fail(EM_ERR_DEVICE, r, "em_event_new", "cuEventCreate", device);
        return NULL;
    }
    return e;
}

static void ops_event_free(int device, void *e)
{
    uint64_t before = core_error_mark();
    if (cuda_enter(device, "em_event_free") != EM_OK) {
        cuda_forget_error(before);
        return;
    }
    cuda_drv.cuEventDestroy(e);
}

static em_status ops_event_record(int device, void *e, void *s)
{
    em_status st = cuda_enter(device, "em_event_record");
    if (st != EM_OK) return st;
    CUresult r = cuda_drv.cuEventRecord(e, s ? s : cuda_stream(device));
    return r ? cuda_fail(EM_ERR_DEVICE, r, "em_event_record", "cuEventRecord", device) : EM_OK;
}

static em_status ops_event_wait(int device, void *s, void *e)
{
    em_status st = cuda_enter(device, "em_stream_wait");
    if (st != EM_OK) return st;
    CUresult r = cuda_drv.cuStreamWaitEvent(s ? s : cuda_stream(device), e, 0);
    return r ? cuda_fail(EM_ERR_DEVICE, r, "em_stream_wait", "cuStreamWaitEvent", device) : EM_OK;
}

static em_status ops_event_sync(int device, void *e)
{
    em_status st = cuda_enter(device, "em_event_sync");
    if (st != EM_OK) return st;
    CUresult r = cuda_drv.cuEventSynchronize(e);
    return r ? cuda_fail(EM_ERR_DEVICE, r, "em_event_sync", "cuEventSynchronize", device) : EM_OK;
}

static em_status ops_event_elapsed(int device, void *a, void *b, double *ms)
{
    if (!cuda_drv.cuEventElapsedTime)
        return em_error(EM_ERR_UNSUPPORTED, "em_event_elapsed_ms: the driver lacks "
                                            "cuEventElapsedTime");
    em_status st = cuda_enter(device, "em_event_elapsed_ms");
    if (st != EM_OK) return st;
    float f = 0;
    CUresult r = cuda_drv.cuEventElapsedTime(&f, a, b);
    if (r == CUDA_NOT_READY)
        return em_error(EM_ERR_INVALID_ARG,
                        "em_event_elapsed_ms: an event has not completed (or was never "
                        "recorded); synchronise the end event first");
    if (r) return cuda_fail(EM_ERR_DEVICE, r, "em_event_elapsed_ms", "cuEventElapsedTime", device);
    *ms = f;
    return EM_OK;
}

const em_stream_ops cuda_stream_ops = {
    .stream_new = ops_stream_new,
    .stream_priority = ops_stream_priority,
    .stream_free = ops_stream_free,
    .stream_use = ops_stream_use,
    .stream_current = ops_stream_current,
    .stream_sync = ops_stream_sync,
    .event_new = ops_event_new,
    .event_free = ops_event_free,
    .event_record = ops_event_record,
    .event_wait = ops_event_wait,
    .event_sync = ops_event_sync,
    .event_elapsed = ops_event_elapsed,
    .graph_begin = cuda_graph_begin,
    .graph_end = cuda_graph_end,
    .graph_launch = cuda_graph_launch,
    .graph_free = cuda_graph_free,
    .graph_bytes = cuda_graph_bytes,
    .graph_capturing = cuda_graph_capturing,
    .graph_param = cuda_graph_param,
    .graph_refuse = cuda_capture_refused,
};
