/* Compiles the CUDA backend's whole kernel module with NVRTC for Hopper (sm_90a, with wgmma) and
 * Ampere (sm_80) where NVRTC is installed, so a kernel that does not build fails here, without a
 * GPU. The sm_90a build goes through em_cuda_build_cache into a fresh directory: one cubin file
 * per unit, and a second call finds them all and compiles nothing. The sm_80 compile runs in
 * builds without AddressSanitizer (below). */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cuda/cuda.h"
#include "harness.h"

/* Under AddressSanitizer NVRTC's allocations go through its interceptors and a compile takes
 * 2-3 times as long: that build checks the sm_90a cache (the host code around NVRTC) and leaves
 * the sm_80 compile to the build without it, which the same CI run also tests. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

/* Files in dir named cuda-*-<arch>.cubin; removes them (and dir) when clean. */
static int cubins(const char *dir, const char *arch, bool clean)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    char tail[48], path[1400];
    snprintf(tail, sizeof tail, "-%s.cubin", arch);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name), t = strlen(tail);
        if (strncmp(e->d_name, "cuda-", 5) == 0 && l > t && strcmp(e->d_name + l - t, tail) == 0) {
            n++;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            if (clean) unlink(path);
        }
    }
    closedir(d);
    if (clean) rmdir(dir);
    return n;
}

int main(void)
{
    h_init();
    char dir[] = "/tmp/ember-nvrtc-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp failed");
    int n = -1;
    em_status st = em_cuda_build_cache("sm_90a", dir, &n);
    if (st == EM_ERR_UNSUPPORTED) {
        printf("skipped: no NVRTC (%s)\n", em_last_error());
        em_clear_error();
        rmdir(dir);
        return h_finish();
    }
    CHECK(st == EM_OK, "the kernel module does not compile for sm_90a: %s", em_last_error());
    em_clear_error();
    CHECK(n > 1, "%d units compiled for sm_90a", n);
    CHECK(cubins(dir, "sm_90a", false) == n, "%d cubin files for %d units",
          cubins(dir, "sm_90a", false), n);
    int again = -1;
    CHECK(em_cuda_build_cache("sm_90a", dir, &again) == EM_OK && again == 0,
          "a second build over a full cache compiled %d units", again);
    cubins(dir, "sm_90a", true);

#ifdef UNDER_ASAN
    printf("sm_80 compile: not run under AddressSanitizer (the build without it runs it)\n");
#else
    st = cuda_compile_check("sm_80");
    CHECK(st == EM_OK, "the kernel module does not compile for sm_80: %s", em_last_error());
    em_clear_error();
#endif

    const char *bad[] = {"sm90", "sm_", "sm_9x", "compute_90", "sm_90ab", ""};
    for (int i = 0; i < 6; i++) {
        CHECK(em_cuda_build_cache(bad[i], "/tmp", NULL) == EM_ERR_INVALID_ARG,
              "architecture '%s' accepted", bad[i]);
        em_clear_error();
    }
    CHECK(em_cuda_build_cache(NULL, "/tmp", NULL) == EM_ERR_INVALID_ARG,
          "NULL architecture accepted");
    em_clear_error();
    return h_finish();
}
