/* The float MATMUL records on the CUDA backend: the kernel chosen per shape, dtype and device
 * (wgmma fed by the copy engine on sm_90, mma.sync tensor cores, the exact f32 kernels with
 * split-K, matrix-vector kernels, the f64 and any-stride kernels), and the wgmma tile width
 * tuned on first use and cached on disk. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"
#include "cuda_conv.h"
#include "cuda_matmul.h"
#include "cuda_nn.h"

typedef cuda_mm_geom mm_arg;

void cuda_mm_geometry(const ir_op *op, cuda_mm_geom *s)
{
    const ir_tensor *a = op->in[0], *b = op->in[1];
    memset(s, 0, sizeof *s);
    const em_p_matmul *mp = &op->p.matmul;
    bool a1 = mp->a_vec, b1 = mp->b_vec;
    s->M = mp->M, s->K = mp->K, s->N = mp->N, s->R = mp->batch_rank;
    s->nbatch = 1;
    for (int d = 0; d < s->R; d++) {
        s->bshape[d] = mp->batch[d];
        s->nbatch *= s->bshape[d];
        int ad = d - (s->R - (a->rank - 2)), bd = d - (s->R - (b->rank - 2));
        s->ast[d] = a1 || ad < 0 || a->shape[ad] == 1 ? 0 : a->strides[ad];
        s->bst[d] = b1 || bd < 0 || b->shape[bd] == 1 ? 0 : b->strides[bd];
    }
    s->sam = a1 ? 0 : a->strides[a->rank - 2];
    s->sak = a->strides[a->rank - 1];
    s->sbk = b1 ? b->strides[0] : b->strides[b->rank - 2];
    s->sbn = b1 ? 0 : b->strides[b->rank - 1];
    /* b shared by every batch entry, and a's batch entries whole [M, K] blocks of rows one after
     * the other (a contiguous [.., M, K]): the batch folds into M, one 2-D product of
     * nbatch * M rows (the output is contiguous). The Hopper kernels take 2-D products only,
     * and short products fill the tiles badly: a linear layer's [16, 64, 256] @ [256, 8192]
     * runs far slower as a batch than as the one product [1024, 256] @ [256, 8192]. */
    bool fold = s->R > 0 && !a1 && s->M > 0;
    int64_t step = s->M * s->sam;
    for (int d = s->R - 1; d >= 0 && fold; d--) {
        fold = s->bshape[d] == 1 || (s->bst[d] == 0 && s->ast[d] == step);
        step *= s->bshape[d];
    }
    if (fold) {
        s->M *= s->nbatch;
        s->nbatch = 1;
        s->R = 0;
    }
    if (op->kind == EM_OP_MATMUL_BIAS_ACT) {
        s->ep.on = 1;
        s->ep.act = (int)mp->act;
        if (op->n_in > 2) s->ep.bias = ir_ptr(op->in[2]), s->ep.bs = op->in[2]->strides[0];
        if (op->n_out > 1) s->ep.pre = ir_ptr(op->out[1]);
    }
}

/* Whether the tensor-core kernels can read both operands: each has a unit-stride dim (the
 * 16-byte chunks run along it), that dim's extent, the other stride and the batch strides are
 * multiples of 8 elements, and the bases are 16-byte aligned. *at: A is m-contiguous; *bt: B
 * is k-contiguous (a transposed weight). */
static bool tc_layout(const ir_op *op, const mm_arg *s, int *at, int *bt, int64_t q)
{
    const ir_tensor *a = op->in[0], *b = op->in[1];
    if (((uintptr_t)ir_ptr(a) | (uintptr_t)ir_ptr(b)) & 15) return false;
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
bool cuda_wgmma_device(int dev)
{
    const cuda_device_info *d = cuda_device(dev);
    if (!core_cfg_bool(CFG_CUDA_WGMMA)) return false;
    return d && d->cc_major == 9 && d->cc_minor == 0;
}

/* The Hopper kernels take one 2-D product (no batch) with int-sized dims. */
static bool hopper_2d_ok(int dev, const mm_arg *s)
{
    return cuda_wgmma_device(dev) && s->nbatch == 1 && s->K > 0 && s->M < INT32_MAX &&
           s->N < INT32_MAX && s->K < INT32_MAX;
}

/* The wgmma kernels also want both sides at least 64. */
static bool wgmma_ok(int dev, const mm_arg *s)
{
    return hopper_2d_ok(dev, s) && s->M >= 64 && s->N >= 64;
}

/* Output tiles of 128 x 128 in the product s. */
static int64_t tiles128(const mm_arg *s)
{
    return ((s->M + 127) / 128) * ((s->N + 127) / 128);
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

/* A 2-D operand [outer][inner] (rows ld_bytes apart) read in boxes of box_in x box_out elements
 * with the 128-byte swizzle; elements past the edges read as zero. */
bool cuda_encode_tmap(cuda_tmap *m, int esz, const void *p, int64_t inner, int64_t outer,
                      int64_t ld_bytes, unsigned box_in, unsigned box_out)
{
    return cuda_encode_tmap_swizzle(m, esz, p, inner, outer, ld_bytes, box_in, box_out, true);
}

bool cuda_encode_tmap_swizzle(cuda_tmap *m, int esz, const void *p, int64_t inner, int64_t outer,
                              int64_t ld_bytes, unsigned box_in, unsigned box_out, bool swizzle)
{
    /* CU_TENSOR_MAP_DATA_TYPE_ UINT16 = 1, FLOAT32 = 7: the copy moves bits */
    uint64_t dims[2] = {(uint64_t)inner, (uint64_t)outer}, strides[1] = {(uint64_t)ld_bytes};
    unsigned box[2] = {box_in, box_out}, es[2] = {1, 1};
    /* no interleave, CU_TENSOR_MAP_SWIZZLE_128B = 3 (or NONE = 0), L2 promotion 128B = 2, zero
     * fill */
    return cuda_drv.cuTensorMapEncodeTiled(m, esz == 2 ? 1 : 7, 2, (void *)p, dims, strides, box,
                                           es, 0, swizzle ? 3 : 0, 2, 0) == 0;
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

/* Whether a TF32 product runs transposed (C^T = B^T A^T, B stored [K][N] read as X): then N is
 * tiled by 128 rows and M by 256 or 128 columns. */
static bool tw_swapped(const tw_args *t)
{
    return t->esz == 4 && t->bn;
}

/* The launch of a wgmma kernel: one block per multiprocessor at most, 384 threads, and 4 stages
 * of a 128-row tile and a bnw-row tile of 128 bytes each, the 1024-byte alignment slack and the
 * 8 mbarriers of shared memory. */
static em_status launch_tw(const tw_args *t, CUfunction f, void **params, int64_t tiles,
                           unsigned bnw)
{
    const cuda_device_info *d = cuda_device(t->dev);
    unsigned grid[3] = {(unsigned)(tiles < d->sm_count ? tiles : d->sm_count), 1, 1};
    unsigned block[3] = {384, 1, 1};
    unsigned smem = 4 * (128 + bnw) * 128 + 1024 + 64;
    return cuda_launch_grid_smem(t->dev, f, grid, block, smem, params, t->what);
}

/* TF32 with one MN-major operand (wgmma takes TF32 K-major only): em_mm_tw_tf32_mk<w|n> (A
 * stored [K][M]) or _kn<w|n> (B stored [K][N]), which load that operand, X, into registers and
 * tile its dimension R by 128 rows, the other operand's, C, by 256 or 128 columns. */
static em_status run_tw_rs(const tw_args *t, bool wide)
{
    const bool sw = tw_swapped(t); /* X is B */
    unsigned bnw = wide ? 256 : 128;
    int64_t R = sw ? t->N : t->M, C = sw ? t->M : t->N;
    int64_t ldx = sw ? t->ldb : t->lda, ldy = sw ? t->lda : t->ldb;
    const void *xp = sw ? t->bp : t->ap, *yp = sw ? t->ap : t->bp;
    int64_t tiles = (R + 127) / 128 * ((C + bnw - 1) / bnw);
    cuda_tmap mx, my;
    if (!cuda_encode_tmap(&mx, 4, xp, R, t->K, ldx * 4, 32, 32) ||
        !cuda_encode_tmap(&my, 4, yp, t->K, C, ldy * 4, 32, bnw)) {
        em_log_msg("cuda", EM_LOG_INFO, "%s: cuTensorMapEncodeTiled refused an operand", t->what);
        return EM_ERR_UNSUPPORTED;
    }
    char name[40];
    snprintf(name, sizeof name, "em_mm_tw_tf32_%s%c", sw ? "kn" : "mk", wide ? 'w' : 'n');
    CUfunction f = cuda_kernel(t->dev, name, t->what);
    if (!f) return em_last_status();
    void *cp = t->cp;
    int ri = (int)R, ci = (int)C, ki = (int)t->K;
    cuda_mm_epi ep = t->ep;
    void *params[] = {&mx, &my, &cp, &ri, &ci, &ki, &ep};
    return launch_tw(t, f, params, tiles, bnw);
}

/* Launches em_mm_tw_<type>_<a><b><w|n> with 256-column (wide) or 128-column tiles;
 * EM_ERR_UNSUPPORTED (nothing recorded) when the driver refuses an operand's tensor map. */
static em_status run_tw(const tw_args *t, bool wide)
{
    if (t->esz == 4 && (t->am || t->bn)) return run_tw_rs(t, wide);
    unsigned bnw = wide ? 256 : 128, bke = 128 / (unsigned)t->esz;
    int64_t tiles = (t->M + 127) / 128 * ((t->N + bnw - 1) / bnw);
    cuda_tmap ma, mb;
    bool ok = t->am ? cuda_encode_tmap(&ma, t->esz, t->ap, t->M, t->K, t->lda * t->esz, 64, bke)
                    : cuda_encode_tmap(&ma, t->esz, t->ap, t->K, t->M, t->lda * t->esz, bke, 128);
    ok =
        ok && (t->bn ? cuda_encode_tmap(&mb, t->esz, t->bp, t->N, t->K, t->ldb * t->esz, 64, bke)
                     : cuda_encode_tmap(&mb, t->esz, t->bp, t->K, t->N, t->ldb * t->esz, bke, bnw));
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
    return launch_tw(t, f, params, tiles, bnw);
}

/* ---- the tile width, tuned on first use ------------------------------------------------------
 * With config cuda_autotune on (the default), a product shape (type, layouts, M, N, K) of at
 * least 2^30 multiply-adds first runs both tile widths (a warm-up, then the best of five timed
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

/* The rule's width for t: 256-column tiles unless 128-column ones take clearly fewer waves over
 * the multiprocessors (a 128-column tile is taken to cost 0.55 of a 256-column one). */
static bool width_rule(const tw_args *t)
{
    const bool swap = tw_swapped(t);
    const int64_t rows = swap ? t->N : t->M, cols = swap ? t->M : t->N;
    int64_t tm = (rows + 127) / 128, sm = cuda_device(t->dev)->sm_count;
    int64_t waves_w = (tm * ((cols + 255) / 256) + sm - 1) / sm;
    int64_t waves_n = (tm * ((cols + 127) / 128) + sm - 1) / sm;
    return (double)waves_w <= 0.55 * (double)waves_n;
}

/* 256-column tiles (wide) or 128-column ones for t: the tuner's trials overrule the rule only
 * when the other width ran at least 3 % faster: the trials run on a GPU whose clock may still be
 * rising, where a narrow lead of one width can turn into a clear loss once the clock settles. */
static bool tile_width(const tw_args *t)
{
    if (core_cfg_is(CFG_CUDA_MM_TILE, "wide")) return true;
    if (core_cfg_is(CFG_CUDA_MM_TILE, "narrow")) return false;
    bool tune = core_cfg_bool(CFG_CUDA_AUTOTUNE);
    if (tune && (double)t->M * (double)t->N * (double)t->K >= 1073741824.0) {
        pthread_mutex_lock(&tune_lock);
        tune_read(t->dev);
        const tune_entry *e = tune_find(t);
        int wide = e ? e->wide : -1;
        /* not while capturing a graph (the trials synchronise): an earlier result or the rule */
        if (wide < 0 && !cuda_capture_pool(t->dev)) {
            double tn, tw;
            uint64_t mark = core_error_mark();
            if (time_widths(t, &tn, &tw)) {
                tune_entry n = {.am = t->am, .bn = t->bn, .M = t->M, .N = t->N, .K = t->K};
                snprintf(n.type, sizeof n.type, "%s", t->type);
                bool rule = width_rule(t);
                n.wide = wide = rule ? !(tn < 0.97 * tw) : tw < 0.97 * tn;
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
            } else {
                core_error_forget(mark); /* a failed trial: the rule decides, the run reports */
            }
        }
        pthread_mutex_unlock(&tune_lock);
        if (wide >= 0) return wide;
    }
    return width_rule(t);
}

/* f16/bf16 (or f32 on TF32) product on the TMA wgmma kernel. K-major or MN-major operands are
 * read in place (TF32 reads one MN-major operand through registers, run_tw_rs; with both MN-major,
 * B is transposed into a pooled buffer first). EM_ERR_UNSUPPORTED (nothing recorded) when the
 * layout does not fit. */
static em_status run_wgmma(const ir_op *op, const mm_arg *s, int dev, const char *what)
{
    const ir_tensor *a = op->in[0], *b = op->in[1], *o = op->out[0];
    const bool tf32 = o->dtype == EM_F32;
    if (!cuda_drv.cuTensorMapEncodeTiled) return EM_ERR_UNSUPPORTED;
    const int esz = tf32 ? 4 : 2;
    const void *ap = ir_ptr(a), *bp = ir_ptr(b);
    if (((uintptr_t)ap | (uintptr_t)bp) & 15) return EM_ERR_UNSUPPORTED;
    int am = tma_major(s->sam, s->sak, esz), bn = tma_major(s->sbn, s->sbk, esz);
    if (am < 0 || bn < 0) return EM_ERR_UNSUPPORTED;
    int64_t M = s->M, N = s->N, K = s->K;
    int64_t lda = am ? s->sak : s->sam, ldb = bn ? s->sbk : s->sbn;
    void *tmpb = NULL;
    em_status st = EM_OK;
    if (tf32 && am && bn) { /* B [K][N] -> [N][K]: one MN-major operand is read in place */
        if (K % 4) return EM_ERR_UNSUPPORTED;
        tmpb = cuda_pool_alloc(dev, (size_t)(N * K) * 4);
        if (!tmpb) return em_last_status();
        st = transpose4(dev, bp, tmpb, K, N, ldb, what);
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
                     .cp = ir_ptr(o),
                     .M = M,
                     .N = N,
                     .K = K,
                     .lda = lda,
                     .ldb = ldb,
                     .ep = s->ep,
                     .what = what};
        st = run_tw(&t, tile_width(&t));
    }
    cuda_pool_free(dev, tmpb); /* stream order: the product has read it before any reuse */
    return st;
}

/* 128 x 256 block tiles (warps of 64 x 64) for f16/bf16 when there are at least two waves of
 * them on 132 multiprocessors; config cuda_mm_tile = narrow / wide forces one. */
static bool wide_tiles(const mm_arg *s)
{
    if (core_cfg_is(CFG_CUDA_MM_TILE, "wide")) return true;
    if (core_cfg_is(CFG_CUDA_MM_TILE, "narrow")) return false;
    return ((s->M + 127) / 128) * ((s->N + 255) / 256) * s->nbatch >= 264;
}

/* f32 matmul on TF32 tensor cores (10-bit mantissa operands) when the config key cuda_tf32 is
 * on; off by default, as in PyTorch. */
bool cuda_tf32_allowed(void)
{
    return core_cfg_bool(CFG_CUDA_TF32);
}

/* Split-K for f32 products whose block tiles would leave multiprocessors idle: the K dim is
 * cut into `parts` equal slices, run as an extra batch dim into a pooled f32 buffer, and the
 * slices are summed in order (deterministic), the epilogue applied by the sum. tile: the block
 * tile's side.
 * - 128 (one 8-warp block per multiprocessor): the count whose waves over the multiprocessors
 *   waste the least, each extra slice taken to cost 10 % (fitted to square products: a split
 *   pays where it fills a nearly empty last wave, not where the waves are nearly whole).
 * - 64 (2-warp blocks, up to 6 per multiprocessor): split only below one block each, into
 *   slices enough for 4 (with a block or more per multiprocessor the slices' extra reads and
 *   sum cost more than the fuller waves save).
 * Slices are multiples of 8 and at least 128 long. Config cuda_split_k = n forces n slices where
 * K allows them (1: never split). Returns 1 when the product is wide enough already or K too
 * short to cut. */
static int split_k_parts(int dev, const mm_arg *s, int tile)
{
    const cuda_device_info *d = cuda_device(dev);
    int64_t blocks = ((s->M + tile - 1) / tile) * ((s->N + tile - 1) / tile) * s->nbatch;
    int64_t sms = d->sm_count;
    int force = (int)core_cfg_int(CFG_CUDA_SPLIT_K); /* 1-16; 0: auto */
    if (s->R >= 8 || (force < 1 && s->K < 512)) return 1;
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

/* ---- exact f32 fed by the copy engine (em_mm_sgt_<a><b>, kernels/matmul_sgt.cu) -------------
 * On sm_90, one product (no batch) with at least one 128 x 128 tile per multiprocessor that the
 * K split would leave whole (split_k_parts 1), both operands in a layout a tensor map takes
 * (16-byte aligned base, unit stride along one dim, the other a multiple of 4 floats): there it
 * is faster than em_mm_sgemm_v4 (bench/RESULTS.md). Products with fewer tiles keep the 64-tile or
 * split-K kernels (1536^3: three slices). Config cuda_f32_tma: off never, on wherever the layout
 * fits (tests), unset: the rule. */
static bool sgt_ok(int dev, const mm_arg *s)
{
    if (core_cfg_is(CFG_CUDA_F32_TMA, "off")) return false;
    const bool force = core_cfg_is(CFG_CUDA_F32_TMA, "on");
    if (!hopper_2d_ok(dev, s) || !cuda_drv.cuTensorMapEncodeTiled) return false;
    return force || (tiles128(s) >= cuda_device(dev)->sm_count && split_k_parts(dev, s, 128) == 1);
}

/* The product on em_mm_sgt_<a><b>: one block of 384 threads per multiprocessor (at most one per
 * tile), 4 stages of 32 KiB. EM_ERR_UNSUPPORTED (nothing recorded) when the layout does not fit. */
static em_status run_sgt(const ir_op *op, const mm_arg *s, int dev, const char *what)
{
    const void *ap = ir_ptr(op->in[0]), *bp = ir_ptr(op->in[1]);
    if (((uintptr_t)ap | (uintptr_t)bp) & 15) return EM_ERR_UNSUPPORTED;
    int am = tma_major(s->sam, s->sak, 4), bn = tma_major(s->sbn, s->sbk, 4);
    if (am < 0 || bn < 0) return EM_ERR_UNSUPPORTED;
    const int64_t M = s->M, N = s->N, K = s->K;
    /* k-contiguous: boxes of 32 k x 128 rows, swizzled; else 128 x 32 k, unswizzled */
    cuda_tmap ma, mb;
    bool ok = am ? cuda_encode_tmap_swizzle(&ma, 4, ap, M, K, s->sak * 4, 128, 32, false)
                 : cuda_encode_tmap(&ma, 4, ap, K, M, s->sam * 4, 32, 128);
    ok = ok && (bn ? cuda_encode_tmap_swizzle(&mb, 4, bp, N, K, s->sbk * 4, 128, 32, false)
                   : cuda_encode_tmap(&mb, 4, bp, K, N, s->sbn * 4, 32, 128));
    if (!ok) {
        em_log_msg("cuda", EM_LOG_INFO, "%s: cuTensorMapEncodeTiled refused an operand", what);
        return EM_ERR_UNSUPPORTED;
    }
    char name[40];
    snprintf(name, sizeof name, "em_mm_sgt_%c%c", am ? 'm' : 'k', bn ? 'n' : 'k');
    CUfunction f = cuda_kernel(dev, name, what);
    if (!f) return em_last_status();
    const int64_t tiles = tiles128(s), sms = cuda_device(dev)->sm_count;
    unsigned grid[3] = {(unsigned)(tiles < sms ? tiles : sms), 1, 1}, block[3] = {384, 1, 1};
    void *cp = ir_ptr(op->out[0]);
    int mi = (int)M, ni = (int)N, ki = (int)K;
    cuda_mm_epi ep = s->ep;
    void *params[] = {&ma, &mb, &cp, &mi, &ni, &ki, &ep};
    return cuda_launch_grid_smem(dev, f, grid, block, 4 * 32768 + 1024 + 64, params, what);
}

/* The exact f32 kernels' block tile for s: 128 x 128 when there are two of those per
 * multiprocessor, or nine tenths of one and K >= 1024, or K >= 4096 (cut into slices, split_k_parts
 * on 128 tiles); else 64 x 64 (more, smaller blocks for a transformer's [512, 768] x [768, 768]: 24
 * tiles of 128 on 132 multiprocessors). With enough tiles, or a long K that fills nearly one
 * wave of them or is cut into slices (a language model's output layer: its weight gradient
 * [8192, 1024] x [1024, 256], 128 tiles of 128, and input gradient [1024, 8192] x [8192, 256]),
 * 128 tiles are faster (bench/RESULTS.md). Shorter K with one or two tiles per multiprocessor (a
 * weight gradient [3072, 512] x [512, 768]) has no evidence for 128 tiles and keeps 64. Config
 * cuda_f32_tile = 64 / 128 forces one. */
static int sgemm_tile(int dev, const mm_arg *s)
{
    if (core_cfg_is(CFG_CUDA_F32_TILE, "64")) return 64;
    if (core_cfg_is(CFG_CUDA_F32_TILE, "128")) return 128;
    int64_t blocks = tiles128(s) * s->nbatch;
    int64_t sms = cuda_device(dev)->sm_count;
    return blocks >= 2 * sms || (10 * blocks >= 9 * sms && s->K >= 1024) || s->K >= 4096 ? 128 : 64;
}

/* The f32 kernel for s: em_mm_sgemm_v4_<a><b> (16-byte loads; a = k or m, the contiguous dim of
 * A, b = k or n for B; suffix _t64 for tile 64) when both operands' contiguous dims, other
 * strides and batch strides are positive multiples of 4 floats and the bases 16-byte aligned,
 * else em_mm_sgemm (any strides, 128 x 128 tiles only). Returns the kernel's tile side. */
static int sgemm_name(const ir_op *op, const mm_arg *s, int tile, char name[40])
{
    const void *ap = ir_ptr(op->in[0]), *bp = ir_ptr(op->in[1]);
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
static em_status run_split_k(const ir_op *op, const mm_arg *s, int parts, int tile, int dev,
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
    void *ap = ir_ptr(op->in[0]), *bp = ir_ptr(op->in[1]), *wp = ws, *cp = ir_ptr(op->out[0]);
    void *params[] = {&ap, &bp, &wp, &t};
    int at = 0, bt = 0;
    bool tf32 = cuda_tf32_allowed() && tc_layout(op, &t, &at, &bt, 4);
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
 * many (up to 64) as it takes to give every multiprocessor two blocks (config cuda_gemv_parts: a
 * fixed count), their sums added in slice order. */
static em_status run_gemv(const ir_op *op, const mm_arg *s, int dev, const char *what)
{
    const ir_tensor *o = op->out[0];
    const char *tn = o->dtype == EM_F32 ? "f32" : o->dtype == EM_F16 ? "f16" : "bf16";
    void *ap = ir_ptr(op->in[0]), *bp = ir_ptr(op->in[1]), *cp = ir_ptr(o);
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
    int64_t forced = core_cfg_int(CFG_CUDA_GEMV_PARTS); /* 1-64: that many slices; 0: auto */
    if (forced >= 1 && forced <= 64) parts = (int)forced;
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
static em_status mm_product(const ir_op *op, const mm_arg *ps, int dev, const char *what,
                            bool *fused)
{
    const ir_tensor *a = op->in[0], *b = op->in[1], *o = op->out[0];
    mm_arg s = *ps;
    *fused = false;
    if ((s.M == 1 || s.N == 1) && (o->dtype == EM_F32 || o->dtype == EM_F16 || o->dtype == EM_BF16))
        return run_gemv(op, &s, dev, what);
    void *ap = ir_ptr(a), *bp = ir_ptr(b), *cp = ir_ptr(o);
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
        if (cuda_tf32_allowed() && wgmma_ok(dev, &s)) {
            em_status st = run_wgmma(op, &s, dev, what);
            *fused = true;
            if (st != EM_ERR_UNSUPPORTED) return st;
            *fused = false;
        }
        bool tf32 = cuda_tf32_allowed() && tc_layout(op, &s, &at, &bt, 4);
        if (tf32 && split_k_parts(dev, &s, 128) == 1) {
            snprintf(name, sizeof name, "em_mm_tf32_%c%c", at ? 't' : 'n', bt ? 't' : 'n');
            CUfunction f = cuda_kernel(dev, name, what);
            if (!f) return em_last_status();
            /* 3 stages of two 128 x 32 float tiles, rows padded to 36 (matmul.cu) */
            return cuda_launch_grid_smem(dev, f, grid, block, 3 * 2 * 128 * 36 * 4, params, what);
        }
        if (!tf32 && sgt_ok(dev, &s)) {
            em_status st = run_sgt(op, &s, dev, what);
            *fused = true;
            if (st != EM_ERR_UNSUPPORTED) return st;
            *fused = false;
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
        snprintf(name, sizeof name, "em_matmul_%s", cuda_short_name(o->dtype));
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
static em_status run_matmul(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *o = op->out[0];
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
                                   : cuda_short_name(o->dtype));
    CUfunction f = cuda_kernel(dev, name, what);
    if (!f) return em_last_status();
    void *cp = ir_ptr(o);
    void *params[] = {&cp, &s};
    return cuda_launch(dev, f, s.nbatch * s.M * s.N, params, what);
}

em_status cuda_matmul(const ir_op *op, int dev, const char *what)
{
    return run_matmul(op, dev, what);
}

/* tn_dispatch calls this only for records be_supports accepted. */
