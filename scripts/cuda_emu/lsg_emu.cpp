// Cross entropy's kernels (kernels/reduce_lsg.cu: lsg_rows, behind em_lsg_warp_f32 and
// em_lsg_rows_f32, and em_rd_lsg, any dtype and layout) run on the CPU: one std::thread per CUDA thread of a 256-thread block, blocks
// one after the other, shuffles and __syncthreads through barriers. Checks the online max / sum,
// the warp and block combines, the float4 and scalar paths and the grid-stride row loop against
// f64 references (log_softmax at t; g (onehot(t) - softmax)), with a row whose index is out of
// range and rows holding -inf; em_rd_lsg on lines along an inner, outer or last dim in f64, f32
// and f16; the long-row softmax (em_softmax_long_f32), which shares the row statistics. Built and
// run by scripts/cuda-emu-lsg.sh.
#include "emu_block.h"
template <typename T> static void __stcs(T *p, T v)
{
    *p = v;
}
#include "../../src/backend/cuda/kernels/reduce_lsg.cu"

// the f64 reference: max m and sum of exp(x - m) over a contiguous f32 row
static void ref_max_sum(const float *xr, i64 len, double &m, double &s)
{
    m = -INFINITY, s = 0;
    for (i64 j = 0; j < len; j++) m = std::fmax(m, (double)xr[j]);
    for (i64 j = 0; j < len; j++) s += std::exp((double)xr[j] - m);
}

// rows x len logits (row 1 partly -inf when there are two rows or more; one index out of range)
template <int T> static void run_case(int bw, i64 rows, int len, unsigned blocks, int off)
{
    std::vector<float> buf((size_t)(rows * len + 8)), g(rows), o((size_t)(bw ? rows * len + 8 : rows));
    float *x = buf.data() + off; // off = 1: a base that is not 16-byte aligned
    std::vector<i64> t(rows);
    srand(7 + len);
    for (i64 i = 0; i < rows * len; i++) x[i] = (float)(rand() % 20000) / 2500.f - 4.f;
    if (rows > 1)
        for (int j = 0; j < len; j += 3) x[len + j] = -INFINITY;
    for (i64 r = 0; r < rows; r++) {
        t[r] = (r * 7 + 1) % len;
        if (rows > 1 && r == 1 && t[r] % 3 == 0) t[r]++;
        g[r] = (float)(rand() % 2000) / 1000.f - 1.f;
    }
    if (rows > 2) t[2] = len; // out of range
    float *op = o.data() + (bw ? off : 0);
    launch(blocks, [&] { lsg_rows<T>(bw, x, t.data(), g.data(), op, rows, len); });
    char what[96];
    for (i64 r = 0; r < rows; r++) {
        const float *xr = x + r * len;
        double m, s;
        ref_max_sum(xr, len, m, s);
        bool in = t[r] >= 0 && t[r] < len;
        snprintf(what, sizeof what, "T %d %s rows %lld len %d off %d row %lld", T,
                 bw ? "backward" : "forward", rows, len, off, r);
        if (!bw) {
            check(what, in ? xr[t[r]] - m - std::log(s) : NAN, op[r]);
            continue;
        }
        for (int j = 0; j < len; j++)
            check(what, in ? g[r] * ((j == t[r] ? 1.0 : 0.0) - std::exp(xr[j] - m) / s) : 0.0,
                  op[r * len + j]);
    }
}

// em_rd_lsg on x of shape {a, len, c} (contiguous) along the middle dim (a line per (i, k)), in
// dtype dt (RD_F64, RD_F32 or RD_F16): the rdline as cuda_reduce.c's plan_line makes it
static void run_general(int bw, int dt, i64 a, i64 len, i64 c, unsigned blocks)
{
    size_t es = dt == RD_F64 ? 8 : dt == RD_F32 ? 4 : 2;
    i64 n = a * len * c, lines = a * c;
    std::vector<unsigned char> xb(n * es), gb(lines * es), ob((bw ? n : lines) * es);
    std::vector<double> xv(n), gv(lines);
    std::vector<i64> t(lines);
    srand(11 + (int)len);
    for (i64 i = 0; i < n; i++) {
        rd_stf(xb.data(), dt, i, (double)(rand() % 20000) / 2500.0 - 4.0);
        xv[i] = rd_ldf(xb.data(), dt, i); // the stored value
    }
    for (i64 r = 0; r < lines; r++) {
        t[r] = (r * 5 + 2) % len;
        rd_stf(gb.data(), dt, r, (double)(rand() % 2000) / 1000.0 - 1.0);
        gv[r] = rd_ldf(gb.data(), dt, r);
    }
    if (lines > 1) t[1] = -1; // out of range
    rdline s;
    memset(&s, 0, sizeof s);
    s.n = 2, s.lines = lines, s.len = len, s.sx = c, s.s0 = bw ? c : 0;
    s.shape[0] = a, s.shape[1] = c, s.xs[0] = len * c, s.xs[1] = 1;
    s.os0[0] = bw ? len * c : 0, s.os0[1] = bw ? 1 : 0; // the forward's output: by line
    launch(blocks, [&] { em_rd_lsg(bw, dt, xb.data(), t.data(), gb.data(), ob.data(), s); });
    double tol = dt == RD_F64 ? 1e-10 : dt == RD_F32 ? 1e-5 : 2e-3;
    char what[96];
    for (i64 i = 0; i < a; i++)
        for (i64 k = 0; k < c; k++) {
            i64 r = i * c + k, o = i * len * c + k;
            double m = -INFINITY, sum = 0;
            for (i64 j = 0; j < len; j++) m = std::fmax(m, xv[o + j * c]);
            for (i64 j = 0; j < len; j++) sum += std::exp(xv[o + j * c] - m);
            bool in = t[r] >= 0 && t[r] < len;
            snprintf(what, sizeof what, "em_rd_lsg dt %d %s [%lld, %lld, %lld] line %lld", dt,
                     bw ? "backward" : "forward", a, len, c, r);
            if (!bw) {
                check(what, in ? xv[o + t[r] * c] - m - std::log(sum) : NAN,
                      rd_ldf(ob.data(), dt, r), tol);
                continue;
            }
            for (i64 j = 0; j < len; j++)
                check(what,
                      in ? gv[r] * ((j == t[r] ? 1.0 : 0.0) - std::exp(xv[o + j * c] - m) / sum)
                         : 0.0,
                      rd_ldf(ob.data(), dt, o + j * c), tol);
        }
}

// em_softmax_long_f32 on rows x len (row 0 partly -inf), softmax or log-softmax; off = 1: a base
// 4 bytes off alignment (the scalar path)
static void run_long(int logsm, i64 rows, i64 len, unsigned blocks, int off)
{
    std::vector<float> xb((size_t)(rows * len + 8)), yb((size_t)(rows * len + 8));
    float *x = xb.data() + off, *y = yb.data() + off;
    srand(3 + (int)len);
    for (i64 i = 0; i < rows * len; i++) x[i] = (float)(rand() % 20000) / 1000.f - 10.f;
    for (i64 j = 0; j < len; j += 5) x[j] = -INFINITY;
    launch(blocks, [&] { em_softmax_long_f32(logsm, x, y, rows, len); });
    char what[96];
    for (i64 r = 0; r < rows; r++) {
        const float *xr = x + r * len;
        double m, sum;
        ref_max_sum(xr, len, m, sum);
        snprintf(what, sizeof what, "softmax_long%s rows %lld len %lld off %d row %lld",
                 logsm ? " (log)" : "", rows, len, off, r);
        for (i64 j = 0; j < len; j++) {
            double d = (double)xr[j] - m;
            if (logsm)
                check(what, d - std::log(sum), y[r * len + j]);
            else
                check(what, std::exp(d) / sum, y[r * len + j], 1e-12, 2e-5);
        }
    }
}

int main()
{
    for (int lg = 0; lg < 2; lg++)
        for (int off = 0; off < 2; off++) {
            run_long(lg, 3, 9001, 2, off);  // scalar (len % 4), rows past the grid
            run_long(lg, 2, 12000, 1, off); // float4 when aligned
        }
    for (int bw = 0; bw < 2; bw++)
        for (int dt = 0; dt < 3; dt++) {
            run_general(bw, dt, 3, 5, 4, 2);     // an inner dim: lines of stride 4
            run_general(bw, dt, 1, 700, 3, 1);   // lines longer than the block
            run_general(bw, dt, 6, 33, 1, 4);    // the last dim
        }
    for (int bw = 0; bw < 2; bw++)
        for (int off = 0; off < 2; off++) {
            run_case<32>(bw, 5, 10, 1, off);    // scalar (len % 4), fewer rows than warps
            run_case<32>(bw, 19, 100, 2, off);  // float4 when aligned, rows past the grid
            run_case<32>(bw, 3, 1000, 1, off);
            run_case<256>(bw, 4, 1501, 3, off); // scalar, fewer blocks than rows
            run_case<256>(bw, 3, 3000, 2, off);
            run_case<256>(bw, 2, 9000, 1, off);
        }
    printf("%lld checks, %d failed\n", checks, fails);
    return fails != 0;
}
