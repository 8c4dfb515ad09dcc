/* The op IR's front door: every op record passes through tn_dispatch, which runs it on its
 * backend and offers it to the recorder (autodiff, capture). */
#include <assert.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backend/backend.h"
#include "op.h"

static _Atomic int64_t op_counts[EM_OP_COUNT];
static _Atomic int64_t fallback_counts[EM_OP_COUNT];
/* Set once by autodiff's initialisation, which may run while other threads dispatch ops: the
 * hooks are atomic, the user pointer written before the function (release) and read after it. */
static _Atomic(em_op_recorder) recorder;
static void *recorder_user;
/* per-kind op timing (tn_profile_enable): executed ops are synchronised and timed */
static atomic_bool profiling, tracing;
static _Atomic int64_t prof_ns[EM_OP_COUNT], prof_n[EM_OP_COUNT];

void tn_profile_enable(bool on)
{
    atomic_store(&profiling, on);
}

void tn_profile_trace(bool on)
{
    atomic_store(&tracing, on);
}

/* tn_profile_trace's line for op, which took ns */
static void trace_op(const em_op *op, int64_t ns)
{
    char buf[768];
    int len = snprintf(buf, sizeof buf, "op %-16s %-5s %8.1f us  out %s  in", em_op_name(op->kind),
                       em_dtype_name(op->n_out ? op->out[0]->dtype : EM_F32), (double)ns * 1e-3,
                       op->n_out ? tn_dims_str(op->out[0]->shape, op->out[0]->rank) : "-");
    for (int i = 0; i < op->n_in && len > 0 && len < (int)sizeof buf - 80; i++) {
        const em_tensor *t = op->in[i];
        len += snprintf(buf + len, sizeof buf - (size_t)len, " %s%s%s",
                        tn_dims_str(t->shape, t->rank), tn_is_contiguous(t) ? "" : "/",
                        tn_is_contiguous(t) ? "" : tn_dims_str(t->strides, t->rank));
    }
    fprintf(stderr, "%s\n", buf);
}

void tn_profile_get(em_op_kind kind, int64_t *count, double *seconds)
{
    bool ok = kind >= 0 && kind < EM_OP_COUNT;
    *count = ok ? atomic_load(&prof_n[kind]) : 0;
    *seconds = ok ? (double)atomic_load(&prof_ns[kind]) * 1e-9 : 0;
}

void tn_profile_reset(void)
{
    for (int k = 0; k < EM_OP_COUNT; k++) atomic_store(&prof_ns[k], 0), atomic_store(&prof_n[k], 0);
}

int64_t tn_op_count(em_op_kind kind)
{
    return (kind >= 0 && kind < EM_OP_COUNT) ? atomic_load(&op_counts[kind]) : 0;
}

int64_t tn_fallback_count(em_op_kind kind)
{
    return (kind >= 0 && kind < EM_OP_COUNT) ? atomic_load(&fallback_counts[kind]) : 0;
}

/* ---- the kernel's view of a record ---------------------------------------------------------
 * Backends see ir_op (src/ir/ir.h): the kind, the parameters and a view of each tensor (its
 * first element, dtype, geometry and device), never the handles and their storage. */

void tn_view(const em_tensor *t, ir_tensor *v)
{
    v->data = (char *)t->storage->data + t->offset * (int64_t)em_dtype_size(t->dtype);
    v->dtype = t->dtype;
    v->rank = t->rank;
    memcpy(v->shape, t->shape, sizeof v->shape);
    memcpy(v->strides, t->strides, sizeof v->strides);
    v->device = t->storage->device;
}

/* k = op as a kernel sees it, its views in views[EM_OP_MAX_IN + EM_OP_MAX_OUT] (an absent
 * optional input stays NULL). */
static void kernel_op(const em_op *op, ir_op *k, ir_tensor *views)
{
    k->kind = op->kind;
    k->n_in = op->n_in;
    k->n_out = op->n_out;
    for (int i = 0; i < op->n_in; i++) {
        k->in[i] = NULL;
        if (op->in[i]) tn_view(op->in[i], k->in[i] = &views[i]);
    }
    for (int i = 0; i < op->n_out; i++) tn_view(op->out[i], k->out[i] = &views[EM_OP_MAX_IN + i]);
    k->p = op->p;
}

/* ---- CPU fallback ---------------------------------------------------------------------------
 * An op the device backend cannot run goes to the CPU when the config key cpu_fallback is on:
 * each input's whole storage is copied to the host and the record's views are pointed at those
 * copies (with the tensors' own geometry), the CPU backend runs the record, and each output's
 * storage is copied back. */

static bool fallback_enabled(void)
{
    return core_cfg_bool(CFG_CPU_FALLBACK);
}

/* A host copy of t's whole storage in *host, and view v moved onto it; `fetch` copies the
 * device bytes (outputs that cover their whole storage need no fetch). */
static em_status mirror_make(ir_tensor *v, void **host, const em_tensor *t, const em_backend *be,
                             bool fetch)
{
    *host = em_alloc(t->storage->nbytes ? t->storage->nbytes : 1);
    if (!*host) return em_last_status() != EM_OK ? em_last_status() : EM_ERR_OOM;
    v->data = (char *)*host + t->offset * (int64_t)em_dtype_size(t->dtype);
    v->device = EM_CPU;
    if (!fetch || t->storage->nbytes == 0) return EM_OK;
    return be->copy_to_host(t->storage->device.index, *host, t->storage->data, t->storage->nbytes);
}

static bool covers_storage(const em_tensor *t)
{
    return t->offset == 0 && tn_is_contiguous(t) &&
           (size_t)tn_numel(t) * em_dtype_size(t->dtype) == t->storage->nbytes;
}

static em_status run_on_cpu(const em_op *op, ir_op *k, const em_backend *be)
{
    static _Atomic bool logged[EM_OP_COUNT];
    if (!atomic_exchange(&logged[op->kind], true))
        em_log_msg("dispatch", EM_LOG_INFO,
                   "em_%s runs on the cpu (not supported by the %s backend)", em_op_name(op->kind),
                   be->name);
    void *in[EM_OP_MAX_IN] = {NULL}, *out[EM_OP_MAX_OUT] = {NULL};
    em_status st = EM_OK;
    for (int i = 0; i < op->n_in && st == EM_OK; i++)
        if (op->in[i]) st = mirror_make(k->in[i], &in[i], op->in[i], be, true);
    for (int i = 0; i < op->n_out && st == EM_OK; i++)
        st = mirror_make(k->out[i], &out[i], op->out[i], be, !covers_storage(op->out[i]));
    if (st == EM_OK && cpu_backend.supports(k))
        st = cpu_backend.exec(k);
    else if (st == EM_OK)
        st = em_error(EM_ERR_UNSUPPORTED, "em_%s: not supported by the %s backend nor the cpu",
                      em_op_name(op->kind), be->name);
    for (int i = 0; i < op->n_out && st == EM_OK; i++) {
        const em_tensor *o = op->out[i];
        if (o->storage->nbytes)
            st = be->copy_from_host(o->storage->device.index, o->storage->data, out[i],
                                    o->storage->nbytes);
    }
    for (int i = 0; i < op->n_in; i++) em_free(in[i]);
    for (int i = 0; i < op->n_out; i++) em_free(out[i]);
    if (st == EM_OK) atomic_fetch_add(&fallback_counts[op->kind], 1);
    return st;
}

bool tn_update_native(em_device dev)
{
    const em_backend *be = dev.backend != 0 ? em_backend_get(dev.backend) : NULL;
    return be && be->update;
}

em_status tn_update(em_device dev, const em_update *u)
{
    const em_backend *be = em_backend_get(dev.backend);
    if (!be || !be->update)
        return em_error(EM_ERR_INTERNAL, "update: device backend %d has no fused update",
                        dev.backend);
    return be->update(dev.index, u);
}

bool tn_persistent_enter(em_device dev)
{
    return em_backend_persistent_enter(dev);
}

void tn_persistent_leave(em_device dev)
{
    em_backend_persistent_leave(dev);
}

em_status tn_graph_param(em_device dev, size_t bytes, em_graph_fill fill, void (*drop)(void *ctx),
                         void *ctx, void **dptr)
{
    return em__graph_param(dev, bytes, fill, drop, ctx, dptr);
}

em_status tn_graph_refuse(em_device dev, em_status st)
{
    return em__graph_refuse(dev, st);
}

void tn_set_recorder(em_op_recorder fn, void *user)
{
    recorder_user = user;
    atomic_store_explicit(&recorder, fn, memory_order_release);
}

static _Atomic(em_record_query) record_query;

void tn_set_record_query(em_record_query fn)
{
    atomic_store_explicit(&record_query, fn, memory_order_release);
}

bool tn_would_record(em_tensor *const *in, int n_in)
{
    if (tn_lowering()) return false; /* a lowering's records are never recorded */
    em_record_query q = atomic_load_explicit(&record_query, memory_order_acquire);
    return q && q(in, n_in);
}

static void drop_outputs(em_op *op)
{
    for (int i = 0; i < op->n_out; i++) {
        em_release(op->out[i]);
        op->out[i] = NULL;
    }
}

/* Whether be runs k itself. Config lower_composites refuses every composite kind, so each runs
 * its lowering (a test of the lowerings on any backend). */
static bool claims(const em_backend *be, const ir_op *k)
{
    if (tn_has_lowering(k->kind) && core_cfg_bool(CFG_LOWER_COMPOSITES)) return false;
    return be->supports(k);
}

bool tn_supported(const em_op *op)
{
    em_device dev = op->n_in > 0 ? op->in[0]->storage->device : op->out[0]->storage->device;
    const em_backend *be = em_backend_get(dev.backend);
    if (!be) return false;
    ir_tensor views[EM_OP_MAX_IN + EM_OP_MAX_OUT];
    ir_op k;
    kernel_op(op, &k, views);
    return claims(be, &k);
}

em_tensor *tn_run_record(em_op *op, em_dtype dt, const int64_t *shape, int rank)
{
    op->n_out = 1;
    op->out[0] = tn_new(dt, shape, rank, op->in[0]->storage->device);
    return tn_dispatch(op) == EM_OK ? op->out[0] : NULL;
}

bool tn_run_fused2(em_op *op, const em_tensor *a, const em_tensor *b, em_tensor **out)
{
    *out = NULL;
    bool fits = em_dtype_is_float(a->dtype) && b->dtype == a->dtype &&
                em_shape_equal(em_tensor_shape(a), em_tensor_shape(b)) &&
                em_device_equal(b->storage->device, a->storage->device);
    if (!fits) return false;
    op->n_in = 2;
    op->in[0] = (em_tensor *)a, op->in[1] = (em_tensor *)b;
    *out = tn_run_record(op, a->dtype, a->shape, a->rank);
    return true;
}

em_status tn_dispatch(em_op *op)
{
    if (op->kind < 0 || op->kind >= EM_OP_COUNT) {
        drop_outputs(op);
        return em_error(EM_ERR_INTERNAL, "dispatch: invalid op kind %d", (int)op->kind);
    }
    for (int i = 0; i < op->n_out; i++) {
        if (!op->out[i]) {
            drop_outputs(op);
            return em_last_status() != EM_OK ? em_last_status()
                                             : em_error(EM_ERR_INTERNAL, "%s: output %d missing",
                                                        em_op_name(op->kind), i);
        }
    }
    /* the record has the arity its row of the op table says */
    assert(op->n_in >= ir_ops[op->kind].in_min && op->n_in <= ir_ops[op->kind].in_max);
    assert(op->n_out >= ir_ops[op->kind].out_min && op->n_out <= ir_ops[op->kind].out_max);
    atomic_fetch_add(&op_counts[op->kind], 1);
    bool is_view = ir_has(op->kind, IR_VIEW);
    if (!is_view) {
        em_device dev = op->n_in > 0 ? op->in[0]->storage->device : op->out[0]->storage->device;
        for (int i = 1; i < op->n_in; i++) {
            if (!op->in[i]) continue;
            if (!em_device_equal(op->in[i]->storage->device, dev)) {
                drop_outputs(op);
                char a[32], b[32];
                return em_error(EM_ERR_DEVICE, "em_%s: inputs on different devices (%s and %s)",
                                em_op_name(op->kind), em_device_str(dev, a, sizeof a),
                                em_device_str(op->in[i]->storage->device, b, sizeof b));
            }
        }
        const em_backend *be = em_backend_get(dev.backend);
        if (!be) {
            drop_outputs(op);
            return em_error(EM_ERR_DEVICE, "em_%s: no backend for device index %d",
                            em_op_name(op->kind), dev.backend);
        }
        ir_tensor views[EM_OP_MAX_IN + EM_OP_MAX_OUT];
        ir_op k;
        kernel_op(op, &k, views);
        /* a kind the backend does not claim lowers on the device where it has a lowering, else
           runs on the CPU where cpu_fallback allows */
        bool supported = claims(be, &k);
        bool lower = !supported && tn_has_lowering(op->kind);
        bool fallback = !supported && !lower && dev.backend != 0 && fallback_enabled();
        if (!supported && !lower && !fallback) {
            drop_outputs(op);
            return em_error(EM_ERR_UNSUPPORTED, "em_%s: not supported by the %s backend for %s",
                            em_op_name(op->kind), be->name,
                            em_dtype_name(op->n_in ? op->in[0]->dtype : op->out[0]->dtype));
        }
        bool prof = atomic_load(&profiling);
        int64_t t0 = prof ? core_mono_ns() : 0;
        em_status st = lower ? tn_lower(op) : fallback ? run_on_cpu(op, &k, be) : be->exec(&k);
        if (prof) {
            if (st == EM_OK && be->sync) st = be->sync(dev.index);
            int64_t ns = core_mono_ns() - t0;
            atomic_fetch_add(&prof_ns[op->kind], ns);
            atomic_fetch_add(&prof_n[op->kind], 1);
            if (atomic_load(&tracing)) trace_op(op, ns);
        }
        if (st != EM_OK) {
            drop_outputs(op);
            if (em_last_status() == EM_OK)
                em_error(st, "em_%s: the %s backend failed", em_op_name(op->kind), be->name);
            return em_last_status();
        }
    }
    /* a lowering's records are its composite record's business: only that one is recorded */
    em_op_recorder rec =
        tn_lowering() ? NULL : atomic_load_explicit(&recorder, memory_order_acquire);
    if (rec && !rec(op, recorder_user)) {
        drop_outputs(op);
        return em_last_status() != EM_OK
                   ? em_last_status()
                   : em_error(EM_ERR_INTERNAL, "em_%s: recording failed", em_op_name(op->kind));
    }
    return EM_OK;
}

em_tensor *tn_run(em_op_kind kind, em_tensor *out, em_tensor *const *in, int n_in,
                  const em_params *p)
{
    if (!out) return NULL;
    em_op op;
    memset(&op, 0, sizeof op);
    op.kind = kind;
    op.n_in = n_in;
    for (int i = 0; i < n_in; i++) op.in[i] = in[i];
    op.n_out = 1;
    op.out[0] = out;
    if (p) memcpy(&op.p, p, ir_ops[kind].param_size);
    if (tn_dispatch(&op) != EM_OK) return NULL;
    return op.out[0];
}
