/* Ember nn: convolution, pooling, normalisation, embedding, resampling and activation layers.
 * Included by nn.h. Every layer takes an options struct in which zero means PyTorch's default,
 * is created in f32 on `dev` with PyTorch's default initialisation, and names its parameters and
 * buffers as PyTorch's state_dict does ("weight", "bias", "running_mean", ...). The module guide
 * is docs/modules.md. */
#ifndef EMBER_NN_LAYERS_H
#define EMBER_NN_LAYERS_H

#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- convolution ------------------------------------------------------------------------- */

/* How a convolution pads its input. */
typedef enum em_padding {
    EM_PADDING_EXPLICIT = 0,   /* padding[i] on both sides of spatial dim i */
    EM_PADDING_SAME = 1,       /* output size = input size (stride 1; an odd total puts the extra
                                * element at the end, as PyTorch) */
    EM_PADDING_VALID = 2,      /* no padding */
    EM_PADDING_ASYMMETRIC = 3, /* padding[i] before and padding_end[i] after spatial dim i */
} em_padding;

/* Convolution options, one struct per spatial rank; zero means PyTorch's default (stride 1,
 * no padding, dilation 1, groups 1, zero padding, with bias). padding_mode pads with
 * EM_PAD_REFLECT/REPLICATE/CIRCULAR instead of zeros (not for transposed convolutions);
 * output_padding is for transposed convolutions only. Example:
 *   em_conv2d_new((em_conv2d_cfg){.in = 3, .out = 64, .kernel = {3, 3}, .padding = {1, 1}}, dev) */
typedef struct em_conv1d_cfg {
    int64_t in, out;
    int64_t kernel[1], stride[1], padding[1], padding_end[1], dilation[1], output_padding[1];
    int64_t groups;
    em_padding padding_type;
    em_pad_mode padding_mode;
    bool no_bias;
} em_conv1d_cfg;

typedef struct em_conv2d_cfg {
    int64_t in, out;
    int64_t kernel[2], stride[2], padding[2], padding_end[2], dilation[2], output_padding[2];
    int64_t groups;
    em_padding padding_type;
    em_pad_mode padding_mode;
    bool no_bias;
} em_conv2d_cfg;

typedef struct em_conv3d_cfg {
    int64_t in, out;
    int64_t kernel[3], stride[3], padding[3], padding_end[3], dilation[3], output_padding[3];
    int64_t groups;
    em_padding padding_type;
    em_pad_mode padding_mode;
    bool no_bias;
} em_conv3d_cfg;

/* Conv: weight [out, in/groups, k...], bias [out]; input [N, in, spatial...]. Weight
 * Kaiming-uniform (a = sqrt 5), bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)), as PyTorch. */
EM_API em_module *em_conv1d_new(em_conv1d_cfg cfg, em_device dev);
EM_API em_module *em_conv2d_new(em_conv2d_cfg cfg, em_device dev);
EM_API em_module *em_conv3d_new(em_conv3d_cfg cfg, em_device dev);
/* Transposed conv: weight [in, out/groups, k...]; padding crops the output (explicit or
 * asymmetric, "valid" = none; "same" is refused as in PyTorch); output_padding < stride or
 * dilation adds to the end of each spatial dim. */
EM_API em_module *em_conv_transpose1d_new(em_conv1d_cfg cfg, em_device dev);
EM_API em_module *em_conv_transpose2d_new(em_conv2d_cfg cfg, em_device dev);
EM_API em_module *em_conv_transpose3d_new(em_conv3d_cfg cfg, em_device dev);

/* ---- pooling ----------------------------------------------------------------------------- */

/* Pooling options; zero means default: stride = kernel, no padding, dilation 1 (max pooling
 * only), floor mode, padded zeros counted in averages (set exclude_pad for PyTorch's
 * count_include_pad=False). */
typedef struct em_pool1d_cfg {
    int64_t kernel[1], stride[1], padding[1], dilation[1];
    bool ceil_mode, exclude_pad;
} em_pool1d_cfg;

typedef struct em_pool2d_cfg {
    int64_t kernel[2], stride[2], padding[2], dilation[2];
    bool ceil_mode, exclude_pad;
} em_pool2d_cfg;

typedef struct em_pool3d_cfg {
    int64_t kernel[3], stride[3], padding[3], dilation[3];
    bool ceil_mode, exclude_pad;
} em_pool3d_cfg;

EM_API em_module *em_max_pool1d_new(em_pool1d_cfg cfg);
EM_API em_module *em_max_pool2d_new(em_pool2d_cfg cfg);
EM_API em_module *em_max_pool3d_new(em_pool3d_cfg cfg);
EM_API em_module *em_avg_pool1d_new(em_pool1d_cfg cfg);
EM_API em_module *em_avg_pool2d_new(em_pool2d_cfg cfg);
EM_API em_module *em_avg_pool3d_new(em_pool3d_cfg cfg);
/* Adaptive pooling to a fixed output size; a size of 0 keeps that input dim (PyTorch's None). */
EM_API em_module *em_adaptive_avg_pool1d_new(int64_t out_l);
EM_API em_module *em_adaptive_avg_pool2d_new(int64_t out_h, int64_t out_w);
EM_API em_module *em_adaptive_max_pool1d_new(int64_t out_l);
EM_API em_module *em_adaptive_max_pool2d_new(int64_t out_h, int64_t out_w);

/* ---- normalisation ----------------------------------------------------------------------- */

/* Batch and instance norm options; zero means default: eps 1e-5, momentum 0.1, affine, and
 * running statistics tracked for batch norm (not for instance norm, as PyTorch). With
 * cumulative_average the running statistics are the plain average of all batches so far
 * (PyTorch's momentum=None). */
typedef struct em_norm_cfg {
    int64_t num_features;
    double eps;
    double momentum;
    bool cumulative_average;
    bool no_affine;              /* batch norm: no weight/bias */
    bool no_track_running_stats; /* batch norm: always normalise with the batch statistics */
    bool affine;                 /* instance norm: learn weight/bias (off by default) */
    bool track_running_stats;    /* instance norm: keep running statistics */
} em_norm_cfg;

/* Batch norm over dim 1 of [N, C] / [N, C, L] (1d), [N, C, H, W] (2d), [N, C, D, H, W] (3d).
 * Parameters weight (ones) and bias (zeros) [C]; buffers running_mean (zeros), running_var
 * (ones), num_batches_tracked (i64 scalar). Training mode normalises with the batch statistics
 * (differentiable) and updates the running ones with the unbiased variance; evaluation mode uses
 * the running statistics. */
EM_API em_module *em_batch_norm1d_new(em_norm_cfg cfg, em_device dev);
EM_API em_module *em_batch_norm2d_new(em_norm_cfg cfg, em_device dev);
EM_API em_module *em_batch_norm3d_new(em_norm_cfg cfg, em_device dev);
/* Instance norm: statistics per sample and channel over the spatial dims of [N, C, ...]. */
EM_API em_module *em_instance_norm1d_new(em_norm_cfg cfg, em_device dev);
EM_API em_module *em_instance_norm2d_new(em_norm_cfg cfg, em_device dev);
EM_API em_module *em_instance_norm3d_new(em_norm_cfg cfg, em_device dev);

/* Layer norm / RMS norm over the trailing dims shape[0..rank). Zero means default: eps 1e-5
 * for layer norm and the input dtype's machine epsilon for RMS norm (torch.nn.RMSNorm), weight
 * (ones) and, for layer norm, bias (zeros). */
typedef struct em_layer_norm_cfg {
    em_shape shape;
    double eps;
    bool no_affine; /* no weight and no bias (elementwise_affine=False) */
    bool no_bias;   /* weight only (bias=False) */
} em_layer_norm_cfg;
EM_API em_module *em_layer_norm_new(em_layer_norm_cfg cfg, em_device dev);
EM_API em_module *em_rms_norm_new(em_layer_norm_cfg cfg, em_device dev);

/* Group norm of [N, C, ...] in `groups` groups of channels; eps 0 means 1e-5; weight/bias [C]. */
typedef struct em_group_norm_cfg {
    int64_t groups, channels;
    double eps;
    bool no_affine;
} em_group_norm_cfg;
EM_API em_module *em_group_norm_new(em_group_norm_cfg cfg, em_device dev);

/* ---- embedding --------------------------------------------------------------------------- */

/* Embedding table weight [num, dim], N(0, 1) init. With has_padding_idx the row padding_idx
 * (negative counts from the end) starts at zero and receives no gradient. */
typedef struct em_embedding_cfg {
    int64_t num, dim;
    int64_t padding_idx;
    bool has_padding_idx;
} em_embedding_cfg;
/* Input: integer indices of any shape -> [..., dim]. */
EM_API em_module *em_embedding_new(em_embedding_cfg cfg, em_device dev);

/* ---- activations (those not in nn.h) ----------------------------------------------------- */

EM_API em_module *em_relu6_new(void);
EM_API em_module *em_elu_new(double alpha); /* PyTorch default alpha 1 */
EM_API em_module *em_selu_new(void);
EM_API em_module *em_celu_new(double alpha); /* PyTorch default alpha 1 */
EM_API em_module *em_gelu_tanh_new(void);    /* GELU(approximate="tanh") */
EM_API em_module *em_log_sigmoid_new(void);
EM_API em_module *em_hard_sigmoid_new(void);
EM_API em_module *em_hard_swish_new(void);
EM_API em_module *em_mish_new(void);
EM_API em_module *em_softplus_new(double beta, double threshold); /* PyTorch default 1, 20 */
EM_API em_module *em_softsign_new(void);
EM_API em_module *em_hardtanh_new(double min_val, double max_val); /* PyTorch default -1, 1 */
EM_API em_module *em_tanhshrink_new(void);
EM_API em_module *em_log_softmax_new(int dim);
EM_API em_module *em_softmin_new(int dim);
/* PReLU: max(0, x) + weight * min(0, x); weight [num_parameters] (1 or the channel count,
 * dim 1 of the input, dim 0 for 1-D input) initialised to 0.25 (0 num_parameters means 1). */
EM_API em_module *em_prelu_new(int64_t num_parameters, em_device dev);
/* GLU: splits dim in two halves a, b and returns a * sigmoid(b) (PyTorch default dim -1). */
EM_API em_module *em_glu_new(int dim);

/* SwiGLU(x) = silu(x W1^T) * (x W2^T), two Linear children "w1" and "w2" [d_out, d_in];
 * bias off by default. */
typedef struct em_swiglu_cfg {
    int64_t d_in, d_out;
    bool bias;
} em_swiglu_cfg;
EM_API em_module *em_swiglu_new(em_swiglu_cfg cfg, em_device dev);

/* ---- resampling and patches -------------------------------------------------------------- */

/* Upsample [N, C, L] or [N, C, H, W] to size[] (spatial dims) or by scale[] (output size
 * floor(in * scale); the sampling uses the in/out size ratio, PyTorch's
 * recompute_scale_factor=True). Give size or scale; 1-D input reads element 0 of each. */
typedef struct em_upsample_cfg {
    int64_t size[2];
    double scale[2];
    em_interp_mode mode; /* nearest (default), bilinear (linear for 1-D), bicubic */
    bool align_corners;
} em_upsample_cfg;
EM_API em_module *em_upsample_new(em_upsample_cfg cfg);

EM_API em_module *em_pixel_shuffle_new(int64_t upscale);
EM_API em_module *em_pixel_unshuffle_new(int64_t downscale);

/* Unfold (im2col) [N, C, H, W] -> [N, C*kh*kw, L] and Fold (col2im) back to output_size;
 * zero means default: stride 1, padding 0, dilation 1. */
typedef struct em_fold_cfg {
    int64_t output_size[2]; /* Fold only */
    int64_t kernel[2], stride[2], padding[2], dilation[2];
} em_fold_cfg;
EM_API em_module *em_unfold_new(em_fold_cfg cfg);
EM_API em_module *em_fold_new(em_fold_cfg cfg);

#ifdef __cplusplus
}
#endif
#endif
