/* Conformance tests for the nn norm sub-family (placeholder until it lands). */
#include "conf.h"

void conf_norm(void)
{
}
