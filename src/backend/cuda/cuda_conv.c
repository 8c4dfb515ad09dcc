/* The CUDA backend's convolutions: CONV and CONV_TRANSPOSE (the implicit GEMMs on mma.sync and
 * on wgmma, the columns + one product path, im2col + the batched matmul, the direct kernel for
 * few outputs per group) and IM2COL / COL2IM (F.unfold / F.fold); kernels in kernels/conv.cu,
 * conv_nn.cu, matmul_conv.cu, matmul_sgt.cu and matmul_wgmma.cu. */
#include <stdio.h>
#include <string.h>

#include "cuda.h"
#include "cuda_conv.h"
#include "cuda_index.h"
#include "cuda_nn.h"

typedef struct conv_arg { /* matches `struct convg` in kernels/conv.cu */
    int64_t img[3], blk[3], k[3], s[3], p[3], d[3];
    int64_t n, c;
} conv_arg;

/* A view of device memory data (its first element), rank <= 4, given shape and strides. */
static ir_tensor view3(void *data, em_device dev, em_dtype dt, int rank, const int64_t *shape,
                       const int64_t *strides)
{
    ir_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.device = dev;
    t.dtype = dt;
    t.rank = rank;
    for (int d = 0; d < rank; d++) t.shape[d] = shape[d], t.strides[d] = strides[d];
    return t;
}

static em_status launch_conv_kernel(int dev, const char *fam, em_dtype dt, const void *in,
                                    void *out, const conv_arg *g, long long n, const char *what)
{
    char name[32];
    snprintf(name, sizeof name, "em_%s_%s", fam, cuda_short_name(dt));
    CUfunction f = cuda_kernel(dev, name, what);
    if (!f) return em_last_status();
    void *params[] = {(void *)&in, &out, (void *)g};
    return cuda_launch(dev, f, n, params, what);
}

static em_status bias_add(int dev, const ir_tensor *y, const ir_tensor *b, long long c, long long L,
                          const char *what)
{
    char name[32];
    snprintf(name, sizeof name, "em_bias_add_%s", cuda_short_name(y->dtype));
    CUfunction f = cuda_kernel(dev, name, what);
    if (!f) return em_last_status();
    long long total = ir_numel(y);
    void *yp = ir_ptr(y), *bp = ir_ptr(b);
    void *params[] = {&yp, &bp, &c, &L, &total};
    return cuda_launch(dev, f, total, params, what);
}

/* C[n, g] = A[g] . B[n, g] through cuda_matmul: A [G, M, K] (a_g: its group stride), B [N, G, K, L]
 * (strides b_n, b_g, b_k), C contiguous [N, G, M, L]. */
static em_status mm_groups(int dev, const ir_tensor *A, int64_t a_g, int64_t a_m, int64_t a_k,
                           const ir_tensor *B, int64_t b_n, int64_t b_g, int64_t b_k, ir_tensor *C,
                           int64_t N, int64_t G, int64_t M, int64_t K, int64_t L, const char *what)
{
    int64_t ash[4] = {1, G, M, K}, ast[4] = {0, a_g, a_m, a_k};
    int64_t bsh[4] = {N, G, K, L}, bst[4] = {b_n, b_g, b_k, 1};
    int64_t csh[4] = {N, G, M, L}, cst[4] = {G * M * L, M * L, L, 1};
    ir_tensor at = view3(A->data, A->device, A->dtype, 4, ash, ast);
    ir_tensor bt = view3(B->data, B->device, B->dtype, 4, bsh, bst);
    ir_tensor ct = view3(C->data, C->device, C->dtype, 4, csh, cst);
    ir_op mm;
    memset(&mm, 0, sizeof mm);
    mm.kind = EM_OP_MATMUL;
    mm.n_in = 2;
    mm.n_out = 1;
    mm.in[0] = &at, mm.in[1] = &bt, mm.out[0] = &ct;
    mm.p.matmul = (em_p_matmul){.M = M, .K = K, .N = L, .batch_rank = 2, .batch = {N, G}};
    return cuda_matmul(&mm, dev, what);
}

/* CONV with few output channels per group (depthwise ...): one thread per output (conv_nn.cu). */
static em_status conv_direct(int dev, const ir_tensor *x, const ir_tensor *w, const ir_tensor *b,
                             const ir_tensor *y, const conv_arg *g, long long cout, long long G,
                             const char *what)
{
    CUfunction f = cuda_kernel(
        dev, y->dtype == EM_F64 ? "em_nn_conv_direct_f64" : "em_nn_conv_direct_f32", what);
    if (!f) return em_last_status();
    void *xp = ir_ptr(x), *wp = ir_ptr(w), *bp = b ? ir_ptr(b) : NULL, *yp = ir_ptr(y);
    void *params[] = {&xp, &wp, &bp, &yp, (void *)g, &cout, &G};
    return cuda_launch(dev, f, ir_numel(y), params, what);
}

typedef struct conv_ig_arg { /* matches `struct convig` in kernels/matmul_conv.cu */
    int32_t H, W, OW, sh, sw, ph, pw, Cg, M, K, L, ncols, xn, yn, splits, tps, ytot, cx;
} conv_ig_arg;

/* Off by the config key cuda_conv_igemm = off (then conv runs as im2col + the matmul kernels,
 * f16/bf16 in f32). */
static bool conv_igemm_allowed(void)
{
    return core_cfg_bool(CFG_CUDA_CONV_IGEMM);
}

/* Whether a CONV (the geometry g of run_conv) runs as the implicit GEMM: f16/bf16, or f32 unless
 * TF32 is allowed; 1-D or 2-D, at least 16 outputs per group, every offset within 32 bits. */
static bool conv_igemm_ok(const ir_op *op, const conv_arg *g, int64_t Cx, int64_t Cy, int64_t G)
{
    em_dtype dt = op->out[0]->dtype;
    bool f32 = dt == EM_F32 && !cuda_tf32_allowed(); /* TF32 asked for: im2col + the TF32 matmul */
    if (op->kind != EM_OP_CONV || (dt != EM_F16 && dt != EM_BF16 && !f32) || !conv_igemm_allowed())
        return false;
    if (g->img[0] != 1 || g->k[0] != 1 || Cy / G < 16 || Cx / G < 1) return false;
    int64_t lim = INT32_MAX / 2;
    int64_t xs = g->n * Cx * g->img[1] * g->img[2], ys = g->n * Cy * g->blk[1] * g->blk[2];
    int64_t ws = Cy * (Cx / G) * g->k[1] * g->k[2];
    return xs < lim && ys < lim && ws < lim && g->n * g->blk[1] * g->blk[2] < lim && g->n < 65536 &&
           Cy < 65536 && g->d[1] * g->k[1] < (1 << 15) && g->d[2] * g->k[2] < (1 << 15);
}

/* Whether the implicit GEMM takes 64-row tiles for M output rows: for M <= 64 (from M = 256 on,
 * 128-row tiles win even where they leave a half-empty last wave, bench/RESULTS.md). Config
 * cuda_conv_tile = 64 / 128 forces either. */
static bool conv_rows64(int64_t M)
{
    if (core_cfg_is(CFG_CUDA_CONV_TILE, "64")) return true;
    if (core_cfg_is(CFG_CUDA_CONV_TILE, "128")) return false;
    return M <= 64;
}

/* dst [n][p][c] = src [n][c][p], elements of esz = 2 or 4 bytes (em_conv_to_cl_u16 / _u32). */
static em_status to_channels_last(int dev, const void *src, void *dst, int64_t n, int64_t c,
                                  int64_t p, int esz, const char *what)
{
    const char *u = esz == 2 ? "u16" : "u32";
    char name[32];
    if (p < 32 && n * c * p < INT32_MAX) { /* w with a small kernel: one thread per element */
        snprintf(name, sizeof name, "em_conv_to_cl_small_%s", u);
        CUfunction f = cuda_kernel(dev, name, what);
        if (!f) return em_last_status();
        int ci = (int)c, pi = (int)p, total = (int)(n * c * p);
        void *params[] = {(void *)&src, &dst, &ci, &pi, &total};
        return cuda_launch(dev, f, total, params, what);
    }
    snprintf(name, sizeof name, "em_conv_to_cl_%s", u);
    CUfunction f = cuda_kernel(dev, name, what);
    if (!f) return em_last_status();
    int ci = (int)c, pi = (int)p;
    unsigned grid[3] = {(unsigned)((p + 63) / 64), (unsigned)((c + 63) / 64), (unsigned)n};
    unsigned block[3] = {256, 1, 1};
    void *params[] = {(void *)&src, &dst, &ci, &pi};
    return cuda_launch_grid(dev, f, grid, block, params, what);
}

/* Channels-last copies of x [n][Cx][hw] and w [Cy][Cg][taps] (16-bit or f32 elements) in pooled
 * buffers: *xcl [n][hw][Cx], *wcl [Cy][taps][Cg]. The caller frees both, also on failure (NULL
 * where not allocated). */
static em_status stage_channels_last(int dev, const ir_tensor *x, const ir_tensor *w, int64_t n,
                                     int64_t Cx, int64_t hw, int64_t Cy, int64_t Cg, int64_t taps,
                                     void **xcl, void **wcl, const char *what)
{
    const int esz = (int)em_dtype_size(x->dtype);
    *xcl = cuda_pool_alloc(dev, (size_t)(ir_numel(x) * esz));
    *wcl = *xcl ? cuda_pool_alloc(dev, (size_t)(ir_numel(w) * esz)) : NULL;
    if (!*wcl) return em_last_status();
    em_status st = to_channels_last(dev, ir_ptr(x), *xcl, n, Cx, hw, esz, what);
    return st == EM_OK ? to_channels_last(dev, ir_ptr(w), *wcl, Cy, Cg, taps, esz, what) : st;
}

/* y = conv(x, w) + b as an implicit GEMM (kernels/matmul_conv.cu), x, w, b and y contiguous.
 * f16/bf16 on the tensor cores: with 8k input channels per group, x and w are copied
 * channels-last first and both operands stream through cp.async (em_conv_cl_*); otherwise the
 * column tiles are gathered element by element (em_conv_ig_*). f32: exact FFMA register tiles
 * with gathered columns (em_conv_ig_f32*). Products with few output tiles
 * cut K into parts summed in order afterwards (f32 workspace): the weight gradient's
 * convolution has K = N OH OW. */
static em_status conv_igemm(int dev, const ir_tensor *x, const ir_tensor *w, const ir_tensor *b,
                            const ir_tensor *y, const conv_arg *g, int64_t Cx, int64_t Cy,
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
    a.ytot = (int32_t)ir_numel(y);
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
    ir_tensor xc = *x, wc = *w;
    void *xbuf = NULL, *wbuf = NULL;
    if (cl) { /* x to [N][H][W][Cx] and w to [Cy][Kh][Kw][Cg] */
        st = stage_channels_last(dev, x, w, g->n, Cx, (int64_t)a.H * a.W, Cy, a.Cg, KH * KW, &xbuf,
                                 &wbuf, what);
        xc.data = xbuf, wc.data = wbuf;
        x = &xc, w = &wc;
    }
    bool av = cl || (a.K % 8 == 0 && ((uintptr_t)ir_ptr(w) & 15) == 0);
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
    void *xp = st == EM_OK ? ir_ptr(x) : NULL, *wp = st == EM_OK ? ir_ptr(w) : NULL,
         *bp = b && splits == 1 ? ir_ptr(b) : NULL, *yp = ir_ptr(y);
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
        void *bq = b ? ir_ptr(b) : NULL;
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
    CONV_I2C,  /* conv_sgt: the exact f32 implicit GEMM fed by the copy engine's im2col mode */
} conv_path;

/* An f32 CONV of conv_igemm_ok's shapes that conv_sgt takes: 1-D/2-D, one group, stride 1, input
 * channels a multiple of 32, on sm_90. */
static bool conv_sgt_fits(int dev, const ir_op *op, const conv_arg *g, int64_t Cx, int64_t G)
{
    return op->kind == EM_OP_CONV && G == 1 && Cx % 32 == 0 && g->img[0] == 1 && g->k[0] == 1 &&
           g->s[1] == 1 && g->s[2] == 1 && cuda_wgmma_device(dev) &&
           cuda_drv.cuTensorMapEncodeTiled;
}

/* f16/bf16, 1-D/2-D, one group, a multiple of q input channels. */
static bool conv_half_plain(const ir_op *op, const conv_arg *g, int64_t Cx, int64_t G, int64_t q)
{
    em_dtype dt = op->out[0]->dtype;
    return op->kind == EM_OP_CONV && (dt == EM_F16 || dt == EM_BF16) && G == 1 && Cx % q == 0 &&
           g->img[0] == 1 && g->k[0] == 1;
}

/* The path for a CONV: config cuda_conv_kernel = mma, columns or wgmma asks for one (taken
 * where the shape allows it, else mma); for f32, sgt_im2col, and auto takes it from 128 input
 * channels where it fits; for f16/bf16 auto (the default) takes wgmma where it
 * applies (sm_90, stride 1, input channels a multiple of 64) for at least 64 output channels,
 * else columns for at least 128 output channels on sm_90, else mma: the fastest of the three in
 * each case (bench/RESULTS.md); the faster paths only for at least 64 output positions per image
 * (a weight gradient's convolution, with the kernel's few taps as its output, would leave the
 * column tiles nearly empty). */
static conv_path conv_choose(int dev, const ir_op *op, const conv_arg *g, int64_t Cx, int64_t Cy,
                             int64_t G)
{
    const char *v = core_cfg_str(CFG_CUDA_CONV_KERNEL);
    int64_t L = g->blk[1] * g->blk[2], rows = g->n * L, K = Cx * g->k[1] * g->k[2];
    if (op->out[0]->dtype == EM_F32) {
        /* sgt_im2col where it fits, else mma (ig_f32); auto: sgt_im2col from 128 input channels
         * (at 64 channels ig_f32 is faster; bench/RESULTS.md) */
        bool fits = conv_sgt_fits(dev, op, g, Cx, G), i2c = cuda_drv.cuTensorMapEncodeIm2col;
        bool autov = !strcmp(v, "auto");
        if (fits && i2c && ((v && !strcmp(v, "sgt_im2col")) || (autov && Cx >= 128 && L >= 64)))
            return CONV_I2C;
        return CONV_MMA;
    }
    bool cols =
        conv_half_plain(op, g, Cx, G, 8) && rows * K * 2 <= CONV_COLS_MAX && (L + 31) / 32 <= 65535;
    bool tw = conv_half_plain(op, g, Cx, G, 64) && g->s[1] == 1 && g->s[2] == 1 &&
              cuda_wgmma_device(dev) && cuda_drv.cuTensorMapEncodeTiled;
    if (v && !strcmp(v, "mma")) return CONV_MMA;
    if (v && !strcmp(v, "columns")) return cols ? CONV_COLS : CONV_MMA;
    if (v && !strcmp(v, "wgmma")) return tw ? CONV_TW : CONV_MMA;
    if (L < 64) return CONV_MMA;
    if (tw && Cy >= 64) return CONV_TW;
    return cols && cuda_wgmma_device(dev) && Cy >= 128 ? CONV_COLS : CONV_MMA;
}

/* y = conv(x, w) + b, x, w, b and y contiguous f16/bf16, as one product on the matmul kernels
 * (the wgmma kernel on sm_90): x to channels-last, its columns written out as
 * cols [N OH OW][Kh Kw Cin] (em_im2col_cl_u16), w to [Cout][Kh Kw Cin]; then
 * t [N OH OW][Cout] = cols w^T (+ b in the product's store; f32 accumulation, one rounding), and
 * t transposed into y [N][Cout][OH OW]. Costs the columns' memory (Kh Kw times x's, pooled). */
static em_status conv_cols(int dev, const ir_tensor *x, const ir_tensor *w, const ir_tensor *b,
                           const ir_tensor *y, const conv_arg *g, int64_t Cx, int64_t Cy,
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
    void *xcl, *wcl, *cols = NULL, *out = NULL;
    em_status st =
        stage_channels_last(dev, x, w, g->n, Cx, a.H * a.W, Cy, Cx, KH * KW, &xcl, &wcl, what);
    if (st == EM_OK) {
        cols = cuda_pool_alloc(dev, (size_t)(rows * K) * 2);
        out = cols ? cuda_pool_alloc(dev, (size_t)(rows * Cy) * 2) : NULL;
        if (!out) st = em_last_status();
    }
    CUfunction f = st == EM_OK ? cuda_kernel(dev, "em_im2col_cl_u16", what) : NULL;
    if (st == EM_OK && !f) st = em_last_status();
    if (st == EM_OK) {
        void *params[] = {&xcl, &cols, &a};
        st = cuda_launch(dev, f, a.total, params, what);
    }
    if (st == EM_OK) { /* t [rows][Cy] = cols [rows][K] . wcl^T, wcl read as [K][Cy] (k-major) */
        int64_t ash[2] = {rows, K}, ast[2] = {K, 1}, bsh[2] = {K, Cy}, bst[2] = {1, K};
        int64_t osh[2] = {rows, Cy}, ost[2] = {Cy, 1};
        ir_tensor at = view3(cols, y->device, y->dtype, 2, ash, ast);
        ir_tensor bt = view3(wcl, y->device, y->dtype, 2, bsh, bst);
        ir_tensor ot = view3(out, y->device, y->dtype, 2, osh, ost);
        ir_op mm;
        memset(&mm, 0, sizeof mm);
        mm.kind = b ? EM_OP_MATMUL_BIAS_ACT : EM_OP_MATMUL;
        mm.n_in = b ? 3 : 2;
        mm.n_out = 1;
        mm.in[0] = &at, mm.in[1] = &bt, mm.in[2] = (ir_tensor *)b, mm.out[0] = &ot;
        mm.p.matmul = (em_p_matmul){.M = rows, .K = K, .N = Cy, .act = EM_ACT_NONE};
        st = cuda_matmul(&mm, dev, what);
    }
    if (st == EM_OK) st = to_channels_last(dev, out, ir_ptr(y), g->n, L, Cy, 2, what);
    /* stream order: the kernels above read these before any reuse */
    cuda_pool_free(dev, out);
    cuda_pool_free(dev, cols);
    cuda_pool_free(dev, wcl);
    cuda_pool_free(dev, xcl);
    return st;
}

typedef struct tw_conv_arg { /* matches `struct twconv` in kernels/matmul_tw.cuh */
    int32_t Cout, OH, OW, KW, ph, pw, dh, dw, BW, BH, tw, th, ntiles, cpt, kts, npix, splits;
} tw_conv_arg;

/* x channels-last [N][H][W][C] (esz = 2: 16-bit, 4: f32 elements) read in boxes {128 / esz,
 * bw, bh, 1} (128 bytes a pixel) with the 128-byte swizzle; elements off the image read as zero. */
static bool encode_tmap_image(cuda_tmap *m, int esz, const void *p, int64_t N, int64_t H, int64_t W,
                              int64_t C, unsigned bw, unsigned bh)
{
    uint64_t dims[4] = {(uint64_t)C, (uint64_t)W, (uint64_t)H, (uint64_t)N};
    uint64_t strides[3] = {(uint64_t)(C * esz), (uint64_t)(W * C * esz),
                           (uint64_t)(H * W * C * esz)};
    unsigned box[4] = {128u / (unsigned)esz, bw, bh, 1}, es[4] = {1, 1, 1, 1};
    /* CU_TENSOR_MAP_DATA_TYPE_ UINT16 = 1, FLOAT32 = 7 */
    return cuda_drv.cuTensorMapEncodeTiled(m, esz == 2 ? 1 : 7, 4, (void *)p, dims, strides, box,
                                           es, 0, 3, 2, 0) == 0;
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

/* The copy-engine convolutions' operands: x and w (contiguous, 16-bit or f32) to channels-last
 * (*xcl, *wcl: the caller frees both, also on failure) and A's map *ma over w as [Cout][Kh Kw
 * Cin], boxes of 128 bytes of k x 128 rows. EM_ERR_UNSUPPORTED (logged, nothing recorded) when
 * the driver refuses the map. */
static em_status stage_tw_conv(int dev, const ir_tensor *x, const ir_tensor *w, const conv_arg *g,
                               int64_t Cx, int64_t Cy, void **xcl, void **wcl, cuda_tmap *ma,
                               const char *what)
{
    const int esz = (int)em_dtype_size(x->dtype);
    const int64_t taps = g->k[1] * g->k[2], K = taps * Cx;
    em_status st = stage_channels_last(dev, x, w, g->n, Cx, g->img[1] * g->img[2], Cy, Cx, taps,
                                       xcl, wcl, what);
    if (st == EM_OK &&
        !cuda_encode_tmap(ma, esz, *wcl, K, Cy, K * esz, 128u / (unsigned)esz, 128)) {
        em_log_msg("cuda", EM_LOG_INFO, "%s: the driver refused the weight's tensor map", what);
        st = EM_ERR_UNSUPPORTED;
    }
    return st;
}

/* Launches a copy-engine convolution f (em_conv_tw_*, or with sgt em_conv_sgt_* and its split-K
 * workspace ws): one block of 384 threads and smem bytes per multiprocessor, at most one per work
 * unit (an output tile, or one of its a.splits k ranges). */
static em_status launch_tw_conv(int dev, CUfunction f, bool sgt, cuda_tmap *ma, cuda_tmap *mb,
                                const ir_tensor *y, void *ws, const ir_tensor *b, tw_conv_arg a,
                                unsigned smem, const char *what)
{
    void *yp = ir_ptr(y), *bp = b ? ir_ptr(b) : NULL;
    void *tw_params[] = {ma, mb, &yp, &bp, &a}, *sgt_params[] = {ma, mb, &yp, &ws, &bp, &a};
    int64_t tiles = (a.Cout + 127) / 128 * (int64_t)a.ntiles * a.splits,
            sm = cuda_device(dev)->sm_count;
    unsigned grid[3] = {(unsigned)(tiles < sm ? tiles : sm), 1, 1}, block[3] = {384, 1, 1};
    return cuda_launch_grid_smem(dev, f, grid, block, smem, sgt ? sgt_params : tw_params, what);
}

/* The copy-engine convolutions' geometry for g: k tiles of kstep channels of one tap, column
 * tiles of bn outputs (tw_conv_tiles). */
static tw_conv_arg tw_conv_geometry(const conv_arg *g, int64_t Cx, int64_t Cy, int64_t kstep,
                                    int64_t bn)
{
    int64_t OH = g->blk[1], OW = g->blk[2];
    tw_conv_arg a = {.Cout = (int32_t)Cy,
                     .OH = (int32_t)OH,
                     .OW = (int32_t)OW,
                     .KW = (int32_t)g->k[2],
                     .ph = (int32_t)g->p[1],
                     .pw = (int32_t)g->p[2],
                     .dh = (int32_t)g->d[1],
                     .dw = (int32_t)g->d[2],
                     .cpt = (int32_t)(Cx / kstep),
                     .kts = (int32_t)(g->k[1] * g->k[2] * Cx / kstep),
                     .npix = (int32_t)(g->n * OH * OW),
                     .splits = 1};
    tw_conv_tiles(&a, g->n, OH, OW, bn);
    return a;
}

/* y = conv(x, w) + b, x, w, b and y contiguous f16/bf16, stride 1, Cin % 64 == 0, on sm_90: x
 * and w to channels-last, then the implicit GEMM of kernels/matmul_wgmma.cu (em_conv_tw_*): the
 * copy engine loads each k tile's (one tap, 64 channels) column boxes straight from x, zero-
 * filling the padding; f32 accumulation, the bias added before the one rounding; y written in
 * place. Tiles of 256 columns unless 128-column ones take clearly fewer waves over the
 * multiprocessors (a 128-column tile taken to cost 0.55 of a 256-column one, as for matmul).
 * EM_ERR_UNSUPPORTED (nothing recorded) when the driver refuses an operand's tensor map. */
static em_status conv_tw(int dev, const ir_tensor *x, const ir_tensor *w, const ir_tensor *b,
                         const ir_tensor *y, const conv_arg *g, int64_t Cx, int64_t Cy,
                         const char *what)
{
    tw_conv_arg a[2];
    double cost[2];
    int64_t tm = (Cy + 127) / 128, sm = cuda_device(dev)->sm_count;
    for (int i = 0; i < 2; i++) {
        a[i] = tw_conv_geometry(g, Cx, Cy, 64, i ? 128 : 256);
        cost[i] = (double)((tm * a[i].ntiles + sm - 1) / sm) * (i ? 0.55 : 1.0);
    }
    int narrow = cost[0] <= cost[1] ? 0 : 1;
    const tw_conv_arg *ga = &a[narrow];
    unsigned bn = narrow ? 128 : 256;
    int64_t H = g->img[1], W = g->img[2];
    void *xcl, *wcl;
    cuda_tmap ma, mb;
    em_status st = stage_tw_conv(dev, x, w, g, Cx, Cy, &xcl, &wcl, &ma, what);
    if (st == EM_OK &&
        !encode_tmap_image(&mb, 2, xcl, g->n, H, W, Cx, (unsigned)ga->BW, (unsigned)ga->BH))
        st = EM_ERR_UNSUPPORTED; /* nothing recorded: run_conv takes the mma.sync kernel */
    char name[32];
    snprintf(name, sizeof name, "em_conv_tw_%s_%c", y->dtype == EM_BF16 ? "bf16" : "f16",
             narrow ? 'n' : 'w');
    CUfunction f = st == EM_OK ? cuda_kernel(dev, name, what) : NULL;
    if (st == EM_OK && !f) st = em_last_status();
    if (st == EM_OK) /* 4 stages of A's 128 rows and B's bn, as run_tw's */
        st = launch_tw_conv(dev, f, false, &ma, &mb, y, NULL, b, *ga,
                            4 * (128 + bn) * 128 + 1024 + 64, what);
    /* stream order: the kernels above read these before any reuse */
    cuda_pool_free(dev, wcl);
    cuda_pool_free(dev, xcl);
    return st;
}

/* x channels-last f32 [N][H][W][C] for the copy engine's im2col mode: 128 pixels of 32 channels a
 * load, with the 128-byte swizzle, the bounding box of the first tap's positions (lower corner
 * -pad_lo, upper pad_hi - dilation (k - 1)), so that the output pixels (n, oh, ow) follow each
 * other in it; zero off the image. */
static bool encode_tmap_im2col(cuda_tmap *m, const void *p, const conv_arg *g, int64_t H, int64_t W,
                               int64_t C)
{
    uint64_t dims[4] = {(uint64_t)C, (uint64_t)W, (uint64_t)H, (uint64_t)g->n};
    uint64_t strides[3] = {(uint64_t)(C * 4), (uint64_t)(W * C * 4), (uint64_t)(H * W * C * 4)};
    /* the box holds OW x OH positions: its upper corner OW - W - pad_lo = pad_hi - d (k - 1) */
    int64_t lo[2] = {-g->p[2], -g->p[1]};
    int64_t hi[2] = {g->blk[2] - W + lo[0], g->blk[1] - H + lo[1]};
    for (int i = 0; i < 2; i++) /* 4-D maps take corners in [-128, 127] */
        if (lo[i] < -128 || lo[i] > 127 || hi[i] < -128 || hi[i] > 127) return false;
    int lower[2] = {(int)lo[0], (int)lo[1]}, upper[2] = {(int)hi[0], (int)hi[1]};
    unsigned es[4] = {1, 1, 1, 1};
    /* CU_TENSOR_MAP_DATA_TYPE_FLOAT32 = 7, no interleave, SWIZZLE_128B = 3, L2 promotion 128B =
     * 2, zero fill */
    return cuda_drv.cuTensorMapEncodeIm2col(m, 7, 4, (void *)p, dims, strides, lower, upper, 32,
                                            128, es, 0, 3, 2, 0) == 0;
}

/* conv_sgt's split-K: how many k ranges (1 to 4, each of at least 8 k tiles) each of tiles output
 * tiles of kts k tiles is cut into, a range costing 1 / splits of a tile: the count with the
 * fewest waves over sm multiprocessors, taken only where it saves a tenth of the time.
 * [32, 512, 14, 14] 3x3 on 132 multiprocessors: 196 tiles, 2 waves whole, 3 of halves in 2.
 * Config cuda_conv_splits = 1 to 4 forces a count (at most kts). */
static int sgt_splits(int64_t tiles, int64_t kts, int64_t sm)
{
    int64_t forced = core_cfg_int(CFG_CUDA_CONV_SPLITS); /* 1-4; 0: auto */
    if (forced >= 1) return (int)(forced <= kts ? forced : kts);
    int best = 1;
    double whole = (double)((tiles + sm - 1) / sm), least = whole;
    for (int s = 2; s <= 4 && kts >= 8 * s; s++) {
        double cost = (double)((tiles * s + sm - 1) / sm) / s;
        if (cost < least && cost < 0.9 * whole) best = s, least = cost;
    }
    return best;
}

/* y = conv(x, w) + b, x, w, b and y contiguous f32, stride 1, Cin % 32 == 0, on sm_90: x and w to
 * channels-last, then em_conv_sgt_f32_i2c (kernels/matmul_sgt.cu): the exact FFMA tiles of the
 * em_mm_sgt_* products, A = w [Cout][Kh Kw Cin] in boxes of 32 k x 128 rows, B 128 consecutive
 * output pixels of 32 channels per k tile from the copy engine's im2col mode (the padding
 * zero-filled by it), one block of 384 threads per multiprocessor.
 * Each output is its f32 sum over (tap, channel) in order, then + b; where sgt_splits cuts the k
 * tiles into ranges, the ranges' sums (the first in y, the others in a workspace) are added in
 * order by em_conv_splitk_f32, then + b. EM_ERR_UNSUPPORTED (nothing recorded) when the driver
 * refuses a tensor map or the tile count leaves int. */
static em_status conv_sgt(int dev, const ir_tensor *x, const ir_tensor *w, const ir_tensor *b,
                          const ir_tensor *y, const conv_arg *g, int64_t Cx, int64_t Cy,
                          const char *what)
{
    int64_t KH = g->k[1], KW = g->k[2], K = KH * KW * Cx;
    tw_conv_arg a = tw_conv_geometry(g, Cx, Cy, 32, 128);
    a.ntiles = (a.npix + 127) / 128;
    if ((int64_t)a.ntiles * 128 >= INT32_MAX || K >= INT32_MAX) return EM_ERR_UNSUPPORTED;
    int64_t H = g->img[1], W = g->img[2];
    void *xcl, *wcl;
    cuda_tmap ma, mb;
    em_status st = stage_tw_conv(dev, x, w, g, Cx, Cy, &xcl, &wcl, &ma, what);
    if (st == EM_OK && !encode_tmap_im2col(&mb, xcl, g, H, W, Cx))
        st = EM_ERR_UNSUPPORTED; /* nothing recorded: run_conv takes em_conv_ig_f32 */
    CUfunction f = st == EM_OK ? cuda_kernel(dev, "em_conv_sgt_f32_i2c", what) : NULL;
    if (st == EM_OK && !f) st = em_last_status();
    void *ws = NULL;
    a.splits = sgt_splits((Cy + 127) / 128 * a.ntiles, a.kts, cuda_device(dev)->sm_count);
    if (st == EM_OK && a.splits > 1 &&
        !(ws = cuda_pool_alloc(dev, (size_t)(a.splits - 1) * (size_t)a.npix * (size_t)Cy * 4)))
        st = em_last_status();
    if (st == EM_OK)
        st = launch_tw_conv(dev, f, true, &ma, &mb, y, ws, b, a, 4 * 32768 + 1024 + 64, what);
    if (st == EM_OK && a.splits > 1) {
        CUfunction sum = cuda_kernel(dev, "em_conv_splitk_f32", what);
        void *yp = ir_ptr(y), *bp = b ? ir_ptr(b) : NULL;
        void *params[] = {&yp, &ws, &bp, &a};
        st = sum ? cuda_launch(dev, sum, (int64_t)a.npix * Cy, params, what) : em_last_status();
    }
    /* stream order: the kernels above read these before any reuse */
    cuda_pool_free(dev, ws);
    cuda_pool_free(dev, wcl);
    cuda_pool_free(dev, xcl);
    return st;
}

/* The geometry of a CONV / CONV_TRANSPOSE record in 3 spatial dims (leading ones of size 1). */
static void conv_geometry(const ir_op *op, conv_arg *g, bool tr)
{
    const ir_tensor *x = op->in[0], *w = op->in[1], *y = op->out[0];
    int S = op->p.conv.nd;
    bool unb = x->rank == S + 1;
    memset(g, 0, sizeof *g);
    ir_win3 w3; /* the image is the conv's input, the transpose's output */
    ir_conv_windows(tr ? EM_OP_CONV_TRANSPOSE : EM_OP_CONV, &op->p.conv, x->shape, x->rank,
                    w->shape, y->shape, y->rank, &w3);
    for (int i = 0; i < 3; i++) {
        g->img[i] = w3.in[i], g->blk[i] = w3.out[i];
        g->k[i] = w3.k[i], g->s[i] = w3.s[i], g->p[i] = w3.p[i], g->d[i] = w3.d[i];
    }
    g->n = unb ? 1 : x->shape[0];
    g->c = tr ? y->shape[unb ? 0 : 1] : x->shape[unb ? 0 : 1];
}

/* CONV as im2col + a matmul batched over (sample, group) (+ bias), or the direct kernel for
 * fewer than 16 output channels per group; CONV_TRANSPOSE as that matmul + col2im (+ bias). Strided
 * inputs are packed first. CONV runs as the implicit GEMM (conv_igemm) where conv_igemm_ok
 * allows; f16/bf16 otherwise (and CONV_TRANSPOSE) in f32. */
em_status cuda_conv_exec(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *y = op->out[0];
    bool tr = op->kind == EM_OP_CONV_TRANSPOSE;
    int S = op->p.conv.nd;
    int64_t G = op->p.conv.groups > 1 ? op->p.conv.groups : 1;
    if (ir_numel(y) == 0) return EM_OK;
    bool half = y->dtype == EM_F16 || y->dtype == EM_BF16;
    ir_tensor in[3], yt = *y;
    void *bufs[4] = {NULL, NULL, NULL, NULL};
    em_status st = EM_OK;
    bool unb = op->in[0]->rank == S + 1;
    conv_arg g;
    conv_geometry(op, &g, tr);
    int64_t N = g.n, Cx = op->in[0]->shape[unb ? 0 : 1], Cy = y->shape[unb ? 0 : 1];
    if (conv_igemm_ok(op, &g, Cx, Cy, G)) { /* f16/bf16 on the tensor cores, f32 exact */
        for (int i = 0; i < op->n_in; i++) in[i] = *op->in[i];
        for (int i = 0; i < op->n_in && st == EM_OK; i++)
            st = cuda_nn_stage(dev, op->in[i], false, &in[i], &bufs[i], what);
        const ir_tensor *b = op->n_in > 2 ? &in[2] : NULL;
        conv_path path = conv_choose(dev, op, &g, Cx, Cy, G);
        if (st == EM_OK && path == CONV_TW) {
            st = conv_tw(dev, &in[0], &in[1], b, y, &g, Cx, Cy, what);
            if (st == EM_ERR_UNSUPPORTED) path = CONV_MMA, st = EM_OK;
        }
        if (st == EM_OK && path == CONV_I2C) {
            st = conv_sgt(dev, &in[0], &in[1], b, y, &g, Cx, Cy, what);
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
        st = cuda_nn_stage(dev, op->in[i], half, &in[i], &bufs[i], what);
    if (st == EM_OK && half) {
        bufs[3] = cuda_pool_alloc(dev, (size_t)ir_numel(y) * 4);
        if (!bufs[3]) st = em_last_status();
        yt.data = bufs[3];
        yt.dtype = EM_F32;
    }
    const ir_tensor *x = &in[0], *w = &in[1];
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
    int64_t cshape[3] = {N, K, L}, cstr[3] = {K * L, L, 1};
    ir_tensor ct = view3(cols, y->device, cdt, 3, cshape, cstr);
    if (st == EM_OK && !tr) {
        /* y[n, g] [Cy/G, L] = w[g] [Cy/G, K/G] . cols[n, g] [K/G, L] */
        st = launch_conv_kernel(dev, "im2col", cdt, ir_ptr(x), cols, &g, N * K * L, what);
        int64_t M = Cy / G, Kg = K / G;
        if (st == EM_OK)
            st = mm_groups(dev, w, M * Kg, Kg, 1, &ct, K * L, Kg * L, L, &yt, N, G, M, Kg, L, what);
    } else if (st == EM_OK) {
        /* cols[n, g] [Cy/G * Kt, Lx] = w[g]^T . x[n, g] [Cx/G, Lx], w[g] [Cx/G, Cy/G * Kt] */
        int64_t M = K / G, Cg = Cx / G;
        st = mm_groups(dev, w, Cg * M, 1, M, x, Cx * Lx, Cg * Lx, Lx, &ct, N, G, M, Cg, Lx, what);
        if (st == EM_OK)
            st = launch_conv_kernel(dev, "col2im", cdt, cols, ir_ptr(&yt), &g, ir_numel(y), what);
    }
    if (st == EM_OK && op->n_in > 2) st = bias_add(dev, &yt, &in[2], Cy, Ly, what);
    if (st == EM_OK && half) st = cuda_nn_from_f32(dev, bufs[3], y, what);
    /* stream order: the kernels above read these before any reuse */
    cuda_pool_free(dev, cols);
    for (int i = 0; i < 4; i++) cuda_pool_free(dev, bufs[i]);
    return st;
}

/* IM2COL / COL2IM (2-D, F.unfold / F.fold). */
em_status cuda_fold_exec(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *x = op->in[0], *y = op->out[0];
    bool unfold = op->kind == EM_OP_IM2COL;
    const ir_tensor *imgt = unfold ? x : y;
    conv_arg g;
    memset(&g, 0, sizeof g);
    ir_win3 w3;
    ir_fold_windows(&op->p.fold, &w3);
    for (int i = 0; i < 3; i++) {
        g.img[i] = w3.in[i], g.blk[i] = w3.out[i];
        g.k[i] = w3.k[i], g.s[i] = w3.s[i], g.p[i] = w3.p[i], g.d[i] = w3.d[i];
    }
    bool unb = imgt->rank == 3;
    g.n = unb ? 1 : imgt->shape[0];
    g.c = imgt->shape[unb ? 0 : 1];
    if (ir_numel(y) == 0) return EM_OK;
    /* f16/bf16: im2col moves 16-bit elements; col2im sums in f32 buffers (as the CPU does) */
    bool half = y->dtype == EM_F16 || y->dtype == EM_BF16;
    em_dtype ct = half && !unfold ? EM_F32 : x->dtype;
    const void *src = ir_ptr(x);
    void *tmp = NULL, *img = NULL;
    em_status st = EM_OK;
    if (ct != x->dtype || !ir_is_contiguous(x)) {
        tmp = cuda_pool_alloc(dev, (size_t)ir_numel(x) * em_dtype_size(ct));
        st = tmp ? cuda_index_to_contiguous(dev, x, ct, tmp, what) : em_last_status();
        src = tmp;
    }
    if (st == EM_OK && unfold && half) {
        CUfunction f = cuda_kernel(dev, "em_im2col_u16", what);
        void *yp = ir_ptr(y);
        void *params[] = {(void *)&src, &yp, &g};
        st = f ? cuda_launch(dev, f, ir_numel(y), params, what) : em_last_status();
    } else if (st == EM_OK && half) {
        img = cuda_pool_alloc(dev, (size_t)ir_numel(y) * sizeof(float));
        st = img ? launch_conv_kernel(dev, "col2im", EM_F32, src, img, &g, ir_numel(y), what)
                 : em_last_status();
        ir_tensor it = *y;
        it.data = img, it.dtype = EM_F32;
        if (st == EM_OK) st = cuda_index_to_contiguous(dev, &it, y->dtype, ir_ptr(y), what);
    } else if (st == EM_OK) {
        st = launch_conv_kernel(dev, unfold ? "im2col" : "col2im", y->dtype, src, ir_ptr(y), &g,
                                ir_numel(y), what);
    }
    if (tmp) cuda_pool_free(dev, tmp); /* stream order: the kernels above read them first */
    if (img) cuda_pool_free(dev, img);
    return st;
}
