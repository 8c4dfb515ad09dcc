/* Gradient checks for the unary op family (placeholder until the family's rules land). */
#include "grad.h"

void grad_unary(void)
{
}
