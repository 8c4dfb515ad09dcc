/* The Adam / AdamW kernel compiled for AVX2 (8 floats a vector; sqrt vectorised: this file is
 * built with -fno-math-errno), chosen at run time by opt_kernel_adam. */
#include "optim_adam_body.h"
#include "optim_impl.h"

void opt_kernel_adam_avx2(em_dtype dt, void *p, const void *g, void *m, void *v, void *vmax,
                          int64_t n, opt_coef k)
{
    if (dt == EM_F64) {
        ADAM_BODY(double, sqrt)
    } else {
        ADAM_BODY(float, sqrtf)
    }
}
