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

#define SHUFFLE_LOOP(ES)                                                                            \
  for (size_t i = 0; i < n; i++)                                                                   \
    for (size_t b = 0; b < (ES); b++) dst[b * n + i] = src[i * (ES) + b]
#define UNSHUFFLE_LOOP(ES)                                                                          \
  for (size_t i = 0; i < n; i++)                                                                   \
    for (size_t b = 0; b < (ES); b++) dst[i * (ES) + b] = src[b * n + i]

/* dst[b·n + i] = src[i·es + b] for i < n, b < es */
void cairn_shuffle_ref(unsigned char *restrict dst, const unsigned char *restrict src, size_t n, size_t es) {
  switch (es) {
    case 1:
      if (n) memcpy(dst, src, n);
      break;
    case 2:
      SHUFFLE_LOOP(2);
      break;
    case 4:
      SHUFFLE_LOOP(4);
      break;
    case 8:
      SHUFFLE_LOOP(8);
      break;
    default:
      SHUFFLE_LOOP(es);
  }
}

/* dst[i·es + b] = src[b·n + i] for i < n, b < es */
void cairn_unshuffle_ref(unsigned char *restrict dst, const unsigned char *restrict src, size_t n, size_t es) {
  switch (es) {
    case 1:
      if (n) memcpy(dst, src, n);
      break;
    case 2:
      UNSHUFFLE_LOOP(2);
      break;
    case 4:
      UNSHUFFLE_LOOP(4);
      break;
    case 8:
      UNSHUFFLE_LOOP(8);
      break;
    default:
      UNSHUFFLE_LOOP(es);
  }
}
