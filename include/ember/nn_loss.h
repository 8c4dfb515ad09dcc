/* Ember nn: loss functions with mean/sum/none reduction. Included by nn.h. */
#ifndef EMBER_NN_LOSS_H
#define EMBER_NN_LOSS_H

#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
