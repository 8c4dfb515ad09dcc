/* The CUDA backend's private interface: the driver and NVRTC loaded with dlopen, one primary
 * context per device, streams and events, a stream-aware caching device-memory pool, host copies
 * through pinned staging buffers, peer copies, and the NVRTC-compiled kernel module. */
#ifndef EMBER_CUDA_H
#define EMBER_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../ir/decode.h"
#include "../../ir/elem.h"
#include "../backend.h"

/* Devices the backend's per-device tables reach (the same bound as the per-thread tables). */
#define CUDA_MAX_DEVICES EM_MAX_THREAD_DEVICES

/* ---- the few driver and NVRTC types Ember needs (no CUDA headers at build time) ----------- */

typedef int CUresult; /* CUDA_SUCCESS = 0 */
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef unsigned long long CUdeviceptr;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;

typedef struct cuda_driver {
    CUresult (*cuInit)(unsigned);
    CUresult (*cuDriverGetVersion)(int *);
    CUresult (*cuDeviceGetCount)(int *);
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuDeviceGetName)(char *, int, CUdevice);
    CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
    CUresult (*cuMemFree)(CUdeviceptr);
    CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*cuMemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*cuModuleLoadData)(CUmodule *, const void *);
    CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                               unsigned, unsigned, CUstream, void **, void **);
    CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
    CUresult (*cuGetErrorName)(CUresult, const char **);
    CUresult (*cuGetErrorString)(CUresult, const char **);
    /* streams, events and asynchronous copies */
    CUresult (*cuStreamCreate)(CUstream *, unsigned);
    CUresult (*cuStreamDestroy)(CUstream);
    CUresult (*cuStreamSynchronize)(CUstream);
    CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned);
    CUresult (*cuEventCreate)(CUevent *, unsigned);
    CUresult (*cuEventDestroy)(CUevent);
    CUresult (*cuEventRecord)(CUevent, CUstream);
    CUresult (*cuEventQuery)(CUevent);
    CUresult (*cuEventSynchronize)(CUevent);
    CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
    /* optional (NULL when the driver lacks them): timing, pinned memory, peer copies */
    CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*cuMemHostAlloc)(void **, size_t, unsigned);
    CUresult (*cuMemFreeHost)(void *);
    CUresult (*cuDeviceCanAccessPeer)(int *, CUdevice, CUdevice);
    CUresult (*cuCtxEnablePeerAccess)(CUcontext, unsigned);
    CUresult (*cuMemcpyPeerAsync)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);
    /* optional: the device's memory (total; free and total of the current context's device) */
    CUresult (*cuDeviceTotalMem)(size_t *, CUdevice);
    CUresult (*cuMemGetInfo)(size_t *, size_t *);
    /* optional: stream priorities */
    CUresult (*cuStreamCreateWithPriority)(CUstream *, unsigned, int);
    CUresult (*cuCtxGetStreamPriorityRange)(int *least, int *greatest);
    CUresult (*cuStreamGetPriority)(CUstream, int *);
    /* optional: graphs (stream capture) */
    CUresult (*cuStreamBeginCapture)(CUstream, int mode);
    CUresult (*cuStreamEndCapture)(CUstream, CUgraph *);
    CUresult (*cuThreadExchangeStreamCaptureMode)(int *mode);
    CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
    CUresult (*cuGraphExecDestroy)(CUgraphExec);
    CUresult (*cuGraphDestroy)(CUgraph);
    /* optional (NULL when the driver lacks it): tensor maps for the Hopper bulk tensor copies */
    CUresult (*cuTensorMapEncodeTiled)(void *map, int dtype, unsigned rank, void *addr,
                                       const uint64_t *dims, const uint64_t *strides,
                                       const unsigned *box, const unsigned *estrides,
                                       int interleave, int swizzle, int l2promotion, int oobfill);
    CUresult (*cuTensorMapEncodeIm2col)(void *map, int dtype, unsigned rank, void *addr,
                                        const uint64_t *dims, const uint64_t *strides,
                                        const int *lower, const int *upper, unsigned channels,
                                        unsigned pixels, const unsigned *estrides, int interleave,
                                        int swizzle, int l2promotion, int oobfill);
} cuda_driver;

extern cuda_driver cuda_drv;

typedef struct cuda_device_info {
    CUdevice dev;
    CUcontext ctx;
    int cc_major, cc_minor;
    int sm_count;      /* streaming multiprocessors */
    int64_t total_mem; /* bytes (0: the driver did not say) */
    char name[128];
} cuda_device_info;

/* Loads libcuda, runs cuInit and finds the devices, once; true when at least one device is
 * usable. Never records an error: without CUDA the backend is simply absent. */
bool cuda_backend_probe(void);
int cuda_device_count(void);
const cuda_device_info *cuda_device(int device);
/* Makes device's context current on this thread; records an error naming `what` on failure. */
em_status cuda_enter(int device, const char *what);
/* Forgets the failures since `before` (core_error_mark() taken earlier): for failures the
 * runtime handles itself, without losing a caller's pending error. */
static inline void cuda_forget_error(uint64_t before)
{
    core_error_forget(before);
}
/* Records "<what>: <call> failed on cuda:<device>: <NAME> (<description>)" and returns code. */
em_status cuda_fail(em_status code, CUresult r, const char *what, const char *call, int device);

/* ---- streams and events (cuda_stream.c) -------------------------------------------------------
 * Every host thread queues its work on its own stream per device (made on first use; when the
 * thread exits it is waited for and passed on to a later thread) unless em_stream_use chose
 * another. All streams are created blocking (flag 0): they order themselves after work on the
 * legacy NULL stream, so a stray synchronous driver call stays correct. */

/* The calling thread's current stream on device (its default stream, created on first use);
 * the legacy NULL stream, with a warning logged once, when no stream can be created. The
 * device's context must be current (cuda_enter). */
CUstream cuda_stream(int device);
/* The same without creating one: NULL when this thread has queued nothing on device. */
CUstream cuda_stream_peek(int device);
/* An event of device's context without timing, from a small cache (NULL with the error
 * recorded); give it back with cuda_event_put once no later call needs its recorded state. */
CUevent cuda_event_get(int device);
void cuda_event_put(int device, CUevent e);
/* Makes stream `waiter` wait for the work queued so far on stream `on` (both of device, or `on`
 * of another device `on_device`): an event recorded on `on` and waited for, no host wait. */
em_status cuda_stream_order(int device, CUstream waiter, int on_device, CUstream on,
                            const char *what);
/* The streams and events of the public API (em_stream_*, em_event_*). */
extern const em_stream_ops cuda_stream_ops;

/* ---- the caching memory pool ----------------------------------------------------------------- */

typedef struct em_cuda_pool_stats {
    int64_t in_use_bytes; /* bytes in blocks handed out (rounded sizes) */
    int64_t cached_bytes; /* bytes in freed blocks kept for reuse */
    int64_t peak_in_use_bytes;
    int64_t device_allocs;    /* cuMemAlloc calls that succeeded */
    int64_t reuses;           /* allocations served from the cache */
    int64_t frees;            /* blocks returned to the pool */
    int64_t stream_waits;     /* reuses whose new stream was made to wait for another stream */
    int64_t persistent_bytes; /* part of in_use_bytes in persistent blocks */
} em_cuda_pool_stats;

/* A block of at least nbytes for work on the calling thread's current stream. A cached block last
 * used on other streams is handed out with the current stream ordered after their work. */
void *cuda_pool_alloc(int device, size_t nbytes);
/* Returns p to the cache; work already queued on it (on the stream it was allocated for, or on
 * the freeing thread's current stream) is waited for by the next stream that takes it. */
void cuda_pool_free(int device, void *p);
/* Called when stream s of device is destroyed, after it was synchronised: blocks that remember s
 * forget it (its work is done). */
void cuda_pool_forget_stream(int device, CUstream s);
/* Statistics of device's pool; false when device does not exist. */
bool cuda_pool_stats(int device, em_cuda_pool_stats *out);
/* Returns every cached block of device to the driver (after synchronising the device); returns
 * the bytes released. */
int64_t cuda_pool_empty_cache(int device);
/* A persistent block (em_device_persistent_begin): nbytes rounded up to 512 only, never from the
 * cache; cuda_pool_free gives it back to the driver once the work queued on it is done. */
void *cuda_pool_alloc_persistent(int device, size_t nbytes);
/* The public device queries' answers for a CUDA device (the backend table's props, mem_stats and
 * reset_peak). */
void cuda_device_props(int device, em_device_props *out);
void cuda_device_mem_stats(int device, em_device_mem_stats *out);
void cuda_pool_reset_peak(int device);
em_status cuda_pool_set_limit(int device, int64_t bytes);

/* The pool's size classes: powers of two from 512 bytes to 1 MiB, then multiples of 2 MiB. */
size_t cuda_size_class(size_t n);

/* ---- graphs (cuda_graph.c) and their memory (cuda_runtime.c) ---------------------------------
 * While a thread captures a graph on a device, every block the pool hands it, and every block it
 * frees, belongs to the graph's pool: the graph's replays use those addresses, so they stay out
 * of the device's cache (freed ones are reused by the same capture only) until the graph is
 * freed. */
typedef struct cuda_gpool cuda_gpool;
cuda_gpool *cuda_gpool_new(int device); /* NULL with the error recorded */
/* A replay of the graph was queued on stream s. */
void cuda_gpool_launched(cuda_gpool *gp, CUstream s);
/* The stream of the last replay (NULL: none). */
CUstream cuda_gpool_last(cuda_gpool *gp);
int64_t cuda_gpool_bytes(cuda_gpool *gp);
/* The graph is gone (its replays done): its free blocks join the device's cache, its blocks still
 * held by tensors follow when they are freed. */
void cuda_gpool_close(cuda_gpool *gp);
/* The graph pool the calling thread captures into on device; NULL when it is not capturing. */
cuda_gpool *cuda_capture_pool(int device);
/* Puts the calling thread in relaxed capture mode around a call a capture does not record
 * (cuMemAlloc); restore with the returned mode (-1: nothing was changed). */
int cuda_capture_relax(void);
void cuda_capture_restore(int mode);
/* EM_OK when the calling thread is not capturing on device; else EM_ERR_INVALID_ARG saying that
 * `what` cannot be recorded: a read back to the host (to_host) or a copy from host memory. */
em_status cuda_capture_refuse(int device, const char *what, bool to_host);
/* Marks the calling thread's capture on device (if any) as refused, and returns st: for an op
 * that refuses itself with its own error (return cuda_capture_refused(dev, em_error(...))). */
em_status cuda_capture_refused(int device, em_status st);
/* A random op's Philox stream on device: outside a capture *slot = NULL and seed, *off stay as
 * the op recorded them. In a capture *slot is the graph's device pair {seed, first counter}, which
 * each replay fills (core_rng_take) before the graph runs, and *off becomes the op's counter
 * relative to the capture's first: a replay draws what the captured ops would draw if run
 * eagerly at that point of the generator. EM_ERR_INVALID_ARG (the capture voided) when the
 * generator was reseeded or set back during the capture. */
em_status cuda_capture_rng(int device, unsigned long long seed, unsigned long long *off,
                           void **slot, const char *what);
/* The backend's graph functions (em_stream_ops.graph_*). */
bool cuda_graph_capturing(int device);
em_status cuda_graph_param(int device, size_t bytes, em_graph_fill fill, void (*drop)(void *ctx),
                           void *ctx, void **dptr);
em_status cuda_graph_begin(int device);
void *cuda_graph_end(int device);
em_status cuda_graph_launch(int device, void *g);
void cuda_graph_free(int device, void *g);
int64_t cuda_graph_bytes(int device, void *g);

/* ---- pinned host memory (cuda_pinned.c) ----------------------------------------------------- */

typedef struct pin_block pin_block;
/* A page-locked host block of at least nbytes (cached blocks reused by size class); NULL with
 * the error recorded. */
void *cuda_host_alloc(size_t nbytes);
/* Gives p back (kept for reuse, or freed once the DMAs reading it are done). */
void cuda_host_free(void *p);
/* The live pinned block holding [p, p + n), or NULL. */
pin_block *cuda_host_find(const void *p, size_t n);
/* After a DMA reading b was queued on stream s of device: later writes into b wait for it. */
em_status cuda_host_note_read(pin_block *b, int device, CUstream s, const char *what);
/* Waits until no queued DMA reads the pinned block holding p (nothing when p is not pinned). */
void cuda_host_wait(const void *p);

/* ---- copies on the current stream (cuda_copy.c) -------------------------------------------------
 * Host copies go through pinned staging buffers in chunks of cuda_copy_chunk() bytes, several in
 * flight. To the device: each chunk is copied into a free staging buffer and its DMA queued, so
 * the function returns once src may be reused, before the data has landed (later work on the same
 * stream sees it). To the host: returns when dst holds the data (only the current stream is
 * waited for). Errors name `what`. */
em_status cuda_copy_from_host(int device, void *dst, const void *src, size_t n, const char *what);
em_status cuda_copy_to_host(int device, void *dst, const void *src, size_t n, const char *what);
em_status cuda_copy_d2d(int device, void *dst, const void *src, size_t n, const char *what);
/* count 32-bit words of dst = v. */
em_status cuda_memset32(int device, void *dst, unsigned v, size_t count, const char *what);
/* The staging chunk in bytes. */
size_t cuda_copy_chunk(void);
/* Device-to-device between two devices with peer access (enabled on first use): ordered after
 * the work queued so far on both devices' current streams, and before later work on either.
 * EM_ERR_UNSUPPORTED with nothing recorded when the two cannot reach each other (the caller then
 * stages through the host). */
em_status cuda_copy_peer(int dst_device, void *dst, int src_device, const void *src, size_t n);

/* ---- kernels ----------------------------------------------------------------------------------
 * Every file of src/backend/cuda/kernels/ is embedded at build time (NULL-terminated lists of
 * sources and of their file names). Each .cu file includes the .cuh headers it uses; .cu files
 * whose names share the stem before the first '_' ("matmul.cu", "matmul_wgmma.cu") form one unit,
 * an NVRTC program of an #include of each (in name order) and one module. */
extern const char *const cuda_embedded_sources[];
extern const char *const cuda_embedded_names[];
/* build/gen/cuda_ew_gen.cuh, which tools/opgen.c writes from the op table: the OP_* codes and the
 * elementwise kinds' scalar code (kernels/ew_scalar.cuh includes it) */
extern const char cuda_ew_gen_cuh[];

/* Compiles every unit with NVRTC for `arch` ("sm_90") without a device (in parallel), to check
 * that they build: EM_OK, EM_ERR_UNSUPPORTED when NVRTC cannot be loaded, else EM_ERR_DEVICE
 * with the unit's name and the compiler's log in the message. */
em_status cuda_compile_check(const char *arch);

/* ---- kernel launch
 * ------------------------------------------------------------------------------- */

/* Function `name` of device's kernel modules, building them on first use (each unit from the
 * disk cache or compiled by NVRTC, the missing ones in parallel); NULL with the error recorded.
 * Found functions are remembered by name. */
CUfunction cuda_kernel(int device, const char *name, const char *what);
/* How many times cuda_kernel has returned function `name` of device (0 before its first use):
 * the tests' check that a forced path really ran its kernel. */
uint64_t cuda_kernel_uses(int device, const char *name);
/* The launches below queue f on the calling thread's current stream of device. */
/* Launches f over n elements (grid-stride) with the given parameters. */
em_status cuda_launch(int device, CUfunction f, int64_t n, void **params, const char *what);
/* The multiplier and shift with which a kernel divides any u < 2^31 by d >= 1 as
 * (umulhi(u, *mul) + u) >> *shr (cuda_elementwise.c). */
void cuda_fast_div(uint64_t d, uint32_t *mul, int *shr);

/* Launches f with nblocks blocks of 256 threads (capped; the kernels loop over the rest). */
em_status cuda_launch_blocks(int device, CUfunction f, int64_t nblocks, void **params,
                             const char *what);

/* Launches f on an explicit grid and block shape. */
em_status cuda_launch_grid(int device, CUfunction f, const unsigned grid[3],
                           const unsigned block[3], void **params, const char *what);
/* The same with `smem` bytes of dynamic shared memory (the function's limit is raised first
 * when smem is above the default 48 KiB). */
em_status cuda_launch_grid_smem(int device, CUfunction f, const unsigned grid[3],
                                const unsigned block[3], unsigned smem, void **params,
                                const char *what);

typedef enum cuda_module_origin {
    CUDA_MODULE_NONE = 0,     /* not built yet */
    CUDA_MODULE_COMPILED = 1, /* compiled by NVRTC in this process */
    CUDA_MODULE_CACHED = 2,   /* loaded from the disk cache */
} cuda_module_origin;
/* COMPILED when any unit was compiled in this process, CACHED when all came from the cache. */
cuda_module_origin cuda_module_origin_of(int device);
/* The cache folder and name pattern of device's module files ("" when caching is off). */
const char *cuda_module_cache_path(int device);

/* A MATMUL record's geometry as the kernels read it (matches `struct mmidx` of kernels/matmul.cuh):
 * batch shape and the operands' batch strides (0 where broadcast), M K N, the row/column
 * strides of A [M, K] and B [K, N], the number of batch entries. */
/* MATMUL_BIAS_ACT's epilogue as the kernels take it (kernels/matmul.cuh, struct mmep): on = 0 for
 * a plain product; bias (NULL: none) in the output dtype with element stride bs, pre (NULL:
 * none) the contiguous pre-activation output, act an em_act code. */
typedef struct cuda_mm_epi {
    const void *bias;
    void *pre;
    int64_t bs;
    int on, act;
} cuda_mm_epi;

typedef struct cuda_mm_geom {
    int64_t bshape[8], ast[8], bst[8];
    int R;
    int64_t M, K, N, sam, sak, sbk, sbn, nbatch;
    cuda_mm_epi ep;
} cuda_mm_geom;
/* Fills g from op (ops_linalg.c: i0/i1 mark 1-D operands, i2..i4 = M K N, i5 = batch rank R,
 * i6.. = batch shape; for MATMUL_BIAS_ACT also g->ep from in[2], i14 and out[1]). */
void cuda_mm_geometry(const ir_op *op, cuda_mm_geom *g);

/* Runs a float MATMUL record (batch dims, strides and layouts as the op IR allows) on device's
 * kernels; for other host code of the backend that multiplies views of its own buffers. */
em_status cuda_matmul(const ir_op *op, int dev, const char *what);

/* The optimizers' fused update in device memory (cuda_optim.c; em_backend.update). */
em_status cuda_update(int device, const em_update *u);

/* The backend table (registered by backend.c when cuda_backend_probe() succeeds). */
extern const em_backend cuda_backend;

#endif
