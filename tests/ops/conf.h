/* The op conformance suite: one function per op family, each comparing every op of the family
 * against an independent f64 reference over dtypes, layouts, broadcasting, size-0/size-1 dims
 * and NaN/Inf, plus bad-input checks. main.c runs them all and checks coverage. */
#ifndef EMBER_CONF_H
#define EMBER_CONF_H

#include "harness.h"

void conf_create(void);
void conf_view(void);
void conf_unary(void);
void conf_binary(void);
void conf_reduce(void);
void conf_linalg(void);
void conf_index(void);
void conf_combine(void);
void conf_order(void);
void conf_conv(void);
void conf_pool(void);
void conf_norm(void);
void conf_signal(void);

#endif
