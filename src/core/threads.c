/* The CPU thread pool behind em_parallel_for: persistent workers, created on first need and
 * sleeping on a condition variable between jobs, take chunks from an atomic counter while the
 * calling thread works too. Chunking depends only on (n, grain), so results that combine
 * per-chunk work in chunk order do not depend on the thread count. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "core_impl.h"

#define MAX_CHUNKS  256
#define MAX_THREADS 1024
#define ERR_CAP     512

int core_hw_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
#ifdef __linux__
    /* A process pinned to fewer cores (taskset, containers) should not oversubscribe them. */
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int c = CPU_COUNT(&set);
        if (c > 0 && (n < 1 || c < n)) n = c;
    }
#endif
    if (n < 1) n = 1;
    if (n > MAX_THREADS) n = MAX_THREADS;
    return (int)n;
}

static atomic_int num_threads; /* 0 until chosen */

void em_set_num_threads(int n)
{
    core_init();
    if (n < 1) n = 1;
    if (n > MAX_THREADS) n = MAX_THREADS;
    atomic_store(&num_threads, n);
}

int em_get_num_threads(void)
{
    core_init(); /* applies the "threads" setting when there is one */
    int n = atomic_load(&num_threads);
    if (n > 0) return n;
    int expected = 0;
    atomic_compare_exchange_strong(&num_threads, &expected, core_hw_threads());
    return atomic_load(&num_threads);
}

/* One job: [0, n) in nchunks chunks, the first `rem` of them one item longer than `base`. */
typedef struct job {
    em_range_fn fn;
    void *ctx;
    int64_t nchunks, base, rem;
    em_status err; /* the first error raised on a worker, handed to the caller */
    char err_msg[ERR_CAP];
    int caller_cpu; /* the CPU the caller ran on when it posted the job, or -1 */
    int parts;      /* spans the chunks are split into (run_spans): 1 for one in-order queue */
} job;

typedef struct worker {
    pthread_t tid;
    uint64_t start_gen; /* the generation before the worker's first job */
} worker;

/* job_lock serialises jobs (and guards the worker list); pool_lock guards the hand-off. */
static pthread_mutex_t job_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static worker workers[MAX_THREADS - 1];
static int nworkers;
static bool atfork_registered, atexit_registered, shut_down;

/* Under pool_lock. */
static job cur;
static _Atomic uint64_t generation; /* bumped once per job; read without the lock to spin */
static int nhelpers;                /* workers 0..nhelpers-1 take part in the current job */
static atomic_int pending;          /* helpers not yet finished with it (likewise) */
static bool stopping;

/* True on pool workers, and on a caller while it runs chunks: nested calls run inline. */
static EM_THREAD_LOCAL bool in_parallel;

static void chunk_range(const job *j, int64_t c, int64_t *begin, int64_t *end)
{
    *begin = c * j->base + (c < j->rem ? c : j->rem);
    *end = *begin + j->base + (c < j->rem ? 1 : 0);
}

/* Spans: with P = parts, participant p (workers 0..nhelpers-1, the caller nhelpers) owns chunks
 * [p nchunks / P, (p + 1) nchunks / P), packed as lo | hi << 32. Each takes its own span's chunks
 * from the front, then the others' from their ends, so every thread streams one contiguous part
 * of memory while the work stays balanced. With P = 1 all take span 0 from the front: one queue,
 * chunks started in index order. */
static _Atomic uint64_t span[MAX_THREADS];

static bool span_take(int p, bool front, int64_t *c)
{
    uint64_t v = atomic_load_explicit(&span[p], memory_order_relaxed);
    for (;;) {
        uint32_t lo = (uint32_t)v, hi = (uint32_t)(v >> 32);
        if (lo >= hi) return false;
        uint64_t nv = front ? v + 1 : v - ((uint64_t)1 << 32);
        if (atomic_compare_exchange_weak(&span[p], &v, nv)) {
            *c = front ? lo : hi - 1;
            return true;
        }
    }
}

static void run_spans(job *j, int me)
{
    for (int k = 0; k < j->parts; k++) {
        int p = (me + k) % j->parts;
        int64_t c, b, e;
        while (span_take(p, k == 0, &c)) {
            chunk_range(j, c, &b, &e);
            j->fn(j->ctx, b, e);
        }
    }
}

/* A worker that finished a job, and a caller whose share is done, first spin this long on the
 * job counters before sleeping on a condition variable: waking a sleeping thread costs tens of
 * microseconds, as much as a whole GEMV's imbalance, and back-to-back jobs (the ops of a
 * training step) arrive within the spin. Bounded, so an idle pool sleeps again at once. */
#define SPIN_NS 50000
/* A worker that finished its share of a job keeps spinning while the job's caller is still at
 * work (up to SPIN_BUSY_NS), and SPIN_NS after that: timed from its own finish instead, a worker
 * whose share ended more than SPIN_NS before the caller's slept through the next job's start, and
 * from then on every short job ran on the caller alone, at one thread's speed
 * (bench/RESULTS.md, evidence section). */
#define SPIN_BUSY_NS 2000000
static _Atomic int64_t job_end_ns; /* when the last job's caller finished it; 0 while one runs */

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

int64_t core_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Spins (without any lock) until *gen differs from seen, or *cnt reaches 0 when gen is NULL,
 * or SPIN_NS passed (for a worker, gen != NULL: SPIN_NS after the job's end, see SPIN_BUSY_NS);
 * the caller re-checks under pool_lock either way. Between checks it yields
 * the core, so a spinning thread on a busy machine gives way to runnable ones (on an idle core
 * sched_yield returns at once). */
static void spin_until(const _Atomic uint64_t *gen, uint64_t seen, const atomic_int *cnt)
{
    int64_t t0 = core_mono_ns();
    for (int i = 1;; i++) {
        if (gen ? atomic_load_explicit(gen, memory_order_acquire) != seen
                : atomic_load_explicit(cnt, memory_order_acquire) == 0)
            return;
        if (i % 16 == 0) {
            sched_yield();
            int64_t now = core_mono_ns(), end = gen ? atomic_load(&job_end_ns) : 0;
            if (end > 0 ? now - (end > t0 ? end : t0) > SPIN_NS
                        : now - t0 > (gen ? SPIN_BUSY_NS : SPIN_NS))
                return;
        } else {
            cpu_relax();
        }
    }
}

/* Moves the calling worker off the CPU its job's caller runs on, when it finds itself there: the
 * scheduler at times stacks a woken worker on its waker's CPU, and its balancer, which leaves
 * threads that just ran in place, can take many jobs to split the two again, all the while
 * every job running at one thread's speed (bench/RESULTS.md, evidence section). The worker's
 * allowed set without that CPU moves it at once; the set it had is then restored, so nothing
 * stays pinned. */
static void leave_callers_cpu(int caller_cpu)
{
#ifdef __linux__
    if (caller_cpu < 0 || sched_getcpu() != caller_cpu) return;
    cpu_set_t set, away;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return;
    away = set;
    CPU_CLR(caller_cpu, &away);
    if (CPU_COUNT(&away) > 0 && sched_setaffinity(0, sizeof away, &away) == 0)
        sched_setaffinity(0, sizeof set, &set);
#else
    (void)caller_cpu;
#endif
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    int idx = (int)(w - workers);
    in_parallel = true;
    pthread_mutex_lock(&pool_lock);
    uint64_t seen = w->start_gen;
    for (;;) {
        bool spun = false;
        while (!stopping) {
            if (generation != seen) {
                if (idx < nhelpers) break;
                seen = generation; /* a job too small to need this worker */
            }
            if (!spun) {
                spun = true;
                pthread_mutex_unlock(&pool_lock);
                spin_until(&generation, seen, NULL);
                pthread_mutex_lock(&pool_lock);
                continue;
            }
            pthread_cond_wait(&wake_cv, &pool_lock);
        }
        if (stopping) break;
        seen = generation;
        int caller_cpu = cur.caller_cpu;
        pthread_mutex_unlock(&pool_lock);
        leave_callers_cpu(caller_cpu);
        run_spans(&cur, idx);
        /* Errors are per thread: pass a worker's first one to the caller. */
        bool failed = em_failed();
        pthread_mutex_lock(&pool_lock);
        if (failed && cur.err == EM_OK) {
            cur.err = em_last_status();
            snprintf(cur.err_msg, sizeof cur.err_msg, "%s", em_last_error());
        }
        if (failed) em_clear_error();
        if (--pending == 0) pthread_cond_signal(&done_cv);
    }
    pthread_mutex_unlock(&pool_lock);
    return NULL;
}

/* Joins the workers at exit so leak checkers see a clean process. Skipped when a job is running
 * (exit called from inside one): the workers cannot be stopped safely then. */
static void pool_shutdown(void)
{
    if (pthread_mutex_trylock(&job_lock) != 0) return;
    pthread_mutex_lock(&pool_lock);
    stopping = true;
    pthread_cond_broadcast(&wake_cv);
    pthread_mutex_unlock(&pool_lock);
    for (int i = 0; i < nworkers; i++) pthread_join(workers[i].tid, NULL);
    nworkers = 0;
    shut_down = true;
    pthread_mutex_unlock(&job_lock);
}

/* fork() copies only the calling thread. The prepare handler waits for the running job so the
 * child inherits no lock held mid-job; the child then starts with no workers and fresh condition
 * variables (the parent's hold its sleeping workers). A fork from inside a job cannot wait for
 * it: that child runs em_parallel_for serially. */
static bool fork_locked;

static void fork_prepare(void)
{
    fork_locked = !in_parallel;
    if (!fork_locked) return;
    pthread_mutex_lock(&job_lock);
    pthread_mutex_lock(&pool_lock);
}

static void fork_parent(void)
{
    if (!fork_locked) return;
    pthread_mutex_unlock(&pool_lock);
    pthread_mutex_unlock(&job_lock);
}

static void fork_child(void)
{
    pthread_cond_init(&wake_cv, NULL);
    pthread_cond_init(&done_cv, NULL);
    nworkers = 0;
    nhelpers = 0;
    pending = 0;
    if (!fork_locked) shut_down = true;
    fork_parent();
}

static int hw_cpus; /* core_hw_threads() when the first worker started (under job_lock) */

static int current_cpu(void)
{
#ifdef __linux__
    return sched_getcpu();
#else
    return -1;
#endif
}

/* Under job_lock. Returns how many workers exist, at most `want`. */
static int ensure_workers(int want)
{
    if (shut_down) return 0;
    if (!hw_cpus) hw_cpus = core_hw_threads();
    if (!atfork_registered) {
        if (pthread_atfork(fork_prepare, fork_parent, fork_child) != 0) return 0;
        atfork_registered = true;
    }
    if (!atexit_registered) {
        if (atexit(pool_shutdown) != 0) return 0;
        atexit_registered = true;
    }
    while (nworkers < want) {
        worker *w = &workers[nworkers];
        w->start_gen = generation; /* stable: only job_lock's holder changes it */
        if (pthread_create(&w->tid, NULL, worker_main, w) != 0) {
            em_log_msg("threads", EM_LOG_WARN, "could not start worker %d; using %d", nworkers + 1,
                       nworkers);
            break;
        }
        nworkers++;
    }
    return nworkers < want ? nworkers : want;
}

static void run_inline(job *j)
{
    for (int64_t c = 0; c < j->nchunks; c++) {
        int64_t b, e;
        chunk_range(j, c, &b, &e);
        j->fn(j->ctx, b, e);
    }
}

/* Chunks: nchunks = clamp(floor(n / grain), 1, 256), sizes differing by at most one, so every
 * chunk holds at least `grain` items (or all n when n < grain). Chunk c covers
 * [c*base + min(c, rem), ... + base + (c < rem)) with base = n / nchunks, rem = n % nchunks. */
static void parallel_for(int64_t n, int64_t grain, em_range_fn fn, void *ctx, bool in_order)
{
    if (!fn) {
        em_error(EM_ERR_INVALID_ARG, "em_parallel_for: fn is NULL (n = %lld)", (long long)n);
        return;
    }
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int64_t nchunks = n / grain;
    if (nchunks < 1) nchunks = 1;
    if (nchunks > MAX_CHUNKS) nchunks = MAX_CHUNKS;

    job local = {.fn = fn, .ctx = ctx, .nchunks = nchunks, .base = n / nchunks, .rem = n % nchunks};
    int helpers = 0;
    if (nchunks > 1 && !in_parallel) {
        int threads = em_get_num_threads();
        helpers = (int)(nchunks - 1 < threads - 1 ? nchunks - 1 : threads - 1);
    }
    if (helpers <= 0) {
        run_inline(&local);
        return;
    }

    pthread_mutex_lock(&job_lock);
    helpers = ensure_workers(helpers);
    if (helpers <= 0) {
        pthread_mutex_unlock(&job_lock);
        run_inline(&local);
        return;
    }
    pthread_mutex_lock(&pool_lock);
    cur.fn = fn;
    cur.ctx = ctx;
    cur.nchunks = local.nchunks;
    cur.base = local.base;
    cur.rem = local.rem;
    cur.parts = in_order ? 1 : helpers + 1;
    for (int p = 0; p < cur.parts; p++)
        atomic_store(&span[p], (uint64_t)(p * nchunks / cur.parts) |
                                   (uint64_t)((p + 1) * nchunks / cur.parts) << 32);
    cur.err = EM_OK;
    cur.err_msg[0] = '\0';
    nhelpers = helpers;
    pending = helpers;
    /* only when the pool fits the CPUs: more threads than CPUs must share them */
    cur.caller_cpu = helpers < hw_cpus ? current_cpu() : -1;
    atomic_store(&job_end_ns, 0);
    generation++;
    pthread_cond_broadcast(&wake_cv);
    pthread_mutex_unlock(&pool_lock);

    in_parallel = true;
    run_spans(&cur, helpers);
    in_parallel = false;

    spin_until(NULL, 0, &pending);
    pthread_mutex_lock(&pool_lock);
    while (pending > 0) pthread_cond_wait(&done_cv, &pool_lock);
    atomic_store(&job_end_ns, core_mono_ns());
    em_status err = cur.err;
    char msg[ERR_CAP];
    snprintf(msg, sizeof msg, "%s", cur.err_msg);
    pthread_mutex_unlock(&pool_lock);
    pthread_mutex_unlock(&job_lock);
    if (err != EM_OK) em_error(err, "%s", msg);
}

/* Each thread first runs a contiguous span of the chunks (run_spans): threads taking turns on
 * 1 MiB chunks read memory markedly slower than each reading its own span front to back
 * (bench/RESULTS.md, evidence section). */
void em_parallel_for(int64_t n, int64_t grain, em_range_fn fn, void *ctx)
{
    parallel_for(n, grain, fn, ctx, false);
}

void core_parallel_for_in_order(int64_t n, int64_t grain, em_range_fn fn, void *ctx)
{
    parallel_for(n, grain, fn, ctx, true);
}
