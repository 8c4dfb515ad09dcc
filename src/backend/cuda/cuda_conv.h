/* The CUDA backend's convolutions (cuda_conv.c), and what they take from the matmul code of
 * cuda_backend.c. */
#ifndef EMBER_CUDA_CONV_H
#define EMBER_CUDA_CONV_H

#include <stdint.h>

#include "../backend.h"

/* CONV and CONV_TRANSPOSE records that be_supports accepted (contiguous output, one float
 * dtype, 1 to 3 spatial dims). */
em_status cuda_conv_exec(const ir_op *op, int dev, const char *what);
/* IM2COL and COL2IM records (2-D). */
em_status cuda_fold_exec(const ir_op *op, int dev, const char *what);

/* ---- from cuda_backend.c ------------------------------------------------------------------ */

/* The kernel-name suffix of f32 / f64 ("i64" for anything else). */
const char *cuda_short_name(em_dtype dt);
/* Whether device runs the Hopper kernels (kernels/matmul_wgmma.cu): sm_90, and config
 * cuda_wgmma is not off (which keeps the mma.sync kernels). */
bool cuda_wgmma_device(int dev);
/* Whether the config key cuda_tf32 lets f32 products use the TF32 tensor cores (off by default,
 * as in PyTorch). */
bool cuda_tf32_allowed(void);

/* A tensor map (CUtensorMap: 128 opaque bytes, 64-byte aligned) as the kernels take it. */
typedef struct cuda_tmap {
    _Alignas(64) uint64_t w[16];
} cuda_tmap;
/* A 2-D operand [outer][inner] of esz-byte elements (rows ld_bytes apart) read in boxes of
 * box_in x box_out elements with the 128-byte swizzle; elements past the edges read as zero.
 * false when the driver refuses the layout. */
bool cuda_encode_tmap(cuda_tmap *m, int esz, const void *p, int64_t inner, int64_t outer,
                      int64_t ld_bytes, unsigned box_in, unsigned box_out);
/* The same with the 128-byte swizzle (swizzle) or none (the box's rows stored dense). */
bool cuda_encode_tmap_swizzle(cuda_tmap *m, int esz, const void *p, int64_t inner, int64_t outer,
                              int64_t ld_bytes, unsigned box_in, unsigned box_out, bool swizzle);

#endif
