/* Private hooks of the optimizers (optim.c) for the model. Never installed. */
#ifndef CAIRN_OPTIM_IMPL_H
#define CAIRN_OPTIM_IMPL_H

#include <stdint.h>

#include "cairn/optim.h"

/* From the next cairn_optim_apply on, each chunk of var's update is also
 * written, rounded to bf16 (the f32_to_bf16 kernel), into dst (var's size
 * elements) by the thread that updated it, right after, while the chunk
 * is in its cache: the bf16 copy of the weights a bf16 model multiplies
 * with, kept fresh without a sweep of its own. dst NULL stops it; dst is
 * borrowed. Returns 0, or -1 when var is not one of o's variables. */
int cairn__optim_set_bf16_copy(cairn_optim *o, const cairn_var *var, uint16_t *dst);

#endif
