/* The CPU caching allocator (src/backend/cpu/cpu_cache.c): reuse of freed tensor memory,
 * accounting (cached blocks are not current bytes), em_mem_fail_at on cache hits, guard bytes on
 * reused blocks, the cpu_cache_mb cap, em_mem_trim, the huge-page layout of large blocks
 * (cpu_huge_pages), concurrent use from several threads, and the public device queries on the
 * CPU (em_device_count, em_device_get_props, em_device_get_mem_stats, em_device_empty_cache,
 * em_device_reset_peak, persistent scopes). */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/cpu_cache.h"
#include "harness.h"

static void test_reuse_and_stats(void)
{
    em_mem_trim();
    em_mem_stats s0 = em_mem_get_stats();
    em_tensor *a = em_zeros(EM_SHAPE(1000, 100), EM_F32, EM_CPU);
    CHECK(a != NULL, "alloc");
    void *pa = em_tensor_data(a);
    em_mem_stats s1 = em_mem_get_stats();
    CHECK(s1.current_bytes - s0.current_bytes >= 400000, "current counts the live tensor");
    em_release(a);
    em_mem_stats s2 = em_mem_get_stats();
    CHECK(s2.current_bytes == s0.current_bytes, "freed block leaves current_bytes (%lld vs %lld)",
          (long long)s2.current_bytes, (long long)s0.current_bytes);
    CHECK(s2.cached_bytes >= s0.cached_bytes + 400000, "freed block is cached (%lld)",
          (long long)s2.cached_bytes);
    /* a slightly different size in the same class reuses the same memory */
    em_tensor *b = em_ones(EM_SHAPE(999, 100), EM_F32, EM_CPU);
    CHECK(em_tensor_data(b) == pa, "same-class allocation reuses the block");
    em_mem_stats s3 = em_mem_get_stats();
    CHECK(s3.cache_hits == s2.cache_hits + 1, "hit counted");
    CHECK(s3.cached_bytes < s2.cached_bytes, "reused block left the cache");
    double v = em_get_f64(b, (int64_t[]){998, 99});
    CHECK(v == 1.0, "reused block holds the new values");
    em_release(b);
    /* a much larger size misses */
    int64_t misses = em_mem_get_stats().cache_misses;
    em_tensor *c = em_empty(EM_SHAPE(4000, 100), EM_F32, EM_CPU);
    CHECK(em_mem_get_stats().cache_misses == misses + 1, "miss counted");
    em_release(c);
    int64_t cached = em_mem_get_stats().cached_bytes;
    int64_t freed = em_mem_trim();
    CHECK(freed == cached && freed > 0, "trim frees everything cached (%lld of %lld)",
          (long long)freed, (long long)cached);
    CHECK(em_mem_get_stats().cached_bytes == 0, "nothing cached after trim");
    CHECK(em_mem_get_stats().cached_blocks == 0, "no blocks cached after trim");
}

static void test_sizes(void)
{
    /* every size from 1 byte to past a few classes: usable, fully writable, guards intact */
    for (size_t n = 1; n < 5000; n += 37) {
        unsigned char *p = cpu_cache_alloc(n);
        CHECK(p != NULL && ((uintptr_t)p % 64) == 0, "aligned block of %zu bytes", n);
        if (!p) continue;
        memset(p, 0x3c, n);
        cpu_cache_free(p);
    }
    size_t sizes[] = {0, 63, 64, 65, 1023, 1024, 1025, 1280, 1281, 4096, 65537, 3u << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        unsigned char *p = cpu_cache_alloc(sizes[i]);
        CHECK(p != NULL, "block of %zu bytes", sizes[i]);
        if (p && sizes[i]) memset(p, 1, sizes[i]);
        unsigned char *q = cpu_cache_alloc(sizes[i]);
        CHECK(q != NULL && q != p, "second live block of %zu bytes is distinct", sizes[i]);
        cpu_cache_free(p);
        cpu_cache_free(q);
    }
    CHECK(em_mem_check_guards() == 0, "guards intact");
    em_mem_trim();
}

static void test_fail_at_on_hit(void)
{
    em_tensor *a = em_empty(EM_SHAPE(256, 256), EM_F32, EM_CPU);
    em_release(a); /* now cached: the next such allocation would be a hit */
    int64_t cached = em_mem_get_stats().cached_bytes;
    CHECK(cached > 0, "block cached");
    /* the first allocation of em_empty is the tensor struct or storage; fail every position */
    for (int k = 1; k <= 3; k++) {
        em_mem_fail_at(k);
        em_tensor *b = em_empty(EM_SHAPE(256, 256), EM_F32, EM_CPU);
        CHECK(b == NULL, "allocation %d fails even when the cache could serve it", k);
        CHECK_ERR(EM_ERR_OOM, "em_alloc");
        em_mem_fail_at(0);
        em_release(b);
    }
    /* raw path: the very next call fails although a block of that class is cached */
    void *p = cpu_cache_alloc(1000);
    cpu_cache_free(p);
    em_mem_fail_at(1);
    CHECK(cpu_cache_alloc(1000) == NULL, "cache hit still obeys em_mem_fail_at");
    CHECK_ERR(EM_ERR_OOM, "injected failure");
    em_mem_fail_at(0);
    em_mem_trim();
}

static void test_guards(void)
{
    /* a block used with guards, freed into the cache, reused for a smaller size: the guard sits
     * after the new size, and an overwrite there is caught when it is freed again */
    unsigned char *p = cpu_cache_alloc(3000);
    memset(p, 7, 3000);
    cpu_cache_free(p);
    unsigned char *q = cpu_cache_alloc(2900);
    CHECK(q == p, "reused");
    CHECK(em_mem_check_guards() == 0, "guards fine before the overwrite");
    q[2900] ^= 0xff; /* one byte past the end */
    CHECK(em_mem_check_guards() == 1, "overwrite past a reused block is seen by check_guards");
    cpu_cache_free(q);
    CHECK_ERR(EM_ERR_INTERNAL, "guard bytes");
    CHECK(em_mem_check_guards() == 0, "freed block no longer listed");
    em_mem_trim();
    /* guards turned on while a block sat in the cache: armed on reuse */
    em_mem_set_guards(false);
    p = cpu_cache_alloc(5000);
    cpu_cache_free(p);
    em_mem_set_guards(true);
    q = cpu_cache_alloc(5000);
    CHECK(q == p, "reused after toggling guards");
    q[5000] = 0;
    CHECK(em_mem_check_guards() == 1, "guard armed on a block allocated without guards");
    q[5000] = 0xA5;
    CHECK(em_mem_check_guards() == 0, "restored");
    cpu_cache_free(q);
    em_mem_trim();
}

static void test_cap(void)
{
    em_config_set("cpu_cache_mb", "1");
    em_mem_trim(); /* re-reads the cap */
    void *big = cpu_cache_alloc(2u << 20);
    cpu_cache_free(big);
    CHECK(em_mem_get_stats().cached_bytes == 0, "block larger than the cap is not cached");
    void *a = cpu_cache_alloc(600 << 10), *b = cpu_cache_alloc(300 << 10);
    void *c = cpu_cache_alloc(600 << 10);
    cpu_cache_free(a);
    cpu_cache_free(b);
    int64_t before = em_mem_get_stats().cached_bytes;
    CHECK(before <= (1 << 20), "within the cap (%lld)", (long long)before);
    cpu_cache_free(c); /* evicts to fit */
    int64_t after = em_mem_get_stats().cached_bytes;
    CHECK(after <= (1 << 20), "still within the cap after eviction (%lld)", (long long)after);
    em_config_set("cpu_cache_mb", "0");
    em_mem_trim();
    void *d = cpu_cache_alloc(1000);
    cpu_cache_free(d);
    CHECK(em_mem_get_stats().cached_bytes == 0, "cap 0 disables caching");
    em_config_set("cpu_cache_mb", "1024");
    em_mem_trim();
}

/* Blocks of 4 MiB and more start 64 bytes (the block header) past a 2 MiB boundary, so their
 * pages can be huge ones; smaller blocks and cpu_huge_pages = off keep the plain layout. The
 * data is usable to its last byte, and guards and reuse work as for any block. */
static void test_huge_pages(void)
{
    const uintptr_t huge = (uintptr_t)2 << 20;
    em_mem_trim();
    em_mem_set_guards(true);
    size_t sizes[] = {4u << 20, (5u << 20) + 4096, 48u << 20};
    for (int i = 0; i < 3; i++) {
        unsigned char *p = cpu_cache_alloc(sizes[i]);
        CHECK(p != NULL, "alloc %zu", sizes[i]);
        if (!p) continue;
        CHECK(((uintptr_t)p - 64) % huge == 0, "%zu bytes: block on a 2 MiB boundary (%p)",
              sizes[i], (void *)p);
        memset(p, 7, sizes[i]);
        CHECK(p[sizes[i] - 1] == 7 && p[0] == 7, "whole block writable");
        CHECK(em_mem_check_guards() == 0, "guards intact after a full write");
        cpu_cache_free(p);
        unsigned char *q = cpu_cache_alloc(sizes[i] - 64);
        CHECK(q == p, "%zu bytes: the cached huge block is reused", sizes[i]);
        cpu_cache_free(q);
    }
    unsigned char *small = cpu_cache_alloc((3u << 20) + 1);
    CHECK(small != NULL, "3 MiB alloc");
    cpu_cache_free(small);
    em_config_set("cpu_huge_pages", "off");
    em_mem_trim(); /* re-reads the configuration */
    int off_aligned = 0;
    void *blocks[8];
    for (int i = 0; i < 8; i++) {
        blocks[i] = cpu_cache_alloc((6u << 20) + (size_t)i * 4096);
        CHECK(blocks[i] != NULL, "alloc with huge pages off");
        off_aligned += blocks[i] && ((uintptr_t)blocks[i] - 64) % huge == 0;
    }
    /* a plain block sits past its allocator's own chunk header, at most 64-byte aligned: all
     * eight on 2 MiB boundaries would mean the switch did nothing */
    CHECK(off_aligned < 8, "cpu_huge_pages = off keeps the plain layout (%d of 8 aligned)",
          off_aligned);
    for (int i = 0; i < 8; i++) cpu_cache_free(blocks[i]);
    em_config_set("cpu_huge_pages", "on");
    em_mem_set_guards(false);
    em_mem_trim();
}

static void *worker(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    void *live[16] = {0};
    for (int it = 0; it < 4000; it++) {
        seed = seed * 1103515245u + 12345u;
        int slot = (int)((seed >> 8) % 16);
        if (live[slot]) {
            unsigned char *p = live[slot];
            if (p[0] != (unsigned char)slot) return (void *)1;
            cpu_cache_free(p);
            live[slot] = NULL;
        } else {
            size_t n = 1 + (seed >> 12) % 20000;
            unsigned char *p = cpu_cache_alloc(n);
            if (!p) return (void *)1;
            memset(p, slot, n);
            live[slot] = p;
        }
    }
    for (int i = 0; i < 16; i++) cpu_cache_free(live[i]);
    return NULL;
}

static void test_threads(void)
{
    int64_t base = em_mem_get_stats().current_bytes;
    pthread_t th[4];
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + 1));
    int bad = 0;
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        bad += r != NULL;
    }
    CHECK(bad == 0, "no block handed to two threads at once");
    CHECK(em_mem_get_stats().current_bytes == base, "balanced after concurrent use");
    CHECK(em_mem_check_guards() == 0, "guards intact after concurrent use");
    em_mem_trim();
}

static void test_device_queries(void)
{
    CHECK(em_device_count("cpu") == 1, "one cpu");
    int ncuda = em_device_count("cuda");
    CHECK(ncuda >= 0, "cuda counts %d devices", ncuda);
    CHECK(em_device_count("tpu") == -1, "unknown backend");
    CHECK_ERR(EM_ERR_DEVICE, "unknown backend \"tpu\"");
    CHECK(em_device_count(NULL) == -1, "NULL name");
    CHECK_ERR(EM_ERR_INVALID_ARG, "backend");

    em_device_props p;
    CHECK(em_device_get_props(EM_CPU, &p) == EM_OK, "cpu props");
    CHECK(p.name[0] != '\0' && p.total_memory > 0 && p.processors >= 1 && p.compute_major == 0,
          "cpu: \"%s\", %lld bytes, %d threads", p.name, (long long)p.total_memory, p.processors);
    CHECK(em_device_get_props((em_device){0, 3}, &p) == EM_ERR_DEVICE && p.name[0] == '\0',
          "cpu:3 does not exist, out zeroed");
    CHECK_ERR(EM_ERR_DEVICE, "em_device_get_props");
    CHECK(em_device_get_props(EM_CPU, NULL) == EM_ERR_INVALID_ARG, "NULL out");
    em_clear_error();

    /* the CPU's figures are em_mem_get_stats's */
    em_device_empty_cache(EM_CPU);
    em_device_mem_stats m0, m1, m2;
    CHECK(em_device_get_mem_stats(EM_CPU, &m0) == EM_OK, "cpu mem stats");
    CHECK(m0.total_bytes > 0 && m0.free_bytes > 0 && m0.free_bytes <= m0.total_bytes,
          "host memory %lld free of %lld", (long long)m0.free_bytes, (long long)m0.total_bytes);
    CHECK(m0.cached_bytes == 0 && m0.in_use_bytes == em_mem_get_stats().current_bytes,
          "in use is current_bytes, nothing cached after empty_cache");
    em_tensor *a = em_empty(EM_SHAPE(250000), EM_F32, EM_CPU);
    em_device_get_mem_stats(EM_CPU, &m1);
    CHECK(m1.in_use_bytes - m0.in_use_bytes >= 1000000 && m1.allocs == m0.allocs + 3 &&
              m1.persistent_bytes == m0.persistent_bytes,
          "a tensor: +%lld in use, +%lld allocs (handle, storage record, data)",
          (long long)(m1.in_use_bytes - m0.in_use_bytes), (long long)(m1.allocs - m0.allocs));
    em_release(a);
    em_device_get_mem_stats(EM_CPU, &m2);
    CHECK(m2.in_use_bytes == m0.in_use_bytes && m2.cached_bytes >= 1000000 &&
              m2.peak_in_use_bytes >= m1.in_use_bytes,
          "released: back to %lld in use, %lld cached", (long long)m2.in_use_bytes,
          (long long)m2.cached_bytes);
    em_tensor *b = em_empty(EM_SHAPE(249999), EM_F32, EM_CPU);
    em_device_get_mem_stats(EM_CPU, &m1);
    CHECK(m1.reuses == m2.reuses + 1, "the same class is reused");
    em_release(b);
    CHECK(em_device_reset_peak(EM_CPU) == EM_OK, "reset peak");
    em_device_get_mem_stats(EM_CPU, &m1);
    CHECK(m1.peak_in_use_bytes == m1.in_use_bytes, "peak restarts at in use");
    int64_t cached = m1.cached_bytes;
    CHECK(em_device_empty_cache(EM_CPU) == cached && cached > 0, "empty_cache returns %lld",
          (long long)cached);

    /* persistent storage: exact, outside the cache, back to the system when freed */
    CHECK(em_device_persistent_end(EM_CPU) == EM_ERR_STATE, "end without begin");
    CHECK_ERR(EM_ERR_STATE, "no persistent scope");
    em_release(em_empty(EM_SHAPE(1001, 7), EM_F64, EM_CPU)); /* a cached block of w's class */
    em_device_get_mem_stats(EM_CPU, &m0);
    CHECK(em_device_persistent_begin(EM_CPU) == EM_OK, "begin");
    CHECK(em_device_persistent_begin(EM_CPU) == EM_OK, "nested begin");
    em_tensor *w = em_full(EM_SHAPE(1001, 7), 2.5, EM_F64, EM_CPU);
    CHECK(em_device_persistent_end(EM_CPU) == EM_OK, "nested end");
    em_tensor *w2 = em_full(EM_SHAPE(3), 1.0, EM_F64, EM_CPU);
    CHECK(em_device_persistent_end(EM_CPU) == EM_OK, "end");
    em_tensor *t = em_full(EM_SHAPE(5), 1.0, EM_F64, EM_CPU);
    em_device_get_mem_stats(EM_CPU, &m1);
    CHECK(m1.persistent_bytes - m0.persistent_bytes == 1001 * 7 * 8 + 3 * 8,
          "persistent: %lld bytes, exactly the two tensors'",
          (long long)(m1.persistent_bytes - m0.persistent_bytes));
    CHECK(m1.reuses == m0.reuses && m1.cached_bytes == m0.cached_bytes,
          "persistent storage never comes from the cache");
    CHECK(em_get_f64(w, (int64_t[]){1000, 6}) == 2.5, "persistent storage holds its values");
    em_release(w);
    em_release(w2);
    em_release(t);
    em_device_get_mem_stats(EM_CPU, &m2);
    CHECK(m2.persistent_bytes == m0.persistent_bytes, "freed persistent storage leaves the count");
    CHECK(m2.cached_bytes == m1.cached_bytes + 64, "only the ordinary tensor was cached (%lld)",
          (long long)(m2.cached_bytes - m1.cached_bytes));
    em_tensor *src = em_full(EM_SHAPE(3), 1.5, EM_F64, EM_CPU);
    em_tensor *pin = em_pin_memory(src); /* no GPU driver here: an ordinary copy */
    CHECK(pin && (em_device_count("cuda") > 0 || !em_tensor_is_pinned(pin)) &&
              em_get_f64(pin, (int64_t[]){2}) == 1.5 && !em_tensor_shares_storage(pin, src),
          "em_pin_memory without a GPU: a copy");
    em_release(pin);
    em_release(src);
    CHECK(em_device_set_memory_limit(EM_CPU, 1 << 20) == EM_ERR_UNSUPPORTED, "no cpu limit");
    CHECK_ERR(EM_ERR_UNSUPPORTED, "the cpu backend has no memory limit");
    CHECK(em_device_persistent_begin((em_device){0, 1}) == EM_ERR_DEVICE, "no cpu:1");
    em_clear_error();
    h_check_persistent_module(EM_CPU, 1, false);
}

int main(void)
{
    h_init();
    test_reuse_and_stats();
    test_sizes();
    test_fail_at_on_hit();
    test_guards();
    test_cap();
    test_huge_pages();
    test_threads();
    test_device_queries();
    return h_finish();
}
