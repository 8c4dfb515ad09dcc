/* Progress output: an ncurses dashboard (progress bars with ETA, character-cell plots of loss,
 * accuracy and learning rate, a metrics table; keys q and left/right) when the output is a
 * terminal, else plain lines suited to CI logs. */
#define _POSIX_C_SOURCE 200809L
#include <curses.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train_impl.h"

#define N_PLOTS 3

struct tr_dash {
    SCREEN *screen;
    double last_draw;
};

bool tr_dashboard_wanted(const em_learner *l)
{
    const char *env = getenv("EMBER_DASHBOARD");
    if (env && env[0] == '0') return false;
    if (env && env[0] == '1') return true;
    if (l->cfg.dashboard == EM_DASHBOARD_ON) return true;
    if (l->cfg.dashboard == EM_DASHBOARD_OFF) return false;
    const char *term = getenv("TERM");
    return isatty(fileno(l->out)) && term && term[0] && strcmp(term, "dumb") != 0;
}

tr_dash *tr_dash_open(em_learner *l)
{
    tr_dash *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    fflush(l->out);
    d->screen = newterm(NULL, l->out, stdin);
    if (!d->screen) {
        free(d);
        return NULL;
    }
    set_term(d->screen);
    cbreak();
    noecho();
    nodelay(stdscr, TRUE);
    keypad(stdscr, TRUE);
    curs_set(0);
    if (has_colors()) {
        start_color();
        use_default_colors();
        init_pair(1, COLOR_CYAN, -1);
        init_pair(2, COLOR_RED, -1);
        init_pair(3, COLOR_GREEN, -1);
        init_pair(4, COLOR_YELLOW, -1);
    }
    em_log_to_stderr(false); /* log lines would tear the screen; the run's log file has them */
    return d;
}

void tr_dash_close(em_learner *l)
{
    tr_dash *d = l->dash;
    if (!d) return;
    tr_dash_draw(l, true);
    endwin();
    delscreen(d->screen);
    free(d);
    l->dash = NULL;
    em_log_to_stderr(true);
}

bool tr_dash_poll(em_learner *l)
{
    bool stop = false;
    int ch;
    while ((ch = getch()) != ERR) {
        if (ch == 'q' || ch == 'Q') {
            stop = true;
            snprintf(l->status, sizeof l->status, "stopping after this step ('q')");
        } else if (ch == KEY_RIGHT) {
            l->plot = (l->plot + 1) % N_PLOTS;
        } else if (ch == KEY_LEFT) {
            l->plot = (l->plot + N_PLOTS - 1) % N_PLOTS;
        }
    }
    return stop;
}

static void hms(char *buf, size_t cap, double s)
{
    if (isnan(s) || s < 0 || isinf(s)) {
        snprintf(buf, cap, "--:--:--");
        return;
    }
    long long t = (long long)(s + 0.5);
    snprintf(buf, cap, "%02lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
}

static void bar(int y, int x, int w, double frac)
{
    if (w < 3) return;
    if (!(frac >= 0)) frac = 0;
    if (frac > 1) frac = 1;
    int fill = (int)(frac * (w - 2) + 0.5);
    mvaddch(y, x, '[');
    attron(COLOR_PAIR(3));
    for (int i = 0; i < w - 2; i++) mvaddch(y, x + 1 + i, i < fill ? '#' : '-');
    attroff(COLOR_PAIR(3));
    mvaddch(y, x + w - 1, ']');
}

/* A series drawn into the plot box: points (x in [0, 1], y) with a glyph and colour. */
typedef struct plot_series {
    const double *x, *y;
    int64_t n;
    chtype glyph;
    int color;
    bool connect;
} plot_series;

static void plot(int top, int left, int h, int w, const plot_series *s, int ns)
{
    if (h < 3 || w < 20) return;
    double y0 = INFINITY, y1 = -INFINITY;
    for (int k = 0; k < ns; k++)
        for (int64_t i = 0; i < s[k].n; i++)
            if (!isnan(s[k].y[i]) && !isinf(s[k].y[i])) {
                y0 = fmin(y0, s[k].y[i]);
                y1 = fmax(y1, s[k].y[i]);
            }
    int lw = 10; /* y labels */
    int pw = w - lw - 1;
    for (int r = 0; r < h; r++) mvaddch(top + r, left + lw, ACS_VLINE);
    if (!(y1 >= y0)) {
        mvprintw(top + h / 2, left + lw + 2, "(no data yet)");
        return;
    }
    if (y1 == y0) {
        double pad = y0 != 0 ? 0.1 * fabs(y0) : 0.5;
        y1 += pad;
        y0 -= pad;
    }
    mvprintw(top, left, "%9.4g", y1);
    mvprintw(top + h / 2, left, "%9.4g", 0.5 * (y0 + y1));
    mvprintw(top + h - 1, left, "%9.4g", y0);
    for (int k = 0; k < ns; k++) {
        int prev_c = -1, prev_r = -1;
        attron(COLOR_PAIR(s[k].color));
        for (int64_t i = 0; i < s[k].n; i++) {
            double v = s[k].y[i];
            if (isnan(v) || isinf(v)) continue;
            int c = (int)(s[k].x[i] * (pw - 1) + 0.5);
            int r = (int)((y1 - v) / (y1 - y0) * (h - 1) + 0.5);
            if (c < 0 || c >= pw || r < 0 || r >= h) continue;
            if (s[k].connect && prev_c >= 0 && c == prev_c + 1 && abs(r - prev_r) > 1) {
                int a = r < prev_r ? r : prev_r, b = r < prev_r ? prev_r : r;
                for (int rr = a + 1; rr < b; rr++) mvaddch(top + rr, left + lw + 1 + c, ':');
            }
            mvaddch(top + r, left + lw + 1 + c, s[k].glyph);
            prev_c = c;
            prev_r = r;
        }
        attroff(COLOR_PAIR(s[k].color));
    }
}

/* Resamples a step series onto `cols` evenly spaced x positions (means over each column). */
static int64_t resample(const tr_series *s, int cols, double span, double *x, double *y)
{
    if (s->n == 0 || cols <= 0) return 0;
    int64_t n = s->n < cols ? s->n : cols;
    for (int64_t c = 0; c < n; c++) {
        int64_t a = c * s->n / n, b = (c + 1) * s->n / n;
        double sum = 0;
        for (int64_t i = a; i < b; i++) sum += s->v[i];
        y[c] = sum / (double)(b - a);
        x[c] = span * (double)(b) / (double)s->n;
    }
    return n;
}

void tr_dash_draw(em_learner *l, bool force)
{
    tr_dash *d = l->dash;
    if (!d) return;
    double now = tr_now();
    if (!force && now - d->last_draw < 0.1) return;
    d->last_draw = now;
    erase();
    int W = COLS, H = LINES;
    const em_learner_cfg *cfg = &l->cfg;
    int64_t total = cfg->train_batches ? cfg->train_batches : l->batches_seen;
    double ep_frac = total > 0 ? (double)l->batch / (double)total : NAN;
    double done = (double)l->epoch + (isnan(ep_frac) ? 0 : ep_frac);
    double all_frac = done / (double)cfg->epochs;
    double el = tr_elapsed(l);
    double ep_el = l->epoch_time_prev + (now - l->t_epoch0);
    char a[32], b[32], c[32];
    hms(a, sizeof a, el);
    attron(A_BOLD);
    mvprintw(0, 0, "Ember training  %s", l->run_dir ? l->run_dir : "");
    attroff(A_BOLD);
    mvprintw(0, W > 20 ? W - 20 : 0, "elapsed %s", a);
    int bw = W - 50 > 10 ? W - 50 : 10;
    hms(b, sizeof b, ep_frac > 0 ? ep_el / ep_frac * (1 - ep_frac) : NAN);
    mvprintw(1, 0, "Epoch %3lld/%-3lld", (long long)l->epoch + 1, (long long)cfg->epochs);
    bar(1, 14, bw, ep_frac);
    if (total > 0)
        mvprintw(1, 15 + bw, "%3.0f%% %lld/%lld ETA %s", 100 * ep_frac, (long long)l->batch,
                 (long long)total, b);
    else
        mvprintw(1, 15 + bw, "batch %lld", (long long)l->batch);
    hms(c, sizeof c, all_frac > 0 && all_frac < 1 ? el / all_frac * (1 - all_frac) : NAN);
    mvprintw(2, 0, "Total");
    bar(2, 14, bw, all_frac);
    mvprintw(2, 15 + bw, "%3.0f%% step %lld ETA %s", 100 * all_frac, (long long)l->steps, c);

    /* plot */
    static const char *titles[N_PLOTS] = {"Loss", "Accuracy", "Learning rate"};
    int ph = H - 14;
    mvhline(3, 0, ACS_HLINE, W);
    mvprintw(3, 2, " <- %s (%d/%d) -> ", titles[l->plot], l->plot + 1, N_PLOTS);
    if (ph >= 3) {
        int pw = W - 12;
        double *buf =
            calloc((size_t)(pw > 0 ? pw : 1) * 2 + (size_t)l->n_hist * 3 + 2, sizeof *buf);
        if (buf) {
            double *sx = buf, *sy = buf + pw, *ex = buf + 2 * pw, *ey = ex + l->n_hist,
                   *ey2 = ey + l->n_hist;
            double span = 1; /* the step series covers the run so far */
            plot_series s[3];
            int ns = 0;
            for (int64_t e = 0; e < l->n_hist; e++) ex[e] = (double)(e + 1) / (done > 0 ? done : 1);
            if (l->plot == 0 || l->plot == 1) {
                const tr_series *ts = l->plot == 0 ? &l->s_loss : &l->s_acc;
                int64_t n = resample(ts, pw, span, sx, sy);
                s[ns++] = (plot_series){sx, sy, n, '*', 1, true};
                int tc = l->plot == 0 ? TC_LOSS : TC_ACC,
                    vc = l->plot == 0 ? TC_VAL_LOSS : TC_VAL_ACC;
                for (int64_t e = 0; e < l->n_hist; e++) {
                    ey[e] = l->hist[e * TC_COUNT + tc];
                    ey2[e] = l->hist[e * TC_COUNT + vc];
                }
                s[ns++] = (plot_series){ex, ey, l->n_hist, 'T', 4, false};
                s[ns++] = (plot_series){ex, ey2, l->n_hist, 'o', 2, false};
                mvprintw(4 + ph, 12, "* train (steps)  T train (epochs)  o validation (epochs)");
            } else {
                for (int64_t e = 0; e < l->n_hist; e++) ey[e] = l->hist[e * TC_COUNT + TC_LR];
                s[ns++] = (plot_series){ex, ey, l->n_hist, '+', 3, true};
                mvprintw(4 + ph, 12, "+ learning rate (epochs); now %.4g", l->last_lr);
            }
            plot(4, 0, ph, W, s, ns);
            free(buf);
        }
    }

    /* metrics table */
    int y = H - 9 > 4 ? H - 9 : 4;
    mvhline(y, 0, ACS_HLINE, W);
    em_metric_values tv = em_metrics_compute(l->train_m);
    const double *last = l->n_hist > 0 ? l->hist + (l->n_hist - 1) * TC_COUNT : NULL;
    attron(A_BOLD);
    mvprintw(y + 1, 0, "%-12s %12s %12s %12s %12s", "", "step", "epoch (run)", "last epoch",
             "last val");
    attroff(A_BOLD);
    struct row {
        const char *name;
        double step, run;
        int tc, vc;
    } rows[] = {{"loss", l->last_loss, tv.loss, TC_LOSS, TC_VAL_LOSS},
                {"accuracy", l->last_acc, tv.accuracy, TC_ACC, TC_VAL_ACC},
                {"f1 (macro)", NAN, tv.f1_macro, TC_F1_MACRO, TC_VAL_F1_MACRO},
                {"perplexity", NAN, tv.perplexity, TC_PPL, TC_VAL_PPL}};
    for (int i = 0; i < 4; i++) {
        char v1[24], v2[24], v3[24], v4[24];
        tr_fmt(v1, sizeof v1, rows[i].step, false);
        tr_fmt(v2, sizeof v2, rows[i].run, false);
        tr_fmt(v3, sizeof v3, last ? last[rows[i].tc] : NAN, false);
        tr_fmt(v4, sizeof v4, last ? last[rows[i].vc] : NAN, false);
        mvprintw(y + 2 + i, 0, "%-12s %12s %12s %12s %12s", rows[i].name, v1, v2, v3, v4);
    }
    char best[24];
    tr_fmt(best, sizeof best, l->best, false);
    mvprintw(y + 6, 0, "lr %.4g   %.1f items/s   CPU %.0f%%   RSS %.1f MB   best %s %s", l->last_lr,
             l->last_ips, l->last_cpu, (double)l->last_rss / (1024.0 * 1024.0), l->monitor, best);
    attron(A_REVERSE);
    mvprintw(H - 1, 0, " q: stop and save   <-/->: switch plot ");
    attroff(A_REVERSE);
    if (l->status[0]) mvprintw(H - 1, 42, " %s", l->status);
    refresh();
}

/* ---- plain lines --------------------------------------------------------------------------- */

void tr_plain_step(em_learner *l, int64_t total)
{
    if (l->cfg.quiet || l->dash) return;
    if (l->batch % l->cfg.log_every != 0) return;
    char loss[24], acc[24];
    tr_fmt(loss, sizeof loss, l->last_loss, false);
    tr_fmt(acc, sizeof acc, l->last_acc, false);
    if (total > 0)
        fprintf(l->out, "epoch %lld/%lld batch %lld/%lld", (long long)l->epoch + 1,
                (long long)l->cfg.epochs, (long long)l->batch, (long long)total);
    else
        fprintf(l->out, "epoch %lld/%lld batch %lld", (long long)l->epoch + 1,
                (long long)l->cfg.epochs, (long long)l->batch);
    fprintf(l->out, " step %lld loss %s acc %s lr %.4g", (long long)l->steps, loss, acc,
            l->last_lr);
    if (!isnan(l->last_ips)) fprintf(l->out, " %.1f items/s", l->last_ips);
    fputc('\n', l->out);
    fflush(l->out);
}

void tr_plain_epoch(em_learner *l, const double *rec)
{
    if (l->cfg.quiet || l->dash) return;
    static const int cols[] = {TC_LOSS,     TC_ACC,     TC_TOPK,     TC_F1_MACRO,     TC_PPL,
                               TC_VAL_LOSS, TC_VAL_ACC, TC_VAL_TOPK, TC_VAL_F1_MACRO, TC_VAL_PPL,
                               TC_LR,       TC_IPS,     TC_CPU,      TC_RSS_MB};
    fprintf(l->out, "epoch %lld/%lld done:", (long long)rec[TC_EPOCH], (long long)l->cfg.epochs);
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) {
        if (isnan(rec[cols[i]])) continue;
        char v[24];
        tr_fmt(v, sizeof v, rec[cols[i]], false);
        fprintf(l->out, " %s %s", tr_col_names[cols[i]], v);
    }
    fprintf(l->out, " time %.1fs\n", rec[TC_TIME]);
    fflush(l->out);
}

void tr_plain_msg(em_learner *l, const char *msg)
{
    if (l->cfg.quiet || !msg || !msg[0]) return;
    fprintf(l->out, "%s\n", msg);
    fflush(l->out);
}
