// The layer / RMS norm gradient kernels (kernels/rows_norm.cu: em_norm_bw_f32[x4]_v*, a block of 256
// per row with VPT registers per thread, scalar or float4, and em_norm_bw_cols_f32, the weight /
// bias gradients' column sums of the blocks' partial rows) run on the CPU through emu_block.h,
// against f64 references: every register count, scalar and float4 rows, rows shorter than the
// block, more rows than blocks (the grid-stride loop and the partial rows), layer and RMS norm with
// and without a weight, no partials asked, and the column sums of zero partial rows (zeros). Built
// and run by scripts/cuda-emu-norm.sh.
#include "emu_block.h"
#include "../../src/backend/cuda/kernels/rows_norm.cu"

typedef void (*norm_bw_fn)(const float *, const float *, const float *, float *, float *, float *,
                           i64, i64, double, int);

static norm_bw_fn kernel_for(i64 len, bool x4)
{
    norm_bw_fn f[6] = {em_norm_bw_f32_v1, em_norm_bw_f32_v2,  em_norm_bw_f32_v4,
                       em_norm_bw_f32_v8, em_norm_bw_f32_v16, em_norm_bw_f32_v32};
    norm_bw_fn f4[6] = {nullptr,
                        nullptr,
                        em_norm_bw_f32x4_v4,
                        em_norm_bw_f32x4_v8,
                        em_norm_bw_f32x4_v16,
                        em_norm_bw_f32x4_v32};
    int k = 0;
    while (k < 5 && 256 * ((i64)1 << k) < len) k++; // cuda_backend.c's row_vpt
    return x4 ? f4[k] : f[k];
}

// rows x len of x and g, the grid `blocks`; weight where has_w; partials where parts; the float4
// kernel where x4
static void run_case(i64 rows, i64 len, unsigned blocks, bool rms, bool has_w, bool parts,
                     bool x4 = false)
{
    std::vector<float> x(rows * len), g(rows * len), w(len), dx(rows * len, NAN);
    std::vector<float> pw(blocks * len, NAN), pb(blocks * len, NAN), dw(len, NAN), db(len, NAN);
    srand(5 + (int)len + 7 * (int)rows);
    for (i64 i = 0; i < rows * len; i++) {
        x[i] = (float)(rand() % 20000) / 4000.f - 2.f + (float)(i / len % 3); // rows off zero
        g[i] = (float)(rand() % 2000) / 1000.f - 1.f;
    }
    for (i64 j = 0; j < len; j++) w[j] = (float)(rand() % 3000) / 1000.f - 1.5f;
    double eps = 1e-5;
    const float *wp = has_w ? w.data() : nullptr;
    float *pwp = parts ? pw.data() : nullptr, *pbp = parts && !rms ? pb.data() : nullptr;
    norm_bw_fn f = kernel_for(len, x4);
    launch(blocks, [&] { f(x.data(), wp, g.data(), dx.data(), pwp, pbp, rows, len, eps, rms); });
    if (parts) {
        i64 np = rows < blocks ? rows : blocks;
        launch(
            (unsigned)((len + 31) / 32),
            [&] { em_norm_bw_cols_f32(pwp, pbp, np, len, dw.data(), pbp ? db.data() : nullptr); },
            32, 8);
    }
    std::vector<double> rw(len, 0.0), rb(len, 0.0);
    char what[128];
    for (i64 r = 0; r < rows; r++) {
        const float *xr = x.data() + r * len, *gr = g.data() + r * len;
        double mean = 0, var = 0, s1 = 0, s2 = 0;
        for (i64 j = 0; j < len && !rms; j++) mean += xr[j] / (double)len;
        for (i64 j = 0; j < len; j++) var += (xr[j] - mean) * (xr[j] - mean) / (double)len;
        double rstd = 1 / std::sqrt(var + eps);
        for (i64 j = 0; j < len; j++) {
            double xh = (xr[j] - mean) * rstd, gx = gr[j] * (has_w ? w[j] : 1.0);
            s1 += gx, s2 += gx * xh;
            rw[j] += gr[j] * xh, rb[j] += gr[j];
        }
        snprintf(what, sizeof what, "%s%s%s rows %lld len %lld blocks %u: dx of row %lld",
                 rms ? "rms" : "layer", has_w ? " weight" : "", x4 ? " x4" : "", rows, len, blocks,
                 r);
        for (i64 j = 0; j < len; j++) {
            double gx = gr[j] * (has_w ? w[j] : 1.0), xh = (xr[j] - mean) * rstd;
            double want = rstd * (gx - (rms ? 0 : s1 / (double)len) - xh * s2 / (double)len);
            check(what, want, dx[r * len + j], 2e-5, 2e-4);
        }
    }
    if (!parts) return;
    snprintf(what, sizeof what, "%s%s%s rows %lld len %lld blocks %u: dweight / dbias",
             rms ? "rms" : "layer", has_w ? " weight" : "", x4 ? " x4" : "", rows, len, blocks);
    for (i64 j = 0; j < len; j++) {
        check(what, rw[j], dw[j], 1e-4, 1e-4);
        if (!rms) check(what, rb[j], db[j], 1e-4, 1e-4);
    }
}

int main()
{
    for (int v = 0; v < 4; v++) { // rms, has weight: 00 01 10 11
        bool rms = v & 2, has_w = v & 1;
        // the column sums take a 32-column block each: only some cases ask for the partials
        run_case(7, 100, 2, rms, has_w, true);         // shorter than the block, rows past the grid
        run_case(9, 256, 4, rms, has_w, true);         // a register each
        run_case(3, 600, 3, rms, has_w, v == 1, true); // 4 registers (float4), a row per block
        run_case(3, 601, 3, rms, has_w, v == 2);       // 4, scalar
        run_case(5, 1500, 2, rms, has_w, v == 3, true); // 8 (float4), rows past the grid
        run_case(5, 1500, 2, rms, has_w, v == 0);       // 8, scalar
        run_case(2, 3000, 1, rms, has_w, false, true);  // 16 (float4)
        run_case(2, 8192, 2, rms, has_w, false, true);  // 32 (float4): the longest row
        run_case(2, 8190, 1, rms, has_w, false);        // 32, scalar
    }
    // no rows: the column sums of zero partial rows are zeros
    std::vector<float> dw(40, NAN), db(40, NAN);
    launch(
        2, [&] { em_norm_bw_cols_f32(nullptr, nullptr, 0, 40, dw.data(), db.data()); }, 32, 8);
    for (int j = 0; j < 40; j++)
        check("no rows", 0.0, dw[j], 0, 0), check("no rows", 0.0, db[j], 0, 0);
    printf("%lld checks, %d failed\n", checks, fails);
    return fails != 0;
}
