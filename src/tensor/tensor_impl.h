/* Internal layout of tensors and storage, and the helpers every op front-end shares.
 * Only src/ includes this; users see the opaque em_tensor. */
#ifndef EMBER_TENSOR_IMPL_H
#define EMBER_TENSOR_IMPL_H

#include <ember/tensor.h>
#include <stdatomic.h>

#include "../core/core_impl.h"

/* Reference counts are atomic: a module's parameters (their handles, storage and autodiff leaves)
 * are shared by every thread that runs forwards on it, and each forward takes and drops
 * references to them. */

/* Reference-counted bytes on one device, shared by every view of them. */
typedef struct em_storage {
    _Atomic int64_t refcount;
    void *data;
    size_t nbytes;
    em_device device;
    bool external;   /* caller memory (em_from_blob): never freed by us */
    bool persistent; /* from the backend's alloc_persistent */
    bool pinned;     /* page-locked host memory (em_pin_memory); deleter_user is its backend */
    void (*deleter)(void *data, void *user); /* run for external memory when the last view goes */
    void *deleter_user;
} em_storage;

struct em_tensor {
    _Atomic int64_t refcount;
    em_dtype dtype;
    int rank;
    int64_t shape[EM_MAX_RANK];
    int64_t strides[EM_MAX_RANK]; /* in elements; may be 0 (broadcast) or negative (flip) */
    int64_t offset;               /* in elements from storage->data */
    em_storage *storage;
    /* How many of the references are owned by open scopes, of any thread: a hint that lets
     * em_release skip the search of its thread's scope list when it is 0. */
    _Atomic int scope_refs;
    /* Autodiff (later layers) hangs its per-tensor data here; the tensor layer never reads it. */
    void *grad_info;
    int grad_slot; /* which output of its node this tensor is */
    bool requires_grad;
};

/* ---- construction ------------------------------------------------------------------------ */

/* New contiguous tensor with fresh storage (uninitialised). NULL + error on failure: a negative
 * dim, more elements than int64_t holds, or more bytes than the device's memory or the config
 * key max_tensor_mb allow (refused before anything is allocated). Errors name "tensor";
 * tn_new_for names op instead (for front-ends whose output size comes from their arguments). */
em_tensor *tn_new(em_dtype dtype, const int64_t *shape, int rank, em_device dev);
em_tensor *tn_new_for(const char *op, em_dtype dtype, const int64_t *shape, int rank,
                      em_device dev);
/* tn_new_for's checks alone, allocating nothing: false + error naming op. */
bool tn_check_alloc(const char *op, em_dtype dtype, const int64_t *shape, int rank, em_device dev);
/* The same limits for a buffer an op's kernels may need (a padded input, im2col columns), so
 * that arguments which make it absurd fail up front: false + EM_ERR_OOM naming op and `what`. */
bool tn_check_work(const char *op, const char *what, em_dtype dtype, const int64_t *shape, int rank,
                   em_device dev);
/* Moves t's storage into a persistent block of its device (as em_device_persistent_begin makes)
 * where that is safe and changes anything: storage Ember allocated on a device other than the
 * CPU, viewed by t alone (CPU storage never moves: em_tensor_data may have handed out its
 * address). The bytes are copied on the device. False with the error recorded (t unchanged). */
bool tn_make_persistent(em_tensor *t);
/* New handle viewing t's storage with the given geometry (storage refcount + 1). NULL + error
 * when the geometry reaches outside the storage or has too many elements. */
em_tensor *tn_view_of(const em_tensor *t, const int64_t *shape, const int64_t *strides, int rank,
                      int64_t offset);
/* Registers one reference of t with the current scope (called by tn_new/tn_view_of). */
void tn_scope_track(em_tensor *t);
/* Drops one scope-owned reference of t from the scope lists without releasing it. */
void tn_scope_forget(em_tensor *t);
/* Returns t as a new reference (retain) that belongs to the current scope, like a freshly
 * created tensor: use it wherever an op returns an existing tensor. */
em_tensor *tn_share(em_tensor *t);
/* Drops one reference without touching scopes: for references taken with em_retain by library
 * code (scopes and graph nodes use it). */
void tn_release_ref(em_tensor *t);
/* True when an error was recorded on this thread since the innermost open scope began (a
 * function that opened its own scope asks this before keeping its result; an error already
 * pending before the scope began does not count). */
bool tn_scope_failed(void);
/* A new handle on t's storage with t's geometry, owned by the caller (never scope-tracked) and
 * without autodiff data. */
em_tensor *tn_alias(const em_tensor *t);
/* Called with a handle's grad_info when the handle is freed (installed by autodiff). */
void tn_set_grad_release_hook(void (*fn)(void *grad_info));
/* Scope ownership of non-tensor objects (gradient containers ...): the scope calls fn(obj) at
 * its end. tn_scope_untrack_obj removes the entry (false when obj is not tracked). */
bool tn_scope_track_obj(void *obj, void (*fn)(void *));
bool tn_scope_untrack_obj(void *obj);

/* One more reference on *rc. */
static inline void tn_ref_inc(_Atomic int64_t *rc)
{
    atomic_fetch_add_explicit(rc, 1, memory_order_relaxed);
}

/* Drops one reference on *rc; true when it was the last. A holder that reads 1 holds the only
 * reference, which no other thread can then take, so the last release (the common case for the
 * temporaries of a step) costs a load instead of a locked read-modify-write. The acquire pairs
 * with the release of other threads' decrements, so their writes are seen before the free. */
static inline bool tn_ref_dec(_Atomic int64_t *rc)
{
    if (atomic_load_explicit(rc, memory_order_acquire) == 1) return true;
    return atomic_fetch_sub_explicit(rc, 1, memory_order_acq_rel) == 1;
}

/* A stack copy of t for kernels and descriptors: its dtype, geometry and storage, a count of 1
 * and no autodiff data. Never `*t` itself: that copy reads the reference counts, which other
 * threads may be changing at the same moment (t a shared parameter). */
static inline em_tensor tn_desc(const em_tensor *t)
{
    em_tensor d;
    memset(&d, 0, sizeof d);
    d.dtype = t->dtype;
    d.rank = t->rank;
    memcpy(d.shape, t->shape, sizeof d.shape);
    memcpy(d.strides, t->strides, sizeof d.strides);
    d.offset = t->offset;
    d.storage = t->storage;
    atomic_init(&d.refcount, 1);
    return d;
}

/* The same for storage: every field but the count (1 in the copy). */
static inline em_storage tn_storage_desc(const em_storage *s)
{
    em_storage d = {.data = s->data,
                    .nbytes = s->nbytes,
                    .device = s->device,
                    .external = s->external,
                    .persistent = s->persistent,
                    .pinned = s->pinned,
                    .deleter = s->deleter,
                    .deleter_user = s->deleter_user};
    atomic_init(&d.refcount, 1);
    return d;
}

/* Typed element pointer for a CPU tensor: storage data + offset (elements). */
static inline char *tn_ptr(const em_tensor *t)
{
    return (char *)t->storage->data + t->offset * (int64_t)em_dtype_size(t->dtype);
}

int64_t tn_numel(const em_tensor *t);
bool tn_is_contiguous(const em_tensor *t);
em_shape tn_shape(const em_tensor *t);
/* Fills `strides` with row-major strides for `shape`. */
void tn_contiguous_strides(const int64_t *shape, int rank, int64_t *strides);
/* Fills *d as a contiguous tensor of dtype and shape on `storage`, without memory of its own:
 * an output descriptor for tn_supported, whose backends read only dtypes, shapes and devices. */
void tn_describe(em_tensor *d, em_dtype dtype, const int64_t *shape, int rank, em_storage *storage);

/* ---- validation helpers used by op front-ends (they record the error, naming `op`) ------ */

/* Non-NULL check; returns false and records "op: argument `what` is NULL" unless an error
 * from an earlier op is already pending (NULL propagation keeps the first error). */
bool tn_check_ptr(const char *op, const void *p, const char *what);
/* Normalises dim into [0, rank); false + EM_ERR_INDEX when out of range. rank 0 accepts
 * -1 and 0 as dim 0 only when allow_scalar. */
bool tn_norm_dim(const char *op, int rank, int *dim);
/* Both on one device, else EM_ERR_DEVICE. */
bool tn_check_same_device(const char *op, const em_tensor *a, const em_tensor *b);
/* Broadcast two shapes (NumPy rules); false + EM_ERR_SHAPE naming both. */
bool tn_broadcast_shapes(const char *op, const int64_t *a, int ra, const int64_t *b, int rb,
                         int64_t *out, int *rout);
/* Strides of t viewed as broadcast to `shape` (rank r >= t->rank): 0 on stretched dims. */
void tn_broadcast_strides(const em_tensor *t, const int64_t *shape, int r, int64_t *strides);
/* Converts an em_axes list into a bitmask of dims (EM_ALL -> all dims); false + error on
 * out-of-range or repeated dims. */
bool tn_axes_mask(const char *op, em_axes axes, int rank, uint32_t *mask);
/* "[2, 3]" of a dims array, in a thread-local ring of buffers (valid for a few calls). */
const char *tn_dims_str(const int64_t *dims, int rank);

#endif
