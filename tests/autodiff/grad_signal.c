/* Gradient checks for the signal op family (placeholder until the family's rules land). */
#include "grad.h"

void grad_signal(void)
{
}
