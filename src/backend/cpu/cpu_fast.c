/* Run-time choice of the AVX-512 row kernels (cpu_fast.h). */
#include <stdatomic.h>

#include "cpu_fast.h"

static atomic_bool force_portable;

void cpu_fast_force_portable(bool on)
{
    atomic_store(&force_portable, on);
}

bool cpu_has_avx512(void)
{
    static atomic_int has = -1;
    int h = atomic_load(&has);
    if (h < 0) {
        __builtin_cpu_init();
        h = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
        atomic_store(&has, h);
    }
    return h && !atomic_load(&force_portable);
}
