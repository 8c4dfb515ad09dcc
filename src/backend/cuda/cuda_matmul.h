/* The float MATMUL kernels' host side (cuda_matmul.c): the Hopper test, TF32's permission and
 * the tensor maps the copy-engine kernels read through, shared with cuda_conv.c. cuda_matmul and
 * cuda_mm_geometry are in cuda.h. */
#ifndef EMBER_CUDA_MATMUL_H
#define EMBER_CUDA_MATMUL_H

#include "cuda.h"

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
