/* What ew_emu_ref.c gives the elementwise emulator (ew_emu.cpp). */
#ifndef EMBER_EW_EMU_REF_H
#define EMBER_EW_EMU_REF_H
#include <stdbool.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

typedef struct ref_row {
    const char *name;
    bool binary, act, int_div, pred; /* two inputs; em_p_act parameters; IR_INT_DIV; -> bool */
    bool floats, ints;               /* has float kernels; has integer kernels */
    bool to_bool;                    /* a binary kind whose output is bool */
    bool sampled;                    /* lo, hi from tests/ew_samples.def */
    bool grad[2];                    /* a derivative by input 0, 1 (EW_GRAD: d0, d1) */
    double lo, hi;
} ref_row;

int ref_n_kinds(void);
/* false for a kind that is not an elementwise kind with a table expression */
bool ref_kind(int k, ref_row *out);
void ref_unary_f32(int k, double a, double b, const float *x, float *y, long n);
void ref_unary_f64(int k, double a, double b, const double *x, double *y, long n);
void ref_unary_i64(int k, double a, double b, const int64_t *x, int64_t *y, long n, int bits);
void ref_unary_pred(int k, const double *x, uint8_t *y, long n);
void ref_binary_f64(int k, const double *a, const double *b, double *o, long n);
void ref_binary_i64(int k, const int64_t *a, const int64_t *b, int64_t *o, long n, int bits);
/* EW_GRAD: d[i] = the derivative of kind k by input arg at a[i] (b[i]: binary kinds) and y[i];
 * false where the CPU has no code for it */
bool ref_grad_f64(int k, int arg, double pa, double pb, const double *a, const double *b,
                  const double *y, double *d, long n);

#ifdef __cplusplus
}
#endif
#endif
