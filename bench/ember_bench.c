/* Ember side of the suite: every case of bench/run.sh through the public API, one timing line
 * per case (bench_common.h). Each rep runs inside em_scope_begin/end so outputs are released
 * (and their memory returned to the caching allocator) like PyTorch's temporaries. */
#include <ember/ember.h>

#include "bench_common.h"

static em_tensor *A, *B, *X, *W, *Bias, *V;

static void run_matmul(void *c)
{
    em_scope_begin();
    em_matmul(A, B);
    em_scope_end();
}

static void run_gemv_n(void *c)
{
    em_scope_begin();
    em_matvec(A, V);
    em_scope_end();
}

static void run_gemv_t(void *c)
{
    em_scope_begin();
    em_matvec(em_transpose(A, 0, 1), V);
    em_scope_end();
}

static em_conv_opts conv_o;
static void run_conv(void *c)
{
    em_scope_begin();
    em_conv2d(X, W, Bias, conv_o);
    em_scope_end();
}

/* forward and backward (x, w and bias) of the conv, with the loss sum(y * R) (a dense gradient) */
static em_tensor *R;
static void run_conv_fwbw(void *c)
{
    em_scope_begin();
    em_backward(em_sum(em_mul(em_conv2d(X, W, Bias, conv_o), R), EM_ALL, false));
    em_scope_end();
}

static em_pool_opts pool_o;
static void run_pool(void *c)
{
    em_scope_begin();
    em_max_pool2d(X, pool_o, NULL);
    em_scope_end();
}

static void run_softmax(void *c)
{
    em_scope_begin();
    em_softmax(X, -1);
    em_scope_end();
}

/* softmax of X and its backward under the fixed gradient R; cross entropy of the logits X against
 * the classes T and its backward */
static em_tensor *T;
static void run_fwbw_softmax(void *c)
{
    em_scope_begin();
    em_tensor *y = em_softmax(X, -1);
    em_grads_free(em_backward_with(&y, &R, 1, (em_backward_opts){0}));
    em_scope_end();
}

static void run_fwbw_xent(void *c)
{
    em_scope_begin();
    em_grads_free(em_backward(em_cross_entropy(X, T, (em_ce_cfg){0})));
    em_scope_end();
}

static void run_layer_norm(void *c)
{
    em_scope_begin();
    em_layer_norm(X, 1, W, Bias, 1e-5);
    em_scope_end();
}

static void run_gelu(void *c)
{
    em_scope_begin();
    em_gelu(X);
    em_scope_end();
}

static void run_sum(void *c)
{
    em_scope_begin();
    em_sum(X, EM_ALL, false);
    em_scope_end();
}

/* ---- elementwise: one op over 1M elements (f32, or i32 for the ew_i32_ cases) ------------- */

typedef struct ew_case {
    const char *name;
    em_tensor *(*unary)(const em_tensor *);
    em_tensor *(*binary)(const em_tensor *, const em_tensor *);
    int pos, i32; /* a positive first input (log, pow); i32 inputs (the second one nonzero) */
} ew_case;

static em_tensor *EA, *EB;
static void run_ew(void *vc)
{
    const ew_case *c = vc;
    em_scope_begin();
    if (c->unary)
        c->unary(EA);
    else
        c->binary(EA, EB);
    em_scope_end();
}

static const ew_case ew_cases[] = {
    {"ew_exp", em_exp, NULL, 0, 0},
    {"ew_log", em_log, NULL, 1, 0},
    {"ew_tanh", em_tanh, NULL, 0, 0},
    {"ew_sigmoid", em_sigmoid, NULL, 0, 0},
    {"ew_silu", em_silu, NULL, 0, 0},
    {"ew_erf", em_erf, NULL, 0, 0},
    {"ew_add", NULL, em_add, 0, 0},
    {"ew_mul", NULL, em_mul, 0, 0},
    {"ew_div", NULL, em_div, 0, 0},
    {"ew_pow", NULL, em_pow, 1, 0},
    {"ew_maximum", NULL, em_maximum, 0, 0},
    {"ew_i32_add", NULL, em_add, 0, 1},
    {"ew_i32_div", NULL, em_div, 0, 1},
    {"ew_i32_remainder", NULL, em_remainder, 0, 1},
    {"ew_i32_maximum", NULL, em_maximum, 0, 1},
};

static void check(const char *what);

static void ew_bench(int argc, char **argv)
{
    if (!bench_selected(argc, argv, "ew_")) return;
    for (size_t i = 0; i < sizeof ew_cases / sizeof ew_cases[0]; i++) {
        const ew_case *c = &ew_cases[i];
        if (!bench_wanted(argc, argv, c->name)) continue;
        em_scope_begin();
        if (c->i32) {
            EA = em_randint(-1000, 1000, EM_SHAPE(1 << 20), EM_I32, EM_CPU);
            EB = em_randint(1, 100, EM_SHAPE(1 << 20), EM_I32, EM_CPU);
        } else {
            EA = em_randn(EM_SHAPE(1 << 20), EM_F32, EM_CPU);
            EB = em_randn(EM_SHAPE(1 << 20), EM_F32, EM_CPU);
            if (c->pos) EA = em_add_scalar(em_abs(EA), 0.5);
        }
        bench_run(c->name, run_ew, (void *)c, 3, 51, 1);
        check(c->name);
        em_scope_end();
    }
}

static int topk_dim;
static int64_t topk_k;
static void run_topk(void *c)
{
    em_scope_begin();
    em_tensor *v, *i;
    em_topk(X, topk_k, topk_dim, true, &v, &i);
    em_scope_end();
}

static void run_rfft(void *c)
{
    em_scope_begin();
    em_rfft(X, -1, 0);
    em_scope_end();
}

/* ---- training steps ---------------------------------------------------------------------- */

static em_module *net;
static em_optim *opt;
static em_tensor *tx, *ty;

static void run_train(void *c)
{
    em_scope_begin();
    em_tensor *logits = em_forward(net, tx);
    em_tensor *loss = em_cross_entropy(logits, ty, (em_ce_cfg){0});
    em_grads *g = em_backward(loss);
    em_optim_step(opt, g);
    em_grads_free(g);
    em_scope_end();
}

/* A training step of m on random inputs of shape xs and `targets` random class labels (the
 * rows of m's output) */
static void train_case(const char *name, em_module *m, em_shape xs, int64_t targets,
                       int64_t classes, int reps)
{
    net = m;
    opt = em_adam_new(net, (em_adam_cfg){.lr = 1e-3});
    tx = em_randn(xs, EM_F32, EM_CPU);
    ty = em_randint(0, classes, EM_SHAPE(targets), EM_I64, EM_CPU);
    bench_run(name, run_train, NULL, 3, reps, 4);
    em_optim_free(opt);
    em_module_free(net);
    em_release(tx);
    em_release(ty);
}

/* Warm-up calls of the large memory-bound cases: the library's first large call of an op family
 * and the six after it, in which it tries both kinds of stores (cpu_store_begin in cpu_fast.h)
 * before it keeps one; the timed calls then see the op as a training loop does after its first
 * steps. */
#define STORE_WARMUP 7

static void check(const char *what)
{
    if (em_last_status() != EM_OK) {
        fprintf(stderr, "%s: %s\n", what, em_last_error());
        exit(1);
    }
}

int main(int argc, char **argv)
{
    em_set_num_threads(2);
    printf("ember_threads\t%d\n", em_get_num_threads());
    int sizes[] = {256, 1024, 2048, 4096};
    for (int i = 0; i < 4; i++) {
        int n = sizes[i];
        char name[64];
        snprintf(name, sizeof name, "matmul_%d", n);
        if (!bench_selected(argc, argv, name)) continue;
        A = em_randn(EM_SHAPE(n, n), EM_F32, EM_CPU);
        B = em_randn(EM_SHAPE(n, n), EM_F32, EM_CPU);
        check(name);
        /* 256: a product of about 0.1 ms, so more warm-up calls and reps (the peers likewise) */
        bench_run(name, run_matmul, NULL, n <= 256 ? 20 : 1,
                  n >= 4096   ? 3
                  : n >= 2048 ? 5
                  : n >= 1024 ? 15
                              : 101,
                  n >= 4096 ? 10 : 3);
        em_release(A);
        em_release(B);
    }
    /* operands the GEMM packs straight from the tensor: bf16 (converted as packed, the result
     * rounded by the epilogue) and f32 views with every other column */
    if (bench_selected(argc, argv, "bf16_matmul_1024")) {
        em_tensor *a = em_randn(EM_SHAPE(1024, 1024), EM_F32, EM_CPU);
        em_tensor *b = em_randn(EM_SHAPE(1024, 1024), EM_F32, EM_CPU);
        A = em_cast(a, EM_BF16), B = em_cast(b, EM_BF16);
        em_release(a), em_release(b);
        check("bf16_matmul_1024");
        bench_run("bf16_matmul_1024", run_matmul, NULL, 1, 15, 3);
        em_release(A), em_release(B);
    }
    if (bench_selected(argc, argv, "strided_matmul_1024")) {
        em_tensor *a = em_randn(EM_SHAPE(1024, 2048), EM_F32, EM_CPU);
        em_tensor *b = em_randn(EM_SHAPE(1024, 2048), EM_F32, EM_CPU);
        A = em_slice(a, 1, 0, 2048, 2), B = em_slice(b, 1, 0, 2048, 2);
        em_release(a), em_release(b);
        check("strided_matmul_1024");
        bench_run("strided_matmul_1024", run_matmul, NULL, 1, 15, 3);
        em_release(A), em_release(B);
    }
    if (bench_selected(argc, argv, "gemv")) {
        A = em_randn(EM_SHAPE(4096, 4096), EM_F32, EM_CPU);
        V = em_randn(EM_SHAPE(4096), EM_F32, EM_CPU);
        if (bench_selected(argc, argv, "gemv_n")) bench_run("gemv_n", run_gemv_n, NULL, 3, 21, 3);
        if (bench_selected(argc, argv, "gemv_t")) bench_run("gemv_t", run_gemv_t, NULL, 3, 21, 3);
        check("gemv");
        em_release(A);
        em_release(V);
    }
    if (bench_selected(argc, argv, "conv_3x3")) {
        X = em_randn(EM_SHAPE(16, 64, 56, 56), EM_F32, EM_CPU);
        W = em_randn(EM_SHAPE(64, 64, 3, 3), EM_F32, EM_CPU);
        Bias = em_randn(EM_SHAPE(64), EM_F32, EM_CPU);
        conv_o = (em_conv_opts){.pad_lo = {1, 1}, .pad_hi = {1, 1}};
        bench_run("conv_3x3", run_conv, NULL, 1, 7, 4);
        check("conv_3x3");
        em_release(X), em_release(W), em_release(Bias);
    }
    if (bench_selected(argc, argv, "conv_7x7s2")) {
        X = em_randn(EM_SHAPE(16, 3, 224, 224), EM_F32, EM_CPU);
        W = em_randn(EM_SHAPE(64, 3, 7, 7), EM_F32, EM_CPU);
        Bias = em_randn(EM_SHAPE(64), EM_F32, EM_CPU);
        conv_o = (em_conv_opts){.stride = {2, 2}, .pad_lo = {3, 3}, .pad_hi = {3, 3}};
        bench_run("conv_7x7s2", run_conv, NULL, 1, 7, 4);
        check("conv_7x7s2");
        em_release(X), em_release(W), em_release(Bias);
    }
    if (bench_selected(argc, argv, "conv_fwbw_7x7s2")) {
        X = em_requires_grad(em_randn(EM_SHAPE(16, 3, 224, 224), EM_F32, EM_CPU), true);
        W = em_requires_grad(em_randn(EM_SHAPE(64, 3, 7, 7), EM_F32, EM_CPU), true);
        Bias = em_requires_grad(em_randn(EM_SHAPE(64), EM_F32, EM_CPU), true);
        R = em_randn(EM_SHAPE(16, 64, 112, 112), EM_F32, EM_CPU);
        conv_o = (em_conv_opts){.stride = {2, 2}, .pad_lo = {3, 3}, .pad_hi = {3, 3}};
        bench_run("conv_fwbw_7x7s2", run_conv_fwbw, NULL, 1, 7, 4);
        check("conv_fwbw_7x7s2");
        em_release(X), em_release(W), em_release(Bias), em_release(R);
    }
    if (bench_selected(argc, argv, "maxpool_k3s1")) {
        X = em_randn(EM_SHAPE(2, 128, 512, 512), EM_F32, EM_CPU);
        pool_o = (em_pool_opts){.kernel = {3, 3}, .stride = {1, 1}, .pad = {1, 1}};
        bench_run("maxpool_k3s1", run_pool, NULL, STORE_WARMUP, 7, 6);
        check("maxpool_k3s1");
        em_release(X);
    }
    if (bench_selected(argc, argv, "maxpool_k5s2d2_cl")) {
        em_tensor *nhwc = em_randn(EM_SHAPE(2, 512, 512, 128), EM_F32, EM_CPU);
        X = em_permute(nhwc, EM_AXES(0, 3, 1, 2));
        em_release(nhwc);
        pool_o =
            (em_pool_opts){.kernel = {5, 5}, .stride = {2, 2}, .pad = {2, 2}, .dilation = {2, 2}};
        bench_run("maxpool_k5s2d2_cl", run_pool, NULL, STORE_WARMUP, 7, 6);
        check("maxpool_k5s2d2_cl");
        em_release(X);
    }
    if (bench_selected(argc, argv, "softmax")) {
        X = em_randn(EM_SHAPE(64, 1024, 1024), EM_F32, EM_CPU);
        bench_run("softmax", run_softmax, NULL, STORE_WARMUP, 9, 5);
        check("softmax");
        em_release(X);
    }
    /* softmax's and cross entropy's backward (the softmax_backward record): [4096, 1024] under a
     * fixed output gradient; a 1000-class head's logits [4096, 1000] */
    if (bench_selected(argc, argv, "fwbw_softmax")) {
        X = em_requires_grad(em_randn(EM_SHAPE(4096, 1024), EM_F32, EM_CPU), true);
        R = em_randn(EM_SHAPE(4096, 1024), EM_F32, EM_CPU);
        bench_run("fwbw_softmax", run_fwbw_softmax, NULL, 2, 11, 4);
        check("fwbw_softmax");
        em_release(X);
        em_release(R);
    }
    if (bench_selected(argc, argv, "fwbw_xent")) {
        X = em_requires_grad(em_randn(EM_SHAPE(4096, 1000), EM_F32, EM_CPU), true);
        T = em_randint(0, 1000, EM_SHAPE(4096), EM_I64, EM_CPU);
        bench_run("fwbw_xent", run_fwbw_xent, NULL, 2, 11, 4);
        check("fwbw_xent");
        em_release(X);
        em_release(T);
    }
    if (bench_selected(argc, argv, "layer_norm")) {
        X = em_randn(EM_SHAPE(4096, 4096), EM_F32, EM_CPU);
        W = em_randn(EM_SHAPE(4096), EM_F32, EM_CPU);
        Bias = em_randn(EM_SHAPE(4096), EM_F32, EM_CPU);
        bench_run("layer_norm", run_layer_norm, NULL, STORE_WARMUP, 11, 4);
        check("layer_norm");
        em_release(X), em_release(W), em_release(Bias);
    }
    if (bench_selected(argc, argv, "gelu") || bench_selected(argc, argv, "sum")) {
        X = em_randn(EM_SHAPE(64 << 20), EM_F32, EM_CPU);
        if (bench_selected(argc, argv, "gelu"))
            bench_run("gelu", run_gelu, NULL, STORE_WARMUP, 9, 5);
        if (bench_selected(argc, argv, "sum")) bench_run("sum", run_sum, NULL, 1, 11, 4);
        check("gelu/sum");
        em_release(X);
    }
    ew_bench(argc, argv);
    if (bench_selected(argc, argv, "topk")) {
        X = em_randn(EM_SHAPE(16, 1024, 1024), EM_F32, EM_CPU);
        topk_k = 1, topk_dim = 0;
        if (bench_selected(argc, argv, "topk_k1_dim0"))
            bench_run("topk_k1_dim0", run_topk, NULL, 1, 9, 4);
        topk_k = 10, topk_dim = -1;
        if (bench_selected(argc, argv, "topk_k10_last"))
            bench_run("topk_k10_last", run_topk, NULL, 1, 9, 4);
        check("topk");
        em_release(X);
    }
    if (bench_selected(argc, argv, "rfft")) {
        X = em_randn(EM_SHAPE(1 << 20), EM_F32, EM_CPU);
        bench_run("rfft_1M", run_rfft, NULL, 2, 21, 3);
        check("rfft");
        em_release(X);
    }
    if (bench_selected(argc, argv, "train_mlp")) {
        em_module *m = em_sequential(EM_CPU, em_flatten_new(1, -1), em_linear_new(784, 512, EM_CPU),
                                     em_relu_new(), em_linear_new(512, 512, EM_CPU), em_relu_new(),
                                     em_linear_new(512, 10, EM_CPU));
        check("mlp");
        train_case("train_mlp", m, EM_SHAPE(128, 1, 28, 28), 128, 10, 41);
        check("train_mlp");
    }
    if (bench_selected(argc, argv, "train_cnn")) {
        em_module *m = em_sequential(
            EM_CPU,
            em_conv2d_new((em_conv2d_cfg){.in = 1, .out = 32, .kernel = {3, 3}, .padding = {1, 1}},
                          EM_CPU),
            em_relu_new(), em_max_pool2d_new((em_pool2d_cfg){.kernel = {2, 2}}),
            em_conv2d_new((em_conv2d_cfg){.in = 32, .out = 64, .kernel = {3, 3}, .padding = {1, 1}},
                          EM_CPU),
            em_relu_new(), em_max_pool2d_new((em_pool2d_cfg){.kernel = {2, 2}}),
            em_flatten_new(1, -1), em_linear_new(64 * 7 * 7, 10, EM_CPU));
        check("cnn");
        train_case("train_cnn", m, EM_SHAPE(64, 1, 28, 28), 64, 10, 21);
        check("train_cnn");
    }
    if (bench_selected(argc, argv, "train_lstm")) {
        /* a tagger: an LSTM (64 -> 256) over 32 sequences of 64 steps, a class of 10 per step */
        em_module *m = em_sequential(
            EM_CPU, em_lstm_new((em_rnn_cfg){.input_size = 64, .hidden_size = 256}, EM_CPU),
            em_flatten_new(0, 1), em_linear_new(256, 10, EM_CPU));
        check("lstm");
        train_case("train_lstm", m, EM_SHAPE(32, 64, 64), 32 * 64, 10, 11);
        check("train_lstm");
    }
    em_mem_stats s = em_mem_get_stats();
    printf("ember_cache\thits %lld misses %lld cached %lld MB\n", (long long)s.cache_hits,
           (long long)s.cache_misses, (long long)(s.cached_bytes >> 20));
    return 0;
}
