/* Internal declarations shared by the core layer and the layers above it. */
#ifndef EMBER_CORE_IMPL_H
#define EMBER_CORE_IMPL_H

#include <ember/core.h>

#if defined(__GNUC__) || defined(__clang__)
#define EM_THREAD_LOCAL __thread
#define EM_LIKELY(x)    __builtin_expect(!!(x), 1)
#define EM_UNLIKELY(x)  __builtin_expect(!!(x), 0)
#else
#define EM_THREAD_LOCAL _Thread_local
#define EM_LIKELY(x)    (x)
#define EM_UNLIKELY(x)  (x)
#endif

/* Runs the one-time initialisation (configuration, logging levels, thread count). */
void core_init(void);

/* The number of hardware threads (cores) available to the process. */
int core_hw_threads(void);

/* em_parallel_for's split, but the threads claim chunks from one queue in index order, so
 * chunks start in order: for plans that put their longest chunks first and end on short ones to
 * balance the threads (the GEMM's row tasks), not for streaming memory (em_parallel_for). */
void core_parallel_for_in_order(int64_t n, int64_t grain, em_range_fn fn, void *ctx);

/* Nanoseconds of the monotonic clock (for timeouts, profiling and timing; not wall time). */
int64_t core_mono_ns(void);

/* Hooks for the backends' caching allocators (alloc.c; used by src/backend/cpu/cpu_cache.c).
 * em__mem_should_fail consumes one em_mem_fail_at count (recording EM_ERR_OOM when it fires);
 * em__mem_alloc_cached allocates a block with room for cap bytes (plus guards) and hands out
 * nbytes of it (huge: the block starts on a 2 MiB boundary, spans whole 2 MiB pages and is
 * advised to the kernel for transparent huge pages; its data then starts 64 bytes in);
 * em__mem_release_to_cache checks and un-counts a live block and returns its raw pointer and
 * capacity (NULL: not cacheable, already freed); em__mem_reuse_cached re-arms a raw cached block
 * for nbytes <= its capacity; em__mem_free_cached returns a raw block. */
bool em__mem_should_fail(size_t nbytes);
#define EM__HUGE_PAGE ((size_t)2 << 20)
/* A block of *nbytes rounded up to whole 2 MiB pages (the new size in *nbytes), 2 MiB aligned and
 * advised for transparent huge pages; released with free(). NULL when out of memory. Used by the
 * CPU tensor cache (through em__mem_alloc_cached) and the GEMM's packing buffers. */
void *core_alloc_huge(size_t *nbytes);
void *em__mem_alloc_cached(size_t nbytes, size_t cap, bool huge);
void *em__mem_release_to_cache(void *p, size_t *cap);
void *em__mem_reuse_cached(void *raw, size_t nbytes);
void em__mem_free_cached(void *raw);

/* Overflow-checked size arithmetic: false when the result would not fit. */
static inline bool core_mul_ok(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

#endif
