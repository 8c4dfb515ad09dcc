/* Backward rules for the combine family: cat (slices of the gradient), repeat (sum over the
 * tiles), roll (roll back) and pad (crop for constant padding; the adjoint gather for reflect,
 * replicate and circular). */
#include <stdlib.h>

#include "autodiff_impl.h"

/* cat: input i receives the slice of g along dim where it was placed. The engine casts each
 * slice to its input's dtype (inputs of mixed dtypes were promoted). */
static void cat_backward(ad_ctx *c, em_tensor *g)
{
    int dim = (int)c->op->i[0];
    int64_t start = 0;
    for (int i = 0; i < c->op->n_in; i++) {
        int64_t len = ad_in_shape(c, i).dims[dim];
        if (c->needs[i]) c->gin[i] = em_narrow(g, dim, start, len);
        start += len;
    }
}

/* repeat: output dim d holds reps[d] tiles of the (aligned) input dim; view each such dim as
 * [before, reps, size, after] and sum the tile axis. */
static em_tensor *repeat_backward(ad_ctx *c, em_tensor *g)
{
    const em_op *op = c->op;
    em_shape in = ad_in_shape(c, 0);
    int r = (int)op->i[0], lead = r - in.rank;
    em_shape cur = em_tensor_shape(g);
    em_tensor *acc = g;
    for (int d = 0; d < r && acc; d++) {
        int64_t reps = op->i[1 + d];
        if (reps == 1) continue;
        int64_t size = d < lead ? 1 : in.dims[d - lead], before = 1, after = 1;
        for (int e = 0; e < d; e++) before *= cur.dims[e];
        for (int e = d + 1; e < r; e++) after *= cur.dims[e];
        em_tensor *v = em_reshape(acc, EM_SHAPE(before, reps, size, after));
        em_tensor *s = v ? em_sum(v, EM_AXES(1), false) : NULL;
        cur.dims[d] = size;
        acc = s ? em_reshape(s, cur) : NULL;
    }
    return acc ? em_reshape(acc, in) : NULL;
}

static em_tensor *roll_backward(ad_ctx *c, em_tensor *g)
{
    const em_op *op = c->op;
    int n = (int)op->i[0];
    if (n == 0) return g; /* a scalar: nothing moved */
    int64_t shifts[2 * 2 * EM_MAX_RANK];
    int dims[2 * 2 * EM_MAX_RANK];
    for (int k = 0; k < n; k++) {
        dims[k] = (int)op->i[1 + 2 * k];
        shifts[k] = -op->i[2 + 2 * k];
    }
    return em_roll(g, shifts, dims, n);
}

/* Index (into the input dim of size n) that output position j read, as the forward kernel
 * maps it for reflect, replicate and circular padding with `lo` elements before. */
static int64_t pad_src(em_pad_mode mode, int64_t j, int64_t lo, int64_t n)
{
    int64_t k = j - lo;
    if (k >= 0 && k < n) return k;
    switch (mode) {
    case EM_PAD_REFLECT:
        if (k < 0) k = -k;
        if (k >= n) k = 2 * (n - 1) - k;
        return k;
    case EM_PAD_REPLICATE: return k < 0 ? 0 : n - 1;
    default: {
        int64_t m = k % n;
        return m < 0 ? m + n : m;
    }
    }
}

/* pad: constant padding is undone by padding g with the negated pads (crops what was added,
 * zero-fills what was cropped). The other modes gather each output dim from the input dim
 * independently (out = index_select(x, d, src_d) per dim), so the adjoint index_adds g back
 * into zeros one padded dim at a time. */
static em_tensor *pad_backward(ad_ctx *c, em_tensor *g)
{
    const em_op *op = c->op;
    em_pad_mode mode = (em_pad_mode)op->i[0];
    int pairs = (int)op->i[1];
    if (mode == EM_PAD_CONSTANT) {
        int64_t neg[2 * EM_MAX_RANK];
        for (int k = 0; k < 2 * pairs; k++) neg[k] = -op->i[2 + k];
        return em_pad(g, neg, pairs, EM_PAD_CONSTANT, 0.0);
    }
    em_shape in = ad_in_shape(c, 0);
    em_tensor *acc = g;
    for (int k = 0; k < pairs && acc; k++) {
        int d = in.rank - 1 - k;
        int64_t lo = op->i[2 + 2 * k], hi = op->i[3 + 2 * k], n = in.dims[d];
        if (lo == 0 && hi == 0) continue;
        em_shape s = em_tensor_shape(acc);
        int64_t len = s.dims[d];
        int64_t *src = malloc((size_t)(len > 0 ? len : 1) * sizeof *src);
        if (!src) {
            em_error(EM_ERR_OOM, "pad backward: out of memory");
            return NULL;
        }
        for (int64_t j = 0; j < len; j++) src[j] = pad_src(mode, j, lo, n);
        em_tensor *idx_host = em_from_i64(src, EM_SHAPE(len));
        free(src);
        em_tensor *idx = idx_host ? em_to_device(idx_host, em_tensor_device(g)) : NULL;
        s.dims[d] = n;
        em_tensor *z = ad_zero_base(s, g);
        acc = idx && z ? tn_index_add_inrange(z, d, idx, acc, 1.0) : NULL;
    }
    return acc;
}

em_status ad_rule_combine(ad_ctx *c)
{
    em_tensor *g = ad_gout(c, 0);
    if (!g) return em_last_status();
    switch (c->op->kind) {
    case EM_OP_CAT: cat_backward(c, g); break;
    case EM_OP_REPEAT:
        if (c->needs[0]) c->gin[0] = repeat_backward(c, g);
        break;
    case EM_OP_ROLL:
        if (c->needs[0]) c->gin[0] = roll_backward(c, g);
        break;
    case EM_OP_PAD:
        if (c->needs[0]) c->gin[0] = pad_backward(c, g);
        break;
    default: return ad_no_rule(c);
    }
    return ad_status(c);
}
