/* Private interface of the store layer: the bounded JSON reader, the dictionary and info
 * internals shared by safetensors.c, pt.c and dict.c, and the from-memory parsers the fuzz
 * targets call. pt.c (libember-pt) may use only what reader_base.c defines: the shared library
 * links its own copy of that file. */
#ifndef EMBER_STORE_IMPL_H
#define EMBER_STORE_IMPL_H

#include <ember/store.h>

/* ---- bounded JSON reader (json.c) -------------------------------------------------------- */

#define JS_MAX_DEPTH 64

typedef enum js_type { JS_NULL, JS_BOOL, JS_NUM, JS_STR, JS_ARR, JS_OBJ } js_type;

typedef struct js_value js_value;
struct js_value {
    js_type type;
    bool b;
    const char *s; /* JS_STR: decoded, NUL-terminated; JS_NUM: the number's text */
    size_t len;    /* length of s */
    int64_t n;     /* JS_ARR / JS_OBJ: number of children */
    js_value *child, *next;
    const char *key; /* member name inside an object (decoded, NUL-terminated) */
    size_t key_len;
};

typedef struct js_doc js_doc;

/* Parses text[0..len) as one JSON value followed only by spaces (trailing 0x20 allowed, as
 * safetensors pads). Recursion stops at JS_MAX_DEPTH, strings must be valid UTF-8 without NUL,
 * duplicate object keys are rejected, and the parsed values may take at most 16 bytes per byte
 * of text plus 1 MiB (times store_budget_scale, at most store_max_memory_mb). On failure
 * records EM_ERR_FORMAT "<who>: <problem>" and returns NULL. */
js_doc *js_parse(const char *text, size_t len, const char *who);
const js_value *js_root(const js_doc *doc);
void js_free(js_doc *doc);
/* The number as an unsigned integer; false when it is not a plain non-negative integer or does
 * not fit in uint64. */
bool js_get_u64(const js_value *v, uint64_t *out);
/* True when s[0..len) is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
bool js_utf8_valid(const unsigned char *s, size_t len);
/* Length of the UTF-8 sequence at s (at most n bytes), 0 when malformed. */
size_t st_utf8_len(const unsigned char *s, size_t n);

/* ---- name index (reader_base.c) ---------------------------------------------------------- */

/* A hash index over names kept elsewhere (an array of entries): slot i holds an entry's
 * position and the name's hash. Lookups compare through `name_at`, so the index stores no
 * strings. Zero-initialised means empty. */
typedef const char *(*st_name_fn)(const void *ctx, int64_t i);
typedef struct st_index {
    int64_t *pos;   /* -1: empty */
    uint64_t *hash; /* of the name at pos */
    int64_t cap, n; /* cap: a power of two, or 0 */
} st_index;

uint64_t st_hash(const char *s);
/* Position of the entry named `name`, or -1. */
int64_t st_index_find(const st_index *ix, const char *name, st_name_fn name_at, const void *ctx);
/* Records entry `pos` named `name` (not present yet); false on out of memory. */
bool st_index_add(st_index *ix, const char *name, int64_t pos);
void st_index_free(st_index *ix);

/* ---- store info (reader_base.c, dict.c) -------------------------------------------------- */

struct em_store_info {
    int64_t n, cap;
    em_store_entry *entries;
    st_index names_ix;
    int64_t nmeta, capmeta;
    char **mkeys, **mvals;
    st_index meta_ix;
};

em_store_info *st_info_new(void);
/* Appends an entry (name copied). A name already present is EM_ERR_FORMAT ("<who>: duplicate
 * tensor name ..."). */
em_status st_info_add(em_store_info *info, const char *who, const char *name, em_dtype dt,
                      em_shape shape, int64_t nbytes, int64_t offset);
em_status st_info_add_meta(em_store_info *info, const char *key, const char *value);

/* Adds t to d and drops the caller's reference to t (whatever happens). */
em_status st_dict_add_owned(em_tensor_dict *d, const char *name, em_tensor *t);
/* Makes the caller own t's reference (not a scope). */
em_tensor *st_own(em_tensor *t);
/* em_free usable as an em_from_blob deleter. */
void st_free_deleter(void *data, void *user);
/* Copies a string with em_alloc. */
char *st_strdup(const char *s);
/* Grows an em_alloc'd array of `size`-byte items to hold at least need (false when out of
 * memory; the array is unchanged then). */
bool st_grow(void **arr, int64_t *cap, int64_t need, size_t size);

/* ---- files and limits (reader_base.c, files.c) ------------------------------------------- */

/* The readers' limits, read from the configuration at each load (docs/store.md). */
typedef struct st_limits {
    uint64_t max_header;   /* store_max_header: safetensors header bytes */
    uint64_t max_pickle;   /* store_max_pickle: data.pkl bytes */
    uint64_t max_memory;   /* store_max_memory_mb: parser memory for one header or pickle */
    uint64_t budget_scale; /* store_budget_scale: multiplies the budgets below */
    uint64_t expand_ratio; /* store_expand_ratio: bytes copied out per byte of storage */
    uint64_t expand_min;   /* store_expand_min_mb: copies always allowed up to this */
    uint64_t zip_ratio;    /* store_zip_ratio: inflated / compressed bytes of an entry */
    uint64_t zip_entries;  /* store_zip_entries: entries of a .pt archive */
} st_limits;
st_limits st_get_limits(void);
/* per_byte * size + base, times scale, saturating: a budget proportional to an input's size. */
uint64_t st_budget(uint64_t per_byte, uint64_t size, uint64_t base, uint64_t scale);

/* Opens path read-only as a regular file, without blocking on FIFOs; -1 with EM_ERR_IO
 * ("<fn>: cannot open <path>: no such file", "... is a FIFO, not a model file"). */
int st_open(const char *fn, const char *path, uint64_t *size);
/* Reads up to cap bytes from the start of fd; returns how many it got. */
size_t st_head(int fd, unsigned char *buf, size_t cap);

typedef enum st_format {
    ST_FMT_UNKNOWN,
    ST_FMT_EMPTY,
    ST_FMT_ZIP,
    ST_FMT_SAFETENSORS,
    ST_FMT_PICKLE,
    ST_FMT_TAR
} st_format;
/* The format the first n bytes (up to 512) suggest. */
st_format st_sniff(const unsigned char *b, size_t n);
/* "it is a zip archive (a PyTorch .pt/.pth file?)" ... for messages. */
const char *st_format_desc(st_format f);
/* Loads (or, with info, inspects into *info) a file of either format told by content; fn
 * names the caller in messages. */
em_tensor_dict *st_load_any(const char *fn, const char *path, const em_safetensors_opts *opts,
                            em_store_info **info);

/* The safetensors reader on an open regular file of `size` bytes; it closes fd. `who` prefixes
 * messages. */
em_tensor_dict *st_safetensors_load_fd(int fd, uint64_t size, const char *who, bool copy);
em_store_info *st_safetensors_inspect_fd(int fd, uint64_t size, const char *who);

/* ---- from-memory parsers for tests and fuzzing ------------------------------------------- */

/* Validates a safetensors image; returns an info or NULL with EM_ERR_FORMAT. */
em_store_info *st_parse_header(const unsigned char *buf, size_t size, const char *name);
/* Runs the restricted unpickler over a pickle stream with no storages available. Returns
 * EM_OK when the stream is a well-formed pickle of allowed objects. */
em_status pt_unpickle_memory(const void *data, size_t size, const char *name);

#endif
