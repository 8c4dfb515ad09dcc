/* CUDA graphs (em_graph_*): stream capture of the calling thread's current stream, the graph's
 * own memory (a cuda_gpool of the pool: blocks handed out or freed by the capturing thread during
 * the capture), replay with one cuGraphLaunch, and the refusals of what a capture cannot record.
 *
 * The capture runs in CUDA's thread-local mode: a call of this thread that a capture forbids (a
 * synchronisation, a blocking copy) fails and voids the capture, so a graph is never made from a
 * sequence that would replay wrongly; other threads go on as usual. cuMemAlloc, which the pool
 * may need while capturing, is not recorded and is made in relaxed mode.
 *
 * Values that change from replay to replay (the random ops' seed and first counter, the
 * optimizers' coefficients) live in the graph's parameter block: device memory whose pieces the
 * captured kernels read (cuda_graph_param), filled on the host by each piece's fill function at
 * every replay and written by em_graph_params kernels (the bytes passed by value, so the host
 * buffer is free at once) in stream order before the graph runs. Random ops read their seed and
 * first counter from one such pair, their counters relative to the generator's offset when the
 * capture began; each replay takes as many counters as the capture drew. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/core_impl.h"
#include "cuda.h"

#define CU_STREAM_CAPTURE_MODE_THREAD  1
#define CU_STREAM_CAPTURE_MODE_RELAXED 2
#define CUDA_ERROR_CAPTURE_INVALIDATED 901

#define PARAM_PAGE  65536 /* the parameter block's pieces come from pages of this size */
#define PARAM_CHUNK 500   /* 8-byte words an em_graph_params launch writes (4000 bytes) */

typedef struct param { /* a piece of the parameter block */
    CUdeviceptr at;
    size_t bytes;
    em_graph_fill fill;
    void (*drop)(void *ctx);
    void *ctx;
} param;

typedef struct params { /* a capture's, then its graph's, parameter block */
    param *p;
    int n, cap;
    CUdeviceptr *pages;
    int npages;
    size_t used; /* bytes taken of the last page */
} params;

typedef struct capture {
    cuda_gpool *gp; /* NULL: not capturing on this device */
    CUstream s;
    bool refused;       /* an op was refused: the capture makes no graph */
    uint64_t err_mark;  /* core_error_mark() when the capture began */
    em_rng_state rng;   /* the generator when the capture began */
    CUdeviceptr pair;   /* the random ops' {seed, first counter} (0: no random op yet) */
    uint64_t *counters; /* the pair's fill context: the counters a replay takes */
    params pm;
} capture;

static _Thread_local capture tl_capture[CUDA_MAX_DEVICES];
static _Thread_local int tl_capturing; /* devices this thread captures on */

struct cuda_graph {
    CUgraphExec exec;
    cuda_gpool *gp;
    params pm;
};

cuda_gpool *cuda_capture_pool(int device)
{
    return tl_capturing && device >= 0 && device < CUDA_MAX_DEVICES ? tl_capture[device].gp : NULL;
}

bool cuda_graph_capturing(int device)
{
    return cuda_capture_pool(device) != NULL;
}

int cuda_capture_relax(void)
{
    if (!tl_capturing || !cuda_drv.cuThreadExchangeStreamCaptureMode) return -1;
    int mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    return cuda_drv.cuThreadExchangeStreamCaptureMode(&mode) == 0 ? mode : -1;
}

void cuda_capture_restore(int mode)
{
    if (mode >= 0) cuda_drv.cuThreadExchangeStreamCaptureMode(&mode);
}

em_status cuda_capture_refused(int device, em_status st)
{
    if (cuda_capture_pool(device)) tl_capture[device].refused = true;
    return st;
}

em_status cuda_capture_refuse(int device, const char *what, bool to_host)
{
    if (!cuda_capture_pool(device)) return EM_OK;
    tl_capture[device].refused = true;
    if (to_host)
        return em_error(
            EM_ERR_INVALID_ARG,
            "%s: reads device memory back to the host, which a graph capture on "
            "cuda:%d cannot record (the values exist only when the graph runs): an op "
            "that needs such a read (integer division's zero check, a data-dependent size, a CPU "
            "fallback) cannot be captured; read results after em_graph_replay",
            what, device);
    return em_error(EM_ERR_INVALID_ARG,
                    "%s: a copy from host memory cannot be recorded in a graph capture on cuda:%d "
                    "(the graph would read the host buffer when it runs); copy new inputs into "
                    "the tensors the graph reads with em_copy_into, outside the capture",
                    what, device);
}

/* Frees a parameter block: the pieces' contexts, then the pages (the graph's replays are done). */
static void params_free(params *pm)
{
    for (int i = 0; i < pm->n; i++)
        if (pm->p[i].drop) pm->p[i].drop(pm->p[i].ctx);
    for (int i = 0; i < pm->npages; i++) cuda_drv.cuMemFree(pm->pages[i]);
    free(pm->p);
    free(pm->pages);
    *pm = (params){0};
}

em_status cuda_graph_param(int device, size_t bytes, em_graph_fill fill, void (*drop)(void *ctx),
                           void *ctx, void **dptr)
{
    const char *fn = "em_graph_param";
    *dptr = NULL;
    if (!cuda_capture_pool(device)) return EM_OK;
    capture *c = &tl_capture[device];
    params *pm = &c->pm;
    bytes = (bytes + 7) & ~(size_t)7;
    em_status st = EM_OK;
    if (bytes == 0 || bytes > PARAM_CHUNK * 8)
        st = em_error(EM_ERR_INTERNAL, "%s: %zu bytes (1 to %d)", fn, bytes, PARAM_CHUNK * 8);
    if (st == EM_OK && pm->n == pm->cap) {
        int cap = pm->cap ? 2 * pm->cap : 16;
        param *p = realloc(pm->p, (size_t)cap * sizeof *p);
        if (p)
            pm->p = p, pm->cap = cap;
        else
            st = em_error(EM_ERR_OOM, "%s: out of memory", fn);
    }
    if (st == EM_OK && (!pm->npages || pm->used + bytes > PARAM_PAGE)) {
        CUdeviceptr *pages = realloc(pm->pages, (size_t)(pm->npages + 1) * sizeof *pages);
        if (!pages) {
            st = em_error(EM_ERR_OOM, "%s: out of memory", fn);
        } else { /* not recorded: made in relaxed mode, freed with the graph */
            pm->pages = pages;
            int mode = cuda_capture_relax();
            CUresult r = cuda_drv.cuMemAlloc(&pages[pm->npages], PARAM_PAGE);
            cuda_capture_restore(mode);
            if (r)
                st = cuda_fail(EM_ERR_OOM, r, fn, "cuMemAlloc", device);
            else
                pm->npages++, pm->used = 0;
        }
    }
    if (st != EM_OK) {
        if (drop) drop(ctx);
        return cuda_capture_refused(device, st);
    }
    param *p = &pm->p[pm->n++];
    *p = (param){pm->pages[pm->npages - 1] + pm->used, bytes, fill, drop, ctx};
    pm->used += bytes;
    *dptr = (void *)(uintptr_t)p->at;
    return EM_OK;
}

/* The random ops' pair at a replay: the generator's seed and the first of the counters the
 * replay takes. */
static em_status fill_rng(void *ctx, void *dst)
{
    em_rng_state t = core_rng_take(*(uint64_t *)ctx);
    uint64_t v[2] = {t.seed, t.offset};
    memcpy(dst, v, sizeof v);
    return EM_OK;
}

em_status cuda_capture_rng(int device, unsigned long long seed, unsigned long long *off,
                           void **slot, const char *what)
{
    *slot = NULL;
    if (!cuda_capture_pool(device)) return EM_OK;
    capture *c = &tl_capture[device];
    if (seed != c->rng.seed || *off < c->rng.offset)
        return cuda_capture_refused(
            device, em_error(EM_ERR_INVALID_ARG,
                             "%s: the random generator was reseeded or set back during the "
                             "graph capture on cuda:%d (a replay draws from the generator as "
                             "it is then); seed before em_graph_capture_begin",
                             what, device));
    if (!c->pair) {
        uint64_t *counters = calloc(1, sizeof *counters);
        if (!counters)
            return cuda_capture_refused(device, em_error(EM_ERR_OOM, "%s: out of memory", what));
        void *at;
        em_status st =
            cuda_graph_param(device, 2 * sizeof(uint64_t), fill_rng, free, counters, &at);
        if (st != EM_OK) return st;
        c->pair = (CUdeviceptr)(uintptr_t)at, c->counters = counters;
    }
    *off -= c->rng.offset;
    *slot = (void *)(uintptr_t)c->pair;
    return EM_OK;
}

/* Gives back what a capture that made no graph held. */
static void capture_drop(capture *c)
{
    params_free(&c->pm);
    cuda_gpool_close(c->gp);
}

/* Fills the graph's parameter block for a replay and queues its writes in stream order: the
 * pieces' bytes in runs of consecutive addresses, at most PARAM_CHUNK words a launch. */
static em_status params_write(int device, params *pm, const char *fn)
{
    if (!pm->n) return EM_OK;
    CUfunction f = cuda_kernel(device, "em_graph_params", fn);
    if (!f) return em_last_status();
    struct {
        uint64_t w[PARAM_CHUNK];
    } chunk;
    unsigned block[3] = {128, 1, 1}, grid[3] = {1, 1, 1};
    int i = 0;
    while (i < pm->n) {
        CUdeviceptr at = pm->p[i].at;
        size_t len = 0;
        for (; i < pm->n && pm->p[i].at == at + len && len + pm->p[i].bytes <= sizeof chunk; i++) {
            memset((char *)chunk.w + len, 0, pm->p[i].bytes);
            em_status st = pm->p[i].fill(pm->p[i].ctx, (char *)chunk.w + len);
            if (st != EM_OK) return st;
            len += pm->p[i].bytes;
        }
        unsigned words = (unsigned)(len / 8);
        void *dst = (void *)(uintptr_t)at, *args[] = {&dst, &words, &chunk};
        em_status st = cuda_launch_grid(device, f, grid, block, args, fn);
        if (st != EM_OK) return st;
    }
    return EM_OK;
}

static bool have_graphs(void)
{
    return cuda_drv.cuStreamBeginCapture && cuda_drv.cuStreamEndCapture &&
           cuda_drv.cuGraphInstantiateWithFlags && cuda_drv.cuGraphLaunch &&
           cuda_drv.cuGraphExecDestroy && cuda_drv.cuGraphDestroy &&
           cuda_drv.cuThreadExchangeStreamCaptureMode;
}

em_status cuda_graph_begin(int device)
{
    const char *fn = "em_graph_capture_begin";
    if (!have_graphs())
        return em_error(EM_ERR_UNSUPPORTED, "%s: the CUDA driver lacks stream capture", fn);
    if (device < 0 || device >= CUDA_MAX_DEVICES)
        return em_error(EM_ERR_DEVICE, "%s: graphs reach cuda:0 to cuda:%d", fn,
                        CUDA_MAX_DEVICES - 1);
    if (tl_capture[device].gp)
        return em_error(EM_ERR_INVALID_ARG,
                        "%s: this thread is capturing on cuda:%d already (end it first)", fn,
                        device);
    em_status st = cuda_enter(device, fn);
    if (st != EM_OK) return st;
    CUstream s = cuda_stream(device);
    if (!s)
        return em_error(EM_ERR_DEVICE,
                        "%s: this thread has no stream of its own on cuda:%d (the legacy stream "
                        "cannot be captured)",
                        fn, device);
    cuda_gpool *gp = cuda_gpool_new(device);
    if (!gp) return em_last_status();
    CUresult r = cuda_drv.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD);
    if (r) {
        cuda_gpool_close(gp);
        return cuda_fail(EM_ERR_DEVICE, r, fn, "cuStreamBeginCapture", device);
    }
    tl_capture[device] =
        (capture){.gp = gp, .s = s, .rng = em_rng_get_state(), .err_mark = core_error_mark()};
    tl_capturing++;
    return EM_OK;
}

/* Records the failure of a capture's end and gives its memory back. */
static void *end_failed(capture *c, CUresult r, const char *call, int device)
{
    capture_drop(c);
    cuda_fail(EM_ERR_DEVICE, r, "em_graph_capture_end", call, device);
    if (r == CUDA_ERROR_CAPTURE_INVALIDATED) {
        char msg[512];
        snprintf(msg, sizeof msg,
                 "%s; an op during the capture failed or did what a graph "
                 "cannot record (its error said which)",
                 em_last_error());
        em_clear_error();
        em_error(EM_ERR_DEVICE, "%s", msg);
    }
    return NULL;
}

void *cuda_graph_end(int device)
{
    const char *fn = "em_graph_capture_end";
    if (device < 0 || device >= CUDA_MAX_DEVICES || !tl_capture[device].gp) {
        em_error(EM_ERR_INVALID_ARG, "%s: this thread is not capturing on cuda:%d", fn, device);
        return NULL;
    }
    capture c = tl_capture[device];
    tl_capture[device] = (capture){0};
    tl_capturing--;
    if (cuda_enter(device, fn) != EM_OK) {
        capture_drop(&c);
        return NULL;
    }
    CUgraph graph = NULL;
    CUresult r = cuda_drv.cuStreamEndCapture(c.s, &graph);
    if (r) return end_failed(&c, r, "cuStreamEndCapture", device);
    em_rng_state now = em_rng_get_state();
    /* a call failed in the capture and its error was not handled: its work is missing */
    if (core_failed_since(c.err_mark)) c.refused = true;
    if (c.pair && (now.seed != c.rng.seed || now.offset < c.rng.offset)) {
        c.refused = true;
        em_error(EM_ERR_INVALID_ARG,
                 "%s: the random generator was reseeded or set back during the capture on "
                 "cuda:%d, whose random ops draw from it",
                 fn, device);
    }
    if (c.refused) {
        cuda_drv.cuGraphDestroy(graph);
        capture_drop(&c);
        em_error(EM_ERR_INVALID_ARG,
                 "%s: an op of the capture on cuda:%d was refused (its error said why); no graph "
                 "was made",
                 fn, device);
        return NULL;
    }
    struct cuda_graph *g = calloc(1, sizeof *g);
    if (!g) {
        cuda_drv.cuGraphDestroy(graph);
        capture_drop(&c);
        em_error(EM_ERR_OOM, "%s: out of memory", fn);
        return NULL;
    }
    r = cuda_drv.cuGraphInstantiateWithFlags(&g->exec, graph, 0);
    cuda_drv.cuGraphDestroy(graph); /* the executable graph is a copy */
    if (r) {
        free(g);
        return end_failed(&c, r, "cuGraphInstantiateWithFlags", device);
    }
    g->gp = c.gp;
    if (c.pair) *c.counters = now.offset - c.rng.offset;
    g->pm = c.pm;
    return g;
}

em_status cuda_graph_launch(int device, void *p)
{
    const char *fn = "em_graph_replay";
    struct cuda_graph *g = p;
    if (cuda_capture_pool(device))
        return em_error(EM_ERR_INVALID_ARG,
                        "%s: this thread is capturing on cuda:%d (a replay inside a capture is not "
                        "supported)",
                        fn, device);
    em_status st = cuda_enter(device, fn);
    if (st != EM_OK) return st;
    CUstream s = cuda_stream(device);
    /* replays share the graph's memory: one on another stream waits for the last */
    CUstream last = cuda_gpool_last(g->gp);
    if (last && last != s && (st = cuda_stream_order(device, s, device, last, fn)) != EM_OK)
        return st;
    if ((st = params_write(device, &g->pm, fn)) != EM_OK) return st;
    CUresult r = cuda_drv.cuGraphLaunch(g->exec, s);
    if (r) return cuda_fail(EM_ERR_DEVICE, r, fn, "cuGraphLaunch", device);
    cuda_gpool_launched(g->gp, s);
    return EM_OK;
}

void cuda_graph_free(int device, void *p)
{
    struct cuda_graph *g = p;
    uint64_t before = core_error_mark();
    if (cuda_enter(device, "em_graph_free") == EM_OK) {
        CUstream last = cuda_gpool_last(g->gp);
        if (last) cuda_drv.cuStreamSynchronize(last); /* its memory goes back to the pool */
        cuda_drv.cuGraphExecDestroy(g->exec);
    } else {
        cuda_forget_error(before);
    }
    params_free(&g->pm);
    cuda_gpool_close(g->gp);
    free(g);
}

int64_t cuda_graph_bytes(int device, void *p)
{
    (void)device;
    return cuda_gpool_bytes(((struct cuda_graph *)p)->gp);
}
