/* The learner's run records: report.html plotted by optimizer step over every session of an
 * interrupted and resumed run (also one that left rows past its checkpoint), metrics.csv and
 * epochs.csv, custom scalars, summary.md's description of the run, and the terminal output
 * (plurals, result lines left in the scrollback when the dashboard closes, braille plots). */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <locale.h>
#include <unistd.h>

#include "learner_fixture.h"
#include "train/train_impl.h"

/* The element of `html` that opens with `open` and carries attribute text `attr` (both must
 * appear in one tag); returns the start of that tag or NULL. */
static const char *find_tag(const char *html, const char *open, const char *attr)
{
    for (const char *p = strstr(html, open); p; p = strstr(p + 1, open)) {
        const char *end = strchr(p, '>');
        const char *a = strstr(p, attr);
        if (end && a && a < end) return p;
    }
    return NULL;
}

/* Numbers of attribute `name` of the tag at `tag` (separated by spaces or commas); returns how
 * many were read into v (at most cap). */
static int attr_numbers(const char *tag, const char *name, double *v, int cap)
{
    char key[64];
    snprintf(key, sizeof key, " %s=\"", name);
    const char *end = strchr(tag, '>');
    const char *p = strstr(tag, key);
    if (!p || (end && p > end)) return 0;
    p += strlen(key);
    int n = 0;
    while (*p && *p != '"' && n < cap) {
        char *e;
        double x = strtod(p, &e);
        if (e == p) break;
        v[n++] = x;
        p = e;
        while (*p == ' ' || *p == ',') p++;
    }
    return n;
}

/* The chart <svg> with this id, as its own string (malloc'd), or NULL. */
static char *chart(const char *html, const char *id)
{
    char key[64];
    snprintf(key, sizeof key, "id=\"%s\"", id);
    const char *a = find_tag(html, "<svg", key);
    const char *b = a ? strstr(a, "</svg>") : NULL;
    if (!b) return NULL;
    size_t n = (size_t)(b - a);
    char *s = malloc(n + 1);
    memcpy(s, a, n);
    s[n] = 0;
    return s;
}

/* Checks a per-step polyline of a chart: its data-x are exactly the steps 1..steps, and its
 * points' x coordinates rise monotonically and sit where the axis puts those steps. */
static void check_step_line(const char *svg, const char *chart_id, const char *name, int steps)
{
    char attr[96];
    snprintf(attr, sizeof attr, "data-name=\"%s\"", name);
    const char *pl = svg ? find_tag(svg, "<polyline", attr) : NULL;
    CHECK(pl != NULL, "%s: a polyline \"%s\"", chart_id, name);
    if (!pl) return;
    double xs[512], pts[1024], ax[2], px[2];
    int nx = attr_numbers(pl, "data-x", xs, 512);
    int np = attr_numbers(pl, "points", pts, 1024);
    const char *axes = find_tag(svg, "<g", "class=\"axes\"");
    CHECK(axes && attr_numbers(axes, "data-x1", ax + 1, 1) == 1 &&
              attr_numbers(axes, "data-px0", px, 1) == 1 &&
              attr_numbers(axes, "data-px1", px + 1, 1) == 1,
          "%s: axis attributes", chart_id);
    CHECK(nx == steps && np == 2 * steps, "%s \"%s\": %d steps and %d points for %d steps",
          chart_id, name, nx, np / 2, steps);
    bool exact = nx == steps, rising = true, placed = true;
    for (int i = 0; i < nx && i < np / 2; i++) {
        exact = exact && xs[i] == i + 1;
        if (i > 0) rising = rising && pts[2 * i] > pts[2 * i - 2];
        double want = px[0] + (px[1] - px[0]) * xs[i] / ax[1];
        placed = placed && fabs(pts[2 * i] - want) < 0.06;
    }
    CHECK(exact, "%s \"%s\": data-x is 1..%d", chart_id, name, steps);
    CHECK(rising, "%s \"%s\": x coordinates rise", chart_id, name);
    CHECK(placed, "%s \"%s\": points sit at their steps on the axis", chart_id, name);
}

/* Epoch axis: a dashed line at the step where each epoch ended. */
static void check_epoch_axis(const char *svg, const char *chart_id, const double *ends, int n)
{
    int found = 0;
    for (const char *p = svg ? strstr(svg, "class=\"epoch\"") : NULL; p;
         p = strstr(p + 1, "class=\"epoch\"")) {
        double e, s;
        const char *tag = p;
        while (tag > svg && *tag != '<') tag--;
        if (attr_numbers(tag, "data-epoch", &e, 1) == 1 && attr_numbers(tag, "data-step", &s, 1) &&
            e >= 1 && e <= n && s == ends[(int)e - 1])
            found++;
    }
    CHECK(found == n, "%s: %d epoch marks at their steps (found %d)", chart_id, n, found);
}

static int count_lines(const char *text)
{
    int n = 0;
    for (const char *p = text; p && *p; p++) n += *p == '\n';
    return n;
}

/* A run of 3 epochs of 8 steps stopped by SIGINT in epoch 2 (after step 12) and resumed; with
 * `stale`, the first session also left rows past its checkpoint, as a process killed after
 * checkpointing does. The report plots all 24 steps once, in order. */
static void test_report_resumed(bool stale)
{
    const char *name = stale ? "stale" : "resumed";
    em_learner_cfg base = {
        .epochs = 3, .train_batches = N / BATCH, .seed = 5, .quiet = true, .name = name};
    session a = {.o = {1, 3, false, false, true}, .cfg = base};
    run_session(&a);
    CHECK(a.st == EM_OK && a.reason == EM_STOP_INTERRUPT, "interrupted: %s", em_last_error());
    char p[256];
    if (stale) {
        snprintf(p, sizeof p, "%s/%s/metrics.jsonl", root, name);
        FILE *f = fopen(p, "a");
        for (int b = 4; b < 7; b++)
            fprintf(f,
                    "{\"epoch\":2,\"batch\":%d,\"step\":%d,\"loss\":99,\"accuracy\":0,\"lr\":1,"
                    "\"items_per_sec\":null,\"time_s\":1,\"custom\":99}\n",
                    b, 9 + b);
        fputs("{\"epoch\":2,\"batch\":7,\"st", f); /* torn by the kill */
        fclose(f);
    }
    session b = {.o = {-1, -1, false, false, true}, .cfg = base};
    b.cfg.resume = true;
    run_session(&b);
    CHECK(b.st == EM_OK && b.reason == EM_STOP_DONE && b.epochs_done == 3, "resumed: %s",
          em_last_error());

    snprintf(p, sizeof p, "%s/%s/report.html", root, name);
    char *html = read_file(p, NULL);
    CHECK(html != NULL, "report.html written");
    if (!html) return;
    const double ends[3] = {8, 16, 24};
    char *loss = chart(html, "chart-loss");
    char *acc = chart(html, "chart-accuracy");
    char *lr = chart(html, "chart-lr");
    check_step_line(loss, "chart-loss", "train loss per step", 24);
    check_step_line(acc, "chart-accuracy", "train accuracy per step", 24);
    check_step_line(lr, "chart-lr", "learning rate", 24);
    check_epoch_axis(loss, "chart-loss", ends, 3);
    check_epoch_axis(lr, "chart-lr", ends, 3);
    /* the epoch series sit at the epochs' last steps */
    const char *ep = loss ? find_tag(loss, "<polyline", "data-name=\"validation loss\"") : NULL;
    double pts[8], ax1 = 0, px[2] = {0, 0};
    const char *axes = loss ? find_tag(loss, "<g", "class=\"axes\"") : NULL;
    if (axes) {
        attr_numbers(axes, "data-x1", &ax1, 1);
        attr_numbers(axes, "data-px0", px, 1);
        attr_numbers(axes, "data-px1", px + 1, 1);
    }
    CHECK(ep && attr_numbers(ep, "points", pts, 8) == 6 && ax1 > 0 &&
              fabs(pts[4] - (px[0] + (px[1] - px[0]) * 24 / ax1)) < 0.06,
          "validation loss: 3 points, the last at step 24");
    /* the stale rows (loss 99) are gone: the loss axis stays near the real losses */
    CHECK(!stale || (loss && !strstr(loss, ">99<") && !strstr(loss, ">100<")),
          "stale rows dropped from the plot");
    /* the axes' ticks are round numbers */
    double ticks[16];
    int nt = 0;
    for (const char *t = loss ? strstr(loss, "class=\"xtick\"") : NULL; t && nt < 16;
         t = strstr(t + 1, "class=\"xtick\"")) {
        const char *gt = strchr(t, '>');
        ticks[nt++] = gt ? atof(gt + 1) : -1;
    }
    CHECK(nt >= 3 && ticks[0] == 0 && ticks[1] == 5 && ticks[nt - 1] == 25,
          "step ticks 0, 5, ... 25 (got %d ticks, %g %g ... %g)", nt, nt ? ticks[0] : -1,
          nt > 1 ? ticks[1] : -1, nt ? ticks[nt - 1] : -1);
    CHECK(strstr(html, "id=\"chart-scalar-0\"") && strstr(html, "id=\"chart-scalar-1\""),
          "charts of the custom scalars");
    CHECK(strstr(html, "<h2>Sessions</h2>") && strstr(html, "test_run_records") &&
              strstr(html, "<h2>Model</h2>") && strstr(html, "<h2>Hyperparameters</h2>") &&
              strstr(html, "class=\"box\"") && strstr(html, "viewBox=") && !strstr(html, "<script"),
          "report.html: sessions with the command, model, hyperparameters, scrolling boxes, "
          "scalable charts, no script");
    free(loss);
    free(acc);
    free(lr);
    free(html);

    /* CSV copies of the whole run */
    snprintf(p, sizeof p, "%s/%s/metrics.csv", root, name);
    char *csv = read_file(p, NULL);
    CHECK(csv && strncmp(csv, "epoch,batch,step,loss,accuracy,lr,items_per_sec,time_s,custom\n",
                         62) == 0,
          "metrics.csv header: %.80s", csv ? csv : "(missing)");
    CHECK(count_lines(csv) == 25, "metrics.csv: header and 24 rows (%d lines)", count_lines(csv));
    int rows_ok = 0;
    for (const char *line = csv ? strchr(csv, '\n') : NULL; line && line[1];
         line = strchr(line + 1, '\n')) {
        int e, bt, st;
        if (sscanf(line + 1, "%d,%d,%d,", &e, &bt, &st) == 3 && st == rows_ok + 1 &&
            bt == rows_ok % 8 && e == rows_ok / 8 + 1)
            rows_ok++;
    }
    CHECK(rows_ok == 24, "metrics.csv rows in order, steps 1..24 (%d)", rows_ok);
    free(csv);
    snprintf(p, sizeof p, "%s/%s/epochs.csv", root, name);
    csv = read_file(p, NULL);
    CHECK(csv && strncmp(csv, "epoch,loss,accuracy,", 20) == 0 &&
              strstr(csv, ",custom,val_custom\n") && count_lines(csv) == 4,
          "epochs.csv: header with the custom scalars and 3 rows");
    free(csv);

    /* custom epoch values: the means of the steps' values, across the interruption */
    CHECK(b.custom[0] == 1.75 && b.custom[1] == 2.75 && b.custom[2] == 3.75,
          "custom epoch means %g %g %g (want 1.75 2.75 3.75)", b.custom[0], b.custom[1],
          b.custom[2]);
    CHECK(b.val_custom[0] == 2.5 && b.val_custom[2] == 2.5, "val_custom %g", b.val_custom[0]);

    snprintf(p, sizeof p, "%s/%s/summary.md", root, name);
    char *md = read_file(p, NULL);
    CHECK(md && strstr(md, "## Run") && strstr(md, "- Ember: ") && strstr(md, "(commit ") &&
              strstr(md, "- Host: ") && strstr(md, "- CPU: ") && strstr(md, "- Device: cpu") &&
              strstr(md, "- Seed: 5\n"),
          "summary.md: version, commit, host, device, seed");
    CHECK(md && strstr(md, "The run was resumed: 2 sessions.") && strstr(md, "test_run_records") &&
              strstr(md, "| 12 | `"),
          "summary.md: both sessions, the second from step 12, with the command line");
    CHECK(md && strstr(md, "## Hyperparameters") && strstr(md, "| optimizer | Adam (betas 0.9") &&
              strstr(md, "| learning rate | 0.05 (initial) |") && strstr(md, "| epochs | 3 |") &&
              strstr(md, "| data | spiral blobs |"),
          "summary.md: hyperparameters, the learner's and em_learner_log_param's");
    CHECK(md && strstr(md, "## Model\n\n```\n") && strstr(md, "Linear"), "summary.md: the model");
    CHECK(md && strstr(md, " custom | val_custom |") && strstr(md, " 1.75 | 2.5 |"),
          "summary.md: the custom scalars' columns");
    free(md);
}

static em_status one_step(const em_step_ctx *ctx, em_step_out *out)
{
    user *u = ctx->user;
    if (ctx->batch >= 2) {
        out->end = true;
        return EM_OK;
    }
    em_tensor *xb = em_narrow(X, 0, 0, BATCH);
    out->targets = em_narrow(Y, 0, 0, BATCH);
    out->outputs = em_forward(u->m, xb);
    out->loss = em_cross_entropy(out->outputs, out->targets, (em_ce_cfg){0});
    em_release(xb);
    return EM_OK;
}

static void test_scalar_errors(void)
{
    em_module *m = make_model();
    em_optim *o = em_sgd_new(m, (em_sgd_cfg){.lr = 0.1});
    user u = {m, {-1, -1, false, false, false}};
    em_learner *l = em_learner_new(
        m, o, NULL, (em_learner_cfg){.train_step = one_step, .user = &u, .no_run_dir = true});
    CHECK(em_learner_log_scalar(l, "x", 1) == EM_ERR_STATE, "log_scalar outside a step");
    CHECK_ERR(EM_ERR_STATE, "outside a training step");
    CHECK(em_learner_log_epoch_scalar(l, "x", 1) == EM_ERR_STATE, "epoch scalar outside fit");
    CHECK_ERR(EM_ERR_STATE, "while no fit runs");
    l->in_train_step = true; /* as inside a step */
    l->in_fit = true;
    CHECK(em_learner_log_scalar(l, "a b", 1) == EM_ERR_INVALID_ARG, "bad name");
    CHECK_ERR(EM_ERR_INVALID_ARG, "invalid name \"a b\"");
    CHECK(em_learner_log_scalar(l, "val_loss", 1) == EM_ERR_INVALID_ARG, "built-in name");
    CHECK_ERR(EM_ERR_INVALID_ARG, "built-in");
    CHECK(em_learner_log_scalar(l, "step", 1) == EM_ERR_INVALID_ARG, "a key of metrics.jsonl");
    CHECK_ERR(EM_ERR_INVALID_ARG, "built-in");
    CHECK(em_learner_log_epoch_scalar(l, "", 1) == EM_ERR_INVALID_ARG, "empty name");
    CHECK_ERR(EM_ERR_INVALID_ARG, "invalid name");
    char nm[16];
    for (int i = 0; i < TR_MAX_SCALARS; i++) {
        snprintf(nm, sizeof nm, "s%d", i);
        CHECK(em_learner_log_scalar(l, nm, i) == EM_OK, "scalar %d", i);
    }
    CHECK(em_learner_log_scalar(l, "one_more", 1) == EM_ERR_INVALID_ARG, "33rd name");
    CHECK_ERR(EM_ERR_INVALID_ARG, "more than 32");
    CHECK(em_learner_log_scalar(l, "s3", 2) == EM_OK, "a known name");
    l->in_train_step = false;
    l->in_fit = false;
    CHECK(em_learner_log_param(l, "batch", "8") == EM_OK &&
              em_learner_log_param(l, "batch", "16") == EM_OK && l->n_params == 1 &&
              strcmp(l->params[0].value, "16") == 0,
          "log_param replaces a value");
    CHECK(em_learner_log_param(l, "x", NULL) == EM_ERR_INVALID_ARG, "NULL value");
    CHECK_ERR(EM_ERR_INVALID_ARG, "NULL");
    em_learner_free(l);
    em_optim_free(o);
    em_module_free(m);
}

/* One epoch: "1 epoch" (not "1 epochs") in the log and the example's lines. */
static void test_plural(void)
{
    session s = {.o = {-1, -1, false, false, false}};
    s.cfg = (em_learner_cfg){.epochs = 1,
                             .train_batches = 2,
                             .name = "one",
                             .quiet = true,
                             .patience = 1,
                             .monitor = "loss"};
    run_session(&s);
    CHECK(s.st == EM_OK, "fit: %s", em_last_error());
    char p[256];
    snprintf(p, sizeof p, "%s/one/train.log", root);
    char *log = read_file(p, NULL);
    CHECK(log && strstr(log, "training 1 epoch,") && !strstr(log, "1 epochs"),
          "train.log says \"training 1 epoch\"");
    free(log);
}

/* Writes the dashboard to a file as if it were an xterm of 120 x 40, with a UTF-8 locale. */
static void test_dashboard_scrollback(void)
{
    em_config_set("dashboard", "on");
    setenv("TERM", "xterm", 1);
    setenv("COLUMNS", "120", 1);
    setenv("LINES", "40", 1);
    setenv("LC_ALL", "C.UTF-8", 1);
    char before[64];
    snprintf(before, sizeof before, "%s", setlocale(LC_CTYPE, NULL));
    FILE *out = tmpfile();
    session s = {.o = {-1, -1, false, false, true}};
    s.cfg = (em_learner_cfg){.epochs = 2, .train_batches = N / BATCH, .name = "dash", .out = out};
    run_session(&s);
    em_config_set("dashboard", "off");
    CHECK(s.st == EM_OK, "fit with the dashboard: %s", em_last_error());
    CHECK(strcmp(setlocale(LC_CTYPE, NULL), before) == 0, "LC_CTYPE restored (%s)",
          setlocale(LC_CTYPE, NULL));
    fflush(out);
    long len = ftell(out);
    rewind(out);
    char *text = calloc((size_t)len + 1, 1);
    size_t got = fread(text, 1, (size_t)len, out);
    fclose(out);
    text[got] = 0;
    /* after the screen is left (xterm's rmcup: ESC [ ? 1049 l), the result lines follow */
    const char *leave = NULL;
    for (const char *p = strstr(text, "\033[?1049l"); p; p = strstr(p + 1, "\033[?1049l"))
        leave = p;
    CHECK(leave != NULL, "the dashboard left the alternate screen");
    CHECK(leave && strstr(leave, "epoch 1/2 done: loss ") &&
              strstr(leave, "epoch 2/2 done: loss ") && strstr(leave, " custom "),
          "the epochs' result lines come after the dashboard closes");
    /* braille dots (U+2800..U+28FF: E2 A0..A3 xx in UTF-8) drew the plot */
    bool braille = false;
    for (size_t i = 0; i + 2 < got && !braille; i++)
        braille = (unsigned char)text[i] == 0xE2 && (unsigned char)text[i + 1] >= 0xA0 &&
                  (unsigned char)text[i + 1] <= 0xA3 && (unsigned char)text[i + 2] != 0x80;
    CHECK(braille, "the plot is drawn with braille characters");
    CHECK(strstr(text, "step") && strstr(text, "end of epoch") && strstr(text, "custom"),
          "axis label, legend and the custom scalar's row");
    free(text);
    unsetenv("LC_ALL");
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

int main(void)
{
    h_init();
    em_config_set("dashboard", "off");
    snprintf(root, sizeof root, "/tmp/ember_records_XXXXXX");
    if (!mkdtemp(root)) {
        printf("cannot create a temporary directory\n");
        return 1;
    }
    make_data();
    test_report_resumed(false);
    test_report_resumed(true);
    test_scalar_errors();
    test_plural();
    test_dashboard_scrollback();
    em_release(X);
    em_release(Y);
    if (!getenv("EMBER_KEEP_RUNS"))
        nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    else
        printf("run directories kept in %s\n", root);
    return h_finish();
}
