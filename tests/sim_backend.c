/* A test-only backend, "sim": one device whose buffers are host memory behind the device
 * interface, running only FILL and same-dtype COPY. Every other op takes the CPU fallback, so
 * running a suite with EMBER_TEST_DEVICE=sim:0 EMBER_CPU_FALLBACK=1 exercises the fallback and
 * every device/host transfer path on machines without a GPU.
 *
 * With EMBER_SIM_ASK=cuda the sim device also asks the CUDA backend's supports() about every op
 * it sees (the answer depends only on the op record, so no GPU is needed) and h_finish prints
 * which kinds the CUDA backend would have sent to the CPU: the native coverage of a suite,
 * measured without a GPU. */
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu.h"
#include "backend/cuda/cuda.h"
#include "harness.h"

static bool ask_cuda;
static int64_t asked[EM_OP_COUNT], declined[EM_OP_COUNT];

static int sim_count(void)
{
    return 1;
}

static void *sim_alloc(int device, size_t nbytes)
{
    (void)device;
    return em_alloc(nbytes ? nbytes : 1);
}

static void sim_free(int device, void *p)
{
    (void)device;
    em_free(p);
}

static em_status sim_copy(int device, void *dst, const void *src, size_t nbytes)
{
    (void)device;
    if (nbytes) memcpy(dst, src, nbytes);
    return EM_OK;
}

static bool sim_supports(const ir_op *op)
{
    if (ask_cuda && op->kind < EM_OP_COUNT) {
        asked[op->kind]++;
        if (!cuda_backend.supports(op)) declined[op->kind]++;
    }
    return op->kind == EM_OP_FILL ||
           (op->kind == EM_OP_COPY && op->in[0]->dtype == op->out[0]->dtype);
}

static em_status sim_exec(const ir_op *op)
{
    return cpu_backend.exec(op); /* host memory: the CPU kernels read it directly */
}

static em_status sim_sync(int device)
{
    (void)device;
    return EM_OK;
}

static const em_backend sim_backend = {
    .name = "sim",
    .device_count = sim_count,
    .alloc = sim_alloc,
    .free = sim_free,
    .copy_from_host = sim_copy,
    .copy_to_host = sim_copy,
    .copy_within = sim_copy,
    .supports = sim_supports,
    .exec = sim_exec,
    .sync = sim_sync,
};

void h_register_sim_backend(void)
{
    const char *ask = getenv("EMBER_SIM_ASK");
    ask_cuda = ask && !strcmp(ask, "cuda");
    em_backends_init();
    if (em_backend_find("sim") < 0) em_backend_register(&sim_backend);
}

void h_sim_report(void)
{
    if (!ask_cuda) return;
    int native = 0, partly = 0;
    printf("kinds the cuda backend would send to the cpu (declined/asked):");
    for (int k = 0; k < EM_OP_COUNT; k++) {
        if (!asked[k]) continue;
        if (declined[k]) {
            printf(" %s(%lld/%lld)", em_op_name((em_op_kind)k), (long long)declined[k],
                   (long long)asked[k]);
            partly++;
        } else
            native++;
    }
    printf("\ncuda coverage: %d kinds wholly native, %d kinds partly or wholly on the cpu\n",
           native, partly);
}
