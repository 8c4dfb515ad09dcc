/* The CUDA backend's table: memory and copies through the pool and the driver, supports() and
 * exec(). Each op family has its own file (cuda_elementwise.c, cuda_reduce.c, cuda_index.c,
 * cuda_nn.c, cuda_attention.c, cuda_optim.c); this one keeps FILL, COPY, MASKED_FILL, the float
 * MATMUL kernels (tensor cores, split-K), conv, im2col/col2im, max_pool and layer_norm rows. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cpu/cpu.h"
#include "cuda.h"
#include "cuda_attention.h"
#include "cuda_index.h"
#include "cuda_nn.h"
#include "cuda_elementwise.h"
#include "cuda_ops.h"
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

/* Registers per thread of the row kernels for rows of len elements: 1, 2, 4 ... 32. */
static int row_vpt(int64_t len)
{
    int v = 1;
    while (v < 32 && 256 * (int64_t)v < len) v *= 2;
    return v;
}

/* LAYER_NORM on contiguous f32/f64 rows of at most ROW_MAX elements (else the CPU fallback). */
static bool layer_norm_ok(const em_op *op)
{
    const em_tensor *x = op->in[0];
    if (!is_f(x->dtype) || op->out[0]->dtype != x->dtype || !tn_is_contiguous(x)) return false;
    int64_t len = 1;
    for (int d = x->rank - (int)op->i[0]; d < x->rank; d++) len *= x->shape[d];
    for (int i = 1; i < op->n_in; i++)
        if (op->in[i]->dtype != x->dtype || !tn_is_contiguous(op->in[i])) return false;
    return len <= ROW_MAX;
}

/* CONV / CONV_TRANSPOSE of one float dtype (f16/bf16 run in f32), any input layout (packed
 * first), any groups, 1 to 3 spatial dims. */
static bool conv_ok(const em_op *op)
{
    em_dtype dt = op->out[0]->dtype;
    if (!(is_f(dt) || dt == EM_F16 || dt == EM_BF16) || !tn_is_contiguous(op->out[0])) return false;
    for (int i = 0; i < op->n_in; i++)
        if (op->in[i]->dtype != dt) return false;
    return op->i[0] >= 1 && op->i[0] <= 3;
}

static bool be_supports(const em_op *op)
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
        for (int i = 0; i < op->n_out; i++) ok = ok && tn_is_contiguous(op->out[i]);
        return ok;
    }
    if (k == EM_OP_CONV || k == EM_OP_CONV_TRANSPOSE) return conv_ok(op);
    if (k == EM_OP_IM2COL || k == EM_OP_COL2IM) /* any strides: run_fold copies first */
        return em_dtype_is_float(o) && op->in[0]->dtype == o;
    if (k == EM_OP_MAX_POOL || k == EM_OP_MAX_POOL_VALUES) {
        const em_tensor *x = op->in[0];
        int nd = (int)op->i[0];
        int64_t plane = 1;
        for (int d = x->rank - nd; d < x->rank && d >= 0; d++) plane *= x->shape[d];
        return (is_f(x->dtype) || x->dtype == EM_F16 || x->dtype == EM_BF16) &&
               op->out[0]->dtype == x->dtype && tn_is_contiguous(op->out[0]) && nd >= 1 &&
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

static em_status run_fill(const em_op *op, int dev, const char *what)
{
    const em_tensor *o = op->out[0];
    if (!tn_is_contiguous(o))
        return em_error(EM_ERR_UNSUPPORTED, "%s: the cuda backend fills only contiguous outputs",
                        what);
    size_t es = em_dtype_size(o->dtype);
    unsigned char pat[8] = {0};
    double v = op->f[0];
    if (!em_dtype_is_float(o->dtype) && o->dtype != EM_BOOL)
        cpu_set_i64(pat, o->dtype,
                    isnan(v)       ? 0
                    : v >= 9.2e18  ? INT64_MAX
                    : v <= -9.2e18 ? INT64_MIN
                                   : (int64_t)v);
    else
        cpu_set_f64(pat, o->dtype, v);
    unsigned long long pattern = 0;
    memcpy(&pattern, pat, es); /* little-endian: the kernel's narrowing cast keeps these bytes */
    char name[32];
    snprintf(name, sizeof name, "em_fill_%s", size_suffix(es));
    CUfunction f = cuda_kernel(dev, name, what);
    if (!f) return em_last_status();
    void *out = tn_ptr(o);
    long long n = tn_numel(o);
    void *params[] = {&out, &n, &pattern};
    return cuda_launch(dev, f, n, params, what);
}

static em_status run_copy(const em_op *op, int dev, const char *what)
{
    const em_tensor *in = op->in[0], *o = op->out[0];
    size_t es = em_dtype_size(in->dtype);
    long long n = tn_numel(o);
    if (n == 0) return EM_OK;
    if (tn_is_contiguous(in))
        return cuda_copy_d2d(dev, tn_ptr(o), tn_ptr(in), (size_t)n * es, what);
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
    void *x = tn_ptr(in), *y = tn_ptr(o);
    void *params[] = {&x, &y, &n, &s};
    return cuda_launch(dev, f, n, params, what);
}

static const char *short_name(em_dtype dt)
{
    return dt == EM_F32 ? "f32" : dt == EM_F64 ? "f64" : "i64";
}

typedef struct bidx_arg { /* matches `struct bidx` in the kernel source */
    int64_t shape[8];
    int64_t st[4][8];
    int rank;
} bidx_arg;

/* Element strides of the inputs broadcast to the output's shape (slot 3: the output). */
static void fill_bidx(const em_op *op, bidx_arg *b)
{
    const em_tensor *o = op->out[0];
    memset(b, 0, sizeof *b);
    b->rank = o->rank;
    for (int d = 0; d < o->rank; d++) {
        b->shape[d] = o->shape[d];
        b->st[3][d] = o->strides[d];
        for (int k = 0; k < op->n_in && k < 3; k++) {
            const em_tensor *t = op->in[k];
            int td = d - (o->rank - t->rank);
            b->st[k][d] = td < 0 || t->shape[td] == 1 ? 0 : t->strides[td];
        }
    }
}

/* MASKED_FILL of every dtype (x, mask broadcast; the fill value converted as the CPU does):
 * a byte-moving kernel by element size. */
static em_status run_masked_fill(const em_op *op, int dev, const char *what)
{
    const em_tensor *o = op->out[0];
    bidx_arg b;
    fill_bidx(op, &b);
    long long n = tn_numel(o);
    void *y = tn_ptr(o), *x0 = tn_ptr(op->in[0]), *x1 = tn_ptr(op->in[1]);
    char name[40];
    snprintf(name, sizeof name, "em_mfill_s%s", size_suffix(em_dtype_size(o->dtype)));
    CUfunction f = cuda_kernel(dev, name, what);
    if (!f) return em_last_status();
    unsigned char pat[8] = {0};
    cpu_set_f64(pat, o->dtype, op->f[0]);
    unsigned long long pattern = 0;
    memcpy(&pattern, pat, em_dtype_size(o->dtype));
    void *params[] = {&x0, &x1, &y, &n, &pattern, &b};
    return cuda_launch(dev, f, n, params, what);
}

typedef cuda_mm_geom mm_arg;

void cuda_mm_geometry(const em_op *op, cuda_mm_geom *s)
{
    const em_tensor *a = op->in[0], *b = op->in[1];
    memset(s, 0, sizeof *s);
    bool a1 = op->i[0] != 0, b1 = op->i[1] != 0;
    s->M = op->i[2], s->K = op->i[3], s->N = op->i[4], s->R = (int)op->i[5];
    s->nbatch = 1;
    for (int d = 0; d < s->R; d++) {
        s->bshape[d] = op->i[6 + d];
        s->nbatch *= s->bshape[d];
        int ad = d - (s->R - (a->rank - 2)), bd = d - (s->R - (b->rank - 2));
        s->ast[d] = a1 || ad < 0 || a->shape[ad] == 1 ? 0 : a->strides[ad];
        s->bst[d] = b1 || bd < 0 || b->shape[bd] == 1 ? 0 : b->strides[bd];
    }
    s->sam = a1 ? 0 : a->strides[a->rank - 2];
    s->sak = a->strides[a->rank - 1];
    s->sbk = b1 ? b->strides[0] : b->strides[b->rank - 2];
    s->sbn = b1 ? 0 : b->strides[b->rank - 1];
    if (op->kind == EM_OP_MATMUL_BIAS_ACT) {
        s->ep.on = 1;
        s->ep.act = (int)op->i[14];
        if (op->n_in > 2) s->ep.bias = tn_ptr(op->in[2]), s->ep.bs = op->in[2]->strides[0];
        if (op->n_out > 1) s->ep.pre = tn_ptr(op->out[1]);
    }
}

/* Whether the tensor-core kernels can read both operands: each has a unit-stride dim (the
 * 16-byte chunks run along it), that dim's extent, the other stride and the batch strides are
 * multiples of 8 elements, and the bases are 16-byte aligned. *at: A is m-contiguous; *bt: B
 * is k-contiguous (a transposed weight). */
static bool tc_layout(const em_op *op, const mm_arg *s, int *at, int *bt, int64_t q)
{
    const em_tensor *a = op->in[0], *b = op->in[1];
    if (((uintptr_t)tn_ptr(a) | (uintptr_t)tn_ptr(b)) & 15) return false;
    for (int d = 0; d < s->R; d++)
        if (s->ast[d] % q || s->bst[d] % q) return false;
    if (s->sak == 1 && s->K % q == 0 && (s->M == 1 || s->sam % q == 0))
        *at = 0;
    else if (s->sam == 1 && s->M % q == 0 && s->sak % q == 0)
        *at = 1;
    else
        return false;
    if (s->sbn == 1 && s->N % q == 0 && (s->K == 1 || s->sbk % q == 0))
        *bt = 0;
    else if (s->sbk == 1 && s->K % q == 0 && (s->N == 1 || s->sbn % q == 0))
        *bt = 1;
    else
        return false;
    return s->K > 0;
}

/* Whether device runs the Hopper kernels (kernels/matmul_wgmma.cu): sm_90, and config
 * cuda_wgmma is not off (which keeps the mma.sync kernels). */
static bool wgmma_device(int dev)
{
    const cuda_device_info *d = cuda_device(dev);
    const char *v = em_config_get("cuda_wgmma");
    if (v && (!strcmp(v, "0") || !strcmp(v, "off") || !strcmp(v, "false"))) return false;
    return d && d->cc_major == 9 && d->cc_minor == 0;
}

/* The Hopper kernels take one 2-D product (no batch), both sides at least 64. */
static bool wgmma_ok(int dev, const mm_arg *s)
{
    return wgmma_device(dev) && s->nbatch == 1 && s->M >= 64 && s->N >= 64 && s->K > 0 &&
           s->M < INT32_MAX && s->N < INT32_MAX && s->K < INT32_MAX;
}

/* Launches em_transpose_4: dst [cols][rows] contiguous from src [rows][cols] (row stride lds),
 * 4-byte elements. */
static em_status transpose4(int dev, const void *src, void *dst, long long rows, long long cols,
                            long long lds, const char *what)
{
    CUfunction f = cuda_kernel(dev, "em_transpose_4", what);
    if (!f) return em_last_status();
    unsigned grid[3] = {(unsigned)((cols + 31) / 32), (unsigned)((rows + 31) / 32), 1};
    unsigned block[3] = {32, 8, 1};
    if (grid[1] > 65535) return em_error(EM_ERR_UNSUPPORTED, "%s: too many rows", what);
    void *params[] = {(void *)&src, &dst, &rows, &cols, &lds};
    return cuda_launch_grid(dev, f, grid, block, params, what);
}

/* A tensor map (CUtensorMap: 128 opaque bytes, 64-byte aligned) as the kernel takes it. */
typedef struct cuda_tmap {
    _Alignas(64) uint64_t w[16];
} cuda_tmap;

/* A 2-D operand [outer][inner] (rows ld_bytes apart) read in boxes of box_in x box_out elements
 * with the 128-byte swizzle; elements past the edges read as zero. */
static bool encode_tmap(cuda_tmap *m, int esz, const void *p, int64_t inner, int64_t outer,
                        int64_t ld_bytes, unsigned box_in, unsigned box_out)
{
    /* CU_TENSOR_MAP_DATA_TYPE_ UINT16 = 1, FLOAT32 = 7: the copy moves bits */
    uint64_t dims[2] = {(uint64_t)inner, (uint64_t)outer}, strides[1] = {(uint64_t)ld_bytes};
    unsigned box[2] = {box_in, box_out}, es[2] = {1, 1};
    /* no interleave, CU_TENSOR_MAP_SWIZZLE_128B = 3, L2 promotion 128B = 2, zero fill */
    return cuda_drv.cuTensorMapEncodeTiled(m, esz == 2 ? 1 : 7, 2, (void *)p, dims, strides, box,
                                           es, 0, 3, 2, 0) == 0;
}

/* Whether the operand with unit stride along `unit` (1 = K, 0 = the other dim) fits a tensor map:
 * the other stride positive and a multiple of 16 bytes. */
static int tma_major(int64_t s_other, int64_t s_k, int esz)
{
    int64_t q = 16 / esz;
    if (s_k == 1 && s_other > 0 && s_other % q == 0) return 0; /* K-major */
    if (s_other == 1 && s_k > 0 && s_k % q == 0) return 1;     /* MN-major */
    return -1;
}

/* One product on the TMA wgmma kernel: operands (am / bn: MN-major), sizes, leading dims. */
typedef struct tw_args {
    int dev, esz;
    const char *type; /* "bf16", "f16", "tf32" */
    int am, bn;
    const void *ap, *bp;
    void *cp;
    int64_t M, N, K, lda, ldb;
    cuda_mm_epi ep; /* applied in the kernel's store */
    const char *what;
} tw_args;

/* Launches em_mm_tw_<type>_<a><b><w|n> with 256-column (wide) or 128-column tiles;
 * EM_ERR_UNSUPPORTED (nothing recorded) when the driver refuses an operand's tensor map. */
static em_status run_tw(const tw_args *t, bool wide)
{
    const cuda_device_info *d = cuda_device(t->dev);
    unsigned bnw = wide ? 256 : 128, bke = 128 / (unsigned)t->esz;
    int64_t tiles = (t->M + 127) / 128 * ((t->N + bnw - 1) / bnw);
    cuda_tmap ma, mb;
    bool ok = t->am ? encode_tmap(&ma, t->esz, t->ap, t->M, t->K, t->lda * t->esz, 64, bke)
                    : encode_tmap(&ma, t->esz, t->ap, t->K, t->M, t->lda * t->esz, bke, 128);
    ok = ok && (t->bn ? encode_tmap(&mb, t->esz, t->bp, t->N, t->K, t->ldb * t->esz, 64, bke)
                      : encode_tmap(&mb, t->esz, t->bp, t->K, t->N, t->ldb * t->esz, bke, bnw));
    if (!ok) { /* a layout the copy engine does not take: the caller picks another kernel */
        em_log_msg("cuda", EM_LOG_INFO, "%s: cuTensorMapEncodeTiled refused an operand", t->what);
        return EM_ERR_UNSUPPORTED;
    }
    char name[40];
    snprintf(name, sizeof name, "em_mm_tw_%s_%c%c%c", t->type, t->am ? 'm' : 'k', t->bn ? 'n' : 'k',
             wide ? 'w' : 'n');
    CUfunction f = cuda_kernel(t->dev, name, t->what);
    if (!f) return em_last_status();
    void *cp = t->cp;
    int mi = (int)t->M, ni = (int)t->N, ki = (int)t->K;
    cuda_mm_epi ep = t->ep;
    void *params[] = {&ma, &mb, &cp, &mi, &ni, &ki, &ep};
    unsigned grid[3] = {(unsigned)(tiles < d->sm_count ? tiles : d->sm_count), 1, 1};
    unsigned block[3] = {384, 1, 1};
    /* 4 stages of a 128-row A tile and a bnw-row B tile of 128 bytes each, the 1024-byte
       alignment slack and the 8 mbarriers */
    unsigned smem = 4 * (128 + bnw) * 128 + 1024 + 64;
    return cuda_launch_grid_smem(t->dev, f, grid, block, smem, params, t->what);
}

/* ---- the tile width, tuned on first use ------------------------------------------------------
 * With config cuda_autotune on (the default), a product shape (type, layouts, M, N, K) of at
 * least 2^30 multiply-adds first runs both tile widths (a warm-up, then the best of three timed
 * runs each, synchronised) and keeps the faster; decisions are kept for the process and appended
 * to <cache dir>/cuda-mm-tune-sm<cc>-<SMs>.txt, read back on the next start; the product then
 * runs once more with the chosen width. Smaller products and cuda_autotune = off take the wave
 * count rule at the end. */
typedef struct tune_entry {
    char type[8];
    int am, bn;
    int64_t M, N, K;
    int wide;
} tune_entry;

static pthread_mutex_t tune_lock = PTHREAD_MUTEX_INITIALIZER;
static tune_entry *tunes;
static int n_tunes, cap_tunes;
static bool tunes_read;
static char tune_path[1100];

static void tune_add(const tune_entry *e)
{
    if (n_tunes == cap_tunes) {
        int cap = cap_tunes ? 2 * cap_tunes : 64;
        tune_entry *t = realloc(tunes, (size_t)cap * sizeof *t);
        if (!t) return;
        tunes = t, cap_tunes = cap;
    }
    tunes[n_tunes++] = *e;
}

static const tune_entry *tune_find(const tw_args *t)
{
    for (int i = 0; i < n_tunes; i++) {
        const tune_entry *e = &tunes[i];
        if (!strcmp(e->type, t->type) && e->am == t->am && e->bn == t->bn && e->M == t->M &&
            e->N == t->N && e->K == t->K)
            return e;
    }
    return NULL;
}

/* Reads the decisions file once (caller holds tune_lock). */
static void tune_read(int dev)
{
    if (tunes_read) return;
    tunes_read = true;
    const char *pat = cuda_module_cache_path(dev), *slash = strrchr(pat, '/');
    const cuda_device_info *d = cuda_device(dev);
    if (!slash || !d) return;
    snprintf(tune_path, sizeof tune_path, "%.*s/cuda-mm-tune-sm%d%d-%d.txt", (int)(slash - pat),
             pat, d->cc_major, d->cc_minor, d->sm_count);
    FILE *f = fopen(tune_path, "r");
    if (!f) return;
    tune_entry e;
    long long M, N, K;
    while (fscanf(f, "%7s %d %d %lld %lld %lld %d", e.type, &e.am, &e.bn, &M, &N, &K, &e.wide) ==
           7) {
        e.M = M, e.N = N, e.K = K;
        tune_add(&e);
    }
    fclose(f);
}

/* Seconds of one synchronised run of t on one tile width; < 0 on failure. */
static double time_tw(const tw_args *t, bool wide)
{
    int64_t t0 = core_mono_ns();
    if (run_tw(t, wide) != EM_OK || cuda_drv.cuCtxSynchronize() != 0) return -1;
    return 1e-9 * (double)(core_mono_ns() - t0);
}

/* Times both tile widths for t: one untimed run each, then 5 runs of each taking turns, each
 * width's fastest run in *tn (128 columns) and *tw (256). Taking turns matters: the GPU's clock
 * falls as it heats under a long product, so a width timed after the other would look slower.
 * false when a run fails. */
static bool time_widths(const tw_args *t, double *tn, double *tw)
{
    *tn = *tw = -1;
    if (time_tw(t, false) < 0 || time_tw(t, true) < 0) return false;
    for (int r = 0; r < 10; r++) {
        bool wide = (r & 1) != (r / 2 & 1); /* n w w n n w w n n w: each side first as often */
        double dt = time_tw(t, wide), *best = wide ? tw : tn;
        if (dt < 0) return false;
        if (*best < 0 || dt < *best) *best = dt;
    }
    return true;
}

/* 256-column tiles (wide) or 128-column ones for t. */
static bool tile_width(const tw_args *t)
{
    const char *tile = em_config_get("cuda_mm_tile");
    if (tile && !strcmp(tile, "wide")) return true;
    if (tile && !strcmp(tile, "narrow")) return false;
    const char *v = em_config_get("cuda_autotune");
    bool tune = !(v && (!strcmp(v, "0") || !strcmp(v, "off") || !strcmp(v, "false")));
    if (tune && (double)t->M * (double)t->N * (double)t->K >= 1073741824.0) {
        pthread_mutex_lock(&tune_lock);
        tune_read(t->dev);
        const tune_entry *e = tune_find(t);
        int wide = e ? e->wide : -1;
        if (wide < 0) {
            double tn, tw;
            if (time_widths(t, &tn, &tw)) {
                tune_entry n = {.am = t->am, .bn = t->bn, .M = t->M, .N = t->N, .K = t->K};
                snprintf(n.type, sizeof n.type, "%s", t->type);
                n.wide = wide = tw <= tn;
                tune_add(&n);
                FILE *f = tune_path[0] ? fopen(tune_path, "a") : NULL;
                if (f) {
                    fprintf(f, "%s %d %d %lld %lld %lld %d\n", n.type, n.am, n.bn, (long long)n.M,
                            (long long)n.N, (long long)n.K, n.wide);
                    fclose(f);
                }
                em_log_msg("cuda", EM_LOG_INFO,
                           "matmul %s %lld x %lld x %lld: 256-column tiles %.3f ms, 128-column "
                           "%.3f ms",
                           t->type, (long long)t->M, (long long)t->N, (long long)t->K, tw * 1e3,
                           tn * 1e3);
            } else
                em_clear_error(); /* a failed trial: the rule decides, the real run reports */
        }
        pthread_mutex_unlock(&tune_lock);
        if (wide >= 0) return wide;
    }
    /* 256-column tiles unless 128-column ones take clearly fewer waves over the multiprocessors
       (a 128-column tile is taken to cost 0.55 of a 256-column one) */
    int64_t tm = (t->M + 127) / 128, sm = cuda_device(t->dev)->sm_count;
    int64_t waves_w = (tm * ((t->N + 255) / 256) + sm - 1) / sm;
    int64_t waves_n = (tm * ((t->N + 127) / 128) + sm - 1) / sm;
    return (double)waves_w <= 0.55 * (double)waves_n;
}

/* f16/bf16 (or f32 on TF32) product on the TMA wgmma kernel. K-major or MN-major operands are
 * read in place (TF32 takes K-major only: an MN-major operand is transposed into a pooled buffer
 * first). EM_ERR_UNSUPPORTED (nothing recorded) when the layout does not fit. */
static em_status run_wgmma(const em_op *op, const mm_arg *s, int dev, const char *what)
{
    const em_tensor *a = op->in[0], *b = op->in[1], *o = op->out[0];
    const bool tf32 = o->dtype == EM_F32;
    if (!cuda_drv.cuTensorMapEncodeTiled) return EM_ERR_UNSUPPORTED;
    const int esz = tf32 ? 4 : 2;
    const void *ap = tn_ptr(a), *bp = tn_ptr(b);
    if (((uintptr_t)ap | (uintptr_t)bp) & 15) return EM_ERR_UNSUPPORTED;
    int am = tma_major(s->sam, s->sak, esz), bn = tma_major(s->sbn, s->sbk, esz);
    if (am < 0 || bn < 0) return EM_ERR_UNSUPPORTED;
    int64_t M = s->M, N = s->N, K = s->K;
    int64_t lda = am ? s->sak : s->sam, ldb = bn ? s->sbk : s->sbn;
    void *tmpa = NULL, *tmpb = NULL;
    em_status st = EM_OK;
    if (tf32 && (am || bn) && K % 4) return EM_ERR_UNSUPPORTED;
    if (tf32 && am) { /* A [K][M] -> [M][K] */
        tmpa = cuda_pool_alloc(dev, (size_t)(M * K) * 4);
        if (!tmpa) return em_last_status();
        st = transpose4(dev, ap, tmpa, K, M, lda, what);
        ap = tmpa, lda = K, am = 0;
    }
    if (tf32 && bn && st == EM_OK) { /* B [K][N] -> [N][K] */
        tmpb = cuda_pool_alloc(dev, (size_t)(N * K) * 4);
        st = tmpb ? transpose4(dev, bp, tmpb, K, N, ldb, what) : em_last_status();
        bp = tmpb, ldb = K, bn = 0;
    }
    if (st == EM_OK) {
        tw_args t = {.dev = dev,
                     .esz = esz,
                     .type = tf32                  ? "tf32"
                             : o->dtype == EM_BF16 ? "bf16"
                                                   : "f16",
                     .am = am,
                     .bn = bn,
                     .ap = ap,
                     .bp = bp,
                     .cp = tn_ptr(o),
                     .M = M,
                     .N = N,
                     .K = K,
                     .lda = lda,
                     .ldb = ldb,
                     .ep = s->ep,
                     .what = what};
        st = run_tw(&t, tile_width(&t));
    }
    cuda_pool_free(dev, tmpa); /* stream order: the product has read them before any reuse */
    cuda_pool_free(dev, tmpb);
    return st;
}

/* 128 x 256 block tiles (warps of 64 x 64) for f16/bf16 when there are at least two waves of
 * them on 132 multiprocessors; config cuda_mm_tile = narrow / wide forces one. */
static bool wide_tiles(const mm_arg *s)
{
    const char *v = em_config_get("cuda_mm_tile");
    if (v && !strcmp(v, "wide")) return true;
    if (v && !strcmp(v, "narrow")) return false;
    return ((s->M + 127) / 128) * ((s->N + 255) / 256) * s->nbatch >= 264;
}

/* f32 matmul on TF32 tensor cores (10-bit mantissa operands) when the config key cuda_tf32 is
 * on; off by default, as in PyTorch. */
static bool tf32_allowed(void)
{
    const char *v = em_config_get("cuda_tf32");
    return v && (!strcmp(v, "1") || !strcmp(v, "on") || !strcmp(v, "true") || !strcmp(v, "yes"));
}

/* Split-K for f32 products whose block tiles would leave multiprocessors idle: the K dim is
 * cut into `parts` equal slices, run as an extra batch dim into a pooled f32 buffer, and the
 * slices are summed in order (deterministic), the epilogue applied by the sum. tile: the block
 * tile's side.
 * - 128 (one 8-warp block per multiprocessor): the count whose waves over the multiprocessors
 *   waste the least, each extra slice taken to cost 10 % (fitted to the H200's square products:
 *   1536^3 unsplit 293 us, 2 / 3 / 4 slices 255 / 236 / 229; 2048^3, 1.94 waves, unsplit 385
 *   us, 2 slices 448; 3072^3 unsplit 1431 us, 2 slices 1420).
 * - 64 (2-warp blocks, up to 6 per multiprocessor): split only below one block each, into
 *   slices enough for 4 (on the H200, [512, 768] x [768, 768]: 96 blocks, 6 slices, 32 us
 *   against 48 unsplit; [512, 768] x [768, 2048]: 256 blocks, unsplit 51 us, 2 or 3 slices 60).
 * Slices are multiples of 8 and at least 128 long. Config cuda_split_k = n forces n slices where
 * K allows them (1: never split). Returns 1 when the product is wide enough already or K too
 * short to cut. */
static int split_k_parts(int dev, const mm_arg *s, int tile)
{
    const cuda_device_info *d = cuda_device(dev);
    int64_t blocks = ((s->M + tile - 1) / tile) * ((s->N + tile - 1) / tile) * s->nbatch;
    int64_t sms = d->sm_count;
    const char *v = em_config_get("cuda_split_k");
    int force = v ? atoi(v) : 0;
    if (s->R >= 8 || (force < 1 && s->K < 512)) return 1;
    if (force > 16) force = 16;
    if (force >= 1) return force > 1 && s->K % (8 * force) == 0 ? force : 1;
    int parts = 1;
    if (tile == 128) { /* the least of waves(p) / p * (1 + 0.1 (p - 1)) */
        double best = (double)((blocks + sms - 1) / sms);
        for (int p = 2; p <= 16; p++) {
            if (s->K % (8 * p) || s->K / p < 128) continue;
            double c = (double)((blocks * p + sms - 1) / sms) / p * (1 + 0.1 * (p - 1));
            if (c < best) best = c, parts = p;
        }
        return parts;
    }
    if (blocks >= sms) return 1;
    for (int p = 2; p <= 16 && blocks * parts < 4 * sms; p++) /* the fewest that fill the GPU */
        if (s->K % (8 * p) == 0 && s->K / p >= 128) parts = p;
    return parts;
}

/* The exact f32 kernels' block tile for s: 128 x 128 when there are two of those per
 * multiprocessor, or one and K >= 1024; else 64 x 64 (more, smaller blocks for a transformer's
 * [512, 768] x [768, 768]: 24 tiles of 128 on 132 multiprocessors). On the H200, 2048^3 (256
 * tiles of 128): 385 us on 128 tiles, 586 on 64; 1536^3: 236 on 128 in 3 slices, 247 on 64.
 * Shorter K with one or two tiles per multiprocessor (a weight gradient [3072, 512] x [512, 768])
 * was not measured on 128 tiles and keeps 64. Config cuda_f32_tile = 64 / 128 forces one. */
static int sgemm_tile(int dev, const mm_arg *s)
{
    const char *v = em_config_get("cuda_f32_tile");
    if (v && !strcmp(v, "64")) return 64;
    if (v && !strcmp(v, "128")) return 128;
    int64_t blocks = ((s->M + 127) / 128) * ((s->N + 127) / 128) * s->nbatch;
    int64_t sms = cuda_device(dev)->sm_count;
    return blocks >= 2 * sms || (blocks >= sms && s->K >= 1024) ? 128 : 64;
}

/* The f32 kernel for s: em_mm_sgemm_v4_<a><b> (16-byte loads; a = k or m, the contiguous dim of
 * A, b = k or n for B; suffix _t64 for tile 64) when both operands' contiguous dims, other
 * strides and batch strides are positive multiples of 4 floats and the bases 16-byte aligned,
 * else em_mm_sgemm (any strides, 128 x 128 tiles only). Returns the kernel's tile side. */
static int sgemm_name(const em_op *op, const mm_arg *s, int tile, char name[40])
{
    const void *ap = tn_ptr(op->in[0]), *bp = tn_ptr(op->in[1]);
    bool ok = !(((uintptr_t)ap | (uintptr_t)bp) & 15);
    for (int d = 0; d < s->R; d++) ok = ok && s->ast[d] % 4 == 0 && s->bst[d] % 4 == 0;
    char ac = s->sak == 1 && s->sam > 0 && s->sam % 4 == 0 && s->K % 4 == 0   ? 'k'
              : s->sam == 1 && s->sak > 0 && s->sak % 4 == 0 && s->M % 4 == 0 ? 'm'
                                                                              : 0;
    char bc = s->sbk == 1 && s->sbn > 0 && s->sbn % 4 == 0 && s->K % 4 == 0   ? 'k'
              : s->sbn == 1 && s->sbk > 0 && s->sbk % 4 == 0 && s->N % 4 == 0 ? 'n'
                                                                              : 0;
    if (ok && ac && bc && s->K > 1) {
        snprintf(name, 40, "em_mm_sgemm_v4_%c%c%s", ac, bc, tile == 64 ? "_t64" : "");
        return tile;
    }
    snprintf(name, 40, "em_mm_sgemm");
    return 128;
}

/* Grid and block of an f32 kernel with tile x tile block tiles over s (batches beyond 65535
 * blocks are walked by the kernel). */
static void sgemm_grid(const mm_arg *s, int tile, unsigned grid[3], unsigned block[3])
{
    grid[0] = (unsigned)((s->N + tile - 1) / tile);
    grid[1] = (unsigned)((s->M + tile - 1) / tile);
    grid[2] = (unsigned)(s->nbatch > 65535 ? 65535 : s->nbatch);
    block[0] = tile == 64 ? 64 : 256;
    block[1] = block[2] = 1;
}

/* The product in `parts` K slices on tile x tile blocks (TF32 or exact f32), then their ordered
 * sum with s's epilogue. */
static em_status run_split_k(const em_op *op, const mm_arg *s, int parts, int tile, int dev,
                             const char *what)
{
    mm_arg t = *s;
    memset(&t.ep, 0, sizeof t.ep); /* the slices are partial sums: the epilogue runs after them */
    int64_t slice = s->K / parts;
    t.bshape[t.R] = parts; /* the innermost batch dim walks the K slices */
    t.ast[t.R] = slice * s->sak;
    t.bst[t.R] = slice * s->sbk;
    t.R++;
    t.K = slice;
    t.nbatch = s->nbatch * parts;
    long long mn = s->M * s->N, nb = s->nbatch;
    float *ws = cuda_pool_alloc(dev, (size_t)(mn * t.nbatch) * sizeof(float));
    if (!ws) return em_last_status();
    void *ap = tn_ptr(op->in[0]), *bp = tn_ptr(op->in[1]), *wp = ws, *cp = tn_ptr(op->out[0]);
    void *params[] = {&ap, &bp, &wp, &t};
    int at = 0, bt = 0;
    bool tf32 = tf32_allowed() && tc_layout(op, &t, &at, &bt, 4);
    char name[40];
    if (tf32) {
        snprintf(name, sizeof name, "em_mm_tf32_%c%c", at ? 't' : 'n', bt ? 't' : 'n');
        tile = 128;
    } else
        tile = sgemm_name(op, &t, tile, name);
    unsigned grid[3], block[3];
    sgemm_grid(&t, tile, grid, block);
    CUfunction f = cuda_kernel(dev, name, what);
    em_status st = f ? EM_OK : em_last_status();
    if (st == EM_OK && tf32)
        st = cuda_launch_grid_smem(dev, f, grid, block, 3 * 2 * 128 * 36 * 4, params, what);
    else if (st == EM_OK)
        st = cuda_launch_grid(dev, f, grid, block, params, what);
    CUfunction g = st == EM_OK ? cuda_kernel(dev, "em_mm_splitk_sum_f32", what) : NULL;
    if (st == EM_OK && !g) st = em_last_status();
    if (st == EM_OK) {
        void *sp[] = {&wp, &cp, &mn, &nb, &parts, (void *)s};
        st = cuda_launch(dev, g, mn * nb, sp, what);
    }
    cuda_pool_free(dev, ws);
    return st;
}

/* Matrix-vector products (N == 1 or M == 1) of f32, f16 or bf16 on the memory-bound kernels of
 * kernels/matmul_gemv.cu: a warp per output row for N == 1; for M == 1 a thread per column (f32
 * contiguous columns: a block per 128 columns, its warps over the slice's rows) over k slices, as
 * many (up to 64) as it takes to give every multiprocessor two blocks, their sums added in slice
 * order. */
static em_status run_gemv(const em_op *op, const mm_arg *s, int dev, const char *what)
{
    const em_tensor *o = op->out[0];
    const char *tn = o->dtype == EM_F32 ? "f32" : o->dtype == EM_F16 ? "f16" : "bf16";
    void *ap = tn_ptr(op->in[0]), *bp = tn_ptr(op->in[1]), *cp = tn_ptr(o);
    unsigned block[3] = {256, 1, 1};
    bool ok4 = true; /* f32 columns as float4: every row of B and the output 16-byte aligned */
    for (int d = 0; d < s->R; d++) ok4 = ok4 && s->bst[d] % 4 == 0;
    bool cols4 = ok4 && s->N > 1 && o->dtype == EM_F32 && s->sbn == 1 && s->N % 4 == 0 &&
                 s->sbk % 4 == 0 && !((uintptr_t)bp & 15);
    char name[40];
    snprintf(name, sizeof name, "em_gemv_%s_%s", s->N == 1 ? "rows" : cols4 ? "cols4" : "cols", tn);
    CUfunction f = cuda_kernel(dev, name, what);
    if (!f) return em_last_status();
    if (s->N == 1) {
        int64_t blocks = (s->nbatch * s->M + 7) / 8;
        unsigned grid[3] = {(unsigned)(blocks < (1 << 20) ? blocks : (1 << 20)), 1, 1};
        void *params[] = {&ap, &bp, &cp, (void *)s};
        return cuda_launch_grid(dev, f, grid, block, params, what);
    }
    int64_t cpb = cols4 ? 128 : 256; /* columns per block */
    int64_t nb = s->nbatch < 65535 ? s->nbatch : 65535, cb = (s->N + cpb - 1) / cpb * nb;
    int parts = 1;
    while (parts < 64 && cb * parts < 2 * cuda_device(dev)->sm_count && s->K / (2 * parts) >= 64)
        parts *= 2;
    float *ws = NULL;
    if (parts > 1) {
        ws = cuda_pool_alloc(dev, (size_t)(s->nbatch * parts * s->N) * sizeof(float));
        if (!ws) return em_last_status();
    }
    unsigned grid[3] = {(unsigned)((s->N + cpb - 1) / cpb), (unsigned)parts, (unsigned)nb};
    void *params[] = {&ap, &bp, &cp, &ws, (void *)s, &parts};
    em_status st = cuda_launch_grid(dev, f, grid, block, params, what);
    if (st == EM_OK && parts > 1) {
        snprintf(name, sizeof name, "em_gemv_sum_%s", tn);
        CUfunction g = cuda_kernel(dev, name, what);
        long long n = s->N, nbt = s->nbatch;
        void *sp[] = {&ws, &cp, &n, &nbt, &parts};
        st = g ? cuda_launch(dev, g, n * nbt, sp, what) : em_last_status();
    }
    cuda_pool_free(dev, ws);
    return st;
}

/* The product of a MATMUL or MATMUL_BIAS_ACT record; *fused: the kernel that ran applied s's
 * epilogue in its store (the f32 kernels but TF32 mma.sync, the split-K sum, the f16/bf16
 * tensor-core and wgmma kernels), else the caller runs it as a pass over the output. */
static em_status mm_product(const em_op *op, const mm_arg *ps, int dev, const char *what,
                            bool *fused)
{
    const em_tensor *a = op->in[0], *b = op->in[1], *o = op->out[0];
    mm_arg s = *ps;
    *fused = false;
    if ((s.M == 1 || s.N == 1) && (o->dtype == EM_F32 || o->dtype == EM_F16 || o->dtype == EM_BF16))
        return run_gemv(op, &s, dev, what);
    void *ap = tn_ptr(a), *bp = tn_ptr(b), *cp = tn_ptr(o);
    void *params[] = {&ap, &bp, &cp, &s};
    unsigned zb = (unsigned)(s.nbatch > 65535 ? 65535 : s.nbatch);
    char name[40];
    if (o->dtype == EM_F16 || o->dtype == EM_BF16) {
        const char *dn = o->dtype == EM_F16 ? "f16" : "bf16";
        int at, bt;
        if (wgmma_ok(dev, &s)) {
            em_status st = run_wgmma(op, &s, dev, what);
            *fused = true;
            if (st != EM_ERR_UNSUPPORTED) return st;
            *fused = false;
        }
        if (tc_layout(op, &s, &at, &bt, 8)) {
            unsigned grid[3] = {(unsigned)((s.N + 127) / 128), (unsigned)((s.M + 127) / 128), zb};
            unsigned block[3] = {256, 1, 1};
            if (grid[1] > 65535)
                return em_error(EM_ERR_UNSUPPORTED, "%s: at most %d rows on cuda", what,
                                65535 * 128);
            bool wide = wide_tiles(&s);
            snprintf(name, sizeof name, "em_mm_tc_%s_%c%c%s", dn, at ? 't' : 'n', bt ? 't' : 'n',
                     wide ? "_w" : "");
            CUfunction f = cuda_kernel(dev, name, what);
            if (!f) return em_last_status();
            /* 4 stages of a 128 x 32 A tile and a 32 x BN B tile, rows padded (matmul.cu) */
            if (wide) grid[0] = (unsigned)((s.N + 255) / 256);
            unsigned smem = wide ? 4 * (128 * 40 + 256 * 40) * 2 : 4 * 2 * 128 * 40 * 2;
            *fused = true;
            return cuda_launch_grid_smem(dev, f, grid, block, smem, params, what);
        }
        snprintf(name, sizeof name, "em_mm_half_%s", dn);
    } else if (o->dtype == EM_F32) {
        unsigned grid[3], block[3];
        sgemm_grid(&s, 128, grid, block);
        if (grid[1] > 65535)
            return em_error(EM_ERR_UNSUPPORTED, "%s: at most %d rows on cuda", what, 65535 * 128);
        int at, bt;
        if (tf32_allowed() && wgmma_ok(dev, &s)) {
            em_status st = run_wgmma(op, &s, dev, what);
            *fused = true;
            if (st != EM_ERR_UNSUPPORTED) return st;
            *fused = false;
        }
        bool tf32 = tf32_allowed() && tc_layout(op, &s, &at, &bt, 4);
        if (tf32 && split_k_parts(dev, &s, 128) == 1) {
            snprintf(name, sizeof name, "em_mm_tf32_%c%c", at ? 't' : 'n', bt ? 't' : 'n');
            CUfunction f = cuda_kernel(dev, name, what);
            if (!f) return em_last_status();
            /* 3 stages of two 128 x 32 float tiles, rows padded to 36 (matmul.cu) */
            return cuda_launch_grid_smem(dev, f, grid, block, 3 * 2 * 128 * 36 * 4, params, what);
        }
        int tile = tf32 || (s.M + 63) / 64 > 65535 ? 128 : sgemm_tile(dev, &s);
        int parts = split_k_parts(dev, &s, tile);
        *fused = true; /* by the kernel's store, or by the split-K sum */
        if (parts > 1) return run_split_k(op, &s, parts, tile, dev, what);
        tile = sgemm_name(op, &s, tile, name);
        sgemm_grid(&s, tile, grid, block);
        CUfunction f = cuda_kernel(dev, name, what);
        if (!f) return em_last_status();
        return cuda_launch_grid(dev, f, grid, block, params, what);
    } else
        snprintf(name, sizeof name, "em_matmul_%s", short_name(o->dtype));
    int64_t gy = (s.M + 15) / 16, gx = (s.N + 15) / 16;
    if (gy > 65535 || gx > 0x7fffffff)
        return em_error(EM_ERR_UNSUPPORTED, "%s: the cuda matmul kernel takes at most %d rows",
                        what, 65535 * 16);
    unsigned grid[3] = {(unsigned)gx, (unsigned)gy, zb};
    unsigned block[3] = {16, 16, 1};
    CUfunction f = cuda_kernel(dev, name, what);
    if (!f) return em_last_status();
    return cuda_launch_grid(dev, f, grid, block, params, what);
}

/* MATMUL and MATMUL_BIAS_ACT: the product, then, where its kernel did not apply the epilogue
 * (GEMV, TF32 mma.sync, the any-stride f16/bf16 and f64 kernels), one pass over the
 * output that adds the bias, stores the pre-activation and applies the activation in f32 (f64
 * for f64), as the fused stores do. */
static em_status run_matmul(const em_op *op, int dev, const char *what)
{
    const em_tensor *o = op->out[0];
    if (!em_dtype_is_float(o->dtype)) return cuda_nn_int_matmul(op, dev, what);
    mm_arg s;
    cuda_mm_geometry(op, &s);
    if (s.nbatch == 0 || s.M == 0 || s.N == 0) return EM_OK;
    bool fused = false;
    em_status st = mm_product(op, &s, dev, what, &fused);
    if (st != EM_OK || !s.ep.on || fused) return st;
    char name[40];
    snprintf(name, sizeof name, "em_mm_epi_%s",
             o->dtype == EM_F16    ? "f16"
             : o->dtype == EM_BF16 ? "bf16"
                                   : short_name(o->dtype));
    CUfunction f = cuda_kernel(dev, name, what);
    if (!f) return em_last_status();
    void *cp = tn_ptr(o);
    void *params[] = {&cp, &s};
    return cuda_launch(dev, f, s.nbatch * s.M * s.N, params, what);
}

static em_status run_layer_norm(const em_op *op, int dev, const char *what)
{
    const em_tensor *x = op->in[0], *o = op->out[0];
    long long len = 1, rows = 1;
    for (int d = 0; d < x->rank; d++) {
        if (d >= x->rank - (int)op->i[0])
            len *= x->shape[d];
        else
            rows *= x->shape[d];
    }
    if (len == 0 || rows == 0) return EM_OK;
    int next = 1;
    void *xp = tn_ptr(x), *yp = tn_ptr(o);
    void *wp = op->i[1] ? tn_ptr(op->in[next++]) : NULL;
    void *bp = op->i[2] ? tn_ptr(op->in[next++]) : NULL;
    double eps = op->f[0];
    char name[40];
    int vpt = row_vpt(len);
    bool x4 = o->dtype == EM_F32 && len % 4 == 0 && vpt >= 4 && vpt <= 16 &&
              !(((uintptr_t)xp | (uintptr_t)yp | (uintptr_t)wp | (uintptr_t)bp) & 15);
    snprintf(name, sizeof name, "em_layer_norm_rows_%s%s_v%d", short_name(o->dtype), x4 ? "x4" : "",
             vpt);
    CUfunction f = cuda_kernel(dev, name, what);
    if (!f) return em_last_status();
    void *params[] = {&xp, &wp, &bp, &yp, &rows, &len, &eps};
    return cuda_launch_blocks(dev, f, rows, params, what);
}

typedef struct conv_arg { /* matches `struct convg` in kernels/conv.cu */
    int64_t img[3], blk[3], k[3], s[3], p[3], d[3];
    int64_t n, c;
} conv_arg;

/* A stack tensor on device storage `st` (caller-filled), rank <= 4, given shape and strides. */
static em_tensor view3(em_storage *st, em_dtype dt, int64_t offset, int rank, const int64_t *shape,
                       const int64_t *strides)
{
    em_tensor t;
    memset(&t, 0, sizeof t);
    t.refcount = 1;
    t.dtype = dt;
    t.rank = rank;
    t.offset = offset;
    t.storage = st;
    for (int d = 0; d < rank; d++) t.shape[d] = shape[d], t.strides[d] = strides[d];
    return t;
}

static em_status run_matmul(const em_op *op, int dev, const char *what);

static em_status launch_conv_kernel(int dev, const char *fam, em_dtype dt, const void *in,
                                    void *out, const conv_arg *g, long long n, const char *what)
{
    char name[32];
    snprintf(name, sizeof name, "em_%s_%s", fam, short_name(dt));
    CUfunction f = cuda_kernel(dev, name, what);
    if (!f) return em_last_status();
    void *params[] = {(void *)&in, &out, (void *)g};
    return cuda_launch(dev, f, n, params, what);
}

static em_status bias_add(int dev, const em_tensor *y, const em_tensor *b, long long c, long long L,
                          const char *what)
{
    char name[32];
    snprintf(name, sizeof name, "em_bias_add_%s", short_name(y->dtype));
    CUfunction f = cuda_kernel(dev, name, what);
    if (!f) return em_last_status();
    long long total = tn_numel(y);
    void *yp = tn_ptr(y), *bp = tn_ptr(b);
    void *params[] = {&yp, &bp, &c, &L, &total};
    return cuda_launch(dev, f, total, params, what);
}

/* C[n, g] = A[g] . B[n, g] through run_matmul: A [G, M, K] (a_g: its group stride), B [N, G, K, L]
 * (strides b_n, b_g, b_k), C contiguous [N, G, M, L]. */
static em_status mm_groups(int dev, const em_tensor *A, int64_t a_g, int64_t a_m, int64_t a_k,
                           const em_tensor *B, int64_t b_n, int64_t b_g, int64_t b_k, em_tensor *C,
                           int64_t N, int64_t G, int64_t M, int64_t K, int64_t L, const char *what)
{
    int64_t ash[4] = {1, G, M, K}, ast[4] = {0, a_g, a_m, a_k};
    int64_t bsh[4] = {N, G, K, L}, bst[4] = {b_n, b_g, b_k, 1};
    int64_t csh[4] = {N, G, M, L}, cst[4] = {G * M * L, M * L, L, 1};
    em_tensor at = view3(A->storage, A->dtype, A->offset, 4, ash, ast);
    em_tensor bt = view3(B->storage, B->dtype, B->offset, 4, bsh, bst);
    em_tensor ct = view3(C->storage, C->dtype, C->offset, 4, csh, cst);
    em_op mm;
    memset(&mm, 0, sizeof mm);
    mm.kind = EM_OP_MATMUL;
    mm.n_in = 2;
    mm.n_out = 1;
    mm.in[0] = &at, mm.in[1] = &bt, mm.out[0] = &ct;
    mm.i[2] = M, mm.i[3] = K, mm.i[4] = L, mm.i[5] = 2, mm.i[6] = N, mm.i[7] = G;
    return run_matmul(&mm, dev, what);
}

/* CONV with few output channels per group (depthwise ...): one thread per output (conv_nn.cu). */
static em_status conv_direct(int dev, const em_tensor *x, const em_tensor *w, const em_tensor *b,
                             const em_tensor *y, const conv_arg *g, long long cout, long long G,
                             const char *what)
{
    CUfunction f = cuda_kernel(
        dev, y->dtype == EM_F64 ? "em_nn_conv_direct_f64" : "em_nn_conv_direct_f32", what);
    if (!f) return em_last_status();
    void *xp = tn_ptr(x), *wp = tn_ptr(w), *bp = b ? tn_ptr(b) : NULL, *yp = tn_ptr(y);
    void *params[] = {&xp, &wp, &bp, &yp, (void *)g, &cout, &G};
    return cuda_launch(dev, f, tn_numel(y), params, what);
}

typedef struct conv_ig_arg { /* matches `struct convig` in kernels/matmul_conv.cu */
    int32_t H, W, OW, sh, sw, ph, pw, Cg, M, K, L, ncols, xn, yn, splits, tps, ytot, cx;
} conv_ig_arg;

/* Off by the config key cuda_conv_igemm = off (then conv runs as im2col + the matmul kernels,
 * f16/bf16 in f32). */
static bool conv_igemm_allowed(void)
{
    const char *v = em_config_get("cuda_conv_igemm");
    return !(v && (!strcmp(v, "0") || !strcmp(v, "off") || !strcmp(v, "false")));
}

/* Whether a CONV (the geometry g of run_conv) runs as the implicit GEMM: f16/bf16, or f32 unless
 * TF32 is allowed; 1-D or 2-D, at least 16 outputs per group, every offset within 32 bits. */
static bool conv_igemm_ok(const em_op *op, const conv_arg *g, int64_t Cx, int64_t Cy, int64_t G)
{
    em_dtype dt = op->out[0]->dtype;
    bool f32 = dt == EM_F32 && !tf32_allowed(); /* TF32 asked for: im2col + the TF32 matmul */
    if (op->kind != EM_OP_CONV || (dt != EM_F16 && dt != EM_BF16 && !f32) || !conv_igemm_allowed())
        return false;
    if (g->img[0] != 1 || g->k[0] != 1 || Cy / G < 16 || Cx / G < 1) return false;
    int64_t lim = INT32_MAX / 2;
    int64_t xs = g->n * Cx * g->img[1] * g->img[2], ys = g->n * Cy * g->blk[1] * g->blk[2];
    int64_t ws = Cy * (Cx / G) * g->k[1] * g->k[2];
    return xs < lim && ys < lim && ws < lim && g->n * g->blk[1] * g->blk[2] < lim && g->n < 65536 &&
           Cy < 65536 && g->d[1] * g->k[1] < (1 << 15) && g->d[2] * g->k[2] < (1 << 15);
}

/* Whether the implicit GEMM takes 64-row tiles for M output rows: for M <= 64 (128-row tiles
 * measured faster for M = 256 on an H200 even with 1.5 waves of them). Config cuda_conv_tile =
 * 64 / 128 forces either. */
static bool conv_rows64(int64_t M)
{
    const char *v = em_config_get("cuda_conv_tile");
    if (v && !strcmp(v, "64")) return true;
    if (v && !strcmp(v, "128")) return false;
    return M <= 64;
}

/* dst [n][p][c] = src [n][c][p], 16-bit elements (em_conv_to_cl_u16). */
static em_status to_channels_last(int dev, const void *src, void *dst, int64_t n, int64_t c,
                                  int64_t p, const char *what)
{
    if (p < 32 && n * c * p < INT32_MAX) { /* w with a small kernel: one thread per element */
        CUfunction f = cuda_kernel(dev, "em_conv_to_cl_small_u16", what);
        if (!f) return em_last_status();
        int ci = (int)c, pi = (int)p, total = (int)(n * c * p);
        void *params[] = {(void *)&src, &dst, &ci, &pi, &total};
        return cuda_launch(dev, f, total, params, what);
    }
    CUfunction f = cuda_kernel(dev, "em_conv_to_cl_u16", what);
    if (!f) return em_last_status();
    int ci = (int)c, pi = (int)p;
    unsigned grid[3] = {(unsigned)((p + 63) / 64), (unsigned)((c + 63) / 64), (unsigned)n};
    unsigned block[3] = {256, 1, 1};
    void *params[] = {(void *)&src, &dst, &ci, &pi};
    return cuda_launch_grid(dev, f, grid, block, params, what);
}

/* y = conv(x, w) + b as an implicit GEMM (kernels/matmul_conv.cu), x, w, b and y contiguous.
 * f16/bf16 on the tensor cores: with 8k input channels per group, x and w are copied
 * channels-last first and both operands stream through cp.async (em_conv_cl_*); otherwise the
 * column tiles are gathered element by element (em_conv_ig_*). f32: exact FFMA register tiles
 * with gathered columns (em_conv_ig_f32*). Products with few output tiles
 * cut K into parts summed in order afterwards (f32 workspace): the weight gradient's
 * convolution has K = N OH OW. */
static em_status conv_igemm(int dev, const em_tensor *x, const em_tensor *w, const em_tensor *b,
                            const em_tensor *y, const conv_arg *g, int64_t Cx, int64_t Cy,
                            int64_t G, const char *what)
{
    bool bf = y->dtype == EM_BF16, f32 = y->dtype == EM_F32;
    conv_ig_arg a;
    a.H = (int32_t)g->img[1], a.W = (int32_t)g->img[2], a.OW = (int32_t)g->blk[2];
    a.sh = (int32_t)g->s[1], a.sw = (int32_t)g->s[2], a.ph = (int32_t)g->p[1];
    a.pw = (int32_t)g->p[2];
    a.Cg = (int32_t)(Cx / G), a.M = (int32_t)(Cy / G), a.cx = (int32_t)Cx;
    int64_t KH = g->k[1], KW = g->k[2];
    a.K = (int32_t)(a.Cg * KH * KW);
    a.L = (int32_t)(g->blk[1] * g->blk[2]), a.ncols = (int32_t)(g->n * a.L);
    a.xn = (int32_t)(Cx * a.H * a.W), a.yn = (int32_t)(Cy * a.L);
    a.ytot = (int32_t)tn_numel(y);
    int kstep = f32 ? 16 : 32, ktiles = (a.K + kstep - 1) / kstep;
    bool m64 = conv_rows64(a.M), cl = !f32 && a.Cg % 8 == 0;
    unsigned bm = m64 ? 64 : 128, bn = f32 && m64 ? 256 : 128; /* block tile (matmul_conv.cu) */
    unsigned gm = (unsigned)((a.M + bm - 1) / bm), gn = (unsigned)((a.ncols + bn - 1) / bn);
    int64_t tiles = (int64_t)gn * gm * G;
    int64_t want = 2 * (int64_t)cuda_device(dev)->sm_count;
    int splits = 1;
    while (splits < 64 && tiles * splits < want && ktiles / (2 * splits) >= 8) splits *= 2;
    a.splits = splits;
    a.tps = (ktiles + splits - 1) / splits;
    em_status st = EM_OK;
    em_tensor xc = *x, wc = *w;
    em_storage xs, wst;
    void *xbuf = NULL, *wbuf = NULL;
    if (cl) { /* x to [N][H][W][Cx] and w to [Cy][Kh][Kw][Cg] */
        xbuf = cuda_pool_alloc(dev, (size_t)tn_numel(x) * 2);
        wbuf = xbuf ? cuda_pool_alloc(dev, (size_t)tn_numel(w) * 2) : NULL;
        st = wbuf ? to_channels_last(dev, tn_ptr(x), xbuf, g->n, Cx, (int64_t)a.H * a.W, what)
                  : em_last_status();
        if (st == EM_OK) st = to_channels_last(dev, tn_ptr(w), wbuf, Cy, a.Cg, KH * KW, what);
        xc.storage = &xs, xs = *x->storage, xs.data = xbuf, xc.offset = 0;
        wc.storage = &wst, wst = *w->storage, wst.data = wbuf, wc.offset = 0;
        x = &xc, w = &wc;
    }
    bool av = cl || (a.K % 8 == 0 && ((uintptr_t)tn_ptr(w) & 15) == 0);
    char name[48];
    snprintf(name, sizeof name, "em_conv_%s_%s%s%s", cl ? "cl" : "ig",
             f32  ? "f32"
             : bf ? "bf16"
                  : "f16",
             m64 ? "_m64" : "", av || cl || f32 ? "" : "_a1");
    CUfunction f = st == EM_OK ? cuda_kernel(dev, name, what) : NULL;
    CUfunction ft =
        f ? cuda_kernel(dev, cl ? "em_conv_ig_taps_cl" : "em_conv_ig_taps", what) : NULL;
    int ntaps = cl ? ktiles * 4 : ktiles * kstep;
    void *taps = ft ? cuda_pool_alloc(dev, (size_t)ntaps * 8) : NULL;
    float *ws =
        taps && splits > 1 ? cuda_pool_alloc(dev, (size_t)splits * (size_t)a.ytot * 4) : NULL;
    if (st == EM_OK && (!taps || (splits > 1 && !ws))) st = em_last_status();
    int kw = (int)KW, dh = (int)g->d[1], dw = (int)g->d[2];
    if (st == EM_OK && cl) {
        void *tp[] = {&taps, &ntaps, &a.K, &a.Cg, &kw, &dh, &dw, &a.W, &a.cx};
        st = cuda_launch(dev, ft, ntaps, tp, what);
    } else if (st == EM_OK) {
        int khw = (int)(KH * KW);
        void *tp[] = {&taps, &ntaps, &a.K, &khw, &kw, &dh, &dw, &a.H, &a.W};
        st = cuda_launch(dev, ft, ntaps, tp, what);
    }
    void *xp = st == EM_OK ? tn_ptr(x) : NULL, *wp = st == EM_OK ? tn_ptr(w) : NULL,
         *bp = b && splits == 1 ? tn_ptr(b) : NULL, *yp = tn_ptr(y);
    unsigned grid[3] = {gn, gm, (unsigned)(G * splits)};
    unsigned block[3] = {256, 1, 1};
    void *params[] = {&xp, &wp, &bp, &yp, &ws, &taps, &a};
    /* the channels-last kernel: 4 stages of a (32 MI) x 32 and a 128 x 32 tile, pitch 40 */
    unsigned smem = cl ? 4u * ((m64 ? 64u : 128u) + 128u) * 40u * 2u : 0u;
    if (st == EM_OK) st = cuda_launch_grid_smem(dev, f, grid, block, smem, params, what);
    if (st == EM_OK && splits > 1) {
        snprintf(name, sizeof name, "em_conv_ig_sum_%s", f32 ? "f32" : bf ? "bf16" : "f16");
        CUfunction fs = cuda_kernel(dev, name, what);
        int cy = (int)Cy;
        void *bq = b ? tn_ptr(b) : NULL;
        void *sp[] = {&ws, &bq, &yp, &a, &cy};
        st = fs ? cuda_launch(dev, fs, a.ytot, sp, what) : em_last_status();
    }
    /* stream order: the kernels above read these before any reuse */
    cuda_pool_free(dev, ws);
    cuda_pool_free(dev, taps);
    cuda_pool_free(dev, xbuf);
    cuda_pool_free(dev, wbuf);
    return st;
}

typedef struct col_arg { /* matches `struct colg` in kernels/matmul_conv.cu */
    int32_t H, W, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, C8, total;
} col_arg;

/* The columns conv_cols writes: at most this many bytes (its kernel's indices stay in 32 bits). */
#define CONV_COLS_MAX ((int64_t)1 << 30)

/* How a CONV of conv_igemm_ok's shapes runs (run_conv). */
typedef enum conv_path {
    CONV_MMA,  /* conv_igemm: the implicit GEMM on mma.sync (every such shape) */
    CONV_COLS, /* conv_cols: columns written out, then one product on the matmul kernels */
    CONV_TW,   /* conv_tw: the implicit GEMM on wgmma, fed by the copy engine (sm_90) */
} conv_path;

/* f16/bf16, 1-D/2-D, one group, a multiple of q input channels. */
static bool conv_half_plain(const em_op *op, const conv_arg *g, int64_t Cx, int64_t G, int64_t q)
{
    em_dtype dt = op->out[0]->dtype;
    return op->kind == EM_OP_CONV && (dt == EM_F16 || dt == EM_BF16) && G == 1 && Cx % q == 0 &&
           g->img[0] == 1 && g->k[0] == 1;
}

/* The path for a CONV: config cuda_conv_kernel = mma, columns or wgmma asks for one (taken
 * where the shape allows it, else mma); auto (the default) takes wgmma where it applies (sm_90,
 * stride 1, input channels a multiple of 64) for at least 64 output channels, else columns for
 * at least 128 output channels on sm_90, else mma, as measured on an H200 (bench/RESULTS.md);
 * both only for at least 64 output positions per image (a weight gradient's convolution, with
 * the kernel's few taps as its output, would leave the column tiles nearly empty). */
static conv_path conv_choose(int dev, const em_op *op, const conv_arg *g, int64_t Cx, int64_t Cy,
                             int64_t G)
{
    int64_t L = g->blk[1] * g->blk[2], rows = g->n * L, K = Cx * g->k[1] * g->k[2];
    bool cols =
        conv_half_plain(op, g, Cx, G, 8) && rows * K * 2 <= CONV_COLS_MAX && (L + 31) / 32 <= 65535;
    bool tw = conv_half_plain(op, g, Cx, G, 64) && g->s[1] == 1 && g->s[2] == 1 &&
              wgmma_device(dev) && cuda_drv.cuTensorMapEncodeTiled;
    const char *v = em_config_get("cuda_conv_kernel");
    if (v && !strcmp(v, "mma")) return CONV_MMA;
    if (v && !strcmp(v, "columns")) return cols ? CONV_COLS : CONV_MMA;
    if (v && !strcmp(v, "wgmma")) return tw ? CONV_TW : CONV_MMA;
    if (L < 64) return CONV_MMA;
    if (tw && Cy >= 64) return CONV_TW;
    return cols && wgmma_device(dev) && Cy >= 128 ? CONV_COLS : CONV_MMA;
}

/* y = conv(x, w) + b, x, w, b and y contiguous f16/bf16, as one product on the matmul kernels
 * (the wgmma kernel on sm_90): x to channels-last, its columns written out as
 * cols [N OH OW][Kh Kw Cin] (em_im2col_cl_u16), w to [Cout][Kh Kw Cin]; then
 * t [N OH OW][Cout] = cols w^T (+ b in the product's store; f32 accumulation, one rounding), and
 * t transposed into y [N][Cout][OH OW]. Costs the columns' memory (Kh Kw times x's, pooled). */
static em_status conv_cols(int dev, const em_tensor *x, const em_tensor *w, const em_tensor *b,
                           const em_tensor *y, const conv_arg *g, int64_t Cx, int64_t Cy,
                           const char *what)
{
    int64_t KH = g->k[1], KW = g->k[2], L = g->blk[1] * g->blk[2], rows = g->n * L;
    int64_t K = Cx * KH * KW;
    col_arg a = {(int32_t)g->img[1], (int32_t)g->img[2],
                 (int32_t)g->blk[1], (int32_t)g->blk[2],
                 (int32_t)KH,        (int32_t)KW,
                 (int32_t)g->s[1],   (int32_t)g->s[2],
                 (int32_t)g->p[1],   (int32_t)g->p[2],
                 (int32_t)g->d[1],   (int32_t)g->d[2],
                 (int32_t)(Cx / 8),  (int32_t)(rows * K / 8)};
    void *xcl = cuda_pool_alloc(dev, (size_t)tn_numel(x) * 2);
    void *wcl = xcl ? cuda_pool_alloc(dev, (size_t)tn_numel(w) * 2) : NULL;
    void *cols = wcl ? cuda_pool_alloc(dev, (size_t)(rows * K) * 2) : NULL;
    void *out = cols ? cuda_pool_alloc(dev, (size_t)(rows * Cy) * 2) : NULL;
    em_status st = out ? EM_OK : em_last_status();
    if (st == EM_OK) st = to_channels_last(dev, tn_ptr(x), xcl, g->n, Cx, a.H * a.W, what);
    if (st == EM_OK) st = to_channels_last(dev, tn_ptr(w), wcl, Cy, Cx, KH * KW, what);
    CUfunction f = st == EM_OK ? cuda_kernel(dev, "em_im2col_cl_u16", what) : NULL;
    if (st == EM_OK && !f) st = em_last_status();
    if (st == EM_OK) {
        void *params[] = {&xcl, &cols, &a};
        st = cuda_launch(dev, f, a.total, params, what);
    }
    if (st == EM_OK) { /* t [rows][Cy] = cols [rows][K] . wcl^T, wcl read as [K][Cy] (k-major) */
        em_storage cs = *y->storage, ws = *y->storage, os = *y->storage;
        cs.data = cols, ws.data = wcl, os.data = out;
        int64_t ash[2] = {rows, K}, ast[2] = {K, 1}, bsh[2] = {K, Cy}, bst[2] = {1, K};
        int64_t osh[2] = {rows, Cy}, ost[2] = {Cy, 1};
        em_tensor at = view3(&cs, y->dtype, 0, 2, ash, ast);
        em_tensor bt = view3(&ws, y->dtype, 0, 2, bsh, bst);
        em_tensor ot = view3(&os, y->dtype, 0, 2, osh, ost);
        em_op mm;
        memset(&mm, 0, sizeof mm);
        mm.kind = b ? EM_OP_MATMUL_BIAS_ACT : EM_OP_MATMUL;
        mm.n_in = b ? 3 : 2;
        mm.n_out = 1;
        mm.in[0] = &at, mm.in[1] = &bt, mm.in[2] = (em_tensor *)b, mm.out[0] = &ot;
        mm.i[2] = rows, mm.i[3] = K, mm.i[4] = Cy, mm.i[14] = EM_ACT_NONE;
        st = run_matmul(&mm, dev, what);
    }
    if (st == EM_OK) st = to_channels_last(dev, out, tn_ptr(y), g->n, L, Cy, what);
    /* stream order: the kernels above read these before any reuse */
    cuda_pool_free(dev, out);
    cuda_pool_free(dev, cols);
    cuda_pool_free(dev, wcl);
    cuda_pool_free(dev, xcl);
    return st;
}

typedef struct tw_conv_arg { /* matches `struct twconv` in kernels/matmul_wgmma.cu */
    int32_t Cout, OH, OW, KW, ph, pw, dh, dw, BW, BH, tw, th, ntiles, cpt, kts;
} tw_conv_arg;

/* x channels-last [N][H][W][C] (16-bit elements) read in boxes {64, bw, bh, 1} with the 128-byte
 * swizzle; elements off the image read as zero. */
static bool encode_tmap_image(cuda_tmap *m, const void *p, int64_t N, int64_t H, int64_t W,
                              int64_t C, unsigned bw, unsigned bh)
{
    uint64_t dims[4] = {(uint64_t)C, (uint64_t)W, (uint64_t)H, (uint64_t)N};
    uint64_t strides[3] = {(uint64_t)(C * 2), (uint64_t)(W * C * 2), (uint64_t)(H * W * C * 2)};
    unsigned box[4] = {64, bw, bh, 1}, es[4] = {1, 1, 1, 1};
    return cuda_drv.cuTensorMapEncodeTiled(m, 1, 4, (void *)p, dims, strides, box, es, 0, 3, 2,
                                           0) == 0;
}

/* conv_tw's column tiles of bn columns: boxes of BW output columns (OW split evenly into tw
 * parts of at most bn) and BH output rows (at most bn / BW, OH split evenly into th parts). */
static void tw_conv_tiles(tw_conv_arg *a, int64_t N, int64_t OH, int64_t OW, int64_t bn)
{
    int64_t tw = (OW + bn - 1) / bn, bw = (OW + tw - 1) / tw;
    int64_t most = bn / bw < OH ? bn / bw : OH, th = (OH + most - 1) / most;
    a->BW = (int32_t)bw, a->tw = (int32_t)tw, a->th = (int32_t)th;
    a->BH = (int32_t)((OH + th - 1) / th);
    a->ntiles = (int32_t)(N * th * tw);
}

/* y = conv(x, w) + b, x, w, b and y contiguous f16/bf16, stride 1, Cin % 64 == 0, on sm_90: x
 * and w to channels-last, then the implicit GEMM of kernels/matmul_wgmma.cu (em_conv_tw_*): the
 * copy engine loads each k tile's (one tap, 64 channels) column boxes straight from x, zero-
 * filling the padding; f32 accumulation, the bias added before the one rounding; y written in
 * place. Tiles of 256 columns unless 128-column ones take clearly fewer waves over the
 * multiprocessors (a 128-column tile taken to cost 0.55 of a 256-column one, as for matmul).
 * EM_ERR_UNSUPPORTED (nothing recorded) when the driver refuses an operand's tensor map. */
static em_status conv_tw(int dev, const em_tensor *x, const em_tensor *w, const em_tensor *b,
                         const em_tensor *y, const conv_arg *g, int64_t Cx, int64_t Cy,
                         const char *what)
{
    int64_t KH = g->k[1], KW = g->k[2], OH = g->blk[1], OW = g->blk[2];
    tw_conv_arg a[2];
    double cost[2];
    int64_t tm = (Cy + 127) / 128, sm = cuda_device(dev)->sm_count;
    for (int i = 0; i < 2; i++) {
        a[i] = (tw_conv_arg){.Cout = (int32_t)Cy,
                             .OH = (int32_t)OH,
                             .OW = (int32_t)OW,
                             .KW = (int32_t)KW,
                             .ph = (int32_t)g->p[1],
                             .pw = (int32_t)g->p[2],
                             .dh = (int32_t)g->d[1],
                             .dw = (int32_t)g->d[2],
                             .cpt = (int32_t)(Cx / 64),
                             .kts = (int32_t)(KH * KW * Cx / 64)};
        tw_conv_tiles(&a[i], g->n, OH, OW, i ? 128 : 256);
        cost[i] = (double)((tm * a[i].ntiles + sm - 1) / sm) * (i ? 0.55 : 1.0);
    }
    int narrow = cost[0] <= cost[1] ? 0 : 1;
    const tw_conv_arg *ga = &a[narrow];
    unsigned bn = narrow ? 128 : 256;
    void *xcl = cuda_pool_alloc(dev, (size_t)tn_numel(x) * 2);
    void *wcl = xcl ? cuda_pool_alloc(dev, (size_t)tn_numel(w) * 2) : NULL;
    em_status st = wcl ? EM_OK : em_last_status();
    int64_t H = g->img[1], W = g->img[2];
    if (st == EM_OK) st = to_channels_last(dev, tn_ptr(x), xcl, g->n, Cx, H * W, what);
    if (st == EM_OK) st = to_channels_last(dev, tn_ptr(w), wcl, Cy, Cx, KH * KW, what);
    cuda_tmap ma, mb;
    if (st == EM_OK &&
        (!encode_tmap(&ma, 2, wcl, KH * KW * Cx, Cy, KH * KW * Cx * 2, 64, 128) ||
         !encode_tmap_image(&mb, xcl, g->n, H, W, Cx, (unsigned)ga->BW, (unsigned)ga->BH)))
        st = EM_ERR_UNSUPPORTED; /* nothing recorded: run_conv takes the mma.sync kernel */
    char name[32];
    snprintf(name, sizeof name, "em_conv_tw_%s_%c", y->dtype == EM_BF16 ? "bf16" : "f16",
             narrow ? 'n' : 'w');
    CUfunction f = st == EM_OK ? cuda_kernel(dev, name, what) : NULL;
    if (st == EM_OK && !f) st = em_last_status();
    if (st == EM_OK) {
        void *yp = tn_ptr(y), *bp = b ? tn_ptr(b) : NULL;
        tw_conv_arg ar = *ga;
        void *params[] = {&ma, &mb, &yp, &bp, &ar};
        int64_t tiles = tm * ga->ntiles;
        unsigned grid[3] = {(unsigned)(tiles < sm ? tiles : sm), 1, 1}, block[3] = {384, 1, 1};
        unsigned smem = 4 * (128 + bn) * 128 + 1024 + 64; /* as run_tw's */
        st = cuda_launch_grid_smem(dev, f, grid, block, smem, params, what);
    }
    /* stream order: the kernels above read these before any reuse */
    cuda_pool_free(dev, wcl);
    cuda_pool_free(dev, xcl);
    return st;
}

/* The geometry of a CONV / CONV_TRANSPOSE record in 3 spatial dims (leading ones of size 1). */
static void conv_geometry(const em_op *op, conv_arg *g, bool tr)
{
    const em_tensor *x = op->in[0], *w = op->in[1], *y = op->out[0];
    int S = (int)op->i[0];
    bool unb = x->rank == S + 1;
    memset(g, 0, sizeof *g);
    for (int i = 0; i < 3; i++) {
        int j = i - (3 - S);
        int64_t xs = j >= 0 ? x->shape[x->rank - S + j] : 1,
                yss = j >= 0 ? y->shape[y->rank - S + j] : 1;
        g->img[i] = tr ? yss : xs; /* the image is the conv's input, the transpose's output */
        g->blk[i] = tr ? xs : yss;
        g->k[i] = j >= 0 ? w->shape[2 + j] : 1;
        g->s[i] = j >= 0 ? op->i[1 + j] : 1;
        g->p[i] = j >= 0 ? op->i[4 + j] : 0;
        g->d[i] = j >= 0 ? op->i[10 + j] : 1;
    }
    g->n = unb ? 1 : x->shape[0];
    g->c = tr ? y->shape[unb ? 0 : 1] : x->shape[unb ? 0 : 1];
}

/* CONV as im2col + a matmul batched over (sample, group) (+ bias), or the direct kernel for
 * fewer than 16 output channels per group; CONV_TRANSPOSE as that matmul + col2im (+ bias). Strided
 * inputs are packed first. CONV runs as the implicit GEMM (conv_igemm) where conv_igemm_ok
 * allows; f16/bf16 otherwise (and CONV_TRANSPOSE) in f32. */
static em_status run_conv(const em_op *op, int dev, const char *what)
{
    const em_tensor *y = op->out[0];
    bool tr = op->kind == EM_OP_CONV_TRANSPOSE;
    int S = (int)op->i[0];
    int64_t G = op->i[16] > 1 ? op->i[16] : 1;
    if (tn_numel(y) == 0) return EM_OK;
    bool half = y->dtype == EM_F16 || y->dtype == EM_BF16;
    em_tensor in[3], yt = *y;
    em_storage ins[3], ys;
    void *bufs[4] = {NULL, NULL, NULL, NULL};
    em_status st = EM_OK;
    bool unb = op->in[0]->rank == S + 1;
    conv_arg g;
    conv_geometry(op, &g, tr);
    int64_t N = g.n, Cx = op->in[0]->shape[unb ? 0 : 1], Cy = y->shape[unb ? 0 : 1];
    if (conv_igemm_ok(op, &g, Cx, Cy, G)) { /* f16/bf16 on the tensor cores, f32 exact */
        for (int i = 0; i < op->n_in; i++) in[i] = *op->in[i];
        for (int i = 0; i < op->n_in && st == EM_OK; i++)
            st = cuda_nn_stage(dev, op->in[i], false, &in[i], &ins[i], &bufs[i], what);
        const em_tensor *b = op->n_in > 2 ? &in[2] : NULL;
        conv_path path = conv_choose(dev, op, &g, Cx, Cy, G);
        if (st == EM_OK && path == CONV_TW) {
            st = conv_tw(dev, &in[0], &in[1], b, y, &g, Cx, Cy, what);
            if (st == EM_ERR_UNSUPPORTED) path = CONV_MMA, st = EM_OK;
        }
        if (st == EM_OK && path == CONV_COLS)
            st = conv_cols(dev, &in[0], &in[1], b, y, &g, Cx, Cy, what);
        else if (st == EM_OK && path == CONV_MMA)
            st = conv_igemm(dev, &in[0], &in[1], b, y, &g, Cx, Cy, G, what);
        for (int i = 0; i < 3; i++) cuda_pool_free(dev, bufs[i]);
        return st;
    }
    em_dtype cdt = half ? EM_F32 : y->dtype;
    for (int i = 0; i < op->n_in; i++) in[i] = *op->in[i];
    for (int i = 0; i < op->n_in && st == EM_OK; i++)
        st = cuda_nn_stage(dev, op->in[i], half, &in[i], &ins[i], &bufs[i], what);
    if (st == EM_OK && half) {
        bufs[3] = cuda_pool_alloc(dev, (size_t)tn_numel(y) * 4);
        if (!bufs[3]) st = em_last_status();
        ys = *y->storage;
        ys.data = bufs[3];
        yt.storage = &ys;
        yt.offset = 0;
        yt.dtype = EM_F32;
    }
    const em_tensor *x = &in[0], *w = &in[1];
    int64_t Kt = g.k[0] * g.k[1] * g.k[2], Lx = 1, Ly = 1;
    for (int i = 0; i < 3; i++) Lx *= tr ? g.blk[i] : g.img[i], Ly *= tr ? g.img[i] : g.blk[i];
    int64_t K = g.c * Kt, L = tr ? Lx : Ly;
    if (st == EM_OK && !tr && Cy / G < 16) { /* few outputs per group: the direct kernel */
        st = conv_direct(dev, x, w, op->n_in > 2 ? &in[2] : NULL, &yt, &g, Cy, G, what);
        if (st == EM_OK && half) st = cuda_nn_from_f32(dev, bufs[3], y, what);
        for (int i = 0; i < 4; i++) cuda_pool_free(dev, bufs[i]);
        return st;
    }
    void *cols =
        st == EM_OK ? cuda_pool_alloc(dev, (size_t)(N * K * L) * em_dtype_size(cdt) + 16) : NULL;
    if (st == EM_OK && !cols) st = em_last_status();
    em_storage cs = *y->storage;
    cs.data = cols;
    int64_t cshape[3] = {N, K, L}, cstr[3] = {K * L, L, 1};
    em_tensor ct = view3(&cs, cdt, 0, 3, cshape, cstr);
    if (st == EM_OK && !tr) {
        /* y[n, g] [Cy/G, L] = w[g] [Cy/G, K/G] . cols[n, g] [K/G, L] */
        st = launch_conv_kernel(dev, "im2col", cdt, tn_ptr(x), cols, &g, N * K * L, what);
        int64_t M = Cy / G, Kg = K / G;
        if (st == EM_OK)
            st = mm_groups(dev, w, M * Kg, Kg, 1, &ct, K * L, Kg * L, L, &yt, N, G, M, Kg, L, what);
    } else if (st == EM_OK) {
        /* cols[n, g] [Cy/G * Kt, Lx] = w[g]^T . x[n, g] [Cx/G, Lx], w[g] [Cx/G, Cy/G * Kt] */
        int64_t M = K / G, Cg = Cx / G;
        st = mm_groups(dev, w, Cg * M, 1, M, x, Cx * Lx, Cg * Lx, Lx, &ct, N, G, M, Cg, Lx, what);
        if (st == EM_OK)
            st = launch_conv_kernel(dev, "col2im", cdt, cols, tn_ptr(&yt), &g, tn_numel(y), what);
    }
    if (st == EM_OK && op->n_in > 2) st = bias_add(dev, &yt, &in[2], Cy, Ly, what);
    if (st == EM_OK && half) st = cuda_nn_from_f32(dev, bufs[3], y, what);
    /* stream order: the kernels above read these before any reuse */
    cuda_pool_free(dev, cols);
    for (int i = 0; i < 4; i++) cuda_pool_free(dev, bufs[i]);
    return st;
}

/* IM2COL / COL2IM (2-D, F.unfold / F.fold). */
static em_status run_fold(const em_op *op, int dev, const char *what)
{
    const em_tensor *x = op->in[0], *y = op->out[0];
    bool unfold = op->kind == EM_OP_IM2COL;
    const em_tensor *imgt = unfold ? x : y;
    conv_arg g;
    memset(&g, 0, sizeof g);
    g.img[0] = g.blk[0] = g.k[0] = g.s[0] = g.d[0] = 1;
    for (int j = 0; j < 2; j++) {
        g.k[1 + j] = op->i[j], g.d[1 + j] = op->i[2 + j], g.p[1 + j] = op->i[4 + j];
        g.s[1 + j] = op->i[6 + j], g.img[1 + j] = op->i[8 + j];
        g.blk[1 + j] =
            (g.img[1 + j] + 2 * g.p[1 + j] - g.d[1 + j] * (g.k[1 + j] - 1) - 1) / g.s[1 + j] + 1;
    }
    bool unb = imgt->rank == 3;
    g.n = unb ? 1 : imgt->shape[0];
    g.c = imgt->shape[unb ? 0 : 1];
    if (tn_numel(y) == 0) return EM_OK;
    /* f16/bf16: im2col moves 16-bit elements; col2im sums in f32 buffers (as the CPU does) */
    bool half = y->dtype == EM_F16 || y->dtype == EM_BF16;
    em_dtype ct = half && !unfold ? EM_F32 : x->dtype;
    const void *src = tn_ptr(x);
    void *tmp = NULL, *img = NULL;
    em_status st = EM_OK;
    if (ct != x->dtype || !tn_is_contiguous(x)) {
        tmp = cuda_pool_alloc(dev, (size_t)tn_numel(x) * em_dtype_size(ct));
        st = tmp ? cuda_index_to_contiguous(dev, x, ct, tmp, what) : em_last_status();
        src = tmp;
    }
    if (st == EM_OK && unfold && half) {
        CUfunction f = cuda_kernel(dev, "em_im2col_u16", what);
        void *yp = tn_ptr(y);
        void *params[] = {(void *)&src, &yp, &g};
        st = f ? cuda_launch(dev, f, tn_numel(y), params, what) : em_last_status();
    } else if (st == EM_OK && half) {
        img = cuda_pool_alloc(dev, (size_t)tn_numel(y) * sizeof(float));
        st = img ? launch_conv_kernel(dev, "col2im", EM_F32, src, img, &g, tn_numel(y), what)
                 : em_last_status();
        em_storage is = *y->storage;
        is.data = img;
        em_tensor it = *y;
        it.storage = &is, it.offset = 0, it.dtype = EM_F32;
        if (st == EM_OK) st = cuda_index_to_contiguous(dev, &it, y->dtype, tn_ptr(y), what);
    } else if (st == EM_OK) {
        st = launch_conv_kernel(dev, unfold ? "im2col" : "col2im", y->dtype, src, tn_ptr(y), &g,
                                tn_numel(y), what);
    }
    if (tmp) cuda_pool_free(dev, tmp); /* stream order: the kernels above read them first */
    if (img) cuda_pool_free(dev, img);
    return st;
}

typedef struct pool_arg { /* matches `struct poolg` in kernels/pool.cu */
    int64_t in[3], out[3], k[3], s[3], p[3], d[3];
    int64_t planes;
} pool_arg;

static em_status max_pool_contig(const em_op *op, const em_tensor *x, int dev, const char *what)
{
    const em_tensor *o = op->out[0];
    int nd = (int)op->i[0];
    pool_arg g;
    memset(&g, 0, sizeof g);
    int64_t in_plane = 1;
    for (int i = 0; i < 3; i++) {
        int j = i - (3 - nd); /* the op's spatial dims, right-aligned */
        g.in[i] = j >= 0 ? x->shape[x->rank - nd + j] : 1;
        g.out[i] = j >= 0 ? o->shape[o->rank - nd + j] : 1;
        g.k[i] = j >= 0 ? op->i[1 + j] : 1;
        g.s[i] = j >= 0 ? op->i[4 + j] : 1;
        g.p[i] = j >= 0 ? op->i[7 + j] : 0;
        g.d[i] = j >= 0 ? op->i[10 + j] : 1;
        in_plane *= g.in[i];
    }
    g.planes = in_plane ? tn_numel(x) / in_plane : 0;
    long long n = tn_numel(o);
    if (n == 0) return EM_OK;
    char name[40];
    const char *dn = o->dtype == EM_F16    ? "f16"
                     : o->dtype == EM_BF16 ? "bf16"
                                           : short_name(o->dtype);
    void *xp = tn_ptr(x), *yp = tn_ptr(o);
    void *ip = op->n_out > 1 && op->out[1] ? tn_ptr(op->out[1]) : NULL;
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
static em_status run_max_pool(const em_op *op, int dev, const char *what)
{
    const em_tensor *o = op->out[0];
    if (tn_numel(o) == 0) return EM_OK;
    em_tensor xc;
    em_storage xs;
    void *tmp = NULL;
    em_status st = cuda_nn_stage(dev, op->in[0], false, &xc, &xs, &tmp, what);
    if (st == EM_OK) st = max_pool_contig(op, &xc, dev, what);
    cuda_pool_free(dev, tmp); /* stream order: the pool has read it before any reuse */
    return st;
}

em_status cuda_matmul(const em_op *op, int dev, const char *what)
{
    return run_matmul(op, dev, what);
}

/* tn_dispatch calls this only for records be_supports accepted. */
static em_status be_exec(const em_op *op)
{
    char what[64];
    snprintf(what, sizeof what, "em_%s", em_op_name(op->kind));
    int dev = op->out[0]->storage->device.index;
    em_status st = cuda_enter(dev, what);
    if (st != EM_OK) return st;
    if (cuda_reduce_claims(op->kind)) return cuda_reduce_exec(op, dev, what);
    if (cuda_index_claims(op->kind)) return cuda_index_exec(op, dev, what);
    if (cuda_ew_claims(op->kind)) return cuda_ew_exec(op, dev, what);
    switch (op->kind) {
    case EM_OP_FILL: return run_fill(op, dev, what);
    case EM_OP_COPY: return run_copy(op, dev, what);
    case EM_OP_CONV:
    case EM_OP_CONV_TRANSPOSE: return run_conv(op, dev, what);
    case EM_OP_IM2COL:
    case EM_OP_COL2IM: return run_fold(op, dev, what);
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
    case EM_OP_MATMUL_BIAS_ACT: return run_matmul(op, dev, what);
    case EM_OP_SDPA:
    case EM_OP_SDPA_BACKWARD: return cuda_attn_exec(op, dev, what);
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
};
