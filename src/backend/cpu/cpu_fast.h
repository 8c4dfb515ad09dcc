/* AVX-512 row kernels for the hot f32 element-wise, softmax, layer-norm and sum paths
 * (cpu_fast_avx512.c), used when cpu_has_avx512() and the operands are contiguous f32. Each
 * works on one row (or one block) in a fixed order, so results do not depend on the thread
 * count. */
#ifndef EMBER_CPU_FAST_H
#define EMBER_CPU_FAST_H

#include <stdbool.h>
#include <stdint.h>

/* True on CPUs with AVX-512F, unless turned off (cpu_fast_force_portable, for tests). */
bool cpu_has_avx512(void);
void cpu_fast_force_portable(bool on);

/* y = x * 0.5 * (1 + erf(x / sqrt 2)) for n floats (rational erf as the portable f32 path). */
void cpu_gelu_f32_avx512(const float *x, float *y, int64_t n);
/* One line of n floats: softmax (or log_softmax) as the portable kernel defines it (the max
 * is NaN when any element is; the sum of exponentials accumulates in f64). */
void cpu_softmax_row_f32_avx512(const float *x, float *y, int64_t n, bool log);
/* Layer norm (or RMS norm) of one row: f64 mean and variance, then f32 affine. */
void cpu_norm_row_f32_avx512(const float *x, float *y, const float *w, const float *b, int64_t n,
                             double eps, bool rms);
/* Sum of n floats in f64 (eight f64 lanes per half vector, combined in a fixed order). */
double cpu_sum_f32_avx512(const float *x, int64_t n);

#endif
