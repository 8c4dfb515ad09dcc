/* Gradient checks for the combine op family (placeholder until the family's rules land). */
#include "grad.h"

void grad_combine(void)
{
}
