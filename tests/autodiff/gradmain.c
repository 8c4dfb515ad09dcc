/* Runs every gradient-check family, then checks coverage against docs/ops.md: every op whose
 * row says "yes" in the grad column must have had its backward rule run. */
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
        char *doc = h_read_file("docs/ops.md");
        CHECK(doc != NULL, "docs/ops.md cannot be read (run from the source root)");
        /* rows: | `name` | dtypes | grad | notes | */
        for (const char *p = doc; p && (p = strstr(p, "\n| `")) != NULL; p++) {
            const char *s = p + 4, *e = strchr(s, '`');
            if (!e || e - s > 60) continue;
            char name[64];
            memcpy(name, s, (size_t)(e - s));
            name[e - s] = '\0';
            const char *c1 = strchr(e, '|');
            const char *c2 = c1 ? strchr(c1 + 1, '|') : NULL;
            const char *c3 = c2 ? strchr(c2 + 1, '|') : NULL;
            if (!c2 || !c3) continue;
            bool yes = false;
            for (const char *q = c2 + 1; q < c3; q++)
                if (strncmp(q, "yes", 3) == 0) yes = true;
            if (!yes) continue;
            int kind = -1;
            for (int k = 0; k < EM_OP_COUNT; k++)
                if (strcmp(name, em_op_name((em_op_kind)k)) == 0) kind = k;
            CHECK(kind >= 0, "docs/ops.md lists `%s`, not an op of the IR", name);
            if (kind >= 0)
                CHECK(ad_rule_count((em_op_kind)kind) > 0,
                      "op %s is marked differentiable but its backward rule never ran", name);
        }
        free(doc);
    }
    return h_finish();
}
