/* The run directory's files: metrics.jsonl (one line per step), epochs.jsonl (one per epoch),
 * summary.md (epoch table, best metrics, time) and report.html (self-contained page with the
 * curves as inline SVG). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "train_impl.h"

em_status tr_mkdirs(const char *path)
{
    size_t n = strlen(path);
    char *p = malloc(n + 1);
    if (!p) return em_error(EM_ERR_OOM, "learner: out of memory");
    memcpy(p, path, n + 1);
    em_status st = EM_OK;
    for (size_t i = 1; i <= n && st == EM_OK; i++) {
        if (p[i] != '/' && p[i] != 0) continue;
        char c = p[i];
        p[i] = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            st = em_error(EM_ERR_IO, "learner: cannot create directory '%s': %s", p,
                          strerror(errno));
        p[i] = c;
    }
    free(p);
    return st;
}

void tr_fmt(char *buf, size_t cap, double v, bool json)
{
    if (isnan(v) || isinf(v))
        snprintf(buf, cap, "%s", json ? "null" : "-");
    else if (v == floor(v) && fabs(v) < 1e15)
        snprintf(buf, cap, "%.0f", v);
    else
        snprintf(buf, cap, json ? "%.9g" : "%.4g", v);
}

void tr_json_step(em_learner *l, double loss, double acc, double lr, double ips, double t)
{
    if (!l->f_steps) return;
    char a[40], b[40], c[40], d[40], e[40];
    tr_fmt(a, sizeof a, loss, true);
    tr_fmt(b, sizeof b, acc, true);
    tr_fmt(c, sizeof c, lr, true);
    tr_fmt(d, sizeof d, ips, true);
    tr_fmt(e, sizeof e, t, true);
    fprintf(l->f_steps,
            "{\"epoch\":%lld,\"batch\":%lld,\"step\":%lld,\"loss\":%s,\"accuracy\":%s,\"lr\":%s,"
            "\"items_per_sec\":%s,\"time_s\":%s}\n",
            (long long)l->epoch + 1, (long long)l->batch - 1, (long long)l->steps, a, b, c, d, e);
}

void tr_json_epoch(em_learner *l, const double *rec)
{
    if (!l->f_epochs) return;
    fputc('{', l->f_epochs);
    for (int i = 0; i < TC_COUNT; i++) {
        char v[40];
        tr_fmt(v, sizeof v, rec[i], true);
        fprintf(l->f_epochs, "%s\"%s\":%s", i ? "," : "", tr_col_names[i], v);
    }
    fputs("}\n", l->f_epochs);
    fflush(l->f_epochs);
    if (l->f_steps) fflush(l->f_steps);
}

static FILE *open_in_run(em_learner *l, const char *name, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", l->run_dir, name);
    FILE *f = fopen(path, "w");
    if (!f) em_error(EM_ERR_IO, "learner: cannot write '%s': %s", path, strerror(errno));
    return f;
}

static const char *reason_text(em_stop_reason r)
{
    switch (r) {
    case EM_STOP_DONE: return "all epochs ran";
    case EM_STOP_EARLY: return "early stopping";
    case EM_STOP_INTERRUPT: return "interrupted (checkpoint saved)";
    case EM_STOP_ERROR: return "error";
    default: return "not run";
    }
}

/* Columns of the summary/report tables. */
static const int table_cols[] = {TC_EPOCH,   TC_LOSS,     TC_ACC,     TC_TOPK,     TC_F1_MACRO,
                                 TC_PPL,     TC_VAL_LOSS, TC_VAL_ACC, TC_VAL_TOPK, TC_VAL_F1_MACRO,
                                 TC_VAL_PPL, TC_LR,       TC_IPS,     TC_TIME};
#define N_TABLE ((int)(sizeof table_cols / sizeof table_cols[0]))

static bool col_used(const em_learner *l, int c)
{
    for (int64_t e = 0; e < l->n_hist; e++)
        if (!isnan(l->hist[e * TC_COUNT + c])) return true;
    return false;
}

static bool col_maximize(int c)
{
    const char *n = tr_col_names[c];
    return strstr(n, "acc") || strstr(n, "f1") || strstr(n, "precision") || strstr(n, "recall");
}

/* Best value of column c and its epoch index. */
static double col_best(const em_learner *l, int c, int64_t *at)
{
    double best = NAN;
    *at = -1;
    bool mx = col_maximize(c);
    for (int64_t e = 0; e < l->n_hist; e++) {
        double v = l->hist[e * TC_COUNT + c];
        if (isnan(v)) continue;
        if (isnan(best) || (mx ? v > best : v < best)) {
            best = v;
            *at = e;
        }
    }
    return best;
}

static const int best_cols[] = {TC_LOSS,     TC_ACC,          TC_TOPK,         TC_F1_MICRO,
                                TC_F1_MACRO, TC_PPL,          TC_VAL_LOSS,     TC_VAL_ACC,
                                TC_VAL_TOPK, TC_VAL_F1_MICRO, TC_VAL_F1_MACRO, TC_VAL_PPL};
#define N_BEST ((int)(sizeof best_cols / sizeof best_cols[0]))

em_status tr_write_summary(em_learner *l)
{
    char path[1024], v[40];
    FILE *f = open_in_run(l, "summary.md", path, sizeof path);
    if (!f) return em_last_status();
    const char *name = strrchr(l->run_dir, '/');
    fprintf(f, "# Training run %s\n\n", name ? name + 1 : l->run_dir);
    fprintf(f, "- Ended: %s\n", reason_text(l->reason));
    fprintf(f, "- Epochs: %lld of %lld; optimizer steps: %lld\n", (long long)l->n_hist,
            (long long)l->cfg.epochs, (long long)l->steps);
    fprintf(f, "- Time: %.1f s\n", l->elapsed_prev);
    tr_fmt(v, sizeof v, l->best, false);
    fprintf(f, "- Best %s: %s (epoch %lld)\n", l->monitor, v, (long long)l->best_epoch + 1);
    if (l->status[0]) fprintf(f, "- Note: %s\n", l->status);
    fprintf(f, "\n## Epochs\n\n|");
    for (int i = 0; i < N_TABLE; i++)
        if (col_used(l, table_cols[i])) fprintf(f, " %s |", tr_col_names[table_cols[i]]);
    fprintf(f, "\n|");
    for (int i = 0; i < N_TABLE; i++)
        if (col_used(l, table_cols[i])) fprintf(f, "---:|");
    fputc('\n', f);
    for (int64_t e = 0; e < l->n_hist; e++) {
        fputc('|', f);
        for (int i = 0; i < N_TABLE; i++) {
            if (!col_used(l, table_cols[i])) continue;
            tr_fmt(v, sizeof v, l->hist[e * TC_COUNT + table_cols[i]], false);
            fprintf(f, " %s |", v);
        }
        fputc('\n', f);
    }
    fprintf(f, "\n## Best metrics\n\n| metric | best | epoch |\n|---|---:|---:|\n");
    for (int i = 0; i < N_BEST; i++) {
        int64_t at;
        double b = col_best(l, best_cols[i], &at);
        if (isnan(b)) continue;
        tr_fmt(v, sizeof v, b, false);
        fprintf(f, "| %s | %s | %lld |\n", tr_col_names[best_cols[i]], v, (long long)at + 1);
    }
    if (fclose(f) != 0) return em_error(EM_ERR_IO, "learner: cannot write '%s'", path);
    return EM_OK;
}

/* ---- report.html --------------------------------------------------------------------------- */

typedef struct svg_line {
    const char *label, *color;
    const double *x, *y; /* y NaN: gap */
    int64_t n;
    bool faint;
} svg_line;

static void svg_chart(FILE *f, const char *title, const char *xlabel, const svg_line *lines,
                      int n_lines)
{
    const double W = 640, H = 280, L = 60, R = 20, T = 30, B = 40;
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (int k = 0; k < n_lines; k++)
        for (int64_t i = 0; i < lines[k].n; i++) {
            if (isnan(lines[k].y[i]) || isinf(lines[k].y[i])) continue;
            x0 = fmin(x0, lines[k].x[i]);
            x1 = fmax(x1, lines[k].x[i]);
            y0 = fmin(y0, lines[k].y[i]);
            y1 = fmax(y1, lines[k].y[i]);
        }
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"11\">\n",
            W, H, W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n");
    fprintf(f, "<text x=\"%.0f\" y=\"18\" font-size=\"14\" font-weight=\"bold\">%s</text>\n", L,
            title);
    if (!(x1 >= x0)) {
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">no data</text>\n</svg>\n", L, H / 2);
        return;
    }
    if (x1 == x0) x1 = x0 + 1;
    if (y1 == y0) {
        double pad = y0 != 0 ? 0.1 * fabs(y0) : 0.5;
        y1 += pad;
        y0 -= pad;
    }
    double pw = W - L - R, ph = H - T - B;
    fprintf(f,
            "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
            "stroke=\"#888\"/>\n",
            L, T, pw, ph);
    for (int t = 0; t <= 4; t++) {
        double yv = y0 + (y1 - y0) * t / 4, py = T + ph - ph * t / 4;
        double xv = x0 + (x1 - x0) * t / 4, px = L + pw * t / 4;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", L,
                py, L + pw, py);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n", L - 4, py + 4,
                yv);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.4g</text>\n", px,
                T + ph + 14, xv);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", L + pw / 2, H - 6,
            xlabel);
    double lx = L + 10;
    for (int k = 0; k < n_lines; k++) {
        const svg_line *ln = &lines[k];
        bool any = false;
        for (int64_t i = 0; i < ln->n; i++) {
            bool ok = !isnan(ln->y[i]) && !isinf(ln->y[i]);
            if (!ok) {
                if (any) fprintf(f, "\"/>\n");
                any = false;
                continue;
            }
            if (!any)
                fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s points=\"",
                        ln->color, ln->faint ? "1" : "2",
                        ln->faint ? " stroke-opacity=\"0.35\"" : "");
            any = true;
            double px = L + pw * (ln->x[i] - x0) / (x1 - x0);
            double py = T + ph - ph * (ln->y[i] - y0) / (y1 - y0);
            fprintf(f, "%.1f,%.1f ", px, py);
        }
        if (any) fprintf(f, "\"/>\n");
        if (ln->n > 0 && !ln->faint)
            for (int64_t i = 0; i < ln->n; i++) {
                if (isnan(ln->y[i]) || isinf(ln->y[i]) || ln->n > 60) continue;
                double px = L + pw * (ln->x[i] - x0) / (x1 - x0);
                double py = T + ph - ph * (ln->y[i] - y0) / (y1 - y0);
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n", px, py,
                        ln->color);
            }
        fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"3\" fill=\"%s\"/>", lx, T + 8,
                ln->color);
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">%s</text>\n", lx + 16, T + 12, ln->label);
        lx += 24 + 7.0 * (double)strlen(ln->label);
    }
    fprintf(f, "</svg>\n");
}

/* Copies s with HTML's special characters escaped. */
static void html_escape(char *out, size_t cap, const char *s)
{
    size_t o = 0;
    for (; *s && o + 7 < cap; s++) {
        const char *r = *s == '&'   ? "&amp;"
                        : *s == '<' ? "&lt;"
                        : *s == '>' ? "&gt;"
                        : *s == '"' ? "&quot;"
                                    : NULL;
        if (r) {
            memcpy(out + o, r, strlen(r));
            o += strlen(r);
        } else {
            out[o++] = *s;
        }
    }
    out[o] = 0;
}

em_status tr_write_report(em_learner *l)
{
    char path[1024], v[40];
    FILE *f = open_in_run(l, "report.html", path, sizeof path);
    if (!f) return em_last_status();
    const char *name = strrchr(l->run_dir, '/');
    char esc[512];
    html_escape(esc, sizeof esc, name ? name + 1 : l->run_dir);
    name = esc;
    int64_t n = l->n_hist;
    double *buf = calloc((size_t)(n > 0 ? n : 1) * 6 + (size_t)l->s_loss.n + 1, sizeof *buf);
    if (!buf) {
        fclose(f);
        return em_error(EM_ERR_OOM, "learner: out of memory");
    }
    double *ex = buf, *tl = buf + n, *vl = buf + 2 * n, *ta = buf + 3 * n, *va = buf + 4 * n,
           *lr = buf + 5 * n, *sx = buf + 6 * n;
    for (int64_t e = 0; e < n; e++) {
        const double *r = l->hist + e * TC_COUNT;
        ex[e] = r[TC_EPOCH];
        tl[e] = r[TC_LOSS];
        vl[e] = r[TC_VAL_LOSS];
        ta[e] = r[TC_ACC];
        va[e] = r[TC_VAL_ACC];
        lr[e] = r[TC_LR];
    }
    /* per-step training loss on the epoch axis: step i of this session's series */
    int64_t first_epoch = n > 0 ? (int64_t)ex[0] - 1 : 0;
    double per = l->s_loss.n > 0 && n > 0 ? (double)(n - first_epoch) / (double)l->s_loss.n : 1;
    for (int64_t i = 0; i < l->s_loss.n; i++) sx[i] = (double)first_epoch + (double)(i + 1) * per;
    fprintf(f,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            "<title>Ember run %s</title>\n<style>body{font-family:sans-serif;margin:2em;"
            "color:#222}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
            "padding:3px 8px;text-align:right}svg{margin:8px 8px 0 0}</style>\n"
            "</head><body>\n<h1>Training run %s</h1>\n",
            name, name);
    tr_fmt(v, sizeof v, l->best, false);
    fprintf(f,
            "<p>Ended: %s. Epochs: %lld of %lld; optimizer steps: %lld; time: %.1f s. "
            "Best %s: %s (epoch %lld).</p>\n",
            reason_text(l->reason), (long long)n, (long long)l->cfg.epochs, (long long)l->steps,
            l->elapsed_prev, l->monitor, v, (long long)l->best_epoch + 1);
    svg_line loss[3] = {{"train loss (steps)", "#1f77b4", sx, l->s_loss.v, l->s_loss.n, true},
                        {"train loss", "#1f77b4", ex, tl, n, false},
                        {"validation loss", "#d62728", ex, vl, n, false}};
    svg_chart(f, "Loss", "epoch", loss, 3);
    svg_line acc[2] = {{"train accuracy", "#1f77b4", ex, ta, n, false},
                       {"validation accuracy", "#d62728", ex, va, n, false}};
    svg_chart(f, "Accuracy", "epoch", acc, 2);
    svg_line lrl[1] = {{"learning rate", "#2ca02c", ex, lr, n, false}};
    svg_chart(f, "Learning rate", "epoch", lrl, 1);
    fprintf(f, "<h2>Epochs</h2>\n<table><tr>");
    for (int i = 0; i < N_TABLE; i++)
        if (col_used(l, table_cols[i])) fprintf(f, "<th>%s</th>", tr_col_names[table_cols[i]]);
    fprintf(f, "</tr>\n");
    for (int64_t e = 0; e < n; e++) {
        fprintf(f, "<tr>");
        for (int i = 0; i < N_TABLE; i++) {
            if (!col_used(l, table_cols[i])) continue;
            tr_fmt(v, sizeof v, l->hist[e * TC_COUNT + table_cols[i]], false);
            fprintf(f, "<td>%s</td>", v);
        }
        fprintf(f, "</tr>\n");
    }
    fprintf(f, "</table>\n</body></html>\n");
    free(buf);
    if (fclose(f) != 0) return em_error(EM_ERR_IO, "learner: cannot write '%s'", path);
    return EM_OK;
}
