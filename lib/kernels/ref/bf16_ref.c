/* bfloat16 conversions, the specification (doc/bf16.md).
 *
 * bf16 is the upper half of an IEEE binary32: sign, the same 8-bit
 * exponent, 7 fraction bits. f32 -> bf16 rounds to nearest, ties to even,
 * on the integer bits (Eigen's and TensorFlow's float_to_bfloat16_rtne,
 * PyTorch's round_to_nearest_even):
 * - finite values: add 0x7FFF plus the lowest kept bit, keep the upper 16
 *   bits. Values past the largest bf16 (0x7F7F_8000 and above) round to
 *   ±inf, as IEEE rounding does;
 * - subnormals are rounded like every other number (bf16 has the same
 *   subnormal range as f32), never flushed: the AVX-512 instruction
 *   vcvtneps2bf16 flushes them, so a version built on it must fix them up;
 * - ±0 and ±inf are exact;
 * - NaN stays NaN: the upper 16 bits (sign and top payload bits) with the
 *   quiet bit (0x0040) set, so a NaN whose payload is in the low 16 bits
 *   alone does not become inf.
 * bf16 -> f32 is exact: the 16 bits shifted up. */
#include <stdint.h>
#include <string.h>

#include "kernels/kernels.h"

static uint16_t round_one(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u);
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

void cairn_f32_to_bf16_ref(const float *x, uint16_t *y, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] = round_one(x[i]);
}

void cairn_bf16_to_f32_ref(const uint16_t *x, float *y, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t u = (uint32_t)x[i] << 16;
    memcpy(&y[i], &u, sizeof u);
  }
}
