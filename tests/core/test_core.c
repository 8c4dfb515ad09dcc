/* Tests for the core layer: errors, logging, memory, the thread pool, Philox and the
 * generator's streams, dtypes and the half/bfloat16 conversions (configuration: test_config.c). */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/core_impl.h"
#include "harness.h"

/* ---- helpers ----------------------------------------------------------------------------- */

static char tmp_dir[256];
static int tmp_count;

/* A fresh path inside the test's temporary directory. */
static void tmp_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%d_%s", tmp_dir, tmp_count++, name);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* The file's contents (malloc'd, NUL-terminated); "" when it cannot be read. */
static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = calloc(1, 1);
    size_t n = 0;
    if (!f || !buf) {
        if (f) fclose(f);
        return buf;
    }
    char chunk[4096];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
        char *grown = realloc(buf, n + got + 1);
        if (!grown) break;
        buf = grown;
        memcpy(buf + n, chunk, got);
        n += got;
        buf[n] = '\0';
    }
    fclose(f);
    return buf;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---- errors ------------------------------------------------------------------------------ */

static void test_errors(void)
{
    em_clear_error();
    CHECK(!em_failed() && em_last_status() == EM_OK, "no error pending at start");
    CHECK(!strcmp(em_last_error(), ""), "empty message when no error");
    CHECK(em_error(EM_ERR_SHAPE, "first %d", 1) == EM_ERR_SHAPE, "em_error returns its code");
    CHECK(em_error(EM_ERR_DTYPE, "second") == EM_ERR_DTYPE, "em_error returns its code");
    CHECK(em_failed() && em_last_status() == EM_ERR_SHAPE, "the first error wins");
    CHECK(!strcmp(em_last_error(), "first 1"), "first message kept, got '%s'", em_last_error());
    em_clear_error();
    CHECK(!em_failed() && em_last_status() == EM_OK && !strcmp(em_last_error(), ""), "cleared");
    CHECK(!strcmp(em_status_name(EM_ERR_SHAPE), "shape error"), "status name");
    CHECK(!strcmp(em_status_name(EM_OK), "ok"), "status name ok");
}

/* ---- logging ----------------------------------------------------------------------------- */

typedef struct collector {
    int count;
    char component[64];
    em_log_level level;
    char msg[256];
    size_t msg_len;
    int reenter; /* log again from inside the callback this many times */
} collector;

static void collect(void *user, const char *component, em_log_level level, const char *msg)
{
    collector *c = user;
    c->count++;
    snprintf(c->component, sizeof c->component, "%s", component);
    c->level = level;
    snprintf(c->msg, sizeof c->msg, "%s", msg);
    c->msg_len = strlen(msg);
    if (c->reenter > 0) {
        c->reenter--;
        em_log_msg("inner", EM_LOG_ERROR, "from the callback");
    }
}

static atomic_int threaded_count;

static void count_cb(void *user, const char *component, em_log_level level, const char *msg)
{
    atomic_fetch_add(&threaded_count, 1);
}

static void *log_thread(void *arg)
{
    for (int i = 0; i < 500; i++)
        em_log_msg("mt", EM_LOG_ERROR, "thread %d message %d", *(int *)arg, i);
    return NULL;
}

static void test_log(void)
{
    collector c = {0};
    em_log_to_stderr(false);
    em_log_set_callback(collect, &c);

    em_log_set_level(NULL, EM_LOG_WARN);
    CHECK(em_log_get_level("anything") == EM_LOG_WARN, "default level is WARN");
    CHECK(em_log_get_level(NULL) == EM_LOG_WARN && em_log_get_level("*") == EM_LOG_WARN,
          "level for all");
    em_log_set_level("comp1", EM_LOG_DEBUG);
    CHECK(em_log_get_level("comp1") == EM_LOG_DEBUG, "per-component level");
    CHECK(em_log_get_level("comp2") == EM_LOG_WARN, "others keep the fallback");

    em_log_msg("comp1", EM_LOG_DEBUG, "x=%d y=%s", 5, "z");
    CHECK(c.count == 1, "message at the component's level passes");
    CHECK(!strcmp(c.msg, "x=5 y=z"), "callback gets the formatted message, got '%s'", c.msg);
    CHECK(!strcmp(c.component, "comp1") && c.level == EM_LOG_DEBUG, "component and level");
    em_log_msg("comp1", EM_LOG_TRACE, "below");
    em_log_msg("comp2", EM_LOG_DEBUG, "below the fallback");
    em_log_msg("comp2", EM_LOG_INFO, "below the fallback");
    CHECK(c.count == 1, "messages below the level are dropped (count %d)", c.count);
    em_log_msg("comp2", EM_LOG_WARN, "warned");
    em_log_msg("comp2", EM_LOG_ERROR, "errored");
    CHECK(c.count == 3, "messages at or above the fallback pass");

    em_log_set_level("comp3", EM_LOG_OFF);
    em_log_msg("comp3", EM_LOG_ERROR, "off");
    CHECK(c.count == 3, "OFF drops everything");

    em_log_set_level("*", EM_LOG_ERROR);
    CHECK(em_log_get_level("comp1") == EM_LOG_ERROR, "'*' sets every component");
    em_log_msg("comp1", EM_LOG_WARN, "dropped now");
    CHECK(c.count == 3, "'*' applies to components that had their own level");

    /* Messages longer than the internal stack buffer arrive whole. */
    char big[3000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    em_log_msg("comp1", EM_LOG_ERROR, "%s!", big);
    CHECK(c.count == 4 && c.msg_len == sizeof big, "long message delivered (len %zu)", c.msg_len);

    /* A callback may log itself without deadlocking. */
    c.reenter = 1;
    em_log_msg("outer", EM_LOG_ERROR, "first");
    CHECK(c.count == 6 && !strcmp(c.component, "inner"), "re-entrant logging from a callback");

    CHECK(em_log_level_parse("trace") == EM_LOG_TRACE, "parse trace");
    CHECK(em_log_level_parse("DEBUG") == EM_LOG_DEBUG, "parse DEBUG");
    CHECK(em_log_level_parse("Info") == EM_LOG_INFO, "parse Info");
    CHECK(em_log_level_parse("warn") == EM_LOG_WARN, "parse warn");
    CHECK(em_log_level_parse("warning") == EM_LOG_WARN, "parse warning");
    CHECK(em_log_level_parse("error") == EM_LOG_ERROR, "parse error");
    CHECK(em_log_level_parse("off") == EM_LOG_OFF, "parse off");
    CHECK(em_log_level_parse("loud") == -1 && em_log_level_parse(NULL) == -1, "parse unknown");

    /* File sink: appended, one formatted line per message. */
    char path[512];
    tmp_path(path, sizeof path, "log.txt");
    write_file(path, "existing line\n");
    CHECK(em_log_to_file(path) == EM_OK, "open log file");
    em_log_msg("filecomp", EM_LOG_ERROR, "hello %d", 7);
    em_log_msg("filecomp", EM_LOG_DEBUG, "filtered");
    CHECK(em_log_to_file(NULL) == EM_OK, "close log file");
    em_log_msg("filecomp", EM_LOG_ERROR, "after close");
    char *text = read_all(path);
    CHECK(!strcmp(text, "existing line\nember[filecomp] ERROR: hello 7\n"),
          "log file contents, got '%s'", text);
    free(text);
    unlink(path);
    CHECK(em_log_to_file("/nonexistent-ember-dir/x/y.log") == EM_ERR_IO, "bad log path");
    CHECK_ERR(EM_ERR_IO, "/nonexistent-ember-dir/x/y.log");

    /* stderr sink: capture fd 2 in a file. */
    em_log_set_callback(NULL, NULL);
    tmp_path(path, sizeof path, "stderr.txt");
    fflush(stderr);
    int saved = dup(2);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(saved >= 0 && fd >= 0, "redirect stderr");
    if (saved >= 0 && fd >= 0) {
        dup2(fd, 2);
        close(fd);
        em_log_to_stderr(true);
        em_log_msg("errcomp", EM_LOG_INFO, "not shown");
        em_log_msg("errcomp", EM_LOG_ERROR, "to stderr %s", "ok");
        em_log_to_stderr(false);
        em_log_msg("errcomp", EM_LOG_ERROR, "stderr is off");
        fflush(stderr);
        dup2(saved, 2);
        close(saved);
        text = read_all(path);
        CHECK(!strcmp(text, "ember[errcomp] ERROR: to stderr ok\n"), "stderr format, got '%s'",
              text);
        free(text);
    }
    unlink(path);

    /* Many threads logging at once: every message arrives once. */
    em_log_set_callback(count_cb, NULL);
    atomic_store(&threaded_count, 0);
    pthread_t th[4];
    int ids[4];
    for (int i = 0; i < 4; i++) {
        ids[i] = i;
        pthread_create(&th[i], NULL, log_thread, &ids[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    CHECK(atomic_load(&threaded_count) == 2000, "threaded logging: %d of 2000",
          atomic_load(&threaded_count));

    em_log_set_callback(NULL, NULL);
    em_log_set_level(NULL, EM_LOG_WARN);
    em_log_to_stderr(true);
}

/* ---- configuration ----------------------------------------------------------------------- */

/* ---- memory ------------------------------------------------------------------------------ */

static void test_memory(void)
{
    em_mem_stats s0 = em_mem_get_stats();
    unsigned char *p = em_alloc(1000);
    em_mem_stats s1 = em_mem_get_stats();
    CHECK(p != NULL && (uintptr_t)p % 64 == 0, "64-byte aligned allocation");
    CHECK(s1.current_bytes == s0.current_bytes + 1000, "current grows by the size");
    CHECK(s1.live_allocs == s0.live_allocs + 1 && s1.total_allocs == s0.total_allocs + 1,
          "allocation counts");
    CHECK(s1.peak_bytes >= s1.current_bytes, "peak >= current");
    em_free(p);
    em_mem_stats s2 = em_mem_get_stats();
    CHECK(s2.current_bytes == s0.current_bytes && s2.live_allocs == s0.live_allocs, "freed");

    em_mem_reset_peak();
    CHECK(em_mem_get_stats().peak_bytes == s0.current_bytes, "reset peak");
    p = em_alloc(5000);
    em_free(p);
    CHECK(em_mem_get_stats().peak_bytes == s0.current_bytes + 5000, "peak records the high mark");

    unsigned char *z = em_calloc(300);
    bool zero = z != NULL;
    for (int i = 0; z && i < 300; i++) zero = zero && z[i] == 0;
    CHECK(zero, "em_calloc zero-fills");
    em_free(z);

    em_mem_fail_at(1);
    CHECK(em_alloc(10) == NULL, "injected failure");
    CHECK_ERR(EM_ERR_OOM, "injected");
    p = em_alloc(10);
    CHECK(p != NULL, "only one allocation fails");
    em_free(p);
    em_mem_fail_at(2);
    p = em_alloc(10);
    CHECK(p != NULL && em_alloc(10) == NULL, "fail_at(2) fails the second");
    CHECK_ERR(EM_ERR_OOM, "injected");
    em_free(p);
    em_mem_fail_at(0);

    em_mem_set_guards(true);
    p = em_alloc(16);
    CHECK(em_mem_check_guards() == 0, "guards intact");
    unsigned char saved = p[16];
    p[16] ^= 0xff;
    CHECK(em_mem_check_guards() == 1, "an overwrite past the end is detected");
    p[16] = saved;
    CHECK(em_mem_check_guards() == 0, "repaired");
    em_free(p);
    CHECK_OK("free after repair");
}

/* ---- threads ----------------------------------------------------------------------------- */

typedef struct cover_ctx {
    atomic_int *hits;
    atomic_int calls;
    atomic_int bad_size;
    int64_t base; /* expected chunk size: base or base + 1 */
} cover_ctx;

static void cover_fn(void *ctx, int64_t begin, int64_t end)
{
    cover_ctx *c = ctx;
    atomic_fetch_add(&c->calls, 1);
    if (end - begin != c->base && end - begin != c->base + 1) atomic_fetch_add(&c->bad_size, 1);
    for (int64_t i = begin; i < end; i++) atomic_fetch_add(&c->hits[i], 1);
}

/* in_order: core_parallel_for_in_order (one counter), else em_parallel_for (spans). */
static void check_cover(int64_t n, int64_t grain, bool in_order)
{
    cover_ctx c = {.hits = calloc((size_t)(n > 0 ? n : 1), sizeof(atomic_int))};
    int64_t g = grain < 1 ? 1 : grain;
    int64_t nchunks = n / g < 1 ? 1 : n / g > 256 ? 256 : n / g;
    c.base = n / nchunks;
    if (in_order)
        core_parallel_for_in_order(n, grain, cover_fn, &c);
    else
        em_parallel_for(n, grain, cover_fn, &c);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; i++) wrong += atomic_load(&c.hits[i]) != 1;
    int want_calls = n > 0 ? (int)nchunks : 0;
    CHECK(wrong == 0, "n=%lld grain=%lld threads=%d in order %d: %lld indices not covered once",
          (long long)n, (long long)grain, em_get_num_threads(), in_order, (long long)wrong);
    CHECK(atomic_load(&c.calls) == want_calls && atomic_load(&c.bad_size) == 0,
          "n=%lld grain=%lld: %d chunks (want %d), %d of the wrong size", (long long)n,
          (long long)grain, atomic_load(&c.calls), want_calls, atomic_load(&c.bad_size));
    free(c.hits);
}

typedef struct nest_ctx {
    atomic_int *hits;
    int64_t inner;
} nest_ctx;

typedef struct inner_ctx {
    atomic_int *hits;
} inner_ctx;

static void inner_fn(void *ctx, int64_t begin, int64_t end)
{
    inner_ctx *c = ctx;
    for (int64_t i = begin; i < end; i++) atomic_fetch_add(&c->hits[i], 1);
}

static void outer_fn(void *ctx, int64_t begin, int64_t end)
{
    nest_ctx *c = ctx;
    for (int64_t o = begin; o < end; o++) {
        inner_ctx ic = {.hits = c->hits + o * c->inner};
        em_parallel_for(c->inner, 10, inner_fn, &ic);
    }
}

typedef struct sum_ctx {
    const double *x;
    double *partial; /* partial[begin] = sum of the chunk starting at begin */
} sum_ctx;

static void sum_fn(void *ctx, int64_t begin, int64_t end)
{
    sum_ctx *c = ctx;
    double s = 0;
    for (int64_t i = begin; i < end; i++) s += c->x[i];
    c->partial[begin] = s;
}

static double chunked_sum(const double *x, int64_t n, int64_t grain)
{
    double *partial = calloc((size_t)n, sizeof *partial);
    sum_ctx c = {.x = x, .partial = partial};
    em_parallel_for(n, grain, sum_fn, &c);
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += partial[i];
    free(partial);
    return s;
}

typedef struct err_ctx {
    pthread_t caller;
    atomic_bool worker_ran;
} err_ctx;

/* The caller's chunks wait for a worker to take one, so a worker surely raises an error. */
static void err_fn(void *ctx, int64_t begin, int64_t end)
{
    err_ctx *c = ctx;
    if (pthread_equal(pthread_self(), c->caller)) {
        while (!atomic_load(&c->worker_ran)) sched_yield();
        return;
    }
    atomic_store(&c->worker_ran, true);
    em_error(EM_ERR_INTERNAL, "worker chunk [%lld, %lld) failed", (long long)begin, (long long)end);
}

/* Spans: on 2 threads the caller owns the second half of the 256 chunks. Chunks of the first
 * half (the worker's) wait until the caller has run one of them, which it can only take from
 * the end of the worker's span once its own span is done. */
typedef struct span_ctx {
    pthread_t caller;
    atomic_int hits[256];
    atomic_int caller_first, caller_stole; /* the caller's first chunk + 1; chunks taken */
    atomic_int seq;
    int order[256]; /* claim position of each chunk */
    /* the worker stops waiting then (a pool that never steals fails, not hangs) */
    int64_t deadline;
} span_ctx;

static void span_fn(void *ctx, int64_t begin, int64_t end)
{
    span_ctx *c = ctx;
    for (int64_t i = begin; i < end; i++) {
        atomic_fetch_add(&c->hits[i], 1);
        c->order[i] = atomic_fetch_add(&c->seq, 1);
        if (pthread_equal(pthread_self(), c->caller)) {
            int zero = 0;
            atomic_compare_exchange_strong(&c->caller_first, &zero, (int)i + 1);
            if (i < 128) atomic_fetch_add(&c->caller_stole, 1);
        } else if (i < 128) {
            while (!atomic_load(&c->caller_stole) && core_mono_ns() < c->deadline) sched_yield();
        }
    }
}

static void check_spans(void)
{
    em_set_num_threads(2);
    span_ctx *c = calloc(1, sizeof *c);
    c->caller = pthread_self();
    c->deadline = core_mono_ns() + 5000000000LL;
    em_parallel_for(256, 1, span_fn, c);
    int64_t wrong = 0;
    for (int i = 0; i < 256; i++) wrong += atomic_load(&c->hits[i]) != 1;
    CHECK(wrong == 0, "spans: %lld chunks not run once", (long long)wrong);
    CHECK(atomic_load(&c->caller_first) == 129, "the caller started its own span at chunk 128 (%d)",
          atomic_load(&c->caller_first) - 1);
    CHECK(atomic_load(&c->caller_stole) > 0, "the caller took chunks of the worker's span");
    /* a span is run front to back: chunk 128's successors in the caller's span came after it */
    int late = 0;
    for (int i = 129; i < 256; i++) late += c->order[i] < c->order[128];
    CHECK(late == 0, "the caller's span ran in order (%d chunks before its first)", late);
    free(c);
}

static void *concurrent_caller(void *arg)
{
    int64_t n = 1000 + *(int *)arg;
    atomic_int *hits = calloc((size_t)n, sizeof *hits);
    inner_ctx ic = {.hits = hits};
    for (int r = 0; r < 50; r++) em_parallel_for(n, 7, inner_fn, &ic);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; i++) wrong += atomic_load(&hits[i]) != 50;
    free(hits);
    return (void *)(intptr_t)wrong;
}

static void test_threads(void)
{
    int orig = em_get_num_threads();
    CHECK(orig >= 1, "at least one thread (%d)", orig);
    em_set_num_threads(0);
    CHECK(em_get_num_threads() == 1, "n < 1 sets 1");
    em_set_num_threads(-5);
    CHECK(em_get_num_threads() == 1, "n < 1 sets 1");

    const int threads[] = {1, 2, 4};
    const int64_t ns[] = {0, 1, 2, 7, 100, 257, 1000, 100003};
    const int64_t grains[] = {-1, 0, 1, 3, 64, 1000, 1 << 20};
    for (int t = 0; t < 3; t++) {
        em_set_num_threads(threads[t]);
        CHECK(em_get_num_threads() == threads[t], "set %d threads", threads[t]);
        for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
            for (size_t g = 0; g < sizeof grains / sizeof *grains; g++)
                for (int o = 0; o < 2; o++) check_cover(ns[i], grains[g], o);
    }

    check_spans();

    em_set_num_threads(4);
    em_parallel_for(10, 1, NULL, NULL);
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_parallel_for");

    /* Nested: the inner calls run serially inside the outer chunks. */
    nest_ctx nc = {.hits = calloc(8 * 1000, sizeof(atomic_int)), .inner = 1000};
    em_parallel_for(8, 1, outer_fn, &nc);
    int64_t wrong = 0;
    for (int i = 0; i < 8 * 1000; i++) wrong += atomic_load(&nc.hits[i]) != 1;
    CHECK(wrong == 0, "nested parallel_for: %lld wrong", (long long)wrong);
    free(nc.hits);

    /* A chunked reduction does not depend on the thread count. */
    int64_t n = 1000003;
    double *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = sin((double)i) * 1e3 + 1e-7 * (double)i;
    double sums[3];
    for (int t = 0; t < 3; t++) {
        em_set_num_threads(threads[t]);
        sums[t] = chunked_sum(x, n, 1000);
    }
    CHECK(!memcmp(&sums[0], &sums[1], sizeof(double)) &&
              !memcmp(&sums[0], &sums[2], sizeof(double)),
          "chunked sum with 1, 2, 4 threads: %.17g %.17g %.17g", sums[0], sums[1], sums[2]);
    free(x);

    /* An error raised on a worker reaches the caller. */
    em_set_num_threads(2);
    err_ctx ec = {.caller = pthread_self()};
    em_parallel_for(256, 1, err_fn, &ec);
    CHECK(atomic_load(&ec.worker_ran), "a worker ran a chunk");
    CHECK_ERR(EM_ERR_INTERNAL, "worker chunk");

    /* A forked child starts without the parent's workers and gets its own. */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        atomic_int *hits = calloc(10000, sizeof *hits);
        inner_ctx ic = {.hits = hits};
        em_parallel_for(10000, 10, inner_fn, &ic);
        int64_t bad = 0;
        for (int i = 0; i < 10000; i++) bad += atomic_load(&hits[i]) != 1;
        free(hits);
        _exit(bad == 0 ? 0 : 1);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "parallel_for in a forked child: %d",
          status);

    /* Several user threads calling at once. */
    em_set_num_threads(4);
    pthread_t th[4];
    int ids[4];
    for (int i = 0; i < 4; i++) {
        ids[i] = i;
        pthread_create(&th[i], NULL, concurrent_caller, &ids[i]);
    }
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        CHECK(r == NULL, "concurrent caller %d: %ld indices wrong", i, (long)(intptr_t)r);
    }
    em_set_num_threads(orig);
}

/* ---- random numbers ---------------------------------------------------------------------- */

static void test_philox(void)
{
    static const struct {
        uint32_t ctr[4], key[2], out[4];
    } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
         {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
         {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (int k = 0; k < 3; k++) {
        uint32_t out[4];
        em_philox4x32(kat[k].ctr, kat[k].key, out);
        CHECK(!memcmp(out, kat[k].out, sizeof out), "Philox known answer %d: %08x %08x %08x %08x",
              k, out[0], out[1], out[2], out[3]);
    }
}

static void test_rng(void)
{
    /* Words of the stream are Philox outputs at counter offset + i/4, keyed by the seed. */
    uint64_t seed = 0x123456789abcdef0ull, off = 0xfffffffffull;
    bool words_ok = true;
    for (uint64_t i = 0; i < 16; i++) {
        uint64_t c = off + i / 4;
        uint32_t ctr[4] = {(uint32_t)c, (uint32_t)(c >> 32), 0, 0};
        uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)}, out[4];
        em_philox4x32(ctr, key, out);
        words_ok = words_ok && em_rng_u32_at(seed, off, i) == out[i % 4];
        words_ok = words_ok && em_rng_u32_at(seed, off, i + 4) == em_rng_u32_at(seed, off + 1, i);
    }
    CHECK(words_ok, "stream words follow the documented counter and key");

    bool uni_ok = true, norm_ok = true;
    for (uint64_t i = 0; i < 20; i++) {
        uint32_t hi = em_rng_u32_at(seed, off, 2 * i), lo = em_rng_u32_at(seed, off, 2 * i + 1);
        double u = ((double)(hi >> 5) * 67108864.0 + (double)(lo >> 6)) / 9007199254740992.0;
        uni_ok = uni_ok && em_rng_uniform_at(seed, off, i) == u;
        uint64_t j = i / 2;
        double u1 = em_rng_uniform_at(seed, off, 2 * j),
               u2 = em_rng_uniform_at(seed, off, 2 * j + 1);
        double r = sqrt(-2.0 * log(1.0 - u1));
        double v = i % 2 ? r * sin(6.283185307179586 * u2) : r * cos(6.283185307179586 * u2);
        norm_ok = norm_ok && em_rng_normal_at(seed, off, i) == v;
    }
    CHECK(uni_ok, "uniform_at follows the documented formula");
    CHECK(norm_ok, "normal_at follows the documented Box-Muller");

    em_seed(2024);
    const int n = 100000;
    uint64_t o = em_rng_reserve(2 * (uint64_t)n);
    em_rng_state st = em_rng_get_state();
    double sum = 0, nsum = 0, nsq = 0;
    bool in_range = true;
    for (int i = 0; i < n; i++) {
        double u = em_rng_uniform_at(st.seed, o, (uint64_t)i);
        in_range = in_range && u >= 0.0 && u < 1.0;
        sum += u;
        double z = em_rng_normal_at(st.seed, o, (uint64_t)i);
        nsum += z;
        nsq += z * z;
    }
    double mean = sum / n, nmean = nsum / n, nstd = sqrt(nsq / n - nmean * nmean);
    CHECK(in_range, "uniforms in [0, 1)");
    CHECK(fabs(mean - 0.5) < 0.005, "uniform mean %g", mean);
    CHECK(fabs(nmean) < 0.02 && fabs(nstd - 1.0) < 0.02, "normal mean %g std %g", nmean, nstd);

    /* Same seed, same numbers; reserve moves by ceil(n/4) + 1 counters. */
    em_seed(7);
    CHECK(em_rng_get_state().seed == 7 && em_rng_get_state().offset == 0, "em_seed resets offset");
    uint64_t a0 = em_rng_reserve(10);
    uint64_t a1 = em_rng_reserve(0);
    uint64_t a2 = em_rng_reserve(4);
    uint64_t a3 = em_rng_reserve(5);
    CHECK(a0 == 0 && a1 == 4 && a2 == 5 && a3 == 7, "reserve offsets %llu %llu %llu %llu",
          (unsigned long long)a0, (unsigned long long)a1, (unsigned long long)a2,
          (unsigned long long)a3);
    CHECK(em_rng_get_state().offset == 10, "offset after reserves");
    double first[8], again[8], other[8];
    for (int i = 0; i < 8; i++) first[i] = em_rng_uniform_at(7, a3, (uint64_t)i);
    em_seed(7);
    em_rng_reserve(10);
    em_rng_reserve(0);
    em_rng_reserve(4);
    uint64_t b3 = em_rng_reserve(5);
    for (int i = 0; i < 8; i++) again[i] = em_rng_uniform_at(7, b3, (uint64_t)i);
    for (int i = 0; i < 8; i++) other[i] = em_rng_uniform_at(8, b3, (uint64_t)i);
    CHECK(b3 == a3 && !memcmp(first, again, sizeof first), "same seed, same numbers");
    CHECK(memcmp(first, other, sizeof first) != 0, "another seed, other numbers");

    em_rng_state s = {.seed = 0xdeadbeefcafeull, .offset = 12345};
    em_rng_set_state(s);
    em_rng_state g = em_rng_get_state();
    CHECK(g.seed == s.seed && g.offset == s.offset, "set/get state");
    CHECK(em_rng_reserve(1) == 12345 && em_rng_get_state().offset == 12347, "reserve after set");
}

/* ---- dtypes ------------------------------------------------------------------------------ */

/* Reference f32 -> f16 through double arithmetic (nearbyint rounds to nearest even). */
static uint16_t ref_f16(float f)
{
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double v = fabs((double)f);
    if (isinf(v)) return sign | 0x7c00;
    int e;
    frexp(v, &e);
    int ex = e - 1 < -14 ? -14 : e - 1;
    double q = ldexp(1.0, ex - 10);
    double r = nearbyint(v / q) * q;
    if (r >= 65536.0) return sign | 0x7c00;
    if (r < ldexp(1.0, -14)) return sign | (uint16_t)(r / ldexp(1.0, -24));
    frexp(r, &e);
    ex = e - 1;
    return sign | (uint16_t)((ex + 15) << 10) | (uint16_t)(r / ldexp(1.0, ex - 10) - 1024.0);
}

/* Exact value of a half, by its definition. */
static double f16_value(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double s = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 31) return m ? NAN : s * INFINITY;
    if (e == 0) return s * ldexp(m, -24);
    return s * ldexp(1024 + m, e - 25);
}

static bool f16_is_nan(uint16_t h)
{
    return (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
}

static bool bf16_is_nan(uint16_t b)
{
    return (b & 0x7f80) == 0x7f80 && (b & 0x7f);
}

static void test_half(void)
{
    CHECK(em_f32_to_f16(1.0f) == 0x3c00, "1.0");
    CHECK(em_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00, "1+2^-11 ties to even 1.0");
    CHECK(em_f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02, "1+3*2^-11 ties to even 1+2^-9");
    CHECK(em_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01, "just above a tie rounds up");
    CHECK(em_f32_to_f16(-2.0f) == 0xc000, "-2");
    CHECK(em_f32_to_f16(0.0f) == 0x0000 && em_f32_to_f16(-0.0f) == 0x8000, "signed zeros");
    CHECK(em_f32_to_f16(0x1p-24f) == 0x0001, "min subnormal 2^-24");
    CHECK(em_f32_to_f16(0x1p-25f) == 0x0000, "2^-25 ties to even zero");
    CHECK(em_f32_to_f16(0x1p-25f + 0x1p-40f) == 0x0001, "just above 2^-25 rounds up");
    CHECK(em_f32_to_f16(3 * 0x1p-25f) == 0x0002, "1.5*2^-24 ties to even 2*2^-24");
    CHECK(em_f32_to_f16(1023 * 0x1p-24f) == 0x03ff, "max subnormal");
    CHECK(em_f32_to_f16(0x1p-14f) == 0x0400, "min normal");
    CHECK(em_f32_to_f16(0x1p-14f - 0x1p-26f) == 0x0400, "rounds up into the min normal");
    CHECK(em_f32_to_f16(1e-10f) == 0x0000, "underflow to zero");
    CHECK(em_f32_to_f16(65504.0f) == 0x7bff, "max 65504");
    CHECK(em_f32_to_f16(65519.0f) == 0x7bff, "65519 rounds down to 65504");
    CHECK(em_f32_to_f16(65520.0f) == 0x7c00, "65520 overflows to Inf");
    CHECK(em_f32_to_f16(-65520.0f) == 0xfc00, "-65520 overflows to -Inf");
    CHECK(em_f32_to_f16(1e10f) == 0x7c00, "large overflows to Inf");
    CHECK(em_f32_to_f16(INFINITY) == 0x7c00 && em_f32_to_f16(-INFINITY) == 0xfc00, "infinities");
    uint16_t hn = em_f32_to_f16(NAN);
    CHECK(f16_is_nan(hn) && (hn & 0x200), "NaN stays a quiet NaN (0x%04x)", hn);
    uint16_t hs = em_f32_to_f16(bits_f32(0x7f800001u)); /* payload only in the low bits */
    CHECK(f16_is_nan(hs) && (hs & 0x200), "low-payload NaN stays NaN, not Inf (0x%04x)", hs);
    uint16_t hneg = em_f32_to_f16(bits_f32(0xffc00000u));
    CHECK(f16_is_nan(hneg) && (hneg & 0x8000), "negative NaN keeps its sign");

    CHECK(em_f16_to_f32(0x0001) == 0x1p-24f, "f16 min subnormal to f32");
    CHECK(em_f16_to_f32(0x7bff) == 65504.0f, "f16 max to f32");
    CHECK(isinf(em_f16_to_f32(0x7c00)) && em_f16_to_f32(0xfc00) < 0, "f16 infinities");
    CHECK(isnan(em_f16_to_f32(0x7e00)) && isnan(em_f16_to_f32(0x7c01)), "f16 NaNs to f32");
    CHECK(signbit(em_f16_to_f32(0x8000)) && em_f16_to_f32(0x8000) == 0.0f, "-0");

    /* Every half: exact value, and back to the same bits (NaNs only need to stay NaN). */
    int bad_value = 0, bad_trip = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = em_f16_to_f32((uint16_t)h);
        uint16_t back = em_f32_to_f16(f);
        if (f16_is_nan((uint16_t)h)) {
            bad_value += !isnan(f);
            bad_trip += !f16_is_nan(back);
        } else {
            bad_value +=
                (double)f != f16_value((uint16_t)h) || (signbit(f) != 0) != ((h & 0x8000) != 0);
            bad_trip += back != h;
        }
    }
    CHECK(bad_value == 0, "f16 -> f32 exact for all halves (%d wrong)", bad_value);
    CHECK(bad_trip == 0, "f16 -> f32 -> f16 round trip for all halves (%d wrong)", bad_trip);

    /* Ties between every pair of neighbouring halves, and the floats either side of them. */
    int bad_tie = 0;
    for (uint32_t h = 0; h < 0x7c00; h++) {
        for (int s = 0; s < 2; s++) {
            double a = f16_value((uint16_t)h),
                   b = h == 0x7bff ? 65536.0 : f16_value((uint16_t)(h + 1));
            float mid = (float)((a + b) / 2); /* exact: 12 significant bits */
            uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
            uint16_t sign = s ? 0x8000 : 0;
            float sg = s ? -1.0f : 1.0f;
            bad_tie += em_f32_to_f16(sg * mid) != (sign | even);
            bad_tie += em_f32_to_f16(sg * nextafterf(mid, 0.0f)) != (sign | h);
            bad_tie += em_f32_to_f16(sg * nextafterf(mid, INFINITY)) != (sign | (h + 1));
        }
    }
    CHECK(bad_tie == 0, "f32 -> f16 at and around every tie (%d wrong)", bad_tie);

    /* A sweep of f32 bit patterns against a double-arithmetic reference. */
    int bad_sweep = 0;
    for (uint64_t b = 0; b < 0x100000000ull; b += 4099) {
        float f = bits_f32((uint32_t)b);
        uint16_t got = em_f32_to_f16(f);
        if (isnan(f))
            bad_sweep += !f16_is_nan(got);
        else
            bad_sweep += got != ref_f16(f);
    }
    for (uint32_t b = 0x32800000u; b < 0x39000000u; b += 61) { /* subnormals and first binade */
        float f = bits_f32(b);
        bad_sweep += em_f32_to_f16(f) != ref_f16(f);
    }
    CHECK(bad_sweep == 0, "f32 -> f16 matches the reference (%d wrong)", bad_sweep);

    /* The inline conversions of the hot loops (core_impl.h) give the same bits: every half,
     * and the f32 sweep with every half's neighbourhood (ties, the range's edges). */
    int bad_inline = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float a = em_f16_to_f32((uint16_t)h), b = core_f16_to_f32((uint16_t)h);
        bad_inline += f32_bits(a) != f32_bits(b);
        uint32_t x = f32_bits(a);
        for (uint32_t d = 0; d < 3; d++) {
            float f = bits_f32(x + d * 0x1000u - 0x1000u); /* a tie step below, at, above */
            bad_inline += em_f32_to_f16(f) != core_f32_to_f16(f);
        }
    }
    for (uint64_t b = 0; b < 0x100000000ull; b += 4099) {
        float f = bits_f32((uint32_t)b);
        bad_inline += em_f32_to_f16(f) != core_f32_to_f16(f);
    }
    CHECK(bad_inline == 0, "inline f16 conversions match em_f16_to_f32 / em_f32_to_f16 (%d wrong)",
          bad_inline);
}

static void test_bf16(void)
{
    CHECK(em_f32_to_bf16(1.0f) == 0x3f80, "bf16 1.0");
    CHECK(em_f32_to_bf16(1.00390625f) == 0x3f80, "1+2^-8 ties to even 1.0");
    CHECK(em_f32_to_bf16(1.01171875f) == 0x3f82, "1+3*2^-8 ties to even 1+2^-6");
    CHECK(em_f32_to_bf16(1.00390625f + 0x1p-20f) == 0x3f81, "just above a tie rounds up");
    CHECK(em_f32_to_bf16(-1.5f) == 0xbfc0, "-1.5");
    CHECK(em_f32_to_bf16(bits_f32(0x7f7fffffu)) == 0x7f80, "f32 max overflows to Inf");
    CHECK(em_f32_to_bf16(bits_f32(0x7f7f7fffu)) == 0x7f7f, "below the tie stays finite");
    CHECK(em_f32_to_bf16(INFINITY) == 0x7f80 && em_f32_to_bf16(-INFINITY) == 0xff80, "Inf");
    CHECK(em_f32_to_bf16(0x1p-133f) == 0x0001, "bf16 min subnormal");
    CHECK(em_f32_to_bf16(bits_f32(0x00008000u)) == 0x0000, "half the min subnormal ties to 0");
    uint16_t bn = em_f32_to_bf16(bits_f32(0x7f800001u));
    CHECK(bf16_is_nan(bn) && (bn & 0x40), "low-payload NaN stays a quiet NaN (0x%04x)", bn);
    CHECK(bf16_is_nan(em_f32_to_bf16(NAN)), "NaN stays NaN");
    CHECK(em_bf16_to_f32(0x3f80) == 1.0f && em_bf16_to_f32(0x4049) == 3.140625f, "bf16 to f32");

    int bad_trip = 0, bad_tie = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        float f = em_bf16_to_f32((uint16_t)b);
        uint16_t back = em_f32_to_bf16(f);
        if (bf16_is_nan((uint16_t)b))
            bad_trip += !isnan(f) || !bf16_is_nan(back);
        else
            bad_trip += back != b || f32_bits(f) != b << 16;
        if ((b & 0x7fff) < 0x7f80) { /* finite: the tie above it and its neighbours */
            uint32_t mid = (b << 16) + 0x8000u;
            uint16_t even = (b & 1) ? (uint16_t)(b + 1) : (uint16_t)b;
            bad_tie += em_f32_to_bf16(bits_f32(mid)) != even;
            bad_tie += em_f32_to_bf16(bits_f32(mid - 1)) != b;
            bad_tie += em_f32_to_bf16(bits_f32(mid + 1)) != b + 1;
        }
    }
    CHECK(bad_trip == 0, "bf16 -> f32 -> bf16 round trip for all values (%d wrong)", bad_trip);
    CHECK(bad_tie == 0, "f32 -> bf16 at and around every tie (%d wrong)", bad_tie);
}

static void test_dtypes(void)
{
    static const size_t sizes[EM_DTYPE_COUNT] = {8, 4, 2, 2, 8, 4, 2, 1, 1, 1};
    for (int d = 0; d < EM_DTYPE_COUNT; d++) {
        CHECK(em_dtype_valid(d), "valid %d", d);
        CHECK(em_dtype_size((em_dtype)d) == sizes[d], "size of %s", em_dtype_name((em_dtype)d));
        CHECK(em_dtype_parse(em_dtype_name((em_dtype)d)) == d, "parse(name(%d))", d);
        CHECK(em_dtype_promote((em_dtype)d, (em_dtype)d) == (em_dtype)d, "promote(x, x) = x");
        CHECK(em_dtype_promote((em_dtype)d, EM_BOOL) == (em_dtype)d, "bool promotes to the other");
        for (int e = 0; e < EM_DTYPE_COUNT; e++)
            CHECK(em_dtype_promote((em_dtype)d, (em_dtype)e) ==
                      em_dtype_promote((em_dtype)e, (em_dtype)d),
                  "promote is symmetric for %d, %d", d, e);
    }
    CHECK(!em_dtype_valid(-1) && !em_dtype_valid(EM_DTYPE_COUNT), "invalid dtypes");
    CHECK(!strcmp(em_dtype_name(EM_BF16), "bf16") && !strcmp(em_dtype_name((em_dtype)42), "?"),
          "names");
    CHECK(em_dtype_size((em_dtype)42) == 0, "size of an invalid dtype");
    CHECK(em_dtype_parse("float32") == EM_F32 && em_dtype_parse("BFloat16") == EM_BF16 &&
              em_dtype_parse("uint8") == EM_U8,
          "long names");
    CHECK(em_dtype_parse("f8") == -1 && em_dtype_parse(NULL) == -1, "unknown names");
    CHECK(em_dtype_is_float(EM_BF16) && !em_dtype_is_float(EM_I32) && !em_dtype_is_float(EM_BOOL),
          "is_float");
    CHECK(em_dtype_is_int(EM_U8) && em_dtype_is_int(EM_I64) && !em_dtype_is_int(EM_BOOL) &&
              !em_dtype_is_int(EM_F16),
          "is_int");

    static const struct {
        em_dtype a, b, want;
    } table[] = {
        {EM_U8, EM_I8, EM_I16},    {EM_U8, EM_I16, EM_I16},   {EM_U8, EM_I32, EM_I32},
        {EM_U8, EM_I64, EM_I64},   {EM_I8, EM_I32, EM_I32},   {EM_I16, EM_I64, EM_I64},
        {EM_BOOL, EM_U8, EM_U8},   {EM_BOOL, EM_I8, EM_I8},   {EM_F16, EM_BF16, EM_F32},
        {EM_BF16, EM_F32, EM_F32}, {EM_F16, EM_F64, EM_F64},  {EM_F32, EM_F64, EM_F64},
        {EM_I64, EM_F16, EM_F16},  {EM_U8, EM_BF16, EM_BF16}, {EM_I64, EM_F32, EM_F32},
        {EM_BOOL, EM_F16, EM_F16}, {EM_I32, EM_F64, EM_F64},  {EM_BOOL, EM_BOOL, EM_BOOL},
    };
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        CHECK(em_dtype_promote(table[i].a, table[i].b) == table[i].want, "promote(%s, %s) = %s",
              em_dtype_name(table[i].a), em_dtype_name(table[i].b), em_dtype_name(table[i].want));
    em_dtype_promote((em_dtype)42, EM_F32);
    CHECK_ERR(EM_ERR_DTYPE, "em_dtype_promote");
}

int main(void)
{
    h_init();
    const char *tmp = getenv("TMPDIR");
    snprintf(tmp_dir, sizeof tmp_dir, "%s/ember_test_core_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    CHECK(mkdtemp(tmp_dir) != NULL, "make a temporary directory");

    test_errors();
    test_log();
    test_memory();
    test_threads();
    test_philox();
    test_rng();
    test_half();
    test_bf16();
    test_dtypes();

    rmdir(tmp_dir);
    return h_finish();
}
