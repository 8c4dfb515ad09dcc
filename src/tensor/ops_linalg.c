/* Linear algebra front-ends: em_matmul (torch.matmul semantics) and the rank-checked helpers
 * em_dot, em_outer and em_matvec built on it.
 * MATMUL records (in[0] = a, in[1] = b exactly as given, any strides; out[0] is the contiguous
 * result) carry em_p_matmul: a_vec / b_vec when that operand was 1-D (viewed as [1, K] or
 * [K, 1], the 1 removed from the result), M, K, N and the broadcast batch shape. The batch dims
 * of a and b are their leading dims, right-aligned against that shape.
 * MATMUL_BIAS_ACT (em_matmul_bias_act): the record of MATMUL with in[2] = bias when n_in == 3
 * (1-D, length N, any stride) and em_p_matmul's act; out[0] = act(a @ b + bias) and, only when
 * the record will be taken by autodiff and the activation is gelu, gelu_tanh or silu, out[1] =
 * the pre-activation a @ b + bias (the rule's input to act', saved instead of recomputed: one
 * more store in the forward against a whole product in the backward). A kind of its own rather
 * than optional MATMUL inputs: a backend, rule or pass that knows only MATMUL declines this
 * record (an error or the CPU fallback) instead of silently dropping the bias, and MATMUL
 * records that backends build for themselves stay as they are. */
#include <string.h>

#include "op.h"

/* Shared checks: both present, same device, same non-bool dtype. */
static bool check_pair(const char *op, const em_tensor *a, const em_tensor *b)
{
    if (!tn_check_ptr(op, a, "a") || !tn_check_ptr(op, b, "b")) return false;
    if (!tn_check_same_device(op, a, b)) return false;
    if (a->dtype != b->dtype) {
        em_error(EM_ERR_DTYPE, "%s: dtypes %s and %s differ (both operands need one dtype)", op,
                 em_dtype_name(a->dtype), em_dtype_name(b->dtype));
        return false;
    }
    if (a->dtype == EM_BOOL) {
        em_error(EM_ERR_DTYPE, "%s: dtype bool is not supported", op);
        return false;
    }
    return true;
}

/* Checks a @ b and fills the MATMUL parameters *mp and the result's shape; false on error. */
static bool matmul_plan(const char *op, const em_tensor *a, const em_tensor *b, em_p_matmul *mp,
                        int64_t *shape, int *rank)
{
    if (a->rank == 0 || b->rank == 0) {
        em_error(EM_ERR_SHAPE, "%s: both operands need at least 1 dim, got shapes %s and %s", op,
                 tn_dims_str(a->shape, a->rank), tn_dims_str(b->shape, b->rank));
        return false;
    }
    bool a1 = a->rank == 1, b1 = b->rank == 1;
    int64_t M = a1 ? 1 : a->shape[a->rank - 2];
    int64_t K = a->shape[a->rank - 1];
    int64_t Kb = b1 ? b->shape[0] : b->shape[b->rank - 2];
    int64_t N = b1 ? 1 : b->shape[b->rank - 1];
    if (K != Kb) {
        em_error(EM_ERR_SHAPE, "%s: shapes %s and %s do not fit (%lld != %lld)", op,
                 tn_dims_str(a->shape, a->rank), tn_dims_str(b->shape, b->rank), (long long)K,
                 (long long)Kb);
        return false;
    }
    int ra = a->rank > 2 ? a->rank - 2 : 0, rb = b->rank > 2 ? b->rank - 2 : 0;
    int R = ra > rb ? ra : rb;
    int64_t batch[EM_MAX_RANK];
    for (int d = 0; d < R; d++) {
        int da = d - (R - ra), db = d - (R - rb);
        int64_t x = da >= 0 ? a->shape[da] : 1, y = db >= 0 ? b->shape[db] : 1;
        if (x != y && x != 1 && y != 1) {
            em_error(EM_ERR_SHAPE,
                     "%s: batch dims of shapes %s and %s cannot broadcast (%lld vs %lld)", op,
                     tn_dims_str(a->shape, a->rank), tn_dims_str(b->shape, b->rank), (long long)x,
                     (long long)y);
            return false;
        }
        batch[d] = x == 1 ? y : x;
    }
    int r = 0;
    for (int d = 0; d < R; d++) shape[r++] = batch[d];
    if (!a1) shape[r++] = M;
    if (!b1) shape[r++] = N;
    *rank = r;
    *mp = (em_p_matmul){.a_vec = a1, .b_vec = b1, .M = M, .K = K, .N = N, .batch_rank = R};
    for (int d = 0; d < R; d++) mp->batch[d] = batch[d];
    return true;
}

static em_tensor *matmul_checked(const char *op, const em_tensor *a, const em_tensor *b)
{
    em_params p;
    int64_t shape[EM_MAX_RANK];
    int r;
    if (!matmul_plan(op, a, b, &p.matmul, shape, &r)) return NULL;
    em_tensor *in[2] = {(em_tensor *)a, (em_tensor *)b};
    return tn_run(EM_OP_MATMUL, tn_new_for(op, a->dtype, shape, r, a->storage->device), in, 2, &p);
}

em_tensor *em_matmul(const em_tensor *a, const em_tensor *b)
{
    if (!check_pair("em_matmul", a, b)) return NULL;
    return matmul_checked("em_matmul", a, b);
}

em_tensor *em_matmul_bias_act(const em_tensor *a, const em_tensor *b, const em_tensor *bias,
                              em_act act)
{
    const char *op = "em_matmul_bias_act";
    if (!check_pair(op, a, b)) return NULL;
    if (!em_dtype_is_float(a->dtype)) {
        em_error(EM_ERR_DTYPE, "%s: dtype %s is not supported (f64, f32, f16 or bf16)", op,
                 em_dtype_name(a->dtype));
        return NULL;
    }
    if ((int)act < EM_ACT_NONE || (int)act > EM_ACT_SILU) {
        em_error(EM_ERR_INVALID_ARG, "%s: activation code %d is not an em_act", op, (int)act);
        return NULL;
    }
    em_p_matmul mp;
    int64_t shape[EM_MAX_RANK];
    int r;
    if (!matmul_plan(op, a, b, &mp, shape, &r)) return NULL;
    int64_t N = mp.N;
    if (bias) {
        if (!tn_check_same_device(op, a, bias)) return NULL;
        if (bias->dtype != a->dtype) {
            em_error(EM_ERR_DTYPE, "%s: bias dtype %s differs from the operands' %s", op,
                     em_dtype_name(bias->dtype), em_dtype_name(a->dtype));
            return NULL;
        }
        if (bias->rank != 1 || bias->shape[0] != N) {
            em_error(EM_ERR_SHAPE, "%s: bias of shape %s, want [%lld] (the product's N)", op,
                     tn_dims_str(bias->shape, bias->rank), (long long)N);
            return NULL;
        }
    }
    mp.act = act;
    em_op rec;
    memset(&rec, 0, sizeof rec);
    rec.kind = EM_OP_MATMUL_BIAS_ACT;
    rec.n_in = bias ? 3 : 2;
    rec.in[0] = (em_tensor *)a;
    rec.in[1] = (em_tensor *)b;
    rec.in[2] = (em_tensor *)bias;
    rec.p.matmul = mp;
    bool keep_pre = (act == EM_ACT_GELU || act == EM_ACT_GELU_TANH || act == EM_ACT_SILU) &&
                    tn_would_record(rec.in, rec.n_in);
    rec.n_out = keep_pre ? 2 : 1;
    em_device dev = a->storage->device;
    rec.out[0] = tn_new_for(op, a->dtype, shape, r, dev);
    if (keep_pre) rec.out[1] = rec.out[0] ? tn_new_for(op, a->dtype, shape, r, dev) : NULL;
    if (!rec.out[0] || (keep_pre && !rec.out[1])) {
        em_release(rec.out[0]);
        return NULL;
    }
    if (tn_dispatch(&rec) != EM_OK) return NULL;
    em_release(rec.out[1]); /* the graph keeps its alias when it took the record */
    return rec.out[0];
}

em_tensor *em_dot(const em_tensor *a, const em_tensor *b)
{
    if (!check_pair("em_dot", a, b)) return NULL;
    if (a->rank != 1 || b->rank != 1) {
        em_error(EM_ERR_SHAPE, "em_dot: expected two 1-D tensors, got shapes %s and %s",
                 tn_dims_str(a->shape, a->rank), tn_dims_str(b->shape, b->rank));
        return NULL;
    }
    if (a->shape[0] != b->shape[0]) {
        em_error(EM_ERR_SHAPE, "em_dot: lengths %lld and %lld differ", (long long)a->shape[0],
                 (long long)b->shape[0]);
        return NULL;
    }
    return matmul_checked("em_dot", a, b);
}

em_tensor *em_matvec(const em_tensor *a, const em_tensor *x)
{
    if (!check_pair("em_matvec", a, x)) return NULL;
    if (a->rank != 2 || x->rank != 1) {
        em_error(EM_ERR_SHAPE,
                 "em_matvec: expected a 2-D matrix and a 1-D vector, got shapes %s "
                 "and %s",
                 tn_dims_str(a->shape, a->rank), tn_dims_str(x->shape, x->rank));
        return NULL;
    }
    return matmul_checked("em_matvec", a, x);
}

em_tensor *em_outer(const em_tensor *a, const em_tensor *b)
{
    if (!check_pair("em_outer", a, b)) return NULL;
    if (a->rank != 1 || b->rank != 1) {
        em_error(EM_ERR_SHAPE, "em_outer: expected two 1-D tensors, got shapes %s and %s",
                 tn_dims_str(a->shape, a->rank), tn_dims_str(b->shape, b->rank));
        return NULL;
    }
    /* [n] -> [n, 1] and [m] -> [1, m], then a K = 1 product */
    em_tensor *col = em_unsqueeze(a, 1);
    em_tensor *row = col ? em_unsqueeze(b, 0) : NULL;
    em_tensor *out = row ? matmul_checked("em_outer", col, row) : NULL;
    em_release(row);
    em_release(col);
    return out;
}
