/* Progress output: an ncurses dashboard (progress bars with ETA, braille-dot plots of loss,
 * accuracy, learning rate and custom scalars against the optimizer step, a metrics table; keys
 * q and left/right) when the output is a terminal, else plain lines suited to CI logs. */
#define _POSIX_C_SOURCE  200809L
#define NCURSES_WIDECHAR 1
#include <curses.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wchar.h>

#include "train_impl.h"

struct tr_dash {
    SCREEN *screen;
    double last_draw;
    bool utf8;        /* braille dots and box lines; ASCII otherwise */
    char *old_locale; /* LC_CTYPE before the dashboard set the user's */
};

bool tr_dashboard_wanted(const em_learner *l)
{
    const char *mode = em_config_get_string("dashboard"); /* on and off win over the field */
    if (mode && !strcmp(mode, "off")) return false;
    if (mode && !strcmp(mode, "on")) return true;
    if (l->cfg.dashboard == EM_DASHBOARD_ON) return true;
    if (l->cfg.dashboard == EM_DASHBOARD_OFF) return false;
    const char *term = getenv("TERM");
    return isatty(fileno(l->out)) && term && term[0] && strcmp(term, "dumb") != 0;
}

static void restore_locale(tr_dash *d)
{
    if (!d->old_locale) return;
    setlocale(LC_CTYPE, d->old_locale);
    free(d->old_locale);
    d->old_locale = NULL;
}

tr_dash *tr_dash_open(em_learner *l)
{
    tr_dash *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    /* ncursesw draws multibyte characters only under a UTF-8 LC_CTYPE: take the user's from
     * the environment while the dashboard is up */
    const char *cur = setlocale(LC_CTYPE, NULL);
    if (cur) {
        size_t n = strlen(cur) + 1;
        d->old_locale = malloc(n);
        if (d->old_locale) memcpy(d->old_locale, cur, n);
    }
    setlocale(LC_CTYPE, "");
    d->utf8 = strcmp(nl_langinfo(CODESET), "UTF-8") == 0;
    fflush(l->out);
    d->screen = newterm(NULL, l->out, stdin);
    if (!d->screen) {
        restore_locale(d);
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
        init_pair(5, COLOR_MAGENTA, -1);
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
    restore_locale(d);
    free(d);
    l->dash = NULL;
    em_log_to_stderr(true);
}

static int n_pages(const em_learner *l)
{
    return 3 + l->n_scalars;
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
            l->plot = (l->plot + 1) % n_pages(l);
        } else if (ch == KEY_LEFT) {
            l->plot = (l->plot + n_pages(l) - 1) % n_pages(l);
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

/* One character cell: a wide character under UTF-8, else its ASCII stand-in. */
static void put(const tr_dash *d, int y, int x, wchar_t wc, char ascii, int pair, attr_t attr)
{
    if (!d->utf8) {
        attron(COLOR_PAIR(pair) | attr);
        mvaddch(y, x, (chtype)(unsigned char)ascii);
        attroff(COLOR_PAIR(pair) | attr);
        return;
    }
    wchar_t s[2] = {wc, 0};
    cchar_t cc;
    setcchar(&cc, s, attr, (short)pair, NULL);
    mvadd_wch(y, x, &cc);
}

static void bar(const tr_dash *d, int y, int x, int w, double frac)
{
    if (w < 3) return;
    if (!(frac >= 0)) frac = 0;
    if (frac > 1) frac = 1;
    /* eighths of a cell under UTF-8 */
    int eighths = (int)(frac * (w - 2) * 8 + 0.5), full = eighths / 8, part = eighths % 8;
    static const wchar_t blocks[8] = {L' ', 0x258F, 0x258E, 0x258D, 0x258C, 0x258B, 0x258A, 0x2589};
    mvaddch(y, x, d->utf8 ? ' ' : '[');
    for (int i = 0; i < w - 2; i++) {
        if (i < full)
            put(d, y, x + 1 + i, 0x2588, '#', 3, 0);
        else if (i == full && part)
            put(d, y, x + 1 + i, blocks[part], '#', 3, 0);
        else
            put(d, y, x + 1 + i, 0x2591, '-', 0, A_DIM);
    }
    mvaddch(y, x + w - 1, d->utf8 ? ' ' : ']');
}

/* ---- plots ---------------------------------------------------------------------------------- */

/* A series for the plot: points (x: optimizer step) drawn as a line, or as markers. */
typedef struct plot_series {
    const double *x, *y;
    int64_t n;
    int color;
    bool markers;
    const char *label;
} plot_series;

/* A canvas of braille cells: 2 x 4 dots each, one colour per cell (the last series drawn). */
typedef struct canvas {
    int w, h; /* cells */
    unsigned char *dots;
    unsigned char *color;
} canvas;

static void dot(canvas *c, int x, int y, int color)
{
    if (x < 0 || y < 0 || x >= 2 * c->w || y >= 4 * c->h) return;
    static const unsigned char bit[4][2] = {{0x01, 0x08}, {0x02, 0x10}, {0x04, 0x20}, {0x40, 0x80}};
    int i = (y / 4) * c->w + x / 2;
    c->dots[i] |= bit[y % 4][x % 2];
    c->color[i] = (unsigned char)color;
}

static void line(canvas *c, int x0, int y0, int x1, int y1, int color)
{
    int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    int err = dx + dy;
    for (;;) {
        dot(c, x0, y0, color);
        if (x0 == x1 && y0 == y1) break;
        int e2 = 2 * err;
        if (e2 >= dy) {
            err += dy;
            x0 += sx;
        }
        if (e2 <= dx) {
            err += dx;
            y0 += sy;
        }
    }
}

/* Draws the series in a box at (top, left) of h x w cells with a labelled y axis (nice ticks),
 * an x axis in optimizer steps below it (two more rows) and the epochs' ends as dotted lines. */
static void plot(const tr_dash *d, int top, int left, int h, int w, const plot_series *s, int ns,
                 const em_learner *l)
{
    const int lw = 10; /* y labels */
    int pw = w - lw - 1;
    if (h < 3 || pw < 10) return;
    double y0 = INFINITY, y1 = -INFINITY, xm = (double)l->steps;
    for (int k = 0; k < ns; k++)
        for (int64_t i = 0; i < s[k].n; i++)
            if (!isnan(s[k].y[i]) && !isinf(s[k].y[i])) {
                y0 = fmin(y0, s[k].y[i]);
                y1 = fmax(y1, s[k].y[i]);
                xm = fmax(xm, s[k].x[i]);
            }
    for (int r = 0; r < h; r++) put(d, top + r, left + lw, 0x2502, '|', 0, 0);
    put(d, top + h, left + lw, 0x2514, '+', 0, 0);
    for (int c = 0; c < pw; c++) put(d, top + h, left + lw + 1 + c, 0x2500, '-', 0, 0);
    if (!(y1 >= y0)) {
        mvprintw(top + h / 2, left + lw + 2, "(no data yet)");
        return;
    }
    if (y1 == y0) {
        double pad = y0 != 0 ? 0.1 * fabs(y0) : 0.5;
        y1 += pad;
        y0 -= pad;
    }
    double ys = tr_nice_step(y1 - y0, h >= 12 ? 5 : 3);
    y0 = floor(y0 / ys + 1e-9) * ys;
    y1 = ceil(y1 / ys - 1e-9) * ys;
    if (!(xm > 0)) xm = 1;
    double xs = tr_nice_step(xm, pw >= 60 ? 6 : 3);
    double x1 = ceil(xm / xs - 1e-9) * xs;
    char lab[32];
    for (int t = 0; t <= 40; t++) {
        double v = y0 + ys * t;
        if (v > y1 + ys * 1e-6) break;
        int r = (int)lround((y1 - v) / (y1 - y0) * (h - 1));
        tr_tick_label(lab, sizeof lab, v, ys);
        mvprintw(top + r, left, "%9.9s", lab);
        put(d, top + r, left + lw, 0x2524, '+', 0, 0);
    }
    int last_end = -100;
    for (int t = 0; t <= 40; t++) {
        double v = xs * t;
        if (v > x1 + xs * 1e-6) break;
        int c = (int)lround(v / x1 * (pw - 1));
        put(d, top + h, left + lw + 1 + c, 0x252C, '+', 0, 0);
        tr_tick_label(lab, sizeof lab, v, xs);
        int len = (int)strlen(lab), at = left + lw + 1 + c - len / 2;
        if (at + len > left + w) at = left + w - len;
        if (at > last_end + 1) {
            mvprintw(top + h + 1, at, "%s", lab);
            last_end = at + len;
        }
    }
    mvprintw(top + h + 1, left + lw - 5, "step");

    canvas cv = {pw, h, calloc((size_t)pw * (size_t)h, 1), calloc((size_t)pw * (size_t)h, 1)};
    if (!cv.dots || !cv.color) {
        free(cv.dots);
        free(cv.color);
        return;
    }
    int W2 = 2 * pw, H4 = 4 * h;
    for (int k = 0; k < ns; k++) {
        if (s[k].markers) continue;
        /* the mean of the points that fall in each dot column, joined by lines */
        int prev_x = -1, prev_y = -1, col = -1, cnt = 0;
        double sum = 0;
        for (int64_t i = 0; i <= s[k].n; i++) {
            bool end = i == s[k].n;
            int dx = end ? -2 : (int)lround(s[k].x[i] / x1 * (W2 - 1));
            if (!end && (isnan(s[k].y[i]) || isinf(s[k].y[i]))) continue;
            if ((end || dx != col) && cnt > 0) {
                int dy = (int)lround((y1 - sum / cnt) / (y1 - y0) * (H4 - 1));
                if (prev_x >= 0)
                    line(&cv, prev_x, prev_y, col, dy, s[k].color);
                else
                    dot(&cv, col, dy, s[k].color);
                prev_x = col;
                prev_y = dy;
                sum = 0;
                cnt = 0;
            }
            if (end) break;
            col = dx;
            sum += s[k].y[i];
            cnt++;
        }
    }
    /* the epochs' ends: dotted columns where nothing is drawn, with the epoch number on top */
    int label_end = -100;
    for (int64_t e = 0; e < l->n_hist; e++) {
        double xe = l->hist[e * TC_COUNT + TC_STEPS];
        int c = (int)lround(xe / x1 * (W2 - 1)) / 2;
        if (c < 0 || c >= pw) continue;
        for (int r = 0; r < h; r++)
            if (!cv.dots[r * pw + c]) put(d, top + r, left + lw + 1 + c, 0x2506, ':', 0, A_DIM);
        snprintf(lab, sizeof lab, "%lld", (long long)e + 1);
        int len = (int)strlen(lab), at = left + lw + 1 + c - len + 1;
        bool free_cells = at > label_end + 1;
        for (int j = 0; free_cells && j < len; j++)
            free_cells = at + j >= left + lw + 1 && !cv.dots[at + j - (left + lw + 1)];
        if (free_cells) {
            attron(A_DIM);
            mvprintw(top, at, "%s", lab);
            attroff(A_DIM);
            label_end = at + len;
        }
    }
    for (int r = 0; r < h; r++)
        for (int c = 0; c < pw; c++) {
            unsigned char b = cv.dots[r * pw + c];
            if (b)
                put(d, top + r, left + lw + 1 + c, (wchar_t)(0x2800 + b), '*', cv.color[r * pw + c],
                    0);
        }
    for (int k = 0; k < ns; k++) {
        if (!s[k].markers) continue;
        for (int64_t i = 0; i < s[k].n; i++) {
            if (isnan(s[k].y[i]) || isinf(s[k].y[i])) continue;
            int c = (int)lround(s[k].x[i] / x1 * (W2 - 1)) / 2;
            int r = (int)lround((y1 - s[k].y[i]) / (y1 - y0) * (H4 - 1)) / 4;
            if (c >= 0 && c < pw && r >= 0 && r < h)
                put(d, top + r, left + lw + 1 + c, 0x25CF, 'o', s[k].color, A_BOLD);
        }
    }
    free(cv.dots);
    free(cv.color);
}

/* Prints the legend of the plot at row y. */
static void legend(const tr_dash *d, int y, int x, const plot_series *s, int ns, const char *extra)
{
    for (int k = 0; k < ns; k++) {
        put(d, y, x, s[k].markers ? 0x25CF : 0x28C0, s[k].markers ? 'o' : '*', s[k].color,
            s[k].markers ? A_BOLD : 0);
        mvprintw(y, x + 2, "%s", s[k].label);
        x += 5 + (int)strlen(s[k].label);
    }
    put(d, y, x, 0x2506, ':', 0, A_DIM);
    mvprintw(y, x + 2, "end of epoch");
    if (extra) mvprintw(y, x + 17, "%s", extra);
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
    int bw = W - 52 > 10 ? W - 52 : 10;
    hms(b, sizeof b, ep_frac > 0 ? ep_el / ep_frac * (1 - ep_frac) : NAN);
    mvprintw(1, 0, "Epoch %3lld/%-3lld", (long long)l->epoch + 1, (long long)cfg->epochs);
    bar(d, 1, 14, bw, ep_frac);
    if (total > 0)
        mvprintw(1, 15 + bw, "%3.0f%% %lld/%lld ETA %s", 100 * ep_frac, (long long)l->batch,
                 (long long)total, b);
    else
        mvprintw(1, 15 + bw, "batch %lld, ETA after epoch 1", (long long)l->batch);
    hms(c, sizeof c, all_frac > 0 && all_frac < 1 ? el / all_frac * (1 - all_frac) : NAN);
    mvprintw(2, 0, "Total");
    bar(d, 2, 14, bw, all_frac);
    mvprintw(2, 15 + bw, "%3.0f%% step %lld ETA %s", 100 * all_frac, (long long)l->steps, c);

    /* the table's height sets the plot's */
    int n_custom = l->n_scalars;
    int table_h = 7 + n_custom;
    int ty = H - 1 - table_h;
    int ph = ty - 4 - 3; /* title row above; axis, tick labels and legend below */
    int page = l->plot % n_pages(l);
    static const char *titles[3] = {"Loss", "Accuracy", "Learning rate"};
    const char *title = page < 3 ? titles[page] : l->scalars[page - 3].name;
    for (int x = 0; x < W; x++) put(d, 3, x, 0x2500, '-', 0, 0);
    mvprintw(3, 2, " <- %s (%d/%d) -> ", title, page + 1, n_pages(l));
    if (ph >= 3) {
        int64_t n = l->n_hist;
        double *buf = calloc((size_t)(n > 0 ? n : 1) * 3, sizeof *buf);
        if (buf) {
            double *ex = buf, *ey = buf + n, *ey2 = buf + 2 * n;
            plot_series s[3];
            int ns = 0;
            for (int64_t e = 0; e < n; e++) ex[e] = l->hist[e * TC_COUNT + TC_STEPS];
            char extra[64] = "";
            if (page <= 1) {
                const tr_series *ts = page == 0 ? &l->s_loss : &l->s_acc;
                int tc = page == 0 ? TC_LOSS : TC_ACC, vc = page == 0 ? TC_VAL_LOSS : TC_VAL_ACC;
                for (int64_t e = 0; e < n; e++) {
                    ey[e] = l->hist[e * TC_COUNT + tc];
                    ey2[e] = l->hist[e * TC_COUNT + vc];
                }
                s[ns++] = (plot_series){ts->x, ts->v, ts->n, 1, false, "train (steps)"};
                s[ns++] = (plot_series){ex, ey, n, 4, true, "train (epochs)"};
                s[ns++] = (plot_series){ex, ey2, n, 2, true, "validation"};
            } else if (page == 2) {
                s[ns++] = (plot_series){l->s_lr.x, l->s_lr.v, l->s_lr.n,
                                        3,         false,     "learning rate (steps)"};
                snprintf(extra, sizeof extra, "now %.4g", l->last_lr);
            } else {
                const tr_scalar *sc = &l->scalars[page - 3];
                for (int64_t e = 0; e < n; e++) ey[e] = l->xhist[e * TR_MAX_SCALARS + page - 3];
                s[ns++] =
                    (plot_series){sc->series.x, sc->series.v, sc->series.n, 5, false, "steps"};
                s[ns++] = (plot_series){ex, ey, n, 4, true, "epochs"};
            }
            plot(d, 4, 0, ph, W, s, ns, l);
            legend(d, 4 + ph + 2, 11, s, ns, extra[0] ? extra : NULL);
            free(buf);
        }
    }

    /* metrics table */
    int y = ty;
    for (int x = 0; x < W; x++) put(d, y, x, 0x2500, '-', 0, 0);
    em_metric_values tv = em_metrics_compute(l->train_m);
    const double *last = l->n_hist > 0 ? l->hist + (l->n_hist - 1) * TC_COUNT : NULL;
    attron(A_BOLD);
    mvprintw(y + 1, 0, "%-16s %12s %12s %12s %12s", "", "step", "this epoch", "last epoch",
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
    char v1[24], v2[24], v3[24], v4[24];
    for (int i = 0; i < 4; i++) {
        tr_fmt(v1, sizeof v1, rows[i].step, false);
        tr_fmt(v2, sizeof v2, rows[i].run, false);
        tr_fmt(v3, sizeof v3, last ? last[rows[i].tc] : NAN, false);
        tr_fmt(v4, sizeof v4, last ? last[rows[i].vc] : NAN, false);
        mvprintw(y + 2 + i, 0, "%-16s %12s %12s %12s %12s", rows[i].name, v1, v2, v3, v4);
    }
    for (int k = 0; k < n_custom; k++) {
        const tr_scalar *sc = &l->scalars[k];
        tr_fmt(v1, sizeof v1, sc->last, false);
        tr_fmt(v2, sizeof v2, sc->epoch_n > 0 ? sc->epoch_sum / (double)sc->epoch_n : NAN, false);
        tr_fmt(v3, sizeof v3, l->n_hist > 0 ? l->xhist[(l->n_hist - 1) * TR_MAX_SCALARS + k] : NAN,
               false);
        mvprintw(y + 6 + k, 0, "%-16.16s %12s %12s %12s %12s", sc->name, v1, v2, v3, "-");
    }
    char best[24];
    tr_fmt(best, sizeof best, l->best, false);
    mvprintw(y + 6 + n_custom, 0, "lr %.4g   %.1f items/s   CPU %.0f%%   RSS %.1f MB   best %s %s",
             l->last_lr, l->last_ips, l->last_cpu, (double)l->last_rss / (1024.0 * 1024.0),
             l->monitor, best);
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
    for (int k = 0; k < l->n_scalars; k++) {
        if (l->scalars[k].step_n == 0) continue;
        tr_fmt(acc, sizeof acc, l->scalars[k].last, false);
        fprintf(l->out, " %s %s", l->scalars[k].name, acc);
    }
    if (!isnan(l->last_ips)) fprintf(l->out, " %.1f items/s", l->last_ips);
    fputc('\n', l->out);
    fflush(l->out);
}

void tr_plain_epoch(em_learner *l, int64_t e)
{
    if (l->cfg.quiet || l->dash || e < 0 || e >= l->n_hist) return;
    static const int cols[] = {TC_LOSS,     TC_ACC,     TC_TOPK,     TC_F1_MACRO,     TC_PPL,
                               TC_VAL_LOSS, TC_VAL_ACC, TC_VAL_TOPK, TC_VAL_F1_MACRO, TC_VAL_PPL,
                               TC_LR,       TC_IPS,     TC_CPU,      TC_RSS_MB};
    const double *rec = l->hist + e * TC_COUNT;
    fprintf(l->out, "epoch %lld/%lld done:", (long long)rec[TC_EPOCH], (long long)l->cfg.epochs);
    char v[24];
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) {
        if (isnan(rec[cols[i]])) continue;
        tr_fmt(v, sizeof v, rec[cols[i]], false);
        fprintf(l->out, " %s %s", tr_col_names[cols[i]], v);
    }
    for (int k = 0; k < l->n_scalars; k++) {
        double x = l->xhist[e * TR_MAX_SCALARS + k];
        if (isnan(x)) continue;
        tr_fmt(v, sizeof v, x, false);
        fprintf(l->out, " %s %s", l->scalars[k].name, v);
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
