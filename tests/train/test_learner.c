/* The learner on a tiny separable problem with an in-memory batch callback: run directory files,
 * plain progress lines, early stopping, keep_last/keep_best, SIGINT and resume equivalence
 * (bit-exact parameters), errors. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "learner_fixture.h"

static int count_ckpts(const char *dir)
{
    char cmd[256];
    int n = 0;
    for (int step = 0; step < 2000; step++) {
        snprintf(cmd, sizeof cmd, "%s/step-%09d.safetensors", dir, step);
        n += exists(cmd);
    }
    return n;
}

static void test_run_dir(void)
{
    session s = {.o = {-1, -1, false, false, false}};
    FILE *out = tmpfile();
    s.cfg = (em_learner_cfg){.epochs = 3,
                             .train_batches = N / BATCH,
                             .name = "basic",
                             .out = out,
                             .log_every = 4,
                             .topk = 1};
    run_session(&s);
    CHECK(s.st == EM_OK, "fit: %s", em_last_error());
    CHECK_OK("fit");
    CHECK(s.reason == EM_STOP_DONE && s.epochs_done == 3, "reason %d epochs %lld", s.reason,
          (long long)s.epochs_done);
    CHECK(s.last_val_acc >= 0.9, "separable data learned: val accuracy %g", s.last_val_acc);
    char p[256];
    snprintf(p, sizeof p, "%s/basic/metrics.jsonl", root);
    CHECK(json_lines(p) == 3 * N / BATCH, "metrics.jsonl lines %d", json_lines(p));
    snprintf(p, sizeof p, "%s/basic/epochs.jsonl", root);
    CHECK(json_lines(p) == 3, "epochs.jsonl lines %d", json_lines(p));
    char *txt = read_file(p, NULL);
    CHECK(txt && strstr(txt, "\"val_accuracy\":") && strstr(txt, "\"f1_macro\":"),
          "epoch record fields");
    free(txt);
    snprintf(p, sizeof p, "%s/basic/summary.md", root);
    txt = read_file(p, NULL);
    CHECK(txt && strstr(txt, "# Training run basic") && strstr(txt, "| epoch |") &&
              strstr(txt, "Best val_loss") && strstr(txt, "all epochs ran") &&
              strstr(txt, "| val_accuracy |"),
          "summary.md content");
    free(txt);
    snprintf(p, sizeof p, "%s/basic/report.html", root);
    txt = read_file(p, NULL);
    CHECK(txt && strstr(txt, "<svg") && strstr(txt, "<polyline") && !strstr(txt, "<script"),
          "report.html has inline SVG and no script");
    free(txt);
    snprintf(p, sizeof p, "%s/basic/train.log", root);
    txt = read_file(p, NULL);
    CHECK(txt && strstr(txt, "epoch 3/3"), "train.log has the learner's messages");
    free(txt);
    snprintf(p, sizeof p, "%s/basic/checkpoints/latest", root);
    CHECK(exists(p), "latest checkpoint pointer");
    /* plain progress lines */
    fflush(out);
    rewind(out);
    char line[1024];
    int steps = 0, epochs = 0;
    while (fgets(line, sizeof line, out)) {
        if (strncmp(line, "epoch 2/3 batch 4/8 step ", 25) == 0) steps++;
        if (strncmp(line, "epoch ", 6) == 0 && strstr(line, "done: loss ") &&
            strstr(line, " val_accuracy ") && strstr(line, " lr "))
            epochs++;
    }
    fclose(out);
    CHECK(steps == 1, "one step line for epoch 2 batch 4 (got %d)", steps);
    CHECK(epochs == 3, "three epoch lines (got %d)", epochs);
}

static void test_early_stop_and_keep(void)
{
    /* min_delta so large that nothing improves after the first epoch */
    session s = {.o = {-1, -1, true, false, false}};
    s.cfg = (em_learner_cfg){.epochs = 10,
                             .name = "early",
                             .monitor = "loss",
                             .patience = 2,
                             .min_delta = 1e9,
                             .quiet = true};
    run_session(&s);
    CHECK(s.st == EM_OK, "fit: %s", em_last_error());
    CHECK(s.reason == EM_STOP_EARLY && s.epochs_done == 3, "early stop after 3 epochs (%d, %lld)",
          s.reason, (long long)s.epochs_done);
    char p[256];
    snprintf(p, sizeof p, "%s/early/summary.md", root);
    char *txt = read_file(p, NULL);
    CHECK(txt && strstr(txt, "early stopping"), "summary says early stopping");
    free(txt);

    session k = {.o = {-1, -1, false, false, false}};
    k.cfg = (em_learner_cfg){.epochs = 5,
                             .train_batches = N / BATCH,
                             .name = "keep",
                             .keep_last = 2,
                             .keep_best = true,
                             .monitor = "val_accuracy",
                             .quiet = true};
    run_session(&k);
    CHECK(k.st == EM_OK, "fit: %s", em_last_error());
    snprintf(p, sizeof p, "%s/keep/checkpoints", root);
    CHECK(count_ckpts(p) == 2, "keep_last 2: %d checkpoints", count_ckpts(p));
    snprintf(p, sizeof p, "%s/keep/checkpoints/step-%09d.safetensors", root, 5 * N / BATCH);
    CHECK(exists(p), "last checkpoint kept");
    snprintf(p, sizeof p, "%s/keep/checkpoints/best.safetensors", root);
    CHECK(exists(p), "best checkpoint");
    em_tensor_dict *d = em_safetensors_load(p, NULL);
    CHECK(d && em_tensor_dict_get(d, "model.0.weight") && em_tensor_dict_get(d, "optim.step"),
          "best checkpoint holds model and optimizer");
    CHECK(d && strcmp(em_tensor_dict_get_meta(d, "monitor"), "val_accuracy") == 0, "monitor");
    em_tensor_dict_free(d);
    CHECK(k.best >= 0.9, "best val accuracy %g", k.best);
}

static void test_resume(void)
{
    em_learner_cfg base = {
        .epochs = 4, .train_batches = N / BATCH, .grad_accum = 2, .seed = 99, .quiet = true};
    /* straight */
    session a = {.o = {-1, -1, false, false, false}, .cfg = base};
    a.cfg.name = "straight";
    run_session(&a);
    CHECK(a.st == EM_OK && a.reason == EM_STOP_DONE, "straight run: %s", em_last_error());

    /* SIGINT at epoch 2 batch 2: the accumulation window ends at batch 3, then it stops */
    session b = {.o = {1, 2, false, false, false}, .cfg = base};
    b.cfg.name = "resumed";
    run_session(&b);
    CHECK(b.st == EM_OK && b.reason == EM_STOP_INTERRUPT, "interrupted run (%d): %s", b.reason,
          em_last_error());
    char p[256];
    snprintf(p, sizeof p, "%s/resumed/checkpoints/step-%09d.safetensors", root, 4 + 2);
    CHECK(exists(p), "checkpoint saved on SIGINT at step 6");
    em_tensor_dict *d = em_safetensors_load(p, NULL);
    CHECK(d && strcmp(em_tensor_dict_get_meta(d, "batch"), "4") == 0 &&
              strcmp(em_tensor_dict_get_meta(d, "epoch"), "1") == 0,
          "position after the window: epoch 1 batch 4");
    em_tensor_dict_free(d);
    snprintf(p, sizeof p, "%s/resumed/summary.md", root);
    char *txt = read_file(p, NULL);
    CHECK(txt && strstr(txt, "interrupted"), "summary says interrupted");
    free(txt);
    CHECK(memcmp(a.p.v, b.p.v, sizeof(float) * (size_t)a.p.n) != 0, "interrupted run differs");

    /* resume mid-epoch to the end */
    session c = {.o = {-1, -1, false, false, false}, .cfg = base};
    c.cfg.name = "resumed";
    c.cfg.resume = true;
    c.cfg.seed = 12345; /* ignored on resume: the generator comes from the checkpoint */
    run_session(&c);
    CHECK(c.st == EM_OK && c.reason == EM_STOP_DONE && c.epochs_done == 4,
          "resumed run (%d, %lld): %s", c.reason, (long long)c.epochs_done, em_last_error());
    CHECK(c.p.n == a.p.n && memcmp(a.p.v, c.p.v, sizeof(float) * (size_t)a.p.n) == 0,
          "resumed parameters equal the straight run's bit for bit");
    CHECK(memcmp(&a.last_loss, &c.last_loss, sizeof(double)) == 0,
          "last epoch loss equal (%.17g vs %.17g)", a.last_loss, c.last_loss);
    snprintf(p, sizeof p, "%s/resumed/epochs.jsonl", root);
    CHECK(json_lines(p) == 4, "epochs.jsonl continues: %d lines", json_lines(p));

    /* resume at an epoch boundary with more epochs */
    session e1 = {.o = {-1, -1, false, false, false}, .cfg = base};
    e1.cfg.name = "boundary";
    e1.cfg.epochs = 2;
    run_session(&e1);
    session e2 = {.o = {-1, -1, false, false, false}, .cfg = base};
    e2.cfg.name = "boundary";
    e2.cfg.resume = true;
    run_session(&e2);
    CHECK(e2.st == EM_OK && e2.epochs_done == 4, "boundary resume: %s", em_last_error());
    CHECK(memcmp(a.p.v, e2.p.v, sizeof(float) * (size_t)a.p.n) == 0,
          "epoch-boundary resume equals the straight run");
}

static em_status never_ends(const em_step_ctx *ctx, em_step_out *out)
{
    (void)ctx;
    out->end = true;
    return EM_OK;
}

static void test_errors(void)
{
    em_module *m = make_model();
    em_optim *o = em_sgd_new(m, (em_sgd_cfg){.lr = 0.1});
    CHECK(em_learner_new(m, o, NULL, (em_learner_cfg){0}) == NULL, "no train_step");
    CHECK_ERR(EM_ERR_INVALID_ARG, "train_step");
    CHECK(em_learner_new(m, o, NULL, (em_learner_cfg){.train_step = train_step, .monitor = "x"}) ==
              NULL,
          "unknown monitor");
    CHECK_ERR(EM_ERR_INVALID_ARG, "unknown metric");
    em_learner *l = em_learner_new(
        m, o, NULL, (em_learner_cfg){.train_step = never_ends, .no_run_dir = true, .quiet = true});
    CHECK(em_learner_fit(l) == EM_ERR_STATE, "empty epoch");
    CHECK_ERR(EM_ERR_STATE, "no training batch");
    CHECK(em_learner_stop_reason(l) == EM_STOP_ERROR, "reason error");
    em_learner_free(l);
    em_optim_free(o);
    em_module_free(m);

    session s = {.o = {-1, -1, false, true, false}};
    s.cfg = (em_learner_cfg){.epochs = 2, .train_batches = 8, .name = "fail", .quiet = true};
    run_session(&s);
    CHECK(s.st == EM_ERR_STATE && s.reason == EM_STOP_ERROR, "step error propagates (%d)", s.st);
    CHECK_ERR(EM_ERR_STATE, "failing step");
    char p[256];
    snprintf(p, sizeof p, "%s/fail/summary.md", root);
    CHECK(exists(p), "summary written after an error");
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
    snprintf(root, sizeof root, "/tmp/ember_train_XXXXXX");
    if (!mkdtemp(root)) {
        printf("cannot create a temporary directory\n");
        return 1;
    }
    make_data();
    test_run_dir();
    test_early_stop_and_keep();
    test_resume();
    test_errors();
    em_release(X);
    em_release(Y);
    nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return h_finish();
}
