/* bfloat16 conversions on AVX2, in integer arithmetic: the rule of
 * lib/kernels/ref/bf16_ref.c (round to nearest even, NaN made quiet,
 * subnormals rounded), 16 floats per step. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernels.h"

/* 8 floats' bits -> 8 bf16 in the 32-bit lanes (upper halves zero) */
static inline __m256i round8(__m256i u) {
  const __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF));
  const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7F800000));
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7FFF))), 16);
  const __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x0040));
  return _mm256_blendv_epi8(r, q, nan);
}

void cairn_f32_to_bf16_avx2(const float *x, uint16_t *y, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i a = round8(_mm256_loadu_si256((const __m256i *)(x + i)));
    __m256i b = round8(_mm256_loadu_si256((const __m256i *)(x + i + 8)));
    /* packus works per 128-bit lane: a0-3 b0-3 a4-7 b4-7; 0xD8 puts the
     * quarters back in order (every value fits 16 bits: no saturation) */
    __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
    _mm256_storeu_si256((__m256i *)(y + i), p);
  }
  if (i + 8 <= n) {
    __m256i a = round8(_mm256_loadu_si256((const __m256i *)(x + i)));
    __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, a), 0xD8);
    _mm_storeu_si128((__m128i *)(y + i), _mm256_castsi256_si128(p));
    i += 8;
  }
  if (i < n) cairn_f32_to_bf16_ref(x + i, y + i, n - i);
}

void cairn_bf16_to_f32_avx2(const uint16_t *x, float *y, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + i)));
    _mm256_storeu_si256((__m256i *)(y + i), _mm256_slli_epi32(w, 16));
  }
  if (i < n) cairn_bf16_to_f32_ref(x + i, y + i, n - i);
}
