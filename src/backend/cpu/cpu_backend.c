/* The CPU backend: memory, copies, the op-family dispatch table and the strided loop shared by
 * its kernels. */
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "cpu.h"
#include "cpu_cache.h"

static int cpu_device_count(void)
{
    return 1;
}

static int64_t page_bytes(int name)
{
    long pages = sysconf(name), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (int64_t)pages * size : -1;
}

/* A block larger than the host's physical memory is refused at once (the tensor layer checks
 * tensors before this; this holds for every caller): trying would only fault pages in for a
 * long time before failing. */
static bool fits_host(size_t nbytes)
{
    static _Atomic int64_t phys; /* 0: not read yet */
    int64_t have = atomic_load(&phys);
    if (have == 0) {
        have = page_bytes(_SC_PHYS_PAGES);
        atomic_store(&phys, have);
    }
    if (have < 0 || nbytes <= (uint64_t)have) return true;
    em_error(EM_ERR_OOM, "cpu: %zu bytes (%.1f GiB) is more than the host's %.1f GiB of memory",
             nbytes, (double)nbytes / (1 << 30), (double)have / (1 << 30));
    return false;
}

static void *cpu_alloc(int device, size_t nbytes)
{
    return fits_host(nbytes) ? cpu_cache_alloc(nbytes) : NULL;
}

static _Atomic int64_t persistent_bytes;

/* Persistent storage: a plain em_alloc block, outside the cache, back to the system when freed. */
static void *cpu_alloc_persistent(int device, size_t nbytes)
{
    void *p = fits_host(nbytes) ? em_alloc(nbytes) : NULL;
    if (p) atomic_fetch_add(&persistent_bytes, (int64_t)nbytes);
    return p;
}

static void cpu_free(int device, void *p)
{
    cpu_cache_free(p);
}

static void cpu_free_persistent(int device, void *p, size_t nbytes)
{
    atomic_fetch_sub(&persistent_bytes, (int64_t)nbytes);
    em_free(p);
}

/* The first "model name" line of /proc/cpuinfo (x86, some Arm kernels); false when there is none.
 */
static bool cpu_model_name(char *buf, size_t cap)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return false;
    char line[512];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon) continue;
        colon++;
        while (*colon == ' ' || *colon == '\t') colon++;
        colon[strcspn(colon, "\n")] = '\0';
        snprintf(buf, cap, "%s", colon);
        found = *colon != '\0';
    }
    fclose(f);
    return found;
}

static void cpu_props(int device, em_device_props *out)
{
    if (!cpu_model_name(out->name, sizeof out->name)) snprintf(out->name, sizeof out->name, "cpu");
    out->total_memory = page_bytes(_SC_PHYS_PAGES);
    out->processors = core_hw_threads();
}

/* MemAvailable of /proc/meminfo (what can be allocated without swapping), else the free pages. */
static int64_t host_free_bytes(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    long long kb = -1;
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
        fclose(f);
    }
    return kb >= 0 ? (int64_t)kb * 1024 : page_bytes(_SC_AVPHYS_PAGES);
}

static void cpu_mem_stats(int device, em_device_mem_stats *out)
{
    em_mem_stats m = em_mem_get_stats();
    out->in_use_bytes = m.current_bytes;
    out->peak_in_use_bytes = m.peak_bytes;
    out->cached_bytes = m.cached_bytes;
    out->persistent_bytes = atomic_load(&persistent_bytes);
    /* em_alloc's own blocks (handles, work buffers, persistent storage) count as taken from the
       system, as the cache's misses do */
    out->allocs = m.total_allocs - m.cache_hits;
    out->reuses = m.cache_hits;
    out->free_bytes = host_free_bytes();
    out->total_bytes = page_bytes(_SC_PHYS_PAGES);
}

static int64_t cpu_empty_cache(int device)
{
    return em_mem_trim();
}

static void cpu_reset_peak(int device)
{
    em_mem_reset_peak();
}

static em_status cpu_copy(int device, void *dst, const void *src, size_t nbytes)
{
    if (nbytes) memmove(dst, src, nbytes);
    return EM_OK;
}

typedef em_status (*exec_fn)(const ir_op *op);

static const exec_fn exec_table[] = {
#define X(name, str, fam, ...) cpu_exec_##fam,
#include "../../ir/ops.def"
#undef X
};

static bool cpu_supports(const ir_op *op)
{
    /* SDPA's second output (the rows' log-sum-exp for the fused backward) is a device kernel's
       by-product; the CPU backward recomputes the softmax and ignores an lse input */
    if (op->kind == EM_OP_SDPA && op->n_out != 1) return false;
    return op->kind >= 0 && op->kind < EM_OP_COUNT;
}

static em_status cpu_exec(const ir_op *op)
{
    return exec_table[op->kind](op);
}

em_status cpu_exec_view(const ir_op *op)
{
    return EM_OK; /* views carry no work */
}

static em_status cpu_sync(int device)
{
    return EM_OK;
}

const em_backend cpu_backend = {
    .name = "cpu",
    .device_count = cpu_device_count,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy_from_host = cpu_copy,
    .copy_to_host = cpu_copy,
    .copy_within = cpu_copy,
    .supports = cpu_supports,
    .exec = cpu_exec,
    .sync = cpu_sync,
    .props = cpu_props,
    .mem_stats = cpu_mem_stats,
    .empty_cache = cpu_empty_cache,
    .reset_peak = cpu_reset_peak,
    .alloc_persistent = cpu_alloc_persistent,
    .free_persistent = cpu_free_persistent,
};

/* ---- strided loop ------------------------------------------------------------------------ */

typedef struct loop_plan {
    int rank;
    int nops;
    int64_t shape[EM_MAX_RANK];
    int64_t strides[CPU_MAX_OPS][EM_MAX_RANK];
    char *base[CPU_MAX_OPS];
    cpu_row_fn fn;
    void *ctx;
    int64_t rows;  /* product of all dims but the last */
    int64_t inner; /* last dim */
    int64_t chunk; /* when rows == 1: elements per parallel chunk of the single row */
} loop_plan;

/* Runs rows [r0, r1) of the plan. */
static void run_rows(const loop_plan *p, int64_t r0, int64_t r1)
{
    int outer = p->rank - 1;
    int64_t idx[EM_MAX_RANK] = {0};
    char *ptr[CPU_MAX_OPS];
    int64_t inner_strides[CPU_MAX_OPS];
    for (int k = 0; k < p->nops; k++) inner_strides[k] = p->strides[k][p->rank - 1];
    /* decompose r0 into an outer index */
    int64_t r = r0;
    for (int d = outer - 1; d >= 0; d--) {
        idx[d] = r % p->shape[d];
        r /= p->shape[d];
    }
    for (int64_t row = r0; row < r1; row++) {
        for (int k = 0; k < p->nops; k++) {
            char *q = p->base[k];
            for (int d = 0; d < outer; d++) q += idx[d] * p->strides[k][d];
            ptr[k] = q;
        }
        p->fn(ptr, inner_strides, p->inner, p->ctx);
        for (int d = outer - 1; d >= 0; d--) {
            if (++idx[d] < p->shape[d]) break;
            idx[d] = 0;
        }
    }
}

static void run_row_chunks(void *ctx, int64_t b, int64_t e)
{
    const loop_plan *p = ctx;
    run_rows(p, b, e);
}

static void run_inner_chunks(void *ctx, int64_t b, int64_t e)
{
    const loop_plan *p = ctx;
    char *ptr[CPU_MAX_OPS];
    int64_t st[CPU_MAX_OPS];
    int64_t start = b * p->chunk;
    int64_t end = e * p->chunk < p->inner ? e * p->chunk : p->inner;
    for (int k = 0; k < p->nops; k++) {
        st[k] = p->strides[k][0];
        ptr[k] = p->base[k] + start * st[k];
    }
    p->fn(ptr, st, end - start, p->ctx);
}

void cpu_loop(int rank, const int64_t *shape, int nops, char *const *base,
              int64_t strides[][EM_MAX_RANK], cpu_row_fn fn, void *ctx, bool parallel)
{
    loop_plan p;
    p.nops = nops;
    p.fn = fn;
    p.ctx = ctx;
    int64_t numel = 1;
    for (int d = 0; d < rank; d++) numel *= shape[d];
    if (numel == 0) return;
    for (int k = 0; k < nops; k++) p.base[k] = base[k];
    /* Drop size-1 dims, then merge dim d into d+1 when every operand is contiguous across. */
    int r = 0;
    for (int d = 0; d < rank; d++) {
        if (shape[d] == 1) continue;
        p.shape[r] = shape[d];
        for (int k = 0; k < nops; k++) p.strides[k][r] = strides[k][d];
        r++;
    }
    if (r == 0) {
        p.shape[0] = 1;
        for (int k = 0; k < nops; k++) p.strides[k][0] = 0;
        r = 1;
    }
    int m = 0;
    for (int d = 1; d < r; d++) {
        bool merge = true;
        for (int k = 0; k < nops; k++)
            if (p.strides[k][m] != p.strides[k][d] * p.shape[d]) merge = false;
        if (merge) {
            p.shape[m] *= p.shape[d];
            for (int k = 0; k < nops; k++) p.strides[k][m] = p.strides[k][d];
        } else {
            m++;
            p.shape[m] = p.shape[d];
            for (int k = 0; k < nops; k++) p.strides[k][m] = p.strides[k][d];
        }
    }
    p.rank = m + 1;
    p.inner = p.shape[p.rank - 1];
    p.rows = numel / p.inner;
    if (!parallel || numel < CPU_PAR_MIN || em_get_num_threads() == 1) {
        run_rows(&p, 0, p.rows);
        return;
    }
    if (p.rows == 1) {
        p.chunk = 16384;
        em_parallel_for((p.inner + p.chunk - 1) / p.chunk, 1, run_inner_chunks, &p);
    } else {
        int64_t grain = CPU_PAR_MIN / p.inner + 1;
        em_parallel_for(p.rows, grain, run_row_chunks, &p);
    }
}

void cpu_bstrides(const ir_tensor *t, const int64_t *shape, int r, int64_t *out)
{
    ir_broadcast_strides(t, shape, r, out);
    int64_t es = (int64_t)em_dtype_size(t->dtype);
    for (int d = 0; d < r; d++) out[d] *= es;
}

typedef struct conv_ctx {
    em_dtype dt_out, dt_in;
} conv_ctx;

/* n elements of size sizeof(T) from `in` to `o`, byte strides s[1] and s[0] (a stride of 0
 * repeats); fixed-size memcpy compiles to plain moves and leaves alignment free. */
#define STRIDED_COPY(T)                                                                            \
    do {                                                                                           \
        if (s[1] == 0) {                                                                           \
            T v;                                                                                   \
            memcpy(&v, in, sizeof v);                                                              \
            for (int64_t i = 0; i < n; i++) memcpy(o + i * s[0], &v, sizeof v);                    \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++) memcpy(o + i * s[0], in + i * s[1], sizeof(T));        \
        }                                                                                          \
    } while (0)

static void copy_row(char **p, const int64_t *s, int64_t n, void *ctx)
{
    const conv_ctx *c = ctx;
    char *o = p[0];
    const char *in = p[1];
    if (c->dt_out == c->dt_in) {
        size_t es = em_dtype_size(c->dt_in);
        if (s[0] == (int64_t)es && s[1] == (int64_t)es) {
            memcpy(o, in, (size_t)n * es);
            return;
        }
        /* strided or broadcast: typed moves, not a memcpy call per element */
        switch (es) {
        case 4: STRIDED_COPY(uint32_t); return;
        case 8: STRIDED_COPY(uint64_t); return;
        case 2: STRIDED_COPY(uint16_t); return;
        case 1: STRIDED_COPY(uint8_t); return;
        default: break;
        }
        for (int64_t i = 0; i < n; i++, o += s[0], in += s[1]) memcpy(o, in, es);
        return;
    }
    bool exact_int = !em_dtype_is_float(c->dt_in) && !em_dtype_is_float(c->dt_out);
    for (int64_t i = 0; i < n; i++, o += s[0], in += s[1]) {
        if (exact_int)
            ir_set_i64(o, c->dt_out, ir_get_i64(in, c->dt_in));
        else if (c->dt_out == EM_BOOL)
            *(uint8_t *)o = ir_get_f64(in, c->dt_in) != 0;
        else
            ir_set_f64(o, c->dt_out, ir_get_f64(in, c->dt_in));
    }
}

void cpu_copy_convert(ir_tensor *dst, const ir_tensor *src)
{
    int64_t st[2][EM_MAX_RANK];
    cpu_bstrides(dst, dst->shape, dst->rank, st[0]);
    cpu_bstrides(src, dst->shape, dst->rank, st[1]);
    char *base[2] = {ir_ptr(dst), ir_ptr(src)};
    conv_ctx c = {dst->dtype, src->dtype};
    cpu_loop(dst->rank, dst->shape, 2, base, st, copy_row, &c, true);
}

double *cpu_load_f64(const ir_tensor *t)
{
    int64_t n = ir_numel(t);
    double *buf = em_alloc((size_t)(n ? n : 1) * sizeof(double));
    if (!buf) return NULL;
    ir_tensor dst = *t;
    dst.dtype = EM_F64;
    dst.data = buf;
    ir_contiguous_strides(dst.shape, dst.rank, dst.strides);
    cpu_copy_convert(&dst, t);
    return buf;
}

void cpu_store_f64(ir_tensor *out, const double *v)
{
    ir_tensor src = *out;
    src.dtype = EM_F64;
    src.data = (void *)v;
    ir_contiguous_strides(src.shape, src.rank, src.strides);
    cpu_copy_convert(out, &src);
}
