/* A stand-in libcuda.so.1 for tests without a GPU (tests/cuda/test_cuda_mock.c): two devices
 * whose memory is host memory, and streams that really defer their work. Every asynchronous
 * copy or memset is queued on its stream and runs only when something waits for it (a stream,
 * event or context sync, a wait on another stream that must run first, or now and then an event
 * query), so code that reuses a buffer before its copy ran, or orders two streams wrongly, reads
 * wrong bytes. Freeing memory that queued work still touches aborts. Each device has 1 GiB
 * (cuMemAlloc fails past it; cuMemGetInfo reports it). No kernels: module loads fail. Calls fail
 * on request (mock_cuda_fail, or MOCK_CUDA_FAIL=name in the environment: every call of name)
 * with CUDA_ERROR_LAUNCH_FAILED, as a kernel fault surfacing at a later call would.
 * Stream capture: work queued on a capturing stream is recorded instead of queued, and an
 * instantiated graph's launch queues the recorded copies and memsets again. As the driver does,
 * a call the capture forbids (an allocation or free outside relaxed mode, a synchronisation, a
 * blocking copy, an event wait or record) fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and
 * voids the capture; freeing memory that a live graph's copies touch aborts. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#pragma GCC diagnostic ignored "-Wmissing-prototypes"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum {
    OK = 0,
    ERR_INVALID_VALUE = 1,
    ERR_OUT_OF_MEMORY = 2,
    ERR_LAUNCH_FAILED = 719,
    ERR_NOT_FOUND = 500,
    ERR_NOT_READY = 600,
    ERR_PEER_ON = 704,
    ERR_ILLEGAL_STATE = 401,
    ERR_CAPTURE_UNSUPPORTED = 900,
    ERR_CAPTURE_INVALIDATED = 901
};

typedef struct mstream mstream;

typedef struct mop {
    int kind;      /* 0 copy, 1 set32, 2 set8, 3 wait */
    int owned_src; /* a copy from pageable memory, staged at queue time: freed after */
    char *dst;
    const char *src;
    size_t n;
    unsigned v;
    mstream *on; /* wait: the stream and the position it must reach */
    size_t pos;
} mop;

typedef struct mgraph {
    mop *ops;
    size_t n, cap;
    struct mgraph *next; /* live executable graphs */
} mgraph;

struct mstream {
    mop *q;
    size_t n, cap, done;
    int priority;
    mgraph *capture; /* recording (NULL: not capturing) */
    int capture_mode, capture_void;
};

typedef struct mevent {
    mstream *s; /* NULL: never recorded (or recorded on the legacy stream: complete) */
    size_t pos;
    int timing;
} mevent;

typedef struct mblock {
    char *p;
    size_t n;
    int pinned;
    int dev; /* device memory: the device it counts against */
    struct mblock *next;
} mblock;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static mstream *streams[4096];
static int n_streams;
static mblock *blocks;
static mevent *events[65536];
static int n_events;
static unsigned rng = 12345;
static int ctxs[2];
static _Thread_local void *current_ctx;
static int peer_on[2];
#define DEVICE_BYTES ((size_t)1 << 30)
static size_t used[2];                    /* device memory allocated per device */
static mgraph *execs;                     /* instantiated graphs */
static _Thread_local mstream *tl_capture; /* the stream this thread captures */
static _Thread_local int tl_mode;         /* cuThreadExchangeStreamCaptureMode's (0: global) */

/* A call a capture forbids, made by the capturing thread outside relaxed mode: voids the capture
 * (true: the call must fail with ERR_CAPTURE_UNSUPPORTED). */
static int forbidden(void)
{
    mstream *c = tl_capture;
    if (!c || c->capture_mode == 2 || tl_mode == 2) return 0;
    c->capture_void = 1;
    return 1;
}
#define UNSAFE()                                                                                   \
    do {                                                                                           \
        if (forbidden()) return ERR_CAPTURE_UNSUPPORTED;                                           \
    } while (0)

/* The device of the current context (cuda:0 when none is current). */
static int current_device(void)
{
    return current_ctx == &ctxs[1] ? 1 : 0;
}

static void die(const char *msg)
{
    fprintf(stderr, "mock libcuda: %s\n", msg);
    abort();
}

static void run_to(mstream *s, size_t pos);

static void run_op(mop *o)
{
    switch (o->kind) {
    case 0: memmove(o->dst, o->src, o->n); break;
    case 1:
        for (size_t i = 0; i < o->n; i++) memcpy(o->dst + 4 * i, &o->v, 4);
        break;
    case 2: memset(o->dst, (int)o->v, o->n); break;
    case 3: run_to(o->on, o->pos); break;
    }
    if (o->owned_src) free((void *)o->src);
}

static void run_to(mstream *s, size_t pos)
{
    if (!s) return;
    while (s->done < pos && s->done < s->n) {
        mop o = s->q[s->done++];
        run_op(&o);
    }
}

static void run_all(void)
{
    for (int i = 0; i < n_streams; i++)
        if (streams[i]) run_to(streams[i], streams[i]->n);
}

static void record(mgraph *g, mop o)
{
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 16;
        g->ops = realloc(g->ops, g->cap * sizeof *g->ops);
        if (!g->ops) die("out of memory");
    }
    g->ops[g->n++] = o;
}

static void push(mstream *s, mop o)
{
    if (s && s->capture) {
        if (o.owned_src) die("a staged pageable copy was captured");
        record(s->capture, o);
        return;
    }
    if (!s) { /* the legacy stream: everything before it first, then at once */
        run_all();
        run_op(&o);
        return;
    }
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->q = realloc(s->q, s->cap * sizeof *s->q);
        if (!s->q) die("out of memory");
    }
    s->q[s->n++] = o;
}

static mblock *find_block(const void *p)
{
    for (mblock *b = blocks; b; b = b->next)
        if ((const char *)p >= b->p && (const char *)p < b->p + (b->n ? b->n : 1)) return b;
    return NULL;
}

static int pinned(const void *p)
{
    mblock *b = find_block(p);
    return b && b->pinned;
}

/* Aborts when queued, unexecuted work touches [p, p + n). */
static void check_unused(const char *p, size_t n, const char *what)
{
    for (int i = 0; i < n_streams; i++) {
        mstream *s = streams[i];
        if (!s) continue;
        for (size_t k = s->done; k < s->n; k++) {
            mop *o = &s->q[k];
            if (o->kind == 3) continue;
            size_t len = o->kind == 1 ? 4 * o->n : o->n;
            int hit = (o->dst < p + n && o->dst + len > p) ||
                      (o->kind == 0 && o->src < p + n && o->src + len > p);
            if (hit) die(what);
        }
    }
}

static void *alloc_block(size_t n, int is_pinned)
{
    int dev = current_device();
    if (!is_pinned && (n > DEVICE_BYTES || used[dev] > DEVICE_BYTES - n)) return NULL;
    mblock *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->dev = dev;
    if (!is_pinned) used[dev] += n;
    b->p = aligned_alloc(256, (n + 255) / 256 * 256 + 256);
    b->n = n;
    b->pinned = is_pinned;
    memset(b->p, 0xCD, n);
    b->next = blocks;
    blocks = b;
    return b->p;
}

static int graph_uses(const char *p, size_t n)
{
    for (mgraph *g = execs; g; g = g->next)
        for (size_t i = 0; i < g->n; i++) {
            const mop *o = &g->ops[i];
            if ((o->dst < p + n && p < o->dst + (o->kind == 1 ? 4 * o->n : o->n)) ||
                (o->kind == 0 && o->src < p + n && p < o->src + o->n))
                return 1;
        }
    return 0;
}

static int free_block(void *p, const char *what)
{
    for (mblock **pp = &blocks; *pp; pp = &(*pp)->next)
        if ((*pp)->p == p) {
            mblock *b = *pp;
            check_unused(b->p, b->n, what);
            if (graph_uses(b->p, b->n)) die("memory that a live graph's work uses was freed");
            *pp = b->next;
            if (!b->pinned) used[b->dev] -= b->n;
            free(b->p);
            free(b);
            return OK;
        }
    return ERR_INVALID_VALUE;
}

/* Failure injection: calls first .. first + count - 1 (counting from 1) of fail_name fail. */
static pthread_mutex_t fail_mu = PTHREAD_MUTEX_INITIALIZER;
static char fail_name[64];
static long fail_first, fail_count, fail_seen;
static int fail_env_read;

/* for the test: from now on, calls nth .. nth + count - 1 of the driver function `name` (its
 * exported name, "cuMemcpyHtoDAsync_v2") fail; count < 0: all from the nth on */
void mock_cuda_fail(const char *name, long nth, long count)
{
    pthread_mutex_lock(&fail_mu);
    snprintf(fail_name, sizeof fail_name, "%s", name ? name : "");
    fail_first = nth, fail_count = count, fail_seen = 0;
    fail_env_read = 1;
    pthread_mutex_unlock(&fail_mu);
}

static int injected(const char *name)
{
    pthread_mutex_lock(&fail_mu);
    if (!fail_env_read) {
        const char *e = getenv("MOCK_CUDA_FAIL");
        if (e) snprintf(fail_name, sizeof fail_name, "%s", e), fail_first = 1, fail_count = -1;
        fail_env_read = 1;
    }
    int hit = 0;
    if (fail_name[0] && strcmp(name, fail_name) == 0) {
        long k = ++fail_seen;
        hit = k >= fail_first && (fail_count < 0 || k < fail_first + fail_count);
    }
    pthread_mutex_unlock(&fail_mu);
    return hit;
}

/* Some progress now and then: an event query may find its work done. */
static int coin(void)
{
    rng = rng * 1103515245u + 12345u;
    return (rng >> 16) % 3 == 0;
}

#define API(name, args) CUresult name args
/* the first statement of a function that can be made to fail */
#define INJECT(name)                                                                               \
    do {                                                                                           \
        if (injected(name)) return ERR_LAUNCH_FAILED;                                              \
    } while (0)
#define LOCKED(body)                                                                               \
    do {                                                                                           \
        pthread_mutex_lock(&mu);                                                                   \
        body;                                                                                      \
        pthread_mutex_unlock(&mu);                                                                 \
    } while (0)

API(cuInit, (unsigned f))
{
    (void)f;
    return OK;
}
API(cuDriverGetVersion, (int *v))
{
    *v = 13000;
    return OK;
}
API(cuDeviceGetCount, (int *n))
{
    *n = 2;
    return OK;
}
API(cuDeviceGet, (int *d, int i))
{
    *d = i;
    return i >= 0 && i < 2 ? OK : ERR_INVALID_VALUE;
}
API(cuDeviceGetName, (char *s, int len, int d))
{
    snprintf(s, (size_t)len, "Ember mock GPU %d", d);
    return OK;
}
API(cuDeviceGetAttribute, (int *v, int attr, int d))
{
    (void)d;
    *v = attr == 75 ? 9 : attr == 76 ? 0 : attr == 16 ? 4 : 1;
    return OK;
}
API(cuDevicePrimaryCtxRetain, (void **c, int d))
{
    *c = &ctxs[d];
    return OK;
}
API(cuCtxSetCurrent, (void *c))
{
    current_ctx = c;
    return OK;
}
API(cuCtxSynchronize, (void))
{
    UNSAFE();
    INJECT("cuCtxSynchronize");
    LOCKED(run_all());
    return OK;
}
API(cuMemAlloc_v2, (CUdeviceptr * p, size_t n))
{
    UNSAFE();
    INJECT("cuMemAlloc_v2");
    void *q;
    LOCKED(q = alloc_block(n, 0));
    *p = (CUdeviceptr)(uintptr_t)q;
    return q ? OK : ERR_OUT_OF_MEMORY;
}
API(cuDeviceTotalMem_v2, (size_t * bytes, int d))
{
    (void)d;
    *bytes = DEVICE_BYTES;
    return OK;
}
API(cuMemGetInfo_v2, (size_t * free_bytes, size_t *total))
{
    LOCKED(*free_bytes = DEVICE_BYTES - used[current_device()]);
    *total = DEVICE_BYTES;
    return OK;
}
API(cuMemFree_v2, (CUdeviceptr p))
{
    UNSAFE();
    CUresult r;
    LOCKED(r = free_block((void *)(uintptr_t)p, "cuMemFree of memory that queued work uses"));
    return r;
}
API(cuMemHostAlloc, (void **p, size_t n, unsigned flags))
{
    UNSAFE();
    INJECT("cuMemHostAlloc");
    (void)flags;
    LOCKED(*p = alloc_block(n, 1));
    return *p ? OK : 2;
}
API(cuMemFreeHost, (void *p))
{
    UNSAFE();
    CUresult r;
    LOCKED(r = free_block(p, "cuMemFreeHost of memory that queued work uses"));
    return r;
}
/* the synchronous copies run on the legacy stream: after all queued work */
API(cuMemcpyHtoD_v2, (CUdeviceptr d, const void *s, size_t n))
{
    UNSAFE();
    LOCKED(run_all(); memcpy((void *)(uintptr_t)d, s, n));
    return OK;
}
API(cuMemcpyDtoH_v2, (void *d, CUdeviceptr s, size_t n))
{
    UNSAFE();
    LOCKED(run_all(); memcpy(d, (void *)(uintptr_t)s, n));
    return OK;
}
API(cuMemcpyDtoD_v2, (CUdeviceptr d, CUdeviceptr s, size_t n))
{
    UNSAFE();
    LOCKED(run_all(); memmove((void *)(uintptr_t)d, (void *)(uintptr_t)s, n));
    return OK;
}
API(cuMemcpyHtoDAsync_v2, (CUdeviceptr d, const void *s, size_t n, mstream *st))
{
    INJECT("cuMemcpyHtoDAsync_v2");
    pthread_mutex_lock(&mu);
    const char *src = s;
    if (!pinned(s)) { /* pageable: the driver stages it before returning */
        char *copy = malloc(n ? n : 1);
        if (!copy) die("out of memory");
        memcpy(copy, s, n);
        src = copy;
    }
    push(st,
         (mop){.kind = 0, .dst = (char *)(uintptr_t)d, .src = src, .n = n, .owned_src = src != s});
    pthread_mutex_unlock(&mu);
    return OK;
}
API(cuMemcpyDtoHAsync_v2, (void *d, CUdeviceptr s, size_t n, mstream *st))
{
    INJECT("cuMemcpyDtoHAsync_v2");
    if (!pinned(d) || (st && st->capture)) UNSAFE(); /* returns once the copy is done */
    pthread_mutex_lock(&mu);
    mop o = {.kind = 0, .dst = d, .src = (const char *)(uintptr_t)s, .n = n};
    if (pinned(d)) {
        push(st, o);
    } else { /* pageable: returns once the copy is done */
        if (st)
            run_to(st, st->n);
        else
            run_all();
        memmove(d, (const void *)(uintptr_t)s, n);
    }
    pthread_mutex_unlock(&mu);
    return OK;
}
API(cuMemcpyDtoDAsync_v2, (CUdeviceptr d, CUdeviceptr s, size_t n, mstream *st))
{
    INJECT("cuMemcpyDtoDAsync_v2");
    mop o = {.kind = 0, .dst = (char *)(uintptr_t)d, .src = (const char *)(uintptr_t)s, .n = n};
    LOCKED(push(st, o));
    return OK;
}
API(cuMemcpyPeerAsync, (CUdeviceptr d, void *dc, CUdeviceptr s, void *sc, size_t n, mstream *st))
{
    (void)dc, (void)sc;
    return cuMemcpyDtoDAsync_v2(d, s, n, st);
}
API(cuMemsetD8Async, (CUdeviceptr d, unsigned char v, size_t n, mstream *st))
{
    mop o = {.kind = 2, .dst = (char *)(uintptr_t)d, .n = n, .v = v};
    LOCKED(push(st, o));
    return OK;
}
API(cuMemsetD32Async, (CUdeviceptr d, unsigned v, size_t n, mstream *st))
{
    mop o = {.kind = 1, .dst = (char *)(uintptr_t)d, .n = n, .v = v};
    LOCKED(push(st, o));
    return OK;
}
API(cuStreamCreate, (mstream * *s, unsigned flags))
{
    INJECT("cuStreamCreate");
    (void)flags;
    mstream *x = calloc(1, sizeof *x);
    LOCKED(if (n_streams < 4096) streams[n_streams++] = x);
    *s = x;
    return x ? OK : 2;
}
/* priorities 0 (least) to -5 (greatest), as on an H100; the mock does not schedule by them */
API(cuCtxGetStreamPriorityRange, (int *least, int *greatest))
{
    *least = 0, *greatest = -5;
    return OK;
}
API(cuStreamCreateWithPriority, (mstream * *s, unsigned flags, int priority))
{
    if (priority > 0 || priority < -5) return ERR_INVALID_VALUE; /* callers clamp */
    CUresult r = cuStreamCreate(s, flags);
    if (r == OK) (*s)->priority = priority;
    return r;
}
API(cuStreamGetPriority, (mstream * s, int *priority))
{
    *priority = s ? s->priority : 0;
    return OK;
}
API(cuStreamDestroy_v2, (mstream * s))
{
    pthread_mutex_lock(&mu);
    run_all(); /* its work finishes first (and whatever waits for it) */
    for (int i = 0; i < n_streams; i++)
        if (streams[i] == s) streams[i] = NULL;
    for (int i = 0; i < n_events; i++)
        if (events[i] && events[i]->s == s) events[i]->s = NULL; /* complete */
    free(s->q);
    free(s);
    pthread_mutex_unlock(&mu);
    return OK;
}
API(cuStreamSynchronize, (mstream * s))
{
    UNSAFE();
    INJECT("cuStreamSynchronize");
    LOCKED(if (s) run_to(s, s->n); else run_all());
    return OK;
}
API(cuStreamWaitEvent, (mstream * s, mevent *e, unsigned flags))
{
    if (s && s->capture && forbidden()) return ERR_CAPTURE_UNSUPPORTED;
    (void)flags;
    mop o = {.kind = 3, .on = e->s, .pos = e->pos};
    LOCKED(if (o.on) push(s, o));
    return OK;
}
API(cuEventCreate, (mevent * *e, unsigned flags))
{
    INJECT("cuEventCreate");
    mevent *x = calloc(1, sizeof *x);
    if (!x) return 2;
    x->timing = !(flags & 2);
    pthread_mutex_lock(&mu);
    int i = 0;
    while (i < n_events && events[i]) i++;
    if (i == n_events && n_events < 65536) n_events++;
    if (i < 65536) events[i] = x;
    pthread_mutex_unlock(&mu);
    *e = x;
    return OK;
}
API(cuEventDestroy_v2, (mevent * e))
{
    pthread_mutex_lock(&mu);
    for (int i = 0; i < n_events; i++)
        if (events[i] == e) events[i] = NULL;
    pthread_mutex_unlock(&mu);
    free(e);
    return OK;
}
API(cuEventRecord, (mevent * e, mstream *s))
{
    if (s && s->capture && forbidden()) return ERR_CAPTURE_UNSUPPORTED;
    INJECT("cuEventRecord");
    LOCKED(if (!s) run_all(); e->s = s; e->pos = s ? s->n : 0);
    return OK;
}
static int event_done(mevent *e)
{
    return !e->s || e->s->done >= e->pos;
}
API(cuEventQuery, (mevent * e))
{
    int done;
    LOCKED(if (coin()) run_to(e->s, e->pos); done = event_done(e));
    return done ? OK : ERR_NOT_READY;
}
API(cuEventSynchronize, (mevent * e))
{
    UNSAFE();
    INJECT("cuEventSynchronize");
    LOCKED(run_to(e->s, e->pos));
    return OK;
}
API(cuEventElapsedTime_v2, (float *ms, mevent *a, mevent *b))
{
    int done;
    LOCKED(done = event_done(a) && event_done(b));
    if (!a->timing || !b->timing) return 400;
    *ms = 0.5f;
    return done ? OK : ERR_NOT_READY;
}
API(cuThreadExchangeStreamCaptureMode, (int *mode))
{
    int old = tl_mode;
    tl_mode = *mode;
    *mode = old;
    return OK;
}
API(cuStreamBeginCapture_v2, (mstream * s, int mode))
{
    if (!s || s->capture || tl_capture) return ERR_ILLEGAL_STATE;
    mgraph *g = calloc(1, sizeof *g);
    if (!g) return ERR_OUT_OF_MEMORY;
    LOCKED(s->capture = g; s->capture_mode = mode; s->capture_void = 0);
    tl_capture = s;
    return OK;
}
API(cuStreamEndCapture, (mstream * s, mgraph **out))
{
    if (!s || !s->capture || tl_capture != s) return ERR_ILLEGAL_STATE;
    mgraph *g;
    int bad;
    LOCKED(g = s->capture; s->capture = NULL; bad = s->capture_void);
    tl_capture = NULL;
    if (bad) {
        free(g->ops);
        free(g);
        *out = NULL;
        return ERR_CAPTURE_INVALIDATED;
    }
    *out = g;
    return OK;
}
API(cuGraphInstantiateWithFlags, (mgraph * *exec, mgraph *g, unsigned long long flags))
{
    (void)flags;
    mgraph *x = calloc(1, sizeof *x);
    if (!x) return ERR_OUT_OF_MEMORY;
    x->n = x->cap = g->n;
    x->ops = malloc((g->n ? g->n : 1) * sizeof *x->ops);
    if (!x->ops) die("out of memory");
    if (g->n) memcpy(x->ops, g->ops, g->n * sizeof *x->ops);
    LOCKED(x->next = execs; execs = x);
    *exec = x;
    return OK;
}
API(cuGraphDestroy, (mgraph * g))
{
    if (g) free(g->ops);
    free(g);
    return OK;
}
API(cuGraphLaunch, (mgraph * x, mstream *s))
{
    INJECT("cuGraphLaunch");
    if (s && s->capture) return ERR_CAPTURE_UNSUPPORTED;
    LOCKED(for (size_t i = 0; i < x->n; i++) push(s, x->ops[i]));
    return OK;
}
API(cuGraphExecDestroy, (mgraph * x))
{
    pthread_mutex_lock(&mu);
    for (mgraph **pp = &execs; *pp; pp = &(*pp)->next)
        if (*pp == x) {
            *pp = x->next;
            break;
        }
    pthread_mutex_unlock(&mu);
    free(x->ops);
    free(x);
    return OK;
}
API(cuDeviceCanAccessPeer, (int *can, int a, int b))
{
    INJECT("cuDeviceCanAccessPeer");
    *can = a != b;
    return OK;
}
API(cuCtxEnablePeerAccess, (void *peer, unsigned flags))
{
    (void)flags;
    int k = peer == &ctxs[0] ? 0 : 1;
    if (peer_on[k]++) return ERR_PEER_ON;
    return OK;
}
API(cuModuleLoadData, (void **m, const void *img))
{
    (void)m, (void)img;
    return 218; /* CUDA_ERROR_INVALID_PTX: no kernels here */
}
API(cuModuleGetFunction, (void **f, void *m, const char *name))
{
    (void)f, (void)m, (void)name;
    return ERR_NOT_FOUND;
}
API(cuLaunchKernel, (void *f, unsigned a, unsigned b, unsigned c, unsigned d, unsigned e,
                     unsigned g, unsigned smem, mstream *s, void **p, void **x))
{
    (void)f, (void)a, (void)b, (void)c, (void)d, (void)e, (void)g, (void)smem, (void)s, (void)p,
        (void)x;
    return ERR_INVALID_VALUE;
}
API(cuFuncSetAttribute, (void *f, int a, int v))
{
    (void)f, (void)a, (void)v;
    return OK;
}
API(cuGetErrorName, (CUresult r, const char **s))
{
    *s = r == ERR_NOT_READY             ? "CUDA_ERROR_NOT_READY"
         : r == ERR_OUT_OF_MEMORY       ? "CUDA_ERROR_OUT_OF_MEMORY"
         : r == ERR_LAUNCH_FAILED       ? "CUDA_ERROR_LAUNCH_FAILED"
         : r == ERR_CAPTURE_UNSUPPORTED ? "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"
         : r == ERR_CAPTURE_INVALIDATED ? "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"
                                        : "CUDA_ERROR_MOCK";
    return OK;
}
API(cuGetErrorString, (CUresult r, const char **s))
{
    (void)r;
    *s = "mock driver";
    return OK;
}

/* for the test: how many queued operations have not run yet */
size_t mock_cuda_pending(void)
{
    size_t k = 0;
    LOCKED(for (int i = 0; i < n_streams; i++) if (streams[i]) k +=
           streams[i]->n - streams[i]->done);
    return k;
}
