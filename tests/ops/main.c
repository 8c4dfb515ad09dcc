/* Runs every conformance family in one process, then checks that every kind of the op table was
 * exercised (that docs/ops.md lists exactly the table's kinds is tools/opgen.c's check). */
#include <string.h>

#include "conf.h"
#include "tensor/op.h"

typedef struct family {
    const char *name;
    void (*run)(void);
} family;

static const family families[] = {
    {"create", conf_create}, {"view", conf_view},       {"unary", conf_unary},
    {"binary", conf_binary}, {"reduce", conf_reduce},   {"linalg", conf_linalg},
    {"index", conf_index},   {"combine", conf_combine}, {"order", conf_order},
    {"conv", conf_conv},     {"pool", conf_pool},       {"norm", conf_norm},
    {"signal", conf_signal},
};

int main(int argc, char **argv)
{
    h_init();
    const char *only = argc > 1 ? argv[1] : NULL;
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        if (only && strcmp(only, families[i].name) != 0) continue;
        int before = h_failed;
        families[i].run();
        printf("family %-8s %s\n", families[i].name, h_failed == before ? "ok" : "FAILED");
        em_clear_error();
    }
    if (!only)
        for (int k = 0; k < EM_OP_COUNT; k++) /* every kind of the op table */
            CHECK(tn_op_count((em_op_kind)k) > 0, "op %s was never exercised by the suite",
                  em_op_name((em_op_kind)k));
    if (h_dev.backend != 0) {
        /* Which kinds ran on the device and which went to the CPU (cpu_fallback). */
        int native = 0, fell = 0;
        printf("kinds that ran on the cpu instead of the device:");
        for (int k = 0; k < EM_OP_COUNT; k++) {
            if (!tn_op_count((em_op_kind)k) || !strcmp(em_op_family((em_op_kind)k), "view"))
                continue;
            if (tn_fallback_count((em_op_kind)k) > 0) {
                printf(" %s(%lld/%lld)", em_op_name((em_op_kind)k),
                       (long long)tn_fallback_count((em_op_kind)k),
                       (long long)tn_op_count((em_op_kind)k));
                fell++;
            } else
                native++;
        }
        printf("\ndevice coverage: %d kinds only on the device, %d kinds partly or wholly on the "
               "cpu\n",
               native, fell);
    }
    return h_finish();
}
