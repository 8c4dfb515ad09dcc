/* CPU kernels for combine ops: cat (strided block copies with dtype conversion) and repeat,
 * roll and pad, which share one "index map" copy: every output coordinate along each dim maps
 * to an input coordinate, or to -1 for the constant fill. */
#include <stdlib.h>

#include "../../ir/decode.h"
#include "cpu.h"

/* ---- cat --------------------------------------------------------------------------------- */

/* x_k: [..., n_k, ...] (k < n_in) -> y: [..., sum n_k, ...]; each input is copied into the
 * matching slab of y through a view of y's memory. */
static em_status exec_cat(const ir_op *op)
{
    const ir_tensor *y = op->out[0];
    int dim = op->p.dim.dim;
    int64_t start = 0;
    for (int k = 0; k < op->n_in; k++) {
        const ir_tensor *x = op->in[k];
        ir_tensor slab = *y;
        slab.shape[dim] = x->shape[dim];
        slab.data = ir_ptr(y) + start * y->strides[dim] * (int64_t)em_dtype_size(y->dtype);
        cpu_copy_convert(&slab, x);
        start += x->shape[dim];
    }
    return EM_OK;
}

/* ---- index-map copy ---------------------------------------------------------------------- */

static inline void put_elem(char *dst, const char *src, size_t es)
{
    switch (es) {
    case 8: memcpy(dst, src, 8); break;
    case 4: memcpy(dst, src, 4); break;
    case 2: memcpy(dst, src, 2); break;
    default: *dst = *src; break;
    }
}

typedef struct map_ctx {
    const ir_tensor *x, *y;
    int rank;
    int64_t *map[EM_MAX_RANK]; /* per output dim: input coordinate or -1 */
    unsigned char fill[8];     /* the constant, in y's dtype */
    size_t es;
    /* the last dim's map is fill for j < run_lo, run_x + (j - run_lo) on [run_lo, run_hi) and
     * fill after (constant pads; identity maps): rows then copy in one piece (run_hi = -1: not) */
    int64_t run_lo, run_hi, run_x;
    bool zero_fill; /* the constant's bytes are all zero */
} map_ctx;

/* n elements of the constant at dst. */
static void fill_elems(const map_ctx *c, char *dst, int64_t n)
{
    if (n <= 0) return;
    if (c->zero_fill) {
        memset(dst, 0, (size_t)n * c->es);
        return;
    }
    for (int64_t j = 0; j < n; j++)
        put_elem(dst + j * (int64_t)c->es, (const char *)c->fill, c->es);
}

/* Output rows [b, e) (every dim but the last). */
static void map_rows(void *vctx, int64_t b, int64_t e)
{
    const map_ctx *c = vctx;
    int r = c->rank, last = r - 1;
    const ir_tensor *x = c->x, *y = c->y;
    size_t es = c->es;
    int64_t nlast = y->shape[last];
    const int64_t *mlast = c->map[last];
    int64_t xs = x->strides[last] * (int64_t)es;
    int64_t idx[EM_MAX_RANK] = {0};
    int64_t rem = b;
    for (int d = last - 1; d >= 0; d--) {
        idx[d] = rem % y->shape[d];
        rem /= y->shape[d];
    }
    char *ybase = ir_ptr(y);
    const char *xbase = ir_ptr(x);
    /* whole rows copied and x's rows back to back: consecutive rows of a plane that read
     * consecutive rows of x go as one copy */
    bool whole = c->run_lo == 0 && c->run_hi == nlast && c->run_x == 0 && xs == (int64_t)es &&
                 last > 0 && x->strides[last - 1] == nlast;
    for (int64_t row = b; row < e; row++) {
        char *yrow = ybase + row * nlast * (int64_t)es; /* y is contiguous */
        int64_t xoff = 0;
        bool fill = false;
        for (int d = 0; d < last; d++) {
            int64_t m = c->map[d][idx[d]];
            if (m < 0) fill = true;
            xoff += m * x->strides[d];
        }
        if (fill) {
            fill_elems(c, yrow, nlast);
        } else if (whole) {
            const int64_t *mp = c->map[last - 1];
            int64_t h = idx[last - 1], k = 1, hn = y->shape[last - 1];
            while (h + k < hn && row + k < e && mp[h + k] == mp[h] + k) k++;
            memcpy(yrow, xbase + xoff * (int64_t)es, (size_t)(k * nlast) * es);
            idx[last - 1] += k - 1; /* the step below moves past the last copied row */
            row += k - 1;
        } else if (c->run_hi >= 0 && xs == (int64_t)es) {
            const char *xrow = xbase + (xoff + c->run_x) * (int64_t)es;
            fill_elems(c, yrow, c->run_lo);
            memcpy(yrow + c->run_lo * (int64_t)es, xrow, (size_t)(c->run_hi - c->run_lo) * es);
            fill_elems(c, yrow + c->run_hi * (int64_t)es, nlast - c->run_hi);
        } else {
            const char *xrow = xbase + xoff * (int64_t)es;
            for (int64_t j = 0; j < nlast; j++) {
                int64_t m = mlast[j];
                put_elem(yrow + j * (int64_t)es, m < 0 ? (const char *)c->fill : xrow + m * xs, es);
            }
        }
        for (int d = last - 1; d >= 0; d--) {
            if (++idx[d] < y->shape[d]) break;
            idx[d] = 0;
        }
    }
}

/* REPEAT, ROLL, PAD: y is a fresh contiguous tensor of x's dtype. */
static em_status exec_map(const ir_op *op)
{
    const ir_tensor *y = op->out[0];
    int r = y->rank;
    if (ir_numel(y) == 0) return EM_OK;
    if (r == 0) {
        memcpy(ir_ptr(y), ir_ptr(op->in[0]), em_dtype_size(y->dtype));
        return EM_OK;
    }
    ir_tensor xv;
    int64_t off[EM_MAX_RANK];
    int64_t total = ir_map_plan(op, &xv, NULL, off);
    map_ctx c = {.x = &xv, .y = y, .rank = r, .es = em_dtype_size(y->dtype)};
    int64_t *buf = malloc((size_t)total * sizeof *buf);
    if (!buf) return em_error(EM_ERR_OOM, "cpu: %s: out of memory", em_op_name(op->kind));
    ir_map_plan(op, &xv, buf, off);
    for (int d = 0; d < r; d++) c.map[d] = buf + off[d];
    if (op->kind == EM_OP_PAD) ir_set_f64(c.fill, y->dtype, op->p.pad.value);
    c.zero_fill = true;
    for (size_t k = 0; k < c.es; k++)
        if (c.fill[k]) c.zero_fill = false;
    /* is the last dim's map fill, one ascending run, fill? */
    const int64_t *ml = c.map[r - 1];
    int64_t nl = y->shape[r - 1], lo_j = 0;
    while (lo_j < nl && ml[lo_j] < 0) lo_j++;
    int64_t hi_j = lo_j;
    while (hi_j < nl && ml[hi_j] == ml[lo_j] + (hi_j - lo_j)) hi_j++;
    int64_t tail = hi_j;
    while (tail < nl && ml[tail] < 0) tail++;
    c.run_hi = -1;
    if (tail == nl) {
        c.run_lo = lo_j, c.run_hi = hi_j, c.run_x = hi_j > lo_j ? ml[lo_j] : 0;
    }
    int64_t rows = ir_numel(y) / y->shape[r - 1];
    int64_t grain = CPU_PAR_MIN / y->shape[r - 1] + 1;
    em_parallel_for(rows, grain, map_rows, &c);
    free(buf);
    return EM_OK;
}

em_status cpu_exec_combine(const ir_op *op)
{
    switch (op->kind) {
    case EM_OP_CAT: return exec_cat(op);
    case EM_OP_REPEAT:
    case EM_OP_ROLL:
    case EM_OP_PAD: return exec_map(op);
    default:
        return em_error(EM_ERR_UNSUPPORTED, "cpu: op %s is not a combine op", em_op_name(op->kind));
    }
}
