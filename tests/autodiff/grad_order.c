/* Gradient checks for the ordering family: sort, topk and median route the gradient of the
 * values back through the indices. Inputs hold well-separated distinct values so central
 * differences never swap two elements. */

#include "grad.h"

/* Random permutation of -2 + 0.15 k (k < numel) plus a little noise, in a layout. */
static em_tensor *distinct(em_shape s, h_layout l)
{
    int64_t n = 1;
    for (int d = 0; d < s.rank; d++) n *= s.dims[d];
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t k = 0; k < n; k++) v[k] = -2 + 0.15 * (double)k + 0.05 * h_uniform();
    for (int64_t k = n - 1; k > 0; k--) {
        int64_t j = (int64_t)(h_uniform() * (double)(k + 1));
        if (j > k) j = k;
        double t = v[k];
        v[k] = v[j];
        v[j] = t;
    }
    em_tensor *t = h_from_values(v, s, EM_F64, l);
    free(v);
    return t;
}

typedef enum order_kind { SORT, TOPK, MEDIAN, MEDIAN_FLAT } order_kind;

typedef struct order_case {
    order_kind kind;
    int dim;
    int64_t k;    /* topk */
    bool flag;    /* descending / largest / keepdim */
    bool indices; /* also ask for the indices (they carry no gradient) */
    em_shape shape;
} order_case;

/* values * (1 + position weight): the weight makes the result depend on the order, the product
 * keeps second derivatives non-zero. */
static em_tensor *f_order(em_tensor *const *in, int n, void *ctx)
{
    (void)n;
    const order_case *c = ctx;
    em_tensor *v = NULL, *idx = NULL;
    em_tensor **pi = c->indices ? &idx : NULL;
    em_status st = EM_OK;
    switch (c->kind) {
    case SORT: st = em_sort(in[0], c->dim, c->flag, &v, pi); break;
    case TOPK: st = em_topk(in[0], c->k, c->dim, c->flag, &v, pi); break;
    case MEDIAN: st = em_median(in[0], c->dim, c->flag, &v, pi); break;
    case MEDIAN_FLAT: st = em_median(in[0], EM_FLAT, false, &v, pi); break;
    }
    if (st != EM_OK || !v) return NULL;
    em_release(idx);
    em_tensor *r = em_mul(v, em_add_scalar(em_mul_scalar(v, 0.5), 1.0));
    em_release(v);
    return r;
}

void grad_order(void)
{
    const order_case cases[] = {
        {SORT, 1, 0, false, false, EM_SHAPE(3, 5)},
        {SORT, 0, 0, true, true, EM_SHAPE(4, 3)},
        {SORT, -1, 0, true, false, EM_SHAPE(2, 2, 4)},
        {SORT, 0, 0, false, false, EM_SHAPE(7)},
        {SORT, 0, 0, false, false, EM_SCALAR},
        {TOPK, 1, 2, true, true, EM_SHAPE(3, 5)},
        {TOPK, 0, 3, false, false, EM_SHAPE(4, 3)},
        {TOPK, -1, 4, true, false, EM_SHAPE(2, 2, 4)},
        {TOPK, 1, 0, true, false, EM_SHAPE(3, 5)},
        {TOPK, 0, 1, true, false, EM_SCALAR},
        {MEDIAN, 1, 0, false, true, EM_SHAPE(3, 5)},
        {MEDIAN, 0, 0, true, false, EM_SHAPE(4, 3)},
        {MEDIAN, 2, 0, false, false, EM_SHAPE(2, 3, 4)},
        {MEDIAN, 0, 0, true, false, EM_SCALAR},
        {MEDIAN_FLAT, 0, 0, false, true, EM_SHAPE(3, 4)},
        {MEDIAN_FLAT, 0, 0, false, false, EM_SHAPE(2, 2, 3)},
    };
    const int nc = (int)(sizeof cases / sizeof cases[0]);
    for (int c = 0; c < nc; c++)
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            em_scope_begin();
            em_tensor *x = distinct(cases[c].shape, (h_layout)l);
            char what[64];
            snprintf(what, sizeof what, "order case %d layout %d", c, l);
            h_gradcheck(what, f_order, (void *)&cases[c], &x, 1, NULL, 0, 0);
            if (l == 0) h_gradgradcheck(what, f_order, (void *)&cases[c], &x, 1, NULL, 0, 0);
            em_scope_end();
        }

    /* f32: the gradient keeps the dtype; each selected element gets exactly its seed */
    em_scope_begin();
    float xs[6] = {3, 1, 2, 6, 5, 4};
    em_tensor *x = em_requires_grad(h_from_f32(xs, EM_SHAPE(2, 3)), true);
    em_tensor *v = NULL;
    em_topk(x, 2, 1, true, &v, NULL);
    float ws[4] = {1, 10, 100, 1000};
    em_tensor *l = v ? em_sum(em_mul(v, h_from_f32(ws, EM_SHAPE(2, 2))), EM_ALL, false) : NULL;
    em_grads *g = l ? em_backward(l) : NULL;
    em_tensor *gx = g ? em_grad(g, x) : NULL;
    CHECK(gx && em_tensor_dtype(gx) == EM_F32, "topk: f32 input gets an f32 gradient");
    if (gx) {
        double e[] = {1, 0, 10, 100, 1000, 0};
        h_check_tensor("topk f32 gradient", gx, e, EM_SHAPE(2, 3), 0, 0);
    }
    em_release(gx);
    em_release(v);
    CHECK_OK("topk f32");
    em_scope_end();
}
