/* Ember's side of the GPU benchmarks (bench/gpu_run.sh): each case on cuda:0 through the public
 * API, timed with a host clock around the work and em_device_sync, one line per case as
 * bench_common.h prints them ("case median min max q1 q3 reps", ms). Inputs may be made through
 * the CPU fallback (random numbers), but a case whose timed op ran on the CPU prints no line (the
 * report marks it "not native"). */
#include <ember/ember.h>
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

enum { K_MATMUL, K_ADD, K_NEG, K_SUM, K_SOFTMAX, K_TINY_ADD, K_LAYER_NORM, K_MAXPOOL };

static void step(void *p)
{
    ctx *c = p;
    for (int i = 0; i < c->inner; i++) {
        em_scope_begin();
        switch (c->kind) {
        case K_MATMUL: em_matmul(c->a, c->b); break;
        case K_ADD:
        case K_TINY_ADD: em_add(c->a, c->b); break;
        case K_NEG: em_neg(c->a); break;
        case K_SUM: em_sum(c->a, EM_ALL, false); break;
        case K_SOFTMAX: em_softmax(c->a, -1); break;
        case K_LAYER_NORM: em_layer_norm(c->a, 1, NULL, NULL, 1e-5); break;
        case K_MAXPOOL:
            em_max_pool2d(c->a, (em_pool_opts){.kernel = {3, 3}, .stride = {1, 1}, .pad = {1, 1}},
                          NULL);
            break;
        }
        em_scope_end();
    }
    em_device_sync(dev);
    if (em_failed()) {
        fprintf(stderr, "gpu_bench: %s\n", em_last_error());
        exit(1);
    }
}

static int64_t fallbacks(void)
{
    int64_t n = 0;
    for (int k = 0; k < EM_OP_COUNT; k++) n += tn_fallback_count((em_op_kind)k);
    return n;
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
    bench_run(name, step, &c, 2, reps, budget);
}

int main(int argc, char **argv)
{
    em_backends_init();
    dev = em_device_parse("cuda:0");
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
    if (bench_selected(argc, argv, "softmax")) {
        em_tensor *a = em_randn(EM_SHAPE(64, 1024, 1024), EM_F32, dev);
        run_case("softmax", K_SOFTMAX, a, NULL, 1, 21, 2.0);
        em_release(a);
    }
    if (bench_selected(argc, argv, "layer_norm")) {
        em_tensor *a = em_randn(EM_SHAPE(4096, 4096), EM_F32, dev);
        run_case("layer_norm", K_LAYER_NORM, a, NULL, 10, 21, 2.0);
        em_release(a);
    }
    if (bench_selected(argc, argv, "maxpool_k3s1")) {
        em_tensor *a = em_randn(EM_SHAPE(2, 128, 512, 512), EM_F32, dev);
        run_case("maxpool_k3s1", K_MAXPOOL, a, NULL, 1, 21, 2.0);
        em_release(a);
    }
    if (bench_selected(argc, argv, "tiny_add")) {
        em_tensor *a = em_randn(EM_SHAPE(1), EM_F32, dev), *b = em_randn(EM_SHAPE(1), EM_F32, dev);
        run_case("tiny_add", K_TINY_ADD, a, b, 1000, 11, 2.0); /* ms per 1000 ops */
        em_release(a);
        em_release(b);
    }
    return 0;
}
