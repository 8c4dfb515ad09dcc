/* libFuzzer target: em_dataset_csv, the numeric CSV reader of the data layer (plain or gzip),
 * with the options chosen by the input's first byte; the rows are read back. Built with
 * -DEMBER_FUZZ=ON; run by scripts/fuzz.sh. */
#include <ember/data.h>

#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size) return 0;
    uint8_t o = data[0];
    em_csv_cfg cfg = {
        .delimiter = "\0; \t"[o & 3],
        .header = (int)((o >> 2) % 3) - 1,
        .label = o & 16,
        .label_col = o & 32 ? 0 : -1,
        .label_float = o & 64,
        .f64 = o & 128,
    };
    em_dataset *ds = em_dataset_csv(fuzz_file(data + 1, size - 1), cfg);
    for (int64_t i = 0; ds && i < em_dataset_len(ds) && i < 4; i++) {
        em_item it = {0};
        if (em_dataset_get(ds, i, &it) == EM_OK) em_item_free(&it);
    }
    em_dataset_free(ds);
    em_clear_error();
    return 0;
}
