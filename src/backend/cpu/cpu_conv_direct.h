/* AVX2 (and one AVX-512) helpers of the direct stride-1 f32 convolution (cpu_conv.c) and of the
 * implicit im2col of its weight gradient (cpu_conv_wgrad.c), in cpu_conv_avx2.c. */
#ifndef EMBER_CPU_CONV_DIRECT_H
#define EMBER_CPU_CONV_DIRECT_H

#include <stdbool.h>
#include <stdint.h>

/* C[mr, nr] (row stride ldc) = Ap . B over K steps, or C += Ap . B when accumulate: Ap holds
 * 6 values per k (a packed row panel, zero padded), row k of B is the 16 floats at b + off[k]
 * (all 16 readable even when nr < 16). mr <= 6, nr <= 16 cut the tile; one fused multiply-add
 * per k, k ascending, then one add into C. */
void cpu_conv_direct_6x16_avx2(int64_t K, const float *Ap, const float *b, const int64_t *off,
                               float *C, int64_t ldc, int mr, int nr, bool accumulate);
/* The same on AVX-512 (cpu_conv_avx512.c): the same bytes, one zmm row of B per k. */
void cpu_conv_direct_6x16_avx512(int64_t K, const float *Ap, const float *b, const int64_t *off,
                                 float *C, int64_t ldc, int mr, int nr, bool accumulate);

/* One output row of a stride-1 convolution with at most 16 reduction terms (K = C * kh * kw:
 * a single-channel first layer), straight into y: y[co * ys + ow] = bias[co] + sum over k < K
 * of w[co, k] * xrow[off[k] + ow] for co < Co, ow < OW. xrow is the padded image at the row's
 * start (every xrow[off[k] + ow] readable), wp the weights in panels of 8 channels, wp[(co / 8)
 * * K * 8 + k * 8 + co % 8] (zeros past Co), bias NULL for none. Terms added in k order, then
 * the bias, as the 6 x 16 kernel's tiles. */
void cpu_conv_direct_small_avx2(const float *xrow, const int64_t *off, int K, const float *wp,
                                const float *bias, int64_t Co, int64_t OW, float *y, int64_t ys);

/* o[i] = bias + t[i] for i < n: a tile row copied out with the bias (masked at the end). */
void cpu_conv_direct_out_avx2(const float *t, float *o, int64_t n, float bias);

/* d[o] = s[2 o] for o < n (reads nothing past s[2 n - 2]): a stride-2 row of the im2col. */
void cpu_conv_gather2_avx2(const float *s, float *d, int64_t n);

/* The implicit im2col's packing (cpu_conv_wgrad.c) along one run of positions, plain copies
 * (the same bytes as a scalar loop): dst[r * w + c] = b[off[c] + r * step] for c < n and r <
 * run, 0 for n <= c < w.
 * pack: step 1 or 2 (channel-major images, or gy's rows), 8 x 8 transposes; reads nothing past
 *   b[off[c] + (run - 1) step].
 * copy: any step (channels-last images), n and w multiples of 8 and off[g + i] = off[g] + i for
 *   each group of 8 columns g, i < 8: two vector moves per 16 columns. */
void cpu_conv_wgrad_pack_avx2(const float *b, int64_t step, const int64_t *off, int n, int w,
                              int64_t run, float *dst);
void cpu_conv_wgrad_copy_avx2(const float *b, int64_t step, const int64_t *off, int n, int w,
                              int64_t run, float *dst);
/* One row of channels-last images from channel-major ones: d[w * C + c] = s[c * cs + w] for w <
 * W, c < C, C a multiple of 8 (8 x 8 transposes; never reads past s[c * cs + W - 1]). */
void cpu_conv_wgrad_nhwc_row_avx2(const float *s, int64_t cs, int64_t C, int64_t W, float *d);

/* The weight gradient of a stride-1 conv2d with at most 12 columns (C * kh * kw <= 12: a
 * single-channel first layer, a 1 x 1 conv of few channels) as dot products, for output channels
 * co0 <= co < co1: gw[co * J + j] = sum over n < N, oh < OH, ow < OW of gy[n * sn + co * sc +
 * oh * OW + ow] * xp[n * item + off[j] + oh * Wp + ow], xp the zero-padded channel-major images.
 * Each (co, j) keeps 8 lane sums over the positions in order (a row's last partial vector
 * masked), added in a fixed tree: the same bytes whatever splits the channels. */
void cpu_conv_wgrad_dots_avx2(const float *gy, int64_t sn, int64_t sc, const float *xp,
                              int64_t item, int64_t Wp, const int64_t *off, int J, int64_t N,
                              int64_t OH, int64_t OW, int64_t co0, int64_t co1, float *gw);

/* Winograd F(2x2, 3x3) transforms for 8 tiles side by side along a row of tiles (cpu_conv.c).
 * in: d is the padded image at the first tile's window (row stride Wq; 4 rows of 18 floats
 * read, so 16 floats of slack past a plane's end); v[xi * xs + k] = (B^T d_k B)[xi] for tile k.
 * out: m[xi * xs + k] the products of tile k; y at the first tile's output (row stride ys):
 * bias + (A^T m_k A), both rows when row2 else the first, ncols (<= 16) columns per row. */
void cpu_wino_in_avx2(const float *d, int64_t Wq, float *v, int64_t xs);
void cpu_wino_out_avx2(const float *m, int64_t xs, float bias, float *y, int64_t ys, bool row2,
                       int ncols);

/* Test hook: false keeps stride-1 3x3 convolutions off the Winograd path (cpu_conv.c); true
 * (the default) returns them to it. */
void cpu_conv_winograd_enable(bool on);

/* Test hook: false keeps stride-1 convolutions on the packed im2col path (cpu_conv.c), so
 * tests can run both on one machine; true (the default) returns to the direct path. */
void cpu_conv_direct_enable(bool on);

#endif
