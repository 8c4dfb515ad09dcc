/* Gradient checks for the index family: gather, scatter (every reduce mode, rank-0 and larger
 * src, duplicate indices), index_select, index_add, masked_select (both sides broadcast),
 * slice_assign (broadcast src) and embedding, first order over every layout and second order;
 * f32 gradients keep their dtype. */
#include "grad.h"

enum { GATHER, SCATTER, INDEX_SELECT, INDEX_ADD, MASKED_SELECT, SLICE_ASSIGN, EMBEDDING };

typedef struct ix_case {
    const char *name;
    int op;
    em_shape x;
    bool has_src; /* a float second input (scatter, index_add, slice_assign) */
    em_shape src;
    int dim;
    em_reduce_mode mode;
    double alpha;
    const int64_t *index; /* index values (or 0/1 mask values), row-major */
    em_shape is;          /* index (mask) shape */
    bool index_t;         /* index given transposed (non-contiguous) */
    int64_t st[3], en[3], sp[3];
    bool square; /* f = y * y (second order not trivially zero) */
} ix_case;

typedef struct ix_ctx {
    const ix_case *c;
    em_tensor *index;
} ix_ctx;

static em_tensor *f_ix(em_tensor *const *in, int n, void *ctx)
{
    (void)n;
    const ix_ctx *k = ctx;
    const ix_case *c = k->c;
    em_tensor *x = in[0], *s = n > 1 ? in[1] : NULL, *y = NULL;
    switch (c->op) {
    case GATHER: y = em_gather(x, c->dim, k->index); break;
    case SCATTER: y = em_scatter(x, c->dim, k->index, s, c->mode); break;
    case INDEX_SELECT: y = em_index_select(x, c->dim, k->index); break;
    case INDEX_ADD: y = em_index_add(x, c->dim, k->index, s, c->alpha); break;
    case MASKED_SELECT: y = em_masked_select(x, k->index); break;
    case SLICE_ASSIGN: y = em_slice_assign(x, c->st, c->en, c->sp, s); break;
    case EMBEDDING: y = em_embedding(x, k->index); break;
    }
    return c->square ? em_mul(y, y) : y;
}

static em_tensor *make_index(const ix_case *c)
{
    if (c->op == MASKED_SELECT) {
        em_tensor *m = em_from_data(c->index, EM_I64, c->is, EM_BOOL, h_dev);
        return m;
    }
    if (!c->index_t) return em_from_data(c->index, EM_I64, c->is, EM_I32, h_dev);
    /* the values stored transposed, then viewed back to c->is */
    em_shape ts = c->is;
    ts.dims[0] = c->is.dims[1];
    ts.dims[1] = c->is.dims[0];
    int64_t v[64];
    for (int64_t i = 0; i < c->is.dims[0]; i++)
        for (int64_t j = 0; j < c->is.dims[1]; j++)
            v[j * c->is.dims[0] + i] = c->index[i * c->is.dims[1] + j];
    return em_transpose(h_from_i64(v, ts), 0, 1);
}

/* A float input of shape s for case c. Scatter mul gets exact zeros in x and src (the
 * function is multilinear there, so central differences stay valid). */
static em_tensor *make_float(const ix_case *c, em_shape s, h_layout l, bool is_src)
{
    if (c->op == SCATTER && c->mode == EM_SCATTER_MUL && s.rank == 2) {
        double v[64];
        int64_t m = em_shape_numel(s);
        for (int64_t i = 0; i < m; i++) v[i] = 0.5 + h_uniform();
        if (is_src) {
            v[0] = 0; /* a single zero among the values sent to one position */
        } else {
            v[2] = 0; /* x[0][2] is 0 */
        }
        return h_from_values(v, s, EM_F64, l);
    }
    return g_in(s, l, -1.5, 1.5);
}

/* Index values shared by several cases. */
static const int64_t idx_34_d1[] = {1, 3, 1, 0, 2, 2};       /* [2, 3] into dim 1 of size 4 */
static const int64_t idx_34_d0[] = {2, 0, 1, 2, 0, 2, 2, 1}; /* [2, 4] into dim 0 of size 3 */
static const int64_t idx_uniq_d1[] = {1, 3, 0, 0, 2, 3};     /* [2, 3], no duplicate per row */
static const int64_t idx_sel[] = {3, 0, 3, 1, 2};            /* [5] */
static const int64_t idx_sel2[] = {2, 0};                    /* [2] */
static const int64_t idx_one[] = {1};                        /* rank 0 */
static const int64_t idx_emb[] = {4, 0, 2, 4, 1, 4};         /* [2, 3] rows of [5, 3] */
static const int64_t mask_34[] = {1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1};
static const int64_t mask_4[] = {0, 1, 1, 0};
static const int64_t mask_31[] = {1, 0, 1};

static const ix_case cases[] = {
    {.name = "gather dim 1",
     .op = GATHER,
     .x = EM_SHAPE(3, 4),
     .dim = 1,
     .index = idx_34_d1,
     .is = EM_SHAPE(2, 3),
     .square = true},
    {.name = "gather dim 0",
     .op = GATHER,
     .x = EM_SHAPE(3, 4),
     .index = idx_34_d0,
     .is = EM_SHAPE(2, 4),
     .index_t = true,
     .square = true},
    {.name = "gather dim -1 linear",
     .op = GATHER,
     .x = EM_SHAPE(3, 4),
     .dim = -1,
     .index = idx_34_d1,
     .is = EM_SHAPE(2, 3)},
    {.name = "scatter assign dups",
     .op = SCATTER,
     .x = EM_SHAPE(3, 4),
     .has_src = true,
     .src = EM_SHAPE(3, 4),
     .dim = 1,
     .index = idx_34_d1,
     .is = EM_SHAPE(2, 3),
     .square = true},
    {.name = "scatter assign dim 0",
     .op = SCATTER,
     .x = EM_SHAPE(3, 4),
     .has_src = true,
     .src = EM_SHAPE(2, 4),
     .index = idx_34_d0,
     .is = EM_SHAPE(2, 4),
     .index_t = true,
     .square = true},
    {.name = "scatter assign rank-0 src",
     .op = SCATTER,
     .x = EM_SHAPE(3, 4),
     .has_src = true,
     .src = EM_SCALAR,
     .dim = 1,
     .index = idx_34_d1,
     .is = EM_SHAPE(2, 3),
     .square = true},
    {.name = "scatter add",
     .op = SCATTER,
     .x = EM_SHAPE(3, 4),
     .has_src = true,
     .src = EM_SHAPE(3, 4),
     .dim = 1,
     .mode = EM_SCATTER_ADD,
     .index = idx_34_d1,
     .is = EM_SHAPE(2, 3),
     .square = true},
    {.name = "scatter add dim 0",
     .op = SCATTER,
     .x = EM_SHAPE(3, 4),
     .has_src = true,
     .src = EM_SHAPE(2, 4),
     .mode = EM_SCATTER_ADD,
     .index = idx_34_d0,
     .is = EM_SHAPE(2, 4),
     .square = true},
    {.name = "scatter add rank-0 src",
     .op = SCATTER,
     .x = EM_SHAPE(3, 4),
     .has_src = true,
     .src = EM_SCALAR,
     .mode = EM_SCATTER_ADD,
     .index = idx_34_d0,
     .is = EM_SHAPE(2, 4),
     .square = true},
    {.name = "scatter mul",
     .op = SCATTER,
     .x = EM_SHAPE(3, 4),
     .has_src = true,
     .src = EM_SHAPE(3, 4),
     .dim = 1,
     .mode = EM_SCATTER_MUL,
     .index = idx_34_d1,
     .is = EM_SHAPE(2, 3)},
    {.name = "scatter mul dim 0",
     .op = SCATTER,
     .x = EM_SHAPE(3, 4),
     .has_src = true,
     .src = EM_SHAPE(2, 4),
     .mode = EM_SCATTER_MUL,
     .index = idx_34_d0,
     .is = EM_SHAPE(2, 4)},
    {.name = "scatter mul rank-0 src",
     .op = SCATTER,
     .x = EM_SHAPE(3, 4),
     .has_src = true,
     .src = EM_SCALAR,
     .dim = 1,
     .mode = EM_SCATTER_MUL,
     .index = idx_uniq_d1,
     .is = EM_SHAPE(2, 3)},
    {.name = "scatter min",
     .op = SCATTER,
     .x = EM_SHAPE(3, 4),
     .has_src = true,
     .src = EM_SHAPE(3, 4),
     .dim = 1,
     .mode = EM_SCATTER_MIN,
     .index = idx_34_d1,
     .is = EM_SHAPE(2, 3),
     .square = true},
    {.name = "scatter max",
     .op = SCATTER,
     .x = EM_SHAPE(3, 4),
     .has_src = true,
     .src = EM_SHAPE(2, 4),
     .mode = EM_SCATTER_MAX,
     .index = idx_34_d0,
     .is = EM_SHAPE(2, 4),
     .square = true},
    {.name = "index_select dim 0",
     .op = INDEX_SELECT,
     .x = EM_SHAPE(4, 3),
     .index = idx_sel,
     .is = EM_SHAPE(5),
     .square = true},
    {.name = "index_select dim 1",
     .op = INDEX_SELECT,
     .x = EM_SHAPE(4, 3),
     .dim = 1,
     .index = idx_sel2,
     .is = EM_SHAPE(2),
     .square = true},
    {.name = "index_select rank-0 index",
     .op = INDEX_SELECT,
     .x = EM_SHAPE(4, 3),
     .index = idx_one,
     .is = EM_SCALAR,
     .square = true},
    {.name = "index_add dim 0",
     .op = INDEX_ADD,
     .x = EM_SHAPE(4, 3),
     .has_src = true,
     .src = EM_SHAPE(5, 3),
     .alpha = 1.0,
     .index = idx_sel,
     .is = EM_SHAPE(5),
     .square = true},
    {.name = "index_add dim 1 alpha",
     .op = INDEX_ADD,
     .x = EM_SHAPE(4, 3),
     .has_src = true,
     .src = EM_SHAPE(4, 2),
     .dim = 1,
     .alpha = -2.5,
     .index = idx_sel2,
     .is = EM_SHAPE(2),
     .square = true},
    {.name = "masked_select",
     .op = MASKED_SELECT,
     .x = EM_SHAPE(3, 4),
     .index = mask_34,
     .is = EM_SHAPE(3, 4),
     .square = true},
    {.name = "masked_select mask broadcast",
     .op = MASKED_SELECT,
     .x = EM_SHAPE(3, 4),
     .index = mask_4,
     .is = EM_SHAPE(4),
     .square = true},
    {.name = "masked_select x broadcast",
     .op = MASKED_SELECT,
     .x = EM_SHAPE(4),
     .index = mask_31,
     .is = EM_SHAPE(3, 1),
     .square = true},
    {.name = "slice_assign",
     .op = SLICE_ASSIGN,
     .x = EM_SHAPE(4, 5),
     .has_src = true,
     .src = EM_SHAPE(2, 2),
     .st = {1, 0},
     .en = {3, 5},
     .sp = {1, 3},
     .square = true},
    {.name = "slice_assign src broadcast",
     .op = SLICE_ASSIGN,
     .x = EM_SHAPE(4, 5),
     .has_src = true,
     .src = EM_SHAPE(1, 3),
     .st = {0, 1},
     .en = {4, 4},
     .sp = {2, 1},
     .square = true},
    {.name = "slice_assign rank-0 src",
     .op = SLICE_ASSIGN,
     .x = EM_SHAPE(2, 3, 4),
     .has_src = true,
     .src = EM_SCALAR,
     .st = {1, 0, 1},
     .en = {2, 3, 4},
     .sp = {1, 2, 2},
     .square = true},
    {.name = "slice_assign 1-D src",
     .op = SLICE_ASSIGN,
     .x = EM_SHAPE(2, 3, 4),
     .has_src = true,
     .src = EM_SHAPE(2),
     .st = {0, 1, 0},
     .en = {2, 3, 4},
     .sp = {1, 1, 3},
     .square = true},
    {.name = "embedding",
     .op = EMBEDDING,
     .x = EM_SHAPE(5, 3),
     .index = idx_emb,
     .is = EM_SHAPE(2, 3),
     .square = true},
    {.name = "embedding transposed indices",
     .op = EMBEDDING,
     .x = EM_SHAPE(5, 3),
     .index = idx_emb,
     .is = EM_SHAPE(3, 2),
     .index_t = true,
     .square = true},
    {.name = "embedding rank-0 index",
     .op = EMBEDDING,
     .x = EM_SHAPE(5, 3),
     .index = idx_one,
     .is = EM_SCALAR,
     .square = true},
};

/* Ties in scatter min/max split the gradient evenly (torch's amax/amin); with duplicate
 * assigns only the last write gets a gradient. Checked on exact values. */
static void value_checks(void)
{
    em_scope_begin();
    double xv[3] = {1, 5, 2}, sv[3] = {1, 3, 5};
    int64_t iv[3] = {0, 2, 1};
    em_tensor *x = em_requires_grad(em_from_data(xv, EM_F64, EM_SHAPE(3), EM_F64, h_dev), true);
    em_tensor *s = em_requires_grad(em_from_data(sv, EM_F64, EM_SHAPE(3), EM_F64, h_dev), true);
    em_tensor *idx = h_from_i64(iv, EM_SHAPE(3));
    /* max: x[0] ties src[0] (1), x[1] ties src[2] (5), x[2] = max(2, 3) from src[1] */
    em_grads *g = em_backward(em_sum(em_scatter(x, 0, idx, s, EM_SCATTER_MAX), EM_ALL, false));
    double gx[3] = {0.5, 0.5, 0}, gs[3] = {0.5, 1, 0.5};
    h_check_tensor("scatter max ties: grad x", g ? em_grad(g, x) : NULL, gx, EM_SHAPE(3), 0, 0);
    h_check_tensor("scatter max ties: grad src", g ? em_grad(g, s) : NULL, gs, EM_SHAPE(3), 0, 0);
    /* assign with a duplicate: src[1] and src[2] both go to x[1]; src[2] wins */
    int64_t dv[3] = {0, 1, 1};
    em_tensor *dup = h_from_i64(dv, EM_SHAPE(3));
    double wv[3] = {1, 2, 3};
    em_tensor *w = em_from_data(wv, EM_F64, EM_SHAPE(3), EM_F64, h_dev);
    g = em_backward(em_sum(em_mul(em_scatter(x, 0, dup, s, EM_SCATTER_ASSIGN), w), EM_ALL, false));
    double ax[3] = {0, 0, 3}, as[3] = {1, 0, 2};
    h_check_tensor("scatter assign dups: grad x", g ? em_grad(g, x) : NULL, ax, EM_SHAPE(3), 0, 0);
    h_check_tensor("scatter assign dups: grad src", g ? em_grad(g, s) : NULL, as, EM_SHAPE(3), 0,
                   0);
    em_scope_end();
}

/* Empty selections give zero gradients of the input's shape. */
static void empty_checks(void)
{
    em_scope_begin();
    em_tensor *x = em_requires_grad(g_in(EM_SHAPE(2, 3), H_CONTIG, -1, 1), true);
    em_tensor *none = em_zeros(EM_SHAPE(2, 3), EM_BOOL, h_dev);
    em_tensor *empty = em_zeros(EM_SHAPE(0), EM_I64, h_dev);
    em_tensor *y = em_add(em_sum(em_masked_select(x, none), EM_ALL, false),
                          em_sum(em_index_select(x, 1, empty), EM_ALL, false));
    y = em_add(y, em_sum(em_embedding(x, em_zeros(EM_SHAPE(0, 2), EM_I64, h_dev)), EM_ALL, false));
    em_grads *g = y ? em_backward(y) : NULL;
    double zero[6] = {0};
    CHECK(g != NULL, "empty selections: backward: %s", em_last_error());
    h_check_tensor("empty selections: zero gradient", g ? em_grad(g, x) : NULL, zero,
                   EM_SHAPE(2, 3), 0, 0);
    em_scope_end();
}

/* f32 weight gives an f32 gradient of its shape. */
static void f32_check(void)
{
    em_scope_begin();
    em_tensor *w = em_requires_grad(h_rand(EM_SHAPE(5, 3), EM_F32, H_STRIDED, -1, 1, NULL), true);
    em_tensor *idx = h_from_i64(idx_emb, EM_SHAPE(6));
    em_grads *g = em_backward(em_sum(em_embedding(w, idx), EM_ALL, false));
    em_tensor *gw = g ? em_grad(g, w) : NULL;
    CHECK(gw && em_tensor_dtype(gw) == EM_F32, "embedding f32: gradient is f32");
    double want[15] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 3, 3, 3};
    h_check_tensor("embedding f32: row counts", gw, want, EM_SHAPE(5, 3), 0, 0);
    em_release(gw);
    em_scope_end();
}

void grad_index(void)
{
    const int n = (int)(sizeof cases / sizeof cases[0]);
    for (int k = 0; k < n; k++) {
        const ix_case *c = &cases[k];
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            em_scope_begin();
            ix_ctx ctx = {c, c->index ? make_index(c) : NULL};
            em_tensor *in[2] = {make_float(c, c->x, (h_layout)l, false), NULL};
            int nin = 1;
            if (c->has_src)
                in[nin++] = make_float(c, c->src, (h_layout)((l + 1) % H_LAYOUT_COUNT), true);
            char what[96];
            snprintf(what, sizeof what, "%s layout %d", c->name, l);
            h_gradcheck(what, f_ix, &ctx, in, nin, NULL, 0, 0);
            if (l == 0 && (c->square || c->mode == EM_SCATTER_MUL))
                h_gradgradcheck(what, f_ix, &ctx, in, nin, NULL, 0, 0);
            em_scope_end();
        }
    }
    value_checks();
    empty_checks();
    f32_check();
}
