/* Conformance tests for the nn pool sub-family (placeholder until it lands). */
#include "conf.h"

void conf_pool(void)
{
}
