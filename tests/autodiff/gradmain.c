/* Runs every gradient-check family, then checks coverage against the op table: every kind it
 * flags differentiable must have had its backward rule run. */
#include <string.h>

#include "autodiff/autodiff_impl.h"
#include "grad.h"

typedef struct family {
    const char *name;
    void (*run)(void);
} family;

static const family families[] = {
    {"view", grad_view},       {"unary", grad_unary},   {"binary", grad_binary},
    {"reduce", grad_reduce},   {"linalg", grad_linalg}, {"index", grad_index},
    {"combine", grad_combine}, {"order", grad_order},   {"conv", grad_conv},
    {"pool", grad_pool},       {"norm", grad_norm},     {"signal", grad_signal},
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
    if (!only) {
        /* every kind the op table marks differentiable had its backward rule run */
        for (int k = 0; k < EM_OP_COUNT; k++)
            if (ir_has((em_op_kind)k, IR_DIFF))
                CHECK(ad_rule_count((em_op_kind)k) > 0,
                      "op %s is marked differentiable but its backward rule never ran",
                      em_op_name((em_op_kind)k));
    }
    return h_finish();
}
