/* Ember's store layer: named tensor dictionaries, safetensors read/write (zero-copy mmap loads,
 * atomic streaming saves) and a PyTorch .pt/.pth importer that runs no code. docs/store.md. */
#ifndef EMBER_STORE_H
#define EMBER_STORE_H

#include "core.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- tensor dictionaries ----------------------------------------------------------------- */

/* Ordered names -> tensors, plus string metadata (key -> value). The dict holds one reference
 * on each tensor it contains. */
typedef struct em_tensor_dict em_tensor_dict;

/* A new empty dictionary (NULL and EM_ERR_OOM on failure). */
em_tensor_dict *em_tensor_dict_new(void);
/* Releases every tensor reference and frees the dictionary (NULL is ignored). */
void em_tensor_dict_free(em_tensor_dict *d);
/* Appends name -> t, taking a new reference on t. Duplicate or empty names give
 * EM_ERR_INVALID_ARG. */
em_status em_tensor_dict_add(em_tensor_dict *d, const char *name, em_tensor *t);
/* The tensor stored under name (borrowed: em_retain it to keep it), NULL when absent
 * (no error is recorded). */
em_tensor *em_tensor_dict_get(const em_tensor_dict *d, const char *name);
/* Number of tensors, and the i-th name / tensor in insertion order (NULL when out of range). */
int64_t em_tensor_dict_count(const em_tensor_dict *d);
const char *em_tensor_dict_name_at(const em_tensor_dict *d, int64_t i);
em_tensor *em_tensor_dict_tensor_at(const em_tensor_dict *d, int64_t i);
/* String metadata: set (replaces an existing key), get (NULL when absent), count, i-th pair. */
em_status em_tensor_dict_set_meta(em_tensor_dict *d, const char *key, const char *value);
const char *em_tensor_dict_get_meta(const em_tensor_dict *d, const char *key);
int64_t em_tensor_dict_meta_count(const em_tensor_dict *d);
const char *em_tensor_dict_meta_key_at(const em_tensor_dict *d, int64_t i);
const char *em_tensor_dict_meta_value_at(const em_tensor_dict *d, int64_t i);

/* ---- safetensors ------------------------------------------------------------------------- */

typedef struct em_safetensors_opts {
    bool copy; /* read the data into memory instead of mapping the file */
} em_safetensors_opts;

/* Writes the dict's tensors and metadata to path, plus the extra metadata pairs in `metadata`
 * ({"key", "value", ..., NULL}; may be NULL; they win over the dict's). Streams one tensor at a
 * time and replaces path atomically (temporary file, fsync, rename), so a crash never leaves a
 * partial file and maps of the old file stay valid. */
em_status em_safetensors_save(const char *path, const em_tensor_dict *dict,
                              const char *const *metadata);
/* Loads a safetensors file after validating it completely. Tensors are zero-copy views of a
 * private mapping (unmapped when the last of them is released) unless opts->copy is set or a
 * tensor's data is misaligned; `__metadata__` goes to the dict's metadata. opts may be NULL. */
em_tensor_dict *em_safetensors_load(const char *path, const em_safetensors_opts *opts);
/* The same from a buffer holding a whole file (always copies); `name` names it in errors. */
em_tensor_dict *em_safetensors_load_memory(const void *data, size_t size, const char *name);

/* What a file holds without its data: one entry per tensor, in file order. */
typedef struct em_store_entry {
    const char *name;
    em_dtype dtype;
    em_shape shape;
    int64_t nbytes;
    int64_t offset; /* byte offset of the data in the file (-1 when not meaningful) */
} em_store_entry;
typedef struct em_store_info em_store_info;

/* Reads and validates a safetensors header only. */
em_store_info *em_safetensors_inspect(const char *path);
/* Lists a .pt/.pth file (the pickle is interpreted; storages are sized but not read). */
em_store_info *em_pt_inspect(const char *path);
int64_t em_store_info_count(const em_store_info *info);
const em_store_entry *em_store_info_entry(const em_store_info *info, int64_t i);
int64_t em_store_info_meta_count(const em_store_info *info);
const char *em_store_info_meta_key_at(const em_store_info *info, int64_t i);
const char *em_store_info_meta_value_at(const em_store_info *info, int64_t i);
void em_store_info_free(em_store_info *info);

/* ---- PyTorch .pt / .pth ------------------------------------------------------------------ */

/* Imports the tensors of a torch.save'd state dict (zip format, PyTorch >= 1.6). A restricted
 * unpickler accepts only containers, scalars, strings and torch's tensor/parameter rebuild
 * functions; anything else is refused with EM_ERR_FORMAT naming the opcode or global. When the
 * top-level dict has a "state_dict" or "model" dict, that one is imported. Nested dicts and
 * lists give dotted names ("encoder.layers.0.weight"). Tensors are copied out of the archive. */
em_tensor_dict *em_pt_load(const char *path);
/* The same from a buffer holding the whole archive; `name` names it in errors. */
em_tensor_dict *em_pt_load_memory(const void *data, size_t size, const char *name);

#ifdef __cplusplus
}
#endif
#endif
