/* Conformance tests for the index op family (placeholder until the family lands). */
#include "conf.h"

void conf_index(void)
{
}
