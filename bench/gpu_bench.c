/* Ember's side of the GPU benchmarks (scripts/gpu-check.sh): each case on cuda:0 through the public
 * API, timed with a host clock around the work and em_device_sync, one line per case as
 * bench_common.h prints them ("case median min max q1 q3 reps", ms). Inputs may be made through
 * the CPU fallback (random numbers), but a case whose timed op ran on the CPU prints no line (the
 * report marks it "not native"). */
#include <ember/ember.h>
#include <ember/nn_seq.h>
#include <math.h>

#include "backend/backend.h"

#include "bench_common.h"
#include "tensor/op.h"

static em_device dev;

typedef struct ctx {
    em_tensor *a, *b;
    int kind;  /* which op */
    int inner; /* ops per timed rep (small ops) */
} ctx;

enum {
    K_MATMUL,
    K_ADD,
    K_NEG,
    K_SUM,
    K_SUM_COLS, /* sum over dim 0 (a bias gradient) */
    K_SUM_ROWS, /* sum over the last dim */
    K_SOFTMAX,
    K_TINY_ADD,
    K_LAYER_NORM,
    K_MAXPOOL,
    K_CONV, /* conv2d 3x3 pad 1 of a and the weight b, no bias */
    K_TOPK1_DIM0,
    K_TOPK10_LAST,
    K_SDPA,
    K_SDPA_CAUSAL,
    K_SDPA_FWBW, /* sdpa forward and backward (the vector-Jacobian product with a fixed seed) */
    K_SDPA_FWBW_CAUSAL,
    K_SOFTMAX_FWBW, /* softmax over the last dim and its backward under the fixed out_g */
    K_XENT_FWBW,    /* cross entropy of the logits a against `targets`, and its backward */
    K_LN_FWBW,      /* layer norm of a with ln_w, ln_b and its backward under the fixed out_g */
    K_TRAIN,        /* forward, cross entropy, backward, Adam step */
    K_ENC_FORWARD,  /* transformer encoder forward without grad */
    K_ENC_TRAIN,    /* transformer encoder: forward, mean of squares, backward, Adam step */
    K_H2D,          /* a (on the host, pinned or not) to the device */
    K_D2H,          /* a (on the device) to a new host tensor */
    K_D2H_INTO,     /* a (on the device) into the host tensor b (pinned) */
    K_GRAPH,        /* one replay of `graph` */
};

/* graph_add_1000's graph: 1000 chained one-element adds */
static em_graph *graph;

/* the attention forward-backward cases' keys, values and output gradient (q is ctx.a); fwbw_softmax
 * takes its output gradient from out_g too */
static em_tensor *attn_k, *attn_v, *out_g;

/* fwbw_layer_norm's weight and bias */
static em_tensor *ln_w, *ln_b;

/* the model cases' module, optimizer and targets */
static em_module *net;
static em_optim *opt;
static em_tensor *targets;

static void step(void *p)
{
    ctx *c = p;
    for (int i = 0; i < c->inner; i++) {
        em_scope_begin();
        switch (c->kind) {
        case K_MATMUL: em_matmul(c->a, c->b); break;
        case K_ADD:
        case K_TINY_ADD: em_add(c->a, c->b); break;
        case K_GRAPH: em_graph_replay(graph); break;
        case K_H2D: em_to_device(c->a, dev); break;
        case K_D2H: em_to_device(c->a, EM_CPU); break;
        case K_D2H_INTO:
            em_to_data(c->a, em_tensor_data(c->b), EM_F32, em_tensor_numel(c->a));
            break;
        case K_NEG: em_neg(c->a); break;
        case K_SUM: em_sum(c->a, EM_ALL, false); break;
        case K_SUM_COLS: em_sum(c->a, EM_AXES(0), false); break;
        case K_SUM_ROWS: em_sum(c->a, EM_AXES(-1), false); break;
        case K_SOFTMAX: em_softmax(c->a, -1); break;
        case K_LAYER_NORM: em_layer_norm(c->a, 1, NULL, NULL, 1e-5); break;
        case K_MAXPOOL:
            em_max_pool2d(c->a, (em_pool_opts){.kernel = {3, 3}, .stride = {1, 1}, .pad = {1, 1}},
                          NULL);
            break;
        case K_CONV:
            em_conv2d(c->a, c->b, NULL, (em_conv_opts){.pad_lo = {1, 1}, .pad_hi = {1, 1}});
            break;
        case K_TOPK1_DIM0:
        case K_TOPK10_LAST: {
            em_tensor *v = NULL, *ix = NULL;
            bool last = c->kind == K_TOPK10_LAST;
            em_topk(c->a, last ? 10 : 1, last ? -1 : 0, true, &v, &ix); /* the scope frees both */
            break;
        }
        case K_SDPA:
        case K_SDPA_CAUSAL:
            em_sdpa(c->a, c->a, c->a, NULL, (em_sdpa_opts){.causal = c->kind == K_SDPA_CAUSAL});
            break;
        case K_SDPA_FWBW:
        case K_SDPA_FWBW_CAUSAL: {
            em_tensor *y = em_sdpa(c->a, attn_k, attn_v, NULL,
                                   (em_sdpa_opts){.causal = c->kind == K_SDPA_FWBW_CAUSAL});
            em_grads *g = em_backward_with(&y, &out_g, 1, (em_backward_opts){0});
            em_grads_free(g);
            break;
        }
        case K_SOFTMAX_FWBW: {
            em_tensor *y = em_softmax(c->a, -1);
            em_grads_free(em_backward_with(&y, &out_g, 1, (em_backward_opts){0}));
            break;
        }
        case K_XENT_FWBW:
            em_grads_free(em_backward(em_cross_entropy(c->a, targets, (em_ce_cfg){0})));
            break;
        case K_LN_FWBW: {
            em_tensor *y = em_layer_norm(c->a, 1, ln_w, ln_b, 1e-5);
            em_grads_free(em_backward_with(&y, &out_g, 1, (em_backward_opts){0}));
            break;
        }
        case K_TRAIN: {
            em_tensor *loss = em_cross_entropy(em_forward(net, c->a), targets, (em_ce_cfg){0});
            em_grads *g = em_backward(loss);
            em_optim_step(opt, g);
            em_grads_free(g);
            break;
        }
        case K_ENC_FORWARD:
            em_no_grad_begin();
            em_forward(net, c->a);
            em_no_grad_end();
            break;
        case K_ENC_TRAIN: {
            em_tensor *y = em_forward(net, c->a);
            em_grads *g = em_backward(em_mean(em_square(y), EM_ALL, false));
            em_optim_step(opt, g);
            em_grads_free(g);
            break;
        }
        }
        em_scope_end();
    }
    em_device_sync(dev);
    if (em_failed()) {
        fprintf(stderr, "gpu_bench: %s\n", em_last_error());
        exit(1);
    }
}

/* The GPU's power cap lowers its clocks for a fraction of a second after heavy work, so a
 * product timed right after a heavy one (or after its own tuning trials) runs slower than the
 * same product alone. The tensor-core and FMA-bound cases (matmul, conv, sdpa) therefore leave
 * the GPU idle for EMBER_BENCH_PAUSE seconds (default 0.5; 0 for none) after their first call and
 * before their warm-up, as bench/gpu_torch.py does, so both sides start from the same state; the
 * host spins meanwhile (a sleeping host core clocks down). Launch-bound cases get no pause: after
 * an idle GPU they run slower on both sides, PyTorch's more. The clocks and timings behind this
 * are in bench/RESULTS.md, evidence section. */
static void idle_pause(const char *name)
{
    if (strncmp(name, "matmul", 6) && strncmp(name, "conv", 4) && strncmp(name, "sdpa", 4)) return;
    const char *e = getenv("EMBER_BENCH_PAUSE");
    double s = e && *e ? atof(e) : 0.5;
    for (double end = bench_now() + s; bench_now() < end;) {
    }
}

static int64_t fallbacks(void)
{
    int64_t n = 0;
    for (int k = 0; k < EM_OP_COUNT; k++) n += tn_fallback_count((em_op_kind)k);
    return n;
}

/* EMBER_BENCH_PROFILE=1: after the timing, one more step with every op synchronised, the kinds
 * that took longest printed to stderr; 2: each op on its own line too (with shapes). */
static void profile_step(const char *name, ctx *c)
{
    const char *pe = getenv("EMBER_BENCH_PROFILE");
    if (pe && (*pe == '1' || *pe == '2')) { /* one more step, every op synchronised and timed */
        tn_profile_reset();
        tn_profile_enable(true);
        tn_profile_trace(*pe == '2'); /* 2: each op on its own line too */
        step(c);
        tn_profile_enable(false);
        tn_profile_trace(false);
        double total = 0, s[EM_OP_COUNT];
        int64_t n[EM_OP_COUNT];
        for (int k = 0; k < EM_OP_COUNT; k++)
            tn_profile_get((em_op_kind)k, &n[k], &s[k]), total += s[k];
        fprintf(stderr, "%s: one step with each op synchronised: %.3f ms\n", name, total * 1e3);
        for (int r = 0; r < 12; r++) {
            int best = -1;
            for (int k = 0; k < EM_OP_COUNT; k++)
                if (n[k] && (best < 0 || s[k] > s[best])) best = k;
            if (best < 0) break;
            fprintf(stderr, "  %-16s %5lld ops %8.3f ms\n", em_op_name((em_op_kind)best),
                    (long long)n[best], s[best] * 1e3);
            n[best] = 0;
        }
    }
}

static void run_case(const char *name, int kind, em_tensor *a, em_tensor *b, int inner, int reps,
                     double budget)
{
    ctx c = {a, b, kind, inner};
    int64_t before = fallbacks();
    step(&c);
    if (fallbacks() != before) {
        fprintf(stderr, "%s: the op ran on the cpu (cpu_fallback), not timed\n", name);
        return;
    }
    idle_pause(name);
    bench_run(name, step, &c, 2, reps, budget);
    profile_step(name, &c);
}

/* A whole model step: timed even when some of its ops take the CPU fallback; a "note" line says
 * which kinds did (per step) so the report can mark the case. */
static void run_model_case(const char *name, int kind, em_tensor *a, int reps, double budget)
{
    ctx c = {a, NULL, kind, 1};
    int64_t before[EM_OP_COUNT];
    for (int k = 0; k < EM_OP_COUNT; k++) before[k] = tn_fallback_count((em_op_kind)k);
    step(&c);
    char note[1024] = "";
    size_t len = 0;
    for (int k = 0; k < EM_OP_COUNT && len < sizeof note - 64; k++) {
        int64_t d = tn_fallback_count((em_op_kind)k) - before[k];
        if (d > 0)
            len += (size_t)snprintf(note + len, sizeof note - len, "%s%s x%lld", len ? ", " : "",
                                    em_op_name((em_op_kind)k), (long long)d);
    }
    if (len) printf("note\t%s\tvia cpu per step: %s\n", name, note);
    idle_pause(name);
    bench_run(name, step, &c, 2, reps, budget);
    profile_step(name, &c);
}

/* A training step of `net` under `opt` on x (MSE against y, or cross entropy against `targets`
 * when y is NULL) run once eagerly (the optimizer's state made, kernels compiled), then captured;
 * a rep is one replay of the graph. */
static void run_graph_case(const char *name, em_tensor *x, em_tensor *y, int reps)
{
    for (int pass = 0; pass < 2; pass++) { /* eager, then captured */
        if (pass) em_graph_capture_begin(dev);
        em_scope_begin();
        em_tensor *out = em_forward(net, x);
        em_grads *g = em_backward(y ? em_mse_loss(out, y, EM_REDUCTION_MEAN)
                                    : em_cross_entropy(out, targets, (em_ce_cfg){0}));
        em_optim_step(opt, g);
        em_grads_free(g);
        em_scope_end();
    }
    graph = em_graph_capture_end(dev);
    if (graph)
        run_case(name, K_GRAPH, x, y, 1, reps, 4.0);
    else
        fprintf(stderr, "%s: %s\n", name, em_last_error());
    em_graph_free(graph);
    graph = NULL;
}

static void model_case(const char *name, em_module *m, em_shape xs, int64_t classes, int reps)
{
    net = m;
    opt = em_adam_new(net, (em_adam_cfg){.lr = 1e-3});
    em_tensor *x = em_randn(xs, EM_F32, dev);
    targets = em_randint(0, classes, EM_SHAPE(xs.dims[0]), EM_I64, dev);
    run_model_case(name, K_TRAIN, x, reps, 4.0);
    em_optim_free(opt);
    em_module_free(net);
    em_release(x);
    em_release(targets);
}

int main(int argc, char **argv)
{
    em_backends_init();
    const char *dname = getenv("EMBER_BENCH_DEVICE"); /* another device, to try the cases out */
    dev = em_device_parse(dname && *dname ? dname : "cuda:0");
    if (em_failed()) {
        printf("skipped: no CUDA device (%s)\n", em_last_error());
        return 0;
    }
    em_seed(0);
    static const int sizes[] = {1024, 2048, 4096, 8192};
    static const struct {
        const char *name;
        em_dtype dt;
    } mts[] = {{"f32", EM_F32}, {"bf16", EM_BF16}, {"f16", EM_F16}, {"tf32", EM_F32}};
    for (size_t t = 0; t < 4; t++)
        for (size_t i = 0; i < 4; i++) {
            char name[64];
            snprintf(name, sizeof name, "matmul_%s_%d", mts[t].name, sizes[i]);
            if (!bench_selected(argc, argv, name)) continue;
            int n = sizes[i];
            em_config_set("cuda_tf32", t == 3 ? "1" : "0");
            em_tensor *a = em_randn(EM_SHAPE(n, n), mts[t].dt, dev);
            em_tensor *b = em_randn(EM_SHAPE(n, n), mts[t].dt, dev);
            run_case(name, K_MATMUL, a, b, n <= 2048 ? 10 : 1, 21, 2.0);
            em_release(a);
            em_release(b);
        }
    em_config_set("cuda_tf32", "0");
    /* f32 matrix-vector products, A [4096][4096] times x and x times A (10 per timed rep) */
    for (int t = 0; t < 2; t++) {
        const char *name = t ? "gemv_t_4096" : "gemv_n_4096";
        if (!bench_selected(argc, argv, name)) continue;
        em_tensor *a = em_randn(EM_SHAPE(4096, 4096), EM_F32, dev),
                  *x = em_randn(EM_SHAPE(4096), EM_F32, dev);
        run_case(name, K_MATMUL, t ? x : a, t ? a : x, 10, 21, 2.0);
        em_release(a);
        em_release(x);
    }
    /* short exact-f32 products of a small transformer's step (1024 tokens, d_model 256,
     * feed-forward 1024, train_lm's vocabulary 8192): sgemm_MxNxK, a [M, K] @ b [K, N]; _t: a the
     * transpose of a [K, M] tensor (a weight gradient); 10 per timed rep */
    static const struct {
        int m, n, k, t;
    } shorts[] = {{1024, 768, 256, 0},  {1024, 256, 256, 0},  {1024, 1024, 256, 0},
                  {1024, 256, 1024, 0}, {256, 768, 1024, 1},  {256, 1024, 1024, 1},
                  {1024, 8192, 256, 0}, {1024, 256, 8192, 0}, {8192, 256, 1024, 1},
                  {1024, 256, 4096, 0}};
    for (size_t i = 0; i < sizeof shorts / sizeof shorts[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "sgemm_%dx%dx%d%s", shorts[i].m, shorts[i].n, shorts[i].k,
                 shorts[i].t ? "_t" : "");
        if (!bench_selected(argc, argv, name)) continue;
        em_tensor *a = shorts[i].t ? em_randn(EM_SHAPE(shorts[i].k, shorts[i].m), EM_F32, dev)
                                   : em_randn(EM_SHAPE(shorts[i].m, shorts[i].k), EM_F32, dev);
        em_tensor *b = em_randn(EM_SHAPE(shorts[i].k, shorts[i].n), EM_F32, dev);
        em_tensor *at = shorts[i].t ? em_transpose(a, 0, 1) : a;
        run_case(name, K_MATMUL, at, b, 10, 21, 2.0);
        if (shorts[i].t) em_release(at);
        em_release(a);
        em_release(b);
    }
    /* the mma.sync kernel (128 x 128 tiles) at sizes where wgmma is chosen, for comparison */
    for (int n = 4096; n <= 8192; n *= 2) {
        char name[64];
        snprintf(name, sizeof name, "matmul_bf16mma_%d", n);
        if (!bench_selected(argc, argv, name)) continue;
        em_config_set("cuda_mm_tile", "narrow");
        em_config_set("cuda_wgmma", "off");
        em_tensor *a = em_randn(EM_SHAPE(n, n), EM_BF16, dev),
                  *b = em_randn(EM_SHAPE(n, n), EM_BF16, dev);
        run_case(name, K_MATMUL, a, b, 1, 21, 2.0);
        em_release(a);
        em_release(b);
        em_config_set("cuda_mm_tile", "auto");
        em_config_set("cuda_wgmma", "on");
    }
    int64_t big = (int64_t)1 << 28; /* 256 Mi floats: 1 GiB per tensor */
    if (bench_selected(argc, argv, "add_256m") || bench_selected(argc, argv, "neg_256m") ||
        bench_selected(argc, argv, "sum_256m")) {
        em_tensor *a = em_randn(EM_SHAPE(big), EM_F32, dev),
                  *b = em_randn(EM_SHAPE(big), EM_F32, dev);
        if (bench_selected(argc, argv, "add_256m")) run_case("add_256m", K_ADD, a, b, 1, 21, 2.0);
        if (bench_selected(argc, argv, "neg_256m"))
            run_case("neg_256m", K_NEG, a, NULL, 1, 21, 2.0);
        if (bench_selected(argc, argv, "sum_256m"))
            run_case("sum_256m", K_SUM, a, NULL, 1, 21, 2.0);
        em_release(a);
        em_release(b);
    }
    /* row broadcasts of [16384, 8192] f32 (128 Mi elements) by a [16384, 1] column and by an
     * [8192] row (the scalings and bias additions of norm and loss backward passes), and its
     * sums over dim 0 (a bias gradient) and over the last dim */
    if (bench_selected(argc, argv, "add_bcast") || bench_selected(argc, argv, "sum_cols") ||
        bench_selected(argc, argv, "sum_rows")) {
        em_tensor *a = em_randn(EM_SHAPE(16384, 8192), EM_F32, dev),
                  *c = em_randn(EM_SHAPE(16384, 1), EM_F32, dev),
                  *r = em_randn(EM_SHAPE(8192), EM_F32, dev);
        if (bench_selected(argc, argv, "add_bcast_col"))
            run_case("add_bcast_col", K_ADD, a, c, 1, 21, 2.0);
        if (bench_selected(argc, argv, "add_bcast_row"))
            run_case("add_bcast_row", K_ADD, a, r, 1, 21, 2.0);
        if (bench_selected(argc, argv, "sum_cols"))
            run_case("sum_cols", K_SUM_COLS, a, NULL, 1, 21, 2.0);
        if (bench_selected(argc, argv, "sum_rows"))
            run_case("sum_rows", K_SUM_ROWS, a, NULL, 1, 21, 2.0);
        em_release(a);
        em_release(c);
        em_release(r);
    }
    /* host <-> device copies of 64 Mi floats (256 MiB): pageable memory through the staging
       buffers, and pinned memory (em_pin_memory) by one DMA */
    if (bench_selected(argc, argv, "h2d") || bench_selected(argc, argv, "d2h")) {
        em_tensor *h = em_rand_uniform(EM_SHAPE((int64_t)1 << 26), 0, 1, EM_F32, EM_CPU);
        em_tensor *p = em_pin_memory(h), *d = em_to_device(h, dev);
        if (!em_tensor_is_pinned(p)) fprintf(stderr, "gpu_bench: em_pin_memory did not pin\n");
        if (bench_selected(argc, argv, "h2d_64m")) run_case("h2d_64m", K_H2D, h, NULL, 1, 11, 2.0);
        if (bench_selected(argc, argv, "h2d_pinned_64m"))
            run_case("h2d_pinned_64m", K_H2D, p, NULL, 1, 11, 2.0);
        if (bench_selected(argc, argv, "d2h_64m")) run_case("d2h_64m", K_D2H, d, NULL, 1, 11, 2.0);
        if (bench_selected(argc, argv, "d2h_pinned_64m"))
            run_case("d2h_pinned_64m", K_D2H_INTO, d, p, 1, 11, 2.0);
        em_release(h);
        em_release(p);
        em_release(d);
    }
    if (bench_selected(argc, argv, "softmax")) {
        em_tensor *a = em_randn(EM_SHAPE(64, 1024, 1024), EM_F32, dev);
        run_case("softmax", K_SOFTMAX, a, NULL, 1, 21, 2.0);
        em_release(a);
    }
    /* softmax and cross entropy forward and backward (the softmax_backward record): softmax of
     * [65536, 1024] f32 under a fixed output gradient (a row per warp), cross entropy of [4096,
     * 8192] logits (a row per block) */
    if (bench_selected(argc, argv, "fwbw_softmax")) {
        em_tensor *a = em_requires_grad(em_randn(EM_SHAPE(65536, 1024), EM_F32, dev), true);
        out_g = em_randn(EM_SHAPE(65536, 1024), EM_F32, dev);
        run_case("fwbw_softmax", K_SOFTMAX_FWBW, a, NULL, 1, 21, 2.0);
        em_release(a);
        em_release(out_g);
        out_g = NULL;
    }
    if (bench_selected(argc, argv, "fwbw_xent")) {
        em_tensor *a = em_requires_grad(em_randn(EM_SHAPE(4096, 8192), EM_F32, dev), true);
        targets = em_randint(0, 8192, EM_SHAPE(4096), EM_I64, dev);
        run_case("fwbw_xent", K_XENT_FWBW, a, NULL, 1, 21, 2.0);
        em_release(a);
        em_release(targets);
        targets = NULL;
    }
    if (bench_selected(argc, argv, "layer_norm")) {
        em_tensor *a = em_randn(EM_SHAPE(4096, 4096), EM_F32, dev);
        run_case("layer_norm", K_LAYER_NORM, a, NULL, 10, 21, 2.0);
        em_release(a);
    }
    /* layer norm of [4096, 4096] f32 with a weight and a bias, forward and backward (x, weight
     * and bias gradients) under a fixed output gradient */
    if (bench_selected(argc, argv, "fwbw_layer_norm")) {
        em_tensor *a = em_requires_grad(em_randn(EM_SHAPE(4096, 4096), EM_F32, dev), true);
        ln_w = em_requires_grad(em_randn(EM_SHAPE(4096), EM_F32, dev), true);
        ln_b = em_requires_grad(em_randn(EM_SHAPE(4096), EM_F32, dev), true);
        out_g = em_randn(EM_SHAPE(4096, 4096), EM_F32, dev);
        run_case("fwbw_layer_norm", K_LN_FWBW, a, NULL, 1, 21, 2.0);
        em_release(a);
        em_release(ln_w);
        em_release(ln_b);
        em_release(out_g);
        ln_w = ln_b = out_g = NULL;
    }
    if (bench_selected(argc, argv, "maxpool_k3s1")) {
        em_tensor *a = em_randn(EM_SHAPE(2, 128, 512, 512), EM_F32, dev);
        run_case("maxpool_k3s1", K_MAXPOOL, a, NULL, 1, 21, 2.0);
        em_release(a);
    }
    /* conv2d 3x3 pad 1, C -> C: [16, 64, 56, 56], [16, 128, 56, 56], [32, 256, 28, 28] and
     * [32, 512, 14, 14]; f16/bf16 also on each path forced (config cuda_conv_kernel; Ember
     * only): _mma the mma.sync implicit GEMM, _cols the columns and one product, _tw the wgmma
     * implicit GEMM; f32 also on each path forced (_mma: the FFMA implicit GEMM, _i2c: the
     * copy engine's im2col mode, _i2c_s1: the same without split-K, config cuda_conv_splits = 1) */
    for (int c = 0; c < 4; c++)
        for (int t = 0; t < 3; t++) {
            const char *tn[] = {"f32", "bf16", "f16"};
            em_dtype dt[] = {EM_F32, EM_BF16, EM_F16};
            const int64_t chs[] = {64, 128, 256, 512}, hws[] = {56, 56, 28, 14},
                          ns[] = {16, 16, 32, 32};
            int64_t ch = chs[c], hw = hws[c], n = ns[c];
            char name[48];
            snprintf(name, sizeof name, "conv_%s_%lld", tn[t], (long long)ch);
            if (!bench_selected(argc, argv, name)) continue;
            em_tensor *a = em_randn(EM_SHAPE(n, ch, hw, hw), dt[t], dev);
            em_tensor *b = em_randn(EM_SHAPE(ch, ch, 3, 3), dt[t], dev);
            run_case(name, K_CONV, a, b, 1, 21, 2.0);
            for (int f = 0; t > 0 && f < 3; f++) {
                const char *path[] = {"mma", "columns", "wgmma"}, *suf[] = {"mma", "cols", "tw"};
                char forced[56];
                snprintf(forced, sizeof forced, "%s_%s", name, suf[f]);
                em_config_set("cuda_conv_kernel", path[f]);
                run_case(forced, K_CONV, a, b, 1, 21, 2.0);
            }
            em_config_set("cuda_conv_kernel", NULL);
            for (int f = 0; t == 0 && f < 3; f++) {
                const char *path[] = {"mma", "sgt_im2col", "sgt_im2col"},
                           *suf[] = {"mma", "i2c", "i2c_s1"};
                char forced[56];
                snprintf(forced, sizeof forced, "%s_%s", name, suf[f]);
                em_config_set("cuda_conv_kernel", path[f]);
                em_config_set("cuda_conv_splits", f == 2 ? "1" : NULL);
                run_case(forced, K_CONV, a, b, 1, 21, 2.0);
            }
            em_config_set("cuda_conv_kernel", NULL);
            em_config_set("cuda_conv_splits", NULL);
            em_release(a);
            em_release(b);
        }
    if (bench_selected(argc, argv, "topk")) {
        em_tensor *a = em_randn(EM_SHAPE(16, 1024, 1024), EM_F32, dev);
        if (bench_selected(argc, argv, "topk_k1_dim0"))
            run_case("topk_k1_dim0", K_TOPK1_DIM0, a, NULL, 1, 21, 2.0);
        if (bench_selected(argc, argv, "topk_k10_last"))
            run_case("topk_k10_last", K_TOPK10_LAST, a, NULL, 1, 21, 2.0);
        em_release(a);
    }
    /* attention: q = k = v [B=2, H=16, S=8192, D=128] bf16 */
    if (bench_selected(argc, argv, "sdpa")) {
        em_tensor *q = em_randn(EM_SHAPE(2, 16, 8192, 128), EM_BF16, dev);
        if (bench_selected(argc, argv, "sdpa_bf16_8k"))
            run_case("sdpa_bf16_8k", K_SDPA, q, NULL, 1, 11, 3.0);
        if (bench_selected(argc, argv, "sdpa_bf16_8k_causal"))
            run_case("sdpa_bf16_8k_causal", K_SDPA_CAUSAL, q, NULL, 1, 11, 3.0);
        em_release(q);
    }
    /* attention forward and backward: q, k, v [2, 16, 8192, 128] bf16 leaves, a fixed output
       gradient; the backward is the fused record (kernels/attention_bwd.cu) */
    if (bench_selected(argc, argv, "sdpa_fwbw")) {
        em_shape s = EM_SHAPE(2, 16, 8192, 128);
        em_tensor *q = em_requires_grad(em_randn(s, EM_BF16, dev), true);
        attn_k = em_requires_grad(em_randn(s, EM_BF16, dev), true);
        attn_v = em_requires_grad(em_randn(s, EM_BF16, dev), true);
        out_g = em_randn(s, EM_BF16, dev);
        int64_t fused = tn_op_count(EM_OP_SDPA_BACKWARD);
        if (bench_selected(argc, argv, "sdpa_fwbw_bf16_8k"))
            run_case("sdpa_fwbw_bf16_8k", K_SDPA_FWBW, q, NULL, 1, 11, 4.0);
        if (bench_selected(argc, argv, "sdpa_fwbw_bf16_8k_causal"))
            run_case("sdpa_fwbw_bf16_8k_causal", K_SDPA_FWBW_CAUSAL, q, NULL, 1, 11, 4.0);
        if (tn_op_count(EM_OP_SDPA_BACKWARD) == fused)
            printf("note\tsdpa_fwbw_bf16_8k\tthe backward composed ops (no fused sdpa_backward)\n");
        em_release(q);
        em_release(attn_k);
        em_release(attn_v);
        em_release(out_g);
    }
    if (bench_wanted(argc, argv, "train_mlp")) {
        em_module *m =
            em_sequential(dev, em_flatten_new(1, -1), em_linear_new(784, 512, dev), em_relu_new(),
                          em_linear_new(512, 512, dev), em_relu_new(), em_linear_new(512, 10, dev));
        model_case("train_mlp", m, EM_SHAPE(128, 1, 28, 28), 10, 41);
    }
    if (bench_selected(argc, argv, "train_cnn")) {
        em_module *m = em_sequential(
            dev,
            em_conv2d_new((em_conv2d_cfg){.in = 1, .out = 32, .kernel = {3, 3}, .padding = {1, 1}},
                          dev),
            em_relu_new(), em_max_pool2d_new((em_pool2d_cfg){.kernel = {2, 2}}),
            em_conv2d_new((em_conv2d_cfg){.in = 32, .out = 64, .kernel = {3, 3}, .padding = {1, 1}},
                          dev),
            em_relu_new(), em_max_pool2d_new((em_pool2d_cfg){.kernel = {2, 2}}),
            em_flatten_new(1, -1), em_linear_new(64 * 7 * 7, 10, dev));
        model_case("train_cnn", m, EM_SHAPE(64, 1, 28, 28), 10, 41);
    }
    /* transformer encoder: d_model 768, 12 heads, 12 layers, feed-forward 2048 (PyTorch's
     * default), no dropout, post-norm, batch first; input [2, 256, 768] f32 */
    if (bench_selected(argc, argv, "encoder")) {
        em_transformer_cfg cfg = {
            .d_model = 768, .nhead = 12, .num_layers = 12, .no_dropout = true};
        net = em_transformer_encoder_new(cfg, dev);
        opt = em_adam_new(net, (em_adam_cfg){.lr = 1e-4});
        em_tensor *x = em_randn(EM_SHAPE(2, 256, 768), EM_F32, dev);
        if (bench_selected(argc, argv, "encoder_fwd"))
            run_model_case("encoder_fwd", K_ENC_FORWARD, x, 21, 3.0);
        if (bench_selected(argc, argv, "encoder_train"))
            run_model_case("encoder_train", K_ENC_TRAIN, x, 21, 4.0);
        em_optim_free(opt);
        em_module_free(net);
        em_release(x);
    }
    if (bench_selected(argc, argv, "tiny_add")) {
        em_tensor *a = em_randn(EM_SHAPE(1), EM_F32, dev), *b = em_randn(EM_SHAPE(1), EM_F32, dev);
        run_case("tiny_add", K_TINY_ADD, a, b, 1000, 11, 2.0); /* ms per 1000 ops */
        em_release(a);
        em_release(b);
    }
    if (bench_selected(argc, argv, "graph_add_1000")) {
        /* the tiny add 1000 times in a chain, captured once; a rep is one replay */
        em_tensor *a = em_randn(EM_SHAPE(1), EM_F32, dev), *b = em_randn(EM_SHAPE(1), EM_F32, dev);
        em_release(em_add(a, b)); /* the kernel compiles outside the capture */
        em_scope_begin();
        em_graph_capture_begin(dev);
        em_tensor *y = a;
        for (int i = 0; i < 1000; i++) y = em_add(y, b);
        graph = em_graph_capture_end(dev);
        em_scope_end();
        if (graph)
            run_case("graph_add_1000", K_GRAPH, a, b, 1, 21, 2.0); /* ms per 1000 ops */
        else
            fprintf(stderr, "graph_add_1000: %s\n", em_last_error());
        em_graph_free(graph);
        graph = NULL;
        em_release(a);
        em_release(b);
    }
    /* a small language model: token embedding (8192 words, 256 wide), a 2-layer transformer
     * encoder (4 heads, feed-forward 1024, no dropout, post-norm), a linear head over the
     * vocabulary; 16 sequences of 64 tokens, cross entropy on every token, Adam. train_lm: eager
     * steps; train_lm_graph: the step captured after one eager step, a rep is one replay */
    if (bench_selected(argc, argv, "train_lm")) {
        em_transformer_cfg cfg = {.d_model = 256,
                                  .nhead = 4,
                                  .dim_feedforward = 1024,
                                  .num_layers = 2,
                                  .no_dropout = true};
        net = em_sequential(dev, em_embedding_new((em_embedding_cfg){.num = 8192, .dim = 256}, dev),
                            em_transformer_encoder_new(cfg, dev), em_linear_new(256, 8192, dev),
                            em_flatten_new(0, 1));
        opt = em_adam_new(net, (em_adam_cfg){.lr = 1e-3});
        em_tensor *x = em_randint(0, 8192, EM_SHAPE(16, 64), EM_I64, dev);
        targets = em_randint(0, 8192, EM_SHAPE(16 * 64), EM_I64, dev);
        if (bench_wanted(argc, argv, "train_lm")) run_model_case("train_lm", K_TRAIN, x, 21, 4.0);
        if (bench_wanted(argc, argv, "train_lm_graph"))
            run_graph_case("train_lm_graph", x, NULL, 21);
        em_optim_free(opt);
        em_module_free(net);
        em_release(x);
        em_release(targets);
    }
    if (bench_selected(argc, argv, "train_mlp_graph")) {
        /* train_mlp's MLP with an MSE loss: forward, backward and the Adam step captured after
         * one eager step; a rep is one replay */
        net =
            em_sequential(dev, em_flatten_new(1, -1), em_linear_new(784, 512, dev), em_relu_new(),
                          em_linear_new(512, 512, dev), em_relu_new(), em_linear_new(512, 10, dev));
        opt = em_adam_new(net, (em_adam_cfg){.lr = 1e-3});
        em_tensor *x = em_randn(EM_SHAPE(128, 1, 28, 28), EM_F32, dev);
        em_tensor *y = em_randn(EM_SHAPE(128, 10), EM_F32, dev);
        run_graph_case("train_mlp_graph", x, y, 41);
        em_optim_free(opt);
        em_module_free(net);
        em_release(x);
        em_release(y);
    }
    return 0;
}
