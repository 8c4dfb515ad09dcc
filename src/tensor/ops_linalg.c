/* Linear algebra front-ends: em_matmul (torch.matmul semantics) and the rank-checked helpers
 * em_dot, em_outer and em_matvec built on it.
 * IR parameters of MATMUL (in[0] = a, in[1] = b exactly as given, any strides; out[0] is the
 * contiguous result): i0 = 1 when a was 1-D (viewed as [1, K], the 1 removed from the result),
 * i1 = 1 when b was 1-D (viewed as [K, 1], the 1 removed), i2 = M, i3 = K, i4 = N,
 * i5 = R the number of broadcast batch dims, i6 .. i6+R-1 the broadcast batch shape. The
 * batch dims of a and b are their leading dims, right-aligned against that shape. */
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

static em_tensor *matmul_checked(const char *op, const em_tensor *a, const em_tensor *b)
{
    if (a->rank == 0 || b->rank == 0) {
        em_error(EM_ERR_SHAPE, "%s: both operands need at least 1 dim, got shapes %s and %s", op,
                 tn_dims_str(a->shape, a->rank), tn_dims_str(b->shape, b->rank));
        return NULL;
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
        return NULL;
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
            return NULL;
        }
        batch[d] = x == 1 ? y : x;
    }
    int64_t shape[EM_MAX_RANK];
    int r = 0;
    for (int d = 0; d < R; d++) shape[r++] = batch[d];
    if (!a1) shape[r++] = M;
    if (!b1) shape[r++] = N;
    int64_t ip[6 + EM_MAX_RANK] = {a1, b1, M, K, N, R};
    for (int d = 0; d < R; d++) ip[6 + d] = batch[d];
    em_tensor *in[2] = {(em_tensor *)a, (em_tensor *)b};
    return tn_run1(EM_OP_MATMUL, tn_new(a->dtype, shape, r, a->storage->device), in, 2, ip, 6 + R,
                   NULL, 0);
}

em_tensor *em_matmul(const em_tensor *a, const em_tensor *b)
{
    if (!check_pair("em_matmul", a, b)) return NULL;
    return matmul_checked("em_matmul", a, b);
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
