/* Conformance tests for the nn conv sub-family (placeholder until it lands). */
#include "conf.h"

void conf_conv(void)
{
}
