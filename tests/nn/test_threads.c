/* Threads: forwards and backward passes of several threads through one shared module give
 * exactly what one thread alone gives, with grad mode on and off, and leave no tensor handle
 * behind; independent training loops in threads (each its own model, optimizer and loader)
 * lose exactly what they lose alone; two threads submitting work to the pool at once get their
 * own results; a second backward pass through a graph that one is running through fails. With
 * the argument "inference" only the shared-module part runs
 * (scripts/tsan.sh repeats that part under ThreadSanitizer). */
#include <pthread.h>
#include <string.h>

#include "harness.h"

#define THREADS 4
#define INPUTS  3

/* ---- one module shared by threads -------------------------------------------------------- */

typedef struct shared_case {
    const char *name;
    int rounds; /* per thread: many for the small modules, where a race has most chances */
    em_module *net;
    em_tensor *param;          /* borrowed: the parameter whose gradient is compared */
    em_tensor *x[INPUTS];      /* inputs, read by every thread */
    em_tensor *want[INPUTS];   /* the outputs one thread computed */
    em_tensor *want_g[INPUTS]; /* and the gradient of sum(output) for param */
} shared_case;

typedef struct worker {
    const shared_case *c;
    bool grad;
    int id;
    int bad; /* wrong or failed results (an output, a gradient) */
    char first[300];
} worker;

static void note(worker *w, const char *what)
{
    if (w->bad++ == 0)
        snprintf(w->first, sizeof w->first, "%s (%s)", what, em_failed() ? em_last_error() : "");
}

/* Worker checks are counted here and reported by the main thread: the harness's counters are
 * not shared between threads. */
static void *run_shared(void *arg)
{
    worker *w = arg;
    const shared_case *c = w->c;
    if (!w->grad) em_no_grad_begin();
    for (int r = 0; r < c->rounds; r++) {
        int i = (r + w->id) % INPUTS;
        em_scope_begin();
        em_tensor *y = em_forward(c->net, c->x[i]);
        if (!y)
            note(w, "forward failed");
        else if (!h_same_bytes(y, c->want[i]))
            note(w, "output differs");
        if (y && w->grad) {
            em_grads *g = em_backward(em_sum(y, EM_ALL, false));
            em_tensor *gp = em_grad(g, c->param);
            if (!gp || !h_same_bytes(gp, c->want_g[i])) note(w, "gradient differs");
        } else if (y && em_tensor_requires_grad(y)) {
            note(w, "recorded under no-grad");
        }
        em_scope_end();
        em_clear_error();
    }
    if (!w->grad) em_no_grad_end();
    return NULL;
}

static void shared_case_init(shared_case *c, const char *name, int rounds, em_module *net,
                             const char *param, em_shape in)
{
    c->name = name;
    c->rounds = rounds;
    c->net = net;
    CHECK(net != NULL, "%s: built (%s)", name, em_last_error());
    c->param = net ? em_module_get(net, param) : NULL;
    CHECK(c->param != NULL, "%s: parameter %s", name, param);
    for (int i = 0; i < INPUTS; i++) {
        c->x[i] = em_randn(in, EM_F32, EM_CPU);
        em_scope_begin();
        em_tensor *y = em_forward(net, c->x[i]);
        c->want[i] = em_keep(em_detach(y));
        em_grads *g = em_backward(em_sum(y, EM_ALL, false));
        c->want_g[i] = em_keep(em_detach(em_grad(g, c->param)));
        em_scope_end();
        CHECK(c->want[i] && c->want_g[i], "%s: reference %d (%s)", name, i, em_last_error());
    }
}

static void shared_case_free(shared_case *c)
{
    for (int i = 0; i < INPUTS; i++) {
        em_release(c->x[i]);
        em_release(c->want[i]);
        em_release(c->want_g[i]);
    }
    em_module_free(c->net);
}

static void run_threads(const shared_case *c, bool grad)
{
    int64_t live = em_live_tensors();
    worker w[THREADS];
    pthread_t tid[THREADS];
    for (int t = 0; t < THREADS; t++) {
        w[t] = (worker){.c = c, .grad = grad, .id = t};
        CHECK(pthread_create(&tid[t], NULL, run_shared, &w[t]) == 0, "pthread_create");
    }
    for (int t = 0; t < THREADS; t++) pthread_join(tid[t], NULL);
    for (int t = 0; t < THREADS; t++)
        CHECK(w[t].bad == 0, "%s, grad %s, thread %d: %d wrong results in %d rounds; first: %s",
              c->name, grad ? "on" : "off", t, w[t].bad, c->rounds, w[t].first);
    CHECK(em_live_tensors() == live, "%s, grad %s: live tensors %lld before, %lld after", c->name,
          grad ? "on" : "off", (long long)live, (long long)em_live_tensors());
}

static void test_shared_module(void)
{
    shared_case cases[3];
    em_seed(7);
    shared_case_init(&cases[0], "Linear", 400, em_linear_new(64, 32, EM_CPU), "weight",
                     EM_SHAPE(8, 64));
    /* a Linear followed by a ReLU runs as one fused op (matmul_bias_act) */
    shared_case_init(&cases[1], "MLP", 100,
                     em_sequential(EM_CPU, em_linear_new(64, 96, EM_CPU), em_relu_new(),
                                   em_linear_new(96, 10, EM_CPU)),
                     "0.weight", EM_SHAPE(8, 64));
    em_module *cnn = em_sequential(
        EM_CPU,
        em_conv2d_new((em_conv2d_cfg){.in = 3, .out = 8, .kernel = {3, 3}, .padding = {1, 1}},
                      EM_CPU),
        em_batch_norm2d_new((em_norm_cfg){.num_features = 8}, EM_CPU), em_relu_new(),
        em_max_pool2d_new((em_pool2d_cfg){.kernel = {2, 2}}),
        em_conv2d_new((em_conv2d_cfg){.in = 8, .out = 8, .kernel = {3, 3}, .padding = {1, 1}},
                      EM_CPU),
        em_gelu_new(), em_dropout_new(0.5), em_flatten_new(1, -1),
        em_linear_new(8 * 8 * 8, 10, EM_CPU));
    /* eval mode: batch norm reads its running statistics and dropout passes through; in
     * training mode batch norm updates its buffers, which threads may not do at once */
    if (cnn) em_module_train(cnn, false);
    shared_case_init(&cases[2], "CNN", 8, cnn, "0.weight", EM_SHAPE(2, 3, 16, 16));
    CHECK_OK("shared modules built");
    for (int k = 0; k < 3; k++) {
        if (!cases[k].param) continue;
        run_threads(&cases[k], false);
        run_threads(&cases[k], true);
    }
    for (int k = 0; k < 3; k++) shared_case_free(&cases[k]);
}

/* ---- one graph, one thread ------------------------------------------------------------- */

/* A second backward pass through a graph while a first runs through it (from another thread)
 * fails. Started here from inside the first, by a checkpoint segment's recomputation, so the
 * timing is fixed. */
typedef struct reentry {
    em_tensor *loss;
    int calls;
    bool refused;
    char msg[300];
} reentry;

static em_status segment(void *ctx, em_tensor *const *in, int n_in, em_tensor **out, int n_out)
{
    reentry *r = ctx;
    if (r->calls++ == 1) { /* the recomputation, inside the backward pass of r->loss */
        em_grads *g = em_backward_opt(r->loss, (em_backward_opts){.retain_graph = true});
        r->refused = g == NULL && em_last_status() == EM_ERR_STATE;
        snprintf(r->msg, sizeof r->msg, "%s", em_last_error());
        em_clear_error();
    }
    out[0] = em_tanh(in[0]);
    return EM_OK;
}

static void test_graph_owner(void)
{
    em_scope_begin();
    em_tensor *w = em_requires_grad(em_randn(EM_SHAPE(4), EM_F64, EM_CPU), true);
    reentry r = {0};
    em_tensor *out[1];
    CHECK(em_checkpoint(segment, &r, &w, 1, out, 1) == EM_OK, "checkpoint");
    r.loss = em_sum(em_mul_scalar(out[0], 2), EM_ALL, false);
    em_grads *g = em_backward(r.loss);
    CHECK(r.refused && strstr(r.msg, "em_backward: another backward pass is running through"),
          "a second pass through a running one is refused: %s", r.msg);
    CHECK(g && em_grad(g, w), "the first pass completes (%s)", em_last_error());
    em_scope_end();
}

/* ---- the pool with two submitting threads ------------------------------------------------ */

#define POOL_N 100000

typedef struct pool_job {
    int64_t factor;
    int64_t *out; /* out[i] = i * factor */
    bool ok;
} pool_job;

static void fill(void *ctx, int64_t begin, int64_t end)
{
    pool_job *j = ctx;
    for (int64_t i = begin; i < end; i++) j->out[i] = i * j->factor;
}

static void *submit(void *arg)
{
    pool_job *j = arg;
    j->ok = true;
    for (int r = 0; r < 20; r++) {
        memset(j->out, 0, POOL_N * sizeof *j->out);
        em_parallel_for(POOL_N, 1000, fill, j);
        for (int64_t i = 0; i < POOL_N; i++)
            if (j->out[i] != i * j->factor) j->ok = false;
    }
    return NULL;
}

static void test_pool(void)
{
    pool_job jobs[2] = {{.factor = 3}, {.factor = -5}};
    pthread_t tid[2];
    for (int t = 0; t < 2; t++) {
        jobs[t].out = malloc(POOL_N * sizeof *jobs[t].out);
        pthread_create(&tid[t], NULL, submit, &jobs[t]);
    }
    for (int t = 0; t < 2; t++) pthread_join(tid[t], NULL);
    for (int t = 0; t < 2; t++) {
        CHECK(jobs[t].ok, "pool: thread %d's job got another job's values", t);
        free(jobs[t].out);
    }
}

/* ---- independent training loops ---------------------------------------------------------- */

#define TRAINERS 3
#define EPOCHS   3
#define SAMPLES  64
#define BATCH    16
#define STEPS    (EPOCHS * SAMPLES / BATCH)

typedef struct trainer {
    em_module *net;
    em_optim *opt;
    em_loader *loader;
    double loss[STEPS];
    int steps;
    char err[300];
} trainer;

/* data: x [SAMPLES, 16], the same as images [SAMPLES, 1, 4, 4], labels y [SAMPLES] */
static void trainer_init(trainer *t, int k, em_tensor *const *data)
{
    memset(t, 0, sizeof *t);
    em_seed(100 + (uint64_t)k);
    em_tensor *fields[2] = {k == 2 ? data[2] : data[0], data[1]};
    if (k == 2)
        t->net = em_sequential(
            EM_CPU,
            em_conv2d_new((em_conv2d_cfg){.in = 1, .out = 4, .kernel = {3, 3}, .padding = {1, 1}},
                          EM_CPU),
            em_relu_new(), em_flatten_new(1, -1), em_linear_new(64, 4, EM_CPU));
    else
        t->net = em_sequential(EM_CPU, em_linear_new(16, 32, EM_CPU), em_tanh_new(),
                               em_linear_new(32, 4, EM_CPU));
    t->opt = k == 1 ? em_sgd_new(t->net, (em_sgd_cfg){.lr = 0.1, .momentum = 0.9})
                    : em_adam_new(t->net, (em_adam_cfg){.lr = 1e-2});
    const char *names[2] = {"x", "y"};
    t->loader = em_loader_new(
        em_dataset_from_tensors(fields, names, 2),
        (em_loader_cfg){
            .batch_size = BATCH, .shuffle = true, .seed = 9 + (uint64_t)k, .workers = 1});
    CHECK(t->net && t->opt && t->loader, "trainer %d built (%s)", k, em_last_error());
}

static void *train(void *arg)
{
    trainer *t = arg;
    em_batch b;
    for (int e = 0; e < EPOCHS; e++) {
        while (em_loader_next(t->loader, &b)) {
            em_scope_begin();
            em_tensor *loss = em_cross_entropy(em_forward(t->net, em_batch_get(&b, "x")),
                                               em_batch_get(&b, "y"), (em_ce_cfg){0});
            em_optim_step(t->opt, em_backward(loss));
            if (t->steps < STEPS) t->loss[t->steps] = em_item_f64(loss);
            t->steps++;
            em_scope_end();
            em_batch_free(&b);
        }
    }
    if (em_failed()) snprintf(t->err, sizeof t->err, "%s", em_last_error());
    em_clear_error();
    return NULL;
}

static void trainer_free(trainer *t)
{
    em_loader_free(t->loader);
    em_optim_free(t->opt);
    em_module_free(t->net);
}

static void test_training_loops(void)
{
    em_seed(3);
    em_tensor *data[3] = {em_randn(EM_SHAPE(SAMPLES, 16), EM_F32, EM_CPU),
                          em_randint(0, 4, EM_SHAPE(SAMPLES), EM_I64, EM_CPU), NULL};
    data[2] = em_reshape(data[0], EM_SHAPE(SAMPLES, 1, 4, 4));
    trainer alone[TRAINERS], together[TRAINERS];
    for (int k = 0; k < TRAINERS; k++) {
        trainer_init(&alone[k], k, data);
        train(&alone[k]);
    }
    for (int k = 0; k < TRAINERS; k++) trainer_init(&together[k], k, data);
    pthread_t tid[TRAINERS];
    for (int k = 0; k < TRAINERS; k++) pthread_create(&tid[k], NULL, train, &together[k]);
    for (int k = 0; k < TRAINERS; k++) pthread_join(tid[k], NULL);
    for (int k = 0; k < TRAINERS; k++) {
        CHECK(alone[k].steps == STEPS && together[k].steps == STEPS,
              "trainer %d: %d steps alone, %d in a thread (%s%s)", k, alone[k].steps,
              together[k].steps, alone[k].err, together[k].err);
        CHECK(alone[k].loss[STEPS - 1] < alone[k].loss[0], "trainer %d learns: %g -> %g", k,
              alone[k].loss[0], alone[k].loss[STEPS - 1]);
        int same = 0;
        for (int s = 0; s < STEPS; s++)
            same += memcmp(&alone[k].loss[s], &together[k].loss[s], sizeof(double)) == 0;
        CHECK(same == STEPS,
              "trainer %d: %d of %d losses equal to the loop run alone (last %.9g "
              "alone, %.9g in a thread)",
              k, same, STEPS, alone[k].loss[STEPS - 1], together[k].loss[STEPS - 1]);
        trainer_free(&alone[k]);
        trainer_free(&together[k]);
    }
    for (int i = 0; i < 3; i++) em_release(data[i]);
}

int main(int argc, char **argv)
{
    h_init();
    bool inference_only = argc > 1 && strcmp(argv[1], "inference") == 0;
    test_shared_module();
    if (!inference_only) {
        test_graph_owner();
        test_pool();
        test_training_loops();
    }
    return h_finish();
}
