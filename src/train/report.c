/* report.html: a self-contained page (no scripts, no external files) describing the run, with
 * its curves as inline SVG plotted against the optimizer step (epochs on a second axis), drawn
 * from the whole run's metrics.jsonl so that resumed runs show every session. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_impl.h"

/* Points kept per plotted series: longer ones are averaged over consecutive runs of points. */
#define MAX_POINTS 1000

static void html(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* ---- axes ----------------------------------------------------------------------------------- */

double tr_nice_step(double range, int target)
{
    if (!(range > 0)) return 1;
    double raw = range / target, mag = pow(10, floor(log10(raw))), r = raw / mag;
    return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * mag;
}

void tr_tick_label(char *buf, size_t cap, double v, double step)
{
    if (fabs(v) < step * 1e-9) v = 0;
    int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (fabs(v) >= 1e6 || dec > 6)
        snprintf(buf, cap, "%g", v);
    else
        snprintf(buf, cap, "%.*f", dec, v);
}

/* ---- series --------------------------------------------------------------------------------- */

typedef struct series {
    double *x, *y;
    int64_t n;
} series;

static void series_free(series *s)
{
    free(s->x);
    free(s->y);
    memset(s, 0, sizeof *s);
}

static bool series_alloc(series *s, int64_t n)
{
    s->x = malloc((size_t)(n > 0 ? n : 1) * sizeof *s->x);
    s->y = malloc((size_t)(n > 0 ? n : 1) * sizeof *s->y);
    s->n = 0;
    return s->x && s->y;
}

/* Column `col` of the step table averaged per optimizer step (accumulated micro-batches share a
 * step): one point per step with a value. */
static bool per_step(const tr_table *t, int cs, int col, series *out)
{
    if (!series_alloc(out, t->n_rows)) return false;
    if (cs < 0 || col < 0) return true;
    for (int64_t r = 0; r < t->n_rows;) {
        double x = t->cols[cs][r], sum = 0;
        int64_t k = 0, e = r;
        for (; e < t->n_rows && t->cols[cs][e] == x; e++)
            if (!isnan(t->cols[col][e])) {
                sum += t->cols[col][e];
                k++;
            }
        if (k > 0 && !isnan(x)) {
            out->x[out->n] = x;
            out->y[out->n++] = sum / (double)k;
        }
        r = e > r ? e : r + 1;
    }
    return true;
}

/* Mean of the last `w` points at every point (w: about a fiftieth of the run). */
static bool smooth(const series *in, series *out, int64_t *w_out)
{
    int64_t w = in->n / 50 > 1 ? in->n / 50 : 1;
    *w_out = w;
    if (!series_alloc(out, in->n)) return false;
    double sum = 0;
    for (int64_t i = 0; i < in->n; i++) {
        sum += in->y[i];
        if (i >= w) sum -= in->y[i - w];
        out->x[i] = in->x[i];
        out->y[i] = sum / (double)(i >= w ? w : i + 1);
    }
    out->n = in->n;
    return true;
}

/* Averages consecutive points so that at most MAX_POINTS remain (in place). */
static void thin(series *s)
{
    if (s->n <= MAX_POINTS) return;
    int64_t n = 0;
    for (int64_t b = 0; b < MAX_POINTS; b++) {
        int64_t lo = b * s->n / MAX_POINTS, hi = (b + 1) * s->n / MAX_POINTS;
        double sx = 0, sy = 0;
        for (int64_t i = lo; i < hi; i++) {
            sx += s->x[i];
            sy += s->y[i];
        }
        s->x[n] = sx / (double)(hi - lo);
        s->y[n++] = sy / (double)(hi - lo);
    }
    s->n = n;
}

/* ---- charts --------------------------------------------------------------------------------- */

typedef enum line_style { FAINT, SOLID, EPOCHS } line_style;

typedef struct chart_line {
    const char *label, *color;
    const series *s;
    line_style style;
} chart_line;

typedef struct chart_ctx {
    const double *epoch_end; /* optimizer steps at the end of each finished epoch */
    int64_t n_epochs;
    double x_max; /* last step of the run */
} chart_ctx;

static void svg_chart(FILE *f, const char *title, const char *id, const chart_line *lines,
                      int n_lines, const chart_ctx *cx)
{
    const double W = 640, L = 64, R = 18, B = 46;
    /* legend entries (series with points) in rows under the title */
    double lx[16], ly[16], x = L, rows = 1;
    for (int k = 0; k < n_lines && k < 16; k++) {
        double w = 30 + 6.2 * (double)strlen(lines[k].label);
        if (lines[k].s->n == 0) continue;
        if (x > L && x + w > W - R) {
            x = L;
            rows++;
        }
        lx[k] = x;
        ly[k] = 20 + 14 * rows;
        x += w;
    }
    const double T = 50 + 14 * rows, H = T + 220 + B;
    const double pw = W - L - R, ph = H - T - B;
    double y0 = INFINITY, y1 = -INFINITY, xm = cx->x_max;
    for (int k = 0; k < n_lines; k++)
        for (int64_t i = 0; i < lines[k].s->n; i++) {
            double y = lines[k].s->y[i];
            if (isnan(y) || isinf(y)) continue;
            y0 = fmin(y0, y);
            y1 = fmax(y1, y);
            xm = fmax(xm, lines[k].s->x[i]);
        }
    fprintf(f,
            "<figure><svg class=\"chart\" id=\"%s\" xmlns=\"http://www.w3.org/2000/svg\" "
            "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"11\" "
            "role=\"img\" aria-label=\"",
            id, W, H);
    html(f, title);
    fprintf(f, "\">\n<rect width=\"%.0f\" height=\"%.0f\" fill=\"#fff\"/>\n", W, H);
    fprintf(f, "<text x=\"%.0f\" y=\"18\" font-size=\"14\" font-weight=\"bold\">", L);
    html(f, title);
    fprintf(f, "</text>\n");
    for (int k = 0; k < n_lines && k < 16; k++) {
        const chart_line *ln = &lines[k];
        if (ln->s->n == 0) continue;
        fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"14\" height=\"%s\" fill=\"%s\"%s/>", lx[k],
                ly[k] - 5, ln->style == FAINT ? "2" : "3", ln->color,
                ln->style == FAINT ? " fill-opacity=\"0.4\"" : "");
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">", lx[k] + 18, ly[k]);
        html(f, ln->label);
        fprintf(f, "</text>\n");
    }
    if (!(y1 >= y0)) {
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">no data</text>\n</svg></figure>\n", L, T + ph / 2);
        return;
    }
    if (!(xm > 0)) xm = 1;
    if (y1 == y0) {
        double pad = y0 != 0 ? 0.1 * fabs(y0) : 0.5;
        y1 += pad;
        y0 -= pad;
    }
    double ys = tr_nice_step(y1 - y0, 5);
    y0 = floor(y0 / ys + 1e-9) * ys;
    y1 = ceil(y1 / ys - 1e-9) * ys;
    double xs = tr_nice_step(xm, 6);
    double x1 = ceil(xm / xs - 1e-9) * xs;
#define PX(v) (L + pw * (v) / x1)
#define PY(v) (T + ph - ph * ((v)-y0) / (y1 - y0))
    fprintf(f,
            "<g class=\"axes\" data-x0=\"0\" data-x1=\"%.9g\" data-px0=\"%.1f\" "
            "data-px1=\"%.1f\">\n",
            x1, L, L + pw);
    char lab[48];
    for (int t = 0; t <= 40; t++) {
        double v = y0 + ys * t;
        if (v > y1 + ys * 1e-6) break;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>", L,
                PY(v), L + pw, PY(v));
        tr_tick_label(lab, sizeof lab, v, ys);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", L - 5, PY(v) + 4,
                lab);
    }
    for (int t = 0; t <= 40; t++) {
        double v = xs * t;
        if (v > x1 + xs * 1e-6) break;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>", PX(v),
                T + ph, PX(v), T + ph + 4);
        tr_tick_label(lab, sizeof lab, v, xs);
        fprintf(f, "<text class=\"xtick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                PX(v), T + ph + 16, lab);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">optimizer step</text>\n",
            L + pw / 2, H - 8);
    /* the epoch axis on top: a tick where each epoch ended, labels thinned to fit */
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">epoch</text>\n", L - 5, T - 6);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>\n", L, T,
            L + pw, T);
    double min_gap = 26, last_px = -1e9;
    double avg = cx->n_epochs > 0 ? (PX(cx->epoch_end[cx->n_epochs - 1]) - L) / cx->n_epochs : pw;
    int64_t every = 1; /* label every 1st, 2nd, 5th, 10th, 20th ... epoch */
    for (int64_t m = 1; avg * (double)every < min_gap && every < cx->n_epochs;)
        every = (every == m) ? 2 * m : (every == 2 * m) ? 5 * m : (m *= 10);
    for (int64_t e = 0; e < cx->n_epochs; e++) {
        double px = PX(cx->epoch_end[e]);
        fprintf(f,
                "<line class=\"epoch\" data-epoch=\"%lld\" data-step=\"%.0f\" x1=\"%.1f\" "
                "y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#bbb\" stroke-dasharray=\"3,3\"/>",
                (long long)e + 1, cx->epoch_end[e], px, T, px, T + ph);
        if ((e + 1) % every == 0 && px - last_px >= min_gap) {
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%lld</text>", px, T - 6,
                    (long long)e + 1);
            last_px = px;
        }
        fputc('\n', f);
    }
    fprintf(f,
            "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
            "stroke=\"#888\"/>\n</g>\n",
            L, T, pw, ph);
    for (int k = 0; k < n_lines; k++) {
        const chart_line *ln = &lines[k];
        const series *s = ln->s;
        bool open = false;
        for (int64_t i = 0; i < s->n; i++) {
            if (isnan(s->y[i]) || isinf(s->y[i])) {
                if (open) fprintf(f, "\"/>\n");
                open = false;
                continue;
            }
            if (!open) {
                fprintf(f, "<polyline class=\"series\" data-name=\"");
                html(f, ln->label);
                fprintf(f, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s", ln->color,
                        ln->style == FAINT ? "1" : "2",
                        ln->style == FAINT ? " stroke-opacity=\"0.35\"" : "");
                if (ln->style != EPOCHS) {
                    /* the optimizer steps of the points, for readers of the page */
                    fprintf(f, " data-x=\"");
                    for (int64_t j = i; j < s->n && !isnan(s->y[j]) && !isinf(s->y[j]); j++)
                        fprintf(f, "%s%.9g", j > i ? " " : "", s->x[j]);
                    fputc('"', f);
                }
                fprintf(f, " points=\"");
                open = true;
            }
            fprintf(f, "%.1f,%.1f ", PX(s->x[i]), PY(s->y[i]));
        }
        if (open) fprintf(f, "\"/>\n");
        if (ln->style == EPOCHS && s->n <= 100)
            for (int64_t i = 0; i < s->n; i++) {
                if (isnan(s->y[i]) || isinf(s->y[i])) continue;
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>",
                        PX(s->x[i]), PY(s->y[i]), ln->color);
                html(f, ln->label);
                fprintf(f, ", epoch %lld: %.6g</title></circle>\n", (long long)i + 1, s->y[i]);
            }
    }
#undef PX
#undef PY
    fprintf(f, "</svg></figure>\n");
}

/* ---- the page ------------------------------------------------------------------------------- */

static const char *const css =
    "body{font-family:sans-serif;margin:1.5em auto;max-width:1400px;padding:0 1em;color:#222}"
    "h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.5em}"
    ".charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,460px),1fr));"
    "gap:12px}figure{margin:0}svg.chart{width:100%;height:auto;display:block;"
    "border:1px solid #ddd}"
    ".info{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,460px),1fr));"
    "gap:12px}"
    ".box{overflow:auto;max-height:28em;border:1px solid #ddd}"
    "table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #e4e4e4;"
    "padding:3px 8px;text-align:right;white-space:nowrap}"
    "th{position:sticky;top:0;background:#f4f4f4}"
    "table.kv td,table.kv th{text-align:left;white-space:normal}"
    "table.kv th{position:static;background:none;font-weight:600;width:12em}"
    "code,pre{font-size:12px}pre{margin:0;padding:8px}";

static void kv_table(FILE *f, const tr_kv *kv, int n)
{
    fprintf(f, "<div class=\"box\"><table class=\"kv\">\n");
    for (int i = 0; i < n; i++) {
        fprintf(f, "<tr><th>");
        html(f, kv[i].key);
        fprintf(f, "</th><td>");
        html(f, kv[i].value);
        fprintf(f, "</td></tr>\n");
    }
    fprintf(f, "</table></div>\n");
}

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"};

em_status tr_write_report(em_learner *l)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/metrics.jsonl", l->run_dir);
    tr_table t;
    em_status st = tr_table_read(&t, path, "epoch", "batch");
    if (st != EM_OK) return st;
    snprintf(path, sizeof path, "%s/report.html", l->run_dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        tr_table_free(&t);
        return em_error(EM_ERR_IO, "learner: cannot write '%s': %s", path, strerror(errno));
    }
    int64_t n = l->n_hist;
    /* epoch series at the step where each epoch ended */
    enum { E_LOSS, E_VLOSS, E_ACC, E_VACC, E_N };
    static const int ecols[E_N] = {TC_LOSS, TC_VAL_LOSS, TC_ACC, TC_VAL_ACC};
    series es[E_N + TR_MAX_SCALARS], raw[3 + TR_MAX_SCALARS], sm[2];
    memset(es, 0, sizeof es);
    memset(raw, 0, sizeof raw);
    memset(sm, 0, sizeof sm);
    double *ends = malloc((size_t)(n > 0 ? n : 1) * sizeof *ends);
    bool ok = ends != NULL;
    for (int i = 0; ok && i < E_N + l->n_scalars; i++) {
        ok = series_alloc(&es[i], n);
        for (int64_t e = 0; ok && e < n; e++) {
            es[i].x[e] = l->hist[e * TC_COUNT + TC_STEPS];
            es[i].y[e] = i < E_N ? l->hist[e * TC_COUNT + ecols[i]]
                                 : l->xhist[e * TR_MAX_SCALARS + (i - E_N)];
        }
        if (ok) es[i].n = n;
    }
    for (int64_t e = 0; ok && e < n; e++) ends[e] = l->hist[e * TC_COUNT + TC_STEPS];
    /* per-step series from the whole run's metrics.jsonl */
    int cs = tr_table_col(&t, "step");
    static const char *const step_cols[3] = {"loss", "accuracy", "lr"};
    for (int i = 0; ok && i < 3 + l->n_scalars; i++)
        ok = per_step(&t, cs, tr_table_col(&t, i < 3 ? step_cols[i] : l->scalars[i - 3].name),
                      &raw[i]);
    int64_t w[2] = {1, 1};
    for (int i = 0; ok && i < 2; i++) ok = smooth(&raw[i], &sm[i], &w[i]);
    for (int i = 0; ok && i < 3 + l->n_scalars; i++) thin(&raw[i]);
    for (int i = 0; ok && i < 2; i++) thin(&sm[i]);
    if (!ok) {
        st = em_error(EM_ERR_OOM, "learner: out of memory writing '%s'", path);
        goto done;
    }
    chart_ctx cx = {ends, n, l->steps};

    const char *name = strrchr(l->run_dir, '/');
    name = name ? name + 1 : l->run_dir;
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
               "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n"
               "<title>Ember run ");
    html(f, name);
    fprintf(f, "</title>\n<style>%s</style>\n</head><body>\n<h1>Training run ", css);
    html(f, name);
    char v[40];
    tr_fmt(v, sizeof v, l->best, false);
    fprintf(f,
            "</h1>\n<p>Ended: %s. Epochs: %lld of %lld; optimizer steps: %lld; time: %.1f s. "
            "Best ",
            tr_reason_text(l->reason), (long long)n, (long long)l->cfg.epochs, (long long)l->steps,
            l->elapsed_prev);
    html(f, l->monitor);
    fprintf(f, ": %s (epoch %lld).", v, (long long)l->best_epoch + 1);
    if (l->status[0]) {
        fprintf(f, " ");
        html(f, l->status);
        fprintf(f, ".");
    }
    fprintf(f, "</p>\n");

    fprintf(f, "<div class=\"charts\">\n");
    char lab[2][64];
    snprintf(lab[0], sizeof lab[0], "train loss, mean of %lld steps", (long long)w[0]);
    snprintf(lab[1], sizeof lab[1], "train accuracy, mean of %lld steps", (long long)w[1]);
    /* a short run's per-step line is its own mean of 1 step: drawn once, solid */
    for (int i = 0; i < 2; i++)
        if (w[i] == 1) sm[i].n = 0;
    chart_line loss[4] = {{"train loss per step", palette[0], &raw[0], w[0] > 1 ? FAINT : SOLID},
                          {lab[0], palette[0], &sm[0], SOLID},
                          {"train loss per epoch", palette[4], &es[E_LOSS], EPOCHS},
                          {"validation loss", palette[1], &es[E_VLOSS], EPOCHS}};
    svg_chart(f, "Loss", "chart-loss", loss, 4, &cx);
    chart_line acc[4] = {{"train accuracy per step", palette[0], &raw[1], w[1] > 1 ? FAINT : SOLID},
                         {lab[1], palette[0], &sm[1], SOLID},
                         {"train accuracy per epoch", palette[4], &es[E_ACC], EPOCHS},
                         {"validation accuracy", palette[1], &es[E_VACC], EPOCHS}};
    if (raw[1].n > 0 || tr_col_used(l, TC_VAL_ACC))
        svg_chart(f, "Accuracy", "chart-accuracy", acc, 4, &cx);
    chart_line lr[1] = {{"learning rate", palette[2], &raw[2], SOLID}};
    svg_chart(f, "Learning rate", "chart-lr", lr, 1, &cx);
    for (int k = 0; k < l->n_scalars; k++) {
        chart_line cl[2] = {{"per step", palette[3], &raw[3 + k], FAINT},
                            {"per epoch", palette[3], &es[E_N + k], EPOCHS}};
        char id[96];
        snprintf(id, sizeof id, "chart-scalar-%d", k);
        svg_chart(f, l->scalars[k].name, id, cl, 2, &cx);
    }
    fprintf(f, "</div>\n");

    fprintf(f, "<h2>Epochs</h2>\n<div class=\"box\"><table><thead><tr>");
    for (int i = 0; i < tr_n_table_cols; i++)
        if (tr_col_used(l, tr_table_cols[i]))
            fprintf(f, "<th>%s</th>", tr_col_names[tr_table_cols[i]]);
    for (int k = 0; k < l->n_scalars; k++)
        if (tr_xcol_used(l, k)) {
            fprintf(f, "<th>");
            html(f, l->scalars[k].name);
            fprintf(f, "</th>");
        }
    fprintf(f, "</tr></thead><tbody>\n");
    for (int64_t e = 0; e < n; e++) {
        fprintf(f, "<tr>");
        for (int i = 0; i < tr_n_table_cols; i++) {
            if (!tr_col_used(l, tr_table_cols[i])) continue;
            tr_fmt(v, sizeof v, l->hist[e * TC_COUNT + tr_table_cols[i]], false);
            fprintf(f, "<td>%s</td>", v);
        }
        for (int k = 0; k < l->n_scalars; k++) {
            if (!tr_xcol_used(l, k)) continue;
            tr_fmt(v, sizeof v, l->xhist[e * TR_MAX_SCALARS + k], false);
            fprintf(f, "<td>%s</td>", v);
        }
        fprintf(f, "</tr>\n");
    }
    fprintf(f, "</tbody></table></div>\n");
    if (n == 0) fprintf(f, "<p>No epoch finished.</p>\n");

    tr_kv kvs[48];
    fprintf(f, "<div class=\"info\"><div><h2>Run</h2>\n");
    kv_table(f, kvs, tr_run_facts(l, kvs, 48));
    fprintf(f, "</div><div><h2>Hyperparameters</h2>\n");
    kv_table(f, kvs, tr_hparams(l, kvs, 48));
    fprintf(f, "</div></div>\n<h2>Sessions</h2>\n<div class=\"box\"><table class=\"kv\">"
               "<thead><tr><th>started</th><th>from step</th><th>command</th></tr></thead>\n");
    tr_session ss[16];
    int ns = tr_sessions(l, ss, 16);
    for (int i = 0; i < ns; i++) {
        fprintf(f, "<tr><td>");
        html(f, ss[i].when);
        fprintf(f, "</td><td>%lld</td><td><code>", ss[i].step);
        html(f, ss[i].command);
        fprintf(f, "</code></td></tr>\n");
    }
    fprintf(f, "</table></div>\n");
    uint64_t mark = em_error_mark();
    char *model = em_module_summary(l->m);
    if (model) {
        fprintf(f, "<h2>Model</h2>\n<div class=\"box\"><pre>");
        html(f, model);
        fprintf(f, "</pre></div>\n");
        em_free(model);
    } else {
        em_error_forget(mark); /* a report without the model's summary */
    }
    fprintf(f, "</body></html>\n");
done:
    for (int i = 0; i < E_N + TR_MAX_SCALARS; i++) series_free(&es[i]);
    for (int i = 0; i < 3 + TR_MAX_SCALARS; i++) series_free(&raw[i]);
    for (int i = 0; i < 2; i++) series_free(&sm[i]);
    free(ends);
    tr_table_free(&t);
    if (fclose(f) != 0 && st == EM_OK) st = em_error(EM_ERR_IO, "learner: cannot write '%s'", path);
    return st;
}
