/* Conformance tests for the binary op family (placeholder until the family lands). */
#include "conf.h"

void conf_binary(void)
{
}
