/* libFuzzer target: the text corpus reader of the data layer (em_text_from_string: UTF-8 with
 * Latin-1 fallback, vocabulary, lines), its tokens and its line dataset. Built with
 * -DEMBER_FUZZ=ON; run by scripts/fuzz.sh. */
#include <ember/data.h>

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    em_text *t = em_text_from_string((const char *)data, size);
    if (t) {
        em_release(em_text_tokens(t));
        em_dataset *ds = em_dataset_text_lines(t);
        for (int64_t i = 0; ds && i < em_dataset_len(ds) && i < 4; i++) {
            em_item it = {0};
            if (em_dataset_get(ds, i, &it) == EM_OK) em_item_free(&it);
        }
        em_dataset_free(ds);
    }
    em_text_free(t);
    em_clear_error();
    return 0;
}
