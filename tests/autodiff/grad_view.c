/* Gradient checks for views (reshape, permute, slice, expand, flip, unfold) and the creation
 * ops with float inputs (tril, triu, contiguous, cast), first and second order. */
#include "grad.h"

typedef struct view_case {
    int which;
} view_case;

/* Several step-1 slices of x [2, 3, 4] (first-order passes join their gradients: one
 * concatenation where they are disjoint along one dim, with zeros in the gaps, else pads and
 * adds), squared and laid out in another order so a misplaced gradient shows. */
static em_tensor *slices(const em_tensor *x, int which)
{
    em_tensor *p[5] = {0};
    int n = 0;
    switch (which) {
    case 13: /* tiling dim 2 (q, k, v of one projection) */
        p[n++] = em_narrow(x, 2, 3, 1);
        p[n++] = em_narrow(x, 2, 0, 1);
        p[n++] = em_narrow(x, 2, 1, 2);
        break;
    case 14: /* gaps before, between and after */
        p[n++] = em_narrow(x, 2, 2, 1);
        p[n++] = em_narrow(x, 2, 1, 1);
        p[n++] = em_narrow(em_narrow(x, 1, 2, 1), 2, 0, 2); /* a slice of a slice */
        break;
    case 15: /* overlapping slices along one dim, and x itself */
        p[n++] = em_narrow(x, 1, 0, 2);
        p[n++] = em_narrow(x, 1, 1, 2);
        p[n++] = (em_tensor *)x;
        break;
    case 16: /* slices along two dims */
        p[n++] = em_narrow(x, 1, 1, 1);
        p[n++] = em_narrow(x, 2, 0, 3);
        p[n++] = em_narrow(x, 0, 1, 1);
        break;
    case 17: /* every column, through select (a slice, then a reshape) */
        for (int j = 3; j >= 0; j--) p[n++] = em_select(x, 2, j);
        break;
    }
    em_tensor *flat[5];
    for (int i = 0; i < n; i++) {
        em_tensor *f = em_flatten(p[i], 0, -1);
        flat[i] = em_mul_scalar(em_mul(f, f), i + 1.0);
    }
    return em_cat(flat, n, 0);
}

/* Each case multiplies by the input so second-order gradients are not trivially zero. */
static em_tensor *f_view(em_tensor *const *in, int n, void *ctx)
{
    const view_case *c = ctx;
    const em_tensor *x = in[0];
    em_tensor *v = NULL;
    if (c->which >= 13) return slices(x, c->which);
    switch (c->which) {
    case 0: v = em_reshape(x, EM_SHAPE(4, -1)); break;
    case 1: v = em_transpose(em_permute(x, EM_AXES(2, 0, 1)), 0, 2); break;
    case 2: v = em_slice(em_slice(x, 1, 1, 4, 2), 2, -3, 100, 1); break;
    case 3: v = em_expand(em_slice(x, 2, 0, 1, 1), EM_SHAPE(2, 2, 3, 4)); break;
    case 4: v = em_flip(x, EM_AXES(0, 2)); break;
    case 5: v = em_unfold(x, 2, 2, 1); break;
    case 6: v = em_select(em_narrow(x, 1, 1, 2), 0, -1); break;
    case 7: v = em_squeeze(em_unsqueeze(x, 1), EM_ALL); break;
    case 8: v = em_tril(em_reshape(x, EM_SHAPE(6, 4)), -1); break;
    case 9: v = em_triu(x, 1); break;
    case 10: v = em_contiguous(em_transpose(x, 0, 1)); break;
    case 11: v = em_cast(x, EM_F64); break; /* the rule; f32 round trips are too coarse here */
    case 12: v = em_unfold(x, 0, 1, 1); break;
    }
    if (!v) return NULL;
    return em_mul(v, v); /* second derivative 2 */
}

void grad_view(void)
{
    const int cases = 18;
    for (int c = 0; c < cases; c++)
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            em_scope_begin();
            em_tensor *x = g_in(EM_SHAPE(2, 3, 4), (h_layout)l, -2, 2);
            view_case vc = {c};
            char what[64];
            snprintf(what, sizeof what, "view case %d layout %d", c, l);
            h_gradcheck(what, f_view, &vc, &x, 1, NULL, 0, 0);
            if (l == 0) h_gradgradcheck(what, f_view, &vc, &x, 1, NULL, 0, 0);
            em_scope_end();
        }
}
