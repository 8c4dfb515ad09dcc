/* Conformance tests for the linalg op family (placeholder until the family lands). */
#include "conf.h"

void conf_linalg(void)
{
}
