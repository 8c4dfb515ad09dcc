/* The CPU caching allocator: size-bucketed free lists in front of em_alloc (see cpu_cache.c). */
#ifndef EMBER_CPU_CACHE_H
#define EMBER_CPU_CACHE_H

#include <stddef.h>

void *cpu_cache_alloc(size_t nbytes);
void cpu_cache_free(void *p);

#endif
