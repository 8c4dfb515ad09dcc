/* Gradient checks for the conv op family (placeholder until the family's rules land). */
#include "grad.h"

void grad_conv(void)
{
}
