/* libFuzzer target: the .pt importer. Inputs that look like a zip go through libzip and the
 * archive checks; anything else runs the restricted unpickler directly, so both layers get
 * coverage. Built with -DEMBER_FUZZ=ON; run by scripts/fuzz.sh. */
#include <ember/pt.h>

#include <stddef.h>
#include <stdint.h>

#include "store/store_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size >= 2 && data[0] == 'P' && data[1] == 'K') {
        em_tensor_dict *d = em_pt_load_memory(data, size, "fuzz");
        em_tensor_dict_free(d);
    } else {
        pt_unpickle_memory(data, size, "fuzz");
    }
    em_clear_error();
    return 0;
}
