/* Backward rules for the index op family (placeholder until the family's rules land). */
#include "autodiff_impl.h"

em_status ad_rule_index(ad_ctx *c)
{
    return ad_no_rule(c);
}
