/* bfloat16 conversions on AVX-512, in integer arithmetic: the rule of
 * lib/kernels/ref/bf16_ref.c (round to nearest even, NaN made quiet,
 * subnormals rounded), 16 floats per step with a masked tail.
 * vcvtneps2bf16 (AVX512_BF16) is not used: it flushes subnormal inputs to
 * zero, which the rule forbids, and the fix-up would cost what it saves. */
#include <immintrin.h>
#include <stdint.h>

#include "kernels/kernels.h"

/* 16 floats' bits -> 16 bf16 */
static inline __m256i round16(__m512i u) {
  const __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF));
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(abs, _mm512_set1_epi32(0x7F800000));
  const __m512i hi = _mm512_srli_epi32(u, 16);
  const __m512i odd = _mm512_and_si512(hi, _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))), 16);
  r = _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x0040));
  return _mm512_cvtepi32_epi16(r); /* every lane fits 16 bits: a plain truncating narrow */
}

void cairn_f32_to_bf16_avx512(const float *x, uint16_t *y, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256((__m256i *)(void *)(y + i), round16(_mm512_loadu_si512((const void *)(x + i))));
  if (i < n) {
    const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
    _mm256_mask_storeu_epi16(y + i, m, round16(_mm512_maskz_loadu_epi32(m, x + i)));
  }
}

void cairn_bf16_to_f32_avx512(const uint16_t *x, float *y, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(x + i)));
    _mm512_storeu_si512((void *)(y + i), _mm512_slli_epi32(w, 16));
  }
  if (i < n) {
    const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
    __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, x + i));
    _mm512_mask_storeu_epi32(y + i, m, _mm512_slli_epi32(w, 16));
  }
}
