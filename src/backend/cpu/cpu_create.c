/* CPU kernels for creation ops and copies: fills, ranges, random streams, one-hot, triangles,
 * contiguous copies and casts. */
#include "cpu.h"

/* Writes v into element i of a contiguous output. */
static inline void put(const ir_tensor *o, int64_t i, double v)
{
    ir_set_f64(ir_ptr(o) + i * (int64_t)em_dtype_size(o->dtype), o->dtype, v);
}

typedef struct rng_ctx {
    const ir_op *op;
    const ir_tensor *out;
    const ir_tensor *p; /* bernoulli probabilities, or NULL */
} rng_ctx;

/* Largest value of dt strictly below `high` (for uniform draws that round up to it). */
static double below(double high, em_dtype dt)
{
    switch (dt) {
    case EM_F32: return nextafterf((float)high, -INFINITY);
    case EM_F16:
    case EM_BF16: {
        uint16_t h = dt == EM_F16 ? em_f32_to_f16((float)high) : em_f32_to_bf16((float)high);
        if ((h & 0x7fff) == 0)
            h = 0x8001; /* +-0 -> smallest negative subnormal */
        else if (h & 0x8000)
            h = (uint16_t)(h + 1); /* negative: grow the magnitude */
        else
            h = (uint16_t)(h - 1);
        return dt == EM_F16 ? em_f16_to_f32(h) : em_bf16_to_f32(h);
    }
    default: return nextafter(high, -INFINITY);
    }
}

static void rng_range(void *vctx, int64_t b, int64_t e)
{
    const rng_ctx *c = vctx;
    const ir_op *op = c->op;
    const ir_tensor *o = c->out;
    const em_p_random *r = &op->p.random;
    uint64_t seed = r->seed, off = r->offset;
    size_t es = em_dtype_size(o->dtype);
    char *base = ir_ptr(o);
    for (int64_t i = b; i < e; i++) {
        char *dst = base + i * (int64_t)es;
        switch (op->kind) {
        case EM_OP_RAND_UNIFORM: {
            double u = em_rng_uniform_at(seed, off, (uint64_t)i);
            double v = r->low + u * (r->high - r->low);
            ir_set_f64(dst, o->dtype, v);
            /* rounding to the dtype may reach `high`, which the range excludes */
            if (r->high > r->low && ir_get_f64(dst, o->dtype) >= r->high)
                ir_set_f64(dst, o->dtype, below(r->high, o->dtype));
            break;
        }
        case EM_OP_RAND_NORMAL:
            ir_set_f64(dst, o->dtype, r->mean + r->std * em_rng_normal_at(seed, off, (uint64_t)i));
            break;
        case EM_OP_BERNOULLI: {
            double p = c->p ? ir_get_f64(ir_elem(c->p, i), c->p->dtype) : r->p;
            ir_set_f64(dst, o->dtype, em_rng_uniform_at(seed, off, (uint64_t)i) < p ? 1.0 : 0.0);
            break;
        }
        case EM_OP_RANDINT: {
            double u = em_rng_uniform_at(seed, off, (uint64_t)i);
            int64_t range = r->int_high - r->int_low;
            int64_t k = (int64_t)(u * (double)range);
            if (k >= range) k = range - 1;
            ir_set_i64(dst, o->dtype, r->int_low + k);
            break;
        }
        default: break;
        }
    }
}

typedef struct fill_ctx {
    double v;
    int64_t iv;
    bool is_int;
    em_dtype dt;
} fill_ctx;

static void fill_row(char **p, const int64_t *s, int64_t n, void *vctx)
{
    const fill_ctx *c = vctx;
    char *o = p[0];
    size_t es = em_dtype_size(c->dt);
    unsigned char pat[8];
    if (c->is_int)
        ir_set_i64(pat, c->dt, c->iv);
    else
        ir_set_f64(pat, c->dt, c->v);
    if (c->dt == EM_F32 && s[0] == 4) {
        float v = *(float *)pat;
        float *f = (float *)o;
        for (int64_t i = 0; i < n; i++) f[i] = v;
        return;
    }
    for (int64_t i = 0; i < n; i++, o += s[0]) memcpy(o, pat, es);
}

static void fill(const ir_tensor *o, double v)
{
    fill_ctx c = {.v = v, .dt = o->dtype};
    if (!em_dtype_is_float(o->dtype) && o->dtype != EM_BOOL) {
        c.is_int = true;
        c.iv = isnan(v) ? 0 : (v >= 9.2e18 ? INT64_MAX : (v <= -9.2e18 ? INT64_MIN : (int64_t)v));
    }
    int64_t st[1][EM_MAX_RANK];
    cpu_bstrides(o, o->shape, o->rank, st[0]);
    char *base[1] = {ir_ptr(o)};
    cpu_loop(o->rank, o->shape, 1, base, st, fill_row, &c, true);
}

em_status cpu_exec_create(const ir_op *op)
{
    const ir_tensor *o = op->out[0];
    int64_t n = ir_numel(o);
    switch (op->kind) {
    case EM_OP_FILL: fill(o, op->p.fill.value); return EM_OK;
    case EM_OP_ARANGE:
        for (int64_t i = 0; i < n; i++)
            put(o, i, op->p.arange.start + (double)i * op->p.arange.step);
        return EM_OK;
    case EM_OP_LINSPACE: {
        double a = op->p.linspace.start, b = op->p.linspace.end;
        double step = n > 1 ? (b - a) / (double)(n - 1) : 0;
        /* symmetric evaluation (as PyTorch): first half from the start, second from the end */
        for (int64_t i = 0; i < n; i++)
            put(o, i,
                n == 1      ? a
                : i < n / 2 ? a + step * (double)i
                            : b - step * (double)(n - 1 - i));
        return EM_OK;
    }
    case EM_OP_EYE: {
        int64_t r = o->shape[0], c = o->shape[1];
        for (int64_t i = 0; i < r; i++)
            for (int64_t j = 0; j < c; j++) put(o, i * c + j, i == j ? 1.0 : 0.0);
        return EM_OK;
    }
    case EM_OP_RAND_UNIFORM:
    case EM_OP_RAND_NORMAL:
    case EM_OP_BERNOULLI:
    case EM_OP_RANDINT: {
        rng_ctx c = {.op = op, .out = o, .p = op->n_in == 1 ? op->in[0] : NULL};
        em_parallel_for(n, 4096, rng_range, &c);
        return EM_OK;
    }
    case EM_OP_ONE_HOT: {
        const ir_tensor *idx = op->in[0];
        int64_t classes = op->p.one_hot.classes;
        int64_t *out = (int64_t *)ir_ptr(o);
        memset(out, 0, (size_t)n * sizeof *out);
        int64_t m = ir_numel(idx);
        int64_t pos[EM_MAX_RANK] = {0};
        for (int64_t k = 0; k < m; k++) {
            const char *p = ir_ptr(idx);
            int64_t off = 0;
            for (int d = 0; d < idx->rank; d++) off += pos[d] * idx->strides[d];
            int64_t v = ir_get_i64(p + off * (int64_t)em_dtype_size(idx->dtype), idx->dtype);
            out[k * classes + v] = 1;
            for (int d = idx->rank - 1; d >= 0; d--) {
                if (++pos[d] < idx->shape[d]) break;
                pos[d] = 0;
            }
        }
        return EM_OK;
    }
    case EM_OP_TRIL:
    case EM_OP_TRIU: {
        cpu_copy_convert(op->out[0], op->in[0]);
        int64_t r = o->shape[o->rank - 2], c = o->shape[o->rank - 1];
        int64_t mats = (r > 0 && c > 0) ? n / (r * c) : 0;
        size_t es = em_dtype_size(o->dtype);
        char *base = ir_ptr(o);
        for (int64_t m = 0; m < mats; m++)
            for (int64_t i = 0; i < r; i++)
                for (int64_t j = 0; j < c; j++) {
                    int64_t k = op->p.diag.k;
                    bool keep = op->kind == EM_OP_TRIL ? j - i <= k : j - i >= k;
                    if (!keep) memset(base + ((m * r + i) * c + j) * (int64_t)es, 0, es);
                }
        return EM_OK;
    }
    case EM_OP_COPY:
    case EM_OP_CAST: cpu_copy_convert(op->out[0], op->in[0]); return EM_OK;
    default: break;
    }
    return em_error(EM_ERR_UNSUPPORTED, "cpu: op %s is not a creation op", em_op_name(op->kind));
}
