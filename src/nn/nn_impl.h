/* Internal helpers shared by the nn layer's files. */
#ifndef EMBER_NN_IMPL_H
#define EMBER_NN_IMPL_H

#include <ember/nn.h>

#include "../tensor/tensor_impl.h"

/* Checks the input count of a forward call. */
bool nn_check_inputs(const char *type, int n, int want);

/* Checks that an f32 parameter of shape s fits on dev (its element count in int64_t, its bytes
 * within the device's memory and max_tensor_mb): constructors check every parameter before
 * allocating any, so an absurd size fails at once. False + an error naming fn. */
static inline bool nn_check_param(const char *fn, em_shape s, em_device dev)
{
    return tn_check_alloc(fn, EM_F32, s.dims, s.rank, dev);
}

#endif
