/* libFuzzer target: em_idx_read, the IDX (MNIST) reader of the data layer, plain or gzip.
 * Built with -DEMBER_FUZZ=ON; run by scripts/fuzz.sh. */
#include <ember/data.h>

#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    em_tensor *t = em_idx_read(fuzz_file(data, size));
    em_release(t);
    em_clear_error();
    return 0;
}
