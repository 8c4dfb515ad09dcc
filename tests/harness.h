/* The test harness: checks that count and continue, f64 reference comparison, random tensors
 * in several memory layouts, golden fixtures written by scripts/gen_fixtures.py, and the
 * end-of-test leak and guard-byte checks. */
#ifndef EMBER_TEST_HARNESS_H
#define EMBER_TEST_HARNESS_H

#include <ember/ember.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

extern int h_passed, h_failed;
/* The device tests create their tensors on: EMBER_TEST_DEVICE ("cuda:0" ...), else the CPU. */
extern em_device h_dev;
/* Registers the test-only "sim" backend (tests/sim_backend.c): host memory, copies only. */
void h_register_sim_backend(void);
/* With EMBER_SIM_ASK=cuda: prints which kinds the CUDA backend would not run (see sim_backend.c).
 */
void h_sim_report(void);
/* em_from_i64 / em_from_f64 / em_from_f32 on h_dev. */
static inline em_tensor *h_from_i64(const int64_t *data, em_shape shape)
{
    return em_from_data(data, EM_I64, shape, EM_I64, h_dev);
}
static inline em_tensor *h_from_f64(const double *data, em_shape shape)
{
    return em_from_data(data, EM_F64, shape, EM_F64, h_dev);
}
static inline em_tensor *h_from_f32(const float *data, em_shape shape)
{
    return em_from_data(data, EM_F32, shape, EM_F32, h_dev);
}

/* got (a result on dev) against want (the CPU's) elementwise: integers and bool exactly, floats
 * within atol + rtol |want| (NaN matches NaN, infinities match exactly); also checks the device,
 * dtype and size, and reports the first mismatch and the largest difference under `what`. */
void h_compare_dev(const char *what, em_tensor *got, em_tensor *want, double atol, double rtol,
                   em_device dev);

/* Turns on allocator guards, seeds the generator, notes the memory baseline. Call first. */
void h_init(void);
/* Checks guards, live tensors and bytes against the baseline, prints "N passed, N failed",
 * and returns the process exit code. */
int h_finish(void);

void h_check_(bool ok, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define CHECK(cond, ...) h_check_((cond), __FILE__, __LINE__, __VA_ARGS__)
/* Checks that no error is pending (prints it otherwise) and clears it. */
#define CHECK_OK(what) h_check_ok_((what), __FILE__, __LINE__)
void h_check_ok_(const char *what, const char *file, int line);
/* Checks that an error with `code` is pending and its message contains `needle`; clears it. */
#define CHECK_ERR(code, needle) h_check_err_((code), (needle), __FILE__, __LINE__)
void h_check_err_(em_status code, const char *needle, const char *file, int line);

/* |a - b| <= atol + rtol * |b|, with NaN == NaN and equal infinities. */
bool h_close(double a, double b, double atol, double rtol);
/* Compares got (any dtype/layout) to expected values in row-major order; checks the shape.
 * Reports the first mismatches under `what`. Returns true on success. */
bool h_check_tensor(const char *what, const em_tensor *got, const double *expect, em_shape shape,
                    double atol, double rtol);
/* Default tolerances for a dtype (exact for integers and bool). */
double h_atol(em_dtype dt);
double h_rtol(em_dtype dt);

typedef enum h_layout {
    H_CONTIG = 0,     /* plain row-major */
    H_TRANSPOSED = 1, /* last two dims stored transposed (rank >= 2, else contiguous) */
    H_STRIDED = 2,    /* every other element of a larger tensor along each dim */
    H_FLIPPED = 3,    /* negative strides on dim 0 */
    H_LAYOUT_COUNT = 4,
} h_layout;

/* Tensor with values uniform in [lo, hi) (rounded for integer dtypes) in the given layout.
 * The values as doubles, row-major, go to *values (malloc'd; free with free) when not NULL;
 * values are exactly representable in dt. */
em_tensor *h_rand(em_shape s, em_dtype dt, h_layout layout, double lo, double hi, double **values);
/* Same, from given values. */
em_tensor *h_from_values(const double *v, em_shape s, em_dtype dt, h_layout layout);
/* True when a and b have the same dtype, shape and element bytes (row-major); NULL is false. */
bool h_same_bytes(const em_tensor *a, const em_tensor *b);
/* Row-major values of t as doubles (malloc'd). */
double *h_values(const em_tensor *t);
/* Value of a double after a round trip through dt (what storing it in dt keeps). */
double h_round_to(double v, em_dtype dt);
/* Deterministic uniform double in [0,1) from the harness's own generator. */
double h_uniform(void);

/* Row-major index helpers for reference code. */
int64_t h_offset(em_shape s, const int64_t *idx);
/* Advances idx through s in row-major order; false at the end. */
bool h_next_index(em_shape s, int64_t *idx);

/* Gradient checks. f maps n inputs to a new tensor. The inputs are f64 tensors in any layout;
 * those with wrt[i] are differentiated (wrt NULL: all). h_gradcheck compares em_backward's
 * gradients of L = sum(f(x) * w), w fixed random, with central differences (eps 1e-6).
 * h_gradgradcheck does the same for S = sum_i sum(dL/dx_i * v_i), whose gradient needs the
 * backward pass recorded (create_graph). Defaults for atol/rtol: 1e-5 and 1e-3. */
typedef em_tensor *(*h_fn)(em_tensor *const *in, int n, void *ctx);
bool h_gradcheck(const char *what, h_fn f, void *ctx, em_tensor *const *inputs, int n,
                 const bool *wrt, double atol, double rtol);
bool h_gradgradcheck(const char *what, h_fn f, void *ctx, em_tensor *const *inputs, int n,
                     const bool *wrt, double atol, double rtol);

/* A module's parameters and its optimizer's state on dev are persistent storage: a linear layer
 * (10 -> 3) moved to dev and cast to f64 (new storage: +240 and +24 bytes, each rounded up to
 * `granule`), one Adam step (two state tensors per parameter), a bias set from a fresh tensor
 * (stays ordinary storage), a buffer registered from a fresh tensor (`moves`: moved into a
 * persistent block), all back at the end. */
void h_check_persistent_module(em_device dev, int64_t granule, bool moves);

/* Whole file as a NUL-terminated string (malloc'd), or NULL. */
char *h_read_file(const char *path);

/* Golden fixtures: files of named tensors (f64 or i64) written by scripts/gen_fixtures.py. */
typedef struct h_fixture h_fixture;
h_fixture *h_fixture_load(const char *name); /* name relative to tests/fixtures */
void h_fixture_free(h_fixture *f);
/* The named tensor as a new em_tensor (f64 or i64); NULL and a failed check when missing. */
em_tensor *h_fixture_tensor(h_fixture *f, const char *name);
/* Raw access: values as doubles (owned by the fixture) and shape. */
const double *h_fixture_values(h_fixture *f, const char *name, em_shape *shape);
/* A scalar stored in the fixture (rank-0 or one-element tensor). */
double h_fixture_scalar(h_fixture *f, const char *name);

#endif
