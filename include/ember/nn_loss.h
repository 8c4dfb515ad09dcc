/* Ember nn: loss functions with mean/sum/none reduction, PyTorch's formulas and defaults, all
 * built from differentiable ops so em_backward reaches inputs (and targets where PyTorch
 * differentiates them). Included by nn.h. */
#ifndef EMBER_NN_LOSS_H
#define EMBER_NN_LOSS_H

#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where zero is a meaningful option value and not the default (a margin of 0, beta 0), write
 * EM_ZERO (-0.0), as in optim.h. */
#ifndef EM_ZERO
#define EM_ZERO (-0.0)
#endif

/* How per-element losses are combined. Zero (mean) is PyTorch's default. */
typedef enum em_reduction {
    EM_REDUCTION_MEAN = 0,
    EM_REDUCTION_SUM = 1,
    EM_REDUCTION_NONE = 2,
    EM_REDUCTION_BATCHMEAN = 3, /* em_kl_div only: the sum divided by the size of dim 0 */
} em_reduction;

/* Class-index losses. Targets equal to ignore_index are skipped (0 means PyTorch's -100; set
 * ignore_zero to skip class 0). weight: per-class weights [C] or NULL; the weighted mean
 * divides by the sum of the picked weights. */
typedef struct em_ce_cfg {
    em_reduction reduction;
    const em_tensor *weight;
    int64_t ignore_index;
    bool ignore_zero;
    double label_smoothing; /* in [0, 1] */
} em_ce_cfg;

/* Cross-entropy of logits [N, C], [N, C, d1...] or [C] against class indices of any integer
 * dtype ([N], [N, d1...] or []) or against class probabilities (a float target shaped like the
 * logits). */
EM_API em_tensor *em_cross_entropy(const em_tensor *logits, const em_tensor *target, em_ce_cfg cfg);
/* Negative log-likelihood of log-probabilities (shapes as em_cross_entropy, integer targets;
 * label_smoothing must be 0). */
EM_API em_tensor *em_nll_loss(const em_tensor *log_probs, const em_tensor *target, em_ce_cfg cfg);

/* Element-wise regression losses; input and target broadcast together. */
EM_API em_tensor *em_mse_loss(const em_tensor *input, const em_tensor *target, em_reduction r);
EM_API em_tensor *em_l1_loss(const em_tensor *input, const em_tensor *target, em_reduction r);
/* 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta; beta 0 means 1 (EM_ZERO: the L1 loss). */
EM_API em_tensor *em_smooth_l1_loss(const em_tensor *input, const em_tensor *target, em_reduction r,
                                    double beta);
/* 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta); delta 0 means 1. */
EM_API em_tensor *em_huber_loss(const em_tensor *input, const em_tensor *target, em_reduction r,
                                double delta);

/* Binary cross-entropy of probabilities in [0, 1] (logs clamped at -100 like PyTorch). */
typedef struct em_bce_cfg {
    em_reduction reduction;
    const em_tensor *weight;     /* broadcast to the input, or NULL */
    const em_tensor *pos_weight; /* with logits only: weight of positive examples, broadcast
                                  * along the last dim ([C]), or NULL */
} em_bce_cfg;
EM_API em_tensor *em_bce_loss(const em_tensor *input, const em_tensor *target, em_bce_cfg cfg);
/* The same from logits, computed stably (log-sigmoid form) for any logit magnitude. */
EM_API em_tensor *em_bce_with_logits(const em_tensor *logits, const em_tensor *target,
                                     em_bce_cfg cfg);

/* KL divergence of target from the log-probabilities `input`: target * (log target - input),
 * or exp(target) * (target - input) when log_target. reduction may be BATCHMEAN. */
EM_API em_tensor *em_kl_div(const em_tensor *input, const em_tensor *target, em_reduction r,
                            bool log_target);

/* Pairwise losses with a label y of +1 / -1 per pair. cosine embedding: x1, x2 [N, D] or [D],
 * y [N] or []; 1 - cos for y = 1, max(0, cos - margin) for y = -1 (margin default 0). */
EM_API em_tensor *em_cosine_embedding_loss(const em_tensor *x1, const em_tensor *x2,
                                           const em_tensor *y, em_reduction r, double margin);
/* max(0, -y (x1 - x2) + margin) (margin default 0); all three broadcast together. */
EM_API em_tensor *em_margin_ranking_loss(const em_tensor *x1, const em_tensor *x2,
                                         const em_tensor *y, em_reduction r, double margin);

typedef struct em_triplet_cfg {
    em_reduction reduction;
    double margin; /* 1 (EM_ZERO for 0) */
    double p;      /* norm degree: 2 */
    double eps;    /* added to the differences: 1e-6 (EM_ZERO for 0) */
    bool swap;     /* use min(d(a, n), d(p, n)) as the negative distance */
} em_triplet_cfg;
/* max(0, margin + d(a, p) - d(a, n)) with d the p-norm distance over the last dim; anchor,
 * positive, negative [N, D] or [D]. */
EM_API em_tensor *em_triplet_margin_loss(const em_tensor *anchor, const em_tensor *positive,
                                         const em_tensor *negative, em_triplet_cfg cfg);

typedef struct em_poisson_cfg {
    em_reduction reduction;
    bool no_log_input; /* input is the rate itself (PyTorch log_input=False) */
    bool full;         /* add the Stirling term for targets > 1 */
    double eps;        /* 1e-8, added to the rate before the log when no_log_input */
} em_poisson_cfg;
/* Poisson negative log-likelihood: exp(input) - target * input (log input) or
 * input - target * log(input + eps). */
EM_API em_tensor *em_poisson_nll_loss(const em_tensor *input, const em_tensor *target,
                                      em_poisson_cfg cfg);

typedef struct em_gaussian_cfg {
    em_reduction reduction;
    bool full;  /* add 0.5 log(2 pi) */
    double eps; /* variances are clamped to at least eps (gradient passes unchanged): 1e-6 */
} em_gaussian_cfg;
/* 0.5 (log var + (input - target)^2 / var); var shaped like input, or like input without its
 * last dim, or with a last dim of 1; negative variances are an error. */
EM_API em_tensor *em_gaussian_nll_loss(const em_tensor *input, const em_tensor *target,
                                       const em_tensor *var, em_gaussian_cfg cfg);

typedef struct em_ctc_cfg {
    em_reduction reduction; /* mean: each loss divided by its target length, then averaged */
    int64_t blank;          /* index of the blank class: 0 */
    bool zero_infinity;     /* impossible alignments give 0 (and zero gradients) */
} em_ctc_cfg;
/* Connectionist temporal classification. log_probs [T, N, C] (or [T, C]); targets padded
 * [N, S] or concatenated 1-D (sum of target_lengths); input_lengths and target_lengths [N]
 * (integer tensors). The gradient is the exact derivative with respect to log_probs. */
EM_API em_tensor *em_ctc_loss(const em_tensor *log_probs, const em_tensor *targets,
                              const em_tensor *input_lengths, const em_tensor *target_lengths,
                              em_ctc_cfg cfg);

#ifdef __cplusplus
}
#endif
#endif
