/* Internal declarations shared by the core layer and the layers above it. */
#ifndef EMBER_CORE_IMPL_H
#define EMBER_CORE_IMPL_H

#include <ember/core.h>
#include <string.h>

#include "checked.h"

#if defined(__GNUC__) || defined(__clang__)
#define EM_THREAD_LOCAL __thread
#define EM_LIKELY(x)    __builtin_expect(!!(x), 1)
#define EM_UNLIKELY(x)  __builtin_expect(!!(x), 0)
#else
#define EM_THREAD_LOCAL _Thread_local
#define EM_LIKELY(x)    (x)
#define EM_UNLIKELY(x)  (x)
#endif

/* Failures since a point. A function that runs several steps and checks for a failure at the end
 * takes a mark first and asks core_failed_since(mark): an error that was already pending when it
 * started (a stale one) never makes it fail. Every em_error call counts, also one that keeps the
 * earlier pending error, so a step that failed while a stale error was pending is seen too; a
 * failure whose error was cleared since (em_clear_error) is not. */
uint64_t core_error_mark(void);
bool core_failed_since(uint64_t mark);
/* Forgets the failures since mark, for one the library handles itself (a fallback takes over):
 * the error they recorded is cleared, one pending before the mark stays, and core_failed_since
 * of an earlier mark no longer sees them. */
void core_error_forget(uint64_t mark);

/* Runs the one-time initialisation (configuration, logging levels, thread count). */
void core_init(void);

/* ---- configuration (config.c; the keys: config_keys.def) ---------------------------------- */

typedef enum core_cfg_key {
#define CFG(id, ...) CFG_##id,
#include "config_keys.def"
#undef CFG
    CFG_COUNT
} core_cfg_key;

/* The key's value: the winning layer's, else the default. By type: a bool; an integer (an
 * unsigned key's bits; an int key's `auto` is 0); a string or an enum's value as the table
 * spells it (interned: valid for the life of the process; NULL for a string key without a
 * value). core_cfg_is compares an enum key's value with one of its values. */
bool core_cfg_bool(core_cfg_key k);
int64_t core_cfg_int(core_cfg_key k);
const char *core_cfg_str(core_cfg_key k);
bool core_cfg_is(core_cfg_key k, const char *value);
/* Whether a layer sets the key (else it has its default), and where the value comes from, for
 * messages: "ember.toml:3", "EMBER_DEVICE", "em_config_set" or "the default". */
bool core_cfg_is_set(core_cfg_key k);
const char *core_cfg_source(core_cfg_key k);

/* The config key max_tensor_mb in bytes: the most one tensor's storage may take (0: no limit of
 * its own; the device's memory still bounds it). */
int64_t core_max_tensor_bytes(void);

/* ---- the TOML subset (toml.c) ------------------------------------------------------------ */

/* Called for each key of a file: the flattened key ("log.cpu"), the value as text (strings
 * decoded, integers in decimal, floats as written, true / false) and its line. False stops the
 * parse as out of memory. */
typedef bool (*core_toml_fn)(void *ctx, const char *key, const char *value, int line);
/* Parses text (NUL-terminated) named path in messages; fn may be NULL. False on a syntax error,
 * with "path:line: what" in err (fn's earlier calls stand). */
bool core_toml_parse(const char *text, const char *path, core_toml_fn fn, void *ctx, char *err,
                     size_t cap);
/* Reads a whole file (malloc'd, NUL-terminated, no NUL inside): EM_OK, EM_ERR_IO (*missing set
 * when it does not exist), EM_ERR_FORMAT or EM_ERR_OOM with the reason in err. */
em_status core_toml_read(const char *path, char **text, bool *missing, char *err, size_t cap);
/* Parses text[0..len) as an ember.toml without storing anything (for the fuzz target): EM_OK,
 * or EM_ERR_FORMAT / EM_ERR_OOM with the reason in err. */
em_status core_config_parse_memory(const char *text, size_t len, char *err, size_t cap);

/* The number of hardware threads (cores) available to the process. */
int core_hw_threads(void);

/* em_parallel_for's split, but the threads claim chunks from one queue in index order, so
 * chunks start in order: for plans that put their longest chunks first and end on short ones to
 * balance the threads (the GEMM's row tasks), not for streaming memory (em_parallel_for). */
void core_parallel_for_in_order(int64_t n, int64_t grain, em_range_fn fn, void *ctx);

/* The generator's seed and its offset, advanced past `counters` Philox counters in the same step
 * (for a replayed CUDA graph: the counters its random ops draw this time). */
em_rng_state core_rng_take(uint64_t counters);

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

/* A float's bits and back. */
static inline uint32_t core_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float core_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Inline f16 / bf16 conversions for hot loops, with the bits of em_f16_to_f32, em_f32_to_f16,
 * em_bf16_to_f32 and em_f32_to_bf16 (the f16 ones call those for subnormals, Inf, NaN and
 * values that round outside the normal range). */
static inline float core_bf16_to_f32(uint16_t h)
{
    return core_bits_f32((uint32_t)h << 16);
}

static inline uint16_t core_f32_to_bf16(float f)
{
    uint32_t x = core_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: truncate and force the quiet bit */
        return (uint16_t)((x >> 16) | 0x0040u);
    /* Round to nearest even on the low 16 bits; overflow carries into Inf naturally. */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static inline float core_f16_to_f32(uint16_t h)
{
    uint32_t e = ((uint32_t)h >> 10) & 0x1fu;
    if (EM_UNLIKELY(e == 0 || e == 0x1f)) return em_f16_to_f32(h);
    return core_bits_f32(((uint32_t)(h & 0x8000u) << 16) | ((e + 112u) << 23) |
                         ((uint32_t)(h & 0x3ffu) << 13));
}

static inline uint16_t core_f32_to_f16(float f)
{
    uint32_t x = core_f32_bits(f);
    uint32_t ax = x & 0x7fffffffu;
    if (EM_UNLIKELY(ax < 0x38800000u || ax >= 0x477ff000u)) return em_f32_to_f16(f);
    /* normal half: re-bias the exponent by -112, round the 13 bits (to nearest even) */
    ax += 0xc8000fffu + ((ax >> 13) & 1u);
    return (uint16_t)(((x >> 16) & 0x8000u) | (ax >> 13));
}

#endif
