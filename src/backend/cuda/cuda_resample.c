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

bool cuda_resample_supports(const em_op *op)
{
    const em_tensor *x = op->in[0];
    int nd = (int)op->i[0];
    return em_dtype_is_float(x->dtype) && op->out[0]->dtype == x->dtype && nd >= 1 && nd <= 3 &&
           x->rank - nd >= 1 && x->rank - nd <= 2;
}

static int float_code(em_dtype dt)
{
    return dt == EM_F64 ? 0 : dt == EM_F32 ? 1 : dt == EM_F16 ? 2 : 3;
}

em_status cuda_resample_exec(const em_op *op, int dev, const char *what)
{
    const em_tensor *x = op->in[0], *o = op->out[0];
    int nd = (int)op->i[0];
    bool pool = op->kind == EM_OP_AVG_POOL, interp = op->kind == EM_OP_INTERPOLATE;
    rs_geom g;
    memset(&g, 0, sizeof g);
    for (int i = 0; i < 3; i++) {
        int j = i - (3 - nd); /* the op's spatial dims, right-aligned */
        g.in[i] = j >= 0 ? x->shape[x->rank - nd + j] : 1;
        g.out[i] = j >= 0 ? o->shape[o->rank - nd + j] : 1;
        g.xs[i] = j >= 0 ? x->strides[x->rank - nd + j] : 0;
        g.k[i] = pool && j >= 0 ? op->i[1 + j] : 1;
        g.s[i] = pool && j >= 0 ? op->i[4 + j] : 1;
        g.p[i] = pool && j >= 0 ? op->i[7 + j] : 0;
        g.d[i] = pool && j >= 0 ? op->i[10 + j] : 1;
    }
    g.nlead = x->rank - nd;
    g.planes = 1;
    for (int d = 0; d < g.nlead; d++) {
        g.lead[d] = x->shape[d];
        g.lst[d] = x->strides[d];
        g.planes *= x->shape[d];
    }
    g.incl_pad = pool && op->i[14] != 0;
    g.mode = interp ? (int)op->i[3] : 0;
    g.align = interp && op->i[4] != 0;
    long long n = tn_numel(o);
    if (n == 0) return EM_OK;
    const char *name = pool ? "rs_avg_pool" : interp ? "rs_interp" : "rs_adaptive";
    CUfunction f = cuda_kernel(dev, name, what);
    if (!f) return em_last_status();
    const void *xp = tn_ptr(x);
    void *yp = tn_ptr(o);
    int dt = float_code(x->dtype);
    if (pool || interp) {
        void *params[] = {(void *)&xp, &dt, &yp, &g};
        return cuda_launch(dev, f, n, params, what);
    }
    int is_max = op->kind == EM_OP_ADAPTIVE_MAX_POOL;
    void *ip = is_max && op->n_out > 1 && op->out[1] ? tn_ptr(op->out[1]) : NULL;
    void *params[] = {(void *)&xp, &dt, &yp, &ip, &is_max, &g};
    return cuda_launch(dev, f, n, params, what);
}
