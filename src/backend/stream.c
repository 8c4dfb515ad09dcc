/* The public streams and events: handles over a backend's em_stream_ops, and their meaning on a
 * backend without streams (the CPU: work is done when a call returns; events keep host time). */
#include <math.h>
#include <stdlib.h>

#include "backend.h"

#define MAX_DEV EM_MAX_THREAD_DEVICES

struct em_stream {
    em_device dev;
    void *impl; /* the backend's stream; NULL on a backend without streams */
    bool owned; /* from em_stream_new; em_stream_current's handles belong to the library */
};

struct em_event {
    em_device dev;
    void *impl;      /* the backend's event; NULL on a backend without streams */
    int64_t host_ns; /* without streams: when it was recorded (-1: never) */
};

/* This thread's chosen stream per device (NULL: its default) and handles for its defaults. */
static _Thread_local em_stream *tl_cur[EM_MAX_BACKENDS][MAX_DEV];
static _Thread_local em_stream tl_default[EM_MAX_BACKENDS][MAX_DEV];

/* The backend of dev when dev exists (else NULL with an error naming fn). */
static const em_backend *backend_of(const char *fn, em_device dev)
{
    const em_backend *b = em_backend_of(fn, dev);
    if (!b) return NULL;
    if (dev.index >= MAX_DEV) {
        em_error(EM_ERR_UNSUPPORTED, "%s: streams reach devices 0 to %d, not %d", fn, MAX_DEV - 1,
                 dev.index);
        return NULL;
    }
    return b;
}

em_stream *em_stream_new(em_device dev)
{
    return em_stream_new_priority(dev, 0);
}

int em_stream_priority(const em_stream *s)
{
    if (!s || !s->impl) return 0;
    const em_backend *b = em_backend_get(s->dev.backend);
    return b && b->streams && b->streams->stream_priority
               ? b->streams->stream_priority(s->dev.index, s->impl)
               : 0;
}

em_stream *em_stream_new_priority(em_device dev, int priority)
{
    const em_backend *b = backend_of("em_stream_new", dev);
    if (!b) return NULL;
    em_stream *s = calloc(1, sizeof *s);
    if (!s) {
        em_error(EM_ERR_OOM, "em_stream_new: out of memory");
        return NULL;
    }
    s->dev = dev;
    s->owned = true;
    if (b->streams && !(s->impl = b->streams->stream_new(dev.index, priority))) {
        free(s);
        return NULL;
    }
    return s;
}

void em_stream_free(em_stream *s)
{
    if (!s || !s->owned) return;
    const em_backend *b = em_backend_get(s->dev.backend);
    if (tl_cur[s->dev.backend][s->dev.index] == s) tl_cur[s->dev.backend][s->dev.index] = NULL;
    if (b && b->streams) b->streams->stream_free(s->dev.index, s->impl);
    free(s);
}

em_status em_stream_use(em_device dev, em_stream *s)
{
    const em_backend *b = backend_of("em_stream_use", dev);
    if (!b) return em_last_status();
    if (s && !em_device_equal(s->dev, dev))
        return em_error(EM_ERR_DEVICE,
                        "em_stream_use: the stream belongs to device %d:%d, not "
                        "%d:%d",
                        s->dev.backend, s->dev.index, dev.backend, dev.index);
    if (b->streams) {
        em_status st = b->streams->stream_use(dev.index, s ? s->impl : NULL);
        if (st != EM_OK) return st;
    }
    tl_cur[dev.backend][dev.index] = s && s->owned ? s : NULL;
    return EM_OK;
}

em_stream *em_stream_current(em_device dev)
{
    const em_backend *b = backend_of("em_stream_current", dev);
    if (!b) return NULL;
    em_stream *cur = tl_cur[dev.backend][dev.index];
    if (cur) return cur;
    em_stream *d = &tl_default[dev.backend][dev.index];
    d->dev = dev;
    d->owned = false;
    d->impl = NULL;
    if (b->streams && !(d->impl = b->streams->stream_current(dev.index))) return NULL;
    return d;
}

em_status em_stream_sync(em_stream *s)
{
    if (!s) return em_error(EM_ERR_INVALID_ARG, "em_stream_sync: argument `s` is NULL");
    const em_backend *b = em_backend_get(s->dev.backend);
    return b && b->streams ? b->streams->stream_sync(s->dev.index, s->impl) : EM_OK;
}

em_event *em_event_new(em_device dev)
{
    const em_backend *b = backend_of("em_event_new", dev);
    if (!b) return NULL;
    em_event *e = calloc(1, sizeof *e);
    if (!e) {
        em_error(EM_ERR_OOM, "em_event_new: out of memory");
        return NULL;
    }
    e->dev = dev;
    e->host_ns = -1;
    if (b->streams && !(e->impl = b->streams->event_new(dev.index))) {
        free(e);
        return NULL;
    }
    return e;
}

void em_event_free(em_event *e)
{
    if (!e) return;
    const em_backend *b = em_backend_get(e->dev.backend);
    if (b && b->streams) b->streams->event_free(e->dev.index, e->impl);
    free(e);
}

em_status em_event_record(em_event *e, em_stream *s)
{
    if (!e) return em_error(EM_ERR_INVALID_ARG, "em_event_record: argument `e` is NULL");
    if (s && !em_device_equal(s->dev, e->dev))
        return em_error(EM_ERR_DEVICE,
                        "em_event_record: the event belongs to device %d:%d, the stream to %d:%d",
                        e->dev.backend, e->dev.index, s->dev.backend, s->dev.index);
    const em_backend *b = em_backend_get(e->dev.backend);
    e->host_ns = core_mono_ns();
    return b && b->streams ? b->streams->event_record(e->dev.index, e->impl, s ? s->impl : NULL)
                           : EM_OK;
}

em_status em_stream_wait(em_stream *s, em_event *e)
{
    if (!e) return em_error(EM_ERR_INVALID_ARG, "em_stream_wait: argument `e` is NULL");
    const em_backend *eb = em_backend_get(e->dev.backend);
    if (!eb || !eb->streams) return EM_OK; /* e's work was done when it was recorded */
    em_device sd = s ? s->dev : e->dev;
    if (sd.backend != e->dev.backend) /* a device without streams: the host waits */
        return eb->streams->event_sync(e->dev.index, e->impl);
    return eb->streams->event_wait(sd.index, s ? s->impl : NULL, e->impl);
}

em_status em_event_sync(em_event *e)
{
    if (!e) return em_error(EM_ERR_INVALID_ARG, "em_event_sync: argument `e` is NULL");
    const em_backend *b = em_backend_get(e->dev.backend);
    return b && b->streams ? b->streams->event_sync(e->dev.index, e->impl) : EM_OK;
}

double em_event_elapsed_ms(const em_event *start, const em_event *end)
{
    if (!start || !end) {
        em_error(EM_ERR_INVALID_ARG, "em_event_elapsed_ms: an event is NULL");
        return NAN;
    }
    if (!em_device_equal(start->dev, end->dev)) {
        em_error(EM_ERR_DEVICE, "em_event_elapsed_ms: the events belong to different devices");
        return NAN;
    }
    if (start->host_ns < 0 || end->host_ns < 0) {
        em_error(EM_ERR_INVALID_ARG, "em_event_elapsed_ms: an event was never recorded");
        return NAN;
    }
    const em_backend *b = em_backend_get(start->dev.backend);
    if (!b || !b->streams) return (double)(end->host_ns - start->host_ns) / 1e6;
    double ms = NAN;
    if (b->streams->event_elapsed(start->dev.index, start->impl, end->impl, &ms) != EM_OK)
        return NAN;
    return ms;
}

/* ---- graphs ------------------------------------------------------------------------------- */

struct em_graph {
    em_device dev;
    void *impl;
};

/* dev's graph functions, or NULL with an error naming fn. */
static const em_stream_ops *graph_ops(const char *fn, em_device dev)
{
    const em_backend *b = backend_of(fn, dev);
    if (!b) return NULL;
    if (!b->streams || !b->streams->graph_begin) {
        char s[32];
        em_error(EM_ERR_UNSUPPORTED,
                 "%s: %s has no graphs (its ops run when they are called; graphs need a GPU)", fn,
                 em_device_str(dev, s, sizeof s));
        return NULL;
    }
    return b->streams;
}

em_status em_graph_capture_begin(em_device dev)
{
    const em_stream_ops *ops = graph_ops("em_graph_capture_begin", dev);
    return ops ? ops->graph_begin(dev.index) : em_last_status();
}

em_graph *em_graph_capture_end(em_device dev)
{
    const em_stream_ops *ops = graph_ops("em_graph_capture_end", dev);
    if (!ops) return NULL;
    void *impl = ops->graph_end(dev.index);
    if (!impl) return NULL;
    em_graph *g = calloc(1, sizeof *g);
    if (!g) {
        ops->graph_free(dev.index, impl);
        em_error(EM_ERR_OOM, "em_graph_capture_end: out of memory");
        return NULL;
    }
    g->dev = dev;
    g->impl = impl;
    return g;
}

em_status em_graph_replay(em_graph *g)
{
    if (!g) return em_error(EM_ERR_INVALID_ARG, "em_graph_replay: argument `g` is NULL");
    return em_backend_get(g->dev.backend)->streams->graph_launch(g->dev.index, g->impl);
}

int64_t em_graph_memory_bytes(const em_graph *g)
{
    if (!g) return 0;
    return em_backend_get(g->dev.backend)->streams->graph_bytes(g->dev.index, g->impl);
}

void em_graph_free(em_graph *g)
{
    if (!g) return;
    em_backend_get(g->dev.backend)->streams->graph_free(g->dev.index, g->impl);
    free(g);
}

/* dev's backend's stream functions when it has graphs and dev names one of its devices. */
static const em_stream_ops *graph_ops_quiet(em_device dev)
{
    const em_backend *b = dev.backend >= 0 ? em_backend_get(dev.backend) : NULL;
    return b && b->streams && b->streams->graph_capturing && dev.index >= 0 ? b->streams : NULL;
}

bool em_graph_capturing(em_device dev)
{
    const em_stream_ops *ops = graph_ops_quiet(dev);
    return ops && ops->graph_capturing(dev.index);
}

em_status em__graph_param(em_device dev, size_t bytes, em_graph_fill fill, void (*drop)(void *ctx),
                          void *ctx, void **dptr)
{
    *dptr = NULL;
    const em_stream_ops *ops = graph_ops_quiet(dev);
    return ops && ops->graph_param ? ops->graph_param(dev.index, bytes, fill, drop, ctx, dptr)
                                   : EM_OK;
}

em_status em__graph_refuse(em_device dev, em_status st)
{
    const em_stream_ops *ops = graph_ops_quiet(dev);
    return ops && ops->graph_refuse ? ops->graph_refuse(dev.index, st) : st;
}
