/* Ember's store layer: named tensor dictionaries, safetensors read/write (zero-copy mmap loads,
 * atomic streaming saves), loading by content and checkpoints. The PyTorch .pt/.pth reader is
 * the ember-pt library (ember/pt.h). docs/store.md. */
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
EM_API em_tensor_dict *em_tensor_dict_new(void);
/* Releases every tensor reference and frees the dictionary (NULL is ignored). */
EM_API void em_tensor_dict_free(em_tensor_dict *d);
/* Appends name -> t, taking a new reference on t. Duplicate or empty names give
 * EM_ERR_INVALID_ARG. */
EM_API em_status em_tensor_dict_add(em_tensor_dict *d, const char *name, em_tensor *t);
/* The tensor stored under name (borrowed: em_retain it to keep it), NULL when absent
 * (no error is recorded). */
EM_API em_tensor *em_tensor_dict_get(const em_tensor_dict *d, const char *name);
/* Number of tensors, and the i-th name / tensor in insertion order (NULL when out of range). */
EM_API int64_t em_tensor_dict_count(const em_tensor_dict *d);
EM_API const char *em_tensor_dict_name_at(const em_tensor_dict *d, int64_t i);
EM_API em_tensor *em_tensor_dict_tensor_at(const em_tensor_dict *d, int64_t i);
/* String metadata: set (replaces an existing key), get (NULL when absent), count, i-th pair. */
EM_API em_status em_tensor_dict_set_meta(em_tensor_dict *d, const char *key, const char *value);
EM_API const char *em_tensor_dict_get_meta(const em_tensor_dict *d, const char *key);
EM_API int64_t em_tensor_dict_meta_count(const em_tensor_dict *d);
EM_API const char *em_tensor_dict_meta_key_at(const em_tensor_dict *d, int64_t i);
EM_API const char *em_tensor_dict_meta_value_at(const em_tensor_dict *d, int64_t i);

/* ---- safetensors ------------------------------------------------------------------------- */

typedef struct em_safetensors_opts {
    bool copy; /* read the data into memory instead of mapping the file */
} em_safetensors_opts;

/* Writes the dict's tensors and metadata to path, plus the extra metadata pairs in `metadata`
 * ({"key", "value", ..., NULL}; may be NULL; they win over the dict's). Streams one tensor at a
 * time and replaces path atomically (temporary file, fsync, rename), so a crash never leaves a
 * partial file and maps of the old file stay valid. */
EM_API em_status em_safetensors_save(const char *path, const em_tensor_dict *dict,
                                     const char *const *metadata);
/* Loads a safetensors file after validating it completely. Tensors are zero-copy views of a
 * private mapping (unmapped when the last of them is released) unless opts->copy is set or a
 * tensor's data is misaligned; `__metadata__` goes to the dict's metadata. opts may be NULL. */
EM_API em_tensor_dict *em_safetensors_load(const char *path, const em_safetensors_opts *opts);
/* The same from a buffer holding a whole file (always copies); `name` names it in errors. */
EM_API em_tensor_dict *em_safetensors_load_memory(const void *data, size_t size, const char *name);

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
EM_API em_store_info *em_safetensors_inspect(const char *path);
EM_API int64_t em_store_info_count(const em_store_info *info);
EM_API const em_store_entry *em_store_info_entry(const em_store_info *info, int64_t i);
EM_API int64_t em_store_info_meta_count(const em_store_info *info);
EM_API const char *em_store_info_meta_key_at(const em_store_info *info, int64_t i);
EM_API const char *em_store_info_meta_value_at(const em_store_info *info, int64_t i);
EM_API void em_store_info_free(em_store_info *info);

/* ---- any format -------------------------------------------------------------------------- */

/* A reader of another format for em_store_load, em_store_inspect and em_module_load (ember-pt's
 * em_pt_register adds the PyTorch one). claims gets the file's first bytes (n <= 512); load and
 * inspect get the open regular file fd of size bytes, close it, and start their messages with
 * who. inspect may be NULL (such files cannot be listed). */
typedef struct em_store_reader {
    const char *name; /* for messages: "PyTorch zip archive" */
    bool (*claims)(const unsigned char *head, size_t n);
    em_tensor_dict *(*load)(int fd, uint64_t size, const char *who);
    em_store_info *(*inspect)(int fd, uint64_t size, const char *who);
} em_store_reader;
/* Adds a reader; it must stay valid while the program runs. Readers are asked in the order
 * added, after safetensors; adding one twice does nothing. */
EM_API em_status em_store_add_reader(const em_store_reader *reader);

/* Loads a safetensors file (mapped, as em_safetensors_load) or a file of a format an added
 * reader claims (a PyTorch .pt/.pth archive once em_pt_register has run), told apart by the
 * file's first bytes, not its name. Anything else is refused with a message saying what the file
 * is (empty, a legacy pickle or tar .pt, a zip archive with no reader, unknown). */
EM_API em_tensor_dict *em_store_load(const char *path);
/* The same for inspecting (em_safetensors_inspect or the reader's inspect). */
EM_API em_store_info *em_store_inspect(const char *path);

/* ---- modules and checkpoints (module_io.c, checkpoint.c) --------------------------------- */

typedef struct em_module em_module;
typedef struct em_optim em_optim;
typedef struct em_sched em_sched;

/* Every parameter and buffer of the module tree under its dotted name (PyTorch's state_dict
 * keys), one new reference each (the tensors are shared with the module, not copied). */
EM_API em_tensor_dict *em_module_state_dict(em_module *m);
/* Writes the module's parameters and buffers to a safetensors file (atomically, as
 * em_safetensors_save), with metadata {"format": "pt"} plus the optional extra pairs
 * ({"key", "value", ..., NULL}; they win). safetensors.torch.load_file reads it as a state_dict. */
EM_API em_status em_module_save(em_module *m, const char *path, const char *const *metadata);

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
EM_API void em_load_report_free(em_load_report *r);
/* The report as text, one line per list (em_free it). */
EM_API char *em_load_report_str(const em_load_report *r);

/* Loads parameters and buffers by name from a safetensors file or one an added reader claims
 * (PyTorch .pt/.pth once em_pt_register has run), told apart by content. Everything is
 * validated before anything changes: on failure the module is untouched. Loaded tensors replace the
 * module's entries (em_module_set: parameters stay trainable leaves). opts and report may be NULL;
 * report is filled even on failure. */
EM_API em_status em_module_load(em_module *m, const char *path, const em_load_opts *opts,
                                em_load_report *report);
/* The same from a dictionary already in memory. */
EM_API em_status em_module_load_dict(em_module *m, const em_tensor_dict *d,
                                     const em_load_opts *opts, em_load_report *report);

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
EM_API em_status em_checkpoint_write(const char *path, const em_checkpoint_parts *parts);
/* Restores everything written by em_checkpoint_write into the given (fresh) objects. */
EM_API em_status em_checkpoint_read(const char *path, em_checkpoint_parts *parts);

#ifdef __cplusplus
}
#endif
#endif
