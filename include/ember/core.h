/* Ember core: errors, logging, configuration, memory, threads, random numbers and dtypes.
 * Everything here is usable before any tensor exists; the library initialises itself lazily. */
#ifndef EMBER_CORE_H
#define EMBER_CORE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define EM_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define EM_PRINTF(f, a)
#endif

/* Marks the functions the libraries export. Ember builds with hidden visibility, so a function
 * is exported exactly when a public header declares it with EM_API; for programs that include
 * these headers it expands to nothing. */
#if defined(EMBER_BUILDING) && (defined(__GNUC__) || defined(__clang__))
#define EM_API __attribute__((visibility("default")))
#else
#define EM_API
#endif

#define EM_VERSION_MAJOR 0
#define EM_VERSION_MINOR 1
#define EM_VERSION_PATCH 0
/* The library's version as "major.minor.patch". */
EM_API const char *em_version(void);

/* ---- errors ------------------------------------------------------------------------------ */

typedef enum em_status {
    EM_OK = 0,
    EM_ERR_INVALID_ARG = 1, /* NULL pointer, bad option value */
    EM_ERR_SHAPE = 2,       /* shapes that do not fit together */
    EM_ERR_DTYPE = 3,       /* a dtype the op does not accept */
    EM_ERR_INDEX = 4,       /* dimension or element index out of range */
    EM_ERR_OOM = 5,         /* an allocation failed */
    EM_ERR_DEVICE = 6,      /* unknown device, or tensors on different devices */
    EM_ERR_UNSUPPORTED = 7, /* valid request the backend cannot run */
    EM_ERR_IO = 8,          /* file or system call failed */
    EM_ERR_FORMAT = 9,      /* malformed file or text */
    EM_ERR_STATE = 10,      /* call out of order (e.g. em_scope_end without a scope) */
    EM_ERR_INTERNAL = 11,   /* a bug in Ember */
} em_status;

/* The rule for every function: it fails (NULL, a status other than EM_OK) only because of its
 * own arguments or work, never because an earlier error is still pending; a NULL argument fails
 * it and keeps the error that made the NULL, so a chain reports its first error. Errors are per
 * thread; a pending one stays until em_clear_error (handling an error means clearing it).
 *
 * Records an error for this thread unless one is already pending (the first error wins).
 * Returns the code, so `return em_error(...)` reads naturally. */
EM_API em_status em_error(em_status code, const char *fmt, ...) EM_PRINTF(2, 3);
/* The pending error's message ("" when none) and code (EM_OK when none). */
EM_API const char *em_last_error(void);
EM_API em_status em_last_status(void);
/* True when an error is pending on this thread. */
EM_API bool em_failed(void);
/* Forgets the pending error. */
EM_API void em_clear_error(void);
/* Human name of a status code ("shape error", ...). */
EM_API const char *em_status_name(em_status code);
/* Failures since a point, for code that runs several steps and checks at the end (a dataset's
 * get, a training callback): take a mark first; em_failed_since(mark) is true when an error was
 * recorded since, and an error that was already pending never counts. em_error_forget(mark)
 * clears the errors recorded since the mark (the caller handled them) and keeps an older one. */
EM_API uint64_t em_error_mark(void);
EM_API bool em_failed_since(uint64_t mark);
EM_API void em_error_forget(uint64_t mark);

/* ---- logging ----------------------------------------------------------------------------- */

typedef enum em_log_level {
    EM_LOG_TRACE = 0,
    EM_LOG_DEBUG = 1,
    EM_LOG_INFO = 2,
    EM_LOG_WARN = 3,
    EM_LOG_ERROR = 4,
    EM_LOG_OFF = 5,
} em_log_level;

typedef void (*em_log_fn)(void *user, const char *component, em_log_level level, const char *msg);

/* Level for one component ("cpu", "tensor", ...) or for all with component NULL or "*".
 * Messages below the level are dropped. The default is WARN. */
EM_API void em_log_set_level(const char *component, em_log_level level);
EM_API em_log_level em_log_get_level(const char *component);
/* Sinks: stderr (on by default), a file (appended; NULL closes it) and one callback. */
EM_API void em_log_to_stderr(bool on);
EM_API em_status em_log_to_file(const char *path);
EM_API void em_log_set_callback(em_log_fn fn, void *user);
/* Emits one message to every sink when the component's level allows it. */
EM_API void em_log_msg(const char *component, em_log_level level, const char *fmt, ...)
    EM_PRINTF(3, 4);
/* Parses "trace".."off" (case-insensitive); returns -1 when unknown. */
EM_API int em_log_level_parse(const char *name);

/* ---- configuration ----------------------------------------------------------------------- */

/* Settings: the keys of docs/config.md, each a boolean, an integer, a choice among named values
 * or a string, with a default. They come from `ember.toml` in the working directory, files
 * loaded with em_config_load_file, EMBER_* environment variables ("threads" <- EMBER_THREADS,
 * "log.cpu" <- EMBER_LOG_CPU) and em_config_set, a later source winning; files and the
 * environment are read at start-up and by em_config_reload. An unknown key or a bad value in a
 * file or the environment is a warning naming the file and line or the variable. */

/* The key's value (set, or its default), by type: em_config_get_bool for boolean keys,
 * em_config_get_int for integer ones (`auto` reads as 0), em_config_get_string for strings and
 * choices (NULL: a string key without a value; the string stays valid). An unknown key or one of
 * another type gives false / 0 / NULL and EM_ERR_INVALID_ARG. */
EM_API bool em_config_get_bool(const char *key);
EM_API int64_t em_config_get_int(const char *key);
EM_API const char *em_config_get_string(const char *key);
/* True when a source sets the key (false: it has its default). */
EM_API bool em_config_is_set(const char *key);
/* Sets a value for this process (wins over files and the environment; NULL removes it), written
 * as in a file or variable. EM_ERR_INVALID_ARG for an unknown key or a bad value. */
EM_API em_status em_config_set(const char *key, const char *value);
/* Reads a TOML file (the subset Ember uses: tables, strings, integers, floats, booleans). */
EM_API em_status em_config_load_file(const char *path);
/* Re-reads ember.toml and the environment and applies them (log levels, threads, seed). */
EM_API em_status em_config_reload(void);

/* ---- memory ------------------------------------------------------------------------------ */

typedef struct em_mem_stats {
    int64_t current_bytes; /* bytes held now through em_alloc */
    int64_t peak_bytes;    /* highest current_bytes since start or em_mem_reset_peak */
    int64_t total_allocs;  /* number of successful allocations */
    int64_t live_allocs;   /* allocations not yet freed */
    /* The CPU backend's caching allocator (config cpu_cache_mb): free blocks kept for reuse.
     * They are not part of current_bytes/live_allocs; em_mem_trim returns them to the system. */
    int64_t cached_bytes;  /* capacity of the cached free blocks */
    int64_t cached_blocks; /* number of cached free blocks */
    int64_t cache_hits;    /* tensor allocations served from the cache */
    int64_t cache_misses;  /* tensor allocations that went to the system */
} em_mem_stats;

/* 64-byte-aligned allocation counted in the statistics; NULL and EM_ERR_OOM on failure. */
EM_API void *em_alloc(size_t nbytes);
/* Zero-filled em_alloc. */
EM_API void *em_calloc(size_t nbytes);
EM_API void em_free(void *p);
EM_API em_mem_stats em_mem_get_stats(void);
EM_API void em_mem_reset_peak(void);
/* Makes the n-th allocation from now fail (1 = the next one); 0 turns it off. For tests. */
EM_API void em_mem_fail_at(int64_t n);
/* With guards on, every block carries canary bytes before and after it, checked on free and
 * by em_mem_check_guards (which returns the number of damaged blocks). Tests turn this on. */
EM_API void em_mem_set_guards(bool on);
EM_API int64_t em_mem_check_guards(void);
/* Returns every block held by the CPU caching allocator to the system; returns the bytes freed. */
EM_API int64_t em_mem_trim(void);

/* ---- threads ----------------------------------------------------------------------------- */

/* Threads the CPU backend may use (default: EMBER_NUM_THREADS, else the number of cores). */
EM_API void em_set_num_threads(int n);
EM_API int em_get_num_threads(void);
/* Calls fn(ctx, begin, end) over [0, n) split into chunks of at least `grain` items, on the
 * persistent pool. The split depends only on n and grain, never on the thread count. Each thread
 * starts on its own contiguous run of chunks (its share of an even split) and, when that is done,
 * takes the chunks left at the ends of the others' runs. */
typedef void (*em_range_fn)(void *ctx, int64_t begin, int64_t end);
EM_API void em_parallel_for(int64_t n, int64_t grain, em_range_fn fn, void *ctx);

/* ---- random numbers ---------------------------------------------------------------------- */

/* Philox 4x32-10: four 32-bit outputs for a 128-bit counter and a 64-bit key. */
EM_API void em_philox4x32(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]);

/* The global generator: a seed and an offset (counter position); every random op consumes a
 * block of counters, so the same seed gives the same numbers on every backend. */
typedef struct em_rng_state {
    uint64_t seed;
    uint64_t offset;
} em_rng_state;
EM_API void em_seed(uint64_t seed);
EM_API em_rng_state em_rng_get_state(void);
EM_API void em_rng_set_state(em_rng_state s);
/* Reserves the counters that n 32-bit words of the stream need (ceil(n/4) + 1) and returns the
 * offset of the first; an op drawing k values of 2 words each reserves 2k. */
EM_API uint64_t em_rng_reserve(uint64_t n);
/* Value number `i` of the stream (seed, offset): uniform in [0,1), normal (Box-Muller). */
EM_API double em_rng_uniform_at(uint64_t seed, uint64_t offset, uint64_t i);
EM_API double em_rng_normal_at(uint64_t seed, uint64_t offset, uint64_t i);
/* Raw 32-bit word number `i` of the stream. */
EM_API uint32_t em_rng_u32_at(uint64_t seed, uint64_t offset, uint64_t i);

/* ---- dtypes ------------------------------------------------------------------------------ */

typedef enum em_dtype {
    EM_F64 = 0,
    EM_F32 = 1,
    EM_F16 = 2,
    EM_BF16 = 3,
    EM_I64 = 4,
    EM_I32 = 5,
    EM_I16 = 6,
    EM_I8 = 7,
    EM_U8 = 8,
    EM_BOOL = 9,
    EM_DTYPE_COUNT = 10,
} em_dtype;

EM_API size_t em_dtype_size(em_dtype dt);
EM_API const char *em_dtype_name(em_dtype dt); /* "f32", ... ; "?" when invalid */
EM_API int em_dtype_parse(const char *name);   /* -1 when unknown */
EM_API bool em_dtype_valid(int dt);
EM_API bool em_dtype_is_float(em_dtype dt);
EM_API bool em_dtype_is_int(em_dtype dt); /* signed or unsigned integer, not bool */
/* Result dtype of a binary op on a and b (PyTorch's promotion for tensors of equal rank). */
EM_API em_dtype em_dtype_promote(em_dtype a, em_dtype b);

/* IEEE half and bfloat16 conversions, round to nearest even; NaN stays NaN. */
EM_API uint16_t em_f32_to_f16(float f);
EM_API float em_f16_to_f32(uint16_t h);
EM_API uint16_t em_f32_to_bf16(float f);
EM_API float em_bf16_to_f32(uint16_t b);

#ifdef __cplusplus
}
#endif
#endif
