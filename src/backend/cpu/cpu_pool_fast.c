/* Fast path of f32 max pooling (1-D and 2-D windows, any stride/padding/dilation, ceil mode):
 * reads f32 in place through its strides (no f64 copy) and, on AVX-512 machines, vectorises
 * over 16 output columns (inputs with contiguous rows, stride-1 windows) or over 16 channels
 * (channels-last inputs). Values and argmax indices match the portable kernel in cpu_pool.c
 * exactly (max is exact; the first maximum in window order wins; the last NaN wins when there
 * is one), so the thread split does not change results. */
#include "cpu_pool_fast.h"

#include <stdatomic.h>

static atomic_int force_scalar;

void cpu_pool_fast_force_scalar(int on)
{
    atomic_store(&force_scalar, on);
}

void cpu_maxpool_one(const cpu_maxpool_geom *g, int64_t n, int64_t c, int64_t oh, int64_t ow)
{
    const float *p = g->x + n * g->x_sn + c * g->x_sc;
    int64_t ih0 = oh * g->sh - g->ph, iw0 = ow * g->sw - g->pw;
    float best = -INFINITY;
    int64_t bi = -1;
    for (int64_t a = 0; a < g->kh; a++) {
        int64_t ih = ih0 + a * g->dh;
        if (ih < 0 || ih >= g->H) continue;
        for (int64_t b = 0; b < g->kw; b++) {
            int64_t iw = iw0 + b * g->dw;
            if (iw < 0 || iw >= g->W) continue;
            float v = p[ih * g->x_sh + iw * g->x_sw];
            if (bi < 0 || v > best || isnan(v)) {
                best = v;
                bi = ih * g->W + iw;
            }
        }
    }
    int64_t o = ((n * g->C + c) * g->OH + oh) * g->OW + ow;
    g->out[o] = best;
    g->idx[o] = bi;
}

static bool use_avx512(void)
{
    static int has = -1;
    if (has < 0) {
        __builtin_cpu_init();
        has = __builtin_cpu_supports("avx512f") != 0;
    }
    return has && !atomic_load(&force_scalar);
}

static void rows_scalar(void *ctx, int64_t r0, int64_t r1)
{
    const cpu_maxpool_geom *g = ctx;
    for (int64_t r = r0; r < r1; r++) {
        int64_t oh = r % g->OH, pl = r / g->OH;
        for (int64_t ow = 0; ow < g->OW; ow++) cpu_maxpool_one(g, pl / g->C, pl % g->C, oh, ow);
    }
}

static void rows_avx(void *ctx, int64_t r0, int64_t r1)
{
    cpu_maxpool_rows_avx512(ctx, r0, r1);
}

static void cl_avx(void *ctx, int64_t u0, int64_t u1)
{
    cpu_maxpool_cl_avx512(ctx, u0, u1);
}

bool cpu_pool_max_fast(const em_op *op)
{
    const em_tensor *x = op->in[0];
    em_tensor *o = op->out[0], *oi = op->out[1];
    int nd = (int)op->i[0];
    if (x->dtype != EM_F32 || o->dtype != EM_F32 || !oi || oi->dtype != EM_I64) return false;
    if (nd < 1 || nd > 2) return false;
    int lead = x->rank - nd;
    if (lead > 2) return false;
    cpu_maxpool_geom g = {0};
    g.x = (const float *)tn_ptr(x);
    g.out = (float *)tn_ptr(o);
    g.idx = (int64_t *)tn_ptr(oi);
    g.N = lead == 2 ? x->shape[0] : 1;
    g.C = lead >= 1 ? x->shape[lead - 1] : 1;
    g.x_sn = lead == 2 ? x->strides[0] : 0;
    g.x_sc = lead >= 1 ? x->strides[lead - 1] : 0;
    g.W = x->shape[x->rank - 1];
    g.OW = o->shape[o->rank - 1];
    g.x_sw = x->strides[x->rank - 1];
    g.kw = op->i[nd];
    g.sw = op->i[3 + nd];
    g.pw = op->i[6 + nd];
    g.dw = op->i[9 + nd];
    if (nd == 2) {
        g.H = x->shape[x->rank - 2];
        g.OH = o->shape[o->rank - 2];
        g.x_sh = x->strides[x->rank - 2];
        g.kh = op->i[1], g.sh = op->i[4], g.ph = op->i[7], g.dh = op->i[10];
    } else {
        g.H = g.OH = 1;
        g.kh = g.sh = g.dh = 1;
    }
    int64_t rows = g.N * g.C * g.OH;
    if (rows == 0 || g.OW == 0) return true;
    bool small_plane = g.H * g.W < ((int64_t)1 << 30);
    if (use_avx512() && small_plane && g.x_sw == 1 && g.sw == 1) {
        em_parallel_for(rows, g.OW >= 4096 ? 1 : 4096 / g.OW + 1, rows_avx, &g);
    } else if (use_avx512() && small_plane && g.x_sc == 1 && g.C >= 8) {
        int64_t units = g.N * g.OH * ((g.C + 15) / 16);
        em_parallel_for(units, g.OW >= 256 ? 1 : 256 / g.OW + 1, cl_avx, &g);
    } else {
        em_parallel_for(rows, g.OW >= 4096 ? 1 : 4096 / g.OW + 1, rows_scalar, &g);
    }
    return true;
}
