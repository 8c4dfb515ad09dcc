/* Binary elementwise ops: arithmetic, comparisons, logical and bitwise ops with NumPy
 * broadcasting and PyTorch dtype promotion, their scalar forms, and where, masked_fill, clamp
 * and lerp.
 *
 * Records and compute rules (kernels of every backend follow them; parameters in src/ir/ir.h):
 * ADD .. SHIFT_RIGHT: in[0], in[1] broadcast together; em_p_binary says which input is a wrapped
 *   scalar (a rank-0 tensor made from a C double by a *_scalar form). Arithmetic, bitwise and
 *   shift kinds convert both inputs to the
 *   output dtype and compute there (floats in double or the dtype itself, integers and bool in
 *   int64 arithmetic wrapped to the width). Comparisons compute in em_dtype_promote(in[0],
 *   in[1]) and give bool; logical kinds test each input for != 0 (NaN is true) and give bool.
 *   Wrapped scalars are f64 for arithmetic; for comparisons the scalar's dtype is chosen so
 *   that this promotion is the intended compare type (the tensor's float dtype, else i64 for an
 *   integral scalar, else f64).
 * WHERE: in[0] = cond (bool), in[1] = a, in[2] = b, three-way broadcast; result dtype
 *   promote(a, b).
 * MASKED_FILL: in[0] = x, in[1] = mask (bool, broadcasts to x), em_p_fill's value.
 * THRESHOLD_BACKWARD (tn_threshold_backward, internal: relu's backward rule): in[0] = g, in[1]
 *   = y, one float dtype and one shape, em_p_threshold t -> y <= t ? +0 : g (g's bits).
 * CLAMP (em_p_clamp): bounds = 0: in[0] = x, lo and hi scalars (NaN: no bound). Else bit 1 = a
 *   lower bound tensor is present, bit 2 = an upper one; in[] holds x then the present bounds,
 *   all broadcast together (a NaN in a bound tensor gives NaN, as PyTorch).
 * LERP: in[0] = a, in[1] = b, in[2] = w; em_p_lerp's w_scalar when w is a wrapped scalar (its
 *   value w); out = a + w * (b - a) for |w| < 0.5, else b - (b - a) * (1 - w). */
#include <math.h>
#include <string.h>

#include "op.h"

/* ---- shared checks ----------------------------------------------------------------------- */

static bool is_cmp(em_op_kind k)
{
    return ir_info_of(k)->dtype == IR_DT_COMPARE;
}

/* Result dtype of kind for inputs promoting to pt, by the kind's dtype rule in the op table;
 * false + EM_ERR_DTYPE when not allowed. */
static bool result_dtype(const char *name, em_op_kind k, em_dtype pt, em_dtype *out)
{
    bool fl = em_dtype_is_float(pt);
    *out = pt;
    switch (ir_info_of(k)->dtype) {
    case IR_DT_COMPARE:
    case IR_DT_LOGICAL: *out = EM_BOOL; return true;
    case IR_DT_PROMOTE_FLOAT:
        if (!fl) *out = EM_F32;
        return true;
    case IR_DT_PROMOTE_NUM:
        if (pt == EM_BOOL && k == EM_OP_SUB) {
            em_error(EM_ERR_DTYPE,
                     "%s: subtraction of two bool tensors is not supported (use "
                     "em_logical_xor)",
                     name);
            return false;
        }
        if (pt == EM_BOOL) {
            em_error(EM_ERR_DTYPE, "%s: dtype bool is not supported", name);
            return false;
        }
        return true;
    case IR_DT_BITWISE:
        if (fl) {
            em_error(EM_ERR_DTYPE, "%s: dtype %s is not supported (integers and bool only)", name,
                     em_dtype_name(pt));
            return false;
        }
        return true;
    case IR_DT_INT:
        if (!em_dtype_is_int(pt)) {
            em_error(EM_ERR_DTYPE, "%s: dtype %s is not supported (integers only)", name,
                     em_dtype_name(pt));
            return false;
        }
        return true;
    default: return true;
    }
}

em_tensor *tn_binary(const char *name, em_op_kind k, const em_tensor *a, const em_tensor *b)
{
    if (!tn_check_ptr(name, a, "a") || !tn_check_ptr(name, b, "b")) return NULL;
    if (!tn_check_same_device(name, a, b)) return NULL;
    int64_t shape[EM_MAX_RANK];
    int r;
    if (!tn_broadcast_shapes(name, a->shape, a->rank, b->shape, b->rank, shape, &r)) return NULL;
    em_dtype out;
    if (!result_dtype(name, k, em_dtype_promote(a->dtype, b->dtype), &out)) return NULL;
    em_tensor *in[2] = {(em_tensor *)a, (em_tensor *)b};
    return tn_run(k, tn_new_for(name, out, shape, r, a->storage->device), in, 2, NULL);
}

/* s is an integer that int64 holds exactly. */
static bool integral(double s)
{
    return isfinite(s) && floor(s) == s && fabs(s) < 9.2e18;
}

/* tensor (op) scalar, or scalar (op) tensor when `rev`. The scalar never widens the tensor's
 * category (PyTorch's wrapped-number rule): a float tensor keeps its dtype, an integer or
 * bool tensor keeps its dtype (bool -> i64) for an integral scalar and becomes f32 otherwise. */
static em_tensor *scalar_op(const char *name, em_op_kind k, const em_tensor *a, double s, bool rev)
{
    if (!tn_check_ptr(name, a, "a")) return NULL;
    em_dtype dt = a->dtype, out, sdt;
    bool fl = em_dtype_is_float(dt);
    if (is_cmp(k)) {
        out = EM_BOOL;
        sdt = fl ? dt : integral(s) ? EM_I64 : EM_F64;
    } else {
        em_dtype pt = fl ? dt : !integral(s) ? EM_F32 : dt == EM_BOOL ? EM_I64 : dt;
        if (!result_dtype(name, k, pt, &out)) return NULL;
        if (k == EM_OP_POW && !rev && !em_dtype_is_float(out) && s < 0) {
            em_error(EM_ERR_INVALID_ARG,
                     "%s: integers to negative integer powers are not allowed (exponent %g)", name,
                     s);
            return NULL;
        }
        sdt = EM_F64;
    }
    em_tensor *sc = em_full(EM_SCALAR, s, sdt, a->storage->device);
    if (!sc) return NULL;
    em_tensor *in[2] = {rev ? sc : (em_tensor *)a, rev ? (em_tensor *)a : sc};
    em_params p = {.binary = {.scalar_in = rev ? 1 : 2}};
    em_tensor *o =
        tn_run(k, tn_new_for(name, out, a->shape, a->rank, a->storage->device), in, 2, &p);
    em_release(sc);
    return o;
}

/* ---- tensor (op) tensor ------------------------------------------------------------------ */

/* The em_ functions of the kinds above are generated from the op table (build/gen/ops_gen.c). */

/* ---- scalar forms ------------------------------------------------------------------------ */

#define SCALAR(fn, KIND, rev)                                                                      \
    em_tensor *em_##fn(const em_tensor *a, double s)                                               \
    {                                                                                              \
        return scalar_op("em_" #fn, EM_OP_##KIND, a, s, rev);                                      \
    }

SCALAR(add_scalar, ADD, false)
SCALAR(sub_scalar, SUB, false)
SCALAR(rsub_scalar, SUB, true)
SCALAR(mul_scalar, MUL, false)
SCALAR(div_scalar, DIV, false)
SCALAR(rdiv_scalar, DIV, true)
SCALAR(pow_scalar, POW, false)
SCALAR(rpow_scalar, POW, true)
SCALAR(remainder_scalar, REMAINDER, false)
SCALAR(fmod_scalar, FMOD, false)
SCALAR(minimum_scalar, MINIMUM, false)
SCALAR(maximum_scalar, MAXIMUM, false)
SCALAR(eq_scalar, EQ, false)
SCALAR(ne_scalar, NE, false)
SCALAR(lt_scalar, LT, false)
SCALAR(le_scalar, LE, false)
SCALAR(gt_scalar, GT, false)
SCALAR(ge_scalar, GE, false)

/* ---- where, masked_fill, clamp, lerp ----------------------------------------------------- */

em_tensor *em_where(const em_tensor *cond, const em_tensor *a, const em_tensor *b)
{
    const char *name = "em_where";
    if (!tn_check_ptr(name, cond, "cond") || !tn_check_ptr(name, a, "a") ||
        !tn_check_ptr(name, b, "b"))
        return NULL;
    if (!tn_check_same_device(name, cond, a) || !tn_check_same_device(name, cond, b)) return NULL;
    if (cond->dtype != EM_BOOL) {
        em_error(EM_ERR_DTYPE, "%s: cond must be bool, got %s", name, em_dtype_name(cond->dtype));
        return NULL;
    }
    int64_t s1[EM_MAX_RANK], s2[EM_MAX_RANK];
    int r1, r2;
    if (!tn_broadcast_shapes(name, cond->shape, cond->rank, a->shape, a->rank, s1, &r1) ||
        !tn_broadcast_shapes(name, s1, r1, b->shape, b->rank, s2, &r2))
        return NULL;
    em_tensor *in[3] = {(em_tensor *)cond, (em_tensor *)a, (em_tensor *)b};
    em_dtype out = em_dtype_promote(a->dtype, b->dtype);
    return tn_run(EM_OP_WHERE, tn_new_for(name, out, s2, r2, a->storage->device), in, 3, NULL);
}

em_tensor *em_masked_fill(const em_tensor *x, const em_tensor *mask, double value)
{
    const char *name = "em_masked_fill";
    if (!tn_check_ptr(name, x, "x") || !tn_check_ptr(name, mask, "mask")) return NULL;
    if (!tn_check_same_device(name, x, mask)) return NULL;
    if (mask->dtype != EM_BOOL) {
        em_error(EM_ERR_DTYPE, "%s: mask must be bool, got %s", name, em_dtype_name(mask->dtype));
        return NULL;
    }
    int64_t s[EM_MAX_RANK];
    int r;
    if (!tn_broadcast_shapes(name, x->shape, x->rank, mask->shape, mask->rank, s, &r)) return NULL;
    bool same = r == x->rank;
    for (int d = 0; same && d < r; d++) same = s[d] == x->shape[d];
    if (!same) {
        em_error(EM_ERR_SHAPE, "%s: mask of shape %s does not broadcast to x's shape %s", name,
                 tn_dims_str(mask->shape, mask->rank), tn_dims_str(x->shape, x->rank));
        return NULL;
    }
    em_tensor *in[2] = {(em_tensor *)x, (em_tensor *)mask};
    em_params p = {.fill = {.value = value}};
    return tn_run(EM_OP_MASKED_FILL,
                  tn_new_for(name, x->dtype, x->shape, x->rank, x->storage->device), in, 2, &p);
}

/* A bound that leaves an integer tensor's dtype alone: none, integral, or infinite on the
 * side where it bounds nothing. */
static bool int_bound(double v, bool lower)
{
    return isnan(v) || integral(v) || (lower ? v == -INFINITY : v == INFINITY);
}

em_tensor *em_clamp(const em_tensor *x, double lo, double hi)
{
    const char *name = "em_clamp";
    if (!tn_check_ptr(name, x, "x")) return NULL;
    if (x->dtype == EM_BOOL) {
        em_error(EM_ERR_DTYPE, "%s: dtype bool is not supported", name);
        return NULL;
    }
    em_dtype out = x->dtype;
    if (!em_dtype_is_float(out) && !(int_bound(lo, true) && int_bound(hi, false))) out = EM_F32;
    em_tensor *in[1] = {(em_tensor *)x};
    em_params p = {.clamp = {.bounds = 0, .lo = lo, .hi = hi}};
    return tn_run(EM_OP_CLAMP, tn_new_for(name, out, x->shape, x->rank, x->storage->device), in, 1,
                  &p);
}

em_tensor *em_clamp_tensor(const em_tensor *x, const em_tensor *lo, const em_tensor *hi)
{
    const char *name = "em_clamp_tensor";
    if (!tn_check_ptr(name, x, "x")) return NULL;
    if (!lo && !hi) {
        em_error(EM_ERR_INVALID_ARG, "%s: at least one of `lo` and `hi` must be given", name);
        return NULL;
    }
    em_tensor *in[3] = {(em_tensor *)x};
    int n = 1;
    int flags = 0;
    if (lo) in[n++] = (em_tensor *)lo, flags |= 1;
    if (hi) in[n++] = (em_tensor *)hi, flags |= 2;
    int64_t s[EM_MAX_RANK];
    int r = x->rank;
    for (int d = 0; d < r; d++) s[d] = x->shape[d];
    em_dtype out = x->dtype;
    for (int k = 1; k < n; k++) {
        if (!tn_check_same_device(name, x, in[k])) return NULL;
        int64_t t[EM_MAX_RANK];
        int rt;
        if (!tn_broadcast_shapes(name, s, r, in[k]->shape, in[k]->rank, t, &rt)) return NULL;
        for (int d = 0; d < rt; d++) s[d] = t[d];
        r = rt;
        out = em_dtype_promote(out, in[k]->dtype);
    }
    if (out == EM_BOOL) {
        em_error(EM_ERR_DTYPE, "%s: dtype bool is not supported", name);
        return NULL;
    }
    em_params p = {.clamp = {.bounds = flags}};
    return tn_run(EM_OP_CLAMP, tn_new_for(name, out, s, r, x->storage->device), in, n, &p);
}

static em_tensor *lerp(const char *name, const em_tensor *a, const em_tensor *b, const em_tensor *w,
                       bool w_tensor, double ws)
{
    if (!tn_check_ptr(name, a, "a") || !tn_check_ptr(name, b, "b")) return NULL;
    if (w_tensor && !tn_check_ptr(name, w, "w")) return NULL;
    if (!tn_check_same_device(name, a, b)) return NULL;
    if (!em_dtype_is_float(a->dtype) || !em_dtype_is_float(b->dtype) ||
        (w && !em_dtype_is_float(w->dtype))) {
        em_error(EM_ERR_DTYPE, "%s: floating-point inputs required, got %s, %s and %s", name,
                 em_dtype_name(a->dtype), em_dtype_name(b->dtype),
                 w ? em_dtype_name(w->dtype) : "a scalar");
        return NULL;
    }
    if (w && !tn_check_same_device(name, a, w)) return NULL;
    int64_t s1[EM_MAX_RANK], s2[EM_MAX_RANK];
    int r1, r2;
    if (!tn_broadcast_shapes(name, a->shape, a->rank, b->shape, b->rank, s1, &r1)) return NULL;
    em_dtype out = em_dtype_promote(a->dtype, b->dtype);
    em_tensor *wt = (em_tensor *)w;
    if (w) {
        if (!tn_broadcast_shapes(name, s1, r1, w->shape, w->rank, s2, &r2)) return NULL;
        out = em_dtype_promote(out, w->dtype);
    } else {
        for (int d = 0; d < r1; d++) s2[d] = s1[d];
        r2 = r1;
        wt = em_full(EM_SCALAR, ws, EM_F64, a->storage->device);
        if (!wt) return NULL;
    }
    em_tensor *in[3] = {(em_tensor *)a, (em_tensor *)b, wt};
    em_params p = {.lerp = {.w_scalar = w == NULL, .w = w ? 0 : ws}};
    em_tensor *o = tn_run(EM_OP_LERP, tn_new_for(name, out, s2, r2, a->storage->device), in, 3, &p);
    if (!w) em_release(wt);
    return o;
}

em_tensor *em_lerp(const em_tensor *a, const em_tensor *b, double w)
{
    return lerp("em_lerp", a, b, NULL, false, w);
}

em_tensor *em_lerp_tensor(const em_tensor *a, const em_tensor *b, const em_tensor *w)
{
    return lerp("em_lerp_tensor", a, b, w, true, 0);
}

em_tensor *tn_threshold_backward(const em_tensor *g, const em_tensor *y, double t)
{
    const char *fn = "threshold_backward";
    if (!tn_check_ptr(fn, g, "g") || !tn_check_ptr(fn, y, "y")) return NULL;
    em_op op;
    memset(&op, 0, sizeof op);
    op.kind = EM_OP_THRESHOLD_BACKWARD;
    op.p.threshold.threshold = t;
    em_tensor *out;
    if (tn_run_fused2(&op, g, y, &out)) return out;
    em_scope_begin();
    em_tensor *r = em_keep(em_masked_fill(g, em_le_scalar(y, t), 0.0));
    em_scope_end();
    return r;
}
