/* The CUDA backend's private interface: the driver and NVRTC loaded with dlopen, one primary
 * context per device, a caching device-memory pool, and the NVRTC-compiled kernel module. */
#ifndef EMBER_CUDA_H
#define EMBER_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../backend.h"

/* ---- the few driver and NVRTC types Ember needs (no CUDA headers at build time) ----------- */

typedef int CUresult; /* CUDA_SUCCESS = 0 */
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef unsigned long long CUdeviceptr;

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
    /* optional (NULL when the driver lacks it): tensor maps for the Hopper bulk tensor copies */
    CUresult (*cuTensorMapEncodeTiled)(void *map, int dtype, unsigned rank, void *addr,
                                       const uint64_t *dims, const uint64_t *strides,
                                       const unsigned *box, const unsigned *estrides,
                                       int interleave, int swizzle, int l2promotion, int oobfill);
} cuda_driver;

extern cuda_driver cuda_drv;

typedef struct cuda_device_info {
    CUdevice dev;
    CUcontext ctx;
    int cc_major, cc_minor;
    int sm_count; /* streaming multiprocessors */
    char name[128];
} cuda_device_info;

/* Loads libcuda, runs cuInit and finds the devices, once; true when at least one device is
 * usable. Never records an error: without CUDA the backend is simply absent. */
bool cuda_backend_probe(void);
int cuda_device_count(void);
const cuda_device_info *cuda_device(int device);
/* Makes device's context current on this thread; records an error naming `what` on failure. */
em_status cuda_enter(int device, const char *what);
/* Records "<what>: <call> failed on cuda:<device>: <NAME> (<description>)" and returns code. */
em_status cuda_fail(em_status code, CUresult r, const char *what, const char *call, int device);

/* ---- the caching memory pool ----------------------------------------------------------------- */

typedef struct em_cuda_pool_stats {
    int64_t in_use_bytes; /* bytes in blocks handed out (rounded sizes) */
    int64_t cached_bytes; /* bytes in freed blocks kept for reuse */
    int64_t peak_in_use_bytes;
    int64_t device_allocs; /* cuMemAlloc calls that succeeded */
    int64_t reuses;        /* allocations served from the cache */
    int64_t frees;         /* blocks returned to the pool */
} em_cuda_pool_stats;

void *cuda_pool_alloc(int device, size_t nbytes);
void cuda_pool_free(int device, void *p);
/* Statistics of device's pool; false when device does not exist. */
bool cuda_pool_stats(int device, em_cuda_pool_stats *out);
/* Returns every cached block of device to the driver. */
void cuda_pool_empty_cache(int device);

/* ---- kernels ----------------------------------------------------------------------------------
 * Every file of src/backend/cuda/kernels/ is embedded at build time (NULL-terminated lists of
 * sources and of their names without extension). Files whose names share the stem before the
 * first '_' ("matmul", "matmul_wgmma") form one unit; each unit, after the base source of
 * cuda_kernels.c, is its own NVRTC program and module. */
extern const char *const cuda_embedded_sources[];
extern const char *const cuda_embedded_names[];

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
/* Launches f over n elements (grid-stride) with the given parameters. */
em_status cuda_launch(int device, CUfunction f, int64_t n, void **params, const char *what);

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

/* A MATMUL record's geometry as the kernels read it (matches `struct mmidx` of the base source):
 * batch shape and the operands' batch strides (0 where broadcast), M K N, the row/column
 * strides of A [M, K] and B [K, N], the number of batch entries. */
typedef struct cuda_mm_geom {
    int64_t bshape[8], ast[8], bst[8];
    int R;
    int64_t M, K, N, sam, sak, sbk, sbn, nbatch;
} cuda_mm_geom;
/* Fills g from op (ops_linalg.c: i0/i1 mark 1-D operands, i2..i4 = M K N, i5 = batch rank R,
 * i6.. = batch shape). */
void cuda_mm_geometry(const em_op *op, cuda_mm_geom *g);

/* Runs a float MATMUL record (batch dims, strides and layouts as the op IR allows) on device's
 * kernels; for other host code of the backend that multiplies views of its own buffers. */
em_status cuda_matmul(const em_op *op, int dev, const char *what);

/* The optimizers' fused update in device memory (cuda_optim.c; em_backend.update). */
em_status cuda_update(int device, const em_update *u);

/* The backend table (registered by backend.c when cuda_backend_probe() succeeds). */
extern const em_backend cuda_backend;

#endif
