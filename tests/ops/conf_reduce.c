/* Conformance tests for the reduce op family (placeholder until the family lands). */
#include "conf.h"

void conf_reduce(void)
{
}
