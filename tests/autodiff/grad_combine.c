/* Gradient checks for the combine family: cat (and stack, split, chunk built on it), repeat
 * (and tile), roll and pad in all four modes, first and second order, over non-contiguous
 * layouts and every parameter variant. */
#include "grad.h"

/* Each case squares its result so second-order gradients are not trivially zero. */
static em_tensor *sq(em_tensor *v)
{
    return v ? em_mul(v, v) : NULL;
}

/* ---- cat, stack, split, chunk ------------------------------------------------------------ */

typedef struct cat_case {
    int which;
} cat_case;

static em_tensor *f_cat(em_tensor *const *in, int n, void *ctx)
{
    const cat_case *c = ctx;
    em_tensor *v = NULL;
    switch (c->which) {
    case 0: v = em_cat(in, n, 1); break;  /* [2,3,2] [2,1,2] [2,2,2] -> [2,6,2] */
    case 1: v = em_cat(in, n, -1); break; /* [3,2] [3,4] [3,1] */
    case 2: {                             /* 8 inputs: a cat of cats (groups of at most 6) */
        em_tensor *ts[8];
        for (int k = 0; k < 8; k++) ts[k] = in[k % n];
        v = em_cat(ts, 8, 0);
        break;
    }
    case 3: { /* a legacy empty [0] input is skipped */
        em_tensor *e = em_zeros(EM_SHAPE(0), EM_F64, h_dev);
        em_tensor *ts[4] = {in[0], e, in[1], in[2]};
        v = em_cat(ts, 4, 0);
        break;
    }
    case 4: v = em_stack(in, n, 1); break;  /* equal shapes [2,3] */
    case 5: v = em_stack(in, n, -1); break; /* new last dim */
    case 6: {                               /* split then rejoin in reverse order */
        em_tensor *p[8];
        int m = 0;
        if (em_split(in[0], 2, 1, p, 8, &m) != EM_OK) return NULL;
        em_tensor *r[8];
        for (int k = 0; k < m; k++) r[k] = em_mul_scalar(p[m - 1 - k], (double)(k + 1));
        v = em_cat(r, m, 1);
        break;
    }
    case 7: { /* chunk into 3 along dim 0, stack two of them */
        em_tensor *p[3];
        int m = 0;
        if (em_chunk(in[0], 3, 0, p, &m) != EM_OK) return NULL;
        em_tensor *two[2] = {p[2], p[0]};
        v = em_stack(two, 2, 0);
        break;
    }
    case 8: { /* split_sizes with an empty piece */
        em_tensor *p[3];
        int64_t sizes[3] = {1, 0, 3};
        if (em_split_sizes(in[0], sizes, 3, 1, p) != EM_OK) return NULL;
        em_tensor *r[3] = {em_mul_scalar(p[2], 2.0), p[1], p[0]};
        v = em_cat(r, 3, 1);
        break;
    }
    }
    return sq(v);
}

static void check_cat(void)
{
    static const em_shape shapes[][3] = {
        {EM_SHAPE(2, 3, 2), EM_SHAPE(2, 1, 2), EM_SHAPE(2, 2, 2)},
        {EM_SHAPE(3, 2), EM_SHAPE(3, 4), EM_SHAPE(3, 1)},
        {EM_SHAPE(1, 3), EM_SHAPE(2, 3), EM_SHAPE(1, 3)},
        {EM_SHAPE(2, 3), EM_SHAPE(1, 3), EM_SHAPE(3, 3)},
        {EM_SHAPE(2, 3), EM_SHAPE(2, 3), EM_SHAPE(2, 3)},
        {EM_SHAPE(2, 3), EM_SHAPE(2, 3), EM_SHAPE(2, 3)},
        {EM_SHAPE(3, 7)},
        {EM_SHAPE(6, 2)},
        {EM_SHAPE(3, 4)},
    };
    static const int n_in[] = {3, 3, 3, 3, 3, 3, 1, 1, 1};
    for (int c = 0; c < 9; c++)
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            em_scope_begin();
            em_tensor *x[3];
            for (int k = 0; k < n_in[c]; k++)
                x[k] = g_in(shapes[c][k], (h_layout)((l + k) % H_LAYOUT_COUNT), -2, 2);
            cat_case cc = {c};
            char what[64];
            snprintf(what, sizeof what, "cat case %d layout %d", c, l);
            h_gradcheck(what, f_cat, &cc, x, n_in[c], NULL, 0, 0);
            if (l == 0) h_gradgradcheck(what, f_cat, &cc, x, n_in[c], NULL, 0, 0);
            em_scope_end();
        }
    /* only some inputs need a gradient */
    em_scope_begin();
    em_tensor *x[3] = {g_in(EM_SHAPE(2, 3, 2), H_CONTIG, -2, 2),
                       g_in(EM_SHAPE(2, 1, 2), H_STRIDED, -2, 2),
                       g_in(EM_SHAPE(2, 2, 2), H_FLIPPED, -2, 2)};
    cat_case cc = {0};
    bool wrt[3] = {false, true, false};
    h_gradcheck("cat wrt input 1 only", f_cat, &cc, x, 3, wrt, 0, 0);
    em_scope_end();
}

/* Mixed dtypes: the output promotes to f64, each input's gradient keeps its own dtype. */
static void check_cat_dtypes(void)
{
    em_scope_begin();
    em_tensor *a = em_requires_grad(em_rand(EM_SHAPE(2, 3), EM_F32, h_dev), true);
    em_tensor *b = em_requires_grad(em_rand(EM_SHAPE(2, 2), EM_F64, h_dev), true);
    em_tensor *i = em_ones(EM_SHAPE(2, 1), EM_I64, h_dev);
    em_tensor *ts[3] = {a, i, b};
    em_tensor *y = em_cat(ts, 3, 1);
    em_tensor *w = em_arange(0, 12, 1, EM_F64, h_dev);
    em_tensor *l = em_sum(em_mul(y, em_reshape(w, EM_SHAPE(2, 6))), EM_ALL, false);
    em_grads *g = em_backward(l);
    em_tensor *ga = g ? em_grad(g, a) : NULL, *gb = g ? em_grad(g, b) : NULL;
    CHECK(ga && em_tensor_dtype(ga) == EM_F32, "cat: f32 input gets an f32 gradient");
    CHECK(gb && em_tensor_dtype(gb) == EM_F64, "cat: f64 input gets an f64 gradient");
    if (ga && gb) {
        double ea[] = {0, 1, 2, 6, 7, 8}, eb[] = {4, 5, 10, 11};
        h_check_tensor("cat grad a", ga, ea, EM_SHAPE(2, 3), 0, 0);
        h_check_tensor("cat grad b", gb, eb, EM_SHAPE(2, 2), 0, 0);
    }
    em_release(ga);
    em_release(gb);
    CHECK_OK("cat dtypes");
    em_scope_end();
}

/* ---- repeat and tile --------------------------------------------------------------------- */

typedef struct rep_case {
    em_shape reps;
    bool tile;
} rep_case;

static em_tensor *f_repeat(em_tensor *const *in, int n, void *ctx)
{
    (void)n;
    const rep_case *c = ctx;
    return sq(c->tile ? em_tile(in[0], c->reps) : em_repeat(in[0], c->reps));
}

static void check_repeat(void)
{
    const rep_case cases[] = {
        {EM_SHAPE(2, 3), false},       {EM_SHAPE(1, 1), false},   {EM_SHAPE(2, 1, 2), false},
        {EM_SHAPE(3, 2, 1, 1), false}, {EM_SHAPE(0, 2), false},   {EM_SHAPE(2), true},
        {EM_SHAPE(2, 2), true},        {EM_SHAPE(2, 1, 3), true},
    };
    const int nc = (int)(sizeof cases / sizeof cases[0]);
    for (int c = 0; c < nc; c++)
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            em_scope_begin();
            em_tensor *x = g_in(EM_SHAPE(2, 3), (h_layout)l, -2, 2);
            char what[64];
            snprintf(what, sizeof what, "repeat case %d layout %d", c, l);
            h_gradcheck(what, f_repeat, (void *)&cases[c], &x, 1, NULL, 0, 0);
            if (l == 0) h_gradgradcheck(what, f_repeat, (void *)&cases[c], &x, 1, NULL, 0, 0);
            em_scope_end();
        }
    em_scope_begin(); /* rank 0 */
    em_tensor *x = g_in(EM_SCALAR, H_CONTIG, -2, 2);
    rep_case rc = {EM_SHAPE(3, 2), false};
    h_gradcheck("repeat of a scalar", f_repeat, &rc, &x, 1, NULL, 0, 0);
    em_scope_end();
}

/* ---- roll -------------------------------------------------------------------------------- */

typedef struct roll_case {
    int64_t shifts[4];
    int dims[4];
    int n;
} roll_case;

static em_tensor *f_roll(em_tensor *const *in, int n, void *ctx)
{
    (void)n;
    const roll_case *c = ctx;
    return sq(em_roll(in[0], c->shifts, c->dims, c->n));
}

static void check_roll(void)
{
    const roll_case cases[] = {
        {{1}, {0}, 1},
        {{-2}, {-1}, 1},
        {{7, -5}, {2, 1}, 2},
        {{1, 2}, {1, 1}, 2},
        {{3}, {0}, 0},
        /* flat */ {{-11}, {0}, 0},
        {{1, -1, 2}, {0, 1, 2}, 3},
    };
    const int nc = (int)(sizeof cases / sizeof cases[0]);
    for (int c = 0; c < nc; c++)
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            em_scope_begin();
            em_tensor *x = g_in(EM_SHAPE(2, 3, 4), (h_layout)l, -2, 2);
            char what[64];
            snprintf(what, sizeof what, "roll case %d layout %d", c, l);
            h_gradcheck(what, f_roll, (void *)&cases[c], &x, 1, NULL, 0, 0);
            if (l == 0) h_gradgradcheck(what, f_roll, (void *)&cases[c], &x, 1, NULL, 0, 0);
            em_scope_end();
        }
    em_scope_begin();
    em_tensor *x = g_in(EM_SCALAR, H_CONTIG, -2, 2);
    h_gradcheck("roll of a scalar", f_roll, (void *)&cases[0], &x, 1, NULL, 0, 0);
    em_scope_end();
}

/* ---- pad --------------------------------------------------------------------------------- */

typedef struct pad_case {
    int64_t pads[6];
    int pairs;
    em_pad_mode mode;
    double value;
} pad_case;

static em_tensor *f_pad(em_tensor *const *in, int n, void *ctx)
{
    (void)n;
    const pad_case *c = ctx;
    return sq(em_pad(in[0], c->pads, c->pairs, c->mode, c->value));
}

static void check_pad(void)
{
    /* x is [2, 3, 4]: pairs start at the last dim (size 4), then dim 1 (size 3), dim 0 (2) */
    const pad_case cases[] = {
        {{1, 2}, 1, EM_PAD_CONSTANT, 0.5},
        {{2, 0, 0, 1, 1, 1}, 3, EM_PAD_CONSTANT, -1.0},
        {{-1, 2, 1, -2}, 2, EM_PAD_CONSTANT, 0.0},
        {{-1, -2, 0, 0}, 2, EM_PAD_CONSTANT, 0.0},
        {{0, 0}, 1, EM_PAD_CONSTANT, 0.0},
        {{3, 1}, 1, EM_PAD_REFLECT, 0},
        {{1, 2, 2, 0}, 2, EM_PAD_REFLECT, 0},
        {{-1, 2, 1, 1, 1, 0}, 3, EM_PAD_REFLECT, 0},
        {{2, 3}, 1, EM_PAD_REPLICATE, 0},
        {{0, 2, 3, 1}, 2, EM_PAD_REPLICATE, 0},
        {{1, -2, -1, 2, 2, 1}, 3, EM_PAD_REPLICATE, 0},
        {{1, 3}, 1, EM_PAD_CIRCULAR, 0},
        {{4, 2, 3, 0}, 2, EM_PAD_CIRCULAR, 0},
        {{-2, 1, 2, -1, 0, 2}, 3, EM_PAD_CIRCULAR, 0},
    };
    const int nc = (int)(sizeof cases / sizeof cases[0]);
    for (int c = 0; c < nc; c++)
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            em_scope_begin();
            em_tensor *x = g_in(EM_SHAPE(2, 3, 4), (h_layout)l, -2, 2);
            char what[64];
            snprintf(what, sizeof what, "pad case %d layout %d", c, l);
            h_gradcheck(what, f_pad, (void *)&cases[c], &x, 1, NULL, 0, 0);
            if (l == 0) h_gradgradcheck(what, f_pad, (void *)&cases[c], &x, 1, NULL, 0, 0);
            em_scope_end();
        }
    /* f32 input: f32 gradient of the input's shape */
    em_scope_begin();
    em_tensor *x = em_requires_grad(em_rand(EM_SHAPE(3, 4), EM_F32, h_dev), true);
    int64_t pads[4] = {2, 1, 1, 2};
    em_tensor *l = em_sum(em_pad(x, pads, 2, EM_PAD_REFLECT, 0), EM_ALL, false);
    em_grads *g = em_backward(l);
    em_tensor *gx = g ? em_grad(g, x) : NULL;
    CHECK(gx && em_tensor_dtype(gx) == EM_F32 && em_tensor_numel(gx) == 12,
          "pad: f32 input gets an f32 gradient of its shape");
    if (gx) { /* how often each element is read: [1,2,3,1] along the last dim, [2,3,1] on dim 0 */
        double e[] = {2, 4, 6, 2, 3, 6, 9, 3, 1, 2, 3, 1};
        h_check_tensor("pad reflect f32 gradient", gx, e, EM_SHAPE(3, 4), 0, 0);
    }
    em_release(gx);
    CHECK_OK("pad f32");
    em_scope_end();
}

void grad_combine(void)
{
    check_cat();
    check_cat_dtypes();
    check_repeat();
    check_roll();
    check_pad();
}
