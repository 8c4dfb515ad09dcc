/* Conformance tests for the create op family (placeholder until the family lands). */
#include "conf.h"

void conf_create(void)
{
}
