/* The backend interface and registry. A backend is a table of functions registered at start-up;
 * the tensor layer reaches devices only through it, and a backend sees op records only as views
 * (ir_op, src/ir/ir.h): never the tensor layer's handles. */
#ifndef EMBER_BACKEND_H
#define EMBER_BACKEND_H

#include "../core/core_impl.h"
#include "../ir/ir.h"
#include "../ir/update.h"

/* Streams and events of a backend whose work runs asynchronously (em_stream_*, em_event_* of the
 * public API). Streams and events are the backend's own handles; a NULL stream means the calling
 * thread's current stream on the device. */
typedef struct em_stream_ops {
    void *(*stream_new)(int device, int priority); /* NULL on failure (error recorded) */
    /* Waits for the stream's work, then destroys it. */
    void (*stream_free)(int device, void *s);
    /* Makes s the calling thread's current stream on device; NULL: back to its default. */
    em_status (*stream_use)(int device, void *s);
    void *(*stream_current)(int device);         /* the calling thread's current stream */
    int (*stream_priority)(int device, void *s); /* the priority s got */
    em_status (*stream_sync)(int device, void *s);
    void *(*event_new)(int device); /* with timing; NULL on failure */
    void (*event_free)(int device, void *e);
    em_status (*event_record)(int device, void *e, void *s);
    em_status (*event_wait)(int device, void *s, void *e); /* s waits for e, no host wait */
    em_status (*event_sync)(int device, void *e);
    em_status (*event_elapsed)(int device, void *start, void *end, double *ms);
    /* Optional (NULL: no graphs). Capture of the calling thread's current stream on device;
     * graph_end returns the replayable graph (NULL with the error recorded; the capture is over
     * either way); graph_launch replays it on the calling thread's current stream; graph_free
     * waits for its replays and frees it; graph_bytes is the device memory it holds. */
    em_status (*graph_begin)(int device);
    void *(*graph_end)(int device);
    em_status (*graph_launch)(int device, void *g);
    void (*graph_free)(int device, void *g);
    int64_t (*graph_bytes)(int device, void *g);
    /* Whether the calling thread captures on device. */
    bool (*graph_capturing)(int device);
    /* em__graph_param below, on one of the backend's devices. */
    em_status (*graph_param)(int device, size_t bytes, em_graph_fill fill, void (*drop)(void *ctx),
                             void *ctx, void **dptr);
    em_status (*graph_refuse)(int device, em_status st); /* em__graph_refuse */
} em_stream_ops;

typedef struct em_backend {
    const char *name; /* "cpu", "cuda" */
    int (*device_count)(void);
    /* Device memory; NULL on failure (the backend records the error). */
    void *(*alloc)(int device, size_t nbytes);
    void (*free)(int device, void *p);
    em_status (*copy_from_host)(int device, void *dst, const void *src, size_t nbytes);
    em_status (*copy_to_host)(int device, void *dst, const void *src, size_t nbytes);
    em_status (*copy_within)(int device, void *dst, const void *src, size_t nbytes);
    /* Whether it runs op (a view of a record: src/ir/ir.h). */
    bool (*supports)(const ir_op *op);
    /* Runs op; outputs are allocated on this backend. */
    em_status (*exec)(const ir_op *op);
    em_status (*sync)(int device);
    /* Optional (NULL: the optimizers update a host copy of the parameter and copy it back). */
    em_status (*update)(int device, const em_update *u);
    /* Optional: streams and events (NULL: work is done when a call returns, and the stream and
     * event functions do nothing but time on the host). */
    const em_stream_ops *streams;
    /* Optional: a copy between two devices of this backend; EM_ERR_UNSUPPORTED with nothing
     * recorded when they cannot reach each other (em_to_device then stages through the host). */
    em_status (*copy_peer)(int dst_device, void *dst, int src_device, const void *src,
                           size_t nbytes);
    /* What em_device_get_props, em_device_get_mem_stats, em_device_empty_cache and
     * em_device_reset_peak report and do (the device exists when they are called). */
    void (*props)(int device, em_device_props *out);
    void (*mem_stats)(int device, em_device_mem_stats *out);
    int64_t (*empty_cache)(int device);
    void (*reset_peak)(int device);
    em_status (*set_memory_limit)(int device, int64_t bytes); /* optional */
    /* Storage inside an em_device_persistent_begin scope: exactly sized, outside the cache, given
     * back when freed; NULL on failure. The tensor layer frees it with free_persistent (nbytes as
     * allocated) when the backend has one, else with free. */
    void *(*alloc_persistent)(int device, size_t nbytes);
    void (*free_persistent)(int device, void *p, size_t nbytes);
    /* Optional: page-locked host memory for em_pin_memory (NULL with the error recorded), its
     * release, and the wait for the DMAs reading the block that holds p. */
    void *(*host_alloc)(size_t nbytes);
    void (*host_free)(void *p);
    void (*host_wait)(const void *p);
} em_backend;

/* A value that changes from replay to replay of the graph the calling thread captures on dev (an
 * optimizer's step-dependent coefficients): while capturing, *dptr is `bytes` (at most 4000) of
 * device memory the graph keeps, which its kernels read and which every replay fills before the
 * graph runs with what fill(ctx, dst) writes (in the order the pieces were made); ctx then belongs
 * to the graph (drop(ctx) when it is freed, or at once on failure, which voids the capture). Not
 * capturing (or a device without graphs): *dptr = NULL, EM_OK, ctx untouched. */
em_status em__graph_param(em_device dev, size_t bytes, em_graph_fill fill, void (*drop)(void *ctx),
                          void *ctx, void **dptr);
/* Voids the calling thread's capture on dev (if any) for a refusal whose error st the caller
 * recorded; returns st. */
em_status em__graph_refuse(em_device dev, em_status st);

#define EM_MAX_BACKENDS 8
/* Devices per backend that the per-thread tables (streams, persistent scopes) reach. */
#define EM_MAX_THREAD_DEVICES 16

/* Adds a backend; returns its index or -1 when full. The CPU is registered first (index 0). */
int em_backend_register(const em_backend *b);
const em_backend *em_backend_get(int index);
/* Index of the backend with this name, or -1. */
int em_backend_find(const char *name);
/* Registers the built-in backends once (called by the tensor layer on first use). */
void em_backends_init(void);
/* The backend of dev when dev exists, else NULL with EM_ERR_DEVICE naming fn. */
const em_backend *em_backend_of(const char *fn, em_device dev);
/* Whether the calling thread is inside an em_device_persistent_begin scope for dev. */
bool em_backend_persistent(em_device dev);
/* em_device_persistent_begin / _end for the library's own use: nothing is recorded; enter is
 * false (and leave must not follow) when dev does not exist. */
bool em_backend_persistent_enter(em_device dev);
void em_backend_persistent_leave(em_device dev);

/* The CPU backend's table. */
extern const em_backend cpu_backend;

#endif
