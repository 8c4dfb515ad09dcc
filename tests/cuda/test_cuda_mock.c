/* The CUDA runtime's streams, pool, staged host copies and peer copies against a stand-in
 * driver whose queued work really waits (tests/cuda/mock_libcuda.c, put first on the loader path
 * by ctest): so it runs without a GPU, and a copy or a pool reuse that is not ordered right reads
 * wrong bytes. No kernels run here; the copies, memsets and device-to-device copies are the work.
 * Against any other driver it prints one line and passes. */
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "harness.h"

static em_device dev;
static size_t (*pending)(void);
static void (*fail_calls)(const char *name, long nth, long count);
static bool unpinned; /* MOCK_CUDA_FAIL=cuMemHostAlloc: no staging buffers, copies wait */

static unsigned char pattern(size_t i, size_t n)
{
    uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ n;
    return (unsigned char)(h >> 56);
}

/* Whether n 32-bit words of device memory p (read on the current stream) all equal v. */
static bool words_are(const void *p, size_t n, unsigned v, const char *what)
{
    unsigned *h = malloc((n ? n : 1) * sizeof *h);
    bool ok = cuda_copy_to_host(0, h, p, n * sizeof *h, what) == EM_OK;
    size_t bad = n;
    for (size_t i = 0; ok && i < n && bad == n; i++)
        if (h[i] != v) bad = i;
    CHECK(ok && bad == n, "%s: word %zu is %#x, want %#x (%s)", what, bad, bad < n ? h[bad] : 0, v,
          ok ? "" : em_last_error());
    free(h);
    return ok && bad == n;
}

static void test_host_copies(void)
{
    size_t c = cuda_copy_chunk();
    size_t sizes[] = {0, 1, 7, c - 1, c, c + 1, 2 * c, 3 * c + 5, 9 * c + 3, 17 * c};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        unsigned char *src = malloc(n + 2), *back = malloc(n + 2);
        for (size_t i = 0; i < n; i++) src[i + 1] = pattern(i, n);
        void *d = cuda_pool_alloc(0, n ? n : 1);
        CHECK(cuda_copy_from_host(0, d, src + 1, n, "test") == EM_OK, "to device %zu (%s)", n,
              em_last_error());
        if (n > 0 && !unpinned)
            CHECK(pending() > 0, "%zu bytes: the copy is still queued at return", n);
        memset(src + 1, 0x11, n); /* the caller may reuse its buffer at once */
        memset(back, 0x55, n + 2);
        CHECK(cuda_copy_to_host(0, back + 1, d, n, "test") == EM_OK, "to host %zu (%s)", n,
              em_last_error());
        size_t bad = n;
        for (size_t i = 0; i < n && bad == n; i++)
            if (back[i + 1] != pattern(i, n)) bad = i;
        CHECK(bad == n, "%zu bytes: byte %zu is %d, want %d", n, bad, bad < n ? back[bad + 1] : 0,
              bad < n ? pattern(bad, n) : 0);
        CHECK(back[0] == 0x55 && back[n + 1] == 0x55, "%zu bytes: nothing written outside", n);

        /* through the tensor API */
        em_scope_begin();
        for (size_t i = 0; i < n; i++) src[i] = pattern(i, n);
        em_tensor *t = em_from_data(src, EM_U8, EM_SHAPE((int64_t)n), EM_U8, dev);
        memset(src, 0xEE, n);
        memset(back, 0x55, n + 2);
        em_to_data(t, back, EM_U8, (int64_t)n);
        CHECK_OK("tensor round trip");
        bad = n;
        for (size_t i = 0; i < n && bad == n; i++)
            if (back[i] != pattern(i, n)) bad = i;
        CHECK(bad == n, "tensor of %zu bytes: byte %zu differs", n, bad);
        em_scope_end();
        cuda_pool_free(0, d);
        free(src);
        free(back);
    }
}

static em_cuda_pool_stats stats(void)
{
    em_cuda_pool_stats s;
    memset(&s, 0, sizeof s);
    cuda_pool_stats(0, &s);
    return s;
}

/* x written (v) and read into a new block on stream a, freed, taken by b, which writes w. b is
 * synchronised first, so its write runs first unless the pool made b wait for a (by an event;
 * with fail_event its record fails and the pool waits on the host). Returns a's copy (the
 * caller frees it and *taken, the block b got). */
static void *reuse_across(em_stream *a, em_stream *b, size_t words, unsigned v, unsigned w,
                          bool fail_event, void **taken)
{
    size_t n = words * 4;
    em_stream_use(dev, a);
    void *x = cuda_pool_alloc(0, n), *r = cuda_pool_alloc(0, n);
    cuda_memset32(0, x, v, words, "test");
    cuda_copy_d2d(0, r, x, n, "test");
    em_cuda_pool_stats s0 = stats();
    cuda_pool_free(0, x);
    em_stream_use(dev, b);
    if (fail_event) fail_calls("cuEventRecord", 1, -1);
    void *y = cuda_pool_alloc(0, n);
    if (fail_event) fail_calls("", 0, 0);
    CHECK(y == x && em_last_status() == EM_OK, "b took x's block (%s)", em_last_error());
    CHECK(stats().stream_waits == s0.stream_waits + 1, "and was made to wait for a");
    cuda_memset32(0, y, w, words, "test");
    em_stream_sync(b);
    em_stream_use(dev, a);
    words_are(r, words, v, "a's copy of x after b took x's block");
    em_stream_use(dev, b);
    words_are(y, words, w, "b's write, after a's work on the block");
    *taken = y;
    return r;
}

static void test_pool_across_streams(void)
{
    cuda_pool_empty_cache(0);
    em_stream *a = em_stream_new(dev), *b = em_stream_new(dev), *c = em_stream_new(dev);
    size_t words = 300000, n = words * 4; /* the 2 MiB class */

    void *y, *r = reuse_across(a, b, words, 1, 7, false, &y);

    /* x2 is a's, read on c (after an event) and freed while c is current; a takes it back and
     * must wait for c's read */
    em_stream_use(dev, a);
    void *x2 = cuda_pool_alloc(0, n);
    cuda_memset32(0, x2, 2, words, "test");
    em_event *e = em_event_new(dev);
    em_event_record(e, NULL);
    em_stream_use(dev, c);
    em_stream_wait(NULL, e);
    void *r2 = cuda_pool_alloc(0, n);
    cuda_copy_d2d(0, r2, x2, n, "test");
    cuda_pool_free(0, x2);
    em_stream_use(dev, a);
    em_cuda_pool_stats s1 = stats();
    void *y2 = cuda_pool_alloc(0, n);
    CHECK(y2 == x2, "a took x2's block back");
    CHECK(stats().stream_waits == s1.stream_waits + 1, "after waiting for c");
    cuda_memset32(0, y2, 9, words, "test");
    em_stream_sync(a);
    em_stream_use(dev, c);
    words_are(r2, words, 2, "c's copy of x2 after a took x2's block back");

    /* same-stream reuse needs no wait */
    em_stream_use(dev, a);
    em_cuda_pool_stats s2 = stats();
    cuda_pool_free(0, y2);
    void *z = cuda_pool_alloc(0, n);
    CHECK(z == y2 && stats().stream_waits == s2.stream_waits, "same-stream reuse: no wait");

    /* a stream freed with queued work: it finishes, and its blocks carry no stale stream */
    cuda_memset32(0, z, 5, words, "test");
    em_stream_use(dev, NULL);
    em_stream_free(a);
    cuda_pool_free(0, z);
    void *z2 = cuda_pool_alloc(0, n);
    CHECK(z2 == z, "the freed stream's block is reused");
    words_are(z2, words, 5, "the freed stream's work ran");

    em_event *t0 = em_event_new(dev), *t1 = em_event_new(dev);
    em_event_record(t0, NULL);
    em_event_record(t1, NULL);
    em_event_sync(t1);
    double ms = em_event_elapsed_ms(t0, t1);
    CHECK(ms == 0.5, "elapsed %g", ms);
    cuda_pool_free(0, r);
    cuda_pool_free(0, y);
    cuda_pool_free(0, r2);
    cuda_pool_free(0, z2);
    em_event_free(e);
    em_event_free(t0);
    em_event_free(t1);
    em_stream_free(b);
    em_stream_free(c);
    em_device_sync(dev);
    cuda_pool_empty_cache(0); /* the mock aborts if queued work still used a freed block */
    CHECK_OK("pool across streams");
}

typedef struct worker {
    unsigned id;
    int bad;
    char err[200];
} worker;

static void *work(void *p)
{
    worker *w = p;
    size_t words = 100000, n = words * 4;
    unsigned *h = malloc(n);
    for (int it = 0; it < 200 && !w->bad; it++) {
        void *x = cuda_pool_alloc(0, n), *r = cuda_pool_alloc(0, n);
        cuda_memset32(0, x, w->id + (unsigned)it, words, "worker");
        cuda_copy_d2d(0, r, x, n, "worker");
        cuda_pool_free(0, x); /* another thread may take it at once */
        if (cuda_copy_to_host(0, h, r, n, "worker") != EM_OK) {
            snprintf(w->err, sizeof w->err, "%s", em_last_error());
            w->bad = 1;
        }
        for (size_t i = 0; i < words && !w->bad; i++)
            if (h[i] != w->id + (unsigned)it) w->bad = 2;
        cuda_pool_free(0, r);
    }
    free(h);
    return NULL;
}

static void test_threads(void)
{
    enum { T = 4 };
    pthread_t th[T];
    worker w[T];
    em_cuda_pool_stats s0 = stats();
    for (int i = 0; i < T; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].id = 1000u * (unsigned)(i + 1);
        pthread_create(&th[i], NULL, work, &w[i]);
    }
    for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < T; i++) CHECK(!w[i].bad, "thread %d: %d %s", i, w[i].bad, w[i].err);
    em_cuda_pool_stats s1 = stats();
    printf("threads: %lld reuses, %lld of them waited for another stream\n",
           (long long)(s1.reuses - s0.reuses), (long long)(s1.stream_waits - s0.stream_waits));
    /* later threads take the spare streams */
    for (int i = 0; i < T; i++) pthread_create(&th[i], NULL, work, &w[i]);
    for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < T; i++) CHECK(!w[i].bad, "again, thread %d: %d %s", i, w[i].bad, w[i].err);
}

/* Work a thread queued is done once the thread has been joined. */
static void *make_block(void *p)
{
    void **out = p;
    *out = cuda_pool_alloc(0, 4000 * 4);
    cuda_memset32(0, *out, 0x600DF00D, 4000, "maker");
    return NULL;
}

static void test_joined_thread(void)
{
    void *blk = NULL;
    pthread_t th;
    pthread_create(&th, NULL, make_block, &blk);
    pthread_join(th, NULL);
    CHECK(blk != NULL, "the thread's block");
    if (blk) words_are(blk, 4000, 0x600DF00D, "a joined thread's write");
    cuda_pool_free(0, blk);
}

static void test_peer(void)
{
    em_device d1 = em_device_parse("cuda:1");
    CHECK_OK("cuda:1");
    size_t c = cuda_copy_chunk();
    size_t sizes[] = {1, 1000, c + 3};
    for (int k = 0; k < 3; k++) {
        em_scope_begin();
        size_t n = sizes[k];
        unsigned char *src = malloc(n), *back = malloc(n);
        for (size_t i = 0; i < n; i++) src[i] = pattern(i, n);
        em_tensor *x0 = em_from_data(src, EM_U8, EM_SHAPE((int64_t)n), EM_U8, dev);
        em_tensor *x1 = em_to_device(x0, d1);
        em_release(x0);
        /* x0's block, taken at once and overwritten on cuda:0 */
        void *junk = cuda_pool_alloc(0, n);
        cuda_memset32(0, junk, 0xABABABAB, n / 4, "test");
        em_tensor *x2 = em_to_device(x1, dev);
        em_to_data(x2, back, EM_U8, (int64_t)n);
        CHECK_OK("peer round trip");
        size_t bad = n;
        for (size_t i = 0; i < n && bad == n; i++)
            if (back[i] != pattern(i, n)) bad = i;
        CHECK(bad == n, "cuda:0 -> cuda:1 -> cuda:0, %zu bytes: byte %zu differs", n, bad);
        cuda_pool_free(0, junk);
        free(src);
        free(back);
        em_scope_end();
    }
    em_device_sync(d1);
}

static em_device_mem_stats mem(em_device d)
{
    em_device_mem_stats m;
    CHECK(em_device_get_mem_stats(d, &m) == EM_OK, "mem stats (%s)", em_last_error());
    return m;
}

/* A u8 tensor of n bytes on dev holding pattern(i, n) (made from host data: no kernels here). */
static em_tensor *patterned(size_t n, em_device d)
{
    unsigned char *src = malloc(n);
    for (size_t i = 0; i < n; i++) src[i] = pattern(i, n);
    em_tensor *t = em_from_data(src, EM_U8, EM_SHAPE((int64_t)n), EM_U8, d);
    free(src);
    return t;
}

static bool holds_pattern(em_tensor *t, size_t n)
{
    unsigned char *back = malloc(n);
    bool ok = em_to_data(t, back, EM_U8, (int64_t)n) == EM_OK;
    for (size_t i = 0; ok && i < n; i++) ok = back[i] == pattern(i, n);
    free(back);
    return ok;
}

/* The public device queries and persistent storage on the pool, through the tensor API. */
static void test_device_queries(void)
{
    CHECK(em_device_count("cuda") == 2, "two mock devices");
    em_device_props p;
    CHECK(em_device_get_props(dev, &p) == EM_OK, "props");
    CHECK(!strcmp(p.name, "Ember mock GPU 0") && p.total_memory == (int64_t)1 << 30 &&
              p.processors == 4 && p.compute_major == 9 && p.compute_minor == 0,
          "cuda:0 is \"%s\", %lld bytes, %d SMs, sm_%d%d", p.name, (long long)p.total_memory,
          p.processors, p.compute_major, p.compute_minor);
    CHECK(em_device_get_props((em_device){dev.backend, 2}, &p) == EM_ERR_DEVICE, "no cuda:2");
    em_clear_error();

    em_device_empty_cache(dev);
    em_device_mem_stats m0 = mem(dev);
    CHECK(m0.cached_bytes == 0 && m0.total_bytes == (int64_t)1 << 30 &&
              m0.free_bytes == m0.total_bytes - m0.in_use_bytes,
          "after empty_cache: %lld in use, %lld free of %lld", (long long)m0.in_use_bytes,
          (long long)m0.free_bytes, (long long)m0.total_bytes);

    /* ordinary storage: the 4 MiB class, cached when released, returned by empty_cache */
    size_t n = 3000001;
    em_tensor *a = patterned(n, dev);
    em_device_mem_stats m1 = mem(dev);
    CHECK(m1.in_use_bytes - m0.in_use_bytes == 4 << 20 && m1.allocs == m0.allocs + 1 &&
              m1.free_bytes == m0.free_bytes - (4 << 20) && m1.persistent_bytes == 0,
          "ordinary: +%lld in use", (long long)(m1.in_use_bytes - m0.in_use_bytes));
    em_release(a);
    em_device_mem_stats m2 = mem(dev);
    CHECK(m2.in_use_bytes == m0.in_use_bytes && m2.cached_bytes == 4 << 20 &&
              m2.free_bytes == m1.free_bytes && m2.peak_in_use_bytes >= m1.in_use_bytes,
          "released into the cache");
    CHECK(em_device_reset_peak(dev) == EM_OK && mem(dev).peak_in_use_bytes == m0.in_use_bytes,
          "peak restarted");
    CHECK(em_device_empty_cache(dev) == 4 << 20, "empty_cache returns the cached bytes");
    CHECK(mem(dev).free_bytes == m0.free_bytes, "and the driver has them back");

    /* persistent storage: rounded to 512 only, never cached */
    em_release(patterned(n, dev)); /* a cached block of the 4 MiB class */
    m0 = mem(dev);
    CHECK(em_device_persistent_begin(dev) == EM_OK, "begin");
    em_tensor *w = patterned(n, dev);
    CHECK(em_device_persistent_end(dev) == EM_OK, "end");
    m1 = mem(dev);
    CHECK(m1.persistent_bytes == 3000320 && m1.in_use_bytes - m0.in_use_bytes == 3000320 &&
              m1.reuses == m0.reuses && m1.cached_bytes == m0.cached_bytes &&
              m1.allocs == m0.allocs + 1,
          "persistent: %lld bytes, %lld more in use, cache untouched",
          (long long)m1.persistent_bytes, (long long)(m1.in_use_bytes - m0.in_use_bytes));
    CHECK(holds_pattern(w, n), "persistent storage holds its bytes");
    em_release(w);
    m2 = mem(dev);
    CHECK(m2.persistent_bytes == 0 && m2.cached_bytes == m0.cached_bytes &&
              m2.free_bytes == m0.free_bytes,
          "a freed persistent block goes back to the driver");
    em_device_empty_cache(dev);

    /* a module's parameters: moved or registered on the device, they are persistent */
    em_module *lin = em_linear_new(1000, 300, EM_CPU); /* 1,200,000 + 1,200 bytes */
    m0 = mem(dev);
    CHECK(em_module_to(lin, dev) == EM_OK, "module to cuda:0 (%s)", em_last_error());
    m1 = mem(dev);
    CHECK(m1.persistent_bytes - m0.persistent_bytes == 1200128 + 1536 &&
              m1.in_use_bytes - m0.in_use_bytes == 1200128 + 1536,
          "em_module_to: %lld persistent bytes",
          (long long)(m1.persistent_bytes - m0.persistent_bytes));
    em_tensor *fresh = em_from_data((float[300]){0}, EM_F32, EM_SHAPE(300), EM_F32, dev);
    CHECK(mem(dev).persistent_bytes == m1.persistent_bytes, "a fresh tensor is not persistent");
    CHECK(em_module_set(lin, "bias", fresh) == EM_OK, "set the bias (%s)", em_last_error());
    m2 = mem(dev);
    CHECK(m2.persistent_bytes == m1.persistent_bytes - 1536,
          "a set bias keeps its ordinary block (the old persistent one went back to the driver)");
    em_tensor *extra = patterned(1200, dev);
    m1 = mem(dev);
    CHECK(em_module_buffer(lin, "extra", extra) != NULL, "register a buffer (%s)", em_last_error());
    m2 = mem(dev);
    CHECK(m2.persistent_bytes == m1.persistent_bytes + 1536 &&
              m2.in_use_bytes == m1.in_use_bytes - 2048 + 1536 &&
              m2.cached_bytes == m1.cached_bytes + 2048,
          "the registered buffer moved into a persistent block (its 2 KiB block cached)");
    CHECK(holds_pattern(em_module_get(lin, "extra"), 1200), "the moved buffer keeps its bytes");
    float back[300] = {1};
    CHECK(em_to_data(em_module_get(lin, "bias"), back, EM_F32, 300) == EM_OK && back[0] == 0 &&
              back[299] == 0,
          "the set bias keeps its values");
    em_module_free(lin);
    CHECK(mem(dev).persistent_bytes == m0.persistent_bytes, "freed with the module");

    /* out of memory: the cache is given back and the allocation retried; past what is free an
     * error naming the driver's; past the device's whole memory refused before the driver is
     * asked */
    em_device_empty_cache(dev);
    m0 = mem(dev);
    em_release(em_empty(EM_SHAPE(600 << 20), EM_U8, dev));
    CHECK(mem(dev).cached_bytes == 600 << 20, "600 MiB cached");
    em_tensor *big = em_empty(EM_SHAPE(700 << 20), EM_U8, dev);
    CHECK(big != NULL && mem(dev).cached_bytes == 0, "700 MiB after the cache was given back (%s)",
          big ? "" : em_last_error());
    em_tensor *more = em_empty(EM_SHAPE(700 << 20), EM_U8, dev);
    CHECK(more == NULL, "700 MiB more on a 1 GiB device");
    CHECK_ERR(EM_ERR_OOM, "CUDA_ERROR_OUT_OF_MEMORY");
    em_release(big);
    em_tensor *huge = em_empty(EM_SHAPE((int64_t)2 << 30), EM_U8, dev);
    CHECK(huge == NULL, "2 GiB on a 1 GiB device");
    CHECK_ERR(EM_ERR_OOM, "cuda:0's memory");
    CHECK(mem(dev).in_use_bytes == m0.in_use_bytes, "nothing held after the failure");
    em_device_empty_cache(dev);
}

/* All n bytes of t (read back to the host) equal v. */
static bool all_bytes(em_tensor *t, size_t n, unsigned char v)
{
    unsigned char *b = malloc(n);
    bool ok = em_to_data(t, b, EM_U8, (int64_t)n) == EM_OK;
    for (size_t i = 0; ok && i < n; i++) ok = b[i] == v;
    free(b);
    return ok;
}

/* Pinned tensors: copies without staging, the DMA from one still queued when em_to_device
 * returns, and writes into the memory (em_tensor_data, a reuse of the block) after it. */
static void test_pinned(void)
{
    size_t n = 2 * cuda_copy_chunk() + 7;
    em_scope_begin();
    em_tensor *h = patterned(n, EM_CPU);
    em_tensor *p = em_pin_memory(h);
    CHECK(p && em_tensor_is_pinned(p) == !unpinned && holds_pattern(p, n), "a pinned copy (%s)",
          em_last_error());
    size_t queued = pending();
    em_tensor *d = em_to_device(p, dev);
    if (!unpinned) CHECK(pending() == queued + 1, "one DMA, still queued at return");
    memset(em_tensor_data(p), 0x5A, n); /* waits for that DMA */
    CHECK(holds_pattern(d, n), "the device copy has the bytes from before the write");
    em_tensor *d2 = em_to_device(p, dev);
    em_release(p);                   /* its block goes back to the cache with the DMA queued ... */
    em_tensor *q = em_pin_memory(h); /* ... and is taken again and written */
    CHECK(q && holds_pattern(q, n), "a second pinned copy");
    CHECK(all_bytes(d2, n, 0x5A), "the DMA read the block before its reuse");
    em_tensor *back = em_pin_memory(d); /* device to pinned memory: one DMA into it */
    CHECK(back && em_tensor_is_pinned(back) == !unpinned && holds_pattern(back, n),
          "a device tensor pinned on the host");

    /* a loader with pin_memory: batches built into pinned memory by two workers, moved to the
       device by one DMA each; every batch holds its rows */
    int64_t rows = 1000, cols = 3000;
    int32_t *v = malloc((size_t)(rows * cols) * sizeof *v);
    for (int64_t i = 0; i < rows * cols; i++) v[i] = (int32_t)i;
    em_tensor *x = em_from_data(v, EM_I32, EM_SHAPE(rows, cols), EM_I32, EM_CPU);
    const char *names[] = {"x"};
    em_loader *ld = em_loader_new(
        em_dataset_from_tensors(&x, names, 1),
        (em_loader_cfg){.batch_size = 100, .workers = 2, .device = dev, .pin_memory = true});
    em_batch bt;
    int batches = 0;
    bool exact = true;
    int32_t *got = malloc((size_t)(100 * cols) * sizeof *got);
    while (ld && em_loader_next(ld, &bt)) {
        exact = exact && em_device_equal(em_tensor_device(bt.t[0]), dev) &&
                em_to_data(bt.t[0], got, EM_I32, 100 * cols) == EM_OK;
        for (int64_t i = 0; exact && i < 100 * cols; i++)
            exact = got[i] == (int32_t)(batches * 100 * cols + i);
        em_batch_free(&bt);
        batches++;
    }
    CHECK(ld && batches == 10 && exact, "pin_memory loader: %d batches, exact: %d (%s)", batches,
          exact, em_last_error());
    em_loader_free(ld);
    free(got);
    free(v);
    em_scope_end();
    CHECK_OK("pinned");
}

/* Stream priorities: clamped into the driver's range, and work on such a stream is ordinary. */
static void test_priorities(void)
{
    const int want[] = {0, -3, -100, 7}, got[] = {0, -3, -5, 0};
    for (int k = 0; k < 4; k++) {
        em_stream *s = em_stream_new_priority(dev, want[k]);
        CHECK(s && em_stream_priority(s) == got[k], "priority %d: got %d, want %d", want[k],
              s ? em_stream_priority(s) : 99, got[k]);
        em_stream_use(dev, s);
        em_scope_begin();
        em_tensor *t = patterned(5000, dev);
        CHECK(t && holds_pattern(t, 5000), "a round trip on the priority %d stream", got[k]);
        em_scope_end();
        em_stream_use(dev, NULL);
        em_stream_free(s);
    }
    CHECK(em_stream_priority(em_stream_current(dev)) == 0 && em_stream_priority(NULL) == 0,
          "the default stream's priority");
    CHECK_OK("priorities");
}

/* em_device_set_memory_limit: the cache goes back first, then allocations past the cap fail. */
static void test_memory_limit(void)
{
    em_device_empty_cache(dev);
    em_device_mem_stats m0 = mem(dev);
    int64_t cap = m0.in_use_bytes + (64 << 20);
    CHECK(m0.limit_bytes == 0, "no limit by default");
    CHECK(em_device_set_memory_limit(dev, cap) == EM_OK && mem(dev).limit_bytes == cap, "limit");
    em_release(em_empty(EM_SHAPE(40 << 20), EM_U8, dev));
    CHECK(mem(dev).cached_bytes == 40 << 20, "40 MiB cached");
    em_tensor *a = em_empty(EM_SHAPE(50 << 20), EM_U8, dev);
    CHECK(a != NULL && mem(dev).cached_bytes == 0, "50 MiB fit once the cache was given back (%s)",
          a ? "" : em_last_error());
    CHECK(em_empty(EM_SHAPE(20 << 20), EM_U8, dev) == NULL, "20 MiB more would pass 64");
    CHECK_ERR(EM_ERR_OOM, "would pass its memory limit of");
    em_device_persistent_begin(dev);
    CHECK(em_empty(EM_SHAPE(20 << 20), EM_U8, dev) == NULL, "persistent storage too");
    em_device_persistent_end(dev);
    CHECK_ERR(EM_ERR_OOM, "would pass its memory limit of");
    em_release(a);
    CHECK(em_device_set_memory_limit(dev, 0) == EM_OK, "no limit");
    em_tensor *b = em_empty(EM_SHAPE(100 << 20), EM_U8, dev);
    CHECK(b != NULL, "100 MiB without the limit");
    em_release(b);
    CHECK(em_device_set_memory_limit(dev, -1) == EM_ERR_INVALID_ARG, "negative limit");
    em_clear_error();
    CHECK(mem(dev).in_use_bytes == m0.in_use_bytes, "nothing held");
    em_device_empty_cache(dev);
}

/* Driver calls that fail (as a kernel fault surfacing there would): the error names the Ember
 * call, the driver call and the CUDA error, nothing is held afterwards, and the next copies
 * work (no staging buffer is left busy, no stream waits on a lost event). */
static void test_faults(void)
{
    size_t c = cuda_copy_chunk(), n = 3 * c + 5;
    em_device_sync(dev);
    em_device_mem_stats m0 = mem(dev);
    int64_t live0 = em_live_tensors();
    const struct {
        const char *call, *needle;
        long nth;
        bool to_host;
    } cases[] = {
        {"cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync failed on cuda:0: CUDA_ERROR_LAUNCH_FAILED", 2,
         false},
        {"cuEventRecord", "cuEventRecord failed on cuda:0: CUDA_ERROR_LAUNCH_FAILED", 1, false},
        {"cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync failed on cuda:0: CUDA_ERROR_LAUNCH_FAILED", 2,
         true},
        {"cuEventSynchronize", "cuEventSynchronize failed on cuda:0: CUDA_ERROR_LAUNCH_FAILED", 1,
         true},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        if (unpinned && strstr(cases[k].call, "Event")) continue; /* no staging, no events */
        em_scope_begin();
        em_tensor *t = cases[k].to_host ? patterned(n, dev) : NULL;
        fail_calls(cases[k].call, cases[k].nth, 1);
        if (cases[k].to_host) {
            unsigned char *back = malloc(n);
            CHECK(em_to_data(t, back, EM_U8, (int64_t)n) != EM_OK, "%s fails", cases[k].call);
            free(back);
        } else {
            CHECK(patterned(n, dev) == NULL, "%s fails", cases[k].call);
        }
        CHECK_ERR(EM_ERR_DEVICE, cases[k].needle);
        em_clear_error();
        fail_calls("", 0, 0);
        em_tensor *u = patterned(n, dev);
        CHECK(u && holds_pattern(u, n), "after %s: a round trip works", cases[k].call);
        em_scope_end();
    }
    /* no NVRTC (ctest names a library that does not exist): an op fails with an error that
       says so, and the next op too (not a crash, not a silent NULL) */
    const char *nv = getenv("EMBER_CUDA_NVRTC");
    if (nv && strcmp(nv, "/nonexistent") == 0) {
        em_scope_begin();
        em_tensor *a = patterned(100, dev);
        for (int k = 0; k < 2; k++) {
            CHECK(em_add(a, a) == NULL, "no kernels without NVRTC (try %d)", k);
            CHECK_ERR(EM_ERR_DEVICE, "cannot load NVRTC to compile the CUDA kernels (tried "
                                     "/nonexistent; set the config key cuda_nvrtc");
            em_clear_error();
        }
        em_scope_end();
    }
    /* a fault surfacing at a device synchronisation */
    fail_calls("cuCtxSynchronize", 1, 1);
    CHECK(em_device_sync(dev) == EM_ERR_DEVICE, "em_device_sync reports the fault");
    CHECK_ERR(EM_ERR_DEVICE, "em_device_sync: cuCtxSynchronize failed on cuda:0: "
                             "CUDA_ERROR_LAUNCH_FAILED");
    fail_calls("", 0, 0);
    CHECK(em_device_sync(dev) == EM_OK, "and the next one is fine");
    /* no stream for a new thread: it works on the legacy stream */
    fail_calls("cuStreamCreate", 1, -1);
    void *blk = NULL;
    pthread_t th;
    pthread_create(&th, NULL, make_block, &blk);
    pthread_join(th, NULL);
    fail_calls("", 0, 0);
    CHECK(blk != NULL, "a block made on the legacy stream");
    if (blk) words_are(blk, 4000, 0x600DF00D, "the legacy stream's write");
    cuda_pool_free(0, blk);
    /* the event of a cross-stream reuse fails: the pool waits on the host instead */
    em_stream *a = em_stream_new(dev), *b = em_stream_new(dev);
    void *y, *r = reuse_across(a, b, 300000, 3, 8, true, &y);
    em_stream_use(dev, NULL);
    cuda_pool_free(0, r);
    cuda_pool_free(0, y);
    em_stream_free(a);
    em_stream_free(b);
    em_device_sync(dev);
    em_device_mem_stats m1 = mem(dev);
    CHECK(m1.in_use_bytes == m0.in_use_bytes && em_live_tensors() == live0,
          "nothing held after the faults (%lld bytes in use, was %lld)", (long long)m1.in_use_bytes,
          (long long)m0.in_use_bytes);
    CHECK_OK("faults");
}

/* Whether device tensor t (f32, n values) holds base + i. */
static bool holds(const em_tensor *t, size_t n, float base, const char *what)
{
    float *h = malloc(n * sizeof *h);
    bool ok = h && em_to_data(t, h, EM_F32, (int64_t)n) == EM_OK;
    size_t bad = n;
    for (size_t i = 0; ok && i < n && bad == n; i++)
        if (h[i] != base + (float)i) bad = i;
    CHECK(ok && bad == n, "%s: value %zu is %g, want %g (%s)", what, bad, bad < n ? h[bad] : 0.0,
          base + (double)bad, ok ? "" : em_last_error());
    free(h);
    return ok && bad == n;
}

/* base + i for i < n, as a CPU tensor. */
static em_tensor *ramp(size_t n, float base)
{
    float *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++) h[i] = base + (float)i;
    em_tensor *t = em_from_data(h, EM_F32, EM_SHAPE((int64_t)n), EM_F32, EM_CPU);
    free(h);
    return t;
}

/* Graphs on the mock: device-to-device copies (the work the mock runs) captured and replayed on
 * new inputs written with em_copy_into, the graph's own memory (blocks made in the capture by
 * cuMemAlloc in relaxed mode, reused within it, never handed to others while the graph lives:
 * the mock aborts when memory a live graph uses is freed), and the refusals. */
static void test_graphs(void)
{
    CHECK(em_graph_capture_begin(EM_CPU) == EM_ERR_UNSUPPORTED, "no graphs on the CPU");
    CHECK_ERR(EM_ERR_UNSUPPORTED, "has no graphs");
    CHECK(!em_graph_capture_end(dev), "end without a capture");
    CHECK_ERR(EM_ERR_INVALID_ARG, "is not capturing");
    CHECK(em_graph_replay(NULL) == EM_ERR_INVALID_ARG, "replay NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "NULL");
    em_graph_free(NULL);

    /* 1.5 M floats: the 6 MiB size class, which no earlier test left in the cache */
    const size_t n = 1536 * 1024;
    const int64_t cls = 6 << 20;
    em_tensor *h0 = ramp(n, 0), *x = em_to_device(h0, dev);
    em_release(h0);
    em_device_sync(dev);
    em_device_mem_stats m0 = mem(dev);
    size_t q0 = pending();

    CHECK(!em_graph_capturing(dev), "not capturing before");
    CHECK(em_graph_capture_begin(dev) == EM_OK, "begin (%s)", em_last_error());
    CHECK(em_graph_capturing(dev) && !em_graph_capturing((em_device){dev.backend, 1}),
          "capturing on cuda:0 only");
    CHECK(em_graph_capture_begin(dev) == EM_ERR_INVALID_ARG, "begin twice");
    CHECK_ERR(EM_ERR_INVALID_ARG, "capturing on cuda:0 already");
    CHECK(em_device_empty_cache(dev) == 0, "no cache release while capturing");
    em_tensor *a = em_clone(x); /* a new block (cuMemAlloc during the capture) */
    em_tensor *b = em_clone(a); /* another */
    em_release(a);              /* into the graph's cache ... */
    em_tensor *c = em_clone(b); /* ... and reused here */
    CHECK_OK("the captured clones");
    CHECK(pending() == q0, "captured work is recorded, not queued (%zu -> %zu)", q0, pending());
    em_device_mem_stats m1 = mem(dev);
    CHECK(m1.allocs == m0.allocs + 2 && m1.reuses == m0.reuses + 1,
          "two blocks made in the capture, one reused (allocs %lld -> %lld, reuses %lld -> %lld)",
          (long long)m0.allocs, (long long)m1.allocs, (long long)m0.reuses, (long long)m1.reuses);
    em_graph *g = em_graph_capture_end(dev);
    CHECK(g != NULL, "end (%s)", em_last_error());
    CHECK(!em_graph_capturing(dev), "not capturing after");
    if (!g) {
        em_release(b), em_release(c), em_release(x);
        return;
    }
    CHECK(em_graph_memory_bytes(g) == 2 * cls, "the graph holds %lld bytes, want %lld",
          (long long)em_graph_memory_bytes(g), (long long)(2 * cls));
    CHECK(em_device_empty_cache(dev) >= 0 && mem(dev).cached_bytes == 0, "empty_cache");
    for (int r = 1; r <= 3; r++) {
        em_tensor *in = ramp(n, 1000.0f * (float)r);
        CHECK(em_copy_into(x, in) == EM_OK, "new input %d (%s)", r, em_last_error());
        em_release(in);
        CHECK(em_graph_replay(g) == EM_OK, "replay %d (%s)", r, em_last_error());
        holds(b, n, 1000.0f * (float)r, "b after a replay");
        holds(c, n, 1000.0f * (float)r, "c after a replay");
    }
    /* a tensor of the capture freed while the graph lives: its block stays the graph's */
    em_release(b);
    CHECK(em_graph_memory_bytes(g) == 2 * cls, "b's block kept by the graph");
    em_tensor *in = ramp(n, 7.0f);
    CHECK(em_copy_into(x, in) == EM_OK && em_graph_replay(g) == EM_OK, "replay after b's release");
    em_release(in);
    em_device_empty_cache(dev); /* must not free b's block (the mock aborts if it does) */
    holds(c, n, 7.0f, "c after b's release");
    em_graph_free(g);
    CHECK(mem(dev).cached_bytes == cls, "b's block in the device's cache once the graph is gone");
    holds(c, n, 7.0f, "c outlives its graph");
    em_release(c);
    em_device_empty_cache(dev);
    em_device_mem_stats m2 = mem(dev);
    CHECK(m2.in_use_bytes == m0.in_use_bytes && m2.cached_bytes == 0,
          "all back: %lld in use (%lld before)", (long long)m2.in_use_bytes,
          (long long)m0.in_use_bytes);

    /* refusals void the capture, and what it made goes back */
    em_tensor *host = ramp(16, 0), *small = em_to_device(host, dev);
    CHECK(em_graph_capture_begin(dev) == EM_OK, "begin 2");
    em_tensor *d = em_clone(x);
    CHECK(!em_to_device(host, dev), "a host copy in a capture");
    CHECK_ERR(EM_ERR_INVALID_ARG, "cannot be recorded in a graph capture");
    float v[16];
    CHECK(em_to_data(small, v, EM_F32, 16) == EM_ERR_INVALID_ARG, "a read back in a capture");
    CHECK_ERR(EM_ERR_INVALID_ARG, "reads device memory back to the host");
    CHECK(!em_graph_capture_end(dev), "a refused capture makes no graph");
    CHECK_ERR(EM_ERR_INVALID_ARG, "was refused");
    em_release(d);
    /* a forbidden driver call (a device sync) voids it at the driver */
    CHECK(em_graph_capture_begin(dev) == EM_OK, "begin 3");
    d = em_clone(x);
    CHECK(em_device_sync(dev) != EM_OK, "a sync in a capture");
    CHECK_ERR(EM_ERR_DEVICE, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED");
    CHECK(!em_graph_capture_end(dev), "a void capture makes no graph");
    CHECK_ERR(EM_ERR_DEVICE, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (mock driver); an op during "
                             "the capture failed or did what a graph cannot record");
    em_release(d);
    /* random ops drawing after the generator was reseeded or set back in the capture (the
     * refusal comes before the kernel, which the mock lacks) */
    for (int k = 0; k < 2; k++) {
        em_seed(3);
        em_rng_reserve(1000);
        CHECK(em_graph_capture_begin(dev) == EM_OK, "begin %d", 4 + k);
        if (k == 0)
            em_seed(11);
        else
            em_rng_set_state((em_rng_state){.seed = 3, .offset = 10});
        CHECK(!em_rand(EM_SHAPE(8), EM_F32, dev), "em_rand after %s in a capture",
              k ? "em_rng_set_state" : "em_seed");
        CHECK_ERR(EM_ERR_INVALID_ARG, "reseeded or set back during the graph capture");
        CHECK(!em_graph_capture_end(dev), "a reseeded capture makes no graph");
        CHECK_ERR(EM_ERR_INVALID_ARG, "was refused");
    }
    /* a call that fails in the capture (a shape error) voids it: its work would be missing */
    CHECK(em_graph_capture_begin(dev) == EM_OK, "begin 6");
    d = em_clone(x);
    CHECK(!em_add(d, small), "a shape error in a capture");
    CHECK(!em_graph_capture_end(dev), "a capture with a failed call makes no graph");
    CHECK_ERR(EM_ERR_SHAPE, "em_add");
    em_release(d);
    em_release(host);
    em_release(small);
    /* work goes on as usual after them */
    em_tensor *e = em_clone(x);
    holds(e, n, 7.0f, "an eager clone after the failed captures");
    em_release(e);
    em_release(x);
    em_device_empty_cache(dev);
    CHECK(mem(dev).in_use_bytes == m0.in_use_bytes - cls, "the failed captures' memory is back");
}

/* A graph parameter's fill and drop callbacks count their calls. */
static int fills, drops;
static em_status count_fill(void *ctx, void *dst)
{
    (void)ctx, (void)dst;
    fills++;
    return EM_OK;
}
static void count_drop(void *ctx)
{
    drops++;
    free(ctx);
}

/* The graph parameter block's ownership (the mock runs no kernels, so no replay fills it here):
 * outside a capture nothing is made and the context stays the caller's; in a capture each piece
 * gets device memory and its context is dropped once, when the graph is freed, when the capture
 * is voided, or at once when the piece is refused (over 4000 bytes), which voids the capture. */
static void test_graph_params(void)
{
    void *at = (void *)1, *ctx = malloc(8);
    CHECK(em__graph_param(dev, 64, count_fill, count_drop, ctx, &at) == EM_OK && !at,
          "not capturing: nothing made");
    CHECK(em__graph_param(EM_CPU, 64, count_fill, count_drop, ctx, &at) == EM_OK && !at,
          "the cpu: nothing made");
    free(ctx);
    CHECK(drops == 0, "the caller's context is not dropped");
    em_tensor *host = em_zeros(EM_SHAPE(4), EM_F32, EM_CPU);
    for (int k = 0; k < 3; k++) { /* 0: freed graph, 1: voided capture, 2: refused piece */
        drops = 0;
        CHECK(em_graph_capture_begin(dev) == EM_OK, "params capture %d", k);
        void *p[20];
        for (int i = 0; i < 20; i++) { /* 20 x 4000 bytes: two 64 KiB pages */
            CHECK(em__graph_param(dev, 4000, count_fill, count_drop, malloc(8), &p[i]) == EM_OK &&
                      p[i],
                  "piece %d", i);
            if (i) CHECK(p[i] != p[i - 1], "pieces apart");
        }
        CHECK((char *)p[1] - (char *)p[0] == 4000, "pieces of one page follow each other");
        if (k == 1) {
            CHECK(!em_to_device(host, dev), "a host copy voids the capture");
            CHECK_ERR(EM_ERR_INVALID_ARG, "cannot be recorded in a graph capture");
        }
        if (k == 2) {
            void *q;
            CHECK(em__graph_param(dev, 4001, count_fill, count_drop, malloc(8), &q) ==
                      EM_ERR_INTERNAL,
                  "a piece over 4000 bytes");
            CHECK(drops == 1, "the refused piece's context dropped at once (%d)", drops);
        }
        em_graph *g = em_graph_capture_end(dev);
        CHECK((g != NULL) == (k == 0), "capture %d makes %s", k, k ? "no graph" : "a graph");
        CHECK(drops == (k == 0 ? 0 : 20 + (k == 2)), "capture %d: %d contexts dropped", k, drops);
        em_graph_free(g);
        CHECK(drops == 20 + (k == 2), "capture %d: all contexts dropped once (%d)", k, drops);
        em_clear_error();
    }
    CHECK(fills == 0, "no fill without a replay");
    em_release(host);
}

/* em_copy_into with device memory (same dtype: the copies are the mock's work): host into
 * device, device into host (a pinned host tensor too), device into device on one GPU and across
 * the two; dst keeps its memory and its views see the values. */
static void test_copy_into_device(void)
{
    const size_t n = 3000;
    em_device dev1 = {dev.backend, 1};
    em_scope_begin();
    em_tensor *h = ramp(n, 5.0f), *d = em_zeros(EM_SHAPE((int64_t)n), EM_F32, EM_CPU);
    em_tensor *x = em_to_device(d, dev), *y = em_to_device(d, dev), *z = em_to_device(d, dev1);
    CHECK(em_copy_into(x, h) == EM_OK, "host into cuda:0 (%s)", em_last_error());
    holds(x, n, 5.0f, "host into cuda:0");
    CHECK(em_copy_into(y, x) == EM_OK, "cuda:0 into cuda:0 (%s)", em_last_error());
    holds(y, n, 5.0f, "cuda:0 into cuda:0");
    CHECK(em_copy_into(z, y) == EM_OK, "cuda:0 into cuda:1 (%s)", em_last_error());
    holds(z, n, 5.0f, "cuda:0 into cuda:1");
    em_tensor *view = em_reshape(d, EM_SHAPE(30, 100));
    const float *before = em_tensor_data(d);
    CHECK(em_copy_into(d, z) == EM_OK, "cuda:1 into host (%s)", em_last_error());
    CHECK(em_tensor_data(d) == before, "the host tensor keeps its memory");
    float *v = em_tensor_data(view);
    CHECK(v[0] == 5.0f && v[n - 1] == 5.0f + (float)(n - 1), "a view of dst sees the values");
    em_tensor *p = em_pin_memory(h);
    CHECK(em_copy_into(p, x) == EM_OK, "cuda:0 into a pinned tensor (%s)", em_last_error());
    const float *pv = em_tensor_data(p);
    CHECK(pv[17] == 22.0f, "the pinned tensor holds the values (%g)", pv[17]);
    CHECK_OK("copies");
    em_scope_end();
}

/* cuda_fast_div's constants under the kernels' formula, (umulhi(u, mul) + u) >> shr, against
 * u / d: every divisor below 70000 and a spread of larger ones, at the multiples of d around
 * the top of the range and random u below 2^31. */
static void test_fast_div(void)
{
    uint64_t r = 88172645463325252ull, checks = 0, bad = 0;
    for (uint64_t d = 1; d < (1u << 31); d = d < 70000 ? d + 1 : d * 3 / 2 + 7) {
        uint32_t mul;
        int shr;
        cuda_fast_div(d, &mul, &shr);
        for (int t = 0; t < 40; t++) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            uint64_t u = r & 0x7fffffffu;
            if (t < 4) u = (0x7fffffffu / d - (uint64_t)t / 2) * d + (t & 1 ? d - 1 : 0);
            if (t == 4) u = 0x7fffffffu;
            if (u > 0x7fffffffu) continue;
            uint32_t q = (uint32_t)((((u * mul) >> 32) + u) >> shr);
            checks++;
            if (q != u / d && bad++ < 3)
                CHECK(false, "fast division: %llu / %llu gave %u", (unsigned long long)u,
                      (unsigned long long)d, q);
        }
    }
    CHECK(bad == 0 && checks > 2000000, "fast division: %llu of %llu wrong",
          (unsigned long long)bad, (unsigned long long)checks);
}

int main(void)
{
    em_backends_init();
    const cuda_device_info *d = cuda_device(0);
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *sym = lib ? dlsym(lib, "mock_cuda_pending") : NULL;
    if (em_backend_find("cuda") < 0 || !d || strncmp(d->name, "Ember mock GPU", 14) || !sym) {
        printf("skipped: needs the mock driver (tests/cuda/mock_libcuda.c)\n");
        return 0;
    }
    memcpy(&pending, &sym, sizeof sym);
    void *fsym = dlsym(lib, "mock_cuda_fail");
    memcpy(&fail_calls, &fsym, sizeof fsym);
    const char *env = getenv("MOCK_CUDA_FAIL");
    unpinned = env && strcmp(env, "cuMemHostAlloc") == 0;
    if (unpinned) printf("pinned memory refused: host copies without staging\n");
    if (env && strcmp(env, "cuDeviceCanAccessPeer") == 0)
        printf("peer access refused: cuda:0 <-> cuda:1 through the host\n");
    h_init();
    h_dev = EM_CPU;
    dev = em_device_parse("cuda:0");
    CHECK_OK("cuda:0");
    test_fast_div();
    test_host_copies();
    test_pool_across_streams();
    test_threads();
    test_joined_thread();
    test_peer();
    test_device_queries();
    test_memory_limit();
    test_priorities();
    test_pinned();
    test_graphs();
    test_graph_params();
    test_copy_into_device();
    if (fail_calls) test_faults();
    em_device_sync(dev);
    CHECK_OK("em_device_sync");
    return h_finish();
}
