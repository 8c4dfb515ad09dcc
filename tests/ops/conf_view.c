/* Conformance tests for the view op family (placeholder until the family lands). */
#include "conf.h"

void conf_view(void)
{
}
