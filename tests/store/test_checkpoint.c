/* Checkpoints: training resumed from a checkpoint into fresh objects is bit-exact with training
 * straight through (Adam + cosine, SGD with Nesterov momentum + step decay, dropout and batch
 * norm drawing on the generator and buffers); every part and the metrics come back; a writer
 * SIGKILLed at random points always leaves the previous checkpoint loadable and whole. */
#include <dirent.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ember/optim.h>
#include <ember/store.h>

#include "harness.h"

static char tmpdir[256];

static const char *tmp_path(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static bool same_bytes(const em_tensor *a, const em_tensor *b)
{
    if (!a || !b || em_tensor_dtype(a) != em_tensor_dtype(b) ||
        !em_shape_equal(em_tensor_shape(a), em_tensor_shape(b)))
        return false;
    int64_t n = em_tensor_numel(a);
    size_t sz = (size_t)n * em_dtype_size(em_tensor_dtype(a));
    unsigned char *x = malloc(sz + 1), *y = malloc(sz + 1);
    em_to_data(a, x, em_tensor_dtype(a), n);
    em_to_data(b, y, em_tensor_dtype(b), n);
    bool ok = memcmp(x, y, sz) == 0;
    free(x);
    free(y);
    return ok;
}

/* ---- bit-exact resume -------------------------------------------------------------------- */

typedef enum { ADAM, SGD } opt_kind;

typedef struct run {
    em_module *m;
    em_optim *o;
    em_sched *s;
    int64_t sched_steps;
} run;

static run run_new(opt_kind k)
{
    run r = {0};
    r.m = em_sequential(EM_CPU, em_linear_new(5, 16, EM_CPU),
                        em_batch_norm1d_new((em_norm_cfg){.num_features = 16}, EM_CPU),
                        em_tanh_new(), em_dropout_new(0.2), em_linear_new(16, 3, EM_CPU));
    if (k == ADAM) {
        r.o = em_adam_new(r.m, (em_adam_cfg){.lr = 1e-2, .weight_decay = 1e-3, .amsgrad = true});
        r.s = em_sched_cosine_new(r.o, 12, 1e-4);
    } else {
        r.o = em_sgd_new(
            r.m, (em_sgd_cfg){.lr = 0.05, .momentum = 0.9, .nesterov = true, .weight_decay = 1e-4});
        r.s = em_sched_step_new(r.o, 3, 0.5);
    }
    CHECK_OK("build run");
    return r;
}

static void run_free(run *r)
{
    em_sched_free(r->s);
    em_optim_free(r->o);
    em_module_free(r->m);
}

/* Data and dropout masks come from the global generator, so its state matters. */
static void train(run *r, int steps)
{
    em_module_train(r->m, true);
    for (int i = 0; i < steps; i++) {
        em_scope_begin();
        em_tensor *x = em_randn(EM_SHAPE(8, 5), EM_F32, EM_CPU);
        em_tensor *t = em_randn(EM_SHAPE(8, 3), EM_F32, EM_CPU);
        em_tensor *loss = em_mse_loss(em_forward(r->m, x), t, EM_REDUCTION_MEAN);
        em_grads *g = em_backward(loss);
        CHECK(g && em_optim_step(r->o, g) == EM_OK, "step");
        em_grads_free(g);
        em_sched_step(r->s, NAN);
        r->sched_steps++;
        em_scope_end();
    }
    CHECK_OK("train");
}

typedef struct cmp_ctx {
    em_module *other;
    int n, same;
} cmp_ctx;

static void cmp_fn(void *vctx, const char *name, em_module_entry *e)
{
    cmp_ctx *c = vctx;
    c->n++;
    if (same_bytes(e->tensor, em_module_get(c->other, name))) c->same++;
}

static cmp_ctx compare(em_module *a, em_module *b)
{
    cmp_ctx c = {b, 0, 0};
    em_module_visit(a, cmp_fn, &c);
    return c;
}

static void test_resume(opt_kind kind, const char *what)
{
    const int total = 10, k = 4;
    em_seed(42);
    run a = run_new(kind);
    train(&a, total);

    em_seed(42);
    run b = run_new(kind);
    train(&b, k);
    em_tensor_dict *metrics = em_tensor_dict_new();
    em_tensor_dict_set_meta(metrics, "val_loss", "0.125");
    em_tensor_dict_set_meta(metrics, "note", "résumé");
    const char *path = tmp_path("resume.safetensors");
    em_checkpoint_parts wp = {.module = b.m,
                              .optim = b.o,
                              .sched = b.s,
                              .sched_steps = b.sched_steps,
                              .rng = true,
                              .epoch = 2,
                              .step = k,
                              .metrics = metrics};
    CHECK(em_checkpoint_write(path, &wp) == EM_OK, "%s: write", what);
    CHECK_OK("write");
    em_tensor_dict_free(metrics);
    run_free(&b);

    /* A fresh start with other weights and another generator position. */
    em_seed(7);
    run c = run_new(kind);
    em_tensor *noise = em_randn(EM_SHAPE(100), EM_F32, EM_CPU);
    em_release(noise);
    em_tensor_dict *got = em_tensor_dict_new();
    em_checkpoint_parts rp = {
        .module = c.m, .optim = c.o, .sched = c.s, .rng = true, .metrics = got};
    CHECK(em_checkpoint_read(path, &rp) == EM_OK, "%s: read", what);
    CHECK_OK("read");
    CHECK(rp.epoch == 2 && rp.step == k && rp.sched_steps == k, "%s: epoch, step, sched_steps",
          what);
    CHECK(em_tensor_dict_get_meta(got, "val_loss") &&
              strcmp(em_tensor_dict_get_meta(got, "val_loss"), "0.125") == 0 &&
              strcmp(em_tensor_dict_get_meta(got, "note"), "résumé") == 0,
          "%s: metrics", what);
    em_tensor_dict_free(got);
    CHECK(em_optim_steps(c.o) == k, "%s: optimizer step count", what);
    c.sched_steps = rp.sched_steps;
    train(&c, total - k);
    cmp_ctx r = compare(a.m, c.m);
    CHECK(r.n == 9 && r.same == r.n, "%s: %d/%d parameters and buffers bit-exact", what, r.same,
          r.n);
    CHECK(em_optim_lr(a.o) == em_optim_lr(c.o), "%s: same learning rate", what);

    /* Control: the same resume without the generator state diverges. */
    em_seed(7);
    run d = run_new(kind);
    em_checkpoint_parts np = {.module = d.m, .optim = d.o, .sched = d.s};
    CHECK(em_checkpoint_read(path, &np) == EM_OK, "%s: read without rng", what);
    train(&d, total - k);
    r = compare(a.m, d.m);
    CHECK(r.same < r.n, "%s: without the generator state it differs (%d/%d)", what, r.same, r.n);
    run_free(&d);

    run_free(&a);
    run_free(&c);
}

static void test_parts_and_errors(void)
{
    em_seed(3);
    run r = run_new(SGD);
    train(&r, 2);
    /* a directory gets checkpoint.safetensors inside */
    CHECK(em_checkpoint_write(tmpdir, &(em_checkpoint_parts){.module = r.m, .epoch = 5}) == EM_OK,
          "write into a directory");
    CHECK(access(tmp_path("checkpoint.safetensors"), F_OK) == 0, "checkpoint.safetensors");
    /* the module part also loads with em_module_load (the "model." prefix is an adapter) */
    run q = run_new(SGD);
    CHECK(em_module_load(q.m, tmp_path("checkpoint.safetensors"), NULL, NULL) == EM_OK,
          "module part loads with em_module_load");
    cmp_ctx c = compare(r.m, q.m);
    CHECK(c.same == c.n, "same values");
    /* asking for parts the file lacks fails before anything changes */
    em_checkpoint_parts p = {.module = q.m, .optim = q.o};
    CHECK(em_checkpoint_read(tmpdir, &p) == EM_ERR_FORMAT, "no optimizer state");
    CHECK_ERR(EM_ERR_FORMAT, "holds no optimizer state");
    p = (em_checkpoint_parts){.rng = true};
    CHECK(em_checkpoint_read(tmpdir, &p) == EM_ERR_FORMAT, "no generator state");
    CHECK_ERR(EM_ERR_FORMAT, "no generator state");
    p = (em_checkpoint_parts){0};
    CHECK(em_checkpoint_read(tmpdir, &p) == EM_OK && p.epoch == 5, "epoch only");
    /* a model file is not a checkpoint */
    em_module_save(r.m, tmp_path("model.safetensors"), NULL);
    CHECK(em_checkpoint_read(tmp_path("model.safetensors"), &p) == EM_ERR_FORMAT, "not one");
    CHECK_ERR(EM_ERR_FORMAT, "not an Ember checkpoint");
    /* a module of another shape: strict failure, module untouched */
    em_module *other = em_sequential(EM_CPU, em_linear_new(5, 4, EM_CPU));
    em_tensor *w0 = em_module_get(other, "0.weight");
    p = (em_checkpoint_parts){.module = other};
    CHECK(em_checkpoint_read(tmpdir, &p) == EM_ERR_INVALID_ARG, "other module refused");
    CHECK_ERR(EM_ERR_INVALID_ARG, "does not match");
    CHECK(em_module_get(other, "0.weight") == w0, "untouched");
    em_module_free(other);
    CHECK(em_checkpoint_write(NULL, &p) == EM_ERR_INVALID_ARG, "NULL path");
    CHECK_ERR(EM_ERR_INVALID_ARG, "path is NULL");
    run_free(&q);
    run_free(&r);
}

static int warnings;
static void count_warn(void *user, const char *component, em_log_level level, const char *msg)
{
    (void)user;
    if (level == EM_LOG_WARN && strcmp(component, "store") == 0 &&
        strstr(msg, "cannot be replayed"))
        warnings++;
}

/* Reduce-on-plateau cannot be replayed without its metrics: a warning, and the saved rate. */
static void test_plateau(void)
{
    em_module *m = em_linear_new(2, 2, EM_CPU);
    em_optim *o = em_sgd_new(m, (em_sgd_cfg){.lr = 0.1});
    em_sched *s = em_sched_plateau_new(o, false, 0.5, 1, 0, 0, 0);
    const double losses[] = {1.0, 0.5, 0.6, 0.7, 0.8};
    for (int i = 0; i < 5; i++) em_sched_step(s, losses[i]);
    double lr = em_optim_lr(o);
    CHECK(lr < 0.1, "plateau reduced the rate (%g)", lr);
    const char *path = tmp_path("plateau.safetensors");
    CHECK(em_checkpoint_write(
              path, &(em_checkpoint_parts){.optim = o, .sched = s, .sched_steps = 5}) == EM_OK,
          "write");
    em_optim *o2 = em_sgd_new(m, (em_sgd_cfg){.lr = 0.1});
    em_sched *s2 = em_sched_plateau_new(o2, false, 0.5, 1, 0, 0, 0);
    em_log_set_callback(count_warn, NULL);
    em_log_to_stderr(false);
    CHECK(em_checkpoint_read(path, &(em_checkpoint_parts){.optim = o2, .sched = s2}) == EM_OK,
          "read");
    em_log_to_stderr(true);
    em_log_set_callback(NULL, NULL);
    CHECK(warnings == 1, "one warning (%d)", warnings);
    CHECK(em_optim_lr(o2) == lr, "saved rate restored");
    em_sched_free(s2);
    em_optim_free(o2);
    em_sched_free(s);
    em_optim_free(o);
    em_module_free(m);
}

/* ---- killed writers ---------------------------------------------------------------------- */

#define BIG (1 << 20) /* elements per tensor: two tensors, 8 MiB per checkpoint */

static em_module *big_module(void)
{
    static const em_module_type t = {"Big", NULL, NULL, NULL};
    em_module *m = em_module_alloc(sizeof(em_module), &t, EM_CPU);
    em_module_param(m, "a", em_zeros(EM_SHAPE(BIG), EM_F32, EM_CPU));
    em_module_param(m, "b", em_zeros(EM_SHAPE(BIG / 2, 2), EM_F32, EM_CPU));
    return m;
}

static void on_xfsz(int sig)
{
    (void)sig;
    raise(SIGKILL);
}

/* Child: writes checkpoints 1, 2, ... (every element equal to the step) and reports each
 * finished one on the pipe. With fsize_limit, checkpoint 2 and later die at that file size. */
static void writer_child(int fd, long fsize_limit)
{
    em_set_num_threads(1); /* the parent's pool threads do not exist here */
    em_module *m = big_module();
    for (int64_t step = 1;; step++) {
        if (step == 2 && fsize_limit > 0) {
            struct rlimit rl = {(rlim_t)fsize_limit, (rlim_t)fsize_limit};
            setrlimit(RLIMIT_FSIZE, &rl);
            signal(SIGXFSZ, on_xfsz);
        }
        em_module_set(m, "a", em_full(EM_SHAPE(BIG), (double)step, EM_F32, EM_CPU));
        em_module_set(m, "b", em_full(EM_SHAPE(BIG / 2, 2), (double)step, EM_F32, EM_CPU));
        if (em_checkpoint_write(tmpdir, &(em_checkpoint_parts){.module = m, .step = step}) != EM_OK)
            _exit(3);
        if (write(fd, &step, sizeof step) != sizeof step) _exit(4);
    }
}

static bool all_equal(const em_tensor *t, float v)
{
    int64_t n = em_tensor_numel(t);
    float *buf = malloc((size_t)n * sizeof *buf);
    em_to_data(t, buf, EM_F32, n);
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++) ok = buf[i] == v;
    free(buf);
    return ok;
}

static void remove_temps(void)
{
    DIR *dir = opendir(tmpdir);
    struct dirent *e;
    while ((e = readdir(dir)))
        if (strncmp(e->d_name, ".checkpoint.safetensors.", 24) == 0) unlink(tmp_path(e->d_name));
    closedir(dir);
}

static void test_killed_writer(void)
{
    unlink(tmp_path("checkpoint.safetensors"));
    const long file_size = 2L * BIG * 4 + 300; /* about: data plus header */
    for (int round = 0; round < 6; round++) {
        /* rounds 0-2: killed by the parent after 1-3 checkpoints, after a random amount of
         * work; rounds 3-5: killed inside write() at a random file offset of checkpoint 2 */
        bool async = round < 3;
        long limit = async ? 0 : 1 + (long)(h_uniform() * (double)(file_size - 2));
        int need = async ? 1 + (int)(h_uniform() * 3) : 1;
        long spin = (long)(h_uniform() * 2e6);
        int fds[2];
        if (pipe(fds) != 0) return;
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            writer_child(fds[1], limit);
            _exit(0);
        }
        close(fds[1]);
        int64_t last = 0, got = 0;
        for (int i = 0; i < need && read(fds[0], &got, sizeof got) == sizeof got; i++) last = got;
        if (async) {
            for (volatile long s = 0; s < spin; s++) {
            }
            kill(pid, SIGKILL);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        close(fds[0]);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "round %d: writer killed", round);
        CHECK(last >= 1, "round %d: at least one checkpoint finished", round);

        em_module *m = big_module();
        em_checkpoint_parts p = {.module = m};
        CHECK(em_checkpoint_read(tmpdir, &p) == EM_OK, "round %d: previous checkpoint loads",
              round);
        CHECK_OK("read after kill");
        /* the last reported checkpoint or, for a kill from outside, a later one the child
         * finished before the signal arrived; never a mix */
        CHECK(async ? p.step >= last : p.step == last, "round %d: step %lld (last %lld)", round,
              (long long)p.step, (long long)last);
        CHECK(all_equal(em_module_get(m, "a"), (float)p.step) &&
                  all_equal(em_module_get(m, "b"), (float)p.step),
              "round %d: every element is from checkpoint %lld", round, (long long)p.step);
        em_module_free(m);
        remove_temps();
        unlink(tmp_path("checkpoint.safetensors"));
    }
}

int main(void)
{
    h_init();
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ember_ckpt_XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    test_killed_writer();
    test_resume(ADAM, "Adam");
    test_resume(SGD, "SGD momentum");
    test_parts_and_errors();
    test_plateau();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return h_finish();
}
