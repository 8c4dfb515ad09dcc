// The scalar code of the elementwise kinds, switched on the op's OP_* code: unary_f (f32),
// unary_d (f64), unary_i (integers), unary_pred (-> bool), binary_d, binary_i,
// binary_int_div and the derivatives grad_d (EW_GRAD), generated from the op table (src/ir/ops.def) into cuda_ew_gen.cuh with the
// OP_* numbers of every kind. Binary f32 kinds compute in f64 and round once, as the CPU backend
// does (binary_d). Used by ew.cu, ew_scalar.cu, matmul.cu and rows.cu.
#ifndef EMBER_CUDA_EW_SCALAR_CUH
#define EMBER_CUDA_EW_SCALAR_CUH
#include "prelude.cuh"
#include "cuda_ew_gen.cuh"
#endif
