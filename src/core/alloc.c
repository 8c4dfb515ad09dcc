/* The 64-byte-aligned allocator behind every tensor: statistics (current, peak, counts), an
 * allocation-failure switch for tests, and optional guard bytes that catch out-of-bounds writes
 * by kernels. Every block carries a 64-byte header so em_free knows its size. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core_impl.h"

#define ALIGN        64
#define GUARD        64
#define HEADER_MAGIC 0x454d42455242u /* "EMBERB" */
#define GUARD_BYTE   0xA5
#define CACHED_MAGIC 0x454d42434143u /* "EMBCAC": a block resting in a backend cache */

typedef struct block_header {
    uint64_t magic;
    size_t nbytes;
    size_t guard; /* guard bytes after the user block (and before it, in the header pad) */
    size_t cap;   /* cacheable blocks (em__mem_alloc_cached): usable bytes, room for guards after */
    struct block_header *prev, *next;
} block_header;

_Static_assert(sizeof(block_header) <= ALIGN, "header must fit in the alignment pad");

static _Atomic int64_t cur_bytes, peak_bytes, total_allocs, live_allocs;
static _Atomic int64_t fail_countdown;
static _Atomic int64_t cached_bytes, cached_blocks, cache_hits, cache_misses;
static atomic_bool guards_on;

/* Guarded blocks are linked so em_mem_check_guards can walk them. */
static atomic_flag list_lock = ATOMIC_FLAG_INIT;
static block_header *guarded_head;

static void list_lock_acquire(void)
{
    while (atomic_flag_test_and_set_explicit(&list_lock, memory_order_acquire)) {
    }
}

static void list_lock_release(void)
{
    atomic_flag_clear_explicit(&list_lock, memory_order_release);
}

static bool should_fail(void)
{
    int64_t n = atomic_load(&fail_countdown);
    while (n > 0) {
        if (atomic_compare_exchange_weak(&fail_countdown, &n, n - 1)) return n == 1;
    }
    return false;
}

static void note_alloc(size_t nbytes)
{
    int64_t now = atomic_fetch_add(&cur_bytes, (int64_t)nbytes) + (int64_t)nbytes;
    int64_t peak = atomic_load(&peak_bytes);
    while (now > peak && !atomic_compare_exchange_weak(&peak_bytes, &peak, now)) {
    }
    atomic_fetch_add(&total_allocs, 1);
    atomic_fetch_add(&live_allocs, 1);
}

static bool guard_intact(const block_header *h)
{
    const unsigned char *user = (const unsigned char *)h + ALIGN;
    const unsigned char *before = (const unsigned char *)(h + 1);
    size_t nbefore = ALIGN - sizeof(block_header);
    for (size_t i = 0; i < nbefore; i++)
        if (before[i] != GUARD_BYTE) return false;
    for (size_t i = 0; i < h->guard; i++)
        if (user[h->nbytes + i] != GUARD_BYTE) return false;
    return true;
}

void *em_alloc(size_t nbytes)
{
    if (should_fail()) {
        em_error(EM_ERR_OOM, "em_alloc: injected failure of a %zu-byte allocation", nbytes);
        return NULL;
    }
    bool guarded = atomic_load(&guards_on);
    size_t guard = guarded ? GUARD : 0;
    if (nbytes > (SIZE_MAX - 2 * ALIGN - guard)) {
        em_error(EM_ERR_OOM, "em_alloc: %zu bytes is too large", nbytes);
        return NULL;
    }
    size_t total = ALIGN + ((nbytes + guard + ALIGN - 1) / ALIGN) * ALIGN;
    block_header *h = aligned_alloc(ALIGN, total);
    if (!h) {
        em_error(EM_ERR_OOM, "em_alloc: out of memory allocating %zu bytes", nbytes);
        return NULL;
    }
    h->magic = HEADER_MAGIC;
    h->nbytes = nbytes;
    h->guard = guard;
    h->cap = 0;
    h->prev = h->next = NULL;
    unsigned char *user = (unsigned char *)h + ALIGN;
    if (guarded) {
        memset(h + 1, GUARD_BYTE, ALIGN - sizeof(block_header));
        memset(user + nbytes, GUARD_BYTE, guard);
        list_lock_acquire();
        h->next = guarded_head;
        if (guarded_head) guarded_head->prev = h;
        guarded_head = h;
        list_lock_release();
    }
    note_alloc(nbytes);
    return user;
}

/* ---- hooks for the backends' caching allocators (src/backend/cpu/cpu_cache.c) -------------- */

bool em__mem_should_fail(size_t nbytes)
{
    if (!should_fail()) return false;
    em_error(EM_ERR_OOM, "em_alloc: injected failure of a %zu-byte allocation", nbytes);
    return true;
}

/* Arms a block (fresh or reused) for nbytes <= h->cap: header, guards, statistics. */
static void *arm_block(block_header *h, size_t nbytes)
{
    bool guarded = atomic_load(&guards_on);
    h->magic = HEADER_MAGIC;
    h->nbytes = nbytes;
    h->guard = guarded ? GUARD : 0;
    h->prev = h->next = NULL;
    unsigned char *user = (unsigned char *)h + ALIGN;
    if (guarded) {
        memset(h + 1, GUARD_BYTE, ALIGN - sizeof(block_header));
        memset(user + nbytes, GUARD_BYTE, GUARD);
        list_lock_acquire();
        h->next = guarded_head;
        if (guarded_head) guarded_head->prev = h;
        guarded_head = h;
        list_lock_release();
    }
    note_alloc(nbytes);
    return user;
}

void *core_alloc_huge(size_t *nbytes)
{
    size_t n = (*nbytes + EM__HUGE_PAGE - 1) / EM__HUGE_PAGE * EM__HUGE_PAGE;
    void *p = aligned_alloc(EM__HUGE_PAGE, n);
#ifdef MADV_HUGEPAGE
    /* only advice: where the kernel has no huge page to give, the block keeps 4 KiB pages */
    if (p) (void)madvise(p, n, MADV_HUGEPAGE);
#endif
    if (p) *nbytes = n;
    return p;
}

void *em__mem_alloc_cached(size_t nbytes, size_t cap, bool huge)
{
    if (cap < nbytes || cap > (SIZE_MAX - 2 * ALIGN - GUARD - EM__HUGE_PAGE)) {
        em_error(EM_ERR_OOM, "em_alloc: %zu bytes is too large", nbytes);
        return NULL;
    }
    size_t total = ALIGN + ((cap + GUARD + ALIGN - 1) / ALIGN) * ALIGN;
    block_header *h = huge ? core_alloc_huge(&total) : aligned_alloc(ALIGN, total);
    if (!h) {
        em_error(EM_ERR_OOM, "em_alloc: out of memory allocating %zu bytes", nbytes);
        return NULL;
    }
    h->cap = cap;
    atomic_fetch_add(&cache_misses, 1);
    return arm_block(h, nbytes);
}

void *em__mem_reuse_cached(void *raw, size_t nbytes)
{
    block_header *h = raw;
    atomic_fetch_sub(&cached_bytes, (int64_t)h->cap);
    atomic_fetch_sub(&cached_blocks, 1);
    atomic_fetch_add(&cache_hits, 1);
    return arm_block(h, nbytes);
}

/* Ends a block's life as a live allocation: checks and unlinks its guards, updates the
 * statistics. Both em_free and the hand-over to the CPU cache go through here. */
static void release_live(block_header *h)
{
    if (h->guard) {
        if (!guard_intact(h)) {
            em_log_msg("core", EM_LOG_ERROR, "em_free: guard bytes around a %zu-byte block damaged",
                       h->nbytes);
            em_error(EM_ERR_INTERNAL, "em_free: guard bytes around a %zu-byte block damaged",
                     h->nbytes);
        }
        list_lock_acquire();
        if (h->prev)
            h->prev->next = h->next;
        else
            guarded_head = h->next;
        if (h->next) h->next->prev = h->prev;
        list_lock_release();
    }
    atomic_fetch_sub(&cur_bytes, (int64_t)h->nbytes);
    atomic_fetch_sub(&live_allocs, 1);
}

/* Checks guards and magic like em_free, takes the block out of the statistics, and returns its
 * raw pointer for a cache (with *cap set), or NULL when the block was not cacheable (then it has
 * been freed here) or not ours. */
void *em__mem_release_to_cache(void *p, size_t *cap)
{
    *cap = 0;
    if (!p) return NULL;
    block_header *h = (block_header *)((unsigned char *)p - ALIGN);
    if (h->magic != HEADER_MAGIC || !h->cap) {
        em_free(p);
        return NULL;
    }
    release_live(h);
    atomic_fetch_add(&cached_bytes, (int64_t)h->cap);
    atomic_fetch_add(&cached_blocks, 1);
    h->magic = CACHED_MAGIC;
    h->prev = h->next = NULL;
    *cap = h->cap;
    return h;
}

void em__mem_free_cached(void *raw)
{
    block_header *h = raw;
    atomic_fetch_sub(&cached_bytes, (int64_t)h->cap);
    atomic_fetch_sub(&cached_blocks, 1);
    h->magic = 0;
    free(h);
}

void *em_calloc(size_t nbytes)
{
    void *p = em_alloc(nbytes);
    if (p) memset(p, 0, nbytes);
    return p;
}

void em_free(void *p)
{
    if (!p) return;
    block_header *h = (block_header *)((unsigned char *)p - ALIGN);
    if (h->magic != HEADER_MAGIC) {
        em_log_msg("core", EM_LOG_ERROR, "em_free: %p was not allocated by em_alloc", p);
        return;
    }
    release_live(h);
    h->magic = 0;
    free(h);
}

em_mem_stats em_mem_get_stats(void)
{
    em_mem_stats s = {
        .current_bytes = atomic_load(&cur_bytes),
        .peak_bytes = atomic_load(&peak_bytes),
        .total_allocs = atomic_load(&total_allocs),
        .live_allocs = atomic_load(&live_allocs),
        .cached_bytes = atomic_load(&cached_bytes),
        .cached_blocks = atomic_load(&cached_blocks),
        .cache_hits = atomic_load(&cache_hits),
        .cache_misses = atomic_load(&cache_misses),
    };
    return s;
}

void em_mem_reset_peak(void)
{
    atomic_store(&peak_bytes, atomic_load(&cur_bytes));
}

void em_mem_fail_at(int64_t n)
{
    atomic_store(&fail_countdown, n > 0 ? n : 0);
}

void em_mem_set_guards(bool on)
{
    atomic_store(&guards_on, on);
}

int64_t em_mem_check_guards(void)
{
    int64_t bad = 0;
    list_lock_acquire();
    for (block_header *h = guarded_head; h; h = h->next)
        if (!guard_intact(h)) bad++;
    list_lock_release();
    return bad;
}
