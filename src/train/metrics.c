/* Metric accumulators for the learner: mean loss, perplexity, top-1/top-k accuracy and a growing
 * confusion matrix for micro/macro precision, recall and F1; process CPU time and memory. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../core/checked.h"
#include "train_impl.h"

struct em_metrics {
    int topk;
    double loss_sum; /* sum of mean_loss * items */
    int64_t items;
    double token_loss_sum; /* sum of mean_loss * tokens */
    int64_t tokens;
    int64_t counted, correct, topk_correct;
    int classes;
    int64_t *confusion; /* [classes, classes]: true class row, predicted column */
};

em_metrics *em_metrics_new(int topk)
{
    em_metrics *m = calloc(1, sizeof *m);
    if (!m) {
        em_error(EM_ERR_OOM, "em_metrics_new: out of memory");
        return NULL;
    }
    m->topk = topk > 0 ? topk : 5;
    return m;
}

void em_metrics_free(em_metrics *m)
{
    if (!m) return;
    free(m->confusion);
    free(m);
}

void em_metrics_reset(em_metrics *m)
{
    if (!m) return;
    int topk = m->topk;
    free(m->confusion);
    memset(m, 0, sizeof *m);
    m->topk = topk;
}

/* a + b for counts, stopping at INT64_MAX */
static int64_t count_add(int64_t a, int64_t b)
{
    int64_t r;
    return core_add_ok(a, b, &r) ? r : INT64_MAX;
}

void em_metrics_add_loss(em_metrics *m, double mean_loss, int64_t items, int64_t tokens)
{
    if (!m) return;
    if (items <= 0) items = 1;
    if (tokens <= 0) tokens = items;
    m->loss_sum += mean_loss * (double)items;
    m->items = count_add(m->items, items);
    m->token_loss_sum += mean_loss * (double)tokens;
    m->tokens = count_add(m->tokens, tokens);
}

/* Grows the confusion matrix to hold class c. */
static bool grow(em_metrics *m, int64_t c)
{
    if (c < m->classes) return true;
    if (c > 1 << 16)
        return em_error(EM_ERR_INVALID_ARG, "em_metrics_update: class %lld is too large",
                        (long long)c) == EM_OK;
    int n = (int)c + 1;
    if (n < 2 * m->classes) n = 2 * m->classes;
    if (n > (1 << 16) + 1) n = (1 << 16) + 1;
    int64_t *cm = calloc((size_t)n * (size_t)n, sizeof *cm);
    if (!cm) return em_error(EM_ERR_OOM, "em_metrics_update: out of memory") == EM_OK;
    for (int t = 0; t < m->classes; t++)
        memcpy(cm + (size_t)t * (size_t)n, m->confusion + (size_t)t * (size_t)m->classes,
               (size_t)m->classes * sizeof *cm);
    free(m->confusion);
    m->confusion = cm;
    m->classes = n;
    return true;
}

static em_status count(em_metrics *m, int64_t pred, int64_t target, bool topk_hit)
{
    if (pred < 0 || target < 0)
        return em_error(EM_ERR_INDEX,
                        "em_metrics_update: negative class (predicted %lld, true %lld)",
                        (long long)pred, (long long)target);
    if (!grow(m, pred > target ? pred : target)) return em_last_status();
    m->confusion[(size_t)target * (size_t)m->classes + (size_t)pred]++;
    m->counted++;
    m->correct += pred == target;
    m->topk_correct += topk_hit;
    return EM_OK;
}

em_status em_metrics_update_ids(em_metrics *m, const int64_t *pred, const int64_t *target,
                                int64_t n)
{
    if (!m || (n > 0 && (!pred || !target)))
        return em_error(EM_ERR_INVALID_ARG, "em_metrics_update_ids: NULL argument");
    for (int64_t i = 0; i < n; i++) {
        em_status st = count(m, pred[i], target[i], pred[i] == target[i]);
        if (st != EM_OK) return st;
    }
    return EM_OK;
}

em_status em_metrics_update(em_metrics *m, const em_tensor *outputs, const em_tensor *targets)
{
    const char *fn = "em_metrics_update";
    if (!m || !outputs || !targets) return em_error(EM_ERR_INVALID_ARG, "%s: NULL argument", fn);
    int64_t n = em_tensor_numel(targets);
    int64_t total = em_tensor_numel(outputs);
    int rank = em_tensor_rank(outputs);
    bool is_float = em_dtype_is_float(em_tensor_dtype(outputs));
    int64_t c = 1;
    if (rank >= 1 && is_float) c = em_tensor_dim(outputs, rank - 1);
    bool scores = is_float && rank >= 2 && c > 1 && total == n * c;
    if (!scores && total != n)
        return em_error(EM_ERR_SHAPE,
                        "%s: outputs with %lld elements do not fit %lld targets (expected [N, C] "
                        "scores, [N] logits or [N] class ids)",
                        fn, (long long)total, (long long)n);
    if (n == 0) return EM_OK;
    double *tv = malloc((size_t)n * sizeof *tv);
    double *ov = malloc((size_t)total * sizeof *ov);
    em_status st = EM_OK;
    if (!tv || !ov) st = em_error(EM_ERR_OOM, "%s: out of memory", fn);
    if (st == EM_OK) st = em_to_data(targets, tv, EM_F64, n);
    if (st == EM_OK) st = em_to_data(outputs, ov, EM_F64, total);
    for (int64_t i = 0; i < n && st == EM_OK; i++) {
        int64_t t = (int64_t)llround(tv[i]);
        int64_t p;
        bool hit;
        if (scores) {
            const double *row = ov + i * c;
            p = 0;
            for (int64_t j = 1; j < c; j++)
                if (row[j] > row[p]) p = j;
            /* the target is in the top k when fewer than k scores beat it */
            int64_t above = 0;
            if (t >= 0 && t < c)
                for (int64_t j = 0; j < c; j++) above += row[j] > row[t];
            hit = t >= 0 && t < c && above < m->topk;
        } else {
            p = is_float ? (ov[i] > 0) : (int64_t)llround(ov[i]);
            hit = p == t;
        }
        st = count(m, p, t, hit);
    }
    free(tv);
    free(ov);
    return st;
}

int64_t em_metrics_confusion(const em_metrics *m, int t, int p)
{
    if (!m || t < 0 || p < 0 || t >= m->classes || p >= m->classes) return 0;
    return m->confusion[(size_t)t * (size_t)m->classes + (size_t)p];
}

static double ratio(double a, double b)
{
    return b > 0 ? a / b : 0.0;
}

em_metric_values em_metrics_compute(const em_metrics *m)
{
    em_metric_values v = {.loss = NAN,
                          .perplexity = NAN,
                          .accuracy = NAN,
                          .topk_accuracy = NAN,
                          .precision_micro = NAN,
                          .recall_micro = NAN,
                          .f1_micro = NAN,
                          .precision_macro = NAN,
                          .recall_macro = NAN,
                          .f1_macro = NAN};
    if (!m) return v;
    v.items = m->items;
    v.counted = m->counted;
    v.classes = m->classes;
    if (m->items > 0) v.loss = m->loss_sum / (double)m->items;
    if (m->tokens > 0) v.perplexity = exp(m->token_loss_sum / (double)m->tokens);
    if (m->counted == 0) return v;
    v.accuracy = (double)m->correct / (double)m->counted;
    v.topk_accuracy = (double)m->topk_correct / (double)m->counted;
    int64_t tp_all = 0, fp_all = 0, fn_all = 0;
    double p_sum = 0, r_sum = 0, f_sum = 0;
    int present = 0;
    int C = m->classes;
    for (int k = 0; k < C; k++) {
        int64_t tp = m->confusion[(size_t)k * (size_t)C + (size_t)k], row = 0, col = 0;
        for (int j = 0; j < C; j++) {
            row += m->confusion[(size_t)k * (size_t)C + (size_t)j];
            col += m->confusion[(size_t)j * (size_t)C + (size_t)k];
        }
        int64_t fp = col - tp, fn = row - tp;
        tp_all += tp;
        fp_all += fp;
        fn_all += fn;
        if (row == 0 && col == 0) continue; /* class absent from targets and predictions */
        present++;
        double p = ratio((double)tp, (double)(tp + fp));
        double r = ratio((double)tp, (double)(tp + fn));
        p_sum += p;
        r_sum += r;
        f_sum += ratio(2 * p * r, p + r);
    }
    v.precision_micro = ratio((double)tp_all, (double)(tp_all + fp_all));
    v.recall_micro = ratio((double)tp_all, (double)(tp_all + fn_all));
    v.f1_micro = ratio(2 * v.precision_micro * v.recall_micro, v.precision_micro + v.recall_micro);
    v.precision_macro = p_sum / present;
    v.recall_macro = r_sum / present;
    v.f1_macro = f_sum / present;
    return v;
}

/* ---- state for checkpoints ----------------------------------------------------------------- */

int64_t tr_metrics_state_len(const em_metrics *m)
{
    return 8 + (int64_t)m->classes * m->classes;
}

void tr_metrics_state_get(const em_metrics *m, double *out)
{
    out[0] = m->loss_sum;
    out[1] = (double)m->items;
    out[2] = m->token_loss_sum;
    out[3] = (double)m->tokens;
    out[4] = (double)m->counted;
    out[5] = (double)m->correct;
    out[6] = (double)m->topk_correct;
    out[7] = (double)m->classes;
    for (int64_t i = 0; i < (int64_t)m->classes * m->classes; i++)
        out[8 + i] = (double)m->confusion[i];
}

em_status tr_metrics_state_set(em_metrics *m, const double *in, int64_t n)
{
    if (n < 8 || in[7] < 0 || (int64_t)in[7] > (1 << 16) + 1 ||
        n != 8 + (int64_t)in[7] * (int64_t)in[7])
        return em_error(EM_ERR_FORMAT, "learner checkpoint: bad metric state (%lld values)",
                        (long long)n);
    em_metrics_reset(m);
    m->loss_sum = in[0];
    m->items = (int64_t)in[1];
    m->token_loss_sum = in[2];
    m->tokens = (int64_t)in[3];
    m->counted = (int64_t)in[4];
    m->correct = (int64_t)in[5];
    m->topk_correct = (int64_t)in[6];
    int C = (int)in[7];
    if (C > 0) {
        m->confusion = calloc((size_t)C * (size_t)C, sizeof *m->confusion);
        if (!m->confusion) return em_error(EM_ERR_OOM, "learner checkpoint: out of memory");
        m->classes = C;
        for (int64_t i = 0; i < (int64_t)C * C; i++) m->confusion[i] = (int64_t)in[8 + i];
    }
    return EM_OK;
}

/* ---- process statistics -------------------------------------------------------------------- */

int64_t em_process_rss(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    long long size = 0, resident = 0;
    int got = fscanf(f, "%lld %lld", &size, &resident);
    fclose(f);
    if (got != 2) return -1;
    return (int64_t)resident * (int64_t)sysconf(_SC_PAGESIZE);
}

double em_process_cpu_seconds(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return NAN;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

void tr_metrics_counts(const em_metrics *m, int64_t *counted, int64_t *correct)
{
    *counted = m->counted;
    *correct = m->correct;
}
