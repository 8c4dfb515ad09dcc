/* The CUDA backend's convolutions (cuda_conv.c), and what they take from cuda_backend.c and the
 * matmul code (cuda_matmul.h). */
#ifndef EMBER_CUDA_CONV_H
#define EMBER_CUDA_CONV_H

#include <stdint.h>

#include "../backend.h"
#include "cuda_matmul.h"

/* CONV and CONV_TRANSPOSE records that be_supports accepted (contiguous output, one float
 * dtype, 1 to 3 spatial dims). */
em_status cuda_conv_exec(const ir_op *op, int dev, const char *what);
/* IM2COL and COL2IM records (2-D). */
em_status cuda_fold_exec(const ir_op *op, int dev, const char *what);

/* ---- from cuda_backend.c ------------------------------------------------------------------ */

/* The kernel-name suffix of f32 / f64 ("i64" for anything else). */
const char *cuda_short_name(em_dtype dt);

#endif
