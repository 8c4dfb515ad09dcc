/* The CUDA backend's average pooling, adaptive pooling and interpolation
 * (kernels/index_resample.cu): float dtypes, any input strides, contiguous outputs; reached through
 * cuda_index.c. */
#include <stdio.h>
#include <string.h>

#include "cuda.h"
#include "cuda_index.h"

typedef struct rs_geom { /* matches `struct rs_geom` in kernels/index_resample.cu */
    int64_t in[3], out[3], k[3], s[3], p[3], d[3];
    int64_t lead[2], lst[2], xs[3];
    int64_t planes;
    int nlead, incl_pad, mode, align;
} rs_geom;

bool cuda_resample_supports(const ir_op *op)
{
    const ir_tensor *x = op->in[0];
    int nd = ir_spatial_dims(op->kind, &op->p);
    return em_dtype_is_float(x->dtype) && op->out[0]->dtype == x->dtype && nd >= 1 && nd <= 3 &&
           x->rank - nd >= 1 && x->rank - nd <= 2;
}

static int float_code(em_dtype dt)
{
    return dt == EM_F64 ? 0 : dt == EM_F32 ? 1 : dt == EM_F16 ? 2 : 3;
}

em_status cuda_resample_exec(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *x = op->in[0], *o = op->out[0];
    bool pool = op->kind == EM_OP_AVG_POOL, interp = op->kind == EM_OP_INTERPOLATE;
    rs_geom g;
    memset(&g, 0, sizeof g);
    ir_win3 w; /* the op's spatial dims, right-aligned */
    int nd = ir_pool_windows(op->kind, &op->p, x->shape, x->rank, o->shape, o->rank, &w);
    for (int i = 0; i < 3; i++) {
        int j = i - (3 - nd);
        g.in[i] = w.in[i], g.out[i] = w.out[i];
        g.xs[i] = j >= 0 ? x->strides[x->rank - nd + j] : 0;
        g.k[i] = w.k[i], g.s[i] = w.s[i], g.p[i] = w.p[i], g.d[i] = w.d[i];
    }
    g.nlead = x->rank - nd;
    g.planes = 1;
    for (int d = 0; d < g.nlead; d++) {
        g.lead[d] = x->shape[d];
        g.lst[d] = x->strides[d];
        g.planes *= x->shape[d];
    }
    g.incl_pad = pool && op->p.pool.count_include_pad;
    g.mode = interp ? (int)op->p.interp.mode : 0;
    g.align = interp && op->p.interp.align_corners;
    long long n = ir_numel(o);
    if (n == 0) return EM_OK;
    const char *name = pool ? "rs_avg_pool" : interp ? "rs_interp" : "rs_adaptive";
    CUfunction f = cuda_kernel(dev, name, what);
    if (!f) return em_last_status();
    const void *xp = ir_ptr(x);
    void *yp = ir_ptr(o);
    int dt = float_code(x->dtype);
    if (pool || interp) {
        void *params[] = {(void *)&xp, &dt, &yp, &g};
        return cuda_launch(dev, f, n, params, what);
    }
    int is_max = op->kind == EM_OP_ADAPTIVE_MAX_POOL;
    void *ip = is_max && op->n_out > 1 && op->out[1] ? ir_ptr(op->out[1]) : NULL;
    void *params[] = {(void *)&xp, &dt, &yp, &ip, &is_max, &g};
    return cuda_launch(dev, f, n, params, what);
}
