/* Gradient checks for the pool op family (placeholder until the family's rules land). */
#include "grad.h"

void grad_pool(void)
{
}
