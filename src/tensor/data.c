/* Data in and out of tensors: host arrays in any dtype, scalar reads, device moves. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../backend/backend.h"
#include "../ir/elem.h"
#include "op.h"

/* dst = src converted to dst's dtype, both views of host memory (the CPU backend's CAST). */
static void host_convert(ir_tensor *dst, ir_tensor *src)
{
    ir_op k = {.kind = EM_OP_CAST, .n_in = 1, .n_out = 1, .in = {src}, .out = {dst}};
    cpu_backend.exec(&k);
}

static bool check_shape(const char *op, em_shape s)
{
    if (s.rank < 0 || s.rank > EM_MAX_RANK) {
        em_error(EM_ERR_SHAPE, "%s: rank %d is outside [0, %d]", op, s.rank, EM_MAX_RANK);
        return false;
    }
    for (int d = 0; d < s.rank; d++) {
        if (s.dims[d] < 0) {
            em_error(EM_ERR_SHAPE, "%s: negative dimension in %s", op, tn_dims_str(s.dims, s.rank));
            return false;
        }
    }
    return true;
}

static em_tensor *from_data_named(const char *fn, const void *data, em_dtype src_dtype,
                                  em_shape shape, em_dtype dtype, em_device dev)
{
    em_backends_init();
    if (!check_shape(fn, shape)) return NULL;
    if (!em_dtype_valid((int)src_dtype) || !em_dtype_valid((int)dtype)) {
        em_error(EM_ERR_DTYPE, "%s: invalid dtype (%d -> %d)", fn, (int)src_dtype, (int)dtype);
        return NULL;
    }
    if (!data && em_shape_numel(shape) > 0) {
        em_error(EM_ERR_INVALID_ARG, "%s: argument `data` is NULL", fn);
        return NULL;
    }
    if (!em_backend_get(dev.backend)) {
        em_error(EM_ERR_DEVICE, "%s: no backend with index %d", fn, dev.backend);
        return NULL;
    }
    em_tensor *host = tn_new_for(fn, dtype, shape.dims, shape.rank, EM_CPU);
    if (!host) return NULL;
    int64_t n = tn_numel(host);
    if (n > 0) {
        if (src_dtype == dtype) {
            memcpy(tn_ptr(host), data, (size_t)n * em_dtype_size(dtype));
        } else {
            ir_tensor dst, src; /* src: a view of the caller's array */
            tn_view(host, &dst);
            src = dst;
            src.dtype = src_dtype;
            src.data = (void *)data;
            host_convert(&dst, &src);
        }
    }
    if (dev.backend == 0) return host;
    em_tensor *moved = em_to_device(host, dev);
    em_release(host);
    return moved;
}

em_tensor *em_from_data(const void *data, em_dtype src_dtype, em_shape shape, em_dtype dtype,
                        em_device dev)
{
    return from_data_named("em_from_data", data, src_dtype, shape, dtype, dev);
}

em_tensor *em_from_f32(const float *data, em_shape shape)
{
    return from_data_named("em_from_f32", data, EM_F32, shape, EM_F32, EM_CPU);
}

em_tensor *em_from_f64(const double *data, em_shape shape)
{
    return from_data_named("em_from_f64", data, EM_F64, shape, EM_F64, EM_CPU);
}

em_tensor *em_from_i64(const int64_t *data, em_shape shape)
{
    return from_data_named("em_from_i64", data, EM_I64, shape, EM_I64, EM_CPU);
}

em_status em_to_data(const em_tensor *t, void *out, em_dtype dtype, int64_t count)
{
    if (!tn_check_ptr("em_to_data", t, "t")) return em_last_status();
    if (!tn_check_ptr("em_to_data", out, "out")) return em_last_status();
    if (!em_dtype_valid((int)dtype))
        return em_error(EM_ERR_DTYPE, "em_to_data: invalid dtype %d", (int)dtype);
    int64_t n = tn_numel(t);
    if (count < n)
        return em_error(EM_ERR_INVALID_ARG,
                        "em_to_data: buffer holds %lld elements, tensor %s has %lld",
                        (long long)count, tn_dims_str(t->shape, t->rank), (long long)n);
    if (n == 0) return EM_OK;
    if (t->storage->device.backend != 0 && dtype == t->dtype && tn_is_contiguous(t)) {
        /* straight into out (one DMA where out is pinned memory) */
        const em_backend *be = em_backend_get(t->storage->device.backend);
        return be->copy_to_host(t->storage->device.index, out, tn_ptr(t),
                                (size_t)n * em_dtype_size(dtype));
    }
    em_tensor *host = (em_tensor *)t;
    if (t->storage->device.backend != 0) {
        host = em_to_device((em_tensor *)t, EM_CPU);
        if (!host) return em_last_status();
    }
    ir_tensor dst, src;
    tn_view(host, &src);
    dst = src;
    dst.dtype = dtype;
    dst.data = out;
    ir_contiguous_strides(dst.shape, dst.rank, dst.strides);
    host_convert(&dst, &src);
    if (host != t) em_release(host);
    return EM_OK;
}

double em_item_f64(const em_tensor *t)
{
    if (!tn_check_ptr("em_item_f64", t, "t")) return NAN;
    if (tn_numel(t) != 1) {
        em_error(EM_ERR_SHAPE, "em_item_f64: tensor of shape %s has %lld elements, not 1",
                 tn_dims_str(t->shape, t->rank), (long long)tn_numel(t));
        return NAN;
    }
    double v = NAN;
    em_to_data(t, &v, EM_F64, 1);
    return v;
}

int64_t em_item_i64(const em_tensor *t)
{
    if (!tn_check_ptr("em_item_i64", t, "t")) return 0;
    if (tn_numel(t) != 1) {
        em_error(EM_ERR_SHAPE, "em_item_i64: tensor of shape %s has %lld elements, not 1",
                 tn_dims_str(t->shape, t->rank), (long long)tn_numel(t));
        return 0;
    }
    int64_t v = 0;
    em_to_data(t, &v, EM_I64, 1);
    return v;
}

double em_get_f64(const em_tensor *t, const int64_t *index)
{
    if (!tn_check_ptr("em_get_f64", t, "t")) return NAN;
    if (t->rank > 0 && !tn_check_ptr("em_get_f64", index, "index")) return NAN;
    int64_t off = t->offset;
    for (int d = 0; d < t->rank; d++) {
        int64_t i = index[d];
        if (i < -t->shape[d] || i >= t->shape[d]) {
            em_error(EM_ERR_INDEX, "em_get_f64: index %lld is out of range for dim %d of size %lld",
                     (long long)i, d, (long long)t->shape[d]);
            return NAN;
        }
        if (i < 0) i += t->shape[d];
        off += i * t->strides[d];
    }
    size_t es = em_dtype_size(t->dtype);
    if (t->storage->device.backend == 0)
        return ir_get_f64((char *)t->storage->data + off * (int64_t)es, t->dtype);
    unsigned char buf[8];
    const em_backend *be = em_backend_get(t->storage->device.backend);
    if (be->copy_to_host(t->storage->device.index, buf,
                         (char *)t->storage->data + off * (int64_t)es, es) != EM_OK)
        return NAN;
    return ir_get_f64(buf, t->dtype);
}

static void pinned_release(void *data, void *backend)
{
    ((const em_backend *)backend)->host_free(data);
}

em_tensor *em_pin_memory(const em_tensor *t)
{
    if (!tn_check_ptr("em_pin_memory", t, "t")) return NULL;
    em_backends_init();
    const em_backend *be = NULL;
    for (int i = 0; !be && em_backend_get(i); i++)
        if (em_backend_get(i)->host_alloc) be = em_backend_get(i);
    /* the copy of an expanded view has all its elements: it must fit the host's memory */
    if (!tn_check_alloc("em_pin_memory", t->dtype, t->shape, t->rank, EM_CPU)) return NULL;
    int64_t n = tn_numel(t);
    size_t nbytes = (size_t)n * em_dtype_size(t->dtype);
    uint64_t before = core_error_mark();
    void *p = be ? be->host_alloc(nbytes ? nbytes : 1) : NULL;
    if (!p) { /* nothing to pin with: an ordinary host copy */
        static atomic_bool warned;
        if (be && !atomic_exchange(&warned, true))
            em_log_msg("tensor", EM_LOG_WARN, "%s; an ordinary host copy instead", em_last_error());
        if (be) core_error_forget(before);
        em_tensor *h = em_to_device((em_tensor *)t, EM_CPU);
        em_tensor *c = em_clone(h);
        em_release(h);
        return c;
    }
    if (em_to_data(t, p, t->dtype, n) != EM_OK) {
        be->host_free(p);
        return NULL;
    }
    em_shape s = {.rank = t->rank};
    for (int d = 0; d < t->rank; d++) s.dims[d] = t->shape[d];
    em_tensor *out = em_from_blob(p, t->dtype, s, pinned_release, (void *)be);
    if (!out) {
        be->host_free(p);
        return NULL;
    }
    out->storage->pinned = true;
    return out;
}

bool em_tensor_is_pinned(const em_tensor *t)
{
    return t && t->storage->pinned;
}

em_tensor *em_to_device(em_tensor *t, em_device dev)
{
    if (!tn_check_ptr("em_to_device", t, "t")) return NULL;
    em_backends_init();
    const em_backend *dst_be = em_backend_get(dev.backend);
    if (!dst_be || dev.index < 0 || dev.index >= dst_be->device_count()) {
        char b[32];
        em_error(EM_ERR_DEVICE, "em_to_device: device %s does not exist",
                 em_device_str(dev, b, sizeof b));
        return NULL;
    }
    if (em_device_equal(t->storage->device, dev)) return tn_share(t);
    em_tensor *src = em_contiguous(t);
    if (!src) return NULL;
    em_tensor *out = tn_new_for("em_to_device", src->dtype, src->shape, src->rank, dev);
    if (!out) {
        em_release(src);
        return NULL;
    }
    size_t nbytes = (size_t)tn_numel(src) * em_dtype_size(src->dtype);
    const em_backend *src_be = em_backend_get(src->storage->device.backend);
    const void *from =
        (char *)src->storage->data + src->offset * (int64_t)em_dtype_size(src->dtype);
    em_status st = EM_OK;
    if (nbytes > 0) {
        if (src->storage->device.backend == 0) {
            st = dst_be->copy_from_host(dev.index, out->storage->data, tn_ptr(src), nbytes);
        } else if (dev.backend == 0) {
            st = src_be->copy_to_host(src->storage->device.index, out->storage->data, from, nbytes);
        } else {
            /* two devices of one backend: a direct copy when it has one, else through the host */
            st = EM_ERR_UNSUPPORTED;
            if (src_be == dst_be && dst_be->copy_peer)
                st = dst_be->copy_peer(dev.index, out->storage->data, src->storage->device.index,
                                       from, nbytes);
            if (st == EM_ERR_UNSUPPORTED) {
                void *stage = em_alloc(nbytes);
                st = stage ? src_be->copy_to_host(src->storage->device.index, stage, from, nbytes)
                           : EM_ERR_OOM;
                if (st == EM_OK)
                    st = dst_be->copy_from_host(dev.index, out->storage->data, stage, nbytes);
                em_free(stage);
            }
        }
    }
    em_release(src);
    if (st != EM_OK) {
        em_release(out);
        return NULL;
    }
    return out;
}

/* dst's shape against src's; false with the error recorded. */
static bool copy_into_shapes(const em_tensor *dst, const em_tensor *src)
{
    bool same = dst->rank == src->rank;
    for (int d = 0; same && d < dst->rank; d++) same = dst->shape[d] == src->shape[d];
    if (same) return true;
    em_error(EM_ERR_SHAPE, "em_copy_into: dst has shape %s, src %s",
             tn_dims_str(dst->shape, dst->rank), tn_dims_str(src->shape, src->rank));
    return false;
}

em_status em_copy_into(em_tensor *dst, const em_tensor *src)
{
    if (!tn_check_ptr("em_copy_into", dst, "dst") || !tn_check_ptr("em_copy_into", src, "src"))
        return em_last_status();
    if (!copy_into_shapes(dst, src)) return em_last_status();
    if (!tn_is_contiguous(dst))
        return em_error(EM_ERR_INVALID_ARG,
                        "em_copy_into: dst must be contiguous (em_contiguous makes a copy, which "
                        "would not be dst)");
    size_t nbytes = (size_t)tn_numel(dst) * em_dtype_size(dst->dtype);
    if (nbytes == 0) return EM_OK;
    /* src in dst's dtype (converted on the CPU when either side is there: it converts every
     * dtype), contiguous, and apart from dst's memory */
    em_device dd = dst->storage->device;
    em_tensor *c = NULL;
    if (src->dtype == dst->dtype) {
        c = em_contiguous(src);
    } else if (src->storage->device.backend != 0 && dd.backend == 0) {
        em_tensor *h = em_to_device((em_tensor *)src, EM_CPU);
        c = h ? em_cast(h, dst->dtype) : NULL;
        em_release(h);
    } else {
        c = em_cast(src, dst->dtype);
    }
    if (c && c->storage == dst->storage) {
        em_tensor *d = em_clone(c);
        em_release(c);
        c = d;
    }
    if (!c) return em_last_status();
    em_device sd = c->storage->device;
    const em_backend *dbe = em_backend_get(dd.backend), *sbe = em_backend_get(sd.backend);
    em_status st;
    if (dd.backend == 0) { /* into host memory (a pinned block waits for DMAs reading it) */
        void *to = em_tensor_data(dst);
        st = sd.backend == 0 ? (memcpy(to, tn_ptr(c), nbytes), EM_OK)
                             : sbe->copy_to_host(sd.index, to, tn_ptr(c), nbytes);
    } else if (sd.backend == 0) {
        st = dbe->copy_from_host(dd.index, tn_ptr(dst), tn_ptr(c), nbytes);
    } else {
        em_tensor *m = em_to_device(c, dd); /* another device: there first */
        st = m ? dbe->copy_within(dd.index, tn_ptr(dst), tn_ptr(m), nbytes) : em_last_status();
        em_release(m);
    }
    em_release(c);
    return st;
}
