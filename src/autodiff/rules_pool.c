/* Backward rules for the pool op family (placeholder until the family's rules land). */
#include "autodiff_impl.h"

em_status ad_rule_pool(ad_ctx *c)
{
    return ad_no_rule(c);
}
