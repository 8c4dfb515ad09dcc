/* SDPA on the CUDA backend: f16/bf16 records with head dim 64 or 128 take the flash kernel (any
 * mask, causal or not; inputs the tensor cores cannot load in place are gathered first); f32/f64
 * records whose scores fit in 1 GiB go through the matmul kernels (the CPU's GEMM path); every
 * other record (other head dims, E != Ev, S = 0, a non-finite V) the general kernel, which takes
 * any strides and computes in f64 as the CPU's row path does. SDPA_BACKWARD runs the flash
 * backward kernels (kernels/attention_bwd.cu) in the flash kernel's cases only. */
#include <stdio.h>
#include <string.h>

#include "cuda.h"
#include "cuda_attention.h"

typedef struct attn_geo { /* matches struct attn_geo in kernels/attention.cu */
    int64_t bshape[8];
    int64_t qb[8], kb[8], vb[8], mb[8];
    int64_t qs[2], ks[2], vs[2], ms[2];
    int64_t L, S, E, Ev, nbatch;
    double scale;
    int nb, causal, mkind;
} attn_geo;

typedef struct attn_flash_arg { /* matches struct attn_flash_arg in kernels/attention.cu */
    int64_t bshape[8];
    int64_t qb[8], kb[8], vb[8], mb[8];
    int64_t qs, ks, vs;
    int64_t ms[2];
    int64_t L, S, nbatch;
    float scale_log2, inv_scale;
    int nb, causal, mkind;
} attn_flash_arg;

typedef struct attn_bwd_arg { /* matches struct attn_bwd_arg in kernels/attention_bwd.cu */
    int64_t bshape[8];
    int64_t qb[8], kb[8], vb[8], ob[8], gb[8], mb[8];
    int64_t qs, ks, vs, os, gs;
    int64_t ms[2];
    int64_t L, S, nbatch;
    float scale_log2, inv_scale, scale;
    int nb, causal, mkind;
} attn_bwd_arg;

bool cuda_attn_claims(em_op_kind k)
{
    return k == EM_OP_SDPA || k == EM_OP_SDPA_BACKWARD;
}

static bool flash_case(const ir_op *op, int64_t E, int64_t Ev, int64_t S);

/* The forward's lse [B..., L] (f32, contiguous) for an output o [B..., L, Ev]. */
static bool lse_fits(const ir_tensor *lse, const ir_tensor *o)
{
    if (lse->dtype != EM_F32 || !ir_is_contiguous(lse) || lse->rank != o->rank - 1) return false;
    for (int d = 0; d < lse->rank; d++)
        if (lse->shape[d] != o->shape[d]) return false;
    return true;
}

/* SDPA_BACKWARD runs only in the flash kernels' cases (f16/bf16, E = Ev of 64 or 128, S > 0,
 * L > 0); the sdpa rule composes the others from ops. */
static bool bwd_supports(const ir_op *op)
{
    int has_lse = op->p.sdpa.has_lse;
    if (op->n_in < 5 + has_lse || op->n_in > 6 + has_lse || op->n_out != 3) return false;
    const ir_tensor *q = op->in[0], *k = op->in[1], *v = op->in[2];
    em_dtype dt = q->dtype;
    if (dt != EM_F16 && dt != EM_BF16) return false;
    for (int i = 1; i < 5; i++)
        if (op->in[i]->dtype != dt) return false;
    for (int i = 0; i < 3; i++)
        if (op->out[i]->dtype != dt || !ir_is_contiguous(op->out[i]) || op->out[i]->rank > 10)
            return false;
    if (ir_sdpa_bwd_mask(op)) {
        em_dtype m = op->in[5]->dtype;
        if (!(op->p.sdpa.mask_kind == 1 && m == EM_BOOL) && !(op->p.sdpa.mask_kind == 2 && m == dt))
            return false;
    }
    const ir_tensor *o = op->in[3];
    if (has_lse && !lse_fits(ir_sdpa_bwd_lse(op), o)) return false;
    int64_t L = o->shape[o->rank - 2];
    return L > 0 &&
           flash_case(op, q->shape[q->rank - 1], v->shape[v->rank - 1], k->shape[k->rank - 2]);
}

static bool attn_dtype(em_dtype dt)
{
    return dt == EM_F32 || dt == EM_F64 || dt == EM_F16 || dt == EM_BF16;
}

bool cuda_attn_supports(const ir_op *op)
{
    if (op->kind == EM_OP_SDPA_BACKWARD) return bwd_supports(op);
    if (op->n_in < 3 || op->n_in > 4 || op->n_out < 1 || op->n_out > 2) return false;
    em_dtype dt = op->out[0]->dtype;
    /* the rows' lse as a second output: written by the flash kernels only */
    if (op->n_out == 2 &&
        (!lse_fits(op->out[1], op->out[0]) ||
         !flash_case(op, op->in[0]->shape[op->in[0]->rank - 1],
                     op->in[2]->shape[op->in[2]->rank - 1], op->in[1]->shape[op->in[1]->rank - 2])))
        return false;
    if (!attn_dtype(dt) || op->out[0]->rank - 2 > 8 || !ir_is_contiguous(op->out[0])) return false;
    for (int i = 0; i < 3; i++)
        if (op->in[i]->dtype != dt) return false;
    if (op->n_in == 4) {
        em_dtype m = op->in[3]->dtype;
        if (!(op->p.sdpa.mask_kind == 1 && m == EM_BOOL) && !(op->p.sdpa.mask_kind == 2 && m == dt))
            return false;
    }
    return true;
}

/* Batch strides (elements) of a tensor of the given shape and strides, right-aligned to the nb
 * output batch dims, 0 where broadcast. */
static void batch_strides(const int64_t *shape, const int64_t *strides, int rank, int nb,
                          int64_t *st)
{
    int lead = nb - (rank - 2);
    for (int d = 0; d < nb; d++) {
        int td = d - lead;
        st[d] = td < 0 || shape[td] == 1 ? 0 : strides[td];
    }
}

/* The strides of mask m broadcast to [batch (nb dims)..., L, S], right-aligned (0 along the
 * dims it lacks or has as 1): the batch dims' into mb, the last two into ms. */
static void mask_strides(const ir_tensor *m, int nb, int64_t *mb, int64_t *ms)
{
    int lead = nb + 2 - m->rank;
    int64_t st[EM_MAX_RANK + 2];
    for (int d = 0; d < nb + 2; d++) {
        int md = d - lead;
        st[d] = md < 0 || m->shape[md] == 1 ? 0 : m->strides[md];
    }
    memcpy(mb, st, sizeof(int64_t) * (size_t)nb);
    ms[0] = st[nb], ms[1] = st[nb + 1];
}

static const char *dt_name(em_dtype dt)
{
    return dt == EM_F32 ? "f32" : dt == EM_F64 ? "f64" : dt == EM_F16 ? "f16" : "bf16";
}

/* The flash kernel's cases: f16/bf16, E = Ev of 64 or 128, S > 0 (any mask). Config
 * cuda_flash = off keeps the general kernel. */
static bool flash_case(const ir_op *op, int64_t E, int64_t Ev, int64_t S)
{
    if (!core_cfg_bool(CFG_CUDA_FLASH)) return false;
    em_dtype dt = op->out[0]->dtype;
    return (dt == EM_F16 || dt == EM_BF16) && E == Ev && (E == 64 || E == 128) && S > 0;
}

/* The layout the flash kernel loads: rows contiguous, row and batch strides multiples of 8 halves
 * and a 16-byte aligned base, so every 16-byte cp.async chunk lies inside one row. */
static bool flash_layout(const ir_tensor *t)
{
    if (t->strides[t->rank - 1] != 1 || t->strides[t->rank - 2] % 8 || ((uintptr_t)ir_ptr(t) & 15))
        return false;
    for (int d = 0; d < t->rank - 2; d++)
        if (t->shape[d] != 1 && t->strides[d] % 8) return false;
    return true;
}

typedef struct attn_strided { /* matches `struct strided` of the base kernel source */
    int64_t shape[16];
    int64_t strides[16];
    int rank;
} attn_strided;

/* t gathered into a contiguous pooled buffer (kernels/copy.cu's strided copy). */
static void *packed(const ir_tensor *t, int dev, const char *what)
{
    long long n = ir_numel(t);
    void *y = cuda_pool_alloc(dev, (size_t)n * 2);
    if (!y) return NULL;
    attn_strided s;
    memset(&s, 0, sizeof s);
    s.rank = t->rank;
    for (int d = 0; d < t->rank; d++) s.shape[d] = t->shape[d], s.strides[d] = t->strides[d];
    CUfunction f = cuda_kernel(dev, "em_strided_2", what);
    void *x = ir_ptr(t);
    void *params[] = {&x, &y, &n, &s};
    if (!f || cuda_launch(dev, f, n, params, what) != EM_OK) {
        cuda_pool_free(dev, y);
        return NULL;
    }
    return y;
}

static em_status launch_flash(const ir_op *op, const attn_geo *g, const attn_flash_arg *ap,
                              void *const ptr[3], int dev, const char *what)
{
    attn_flash_arg a = *ap;
    a.L = g->L, a.S = g->S, a.nbatch = g->nbatch;
    a.scale_log2 = (float)(g->scale * 1.4426950408889634);
    a.inv_scale = (float)(1.0 / g->scale);
    a.nb = g->nb, a.causal = g->causal, a.mkind = g->mkind;
    memcpy(a.mb, g->mb, sizeof a.mb);
    a.ms[0] = g->ms[0], a.ms[1] = g->ms[1];
    /* kernels/attention_flash2.cu: 4 warps of 32 query rows */
    char name[40];
    snprintf(name, sizeof name, "em_attn_flash2_%s_d%d%s", dt_name(op->out[0]->dtype), (int)g->E,
             g->mkind == 1   ? "_mbool"
             : g->mkind == 2 ? "_madd"
                             : "");
    CUfunction f = cuda_kernel(dev, name, what);
    if (!f) return em_last_status();
    int64_t work = (g->L + 127) / 128 * g->nbatch;
    unsigned grid[3] = {(unsigned)(work > 0x7fffffff ? 0x7fffffff : work), 1, 1};
    unsigned block[3] = {128, 1, 1};
    /* the Q tile (128 rows) and two stages of a K and a V tile (64 rows), rows of E + 8 halves */
    unsigned smem = (unsigned)((128 + 4 * 64) * (g->E + 8) * 2);
    void *qp = ptr[0], *kp = ptr[1], *vp = ptr[2], *op_ = ir_ptr(op->out[0]);
    void *mp = g->mkind ? ir_ptr(op->in[3]) : NULL;
    void *lp = op->n_out > 1 ? ir_ptr(op->out[1]) : NULL;
    void *params[] = {&qp, &kp, &vp, &mp, &op_, &lp, &a};
    return cuda_launch_grid_smem(dev, f, grid, block, smem, params, what);
}

/* Inputs in another layout are first gathered into contiguous pooled buffers. */
static em_status run_flash(const ir_op *op, const attn_geo *g, int dev, const char *what)
{
    attn_flash_arg a;
    memset(&a, 0, sizeof a);
    memcpy(a.bshape, g->bshape, sizeof a.bshape);
    memcpy(a.qb, g->qb, sizeof a.qb);
    memcpy(a.kb, g->kb, sizeof a.kb);
    memcpy(a.vb, g->vb, sizeof a.vb);
    a.qs = g->qs[0], a.ks = g->ks[0], a.vs = g->vs[0];
    void *ptr[3], *tmp[3] = {NULL, NULL, NULL};
    int64_t *bst[3] = {a.qb, a.kb, a.vb}, *rst[3] = {&a.qs, &a.ks, &a.vs};
    em_status st = EM_OK;
    for (int i = 0; i < 3 && st == EM_OK; i++) {
        const ir_tensor *t = op->in[i];
        ptr[i] = ir_ptr(t);
        if (flash_layout(t)) continue;
        tmp[i] = ptr[i] = packed(t, dev, what);
        if (!tmp[i]) {
            st = em_last_status();
            break;
        }
        int64_t cs[EM_MAX_RANK], n = 1;
        for (int d = t->rank - 1; d >= 0; d--) cs[d] = n, n *= t->shape[d];
        batch_strides(t->shape, cs, t->rank, g->nb, bst[i]);
        *rst[i] = cs[t->rank - 2];
    }
    if (st == EM_OK) st = launch_flash(op, g, &a, ptr, dev, what);
    for (int i = 0; i < 3; i++) cuda_pool_free(dev, tmp[i]); /* stream order: read before reuse */
    return st;
}

/* A view over a pooled buffer of dt: shape [bshape..., rows, cols], contiguous. */
static ir_tensor buffer_view(void *buf, em_device dev, em_dtype dt, const attn_geo *g, int64_t rows,
                             int64_t cols)
{
    ir_tensor t;
    memset(&t, 0, sizeof t);
    t.data = buf;
    t.device = dev;
    t.dtype = dt;
    t.rank = g->nb + 2;
    for (int d = 0; d < g->nb; d++) t.shape[d] = g->bshape[d];
    t.shape[g->nb] = rows, t.shape[g->nb + 1] = cols;
    int64_t stride = 1;
    for (int d = t.rank - 1; d >= 0; d--) t.strides[d] = stride, stride *= t.shape[d];
    return t;
}

/* out = a . b as a MATMUL record over the output's batch dims (a, b broadcast). */
static em_status batched_mm(const ir_tensor *a, const ir_tensor *b, ir_tensor *c, const attn_geo *g,
                            int64_t M, int64_t K, int64_t N, int dev, const char *what)
{
    ir_op mm;
    memset(&mm, 0, sizeof mm);
    mm.kind = EM_OP_MATMUL;
    mm.n_in = 2, mm.n_out = 1;
    mm.in[0] = (ir_tensor *)a, mm.in[1] = (ir_tensor *)b, mm.out[0] = c;
    mm.p.matmul = (em_p_matmul){.M = M, .K = K, .N = N, .batch_rank = g->nb};
    for (int d = 0; d < g->nb; d++) mm.p.matmul.batch[d] = g->bshape[d];
    return cuda_matmul(&mm, dev, what);
}

/* *flag (a pooled int on the device) = whether v holds a NaN or an infinity: one small kernel,
 * no read back. */
static em_status v_nonfinite(const ir_tensor *v, int dev, const char *what, int **flag)
{
    *flag = cuda_pool_alloc(dev, sizeof(int));
    if (!*flag) return em_last_status();
    em_status st = cuda_memset32(dev, *flag, 0, 1, what);
    attn_strided s;
    memset(&s, 0, sizeof s);
    s.rank = v->rank;
    for (int d = 0; d < v->rank; d++) s.shape[d] = v->shape[d], s.strides[d] = v->strides[d];
    long long n = ir_numel(v);
    CUfunction f =
        st == EM_OK
            ? cuda_kernel(
                  dev, v->dtype == EM_F64 ? "em_attn_nonfinite_f64" : "em_attn_nonfinite_f32", what)
            : NULL;
    if (st == EM_OK && !f) st = em_last_status();
    void *vp = ir_ptr(v), *fp = *flag;
    void *params[] = {&vp, &n, &s, &fp};
    if (st == EM_OK) st = cuda_launch(dev, f, n, params, what);
    return st;
}

/* f32/f64 records whose scores fit in 1 GiB: scores = Q K^T by the matmul kernels into a pooled
 * buffer, scaled, masked and turned into probabilities in place (kernels/attention_rows.cu),
 * then out = P V by the matmul kernels; the CPU's GEMM path, step for step. A V holding a
 * non-finite value needs the general kernel instead, which skips zero probabilities as the CPU
 * does (here 0 * inf would be NaN): *flag (a pooled device int, set when this path ran) says so
 * on the device, and the caller runs the general kernel after this path with the flag, which
 * then overwrites the output only when it is set (no host sync). */
static em_status run_by_matmul(const ir_op *op, const attn_geo *g, int dev, const char *what,
                               int **flag)
{
    const ir_tensor *q = op->in[0], *k = op->in[1], *v = op->in[2];
    ir_tensor *o = op->out[0];
    const ir_tensor *m = op->n_in > 3 ? op->in[3] : NULL;
    em_dtype dt = o->dtype;
    size_t es = em_dtype_size(dt);
    *flag = NULL;
    if ((dt != EM_F32 && dt != EM_F64) || g->S == 0 ||
        (double)g->nbatch * (double)g->L * (double)g->S * (double)es > (double)(1u << 30))
        return EM_OK;
    em_status st = v_nonfinite(v, dev, what, flag);
    if (st != EM_OK) return st;
    void *buf = cuda_pool_alloc(dev, (size_t)(g->nbatch * g->L * g->S) * es);
    if (!buf) return em_last_status();
    ir_tensor sc = buffer_view(buf, o->device, dt, g, g->L, g->S);
    ir_tensor kt = *k; /* K^T: the last two dims swapped */
    kt.shape[k->rank - 2] = k->shape[k->rank - 1], kt.shape[k->rank - 1] = k->shape[k->rank - 2];
    kt.strides[k->rank - 2] = k->strides[k->rank - 1];
    kt.strides[k->rank - 1] = k->strides[k->rank - 2];
    st = batched_mm(q, &kt, &sc, g, g->L, g->E, g->S, dev, what);
    bool warp = g->S <= 2048; /* a warp per row of scores, else a block */
    CUfunction f = NULL;
    if (st == EM_OK) {
        f = cuda_kernel(dev,
                        warp ? (dt == EM_F64 ? "em_attn_rows_w_f64" : "em_attn_rows_w_f32")
                        : dt == EM_F64 ? "em_attn_rows_f64"
                                       : "em_attn_rows_f32",
                        what);
        if (!f) st = em_last_status();
    }
    if (st == EM_OK) {
        int64_t rows = g->nbatch * g->L, blocks = warp ? (rows + 7) / 8 : rows;
        unsigned grid[3] = {(unsigned)(blocks > (1 << 24) ? (1 << 24) : blocks), 1, 1};
        unsigned block[3] = {256, 1, 1};
        void *sp = buf, *mp = m ? ir_ptr(m) : NULL;
        void *params[] = {&sp, &mp, (void *)g};
        st = cuda_launch_grid(dev, f, grid, block, params, what);
    }
    if (st == EM_OK) st = batched_mm(&sc, v, o, g, g->L, g->S, g->Ev, dev, what);
    cuda_pool_free(dev, buf); /* stream order: the second product has read it */
    return st;
}

/* SDPA_BACKWARD (kernels/attention_bwd.cu): the dq kernel (which also writes D, and lse unless
 * the forward's is given, per query row into pooled f32 buffers), then the dk/dv kernel. q, k, v,
 * o and g in another layout than the kernels load are first gathered into contiguous pooled
 * buffers. */
static em_status run_flash_bwd(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *dq = op->out[0], *dk = op->out[1], *dv = op->out[2];
    const ir_tensor *m = ir_sdpa_bwd_mask(op), *lse_in = ir_sdpa_bwd_lse(op);
    attn_bwd_arg a;
    memset(&a, 0, sizeof a);
    a.nb = dq->rank - 2;
    a.nbatch = 1;
    for (int d = 0; d < a.nb; d++) a.bshape[d] = dq->shape[d], a.nbatch *= dq->shape[d];
    a.L = dq->shape[a.nb];
    a.S = dk->shape[a.nb];
    int64_t D = dq->shape[a.nb + 1];
    if (a.nbatch == 0) return EM_OK;
    double scale = op->p.sdpa.scale;
    a.scale = (float)scale;
    a.scale_log2 = (float)(scale * 1.4426950408889634);
    a.inv_scale = (float)(1.0 / scale);
    a.causal = op->p.sdpa.causal;
    a.mkind = m ? op->p.sdpa.mask_kind : 0;
    if (m) mask_strides(m, a.nb, a.mb, a.ms);
    int64_t *bst[5] = {a.qb, a.kb, a.vb, a.ob, a.gb}, *rst[5] = {&a.qs, &a.ks, &a.vs, &a.os, &a.gs};
    void *ptr[5], *tmp[5] = {NULL, NULL, NULL, NULL, NULL};
    em_status st = EM_OK;
    for (int i = 0; i < 5 && st == EM_OK; i++) {
        const ir_tensor *t = op->in[i];
        ptr[i] = ir_ptr(t);
        if (flash_layout(t)) {
            batch_strides(t->shape, t->strides, t->rank, a.nb, bst[i]);
            *rst[i] = t->strides[t->rank - 2];
            continue;
        }
        tmp[i] = ptr[i] = packed(t, dev, what);
        if (!tmp[i]) {
            st = em_last_status();
            break;
        }
        int64_t cs[EM_MAX_RANK], n = 1;
        for (int d = t->rank - 1; d >= 0; d--) cs[d] = n, n *= t->shape[d];
        batch_strides(t->shape, cs, t->rank, a.nb, bst[i]);
        *rst[i] = cs[t->rank - 2];
    }
    float *lse = NULL, *dd = NULL, *lse_buf = NULL;
    if (st == EM_OK) {
        if (!lse_in) lse_buf = cuda_pool_alloc(dev, (size_t)(a.nbatch * a.L) * sizeof(float));
        lse = lse_in ? (float *)ir_ptr(lse_in) : lse_buf;
        dd = lse ? cuda_pool_alloc(dev, (size_t)(a.nbatch * a.L) * sizeof(float)) : NULL;
        if (!dd) st = em_last_status();
    }
    const float *lse_given = lse_in ? lse : NULL;
    const char *dts = op->out[0]->dtype == EM_BF16 ? "bf16" : "f16";
    const char *mks = a.mkind == 1 ? "_mbool" : a.mkind == 2 ? "_madd" : "";
    /* six tiles of 64 rows of D + 8 halves (Q, dO and two stages of K and V, or K, V and two
     * stages of Q and dO); the dk/dv kernel adds two stages of 64 lse and 64 D values */
    unsigned smem = (unsigned)(6 * 64 * (D + 8) * 2);
    unsigned block[3] = {128, 1, 1};
    void *mp = m ? ir_ptr(m) : NULL;
    void *dqp = ir_ptr(dq), *dkp = ir_ptr(dk), *dvp = ir_ptr(dv);
    /* with the forward's lse: the dq2 kernel (32 query rows per warp, key tiles of 32); without
       it the dq kernel, whose first pass computes the lse */
    bool dq2 = lse_given != NULL;
    if (st == EM_OK && dq2) {
        char name[48];
        snprintf(name, sizeof name, "em_attn_bwd_dq2_%s_d%d%s", dts, (int)D, mks);
        CUfunction f = cuda_kernel(dev, name, what);
        int64_t work = (a.L + 127) / 128 * a.nbatch;
        unsigned grid[3] = {(unsigned)(work > 0x7fffffff ? 0x7fffffff : work), 1, 1};
        /* Q and dO tiles of 128 rows, two stages of a K and a V tile of 32 rows */
        unsigned smem2 = (unsigned)((2 * 128 + 4 * 32) * (D + 8) * 2);
        void *params[] = {&ptr[0], &ptr[1], &ptr[2], &ptr[3],    &ptr[4],
                          &mp,     &dqp,    &dd,     &lse_given, &a};
        st = f ? cuda_launch_grid_smem(dev, f, grid, block, smem2, params, what) : em_last_status();
    } else if (st == EM_OK) {
        char name[48];
        snprintf(name, sizeof name, "em_attn_bwd_dq_%s_d%d%s", dts, (int)D, mks);
        CUfunction f = cuda_kernel(dev, name, what);
        int64_t work = (a.L + 63) / 64 * a.nbatch;
        unsigned grid[3] = {(unsigned)(work > 0x7fffffff ? 0x7fffffff : work), 1, 1};
        void *params[] = {&ptr[0], &ptr[1], &ptr[2], &ptr[3],    &ptr[4], &mp,
                          &dqp,    &lse,    &dd,     &lse_given, &a};
        st = f ? cuda_launch_grid_smem(dev, f, grid, block, smem, params, what) : em_last_status();
    }
    if (st == EM_OK) {
        /* 8 warps per 128 keys with P and dS through shared memory */
        char name[48];
        snprintf(name, sizeof name, "em_attn_bwd_dkdv2_%s_d%d%s", dts, (int)D, mks);
        CUfunction f = cuda_kernel(dev, name, what);
        int64_t work = (a.S + 127) / 128 * a.nbatch;
        unsigned grid[3] = {(unsigned)(work > 0x7fffffff ? 0x7fffffff : work), 1, 1};
        unsigned blk[3] = {256u, 1, 1};
        /* K and V tiles of 128 rows, two stages of Q and dO (64 rows), P^T and dS^T [128][72],
           two stages of 64 lse and 64 D */
        unsigned sm = (unsigned)((2 * 128 + 4 * 64) * (D + 8) * 2 + 2 * 128 * 72 * 2);
        void *params[] = {&ptr[0], &ptr[1], &ptr[2], &ptr[4], &mp, &lse, &dd, &dkp, &dvp, &a};
        st = f ? cuda_launch_grid_smem(dev, f, grid, blk, sm + 4 * 64 * 4, params, what)
               : em_last_status();
    }
    cuda_pool_free(dev, lse_buf); /* stream order: both kernels have read them */
    cuda_pool_free(dev, dd);
    for (int i = 0; i < 5; i++) cuda_pool_free(dev, tmp[i]);
    return st;
}

/* The general kernel over the record; with flag (a device int) only where *flag != 0. */
static em_status run_general(const ir_op *op, const attn_geo *gp, const int *flag, int dev,
                             const char *what)
{
    const ir_tensor *q = op->in[0], *k = op->in[1], *v = op->in[2], *o = op->out[0];
    const ir_tensor *m = op->n_in > 3 ? op->in[3] : NULL;
    attn_geo g = *gp;
    char name[40];
    snprintf(name, sizeof name, "em_attn_general_%s", dt_name(o->dtype));
    CUfunction f = cuda_kernel(dev, name, what);
    if (!f) return em_last_status();
    /* q row and scores cached in dynamic shared memory (doubles) when they fit in 40 KiB */
    int cache_q = g.E <= 1024;
    int64_t qbytes = cache_q ? g.E * 8 : 0;
    int cache_s = g.S * 8 + qbytes <= 40 * 1024;
    unsigned smem = (unsigned)(qbytes + (cache_s ? g.S * 8 : 0));
    int64_t rows = g.nbatch * g.L;
    unsigned grid[3] = {(unsigned)(rows > (1 << 24) ? (1 << 24) : rows), 1, 1};
    unsigned block[3] = {128, 1, 1};
    void *qp = ir_ptr(q), *kp = ir_ptr(k), *vp = ir_ptr(v), *op_ = ir_ptr(o);
    void *mp = m ? ir_ptr(m) : NULL;
    const void *fp = flag;
    void *params[] = {&qp, &kp, &vp, &mp, &op_, &g, &cache_q, &cache_s, &fp};
    return cuda_launch_grid_smem(dev, f, grid, block, smem, params, what);
}

em_status cuda_attn_exec(const ir_op *op, int dev, const char *what)
{
    if (op->kind == EM_OP_SDPA_BACKWARD) return run_flash_bwd(op, dev, what);
    const ir_tensor *q = op->in[0], *k = op->in[1], *v = op->in[2], *o = op->out[0];
    const ir_tensor *m = op->n_in > 3 ? op->in[3] : NULL;
    attn_geo g;
    memset(&g, 0, sizeof g);
    g.nb = o->rank - 2;
    g.nbatch = 1;
    for (int d = 0; d < g.nb; d++) g.bshape[d] = o->shape[d], g.nbatch *= o->shape[d];
    g.L = o->shape[g.nb];
    g.Ev = o->shape[g.nb + 1];
    g.S = k->shape[k->rank - 2];
    g.E = q->shape[q->rank - 1];
    if (g.nbatch == 0 || g.L == 0 || g.Ev == 0) return EM_OK;
    batch_strides(q->shape, q->strides, q->rank, g.nb, g.qb);
    batch_strides(k->shape, k->strides, k->rank, g.nb, g.kb);
    batch_strides(v->shape, v->strides, v->rank, g.nb, g.vb);
    g.qs[0] = q->strides[q->rank - 2], g.qs[1] = q->strides[q->rank - 1];
    g.ks[0] = k->strides[k->rank - 2], g.ks[1] = k->strides[k->rank - 1];
    g.vs[0] = v->strides[v->rank - 2], g.vs[1] = v->strides[v->rank - 1];
    g.scale = op->p.sdpa.scale;
    g.causal = op->p.sdpa.causal;
    g.mkind = m ? op->p.sdpa.mask_kind : 0;
    if (m) mask_strides(m, g.nb, g.mb, g.ms);
    if (flash_case(op, g.E, g.Ev, g.S)) return run_flash(op, &g, dev, what);
    int *flag = NULL;
    em_status st = run_by_matmul(op, &g, dev, what, &flag);
    if (st == EM_OK) st = run_general(op, &g, flag, dev, what);
    cuda_pool_free(dev, flag); /* stream order: the general kernel has read it */
    return st;
}
