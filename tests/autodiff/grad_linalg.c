/* Gradient checks for matmul in all its forms (dot, matvec, outer, 1-D with batches, batched
 * with broadcast batch dims), first and second order over every layout, and f32 gradients. */
#include "grad.h"

typedef struct mm_case {
    em_shape a, b;
    int via; /* 0 em_matmul, 1 em_dot, 2 em_matvec, 3 em_outer */
} mm_case;

static em_tensor *f_mm(em_tensor *const *in, int n, void *ctx)
{
    (void)n;
    const mm_case *c = ctx;
    switch (c->via) {
    case 1: return em_dot(in[0], in[1]);
    case 2: return em_matvec(in[0], in[1]);
    case 3: return em_outer(in[0], in[1]);
    default: return em_matmul(in[0], in[1]);
    }
}

/* f32 inputs give f32 gradients of the inputs' shapes (a broadcast batch dim summed back). */
static void f32_check(void)
{
    em_scope_begin();
    em_tensor *a = em_requires_grad(h_rand(EM_SHAPE(2, 3, 4), EM_F32, H_CONTIG, -1, 1, NULL), true);
    em_tensor *b =
        em_requires_grad(h_rand(EM_SHAPE(4, 5), EM_F32, H_TRANSPOSED, -1, 1, NULL), true);
    em_grads *g = em_backward(em_sum(em_matmul(a, b), EM_ALL, false));
    CHECK(g != NULL, "matmul f32 backward: %s", em_last_error());
    em_tensor *ga = g ? em_grad(g, a) : NULL, *gb = g ? em_grad(g, b) : NULL;
    CHECK(ga && em_tensor_dtype(ga) == EM_F32 &&
              em_shape_equal(em_tensor_shape(ga), EM_SHAPE(2, 3, 4)),
          "matmul f32: gradient of a is f32 [2, 3, 4]");
    CHECK(gb && em_tensor_dtype(gb) == EM_F32 &&
              em_shape_equal(em_tensor_shape(gb), EM_SHAPE(4, 5)),
          "matmul f32: gradient of b is f32 [4, 5]");
    if (gb) {
        /* d sum(a @ b) / db[k][n] = sum over batch and rows of a[.., k] */
        double *av = h_values(a), *gv = h_values(gb);
        double want[4] = {0};
        for (int i = 0; i < 6; i++)
            for (int k = 0; k < 4; k++) want[k] += av[i * 4 + k];
        bool ok = true;
        for (int k = 0; k < 4; k++)
            for (int j = 0; j < 5; j++) ok &= h_close(gv[k * 5 + j], want[k], 1e-5, 1e-4);
        CHECK(ok, "matmul f32: gradient of b summed over the batch");
        free(av);
        free(gv);
    }
    em_release(ga);
    em_release(gb);
    em_scope_end();
}

/* ---- matmul_bias_act ---------------------------------------------------------------------- */

typedef struct mba_case {
    em_shape a, b;
    bool bias;
    em_act act;
} mba_case;

static em_tensor *f_mba(em_tensor *const *in, int n, void *ctx)
{
    const mba_case *c = ctx;
    return em_matmul_bias_act(in[0], in[1], n > 2 ? in[2] : NULL, c->act);
}

/* First and second order for every activation, with and without a bias, over 2-D, batched with
 * a broadcast b, 1-D a and 1-D b (bias of length 1); the values stay away from relu's kink. */
static void grad_mba(void)
{
    static const struct {
        em_shape a, b;
    } shapes[] = {
        {EM_SHAPE(3, 4), EM_SHAPE(4, 5)},
        {EM_SHAPE(2, 3, 4), EM_SHAPE(4, 2)},
        {EM_SHAPE(4), EM_SHAPE(2, 4, 3)},
        {EM_SHAPE(2, 3, 4), EM_SHAPE(4)},
    };
    for (int s = 0; s < 4; s++)
        for (int act = EM_ACT_NONE; act <= EM_ACT_SILU; act++)
            for (int wb = 0; wb < 2; wb++) {
                em_scope_begin();
                mba_case c = {shapes[s].a, shapes[s].b, wb, (em_act)act};
                int64_t N = c.b.rank == 1 ? 1 : c.b.dims[c.b.rank - 1];
                h_layout l = (h_layout)((s + act) % H_LAYOUT_COUNT);
                em_tensor *in[3] = {g_in(c.a, l, -1, 1), g_in(c.b, H_TRANSPOSED, -1, 1),
                                    g_in(EM_SHAPE(N), H_CONTIG, -1, 1)};
                char what[80];
                snprintf(what, sizeof what, "matmul_bias_act shape %d act %d bias %d", s, act, wb);
                h_gradcheck(what, f_mba, &c, in, 2 + wb, NULL, 0, 0);
                if (s < 2) h_gradgradcheck(what, f_mba, &c, in, 2 + wb, NULL, 0, 0);
                em_scope_end();
            }
    /* the gradients equal those of the unfused sequence in f32 (one rounding step apart) */
    em_scope_begin();
    em_tensor *x = em_requires_grad(h_rand(EM_SHAPE(6, 7), EM_F32, H_CONTIG, -1, 1, NULL), true);
    em_tensor *w = em_requires_grad(h_rand(EM_SHAPE(5, 7), EM_F32, H_CONTIG, -1, 1, NULL), true);
    em_tensor *b = em_requires_grad(h_rand(EM_SHAPE(5), EM_F32, H_CONTIG, -1, 1, NULL), true);
    em_tensor *y1 = em_matmul_bias_act(x, em_transpose(w, 0, 1), b, EM_ACT_SILU);
    em_tensor *y2 = em_silu(em_add(em_matmul(x, em_transpose(w, 0, 1)), b));
    em_grads *g1 = em_backward(em_sum(y1, EM_ALL, false));
    em_grads *g2 = em_backward(em_sum(y2, EM_ALL, false));
    CHECK(g1 && g2, "matmul_bias_act f32 backward: %s", em_last_error());
    em_tensor *t[3] = {x, w, b};
    for (int i = 0; g1 && g2 && i < 3; i++) {
        em_tensor *ga = em_grad(g1, t[i]), *gb = em_grad(g2, t[i]);
        CHECK(ga && gb && em_shape_equal(em_tensor_shape(ga), em_tensor_shape(t[i])),
              "matmul_bias_act f32: gradient %d shape", i);
        if (ga && gb) h_compare_dev("matmul_bias_act f32 gradient", ga, gb, 1e-6, 1e-5, h_dev);
        em_release(ga);
        em_release(gb);
    }
    em_scope_end();
}

void grad_linalg(void)
{
    grad_mba();
    static const mm_case cases[] = {
        {EM_SHAPE(5), EM_SHAPE(5), 0},                /* dot via matmul, rank-0 result */
        {EM_SHAPE(5), EM_SHAPE(5), 1},                /* em_dot */
        {EM_SHAPE(4), EM_SHAPE(4, 3), 0},             /* 1-D x 2-D */
        {EM_SHAPE(4), EM_SHAPE(2, 4, 3), 0},          /* 1-D x batched */
        {EM_SHAPE(3, 4), EM_SHAPE(4), 0},             /* 2-D x 1-D */
        {EM_SHAPE(3, 4), EM_SHAPE(4), 2},             /* em_matvec */
        {EM_SHAPE(2, 3, 4), EM_SHAPE(4), 0},          /* batched x 1-D */
        {EM_SHAPE(3, 4), EM_SHAPE(4, 2), 0},          /* 2-D x 2-D */
        {EM_SHAPE(2, 3, 4), EM_SHAPE(2, 4, 2), 0},    /* batched */
        {EM_SHAPE(2, 3, 4), EM_SHAPE(4, 2), 0},       /* b broadcast over the batch */
        {EM_SHAPE(3, 4), EM_SHAPE(2, 4, 2), 0},       /* a broadcast over the batch */
        {EM_SHAPE(2, 1, 2, 3), EM_SHAPE(3, 3, 2), 0}, /* both broadcast: [2, 3, 2, 2] */
        {EM_SHAPE(1, 2, 3), EM_SHAPE(2, 3, 2), 0},    /* size-1 batch dim of a stretches */
        {EM_SHAPE(3), EM_SHAPE(4), 3},                /* em_outer */
    };
    const int n = (int)(sizeof cases / sizeof cases[0]);
    for (int k = 0; k < n; k++)
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            em_scope_begin();
            em_tensor *in[2] = {g_in(cases[k].a, (h_layout)l, -1, 1),
                                g_in(cases[k].b, (h_layout)((l + k) % H_LAYOUT_COUNT), -1, 1)};
            char what[64];
            snprintf(what, sizeof what, "matmul case %d layout %d", k, l);
            h_gradcheck(what, f_mm, (void *)&cases[k], in, 2, NULL, 0, 0);
            if (l == 0 || l == 2) h_gradgradcheck(what, f_mm, (void *)&cases[k], in, 2, NULL, 0, 0);
            em_scope_end();
        }
    /* gradient to one operand only */
    em_scope_begin();
    em_tensor *in[2] = {g_in(EM_SHAPE(2, 3, 4), H_CONTIG, -1, 1),
                        g_in(EM_SHAPE(4, 2), H_CONTIG, -1, 1)};
    bool wrt_a[2] = {true, false}, wrt_b[2] = {false, true};
    h_gradcheck("matmul wrt a", f_mm, (void *)&cases[9], in, 2, wrt_a, 0, 0);
    h_gradcheck("matmul wrt b", f_mm, (void *)&cases[9], in, 2, wrt_b, 0, 0);
    em_scope_end();
    f32_check();
}
