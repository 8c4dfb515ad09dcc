/* Gradient checks for the linalg op family (placeholder until the family's rules land). */
#include "grad.h"

void grad_linalg(void)
{
}
