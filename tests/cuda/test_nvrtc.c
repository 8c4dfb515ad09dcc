/* Compiles the CUDA backend's whole kernel module with NVRTC for Hopper (sm_90a, with wgmma) and
 * Ampere (sm_80) where NVRTC is installed, so a kernel that does not build fails
 * here, without a GPU. */
#include "backend/cuda/cuda.h"
#include "harness.h"

int main(void)
{
    h_init();
    const char *archs[] = {"sm_90a", "sm_80"};
    for (int i = 0; i < 2; i++) {
        em_status st = cuda_compile_check(archs[i]);
        if (st == EM_ERR_UNSUPPORTED) {
            printf("skipped: no NVRTC (%s)\n", em_last_error());
            em_clear_error();
            return h_finish();
        }
        CHECK(st == EM_OK, "the kernel module does not compile for %s: %s", archs[i],
              em_last_error());
        em_clear_error();
    }
    return h_finish();
}
