/* Internal declarations shared by the core layer and the layers above it. */
#ifndef EMBER_CORE_IMPL_H
#define EMBER_CORE_IMPL_H

#include <ember/core.h>

#if defined(__GNUC__) || defined(__clang__)
#define EM_THREAD_LOCAL __thread
#define EM_LIKELY(x)    __builtin_expect(!!(x), 1)
#define EM_UNLIKELY(x)  __builtin_expect(!!(x), 0)
#else
#define EM_THREAD_LOCAL _Thread_local
#define EM_LIKELY(x)    (x)
#define EM_UNLIKELY(x)  (x)
#endif

/* Runs the one-time initialisation (configuration, logging levels, thread count). */
void core_init(void);

/* The number of hardware threads (cores) available to the process. */
int core_hw_threads(void);

/* Overflow-checked size arithmetic: false when the result would not fit. */
static inline bool core_mul_ok(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

#endif
