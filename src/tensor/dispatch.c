/* The op IR's front door: every op record passes through tn_dispatch, which runs it on its
 * backend and offers it to the recorder (autodiff, capture). */
#include <stdatomic.h>
#include <string.h>

#include "../backend/backend.h"
#include "op.h"

static const char *const op_names[] = {
#define EM_OP_NAME(name, str, fam) str,
    EM_OP_LIST(EM_OP_NAME)
#undef EM_OP_NAME
};

static const char *const op_families[] = {
#define EM_OP_FAM(name, str, fam) #fam,
    EM_OP_LIST(EM_OP_FAM)
#undef EM_OP_FAM
};

static _Atomic int64_t op_counts[EM_OP_COUNT];
static em_op_recorder recorder;
static void *recorder_user;

const char *em_op_name(em_op_kind kind)
{
    return (kind >= 0 && kind < EM_OP_COUNT) ? op_names[kind] : "?";
}

const char *em_op_family(em_op_kind kind)
{
    return (kind >= 0 && kind < EM_OP_COUNT) ? op_families[kind] : "?";
}

int64_t tn_op_count(em_op_kind kind)
{
    return (kind >= 0 && kind < EM_OP_COUNT) ? atomic_load(&op_counts[kind]) : 0;
}

void tn_set_recorder(em_op_recorder fn, void *user)
{
    recorder = fn;
    recorder_user = user;
}

static void drop_outputs(em_op *op)
{
    for (int i = 0; i < op->n_out; i++) {
        em_release(op->out[i]);
        op->out[i] = NULL;
    }
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
    atomic_fetch_add(&op_counts[op->kind], 1);
    bool is_view = strcmp(op_families[op->kind], "view") == 0;
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
        if (!be->supports(op)) {
            drop_outputs(op);
            return em_error(EM_ERR_UNSUPPORTED, "em_%s: not supported by the %s backend for %s",
                            em_op_name(op->kind), be->name,
                            em_dtype_name(op->n_in ? op->in[0]->dtype : op->out[0]->dtype));
        }
        em_status st = be->exec(op);
        if (st != EM_OK) {
            drop_outputs(op);
            if (em_last_status() == EM_OK)
                em_error(st, "em_%s: the %s backend failed", em_op_name(op->kind), be->name);
            return em_last_status();
        }
    }
    if (recorder) recorder(op, recorder_user);
    return EM_OK;
}

em_tensor *tn_run1(em_op_kind kind, em_tensor *out, em_tensor *const *in, int n_in,
                   const int64_t *ip, int ni, const double *fp, int nf)
{
    if (!out) return NULL;
    em_op op;
    memset(&op, 0, sizeof op);
    op.kind = kind;
    op.n_in = n_in;
    for (int i = 0; i < n_in; i++) op.in[i] = in[i];
    op.n_out = 1;
    op.out[0] = out;
    for (int i = 0; i < ni; i++) op.i[i] = ip[i];
    for (int i = 0; i < nf; i++) op.f[i] = fp[i];
    if (tn_dispatch(&op) != EM_OK) return NULL;
    return op.out[0];
}
