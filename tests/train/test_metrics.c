/* Metric accumulators against hand-computed confusion matrices, top-k, perplexity and binary
 * logits; process statistics. */
#include "harness.h"

static void test_confusion(void)
{
    /* rows: true class; columns: predicted
     *   t0: [3 0 0]   t1: [1 1 1]   t2: [1 1 2]
     * P = 3/5, 1/2, 2/3; R = 1, 1/3, 1/2; F1 = 3/4, 2/5, 4/7 */
    int64_t target[10] = {0, 0, 0, 1, 1, 2, 2, 2, 2, 1};
    int64_t pred[10] = {0, 0, 0, 0, 2, 2, 2, 0, 1, 1};
    em_metrics *m = em_metrics_new(0);
    /* two batches: accumulation must not depend on the split */
    CHECK(em_metrics_update_ids(m, pred, target, 4) == EM_OK, "update");
    em_tensor *p = em_from_i64(pred + 4, EM_SHAPE(6));
    em_tensor *t = em_from_i64(target + 4, EM_SHAPE(6));
    CHECK(em_metrics_update(m, p, t) == EM_OK, "update tensors");
    em_release(p);
    em_release(t);
    CHECK_OK("updates");
    em_metric_values v = em_metrics_compute(m);
    CHECK(v.counted == 10 && v.classes >= 3, "counted %lld classes %d", (long long)v.counted,
          v.classes);
    CHECK(em_metrics_confusion(m, 1, 0) == 1 && em_metrics_confusion(m, 2, 2) == 2 &&
              em_metrics_confusion(m, 0, 0) == 3,
          "confusion entries");
    CHECK(h_close(v.accuracy, 0.6, 0, 1e-15), "accuracy %g", v.accuracy);
    CHECK(h_close(v.precision_micro, 0.6, 0, 1e-15), "micro P %g", v.precision_micro);
    CHECK(h_close(v.recall_micro, 0.6, 0, 1e-15), "micro R %g", v.recall_micro);
    CHECK(h_close(v.f1_micro, 0.6, 0, 1e-15), "micro F1 %g", v.f1_micro);
    double pm = (0.6 + 0.5 + 2.0 / 3) / 3, rm = (1 + 1.0 / 3 + 0.5) / 3,
           fm = (0.75 + 0.4 + 4.0 / 7) / 3;
    CHECK(h_close(v.precision_macro, pm, 0, 1e-14), "macro P %.17g vs %.17g", v.precision_macro,
          pm);
    CHECK(h_close(v.recall_macro, rm, 0, 1e-14), "macro R %.17g vs %.17g", v.recall_macro, rm);
    CHECK(h_close(v.f1_macro, fm, 0, 1e-14), "macro F1 %.17g vs %.17g", v.f1_macro, fm);
    CHECK(isnan(v.loss) && isnan(v.perplexity), "no loss added");
    em_metrics_reset(m);
    v = em_metrics_compute(m);
    CHECK(v.counted == 0 && isnan(v.accuracy), "reset");
    em_metrics_free(m);
}

static void test_absent_classes(void)
{
    /* scikit-learn averages over labels in y_true or y_pred: classes 0, 1, 3 (2 never seen).
     * c0: P 1 R 1; c1: P 0/0 -> 0, R 0; c3: P 0, R 0/0 -> 0. */
    int64_t target[2] = {0, 1}, pred[2] = {0, 3};
    em_metrics *m = em_metrics_new(0);
    em_metrics_update_ids(m, pred, target, 2);
    em_metric_values v = em_metrics_compute(m);
    CHECK(h_close(v.precision_macro, 1.0 / 3, 0, 1e-15), "macro P %g", v.precision_macro);
    CHECK(h_close(v.recall_macro, 1.0 / 3, 0, 1e-15), "macro R %g", v.recall_macro);
    CHECK(h_close(v.f1_macro, 1.0 / 3, 0, 1e-15), "macro F1 %g", v.f1_macro);
    CHECK(h_close(v.f1_micro, 0.5, 0, 1e-15), "micro F1 %g", v.f1_micro);
    em_metrics_free(m);
}

static void test_topk(void)
{
    double s[4 * 5] = {0.1, 0.5, 0.2, 0.9, 0.0,  /* t=1: one score above -> top-2 hit */
                       0.3, 0.2, 0.1, 0.0, 0.4,  /* t=0: top-2 hit, top-1 miss */
                       0.0, 0.1, 0.8, 0.2, 0.3,  /* t=2: top-1 hit */
                       0.5, 0.4, 0.3, 0.2, 0.1}; /* t=4: miss */
    int64_t tg[4] = {1, 0, 2, 4};
    em_tensor *scores = em_from_f64(s, EM_SHAPE(4, 5));
    em_tensor *t = em_from_i64(tg, EM_SHAPE(4));
    em_metrics *m = em_metrics_new(2);
    CHECK(em_metrics_update(m, scores, t) == EM_OK, "update");
    em_metric_values v = em_metrics_compute(m);
    CHECK(h_close(v.accuracy, 0.25, 0, 0), "top-1 %g", v.accuracy);
    CHECK(h_close(v.topk_accuracy, 0.75, 0, 0), "top-2 %g", v.topk_accuracy);
    /* predictions were argmax 3, 4, 2, 0 */
    CHECK(em_metrics_confusion(m, 1, 3) == 1 && em_metrics_confusion(m, 0, 4) == 1 &&
              em_metrics_confusion(m, 4, 0) == 1,
          "argmax predictions");
    em_metrics_free(m);
    /* f32 [2, 2, 5] scores flatten to 4 rows */
    em_tensor *s3 = em_cast(scores, EM_F32);
    em_tensor *r = em_reshape(s3, EM_SHAPE(2, 2, 5));
    em_tensor *t2 = em_reshape(t, EM_SHAPE(2, 2));
    m = em_metrics_new(3);
    CHECK(em_metrics_update(m, r, t2) == EM_OK, "update rank 3");
    v = em_metrics_compute(m);
    CHECK(h_close(v.accuracy, 0.25, 0, 0) && h_close(v.topk_accuracy, 0.75, 0, 0),
          "rank-3 top-1 %g top-3 %g", v.accuracy, v.topk_accuracy);
    /* wrong sizes */
    em_tensor *bad = em_from_i64(tg, EM_SHAPE(3));
    CHECK(em_metrics_update(m, scores, bad) != EM_OK, "size mismatch");
    CHECK_ERR(EM_ERR_SHAPE, "do not fit");
    em_metrics_free(m);
    em_release(bad);
    em_release(s3);
    em_release(r);
    em_release(t2);
    em_release(scores);
    em_release(t);
}

static void test_binary_and_loss(void)
{
    double logit[4] = {-1, 2, 0.5, -3};
    double tg[4] = {0, 1, 0, 0}; /* float targets are rounded */
    em_tensor *o = em_from_f64(logit, EM_SHAPE(4, 1));
    em_tensor *t = em_from_f64(tg, EM_SHAPE(4));
    em_metrics *m = em_metrics_new(0);
    CHECK(em_metrics_update(m, o, t) == EM_OK, "binary update");
    em_metric_values v = em_metrics_compute(m);
    CHECK(h_close(v.accuracy, 0.75, 0, 0), "binary accuracy %g", v.accuracy);
    /* class 1: tp 1 fp 1 fn 0 -> P 1/2 R 1 */
    CHECK(em_metrics_confusion(m, 0, 1) == 1 && em_metrics_confusion(m, 1, 1) == 1, "binary cm");
    em_metrics_add_loss(m, 2.0, 2, 10);
    em_metrics_add_loss(m, 1.0, 2, 30);
    v = em_metrics_compute(m);
    CHECK(h_close(v.loss, 1.5, 0, 1e-15), "mean loss %g", v.loss);
    CHECK(h_close(v.perplexity, exp(1.25), 0, 1e-15), "perplexity %g", v.perplexity);
    CHECK(v.items == 4, "items");
    em_metrics_free(m);
    em_release(o);
    em_release(t);
    int64_t neg[1] = {-1}, zero[1] = {0};
    m = em_metrics_new(0);
    CHECK(em_metrics_update_ids(m, neg, zero, 1) == EM_ERR_INDEX, "negative class");
    CHECK_ERR(EM_ERR_INDEX, "negative class");
    em_metrics_free(m);
}

static void test_process(void)
{
    int64_t rss = em_process_rss();
    double cpu = em_process_cpu_seconds();
    CHECK(rss > 0, "rss %lld", (long long)rss);
    CHECK(cpu >= 0, "cpu %g", cpu);
    printf("rss %.1f MB, cpu %.3f s\n", (double)rss / 1048576.0, cpu);
}

int main(void)
{
    h_init();
    test_confusion();
    test_absent_classes();
    test_topk();
    test_binary_and_loss();
    test_process();
    return h_finish();
}
