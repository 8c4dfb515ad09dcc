/* Run-time choice of the vectorised row kernels (cpu_fast.h): AVX-512 when the CPU has
 * AVX-512F+DQ, else AVX2+FMA, else none (always none off x86). */
#include <stdatomic.h>
#include <stddef.h>

#include "cpu_fast.h"

static atomic_bool force_portable;

void cpu_fast_force_portable(bool on)
{
    atomic_store(&force_portable, on);
}

bool cpu_fast_portable_forced(void)
{
    return atomic_load(&force_portable);
}

const cpu_fast_ops *cpu_fast(void)
{
    static atomic_int isa = -1; /* 0 none, 1 AVX2+FMA, 2 AVX-512 */
    int h = atomic_load(&isa);
#if CPU_X86
    if (h < 0) {
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"))
            h = 2;
        else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
            h = 1;
        else
            h = 0;
        atomic_store(&isa, h);
    }
    if (atomic_load(&force_portable)) return NULL;
    return h == 2 ? &cpu_fast_avx512_ops : h == 1 ? &cpu_fast_avx2_ops : NULL;
#else
    (void)h;
    return NULL;
#endif
}
