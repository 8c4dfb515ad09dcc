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
        if (n > 0) CHECK(pending() > 0, "%zu bytes: the copy is still queued at return", n);
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

static void test_pool_across_streams(void)
{
    cuda_pool_empty_cache(0);
    em_stream *a = em_stream_new(dev), *b = em_stream_new(dev), *c = em_stream_new(dev);
    size_t words = 300000, n = words * 4; /* the 2 MiB class */

    /* x written and read on a; freed; taken by b, which writes it. b is synchronised first, so
     * its write runs first unless the pool made b wait for a. */
    em_stream_use(dev, a);
    void *x = cuda_pool_alloc(0, n), *r = cuda_pool_alloc(0, n);
    cuda_memset32(0, x, 1, words, "test");
    cuda_copy_d2d(0, r, x, n, "test");
    em_cuda_pool_stats s0 = stats();
    cuda_pool_free(0, x);
    em_stream_use(dev, b);
    void *y = cuda_pool_alloc(0, n);
    CHECK(y == x, "b took x's block");
    CHECK(stats().stream_waits == s0.stream_waits + 1, "and was made to wait for a");
    cuda_memset32(0, y, 7, words, "test");
    em_stream_sync(b);
    em_stream_use(dev, a);
    words_are(r, words, 1, "a's copy of x after b took x's block");
    em_stream_use(dev, b);
    words_are(y, words, 7, "b's write");

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
    h_init();
    h_dev = EM_CPU;
    dev = em_device_parse("cuda:0");
    CHECK_OK("cuda:0");
    test_host_copies();
    test_pool_across_streams();
    test_threads();
    test_joined_thread();
    test_peer();
    em_device_sync(dev);
    CHECK_OK("em_device_sync");
    return h_finish();
}
