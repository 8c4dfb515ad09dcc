/* Gradient checks for the binary op family (placeholder until the family's rules land). */
#include "grad.h"

void grad_binary(void)
{
}
