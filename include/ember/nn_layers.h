/* Ember nn: convolution, pooling, normalisation, embedding, resampling and activation layers.
 * Included by nn.h. */
#ifndef EMBER_NN_LAYERS_H
#define EMBER_NN_LAYERS_H

#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
