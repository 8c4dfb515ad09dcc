/* CPU kernel for MATMUL: a batched product over broadcast batch dims. f32/f64 call the GEMM
 * per batch, directly on the operands when each matrix has a unit stride along one dim; other
 * f32/f64 operands and f16/bf16 ones (f32 accumulation, one rounding at the end) are packed by
 * the GEMM straight from the tensor through a callback that converts as it packs (pack_src),
 * or, for products the GEMM does not pack (small or vector-shaped), copied first; integers
 * accumulate in i64 (wrapping) and store in their own dtype.
 * MATMUL_BIAS_ACT runs the same product with an epilogue inside the GEMM (cpu_gemm_epi): each
 * block of C, as soon as its last K step is done and while it is in cache, gets the bias added,
 * the pre-activation stored when asked for, the activation applied (the unary kernels' own code,
 * cpu_act_f32/f64) and, for f16/bf16, its one rounding to the output dtype; a plain f16/bf16
 * MATMUL runs the same epilogue for the rounding alone. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_impl.h"
#include "cpu.h"
#include "cpu_gemm.h"

/* Below this M*N*K a batch runs on one thread and batches are spread over the pool. */
#define BATCH_PAR_MNK 65536

typedef struct mm_plan {
    const ir_tensor *a, *b, *out;
    em_dtype dt;
    int64_t M, K, N;
    int R;
    int64_t batch[EM_MAX_RANK];
    int64_t sa[EM_MAX_RANK], sb[EM_MAX_RANK]; /* batch strides (elements), 0 when broadcast */
    int64_t ars, acs, brs, bcs;               /* a: [M, K] strides, b: [K, N] strides */
    /* how f32/f64 operands reach the GEMM: directly (ta/lda) or through a copy */
    bool a_direct, b_direct, ta, tb;
    int64_t lda, ldb;
    atomic_int oom;
    /* MATMUL_BIAS_ACT: epi set; bias as N values of the work type (NULL: none), the activation
       as a unary kind (EM_OP_COUNT: none), pre the pre-activation output or NULL */
    bool epi;
    const void *bias;
    em_op_kind act;
    const ir_tensor *pre;
} mm_plan;

/* One batch's epilogue: C (work type) rows of N values; the results go to out and pre (their
 * dtype) at the same element offsets. */
typedef struct epi_ctx {
    const mm_plan *p;
    char *out, *pre; /* this batch's first element */
} epi_ctx;

#define EPI_CHUNK 256

/* q[k] = v[k] rounded to dt (f32, f16 or bf16) for k < m. */
static void store_as(char *q, em_dtype dt, const float *v, int64_t m)
{
    if (dt == EM_BF16)
        for (int64_t k = 0; k < m; k++) ((uint16_t *)q)[k] = core_f32_to_bf16(v[k]);
    else if (dt == EM_F16)
        for (int64_t k = 0; k < m; k++) ((uint16_t *)q)[k] = core_f32_to_f16(v[k]);
    else
        memcpy(q, v, (size_t)m * sizeof(float));
}

/* float work type (f32, f16, bf16 outputs). */
static void epi_f32(const void *vctx, void *vC, int64_t ldc, int64_t i0, int64_t j0, int64_t rows,
                    int64_t cols)
{
    const epi_ctx *e = vctx;
    const mm_plan *p = e->p;
    em_dtype dt = p->dt;
    size_t es = em_dtype_size(dt);
    const float *bias = p->bias;
    float v[EPI_CHUNK], y[EPI_CHUNK];
    /* a plain f16/bf16 matmul (an f32 one's C is its output: nothing to do) */
    bool round_only = dt != EM_F32 && !bias && !e->pre && p->act == EM_OP_COUNT;
    for (int64_t r = 0; r < rows; r++) {
        float *c = (float *)vC + r * ldc;
        int64_t off = (i0 + r) * p->N + j0; /* element offset in the batch's output */
        if (round_only) {
            store_as(e->out + off * (int64_t)es, dt, c, cols);
            continue;
        }
        for (int64_t j = 0; j < cols; j += EPI_CHUNK) {
            int64_t m = cols - j < EPI_CHUNK ? cols - j : EPI_CHUNK;
            for (int64_t k = 0; k < m; k++) v[k] = bias ? c[j + k] + bias[j0 + j + k] : c[j + k];
            if (e->pre) store_as(e->pre + (off + j) * (int64_t)es, dt, v, m);
            bool in_place = dt == EM_F32; /* C is the output itself */
            float *dst = in_place ? c + j : y;
            if (p->act != EM_OP_COUNT)
                cpu_act_f32(p->act, v, dst, m);
            else
                for (int64_t k = 0; k < m; k++) dst[k] = v[k];
            if (!in_place) store_as(e->out + (off + j) * (int64_t)es, dt, y, m);
        }
    }
}

/* f64 outputs (C is the output). */
static void epi_f64(const void *vctx, void *vC, int64_t ldc, int64_t i0, int64_t j0, int64_t rows,
                    int64_t cols)
{
    const epi_ctx *e = vctx;
    const mm_plan *p = e->p;
    const double *bias = p->bias;
    double v[EPI_CHUNK];
    for (int64_t r = 0; r < rows; r++) {
        double *c = (double *)vC + r * ldc;
        int64_t off = (i0 + r) * p->N + j0;
        for (int64_t j = 0; j < cols; j += EPI_CHUNK) {
            int64_t m = cols - j < EPI_CHUNK ? cols - j : EPI_CHUNK;
            for (int64_t k = 0; k < m; k++) v[k] = bias ? c[j + k] + bias[j0 + j + k] : c[j + k];
            if (e->pre) memcpy((double *)e->pre + off + j, v, (size_t)m * sizeof(double));
            if (p->act != EM_OP_COUNT)
                cpu_act_f64(p->act, v, c + j, m);
            else
                memcpy(c + j, v, (size_t)m * sizeof(double));
        }
    }
}

/* Can a rows x cols matrix with strides (rs, cs) go to the GEMM as is? */
static bool direct_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool *trans,
                          int64_t *ld)
{
    if (cs == 1 || cols == 1) {
        *trans = false;
        *ld = rs;
        return true;
    }
    if (rs == 1 || rows == 1) {
        *trans = true;
        *ld = cs;
        return true;
    }
    return false;
}

/* Element offsets of batch t in a and b (from their first elements). */
static void batch_offsets(const mm_plan *p, int64_t t, int64_t *oa, int64_t *ob)
{
    int64_t a = 0, b = 0;
    for (int d = p->R - 1; d >= 0; d--) {
        int64_t i = t % p->batch[d];
        t /= p->batch[d];
        a += i * p->sa[d];
        b += i * p->sb[d];
    }
    *oa = a;
    *ob = b;
}

/* Copies the rows x cols matrix at element offset off of t (strides rs, cs) into a contiguous
 * buffer of type `to` (EM_F32, EM_F64 or EM_I64). */
static void load_matrix(void *dst, em_dtype to, const ir_tensor *t, int64_t off, int64_t rows,
                        int64_t cols, int64_t rs, int64_t cs)
{
    if (rows <= 0 || cols <= 0) return; /* (an empty tensor may have no memory at all) */
    size_t es = em_dtype_size(t->dtype);
    const char *base = ir_ptr(t);
    if (t->dtype == to && (to == EM_F32 || to == EM_F64)) { /* plain copies, rows at a time */
        for (int64_t i = 0; i < rows; i++) {
            const char *src = base + (off + i * rs) * (int64_t)es;
            char *d = (char *)dst + i * cols * (int64_t)es;
            if (cs == 1)
                memcpy(d, src, (size_t)cols * es);
            else if (i > 0 && rs == 0) /* a broadcast row: the one before */
                memcpy(d, d - cols * (int64_t)es, (size_t)cols * es);
            else if (to == EM_F32)
                for (int64_t j = 0; j < cols; j++) ((float *)d)[j] = ((const float *)src)[j * cs];
            else
                for (int64_t j = 0; j < cols; j++) ((double *)d)[j] = ((const double *)src)[j * cs];
        }
        return;
    }
    for (int64_t i = 0; i < rows; i++) {
        for (int64_t j = 0; j < cols; j++) {
            const char *src = base + (off + i * rs + j * cs) * (int64_t)es;
            int64_t k = i * cols + j;
            if (to == EM_F32)
                ((float *)dst)[k] = (float)ir_get_f64(src, t->dtype);
            else if (to == EM_F64)
                ((double *)dst)[k] = ir_get_f64(src, t->dtype);
            else
                ((int64_t *)dst)[k] = ir_get_i64(src, t->dtype);
        }
    }
}

/* An operand the GEMM packs straight from the tensor (cpu_gemm_src), converting as it packs:
 * X[r, k] (op(A), or op(B)^T) at element off + r * rs + k * cs of data, in dtype dt (f32, f16
 * or bf16 into float panels; f64 into double ones); any strides, negative ones too. */
typedef struct mat_src {
    const char *data;
    em_dtype dt;
    int64_t off, rs, cs;
} mat_src;

/* dst[k * w + c] = X[i0 + c, k0 + k] for c < n, zeros for n <= c < w: along k when k is the
 * contiguous (or not the other's unit) stride, else along the rows. */
#define PACK_SRC(name, S, D, CVT)                                                                  \
    static void name(const mat_src *m, int64_t k0, int64_t kc, int64_t i0, int n, int w, D *dst)   \
    {                                                                                              \
        const S *x = (const S *)m->data + m->off + i0 * m->rs + k0 * m->cs;                        \
        int64_t rs = m->rs, cs = m->cs;                                                            \
        if (cs == 1 || rs != 1) {                                                                  \
            for (int c = 0; c < n; c++, x += rs)                                                   \
                for (int64_t k = 0; k < kc; k++) dst[k * w + c] = CVT(x[k * cs]);                  \
        } else {                                                                                   \
            for (int64_t k = 0; k < kc; k++)                                                       \
                for (int c = 0; c < n; c++) dst[k * w + c] = CVT(x[k * cs + c]);                   \
        }                                                                                          \
        for (int64_t k = 0; k < kc; k++)                                                           \
            for (int c = n; c < w; c++) dst[k * w + c] = 0;                                        \
    }
#define SAME(v) (v)
PACK_SRC(pack_f32, float, float, SAME)
PACK_SRC(pack_f16, uint16_t, float, core_f16_to_f32)
PACK_SRC(pack_bf16, uint16_t, float, core_bf16_to_f32)
PACK_SRC(pack_f64, double, double, SAME)
#undef SAME

static void pack_src(const void *ctx, int64_t k0, int64_t kc, int64_t i0, int n, int w, void *dst)
{
    const mat_src *m = ctx;
    switch (m->dt) {
    case EM_F16: pack_f16(m, k0, kc, i0, n, w, dst); break;
    case EM_BF16: pack_bf16(m, k0, kc, i0, n, w, dst); break;
    case EM_F64: pack_f64(m, k0, kc, i0, n, w, dst); break;
    default: pack_f32(m, k0, kc, i0, n, w, dst); break;
    }
}

/* c[M, N] = a[M, K] . b[K, N] over contiguous i64 buffers, wrapping on overflow. */
static void igemm(const int64_t *a, const int64_t *b, uint64_t *c, int64_t M, int64_t K, int64_t N)
{
    for (int64_t i = 0; i < M; i++) {
        uint64_t *cr = c + i * N;
        for (int64_t j = 0; j < N; j++) cr[j] = 0;
        for (int64_t k = 0; k < K; k++) {
            uint64_t x = (uint64_t)a[i * K + k];
            const int64_t *br = b + k * N;
            for (int64_t j = 0; j < N; j++) cr[j] += x * (uint64_t)br[j];
        }
    }
}

/* Batches [b0, b1): out[t] = a[t] . b[t]. */
static void run_batches(void *ctx, int64_t b0, int64_t b1)
{
    mm_plan *p = ctx;
    int64_t M = p->M, K = p->K, N = p->N;
    em_dtype dt = p->dt;
    bool native = dt == EM_F32 || dt == EM_F64;
    em_dtype work = dt == EM_F64 ? EM_F64 : em_dtype_is_float(dt) ? EM_F32 : EM_I64;
    size_t ws = em_dtype_size(work);
    /* scratch for copied operands and, when the dtype is not native, the result; float
     * operands the GEMM would pack anyway are packed from the tensor instead (pack_src), which
     * gives the bits of the copies */
    bool copy_a = !native || !p->a_direct, copy_b = !native || !p->b_direct;
    bool from_a = false, from_b = false;
    if (work != EM_I64 && cpu_gemm_packed(M, N, K)) {
        from_a = copy_a, from_b = copy_b;
        copy_a = copy_b = false;
    }
    size_t na = copy_a ? (size_t)(M * K) : 0, nb = copy_b ? (size_t)(K * N) : 0;
    size_t nc = native ? 0 : (size_t)(M * N);
    char *scratch = NULL;
    if (na + nb + nc) {
        scratch = malloc((na + nb + nc) * ws);
        if (!scratch) {
            atomic_store(&p->oom, 1);
            return;
        }
    }
    void *ta_buf = scratch, *tb_buf = scratch ? scratch + na * ws : NULL;
    void *tc_buf = scratch ? scratch + (na + nb) * ws : NULL;
    size_t es = em_dtype_size(dt);
    const char *adata = ir_ptr(p->a);
    const char *bdata = ir_ptr(p->b);
    char *cbase = ir_ptr(p->out);
    for (int64_t t = b0; t < b1; t++) {
        int64_t oa, ob;
        batch_offsets(p, t, &oa, &ob);
        char *c = cbase + t * M * N * (int64_t)es;
        const void *A = adata + oa * (int64_t)es, *B = bdata + ob * (int64_t)es;
        bool ta = p->ta, tb = p->tb;
        int64_t lda = p->lda, ldb = p->ldb;
        if (copy_a) {
            load_matrix(ta_buf, work, p->a, oa, M, K, p->ars, p->acs);
            A = ta_buf, ta = false, lda = K;
        }
        if (copy_b) {
            load_matrix(tb_buf, work, p->b, ob, K, N, p->brs, p->bcs);
            B = tb_buf, tb = false, ldb = N;
        }
        epi_ctx ec = {.p = p, .out = c};
        if (p->pre) ec.pre = ir_ptr(p->pre) + t * M * N * (int64_t)es;
        cpu_gemm_epi epi = {work == EM_F64 ? epi_f64 : epi_f32, &ec};
        /* f16 / bf16 results are rounded into the output by the epilogue, block by block as
         * the GEMM finishes them (on the pool's threads, while in cache) */
        const cpu_gemm_epi *ep = p->epi || !native ? &epi : NULL;
        /* op(A) [M, K] and op(B)^T [N, K] as the GEMM's callbacks read them */
        mat_src ma = {adata, dt, oa, p->ars, p->acs}, mb = {bdata, dt, ob, p->bcs, p->brs};
        cpu_gemm_src sa = {pack_src, &ma}, sb = {pack_src, &mb};
        const cpu_gemm_src *asrc = from_a ? &sa : NULL, *bsrc = from_b ? &sb : NULL;
        if (work == EM_F64 && (asrc || bsrc)) {
            if (!cpu_dgemm_src(ta, tb, M, N, K, 1.0, A, lda, asrc, B, ldb, bsrc, 0.0, (double *)c,
                               N, ep)) {
                atomic_store(&p->oom, 1);
                break;
            }
        } else if (work == EM_F64) {
            cpu_dgemm_epi(ta, tb, M, N, K, 1.0, A, lda, B, ldb, 0.0, (double *)c, N, ep);
        } else if (work == EM_F32) {
            float *C = native ? (float *)c : tc_buf;
            if (asrc || bsrc) {
                if (!cpu_sgemm_src(ta, tb, M, N, K, 1.0f, A, lda, asrc, B, ldb, bsrc, 0.0f, C, N,
                                   ep)) {
                    atomic_store(&p->oom, 1);
                    break;
                }
            } else {
                cpu_sgemm_epi(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N, ep);
            }
        } else {
            igemm(A, B, tc_buf, M, K, N);
            const uint64_t *C = tc_buf;
            for (int64_t i = 0; i < M * N; i++) ir_set_i64(c + i * (int64_t)es, dt, (int64_t)C[i]);
        }
    }
    free(scratch);
}

/* The unary kind of an em_act code (EM_OP_COUNT for none). */
static em_op_kind act_kind(int64_t act)
{
    switch (act) {
    case EM_ACT_RELU: return EM_OP_RELU;
    case EM_ACT_GELU: return EM_OP_GELU;
    case EM_ACT_GELU_TANH: return EM_OP_GELU_TANH;
    case EM_ACT_SILU: return EM_OP_SILU;
    default: return EM_OP_COUNT;
    }
}

/* a: [..., M, K] (or [K]), b: [..., K, N] (or [K]) -> out: [batch..., M, N] contiguous;
 * MATMUL_BIAS_ACT: bias [N] -> out = act(a . b + bias), pre (out[1], optional) = a . b + bias. */
static em_status matmul(const ir_op *op)
{
    mm_plan p = {.a = op->in[0], .b = op->in[1], .out = op->out[0], .act = EM_OP_COUNT};
    const ir_tensor *a = p.a, *b = p.b;
    const em_p_matmul *mp = &op->p.matmul;
    bool a1 = mp->a_vec, b1 = mp->b_vec;
    p.dt = a->dtype;
    p.M = mp->M, p.K = mp->K, p.N = mp->N;
    p.R = mp->batch_rank;
    int64_t nbatch = 1;
    for (int d = 0; d < p.R; d++) nbatch *= (p.batch[d] = mp->batch[d]);
    if (nbatch == 0 || p.M == 0 || p.N == 0) return EM_OK;
    /* batch strides, right-aligned; broadcast dims step 0 */
    int ra = a->rank > 2 ? a->rank - 2 : 0, rb = b->rank > 2 ? b->rank - 2 : 0;
    for (int d = 0; d < p.R; d++) {
        int da = d - (p.R - ra), db = d - (p.R - rb);
        p.sa[d] = da >= 0 && a->shape[da] != 1 ? a->strides[da] : 0;
        p.sb[d] = db >= 0 && b->shape[db] != 1 ? b->strides[db] : 0;
    }
    p.ars = a1 ? 0 : a->strides[a->rank - 2];
    p.acs = a->strides[a->rank - 1];
    p.brs = b1 ? b->strides[0] : b->strides[b->rank - 2];
    p.bcs = b1 ? 0 : b->strides[b->rank - 1];
    p.a_direct = direct_layout(p.M, p.K, p.ars, p.acs, &p.ta, &p.lda);
    p.b_direct = direct_layout(p.K, p.N, p.brs, p.bcs, &p.tb, &p.ldb);
    atomic_init(&p.oom, 0);
    void *bias = NULL;
    if (op->kind == EM_OP_MATMUL_BIAS_ACT) {
        p.epi = true;
        p.act = act_kind(mp->act);
        p.pre = op->n_out > 1 ? op->out[1] : NULL;
        if (op->n_in > 2) { /* the bias in the work type, contiguous */
            const ir_tensor *bt = op->in[2];
            bool f64 = p.dt == EM_F64;
            bias = malloc((size_t)p.N * (f64 ? sizeof(double) : sizeof(float)));
            if (!bias)
                return em_error(EM_ERR_OOM, "em_matmul_bias_act: out of memory for the bias");
            size_t bes = em_dtype_size(bt->dtype);
            for (int64_t j = 0; j < p.N; j++) {
                double v = ir_get_f64(ir_ptr(bt) + j * bt->strides[0] * (int64_t)bes, bt->dtype);
                if (f64)
                    ((double *)bias)[j] = v;
                else
                    ((float *)bias)[j] = (float)v;
            }
            p.bias = bias;
        }
    }
    int64_t mnk = p.M * p.N * (p.K > 0 ? p.K : 1);
    if (nbatch > 1 && mnk < BATCH_PAR_MNK && em_get_num_threads() > 1)
        em_parallel_for(nbatch, 1 + BATCH_PAR_MNK / mnk, run_batches, &p);
    else
        run_batches(&p, 0, nbatch);
    free(bias);
    if (atomic_load(&p.oom))
        return em_error(EM_ERR_OOM,
                        "em_matmul: out of memory for the copies or packing buffers of a "
                        "[%lld, %lld] by [%lld, %lld] product",
                        (long long)p.M, (long long)p.K, (long long)p.K, (long long)p.N);
    return EM_OK;
}

em_status cpu_exec_linalg(const ir_op *op)
{
    switch (op->kind) {
    case EM_OP_MATMUL:
    case EM_OP_MATMUL_BIAS_ACT: return matmul(op);
    default:
        return em_error(EM_ERR_UNSUPPORTED, "cpu: op %s is not a linalg op", em_op_name(op->kind));
    }
}
