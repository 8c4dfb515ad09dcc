/* Internal helpers shared by the nn layer's files. */
#ifndef EMBER_NN_IMPL_H
#define EMBER_NN_IMPL_H

#include <ember/nn.h>

#include "../tensor/tensor_impl.h"

/* Checks the input count of a forward call. */
bool nn_check_inputs(const char *type, int n, int want);

#endif
