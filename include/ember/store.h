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
 * lists give dotted names ("encoder.layers.0.weight"). Tensors are copied out of the archive,
 * except that expanded (stride-0) dims stay expanded views; work and memory are bounded by
 * budgets proportional to the file's size (docs/store.md, "Resource limits"). */
em_tensor_dict *em_pt_load(const char *path);
/* The same from a buffer holding the whole archive; `name` names it in errors. */
em_tensor_dict *em_pt_load_memory(const void *data, size_t size, const char *name);

/* ---- either format ----------------------------------------------------------------------- */

/* Loads a safetensors file (mapped, as em_safetensors_load) or a PyTorch .pt/.pth archive (as
 * em_pt_load), told apart by the file's first bytes, not its name. Anything else is refused
 * with a message saying what the file is (empty, a legacy pickle or tar .pt, unknown). */
em_tensor_dict *em_store_load(const char *path);
/* The same for inspecting (em_safetensors_inspect or em_pt_inspect). */
em_store_info *em_store_inspect(const char *path);

/* ---- modules and checkpoints (module_io.c, checkpoint.c) --------------------------------- */

typedef struct em_module em_module;
typedef struct em_optim em_optim;
typedef struct em_sched em_sched;

/* Every parameter and buffer of the module tree under its dotted name (PyTorch's state_dict
 * keys), one new reference each (the tensors are shared with the module, not copied). */
em_tensor_dict *em_module_state_dict(em_module *m);
/* Writes the module's parameters and buffers to a safetensors file (atomically, as
 * em_safetensors_save), with metadata {"format": "pt"} plus the optional extra pairs
 * ({"key", "value", ..., NULL}; they win). safetensors.torch.load_file reads it as a state_dict. */
em_status em_module_save(em_module *m, const char *path, const char *const *metadata);

/* One rename rule: every match of the POSIX extended regex `pattern` is replaced by
 * `replacement`, in which \0..\9 are the match and its groups and \\ is a backslash. */
typedef struct em_remap {
    const char *pattern, *replacement;
} em_remap;

/* Loading options; zero means strict, no filters, no remapping, adapters on, cast to the
 * module's dtypes. */
typedef struct em_load_opts {
    bool partial;               /* load what matches; missing/unexpected/mismatched are only
                                 * reported (strict: any of them fails and nothing changes) */
    const char *const *include; /* NULL-terminated globs on module names: load only these */
    const char *const *exclude; /* NULL-terminated globs on module names: never load these */
    const em_remap *remap;      /* rules applied in order to every file name */
    int n_remap;
    bool no_adapters; /* turn off the naming adapters (see docs/store.md) */
    bool keep_dtype;  /* the module takes the file's dtype instead of casting */
} em_load_opts;

/* One name in a load report. name: the module-side name (after remapping and adapters);
 * file_name: the name in the file (NULL for missing entries); detail: why (mismatches,
 * duplicates) or NULL. */
typedef struct em_load_item {
    char *name, *file_name, *detail;
} em_load_item;
typedef struct em_load_list {
    em_load_item *items;
    int n, cap;
} em_load_list;
/* What a load did. Start from (em_load_report){0}; free with em_load_report_free. */
typedef struct em_load_report {
    em_load_list loaded;     /* replaced module entries */
    em_load_list missing;    /* module entries the file lacks (filtered-out ones not listed) */
    em_load_list unexpected; /* file tensors with no module entry */
    em_load_list mismatched; /* shape or dtype differs (not loaded) */
    em_load_list skipped;    /* file tensors left out by include/exclude */
} em_load_report;
void em_load_report_free(em_load_report *r);
/* The report as text, one line per list (em_free it). */
char *em_load_report_str(const em_load_report *r);

/* Loads parameters and buffers by name from a safetensors or PyTorch .pt/.pth file (told apart
 * by content). Everything is validated before anything changes: on failure the module is
 * untouched. Loaded tensors replace the module's entries (em_module_set: parameters stay
 * trainable leaves). opts and report may be NULL; report is filled even on failure. */
em_status em_module_load(em_module *m, const char *path, const em_load_opts *opts,
                         em_load_report *report);
/* The same from a dictionary already in memory. */
em_status em_module_load_dict(em_module *m, const em_tensor_dict *d, const em_load_opts *opts,
                              em_load_report *report);

/* What a checkpoint holds. Any pointer may be NULL (that part is skipped). The scheduler's
 * position is sched_steps (the caller counts em_sched_step calls); reading replays that many
 * steps on the scheduler passed in, which must be new and built like the saved one. metrics:
 * its string metadata is written as "metric.<key>", and on read the saved metrics are set in
 * it. On read, epoch, step and sched_steps are filled in. */
typedef struct em_checkpoint_parts {
    em_module *module;
    em_optim *optim;
    em_sched *sched;
    int64_t sched_steps;
    bool rng; /* save / restore the global generator (em_rng_get_state) */
    int64_t epoch, step;
    em_tensor_dict *metrics;
} em_checkpoint_parts;

/* Writes everything into one safetensors file, atomically (a crash leaves the previous file
 * whole). A path naming a directory writes <dir>/checkpoint.safetensors. */
em_status em_checkpoint_write(const char *path, const em_checkpoint_parts *parts);
/* Restores everything written by em_checkpoint_write into the given (fresh) objects. */
em_status em_checkpoint_read(const char *path, em_checkpoint_parts *parts);

#ifdef __cplusplus
}
#endif
#endif
