/* Scalar reference byte planes (the byte-shuffle of checkpoint codecs 2 and
 * 3, doc/checkpoint-format.md, "Codecs"): the specification the AVX2
 * kernels are tested against. n elements of es bytes: the elements are
 * (n, es) bytes, element-major; the planes (es, n) bytes, plane-major, plane
 * b holding byte b of every element: a transpose. dst and src do not
 * overlap. The loops for es = 2, 4 and 8 are the general loop with es a
 * constant, so the compiler unrolls the inner one (CAIRN_ISA=ref and
 * non-x86 builds decode checkpoints with these). */
#include "config.h"

#include <string.h>

#include "kernels/kernels.h"

/* Elements i0 <= i < n; ES a constant where the caller can give one. */
#define SHUFFLE_LOOP(ES, i0)                                                                        \
  for (size_t i = (i0); i < n; i++)                                                                \
    for (size_t b = 0; b < (ES); b++) dst[b * n + i] = src[i * (ES) + b]
#define UNSHUFFLE_LOOP(ES, i0)                                                                      \
  for (size_t i = (i0); i < n; i++)                                                                \
    for (size_t b = 0; b < (ES); b++) dst[i * (ES) + b] = src[b * n + i]

/* LOOP over every element, with es as a constant for 2, 4 and 8; es = 1 is
 * a copy (one plane). */
#define BY_ES(LOOP)                                                                                 \
  switch (es) {                                                                                    \
    case 1:                                                                                        \
      if (n) memcpy(dst, src, n);                                                                  \
      break;                                                                                       \
    case 2:                                                                                        \
      LOOP(2, 0);                                                                                  \
      break;                                                                                       \
    case 4:                                                                                        \
      LOOP(4, 0);                                                                                  \
      break;                                                                                       \
    case 8:                                                                                        \
      LOOP(8, 0);                                                                                  \
      break;                                                                                       \
    default:                                                                                       \
      LOOP(es, 0);                                                                                 \
  }

/* dst[b·n + i] = src[i·es + b] for i < n, b < es */
void cairn_shuffle_ref(unsigned char *restrict dst, const unsigned char *restrict src, size_t n, size_t es) {
  BY_ES(SHUFFLE_LOOP);
}

/* dst[i·es + b] = src[b·n + i] for i < n, b < es */
void cairn_unshuffle_ref(unsigned char *restrict dst, const unsigned char *restrict src, size_t n, size_t es) {
  BY_ES(UNSHUFFLE_LOOP);
}

void cairn__shuffle_tail(unsigned char *restrict dst, const unsigned char *restrict src, size_t n, size_t es,
                         size_t i0) {
  SHUFFLE_LOOP(es, i0);
}

void cairn__unshuffle_tail(unsigned char *restrict dst, const unsigned char *restrict src, size_t n, size_t es,
                           size_t i0) {
  UNSHUFFLE_LOOP(es, i0);
}
