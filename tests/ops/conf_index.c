/* Conformance of the index family against f64 references: gather, scatter (every mode),
 * index_select, index_add, masked_select, nonzero, slice_assign, embedding, over dtypes and
 * layouts of every operand, duplicates, size-0 and rank-0 cases, and bad inputs. */
#include <string.h>

#include "conf.h"

static const em_dtype val_dtypes[] = {EM_F32, EM_F64, EM_F16, EM_BF16,
                                      EM_I64, EM_I32, EM_U8,  EM_BOOL};
#define N_VAL_DTYPES (int)(sizeof val_dtypes / sizeof val_dtypes[0])
static const em_dtype idx_dtypes[] = {EM_I64, EM_I32, EM_I16, EM_I8, EM_U8};
#define N_IDX_DTYPES (int)(sizeof idx_dtypes / sizeof idx_dtypes[0])

/* Value range for random data of dt. */
static double lo_of(em_dtype dt)
{
    return dt == EM_U8 ? 0 : -10;
}

/* Wraps an integer result to dt's width, as the kernels store it. */
static double wrap_to(int64_t v, em_dtype dt)
{
    switch (dt) {
    case EM_I32: return (int32_t)(uint32_t)(uint64_t)v;
    case EM_I16: return (int16_t)(uint16_t)(uint64_t)v;
    case EM_I8: return (int8_t)(uint8_t)(uint64_t)v;
    case EM_U8: return (uint8_t)(uint64_t)v;
    case EM_BOOL: return v != 0;
    default: return (double)v;
    }
}

/* Reference combine of a scatter mode, rounded to dt. */
static double ref_combine(em_reduce_mode mode, double a, double b, em_dtype dt)
{
    if (!em_dtype_is_float(dt)) {
        int64_t x = (int64_t)a, y = (int64_t)b, r;
        switch (mode) {
        case EM_SCATTER_ADD: r = x + y; break;
        case EM_SCATTER_MUL: r = x * y; break;
        case EM_SCATTER_MIN: r = y < x ? y : x; break;
        case EM_SCATTER_MAX: r = y > x ? y : x; break;
        default: r = y; break;
        }
        return wrap_to(r, dt);
    }
    double r;
    switch (mode) {
    case EM_SCATTER_ADD: r = a + b; break;
    case EM_SCATTER_MUL: r = a * b; break;
    case EM_SCATTER_MIN: r = (isnan(a) || isnan(b)) ? NAN : fmin(a, b); break;
    case EM_SCATTER_MAX: r = (isnan(a) || isnan(b)) ? NAN : fmax(a, b); break;
    default: r = b; break;
    }
    return h_round_to(r, dt);
}

/* ---- gather ------------------------------------------------------------------------------ */

static void gather_case(em_dtype dt, em_dtype idt, h_layout xl, h_layout il, em_shape xs,
                        em_shape is, int dim)
{
    em_scope_begin();
    double *xv, *iv;
    em_tensor *x = h_rand(xs, dt, xl, lo_of(dt), 10, &xv);
    int nd = dim < 0 ? dim + (xs.rank ? xs.rank : 1) : dim;
    int64_t size = xs.rank ? xs.dims[nd] : 1;
    em_tensor *index = h_rand(is, idt, il, 0, (double)size, &iv);
    int64_t n = em_shape_numel(is);
    double *ref = malloc((size_t)(n ? n : 1) * sizeof *ref);
    int64_t idx[EM_MAX_RANK] = {0};
    if (n) do {
            int64_t src[EM_MAX_RANK];
            memcpy(src, idx, sizeof src);
            if (xs.rank) src[nd] = (int64_t)iv[h_offset(is, idx)];
            ref[h_offset(is, idx)] = xv[h_offset(xs, src)];
        } while (h_next_index(is, idx));
    em_tensor *out = em_gather(x, dim, index);
    char what[96];
    snprintf(what, sizeof what, "gather %s idx %s dim %d layouts %d/%d", em_dtype_name(dt),
             em_dtype_name(idt), dim, (int)xl, (int)il);
    h_check_tensor(what, out, ref, is, 0, 0);
    CHECK(!out || em_tensor_dtype(out) == dt, "%s: dtype", what);
    CHECK(!out || em_tensor_is_contiguous(out), "%s: contiguous", what);
    free(xv);
    free(iv);
    free(ref);
    em_scope_end();
}

static void test_gather(void)
{
    for (int k = 0; k < N_VAL_DTYPES; k++)
        for (int xl = 0; xl < H_LAYOUT_COUNT; xl++)
            for (int il = 0; il < H_LAYOUT_COUNT; il++) {
                em_dtype idt = idx_dtypes[(k + xl + il) % N_IDX_DTYPES];
                gather_case(val_dtypes[k], idt, xl, il, EM_SHAPE(4, 5, 3), EM_SHAPE(3, 4, 2), 0);
                gather_case(val_dtypes[k], idt, xl, il, EM_SHAPE(4, 5, 3), EM_SHAPE(2, 7, 3), 1);
                gather_case(val_dtypes[k], idt, xl, il, EM_SHAPE(4, 5, 3), EM_SHAPE(4, 5, 6), -1);
            }
    /* size-0 and size-1 dims, rank 0, a larger contiguous f32 case (threads) */
    gather_case(EM_F32, EM_I64, H_CONTIG, H_CONTIG, EM_SHAPE(4, 5), EM_SHAPE(0, 3), 1);
    gather_case(EM_F32, EM_I64, H_CONTIG, H_CONTIG, EM_SHAPE(4, 5), EM_SHAPE(4, 0), 1);
    gather_case(EM_F64, EM_I64, H_CONTIG, H_CONTIG, EM_SHAPE(1, 5), EM_SHAPE(1, 1), 1);
    gather_case(EM_F64, EM_I32, H_CONTIG, H_CONTIG, EM_SCALAR, EM_SCALAR, 0);
    gather_case(EM_I64, EM_I64, H_CONTIG, H_CONTIG, EM_SCALAR, EM_SCALAR, -1);
    gather_case(EM_F32, EM_I64, H_CONTIG, H_CONTIG, EM_SHAPE(64, 700), EM_SHAPE(64, 800), 1);
    gather_case(EM_F32, EM_I64, H_STRIDED, H_TRANSPOSED, EM_SHAPE(60, 70), EM_SHAPE(60, 800), 1);

    /* NaN and Inf are copied as they are */
    em_scope_begin();
    double sv[4] = {NAN, INFINITY, -INFINITY, -0.0};
    int64_t iv[5] = {3, 0, 1, 2, 0};
    double want[5] = {-0.0, NAN, INFINITY, -INFINITY, NAN};
    for (int k = 0; k < 4; k++) {
        em_dtype dt = val_dtypes[k];
        em_tensor *x = em_from_data(sv, EM_F64, EM_SHAPE(4), dt, h_dev);
        em_tensor *i = h_from_i64(iv, EM_SHAPE(5));
        h_check_tensor("gather NaN/Inf", em_gather(x, 0, i), want, EM_SHAPE(5), 0, 0);
        h_check_tensor("index_select NaN/Inf", em_index_select(x, 0, i), want, EM_SHAPE(5), 0, 0);
        em_tensor *w = em_reshape(x, EM_SHAPE(4, 1));
        h_check_tensor("embedding NaN/Inf", em_embedding(w, i), want, EM_SHAPE(5, 1), 0, 0);
    }
    em_scope_end();
}

/* ---- scatter ----------------------------------------------------------------------------- */

static void scatter_case(em_dtype dt, em_dtype idt, h_layout xl, h_layout il, h_layout sl,
                         em_shape xs, em_shape is, em_shape ss, int dim, em_reduce_mode mode)
{
    em_scope_begin();
    double *xv, *iv, *sv;
    /* small magnitudes keep products of duplicates finite in f16 */
    double lo = mode == EM_SCATTER_MUL ? (dt == EM_U8 ? 0 : -3) : lo_of(dt);
    double hi = mode == EM_SCATTER_MUL ? 3 : 10;
    em_tensor *x = h_rand(xs, dt, xl, lo, hi, &xv);
    int nd = dim < 0 ? dim + (xs.rank ? xs.rank : 1) : dim;
    int64_t size = xs.rank ? xs.dims[nd] : 1;
    em_tensor *index = h_rand(is, idt, il, 0, (double)size, &iv);
    em_tensor *src = h_rand(ss, dt, sl, lo, hi, &sv);
    int64_t nx = em_shape_numel(xs), n = em_shape_numel(is);
    double *ref = malloc((size_t)(nx ? nx : 1) * sizeof *ref);
    memcpy(ref, xv, (size_t)nx * sizeof *ref);
    int64_t idx[EM_MAX_RANK] = {0};
    if (n) do {
            int64_t dst[EM_MAX_RANK];
            memcpy(dst, idx, sizeof dst);
            if (xs.rank) dst[nd] = (int64_t)iv[h_offset(is, idx)];
            double s = ss.rank ? sv[h_offset(ss, idx)] : sv[0];
            double *o = &ref[h_offset(xs, dst)];
            *o = ref_combine(mode, *o, s, dt);
        } while (h_next_index(is, idx));
    em_tensor *out = em_scatter(x, dim, index, src, mode);
    char what[128];
    snprintf(what, sizeof what, "scatter mode %d %s idx %s dim %d layouts %d/%d/%d", (int)mode,
             em_dtype_name(dt), em_dtype_name(idt), dim, (int)xl, (int)il, (int)sl);
    h_check_tensor(what, out, ref, xs, h_atol(dt), h_rtol(dt));
    /* the input is untouched */
    h_check_tensor("scatter leaves x alone", x, xv, xs, 0, 0);
    free(xv);
    free(iv);
    free(sv);
    free(ref);
    em_scope_end();
}

static void test_scatter(void)
{
    for (int mode = EM_SCATTER_ASSIGN; mode <= EM_SCATTER_MAX; mode++)
        for (int k = 0; k < N_VAL_DTYPES; k++)
            for (int l = 0; l < H_LAYOUT_COUNT; l++) {
                em_dtype dt = val_dtypes[k];
                em_dtype idt = idx_dtypes[(k + l) % N_IDX_DTYPES];
                int l2 = (l + 1) % H_LAYOUT_COUNT, l3 = (l + 2) % H_LAYOUT_COUNT;
                /* index.size(dim) larger than x's: plenty of duplicates */
                scatter_case(dt, idt, l, l2, l3, EM_SHAPE(4, 5, 3), EM_SHAPE(9, 4, 2),
                             EM_SHAPE(9, 5, 3), 0, mode);
                scatter_case(dt, idt, l3, l, l2, EM_SHAPE(4, 5, 3), EM_SHAPE(3, 8, 3),
                             EM_SHAPE(4, 9, 3), 1, mode);
                scatter_case(dt, idt, l2, l3, l, EM_SHAPE(4, 5, 3), EM_SHAPE(4, 5, 7),
                             EM_SHAPE(4, 5, 7), -1, mode);
                /* rank-0 src: one value for every index */
                scatter_case(dt, idt, l, l, l, EM_SHAPE(4, 5), EM_SHAPE(3, 6), EM_SCALAR, 1, mode);
            }
    scatter_case(EM_F32, EM_I64, H_CONTIG, H_CONTIG, H_CONTIG, EM_SHAPE(4, 5), EM_SHAPE(0, 5),
                 EM_SHAPE(0, 5), 0, EM_SCATTER_ADD);
    scatter_case(EM_F64, EM_I64, H_CONTIG, H_CONTIG, H_CONTIG, EM_SCALAR, EM_SCALAR, EM_SCALAR, 0,
                 EM_SCATTER_MUL);
    scatter_case(EM_I32, EM_I32, H_CONTIG, H_CONTIG, H_CONTIG, EM_SCALAR, EM_SCALAR, EM_SCALAR, -1,
                 EM_SCATTER_ASSIGN);

    em_scope_begin();
    /* assign with duplicates: the last write in row-major order wins */
    double xv[4] = {0, 0, 0, 0}, sv[6] = {1, 2, 3, 4, 5, 6};
    int64_t iv[6] = {1, 1, 3, 1, 3, 0};
    em_tensor *x = h_from_f64(xv, EM_SHAPE(4));
    em_tensor *i = h_from_i64(iv, EM_SHAPE(6));
    em_tensor *s = h_from_f64(sv, EM_SHAPE(6));
    double want[4] = {6, 4, 0, 5};
    h_check_tensor("scatter assign last wins", em_scatter(x, 0, i, s, EM_SCATTER_ASSIGN), want,
                   EM_SHAPE(4), 0, 0);
    double want_add[4] = {6, 7, 0, 8};
    h_check_tensor("scatter add dup", em_scatter(x, 0, i, s, EM_SCATTER_ADD), want_add, EM_SHAPE(4),
                   0, 0);
    /* NaN propagates through min/max; Inf combines */
    double nv[3] = {NAN, INFINITY, -1};
    int64_t niv[3] = {0, 2, 2};
    em_tensor *nsrc = h_from_f64(nv, EM_SHAPE(3));
    em_tensor *ni = h_from_i64(niv, EM_SHAPE(3));
    double want_max[4] = {NAN, 0, INFINITY, 0};
    h_check_tensor("scatter max NaN", em_scatter(x, 0, ni, nsrc, EM_SCATTER_MAX), want_max,
                   EM_SHAPE(4), 0, 0);
    double want_min[4] = {NAN, 0, -1, 0};
    h_check_tensor("scatter min NaN", em_scatter(x, 0, ni, nsrc, EM_SCATTER_MIN), want_min,
                   EM_SHAPE(4), 0, 0);
    /* i64 add is exact beyond 2^53 */
    int64_t big[2] = {(1LL << 53) + 1, 3}, bi[2] = {0, 0}, bs[2] = {1, 1};
    em_tensor *bx = h_from_i64(big, EM_SHAPE(2));
    em_tensor *bsrc = h_from_i64(bs, EM_SHAPE(2));
    em_tensor *bidx = h_from_i64(bi, EM_SHAPE(2));
    int64_t got[2] = {0, 0};
    em_tensor *bo = em_scatter(bx, 0, bidx, bsrc, EM_SCATTER_ADD);
    CHECK(bo && em_to_data(bo, got, EM_I64, 2) == EM_OK && got[0] == (1LL << 53) + 3 && got[1] == 3,
          "scatter i64 add exact: got %lld %lld", (long long)got[0], (long long)got[1]);
    /* a float scalar src into an integer x truncates */
    em_tensor *ix = em_zeros(EM_SHAPE(3), EM_I32, h_dev);
    em_tensor *one = h_from_i64((int64_t[]){2}, EM_SHAPE(1));
    double want_ix[3] = {0, 0, 2};
    h_check_tensor("scatter f64 scalar into i32",
                   em_scatter(ix, 0, one, em_scalar(2.75, EM_F64, h_dev), EM_SCATTER_ASSIGN),
                   want_ix, EM_SHAPE(3), 0, 0);
    em_scope_end();
}

/* ---- index_select and index_add ---------------------------------------------------------- */

static void index_select_case(em_dtype dt, em_dtype idt, h_layout xl, h_layout il, em_shape xs,
                              em_shape is, int dim)
{
    em_scope_begin();
    double *xv, *iv;
    em_tensor *x = h_rand(xs, dt, xl, lo_of(dt), 10, &xv);
    int nd = dim < 0 ? dim + (xs.rank ? xs.rank : 1) : dim;
    int64_t size = xs.rank ? xs.dims[nd] : 1;
    em_tensor *index = h_rand(is, idt, il, 0, (double)size, &iv);
    em_shape os = xs;
    if (xs.rank) os.dims[nd] = em_shape_numel(is);
    int64_t n = em_shape_numel(os);
    double *ref = malloc((size_t)(n ? n : 1) * sizeof *ref);
    int64_t idx[EM_MAX_RANK] = {0};
    if (n) do {
            int64_t src[EM_MAX_RANK];
            memcpy(src, idx, sizeof src);
            if (xs.rank) src[nd] = (int64_t)iv[idx[nd]];
            ref[h_offset(os, idx)] = xv[h_offset(xs, src)];
        } while (h_next_index(os, idx));
    char what[96];
    snprintf(what, sizeof what, "index_select %s idx %s dim %d layouts %d/%d", em_dtype_name(dt),
             em_dtype_name(idt), dim, (int)xl, (int)il);
    h_check_tensor(what, em_index_select(x, dim, index), ref, os, 0, 0);
    free(xv);
    free(iv);
    free(ref);
    em_scope_end();
}

static void index_add_case(em_dtype dt, em_dtype idt, h_layout xl, h_layout il, h_layout sl,
                           em_shape xs, int64_t n_idx, int dim, double alpha)
{
    em_scope_begin();
    double *xv, *iv, *sv;
    em_tensor *x = h_rand(xs, dt, xl, lo_of(dt), 10, &xv);
    int nd = dim < 0 ? dim + (xs.rank ? xs.rank : 1) : dim;
    int64_t size = xs.rank ? xs.dims[nd] : 1;
    em_shape is = xs.rank ? EM_SHAPE(n_idx) : EM_SCALAR;
    em_tensor *index = h_rand(is, idt, il, 0, (double)size, &iv);
    em_shape ss = xs;
    if (xs.rank) ss.dims[nd] = n_idx;
    em_tensor *src = h_rand(ss, dt, sl, lo_of(dt), 10, &sv);
    int64_t nx = em_shape_numel(xs), ns = em_shape_numel(ss);
    double *ref = malloc((size_t)(nx ? nx : 1) * sizeof *ref);
    memcpy(ref, xv, (size_t)nx * sizeof *ref);
    int64_t idx[EM_MAX_RANK] = {0};
    if (ns) do {
            int64_t dst[EM_MAX_RANK];
            memcpy(dst, idx, sizeof dst);
            if (xs.rank) dst[nd] = (int64_t)iv[idx[nd]];
            double *o = &ref[h_offset(xs, dst)];
            double s = sv[h_offset(ss, idx)];
            if (em_dtype_is_float(dt))
                *o = h_round_to(*o + alpha * s, dt);
            else
                *o = wrap_to((int64_t)*o + (int64_t)alpha * (int64_t)s, dt);
        } while (h_next_index(ss, idx));
    char what[128];
    snprintf(what, sizeof what, "index_add %s idx %s dim %d alpha %g layouts %d/%d/%d",
             em_dtype_name(dt), em_dtype_name(idt), dim, alpha, (int)xl, (int)il, (int)sl);
    h_check_tensor(what, em_index_add(x, dim, index, src, alpha), ref, xs, h_atol(dt), h_rtol(dt));
    free(xv);
    free(iv);
    free(sv);
    free(ref);
    em_scope_end();
}

static void test_index_select_add(void)
{
    for (int k = 0; k < N_VAL_DTYPES; k++)
        for (int xl = 0; xl < H_LAYOUT_COUNT; xl++)
            for (int il = 0; il < H_LAYOUT_COUNT; il++) {
                em_dtype dt = val_dtypes[k];
                em_dtype idt = idx_dtypes[(k + xl + il) % N_IDX_DTYPES];
                index_select_case(dt, idt, xl, il, EM_SHAPE(4, 5, 6), EM_SHAPE(7), 0);
                index_select_case(dt, idt, xl, il, EM_SHAPE(4, 5, 6), EM_SHAPE(3), 1);
                index_select_case(dt, idt, xl, il, EM_SHAPE(4, 5, 3), EM_SHAPE(9), -1);
                double alpha = em_dtype_is_float(dt) ? 1.5 : (dt == EM_I64 ? -2 : 1);
                h_layout sl = (h_layout)((xl + il) % H_LAYOUT_COUNT);
                index_add_case(dt, idt, xl, il, sl, EM_SHAPE(4, 5, 3), 7, 0, alpha);
                index_add_case(dt, idt, xl, il, sl, EM_SHAPE(4, 5, 3), 2, 1, alpha);
                index_add_case(dt, idt, xl, il, sl, EM_SHAPE(4, 5, 3), 6, -1, alpha);
            }
    /* rank-0 index, size-0 index, rank-0 x, size-0 x, a larger case (threads) */
    index_select_case(EM_F32, EM_I64, H_CONTIG, H_CONTIG, EM_SHAPE(4, 5), EM_SCALAR, 0);
    index_select_case(EM_F32, EM_I64, H_CONTIG, H_CONTIG, EM_SHAPE(4, 5), EM_SHAPE(0), 1);
    index_select_case(EM_F64, EM_I32, H_CONTIG, H_CONTIG, EM_SCALAR, EM_SCALAR, 0);
    index_select_case(EM_F64, EM_I32, H_CONTIG, H_CONTIG, EM_SCALAR, EM_SHAPE(1), -1);
    index_select_case(EM_F32, EM_I64, H_CONTIG, H_CONTIG, EM_SHAPE(0, 5), EM_SHAPE(3), 1);
    index_select_case(EM_F32, EM_I64, H_CONTIG, H_STRIDED, EM_SHAPE(300, 200), EM_SHAPE(400), 0);
    index_add_case(EM_F32, EM_I64, H_CONTIG, H_CONTIG, H_CONTIG, EM_SHAPE(4, 5), 0, 1, 2.0);
    index_add_case(EM_F64, EM_I64, H_CONTIG, H_CONTIG, H_CONTIG, EM_SCALAR, 1, 0, -0.5);
    index_add_case(EM_F16, EM_I64, H_FLIPPED, H_FLIPPED, H_FLIPPED, EM_SHAPE(3, 1), 4, 1, 1);
}

/* ---- masked_select and nonzero ----------------------------------------------------------- */

static void masked_select_case(em_dtype dt, h_layout xl, h_layout ml, em_shape xs, em_shape ms)
{
    em_scope_begin();
    double *xv, *mv;
    em_tensor *x = h_rand(xs, dt, xl, lo_of(dt), 10, &xv);
    em_tensor *mask = h_rand(ms, EM_BOOL, ml, -1.2, 1, &mv); /* about 40% true */
    em_shape bs = {.rank = xs.rank > ms.rank ? xs.rank : ms.rank};
    for (int d = 0; d < bs.rank; d++) {
        int dx = d - (bs.rank - xs.rank), dm = d - (bs.rank - ms.rank);
        int64_t a = dx >= 0 ? xs.dims[dx] : 1, b = dm >= 0 ? ms.dims[dm] : 1;
        bs.dims[d] = a == 1 ? b : a;
    }
    int64_t nb = em_shape_numel(bs), k = 0;
    double *ref = malloc((size_t)(nb ? nb : 1) * sizeof *ref);
    int64_t idx[EM_MAX_RANK] = {0};
    if (nb) do {
            int64_t ix[EM_MAX_RANK], im[EM_MAX_RANK];
            for (int d = 0; d < xs.rank; d++) {
                int64_t v = idx[d + bs.rank - xs.rank];
                ix[d] = xs.dims[d] == 1 ? 0 : v;
            }
            for (int d = 0; d < ms.rank; d++) {
                int64_t v = idx[d + bs.rank - ms.rank];
                im[d] = ms.dims[d] == 1 ? 0 : v;
            }
            if (mv[h_offset(ms, im)] != 0) ref[k++] = xv[h_offset(xs, ix)];
        } while (h_next_index(bs, idx));
    char what[96];
    snprintf(what, sizeof what, "masked_select %s layouts %d/%d", em_dtype_name(dt), (int)xl,
             (int)ml);
    h_check_tensor(what, em_masked_select(x, mask), ref, EM_SHAPE(k), 0, 0);
    free(xv);
    free(mv);
    free(ref);
    em_scope_end();
}

static void nonzero_case(em_dtype dt, h_layout l, em_shape s)
{
    em_scope_begin();
    int64_t n = em_shape_numel(s);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    double specials[4] = {NAN, INFINITY, -0.0, 0.5};
    for (int64_t i = 0; i < n; i++) {
        double u = h_uniform();
        if (u < 0.5)
            v[i] = 0;
        else if (em_dtype_is_float(dt) && u < 0.6)
            v[i] = specials[i % 4];
        else
            v[i] = h_round_to(dt == EM_BOOL ? 1 : floor(1 + 5 * h_uniform()), dt);
    }
    em_tensor *x = h_from_values(v, s, dt, l);
    double *ref = malloc((size_t)(n ? n : 1) * (size_t)(s.rank ? s.rank : 1) * sizeof *ref);
    int64_t k = 0, idx[EM_MAX_RANK] = {0};
    if (n) do {
            if (v[h_offset(s, idx)] != 0) {
                for (int d = 0; d < s.rank; d++) ref[k * s.rank + d] = (double)idx[d];
                k++;
            }
        } while (h_next_index(s, idx));
    char what[96];
    snprintf(what, sizeof what, "nonzero %s rank %d layout %d", em_dtype_name(dt), s.rank, (int)l);
    em_tensor *out = em_nonzero(x);
    h_check_tensor(what, out, ref, EM_SHAPE(k, s.rank), 0, 0);
    CHECK(!out || em_tensor_dtype(out) == EM_I64, "%s: dtype i64", what);
    free(v);
    free(ref);
    em_scope_end();
}

static void test_masked_nonzero(void)
{
    for (int k = 0; k < N_VAL_DTYPES; k++)
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            em_dtype dt = val_dtypes[k];
            h_layout l2 = (h_layout)((l + 1) % H_LAYOUT_COUNT);
            masked_select_case(dt, l, l2, EM_SHAPE(3, 4, 5), EM_SHAPE(3, 4, 5));
            masked_select_case(dt, l, l2, EM_SHAPE(3, 1, 5), EM_SHAPE(4, 1)); /* both broadcast */
            masked_select_case(dt, l, l2, EM_SHAPE(4, 5), EM_SHAPE(2, 1, 5));
            nonzero_case(dt, l, EM_SHAPE(4, 5, 3));
            nonzero_case(dt, l, EM_SHAPE(17));
            nonzero_case(dt, l, EM_SHAPE(2, 1, 3, 2));
        }
    masked_select_case(EM_F32, H_CONTIG, H_CONTIG, EM_SHAPE(0, 3), EM_SHAPE(3));
    masked_select_case(EM_F32, H_CONTIG, H_CONTIG, EM_SHAPE(4, 3), EM_SHAPE(0, 1, 1));
    masked_select_case(EM_F64, H_CONTIG, H_CONTIG, EM_SCALAR, EM_SCALAR);
    masked_select_case(EM_F64, H_CONTIG, H_CONTIG, EM_SCALAR, EM_SHAPE(6));
    nonzero_case(EM_F32, H_CONTIG, EM_SHAPE(0, 4));
    nonzero_case(EM_F32, H_CONTIG, EM_SHAPE(300, 200));
    em_scope_begin();
    em_tensor *z = em_nonzero(em_scalar(0, EM_F32, h_dev));
    em_tensor *o = em_nonzero(em_scalar(-2, EM_I64, h_dev));
    em_shape zs = em_tensor_shape(z), os = em_tensor_shape(o);
    CHECK(z && em_shape_equal(zs, EM_SHAPE(0, 0)), "nonzero of a zero scalar is [0, 0]");
    CHECK(o && em_shape_equal(os, EM_SHAPE(1, 0)), "nonzero of a non-zero scalar is [1, 0]");
    double t[2] = {1, 2}, f[2] = {0, 0};
    em_tensor *all =
        em_masked_select(h_from_f64(t, EM_SHAPE(2)), em_ones(EM_SHAPE(2), EM_BOOL, h_dev));
    h_check_tensor("masked_select all true", all, t, EM_SHAPE(2), 0, 0);
    em_tensor *none = em_masked_select(h_from_f64(t, EM_SHAPE(2)), h_from_f64(f, EM_SHAPE(2)));
    CHECK_ERR(EM_ERR_DTYPE, "em_masked_select: mask must be bool, got f64");
    CHECK(none == NULL, "masked_select with an f64 mask fails");
    em_scope_end();
}

/* ---- slice_assign ------------------------------------------------------------------------ */

static void slice_assign_case(em_dtype dt, em_dtype sdt, h_layout xl, h_layout sl, em_shape xs,
                              const int64_t *starts, const int64_t *ends, const int64_t *steps,
                              bool broadcast_src)
{
    em_scope_begin();
    double *xv, *sv;
    em_tensor *x = h_rand(xs, dt, xl, lo_of(dt), 10, &xv);
    int64_t st[EM_MAX_RANK], sp[EM_MAX_RANK];
    em_shape region = xs;
    for (int d = 0; d < xs.rank; d++) {
        int64_t n = xs.dims[d], a = starts ? starts[d] : 0, b = ends ? ends[d] : n;
        int64_t c = steps ? steps[d] : 1;
        if (a < 0) a += n;
        if (b < 0) b += n;
        a = a < 0 ? 0 : (a > n ? n : a);
        b = b < a ? a : (b > n ? n : b);
        st[d] = a;
        sp[d] = c;
        region.dims[d] = (b - a + c - 1) / c;
    }
    /* broadcast_src: src has size 1 in dim 0 and no leading dim */
    em_shape ss = region;
    if (broadcast_src && ss.rank >= 2) {
        for (int d = 0; d < ss.rank - 1; d++) ss.dims[d] = ss.dims[d + 1];
        ss.rank--;
    }
    em_tensor *src = h_rand(ss, sdt, sl, lo_of(sdt), 10, &sv);
    int64_t nx = em_shape_numel(xs), nr = em_shape_numel(region);
    double *ref = malloc((size_t)(nx ? nx : 1) * sizeof *ref);
    memcpy(ref, xv, (size_t)nx * sizeof *ref);
    int64_t idx[EM_MAX_RANK] = {0};
    if (nr) do {
            int64_t dst[EM_MAX_RANK], si[EM_MAX_RANK];
            for (int d = 0; d < xs.rank; d++) dst[d] = st[d] + idx[d] * sp[d];
            int lead = region.rank - ss.rank;
            for (int d = 0; d < ss.rank; d++) si[d] = idx[d + lead];
            double s = sv[h_offset(ss, si)];
            ref[h_offset(xs, dst)] = em_dtype_is_float(dt) ? h_round_to(s, dt)
                                     : dt == EM_BOOL       ? s != 0
                                                           : wrap_to((int64_t)s, dt);
        } while (h_next_index(region, idx));
    char what[96];
    snprintf(what, sizeof what, "slice_assign %s <- %s layouts %d/%d", em_dtype_name(dt),
             em_dtype_name(sdt), (int)xl, (int)sl);
    h_check_tensor(what, em_slice_assign(x, starts, ends, steps, src), ref, xs, 0, 0);
    h_check_tensor("slice_assign leaves x alone", x, xv, xs, 0, 0);
    free(xv);
    free(sv);
    free(ref);
    em_scope_end();
}

static void test_slice_assign(void)
{
    int64_t starts[3] = {1, -4, 0}, ends[3] = {6, 100, -1}, steps[3] = {2, 1, 3};
    int64_t s2[2] = {-100, 2}, e2[2] = {3, 2}; /* an empty region in dim 1 */
    for (int k = 0; k < N_VAL_DTYPES; k++)
        for (int l = 0; l < H_LAYOUT_COUNT; l++) {
            em_dtype dt = val_dtypes[k];
            h_layout l2 = (h_layout)((l + 1) % H_LAYOUT_COUNT);
            slice_assign_case(dt, dt, l, l2, EM_SHAPE(6, 5, 4), starts, ends, steps, false);
            slice_assign_case(dt, dt, l, l2, EM_SHAPE(6, 5, 4), starts, ends, steps, true);
            slice_assign_case(dt, dt, l, l2, EM_SHAPE(3, 4), NULL, NULL, NULL, false);
            slice_assign_case(dt, EM_I32, l, l2, EM_SHAPE(3, 4), s2, NULL, NULL, false);
            slice_assign_case(dt, dt, l, l2, EM_SHAPE(3, 4), s2, e2, NULL, false);
        }
    slice_assign_case(EM_F64, EM_F32, H_CONTIG, H_CONTIG, EM_SCALAR, NULL, NULL, NULL, false);
    slice_assign_case(EM_F32, EM_F32, H_CONTIG, H_CONTIG, EM_SHAPE(0, 3), NULL, NULL, NULL, false);
    em_scope_begin();
    /* a rank-0 src fills the region */
    em_tensor *x = em_zeros(EM_SHAPE(2, 3), EM_F32, h_dev);
    int64_t a[2] = {0, 1};
    double want[6] = {0, 7, 7, 0, 7, 7};
    h_check_tensor("slice_assign scalar src",
                   em_slice_assign(x, a, NULL, NULL, em_scalar(7, EM_F32, h_dev)), want,
                   EM_SHAPE(2, 3), 0, 0);
    em_scope_end();
}

/* ---- embedding --------------------------------------------------------------------------- */

static void embedding_case(em_dtype dt, em_dtype idt, h_layout wl, h_layout il, int64_t num,
                           int64_t dim, em_shape is)
{
    em_scope_begin();
    double *wv, *iv;
    em_tensor *w = h_rand(EM_SHAPE(num, dim), dt, wl, -10, 10, &wv);
    em_tensor *index = h_rand(is, idt, il, 0, (double)num, &iv);
    int64_t n = em_shape_numel(is);
    em_shape os = is;
    os.dims[os.rank++] = dim;
    double *ref = malloc((size_t)(n * dim > 0 ? n * dim : 1) * sizeof *ref);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < dim; j++) ref[i * dim + j] = wv[(int64_t)iv[i] * dim + j];
    char what[96];
    snprintf(what, sizeof what, "embedding %s idx %s dim %lld layouts %d/%d", em_dtype_name(dt),
             em_dtype_name(idt), (long long)dim, (int)wl, (int)il);
    h_check_tensor(what, em_embedding(w, index), ref, os, 0, 0);
    free(wv);
    free(iv);
    free(ref);
    em_scope_end();
}

static void test_embedding(void)
{
    const em_dtype fdt[4] = {EM_F32, EM_F64, EM_F16, EM_BF16};
    for (int k = 0; k < 4; k++)
        for (int wl = 0; wl < H_LAYOUT_COUNT; wl++)
            for (int il = 0; il < H_LAYOUT_COUNT; il++) {
                em_dtype idt = idx_dtypes[(k + wl + il) % N_IDX_DTYPES];
                embedding_case(fdt[k], idt, wl, il, 7, 5, EM_SHAPE(2, 3));
                embedding_case(fdt[k], idt, wl, il, 7, 3, EM_SHAPE(4, 2, 3));
                embedding_case(fdt[k], idt, wl, il, 7, 1, EM_SHAPE(6));
            }
    embedding_case(EM_F32, EM_I64, H_CONTIG, H_CONTIG, 7, 5, EM_SCALAR);
    embedding_case(EM_F32, EM_I64, H_CONTIG, H_CONTIG, 7, 5, EM_SHAPE(0));
    embedding_case(EM_F32, EM_I64, H_CONTIG, H_CONTIG, 7, 0, EM_SHAPE(3));
    embedding_case(EM_F32, EM_I64, H_CONTIG, H_CONTIG, 100, 64, EM_SHAPE(16, 40));
}

/* ---- bad inputs -------------------------------------------------------------------------- */

static void test_errors(void)
{
    em_scope_begin();
    double xv[15];
    for (int i = 0; i < 15; i++) xv[i] = i;
    em_tensor *x = h_from_f64(xv, EM_SHAPE(3, 5));
    int64_t bad_hi[4] = {0, 7, 1, 9}, bad_neg[4] = {0, 1, -1, 2}, good[4] = {0, 4, 1, 2};
    em_tensor *ihi = h_from_i64(bad_hi, EM_SHAPE(2, 2));
    em_tensor *ineg = h_from_i64(bad_neg, EM_SHAPE(2, 2));
    em_tensor *igood = h_from_i64(good, EM_SHAPE(2, 2));
    em_tensor *fidx = em_ones(EM_SHAPE(2, 2), EM_F32, h_dev);
    em_tensor *bidx = em_ones(EM_SHAPE(2, 2), EM_BOOL, h_dev);
    em_tensor *v1 = h_from_i64(bad_hi, EM_SHAPE(4));
    em_tensor *vneg = h_from_i64(bad_neg, EM_SHAPE(4));
    em_tensor *vgood = h_from_i64(good, EM_SHAPE(4));
    int64_t live = em_live_tensors();

    /* gather */
    CHECK(em_gather(x, 1, ihi) == NULL, "gather out of range fails");
    CHECK_ERR(EM_ERR_INDEX, "em_gather: index 7 is out of range for dim 1 of size 5");
    CHECK(em_gather(x, 1, ineg) == NULL, "gather negative fails");
    CHECK_ERR(EM_ERR_INDEX, "em_gather: index -1 is out of range for dim 1 of size 5");
    CHECK(em_live_tensors() == live, "a failed kernel releases its output");
    em_gather(x, 1, fidx);
    CHECK_ERR(EM_ERR_DTYPE, "em_gather: index must have an integer dtype, got f32");
    em_gather(x, 1, bidx);
    CHECK_ERR(EM_ERR_DTYPE, "em_gather");
    em_gather(x, 2, igood);
    CHECK_ERR(EM_ERR_INDEX, "em_gather: dim 2 is out of range for a tensor of rank 2");
    em_gather(x, 1, v1);
    CHECK_ERR(EM_ERR_SHAPE, "em_gather: index [4] and x [3, 5] must have the same rank");
    em_gather(x, 1, em_zeros(EM_SHAPE(4, 2), EM_I64, h_dev));
    CHECK_ERR(EM_ERR_SHAPE, "em_gather: index [4, 2] is larger than x [3, 5] in dim 0");
    em_gather(NULL, 0, igood);
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_gather: argument `x` is NULL");
    em_gather(x, 0, NULL);
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_gather: argument `index` is NULL");
    /* NULL propagation keeps the first error */
    em_index_select(em_gather(x, 1, ihi), 0, vgood);
    CHECK_ERR(EM_ERR_INDEX, "em_gather: index 7");

    /* scatter */
    em_tensor *src = h_from_f64(xv, EM_SHAPE(3, 5));
    em_scatter(x, 1, ihi, src, EM_SCATTER_ADD);
    CHECK_ERR(EM_ERR_INDEX, "em_scatter: index 7 is out of range for dim 1 of size 5");
    em_scatter(x, 0, ineg, src, EM_SCATTER_ASSIGN);
    CHECK_ERR(EM_ERR_INDEX, "em_scatter: index -1 is out of range for dim 0 of size 3");
    em_scatter(x, 0, fidx, src, EM_SCATTER_ASSIGN);
    CHECK_ERR(EM_ERR_DTYPE, "em_scatter: index must have an integer dtype, got f32");
    em_scatter(x, 0, igood, em_cast(src, EM_F32), EM_SCATTER_ASSIGN);
    CHECK_ERR(EM_ERR_DTYPE, "em_scatter: src dtype f32 differs from x dtype f64");
    em_scatter(x, 0, igood, em_zeros(EM_SHAPE(3, 1), EM_F64, h_dev), EM_SCATTER_ASSIGN);
    CHECK_ERR(EM_ERR_SHAPE, "em_scatter: index [2, 2] is larger than src [3, 1] in dim 1");
    em_scatter(x, 0, em_zeros(EM_SHAPE(2, 6), EM_I64, h_dev), src, EM_SCATTER_ASSIGN);
    CHECK_ERR(EM_ERR_SHAPE, "em_scatter: index [2, 6] is larger than x [3, 5] in dim 1");
    em_scatter(x, 0, v1, src, EM_SCATTER_ASSIGN);
    CHECK_ERR(EM_ERR_SHAPE, "em_scatter: x [3, 5], index [4] and src [3, 5] must have the same");
    em_scatter(x, 0, igood, src, (em_reduce_mode)9);
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_scatter: unknown reduce mode 9");
    em_scatter(x, -3, igood, src, EM_SCATTER_ASSIGN);
    CHECK_ERR(EM_ERR_INDEX, "em_scatter: dim -3 is out of range");
    em_scatter(x, 0, igood, NULL, EM_SCATTER_ASSIGN);
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_scatter: argument `src` is NULL");

    /* index_select */
    em_index_select(x, 1, v1);
    CHECK_ERR(EM_ERR_INDEX, "em_index_select: index 7 is out of range for dim 1 of size 5");
    em_index_select(x, 0, vneg);
    CHECK_ERR(EM_ERR_INDEX, "em_index_select: index -1 is out of range for dim 0 of size 3");
    em_index_select(x, 0, igood);
    CHECK_ERR(EM_ERR_SHAPE, "em_index_select: index must be 1-D or rank 0, got shape [2, 2]");
    em_index_select(x, 0, em_ones(EM_SHAPE(2), EM_F64, h_dev));
    CHECK_ERR(EM_ERR_DTYPE, "em_index_select: index must have an integer dtype, got f64");
    em_index_select(x, 5, vgood);
    CHECK_ERR(EM_ERR_INDEX, "em_index_select: dim 5 is out of range");
    em_index_select(NULL, 0, vgood);
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_index_select: argument `x` is NULL");

    /* index_add */
    em_tensor *src4 = em_zeros(EM_SHAPE(3, 4), EM_F64, h_dev);
    em_index_add(x, 1, v1, src4, 1);
    CHECK_ERR(EM_ERR_INDEX, "em_index_add: index 7 is out of range for dim 1 of size 5");
    em_index_add(x, 1, vneg, src4, 1);
    CHECK_ERR(EM_ERR_INDEX, "em_index_add: index -1");
    em_index_add(x, 1, vgood, em_zeros(EM_SHAPE(3, 5), EM_F64, h_dev), 1);
    CHECK_ERR(EM_ERR_SHAPE, "em_index_add: src [3, 5] does not match x [3, 5] with dim 1 of "
                            "size 4");
    em_index_add(x, 1, vgood, em_zeros(EM_SHAPE(3, 4), EM_F32, h_dev), 1);
    CHECK_ERR(EM_ERR_DTYPE, "em_index_add: src dtype f32 differs from x dtype f64");
    em_index_add(em_cast(x, EM_I32), 1, vgood, em_zeros(EM_SHAPE(3, 4), EM_I32, h_dev), 0.5);
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_index_add: alpha 0.5 must be an integer for dtype i32");
    em_index_add(x, 1, fidx, src4, 1);
    CHECK_ERR(EM_ERR_DTYPE, "em_index_add: index must have an integer dtype");
    em_index_add(x, 1, vgood, NULL, 1);
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_index_add: argument `src` is NULL");

    /* masked_select and nonzero */
    em_masked_select(x, em_ones(EM_SHAPE(4), EM_BOOL, h_dev));
    CHECK_ERR(EM_ERR_SHAPE, "em_masked_select: shapes [3, 5] and [4]");
    em_masked_select(x, em_ones(EM_SHAPE(5), EM_U8, h_dev));
    CHECK_ERR(EM_ERR_DTYPE, "em_masked_select: mask must be bool, got u8");
    em_masked_select(x, NULL);
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_masked_select: argument `mask` is NULL");
    em_nonzero(NULL);
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_nonzero: argument `x` is NULL");

    /* slice_assign */
    int64_t st[2] = {0, 1}, zero_step[2] = {1, 0};
    em_slice_assign(x, st, NULL, NULL, em_zeros(EM_SHAPE(3, 3), EM_F64, h_dev));
    CHECK_ERR(EM_ERR_SHAPE, "em_slice_assign: src [3, 3] does not match (or broadcast to) the "
                            "region [3, 4]");
    em_slice_assign(x, st, NULL, NULL, em_zeros(EM_SHAPE(1, 3, 4), EM_F64, h_dev));
    CHECK_ERR(EM_ERR_SHAPE, "em_slice_assign: src [1, 3, 4] does not match");
    em_slice_assign(x, NULL, NULL, zero_step, src);
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_slice_assign: step 0 of dim 1 must be positive");
    em_slice_assign(x, NULL, NULL, NULL, NULL);
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_slice_assign: argument `src` is NULL");

    /* embedding */
    em_tensor *w = em_ones(EM_SHAPE(4, 3), EM_F32, h_dev);
    em_embedding(w, v1);
    CHECK_ERR(EM_ERR_INDEX, "em_embedding: index 7 is out of range for dim 0 of size 4");
    em_embedding(w, vneg);
    CHECK_ERR(EM_ERR_INDEX, "em_embedding: index -1 is out of range");
    em_embedding(w, em_ones(EM_SHAPE(2), EM_F32, h_dev));
    CHECK_ERR(EM_ERR_DTYPE, "em_embedding: indices must have an integer dtype, got f32");
    em_embedding(em_ones(EM_SHAPE(4, 3), EM_I32, h_dev), vgood);
    CHECK_ERR(EM_ERR_DTYPE, "em_embedding: weight must have a float dtype, got i32");
    em_embedding(em_ones(EM_SHAPE(12), EM_F32, h_dev), vgood);
    CHECK_ERR(EM_ERR_SHAPE, "em_embedding: weight must be 2-D [num, dim], got shape [12]");
    em_embedding(w, em_zeros(EM_SHAPE(1, 1, 1, 1, 1, 1, 1, 1), EM_I64, h_dev));
    CHECK_ERR(EM_ERR_SHAPE, "em_embedding: indices of shape [1, 1, 1, 1, 1, 1, 1, 1]");
    em_embedding(NULL, vgood);
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_embedding: argument `weight` is NULL");
    em_scope_end();
}

void conf_index(void)
{
    test_gather();
    test_scatter();
    test_index_select_add();
    test_masked_nonzero();
    test_slice_assign();
    test_embedding();
    test_errors();
}
