/* The op IR: the kinds of the op table (ops.def) and what each row says of its kind, the typed
 * parameters of every kind, the op record (em_op) that front-ends fill and autodiff records,
 * and the neutral view of it that kernels see (ir_op over ir_tensor views). Every layer from
 * the backends up includes this; it includes only the public headers. */
#ifndef EMBER_IR_H
#define EMBER_IR_H

#include <ember/tensor.h>
#include <stdbool.h>
#include <stdint.h>

/* ---- kinds ------------------------------------------------------------------------------- */

typedef enum em_op_kind {
#define X(name, str, fam, flags, imin, imax, omin, omax, par, dt, doc, low, e, d0, d1, d2)         \
    EM_OP_##name,
#include "ops.def"
#undef X
    EM_OP_COUNT
} em_op_kind;

/* What a row's flags say of its kind. */
enum {
    IR_EW1 = 1u << 0,        /* elementwise, one input: y = expr(x), output shaped like x */
    IR_EW2 = 1u << 1,        /* elementwise, two inputs broadcast together: y = expr(a, b) */
    IR_EW = 1u << 2,         /* elementwise of another arity (where, clamp, lerp ...) */
    IR_REDUCE = 1u << 3,     /* reduces a set of dims (em_p_reduce mask, or one dim) */
    IR_SCAN = 1u << 4,       /* a running reduction along one dim, shape kept */
    IR_ALONG_DIM = 1u << 5,  /* a whole-line computation along one dim (softmax and kin) */
    IR_VIEW = 1u << 6,       /* metadata only: recorded, never executed by a backend */
    IR_CREATE = 1u << 7,     /* the output comes from the parameters (inputs optional) */
    IR_RANDOM = 1u << 8,     /* draws from the Philox stream of its em_p_random */
    IR_DIFF = 1u << 9,       /* a backward rule gives gradients (the gradient suite checks it) */
    IR_ZERO_GRAD = 1u << 10, /* recorded with a zero gradient (sign, floor, floor_divide ...) */
    IR_INTERNAL = 1u << 11,  /* a record the library builds for itself (gradients, fused forms);
                                no em_ function of its own */
    IR_INT_DIV = 1u << 12,   /* divides: an integer divisor of 0 is an error */
};

/* How input dtypes give the output dtype (a front-end's rule; kernels may rely on it). */
typedef enum ir_dtype_rule {
    IR_DT_EXPLICIT,      /* the caller names the output dtype (creation, cast) */
    IR_DT_SAME,          /* the (first data) input's dtype */
    IR_DT_FLOAT_MATH,    /* floats keep their dtype; integers and bool give f32 */
    IR_DT_KEEP_NUM,      /* floats and integers keep their dtype; bool is refused */
    IR_DT_KEEP_ALL,      /* every dtype kept */
    IR_DT_SQUARE,        /* kept; bool gives i64 */
    IR_DT_BOOL,          /* any dtype -> bool */
    IR_DT_BITWISE,       /* integers and bool kept; floats refused */
    IR_DT_INT,           /* integers only */
    IR_DT_FLOAT,         /* floats only, kept */
    IR_DT_PROMOTE,       /* em_dtype_promote of the inputs */
    IR_DT_PROMOTE_NUM,   /* promoted; bool refused */
    IR_DT_PROMOTE_FLOAT, /* promoted; integers and bool give f32 */
    IR_DT_PROMOTE_TAIL,  /* em_dtype_promote of every input but the first (where's a, b) */
    IR_DT_PROMOTE_ALL,   /* em_dtype_promote of every input */
    IR_DT_COMPARE,       /* -> bool, compared in the promoted dtype */
    IR_DT_LOGICAL,       /* -> bool, each input tested for != 0 (NaN is true) */
    IR_DT_CLAMP,         /* x and bound tensors promoted; an integer x with a fractional scalar
                            bound gives f32; bool refused */
    IR_DT_SUM,           /* integers and bool give i64, floats kept */
    IR_DT_I64,           /* -> i64 (indices, counts) */
} ir_dtype_rule;

/* ---- typed parameters ----------------------------------------------------------------------
 * One struct per parameter layout; a row's params column names it (em_p_<params>) and the
 * record's member (op->p.<params>). Shapes of arrays are fixed, with the used length beside. */

typedef struct em_p_none {
    char unused;
} em_p_none;

/* FILL's value; MASKED_FILL's value where the mask is true. */
typedef struct em_p_fill {
    double value;
} em_p_fill;

typedef struct em_p_arange {
    double start, step;
} em_p_arange;

typedef struct em_p_linspace {
    double start, end;
} em_p_linspace;

/* The random kinds: element k uses value `offset + k`-th of the Philox stream of `seed` (as
 * core's generator hands them out); the distribution's two parameters in the order the kernels
 * take them (v[0], v[1]). */
typedef struct em_p_random {
    uint64_t seed, offset;
    union {
        double v[2];
        struct {
            double low, high; /* RAND_UNIFORM */
        };
        struct {
            double mean, std; /* RAND_NORMAL */
        };
        double p; /* BERNOULLI (no input), DROPOUT: the probability */
    };
    int64_t int_low, int_high; /* RANDINT's [int_low, int_high) */
} em_p_random;

typedef struct em_p_one_hot {
    int64_t classes;
} em_p_one_hot;

/* TRIL, TRIU: the diagonal offset. */
typedef struct em_p_diag {
    int64_t k;
} em_p_diag;

/* The parameterised activations; v[] their two scalars in the order the kernels take them. */
typedef union em_p_act {
    double v[2];
    double negative_slope; /* LEAKY_RELU */
    double alpha;          /* ELU, CELU */
    struct {
        double beta, threshold; /* SOFTPLUS */
    };
    struct {
        double min_val, max_val; /* HARDTANH */
    };
} em_p_act;

/* ADD .. SHIFT_RIGHT: which input is a wrapped scalar (a rank-0 tensor made from a C double by
 * a *_scalar form): 0 none, 1 in[0] (rsub, rdiv, rpow), 2 in[1]. */
typedef struct em_p_binary {
    int scalar_in;
} em_p_binary;

/* EW_GRAD: the derivative of the elementwise kind `kind` by its input `arg`, at the inputs and
 * output of a forward record with the parameters `act` (the kind's table expression d0, d1). */
typedef struct em_p_ew_grad {
    int32_t kind, arg;
    em_p_act act;
} em_p_ew_grad;

/* CLAMP: bounds = 0: lo, hi are scalars (NaN: no bound); else bit 1 = a lower bound tensor,
 * bit 2 = an upper one, in[] = x then the present bounds. */
typedef struct em_p_clamp {
    int bounds;
    double lo, hi;
} em_p_clamp;

/* LERP: w_scalar when in[2] is a wrapped scalar whose value is w. */
typedef struct em_p_lerp {
    bool w_scalar;
    double w;
} em_p_lerp;

/* THRESHOLD_BACKWARD: g where y > threshold (or NaN), else +0. */
typedef struct em_p_threshold {
    double threshold;
} em_p_threshold;

/* Reductions over a set of dims: bit d of mask = dim d (every bit for EM_ALL, 0 for a rank-0
 * input); VAR and STD divide by max(0, N - correction); NORM's order p. */
typedef struct em_p_reduce {
    uint32_t mask;
    bool keepdim;
    int64_t correction;
    double p;
} em_p_reduce;

/* One dim (ARGMAX and ARGMIN: -1 for the flattened tensor); keepdim where the kind keeps or
 * drops it; log for SOFTMAX_BACKWARD of log_softmax. */
typedef struct em_p_dim {
    int dim;
    bool keepdim;
    bool log;
} em_p_dim;

/* SORT, TOPK, MEDIAN along dim: descending (SORT) or largest (TOPK) puts larger values first;
 * TOPK keeps k values; MEDIAN keeps its dim when keepdim. */
typedef struct em_p_order {
    int dim;
    int64_t k;
    union {
        bool descending;
        bool largest;
    };
    bool keepdim;
} em_p_order;

/* MATMUL and MATMUL_BIAS_ACT: a_vec / b_vec when that operand was 1-D (viewed as [1, K] or
 * [K, 1], the 1 removed from the result), M K N, the broadcast batch shape batch[0..batch_rank)
 * (the operands' leading dims right-aligned against it), and the activation of
 * MATMUL_BIAS_ACT. */
typedef struct em_p_matmul {
    bool a_vec, b_vec;
    int64_t M, K, N;
    int batch_rank;
    int64_t batch[EM_MAX_RANK];
    em_act act;
} em_p_matmul;

/* GATHER, SCATTER, INDEX_SELECT, INDEX_ADD: the dim; SCATTER's mode; INDEX_ADD's alpha;
 * inrange when the index is known to lie in range (a device may skip its check). */
typedef struct em_p_index {
    int dim;
    em_reduce_mode mode;
    bool inrange;
    double alpha;
} em_p_index;

/* MASKED_SELECT: the broadcast shape of x and the mask. */
typedef struct em_p_shape {
    int rank;
    int64_t dims[EM_MAX_RANK];
} em_p_shape;

/* SLICE_ASSIGN: per dim of x, normalised (0 <= start <= end <= size, step > 0). */
typedef struct em_p_slice_assign {
    int64_t start[EM_MAX_RANK], end[EM_MAX_RANK], step[EM_MAX_RANK];
} em_p_slice_assign;

/* REPEAT: the output rank (>= x's) and repeats per output dim; x's dims align with the last
 * ones. */
typedef struct em_p_repeat {
    int rank;
    int64_t reps[EM_MAX_RANK];
} em_p_repeat;

/* ROLL: n (dim, shift) pairs, each shift reduced into [0, size of dim). */
typedef struct em_p_roll {
    int n;
    int dims[EM_MAX_RANK];
    int64_t shifts[EM_MAX_RANK];
} em_p_roll;

/* PAD: n_pairs (before, after) pairs in F.pad order (pads[2k], pads[2k + 1] for dim
 * rank-1-k); the constant. */
typedef struct em_p_pad {
    em_pad_mode mode;
    int n_pairs;
    int64_t pads[2 * EM_MAX_RANK];
    double value;
} em_p_pad;

/* CONV, CONV_TRANSPOSE: nd spatial dims (1..3); per spatial dim d < 3 (entries past nd hold the
 * defaults) stride, pads, dilation and out_pad (0 for CONV); groups. Kernel sizes come from the
 * weight's shape, output sizes from the output's. */
typedef struct em_p_conv {
    int nd;
    int64_t stride[3], pad_lo[3], pad_hi[3], dilation[3], out_pad[3];
    int64_t groups;
} em_p_conv;

/* IM2COL, COL2IM: kernel, dilation, padding (both sides), stride and the image size (the
 * input's for IM2COL, the output's for COL2IM), (h, w) each. */
typedef struct em_p_fold {
    int64_t kernel[2], dilation[2], pad[2], stride[2], image[2];
} em_p_fold;

/* CONV_WEIGHT_GRAD of an ungrouped 2-D convolution, (h, w) each. */
typedef struct em_p_wgrad {
    int64_t kernel[2], pad_lo[2], pad_hi[2], stride[2], dilation[2];
} em_p_wgrad;

/* MAX_POOL, MAX_POOL_VALUES, AVG_POOL: nd spatial dims (1..3) and per dim the window. */
typedef struct em_p_pool {
    int nd;
    int64_t kernel[3], stride[3], pad[3], dilation[3];
    bool ceil_mode, count_include_pad;
} em_p_pool;

/* ADAPTIVE_AVG_POOL, ADAPTIVE_MAX_POOL: nd spatial dims and their output sizes. */
typedef struct em_p_adaptive {
    int nd;
    int64_t out[3];
} em_p_adaptive;

/* INTERPOLATE: nd (1 or 2) spatial dims, their output sizes, the mode. */
typedef struct em_p_interp {
    int nd;
    int64_t size[2];
    em_interp_mode mode;
    bool align_corners;
} em_p_interp;

/* PIXEL_SHUFFLE, PIXEL_UNSHUFFLE: the factor. */
typedef struct em_p_shuffle {
    int64_t r;
} em_p_shuffle;

/* LAYER_NORM, RMS_NORM (n_norm trailing dims), GROUP_NORM (groups), BATCH_NORM: which of the
 * optional weight and bias inputs follow x (and BATCH_NORM's mean and var). */
typedef struct em_p_norm {
    int n_norm;
    int64_t groups;
    bool has_weight, has_bias;
    double eps;
} em_p_norm;

/* SDPA, SDPA_BACKWARD: causal; mask_kind 0 none, 1 bool keep-mask, 2 additive float; has_lse
 * (SDPA_BACKWARD) when the last input is the forward's lse; the score scale. */
typedef struct em_p_sdpa {
    bool causal;
    int mask_kind;
    bool has_lse;
    double scale;
} em_p_sdpa;

/* NORM_BACKWARD: n_norm trailing dims; the weight input; rms (else layer norm); which of the
 * weight's and bias's gradients are written. */
typedef struct em_p_norm_bw {
    int n_norm;
    bool has_weight, rms, want_dw, want_db;
    double eps;
} em_p_norm_bw;

/* RFFT, IRFFT: the dim and the number of points. */
typedef struct em_p_fft {
    int dim;
    int64_t n;
} em_p_fft;

/* PERMUTE: output dim d is input dim perm[d]. */
typedef struct em_p_permute {
    int perm[EM_MAX_RANK];
} em_p_permute;

/* SLICE: normalised bounds along dim. */
typedef struct em_p_slice {
    int dim;
    int64_t start, end, step;
} em_p_slice;

/* FLIP: bit d = dim d reversed. */
typedef struct em_p_flip {
    uint32_t mask;
} em_p_flip;

/* UNFOLD: windows of size along dim, every step. */
typedef struct em_p_unfold {
    int dim;
    int64_t size, step;
} em_p_unfold;

/* Every layout, one of which a record holds (the one its kind's row names). */
typedef union em_params {
    em_p_none none;
    em_p_fill fill;
    em_p_arange arange;
    em_p_linspace linspace;
    em_p_random random;
    em_p_one_hot one_hot;
    em_p_diag diag;
    em_p_act act;
    em_p_binary binary;
    em_p_ew_grad ew_grad;
    em_p_clamp clamp;
    em_p_lerp lerp;
    em_p_threshold threshold;
    em_p_reduce reduce;
    em_p_dim dim;
    em_p_order order;
    em_p_matmul matmul;
    em_p_index index;
    em_p_shape shape;
    em_p_slice_assign slice_assign;
    em_p_repeat repeat;
    em_p_roll roll;
    em_p_pad pad;
    em_p_conv conv;
    em_p_fold fold;
    em_p_wgrad wgrad;
    em_p_pool pool;
    em_p_adaptive adaptive;
    em_p_interp interp;
    em_p_shuffle shuffle;
    em_p_norm norm;
    em_p_sdpa sdpa;
    em_p_norm_bw norm_bw;
    em_p_fft fft;
    em_p_permute permute;
    em_p_slice slice;
    em_p_flip flip;
    em_p_unfold unfold;
} em_params;

/* ---- the table --------------------------------------------------------------------------- */

/* One row of ops.def as data. */
typedef struct ir_info {
    const char *name;   /* public name */
    const char *family; /* kernel family */
    uint32_t flags;
    int8_t in_min, in_max, out_min, out_max;
    ir_dtype_rule dtype;
    uint16_t param_size; /* sizeof of its em_p_ struct */
    const char *params;  /* "em_p_conv" */
    const char *dtypes;  /* as docs/ops.md lists them */
    const char *lowering;
    const char *expr, *d[3]; /* the scalar expressions as written, "" where none */
} ir_info;

extern const ir_info ir_ops[EM_OP_COUNT];

/* The row of kind k (k in range). */
static inline const ir_info *ir_info_of(em_op_kind k)
{
    return &ir_ops[k];
}

/* Whether kind k's flags include any of f (k in range). */
static inline bool ir_has(em_op_kind k, uint32_t f)
{
    return (ir_ops[k].flags & f) != 0;
}

/* Public name of a kind ("add"); "?" out of range. */
const char *em_op_name(em_op_kind kind);
/* Family of a kind ("unary", "view" ...); "?" out of range. */
const char *em_op_family(em_op_kind kind);

/* ---- the op record ------------------------------------------------------------------------ */

#define EM_OP_MAX_IN  8
#define EM_OP_MAX_OUT 3

/* One operation as front-ends build it and autodiff records it. Inputs are borrowed; outputs
 * are allocated by the front-end before dispatch (their dtype and shape are the output
 * descriptor). The parameters are the member of p that the kind's row names. */
typedef struct em_op {
    em_op_kind kind;
    int n_in;
    int n_out;
    em_tensor *in[EM_OP_MAX_IN];
    em_tensor *out[EM_OP_MAX_OUT];
    em_params p;
} em_op;

/* ---- what kernels see --------------------------------------------------------------------- */

/* A tensor as a kernel sees it: its first element, dtype and geometry, and its device. Never
 * owns anything; strides are in elements and may be 0 (broadcast) or negative (flip). */
typedef struct ir_tensor {
    void *data;
    em_dtype dtype;
    int rank;
    int64_t shape[EM_MAX_RANK];
    int64_t strides[EM_MAX_RANK];
    em_device device;
} ir_tensor;

/* The record a backend's supports() and exec() receive: the kind, views of the inputs (NULL for
 * an absent optional one) and outputs, and the parameters. */
typedef struct ir_op {
    em_op_kind kind;
    int n_in;
    int n_out;
    ir_tensor *in[EM_OP_MAX_IN];
    ir_tensor *out[EM_OP_MAX_OUT];
    em_params p;
} ir_op;

/* ---- helpers on views ---------------------------------------------------------------------- */

/* t's first element as bytes (pointer arithmetic in bytes). */
static inline char *ir_ptr(const ir_tensor *t)
{
    return (char *)t->data;
}

static inline int64_t ir_numel(const ir_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++) n *= t->shape[d];
    return n;
}

/* Row-major with no gaps (size-1 dims may have any stride; an empty tensor is contiguous). */
static inline bool ir_dims_contiguous(const int64_t *shape, const int64_t *strides, int rank)
{
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        if (shape[d] == 1) continue;
        if (shape[d] == 0) return true;
        if (strides[d] != s) return false;
        s *= shape[d];
    }
    return true;
}

static inline bool ir_is_contiguous(const ir_tensor *t)
{
    return ir_dims_contiguous(t->shape, t->strides, t->rank);
}

static inline bool ir_same_shape(const ir_tensor *a, const ir_tensor *b)
{
    if (a->rank != b->rank) return false;
    for (int d = 0; d < a->rank; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

/* Fills strides with the row-major strides of shape. */
static inline void ir_contiguous_strides(const int64_t *shape, int rank, int64_t *strides)
{
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        strides[d] = s;
        s *= shape[d] > 0 ? shape[d] : 1;
    }
}

/* Element strides of t viewed as broadcast to shape (rank r >= t's): 0 on stretched dims. */
static inline void ir_broadcast_strides(const ir_tensor *t, const int64_t *shape, int r,
                                        int64_t *strides)
{
    int lead = r - t->rank;
    for (int i = 0; i < r; i++) {
        int d = i - lead;
        strides[i] = i < lead ? 0 : (t->shape[d] == 1 && shape[i] != 1) ? 0 : t->strides[d];
    }
}

/* SDPA_BACKWARD's optional inputs, NULL where absent: the mask (in[5]) and the forward's lse (the
 * last input, when has_lse). */
static inline const ir_tensor *ir_sdpa_bwd_mask(const ir_op *op)
{
    return op->n_in - (op->p.sdpa.has_lse ? 1 : 0) > 5 ? op->in[5] : NULL;
}

static inline const ir_tensor *ir_sdpa_bwd_lse(const ir_op *op)
{
    return op->p.sdpa.has_lse ? op->in[op->n_in - 1] : NULL;
}

#endif
