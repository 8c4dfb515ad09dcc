// Runs the CUDA elementwise kernels (kernels/ew.cu, kernels/ew_scalar.cu and the op table's
// generated cuda_ew_gen.cuh they include) on the CPU, one thread walking each grid-stride loop,
// and compares every elementwise kind of the op table, in f32, f64, i32 and as a predicate where
// its dtype rule has such kernels, and every derivative of the table (EW_GRAD) in f32 and f64,
// against the CPU backend's generated kernels (ew_emu_ref.c):
// a check of the generated CUDA code without a GPU (scripts/cuda-emu-ew.sh, ctest cuda.ew_emu).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <vector>

#include "ew_emu_ref.h"

// ---- what CUDA C gives a kernel, for one CPU thread --------------------------------------------
#define __device__
#define __forceinline__ inline
#define __global__
struct dim3e {
    unsigned x, y, z;
};
static const dim3e threadIdx = {0, 0, 0}, blockIdx = {0, 0, 0}, blockDim = {1, 1, 1},
                   gridDim = {1, 1, 1};
struct float4 {
    float x, y, z, w;
};
static inline float __uint_as_float(unsigned u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline unsigned __float_as_uint(float f)
{
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}
static inline double __longlong_as_double(long long v)
{
    double d;
    memcpy(&d, &v, 8);
    return d;
}
static inline double __dadd_rn(double a, double b)
{
    return a + b;
}
static inline double __dsub_rn(double a, double b)
{
    return a - b;
}
static inline double __dmul_rn(double a, double b)
{
    return a * b;
}
static inline float __fadd_rn(float a, float b)
{
    return a + b;
}
static inline float __fsub_rn(float a, float b)
{
    return a - b;
}
static inline float __fmul_rn(float a, float b)
{
    return a * b;
}

#include "ew.cu"
#include "ew_scalar.cu"

// ---- inputs and checks ------------------------------------------------------------------------

static const long N = 600;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double uniform(double lo, double hi)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (double)(rng >> 11) / 9007199254740992.0;
}

// specials first, then uniform draws from [lo, hi]
static std::vector<double> float_inputs(double lo, double hi, bool right)
{
    static const double sp[] = {0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 3.0, -3.0, 6.0, 1e-30,
                                -1e-30, 30.0, -30.0, 90.0, -90.0, 1e10, -1e10, INFINITY,
                                -INFINITY, NAN};
    std::vector<double> v;
    for (double s : sp) v.push_back(s);
    if (right) std::swap(v[0], v[4]); // another pairing of specials for the second operand
    while ((long)v.size() < N) v.push_back(uniform(lo, hi));
    return v;
}

static std::vector<long long> int_inputs(bool right)
{
    std::vector<long long> v;
    for (int i = 0; i < 64; i++) v.push_back(right ? i - 8 : 37 - i);
    const long long sp[] = {0, 1, -1, 2147483647, -2147483647 - 1, 6, 7, -7, 100, -100};
    for (long long s : sp) v.push_back(s);
    while ((long)v.size() < N) v.push_back((long long)floor(uniform(-1000, 1000)));
    return v;
}

static int failures, checks;

static bool close(double got, double want, double rtol, double atol)
{
    if (isnan(got) || isnan(want)) return isnan(got) && isnan(want);
    if (got == want) return true;
    return fabs(got - want) <= atol + rtol * fabs(want);
}

static void check(const char *name, const char *what, long i, double in_a, double in_b,
                  double got, double want, double rtol, double atol)
{
    checks++;
    if (close(got, want, rtol, atol)) return;
    if (failures++ < 30)
        fprintf(stderr, "ew_emu: %s %s [%ld] (%.17g, %.17g): CUDA %.17g, CPU %.17g\n", name,
                what, i, in_a, in_b, got, want);
}

static ew_idx flat(long n)
{
    ew_idx s;
    memset(&s, 0, sizeof s);
    s.rank = 1;
    s.shape[0] = n;
    for (int k = 0; k < 4; k++) s.st[k][0] = 1;
    return s;
}

static const double PA = 0.7, PB = 1.9; // em_p_act's v[0], v[1] for kinds that take them

static void unary(int k, const ref_row &r)
{
    const ew_idx s = flat(N);
    double a = r.act ? PA : 0, b = r.act ? PB : 0;
    if (r.floats) {
        std::vector<double> xd = float_inputs(r.lo, r.hi, false), yd(N), gd(N);
        std::vector<float> xf(N), yf(N), gf(N);
        for (long i = 0; i < N; i++) xf[i] = (float)xd[i];
        ref_unary_f32(k, a, b, xf.data(), yf.data(), N);
        ew_unary(k, 0, xf.data(), EW_F32, gf.data(), EW_F32, N, a, b, s);
        for (long i = 0; i < N; i++) check(r.name, "f32 ew_unary", i, xf[i], 0, gf[i], yf[i], 2e-6, 1e-30);
        em_unary_f32(k, xf.data(), gf.data(), N, a, b);
        for (long i = 0; i < N; i++) check(r.name, "f32 em_unary", i, xf[i], 0, gf[i], yf[i], 2e-6, 1e-30);
        ref_unary_f64(k, a, b, xd.data(), yd.data(), N);
        ew_unary(k, 1, xd.data(), EW_F64, gd.data(), EW_F64, N, a, b, s);
        for (long i = 0; i < N; i++) check(r.name, "f64 ew_unary", i, xd[i], 0, gd[i], yd[i], 1e-14, 1e-300);
        em_unary_f64(k, xd.data(), gd.data(), N, a, b);
        for (long i = 0; i < N; i++) check(r.name, "f64 em_unary", i, xd[i], 0, gd[i], yd[i], 1e-14, 1e-300);
    }
    if (r.ints) {
        std::vector<long long> x = int_inputs(false);
        std::vector<int64_t> x64(x.begin(), x.end()), y64(N);
        std::vector<int> xi(N), gi(N);
        for (long i = 0; i < N; i++) xi[i] = (int)x[i];
        for (long i = 0; i < N; i++) x64[i] = xi[i];
        ref_unary_i64(k, a, b, x64.data(), y64.data(), N, 32);
        ew_unary(k, 2, xi.data(), EW_I32, gi.data(), EW_I32, N, a, b, s);
        for (long i = 0; i < N; i++)
            check(r.name, "i32 ew_unary", i, xi[i], 0, gi[i], (int)(uint32_t)y64[i], 0, 0);
    }
    if (r.pred) {
        std::vector<double> xd = float_inputs(r.lo, r.hi, false);
        std::vector<float> xf(N);
        std::vector<uint8_t> want(N), got(N);
        for (long i = 0; i < N; i++) xd[i] = xf[i] = (float)xd[i];
        ref_unary_pred(k, xd.data(), want.data(), N);
        ew_unary(k, 3, xf.data(), EW_F32, got.data(), EW_BOOL, N, 0, 0, s);
        for (long i = 0; i < N; i++) check(r.name, "f32 predicate", i, xd[i], 0, got[i], want[i], 0, 0);
        std::vector<int> xi(N);
        for (long i = 0; i < N; i++) xd[i] = xi[i] = (int)(i % 7) - 3;
        ref_unary_pred(k, xd.data(), want.data(), N);
        ew_unary(k, 3, xi.data(), EW_I32, got.data(), EW_BOOL, N, 0, 0, s);
        for (long i = 0; i < N; i++) check(r.name, "i32 predicate", i, xd[i], 0, got[i], want[i], 0, 0);
    }
}

static void binary(int k, const ref_row &r)
{
    const ew_idx s = flat(N);
    if (r.floats) {
        std::vector<double> ad = float_inputs(r.lo, r.hi, false), bd = float_inputs(-4, 4, true);
        for (long i = 40; i < 60; i++) bd[i] = ad[i]; // equal pairs
        std::vector<double> want(N), gd(N);
        std::vector<float> af(N), bf(N), gf(N);
        std::vector<uint8_t> gb(N);
        for (long i = 0; i < N; i++) af[i] = (float)ad[i], bf[i] = (float)bd[i];
        // f32: computed in f64 from the f32 values and rounded once, as the CPU backend does
        std::vector<double> a32(af.begin(), af.end()), b32(bf.begin(), bf.end());
        ref_binary_f64(k, a32.data(), b32.data(), want.data(), N);
        if (r.to_bool) {
            em_compare_f32(k, af.data(), bf.data(), gb.data(), N);
            for (long i = 0; i < N; i++) check(r.name, "f32 em_compare", i, af[i], bf[i], gb[i], want[i] != 0, 0, 0);
            ew_binary(k, af.data(), EW_F32, bf.data(), EW_F32, gb.data(), EW_BOOL, EW_F64, 0, 8, N, s, NULL);
            for (long i = 0; i < N; i++) check(r.name, "f32 ew_binary", i, af[i], bf[i], gb[i], want[i] != 0, 0, 0);
        } else {
            em_binary_f32(k, af.data(), bf.data(), gf.data(), N);
            for (long i = 0; i < N; i++) check(r.name, "f32 em_binary", i, af[i], bf[i], gf[i], (float)want[i], 0, 0);
            ew_binary(k, af.data(), EW_F32, bf.data(), EW_F32, gf.data(), EW_F32, EW_F32, 0, 32, N, s, NULL);
            for (long i = 0; i < N; i++) check(r.name, "f32 ew_binary", i, af[i], bf[i], gf[i], (float)want[i], 0, 0);
        }
        ref_binary_f64(k, ad.data(), bd.data(), want.data(), N);
        if (r.to_bool) {
            em_compare_f64(k, ad.data(), bd.data(), gb.data(), N);
            for (long i = 0; i < N; i++) check(r.name, "f64 em_compare", i, ad[i], bd[i], gb[i], want[i] != 0, 0, 0);
        } else {
            em_binary_f64(k, ad.data(), bd.data(), gd.data(), N);
            for (long i = 0; i < N; i++) check(r.name, "f64 em_binary", i, ad[i], bd[i], gd[i], want[i], 0, 0);
        }
    }
    if (r.ints) {
        std::vector<long long> al = int_inputs(false), bl = int_inputs(true);
        std::vector<int> ai(N), bi(N), gi(N);
        std::vector<int64_t> a64(N), b64(N), want(N);
        for (long i = 0; i < N; i++) {
            ai[i] = (int)al[i], bi[i] = (int)bl[i];
            if (r.int_div && bi[i] == 0) bi[i] = 3; // the division by zero is checked below
            a64[i] = ai[i], b64[i] = bi[i];
        }
        ref_binary_i64(k, a64.data(), b64.data(), want.data(), N, 32);
        int div0 = 0;
        std::vector<uint8_t> gb(N);
        if (r.to_bool) {
            ew_binary(k, ai.data(), EW_I32, bi.data(), EW_I32, gb.data(), EW_BOOL, EW_I32, 1, 8, N, s, &div0);
            for (long i = 0; i < N; i++) check(r.name, "i32 ew_binary", i, ai[i], bi[i], gb[i], want[i] != 0, 0, 0);
        } else {
            ew_binary(k, ai.data(), EW_I32, bi.data(), EW_I32, gi.data(), EW_I32, EW_I32, 1, 32, N, s, &div0);
            for (long i = 0; i < N; i++)
                check(r.name, "i32 ew_binary", i, ai[i], bi[i], gi[i], (int)(uint32_t)want[i], 0, 0);
        }
        check(r.name, "i32 no division by zero flagged", 0, 0, 0, div0, 0, 0, 0);
        if (r.int_div) {
            bi[5] = 0;
            ew_binary(k, ai.data(), EW_I32, bi.data(), EW_I32, gi.data(), EW_I32, EW_I32, 1, 32, N, s, &div0);
            check(r.name, "i32 division by zero flagged", 5, ai[5], 0, div0, 1, 0, 0);
        }
    }
}

// EW_GRAD (ew_grad) against the CPU's cpu_gen_grad_f64 for each derivative of the kind, with y
// the forward's output: f64 operands, f32 operands (read as double, rounded once, as exec_grad
// does), and for binary kinds a broadcast b (a stride-0 f64 operand, as a wrapped scalar) beside
// f32 a and y. Returns how many derivatives were checked.
static int grad(int k, const ref_row &r)
{
    const ew_idx s = flat(N);
    double pa = r.act ? PA : 0, pb = r.act ? PB : 0;
    std::vector<double> ad = float_inputs(r.lo, r.hi, false), bd = float_inputs(-4, 4, true);
    if (r.binary)
        for (long i = 40; i < 60; i++) bd[i] = ad[i]; // equal pairs
    std::vector<float> af(N), bf(N), yf(N);
    for (long i = 0; i < N; i++) af[i] = (float)ad[i], bf[i] = (float)bd[i];
    std::vector<double> a32(af.begin(), af.end()), b32(bf.begin(), bf.end()), yd(N), y32(N);
    std::vector<double> bs(N, bd[7]), ys(N), want(N), got(N);
    std::vector<float> gf(N);
    if (r.binary) {
        ref_binary_f64(k, ad.data(), bd.data(), yd.data(), N);
        ref_binary_f64(k, a32.data(), b32.data(), y32.data(), N);
        for (long i = 0; i < N; i++) yf[i] = (float)y32[i];
        ref_binary_f64(k, a32.data(), bs.data(), ys.data(), N);
    } else {
        ref_unary_f64(k, pa, pb, ad.data(), yd.data(), N);
        ref_unary_f32(k, pa, pb, af.data(), yf.data(), N);
    }
    for (long i = 0; i < N; i++) y32[i] = yf[i];
    int done = 0;
    for (int arg = 0; arg < 2; arg++) {
        if (!r.grad[arg]) continue;
        char what[64];
        const double *b64 = r.binary ? bd.data() : NULL, *b32p = r.binary ? b32.data() : NULL;
        if (!ref_grad_f64(k, arg, pa, pb, ad.data(), b64, yd.data(), want.data(), N)) {
            check(r.name, "the CPU has no derivative", arg, 0, 0, 0, 1, 0, 0);
            continue;
        }
        snprintf(what, sizeof what, "f64 ew_grad d%d", arg);
        ew_grad(k, arg, r.binary, ad.data(), EW_F64, bd.data(), EW_F64, yd.data(), EW_F64,
                got.data(), EW_F64, pa, pb, N, s);
        for (long i = 0; i < N; i++) check(r.name, what, i, ad[i], bd[i], got[i], want[i], 1e-14, 1e-300);
        ref_grad_f64(k, arg, pa, pb, a32.data(), b32p, y32.data(), want.data(), N);
        snprintf(what, sizeof what, "f32 ew_grad d%d", arg);
        ew_grad(k, arg, r.binary, af.data(), EW_F32, bf.data(), EW_F32, yf.data(), EW_F32,
                gf.data(), EW_F32, pa, pb, N, s);
        for (long i = 0; i < N; i++) check(r.name, what, i, af[i], bf[i], gf[i], (float)want[i], 0, 0);
        if (r.binary) {
            std::vector<float> ysf(N);
            for (long i = 0; i < N; i++) ys[i] = ysf[i] = (float)ys[i];
            ref_grad_f64(k, arg, pa, pb, a32.data(), bs.data(), ys.data(), want.data(), N);
            ew_idx sb = s;
            sb.st[1][0] = 0;
            snprintf(what, sizeof what, "f32 ew_grad d%d, broadcast f64 b", arg);
            ew_grad(k, arg, 1, af.data(), EW_F32, &bd[7], EW_F64, ysf.data(), EW_F32, gf.data(),
                    EW_F32, pa, pb, N, sb);
            for (long i = 0; i < N; i++) check(r.name, what, i, af[i], bd[7], gf[i], (float)want[i], 0, 0);
        }
        done++;
    }
    return done;
}

int main()
{
    int kinds = 0, grads = 0;
    bool logit = false, grad_logit = false, grad_logaddexp = false;
    for (int k = 0; k < ref_n_kinds(); k++) {
        ref_row r;
        if (!ref_kind(k, &r)) continue;
        int before = checks;
        if (r.binary)
            binary(k, r);
        else
            unary(k, r);
        if (checks == before) {
            fprintf(stderr, "ew_emu: %s has no CUDA kernel checked\n", r.name);
            failures++;
        }
        int g = grad(k, r);
        if (g != (int)r.grad[0] + (int)r.grad[1]) {
            fprintf(stderr, "ew_emu: %s: %d of its derivatives checked\n", r.name, g);
            failures++;
        }
        grads += g;
        kinds++;
        logit = logit || strcmp(r.name, "logit") == 0;
        grad_logit = grad_logit || (g == 1 && strcmp(r.name, "logit") == 0);
        grad_logaddexp = grad_logaddexp || (g == 2 && strcmp(r.name, "logaddexp") == 0);
    }
    if (!grad_logit || !grad_logaddexp) {
        fprintf(stderr, "ew_emu: the derivatives of logit and logaddexp are not all checked\n");
        failures++;
    }
    if (!logit) {
        fprintf(stderr, "ew_emu: logit is not among the kinds checked\n");
        failures++;
    }
    printf("ew_emu: %d elementwise kinds, %d derivatives, %d values compared, %d differ\n", kinds,
           grads, checks, failures);
    return failures ? 1 : 0;
}
