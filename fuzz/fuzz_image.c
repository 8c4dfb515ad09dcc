/* libFuzzer target: em_image_read, the PNG (libpng) and JPEG (libjpeg) wrappers of the data
 * layer, in grey and RGB, u8 and f32. Built with -DEMBER_FUZZ=ON; run by scripts/fuzz.sh. */
#include <ember/data.h>

#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* the last byte picks the options, so the corpus explores them too */
    em_image_cfg cfg = {0};
    if (size) {
        cfg.channels = data[size - 1] & 1 ? 1 : 3;
        cfg.raw_u8 = data[size - 1] & 2;
    }
    em_tensor *t = em_image_read(fuzz_file(data, size), cfg);
    em_release(t);
    em_clear_error();
    return 0;
}
