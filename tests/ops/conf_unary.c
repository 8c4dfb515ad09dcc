/* Conformance tests for the unary op family (placeholder until the family lands). */
#include "conf.h"

void conf_unary(void)
{
}
