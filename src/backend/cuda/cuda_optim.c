/* The optimizers' fused updates on a CUDA device (kernels/optim.cu): one kernel over the
 * parameter, its gradient and its state, in place, so a training step never leaves the GPU. */
#include <stdio.h>

#include "cuda.h"

em_status cuda_update(int device, const em_update *u)
{
    static const char *const names[] = {
        [EM_UPDATE_SGD] = "sgd",         [EM_UPDATE_ADAM] = "adam", [EM_UPDATE_RMSPROP] = "rmsprop",
        [EM_UPDATE_ADAGRAD] = "adagrad", [EM_UPDATE_LION] = "lion", [EM_UPDATE_MUON] = "muon",
        [EM_UPDATE_AXPBY] = "axpby",
    };
    const char *what = "em_optim_step";
    if (cuda_capture_pool(device) && !u->kp)
        return cuda_capture_refused(
            device,
            em_error(EM_ERR_INTERNAL,
                     "%s: an update without its coefficients in the graph's parameter block "
                     "cannot be captured on cuda:%d (they would replay frozen)",
                     what, device));
    if ((u->dtype != EM_F32 && u->dtype != EM_F64) || (unsigned)u->kind > EM_UPDATE_AXPBY)
        return em_error(EM_ERR_INTERNAL, "%s: no CUDA update for kind %d, dtype %s", what,
                        (int)u->kind, em_dtype_name(u->dtype));
    if (u->n == 0) return EM_OK;
    em_status st = cuda_enter(device, what);
    if (st != EM_OK) return st;
    char name[40];
    snprintf(name, sizeof name, "em_upd_%s_%s", names[u->kind], u->dtype == EM_F64 ? "f64" : "f32");
    CUfunction f = cuda_kernel(device, name, what);
    if (!f) return em_last_status();
    void *p = u->p, *s0 = u->s[0], *s1 = u->s[1], *s2 = u->s[2];
    const void *g = u->g;
    long long n = u->n;
    em_update_coef k = u->k;
    void *kp = u->kp;
    void *params[] = {&p, &g, &s0, &s1, &s2, &n, &k, &kp};
    return cuda_launch(device, f, n, params, what);
}
