/* Private helpers of the data layer shared between src/data/ files. */
#ifndef EMBER_DATA_IMPL_H
#define EMBER_DATA_IMPL_H

#include <ember/ember.h>

#include "../core/checked.h"

/* An in-memory dataset: each field is one contiguous CPU tensor whose rows along dim 0 are the
 * items; get copies row i out (optionally converted to out_dtype and multiplied by scale). */
typedef struct dt_field {
    em_tensor *src;
    const unsigned char *base;
    em_dtype dtype, out_dtype;
    double scale; /* 0: plain copy */
    em_shape row;
    size_t row_bytes;
    char name[32];
} dt_field;

typedef struct dt_mem {
    em_dataset base;
    int64_t n;
    int nf;
    dt_field f[EM_ITEM_MAX];
} dt_mem;

dt_mem *dt_mem_new(int64_t n);
/* Adds a field (takes the reference to t, whose dim 0 must be n); row: the item shape (its
 * numel must equal t's per-row count). Returns false with an error (t released). */
bool dt_mem_add(dt_mem *m, const char *name, em_tensor *t, em_shape row, em_dtype out_dtype,
                double scale);

/* Parses a number from [s, end) completely (strtod rules, surrounding blanks allowed). */
bool dt_parse_number(const char *s, size_t len, double *out);

/* Wraps src in a dataset with a per-(epoch, index) transform of one field. */
typedef em_tensor *(*dt_field_fn)(const em_tensor *img, int64_t index, int64_t epoch, void *ctx);
em_dataset *dt_field_map(em_dataset *src, int field, dt_field_fn fn, const void *ctx,
                         size_t ctx_size, const char *what);

/* Stream key for (seed, salt): salts separate augmentations sharing a seed. */
uint64_t dt_mix(uint64_t seed, uint64_t salt);

#endif
