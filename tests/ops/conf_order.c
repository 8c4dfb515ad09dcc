/* Conformance tests for the order op family (placeholder until the family lands). */
#include "conf.h"

void conf_order(void)
{
}
