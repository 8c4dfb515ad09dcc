/* CPU kernels for max/avg pooling (1-3 spatial dims), adaptive pooling, interpolation and pixel
 * (un)shuffle. Spatial shapes are handled as [D, H, W] with leading size-1 dims; every
 * sample-channel plane is independent and planes run in parallel (MAX_POOL_VALUES is MAX_POOL
 * without the index output). Contiguous f32 input is read in place; anything else is first read
 * into contiguous f64. */
#include "../../ir/decode.h"
#include "cpu.h"
#include "cpu_pool_fast.h"

typedef struct plane_src {
    const float *f32; /* contiguous f32 input, or NULL */
    const double *f64;
} plane_src;

static inline double rd(const plane_src *s, int64_t i)
{
    return s->f32 ? (double)s->f32[i] : s->f64[i];
}

static bool load_src(const ir_tensor *x, plane_src *s, double **owned)
{
    *owned = NULL;
    s->f32 = NULL;
    s->f64 = NULL;
    if (x->dtype == EM_F32 && ir_is_contiguous(x)) {
        s->f32 = (const float *)ir_ptr(x);
        return true;
    }
    *owned = cpu_load_f64(x);
    s->f64 = *owned;
    return *owned != NULL;
}

/* Writes value v at element i of a contiguous output of any float dtype. */
static inline void wr(ir_tensor *o, int64_t i, double v)
{
    if (o->dtype == EM_F32)
        ((float *)ir_ptr(o))[i] = (float)v;
    else
        ir_set_f64(ir_ptr(o) + i * (int64_t)em_dtype_size(o->dtype), o->dtype, v);
}

typedef struct geom {
    int64_t in[3], out[3], k[3], s[3], p[3], d[3];
    int64_t in_plane, out_plane;
} geom;

/* Reads the op's spatial parameters into 3-D form (leading dims of size 1); returns the number
 * of spatial dims. */
static int read_geom(const ir_op *op, geom *g)
{
    const ir_tensor *x = op->in[0], *o = op->out[0];
    ir_win3 w;
    int nd = ir_pool_windows(op->kind, &op->p, x->shape, x->rank, o->shape, o->rank, &w);
    for (int i = 0; i < 3; i++) {
        g->in[i] = w.in[i], g->out[i] = w.out[i];
        g->k[i] = w.k[i], g->s[i] = w.s[i], g->p[i] = w.p[i], g->d[i] = w.d[i];
    }
    g->in_plane = g->in[0] * g->in[1] * g->in[2];
    g->out_plane = g->out[0] * g->out[1] * g->out[2];
    return nd;
}

typedef struct pool_ctx {
    const ir_op *op;
    geom g;
    plane_src src;
    bool is_max, include_pad;
} pool_ctx;

static void pool_planes(void *vctx, int64_t p0, int64_t p1)
{
    const pool_ctx *c = vctx;
    const geom *g = &c->g;
    ir_tensor *out = c->op->out[0];
    int64_t *idx_out = c->op->kind == EM_OP_MAX_POOL ? (int64_t *)ir_ptr(c->op->out[1]) : NULL;
    for (int64_t pl = p0; pl < p1; pl++) {
        int64_t ibase = pl * g->in_plane, obase = pl * g->out_plane;
        for (int64_t od = 0; od < g->out[0]; od++)
            for (int64_t oh = 0; oh < g->out[1]; oh++)
                for (int64_t ow = 0; ow < g->out[2]; ow++) {
                    int64_t st[3] = {od * g->s[0] - g->p[0], oh * g->s[1] - g->p[1],
                                     ow * g->s[2] - g->p[2]};
                    double best = -INFINITY, sum = 0;
                    int64_t best_i = -1, count = 0;
                    for (int64_t a = 0; a < g->k[0]; a++) {
                        int64_t id = st[0] + a * g->d[0];
                        if (id < 0 || id >= g->in[0]) continue;
                        for (int64_t b = 0; b < g->k[1]; b++) {
                            int64_t ih = st[1] + b * g->d[1];
                            if (ih < 0 || ih >= g->in[1]) continue;
                            for (int64_t e = 0; e < g->k[2]; e++) {
                                int64_t iw = st[2] + e * g->d[2];
                                if (iw < 0 || iw >= g->in[2]) continue;
                                int64_t li = (id * g->in[1] + ih) * g->in[2] + iw;
                                double v = rd(&c->src, ibase + li);
                                if (c->is_max) {
                                    if (v > best || isnan(v) || best_i < 0) {
                                        best = v;
                                        best_i = li;
                                    }
                                } else {
                                    sum += v;
                                    count++;
                                }
                            }
                        }
                    }
                    int64_t oi = obase + (od * g->out[1] + oh) * g->out[2] + ow;
                    if (c->is_max) {
                        wr(out, oi, best);
                        if (idx_out) idx_out[oi] = best_i;
                        continue;
                    }
                    if (c->include_pad) {
                        /* windows count padding but not what lies past it (ceil mode) */
                        count = 1;
                        for (int i = 0; i < 3; i++) {
                            int64_t lo = st[i], hi = st[i] + (g->k[i] - 1) * g->d[i] + 1;
                            if (hi > g->in[i] + g->p[i]) hi = g->in[i] + g->p[i];
                            count *= (hi - lo + g->d[i] - 1) / g->d[i];
                        }
                    }
                    wr(out, oi, count ? sum / (double)count : NAN);
                }
    }
}

static int64_t plane_count(const ir_tensor *o, int nd)
{
    int64_t n = 1;
    for (int d = 0; d < o->rank - nd; d++) n *= o->shape[d];
    return n;
}

static int64_t plane_grain(const geom *g)
{
    int64_t work = g->out_plane * (g->k[0] * g->k[1] * g->k[2]);
    return work >= 16384 ? 1 : 16384 / (work ? work : 1) + 1;
}

static em_status exec_pool(const ir_op *op, bool is_max)
{
    if (is_max && cpu_pool_max_fast(op)) return EM_OK;
    pool_ctx c = {.op = op, .is_max = is_max, .include_pad = op->p.pool.count_include_pad};
    int nd = read_geom(op, &c.g);
    double *owned;
    if (!load_src(op->in[0], &c.src, &owned)) return EM_ERR_OOM;
    em_parallel_for(plane_count(op->out[0], nd), plane_grain(&c.g), pool_planes, &c);
    em_free(owned);
    return EM_OK;
}

static void adaptive_planes(void *vctx, int64_t p0, int64_t p1)
{
    const pool_ctx *c = vctx;
    const geom *g = &c->g;
    ir_tensor *out = c->op->out[0];
    int64_t *idx_out = c->is_max ? (int64_t *)ir_ptr(c->op->out[1]) : NULL;
    for (int64_t pl = p0; pl < p1; pl++) {
        int64_t ibase = pl * g->in_plane, obase = pl * g->out_plane;
        for (int64_t od = 0; od < g->out[0]; od++)
            for (int64_t oh = 0; oh < g->out[1]; oh++)
                for (int64_t ow = 0; ow < g->out[2]; ow++) {
                    int64_t o3[3] = {od, oh, ow}, lo[3], hi[3];
                    for (int i = 0; i < 3; i++) {
                        lo[i] = o3[i] * g->in[i] / g->out[i];
                        hi[i] = ((o3[i] + 1) * g->in[i] + g->out[i] - 1) / g->out[i];
                    }
                    double best = -INFINITY, sum = 0;
                    int64_t best_i = -1;
                    for (int64_t a = lo[0]; a < hi[0]; a++)
                        for (int64_t b = lo[1]; b < hi[1]; b++)
                            for (int64_t e = lo[2]; e < hi[2]; e++) {
                                int64_t li = (a * g->in[1] + b) * g->in[2] + e;
                                double v = rd(&c->src, ibase + li);
                                sum += v;
                                if (v > best || isnan(v) || best_i < 0) {
                                    best = v;
                                    best_i = li;
                                }
                            }
                    int64_t oi = obase + (od * g->out[1] + oh) * g->out[2] + ow;
                    if (c->is_max) {
                        wr(out, oi, best);
                        idx_out[oi] = best_i;
                    } else {
                        int64_t cnt = (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);
                        wr(out, oi, sum / (double)cnt);
                    }
                }
    }
}

static em_status exec_adaptive(const ir_op *op, bool is_max)
{
    pool_ctx c = {.op = op, .is_max = is_max};
    int nd = read_geom(op, &c.g);
    for (int i = 0; i < 3; i++) c.g.k[i] = (c.g.in[i] + c.g.out[i] - 1) / c.g.out[i] + 1;
    double *owned;
    if (!load_src(op->in[0], &c.src, &owned)) return EM_ERR_OOM;
    em_parallel_for(plane_count(op->out[0], nd), plane_grain(&c.g), adaptive_planes, &c);
    em_free(owned);
    return EM_OK;
}

/* ---- interpolation (coordinates and weights: src/ir/decode.h) ---------------------------- */

typedef struct interp_ctx {
    const ir_op *op;
    geom g;
    plane_src src;
    int mode;
    bool align;
} interp_ctx;

static inline int64_t clampi(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

static void interp_planes(void *vctx, int64_t p0, int64_t p1)
{
    const interp_ctx *c = vctx;
    const geom *g = &c->g;
    ir_tensor *out = c->op->out[0];
    int64_t IH = g->in[1], IW = g->in[2], OH = g->out[1], OW = g->out[2];
    for (int64_t pl = p0; pl < p1; pl++) {
        int64_t ib = pl * IH * IW, ob = pl * OH * OW;
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                double v;
                if (c->mode == EM_INTERP_NEAREST) {
                    int64_t ih = (int64_t)floor((double)oh * (double)IH / (double)OH);
                    int64_t iw = (int64_t)floor((double)ow * (double)IW / (double)OW);
                    v = rd(&c->src, ib + clampi(ih, 0, IH - 1) * IW + clampi(iw, 0, IW - 1));
                } else if (c->mode == EM_INTERP_BILINEAR) {
                    double sh = ir_interp_src(oh, IH, OH, c->align, false);
                    double sw = ir_interp_src(ow, IW, OW, c->align, false);
                    int64_t h0 = (int64_t)sh, w0 = (int64_t)sw;
                    if (h0 > IH - 1) h0 = IH - 1;
                    if (w0 > IW - 1) w0 = IW - 1;
                    int64_t h1 = h0 + (h0 < IH - 1), w1 = w0 + (w0 < IW - 1);
                    double lh = sh - (double)h0, lw = sw - (double)w0;
                    v = (1 - lh) * ((1 - lw) * rd(&c->src, ib + h0 * IW + w0) +
                                    lw * rd(&c->src, ib + h0 * IW + w1)) +
                        lh * ((1 - lw) * rd(&c->src, ib + h1 * IW + w0) +
                              lw * rd(&c->src, ib + h1 * IW + w1));
                } else {
                    double sh = ir_interp_src(oh, IH, OH, c->align, true);
                    double sw = ir_interp_src(ow, IW, OW, c->align, true);
                    int64_t h0 = (int64_t)floor(sh), w0 = (int64_t)floor(sw);
                    double th = sh - (double)h0, tw = sw - (double)w0;
                    v = 0;
                    for (int a = 0; a < 4; a++) {
                        int64_t hh = clampi(h0 - 1 + a, 0, IH - 1);
                        double row = 0;
                        for (int b = 0; b < 4; b++) {
                            int64_t ww = clampi(w0 - 1 + b, 0, IW - 1);
                            row += ir_cubic_weight(tw, b) * rd(&c->src, ib + hh * IW + ww);
                        }
                        v += ir_cubic_weight(th, a) * row;
                    }
                }
                wr(out, ob + oh * OW + ow, v);
            }
    }
}

static em_status exec_interp(const ir_op *op)
{
    interp_ctx c = {.op = op, .mode = (int)op->p.interp.mode, .align = op->p.interp.align_corners};
    const ir_tensor *x = op->in[0], *o = op->out[0];
    /* 1-D input is a 2-D problem with height 1 */
    int nd = read_geom(op, &c.g);
    c.g.k[0] = c.g.k[1] = c.g.k[2] = 4;
    c.g.out_plane = c.g.out[1] * c.g.out[2];
    double *owned;
    if (!load_src(x, &c.src, &owned)) return EM_ERR_OOM;
    em_parallel_for(plane_count(o, nd), plane_grain(&c.g), interp_planes, &c);
    em_free(owned);
    return EM_OK;
}

/* Pixel shuffle: out[..., c, h*r+i, w*r+j] = in[..., c*r*r + i*r + j, h, w]; unshuffle is the
 * inverse. Elements are copied by byte size, so every dtype works. */
static em_status exec_shuffle(const ir_op *op, bool inverse)
{
    const ir_tensor *x = op->in[0];
    ir_tensor *o = op->out[0];
    int64_t r = op->p.shuffle.r;
    int rk = o->rank;
    int64_t C = o->shape[rk - 3], H = o->shape[rk - 2], W = o->shape[rk - 1];
    if (ir_numel(o) == 0) return EM_OK;
    int64_t batch = ir_numel(o) / (C * H * W);
    size_t es = em_dtype_size(o->dtype);
    char *dst = ir_ptr(o);
    for (int64_t b = 0; b < batch; b++)
        for (int64_t ch = 0; ch < C; ch++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t w = 0; w < W; w++) {
                    int64_t sc, sh, sw;
                    if (!inverse) { /* out [C, H, W] from in [C r^2, H/r, W/r] */
                        sc = ch * r * r + (h % r) * r + (w % r);
                        sh = h / r;
                        sw = w / r;
                    } else { /* out [C, H, W] = [c r^2, H/r...] from in [C/r^2, H r, W r] */
                        int64_t c0 = ch / (r * r), rem = ch % (r * r);
                        sc = c0;
                        sh = h * r + rem / r;
                        sw = w * r + rem % r;
                    }
                    int64_t in_c = x->shape[rk - 3], in_h = x->shape[rk - 2],
                            in_w = x->shape[rk - 1];
                    int64_t lin = ((b * in_c + sc) * in_h + sh) * in_w + sw;
                    memcpy(dst + (((b * C + ch) * H + h) * W + w) * (int64_t)es, ir_elem(x, lin),
                           es);
                }
    return EM_OK;
}

em_status cpu_exec_pool(const ir_op *op)
{
    switch (op->kind) {
    case EM_OP_MAX_POOL:
    case EM_OP_MAX_POOL_VALUES: return exec_pool(op, true);
    case EM_OP_AVG_POOL: return exec_pool(op, false);
    case EM_OP_ADAPTIVE_AVG_POOL: return exec_adaptive(op, false);
    case EM_OP_ADAPTIVE_MAX_POOL: return exec_adaptive(op, true);
    case EM_OP_INTERPOLATE: return exec_interp(op);
    case EM_OP_PIXEL_SHUFFLE: return exec_shuffle(op, false);
    case EM_OP_PIXEL_UNSHUFFLE: return exec_shuffle(op, true);
    default: break;
    }
    return em_error(EM_ERR_UNSUPPORTED, "cpu: op %s is not a pooling op", em_op_name(op->kind));
}
