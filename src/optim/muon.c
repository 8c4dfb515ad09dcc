/* Muon's orthogonalisation: quintic Newton-Schulz iterations on a 2-D update normalised by its
 * Frobenius norm (Keller Jordan's zeropower_via_newtonschulz5, in the work dtype, no bf16). */
#include "optim_impl.h"

/* u: [r, c] -> X: [r, c], approximately U V^T of u's SVD. */
em_tensor *opt_newton_schulz(const em_tensor *u, int steps)
{
    const double a = 3.4445, b = -4.7750, c = 2.0315;
    /* divided by a 0-d tensor: no read back (a sync per parameter; a graph cannot record it) */
    em_tensor *x = em_div(u, em_add_scalar(em_norm(u, 2, EM_ALL, false), 1e-7));
    if (!x) return NULL;
    bool tall = em_tensor_dim(u, 0) > em_tensor_dim(u, 1);
    if (tall) x = em_transpose(x, 0, 1);
    for (int i = 0; i < steps && x; i++) {
        em_tensor *xt = em_transpose(x, 0, 1);
        em_tensor *A = em_matmul(x, xt); /* [r, r] */
        em_tensor *AA = em_matmul(A, A);
        em_tensor *B = em_add(em_mul_scalar(A, b), em_mul_scalar(AA, c));
        x = em_add(em_mul_scalar(x, a), em_matmul(B, x));
    }
    if (tall && x) x = em_transpose(x, 0, 1);
    return x; /* every intermediate belongs to the caller's scope */
}
