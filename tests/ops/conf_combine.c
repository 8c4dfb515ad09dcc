/* Conformance of combine and split ops (cat, stack, split, chunk, repeat, tile, roll, pad)
 * against f64 references written with plain index arithmetic. */
#include <string.h>

#include "conf.h"

static const em_dtype dtypes[] = {EM_F64, EM_F32, EM_F16, EM_BF16, EM_I64,
                                  EM_I32, EM_I16, EM_I8,  EM_U8,   EM_BOOL};
#define N_DTYPES (int)(sizeof dtypes / sizeof dtypes[0])

/* An output coordinate j along dim d -> input coordinate, or -1 for the fill value. */
typedef int64_t (*map_fn)(int d, int64_t j, const void *ctx);

/* ys-shaped reference: y[idx] = x[map(idx)] (x's dims align with y's trailing dims). */
static double *ref_map(const double *xv, em_shape xs, em_shape ys, map_fn f, const void *ctx,
                       double fill)
{
    int64_t n = em_shape_numel(ys);
    double *y = malloc((size_t)(n ? n : 1) * sizeof *y);
    if (n == 0) return y;
    int64_t idx[EM_MAX_RANK] = {0}, src[EM_MAX_RANK];
    int lead = ys.rank - xs.rank;
    do {
        bool is_fill = false;
        for (int d = lead; d < ys.rank; d++) {
            src[d - lead] = f(d, idx[d], ctx);
            if (src[d - lead] < 0) is_fill = true;
        }
        y[h_offset(ys, idx)] = is_fill ? fill : xv[h_offset(xs, src)];
    } while (h_next_index(ys, idx));
    return y;
}

static double lo_for(em_dtype dt)
{
    return dt == EM_U8 || dt == EM_BOOL ? 0 : -5;
}

static double hi_for(em_dtype dt)
{
    return dt == EM_BOOL ? 2 : 5;
}

/* ---- cat and stack ----------------------------------------------------------------------- */

static void check_cat(void)
{
    const int64_t lens[3] = {2, 0, 3};
    for (int k = 0; k < N_DTYPES; k++) {
        em_dtype dt = dtypes[k];
        for (int lay = 0; lay < H_LAYOUT_COUNT; lay++) {
            for (int dim = 0; dim < 3; dim++) {
                em_scope_begin();
                em_tensor *ts[3];
                double *vs[3];
                em_shape sh[3];
                em_shape ys = EM_SHAPE(3, 1, 4);
                ys.dims[dim] = 0;
                for (int i = 0; i < 3; i++) {
                    sh[i] = EM_SHAPE(3, 1, 4);
                    sh[i].dims[dim] = lens[i];
                    ts[i] = h_rand(sh[i], dt, (h_layout)((lay + i) % H_LAYOUT_COUNT), lo_for(dt),
                                   hi_for(dt), &vs[i]);
                    ys.dims[dim] += lens[i];
                }
                int64_t n = em_shape_numel(ys);
                double *ex = malloc((size_t)n * sizeof *ex);
                int64_t idx[EM_MAX_RANK] = {0};
                do {
                    int64_t j = idx[dim], src[3];
                    int t = 0;
                    while (j >= lens[t]) j -= lens[t++];
                    memcpy(src, idx, sizeof src);
                    src[dim] = j;
                    ex[h_offset(ys, idx)] = vs[t][h_offset(sh[t], src)];
                } while (h_next_index(ys, idx));
                char what[64];
                snprintf(what, sizeof what, "cat dim %d layout %d", dim, lay);
                h_check_tensor(what, em_cat(ts, 3, dim - 3), ex, ys, 0, 0);
                free(ex);
                for (int i = 0; i < 3; i++) free(vs[i]);
                em_scope_end();
            }
        }
    }
    /* 8 tensors take two levels of records; sizes 0 and 1 mixed in */
    em_scope_begin();
    em_tensor *ts[8];
    double *vs[8];
    int64_t total = 0, lens8[8];
    for (int i = 0; i < 8; i++) {
        lens8[i] = i % 3;
        ts[i] =
            h_rand(EM_SHAPE(2, lens8[i]), EM_F32, (h_layout)(i % H_LAYOUT_COUNT), -1, 1, &vs[i]);
        total += lens8[i];
    }
    double ex[32];
    for (int r = 0, o = 0; r < 2; r++)
        for (int i = 0; i < 8; i++)
            for (int j = 0; j < lens8[i]; j++) ex[o++] = vs[i][r * lens8[i] + j];
    h_check_tensor("cat of 8", em_cat(ts, 8, 1), ex, EM_SHAPE(2, total), 0, 0);
    for (int i = 0; i < 8; i++) free(vs[i]);
    /* promotion: i32 + f32 -> f32, u8 + i8 -> i16, bool + i64 -> i64 */
    em_tensor *a = em_from_data((double[]){1, 2}, EM_F64, EM_SHAPE(2), EM_I32, h_dev);
    em_tensor *b = em_from_data((double[]){0.5}, EM_F64, EM_SHAPE(1), EM_F32, h_dev);
    em_tensor *c = em_cat((em_tensor *[]){a, b}, 2, 0);
    CHECK(c && em_tensor_dtype(c) == EM_F32, "cat i32 + f32 is f32");
    h_check_tensor("cat promoted", c, (double[]){1, 2, 0.5}, EM_SHAPE(3), 0, 0);
    em_tensor *u = em_from_data((double[]){200}, EM_F64, EM_SHAPE(1), EM_U8, h_dev);
    em_tensor *s8 = em_from_data((double[]){-100}, EM_F64, EM_SHAPE(1), EM_I8, h_dev);
    c = em_cat((em_tensor *[]){u, s8}, 2, 0);
    CHECK(c && em_tensor_dtype(c) == EM_I16, "cat u8 + i8 is i16");
    h_check_tensor("cat u8 i8", c, (double[]){200, -100}, EM_SHAPE(2), 0, 0);
    em_tensor *bo = em_from_data((double[]){1}, EM_F64, EM_SHAPE(1), EM_BOOL, h_dev);
    em_tensor *big = h_from_i64((int64_t[]){5000000000LL}, EM_SHAPE(1));
    c = em_cat((em_tensor *[]){bo, big}, 2, 0);
    CHECK(c && em_tensor_dtype(c) == EM_I64 && em_item_i64(em_narrow(c, 0, 1, 1)) == 5000000000LL,
          "cat bool + i64 keeps large values");
    /* legacy rule: 1-D [0] tensors are skipped whatever their rank */
    em_tensor *m = h_rand(EM_SHAPE(2, 3), EM_F64, H_CONTIG, -1, 1, NULL);
    em_tensor *e0 = em_zeros(EM_SHAPE(0), EM_F64, h_dev);
    c = em_cat((em_tensor *[]){e0, m, e0}, 3, 1);
    CHECK(c && em_shape_equal(em_tensor_shape(c), EM_SHAPE(2, 3)), "cat skips [0] tensors");
    c = em_cat((em_tensor *[]){e0, e0}, 2, 0);
    CHECK(c && em_tensor_numel(c) == 0, "cat of [0] tensors");
    em_scope_end();
}

static void check_stack(void)
{
    for (int k = 0; k < N_DTYPES; k += 3) {
        em_dtype dt = dtypes[k];
        for (int dim = 0; dim <= 2; dim++) {
            em_scope_begin();
            em_tensor *ts[3];
            double *vs[3];
            for (int i = 0; i < 3; i++)
                ts[i] = h_rand(EM_SHAPE(2, 4), dt, (h_layout)i, lo_for(dt), hi_for(dt), &vs[i]);
            em_shape ys = EM_SHAPE(2, 4);
            ys.rank = 3;
            for (int d = 2; d > dim; d--) ys.dims[d] = ys.dims[d - 1];
            ys.dims[dim] = 3;
            double ex[24];
            int64_t idx[EM_MAX_RANK] = {0};
            do {
                int64_t src[2], o = 0;
                for (int d = 0; d < 3; d++)
                    if (d != dim) src[o++] = idx[d];
                ex[h_offset(ys, idx)] = vs[idx[dim]][src[0] * 4 + src[1]];
            } while (h_next_index(ys, idx));
            h_check_tensor("stack", em_stack(ts, 3, dim == 2 ? -1 : dim), ex, ys, 0, 0);
            for (int i = 0; i < 3; i++) free(vs[i]);
            em_scope_end();
        }
    }
}

/* ---- split and chunk --------------------------------------------------------------------- */

static void check_pieces(const char *what, em_tensor **out, int n, const int64_t *lens,
                         const double *xv, const em_tensor *x)
{
    int64_t start = 0;
    for (int i = 0; i < n; i++) {
        double ex[64];
        for (int64_t r = 0; r < 3; r++)
            for (int64_t j = 0; j < lens[i]; j++) ex[r * lens[i] + j] = xv[r * 7 + start + j];
        h_check_tensor(what, out[i], ex, EM_SHAPE(3, lens[i]), 0, 0);
        CHECK(out[i] && em_tensor_shares_storage(out[i], x), "%s: piece %d is a view", what, i);
        start += lens[i];
    }
}

static void check_split(void)
{
    for (int lay = 0; lay < H_LAYOUT_COUNT; lay++) {
        em_scope_begin();
        double *xv;
        em_tensor *x = h_rand(EM_SHAPE(3, 7), EM_F32, (h_layout)lay, -3, 3, &xv);
        em_tensor *out[8];
        int n = -1;
        CHECK(em_split(x, 3, 1, out, 8, &n) == EM_OK && n == 3, "split into 3");
        check_pieces("split", out, n, (int64_t[]){3, 3, 1}, xv, x);
        CHECK(em_split(x, 10, -1, out, 8, &n) == EM_OK && n == 1, "split larger than the dim");
        check_pieces("split big", out, n, (int64_t[]){7}, xv, x);
        CHECK(em_split_sizes(x, (int64_t[]){1, 0, 6}, 3, 1, out) == EM_OK, "split_sizes");
        check_pieces("split_sizes", out, 3, (int64_t[]){1, 0, 6}, xv, x);
        CHECK(em_chunk(x, 3, 1, out, &n) == EM_OK && n == 3, "chunk 7 by 3");
        check_pieces("chunk", out, n, (int64_t[]){3, 3, 1}, xv, x);
        CHECK(em_chunk(x, 6, 1, out, &n) == EM_OK && n == 4, "chunk 7 by 6 gives 4 (torch)");
        check_pieces("chunk 6", out, n, (int64_t[]){2, 2, 2, 1}, xv, x);
        free(xv);
        em_scope_end();
    }
    em_scope_begin();
    em_tensor *z = em_zeros(EM_SHAPE(0, 2), EM_F32, h_dev);
    em_tensor *out[4];
    int n = 0;
    CHECK(em_chunk(z, 3, 0, out, &n) == EM_OK && n == 3 && em_tensor_numel(out[2]) == 0,
          "chunk of an empty dim gives `chunks` empty pieces");
    CHECK(em_split(z, 2, 0, out, 4, &n) == EM_OK && n == 1, "split of an empty dim");
    em_tensor *x = em_zeros(EM_SHAPE(3, 7), EM_F32, h_dev);
    CHECK(em_split(x, 2, 1, out, 3, &n) != EM_OK, "split over cap");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_split");
    CHECK(em_split(x, 0, 1, out, 3, &n) != EM_OK, "split size 0");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_split");
    CHECK(em_split_sizes(x, (int64_t[]){3, 3}, 2, 1, out) != EM_OK, "split_sizes sum");
    CHECK_ERR(EM_ERR_SHAPE, "em_split_sizes");
    CHECK(em_chunk(x, 0, 1, out, &n) != EM_OK, "chunk 0");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_chunk");
    CHECK(em_chunk(x, 2, 5, out, &n) != EM_OK, "chunk bad dim");
    CHECK_ERR(EM_ERR_INDEX, "em_chunk");
    CHECK(em_split(NULL, 2, 0, out, 3, &n) != EM_OK, "split NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_split");
    em_scope_end();
}

/* ---- repeat and tile --------------------------------------------------------------------- */

typedef struct rep_ctx {
    em_shape xs; /* aligned to the output's trailing dims */
    int lead;
} rep_ctx;

static int64_t rep_map(int d, int64_t j, const void *vctx)
{
    const rep_ctx *c = vctx;
    return j % c->xs.dims[d - c->lead];
}

static void check_repeat(void)
{
    for (int k = 0; k < N_DTYPES; k++) {
        em_dtype dt = dtypes[k];
        for (int lay = 0; lay < H_LAYOUT_COUNT; lay++) {
            em_scope_begin();
            double *xv;
            em_shape xs = EM_SHAPE(2, 3);
            em_tensor *x = h_rand(xs, dt, (h_layout)lay, lo_for(dt), hi_for(dt), &xv);
            em_shape reps[3] = {EM_SHAPE(2, 1, 3), EM_SHAPE(1, 1), EM_SHAPE(3, 0)};
            for (int r = 0; r < 3; r++) {
                em_shape ys = reps[r];
                int lead = ys.rank - 2;
                for (int d = lead; d < ys.rank; d++) ys.dims[d] *= xs.dims[d - lead];
                rep_ctx c = {xs, lead};
                double *ex = ref_map(xv, xs, ys, rep_map, &c, 0);
                h_check_tensor("repeat", em_repeat(x, reps[r]), ex, ys, 0, 0);
                free(ex);
            }
            /* tile pads reps with leading ones: (2) on [2, 3] -> (1, 2) */
            rep_ctx c = {xs, 0};
            double *ex = ref_map(xv, xs, EM_SHAPE(2, 6), rep_map, &c, 0);
            h_check_tensor("tile", em_tile(x, EM_SHAPE(2)), ex, EM_SHAPE(2, 6), 0, 0);
            free(ex);
            free(xv);
            em_scope_end();
        }
    }
    em_scope_begin();
    em_tensor *s = em_scalar(4, EM_I32, h_dev);
    h_check_tensor("repeat scalar", em_repeat(s, EM_SHAPE(3)), (double[]){4, 4, 4}, EM_SHAPE(3), 0,
                   0);
    em_tensor *x = em_zeros(EM_SHAPE(2, 3), EM_F32, h_dev);
    CHECK(em_repeat(x, EM_SHAPE(2)) == NULL, "repeat with too few repeats");
    CHECK_ERR(EM_ERR_SHAPE, "em_repeat");
    CHECK(em_repeat(x, EM_SHAPE(1, -1)) == NULL, "repeat negative");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_repeat");
    CHECK(em_tile(NULL, EM_SHAPE(2)) == NULL, "tile NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_tile");
    em_scope_end();
}

/* ---- roll -------------------------------------------------------------------------------- */

typedef struct roll_ctx {
    int64_t shift[EM_MAX_RANK];
    em_shape s;
} roll_ctx;

static int64_t roll_map(int d, int64_t j, const void *vctx)
{
    const roll_ctx *c = vctx;
    int64_t n = c->s.dims[d], m = (j - c->shift[d]) % n;
    return m < 0 ? m + n : m;
}

static void check_roll(void)
{
    for (int k = 0; k < N_DTYPES; k++) {
        em_dtype dt = dtypes[k];
        for (int lay = 0; lay < H_LAYOUT_COUNT; lay++) {
            em_scope_begin();
            double *xv;
            em_shape xs = EM_SHAPE(3, 1, 5);
            em_tensor *x = h_rand(xs, dt, (h_layout)lay, lo_for(dt), hi_for(dt), &xv);
            /* negative, large and repeated shifts */
            int64_t shifts[4] = {-4, 7, 13, -1};
            int dims[4] = {0, 1, -1, 2};
            roll_ctx c = {.s = xs};
            c.shift[0] = -4, c.shift[1] = 7, c.shift[2] = 12;
            double *ex = ref_map(xv, xs, xs, roll_map, &c, 0);
            h_check_tensor("roll", em_roll(x, shifts, dims, 4), ex, xs, 0, 0);
            free(ex);
            /* flattened: roll of the row-major sequence */
            double ex2[15];
            for (int i = 0; i < 15; i++) ex2[(i + 15 * 3 - 17) % 15] = xv[i];
            h_check_tensor("roll flat", em_roll(x, (int64_t[]){-17}, NULL, 0), ex2, xs, 0, 0);
            free(xv);
            em_scope_end();
        }
    }
    em_scope_begin();
    em_tensor *z = em_zeros(EM_SHAPE(0, 3), EM_F32, h_dev);
    em_tensor *r = em_roll(z, (int64_t[]){2}, (int[]){0}, 1);
    CHECK(r && em_tensor_numel(r) == 0, "roll of an empty tensor");
    CHECK(em_roll(z, (int64_t[]){2}, (int[]){2}, 1) == NULL, "roll bad dim");
    CHECK_ERR(EM_ERR_INDEX, "em_roll");
    CHECK(em_roll(z, NULL, NULL, 0) == NULL, "roll NULL shifts");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_roll");
    em_scope_end();
}

/* ---- pad --------------------------------------------------------------------------------- */

typedef struct pad_ctx {
    em_pad_mode mode;
    int64_t lo[EM_MAX_RANK];
    em_shape xs;
} pad_ctx;

static int64_t pad_map(int d, int64_t j, const void *vctx)
{
    const pad_ctx *c = vctx;
    int64_t n = c->xs.dims[d], k = j - c->lo[d];
    switch (c->mode) {
    case EM_PAD_CONSTANT: return k >= 0 && k < n ? k : -1;
    case EM_PAD_REPLICATE: return k < 0 ? 0 : k >= n ? n - 1 : k;
    case EM_PAD_CIRCULAR: return ((k % n) + n) % n;
    default: /* reflect: bounce off both ends without repeating the edge */
        while (k < 0 || k >= n) k = k < 0 ? -k : 2 * (n - 1) - k;
        return k;
    }
}

static void check_pad(void)
{
    static const em_dtype pdt[] = {EM_F64, EM_F32, EM_BF16, EM_I32, EM_U8, EM_BOOL};
    /* pairs from the last dim; the last set crops with negative pads */
    static const int64_t pads[4][6] = {
        {2, 1, 0, 0, 0, 0}, {1, 3, 2, 0, 0, 0}, {0, 2, 1, 1, 2, 0}, {-1, 2, 1, -2, 0, 0}};
    static const int npairs[4] = {1, 2, 3, 2};
    for (int k = 0; k < (int)(sizeof pdt / sizeof pdt[0]); k++) {
        em_dtype dt = pdt[k];
        for (int lay = 0; lay < H_LAYOUT_COUNT; lay++) {
            for (int mode = 0; mode < 4; mode++) {
                for (int p = 0; p < 4; p++) {
                    em_scope_begin();
                    double *xv;
                    em_shape xs = EM_SHAPE(2, 3, 4, 5);
                    em_tensor *x = h_rand(xs, dt, (h_layout)lay, lo_for(dt), hi_for(dt), &xv);
                    pad_ctx c = {.mode = (em_pad_mode)mode, .xs = xs};
                    em_shape ys = xs;
                    for (int q = 0; q < npairs[p]; q++) {
                        int d = 3 - q;
                        c.lo[d] = pads[p][2 * q];
                        ys.dims[d] += pads[p][2 * q] + pads[p][2 * q + 1];
                    }
                    double value = dt == EM_BOOL ? 1 : dt == EM_U8 ? 7 : -2.5;
                    double fill = h_round_to(value, dt);
                    double *ex = ref_map(xv, xs, ys, pad_map, &c, fill);
                    char what[64];
                    snprintf(what, sizeof what, "pad mode %d pads %d layout %d", mode, p, lay);
                    h_check_tensor(what, em_pad(x, pads[p], npairs[p], (em_pad_mode)mode, value),
                                   ex, ys, 0, 0);
                    free(ex);
                    free(xv);
                    em_scope_end();
                }
            }
        }
    }
    em_scope_begin();
    em_tensor *x = em_zeros(EM_SHAPE(2, 3), EM_F32, h_dev);
    CHECK(em_pad(x, (int64_t[]){3, 0}, 1, EM_PAD_REFLECT, 0) == NULL, "reflect pad >= size");
    CHECK_ERR(EM_ERR_SHAPE,
              "em_pad: reflect pad (3, 0) on dim 1 must be less than the dim's size 3");
    CHECK(em_pad(x, (int64_t[]){0, 4}, 1, EM_PAD_CIRCULAR, 0) == NULL, "circular pad > size");
    CHECK_ERR(EM_ERR_SHAPE, "em_pad");
    CHECK(em_pad(x, (int64_t[]){0, 3}, 1, EM_PAD_CIRCULAR, 0) != NULL, "circular pad == size");
    CHECK(em_pad(x, (int64_t[]){-2, -2}, 1, EM_PAD_CONSTANT, 0) == NULL, "crop below zero");
    CHECK_ERR(EM_ERR_SHAPE, "em_pad");
    CHECK(em_pad(x, (int64_t[]){1, 1, 1, 1, 1, 1}, 3, EM_PAD_CONSTANT, 0) == NULL,
          "too many pairs");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_pad");
    CHECK(em_pad(x, (int64_t[]){1, 1}, 1, (em_pad_mode)9, 0) == NULL, "bad mode");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_pad");
    CHECK(em_pad(NULL, (int64_t[]){1, 1}, 1, EM_PAD_CONSTANT, 0) == NULL, "pad NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_pad");
    em_tensor *e = em_zeros(EM_SHAPE(2, 0), EM_F32, h_dev);
    em_tensor *pe = em_pad(e, (int64_t[]){1, 2}, 1, EM_PAD_CONSTANT, 3);
    h_check_tensor("pad empty constant", pe, (double[]){3, 3, 3, 3, 3, 3}, EM_SHAPE(2, 3), 0, 0);
    CHECK(em_pad(e, (int64_t[]){1, 0}, 1, EM_PAD_REPLICATE, 0) == NULL, "replicate of empty");
    CHECK_ERR(EM_ERR_SHAPE, "em_pad");
    em_scope_end();
}

static void check_bad_cat(void)
{
    em_scope_begin();
    em_tensor *a = em_zeros(EM_SHAPE(2, 3), EM_F32, h_dev);
    em_tensor *b = em_zeros(EM_SHAPE(2, 4), EM_F32, h_dev);
    CHECK(em_cat((em_tensor *[]){a, b}, 2, 0) == NULL, "cat mismatched shapes");
    CHECK_ERR(EM_ERR_SHAPE, "em_cat: tensors[1] has shape [2, 4]");
    CHECK(em_cat((em_tensor *[]){a, b}, 2, 2) == NULL, "cat bad dim");
    CHECK_ERR(EM_ERR_INDEX, "em_cat");
    CHECK(em_cat((em_tensor *[]){a, NULL}, 2, 0) == NULL, "cat NULL element");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_cat");
    CHECK(em_cat(NULL, 2, 0) == NULL, "cat NULL list");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_cat");
    CHECK(em_cat((em_tensor *[]){a}, 0, 0) == NULL, "cat of nothing");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_cat");
    em_tensor *c = em_zeros(EM_SHAPE(2, 3, 1), EM_F32, h_dev);
    CHECK(em_cat((em_tensor *[]){a, c}, 2, 0) == NULL, "cat ranks differ");
    CHECK_ERR(EM_ERR_SHAPE, "em_cat");
    CHECK(em_stack((em_tensor *[]){a, b}, 2, 0) == NULL, "stack shapes differ");
    CHECK_ERR(EM_ERR_SHAPE, "em_stack");
    CHECK(em_stack((em_tensor *[]){a, a}, 2, 3) == NULL, "stack bad dim");
    CHECK_ERR(EM_ERR_INDEX, "em_stack");
    /* a NULL from an earlier failed op keeps the first error */
    em_tensor *bad = em_cat((em_tensor *[]){a, b}, 2, 0);
    CHECK(em_cat((em_tensor *[]){bad, a}, 2, 0) == NULL, "cat propagates NULL");
    CHECK_ERR(EM_ERR_SHAPE, "em_cat: tensors[1]");
    em_scope_end();
}

void conf_combine(void)
{
    check_cat();
    check_stack();
    check_bad_cat();
    check_split();
    check_repeat();
    check_roll();
    check_pad();
}
