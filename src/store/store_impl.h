/* Private interface of the store layer: the bounded JSON reader, the dictionary and info
 * internals shared by safetensors.c, pt.c and dict.c, and the from-memory parsers the fuzz
 * targets call. */
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
 * and duplicate object keys are rejected. On failure records EM_ERR_FORMAT "<who>: <problem>"
 * and returns NULL. */
js_doc *js_parse(const char *text, size_t len, const char *who);
const js_value *js_root(const js_doc *doc);
void js_free(js_doc *doc);
/* The number as an unsigned integer; false when it is not a plain non-negative integer or does
 * not fit in uint64. */
bool js_get_u64(const js_value *v, uint64_t *out);
/* True when s[0..len) is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
bool js_utf8_valid(const unsigned char *s, size_t len);

/* ---- store info (dict.c) ----------------------------------------------------------------- */

em_store_info *st_info_new(void);
/* Appends an entry (name copied). */
em_status st_info_add(em_store_info *info, const char *name, em_dtype dt, em_shape shape,
                      int64_t nbytes, int64_t offset);
em_status st_info_add_meta(em_store_info *info, const char *key, const char *value);

/* Adds t to d and drops the caller's reference to t (whatever happens). */
em_status st_dict_add_owned(em_tensor_dict *d, const char *name, em_tensor *t);
/* Makes the caller own t's reference (not a scope). */
em_tensor *st_own(em_tensor *t);
/* em_free usable as an em_from_blob deleter. */
void st_free_deleter(void *data, void *user);
/* Copies a string with em_alloc. */
char *st_strdup(const char *s);

/* ---- from-memory parsers for tests and fuzzing ------------------------------------------- */

/* Validates a safetensors image; returns an info or NULL with EM_ERR_FORMAT. */
em_store_info *st_parse_header(const unsigned char *buf, size_t size, const char *name);
/* Runs the restricted unpickler over a pickle stream with no storages available. Returns
 * EM_OK when the stream is a well-formed pickle of allowed objects. */
em_status pt_unpickle_memory(const void *data, size_t size, const char *name);

#endif
