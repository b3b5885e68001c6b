/* Private views into the MLP (model.c) for tests. Never installed. */
#ifndef CAIRN_MODEL_IMPL_H
#define CAIRN_MODEL_IMPL_H

#include <stdint.h>

#include "cairn/model.h"

/* Layer i's buffers in bf16 mode after a step: the inputs of its products
 * as the engines saw them — in (B, sizes[i]) the rounded input (X or the
 * previous layer's activation), w (sizes[i], sizes[i+1]) the rounded
 * kernel, dz (B, sizes[i+1]) the rounded gradient coming down — and its
 * fp32 z (pre-activation) and a (activation; NULL for the last layer) with
 * ab (a rounded, the next layer's in). Borrowed until the next call on m. */
typedef struct cairn__mlp_bf16_bufs {
  const uint16_t *in, *w, *dz, *ab;
  const float *z, *a;
} cairn__mlp_bf16_bufs;
/* 0, or -1 when m is not in bf16 mode, i is out of range or no step ran. */
int cairn__mlp_bf16_view(const cairn_mlp *m, int i, cairn__mlp_bf16_bufs *out);

#endif
