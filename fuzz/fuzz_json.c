/* libFuzzer target: the bounded JSON reader of the store layer (src/store/json.c, which reads
 * safetensors headers and the training logs' JSON lines); every value of a parsed document is
 * visited. Built with -DEMBER_FUZZ=ON; run by scripts/fuzz.sh. */
#include <ember/store.h>

#include <stddef.h>
#include <stdint.h>

#include "store/store_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t visit(const js_value *v)
{
    size_t n = 1;
    uint64_t u;
    if (v->type == JS_NUM) n += js_get_u64(v, &u);
    if (v->type == JS_STR) n += v->len;
    for (const js_value *c = v->child; c; c = c->next) n += visit(c);
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    js_doc *doc = js_parse((const char *)data, size, "fuzz");
    if (doc) visit(js_root(doc));
    js_free(doc);
    em_clear_error();
    return 0;
}
