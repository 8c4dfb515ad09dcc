/* The CUDA kernels: the base CUDA C source embedded here and the units of kernels/ files, each
 * compiled by NVRTC (loaded with dlopen) for the device's own architecture on first use (in
 * parallel), and cached on disk keyed by a hash of the unit's source, the NVRTC version and the
 * architecture. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuda.h"
#include "cuda_ops.h"

/* ---- kernel source ----------------------------------------------------------------------
 * Elementwise kernels take the op kind as a run-time argument (uniform across a launch, so the
 * switch costs little); the OP_* numbers are prepended from em_op_kind when the source is
 * built. f32 binary ops compute in f64 and round once, as the CPU backend does. */
static const char kernel_body[] =
    "typedef long long i64;\n"
    "typedef unsigned long long u64;\n"
    "#define GRID_LOOP(n) for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \\\n"
    "                          i += (i64)blockDim.x * gridDim.x)\n"
    "__device__ float clampf_(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : "
    "v); }\n"
    "__device__ double clampd_(double v, double lo, double hi) { return v < lo ? lo : (v > hi ? hi "
    ": v); }\n"
    "/* f16 and bf16 bits to and from f32, exactly as src/core/dtype.c converts (round to\n"
    " * nearest even, NaN kept quiet with its payload's top bits) */\n"
    "__device__ __forceinline__ float em_h2f(unsigned short h) {\n"
    "  unsigned sign = ((unsigned)h & 0x8000u) << 16, e = ((unsigned)h >> 10) & 0x1fu, m = h & "
    "0x3ffu;\n"
    "  if (e == 0x1f) return __uint_as_float(sign | 0x7f800000u | (m ? 0x400000u | (m << 13) : "
    "0u));\n"
    "  if (e == 0) { if (m == 0) return __uint_as_float(sign);\n"
    "    e = 113; while (!(m & 0x400u)) { m <<= 1; e--; }\n"
    "    return __uint_as_float(sign | (e << 23) | ((m & 0x3ffu) << 13)); }\n"
    "  return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13)); }\n"
    "__device__ __forceinline__ unsigned short em_f2h(float f) {\n"
    "  unsigned x = __float_as_uint(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;\n"
    "  if (ax > 0x7f800000u) return (unsigned short)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));\n"
    "  if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);\n"
    "  if (ax >= 0x38800000u) { unsigned odd = (ax >> 13) & 1u; ax += 0xc8000fffu + odd;\n"
    "    return (unsigned short)(sign | (ax >> 13)); }\n"
    "  if (ax <= 0x33000000u) return (unsigned short)sign;\n"
    "  unsigned e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, shift = 126u - e;\n"
    "  unsigned k = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);\n"
    "  if (rem > half || (rem == half && (k & 1u))) k++;\n"
    "  return (unsigned short)(sign | k); }\n"
    "__device__ __forceinline__ float em_b2f(unsigned short b) { return "
    "__uint_as_float((unsigned)b << 16); }\n"
    "__device__ __forceinline__ unsigned short em_f2b(float f) {\n"
    "  unsigned x = __float_as_uint(f);\n"
    "  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x0040u);\n"
    "  x += 0x7fffu + ((x >> 16) & 1u); return (unsigned short)(x >> 16); }\n"
    "__device__ float sigmoidf_(float v) { float e = expf(-fabsf(v)); float r = 1.0f / (1.0f + "
    "e);\n"
    "  return v >= 0 ? r : e * r; }\n"
    "__device__ double sigmoidd_(double v) { double e = exp(-fabs(v)); double r = 1.0 / (1.0 + "
    "e);\n"
    "  return v >= 0 ? r : e * r; }\n"
    "__device__ float softplusf_(float v) { return fmaxf(v, 0.0f) + log1pf(expf(-fabsf(v))); }\n"
    "__device__ double softplusd_(double v) { return fmax(v, 0.0) + log1p(exp(-fabs(v))); }\n"
    "#define SELU_ALPHA 1.6732632423543772848170429916717\n"
    "#define SELU_SCALE 1.0507009873554804934193349852946\n"
    "#define SQRT1_2 0.70710678118654752440084436210485\n"
    "#define SQRT_2_PI 0.79788456080286535587989211986876\n"
    "#define UNARY_BODY(T, F, ABS, EXP, EXPM1, LOG1P, TANH, ERF, CLAMP, SIGM, SOFTP) \\\n"
    "  switch (op) { \\\n"
    "  case OP_NEG: return -v; case OP_ABS: return ABS(v); \\\n"
    "  case OP_SIGN: return v > 0 ? (T)1 : (v < 0 ? (T)-1 : (v == v ? (T)0 : v)); \\\n"
    "  case OP_EXP: return EXP(v); case OP_EXP2: return F(exp2)(v); case OP_LOG: return F(log)(v); "
    "\\\n"
    "  case OP_LOG2: return F(log2)(v); case OP_LOG1P: return LOG1P(v); case OP_EXPM1: return "
    "EXPM1(v); \\\n"
    "  case OP_SQRT: return F(sqrt)(v); case OP_RSQRT: return (T)1 / F(sqrt)(v); \\\n"
    "  case OP_SQUARE: return v * v; case OP_RECIPROCAL: return (T)1 / v; \\\n"
    "  case OP_SIN: return F(sin)(v); case OP_COS: return F(cos)(v); case OP_TAN: return "
    "F(tan)(v); \\\n"
    "  case OP_ASIN: return F(asin)(v); case OP_ACOS: return F(acos)(v); case OP_ATAN: return "
    "F(atan)(v); \\\n"
    "  case OP_SINH: return F(sinh)(v); case OP_COSH: return F(cosh)(v); case OP_TANH: return "
    "TANH(v); \\\n"
    "  case OP_ASINH: return F(asinh)(v); case OP_ACOSH: return F(acosh)(v); \\\n"
    "  case OP_ATANH: return F(atanh)(v); case OP_ERF: return ERF(v); \\\n"
    "  case OP_FLOOR: return F(floor)(v); case OP_CEIL: return F(ceil)(v); \\\n"
    "  case OP_ROUND: return F(rint)(v); case OP_TRUNC: return F(trunc)(v); \\\n"
    "  case OP_RELU: return v < 0 ? (T)0 : v; case OP_RELU6: return CLAMP(v, (T)0, (T)6); \\\n"
    "  case OP_LEAKY_RELU: return v > 0 ? v : v * a; \\\n"
    "  case OP_ELU: return v > 0 ? v : a * EXPM1(v); \\\n"
    "  case OP_SELU: return v > 0 ? (T)SELU_SCALE * v : (T)SELU_SCALE * (T)SELU_ALPHA * EXPM1(v); "
    "\\\n"
    "  case OP_CELU: return v > 0 ? v : a * EXPM1(v * b); \\\n"
    "  case OP_GELU: return (T)0.5 * v * ((T)1 + ERF(v * (T)SQRT1_2)); \\\n"
    "  case OP_GELU_TANH: return (T)0.5 * v * ((T)1 + TANH((T)SQRT_2_PI * (v + (T)0.044715 * v * v "
    "* v))); \\\n"
    "  case OP_SILU: return v / ((T)1 + EXP(-v)); case OP_SIGMOID: return SIGM(v); \\\n"
    "  case OP_LOG_SIGMOID: return F(fmin)(v, (T)0) - LOG1P(EXP(-ABS(v))); \\\n"
    "  case OP_HARD_SIGMOID: return CLAMP(v + (T)3, (T)0, (T)6) / (T)6; \\\n"
    "  case OP_HARD_SWISH: return v * CLAMP(v + (T)3, (T)0, (T)6) / (T)6; \\\n"
    "  case OP_MISH: return v * TANH(SOFTP(v)); \\\n"
    "  case OP_SOFTPLUS: return v * a > b ? v : SOFTP(v * a) / a; \\\n"
    "  case OP_SOFTSIGN: return v / ((T)1 + ABS(v)); case OP_HARDTANH: return CLAMP(v, a, b); \\\n"
    "  default: return v; }\n"
    "#define FNF(name) name##f\n"
    "#define FND(name) name\n"
    "__device__ float unary_f(int op, float v, float a, float b) {\n"
    "  UNARY_BODY(float, FNF, fabsf, expf, expm1f, log1pf, tanhf, erff, clampf_, sigmoidf_, "
    "softplusf_) }\n"
    "__device__ double unary_d(int op, double v, double a, double b) {\n"
    "  UNARY_BODY(double, FND, fabs, exp, expm1, log1p, tanh, erf, clampd_, sigmoidd_, softplusd_) "
    "}\n"
    "extern \"C\" __global__ void em_unary_f32(int op, const float *x, float *y, i64 n, double a, "
    "double b) {\n"
    "  float af = (float)a, bf = (float)b; GRID_LOOP(n) y[i] = unary_f(op, x[i], af, bf); }\n"
    "extern \"C\" __global__ void em_unary_f64(int op, const double *x, double *y, i64 n, double "
    "a, double b) {\n"
    "  GRID_LOOP(n) y[i] = unary_d(op, x[i], a, b); }\n"
    "__device__ double floor_div_(double a, double b) {\n"
    "  if (b == 0) return a / b;\n"
    "  double mod = fmod(a, b); double div = (a - mod) / b;\n"
    "  if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;\n"
    "  if (div == 0) return copysign(0.0, a / b);\n"
    "  double fl = floor(div); if (div - fl > 0.5) fl += 1; return fl; }\n"
    "__device__ double binary_d(int op, double a, double b) {\n"
    "  switch (op) {\n"
    "  case OP_ADD: return a + b; case OP_SUB: return a - b; case OP_MUL: return a * b;\n"
    "  case OP_DIV: return a / b; case OP_FLOOR_DIVIDE: return floor_div_(a, b);\n"
    "  case OP_REMAINDER: { double m = fmod(a, b); if (m != 0 && (b < 0) != (m < 0)) m += b; "
    "return m; }\n"
    "  case OP_FMOD: return fmod(a, b); case OP_POW: return pow(a, b);\n"
    "  case OP_ATAN2: return atan2(a, b); case OP_HYPOT: return hypot(a, b);\n"
    "  case OP_MINIMUM: return (a != a || b != b) ? __longlong_as_double(0x7ff8000000000000ll) : "
    "(b < a ? b : a);\n"
    "  case OP_MAXIMUM: return (a != a || b != b) ? __longlong_as_double(0x7ff8000000000000ll) : "
    "(a < b ? b : a);\n"
    "  default: return 0; } }\n"
    "__device__ unsigned char compare_(int op, double a, double b) {\n"
    "  switch (op) {\n"
    "  case OP_EQ: return a == b; case OP_NE: return a != b; case OP_LT: return a < b;\n"
    "  case OP_LE: return a <= b; case OP_GT: return a > b; case OP_GE: return a >= b;\n"
    "  default: return 0; } }\n"
    "extern \"C\" __global__ void em_binary_f32(int op, const float *x, const float *y, float *o, "
    "i64 n) {\n"
    "  GRID_LOOP(n) o[i] = (float)binary_d(op, (double)x[i], (double)y[i]); }\n"
    "extern \"C\" __global__ void em_binary_f64(int op, const double *x, const double *y, double "
    "*o, i64 n) {\n"
    "  GRID_LOOP(n) o[i] = binary_d(op, x[i], y[i]); }\n"
    "extern \"C\" __global__ void em_compare_f32(int op, const float *x, const float *y, unsigned "
    "char *o, i64 n) {\n"
    "  GRID_LOOP(n) o[i] = compare_(op, (double)x[i], (double)y[i]); }\n"
    "extern \"C\" __global__ void em_compare_f64(int op, const double *x, const double *y, "
    "unsigned char *o, i64 n) {\n"
    "  GRID_LOOP(n) o[i] = compare_(op, x[i], y[i]); }\n"
    "#define FILL(NAME, T) extern \"C\" __global__ void NAME(T *o, i64 n, u64 pattern) { \\\n"
    "  T v = (T)pattern; GRID_LOOP(n) o[i] = v; }\n"
    "FILL(em_fill_1, unsigned char) FILL(em_fill_2, unsigned short) FILL(em_fill_4, unsigned int)\n"
    "FILL(em_fill_8, u64)\n"
    "/* out (contiguous) = in seen through shape/strides (elements) from base */\n"
    "struct strided { i64 shape[16]; i64 strides[16]; int rank; };\n"
    "#define STRIDED(NAME, T) extern \"C\" __global__ void NAME(const T *x, T *y, i64 n, strided "
    "s) { \\\n"
    "  GRID_LOOP(n) { i64 r = i, off = 0; \\\n"
    "    for (int d = s.rank - 1; d >= 0; d--) { i64 q = r / s.shape[d]; off += (r - q * "
    "s.shape[d]) * s.strides[d]; r = q; } \\\n"
    "    y[i] = x[off]; } }\n"
    "STRIDED(em_strided_1, unsigned char) STRIDED(em_strided_2, unsigned short)\n"
    "STRIDED(em_strided_4, unsigned int) STRIDED(em_strided_8, u64)\n";

/* ---- the f64 matmul -------------------------------------------------------------------------- */
static const char kernel_body2[] =
    "/* batched f64 matmul (f32, f16, bf16: kernels/matmul.cu, kernels/wgmma.cu): 16 x 16 output\n"
    " * tiles, K in steps of 16 through shared memory, a fixed summation order; batch dims\n"
    " * broadcast (stride 0) */\n"
    "struct mmep { const void *bias; void *pre; i64 bs; int on, act; };\n"
    "struct mmidx { i64 bshape[8], ast[8], bst[8]; int R; i64 M, K, N, sam, sak, sbk, sbn, nbatch; "
    "mmep ep; };\n"
    "#define TS 16\n"
    "#define MATMUL(NAME, T) extern \"C\" __global__ void NAME(const T *a, const T *b, T *c, mmidx "
    "s) { \\\n"
    "  __shared__ double As[TS][TS + 1], Bs[TS][TS + 1]; int tx = threadIdx.x, ty = threadIdx.y; "
    "\\\n"
    "  i64 row = (i64)blockIdx.y * TS + ty, col = (i64)blockIdx.x * TS + tx; \\\n"
    "  for (i64 bt = blockIdx.z; bt < s.nbatch; bt += gridDim.z) { i64 ao = 0, bo = 0, r = bt; \\\n"
    "    for (int d = s.R - 1; d >= 0; d--) { i64 q = r / s.bshape[d], cc = r - q * s.bshape[d]; "
    "\\\n"
    "      ao += cc * s.ast[d]; bo += cc * s.bst[d]; r = q; } \\\n"
    "    double acc = 0; \\\n"
    "    for (i64 k0 = 0; k0 < s.K; k0 += TS) { \\\n"
    "      As[ty][tx] = (row < s.M && k0 + tx < s.K) ? (double)a[ao + row * s.sam + (k0 + tx) * "
    "s.sak] : 0.0; \\\n"
    "      Bs[ty][tx] = (k0 + ty < s.K && col < s.N) ? (double)b[bo + (k0 + ty) * s.sbk + col * "
    "s.sbn] : 0.0; \\\n"
    "      __syncthreads(); \\\n"
    "      for (int k = 0; k < TS; k++) acc += As[ty][k] * Bs[k][tx]; \\\n"
    "      __syncthreads(); } \\\n"
    "    if (row < s.M && col < s.N) c[(bt * s.M + row) * s.N + col] = (T)acc; } }\n"
    "MATMUL(em_matmul_f64, double)\n";

/* ---- NVRTC ------------------------------------------------------------------------------ */

typedef struct _nvrtcProgram *nvrtcProgram;
typedef int nvrtcResult;

static struct {
    nvrtcResult (*Version)(int *, int *);
    nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int,
                                 const char *const *, const char *const *);
    nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetProgramLog)(nvrtcProgram, char *);
    nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetCUBIN)(nvrtcProgram, char *);
    nvrtcResult (*DestroyProgram)(nvrtcProgram *);
    const char *(*GetErrorString)(nvrtcResult);
} nvrtc;
static bool nvrtc_loaded;
static char nvrtc_tried[512];

#define NVLOAD(field, sym)                                                                         \
    do {                                                                                           \
        void *p_ = dlsym(lib, sym);                                                                \
        if (!p_) ok = false;                                                                       \
        memcpy(&nvrtc.field, &p_, sizeof p_);                                                      \
    } while (0)

/* Loads NVRTC: the config key cuda_nvrtc (a path) when it is set, and nothing else then (a
 * library the user named and that does not load is an error, not a reason to take another);
 * else the usual sonames and CUDA's install folder. */
static bool load_nvrtc(void)
{
    if (nvrtc_loaded) return true;
    const char *chosen = core_cfg_str(CFG_CUDA_NVRTC);
    const char *names[] = {chosen,
                           "libnvrtc.so",
                           "libnvrtc.so.13",
                           "libnvrtc.so.12",
                           "libnvrtc.so.11.2",
                           "/usr/local/cuda/lib64/libnvrtc.so",
                           "/usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so"};
    void *lib = NULL;
    nvrtc_tried[0] = '\0';
    size_t tries = chosen && *chosen ? 1 : sizeof names / sizeof names[0];
    for (size_t i = 0; i < tries && !lib; i++) {
        if (!names[i] || !*names[i]) continue;
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        size_t len = strlen(nvrtc_tried);
        snprintf(nvrtc_tried + len, sizeof nvrtc_tried - len, "%s%s", len ? ", " : "", names[i]);
    }
    if (!lib) return false;
    bool ok = true;
    NVLOAD(Version, "nvrtcVersion");
    NVLOAD(CreateProgram, "nvrtcCreateProgram");
    NVLOAD(CompileProgram, "nvrtcCompileProgram");
    NVLOAD(GetProgramLogSize, "nvrtcGetProgramLogSize");
    NVLOAD(GetProgramLog, "nvrtcGetProgramLog");
    NVLOAD(GetCUBINSize, "nvrtcGetCUBINSize");
    NVLOAD(GetCUBIN, "nvrtcGetCUBIN");
    NVLOAD(DestroyProgram, "nvrtcDestroyProgram");
    NVLOAD(GetErrorString, "nvrtcGetErrorString");
    nvrtc_loaded = ok;
    if (!ok) snprintf(nvrtc_tried, sizeof nvrtc_tried, "an NVRTC lacking nvrtcGetCUBIN");
    return ok;
}

/* ---- the modules: one per unit, built once per device ---------------------------------- */

#define CUDA_MAX_UNITS 32
#define CUDA_MAX_FILES 64

typedef struct kunit {
    char stem[48];
    int files[CUDA_MAX_FILES];
    int nfiles;
} kunit;

static kunit units[CUDA_MAX_UNITS];
static int n_units = -1;
static CUmodule modules[CUDA_MAX_DEVICES][CUDA_MAX_UNITS];
static bool built[CUDA_MAX_DEVICES];
static cuda_module_origin origins[CUDA_MAX_DEVICES];
static char cache_paths[CUDA_MAX_DEVICES][1024];
static pthread_mutex_t module_lock = PTHREAD_MUTEX_INITIALIZER;

/* Groups the embedded files by stem (the name before the first '_'), in the embedded order. */
static void find_units(void)
{
    if (n_units >= 0) return;
    n_units = 0;
    for (int i = 0; cuda_embedded_sources[i] && i < CUDA_MAX_FILES; i++) {
        const char *name = cuda_embedded_names[i];
        size_t len = strcspn(name, "_");
        if (len >= sizeof units[0].stem) len = sizeof units[0].stem - 1;
        int u = 0;
        while (u < n_units && (strlen(units[u].stem) != len || strncmp(units[u].stem, name, len)))
            u++;
        if (u == n_units) {
            if (n_units == CUDA_MAX_UNITS) break;
            memcpy(units[u].stem, name, len);
            units[u].stem[len] = '\0';
            units[u].nfiles = 0;
            n_units++;
        }
        units[u].files[units[u].nfiles++] = i;
    }
}

/* A unit's source: OP_* defines from the op IR, the base source, then the unit's files. Caller
 * frees. */
static char *unit_source(const kunit *u)
{
    size_t cap = sizeof kernel_body + sizeof kernel_body2 + 8192, len = 0;
    for (int f = 0; f < u->nfiles; f++) cap += strlen(cuda_embedded_sources[u->files[f]]) + 1;
    char *s = malloc(cap);
    if (!s) return NULL;
#define DEF_OP(K) len += (size_t)snprintf(s + len, cap - len, "#define OP_%s %d\n", #K, EM_OP_##K);
    CUDA_UNARY_OPS(DEF_OP)
    CUDA_BINARY_OPS(DEF_OP)
    CUDA_COMPARE_OPS(DEF_OP)
    CUDA_LOGICAL_OPS(DEF_OP)
    CUDA_REDUCE_OPS(DEF_OP)
#undef DEF_OP
    memcpy(s + len, kernel_body, sizeof kernel_body - 1);
    len += sizeof kernel_body - 1;
    memcpy(s + len, kernel_body2, sizeof kernel_body2);
    len += sizeof kernel_body2 - 1;
    for (int f = 0; f < u->nfiles; f++) {
        const char *src = cuda_embedded_sources[u->files[f]];
        size_t n = strlen(src);
        memcpy(s + len, src, n);
        len += n;
        s[len++] = '\n';
    }
    s[len] = '\0';
    return s;
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static void mkdirs(const char *path)
{
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(tmp, 0755);
            *p = '/';
        }
    mkdir(tmp, 0755);
}

static void *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    void *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long sz = ftell(f);
        if (sz > 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)sz))) {
            if (fread(buf, 1, (size_t)sz, f) != (size_t)sz) {
                free(buf);
                buf = NULL;
            } else
                *n = (size_t)sz;
        }
    }
    fclose(f);
    return buf;
}

/* Writes through a temporary name and renames, so concurrent processes never read half a file. */
static bool write_file(const char *path, const void *data, size_t n)
{
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, n, f) == n;
    ok = fclose(f) == 0 && ok;
    if (ok && rename(tmp, path) == 0) return true;
    remove(tmp);
    return false;
}

static em_status compile(int device, const char *unit, const char *src, const char *arch,
                         char **cubin, size_t *n, const char *what)
{
    nvrtcProgram prog = NULL;
    nvrtcResult r = nvrtc.CreateProgram(&prog, src, unit, 0, NULL, NULL);
    if (r != 0)
        return em_error(EM_ERR_DEVICE, "%s: nvrtcCreateProgram failed: %s", what,
                        nvrtc.GetErrorString(r));
    char archopt[64];
    snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", arch);
    /* config cuda_ptxas_info (EMBER_CUDA_PTXAS_INFO=1): ptxas reports each kernel's registers,
     * stack frame and spills, printed to stderr (a kernel developer's check) */
    const bool verbose = core_cfg_bool(CFG_CUDA_PTXAS_INFO);
    const char *opts[] = {archopt, "--std=c++17", "-default-device", "--ptxas-options=-v"};
    r = nvrtc.CompileProgram(prog, verbose ? 4 : 3, opts);
    if (r == 0 && verbose) {
        size_t ln = 0;
        nvrtc.GetProgramLogSize(prog, &ln);
        char *log = malloc(ln + 1);
        if (log && nvrtc.GetProgramLog(prog, log) == 0) {
            log[ln] = '\0';
            fprintf(stderr, "%s (%s):\n%s\n", unit, arch, log);
        }
        free(log);
    }
    if (r != 0) {
        size_t ln = 0;
        nvrtc.GetProgramLogSize(prog, &ln);
        char *log = malloc(ln + 1);
        if (log) {
            log[0] = '\0';
            nvrtc.GetProgramLog(prog, log);
            if (ln > 2000) log[2000] = '\0';
        }
        em_error(EM_ERR_DEVICE,
                 "%s: NVRTC could not compile the kernels of %s for %s on cuda:%d: %s\n%s", what,
                 unit, arch, device, nvrtc.GetErrorString(r), log ? log : "");
        free(log);
        nvrtc.DestroyProgram(&prog);
        return EM_ERR_DEVICE;
    }
    size_t sz = 0;
    r = nvrtc.GetCUBINSize(prog, &sz);
    char *buf = r == 0 && sz ? malloc(sz) : NULL;
    if (buf) r = nvrtc.GetCUBIN(prog, buf);
    nvrtc.DestroyProgram(&prog);
    if (!buf || r != 0) {
        free(buf);
        return em_error(EM_ERR_DEVICE, "%s: nvrtcGetCUBIN failed for %s", what, arch);
    }
    *cubin = buf;
    *n = sz;
    return EM_OK;
}

/* One unit's build: its cubin from the cache file, else compiled (on a worker thread). */
typedef struct unit_job {
    const kunit *u;
    int device;
    const char *arch;
    char name[64]; /* "<stem>.cu" for NVRTC's messages */
    char path[1100];
    char *src, *cubin;
    size_t n;
    bool compiled;
    em_status st;
    char err[2600];
} unit_job;

static void *compile_job(void *p)
{
    unit_job *j = p;
    j->st = compile(j->device, j->name, j->src, j->arch, &j->cubin, &j->n, "cuda");
    if (j->st != EM_OK) snprintf(j->err, sizeof j->err, "%s", em_last_error());
    em_clear_error();
    j->compiled = true;
    return NULL;
}

/* Compiles the jobs without a cubin, in parallel (one thread each; inline when a thread cannot
 * start). The first failure's status, with its message recorded. */
static em_status compile_jobs(unit_job *jobs, int n)
{
    pthread_t th[CUDA_MAX_UNITS];
    bool started[CUDA_MAX_UNITS] = {false};
    for (int i = 0; i < n; i++)
        if (!jobs[i].cubin) started[i] = pthread_create(&th[i], NULL, compile_job, &jobs[i]) == 0;
    for (int i = 0; i < n; i++) {
        if (started[i])
            pthread_join(th[i], NULL);
        else if (!jobs[i].cubin)
            compile_job(&jobs[i]);
    }
    for (int i = 0; i < n; i++)
        if (jobs[i].st != EM_OK) return em_error(jobs[i].st, "%s", jobs[i].err);
    return EM_OK;
}

static void free_jobs(unit_job *jobs, int n)
{
    for (int i = 0; i < n; i++) {
        free(jobs[i].src);
        free(jobs[i].cubin);
    }
    free(jobs);
}

/* Sources and cache paths of every unit for arch; NULL when out of memory. */
static unit_job *make_jobs(int device, const char *arch, const char *cache_dir)
{
    find_units();
    unit_job *jobs = calloc((size_t)(n_units ? n_units : 1), sizeof *jobs);
    if (!jobs) return NULL;
    int maj = 0, min = 0;
    nvrtc.Version(&maj, &min);
    int ver[2] = {maj, min};
    for (int i = 0; i < n_units; i++) {
        unit_job *j = &jobs[i];
        j->u = &units[i];
        j->device = device;
        j->arch = arch;
        j->st = EM_OK;
        snprintf(j->name, sizeof j->name, "%.47s.cu", units[i].stem);
        j->src = unit_source(&units[i]);
        if (!j->src) {
            free_jobs(jobs, n_units);
            return NULL;
        }
        uint64_t h = fnv1a(0xcbf29ce484222325ull, j->src, strlen(j->src));
        h = fnv1a(h, ver, sizeof ver);
        if (cache_dir && *cache_dir)
            snprintf(j->path, sizeof j->path, "%.900s/cuda-%.47s-%016llx-%s.cubin", cache_dir,
                     units[i].stem, (unsigned long long)h, arch);
    }
    return jobs;
}

/* The kernel cache's directory: the config key cache_dir, else ~/.cache/ember (in buf); NULL
 * when neither is known. */
static const char *cache_dir(char *buf, size_t cap)
{
    const char *dir = core_cfg_str(CFG_CACHE_DIR);
    if (dir && *dir) return dir;
    const char *home = getenv("HOME");
    if (!home || !*home) return NULL;
    snprintf(buf, cap, "%s/.cache/ember", home);
    return buf;
}

static em_status build_modules(int device, const char *what)
{
    const cuda_device_info *d = cuda_device(device);
    if (!load_nvrtc())
        return em_error(EM_ERR_DEVICE,
                        "%s: cannot load NVRTC to compile the CUDA kernels (tried %s; set the "
                        "config key cuda_nvrtc to the path of libnvrtc.so)",
                        what, nvrtc_tried);
    char arch[32];
    /* Hopper gets its architecture-specific target (sm_90a), which has the wgmma instructions */
    snprintf(arch, sizeof arch, "sm_%d%d%s", d->cc_major, d->cc_minor,
             d->cc_major == 9 && d->cc_minor == 0 ? "a" : "");

    char dbuf[900];
    const char *dir = cache_dir(dbuf, sizeof dbuf);
    if (dir) mkdirs(dir);
    char *path = cache_paths[device];
    path[0] = '\0';
    if (dir) snprintf(path, 1024, "%s/cuda-<unit>-<hash>-%s.cubin", dir, arch);

    unit_job *jobs = make_jobs(device, arch, dir);
    if (!jobs) return em_error(EM_ERR_OOM, "%s: out of memory building the kernel source", what);
    for (int i = 0; i < n_units; i++) {
        unit_job *j = &jobs[i];
        j->cubin = j->path[0] ? read_file(j->path, &j->n) : NULL;
        CUresult r = j->cubin ? cuda_drv.cuModuleLoadData(&modules[device][i], j->cubin) : 1;
        if (j->cubin && r != 0) { /* a stale or damaged file: rebuild it */
            em_log_msg("cuda", EM_LOG_WARN, "ignoring unloadable kernel cache file %s", j->path);
            free(j->cubin);
            j->cubin = NULL;
        }
    }
    em_status st = compile_jobs(jobs, n_units);
    bool any = false;
    for (int i = 0; i < n_units && st == EM_OK; i++) {
        unit_job *j = &jobs[i];
        if (!j->compiled) continue;
        any = true;
        CUresult r = cuda_drv.cuModuleLoadData(&modules[device][i], j->cubin);
        if (r != 0) {
            char call[96];
            snprintf(call, sizeof call, "cuModuleLoadData(%s)", j->name);
            st = cuda_fail(EM_ERR_DEVICE, r, what, call, device);
        } else if (j->path[0])
            write_file(j->path, j->cubin, j->n);
    }
    free_jobs(jobs, n_units);
    if (st != EM_OK) return st;
    built[device] = true;
    origins[device] = any ? CUDA_MODULE_COMPILED : CUDA_MODULE_CACHED;
    em_log_msg("cuda", EM_LOG_INFO, "kernels for cuda:%d (%s, %d units) %s %s", device, arch,
               n_units, any ? "compiled; cached in" : "loaded from", path[0] ? path : "(no cache)");
    return EM_OK;
}

/* Compiles every unit for arch; with dir, writes the cubins there under the names build_modules
 * looks for, skipping units whose file is already there (*compiled: units compiled). */
static em_status compile_units(const char *arch, const char *dir, int *compiled, const char *what)
{
    if (compiled) *compiled = 0;
    pthread_mutex_lock(&module_lock);
    bool have = load_nvrtc();
    unit_job *jobs = have ? make_jobs(-1, arch, dir) : NULL;
    int n = n_units;
    pthread_mutex_unlock(&module_lock);
    if (!have)
        return em_error(EM_ERR_UNSUPPORTED, "%s: cannot load NVRTC (tried %s)", what, nvrtc_tried);
    if (!jobs) return em_error(EM_ERR_OOM, "%s: out of memory", what);
    for (int i = 0; i < n; i++) /* a present file is kept (its name carries the source hash) */
        if (jobs[i].path[0]) jobs[i].cubin = read_file(jobs[i].path, &jobs[i].n);
    em_status st = compile_jobs(jobs, n);
    for (int i = 0; i < n && st == EM_OK && dir; i++)
        if (jobs[i].compiled && !write_file(jobs[i].path, jobs[i].cubin, jobs[i].n))
            st = em_error(EM_ERR_IO, "%s: cannot write %s", what, jobs[i].path);
    for (int i = 0; i < n && compiled; i++) *compiled += jobs[i].compiled;
    free_jobs(jobs, n);
    return st;
}

em_status cuda_compile_check(const char *arch)
{
    return compile_units(arch, NULL, NULL, "cuda_compile_check");
}

em_status em_cuda_build_cache(const char *arch, const char *dir, int *compiled)
{
    if (compiled) *compiled = 0;
    bool ok = arch && strncmp(arch, "sm_", 3) == 0 && arch[3] >= '1' && arch[3] <= '9';
    for (const char *p = ok ? arch + 4 : ""; *p && ok; p++)
        ok = (*p >= '0' && *p <= '9') || (p[1] == '\0' && (*p == 'a' || *p == 'f'));
    if (!ok)
        return em_error(EM_ERR_INVALID_ARG,
                        "em_cuda_build_cache: architecture '%s' is not of the "
                        "form sm_<digits>[a|f] (e.g. sm_90a for Hopper's wgmma kernels)",
                        arch ? arch : "(null)");
    char dbuf[900];
    if (!dir || !*dir) dir = cache_dir(dbuf, sizeof dbuf);
    if (!dir)
        return em_error(EM_ERR_INVALID_ARG, "em_cuda_build_cache: no directory given, no config "
                                            "key cache_dir and no HOME");
    mkdirs(dir);
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return em_error(EM_ERR_IO, "em_cuda_build_cache: cannot create the directory %s", dir);
    return compile_units(arch, dir, compiled, "em_cuda_build_cache");
}

/* Functions found so far, per device: open addressing on the name's hash. */
#define FN_SLOTS 2048
typedef struct fn_slot {
    uint64_t hash;
    char *name;
    CUfunction f;
    uint64_t uses; /* cuda_kernel calls that returned f */
} fn_slot;
static fn_slot fn_table[CUDA_MAX_DEVICES][FN_SLOTS];

/* The slot of device's table holding name (hash h), else the free slot where it would go, else
 * NULL (the table full). The caller holds module_lock. */
static fn_slot *fn_find(int device, const char *name, uint64_t h)
{
    fn_slot *tab = fn_table[device];
    size_t k = (size_t)h % FN_SLOTS;
    for (size_t probe = 0; probe < FN_SLOTS; probe++, k = (k + 1) % FN_SLOTS)
        if (!tab[k].name || (tab[k].hash == h && !strcmp(tab[k].name, name))) return &tab[k];
    return NULL;
}

CUfunction cuda_kernel(int device, const char *name, const char *what)
{
    if (cuda_enter(device, what) != EM_OK) return NULL;
    uint64_t h = fnv1a(0xcbf29ce484222325ull, name, strlen(name));
    pthread_mutex_lock(&module_lock);
    fn_slot *slot = fn_find(device, name, h);
    if (slot && slot->name) {
        CUfunction f = slot->f;
        slot->uses += f != NULL;
        pthread_mutex_unlock(&module_lock);
        return f;
    }
    em_status st = built[device] ? EM_OK : build_modules(device, what);
    CUfunction f = NULL;
    CUresult r = 1;
    for (int i = 0; st == EM_OK && i < n_units && !f; i++)
        r = cuda_drv.cuModuleGetFunction(&f, modules[device][i], name);
    if (f && slot) { /* remember it (the table only fills up with thousands of names) */
        slot->name = strdup(name);
        slot->hash = h;
        slot->f = slot->name ? f : NULL;
        slot->uses = slot->f != NULL;
    }
    pthread_mutex_unlock(&module_lock);
    if (st != EM_OK) return NULL;
    if (!f) {
        char call[128];
        snprintf(call, sizeof call, "cuModuleGetFunction(\"%s\")", name);
        cuda_fail(EM_ERR_INTERNAL, r, what, call, device);
    }
    return f;
}

uint64_t cuda_kernel_uses(int device, const char *name)
{
    if (device < 0 || device >= CUDA_MAX_DEVICES) return 0;
    pthread_mutex_lock(&module_lock);
    const fn_slot *slot = fn_find(device, name, fnv1a(0xcbf29ce484222325ull, name, strlen(name)));
    uint64_t n = slot && slot->name ? slot->uses : 0;
    pthread_mutex_unlock(&module_lock);
    return n;
}

em_status cuda_launch(int device, CUfunction f, int64_t n, void **params, const char *what)
{
    if (n <= 0) return EM_OK;
    const unsigned threads = 256;
    int64_t blocks = (n + threads - 1) / threads;
    if (blocks > 65536) blocks = 65536; /* the grid-stride loop covers the rest */
    CUresult r = cuda_drv.cuLaunchKernel(f, (unsigned)blocks, 1, 1, threads, 1, 1, 0,
                                         cuda_stream(device), params, NULL);
    if (r != 0) return cuda_fail(EM_ERR_DEVICE, r, what, "cuLaunchKernel", device);
    return EM_OK;
}

em_status cuda_launch_blocks(int device, CUfunction f, int64_t nblocks, void **params,
                             const char *what)
{
    if (nblocks <= 0) return EM_OK;
    if (nblocks > (1 << 20)) nblocks = 1 << 20; /* the kernels loop over the rest */
    CUresult r = cuda_drv.cuLaunchKernel(f, (unsigned)nblocks, 1, 1, 256, 1, 1, 0,
                                         cuda_stream(device), params, NULL);
    if (r != 0) return cuda_fail(EM_ERR_DEVICE, r, what, "cuLaunchKernel", device);
    return EM_OK;
}

em_status cuda_launch_grid(int device, CUfunction f, const unsigned grid[3],
                           const unsigned block[3], void **params, const char *what)
{
    if (!grid[0] || !grid[1] || !grid[2]) return EM_OK;
    CUresult r = cuda_drv.cuLaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                         0, cuda_stream(device), params, NULL);
    if (r != 0) return cuda_fail(EM_ERR_DEVICE, r, what, "cuLaunchKernel", device);
    return EM_OK;
}

em_status cuda_launch_grid_smem(int device, CUfunction f, const unsigned grid[3],
                                const unsigned block[3], unsigned smem, void **params,
                                const char *what)
{
    if (!grid[0] || !grid[1] || !grid[2]) return EM_OK;
    if (smem > 48 * 1024) {
        /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
        CUresult r = cuda_drv.cuFuncSetAttribute(f, 8, (int)smem);
        if (r != 0) return cuda_fail(EM_ERR_DEVICE, r, what, "cuFuncSetAttribute", device);
    }
    CUresult r = cuda_drv.cuLaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                         smem, cuda_stream(device), params, NULL);
    if (r != 0) return cuda_fail(EM_ERR_DEVICE, r, what, "cuLaunchKernel", device);
    return EM_OK;
}

cuda_module_origin cuda_module_origin_of(int device)
{
    if (device < 0 || device >= CUDA_MAX_DEVICES) return CUDA_MODULE_NONE;
    return origins[device];
}

const char *cuda_module_cache_path(int device)
{
    if (device < 0 || device >= CUDA_MAX_DEVICES) return "";
    return cache_paths[device];
}
