/* The CUDA runtime's streams, events, pool, host copies and device-to-device moves: work on two
 * explicit streams ordered by events, pool blocks freed on one stream while its work still runs
 * and taken by another (which must wait), host copies of sizes around the staging chunk (the host
 * buffer scribbled over as soon as the call returns), host threads on their own default streams
 * sharing the pool, and to_device between two GPUs when there are two. Without a CUDA device it
 * prints one line and passes. */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include <ember/ember.h>

#include "backend/cuda/cuda.h"
#include "harness.h"
#include "tensor/tensor_impl.h"

static em_device dev;

/* Whether every element of t (read back on the current stream) equals v; reports the first
 * other one under what. */
static void check_all(const char *what, em_tensor *t, double v)
{
    CHECK(t != NULL, "%s: missing result (%s)", what, em_last_error());
    if (!t) return;
    int64_t n = em_tensor_numel(t);
    double *h = malloc((size_t)(n ? n : 1) * sizeof *h);
    em_to_data(t, h, EM_F64, n);
    CHECK_OK(what);
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (h[i] != v) bad = i;
    CHECK(bad < 0, "%s: element %lld is %.17g, want %.17g", what, (long long)bad,
          bad < 0 ? 0.0 : h[bad], v);
    free(h);
}

/* A few long f64 products on the current stream (tens of milliseconds), to hold it up. */
static void hold_up_current_stream(int reps)
{
    em_scope_begin();
    em_tensor *a = em_full(EM_SHAPE(2048, 2048), 1.0, EM_F64, dev);
    em_tensor *b = em_full(EM_SHAPE(2048, 2048), 0.5, EM_F64, dev);
    for (int i = 0; i < reps; i++) em_matmul(a, b);
    CHECK_OK("long products");
    em_scope_end(); /* the blocks go back to the pool; the products still run */
}

/* ---- two streams ordered by events ------------------------------------------------------ */

static void test_two_streams(void)
{
    em_scope_begin();
    int64_t n = (int64_t)1 << 21; /* 8 MiB of f32: two staging chunks */
    em_tensor *x = em_to_device(em_arange(0, (double)n, 1, EM_F32, EM_CPU), dev);
    em_stream *def = em_stream_current(dev);
    /* a, at a higher priority than b, runs the same work */
    em_stream *a = em_stream_new_priority(dev, -1), *b = em_stream_new(dev);
    em_event *ex = em_event_new(dev), *ea = em_event_new(dev), *eb = em_event_new(dev);
    CHECK(def && a && b && ex && ea && eb, "streams and events (%s)", em_last_error());
    em_stream *top = em_stream_new_priority(dev, -1000);
    CHECK(em_stream_priority(a) == -1 && em_stream_priority(b) == 0 && top &&
              em_stream_priority(top) <= -1,
          "priorities -1, 0 and the device's greatest (%d)", top ? em_stream_priority(top) : 0);
    em_stream_free(top);
    CHECK(em_event_record(ex, NULL) == EM_OK, "record x's copy on the default stream");

    CHECK(em_stream_use(dev, a) == EM_OK && em_stream_current(dev) == a, "use a");
    em_stream_wait(NULL, ex);
    em_tensor *y = x;
    for (int i = 0; i < 20; i++) y = em_add_scalar(y, 1.0); /* y = x + 20, 20 launches on a */
    em_event_record(ea, NULL);

    CHECK(em_stream_use(dev, b) == EM_OK && em_stream_current(dev) == b, "use b");
    em_stream_wait(NULL, ex);
    em_tensor *z = em_mul_scalar(x, 3.0); /* on b, may overlap a's work */
    em_stream_wait(NULL, ea);
    em_tensor *w = em_add(y, z); /* 4 x + 20, on b after a */
    em_event_record(eb, NULL);

    CHECK(em_stream_use(dev, NULL) == EM_OK && em_stream_current(dev) == def, "back to default");
    em_stream_wait(NULL, eb);
    CHECK_OK("queueing on two streams");
    double *h = malloc((size_t)n * sizeof *h);
    em_to_data(w, h, EM_F64, n); /* on the default stream, which waits for b */
    CHECK_OK("read w");
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (h[i] != 4.0 * (double)i + 20.0) bad = i;
    CHECK(bad < 0, "two streams: w[%lld] = %.17g, want %.17g", (long long)bad,
          bad < 0 ? 0.0 : h[bad], bad < 0 ? 0.0 : 4.0 * (double)bad + 20.0);
    free(h);

    CHECK(em_event_sync(eb) == EM_OK, "em_event_sync");
    double ms = em_event_elapsed_ms(ea, eb);
    CHECK(isfinite(ms) && ms >= 0, "elapsed between a's and b's events: %g (%s)", ms,
          em_last_error());
    em_clear_error();
    CHECK(em_stream_sync(a) == EM_OK && em_stream_sync(b) == EM_OK, "em_stream_sync");
    CHECK(em_stream_use(EM_CPU, a) != EM_OK, "a cuda stream is not the cpu's");
    CHECK_ERR(EM_ERR_DEVICE, "em_stream_use: the stream belongs to device");
    em_event_free(ex);
    em_event_free(ea);
    em_event_free(eb);
    em_stream_free(a);
    em_stream_free(b);
    em_scope_end();
}

/* ---- the pool across streams -------------------------------------------------------------- */

static em_cuda_pool_stats stats(void)
{
    em_cuda_pool_stats s;
    memset(&s, 0, sizeof s);
    CHECK(cuda_pool_stats(dev.index, &s), "pool stats");
    return s;
}

/* t is written on stream A and read there only after stream C's long products; t is freed at
 * once (host side) and its block taken by stream B, which writes it. B must wait for A's read:
 * without that, B's write lands first (A is held up by C) and A reads 7 instead of 1.5. */
static void test_pool_across_streams(void)
{
    em_device_sync(dev);
    cuda_pool_empty_cache(dev.index);
    em_scope_begin();
    em_stream *sa = em_stream_new(dev), *sb = em_stream_new(dev), *sc = em_stream_new(dev);
    em_event *done_c = em_event_new(dev);
    CHECK(sa && sb && sc && done_c, "streams (%s)", em_last_error());

    em_stream_use(dev, sc);
    hold_up_current_stream(4);
    em_event_record(done_c, NULL);

    em_stream_use(dev, sa);
    int64_t n = 777777; /* 3.1 MB: the 4 MiB class, which no other block here uses */
    em_tensor *t = em_full(EM_SHAPE(n), 1.5, EM_F32, dev);
    em_stream_wait(NULL, done_c);
    em_tensor *r = em_mul_scalar(t, 2.0); /* queued behind C's products */
    void *tp = tn_ptr(t);
    em_cuda_pool_stats s0 = stats();
    em_release(t); /* freed while A's read of it waits */

    em_stream_use(dev, sb);
    em_tensor *u = em_full(EM_SHAPE(n), 7.0, EM_F32, dev);
    em_tensor *u1 = em_add_scalar(u, 1.0);
    em_cuda_pool_stats s1 = stats();
    CHECK(u && tn_ptr(u) == tp, "stream B took t's block (%p, t had %p)",
          u ? (void *)tn_ptr(u) : NULL, tp);
    CHECK(s1.stream_waits > s0.stream_waits, "the reuse made B wait (%lld -> %lld)",
          (long long)s0.stream_waits, (long long)s1.stream_waits);

    /* the same with the block freed on another stream than its own: t2 is A's, read on C after
     * another hold-up and freed while C is current; A's next request must wait for C */
    em_stream_use(dev, sa);
    em_tensor *t2 = em_full(EM_SHAPE(n), 2.0, EM_F32, dev);
    em_event *t2_ready = em_event_new(dev);
    em_event_record(t2_ready, NULL);
    em_stream_use(dev, sc);
    em_stream_wait(NULL, t2_ready);
    hold_up_current_stream(3);
    em_tensor *q = em_mul_scalar(t2, 5.0);
    void *t2p = tn_ptr(t2);
    em_release(t2); /* freed with C current */
    em_stream_use(dev, sa);
    em_cuda_pool_stats s2 = stats();
    em_tensor *v = em_full(EM_SHAPE(n), 9.0, EM_F32, dev);
    em_cuda_pool_stats s3 = stats();
    CHECK(v && tn_ptr(v) == t2p, "stream A took t2's block back");
    CHECK(s3.stream_waits > s2.stream_waits, "and waited for C's read (%lld -> %lld)",
          (long long)s2.stream_waits, (long long)s3.stream_waits);
    CHECK_OK("queueing");

    em_stream_sync(sa);
    em_stream_sync(sb);
    em_stream_sync(sc);
    em_stream_use(dev, NULL);
    check_all("A's result after its block went to B", r, 3.0);
    check_all("B's write", u, 7.0);
    check_all("B's later work", u1, 8.0);
    check_all("C's result after its input went back to A", q, 10.0);
    check_all("A's write", v, 9.0);
    em_event_free(done_c);
    em_event_free(t2_ready);
    em_stream_free(sa);
    em_stream_free(sb);
    em_stream_free(sc);
    em_scope_end();
}

/* ---- host copies ---------------------------------------------------------------------------- */

static unsigned char pattern(size_t i, size_t n)
{
    uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ n;
    return (unsigned char)(h >> 56);
}

static void test_host_copies(void)
{
    size_t c = cuda_copy_chunk();
    size_t sizes[] = {0, 1, 7, c - 1, c, c + 1, 2 * c, 3 * c + 5, 9 * c + 3};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        em_scope_begin();
        unsigned char *src = malloc(n + 2), *back = malloc(n + 2);
        for (size_t i = 0; i < n; i++) src[i] = pattern(i, n);

        /* through the tensor API; the host buffer is overwritten as soon as the copy returns */
        em_tensor *t = em_from_data(src, EM_U8, EM_SHAPE((int64_t)n), EM_U8, dev);
        memset(src, 0xEE, n);
        CHECK(t != NULL, "from_data %zu bytes (%s)", n, em_last_error());
        memset(back, 0x55, n + 2);
        em_to_data(t, back, EM_U8, (int64_t)n);
        CHECK_OK("to_data");
        size_t bad = n;
        for (size_t i = 0; i < n && bad == n; i++)
            if (back[i] != pattern(i, n)) bad = i;
        CHECK(bad == n, "round trip of %zu bytes: byte %zu is %d, want %d", n, bad,
              bad < n ? back[bad] : 0, bad < n ? pattern(bad, n) : 0);

        /* the backend's copies with odd host addresses, queued behind a long product so the DMAs
         * are still waiting when the host buffer is reused */
        for (size_t i = 0; i < n; i++) src[i + 1] = pattern(i, n);
        void *d = cuda_pool_alloc(dev.index, n ? n : 1);
        CHECK(d != NULL, "pool alloc %zu", n);
        hold_up_current_stream(1);
        CHECK(cuda_copy_from_host(dev.index, d, src + 1, n, "test") == EM_OK, "to device (%s)",
              em_last_error());
        memset(src + 1, 0x11, n);
        memset(back, 0x55, n + 2);
        CHECK(cuda_copy_to_host(dev.index, back + 1, d, n, "test") == EM_OK, "to host (%s)",
              em_last_error());
        bad = n;
        for (size_t i = 0; i < n && bad == n; i++)
            if (back[i + 1] != pattern(i, n)) bad = i;
        CHECK(bad == n, "staged copies of %zu bytes: byte %zu is %d, want %d", n, bad,
              bad < n ? back[bad + 1] : 0, bad < n ? pattern(bad, n) : 0);
        CHECK(back[0] == 0x55 && back[n + 1] == 0x55, "no byte outside [1, %zu] written", n);
        cuda_pool_free(dev.index, d);
        free(src);
        free(back);
        em_scope_end();
    }
    printf("host copies: staging chunk %zu bytes\n", c);
}

/* ---- host threads ------------------------------------------------------------------------- */

typedef struct worker {
    int id;
    int bad_iter; /* -1: all good */
    double got;
    char err[256];
} worker;

#define WORK_N 300000

static void *work(void *p)
{
    worker *w = p;
    w->bad_iter = -1;
    float *h = malloc(WORK_N * sizeof *h);
    for (int it = 0; it < 40 && w->bad_iter < 0; it++) {
        em_scope_begin();
        em_tensor *x = em_full(EM_SHAPE(WORK_N), (double)w->id, EM_F32, dev);
        for (int k = 0; k < 5; k++) x = em_add_scalar(x, 1.0); /* temporaries go to the pool */
        if (em_to_data(x, h, EM_F32, WORK_N) != EM_OK) {
            snprintf(w->err, sizeof w->err, "%s", em_last_error());
            w->bad_iter = it;
        }
        for (int i = 0; i < WORK_N && w->bad_iter < 0; i++)
            if (h[i] != (float)(w->id + 5)) w->bad_iter = it, w->got = h[i];
        em_scope_end();
    }
    free(h);
    return NULL; /* the thread's stream is passed on when it exits */
}

static void test_threads(void)
{
    enum { T = 4 };
    pthread_t th[T];
    worker w[T];
    for (int i = 0; i < T; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].id = 10 * (i + 1);
        CHECK(pthread_create(&th[i], NULL, work, &w[i]) == 0, "pthread_create");
    }
    for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < T; i++)
        CHECK(w[i].bad_iter < 0, "thread %d: iteration %d read %g, want %d %s", i, w[i].bad_iter,
              w[i].got, w[i].id + 5, w[i].err);
    /* their blocks, freed on the threads' streams, serve this thread */
    em_scope_begin();
    em_tensor *x = em_add_scalar(em_full(EM_SHAPE(WORK_N), 1.0, EM_F32, dev), 1.0);
    check_all("after the threads", x, 2.0);
    em_scope_end();
}

/* A tensor made by a thread is ready for another once the thread has been joined. */
static void *make_tensor(void *p)
{
    em_tensor **out = p;
    em_tensor *big = em_full(EM_SHAPE(2048, 2048), 1.0, EM_F64, dev);
    em_tensor *prod = em_matmul(big, big); /* long, queued on this thread's stream */
    *out = em_add_scalar(prod, 1.0);       /* 2049 everywhere */
    em_release(prod);
    em_release(big);
    return NULL;
}

static void test_joined_thread(void)
{
    em_tensor *t = NULL;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, make_tensor, &t) == 0, "pthread_create");
    pthread_join(th, NULL);
    check_all("a joined thread's tensor", t, 2049.0);
    em_release(t);
}

/* ---- two devices -------------------------------------------------------------------------- */

static void test_two_devices(void)
{
    int count = cuda_device_count();
    if (count < 2) {
        printf("skipped: to_device between GPUs needs 2 devices (found %d)\n", count);
        return;
    }
    em_device d1 = em_device_parse("cuda:1");
    CHECK_OK("cuda:1");
    size_t c = cuda_copy_chunk();
    int64_t lens[] = {1, 1000, (int64_t)(c / 4) + 3, (int64_t)(3 * c / 8) + 1};
    em_dtype dts[] = {EM_F32, EM_F64};
    for (int k = 0; k < 4; k++)
        for (int di = 0; di < 2; di++) {
            em_scope_begin();
            char what[96];
            snprintf(what, sizeof what, "cuda:0 -> cuda:1 -> cuda:0, %lld %s", (long long)lens[k],
                     em_dtype_name(dts[di]));
            em_tensor *host = h_rand(EM_SHAPE(lens[k]), dts[di], H_CONTIG, -3, 3, NULL);
            em_tensor *x0 = em_to_device(host, dev);
            em_tensor *x1 = em_to_device(x0, d1);
            CHECK(x1 && em_device_equal(em_tensor_device(x1), d1), "%s: on cuda:1", what);
            em_release(x0); /* its block is taken at once by a write on cuda:0 */
            em_tensor *junk = em_full(EM_SHAPE(lens[k]), 99.0, dts[di], dev);
            (void)junk;
            em_tensor *y1 = em_mul_scalar(x1, 2.0); /* on cuda:1 */
            em_tensor *back = em_to_device(y1, dev);
            h_compare_dev(what, back, em_mul_scalar(host, 2.0), 0, 0, dev);
            h_compare_dev("the copy on cuda:1", x1, host, 0, 0, d1);
            em_scope_end();
        }
    /* a strided view moves as its values */
    em_scope_begin();
    em_tensor *host = h_rand(EM_SHAPE(300, 517), EM_F32, H_CONTIG, -1, 1, NULL);
    em_tensor *x0 = em_transpose(em_to_device(host, dev), 0, 1);
    em_tensor *x1 = em_to_device(x0, d1);
    h_compare_dev("transposed cuda:0 -> cuda:1", x1, em_transpose(host, 0, 1), 0, 0, d1);
    em_scope_end();
    em_device_sync(d1);
    printf("to_device between cuda:0 and cuda:1: checked\n");
}

/* Pinned tensors on a real driver: page-locked, one DMA each way, the values exact. */
static void test_pinned(void)
{
    em_scope_begin();
    int64_t n = 3 << 20; /* 12 MiB of f32: past the staging chunks */
    em_tensor *h = em_arange(0, (double)n, 1, EM_F32, EM_CPU);
    em_tensor *p = em_pin_memory(h);
    CHECK(p && em_tensor_is_pinned(p), "pinned (%s)", em_last_error());
    em_tensor *d = em_to_device(p, dev);
    float *w = em_tensor_data(p); /* waits for the DMA */
    for (int64_t i = 0; w && i < n; i++) w[i] = -1.0f;
    em_tensor *back = em_pin_memory(em_mul_scalar(d, 2.0));
    CHECK(back && em_tensor_is_pinned(back), "a device tensor pinned on the host");
    const float *b = back ? em_tensor_data(back) : NULL;
    int64_t bad = -1;
    for (int64_t i = 0; b && i < n && bad < 0; i++)
        if (b[i] != 2.0f * (float)i) bad = i;
    CHECK(b && bad < 0, "2 x arange through pinned memory: element %lld differs", (long long)bad);
    em_scope_end();
    CHECK_OK("pinned");
}

/* ---- graphs --------------------------------------------------------------------------------- */

/* Largest |a - b| over two tensors of one shape (read back); -1 on error. */
static double max_diff(em_tensor *a, em_tensor *b)
{
    int64_t n = em_tensor_numel(a);
    double *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y), m = 0;
    if (em_to_data(a, x, EM_F64, n) != EM_OK || em_to_data(b, y, EM_F64, n) != EM_OK) m = -1;
    for (int64_t i = 0; i < n && m >= 0; i++) m = fmax(m, fabs(x[i] - y[i]));
    free(x);
    free(y);
    return m;
}

/* An MLP's forward pass, and a forward and backward pass, captured once and replayed on new
 * inputs written with em_copy_into: each replay's results against the same calls run eagerly on
 * that input; then the refusals on a real driver (a read back, a random op) and the memory. */
static void test_graphs(void)
{
    em_device_sync(dev);
    em_device_mem_stats m0;
    em_device_get_mem_stats(dev, &m0);
    em_scope_begin();
    em_tensor *x = em_randn(EM_SHAPE(128, 256), EM_F32, dev);
    em_tensor *w1 =
        em_requires_grad(em_mul_scalar(em_randn(EM_SHAPE(256, 512), EM_F32, dev), 0.06), true);
    em_tensor *b1 = em_requires_grad(em_zeros(EM_SHAPE(512), EM_F32, dev), true);
    em_tensor *w2 =
        em_requires_grad(em_mul_scalar(em_randn(EM_SHAPE(512, 64), EM_F32, dev), 0.04), true);
    CHECK_OK("graph inputs");
    /* eager first: kernels compile on first use, which a capture cannot do */
    for (int pass = 0; pass < 2; pass++) {
        em_graph *g = NULL;
        em_tensor *y = NULL, *gw1 = NULL, *gb1 = NULL;
        for (int mode = 0; mode < 2; mode++) { /* 0: warm-up, 1: capture */
            if (mode == 1)
                CHECK(em_graph_capture_begin(dev) == EM_OK, "capture (%s)", em_last_error());
            em_scope_begin();
            if (pass == 0) em_no_grad_begin();
            em_tensor *h = em_relu(em_add(em_matmul(x, w1), b1));
            em_tensor *out = em_softmax(em_matmul(h, w2), -1);
            if (pass == 1) {
                em_grads *gr = em_backward(em_mean(em_square(out), EM_ALL, false));
                gw1 = em_retain(em_grad(gr, w1));
                gb1 = em_retain(em_grad(gr, b1));
                em_grads_free(gr);
            } else {
                em_no_grad_end();
            }
            y = em_retain(out);
            em_scope_end();
            CHECK_OK(mode ? "captured calls" : "warm-up");
            if (mode == 1) {
                g = em_graph_capture_end(dev);
                CHECK(g != NULL, "graph %d (%s)", pass, em_last_error());
            } else {
                em_release(y), em_release(gw1), em_release(gb1);
                y = gw1 = gb1 = NULL;
            }
        }
        if (!g) break;
        CHECK(em_graph_memory_bytes(g) > 0, "graph %d holds memory", pass);
        for (int r = 0; r < 3; r++) {
            em_scope_begin();
            CHECK(em_copy_into(x, em_randn(EM_SHAPE(128, 256), EM_F32, EM_CPU)) == EM_OK,
                  "new input (%s)", em_last_error());
            CHECK(em_graph_replay(g) == EM_OK, "replay (%s)", em_last_error());
            /* the same calls eagerly on this input */
            if (pass == 0) em_no_grad_begin();
            em_tensor *h = em_relu(em_add(em_matmul(x, w1), b1));
            em_tensor *out = em_softmax(em_matmul(h, w2), -1);
            double d = max_diff(out, y);
            CHECK(d >= 0 && d <= 1e-6, "graph %d replay %d: output differs by %g", pass, r, d);
            if (pass == 1) {
                em_grads *gr = em_backward(em_mean(em_square(out), EM_ALL, false));
                double dw = max_diff(em_grad(gr, w1), gw1), db = max_diff(em_grad(gr, b1), gb1);
                CHECK(dw >= 0 && dw <= 1e-6 && db >= 0 && db <= 1e-6,
                      "graph %d replay %d: gradients differ by %g, %g", pass, r, dw, db);
                em_grads_free(gr);
            } else {
                em_no_grad_end();
            }
            em_scope_end();
        }
        em_graph_free(g);
        em_release(y), em_release(gw1), em_release(gb1);
    }
    /* refusals: a read back and a reseeding void a capture; an eager op works after them */
    CHECK(em_graph_capture_begin(dev) == EM_OK, "capture 3");
    em_scope_begin();
    em_tensor *t = em_add_scalar(x, 1.0);
    CHECK(isnan(em_item_f64(em_sum(t, EM_ALL, false))), "a read back in a capture");
    CHECK_ERR(EM_ERR_INVALID_ARG, "reads device memory back to the host");
    em_seed(5);
    CHECK(!em_dropout(t, 0.5, true), "dropout after em_seed in a capture");
    CHECK_ERR(EM_ERR_INVALID_ARG, "reseeded or set back during the graph capture");
    em_scope_end();
    CHECK(!em_graph_capture_end(dev), "a refused capture");
    CHECK_ERR(EM_ERR_INVALID_ARG, "was refused");
    em_scope_end();
    em_device_empty_cache(dev);
    em_device_mem_stats m1;
    em_device_get_mem_stats(dev, &m1);
    CHECK(m1.in_use_bytes == m0.in_use_bytes && m1.cached_bytes == 0,
          "graph memory back: %lld in use (%lld before), %lld cached", (long long)m1.in_use_bytes,
          (long long)m0.in_use_bytes, (long long)m1.cached_bytes);
}

/* The captured random calls of test_graph_random, into *y and *z. */
static void random_calls(em_tensor *x, em_tensor **y, em_tensor **z)
{
    em_scope_begin();
    *y = em_retain(em_add(em_dropout(x, 0.3, true), em_rand_like(x)));
    *z = em_retain(em_randn(EM_SHAPE(1001), EM_F32, dev)); /* an odd count: a half-used counter */
    em_scope_end();
}

/* Random ops in a graph: each replay draws what the captured calls draw when run eagerly from the
 * generator as it is at the replay (the same bits: em_rng_set_state and em_seed between replays
 * are honoured) and moves the generator on by as much; replays differ from each other. */
static void test_graph_random(void)
{
    em_scope_begin();
    em_tensor *x = em_to_device(h_rand(EM_SHAPE(64, 300), EM_F32, H_CONTIG, -1, 1, NULL), dev);
    em_tensor *y, *z, *ey, *ez, *prev = NULL;
    random_calls(x, &y, &z); /* eager first: kernels compile on first use */
    em_release(y), em_release(z);
    em_seed(42);
    CHECK(em_graph_capture_begin(dev) == EM_OK, "random capture (%s)", em_last_error());
    random_calls(x, &y, &z);
    em_graph *g = em_graph_capture_end(dev);
    CHECK(g != NULL, "random graph (%s)", em_last_error());
    uint64_t drawn = em_rng_get_state().offset; /* what the capture drew from seed 42, offset 0 */
    for (int r = 0; g && r < 4; r++) {
        if (r == 3) em_seed(7);
        em_rng_state before = em_rng_get_state();
        CHECK(em_graph_replay(g) == EM_OK, "random replay %d (%s)", r, em_last_error());
        em_rng_state after = em_rng_get_state();
        CHECK(after.seed == before.seed && after.offset == before.offset + drawn,
              "replay %d moves the generator from %llu by %llu (to %llu)", r,
              (unsigned long long)before.offset, (unsigned long long)drawn,
              (unsigned long long)after.offset);
        em_rng_set_state(before);
        random_calls(x, &ey, &ez);
        CHECK(em_rng_get_state().offset == after.offset, "the eager calls draw as much");
        double dy = max_diff(y, ey), dz = max_diff(z, ez);
        CHECK(dy == 0 && dz == 0, "replay %d: %g, %g from the eager draws", r, dy, dz);
        if (prev) CHECK(max_diff(prev, y) > 0, "replay %d draws anew", r);
        em_release(prev);
        prev = em_clone(y);
        em_release(ey), em_release(ez);
    }
    em_graph_free(g);
    em_release(prev), em_release(y), em_release(z);
    em_scope_end();
}

/* ---- index ops in a graph ------------------------------------------------------------------ */

#define IX_N 2000 /* table rows: more than one 1024-wide scan chunk of idx_sort */
#define IX_M 3000 /* index_add sources: many groups of 32 for its placing warp */

/* The inputs of the captured index calls: tables, indices and sources, all on the device. */
typedef struct ix_inputs {
    em_tensor *x, *xi, *col;       /* f32 [N, 8], i32 [N, 8], f32 [N] */
    em_tensor *ig, *is, *ie, *ia;  /* i64 [N, 3] (gather on dim 1), [40], [4, 10], [M] */
    em_tensor *srcg, *srca, *srcv; /* f32 [N, 3], [M, 8], [M] */
} ix_inputs;

static void ix_make(ix_inputs *c)
{
    em_scope_begin();
    c->x = em_retain(em_to_device(h_rand(EM_SHAPE(IX_N, 8), EM_F32, H_CONTIG, -1, 1, NULL), dev));
    c->xi = em_retain(em_randint(-1000, 1000, EM_SHAPE(IX_N, 8), EM_I32, dev));
    c->col = em_retain(em_to_device(h_rand(EM_SHAPE(IX_N), EM_F32, H_CONTIG, -1, 1, NULL), dev));
    c->ig = em_retain(em_zeros(EM_SHAPE(IX_N, 3), EM_I64, dev));
    c->is = em_retain(em_zeros(EM_SHAPE(40), EM_I64, dev));
    c->ie = em_retain(em_zeros(EM_SHAPE(4, 10), EM_I64, dev));
    c->ia = em_retain(em_zeros(EM_SHAPE(IX_M), EM_I64, dev));
    c->srcg = em_retain(em_zeros(EM_SHAPE(IX_N, 3), EM_F32, dev));
    c->srca = em_retain(em_zeros(EM_SHAPE(IX_M, 8), EM_F32, dev));
    c->srcv = em_retain(em_zeros(EM_SHAPE(IX_M), EM_F32, dev));
    em_scope_end();
}

static void ix_free(ix_inputs *c)
{
    em_tensor *all[] = {c->x, c->xi, c->col, c->ig, c->is, c->ie, c->ia, c->srcg, c->srca, c->srcv};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) em_release(all[i]);
}

static void ix_calls(const ix_inputs *c, em_tensor *out[7])
{
    em_scope_begin();
    out[0] = em_retain(em_gather(c->x, 1, c->ig));
    out[1] = em_retain(em_index_select(c->x, 0, c->is));
    out[2] = em_retain(em_index_select(c->xi, 0, c->is));
    out[3] = em_retain(em_embedding(c->x, c->ie));
    out[4] = em_retain(em_index_add(c->x, 0, c->ia, c->srca, 0.5));          /* sorted: idx_sort */
    out[5] = em_retain(em_scatter(c->x, 1, c->ig, c->srcg, EM_SCATTER_ADD)); /* 3 per line */
    out[6] = em_retain(em_scatter(c->col, 0, c->ia, c->srcv, EM_SCATTER_ASSIGN)); /* sorted */
    em_scope_end();
}

static void ix_put(em_tensor *t, const void *h, em_dtype dt)
{
    em_scope_begin();
    em_copy_into(t, em_from_data(h, dt, em_tensor_shape(t), dt, EM_CPU));
    em_scope_end();
}

/* Index values for replay r into the graph's inputs c and the eager twin's e: r 0 uniform, r 1
 * heavy duplicates (five destinations for the 3000 sources), r 2 uniform with values out of range
 * in c; e gets them replaced by an in-range value and their sources zeroed (an added 0 changes
 * nothing; an assigned source replaced by the last source's destination is overwritten by it),
 * which is what dropping them gives. */
static void ix_fill(const ix_inputs *c, const ix_inputs *e, int r, uint64_t *rng)
{
    static int64_t hg[IX_N * 3], hs[40], he[40], ha[IX_M];
    static float sg[IX_N * 3], sa[IX_M * 8], sv[IX_M];
#define IX_NEXT(n)                                                                                 \
    (int64_t)((*rng = *rng * 6364136223846793005ull + 1442695040888963407ull) >> 33) % (n)
    for (int i = 0; i < IX_N * 3; i++) hg[i] = IX_NEXT(r == 1 ? 2 : 8), sg[i] = (float)(i % 7) - 3;
    for (int i = 0; i < 40; i++)
        hs[i] = r == 1 ? 7 : IX_NEXT(IX_N), he[i] = IX_NEXT(r == 1 ? 3 : IX_N);
    for (int i = 0; i < IX_M; i++) ha[i] = IX_NEXT(r == 1 ? 5 : IX_N), sv[i] = (float)i;
    for (int i = 0; i < IX_M * 8; i++) sa[i] = (float)((i * 37) % 101) / 17.0f;
#undef IX_NEXT
    for (int pass = 0; pass < 2; pass++) {
        const ix_inputs *t = pass ? e : c;
        if (pass && r == 2) { /* the eager twin's stand-ins for the graph's bad values */
            hg[7 * 3 + 1] = 0, sg[7 * 3 + 1] = 0;
            hs[3] = 0, he[12] = 0;
            for (int k = 100; k <= 200; k += 100) {
                ha[k] = ha[IX_M - 1];
                for (int j = 0; j < 8; j++) sa[k * 8 + j] = 0;
            }
        } else if (r == 2) {
            hg[7 * 3 + 1] = 8, hs[3] = IX_N, he[12] = -1, ha[100] = 5000, ha[200] = -3;
        }
        ix_put(t->ig, hg, EM_I64), ix_put(t->is, hs, EM_I64), ix_put(t->ie, he, EM_I64);
        ix_put(t->ia, ha, EM_I64), ix_put(t->srcg, sg, EM_F32), ix_put(t->srca, sa, EM_F32);
        ix_put(t->srcv, sv, EM_F32);
    }
}

/* a equal to b element for element, except at [lo, hi), where a must read NaN (0 for an integer
 * a): the gathers' answer to an index out of range in a graph. */
static void ix_check(const char *what, int r, em_tensor *a, em_tensor *b, int64_t lo, int64_t hi)
{
    int64_t n = em_tensor_numel(a);
    double *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    bool ok = em_to_data(a, x, EM_F64, n) == EM_OK && em_to_data(b, y, EM_F64, n) == EM_OK;
    CHECK(ok, "%s, replay %d: read back (%s)", what, r, em_last_error());
    bool isf = em_dtype_is_float(em_tensor_dtype(a));
    int64_t bad = -1;
    for (int64_t i = 0; ok && i < n && bad < 0; i++) {
        bool poisoned = i >= lo && i < hi;
        if (poisoned ? !(isf ? isnan(x[i]) : x[i] == 0) : x[i] != y[i]) bad = i;
    }
    CHECK(bad < 0, "%s, replay %d: element %lld is %.9g (eager %.9g%s)", what, r, (long long)bad,
          bad < 0 ? 0 : x[bad], bad < 0 ? 0 : y[bad],
          bad >= lo && bad < hi ? ", want the poison" : "");
    free(x);
    free(y);
}

/* Index ops in a graph, captured without their read-back range check: gather, index_select (f32
 * and i32), embedding, a scatter-add with three sources per line, and an index_add and a 1-D
 * scatter with 3000 sources each (sorted by destination on the device in a capture, on the host
 * eagerly), replayed on new indices against the same calls run eagerly: bit for bit, with heavy
 * duplicates too; then with indices out of range: the gathers read NaN (0 for the i32 table),
 * the scatters drop the sources. */
static void test_graph_index(void)
{
    ix_inputs c, e;
    ix_make(&c);
    ix_make(&e);
    em_scope_begin();
    em_copy_into(e.x, c.x), em_copy_into(e.xi, c.xi), em_copy_into(e.col, c.col);
    em_scope_end();
    uint64_t rng = 1;
    em_tensor *out[7], *want[7];
    ix_fill(&c, &e, 0, &rng);
    ix_calls(&c, out); /* eager first: kernels compile on first use */
    for (int i = 0; i < 7; i++) em_release(out[i]);
    CHECK_OK("index calls");
    CHECK(em_graph_capture_begin(dev) == EM_OK, "index capture (%s)", em_last_error());
    ix_calls(&c, out);
    em_graph *g = em_graph_capture_end(dev);
    CHECK(g != NULL, "index graph (%s)", em_last_error());
    static const char *names[7] = {"gather",    "index_select", "index_select i32",  "embedding",
                                   "index_add", "scatter add",  "scatter assign 1-d"};
    for (int r = 0; g && r < 3; r++) {
        ix_fill(&c, &e, r, &rng);
        CHECK(em_graph_replay(g) == EM_OK, "index replay %d (%s)", r, em_last_error());
        ix_calls(&e, want);
        CHECK_OK("eager index calls");
        /* the poisoned elements of replay 2: gather [7, 1]; index_select row 3; embedding
         * token 12 */
        int64_t lo[7] = {0}, hi[7] = {0};
        if (r == 2) {
            lo[0] = 7 * 3 + 1, hi[0] = lo[0] + 1;
            lo[1] = lo[2] = 3 * 8, hi[1] = hi[2] = 4 * 8;
            lo[3] = 12 * 8, hi[3] = 13 * 8;
        }
        for (int i = 0; i < 7; i++) {
            ix_check(names[i], r, out[i], want[i], lo[i], hi[i]);
            em_release(want[i]);
        }
    }
    em_graph_free(g);
    for (int i = 0; i < 7; i++) em_release(out[i]);
    ix_free(&c);
    ix_free(&e);
}

/* A call that fails inside a capture (its error still pending at the end) voids it: the graph
 * would lack its work. */
static void test_graph_failed_call(void)
{
    em_scope_begin();
    em_tensor *a = em_zeros(EM_SHAPE(3), EM_F32, dev), *b = em_zeros(EM_SHAPE(4), EM_F32, dev);
    CHECK_OK("inputs");
    CHECK(em_graph_capture_begin(dev) == EM_OK, "capture");
    em_add_scalar(a, 1.0);
    CHECK(!em_add(a, b), "a shape error in a capture");
    CHECK(!em_graph_capture_end(dev), "no graph after a failed call");
    CHECK_ERR(EM_ERR_SHAPE, "em_add"); /* the first error stays the one reported */
    CHECK(em_add_scalar(a, 1.0) != NULL, "eager work after it (%s)", em_last_error());
    em_scope_end();
}

/* One training step of m under o on (x, y): forward, the loss (cross entropy for class indices y,
 * else MSE), backward, update. */
static void train_step(em_module *m, em_optim *o, em_tensor *x, em_tensor *y)
{
    em_scope_begin();
    em_tensor *out = em_forward(m, x);
    em_tensor *loss = em_tensor_dtype(y) == EM_I64 ? em_cross_entropy(out, y, (em_ce_cfg){0})
                                                   : em_mse_loss(out, y, EM_REDUCTION_MEAN);
    em_grads *g = em_backward(loss);
    em_optim_step(o, g);
    em_grads_free(g);
    em_scope_end();
}

static em_module *small_net(void)
{
    em_seed(11); /* the same initial weights each time */
    em_module *m = em_sequential(EM_CPU, em_linear_new(32, 64, EM_CPU), em_relu_new(),
                                 em_linear_new(64, 10, EM_CPU));
    em_module_to(m, dev);
    return m;
}

/* A token model: 16 tokens of a 100-word vocabulary -> embedding [16, 8] -> flattened -> 10. */
static em_module *token_net(void)
{
    em_seed(11);
    em_module *m =
        em_sequential(EM_CPU, em_embedding_new((em_embedding_cfg){.num = 100, .dim = 8}, EM_CPU),
                      em_flatten_new(1, -1), em_linear_new(128, 10, EM_CPU));
    em_module_to(m, dev);
    return m;
}

/* New batch values in x and y (class indices 0..9 for an I64 y; tokens 0..99 for an I64 x, few
 * enough that the 256 tokens of a batch repeat). */
static void new_batch(em_tensor *x, em_tensor *y)
{
    em_scope_begin();
    if (em_tensor_dtype(x) == EM_I64)
        em_copy_into(x, em_randint(0, 100, EM_SHAPE(16, 16), EM_I64, EM_CPU));
    else
        em_copy_into(x, h_rand(EM_SHAPE(16, 32), EM_F32, H_CONTIG, -1, 1, NULL));
    if (em_tensor_dtype(y) == EM_I64)
        em_copy_into(y, em_randint(0, 10, EM_SHAPE(16), EM_I64, EM_CPU));
    else
        em_copy_into(y, h_rand(EM_SHAPE(16, 10), EM_F32, H_CONTIG, -1, 1, NULL));
    em_scope_end();
}

/* A whole training step in a graph: forward, backward and the optimizer's update captured once
 * (after an eager step, which makes the optimizer's state), replayed on new batches, against the
 * same steps run eagerly on a twin model: the weights agree after every replay, for Adam (its
 * bias corrections depend on the step count, which each replay advances), SGD with momentum,
 * AdamW, RMSprop, Adagrad (its learning-rate decay follows the step count), Lion and Muon (its
 * Newton-Schulz products and AdamW for the biases) with an MSE loss, Adam with cross entropy, and
 * Adam on a token model (embedding forward and backward: the device sort), with the learning
 * rate changed between replays (read at each replay); the step counts agree. */
static void test_graph_train(void)
{
    static const char *names[] = {"adam",    "sgd",  "adamw", "adam, cross entropy", "rmsprop",
                                  "adagrad", "lion", "muon",  "adam, token model"};
    for (int kind = 0; kind < 9; kind++) {
        const char *name = names[kind];
        bool tokens = kind == 8, classes = kind == 3 || kind == 8;
        em_module *a = tokens ? token_net() : small_net(), *b = tokens ? token_net() : small_net();
        em_optim *oa, *ob;
        if (kind == 0 || kind == 3 || kind == 8)
            oa = em_adam_new(a, (em_adam_cfg){.lr = 1e-2}),
            ob = em_adam_new(b, (em_adam_cfg){.lr = 1e-2});
        else if (kind == 1)
            oa = em_sgd_new(a, (em_sgd_cfg){.lr = 0.05, .momentum = 0.9}),
            ob = em_sgd_new(b, (em_sgd_cfg){.lr = 0.05, .momentum = 0.9});
        else if (kind == 2)
            oa = em_adamw_new(a, (em_adam_cfg){.lr = 1e-2}),
            ob = em_adamw_new(b, (em_adam_cfg){.lr = 1e-2});
        else if (kind == 4)
            oa = em_rmsprop_new(a, (em_rmsprop_cfg){.lr = 1e-2, .momentum = 0.5}),
            ob = em_rmsprop_new(b, (em_rmsprop_cfg){.lr = 1e-2, .momentum = 0.5});
        else if (kind == 5)
            oa = em_adagrad_new(a, (em_adagrad_cfg){.lr = 0.05, .lr_decay = 0.1}),
            ob = em_adagrad_new(b, (em_adagrad_cfg){.lr = 0.05, .lr_decay = 0.1});
        else if (kind == 6)
            oa = em_lion_new(a, (em_lion_cfg){.lr = 1e-3, .weight_decay = 0.1}),
            ob = em_lion_new(b, (em_lion_cfg){.lr = 1e-3, .weight_decay = 0.1});
        else
            oa = em_muon_new(a, (em_muon_cfg){.lr = 2e-2}),
            ob = em_muon_new(b, (em_muon_cfg){.lr = 2e-2});
        CHECK(oa && ob, "%s: optimizers (%s)", name, em_last_error());
        em_tensor *x = tokens ? em_zeros(EM_SHAPE(16, 16), EM_I64, dev)
                              : em_zeros(EM_SHAPE(16, 32), EM_F32, dev),
                  *y = classes ? em_zeros(EM_SHAPE(16), EM_I64, dev)
                               : em_zeros(EM_SHAPE(16, 10), EM_F32, dev);
        new_batch(x, y);
        train_step(a, oa, x, y); /* eager: the state exists, kernels compiled */
        train_step(b, ob, x, y);
        CHECK_OK(name);
        CHECK(em_graph_capture_begin(dev) == EM_OK, "%s: capture (%s)", name, em_last_error());
        train_step(a, oa, x, y);
        em_graph *g = em_graph_capture_end(dev);
        CHECK(g != NULL, "%s: training graph (%s)", name, em_last_error());
        if (!g) em_clear_error(); /* reported: the next kinds start clean */
        CHECK(em_optim_steps(oa) == 1, "%s: the capture counted no step (%lld)", name,
              (long long)em_optim_steps(oa));
        for (int r = 0; g && r < 4; r++) {
            new_batch(x, y);
            if (r == 2)
                em_optim_set_lr(oa, em_optim_lr(oa) / 4), em_optim_set_lr(ob, em_optim_lr(ob) / 4);
            CHECK(em_graph_replay(g) == EM_OK, "%s: replay %d (%s)", name, r, em_last_error());
            train_step(b, ob, x, y);
            em_tensor *pa[8], *pb[8];
            int n = em_module_parameters(a, pa, NULL, 8);
            CHECK(n == (tokens ? 3 : 4) && em_module_parameters(b, pb, NULL, 8) == n,
                  "%s: parameters", name);
            double worst = 0;
            for (int i = 0; i < n; i++) {
                double d = max_diff(pa[i], pb[i]);
                worst = d < 0 || d > worst ? d : worst;
            }
            CHECK(worst >= 0 && worst <= 1e-6, "%s: replay %d: weights differ by %g", name, r,
                  worst);
            CHECK(em_optim_steps(oa) == em_optim_steps(ob), "%s: step counts %lld, %lld", name,
                  (long long)em_optim_steps(oa), (long long)em_optim_steps(ob));
        }
        /* the optimizer freed before its graph: a replay fails before the graph runs */
        em_optim_free(oa);
        if (g && kind == 0) {
            CHECK(em_graph_replay(g) == EM_ERR_INVALID_ARG, "replay after the optimizer's free");
            CHECK_ERR(EM_ERR_INVALID_ARG, "the optimizer whose step the graph captured was freed");
        }
        em_graph_free(g);
        em_release(x), em_release(y);
        em_optim_free(ob);
        em_module_free(a), em_module_free(b);
    }
    /* captured cross entropy (unchecked targets): the eager loss on valid targets, with class
     * weights; NaN for a target out of range (eagerly: an error) */
    {
        em_module *m = small_net();
        em_tensor *x = em_zeros(EM_SHAPE(16, 32), EM_F32, dev),
                  *t = em_zeros(EM_SHAPE(16), EM_I64, dev), *loss = NULL;
        em_scope_begin();
        em_tensor *w =
            em_retain(em_to_device(h_rand(EM_SHAPE(10), EM_F32, H_CONTIG, 0.5, 2, NULL), dev));
        em_scope_end();
        em_ce_cfg cfg = {.weight = w};
        new_batch(x, t);
        for (int pass = 0; pass < 2; pass++) { /* eager, then captured */
            if (pass) CHECK(em_graph_capture_begin(dev) == EM_OK, "capture cross entropy");
            em_scope_begin();
            em_release(loss);
            loss = em_retain(em_cross_entropy(em_forward(m, x), t, cfg));
            em_scope_end();
        }
        em_graph *g = em_graph_capture_end(dev);
        CHECK(g != NULL, "cross-entropy graph (%s)", em_last_error());
        for (int r = 0; g && r < 3; r++) {
            new_batch(x, t);
            if (r == 2) {
                int64_t bad[16];
                for (int i = 0; i < 16; i++) bad[i] = i % 10;
                bad[5] = 12;
                em_scope_begin();
                em_copy_into(t, em_from_data(bad, EM_I64, EM_SHAPE(16), EM_I64, EM_CPU));
                em_scope_end();
            }
            CHECK(em_graph_replay(g) == EM_OK, "cross-entropy replay %d", r);
            double got = em_item_f64(loss);
            if (r == 2) {
                CHECK(isnan(got), "a target out of range in a graph: loss %g, want NaN", got);
                continue;
            }
            em_scope_begin();
            double want = em_item_f64(em_cross_entropy(em_forward(m, x), t, cfg));
            em_scope_end();
            CHECK(fabs(got - want) <= 1e-6 * fabs(want), "replay %d: loss %.9g, eager %.9g", r, got,
                  want);
        }
        em_graph_free(g);
        em_release(loss), em_release(x), em_release(t), em_release(w);
        em_module_free(m);
    }
    /* a capture that would make the optimizer's state is refused */
    em_module *m = small_net();
    em_optim *o = em_adam_new(m, (em_adam_cfg){.lr = 1e-2});
    em_tensor *x = em_zeros(EM_SHAPE(16, 32), EM_F32, dev),
              *y = em_zeros(EM_SHAPE(16, 10), EM_F32, dev);
    CHECK(em_graph_capture_begin(dev) == EM_OK, "capture without a step first");
    train_step(m, o, x, y);
    CHECK_ERR(EM_ERR_INVALID_ARG, "would be made or moved inside the graph capture");
    CHECK(!em_graph_capture_end(dev), "no graph of a first step");
    CHECK_ERR(EM_ERR_INVALID_ARG, "was refused");
    em_release(x), em_release(y);
    em_optim_free(o);
    em_module_free(m);
}

int main(void)
{
    em_backends_init();
    if (em_backend_find("cuda") < 0) {
        printf("skipped: no CUDA device\n");
        return 0;
    }
    h_init();
    h_dev = EM_CPU;
    dev = em_device_parse("cuda:0");
    CHECK_OK("em_device_parse(\"cuda:0\")");
    test_two_streams();
    test_pool_across_streams();
    test_host_copies();
    test_threads();
    test_joined_thread();
    test_two_devices();
    test_pinned();
    test_graphs();
    test_graph_random();
    test_graph_train();
    test_graph_index();
    test_graph_failed_call();
    em_device_sync(dev);
    CHECK_OK("em_device_sync");
    return h_finish();
}
