/* The AVX-512 row kernels (cpu_fast_avx512.c: GELU, softmax/log_softmax, layer/RMS norm, whole
 * sum/mean) against the portable paths (cpu_fast_force_portable): odd lengths and tails, NaN and
 * infinities, strided inputs (which take the portable path), and bitwise-identical results for
 * 1, 2 and 3 threads. On CPUs without AVX-512 both sides are the portable path. */
#include <string.h>

#include "backend/cpu/cpu_fast.h"
#include "harness.h"

typedef em_tensor *(*op1)(em_tensor *x, em_tensor *w, em_tensor *b);

static em_tensor *f_gelu(em_tensor *x, em_tensor *w, em_tensor *b)
{
    return em_gelu(x);
}
static em_tensor *f_softmax(em_tensor *x, em_tensor *w, em_tensor *b)
{
    return em_softmax(x, -1);
}
static em_tensor *f_log_softmax(em_tensor *x, em_tensor *w, em_tensor *b)
{
    return em_log_softmax(x, -1);
}
static em_tensor *f_layer_norm(em_tensor *x, em_tensor *w, em_tensor *b)
{
    return em_layer_norm(x, 1, w, b, 1e-5);
}
static em_tensor *f_layer_norm_plain(em_tensor *x, em_tensor *w, em_tensor *b)
{
    return em_layer_norm(x, 1, NULL, NULL, 1e-5);
}
static em_tensor *f_rms_norm(em_tensor *x, em_tensor *w, em_tensor *b)
{
    return em_rms_norm(x, 1, w, 1e-6);
}
static em_tensor *f_sum(em_tensor *x, em_tensor *w, em_tensor *b)
{
    return em_sum(x, EM_ALL, false);
}
static em_tensor *f_mean(em_tensor *x, em_tensor *w, em_tensor *b)
{
    return em_mean(x, EM_ALL, false);
}

static void compare(const char *name, op1 f, em_shape s, bool specials, h_layout layout, double tol)
{
    em_scope_begin();
    int64_t n = em_shape_numel(s), last = s.dims[s.rank - 1];
    double *v = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) v[i] = 8 * h_uniform() - 4;
    if (specials && n > 40) {
        v[3] = NAN;          /* a NaN row (softmax: all NaN) */
        v[n - 1] = INFINITY; /* an infinity in the last row */
        v[n - 2] = -INFINITY;
        if (last + 1 < n) v[last + 1] = -30; /* a far tail for GELU/exp */
    }
    em_tensor *x = h_from_values(v, s, EM_F32, layout);
    em_tensor *w = h_rand(EM_SHAPE(last), EM_F32, H_CONTIG, -2, 2, NULL);
    em_tensor *b = h_rand(EM_SHAPE(last), EM_F32, H_CONTIG, -2, 2, NULL);
    cpu_fast_force_portable(true);
    em_tensor *ref = f(x, w, b);
    cpu_fast_force_portable(false);
    CHECK_OK(name);
    double *rv = h_values(ref);
    em_shape os = em_tensor_shape(ref);
    char what[160];
    float *first = NULL;
    int64_t on = em_shape_numel(os);
    for (int th = 1; th <= 3; th++) {
        em_set_num_threads(th);
        em_tensor *y = f(x, w, b);
        CHECK_OK(name);
        snprintf(what, sizeof what, "%s n=%lld last=%lld layout %d threads %d", name, (long long)n,
                 (long long)last, (int)layout, th);
        h_check_tensor(what, y, rv, os, tol, tol);
        float *got = malloc(sizeof(float) * (size_t)(on ? on : 1));
        em_to_data(y, got, EM_F32, on);
        if (!first)
            first = got;
        else {
            CHECK(memcmp(first, got, sizeof(float) * (size_t)on) == 0,
                  "%s: same bits for every thread count", what);
            free(got);
        }
    }
    em_set_num_threads(2);
    free(first);
    free(v);
    free(rv);
    em_scope_end();
}

int main(void)
{
    h_init();
    struct {
        const char *name;
        op1 f;
        double tol;
    } ops[] = {
        {"gelu", f_gelu, 2e-6},
        {"softmax", f_softmax, 2e-6},
        {"log_softmax", f_log_softmax, 2e-6},
        {"layer_norm", f_layer_norm, 1e-5},
        {"layer_norm (no affine)", f_layer_norm_plain, 1e-5},
        {"rms_norm", f_rms_norm, 1e-5},
    };
    int64_t lens[] = {1, 7, 15, 16, 17, 31, 33, 100, 1000, 4099};
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++)
        for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
            compare(ops[k].name, ops[k].f, EM_SHAPE(5, lens[i]), true, H_CONTIG, ops[k].tol);
            compare(ops[k].name, ops[k].f, EM_SHAPE(3, lens[i]), false, H_TRANSPOSED, ops[k].tol);
        }
    /* whole sums: below, at and past the 65536-element block, with tails */
    int64_t sums[] = {65535, 65536, 65537, 3 * 65536 + 17, 1000003};
    for (size_t i = 0; i < sizeof sums / sizeof *sums; i++) {
        compare("sum", f_sum, EM_SHAPE(sums[i]), false, H_CONTIG, 1e-5);
        compare("mean", f_mean, EM_SHAPE(sums[i]), false, H_CONTIG, 1e-5);
        compare("sum 2-D", f_sum, EM_SHAPE(sums[i] / 7, 7), false, H_CONTIG, 1e-5);
        compare("sum NaN", f_sum, EM_SHAPE(sums[i]), true, H_CONTIG, 1e-5);
    }
    compare("sum strided", f_sum, EM_SHAPE(300, 301), false, H_STRIDED, 1e-5);
    return h_finish();
}
