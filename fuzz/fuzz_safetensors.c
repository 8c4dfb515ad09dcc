/* libFuzzer target: the safetensors reader on arbitrary bytes (header validation and the copy
 * load path). Built with -DEMBER_FUZZ=ON; run by scripts/fuzz.sh. */
#include <ember/store.h>

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    em_tensor_dict *d = em_safetensors_load_memory(data, size, "fuzz");
    em_tensor_dict_free(d);
    em_clear_error();
    return 0;
}
