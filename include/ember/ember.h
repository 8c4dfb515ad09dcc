/* Ember: the umbrella header. Include this one. */
#ifndef EMBER_H
#define EMBER_H

#include "core.h"
#include "tensor.h"
#include "autodiff.h"
#include "nn.h"
#include "optim.h"
#include "store.h"
#include "pt.h"
#include "data.h"
#include "train.h"

#endif
