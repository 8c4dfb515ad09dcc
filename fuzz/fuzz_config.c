/* libFuzzer target: the ember.toml reader (src/core/config.c) on arbitrary text, through the
 * parse-only entry point that stores nothing. Built with -DEMBER_FUZZ=ON; run by
 * scripts/fuzz.sh. */
#include <stddef.h>
#include <stdint.h>

#include "core/core_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    core_config_parse_memory((const char *)data, size, err, sizeof err);
    return 0;
}
