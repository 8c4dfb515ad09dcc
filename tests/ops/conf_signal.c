/* Conformance tests for the signal op family (placeholder until the family lands). */
#include "conf.h"

void conf_signal(void)
{
}
