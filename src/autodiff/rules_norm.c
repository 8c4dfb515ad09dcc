/* Backward rules for the norm op family (placeholder until the family's rules land). */
#include "autodiff_impl.h"

em_status ad_rule_norm(ad_ctx *c)
{
    return ad_no_rule(c);
}
