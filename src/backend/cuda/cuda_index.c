/* The CUDA backend's index, combine and pixel-shuffle ops (kernels/index.cu): gather-style reads,
 * scatter-style writes in the CPU's order without atomics, compaction for the data-dependent
 * outputs of masked_select and nonzero, index-map copies for repeat, roll and pad. Every dtype:
 * data moves by element size; the reductions of scatter and index_add convert like the CPU. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cuda.h"
#include "cuda_index.h"

/* These match the structs of kernels/index.cu. */
typedef struct idx_view {
    int64_t shape[16], xs[16], ys[16];
    int rank;
} idx_view;

typedef struct idx_mapg {
    int64_t shape[8], xs[8], moff[8];
    int rank;
} idx_mapg;

typedef struct idx_gatherg {
    int64_t shape[8], is[8], xs[8], sd;
    int rank;
} idx_gatherg;

typedef struct idx_scatterg {
    int64_t shape[8], is[8], ss[8], ys[8], sd;
    int rank, dim;
} idx_scatterg;

typedef struct idx_compactg {
    int64_t shape[8], ps[8], xs[8];
    int rank;
} idx_compactg;

#define IDX_CHUNK 2048 /* elements per block of idx_compact */

bool cuda_index_claims(em_op_kind k)
{
    switch (k) {
    case EM_OP_GATHER:
    case EM_OP_SCATTER:
    case EM_OP_INDEX_SELECT:
    case EM_OP_INDEX_ADD:
    case EM_OP_MASKED_SELECT:
    case EM_OP_NONZERO:
    case EM_OP_SLICE_ASSIGN:
    case EM_OP_EMBEDDING:
    case EM_OP_CAT:
    case EM_OP_REPEAT:
    case EM_OP_ROLL:
    case EM_OP_PAD:
    case EM_OP_PIXEL_SHUFFLE:
    case EM_OP_PIXEL_UNSHUFFLE:
    case EM_OP_AVG_POOL:
    case EM_OP_ADAPTIVE_AVG_POOL:
    case EM_OP_ADAPTIVE_MAX_POOL:
    case EM_OP_INTERPOLATE: return true;
    default: return false;
    }
}

static bool sized(em_dtype dt)
{
    size_t es = em_dtype_size(dt);
    return es == 1 || es == 2 || es == 4 || es == 8;
}

bool cuda_index_supports(const ir_op *op)
{
    em_dtype o = op->out[0]->dtype;
    if (!sized(o) || op->n_in < 1) return false;
    switch (op->kind) {
    case EM_OP_AVG_POOL:
    case EM_OP_ADAPTIVE_AVG_POOL:
    case EM_OP_ADAPTIVE_MAX_POOL:
    case EM_OP_INTERPOLATE: return cuda_resample_supports(op);
    case EM_OP_MASKED_SELECT:
    case EM_OP_NONZERO: return sized(op->in[0]->dtype);
    case EM_OP_SCATTER:
        return op->in[0]->dtype == o && (op->in[2]->rank == 0 || op->in[2]->dtype == o);
    case EM_OP_CAT:
        for (int k = 0; k < op->n_in; k++)
            if (!sized(op->in[k]->dtype)) return false;
        return true;
    case EM_OP_SLICE_ASSIGN: return op->in[0]->dtype == o && sized(op->in[1]->dtype);
    case EM_OP_INDEX_ADD: return op->in[0]->dtype == o && op->in[op->n_in - 1]->dtype == o;
    default: return op->in[0]->dtype == o;
    }
}

/* ---- helpers ------------------------------------------------------------------------------ */

static int index_code(em_dtype dt)
{
    switch (dt) {
    case EM_I64: return 0;
    case EM_I32: return 1;
    case EM_I16: return 2;
    case EM_I8: return 3;
    default: return 4; /* u8, bool */
    }
}

static int dtype_code(em_dtype dt)
{
    switch (dt) {
    case EM_F64: return 0;
    case EM_F32: return 1;
    case EM_F16: return 2;
    case EM_BF16: return 3;
    case EM_I64: return 4;
    case EM_I32: return 5;
    case EM_I16: return 6;
    case EM_I8: return 7;
    case EM_U8: return 8;
    default: return 9; /* bool */
    }
}

static CUfunction sized_kernel(int dev, const char *fam, size_t es, const char *what)
{
    char name[32];
    snprintf(name, sizeof name, "idx_%s_%zu", fam, es);
    return cuda_kernel(dev, name, what);
}

/* Host copies on the current stream: src may be reused at return (to_dev); dst holds the data
 * at return (to_host). */
static em_status to_dev(int dev, void *dst, const void *src, size_t n, const char *what)
{
    return cuda_copy_from_host(dev, dst, src, n, what);
}

static em_status to_host(int dev, void *dst, const void *src, size_t n, const char *what)
{
    return cuda_copy_to_host(dev, dst, src, n, what);
}

/* y[view] = x[view] over shape (rank <= 16), element strides xs and ys. */
static em_status copy_strided(int dev, size_t es, const void *x, const int64_t *xs, void *y,
                              const int64_t *ys, const int64_t *shape, int rank, const char *what)
{
    idx_view v;
    memset(&v, 0, sizeof v);
    long long n = 1;
    v.rank = rank;
    for (int d = 0; d < rank; d++) {
        v.shape[d] = shape[d], v.xs[d] = xs[d], v.ys[d] = ys[d];
        n *= shape[d];
    }
    if (n == 0) return EM_OK;
    /* one element broadcast into a contiguous y (a scatter's zero base): a plain fill */
    bool bcast = true;
    int64_t cs = 1;
    for (int d = rank - 1; d >= 0; d--) {
        if (shape[d] != 1) bcast = bcast && xs[d] == 0 && ys[d] == cs;
        cs *= shape[d];
    }
    CUfunction f = sized_kernel(dev, bcast ? "bcast" : "copy", es, what);
    if (!f) return em_last_status();
    void *params[] = {(void *)&x, &y, &n, &v}; /* idx_bcast_* takes the first three */
    return cuda_launch(dev, f, n, params, what);
}

/* The same copy converting x's dtype xdt to ydt as the CPU does (dtype codes of index.cu). */
static em_status copy_convert(int dev, em_dtype xdt, const void *x, const int64_t *xs, em_dtype ydt,
                              void *y, const int64_t *ys, const int64_t *shape, int rank,
                              const char *what)
{
    if (xdt == ydt) return copy_strided(dev, em_dtype_size(xdt), x, xs, y, ys, shape, rank, what);
    idx_view v;
    memset(&v, 0, sizeof v);
    long long n = 1;
    v.rank = rank;
    for (int d = 0; d < rank; d++) {
        v.shape[d] = shape[d], v.xs[d] = xs[d], v.ys[d] = ys[d];
        n *= shape[d];
    }
    if (n == 0) return EM_OK;
    CUfunction f = cuda_kernel(dev, "idx_convert", what);
    if (!f) return em_last_status();
    int xc = dtype_code(xdt), yc = dtype_code(ydt);
    void *params[] = {(void *)&x, &xc, &y, &yc, &n, &v};
    return cuda_launch(dev, f, n, params, what);
}

em_status cuda_index_to_contiguous(int dev, const ir_tensor *x, em_dtype dt, void *dst,
                                   const char *what)
{
    int64_t ys[EM_MAX_RANK];
    ir_contiguous_strides(x->shape, x->rank, ys);
    if (x->dtype == dt && ir_is_contiguous(x)) {
        size_t nbytes = (size_t)ir_numel(x) * em_dtype_size(dt);
        if (nbytes == 0) return EM_OK;
        return cuda_copy_d2d(dev, dst, ir_ptr(x), nbytes, what);
    }
    return copy_convert(dev, x->dtype, ir_ptr(x), x->strides, dt, dst, ys, x->shape, x->rank, what);
}

/* The contiguous dst (x's shape and dtype) = x. */
static em_status copy_into(int dev, const ir_tensor *x, const ir_tensor *dst, const char *what)
{
    size_t es = em_dtype_size(x->dtype);
    int64_t n = ir_numel(x);
    if (n == 0) return EM_OK;
    if (ir_is_contiguous(x)) {
        return cuda_copy_d2d(dev, ir_ptr(dst), ir_ptr(x), (size_t)n * es, what);
    }
    return copy_strided(dev, es, ir_ptr(x), x->strides, ir_ptr(dst), dst->strides, x->shape,
                        x->rank, what);
}

/* The record's index is known to lie in range (tn_gather_inrange, tn_scatter_inrange,
 * tn_index_add_inrange: ops_index.c). */
static bool known_in_range(const ir_op *op)
{
    switch (op->kind) {
    case EM_OP_GATHER:
    case EM_OP_INDEX_ADD:
    case EM_OP_SCATTER: return op->p.index.inrange;
    default: return false;
    }
}

/* Every value of index must lie in [0, size): else the CPU's error, naming the first bad value
 * in row-major order, before any output is written. A graph capture cannot read the verdict
 * back, and an index known in range needs none, so there the kernels guard alone (as they
 * always do): a gathered element whose index is out of range reads as NaN (0 for integer
 * dtypes) and a scattered source with one is dropped. */
static em_status check_range(const ir_op *op, int dev, const ir_tensor *index, int dim,
                             int64_t size, const char *what)
{
    long long n = ir_numel(index);
    if (n == 0 || cuda_capture_pool(dev) || known_in_range(op)) return EM_OK;
    idx_gatherg g;
    memset(&g, 0, sizeof g);
    g.rank = index->rank;
    for (int d = 0; d < index->rank; d++) g.shape[d] = index->shape[d], g.is[d] = index->strides[d];
    unsigned long long none = ~0ull, pos = ~0ull;
    void *bad = cuda_pool_alloc(dev, sizeof pos);
    if (!bad) return em_last_status();
    em_status st = to_dev(dev, bad, &none, sizeof none, what);
    CUfunction f = st == EM_OK ? cuda_kernel(dev, "idx_check", what) : NULL;
    if (st == EM_OK && !f) st = em_last_status();
    if (st == EM_OK) {
        const void *ix = ir_ptr(index);
        int ik = index_code(index->dtype);
        long long sz = size;
        void *params[] = {(void *)&ix, &ik, &n, &g, &sz, &bad};
        st = cuda_launch(dev, f, n, params, what);
    }
    if (st == EM_OK) st = to_host(dev, &pos, bad, sizeof pos, what);
    cuda_pool_free(dev, bad);
    if (st != EM_OK || pos == ~0ull) return st;
    int64_t r = (int64_t)pos, off = 0;
    for (int d = index->rank - 1; d >= 0; d--) {
        off += (r % index->shape[d]) * index->strides[d];
        r /= index->shape[d];
    }
    size_t ies = em_dtype_size(index->dtype);
    unsigned char buf[8] = {0};
    st = to_host(dev, buf, ir_ptr(index) + off * (int64_t)ies, ies, what);
    if (st != EM_OK) return st;
    return em_error(EM_ERR_INDEX, "em_%s: index %lld is out of range for dim %d of size %lld",
                    em_op_name(op->kind), (long long)ir_get_i64(buf, index->dtype), dim,
                    (long long)size);
}

static int64_t size_of_dim(const ir_tensor *t, int dim)
{
    return t->rank == 0 ? 1 : t->shape[dim];
}

/* ---- gather-style reads ------------------------------------------------------------------- */

static em_status launch_gather(int dev, const ir_tensor *x, const ir_tensor *index,
                               const ir_tensor *out, const idx_gatherg *g, int64_t size,
                               const char *what)
{
    long long n = ir_numel(out);
    if (n == 0) return EM_OK;
    CUfunction f = sized_kernel(dev, "gather", em_dtype_size(x->dtype), what);
    if (!f) return em_last_status();
    const void *xp = ir_ptr(x), *ix = ir_ptr(index);
    void *yp = ir_ptr(out);
    int ik = index_code(index->dtype);
    long long sz = size;
    unsigned long long poison = 0; /* an index out of range (unchecked): NaN, 0 for integers */
    if (em_dtype_is_float(x->dtype)) {
        unsigned char pat[8] = {0};
        ir_set_f64(pat, x->dtype, NAN);
        memcpy(&poison, pat, sizeof pat); /* little-endian: the kernel's narrowing keeps these */
    }
    void *params[] = {(void *)&xp, (void *)&ix, &ik, &yp, &n, (void *)g, &sz, &poison};
    return cuda_launch(dev, f, n, params, what);
}

// GATHER x: [..., n, ...], index: [..., m, ...] -> out: index's shape; INDEX_SELECT index: [m]
// -> x's shape with n replaced by m; EMBEDDING weight: [num, D], indices: [...] -> [..., D]
static em_status run_gather(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *x = op->in[0], *index = op->in[1], *out = op->out[0];
    int dim = op->kind == EM_OP_EMBEDDING ? 0 : op->p.index.dim;
    int64_t size = size_of_dim(x, dim);
    em_status st = check_range(op, dev, index, dim, size, what);
    if (st != EM_OK) return st;
    idx_gatherg g;
    memset(&g, 0, sizeof g);
    g.rank = out->rank;
    for (int d = 0; d < out->rank; d++) g.shape[d] = out->shape[d];
    if (op->kind == EM_OP_EMBEDDING) {
        int r = index->rank;
        for (int d = 0; d < r; d++) g.is[d] = index->strides[d];
        g.xs[r] = x->strides[1];
        g.sd = x->strides[0];
    } else {
        for (int d = 0; d < x->rank; d++) g.xs[d] = d == dim ? 0 : x->strides[d];
        g.sd = x->rank ? x->strides[dim] : 0;
        if (op->kind == EM_OP_GATHER)
            for (int d = 0; d < index->rank; d++) g.is[d] = index->strides[d];
        else if (x->rank && index->rank)
            g.is[dim] = index->strides[0];
    }
    return launch_gather(dev, x, index, out, &g, size, what);
}

/* ---- scatter-style writes ----------------------------------------------------------------- */

/* The stable counting sort of index_add_sorted on the host: index read back, then perm, offs,
 * ids and the count of ids (the layout of d below) uploaded to d; *nids gets that count. */
static em_status sort_on_host(int dev, const ir_tensor *index, int64_t m, int64_t n, int64_t *d,
                              long long *nids, const char *what)
{
    size_t words = (size_t)(m + (n + 1) + n + 1);
    int64_t *h = em_alloc(words * sizeof *h + (size_t)n * sizeof *h);
    int64_t *hv = em_alloc((size_t)m * sizeof *hv);
    void *tmp = cuda_pool_alloc(dev, (size_t)m * sizeof(int64_t));
    em_status st = h && hv && tmp
                       ? EM_OK
                       : em_error(EM_ERR_OOM, "%s: out of memory for the sorted index", what);
    /* the index values as i64 (any dtype and stride, converted on the device) */
    if (st == EM_OK) st = cuda_index_to_contiguous(dev, index, EM_I64, tmp, what);
    if (st == EM_OK) st = to_host(dev, hv, tmp, (size_t)m * sizeof *hv, what);
    if (tmp) cuda_pool_free(dev, tmp);
    if (st == EM_OK) {
        int64_t *perm = h, *offs = h + m, *ids = offs + n + 1, *count = ids + n, *next = count + 1;
        long long k_ids = 0;
        memset(offs, 0, (size_t)(n + 1) * sizeof *offs);
        /* an index out of range (unchecked: a record known in range) drops its source, as the
         * kernels' guard does */
        for (int64_t k = 0; k < m; k++)
            if (hv[k] >= 0 && hv[k] < n) offs[hv[k] + 1]++;
        for (int64_t j = 0; j < n; j++) {
            if (offs[j + 1]) ids[k_ids++] = j;
            offs[j + 1] += offs[j];
        }
        *count = k_ids;
        memcpy(next, offs, (size_t)n * sizeof *next); /* the next free slot of each bucket */
        for (int64_t k = 0; k < m; k++)
            if (hv[k] >= 0 && hv[k] < n) perm[next[hv[k]]++] = k;
        *nids = k_ids;
        st = to_dev(dev, d, h, words * sizeof *h, what);
    }
    em_free(hv);
    em_free(h);
    return st;
}

/* The same sort by the idx_sort kernel, for graph captures (nothing read back); d has m + n
 * words of scratch after the layout. */
static em_status sort_on_device(int dev, const ir_tensor *index, int64_t m, int64_t n, int64_t *d,
                                const char *what)
{
    int64_t *perm = d, *offs = perm + m, *ids = offs + n + 1, *count = ids + n, *v = count + 1,
            *cur = v + m;
    em_status st = cuda_index_to_contiguous(dev, index, EM_I64, v, what);
    if (st != EM_OK) return st;
    CUfunction f = cuda_kernel(dev, "idx_sort", what);
    if (!f) return em_last_status();
    long long mm = m, nn = n;
    void *params[] = {&v, &mm, &nn, &perm, &offs, &ids, &count, &cur};
    unsigned grid[3] = {1, 1, 1}, block[3] = {1024, 1, 1};
    return cuda_launch_grid(dev, f, grid, block, params, what);
}

/* INDEX_ADD with many source rows per line (embedding backward: [tokens, D] into [num, D]), and
 * SCATTER of a 1-D index (one line): the index is sorted stably by value (a counting sort: on
 * the host after a read back, or on the device in a graph capture; the same order either way),
 * then one thread per (destination, line) adds its sources in the CPU's order. out already
 * holds x. */
static em_status index_add_sorted(const ir_op *op, int dev, const idx_scatterg *g, long long lines,
                                  const char *what)
{
    const ir_tensor *index = op->in[1], *src = op->in[2], *out = op->out[0];
    int64_t m = g->shape[g->dim], n = out->shape[g->dim];
    bool capture = cuda_capture_pool(dev) != NULL;
    /* perm (m), offs (n + 1), ids (n), the count of ids; the device sort's scratch after them */
    size_t words = (size_t)(m + (n + 1) + n + 1) + (capture ? (size_t)(m + n) : 0);
    int64_t *d = cuda_pool_alloc(dev, words * sizeof(int64_t));
    if (!d) return em_last_status();
    long long nids = n; /* in a capture the count exists only on the device: a grid for all */
    em_status st = capture ? sort_on_device(dev, index, m, n, d, what)
                           : sort_on_host(dev, index, m, n, d, &nids, what);
    CUfunction f = st == EM_OK ? cuda_kernel(dev, "idx_add_sorted", what) : NULL;
    if (st == EM_OK && !f) st = em_last_status();
    if (st == EM_OK && nids > 0) {
        void *yp = ir_ptr(out);
        const void *sp = ir_ptr(src);
        int dt = dtype_code(out->dtype);
        bool add = op->kind == EM_OP_INDEX_ADD;
        int mode = add ? EM_SCATTER_ADD : (int)op->p.index.mode;
        double alpha = add ? op->p.index.alpha : 1.0;
        long long ialpha = add ? (long long)op->p.index.alpha : 1;
        int64_t *dperm = d, *doffs = dperm + m, *dids = doffs + n + 1, *dcount = dids + n;
        void *params[] = {&yp,     &dt,    (void *)&sp, (void *)g, &mode, &alpha,
                          &ialpha, &lines, &dperm,      &doffs,    &dids, &dcount};
        long long gx = capture && nids > 4096 ? 4096 : nids, gy = (lines + 255) / 256;
        unsigned grid[3] = {(unsigned)(gx < 0x7fffffff ? gx : 0x7fffffff),
                            (unsigned)(gy < 65535 ? gy : 65535), 1};
        unsigned block[3] = {256, 1, 1};
        st = cuda_launch_grid(dev, f, grid, block, params, what);
    }
    cuda_pool_free(dev, d); /* stream order: the kernel reads it before any reuse */
    return st;
}

// SCATTER x: [..., n, ...], index, src: [..., m, ...] -> out: x's shape (loop over index);
// INDEX_ADD index: [m], src: x's shape with n replaced by m (loop over src)
static em_status run_scatter(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *x = op->in[0], *index = op->in[1], *src = op->in[2], *out = op->out[0];
    bool add = op->kind == EM_OP_INDEX_ADD;
    int dim = op->p.index.dim;
    em_status st = check_range(op, dev, index, dim, size_of_dim(x, dim), what);
    if (st == EM_OK) st = copy_into(dev, x, out, what);
    if (st != EM_OK) return st;
    const ir_tensor *loop = add ? src : index;
    idx_scatterg g;
    memset(&g, 0, sizeof g);
    g.rank = loop->rank;
    g.dim = dim;
    for (int d = 0; d < loop->rank; d++) {
        g.shape[d] = loop->shape[d];
        g.ss[d] = src->rank ? src->strides[d] : 0;
        g.ys[d] = d == dim ? 0 : out->strides[d];
        if (!add) g.is[d] = index->strides[d];
    }
    if (add && index->rank && src->rank) g.is[dim] = index->strides[0];
    g.sd = out->rank ? out->strides[dim] : 0;
    if (loop->rank == 0) { /* one element: a line of length 1 */
        g.rank = 1;
        g.shape[0] = 1;
    }
    long long m = g.shape[dim], lines = m ? ir_numel(loop) / m : 0;
    if (lines == 0 || m == 0) return EM_OK;
    /* many sources per line: by destination (index_add; scatter with a 1-D index and src) */
    if (m >= 32 && out->rank > 0 && (add || (index->rank == 1 && src->rank == 1)))
        return index_add_sorted(op, dev, &g, lines, what);
    const void *sp = ir_ptr(src);
    void *tmp = NULL;
    if (!add && src->rank == 0) { /* one value, converted once to out's dtype (stride 0) */
        unsigned char v[8] = {0};
        unsigned long long scalar = 0;
        st = to_host(dev, v, ir_ptr(src), em_dtype_size(src->dtype), what);
        if (st != EM_OK) return st;
        if (em_dtype_is_float(out->dtype) || em_dtype_is_float(src->dtype))
            ir_set_f64(&scalar, out->dtype, ir_get_f64(v, src->dtype));
        else
            ir_set_i64(&scalar, out->dtype, ir_get_i64(v, src->dtype));
        tmp = cuda_pool_alloc(dev, sizeof scalar);
        if (!tmp) return em_last_status();
        st = to_dev(dev, tmp, &scalar, sizeof scalar, what);
        sp = tmp;
    }
    CUfunction f = st == EM_OK ? cuda_kernel(dev, "idx_scatter", what) : NULL;
    if (st == EM_OK && !f) st = em_last_status();
    if (st == EM_OK) {
        void *yp = ir_ptr(out);
        const void *ix = ir_ptr(index);
        int dt = dtype_code(out->dtype), ik = index_code(index->dtype);
        int mode = add ? EM_SCATTER_ADD : (int)op->p.index.mode;
        double alpha = add ? op->p.index.alpha : 1.0;
        long long ialpha = add ? (long long)op->p.index.alpha : 1;
        long long size = size_of_dim(x, dim);
        void *params[] = {&yp,   &dt,    (void *)&ix, &ik,    (void *)&sp, &g,
                          &mode, &alpha, &ialpha,     &lines, &size};
        st = cuda_launch(dev, f, lines, params, what);
    }
    if (tmp) cuda_pool_free(dev, tmp); /* stream order: the kernel reads it before any reuse */
    return st;
}

/* ---- data-dependent outputs --------------------------------------------------------------- */

/* MASKED_SELECT (mode 0: x's elements where the broadcast mask is true) and NONZERO (mode 1:
 * coordinates): count per block, exclusive scan of the block counts, then an ordered write. */
static em_status run_compact(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *x = op->in[0], *out = op->out[0];
    bool nz = op->kind == EM_OP_NONZERO;
    const ir_tensor *p = nz ? x : op->in[1];
    idx_compactg g;
    memset(&g, 0, sizeof g);
    long long n = 1;
    if (nz) {
        g.rank = x->rank;
        for (int d = 0; d < x->rank; d++)
            g.shape[d] = x->shape[d], g.ps[d] = g.xs[d] = x->strides[d];
    } else {
        g.rank = op->p.shape.rank;
        for (int d = 0; d < g.rank; d++) g.shape[d] = op->p.shape.dims[d];
        ir_broadcast_strides(p, g.shape, g.rank, g.ps);
        ir_broadcast_strides(x, g.shape, g.rank, g.xs);
    }
    for (int d = 0; d < g.rank; d++) n *= g.shape[d];
    int64_t cap = out->shape[0];
    if (cap == 0 || ir_numel(out) == 0 || n == 0) return EM_OK;
    long long nb = (n + IDX_CHUNK - 1) / IDX_CHUNK;
    if (nb > 0x7fffffffLL)
        return em_error(EM_ERR_UNSUPPORTED, "%s: %lld elements are too many for one pass", what, n);
    CUfunction f = cuda_kernel(dev, "idx_compact", what);
    if (!f) return em_last_status();
    int64_t *host = em_alloc((size_t)nb * sizeof *host);
    void *dev_buf = cuda_pool_alloc(dev, (size_t)nb * 2 * sizeof(int64_t));
    if (!host || !dev_buf) {
        em_free(host);
        if (dev_buf) cuda_pool_free(dev, dev_buf);
        return em_last_status() != EM_OK ? em_last_status()
                                         : em_error(EM_ERR_OOM, "%s: out of memory", what);
    }
    int64_t *counts = dev_buf, *offs = counts + nb;
    int phase = 0, mode = nz ? 1 : 0, pdt = dtype_code(p->dtype), es = (int)em_dtype_size(x->dtype);
    const void *pp = ir_ptr(p), *xp = ir_ptr(x);
    void *yp = ir_ptr(out);
    void *params[] = {&phase, &mode, (void *)&pp, &pdt,    (void *)&xp, &es,
                      &yp,    &g,    &n,          &counts, &offs};
    unsigned grid[3] = {(unsigned)nb, 1, 1}, block[3] = {256, 1, 1};
    em_status st = cuda_launch_grid(dev, f, grid, block, params, what);
    if (st == EM_OK) st = to_host(dev, host, counts, (size_t)nb * sizeof *host, what);
    int64_t total = 0;
    for (long long b = 0; st == EM_OK && b < nb; b++) {
        int64_t c = host[b];
        host[b] = total;
        total += c;
    }
    if (st == EM_OK && total != cap)
        st = em_error(EM_ERR_INTERNAL, "%s: counted %lld elements, found %lld", what,
                      (long long)cap, (long long)total);
    if (st == EM_OK) st = to_dev(dev, offs, host, (size_t)nb * sizeof *host, what);
    phase = 1;
    if (st == EM_OK) st = cuda_launch_grid(dev, f, grid, block, params, what);
    cuda_pool_free(dev, dev_buf);
    em_free(host);
    return st;
}

// SLICE_ASSIGN x: [...], src broadcast to the region x[start:end:step] -> out: x's shape
static em_status run_slice_assign(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *x = op->in[0], *src = op->in[1], *out = op->out[0];
    em_status st = copy_into(dev, x, out, what);
    if (st != EM_OK) return st;
    int r = out->rank;
    int64_t shape[EM_MAX_RANK], ys[EM_MAX_RANK], xs[EM_MAX_RANK], off = 0;
    for (int d = 0; d < r; d++) {
        const em_p_slice_assign *sa = &op->p.slice_assign;
        int64_t start = sa->start[d], end = sa->end[d], step = sa->step[d];
        shape[d] = (end - start + step - 1) / step;
        ys[d] = out->strides[d] * step;
        off += start * out->strides[d];
    }
    ir_broadcast_strides(src, shape, r, xs);
    size_t es = em_dtype_size(out->dtype);
    return copy_convert(dev, src->dtype, ir_ptr(src), xs, out->dtype,
                        ir_ptr(out) + off * (int64_t)es, ys, shape, r, what);
}

// CAT x_k: [..., n_k, ...] -> y: [..., sum n_k, ...], each input copied into its slab of y
static em_status run_cat(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *y = op->out[0];
    int dim = op->p.dim.dim;
    size_t es = em_dtype_size(y->dtype);
    int64_t start = 0;
    for (int k = 0; k < op->n_in; k++) {
        const ir_tensor *x = op->in[k];
        char *dst = ir_ptr(y) + start * y->strides[dim] * (int64_t)es;
        em_status st = copy_convert(dev, x->dtype, ir_ptr(x), x->strides, y->dtype, dst, y->strides,
                                    x->shape, x->rank, what);
        if (st != EM_OK) return st;
        start += x->shape[dim];
    }
    return EM_OK;
}

/* REPEAT, ROLL, PAD: per-dim maps from output to input coordinates (-1: the pad value) built
 * here as the CPU builds them, then one gather over the contiguous output. */
static em_status run_map(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *y = op->out[0];
    ir_tensor xv = *op->in[0];
    int r = y->rank;
    size_t es = em_dtype_size(y->dtype);
    long long n = ir_numel(y);
    if (n == 0) return EM_OK;
    if (r == 0) {
        return cuda_copy_d2d(dev, ir_ptr(y), ir_ptr(&xv), es, what);
    }
    unsigned long long fill = 0;
    if (op->kind == EM_OP_PAD) {
        unsigned char pat[8] = {0};
        ir_set_f64(pat, y->dtype, op->p.pad.value);
        memcpy(&fill, pat, es); /* little-endian: the kernel's narrowing cast keeps these bytes */
    }
    /* constant padding without crops: y filled by 32-bit words, then x copied into its interior
       (two plain passes; the maps below cost a host-built table and its upload per call) */
    const em_p_pad *pp = &op->p.pad;
    bool grow = op->kind == EM_OP_PAD && pp->mode == EM_PAD_CONSTANT;
    for (int k = 0; grow && k < pp->n_pairs; k++)
        grow = pp->pads[2 * k] >= 0 && pp->pads[2 * k + 1] >= 0;
    unsigned word = es == 4 ? (unsigned)fill : 0;
    if (grow && (es == 4 || (fill == 0 && ((size_t)n * es) % 4 == 0)) && ir_is_contiguous(y)) {
        int64_t ys[EM_MAX_RANK], lo = 0;
        ir_contiguous_strides(y->shape, r, ys);
        for (int k = 0; k < pp->n_pairs; k++) lo += pp->pads[2 * k] * ys[r - 1 - k];
        em_status st = cuda_memset32(dev, ir_ptr(y), word, (size_t)n * es / 4, what);
        if (st != EM_OK || ir_numel(&xv) == 0) return st;
        return copy_strided(dev, es, ir_ptr(&xv), xv.strides, ir_ptr(y) + lo * (int64_t)es, ys,
                            xv.shape, r, what);
    }
    int64_t off[EM_MAX_RANK];
    int64_t total = ir_map_plan(op, &xv, NULL, off);
    idx_mapg g;
    memset(&g, 0, sizeof g);
    g.rank = r;
    for (int d = 0; d < r; d++)
        g.shape[d] = y->shape[d], g.xs[d] = xv.strides[d], g.moff[d] = off[d];
    int64_t *maps = em_alloc((size_t)total * sizeof *maps);
    if (!maps) return em_error(EM_ERR_OOM, "%s: out of memory", what);
    ir_map_plan(op, &xv, maps, off);
    void *dmaps = cuda_pool_alloc(dev, (size_t)total * sizeof *maps);
    em_status st =
        dmaps ? to_dev(dev, dmaps, maps, (size_t)total * sizeof *maps, what) : em_last_status();
    em_free(maps);
    CUfunction f = st == EM_OK ? sized_kernel(dev, "map", es, what) : NULL;
    if (st == EM_OK && !f) st = em_last_status();
    if (st == EM_OK) {
        const void *xp = ir_ptr(&xv);
        void *yp = ir_ptr(y);
        void *params[] = {(void *)&xp, &yp, &n, &g, &dmaps, &fill};
        st = cuda_launch(dev, f, n, params, what);
    }
    if (dmaps) cuda_pool_free(dev, dmaps); /* stream order: the kernel reads it first */
    return st;
}

/* PIXEL_SHUFFLE out[..., c, h*r+i, w*r+j] = in[..., c*r*r + i*r + j, h, w] and its inverse, as
 * one strided copy of a view of the input over the output's (split) dims. */
static em_status run_shuffle(const ir_op *op, int dev, const char *what)
{
    const ir_tensor *x = op->in[0], *o = op->out[0];
    int64_t r = op->p.shuffle.r;
    int rk = x->rank, nb = rk - 3, v = 0;
    int64_t shape[16], xs[16], ys[16];
    for (int d = 0; d < nb; d++) shape[v] = x->shape[d], xs[v++] = x->strides[d];
    int64_t cs = x->strides[rk - 3], hs = x->strides[rk - 2], ws = x->strides[rk - 1];
    if (op->kind == EM_OP_PIXEL_SHUFFLE) { /* out dims [C, H, r, W, r] */
        int64_t sh[5] = {o->shape[rk - 3], x->shape[rk - 2], r, x->shape[rk - 1], r};
        int64_t st[5] = {cs * r * r, hs, cs * r, ws, cs};
        for (int k = 0; k < 5; k++) shape[v] = sh[k], xs[v++] = st[k];
    } else { /* out dims [C, r, r, H, W] */
        int64_t sh[5] = {x->shape[rk - 3], r, r, o->shape[rk - 2], o->shape[rk - 1]};
        int64_t st[5] = {cs, hs, ws, hs * r, ws * r};
        for (int k = 0; k < 5; k++) shape[v] = sh[k], xs[v++] = st[k];
    }
    ir_contiguous_strides(shape, v, ys);
    return copy_strided(dev, em_dtype_size(o->dtype), ir_ptr(x), xs, ir_ptr(o), ys, shape, v, what);
}

em_status cuda_index_exec(const ir_op *op, int dev, const char *what)
{
    switch (op->kind) {
    case EM_OP_GATHER:
    case EM_OP_INDEX_SELECT:
    case EM_OP_EMBEDDING: return run_gather(op, dev, what);
    case EM_OP_SCATTER:
    case EM_OP_INDEX_ADD: return run_scatter(op, dev, what);
    case EM_OP_MASKED_SELECT:
    case EM_OP_NONZERO: return run_compact(op, dev, what);
    case EM_OP_SLICE_ASSIGN: return run_slice_assign(op, dev, what);
    case EM_OP_CAT: return run_cat(op, dev, what);
    case EM_OP_PIXEL_SHUFFLE:
    case EM_OP_PIXEL_UNSHUFFLE: return run_shuffle(op, dev, what);
    case EM_OP_AVG_POOL:
    case EM_OP_ADAPTIVE_AVG_POOL:
    case EM_OP_ADAPTIVE_MAX_POOL:
    case EM_OP_INTERPOLATE: return cuda_resample_exec(op, dev, what);
    default: return run_map(op, dev, what);
    }
}
