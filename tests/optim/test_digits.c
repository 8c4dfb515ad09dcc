/* End-to-end check: a 64-128-10 MLP trained with Adam on scikit-learn's digits (1797 8x8
 * images; the package python3-sklearn ships them as a gzip CSV, 64 pixels then the label per
 * line) reaches at least 95% accuracy on 360 held-out images. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include <ember/optim.h>
#ifdef EMBER_HAVE_ZLIB
#include <zlib.h>
#endif

#define DIGITS_CSV "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"
#define N_ALL      1797
#define N_TRAIN    1437
#define N_TEST     (N_ALL - N_TRAIN)
#define EPOCHS     10
#define BATCH      32

static float pixels[N_ALL][64];
static int64_t labels[N_ALL];

/* Parses the decompressed CSV; returns the number of rows read. */
static int parse_rows(char *(*next_line)(void *src, char *buf, int cap), void *src)
{
    char line[1024];
    int n = 0;
    while (n < N_ALL && next_line(src, line, sizeof line)) {
        char *p = line;
        for (int j = 0; j < 65; j++) {
            double v = strtod(p, &p);
            if (*p == ',') p++;
            if (j < 64)
                pixels[n][j] = (float)(v / 16.0);
            else
                labels[n] = (int64_t)v;
        }
        n++;
    }
    return n;
}

#ifdef EMBER_HAVE_ZLIB
static char *gz_line(void *src, char *buf, int cap)
{
    return gzgets(src, buf, cap);
}

static int load_digits(void)
{
    gzFile f = gzopen(DIGITS_CSV, "rb");
    if (!f) return 0;
    int n = parse_rows(gz_line, f);
    gzclose(f);
    return n;
}
#else
static char *pipe_line(void *src, char *buf, int cap)
{
    return fgets(buf, cap, src);
}

static int load_digits(void)
{
    FILE *f = popen("gzip -dc " DIGITS_CSV " 2>/dev/null", "r");
    if (!f) return 0;
    int n = parse_rows(pipe_line, f);
    pclose(f);
    return n;
}
#endif

/* rows perm[lo .. lo+n) as an [n, 64] f32 tensor and their labels one-hot [n, 10] */
static void batch(const int *perm, int lo, int n, em_tensor **x, em_tensor **y, int64_t *lab)
{
    float *xb = malloc((size_t)n * 64 * sizeof *xb), *yb = calloc((size_t)n * 10, sizeof *yb);
    for (int i = 0; i < n; i++) {
        memcpy(xb + i * 64, pixels[perm[lo + i]], sizeof pixels[0]);
        yb[i * 10 + labels[perm[lo + i]]] = 1;
        if (lab) lab[i] = labels[perm[lo + i]];
    }
    *x = em_from_f32(xb, EM_SHAPE(n, 64));
    *y = em_from_f32(yb, EM_SHAPE(n, 10));
    free(xb);
    free(yb);
}

static uint64_t lcg = 42;
static int rnd(int n)
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (int)((lcg >> 33) % (uint64_t)n);
}

static void shuffle(int *a, int lo, int n)
{
    for (int i = n - 1; i > 0; i--) {
        int j = rnd(i + 1), t = a[lo + i];
        a[lo + i] = a[lo + j];
        a[lo + j] = t;
    }
}

int main(void)
{
    h_init();
    int n = load_digits();
    CHECK(n == N_ALL, "read %d digits from %s (install python3-sklearn)", n, DIGITS_CSV);
    if (n != N_ALL) return h_finish();
    int perm[N_ALL];
    for (int i = 0; i < N_ALL; i++) perm[i] = i;
    shuffle(perm, 0, N_ALL); /* first N_TRAIN train, the rest test */

    em_seed(0);
    em_module *net = em_sequential(EM_CPU, em_linear_new(64, 128, EM_CPU), em_relu_new(),
                                   em_linear_new(128, 10, EM_CPU));
    em_optim *o = em_adam_new(net, (em_adam_cfg){.lr = 3e-3});
    CHECK(net && o, "model: %s", em_last_error());
    for (int epoch = 0; epoch < EPOCHS; epoch++) {
        shuffle(perm, 0, N_TRAIN);
        for (int lo = 0; lo < N_TRAIN; lo += BATCH) {
            int nb = lo + BATCH <= N_TRAIN ? BATCH : N_TRAIN - lo;
            em_scope_begin();
            em_tensor *x, *y;
            batch(perm, lo, nb, &x, &y, NULL);
            em_tensor *logp = em_log_softmax(em_forward(net, x), 1);
            em_tensor *loss = em_neg(em_div_scalar(em_sum(em_mul(logp, y), EM_ALL, false), nb));
            em_optim_step(o, em_backward(loss));
            em_scope_end();
        }
    }
    CHECK_OK("training");
    em_scope_begin();
    em_tensor *x, *y;
    int64_t lab[N_TEST];
    batch(perm, N_TRAIN, N_TEST, &x, &y, lab);
    em_no_grad_begin();
    em_tensor *pred = em_argmax(em_forward(net, x), 1, false);
    em_no_grad_end();
    int64_t got[N_TEST];
    em_to_data(pred, got, EM_I64, N_TEST);
    em_scope_end();
    int correct = 0;
    for (int i = 0; i < N_TEST; i++) correct += got[i] == lab[i];
    double acc = (double)correct / N_TEST;
    printf("digits: test accuracy %.4f (%d/%d) after %d epochs of Adam\n", acc, correct, N_TEST,
           EPOCHS);
    CHECK(acc >= 0.95, "test accuracy %.4f < 0.95", acc);
    em_optim_free(o);
    em_module_free(net);
    return h_finish();
}
