/* Gradient checks for the norm op family (placeholder until the family's rules land). */
#include "grad.h"

void grad_norm(void)
{
}
