/* The code ember_opgen --gen DIR writes from the op table's scalar expressions (included by
 * opgen.c, which holds rows[]): every file is rewritten only when its text changes, so a build
 * recompiles nothing when the table did not change.
 *   DIR/cpu_ew_gen.h, DIR/cpu_ew_gen.c  the CPU elementwise kernels (src/backend/cpu)
 *   DIR/ops_gen.c                       the front-ends of the parameterless elementwise kinds
 *   DIR/include/ember/ops_gen.h         their public declarations (included by ember/tensor.h)
 *   DIR/cuda_ew_gen.cuh                 the OP_* codes and the CUDA elementwise scalar code,
 *                                       derivatives included (kernels/ew_scalar.cuh includes it)
 *   DIR/cuda_ew_gen_cuh.c               that header as a C array (cuda_kernels.c gives it NVRTC)
 * An expression is written in double over real values (ops.def); the f32 kernels get it in
 * float (literals with an f suffix, libm's float functions, the ir_*_f helpers, parameters and
 * IR_ constants converted once), the integer kernels in int64_t (the ir_*_i helpers; libm's
 * rounding functions are the identity on integers, fabs is ir_abs_i). */

enum mode { M_F64, M_F32, M_INT, M_CUDA_F32 };

static bool is_ident(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* libm functions that have a float form named with an f suffix */
static bool libm_fn(const char *w, size_t n)
{
    static const char *const fns[] = {
        "exp",   "exp2",  "log",   "log2", "log1p", "expm1", "sqrt",      "sin",
        "cos",   "tan",   "asin",  "acos", "atan",  "sinh",  "cosh",      "tanh",
        "asinh", "acosh", "atanh", "erf",  "fabs",  "floor", "ceil",      "trunc",
        "fmin",  "fmax",  "fmod",  "pow",  "atan2", "hypot", "nearbyint", "copysign"};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        if (strlen(fns[i]) == n && memcmp(fns[i], w, n) == 0) return true;
    return false;
}

/* expression e rewritten for mode m into b */
static void rewrite_expr(buf *b, const char *e, enum mode m)
{
    const char *p = e;
    while (*p) {
        if ((*p >= '0' && *p <= '9') || (*p == '.' && p[1] >= '0' && p[1] <= '9')) {
            const char *s = p;
            bool fl = false;
            while (is_ident(*p) || *p == '.' ||
                   ((*p == '+' || *p == '-') && (p[-1] == 'e' || p[-1] == 'E'))) {
                if (*p == '.' || *p == 'e' || *p == 'E') fl = true;
                p++;
            }
            size_t n = (size_t)(p - s);
            if (fl && m == M_INT && n > 2 && s[n - 2] == '.' && s[n - 1] == '0')
                n -= 2; /* 6.0 -> 6: integer kernels stay in int64_t */
            put(b, s, n);
            if (fl && (m == M_F32 || m == M_CUDA_F32)) puts_(b, "f");
            continue;
        }
        if (is_ident(*p)) {
            const char *s = p;
            while (is_ident(*p)) p++;
            size_t n = (size_t)(p - s);
            const char *q = p;
            while (*q == ' ') q++;
            bool call = *q == '(';
            bool fl = m == M_F32 || m == M_CUDA_F32;
            if (call && m == M_INT &&
                ((n == 5 && !memcmp(s, "floor", 5)) || (n == 4 && !memcmp(s, "ceil", 4)) ||
                 (n == 5 && !memcmp(s, "trunc", 5)) || (n == 9 && !memcmp(s, "nearbyint", 9))))
                puts_(b, "ir_copy_i");
            else if (call && m == M_INT && n == 4 && !memcmp(s, "fabs", 4))
                puts_(b, "ir_abs_i");
            else if (call && m == M_INT && n == 4 && !memcmp(s, "fmod", 4))
                puts_(b, "ir_fmod_i");
            else if (call && m == M_INT && n == 3 && !memcmp(s, "pow", 3))
                puts_(b, "ir_pow_i");
            else if (call && n > 3 && !memcmp(s, "ir_", 3) && m != M_F64) {
                put(b, s, n);
                puts_(b, m == M_INT ? "_i" : "_f");
            } else if (call && fl && libm_fn(s, n)) {
                put(b, s, n);
                puts_(b, "f");
            } else if (fl && n > 3 && !memcmp(s, "IR_", 3)) {
                puts_(b, "((float)");
                put(b, s, n);
                puts_(b, ")");
            } else if (fl && n == 1 && s[0] == 'p' && *p == '.') {
                puts_(b, "(float)p");
            } else
                put(b, s, n);
            continue;
        }
        put(b, p, 1);
        p++;
    }
}

static bool has_expr(const char *e)
{
    return strcmp(e, "IR_NOEXPR") != 0;
}

static bool rule_is(const row *r, const char *rule)
{
    return strcmp(r->rule, rule) == 0;
}

/* which kernels a kind's dtype rule asks for */
static bool unary_float(const row *r)
{
    return !rule_is(r, "BOOL") && !rule_is(r, "BITWISE") && !rule_is(r, "INT");
}

static bool unary_int(const row *r)
{
    return rule_is(r, "KEEP_NUM") || rule_is(r, "KEEP_ALL") || rule_is(r, "SQUARE") ||
           rule_is(r, "BITWISE");
}

static bool binary_float(const row *r)
{
    return !rule_is(r, "BITWISE") && !rule_is(r, "INT");
}

static bool binary_int(const row *r)
{
    return rule_is(r, "PROMOTE") || rule_is(r, "PROMOTE_NUM") || rule_is(r, "COMPARE") ||
           rule_is(r, "BITWISE") || rule_is(r, "INT");
}

static bool is_ew1(const row *r)
{
    return (r->flags & IR_EW1) && !(r->flags & IR_INTERNAL) && has_expr(r->expr);
}

static bool is_ew2(const row *r)
{
    return (r->flags & IR_EW2) && !(r->flags & IR_INTERNAL) && has_expr(r->expr);
}

/* whether EW_GRAD has code for the derivative of r by input arg (cpu_gen_grad_f64, grad_d) */
static bool has_grad(const row *r, int arg)
{
    return ((arg == 0 && is_ew1(r)) || is_ew2(r)) && has_expr(r->d[arg]) && (r->flags & IR_DIFF);
}

static void put_case(buf *b, const row *r, const char *pre, const char *e, enum mode m,
                     const char *post)
{
    puts_(b, "    case EM_OP_");
    puts_(b, r->kind);
    puts_(b, ": ");
    puts_(b, pre);
    rewrite_expr(b, e, m);
    puts_(b, post);
    puts_(b, "\n");
}

/* ---- the CPU kernels ------------------------------------------------------------------------ */

static const char CPU_H[] =
    "/* Generated from src/ir/ops.def by tools/opgen.c: the CPU elementwise kernels. Each\n"
    " * returns false for a kind it has no code for. The output never overlaps an input. */\n"
    "#ifndef EMBER_CPU_EW_GEN_H\n#define EMBER_CPU_EW_GEN_H\n\n#include \"ir/ir.h\"\n\n"
    "/* y[i] = expr(x[i]) in float (f32, f16, bf16 and integer inputs of float math) */\n"
    "bool cpu_gen_unary_f32(em_op_kind k, const em_params *pp, const float *xs, float *ys,\n"
    "                       int64_t n);\n"
    "bool cpu_gen_unary_f64(em_op_kind k, const em_params *pp, const double *xs, double *ys,\n"
    "                       int64_t n);\n"
    "/* integer kinds: int64_t values of a `bits`-wide dtype (1: bool); wrapping arithmetic */\n"
    "bool cpu_gen_unary_i64(em_op_kind k, const em_params *pp, const int64_t *xs, int64_t *ys,\n"
    "                       int64_t n, int bits);\n"
    "/* kinds whose dtype rule gives bool: any input as double */\n"
    "bool cpu_gen_unary_pred(em_op_kind k, const double *xs, uint8_t *ys, int64_t n);\n"
    "/* o[i] = expr(a[i], b[i]) in double or int64_t (integer division by zero gives 0: the\n"
    " * caller checks IR_INT_DIV kinds) */\n"
    "bool cpu_gen_binary_f64(em_op_kind k, const double *as, const double *bs, double *os,\n"
    "                        int64_t n);\n"
    "bool cpu_gen_binary_i64(em_op_kind k, const int64_t *as, const int64_t *bs, int64_t *os,\n"
    "                        int64_t n, int bits);\n"
    "/* d[i] = the derivative of kind k by input `arg` at x = a[i] (and b[i]), y[i], with the\n"
    " * forward record's parameters *pp */\n"
    "bool cpu_gen_grad_f64(em_op_kind k, int arg, const em_params *pp, const double *as,\n"
    "                      const double *bs, const double *ys, double *ds, int64_t n);\n"
    "\n#endif\n";

static const char CPU_C_HEAD[] =
    "/* Generated from src/ir/ops.def by tools/opgen.c: the CPU elementwise kernels, one case\n"
    " * per kind from its scalar expression. Compiled with -fwrapv: integer kinds wrap as two's\n"
    " * complement, like the dtypes they store to. The blocks of 8 have a trip count the\n"
    " * compiler knows, so the simple expressions vectorise even under -O2's cost model. */\n"
    "#include <math.h>\n#include <stdint.h>\n\n#include \"cpu_ew_gen.h\"\n#include "
    "\"ir/scalar.h\"\n\n"
    "#define MAP(T, expr)                                                   \\\n"
    "    {                                                                  \\\n"
    "        int64_t i = 0;                                                 \\\n"
    "        for (; i + 8 <= n; i += 8)                                     \\\n"
    "            for (int j = 0; j < 8; j++) {                              \\\n"
    "                T x = xs[i + j];                                       \\\n"
    "                ys[i + j] = (expr);                                    \\\n"
    "            }                                                          \\\n"
    "        for (; i < n; i++) {                                           \\\n"
    "            T x = xs[i];                                               \\\n"
    "            ys[i] = (expr);                                            \\\n"
    "        }                                                              \\\n"
    "    }                                                                  \\\n"
    "    return true\n\n"
    "#define MAP2(T, expr)                                                  \\\n"
    "    {                                                                  \\\n"
    "        int64_t i = 0;                                                 \\\n"
    "        for (; i + 8 <= n; i += 8)                                     \\\n"
    "            for (int j = 0; j < 8; j++) {                              \\\n"
    "                T a = as[i + j], b = bs[i + j];                        \\\n"
    "                os[i + j] = (expr);                                    \\\n"
    "            }                                                          \\\n"
    "        for (; i < n; i++) {                                           \\\n"
    "            T a = as[i], b = bs[i];                                    \\\n"
    "            os[i] = (expr);                                            \\\n"
    "        }                                                              \\\n"
    "    }                                                                  \\\n"
    "    return true\n\n"
    "#define GRAD(expr)                                                     \\\n"
    "    for (int64_t i = 0; i < n; i++) {                                  \\\n"
    "        double x = as[i], a = x, b = bs ? bs[i] : 0, y = ys[i];        \\\n"
    "        (void)a, (void)b, (void)x, (void)y;                            \\\n"
    "        ds[i] = (expr);                                                \\\n"
    "    }                                                                  \\\n"
    "    return true\n\n";

static void gen_cpu(buf *b)
{
    puts_(b, CPU_C_HEAD);
    puts_(b, "bool cpu_gen_unary_f32(em_op_kind k, const em_params *pp, const float *restrict xs,\n"
             "                       float *restrict ys, int64_t n)\n{\n"
             "    const em_params p = *pp;\n    (void)p;\n    switch (k) {\n");
    for (int k = 0; k < N_ROWS; k++)
        if (is_ew1(&rows[k]) && unary_float(&rows[k]))
            put_case(b, &rows[k], "MAP(float, ", rows[k].expr, M_F32, ");");
    puts_(b, "    default: return false;\n    }\n}\n\n");
    puts_(b,
          "bool cpu_gen_unary_f64(em_op_kind k, const em_params *pp, const double *restrict xs,\n"
          "                       double *restrict ys, int64_t n)\n{\n"
          "    const em_params p = *pp;\n    (void)p;\n    switch (k) {\n");
    for (int k = 0; k < N_ROWS; k++)
        if (is_ew1(&rows[k]) && unary_float(&rows[k]))
            put_case(b, &rows[k], "MAP(double, ", rows[k].expr, M_F64, ");");
    puts_(b, "    default: return false;\n    }\n}\n\n");
    puts_(b,
          "bool cpu_gen_unary_i64(em_op_kind k, const em_params *pp, const int64_t *restrict xs,\n"
          "                       int64_t *restrict ys, int64_t n, int bits)\n{\n"
          "    const em_params p = *pp;\n    (void)p, (void)bits;\n    switch (k) {\n");
    for (int k = 0; k < N_ROWS; k++)
        if (is_ew1(&rows[k]) && unary_int(&rows[k]))
            put_case(b, &rows[k], "MAP(int64_t, ", rows[k].expr, M_INT, ");");
    puts_(b, "    default: return false;\n    }\n}\n\n");
    puts_(b, "bool cpu_gen_unary_pred(em_op_kind k, const double *restrict xs, uint8_t *restrict "
             "ys,\n                        int64_t n)\n{\n    switch (k) {\n");
    for (int k = 0; k < N_ROWS; k++)
        if (is_ew1(&rows[k]) && rule_is(&rows[k], "BOOL"))
            put_case(b, &rows[k], "MAP(double, (uint8_t)", rows[k].expr, M_F64, ");");
    puts_(b, "    default: return false;\n    }\n}\n\n");
    puts_(b, "bool cpu_gen_binary_f64(em_op_kind k, const double *restrict as,\n"
             "                        const double *restrict bs, double *restrict os, int64_t "
             "n)\n{\n    switch (k) {\n");
    for (int k = 0; k < N_ROWS; k++)
        if (is_ew2(&rows[k]) && binary_float(&rows[k]))
            put_case(b, &rows[k], "MAP2(double, (double)", rows[k].expr, M_F64, ");");
    puts_(b, "    default: return false;\n    }\n}\n\n");
    puts_(b, "bool cpu_gen_binary_i64(em_op_kind k, const int64_t *restrict as,\n"
             "                        const int64_t *restrict bs, int64_t *restrict os, int64_t "
             "n,\n                        int bits)\n{\n    (void)bits;\n    switch (k) {\n");
    for (int k = 0; k < N_ROWS; k++)
        if (is_ew2(&rows[k]) && binary_int(&rows[k]))
            put_case(b, &rows[k], "MAP2(int64_t, (int64_t)", rows[k].expr, M_INT, ");");
    puts_(b, "    default: return false;\n    }\n}\n\n");
    puts_(b, "bool cpu_gen_grad_f64(em_op_kind k, int arg, const em_params *pp, const double *as,\n"
             "                      const double *bs, const double *ys, double *ds, int64_t n)\n"
             "{\n    const em_params p = *pp;\n    (void)p;\n    switch (arg * 1000 + (int)k) "
             "{\n");
    for (int arg = 0; arg < 2; arg++)
        for (int k = 0; k < N_ROWS; k++) {
            const row *r = &rows[k];
            if (!has_grad(r, arg)) continue;
            char t[160];
            snprintf(t, sizeof t, "    case %d * 1000 + EM_OP_%s: GRAD(", arg, r->kind);
            puts_(b, t);
            rewrite_expr(b, r->d[arg], M_F64);
            puts_(b, ");\n");
        }
    puts_(b, "    default: return false;\n    }\n}\n");
}

/* ---- the front-ends ------------------------------------------------------------------------- */

static bool public_unary(const row *r)
{
    return is_ew1(r) && strcmp(r->params, "em_p_none") == 0;
}

static bool public_binary(const row *r)
{
    return is_ew2(r) && strcmp(r->params, "em_p_binary") == 0;
}

static void gen_header(buf *b)
{
    puts_(b, "/* Generated from src/ir/ops.def by tools/opgen.c: the elementwise ops without\n"
             " * parameters, one function per kind of the op table. Included by ember/tensor.h;\n"
             " * docs/ops.md gives each one's dtypes and notes. */\n"
             "#ifndef EMBER_OPS_GEN_H\n#define EMBER_OPS_GEN_H\n\n#ifndef EMBER_TENSOR_H\n"
             "#error \"include <ember/tensor.h>, not <ember/ops_gen.h>\"\n#endif\n\n"
             "/* ---- unary: y = f(x), shaped like x ---- */\n");
    for (int k = 0; k < N_ROWS; k++)
        if (public_unary(&rows[k])) {
            puts_(b, "EM_API em_tensor *em_");
            puts_(b, rows[k].name);
            puts_(b, "(const em_tensor *x);\n");
        }
    puts_(b, "\n/* ---- binary: NumPy broadcasting, dtype promotion as PyTorch ---- */\n");
    for (int k = 0; k < N_ROWS; k++)
        if (public_binary(&rows[k])) {
            puts_(b, "EM_API em_tensor *em_");
            puts_(b, rows[k].name);
            puts_(b, "(const em_tensor *a, const em_tensor *b);\n");
        }
    puts_(b, "\n#endif\n");
}

static void gen_frontends(buf *b)
{
    puts_(b, "/* Generated from src/ir/ops.def by tools/opgen.c: the front-ends of the\n"
             " * parameterless elementwise kinds (declared in ember/ops_gen.h). */\n"
             "#include \"tensor/op.h\"\n\n");
    for (int k = 0; k < N_ROWS; k++) {
        const row *r = &rows[k];
        char t[512];
        if (public_unary(r))
            snprintf(t, sizeof t,
                     "em_tensor *em_%s(const em_tensor *x)\n{\n    return tn_unary(EM_OP_%s, "
                     "\"em_%s\", x, NULL);\n}\n\n",
                     r->name, r->kind, r->name);
        else if (public_binary(r))
            snprintf(t, sizeof t,
                     "em_tensor *em_%s(const em_tensor *a, const em_tensor *b)\n{\n    return "
                     "tn_binary(\"em_%s\", EM_OP_%s, a, b);\n}\n\n",
                     r->name, r->name, r->kind);
        else
            continue;
        puts_(b, t);
    }
}

/* ---- CUDA ---------------------------------------------------------------------------------- */

static void put_cuda_case(buf *b, const row *r, const char *pre, const char *e, enum mode m)
{
    puts_(b, "    case OP_");
    puts_(b, r->kind);
    puts_(b, ": return ");
    puts_(b, pre);
    rewrite_expr(b, e, m);
    puts_(b, ";\n");
}

static const char CUDA_HEAD[] =
    "// Generated from src/ir/ops.def by tools/opgen.c: the OP_* code of every kind (its "
    "em_op_kind\n"
    "// number) and the elementwise kinds' scalar code for kernels/ew.cu, switched on the code:\n"
    "// f32 in float, f64 in double, integer kinds in int64_t, predicates over double, the\n"
    "// derivatives (grad_d) in double. The\n"
    "// parameters of em_p_act arrive as the host passes them (a, b = v[0], v[1]).\n"
    "#ifndef EMBER_CUDA_EW_GEN_CUH\n#define EMBER_CUDA_EW_GEN_CUH\n"
    "#ifdef __CUDACC_RTC__\n"
    "typedef int int32_t;\ntypedef long long int64_t;\ntypedef unsigned long long uint64_t;\n"
    "#define INT64_MAX 0x7fffffffffffffffll\n#define INT64_MIN (-INT64_MAX - 1)\n"
    "#endif\n"
    "#define IR_SCALAR_FN __device__ inline\n#include \"scalar.h\"\n\n";

static const char CUDA_PARAMS[] =
    "struct ew_p_act {\n    union {\n        double v[2];\n        double negative_slope;\n"
    "        double alpha;\n        struct {\n            double beta, threshold;\n        };\n"
    "        struct {\n            double min_val, max_val;\n        };\n    };\n};\n"
    "struct ew_params {\n    ew_p_act act;\n};\n\n";

static void gen_cuda(buf *b)
{
    puts_(b, CUDA_HEAD);
    for (int k = 0; k < N_ROWS; k++) {
        char t[128];
        snprintf(t, sizeof t, "#define OP_%s %d\n", rows[k].kind, k);
        puts_(b, t);
    }
    puts_(b, "\n");
    puts_(b, CUDA_PARAMS);
    puts_(b, "__device__ float unary_f(int op, float x, float a_, float b_)\n{\n"
             "    ew_params p;\n    p.act.v[0] = a_, p.act.v[1] = b_;\n    switch (op) {\n");
    for (int k = 0; k < N_ROWS; k++)
        if (is_ew1(&rows[k]) && unary_float(&rows[k]))
            put_cuda_case(b, &rows[k], "", rows[k].expr, M_CUDA_F32);
    puts_(b, "    default: return 0;\n    }\n}\n\n");
    puts_(b, "__device__ double unary_d(int op, double x, double a_, double b_)\n{\n"
             "    ew_params p;\n    p.act.v[0] = a_, p.act.v[1] = b_;\n    switch (op) {\n");
    for (int k = 0; k < N_ROWS; k++)
        if (is_ew1(&rows[k]) && unary_float(&rows[k]))
            put_cuda_case(b, &rows[k], "", rows[k].expr, M_F64);
    puts_(b, "    default: return 0;\n    }\n}\n\n");
    puts_(b, "// bits: the dtype's width (1 for bool)\n"
             "__device__ int64_t unary_i(int op, int64_t x, double a_, double b_, int bits)\n{\n"
             "    ew_params p;\n    p.act.v[0] = a_, p.act.v[1] = b_;\n    (void)bits;\n"
             "    switch (op) {\n");
    for (int k = 0; k < N_ROWS; k++)
        if (is_ew1(&rows[k]) && unary_int(&rows[k]))
            put_cuda_case(b, &rows[k], "", rows[k].expr, M_INT);
    puts_(b, "    default: return x;\n    }\n}\n\n");
    puts_(b, "__device__ unsigned char unary_pred(int op, double x)\n{\n    switch (op) {\n");
    for (int k = 0; k < N_ROWS; k++)
        if (is_ew1(&rows[k]) && rule_is(&rows[k], "BOOL"))
            put_cuda_case(b, &rows[k], "(unsigned char)", rows[k].expr, M_F64);
    puts_(b, "    default: return 0;\n    }\n}\n\n");
    puts_(b, "__device__ double binary_d(int op, double a, double b)\n{\n    switch (op) {\n");
    for (int k = 0; k < N_ROWS; k++)
        if (is_ew2(&rows[k]) && binary_float(&rows[k]))
            put_cuda_case(b, &rows[k], "(double)", rows[k].expr, M_F64);
    puts_(b, "    default: return 0;\n    }\n}\n\n");
    puts_(b, "// integer division by zero gives 0: the caller checks binary_int_div(op)\n"
             "__device__ int64_t binary_i(int op, int64_t a, int64_t b, int bits)\n{\n"
             "    (void)bits;\n    switch (op) {\n");
    for (int k = 0; k < N_ROWS; k++)
        if (is_ew2(&rows[k]) && binary_int(&rows[k]))
            put_cuda_case(b, &rows[k], "(int64_t)", rows[k].expr, M_INT);
    puts_(b, "    default: return 0;\n    }\n}\n\n");
    puts_(
        b,
        "// EW_GRAD: the derivative of kind op by input arg at x = a (and b) and y, in double as\n"
        "// cpu_gen_grad_f64 computes it; pa, pb: the forward's em_p_act v[0], v[1]\n"
        "__device__ double grad_d(int op, int arg, double a, double b, double y, double pa,\n"
        "                         double pb)\n{\n"
        "    ew_params p;\n    p.act.v[0] = pa, p.act.v[1] = pb;\n    double x = a;\n"
        "    (void)p, (void)x, (void)b, (void)y;\n    switch (arg * 1000 + op) {\n");
    for (int arg = 0; arg < 2; arg++)
        for (int k = 0; k < N_ROWS; k++) {
            const row *r = &rows[k];
            if (!has_grad(r, arg)) continue;
            char t[160];
            snprintf(t, sizeof t, "    case %d * 1000 + OP_%s: return ", arg, r->kind);
            puts_(b, t);
            rewrite_expr(b, r->d[arg], M_F64);
            puts_(b, ";\n");
        }
    puts_(b, "    default: return 0;\n    }\n}\n\n");
    puts_(b, "// the kinds whose integer divisor of 0 is an error (IR_INT_DIV)\n"
             "__device__ bool binary_int_div(int op)\n{\n    switch (op) {\n");
    for (int k = 0; k < N_ROWS; k++)
        if (is_ew2(&rows[k]) && (rows[k].flags & IR_INT_DIV)) {
            puts_(b, "    case OP_");
            puts_(b, rows[k].kind);
            puts_(b, ":\n");
        }
    puts_(b, "        return true;\n    default: return false;\n    }\n}\n#endif\n");
}

/* cuda_ew_gen.cuh as a C array for NVRTC (cuda_kernels.c names it as a header). */
static void gen_cuda_embed(buf *b, const buf *cu)
{
    puts_(b, "/* Generated from src/ir/ops.def by tools/opgen.c: cuda_ew_gen.cuh for NVRTC. */\n"
             "#include \"backend/cuda/cuda.h\"\n\nconst char cuda_ew_gen_cuh[] = {");
    for (size_t i = 0; i < cu->n; i++) {
        char t[16];
        snprintf(t, sizeof t, "%s0x%02x,", i % 16 ? "" : "\n    ", (unsigned char)cu->s[i]);
        puts_(b, t);
    }
    puts_(b, "0x00};\n");
}

/* ---- output --------------------------------------------------------------------------------- */

/* Writes b to dir/name unless the file already holds it. */
static bool write_if_changed(const char *dir, const char *name, const buf *b)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *old = read_all(path);
    bool same = old && strcmp(old, b->s) == 0;
    free(old);
    if (same) return true;
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b->s, 1, b->n, f) != b->n || fclose(f) != 0) {
        fprintf(stderr, "opgen: cannot write %s\n", path);
        return false;
    }
    return true;
}

static int gen_code(const char *dir)
{
    buf h = {0}, c = {0}, ph = {0}, pc = {0}, cu = {0}, ce = {0};
    puts_(&h, CPU_H);
    gen_cpu(&c);
    gen_header(&ph);
    gen_frontends(&pc);
    gen_cuda(&cu);
    gen_cuda_embed(&ce, &cu);
    char inc[4096];
    snprintf(inc, sizeof inc, "%s/include/ember", dir);
    bool ok = write_if_changed(dir, "cpu_ew_gen.h", &h) &&
              write_if_changed(dir, "cpu_ew_gen.c", &c) &&
              write_if_changed(inc, "ops_gen.h", &ph) && write_if_changed(dir, "ops_gen.c", &pc) &&
              write_if_changed(dir, "cuda_ew_gen.cuh", &cu) &&
              write_if_changed(dir, "cuda_ew_gen_cuh.c", &ce);
    free(h.s), free(c.s), free(ph.s), free(pc.s), free(cu.s), free(ce.s);
    return ok ? 0 : 2;
}
