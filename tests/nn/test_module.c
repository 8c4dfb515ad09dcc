/* The module system: registration, dotted names, visiting, counting, freezing, train/eval,
 * dtype moves, summaries, a user-defined module, Linear against its defaults, and bad input. */
#include <string.h>

#include "harness.h"

/* A user module as docs/modules.md shows: a struct with em_module first. */
typedef struct block {
    em_module base;
    double scale;
} block;

static em_tensor *block_forward(em_module *m, em_tensor *const *in, int n)
{
    block *b = (block *)m;
    em_module *fc = em_module_find(m, "fc");
    em_tensor *h = em_forward(fc, in[0]);
    em_tensor *y = em_mul_scalar(em_relu(h), b->scale);
    em_tensor *g = em_module_get(m, "gain");
    return em_mul(y, g);
}

static const em_module_type block_type = {"Block", block_forward, NULL, NULL};

static em_module *block_new(int64_t in, int64_t out)
{
    block *b = em_module_alloc(sizeof *b, &block_type, EM_CPU);
    if (!b) return NULL;
    b->scale = 2;
    em_module_child(&b->base, "fc", em_linear_new(in, out, EM_CPU));
    em_module_param(&b->base, "gain", em_ones(EM_SHAPE(out), EM_F32, EM_CPU));
    em_module_buffer(&b->base, "calls", em_zeros(EM_SHAPE(1), EM_I64, EM_CPU));
    return &b->base;
}

typedef struct names_ctx {
    char all[1024];
} names_ctx;

static void collect(void *vctx, const char *name, em_module_entry *e)
{
    names_ctx *c = vctx;
    strcat(c->all, name);
    strcat(c->all, e->is_buffer ? "(b) " : " ");
}

static void test_tree(void)
{
    em_seed(1);
    em_module *net =
        em_sequential(EM_CPU, block_new(4, 8), em_dropout_new(0.5), em_linear_new(8, 3, EM_CPU));
    CHECK(net != NULL, "sequential: %s", em_last_error());
    names_ctx c = {""};
    em_module_visit(net, collect, &c);
    CHECK(strcmp(c.all, "0.gain 0.calls(b) 0.fc.weight 0.fc.bias 2.weight 2.bias ") == 0,
          "dotted names: %s", c.all);
    CHECK(em_module_count(net, true) == 8 + 32 + 8 + 24 + 3, "count %lld",
          (long long)em_module_count(net, true));
    CHECK(em_module_count(net, false) == 8 + 1 + 32 + 8 + 24 + 3, "count with buffers");
    em_tensor *w = em_module_get(net, "0.fc.weight");
    CHECK(w && em_shape_equal(em_tensor_shape(w), EM_SHAPE(8, 4)) && em_tensor_requires_grad(w),
          "get by dotted name");
    CHECK(em_module_get(net, "0.fc.nothing") == NULL && em_module_find(net, "9") == NULL,
          "missing names");
    CHECK(em_module_freeze(net, "*.bias", true) == 2, "freeze biases");
    CHECK(em_module_count(net, true) == 8 + 32 + 24, "frozen excluded");
    em_tensor *ps[8];
    const char *nm[8];
    CHECK(em_module_parameters(net, ps, nm, 8) == 3 && strcmp(nm[2], "weight") == 0,
          "trainable parameters");
    em_module_freeze(net, "*", false);
    char *sum = em_module_summary(net);
    CHECK(sum && strstr(sum, "Sequential") && strstr(sum, "fc: Linear(in=4, out=8)") &&
              strstr(sum, "weight [8, 4] f32") && strstr(sum, "calls [1] i64 (buffer)") &&
              strstr(sum, "Dropout(p=0.5)"),
          "summary:\n%s", sum ? sum : "");
    em_free(sum);

    /* forward in train and eval mode: dropout only in training */
    em_scope_begin();
    em_tensor *x = em_randn(EM_SHAPE(5, 4), EM_F32, EM_CPU);
    em_module_train(net, false);
    em_tensor *a = em_forward(net, x), *b = em_forward(net, x);
    double *va = h_values(a), *vb = h_values(b);
    CHECK(a && b && memcmp(va, vb, 15 * sizeof(double)) == 0, "eval mode is deterministic");
    free(va);
    free(vb);
    em_module_train(net, true);
    CHECK(em_module_find(net, "1")->training, "train mode reaches children");
    /* gradients reach every parameter */
    em_grads *g = em_backward(em_sum(em_forward(net, x), EM_ALL, false));
    CHECK(g && em_grads_count(g) == 5, "5 parameters got gradients (%d)", em_grads_count(g));
    em_scope_end();

    CHECK(em_module_cast(net, EM_F64) == EM_OK, "cast");
    em_tensor *w64 = em_module_get(net, "2.weight");
    CHECK(em_tensor_dtype(w64) == EM_F64 && em_tensor_requires_grad(w64), "cast keeps grad mark");
    CHECK(em_tensor_dtype(em_module_get(net, "0.calls")) == EM_I64, "integer buffers stay");
    em_module_free(net);
}

static void test_linear_defaults(void)
{
    /* PyTorch's Linear init: weight U(-1/sqrt(in), 1/sqrt(in)) (kaiming_uniform a=sqrt5), bias
     * U(-1/sqrt(in), 1/sqrt(in)) */
    em_seed(3);
    em_module *l = em_linear_new(400, 300, EM_CPU);
    em_scope_begin();
    double bound = 1 / sqrt(400.0);
    double *w = h_values(em_module_get(l, "weight"));
    double mx = 0, var = 0;
    for (int i = 0; i < 120000; i++) {
        mx = fmax(mx, fabs(w[i]));
        var += w[i] * w[i] / 120000;
    }
    CHECK(mx <= bound && mx > bound * 0.99, "weight bound %g vs %g", mx, bound);
    CHECK(fabs(var - bound * bound / 3) < bound * bound * 0.02, "weight variance");
    free(w);
    /* same seed, same model */
    em_seed(3);
    em_module *l2 = em_linear_new(400, 300, EM_CPU);
    double *w1 = h_values(em_module_get(l, "bias")), *w2 = h_values(em_module_get(l2, "bias"));
    CHECK(memcmp(w1, w2, 300 * sizeof(double)) == 0, "seeded models are reproducible");
    free(w1);
    free(w2);
    em_module_free(l2);
    /* no bias */
    em_module *nb = em_linear_new_cfg(3, 2, (em_linear_cfg){.no_bias = true}, EM_CPU);
    CHECK(nb && em_module_get(nb, "bias") == NULL, "no bias");
    em_tensor *y = em_forward(nb, em_ones(EM_SHAPE(3), EM_F32, EM_CPU));
    CHECK(y && em_shape_equal(em_tensor_shape(y), EM_SHAPE(2)), "1-D input");
    em_module_free(nb);
    em_scope_end();
    em_module_free(l);
}

/* Linear runs x W^T + b as one op; a Sequential fuses a Linear with a following plain ReLU,
 * GELU or SiLU module: outputs and gradients match the modules run one by one. */
static void test_linear_fused(void)
{
    em_module *(*acts[3])(void) = {em_relu_new, em_gelu_new, em_silu_new};
    for (int k = 0; k < 3; k++) {
        em_seed(5);
        em_module *net = em_sequential(EM_CPU, em_linear_new(6, 5, EM_CPU), acts[k](),
                                       em_linear_new(5, 4, EM_CPU), em_tanh_new());
        em_scope_begin();
        em_tensor *x = h_rand(EM_SHAPE(2, 3, 6), EM_F32, H_CONTIG, -1, 1, NULL);
        em_tensor *y = em_forward(net, x);
        em_tensor *h = x;
        for (int i = 0; i < 4; i++) h = em_forward(net->children[i].child, h);
        CHECK(y && h && h_same_bytes(y, h), "Sequential Linear+act %d: fused output", k);
        em_grads *g1 = em_backward(em_sum(y, EM_ALL, false));
        em_grads *g2 = em_backward(em_sum(h, EM_ALL, false));
        const char *names[] = {"0.weight", "0.bias", "2.weight", "2.bias"};
        for (int i = 0; g1 && g2 && i < 4; i++) {
            em_tensor *p = em_module_get(net, names[i]);
            em_tensor *ga = em_grad(g1, p), *gb = em_grad(g2, p);
            CHECK(ga && gb && em_shape_equal(em_tensor_shape(ga), em_tensor_shape(p)),
                  "Sequential Linear+act %d: gradient of %s", k, names[i]);
            if (ga && gb) h_compare_dev(names[i], ga, gb, 1e-6, 1e-5, EM_CPU);
        }
        CHECK(g1 && g2, "Sequential Linear+act backward: %s", em_last_error());
        em_scope_end();
        em_module_free(net);
    }
    /* Linear alone equals matmul + add */
    em_scope_begin();
    em_module *l = em_linear_new(7, 3, EM_CPU);
    em_tensor *x = h_rand(EM_SHAPE(4, 7), EM_F32, H_CONTIG, -1, 1, NULL);
    em_tensor *want = em_add(em_matmul(x, em_transpose(em_module_get(l, "weight"), 0, 1)),
                             em_module_get(l, "bias"));
    em_tensor *got = em_forward(l, x);
    CHECK(got && want && h_same_bytes(got, want), "Linear: x W^T + b");
    em_scope_end();
    em_module_free(l);
}

static void test_init(void)
{
    em_scope_begin();
    int64_t fi, fo;
    em_init_fans(EM_SHAPE(16, 8, 3, 3), &fi, &fo);
    CHECK(fi == 72 && fo == 144, "fans");
    CHECK(fabs(em_init_gain(EM_NL_LEAKY_RELU, sqrt(5.0)) - sqrt(2.0 / 6)) < 1e-15, "gain");
    em_tensor *o = em_init_orthogonal(EM_SHAPE(6, 10), 1.0, EM_F64, EM_CPU);
    em_tensor *oo = em_matmul(o, em_transpose(o, 0, 1));
    double eye[36];
    for (int i = 0; i < 36; i++) eye[i] = i % 7 == 0;
    h_check_tensor("orthogonal rows", oo, eye, EM_SHAPE(6, 6), 1e-12, 0);
    em_tensor *t = em_init_trunc_normal(EM_SHAPE(5000), 0, 1, -2, 2, EM_F64, EM_CPU);
    double *v = h_values(t);
    double m = 0, s2 = 0, lo = 0, hi = 0;
    for (int i = 0; i < 5000; i++) {
        m += v[i] / 5000;
        s2 += v[i] * v[i] / 5000;
        lo = fmin(lo, v[i]);
        hi = fmax(hi, v[i]);
    }
    /* variance of N(0,1) truncated to [-2, 2] is 0.7737 */
    CHECK(lo >= -2 && hi <= 2 && fabs(m) < 0.05 && fabs(s2 - 0.7737) < 0.05,
          "trunc normal mean %g var %g", m, s2);
    free(v);
    em_tensor *xu = em_init_xavier_uniform(EM_SHAPE(20, 30), 1, EM_F32, EM_CPU);
    double *xv = h_values(xu);
    double xm = 0;
    for (int i = 0; i < 600; i++) xm = fmax(xm, fabs(xv[i]));
    CHECK(xm <= sqrt(6.0 / 50), "xavier bound");
    free(xv);
    em_tensor *kn =
        em_init_kaiming_normal(EM_SHAPE(200, 100), 0, false, EM_NL_RELU, EM_F64, EM_CPU);
    double *kv = h_values(kn);
    double kvar = 0;
    for (int i = 0; i < 20000; i++) kvar += kv[i] * kv[i] / 20000;
    CHECK(fabs(kvar - 2.0 / 100) < 0.002, "kaiming normal variance %g", kvar);
    free(kv);
    em_scope_end();
}

static void test_errors(void)
{
    em_module *l = em_linear_new(0, 3, EM_CPU);
    CHECK(l == NULL, "linear with 0 inputs");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_linear_new");
    em_module *s = em_sequential_new(EM_CPU);
    em_module_child(s, "a", em_relu_new());
    CHECK(em_module_child(s, "a", em_relu_new()) == NULL, "duplicate name");
    CHECK_ERR(EM_ERR_INVALID_ARG, "already registered");
    CHECK(em_module_param(s, "x.y", em_ones(EM_SHAPE(1), EM_F32, EM_CPU)) == NULL, "dots");
    CHECK_ERR(EM_ERR_INVALID_ARG, "without dots");
    em_scope_begin();
    em_tensor *x = em_ones(EM_SHAPE(2), EM_F32, EM_CPU);
    em_tensor *in[2] = {x, x};
    CHECK(em_forward_n(em_module_find(s, "a"), in, 2) == NULL, "two inputs to ReLU");
    CHECK_ERR(EM_ERR_INVALID_ARG, "ReLU takes 1 input, got 2");
    CHECK(em_forward(NULL, x) == NULL, "NULL module");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_forward");
    em_scope_end();
    em_module_free(s);
}

int main(void)
{
    h_init();
    test_tree();
    test_linear_defaults();
    test_linear_fused();
    test_init();
    test_errors();
    return h_finish();
}
