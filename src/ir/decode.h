/* Decoders of typed parameters that more than one layer needs (the CPU and CUDA kernels, the
 * backward rules): each lives here once. */
#ifndef EMBER_IR_DECODE_H
#define EMBER_IR_DECODE_H

#include "ir.h"

/* The dims a REDUCE kind reduces over an input of rank `rank` (bit d = dim d; the flattened
 * ARGMAX / ARGMIN reduce every dim) and, in *keepdim, whether its output keeps them. */
uint32_t ir_reduce_mask(em_op_kind k, const em_params *p, int rank, bool *keepdim);

/* The input coordinate that padded coordinate k (relative to the input's start, along a dim of
 * size n) reads under PAD's mode: k itself inside, the reflected, replicated or wrapped one
 * outside, -1 for the constant. */
int64_t ir_pad_src(em_pad_mode mode, int64_t k, int64_t n);

/* Sliding windows over three spatial slots, a record's nd spatial dims right-aligned (a leading
 * slot has size 1 and a window of one element): the image the windows read (in), one window
 * per position of out, and each window's size k, stride s, low-side pad p and dilation d. */
typedef struct ir_win3 {
    int64_t in[3], out[3], k[3], s[3], p[3], d[3];
} ir_win3;

/* The number of spatial dims of a convolution, pooling, adaptive pooling or interpolation
 * record; 0 for other kinds. */
static inline int ir_spatial_dims(em_op_kind kind, const em_params *p)
{
    switch (kind) {
    case EM_OP_CONV:
    case EM_OP_CONV_TRANSPOSE: return p->conv.nd;
    case EM_OP_MAX_POOL:
    case EM_OP_MAX_POOL_VALUES:
    case EM_OP_AVG_POOL: return p->pool.nd;
    case EM_OP_ADAPTIVE_AVG_POOL:
    case EM_OP_ADAPTIVE_MAX_POOL: return p->adaptive.nd;
    case EM_OP_INTERPOLATE: return p->interp.nd;
    default: return 0;
    }
}

/* CONV, CONV_TRANSPOSE with input shape xs, weight shape ws and output shape ys: in = the image
 * (the convolution's input, the transpose's output), out = the other, k from the weight. */
void ir_conv_windows(em_op_kind kind, const em_p_conv *p, const int64_t *xs, int xr,
                     const int64_t *ws, const int64_t *ys, int yr, ir_win3 *g);
/* IM2COL, COL2IM: their two spatial dims in slots 1 and 2; in = the image, out = the blocks. */
void ir_fold_windows(const em_p_fold *p, ir_win3 *g);
/* MAX_POOL, MAX_POOL_VALUES, AVG_POOL, ADAPTIVE_AVG_POOL, ADAPTIVE_MAX_POOL, INTERPOLATE with
 * input shape xs and output shape ys (windows of one element where the kind has none); returns
 * the number of spatial dims. */
int ir_pool_windows(em_op_kind kind, const em_params *p, const int64_t *xs, int xr,
                    const int64_t *ys, int yr, ir_win3 *g);

/* Interpolation: the source coordinate of output position o along a dim resized from `in` to
 * `out` (PyTorch's area_pixel_compute_source_index). */
static inline double ir_interp_src(int64_t o, int64_t in, int64_t out, bool align, bool cubic)
{
    if (align) return out > 1 ? (double)o * (double)(in - 1) / (double)(out - 1) : 0.0;
    double s = ((double)o + 0.5) * (double)in / (double)out - 0.5;
    return (!cubic && s < 0) ? 0.0 : s;
}

/* Bicubic interpolation's weight of tap k (0..3) at fraction t (A = -0.75, as PyTorch). */
static inline double ir_cubic_weight(double t, int k)
{
    const double A = -0.75;
    double x;
    switch (k) {
    case 0: x = t + 1; return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
    case 1: x = t; return ((A + 2) * x - (A + 3)) * x * x + 1;
    case 2: x = 1 - t; return ((A + 2) * x - (A + 3)) * x * x + 1;
    default: x = 2 - t; return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
    }
}

/* A reduction's iteration plan over x (in[0]) and its outputs, in elements: the kept dims
 * (sizes, x's strides, each output's strides) and the reduced dims (sizes, x's strides), size-1
 * dims dropped and neighbours merged where their strides allow; M kept and N reduced elements
 * (an empty reduced set has one reduced dim of size 1, stride 0). */
typedef struct ir_rplan {
    int nk, nr;
    int64_t kshape[EM_MAX_RANK], kx[EM_MAX_RANK], ko[2][EM_MAX_RANK];
    int64_t rshape[EM_MAX_RANK], rx[EM_MAX_RANK];
    int64_t M, N;
} ir_rplan;

/* The plan of reducing the mask dims of op's in[0] into its outputs (which keep the reduced dims
 * as size 1 when keepdim). */
void ir_reduce_plan(const ir_op *op, uint32_t mask, bool keepdim, ir_rplan *p);

/* The accumulations of the reductions (the CPU kernels and, by number, the CUDA kernels). */
typedef enum ir_red {
    IR_RED_SUM,    /* s += x (ints: u += x) */
    IR_RED_PROD,   /* s *= x (ints: u *= x) */
    IR_RED_MAX,    /* NaN-propagating max (ints: v) */
    IR_RED_MIN,    /* NaN-propagating min (ints: v) */
    IR_RED_ARGMAX, /* max with its first position; the first NaN wins */
    IR_RED_ARGMIN,
    IR_RED_COUNT,  /* u += x != 0 */
    IR_RED_SQDEV,  /* s += (x - c)^2 */
    IR_RED_EXPSUM, /* s += exp(x - c) */
    IR_RED_ABS1,   /* s += |x| */
    IR_RED_SQ,     /* s += x^2 */
    IR_RED_ABSMAX, /* NaN-propagating max |x| */
    IR_RED_ABSMIN,
    IR_RED_ABSPOW, /* s += |x|^p */
} ir_red;
/* The accumulation a reduction kind needs; *ints: integer inputs accumulate as integers. */
ir_red ir_red_of(const ir_op *op, bool *ints);

/* REPEAT, ROLL, PAD (the CPU and CUDA kernels): *xv is x aligned with the output's rank, and
 * maps (when not NULL) receives, for each output dim d from maps + off[d], the input
 * coordinate each output coordinate reads (-1: PAD's fill value). Returns the number of map
 * entries (the sum of the output's dims). */
int64_t ir_map_plan(const ir_op *op, ir_tensor *xv, int64_t *maps, int64_t *off);

#endif
