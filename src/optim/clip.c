/* Gradient clipping (torch.nn.utils.clip_grad_norm_ / clip_grad_value_), accumulation over
 * micro-batches and scaling. Every function replaces the container's gradient tensors with new
 * ones: gradients are never written in place. */
#include <math.h>

#include "../autodiff/grads_edit.h"
#include "optim_impl.h"

em_grads *em_grads_new(void)
{
    return ad_grads_new();
}

/* Replaces entry i with t (a new reference from an op); false when t is NULL. */
static bool replace(em_grads *g, int i, em_tensor *t)
{
    if (!t) return false;
    ad_grads_replace(g, i, t);
    return true;
}

double em_clip_grad_norm(em_grads *g, double max_norm, double norm_type)
{
    const char *fn = "em_clip_grad_norm";
    if (!tn_check_ptr(fn, g, "g")) return NAN;
    if (norm_type == 0) norm_type = signbit(norm_type) ? 0.0 : 2.0;
    if (!(max_norm >= 0) || isnan(norm_type) || norm_type < 0) {
        em_error(EM_ERR_INVALID_ARG, "%s: invalid max_norm %g or norm_type %g", fn, max_norm,
                 norm_type);
        return NAN;
    }
    int n = em_grads_count(g);
    if (n == 0) return 0.0;
    double total = 0;
    em_scope_begin();
    em_no_grad_begin();
    bool ok = true;
    for (int i = 0; i < n && ok; i++) {
        em_tensor *nt = em_norm(ad_grads_tensor(g, i), norm_type, EM_ALL, false);
        if (!nt) {
            ok = false;
            break;
        }
        double v = em_item_f64(nt);
        if (isinf(norm_type))
            total = i == 0 ? v : (v > total || isnan(v) ? v : total);
        else if (norm_type == 0)
            total += v != 0; /* torch: the 0-"norm" of the per-tensor counts */
        else
            total += pow(v, norm_type);
    }
    if (ok && !isinf(norm_type) && norm_type != 0) total = pow(total, 1.0 / norm_type);
    double coef = max_norm / (total + 1e-6);
    for (int i = 0; i < n && ok && coef < 1; i++)
        ok = replace(g, i, em_mul_scalar(ad_grads_tensor(g, i), coef));
    em_no_grad_end();
    em_scope_end();
    return ok ? total : NAN;
}

em_status em_clip_grad_value(em_grads *g, double v)
{
    const char *fn = "em_clip_grad_value";
    if (!tn_check_ptr(fn, g, "g")) return em_last_status();
    if (!(v >= 0)) return em_error(EM_ERR_INVALID_ARG, "%s: invalid clip value %g", fn, v);
    em_status st = EM_OK;
    em_no_grad_begin();
    for (int i = 0; i < em_grads_count(g) && st == EM_OK; i++)
        if (!replace(g, i, em_clamp(ad_grads_tensor(g, i), -v, v))) st = em_last_status();
    em_no_grad_end();
    return st;
}

em_status em_grads_accumulate(em_grads *acc, const em_grads *g)
{
    const char *fn = "em_grads_accumulate";
    if (!tn_check_ptr(fn, acc, "acc") || !tn_check_ptr(fn, g, "g")) return em_last_status();
    if (acc == g) return em_grads_scale(acc, 2.0);
    em_status st = EM_OK;
    em_no_grad_begin();
    for (int i = 0; i < em_grads_count(g) && st == EM_OK; i++) {
        em_tensor *gi = ad_grads_tensor(g, i);
        int j = ad_grads_find(acc, ad_grads_leaf(g, i));
        if (j < 0) {
            st = ad_grads_append(acc, ad_grads_leaf(g, i), tn_share(gi));
            continue;
        }
        em_tensor *a = ad_grads_tensor(acc, j);
        if (!em_shape_equal(em_tensor_shape(a), em_tensor_shape(gi))) {
            st = em_error(EM_ERR_SHAPE, "%s: gradient %d has shape %s, accumulated %s", fn, i,
                          tn_dims_str(gi->shape, gi->rank), tn_dims_str(a->shape, a->rank));
            break;
        }
        if (!replace(acc, j, em_add(a, gi))) st = em_last_status();
    }
    em_no_grad_end();
    return st;
}

em_status em_grads_scale(em_grads *g, double s)
{
    if (!tn_check_ptr("em_grads_scale", g, "g")) return em_last_status();
    em_status st = EM_OK;
    em_no_grad_begin();
    for (int i = 0; i < em_grads_count(g) && st == EM_OK; i++)
        if (!replace(g, i, em_mul_scalar(ad_grads_tensor(g, i), s))) st = em_last_status();
    em_no_grad_end();
    return st;
}
