/* Conformance of zero-copy views against index arithmetic on f64 references: reshape, view,
 * flatten, permute, transpose, slice, narrow, select, expand, squeeze, unsqueeze, flip, unfold. */
#include <string.h>

#include "conf.h"

/* Reference: values of a [.. shape ..] row-major array `v` read through an index map. */
typedef int64_t (*index_map)(const int64_t *out_idx, const void *ctx);

static void ref_view(const double *v, em_shape out, index_map map, const void *ctx, double *dst)
{
    int64_t idx[EM_MAX_RANK] = {0};
    if (em_shape_numel(out) == 0) return;
    int64_t k = 0;
    do {
        dst[k++] = v[map(idx, ctx)];
    } while (h_next_index(out, idx));
}

typedef struct perm_ctx {
    em_shape in;
    int order[EM_MAX_RANK];
} perm_ctx;

static int64_t perm_map(const int64_t *o, const void *vctx)
{
    const perm_ctx *c = vctx;
    int64_t src[EM_MAX_RANK];
    for (int d = 0; d < c->in.rank; d++) src[c->order[d]] = o[d];
    return h_offset(c->in, src);
}

typedef struct slice_ctx {
    em_shape in;
    int dim;
    int64_t start, step;
} slice_ctx;

static int64_t slice_map(const int64_t *o, const void *vctx)
{
    const slice_ctx *c = vctx;
    int64_t src[EM_MAX_RANK];
    memcpy(src, o, sizeof src);
    src[c->dim] = c->start + o[c->dim] * c->step;
    return h_offset(c->in, src);
}

typedef struct flip_ctx {
    em_shape in;
    uint32_t mask;
} flip_ctx;

static int64_t flip_map(const int64_t *o, const void *vctx)
{
    const flip_ctx *c = vctx;
    int64_t src[EM_MAX_RANK];
    for (int d = 0; d < c->in.rank; d++)
        src[d] = (c->mask & (1u << d)) ? c->in.dims[d] - 1 - o[d] : o[d];
    return h_offset(c->in, src);
}

typedef struct expand_ctx {
    em_shape in, out;
} expand_ctx;

static int64_t expand_map(const int64_t *o, const void *vctx)
{
    const expand_ctx *c = vctx;
    int64_t src[EM_MAX_RANK];
    int lead = c->out.rank - c->in.rank;
    for (int d = 0; d < c->in.rank; d++) src[d] = c->in.dims[d] == 1 ? 0 : o[d + lead];
    return h_offset(c->in, src);
}

typedef struct unfold_ctx {
    em_shape in;
    int dim;
    int64_t step;
} unfold_ctx;

static int64_t unfold_map(const int64_t *o, const void *vctx)
{
    const unfold_ctx *c = vctx;
    int64_t src[EM_MAX_RANK];
    for (int d = 0; d < c->in.rank; d++) src[d] = o[d];
    src[c->dim] = o[c->dim] * c->step + o[c->in.rank];
    return h_offset(c->in, src);
}

static void check_layouts(em_dtype dt, h_layout layout)
{
    em_scope_begin();
    em_shape s = EM_SHAPE(3, 4, 5);
    double *v;
    em_tensor *x = h_rand(s, dt, layout, -10, 10, &v);
    double *ref = malloc(4096 * sizeof *ref);

    /* reshape / view / flatten keep row-major order */
    h_check_tensor("reshape", em_reshape(x, EM_SHAPE(4, -1)), v, EM_SHAPE(4, 15), 0, 0);
    h_check_tensor("reshape 1-D", em_reshape(x, EM_SHAPE(60)), v, EM_SHAPE(60), 0, 0);
    h_check_tensor("flatten", em_flatten(x, 1, 2), v, EM_SHAPE(3, 20), 0, 0);
    h_check_tensor("flatten all", em_flatten(x, 0, -1), v, EM_SHAPE(60), 0, 0);
    em_tensor *rv = em_reshape(x, EM_SHAPE(3, 2, 2, 5));
    h_check_tensor("reshape split dim", rv, v, EM_SHAPE(3, 2, 2, 5), 0, 0);
    if (layout == H_CONTIG)
        CHECK(rv && em_tensor_shares_storage(rv, x), "reshape of contiguous is a view");
    em_tensor *vw = em_view(x, EM_SHAPE(3, 20));
    /* contiguous or flipped rows: the last two dims merge; strided or transposed: they cannot */
    if (layout == H_CONTIG || layout == H_FLIPPED)
        h_check_tensor("view", vw, v, EM_SHAPE(3, 20), 0, 0);
    else
        CHECK(vw == NULL && em_last_status() == EM_ERR_SHAPE, "view of unmergeable dims fails");
    em_clear_error();

    /* permute / transpose */
    perm_ctx pc = {.in = s, .order = {2, 0, 1}};
    em_shape ps = EM_SHAPE(5, 3, 4);
    ref_view(v, ps, perm_map, &pc, ref);
    em_tensor *p = em_permute(x, EM_AXES(2, 0, 1));
    h_check_tensor("permute", p, ref, ps, 0, 0);
    CHECK(p && em_tensor_shares_storage(p, x), "permute is a view");
    perm_ctx tc = {.in = s, .order = {0, 2, 1}};
    em_shape ts = EM_SHAPE(3, 5, 4);
    ref_view(v, ts, perm_map, &tc, ref);
    h_check_tensor("transpose", em_transpose(x, -1, 1), ref, ts, 0, 0);
    h_check_tensor("reshape of transposed copies", em_reshape(em_transpose(x, -1, 1), EM_SHAPE(60)),
                   ref, EM_SHAPE(60), 0, 0);

    /* slice with steps and negative indices, narrow, select */
    slice_ctx sc = {.in = s, .dim = 1, .start = 1, .step = 2};
    em_shape ss = EM_SHAPE(3, 2, 5);
    ref_view(v, ss, slice_map, &sc, ref);
    h_check_tensor("slice step 2", em_slice(x, 1, 1, 4, 2), ref, ss, 0, 0);
    h_check_tensor("slice negative", em_slice(x, -2, -3, 100, 2), ref, ss, 0, 0);
    slice_ctx sc2 = {.in = s, .dim = 2, .start = 0, .step = 3};
    em_shape ss2 = EM_SHAPE(3, 4, 2);
    ref_view(v, ss2, slice_map, &sc2, ref);
    h_check_tensor("slice last dim", em_slice(x, 2, -100, 5, 3), ref, ss2, 0, 0);
    em_tensor *empty = em_slice(x, 0, 2, 1, 1);
    CHECK(empty && em_tensor_dim(empty, 0) == 0, "empty slice");
    slice_ctx nc = {.in = s, .dim = 2, .start = 1, .step = 1};
    em_shape ns = EM_SHAPE(3, 4, 3);
    ref_view(v, ns, slice_map, &nc, ref);
    h_check_tensor("narrow", em_narrow(x, 2, 1, 3), ref, ns, 0, 0);
    slice_ctx selc = {.in = s, .dim = 1, .start = 3, .step = 1};
    ref_view(v, EM_SHAPE(3, 1, 5), slice_map, &selc, ref);
    h_check_tensor("select", em_select(x, 1, -1), ref, EM_SHAPE(3, 5), 0, 0);

    /* flip */
    flip_ctx fc = {.in = s, .mask = 5};
    ref_view(v, s, flip_map, &fc, ref);
    h_check_tensor("flip", em_flip(x, EM_AXES(0, -1)), ref, s, 0, 0);
    h_check_tensor("flip contiguous", em_contiguous(em_flip(x, EM_AXES(0, 2))), ref, s, 0, 0);

    /* expand / squeeze / unsqueeze */
    em_tensor *col = em_slice(x, 2, 0, 1, 1); /* [3, 4, 1] */
    em_shape cs = EM_SHAPE(3, 4, 1);
    slice_ctx colc = {.in = s, .dim = 2, .start = 0, .step = 1};
    double colv[12];
    ref_view(v, cs, slice_map, &colc, colv);
    expand_ctx ec = {.in = cs, .out = EM_SHAPE(2, 3, 4, 6)};
    ref_view(colv, ec.out, expand_map, &ec, ref);
    h_check_tensor("expand", em_expand(col, EM_SHAPE(2, 3, -1, 6)), ref, ec.out, 0, 0);
    h_check_tensor("squeeze", em_squeeze(col, EM_ALL), colv, EM_SHAPE(3, 4), 0, 0);
    h_check_tensor("squeeze dim", em_squeeze(col, EM_AXES(-1)), colv, EM_SHAPE(3, 4), 0, 0);
    h_check_tensor("squeeze non-1 dim is a no-op", em_squeeze(col, EM_AXES(0)), colv, cs, 0, 0);
    h_check_tensor("unsqueeze", em_unsqueeze(x, 1), v, EM_SHAPE(3, 1, 4, 5), 0, 0);
    h_check_tensor("unsqueeze end", em_unsqueeze(x, -1), v, EM_SHAPE(3, 4, 5, 1), 0, 0);

    /* unfold */
    unfold_ctx uc = {.in = s, .dim = 2, .step = 2};
    em_shape us = EM_SHAPE(3, 4, 2, 2);
    ref_view(v, us, unfold_map, &uc, ref);
    h_check_tensor("unfold", em_unfold(x, 2, 2, 2), ref, us, 0, 0);
    unfold_ctx uc2 = {.in = s, .dim = 0, .step = 1};
    em_shape us2 = EM_SHAPE(2, 4, 5, 2);
    ref_view(v, us2, unfold_map, &uc2, ref);
    h_check_tensor("unfold overlapping", em_unfold(x, 0, 2, 1), ref, us2, 0, 0);

    free(ref);
    free(v);
    em_scope_end();
}

static void check_view_errors(void)
{
    em_scope_begin();
    em_tensor *x = em_zeros(EM_SHAPE(2, 3), EM_F32, h_dev);
    CHECK(em_reshape(x, EM_SHAPE(4, 2)) == NULL, "reshape count mismatch");
    CHECK_ERR(EM_ERR_SHAPE, "em_reshape: cannot reshape [2, 3] (6 elements) into [4, 2]");
    CHECK(em_reshape(x, EM_SHAPE(-1, -1)) == NULL, "two -1");
    CHECK_ERR(EM_ERR_SHAPE, "more than one -1");
    CHECK(em_permute(x, EM_AXES(0, 0)) == NULL, "permute repeat");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_permute");
    CHECK(em_permute(x, EM_AXES(0)) == NULL, "permute too few");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_permute: 1 dims given for a tensor of rank 2");
    CHECK(em_transpose(x, 0, 2) == NULL, "transpose dim out of range");
    CHECK_ERR(EM_ERR_INDEX, "em_transpose: dim 2 is out of range for a tensor of rank 2");
    CHECK(em_slice(x, 1, 0, 2, 0) == NULL, "slice step 0");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_slice: step must be positive");
    CHECK(em_narrow(x, 1, 2, 2) == NULL, "narrow past the end");
    CHECK_ERR(EM_ERR_INDEX, "em_narrow");
    CHECK(em_select(x, 0, 2) == NULL, "select out of range");
    CHECK_ERR(EM_ERR_INDEX, "em_select: index 2 is out of range for dim 0 of size 2");
    CHECK(em_expand(x, EM_SHAPE(4, 3)) == NULL, "expand non-1 dim");
    CHECK_ERR(EM_ERR_SHAPE, "em_expand: cannot expand [2, 3] to [4, 3]");
    CHECK(em_expand(x, EM_SHAPE(3)) == NULL, "expand to lower rank");
    CHECK_ERR(EM_ERR_SHAPE, "em_expand");
    CHECK(em_unfold(x, 1, 4, 1) == NULL, "unfold too large");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_unfold");
    CHECK(em_unsqueeze(x, 3) == NULL, "unsqueeze out of range");
    CHECK_ERR(EM_ERR_INDEX, "em_unsqueeze");
    CHECK(em_flip(x, EM_AXES(1, -1)) == NULL, "flip repeated dim");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_flip");
    CHECK(em_flatten(x, 1, 0) == NULL, "flatten reversed");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_flatten");
    /* NULL propagation keeps the first error */
    CHECK(em_transpose(em_reshape(NULL, EM_SHAPE(2)), 0, 1) == NULL, "NULL chain");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_reshape: argument `t` is NULL");
    em_tensor *t8 = em_zeros(EM_SHAPE(1, 1, 1, 1, 1, 1, 1, 1), EM_F32, h_dev);
    CHECK(em_unsqueeze(t8, 0) == NULL, "unsqueeze past rank 8");
    CHECK_ERR(EM_ERR_SHAPE, "em_unsqueeze");
    /* rank-0 tensors */
    em_tensor *s = em_scalar(4, EM_F32, h_dev);
    em_tensor *s1 = em_reshape(s, EM_SHAPE(1, 1));
    CHECK(s1 && em_item_f64(s1) == 4, "reshape scalar");
    em_tensor *s0 = em_reshape(s1, EM_SCALAR);
    CHECK(s0 && em_tensor_rank(s0) == 0 && em_item_f64(s0) == 4, "reshape back to scalar");
    CHECK(em_slice(s, 0, 0, 1, 1) == NULL, "slice of scalar");
    CHECK_ERR(EM_ERR_INDEX, "em_slice");
    em_tensor *es = em_expand(s, EM_SHAPE(2, 2));
    CHECK(es && em_tensor_numel(es) == 4 && em_tensor_stride(es, 0) == 0, "expand scalar");
    em_scope_end();
}

void conf_view(void)
{
    const em_dtype dts[4] = {EM_F32, EM_F64, EM_I16, EM_BOOL};
    for (int k = 0; k < 4; k++)
        for (int l = 0; l < H_LAYOUT_COUNT; l++) check_layouts(dts[k], (h_layout)l);
    check_view_errors();
}
