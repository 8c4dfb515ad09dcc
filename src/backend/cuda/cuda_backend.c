/* The CUDA backend's table: memory and copies through the pool and the driver, supports() and
 * exec(). Each op family has its own file (cuda_elementwise.c, cuda_reduce.c, cuda_index.c,
 * cuda_nn.c, cuda_attention.c, cuda_optim.c, cuda_conv.c, cuda_matmul.c); this one keeps FILL,
 * COPY, MASKED_FILL, max_pool and layer_norm rows. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"
#include "cuda_attention.h"
#include "cuda_conv.h"
#include "cuda_index.h"
#include "cuda_nn.h"
#include "cuda_elementwise.h"
#include "cuda_reduce.h"

static int be_device_count(void)
{
    return cuda_device_count();
}

static void *be_alloc(int device, size_t nbytes)
{
    return cuda_pool_alloc(device, nbytes);
}

static void be_free(int device, void *p)
{
    cuda_pool_free(device, p);
}

static em_status be_copy_from_host(int device, void *dst, const void *src, size_t nbytes)
{
    return cuda_copy_from_host(device, dst, src, nbytes, "cuda copy from host");
}

static em_status be_copy_to_host(int device, void *dst, const void *src, size_t nbytes)
{
    return cuda_copy_to_host(device, dst, src, nbytes, "cuda copy to host");
}

static em_status be_copy_within(int device, void *dst, const void *src, size_t nbytes)
{
    em_status st = cuda_enter(device, "cuda copy");
    if (st != EM_OK || nbytes == 0) return st;
    return cuda_copy_d2d(device, dst, src, nbytes, "cuda copy");
}

/* The whole device: every stream of every thread. */
static em_status be_sync(int device)
{
    em_status st = cuda_enter(device, "em_device_sync");
    if (st != EM_OK) return st;
    CUresult r = cuda_drv.cuCtxSynchronize();
    return r ? cuda_fail(EM_ERR_DEVICE, r, "em_device_sync", "cuCtxSynchronize", device) : EM_OK;
}

/* ---- which ops ---------------------------------------------------------------------------- */

static bool is_f(em_dtype dt)
{
    return dt == EM_F32 || dt == EM_F64;
}

static bool plain_size(em_dtype dt)
{
    size_t es = em_dtype_size(dt);
    return es == 1 || es == 2 || es == 4 || es == 8;
}

#define ROW_MAX 8192 /* 256 threads x ROW_VPT registers in rows.cu */

/* The length of x's rows of its n_norm trailing dims; *rows: how many (the leading dims). */
static long long norm_rows(const ir_tensor *x, int n_norm, long long *rows)
{
    long long len = 1, r = 1;
    for (int d = 0; d < x->rank; d++) {
        if (d >= x->rank - n_norm)
            len *= x->shape[d];
        else
            r *= x->shape[d];
    }
    if (rows) *rows = r;
    return len;
}

/* Registers per thread of the row kernels for rows of len elements: 1, 2, 4 ... 32. */
static int row_vpt(int64_t len)
{
    int v = 1;
    while (v < 32 && 256 * (int64_t)v < len) v *= 2;
    return v;
}

/* LAYER_NORM on contiguous f32/f64 rows of at most ROW_MAX elements (else the CPU fallback). */
static bool layer_norm_ok(const ir_op *op)
{
    const ir_tensor *x = op->in[0];
    if (!is_f(x->dtype) || op->out[0]->dtype != x->dtype || !ir_is_contiguous(x)) return false;
    for (int i = 1; i < op->n_in; i++)
        if (op->in[i]->dtype != x->dtype || !ir_is_contiguous(op->in[i])) return false;
    return norm_rows(x, op->p.norm.n_norm, NULL) <= ROW_MAX;
}

/* NORM_BACKWARD on contiguous f32 rows of at most ROW_MAX elements (else the CPU fallback; the
 * layer / RMS norm rule composes instead). */
static bool norm_bw_ok(const ir_op *op)
{
    const ir_tensor *x = op->in[0];
    if (x->dtype != EM_F32) return false;
    for (int i = 0; i < op->n_in; i++)
        if (op->in[i]->dtype != EM_F32 || !ir_is_contiguous(op->in[i])) return false;
    for (int i = 0; i < op->n_out; i++)
        if (op->out[i]->dtype != EM_F32 || !ir_is_contiguous(op->out[i])) return false;
    return norm_rows(x, op->p.norm_bw.n_norm, NULL) <= ROW_MAX;
}

/* CONV / CONV_TRANSPOSE of one float dtype (f16/bf16 run in f32), any input layout (packed
 * first), any groups, 1 to 3 spatial dims. */
static bool conv_ok(const ir_op *op)
{
    em_dtype dt = op->out[0]->dtype;
    if (!(is_f(dt) || dt == EM_F16 || dt == EM_BF16) || !ir_is_contiguous(op->out[0])) return false;
    for (int i = 0; i < op->n_in; i++)
        if (op->in[i]->dtype != dt) return false;
    return op->p.conv.nd >= 1 && op->p.conv.nd <= 3;
}

static bool be_supports(const ir_op *op)
{
    em_op_kind k = op->kind;
    if (cuda_reduce_claims(k)) return cuda_reduce_supports(op);
    if (cuda_nn_claims(k)) return cuda_nn_supports(op);
    if (cuda_index_claims(k)) return cuda_index_supports(op);
    if (cuda_attn_claims(k)) return cuda_attn_supports(op);
    if (cuda_ew_claims(k)) return cuda_ew_supports(op);
    if (k == EM_OP_FILL) return op->n_out == 1 && plain_size(op->out[0]->dtype);
    if (k == EM_OP_COPY)
        return op->n_in == 1 && op->in[0]->dtype == op->out[0]->dtype &&
               plain_size(op->in[0]->dtype);
    em_dtype o = op->out[0]->dtype;
    if (k == EM_OP_MASKED_FILL)
        return op->n_in == 2 && plain_size(o) && op->in[0]->dtype == o &&
               op->in[1]->dtype == EM_BOOL;
    if (k == EM_OP_MATMUL)
        return (op->n_in == 2 && (is_f(o) || o == EM_F16 || o == EM_BF16) &&
                op->in[0]->dtype == o && op->in[1]->dtype == o) ||
               cuda_nn_int_matmul_ok(op);
    if (k == EM_OP_MATMUL_BIAS_ACT) {
        bool ok = is_f(o) || o == EM_F16 || o == EM_BF16;
        for (int i = 0; i < op->n_in; i++) ok = ok && op->in[i]->dtype == o;
        for (int i = 0; i < op->n_out; i++) ok = ok && ir_is_contiguous(op->out[i]);
        return ok;
    }
    if (k == EM_OP_CONV || k == EM_OP_CONV_TRANSPOSE) return conv_ok(op);
    if (k == EM_OP_NORM_BACKWARD) return norm_bw_ok(op);
    if (k == EM_OP_IM2COL || k == EM_OP_COL2IM) /* any strides: run_fold copies first */
        return em_dtype_is_float(o) && op->in[0]->dtype == o;
    if (k == EM_OP_MAX_POOL || k == EM_OP_MAX_POOL_VALUES) {
        const ir_tensor *x = op->in[0];
        int nd = op->p.pool.nd;
        int64_t plane = 1;
        for (int d = x->rank - nd; d < x->rank && d >= 0; d++) plane *= x->shape[d];
        return (is_f(x->dtype) || x->dtype == EM_F16 || x->dtype == EM_BF16) &&
               op->out[0]->dtype == x->dtype && ir_is_contiguous(op->out[0]) && nd >= 1 &&
               nd <= 3 && plane < ((int64_t)1 << 31) / 4;
    }
    return false;
}

/* ---- exec --------------------------------------------------------------------------------- */

typedef struct strided_arg { /* matches `struct strided` in the kernel source */
    int64_t shape[16];
    int64_t strides[16];
    int rank;
} strided_arg;

static const char *size_suffix(size_t es)
{
    return es == 1 ? "1" : es == 2 ? "2" : es == 4 ? "4" : "8";
}

static em_status run_fill(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *o = op->out[0];
    if (!ir_is_contiguous(o))
        return em_error(EM_ERR_UNSUPPORTED, "%s: the cuda backend fills only contiguous outputs",
                        what);
    size_t es = em_dtype_size(o->dtype);
    unsigned char pat[8] = {0};
    double v = op->p.fill.value;
    if (!em_dtype_is_float(o->dtype) && o->dtype != EM_BOOL)
        ir_set_i64(pat, o->dtype,
                   isnan(v)       ? 0
                   : v >= 9.2e18  ? INT64_MAX
                   : v <= -9.2e18 ? INT64_MIN
                                  : (int64_t)v);
    else
        ir_set_f64(pat, o->dtype, v);
    unsigned long long pattern = 0;
    memcpy(&pattern, pat, es); /* little-endian: the kernel's narrowing cast keeps these bytes */
    char name[32];
    snprintf(name, sizeof name, "em_fill_%s", size_suffix(es));
    CUfunction f = cuda_kernel(dev, name, what);
    if (!f) return em_last_status();
    void *out = ir_ptr(o);
    long long n = ir_numel(o);
    void *params[] = {&out, &n, &pattern};
    return cuda_launch(dev, f, n, params, what);
}

static em_status run_copy(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *in = op->in[0], *o = op->out[0];
    size_t es = em_dtype_size(in->dtype);
    long long n = ir_numel(o);
    if (n == 0) return EM_OK;
    if (ir_is_contiguous(in))
        return cuda_copy_d2d(dev, ir_ptr(o), ir_ptr(in), (size_t)n * es, what);
    strided_arg s;
    memset(&s, 0, sizeof s);
    s.rank = in->rank;
    for (int d = 0; d < in->rank; d++) {
        s.shape[d] = in->shape[d];
        s.strides[d] = in->strides[d];
    }
    char name[32];
    snprintf(name, sizeof name, "em_strided_%s", size_suffix(es));
    CUfunction f = cuda_kernel(dev, name, what);
    if (!f) return em_last_status();
    void *x = ir_ptr(in), *y = ir_ptr(o);
    void *params[] = {&x, &y, &n, &s};
    return cuda_launch(dev, f, n, params, what);
}

const char *cuda_short_name(em_dtype dt)
{
    return dt == EM_F32 ? "f32" : dt == EM_F64 ? "f64" : "i64";
}

typedef struct bidx_arg { /* matches `struct bidx` in the kernel source */
    int64_t shape[8];
    int64_t st[4][8];
    int rank;
} bidx_arg;

/* Element strides of the inputs broadcast to the output's shape (slot 3: the output). */
static void fill_bidx(const ir_op *op, bidx_arg *b)
{
    const ir_tensor *o = op->out[0];
    memset(b, 0, sizeof *b);
    b->rank = o->rank;
    for (int d = 0; d < o->rank; d++) {
        b->shape[d] = o->shape[d];
        b->st[3][d] = o->strides[d];
        for (int k = 0; k < op->n_in && k < 3; k++) {
            const ir_tensor *t = op->in[k];
            int td = d - (o->rank - t->rank);
            b->st[k][d] = td < 0 || t->shape[td] == 1 ? 0 : t->strides[td];
        }
    }
}

/* MASKED_FILL of every dtype (x, mask broadcast; the fill value converted as the CPU does):
 * a byte-moving kernel by element size. */
static em_status run_masked_fill(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *o = op->out[0];
    bidx_arg b;
    fill_bidx(op, &b);
    long long n = ir_numel(o);
    void *y = ir_ptr(o), *x0 = ir_ptr(op->in[0]), *x1 = ir_ptr(op->in[1]);
    char name[40];
    snprintf(name, sizeof name, "em_mfill_s%s", size_suffix(em_dtype_size(o->dtype)));
    CUfunction f = cuda_kernel(dev, name, what);
    if (!f) return em_last_status();
    unsigned char pat[8] = {0};
    ir_set_f64(pat, o->dtype, op->p.fill.value);
    unsigned long long pattern = 0;
    memcpy(&pattern, pat, em_dtype_size(o->dtype));
    void *params[] = {&x0, &x1, &y, &n, &pattern, &b};
    return cuda_launch(dev, f, n, params, what);
}

static em_status run_layer_norm(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *x = op->in[0], *o = op->out[0];
    const em_p_norm *np = &op->p.norm;
    long long rows, len = norm_rows(x, np->n_norm, &rows);
    if (len == 0 || rows == 0) return EM_OK;
    int next = 1;
    void *xp = ir_ptr(x), *yp = ir_ptr(o);
    void *wp = np->has_weight ? ir_ptr(op->in[next++]) : NULL;
    void *bp = np->has_bias ? ir_ptr(op->in[next++]) : NULL;
    double eps = np->eps;
    char name[40];
    int vpt = row_vpt(len);
    bool x4 = o->dtype == EM_F32 && len % 4 == 0 && vpt >= 4 && vpt <= 16 &&
              !(((uintptr_t)xp | (uintptr_t)yp | (uintptr_t)wp | (uintptr_t)bp) & 15);
    snprintf(name, sizeof name, "em_layer_norm_rows_%s%s_v%d", cuda_short_name(o->dtype),
             x4 ? "x4" : "", vpt);
    CUfunction f = cuda_kernel(dev, name, what);
    if (!f) return em_last_status();
    void *params[] = {&xp, &wp, &bp, &yp, &rows, &len, &eps};
    return cuda_launch_blocks(dev, f, rows, params, what);
}

/* NORM_BACKWARD (rows_norm.cu): em_norm_bw_f32[x4]_v* a block of 256 per row (float4 where rows are
 * a multiple of 4 elements and every pointer is 16-byte aligned) over a grid of as many blocks as
 * stay resident (2 to 4 per multiprocessor by the registers a row takes), writing dx and each
 * block's partial weight / bias gradient rows; em_norm_bw_cols_f32 adds those in block order. */
static em_status run_norm_backward(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *x = op->in[0];
    const em_p_norm_bw *nb = &op->p.norm_bw;
    long long rows, len = norm_rows(x, nb->n_norm, &rows);
    if (len == 0) return EM_OK;
    bool has_w = nb->has_weight, want_w = nb->want_dw, want_b = nb->want_db;
    int vpt = row_vpt(len), rms = nb->rms;
    const cuda_device_info *info = cuda_device(dev);
    long long sms = info && info->sm_count > 0 ? info->sm_count : 132;
    long long grid = sms * (vpt >= 32 ? 2 : vpt >= 16 ? 3 : 4); /* the kernels' launch bounds */
    if (grid > rows) grid = rows;
    float *pw = NULL, *pb = NULL;
    size_t pn = (size_t)(grid * len) * sizeof(float);
    if (want_w && grid > 0 && !(pw = cuda_pool_alloc(dev, pn))) return em_last_status();
    if (want_b && grid > 0 && !(pb = cuda_pool_alloc(dev, pn))) {
        cuda_pool_free(dev, pw);
        return em_last_status();
    }
    void *xp = ir_ptr(x), *gp = ir_ptr(op->in[has_w ? 2 : 1]), *dxp = ir_ptr(op->out[0]);
    void *wp = has_w ? ir_ptr(op->in[1]) : NULL, *pwp = pw, *pbp = pb;
    bool x4 = len % 4 == 0 && vpt >= 4 &&
              !(((uintptr_t)xp | (uintptr_t)gp | (uintptr_t)dxp | (uintptr_t)wp) & 15);
    char name[40];
    snprintf(name, sizeof name, "em_norm_bw_f32%s_v%d", x4 ? "x4" : "", vpt);
    CUfunction f = rows > 0 ? cuda_kernel(dev, name, what) : NULL;
    CUfunction fc = want_w || want_b ? cuda_kernel(dev, "em_norm_bw_cols_f32", what) : NULL;
    em_status st = em_last_status();
    if ((rows == 0 || f) && (!(want_w || want_b) || fc)) {
        st = EM_OK;
        double eps = nb->eps;
        if (rows > 0) {
            unsigned g3[3] = {(unsigned)grid, 1, 1}, b3[3] = {256, 1, 1};
            unsigned smem = (unsigned)((want_w + want_b) * len * (long long)sizeof(float));
            void *p[] = {&xp, &wp, &gp, &dxp, &pwp, &pbp, &rows, &len, &eps, &rms};
            st = cuda_launch_grid_smem(dev, f, g3, b3, smem, p, what);
        }
        if (st == EM_OK && fc) {
            void *dwp = want_w ? ir_ptr(op->out[1]) : NULL;
            void *dbp = want_b ? ir_ptr(op->out[want_w ? 2 : 1]) : NULL;
            unsigned g3[3] = {(unsigned)((len + 31) / 32), 1, 1}, b3[3] = {32, 8, 1};
            void *p[] = {&pwp, &pbp, &grid, &len, &dwp, &dbp};
            st = cuda_launch_grid(dev, fc, g3, b3, p, what);
        }
    }
    cuda_pool_free(dev, pw); /* stream order: the kernels above finish before any reuse */
    cuda_pool_free(dev, pb);
    return st;
}

typedef struct pool_arg { /* matches `struct poolg` in kernels/pool.cu */
    int64_t in[3], out[3], k[3], s[3], p[3], d[3];
    int64_t planes;
} pool_arg;

static em_status max_pool_contig(const ir_op *op, const ir_tensor *x, int dev, const char *what)
{
    const ir_tensor *o = op->out[0];
    pool_arg g;
    memset(&g, 0, sizeof g);
    int64_t in_plane = 1;
    ir_win3 w; /* the op's spatial dims, right-aligned */
    ir_pool_windows(op->kind, &op->p, x->shape, x->rank, o->shape, o->rank, &w);
    for (int i = 0; i < 3; i++) {
        g.in[i] = w.in[i], g.out[i] = w.out[i];
        g.k[i] = w.k[i], g.s[i] = w.s[i], g.p[i] = w.p[i], g.d[i] = w.d[i];
        in_plane *= g.in[i];
    }
    g.planes = in_plane ? ir_numel(x) / in_plane : 0;
    long long n = ir_numel(o);
    if (n == 0) return EM_OK;
    char name[40];
    const char *dn = o->dtype == EM_F16    ? "f16"
                     : o->dtype == EM_BF16 ? "bf16"
                                           : cuda_short_name(o->dtype);
    void *xp = ir_ptr(x), *yp = ir_ptr(o);
    void *ip = op->n_out > 1 && op->out[1] ? ir_ptr(op->out[1]) : NULL;
    /* values of 3 x 3 windows, stride 1: a column walk over a shared-memory tile (pool.cu) */
    if (!ip && (o->dtype == EM_F32 || o->dtype == EM_F64) && g.in[0] == 1 && g.k[0] == 1 &&
        g.k[1] == 3 && g.k[2] == 3 && g.s[1] == 1 && g.s[2] == 1 && g.d[1] == 1 && g.d[2] == 1 &&
        g.p[1] <= 2 && g.p[2] <= 2 && g.out[1] <= 16 * 65535) {
        snprintf(name, sizeof name, "em_max_pool3s1_%s", dn);
        CUfunction f = cuda_kernel(dev, name, what);
        if (!f) return em_last_status();
        void *params[] = {&xp, &yp, &g};
        unsigned grid[3] = {(unsigned)((g.out[2] + 127) / 128), (unsigned)((g.out[1] + 15) / 16),
                            (unsigned)(g.planes > 65535 ? 65535 : g.planes)};
        unsigned block[3] = {128, 1, 1};
        return cuda_launch_grid(dev, f, grid, block, params, what);
    }
    /* 2-D windows: 32 x 16 outputs per block from an input tile in shared memory (pool.cu) */
    int iw_t = (int)((32 - 1) * g.s[2] + (g.k[2] - 1) * g.d[2] + 1);
    int ih_t = (int)((16 - 1) * g.s[1] + (g.k[1] - 1) * g.d[1] + 1);
    size_t tile = (size_t)iw_t * (size_t)ih_t * em_dtype_size(o->dtype);
    if (g.in[0] == 1 && g.k[0] == 1 && tile <= 48 * 1024 && g.out[1] <= 16 * 65535) {
        snprintf(name, sizeof name, "em_max_pool_tiled_%s", dn);
        CUfunction f = cuda_kernel(dev, name, what);
        if (!f) return em_last_status();
        void *params[] = {&xp, &yp, &ip, &g, &iw_t, &ih_t};
        unsigned grid[3] = {(unsigned)((g.out[2] + 31) / 32), (unsigned)((g.out[1] + 15) / 16),
                            (unsigned)(g.planes > 65535 ? 65535 : g.planes)};
        unsigned block[3] = {256, 1, 1};
        return cuda_launch_grid_smem(dev, f, grid, block, (unsigned)tile, params, what);
    }
    snprintf(name, sizeof name, "em_max_pool_%s", dn);
    CUfunction f = cuda_kernel(dev, name, what);
    if (!f) return em_last_status();
    void *params[] = {&xp, &yp, &ip, &g};
    int64_t out_plane = g.planes ? n / g.planes : 0;
    unsigned grid[3] = {(unsigned)((out_plane + 255) / 256),
                        (unsigned)(g.planes > 65535 ? 65535 : g.planes), 1};
    unsigned block[3] = {256, 1, 1};
    return cuda_launch_grid(dev, f, grid, block, params, what);
}

/* MAX_POOL (values and i64 indices) and MAX_POOL_VALUES (one output: no indices written); a
 * strided input is packed contiguous first. */
static em_status run_max_pool(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *o = op->out[0];
    if (ir_numel(o) == 0) return EM_OK;
    ir_tensor xc;
    void *tmp = NULL;
    em_status st = cuda_nn_stage(dev, op->in[0], false, &xc, &tmp, what);
    if (st == EM_OK) st = max_pool_contig(op, &xc, dev, what);
    cuda_pool_free(dev, tmp); /* stream order: the pool has read it before any reuse */
    return st;
}

static em_status be_exec(const ir_op *op)
{
    char what[64];
    snprintf(what, sizeof what, "em_%s", em_op_name(op->kind));
    int dev = op->out[0]->device.index;
    em_status st = cuda_enter(dev, what);
    if (st != EM_OK) return st;
    if (cuda_reduce_claims(op->kind)) return cuda_reduce_exec(op, dev, what);
    if (cuda_index_claims(op->kind)) return cuda_index_exec(op, dev, what);
    if (cuda_ew_claims(op->kind)) return cuda_ew_exec(op, dev, what);
    switch (op->kind) {
    case EM_OP_FILL: return run_fill(op, dev, what);
    case EM_OP_COPY: return run_copy(op, dev, what);
    case EM_OP_CONV:
    case EM_OP_CONV_TRANSPOSE: return cuda_conv_exec(op, dev, what);
    case EM_OP_IM2COL:
    case EM_OP_COL2IM: return cuda_fold_exec(op, dev, what);
    case EM_OP_MAX_POOL:
    case EM_OP_MAX_POOL_VALUES: return run_max_pool(op, dev, what);
    case EM_OP_LAYER_NORM:
        return layer_norm_ok(op) ? run_layer_norm(op, dev, what) : cuda_nn_exec(op, dev, what);
    case EM_OP_RMS_NORM:
    case EM_OP_GROUP_NORM:
    case EM_OP_BATCH_NORM:
    case EM_OP_RFFT:
    case EM_OP_IRFFT: return cuda_nn_exec(op, dev, what);
    case EM_OP_MATMUL:
    case EM_OP_MATMUL_BIAS_ACT: return cuda_matmul(op, dev, what);
    case EM_OP_SDPA:
    case EM_OP_SDPA_BACKWARD: return cuda_attn_exec(op, dev, what);
    case EM_OP_NORM_BACKWARD: return run_norm_backward(op, dev, what);
    case EM_OP_MASKED_FILL: return run_masked_fill(op, dev, what);
    default: return em_error(EM_ERR_INTERNAL, "%s: no cuda exec for this kind", what);
    }
}

const em_backend cuda_backend = {
    .name = "cuda",
    .device_count = be_device_count,
    .alloc = be_alloc,
    .free = be_free,
    .copy_from_host = be_copy_from_host,
    .copy_to_host = be_copy_to_host,
    .copy_within = be_copy_within,
    .supports = be_supports,
    .exec = be_exec,
    .sync = be_sync,
    .update = cuda_update,
    .streams = &cuda_stream_ops,
    .copy_peer = cuda_copy_peer,
    .props = cuda_device_props,
    .mem_stats = cuda_device_mem_stats,
    .empty_cache = cuda_pool_empty_cache,
    .reset_peak = cuda_pool_reset_peak,
    .set_memory_limit = cuda_pool_set_limit,
    .alloc_persistent = cuda_pool_alloc_persistent,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .host_wait = cuda_host_wait,
};
