// Unary, binary and comparison kernels over contiguous f32 and f64 arrays; the op kind is a
// run-time argument (uniform across a launch, so the switch costs little).
#include "ew_scalar.cuh"

extern "C" __global__ void em_unary_f32(int op, const float *x, float *y, i64 n, double a, double b)
{
    float af = (float)a, bf = (float)b;
    GRID_LOOP(n) y[i] = unary_f(op, x[i], af, bf);
}
extern "C" __global__ void em_unary_f64(int op, const double *x, double *y, i64 n, double a,
                                        double b)
{
    GRID_LOOP(n) y[i] = unary_d(op, x[i], a, b);
}
extern "C" __global__ void em_binary_f32(int op, const float *x, const float *y, float *o, i64 n)
{
    GRID_LOOP(n) o[i] = (float)binary_d(op, (double)x[i], (double)y[i]);
}
extern "C" __global__ void em_binary_f64(int op, const double *x, const double *y, double *o, i64 n)
{
    GRID_LOOP(n) o[i] = binary_d(op, x[i], y[i]);
}
extern "C" __global__ void em_compare_f32(int op, const float *x, const float *y, unsigned char *o,
                                          i64 n)
{
    GRID_LOOP(n) o[i] = binary_d(op, (double)x[i], (double)y[i]) != 0;
}
extern "C" __global__ void em_compare_f64(int op, const double *x, const double *y,
                                          unsigned char *o, i64 n)
{
    GRID_LOOP(n) o[i] = binary_d(op, x[i], y[i]) != 0;
}
