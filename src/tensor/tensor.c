/* Tensor handles and storage: creation, reference counting, scopes, metadata queries and the
 * validation helpers shared by op front-ends. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "../backend/backend.h"
#include "op.h"

static _Atomic int64_t live_handles;
typedef void (*grad_hook)(void *grad_info);
static _Atomic(grad_hook) grad_release_hook; /* set once by autodiff, read by every thread */

void tn_set_grad_release_hook(void (*fn)(void *grad_info))
{
    atomic_store_explicit(&grad_release_hook, fn, memory_order_release);
}

/* ---- storage ----------------------------------------------------------------------------- */

static em_storage *storage_new(size_t nbytes, em_device dev)
{
    const em_backend *be = em_backend_of("tensor", dev);
    if (!be) return NULL;
    em_storage *s = em_alloc(sizeof *s);
    if (!s) return NULL;
    /* Size-0 tensors still get a valid (tiny) buffer so data pointers are never NULL. */
    size_t n = nbytes ? nbytes : 1;
    s->persistent = be->alloc_persistent && em_backend_persistent(dev);
    s->data = s->persistent ? be->alloc_persistent(dev.index, n) : be->alloc(dev.index, n);
    if (!s->data) {
        em_free(s);
        return NULL;
    }
    atomic_init(&s->refcount, 1);
    s->nbytes = nbytes;
    s->device = dev;
    s->external = false;
    s->pinned = false;
    s->deleter = NULL;
    s->deleter_user = NULL;
    return s;
}

static void free_data(const em_backend *be, int device, void *p, bool persistent, size_t nbytes)
{
    if (persistent && be->free_persistent)
        be->free_persistent(device, p, nbytes ? nbytes : 1);
    else
        be->free(device, p);
}

static void storage_release(em_storage *s)
{
    if (!s || !tn_ref_dec(&s->refcount)) return;
    if (s->external) {
        if (s->deleter) s->deleter(s->data, s->deleter_user);
    } else if (s->data) {
        const em_backend *be = em_backend_get(s->device.backend);
        if (be) free_data(be, s->device.index, s->data, s->persistent, s->nbytes);
    }
    em_free(s);
}

bool tn_make_persistent(em_tensor *t)
{
    em_storage *s = t->storage;
    const em_backend *be = em_backend_get(s->device.backend);
    if (!be || !be->alloc_persistent || s->device.backend == 0 || s->persistent || s->external ||
        atomic_load(&s->refcount) != 1)
        return true;
    size_t n = s->nbytes ? s->nbytes : 1;
    void *p = be->alloc_persistent(s->device.index, n);
    if (!p) return false;
    if (be->copy_within(s->device.index, p, s->data, s->nbytes) != EM_OK) {
        free_data(be, s->device.index, p, true, s->nbytes);
        return false;
    }
    be->free(s->device.index, s->data);
    s->data = p;
    s->persistent = true;
    return true;
}

/* ---- handles ----------------------------------------------------------------------------- */

static em_tensor *handle_new(em_dtype dtype, const int64_t *shape, int rank)
{
    em_tensor *t = em_alloc(sizeof *t);
    if (!t) return NULL;
    memset(t, 0, sizeof *t);
    atomic_init(&t->refcount, 1);
    t->dtype = dtype;
    t->rank = rank;
    for (int d = 0; d < rank; d++) t->shape[d] = shape[d];
    atomic_fetch_add(&live_handles, 1);
    return t;
}

void tn_contiguous_strides(const int64_t *shape, int rank, int64_t *strides)
{
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        strides[d] = s;
        s *= shape[d] > 0 ? shape[d] : 1;
    }
}

void tn_describe(em_tensor *d, em_dtype dtype, const int64_t *shape, int rank, em_storage *storage)
{
    memset(d, 0, sizeof *d);
    d->dtype = dtype;
    d->rank = rank;
    d->storage = storage;
    memcpy(d->shape, shape, sizeof(int64_t) * (size_t)rank);
    tn_contiguous_strides(d->shape, rank, d->strides);
}

/* Each device's memory in bytes as its backend reports it (0: not asked yet, -1: unknown). */
static _Atomic int64_t device_memory[EM_MAX_BACKENDS][EM_MAX_THREAD_DEVICES];

static int64_t device_memory_bytes(const em_backend *be, em_device dev)
{
    if (dev.backend < 0 || dev.backend >= EM_MAX_BACKENDS || dev.index < 0 ||
        dev.index >= EM_MAX_THREAD_DEVICES)
        return -1;
    _Atomic int64_t *slot = &device_memory[dev.backend][dev.index];
    int64_t v = atomic_load(slot);
    if (v == 0) {
        em_device_props p;
        memset(&p, 0, sizeof p);
        if (be->props && dev.index < be->device_count()) be->props(dev.index, &p);
        v = p.total_memory > 0 ? p.total_memory : -1;
        atomic_store(slot, v);
    }
    return v;
}

/* "1.5 GiB", "300.0 MiB" */
static const char *human_bytes(int64_t n, char *buf, size_t cap)
{
    if (n >= (INT64_C(1) << 30))
        snprintf(buf, cap, "%.1f GiB", (double)n / (double)(INT64_C(1) << 30));
    else
        snprintf(buf, cap, "%.1f MiB", (double)n / (double)(INT64_C(1) << 20));
    return buf;
}

bool tn_check_alloc(const char *op, em_dtype dtype, const int64_t *shape, int rank, em_device dev)
{
    if (rank < 0 || rank > EM_MAX_RANK) {
        em_error(EM_ERR_SHAPE, "%s: rank %d is outside [0, %d]", op, rank, EM_MAX_RANK);
        return false;
    }
    for (int d = 0; d < rank; d++) {
        if (shape[d] < 0) {
            em_error(EM_ERR_SHAPE, "%s: negative dimension %lld in %s", op, (long long)shape[d],
                     tn_dims_str(shape, rank));
            return false;
        }
    }
    int64_t numel = 0, span = 0, span_bytes = 0;
    if (!core_numel_ok(shape, rank, &numel)) {
        em_error(EM_ERR_SHAPE, "%s: shape %s has more than 2^63 elements", op,
                 tn_dims_str(shape, rank));
        return false;
    }
    size_t nbytes = 0;
    /* the byte strides must fit too (kernels step in bytes), also where a zero dim leaves no
       elements */
    core_span_ok(shape, rank, &span);
    if (!core_nbytes_ok(numel, em_dtype_size(dtype), &nbytes)) {
        em_error(EM_ERR_OOM, "%s: a tensor of shape %s and dtype %s needs more than 2^63 bytes", op,
                 tn_dims_str(shape, rank), em_dtype_name(dtype));
        return false;
    }
    if (!core_mul_ok(span, (int64_t)em_dtype_size(dtype), &span_bytes)) {
        em_error(EM_ERR_SHAPE, "%s: shape %s of %s has byte strides past 2^63", op,
                 tn_dims_str(shape, rank), em_dtype_name(dtype));
        return false;
    }
    const em_backend *be = em_backend_of(op, dev);
    if (!be) return false;
    int64_t cap = core_max_tensor_bytes(), mem = device_memory_bytes(be, dev);
    bool over_cap = cap > 0 && (int64_t)nbytes > cap, over_mem = mem > 0 && (int64_t)nbytes > mem;
    if (over_cap || over_mem) {
        char need[32], have[32], name[32];
        em_error(EM_ERR_OOM,
                 "%s: a tensor of shape %s and dtype %s needs %lld bytes (%s), more than %s%s "
                 "(%s)",
                 op, tn_dims_str(shape, rank), em_dtype_name(dtype), (long long)nbytes,
                 human_bytes((int64_t)nbytes, need, sizeof need),
                 over_mem ? em_device_str(dev, name, sizeof name) : "the limit max_tensor_mb",
                 over_mem ? "'s memory" : "", human_bytes(over_mem ? mem : cap, have, sizeof have));
        return false;
    }
    return true;
}

bool em_tensor_check_size(const char *who, em_shape shape, em_dtype dtype, em_device dev)
{
    return tn_check_alloc(who ? who : "em_tensor_check_size", dtype, shape.dims, shape.rank, dev);
}

bool tn_check_work(const char *op, const char *what, em_dtype dtype, const int64_t *shape, int rank,
                   em_device dev)
{
    int64_t numel = 0, cap = core_max_tensor_bytes(), mem = -1;
    size_t nbytes = 0;
    em_backends_init();
    const em_backend *be = em_backend_get(dev.backend);
    if (be) mem = device_memory_bytes(be, dev);
    bool fits = rank >= 0 && rank <= EM_MAX_RANK && core_numel_ok(shape, rank, &numel) &&
                core_nbytes_ok(numel, em_dtype_size(dtype), &nbytes) &&
                !(cap > 0 && (int64_t)nbytes > cap) && !(mem > 0 && (int64_t)nbytes > mem);
    if (!fits)
        em_error(EM_ERR_OOM,
                 "%s: %s (%s of %s, which its kernels may hold in memory) is larger than one "
                 "tensor may be (the device's memory, or max_tensor_mb)",
                 op, what, tn_dims_str(shape, rank), em_dtype_name(dtype));
    return fits;
}

em_tensor *tn_new_for(const char *op, em_dtype dtype, const int64_t *shape, int rank, em_device dev)
{
    if (!tn_check_alloc(op, dtype, shape, rank, dev)) return NULL;
    int64_t numel = 0;
    size_t nbytes = 0;
    core_numel_ok(shape, rank, &numel);
    core_nbytes_ok(numel, em_dtype_size(dtype), &nbytes);
    em_tensor *t = handle_new(dtype, shape, rank);
    if (!t) return NULL;
    t->storage = storage_new(nbytes, dev);
    if (!t->storage) {
        em_free(t);
        atomic_fetch_sub(&live_handles, 1);
        return NULL;
    }
    tn_contiguous_strides(shape, rank, t->strides);
    tn_scope_track(t);
    return t;
}

em_tensor *tn_new(em_dtype dtype, const int64_t *shape, int rank, em_device dev)
{
    return tn_new_for("tensor", dtype, shape, rank, dev);
}

/* Whether a view of t's storage with this geometry is well formed: its element count fits, and
 * every element it reaches lies inside the storage. */
static bool view_fits(const em_tensor *t, const int64_t *shape, const int64_t *strides, int rank,
                      int64_t offset)
{
    int64_t numel = 0, bytes = 0, es = (int64_t)em_dtype_size(t->dtype);
    if (rank < 0 || rank > EM_MAX_RANK || !core_numel_ok(shape, rank, &numel)) return false;
    for (int d = 0; d < rank; d++) /* kernels step in bytes */
        if (!core_mul_ok(strides[d], es, &bytes)) return false;
    if (numel == 0) return true;
    int64_t lo = offset, hi = offset, ext;
    for (int d = 0; d < rank; d++) {
        if (!core_mul_ok(shape[d] - 1, strides[d], &ext) ||
            !core_add_ok(ext < 0 ? lo : hi, ext, ext < 0 ? &lo : &hi))
            return false;
    }
    return lo >= 0 && hi < (int64_t)t->storage->nbytes / es;
}

em_tensor *tn_view_of(const em_tensor *t, const int64_t *shape, const int64_t *strides, int rank,
                      int64_t offset)
{
    if (!view_fits(t, shape, strides, rank, offset)) {
        em_error(EM_ERR_SHAPE,
                 "tensor: a view of shape %s, strides %s and offset %lld does not fit in the "
                 "%lld-byte storage of a %s tensor of shape %s",
                 tn_dims_str(shape, rank), tn_dims_str(strides, rank), (long long)offset,
                 (long long)t->storage->nbytes, em_dtype_name(t->dtype),
                 tn_dims_str(t->shape, t->rank));
        return NULL;
    }
    em_tensor *v = handle_new(t->dtype, shape, rank);
    if (!v) return NULL;
    for (int d = 0; d < rank; d++) v->strides[d] = strides[d];
    v->offset = offset;
    v->storage = t->storage;
    tn_ref_inc(&v->storage->refcount);
    tn_scope_track(v);
    return v;
}

em_tensor *tn_alias(const em_tensor *t)
{
    em_tensor *v = handle_new(t->dtype, t->shape, t->rank);
    if (!v) return NULL;
    for (int d = 0; d < t->rank; d++) v->strides[d] = t->strides[d];
    v->offset = t->offset;
    v->storage = t->storage;
    tn_ref_inc(&v->storage->refcount);
    return v;
}

em_tensor *em_from_blob(void *data, em_dtype dtype, em_shape shape, void (*deleter)(void *, void *),
                        void *user)
{
    if (!tn_check_ptr("em_from_blob", data, "data")) return NULL;
    if (!em_dtype_valid((int)dtype)) {
        em_error(EM_ERR_DTYPE, "em_from_blob: invalid dtype %d", (int)dtype);
        return NULL;
    }
    if (shape.rank < 0 || shape.rank > EM_MAX_RANK) {
        em_error(EM_ERR_SHAPE, "em_from_blob: rank %d is outside [0, %d]", shape.rank, EM_MAX_RANK);
        return NULL;
    }
    int64_t numel = 0;
    size_t nbytes = 0;
    if (!core_numel_ok(shape.dims, shape.rank, &numel) ||
        !core_nbytes_ok(numel, em_dtype_size(dtype), &nbytes)) {
        em_error(EM_ERR_SHAPE, "em_from_blob: shape %s is negative or too large for %s",
                 tn_dims_str(shape.dims, shape.rank), em_dtype_name(dtype));
        return NULL;
    }
    em_tensor *t = handle_new(dtype, shape.dims, shape.rank);
    if (!t) return NULL;
    em_storage *s = em_alloc(sizeof *s);
    if (!s) {
        em_free(t);
        atomic_fetch_sub(&live_handles, 1);
        return NULL;
    }
    atomic_init(&s->refcount, 1);
    s->data = data;
    s->nbytes = nbytes;
    s->device = EM_CPU;
    s->external = true;
    s->persistent = false;
    s->pinned = false;
    s->deleter = deleter;
    s->deleter_user = user;
    t->storage = s;
    tn_contiguous_strides(shape.dims, shape.rank, t->strides);
    tn_scope_track(t);
    return t;
}

em_tensor *em_retain(em_tensor *t)
{
    if (t) tn_ref_inc(&t->refcount);
    return t;
}

em_tensor *tn_share(em_tensor *t)
{
    tn_ref_inc(&t->refcount);
    tn_scope_track(t);
    return t;
}

/* Drops one reference; frees the handle at zero. */
void tn_release_ref(em_tensor *t)
{
    if (!tn_ref_dec(&t->refcount)) return;
    if (t->grad_info) {
        grad_hook hook = atomic_load_explicit(&grad_release_hook, memory_order_acquire);
        if (hook) hook(t->grad_info);
    }
    storage_release(t->storage);
    em_free(t);
    atomic_fetch_sub(&live_handles, 1);
}

void em_release(em_tensor *t)
{
    if (!t) return;
    /* A reference a scope of this thread owns is the one given back first: the scope forgets
     * it (scope_refs may count other threads' scopes too; their lists are not searched). */
    if (atomic_load_explicit(&t->scope_refs, memory_order_relaxed) > 0) tn_scope_forget(t);
    tn_release_ref(t);
}

int64_t em_live_tensors(void)
{
    return atomic_load(&live_handles);
}

/* ---- metadata ---------------------------------------------------------------------------- */

int64_t tn_numel(const em_tensor *t)
{
    int64_t n;
    /* every handle's shape passed core_numel_ok when it was made */
    return core_numel_ok(t->shape, t->rank, &n) ? n : -1;
}

bool tn_is_contiguous(const em_tensor *t)
{
    return ir_dims_contiguous(t->shape, t->strides, t->rank);
}

em_shape tn_shape(const em_tensor *t)
{
    em_shape s = {.rank = t->rank};
    for (int d = 0; d < t->rank; d++) s.dims[d] = t->shape[d];
    return s;
}

em_dtype em_tensor_dtype(const em_tensor *t)
{
    return t ? t->dtype : EM_F32;
}

em_shape em_tensor_shape(const em_tensor *t)
{
    if (!t) return (em_shape){.rank = 0};
    return tn_shape(t);
}

int em_tensor_rank(const em_tensor *t)
{
    return t ? t->rank : 0;
}

int64_t em_tensor_dim(const em_tensor *t, int d)
{
    if (!tn_check_ptr("em_tensor_dim", t, "t")) return -1;
    if (!tn_norm_dim("em_tensor_dim", t->rank, &d)) return -1;
    return t->shape[d];
}

int64_t em_tensor_numel(const em_tensor *t)
{
    return t ? tn_numel(t) : 0;
}

em_device em_tensor_device(const em_tensor *t)
{
    return t ? t->storage->device : EM_CPU;
}

int64_t em_tensor_stride(const em_tensor *t, int d)
{
    if (!tn_check_ptr("em_tensor_stride", t, "t")) return 0;
    if (!tn_norm_dim("em_tensor_stride", t->rank, &d)) return 0;
    return t->strides[d];
}

int64_t em_tensor_offset(const em_tensor *t)
{
    return t ? t->offset : 0;
}

bool em_tensor_is_contiguous(const em_tensor *t)
{
    return t && tn_is_contiguous(t);
}

bool em_tensor_shares_storage(const em_tensor *a, const em_tensor *b)
{
    return a && b && a->storage == b->storage;
}

void *em_tensor_data(const em_tensor *t)
{
    if (!t || t->storage->device.backend != 0) return NULL;
    const em_storage *s = t->storage;
    if (s->pinned) ((const em_backend *)s->deleter_user)->host_wait(s->data); /* may be written */
    return tn_ptr(t);
}

int64_t em_shape_numel(em_shape s)
{
    int64_t n;
    if (s.rank < 0 || s.rank > EM_MAX_RANK || !core_numel_ok(s.dims, s.rank, &n)) return -1;
    return n;
}

bool em_shape_equal(em_shape a, em_shape b)
{
    if (a.rank != b.rank || a.rank < 0 || a.rank > EM_MAX_RANK) return false;
    for (int d = 0; d < a.rank; d++)
        if (a.dims[d] != b.dims[d]) return false;
    return true;
}

static void dims_format(const int64_t *dims, int rank, char *buf, size_t cap)
{
    size_t n = 0;
    n += (size_t)snprintf(buf + n, cap - n, "[");
    for (int d = 0; d < rank && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, d ? ", %lld" : "%lld", (long long)dims[d]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

char *em_shape_str(em_shape s, char *buf, size_t cap)
{
    if (!buf || cap == 0) return buf;
    int rank = s.rank < 0 ? 0 : (s.rank > EM_MAX_RANK ? EM_MAX_RANK : s.rank);
    dims_format(s.dims, rank, buf, cap);
    return buf;
}

const char *tn_dims_str(const int64_t *dims, int rank)
{
    static EM_THREAD_LOCAL char ring[8][160];
    static EM_THREAD_LOCAL int next;
    char *buf = ring[next++ & 7];
    if (rank < 0) rank = 0;
    if (rank > EM_MAX_RANK) rank = EM_MAX_RANK;
    dims_format(dims, rank, buf, sizeof ring[0]);
    return buf;
}

/* ---- validation helpers ------------------------------------------------------------------ */

bool tn_check_ptr(const char *op, const void *p, const char *what)
{
    if (p) return true;
    em_error(EM_ERR_INVALID_ARG, "%s: argument `%s` is NULL", op, what);
    return false;
}

bool tn_norm_dim(const char *op, int rank, int *dim)
{
    int r = rank == 0 ? 1 : rank;
    int d = *dim;
    if (d < -r || d >= r) {
        em_error(EM_ERR_INDEX, "%s: dim %d is out of range for a tensor of rank %d", op, d, rank);
        return false;
    }
    *dim = d < 0 ? d + r : d;
    return true;
}

bool tn_check_same_device(const char *op, const em_tensor *a, const em_tensor *b)
{
    if (em_device_equal(a->storage->device, b->storage->device)) return true;
    char da[32], db[32];
    em_error(EM_ERR_DEVICE, "%s: tensors on different devices (%s and %s)", op,
             em_device_str(a->storage->device, da, sizeof da),
             em_device_str(b->storage->device, db, sizeof db));
    return false;
}

bool tn_broadcast_shapes(const char *op, const int64_t *a, int ra, const int64_t *b, int rb,
                         int64_t *out, int *rout)
{
    int r = ra > rb ? ra : rb;
    for (int i = 0; i < r; i++) {
        int64_t da = i < r - ra ? 1 : a[i - (r - ra)];
        int64_t db = i < r - rb ? 1 : b[i - (r - rb)];
        if (da != db && da != 1 && db != 1) {
            em_error(EM_ERR_SHAPE, "%s: shapes %s and %s cannot broadcast", op, tn_dims_str(a, ra),
                     tn_dims_str(b, rb));
            return false;
        }
        out[i] = da == 1 ? db : da;
    }
    int64_t numel = 0;
    if (!core_numel_ok(out, r, &numel)) {
        em_error(EM_ERR_SHAPE, "%s: shapes %s and %s broadcast to %s, which has too many elements",
                 op, tn_dims_str(a, ra), tn_dims_str(b, rb), tn_dims_str(out, r));
        return false;
    }
    *rout = r;
    return true;
}

void tn_broadcast_strides(const em_tensor *t, const int64_t *shape, int r, int64_t *strides)
{
    int lead = r - t->rank;
    for (int i = 0; i < r; i++) {
        if (i < lead) {
            strides[i] = 0;
            continue;
        }
        int d = i - lead;
        strides[i] = (t->shape[d] == 1 && shape[i] != 1) ? 0 : t->strides[d];
    }
}

bool tn_axes_mask(const char *op, em_axes axes, int rank, uint32_t *mask)
{
    if (axes.n < 0 || axes.n > EM_MAX_RANK) {
        em_error(EM_ERR_INVALID_ARG, "%s: %d dims given, at most %d allowed", op, axes.n,
                 EM_MAX_RANK);
        return false;
    }
    uint32_t m = 0;
    if (axes.n == 0) {
        m = rank ? (uint32_t)((1u << rank) - 1) : 0;
    }
    for (int i = 0; i < axes.n; i++) {
        int d = axes.d[i];
        if (!tn_norm_dim(op, rank, &d)) return false;
        if (rank == 0) continue;
        if (m & (1u << d)) {
            em_error(EM_ERR_INVALID_ARG, "%s: dim %d appears more than once", op, d);
            return false;
        }
        m |= 1u << d;
    }
    *mask = m;
    return true;
}
