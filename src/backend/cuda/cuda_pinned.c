/* Page-locked host memory for pinned tensors (em_pin_memory): blocks from cuMemHostAlloc (portable
 * across contexts) kept by size class for reuse, a registry that tells the host copies which host
 * ranges are pinned, and for each block the event of the last DMA that reads it, which a write
 * into the block (a reuse, em_tensor_data, a copy into it) or its release waits for. */
#include <pthread.h>
#include <stdlib.h>

#include "cuda.h"

#define HOSTALLOC_PORTABLE 0x01
#define PIN_CACHE_MAX      ((size_t)256 << 20) /* bytes of free blocks kept for reuse */

struct pin_block {
    char *p;
    size_t size;
    bool live;
    int ev_device;      /* the context ev belongs to */
    CUevent ev;         /* recorded after the last DMA reading the block (NULL: none yet) */
    CUstream ev_stream; /* where ev was recorded */
    bool pending;       /* ev's work may still run */
    struct pin_block *next;
};

static pin_block *blocks; /* live and cached */
static size_t cached_bytes;
static pthread_mutex_t pin_lock = PTHREAD_MUTEX_INITIALIZER;

/* Waits for b's last DMA (pin_lock held on entry and exit, released while waiting). */
static void settle(pin_block *b)
{
    while (b->pending) {
        CUevent ev = b->ev;
        pthread_mutex_unlock(&pin_lock);
        cuda_drv.cuEventSynchronize(ev);
        pthread_mutex_lock(&pin_lock);
        if (b->ev == ev) b->pending = false; /* else recorded again meanwhile: wait for that */
    }
}

static void drop_event(pin_block *b)
{
    if (b->ev) cuda_event_put(b->ev_device, b->ev);
    b->ev = NULL;
    b->pending = false;
}

void *cuda_host_alloc(size_t nbytes)
{
    size_t sz = cuda_size_class(nbytes);
    pthread_mutex_lock(&pin_lock);
    for (pin_block *b = blocks; b; b = b->next)
        if (!b->live && b->size == sz) {
            b->live = true;
            cached_bytes -= sz;
            settle(b); /* a DMA from its last life may still read it */
            pthread_mutex_unlock(&pin_lock);
            return b->p;
        }
    pthread_mutex_unlock(&pin_lock);
    if (!cuda_drv.cuMemHostAlloc) {
        em_error(EM_ERR_UNSUPPORTED, "em_pin_memory: the driver has no cuMemHostAlloc");
        return NULL;
    }
    if (cuda_enter(0, "em_pin_memory") != EM_OK) return NULL;
    pin_block *b = calloc(1, sizeof *b);
    void *p = NULL;
    CUresult r = b ? cuda_drv.cuMemHostAlloc(&p, sz, HOSTALLOC_PORTABLE) : 0;
    if (!b || r != 0) {
        free(b);
        if (r)
            cuda_fail(EM_ERR_OOM, r, "em_pin_memory", "cuMemHostAlloc", 0);
        else
            em_error(EM_ERR_OOM, "em_pin_memory: out of host memory");
        return NULL;
    }
    b->p = p;
    b->size = sz;
    b->live = true;
    pthread_mutex_lock(&pin_lock);
    b->next = blocks;
    blocks = b;
    pthread_mutex_unlock(&pin_lock);
    return p;
}

void cuda_host_free(void *p)
{
    if (!p) return;
    pthread_mutex_lock(&pin_lock);
    for (pin_block **pp = &blocks; *pp; pp = &(*pp)->next) {
        pin_block *b = *pp;
        if (b->p != p) continue;
        b->live = false;
        if (cached_bytes + b->size <= PIN_CACHE_MAX) {
            cached_bytes += b->size; /* its pending DMA is waited for when it is taken again */
            pthread_mutex_unlock(&pin_lock);
            return;
        }
        *pp = b->next; /* out of the registry first: nobody takes it while we wait */
        settle(b);
        drop_event(b);
        pthread_mutex_unlock(&pin_lock);
        cuda_drv.cuMemFreeHost(b->p);
        free(b);
        return;
    }
    pthread_mutex_unlock(&pin_lock);
    em_log_msg("cuda", EM_LOG_ERROR, "em_pin_memory: %p is not pinned memory of Ember's", p);
}

pin_block *cuda_host_find(const void *p, size_t n)
{
    const char *c = p;
    pthread_mutex_lock(&pin_lock);
    pin_block *b = blocks;
    while (b && !(b->live && c >= b->p && n <= b->size && c - b->p <= (ptrdiff_t)(b->size - n)))
        b = b->next;
    pthread_mutex_unlock(&pin_lock);
    return b;
}

em_status cuda_host_note_read(pin_block *b, int device, CUstream s, const char *what)
{
    pthread_mutex_lock(&pin_lock);
    /* one event covers the block: a DMA from it on another stream must be done first (on the
       same stream, recording again covers both) */
    if (b->pending && b->ev_stream != s) settle(b);
    if (b->ev && b->ev_device != device) drop_event(b); /* another context's event */
    if (!b->ev) {
        b->ev = cuda_event_get(device);
        b->ev_device = device;
    }
    CUresult r = b->ev ? cuda_drv.cuEventRecord(b->ev, s) : 0;
    em_status st = EM_OK;
    if (!b->ev || r != 0) { /* no event: the host waits for the DMA now */
        uint64_t before = core_error_mark();
        if (r) cuda_fail(EM_ERR_DEVICE, r, what, "cuEventRecord", device);
        cuda_forget_error(before);
        b->pending = false;
        pthread_mutex_unlock(&pin_lock);
        r = cuda_drv.cuStreamSynchronize(s);
        if (r) st = cuda_fail(EM_ERR_DEVICE, r, what, "cuStreamSynchronize", device);
        return st;
    }
    b->ev_stream = s;
    b->pending = true;
    pthread_mutex_unlock(&pin_lock);
    return st;
}

void cuda_host_wait(const void *p)
{
    pthread_mutex_lock(&pin_lock);
    for (pin_block *b = blocks; b; b = b->next)
        if (b->live && (const char *)p >= b->p && (const char *)p < b->p + b->size) settle(b);
    pthread_mutex_unlock(&pin_lock);
}
