/* Conformance tests for the combine op family (placeholder until the family lands). */
#include "conf.h"

void conf_combine(void)
{
}
