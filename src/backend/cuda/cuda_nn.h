/* The CUDA backend's normalisation, real FFT, integer matmul and the staging helpers its
 * convolution and pooling use (cuda_nn.c, kernels/conv_nn.cu). */
#ifndef EMBER_CUDA_NN_H
#define EMBER_CUDA_NN_H

#include "../backend.h"

/* Whether kind is one cuda_nn_supports / cuda_nn_exec answer for (norms, RFFT, IRFFT). */
bool cuda_nn_claims(em_op_kind kind);
bool cuda_nn_supports(const ir_op *op);
em_status cuda_nn_exec(const ir_op *op, int dev, const char *what);

/* MATMUL of one integer dtype (i64 i32 i16 i8 u8), any strides and broadcast batch dims. */
bool cuda_nn_int_matmul_ok(const ir_op *op);
em_status cuda_nn_int_matmul(const ir_op *op, int dev, const char *what);

/* A contiguous device copy of t (f32, f64, f16, bf16) in *buf, as dtype f32 when to_f32, else
 * t's own; *view describes it. When t is already contiguous and no
 * conversion is asked, *view is t itself and *buf is NULL. The caller frees *buf. */
em_status cuda_nn_stage(int dev, const ir_tensor *t, bool to_f32, ir_tensor *view, void **buf,
                        const char *what);

/* dst (f16/bf16 contiguous, n values) from the contiguous f32 buffer src. */
em_status cuda_nn_from_f32(int dev, const void *src, const ir_tensor *dst, const char *what);

#endif
