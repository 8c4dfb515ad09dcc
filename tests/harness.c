/* The test harness behind tests/harness.h. */
#include "harness.h"

#include <stdarg.h>
#include <stdint.h>
#include <string.h>

int h_passed, h_failed;
em_device h_dev;
static int64_t base_bytes, base_tensors;
static uint64_t h_state = 0x9E3779B97F4A7C15ull;

void h_init(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    em_mem_set_guards(true);
    em_seed(1234);
    h_dev = EM_CPU;
    const char *td = getenv("EMBER_TEST_DEVICE");
    if (td && *td) {
        if (!strncmp(td, "sim", 3)) h_register_sim_backend();
        h_dev = em_device_parse(td);
        if (em_failed()) {
            printf("EMBER_TEST_DEVICE: %s\n", em_last_error());
            exit(2);
        }
    }
    /* Touch the library once so lazy initialisation is inside the baseline. */
    em_tensor *t = em_zeros(EM_SHAPE(1), EM_F32, h_dev);
    em_release(t);
    em_clear_error();
    base_bytes = em_mem_get_stats().current_bytes;
    base_tensors = em_live_tensors();
}

int h_finish(void)
{
    int64_t bad = em_mem_check_guards();
    CHECK(bad == 0, "%lld allocations have damaged guard bytes", (long long)bad);
    int64_t live = em_live_tensors() - base_tensors;
    CHECK(live == 0, "%lld tensor handles leaked", (long long)live);
    int64_t bytes = em_mem_get_stats().current_bytes - base_bytes;
    CHECK(bytes == 0, "%lld bytes leaked", (long long)bytes);
    CHECK(em_scope_depth() == 0, "%d scopes left open", em_scope_depth());
    h_sim_report();
    printf("%d passed, %d failed\n", h_passed, h_failed);
    return h_failed ? 1 : 0;
}

void h_check_(bool ok, const char *file, int line, const char *fmt, ...)
{
    if (ok) {
        h_passed++;
        return;
    }
    h_failed++;
    if (h_failed > 200) return; /* keep the log readable */
    printf("FAIL %s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

void h_check_ok_(const char *what, const char *file, int line)
{
    bool ok = !em_failed();
    h_check_(ok, file, line, "%s: unexpected error: %s", what, em_last_error());
    em_clear_error();
}

void h_check_err_(em_status code, const char *needle, const char *file, int line)
{
    em_status got = em_last_status();
    const char *msg = em_last_error();
    bool ok = got == code && (!needle || strstr(msg, needle));
    h_check_(ok, file, line, "expected error %s containing \"%s\", got %s: \"%s\"",
             em_status_name(code), needle ? needle : "", em_status_name(got), msg);
    em_clear_error();
}

bool h_close(double a, double b, double atol, double rtol)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    if (isinf(a) || isinf(b)) return a == b;
    return fabs(a - b) <= atol + rtol * fabs(b);
}

double h_atol(em_dtype dt)
{
    switch (dt) {
    case EM_F64: return 1e-10;
    case EM_F32: return 1e-5;
    case EM_F16: return 2e-3;
    case EM_BF16: return 1.6e-2;
    default: return 0;
    }
}

double h_rtol(em_dtype dt)
{
    switch (dt) {
    case EM_F64: return 1e-10;
    case EM_F32: return 1e-5;
    case EM_F16: return 2e-3;
    case EM_BF16: return 1.6e-2;
    default: return 0;
    }
}

bool h_check_tensor(const char *what, const em_tensor *got, const double *expect, em_shape shape,
                    double atol, double rtol)
{
    if (!got) {
        CHECK(false, "%s: got NULL (%s)", what, em_last_error());
        em_clear_error();
        return false;
    }
    em_shape gs = em_tensor_shape(got);
    if (!em_shape_equal(gs, shape)) {
        char a[128], b[128];
        CHECK(false, "%s: shape %s, expected %s", what, em_shape_str(gs, a, sizeof a),
              em_shape_str(shape, b, sizeof b));
        return false;
    }
    double *v = h_values(got);
    int64_t n = em_shape_numel(shape);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!h_close(v[i], expect[i], atol, rtol)) {
            if (bad < 5)
                printf("  %s [%s]: element %lld is %.17g, expected %.17g\n", what,
                       em_dtype_name(em_tensor_dtype(got)), (long long)i, v[i], expect[i]);
            bad++;
        }
    }
    free(v);
    CHECK(bad == 0, "%s: %d of %lld elements differ", what, bad, (long long)n);
    return bad == 0;
}

double h_uniform(void)
{
    /* splitmix64: independent of the library's generator */
    uint64_t z = (h_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

double h_round_to(double v, em_dtype dt)
{
    switch (dt) {
    case EM_F64: return v;
    case EM_F32: return (float)v;
    case EM_F16: return em_f16_to_f32(em_f32_to_f16((float)v));
    case EM_BF16: return em_bf16_to_f32(em_f32_to_bf16((float)v));
    case EM_BOOL: return v != 0;
    default: return trunc(v);
    }
}

int64_t h_offset(em_shape s, const int64_t *idx)
{
    int64_t off = 0;
    for (int d = 0; d < s.rank; d++) off = off * s.dims[d] + idx[d];
    return off;
}

bool h_next_index(em_shape s, int64_t *idx)
{
    for (int d = s.rank - 1; d >= 0; d--) {
        if (++idx[d] < s.dims[d]) return true;
        idx[d] = 0;
    }
    return false;
}

double *h_values(const em_tensor *t)
{
    int64_t n = em_tensor_numel(t);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (n && em_to_data(t, v, EM_F64, n) != EM_OK) {
        printf("h_values: %s\n", em_last_error());
        em_clear_error();
        for (int64_t i = 0; i < n; i++) v[i] = NAN;
    }
    return v;
}

em_tensor *h_from_values(const double *v, em_shape s, em_dtype dt, h_layout layout)
{
    int r = s.rank;
    if (layout == H_TRANSPOSED && r < 2) layout = H_CONTIG;
    if (layout == H_FLIPPED && r < 1) layout = H_CONTIG;
    if (layout == H_CONTIG) return em_from_data(v, EM_F64, s, dt, h_dev);
    if (layout == H_TRANSPOSED) {
        /* store as [..., n, m] transposed: build the swapped tensor then transpose back */
        em_shape sw = s;
        sw.dims[r - 1] = s.dims[r - 2];
        sw.dims[r - 2] = s.dims[r - 1];
        int64_t n = em_shape_numel(s);
        double *w = malloc((size_t)(n ? n : 1) * sizeof *w);
        int64_t idx[EM_MAX_RANK] = {0};
        if (n) do {
                int64_t j[EM_MAX_RANK];
                memcpy(j, idx, sizeof j);
                j[r - 1] = idx[r - 2];
                j[r - 2] = idx[r - 1];
                w[h_offset(sw, j)] = v[h_offset(s, idx)];
            } while (h_next_index(s, idx));
        em_tensor *base = em_from_data(w, EM_F64, sw, dt, h_dev);
        free(w);
        em_tensor *t = em_transpose(base, -1, -2);
        em_release(base);
        return t;
    }
    if (layout == H_FLIPPED) {
        em_tensor *c = em_from_data(v, EM_F64, s, dt, h_dev);
        em_tensor *f1 = em_flip(c, EM_AXES(0));
        em_release(c);
        em_tensor *c2 = em_contiguous(f1);
        em_release(f1);
        em_tensor *f2 = em_flip(c2, EM_AXES(0));
        em_release(c2);
        return f2;
    }
    /* H_STRIDED: a tensor twice as large along each dim; ours is every other element */
    em_shape big = s;
    for (int d = 0; d < r; d++) big.dims[d] = s.dims[d] * 2 + 1;
    int64_t nb = em_shape_numel(big);
    double *w = malloc((size_t)(nb ? nb : 1) * sizeof *w);
    for (int64_t i = 0; i < nb; i++) w[i] = -777.0; /* poison: must never be read */
    int64_t n = em_shape_numel(s);
    int64_t idx[EM_MAX_RANK] = {0};
    if (n) do {
            int64_t j[EM_MAX_RANK];
            for (int d = 0; d < r; d++) j[d] = 1 + 2 * idx[d];
            w[h_offset(big, j)] = v[h_offset(s, idx)];
        } while (h_next_index(s, idx));
    em_tensor *t = em_from_data(w, EM_F64, big, dt, h_dev);
    free(w);
    for (int d = 0; d < r && t; d++) {
        em_tensor *u = em_slice(t, d, 1, 1 + 2 * s.dims[d], 2);
        em_release(t);
        t = u;
    }
    return t;
}

em_tensor *h_rand(em_shape s, em_dtype dt, h_layout layout, double lo, double hi, double **values)
{
    int64_t n = em_shape_numel(s);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        double x = lo + (hi - lo) * h_uniform();
        if (!em_dtype_is_float(dt)) x = floor(x);
        if (dt == EM_BOOL) x = x != 0;
        if (dt == EM_U8 && x < 0) x = 0;
        v[i] = h_round_to(x, dt);
    }
    em_tensor *t = h_from_values(v, s, dt, layout);
    if (values)
        *values = v;
    else
        free(v);
    return t;
}

/* ---- fixtures ---------------------------------------------------------------------------- */

typedef struct fx_entry {
    char name[128];
    em_shape shape;
    int kind; /* 0 f64, 1 i64 */
    double *values;
} fx_entry;

struct h_fixture {
    int n;
    fx_entry *e;
};

/* Format (little-endian): "EMFX" u32 count, then per tensor: u32 name_len, name bytes, u8 kind
 * (0 = f64, 1 = i64), u8 rank, i64 dims[rank], then numel values of 8 bytes. */
h_fixture *h_fixture_load(const char *name)
{
    const char *dir = getenv("EMBER_FIXTURES");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/fixtures", name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        CHECK(false, "fixture %s cannot be opened", path);
        return NULL;
    }
    char magic[4];
    uint32_t count = 0;
    if (fread(magic, 1, 4, f) != 4 || memcmp(magic, "EMFX", 4) != 0 ||
        fread(&count, 4, 1, f) != 1 || count > 100000) {
        fclose(f);
        CHECK(false, "fixture %s is malformed", path);
        return NULL;
    }
    h_fixture *fx = calloc(1, sizeof *fx);
    fx->e = calloc(count ? count : 1, sizeof *fx->e);
    for (uint32_t i = 0; i < count; i++) {
        fx_entry *e = &fx->e[i];
        uint32_t len = 0;
        uint8_t kind = 0, rank = 0;
        bool ok = fread(&len, 4, 1, f) == 1 && len < sizeof e->name &&
                  fread(e->name, 1, len, f) == len && fread(&kind, 1, 1, f) == 1 &&
                  fread(&rank, 1, 1, f) == 1 && rank <= EM_MAX_RANK;
        e->shape.rank = rank;
        for (int d = 0; ok && d < rank; d++) ok = fread(&e->shape.dims[d], 8, 1, f) == 1;
        int64_t n = ok ? em_shape_numel(e->shape) : 0;
        e->values = malloc((size_t)(n ? n : 1) * sizeof(double));
        e->kind = kind;
        for (int64_t k = 0; ok && k < n; k++) {
            if (kind == 1) {
                int64_t iv;
                ok = fread(&iv, 8, 1, f) == 1;
                e->values[k] = (double)iv;
            } else {
                ok = fread(&e->values[k], 8, 1, f) == 1;
            }
        }
        fx->n = (int)i + 1;
        if (!ok) {
            CHECK(false, "fixture %s is truncated", path);
            break;
        }
    }
    fclose(f);
    return fx;
}

void h_fixture_free(h_fixture *fx)
{
    if (!fx) return;
    for (int i = 0; i < fx->n; i++) free(fx->e[i].values);
    free(fx->e);
    free(fx);
}

static fx_entry *fx_find(h_fixture *fx, const char *name)
{
    if (!fx) return NULL;
    for (int i = 0; i < fx->n; i++)
        if (strcmp(fx->e[i].name, name) == 0) return &fx->e[i];
    CHECK(false, "fixture has no tensor \"%s\"", name);
    return NULL;
}

const double *h_fixture_values(h_fixture *fx, const char *name, em_shape *shape)
{
    fx_entry *e = fx_find(fx, name);
    if (!e) return NULL;
    if (shape) *shape = e->shape;
    return e->values;
}

em_tensor *h_fixture_tensor(h_fixture *fx, const char *name)
{
    fx_entry *e = fx_find(fx, name);
    if (!e) return NULL;
    return em_from_data(e->values, EM_F64, e->shape, e->kind == 1 ? EM_I64 : EM_F64, h_dev);
}

double h_fixture_scalar(h_fixture *fx, const char *name)
{
    fx_entry *e = fx_find(fx, name);
    return e ? e->values[0] : NAN;
}

/* ---- gradient checks --------------------------------------------------------------------- */

#define GC_EPS 1e-6

/* sum(y * w) in f64 on the host; y NULL gives NaN. */
static double weighted_sum(const em_tensor *y, const double *w)
{
    if (!y) return NAN;
    double *v = h_values(y);
    double s = 0;
    int64_t n = em_tensor_numel(y);
    for (int64_t i = 0; i < n; i++) s += v[i] * w[i];
    free(v);
    return s;
}

/* Evaluates f with input `which` replaced by `values` (contiguous f64), others as given. */
static em_tensor *eval_with(h_fn f, void *ctx, em_tensor *const *inputs, int n, int which,
                            const double *values)
{
    em_tensor *in[8];
    for (int i = 0; i < n; i++) in[i] = inputs[i];
    em_tensor *repl = NULL;
    if (which >= 0) {
        repl = em_from_data(values, EM_F64, em_tensor_shape(inputs[which]), EM_F64, h_dev);
        in[which] = repl;
    }
    em_tensor *y = f(in, n, ctx);
    em_release(repl);
    return y;
}

/* Analytic gradients of sum(f(x) * w) wrt the chosen inputs, as host arrays (NULL when the
 * input got no gradient: zeros). With create_graph, *graph receives the gradient tensors. */
static bool analytic(h_fn f, void *ctx, em_tensor *const *inputs, int n, const bool *wrt,
                     const double *w, em_tensor **leaves, double **out)
{
    em_tensor *y = f(leaves, n, ctx);
    if (!y) return false;
    em_tensor *wt = em_from_data(w, EM_F64, em_tensor_shape(y), em_tensor_dtype(y), h_dev);
    em_tensor *l = em_sum(em_mul(y, wt), EM_ALL, false);
    em_grads *g = l ? em_backward(l) : NULL;
    if (!g) return false;
    for (int i = 0; i < n; i++) {
        out[i] = NULL;
        if (wrt && !wrt[i]) continue;
        em_tensor *gi = em_grad(g, leaves[i]);
        int64_t m = em_tensor_numel(inputs[i]);
        out[i] = calloc((size_t)(m ? m : 1), sizeof(double));
        if (gi) {
            double *v = h_values(gi);
            memcpy(out[i], v, (size_t)m * sizeof(double));
            free(v);
        }
    }
    return true;
}

static bool compare_grads(const char *what, const char *order, int input, const double *a,
                          const double *num, int64_t m, double atol, double rtol)
{
    int bad = 0;
    for (int64_t j = 0; j < m; j++) {
        if (!h_close(a[j], num[j], atol, rtol)) {
            if (bad < 4)
                printf("  %s %s: input %d element %lld analytic %.10g numeric %.10g\n", what, order,
                       input, (long long)j, a[j], num[j]);
            bad++;
        }
    }
    CHECK(bad == 0, "%s: %s gradient of input %d: %d of %lld differ", what, order, input, bad,
          (long long)m);
    return bad == 0;
}

bool h_gradcheck(const char *what, h_fn f, void *ctx, em_tensor *const *inputs, int n,
                 const bool *wrt, double atol, double rtol)
{
    if (atol <= 0) atol = 1e-5;
    if (rtol <= 0) rtol = 1e-3;
    em_scope_begin();
    em_tensor *leaves[8];
    for (int i = 0; i < n; i++) {
        leaves[i] = em_detach(inputs[i]);
        if (!wrt || wrt[i]) em_requires_grad(leaves[i], true);
    }
    em_tensor *y0 = f(leaves, n, ctx);
    bool ok = y0 != NULL;
    if (!ok) {
        CHECK(false, "%s: f failed: %s", what, em_last_error());
        em_clear_error();
        em_scope_end();
        return false;
    }
    int64_t ny = em_tensor_numel(y0);
    double *w = malloc((size_t)(ny ? ny : 1) * sizeof *w);
    for (int64_t k = 0; k < ny; k++) w[k] = 2 * h_uniform() - 1;
    double *an[8] = {0};
    if (!analytic(f, ctx, inputs, n, wrt, w, leaves, an)) {
        CHECK(false, "%s: backward failed: %s", what, em_last_error());
        em_clear_error();
        ok = false;
    }
    em_no_grad_begin();
    for (int i = 0; ok && i < n; i++) {
        if (wrt && !wrt[i]) continue;
        int64_t m = em_tensor_numel(inputs[i]);
        double *v = h_values(inputs[i]);
        double *num = malloc((size_t)(m ? m : 1) * sizeof *num);
        for (int64_t j = 0; j < m; j++) {
            double keep = v[j];
            em_scope_begin();
            v[j] = keep + GC_EPS;
            double lp = weighted_sum(eval_with(f, ctx, inputs, n, i, v), w);
            v[j] = keep - GC_EPS;
            double lm = weighted_sum(eval_with(f, ctx, inputs, n, i, v), w);
            em_scope_end();
            v[j] = keep;
            num[j] = (lp - lm) / (2 * GC_EPS);
        }
        ok &= compare_grads(what, "first-order", i, an[i], num, m, atol, rtol);
        free(num);
        free(v);
    }
    em_no_grad_end();
    for (int i = 0; i < n; i++) free(an[i]);
    free(w);
    em_clear_error();
    em_scope_end();
    return ok;
}

typedef struct gg_ctx {
    h_fn f;
    void *ctx;
    const bool *wrt;
    const double *w;         /* weights of the first-order loss */
    const double *const *vv; /* weights of the gradients */
} gg_ctx;

/* S(x) = sum_i sum(dL/dx_i * v_i) with L = sum(f(x) * w), recorded (create_graph). */
static em_tensor *second_order_s(em_tensor *const *x, int n, const gg_ctx *c, bool create)
{
    em_tensor *leaves[8];
    for (int i = 0; i < n; i++) {
        leaves[i] = x[i];
        if ((!c->wrt || c->wrt[i]) && !em_tensor_requires_grad(x[i])) {
            leaves[i] = em_detach(x[i]);
            em_requires_grad(leaves[i], true);
        }
    }
    em_tensor *y = c->f(leaves, n, c->ctx);
    if (!y) return NULL;
    em_tensor *wt = em_from_data(c->w, EM_F64, em_tensor_shape(y), em_tensor_dtype(y), h_dev);
    em_tensor *l = em_sum(em_mul(y, wt), EM_ALL, false);
    em_grads *g = l ? em_backward_opt(l, (em_backward_opts){.create_graph = create}) : NULL;
    if (!g) return NULL;
    em_tensor *s = em_scalar(0, EM_F64, h_dev);
    for (int i = 0; i < n; i++) {
        if (c->wrt && !c->wrt[i]) continue;
        em_tensor *gi = em_grad(g, leaves[i]);
        if (!gi) continue;
        em_tensor *vt = em_from_data(c->vv[i], EM_F64, em_tensor_shape(gi), EM_F64, h_dev);
        s = em_add(s, em_sum(em_mul(gi, vt), EM_ALL, false));
    }
    return s;
}

bool h_gradgradcheck(const char *what, h_fn f, void *ctx, em_tensor *const *inputs, int n,
                     const bool *wrt, double atol, double rtol)
{
    if (atol <= 0) atol = 1e-5;
    if (rtol <= 0) rtol = 1e-3;
    em_scope_begin();
    em_tensor *y0 = f((em_tensor **)inputs, n, ctx);
    if (!y0) {
        CHECK(false, "%s: f failed: %s", what, em_last_error());
        em_clear_error();
        em_scope_end();
        return false;
    }
    int64_t ny = em_tensor_numel(y0);
    double *w = malloc((size_t)(ny ? ny : 1) * sizeof *w);
    for (int64_t k = 0; k < ny; k++) w[k] = 2 * h_uniform() - 1;
    double *vv[8] = {0};
    for (int i = 0; i < n; i++) {
        int64_t m = em_tensor_numel(inputs[i]);
        vv[i] = malloc((size_t)(m ? m : 1) * sizeof(double));
        for (int64_t j = 0; j < m; j++) vv[i][j] = 2 * h_uniform() - 1;
    }
    gg_ctx c = {f, ctx, wrt, w, (const double *const *)vv};
    /* analytic: gradient of S through the recorded backward pass */
    em_tensor *leaves[8];
    for (int i = 0; i < n; i++) {
        leaves[i] = em_detach(inputs[i]);
        if (!wrt || wrt[i]) em_requires_grad(leaves[i], true);
    }
    em_tensor *s = second_order_s(leaves, n, &c, true);
    em_grads *g = s ? em_backward(s) : NULL;
    bool ok = g != NULL;
    if (!ok) {
        CHECK(false, "%s: second-order backward failed: %s", what, em_last_error());
        em_clear_error();
    }
    for (int i = 0; ok && i < n; i++) {
        if (wrt && !wrt[i]) continue;
        int64_t m = em_tensor_numel(inputs[i]);
        double *an = calloc((size_t)(m ? m : 1), sizeof *an);
        em_tensor *gi = em_grad(g, leaves[i]);
        if (gi) {
            double *v = h_values(gi);
            memcpy(an, v, (size_t)m * sizeof(double));
            free(v);
        }
        double *v = h_values(inputs[i]);
        double *num = malloc((size_t)(m ? m : 1) * sizeof *num);
        for (int64_t j = 0; j < m; j++) {
            double keep = v[j];
            double sp = NAN, sm = NAN;
            for (int side = 0; side < 2; side++) {
                em_scope_begin();
                v[j] = keep + (side ? -GC_EPS : GC_EPS);
                em_tensor *in[8];
                for (int k = 0; k < n; k++) in[k] = inputs[k];
                in[i] = em_from_data(v, EM_F64, em_tensor_shape(inputs[i]), EM_F64, h_dev);
                em_tensor *sv = second_order_s(in, n, &c, false);
                double val = sv ? em_item_f64(sv) : NAN;
                em_scope_end();
                if (side)
                    sm = val;
                else
                    sp = val;
            }
            v[j] = keep;
            num[j] = (sp - sm) / (2 * GC_EPS);
        }
        ok &= compare_grads(what, "second-order", i, an, num, m, atol, rtol);
        free(num);
        free(v);
        free(an);
    }
    for (int i = 0; i < n; i++) free(vv[i]);
    free(w);
    em_clear_error();
    em_scope_end();
    return ok;
}

char *h_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    size_t got = s ? fread(s, 1, (size_t)n, f) : 0;
    if (s) s[got] = '\0';
    fclose(f);
    return s;
}

bool h_same_bytes(const em_tensor *a, const em_tensor *b)
{
    if (!a || !b || em_tensor_dtype(a) != em_tensor_dtype(b) ||
        !em_shape_equal(em_tensor_shape(a), em_tensor_shape(b)))
        return false;
    int64_t n = em_tensor_numel(a);
    size_t nb = (size_t)n * em_dtype_size(em_tensor_dtype(a));
    unsigned char *x = malloc(nb + 1), *y = malloc(nb + 1);
    if (n) {
        em_to_data(a, x, em_tensor_dtype(a), n);
        em_to_data(b, y, em_tensor_dtype(b), n);
    }
    bool ok = memcmp(x, y, nb) == 0;
    free(x);
    free(y);
    return ok;
}

static bool close_or_same(double got, double want, double atol, double rtol)
{
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    return fabs(got - want) <= atol + rtol * fabs(want);
}

void h_compare_dev(const char *what, em_tensor *got, em_tensor *want, double atol, double rtol,
                   em_device dev)
{
    CHECK(got && want, "%s: missing result (%s)", what, em_last_error());
    if (!got || !want) return;
    CHECK(em_tensor_device(got).backend == dev.backend, "%s: result not on the device", what);
    CHECK(em_tensor_dtype(got) == em_tensor_dtype(want), "%s: dtype %s, want %s", what,
          em_dtype_name(em_tensor_dtype(got)), em_dtype_name(em_tensor_dtype(want)));
    int64_t n = em_tensor_numel(want);
    CHECK(em_tensor_numel(got) == n, "%s: %lld elements, want %lld", what,
          (long long)em_tensor_numel(got), (long long)n);
    if (em_tensor_numel(got) != n) return;
    int64_t bad = -1;
    if (!em_dtype_is_float(em_tensor_dtype(want))) { /* integers and bool: exactly */
        int64_t *g = malloc((size_t)n * 8 + 8), *w = malloc((size_t)n * 8 + 8);
        em_to_data(got, g, EM_I64, n);
        em_to_data(want, w, EM_I64, n);
        CHECK_OK("em_to_data");
        for (int64_t i = 0; i < n && bad < 0; i++)
            if (g[i] != w[i]) bad = i;
        CHECK(bad < 0, "%s: element %lld of %lld is %lld, want %lld", what, (long long)bad,
              (long long)n, bad < 0 ? 0LL : (long long)g[bad], bad < 0 ? 0LL : (long long)w[bad]);
        free(g);
        free(w);
        return;
    }
    double *g = malloc((size_t)n * 8 + 8), *w = malloc((size_t)n * 8 + 8);
    em_to_data(got, g, EM_F64, n);
    em_to_data(want, w, EM_F64, n);
    CHECK_OK("em_to_data");
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!close_or_same(g[i], w[i], atol, rtol) && bad < 0) bad = i;
        if (isfinite(w[i]) && fabs(g[i] - w[i]) > worst) worst = fabs(g[i] - w[i]);
    }
    CHECK(bad < 0, "%s: element %lld of %lld is %.17g, want %.17g (largest difference %.3g)", what,
          (long long)bad, (long long)n, bad < 0 ? 0.0 : g[bad], bad < 0 ? 0.0 : w[bad], worst);
    free(g);
    free(w);
}

static int64_t persistent_now(em_device dev)
{
    em_device_mem_stats m;
    return em_device_get_mem_stats(dev, &m) == EM_OK ? m.persistent_bytes : -1;
}

void h_check_persistent_module(em_device dev, int64_t granule, bool moves)
{
    int64_t w = (240 + granule - 1) / granule * granule, b = (24 + granule - 1) / granule * granule;
    int64_t p0 = persistent_now(dev);
    em_module *m = em_linear_new(10, 3, EM_CPU);
    CHECK(em_module_to(m, dev) == EM_OK && em_module_cast(m, EM_F64) == EM_OK,
          "linear to the device as f64 (%s)", em_last_error());
    int64_t p1 = persistent_now(dev);
    CHECK(p1 - p0 == w + b, "parameters: %lld persistent bytes, want %lld", (long long)(p1 - p0),
          (long long)(w + b));
    em_optim *o = em_adam_new(m, (em_adam_cfg){.lr = 0.1});
    em_scope_begin();
    em_tensor *x = em_to_device(h_rand(EM_SHAPE(4, 10), EM_F64, H_CONTIG, -1, 1, NULL), dev);
    em_grads *g = em_backward(em_sum(em_forward(m, x), EM_ALL, false));
    CHECK(em_optim_step(o, g) == EM_OK, "adam step (%s)", em_last_error());
    em_scope_end();
    int64_t p2 = persistent_now(dev);
    CHECK(p2 - p1 == 2 * (w + b), "adam's state: %lld persistent bytes, want %lld",
          (long long)(p2 - p1), (long long)(2 * (w + b)));
    /* a set entry keeps the storage it was given; a newly registered one moves where it can */
    CHECK(em_module_set(m, "bias", em_full(EM_SHAPE(3), 0.5, EM_F64, dev)) == EM_OK,
          "set the bias (%s)", em_last_error());
    int64_t p3 = persistent_now(dev);
    CHECK(p3 == p2 - b, "a set bias stays ordinary: %lld, want %lld", (long long)p3,
          (long long)(p2 - b));
    em_module_buffer(m, "extra", em_full(EM_SHAPE(3), 0.25, EM_F64, dev));
    int64_t p4 = persistent_now(dev);
    CHECK(p4 == (moves ? p3 + b : p3), "a registered buffer %s: %lld persistent bytes, want %lld",
          moves ? "moves" : "stays", (long long)p4, (long long)(moves ? p3 + b : p3));
    double v[3] = {0}, e[3] = {0};
    CHECK(em_to_data(em_module_get(m, "bias"), v, EM_F64, 3) == EM_OK && v[0] == 0.5 &&
              v[2] == 0.5 && em_to_data(em_module_get(m, "extra"), e, EM_F64, 3) == EM_OK &&
              e[0] == 0.25 && e[2] == 0.25,
          "the set bias and the registered buffer hold their values");
    em_optim_free(o);
    em_module_free(m);
    CHECK(persistent_now(dev) == p0, "all persistent bytes back");
}
