/* Byte planes (checkpoint codecs 2 and 3) in the AVX-512 table: the AVX2
 * kernels. The transpose moves bytes between 128-bit lanes, where 512-bit
 * registers buy nothing over two 256-bit ones, and it runs at memory
 * speed already (doc/kernels.md, "Byte planes"). */
#include "kernels/kernels.h"

void cairn_shuffle_avx512(unsigned char *restrict dst, const unsigned char *restrict src, size_t n, size_t es) {
  cairn_shuffle_avx2(dst, src, n, es);
}

void cairn_unshuffle_avx512(unsigned char *restrict dst, const unsigned char *restrict src, size_t n, size_t es) {
  cairn_unshuffle_avx2(dst, src, n, es);
}
