// The im2col geometry (struct convg) of the convolution kernels (conv.cu, conv_nn.cu): image and
// block (output) extents, kernel, stride, padding and dilation along up to three spatial dims.
#ifndef EMBER_CUDA_CONV_CUH
#define EMBER_CUDA_CONV_CUH
#include "prelude.cuh"

struct convg {
    i64 img[3], blk[3], k[3], s[3], p[3], d[3];
    i64 n, c; // batch and channels of the image
};
#endif
