/* The CPU caching allocator. Tensor storage freed by the CPU backend goes to size-bucketed free
 * lists instead of back to the system, so the next allocation of a similar size reuses pages
 * that are already mapped and faulted in (large element-wise ops then run at memory speed
 * instead of page-faulting fresh mmap'd memory).
 *
 * Size classes: multiples of 64 bytes up to 1 KiB, then four classes per power of two (at most
 * 25% slack). A request is served only from its own class. The cache holds at most cpu_cache_mb
 * MiB (config key, env EMBER_CPU_CACHE_MB, default 1024; 0 disables caching); a block that does
 * not fit evicts cached blocks from the largest classes down, or is freed when larger than the
 * cap itself. The cap is read at the first allocation and again at every em_mem_trim.
 *
 * Blocks of HUGE_MIN bytes or more are 2 MiB aligned, span whole 2 MiB pages and are advised
 * for transparent huge pages (config key cpu_huge_pages, env EMBER_CPU_HUGE_PAGES, default on,
 * read with the cap): one page fault and one TLB entry per 2 MiB instead of 512, which the GEMM's
 * strided reads and stores into large matrices feel most (bench/RESULTS.md, evidence section).
 *
 * Accounting (alloc.c): a cached block is not in current_bytes/live_allocs but in cached_bytes;
 * em_mem_fail_at counts every allocation, hits included (checked first); guard bytes are checked
 * when a block is freed into the cache and re-armed when it is reused. One mutex guards the
 * lists; the statistics are atomics in alloc.c. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/core_impl.h"
#include "cpu_cache.h"

#define SMALL_STEP    64
#define SMALL_MAX     1024
#define SMALL_CLASSES (SMALL_MAX / SMALL_STEP) /* classes 0..15: 64 .. 1024 */
#define SUB           4                        /* classes per power of two above SMALL_MAX */
#define NCLASSES      (SMALL_CLASSES + SUB * 64)
#define HUGE_MIN      ((size_t)4 << 20) /* from here whole 2 MiB pages add at most a third */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *heads[NCLASSES]; /* raw blocks; the link lives in the first word of the user area */
static int64_t held;          /* bytes of capacity in the lists (under lock) */
static int64_t limit = -1;    /* bytes; -1 until read from the configuration */
static bool huge_on;          /* cpu_huge_pages, read with limit */

/* Class of a request and the capacity of that class. */
static int size_class(size_t n, size_t *cap)
{
    if (n <= SMALL_MAX) {
        size_t c = n ? (n + SMALL_STEP - 1) / SMALL_STEP : 1;
        *cap = c * SMALL_STEP;
        return (int)c - 1;
    }
    int e = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^e < n <= 2^(e+1) */
    size_t step = (size_t)1 << (e - 2);                        /* four steps per octave */
    size_t k = (n - ((size_t)1 << e) + step - 1) / step;       /* 1..4 */
    *cap = ((size_t)1 << e) + k * step;
    return SMALL_CLASSES + (e - 10) * SUB + (int)k - 1;
}

/* Capacity of class k (the inverse of size_class). */
static size_t class_cap(int k)
{
    if (k < SMALL_CLASSES) return (size_t)(k + 1) * SMALL_STEP;
    int j = k - SMALL_CLASSES, e = 10 + j / SUB;
    return ((size_t)1 << e) + (size_t)(j % SUB + 1) * ((size_t)1 << (e - 2));
}

static void **link_of(void *raw)
{
    return (void **)((unsigned char *)raw + 64);
}

static void read_limit(void)
{
    int64_t mb = core_cfg_int(CFG_CPU_CACHE_MB);
    limit = mb > 0 ? mb * 1024 * 1024 : 0;
    huge_on = core_cfg_bool(CFG_CPU_HUGE_PAGES);
}

void *cpu_cache_alloc(size_t nbytes)
{
    if (em__mem_should_fail(nbytes)) return NULL;
    size_t cap;
    int c = size_class(nbytes, &cap);
    void *raw = NULL;
    pthread_mutex_lock(&lock);
    if (limit < 0) read_limit();
    if (c < NCLASSES && heads[c]) {
        raw = heads[c];
        heads[c] = *link_of(raw);
        held -= (int64_t)cap;
    }
    bool huge = huge_on && cap >= HUGE_MIN;
    pthread_mutex_unlock(&lock);
    if (raw) return em__mem_reuse_cached(raw, nbytes);
    return em__mem_alloc_cached(nbytes, cap, huge);
}

void cpu_cache_free(void *p)
{
    size_t cap;
    void *raw = em__mem_release_to_cache(p, &cap);
    if (!raw) return;
    size_t cap2;
    int c = size_class(cap, &cap2);
    void *evict = NULL; /* chain of blocks to free outside the lock */
    bool keep = false;
    pthread_mutex_lock(&lock);
    if (limit < 0) read_limit();
    if ((int64_t)cap <= limit && cap2 == cap) {
        for (int k = NCLASSES - 1; k >= 0 && held + (int64_t)cap > limit; k--) {
            while (heads[k] && held + (int64_t)cap > limit) {
                void *b = heads[k];
                heads[k] = *link_of(b);
                held -= (int64_t)class_cap(k);
                *link_of(b) = evict;
                evict = b;
            }
        }
        *link_of(raw) = heads[c];
        heads[c] = raw;
        held += (int64_t)cap;
        keep = true;
    }
    pthread_mutex_unlock(&lock);
    if (!keep) em__mem_free_cached(raw);
    while (evict) {
        void *next = *link_of(evict);
        em__mem_free_cached(evict);
        evict = next;
    }
}

int64_t em_mem_trim(void)
{
    void *chain = NULL;
    int64_t freed;
    pthread_mutex_lock(&lock);
    for (int k = 0; k < NCLASSES; k++) {
        while (heads[k]) {
            void *b = heads[k];
            heads[k] = *link_of(b);
            *link_of(b) = chain;
            chain = b;
        }
    }
    freed = held;
    held = 0;
    read_limit();
    pthread_mutex_unlock(&lock);
    while (chain) {
        void *next = *link_of(chain);
        em__mem_free_cached(chain);
        chain = next;
    }
    return freed;
}
