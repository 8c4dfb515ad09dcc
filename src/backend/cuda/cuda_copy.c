/* Copies on the calling thread's current stream: host <-> device through pinned staging buffers
 * (chunked, several chunks in flight, so the host's memcpy overlaps the DMA), device to device,
 * memset, and peer copies between devices. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"

#define STAGE_CHUNK     ((size_t)4 << 20)
#define STAGE_MAX       8    /* buffers per device: 32 MiB of pinned memory at most */
#define HOSTALLOC_FLAGS 0x01 /* CU_MEMHOSTALLOC_PORTABLE */
#define PEER_ENABLED    704  /* CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED */

static CUdeviceptr dptr(const void *p)
{
    return (CUdeviceptr)(uintptr_t)p;
}

size_t cuda_copy_chunk(void)
{
    return STAGE_CHUNK;
}

/* ---- pinned staging buffers ----------------------------------------------------------------
 * A buffer is busy while one copy fills or drains it; `pending` says a DMA may still use it,
 * until its event (recorded after the DMA on the copy's stream) has completed. A buffer is
 * written only when it is neither busy nor pending, so host memory is never reused while a copy
 * from or into it is in flight. */

typedef struct stage_buf {
    void *host;
    CUevent done;
    bool busy, pending;
    uint64_t seq; /* when it was last released: the oldest pending one is waited for first */
} stage_buf;

typedef struct stage_pool {
    stage_buf b[STAGE_MAX];
    int n;
    bool failed; /* pinned memory could not be had: copy without staging */
} stage_pool;

static stage_pool stages[CUDA_MAX_DEVICES];
static uint64_t stage_clock;
static pthread_mutex_t stage_lock = PTHREAD_MUTEX_INITIALIZER;

/* A free staging buffer of device (the device's context current); when all are pending, the
 * oldest after its DMA is done if `may_wait`, else NULL. NULL also when none can be had at all:
 * the caller then copies without staging. */
static stage_buf *stage_acquire(int device, bool may_wait)
{
    if (device < 0 || device >= CUDA_MAX_DEVICES || !cuda_drv.cuMemHostAlloc) return NULL;
    stage_pool *sp = &stages[device];
    pthread_mutex_lock(&stage_lock);
    stage_buf *got = NULL, *oldest = NULL;
    for (int i = 0; i < sp->n && !got; i++) {
        stage_buf *b = &sp->b[i];
        if (b->busy) continue;
        if (b->pending && cuda_drv.cuEventQuery(b->done) == 0) b->pending = false;
        if (!b->pending)
            got = b;
        else if (!oldest || b->seq < oldest->seq)
            oldest = b;
    }
    if (!got && sp->n < STAGE_MAX && !sp->failed) {
        stage_buf *b = &sp->b[sp->n];
        memset(b, 0, sizeof *b);
        if (cuda_drv.cuMemHostAlloc(&b->host, STAGE_CHUNK, HOSTALLOC_FLAGS) == 0) {
            if (cuda_drv.cuEventCreate(&b->done, 0x2 /* no timing */) == 0) {
                got = b;
                sp->n++;
            } else {
                cuda_drv.cuMemFreeHost(b->host);
            }
        }
        if (!got && sp->n == 0) {
            sp->failed = true;
            em_log_msg("cuda", EM_LOG_WARN,
                       "no pinned staging memory on cuda:%d; host copies wait for each chunk",
                       device);
        }
    }
    if (!got && may_wait) got = oldest;
    if (got) got->busy = true;
    pthread_mutex_unlock(&stage_lock);
    if (got && got->pending) { /* the oldest DMA: wait for it outside the lock */
        cuda_drv.cuEventSynchronize(got->done);
        got->pending = false;
    }
    return got;
}

/* Gives b back; `pending` when a DMA queued on it may still run (its event recorded after it). */
static void stage_release(stage_buf *b, bool pending)
{
    pthread_mutex_lock(&stage_lock);
    b->busy = false;
    b->pending = pending;
    b->seq = ++stage_clock;
    pthread_mutex_unlock(&stage_lock);
}

/* ---- host copies ------------------------------------------------------------------------- */

em_status cuda_copy_from_host(int device, void *dst, const void *src, size_t n, const char *what)
{
    em_status st = cuda_capture_refuse(device, what, false);
    if (st == EM_OK) st = cuda_enter(device, what);
    if (st != EM_OK || n == 0) return st;
    CUstream s = cuda_stream(device);
    pin_block *pb = cuda_host_find(src, n);
    if (pb) { /* pinned: one DMA straight from src; writes into it wait for the DMA */
        CUresult r = cuda_drv.cuMemcpyHtoDAsync(dptr(dst), src, n, s);
        if (r) return cuda_fail(EM_ERR_DEVICE, r, what, "cuMemcpyHtoDAsync", device);
        return cuda_host_note_read(pb, device, s, what);
    }
    for (size_t off = 0; off < n && st == EM_OK;) {
        size_t c = n - off < STAGE_CHUNK ? n - off : STAGE_CHUNK;
        const char *from = (const char *)src + off;
        stage_buf *b = stage_acquire(device, true);
        const char *call = "cuMemcpyHtoDAsync";
        CUresult r;
        if (!b) { /* unstaged: wait until the driver has read src */
            r = cuda_drv.cuMemcpyHtoDAsync(dptr(dst) + off, from, c, s);
            if (r == 0) call = "cuStreamSynchronize", r = cuda_drv.cuStreamSynchronize(s);
        } else {
            memcpy(b->host, from, c);
            r = cuda_drv.cuMemcpyHtoDAsync(dptr(dst) + off, b->host, c, s);
            if (r == 0) call = "cuEventRecord", r = cuda_drv.cuEventRecord(b->done, s);
            if (r != 0) cuda_drv.cuStreamSynchronize(s); /* nothing may read b after this */
            stage_release(b, r == 0);
        }
        if (r) st = cuda_fail(EM_ERR_DEVICE, r, what, call, device);
        off += c;
    }
    return st;
}

em_status cuda_copy_to_host(int device, void *dst, const void *src, size_t n, const char *what)
{
    em_status st = cuda_capture_refuse(device, what, true);
    if (st == EM_OK) st = cuda_enter(device, what);
    if (st != EM_OK || n == 0) return st;
    CUstream s = cuda_stream(device);
    if (cuda_host_find(dst, n)) { /* pinned: one DMA straight into dst, after any reading it */
        cuda_host_wait(dst);
        CUresult r = cuda_drv.cuMemcpyDtoHAsync(dst, dptr(src), n, s);
        const char *call = "cuMemcpyDtoHAsync";
        if (r == 0) call = "cuStreamSynchronize", r = cuda_drv.cuStreamSynchronize(s);
        return r ? cuda_fail(EM_ERR_DEVICE, r, what, call, device) : EM_OK;
    }
    /* two chunks in flight: chunk i is drained into dst while chunk i + 1 is copied */
    stage_buf *fly[2] = {NULL, NULL};
    size_t at[2] = {0, 0}, len[2] = {0, 0};
    size_t issued = 0, drained = 0;
    CUresult r = 0;
    const char *call = "cuMemcpyDtoHAsync";
    while (drained < n && r == 0) {
        while (issued < n && r == 0 && (!fly[0] || !fly[1])) {
            int k = fly[0] ? 1 : 0;
            size_t c = n - issued < STAGE_CHUNK ? n - issued : STAGE_CHUNK;
            /* never wait for another copy's DMA (maybe another stream's): copy unstaged then */
            stage_buf *b = stage_acquire(device, false);
            if (!b) break;
            call = "cuMemcpyDtoHAsync";
            r = cuda_drv.cuMemcpyDtoHAsync(b->host, dptr(src) + issued, c, s);
            if (r == 0) call = "cuEventRecord", r = cuda_drv.cuEventRecord(b->done, s);
            if (r != 0) {
                cuda_drv.cuStreamSynchronize(s);
                stage_release(b, false);
                break;
            }
            fly[k] = b, at[k] = issued, len[k] = c;
            issued += c;
        }
        if (r != 0) break;
        /* the oldest chunk in flight: the one at `drained` */
        int k = fly[0] && at[0] == drained ? 0 : fly[1] && at[1] == drained ? 1 : -1;
        if (k < 0) { /* no staging buffer: this chunk straight into dst */
            size_t c = n - drained < STAGE_CHUNK ? n - drained : STAGE_CHUNK;
            call = "cuMemcpyDtoHAsync";
            r = cuda_drv.cuMemcpyDtoHAsync((char *)dst + drained, dptr(src) + drained, c, s);
            if (r == 0) call = "cuStreamSynchronize", r = cuda_drv.cuStreamSynchronize(s);
            drained += c;
            if (issued < drained) issued = drained;
            continue;
        }
        call = "cuEventSynchronize";
        r = cuda_drv.cuEventSynchronize(fly[k]->done);
        if (r == 0)
            memcpy((char *)dst + at[k], fly[k]->host, len[k]);
        else
            cuda_drv.cuStreamSynchronize(s);
        stage_release(fly[k], false);
        fly[k] = NULL;
        drained += len[k];
    }
    for (int k = 0; k < 2; k++)
        if (fly[k]) { /* an error left a chunk in flight */
            cuda_drv.cuStreamSynchronize(s);
            stage_release(fly[k], false);
        }
    return r ? cuda_fail(EM_ERR_DEVICE, r, what, call, device) : EM_OK;
}

em_status cuda_copy_d2d(int device, void *dst, const void *src, size_t n, const char *what)
{
    if (n == 0) return EM_OK;
    CUresult r = cuda_drv.cuMemcpyDtoDAsync(dptr(dst), dptr(src), n, cuda_stream(device));
    return r ? cuda_fail(EM_ERR_DEVICE, r, what, "cuMemcpyDtoDAsync", device) : EM_OK;
}

em_status cuda_memset32(int device, void *dst, unsigned v, size_t count, const char *what)
{
    if (count == 0) return EM_OK;
    CUresult r = cuda_drv.cuMemsetD32Async(dptr(dst), v, count, cuda_stream(device));
    return r ? cuda_fail(EM_ERR_DEVICE, r, what, "cuMemsetD32Async", device) : EM_OK;
}

/* ---- peer copies -------------------------------------------------------------------------- */

static signed char peer_state[CUDA_MAX_DEVICES]
                             [CUDA_MAX_DEVICES]; /* 0 unknown, 1 enabled both ways, -1 no */
static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER;

/* Enables the current context's access to device `to`'s memory; true when it is on. */
static bool enable_from(int from, int to)
{
    const cuda_device_info *a = cuda_device(from), *b = cuda_device(to);
    int can = 0;
    if (cuda_drv.cuDeviceCanAccessPeer(&can, a->dev, b->dev) != 0 || !can) return false;
    uint64_t before = core_error_mark();
    if (cuda_enter(from, "cuda peer copy") != EM_OK) {
        cuda_forget_error(before);
        return false;
    }
    CUresult r = cuda_drv.cuCtxEnablePeerAccess(b->ctx, 0);
    return r == 0 || r == PEER_ENABLED;
}

static bool peer_ready(int x, int y)
{
    if (!cuda_drv.cuDeviceCanAccessPeer || !cuda_drv.cuCtxEnablePeerAccess ||
        !cuda_drv.cuMemcpyPeerAsync)
        return false;
    pthread_mutex_lock(&peer_lock);
    if (peer_state[x][y] == 0) {
        bool ok = enable_from(x, y) && enable_from(y, x);
        peer_state[x][y] = peer_state[y][x] = ok ? 1 : -1;
        em_log_msg("cuda", EM_LOG_INFO, "peer access cuda:%d <-> cuda:%d %s", x, y,
                   ok ? "enabled" : "not available; copies go through the host");
    }
    bool ok = peer_state[x][y] == 1;
    pthread_mutex_unlock(&peer_lock);
    return ok;
}

em_status cuda_copy_peer(int dst_device, void *dst, int src_device, const void *src, size_t n)
{
    const char *what = "em_to_device";
    const cuda_device_info *dd = cuda_device(dst_device), *sd = cuda_device(src_device);
    if (!dd || !sd || dst_device == src_device || dst_device >= CUDA_MAX_DEVICES ||
        src_device >= CUDA_MAX_DEVICES || !peer_ready(dst_device, src_device))
        return EM_ERR_UNSUPPORTED;
    if (n == 0) return EM_OK;
    em_status st = cuda_enter(src_device, what);
    CUstream ss = st == EM_OK ? cuda_stream(src_device) : NULL;
    if (st == EM_OK) st = cuda_enter(dst_device, what);
    CUstream ds = st == EM_OK ? cuda_stream(dst_device) : NULL;
    /* the copy runs on the destination's stream after the source's queued work ... */
    if (st == EM_OK) st = cuda_stream_order(dst_device, ds, src_device, ss, what);
    if (st == EM_OK) {
        CUresult r = cuda_drv.cuMemcpyPeerAsync(dptr(dst), dd->ctx, dptr(src), sd->ctx, n, ds);
        if (r) st = cuda_fail(EM_ERR_DEVICE, r, what, "cuMemcpyPeerAsync", dst_device);
    }
    /* ... and the source's later work (a reuse of src's block) waits for the copy */
    if (st == EM_OK) st = cuda_enter(src_device, what);
    if (st == EM_OK) st = cuda_stream_order(src_device, ss, dst_device, ds, what);
    return st;
}
