/* The Adam / AdamW loop shared by optim_kernels.c (portable) and optim_kernels_avx2.c (the same
 * source compiled for AVX2; ISO C, so no fused multiply-adds: both give the same bits). SQRT is
 * sqrtf for f32 (correctly rounded, as sqrt of the widened value is), sqrt for f64. */
#ifndef EMBER_OPTIM_ADAM_BODY_H
#define EMBER_OPTIM_ADAM_BODY_H

#include <math.h>
#include <stdint.h>

/* Adam / AdamW (a = beta1, b = beta2, c = step_size = lr / (1 - beta1^t), d = sqrt(1 - beta2^t),
 * flag: decoupled weight decay (AdamW), vmax != NULL: amsgrad). ADAM_LOOP takes the four
 * choices as arguments; given constants, its loop has no branches and vectorises. */
#define ADAM_LOOP(T, SQRT, MAXIMIZE, DECOUPLED, COUPLED, AMS)                                      \
    for (int64_t i = 0; i < n; i++) {                                                              \
        T gi = (MAXIMIZE) ? -G[i] : G[i];                                                          \
        if (DECOUPLED)                                                                             \
            P[i] = P[i] * decay;                                                                   \
        else if (COUPLED)                                                                          \
            gi = gi + wd * P[i];                                                                   \
        M[i] = M[i] * b1 + c1 * gi;                                                                \
        V[i] = V[i] * b2 + c2 * gi * gi;                                                           \
        T s = V[i];                                                                                \
        if (AMS) {                                                                                 \
            X[i] = (s != s || s > X[i]) ? s : X[i];                                                \
            s = X[i];                                                                              \
        }                                                                                          \
        T denom = SQRT(s) / bc2 + eps;                                                             \
        P[i] = P[i] + nstep * (M[i] / denom);                                                      \
    }

#define ADAM_BODY(T, SQRT)                                                                         \
    T *restrict P = p, *restrict M = m, *restrict V = v, *restrict X = vmax;                       \
    const T *restrict G = g;                                                                       \
    const T b1 = (T)k.a, b2 = (T)k.b, c1 = (T)(1 - k.a), c2 = (T)(1 - k.b);                        \
    const T nstep = (T)(-k.c), bc2 = (T)k.d, eps = (T)k.eps, wd = (T)k.wd;                         \
    const T decay = (T)(1 - k.lr * k.wd);                                                          \
    if (!k.maximize && !X) {                                                                       \
        if (k.flag)                                                                                \
            ADAM_LOOP(T, SQRT, 0, 1, 0, 0)                                                         \
        else if (k.wd != 0)                                                                        \
            ADAM_LOOP(T, SQRT, 0, 0, 1, 0)                                                         \
        else                                                                                       \
            ADAM_LOOP(T, SQRT, 0, 0, 0, 0)                                                         \
    } else                                                                                         \
        ADAM_LOOP(T, SQRT, k.maximize, k.flag, k.wd != 0, X != NULL)

#endif
