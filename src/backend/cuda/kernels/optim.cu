// Fused optimizer updates on the device: one pass over a parameter, its gradient and its state,
// in place, with the operation order of src/optim/optim_kernels.c (PyTorch 1.13's single-tensor
// paths). The coefficients mean what they mean there; `struct upd_coef` matches em_update_coef.
#include "prelude.cuh"
struct upd_coef {
    double lr, wd, a, b, c, d, eps;
    bool maximize, nesterov, first, flag;
};

#define UPD_LOOP for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)blockDim.x * gridDim.x)

template <typename T> __device__ T upd_sqrt(T x);
template <> __device__ __forceinline__ float upd_sqrt<float>(float x) { return sqrtf(x); }
template <> __device__ __forceinline__ double upd_sqrt<double>(double x) { return sqrt(x); }

// SGD (a = momentum, b = dampening; first: the buffer is new; buf NULL without momentum).
template <typename T>
__device__ void upd_sgd(T *P, const T *G, T *B, i64 n, upd_coef k)
{
    const T lr = (T)k.lr, wd = (T)k.wd, mom = (T)k.a, damp1 = (T)(1 - k.b);
    UPD_LOOP {
        T d = k.maximize ? -G[i] : G[i];
        if (k.wd != 0) d = d + wd * P[i];
        if (k.a != 0) {
            B[i] = k.first ? d : B[i] * mom + damp1 * d;
            d = k.nesterov ? d + mom * B[i] : B[i];
        }
        P[i] = P[i] + (-lr) * d;
    }
}

// Adam / AdamW (a = beta1, b = beta2, c = lr / (1 - beta1^t), d = sqrt(1 - beta2^t), flag:
// decoupled weight decay; X (max_exp_avg_sq) not NULL: amsgrad).
template <typename T>
__device__ void upd_adam(T *P, const T *G, T *M, T *V, T *X, i64 n, upd_coef k)
{
    const T b1 = (T)k.a, b2 = (T)k.b, c1 = (T)(1 - k.a), c2 = (T)(1 - k.b);
    const T nstep = (T)(-k.c), bc2 = (T)k.d, eps = (T)k.eps, wd = (T)k.wd;
    const T decay = (T)(1 - k.lr * k.wd);
    UPD_LOOP {
        T gi = k.maximize ? -G[i] : G[i];
        T pi = P[i];
        if (k.flag)
            pi = pi * decay;
        else if (k.wd != 0)
            gi = gi + wd * pi;
        T mi = M[i] * b1 + c1 * gi;
        T vi = V[i] * b2 + c2 * gi * gi;
        M[i] = mi;
        V[i] = vi;
        T s = vi;
        if (X) {
            T xi = X[i];
            xi = (s != s || s > xi) ? s : xi;
            X[i] = xi;
            s = xi;
        }
        T denom = upd_sqrt(s) / bc2 + eps;
        P[i] = pi + nstep * (mi / denom);
    }
}

// RMSprop (a = alpha, b = momentum, flag: centered; A/B NULL when unused).
template <typename T>
__device__ void upd_rmsprop(T *P, const T *G, T *S, T *A, T *B, i64 n, upd_coef k)
{
    const T al = (T)k.a, c1 = (T)(1 - k.a), mom = (T)k.b, eps = (T)k.eps, lr = (T)k.lr,
            wd = (T)k.wd;
    UPD_LOOP {
        T gi = k.maximize ? -G[i] : G[i];
        if (k.wd != 0) gi = gi + wd * P[i];
        T si = S[i] * al + c1 * gi * gi;
        S[i] = si;
        T avg;
        if (k.flag) {
            T ai = A[i] * al + c1 * gi;
            A[i] = ai;
            avg = upd_sqrt(si + (T)-1 * ai * ai);
        } else {
            avg = upd_sqrt(si);
        }
        avg = avg + eps;
        if (k.b > 0) {
            T bi = B[i] * mom + gi / avg;
            B[i] = bi;
            P[i] = P[i] + (-lr) * bi;
        } else {
            P[i] = P[i] + (-lr) * (gi / avg);
        }
    }
}

// Adagrad (lr is the decayed clr).
template <typename T>
__device__ void upd_adagrad(T *P, const T *G, T *S, i64 n, upd_coef k)
{
    const T clr = (T)k.lr, eps = (T)k.eps, wd = (T)k.wd;
    UPD_LOOP {
        T gi = k.maximize ? -G[i] : G[i];
        if (k.wd != 0) gi = gi + wd * P[i];
        T si = S[i] + gi * gi;
        S[i] = si;
        T sd = upd_sqrt(si) + eps;
        P[i] = P[i] + (-clr) * (gi / sd);
    }
}

// Lion (a = beta1, b = beta2).
template <typename T>
__device__ void upd_lion(T *P, const T *G, T *M, i64 n, upd_coef k)
{
    const T b1 = (T)k.a, b2 = (T)k.b, c1 = (T)(1 - k.a), c2 = (T)(1 - k.b), lr = (T)k.lr;
    const T decay = (T)(1 - k.lr * k.wd);
    UPD_LOOP {
        T mi = M[i], gi = G[i];
        T c = mi * b1 + c1 * gi;
        T s = (T)((c > 0) - (c < 0));
        P[i] = P[i] * decay + (-lr) * s;
        M[i] = mi * b2 + c2 * gi;
    }
}

// Muon's momentum: buf = a*buf + g; u = nesterov ? g + a*buf : buf.
template <typename T>
__device__ void upd_muon(const T *G, T *B, T *U, i64 n, upd_coef k)
{
    const T mom = (T)k.a;
    UPD_LOOP {
        T bi = B[i] * mom + G[i];
        B[i] = bi;
        U[i] = k.nesterov ? G[i] + mom * bi : bi;
    }
}

// p = p*a + b*x
template <typename T>
__device__ void upd_axpby(T *P, const T *X, i64 n, upd_coef k)
{
    const T ta = (T)k.a, tb = (T)k.b;
    UPD_LOOP P[i] = P[i] * ta + tb * X[i];
}

// One entry point per kind and dtype, all with the same parameters: p, g, s0, s1, s2, n, k, kp
// (kp not NULL: the coefficients are *kp, a piece of a graph's parameter block, instead of k).
#define UPD_ENTRY(T, S)                                                                            \
    extern "C" __global__ void em_upd_sgd_##S(T *p, const T *g, T *s0, T *s1, T *s2, i64 n,        \
                                              upd_coef k, const upd_coef *kp)                      \
    {                                                                                              \
        upd_sgd(p, g, s0, n, kp ? *kp : k);                                                        \
    }                                                                                              \
    extern "C" __global__ void em_upd_adam_##S(T *p, const T *g, T *s0, T *s1, T *s2, i64 n,       \
                                               upd_coef k, const upd_coef *kp)                     \
    {                                                                                              \
        upd_adam(p, g, s0, s1, s2, n, kp ? *kp : k);                                               \
    }                                                                                              \
    extern "C" __global__ void em_upd_rmsprop_##S(T *p, const T *g, T *s0, T *s1, T *s2, i64 n,    \
                                                  upd_coef k, const upd_coef *kp)                  \
    {                                                                                              \
        upd_rmsprop(p, g, s0, s1, s2, n, kp ? *kp : k);                                            \
    }                                                                                              \
    extern "C" __global__ void em_upd_adagrad_##S(T *p, const T *g, T *s0, T *s1, T *s2, i64 n,    \
                                                  upd_coef k, const upd_coef *kp)                  \
    {                                                                                              \
        upd_adagrad(p, g, s0, n, kp ? *kp : k);                                                    \
    }                                                                                              \
    extern "C" __global__ void em_upd_lion_##S(T *p, const T *g, T *s0, T *s1, T *s2, i64 n,       \
                                               upd_coef k, const upd_coef *kp)                     \
    {                                                                                              \
        upd_lion(p, g, s0, n, kp ? *kp : k);                                                       \
    }                                                                                              \
    extern "C" __global__ void em_upd_muon_##S(T *p, const T *g, T *s0, T *s1, T *s2, i64 n,       \
                                               upd_coef k, const upd_coef *kp)                     \
    {                                                                                              \
        upd_muon(g, s0, s1, n, kp ? *kp : k);                                                      \
    }                                                                                              \
    extern "C" __global__ void em_upd_axpby_##S(T *p, const T *g, T *s0, T *s1, T *s2, i64 n,      \
                                                upd_coef k, const upd_coef *kp)                    \
    {                                                                                              \
        upd_axpby(p, g, n, kp ? *kp : k);                                                          \
    }

UPD_ENTRY(float, f32)
UPD_ENTRY(double, f64)
