/* The f32 max-pool fast path (cpu_pool_fast.c, cpu_pool_avx2.c, cpu_pool_avx512.c) against the
 * portable kernel: the same values in f64 go through the portable path, so values and argmax
 * indices must match exactly, over odd sizes and tails, stride/padding/dilation/ceil mode, 1-D
 * and 2-D, contiguous, channels-last, strided and flipped inputs, ties and NaNs, every
 * instruction set the CPU has (scalar, AVX2, AVX-512), the indexed and the values-only kinds,
 * and several thread counts. Inputs without NaN and -0 (kinds 2 and 3, most of 4) take the
 * values-only two-pass kernels (cpu_pool_sep_avx2.c, cpu_pool_sep_avx512.c); the others make them
 * hand rows to the exact kernels; outputs of 16 MiB and more are written with stream stores. */
#include "backend/cpu/cpu_fast.h"
#include "backend/cpu/cpu_pool_fast.h"
#include "harness.h"

typedef struct pcase {
    int64_t n, c, h, w;
    int64_t k[2], s[2], p[2], d[2];
    bool ceil;
} pcase;

/* Input of shape [n, c, h, w] in the given layout, f32 and f64 with the same values. kind 0:
 * small integers so that windows have ties, half the zeros -0; 1: the same and a few NaNs; 2:
 * small integers, no -0; 3: uniform in [-5, 5), no -0; 4: as 3 but for one NaN and one -0
 * (most windows clean, a few not: the two-pass kernels' checks decide per row). All kinds hold
 * a few -inf. */
static void make_inputs(const pcase *pc, int layout, int kind, em_tensor **x32, em_tensor **x64)
{
    int64_t numel = pc->n * pc->c * pc->h * pc->w;
    double *v = malloc(sizeof(double) * (size_t)(numel ? numel : 1));
    for (int64_t i = 0; i < numel; i++) {
        v[i] = kind >= 3 ? h_uniform() * 10 - 5 : (double)(int)(h_uniform() * 7) - 3;
        if (kind == 1 && h_uniform() < 0.03) v[i] = NAN;
        if (h_uniform() < 0.01) v[i] = -INFINITY;
        if (kind <= 1 && v[i] == 0 && h_uniform() < 0.5) v[i] = -0.0; /* ties of signed zeros */
    }
    if (kind == 4 && numel > 0) {
        v[(int64_t)(h_uniform() * (double)numel)] = NAN;
        v[(int64_t)(h_uniform() * (double)numel)] = -0.0;
    }
    em_shape s = EM_SHAPE(pc->n, pc->c, pc->h, pc->w);
    em_tensor *b32, *b64;
    if (layout == 1) { /* channels-last: stored [n, h, w, c], viewed as [n, c, h, w] */
        em_shape sl = EM_SHAPE(pc->n, pc->h, pc->w, pc->c);
        double *t = malloc(sizeof(double) * (size_t)(numel ? numel : 1));
        for (int64_t a = 0; a < pc->n; a++)
            for (int64_t c = 0; c < pc->c; c++)
                for (int64_t y = 0; y < pc->h; y++)
                    for (int64_t x = 0; x < pc->w; x++)
                        t[((a * pc->h + y) * pc->w + x) * pc->c + c] =
                            v[((a * pc->c + c) * pc->h + y) * pc->w + x];
        b32 = em_from_data(t, EM_F64, sl, EM_F32, EM_CPU);
        b64 = em_from_data(t, EM_F64, sl, EM_F64, EM_CPU);
        *x32 = em_permute(b32, EM_AXES(0, 3, 1, 2));
        *x64 = em_permute(b64, EM_AXES(0, 3, 1, 2));
        em_release(b32);
        em_release(b64);
        free(t);
    } else {
        h_layout hl = layout == 2 ? H_STRIDED : layout == 3 ? H_FLIPPED : H_CONTIG;
        *x32 = h_from_values(v, s, EM_F32, hl);
        *x64 = h_from_values(v, s, EM_F64, hl);
    }
    free(v);
}

static void check_case(const pcase *pc, int layout, int kind, int nd)
{
    em_scope_begin();
    em_tensor *x32, *x64;
    make_inputs(pc, layout, kind, &x32, &x64);
    em_pool_opts o = {.ceil_mode = pc->ceil};
    for (int i = 0; i < nd; i++) {
        o.kernel[i] = pc->k[2 - nd + i];
        o.stride[i] = pc->s[2 - nd + i];
        o.pad[i] = pc->p[2 - nd + i];
        o.dilation[i] = pc->d[2 - nd + i];
    }
    if (nd == 1) { /* [n, c*h, w] */
        x32 = em_reshape(em_contiguous(x32), EM_SHAPE(pc->n, pc->c * pc->h, pc->w));
        x64 = em_reshape(em_contiguous(x64), EM_SHAPE(pc->n, pc->c * pc->h, pc->w));
    }
    em_tensor *i64, *i32;
    em_tensor *v64 = nd == 2 ? em_max_pool2d(x64, o, &i64) : em_max_pool1d(x64, o, &i64);
    CHECK_OK("f64 max_pool");
    em_tensor *ref = em_cast(v64, EM_F32);
    double *rv = h_values(ref), *ri = h_values(i64);
    for (int threads = 1; threads <= 3; threads++)
        for (int isa = CPU_POOL_SCALAR; isa <= CPU_POOL_AVX512; isa++)
            for (int values_only = 0; values_only <= 1; values_only++) {
                if (!cpu_pool_fast_set_isa(isa)) continue;
                em_set_num_threads(threads);
                em_tensor **ip = values_only ? NULL : &i32;
                em_tensor *v32 = nd == 2 ? em_max_pool2d(x32, o, ip) : em_max_pool1d(x32, o, ip);
                CHECK_OK("f32 max_pool");
                char what[220];
                snprintf(what, sizeof what,
                         "max_pool%dd [%lld,%lld,%lld,%lld] k%lldx%lld s%lldx%lld p%lldx%lld "
                         "d%lldx%lld ceil %d layout %d kind %d threads %d isa %d values-only %d",
                         nd, (long long)pc->n, (long long)pc->c, (long long)pc->h, (long long)pc->w,
                         (long long)pc->k[0], (long long)pc->k[1], (long long)pc->s[0],
                         (long long)pc->s[1], (long long)pc->p[0], (long long)pc->p[1],
                         (long long)pc->d[0], (long long)pc->d[1], pc->ceil, layout, kind, threads,
                         isa, values_only);
                em_shape os = em_tensor_shape(v64);
                h_check_tensor(what, v32, rv, os, 0, 0);
                /* the first maximum wins, so even the sign of a zero maximum must match */
                double *gv = h_values(v32);
                int64_t nout = em_tensor_numel(v64), bad = 0;
                for (int64_t i = 0; i < nout; i++)
                    if (gv[i] == 0 && signbit(gv[i]) != signbit(rv[i])) bad++;
                CHECK(bad == 0, "%s: %lld zeros with the wrong sign", what, (long long)bad);
                free(gv);
                if (!values_only) h_check_tensor(what, i32, ri, os, 0, 0);
            }
    cpu_pool_fast_set_isa(-1);
    em_set_num_threads(2);
    free(rv);
    free(ri);
    em_scope_end();
}

int main(void)
{
    h_init();
    pcase cases[] = {
        {2, 3, 9, 37, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false},   /* NCHW k3 s1 p1, tails */
        {1, 2, 5, 16, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false},   /* exactly one vector */
        {1, 1, 4, 15, {3, 3}, {1, 1}, {0, 0}, {1, 1}, false},   /* no padding, under a vector */
        {2, 2, 7, 50, {5, 5}, {1, 1}, {2, 2}, {2, 2}, false},   /* dilated stride 1 */
        {1, 3, 8, 41, {2, 4}, {1, 1}, {1, 2}, {1, 1}, true},    /* even kernel, ceil */
        {2, 20, 11, 13, {5, 5}, {2, 2}, {2, 2}, {2, 2}, false}, /* the bench's k5 s2 p2 d2 */
        {1, 17, 6, 9, {3, 2}, {2, 3}, {1, 1}, {1, 2}, true},    /* channel tail, ceil */
        {1, 33, 5, 7, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},   /* classic 2x2 */
        {3, 1, 1, 1, {1, 1}, {1, 1}, {0, 0}, {1, 1}, false},    /* 1x1 planes */
        {1, 2, 3, 70, {1, 7}, {1, 1}, {0, 3}, {1, 1}, false},   /* wide row kernel */
        {1, 24, 9, 40, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false},  /* column tiles and a tail */
        {2, 8, 6, 19, {2, 2}, {1, 1}, {0, 0}, {1, 1}, true},    /* exactly 8 channels */
        {1, 9, 13, 33, {5, 3}, {2, 1}, {2, 1}, {2, 3}, true},   /* 8 + 1 channels, dilated */
        {1, 3, 70, 5, {67, 1}, {1, 1}, {0, 0}, {1, 1}, false},  /* over 64 window rows */
        {2, 5, 28, 28, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},  /* 2x2 stride 2, 14 columns */
        {1, 3, 15, 15, {2, 2}, {2, 2}, {0, 0}, {1, 1}, true},   /* stride 2, ceil border */
        {1, 2, 9, 53, {3, 3}, {2, 2}, {1, 1}, {1, 2}, false},   /* stride 2, dilated, padded */
        {1, 2, 4, 35, {3, 2}, {1, 2}, {1, 0}, {1, 1}, false},   /* stride 2 rows reach the end */
        /* multiples of 16 channels: the AVX-512 two-pass kernel (cpu_pool_sep_avx512.c) */
        {2, 16, 23, 21, {5, 5}, {2, 2}, {2, 2}, {2, 2}, false}, /* k5 s2 p2 d2: row pairs */
        {1, 32, 13, 19, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false}, /* pairs at stride 1, a tail */
        {1, 48, 9, 40, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true},   /* stride 2 rows: no pairs */
        {3, 16, 7, 5, {2, 2}, {1, 1}, {0, 0}, {1, 1}, false},   /* under 16 columns */
        {1, 16, 30, 37, {4, 3}, {3, 1}, {1, 1}, {3, 2}, false}, /* stride = dilation 3 */
    };
    int ncases = (int)(sizeof cases / sizeof *cases);
    for (int i = 0; i < ncases; i++)
        for (int layout = 0; layout < 4; layout++)
            for (int kind = 0; kind <= 4; kind++) check_case(&cases[i], layout, kind, 2);
    for (int i = 0; i < ncases; i++) {
        check_case(&cases[i], 0, 1, 1);
        check_case(&cases[i], 0, 3, 1);
    }
    /* outputs past 16 MiB: the two-pass kernels' stream stores, NCHW and channels-last */
    pcase big[] = {{1, 8, 725, 725, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false},
                   {1, 16, 513, 513, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false},
                   /* rows of whole 64-byte lines: the AVX-512 rows kernel streams them */
                   {1, 16, 512, 512, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false},
                   {1, 16, 1024, 1024, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false},
                   /* channels-last 16 + 8 channels, row pairs, planes' rows at any alignment */
                   {2, 24, 97, 131, {5, 5}, {2, 2}, {2, 2}, {2, 2}, false}};
    for (int st = 1; st >= 0; st--) { /* streamed, then through the caches (cpu_store_begin) */
        cpu_store_force(st);
        check_case(&big[0], 0, 3, 2);
        check_case(&big[1], 1, 3, 2);
        check_case(&big[2], 0, 3, 2);
        check_case(&big[3], 0, 2, 2); /* small integers: ties alike in f32 and f64 */
        check_case(&big[4], 1, 3, 2);
        check_case(&big[4], 1, 4, 2); /* a NaN and a -0: those rows by the exact kernel */
    }
    cpu_store_force(-1);
    return h_finish();
}
