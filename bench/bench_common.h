/* Timing helpers shared by the C benchmark programs: a monotonic clock and a rep loop that
 * reports the median, min, max and quartiles in milliseconds as one tab-separated line
 * "case  median  min  max  q1  q3  reps" that bench/report.py reads. */
#ifndef EMBER_BENCH_COMMON_H
#define EMBER_BENCH_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Runs fn warmup times, then up to reps times (at least 3, stopping after budget_s seconds),
 * and prints the line. */
static inline void bench_run(const char *name, void (*fn)(void *), void *ctx, int warmup, int reps,
                             double budget_s)
{
    for (int i = 0; i < warmup; i++) fn(ctx);
    double t[256];
    int n = 0;
    double start = bench_now();
    if (reps > 256) reps = 256;
    while (n < reps) {
        double t0 = bench_now();
        fn(ctx);
        t[n++] = (bench_now() - t0) * 1e3;
        if (n >= 3 && bench_now() - start > budget_s) break;
    }
    qsort(t, (size_t)n, sizeof *t, bench_cmp);
    double med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    printf("%s\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%d\n", name, med, t[0], t[n - 1], t[n / 4],
           t[(3 * n) / 4 < n ? (3 * n) / 4 : n - 1], n);
    fflush(stdout);
}

/* Case filter: argv lists case-name prefixes; none means all. A group's guard (a name that is
 * itself a prefix of an argument, "gemv" for "gemv_n") is selected too, so its setup runs for
 * the case inside it. */
/* Whether the case name itself is asked for: no arguments, or one that is a prefix of name
 * (bench_selected also takes a longer argument, for a block of cases sharing a prefix). */
static inline int bench_wanted(int argc, char **argv, const char *name)
{
    if (argc < 2) return 1;
    for (int i = 1; i < argc; i++)
        if (!strncmp(name, argv[i], strlen(argv[i]))) return 1;
    return 0;
}

static inline int bench_selected(int argc, char **argv, const char *name)
{
    if (argc < 2) return 1;
    for (int i = 1; i < argc; i++)
        if (!strncmp(name, argv[i], strlen(argv[i])) || !strncmp(name, argv[i], strlen(name)))
            return 1;
    return 0;
}

#endif
