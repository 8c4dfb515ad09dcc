/* Training checkpoints: module, optimizer state, scheduler position, generator state, epoch,
 * step and metrics in one safetensors file, written atomically and restored into fresh
 * objects so that training resumes bit for bit. Layout in docs/store.md. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <ember/optim.h>

#include "store_impl.h"

#define CKPT_FORMAT  "ember-checkpoint"
#define CKPT_VERSION "1"
#define CKPT_FILE    "checkpoint.safetensors"

/* path, or path/checkpoint.safetensors when path is a directory (em_free the result). */
static char *file_path(const char *path)
{
    struct stat sb;
    bool dir = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
    size_t n = strlen(path) + sizeof CKPT_FILE + 2;
    char *r = em_alloc(n);
    if (!r) return NULL;
    if (dir)
        snprintf(r, n, "%s%s%s", path, path[strlen(path) - 1] == '/' ? "" : "/", CKPT_FILE);
    else
        snprintf(r, n, "%s", path);
    return r;
}

typedef struct add_ctx {
    em_tensor_dict *d;
    const char *prefix;
    em_status st;
} add_ctx;

static em_status add_prefixed(add_ctx *c, const char *name, em_tensor *t)
{
    char full[700];
    int n = snprintf(full, sizeof full, "%s%s", c->prefix, name);
    if (n < 0 || (size_t)n >= sizeof full)
        return em_error(EM_ERR_INVALID_ARG, "em_checkpoint_write: name \"%.100s...\" too long",
                        name);
    return em_tensor_dict_add(c->d, full, t);
}

static void module_fn(void *vctx, const char *name, em_module_entry *e)
{
    add_ctx *c = vctx;
    if (c->st == EM_OK) c->st = add_prefixed(c, name, e->tensor);
}

/* em_optim_state_visit hands over new references. */
static void optim_fn(void *vctx, const char *name, em_tensor *t)
{
    add_ctx *c = vctx;
    if (c->st == EM_OK) c->st = add_prefixed(c, name, t);
    em_release(t);
}

static em_status set_i64(em_tensor_dict *d, const char *key, int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRId64, v);
    return em_tensor_dict_set_meta(d, key, buf);
}

static em_status set_u64(em_tensor_dict *d, const char *key, uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    return em_tensor_dict_set_meta(d, key, buf);
}

/* %.17g reads back to the same double. */
static em_status set_f64(em_tensor_dict *d, const char *key, double v)
{
    char buf[40];
    snprintf(buf, sizeof buf, "%.17g", v);
    return em_tensor_dict_set_meta(d, key, buf);
}

em_status em_checkpoint_write(const char *path, const em_checkpoint_parts *parts)
{
    const char *fn = "em_checkpoint_write";
    if (!path || !parts)
        return em_error(EM_ERR_INVALID_ARG, "%s: %s is NULL", fn, !path ? "path" : "parts");
    if (parts->sched && parts->sched_steps < 0)
        return em_error(EM_ERR_INVALID_ARG, "%s: sched_steps %" PRId64 " is negative", fn,
                        parts->sched_steps);
    char *file = file_path(path);
    em_tensor_dict *d = file ? em_tensor_dict_new() : NULL;
    if (!d) {
        em_free(file);
        return em_last_status() != EM_OK ? em_last_status() : EM_ERR_OOM;
    }
    em_status st = em_tensor_dict_set_meta(d, "format", CKPT_FORMAT);
    if (st == EM_OK) st = em_tensor_dict_set_meta(d, "version", CKPT_VERSION);
    if (st == EM_OK) st = set_i64(d, "epoch", parts->epoch);
    if (st == EM_OK) st = set_i64(d, "step", parts->step);
    if (st == EM_OK && parts->module) {
        add_ctx c = {d, "model.", EM_OK};
        em_module_visit(parts->module, module_fn, &c);
        st = c.st;
        if (st == EM_OK) st = em_tensor_dict_set_meta(d, "has_model", "1");
    }
    if (st == EM_OK && parts->optim) {
        add_ctx c = {d, "optim.", EM_OK};
        st = em_optim_state_visit(parts->optim, optim_fn, &c);
        if (st == EM_OK) st = c.st;
        if (st == EM_OK) st = set_f64(d, "optim.lr", em_optim_lr(parts->optim));
    }
    if (st == EM_OK && parts->sched) {
        st = set_i64(d, "sched.steps", parts->sched_steps);
        if (st == EM_OK) st = set_f64(d, "sched.lr", em_sched_lr(parts->sched));
    }
    if (st == EM_OK && parts->rng) {
        em_rng_state r = em_rng_get_state();
        st = set_u64(d, "rng.seed", r.seed);
        if (st == EM_OK) st = set_u64(d, "rng.offset", r.offset);
    }
    for (int64_t i = 0;
         st == EM_OK && parts->metrics && i < em_tensor_dict_meta_count(parts->metrics); i++) {
        char key[300];
        snprintf(key, sizeof key, "metric.%.280s", em_tensor_dict_meta_key_at(parts->metrics, i));
        st = em_tensor_dict_set_meta(d, key, em_tensor_dict_meta_value_at(parts->metrics, i));
    }
    if (st == EM_OK) st = em_safetensors_save(file, d, NULL);
    em_tensor_dict_free(d);
    em_free(file);
    return st;
}

/* ---- read -------------------------------------------------------------------------------- */

static bool get_i64(const em_tensor_dict *d, const char *key, int64_t *out)
{
    const char *s = em_tensor_dict_get_meta(d, key);
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno) return false;
    *out = (int64_t)v;
    return true;
}

static bool get_u64(const em_tensor_dict *d, const char *key, uint64_t *out)
{
    const char *s = em_tensor_dict_get_meta(d, key);
    if (!s || !*s || *s == '-') return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno) return false;
    *out = (uint64_t)v;
    return true;
}

static bool get_f64(const em_tensor_dict *d, const char *key, double *out)
{
    const char *s = em_tensor_dict_get_meta(d, key);
    if (!s || !*s) return false;
    char *end;
    double v = strtod(s, &end);
    if (*end) return false;
    *out = v;
    return true;
}

static bool has_prefix(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

/* The tensors named "<prefix>x" as "x" (shared references). */
static em_tensor_dict *sub_dict(const em_tensor_dict *d, const char *prefix)
{
    em_tensor_dict *s = em_tensor_dict_new();
    for (int64_t i = 0; s && i < em_tensor_dict_count(d); i++) {
        const char *n = em_tensor_dict_name_at(d, i);
        if (!has_prefix(n, prefix)) continue;
        if (em_tensor_dict_add(s, n + strlen(prefix), em_tensor_dict_tensor_at(d, i)) != EM_OK) {
            em_tensor_dict_free(s);
            return NULL;
        }
    }
    return s;
}

static em_status restore(const em_tensor_dict *d, em_checkpoint_parts *parts, const char *file)
{
    const char *fn = "em_checkpoint_read";
    const char *fmt = em_tensor_dict_get_meta(d, "format");
    const char *ver = em_tensor_dict_get_meta(d, "version");
    if (!fmt || strcmp(fmt, CKPT_FORMAT) != 0)
        return em_error(EM_ERR_FORMAT, "%s: %s is not an Ember checkpoint (format \"%.40s\")", fn,
                        file, fmt ? fmt : "");
    if (!ver || strcmp(ver, CKPT_VERSION) != 0)
        return em_error(EM_ERR_FORMAT, "%s: %s has checkpoint version \"%.20s\", expected %s", fn,
                        file, ver ? ver : "", CKPT_VERSION);
    int64_t epoch, step, sched_steps = 0;
    uint64_t seed = 0, offset = 0;
    double optim_lr = NAN, sched_lr = NAN;
    if (!get_i64(d, "epoch", &epoch) || !get_i64(d, "step", &step))
        return em_error(EM_ERR_FORMAT, "%s: %s lacks a valid epoch or step", fn, file);
    /* Check that every requested part is present before anything changes. */
    if (parts->module && !em_tensor_dict_get_meta(d, "has_model"))
        return em_error(EM_ERR_FORMAT, "%s: %s holds no module", fn, file);
    if (parts->optim &&
        (!em_tensor_dict_get(d, "optim.step") || !get_f64(d, "optim.lr", &optim_lr)))
        return em_error(EM_ERR_FORMAT, "%s: %s holds no optimizer state", fn, file);
    if (parts->sched && (!get_i64(d, "sched.steps", &sched_steps) || sched_steps < 0 ||
                         !get_f64(d, "sched.lr", &sched_lr)))
        return em_error(EM_ERR_FORMAT, "%s: %s holds no scheduler position", fn, file);
    if (parts->rng && (!get_u64(d, "rng.seed", &seed) || !get_u64(d, "rng.offset", &offset)))
        return em_error(EM_ERR_FORMAT, "%s: %s holds no generator state", fn, file);

    /* The module load validates everything before it swaps anything in. */
    if (parts->module) {
        em_tensor_dict *md = sub_dict(d, "model.");
        if (!md) return em_last_status();
        em_status st =
            em_module_load_dict(parts->module, md, &(em_load_opts){.no_adapters = true}, NULL);
        em_tensor_dict_free(md);
        if (st != EM_OK) return st;
    }
    if (parts->optim) {
        for (int64_t i = 0; i < em_tensor_dict_count(d); i++) {
            const char *n = em_tensor_dict_name_at(d, i);
            if (!has_prefix(n, "optim.")) continue;
            em_status st = em_optim_state_set(parts->optim, n + 6, em_tensor_dict_tensor_at(d, i));
            if (st != EM_OK) return st;
        }
    }
    if (parts->sched) {
        /* No scheduler state API: replay the steps. Every closed-form scheduler lands on the
         * same rate; reduce-on-plateau, which needs the metrics, does not. */
        for (int64_t i = 0; i < sched_steps; i++) {
            double lr = em_sched_step(parts->sched, NAN);
            if (isnan(lr)) return em_failed() ? em_last_status() : EM_ERR_STATE;
        }
        double got = em_sched_lr(parts->sched);
        if (memcmp(&got, &sched_lr, sizeof got) != 0)
            em_log_msg("store", EM_LOG_WARN,
                       "%s: replaying %" PRId64 " scheduler steps gave lr %.17g, %s has %.17g "
                       "(a scheduler that needs metrics cannot be replayed); using the saved one",
                       fn, sched_steps, got, file, sched_lr);
    }
    if (parts->optim) em_optim_set_lr(parts->optim, optim_lr);
    if (parts->rng) em_rng_set_state((em_rng_state){seed, offset});
    for (int64_t i = 0; parts->metrics && i < em_tensor_dict_meta_count(d); i++) {
        const char *k = em_tensor_dict_meta_key_at(d, i);
        if (!has_prefix(k, "metric.")) continue;
        em_status st =
            em_tensor_dict_set_meta(parts->metrics, k + 7, em_tensor_dict_meta_value_at(d, i));
        if (st != EM_OK) return st;
    }
    parts->epoch = epoch;
    parts->step = step;
    parts->sched_steps = sched_steps;
    return EM_OK;
}

em_status em_checkpoint_read(const char *path, em_checkpoint_parts *parts)
{
    const char *fn = "em_checkpoint_read";
    if (!path || !parts)
        return em_error(EM_ERR_INVALID_ARG, "%s: %s is NULL", fn, !path ? "path" : "parts");
    char *file = file_path(path);
    if (!file) return em_last_status() != EM_OK ? em_last_status() : EM_ERR_OOM;
    /* Copied, not mapped: restored parameters must not pin a file that the next checkpoint
     * replaces. */
    em_tensor_dict *d = em_safetensors_load(file, &(em_safetensors_opts){.copy = true});
    em_status st = d ? restore(d, parts, file) : em_last_status();
    em_tensor_dict_free(d);
    em_free(file);
    return st;
}
