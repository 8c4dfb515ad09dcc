/* The op IR's kinds, one line each: X(ENUM_NAME, "public name", family). Append-only: the
 * numeric values are part of the IR that autodiff, fusion and capture read. The public name
 * is the one docs/ops.md lists and the conformance harness checks. */
#ifndef EMBER_OP_KINDS_H
#define EMBER_OP_KINDS_H

/* clang-format off */
#define EM_OP_LIST(X) \
    /* creation and data movement */ \
    X(FILL, "full", create) \
    X(ARANGE, "arange", create) \
    X(LINSPACE, "linspace", create) \
    X(EYE, "eye", create) \
    X(RAND_UNIFORM, "rand", create) \
    X(RAND_NORMAL, "randn", create) \
    X(BERNOULLI, "bernoulli", create) \
    X(RANDINT, "randint", create) \
    X(ONE_HOT, "one_hot", create) \
    X(TRIL, "tril", create) \
    X(TRIU, "triu", create) \
    X(COPY, "contiguous", create) \
    X(CAST, "cast", create) \
    /* unary math */ \
    X(NEG, "neg", unary) X(ABS, "abs", unary) X(SIGN, "sign", unary) \
    X(EXP, "exp", unary) X(EXP2, "exp2", unary) X(LOG, "log", unary) X(LOG2, "log2", unary) \
    X(LOG1P, "log1p", unary) X(EXPM1, "expm1", unary) X(SQRT, "sqrt", unary) \
    X(RSQRT, "rsqrt", unary) X(SQUARE, "square", unary) X(RECIPROCAL, "reciprocal", unary) \
    X(SIN, "sin", unary) X(COS, "cos", unary) X(TAN, "tan", unary) X(ASIN, "asin", unary) \
    X(ACOS, "acos", unary) X(ATAN, "atan", unary) X(SINH, "sinh", unary) \
    X(COSH, "cosh", unary) X(TANH, "tanh", unary) X(ASINH, "asinh", unary) \
    X(ACOSH, "acosh", unary) X(ATANH, "atanh", unary) X(ERF, "erf", unary) \
    X(FLOOR, "floor", unary) X(CEIL, "ceil", unary) X(ROUND, "round", unary) \
    X(TRUNC, "trunc", unary) X(ISNAN, "isnan", unary) X(ISINF, "isinf", unary) \
    X(ISFINITE, "isfinite", unary) X(LOGICAL_NOT, "logical_not", unary) \
    X(BITWISE_NOT, "bitwise_not", unary) \
    /* activations (f[0], f[1] hold parameters) */ \
    X(RELU, "relu", unary) X(RELU6, "relu6", unary) X(LEAKY_RELU, "leaky_relu", unary) \
    X(ELU, "elu", unary) X(SELU, "selu", unary) X(CELU, "celu", unary) \
    X(GELU, "gelu", unary) X(GELU_TANH, "gelu_tanh", unary) X(SILU, "silu", unary) \
    X(SIGMOID, "sigmoid", unary) X(LOG_SIGMOID, "log_sigmoid", unary) \
    X(HARD_SIGMOID, "hard_sigmoid", unary) X(HARD_SWISH, "hard_swish", unary) \
    X(MISH, "mish", unary) X(SOFTPLUS, "softplus", unary) X(SOFTSIGN, "softsign", unary) \
    X(HARDTANH, "hardtanh", unary) \
    /* binary (broadcasting; a scalar operand is a rank-0 tensor) */ \
    X(ADD, "add", binary) X(SUB, "sub", binary) X(MUL, "mul", binary) X(DIV, "div", binary) \
    X(FLOOR_DIVIDE, "floor_divide", binary) X(REMAINDER, "remainder", binary) \
    X(FMOD, "fmod", binary) X(POW, "pow", binary) X(ATAN2, "atan2", binary) \
    X(HYPOT, "hypot", binary) X(MINIMUM, "minimum", binary) X(MAXIMUM, "maximum", binary) \
    X(EQ, "eq", binary) X(NE, "ne", binary) X(LT, "lt", binary) X(LE, "le", binary) \
    X(GT, "gt", binary) X(GE, "ge", binary) X(LOGICAL_AND, "logical_and", binary) \
    X(LOGICAL_OR, "logical_or", binary) X(LOGICAL_XOR, "logical_xor", binary) \
    X(BITWISE_AND, "bitwise_and", binary) X(BITWISE_OR, "bitwise_or", binary) \
    X(BITWISE_XOR, "bitwise_xor", binary) X(SHIFT_LEFT, "shift_left", binary) \
    X(SHIFT_RIGHT, "shift_right", binary) \
    X(WHERE, "where", binary) X(MASKED_FILL, "masked_fill", binary) \
    X(CLAMP, "clamp", binary) X(LERP, "lerp", binary) \
    /* reductions: i[0] = bitmask of reduced dims, i[1] = keepdim */ \
    X(SUM, "sum", reduce) X(MEAN, "mean", reduce) X(PROD, "prod", reduce) \
    X(MAX, "max", reduce) X(MIN, "min", reduce) X(ARGMAX, "argmax", reduce) \
    X(ARGMIN, "argmin", reduce) X(VAR, "var", reduce) X(STD, "std", reduce) \
    X(NORM, "norm", reduce) X(LOGSUMEXP, "logsumexp", reduce) X(ANY, "any", reduce) \
    X(ALL, "all", reduce) X(COUNT_NONZERO, "count_nonzero", reduce) \
    X(MAX_DIM, "max_dim", reduce) X(MIN_DIM, "min_dim", reduce) \
    X(CUMSUM, "cumsum", reduce) X(CUMPROD, "cumprod", reduce) X(CUMMAX, "cummax", reduce) \
    X(CUMMIN, "cummin", reduce) X(SOFTMAX, "softmax", reduce) \
    X(LOG_SOFTMAX, "log_softmax", reduce) \
    /* linear algebra */ \
    X(MATMUL, "matmul", linalg) \
    /* indexing */ \
    X(GATHER, "gather", index) X(SCATTER, "scatter", index) \
    X(INDEX_SELECT, "index_select", index) X(INDEX_ADD, "index_add", index) \
    X(MASKED_SELECT, "masked_select", index) X(NONZERO, "nonzero", index) \
    X(SLICE_ASSIGN, "slice_assign", index) X(EMBEDDING, "embedding", index) \
    /* combine */ \
    X(CAT, "cat", combine) X(REPEAT, "repeat", combine) X(ROLL, "roll", combine) \
    X(PAD, "pad", combine) \
    /* ordering */ \
    X(SORT, "sort", order) X(TOPK, "topk", order) X(MEDIAN, "median", order) \
    /* nn */ \
    X(CONV, "conv", nn) X(CONV_TRANSPOSE, "conv_transpose", nn) \
    X(MAX_POOL, "max_pool", nn) X(AVG_POOL, "avg_pool", nn) \
    X(ADAPTIVE_AVG_POOL, "adaptive_avg_pool", nn) X(ADAPTIVE_MAX_POOL, "adaptive_max_pool", nn) \
    X(INTERPOLATE, "interpolate", nn) X(IM2COL, "im2col", nn) X(COL2IM, "col2im", nn) \
    X(PIXEL_SHUFFLE, "pixel_shuffle", nn) X(PIXEL_UNSHUFFLE, "pixel_unshuffle", nn) \
    X(LAYER_NORM, "layer_norm", nn) X(RMS_NORM, "rms_norm", nn) \
    X(GROUP_NORM, "group_norm", nn) X(BATCH_NORM, "batch_norm", nn) \
    X(SDPA, "sdpa", nn) X(DROPOUT, "dropout", nn) \
    /* signal */ \
    X(RFFT, "rfft", signal) X(IRFFT, "irfft", signal) \
    /* views: metadata only, never executed by a backend; recorded for autodiff and capture */ \
    X(RESHAPE, "reshape", view) X(PERMUTE, "permute", view) X(SLICE, "slice", view) \
    X(EXPAND, "expand", view) X(FLIP, "flip", view) X(UNFOLD, "unfold", view) \
    /* appended */ \
    X(MAX_POOL_VALUES, "max_pool_values", nn) \
    X(SDPA_BACKWARD, "sdpa_backward", nn) \
    X(MATMUL_BIAS_ACT, "matmul_bias_act", linalg) \
    X(CONV_WEIGHT_GRAD, "conv_weight_grad", nn) \
    X(THRESHOLD_BACKWARD, "threshold_backward", binary) \
    X(SOFTMAX_BACKWARD, "softmax_backward", reduce) \
    X(LOG_SOFTMAX_GATHER, "log_softmax_gather", reduce) \
    X(LOG_SOFTMAX_GATHER_BACKWARD, "log_softmax_gather_backward", reduce) \
    X(NORM_BACKWARD, "norm_backward", nn)
/* clang-format on */

#endif
