/* The row scatter-add fast path of cpu_index.c (rank-2, last dim, f32/f64, i64 indices: the
 * max-pool gradient) against the generic scatter: the same operands as [1, R, n] along dim 2
 * take the generic path, and both must give the same bytes, with duplicate indices, broadcast
 * and strided x (a broadcast +0.0 or -0.0 too), fewer index rows than x, and 1 and 2 threads. */
#include "harness.h"

/* Indices in [0, n) with many duplicates; index and src [r, m]. */
static em_tensor *rand_index(int64_t r, int64_t m, int64_t n)
{
    int64_t *v = malloc(sizeof(int64_t) * (size_t)(r * m > 0 ? r * m : 1));
    for (int64_t i = 0; i < r * m; i++) v[i] = (int64_t)(h_uniform() * (double)n) % n;
    em_tensor *t = h_from_i64(v, EM_SHAPE(r, m));
    free(v);
    return t;
}

static void compare(em_dtype dt, int64_t R, int64_t n, int64_t r, int64_t m, int xkind)
{
    em_scope_begin();
    em_tensor *x;
    if (xkind == 0) /* contiguous */
        x = h_rand(EM_SHAPE(R, n), dt, H_CONTIG, -1, 1, NULL);
    else if (xkind == 1) /* one value broadcast */
        x = em_expand(h_rand(EM_SHAPE(1, 1), dt, H_CONTIG, -1, 1, NULL), EM_SHAPE(R, n));
    else if (xkind == 3) /* a broadcast zero (+0.0: filled with memset), or -0.0 */
        x = em_expand(em_full(EM_SHAPE(1, 1), R % 2 ? -0.0 : 0.0, dt, EM_CPU), EM_SHAPE(R, n));
    else /* rows of a wider matrix */
        x = em_slice(h_rand(EM_SHAPE(R, n + 5), dt, H_CONTIG, -1, 1, NULL), 1, 2, n + 2, 1);
    em_tensor *idx = rand_index(r, m, n);
    em_tensor *src = h_rand(EM_SHAPE(r, m), dt, H_CONTIG, -3, 3, NULL);
    em_tensor *ref = em_scatter(em_unsqueeze(x, 0), 2, em_unsqueeze(idx, 0), em_unsqueeze(src, 0),
                                EM_SCATTER_ADD);
    int saved = em_get_num_threads();
    for (int th = 1; th <= 2; th++) {
        em_set_num_threads(th);
        em_tensor *got = em_scatter(x, 1, idx, src, EM_SCATTER_ADD);
        CHECK(got && ref && h_same_bytes(em_unsqueeze(got, 0), ref),
              "scatter-add rows %s R=%lld n=%lld r=%lld m=%lld x kind %d threads %d",
              em_dtype_name(dt), (long long)R, (long long)n, (long long)r, (long long)m, xkind, th);
    }
    em_set_num_threads(saved);
    em_scope_end();
}

int main(void)
{
    h_init();
    em_dtype dts[] = {EM_F32, EM_F64};
    for (int d = 0; d < 2; d++)
        for (int xk = 0; xk < 4; xk++) {
            compare(dts[d], 7, 13, 7, 5, xk);
            compare(dts[d], 7, 13, 4, 20, xk);         /* fewer index rows, more entries than n */
            compare(dts[d], 2048, 784, 2048, 196, xk); /* train_cnn's first pool, parallel */
            compare(dts[d], 3, 1, 3, 1, xk);
            compare(dts[d], 5, 9, 5, 0, xk);
        }
    return h_finish();
}
