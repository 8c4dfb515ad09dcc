/* Fused optimizer kernels: one pass over a parameter, its gradient and its state buffers, in
 * PyTorch 1.13's operation order (the single-tensor code paths of torch/optim). Plain loops over
 * restrict pointers that the compiler vectorises; f32 and f64 from one template. */
#include <math.h>
#include <stdatomic.h>

#include "optim_adam_body.h"
#include "optim_impl.h"

/* SGD (k.lr, k.wd; a = momentum, b = dampening; first: the buffer is new). */
#define SGD_BODY(T)                                                                                \
    T *restrict P = p, *restrict B = buf;                                                          \
    const T *restrict G = g;                                                                       \
    const T lr = (T)k.lr, wd = (T)k.wd, mom = (T)k.a, damp1 = (T)(1 - k.b);                        \
    for (int64_t i = 0; i < n; i++) {                                                              \
        T d = k.maximize ? -G[i] : G[i];                                                           \
        if (k.wd != 0) d = d + wd * P[i];                                                          \
        if (k.a != 0) {                                                                            \
            B[i] = k.first ? d : B[i] * mom + damp1 * d;                                           \
            d = k.nesterov ? d + mom * B[i] : B[i];                                                \
        }                                                                                          \
        P[i] = P[i] + (-lr) * d;                                                                   \
    }

void opt_kernel_sgd(em_dtype dt, void *p, const void *g, void *buf, int64_t n, opt_coef k)
{
    if (dt == EM_F64) {
        SGD_BODY(double)
    } else {
        SGD_BODY(float)
    }
}

static void adam_portable(em_dtype dt, void *p, const void *g, void *m, void *v, void *vmax,
                          int64_t n, opt_coef k)
{
    if (dt == EM_F64) {
        ADAM_BODY(double, sqrt)
    } else {
        ADAM_BODY(float, sqrtf)
    }
}

void opt_kernel_adam(em_dtype dt, void *p, const void *g, void *m, void *v, void *vmax, int64_t n,
                     opt_coef k)
{
#if defined(__x86_64__) || defined(__i386__)
    /* atomic: independent training loops may take their first step in threads at once */
    static atomic_int avx2 = -1;
    int has = atomic_load_explicit(&avx2, memory_order_relaxed);
    if (has < 0) {
        has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        atomic_store_explicit(&avx2, has, memory_order_relaxed);
    }
    if (has) {
        opt_kernel_adam_avx2(dt, p, g, m, v, vmax, n, k);
        return;
    }
#endif
    adam_portable(dt, p, g, m, v, vmax, n, k);
}

/* RMSprop (a = alpha, b = momentum, flag: centered; gavg/buf NULL when unused). */
#define RMS_BODY(T)                                                                                \
    T *restrict P = p, *restrict S = sq, *restrict A = gavg, *restrict B = buf;                    \
    const T *restrict G = g;                                                                       \
    const T al = (T)k.a, c1 = (T)(1 - k.a), mom = (T)k.b, eps = (T)k.eps, lr = (T)k.lr,            \
            wd = (T)k.wd;                                                                          \
    for (int64_t i = 0; i < n; i++) {                                                              \
        T gi = k.maximize ? -G[i] : G[i];                                                          \
        if (k.wd != 0) gi = gi + wd * P[i];                                                        \
        S[i] = S[i] * al + c1 * gi * gi;                                                           \
        T avg;                                                                                     \
        if (k.flag) {                                                                              \
            A[i] = A[i] * al + c1 * gi;                                                            \
            avg = (T)sqrt(S[i] + (T)-1 * A[i] * A[i]);                                             \
        } else {                                                                                   \
            avg = (T)sqrt(S[i]);                                                                   \
        }                                                                                          \
        avg = avg + eps;                                                                           \
        if (k.b > 0) {                                                                             \
            B[i] = B[i] * mom + gi / avg;                                                          \
            P[i] = P[i] + (-lr) * B[i];                                                            \
        } else {                                                                                   \
            P[i] = P[i] + (-lr) * (gi / avg);                                                      \
        }                                                                                          \
    }

void opt_kernel_rmsprop(em_dtype dt, void *p, const void *g, void *sq, void *gavg, void *buf,
                        int64_t n, opt_coef k)
{
    if (dt == EM_F64) {
        RMS_BODY(double)
    } else {
        RMS_BODY(float)
    }
}

/* Adagrad (k.lr is the decayed clr). */
#define ADAGRAD_BODY(T)                                                                            \
    T *restrict P = p, *restrict S = sum;                                                          \
    const T *restrict G = g;                                                                       \
    const T clr = (T)k.lr, eps = (T)k.eps, wd = (T)k.wd;                                           \
    for (int64_t i = 0; i < n; i++) {                                                              \
        T gi = k.maximize ? -G[i] : G[i];                                                          \
        if (k.wd != 0) gi = gi + wd * P[i];                                                        \
        S[i] = S[i] + gi * gi;                                                                     \
        T std = (T)sqrt(S[i]) + eps;                                                               \
        P[i] = P[i] + (-clr) * (gi / std);                                                         \
    }

void opt_kernel_adagrad(em_dtype dt, void *p, const void *g, void *sum, int64_t n, opt_coef k)
{
    if (dt == EM_F64) {
        ADAGRAD_BODY(double)
    } else {
        ADAGRAD_BODY(float)
    }
}

/* Lion (a = beta1, b = beta2): p *= 1 - lr*wd; p -= lr*sign(b1*m + (1-b1)*g);
 * m = b2*m + (1-b2)*g. */
#define LION_BODY(T)                                                                               \
    T *restrict P = p, *restrict M = m;                                                            \
    const T *restrict G = g;                                                                       \
    const T b1 = (T)k.a, b2 = (T)k.b, c1 = (T)(1 - k.a), c2 = (T)(1 - k.b), lr = (T)k.lr;          \
    const T decay = (T)(1 - k.lr * k.wd);                                                          \
    for (int64_t i = 0; i < n; i++) {                                                              \
        T c = M[i] * b1 + c1 * G[i];                                                               \
        T s = (T)((c > 0) - (c < 0));                                                              \
        P[i] = P[i] * decay + (-lr) * s;                                                           \
        M[i] = M[i] * b2 + c2 * G[i];                                                              \
    }

void opt_kernel_lion(em_dtype dt, void *p, const void *g, void *m, int64_t n, opt_coef k)
{
    if (dt == EM_F64) {
        LION_BODY(double)
    } else {
        LION_BODY(float)
    }
}

#define MUON_BODY(T)                                                                               \
    T *restrict B = buf, *restrict U = u;                                                          \
    const T *restrict G = g;                                                                       \
    const T mom = (T)k.a;                                                                          \
    for (int64_t i = 0; i < n; i++) {                                                              \
        B[i] = B[i] * mom + G[i];                                                                  \
        U[i] = k.nesterov ? G[i] + mom * B[i] : B[i];                                              \
    }

void opt_kernel_muon_momentum(em_dtype dt, const void *g, void *buf, void *u, int64_t n, opt_coef k)
{
    if (dt == EM_F64) {
        MUON_BODY(double)
    } else {
        MUON_BODY(float)
    }
}

#define AXPBY_BODY(T)                                                                              \
    T *restrict P = p;                                                                             \
    const T *restrict X = x;                                                                       \
    const T ta = (T)a, tb = (T)b;                                                                  \
    for (int64_t i = 0; i < n; i++) P[i] = P[i] * ta + tb * X[i];

void opt_kernel_axpby(em_dtype dt, void *p, const void *x, int64_t n, double a, double b)
{
    if (dt == EM_F64) {
        AXPBY_BODY(double)
    } else {
        AXPBY_BODY(float)
    }
}
