/* Fast path of f32 max pooling (1-D and 2-D windows, any stride/padding/dilation, ceil mode):
 * reads f32 in place through its strides (no f64 copy) and vectorises over output columns
 * (inputs with contiguous rows, stride-1 windows) or over channels (channels-last inputs), 16
 * lanes with AVX-512 and 8 with AVX2, picked at run time. Values and argmax indices match the
 * portable kernel in cpu_pool.c exactly (max is exact; the first maximum in window order wins;
 * the last NaN wins when there is one), so the thread split does not change results. The
 * values-only kind (MAX_POOL_VALUES) runs the same kernels without the index stores. */
#include "cpu_pool_fast.h"

#include "cpu_fast.h"

#include <stdatomic.h>

static atomic_int isa_cap = -1;

static int cpu_isa(void)
{
    static atomic_int has = -1;
    int h = atomic_load(&has);
    if (h < 0) {
        h = CPU_POOL_SCALAR;
#if CPU_X86
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx2")) h = CPU_POOL_AVX2;
        if (__builtin_cpu_supports("avx512f")) h = CPU_POOL_AVX512;
#endif
        atomic_store(&has, h);
    }
    return h;
}

bool cpu_pool_fast_set_isa(int isa)
{
    if (isa > cpu_isa()) return false;
    atomic_store(&isa_cap, isa);
    return true;
}

static int use_isa(void)
{
    int cap = atomic_load(&isa_cap), h = cpu_isa();
    return cap >= 0 && cap < h ? cap : h;
}

int64_t cpu_pool_gcd(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

int cpu_maxpool_window_rows(const cpu_maxpool_geom *g, const float *p, int64_t oh,
                            const float **rows)
{
    int64_t ih0 = oh * g->sh - g->ph;
    int nv = 0;
    for (int64_t a = 0; a < g->kh; a++) {
        int64_t ih = ih0 + a * g->dh;
        if (ih < 0 || ih >= g->H) continue;
        if (nv == 64) return -1;
        rows[nv++] = p + ih * g->x_sh;
    }
    return nv;
}

int cpu_maxpool_window_rows_ahead(const cpu_maxpool_geom *g, const float *p, int64_t oh,
                                  const float **rows, const float **ahead)
{
    int nv = cpu_maxpool_window_rows(g, p, oh, rows);
    *ahead = NULL;
    if (nv > 0) {
        int64_t last = oh * g->sh - g->ph + (g->kh - 1) * g->dh; /* the last valid row */
        while (last >= g->H) last -= g->dh;
        if (last + 2 * g->sh < g->H) *ahead = p + (last + 2 * g->sh) * g->x_sh;
    }
    return nv;
}

float cpu_maxpool_window(const cpu_maxpool_geom *g, const float *p, int64_t ih0, int64_t ow,
                         int64_t *bi)
{
    int64_t iw0 = ow * g->sw - g->pw;
    float best = -INFINITY;
    *bi = -1;
    for (int64_t a = 0; a < g->kh; a++) {
        int64_t ih = ih0 + a * g->dh;
        if (ih < 0 || ih >= g->H) continue;
        for (int64_t b = 0; b < g->kw; b++) {
            int64_t iw = iw0 + b * g->dw;
            if (iw < 0 || iw >= g->W) continue;
            float v = p[ih * g->x_sh + iw * g->x_sw];
            if (*bi < 0 || v > best || isnan(v)) {
                best = v;
                *bi = ih * g->W + iw;
            }
        }
    }
    return best;
}

void cpu_maxpool_one(const cpu_maxpool_geom *g, int64_t n, int64_t c, int64_t oh, int64_t ow)
{
    int64_t bi;
    float best =
        cpu_maxpool_window(g, g->x + n * g->x_sn + c * g->x_sc, oh * g->sh - g->ph, ow, &bi);
    int64_t o = ((n * g->C + c) * g->OH + oh) * g->OW + ow;
    g->out[o] = best;
    if (g->idx) g->idx[o] = bi;
}

static void rows_scalar(void *ctx, int64_t r0, int64_t r1)
{
    const cpu_maxpool_geom *g = ctx;
    for (int64_t r = r0; r < r1; r++) {
        int64_t oh = r % g->OH, pl = r / g->OH;
        for (int64_t ow = 0; ow < g->OW; ow++) cpu_maxpool_one(g, pl / g->C, pl % g->C, oh, ow);
    }
}

#if CPU_X86
static void rows_avx512(void *ctx, int64_t r0, int64_t r1)
{
    cpu_maxpool_rows_avx512(ctx, r0, r1);
}

static void cl_avx512(void *ctx, int64_t u0, int64_t u1)
{
    cpu_maxpool_cl_avx512(ctx, u0, u1);
}

static void rows_avx2(void *ctx, int64_t r0, int64_t r1)
{
    cpu_maxpool_rows_avx2(ctx, r0, r1);
}

static void cl_avx2(void *ctx, int64_t u0, int64_t u1)
{
    cpu_maxpool_cl_avx2(ctx, u0, u1);
}

typedef struct sep_ctx {
    const cpu_maxpool_geom *g;
    bool stream;
    int isa;
} sep_ctx;

static void rows_sep(void *ctx, int64_t r0, int64_t r1)
{
    const sep_ctx *c = ctx;
    bool done = c->isa == CPU_POOL_AVX512 ? cpu_maxpool_rows_sep_avx512(c->g, r0, r1, c->stream)
                                          : cpu_maxpool_rows_sep_avx2(c->g, r0, r1, c->stream);
    if (!done) cpu_maxpool_rows_avx2(c->g, r0, r1);
}

static void cl_sep512(void *ctx, int64_t u0, int64_t u1)
{
    const sep_ctx *c = ctx;
    if (!cpu_maxpool_cl_sep_avx512(c->g, u0, u1, c->stream)) {
        int64_t cb = c->g->C / 16;
        cpu_maxpool_cl_avx512(c->g, u0 * cb, u1 * cb);
    }
}

static void cl_sep(void *ctx, int64_t u0, int64_t u1)
{
    const sep_ctx *c = ctx;
    if (!cpu_maxpool_cl_sep_avx2(c->g, u0, u1, c->stream)) cpu_maxpool_cl_avx2(c->g, u0, u1);
}
#endif

bool cpu_pool_max_fast(const ir_op *op)
{
    const ir_tensor *x = op->in[0];
    ir_tensor *o = op->out[0], *oi = op->kind == EM_OP_MAX_POOL ? op->out[1] : NULL;
    const em_p_pool *pp = &op->p.pool;
    int nd = pp->nd;
    if (x->dtype != EM_F32 || o->dtype != EM_F32) return false;
    if (op->kind == EM_OP_MAX_POOL && (!oi || oi->dtype != EM_I64)) return false;
    if (nd < 1 || nd > 2) return false;
    int lead = x->rank - nd;
    if (lead > 2) return false;
    cpu_maxpool_geom g = {0};
    g.x = (const float *)ir_ptr(x);
    g.out = (float *)ir_ptr(o);
    g.idx = oi ? (int64_t *)ir_ptr(oi) : NULL;
    g.N = lead == 2 ? x->shape[0] : 1;
    g.C = lead >= 1 ? x->shape[lead - 1] : 1;
    g.x_sn = lead == 2 ? x->strides[0] : 0;
    g.x_sc = lead >= 1 ? x->strides[lead - 1] : 0;
    g.W = x->shape[x->rank - 1];
    g.OW = o->shape[o->rank - 1];
    g.x_sw = x->strides[x->rank - 1];
    g.kw = pp->kernel[nd - 1];
    g.sw = pp->stride[nd - 1];
    g.pw = pp->pad[nd - 1];
    g.dw = pp->dilation[nd - 1];
    if (nd == 2) {
        g.H = x->shape[x->rank - 2];
        g.OH = o->shape[o->rank - 2];
        g.x_sh = x->strides[x->rank - 2];
        g.kh = pp->kernel[0], g.sh = pp->stride[0], g.ph = pp->pad[0], g.dh = pp->dilation[0];
    } else {
        g.H = g.OH = 1;
        g.kh = g.sh = g.dh = 1;
    }
    int64_t rows = g.N * g.C * g.OH;
    if (rows == 0 || g.OW == 0) return true;
    bool small_plane = g.H * g.W < ((int64_t)1 << 30);
    int isa = small_plane ? use_isa() : CPU_POOL_SCALAR;
    int64_t row_grain = g.OW >= 4096 ? 1 : 4096 / g.OW + 1;
#if CPU_X86
    /* values only: the two-pass kernels (AVX2 or AVX-512 for contiguous rows; channels-last:
       AVX-512 for C % 16 == 0, else AVX2) */
    int64_t bytes = (int64_t)ir_numel(o) * 4;
    sep_ctx sc = {&g, false, isa};
    if (!g.idx && isa >= CPU_POOL_AVX2 && g.x_sw == 1 && (g.sw == 1 || g.sw == 2)) {
        cpu_store_plan sp = cpu_store_begin(CPU_STORE_POOL_ROWS, bytes);
        sc.stream = sp.hint & CPU_FAST_STREAM;
        em_parallel_for(rows, row_grain, rows_sep, &sc);
        cpu_store_end(&sp);
    } else if (!g.idx && isa == CPU_POOL_AVX512 && g.x_sc == 1 && g.C % 16 == 0) {
        cpu_store_plan sp = cpu_store_begin(CPU_STORE_POOL_CL, bytes);
        sc.stream = sp.hint & CPU_FAST_STREAM;
        /* runs of consecutive output rows (the kernel pairs them and reads each input row
           once per run), four per thread, each at least 4096 outputs; the split follows the
           thread count, the values do not (a max is exact in any grouping) */
        int64_t units = g.N * g.OH, per = units / (4 * (int64_t)em_get_num_threads());
        int64_t least = 4096 / (g.OW * g.C) + 1;
        em_parallel_for(units, per > least ? per : least, cl_sep512, &sc);
        cpu_store_end(&sp);
    } else if (!g.idx && isa >= CPU_POOL_AVX2 && g.x_sc == 1 && g.C >= 8 && g.C % 8 == 0) {
        cpu_store_plan sp = cpu_store_begin(CPU_STORE_POOL_CL, bytes);
        sc.stream = sp.hint & CPU_FAST_STREAM;
        int64_t work = g.OW * g.C;
        em_parallel_for(g.N * g.OH, work >= 4096 ? 1 : 4096 / work + 1, cl_sep, &sc);
        cpu_store_end(&sp);
    } else if (isa == CPU_POOL_AVX512 && g.x_sw == 1 && g.sw == 1) {
        em_parallel_for(rows, row_grain, rows_avx512, &g);
    } else if (isa == CPU_POOL_AVX512 && g.x_sc == 1 && g.C >= 8) {
        int64_t units = g.N * g.OH * ((g.C + 15) / 16);
        em_parallel_for(units, g.OW >= 256 ? 1 : 256 / g.OW + 1, cl_avx512, &g);
    } else if (isa >= CPU_POOL_AVX2 && g.x_sw == 1 && (g.sw == 1 || g.sw == 2)) {
        em_parallel_for(rows, row_grain, rows_avx2, &g);
    } else if (isa >= CPU_POOL_AVX2 && g.x_sc == 1 && g.C >= 8) {
        int64_t work = g.OW * g.C;
        em_parallel_for(g.N * g.OH, work >= 4096 ? 1 : 4096 / work + 1, cl_avx2, &g);
    } else
#else
    (void)isa;
#endif
    {
        em_parallel_for(rows, row_grain, rows_scalar, &g);
    }
    return true;
}
