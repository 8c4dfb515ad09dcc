/* Fast f32 max pooling (1-D and 2-D windows): see cpu_pool_fast.c. */
#ifndef EMBER_CPU_POOL_FAST_H
#define EMBER_CPU_POOL_FAST_H

#include "cpu.h"

/* The geometry of one f32 max-pool op in 2-D form (1-D pooling has H = OH = kh = 1). Planes are
 * the leading dims (up to two: N and C); x_sn/x_sc are their strides, x_sh/x_sw the row and
 * column strides, all in elements. Output values and indices are contiguous; idx is NULL for a
 * values-only op (MAX_POOL_VALUES). */
typedef struct cpu_maxpool_geom {
    const float *x;
    float *out;
    int64_t *idx;
    int64_t N, C, H, W, OH, OW;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    int64_t x_sn, x_sc, x_sh, x_sw;
} cpu_maxpool_geom;

/* Runs a MAX_POOL or MAX_POOL_VALUES op through the fast path when it applies (f32, 1-D/2-D
 * windows, at most two leading dims); false when it does not (nothing written). */
bool cpu_pool_max_fast(const ir_op *op);
/* AVX-512 pieces (cpu_pool_avx512.c): rows [r0, r1) of N*C*OH output rows for inputs whose
 * columns are contiguous (x_sw == 1, stride 1 windows), and units [u0, u1) of N*OH*ceil(C/16)
 * for channels-last inputs (x_sc == 1). Borders and tails go through cpu_maxpool_one. */
void cpu_maxpool_rows_avx512(const cpu_maxpool_geom *g, int64_t r0, int64_t r1);
void cpu_maxpool_cl_avx512(const cpu_maxpool_geom *g, int64_t u0, int64_t u1);
/* AVX2 pieces (cpu_pool_avx2.c): rows [r0, r1) as above, 8 columns at a time, and units
 * [u0, u1) of N*OH output rows for channels-last inputs (8 channels x 8 columns per block). */
void cpu_maxpool_rows_avx2(const cpu_maxpool_geom *g, int64_t r0, int64_t r1);
void cpu_maxpool_cl_avx2(const cpu_maxpool_geom *g, int64_t u0, int64_t u1);
/* Values-only AVX2 kernels in two passes (cpu_pool_sep_avx2.c): rows [r0, r1) for x_sw == 1
 * and sw 1 or 2, units [u0, u1) of N*OH output rows for channels-last inputs with C % 8 == 0;
 * stream: store the output around the caches. Rows whose windows hold a NaN or a -0 go through
 * the exact kernels above. false when out of memory (nothing done). */
bool cpu_maxpool_rows_sep_avx2(const cpu_maxpool_geom *g, int64_t r0, int64_t r1, bool stream);
bool cpu_maxpool_cl_sep_avx2(const cpu_maxpool_geom *g, int64_t u0, int64_t u1, bool stream);
/* The AVX-512 versions (cpu_pool_sep_avx512.c): contiguous rows as cpu_maxpool_rows_sep_avx2,
 * and channels-last inputs as cpu_maxpool_cl_sep_avx2 for C % 16 == 0. */
bool cpu_maxpool_rows_sep_avx512(const cpu_maxpool_geom *g, int64_t r0, int64_t r1, bool stream);
bool cpu_maxpool_cl_sep_avx512(const cpu_maxpool_geom *g, int64_t u0, int64_t u1, bool stream);
/* One output element (scalar reference of the fast path; same NaN and tie rules as the
 * portable kernel: the first maximum in window order, the last NaN when there is one). */
void cpu_maxpool_one(const cpu_maxpool_geom *g, int64_t n, int64_t c, int64_t oh, int64_t ow);
/* The window scan behind it: the maximum of the window at input row ih0, output column ow of
 * plane p, and its in-plane index in *bi (-1 for an empty window). */
float cpu_maxpool_window(const cpu_maxpool_geom *g, const float *p, int64_t ih0, int64_t ow,
                         int64_t *bi);
/* The two-pass kernels' rows of output row oh's windows: the valid input rows in plane p, in
 * window order, into rows[0 .. 64); their count, or -1 when there are more than 64. */
int cpu_maxpool_window_rows(const cpu_maxpool_geom *g, const float *p, int64_t oh,
                            const float **rows);
/* The same, and in *ahead the input row that output row oh + 2 adds (for a prefetch while this
 * row is read; NULL past the plane). */
int cpu_maxpool_window_rows_ahead(const cpu_maxpool_geom *g, const float *p, int64_t oh,
                                  const float **rows, const float **ahead);
/* The greatest common divisor of a > 0 and b >= 0 (the two-pass kernels' column step,
 * gcd(stride, dilation)). */
int64_t cpu_pool_gcd(int64_t a, int64_t b);
/* Instruction sets of the fast path, best last. */
enum { CPU_POOL_SCALAR, CPU_POOL_AVX2, CPU_POOL_AVX512 };
/* Test hook: caps the instruction set the fast path uses (-1: the best the CPU has); returns
 * false when the CPU lacks the one asked for. */
bool cpu_pool_fast_set_isa(int isa);

#endif
