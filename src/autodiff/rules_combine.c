/* Backward rules for the combine family: cat (slices of the gradient), repeat (sum over the
 * tiles), roll (roll back) and pad (crop for constant padding; the adjoint gather for reflect,
 * replicate and circular). */
#include <stdlib.h>

#include "../ir/decode.h"
#include "autodiff_impl.h"

/* cat: input i receives the slice of g along dim where it was placed. The engine casts each
 * slice to its input's dtype (inputs of mixed dtypes were promoted). */
static void cat_backward(ad_ctx *c, em_tensor *g)
{
    int dim = c->op->p.dim.dim;
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
    int r = op->p.repeat.rank, lead = r - in.rank;
    em_shape cur = em_tensor_shape(g);
    em_tensor *acc = g;
    for (int d = 0; d < r && acc; d++) {
        int64_t reps = op->p.repeat.reps[d];
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
    int n = op->p.roll.n;
    if (n == 0) return g; /* a scalar: nothing moved */
    int64_t shifts[EM_MAX_RANK];
    for (int k = 0; k < n; k++) shifts[k] = -op->p.roll.shifts[k];
    return em_roll(g, shifts, op->p.roll.dims, n);
}

/* pad: constant padding is undone by padding g with the negated pads (crops what was added,
 * zero-fills what was cropped). The other modes gather each output dim from the input dim
 * independently (out = index_select(x, d, src_d) per dim), so the adjoint index_adds g back
 * into zeros one padded dim at a time. */
static em_tensor *pad_backward(ad_ctx *c, em_tensor *g)
{
    const em_op *op = c->op;
    em_pad_mode mode = op->p.pad.mode;
    int pairs = op->p.pad.n_pairs;
    if (mode == EM_PAD_CONSTANT) {
        int64_t neg[2 * EM_MAX_RANK];
        for (int k = 0; k < 2 * pairs; k++) neg[k] = -op->p.pad.pads[k];
        return em_pad(g, neg, pairs, EM_PAD_CONSTANT, 0.0);
    }
    em_shape in = ad_in_shape(c, 0);
    em_tensor *acc = g;
    for (int k = 0; k < pairs && acc; k++) {
        int d = in.rank - 1 - k;
        int64_t lo = op->p.pad.pads[2 * k], hi = op->p.pad.pads[2 * k + 1], n = in.dims[d];
        if (lo == 0 && hi == 0) continue;
        em_shape s = em_tensor_shape(acc);
        int64_t len = s.dims[d];
        int64_t *src = malloc((size_t)(len > 0 ? len : 1) * sizeof *src);
        if (!src) {
            em_error(EM_ERR_OOM, "pad backward: out of memory");
            return NULL;
        }
        for (int64_t j = 0; j < len; j++) src[j] = ir_pad_src(mode, j - lo, n);
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
