/* Gradient checks for the reduce op family (placeholder until the family's rules land). */
#include "grad.h"

void grad_reduce(void)
{
}
