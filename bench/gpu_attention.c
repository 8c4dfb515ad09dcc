/* em_sdpa on cuda:0: q, k, v [B, H, S, D] (default B=2 H=16 S=8192 D=128, bf16), non-causal and
 * causal, timed like bench/gpu_bench.c (host clock around the op and em_device_sync, 21 reps after
 * 2 warm-ups). Prints per case the bench_common.h line (ms: median min max q1 q3 reps) and the
 * median's rate in TFLOP/s, counting 4 B H S^2 D flops (halved when causal) as PyTorch's attention
 * benchmarks do.
 *   gpu_attention [B H S D [bf16|f16]] */
#include <ember/ember.h>
#include <math.h>

#include "backend/backend.h"

#include "bench_common.h"
#include "tensor/op.h"

static em_device dev;

typedef struct ctx {
    em_tensor *q, *k, *v;
    bool causal;
} ctx;

static void step(void *p)
{
    ctx *c = p;
    em_scope_begin();
    em_sdpa(c->q, c->k, c->v, NULL, (em_sdpa_opts){.causal = c->causal});
    em_scope_end();
    em_device_sync(dev);
    if (em_failed()) {
        fprintf(stderr, "gpu_attention: %s\n", em_last_error());
        exit(1);
    }
}

int main(int argc, char **argv)
{
    em_backends_init();
    dev = em_device_parse("cuda:0");
    if (em_failed()) {
        printf("skipped: no CUDA device (%s)\n", em_last_error());
        return 0;
    }
    long long B = 2, H = 16, S = 8192, D = 128;
    em_dtype dt = EM_BF16;
    if (argc >= 5) B = atoll(argv[1]), H = atoll(argv[2]), S = atoll(argv[3]), D = atoll(argv[4]);
    if (argc >= 6 && !strcmp(argv[5], "f16")) dt = EM_F16;
    em_seed(0);
    em_tensor *q = em_randn(EM_SHAPE(B, H, S, D), dt, dev);
    em_tensor *k = em_randn(EM_SHAPE(B, H, S, D), dt, dev);
    em_tensor *v = em_randn(EM_SHAPE(B, H, S, D), dt, dev);
    for (int causal = 0; causal < 2; causal++) {
        ctx c = {q, k, v, causal != 0};
        char name[96];
        snprintf(name, sizeof name, "sdpa_%s_b%lld_h%lld_s%lld_d%lld%s", em_dtype_name(dt), B, H, S,
                 D, causal ? "_causal" : "");
        int64_t before = tn_fallback_count(EM_OP_SDPA);
        step(&c);
        if (tn_fallback_count(EM_OP_SDPA) != before) {
            fprintf(stderr, "%s: the op ran on the cpu (cpu_fallback), not timed\n", name);
            continue;
        }
        for (int i = 0; i < 2; i++) step(&c); /* warm-up */
        double t[21];
        for (int i = 0; i < 21; i++) {
            double t0 = bench_now();
            step(&c);
            t[i] = (bench_now() - t0) * 1e3;
        }
        qsort(t, 21, sizeof *t, bench_cmp);
        double flops = 4.0 * (double)B * (double)H * (double)S * (double)S * (double)D;
        if (causal) flops /= 2;
        printf("%s\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t21\t%.1f TFLOP/s\n", name, t[10], t[0], t[20],
               t[5], t[15], flops / (t[10] * 1e-3) / 1e12);
        fflush(stdout);
    }
    em_release(q);
    em_release(k);
    em_release(v);
    return 0;
}
