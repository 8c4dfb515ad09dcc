/* Ember nn: attention, transformer, positional encodings and recurrent layers. Included by nn.h. */
#ifndef EMBER_NN_SEQ_H
#define EMBER_NN_SEQ_H

#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
