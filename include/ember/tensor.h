/* Ember tensors: the handle, devices, scopes, views, data in and out, and every op.
 * Ownership: each function returning em_tensor * returns a new reference (or NULL with an error
 * recorded). Inside em_scope_begin/end new references are released at the end unless kept.
 * Threads: tensors are immutable values that any number of threads may read at once (reference
 * counts are atomic); a thread uses a tensor only while it holds a reference of its own. Scopes,
 * errors and grad mode are per thread. */
#ifndef EMBER_TENSOR_H
#define EMBER_TENSOR_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define EM_MAX_RANK 8

typedef struct em_tensor em_tensor;

/* ---- shapes and axis lists --------------------------------------------------------------- */

typedef struct em_shape {
    int rank;
    int64_t dims[EM_MAX_RANK];
} em_shape;

/* A list of dimensions (negative counts from the end). n == 0 means "all dimensions" where an
 * op reduces. */
typedef struct em_axes {
    int n;
    int d[EM_MAX_RANK];
} em_axes;

#ifndef __cplusplus
#define EM__NARGS(...)                             EM__NARGS_(__VA_ARGS__, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define EM__NARGS_(a, b, c, d, e, f, g, h, n, ...) n
/* EM_SHAPE(2, 3) is the shape [2, 3]; EM_SCALAR is the rank-0 shape. */
#define EM_SHAPE(...) ((em_shape){.rank = EM__NARGS(__VA_ARGS__), .dims = {__VA_ARGS__}})
#define EM_SCALAR     ((em_shape){.rank = 0})
/* EM_AXES(0, -1) lists dims 0 and -1; EM_ALL means every dimension. */
#define EM_AXES(...) ((em_axes){.n = EM__NARGS(__VA_ARGS__), .d = {__VA_ARGS__}})
#define EM_ALL       ((em_axes){.n = 0})
#else
/* C++ has no compound literals: the same macros build their values with these functions, which
 * convert each argument as the C initialisers do. */
extern "C++" {
template <class... T> constexpr em_shape em_shape_of(T... dims)
{
    static_assert(sizeof...(T) <= EM_MAX_RANK, "EM_SHAPE: more than EM_MAX_RANK dims");
    return em_shape{static_cast<int>(sizeof...(T)), {static_cast<int64_t>(dims)...}};
}
template <class... T> constexpr em_axes em_axes_of(T... d)
{
    static_assert(sizeof...(T) <= EM_MAX_RANK, "EM_AXES: more than EM_MAX_RANK dims");
    return em_axes{static_cast<int>(sizeof...(T)), {static_cast<int>(d)...}};
}
}
#define EM_SHAPE(...) em_shape_of(__VA_ARGS__)
#define EM_SCALAR     (em_shape{})
#define EM_AXES(...)  em_axes_of(__VA_ARGS__)
#define EM_ALL        (em_axes{})
#endif

/* Elements of s; -1 when the rank is outside [0, EM_MAX_RANK], a dim is negative, or the dims
 * (zeros counted as ones, since they still make the strides) multiply past INT64_MAX. */
EM_API int64_t em_shape_numel(em_shape s);
EM_API bool em_shape_equal(em_shape a, em_shape b);
/* Writes "[2, 3]" into buf (always NUL-terminated); returns buf. */
EM_API char *em_shape_str(em_shape s, char *buf, size_t cap);

/* ---- devices ----------------------------------------------------------------------------- */

typedef struct em_device {
    int16_t backend; /* index in the backend registry; 0 is the CPU */
    int16_t index;   /* device number within the backend */
} em_device;

#ifndef __cplusplus
#define EM_CPU ((em_device){0, 0})
/* No device: what em_device_parse and em_device_default return when the device named is not
 * available. Every tensor or module made on it fails, so a program stops at its first use. */
#define EM_DEVICE_NONE ((em_device){-1, -1})
#else
#define EM_CPU         (em_device{0, 0})
#define EM_DEVICE_NONE (em_device{-1, -1})
#endif

/* Parses "cpu", "cuda:0", "cuda" (= cuda:0). A name with no device behind it (unknown, or no
 * GPU) gives EM_ERR_DEVICE and EM_DEVICE_NONE. */
EM_API em_device em_device_parse(const char *name);
/* EMBER_DEVICE, then ember.toml's `device`, then "cpu". A configured device that is not
 * available gives EM_ERR_DEVICE naming the setting ("em_device_default: EMBER_DEVICE=cuda:0: ...")
 * and EM_DEVICE_NONE. */
EM_API em_device em_device_default(void);
/* Writes "cpu" or "cuda:0" into buf; returns buf. */
EM_API char *em_device_str(em_device d, char *buf, size_t cap);
EM_API bool em_device_equal(em_device a, em_device b);
/* Name of the device's backend ("cpu"). */
EM_API const char *em_device_backend_name(em_device d);
/* Waits until all work queued on the device is done, on every stream of every thread. */
EM_API em_status em_device_sync(em_device d);

/* Number of devices of a backend: "cpu" 1, "cuda" the GPUs found (0 without a driver or GPU);
 * -1 with EM_ERR_DEVICE for a name Ember does not know. */
EM_API int em_device_count(const char *backend);

typedef struct em_device_props {
    char name[128];       /* "NVIDIA H200", the CPU's model name */
    int64_t total_memory; /* bytes: the GPU's memory, the host's physical memory */
    int processors;       /* multiprocessors of a GPU; hardware threads of the CPU */
    int compute_major;    /* CUDA compute capability (9.0 on Hopper); 0.0 on the CPU */
    int compute_minor;
} em_device_props;

/* What the device is; EM_ERR_DEVICE (out zeroed) when it does not exist. */
EM_API em_status em_device_get_props(em_device d, em_device_props *out);

/* A device's memory as its allocator sees it. On the CPU the figures are em_mem_get_stats's
 * (everything allocated through em_alloc: tensor storage, handles, work buffers); on a GPU
 * they are the device pool's (tensor storage and the kernels' work buffers, in its rounded
 * sizes). */
typedef struct em_device_mem_stats {
    int64_t in_use_bytes;      /* held now */
    int64_t peak_in_use_bytes; /* highest in_use_bytes since start or em_device_reset_peak */
    int64_t cached_bytes;      /* freed blocks kept for reuse (em_device_empty_cache frees them) */
    int64_t persistent_bytes;  /* part of in_use_bytes in persistent allocations */
    int64_t allocs;            /* blocks taken from the system or the driver */
    int64_t reuses;            /* allocations served from the cache */
    int64_t free_bytes;        /* what the system or the driver reports free now (-1: unknown) */
    int64_t total_bytes;       /* the device's memory (-1: unknown) */
    int64_t limit_bytes;       /* em_device_set_memory_limit's cap (0: none) */
} em_device_mem_stats;

/* Fills *out; EM_ERR_DEVICE (out zeroed) when the device does not exist. */
EM_API em_status em_device_get_mem_stats(em_device d, em_device_mem_stats *out);
/* Returns the device's cached free blocks to the system or the driver (a GPU is synchronised
 * first); returns the bytes released, -1 with EM_ERR_DEVICE when the device does not exist. */
EM_API int64_t em_device_empty_cache(em_device d);
/* Caps what the device's pool holds (in use plus cached) at bytes (0: no cap; the config key
 * cuda_memory_limit_mb sets it for every GPU): an allocation that would pass it gives the cache
 * back first, then fails with EM_ERR_OOM, as running out of the device's memory would. For
 * sharing a GPU between processes, or testing a program's behaviour near a smaller GPU's memory.
 * EM_ERR_UNSUPPORTED on the CPU (cpu_cache_mb caps its cache). */
EM_API em_status em_device_set_memory_limit(em_device d, int64_t bytes);
/* Starts a new peak: peak_in_use_bytes becomes in_use_bytes (on the CPU, em_mem_reset_peak). */
EM_API em_status em_device_reset_peak(em_device d);
/* Tensor storage the calling thread allocates on d between begin and the matching end is
 * persistent, as weights are: sized exactly instead of rounded to the cache's size classes,
 * never taken from the cache, and given back to the system or the driver when freed instead of
 * cached, so long-lived tensors neither waste a class's slack nor hold blocks that short-lived
 * ones churn through. Scopes nest; end without begin is EM_ERR_STATE. The library allocates
 * module parameters and buffers (moved, cast, loaded, or registered on a GPU) and optimizer
 * state this way. */
EM_API em_status em_device_persistent_begin(em_device d);
EM_API em_status em_device_persistent_end(em_device d);

/* Compiles the CUDA kernels for a GPU architecture ("sm_90a" for Hopper with its wgmma kernels,
 * "sm_80", ...) with NVRTC into the kernel cache directory dir (NULL: the config key cache_dir,
 * else ~/.cache/ember), so a machine with that GPU and the same NVRTC version loads them instead
 * of compiling on first use. Needs NVRTC, not a GPU. Units whose file is already there are kept;
 * *compiled (may be NULL) gets the number compiled. EM_ERR_UNSUPPORTED without NVRTC. */
EM_API em_status em_cuda_build_cache(const char *arch, const char *dir, int *compiled);

/* Streams: queues of device work. Work on one stream runs in order; work on two streams may
 * overlap. Each host thread queues its ops on its own default stream per device unless
 * em_stream_use picked another, and a read back to the host waits for the calling thread's
 * current stream only: a tensor made on one stream (or thread) and used on another needs an event
 * (em_event_record, em_stream_wait) or a sync first, unless the thread that made it has exited
 * (its streams are waited for then). On the CPU, whose ops are done when they return, streams
 * and events do nothing (events still time, on the host clock). */
typedef struct em_stream em_stream;
typedef struct em_event em_event;

/* A new stream on dev; NULL on error. */
EM_API em_stream *em_stream_new(em_device dev);
/* The same with a scheduling priority: lower numbers run first when both streams have work
 * ready, as CUDA's (0 is the default; an H100 or H200 has 0 to -5). Clamped into the device's
 * range; devices without priorities (the CPU) ignore it. */
EM_API em_stream *em_stream_new_priority(em_device dev, int priority);
/* The priority s got (0 where the device has none; NULL: 0). */
EM_API int em_stream_priority(const em_stream *s);
/* Waits for s's work, then frees it (the calling thread goes back to its default stream if s
 * was current; NULL and the handles of em_stream_current are ignored). */
EM_API void em_stream_free(em_stream *s);
/* The calling thread's ops on dev go to s from now on (NULL: back to its default stream). */
EM_API em_status em_stream_use(em_device dev, em_stream *s);
/* The calling thread's current stream on dev (owned by the library; valid while the thread runs
 * and, for one from em_stream_new, until it is freed); NULL on error. */
EM_API em_stream *em_stream_current(em_device dev);
/* Waits on the host until the work queued on s is done. */
EM_API em_status em_stream_sync(em_stream *s);

/* A new event on dev (a marker in a stream's work); NULL on error. */
EM_API em_event *em_event_new(em_device dev);
EM_API void em_event_free(em_event *e);
/* Marks the work queued so far on s (NULL: the calling thread's current stream on e's device). */
EM_API em_status em_event_record(em_event *e, em_stream *s);
/* Later work on s (NULL: the calling thread's current stream on e's device) waits for e's work,
 * without the host waiting (a stream of a device without streams: the host waits). */
EM_API em_status em_stream_wait(em_stream *s, em_event *e);
/* Waits on the host until e's work is done. */
EM_API em_status em_event_sync(em_event *e);
/* Milliseconds between two recorded, completed events of one device; NaN on error. */
EM_API double em_event_elapsed_ms(const em_event *start, const em_event *end);

/* Graphs: the device work of a sequence of calls recorded once and replayed with one launch,
 * which removes the per-op launch cost (CUDA graphs; a GPU only: the CPU runs ops when called).
 *
 *     em_graph_capture_begin(dev);      the calling thread's ops on dev are recorded, not run
 *     y = model(x) ...                  x: a tensor made before; y: made while capturing
 *     em_graph *g = em_graph_capture_end(dev);
 *     em_copy_into(x, next_batch);      new input into the same storage
 *     em_graph_replay(g);               y now holds the result for next_batch
 *
 * A replay redoes the recorded work on the same memory: tensors made before the capture and read
 * by it must stay alive (write new values into them with em_copy_into); tensors made during the
 * capture hold the results of the last replay (nothing before the first) in memory the graph
 * keeps until em_graph_free. Only the recorded device work is replayed, with the values the
 * calls had then (scalars, shapes, the kernels chosen): run everything once before
 * capturing (kernels compile and tune on first use, which a capture cannot do). Random ops
 * (em_rand*, em_randn*, em_bernoulli*, em_randint, em_dropout) draw anew on every replay: the
 * numbers the captured calls would draw if run eagerly from the generator as it is at the replay
 * (em_seed and em_rng_set_state between replays count), and the replay moves the generator on
 * by as much as the capture drew. em_optim_step can be captured too (a whole training step):
 * each replay recomputes the updates' coefficients from the optimizer's learning rate and step
 * counts and advances the counts (the capture itself counts no step; take one eager step first,
 * which makes the optimizer's state; the optimizer must outlive the graph). A capture fails with
 * a clear error on what cannot be recorded: copies between host and device (em_to_data,
 * em_item, em_to_device from the CPU), index checks that read a flag back (gather, embedding,
 * index_select), reseeding or setting back the generator between random ops of the capture, an
 * optimizer state made inside it, ops that fall back to the CPU. (em_cross_entropy and em_nll_loss
 * with class indices are capturable: captured, they pick the class by a mask, and a target out
 * of range gives a NaN loss instead of the eager error.) Such a refusal (or a call the driver
 * forbids during a capture, such as a device sync) voids the capture:
 * em_graph_capture_end then reports it and returns NULL. Other threads' device-wide syncs during
 * a capture void it too (docs/cuda.md, Graphs). */
typedef struct em_graph em_graph;

/* Starts recording the calling thread's work on dev (its current stream); EM_ERR_UNSUPPORTED on
 * a device without graphs, EM_ERR_INVALID_ARG when this thread is capturing already. */
EM_API em_status em_graph_capture_begin(em_device dev);
/* Ends the capture and returns the graph (NULL with the error recorded when the capture was
 * voided, when a call of this thread failed during it (an error still pending: its work would
 * be missing from the graph), or when this thread is not capturing on dev; the capture is over
 * either way). */
EM_API em_graph *em_graph_capture_end(em_device dev);
/* Runs the recorded work again on the calling thread's current stream of the graph's device
 * (queued: a read of its results waits as for any op). */
EM_API em_status em_graph_replay(em_graph *g);
/* Bytes of device memory the graph holds (its tensors' storage, live or freed). */
EM_API int64_t em_graph_memory_bytes(const em_graph *g);
/* Waits for its replays and frees it and its memory (tensors of the capture still alive keep
 * theirs). NULL is ignored. */
EM_API void em_graph_free(em_graph *g);
/* Whether the calling thread is capturing a graph on dev (false on devices without graphs). */
EM_API bool em_graph_capturing(em_device dev);

/* ---- handle, ownership and scopes -------------------------------------------------------- */

/* Adds a reference owned by the caller, never by a scope (returns t) / drops one reference,
 * the scope-owned ones first (frees the handle at zero; NULL is ignored). */
EM_API em_tensor *em_retain(em_tensor *t);
EM_API void em_release(em_tensor *t);
/* Opens a scope: tensors created until the matching em_scope_end are released then. */
EM_API void em_scope_begin(void);
/* Closes the innermost scope; returns EM_ERR_STATE when there is none. */
EM_API em_status em_scope_end(void);
/* Takes t out of the innermost scope so it survives em_scope_end; it moves to the enclosing
 * scope if there is one, else the caller owns it. Returns t. */
EM_API em_tensor *em_keep(em_tensor *t);
/* Number of open scopes on this thread. */
EM_API int em_scope_depth(void);
/* Live tensor handles in this process (for leak tests). */
EM_API int64_t em_live_tensors(void);

/* ---- metadata ---------------------------------------------------------------------------- */

EM_API em_dtype em_tensor_dtype(const em_tensor *t);
EM_API em_shape em_tensor_shape(const em_tensor *t);
EM_API int em_tensor_rank(const em_tensor *t);
/* Size of dimension d (negative counts from the end); -1 with an error when out of range. */
EM_API int64_t em_tensor_dim(const em_tensor *t, int d);
EM_API int64_t em_tensor_numel(const em_tensor *t);
EM_API em_device em_tensor_device(const em_tensor *t);
/* Element strides (not bytes) and the element offset into the storage. */
EM_API int64_t em_tensor_stride(const em_tensor *t, int d);
EM_API int64_t em_tensor_offset(const em_tensor *t);
EM_API bool em_tensor_is_contiguous(const em_tensor *t);
/* True when a and b share storage. */
EM_API bool em_tensor_shares_storage(const em_tensor *a, const em_tensor *b);
/* Host pointer to element 0 for a CPU tensor (NULL otherwise). Do not write through it unless
 * the tensor is the only view of its storage. */
EM_API void *em_tensor_data(const em_tensor *t);

/* ---- data in and out --------------------------------------------------------------------- */

/* New tensor of `shape` and `dtype` on `dev`, filled from `data` holding numel values of
 * `src_dtype` (converted). */
EM_API em_tensor *em_from_data(const void *data, em_dtype src_dtype, em_shape shape, em_dtype dtype,
                               em_device dev);
/* Shorthands for f32/f64/i64 host arrays kept in their dtype on the CPU. */
EM_API em_tensor *em_from_f32(const float *data, em_shape shape);
EM_API em_tensor *em_from_f64(const double *data, em_shape shape);
EM_API em_tensor *em_from_i64(const int64_t *data, em_shape shape);
/* Wraps caller memory without a copy (CPU only); `deleter(data, user)` runs when the last view
 * goes (may be NULL). */
EM_API em_tensor *em_from_blob(void *data, em_dtype dtype, em_shape shape,
                               void (*deleter)(void *, void *), void *user);
/* Copies t's values, in row-major order, into `out` as `dtype`; `count` is the capacity in
 * elements and must be at least numel. */
EM_API em_status em_to_data(const em_tensor *t, void *out, em_dtype dtype, int64_t count);
/* The value of a one-element tensor. */
EM_API double em_item_f64(const em_tensor *t);
EM_API int64_t em_item_i64(const em_tensor *t);
/* Element at a multi-index (rank entries; negative counts from the end). */
EM_API double em_get_f64(const em_tensor *t, const int64_t *index);
/* A contiguous copy of t (from any device) in page-locked ("pinned") host memory: a CPU tensor
 * whose copies to and from a GPU are one DMA each, without the staging buffers' host copy, and
 * whose copy to a GPU (em_to_device) returns before the DMA has run, so the host goes on while it
 * moves. em_tensor_data and the tensor's release wait for such a DMA (Ember's ops never write
 * into an existing tensor); a pointer em_tensor_data gave before the copy started must not be
 * written through until em_tensor_data is called again (or the device synchronised). Blocks are
 * reused by size. Without a GPU driver (or when the driver refuses page-locked memory) an
 * ordinary CPU copy, with a warning logged once. */
EM_API em_tensor *em_pin_memory(const em_tensor *t);
/* Whether t's memory is pinned (em_pin_memory). */
EM_API bool em_tensor_is_pinned(const em_tensor *t);
/* The same values on another device (a new reference to t when already there). */
EM_API em_tensor *em_to_device(em_tensor *t, em_device dev);
/* Writes src's values into dst's memory, in place: same shape, src from any device and in any
 * dtype (converted to dst's); dst must be contiguous. Every tensor sharing dst's storage sees
 * the new values, a graph's replays too (em_graph_capture_begin); autograd does not record it
 * (tensors saved for a backward pass that share dst's storage see the new values). */
EM_API em_status em_copy_into(em_tensor *dst, const em_tensor *src);

/* ---- printing ---------------------------------------------------------------------------- */

typedef struct em_print_options {
    int64_t threshold;  /* summarise above this many elements (0: 1000) */
    int64_t edge_items; /* items kept at each edge when summarising (0: 3) */
    int precision;      /* digits after the point; 0 or less: shortest round-trip form */
} em_print_options;

/* Formats t in Burn's layout into a new string (free with em_free). Floats take one notation
 * per tensor, as PyTorch picks it: fixed-point ([14.0, 20.0, 0.5]) unless the printed values
 * span more than three decades, pass 1e8 or (when not all integral) go below 1e-4, then
 * scientific for every element ([1.5e-07, 2.0e+00]); NaN, inf and -inf as such. */
EM_API char *em_tensor_format(const em_tensor *t, em_print_options opt);
/* Prints t to stdout; NULL prints "Tensor(NULL)" and records no error (a pending one stays). */
EM_API void em_print(const em_tensor *t);

/* ---- creation ---------------------------------------------------------------------------- */

/* Every function that makes a tensor refuses, before allocating anything, a shape whose element
 * count or byte strides do not fit in int64_t (EM_ERR_SHAPE) and a tensor larger than its
 * device's memory or the config key max_tensor_mb (EM_ERR_OOM), naming the size. */

EM_API em_tensor *em_empty(em_shape shape, em_dtype dtype, em_device dev);
/* em_empty's checks alone, allocating nothing, for code that should fail before its work
 * starts: false with EM_ERR_SHAPE or EM_ERR_OOM naming `who` when a tensor of this shape and
 * dtype cannot be made on dev (a negative dim, sizes past 2^63, more than the device's memory or
 * max_tensor_mb). */
EM_API bool em_tensor_check_size(const char *who, em_shape shape, em_dtype dtype, em_device dev);
EM_API em_tensor *em_zeros(em_shape shape, em_dtype dtype, em_device dev);
EM_API em_tensor *em_ones(em_shape shape, em_dtype dtype, em_device dev);
EM_API em_tensor *em_full(em_shape shape, double value, em_dtype dtype, em_device dev);
EM_API em_tensor *em_scalar(double value, em_dtype dtype, em_device dev);
/* [start, end) with step (end exclusive; step may be negative, never zero). */
EM_API em_tensor *em_arange(double start, double end, double step, em_dtype dtype, em_device dev);
/* `steps` evenly spaced values from start to end inclusive. */
EM_API em_tensor *em_linspace(double start, double end, int64_t steps, em_dtype dtype,
                              em_device dev);
/* n x m matrix with ones on the diagonal (m < 0: square). */
EM_API em_tensor *em_eye(int64_t n, int64_t m, em_dtype dtype, em_device dev);
/* Random tensors from the global generator (em_seed). */
EM_API em_tensor *em_rand(em_shape shape, em_dtype dtype, em_device dev);  /* uniform [0, 1) */
EM_API em_tensor *em_randn(em_shape shape, em_dtype dtype, em_device dev); /* standard normal */
EM_API em_tensor *em_rand_uniform(em_shape shape, double low, double high, em_dtype dtype,
                                  em_device dev);
EM_API em_tensor *em_rand_normal(em_shape shape, double mean, double std, em_dtype dtype,
                                 em_device dev);
/* Elementwise Bernoulli draws with probabilities p (result has p's dtype). */
EM_API em_tensor *em_bernoulli(const em_tensor *p);
/* Same shape, every element 1 with probability p. */
EM_API em_tensor *em_bernoulli_p(em_shape shape, double p, em_dtype dtype, em_device dev);
/* Integers uniform in [low, high). */
EM_API em_tensor *em_randint(int64_t low, int64_t high, em_shape shape, em_dtype dtype,
                             em_device dev);
EM_API em_tensor *em_empty_like(const em_tensor *t);
EM_API em_tensor *em_zeros_like(const em_tensor *t);
EM_API em_tensor *em_ones_like(const em_tensor *t);
EM_API em_tensor *em_full_like(const em_tensor *t, double value);
EM_API em_tensor *em_rand_like(const em_tensor *t);
EM_API em_tensor *em_randn_like(const em_tensor *t);
/* Integer indices -> one-hot along a new last dim of size num_classes (-1: max + 1), as i64. */
EM_API em_tensor *em_one_hot(const em_tensor *indices, int64_t num_classes);
/* Lower / upper triangle of the last two dims; diagonal k as in PyTorch. */
EM_API em_tensor *em_tril(const em_tensor *t, int64_t k);
EM_API em_tensor *em_triu(const em_tensor *t, int64_t k);
/* n 1-D tensors -> n tensors of shape [len0, len1, ...] ("ij" indexing), written to out[]. */
EM_API em_status em_meshgrid(em_tensor *const *tensors, int n, em_tensor **out);

/* ---- views (share storage) --------------------------------------------------------------- */

/* A view when the strides allow, else a copy; one dim may be -1. */
EM_API em_tensor *em_reshape(const em_tensor *t, em_shape shape);
/* Always a view; fails when the strides do not allow it. */
EM_API em_tensor *em_view(const em_tensor *t, em_shape shape);
EM_API em_tensor *em_flatten(const em_tensor *t, int start_dim, int end_dim);
EM_API em_tensor *em_permute(const em_tensor *t, em_axes order);
EM_API em_tensor *em_transpose(const em_tensor *t, int d0, int d1);
/* Elements start, start+step, ... before end along dim (Python slice rules, negatives wrap,
 * out-of-range bounds clamp; step > 0). */
EM_API em_tensor *em_slice(const em_tensor *t, int dim, int64_t start, int64_t end, int64_t step);
EM_API em_tensor *em_narrow(const em_tensor *t, int dim, int64_t start, int64_t length);
/* Index `index` of dim, removing the dim. */
EM_API em_tensor *em_select(const em_tensor *t, int dim, int64_t index);
/* Broadcast view to `shape` (size-1 dims stretch; -1 keeps a dim; new leading dims allowed). */
EM_API em_tensor *em_expand(const em_tensor *t, em_shape shape);
/* Removes size-1 dims (all with EM_ALL). */
EM_API em_tensor *em_squeeze(const em_tensor *t, em_axes dims);
EM_API em_tensor *em_unsqueeze(const em_tensor *t, int dim);
/* Reverses the listed dims (a view with negative strides). */
EM_API em_tensor *em_flip(const em_tensor *t, em_axes dims);
/* Windows of `size` every `step` along dim, as a new last dim (torch.Tensor.unfold). */
EM_API em_tensor *em_unfold(const em_tensor *t, int dim, int64_t size, int64_t step);
/* Row-major copy (a new reference to t when already contiguous). */
EM_API em_tensor *em_contiguous(const em_tensor *t);
/* Always a fresh copy. */
EM_API em_tensor *em_clone(const em_tensor *t);

/* ---- casts ------------------------------------------------------------------------------- */

/* Values converted to dtype (float -> int truncates toward zero; -> bool is != 0). */
EM_API em_tensor *em_cast(const em_tensor *t, em_dtype dtype);

/* ---- unary and binary elementwise ops without parameters ---------------------------------
 * em_neg, em_exp, em_sigmoid ..., em_add, em_eq, em_shift_left ...: one function per kind of the
 * op table, generated from it (docs/ops.md lists them with their dtypes and notes). */

#ifndef EMBER_OPGEN /* the generator of this header reads the op table before it exists */
#include <ember/ops_gen.h>
#endif

/* ---- activations ------------------------------------------------------------------------- */

EM_API em_tensor *em_leaky_relu(const em_tensor *x, double negative_slope);
EM_API em_tensor *em_elu(const em_tensor *x, double alpha);
EM_API em_tensor *em_celu(const em_tensor *x, double alpha);
EM_API em_tensor *em_softplus(const em_tensor *x, double beta, double threshold);
EM_API em_tensor *em_hardtanh(const em_tensor *x, double min_val, double max_val);

/* ---- binary scalar forms ------------------------------------------------------------------ */

/* Scalar forms: the scalar takes the tensor's dtype (a float scalar with an integer tensor
 * promotes to f32 for add/sub/mul/div/pow like PyTorch). */
EM_API em_tensor *em_add_scalar(const em_tensor *a, double s);
EM_API em_tensor *em_sub_scalar(const em_tensor *a, double s);
EM_API em_tensor *em_rsub_scalar(const em_tensor *a, double s); /* s - a */
EM_API em_tensor *em_mul_scalar(const em_tensor *a, double s);
EM_API em_tensor *em_div_scalar(const em_tensor *a, double s);
EM_API em_tensor *em_rdiv_scalar(const em_tensor *a, double s); /* s / a */
EM_API em_tensor *em_pow_scalar(const em_tensor *a, double s);
EM_API em_tensor *em_rpow_scalar(const em_tensor *a, double s); /* s ** a */
EM_API em_tensor *em_remainder_scalar(const em_tensor *a, double s);
EM_API em_tensor *em_fmod_scalar(const em_tensor *a, double s);
EM_API em_tensor *em_minimum_scalar(const em_tensor *a, double s);
EM_API em_tensor *em_maximum_scalar(const em_tensor *a, double s);
EM_API em_tensor *em_eq_scalar(const em_tensor *a, double s);
EM_API em_tensor *em_ne_scalar(const em_tensor *a, double s);
EM_API em_tensor *em_lt_scalar(const em_tensor *a, double s);
EM_API em_tensor *em_le_scalar(const em_tensor *a, double s);
EM_API em_tensor *em_gt_scalar(const em_tensor *a, double s);
EM_API em_tensor *em_ge_scalar(const em_tensor *a, double s);

/* cond ? a : b with three-way broadcasting; cond is bool. */
EM_API em_tensor *em_where(const em_tensor *cond, const em_tensor *a, const em_tensor *b);
/* x with value where mask (bool, broadcast to x) is true. */
EM_API em_tensor *em_masked_fill(const em_tensor *x, const em_tensor *mask, double value);
/* Clamp into [lo, hi]; NaN bounds mean "no bound". Tensor bounds broadcast. */
EM_API em_tensor *em_clamp(const em_tensor *x, double lo, double hi);
EM_API em_tensor *em_clamp_tensor(const em_tensor *x, const em_tensor *lo, const em_tensor *hi);
/* a + w * (b - a); w a scalar or a tensor. */
EM_API em_tensor *em_lerp(const em_tensor *a, const em_tensor *b, double w);
EM_API em_tensor *em_lerp_tensor(const em_tensor *a, const em_tensor *b, const em_tensor *w);

/* ---- reductions (dims: EM_ALL or a list; keepdim keeps size-1 dims) ----------------------- */

/* sum/prod of integers and bool accumulate in i64 like PyTorch. */
EM_API em_tensor *em_sum(const em_tensor *x, em_axes dims, bool keepdim);
EM_API em_tensor *em_mean(const em_tensor *x, em_axes dims, bool keepdim);
EM_API em_tensor *em_prod(const em_tensor *x, em_axes dims, bool keepdim);
/* max/min over the dims (NaN propagates); argmax/argmin over one dim (EM_FLAT: flattened). */
EM_API em_tensor *em_max(const em_tensor *x, em_axes dims, bool keepdim);
EM_API em_tensor *em_min(const em_tensor *x, em_axes dims, bool keepdim);
/* max/min with indices along one dim: values to *values, i64 indices to *indices. */
EM_API em_status em_max_dim(const em_tensor *x, int dim, bool keepdim, em_tensor **values,
                            em_tensor **indices);
EM_API em_status em_min_dim(const em_tensor *x, int dim, bool keepdim, em_tensor **values,
                            em_tensor **indices);
#define EM_FLAT (-1000) /* argmax/argmin over the flattened tensor */
EM_API em_tensor *em_argmax(const em_tensor *x, int dim, bool keepdim);
EM_API em_tensor *em_argmin(const em_tensor *x, int dim, bool keepdim);
/* Variance / standard deviation with Bessel-style correction (1 = unbiased). */
EM_API em_tensor *em_var(const em_tensor *x, em_axes dims, int64_t correction, bool keepdim);
EM_API em_tensor *em_std(const em_tensor *x, em_axes dims, int64_t correction, bool keepdim);
/* p-norm: p = 1, 2, any positive p, INFINITY (max |x|), -INFINITY (min |x|), 0 (count). */
EM_API em_tensor *em_norm(const em_tensor *x, double p, em_axes dims, bool keepdim);
EM_API em_tensor *em_logsumexp(const em_tensor *x, em_axes dims, bool keepdim);
EM_API em_tensor *em_any(const em_tensor *x, em_axes dims, bool keepdim); /* -> bool */
EM_API em_tensor *em_all(const em_tensor *x, em_axes dims, bool keepdim);
EM_API em_tensor *em_count_nonzero(const em_tensor *x, em_axes dims, bool keepdim); /* -> i64 */

/* Scans along one dim. */
EM_API em_tensor *em_cumsum(const em_tensor *x, int dim);
EM_API em_tensor *em_cumprod(const em_tensor *x, int dim);
/* Running max/min; i64 positions to *indices when not NULL. */
EM_API em_status em_cummax(const em_tensor *x, int dim, em_tensor **values, em_tensor **indices);
EM_API em_status em_cummin(const em_tensor *x, int dim, em_tensor **values, em_tensor **indices);
/* Numerically stable softmax / log-softmax along dim. */
EM_API em_tensor *em_softmax(const em_tensor *x, int dim);
EM_API em_tensor *em_log_softmax(const em_tensor *x, int dim);

/* ---- linear algebra ---------------------------------------------------------------------- */

/* torch.matmul semantics: 1-D operands promoted and squeezed, batch dims broadcast.
 * f16/bf16 accumulate in f32; integers in i64. */
EM_API em_tensor *em_matmul(const em_tensor *a, const em_tensor *b);
EM_API em_tensor *em_dot(const em_tensor *a, const em_tensor *b);    /* 1-D . 1-D -> scalar */
EM_API em_tensor *em_outer(const em_tensor *a, const em_tensor *b);  /* [n], [m] -> [n, m] */
EM_API em_tensor *em_matvec(const em_tensor *a, const em_tensor *x); /* [n, m], [m] -> [n] */

/* The activation applied by em_matmul_bias_act (PyTorch's definitions, as em_relu, em_gelu,
 * em_gelu_tanh and em_silu compute them). */
typedef enum em_act {
    EM_ACT_NONE = 0,
    EM_ACT_RELU = 1,
    EM_ACT_GELU = 2,      /* erf form */
    EM_ACT_GELU_TANH = 3, /* tanh approximation */
    EM_ACT_SILU = 4,
} em_act;
/* act(em_matmul(a, b) + bias) in one op: bias (NULL: none) is 1-D of length N (b's last dim; 1
 * when b is 1-D), added to every row and batch. a, b and bias share one float dtype and device;
 * f16/bf16 add the bias and apply act in f32 before their one rounding. */
EM_API em_tensor *em_matmul_bias_act(const em_tensor *a, const em_tensor *b, const em_tensor *bias,
                                     em_act act);

/* ---- indexing ---------------------------------------------------------------------------- */

typedef enum em_reduce_mode {
    EM_SCATTER_ASSIGN = 0,
    EM_SCATTER_ADD = 1,
    EM_SCATTER_MUL = 2,
    EM_SCATTER_MIN = 3, /* include_self semantics: the old value takes part */
    EM_SCATTER_MAX = 4,
} em_reduce_mode;

/* out[i][j] = x[index[i][j]][j] (dim 0), index i64, same rank as x. */
EM_API em_tensor *em_gather(const em_tensor *x, int dim, const em_tensor *index);
/* Copy of x with src values placed (or combined) at index positions along dim. */
EM_API em_tensor *em_scatter(const em_tensor *x, int dim, const em_tensor *index,
                             const em_tensor *src, em_reduce_mode mode);
EM_API em_tensor *em_index_select(const em_tensor *x, int dim, const em_tensor *index);
/* Copy of x with alpha * src rows added at index positions along dim. */
EM_API em_tensor *em_index_add(const em_tensor *x, int dim, const em_tensor *index,
                               const em_tensor *src, double alpha);
/* 1-D tensor of the elements where mask (broadcast to x) is true. */
EM_API em_tensor *em_masked_select(const em_tensor *x, const em_tensor *mask);
/* [n_nonzero, rank] i64 coordinates of non-zero elements, row-major order. */
EM_API em_tensor *em_nonzero(const em_tensor *x);
/* Copy of x with the region x[starts:ends:steps] (per dim, like em_slice) replaced by src. */
EM_API em_tensor *em_slice_assign(const em_tensor *x, const int64_t *starts, const int64_t *ends,
                                  const int64_t *steps, const em_tensor *src);
/* weight [num, dim] rows picked by integer indices of any shape -> [..., dim]. */
EM_API em_tensor *em_embedding(const em_tensor *weight, const em_tensor *indices);

/* ---- combine and split ------------------------------------------------------------------- */

EM_API em_tensor *em_cat(em_tensor *const *tensors, int n, int dim);
EM_API em_tensor *em_stack(em_tensor *const *tensors, int n, int dim);
/* Views of size `size` along dim (the last may be smaller); count to *n_out; out[] holds up
 * to `cap` tensors. */
EM_API em_status em_split(const em_tensor *t, int64_t size, int dim, em_tensor **out, int cap,
                          int *n_out);
EM_API em_status em_split_sizes(const em_tensor *t, const int64_t *sizes, int n, int dim,
                                em_tensor **out);
EM_API em_status em_chunk(const em_tensor *t, int chunks, int dim, em_tensor **out, int *n_out);
/* torch.Tensor.repeat: tile the whole tensor `repeats` times per dim. */
EM_API em_tensor *em_repeat(const em_tensor *t, em_shape repeats);
EM_API em_tensor *em_tile(const em_tensor *t, em_shape reps); /* numpy.tile rules */
/* Roll by shifts along dims (n pairs); n == 0 rolls the flattened tensor by shifts[0]. */
EM_API em_tensor *em_roll(const em_tensor *t, const int64_t *shifts, const int *dims, int n);

typedef enum em_pad_mode {
    EM_PAD_CONSTANT = 0,
    EM_PAD_REFLECT = 1,
    EM_PAD_REPLICATE = 2,
    EM_PAD_CIRCULAR = 3,
} em_pad_mode;
/* pads holds (before, after) pairs starting from the LAST dim, like torch.nn.functional.pad;
 * n_pairs pairs. Negative pads crop. */
EM_API em_tensor *em_pad(const em_tensor *t, const int64_t *pads, int n_pairs, em_pad_mode mode,
                         double value);

/* ---- ordering ---------------------------------------------------------------------------- */

/* Stable sort along dim; values and/or i64 indices (either pointer may be NULL). NaN sorts
 * as the largest value, like PyTorch. */
EM_API em_status em_sort(const em_tensor *x, int dim, bool descending, em_tensor **values,
                         em_tensor **indices);
EM_API em_tensor *em_argsort(const em_tensor *x, int dim, bool descending);
/* k largest (or smallest) along dim, sorted. */
EM_API em_status em_topk(const em_tensor *x, int64_t k, int dim, bool largest, em_tensor **values,
                         em_tensor **indices);
/* Lower median along dim (index of the median to *indices when not NULL); dim EM_FLAT: of all. */
EM_API em_status em_median(const em_tensor *x, int dim, bool keepdim, em_tensor **values,
                           em_tensor **indices);

/* ---- nn functional ----------------------------------------------------------------------- */

/* Convolution options; zero means default (stride 1, dilation 1, groups 1, no padding).
 * pad_lo/pad_hi are per spatial dim (asymmetric allowed); out_pad only for transposed. */
typedef struct em_conv_opts {
    int64_t stride[3];
    int64_t pad_lo[3];
    int64_t pad_hi[3];
    int64_t dilation[3];
    int64_t out_pad[3];
    int64_t groups;
} em_conv_opts;

/* x [N, C, L|H,W|D,H,W], w [Cout, C/groups, k...], bias [Cout] or NULL. */
EM_API em_tensor *em_conv1d(const em_tensor *x, const em_tensor *w, const em_tensor *bias,
                            em_conv_opts o);
EM_API em_tensor *em_conv2d(const em_tensor *x, const em_tensor *w, const em_tensor *bias,
                            em_conv_opts o);
EM_API em_tensor *em_conv3d(const em_tensor *x, const em_tensor *w, const em_tensor *bias,
                            em_conv_opts o);
/* Transposed: w [Cin, Cout/groups, k...]. */
EM_API em_tensor *em_conv_transpose1d(const em_tensor *x, const em_tensor *w, const em_tensor *bias,
                                      em_conv_opts o);
EM_API em_tensor *em_conv_transpose2d(const em_tensor *x, const em_tensor *w, const em_tensor *bias,
                                      em_conv_opts o);
EM_API em_tensor *em_conv_transpose3d(const em_tensor *x, const em_tensor *w, const em_tensor *bias,
                                      em_conv_opts o);

/* Pooling options; zero means default (stride = kernel, dilation 1, no padding, floor mode,
 * padding counted in averages as PyTorch's count_include_pad=True). Per spatial dim. */
typedef struct em_pool_opts {
    int64_t kernel[3];
    int64_t stride[3];
    int64_t pad[3]; /* at most half the kernel, as PyTorch */
    int64_t dilation[3];
    bool ceil_mode;
    bool exclude_pad; /* avg pool: divide by the valid elements only (count_include_pad=False) */
} em_pool_opts;

/* Max pooling; i64 argmax positions (flattened within each spatial plane, as PyTorch) to
 * *indices when indices is not NULL. Returns the values. */
EM_API em_tensor *em_max_pool1d(const em_tensor *x, em_pool_opts o, em_tensor **indices);
EM_API em_tensor *em_max_pool2d(const em_tensor *x, em_pool_opts o, em_tensor **indices);
EM_API em_tensor *em_max_pool3d(const em_tensor *x, em_pool_opts o, em_tensor **indices);
EM_API em_tensor *em_avg_pool1d(const em_tensor *x, em_pool_opts o);
EM_API em_tensor *em_avg_pool2d(const em_tensor *x, em_pool_opts o);
EM_API em_tensor *em_avg_pool3d(const em_tensor *x, em_pool_opts o);
EM_API em_tensor *em_adaptive_avg_pool1d(const em_tensor *x, int64_t out_l);
EM_API em_tensor *em_adaptive_avg_pool2d(const em_tensor *x, int64_t out_h, int64_t out_w);
EM_API em_tensor *em_adaptive_max_pool1d(const em_tensor *x, int64_t out_l, em_tensor **indices);
EM_API em_tensor *em_adaptive_max_pool2d(const em_tensor *x, int64_t out_h, int64_t out_w,
                                         em_tensor **indices);

typedef enum em_interp_mode {
    EM_INTERP_NEAREST = 0,
    EM_INTERP_BILINEAR = 1, /* linear for 1-D input */
    EM_INTERP_BICUBIC = 2,
} em_interp_mode;
/* x [N, C, L] or [N, C, H, W] resized to `size` (spatial dims only). */
EM_API em_tensor *em_interpolate(const em_tensor *x, em_shape size, em_interp_mode mode,
                                 bool align_corners);

/* im2col: x [N, C, H, W] -> [N, C*kh*kw, L]; fold is its adjoint back to [N, C, H, W]. */
EM_API em_tensor *em_im2col(const em_tensor *x, const int64_t kernel[2], const int64_t dilation[2],
                            const int64_t padding[2], const int64_t stride[2]);
EM_API em_tensor *em_col2im(const em_tensor *cols, const int64_t out_size[2],
                            const int64_t kernel[2], const int64_t dilation[2],
                            const int64_t padding[2], const int64_t stride[2]);
EM_API em_tensor *em_pixel_shuffle(const em_tensor *x, int64_t r);
EM_API em_tensor *em_pixel_unshuffle(const em_tensor *x, int64_t r);

/* Normalisations. layer_norm/rms_norm normalise the last `n_norm` dims; weight/bias may be
 * NULL. batch_norm uses the given statistics (inference form) over dim 1. */
EM_API em_tensor *em_layer_norm(const em_tensor *x, int n_norm, const em_tensor *weight,
                                const em_tensor *bias, double eps);
EM_API em_tensor *em_rms_norm(const em_tensor *x, int n_norm, const em_tensor *weight, double eps);
EM_API em_tensor *em_group_norm(const em_tensor *x, int64_t groups, const em_tensor *weight,
                                const em_tensor *bias, double eps);
EM_API em_tensor *em_batch_norm(const em_tensor *x, const em_tensor *mean, const em_tensor *var,
                                const em_tensor *weight, const em_tensor *bias, double eps);

/* Scaled dot-product attention. q [..., L, E], k [..., S, E], v [..., S, Ev]; mask NULL, bool
 * (true = attend) or additive float, broadcast to [..., L, S]; scale <= 0 means 1/sqrt(E). */
typedef struct em_sdpa_opts {
    bool causal;
    double scale;
} em_sdpa_opts;
EM_API em_tensor *em_sdpa(const em_tensor *q, const em_tensor *k, const em_tensor *v,
                          const em_tensor *mask, em_sdpa_opts o);

/* Inverted dropout with probability p when `train` (identity otherwise). */
EM_API em_tensor *em_dropout(const em_tensor *x, double p, bool train);

/* ---- signal ------------------------------------------------------------------------------ */

/* Real FFT along dim of length n (n <= 0: the dim's size; pads or crops): the output's last
 * dim is 2 (real, imaginary) and dim has n/2+1 bins. irfft is its inverse to length n. */
EM_API em_tensor *em_rfft(const em_tensor *x, int dim, int64_t n);
EM_API em_tensor *em_irfft(const em_tensor *x, int dim, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
